"""Binned calibration error: ECE, SMECE and NC-ECE from per-bin sufficient statistics (paper §3), and the top-label
and class-wise ECEs of K classes against any targets (one-hot, vote distribution, corrected vectors). Details:
docs/foundations.md, *noisycal_bayes.core.calibration*.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_probs
from .likelihood import _eager_jit  # one fused program per shape on concrete inputs; traced as before otherwise
from .tables import BinStats
from .weights import rule_weights


def bin_stats(labels, scores, bin_idx, n_bins: int, item_weights=None) -> BinStats:
    """One pass over the items: sufficient statistics for NC-ECE (NumPy, float64).

    Parameters
    ----------
    labels : (n_items, n_annotators) int, -1 = missing
    scores : (n_items,)
    bin_idx : (n_items,) int in ``0..n_bins-1``
    item_weights : (n_items,), optional
        Weights per item (e.g. Bayesian-bootstrap Dirichlet weights times n); default 1.
    """
    labels = np.asarray(labels)
    dense = _bin_stats_dense(labels, scores, bin_idx, int(n_bins), item_weights)
    if dense is not None:
        return dense
    obs = labels >= 0
    j = labels.shape[1]
    # Key each item by (bin, mask): the mask as a bit pattern when it fits in 62 bits, else by rows.
    if j <= 50:
        key = np.asarray(bin_idx, dtype=np.int64) << j
        key = key | (obs.astype(np.int64) << np.arange(j, dtype=np.int64)).sum(axis=1) if j else key
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    else:
        rows = np.concatenate([np.asarray(bin_idx)[:, None], obs], axis=1).astype(np.int64)
        uniq, first, inv = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    r = first.size
    w = np.ones(labels.shape[0]) if item_weights is None else np.asarray(item_weights, dtype=np.float64)
    count = np.bincount(inv, weights=w, minlength=r)
    score_sum = np.bincount(inv, weights=w * np.asarray(scores, dtype=np.float64), minlength=r)
    pos = (labels == 1) * w[:, None]
    label_sum = np.stack([np.bincount(inv, weights=pos[:, k], minlength=r) for k in range(j)], axis=1)
    return BinStats(np.asarray(bin_idx)[first].astype(np.int32), obs[first], count, label_sum, score_sum, int(n_bins))


#: Items per chunk of the bounded-memory pass, and the largest dense table of (bin, mask) keys.
_CHUNK = 1 << 18
_DENSE_KEYS = 1 << 16


def _bin_stats_dense(labels, scores, bin_idx, n_bins: int, item_weights) -> BinStats | None:
    """:func:`bin_stats` chunk by chunk into a dense table of all ``n_bins * 2**J`` (bin, mask) keys.

    The same rows in the same order as the ``np.unique`` route (increasing key), with memory bounded by
    the table and chunk-sized temporaries instead of several full-length arrays (docs/performance.md,
    *Implementation choices*). None when the table would be too large or a bin index is out of range.
    """
    n, j = labels.shape
    if j > 16 or n_bins << j > _DENSE_KEYS:
        return None
    space = n_bins << j
    present = np.zeros(space, dtype=np.int64)
    count = np.zeros(space)
    score_sum = np.zeros(space)
    label_sum = np.zeros((space, j))
    bits = np.int64(1) << np.arange(j, dtype=np.int64)
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        lab = labels[start:stop]
        b = np.asarray(bin_idx[start:stop], dtype=np.int64)
        if b.size and (b.min() < 0 or b.max() >= n_bins):
            return None
        key = (b << j) | ((lab >= 0).astype(np.int64) @ bits if j else 0)
        w = np.ones(stop - start) if item_weights is None else np.asarray(item_weights[start:stop], dtype=np.float64)
        present += np.bincount(key, minlength=space)
        count += np.bincount(key, weights=w, minlength=space)
        score_sum += np.bincount(key, weights=w * np.asarray(scores[start:stop], dtype=np.float64), minlength=space)
        for k in range(j):
            label_sum[:, k] += np.bincount(key, weights=(lab[:, k] == 1) * w, minlength=space)
    used = np.flatnonzero(present)
    mask = ((used[:, None] >> np.arange(j)) & 1).astype(bool)
    return BinStats((used >> j).astype(np.int32), mask, count[used], label_sum[used], score_sum[used], int(n_bins))


def pad_bin_stats(stats: BinStats, size: int | None = None) -> BinStats:
    """Pad the rows with empty ones (count 0) to ``size``, by default the next power of two >= 8.

    The number of distinct (bin, mask) rows changes from data set to data set; padding keeps array
    shapes in a few sizes so that JAX does not recompile for every new data set or bootstrap
    replicate. A padding row has count 0 and label sums 0, so it adds nothing to any bin; its mask
    is all True only to keep the per-row weight normalisation finite.
    """
    r = stats.count.size
    size = max(8, 1 << max(r - 1, 0).bit_length()) if size is None else int(size)
    if size < r:
        raise ValueError(f"cannot pad {r} rows down to {size}.")
    extra = size - r
    if extra == 0:
        return stats
    j = stats.mask.shape[1]
    return BinStats(np.concatenate([stats.bin, np.zeros(extra, stats.bin.dtype)]),
                    np.concatenate([stats.mask, np.ones((extra, j), bool)]),
                    np.concatenate([stats.count, np.zeros(extra)]),
                    np.concatenate([stats.label_sum, np.zeros((extra, j))]),
                    np.concatenate([stats.score_sum, np.zeros(extra)]), stats.n_bins)


def _row_corrected_sums(stats: BinStats, fpr, gap, weights):
    """Per row: sum over its items of the combined corrected label, shape (n_rows,)."""
    w = jnp.where(stats.mask, weights, 0.0)
    W = w / jnp.sum(w, axis=1, keepdims=True)
    per_ann = (stats.label_sum - stats.count[:, None] * fpr) / gap
    return jnp.sum(jnp.where(stats.mask, W * per_ann, 0.0), axis=1)


def _resolve_weights(stats, fpr, gap, weights):
    if isinstance(weights, str):
        mu = None
        if weights == "iv":
            eq = _row_corrected_sums(stats, fpr, gap, jnp.ones_like(gap))
            mu = jnp.sum(eq) / jnp.sum(stats.count)
        return rule_weights(weights, fpr, gap, mu)
    w = jnp.asarray(weights)
    return w / jnp.sum(w)


@_eager_jit(static_argnames=("n_bins", "rule"))
def _bin_table(arrays, fpr, gap, weights, *, n_bins: int, rule):
    """:func:`bin_table` on the arrays of a BinStats (``n_bins`` and a rule name static): one fused program per
    shape on concrete inputs instead of one small program per operation."""
    stats = BinStats(*arrays, n_bins)
    w = _resolve_weights(stats, fpr, gap, rule if rule is not None else weights)
    row = _row_corrected_sums(stats, fpr, gap, w)
    seg = lambda x: jax.ops.segment_sum(x, stats.bin, num_segments=n_bins)  # noqa: E731
    return seg(stats.count), seg(stats.score_sum), seg(row), w


def bin_table(stats: BinStats, fpr, gap, weights="iv"):
    """Per-bin count, score sum, corrected-label sum and the weights used.

    Returns
    -------
    count, score_sum, corrected_sum : arrays of shape (n_bins,)
    weights : array of shape (n_annotators,)
    """
    rule = weights if isinstance(weights, str) else None
    return _bin_table(tuple(stats[:5]), fpr, gap, None if rule is not None else weights, n_bins=int(stats.n_bins),
                      rule=rule)


def nc_ece_from_stats(stats: BinStats, fpr, gap, weights="iv"):
    """NC-ECE ``sum_k |sum_{i in B_k} Rtilde_i| / n`` from sufficient statistics (a scalar).

    ``weights`` is a rule name (``"iv"``, ``"equal"``, ``"gap"``, ``"squared_gap"``) or an array of
    shape (n_annotators,). With ``fpr = 0, gap = 1`` this is the plain binned ECE.
    """
    rule = weights if isinstance(weights, str) else None
    return _nc_ece(tuple(stats[:5]), fpr, gap, None if rule is not None else weights, n_bins=int(stats.n_bins),
                   rule=rule)


@_eager_jit(static_argnames=("n_bins", "rule"))
def _nc_ece(arrays, fpr, gap, weights, *, n_bins: int, rule):
    count, score_sum, corrected_sum, _ = _bin_table(arrays, fpr, gap, weights, n_bins=n_bins, rule=rule)
    return jnp.sum(jnp.abs(corrected_sum - score_sum)) / jnp.sum(count)


@_eager_jit(static_argnames=("n_bins",))
def binned_abs_residual(bin_idx, residual, n_bins: int, item_weights=None):
    """``sum_k |sum_{i in B_k} r_i| / sum_i 1`` — the common core of ECE, SMECE and NC-ECE."""
    w = jnp.ones_like(residual) if item_weights is None else item_weights
    sums = jax.ops.segment_sum(w * residual, bin_idx, num_segments=n_bins)
    return jnp.sum(jnp.abs(sums)) / jnp.sum(w)


@_eager_jit(static_argnames=("n_bins",))
def ece_from_labels(scores, labels, bin_idx, n_bins: int):
    """Binned ECE ``sum_k (n_k / n) |mean_{B_k} (y - z)|`` for 0/1 or soft labels (SMECE)."""
    return binned_abs_residual(bin_idx, labels - scores, n_bins)


# ---------------------------------------------------------------------------------------------------------------
# K classes: score groups, top-label and class-wise ECE (docs/foundations.md).


def bin_index(scores, edges) -> np.ndarray:
    """Index of the half-open bin ``[e_k, e_{k+1})`` holding each score (the last bin includes 1)."""
    edges = np.asarray(edges, dtype=np.float64)
    return np.searchsorted(edges[1:-1], np.asarray(scores, dtype=np.float64), side="right").astype(np.int32)


def score_groups(probs, *, n_quantiles: int = 2) -> np.ndarray:
    """Score groups for the grouped model: predicted class x top-probability quantile within that class.

    Parameters
    ----------
    probs : array of shape (n_items, K)
        Class probabilities, rows summing to 1.
    n_quantiles : int, default 2
        Quantile groups of the confidence ``max_k p_ik`` among the items predicted as each class.

    Returns
    -------
    ndarray of int32, shape (n_items,)
        ``g_i = yhat_i * n_quantiles + q_i`` in ``0 .. K * n_quantiles - 1``; groups may be empty.

    Notes
    -----
    ``q_i`` counts the within-class quantile edges (``np.quantile`` of the confidences of the items predicted
    as ``yhat_i``, at ``1/Q, ..., (Q-1)/Q``) lying below or at the item's confidence, capped at ``Q - 1``; tied
    confidences share a group.

    Examples
    --------
    >>> score_groups(np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8], [0.3, 0.7]]), n_quantiles=2).tolist()
    [1, 0, 3, 2]
    """
    p = check_probs(probs)
    q = int(n_quantiles)
    if q < 1:
        raise ValueError(f"`n_quantiles` must be a positive integer; got {n_quantiles!r}.")
    yhat = np.argmax(p, axis=1)
    conf = np.take_along_axis(p, yhat[:, None], axis=1)[:, 0]
    sub = np.zeros(p.shape[0], dtype=np.int64)
    if q > 1:
        # Per predicted class, its items' confidences: np.quantile selects order statistics by partitioning (O(m)),
        # so no sort of all the items is needed (a sort by (class, confidence) took 3x as long at 1e6 items).
        for k in np.flatnonzero(np.bincount(yhat, minlength=p.shape[1])):
            idx = np.flatnonzero(yhat == k)
            run = conf[idx]
            edges = np.quantile(run, np.arange(1, q) / q)
            sub[idx] = np.minimum(np.searchsorted(edges, run, side="right"), q - 1)
    return (yhat * q + sub).astype(np.int32)


class BinTable(NamedTuple):
    """Per-bin summary of a binned ECE: ``count`` (n_bins,), ``mean_probability`` and ``mean_target`` (n_bins,),
    NaN in empty bins (a reliability diagram plots ``mean_target`` against ``mean_probability``)."""

    count: np.ndarray
    mean_probability: np.ndarray
    mean_target: np.ndarray


class TopLabelECE(NamedTuple):
    """Top-label ECE: ``value``, per-bin ``table`` (:class:`BinTable`, on the confidence), bin ``edges`` (n_bins + 1,)
    and ``n_used`` (items with a finite target at their predicted class; the others are left out)."""

    value: float
    table: BinTable
    edges: np.ndarray
    n_used: int


class ClasswiseECE(NamedTuple):
    """Class-wise ECE: ``value`` (mean over classes), ``per_class`` (K,), bin ``edges`` (n_bins + 1,), or (K, n_bins +
    1) when a Binning gives each class its own edges (equal-mass bins)."""

    value: float
    per_class: np.ndarray
    edges: np.ndarray


def _bin_index(x, n_bins: int):
    # Equal-width bins [b/B, (b+1)/B), the last one closed: x = 1 goes to bin B - 1.
    return np.clip(np.floor(x * n_bins).astype(np.int64), 0, n_bins - 1)


def _check_bins(bins):
    """``bins`` as an int >= 1 or a bin rule (returned as given): an object with ``edges_for(x)`` giving edges of
    shape (n_bins + 1,) for the values ``x``, such as :class:`~noisycal_bayes.data.Binning` (the data layer's rule,
    which core does not import)."""
    if callable(getattr(bins, "edges_for", None)):
        return bins
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"`bins` must be a positive integer (equal-width bins on [0, 1]) or a Binning; got "
                         f"{bins!r}.")
    return int(bins)


def _edges_index(x, bins):
    """``(edges (n_bins + 1,), bin of each x, n_bins)`` for an int (equal-width) or a bin rule (checked)."""
    if isinstance(bins, int):
        return np.linspace(0.0, 1.0, bins + 1), _bin_index(x, bins), bins
    edges = bins.edges_for(x)
    return edges, bin_index(x, edges), edges.size - 1


def _check_targets(targets, shape) -> np.ndarray:
    t = np.asarray(targets, dtype=np.float64)
    if t.shape != shape:
        raise ValueError(f"`targets` must have the shape of `probs`, {shape}; got {t.shape}. Pass one-hot labels, "
                         "the vote distribution or corrected_targets(...).")
    return t


def _binned(x, t, bins):
    """``(value, BinTable, edges)`` of the binned ECE of scores ``x`` against targets ``t``."""
    edges, b, n_bins = _edges_index(x, bins)
    count = np.bincount(b, minlength=n_bins).astype(np.float64)
    sx = np.bincount(b, weights=x, minlength=n_bins)
    st = np.bincount(b, weights=t, minlength=n_bins)
    value = float(np.sum(np.abs(sx - st)) / max(x.size, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return value, BinTable(count, np.where(count > 0, sx / count, np.nan),
                               np.where(count > 0, st / count, np.nan)), edges


def top_label_ece(probs, targets, *, bins: int = 15) -> TopLabelECE:
    """Top-label ECE ``sum_b (n_b / n) |mean_{i in b} (c_i - targets[i, yhat_i])|`` on equal-width confidence bins.

    Parameters
    ----------
    probs : array of shape (n_items, K)
    targets : array of shape (n_items, K)
        One-hot labels (plain top-label ECE), the vote distribution (top-label SMECE) or
        :func:`corrected_targets` (top-label NC-ECE). Items whose target at ``yhat_i`` is NaN are left out.
    bins : int or Binning, default 15
        An int ``B``: equal-width bins ``[b/B, (b+1)/B)`` on the confidence ``c_i = max_k p_ik`` (the last bin
        closed); a :class:`~noisycal_bayes.data.Binning` (e.g. equal-mass) is computed on the confidences used.

    Returns
    -------
    TopLabelECE

    Examples
    --------
    >>> p = np.array([[0.8, 0.2], [0.7, 0.3], [0.4, 0.6]])
    >>> round(top_label_ece(p, np.eye(2)[[0, 1, 1]], bins=10).value, 4)
    0.4333
    """
    p = check_probs(probs)
    n_bins = _check_bins(bins)
    t = _check_targets(targets, p.shape)
    yhat = np.argmax(p, axis=1)
    rows = np.arange(p.shape[0])
    conf, tt = p[rows, yhat], t[rows, yhat]
    ok = np.isfinite(tt)
    value, table, edges = _binned(conf[ok], tt[ok], n_bins)
    return TopLabelECE(value, table, edges, int(ok.sum()))


def classwise_ece(probs, targets, *, bins: int = 15) -> ClasswiseECE:
    """Class-wise ECE: for each class ``k`` the binned ECE of ``p_ik`` against ``targets[i, k]``, and their mean.

    Parameters
    ----------
    probs, targets : arrays of shape (n_items, K)
        As :func:`top_label_ece`; items with a NaN target row are left out.
    bins : int or Binning, default 15
        An int: equal-width bins on ``p_ik`` (the same edges for every class); a
        :class:`~noisycal_bayes.data.Binning` is computed on each class's ``p_ik``.

    Returns
    -------
    ClasswiseECE

    Examples
    --------
    >>> p = np.array([[0.8, 0.2], [0.3, 0.7]])
    >>> r = classwise_ece(p, np.eye(2)[[0, 1]], bins=10)
    >>> round(r.value, 4), np.round(r.per_class, 4).tolist()
    (0.25, [0.25, 0.25])
    """
    p = check_probs(probs)
    n_bins = _check_bins(bins)
    t = _check_targets(targets, p.shape)
    ok = np.all(np.isfinite(t), axis=1)
    out = [_binned(p[ok, k], t[ok, k], n_bins) for k in range(p.shape[1])]
    per = np.array([o[0] for o in out])
    edges = [o[2] for o in out]
    same = all(e.shape == edges[0].shape and np.array_equal(e, edges[0]) for e in edges)
    return ClasswiseECE(float(per.mean()), per, edges[0] if same else np.stack(edges))
