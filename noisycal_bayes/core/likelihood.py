"""Dawid-Skene log-likelihood with the latent label marginalised analytically (paper Appendix F.1).

``log P(A) = logaddexp(log(1 - pi_g) + l0, log pi_g + l1)``; K classes (Dawid & Skene 1979):
``L[p, y] = sum_{j observed} log C_j[y, A_pj]``. The K-class array functions run in NumPy on NumPy input and in
``jax.numpy`` on JAX arrays or tracers (:func:`_xp`). Details: docs/foundations.md, *noisycal_bayes.core.likelihood*.
"""
from functools import partial, wraps

import jax
import jax.numpy as jnp
import numpy as np

from .tables import PatternTable


# Rates of exactly 0 or 1 (a perfect annotator, an empty group) would give log(0) = -inf and NaN
# gradients; clipping costs nothing measurable in the likelihood.
_EPS = 1e-12


def _eager_jit(fn=None, *, static_argnames=()):
    """``fn`` compiled with ``jax.jit`` when called on concrete inputs (NumPy or JAX arrays), and ``fn`` itself
    when any input is a tracer (inside ``jit``, ``grad``, ``vmap``).

    Called eagerly, a function of many ``jax.numpy`` operations compiled one small program per operation and
    input shape (~0.05 s each, most of the op-by-op compile time of the test suite); jitted it compiles one fused
    program per shape. Inside traced code (the EM loops, the NUTS model) the function is traced as before, so
    the compiled programs there, and their numbers, are unchanged.
    """
    if fn is None:
        return partial(_eager_jit, static_argnames=static_argnames)
    jitted = jax.jit(fn, static_argnames=static_argnames)

    @wraps(fn)
    def call(*args, **kwargs):
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((args, kwargs))):
            return fn(*args, **kwargs)
        return jitted(*args, **kwargs)

    call.jitted = jitted  # its ``_cache_size()`` counts the compiled programs
    return call


def _log(p):
    return jnp.log(jnp.clip(p, _EPS, 1.0))


@_eager_jit
def pattern_loglik(patterns, fpr, tpr):
    """``(l0, l1)``: log-probability of each response pattern given Y = 0 and Y = 1, each (n_rows,).

    ``patterns`` is (n_rows, n_annotators) with 0/1 and -1 for missing.
    """
    # One product [pos, neg] (n_rows, 2J) @ [[log a, log b], [log(1 - a), log(1 - b)]] (2J, 2): the logs are
    # taken 2J times, whereas XLA recomputed a broadcast log inside the fused (n_rows, J) loop (measured 4x
    # faster under vmap over EM starts, 2-3x for a gradient at J = 8, never slower).
    dtype = jnp.result_type(fpr, tpr)
    ind = jnp.concatenate([patterns == 1, patterns == 0], axis=-1).astype(dtype)
    logs = jnp.stack([jnp.concatenate([_log(fpr), _log(1 - fpr)], axis=-1),
                      jnp.concatenate([_log(tpr), _log(1 - tpr)], axis=-1)], axis=-1)
    both = ind @ logs
    return both[..., 0], both[..., 1]


@_eager_jit
def response_loglik(label, fpr, tpr):
    """``(l0, l1)`` of single responses ``label`` (0/1), each with its own rates (same shape as ``label``)."""
    pos = label == 1
    return jnp.where(pos, _log(fpr), _log(1 - fpr)), jnp.where(pos, _log(tpr), _log(1 - tpr))


@_eager_jit
def ds_loglik_rows(patterns, group, fpr, tpr, prevalence):
    """Marginal log-likelihood of each row (pattern or item), shape (n_rows,).

    ``prevalence`` is (n_groups,) indexed by ``group`` (n_rows,), or (n_rows,) per-row ``P(Y=1)``
    when ``group`` is None (calibration-curve models).
    """
    l0, l1 = pattern_loglik(patterns, fpr, tpr)
    log_neg, log_pos = _row_logs(prevalence, group)
    return jnp.logaddexp(log_neg + l0, log_pos + l1)


def _row_logs(prevalence, group):
    """``(log(1 - pi), log pi)`` per row: of the G group prevalences, then gathered (G logs instead of one per
    row: a float64 log costs ~10 ns on CPU), or of per-row prevalences when ``group`` is None."""
    if group is None:
        return _log(1 - prevalence), _log(prevalence)
    return _log(1 - prevalence)[group], _log(prevalence)[group]


def log_add(a, b):
    """``log(exp(a) + exp(b))`` for finite ``a``, ``b`` (elementwise).

    Unlike ``jnp.logaddexp`` it does not guard against infinities (the logs here are clipped, so never
    infinite); its gradient then compiles to a few fused kernels instead of many. Used on the small grid of
    :func:`grid_loglik`, where that overhead dominates a NUTS gradient; on per-item rows (arithmetic-bound)
    ``jnp.logaddexp`` measured as fast or faster.
    """
    m = jax.lax.stop_gradient(jnp.maximum(a, b))
    return m + jnp.log(jnp.exp(a - m) + jnp.exp(b - m))


@_eager_jit
def grid_loglik(patterns, fpr, tpr, prevalence):
    """Marginal log-likelihood of every pattern in every group, shape (n_groups, n_patterns).

    Entry ``[g, k]`` is ``log P(patterns[k] | group g)``. The same numbers as ``ds_loglik_rows`` on the table
    whose row ``g * n_patterns + k`` is ``patterns[k]`` in group ``g``, without gathering the prevalence per
    row: the pattern terms are computed once for all groups (about 3x faster NUTS gradients on CPU).
    """
    # Annotators along the leading axis: the sums over them are adds of whole rows, which XLA fuses on CPU (a
    # reduction over a trailing axis of length J does not: 1.6x on this gradient). On per-item rows the
    # layout of pattern_loglik is the faster one (2x, measured at 2e4 items).
    t = jnp.asarray(patterns).T
    pos, neg = (t == 1).astype(fpr.dtype), (t == 0).astype(fpr.dtype)

    def loglik(rate):
        return jnp.sum(pos * _log(rate)[..., :, None] + neg * _log(1 - rate)[..., :, None], axis=-2)

    l0, l1 = loglik(fpr), loglik(tpr)
    return log_add(_log(1 - prevalence)[..., :, None] + l0[..., None, :],
                   _log(prevalence)[..., :, None] + l1[..., None, :])


@_eager_jit
def ds_loglik(patterns, group, counts, fpr, tpr, prevalence):
    """Total log-likelihood ``sum_rows counts * log P(row)`` (a scalar)."""
    return jnp.sum(counts * ds_loglik_rows(patterns, group, fpr, tpr, prevalence))


@_eager_jit
def posterior_positive(patterns, group, fpr, tpr, prevalence):
    """E-step: ``P(Y = 1 | A, g)`` per row, shape (n_rows,)."""
    l0, l1 = pattern_loglik(patterns, fpr, tpr)
    log_neg, log_pos = _row_logs(prevalence, group)
    return jax.nn.sigmoid(log_pos + l1 - log_neg - l0)


# ---------------------------------------------------------------------------------------------------------------
# K classes: the same formulas in NumPy or jax.numpy (docs/foundations.md).


def _is_traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _xp(*arrays):
    """``jax.numpy`` when any argument is a JAX array (or a tracer under ``jit``/``vmap``), else NumPy: the same
    formulas run eagerly in NumPy (float64, nothing to compile) and traced in JAX."""
    return jnp if any(isinstance(a, jax.Array) for a in arrays) else np


def _segment_sum(xp, data, segment, n: int):
    """Sum of the rows of ``data`` (m, K) per ``segment`` (m,) into (n, K)."""
    if xp is jnp:
        return jax.ops.segment_sum(data, segment, num_segments=n)
    return np.stack([np.bincount(segment, weights=data[:, k], minlength=n) for k in range(data.shape[1])], axis=1)


def _log_clip(x):
    # Clip as the binary likelihood does: an exact 0 becomes log 1e-12, not -inf (EM can reach zero cells).
    xp = _xp(x)
    return xp.log(xp.clip(xp.asarray(x), _EPS, 1.0))


def _one_hot(xp, labels, K: int, dtype):
    """``labels[..., None] == arange(K)`` as numbers; a label of -1 gives a zero row."""
    return (labels[..., None] == xp.arange(K)).astype(dtype)


def multiclass_pattern_loglik(patterns, confusion):
    """``L[p, y] = sum_{j observed} log C_j[y, patterns[p, j]]``, shape (P, K); ``-1`` = missing (adds 0).

    A matrix product of the one-hot patterns (P, J x K) with the log confusions (J x K, K): dense work, no gather.
    """
    xp = _xp(patterns, confusion)
    logc = _log_clip(xp.asarray(confusion))                            # (J, K, K)
    onehot = _one_hot(xp, xp.asarray(patterns), logc.shape[1], logc.dtype)   # (P, J, K)
    return xp.einsum("pja,jya->py", onehot, logc)


def class_log_joint(table, log_confusion, log_prevalence):
    """``log P(Y = y, A_row)`` per row (pattern or item) and class, shape (n_rows, K); ``-inf`` off a gold label.

    Parameters
    ----------
    table : PatternTable or SparseTable
    log_confusion : array of shape (J, K, K)
        ``log C[j, y, a]``.
    log_prevalence : array of shape (G, K)

    Notes
    -----
    Patterns: ``sum_j log C[j, y, a_j]`` is one product of the one-hot responses (R, J K) with the stacked
    ``log C[j, y, a]`` (J K, K) (missing responses are all-zero rows of the one-hot, so they drop out).
    Responses: ``log C[j_r, :, a_r]`` (n_responses, K) summed over each item's run of responses (sorted:
    ``indices_are_sorted=True``).
    """
    n_ann, k, _ = log_confusion.shape
    if isinstance(table, PatternTable):
        # One gather of log C[j, :, a_j] per annotator (a_j = -1, missing, adds 0), not a one-hot matrix product
        # (the same numbers, slower inside the NUTS loop: docs/performance.md, K-class NUTS section).
        ll = 0.0
        for j in range(n_ann):
            a = table.patterns[:, j]
            ll = ll + jnp.where((a >= 0)[:, None], log_confusion[j].T[jnp.maximum(a, 0)], 0.0)
        group, gold = table.group, table.gold
    else:
        per_response = log_confusion[table.annotator, :, table.label]  # (n_responses, K)
        ll = jax.ops.segment_sum(per_response, table.item, num_segments=table.item_group.shape[0],
                                 indices_are_sorted=True)
        group, gold = table.item_group, table.gold
    joint = ll + log_prevalence[group]
    # A gold item: only its known class has positive probability (observed latent label).
    keep = (gold[:, None] < 0) | (gold[:, None] == jnp.arange(k))
    return jnp.where(keep, joint, -jnp.inf)


def multiclass_loglik_rows(table, log_confusion, log_prevalence):
    """``log P(A_row)`` (``log P(Y = gold, A_row)`` for gold rows) per row, shape (n_rows,) (not times counts)."""
    return jax.nn.logsumexp(class_log_joint(table, log_confusion, log_prevalence), axis=-1)


# Probabilities of exactly 0 (an empty row entry at a boundary draw) would give log 0 = -inf and NaN gradients in
# the K-class NumPyro models; this floor changes no likelihood value measurably.
TINY = 1e-300


def tiny_log(p):
    """``log p`` with ``p`` clipped into ``[tiny, 1]``, ``tiny`` = :data:`TINY` in float64 (the K-class models)."""
    p = jnp.asarray(p)
    # The floor in p's own type: 1e-300 would round to 0 in float32 (log 0 = -inf).
    tiny = TINY if p.dtype == jnp.float64 else float(jnp.finfo(p.dtype).tiny)
    return jnp.log(jnp.clip(p, tiny, 1.0))


def rows_class_log_joint(row, annotator, label, n_rows: int, group, gold, log_confusion, log_prevalence):
    """``log P(Y = y, A_row)`` per row (item or pattern row) and class in NumPy float64, shape (n_rows, K).

    ``(row, annotator, label)`` are the responses (row index, annotator, label), ``group`` (n_rows,) the rows'
    groups, ``gold`` (n_rows,) -1 or a known class (``-inf`` off it; None: no gold), ``log_confusion`` (J, K, K)
    and ``log_prevalence`` (G, K) the (clipped) logs. :func:`class_log_joint` in NumPy: nothing to compile.
    """
    k = log_confusion.shape[-1]
    per = log_confusion[annotator, :, label]                               # (n_responses, K)
    out = np.stack([np.bincount(row, weights=per[:, y], minlength=n_rows) for y in range(k)], axis=1)
    out += log_prevalence[group]
    if gold is not None:
        out = np.where((gold[:, None] < 0) | (gold[:, None] == np.arange(k)[None, :]), out, -np.inf)
    return out


def logsumexp_rows(a):
    """``log sum_k exp a[:, k]`` per row of a NumPy (n, K) array."""
    m = np.max(a, axis=1, keepdims=True)
    return m[:, 0] + np.log(np.sum(np.exp(a - m), axis=1))  # the max shifted out: no overflow


def softmax_rows(x):
    """``softmax`` over the last axis of a NumPy array."""
    x = x - x.max(axis=-1, keepdims=True)  # shift by the row maximum: exp never overflows
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)
