"""Sufficient statistics: counts of distinct (group, response pattern) rows, and per-bin sums; binary keys in base 3
(the layout of :class:`~noisycal_bayes.data.SufficientStats`), K-class keys in base ``K + 1``. Details:
docs/foundations.md, *noisycal_bayes.data.compress*.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..core.tables import PatternTable, SparseTable


class PatternCounts(NamedTuple):
    """Compressed responses.

    patterns : (n_patterns, n_annotators) int8, 0/1 and -1 for missing
    group : (n_patterns,) int32
    counts : (n_patterns,) float64 (0 for padding rows)
    n_groups : int
    inverse : (n_items,) int64 row of each item, or None for padded/merged tables
    """

    patterns: np.ndarray
    group: np.ndarray
    counts: np.ndarray
    n_groups: int
    inverse: np.ndarray | None = None


#: Items per chunk of the bounded-memory pass (its temporaries are a few arrays of this length).
_CHUNK = 1 << 18
#: Largest number of possible (group, pattern) codes counted in a dense table (8 bytes each).
_DENSE_CODES = 1 << 20


def pattern_keys(patterns, group=None, n_annotators: int | None = None, base: int = 3) -> np.ndarray:
    """Integer key of each (group, response pattern) row: ``group * base**J + code``.

    ``code`` spells the pattern in base 3 with digits ``A_j + 1`` (0 = missing, 1 = label 0, 2 = label 1),
    the first annotator most significant: the row order of :func:`compress_patterns`, :func:`all_patterns`
    and :func:`grid_patterns`, and the key of :class:`~noisycal_bayes.data.SufficientStats` rows. Keys fit
    int64 for ``J <= 36`` annotators without groups (fewer with many groups). K-class statistics spell class
    indices in ``base = K + 1`` the same way (digit ``k + 1`` = class ``k``; K = 2 is the binary key).

    Parameters
    ----------
    patterns : array-like of shape (n_rows, n_annotators), -1 = missing
    group : array-like of shape (n_rows,), optional
        Group of each row (default: all 0, the key is the pattern's code).
    n_annotators : int, optional
        ``J`` (default: ``patterns.shape[1]``).
    base : int, default 3
        ``K + 1`` for labels in ``0..K-1``.

    Returns
    -------
    ndarray of shape (n_rows,), int64

    Examples
    --------
    >>> pattern_keys([[-1, 0, 1], [1, 1, 1]], [0, 2]).tolist()
    [5, 80]
    """
    patterns = np.asarray(patterns)
    j = patterns.shape[1] if n_annotators is None else int(n_annotators)
    key = np.zeros(patterns.shape[0], np.int64) if group is None else np.asarray(group, dtype=np.int64) * base ** j
    for col in range(j):
        key = key + (patterns[:, col].astype(np.int64) + 1) * base ** (j - 1 - col)
    return key


def _compress_dense(labels: np.ndarray, group, n_groups: int) -> PatternCounts | None:
    """The base-3 codes counted chunk by chunk in a dense table of all ``n_groups * 3**J`` codes.

    Gives exactly what the ``np.unique`` route gives (rows in increasing code order, the same inverse), but
    its memory is the inverse index (8 bytes per item) plus chunk-sized temporaries, instead of several
    int64 arrays of the full length for sorting (docs/performance.md, *Implementation choices*). Returns None
    when the codes do not fit the dense table or the input is out of range (the caller then sorts).
    """
    n, j = labels.shape
    base = 3 ** j
    space = n_groups * base
    if space > _DENSE_CODES:
        return None
    counts = np.zeros(space, dtype=np.int64)
    inverse = np.empty(n, dtype=np.intp)
    for start in range(0, n, _CHUNK):
        lab = labels[start:start + _CHUNK]
        g = np.zeros(lab.shape[0], np.int64) if group is None else np.asarray(group[start:start + _CHUNK], np.int64)
        if lab.size and (lab.min() < -1 or lab.max() > 1):
            return None
        if g.size and (g.min() < 0 or g.max() >= n_groups):
            return None
        code = pattern_keys(lab, g, j)
        inverse[start:start + lab.shape[0]] = code
        counts += np.bincount(code, minlength=space)
    uniq = np.flatnonzero(counts)
    # Rank of each code among the present ones, by a lookup table over the (small) code space: the same as
    # np.searchsorted(uniq, code), without a binary search per item.
    rank = np.zeros(space, dtype=np.intp)
    rank[uniq] = np.arange(uniq.size)
    for start in range(0, n, _CHUNK):
        inverse[start:start + _CHUNK] = rank[inverse[start:start + _CHUNK]]
    # Decode each code back into its group and pattern (digit 0 = missing, 1 = label 0, 2 = label 1).
    rest = uniq % base
    patterns = np.empty((uniq.size, j), dtype=np.int8)
    for col in range(j - 1, -1, -1):
        patterns[:, col] = rest % 3 - 1
        rest //= 3
    return PatternCounts(patterns, (uniq // base).astype(np.int32), counts[uniq].astype(np.float64), n_groups,
                         inverse)


def compress_patterns(labels: np.ndarray, group: np.ndarray | None = None, n_groups: int | None = None) -> PatternCounts:
    """Count distinct (group, pattern) rows of ``labels`` (n_items, n_annotators) with -1 = missing."""
    labels = np.asarray(labels, dtype=np.int8)
    n, j = labels.shape
    if group is None:
        n_groups = 1
    elif n_groups is None:
        n_groups = int(np.max(group)) + 1
    n_groups = int(n_groups)
    if j <= 12:
        dense = _compress_dense(labels, group, n_groups)
        if dense is not None:
            return dense
    group = np.zeros(n, dtype=np.int64) if group is None else np.asarray(group, dtype=np.int64)
    # Base-3 key of each row times the group: one int64 per item, so np.unique sorts integers instead of rows
    # (when the keys fit int64; otherwise it sorts the rows).
    code = pattern_keys(labels, group, j) if j <= 33 and n_groups * 3 ** j < 2 ** 62 else None
    if code is not None:
        uniq, first, inverse, counts = np.unique(code, return_index=True, return_inverse=True, return_counts=True)
    else:
        rows = np.concatenate([group[:, None], labels.astype(np.int64)], axis=1)
        uniq, first, inverse, counts = np.unique(rows, axis=0, return_index=True, return_inverse=True,
                                                 return_counts=True)
    return PatternCounts(labels[first], group[first].astype(np.int32), counts.astype(np.float64), n_groups,
                         inverse.reshape(-1))


def pad_patterns(pc: PatternCounts, size: int) -> PatternCounts:
    """Pad to ``size`` rows with zero-count rows, so that one compiled function serves many data sets."""
    p = pc.patterns.shape[0]
    if size < p:
        raise ValueError(f"cannot pad {p} patterns down to {size}.")
    extra = size - p
    patterns = np.concatenate([pc.patterns, np.full((extra, pc.patterns.shape[1]), -1, np.int8)])
    group = np.concatenate([pc.group, np.zeros(extra, np.int32)])
    counts = np.concatenate([pc.counts, np.zeros(extra)])
    return PatternCounts(patterns, group, counts, pc.n_groups, pc.inverse)


def all_patterns(n_annotators: int) -> np.ndarray:
    """Every response pattern of ``n_annotators`` (-1 = missing, 0, 1), shape (3**J, J), int8.

    Row ``k`` is the pattern whose base-3 digits ``A_j + 1`` (first annotator most significant) spell ``k``:
    the order of ``itertools.product([-1, 0, 1], repeat=J)`` and of :func:`grid_patterns` tables.
    """
    k = np.arange(3 ** n_annotators)
    digits = (k[:, None] // 3 ** np.arange(n_annotators - 1, -1, -1)) % 3
    return (digits - 1).astype(np.int8)


def grid_patterns(pc: PatternCounts) -> PatternCounts:
    """The table with every (group, pattern) cell, in a fixed order: ``n_groups * 3**J`` rows.

    Row ``g * 3**J + k`` holds pattern ``k`` of :func:`all_patterns` in group ``g``, with its count (0 when
    absent). The likelihood is the same as on ``pc`` (zero counts drop out), and a model told the layout
    (``grid=True``) evaluates it without per-row gathers. ``inverse`` is mapped to the new rows.
    """
    j = pc.patterns.shape[1]
    width = 3 ** j
    code = pattern_keys(pc.patterns, pc.group, j)
    counts = np.bincount(code, weights=pc.counts, minlength=pc.n_groups * width)
    patterns = np.tile(all_patterns(j), (pc.n_groups, 1))
    group = np.repeat(np.arange(pc.n_groups, dtype=np.int32), width)
    inverse = None if pc.inverse is None else code[pc.inverse]
    return PatternCounts(patterns, group, counts, pc.n_groups, inverse)


def padded_size(n_patterns: int, n_groups: int, n_annotators: int) -> int:
    """A pattern-table size fixed by the design: ``n_groups * 3**J`` when small, else the next power of 2."""
    full = n_groups * 3 ** n_annotators if n_annotators <= 12 else None
    if full is not None and full <= 4096:
        return full
    return int(2 ** int(np.ceil(np.log2(max(n_patterns, 1)))))


# ------------------------------------------------------------------------------------------------ K classes
def sparse_table(item, annotator, label, item_group, gold=None) -> SparseTable:
    """A :class:`SparseTable` from NumPy arrays (sorted by item if they are not; ``gold=None``: all unknown)."""
    item = np.asarray(item, np.int32)
    order = np.argsort(item, kind="stable") if item.size > 1 and np.any(np.diff(item) < 0) else slice(None)
    item_group = np.asarray(item_group, np.int32)
    gold = np.full(item_group.shape[0], -1, np.int32) if gold is None else np.asarray(gold, np.int32)
    return SparseTable(item[order], np.asarray(annotator, np.int32)[order], np.asarray(label, np.int32)[order],
                       item_group, gold)


def compress_multiclass(item, annotator, label, item_group, gold, *, n_items: int, n_annotators: int,
                        n_classes: int, pad_to: int | None = None):
    """``(PatternTable, inverse)``: distinct ``(group, gold, pattern)`` rows with counts; ``inverse`` (n_items,).

    One response per (item, annotator) pair is required (a dense pattern); the caller uses the sparse form
    otherwise. Rows are padded with zero-count rows up to ``pad_to`` (so that data sets of one design share a
    compiled sampler). ``inverse[i]`` is the row of item ``i``.
    """
    k1 = n_classes + 1
    dense = np.full((n_items, n_annotators), -1, np.int64)
    dense[np.asarray(item), np.asarray(annotator)] = np.asarray(label)
    gold = np.full(n_items, -1, np.int64) if gold is None else np.asarray(gold, np.int64)
    # One int64 key per item: group, then gold + 1, then each response + 1, in base K + 1 (the caller checks
    # that G (K+1)^(J+1) fits in int64).
    key = np.asarray(item_group, np.int64) * k1 + (gold + 1)
    for j in range(n_annotators):
        key = key * k1 + (dense[:, j] + 1)
    uniq, first, inverse, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    n_rows = uniq.size
    size = n_rows if pad_to is None else max(int(pad_to), n_rows)
    patterns = np.zeros((size, n_annotators), np.int32)
    patterns[:n_rows] = dense[first]
    group = np.zeros(size, np.int32)
    group[:n_rows] = np.asarray(item_group)[first]
    gold_rows = np.full(size, -1, np.int32)
    gold_rows[:n_rows] = gold[first]
    cnt = np.zeros(size, np.float64)
    cnt[:n_rows] = counts
    return PatternTable(patterns, group, gold_rows, cnt), inverse.reshape(-1).astype(np.int64)


def bucket_size(n: int) -> int:
    """``n`` rounded up to a size with 3 significant bits (>= 8): at most 1/8 padding, few distinct shapes to
    compile."""
    n = max(int(n), 8)
    step = 1 << max(n.bit_length() - 3, 0)
    return -(-n // step) * step


def class_pattern_grid(item, annotator, label, group, *, n_items: int, n_annotators: int, n_classes: int,
                       n_groups: int, weights=None):
    """(group x pattern) counts of the items, ``(patterns (P, J), counts (G, P))``: the distinct response patterns
    (``-1`` missing) of K-class responses (one per (item, annotator) pair) and the items per (group, pattern) cell.
    ``P`` is padded (:func:`bucket_size`; padded patterns have count 0) so that few shapes are compiled.
    ``weights`` (n_items,): item ``i`` counts ``weights[i]`` times (the rows of K-class SufficientStats with their
    counts give the grid of their items)."""
    K1, J = n_classes + 1, n_annotators
    # Pattern code: sum_j (label_j + 1) (K + 1)^j (0 = missing), then the group as the most significant digit.
    digit = (label + 1) * (K1 ** annotator)
    if float(K1) ** J < 2.0**52:
        # bincount sums in float64: exact for integer codes below 2^53, and much faster than np.add.at.
        code = np.rint(np.bincount(item, weights=digit.astype(np.float64), minlength=n_items)).astype(np.int64)
    else:
        code = np.zeros(n_items, np.int64)
        np.add.at(code, item, digit)
    key = group.astype(np.int64) * K1**J + code
    space = n_groups * K1**J
    if space <= 1 << 22:
        counts = np.bincount(key, weights=weights, minlength=space)
        uniq = np.flatnonzero(counts)
        counts = counts[uniq]
    else:
        uniq, inverse = np.unique(key, return_inverse=True)
        counts = np.bincount(inverse.reshape(-1), weights=weights, minlength=uniq.size)
    codes, pattern_index = np.unique(uniq % K1**J, return_inverse=True)
    digits = (codes[:, None] // (K1 ** np.arange(J, dtype=np.int64))[None, :]) % K1
    p = codes.size
    p_pad = bucket_size(p)
    patterns = np.full((p_pad, J), -1, np.int32)
    patterns[:p] = digits - 1
    grid = np.zeros((n_groups, p_pad))
    grid[uniq // K1**J, pattern_index.reshape(-1)] = counts
    return patterns, grid
