"""Partially pooled (Bayesian) Dawid-Skene for crowds of any K: EM with a learned population of confusion rows.

Model: clean labels ``Y_i ~ Categorical(pi)``, ``pi ~ Dirichlet(prevalence_prior)``; annotator ``j``'s row
``C[j, y, :] ~ Dirichlet(s_y m_y)`` around the population mean row ``m_y`` with concentration ``s_y``; responses
``A_r ~ Categorical(C[j_r, Y_{i_r}, :])``. Maximum-likelihood Dawid-Skene fits ``K (K - 1)`` free cells per
annotator from a handful of labels and over-fits; the population shrinks each annotator towards the crowd, as
much as the crowd's own spread ``s_y`` says (IBCC, Kim & Ghahramani 2012; EBCC, Li, Rubinstein & Cohn 2019).

One iteration (empirical Bayes inside the EM; the formulas of :mod:`noisycal_bayes.core.population`, run in JAX
float64 as one compiled ``lax.while_loop`` on the K-class EM's coded sparse steps, :func:`_pooled_loop`):

1. expected counts ``n[j, y, a]`` from the posteriors ``T`` (item weights ``w`` multiply them);
2. per class ``y``, ``(m_y, s_y)`` by type-II maximum likelihood of the Dirichlet-multinomial on ``n[:, y, :]``
   (Minka's fixed point, warm-started at the previous iteration's value);
3. ``C[j, y, :]`` = posterior mean ``(n[j, y, :] + s_y m_y) / (N_jy + s_y)`` (every annotator keeps a usable row,
   the population mean where it has no label of class ``y``); ``pi`` the posterior mean under its Dirichlet;
4. E-step as in :func:`~noisycal_bayes.inference.fit_em_multiclass` (gold items fixed at their label).

Acceleration: SQUAREM cycles after 100 plain iterations on large crowds (``accelerate``; :func:`_pooled_squarem`).
Options (issue 34, outlying annotators): ``objective="sampled_labels"`` fits step 2 to clean-label draws instead of
the expected counts, ``spread`` gives every annotator its own concentration factor ``lambda_j``, and ``components``
makes the population a mixture of annotator types (typical, spammer, adversary) (:func:`fit_em_population`).

The start is the majority vote (or ``init``'s E-step); iterations stop when no posterior moves by more than
``tol``. Orientation is hard, at the crowd's level: the population mean confusion (rows ``m_y``) must have its row
maxima on the diagonal; otherwise the latent classes are relabelled (a linear assignment), and if no relabelling
gives that, an :class:`~noisycal_bayes.warnings.IdentifiabilityWarning`. For K = 2 this is the binary crowd rule
read on the population mean (``m_1[1] > 1/2 > m_0[1]``).
"""
from __future__ import annotations

import warnings as _warnings

import numpy as np

from .._validation import check_em_settings, check_positive_int
from ..core.likelihood import logsumexp_rows
from ..core import x64
from ..core.population import ALPHA_MIN, S_MAX, expected_counts
from ..core.starts import diagonally_dominant
from ..models.inputs import class_arrays, class_log_joint_items
from ..models.result import MulticlassEMFit
from ..warnings import ConvergenceWarning, IdentifiabilityWarning

__all__ = ["fit_em_population"]

#: The population fit's objectives (:func:`fit_em_population`, ``objective``).
OBJECTIVES = ("soft_counts", "sampled_labels")

#: Iterations of the first stage of ``objective="sampled_labels"`` (the population fitted to clean-label draws; its
#: mean over the second half is then kept fixed while the EM converges).
SAMPLED_ITER = 100

#: Newton steps on the per-annotator log concentration factors per EM iteration (warm-started).
LAMBDA_STEPS = 4

#: ``accelerate="auto"`` runs SQUAREM cycles (after 100 plain iterations) on crowds of at least this many responses:
#: set above every crowd of today's sizes, because the cycles saved less than they cost ``evaluate`` downstream
#: (measured: docs/crowds.md, *Partially pooled Dawid-Skene*; CHANGELOG). ``accelerate=True`` asks for them.
ACCELERATE_MIN_RESPONSES = 1_000_000_000

#: Minka fixed-point steps per EM iteration (warm-started: a generalised EM step on the population).
DM_STEPS = 20
#: Minka steps per EM step inside the SQUAREM cycles (:func:`_pooled_squarem`). The fit does not depend on it: at a
#: fixed point of the map the warm-started population no longer moves, i.e. it is a fixed point of Minka's iteration
#: for the counts (the type-II maximum), whatever the number of steps; it sets the cost of a map and the path. On
#: adult 1 step against 20: 143 iterations against 152, CPU 1.7 against 2.5 s, the plain fit's fixed point to 5.5e-7.
SQUAREM_DM_STEPS = 1

#: Floor of a mixture component's concentrations, per class: ``s_cy >= MIXTURE_S_MIN * K``. Without it a component
#: that holds little weight dies: near ``s = 0`` the weighted fixed point multiplies ``s`` by about
#: ``sum_rows r (non-zero cells) / (sum_rows r + power)``, below 1 when the component's weighted rows are fewer than
#: ``power / (cells per row - 1)``, so ``s`` runs to 0 and its marginal excludes every annotator for good (seen on
#: the first simulated crowd: the adversary component at ``s`` < 0.01 after five iterations).
MIXTURE_S_MIN = 1.0

#: Numbers of annotator types of the mixture population (``components`` of :func:`fit_em_population`).
COMPONENTS = (1, 2, 3)


def _type_log_joint(n, alpha, log_weight):
    """Log joint of each annotator's counts and type in the mixture population (``components``):
    ``log w_c + sum_y log DirMult(n[..., j, y, :] | alpha[c, y, :])`` without the multinomial coefficients (they do
    not depend on the type, so they cancel in the responsibilities), in JAX. ``n`` (..., J, K, K) counts (rows: the
    clean class ``y``), ``alpha`` (M, K, K) the components' Dirichlet parameters, ``log_weight`` (M,). A row without
    counts contributes 0. Returns (..., J, M); the responsibilities are its softmax over the last axis."""
    import jax.numpy as jnp
    from jax.scipy.special import gammaln

    n = n[..., None, :, :]                                  # (..., J, 1, K, K)
    N = n.sum(axis=-1)                                      # (..., J, 1, K)
    s = alpha.sum(axis=-1)                                  # (M, K)
    t = gammaln(s) - gammaln(N + s) + jnp.sum(gammaln(n + alpha) - gammaln(alpha), axis=-1)
    return log_weight + t.sum(axis=-1)


def _mixture_start(K: int, M: int):
    """Start of the mixture population's components (then learned): ``typical`` (diagonal 0.7), ``spammer`` (every
    row uniform), ``adversary`` (diagonal 0.1), the rest of a row split evenly, each row with concentration ``2 K``;
    weights 0.8 / 0.1 / 0.1 (M = 3) or 0.9 / 0.1 (M = 2, typical and spammer). Returns ``(alpha (M, K, K), w
    (M,))``."""
    rows = []
    for d in (0.7, 1.0 / K, 0.1)[:M]:
        m = np.full((K, K), (1.0 - d) / (K - 1))
        np.fill_diagonal(m, d)
        rows.append(2.0 * K * m)
    w = np.array({1: [1.0], 2: [0.9, 0.1], 3: [0.8, 0.1, 0.1]}[M])
    return np.stack(rows), w


def _posterior(x, C, pi, group):
    lj = class_log_joint_items(x, group, C, pi[None])
    ll = logsumexp_rows(lj)
    return np.exp(lj - ll[:, None]), ll


def _vote(x):
    """Majority-vote posteriors (label frequencies per item; uniform for an unlabelled item; gold one-hot)."""
    K = x.n_classes
    T = np.stack([np.bincount(x.item, weights=(x.label == k).astype(np.float64), minlength=x.n_items)
                  for k in range(K)], axis=1) + 1e-9
    T /= T.sum(axis=1, keepdims=True)
    if x.gold is not None:
        g = x.gold >= 0
        T[g] = np.eye(K)[x.gold[g]]
    return T


def _digamma(x):
    """``digamma(x)`` for ``x > 0`` in JAX, about 4x cheaper than ``jax.scipy.special.digamma`` on CPU (no reflection
    for negative arguments, no Lanczos sum): the recurrence ``psi(x) = psi(x + 10) - sum_{k<10} 1 / (x + k)`` (the
    terms summed in pairs, ``(2u + 1) / (u (u + 1))`` for ``u = x + k``, k even) and the asymptotic series at ``y = x +
    10 >= 10``, ``log y - 1 / (2 y) - sum_{k=1}^{7} B_2k / (2k y^2k)`` (Abramowitz & Stegun 6.3.18; the first omitted
    term is below 5e-17 there). Agrees with ``scipy.special.psi`` to a few units in the last place away from its
    root, as JAX's own does. The Minka steps of :func:`_dm_fit` evaluate it tens of thousands of times per EM
    iteration (docs/performance.md, *K classes: sparse EM on the five crowds*)."""
    import jax.numpy as jnp

    s = 0.0
    for k in range(0, 10, 2):
        u = x + k
        s = s + (2.0 * u + 1.0) / (u * (u + 1.0))
    y = x + 10.0
    r = 1.0 / y
    r2 = r * r
    tail = r2 * (1 / 12 - r2 * (1 / 120 - r2 * (1 / 252 - r2 * (1 / 240 - r2 * (1 / 132 - r2 * (691 / 32760
                                                                                             - r2 / 12))))))
    return jnp.log(y) - 0.5 * r - tail - s


def _dm_fit(n, alpha, has_alpha, power, *, steps: int, tol: float = 1e-7, row_weight: float = 1.0, row_scale=None,
            row_weights=None, cells=None):
    """:func:`~noisycal_bayes.core.population.fit_dirichlet_multinomial` for every class at once, in JAX: ``n``
    (K_y, J, K) the expected counts (rows without counts drop out), ``alpha`` (K_y, K) the warm start (used where
    ``has_alpha``). The same fixed point, bounds and per-class stopping (``den <= 0``: stop before the step;
    relative change ``< tol``: stop after it). ``row_weight`` multiplies every row's term of the objective (``1 /
    M`` for the ``M`` stacked label draws of ``objective="sampled_labels"``: the mean over draws, against which the
    hyperprior keeps its weight). ``row_scale`` (J,), optional: row ``j``'s Dirichlet is ``lambda_j alpha`` (the
    per-annotator concentrations of ``spread``); Minka's fixed point for that objective multiplies each row's digamma
    differences by ``lambda_j`` at ``lambda_j alpha``. ``row_weights`` (J,), optional: row ``j``'s term of the
    objective is weighted by ``row_weights[j]`` (times ``row_weight``; the responsibilities of one component of
    ``components``), so the fixed point is the weighted one (numerator and denominator sums weighted). ``cells``,
    optional (without ``row_scale`` and ``row_weights``): ``(row (P,), label (P,))`` the cells of ``n`` that can be
    non-zero (:func:`_count_cells`; row ``J`` pads): the others add exactly 0 to the sums and are skipped. The digamma
    is :func:`_digamma`. Returns ``(m (K_y, K), s (K_y,))``."""
    import jax
    import jax.numpy as jnp

    digamma = _digamma

    K = n.shape[-1]
    N = n.sum(axis=-1)                                            # (K_y, J)
    valid = N > 0
    tot = jnp.sum(jnp.where(valid[..., None], n, 0.0), axis=1) + 1e-3
    a = jnp.where(has_alpha, jnp.clip(alpha, ALPHA_MIN, S_MAX), K * tot / tot.sum(axis=-1, keepdims=True))
    if cells is not None:   # the (row, label) cells that can hold counts; the padding row J has none
        cj, ca = cells
        n_c = jnp.concatenate([n, jnp.zeros_like(n[:, :1])], axis=1)[:, cj, ca]                # (K_y, P)
        valid_c = jnp.concatenate([valid, jnp.zeros_like(valid[:, :1])], axis=1)[:, cj]
        onehot = (ca[:, None] == jnp.arange(K)[None, :]).astype(n.dtype)                    # (P, K)

    def body(c):
        k, a, done = c
        a0 = a.sum(axis=-1)
        if row_weights is not None:
            wv = row_weight * row_weights
            den = jnp.sum(jnp.where(valid, wv * (digamma(N + a0[:, None]) - digamma(a0[:, None])), 0.0),
                          axis=1) + power / a0
            num = jnp.sum(jnp.where(valid[..., None], wv[None, :, None] * (digamma(n + a[:, None, :])
                                                                          - digamma(a[:, None, :])), 0.0), axis=1)
        elif row_scale is None:
            # digamma at the population computed once per step, (K_y, K + 1), and at the counts only in the cells
            # that can hold any (the others add exactly 0)
            dg = jax.lax.optimization_barrier(digamma(jnp.concatenate([a, a0[:, None]], axis=1)))
            dg_a, dg_a0 = dg[:, :K], dg[:, K]
            den = row_weight * jnp.sum(jnp.where(valid, digamma(N + a0[:, None]) - dg_a0[:, None], 0.0),
                                       axis=1) + power / a0
            if cells is None:
                num = row_weight * jnp.sum(jnp.where(valid[..., None], digamma(n + a[:, None, :]) - dg_a[:, None, :],
                                                     0.0), axis=1)
            else:
                num = row_weight * (jnp.where(valid_c, digamma(n_c + a[:, ca]) - dg_a[:, ca], 0.0) @ onehot)
        else:
            la0, la = row_scale[None, :] * a0[:, None], row_scale[None, :, None] * a[:, None, :]
            den = row_weight * jnp.sum(jnp.where(valid, row_scale * (digamma(N + la0) - digamma(la0)), 0.0),
                                       axis=1) + power / a0
            num = row_weight * jnp.sum(jnp.where(valid[..., None], row_scale[None, :, None]
                                                 * (digamma(n + la) - digamma(la)), 0.0), axis=1)
        halt = den <= 0   # every row has one label: the concentration is not identified (stop before the step)
        new = jnp.clip(a * num / jnp.where(halt, 1.0, den)[:, None], ALPHA_MIN, S_MAX)
        tot_new = new.sum(axis=-1, keepdims=True)
        new = jnp.where(tot_new > S_MAX, new * (S_MAX / tot_new), new)
        small = jnp.max(jnp.abs(new - a) / a, axis=-1) < tol
        move = ~done & ~halt
        return k + 1, jnp.where(move[:, None], new, a), done | halt | small

    _, a, _ = jax.lax.while_loop(lambda c: (c[0] < steps) & ~jnp.all(c[2]), body,
                                 (jnp.int32(0), a, ~valid.any(axis=1)))
    empty = ~valid.any(axis=1)   # no counts at all: the uniform row with s = K
    a = jnp.where(empty[:, None], 1.0, a)
    s = a.sum(axis=-1)
    return a / s[:, None], s


def _scale_fit(n, alpha, log_scale, spread, *, row_weight: float, steps: int = LAMBDA_STEPS):
    """Per-annotator log concentration factors ``l_j = log lambda_j`` (``spread`` of :func:`fit_em_population`):
    the MAP of ``sum_rows row_weight log DirMult(n[d, j, y] | lambda_j alpha_y) - l_j^2 / (2 spread^2)`` by damped
    Newton steps in ``l_j`` (curvature floored at the prior's ``1 / spread^2``, steps clipped to +-1), warm-started at
    ``log_scale``. ``n`` (M, J, K, K) counts (M draws, or M = 1 for the expected counts), ``alpha`` (K, K). Rows
    without counts contribute nothing (their terms cancel)."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import digamma, polygamma

    s = alpha.sum(axis=1)                                                           # (K,)
    N = n.sum(axis=-1)                                                              # (M, J, K)
    prec = 1.0 / spread ** 2

    def step(_, l):
        lam = jnp.exp(l)[None, :, None]                                             # (1, J, 1)
        ls, la = lam * s[None, None, :], lam[..., None] * alpha[None, None]         # (1, J, K), (1, J, K, K)
        g = (s * (digamma(ls) - digamma(N + ls))).sum(axis=(0, 2)) \
            + (alpha * (digamma(n + la) - digamma(la))).sum(axis=(0, 2, 3))
        h = (s ** 2 * (polygamma(1, ls) - polygamma(1, N + ls))).sum(axis=(0, 2)) \
            + (alpha ** 2 * (polygamma(1, n + la) - polygamma(1, la))).sum(axis=(0, 2, 3))
        lam1 = jnp.exp(l)
        grad = row_weight * lam1 * g - prec * l
        curv = row_weight * (lam1 * g + lam1 ** 2 * h) - prec
        return l + jnp.clip(grad / jnp.maximum(-curv, prec), -1.0, 1.0)

    return jax.lax.fori_loop(0, steps, step, log_scale)


def _count_cells(x):
    """The (annotator, label) cells of the expected counts that can be non-zero, those with at least one response:
    ``(annotator (P,), label (P,))`` int32, padded up to :func:`~noisycal_bayes.data.compress.bucket_size` ``(P)``
    with annotator ``J`` (a row without counts). Every other cell holds 0 in every row ``y`` whatever the posteriors,
    so :func:`_dm_fit` (``cells``) leaves it out of Minka's sums, to which it adds exactly 0."""
    from ..data.compress import bucket_size

    K = x.n_classes
    pairs = np.unique(x.annotator.astype(np.int64) * K + x.label)
    pad = bucket_size(pairs.size) - pairs.size
    return (np.concatenate([pairs // K, np.full(pad, x.n_annotators)]).astype(np.int32),
            np.concatenate([pairs % K, np.zeros(pad, np.int64)]).astype(np.int32))


def _pooled_loop(T0, item, code, padded, by_code, item_group, gold, item_weight, real, cells, tol, prevalence_prior,
                 power, alpha_fixed, l_fixed, uniforms, spread, avg_from, alpha_mix, w_mix, r_fixed, *,
                 n_annotators: int, max_iter: int, fixed: bool = False, sampled: bool = False,
                 per_annotator: bool = False, n_components: int = 1):
    """The EM iterations of :func:`fit_em_population` (module docstring, steps 1-4) in one ``lax.while_loop``, on
    the coded sparse responses of the K-class EM (:func:`~noisycal_bayes.inference._em_loop.padded_class_responses`;
    padded items have weight 0 and ``real`` False, and do not enter the stopping rule); ``cells`` the count cells
    with responses (:func:`_count_cells`) for Minka's sums. ``fixed``: step 2 is skipped
    and the population is ``alpha_fixed`` (K, K) throughout. ``sampled``: step 2 fits the population to the counts of
    ``M`` clean-label draws ``Y_i = #{k: u_im > sum_{c <= k} T_i(c)}`` from the posteriors, ``uniforms`` (n_pad, M)
    the fixed ``u`` (common random numbers: the same draws' map from one iteration to the next), every draw's rows
    weighted ``1 / M`` (``objective="sampled_labels"`` of :func:`fit_em_population`). ``per_annotator``: annotator
    ``j``'s rows are ``Dirichlet(lambda_j s_y m_y)``, the factors by :func:`_scale_fit` after the population (prior
    ``log lambda_j ~ N(0, spread^2)``), and the population's fixed point weighs each row at its ``lambda_j``.
    ``n_components`` > 1 (``components``): the mixture population, ``alpha_mix`` (M, K, K) its components (the
    start, or fixed with ``fixed``), ``w_mix`` (M,) their weights, ``r_fixed`` (J, M) the responsibilities kept with
    ``fixed``. Each iteration: per draw ``d`` (or the expected counts), the type responsibilities ``r_djc`` from
    :func:`_type_log_joint` at the previous components; each component by the weighted fixed point
    (:func:`_dm_fit`, rows weighted ``r_djc / D`` for ``D`` draws; concentrations floored at ``MIXTURE_S_MIN * K``);
    ``r_jc`` the mean over draws; weights ``w_c = (sum_j r_jc + 1) / (J_labelled + M)`` (a Dirichlet(2) prior keeps
    a component alive); annotator ``j``'s row the responsibility-weighted mixture of the components' posterior means
    ``(n_jy + alpha_cy) / (N_jy + s_cy)``; ``m, s`` those of the typical component (the largest weight).
    Returns ``(C, pi, m, s, T, n_iter, converged, delta, trace, lambda, mean alpha, mean lambda, alpha_mix, w_mix,
    r, mean alpha_mix, mean w_mix, mean r)`` (the means over the iterations from ``avg_from``)."""
    import jax
    import jax.numpy as jnp

    from ..core.sparse import CodedResponses, coded_class_counts, coded_class_e_step

    coded = CodedResponses(item, code, padded)
    n, K = T0.shape
    J = n_annotators
    M = n_components

    def draws(T):   # counts of D clean-label draws Y ~ T at the fixed uniforms: (D, J, y, a)
        D = uniforms.shape[1]
        draw = jnp.sum(uniforms[:, None, :] > jnp.cumsum(T, axis=1)[:, :, None], axis=1)    # (n, D)
        onehot = (jnp.minimum(draw, K - 1)[:, None, :] == jnp.arange(K)[None, :, None]).astype(T.dtype)
        return D, coded_class_counts(coded, J, onehot, item_weight, by_code)[0]

    def body(c):
        it, T, alpha, l, _, _, _, _, _, tr, acc_a, acc_l, a_mix, w, r, acc_am, acc_w, acc_r = c
        counts = coded_class_counts(coded, J, T[:, :, None], item_weight, by_code)[0][0]          # (J, y, a)
        if M > 1:
            if fixed:
                a_mix, w, r = alpha_mix, w_mix, r_fixed
            else:
                D, pop = draws(T) if sampled else (1, counts[None])
                rd = jax.nn.softmax(_type_log_joint(pop, a_mix, jnp.log(w)), axis=-1)            # (D, J, M)
                flat = jnp.swapaxes(pop.reshape(D * J, K, K), 0, 1)
                fits = [_dm_fit(flat, a_mix[q], True, power, steps=DM_STEPS, row_weight=1.0 / D,
                                row_weights=rd[..., q].reshape(D * J)) for q in range(M)]
                a_mix = jnp.stack([jnp.maximum(sq, MIXTURE_S_MIN * K)[:, None] * mq for mq, sq in fits])
                r = rd.mean(axis=0)
                has = (counts.sum(axis=(1, 2)) > 0).astype(T.dtype)
                w = (has @ r + 1.0) / (has.sum() + M)
            typ = jnp.argmax(w)
            alpha_new = a_mix[typ]
            s = alpha_new.sum(axis=1)
            m = alpha_new / s[:, None]
            post = counts[None] + a_mix[:, None]                                                 # (M, J, y, a)
            C = jnp.einsum("jc,cjya->jya", r, post / post.sum(axis=3, keepdims=True))
        elif fixed:
            s = alpha_fixed.sum(axis=1)
            m = alpha_fixed / s[:, None]
            alpha_new, l = alpha_fixed, l_fixed
        else:
            D, pop = draws(T) if sampled else (1, counts[None])   # the counts the population is fitted to
            scale = jnp.tile(jnp.exp(l), D) if per_annotator else None
            m, s = _dm_fit(jnp.swapaxes(pop.reshape(D * J, K, K), 0, 1), alpha, it > 0, power, steps=DM_STEPS,
                           row_weight=1.0 / D, row_scale=scale, cells=None if sampled else cells)
            alpha_new = s[:, None] * m
            if per_annotator:
                l = _scale_fit(pop, alpha_new, l, spread, row_weight=1.0 / D)
        take = (it >= avg_from).astype(T.dtype)
        acc_a, acc_l = acc_a + take * alpha_new, acc_l + take * l
        acc_am, acc_w, acc_r = acc_am + take * a_mix, acc_w + take * w, acc_r + take * r
        if M == 1:
            num = counts + jnp.exp(l)[:, None, None] * alpha_new[None]
            C = num / num.sum(axis=2, keepdims=True)
        pi = item_weight @ T + prevalence_prior
        pi = pi / pi.sum()
        ll, T_new = coded_class_e_step(coded, item_group, C[None], pi[None, None, :], gold, item_weight)
        delta = jnp.max(jnp.where(real[:, None], jnp.abs(T_new[:, :, 0] - T), 0.0))
        return (it + 1, T_new[:, :, 0], alpha_new, l, C, pi, m, s, delta, tr.at[it].set(ll[0]), acc_a, acc_l,
                a_mix, w, r, acc_am, acc_w, acc_r)

    init = (jnp.int32(0), T0, jnp.ones((K, K)), l_fixed, jnp.zeros((J, K, K)), jnp.zeros(K), jnp.zeros((K, K)),
            jnp.zeros(K), jnp.inf, jnp.full(max_iter, jnp.nan), jnp.zeros((K, K)), jnp.zeros(J),
            alpha_mix, w_mix, r_fixed, jnp.zeros_like(alpha_mix), jnp.zeros_like(w_mix), jnp.zeros_like(r_fixed))
    it, T, _, l, C, pi, m, s, delta, tr, acc_a, acc_l, a_mix, w, r, acc_am, acc_w, acc_r = jax.lax.while_loop(
        lambda c: (c[0] < max_iter) & ~(c[8] < tol), body, init)
    n_avg = jnp.maximum(it - avg_from, 1).astype(T.dtype)
    return (C, pi, m, s, T, it, delta < tol, delta, tr, l, acc_a / n_avg, acc_l / n_avg, a_mix, w, r,
            acc_am / n_avg, acc_w / n_avg, acc_r / n_avg)


#: Bounds of the per-annotator log concentration factors ``l_j`` in a SQUAREM extrapolation (``spread``;
#: :func:`_pooled_squarem`): ``lambda_j`` between ``e^-30`` and ``e^30``, far outside what the prior allows.
L_BOUND = 30.0


def _pooled_squarem(T0, item, code, padded, by_code, item_group, gold, item_weight, real, cells, tol,
                    prevalence_prior, power, alpha_fixed, l_fixed, spread, *, n_annotators: int, max_iter: int,
                    fixed: bool = False, per_annotator: bool = False, warm: bool = False):
    """The iterations of :func:`_pooled_loop` (``objective="soft_counts"``, or a fixed population) as SQUAREM cycles
    of :func:`~noisycal_bayes.inference._em_loop.em_loop` (Varadhan & Roland 2008: its step length, clipping,
    safeguard, fallback and stopping rule).

    The map is made a function of its argument by carrying its state: ``theta = (T, log alpha, l)``, the posteriors
    (n_pad, K; padded items 0), the population's log ``alpha`` (K, K; the warm start of the Minka steps) and the
    per-annotator log factors ``l`` (J; ``l_fixed`` without ``spread``). One map ``F``: the counts of ``T``; the
    population by :data:`SQUAREM_DM_STEPS` Minka steps from ``alpha`` (and the factors by :func:`_scale_fit`), or
    the fixed one; ``C``, ``pi`` their posterior means; the E-step. An extrapolation is clipped into ``T`` in [0, 1],
    ``log alpha`` in ``[log ALPHA_MIN, log S_MAX]`` and ``l`` in ``[-L_BOUND, L_BOUND]`` before its stabilising map.

    Merit (the safeguard's objective and the trace): ``-||F(theta) - theta||^2``, the fixed-point residual, whose
    zero is the fit, so the safeguard keeps a cycle whose end point is nearer a fixed point than its start. Not a
    log density: the map is an empirical-Bayes iteration (the population fitted to the expected counts, the
    E-step at the rows' posterior mean) that ascends no one objective; on adult the collapsed evidence bound
    (``sum log DirMult(n_jy | alpha_y)`` plus the labels' and hyperpriors' terms) and the log posterior
    (log-likelihood plus the rows' and hyperpriors' log kernels) both fell over 390 of ~400 cycles near the fixed
    point, so a safeguard on either rejected nearly every extrapolation (docs/performance.md). The stopping rule,
    :func:`~noisycal_bayes.inference._em_loop.small_change` on a plain step, is the plain loop's (no posterior moved
    by more than ``tol``) on the whole state (and the log population cells and log factors too).

    ``theta_0``: with ``warm``, ``(T0, log alpha_fixed, l_fixed)`` (the state where the plain loop stopped); else the
    plain loop's first iteration from ``T0`` (its population fitted from scratch), so plain steps would repeat the
    plain loop's iterates. Returns ``(C, pi, m, s, T, n_iter, converged, delta, trace, lambda, loglik)``
    as :func:`_pooled_loop` (``n_iter`` the cycles, plus the first iteration without ``warm``), ``C, pi,
    T`` one map after the loop's last ``theta`` (``T`` the E-step at ``C, pi``, ``loglik`` the log-likelihood
    there), ``trace`` the merit at the start and after each iteration (max_iter + 1, NaN after the last)."""
    import jax.numpy as jnp

    from ..core.sparse import CodedResponses, coded_class_counts, coded_class_e_step
    from ..core.starts import CONVERGED
    from ._em_loop import em_loop

    coded = CodedResponses(item, code, padded)
    n, K = T0.shape
    J = n_annotators
    nt, na = n * K, K * K
    keep = real[:, None]

    def split(theta):
        return theta[:nt].reshape(n, K), jnp.exp(theta[nt:nt + na].reshape(K, K)), theta[nt + na:]

    def counts_of(T):
        return coded_class_counts(coded, J, T[:, :, None], item_weight, by_code)[0][0]          # (J, y, a)

    def step(T, alpha, l, warm=True):   # steps 1-4 of the module docstring
        counts = counts_of(T)
        if fixed:
            alpha_new, l_new = alpha_fixed, l
        else:
            m, s = _dm_fit(jnp.swapaxes(counts, 0, 1), alpha, warm, power, steps=SQUAREM_DM_STEPS if warm else DM_STEPS,
                           row_scale=jnp.exp(l) if per_annotator else None, cells=cells)
            alpha_new = s[:, None] * m
            l_new = _scale_fit(counts[None], alpha_new, l, spread, row_weight=1.0) if per_annotator else l
        num = counts + jnp.exp(l_new)[:, None, None] * alpha_new[None]
        C = num / num.sum(axis=2, keepdims=True)
        pi = item_weight @ T + prevalence_prior
        pi = pi / pi.sum()
        ll, T_new = coded_class_e_step(coded, item_group, C[None], pi[None, None, :], gold, item_weight)
        return C, pi, alpha_new, l_new, ll[0], jnp.where(keep, T_new[:, :, 0], 0.0)

    def evaluate(theta):   # the merit at theta and the map's image (em_map is the identity on it)
        C, pi, alpha_new, l_new, ll, T_new = step(*split(theta))
        new = jnp.concatenate([T_new.ravel(), jnp.log(alpha_new).ravel(), l_new])
        return -jnp.sum((new - theta) ** 2), new

    # theta0: the plain loop's first iteration (the population fitted from scratch), so that the iterates are its own
    if warm:
        theta0 = jnp.concatenate([jnp.where(keep, T0, 0.0).ravel(), jnp.log(alpha_fixed).ravel(), l_fixed])
    else:
        _, _, alpha1, l1, _, T1 = step(T0, alpha_fixed, l_fixed, warm=False)
        theta0 = jnp.concatenate([T1.ravel(), jnp.log(alpha1).ravel(), l1])
    lo = jnp.concatenate([jnp.zeros(nt), jnp.full(na, np.log(ALPHA_MIN)), jnp.full(J, -L_BOUND)])
    hi = jnp.concatenate([jnp.ones(nt), jnp.full(na, np.log(S_MAX)), jnp.full(J, L_BOUND)])
    theta, _, n_it, status, trace = em_loop(theta0, evaluate, lambda post: post, tol, max_iter=max_iter,
                                            accelerate=True, bounds=(lo, hi))
    T, alpha, l = split(theta)
    C, pi, alpha_new, l_new, ll, T_new = step(T, alpha, l)
    s = alpha_new.sum(axis=1)
    delta = jnp.max(jnp.where(keep, jnp.abs(T_new - T), 0.0))
    return (C, pi, alpha_new / s[:, None], s, T_new, n_it + (0 if warm else 1), status == CONVERGED, delta, trace,
            l_new, ll)


def _squarem_after(plain, T0, args, tol, hyper, population, l0, spread, *, n_annotators: int, max_iter: int,
                   fixed: bool, per_annotator: bool):
    """:func:`_pooled_squarem` from where the plain loop's first iterations (``plain``, :func:`_pooled_loop`'s output;
    None: from ``T0``) stopped, for the rest of ``max_iter``. Returns :func:`_pooled_loop`'s first ten outputs:
    ``n_iter`` the plain iterations plus the cycles, the trace the plain iterations' log-likelihoods and then the
    final one (the cycles' merit is not a log-likelihood)."""
    from ._em_loop import _call

    first = 0 if plain is None else int(plain[5])
    if plain is None:
        state = (T0, population, l0)
    else:   # the plain loop's last state: its posteriors, population alpha = s m (or the fixed one), factors
        alpha = population if fixed else np.asarray(plain[3])[:, None] * np.asarray(plain[2])
        state = (np.asarray(plain[4]), alpha, np.asarray(plain[9]))
    out = _call(_pooled_squarem, state[:1] + args + (np.float64(tol),) + hyper + state[1:] + (spread,),
                n_annotators=n_annotators, max_iter=max_iter - first, fixed=fixed, per_annotator=per_annotator,
                warm=plain is not None)
    head = np.zeros(0) if plain is None else np.asarray(plain[8])[:first]
    return out[:5] + (first + int(out[5]),) + out[6:8] + (np.append(head, float(out[10])),) + out[9:10]


def _resolve_accelerate(accelerate, sampled: bool, warm: bool, n_responses: int, func: str):
    """``(accelerated, plain_steps)`` for :func:`fit_em_population`'s ``accelerate``: ``"auto"`` is the K-class
    sparse EM's rule (:func:`~noisycal_bayes.inference.fit_em_multiclass`: SQUAREM after
    :data:`~noisycal_bayes.inference.em.PLAIN_STEPS` plain iterations, plain for a warm refit ``init``) on crowds of
    at least :data:`ACCELERATE_MIN_RESPONSES` responses."""
    if isinstance(accelerate, str) and accelerate == "auto":
        from .em import PLAIN_STEPS

        return not sampled and not warm and n_responses >= ACCELERATE_MIN_RESPONSES, PLAIN_STEPS
    if not isinstance(accelerate, (bool, np.bool_)):
        raise ValueError(f"{func}: `accelerate` must be 'auto', True or False; got {accelerate!r}.")
    if accelerate and sampled:
        raise ValueError(f"{func}: `accelerate=True` cannot be combined with objective='sampled_labels' (its "
                         "population is fitted to Monte Carlo label draws, a map without an objective to safeguard).")
    return bool(accelerate), 0


def _orient_population(C, pi, m, s):
    """Relabel the latent classes so that the population mean confusion is diagonally dominant."""
    if diagonally_dominant(m[None]):
        return C, pi, m, s, None, True
    from scipy.optimize import linear_sum_assignment

    _, sigma = linear_sum_assignment(-m)
    if np.array_equal(sigma, np.arange(m.shape[0])):
        return C, pi, m, s, None, False
    inv = np.argsort(sigma)
    m2 = m[inv]
    return C[:, inv, :], pi[inv], m2, s[inv], tuple(int(v) for v in sigma), bool(diagonally_dominant(m2[None]))


def fit_em_population(data, *, max_iter: int = 1000, tol: float = 1e-6, prevalence_prior: float = 1.0,
                      concentration_power: float = 2.5, weights=None, init=None, population=None,
                      objective: str = "soft_counts", n_draws: int = 16, spread=None,
                      accelerate="auto", components: int = 1) -> MulticlassEMFit:
    """Partially pooled Dawid-Skene by EM with empirical-Bayes population rows (module docstring).

    Parameters
    ----------
    data : MulticlassAnnotationSet or MulticlassSimulation
        As in :func:`~noisycal_bayes.inference.fit_em_multiclass`; K = 2 included. Gold labels (``data.gold``) fix
        their items' clean labels; repeated labels of one annotator on one item are independent responses.
    max_iter, tol : int, float
        Iteration cap; stop when ``max |T_new - T_old| < tol`` over items and classes.
    prevalence_prior : float, default 1.0
        Dirichlet pseudo-count per class added to the prevalence's expected counts (posterior mean).
    concentration_power : float, default 2.5
        Hyperprior ``p(s_y) ∝ s_y^(-power)`` on each concentration
        (:func:`~noisycal_bayes.core.population.fit_dirichlet_multinomial`); 0 for type-II maximum likelihood.
    weights : array of shape (n_items,), optional
        Item weights (a Bayesian bootstrap's), multiplying each item's expected counts.
    init : MulticlassEMFit or tuple (confusion (J, K, K), prevalence (K,) or (1, K)), optional
        Start from its confusion and prevalence (E-step first) instead of the majority vote (a bootstrap
        replicate's warm start from the full-sample fit).
    population : array of shape (K, K), optional
        A fixed population ``alpha`` (row ``y`` = ``s_y m_y``, e.g. a previous fit's ``prior[0]``): step 2 is
        skipped and every row is the posterior mean under it. The EM route's bootstrap refits keep the full-sample
        fit's population this way: refitting it on resampled items (duplicated items look like over-dispersion)
        lowers its concentration, and with a few labels per row the refits then scatter several times wider than
        the rows' posterior and shift their accuracies (docs/coverage.md, *Sparse K-class crowds*).
    objective : {"soft_counts", "sampled_labels"}, default "soft_counts"
        What step 2 fits the population to. ``"soft_counts"``: the Dirichlet-multinomial at the expected counts
        ``n[j, y, a]``. ``"sampled_labels"``: the mean over ``n_draws`` clean-label draws ``Y ~ T`` of the
        Dirichlet-multinomial at each draw's hard counts (the expected complete-data objective under the
        posteriors, by Monte Carlo with fixed uniforms, so a fit is deterministic): for ``SAMPLED_ITER`` iterations,
        then the population (and the factors of ``spread``) averaged over their second half is kept fixed while the
        EM converges. The soft counts of an annotator's few labels are spread over the rows its items might belong
        to, which looks like agreement with the crowd: on simulated crowds the soft-count fit put the concentration
        at 270-350 where the draws' fit gives 9-15 and the true labels' counts 5-6 (docs/crowds.md, *Outlying
        annotators*). Not the default: on the real crowd cf it costs accuracy (0.890 -> 0.840).
    n_draws : int, default 16
        Clean-label draws per iteration for ``objective="sampled_labels"``.
    spread : float, optional
        Per-annotator concentrations: annotator ``j``'s rows are ``Dirichlet(lambda_j s_y m_y)`` with
        ``log lambda_j ~ Normal(0, spread^2)``, ``lambda_j`` by MAP (Newton steps on the annotator's
        Dirichlet-multinomial terms, :func:`_scale_fit`) after each population step, which weighs each row at its
        ``lambda_j`` (an IBCC population whose outliers, spammers and adversaries, can leave it: a small
        ``lambda_j`` lets the annotator's own counts speak). The factors are ``annotator_scale`` of the result.
        Cannot be combined with a fixed ``population``.
    accelerate : {"auto", True, False}, default "auto"
        Run the iterations as SQUAREM cycles (Varadhan & Roland 2008; :func:`_pooled_squarem`, on the K-class EM's
        loop :func:`~noisycal_bayes.inference._em_loop.em_loop`). ``"auto"``: on crowds of at least
        :data:`ACCELERATE_MIN_RESPONSES` responses, the K-class sparse EM's rule, the first 100 iterations plain (a
        fit that stops by then is the plain fit), SQUAREM cycles after them; a warm refit (``init``) plain. Off for
        ``objective="sampled_labels"`` and a mixture population (``components`` > 1; not measured with
        cycles) (the sampled objective's population is fitted to Monte Carlo
        label draws for a fixed number of iterations and averaged: no fixed point to extrapolate towards).
        ``n_iter`` then counts plain iterations and cycles (three EM steps each), and ``loglik_trace`` holds the
        plain iterations' log-likelihoods and the final one. Measured on the five crowds: docs/performance.md.
        ``True`` runs the cycles from the first iteration. The pooled likelihood can have several fixed points, and
        the path decides which one a fit reaches: on the adult and cf crowds cycles from the first iteration end at
        another fixed point than the plain loop (clean-label posteriors up to 0.97 and 0.99 apart), while ``"auto"``'s
        100 plain iterations first reach the plain fit's (within 6e-7)
        (benchmarks/results/crowds_em_multiclass.notes.md).
    components : {1, 2, 3}, default 1
        Annotator types (a mixture population): annotator ``j`` has a latent type ``z_j``, shared by its ``K``
        rows, with weights ``w``; given the type, ``C[j, y, :] ~ Dirichlet(alpha_{z, y})``. The components start
        as typical (diagonal 0.7), spammer (uniform rows) and adversary (diagonal 0.1) (:func:`_mixture_start`)
        and are learned: each iteration the responsibilities ``P(z_j = c)`` from the Dirichlet-multinomial marginal
        of the annotator's counts (the expected counts, or each clean-label draw's counts with
        ``objective="sampled_labels"``, averaged over the draws), each component's population by the weighted
        fixed point, and annotator ``j``'s row the responsibility-weighted mixture of the components' posterior
        means (:func:`_pooled_loop`). With ``"sampled_labels"`` the components, weights and responsibilities
        averaged over the first stage's second half are kept while the EM converges. Orientation is read on the
        typical component (the largest weight), whose population is ``prior[0]``; the components, weights and
        responsibilities are ``mixture_alpha``, ``mixture_weight`` and ``type_probability`` of the result.
        A single population pulls every spammer and adversary towards the honest crowd (docs/crowds.md,
        *Outlying annotators*; measured: *A mixture population*). Cannot be combined with ``spread`` or a fixed
        ``population``.

    Returns
    -------
    MulticlassEMFit
        ``model="pooled"``, ``path="sparse"``, one group; ``prior = (s[:, None] * m, prevalence pseudo-counts)``:
        row ``y`` of the first array is the fitted population ``alpha_y = s_y m_y`` (so ``m_y = alpha_y /
        alpha_y.sum()``, ``s_y = alpha_y.sum()``); ``objective`` is the log-likelihood plus the
        Dirichlet-multinomial log-marginal of the expected counts; ``start_logliks`` holds the one start.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_multiclass
    >>> sim = simulate_multiclass(300, 20, 3, labels_per_item=3, seed=0)
    >>> fit = fit_em_population(sim)
    >>> fit.model, fit.confusion.shape
    ('pooled', (20, 3, 3))
    """
    func = "fit_em_multiclass(model='pooled')"
    x = class_arrays(data, func)
    _, max_iter, tol, _ = check_em_settings(1, max_iter, tol, 0.0)
    J, K, n = x.n_annotators, x.n_classes, x.n_items
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (n,) or not np.all(np.isfinite(weights)) or (weights < 0).any():
            raise ValueError(f"{func}: `weights` must be None or finite non-negative numbers of shape ({n},); got "
                             f"shape {weights.shape}.")
    if prevalence_prior < 0:
        raise ValueError(f"{func}: `prevalence_prior` must be >= 0; got {prevalence_prior}.")
    group = np.zeros(n, np.int64)
    w_items = np.ones(n) if weights is None else weights
    n_labels = np.bincount(x.annotator, weights=w_items[x.item], minlength=J).astype(np.float64)
    if init is None:
        T = _vote(x)
    else:
        c0, p0 = init if isinstance(init, tuple) else (init.confusion, init.prevalence)
        T, _ = _posterior(x, np.asarray(c0, np.float64), np.asarray(p0, np.float64).reshape(-1, K)[0], group)
    from ._em_loop import _call, padded_class_responses

    item, code, padded, by_code, grp, gold, w_pad = padded_class_responses(x, group, weights)
    n_pad = grp.size
    T0 = np.concatenate([T, np.full((n_pad - n, K), 1.0 / K)])
    real = np.arange(n_pad) < n
    fixed = population is not None
    if objective not in OBJECTIVES:
        raise ValueError(f"{func}: `objective` must be one of {OBJECTIVES}; got {objective!r}.")
    sampled = objective == "sampled_labels" and not fixed
    accelerated, plain_steps = _resolve_accelerate(accelerate, sampled, init is not None, x.item.size, func)
    if spread is not None and not (np.isfinite(spread) and spread > 0):
        raise ValueError(f"{func}: `spread` must be None or a positive number; got {spread!r}.")
    n_draws = check_positive_int(n_draws, name="n_draws")
    if isinstance(components, bool) or components not in COMPONENTS:
        raise ValueError(f"{func}: `components` must be one of {COMPONENTS} (annotator types: typical, spammer, "
                         f"adversary); got {components!r}.")
    M = int(components)
    if M > 1 and accelerated:   # the mixture's cycles were not measured: plain
        if accelerate is True:
            raise ValueError(f"{func}: `accelerate=True` cannot be combined with `components` > 1 (the mixture "
                             "population's SQUAREM cycles are not implemented); use accelerate='auto' or False.")
        accelerated = False
    if M > 1 and (spread is not None or fixed):
        raise ValueError(f"{func}: `components` > 1 (a mixture population, learned) excludes `spread` and a fixed "
                         "`population`; give one.")
    # Fixed uniforms (seed 0, item by item): the same draws on every call, so a fit is a deterministic function of
    # its data and a bootstrap refit's draws differ from the full fit's only through its weights and posteriors.
    uniforms = (np.random.default_rng(0).random((n_pad, n_draws)) if sampled else np.zeros((n_pad, 1)))
    if fixed:
        population = np.asarray(population, dtype=np.float64)
        if population.shape != (K, K) or not np.all(np.isfinite(population)) or (population <= 0).any():
            raise ValueError(f"{func}: `population` must be None or positive finite numbers of shape ({K}, {K}) (a "
                             f"fit's prior[0]); got shape {population.shape}.")
    if fixed and spread is not None:
        raise ValueError(f"{func}: `spread` (per-annotator concentrations, fitted) and a fixed `population` exclude "
                         "each other; give one.")
    per = spread is not None
    args = (item, code, padded, by_code, grp, gold, w_pad, real, _count_cells(x))
    hyper = (np.float64(prevalence_prior), np.float64(concentration_power))
    l0, sp = np.zeros(J), np.float64(1.0 if spread is None else spread)
    mix = _mixture_start(K, M) + (np.full((J, M), 1.0 / M),)
    with x64():
        if sampled:   # stage 1: SAMPLED_ITER iterations on the label draws, the population averaged over the last half
            burn = _call(_pooled_loop, (T0,) + args + (np.float64(0.0),) + hyper
                         + (np.ones((K, K)), l0, uniforms, sp, np.int32(SAMPLED_ITER // 2)) + mix,
                         n_annotators=J, max_iter=SAMPLED_ITER, fixed=False, sampled=True, per_annotator=per,
                         n_components=M)
            T0, population, l0 = np.asarray(burn[4]), np.asarray(burn[10]), np.asarray(burn[11])
            mix = tuple(np.asarray(v) for v in burn[15:18])
            trace0 = np.asarray(burn[8])
        fixed_mix = M > 1 and sampled
        pop = population if population is not None else np.ones((K, K))
        first = min(plain_steps, max_iter) if accelerated else max_iter
        if first:
            out = _call(_pooled_loop, (T0,) + args + (np.float64(tol),) + hyper
                        + (pop, l0, np.zeros((n_pad, 1)), sp, np.int32(max_iter)) + mix,
                        n_annotators=J, max_iter=first, fixed=population is not None or fixed_mix, sampled=False,
                        per_annotator=per and population is None, n_components=M)
        mixture = tuple(out[12:15]) if first else mix
        if accelerated and (not first or (not out[6] and first < max_iter)):
            out = _squarem_after(out if first else None, T0, args, tol, hyper, pop, l0, sp, n_annotators=J,
                                 max_iter=max_iter, fixed=population is not None,
                                 per_annotator=per and population is None)
        C, pi, m, s, T, it, converged, delta, trace, l = (np.asarray(v) for v in out[:10])
        a_mix, w_mix, r_mix = (np.asarray(v) for v in mixture)   # M = 1: the unused start values
        lam = np.exp(l)
    if sampled:
        trace = np.concatenate([trace0, trace[:int(it)]])
        it = SAMPLED_ITER + int(it)
    it, converged, delta = int(it), bool(converged), float(delta)
    T, trace = T[:n], trace[:it]
    counts = expected_counts(x.item, x.annotator, x.label, T, J, weights)
    from ..core.population import dirichlet_multinomial_loglik

    if M > 1:   # sum_j log sum_c w_c prod_y DirMult(n_jy | alpha_cy) at the expected counts
        from scipy.special import logsumexp

        with x64():
            marginal = float(np.sum(logsumexp(np.asarray(_type_log_joint(counts, a_mix, np.log(w_mix))), axis=1)))
    elif spread is None:
        marginal = sum(dirichlet_multinomial_loglik(counts[:, y, :], s[y] * m[y]) for y in range(K))
    else:   # every annotator at its own lambda_j, plus the factors' normal log prior
        marginal = sum(dirichlet_multinomial_loglik(counts[j:j + 1, y, :], lam[j] * s[y] * m[y])
                       for j in range(J) for y in range(K)) - float(np.sum(np.log(lam) ** 2)) / (2 * spread ** 2)
    C, pi, m, s, perm, ok = _orient_population(C, pi, m, s)
    if perm is not None:
        a_mix = a_mix[:, np.argsort(perm), :]
    notes = []
    if not converged:
        notes.append((ConvergenceWarning, f"{func}: the posteriors still moved by {delta:.3g} >= tol={tol:g} after "
                      f"max_iter={max_iter} iterations; the last iterate is returned with converged=False. Raise "
                      "`max_iter`, or loosen `tol`."))
    if not ok:
        notes.append((IdentifiabilityWarning, f"{func}: the population mean confusion has no relabelling with its row "
                      "maxima on the diagonal: the crowd does not say which latent class is which. Add reliable "
                      "annotators or gold labels."))
    for cls, text in notes:
        _warnings.warn(text, cls, stacklevel=3)
    loglik = float(trace[-1])
    return MulticlassEMFit(confusion=C, prevalence=pi[None], groups=group, n_groups=1, log_likelihood=loglik,
                           n_iter=it, converged=bool(converged and ok), path="sparse", model="pooled",
                           classes=x.classes, warnings=tuple(t for _, t in notes), objective=loglik + marginal,
                           start_logliks=np.array([loglik + marginal]), selected_start=0,
                           loglik_trace=np.asarray(trace), path_reason="population model: sparse EM",
                           groups_reason="population model: one group", label_permutation=perm,
                           prior=(s[:, None] * m, np.full(K, float(prevalence_prior))), n_labels=n_labels,
                           annotator_scale=lam if spread is not None else None,
                           mixture_alpha=a_mix if M > 1 else None, mixture_weight=w_mix if M > 1 else None,
                           type_probability=r_mix if M > 1 else None)
