"""The results of :func:`~noisycal_bayes.propagate.posterior_nc_ece` (and of its K-class top-label and class-wise
routes) and the summaries of their draws: the per-bin table, the moment-matched debiasing of absolute bin
residuals (:func:`debias_abs`) and the debiased interval. The derivations are in docs/methods.md; the interval
options in :mod:`noisycal_bayes.propagate.intervals`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: What the interval of each binary route is for (a result's ``target``; DESIGN §2).
TARGETS = {
    "plugin": "population binned ECE on the fixed partition: sum_k P(Z in B_k) |E[m(Z) - Z | Z in B_k]|",
    "plugin_no_bootstrap": ("none: NC-ECE of this sample with channel uncertainty only (no evaluation-sample "
                            "uncertainty, so the interval is too narrow for any target)"),
    "model": "conditional binned ECE: sum_k (n_k/n) |mean_{i in B_k} (m(Z_i) - Z_i)|",
    "latent": "sample oracle ECE: sum_k (n_k/n) |mean_{i in B_k} (Y_i - Z_i)| with the items' clean labels",
}
#: The same for the K-class plug-in route (top-label, class-wise) and for draws without the item bootstrap.
MC_TARGETS = {
    "top_label": ("population top-label binned ECE on the fixed partition: sum_b P(conf in B_b) "
                  "|E[1[Y = yhat] - conf | conf in B_b]|"),
    "classwise": ("population class-wise binned ECE on the fixed partitions: mean_k sum_b P(p_k in B_kb) "
                  "|E[1[Y = k] - p_k | p_k in B_kb]| (and each class's term)"),
    "no_bootstrap": ("none: NC-ECE of this sample with confusion uncertainty only (no evaluation-sample "
                     "uncertainty, so the interval is too narrow for any target)"),
}



@dataclass(frozen=True)
class _DrawSummary:
    """The fields every posterior NC-ECE result starts with (binary, top-label, class-wise mean): the point value,
    the debiased estimate, the draws and the interval read from them (:func:`~noisycal_bayes.propagate.intervals.
    read_interval`), the target, what varied across draws and how they were made (weights, fit, bootstrap, seed).
    Attributes are documented on :class:`PosteriorNCECE`."""

    value: float
    debiased: float
    mean: float
    median: float
    lower: float
    upper: float
    upper_one_sided: float
    interval_to_read: str
    calibration_p_value: float
    level: float
    two_sided_level: float
    draws: np.ndarray = field(repr=False)
    debiased_draws: np.ndarray = field(repr=False)
    interval_method: str
    target: str
    method: str
    uncertainty: str
    weights_rule: str
    fit_method: str
    model: str | None
    bootstrap: bool
    n_items: int
    seed: int

    @property
    def interval(self) -> tuple:
        """The two-sided ``(lower, upper)``."""
        return (self.lower, self.upper)

    @property
    def reported_interval(self) -> tuple:
        """``(lower, upper)`` or ``(0, upper_one_sided)``, as ``interval_to_read`` says."""
        return self.interval if self.interval_to_read == "two_sided" else (0.0, self.upper_one_sided)

    @property
    def n_draws(self) -> int:
        return int(self.draws.size)


@dataclass(frozen=True)
class PosteriorNCECE(_DrawSummary):
    """Posterior (or bootstrap) distribution of a binned calibration error, and how it was made.

    Attributes
    ----------
    value : float
        The paper's NC-ECE (§3) at the fit's point channel (``fit.channel``: the EM / MAP estimate, the
        posterior mean of NUTS draws, or the known Channel), with the same bins and annotator weights:
        ``noisycal_bayes.nc_ece(data, fit.channel, bins=..., weights=...).value``. The package's one
        point-estimate attribute.
    debiased : float
        Bias-corrected estimate of this route, ``sum_k m_k`` (see :func:`debias_abs`; it can be 0): the
        centre of the ``"debiased"`` interval.
    mean, median : float
        Of the posterior draws ``draws`` (they sit above the target when bins are nearly calibrated).
    lower, upper : float
        Equal-tailed interval: quantiles ``(1 - a)/2`` and ``(1 + a)/2`` of ``debiased_draws``
        (``interval_method="debiased"``) or of ``draws`` (``"posterior"``), with the rule ``p (B + 1)`` for ``B``
        draws (:func:`draw_quantiles`), at ``a = two_sided_level``: ``level``, or the calibrated level of the
        K-class routes.
    upper_one_sided : float
        One-sided ``level`` upper bound: the ``level`` quantile of the same draws; the interval to read is
        then ``[0, upper_one_sided]``.
    interval_to_read : {"two_sided", "upper_one_sided"}
        Which interval to report. ``"upper_one_sided"`` when the data cannot tell the calibration error
        from that of a perfectly calibrated model (``calibration_p_value > 1 - level``): a target at (or,
        for the latent route, near) the boundary 0 is not covered by a two-sided interval of a sum of
        absolute values, and the one-sided bound is.
    calibration_p_value : float
        How often the centred draws' calibration error ``sum_k |e_sk - mean_s e_sk|`` (what the estimator
        gives for a perfectly calibrated model with this much noise) reaches the point value
        ``sum_k |mean_s e_sk|`` (``e_sk`` the signed residual mass of bin ``k`` in draw ``s``).
    level : float
    two_sided_level : float
        The nominal level of the draws' quantiles that give ``lower, upper``: ``level``, or (K-class routes with
        ``calibrate=True``: the EM route's top-label and class-wise mean) the *calibrated* level, at least
        ``level``, at which the interval's own simulated replicates cover with frequency ``level``
        (:func:`~noisycal_bayes.propagate.intervals.calibrated_level`). How much the calibration widened the
        interval.
    draws : ndarray of shape (n_draws,)
        Posterior draws of the calibration error (``sum_k |e_sk|``).
    debiased_draws : ndarray of shape (n_draws,)
        Simulated distribution of the bias-corrected estimate (Notes of :func:`posterior_nc_ece`).
    interval_method : {"debiased", "posterior"}
    target : str
        The quantity the interval is for (module table; DESIGN §2).
    method : str
        ``"plugin"``, ``"model"`` or ``"latent"``.
    uncertainty : str
        What varies across draws.
    table : DataFrame
        One row per evaluation bin: ``bin, lower, upper`` (edges), ``count``, ``mean_score``,
        ``corrected_frequency`` (posterior mean of the bin's clean frequency), ``frequency_lower``,
        ``frequency_upper`` (equal-tailed ``level`` band), ``residual`` (posterior mean of frequency minus
        mean score), ``residual_lower``, ``residual_upper``. Empty bins have NaN. Feed it to
        :func:`noisycal_bayes.plotting.reliability_diagram` with ``lower=table.frequency_lower``,
        ``upper=table.frequency_upper``.
    edges : ndarray of shape (n_bins + 1,)
    weights_rule : str
        Annotator weight rule (plug-in only; ``"-"`` otherwise).
    fit_method : str
        ``"nuts"``, ``"em"``, ``"map"`` or ``"channel"`` (a known Channel).
    model : str or None
        The fitted model.
    bootstrap : bool
    n_items : int
    seed : int
    """

    table: pd.DataFrame = field(repr=False)
    edges: np.ndarray = field(repr=False)

    def summary(self) -> str:
        """One line: the paper's NC-ECE, the debiased estimate with the interval to read, and the target."""
        lo, hi = self.reported_interval
        kind = "two-sided" if self.interval_to_read == "two_sided" else "one-sided upper bound"
        return (f"NC-ECE {self.value:.4f} (paper, at the point channel); {self.method} debiased "
                f"{self.debiased:.4f} ({100 * self.level:.0f}% {kind}{_read_at(self)}: [{lo:.4f}, {hi:.4f}]); "
                f"target: {self.target.split(':')[0]}")


@dataclass(frozen=True)
class PosteriorClasswiseNCECE(_DrawSummary):
    """Posterior of the class-wise NC-ECE: the mean over classes with its interval, and each class's.

    The mean-level attributes have the meaning of :class:`~noisycal_bayes.propagate.PosteriorNCECE`'s (``value``
    the mean over classes of the class-wise NC-ECE at the point confusion; ``debiased``, ``lower``, ``upper``,
    ``upper_one_sided``, ``interval_to_read``, ``calibration_p_value`` from the draws of the mean, which keep
    the correlation across classes). ``per_class`` holds one ``PosteriorNCECE`` per class (its ``table`` the
    class's bins), ``per_class_table`` their scalars in one frame (``class, value, debiased, lower, upper,
    upper_one_sided, interval_to_read``), ``edges`` one array per class. ``two_sided_level``: the level of the
    draws' quantiles that give the mean's ``lower, upper`` (the calibrated level by default; ``level`` with
    ``calibrate=False``).
    """

    per_class: tuple = field(repr=False)
    per_class_table: pd.DataFrame = field(repr=False)
    edges: list = field(repr=False)

    @property
    def table(self) -> pd.DataFrame:
        """Per-bin tables of every class, stacked, with a ``class`` column."""
        return pd.concat([r.table.assign(**{"class": k}) for k, r in enumerate(self.per_class)], ignore_index=True)


def _read_at(res) -> str:
    """``", read at the draws' 95.5% quantiles (calibrated level)"`` when the two-sided interval to read was read
    at a calibrated level above ``level``; empty otherwise (one text for ``summary()`` and ``interval_method``)."""
    if res.interval_to_read != "two_sided" or res.two_sided_level <= res.level:
        return ""
    return f", read at the draws' {100 * res.two_sided_level:.1f}% quantiles (calibrated level)"


# Intervals read off B draws use the quantile rule p (B + 1) (Hyndman & Fan type 6, numpy's "weibull"): the
# interval between the order statistics at p_lo (B + 1) and p_hi (B + 1) has expected content p_hi - p_lo when the
# quantity and the draws are exchangeable. numpy's default (type 7, 1 + p (B - 1)) gives (B - 1) level / (B + 1):
# 0.882 for a 90% interval from 100 draws (EM refits), 0.891 from 200, 0.898 from 1,000 (docs/coverage.md).
QUANTILE_METHOD = "weibull"


def draw_quantiles(draws, q, axis=None):
    """Quantiles ``q`` of ``draws`` with the intervals' quantile rule (``QUANTILE_METHOD``)."""
    return np.quantile(draws, q, axis=axis, method=QUANTILE_METHOD)


def _bin_table(edges, count_obs, score_sum_obs, count, score_sum, freq, level):
    """Per-bin posterior summaries from per-draw sums (n_draws, n_bins).

    A draw whose item weights leave a bin empty (integer multiplicities: joint draws of bootstrap refits, where a
    bin of a few items can be resampled away) says nothing about that bin: its summaries are over the other draws.
    """
    q = [(1 - level) / 2, (1 + level) / 2]
    n_bins = edges.size - 1
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: bins without items
        frequency = freq / count
        residual = (freq - score_sum) / count
        empty = count_obs == 0
        # The intervals' quantile rule (draw_quantiles), NaN-aware: a bin can be empty in some bootstrap draws.
        f_lo, f_hi = (np.nanquantile(frequency, q, axis=0, method=QUANTILE_METHOD) if not empty.all()
                      else (np.nan, np.nan))
        r_lo, r_hi = (np.nanquantile(residual, q, axis=0, method=QUANTILE_METHOD) if not empty.all()
                      else (np.nan, np.nan))
        table = pd.DataFrame({
            "bin": np.arange(n_bins), "lower": edges[:-1], "upper": edges[1:], "count": count_obs.astype(np.int64),
            "mean_score": score_sum_obs / count_obs, "corrected_frequency": np.nanmean(frequency, axis=0),
            "frequency_lower": f_lo, "frequency_upper": f_hi,
            "residual": np.nanmean(residual, axis=0), "residual_lower": r_lo, "residual_upper": r_hi,
        })
    cols = [c for c in table.columns if c not in ("bin", "lower", "upper", "count")]
    table.loc[empty, cols] = np.nan
    return table


def _folded_mean_table(upper: float = 40.0, size: int = 40001):
    """``E|m + Z|`` for ``Z ~ N(0, 1)`` on a grid of ``m >= 0`` (increasing in ``m``), for inversion."""
    from scipy.special import ndtr

    m = np.linspace(0.0, upper, size)
    return m, np.sqrt(2 / np.pi) * np.exp(-0.5 * m**2) + m * (1 - 2 * ndtr(-m))


_FOLD_M, _FOLD_MEAN = _folded_mean_table()


def debias_abs(x_abs, sd):
    """Moment-matched magnitude: the ``m >= 0`` with ``E|m + sd Z| = x_abs`` (0 below ``sd sqrt(2/pi)``).

    ``|x|`` overestimates ``|mu|`` for ``x ~ N(mu, sd^2)`` (Jensen); this inverts the folded-normal mean,
    the Gaussian bias correction of binned calibration errors (cf. Kumar, Liang & Ma 2019, "Verified
    uncertainty calibration", debiased estimators). Where ``sd == 0`` it returns ``x_abs``.
    """
    x_abs = np.asarray(x_abs, dtype=np.float64)
    sd = np.broadcast_to(np.asarray(sd, dtype=np.float64), x_abs.shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(sd > 0, x_abs / np.where(sd > 0, sd, 1.0), 0.0)
    # Beyond the table E|m + Z| = m to double precision (the correction term is below e^-800).
    inv = np.where(t > _FOLD_MEAN[-1], t, np.interp(np.minimum(t, _FOLD_MEAN[-1]), _FOLD_MEAN, _FOLD_M, left=0.0))
    return np.where(sd > 0, inv * sd, x_abs)


def _summarise(count, score_sum, freq):
    """ECE draws, debiased draws, debiased estimate and the calibration check from per-draw bin sums.

    ``e_sk = (F_sk - S_sk) / N_s`` is the signed residual mass of bin ``k`` in draw ``s``, so that
    ``ECE_s = sum_k |e_sk|``. Debiased route: per bin ``m_k = debias_abs(|mean_s e_sk|, sd_s e_sk)``,
    estimate ``sum_k m_k``; its sampling distribution is simulated from the posterior draws themselves,
    ``x_sk = sign(mean e_k) m_k + (e_sk - mean e_k)`` (keeping the draws' correlation across bins), and
    ``sum_k debias_abs(|x_sk|, sd_k)``.
    """
    total = count.sum(axis=1, keepdims=True)
    e = (freq - score_sum) / total
    ece = np.abs(e).sum(axis=1)
    e_bar = e.mean(axis=0)
    centred = e - e_bar
    sd = e.std(axis=0)
    point = np.abs(e_bar).sum()
    # Centred draws: the spread of the estimator when the true residuals are all zero (a calibrated model).
    p_value = float(np.mean(np.abs(centred).sum(axis=1) >= point))
    m = debias_abs(np.abs(e_bar), sd)
    debiased = debias_abs(np.abs(np.sign(e_bar) * m + centred), sd).sum(axis=1)
    return ece, debiased, float(m.sum()), p_value
