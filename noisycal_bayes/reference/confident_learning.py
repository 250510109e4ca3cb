"""Confident learning (Northcutt, Jiang & Chuang, JAIR 2021): a single-label baseline, NumPy only.

Per-class thresholds, the confident joint ``C``, its calibration ``Q = C_cal / n``, the noise matrices and the
normalised-margin ranking. Every step uses the evaluated model's own probabilities, so judging that model with it is
circular (docs/label_errors.md, *Circularity*). The steps: docs/foundations.md,
*noisycal_bayes.reference.confident_learning*.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import _preview, check_probs

FILTERS = ("prune_by_noise_rate", "confident_learning")
# Tolerance on a row of predicted probabilities summing to one (float32 soft-max outputs).
_SUM_TOL = 1e-4


def _check_inputs(labels, pred_probs):
    """Validate and standardise: labels int64 (n,), probabilities float64 (n, K)."""
    p = np.array(pred_probs, dtype=np.float64, copy=True) if not isinstance(pred_probs, str) else None
    if p is None or p.ndim not in (1, 2) or p.size == 0:
        raise ValueError("`pred_probs` must be an array of shape (n_items,) (binary P(class 1)) or (n_items, "
                         f"n_classes); got {np.shape(pred_probs) if p is not None else type(pred_probs).__name__}.")
    if p.ndim == 1:
        p = np.stack([1 - p, p], axis=1)
    n, k = p.shape
    if k < 2:
        raise ValueError(f"`pred_probs` needs at least 2 classes (columns); got {k}.")
    p = check_probs(p, name="pred_probs", tol=_SUM_TOL, hint="Pass probabilities, not logits.")
    lab = np.asarray(labels)
    if lab.ndim != 1:
        raise ValueError(f"`labels` must be one noisy label per item, shape (n_items,); got shape {lab.shape}.")
    if lab.shape[0] != n:
        raise ValueError(f"`labels` and `pred_probs` must have the same number of items; got {lab.shape[0]} and {n}.")
    try:
        labf = lab.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError("`labels` must be integer classes 0..n_classes-1.") from None
    bad = ~np.isfinite(labf) | (labf != np.round(labf)) | (labf < 0) | (labf >= k)
    if bad.any():
        raise ValueError(f"`labels` must be integer classes in 0..{k - 1}; got {_preview(np.unique(lab[bad])[:5])} at "
                         f"items {_preview(np.flatnonzero(bad))}. Missing labels are not allowed: confident learning "
                         "uses one label per item.")
    lab = labf.astype(np.int64)
    counts = np.bincount(lab, minlength=k)
    if np.any(counts == 0):
        raise ValueError(f"classes {_preview(np.flatnonzero(counts == 0))} never occur in `labels`, so their "
                         "thresholds (mean self-confidence) are undefined.")
    return lab, p


def _thresholds(lab, p):
    k = p.shape[1]
    return np.array([p[lab == c, c].mean() for c in range(k)])


def _confident_joint(lab, p, thresholds):
    k = p.shape[1]
    confident = p >= thresholds[None, :]
    n_conf = confident.sum(axis=1)
    # Among confident classes pick the largest probability (a masked argmax).
    guess = np.where(confident, p, -np.inf).argmax(axis=1)
    keep = n_conf > 0
    cj = np.zeros((k, k), dtype=np.int64)
    np.add.at(cj, (lab[keep], guess[keep]), 1)
    # Every class keeps at least one correctly labelled item (so that later divisions are defined).
    np.fill_diagonal(cj, np.maximum(np.diag(cj), 1))
    return cj, np.where(keep, guess, -1)


def _calibrate(cj, lab, k):
    counts = np.bincount(lab, minlength=k).astype(np.float64)
    rows = cj.sum(axis=1).astype(np.float64)
    cal = cj / rows[:, None] * counts[:, None]
    return cal / cal.sum() * counts.sum()


def confident_joint(labels, pred_probs, *, calibrate: bool = True) -> np.ndarray:
    """Confident joint ``C[given, true]`` of shape (n_classes, n_classes) (docs/foundations.md, steps 1-3).

    ``calibrate=False`` returns the integer counts; ``True`` the counts rescaled so that row ``i`` sums to
    the number of items labelled ``i`` and the total is ``n_items``.
    """
    lab, p = _check_inputs(labels, pred_probs)
    cj, _ = _confident_joint(lab, p, _thresholds(lab, p))
    return _calibrate(cj, lab, p.shape[1]) if calibrate else cj


def normalized_margin(labels, pred_probs) -> np.ndarray:
    """Label quality ``(p_{i, s_i} - max_{k != s_i} p_ik + 1) / 2`` in [0, 1], shape (n_items,); low = suspect."""
    lab, p = _check_inputs(labels, pred_probs)
    return _margin(lab, p)


def _margin(lab, p):
    n = p.shape[0]
    own = p[np.arange(n), lab]
    other = p.copy()
    other[np.arange(n), lab] = -np.inf
    return (own - other.max(axis=1) + 1) / 2


@dataclass(frozen=True)
class ConfidentLearningResult:
    """Confident-learning estimates for one noisy label per item.

    confident_joint : (K, K) int, rows = given label, columns = latent true label (step 2)
    calibrated_joint : (K, K) float counts (step 3), total n_items
    joint : (K, K) ``calibrated_joint / n_items``, estimate of ``P(s = i, y = j)``
    noise_matrix : (K, K) ``P(s = i | y = j)`` (columns sum to 1)
    inverse_noise_matrix : (K, K) ``P(y = j | s = i)`` (rows sum to 1)
    thresholds : (K,) per-class thresholds ``t_k``
    label_quality : (n_items,) normalised margin; lower = more likely an error
    ranking : (n_items,) item positions, most likely error first (stable in data order)
    is_issue : (n_items,) bool, flagged by ``filter_by``
    n_issues_estimate : float, ``n (1 - trace(joint))``
    confident_class : (n_items,) the confident true class of each item, -1 where none passed its threshold
    filter_by : str
    """

    confident_joint: np.ndarray
    calibrated_joint: np.ndarray
    joint: np.ndarray
    noise_matrix: np.ndarray
    inverse_noise_matrix: np.ndarray
    thresholds: np.ndarray
    label_quality: np.ndarray = field(repr=False)
    ranking: np.ndarray = field(repr=False)
    is_issue: np.ndarray = field(repr=False)
    n_issues_estimate: float
    confident_class: np.ndarray = field(repr=False)
    filter_by: str

    @property
    def n_issues(self) -> int:
        """Number of flagged items."""
        return int(self.is_issue.sum())

    def to_frame(self, item_ids=None) -> pd.DataFrame:
        """One row per item in ranking order: ``item, rank, label_quality, is_issue, confident_class``."""
        ids = np.arange(self.ranking.size) if item_ids is None else np.asarray(item_ids, dtype=object)
        if ids.shape != self.ranking.shape:
            raise ValueError(f"`item_ids` must have shape {self.ranking.shape}; got {ids.shape}.")
        r = self.ranking
        return pd.DataFrame({"item": ids[r], "rank": np.arange(1, r.size + 1), "label_quality": self.label_quality[r],
                             "is_issue": self.is_issue[r], "confident_class": self.confident_class[r]})


def confident_learning(labels, pred_probs, *, filter_by: str = "prune_by_noise_rate") -> ConfidentLearningResult:
    """Confident joint, noise matrices and the normalised-margin ranking of likely label errors.

    Parameters
    ----------
    labels : array of shape (n_items,)
        One noisy label per item, integer classes ``0..K-1`` (for binary data e.g. one annotator's labels
        or the majority vote). No missing values.
    pred_probs : array of shape (n_items, K), or (n_items,) for binary P(class 1)
        Out-of-sample predicted probabilities (cross-validated); rows sum to 1.
    filter_by : {"prune_by_noise_rate", "confident_learning"}
        Which items ``is_issue`` flags: per off-diagonal pair ``(i, j)`` the ``round(C_cal[i, j])``
        items with given label ``i`` and the largest margin ``p_j - p_i``; or the items counted off the
        diagonal of the (uncalibrated) confident joint.

    Returns
    -------
    ConfidentLearningResult

    Raises
    ------
    ValueError
        Shapes; probabilities outside [0, 1], non-finite or rows not summing to 1; labels that are not
        classes ``0..K-1`` (or missing); a class with no given label; unknown ``filter_by``.

    Notes
    -----
    Northcutt, Jiang & Chuang (JAIR 2021), §3 (confident joint, calibration, prune by noise rate);
    the ranking by normalised margin is the one used to order candidates in Northcutt, Athalye &
    Mueller (2021, seeds/003, §3). Written from those descriptions; cleanlab is not a dependency.

    Examples
    --------
    >>> z = np.array([0.9, 0.8, 0.2, 0.1, 0.95, 0.05])
    >>> s = np.array([1, 1, 0, 0, 0, 0])        # item 4 looks mislabelled
    >>> res = confident_learning(s, z)
    >>> int(res.ranking[0]), res.confident_joint.tolist()
    (4, [[3, 1], [0, 1]])
    """
    if filter_by not in FILTERS:
        raise ValueError(f"`filter_by` must be one of {FILTERS}; got {filter_by!r}.")
    lab, p = _check_inputs(labels, pred_probs)
    n, k = p.shape
    t = _thresholds(lab, p)
    cj, guess = _confident_joint(lab, p, t)
    cal = _calibrate(cj, lab, k)
    joint = cal / n
    with np.errstate(invalid="ignore", divide="ignore"):
        noise = joint / joint.sum(axis=0, keepdims=True)
        inv = joint / joint.sum(axis=1, keepdims=True)
    quality = _margin(lab, p)
    ranking = np.argsort(quality, kind="stable")
    if filter_by == "confident_learning":
        issue = (guess >= 0) & (guess != lab)
    else:
        issue = np.zeros(n, dtype=bool)
        for i in range(k):
            members = np.flatnonzero(lab == i)
            for j in range(k):
                if j == i:
                    continue
                m = int(np.round(cal[i, j]))
                if m <= 0:
                    continue
                margin = p[members, j] - p[members, i]
                top = members[np.argsort(-margin, kind="stable")[:m]]
                issue[top] = True
    return ConfidentLearningResult(
        confident_joint=cj, calibrated_joint=cal, joint=joint, noise_matrix=noise, inverse_noise_matrix=inv,
        thresholds=t, label_quality=quality, ranking=ranking, is_issue=issue,
        n_issues_estimate=float(n * (1 - np.trace(joint))), confident_class=guess, filter_by=filter_by)
