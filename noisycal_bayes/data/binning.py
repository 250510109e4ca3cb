"""Score partitions: evaluation bins and score groups.

A :class:`Binning` describes *how* to cut [0, 1]; :meth:`Binning.edges_for` turns it into edges for
given scores. Bins are half-open ``[e_k, e_{k+1})`` except the last, which includes 1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_positive_int, check_scores

_KINDS = ("equal_width", "equal_mass", "edges")


@dataclass(frozen=True)
class Binning:
    """A rule for partitioning scores in [0, 1].

    Use the constructors :meth:`equal_width`, :meth:`equal_mass` or :meth:`from_edges`.

    Examples
    --------
    >>> Binning.equal_width(4).edges_for([0.1, 0.9]).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """

    kind: str
    n_bins: int
    edges: tuple | None = None

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"`kind` must be one of {_KINDS}; got {self.kind!r}.")

    @classmethod
    def equal_width(cls, n_bins: int = 10) -> "Binning":
        return cls("equal_width", check_positive_int(n_bins, name="n_bins"))

    @classmethod
    def equal_mass(cls, n_bins: int = 10) -> "Binning":
        """Quantile bins of the scores they are applied to (ties may merge bins)."""
        return cls("equal_mass", check_positive_int(n_bins, name="n_bins"))

    @classmethod
    def from_edges(cls, edges) -> "Binning":
        e = np.asarray(edges, dtype=np.float64)
        if e.ndim != 1 or e.size < 2:
            raise ValueError(f"`edges` must be a 1-d sequence of at least 2 values; got shape {e.shape}.")
        if not np.all(np.isfinite(e)) or e[0] != 0.0 or e[-1] != 1.0:
            raise ValueError(f"`edges` must start at 0 and end at 1; got first {e[0]} and last {e[-1]}.")
        if np.any(np.diff(e) <= 0):
            raise ValueError(f"`edges` must be strictly increasing; got {e.tolist()}.")
        return cls("edges", e.size - 1, tuple(e.tolist()))

    def edges_for(self, scores=None) -> np.ndarray:
        """Edges of shape (n_bins + 1,) for these scores (only equal-mass bins look at the scores)."""
        if self.kind == "equal_width":
            # k / n_bins is the double nearest to the decimal edge (linspace gives 0.30000000000000004
            # for 3/10), so a score of exactly 0.3 falls in [0.3, 0.4) as the half-open convention says.
            return np.arange(self.n_bins + 1) / self.n_bins
        if self.kind == "edges":
            return np.asarray(self.edges)
        if scores is None:
            raise ValueError("equal-mass bins need the scores they are computed from.")
        z = np.sort(check_scores(scores))
        inner = np.quantile(z, np.linspace(0, 1, self.n_bins + 1)[1:-1])
        # Ties in the scores can repeat a quantile; repeated edges would make empty bins.
        inner = np.unique(inner[(inner > 0) & (inner < 1)])
        # An interpolated quantile just below a run of tied scores still leaves [e_k, e_{k+1}) empty
        # (ties go right); keep an inner edge only if the bin it closes holds scores, then merge an
        # empty last bin into its neighbour.
        kept, lower = [], 0.0
        for e in inner:
            if np.searchsorted(z, e, side="left") > np.searchsorted(z, lower, side="left"):
                kept.append(e)
                lower = e
        if kept and z[-1] < kept[-1]:
            kept.pop()
        return np.concatenate([[0.0], kept, [1.0]])

    def assign(self, scores) -> np.ndarray:
        """Bin index in ``0..n_bins-1`` of each score, shape (n_items,)."""
        z = np.asarray(scores, dtype=np.float64)
        return bin_index(z, self.edges_for(z))


def bin_index(scores, edges) -> np.ndarray:
    """Index of the half-open bin ``[e_k, e_{k+1})`` holding each score (the last bin includes 1)."""
    edges = np.asarray(edges, dtype=np.float64)
    return np.searchsorted(edges[1:-1], np.asarray(scores, dtype=np.float64), side="right").astype(np.int32)


def as_binning(bins) -> Binning:
    """Accept an int (equal-width bins) or a :class:`Binning`."""
    if isinstance(bins, Binning):
        return bins
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        return Binning.equal_width(int(bins))
    raise ValueError(f"`bins` must be an int (equal-width bins) or a Binning; got {bins!r}.")


def resolve_groups(scores, groups, n_items: int):
    """Turn ``groups`` into ``(group_index (n_items,), n_groups)``.

    ``groups`` is an int (that many equal-mass score groups), a :class:`Binning`, or an integer array
    of shape (n_items,) with labels ``0..G-1`` (other integer labels are re-coded in sorted order).
    """
    if isinstance(groups, (int, np.integer)) and not isinstance(groups, bool):
        groups = Binning.equal_mass(check_positive_int(groups, name="groups"))
    if isinstance(groups, Binning):
        if scores is None:
            raise ValueError("score groups need scores; this AnnotationSet has none. Pass `scores` or integer groups.")
        edges = groups.edges_for(scores)
        idx = bin_index(scores, edges)
        # Drop empty groups so that every group has items (an empty group has no prevalence to estimate).
        used, idx = np.unique(idx, return_inverse=True)
        return idx.astype(np.int32), int(used.size)
    arr = np.asarray(groups)
    if arr.shape != (n_items,):
        raise ValueError(f"`groups` as an array must have shape ({n_items},), one group per item; got {arr.shape}.")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError("`groups` as an array must hold integer group labels.")
    used, idx = np.unique(arr, return_inverse=True)
    return idx.astype(np.int32), int(used.size)
