"""Posterior distribution of the binned calibration error: three routes, three stated targets (DESIGN §2, §4).

=============  ===============================================  ==========================================
method         what varies from draw to draw                    target (DESIGN §2)
=============  ===============================================  ==========================================
``"plugin"``   channels (posterior draw) and, with              population binned ECE on the fixed
               ``bootstrap=True``, item weights (Bayesian       partition ``sum_k P(B_k) |E[m(Z) - Z | B_k]|``
               bootstrap)
``"model"``    the fitted calibration curve (histogram bin      conditional binned ECE
               prevalences or Platt curve)                      ``sum_k (n_k/n) |mean_{B_k} (m(Z_i) - Z_i)|``
``"latent"``   the items' clean labels, drawn from their        sample oracle ECE
               posterior given the responses                    ``sum_k (n_k/n) |mean_{B_k} (Y_i - Z_i)|``
=============  ===============================================  ==========================================
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import check_level, check_weights
from ..data import AnnotationSet, Binning, SufficientStats, as_binning, bin_index
from ..warnings import DataWarning
from .draws import Draws, check_fit, check_same_items, extract_draws, is_fit_result, output_index, stats_fit_rows
from ._sums import (group_bin_counts, item_cells, latent_atoms, latent_freq, model_freq, plugin_sums,
                    stats_cells)

METHODS = ("plugin", "model", "latent")
#: Default propagation route of :func:`posterior_nc_ece` (see docs/coverage.md for why).
DEFAULT_METHOD = "plugin"

TARGETS = {
    "plugin": "population binned ECE on the fixed partition: sum_k P(Z in B_k) |E[m(Z) - Z | Z in B_k]|",
    "plugin_no_bootstrap": ("none: NC-ECE of this sample with channel uncertainty only (no evaluation-sample "
                            "uncertainty, so the interval is too narrow for any target)"),
    "model": "conditional binned ECE: sum_k (n_k/n) |mean_{i in B_k} (m(Z_i) - Z_i)|",
    "latent": "sample oracle ECE: sum_k (n_k/n) |mean_{i in B_k} (Y_i - Z_i)| with the items' clean labels",
}
READINGS = ("two_sided", "upper_one_sided")
#: How the interval is computed from the draws: see :func:`posterior_nc_ece` Notes.
INTERVAL_METHODS = ("debiased", "posterior")
DEFAULT_INTERVAL = "debiased"


@dataclass(frozen=True)
class PosteriorNCECE:
    """Posterior (or bootstrap) distribution of a binned calibration error, and how it was made.

    Attributes
    ----------
    estimate : float
        Bias-corrected point estimate ``sum_k m_k`` (see :func:`debias_abs`); it can be 0.
    mean, median : float
        Of the posterior draws ``draws`` (they sit above the target when bins are nearly calibrated).
    lower, upper : float
        Equal-tailed ``level`` interval: quantiles ``(1 - level)/2`` and ``(1 + level)/2`` of
        ``debiased_draws`` (``interval_method="debiased"``) or of ``draws`` (``"posterior"``).
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

    estimate: float
    mean: float
    median: float
    lower: float
    upper: float
    upper_one_sided: float
    interval_to_read: str
    calibration_p_value: float
    level: float
    draws: np.ndarray = field(repr=False)
    debiased_draws: np.ndarray = field(repr=False)
    interval_method: str
    target: str
    method: str
    uncertainty: str
    table: pd.DataFrame = field(repr=False)
    edges: np.ndarray = field(repr=False)
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

    def summary(self) -> str:
        """One line: estimate, the interval to read, target."""
        lo, hi = self.reported_interval
        kind = "two-sided" if self.interval_to_read == "two_sided" else "one-sided upper bound"
        return (f"{self.method} ECE {self.estimate:.4f} ({100 * self.level:.0f}% {kind}: [{lo:.4f}, {hi:.4f}]); "
                f"target: {self.target.split(':')[0]}")

    def __float__(self) -> float:
        return self.estimate


def _bin_table(edges, count_obs, score_sum_obs, count, score_sum, freq, level):
    """Per-bin posterior summaries from per-draw sums (n_draws, n_bins)."""
    q = [(1 - level) / 2, (1 + level) / 2]
    n_bins = edges.size - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        frequency = freq / count
        residual = (freq - score_sum) / count
        empty = count_obs == 0
        f_lo, f_hi = np.quantile(frequency, q, axis=0) if not empty.all() else (np.nan, np.nan)
        r_lo, r_hi = np.quantile(residual, q, axis=0) if not empty.all() else (np.nan, np.nan)
        table = pd.DataFrame({
            "bin": np.arange(n_bins), "lower": edges[:-1], "upper": edges[1:], "count": count_obs.astype(np.int64),
            "mean_score": score_sum_obs / count_obs, "corrected_frequency": frequency.mean(axis=0),
            "frequency_lower": f_lo, "frequency_upper": f_hi,
            "residual": residual.mean(axis=0), "residual_lower": r_lo, "residual_upper": r_hi,
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


def _stats_edges(stats: SufficientStats, bins, func: str) -> np.ndarray:
    """The evaluation edges of SufficientStats: their own bins; ``bins`` may only restate them."""
    if stats.edges is None:
        raise ValueError(f"{func}: these SufficientStats were computed without scores (one bin, no score sums), and a "
                         "calibration error needs score bins: recompute them with `bins=` and a score column.")
    if bins is None:
        return np.asarray(stats.edges)
    if isinstance(bins, Binning) and bins.kind == "equal_mass":
        edges = None
    elif isinstance(bins, (Binning, int, np.integer)) and not isinstance(bins, bool):
        edges = as_binning(bins).edges_for(None)
    else:
        try:
            edges = Binning.from_edges(bins).edges_for(None)
        except (TypeError, ValueError):
            edges = None
    if edges is None or edges.shape != stats.edges.shape or not np.array_equal(edges, stats.edges):
        raise ValueError(f"{func}: with SufficientStats the evaluation bins are the bins the statistics were computed "
                         f"with (edges {np.round(stats.edges, 6).tolist()}): their sums over the items of a bin cannot "
                         f"be split into other bins. Pass bins=None (or that Binning), not {bins!r}, or recompute "
                         "the statistics with the bins you want.")
    return np.asarray(stats.edges)


def posterior_nc_ece(data, fit, *, bins=None, weights="iv", level: float = 0.9, seed: int = 0,
                     method: str = DEFAULT_METHOD, interval: str = DEFAULT_INTERVAL, bootstrap: bool = True,
                     n_draws=None) -> PosteriorNCECE:
    """Posterior of the binned calibration error of ``data``'s scores, with an interval for a stated target.

    Parameters
    ----------
    data : AnnotationSet with scores, or SufficientStats with score bins
        The evaluated items. For ``"model"`` and ``"latent"`` they must be the items ``fit`` was fitted on
        (the scores may be new, e.g. ``data.with_scores(recalibrated)``); ``"plugin"`` takes any items
        labelled by the same annotators (e.g. a held-out set). :class:`~noisycal_bayes.data.SufficientStats`
        (data that does not fit in memory, see Notes) give the same result as the AnnotationSet they
        summarise, evaluated on their own bins.
    fit : FitResult or Channel
        ``fit_nuts(...)`` (posterior draws), ``fit_em(...)`` / ``fit_map(...)`` (a point estimate), or for
        ``"plugin"`` a known :class:`~noisycal_bayes.data.Channel`. With a point estimate the channels are
        treated as known and the interval carries only the Bayesian bootstrap (plug-in) or the label
        draws (latent); ``"model"`` needs posterior draws.
    bins : int or Binning, optional
        Evaluation bins (an int means equal width; equal-mass edges come from ``data``'s scores). Default:
        10 equal-width bins for an AnnotationSet; for SufficientStats their own bins (``stats.edges``),
        the only ones they allow (other bins raise).
    weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,), default "iv"
        Annotator weights of the plug-in route, recomputed from each draw's channels (IV also from
        each draw's item weights). Ignored by the other routes.
    level : float, default 0.9
    seed : int, default 0
        Seeds the Bayesian bootstrap weights and the clean-label draws (``numpy.random.default_rng``).
    method : {"plugin", "model", "latent"}, default "plugin"
        See Notes and the module table.
    interval : {"debiased", "posterior"}, default "debiased"
        ``"posterior"``: equal-tailed quantiles of the posterior draws of the calibration error.
        ``"debiased"``: quantiles of the simulated distribution of the bias-corrected estimate (Notes).
    bootstrap : bool, default True
        Plug-in only: add evaluation-sample uncertainty by a Bayesian bootstrap of the items. Without it
        the interval reflects channel uncertainty only and has no target.
    n_draws : int, optional
        Output draws: default every posterior draw (NUTS), or 1000 for a point estimate. Fewer thins the
        posterior evenly; more cycles through it.

    Returns
    -------
    PosteriorNCECE
        ``.mean, .median, .lower, .upper, .upper_one_sided, .interval_to_read, .draws, .target, .method,
        .table`` (per-bin bands).

    Raises
    ------
    ValueError
        ``data`` not an AnnotationSet / SufficientStats or without scores; unknown method / weights; ``fit``
        of the wrong kind (``"model"`` with a point estimate or a marginal model, ``"latent"`` with a bare
        Channel); ``data`` not the fitted items for ``"model"`` / ``"latent"``; annotator counts that differ.
        SufficientStats: ``bins`` other than their own; a Platt fit or a fit whose groups are not their
        bins for ``"model"`` / ``"latent"``; the bootstrap with statistics made without row moments.

    Warns
    -----
    DataWarning
        ``"model"`` / ``"latent"`` with a grouped fit whose groups are not the evaluation bins (the fitted
        curve is then a step function on other cuts, and the latent labels ignore where an item's score
        lies within its group): fit ``model="histogram", groups=<the evaluation Binning>``.
    ConvergenceWarning, IdentifiabilityWarning
        The fit reported divergences / high R-hat, or unidentified channels.

    Notes
    -----
    *Plug-in* (paper §3 with DESIGN §4): for each draw ``s``, channels ``(a_s, delta_s)`` -> weights ->
    corrected labels -> ``NC-ECE_s = sum_k |sum_{i in B_k} g_si Rtilde_si| / sum_i g_si``, computed from
    per-(bin, missingness) sums (:func:`noisycal_bayes.core.bin_table`, vmapped over draws) with Bayesian
    bootstrap weights ``g_s ~ n Dirichlet(1, ..., 1)``. Above 2e7 (item x draw) weights the bootstrap is drawn
    from per-cell totals instead (cells = bin x missingness x response pattern): each cell's total weight is
    an exact ``Gamma(n_c)`` draw, and its weighted score mean a normal draw with the exact Dirichlet mean and
    variance (cells of at most 32 items keep per-item weights), which costs per draw the number of cells
    rather than the number of items.

    *Model-based*: the calibration curve of the fit (histogram / monotone / grouped: ``m(z) =
    prevalence_s[g(z)]``; Platt: ``sigmoid(slope_s logit z + intercept_s)``) gives
    ``ECE_s = sum_k |sum_{i in B_k} (m_s(Z_i) - Z_i)| / n``.

    *Latent-label*: ``Y_si ~ Bernoulli(P(Y_i = 1 | A_i, g_i, theta_s))``
    (:func:`noisycal_bayes.core.posterior_positive`), ``ECE_s = sum_k |sum_{i in B_k} (Y_si - Z_i)| / n``: a
    posterior for the sample oracle ECE (the paper's Oracle ECE), a finite-sample quantity that includes
    the label noise. Items with the same (bin, group, pattern) share one Binomial draw.

    *Intervals.* Every route gives draws ``e_sk`` of the signed residual mass of each bin and
    ``ECE_s = sum_k |e_sk|``. A sum of absolute values of noisy bin means sits above its target whenever
    some bins are nearly calibrated (Jensen), and a posterior with flat priors on the bin frequencies
    inherits that bias: in simulation the equal-tailed posterior interval (``interval="posterior"``)
    misses the sample oracle ECE of a calibrated model about half the time. ``interval="debiased"``
    (default) corrects each bin by moment matching, ``m_k = debias_abs(|mean_s e_sk|, sd_s e_sk)`` (the
    magnitude whose folded-normal mean is the observed one; cf. Kumar, Liang & Ma 2019, debiased ECE
    estimators), reports ``estimate = sum_k m_k`` and takes quantiles of
    ``sum_k debias_abs(|sign(mean e_k) m_k + e_sk - mean e_k|, sd_k)``, which keeps the draws' correlation
    across bins. Near zero, a two-sided interval of a non-negative quantity cannot cover the boundary:
    ``interval_to_read`` is ``"upper_one_sided"`` when ``calibration_p_value > 1 - level`` (the centred
    draws reach the point value ``sum_k |mean_s e_sk|`` more often than ``1 - level``), and the interval
    to report is then ``[0, upper_one_sided]``.

    Coverage of each route's interval for its target across simulated settings (and where it falls
    short) is in docs/coverage.md.

    *From SufficientStats* (``n_c`` items, score sum ``S_c`` and squared-score sum ``Q_c`` per (bin, pattern)
    row ``c``; per bin ``n_k`` and ``S_k``): every route needs only these. Plug-in without bootstrap: the
    per-(bin, missingness) sums are sums of rows, so the draws equal those of the AnnotationSet the
    statistics summarise (to rounding). Plug-in with bootstrap: always the per-cell route above, with every
    cell's weighted score mean a normal draw of mean ``S_c / n_c`` and variance ``(Q_c / n_c - (S_c /
    n_c)^2) / (n_c + 1)`` (no per-item weights for small cells: there are no items), exact in the cell
    totals and moment-matched in the score means. Model: groups = bins, so ``F_sk = n_k prevalence_sk`` and
    ``e_sk = (n_k prevalence_sk - S_k) / n``. Latent: one ``Binomial(n_c, P(Y = 1 | pattern_c, bin_c,
    theta_s))`` per row. The fit must be grouped on the statistics' bins (or the marginal model, latent
    only) and, for ``"model"`` / ``"latent"``, made from the same items (e.g. ``fit_nuts(stats)``); a Platt
    fit needs each item's score and is refused there (plug-in takes any fit).

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> from noisycal_bayes.data import Binning
    >>> from noisycal_bayes.inference.em import fit_em
    >>> sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], curve="overconfident", seed=0)
    >>> fit = fit_em(sim.data, model="histogram", groups=Binning.equal_width(10))
    >>> res = posterior_nc_ece(sim.data, fit, method="plugin", n_draws=200)
    >>> res.lower < res.median < res.upper, res.fit_method
    (True, 'em')

    The same from sufficient statistics (e.g. built chunk by chunk with ``read_stats_csv``):

    >>> from noisycal_bayes.data import SufficientStats
    >>> stats = SufficientStats.from_annotations(sim.data, bins=Binning.equal_width(10))
    >>> same = posterior_nc_ece(stats, fit, method="plugin", bootstrap=False, n_draws=5)
    >>> bool(abs(same.median - posterior_nc_ece(sim.data, fit, bootstrap=False, n_draws=5).median) < 1e-12)
    True
    """
    func = "posterior_nc_ece"
    is_stats = isinstance(data, SufficientStats)
    if not (is_stats or isinstance(data, AnnotationSet)):
        raise ValueError(f"{func}: `data` must be an AnnotationSet (or SufficientStats); got {type(data).__name__}.")
    if is_stats and data.n_items == 0:
        raise ValueError(f"{func}: these SufficientStats hold no items.")
    z = None if is_stats else data.require_scores()
    if method not in METHODS:
        raise ValueError(f"{func}: `method` must be one of {METHODS}; got {method!r}.")
    level = check_level(level)
    if interval not in INTERVAL_METHODS:
        raise ValueError(f"{func}: `interval` must be one of {INTERVAL_METHODS}; got {interval!r}.")
    rule, rule_label = check_weights(weights, data.n_annotators, allow_zero=False)
    fit = check_fit(fit, func, allow_channel=(method == "plugin"))
    n_ann_fit = fit.n_annotators if not is_fit_result(fit) else fit.inputs.n_annotators
    if n_ann_fit != data.n_annotators:
        raise ValueError(f"{func}: the fit has {n_ann_fit} annotators but `data` has {data.n_annotators}.")
    if is_stats:
        # The statistics' rows are the cells (bin, pattern); their bins are the only evaluation bins.
        edges = _stats_edges(data, bins, func)
        n_bins = edges.size - 1
        bin_idx = None
        count_obs = data.bin_counts
        score_obs = np.asarray(data.score_sum, dtype=np.float64)
    else:
        edges = as_binning(10 if bins is None else bins).edges_for(z)
        n_bins = edges.size - 1
        bin_idx = bin_index(z, edges)
        count_obs = np.bincount(bin_idx, minlength=n_bins).astype(np.float64)
        score_obs = np.bincount(bin_idx, weights=z, minlength=n_bins)
    rng = np.random.default_rng(seed)
    src = extract_draws(fit)
    draws: Draws = src.take(output_index(src.n_source, n_draws, is_posterior=src.is_posterior))

    if method in ("model", "latent"):
        if is_stats:
            cell_group, cell_row = stats_fit_rows(data, fit, func, method)
        else:
            check_same_items(data, fit, func, method)
        if src.model == "dawid_skene" and method == "model":
            raise ValueError(f"{func}: the marginal model (one prevalence) has no calibration curve; fit "
                             "model='histogram' with groups equal to the evaluation bins for method='model'.")
        if method == "model" and not src.is_posterior:
            raise ValueError(f"{func}: method='model' needs posterior draws of the curve (fit_nuts); a "
                             f"{src.source!r} fit is a single curve. Use method='plugin' or 'latent' with it.")
        if src.model != "platt":
            same = fit.groups.edges is not None and np.array_equal(np.asarray(fit.groups.edges), edges)
            if not same:
                warnings.warn(
                    f"{func}: method={method!r} with a {src.model!r} fit whose groups are not the evaluation bins "
                    f"(fit edges {None if fit.groups.edges is None else np.round(fit.groups.edges, 3).tolist()}, "
                    f"evaluation edges {np.round(edges, 3).tolist()}): the fitted curve is a step function on other "
                    "cuts, so the target is estimated with a bias. Fit model='histogram' with "
                    "groups=<the evaluation Binning> (e.g. Binning.equal_width(10)).", DataWarning, stacklevel=2)

    observed = tuple(np.broadcast_to(v, (draws.n_source, n_bins)) for v in (count_obs, score_obs))
    if method == "plugin":
        cells = stats_cells(data) if is_stats else item_cells(data.labels, z, bin_idx, n_bins)
        count, score_sum, freq = plugin_sums(cells, n_bins, draws.fpr, draws.gap, rule, bootstrap=bootstrap, rng=rng)
        target = TARGETS["plugin" if bootstrap else "plugin_no_bootstrap"]
        parts = []
        if src.is_posterior:
            parts.append("channel posterior")
        else:
            parts.append(f"channels fixed at the {'known channel' if src.source == 'channel' else src.source + ' estimate'}")
        if bootstrap:
            parts.append("Bayesian bootstrap of the evaluated items" + (
                " (per cell: exact cell totals, moment-matched cell score means)" if is_stats else ""))
        uncertainty = " + ".join(parts)
    elif method == "model":
        if src.model == "platt":
            freq = model_freq(draws, fit=fit, bin_idx=bin_idx, n_bins=n_bins)
        else:
            C = (group_bin_counts(cell_group, data.group, fit.groups.n_groups, n_bins, data.counts) if is_stats
                 else group_bin_counts(fit.groups.index, bin_idx, fit.groups.n_groups, n_bins))
            freq = model_freq(draws, group_bin=C)
        count, score_sum = observed
        target = TARGETS["model"]
        uncertainty = f"posterior of the {src.model} calibration curve (channels and curve jointly)"
        rule_label = "-"
    else:
        if src.model == "platt":
            freq = latent_freq(draws, fit, rng, labels=data.labels, bin_idx=bin_idx, n_bins=n_bins)
        else:
            atoms = (latent_atoms(cell_row, data.group, n_bins, data.counts) if is_stats
                     else latent_atoms(fit.inputs.item_rows(), bin_idx, n_bins))
            freq = latent_freq(draws, fit, rng, atoms=atoms, n_bins=n_bins)
        count, score_sum = observed
        target = TARGETS["latent"]
        uncertainty = ("clean-label draws from their posterior given the responses"
                       + (" (channels and prevalences from the posterior)" if src.is_posterior else
                          f" (channels and prevalences fixed at the {src.source} estimate)"))
        rule_label = "-"

    ece, debiased, estimate, p_value = _summarise(np.asarray(count), np.asarray(score_sum), freq)
    source = debiased if interval == "debiased" else ece
    lo, hi, one = np.quantile(source, [(1 - level) / 2, (1 + level) / 2, level])
    read = "two_sided" if p_value <= 1 - level else "upper_one_sided"
    table = _bin_table(edges, count_obs, score_obs, np.asarray(count), np.asarray(score_sum), freq, level)
    return PosteriorNCECE(
        estimate=estimate, mean=float(ece.mean()), median=float(np.median(ece)), lower=float(lo), upper=float(hi),
        upper_one_sided=float(one), interval_to_read=read, calibration_p_value=p_value, level=level, draws=ece,
        debiased_draws=debiased, interval_method=interval, target=target, method=method, uncertainty=uncertainty, table=table, edges=edges, weights_rule=rule_label,
        fit_method=src.source, model=src.model, bootstrap=bool(bootstrap and method == "plugin"),
        n_items=data.n_items, seed=seed)
