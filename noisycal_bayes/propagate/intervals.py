"""Interval rules of the plug-in NC-ECE, read from per-draw bin sums: debiased, bias-corrected, centred and
prepivoted (calibrated) intervals, with the defaults of each kind of data.

Every route gives per draw ``s`` and segment (bin) ``b`` the item weight ``N_sb``, score sum ``S_sb`` and
target sum ``F_sb``; ``e_sb = (F_sb - S_sb) / sum_b N_sb`` and ``ECE_s = sum_b |e_sb|``. :func:`read_interval`
summarises them (:func:`~noisycal_bayes.propagate.result._summarise`: the debiased estimate ``sum_b m_b`` and its
simulated draws) and reads the interval, with three options:

- ``bias_correct`` (:func:`bias_corrected`): centre each bin's debiasing on ``2 e_b(C_0) - mean_s e_sb``, the
  bootstrap bias correction around the fit ``C_0`` the draws scatter around (the corrected targets are
  non-linear in a K x K confusion matrix, its inverse);
- ``centre`` (:func:`centred`): shift the debiased draws so that their mean is the debiased estimate (the
  simulated draws sit above the estimate by a sum of per-bin offsets, which grows with the number of bins);
- ``calibrate`` (:func:`calibrated_level`): read the two-sided interval at the nominal level whose coverage,
  estimated from the draws themselves, is ``level`` (prepivoting, Beran 1987; Loh 1987).

Per-kind defaults: the binary :func:`~noisycal_bayes.propagate.posterior_nc_ece` uses none of them; the K-class
routes centre always, bias-correct with confusion draws, and calibrate the class-wise mean (and, on request, the
top-label with joint draws). Why, and how each was measured: docs/coverage.md.
"""
from __future__ import annotations

import numpy as np

from .result import _summarise, draw_quantiles

#: How the interval is computed from the draws: see :func:`~noisycal_bayes.propagate.posterior_nc_ece` Notes.
INTERVAL_METHODS = ("debiased", "posterior")


def check_interval(interval, func: str) -> str:
    """``interval`` if it is one of :data:`INTERVAL_METHODS` (the check of every posterior NC-ECE route)."""
    if interval not in INTERVAL_METHODS:
        raise ValueError(f"{func}: `interval` must be one of {INTERVAL_METHODS}; got {interval!r}.")
    return interval


def centred(debiased, estimate: float, interval: str):
    """The debiased draws shifted so that their mean is the debiased estimate (``interval="debiased"`` only).

    The simulated draws ``sum_b debias_abs(|x_sb|, sd_b)`` of :func:`~noisycal_bayes.propagate.result._summarise`
    sit above the estimate ``sum_b m_b``: every bin whose ``m_b`` is 0 (or small against its ``sd_b``) adds a
    positive mean, although the estimate itself is close to unbiased there. That offset grows with the number of
    bins summed (``K x bins`` for the class-wise mean) faster than the spread. Subtracting the mean offset keeps
    the draws' spread and shape and centres them on the estimate (the bootstrap bias correction of a percentile
    interval for an unbiased estimator); the result is clipped at 0, below which no NC-ECE lies.
    """
    if interval != "debiased":
        return debiased
    return np.maximum(debiased - (debiased.mean() - estimate), 0.0)


def quantiles(source, level, two_sided_level=None):
    """Two-sided interval at ``two_sided_level`` (default ``level``) and the one-sided ``level`` bound."""
    a = level if two_sided_level is None else two_sided_level
    return draw_quantiles(source, [(1 - a) / 2, (1 + a) / 2, level])


def calibrated_level(draws, estimate: float, level: float, grid: int = 201) -> float:
    """Nominal level at which the centred interval covers with estimated frequency ``level`` (prepivoting).

    ``draws`` are the uncentred simulated draws ``sum_b debias_abs(|x_sb|, sd_b)`` of
    :func:`~noisycal_bayes.propagate.result._summarise`, made at the debiased bins ``m_b`` (``x_sb = sign m_b +
    e_sb - mean_s e_sb``), so they are replicates of the estimator in a world whose true value is ``estimate =
    sum_b m_b``. The centred interval of a replicate ``T_s`` is ``T_s + [lo(a), hi(a)]`` (``lo, hi`` the
    ``(1 -+ a)/2`` quantiles of ``d_s = T_s - mean T``); it covers ``estimate`` when ``d_s + beta + lo <= 0 <=
    d_s + beta + hi`` with ``beta = mean T - estimate`` the estimator's bias there. Returned: the smallest ``a``
    in ``[level, 1]`` (on a grid of ``grid`` points) whose coverage so estimated reaches ``level`` (Beran 1987;
    Loh 1987), with the draws themselves standing in for each replicate's interval (no nested simulation).
    Why: the debiasing inverts the folded-normal mean, a concave map, so a sum of many bins is biased and its
    simulated draws slightly narrow. Never narrows the interval (``a >= level``).
    """
    dev = draws - draws.mean()
    beta = draws.mean() - estimate
    a = np.linspace(level, 1.0, grid)
    lo = draw_quantiles(dev, (1 - a) / 2)
    hi = draw_quantiles(dev, (1 + a) / 2)
    shifted = dev[:, None] + beta  # (draws, grid): replicate error T_s - estimate
    cover = ((shifted + lo[None] <= 0) & (shifted + hi[None] >= 0)).mean(axis=0)
    # Coverage is non-decreasing in a (nested quantile intervals): the first grid point that reaches level.
    ok = np.flatnonzero(cover >= level - 1e-12)
    return float(a[ok[0]]) if ok.size else 1.0


def bias_corrected(count, score, freq, point):
    """Per-draw target sums whose bin residuals average ``2 e_b(C_0) - mean_s e_sb``.

    ``e_sb = (F_sb - S_sb) / N_s`` (draw ``s``, bin ``b``) and ``e_b(C_0)`` the residual at the fit ``C_0`` without
    the bootstrap (``point = (count, score, freq)`` there, each (n_segments,)). The corrected targets are
    non-linear in the confusion matrix (its inverse), so a plug-in residual at an estimated confusion is biased;
    the draws around the estimate repeat that bias once more, and their mean ``mean_s e_sb`` carries it twice. The
    bootstrap bias correction ``e_b(C_0) - (mean_s e_sb - e_b(C_0))`` removes it to first order (Efron &
    Tibshirani 1993, ch. 10), when ``C_0`` is the fit whose refits the draws are. Shifting each draw's target sum
    by ``delta_b N_s`` moves every draw's residual by ``delta_b``, so the draws' spread and correlation across bins
    are kept.
    """
    total = count.sum(axis=1, keepdims=True)
    c0, s0, f0 = point
    e_bar = ((freq - score) / total).mean(axis=0)
    return freq + 2.0 * ((f0 - s0) / c0.sum() - e_bar) * total


def read_interval(count, score, freq, *, level: float, interval: str, point=None, bias_correct: bool = False,
                  calibrate: bool = False, centre: bool = False) -> dict:
    """The interval fields of a :class:`~noisycal_bayes.propagate.PosteriorNCECE` from per-draw sums.

    Parameters
    ----------
    count, score, freq : arrays of shape (n_draws, n_segments)
        Per draw: item weight, score sum and target sum of each segment (bin).
    level : float
    interval : {"debiased", "posterior"}
        Quantiles of the (debiased) simulated draws or of the ECE draws.
    point : (count, score, freq) at the point fit, each (n_segments,), optional
        Needed by ``bias_correct``.
    bias_correct, calibrate, centre : bool, default False
        The K-class options of the module docstring; all False is the binary route.

    Returns
    -------
    dict
        ``debiased, mean, median, lower, upper, upper_one_sided, interval_to_read, calibration_p_value, level,
        two_sided_level, draws, debiased_draws, interval_method``.
    """
    ece, debiased, estimate, p_value = _summarise(count, score, bias_corrected(count, score, freq, point)
                                                  if bias_correct else freq)
    if bias_correct:  # the ECE draws themselves stay uncorrected
        ece = np.abs((freq - score) / count.sum(axis=1, keepdims=True)).sum(axis=1)
    two = calibrated_level(debiased, estimate, level) if calibrate and interval == "debiased" else level
    if centre:
        debiased = centred(debiased, estimate, interval)
    lo, hi, one = quantiles(debiased if interval == "debiased" else ece, level, two)
    return dict(debiased=estimate, mean=float(ece.mean()), median=float(np.median(ece)), lower=float(lo),
                upper=float(hi), upper_one_sided=float(one),
                interval_to_read="two_sided" if p_value <= 1 - level else "upper_one_sided",
                calibration_p_value=p_value, level=level, two_sided_level=float(two),
                draws=ece, debiased_draws=debiased, interval_method=interval)
