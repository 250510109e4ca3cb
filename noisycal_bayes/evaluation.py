"""The whole calibration job in one call: :func:`evaluate` -> :class:`Evaluation`.

``evaluate(data)`` estimates the annotators' channels, the noise-corrected ECE (NC-ECE) with an interval
for a named target, and the naive metrics (ECE against votes, SMECE against vote fractions); with
``recalibration=True`` it also compares recalibration maps on held-out items. The command line
(:mod:`noisycal_bayes.cli`) is argument parsing and printing around this function: ``Evaluation.summary()``
is the text ``noisycal-bayes evaluate`` prints, ``Evaluation.to_json()`` its ``--json`` file and
``Evaluation.write_report(dir)`` its ``--out`` folder (the renderers live in :mod:`noisycal_bayes.report`).

Two routes, one propagation:

=========  ===========================================================  =================================
method     channels                                                     NC-ECE interval
=========  ===========================================================  =================================
``nuts``   ``fit_nuts`` (posterior; point channel = posterior mean)      ``posterior_nc_ece(data, fit)``
``em``     ``fit_em`` (MLE) + ``bootstrap_em`` (Bayesian bootstrap      ``posterior_nc_ece(data, boot)``
           around EM; ``n_boot`` replicates as draws)
=========  ===========================================================  =================================

The fields mean the same on both routes: ``nc_ece.value`` is the paper's NC-ECE
(:func:`noisycal_bayes.nc_ece` at the point channel), ``nc_ece.debiased`` the bias-corrected estimate of
:func:`noisycal_bayes.propagate.posterior_nc_ece`, around which its (default) interval is built; channel
intervals are equal-tailed quantiles of the draws (posterior draws or bootstrap replicates).
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

__all__ = ["ENGINES", "METHODS", "Evaluation", "NCECESummary", "RecalibrationRow", "Settings",
           "compare_recalibration", "evaluate"]

METHODS = ("nuts", "em")
MAPS = {"temperature": "TemperatureScaling", "platt": "PlattScaling", "histogram": "ProjectedHistogram"}


def _one_line(text) -> str:
    return " ".join(str(text).split())


# ============================================================================================ results
@dataclass(frozen=True)
class NCECESummary:
    """The calibration error of one evaluation: the numbers, the interval and what it is for.

    Attributes
    ----------
    value : float
        The paper's NC-ECE (plug-in estimate, paper §3): ``noisycal_bayes.nc_ece(data, channel).value`` at
        the point channel (EM estimate, or posterior-mean channel for NUTS). Same meaning on every route.
    debiased : float or None
        Bias-corrected estimate of ``posterior_nc_ece`` (per-bin moment matching); None without draws.
    lower, upper : float or None
        The interval to read at ``level``: two-sided, or ``[0, upper_bound]`` when the one-sided reading
        applies (``interval_to_read == "upper_one_sided"``). None when there is no interval.
    upper_bound : float or None
        One-sided ``level`` upper bound.
    level : float
    target : str
        The quantity the interval is for (DESIGN §2).
    interval_method : str
        How the interval was made (``"none"`` without one).
    interval_to_read : {"two_sided", "upper_one_sided"} or None
    calibration_p_value : float or None
        How often a perfectly calibrated model with this much noise would give an error this large.
    centre : str or None
        The number the interval is built around: ``"debiased"`` or ``"posterior median"``.
    """

    value: float
    debiased: float | None
    lower: float | None
    upper: float | None
    upper_bound: float | None
    level: float
    target: str
    interval_method: str = "none"
    interval_to_read: str | None = None
    calibration_p_value: float | None = None
    centre: str | None = None


@dataclass(frozen=True)
class RecalibrationRow:
    """One recalibration map evaluated on held-out items.

    ``fitted_to`` says which labels fitted it (``"noisy labels, corrected"``, ``"majority vote"``,
    ``"vote fraction"``, or ``"-"`` for the raw scores); ``params`` the fitted parameters as text;
    ``nc_ece`` the noise-corrected ECE on the held-out items; ``oracle_ece`` the ECE against the clean
    labels (simulations only, else None).
    """

    map_name: str
    fitted_to: str
    params: str
    nc_ece: float
    oracle_ece: float | None = None


_DEPRECATED = {"nc_ece_lower": "lower", "nc_ece_upper": "upper", "nc_ece_upper_bound": "upper_bound",
               "target": "target", "interval_method": "interval_method"}


@dataclass(frozen=True)
class Evaluation:
    """What one calibration evaluation found, and how it was made (returned by :func:`evaluate`).

    Attributes
    ----------
    method : {"nuts", "em"}
    method_detail : str
        One line saying how the channels and the intervals were obtained.
    n_items, n_annotators : int
    channel : Channel
        Point estimate: EM estimate, or posterior mean (NUTS).
    channel_intervals : dict or None
        ``{"fpr": (lower, upper), "tpr": ..., "gap": ...}``, arrays of shape (n_annotators,): equal-tailed
        ``level`` quantiles of the draws (None without draws).
    prevalence : ndarray of shape (n_groups,)
        ``P(Y = 1)`` per score group (EM estimate or posterior mean).
    nc_ece : NCECESummary
        ``.value`` (paper's NC-ECE), ``.debiased``, ``.lower``, ``.upper``, ``.upper_bound``, ``.target``...
    table : DataFrame
        Per evaluation bin: ``bin, lower, upper, count, mean_score, corrected_frequency, residual,
        band_lower, band_upper`` (bands NaN without draws).
    edges : ndarray of shape (n_bins + 1,)
    naive : NaiveCalibrationResult
        ECE against majority vote and each annotator, SMECE against vote fractions (and the oracle ECE
        ``clean_ece`` when clean labels were given).
    diagnostics : dict
        ``rhat_max, ess_min, divergences`` (None for EM).
    warnings : tuple of str
        Warnings raised while fitting and notes (e.g. why there is no interval), one line each.
    draws : ndarray of shape (n_draws,) or None
        The NC-ECE draws the interval is read from (for the histogram figure).
    draws_label : str
    level : float
    bins, groups, weights, seed : the settings used (``groups``: the number the channel model used)
    recalibration : tuple of RecalibrationRow or None
        Held-out comparison of recalibration maps (``evaluate(..., recalibration=True)``).
    data, clean_labels : the evaluated AnnotationSet and optional clean labels (kept for the report).
    """

    method: str
    method_detail: str
    n_items: int
    n_annotators: int
    channel: object
    channel_intervals: dict | None
    prevalence: np.ndarray
    nc_ece: NCECESummary
    table: pd.DataFrame = field(repr=False)
    edges: np.ndarray = field(repr=False)
    naive: object = field(repr=False)
    diagnostics: dict = field(default_factory=dict)
    warnings: tuple = ()
    draws: np.ndarray | None = field(default=None, repr=False)
    draws_label: str = "bootstrap"
    level: float = 0.9
    bins: int = 10
    groups: int = 5
    weights: str = "iv"
    seed: int = 0
    recalibration: tuple | None = field(default=None, repr=False)
    data: object = field(default=None, repr=False, compare=False)
    clean_labels: np.ndarray | None = field(default=None, repr=False, compare=False)

    def __getattr__(self, name):
        # Flat names of the former ``noisycal_bayes.report.Evaluation`` (now under ``nc_ece``).
        if name in _DEPRECATED:
            warnings.warn(f"Evaluation.{name} is deprecated; use Evaluation.nc_ece.{_DEPRECATED[name]}.",
                          DeprecationWarning, stacklevel=2)
            return getattr(self.nc_ece, _DEPRECATED[name])
        raise AttributeError(f"'Evaluation' object has no attribute {name!r}")

    def summary(self, *, title: str | None = None, truth=None, comparison=None) -> str:
        """The plain-text summary the command line prints (``truth``: dict with the true ``channel``)."""
        from .report import format_summary

        return format_summary(self, truth=truth, title=title, comparison=comparison)

    def to_dict(self) -> dict:
        """The JSON object (strict JSON types; NaN as None); keys in ``docs/cli.md``."""
        from .report import evaluation_to_dict

        return evaluation_to_dict(self)

    def to_json(self) -> str:
        """The JSON text ``noisycal-bayes evaluate --json`` writes."""
        from .report import json_text

        return json_text(self.to_dict())

    def write_report(self, out_dir, *, truth=None, title: str = "Calibration report", source: str | None = None,
                     comparison=None):
        """Write the report folder (PNG figures, ``summary.md``, ``results.json``); returns the paths.

        See :func:`noisycal_bayes.report.write_report`. The evaluated data (and clean labels, if given to
        :func:`evaluate`) are used for the naive curves, the oracle curve and the gap sweep.
        """
        from .report import write_report

        if truth is None and self.clean_labels is not None:
            truth = {"clean_labels": self.clean_labels}
        return write_report(out_dir, self, data=self.data, truth=truth, title=title, source=source,
                            comparison=comparison)

    def _repr_html_(self) -> str:
        from .report import evaluation_html

        return evaluation_html(self)


# ============================================================================================ settings
@dataclass(frozen=True)
class Settings:
    """The validated options of one :func:`evaluate` call (what each channel engine receives)."""

    method: str = "nuts"
    bins: int = 10
    groups: int = 5
    weights: str = "iv"
    level: float = 0.9
    seed: int = 0
    n_boot: int = 200
    n_starts: int = 10
    n_chains: int = 4
    n_warmup: int = 1000
    n_draws: int = 1000
    progress_bar: bool = False


def _settings(data, **kw) -> Settings:
    from ._validation import check_level, check_positive_int, check_weights
    from .data import AnnotationSet

    if not isinstance(data, AnnotationSet):
        raise ValueError(f"evaluate: `data` must be an AnnotationSet; got {type(data).__name__}.")
    if kw["method"] not in ENGINES:
        raise ValueError(f"evaluate: unknown method {kw['method']!r}; choose from {sorted(ENGINES)}.")
    for name in ("bins", "groups", "n_starts", "n_chains", "n_warmup", "n_draws"):
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


def _model_for(s: Settings):
    """Model and groups the propagation's default route needs: ``(model, groups, description)``."""
    from .data import Binning
    from .propagate import DEFAULT_METHOD

    if DEFAULT_METHOD == "plugin":
        return "grouped", s.groups, f"{s.groups} score groups"
    return "histogram", Binning.equal_width(s.bins), f"the {s.bins} evaluation bins"


def _require_identified(fit, who: str):
    if fit.channel is None or not fit.identified:
        raise ValueError(f"{who} could not estimate the annotators' channels: "
                         f"{_one_line(fit.reason or 'not identified')}")


def _propagate(data, fit, s: Settings):
    from .data import Binning
    from .propagate import posterior_nc_ece

    return posterior_nc_ece(data, fit, bins=Binning.equal_width(s.bins), weights=s.weights, level=s.level,
                            seed=s.seed)


def _engine_em(data, s: Settings) -> EngineResult:
    """EM (``fit_em``) and a Bayesian bootstrap around it (``bootstrap_em``), propagated like NUTS draws."""
    from .inference import fit_em

    model, groups, how = _model_for(s)
    fit = fit_em(data, model=model, groups=groups, n_starts=s.n_starts, seed=s.seed)
    _require_identified(fit, "EM")
    detail = f"EM, {fit.groups.n_groups} score groups, {s.n_starts} starts"
    if s.n_boot == 0:
        return EngineResult(fit, None, None, detail, "none", ["no interval: --n-boot 0."])
    from .inference.bootstrap import bootstrap_em

    boot = bootstrap_em(data, fit, n_boot=s.n_boot, seed=s.seed, progress_bar=s.progress_bar)
    post = _propagate(data, boot, s)
    detail += f"; {100 * s.level:.0f}% intervals from {s.n_boot} Bayesian-bootstrap replicates"
    how_iv = (f"{post.interval_method} equal-tailed interval over {s.n_boot} Bayesian-bootstrap replicates "
              f"(EM re-fitted in each); varying: {post.uncertainty}")
    return EngineResult(fit, post, boot, detail, how_iv, [])


def _engine_nuts(data, s: Settings) -> EngineResult:
    """Bayesian channels by NUTS (``fit_nuts``), and the posterior of the calibration error by propagation.

    The propagation route is the Bayesian layer's default (:data:`noisycal_bayes.propagate.DEFAULT_METHOD`):
    ``"plugin"`` fits the paper's score-grouped model with ``groups`` groups; ``"latent"`` / ``"model"``
    fit the histogram model on the evaluation bins, as they require.
    """
    from .inference import fit_nuts

    model, groups, how = _model_for(s)
    fit = fit_nuts(data, model=model, groups=groups, n_chains=s.n_chains, n_warmup=s.n_warmup,
                   n_draws=s.n_draws, seed=s.seed, progress_bar=s.progress_bar)
    _require_identified(fit, "NUTS")
    post = _propagate(data, fit, s)
    detail = (f"NUTS, {model} model on {how}, {fit.n_chains} chains x {fit.n_draws} draws; "
              f"{100 * s.level:.0f}% posterior intervals")
    return EngineResult(fit, post, fit, detail,
                        f"{post.interval_method} equal-tailed interval; varying: {post.uncertainty}", [])


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
    rhats = [float(np.nanmax(np.asarray(v))) for v in rhat.values() if np.size(v)]
    ess = [float(np.nanmin(np.asarray(v))) for v in list(ess_b.values()) + list(ess_t.values()) if np.size(v)]
    return {"rhat_max": max(rhats, default=None), "ess_min": min(ess, default=None),
            "divergences": int(fit.n_divergent)}


def _nc_ece_summary(value: float, post, s: Settings, target: str, interval_method: str):
    """The :class:`NCECESummary` and the notes it needs (one-sided reading, undercoverage)."""
    if post is None:
        return NCECESummary(value, None, None, None, None, s.level, target, "none"), []
    debiased = getattr(post, "debiased", None)
    debiased = float(post.estimate if debiased is None else debiased)
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


# ============================================================================================ evaluate
def evaluate(data, *, method: str = "nuts", bins: int = 10, groups: int = 5, weights: str = "iv",
             level: float = 0.9, seed: int = 0, n_boot: int = 200, n_starts: int = 10, n_chains: int = 4,
             n_warmup: int = 1000, n_draws: int = 1000, clean_labels=None, recalibration: bool = False,
             progress_bar: bool = False) -> Evaluation:
    """Channels with intervals, NC-ECE with an interval for a named target, and the naive metrics.

    Parameters
    ----------
    data : AnnotationSet with scores
        Labels of shape (n_items, n_annotators) and the classifier's scores of shape (n_items,).
    method : {"nuts", "em"}, default "nuts"
        ``"nuts"``: ``fit_nuts`` and the posterior of the calibration error. ``"em"``: ``fit_em`` and a
        Bayesian bootstrap around it (``bootstrap_em``, ``n_boot`` replicates), propagated the same way.
    bins : int, default 10
        Equal-width evaluation bins.
    groups : int, default 5
        Score groups identifying the channels (see :func:`noisycal_bayes.fit_em`).
    weights : {"iv", "equal", "gap", "squared_gap"}, default "iv"
        Annotator weights of the corrected labels.
    level : float, default 0.9
        Level of every interval.
    seed : int, default 0
        Seeds EM starts, bootstrap weights, chains and the held-out split.
    n_boot : int, default 200
        Bootstrap replicates (EM route); 0 gives no interval (said in ``warnings``).
    n_starts : int, default 10
        EM starts.
    n_chains, n_warmup, n_draws : int, default 4, 1000, 1000
        NUTS settings.
    clean_labels : array of shape (n_items,), optional
        True labels (simulations): adds the oracle ECE to the naive metrics and the recalibration table.
    recalibration : bool, default False
        Also compare temperature, Platt and histogram maps fitted on half the items (to corrected labels,
        majority vote and vote fractions) and judged on the other half (:func:`compare_recalibration`);
        stored in ``Evaluation.recalibration``.
    progress_bar : bool, default False

    Returns
    -------
    Evaluation
        ``.summary()``, ``.to_json()``, ``.write_report(dir)``; ``.nc_ece.value`` is the paper's NC-ECE at
        the point channel, ``.nc_ece.debiased`` the bias-corrected estimate the interval is built around.

    Raises
    ------
    ValueError
        Unknown method or weights; bad counts or level; data without scores; channels that could not be
        estimated (the reason is in the message); recalibration with an annotator missing from a half.

    Notes
    -----
    Warnings raised while fitting are recorded in ``Evaluation.warnings`` (and shown by ``summary()``)
    rather than emitted. Near a perfectly calibrated model (``nc_ece.interval_to_read ==
    "upper_one_sided"``) the interval is ``[0, upper_bound]`` and a note says why: two-sided intervals
    undercover there (docs/coverage.md).

    Examples
    --------
    >>> from noisycal_bayes import simulate_annotations
    >>> sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.85], seed=1)
    >>> ev = evaluate(sim.data, method="em", n_boot=0, bins=5, groups=3)
    >>> ev.nc_ece.lower is None, ev.warnings[-1]
    (True, 'no interval: --n-boot 0.')
    """
    from .data import Binning
    from .reference.baselines import naive_calibration
    from .reference.calibration import nc_ece

    s = _settings(data, method=method, bins=bins, groups=groups, weights=weights, level=level, seed=seed,
                  n_boot=n_boot, n_starts=n_starts, n_chains=n_chains, n_warmup=n_warmup, n_draws=n_draws,
                  progress_bar=bool(progress_bar))
    data.require_scores()
    caught: list = []
    with collect_warnings(caught):
        res = ENGINES[s.method](data, s)
        est = nc_ece(data, res.fit.channel, bins=Binning.equal_width(s.bins), weights=s.weights)
        naive = naive_calibration(data, bins=s.bins, clean_labels=clean_labels)
        recal = None if not recalibration else tuple(compare_recalibration(data, s, clean_labels=clean_labels))
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
        data=data, clean_labels=None if clean_labels is None else np.asarray(clean_labels))


# ============================================================================================ recalibration
def _map_classes():
    from .recalibration import maps

    return {name: getattr(maps, cls) for name, cls in MAPS.items()}


def describe_map(m) -> str:
    """The fitted parameters of a recalibration map, as one short line."""
    if hasattr(m, "temperature_"):
        return f"T = {m.temperature_:.3f}" + (" (boundary)" if m.on_boundary_ else "")
    if hasattr(m, "alpha_"):
        return f"alpha = {m.alpha_:.3f}, beta = {m.beta_:.3f}" + (" (boundary)" if m.on_boundary_ else "")
    if hasattr(m, "bin_values_"):
        return f"{len(m.bin_values_)} bins, {len(m.clipped_bins_)} clipped"
    return ""


def compare_recalibration(data, settings: Settings, *, clean_labels=None,
                          maps=("temperature", "platt", "histogram")) -> list:
    """Fit each map on one half of the items (corrected, and naive against votes); judge on the other half.

    Channels are fitted by EM (:func:`noisycal_bayes.fit_em`) on the fitting half; NC-ECE on the held-out
    half uses those channels (independent samples, paper §3 variant (i)). With ``clean_labels`` the
    oracle ECE is added. Reached through ``evaluate(..., recalibration=True)``.

    Returns
    -------
    list of RecalibrationRow
        The raw scores first, then each map fitted to each kind of label.
    """
    from .core import binned_abs_residual, x64
    from .data import as_binning, bin_index
    from .inference import fit_em
    from .reference.calibration import ece
    from .reference.recalibration import corrected_item_labels

    s = settings
    perm = np.random.default_rng(s.seed).permutation(data.n_items)
    fit_rows, test_rows = np.sort(perm[: data.n_items // 2]), np.sort(perm[data.n_items // 2:])
    fit_data, test_data = data.subset(fit_rows), data.subset(test_rows)
    if fit_data.n_annotators != data.n_annotators or test_data.n_annotators != data.n_annotators:
        raise ValueError("an annotator has no label in one half of the items; too few labels to compare "
                         "recalibration maps on held-out items.")
    ch = fit_em(fit_data, groups=s.groups, n_starts=s.n_starts, seed=s.seed)
    _require_identified(ch, "EM on the fitting half")
    y_test = None if clean_labels is None else np.asarray(clean_labels)[test_rows]
    z_fit, z_test = fit_data.scores, test_data.scores
    # The held-out items' corrected labels do not depend on the map, only their scores do: NC-ECE of a
    # recalibrated score vector is then sum_k |sum_{B_k} (Ytilde_i - z_i)| / n with Ytilde fixed.
    y_corr = corrected_item_labels(test_data, ch.channel, weights=s.weights).values
    edges = as_binning(s.bins).edges_for(z_test)

    def judge(name, fitted_to, params, z):
        with x64():
            nc = float(binned_abs_residual(bin_index(z, edges), y_corr - z, edges.size - 1))
        orc = None if y_test is None else ece(z, y_test, bins=s.bins)
        return RecalibrationRow(name, fitted_to, params, nc, orc)

    rows = [judge("none", "-", "raw scores", z_test)]
    targets = [("noisy labels, corrected", fit_data, {"channel": ch.channel, "weights": s.weights}),
               ("majority vote", fit_data.majority_vote(), {}), ("vote fraction", fit_data.vote_fraction(), {})]
    classes = _map_classes()
    for name in maps:
        for fitted_to, y, kw in targets:
            m = classes[name](bins=s.bins) if name == "histogram" else classes[name]()
            m.fit(z_fit, y, **kw)
            rows.append(judge(name, fitted_to, describe_map(m), m.predict(z_test)))
    return rows
