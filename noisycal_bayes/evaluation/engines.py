"""Channel engines of :func:`noisycal_bayes.evaluate` and :func:`evaluate_multiclass`, and the pieces that turn
a fit into an :class:`~noisycal_bayes.evaluation.Evaluation`.

Binary data: each engine is a function ``(data, Settings) -> EngineResult`` registered in :data:`ENGINES`:
``"em"`` (``fit_em`` -> ``bootstrap_em``) and ``"nuts"`` (``fit_nuts``); both hand their draws to
``posterior_nc_ece`` (one propagation for both routes).

K classes (:func:`evaluate_multiclass` -> :class:`~noisycal_bayes.evaluation.MulticlassEvaluation`): every
annotator's K x K confusion matrix, the top-label NC-ECE (the headline) and the class-wise NC-ECE with
intervals, the corrected top-label reliability table and the naive ECEs (DESIGN §8), by two routes:

=========  =============================================================  ===================================
method     confusion matrices                                             intervals
=========  =============================================================  ===================================
``em``     ``fit_em_multiclass`` (MLE, grouped model; crowds:             item bootstrap with the EM refitted
           ``model="pooled"``)                                            per replicate
                                                                          (``bootstrap_multiclass_nc_ece``),
                                                                          the refits propagated by
                                                                          ``posterior_top_label_nc_ece`` /
                                                                          ``posterior_classwise_nc_ece``
                                                                          (class-wise: joint draws)
``nuts``   ``fit_nuts_multiclass`` (posterior; point = posterior mean;    ``posterior_top_label_nc_ece`` /
           grouped model; crowds: ``model="ibcc"``)                       ``posterior_classwise_nc_ece``
=========  =============================================================  ===================================

On both K routes ``nc_ece.value`` is the top-label NC-ECE at the point confusion matrices
(:func:`~noisycal_bayes.reference.top_label_nc_ece`), and confusion intervals are equal-tailed
quantiles of the draws (posterior draws or bootstrap refits). Both kinds share :class:`Settings`, its
validation, :func:`collect_warnings`, the NC-ECE summary and the check rows.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..data.binning import DEFAULT_GROUPS
from ..models.em_result import SPARSE_MIN_ANNOTATORS
from ..diagnostics.checks import N_CHECK_REPLICATES, check_row, run_multiclass_checks
from .expansion import expand_models_k, wants_expansion
from .result import ClasswiseSummary, Evaluation, MulticlassEvaluation, NCECESummary
from .._validation import one_line as _one_line

__all__ = ["ENGINES", "METHODS", "MULTICLASS_METHODS", "EngineResult", "Settings", "collect_warnings",
           "evaluate_multiclass"]

METHODS = ("nuts", "em")
#: Channel engines of :func:`evaluate_multiclass`.
MULTICLASS_METHODS = ("em", "nuts")
#: Weight rules of the K-class corrected targets.
_WEIGHTS_K = ("iv", "equal")
#: K classes: random EM starts of the full-sample fit and of every bootstrap refit (besides the majority-vote
#: start): one number for both, so that the compiled EM is reused by the refits.
N_STARTS_K = 1


@dataclass(frozen=True)
class Settings:
    """The validated options of one :func:`evaluate` or :func:`evaluate_multiclass` call (what each channel
    engine receives). ``groups``: a Binning of the scores (binary), or the number of confidence quantiles per
    predicted class (K classes); ``prior``: the K-class NUTS prior (None: the model's default)."""

    method: str = "nuts"
    bins: int = 10
    groups: object = DEFAULT_GROUPS
    weights: str = "iv"
    level: float = 0.9
    seed: int = 0
    n_boot: int = 200
    n_starts: int = 10
    n_chains: int = 4
    n_warmup: int = 1000
    n_draws: int = 1000
    progress_bar: bool = False
    checks: bool = True
    prior: object = None
    expand: object = "auto"


def _settings(data, func: str = "evaluate", **kw) -> Settings:
    """Validate the options of ``func`` (``"evaluate"``: binary data; ``"evaluate_multiclass"``: K classes)."""
    from .._validation import check_level, check_positive_int, check_weights
    from ..data import AnnotationSet, MulticlassAnnotationSet

    k_class = func == "evaluate_multiclass"
    kind = MulticlassAnnotationSet if k_class else AnnotationSet
    if not isinstance(data, kind) or (not k_class and data.kind != "binary"):
        raise ValueError(f"{func}: `data` must be {'a' if k_class else 'an'} {kind.__name__}; got "
                         f"{type(data).__name__}.")
    if kw["method"] not in ENGINES:
        raise ValueError(f"{func}: unknown method {kw['method']!r}; choose from {sorted(ENGINES)}.")
    if k_class:
        _check_k_options(kw)
    else:
        kw["groups"] = _check_groups(kw["groups"])
    positive = ("bins", "n_chains", "n_draws") if k_class else ("bins", "n_starts", "n_chains", "n_warmup", "n_draws")
    for name in positive:
        kw[name] = check_positive_int(kw[name], name=name)
    for name in ("n_boot", "n_warmup", "seed") if k_class else ("n_boot", "seed"):
        kw[name] = check_positive_int(kw[name], name=name, minimum=0)
    kw["level"] = check_level(kw["level"])
    if kw.get("expand", "auto") not in ("auto", True, False):
        raise ValueError(f"{func}: `expand` must be 'auto', True or False; got {kw['expand']!r}.")
    if not k_class:
        if not isinstance(kw["weights"], str):
            raise ValueError(f"evaluate: `weights` must be a rule name; got {kw['weights']!r}.")
        check_weights(kw["weights"], data.n_annotators)
    return Settings(**kw)


def _check_k_options(kw: dict) -> None:
    """The K-class options: weights, ``groups`` (confidence quantiles; None means 2) and the NUTS prior."""
    if kw["weights"] not in _WEIGHTS_K:
        raise ValueError(f"evaluate_multiclass: `weights` must be one of {list(_WEIGHTS_K)} for K classes; got "
                         f"{kw['weights']!r}.")
    groups = kw["groups"]
    if groups is None:
        kw["groups"] = 2
    elif isinstance(groups, (int, np.integer)) and not isinstance(groups, bool) and groups >= 1:
        kw["groups"] = int(groups)
    else:
        raise ValueError(f"evaluate_multiclass: `groups` must be None (2 confidence quantiles per predicted class) or "
                         f"a positive int (that many quantiles); got {groups!r}.")
    if kw["prior"] is not None:
        from ..models import MulticlassPrior

        if kw["method"] != "nuts":
            raise ValueError("evaluate_multiclass: `prior` is used by method='nuts' only (the EM route fits the "
                             "maximum-likelihood channels and refits them per bootstrap replicate); got "
                             f"method={kw['method']!r} with a prior.")
        if not isinstance(kw["prior"], MulticlassPrior):
            raise ValueError(f"evaluate_multiclass: `prior` must be None or a MulticlassPrior; got "
                             f"{type(kw['prior']).__name__}.")


# ============================================================================================ engines
class EngineResult(NamedTuple):
    """What a channel engine returns to :func:`evaluate`.

    ``fit`` the point fit (its ``channel`` is the point channel), ``post`` the ``PosteriorNCECE`` (None
    without draws), ``draws_fit`` the FitResult whose draws give the channel intervals (None without),
    ``detail`` / ``interval_method`` one-line descriptions, ``notes`` extra warnings.
    """

    fit: object
    post: object
    draws_fit: object
    detail: str
    interval_method: str
    notes: list


def _check_groups(groups):
    """Score groups as a Binning: an int ``k`` is ``Binning.equal_width(k)`` (with the warning of
    :func:`~noisycal_bayes.data.groups_from_int`), as everywhere in the package."""
    from ..data import Binning, groups_from_int

    if isinstance(groups, (int, np.integer)) and not isinstance(groups, bool):
        return groups_from_int(groups, stacklevel=5)
    if not isinstance(groups, Binning):
        raise ValueError(f"evaluate: `groups` must be a Binning (e.g. Binning.equal_mass(5)) or an int (equal-width "
                         f"groups); got {groups!r}.")
    return groups


def _describe_groups(groups) -> str:
    kind = {"equal_mass": "equal-mass", "equal_width": "equal-width", "edges": "fixed-edge"}[groups.kind]
    return f"{groups.n_bins} {kind} score groups"


def _model_for(s: Settings):
    """Model and groups the propagation's default route needs: ``(model, groups, description)``."""
    from ..data import Binning
    from ..propagate import DEFAULT_METHOD

    if DEFAULT_METHOD == "plugin":
        return "grouped", s.groups, _describe_groups(s.groups)
    return "histogram", Binning.equal_width(s.bins), f"the {s.bins} evaluation bins"


def _require_identified(fit, who: str):
    if fit.channel is None or not fit.identified:
        raise ValueError(f"{who} could not estimate the annotators' channels: "
                         f"{_one_line(fit.reason or 'not identified')}")


def _propagate(data, fit, s: Settings, usable=None):
    from ..data import Binning
    from ..propagate import posterior_nc_ece

    return posterior_nc_ece(data, fit, bins=Binning.equal_width(s.bins), weights=s.weights, level=s.level,
                            seed=s.seed, usable=usable)


def _engine_em(data, s: Settings) -> EngineResult:
    """EM (``fit_em``) and a Bayesian bootstrap around it (``bootstrap_em``), propagated like NUTS draws."""
    from ..inference import fit_em

    model, groups, how = _model_for(s)
    fit = fit_em(data, model=model, groups=groups, n_starts=s.n_starts, seed=s.seed)
    _require_identified(fit, "EM")
    detail = f"EM, {fit.groups.n_groups} score groups, {s.n_starts} starts"
    if s.n_boot == 0:
        return EngineResult(fit, None, None, detail, "none", ["no interval: --n-boot 0."])
    from ..inference.bootstrap import bootstrap_em

    boot = bootstrap_em(data, fit, n_boot=s.n_boot, seed=s.seed, progress_bar=s.progress_bar)
    # The downstream rule (zero weight where a gap's interval contains 0) from the point fit's intervals, so
    # that the point NC-ECE and every replicate leave out the same annotators.
    post = _propagate(data, boot, s, usable=fit.usable_annotators())
    detail += f"; {100 * s.level:.0f}% intervals from {s.n_boot} Bayesian-bootstrap replicates"
    how_iv = (f"{post.interval_method} equal-tailed interval over {s.n_boot} Bayesian-bootstrap replicates; "
              "varying: EM channels re-fitted on each replicate's item weights + Bayesian bootstrap of the "
              "evaluated items")
    return EngineResult(fit, post, boot, detail, how_iv, [])


def _engine_nuts(data, s: Settings) -> EngineResult:
    """Bayesian channels by NUTS (``fit_nuts``), and the posterior of the calibration error by propagation.

    The propagation route is the Bayesian layer's default (:data:`noisycal_bayes.propagate.DEFAULT_METHOD`):
    ``"plugin"`` fits the paper's score-grouped model with ``groups`` groups; ``"latent"`` / ``"model"``
    fit the histogram model on the evaluation bins, as they require.
    """
    from ..inference import fit_nuts
    from ..models.em_result import choose_path

    model, groups, how = _model_for(s)
    # Crowds (many annotators, repeated or gold labels: EM's sparse path) get the partially pooled channel
    # model: each annotator's channel drawn from a learned population, orientation fixed at the crowd's level.
    path, why = choose_path(data, "auto", func="evaluate")
    pooling = "partial" if path == "sparse" else "none"
    fit = fit_nuts(data, model=model, groups=groups, n_chains=s.n_chains, n_warmup=s.n_warmup,
                   n_draws=s.n_draws, seed=s.seed, progress_bar=s.progress_bar, pooling=pooling)
    _require_identified(fit, "NUTS")
    post = _propagate(data, fit, s)
    pooled = f", partially pooled channels ({why})" if pooling == "partial" else ""
    detail = (f"NUTS, {model} model on {how}{pooled}, {fit.n_chains} chains x {fit.n_draws} draws; "
              f"{100 * s.level:.0f}% posterior intervals")
    return EngineResult(fit, post, fit, detail,
                        f"{post.interval_method} equal-tailed interval; varying: {post.uncertainty}", [])


def run_checks(data, fit, s: Settings):
    """Predictive checks of the fitted channel model (:func:`noisycal_bayes.diagnostics.model_checks`: parametric
    bootstrap for EM, posterior predictive for NUTS): ``(rows, checks)`` with JSON-ready rows ``{name, status,
    statistic, p_value, detail}`` and the :class:`~noisycal_bayes.diagnostics.ModelChecks` (None when the
    checks do not cover the design: then one ``not_testable`` row says why)."""
    from ..diagnostics import model_checks

    try:
        checks = model_checks(data, fit, n_replicates=N_CHECK_REPLICATES, seed=s.seed, progress_bar=s.progress_bar)
    except ValueError as exc:
        return (check_row("not_testable", f"the checks do not apply here: {_one_line(exc)}",
                          name="posterior_predictive"),), None
    rows = []
    for r in checks.table.to_dict(orient="records"):
        rows.append({k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in r.items()})
    return tuple(rows), checks


#: Channel engines by ``method`` name: ``(data, Settings) -> EngineResult``.
ENGINES = {"em": _engine_em, "nuts": _engine_nuts}


# ============================================================================================ pieces
def _channel_intervals(draws_fit, level: float, n_annotators: int):
    """Equal-tailed ``level`` quantiles of the channel draws (posterior draws or bootstrap replicates)."""
    if draws_fit is None or draws_fit.draws is None:
        return None
    d = draws_fit.draws
    out = {}
    for name in ("fpr", "tpr", "gap"):
        x = np.asarray(d[name]) if name in d else np.asarray(d["tpr"]) - np.asarray(d["fpr"])
        out[name] = _intervals(x.reshape(-1, n_annotators), level)
    return out


def _intervals(draws: np.ndarray, level: float):
    """Equal-tailed ``level`` quantiles over the first axis (the draws): ``(lower, upper)``."""
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return lo, hi


def _mcmc_diagnostics(fit) -> dict:
    if fit.method != "nuts":
        return {"rhat_max": None, "ess_min": None, "divergences": None}
    rhat, ess_b, ess_t = fit.rhat or {}, fit.ess_bulk or {}, fit.ess_tail or {}
    # Finite entries only: R-hat is undefined (NaN) with one chain, and an all-NaN site gives no figure.
    finite = [np.asarray(v, dtype=np.float64) for v in rhat.values()]
    rhats = [float(v[np.isfinite(v)].max()) for v in finite if np.isfinite(v).any()]
    finite = [np.asarray(v, dtype=np.float64) for v in list(ess_b.values()) + list(ess_t.values())]
    ess = [float(v[np.isfinite(v)].min()) for v in finite if np.isfinite(v).any()]
    return {"rhat_max": max(rhats, default=None), "ess_min": min(ess, default=None),
            "divergences": int(fit.n_divergent)}


def _nc_ece_summary(value: float, post, s: Settings, target: str, interval_method: str):
    """The :class:`NCECESummary` and the notes it needs (one-sided reading, undercoverage)."""
    if post is None:
        return NCECESummary(value, None, None, None, None, s.level, target, "none"), []
    debiased = float(post.debiased)
    lower, upper, notes = float(post.lower), float(post.upper), []
    pct = f"{100 * s.level:.0f}%"
    if post.interval_to_read == "upper_one_sided":
        lower, upper = 0.0, float(post.upper_one_sided)
        notes.append(f"the data cannot tell the calibration error from 0 (calibration p-value "
                     f"{post.calibration_p_value:.2f}); a two-sided interval undercovers near ECE = 0 (see "
                     f"docs/coverage.md), so the interval is the one-sided {pct} bound [0, {upper:.3f}]: read "
                     "the upper bound.")
    elif value < lower:
        # The plug-in value is biased upwards (a sum of absolute values), so a value above the debiased interval is
        # the debiasing at work; one below it means the point channels and the draws correct the labels differently.
        notes.append(f"the plug-in NC-ECE {value:.3f} (at the point estimate of the channels) lies below the {pct} "
                     f"interval [{lower:.3f}, {upper:.3f}] of the draws: the point estimate and the draws correct the "
                     "labels differently (annotators with few labels, or chains that disagree: see the diagnostics); "
                     f"read the debiased estimate {debiased:.3f} and the interval.")
    centre = "debiased" if post.interval_method == "debiased" else "posterior median"
    return NCECESummary(value, debiased, lower, upper, float(post.upper_one_sided), s.level, post.target,
                        interval_method, post.interval_to_read, float(post.calibration_p_value), centre), notes


def _table(est, post):
    """Per-bin table: the posterior / bootstrap table with bands, or the point table with NaN bands."""
    cols = ["bin", "lower", "upper", "count", "mean_score", "corrected_frequency", "residual"]
    if post is None:
        table = est.table[cols].copy()
        table["band_lower"] = np.nan
        table["band_upper"] = np.nan
        return table
    table = post.table.rename(columns={"frequency_lower": "band_lower", "frequency_upper": "band_upper"})
    return table[cols + ["band_lower", "band_upper"]].copy()


@contextmanager
def collect_warnings(sink: list):
    """Record warnings raised inside the block as one-line strings in ``sink`` (deduplicated)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        yield
    for w in record:
        if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning)):
            continue
        text = f"{w.category.__name__}: {_one_line(w.message)}"
        if text not in sink:
            sink.append(text)


def _stacked_summary(expansion, shared: NCECESummary, s: Settings):
    """The headline :class:`NCECESummary` of a model expansion whose weight is not all on the shared model:
    the stacked mixture of the models' debiased NC-ECE draws
    (:func:`~noisycal_bayes.evaluation.expansion.mixture_summary`)."""
    from .expansion import mixture_summary

    mix = mixture_summary(expansion.posteriors, expansion.weights, s.level)
    parts = ", ".join(f"{m} {w:.2f}" for m, w in expansion.weights.items() if w > 0)
    how = (f"debiased equal-tailed interval of the stacked mixture of the channel models' NC-ECE draws (weights: "
           f"{parts}; {expansion.score}); each model's draws vary its channels + Bayesian bootstrap of the "
           "evaluated items")
    notes = []
    if mix["interval_to_read"] == "upper_one_sided":
        notes.append(f"the data cannot tell the calibration error from 0; the interval is the one-sided "
                     f"{100 * s.level:.0f}% bound [0, {mix['upper']:.3f}]: read the upper bound.")
    return NCECESummary(mix["value"], mix["debiased"], mix["lower"], mix["upper"], mix["upper_one_sided"], s.level,
                        shared.target, how, mix["interval_to_read"], mix["calibration_p_value"], "debiased"), notes


def assemble(data, s: Settings, res: EngineResult, est, naive, recal, caught: list, clean_labels,
             checks=((), None), expansion=None, metrics=(None, None), plan=(None, None)) -> Evaluation:
    """The :class:`Evaluation` of one run: an engine's result, the point NC-ECE ``est`` (reference
    ``nc_ece`` at the point channel), the naive metrics, the recalibration rows and the caught warnings; with a
    model ``expansion`` (:func:`~noisycal_bayes.evaluation.expansion.expand_models`) the headline follows its
    weights and the shared model's summary is kept in ``nc_ece_shared``."""
    summary, notes = _nc_ece_summary(float(est.value), res.post, s, est.target if res.post is None else None,
                                     res.interval_method)
    post = res.post
    draws = None
    if post is not None:
        draws = post.debiased_draws if post.interval_method == "debiased" else post.draws
    label = "bootstrap" if s.method == "em" else "posterior"
    if post is not None and post.interval_method == "debiased":
        label += " (bias-corrected)"
    shared_summary = None
    if expansion is not None:
        notes = notes + list(expansion.notes)
        shared_summary = summary
        if expansion.headline != "shared":
            summary, mix_notes = _stacked_summary(expansion, summary, s)
            notes = [n for n in notes if "one-sided" not in n] + mix_notes
            draws = expansion.draws
            label = f"stacked {label}"
    return Evaluation(
        method=s.method, method_detail=res.detail, n_items=data.n_items, n_annotators=data.n_annotators,
        channel=res.fit.channel, channel_intervals=_channel_intervals(res.draws_fit, s.level, data.n_annotators),
        prevalence=np.asarray(res.fit.prevalence), nc_ece=summary, table=_table(est, post),
        edges=np.asarray(est.edges), naive=naive, diagnostics=_mcmc_diagnostics(res.fit),
        warnings=tuple(caught + list(res.notes) + notes), draws=draws, draws_label=label, level=s.level,
        bins=s.bins, groups=int(res.fit.groups.n_groups), weights=s.weights, seed=s.seed, recalibration=recal,
        data=data, clean_labels=None if clean_labels is None else np.asarray(clean_labels), checks=tuple(checks[0]),
        model_checks=checks[1], fit=res.fit, expansion=expansion, nc_ece_shared=shared_summary, metrics=metrics[0],
        metrics_note=metrics[1], plan=plan[0], plan_note=plan[1])


# ============================================================================================ K classes
def _check_clean_labels(clean_labels, data):
    if clean_labels is None:
        return None
    y = np.asarray(clean_labels)
    if y.shape != (data.n_items,):
        raise ValueError(f"`clean_labels` must have shape ({data.n_items},), one class index per item; got {y.shape}.")
    if not np.issubdtype(y.dtype, np.integer):
        if not (np.issubdtype(y.dtype, np.floating) and np.all(np.isfinite(y)) and np.all(y == np.round(y))):
            raise ValueError("`clean_labels` must be class indices 0..K-1 (integers); map class names with "
                             "`data.classes` first.")
    y = y.astype(np.int64)
    bad = np.flatnonzero((y < 0) | (y >= data.n_classes))
    if bad.size:
        raise ValueError(f"`clean_labels` must be class indices in 0..{data.n_classes - 1}; got {y[bad[:5]].tolist()} "
                         f"at items {bad[:5].tolist()}.")
    return y


def _engine_em_k(data, s: Settings, groups, path: str = "auto"):
    """EM on the full sample; item bootstrap with the EM refitted per replicate, the refits propagated.

    ``groups`` None (a crowd, :func:`_pooled_crowd`): the partially pooled Dawid-Skene
    (``fit_em_multiclass(model="pooled")``), refitted the same way twice: with the full fit's population kept (the
    NC-ECE draws) and with it refitted (the confusion intervals, the metrics' draws, which ``"metrics_centre"`` =
    ``"fit"`` tells to centre on the full fit). ``path``: the grouped EM's path
    (the model expansion's stratified annotators take ``"patterns"``: each item has the labels of one stratum's
    annotators, few patterns although most cells are missing)."""
    from ..inference import fit_em_multiclass, multiclass_em_estimator
    from ..propagate.nc_ece import posterior_classwise_nc_ece, posterior_top_label_nc_ece
    from ..reference.calibration import classwise_nc_ece, top_label_nc_ece
    from ..reference.nc_ece_bootstrap import bootstrap_multiclass_nc_ece

    if groups is None:
        fit = fit_em_multiclass(data, model="pooled")
        detail = (f"EM (partially pooled Dawid-Skene: each of the {data.n_annotators} annotators' confusion rows "
                  "shrunk towards a population learned from the crowd)")
        # The NC-ECE's refits keep the full fit's population: refitted on resampled items it loses concentration, and
        # the few-label annotators' rows then scatter several times wider than their posterior and shift, which the
        # interval's bias correction reads as bias. The confusion intervals come from refits with the population
        # refitted: those with it fixed covered the true entries far less often (docs/coverage.md, *Sparse K-class
        # crowds on the EM route*). So do the clean-label metrics' replicates (the population's error is much of a
        # per-class metric's), moved to the full fit's estimate: those refits' channels put the accuracy 0.036 too
        # low (docs/metrics.md, *The crowd's metrics: centred on the full fit*).
        refit = multiclass_em_estimator(model="pooled", population=fit.prior[0])
        refit_free = multiclass_em_estimator(model="pooled")
    else:
        fit = fit_em_multiclass(data, model="grouped", groups=groups, n_starts=N_STARTS_K, seed=s.seed, path=path)
        detail = f"EM (grouped model, {fit.n_groups} score groups, {N_STARTS_K + 1} starts)"
        # Replicates are refitted from the full-sample fit (warm start), with their items' gold labels; their groups
        # are the same recipe (predicted class x confidence quantile) applied to the replicate's items.
        refit = multiclass_em_estimator(model="grouped", n_quantiles=s.groups, n_starts=N_STARTS_K, seed=s.seed,
                                        path=path)
    probs, resp = data.probs, data.responses
    usable = np.asarray(fit.usable_annotators(), dtype=bool)
    top = top_label_nc_ece(probs, resp, fit.confusion, bins=s.bins, weights=s.weights)
    cw = classwise_nc_ece(probs, resp, fit.confusion, bins=s.bins, weights=s.weights)
    out = dict(fit=fit, confusion=np.asarray(fit.confusion), prevalence=np.asarray(fit.prevalence), usable=usable,
               top=top, cw=cw, lower=None, upper=None, top_iv=None, cw_iv=None, band=None, draws=None, notes=[],
               diagnostics={"converged": bool(fit.converged), "n_iter": int(fit.n_iter),
                            "log_likelihood": float(fit.log_likelihood)})
    if s.n_boot == 0:
        out["notes"].append("no interval: n_boot = 0 (--n-boot 0).")
        out["detail"] = detail
        return out
    if groups is not None:
        refit_free = None
    refits, counts, refit_prev, free = [], [], [], []
    # The bootstrap draws its replicates' rows from default_rng(seed), one `integers(0, n, n)` per replicate; the
    # same stream here, matched on the replicate's probabilities (a failed refit skips one), gives each refit's item
    # multiplicities for the class-wise joint draws.
    n, probs64 = int(data.n_items), np.asarray(probs, dtype=np.float64)
    rows_stream = np.random.default_rng(s.seed)

    def estimator(r, n_rep, p, *, init=None, gold=None):
        if init is None:  # the bootstrap's full-sample call: the fit above (no second full fit)
            return np.asarray(fit.confusion), np.asarray(fit.prevalence)
        conf, prev = refit(r, n_rep, p, init=init, gold=gold)
        conf_free, prev_free = (conf, prev) if refit_free is None else refit_free(r, n_rep, p, init=init, gold=gold)
        for _ in range(s.n_boot):
            rows = rows_stream.integers(0, n, size=n)
            if np.array_equal(probs64[rows], p):
                break
        else:  # never: the stream is the bootstrap's own
            raise RuntimeError("evaluate_multiclass: could not match a bootstrap replicate to its rows; please report.")
        refits.append(np.asarray(conf))
        free.append(np.asarray(conf_free))
        refit_prev.append(np.asarray(prev_free))  # with the refits: the clean-label metrics' draws
        mult = np.bincount(rows, minlength=n)
        counts.append(mult.astype(np.uint16) if mult.max() <= np.iinfo(np.uint16).max else mult)  # small ints
        return conf, prev

    boot = bootstrap_multiclass_nc_ece(probs, resp, estimator=estimator, n_boot=s.n_boot, level=s.level, bins=s.bins,
                                       weights=s.weights, seed=s.seed, progress_bar=s.progress_bar, gold=data.gold)
    out["diagnostics"]["n_boot_failed"] = int(boot.top_label.n_failed)
    if len(refits) < 2:
        out["notes"].append(f"no interval: {len(refits)} of {s.n_boot} bootstrap refits succeeded.")
        out["detail"] = detail
        return out
    reps = np.stack(refits)
    out["refits"] = (np.stack(free), np.stack(refit_prev))
    out["refit_counts"] = np.stack(counts)  # refit s's item multiplicities: the metrics' joint draws
    if refit_free is not None:  # the metrics' replicates moved to the full fit's estimate (multiclass_metrics_of)
        out["metrics_centre"] = "fit"
    out["lower"], out["upper"] = _intervals(out["refits"][0], s.level)
    # The intervals: the refitted confusions propagated as the binary EM route propagates its bootstrap replicates
    # (debiased, bias-corrected bin centres), as joint draws (each refit with its own replicate's item
    # multiplicities) read at the calibrated level, top-label and class-wise mean; per class: fresh Bayesian
    # bootstrap weights. Measured in benchmarks/coverage_multiclass.py (--sweep, --route cli-em; docs/coverage.md).
    mult = np.stack(counts)
    # The refits scatter around the full-sample fit: the bias correction is centred there (point_confusion).
    top_iv = posterior_top_label_nc_ece(probs, resp, reps, bins=s.bins, weights=s.weights, level=s.level,
                                        seed=s.seed, usable=usable, item_weights=mult, calibrate=True,
                                        point_confusion=out["confusion"])
    cw_iv = posterior_classwise_nc_ece(probs, resp, reps, bins=s.bins, weights=s.weights, level=s.level,
                                       seed=s.seed, usable=usable, item_weights=mult, point_confusion=out["confusion"])
    refits_text = f"the EM refitted on {reps.shape[0]} item-bootstrap replicates"
    out.update(varying_top=f"{refits_text}, each with its replicate's items (joint draws)",
               varying_cw=f"{refits_text}, each with its replicate's items (joint draws; per class: fresh Bayesian "
                          "bootstrap weights)")
    out.update(top_iv=top_iv, cw_iv=cw_iv, band=top_iv.table, confusion_draws=reps, prevalence_draws=out["prevalence"],
               draws=np.asarray(top_iv.debiased_draws if top_iv.interval_method == "debiased" else top_iv.draws))
    out["detail"] = (f"{detail}; {100 * s.level:.0f}% intervals: {reps.shape[0]} item-bootstrap replicates with the "
                     "EM refitted on each, propagated to the NC-ECEs")
    return out


def _engine_nuts_k(data, s: Settings, groups, path: str = "auto"):
    """NUTS posterior of the confusion matrices, propagated to both NC-ECEs.

    ``groups`` None (a crowd, :func:`_pooled_crowd`): IBCC, the Bayesian Dawid-Skene with the pooled EM's population
    as every annotator's Dirichlet prior (``fit_nuts_multiclass(model="ibcc")``, docs/crowds.md)."""
    from ..inference import fit_nuts_multiclass
    from ..propagate.draws import usable_confusions_of
    from ..propagate.nc_ece import posterior_classwise_nc_ece, posterior_top_label_nc_ece
    from ..reference.calibration import classwise_nc_ece, top_label_nc_ece

    model = "ibcc" if groups is None else "grouped"
    post = fit_nuts_multiclass(data, model=model, groups=groups, n_chains=s.n_chains, n_warmup=s.n_warmup,
                               n_samples=s.n_draws, seed=s.seed, prior=s.prior, progress_bar=s.progress_bar,
                               path=path)
    draws = np.asarray(post.confusion)
    usable = usable_confusions_of(post)  # IBCC (pooled): its posterior mean; unpooled draws: their quantile rule
    probs, resp = data.probs, data.responses
    point = draws.mean(axis=0)
    top_pt = top_label_nc_ece(probs, resp, point, bins=s.bins, weights=s.weights)
    cw_pt = classwise_nc_ece(probs, resp, point, bins=s.bins, weights=s.weights)
    top = posterior_top_label_nc_ece(probs, resp, draws, bins=s.bins, weights=s.weights, level=s.level, seed=s.seed,
                                     usable=usable)
    cw = posterior_classwise_nc_ece(probs, resp, draws, bins=s.bins, weights=s.weights, level=s.level, seed=s.seed,
                                    usable=usable)
    lower, upper = _intervals(draws, s.level)
    d = post.diagnostics
    what = (f"IBCC: Bayesian Dawid-Skene, each of the {data.n_annotators} annotators' confusion rows drawn from the "
            "population of the partially pooled EM" if groups is None else
            f"grouped model, {int(np.asarray(post.prevalence).shape[1])} score groups")
    detail = f"NUTS ({what}, {post.n_chains} chains x {post.n_draws} draws); {100 * s.level:.0f}% posterior intervals"
    return dict(fit=post, confusion=point, prevalence=np.asarray(post.prevalence).mean(axis=0), usable=usable,
                top=top_pt, cw=cw_pt, lower=lower, upper=upper, top_iv=top, cw_iv=cw, band=top.table,
                confusion_draws=draws, prevalence_draws=np.asarray(post.prevalence),
                draws=np.asarray(top.debiased_draws if top.interval_method == "debiased" else top.draws), notes=[],
                detail=detail, diagnostics={k: d.get(k) for k in ("max_rhat", "min_ess_bulk", "min_ess_tail",
                                                                  "n_divergent", "frac_max_treedepth")})


def _pooled_crowd(data, s: Settings, groups, prior) -> bool:
    """A K-class crowd, with neither ``groups`` nor ``prior`` set: more than ``SPARSE_MIN_ANNOTATORS`` annotators.
    Its EM is the partially pooled Dawid-Skene, its NUTS route IBCC with that EM's population (no annotator's
    confusion matrix left near singular for having few labels; docs/crowds.md)."""
    return groups is None and prior is None and int(data.n_annotators) > SPARSE_MIN_ANNOTATORS


#: K-class channel engines by ``method`` name: ``(data, Settings, groups) -> dict``.
_K_ENGINES = {"em": _engine_em_k, "nuts": _engine_nuts_k}


def _top_summary(res, s: Settings):
    """NCECESummary of the top-label NC-ECE and its notes."""
    value = float(res["top"].value)
    iv = res["top_iv"]
    if iv is None:
        return NCECESummary(value, None, None, None, None, s.level, "none: no interval", "none"), []
    how = _interval_how(iv, res.get("varying_top", iv.uncertainty))
    summary, notes = _nc_ece_summary(value, iv, s, None, how)
    return summary, notes


def _classwise_summary(res, s: Settings, classes) -> ClasswiseSummary:
    cw, iv = res["cw"], res["cw_iv"]
    per = pd.DataFrame({"class": list(classes), "value": np.asarray(cw.per_class, dtype=np.float64),
                        "lower": np.nan, "upper": np.nan})
    if iv is None:
        return ClasswiseSummary(float(cw.value), None, None, None, s.level, "none: no interval", "none", per)
    t = iv.per_class_table
    one = t["interval_to_read"].to_numpy() == "upper_one_sided"
    per["lower"] = np.where(one, 0.0, t["lower"].to_numpy())
    per["upper"] = np.where(one, t["upper_one_sided"].to_numpy(), t["upper"].to_numpy())
    lo, hi = iv.reported_interval
    return ClasswiseSummary(float(cw.value), float(lo), float(hi), float(iv.upper_one_sided), s.level, iv.target,
                            _interval_how(iv, res.get("varying_cw", iv.uncertainty)), per,
                            debiased=float(iv.debiased), interval_to_read=iv.interval_to_read)


def _interval_how(iv, varying: str) -> str:
    """The interval's method line: how it was read (with the calibrated level when that widened the interval to
    read) and what varied across draws."""
    from ..propagate.result import _read_at

    return f"{iv.interval_method} equal-tailed interval{_read_at(iv)}; varying: {varying}"


def _reliability(res) -> pd.DataFrame:
    t = res["top"].table
    table = pd.DataFrame({"bin": t["bin"].to_numpy(), "lower": t["lower"].to_numpy(), "upper": t["upper"].to_numpy(),
                          "count": t["count"].to_numpy(), "mean_confidence": t["mean_score"].to_numpy(),
                          "corrected_accuracy": t["corrected_frequency"].to_numpy(),
                          "residual": t["residual"].to_numpy(), "band_lower": np.nan, "band_upper": np.nan})
    band = res["band"]
    if band is not None and len(band) == len(table):
        table["band_lower"] = band["frequency_lower"].to_numpy()
        table["band_upper"] = band["frequency_upper"].to_numpy()
    return table


def _naive(data, s: Settings, clean_labels):
    """Naive ECE table and per-bin accuracies of the naive targets (for the figure)."""
    from ..core import top_label_ece
    from ..reference.baselines import naive_multiclass_ece

    probs, k = data.probs, data.n_classes
    table = naive_multiclass_ece(probs, data.responses, bins=s.bins, annotator_ids=list(data.annotator_ids))
    votes = np.asarray(data.vote_distribution(), dtype=np.float64)
    labelled = votes.sum(axis=1) > 0
    eye = np.eye(k)
    mv = np.where(labelled[:, None], eye[np.argmax(votes, axis=1)], np.nan)  # ties to the lowest class index
    curves = {"majority vote": top_label_ece(probs, mv, bins=s.bins).table.mean_target,
              "vote distribution": top_label_ece(probs, np.where(labelled[:, None], votes, np.nan),
                                                 bins=s.bins).table.mean_target}
    if clean_labels is not None:
        from ..core import classwise_ece

        oracle = eye[clean_labels]
        table = pd.concat([table, pd.DataFrame([{
            "target": "clean labels (oracle)", "top_label_ece": top_label_ece(probs, oracle, bins=s.bins).value,
            "classwise_ece": classwise_ece(probs, oracle, bins=s.bins).value, "n_items": int(data.n_items)}])],
            ignore_index=True)
        curves["clean labels (oracle)"] = top_label_ece(probs, oracle, bins=s.bins).table.mean_target
    return table, {name: np.asarray(v, dtype=np.float64) for name, v in curves.items()}


def evaluate_multiclass(data, *, method: str = "em", bins: int = 15, groups=None, weights: str = "iv",
                        level: float = 0.9, seed: int = 0, n_boot: int = 200, n_chains: int = 2, n_warmup: int = 500,
                        n_draws: int = 500, prior=None, clean_labels=None, checks: bool = True,
                        progress_bar: bool = False, expand="auto", metrics: bool = True,
                        plan: int | None = None) -> MulticlassEvaluation:
    """K x K confusion matrices with intervals, top-label and class-wise NC-ECE with intervals, naive ECEs.

    Parameters
    ----------
    data : MulticlassAnnotationSet with probs
        Labels (item, annotator, class index) and the classifier's class probabilities of shape (n_items, K).
    method : {"em", "nuts"}, default "em"
        ``"em"``: :func:`~noisycal_bayes.inference.fit_em_multiclass` and an item bootstrap with the EM refitted
        per replicate (``n_boot`` replicates). ``"nuts"``: :func:`~noisycal_bayes.inference.fit_nuts_multiclass`
        and the posterior of both NC-ECEs (:mod:`noisycal_bayes.propagate.nc_ece`).
    bins : int, default 15
        Equal-width bins on the confidence (top-label) and on each class's probability (class-wise).
    groups : None or int, default None
        Score groups of the grouped model: predicted class x ``groups`` confidence quantiles
        (:func:`~noisycal_bayes.core.score_groups`); None means 2, except for a crowd (more than 12 annotators,
        ``prior`` None): there the EM fits the partially pooled Dawid-Skene (``fit_em_multiclass(model="pooled")``:
        every annotator's confusion rows shrunk towards a population learned from the crowd, one group), refitted on
        each bootstrap replicate (the NC-ECE's refits keep the full fit's population), and NUTS samples IBCC with that
        population (``fit_nuts_multiclass(model="ibcc")``).
        Set ``groups`` to keep the grouped model.
    weights : {"iv", "equal"}, default "iv"
        Per-coordinate annotator weights of the corrected targets.
    level : float, default 0.9
        Level of every interval.
    seed : int, default 0
        Seeds EM starts, bootstrap resampling, chains and the predictive check.
    n_boot : int, default 200
        Bootstrap replicates (EM route); 0 gives no interval (said in ``warnings``).
    n_chains, n_warmup, n_draws : int, default 2, 500, 500
        NUTS settings.
    prior : MulticlassPrior or None
        NUTS route only: the model's prior (None: the default, Dirichlet rows with 2 on the diagonal and 1
        elsewhere). With few labels per confusion row at large K the default's pseudo-counts pull the posterior
        towards uniform rows and bias the NC-ECE; the fit says so (:class:`~noisycal_bayes.warnings.PriorWarning`)
        and docs/multiclass.md gives the measured alternative ``MulticlassPrior(off_diagonal=1 / (K - 1))``.
    clean_labels : int array of shape (n_items,), optional
        True class indices (simulations): adds the oracle ECEs to the naive table.
    checks : bool, default True
        Run the predictive check of the channel model
        (:func:`~noisycal_bayes.diagnostics.checks.run_multiclass_checks`; EM: 199 refits).
    progress_bar : bool, default False
    expand : {"auto", True, False}, default "auto"
        Model expansion (:func:`~noisycal_bayes.evaluation.expansion.expand_models_k`): beside the shared confusion
        matrices, the matrices per confidence stratum (each annotator one per equal-mass confidence half), fitted by
        the same route, compared by PSIS-LOO and stacked; the headline follows the weights, the shared model's
        figure stays in ``nc_ece_shared``. ``"auto"``: when the predictive check warned. Not on a crowd's pooled
        fit.
    metrics : bool, default True
        Also estimate the clean-label metrics (top-1 accuracy, per-class and macro recall / precision / F1,
        one-vs-rest AUC, Brier, log loss) from the route's clean-label posterior, with intervals
        (:mod:`noisycal_bayes.evaluation.metrics`); stored in ``MulticlassEvaluation.metrics``.
    plan : int, optional
        Also plan where ``plan`` extra labels narrow the top-label NC-ECE interval most
        (:func:`noisycal_bayes.labels.plan_labels` on the route's fit), as :func:`~noisycal_bayes.evaluate` does;
        in ``MulticlassEvaluation.plan``. None or 0 (default): no plan, at no cost.

    Returns
    -------
    MulticlassEvaluation
        ``.summary()``, ``.to_json()``, ``.write_report(dir)``.

    Raises
    ------
    ValueError
        Data that is not a MulticlassAnnotationSet or has no probs; unknown method or weights; bad counts, level,
        groups or ``clean_labels``; a design that cannot identify K x K confusion matrices
        (:func:`~noisycal_bayes.data.check_multiclass_design`: one annotator, no item labelled twice, ...).

    Notes
    -----
    The corrected clean-label vector of a response ``a`` of annotator ``j`` is ``C_j^{-T} e_a`` (row ``a`` of
    ``C_j^{-1}``), unbiased for the one-hot clean label; top-label NC-ECE bins the confidence ``max_k p_ik`` and
    compares it with the predicted class's coordinate of the combined corrected vector (DESIGN §8). Warnings
    raised while fitting are recorded in ``warnings`` rather than emitted.

    Examples
    --------
    >>> from noisycal_bayes.data import MulticlassAnnotationSet
    >>> from noisycal_bayes.simulate import simulate_multiclass
    >>> sim = simulate_multiclass(300, 3, 3, seed=1)
    >>> data = MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=3, probs=sim.probs)
    >>> ev = evaluate_multiclass(data, n_boot=0, checks=False)
    >>> ev.n_classes, ev.nc_ece.lower is None
    (3, True)
    """
    from ..core import score_groups
    from ..data import check_multiclass_design

    s = _settings(data, "evaluate_multiclass", method=method, bins=bins, groups=groups, weights=weights, level=level,
                  seed=seed, n_boot=n_boot, n_starts=N_STARTS_K, n_chains=n_chains, n_warmup=n_warmup,
                  n_draws=n_draws, progress_bar=bool(progress_bar), checks=bool(checks), prior=prior, expand=expand)
    data.require_probs()
    from .metrics import check_plan

    plan = check_plan(plan, "evaluate_multiclass")
    clean_labels = _check_clean_labels(clean_labels, data)
    group_of = score_groups(data.probs, n_quantiles=s.groups)
    n_nonempty = int(np.unique(group_of).size)
    pooled = _pooled_crowd(data, s, groups, prior)
    with warnings.catch_warnings(record=True):  # its warnings become the error below
        warnings.simplefilter("always")
        problems = check_multiclass_design(data, "grouped", n_groups=n_nonempty, func="evaluate_multiclass")
    if problems:
        raise ValueError(" ".join(problems))
    caught: list = []
    with collect_warnings(caught):
        res = _K_ENGINES[s.method](data, s, None if pooled else group_of)
        naive, curves = _naive(data, s, clean_labels)
        top, notes = _top_summary(res, s)
        cw = _classwise_summary(res, s, data.classes)
        try:
            rows = run_multiclass_checks(data, res["fit"], method=s.method, seed=s.seed) if s.checks else ()
        except (ValueError, np.linalg.LinAlgError) as exc:
            rows = (check_row("not_testable", f"the check could not run: {_one_line(exc)}"),)
        expansion = (expand_models_k(data, s, res, None if pooled else group_of, _K_ENGINES[s.method])
                     if wants_expansion(s.expand, rows) else None)
    shared_top, draws = None, res["draws"]
    if expansion is not None:
        shared_top = top
        notes = notes + list(expansion.notes)
        if expansion.headline != "shared":
            top, mix_notes = _stacked_summary(expansion, top, s)
            notes = [n for n in notes if "one-sided" not in n] + mix_notes
            draws = expansion.draws
    fit = res["fit"]
    n_groups = int(np.asarray(fit.prevalence).shape[-2])
    clean, note = (None, None)
    if metrics:
        from .metrics import multiclass_metrics_of

        clean, note = multiclass_metrics_of(data, s, res)
    planned = (None, None)
    if plan:
        from .metrics import label_plan

        planned = label_plan(data, fit, s, plan)
    return MulticlassEvaluation(
        method=s.method, method_detail=res["detail"], n_items=int(data.n_items), n_annotators=int(data.n_annotators),
        n_classes=int(data.n_classes), classes=tuple(data.classes), annotator_ids=tuple(data.annotator_ids),
        confusion=np.asarray(res["confusion"]), confusion_lower=res["lower"], confusion_upper=res["upper"],
        prevalence=np.asarray(res["prevalence"]), nc_ece=top, classwise_nc_ece=cw, reliability=_reliability(res),
        naive=naive, naive_curves=curves, usable=np.asarray(res["usable"], dtype=bool),
        warnings=tuple(caught + list(res["notes"]) + notes), diagnostics=res["diagnostics"], checks=tuple(rows),
        draws=draws, level=s.level, bins=s.bins, weights=s.weights, seed=s.seed,
        groups=n_groups, n_groups=n_groups, fit=fit, data=data, clean_labels=clean_labels, expansion=expansion,
        nc_ece_shared=shared_top, metrics=clean, metrics_note=note, plan=planned[0], plan_note=planned[1])
