"""The :class:`SufficientStats` container: (score bin or group, response pattern) counts that merge by addition."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..._validation import _preview
from ...core.calibration import bin_index
from ..binning import Binning
from ..compress import PatternCounts, compress_patterns, pattern_keys
from ._common import (MAX_ANNOTATORS, _base, _check_key_space, class_groups, _count_keys, _decode, _readonly,
                      _resolve_edges, _sorted_ids)


@dataclass(frozen=True, eq=False)
class SufficientStats:
    """Counts of distinct (score bin, response pattern) rows, and what is needed to fit from them.

    Build with :meth:`from_annotations` (in memory), :func:`stats_from_dask`, :func:`stats_from_chunks`,
    :func:`read_stats_csv` or :func:`read_stats_parquet`; add pieces with :meth:`merge`. Pass to
    ``fit_em``, ``fit_map`` or ``fit_nuts`` in place of an AnnotationSet (grouped models), and to
    :func:`~noisycal_bayes.propagate.posterior_nc_ece` / ``posterior_reliability`` (evaluated on these bins).

    K classes: the builders given K-class data (``classes=``) return :class:`MulticlassSufficientStats`.

    Attributes
    ----------
    patterns : ndarray of shape (n_patterns, n_annotators), int8 (int16 for K classes)
        Distinct response patterns, 0/1 (class indices ``0..K-1`` for K classes) and -1 for missing.
    group : ndarray of shape (n_patterns,), int32
        Score bin (K classes: group) of each row, ``0..n_bins-1`` (bins of ``edges``; 0 when there are no scores).
    counts : ndarray of shape (n_patterns,), float64
        Number of items with that (bin, pattern); all positive. Rows are in increasing order of the key
        ``bin * 3**J + code`` (docs/foundations.md), as in :func:`compress_patterns`; K classes:
        ``group * (K + 1)**J + code`` with digit ``k + 1`` for class ``k`` (K = 2 is the binary key).
    annotator_ids : tuple
        Annotator of each column of ``patterns``.
    edges : ndarray of shape (n_bins + 1,) or None
        Score edges (half-open bins, the last one closed); None when no scores were read (one bin).
    n_items : int
    n_responses : int
        Observed (item, annotator) labels.
    score_sum : ndarray of shape (n_bins,) or None
        Sum of the scores of the items in each bin (the mean score per bin is
        ``score_sum / bin_counts``); None without scores.
    row_score_sum, row_score_sq : ndarray of shape (n_patterns,) or None
        Per (bin, pattern) row: ``sum_i z_i`` and ``sum_i z_i**2`` over its items; their sum per bin is
        ``score_sum`` (checked to 1e-8 relative). The Bayesian bootstrap of
        :func:`~noisycal_bayes.propagate.posterior_nc_ece` needs them. None without scores, and in statistics
        made before they existed (recompute the statistics for the bootstrap).
    """

    patterns: np.ndarray
    group: np.ndarray
    counts: np.ndarray
    annotator_ids: tuple
    edges: np.ndarray | None = None
    n_items: int = 0
    n_responses: int = 0
    score_sum: np.ndarray | None = None
    row_score_sum: np.ndarray | None = None
    row_score_sq: np.ndarray | None = None
    # Binary statistics: no class names, and the bins of `edges` (fields of MulticlassSufficientStats, class
    # attributes here, so that the binary fields, pickles and goldens stay those of earlier versions).
    classes = None
    n_groups = None

    def __post_init__(self):
        binary = self.classes is None
        p = np.asarray(self.patterns, dtype=np.int8 if binary else np.int16)
        if p.ndim != 2 or p.shape[1] != len(self.annotator_ids):
            raise ValueError(f"`patterns` must have shape (n_patterns, {len(self.annotator_ids)}); got {p.shape}.")
        if binary and p.shape[1] > MAX_ANNOTATORS:
            raise ValueError(f"at most {MAX_ANNOTATORS} annotators are supported; got {p.shape[1]}.")
        if not binary:
            self._check_classes(p)
        object.__setattr__(self, "patterns", _readonly(p))
        object.__setattr__(self, "group", _readonly(np.asarray(self.group, dtype=np.int32)))
        object.__setattr__(self, "counts", _readonly(np.asarray(self.counts, dtype=np.float64)))
        object.__setattr__(self, "annotator_ids", tuple(self.annotator_ids))
        if self.edges is not None:
            object.__setattr__(self, "edges", _readonly(np.asarray(self.edges, dtype=np.float64)))
        if self.score_sum is not None:
            object.__setattr__(self, "score_sum", _readonly(np.asarray(self.score_sum, dtype=np.float64)))
        self._check_row_moments()
        object.__setattr__(self, "n_items", int(self.n_items))
        object.__setattr__(self, "n_responses", int(self.n_responses))

    def _check_classes(self, p: np.ndarray) -> None:
        """K-class fields: at least two classes, class indices and groups in range, no scores, keys in int64."""
        object.__setattr__(self, "classes", tuple(self.classes))
        k = len(self.classes)
        if k < 2:
            raise ValueError(f"`classes` must name at least two classes; got {list(self.classes)}.")
        bad = np.flatnonzero(((p < -1) | (p >= k)).any(axis=1))
        if bad.size:
            raise ValueError(f"K-class `patterns` hold class indices 0..{k - 1} (-1 = missing); rows "
                             f"{_preview(bad)} hold {_preview(np.unique(p[bad][(p[bad] < -1) | (p[bad] >= k)]))}.")
        if self.edges is not None or self.score_sum is not None or self.row_score_sum is not None:
            raise ValueError("K-class statistics count items per group label: they hold no score `edges` or score "
                             "sums.")
        n_groups = 1 if self.n_groups is None else int(self.n_groups)
        g = np.asarray(self.group)
        if n_groups < 1 or (g.size and (g.min() < 0 or g.max() >= n_groups)):
            raise ValueError(f"`group` must lie in 0..n_groups - 1 = {n_groups - 1}; got "
                             f"{_preview(np.unique(g[(g < 0) | (g >= n_groups)]))}.")
        object.__setattr__(self, "n_groups", n_groups)
        _check_key_space(p.shape[1], self.classes, n_groups)

    def _check_row_moments(self) -> None:
        """Both row moments or neither; shape (n_patterns,); their per-bin sum is ``score_sum``."""
        a, b = self.row_score_sum, self.row_score_sq
        if a is None and b is None:
            return
        if a is None or b is None:
            raise ValueError("`row_score_sum` and `row_score_sq` go together; got only one of them.")
        if self.score_sum is None:
            raise ValueError("`row_score_sum` / `row_score_sq` need per-bin `score_sum` (scores) as well.")
        n = self.patterns.shape[0]
        for name, v in (("row_score_sum", a), ("row_score_sq", b)):
            v = np.asarray(v, dtype=np.float64)
            if v.shape != (n,):
                raise ValueError(f"`{name}` must have shape (n_patterns,) = ({n},); got {v.shape}.")
            object.__setattr__(self, name, _readonly(v))
        per_bin = np.bincount(np.asarray(self.group), weights=self.row_score_sum, minlength=self.score_sum.size)
        bad = ~np.isclose(per_bin, self.score_sum, rtol=1e-8, atol=1e-8)
        if bad.any():
            raise ValueError(f"`row_score_sum` summed per bin differs from `score_sum` in bins "
                             f"{_preview(np.flatnonzero(bad))} ({_preview(per_bin[bad])} vs "
                             f"{_preview(self.score_sum[bad])}): they must describe the same items.")

    # ------------------------------------------------------------------ views
    @property
    def n_annotators(self) -> int:
        """Number of annotators (columns of ``patterns``)."""
        return self.patterns.shape[1]

    @property
    def n_bins(self) -> int:
        """Number of score bins (1 without scores); K classes: the number of groups."""
        if self.n_groups is not None:
            return self.n_groups
        return 1 if self.edges is None else self.edges.size - 1

    @property
    def kind(self) -> str:
        """``"binary"`` (labels 0/1) or ``"multiclass"`` (``classes`` set): the ``kind`` of the annotation set the
        statistics stand for, so that binary-only functions refuse K-class statistics as they refuse the set."""
        return "binary" if self.classes is None else "multiclass"

    @property
    def n_classes(self) -> int:
        """Number of classes: 2 for binary statistics, ``len(classes)`` for K classes."""
        return 2 if self.classes is None else len(self.classes)

    def to_binary(self) -> "SufficientStats":
        """The binary statistics of two-class statistics in one group (class index 1 the positive class): the
        same rows, whose keys coincide (base 3).

        Raises
        ------
        ValueError
            More than two classes; several groups (group labels are not the score bins binary statistics hold).
        """
        if self.classes is None:
            return self
        if len(self.classes) != 2:
            raise ValueError(f"to_binary: these statistics hold {len(self.classes)} classes "
                             f"{_preview(list(self.classes))}; only two-class statistics have a binary view.")
        if self.n_groups != 1:
            raise ValueError(f"to_binary: these statistics hold {self.n_groups} group labels, which binary statistics "
                             "(score bins of P(Y = 1)) cannot hold; compute binary statistics from the scores "
                             "(`bins=`) instead.")
        return SufficientStats(self.patterns, self.group, self.counts, self.annotator_ids, None, self.n_items,
                               self.n_responses)

    @property
    def n_patterns(self) -> int:
        """Number of distinct (bin, pattern) rows."""
        return self.patterns.shape[0]

    @property
    def bin_counts(self) -> np.ndarray:
        """Items per score bin, shape (n_bins,)."""
        return np.bincount(self.group, weights=self.counts, minlength=self.n_bins)

    @property
    def binning(self) -> Binning | None:
        """The score partition as a :class:`Binning` (None without scores)."""
        return None if self.edges is None else Binning.from_edges(self.edges)

    @property
    def observed(self) -> np.ndarray:
        """Which annotators labelled each distinct pattern, bool of shape (n_patterns, n_annotators).

        Stands in for ``AnnotationSet.observed`` in design checks (e.g. whether any item has two labels).
        """
        return self.patterns >= 0

    @property
    def labels(self):
        """None: the statistics keep no per-item labels."""
        return None

    @property
    def scores(self):
        """None: the statistics keep no per-item scores (see ``edges`` and ``score_sum``)."""
        return None

    def pattern_counts(self) -> PatternCounts:
        """The counts as :class:`PatternCounts` with ``n_groups = n_bins`` and ``inverse=None``."""
        return PatternCounts(np.asarray(self.patterns), np.asarray(self.group), np.asarray(self.counts), self.n_bins,
                             None)

    @property
    def has_row_moments(self) -> bool:
        """Whether per-row score sums and squared-score sums are held (needed by the Bayesian bootstrap)."""
        return self.row_score_sum is not None

    def to_frame(self) -> pd.DataFrame:
        """One row per (bin, pattern): columns ``bin`` (``group`` for K classes), one per annotator (-1 = missing),
        ``count`` and, when held, ``score_sum`` and ``score_sq`` (the row moments)."""
        out = pd.DataFrame(np.asarray(self.patterns), columns=list(self.annotator_ids))
        out.insert(0, "bin" if self.classes is None else "group", np.asarray(self.group))
        out["count"] = np.asarray(self.counts)
        if self.has_row_moments:
            out["score_sum"] = np.asarray(self.row_score_sum)
            out["score_sq"] = np.asarray(self.row_score_sq)
        return out

    def __repr__(self) -> str:
        kind = "" if self.classes is None else f"n_classes={self.n_classes}, n_groups={self.n_groups}, "
        bins = f"n_bins={self.n_bins}, " if self.classes is None else ""
        return (f"SufficientStats(n_items={self.n_items}, n_responses={self.n_responses}, "
                f"n_annotators={self.n_annotators}, {kind}{bins}n_patterns={self.n_patterns})")

    def same_as(self, other: "SufficientStats") -> bool:
        """True when both hold exactly the same counts, ids, edges, sizes (score sums and row moments to 1e-9
        relative; both or neither must hold row moments)."""
        if not isinstance(other, SufficientStats):
            return False
        sizes = ("annotator_ids", "n_items", "classes", "n_groups", "n_responses", "has_row_moments")
        if any(getattr(self, a) != getattr(other, a) for a in sizes):
            return False
        for a, b, same in ((self.edges, other.edges, np.array_equal),  # edges first: then score_sum's shapes agree
                           (self.score_sum, other.score_sum, lambda x, y: np.allclose(x, y, rtol=1e-9, atol=1e-9))):
            if (a is None) != (b is None) or (a is not None and not same(a, b)):
                return False
        if self.has_row_moments and self.n_patterns == other.n_patterns and not (
                np.allclose(self.row_score_sum, other.row_score_sum, rtol=1e-9, atol=1e-9)
                and np.allclose(self.row_score_sq, other.row_score_sq, rtol=1e-9, atol=1e-9)):
            return False
        return (np.array_equal(self.patterns, other.patterns) and np.array_equal(self.group, other.group)
                and np.array_equal(self.counts, other.counts))

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_annotations(cls, data, bins=None, *, groups=None) -> "SufficientStats":
        """Statistics of an in-memory :class:`~noisycal_bayes.AnnotationSet` (the reference for the other paths).

        Parameters
        ----------
        data : AnnotationSet or MulticlassAnnotationSet
            One label per (item, annotator) pair.
        bins : Binning, array of edges, or None
            Binary data: score bins (equal-mass edges come from ``data.scores``); None: one bin (the scores are
            not used, no score sums or row moments).
        groups : int array of shape (n_items,), optional
            K-class data: a group per item, as ``fit_em_multiclass``'s ``groups`` (``n_groups = max + 1``).
            Default: that fit's default, :func:`~noisycal_bayes.core.score_groups` of ``data.probs`` (``2 K``
            groups), one group without ``probs``.

        Examples
        --------
        >>> from noisycal_bayes import MulticlassAnnotationSet
        >>> data = MulticlassAnnotationSet.from_wide([[0, 2], [0, 2], [1, -1]])
        >>> stats = SufficientStats.from_annotations(data)
        >>> stats.patterns.tolist(), stats.counts.tolist(), stats.n_classes
        ([[0, 2], [1, -1]], [2.0, 1.0], 3)

        Rows follow the keys ``group * (K + 1)**J + code``, digits ``label + 1``: (0, 2) is 1 * 4 + 3 = 7, (1,
        missing) is 2 * 4 + 0 = 8.
        """
        if getattr(data, "kind", "binary") != "binary":
            return cls._from_classes(data, bins, groups)
        if groups is not None:
            raise ValueError("SufficientStats.from_annotations: `groups` are for K-class data (a group label per "
                             "item); binary statistics are counted per score bin (`bins=`).")
        if bins is not None and data.scores is None:
            raise ValueError("`bins` need scores, and this AnnotationSet has none.")
        data.require_one_label_per_pair("SufficientStats.from_annotations (one response pattern per item)",
                                        "Fit the AnnotationSet itself: fit_em's sparse path reads every response.")
        edges = _resolve_edges(bins, "score", lambda: data.scores)
        g = None if edges is None else bin_index(data.scores, edges)
        n_bins = 1 if edges is None else edges.size - 1
        pc = compress_patterns(data.labels, g, n_bins)
        if edges is None:
            return cls(pc.patterns, pc.group, pc.counts, tuple(data.annotator_ids), edges, data.n_items,
                       int(data.observed.sum()))
        z = np.asarray(data.scores, dtype=np.float64)
        score_sum = np.bincount(g, weights=z, minlength=n_bins)
        row_sum, row_sq = row_moments(pc.inverse, z, pc.counts.size)
        return cls(pc.patterns, pc.group, pc.counts, tuple(data.annotator_ids), edges, data.n_items,
                   int(data.observed.sum()), score_sum, row_sum, row_sq)

    @classmethod
    def _from_classes(cls, data, bins, groups) -> "SufficientStats":
        """:meth:`from_annotations` of K-class data: (group, pattern) keys in base ``K + 1``, counted."""
        func = "SufficientStats.from_annotations"
        if bins is not None:
            raise ValueError(f"{func}: K-class statistics are counted per group (`groups=`, a group label per item), "
                             "not per score bin; `bins` is for binary data.")
        data.require_one_label_per_pair(f"{func} (one response pattern per item)",
                                        "Fit the MulticlassAnnotationSet itself: fit_em's sparse path reads every "
                                        "response.")
        g, n_groups = class_groups(groups, data.probs, data.n_items, data.n_classes, func)
        _check_key_space(data.n_annotators, data.classes, n_groups)
        keys = pattern_keys(data.labels, g, data.n_annotators, _base(data.classes))
        return cls._from_keys(keys, None, tuple(data.annotator_ids), None, data.n_items, data.n_responses, None,
                              classes=data.classes, n_groups=n_groups)

    @classmethod
    def _from_keys(cls, keys, weights, annotator_ids, edges, n_items, n_responses, score_sum, moments=None, *,
                   classes=None, n_groups=None):
        uniq, counts, sums = _count_keys(keys, weights, moments)
        patterns, group = _decode(uniq, len(annotator_ids), _base(classes))
        row = (None, None) if sums is None else (sums[0], sums[1])
        return _stats_type(classes, n_groups)(patterns, group, counts, tuple(annotator_ids), edges, n_items,
                                              n_responses, score_sum, *row)

    def _reordered(self, ids) -> tuple:
        """Keys of this table with columns placed (and missing columns added) in the order ``ids``."""
        pos = {a: k for k, a in enumerate(self.annotator_ids)}
        wide = np.full((self.n_patterns, len(ids)), -1, dtype=self.patterns.dtype)
        for k, a in enumerate(ids):
            if a in pos:
                wide[:, k] = self.patterns[:, pos[a]]
        return pattern_keys(wide, self.group, len(ids), _base(self.classes))

    def merge(self, *others: "SufficientStats") -> "SufficientStats":
        """The statistics of the union of disjoint sets of items: counts, sizes and score sums add.

        Annotators are matched by id (absent from a piece: missing there; differing sets: the merged ids sorted as
        ``AnnotationSet.from_long`` sorts them); the order of the pieces does not matter. K-class pieces need the
        same classes; the number of groups is the largest of the pieces'.

        Raises
        ------
        ValueError
            A piece is not a SufficientStats, or the pieces have different score edges or classes.
        """
        pieces = (self,) + others
        for p in pieces:
            if not isinstance(p, SufficientStats):
                raise ValueError(f"merge: expected SufficientStats; got {type(p).__name__}.")
        for k, p in enumerate(pieces[1:], start=1):
            if p.classes != self.classes:
                raise ValueError(f"merge: the pieces have different classes: piece 0 "
                                 f"{'binary (0/1)' if self.classes is None else list(self.classes)}, piece {k} "
                                 f"{'binary (0/1)' if p.classes is None else list(p.classes)}; compute every piece "
                                 "with the same `classes=`.")
        for p in pieces[1:]:
            a, b = (None if e is None else e.tolist() for e in (self.edges, p.edges))
            if a != b:
                raise ValueError(f"merge: the pieces have different score edges ({a} vs {b}); compute them with the "
                                 "same `bins`.")
        ids = self.annotator_ids
        if any(set(p.annotator_ids) != set(ids) for p in pieces):
            ids = tuple(_sorted_ids([a for p in pieces for a in p.annotator_ids]))
        if self.classes is None and len(ids) > MAX_ANNOTATORS:
            raise ValueError(f"at most {MAX_ANNOTATORS} annotators are supported; the merged pieces have {len(ids)}.")
        n_groups = None if self.classes is None else max(p.n_groups for p in pieces)
        _check_key_space(len(ids), self.classes, n_groups or 1)
        keys = np.concatenate([p._reordered(ids) for p in pieces])
        weights = np.concatenate([p.counts for p in pieces])
        score_sum = None if self.score_sum is None else np.sum([p.score_sum for p in pieces], axis=0)
        # Row moments add like the counts; one piece without them (older statistics) leaves the merge without.
        moments = None
        if all(p.has_row_moments for p in pieces):
            moments = np.stack([np.concatenate([p.row_score_sum for p in pieces]),
                                np.concatenate([p.row_score_sq for p in pieces])])
        return SufficientStats._from_keys(keys, weights, ids, self.edges, sum(p.n_items for p in pieces),
                                          sum(p.n_responses for p in pieces), score_sum, moments, classes=self.classes,
                                          n_groups=n_groups)

    def __add__(self, other):
        if not isinstance(other, SufficientStats):
            return NotImplemented
        return self.merge(other)


@dataclass(frozen=True, eq=False)
class MulticlassSufficientStats(SufficientStats):
    """:class:`SufficientStats` of K-class data: counts of distinct (group, K-class response pattern) rows.

    ``fit_em`` fits them like the items (the same (group x pattern) grid, the same fit); built, merged and compared
    like binary statistics; binary-only functions refuse them (``kind == "multiclass"``). The groups are labels
    (an int per item, or :func:`~noisycal_bayes.core.score_groups` of ``probs``), not score bins: no ``edges`` and
    no score sums.

    Attributes
    ----------
    patterns, group, counts, annotator_ids, n_items, n_responses
        As in :class:`SufficientStats`, with class indices ``0..K-1`` (int16; -1 missing) in ``patterns``, the
        group label of each row in ``group``, and rows in increasing order of ``group * (K + 1)**J + code`` (digit
        ``k + 1`` for class ``k``, the first annotator most significant: K = 2 is the binary key).
    classes : tuple
        The class names, index ``k`` <-> ``classes[k]``.
    n_groups : int, default 1
        The number of groups (groups without items count: the prevalence has one row per group).
    """

    classes: tuple = None
    n_groups: int = 1

    def __post_init__(self):
        if self.classes is None:
            raise ValueError("MulticlassSufficientStats need `classes` (the class names); binary statistics are "
                             "SufficientStats.")
        super().__post_init__()


def _stats_type(classes, n_groups):
    """The constructor of statistics of ``classes`` (None: binary) with the K-class fields bound."""
    if classes is None:
        return SufficientStats
    return lambda *args: MulticlassSufficientStats(*args, classes=classes, n_groups=n_groups)


def _empty(annotator_ids, edges, classes=None) -> SufficientStats:
    n_bins = 1 if edges is None else edges.size - 1
    scores = (None, None, None) if edges is None else (np.zeros(n_bins), np.zeros(0), np.zeros(0))
    return _stats_type(classes, 1)(np.zeros((0, len(annotator_ids)), np.int8), np.zeros(0, np.int32), np.zeros(0),
                                   tuple(annotator_ids), edges, 0, 0, *scores)


def row_moments(inverse: np.ndarray, z: np.ndarray, n_rows: int):
    """``sum z`` and ``sum z**2`` per row, given each item's row ``inverse`` (n_items,) and score ``z``."""
    return (np.bincount(inverse, weights=z, minlength=n_rows),
            np.bincount(inverse, weights=z * z, minlength=n_rows))


def _merge_all(pieces, annotator_ids, edges, classes=None) -> SufficientStats:
    pieces = [p for p in pieces if p is not None]
    if not pieces:
        return _empty(annotator_ids, edges, classes)
    return pieces[0].merge(*pieces[1:])
