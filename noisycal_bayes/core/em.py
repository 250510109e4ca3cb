"""One EM step of the (grouped) Dawid-Skene model on compressed counts (paper Appendix F.1), binary and K-class.

E-step ``T_r = P(Y = 1 | pattern_r, g_r)`` (``softmax_y`` for K classes); M-step with optional Beta (Dirichlet)
pseudo-counts: MAP with a prior, maximum likelihood with the flat one. Details: docs/foundations.md,
*noisycal_bayes.core.em*.
"""
import jax
import jax.numpy as jnp
import numpy as np

from .likelihood import (_EPS, _eager_jit, rows_class_log_joint, _one_hot, _row_logs, _xp, multiclass_pattern_loglik, pattern_loglik,
                         posterior_positive)
from .population import expected_counts
from .sparse import _normalise_rows
from .tables import PatternTable


@_eager_jit  # one fused program per shape when called eagerly (core.likelihood._eager_jit)
def e_step(patterns, group, counts, fpr, tpr, prevalence):
    """``(loglik, T)``: total log-likelihood ``sum_r c_r log P(row_r)`` (scalar) and ``T_r = P(Y = 1 | row_r)``
    (n_rows,), from one evaluation of the pattern terms.

    With ``a_r = log(1 - pi_g) + l0_r``, ``b_r = log pi_g + l1_r``, ``d = b - a`` and ``e = exp(-|d|)``:
    ``log P(row_r) = max(a, b) + log1p(e)`` and ``T_r = sigmoid(d)`` = ``1 / (1 + e)`` (d >= 0) or
    ``e / (1 + e)`` (d < 0). The same numbers, to rounding, as :func:`~noisycal_bayes.core.ds_loglik` and
    :func:`~noisycal_bayes.core.posterior_positive`.
    """
    l0, l1 = pattern_loglik(patterns, fpr, tpr)
    log_neg, log_pos = _row_logs(prevalence, group)
    a, b = log_neg + l0, log_pos + l1
    d = b - a
    e = jnp.exp(-jnp.abs(d))
    loglik = jnp.sum(counts * (jnp.maximum(a, b) + jnp.log1p(e)))
    return loglik, jnp.where(d >= 0, 1.0, e) / (1.0 + e)


@_eager_jit(static_argnames=("n_groups", "prior"))
def m_step(patterns, group, counts, n_groups: int, posterior, prior=None):
    """M-step: ``(fpr, tpr, prevalence)`` from ``T = posterior`` (n_rows,), with the module's formulas.

    ``prior`` is None (maximum likelihood) or a tuple of Beta ``(alpha, beta)`` pairs
    ``((a_fpr, b_fpr), (a_tpr, b_tpr), (a_prev, b_prev))`` applied to fpr, tpr and prevalence.
    """
    w1 = counts * posterior
    w0 = counts - w1
    obs = (patterns >= 0).astype(w1.dtype)
    pos = (patterns == 1).astype(w1.dtype)
    (af, bf), (at, bt), (ap, bp) = ((1.0, 1.0),) * 3 if prior is None else prior
    n_g = jax.ops.segment_sum(counts, group, num_segments=n_groups)
    t_g = jax.ops.segment_sum(w1, group, num_segments=n_groups)
    prevalence = (t_g + ap - 1) / (n_g + ap + bp - 2)
    tpr = (w1 @ pos + at - 1) / (w1 @ obs + at + bt - 2)
    fpr = (w0 @ pos + af - 1) / (w0 @ obs + af + bf - 2)
    return fpr, tpr, prevalence


@_eager_jit(static_argnames=("n_groups", "prior"))
def em_step(patterns, group, counts, n_groups: int, fpr, tpr, prevalence, prior=None):
    """Return updated ``(fpr, tpr, prevalence)``: :func:`m_step` of the E-step ``T`` at the given parameters."""
    t = posterior_positive(patterns, group, fpr, tpr, prevalence)
    return m_step(patterns, group, counts, n_groups, t, prior)


def log_prior(parts, prior):
    """Sum of Beta log-kernels ``(alpha - 1) log p + (beta - 1) log(1 - p)`` over ``parts`` (0 when ``prior`` is None).

    ``parts = (fpr (J,), tpr (J,), prevalence (G,))`` and ``prior = ((a_fpr, b_fpr), (a_tpr, b_tpr),
    (a_prev, b_prev))`` Beta pseudo-counts; the objective of a MAP-EM fit is log-likelihood + this.
    """
    if prior is None:
        return 0.0
    total = 0.0
    for p, (al, be) in zip(parts, prior):
        # Clip as the likelihood does, so a rate on the boundary with a flat side contributes 0, not NaN.
        p = jnp.clip(p, 1e-12, 1 - 1e-12)
        total = total + jnp.sum((al - 1.0) * jnp.log(p) + (be - 1.0) * jnp.log1p(-p))
    return total


# ---------------------------------------------------------------------------------------------------------------
# K classes (docs/foundations.md). Pseudo-counts ``conf_pc`` (K, K) and ``prev_pc`` (K,) are ``alpha - 1`` (None: ML).


def multiclass_e_step(patterns, counts, confusion, prevalence):
    """``(loglik, T)`` on (group x pattern) counts: ``sum_{g,p} c_gp log P(pattern_p | g)`` and
    ``T[g, p, y] = P(Y = y | pattern_p, g)``, shape (G, P, K).

    ``patterns`` (P, J) int labels (``-1`` missing), ``counts`` (G, P) items per (group, pattern) cell (zeros
    allowed), ``confusion`` (J, K, K), ``prevalence`` (G, K). Dense: the pattern terms are computed once per
    pattern and broadcast over the groups.
    """
    xp = _xp(patterns, counts, confusion, prevalence)
    pll = multiclass_pattern_loglik(patterns, confusion)                # (P, K)
    m = xp.max(pll, axis=-1, keepdims=True)
    # Exponentiated once per pattern, shifted by the row maximum (values in (0, 1], the largest 1); the groups
    # multiply them by their prevalence: G P K products instead of G P K exponentials. The row sum is at least
    # the clipped prevalence 1e-12 of the maximising class, so its log is finite.
    joint = xp.clip(xp.asarray(prevalence), _EPS, 1.0)[:, None, :] * xp.exp(pll - m)[None, :, :]   # (G, P, K)
    s = xp.sum(joint, axis=-1, keepdims=True)
    return xp.sum(counts * (m[None, :, 0] + xp.log(s[..., 0]))), joint / s


def multiclass_m_step(patterns, counts, posterior, conf_pc=None, prev_pc=None):
    """M-step on (group x pattern) counts: ``(confusion (J, K, K), prevalence (G, K))`` from ``T = posterior``
    (G, P, K); ``conf_pc`` (K, K) and ``prev_pc`` (K,) are Dirichlet pseudo-counts ``alpha - 1`` (None: maximum
    likelihood)."""
    xp = _xp(patterns, counts, posterior)
    K = posterior.shape[-1]
    w = counts[..., None] * posterior                                 # (G, P, K)
    onehot = _one_hot(xp, xp.asarray(patterns), K, w.dtype)          # (P, J, K)
    n = xp.einsum("py,pja->jya", xp.sum(w, axis=0), onehot)
    if conf_pc is not None:
        n = n + conf_pc
    t_g = xp.sum(w, axis=1)
    if prev_pc is not None:
        t_g = t_g + prev_pc
    return _normalise_rows(n), _normalise_rows(t_g)


# ------------------------------------------------------------------------------------------------ K classes
def table_responses(table):
    """``(row, annotator, label)`` of every response (rows of a PatternTable or items of a SparseTable)."""
    if isinstance(table, PatternTable):
        pat = np.asarray(table.patterns)
        n_rows, n_ann = pat.shape
        row, ann, lab = np.repeat(np.arange(n_rows), n_ann), np.tile(np.arange(n_ann), n_rows), pat.reshape(-1)
        keep = lab >= 0
        return row[keep], ann[keep], lab[keep]
    return tuple(np.asarray(a) for a in (table.item, table.annotator, table.label))


def table_posterior(table, responses, log_c, log_p):
    """``(P(Y = y | A_row) (n_rows, K), log P(A_row) (n_rows,))`` in NumPy float64; gold rows one-hot."""
    row, ann, lab = responses
    group = np.asarray(table.group if isinstance(table, PatternTable) else table.item_group)
    gold = np.asarray(table.gold)
    ll = rows_class_log_joint(row, ann, lab, group.shape[0], group, gold, log_c, log_p)
    top = ll.max(axis=1, keepdims=True)
    post = np.exp(ll - top)                                                # shift by the row maximum before exp
    total = post.sum(axis=1, keepdims=True)
    return post / total, (top + np.log(total))[:, 0]


def table_counts(table, responses, post, n_annotators, n_groups):
    """Expected counts ``(confusion [j, y, a] (J, K, K), prevalence (G, K))`` from a row posterior (times row counts)."""
    row, ann, lab = responses
    k = post.shape[1]
    if isinstance(table, PatternTable):
        post, group = np.asarray(table.counts, np.float64)[:, None] * post, np.asarray(table.group)
    else:
        group = np.asarray(table.item_group)
    prev = np.stack([np.bincount(group, post[:, y], minlength=n_groups) for y in range(k)], 1)
    return expected_counts(row, ann, lab, post, n_annotators), prev


def expected_class_counts(table, confusion, prevalence, n_groups):
    """One E-step in NumPy (float64): ``(confusion counts (J, K, K) [j, y, a], prevalence counts (G, K))``.

    ``P(Y = y | A_row)`` at the point, weighted by the row counts (patterns) and summed per (annotator, class,
    label) and per (group, class); gold rows are one-hot. NumPy: no JAX program to compile for one pass.
    """
    log_c = np.log(np.clip(np.asarray(confusion, np.float64), 1e-300, 1.0))
    log_p = np.log(np.clip(np.asarray(prevalence, np.float64), 1e-300, 1.0)).reshape(n_groups, -1)
    responses = table_responses(table)
    post, _ = table_posterior(table, responses, log_c, log_p)
    return table_counts(table, responses, post, log_c.shape[0], n_groups)
