"""The ``noisycal-bayes`` command line: demo, evaluate, recalibrate, apply.

    noisycal-bayes demo [--out DIR]
    noisycal-bayes evaluate ANNOTATIONS.csv --scores SCORES.csv [--bins 10] [--groups 5]
                            [--method nuts|em] [--seed 0] [--out DIR] [--json FILE]
    noisycal-bayes recalibrate ANNOTATIONS.csv --scores SCORES.csv --map temperature|platt|histogram
                            --save MAP.json
    noisycal-bayes apply MAP.json SCORES.csv [--out FILE]

Every problem with the input (a bad file, a bad option, data that do not identify the channels) ends
with a single ``error: ...`` line on stderr and exit code 2, never a traceback; output files are
written to a temporary name and renamed only when complete. ``main(argv)`` returns the exit code, so
the whole command line can be driven from Python (and from tests).

Channel engines plug in through :data:`ENGINES`: each is a function ``(data, options) -> EngineResult``.
``em`` (the reference EM with a bootstrap interval) is always available; ``nuts`` needs the Bayesian
layer (:mod:`noisycal_bayes.inference` and :mod:`noisycal_bayes.propagate`).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["ENGINES", "EngineResult", "Options", "build_parser", "evaluate_data", "main"]

EXIT_OK, EXIT_ERROR, EXIT_INTERNAL = 0, 2, 1
DEFAULT_REPORT_DIR = "noisycal_report"
MAP_FORMAT = "noisycal_bayes.recalibration_map"
MAP_NAMES = {"temperature": "TemperatureScaling", "platt": "PlattScaling", "histogram": "ProjectedHistogram"}


class CommandError(Exception):
    """A problem the user can fix; printed as one ``error:`` line, exit code 2."""


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting (so errors stay one line)."""

    def error(self, message):
        raise CommandError(f"{message} (see `{self.prog} --help`)")


def _one_line(text) -> str:
    return " ".join(str(text).split())


# ============================================================================================ options
@dataclass(frozen=True)
class Options:
    """Settings of one evaluation (the command-line options, validated)."""

    method: str = "em"
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
    progress: bool = False


class EngineResult(NamedTuple):
    """What a channel engine returns to :func:`evaluate_data`.

    channel : Channel (point estimate)
    channel_intervals : dict {"fpr"|"tpr"|"gap": (lower (J,), upper (J,))} or None
    prevalence : ndarray (n_groups,)
    value : float, the NC-ECE estimate
    table : DataFrame, one row per evaluation bin: bin, lower, upper, count, mean_score,
        corrected_frequency, residual
    edges : ndarray (n_bins + 1,)
    lower, upper, upper_bound : float or None (NC-ECE interval at ``options.level``)
    target, interval_method : str
    band_lower, band_upper : ndarray (n_bins,) or None (interval of each bin's corrected frequency)
    draws : ndarray or None (NC-ECE draws or replicates), draws_label : str
    diagnostics : dict (rhat_max, ess_min, divergences; None for EM)
    method_detail : str
    notes : list of str (extra warnings, e.g. why there is no interval)
    n_groups : int (groups the channel model used)
    """

    channel: object
    channel_intervals: dict | None
    prevalence: np.ndarray
    value: float
    table: object
    edges: np.ndarray
    lower: float | None
    upper: float | None
    upper_bound: float | None
    target: str
    interval_method: str
    band_lower: np.ndarray | None
    band_upper: np.ndarray | None
    draws: np.ndarray | None
    draws_label: str
    diagnostics: dict
    method_detail: str
    notes: list
    n_groups: int


def _progress(label: str, enabled: bool):
    """A callback ``tick(k, total)`` printing ``label k/total`` on one refreshed stderr line."""
    if not enabled:
        return lambda k, total: None

    def tick(k, total):
        end = "\n" if k >= total else ""
        print(f"\r{label} {k}/{total}", end=end, file=sys.stderr, flush=True)

    return tick


# ============================================================================================ engines
def _engine_em(data, opts: Options) -> EngineResult:
    """Reference EM (score-grouped Dawid-Skene) + percentile bootstrap with channels re-fitted per replicate."""
    from .data import bin_index, resolve_groups
    from .reference.calibration import nc_ece
    from .reference.em import fit_em
    from .reference.recalibration import corrected_item_labels

    fit = fit_em(data, groups=opts.groups, n_starts=opts.n_starts, seed=opts.seed)
    if fit.channel is None or not fit.identified:
        raise CommandError(f"EM could not estimate the annotators' channels: {_one_line(fit.reason or 'not identified')}")
    channel = fit.channel
    est = nc_ece(data, channel, bins=opts.bins, weights=opts.weights)
    detail = f"EM, {fit.n_groups} score groups, {opts.n_starts} starts"
    notes: list = []
    empty = dict(lower=None, upper=None, upper_bound=None, channel_intervals=None, band_lower=None,
                 band_upper=None, draws=None)
    if opts.n_boot == 0:
        notes.append("no interval: --n-boot 0.")
        return _em_result(fit, est, detail, notes, opts, **empty)
    try:
        from .reference.variants import bootstrap_nc_ece
    except ImportError:  # pragma: no cover - the reference layer ships with the package
        notes.append("no interval: the bootstrap (noisycal_bayes.reference.variants) is not available.")
        return _em_result(fit, est, detail, notes, opts, **empty)

    # Each replicate refits EM from the full-sample estimate (a warm start, as usual for bootstrapping
    # an MLE); the wrapper also records the replicate's channels and per-bin corrected frequencies,
    # which give channel intervals and reliability bands from the same replicates.
    n_bins = est.edges.size - 1
    warm = (channel.fpr[None], channel.tpr[None], fit.prevalence[None])
    channels, freqs = [], []
    tick = _progress("bootstrap", opts.progress)
    calls = [0]

    def estimator(rep):
        if rep is data:  # the bootstrap's full-sample fit: already done
            return fit
        calls[0] += 1
        tick(calls[0], opts.n_boot)
        same_groups = resolve_groups(rep.scores, opts.groups, rep.n_items)[1] == fit.n_groups
        r = fit_em(rep, groups=opts.groups, starts=warm if same_groups else None, n_starts=opts.n_starts,
                   seed=opts.seed)
        if r.channel is not None and r.identified:
            channels.append(np.stack([r.channel.fpr, r.channel.tpr, r.channel.gap]))
            # The bin means of the per-item corrected labels: this replicate's corrected reliability curve.
            y = corrected_item_labels(rep, r.channel, weights=opts.weights).values
            b = bin_index(rep.scores, est.edges)
            with np.errstate(invalid="ignore", divide="ignore"):
                freqs.append(np.bincount(b, weights=y, minlength=n_bins) / np.bincount(b, minlength=n_bins))
        return r

    boot = bootstrap_nc_ece(data, estimator=estimator, n_boot=opts.n_boot, level=opts.level, bins=opts.bins,
                            weights=opts.weights, seed=opts.seed)
    q = [(1 - opts.level) / 2, (1 + opts.level) / 2]
    ch = np.asarray(channels)                       # (n_ok, 3, J)
    iv = np.quantile(ch, q, axis=0)                 # (2, 3, J)
    intervals = {name: (iv[0, k], iv[1, k]) for k, name in enumerate(("fpr", "tpr", "gap"))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices for bins empty in every replicate
        band = np.nanquantile(np.asarray(freqs), q, axis=0)
    detail += f"; {100 * opts.level:.0f}% intervals from {boot.n_boot - boot.n_failed} bootstrap replicates"
    if boot.n_failed:
        notes.append(f"{boot.n_failed} of {boot.n_boot} bootstrap replicates failed: {boot.failure_reasons}.")
    return _em_result(fit, est, detail, notes, opts, lower=boot.interval[0], upper=boot.interval[1],
                      upper_bound=boot.upper_bound, channel_intervals=intervals, band_lower=band[0],
                      band_upper=band[1], draws=boot.replicates, target=boot.target,
                      interval_method=f"percentile bootstrap over items ({boot.n_boot - boot.n_failed} replicates, "
                                      "channels re-fitted by EM in each)")


def _em_result(fit, est, detail, notes, opts, *, lower, upper, upper_bound, channel_intervals, band_lower,
               band_upper, draws, target=None, interval_method="none") -> EngineResult:
    return EngineResult(
        channel=fit.channel, channel_intervals=channel_intervals, prevalence=np.asarray(fit.prevalence),
        value=float(est.value), table=est.table, edges=np.asarray(est.edges), lower=lower, upper=upper, upper_bound=upper_bound,
        target=target or est.target, interval_method=interval_method, band_lower=band_lower,
        band_upper=band_upper, draws=draws, draws_label="bootstrap",
        diagnostics={"rhat_max": None, "ess_min": None, "divergences": None}, method_detail=detail, notes=notes,
        n_groups=int(fit.n_groups))


def bayes_available() -> bool:
    """Whether the Bayesian layer (``fit_nuts`` and ``posterior_nc_ece``) can be imported."""
    try:
        _bayes_api()
    except CommandError:
        return False
    return True


def _bayes_api():
    try:
        from .inference import fit_nuts  # noqa: F401
        from .propagate import posterior_nc_ece  # noqa: F401
    except ImportError:
        raise CommandError("--method nuts needs the Bayesian layer (noisycal_bayes.inference.fit_nuts and "
                           "noisycal_bayes.propagate.posterior_nc_ece), which this installation does not have yet; "
                           "use --method em.") from None
    return fit_nuts, posterior_nc_ece


def _engine_nuts(data, opts: Options) -> EngineResult:
    """Bayesian channels by NUTS, and the posterior of the calibration error by propagation.

    The propagation route is the Bayesian layer's default (:data:`noisycal_bayes.propagate.DEFAULT_METHOD`):
    ``"plugin"`` (channel draws + Bayesian bootstrap; target: population binned ECE) fits the paper's
    score-grouped model with ``--groups`` groups; ``"latent"`` / ``"model"`` (targets: sample oracle /
    conditional binned ECE) fit the histogram model on the evaluation bins, as they require.
    """
    fit_nuts, posterior_nc_ece = _bayes_api()
    from .data import Binning
    from .propagate import DEFAULT_METHOD

    binning = Binning.equal_width(opts.bins)
    if DEFAULT_METHOD == "plugin":
        model, groups, how = "grouped", opts.groups, f"{opts.groups} score groups"
    else:
        model, groups, how = "histogram", binning, f"the {opts.bins} evaluation bins"
    fit = fit_nuts(data, model=model, groups=groups, n_chains=opts.n_chains, n_warmup=opts.n_warmup,
                   n_draws=opts.n_draws, seed=opts.seed, progress_bar=opts.progress)
    if fit.channel is None or not fit.identified:
        raise CommandError(f"NUTS could not estimate the annotators' channels: {_one_line(fit.reason or 'not identified')}")
    post = posterior_nc_ece(data, fit, bins=binning, weights=opts.weights, level=opts.level, seed=opts.seed)
    q = [(1 - opts.level) / 2, (1 + opts.level) / 2]
    intervals = {}
    for name in ("fpr", "tpr", "gap"):
        d = np.asarray(fit.draws[name]).reshape(-1, data.n_annotators)
        lo, hi = np.quantile(d, q, axis=0)
        intervals[name] = (lo, hi)
    # Per-annotator equal-tailed posterior intervals; the point channel is the posterior mean.
    rhat, ess_b, ess_t = fit.rhat or {}, fit.ess_bulk or {}, fit.ess_tail or {}
    finite = lambda vals: [float(np.nanmax(np.asarray(v))) for v in vals if np.size(v)]  # noqa: E731
    diag = {
        "rhat_max": max(finite(rhat.values()), default=None),
        "ess_min": min([float(np.nanmin(np.asarray(v))) for v in list(ess_b.values()) + list(ess_t.values())
                        if np.size(v)], default=None),
        "divergences": int(fit.n_divergent),
    }
    lower, upper = post.lower, post.upper
    notes = []
    if post.interval_to_read == "upper_one_sided":
        lower, upper = 0.0, post.upper_one_sided
        notes.append(f"the data cannot tell the calibration error from 0; the interval is the one-sided "
                     f"{100 * opts.level:.0f}% bound [0, {post.upper_one_sided:.3f}].")
    table = post.table.rename(columns={"frequency_lower": "band_lower", "frequency_upper": "band_upper"})
    detail = (f"NUTS, {model} model on {how}, {fit.n_chains} chains x {fit.n_draws} draws; "
              f"{100 * opts.level:.0f}% posterior intervals")
    return EngineResult(
        channel=fit.channel, channel_intervals=intervals,
        prevalence=np.asarray(fit.draws["prevalence"]).reshape(-1, *np.shape(fit.draws["prevalence"])[2:]).mean(axis=0),
        value=float(post.estimate), table=table, edges=np.asarray(post.edges), lower=lower, upper=upper,
        upper_bound=post.upper_one_sided, target=post.target,
        interval_method=f"{post.interval_method} equal-tailed interval; varying: {post.uncertainty}",
        band_lower=table["band_lower"].to_numpy(), band_upper=table["band_upper"].to_numpy(),
        # The histogram shows the distribution the interval is read from.
        draws=post.debiased_draws if post.interval_method == "debiased" else post.draws,
        draws_label="posterior" if post.interval_method != "debiased" else "posterior (bias-corrected)",
        diagnostics=diag, method_detail=detail, notes=notes, n_groups=int(fit.groups.n_groups))


#: Channel engines by ``--method`` name: ``(data, Options) -> EngineResult``.
ENGINES = {"em": _engine_em, "nuts": _engine_nuts}


# ============================================================================================ pipeline
@contextmanager
def _collect_warnings(sink: list):
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


def evaluate_data(data, opts: Options, *, clean_labels=None, notes=()):
    """Run one evaluation: channels by ``opts.method``, NC-ECE with interval, naive metrics.

    Returns a :class:`noisycal_bayes.report.Evaluation`.
    """
    from .reference.baselines import naive_calibration
    from .report import Evaluation

    if opts.method not in ENGINES:
        raise CommandError(f"unknown method {opts.method!r}; choose from {sorted(ENGINES)}.")
    data.require_scores()
    caught = list(notes)
    with _collect_warnings(caught):
        res = ENGINES[opts.method](data, opts)
        naive = naive_calibration(data, bins=opts.bins, clean_labels=clean_labels)
    table = res.table[["bin", "lower", "upper", "count", "mean_score", "corrected_frequency", "residual"]].copy()
    n_bins = len(table)
    table["band_lower"] = res.band_lower if res.band_lower is not None else np.full(n_bins, np.nan)
    table["band_upper"] = res.band_upper if res.band_upper is not None else np.full(n_bins, np.nan)
    return Evaluation(
        method=opts.method, method_detail=res.method_detail, n_items=data.n_items, n_annotators=data.n_annotators,
        channel=res.channel, channel_intervals=res.channel_intervals, prevalence=res.prevalence,
        nc_ece=float(res.value), nc_ece_lower=res.lower, nc_ece_upper=res.upper,
        nc_ece_upper_bound=res.upper_bound, level=opts.level, target=res.target,
        interval_method=res.interval_method, table=table, edges=np.asarray(res.edges), naive=naive,
        diagnostics=res.diagnostics, warnings=tuple(caught + list(res.notes)), draws=res.draws,
        draws_label=res.draws_label, bins=opts.bins, weights=opts.weights, seed=opts.seed, groups=res.n_groups)


def _map_classes():
    from .recalibration import maps

    return {name: getattr(maps, cls) for name, cls in MAP_NAMES.items()}


def _describe_map(m) -> str:
    if hasattr(m, "temperature_"):
        return f"T = {m.temperature_:.3f}" + (" (boundary)" if m.on_boundary_ else "")
    if hasattr(m, "alpha_"):
        return f"alpha = {m.alpha_:.3f}, beta = {m.beta_:.3f}" + (" (boundary)" if m.on_boundary_ else "")
    if hasattr(m, "bin_values_"):
        return f"{len(m.bin_values_)} bins, {len(m.clipped_bins_)} clipped"
    return ""


def compare_recalibration(data, opts: Options, *, clean_labels=None, maps=("temperature", "platt", "histogram")):
    """Fit each map on one half of the items (corrected, and naive against votes); judge on the other half.

    Channels are fitted by EM on the fitting half; NC-ECE on the held-out half uses those channels
    (independent samples, paper §3 variant (i)). With ``clean_labels`` the oracle ECE is added.

    Returns a list of :class:`noisycal_bayes.report.RecalibrationRow`.
    """
    from .core import binned_abs_residual, x64
    from .data import as_binning, bin_index
    from .reference.calibration import ece
    from .reference.em import fit_em
    from .reference.recalibration import corrected_item_labels
    from .report import RecalibrationRow

    classes = _map_classes()
    rng = np.random.default_rng(opts.seed)
    perm = rng.permutation(data.n_items)
    fit_rows, test_rows = np.sort(perm[: data.n_items // 2]), np.sort(perm[data.n_items // 2:])
    fit_data, test_data = data.subset(fit_rows), data.subset(test_rows)
    if fit_data.n_annotators != data.n_annotators or test_data.n_annotators != data.n_annotators:
        raise CommandError("an annotator has no label in one half of the items; too few labels to compare "
                           "recalibration maps on held-out items.")
    ch = fit_em(fit_data, groups=opts.groups, n_starts=opts.n_starts, seed=opts.seed)
    if ch.channel is None or not ch.identified:
        raise CommandError(f"EM on the fitting half could not estimate the channels: {ch.reason}")
    channel = ch.channel
    y_test = None if clean_labels is None else np.asarray(clean_labels)[test_rows]
    z_fit, z_test = fit_data.scores, test_data.scores

    # The held-out items' corrected labels do not depend on the map, only their scores do: NC-ECE of a
    # recalibrated score vector is then sum_k |sum_{B_k} (Ytilde_i - z_i)| / n with Ytilde fixed.
    y_corr = corrected_item_labels(test_data, channel, weights=opts.weights).values
    edges = as_binning(opts.bins).edges_for(z_test)

    def judge(name, fitted_to, params, z):
        with x64():
            nc = float(binned_abs_residual(bin_index(z, edges), y_corr - z, edges.size - 1))
        orc = None if y_test is None else ece(z, y_test, bins=opts.bins)
        return RecalibrationRow(name, fitted_to, params, nc, orc)

    rows = [judge("none", "-", "raw scores", z_test)]
    targets = [("noisy labels, corrected", fit_data, {"channel": channel, "weights": opts.weights}),
               ("majority vote", fit_data.majority_vote(), {}),
               ("vote fraction", fit_data.vote_fraction(), {})]
    for name in maps:
        for fitted_to, y, kw in targets:
            m = classes[name](bins=opts.bins) if name == "histogram" else classes[name]()
            m.fit(z_fit, y, **kw)
            rows.append(judge(name, fitted_to, _describe_map(m), m.predict(z_test)))
    return rows


# ============================================================================================ commands
def _check_out_file(path) -> Path:
    path = Path(path)
    if path.is_dir():
        raise CommandError(f"{path}: is a folder; give a file name.")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise CommandError(f"{path}: the folder {parent} does not exist.")
    return path


def _check_out_dir(path) -> Path:
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CommandError(f"{path}: exists and is not a folder.")
    if not path.resolve().parent.is_dir():
        raise CommandError(f"{path}: the parent folder {path.resolve().parent} does not exist.")
    return path


def _options(args, method: str) -> Options:
    if args.bins < 1:
        raise CommandError(f"--bins must be at least 1; got {args.bins}.")
    if args.groups < 1:
        raise CommandError(f"--groups must be at least 1; got {args.groups}.")
    if not 0 < args.level < 1:
        raise CommandError(f"--level must lie strictly between 0 and 1; got {args.level}.")
    if args.n_boot < 0:
        raise CommandError(f"--n-boot must be 0 or more; got {args.n_boot}.")
    if method == "nuts":
        _bayes_api()
    for flag, value, minimum in (("--chains", args.chains, 1), ("--warmup", args.warmup, 1), ("--draws", args.draws, 1)):
        if value < minimum:
            raise CommandError(f"{flag} must be at least {minimum}; got {value}.")
    return Options(method=method, bins=args.bins, groups=args.groups, weights=args.weights, level=args.level,
                   seed=args.seed, n_boot=args.n_boot, n_chains=args.chains, n_warmup=args.warmup,
                   n_draws=args.draws, progress=sys.stderr.isatty())


def _default_method(requested):
    if requested not in (None, "auto"):
        return requested
    return "nuts" if bayes_available() else "em"


def _load(args, notes: list):
    from .data.loaders import load_annotations_csv

    with _collect_warnings(notes):
        annotators = None if args.annotators is None else [a.strip() for a in args.annotators.split(",") if a.strip()]
        return load_annotations_csv(args.annotations, args.scores, layout=args.layout, item=args.item_col,
                                    annotator=args.annotator_col, label=args.label_col, score=args.score_col,
                                    annotators=annotators)


def _cmd_evaluate(args) -> int:
    from .report import evaluation_to_dict, format_summary, write_json, write_report

    json_path = None if args.json is None else _check_out_file(args.json)
    out_dir = None if args.out is None else _check_out_dir(args.out)
    opts = _options(args, _default_method(args.method))
    notes: list = []
    data = _load(args, notes)
    if data.scores is None:
        raise CommandError(f"{args.annotations}: no scores; pass --scores SCORES.csv (columns item, score) or add a "
                           "'score' column.")
    ev = evaluate_data(data, opts, notes=notes)
    print(format_summary(ev, title=f"noisycal-bayes evaluate {args.annotations}"))
    if out_dir is not None:
        write_report(out_dir, ev, data=data, source=str(args.annotations))
        print(f"\nReport written to {out_dir}/ (summary.md, results.json, figures).")
    if json_path is not None:
        write_json(json_path, evaluation_to_dict(ev))
        print(f"Results written to {json_path}.")
    return EXIT_OK


def _cmd_demo(args) -> int:
    from .data.loaders import load_demo
    from .report import format_summary, write_report

    out_dir = _check_out_dir(args.out or DEFAULT_REPORT_DIR)
    method = _default_method(args.method)
    opts = _options(args, method)
    data, truth = load_demo()
    print("noisycal-bayes demo: bundled simulated data with known truth\n"
          f"  {data.n_items} items scored by an over-confident model (true P(Y=1|z) = sigmoid(0.5 logit z)),\n"
          f"  labelled by {data.n_annotators} annotators with different error rates; "
          f"{int((~data.observed).sum())} of {data.labels.size} responses missing.\n"
          "  The truth (clean labels, channels) is used only to show how close the estimates come.\n", flush=True)
    # EM always runs (it is quick); NUTS too when asked for (or by default when the Bayesian layer exists).
    evs = [evaluate_data(data, replace(opts, method="em"), clean_labels=truth["clean_labels"])]
    if method == "nuts":
        print("Sampling the Bayesian model (NUTS)...", file=sys.stderr, flush=True)
        evs.append(evaluate_data(data, opts, clean_labels=truth["clean_labels"]))
    ev = evs[-1]
    recal = []
    try:
        recal = compare_recalibration(data, opts, clean_labels=truth["clean_labels"])
    except ImportError as exc:
        ev = _with_note(ev, f"recalibration skipped: {_one_line(exc)}")
    print(format_summary(ev, truth=truth, recalibration=recal, title=f"Results ({ev.method.upper()})", comparison=evs))
    print("\nReading the results: NC-ECE should be close to the oracle ECE (computed from the clean labels the\n"
          "method never sees), while the naive ECEs against votes are biased. Recalibrating against the\n"
          "corrected labels should lower the oracle ECE on held-out items; fitting to votes does not.")
    write_report(out_dir, ev, data=data, truth=truth, recalibration=recal, title="noisycal-bayes demo report",
                 source="bundled simulated demo data (noisycal_bayes.data.loaders.load_demo)", comparison=evs)
    print(f"\nReport written to {out_dir}/ (summary.md, results.json, reliability.png, channels.png, "
          f"gap_sensitivity.png{', nc_ece.png' if ev.draws is not None else ''}).")
    return EXIT_OK


def _with_note(ev, note: str):
    return replace(ev, warnings=tuple(ev.warnings) + (note,))


def _cmd_recalibrate(args) -> int:
    from .report import write_json

    save = _check_out_file(args.save)
    for flag, value in (("--groups", args.groups), ("--bins", args.bins), ("--map-bins", args.map_bins)):
        if value < 1:
            raise CommandError(f"{flag} must be at least 1; got {value}.")
    opts = Options(method="em", bins=args.bins, groups=args.groups, weights=args.weights, seed=args.seed)
    notes: list = []
    data = _load(args, notes)
    if data.scores is None:
        raise CommandError(f"{args.annotations}: no scores; pass --scores SCORES.csv (columns item, score).")
    from .reference.calibration import nc_ece
    from .reference.em import fit_em

    with _collect_warnings(notes):
        fit = fit_em(data, groups=opts.groups, n_starts=opts.n_starts, seed=opts.seed)
        if fit.channel is None or not fit.identified:
            raise CommandError(f"EM could not estimate the annotators' channels: {_one_line(fit.reason)}")
        cls = _map_classes()[args.map]
        m = cls(bins=args.map_bins) if args.map == "histogram" else cls()
        m.fit(data.scores, data, channel=fit.channel, weights=opts.weights)
        before = nc_ece(data, fit.channel, bins=opts.bins, weights=opts.weights).value
        after = nc_ece(data.with_scores(m.predict(data.scores)), fit.channel, bins=opts.bins, weights=opts.weights).value
    payload = {"format": MAP_FORMAT, "version": 1, "map": args.map, "model": m.to_dict(),
               "fitted_on": {"annotations": str(args.annotations), "scores": None if args.scores is None else str(args.scores),
                             "n_items": data.n_items, "n_annotators": data.n_annotators, "method": "em",
                             "groups": opts.groups, "weights": opts.weights, "seed": opts.seed,
                             "channel": fit.channel.to_frame().to_dict(orient="records")},
               "nc_ece_in_sample": {"before": before, "after": after, "bins": opts.bins}}
    write_json(save, payload)
    print(f"Fitted {cls.__name__} on {data.n_items} items against noise-corrected labels (EM channels, "
          f"{fit.n_groups} score groups): {_describe_map(m)}.")
    print(f"NC-ECE on the same items: {before:.3f} before, {after:.3f} after (in-sample, so optimistic; "
          "judge on held-out items).")
    for n in notes:
        print(f"warning: {n}", file=sys.stderr)
    print(f"Map saved to {save}. Apply it with: noisycal-bayes apply {save} NEW_SCORES.csv")
    return EXIT_OK


def _cmd_apply(args) -> int:
    from .data.loaders import load_scores_csv
    from .recalibration.maps import map_from_dict
    from .report import atomic_write_text

    out = None if args.out is None else _check_out_file(args.out)
    try:
        with open(args.map_file, encoding="utf-8") as fh:
            payload = json.load(fh)
    except FileNotFoundError:
        raise CommandError(f"{args.map_file}: no such file.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CommandError(f"{args.map_file}: not a JSON file ({_one_line(exc)}).") from None
    if not isinstance(payload, dict) or payload.get("format") != MAP_FORMAT or "model" not in payload:
        raise CommandError(f"{args.map_file}: not a recalibration map saved by `noisycal-bayes recalibrate --save`.")
    try:
        m = map_from_dict(payload["model"])
    except (ValueError, TypeError, KeyError) as exc:
        raise CommandError(f"{args.map_file}: cannot rebuild the map ({_one_line(exc)}).") from None
    scores = load_scores_csv(args.scores_file, item=args.item_col, score=args.score_col)
    recal = m.predict(scores.to_numpy())
    lines = [f"{args.item_col},{args.score_col},recalibrated"]
    lines += [f"{_csv_cell(i)},{z!r},{p!r}" for i, z, p in zip(scores.index, scores.to_numpy().tolist(), recal.tolist())]
    text = "\n".join(lines) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        atomic_write_text(out, text)
        print(f"Recalibrated {len(scores)} scores with {type(m).__name__} ({_describe_map(m)}); written to {out}.")
    return EXIT_OK


def _csv_cell(v) -> str:
    s = str(v)
    return '"' + s.replace('"', '""') + '"' if any(c in s for c in ',"\n') else s


# ============================================================================================ parser
def _add_data_args(p):
    p.add_argument("annotations", metavar="ANNOTATIONS.csv",
                   help="labels: long format (item, annotator, label) or wide (item + one column per annotator)")
    p.add_argument("--scores", metavar="SCORES.csv", help="scores: columns item, score (or a 'score' column in "
                   "ANNOTATIONS.csv)")
    p.add_argument("--layout", choices=("auto", "long", "wide"), default="auto", help="file layout (default: auto)")
    p.add_argument("--item-col", default="item", help="item column name (default: item)")
    p.add_argument("--annotator-col", default="annotator", help="annotator column name (long format)")
    p.add_argument("--label-col", default="label", help="label column name (long format)")
    p.add_argument("--score-col", default="score", help="score column name (default: score)")
    p.add_argument("--annotators", metavar="COL1,COL2,...",
                   help="wide format: the columns holding annotators' labels (default: all but item and score)")


def _add_fit_args(p, *, methods=("auto", "nuts", "em"), default_method="auto"):
    p.add_argument("--bins", type=int, default=10, help="equal-width evaluation bins (default: 10)")
    p.add_argument("--groups", type=int, default=5, help="equal-mass score groups identifying the channels (default: 5)")
    p.add_argument("--method", choices=methods, default=default_method,
                   help="channel engine: nuts (Bayesian) or em (reference EM + bootstrap); auto = nuts when "
                        "available, else em")
    p.add_argument("--weights", choices=("iv", "equal", "gap", "squared_gap"), default="iv",
                   help="annotator weights (default: iv, inverse variance)")
    p.add_argument("--level", type=float, default=0.9, help="interval level (default: 0.9)")
    p.add_argument("--n-boot", type=int, default=200, help="bootstrap replicates for EM intervals (0: none; default 200)")
    p.add_argument("--chains", type=int, default=4, help="NUTS chains (default: 4)")
    p.add_argument("--warmup", type=int, default=1000, help="NUTS warm-up iterations per chain (default: 1000)")
    p.add_argument("--draws", type=int, default=1000, help="NUTS draws per chain (default: 1000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``noisycal-bayes``."""
    parser = _ArgumentParser(prog="noisycal-bayes", description="Calibration of a binary classifier judged and fixed "
                             "with labels from several unreliable annotators.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"noisycal-bayes {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)

    p = sub.add_parser("demo", help="run the whole job on bundled simulated data with known truth")
    p.add_argument("--out", metavar="DIR", help=f"report folder (default: ./{DEFAULT_REPORT_DIR})")
    _add_fit_args(p)
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("evaluate", help="NC-ECE with interval, channels and naive metrics for your CSV files")
    _add_data_args(p)
    _add_fit_args(p)
    p.add_argument("--out", metavar="DIR", help="also write a report folder (figures, summary.md, results.json)")
    p.add_argument("--json", metavar="FILE", help="write machine-readable results to FILE")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser("recalibrate", help="fit a recalibration map against noise-corrected labels")
    _add_data_args(p)
    p.add_argument("--groups", type=int, default=5, help="equal-mass score groups identifying the channels (default: 5)")
    p.add_argument("--bins", type=int, default=10, help="equal-width bins of the NC-ECE printed before/after (default: 10)")
    p.add_argument("--method", choices=("em",), default="em", help="channel engine (em; Bayesian maps are not wired in yet)")
    p.add_argument("--weights", choices=("iv", "equal", "gap", "squared_gap"), default="iv",
                   help="annotator weights of the corrected labels (default: iv)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the EM starts (default: 0)")
    p.add_argument("--map", required=True, choices=sorted(MAP_NAMES), help="the map to fit")
    p.add_argument("--map-bins", type=int, default=10, help="fitting bins of the histogram map (default: 10)")
    p.add_argument("--save", required=True, metavar="MAP.json", help="where to save the fitted map")
    p.set_defaults(func=_cmd_recalibrate)

    p = sub.add_parser("apply", help="apply a saved map to scores (columns item, score)")
    p.add_argument("map_file", metavar="MAP.json")
    p.add_argument("scores_file", metavar="SCORES.csv")
    p.add_argument("--out", metavar="FILE", help="output CSV (item, score, recalibrated); default: standard output")
    p.add_argument("--item-col", default="item")
    p.add_argument("--score-col", default="score")
    p.set_defaults(func=_cmd_apply)
    return parser


def _prepare_jax() -> None:
    """Entry-point-only JAX set-up (a library must not do this; a command line may): :func:`configure_jax`.

    One host device per core, so NUTS chains can run in parallel; small loops compiled whole (NUTS 1.6x
    faster); JAX's persistent compilation cache in ``$NOISYCAL_JAX_CACHE`` (default
    ``~/.cache/noisycal_bayes/jax``; set it to an empty string to disable) so that repeated runs skip most
    compilation. All must happen before JAX initialises its backend.
    """
    from .inference.setup import configure_jax

    configure_jax(n_devices="auto", small_loops=True)
    cache = os.environ.get("NOISYCAL_JAX_CACHE", str(Path.home() / ".cache" / "noisycal_bayes" / "jax"))
    if cache:
        try:
            Path(cache).mkdir(parents=True, exist_ok=True)
            configure_jax(n_devices=None, small_loops=False, cache_dir=cache)
        except Exception:  # noqa: BLE001 - an optimisation only; never block the command
            pass


def main(argv=None) -> int:
    """Run the command line; returns the exit code (0 success, 2 bad input, 1 internal error).

    ``argv=None`` reads ``sys.argv`` (the console script) and also sets JAX up for parallel chains;
    passing a list runs in-process without touching global JAX settings.
    """
    if argv is None:
        argv = sys.argv[1:]
        _prepare_jax()
    argv = [str(a) for a in argv]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_ERROR
        return args.func(args)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except (CommandError, ValueError, OSError) as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug: one line unless NOISYCAL_DEBUG is set
        if os.environ.get("NOISYCAL_DEBUG"):
            raise
        print(f"error: internal error ({type(exc).__name__}: {_one_line(exc)}); rerun with NOISYCAL_DEBUG=1 for "
              "the traceback and please report it.", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
