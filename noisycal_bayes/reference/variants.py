"""NC-ECE with estimated channels: independent samples, sample reuse, cross-fitting, and a bootstrap.

Paper §3 (and Appendix C.2–C.4). NC-ECE needs channels ``(fpr, gap)`` and annotator weights; when
they are estimated from the same labels the estimate can be built three ways:

(i) **independent samples** (:func:`nc_ece_split`): channels, weights and (for equal-mass bins) the
    evaluation partition are fitted on a channel sample, NC-ECE is computed on a disjoint evaluation
    sample (Theorem C.1);
(ii) **reuse** (:func:`nc_ece_reuse`): one sample for both, with the bins fixed in advance
    (Appendix C.3);
(iii) **cross-fitting** (:func:`nc_ece_cross_fit`): K folds, channels and weights fitted out of fold,
    per-bin sufficient statistics of each held-out fold accumulated on ONE common partition, and the
    NC-ECE computed once from the summed corrected bin sums (Appendix C.4: the common partition makes
    every fold estimate the same bin moments).

:func:`bootstrap_nc_ece` gives a percentile interval from a nonparametric bootstrap over items with the
channels re-estimated inside every replicate, so the interval carries channel-estimation uncertainty.

Every function takes an ``estimator``: a callable ``data -> result`` where the result is a
:class:`~noisycal_bayes.data.Channel` or has a ``.channel`` attribute (and optionally ``.identified``,
``.converged``, ``.reason``, as :class:`~noisycal_bayes.reference.channels.ChannelEstimate` does). The
default is the reference EM, ``fit_em(data, groups=5)``.
"""
from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import _preview, check_level, check_positive_int
from ..core import bin_stats, bin_table, pad_bin_stats, x64
from ..core.weights import weights_for_labels
from ..data import AnnotationSet, Channel, as_binning, bin_index
from ..warnings import ConvergenceWarning, DataWarning, IdentifiabilityWarning
from .calibration import check_weights, nc_ece

#: Score groups used by the default estimator (the reference EM with equal-mass score groups).
DEFAULT_EM_GROUPS = 5

_TARGET = "sample oracle ECE (binned, clean labels) of the evaluated items"


def _default_estimator(data: AnnotationSet):
    # Imported here so that this module loads without the EM module (and to keep import time low).
    from .em import fit_em

    return fit_em(data, groups=DEFAULT_EM_GROUPS)


def _check_estimator(estimator):
    if estimator is None:
        return _default_estimator
    if not callable(estimator):
        raise ValueError(
            "`estimator` must be a callable `data -> ChannelEstimate` (or -> Channel); "
            f"got {type(estimator).__name__}. "
            "For example `lambda d: fit_em(d, groups=5)`."
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


@dataclass(frozen=True)
class NCECEVariantResult:
    """NC-ECE with estimated channels, and how it was made.

    Attributes
    ----------
    value : float
        ``sum_k |sum_{i in B_k} Rtilde_i| / n_eval`` over the evaluated items.
    table : DataFrame
        One row per evaluation bin: ``bin, lower, upper, count, mean_score, corrected_frequency, residual``
        (NaN means for empty bins); for cross-fitting the sums over all held-out folds.
    variant : str
        ``"independent"``, ``"reuse"`` or ``"cross_fit"``.
    edges : ndarray of shape (n_bins + 1,)
        The one evaluation partition used (for cross-fitting: shared by every fold).
    channels : tuple of Channel
        One fitted channel (independent, reuse) or one per fold (cross-fit, fitted out of fold).
    weights : ndarray of shape (n_fits, n_annotators)
        Annotator weights used with each channel.
    weights_rule : str
    n_fit : int
        Items the channels were fitted on (cross-fit: ``n_items``, each item used in ``n_folds - 1`` fits).
    n_eval : int
        Items the NC-ECE averages over.
    fold : ndarray of shape (n_items,) or None
        Independent: 0 = channel-fitting item, 1 = evaluation item. Cross-fit: the item's held-out fold.
        Reuse: None.
    fold_table : DataFrame or None
        Cross-fit only: per (fold, bin) ``count, score_sum, corrected_sum`` before summing.
    n_unconverged : int
        Channel fits whose estimator reported ``converged = False`` (their channels are still used).
    seed : int or None
    target : str
    """

    value: float
    table: pd.DataFrame = field(repr=False)
    variant: str
    edges: np.ndarray = field(repr=False)
    channels: tuple = field(repr=False)
    weights: np.ndarray = field(repr=False)
    weights_rule: str
    n_fit: int
    n_eval: int
    fold: np.ndarray | None = field(default=None, repr=False)
    fold_table: pd.DataFrame | None = field(default=None, repr=False)
    n_unconverged: int = 0
    seed: int | None = None
    target: str = _TARGET

    def __float__(self) -> float:
        return self.value


def _check_common(data: AnnotationSet, weights):
    if not isinstance(data, AnnotationSet):
        raise ValueError(f"`data` must be an AnnotationSet; got {type(data).__name__}. "
                         "Build one with AnnotationSet.from_long or from_wide.")
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


def nc_ece_split(data: AnnotationSet, *, estimator=None, bins=10, weights="iv", fraction: float = 0.5,
                 seed: int = 0) -> NCECEVariantResult:
    """NC-ECE from independent samples: channels fitted on one part, evaluated on the other (paper §3).

    Items are split at random (``seed``) into a channel-fitting part (a share ``fraction``) and an
    evaluation part. The channels, the annotator weights (IV weights use the fitting part's mean
    corrected label) and, for equal-mass ``bins``, the edges come from the fitting part; NC-ECE is then
    ``sum_k |sum_{i in B_k, i in eval} Rtilde_i| / n_eval`` (Theorem C.1).

    Parameters
    ----------
    data : AnnotationSet with scores
    estimator : callable ``AnnotationSet -> ChannelEstimate | Channel``, optional
        Default: ``fit_em(data, groups=5)`` (:mod:`noisycal_bayes.reference.em`).
    bins : int or Binning
    weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,)
    fraction : float in (0, 1)
        Share of items used to fit the channels.
    seed : int

    Returns
    -------
    NCECEVariantResult with ``variant = "independent"``.

    Raises
    ------
    ValueError
        Bad ``fraction``; a part left empty or without labels from some annotator; the estimator found
        no identified channel on the fitting part.

    Examples
    --------
    >>> from noisycal_bayes import simulate_annotations
    >>> sim = simulate_annotations(400, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> res = nc_ece_split(sim.data, estimator=lambda d: sim.channel, seed=1)
    >>> res.variant, res.n_fit, res.n_eval
    ('independent', 200, 200)
    """
    z, rule, label = _check_common(data, weights)
    estimator = _check_estimator(estimator)
    fraction = float(fraction)
    if not 0 < fraction < 1:
        raise ValueError(f"`fraction` (share of items used to fit the channels) must lie in (0, 1); got {fraction}.")
    n = data.n_items
    n_fit = int(round(fraction * n))
    if n_fit < 1 or n_fit > n - 1:
        raise ValueError(f"`fraction` = {fraction} of {n} items leaves one part empty ({n_fit} fitting items).")
    perm = np.random.default_rng(seed).permutation(n)
    fit_rows, eval_rows = np.sort(perm[:n_fit]), np.sort(perm[n_fit:])
    _require_all_annotators(data, fit_rows, "the channel-fitting part")
    fit_data = _subset(data, fit_rows)
    channel, converged = _fit_or_raise(estimator, fit_data, data.n_annotators, "the channel-fitting part")
    w = _weights_for(fit_data.labels, channel, rule)
    edges = as_binning(bins).edges_for(z[fit_rows])
    count, score_sum, corr_sum = _bin_sums(data.labels[eval_rows], z[eval_rows], edges, channel, w)
    fold = np.zeros(n, dtype=np.int8)
    fold[eval_rows] = 1
    _warn_unconverged(int(not converged), 1)
    return NCECEVariantResult(
        float(np.sum(np.abs(corr_sum - score_sum)) / np.sum(count)), _table(edges, count, score_sum, corr_sum),
        "independent", edges, (channel,), w[None, :], label, n_fit, n - n_fit, fold, None, int(not converged), seed,
    )


def nc_ece_reuse(data: AnnotationSet, *, estimator=None, bins, weights="iv") -> NCECEVariantResult:
    """NC-ECE with the channels fitted on the same sample it evaluates, bins fixed in advance (paper §3).

    Equivalent to ``nc_ece(data, estimator(data).channel, bins=bins, weights=weights)``. The reuse
    bound (Appendix C.3) needs the partition fixed independently of the sample: pass an int
    (equal-width bins) or ``Binning.from_edges``. Equal-mass bins computed from the same scores are
    accepted with a :class:`~noisycal_bayes.warnings.DataWarning`.

    Parameters
    ----------
    data : AnnotationSet with scores
    estimator : callable, optional (default ``fit_em(data, groups=5)``)
    bins : int or Binning (required; keyword)
    weights : rule name or array of shape (n_annotators,)

    Returns
    -------
    NCECEVariantResult with ``variant = "reuse"``.

    Examples
    --------
    >>> from noisycal_bayes import simulate_annotations
    >>> sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> nc_ece_reuse(sim.data, estimator=lambda d: sim.channel, bins=5).variant
    'reuse'
    """
    z, rule, label = _check_common(data, weights)
    estimator = _check_estimator(estimator)
    binning = as_binning(bins)
    if binning.kind == "equal_mass":
        warnings.warn("sample reuse assumes bins fixed independently of the sample; equal-mass bins are computed "
                      "from the evaluated scores. Pass equal-width bins or Binning.from_edges for the guarantee.",
                      DataWarning, stacklevel=2)
    channel, converged = _fit_or_raise(estimator, data, data.n_annotators, "the data")
    res = nc_ece(data, channel, bins=binning, weights=rule)
    _warn_unconverged(int(not converged), 1)
    return NCECEVariantResult(res.value, res.table, "reuse", res.edges, (channel,), np.asarray(res.weights)[None, :],
                              label, data.n_items, data.n_items, None, None, int(not converged), None)


def nc_ece_cross_fit(data: AnnotationSet, *, estimator=None, n_folds: int = 5, bins=10, weights="iv",
                     seed: int = 0) -> NCECEVariantResult:
    """Cross-fitted NC-ECE on one common evaluation partition (paper §3, Appendix C.4).

    The edges are computed ONCE from all scores. Items are split at random (``seed``) into
    ``n_folds`` folds; for each fold ``k`` the channels and weights are fitted on the other folds and the
    held-out items' per-bin sufficient statistics ``(count, sum Z, sum Rtilde + Z)`` are computed on the
    common partition. The per-bin sums are added over folds and
    ``NC-ECE = sum_k |S_k(corrected) - S_k(score)| / n``.

    Parameters
    ----------
    data : AnnotationSet with scores
    estimator : callable, optional (default ``fit_em(data, groups=5)``)
    n_folds : int >= 2
    bins : int or Binning
    weights : rule name or array of shape (n_annotators,)
    seed : int

    Returns
    -------
    NCECEVariantResult with ``variant = "cross_fit"``, ``channels`` one per fold and ``fold_table``.

    Raises
    ------
    ValueError
        ``n_folds`` < 2 or > n_items; a training part without labels from some annotator; a fold whose
        channels are not identified.

    Examples
    --------
    >>> from noisycal_bayes import simulate_annotations
    >>> sim = simulate_annotations(500, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> res = nc_ece_cross_fit(sim.data, estimator=lambda d: sim.channel, n_folds=5)
    >>> len(res.channels), int(res.table["count"].sum())
    (5, 500)
    """
    z, rule, label = _check_common(data, weights)
    estimator = _check_estimator(estimator)
    n = data.n_items
    n_folds = check_positive_int(n_folds, name="n_folds", minimum=2)
    if n_folds > n:
        raise ValueError(f"`n_folds` = {n_folds} exceeds the number of items ({n}).")
    edges = as_binning(bins).edges_for(z)  # one common partition from ALL scores
    n_bins = edges.size - 1
    perm = np.random.default_rng(seed).permutation(n)
    fold = np.empty(n, dtype=np.int32)
    fold[perm] = np.arange(n) % n_folds
    channels, ws, rows, n_unconverged = [], [], [], 0
    total = np.zeros((3, n_bins))
    for k in range(n_folds):
        train = np.flatnonzero(fold != k)
        test = np.flatnonzero(fold == k)
        where = f"the training part of fold {k}"
        _require_all_annotators(data, train, where)
        train_data = _subset(data, train)
        channel, converged = _fit_or_raise(estimator, train_data, data.n_annotators, where)
        n_unconverged += int(not converged)
        w = _weights_for(train_data.labels, channel, rule)
        sums = _bin_sums(data.labels[test], z[test], edges, channel, w)
        total += np.stack(sums)
        channels.append(channel)
        ws.append(w)
        rows.append(pd.DataFrame({"fold": k, "bin": np.arange(n_bins), "count": sums[0], "score_sum": sums[1],
                                  "corrected_sum": sums[2]}))
    count, score_sum, corr_sum = total
    _warn_unconverged(n_unconverged, n_folds)
    return NCECEVariantResult(
        float(np.sum(np.abs(corr_sum - score_sum)) / np.sum(count)), _table(edges, count, score_sum, corr_sum),
        "cross_fit", edges, tuple(channels), np.stack(ws), label, n, n, fold,
        pd.concat(rows, ignore_index=True), n_unconverged, seed,
    )


@dataclass(frozen=True)
class BootstrapNCECEResult:
    """Percentile bootstrap interval for NC-ECE with channels re-estimated in every replicate.

    Attributes
    ----------
    value : float
        Point estimate on the full sample (sample reuse, bins fixed from the full sample).
    interval : (float, float)
        Two-sided interval at ``level`` from the successful replicates (``method``).
    upper_bound : float
        One-sided ``level`` upper bound by the same method; report this when the NC-ECE is near 0, where
        a two-sided interval cannot cover a boundary value.
    bias : float
        ``mean(replicates) - value``. NC-ECE sums absolute bin means, so it is biased upwards by noise
        (Jensen); a replicate adds that bias once more, which shifts percentile intervals upwards (the
        interval can even exclude ``value``). The ``"basic"`` method reflects the quantiles around
        ``value`` and so corrects the shift to first order.
    level : float
    replicates : ndarray of shape (n_boot - n_failed,)
        NC-ECE of each successful replicate.
    n_boot : int
        Replicates attempted.
    n_failed : int
        Replicates whose channels could not be estimated (not identified, or an annotator left without
        labels); they are excluded from the interval.
    failure_reasons : dict
        ``reason -> count`` over the failed replicates.
    n_unconverged : int
        Replicates whose estimator reported ``converged = False`` (kept).
    estimate : NCECEResult
        The full-sample NC-ECE (per-bin table, weights, channel).
    edges : ndarray of shape (n_bins + 1,)
        The partition, fixed from the full sample and used in every replicate.
    weights_rule : str
    seed : int
    method : str
    target : str
    """

    value: float
    interval: tuple
    upper_bound: float
    bias: float
    level: float
    replicates: np.ndarray = field(repr=False)
    n_boot: int
    n_failed: int
    failure_reasons: dict
    n_unconverged: int
    estimate: object = field(repr=False)
    edges: np.ndarray = field(repr=False)
    weights_rule: str
    seed: int
    method: str = "percentile"
    target: str = "population binned ECE on the fixed partition (sampling and channel-estimation uncertainty)"

    @property
    def table(self) -> pd.DataFrame:
        """Per-bin table of the full-sample estimate."""
        return self.estimate.table

    def __float__(self) -> float:
        return self.value


def bootstrap_nc_ece(data: AnnotationSet, *, estimator=None, n_boot: int = 200, level: float = 0.9, bins=10,
                     weights="iv", method: str = "percentile", seed: int = 0) -> BootstrapNCECEResult:
    """Nonparametric bootstrap over items for NC-ECE, re-estimating the channels in each replicate.

    Each replicate draws ``n_items`` items with replacement (``numpy.random.default_rng(seed)``), calls
    ``estimator`` on the replicate, recomputes the weights (IV: from the replicate) and the NC-ECE on the
    partition fixed from the full sample. With ``method="percentile"`` the interval is
    ``[q_{(1-level)/2}, q_{(1+level)/2}]`` of the successful replicates and the upper bound ``q_level``;
    with ``method="basic"`` it is ``[2v - q_{(1+level)/2}, 2v - q_{(1-level)/2}]`` and ``2v - q_{1-level}``
    (``v`` the point estimate), clipped below at 0. Replicates where the channels
    are not identified (or an annotator has no label in the replicate) are counted in ``n_failed`` with
    their reasons and reported with an :class:`~noisycal_bayes.warnings.IdentifiabilityWarning`;
    warnings raised inside replicates are collected and re-issued once per category with a count.

    Parameters
    ----------
    data : AnnotationSet with scores
    estimator : callable, optional (default ``fit_em(data, groups=5)``)
    n_boot : int >= 1
    level : float in (0, 1)
    bins : int or Binning
    weights : rule name or array of shape (n_annotators,)
    method : {"percentile", "basic"}
    seed : int

    Returns
    -------
    BootstrapNCECEResult

    Raises
    ------
    ValueError
        Bad ``n_boot`` / ``level``; channels not identified on the full sample; every replicate failed.

    Examples
    --------
    >>> from noisycal_bayes import simulate_annotations
    >>> sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> res = bootstrap_nc_ece(sim.data, estimator=lambda d: sim.channel, n_boot=20, seed=1)
    >>> res.n_failed, res.interval[0] <= res.interval[1]
    (0, True)
    """
    z, rule, label = _check_common(data, weights)
    estimator = _check_estimator(estimator)
    n_boot = check_positive_int(n_boot, name="n_boot")
    level = check_level(level)
    if method not in ("percentile", "basic"):
        raise ValueError(f"`method` must be 'percentile' or 'basic'; got {method!r}.")
    edges = as_binning(bins).edges_for(z)
    channel, converged = _fit_or_raise(estimator, data, data.n_annotators, "the full sample")
    estimate = nc_ece(data, channel, weights=rule, edges=edges)

    rng = np.random.default_rng(seed)
    n, j = data.n_items, data.n_annotators
    rep_ids = np.arange(n).astype(object)
    values, reasons, caught = [], Counter(), Counter()
    first_message = {}
    n_unconverged = 0
    for _ in range(n_boot):
        rows = rng.integers(0, n, size=n)
        labels = data.labels[rows]
        empty = ~(labels >= 0).any(axis=0)
        if empty.any():
            reasons[f"annotators {_preview(data.annotator_ids[empty])} have no label in the replicate"] += 1
            continue
        rep = AnnotationSet(labels, z[rows], rep_ids, data.annotator_ids)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            try:
                ch, ok = _estimate_channel(estimator, rep, j, "a bootstrap replicate", catch=True)
            except _EstimationFailed as exc:
                reasons[str(exc)] += 1
                ch = None
        for wrn in record:
            caught[wrn.category] += 1
            first_message.setdefault(wrn.category, str(wrn.message))
        if ch is None:
            continue
        n_unconverged += int(not ok)
        w = _weights_for(labels, ch, rule)
        count, score_sum, corr_sum = _bin_sums(labels, z[rows], edges, ch, w)
        values.append(float(np.sum(np.abs(corr_sum - score_sum)) / np.sum(count)))

    for category, count in caught.items():
        warnings.warn(f"{count} warning(s) of this kind inside the {n_boot} bootstrap replicates; first: "
                      f"{first_message[category]}", category, stacklevel=2)
    n_failed = n_boot - len(values)
    if not values:
        raise ValueError(f"all {n_boot} bootstrap replicates failed to estimate the channels: "
                         f"{dict(reasons)}. Use more items, a design that identifies the channels, or another "
                         "estimator.")
    if n_failed:
        warnings.warn(f"{n_failed} of {n_boot} bootstrap replicates failed and were excluded from the interval "
                      f"(reasons: {dict(reasons)}); the interval may be too narrow.", IdentifiabilityWarning,
                      stacklevel=2)
    _warn_unconverged(int(not converged) + n_unconverged, n_boot + 1)
    reps = np.asarray(values)
    v = estimate.value
    if method == "percentile":
        lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
        upper = np.quantile(reps, level)
    else:
        q_lo, q_hi, q_up = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2, 1 - level])
        lo, hi, upper = max(2 * v - q_hi, 0.0), max(2 * v - q_lo, 0.0), max(2 * v - q_up, 0.0)
    return BootstrapNCECEResult(
        v, (float(lo), float(hi)), float(upper), float(reps.mean() - v), level, reps, n_boot, n_failed,
        dict(reasons), n_unconverged, estimate, edges, label, seed, method,
    )
