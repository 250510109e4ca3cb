"""Calibration error estimates: ECE, SMECE and the noise-corrected ECE (paper §3).

Three targets (DESIGN §2): the *sample oracle ECE* (binned ECE with the items' clean labels), the
*conditional binned ECE* and the *population binned ECE*. With known channels NC-ECE's bin residual
means are unbiased for the clean bin residual moments; the absolute value adds the usual Jensen bias.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import _preview, check_binary_labels, check_same_length, check_scores, check_soft_labels, check_weights
from ..core import bin_stats, bin_table, binned_abs_residual, pad_bin_stats, x64
from ..data.columns import response_columns
from ..data import AnnotationSet, Binning, Channel, as_binning, bin_index


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
    z = check_scores(scores)
    y = check_binary_labels(labels).astype(np.float64)
    check_same_length(z, y)
    return _binned(z, y, bins)


def smece(scores, soft_labels, *, bins=10) -> float:
    """Soft-label ECE ``sum_k (n_k / n) |mean_{B_k} (q - z)|`` (seeds/002; equals ECE on 0/1 labels).

    Unbiased for the clean calibration error only when ``q`` are true probabilities of the label;
    vote fractions of noisy annotators are biased towards ``a + delta m(z)`` (DESIGN §2).
    """
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
