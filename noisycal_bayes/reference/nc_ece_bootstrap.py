"""Bootstrap interval for NC-ECE with the channels re-estimated in every replicate (paper §3; the reference
layer's interval: :func:`bootstrap_nc_ece`, re-exported by :mod:`noisycal_bayes.reference.variants`).

A nonparametric bootstrap over items: each replicate refits the channels with the user's ``estimator``, so
the interval carries channel-estimation uncertainty as well as sampling uncertainty.
"""
from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._progress import progress
from .._validation import _preview, check_level, check_positive_int
from ..data import AnnotationSet, as_binning
from ..warnings import IdentifiabilityWarning
from ._estimated import (_EstimationFailed, _bin_sums, _check_common, _check_estimator, _estimate_channel,
                         _fit_or_raise, _warn_unconverged, _weights_for)
from .calibration import nc_ece


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
    full_sample : NCECEResult
        The full-sample NC-ECE (per-bin table, weights, channel); ``value`` is its ``.value``. (Formerly
        ``estimate``, still readable with a ``DeprecationWarning``.)
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
    full_sample: object = field(repr=False)
    edges: np.ndarray = field(repr=False)
    weights_rule: str
    seed: int
    method: str = "percentile"
    target: str = "population binned ECE on the fixed partition (sampling and channel-estimation uncertainty)"

    @property
    def table(self) -> pd.DataFrame:
        """Per-bin table of the full-sample estimate."""
        return self.full_sample.table

    def __float__(self) -> float:
        return self.value


def bootstrap_nc_ece(data: AnnotationSet, *, estimator=None, n_boot: int = 200, level: float = 0.9, bins=10,
                     weights="iv", method: str = "percentile", seed: int = 0,
                     progress_bar: bool = False) -> BootstrapNCECEResult:
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
    estimator : callable, optional (default ``fit_em(data, groups=Binning.equal_mass(5))``)
    n_boot : int >= 1
    level : float in (0, 1)
    bins : int or Binning
    weights : rule name or array of shape (n_annotators,)
    method : {"percentile", "basic"}
    seed : int
    progress_bar : bool, default False
        A bar over the replicates, shown only when stderr is a terminal; the result is the same either way.

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
    z, rule, label = _check_common(data, weights, "bootstrap_nc_ece")
    estimator = _check_estimator(estimator)
    n_boot = check_positive_int(n_boot, name="n_boot")
    level = check_level(level)
    if method not in ("percentile", "basic"):
        raise ValueError(f"`method` must be 'percentile' or 'basic'; got {method!r}.")
    edges = as_binning(bins).edges_for(z)
    channel, converged = _fit_or_raise(estimator, data, data.n_annotators, "the full sample")
    full_sample = nc_ece(data, channel, weights=rule, edges=edges)
    values, reasons, caught, n_unconverged = _replicates(data, z, edges, estimator, rule, n_boot, seed,
                                                         progress_bar=progress_bar)
    for category, (count, first) in caught.items():
        warnings.warn(f"{count} warning(s) of this kind inside the {n_boot} bootstrap replicates; first: {first}",
                      category, stacklevel=2)
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
    v = full_sample.value
    lo, hi, upper = _interval(reps, v, level, method)
    return BootstrapNCECEResult(
        v, (float(lo), float(hi)), float(upper), float(reps.mean() - v), level, reps, n_boot, n_failed,
        dict(reasons), n_unconverged, full_sample, edges, label, seed, method,
    )


def _replicates(data: AnnotationSet, z, edges, estimator, rule, n_boot: int, seed: int, *, progress_bar=False):
    """NC-ECE of every bootstrap replicate whose channels could be estimated.

    Returns ``(values, failure reasons (Counter), {warning category: (count, first message)}, n_unconverged)``;
    warnings raised inside replicates are collected, not issued.
    """
    rng = np.random.default_rng(seed)
    n, j = data.n_items, data.n_annotators
    rep_ids = np.arange(n).astype(object)
    values, reasons, caught, first_message = [], Counter(), Counter(), {}
    n_unconverged = 0
    for _ in progress(range(n_boot), enabled=progress_bar, desc="bootstrap NC-ECE"):
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
    return values, reasons, {c: (k, first_message[c]) for c, k in caught.items()}, n_unconverged


def _interval(reps, v: float, level: float, method: str):
    """``(lower, upper, one-sided upper)``: percentile, or basic (reflected around ``v``, clipped at 0)."""
    if method == "percentile":
        lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
        return lo, hi, np.quantile(reps, level)
    q_lo, q_hi, q_up = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2, 1 - level])
    return max(2 * v - q_hi, 0.0), max(2 * v - q_lo, 0.0), max(2 * v - q_up, 0.0)
