"""Calibration error estimates: ECE, SMECE and the noise-corrected ECE (paper §3), for two classes and for K.

K classes: coordinate ``k`` of an item's corrected target is
``t_ik = sum_r w[j_r, k] T_{j_r}[a_r, k] / sum_r w[j_r, k]`` with ``T_j = C_j^{-1}``; top-label NC-ECE bins on the
confidence, class-wise NC-ECE per class. Annotators with a near-singular confusion weigh 0. Details:
docs/foundations.md, *noisycal_bayes.reference.calibration*.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from .._validation import (_preview, check_binary_labels, check_confusion, check_same_length, check_scores,
                           check_soft_labels, check_weights)
from .._validation import binary_only, check_probs as _check_probs
from ..core import bin_stats, bin_table, binned_abs_residual, pad_bin_stats, x64
from ..data.columns import response_columns
from ..core import annotator_weights, confusion_condition, corrected_targets, usable_confusions
from ..data import AnnotationSet, Binning, Channel, as_binning, bin_index
from ..core.tables import Responses
from ..warnings import DataWarning, IdentifiabilityWarning


def ece(scores, labels, *, bins=10) -> float:
    """Binned expected calibration error ``sum_k (n_k / n) |mean_{B_k} (y - z)|``.

    Parameters
    ----------
    scores : array-like of shape (n_items,), in [0, 1]
    labels : array-like of shape (n_items,), 0/1
    bins : int (equal width) or Binning

    Examples
    --------
    >>> round(ece([0.2, 0.8], [0, 1], bins=2), 12)
    0.2
    """
    binary_only(scores, "ece", "top_label_ece or classwise_ece (noisycal_bayes.core)", name="scores")
    z = check_scores(scores)
    y = check_binary_labels(labels).astype(np.float64)
    check_same_length(z, y)
    return _binned(z, y, bins)


def smece(scores, soft_labels, *, bins=10) -> float:
    """Soft-label ECE ``sum_k (n_k / n) |mean_{B_k} (q - z)|`` (seeds/002; equals ECE on 0/1 labels).

    Unbiased for the clean calibration error only when ``q`` are true probabilities of the label;
    vote fractions of noisy annotators are biased towards ``a + delta m(z)`` (DESIGN §2).
    """
    binary_only(scores, "smece", "classwise_ece (noisycal_bayes.core) with soft targets", name="scores")
    z = check_scores(scores)
    q = check_soft_labels(soft_labels)
    check_same_length(z, q, ("scores", "soft_labels"))
    return _binned(z, q, bins)


def _binned(z, y, bins) -> float:
    binning = as_binning(bins)
    edges = binning.edges_for(z)
    idx = bin_index(z, edges)
    # Pad to a power of two with zero-weight items so that JAX compiles for a few sizes, not every n.
    size = max(8, 1 << max(z.size - 1, 0).bit_length())
    pad = size - z.size
    resid = np.concatenate([y - z, np.zeros(pad)])
    weight = np.concatenate([np.ones(z.size), np.zeros(pad)])
    idx = np.concatenate([idx, np.zeros(pad, idx.dtype)])
    with x64():
        return float(binned_abs_residual(idx, resid, edges.size - 1, weight))


@dataclass(frozen=True)
class NCECEResult:
    """Noise-corrected ECE and how it was made.

    value : float
    table : DataFrame, one row per bin: ``bin, lower, upper, count, mean_score, corrected_frequency,
        residual`` (empty bins have NaN means)
    weights : ndarray (n_annotators,), the convex annotator weights used
    weights_rule : str ("iv", "equal", "gap", "squared_gap" or "explicit")
    edges : ndarray (n_bins + 1,)
    channel : Channel
    target : str
    """

    value: float
    table: pd.DataFrame = field(repr=False)
    weights: np.ndarray
    weights_rule: str
    edges: np.ndarray = field(repr=False)
    channel: Channel = field(repr=False)
    target: str = "sample oracle ECE (binned, clean labels)"

    def __float__(self) -> float:
        return self.value


def check_channel(channel, data: AnnotationSet) -> Channel:
    if not isinstance(channel, Channel):
        raise ValueError(f"`channel` must be a Channel; got {type(channel).__name__}. Use Channel(fpr, tpr).")
    if channel.n_annotators != data.n_annotators:
        raise ValueError(f"`channel` has {channel.n_annotators} annotators but the data has {data.n_annotators}.")
    return channel


def nc_ece(data: AnnotationSet, channel: Channel, *, bins=10, weights="iv", edges=None, usable=None) -> NCECEResult:
    """Noise-corrected ECE ``sum_k (n_k / n) |mean_{i in B_k} Rtilde_i|`` (paper §3).

    Parameters
    ----------
    data : AnnotationSet with scores
    channel : Channel of shape (n_annotators,)
    bins : int or Binning
        Evaluation bins; equal-mass bins are computed from ``data``'s scores unless ``edges`` is given.
    weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,)
        Annotator weights, renormalised per item over the annotators who labelled it.
    edges : array of shape (n_bins + 1,), optional
        Fixed edges (overrides ``bins``); used to share one partition across folds.
    usable : bool array of shape (n_annotators,), optional
        Annotators whose labels enter the corrected labels (default: every annotator with ``gap != 0``);
        the others get weight 0 under every rule and items labelled only by them are left out (with a
        :class:`DataWarning`). Give ``fit.usable_annotators()`` to apply the rule "zero weight where the gap's
        interval contains 0" (an adversarial annotator, gap < 0, stays: its labels are used with their sign).
        Repeated labels (one annotator, one item) each count as a response with that annotator's channel.

    Examples
    --------
    >>> import numpy as np
    >>> data = AnnotationSet.from_wide(np.array([[0, 0], [1, 1]]), [0.2, 0.8])
    >>> round(nc_ece(data, Channel.identity(2), bins=2).value, 6)
    0.2
    """
    binary_only(data, "nc_ece", "top_label_nc_ece or classwise_nc_ece (with a K-class fit's confusion)")
    z = data.require_scores()
    channel = check_channel(channel, data)
    rule, label = check_weights(weights, data.n_annotators)
    if not isinstance(rule, str):
        # Explicit weights may be zero for some annotators; an item labelled only by those would get a
        # 0/0 combined label (NaN). Say which items instead.
        orphan = ~(data.observed & (rule > 0)).any(axis=1)
        if orphan.any():
            raise ValueError(f"items {_preview(data.item_ids[orphan])} were labelled only by annotators with zero "
                             "weight; give those annotators a positive weight or drop the items.")
    edges = as_binning(bins).edges_for(z) if edges is None else Binning.from_edges(edges).edges_for()
    n_bins = edges.size - 1
    cols = response_columns(data, np.asarray(channel.gap != 0 if usable is None else usable, dtype=bool))
    z, a = z[cols.keep], cols.annotator
    stats = pad_bin_stats(bin_stats(cols.labels, z, bin_index(z, edges), n_bins))
    with x64():
        count, score_sum, corr_sum, w = (np.asarray(v, dtype=np.float64) for v in bin_table(
            stats, channel.fpr[a], channel.gap[a], rule if isinstance(rule, str) else rule[a]))
    if a.size != data.n_annotators or not np.array_equal(a, np.arange(data.n_annotators)):
        w = np.bincount(a, weights=w, minlength=data.n_annotators)  # per annotator (repeat columns added up)
    value = float(np.sum(np.abs(corr_sum - score_sum)) / np.sum(count))
    with np.errstate(invalid="ignore", divide="ignore"):
        table = pd.DataFrame({
            "bin": np.arange(n_bins), "lower": edges[:-1], "upper": edges[1:], "count": count.astype(np.int64),
            "mean_score": score_sum / count, "corrected_frequency": corr_sum / count,
            "residual": (corr_sum - score_sum) / count,
        })
    return NCECEResult(value, table, w, label, edges, channel)


# ----------------------------------------------------------------------------- K classes: inputs
# The K-class responses, prevalence and usability checks, out of ``__all__`` and shared with propagate and labels;
# probabilities and confusion matrices are checked by ``_validation`` (``check_probs`` here fixes the tolerance).
#: Rows of ``probs`` must sum to 1 within this absolute tolerance (float32 softmax outputs sum to 1 to rounding).
PROBS_ROW_TOL = 1e-4
#: Default largest condition number of a usable confusion matrix (``usable_confusions``).
MAX_CONDITION = 100.0


def check_probs(probs, *, name: str = "probs") -> np.ndarray:
    """``probs`` as float64 (n_items, K), K >= 2, finite, in [0, 1], rows summing to 1 within ``PROBS_ROW_TOL``."""
    return _check_probs(probs, name=name, tol=PROBS_ROW_TOL, hint="Pass softmax outputs, not logits.")


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


def usable_from_draws(confusion: np.ndarray, *, max_condition: float = MAX_CONDITION, level: float = 0.9):
    """Which annotators enter the corrected targets, bool (J,): the ``(1 + level) / 2`` quantile of the condition
    number of ``C_j`` over the draws (S, J, K, K) is at most ``max_condition`` (one draw: its own condition).

    The K-class analogue of "the gap's interval excludes 0". When no annotator passes (many classes, few labels per
    row: the draws' off-diagonal noise pulls every smallest singular value down), the annotators whose
    posterior-mean matrix passes are used instead, with an IdentifiabilityWarning (the EM route's rule)."""
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


# ----------------------------------------------------------------------------- K classes: NC-ECE
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


def estimated_prevalence(resp: MCResponses, confusion: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """The mean over items of the equally weighted corrected vector (the binary IV rule's ``mu``), shape (K,)."""
    t = corrected_targets(Responses(*resp[:3]), resp.n_items, confusion,
                          weights=np.repeat(usable.astype(float)[:, None], resp.n_classes, axis=1))
    return np.nanmean(t, axis=0)


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
    c = check_confusion(confusion, n_annotators=resp.n_annotators, n_classes=k)
    rule, label = check_weights(weights, resp.n_annotators, allow_zero=False, n_classes=k)
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
    ``sum_b (n_b / n) |mean_{i in b} (t_{i, yhat_i} - max_k p_ik)|`` with the corrected targets ``t``
    (docs/foundations.md, DESIGN §8). With identity confusion matrices this is the plain top-label ECE against the
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
