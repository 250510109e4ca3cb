"""`Channel`: per-annotator false-positive and true-positive rates, oriented per annotator or per crowd.

A binary channel is the K = 2 case of a stack of confusion matrices ``C[j, y, a] = P(A_j = a | Y = y)``:
``fpr = C[:, 0, 1]`` and ``tpr = C[:, 1, 1]`` (:attr:`Channel.confusion`, :meth:`Channel.from_confusion`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import _preview, check_choice


@dataclass(frozen=True, eq=False)
class Channel:
    """Class-conditional annotator channels ``P(A_j = 1 | Y = 0) = fpr_j``, ``P(A_j = 1 | Y = 1) = tpr_j``.

    Parameters
    ----------
    fpr, tpr : array-like of shape (n_annotators,)
        Rates in [0, 1] (paper symbols ``a_j`` and ``a_j + delta_j``).
    annotator_ids : sequence, optional
        Names of the annotators (defaults to 0..J-1).
    orientation : {"every", "crowd"}, default "every"
        ``"every"``: the paper's constraint, ``tpr_j > fpr_j`` for every annotator. ``"crowd"``: only the
        crowd is oriented (its label-count-weighted mean gap is positive, see ``fit_em``), so single
        annotators may have ``tpr_j <= fpr_j``: a spammer (gap ~ 0) or an adversarial annotator (gap < 0),
        whose corrected label ``(A - fpr) / (tpr - fpr)`` is still unbiased when the gap is not 0.

    Raises
    ------
    ValueError
        Rates outside [0, 1], non-finite, an unknown ``orientation``, or (``orientation="every"``)
        ``tpr <= fpr`` for any annotator.

    Examples
    --------
    >>> Channel([0.1, 0.2], [0.9, 0.7]).gap.round(2).tolist()
    [0.8, 0.5]
    >>> Channel([0.1, 0.7], [0.9, 0.2], orientation="crowd").gap.round(2).tolist()  # annotator 1 is adversarial
    [0.8, -0.5]
    >>> Channel([0.1, 0.2], [0.9, 0.7]).confusion[1].round(2).tolist()  # annotator 1: rows y, columns a
    [[0.8, 0.2], [0.3, 0.7]]
    """

    fpr: np.ndarray
    tpr: np.ndarray
    annotator_ids: tuple | None = None
    orientation: str = "every"

    def __post_init__(self):
        fpr = np.atleast_1d(np.array(self.fpr, dtype=np.float64))
        tpr = np.atleast_1d(np.array(self.tpr, dtype=np.float64))
        if fpr.shape != tpr.shape or fpr.ndim != 1:
            raise ValueError(f"`fpr` and `tpr` must be 1-d of equal length; got shapes {fpr.shape} and {tpr.shape}.")
        for name, v in (("fpr", fpr), ("tpr", tpr)):
            bad = ~np.isfinite(v) | (v < 0) | (v > 1)
            if bad.any():
                raise ValueError(f"`{name}` must lie in [0, 1]; got {_preview(v[bad])} for annotators "
                                 f"{_preview(np.flatnonzero(bad))}.")
        check_choice(self.orientation, ("every", "crowd"), name="orientation")
        bad = tpr <= fpr
        if self.orientation == "every" and bad.any():
            raise ValueError(
                f"positive orientation requires tpr > fpr (gap > 0); annotators {_preview(np.flatnonzero(bad))} have "
                f"tpr <= fpr. An annotator with tpr < fpr labels the opposite class; one with tpr == fpr carries no "
                "information and cannot be corrected. Pass orientation='crowd' to hold such annotators (only the crowd "
                "as a whole is then oriented)."
            )
        ids = tuple(range(fpr.size)) if self.annotator_ids is None else tuple(self.annotator_ids)
        if len(ids) != fpr.size:
            raise ValueError(f"`annotator_ids` has {len(ids)} names for {fpr.size} annotators.")
        for arr in (fpr, tpr):
            arr.setflags(write=False)
        object.__setattr__(self, "fpr", fpr)
        object.__setattr__(self, "tpr", tpr)
        object.__setattr__(self, "annotator_ids", ids)

    @classmethod
    def from_confusion(cls, confusion, *, annotator_ids=None, orientation: str = "every") -> "Channel":
        """The channel of K = 2 confusion matrices: ``fpr = C[:, 0, 1]``, ``tpr = C[:, 1, 1]``.

        Parameters
        ----------
        confusion : array-like of shape (n_annotators, 2, 2)
            ``C[j, y, a] = P(A_j = a | Y = y)``; each row ``C[j, y, :]`` sums to 1 (within ``data.PROBS_TOL``,
            the tolerance of every probability row of the package).
        annotator_ids, orientation
            As for :class:`Channel`.

        Raises
        ------
        ValueError
            A shape other than (J, 2, 2), non-finite entries, rows that do not sum to 1, or the rate checks of
            :class:`Channel`.

        Examples
        --------
        >>> Channel.from_confusion([[[0.9, 0.1], [0.2, 0.8]]])
        Channel(fpr=[0.1], tpr=[0.8])
        """
        from . import PROBS_TOL

        c = np.asarray(confusion, dtype=np.float64)
        if c.ndim != 3 or c.shape[1:] != (2, 2):
            raise ValueError(f"`confusion` must have shape (n_annotators, 2, 2); got {c.shape}. For K > 2 classes "
                             "there is no binary channel: keep the confusion matrices.")
        bad = ~np.isfinite(c).all(axis=(1, 2)) | (np.abs(c.sum(axis=2) - 1) > PROBS_TOL).any(axis=1)
        if bad.any():
            raise ValueError(f"each row of `confusion` must be finite and sum to 1; annotators "
                             f"{_preview(np.flatnonzero(bad))} do not.")
        return cls(c[:, 0, 1], c[:, 1, 1], annotator_ids, orientation=orientation)

    @property
    def confusion(self) -> np.ndarray:
        """The K = 2 confusion matrices ``[[1 - fpr_j, fpr_j], [1 - tpr_j, tpr_j]]``, shape (n_annotators, 2, 2).

        ``C[j, y, a] = P(A_j = a | Y = y)``, the layout of the K-class fitters, so that a binary channel goes
        wherever K-class code takes a confusion (``C[:, 0, 1] = fpr``, ``C[:, 1, 1] = tpr``).
        """
        return np.stack([np.stack([1 - self.fpr, self.fpr], -1), np.stack([1 - self.tpr, self.tpr], -1)], -2)

    @classmethod
    def identity(cls, n_annotators: int) -> "Channel":
        """The noiseless channel (fpr 0, tpr 1): corrected labels equal the labels."""
        return cls(np.zeros(n_annotators), np.ones(n_annotators))

    def exchanged(self) -> "Channel":
        """The mirror solution of the same likelihood: ``Y <-> 1 - Y`` only, so ``(fpr, tpr) -> (tpr, fpr)`` and
        every gap changes sign (an ``orientation="crowd"`` channel; a fit's other orientation)."""
        return Channel(self.tpr, self.fpr, self.annotator_ids, orientation="crowd")

    @property
    def gap(self) -> np.ndarray:
        """``tpr - fpr`` (paper: ``delta_j = 1 - FPR_j - FNR_j``), shape (n_annotators,)."""
        return self.tpr - self.fpr

    @property
    def n_annotators(self) -> int:
        return self.fpr.size

    def flipped(self) -> "Channel":
        """The same channels after renaming both classes, ``Y <-> 1 - Y`` *and* ``A <-> 1 - A``.

        ``fpr -> 1 - tpr`` and ``tpr -> 1 - fpr``: every gap is unchanged. Use it when the positive class of
        the whole task is redefined. It does *not* repair an adversarial annotator (one with ``tpr < fpr``):
        relabelling that annotator's answers alone (``A_j -> 1 - A_j``) turns ``(fpr_j, tpr_j)`` into
        ``(1 - fpr_j, 1 - tpr_j)``, and there is no need to: keep the annotator in a ``orientation="crowd"``
        channel, whose corrected label ``(A - fpr) / (tpr - fpr)`` uses the labels with their sign.

        Examples
        --------
        >>> ch = Channel([0.1, 0.2], [0.9, 0.6])
        >>> ch.flipped().fpr.round(2).tolist(), bool(np.allclose(ch.flipped().gap, ch.gap))
        ([0.1, 0.4], True)
        """
        return Channel(1 - self.tpr, 1 - self.fpr, self.annotator_ids, orientation=self.orientation)

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"annotator": list(self.annotator_ids), "fpr": self.fpr, "tpr": self.tpr, "gap": self.gap})

    def __repr__(self) -> str:
        extra = "" if self.orientation == "every" else f", orientation={self.orientation!r}"
        return f"Channel(fpr={np.round(self.fpr, 4).tolist()}, tpr={np.round(self.tpr, 4).tolist()}{extra})"
