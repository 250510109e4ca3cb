"""EM (and MAP-EM) for the grouped Dawid-Skene models in JAX: all starts at once with ``vmap``.

The rules are those of the reference EM (``noisycal_bayes.reference.em.fit_em``, documented in its Notes)
so that the two agree to rounding from identical starts. Two paths, the same iteration and rules:

- ``"patterns"``: the E- and M-steps :func:`noisycal_bayes.core.em_step` on compressed, padded (group,
  pattern) counts, evaluated as ``core.em.m_step`` then ``core.em.e_step`` so that the objective and the
  next E-step share one pass. Cost per iteration ~ rows x annotators, independent of the number of items.
- ``"sparse"``: :func:`~noisycal_bayes.core.sparse.sparse_m_step` then
  :func:`~noisycal_bayes.core.sparse.sparse_e_step` on (item, annotator, label) responses with segment sums
  (gold labels as observed latent labels). Cost per iteration ~ responses; nothing items x annotators.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..core import ds_loglik, x64
from ..core.em import e_step, log_prior, m_step
from ..core.sparse import coded_e_step, coded_m_step, coded_responses, sparse_e_step, sparse_totals
from ..core.starts import START_EPS, TIE_RTOL, check_starts as _check_starts, em_starts, select_start
from ..core.tables import Responses
from ..models.em_result import GRID_LABELS, CavityPairs, em_result, prepare_em
from ..models.inputs import prepare_inputs, resolve_assignment
from ..models.priors import em_prior_counts
from ..models.result import FitResult, point_dict
from ._em_loop import em_loop, resolve_accelerate as _resolve_accelerate
from ._saved import SavedProgram
from ..data.binning import Binning

__all__ = ["ACCELERATE_MIN_RESPONSES", "DEFAULT_N_STARTS", "TIE_RTOL", "em_starts", "fit_em", "resolve_accelerate", "resolve_starts",
           "run_em",
           "start_point"]


def _split(theta, n_annotators):
    return theta[:n_annotators], theta[n_annotators:2 * n_annotators], theta[2 * n_annotators:]


def _em_program(n_rows: int, n_starts: int, *, n_annotators: int, n_groups: int, prior, max_iter: int):
    """The compiled EM for one static configuration and input shape (:func:`_run_all`), kept per process and,
    with the compilation cache on, saved across processes (:class:`~._sampler.SavedProgram`): a new process
    then neither traces the EM loop again nor compiles it."""
    key = ("em", n_rows, n_starts, n_annotators, n_groups, prior, max_iter)
    program = _EM_PROGRAMS.get(key)
    if program is None:
        fn = partial(_run_all, n_annotators=n_annotators, n_groups=n_groups, prior=prior, max_iter=max_iter)
        program = _EM_PROGRAMS[key] = SavedProgram(fn, partial(jax.jit, keep_unused=True), 0,
                                                   name=("em",) + tuple(map(repr, key[1:])))
    return program


# EM programs by static configuration and shape (see `_em_program`); the padded row counts keep them few.
_EM_PROGRAMS: dict = {}


def _start_bucket(n_starts: int) -> int:
    """The number of starts the pattern-path EM program runs for ``n_starts`` starts: 1, 2, 4, 10 (the default
    ``n_starts``), then powers of 2, so that a handful of compiled programs serve every ``n_starts``."""
    for size in (1, 2, 4, DEFAULT_N_STARTS):
        if n_starts <= size:
            return size
    return 1 << (int(n_starts) - 1).bit_length()


def _pad_starts(theta0):
    """``theta0`` (S, K) with copies of its first row appended up to :func:`_start_bucket` ``(S)`` rows."""
    extra = _start_bucket(theta0.shape[0]) - theta0.shape[0]
    return np.concatenate([theta0, np.repeat(theta0[:1], extra, axis=0)]) if extra else theta0


def _pattern_steps(patterns, group, counts, *, n_annotators, n_groups, prior):
    """``(evaluate, em_map)`` of :func:`~._em_loop.em_loop` on compressed rows, for one start ``theta`` (K,):
    the objective and the E-step at ``theta`` (one pass over the rows serves both), and the M-step."""

    def evaluate(theta):
        f, t, p = _split(theta, n_annotators)
        loglik, posterior = e_step(patterns, group, counts, f, t, p)
        return loglik + log_prior((f, t, p), prior), posterior

    def em_map(post):
        return jnp.concatenate(m_step(patterns, group, counts, n_groups, post, prior))

    return evaluate, em_map


def _run_all(theta0, patterns, group, counts, tol, *, n_annotators, n_groups, prior, max_iter):
    """EM from every start (rows of ``theta0``) with one :func:`~._em_loop.em_loop` each, batched by ``vmap``.

    Returns ``(theta (S, K), objective (S,), n_iter (S,), status (S,), trace (S, max_iter + 1))``.
    """
    evaluate, em_map = _pattern_steps(patterns, group, counts, n_annotators=n_annotators, n_groups=n_groups,
                                      prior=prior)
    return jax.vmap(lambda th0: em_loop(th0, evaluate, em_map, tol, max_iter=max_iter))(theta0)


def _run_all_sparse(theta0, item, annotator, label, item_group, gold, tol, item_weight=None, padded=None, *,
                    n_annotators, n_groups, prior, max_iter, keep_trace: bool = True, accelerate: bool = False):
    """:func:`_run_all` on sparse responses: the same iteration, stopping rule and outputs, every start at once.

    The starts form a trailing batch axis of the parameters (``fpr`` (J, S), ...) and each EM step is
    :func:`~noisycal_bayes.core.sparse.coded_m_step` then :func:`~noisycal_bayes.core.sparse.coded_e_step`
    (one gather and one segment sum of each kind for all starts; see :mod:`noisycal_bayes.core.sparse`), in one
    batched :func:`~._em_loop.em_loop`. ``item_weight`` (n_items, S) reweights the items per start (bootstrap);
    ``padded`` (n_items, L) the codes per item (:func:`~noisycal_bayes.core.sparse.padded_codes`) or None;
    ``keep_trace=False`` returns a trace of shape (S, 1) (the bootstrap needs none). ``accelerate``: SQUAREM
    cycles instead of single EM steps (:func:`~._em_loop.squarem_cycle`); an iteration is then one cycle.
    """
    responses = Responses(item, annotator, label)
    coded = coded_responses(responses, padded)
    totals = sparse_totals(responses, item_group, n_groups, n_annotators, item_weight)
    J = n_annotators

    def evaluate(theta):  # theta (S, K) -> objective (S,), posterior (n_items, S)
        f, t, p = theta[:, :J].T, theta[:, J:2 * J].T, theta[:, 2 * J:].T
        loglik, posterior = coded_e_step(coded, item_group, totals, f, t, p, gold=gold)
        if prior is not None:
            loglik = loglik + jax.vmap(lambda th: log_prior(_split(th, J), prior))(theta)
        return loglik, posterior

    def em_map(post):  # the M-step from the posterior: the EM map's second half, theta (S, K)
        return jnp.concatenate(coded_m_step(coded, item_group, totals, J, post, prior), axis=0).T

    return em_loop(theta0, evaluate, em_map, tol, max_iter=max_iter, keep_trace=keep_trace, accelerate=accelerate,
                   post_axis=-1)


# Compiled sparse EM programs by static configuration (jit keeps one executable per input shape).
_SPARSE_PROGRAMS: dict = {}


def _sparse_program(n_annotators: int, n_groups: int, prior, max_iter: int, keep_trace: bool = True,
                    accelerate: bool = False):
    """The compiled :func:`_run_all_sparse` for one static configuration (one executable per input shape)."""
    key = (n_annotators, n_groups, prior, max_iter, keep_trace, accelerate)
    program = _SPARSE_PROGRAMS.get(key)
    if program is None:
        program = _SPARSE_PROGRAMS[key] = jax.jit(partial(_run_all_sparse, n_annotators=n_annotators,
                                                          n_groups=n_groups, prior=prior, max_iter=max_iter,
                                                          keep_trace=keep_trace, accelerate=accelerate))
    return program


def _sparse_args(inputs):
    """NumPy arrays of the sparse path: responses, item groups and gold (-1 everywhere when there is none)."""
    gold = (np.full(inputs.n_items, -1, np.int32) if inputs.gold is None else np.asarray(inputs.gold, np.int32))
    return (np.asarray(inputs.item, np.int32), np.asarray(inputs.annotator, np.int32),
            np.asarray(inputs.label, np.int32), np.asarray(inputs.row_group, np.int32), gold)


def _log_odds(inputs, fpr, tpr, prevalence):
    """``(x, w0, w1, gold)``: each item's (sparse) or row's (patterns) posterior log-odds of ``Y = 1`` without its
    gold label, ``logit pi_g + sum_r [A w1_j + (1 - A) w0_j]`` with ``w1 = log(tpr/fpr)``, ``w0 = log((1 - tpr)/(1 -
    fpr))``; ``gold`` is None on the pattern path. NumPy, float64."""
    f = np.clip(np.asarray(fpr, np.float64), 1e-12, 1 - 1e-12)
    t = np.clip(np.asarray(tpr, np.float64), 1e-12, 1 - 1e-12)
    p = np.clip(np.atleast_1d(np.asarray(prevalence, np.float64)), 1e-12, 1 - 1e-12)
    w1, w0 = np.log(t) - np.log(f), np.log1p(-t) - np.log1p(-f)
    if inputs.sparse:
        item, ann, lab, group, gold = _sparse_args(inputs)
        # One gather from the per-code table [w0_j, w1_j] (code 2 j + A) instead of two gathers and a select.
        x = np.bincount(item, weights=np.stack([w0, w1], axis=1).reshape(-1)[2 * ann + lab], minlength=inputs.n_items)
    else:
        pat = np.asarray(inputs.patterns)
        group, gold = np.asarray(inputs.row_group), None
        x = (pat == 1) @ w1 + (pat == 0) @ w0
    return x + (np.log(p) - np.log1p(-p))[group], w0, w1, gold


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # sigmoid without overflow


def _item_posterior(inputs, fpr, tpr, prevalence):
    """``T_i = P(Y_i = 1 | A_i)`` per item (sparse) or per row (patterns), in NumPy (float64, no compilation):
    ``sigmoid(logit pi_g + sum_r [A log(tpr/fpr) + (1 - A) log((1 - tpr)/(1 - fpr))])``, gold items their label."""
    x, _, _, gold = _log_odds(inputs, fpr, tpr, prevalence)
    post = _sigmoid(x)
    return post if gold is None else np.where(gold >= 0, gold, post)


def cavity_pairs(inputs, fpr, tpr, prevalence, annotators=None) -> CavityPairs:
    """Each (item, annotator) pair's labels and the item's clean-label probability given the OTHER annotators.

    For the pair of item ``i`` and annotator ``j``: ``k1``, ``k0`` = the numbers of labels 1 and 0 that ``j`` gave
    ``i`` (more than one with repeated labels), ``q = P(Y_i = 1 | labels of i by annotators other than j)`` at the
    estimate (the item's log-odds minus ``j``'s own log-likelihood ratios; the gold label where known) and the
    pair's weight (1, or the row count on the pattern path). Annotator ``j``'s likelihood given the others'
    channels is then ``prod_pairs [q tpr^k1 (1 - tpr)^k0 + (1 - q) fpr^k1 (1 - fpr)^k0]^weight``, which
    :func:`~noisycal_bayes.models.em_result.annotator_table` evaluates on a grid for annotators with few labels.
    ``annotators`` (bool, shape (J,)), optional: only the pairs of these annotators (the others' pairs would be
    unused; on a large crowd they are most of the responses). NumPy, float64.
    """
    x, w0, w1, gold = _log_odds(inputs, fpr, tpr, prevalence)
    if inputs.sparse:
        item, ann, lab, _, gold = _sparse_args(inputs)
        if annotators is not None:
            keep = np.asarray(annotators, bool)[ann]
            item, ann, lab = item[keep], ann[keep], lab[keep]
        if item.size == 0:
            empty = np.zeros(0)
            return CavityPairs(np.zeros(0, np.int32), empty, empty, empty, empty)
        lr = np.stack([w0, w1], axis=1).reshape(-1)[2 * ann + lab]
        # Responses are sorted by item, then annotator: a pair's repeated labels are adjacent.
        first = np.r_[True, (item[1:] != item[:-1]) | (ann[1:] != ann[:-1])]
        pair = np.cumsum(first) - 1
        own, k1 = np.bincount(pair, weights=lr), np.bincount(pair, weights=lab)
        k = np.bincount(pair).astype(np.float64)
        i_pair = item[first]
        q = np.where(gold[i_pair] >= 0, gold[i_pair], _sigmoid(x[i_pair] - own))
        return CavityPairs(ann[first], k1, k - k1, q, np.ones_like(q))
    pat = np.asarray(inputs.patterns)
    c = np.asarray(inputs.counts, np.float64)
    cells = (pat >= 0) & (c[:, None] > 0)
    if annotators is not None:
        cells &= np.asarray(annotators, bool)[None, :]
    row, col = np.nonzero(cells)
    one = (pat[row, col] == 1).astype(np.float64)
    q = _sigmoid(x[row] - np.where(one > 0, w1[col], w0[col]))
    return CavityPairs(col, one, 1.0 - one, q, c[row])


def soft_counts(inputs, fpr, tpr, prevalence):
    """E-step soft counts at an estimate, ``(s0, n0, s1, n1, m0, m1)`` each of shape (n_annotators,) (float64),
    followed by the annotators' :func:`cavity_pairs`.

    ``n1_j = sum_r T_{i_r}`` over annotator ``j``'s responses (``T_i = P(Y_i = 1 | A_i)``, the gold label where
    known), ``s1_j = sum_r T_{i_r} A_r``; ``n0``, ``s0`` the same with ``1 - T``. ``m1_j`` is the missing
    information about ``tpr_j`` (Louis 1982, the diagonal term): ``sum_i T_i (1 - T_i) u_ij^2`` with ``u_ij =
    sum_{r in (i, j)} [A_r / tpr_j - (1 - A_r) / (1 - tpr_j)]`` the complete-data score of item ``i`` when
    ``Y_i = 1``; ``m0`` the same for fpr. Pattern inputs weight each compressed row by its count. Used for the
    per-annotator intervals (:func:`~noisycal_bayes.models.em_result.annotator_table`). NumPy: nothing to compile.
    """
    post = _item_posterior(inputs, fpr, tpr, prevalence)
    f = np.clip(np.asarray(fpr, np.float64), 1e-12, 1 - 1e-12)
    t = np.clip(np.asarray(tpr, np.float64), 1e-12, 1 - 1e-12)
    n = inputs.n_annotators
    if inputs.sparse:
        item, ann, lab, _, _ = _sparse_args(inputs)
        code = 2 * ann + lab  # one gather per per-annotator quantity (code 2 j + A)
        w1 = post[item]
        # n1_j = sum T, s1_j = sum T A; n0 and s0 from the label counts (no products with A over the responses).
        n1 = np.bincount(ann, weights=w1, minlength=n)
        s1 = np.bincount(ann[lab == 1], weights=w1[lab == 1], minlength=n)
        n_lab, c1 = np.bincount(ann, minlength=n).astype(np.float64), np.bincount(ann, weights=lab, minlength=n)
        # Complete-data scores per response: A / r - (1 - A) / (1 - r), from per-code tables.
        u1 = np.stack([-1 / (1 - t), 1 / t], axis=1).reshape(-1)[code]
        u0 = np.stack([-1 / (1 - f), 1 / f], axis=1).reshape(-1)[code]
        # Scores summed per (item, annotator) pair first (repeated labels of one pair share one Y_i); responses
        # are sorted by item, then annotator, so a pair's repeats are adjacent.
        first = np.r_[True, (item[1:] != item[:-1]) | (ann[1:] != ann[:-1])]
        if not first.all():
            pair = np.cumsum(first) - 1
            u1, u0 = np.bincount(pair, weights=u1), np.bincount(pair, weights=u0)
            item, ann = item[first], ann[first]
        v = (post * (1 - post))[item]
        return (c1 - s1, n_lab - n1, s1, n1, np.bincount(ann, weights=v * u0**2, minlength=n),
                np.bincount(ann, weights=v * u1**2, minlength=n),
                cavity_pairs(inputs, fpr, tpr, prevalence, annotators=n_lab < GRID_LABELS))
    pat = np.asarray(inputs.patterns)
    c = np.asarray(inputs.counts, np.float64)
    obs, pos = (pat >= 0).astype(np.float64), (pat == 1).astype(np.float64)
    w1, w0 = c * post, c * (1 - post)
    cv = c * post * (1 - post)
    u1 = np.where(pos > 0, 1 / t, -1 / (1 - t)) * obs
    u0 = np.where(pos > 0, 1 / f, -1 / (1 - f)) * obs
    return (w0 @ pos, w0 @ obs, w1 @ pos, w1 @ obs, cv @ u0**2, cv @ u1**2,
            cavity_pairs(inputs, fpr, tpr, prevalence, annotators=c @ obs < GRID_LABELS))


def vote_start(inputs):
    """One EM start from the vote fractions (crowd-kit's initialisation): the M-step at ``T_i`` = the item's share
    of positive labels (its gold label where known), clipped into ``[START_EPS, 1 - START_EPS]``.

    Returns ``(fpr (1, J), tpr (1, J), prevalence (1, G))``. NumPy (the formulas of
    :func:`~noisycal_bayes.core.sparse.sparse_m_step`), so that it compiles nothing.
    """
    n_ann, n_groups = inputs.n_annotators, inputs.n_groups
    if inputs.sparse:
        item, ann, lab, group, gold = _sparse_args(inputs)
        n = np.bincount(item, minlength=inputs.n_items)
        vf = np.bincount(item, weights=lab, minlength=inputs.n_items) / np.maximum(n, 1)
        vf = np.where(gold >= 0, gold, vf)
        c = np.ones(inputs.n_items)
        w1 = vf[item]
        s1, n1 = np.bincount(ann, weights=w1 * lab, minlength=n_ann), np.bincount(ann, weights=w1, minlength=n_ann)
        c1, nl = np.bincount(ann, weights=lab, minlength=n_ann), np.bincount(ann, minlength=n_ann)
        s0, n0 = c1 - s1, nl - n1
    else:
        pat = np.asarray(inputs.patterns)
        group, c = np.asarray(inputs.row_group), np.asarray(inputs.counts, np.float64)
        obs, pos = (pat >= 0).astype(np.float64), (pat == 1).astype(np.float64)
        vf = pos.sum(1) / np.maximum(obs.sum(1), 1)
        s1, n1, s0, n0 = (c * vf) @ pos, (c * vf) @ obs, (c * (1 - vf)) @ pos, (c * (1 - vf)) @ obs
    with np.errstate(invalid="ignore", divide="ignore"):
        prev = (np.bincount(group, weights=c * vf, minlength=n_groups)
                / np.bincount(group, weights=c, minlength=n_groups))
        parts = (s0 / n0, s1 / n1, prev)
    # An annotator who labelled only unanimous-negative (or -positive) items has 0/0 for one rate: start at 0.5.
    return tuple(np.clip(np.nan_to_num(v, nan=0.5), START_EPS, 1 - START_EPS)[None] for v in parts)


#: Random starts of :func:`fit_em` when they are random and ``n_starts`` is not given.
DEFAULT_N_STARTS = 10

#: ``accelerate="auto"`` turns SQUAREM on for sparse fits with at least this many responses: there an EM step
#: costs milliseconds and convergence hundreds of them; below it plain EM is fast and keeps the reference EM's
#: iterate sequence (identical traces, tests/inference/test_crowd_em.py).
ACCELERATE_MIN_RESPONSES = 100_000


def resolve_starts(starts, n_starts, sparse: bool, func: str = "fit_em"):
    """:func:`fit_em`'s starts: ``starts`` itself when given (``"vote"``, ``"random"`` or a tuple), else ``"vote"`` on
    the sparse path without ``n_starts`` and ``"random"`` otherwise."""
    if starts is None:
        return "vote" if sparse and n_starts is None else "random"
    if isinstance(starts, str) and starts not in ("vote", "random"):
        raise ValueError(f"{func}: `starts` must be None, 'vote', 'random' or a tuple (fpr (S, J), tpr (S, J), "
                         f"prevalence (S, G)); got {starts!r}.")
    return starts


def resolve_accelerate(accelerate, inputs) -> bool:
    """``accelerate`` (``"auto"``, True or False) for ``inputs``: whether the EM loop runs SQUAREM cycles
    (``"auto"``: sparse inputs with at least :data:`ACCELERATE_MIN_RESPONSES` responses)."""
    return _resolve_accelerate(accelerate, inputs.sparse, np.asarray(inputs.item).size if inputs.sparse else 0,
                               min_responses=ACCELERATE_MIN_RESPONSES)


def run_em(inputs, *, n_starts, seed, max_iter, tol, min_gap, prior_counts, starts=None, annotator_ids=None,
           orientation: str = "every", accelerate=False):
    """EM on prepared inputs (pattern or sparse, as ``inputs.sparse`` says). Returns a dict with the selected
    estimate and the bookkeeping (no warnings); with an estimate also ``soft_counts`` and ``n_labels``.
    ``starts``: None or ``"random"`` (``n_starts`` random starts), ``"vote"`` or a tuple; ``accelerate`` as in
    :func:`fit_em` (resolved by :func:`resolve_accelerate`; ``out["accelerated"]`` records it)."""
    n_ann, n_groups = inputs.n_annotators, inputs.n_groups
    accelerated = resolve_accelerate(accelerate, inputs)
    if isinstance(starts, str) and starts == "random":
        starts = None
    if isinstance(starts, str):
        if starts != "vote":
            raise ValueError(f"`starts` must be 'vote', 'random' or a tuple (fpr (S, J), tpr (S, J), prevalence "
                             f"(S, G)); got {starts!r}.")
        fpr0, tpr0, prev0 = vote_start(inputs)
    elif starts is not None:
        fpr0, tpr0, prev0 = _check_starts(starts, n_ann, n_groups)
    else:
        if n_starts < 1:
            raise ValueError("`n_starts` must be at least 1.")
        fpr0, tpr0, prev0 = em_starts(n_ann, n_groups, n_starts, seed)
    theta0 = np.concatenate([fpr0, tpr0, prev0], axis=1)
    ids = list(range(n_ann)) if annotator_ids is None else list(annotator_ids)
    n_labels = inputs.labels_per_annotator()
    with x64():
        if inputs.sparse:
            args = _sparse_args(inputs)
            # The segment layout (padded=None): measured as fast as the padded one for B = 1 and faster for B > 1,
            # without building the (n_items, L) code matrix.
            program = _sparse_program(n_ann, n_groups, prior_counts, int(max_iter), accelerate=accelerated)
        else:
            # NumPy arguments: converting them with jnp would compile small programs of its own in a new process.
            args = (np.asarray(inputs.patterns, dtype=np.int32), np.asarray(inputs.row_group, dtype=np.int32),
                    np.asarray(inputs.counts, dtype=np.float64))
            # The starts padded to a few sizes (copies of start 0, dropped below): one compiled program serves
            # every n_starts of a bucket (each start's loop is its own under vmap, so the kept ones are unchanged).
            theta0 = _pad_starts(theta0)
            program = _em_program(args[0].shape[0], theta0.shape[0], n_annotators=n_ann, n_groups=n_groups,
                                  prior=prior_counts, max_iter=int(max_iter))
        n_kept = fpr0.shape[0]
        theta, obj, n_iter, status, trace = (np.asarray(v)[:n_kept] for v in program(
            np.asarray(theta0, dtype=np.float64), *args, np.float64(tol)))
        out = select_start(theta, obj, n_iter, status, trace, n_annotators=n_ann, min_gap=min_gap,
                           max_iter=max_iter, annotator_ids=ids, orientation=orientation, n_labels=n_labels)
        if out["selected"] is not None:
            f, t, p = (np.asarray(out[k], np.float64) for k in ("fpr", "tpr", "prevalence"))  # no eager jnp ops
            if prior_counts is None:
                out["loglik"] = out["objective"]
            elif inputs.sparse:
                out["loglik"] = float(sparse_e_step(Responses(*args[:3]), args[3], f, t, p, gold=args[4])[0])
            else:
                out["loglik"] = float(ds_loglik(*args, f, t, p))
    out["accelerated"] = accelerated
    if out["selected"] is not None:
        out["soft_counts"] = soft_counts(inputs, out["fpr"], out["tpr"], out["prevalence"])
        out["n_labels"] = n_labels
    return out


def fit_em(data, *, model: str = "grouped", groups=Binning.equal_mass(5), n_starts=None, seed: int = 0, prior=None,
           max_iter: int = 1000, tol: float = 1e-8, min_gap: float = 0.05, starts=None, orientation: str = "auto",
           path: str = "auto", accelerate="auto") -> FitResult:
    """Maximum-likelihood (or MAP) channels by EM in JAX, all starts at once.

    Parameters
    ----------
    data : AnnotationSet
        Labels (n_items, n_annotators), -1 = missing (missing at random; they drop out of the likelihood).
    model : {"grouped", "dawid_skene", "histogram"}, default "grouped"
        ``"dawid_skene"``: one prevalence (``groups`` ignored). ``"grouped"``: one prevalence per score
        group, channels shared (the paper's model). ``"histogram"``: the same with the dimension called
        ``bin``. ``"monotone"`` and ``"platt"`` have no closed-form M-step: use :func:`fit_map`.
    groups : Binning, int or int array of shape (n_items,), default ``Binning.equal_mass(5)``
        Score groups: a Binning (the default: five equal-mass groups), an int ``k`` meaning
        ``Binning.equal_width(k)`` as for ``bins`` (it warns: it used to mean equal mass), or a group label
        per item; empty groups are dropped.
    n_starts : int, optional
        Random starts (:func:`em_starts`), run in parallel with ``jax.vmap``. Giving it asks for random starts;
        left out, the starts follow ``starts`` (10 random starts where those are random).
    seed : int, default 0
        Seed of the random starts.
    prior : None or Prior
        None: maximum likelihood. A :class:`~noisycal_bayes.models.Prior`: the posterior mode in
        ``(fpr, tpr, prevalence)`` coordinates via Beta pseudo-counts
        (:meth:`~noisycal_bayes.models.Prior.em_pseudo_counts`; the default ``Prior()`` is flat there,
        so it gives the maximum-likelihood estimate).
    max_iter, tol, min_gap : see Notes.
    starts : None, "vote", "random" or tuple (fpr (S, J), tpr (S, J), prevalence (S, G)), default None
        None: ``"random"`` when ``n_starts`` is given or on the pattern path, else ``"vote"`` (the sparse path,
        crowds: one start instead of ten, measured as accurate on the crowd_gold sets, docs/crowds.md).
        ``"vote"``: one start, the M-step at the items' vote fractions (:func:`vote_start`; the standard
        Dawid-Skene initialisation, and crowd-kit's); on crowds it reaches the best of the random starts' optima in
        a fraction of their time (docs/crowds.md); ``n_starts`` and ``seed`` are then unused. ``"random"``:
        ``n_starts`` random starts from ``seed`` (:func:`em_starts`). A tuple: explicit starts in [0, 1]
        (clipped into ``[1e-6, 1 - 1e-6]``). ``settings["starts"]`` records the choice.
    orientation : {"auto", "every", "crowd"}, default "auto"
        How the label exchange ``Y <-> 1 - Y`` is fixed (:mod:`noisycal_bayes.core.starts`, rules 3-4).
        ``"every"``: the paper's constraint for a few trusted annotators: every gap ``> min_gap``, starts
        that break it are screened out (and the fit fails when none is left). ``"crowd"``: every annotator
        stays in the likelihood with its own gap of any sign; only the crowd's label-count-weighted mean gap
        must be positive, so spammers and adversarial workers neither flip nor break the fit. ``"auto"``:
        ``"every"`` when a start passes its screen, else ``"crowd"`` (with a :class:`SmallGapWarning`).
        ``details["orientation"]`` records the rule applied; the channel has that ``orientation``.
    path : {"auto", "patterns", "sparse"}, default "auto"
        Compressed (group, pattern) counts or sparse responses; ``"auto"`` takes the sparse path with gold
        labels or more than 12 annotators (:func:`~noisycal_bayes.models.em_result.choose_path`). The two
        give the same fit (to rounding) where both apply. ``details["path"]`` and ``details["path_reason"]``
        record the choice.
    accelerate : {"auto", True, False}, default "auto"
        Run the EM loop as SQUAREM cycles (Varadhan & Roland 2008; two EM steps, an extrapolation, one stabilising
        EM step, and a fallback to the two plain steps whenever the objective would decrease), sparse path only.
        ``"auto"``: on the sparse path with at least :data:`ACCELERATE_MIN_RESPONSES` responses. The stopping rule
        is the plain loop's, applied to the plain EM step that opens each cycle, so both stop at the same fixed
        point (to the plain loop's own distance from it); ``n_iter``, ``max_iter`` and ``loglik_trace`` then count
        cycles (three EM steps each). ``settings["accelerate"]`` records the choice.

    Returns
    -------
    FitResult
        ``method="em"``, ``draws=None``; ``channel`` and ``prevalence`` the selected estimate,
        ``loglik`` the log-likelihood there, ``details`` with ``loglik_trace`` (objective at the start
        and after each iteration of the selected start), ``start_logliks``, ``selected_start``,
        ``failed_starts``, ``path``, ``orientation``; ``annotators`` (:attr:`FitResult.annotators`) the
        per-annotator rates with 90% intervals and flags ("ok", "uninformative", "adversarial"). When no start
        converged within ``max_iter``, the best accepted start at its last iterate, with ``converged=False`` (and
        the warning in ``reason``); ``channel=None`` only when no start ends with a finite likelihood, or none that
        does passes the orientation screen (``reason`` says which).

    Raises
    ------
    ValueError
        Not an AnnotationSet; one annotator; unknown model or a model without closed-form EM; score
        groups without scores; a prior that EM cannot handle; bad numeric settings.

    Warns
    -----
    IdentifiabilityWarning
        Two annotators with the marginal model (paper §D.1); two annotators whose estimated group
        prevalences differ by less than 0.05.
    SmallGapWarning
        The best converged fit has a gap ``<= min_gap`` (it is screened out); ``"auto"`` fell back to the crowd
        orientation; annotators flagged "uninformative" or "adversarial" (named, up to 10 per flag).
    ConvergenceWarning
        No start converged (the best unconverged accepted start is returned), or no start was accepted.

    Notes
    -----
    The rules (starts from :func:`em_starts`; ``theta_t = EMstep(theta_{t-1})`` in float64 until both the
    parameters and the objective stop moving by ``tol``; orientation by global label exchange; screening by
    ``min_gap`` or the crowd rule; the largest objective wins, ties to the lowest start index; converged starts
    first, then those stopped by ``max_iter``) are spelled out in
    :mod:`noisycal_bayes.core.starts`; ``noisycal_bayes.reference.fit_em`` implements them independently,
    and the two agree to rounding. No moment-estimator start is added; pass ``starts=`` to choose the starts.
    Paper §4.3 and Appendix F.1-F.2.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=0)
    >>> fit = fit_em(sim.data, model="grouped", groups=Binning.equal_mass(5), n_starts=3)
    >>> bool(np.allclose(fit.channel.fpr, [0.1, 0.2, 0.1], atol=0.05))
    True
    """
    func = "fit_em"
    prior_counts = em_prior_counts(prior)
    data, model, assignment, notes, inputs, settings = prepare_em(
        data, model=model, groups=groups, n_starts=DEFAULT_N_STARTS if n_starts is None else n_starts, seed=seed,
        max_iter=max_iter, tol=tol, min_gap=min_gap, starts=starts, func=func, orientation=orientation, path=path)
    starts = resolve_starts(starts, n_starts, inputs.sparse, func)
    accelerated = resolve_accelerate(accelerate, inputs)
    settings.update(starts=starts if isinstance(starts, str) else "given",
                    explicit_starts=not isinstance(starts, str), accelerate=accelerated)
    out = run_em(inputs, n_starts=settings["n_starts"], seed=seed, max_iter=settings["max_iter"], tol=settings["tol"],
                 min_gap=settings["min_gap"], prior_counts=prior_counts, starts=starts,
                 annotator_ids=data.annotator_ids, orientation=orientation, accelerate=accelerated)
    return em_result(data, model, assignment, inputs, out, prior, notes, func, loglik=out.get("loglik", np.nan),
                     settings=settings)


def start_point(data, inputs, model: str, seed: int = 0):
    """A maximum-likelihood EM estimate to start an optimiser or sampler from, as a ``point`` dict (or None).

    The selection of :func:`fit_em` (converged starts first, else the best one stopped by ``max_iter``: a start
    needs no convergence); None only when no EM start gives an estimate.

    Grouped models: EM on their own compressed table (the monotone model then sorts the prevalences).
    Platt: channels from EM on 5 equal-mass score groups, and the slope and intercept from a weighted
    least-squares line through ``(mean logit score, logit prevalence)`` of those groups.
    """
    if model == "platt":
        assignment = resolve_assignment(data, "grouped", Binning.equal_mass(5), "start_point")
        em_inputs = prepare_inputs(data, "grouped", assignment)
    else:
        em_inputs = inputs
    out = run_em(em_inputs, n_starts=10, seed=seed, max_iter=1000, tol=1e-8, min_gap=0.0, prior_counts=None)
    if out["selected"] is None:
        return None
    if model != "platt":
        prev = np.sort(out["prevalence"]) if model == "monotone" else out["prevalence"]
        return point_dict(model, out["fpr"], out["tpr"], prev)
    s = np.asarray(inputs.logit_score)
    n_g = np.bincount(assignment.index, minlength=assignment.n_groups).astype(np.float64)
    s_g = np.bincount(assignment.index, weights=s, minlength=assignment.n_groups) / np.maximum(n_g, 1)
    p = np.clip(out["prevalence"], 0.01, 0.99)
    y = np.log(p) - np.log1p(-p)
    w = n_g / n_g.sum()
    sm, ym = w @ s_g, w @ y
    var = w @ (s_g - sm) ** 2
    slope = (w @ ((s_g - sm) * (y - ym))) / var if var > 0 else 1.0
    return point_dict("platt", out["fpr"], out["tpr"], slope=slope, intercept=ym - slope * sm)
