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

Every result also carries ``value``: the paper's NC-ECE (§3) at the fit's point channel (``fit.channel``: the
EM / MAP estimate, or the posterior mean for NUTS draws), with the same bins and annotator weights, i.e.
``noisycal_bayes.nc_ece(data, fit.channel, bins=..., weights=...).value``; and ``debiased``, the
bias-corrected estimate of the chosen route (below).

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
estimators), reports ``debiased = sum_k m_k`` and takes quantiles of
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

*K classes* (DESIGN §8): :func:`posterior_top_label_nc_ece` and :func:`posterior_classwise_nc_ece`, the plug-in
route for K x K confusion matrices (:func:`~noisycal_bayes.reference.top_label_nc_ece` and
:func:`~noisycal_bayes.reference.classwise_nc_ece` at a point). Per output draw ``s``: confusion matrices ``C_s``
(a posterior draw, or the point estimate repeated) -> ``T_s = C_s^{-1}`` per annotator -> per-coordinate weights
``w_s`` (IV from ``C_s`` and the prevalence; with ``prevalence=None`` the prevalence of draw ``s`` is the
bootstrap-weighted mean equally weighted corrected vector, as the binary IV rule estimates ``mu``) -> corrected
targets ``t_si`` -> per segment the item weight ``N_sb``, score sum ``S_sb`` and target sum ``F_sb``
(:func:`~noisycal_bayes.propagate._sums.atom_sums`):

- top-label: bins on the confidence ``c_i = max_k p_ik``, ``S_sb = sum_{i in b} g_si c_i``,
  ``F_sb = sum_{i in b} g_si t_si[yhat_i]``, ``NC-ECE_s = sum_b |F_sb - S_sb| / sum_b N_sb``;
- class-wise: per class ``k`` bins on ``p_ik`` with ``t_si[k]``; ``ECE_sk`` as above over class ``k``'s bins,
  and the mean over classes (every item enters each class once, so the mean is ``sum_{k,b} |F - S| / (K n)``).

Everything downstream of the sums is the binary summary (``value`` at the point confusion, the draws, the
debiased estimate and interval, the one-sided reading, the per-bin table), with the K-class interval options of
:mod:`noisycal_bayes.propagate.intervals`: the debiased draws are always centred on the estimate; with confusion
*draws* each bin's debiasing is bias-corrected around the fit ``C_0`` they scatter around (``point_confusion=``,
e.g. the full-sample EM fit whose bootstrap refits the draws are; default the draws' mean); and the class-wise
mean (and, with ``calibrate=True``, the top-label) is read at a calibrated (prepivoted) level.

*Joint draws* (``item_weights=``, top-label and class-wise mean): when the confusion draws are refits on bootstrap
item weights, draw ``s`` sums the items with the weights of its own refit instead of fresh ones, which keeps the
(negative) correlation between the fit's error and the items' sampling error. The per-class intervals keep fresh
weights; NUTS draws have no item weights and keep the independent bootstrap.

For K = 2 the class-wise entry of class 1 is the binary plug-in NC-ECE of the scores ``p_i1`` with the same
channel draws, weights and item weights: the draws agree with :func:`posterior_nc_ece` to rounding, and with
``bias_correct=False`` and ``calibrate=False`` the interval too, up to the centring.

*Near-singular confusion*: annotators whose condition number exceeds ``max_condition`` in more than
``(1 - USABLE_LEVEL) / 2`` of the draws are not used (weight 0, responses left out,
:class:`~noisycal_bayes.warnings.IdentifiabilityWarning`); items left without a usable response are left out
(:class:`~noisycal_bayes.warnings.DataWarning`). In the remaining draws where a used annotator's matrix is near
singular, its singular values are clipped from below at ``s_max / max_condition`` before inversion (warned), so
no draw explodes. How the K-class interval options were chosen and their coverage: docs/coverage.md.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd

from .._validation import _preview, binary_only, check_choice, check_confusion, check_level, check_weights
from ..data import AnnotationSet, Binning, SufficientStats, as_binning, bin_index
from ..data.columns import response_columns
from ..core import confusion_condition
from ..reference.calibration import (MAX_CONDITION, bin_edges, check_prevalence,
                                     check_probs, check_responses, usable_from_draws, warn_unusable)
from ..warnings import DataWarning, IdentifiabilityWarning
from .result import PosteriorClasswiseNCECE, PosteriorNCECE, _bin_table
from .draws import Draws, check_fit, check_same_items, extract_draws, is_fit_result, output_index, stats_fit_rows
from .intervals import read_interval
from ._sums import (Atoms, DrawWeights, atom_sums, group_bin_counts, item_cells, latent_atoms, latent_freq, model_freq,
                    plugin_sums, stats_cells)

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
#: How the interval is computed from the draws: see :func:`posterior_nc_ece` Notes.
INTERVAL_METHODS = ("debiased", "posterior")
DEFAULT_INTERVAL = "debiased"


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
                     n_draws=None, usable=None) -> PosteriorNCECE:
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
    usable : bool array of shape (n_annotators,), optional
        Plug-in route: the annotators whose labels enter the corrected labels (:func:`usable_annotators_of`;
        default: that of ``fit``). The others weigh 0 under every rule; items labelled only by them are left
        out with a :class:`DataWarning`.

    Returns
    -------
    PosteriorNCECE
        ``.value`` (the paper's NC-ECE at the point channel), ``.debiased`` (the bias-corrected estimate),
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
    The three routes, the debiased interval, the one-sided reading near zero and the SufficientStats route
    are derived in the module docstring (:mod:`noisycal_bayes.propagate.nc_ece`); coverage of each route's
    interval for its target is in docs/coverage.md.

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
    binary_only(data, "posterior_nc_ece", "posterior_top_label_nc_ece or posterior_classwise_nc_ece")
    func = "posterior_nc_ece"
    z, level, rule, rule_label, fit = _check_inputs(data, fit, func, method=method, interval=interval,
                                                   weights=weights, level=level)
    ev = _evaluation_bins(data, z, bins, func)
    rng = np.random.default_rng(seed)
    src = extract_draws(fit)
    draws: Draws = src.take(output_index(src.n_source, n_draws, is_posterior=src.is_posterior))
    rows = _check_route(data, fit, src, method, ev.edges, func) if method != "plugin" else None
    cols = None
    if z is not None:
        if usable is None:
            usable = usable_for(fit, src)
        elif np.shape(usable) != (data.n_annotators,):
            raise ValueError(f"{func}: `usable` must be a bool array of shape ({data.n_annotators},); got shape "
                             f"{np.shape(usable)}.")
        cols = response_columns(data, np.asarray(usable, dtype=bool), func=func)
        if not cols.keep.all() and method == "plugin":
            z = z[cols.keep]
            ev = _evaluation_bins_on(z, ev.edges)
    if method == "plugin":
        count, score_sum, freq, target, uncertainty = _plugin_route(data, z, ev, src, draws, rule, bootstrap, rng,
                                                                    cols)
    elif method == "model":
        count, score_sum, freq, target, uncertainty = _model_route(data, fit, ev, src, draws, rows)
    else:
        count, score_sum, freq, target, uncertainty = _latent_route(data, fit, ev, src, draws, rows, rng)
    return PosteriorNCECE(
        value=_point_value(data, z, ev, fit, rule, cols),
        # the binary interval: no bias correction, no calibrated level, no centring (the K-class options)
        **read_interval(np.asarray(count), np.asarray(score_sum), freq, level=level, interval=interval),
        target=target, method=method,
        uncertainty=uncertainty, edges=ev.edges,
        table=_bin_table(ev.edges, ev.count, ev.score_sum, np.asarray(count), np.asarray(score_sum), freq, level),
        weights_rule=rule_label if method == "plugin" else "-", fit_method=src.source, model=src.model,
        bootstrap=bool(bootstrap and method == "plugin"), n_items=data.n_items if z is None else int(z.size),
        seed=seed)


class _Bins(NamedTuple):
    """Evaluation bins of ``data``: edges (n_bins + 1,), each item's bin (None for SufficientStats), and the
    observed count and score sum per bin (n_bins,)."""

    edges: np.ndarray
    bin_idx: np.ndarray | None
    count: np.ndarray
    score_sum: np.ndarray

    @property
    def n_bins(self) -> int:
        return self.edges.size - 1


def _check_inputs(data, fit, func, *, method, interval, weights, level):
    """Validated ``(scores or None, level, weight rule, its label, fit)``: one check per argument."""
    is_stats = isinstance(data, SufficientStats)
    if not (is_stats or isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"{func}: `data` must be an AnnotationSet (or SufficientStats); got {type(data).__name__}.")
    if is_stats and data.n_items == 0:
        raise ValueError(f"{func}: these SufficientStats hold no items.")
    z = None if is_stats else data.require_scores()
    check_choice(method, METHODS, name="method", func=func)
    level = check_level(level)
    if interval not in INTERVAL_METHODS:
        raise ValueError(f"{func}: `interval` must be one of {INTERVAL_METHODS}; got {interval!r}.")
    rule, rule_label = check_weights(weights, data.n_annotators, allow_zero=False)
    fit = check_fit(fit, func, allow_channel=(method == "plugin"))
    n_ann_fit = fit.n_annotators if not is_fit_result(fit) else fit.inputs.n_annotators
    if n_ann_fit != data.n_annotators:
        raise ValueError(f"{func}: the fit has {n_ann_fit} annotators but `data` has {data.n_annotators}.")
    return z, level, rule, rule_label, fit


def _evaluation_bins(data, z, bins, func) -> _Bins:
    """The evaluation bins: SufficientStats' own bins (their rows are the cells), else ``bins`` on the scores."""
    if z is None:
        edges = _stats_edges(data, bins, func)
        return _Bins(edges, None, data.bin_counts, np.asarray(data.score_sum, dtype=np.float64))
    return _evaluation_bins_on(z, as_binning(10 if bins is None else bins).edges_for(z))


def _evaluation_bins_on(z, edges) -> _Bins:
    """The evaluation bins of scores ``z`` on fixed ``edges``."""
    n_bins = edges.size - 1
    bin_idx = bin_index(z, edges)
    return _Bins(edges, bin_idx, np.bincount(bin_idx, minlength=n_bins).astype(np.float64),
                 np.bincount(bin_idx, weights=z, minlength=n_bins))


#: Level of the gap interval behind the downstream rule "zero weight where the gap's interval contains 0".
USABLE_LEVEL = 0.9


def usable_annotators_of(fit) -> np.ndarray:
    """The downstream rule of a fit or Channel, bool (n_annotators,): see :func:`usable_for`.

    Examples
    --------
    >>> from noisycal_bayes.data import Channel
    >>> usable_annotators_of(Channel([0.1, 0.5], [0.9, 0.5], orientation="crowd")).tolist()
    [True, False]
    """
    fit = check_fit(fit, "usable_annotators_of", allow_channel=True)
    return usable_for(fit, extract_draws(fit))


def usable_for(fit, src: Draws) -> np.ndarray:
    """Which annotators' labels enter the corrected labels, bool (n_annotators,) (issue 16's downstream rule).

    An annotator whose gap interval contains 0 carries no usable information about the clean label, and
    correcting its labels would divide by a gap near 0: it gets weight 0 under every weight rule (its
    responses are left out of the corrected labels). An adversarial annotator (gap < 0, interval excluding
    0) is kept: ``(A - fpr) / (tpr - fpr)`` uses its labels with their sign. The interval is the EM fit's
    per-annotator interval (:attr:`FitResult.annotators`), else the equal-tailed ``USABLE_LEVEL`` interval
    of the gap draws (NUTS posterior or EM bootstrap replicates); a known Channel keeps every ``gap != 0``.
    """
    from ..core.channel import usable_annotators

    if is_fit_result(fit) and fit.details.get("annotators") is not None:
        return np.asarray(fit.usable_annotators(), dtype=bool)
    gap = np.asarray(src.gap, dtype=np.float64)
    if src.is_posterior and gap.shape[0] > 1:
        lo, hi = np.quantile(gap, [(1 - USABLE_LEVEL) / 2, (1 + USABLE_LEVEL) / 2], axis=0)
        return np.asarray(usable_annotators(gap.mean(axis=0), lo, hi), dtype=bool)
    return np.asarray(usable_annotators(gap.mean(axis=0)), dtype=bool)


def _check_route(data, fit, src: Draws, method, edges, func):
    """Checks of the model and latent routes; ``(cell_group, cell_row)`` of SufficientStats rows (else None)."""
    rows = None
    if isinstance(data, SufficientStats):
        rows = stats_fit_rows(data, fit, func, method)
    else:
        check_same_items(data, fit, func, method)
    if method == "latent" and src.model != "platt" and getattr(fit.inputs, "sparse", False):
        raise ValueError(f"{func}: method='latent' draws clean labels per (group, response pattern) row, and this fit "
                         "used the sparse responses (repeated labels, gold labels or a large crowd), which have no "
                         "pattern rows. Use method='plugin' (the default) or method='model'.")
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
                "groups=<the evaluation Binning> (e.g. Binning.equal_width(10)).", DataWarning, stacklevel=3)
    return rows


def _cells(data, z, ev: _Bins, cols):
    """The (bin, pattern) cells the plug-in sums run over."""
    return stats_cells(data) if z is None else item_cells(cols.labels, z, ev.bin_idx, ev.n_bins)


def _on_columns(cols, fpr, gap, rule):
    """Channels (and explicit weights) gathered per response column (identity without repeats or exclusions)."""
    if cols is None:
        return fpr, gap, rule
    a = cols.annotator
    return fpr[..., a], gap[..., a], rule if isinstance(rule, str) else np.asarray(rule)[a]


def _plugin_route(data, z, ev: _Bins, src: Draws, draws: Draws, rule, bootstrap, rng, cols):
    """Plug-in route: ``(count, score_sum, freq)`` per draw and bin, the target and what varies."""
    fpr, gap, rule = _on_columns(cols, draws.fpr, draws.gap, rule)
    count, score_sum, freq = plugin_sums(_cells(data, z, ev, cols), ev.n_bins, fpr, gap, rule,
                                         bootstrap=bootstrap, rng=rng)
    if src.is_posterior:
        # EM bootstrap replicates stand in for posterior draws; say which the interval varies.
        parts = ["EM bootstrap replicates of the channels" if src.source == "em_bootstrap" else "channel posterior"]
    else:
        parts = [f"channels fixed at the {'known channel' if src.source == 'channel' else src.source + ' estimate'}"]
    if bootstrap:
        parts.append("Bayesian bootstrap of the evaluated items" + (
            " (per cell: exact cell totals, moment-matched cell score means)" if z is None else ""))
    return count, score_sum, freq, TARGETS["plugin" if bootstrap else "plugin_no_bootstrap"], " + ".join(parts)


def _observed(ev: _Bins, n_out: int):
    """The observed count and score sum per bin, repeated for every output draw: (n_out, n_bins) each."""
    return tuple(np.broadcast_to(v, (n_out, ev.n_bins)) for v in (ev.count, ev.score_sum))


def _model_route(data, fit, ev: _Bins, src: Draws, draws: Draws, rows):
    """Model-based route: the fitted calibration curve's bin frequencies per draw."""
    if src.model == "platt":
        freq = model_freq(draws, fit=fit, bin_idx=ev.bin_idx, n_bins=ev.n_bins)
    else:
        C = (group_bin_counts(rows[0], data.group, fit.groups.n_groups, ev.n_bins, data.counts) if rows is not None
             else group_bin_counts(fit.groups.index, ev.bin_idx, fit.groups.n_groups, ev.n_bins))
        freq = model_freq(draws, group_bin=C)
    uncertainty = f"posterior of the {src.model} calibration curve (channels and curve jointly)"
    return (*_observed(ev, draws.n_source), freq, TARGETS["model"], uncertainty)


def _latent_route(data, fit, ev: _Bins, src: Draws, draws: Draws, rows, rng):
    """Latent-label route: clean labels drawn from their posterior, summed per bin and draw."""
    if src.model == "platt":
        cols = response_columns(data, np.ones(data.n_annotators, bool), func="posterior_nc_ece")
        freq = latent_freq(draws, fit, rng, labels=cols.labels, bin_idx=ev.bin_idx, n_bins=ev.n_bins,
                           column_annotator=None if not data.has_repeats else cols.annotator)
    else:
        atoms = (latent_atoms(rows[1], data.group, ev.n_bins, data.counts) if rows is not None
                 else latent_atoms(fit.inputs.item_rows(), ev.bin_idx, ev.n_bins))
        freq = latent_freq(draws, fit, rng, atoms=atoms, n_bins=ev.n_bins)
    uncertainty = ("clean-label draws from their posterior given the responses"
                   + (" (channels and prevalences from the posterior)" if src.is_posterior else
                      f" (channels and prevalences fixed at the {src.source} estimate)"))
    return (*_observed(ev, draws.n_source), freq, TARGETS["latent"], uncertainty)


def _point_value(data, z, ev: _Bins, fit, rule, cols) -> float:
    """The paper's NC-ECE at the fit's point channel: ``sum_k |F_k - S_k| / n`` for one channel without the
    bootstrap (the plug-in sums of :func:`plugin_sums`, the same as :func:`noisycal_bayes.nc_ece`'s)."""
    channel = fit.channel if is_fit_result(fit) else fit
    fpr = np.asarray(channel.fpr, dtype=np.float64)[None]
    gap = np.asarray(channel.gap, dtype=np.float64)[None]
    fpr, gap, rule = _on_columns(cols, fpr, gap, rule)
    if cols is not None and z.size != cols.labels.shape[0]:  # model / latent routes keep every item
        z = z[cols.keep]
        ev = _evaluation_bins_on(z, ev.edges)
    count, score_sum, freq = plugin_sums(_cells(data, z, ev, cols), ev.n_bins, fpr, gap, rule, bootstrap=False,
                                         rng=None)
    return float(np.sum(np.abs(np.asarray(freq) - np.asarray(score_sum))) / np.sum(count))


# ----------------------------------------------------------------------------- K classes
MC_TARGETS = {
    "top_label": ("population top-label binned ECE on the fixed partition: sum_b P(conf in B_b) "
                  "|E[1[Y = yhat] - conf | conf in B_b]|"),
    "classwise": ("population class-wise binned ECE on the fixed partitions: mean_k sum_b P(p_k in B_kb) "
                  "|E[1[Y = k] - p_k | p_k in B_kb]| (and each class's term)"),
    "no_bootstrap": ("none: NC-ECE of this sample with confusion uncertainty only (no evaluation-sample "
                     "uncertainty, so the interval is too narrow for any target)"),
}


def _prepare(func, probs, responses, confusion_draws, prevalence, *, bins, weights, level, interval, n_draws,
             usable, max_condition, kind):
    """Validated inputs, the output draws and the design."""
    p = check_probs(probs)
    n, k = p.shape
    resp = check_responses(responses, n, k, func=func)
    conf = check_confusion(confusion_draws, name="confusion_draws", n_annotators=resp.n_annotators, n_classes=k,
                           draws=True)
    is_posterior = conf.shape[0] > 1
    prev = check_prevalence(prevalence, k, n_draws=conf.shape[0])
    rule, label = check_weights(weights, resp.n_annotators, allow_zero=False, n_classes=k)
    level = check_level(level)
    if interval not in INTERVAL_METHODS:
        raise ValueError(f"{func}: `interval` must be one of {INTERVAL_METHODS}; got {interval!r}.")
    if usable is None:
        usable = usable_from_draws(conf, max_condition=max_condition, level=USABLE_LEVEL)
    elif np.shape(usable) != (resp.n_annotators,):
        raise ValueError(f"{func}: `usable` must be a bool array of shape ({resp.n_annotators},); got shape "
                         f"{np.shape(usable)}.")
    usable = np.asarray(usable, dtype=bool)
    warn_unusable(usable, np.arange(resp.n_annotators), func, stacklevel=5)
    if not usable.any():
        raise ValueError(f"{func}: no annotator has a usable (invertible) confusion matrix; the corrected targets are "
                         "undefined.")
    cond = confusion_condition(conf)[:, usable]
    bad = (cond > max_condition).any(axis=1)
    if bad.any():
        warnings.warn(f"{func}: in {int(bad.sum())} of {conf.shape[0]} draws a used annotator's confusion matrix is "
                      f"near singular (condition number up to {float(cond.max()):.3g} > {max_condition}); those draws "
                      "have their singular values clipped to that condition number before inversion.",
                      IdentifiabilityWarning, stacklevel=4)
    edges = bin_edges(p, bins, kind)
    des = Atoms(p, resp, usable, kind, edges)
    if not des.has.all():
        warnings.warn(f"{func}: {int((~des.has).sum())} items (e.g. {_preview(np.flatnonzero(~des.has))}) have no "
                      "response from an annotator with a usable confusion matrix and are left out.", DataWarning,
                      stacklevel=4)
    idx = output_index(conf.shape[0], n_draws, is_posterior=is_posterior)
    return p, resp, conf, prev, rule, label, level, usable, edges, des, idx, is_posterior


def _check_draw_weights(item_weights, n_source: int, n_items: int, bootstrap: bool, func: str):
    """The items' bootstrap weights of each confusion draw (n_source, n_items), checked and not copied (any real
    dtype: bootstrap multiplicities may come as small integers), or None."""
    if item_weights is None:
        return None
    w = np.asarray(item_weights)
    if not (np.issubdtype(w.dtype, np.integer) or np.issubdtype(w.dtype, np.floating)):
        raise ValueError(f"{func}: `item_weights` must be a numeric array; got dtype {w.dtype}.")
    if not bootstrap:
        raise ValueError(f"{func}: `item_weights` are the items' bootstrap weights of each confusion draw; they need "
                         "bootstrap=True.")
    if n_source < 2:
        raise ValueError(f"{func}: `item_weights` need confusion draws (one per row), not a point estimate.")
    if w.shape != (n_source, n_items):
        raise ValueError(f"{func}: `item_weights` must have shape (n_draws, n_items) = ({n_source}, {n_items}), one "
                         f"row per confusion draw; got {w.shape}.")
    finite = np.isfinite(w).all(axis=1) if np.issubdtype(w.dtype, np.floating) else np.ones(n_source, bool)
    bad = ~finite | (w < 0).any(axis=1) | ~(w.sum(axis=1, dtype=np.float64) > 0)
    if bad.any():
        raise ValueError(f"{func}: `item_weights` rows must be finite, non-negative and not all zero; rows "
                         f"{_preview(np.flatnonzero(bad))} are not.")
    return w


def _run(func, kind, probs, responses, confusion_draws, prevalence, *, bins, weights, level, seed, interval,
         bootstrap, n_draws, usable, max_condition, bias_correct, calibrate, item_weights, point_confusion):
    """``(count, score, freq, point, design, meta, fresh)``: the per-draw sums (n_out, n_segments) of the output
    draws, the sums at the point confusion, the design, how the draws were made, and the sums and meta with fresh
    item weights (the class-wise per-class intervals; the same as the first four without ``item_weights``)."""
    p, resp, conf, prev, rule, label, level, usable, edges, des, idx, is_post = _prepare(
        func, probs, responses, confusion_draws, prevalence, bins=bins, weights=weights, level=level,
        interval=interval, n_draws=n_draws, usable=usable, max_condition=max_condition, kind=kind)
    centre = _check_point_confusion(point_confusion, conf, func)
    joint = _check_draw_weights(item_weights, conf.shape[0], p.shape[0], bool(bootstrap), func)
    if joint is not None:
        joint = DrawWeights(joint, idx, des.has, func)
    prev_out = prev[idx] if prev is not None and prev.ndim == 2 else (None if prev is None else
                                                                      np.broadcast_to(prev, (idx.size, des.k)))

    def sums(weights):
        # Fresh Bayesian-bootstrap weights come from ``seed`` (joint draws use none): both sums share the seed.
        return atom_sums(des, conf[idx], prev_out, rule, usable, bool(bootstrap), np.random.default_rng(seed),
                         max_condition, weights)

    def uncertainty(weights):
        parts = ["confusion posterior draws" if is_post else "confusion fixed at the point estimate"]
        if bootstrap:
            parts.append("Bayesian bootstrap of the evaluated items" + ("" if weights is None else
                                                                       " (each draw's own item weights: joint draws)"))
        return " + ".join(parts)

    count, score, freq = sums(joint)
    # The point value: the same sums at the fit the draws scatter around (``point_confusion``; default the draws'
    # mean confusion) and the mean prevalence, without the bootstrap.
    prev_pt = None if prev is None else (prev.mean(axis=0) if prev.ndim == 2 else prev)[None]
    c0, s0, f0 = atom_sums(des, centre[None], prev_pt, rule, usable, False, None, max_condition)
    meta = dict(target=MC_TARGETS[kind] if bootstrap else MC_TARGETS["no_bootstrap"], uncertainty=uncertainty(joint),
                label=label, fit_method="draws" if is_post else "point", n_items=des.n, edges=edges, level=level,
                bias_correct=bool(bias_correct) and is_post, calibrate=bool(calibrate))
    # Class-wise: the per-class intervals keep fresh item weights (their joint draws were too narrow:
    # docs/coverage.md); the same seed gives the draws of the call without ``item_weights``.
    fresh = (count, score, freq, meta) if joint is None or kind != "classwise" else (
        *sums(None), {**meta, "uncertainty": uncertainty(None)})
    return count, score, freq, (c0[0], s0[0], f0[0]), des, meta, fresh


def _check_point_confusion(point_confusion, conf, func: str) -> np.ndarray:
    """The confusion at which the point value and the bias correction's centre are computed: ``point_confusion``
    (validated, shape (J, K, K) like one draw) or, by default, the draws' mean."""
    if point_confusion is None:
        return conf.mean(axis=0)
    if conf.shape[0] < 2:
        raise ValueError(f"{func}: `point_confusion` is the fit that confusion *draws* scatter around; with a single "
                         "confusion matrix per annotator (a point estimate) pass that alone.")
    j, k = conf.shape[1], conf.shape[2]
    try:
        return check_confusion(point_confusion, name="point_confusion", n_annotators=j, n_classes=k)
    except ValueError as err:
        raise ValueError(f"{func}: {err}") from None


def _read(count, score, freq, point, meta, interval, level) -> dict:
    """The fields every K-class result shares: the value at the point fit (``point``: its sums without the
    bootstrap), the interval with the K-class options (:func:`~noisycal_bayes.propagate.intervals.read_interval`,
    always centred) and how the draws were made (``meta`` of :func:`_run`)."""
    c0, s0, f0 = point
    return dict(value=float(np.abs(f0 - s0).sum() / c0.sum()),
                **read_interval(count, score, freq, level=level, interval=interval, point=point,
                                bias_correct=meta["bias_correct"], calibrate=meta["calibrate"], centre=True),
                target=meta["target"], method="plugin", uncertainty=meta["uncertainty"], weights_rule=meta["label"],
                fit_method=meta["fit_method"], model=None, n_items=meta["n_items"])


def _result(count, score, freq, point, edges, meta, interval, bootstrap, seed, level) -> PosteriorNCECE:
    """A :class:`PosteriorNCECE` from per-draw sums over one block of segments (top-label, or one class)."""
    return PosteriorNCECE(**_read(count, score, freq, point, meta, interval, level),
                          table=_bin_table(edges, point[0], point[1], count, score, freq, level), edges=edges,
                          bootstrap=bool(bootstrap), seed=seed)


def posterior_top_label_nc_ece(probs, responses, confusion_draws, prevalence=None, *, bins=15, weights="iv",
                               level: float = 0.9, seed: int = 0, interval: str = "debiased", bootstrap: bool = True,
                               n_draws=None, usable=None, max_condition: float = MAX_CONDITION,
                               bias_correct: bool = True, calibrate: bool = False,
                               item_weights=None, point_confusion=None) -> PosteriorNCECE:
    """Posterior of the top-label NC-ECE (the K-class headline), with an interval for a stated target.

    Parameters
    ----------
    probs : array of shape (n_items, n_classes)
        Class probabilities of the evaluated classifier; rows sum to 1 (within ``PROBS_ROW_TOL`` = 1e-4).
    responses : Responses, (item, annotator, label) tuple of int arrays, or MulticlassAnnotationSet
        Labels as class indices ``0..K-1`` (the columns of ``probs``); repeats count as responses. The items may
        be held out from the fit (only the confusion matrices are used).
    confusion_draws : array of shape (n_draws, n_annotators, n_classes, n_classes) or (n_annotators, K, K)
        Posterior draws of the confusion matrices (e.g. ``MulticlassPosterior.confusion``, or EM bootstrap
        replicates), or one point estimate (treated as known: the interval then carries the item bootstrap only).
    prevalence : array of shape (n_classes,) or (n_draws, n_classes), optional
        Overall class frequencies for the IV weights (per draw, or fixed). None (default): per draw, the
        item-weighted mean equally weighted corrected vector, as the binary IV rule estimates ``mu``.
    bins : int or Binning, default 15
        Bins on the confidence (top-label) or on each class's probability (class-wise); an int means equal width.
    weights : {"iv", "equal"} or array of shape (n_annotators,) or (n_annotators, n_classes), default "iv"
        Per-coordinate annotator weights, recomputed from each draw's confusion matrices.
    level : float, default 0.9
    seed : int, default 0
        Seeds the Bayesian bootstrap weights (``numpy.random.default_rng``).
    interval : {"debiased", "posterior"}, default "debiased"
        As in :func:`~noisycal_bayes.propagate.posterior_nc_ece`.
    bootstrap : bool, default True
        Add evaluation-sample uncertainty by a Bayesian bootstrap of the items. Without it the interval has no
        target (confusion uncertainty only).
    n_draws : int, optional
        Output draws: default every draw, or 1000 for a point estimate; fewer thins evenly, more cycles.
    usable : bool array of shape (n_annotators,), optional
        The annotators whose labels enter (default:
        :func:`~noisycal_bayes.reference.calibration.usable_from_draws`: condition number at most
        ``max_condition`` in all but ``(1 - 0.9) / 2`` of the draws).
    max_condition : float, default 100
    bias_correct : bool, default True
        With confusion draws (not a point estimate): centre each bin's debiasing on the bootstrap
        bias-corrected residual ``2 e_b(C_bar) - mean_s e_sb`` (:mod:`~noisycal_bayes.propagate.intervals`),
        which removes the bias that the non-linear inverse of an estimated confusion matrix puts into the debiased
        estimate. False: the
        binary route's centre ``mean_s e_sb`` (for K = 2 then equal to
        :func:`~noisycal_bayes.propagate.posterior_nc_ece` up to the centring of the interval's draws).
    point_confusion : array of shape (n_annotators, n_classes, n_classes), optional
        With confusion draws that are refits around a fit (an EM bootstrap): that fit, ``C_hat``. The point
        ``value`` is then computed at it and the bias correction is centred on ``2 e_b(C_hat) - mean_s e_sb``,
        the bootstrap bias correction proper (:mod:`~noisycal_bayes.propagate.intervals`). Default: the draws'
        mean ``C_bar`` (posterior draws, which have no separate fit).
    calibrate : bool, default False
        (``interval="debiased"``.) Read the two-sided interval at the calibrated nominal level of the class-wise
        mean (prepivoting; at least ``level``). The EM route of
        :func:`~noisycal_bayes.evaluation.evaluate_multiclass` sets it with ``item_weights``; False keeps
        ``level`` (NUTS draws, and the binary-compatible setting).
    item_weights : array of shape (n_draws, n_items), optional
        *Joint draws*: the item weights from which each confusion draw was refitted (a weighted-likelihood
        bootstrap: EM refits on Bayesian-bootstrap weights, row ``s`` for ``confusion_draws[s]``). Draw ``s``
        then sums the items with the same weights (rescaled to mean 1 over the items with a usable response)
        instead of fresh ones, so the draws keep the correlation between the fit's error and the items'
        sampling error (negative: an unusual sample moves the fit so as to partly cancel it). Default None:
        independent Bayesian-bootstrap weights (``seed``; NUTS draws, or refits whose weights are unknown). Needs
        ``bootstrap=True`` and confusion draws.

    Raises
    ------
    ValueError
        Bad ``probs`` (shape, range, rows not summing to 1), responses (labels outside ``0..K-1``, items out of
        range), confusion draws (shape, rows not summing to 1), prevalence, weights, level, interval, n_draws,
        or usable (class-wise also item_weights: shape, negative or non-finite rows, without bootstrap or
        confusion draws); no usable annotator.

    Warns
    -----
    IdentifiabilityWarning
        Annotators with near-singular confusion matrices (left out), or draws in which a used one is.
    DataWarning
        Items without a usable response (left out).

    Returns
    -------
    PosteriorNCECE
        As :func:`~noisycal_bayes.propagate.posterior_nc_ece`'s plug-in route: ``value`` (the top-label NC-ECE at
        ``point_confusion``, default the posterior-mean confusion: :func:`top_label_nc_ece`), ``debiased``,
        ``lower``, ``upper``, ``upper_one_sided``, ``interval_to_read``, ``draws``, ``target``, ``method="plugin"``,
        ``uncertainty``, ``table`` (per confidence bin), ``edges``, ``weights_rule``, ``fit_method`` (``"draws"`` or
        ``"point"``).

    Notes
    -----
    Module docstring, *K classes*; the interval rules are those of the binary plug-in route with the K-class
    options of :mod:`noisycal_bayes.propagate.intervals`. Coverage: docs/coverage.md.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> C = np.array([[[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]] * 3)
    >>> y = rng.integers(0, 3, 500)
    >>> lab = (y[:, None] + (rng.random((500, 3)) < 0.2) * rng.integers(1, 3, (500, 3))) % 3
    >>> resp = (np.repeat(np.arange(500), 3), np.tile(np.arange(3), 500), lab.reshape(-1))
    >>> p = np.full((500, 3), 0.05); p[np.arange(500), y] = 0.9
    >>> draws = np.array([[[rng.dirichlet(300 * row) for row in c] for c in C] for _ in range(50)])
    >>> res = posterior_top_label_nc_ece(p, resp, draws, n_draws=50)
    >>> res.lower <= res.debiased <= res.upper, res.n_draws
    (True, 50)
    """
    # ``locals()`` here is exactly this call's arguments, which ``_run`` takes by the same names.
    count, score, freq, point, _, meta, _ = _run("posterior_top_label_nc_ece", "top_label", **locals())
    return _result(count, score, freq, point, meta["edges"][0], meta, interval, bootstrap, seed, meta["level"])


def posterior_classwise_nc_ece(probs, responses, confusion_draws, prevalence=None, *, bins=15, weights="iv",
                               level: float = 0.9, seed: int = 0, interval: str = "debiased", bootstrap: bool = True,
                               n_draws=None, usable=None, max_condition: float = MAX_CONDITION,
                               bias_correct: bool = True, calibrate: bool = True,
                               item_weights=None, point_confusion=None) -> PosteriorClasswiseNCECE:
    """Posterior of the class-wise NC-ECE: the mean over classes and each class, with intervals.

    Parameters
    ----------
    probs, responses, confusion_draws, prevalence, bins, weights, level, seed, interval
        As for :func:`posterior_top_label_nc_ece` (``bins`` per class, on each class's probability); so are
        ``bootstrap``, ``n_draws``, ``usable``, ``max_condition``, ``bias_correct`` and ``point_confusion``.
    calibrate : bool, default True
        (``interval="debiased"``.) Read the two-sided interval of the *mean over classes* at the nominal level whose
        coverage, estimated by its simulated draws made at the debiased bins, is ``level`` (prepivoting, Beran
        1987; at least ``level``, so the interval only widens;
        :func:`~noisycal_bayes.propagate.intervals.calibrated_level`). The per-class intervals (15 bins each) and
        the one-sided bound stay at ``level``. False: the mean's interval at ``level`` (with ``bias_correct=False``
        the K = 2 binary-compatible setting).
    item_weights : array of shape (n_draws, n_items), optional
        *Joint draws*, as for :func:`posterior_top_label_nc_ece`. They enter the *mean over classes* only;
        ``per_class`` keeps fresh weights (``seed``; their joint draws were too narrow: docs/coverage.md).

    Raises
    ------
    ValueError
        As :func:`posterior_top_label_nc_ece` (which also lists the warnings).

    Returns
    -------
    PosteriorClasswiseNCECE
        Mean over classes (``value`` = :func:`classwise_nc_ece` at ``point_confusion``, default the posterior-mean
        confusion; interval from
        the draws of the mean) and ``per_class``: one :class:`PosteriorNCECE` per class from the same draws.

    Notes
    -----
    Module docstring, *K classes*. For K = 2 ``per_class[1]`` is the binary plug-in NC-ECE of ``p[:, 1]``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> C = np.array([[[0.8, 0.2], [0.1, 0.9]]] * 3)
    >>> y = rng.integers(0, 2, 400)
    >>> lab = np.where(rng.random((400, 3)) < C[0, y, 1 - y][:, None], 1 - y[:, None], y[:, None])
    >>> resp = (np.repeat(np.arange(400), 3), np.tile(np.arange(3), 400), lab.reshape(-1))
    >>> p = np.c_[1 - (0.1 + 0.8 * y), 0.1 + 0.8 * y]
    >>> res = posterior_classwise_nc_ece(p, resp, C, n_draws=40)
    >>> len(res.per_class), res.per_class_table.columns[:3].tolist()
    (2, ['class', 'value', 'debiased'])
    """
    # As in :func:`posterior_top_label_nc_ece`: this call's arguments, by name.
    count, score, freq, point, des, meta, fresh = _run("posterior_classwise_nc_ece", "classwise", **locals())
    level = meta["level"]
    off = des.entries.offset
    pc_count, pc_score, pc_freq, pc_meta = fresh  # fresh item weights per class (``_run``)
    # Per class (15 bins): the nominal level; only the mean over classes (K x bins terms) is calibrated.
    per = tuple(_result(pc_count[:, a:b], pc_score[:, a:b], pc_freq[:, a:b], tuple(x[a:b] for x in point),
                        meta["edges"][c], {**pc_meta, "calibrate": False}, interval, bootstrap, seed, level)
                for c, (a, b) in enumerate(zip(off[:-1], off[1:])))
    # The mean over classes: every class block holds every item once, so the concatenated blocks give
    # sum_{k,b} |F - S| / (K n) = the mean of the per-class ECEs, draw by draw (correlation kept).
    table = pd.DataFrame({"class": np.arange(len(per)), "value": [r.value for r in per],
                          "debiased": [r.debiased for r in per], "lower": [r.lower for r in per],
                          "upper": [r.upper for r in per], "upper_one_sided": [r.upper_one_sided for r in per],
                          "interval_to_read": [r.interval_to_read for r in per]})
    return PosteriorClasswiseNCECE(**_read(count, score, freq, point, meta, interval, level), per_class=per,
                                   per_class_table=table, edges=meta["edges"], bootstrap=bool(bootstrap), seed=seed)
