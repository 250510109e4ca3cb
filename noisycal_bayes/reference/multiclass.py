"""K-class NC-ECE at a point fit, its item bootstrap, and the naive ECEs (issue 18, item 3; DESIGN §8).

Annotator ``j``'s channel is a K x K row-stochastic confusion matrix ``C_j[y, a] = P(A_j = a | Y = y)``. Row
``a`` of ``C_j^{-1}``, ``T_j[a, :]``, is unbiased for the clean one-hot vector: ``E[T_j[A_j, :] | Y] = e_Y``
(the binary ``(A - fpr) / (tpr - fpr)`` is its coordinate 1). Per item, coordinate ``k`` of the corrected
target combines the item's responses ``r`` with per-coordinate weights,
``t_ik = sum_r w[j_r, k] T_{j_r}[a_r, k] / sum_r w[j_r, k]`` (repeats count as responses). Then

- top-label NC-ECE: equal-width bins on the confidence ``c_i = max_k p_ik``, ``yhat_i = argmax_k p_ik``
  (ties: the lowest class), ``sum_b (n_b / n) |mean_{i in b} (t_{i, yhat_i} - c_i)|``;
- class-wise NC-ECE: per class ``k`` bins on ``p_ik``, ``ECE_k = sum_b (n_b / n) |mean_{i in b} (t_ik - p_ik)|``,
  reported per class and as the mean over classes.

With one-hot targets these are the plain top-label / class-wise ECEs, with the vote distribution the
(top-label) SMECE. IV weights: ``w_jk = 1 / E_Y[Var(T_j[A_j, k] | Y)]`` under ``Y ~ prevalence`` (the noise
variance of the corrected coordinate; for K = 2 the binary ``sigma_j^2`` of paper §4.4), where the prevalence
is given, or (``prevalence=None``) the mean equally weighted corrected vector of the items, as the binary IV rule
estimates ``mu``. Annotators whose confusion is near singular (condition number above ``max_condition``) weigh 0
and their responses are left out: a corrected vector of a near-singular ``C_j`` would explode.

:func:`bootstrap_multiclass_nc_ece` resamples items and refits the confusion matrices per replicate through a
user ``estimator`` (the multiclass EM lives in the inference layer, which this layer does not import).
"""
from __future__ import annotations

import inspect
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from .._progress import progress
from .._validation import _preview, check_level, check_positive_int, one_line
# annotator_weights batches over leading draw axes (propagate/multiclass.py imports it from here); top_label_ece
# and classwise_ece take an int or a Binning.
from ..core import (annotator_weights, classwise_ece, confusion_condition, corrected_targets, top_label_ece,
                    usable_confusions)
from ..data import as_binning, bin_index
from ..core.tables import Responses
from ..warnings import DataWarning, IdentifiabilityWarning

#: Rows of ``probs`` must sum to 1 within this absolute tolerance (float32 softmax outputs sum to 1 within ~1e-6).
PROBS_ROW_TOL = 1e-4
#: Default largest condition number of a usable confusion matrix (``usable_confusions``).
MAX_CONDITION = 100.0
#: Named weight rules of the multiclass corrected targets.
MC_WEIGHT_RULES = ("iv", "equal")


# ----------------------------------------------------------------------------- validation (one helper per input)
def check_probs(probs, *, name: str = "probs") -> np.ndarray:
    """``probs`` as float64 (n_items, K), K >= 2, finite, in [0, 1], rows summing to 1 within ``PROBS_ROW_TOL``."""
    try:
        p = np.array(probs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be a numeric (n_items, n_classes) array; could not convert: {exc}") from None
    if p.ndim != 2 or p.shape[1] < 2 or p.shape[0] == 0:
        raise ValueError(f"`{name}` must have shape (n_items, n_classes) with n_classes >= 2; got {p.shape}.")
    bad = ~np.isfinite(p).all(axis=1) | (p < 0).any(axis=1) | (p > 1).any(axis=1)
    if bad.any():
        raise ValueError(f"`{name}` must be finite probabilities in [0, 1]; rows {_preview(np.flatnonzero(bad))} are "
                         "not.")
    off = np.abs(p.sum(axis=1) - 1.0) > PROBS_ROW_TOL
    if off.any():
        raise ValueError(f"rows of `{name}` must sum to 1 (within {PROBS_ROW_TOL}); rows "
                         f"{_preview(np.flatnonzero(off))} "
                         f"sum to {_preview(np.round(p.sum(axis=1)[off], 6))}. Pass softmax outputs, not logits.")
    return p


class MCResponses(NamedTuple):
    """Validated responses: item, annotator, label (int64, (n_responses,)), sorted by item; sizes."""

    item: np.ndarray
    annotator: np.ndarray
    label: np.ndarray
    n_items: int
    n_annotators: int
    n_classes: int


def check_responses(responses, n_items: int, n_classes: int, *, n_annotators=None, func: str = "") -> MCResponses:
    """Responses as :class:`MCResponses`.

    ``responses``: a ``Responses`` (item, annotator, label), a ``(item, annotator, label)`` tuple of arrays, an
    ``MCResponses`` (its ``n_annotators`` kept: a bootstrap replicate may miss the last annotators), or an object
    with a ``.responses`` attribute (a ``MulticlassAnnotationSet``). Labels must lie in ``0..K-1``.
    """
    where = f"{func}: " if func else ""
    obj = responses
    if isinstance(obj, MCResponses) and n_annotators is None:
        n_annotators = obj.n_annotators
    if hasattr(obj, "responses") and not isinstance(obj, tuple):
        if n_annotators is None:
            n_annotators = getattr(obj, "n_annotators", None)
        obj = obj.responses
    try:
        item, ann, lab = (np.asarray(x) for x in (obj.item, obj.annotator, obj.label)) if hasattr(obj, "item") \
            else (np.asarray(x) for x in obj)
    except (TypeError, ValueError):
        raise ValueError(f"{where}`responses` must be a Responses (item, annotator, label), a tuple of three "
                         f"arrays, or a MulticlassAnnotationSet; got {type(responses).__name__}.") from None
    if not (item.ndim == ann.ndim == lab.ndim == 1 and item.size == ann.size == lab.size):
        raise ValueError(f"{where}`responses` item, annotator and label must be 1-d arrays of one length; got shapes "
                         f"{item.shape}, {ann.shape}, {lab.shape}.")
    for arr, nm in ((item, "item"), (ann, "annotator"), (lab, "label")):
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            if not (np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr))):
                raise ValueError(f"{where}response `{nm}` must be integer indices; got dtype {arr.dtype}.")
    item, ann, lab = item.astype(np.int64), ann.astype(np.int64), lab.astype(np.int64)
    if item.size == 0:
        raise ValueError(f"{where}`responses` is empty: no item has a label.")
    if item.min() < 0 or item.max() >= n_items:
        bad = np.flatnonzero((item < 0) | (item >= n_items))
        raise ValueError(f"{where}response items must lie in 0..{n_items - 1} (one row of `probs` each); responses "
                         f"{_preview(bad)} have items {_preview(item[bad])}.")
    bad = np.flatnonzero((lab < 0) | (lab >= n_classes))
    if bad.size:
        raise ValueError(f"{where}labels must be class indices in 0..{n_classes - 1} (the columns of `probs`); got "
                         f"{_preview(np.unique(lab[bad]))} at responses {_preview(bad)}. Map class names to the "
                         "column order of `probs` first.")
    if ann.min() < 0:
        raise ValueError(f"{where}annotator indices must be >= 0; got {_preview(np.unique(ann[ann < 0]))}.")
    j = int(ann.max()) + 1 if n_annotators is None else int(n_annotators)
    if ann.max() >= j:
        raise ValueError(f"{where}annotator indices must lie in 0..{j - 1}; got {_preview(np.unique(ann[ann >= j]))}.")
    order = np.argsort(item, kind="stable")
    return MCResponses(item[order], ann[order], lab[order], int(n_items), j, int(n_classes))


def check_confusion(confusion, n_annotators: int, n_classes: int, *, name: str = "confusion",
                    draws: bool = False) -> np.ndarray:
    """Confusion matrices as float64 (J, K, K), or with ``draws`` (S, J, K, K) (a (J, K, K) point becomes S = 1):
    finite, non-negative, rows summing to 1 (within 1e-6)."""
    c = np.array(confusion, dtype=np.float64)
    want = (n_annotators, n_classes, n_classes)
    if draws and c.ndim == 3:
        c = c[None]
    if (c.ndim != (4 if draws else 3)) or c.shape[-3:] != want:
        shape = f"(n_draws, {n_annotators}, {n_classes}, {n_classes}) or {want}" if draws else str(want)
        raise ValueError(f"`{name}` must have shape {shape} (annotators x true class x given label); got {c.shape}.")
    if not np.isfinite(c).all() or (c < 0).any():
        raise ValueError(f"`{name}` must be finite and non-negative.")
    off = np.abs(c.sum(axis=-1) - 1.0) > 1e-6
    if off.any():
        where = np.argwhere(off)[:, -2:]
        raise ValueError(f"rows of `{name}` must sum to 1 (C[j, y, a] = P(A_j = a | Y = y)); (annotator, class) "
                         f"{_preview([tuple(int(v) for v in r) for r in np.unique(where, axis=0)])} do not.")
    return c


def check_mc_weights(weights, n_annotators: int, n_classes: int):
    """``(rule or (J, K) array, label)``: a name in ``MC_WEIGHT_RULES`` or explicit positive weights (J,) / (J, K)."""
    if isinstance(weights, str):
        if weights not in MC_WEIGHT_RULES:
            raise ValueError(f"`weights` must be one of {MC_WEIGHT_RULES} or an array of shape ({n_annotators},) or "
                             f"({n_annotators}, {n_classes}); got {weights!r}.")
        return weights, weights
    w = np.asarray(weights, dtype=np.float64)
    if w.shape == (n_annotators,):
        w = np.repeat(w[:, None], n_classes, axis=1)
    if w.shape != (n_annotators, n_classes):
        raise ValueError(f"explicit `weights` must have shape ({n_annotators},) or ({n_annotators}, {n_classes}); got "
                         f"{np.shape(weights)}.")
    if not np.isfinite(w).all() or (w <= 0).any():
        raise ValueError("explicit `weights` must be finite and positive.")
    return w, "explicit"


def check_prevalence(prevalence, n_classes: int, *, n_draws=None):
    """None, or float64 (K,) / with ``n_draws`` also (n_draws, K): non-negative, summing to 1."""
    if prevalence is None:
        return None
    p = np.array(prevalence, dtype=np.float64)
    ok_shapes = [(n_classes,)] + ([(n_draws, n_classes)] if n_draws is not None else [])
    if p.shape not in ok_shapes:
        raise ValueError(f"`prevalence` must have shape {' or '.join(map(str, ok_shapes))} (the overall class "
                         f"frequencies), or be None (estimated from the data); got {p.shape}.")
    if not np.isfinite(p).all() or (p < 0).any() or (np.abs(p.sum(axis=-1) - 1) > 1e-6).any():
        raise ValueError("`prevalence` must be non-negative and sum to 1 over the classes.")
    return p


def bin_edges(probs: np.ndarray, bins, kind: str) -> list:
    """Evaluation edges: one array for ``kind="top_label"`` (on the confidence), one per class for ``"classwise"``."""
    b = as_binning(bins)
    if kind == "top_label":
        return [b.edges_for(probs.max(axis=1))]
    return [b.edges_for(probs[:, k]) for k in range(probs.shape[1])]


class Entries(NamedTuple):
    """What one ECE sums: entry ``e`` puts item ``item[e]``'s coordinate ``cls[e]`` (target) against score
    ``score[e]`` into segment ``seg[e]`` (a bin; for class-wise, class ``k``'s bins are segments
    ``offset[k] .. offset[k + 1] - 1``)."""

    item: np.ndarray
    cls: np.ndarray
    seg: np.ndarray
    score: np.ndarray
    offset: np.ndarray
    edges: list

    @property
    def n_segs(self) -> int:
        return int(self.offset[-1])


def ece_entries(probs: np.ndarray, edges: list, kind: str) -> Entries:
    """Entries of the top-label (one per item: its predicted class, its confidence) or class-wise ECE (K per item)."""
    n, k = probs.shape
    if kind == "top_label":
        conf = probs.max(axis=1)
        seg = bin_index(conf, edges[0]).astype(np.int64)
        return Entries(np.arange(n), probs.argmax(axis=1), seg, conf, np.array([0, edges[0].size - 1]), edges)
    sizes = np.array([e.size - 1 for e in edges])
    offset = np.concatenate([[0], np.cumsum(sizes)])
    seg = np.stack([offset[c] + bin_index(probs[:, c], edges[c]) for c in range(k)], axis=1)
    return Entries(np.repeat(np.arange(n), k), np.tile(np.arange(k), n), seg.reshape(-1),
                   probs.reshape(-1), offset, edges)


def entry_sums(entries: Entries, targets: np.ndarray):
    """Per segment: count, score sum, target sum; items with a NaN target row must be removed beforehand."""
    m = entries.n_segs
    count = np.bincount(entries.seg, minlength=m).astype(np.float64)
    score = np.bincount(entries.seg, weights=entries.score, minlength=m)
    freq = np.bincount(entries.seg, weights=targets[entries.item, entries.cls], minlength=m)
    return count, score, freq


def _segment_values(entries: Entries, count, score, freq):
    """ECE per class block: ``sum_{b in block} |F_b - S_b| / sum_{b in block} n_b`` (one block for top-label)."""
    off = entries.offset
    return np.array([np.abs(freq[a:b] - score[a:b]).sum() / count[a:b].sum() for a, b in zip(off[:-1], off[1:])])


def _seg_table(entries: Entries, count, score, freq, classes=None) -> pd.DataFrame:
    rows = []
    for c, (a, b) in enumerate(zip(entries.offset[:-1], entries.offset[1:])):
        e = entries.edges[c]
        with np.errstate(invalid="ignore", divide="ignore"):
            part = pd.DataFrame({"bin": np.arange(b - a), "lower": e[:-1], "upper": e[1:],
                                 "count": count[a:b].astype(np.int64), "mean_score": score[a:b] / count[a:b],
                                 "corrected_frequency": freq[a:b] / count[a:b],
                                 "residual": (freq[a:b] - score[a:b]) / count[a:b]})
        if classes is not None:
            part.insert(0, "class", classes[c])
        rows.append(part)
    return pd.concat(rows, ignore_index=True)


def usable_from_draws(confusion: np.ndarray, *, max_condition: float = MAX_CONDITION, level: float = 0.9):
    """Which annotators enter the corrected targets, bool (J,): the ``(1 + level) / 2`` quantile of the condition
    number of ``C_j`` over the draws (S, J, K, K) is at most ``max_condition`` (one draw: its own condition).

    The multiclass analogue of the binary rule "the gap's interval excludes 0": an annotator whose confusion is
    near singular in more than ``(1 - level) / 2`` of the draws carries no usable corrected information.

    When no annotator passes, the annotators whose posterior-mean matrix has a condition number of at most
    ``max_condition`` are used instead (IdentifiabilityWarning): with many classes and a few labels per row every
    draw's smallest singular value is pulled down by the noise of its K (K - 1) off-diagonal cells, so the rule
    can reject even well-conditioned mean matrices; the propagation clips the near-singular draws of the
    annotators used. The posterior mean is the point estimate of the NUTS route, so this is the EM route's rule."""
    cond = confusion_condition(confusion)
    q = np.quantile(cond, (1 + level) / 2, axis=0) if cond.shape[0] > 1 else cond[0]
    use = np.asarray(q <= max_condition, dtype=bool)
    if not use.any() and cond.shape[0] > 1:
        mean_cond = confusion_condition(np.mean(confusion, axis=0)[None])[0]
        use = np.asarray(mean_cond <= max_condition, dtype=bool)
        if use.any():
            warnings.warn(f"usable_from_draws: no annotator's confusion matrix has a condition number of at most "
                          f"{max_condition} in a {(1 + level) / 2:.0%} quantile over the draws (few labels per row "
                          f"for {confusion.shape[-1]} classes); the {int(use.sum())} annotators whose posterior-mean "
                          f"matrix does are used, their near-singular draws clipped. More labels per annotator, or "
                          "pooled confusion matrices, make the draws usable.", IdentifiabilityWarning, stacklevel=2)
    return use


def warn_unusable(usable, annotator_ids, func, *, stacklevel=3):
    if not usable.all():
        warnings.warn(f"{func}: the confusion matrices of annotators {_preview(np.asarray(annotator_ids)[~usable])} "
                      f"are near singular (condition number above the limit): their labels cannot be corrected and get "
                      "weight 0 (their responses are left out).", IdentifiabilityWarning, stacklevel=stacklevel)


def kept_items(resp: MCResponses, usable: np.ndarray, func: str, *, stacklevel=3):
    """Responses of usable annotators and the items that keep at least one (warns if some items lose all)."""
    keep_r = usable[resp.annotator]
    has = np.zeros(resp.n_items, bool)
    has[resp.item[keep_r]] = True
    if not has.any():
        n_labels = np.bincount(resp.annotator, minlength=usable.size)
        raise ValueError(f"{func}: no item has a response from an annotator with a usable (invertible) confusion "
                         f"matrix (usable: {int(usable.sum())} of {usable.size} annotators); the corrected targets are "
                         f"undefined. The data: {resp.n_items} items, {int(n_labels.sum())} labels "
                         f"({int(n_labels.min())}-{int(n_labels.max())} per annotator), too few to estimate K x K "
                         "confusion matrices (every class needs labels). Add items or labels, or pass known confusion "
                         "matrices.")
    if not has.all():
        warnings.warn(f"{func}: {int((~has).sum())} items (e.g. {_preview(np.flatnonzero(~has))}) have no response "
                      "from an annotator with a usable confusion matrix and are left out.", DataWarning,
                      stacklevel=stacklevel)
    return keep_r, has


def estimated_prevalence(resp: MCResponses, confusion: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """The mean over items of the equally weighted corrected vector (the binary IV rule's ``mu``), shape (K,)."""
    t = corrected_targets(Responses(*resp[:3]), resp.n_items, confusion,
                          weights=np.repeat(usable.astype(float)[:, None], resp.n_classes, axis=1))
    return np.nanmean(t, axis=0)


# ----------------------------------------------------------------------------- point estimators
@dataclass(frozen=True)
class MulticlassNCECE:
    """Top-label or class-wise NC-ECE at one set of confusion matrices.

    Attributes
    ----------
    value : float
        Top-label NC-ECE, or the mean over classes of the class-wise NC-ECEs.
    per_class : ndarray of shape (n_classes,) or None
        Class-wise only: each class's NC-ECE.
    kind : {"top_label", "classwise"}
    table : DataFrame
        Per bin (class-wise: per class and bin): ``bin, lower, upper, count, mean_score, corrected_frequency,
        residual`` (corrected frequency minus mean score).
    edges : list of ndarray
        One array (top-label) or one per class.
    weights : ndarray of shape (n_annotators, n_classes)
        The per-coordinate annotator weights used (0 for unusable annotators).
    weights_rule : str
    usable : ndarray of shape (n_annotators,), bool
    n_items : int
        Items used (those with a response of a usable annotator).
    """

    value: float
    per_class: np.ndarray | None
    kind: str
    table: pd.DataFrame = field(repr=False)
    edges: list = field(repr=False)
    weights: np.ndarray = field(repr=False)
    weights_rule: str
    usable: np.ndarray
    n_items: int

    def __float__(self) -> float:
        return self.value


def point_nc_ece(probs, responses, confusion, *, prevalence, bins, weights, kind, func, usable=None,
                 edges=None, max_condition=MAX_CONDITION, stacklevel=3) -> MulticlassNCECE:
    """Shared body of :func:`top_label_nc_ece` and :func:`classwise_nc_ece` (validated inputs or raw)."""
    p = check_probs(probs)
    n, k = p.shape
    resp = check_responses(responses, n, k, func=func)
    c = check_confusion(confusion, resp.n_annotators, k)
    rule, label = check_mc_weights(weights, resp.n_annotators, k)
    prev = check_prevalence(prevalence, k)
    use = usable_confusions(c, max_condition=max_condition) if usable is None else np.asarray(usable, bool)
    warn_unusable(use, np.arange(resp.n_annotators), func, stacklevel=stacklevel + 1)
    keep_r, has = kept_items(resp, use, func, stacklevel=stacklevel + 1)
    if isinstance(rule, str):
        if rule == "iv" and prev is None:
            prev = estimated_prevalence(resp, c, use)
        w = annotator_weights(c, prev if prev is not None else np.full(k, 1 / k), rule=rule, usable=use)
    else:
        w = np.where(use[:, None], rule, 0.0)
    t = corrected_targets(Responses(resp.item[keep_r], resp.annotator[keep_r], resp.label[keep_r]), n, c, weights=w)
    edges = bin_edges(p, bins, kind) if edges is None else edges
    ent = ece_entries(p[has], edges, kind)
    count, score, freq = entry_sums(ent, t[has])
    vals = _segment_values(ent, count, score, freq)
    return MulticlassNCECE(float(vals.mean()), vals if kind == "classwise" else None, kind,
                           _seg_table(ent, count, score, freq, None if kind == "top_label" else np.arange(k)),
                           edges, w, label, use, int(has.sum()))


def top_label_nc_ece(probs, responses, confusion, *, prevalence=None, bins=15, weights="iv",
                     max_condition: float = MAX_CONDITION) -> MulticlassNCECE:
    """Top-label NC-ECE of ``probs`` at known (or point-estimated) confusion matrices.

    Parameters
    ----------
    probs : array of shape (n_items, n_classes)
        Class probabilities; rows sum to 1 (within ``PROBS_ROW_TOL``).
    responses : Responses, (item, annotator, label) tuple of int arrays, or MulticlassAnnotationSet
        Labels as class indices ``0..K-1`` (the columns of ``probs``); repeats count as responses.
    confusion : array of shape (n_annotators, n_classes, n_classes)
        ``C[j, y, a] = P(A_j = a | Y = y)``, rows summing to 1.
    prevalence : array of shape (n_classes,), optional
        Overall class frequencies for the IV weights; None estimates them from the data (the mean equally
        weighted corrected vector, as the binary IV rule estimates ``mu``).
    bins : int or Binning, default 15
        Bins on the confidence ``max_k p_ik`` (an int: equal width).
    weights : {"iv", "equal"} or array of shape (n_annotators,) or (n_annotators, n_classes), default "iv"
    max_condition : float, default 100
        Confusion matrices with a larger condition number are not usable (weight 0, responses left out).

    Returns
    -------
    MulticlassNCECE

    Raises
    ------
    ValueError
        Bad ``probs`` (shape, range, rows not summing to 1), responses (labels outside ``0..K-1``, items out of
        range), confusion (shape, rows), weights or prevalence; no item left with a usable response.

    Warns
    -----
    IdentifiabilityWarning
        Near-singular confusion matrices (their annotators are left out).
    DataWarning
        Items left without a usable response (left out).

    Notes
    -----
    ``sum_b (n_b / n) |mean_{i in b} (t_{i, yhat_i} - max_k p_ik)|`` with the corrected targets ``t`` of the
    module docstring (DESIGN §8). With identity confusion matrices this is the plain top-label ECE against the
    annotators' labels.

    Examples
    --------
    >>> p = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]])
    >>> resp = (np.array([0, 1, 2]), np.array([0, 0, 0]), np.array([0, 1, 1]))
    >>> round(top_label_nc_ece(p, resp, np.eye(3)[None], bins=5).value, 4)  # identity: plain top-label ECE
    0.1667
    """
    return point_nc_ece(probs, responses, confusion, prevalence=prevalence, bins=bins, weights=weights,
                        kind="top_label", func="top_label_nc_ece", max_condition=max_condition)


def classwise_nc_ece(probs, responses, confusion, *, prevalence=None, bins=15, weights="iv",
                     max_condition: float = MAX_CONDITION) -> MulticlassNCECE:
    """Class-wise NC-ECE (per class and the mean over classes) at known (or point-estimated) confusion matrices.

    Parameters, Raises and Warns as :func:`top_label_nc_ece`; per class ``k`` the bins lie on ``p_ik``.

    Returns
    -------
    MulticlassNCECE
        ``value`` the mean over classes, ``per_class`` (n_classes,).

    Notes
    -----
    ``ECE_k = sum_b (n_b / n) |mean_{i in b} (t_ik - p_ik)|``. For K = 2, class 1's entry is the binary NC-ECE
    of the scores ``p_i1`` (paper §3) with the same channel and weights.

    Examples
    --------
    >>> p = np.array([[0.7, 0.3], [0.2, 0.8], [0.4, 0.6]])
    >>> resp = (np.array([0, 1, 2]), np.array([0, 0, 0]), np.array([0, 1, 0]))
    >>> res = classwise_nc_ece(p, resp, np.eye(2)[None], bins=5)
    >>> res.per_class.round(4).tolist(), round(res.value, 4)
    ([0.3667, 0.3667], 0.3667)
    """
    return point_nc_ece(probs, responses, confusion, prevalence=prevalence, bins=bins, weights=weights,
                        kind="classwise", func="classwise_nc_ece", max_condition=max_condition)


# ----------------------------------------------------------------------------- naive ECEs
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


# ----------------------------------------------------------------------------- bootstrap
@dataclass(frozen=True)
class BootstrapMulticlassNCECE:
    """Percentile (or basic) item-bootstrap interval for a K-class NC-ECE, confusion refitted per replicate.

    Attributes
    ----------
    value : float
        The full-sample NC-ECE (top-label, or the class-wise mean) at the estimator's full-sample fit.
    interval : (float, float)
    upper_bound : float
        One-sided ``level`` upper bound (report it when the NC-ECE is near 0).
    bias : float
        ``mean(replicates) - value``.
    level : float
    replicates : ndarray of shape (n_boot - n_failed,)
    per_class : DataFrame or None
        Class-wise only: ``class, value, lower, upper, upper_bound`` per class (same replicates).
    per_class_replicates : ndarray of shape (n_boot - n_failed, n_classes) or None
    n_boot, n_failed : int
    failure_reasons : dict
    full_sample : MulticlassNCECE
    kind : {"top_label", "classwise"}
    weights_rule : str
    seed : int
    method : {"percentile", "basic"}
    target : str
    """

    value: float
    interval: tuple
    upper_bound: float
    bias: float
    level: float
    replicates: np.ndarray = field(repr=False)
    per_class: pd.DataFrame | None = field(repr=False)
    per_class_replicates: np.ndarray | None = field(repr=False)
    n_boot: int
    n_failed: int
    failure_reasons: dict
    full_sample: MulticlassNCECE = field(repr=False)
    kind: str
    weights_rule: str
    seed: int
    method: str
    target: str = ("population binned ECE on the fixed partition (sampling and confusion-estimation uncertainty)")

    @property
    def lower(self) -> float:
        return self.interval[0]

    @property
    def upper(self) -> float:
        return self.interval[1]

    def __float__(self) -> float:
        return self.value


@dataclass(frozen=True)
class MulticlassBootstrap:
    """Both bootstrap results of one set of replicates (:func:`bootstrap_multiclass_nc_ece`)."""

    top_label: BootstrapMulticlassNCECE
    classwise: BootstrapMulticlassNCECE


def _check_mc_estimator(estimator):
    """``(estimator, takes_init, takes_gold)``: which optional keywords the callable accepts."""
    if estimator is None:
        raise ValueError("bootstrap_multiclass_nc_ece: pass `estimator`, a callable (responses, n_items, probs) -> "
                         "(confusion (J, K, K), prevalence (K,) or None) that refits the confusion matrices on a "
                         "replicate, e.g. inference.multiclass_em_estimator(); there is no default in this layer.")
    if not callable(estimator):
        raise ValueError(f"`estimator` must be callable (responses, n_items, probs) -> (confusion, prevalence); got "
                         f"{type(estimator).__name__}.")
    try:
        params = inspect.signature(estimator).parameters
    except (TypeError, ValueError):
        params = {}
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return estimator, "init" in params or var_kw, "gold" in params or var_kw


def _call_estimator(estimator, takes, resp_tuple, n, probs, init, gold, j, k):
    """``(confusion, prevalence for the weights ((K,) or None), prevalence as returned (for the warm start))``."""
    kw = {}
    if takes[0] and init is not None:
        kw["init"] = init
    if takes[1] and gold is not None:
        kw["gold"] = gold
    out = estimator(resp_tuple, n, probs, **kw)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise ValueError(f"`estimator` must return (confusion, prevalence); got {type(out).__name__}.")
    conf = check_confusion(out[0], j, k, name="estimator(...)[0]")
    raw = None if out[1] is None else np.asarray(out[1], dtype=np.float64)
    # grouped prevalences (G, K): the overall prevalence is estimated from the data instead (kept for init)
    prev = raw if raw is not None and raw.shape == (k,) else None
    return conf, prev, raw


def _check_gold(gold, n: int, k: int, func: str):
    """Gold labels (n,) int, -1 = unknown; None when there are none."""
    if gold is None:
        return None
    g = np.asarray(gold)
    if g.shape != (n,) or not (np.issubdtype(g.dtype, np.integer) or (np.issubdtype(g.dtype, np.floating)
                                                                      and np.all(g == np.round(g)))):
        raise ValueError(f"{func}: `gold` must be an int array of shape ({n},) (-1 = unknown); got {g.dtype} "
                         f"{g.shape}.")
    g = g.astype(np.int64)
    bad = (g < -1) | (g >= k)
    if bad.any():
        raise ValueError(f"{func}: `gold` must be -1 (unknown) or a class in 0..{k - 1}; got {_preview(g[bad])} at "
                         f"items {_preview(np.flatnonzero(bad))}.")
    return g if (g >= 0).any() else None


def _resample(resp: MCResponses, rows: np.ndarray):
    """Responses of the resampled items ``rows`` (new item ``r`` = old item ``rows[r]``), in item order."""
    counts = np.bincount(resp.item, minlength=resp.n_items)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    deg = counts[rows]
    total = int(deg.sum())
    new_item = np.repeat(np.arange(rows.size), deg)
    # position of each new response: its source item's first response plus its rank within the item
    first = np.repeat(start[rows] - np.concatenate([[0], np.cumsum(deg)[:-1]]), deg)
    pos = first + np.arange(total)
    return new_item, resp.annotator[pos], resp.label[pos]


def _reasons_text(reasons: Counter, *, shown: int = 3, width: int = 200) -> str:
    """The failure reasons of a bootstrap in one line: the ``shown`` most frequent with their counts (each cut to
    ``width`` characters), then how many other reasons there were."""
    top = reasons.most_common(shown)
    parts = [f"{cnt} x {text if len(text) <= width else text[:width - 3] + '...'}" for text, cnt in top]
    rest = len(reasons) - len(top)
    if rest:
        parts.append(f"{rest} other reason(s) in {sum(reasons.values()) - sum(c for _, c in top)} replicate(s)")
    return "; ".join(parts)


def _interval(reps, v, level, method):
    if method == "percentile":
        lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2], axis=0)
        return lo, hi, np.quantile(reps, level, axis=0)
    q_lo, q_hi, q_up = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2, 1 - level], axis=0)
    return np.maximum(2 * v - q_hi, 0.0), np.maximum(2 * v - q_lo, 0.0), np.maximum(2 * v - q_up, 0.0)


def bootstrap_multiclass_nc_ece(probs, responses, *, estimator=None, n_boot: int = 200, level: float = 0.9,
                                bins=15, weights="iv", method: str = "percentile", seed: int = 0,
                                max_condition: float = MAX_CONDITION, gold=None,
                                progress_bar: bool = False) -> MulticlassBootstrap:
    """Item bootstrap of the top-label and class-wise NC-ECE, refitting the confusion matrices per replicate.

    Each replicate draws ``n_items`` items with replacement (``numpy.random.default_rng(seed)``) with all their
    responses and gold labels, calls ``estimator`` on it (warm-started at the full-sample fit when the callable
    takes an ``init`` keyword: ``init=(confusion, prevalence)`` as the full-sample call returned them; the
    replicate's gold labels as ``gold=`` when it takes that keyword), recomputes the usable annotators, the weights (IV from
    the replicate) and both NC-ECEs on the partition fixed from the full sample. Intervals as
    :func:`~noisycal_bayes.reference.bootstrap_nc_ece` (``"percentile"`` or ``"basic"``).

    In a sparse crowd most replicates miss some annotator's every item. Such a replicate is kept: it does not
    identify that annotator's confusion matrix, but none of its items is corrected with it either, so its NC-ECE
    does not depend on that matrix; the estimator receives the replicate with all ``n_annotators`` and should keep
    the absent ones at ``init`` (:func:`~noisycal_bayes.inference.multiclass_em_estimator` does).

    Parameters
    ----------
    probs : array of shape (n_items, n_classes)
    responses : as in :func:`top_label_nc_ece`
    estimator : callable
        ``estimator(responses, n_items, probs[, init=...][, gold=...]) -> (confusion (J, K, K), prevalence (K,)
        or None)``; ``responses`` is an ``(item, annotator, label)`` tuple. Required (this layer does not import
        the EM): :func:`~noisycal_bayes.inference.multiclass_em_estimator` (warm-started EM refits that use the
        gold labels), or any wrapper of a fit. A ``ValueError`` or ``LinAlgError`` it
        raises marks the replicate failed. Grouped prevalences (G, K) are accepted and ignored (the overall
        prevalence is then estimated from the replicate).
    n_boot : int, default 200
    level : float, default 0.9
    bins : int or Binning, default 15
    weights : {"iv", "equal"} or array
    method : {"percentile", "basic"}
    seed : int, default 0
    max_condition : float, default 100
    gold : int array of shape (n_items,), optional
        Observed clean labels (-1 unknown), resampled with their items and passed to the estimator as ``gold=``
        (an estimator without a ``gold`` keyword is refused when there are gold labels). Default: the ``gold`` of
        a ``MulticlassAnnotationSet`` passed as ``responses``, else none. The NC-ECE itself uses the annotators'
        labels only, as :func:`top_label_nc_ece` does.
    progress_bar : bool, default False

    Returns
    -------
    MulticlassBootstrap
        ``.top_label`` and ``.classwise`` (:class:`BootstrapMulticlassNCECE`, the latter with ``per_class``).

    Raises
    ------
    ValueError
        No ``estimator``; bad inputs (``gold`` of the wrong shape or outside -1..K-1; gold labels with an estimator
        that takes no ``gold``); the estimator fails on the full sample; every replicate failed.

    Warns
    -----
    IdentifiabilityWarning
        Failed replicates (excluded), or near-singular confusion on the full sample.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> C = np.array([[[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]] * 3)
    >>> y = rng.integers(0, 3, 300)
    >>> lab = np.array([[rng.choice(3, p=C[j, yi]) for j in range(3)] for yi in y])
    >>> resp = (np.repeat(np.arange(300), 3), np.tile(np.arange(3), 300), lab.reshape(-1))
    >>> p = np.full((300, 3), 0.1); p[np.arange(300), y] = 0.8
    >>> res = bootstrap_multiclass_nc_ece(p, resp, estimator=lambda r, n, q: (C, None), n_boot=20)
    >>> res.top_label.interval[0] <= res.top_label.interval[1], res.classwise.per_class.shape[0]
    (True, 3)
    """
    func = "bootstrap_multiclass_nc_ece"
    estimator, takes_init, takes_gold = _check_mc_estimator(estimator)
    p = check_probs(probs)
    n, k = p.shape
    if gold is None and hasattr(responses, "responses") and not isinstance(responses, tuple):
        gold = getattr(responses, "gold", None)
    resp = check_responses(responses, n, k, func=func)
    gold = _check_gold(gold, n, k, func)
    if gold is not None and not takes_gold:
        raise ValueError(f"{func}: the data have {int((gold >= 0).sum())} gold labels but `estimator` takes no `gold` "
                         "keyword, so its refits would ignore them; give it one (e.g. "
                         "inference.multiclass_em_estimator()) or pass gold=np.full(n_items, -1) to leave them out.")
    takes = (takes_init, takes_gold)
    n_boot = check_positive_int(n_boot, name="n_boot")
    level = check_level(level)
    if method not in ("percentile", "basic"):
        raise ValueError(f"`method` must be 'percentile' or 'basic'; got {method!r}.")
    rule, label = check_mc_weights(weights, resp.n_annotators, k)
    j = resp.n_annotators
    conf, prev, raw_prev = _call_estimator(estimator, takes, resp[:3], n, p, None, gold, j, k)
    edges = {kind: bin_edges(p, bins, kind) for kind in ("top_label", "classwise")}
    full = {kind: point_nc_ece(p, resp[:3], conf, prevalence=prev, bins=bins, weights=weights, kind=kind, func=func,
                               edges=edges[kind], max_condition=max_condition)
            for kind in ("top_label", "classwise")}
    rng = np.random.default_rng(seed)
    tops, cws, reasons = [], [], Counter()
    caught: dict = {}
    for _ in progress(range(n_boot), enabled=progress_bar, desc="bootstrap multiclass NC-ECE"):
        rows = rng.integers(0, n, size=n)
        rep = _resample(resp, rows)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            try:
                c_r, prev_r, _ = _call_estimator(estimator, takes, rep, n, p[rows], (conf, raw_prev),
                                                 None if gold is None else gold[rows], j, k)
                # all j annotators, also when the replicate misses the last ones
                vals = [point_nc_ece(p[rows], MCResponses(*rep, n, j, k), c_r, prevalence=prev_r, bins=bins,
                                     weights=weights, kind=kind, func=func, edges=edges[kind],
                                     max_condition=max_condition)
                        for kind in ("top_label", "classwise")]
            except (ValueError, np.linalg.LinAlgError) as exc:
                reasons[f"{type(exc).__name__}: {one_line(exc)}"] += 1
                vals = None
        for wrn in record:
            cnt, first = caught.get(wrn.category, (0, str(wrn.message)))
            caught[wrn.category] = (cnt + 1, first)
        if vals is not None:
            tops.append(vals[0].value)
            cws.append(vals[1].per_class)
    for category, (cnt, first) in caught.items():
        warnings.warn(f"{cnt} warning(s) of this kind inside the {n_boot} bootstrap replicates; first: {first}",
                      category, stacklevel=2)
    n_failed = n_boot - len(tops)
    if not tops:
        raise ValueError(f"all {n_boot} bootstrap replicates failed ({_reasons_text(reasons)}). Use more items, a "
                         "design that identifies the confusion matrices, or another estimator.")
    if n_failed:
        warnings.warn(f"{n_failed} of {n_boot} bootstrap replicates failed and were excluded from the interval "
                      f"(reasons: {_reasons_text(reasons)}); the interval may be too narrow.", IdentifiabilityWarning,
                      stacklevel=2)
    top_reps = np.asarray(tops)
    cw_reps = np.asarray(cws)
    out = {}
    for kind, reps, pc in (("top_label", top_reps, None), ("classwise", cw_reps.mean(axis=1), cw_reps)):
        v = full[kind].value
        lo, hi, up = _interval(reps, v, level, method)
        table = None
        if pc is not None:
            vk = full[kind].per_class
            plo, phi, pup = _interval(pc, vk, level, method)
            table = pd.DataFrame({"class": np.arange(k), "value": vk, "lower": plo, "upper": phi, "upper_bound": pup})
        out[kind] = BootstrapMulticlassNCECE(
            float(v), (float(lo), float(hi)), float(up), float(reps.mean() - v), level, reps, table, pc, n_boot,
            n_failed, dict(reasons), full[kind], kind, label, seed, method)
    return MulticlassBootstrap(out["top_label"], out["classwise"])


def bootstrap_top_label_nc_ece(probs, responses, **kwargs) -> BootstrapMulticlassNCECE:
    """The ``top_label`` part of :func:`bootstrap_multiclass_nc_ece` (same keyword arguments).

    Call :func:`bootstrap_multiclass_nc_ece` to get both from one set of refits."""
    return bootstrap_multiclass_nc_ece(probs, responses, **kwargs).top_label


def bootstrap_classwise_nc_ece(probs, responses, **kwargs) -> BootstrapMulticlassNCECE:
    """The ``classwise`` part of :func:`bootstrap_multiclass_nc_ece` (same keyword arguments), with ``per_class``."""
    return bootstrap_multiclass_nc_ece(probs, responses, **kwargs).classwise
