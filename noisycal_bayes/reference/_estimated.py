"""Shared plumbing of NC-ECE with estimated channels (:mod:`~noisycal_bayes.reference.variants` and
:mod:`~noisycal_bayes.reference.nc_ece_bootstrap`): calling the user's channel ``estimator``, item subsets, the
annotator weights of a channel on a subset, and the per-bin corrected sums on a fixed partition.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .._validation import _preview, check_weights
from ..core import bin_stats, bin_table, pad_bin_stats, x64
from ..core.weights import weights_for_labels
from ..data import AnnotationSet, Channel, bin_index
from ..warnings import ConvergenceWarning
from ..data.binning import Binning

#: Score groups used by the default estimator (the reference EM with equal-mass score groups).
DEFAULT_EM_GROUPS = 5

_TARGET = "sample oracle ECE (binned, clean labels) of the evaluated items"


def _default_estimator(data: AnnotationSet):
    # Imported here so that this module loads without the EM module (and to keep import time low).
    from .em import fit_em

    return fit_em(data, groups=Binning.equal_mass(DEFAULT_EM_GROUPS))


def _check_estimator(estimator):
    if estimator is None:
        return _default_estimator
    if not callable(estimator):
        raise ValueError(
            "`estimator` must be a callable `data -> ChannelEstimate` (or -> Channel); "
            f"got {type(estimator).__name__}. "
            "For example `lambda d: fit_em(d, groups=Binning.equal_mass(5))`."
        )
    return estimator


class _EstimationFailed(Exception):
    """The estimator returned no usable channel (not identified, or no channel)."""


def _estimate_channel(estimator, data: AnnotationSet, n_annotators: int, where: str, *, catch: bool = False):
    """Call ``estimator`` and return ``(channel, converged)``; raise :class:`_EstimationFailed` with a reason.

    With ``catch``, a ValueError raised by the estimator itself (the package's error for data that do not
    identify the channels) also counts as a failure instead of propagating.
    """
    try:
        out = estimator(data)
    except ValueError as exc:
        if not catch:
            raise
        raise _EstimationFailed(f"estimator raised ValueError: {exc}") from None
    if isinstance(out, Channel):
        channel, identified, converged, reason = out, True, True, ""
    elif hasattr(out, "channel"):
        channel = out.channel
        identified = bool(getattr(out, "identified", True))
        converged = bool(getattr(out, "converged", True))
        reason = str(getattr(out, "reason", "") or "")
    else:
        raise ValueError(
            f"`estimator` must return a Channel or an object with a `.channel` attribute; got {type(out).__name__}."
        )
    if channel is None or not identified:
        raise _EstimationFailed(reason or f"channels not identified on {where}")
    if not isinstance(channel, Channel):
        raise ValueError(f"`estimator(...).channel` must be a Channel; got {type(channel).__name__}.")
    if channel.n_annotators != n_annotators:
        raise ValueError(
            f"`estimator` returned a channel for {channel.n_annotators} annotators on {where}; the data has "
            f"{n_annotators}."
        )
    return channel, converged


def _require_all_annotators(data: AnnotationSet, rows: np.ndarray, where: str) -> None:
    """Raise when some annotator has no label among ``rows`` (their channel could not be fitted there)."""
    labelled = (data.labels[rows] >= 0).any(axis=0)
    if not labelled.all():
        raise ValueError(
            f"annotators {_preview(data.annotator_ids[~labelled])} have no label in {where}, so their channels "
            "cannot be fitted there. Use fewer folds / a larger `fraction`, or drop very sparse annotators."
        )


def _subset(data: AnnotationSet, rows: np.ndarray) -> AnnotationSet:
    """Rows ``rows`` of ``data`` with every annotator kept (caller checked each has a label)."""
    return AnnotationSet(data.labels[rows], data.scores[rows], data.item_ids[rows], data.annotator_ids)


def _weights_for(labels, channel: Channel, rule):
    """Convex annotator weights of ``rule`` fitted on ``labels`` (IV uses their mean corrected label)."""
    if not isinstance(rule, str):
        return np.asarray(rule, dtype=np.float64)
    with x64():
        return np.asarray(weights_for_labels(rule, np.asarray(labels), channel.fpr, channel.gap), dtype=np.float64)


def _bin_sums(labels, scores, edges, channel: Channel, weights):
    """Per-bin ``(count, score_sum, corrected_sum)`` of the given items with fixed weights."""
    n_bins = edges.size - 1
    stats = pad_bin_stats(bin_stats(labels, scores, bin_index(scores, edges), n_bins))
    with x64():
        count, score_sum, corr_sum, _ = (np.asarray(a, dtype=np.float64) for a in
                                         bin_table(stats, channel.fpr, channel.gap, np.asarray(weights)))
    return count, score_sum, corr_sum


def _table(edges, count, score_sum, corr_sum) -> pd.DataFrame:
    n_bins = edges.size - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.DataFrame({
            "bin": np.arange(n_bins), "lower": edges[:-1], "upper": edges[1:], "count": count.astype(np.int64),
            "mean_score": score_sum / count, "corrected_frequency": corr_sum / count,
            "residual": (corr_sum - score_sum) / count,
        })


def _check_common(data: AnnotationSet, weights, func: str):
    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"`data` must be an AnnotationSet; got {type(data).__name__}. "
                         "Build one with AnnotationSet.from_long or from_wide.")
    # The variants refit and reweight the dense labels of item subsets.
    data.require_one_label_per_pair(func, "Use evaluate(data, method='em'), whose bootstrap reads every response.")
    z = data.require_scores()
    rule, label = check_weights(weights, data.n_annotators)
    return z, rule, label


def _warn_unconverged(n_unconverged: int, n_fits: int) -> None:
    if n_unconverged:
        warnings.warn(f"{n_unconverged} of {n_fits} channel fits did not converge; their channels were used anyway.",
                      ConvergenceWarning, stacklevel=3)


def _fit_or_raise(estimator, data, n_annotators, where):
    try:
        return _estimate_channel(estimator, data, n_annotators, where)
    except _EstimationFailed as exc:
        raise ValueError(f"channel estimation failed on {where}: {exc}") from None
