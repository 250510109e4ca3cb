"""Score partitions: evaluation bins and score groups.

A :class:`Binning` describes how to cut [0, 1]; bins are half-open ``[e_k, e_{k+1})`` except the last. ``bins=`` and
``groups=`` take the same inputs (an int ``k`` means ``Binning.equal_width(k)``); the default score groups are
:data:`DEFAULT_GROUPS`. Details: docs/foundations.md, *noisycal_bayes.data.binning*.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import check_positive_int, check_scores
from ..core.calibration import bin_index
from ..warnings import GroupsMeaningWarning

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

    def __repr__(self) -> str:
        # The constructor call that makes this rule (readable in signatures: groups=Binning.equal_mass(5)).
        if self.kind == "edges":
            return f"Binning.from_edges({list(self.edges)})"
        return f"Binning.{self.kind}({self.n_bins})"

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


#: The default score groups of the fitters: five equal-mass groups of the scores.
DEFAULT_GROUPS = Binning.equal_mass(5)


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def as_binning(bins, *, name: str = "bins") -> Binning:
    """Accept an int ``k`` (``Binning.equal_width(k)``) or a :class:`Binning`."""
    if isinstance(bins, Binning):
        return bins
    if _is_int(bins):
        return Binning.equal_width(check_positive_int(bins, name=name))
    raise ValueError(f"`{name}` must be an int (equal-width) or a Binning (e.g. Binning.equal_mass(5)); got {bins!r}.")


def groups_from_int(groups: int, *, stacklevel: int = 3) -> Binning:
    """``groups=k`` (an int): ``Binning.equal_width(k)``, as for ``bins``, with a warning that says so.

    In noisycal_bayes <= 0.1 an int for ``groups`` meant equal-mass groups; the warning names both rules so
    that nobody gets the new grouping without being told.
    """
    k = check_positive_int(groups, name="groups")
    warnings.warn(
        f"groups={k} means {k} equal-width score groups (Binning.equal_width({k})), as an int does for `bins`; "
        f"it used to mean equal-mass groups (noisycal_bayes <= 0.1). Pass groups=Binning.equal_mass({k}) for the "
        f"old grouping (the default is Binning.equal_mass(5)), or groups=Binning.equal_width({k}) to keep this one quietly.",
        GroupsMeaningWarning, stacklevel=stacklevel)
    return Binning.equal_width(k)


def resolve_groups(scores, groups, n_items: int):
    """Turn ``groups`` into ``(group_index (n_items,), n_groups)``.

    ``groups`` is a :class:`Binning` (e.g. the default ``Binning.equal_mass(5)``), an int ``k``
    (``Binning.equal_width(k)``, as for ``bins``; warns, see :func:`groups_from_int`), or an integer array
    of shape (n_items,) with labels ``0..G-1`` (other integer labels are re-coded in sorted order).
    """
    if _is_int(groups):
        groups = groups_from_int(groups, stacklevel=4)
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
