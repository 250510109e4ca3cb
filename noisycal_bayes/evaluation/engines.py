"""Channel engines of :func:`noisycal_bayes.evaluate` and the pieces that turn a fit into an Evaluation.

Each engine is a function ``(data, Settings) -> EngineResult`` registered in :data:`ENGINES`: ``"em"``
(``fit_em`` -> ``bootstrap_em``) and ``"nuts"`` (``fit_nuts``); both hand their draws to
``posterior_nc_ece`` (one propagation for both routes).
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..data.binning import DEFAULT_GROUPS
from .result import Evaluation, NCECESummary
from .._validation import one_line as _one_line

__all__ = ["ENGINES", "METHODS", "EngineResult", "Settings", "collect_warnings"]

METHODS = ("nuts", "em")



@dataclass(frozen=True)
class Settings:
    """The validated options of one :func:`evaluate` call (what each channel engine receives)."""

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


def _settings(data, **kw) -> Settings:
    from .._validation import check_level, check_positive_int, check_weights
    from ..data import AnnotationSet

    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"evaluate: `data` must be an AnnotationSet; got {type(data).__name__}.")
    if kw["method"] not in ENGINES:
        raise ValueError(f"evaluate: unknown method {kw['method']!r}; choose from {sorted(ENGINES)}.")
    kw["groups"] = _check_groups(kw["groups"])
    for name in ("bins", "n_starts", "n_chains", "n_warmup", "n_draws"):
        kw[name] = check_positive_int(kw[name], name=name)
    kw["n_boot"] = check_positive_int(kw["n_boot"], name="n_boot", minimum=0)
    kw["seed"] = check_positive_int(kw["seed"], name="seed", minimum=0)
    kw["level"] = check_level(kw["level"])
    if not isinstance(kw["weights"], str):
        raise ValueError(f"evaluate: `weights` must be a rule name; got {kw['weights']!r}.")
    check_weights(kw["weights"], data.n_annotators)
    return Settings(**kw)


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


#: Replicates of the model checks (199: with alpha = 0.05 a check warns at exactly 5% under the model).
N_CHECK_REPLICATES = 199


def run_checks(data, fit, s: Settings):
    """Predictive checks of the fitted channel model (:func:`noisycal_bayes.diagnostics.model_checks`: parametric
    bootstrap for EM, posterior predictive for NUTS): ``(rows, checks)`` with JSON-ready rows ``{name, status,
    statistic, p_value, detail}`` and the :class:`~noisycal_bayes.diagnostics.ModelChecks` (None when the
    checks do not cover the design: then one ``not_testable`` row says why)."""
    from ..diagnostics import model_checks

    try:
        checks = model_checks(data, fit, n_replicates=N_CHECK_REPLICATES, seed=s.seed, progress_bar=s.progress_bar)
    except ValueError as exc:
        return ({"name": "posterior_predictive", "status": "not_testable", "statistic": None, "p_value": None,
                 "detail": f"the checks do not apply here: {_one_line(exc)}"},), None
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
    q = [(1 - level) / 2, (1 + level) / 2]
    d = draws_fit.draws
    out = {}
    for name in ("fpr", "tpr", "gap"):
        x = np.asarray(d[name]) if name in d else np.asarray(d["tpr"]) - np.asarray(d["fpr"])
        lo, hi = np.quantile(x.reshape(-1, n_annotators), q, axis=0)
        out[name] = (lo, hi)
    return out


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


def assemble(data, s: Settings, res: EngineResult, est, naive, recal, caught: list, clean_labels,
             checks=((), None)) -> Evaluation:
    """The :class:`Evaluation` of one run: an engine's result, the point NC-ECE ``est`` (reference
    ``nc_ece`` at the point channel), the naive metrics, the recalibration rows and the caught warnings."""
    summary, notes = _nc_ece_summary(float(est.value), res.post, s, est.target if res.post is None else None,
                                     res.interval_method)
    post = res.post
    draws = None
    if post is not None:
        draws = post.debiased_draws if post.interval_method == "debiased" else post.draws
    label = "bootstrap" if s.method == "em" else "posterior"
    if post is not None and post.interval_method == "debiased":
        label += " (bias-corrected)"
    return Evaluation(
        method=s.method, method_detail=res.detail, n_items=data.n_items, n_annotators=data.n_annotators,
        channel=res.fit.channel, channel_intervals=_channel_intervals(res.draws_fit, s.level, data.n_annotators),
        prevalence=np.asarray(res.fit.prevalence), nc_ece=summary, table=_table(est, post),
        edges=np.asarray(est.edges), naive=naive, diagnostics=_mcmc_diagnostics(res.fit),
        warnings=tuple(caught + list(res.notes) + notes), draws=draws, draws_label=label, level=s.level,
        bins=s.bins, groups=int(res.fit.groups.n_groups), weights=s.weights, seed=s.seed, recalibration=recal,
        data=data, clean_labels=None if clean_labels is None else np.asarray(clean_labels), checks=tuple(checks[0]),
        model_checks=checks[1], fit=res.fit)
