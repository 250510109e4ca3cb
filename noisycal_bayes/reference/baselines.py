"""What the usual metrics would have said: ECE against majority vote or one annotator, SMECE on votes.

These treat noisy labels as truth and are biased for the clean calibration error (DESIGN §1, §2): a
vote fraction estimates ``sum_j (a_j + delta_j m(z)) / J``, not ``m(z)``. They are reported beside
NC-ECE so that the bias is visible. SMECE is from ``seeds/002_*``. For K classes :func:`naive_multiclass_ece`
gives the same targets (majority vote, each annotator, vote distribution) as top-label and class-wise ECEs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import binary_only, check_binary_labels, check_choice
from ..core import classwise_ece, top_label_ece
from ..data import AnnotationSet, Binning, as_binning
from .calibration import check_probs, check_responses, ece, smece


@dataclass(frozen=True)
class NaiveCalibrationResult:
    """Calibration errors computed as if noisy labels were clean.

    Attributes
    ----------
    majority_vote_ece : float
        ECE against the per-item majority vote.
    n_ties : int
        Items whose votes split evenly; their majority label is set by ``ties``.
    ties : str
        ``"positive"`` (ties -> 1) or ``"negative"`` (ties -> 0).
    vote_fraction_smece : float
        SMECE against the fraction of positive votes per item.
    annotator_ece : DataFrame
        One row per annotator: ``annotator, n_items, ece`` (ECE on the items that annotator labelled; with
        repeated labels against the annotator's own vote fraction, see :func:`naive_calibration`).
    clean_ece : float or None
        ECE against the clean labels when given (simulations): the sample oracle ECE.
    edges : ndarray of shape (n_bins + 1,)
        The one partition used for every row (computed from all scores).
    n_items : int
    """

    majority_vote_ece: float
    n_ties: int
    ties: str
    vote_fraction_smece: float
    annotator_ece: pd.DataFrame = field(repr=False)
    clean_ece: float | None
    edges: np.ndarray = field(repr=False)
    n_items: int

    def to_frame(self) -> pd.DataFrame:
        """All baselines side by side: columns ``metric, labels, n_items, value``."""
        rows = [
            ("ECE", f"majority vote ({self.n_ties} ties -> {1 if self.ties == 'positive' else 0})", self.n_items,
             self.majority_vote_ece),
            ("SMECE", "vote fraction", self.n_items, self.vote_fraction_smece),
        ]
        rows += [("ECE", f"annotator {r.annotator}", int(r.n_items), float(r.ece))
                 for r in self.annotator_ece.itertuples(index=False)]
        if self.clean_ece is not None:
            rows.append(("ECE", "clean labels (oracle)", self.n_items, self.clean_ece))
        return pd.DataFrame(rows, columns=["metric", "labels", "n_items", "value"])


def naive_calibration(data: AnnotationSet, *, bins=10, ties: str = "positive",
                      clean_labels=None) -> NaiveCalibrationResult:
    """ECE against majority vote and each single annotator, and SMECE against vote fractions.

    Parameters
    ----------
    data : AnnotationSet with scores
    bins : int or Binning
        Evaluation bins; equal-mass edges are computed once from all scores and shared by every row
        (so a single annotator's ECE uses the same partition restricted to the items they labelled).
    ties : {"positive", "negative"}
        Label given to an item whose votes split evenly; the number of such items is reported.
    clean_labels : array-like of shape (n_items,), 0/1, optional
        Known clean labels (simulations); adds the sample oracle ECE.

    Returns
    -------
    NaiveCalibrationResult

    Raises
    ------
    ValueError
        ``data`` without scores, a bad ``ties`` rule, clean labels of the wrong length or not 0/1.

    Notes
    -----
    ECE ``sum_k (n_k/n) |mean_{B_k}(y - z)|``; SMECE the same with soft labels ``q_i`` (equal to ECE when
    ``q`` is 0/1). Neither corrects for annotator noise.

    Repeated labels count as votes (:meth:`AnnotationSet.majority_vote`, :meth:`AnnotationSet.vote_fraction`).
    An annotator's row is over the items they labelled, one term per item, against their own vote fraction on it
    (their 0/1 label without repeats; as the K-class :func:`naive_multiclass_ece` does).

    Examples
    --------
    >>> import numpy as np
    >>> data = AnnotationSet.from_wide(np.array([[1, 0], [1, 1], [0, 0]]), [0.5, 0.9, 0.1])
    >>> res = naive_calibration(data, bins=2)
    >>> res.n_ties, round(res.majority_vote_ece, 6)
    (1, 0.233333)
    """
    binary_only(data, "naive_calibration", "naive_multiclass_ece")
    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"`data` must be an AnnotationSet; got {type(data).__name__}.")
    check_choice(ties, ("positive", "negative"), name="ties")
    z = data.require_scores()
    edges = as_binning(bins).edges_for(z)
    common = Binning.from_edges(edges)
    mv = data.majority_vote(ties=ties)
    rows = []
    for ann, items, labels in _by_annotator(data):
        own, pos = np.unique(items, return_inverse=True)
        # The annotator's own vote fraction per item it labelled: its 0/1 label unless it labelled the item twice.
        frac = np.bincount(pos, weights=labels) / np.bincount(pos)
        rows.append((ann, int(own.size), smece(z[own], frac, bins=common)))
    clean = None
    if clean_labels is not None:
        y = check_binary_labels(clean_labels, name="clean_labels")
        if y.shape != (data.n_items,):
            raise ValueError(f"`clean_labels` must have shape ({data.n_items},), one per item; got {y.shape}.")
        clean = ece(z, y, bins=common)
    return NaiveCalibrationResult(
        ece(z, mv, bins=common), data.n_ties(), ties, smece(z, data.vote_fraction(), bins=common),
        pd.DataFrame(rows, columns=["annotator", "n_items", "ece"]), clean, edges, data.n_items,
    )


def _by_annotator(data: AnnotationSet):
    """``(annotator id, items, labels)`` per annotator from the responses, items in increasing order.

    One stable sort of the responses by annotator (O(n_responses log n_responses)), never the dense matrix.
    """
    item, ann, lab = (np.asarray(a) for a in data.responses)
    order = np.argsort(ann, kind="stable")  # stable: each annotator's responses stay sorted by item
    stops = np.cumsum(np.bincount(ann, minlength=data.n_annotators))
    item, lab = np.split(item[order], stops[:-1]), np.split(lab[order], stops[:-1])
    return zip(data.annotator_ids, item, lab)


def naive_multiclass_ece(probs, responses, *, bins=15, annotator_ids=None) -> pd.DataFrame:
    """The naive calibration errors that treat annotator labels as the truth, beside which NC-ECE is read.

    Parameters
    ----------
    probs : array of shape (n_items, n_classes)
    responses : as in :func:`top_label_nc_ece`
    bins : int or Binning, default 15
    annotator_ids : sequence of length n_annotators, optional
        Names for the ``target`` column (default: the annotator indices).

    Returns
    -------
    DataFrame
        One row per target: ``"majority_vote"`` (one-hot majority label; ties go to the lowest class index),
        ``"annotator <id>"`` (each annotator's own labels, on the items it labelled; repeats as its own vote
        distribution), ``"vote_distribution"`` (the share of each class among the item's responses: the
        top-label / class-wise SMECE). Columns ``target``, ``top_label_ece``, ``classwise_ece`` (mean over
        classes), ``n_items``. Each is :func:`top_label_ece` / :func:`classwise_ece` with that target.

    Raises
    ------
    ValueError
        Bad ``probs`` or ``responses``.

    Examples
    --------
    >>> p = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    >>> resp = (np.array([0, 0, 1, 2]), np.array([0, 1, 0, 0]), np.array([0, 1, 1, 0]))
    >>> naive_multiclass_ece(p, resp, bins=5)["target"].tolist()
    ['majority_vote', 'annotator 0', 'annotator 1', 'vote_distribution']
    """
    p = check_probs(probs)
    n, k = p.shape
    resp = check_responses(responses, n, k, func="naive_multiclass_ece")
    ids = list(range(resp.n_annotators)) if annotator_ids is None else list(annotator_ids)
    if len(ids) != resp.n_annotators:
        raise ValueError(f"`annotator_ids` must have {resp.n_annotators} entries; got {len(ids)}.")
    votes = np.zeros((n, k))
    np.add.at(votes, (resp.item, resp.label), 1.0)
    labelled = votes.sum(axis=1) > 0
    rows = []

    def add(name, target, mask):
        rows.append({"target": name, "top_label_ece": top_label_ece(p[mask], target[mask], bins=bins).value,
                     "classwise_ece": classwise_ece(p[mask], target[mask], bins=bins).value,
                     "n_items": int(mask.sum())})

    add("majority_vote", np.eye(k)[votes.argmax(axis=1)], labelled)  # argmax: ties to the lowest class index
    for j in range(resp.n_annotators):
        own = np.zeros((n, k))
        sel = resp.annotator == j
        np.add.at(own, (resp.item[sel], resp.label[sel]), 1.0)
        m = own.sum(axis=1) > 0
        if m.any():
            add(f"annotator {ids[j]}", own / np.maximum(own.sum(axis=1, keepdims=True), 1.0), m)
    add("vote_distribution", votes / np.maximum(votes.sum(axis=1, keepdims=True), 1.0), labelled)
    return pd.DataFrame(rows)
