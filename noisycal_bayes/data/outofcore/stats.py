"""The :class:`SufficientStats` container: (score bin, response pattern) counts that merge by addition."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..._validation import _preview, binary_only
from ...core.calibration import bin_index
from ..binning import Binning
from ..compress import PatternCounts, compress_patterns
from ._common import MAX_ANNOTATORS, NO_K_CLASS, _count_keys, _decode, _keys, _readonly, _resolve_edges, _sorted_ids


@dataclass(frozen=True, eq=False)
class SufficientStats:
    """Counts of distinct (score bin, response pattern) rows, and what is needed to fit from them.

    Build with :meth:`from_annotations` (in memory), :func:`stats_from_dask`, :func:`stats_from_chunks`,
    :func:`read_stats_csv` or :func:`read_stats_parquet`; add pieces with :meth:`merge`. Pass to
    ``fit_em``, ``fit_map`` or ``fit_nuts`` in place of an AnnotationSet (grouped models), and to
    :func:`~noisycal_bayes.propagate.posterior_nc_ece` / ``posterior_reliability`` (evaluated on these bins).

    Attributes
    ----------
    patterns : ndarray of shape (n_patterns, n_annotators), int8
        Distinct response patterns, 0/1 and -1 for missing.
    group : ndarray of shape (n_patterns,), int32
        Score bin of each row, ``0..n_bins-1`` (bins of ``edges``; 0 when there are no scores).
    counts : ndarray of shape (n_patterns,), float64
        Number of items with that (bin, pattern); all positive. Rows are in increasing order of the key
        ``bin * 3**J + code`` (see the module notes), as in :func:`compress_patterns`.
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
        Per (bin, pattern) row: ``sum_i z_i`` and ``sum_i z_i**2`` over its items, so that the row's mean
        score is ``row_score_sum / counts`` and its within-row variance (divisor ``counts``)
        ``row_score_sq / counts - (row_score_sum / counts)**2``. ``score_sum`` is their sum per bin,
        ``np.bincount(group, weights=row_score_sum, minlength=n_bins)`` (checked to 1e-8 relative).
        Every builder fills them when it reads scores; :func:`~noisycal_bayes.propagate.posterior_nc_ece`
        needs them for the Bayesian bootstrap. None without scores, and in statistics made before they
        existed (everything else still works; recompute the statistics for the bootstrap).
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

    def __post_init__(self):
        p = np.asarray(self.patterns, dtype=np.int8)
        if p.ndim != 2 or p.shape[1] != len(self.annotator_ids):
            raise ValueError(f"`patterns` must have shape (n_patterns, {len(self.annotator_ids)}); got {p.shape}.")
        if p.shape[1] > MAX_ANNOTATORS:
            raise ValueError(f"at most {MAX_ANNOTATORS} annotators are supported; got {p.shape[1]}.")
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
        """Number of score bins (1 without scores)."""
        return 1 if self.edges is None else self.edges.size - 1

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
        """One row per (bin, pattern): columns ``bin``, one per annotator (-1 = missing), ``count`` and, when
        held, ``score_sum`` and ``score_sq`` (the row moments)."""
        out = pd.DataFrame(np.asarray(self.patterns), columns=list(self.annotator_ids))
        out.insert(0, "bin", np.asarray(self.group))
        out["count"] = np.asarray(self.counts)
        if self.has_row_moments:
            out["score_sum"] = np.asarray(self.row_score_sum)
            out["score_sq"] = np.asarray(self.row_score_sq)
        return out

    def __repr__(self) -> str:
        return (f"SufficientStats(n_items={self.n_items}, n_responses={self.n_responses}, "
                f"n_annotators={self.n_annotators}, n_bins={self.n_bins}, n_patterns={self.n_patterns})")

    def same_as(self, other: "SufficientStats") -> bool:
        """True when both hold exactly the same counts, ids, edges, sizes (score sums and row moments to 1e-9
        relative; both or neither must hold row moments)."""
        if not isinstance(other, SufficientStats):
            return False
        if self.annotator_ids != other.annotator_ids or self.n_items != other.n_items:
            return False
        if self.n_responses != other.n_responses or (self.edges is None) != (other.edges is None):
            return False
        if self.edges is not None and not np.array_equal(self.edges, other.edges):
            return False
        if (self.score_sum is None) != (other.score_sum is None):
            return False
        if self.score_sum is not None and not np.allclose(self.score_sum, other.score_sum, rtol=1e-9, atol=1e-9):
            return False
        if self.has_row_moments != other.has_row_moments:
            return False
        if self.has_row_moments and self.n_patterns == other.n_patterns and not (
                np.allclose(self.row_score_sum, other.row_score_sum, rtol=1e-9, atol=1e-9)
                and np.allclose(self.row_score_sq, other.row_score_sq, rtol=1e-9, atol=1e-9)):
            return False
        return (np.array_equal(self.patterns, other.patterns) and np.array_equal(self.group, other.group)
                and np.array_equal(self.counts, other.counts))

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_annotations(cls, data, bins=None) -> "SufficientStats":
        """Statistics of an in-memory :class:`~noisycal_bayes.AnnotationSet` (the reference for the other paths).

        Parameters
        ----------
        data : AnnotationSet
        bins : Binning, array of edges, or None
            Score bins (equal-mass edges come from ``data.scores``); None: one bin (the scores are not used,
            no score sums or row moments).
        """
        binary_only(data, "SufficientStats.from_annotations", NO_K_CLASS)
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
    def _from_keys(cls, keys, weights, annotator_ids, edges, n_items, n_responses, score_sum, moments=None):
        uniq, counts, sums = _count_keys(keys, weights, moments)
        patterns, group = _decode(uniq, len(annotator_ids))
        row = (None, None) if sums is None else (sums[0], sums[1])
        return cls(patterns, group, counts, tuple(annotator_ids), edges, n_items, n_responses, score_sum, *row)

    def _reordered(self, ids) -> tuple:
        """Keys of this table with columns placed (and missing columns added) in the order ``ids``."""
        pos = {a: k for k, a in enumerate(self.annotator_ids)}
        wide = np.full((self.n_patterns, len(ids)), -1, dtype=np.int8)
        for k, a in enumerate(ids):
            if a in pos:
                wide[:, k] = self.patterns[:, pos[a]]
        return _keys(wide, self.group, len(ids))

    def merge(self, *others: "SufficientStats") -> "SufficientStats":
        """The statistics of the union of disjoint sets of items: counts, sizes and score sums add.

        Annotators are matched by id; an annotator absent from one piece counts as missing there. When
        the pieces do not all have the same annotators, the merged ids are sorted (as
        ``AnnotationSet.from_long`` sorts them). The result does not depend on the order of the pieces.

        Raises
        ------
        ValueError
            A piece is not a SufficientStats, or the pieces have different score edges.
        """
        pieces = (self,) + others
        for p in pieces:
            if not isinstance(p, SufficientStats):
                raise ValueError(f"merge: expected SufficientStats; got {type(p).__name__}.")
        for p in pieces[1:]:
            if (p.edges is None) != (self.edges is None) or (p.edges is not None and not np.array_equal(p.edges, self.edges)):
                raise ValueError(f"merge: the pieces have different score edges ({None if self.edges is None else self.edges.tolist()} "
                                 f"vs {None if p.edges is None else p.edges.tolist()}); compute them with the same `bins`.")
        ids = self.annotator_ids
        if any(set(p.annotator_ids) != set(ids) for p in pieces):
            ids = tuple(_sorted_ids([a for p in pieces for a in p.annotator_ids]))
        if len(ids) > MAX_ANNOTATORS:
            raise ValueError(f"at most {MAX_ANNOTATORS} annotators are supported; the merged pieces have {len(ids)}.")
        keys = np.concatenate([p._reordered(ids) for p in pieces])
        weights = np.concatenate([p.counts for p in pieces])
        score_sum = None if self.score_sum is None else np.sum([p.score_sum for p in pieces], axis=0)
        # Row moments add like the counts; one piece without them (older statistics) leaves the merge without.
        moments = None
        if all(p.has_row_moments for p in pieces):
            moments = np.stack([np.concatenate([p.row_score_sum for p in pieces]),
                                np.concatenate([p.row_score_sq for p in pieces])])
        return SufficientStats._from_keys(keys, weights, ids, self.edges, sum(p.n_items for p in pieces),
                                          sum(p.n_responses for p in pieces), score_sum, moments)

    def __add__(self, other):
        if not isinstance(other, SufficientStats):
            return NotImplemented
        return self.merge(other)


def _empty(annotator_ids, edges) -> SufficientStats:
    n_bins = 1 if edges is None else edges.size - 1
    scores = () if edges is None else (np.zeros(n_bins), np.zeros(0), np.zeros(0))
    return SufficientStats(np.zeros((0, len(annotator_ids)), np.int8), np.zeros(0, np.int32), np.zeros(0),
                           tuple(annotator_ids), edges, 0, 0, *scores)


def row_moments(inverse: np.ndarray, z: np.ndarray, n_rows: int):
    """``sum z`` and ``sum z**2`` per row, given each item's row ``inverse`` (n_items,) and score ``z``."""
    return (np.bincount(inverse, weights=z, minlength=n_rows),
            np.bincount(inverse, weights=z * z, minlength=n_rows))


def _merge_all(pieces, annotator_ids, edges) -> SufficientStats:
    pieces = [p for p in pieces if p is not None]
    if not pieces:
        return _empty(annotator_ids, edges)
    return pieces[0].merge(*pieces[1:])
