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
EM / MAP estimate, or the posterior mean for NUTS draws), i.e. ``noisycal_bayes.nc_ece(data, fit.channel,
bins=..., weights=...).value``; and ``debiased``, the bias-corrected estimate of the chosen route. Per draw ``s``:
plug-in ``NC-ECE_s = sum_k |sum_{i in B_k} g_si Rtilde_si| / sum_i g_si`` (Bayesian bootstrap weights ``g_s ~ n
Dirichlet(1, ..., 1)``); model ``sum_k |sum_{i in B_k} (m_s(Z_i) - Z_i)| / n``; latent ``sum_k |sum_{i in B_k}
(Y_si - Z_i)| / n`` with ``Y_si`` drawn from :func:`noisycal_bayes.core.posterior_positive`. The default interval
corrects each bin's ``|e_sk|`` for its Jensen bias by moment matching
(:func:`~noisycal_bayes.propagate.debias_abs`; cf. Kumar, Liang & Ma 2019); near zero the interval to read is
``[0, upper_one_sided]``. :class:`~noisycal_bayes.data.SufficientStats` give the same draws as the items they
summarise. For K classes, :func:`posterior_top_label_nc_ece` and
:func:`posterior_classwise_nc_ece` run the plug-in route with K x K confusion matrices; for K = 2 the class-wise
entry of class 1 equals :func:`posterior_nc_ece` to rounding.

The derivations (the per-cell bootstrap for large data, the debiased interval, the SufficientStats route, the
K-class sums and near-singular confusion) are in docs/methods.md; coverage of each route in docs/coverage.md.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import binary_only, check_choice, check_level, check_weights
from ..data import AnnotationSet, SufficientStats
from ..data.columns import response_columns
from ..reference.calibration import MAX_CONDITION
# TARGETS, MC_TARGETS, INTERVAL_METHODS, USABLE_LEVEL and usable_annotators_of are re-exported here (their
# documented import path); they live beside the results, the interval rules and the draws that use them.
from .result import MC_TARGETS, TARGETS, PosteriorClasswiseNCECE, PosteriorNCECE, _bin_table  # noqa: F401
from .draws import (USABLE_LEVEL, Draws, check_fit, extract_draws, is_fit_result, output_index,  # noqa: F401
                    usable_annotators_of, usable_for)
from .intervals import INTERVAL_METHODS, check_interval, read_interval  # noqa: F401
from ._routes import (_check_route, _check_usable, _evaluation_bins, _evaluation_bins_on, _latent_route,
                      _model_route, _plugin_route, _point_value, _read, _result, _run)

METHODS = ("plugin", "model", "latent")
#: Default propagation route of :func:`posterior_nc_ece` (see docs/coverage.md for why).
DEFAULT_METHOD = "plugin"
DEFAULT_INTERVAL = "debiased"


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
        ``"plugin"`` a known :class:`~noisycal_bayes.data.Channel`. A fit with channels per score group
        (``model="score_dependent"`` or ``"correlated"``) goes to
        :func:`~noisycal_bayes.propagate.group_channels.posterior_nc_ece_group_channels` with its
        ``group_channels`` (each item corrected with its group's channel; the plug-in route with the bootstrap on an
        AnnotationSet only). With a point estimate the channels are
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
    are derived in docs/methods.md; coverage of each route's interval for its target is in docs/coverage.md.

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
    if getattr(fit, "group_channels", None) is not None:
        return _group_channel_route(data, fit, func, bins=bins, weights=weights, level=level, seed=seed, method=method,
                                    interval=interval, bootstrap=bootstrap, n_draws=n_draws, usable=usable)
    z, level, rule, rule_label, fit = _check_inputs(data, fit, func, method=method, interval=interval,
                                                   weights=weights, level=level)
    ev = _evaluation_bins(data, z, bins, func)
    rng = np.random.default_rng(seed)
    src = extract_draws(fit)
    draws: Draws = src.take(output_index(src.n_source, n_draws, is_posterior=src.is_posterior))
    rows = _check_route(data, fit, src, method, ev.edges, func) if method != "plugin" else None
    cols = None
    if z is not None:
        usable = usable_for(fit, src) if usable is None else _check_usable(usable, data.n_annotators, func)
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


def _group_channel_route(data, fit, func, *, bins, weights, level, seed, method, interval, bootstrap, n_draws, usable):
    """:func:`posterior_nc_ece` of a fit with channels per score group: the plug-in route of
    :func:`~noisycal_bayes.propagate.group_channels.posterior_nc_ece_group_channels` on ``fit.group_channels``
    (thinned or cycled to ``n_draws`` as for any fit), each item of ``data`` in its group under the fit's partition
    (the fitted items' own groups, or the fitted score edges for other items). ``value`` is at the per-group mean
    of the used draws; ``usable`` defaults to the rule of :func:`usable_annotators_of` on the fit's item-weighted
    average gap."""
    from ..models.inputs import item_groups
    from .group_channels import posterior_nc_ece_group_channels

    if not isinstance(data, AnnotationSet) or method != "plugin" or not bootstrap:
        raise ValueError(f"{func}: a {fit.model!r} fit has channels per score group, propagated by the plug-in route "
                         "with the Bayesian bootstrap on an AnnotationSet (method='plugin', bootstrap=True); got "
                         f"{type(data).__name__}, method={method!r}, bootstrap={bootstrap}. For the other routes fit "
                         "the shared-channel model (model='histogram' or 'grouped').")
    fit = check_fit(fit, func, allow_channel=False)
    if fit.inputs.n_annotators != data.n_annotators:
        raise ValueError(f"{func}: the fit has {fit.inputs.n_annotators} annotators but `data` has "
                         f"{data.n_annotators}.")
    f, t = fit.group_channels
    pick = output_index(f.shape[0], n_draws, is_posterior=fit.draws is not None)
    if usable is None:
        usable = usable_annotators_of(fit)
    return posterior_nc_ece_group_channels(
        data, item_groups(data, fit, func), f[pick], t[pick], bins=10 if bins is None else bins, weights=weights,
        level=level, seed=seed, usable=usable, interval=interval, model=fit.model,
        source=f"{fit.method.upper()} channels per score group ({fit.model})")


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
    check_interval(interval, func)
    rule, rule_label = check_weights(weights, data.n_annotators, allow_zero=False)
    fit = check_fit(fit, func, allow_channel=(method == "plugin"))
    n_ann_fit = fit.n_annotators if not is_fit_result(fit) else fit.inputs.n_annotators
    if n_ann_fit != data.n_annotators:
        raise ValueError(f"{func}: the fit has {n_ann_fit} annotators but `data` has {data.n_annotators}.")
    return z, level, rule, rule_label, fit


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
    docs/methods.md, *K classes*; the interval rules are those of the binary plug-in route with the K-class
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
    docs/methods.md, *K classes*. For K = 2 ``per_class[1]`` is the binary plug-in NC-ECE of ``p[:, 1]``.

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
