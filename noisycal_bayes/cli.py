"""The ``noisycal-bayes`` command line: demo, evaluate, recalibrate, apply, plan.

    noisycal-bayes demo [--out DIR]
    noisycal-bayes evaluate ANNOTATIONS.csv --scores SCORES.csv [--bins 10] [--groups 5]
                            [--method nuts|em] [--seed 0] [--out DIR] [--json FILE]
                            [--gold COLUMN | --gold-file GOLD.csv] [--repeated keep|first|error]
    noisycal-bayes evaluate LABELS.csv --scores PROBS.csv ...    (K > 2 classes: detected from the labels;
                            PROBS.csv has `item` and one column per class; see docs/multiclass.md)
    noisycal-bayes recalibrate ANNOTATIONS.csv --scores SCORES.csv --map temperature|platt|histogram
                            --save MAP.json
    noisycal-bayes apply MAP.json SCORES.csv [--out FILE]
    noisycal-bayes plan ANNOTATIONS.csv --scores SCORES.csv --budget 50 [--kind label|gold] [--out PLAN.csv]

Every problem with the input (a bad file, a bad option, data that do not identify the channels) ends
with a single ``error: ...`` line on stderr and exit code 2, never a traceback; output files are
written to a temporary name and renamed only when complete. ``main(argv)`` returns the exit code, so
the whole command line can be driven from Python (and from tests).

The command line parses and prints; the library computes. ``evaluate`` and ``demo`` call
:func:`noisycal_bayes.evaluate` and print ``Evaluation.summary()`` (``--json``: ``Evaluation.to_json()``,
``--out``: ``Evaluation.write_report``). Labels with classes other than 0 and 1
(:func:`noisycal_bayes.data.is_multiclass_labels`) are read by :func:`noisycal_bayes.data.load_multiclass` and
evaluated by :func:`noisycal_bayes.evaluate_multiclass` (``MulticlassEvaluation``: same three outputs);
``recalibrate`` calls :func:`noisycal_bayes.fit_em` and the maps of
:mod:`noisycal_bayes.recalibration`. The channel engines (``em``, ``nuts``) are
:data:`noisycal_bayes.evaluation.ENGINES`, re-exported here as :data:`ENGINES`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from .data import Binning
from .evaluation import (ENGINES, MAPS, EngineResult, Settings, _map_classes, collect_warnings, describe_map,
                         evaluate)
from ._validation import one_line as _one_line

__all__ = ["ENGINES", "EngineResult", "Options", "build_parser", "main"]

EXIT_OK, EXIT_ERROR, EXIT_INTERNAL = 0, 2, 1
DEFAULT_REPORT_DIR = "noisycal_report"
MAP_FORMAT = "noisycal_bayes.recalibration_map"


class CommandError(Exception):
    """A problem the user can fix; printed as one ``error:`` line, exit code 2."""


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting (so errors stay one line)."""

    def error(self, message):
        raise CommandError(f"{message} (see `{self.prog} --help`)")



# ============================================================================================ options
@dataclass(frozen=True)
class Options:
    """Settings of one evaluation as the command line parsed them (see :func:`noisycal_bayes.evaluate`).

    The defaults are :func:`~noisycal_bayes.evaluate`'s (its ``Settings``), except the method (EM: quick, no
    Bayesian layer needed) and ``groups``, here a count of equal-mass score groups.
    """

    method: str = "em"
    bins: int = Settings.bins
    groups: int = 5
    weights: str = Settings.weights
    level: float = Settings.level
    seed: int = Settings.seed
    n_boot: int = Settings.n_boot
    n_starts: int = Settings.n_starts
    n_chains: int = Settings.n_chains
    n_warmup: int = Settings.n_warmup
    n_draws: int = Settings.n_draws
    progress: bool = Settings.progress_bar
    checks: bool = Settings.checks
    expand: object = Settings.expand
    threshold: float = 0.5
    metrics: bool = True
    plan: int | None = None

    def evaluate_kwargs(self) -> dict:
        """Keyword arguments of :func:`noisycal_bayes.evaluate` for these settings."""
        # --groups k means k equal-mass score groups (the option's documented meaning).
        return dict(method=self.method, bins=self.bins, groups=Binning.equal_mass(self.groups), weights=self.weights,
                    level=self.level,
                    seed=self.seed, n_boot=self.n_boot, n_starts=self.n_starts, n_chains=self.n_chains,
                    n_warmup=self.n_warmup, n_draws=self.n_draws, progress_bar=self.progress,
                    checks=self.checks, expand=self.expand, threshold=self.threshold, metrics=self.metrics,
                    plan=self.plan)


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


def _with_notes(ev, notes):
    """``ev`` with ``notes`` (e.g. the loader's warnings) before its own warnings."""
    notes = [n for n in notes if n not in ev.warnings]
    return replace(ev, warnings=tuple(notes) + tuple(ev.warnings)) if notes else ev


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


#: Defaults of ``--bins`` and ``--groups`` for binary data (K classes: 15 bins and 2 confidence quantiles).
BINARY_BINS, BINARY_GROUPS = 10, 5
MULTICLASS_BINS = 15


def _check_flags(args, method: str, bins: int) -> None:
    """The numeric flags of ``evaluate`` (both kinds of data; ``--groups`` may be unset for K classes)."""
    if bins < 1:
        raise CommandError(f"--bins must be at least 1; got {bins}.")
    if args.groups is not None and args.groups < 1:
        raise CommandError(f"--groups must be at least 1; got {args.groups}.")
    if not 0 <= getattr(args, "threshold", 0.5) <= 1:
        raise CommandError(f"--threshold must lie in [0, 1]; got {args.threshold}.")
    if not 0 < args.level < 1:
        raise CommandError(f"--level must lie strictly between 0 and 1; got {args.level}.")
    if args.n_boot < 0:
        raise CommandError(f"--n-boot must be 0 or more; got {args.n_boot}.")
    if getattr(args, "plan", None) is not None and args.plan < 0:
        raise CommandError(f"--plan must be a number of extra labels (0 or more); got {args.plan}.")
    if method == "nuts":
        _bayes_api()
    for flag, value in (("--chains", args.chains), ("--warmup", args.warmup), ("--draws", args.draws)):
        if value < 1:
            raise CommandError(f"{flag} must be at least 1; got {value}.")


def _options(args, method: str) -> Options:
    if args.bins is None:
        args.bins = BINARY_BINS
    if args.groups is None:
        args.groups = BINARY_GROUPS
    _check_flags(args, method, args.bins)
    return Options(method=method, bins=args.bins, groups=args.groups, weights=args.weights, level=args.level,
                   seed=args.seed, n_boot=args.n_boot, n_chains=args.chains, n_warmup=args.warmup,
                   n_draws=args.draws, progress=sys.stderr.isatty(), checks=not args.no_checks,
                   expand={"auto": "auto", "on": True, "off": False}[getattr(args, "expand", "auto")],
                   threshold=getattr(args, "threshold", 0.5), metrics=not getattr(args, "no_metrics", False),
                   plan=getattr(args, "plan", None))


def _default_method(requested):
    if requested not in (None, "auto"):
        return requested
    return "nuts" if bayes_available() else "em"


def _load(args, notes: list):
    from .data.loaders import load_annotations_csv

    with collect_warnings(notes):
        annotators = None if args.annotators is None else [a.strip() for a in args.annotators.split(",") if a.strip()]
        return load_annotations_csv(args.annotations, args.scores, layout=args.layout, item=args.item_col,
                                    annotator=args.annotator_col, label=args.label_col, score=args.score_col,
                                    annotators=annotators, gold=args.gold, gold_path=args.gold_file,
                                    repeated=args.repeated)


def _data_line(data) -> str:
    """One line describing the loaded data (``AnnotationSet.summary()``), printed before the results."""
    s = data.summary()
    text = (f"Data: {s['items']} items, {s['annotators']} annotators, {s['responses']} labels "
            f"(per item {s['labels_per_item_min']}-{s['labels_per_item_max']}, median "
            f"{s['labels_per_item_median']:g}; per annotator {s['labels_per_annotator_min']}-"
            f"{s['labels_per_annotator_max']}, median {s['labels_per_annotator_median']:g})")
    if s["repeated_pairs"]:
        text += (f"; {s['repeated_pairs']} repeated (item, annotator) pairs ({s['repeated_responses']} extra labels, "
                 "each kept as a response)")
    if data.gold is not None:
        text += f"; {s['gold_items']} items with a gold label"
    return text + "."


#: Data options of ``evaluate`` the K-class loader does not take: (attribute, default, flag).
_BINARY_DATA_OPTIONS = (("layout", "auto", "--layout"), ("item_col", "item", "--item-col"),
                        ("annotator_col", "annotator", "--annotator-col"), ("label_col", "label", "--label-col"),
                        ("score_col", "score", "--score-col"), ("gold_file", None, "--gold-file"),
                        ("threshold", 0.5, "--threshold"))


def _header(path) -> list:
    import csv

    with open(path, newline="", encoding="utf-8-sig") as fh:
        return [c.strip() for c in next(csv.reader(fh), [])]


def _binary_scores(args) -> bool:
    """Whether the scores are binary-shaped (a ``score`` column: ``item, score`` in the scores file, or a score
    column in the labels file without ``--scores``): then the data are binary, and a label other than 0 / 1 is
    reported by the binary loader with its line, not read as a class."""
    try:
        if args.scores is None:
            return args.score_col in _header(args.annotations)
        head = _header(args.scores)
    except (OSError, UnicodeDecodeError, StopIteration):
        return False
    return args.score_col in head and len(head) <= 2


def _is_multiclass(args) -> bool:
    """Whether the labels file holds K-class labels (some label other than 0 and 1).

    With the default column names the K-class reader decides (:func:`~noisycal_bayes.data.is_multiclass_labels`);
    with ``--layout``, ``--item-col``, ``--annotator-col``, ``--label-col``, ``--score-col`` or ``--annotators``
    the label cells those options name are checked. A file that cannot be read this way, or binary-shaped scores
    (:func:`_binary_scores`), are left to the binary loader, whose error names the problem.
    """
    from .data import is_multiclass_labels

    if _binary_scores(args):
        return False
    custom = (args.layout, args.item_col, args.annotator_col, args.label_col, args.score_col) != \
        ("auto", "item", "annotator", "label", "score")
    try:
        if not custom and args.annotators is None:
            return is_multiclass_labels(args.annotations)
        import pandas as pd

        df = pd.read_csv(args.annotations)
        long = args.layout == "long" or (args.layout == "auto" and (args.annotator_col in df or args.label_col in df))
        if long:
            return is_multiclass_labels(pd.DataFrame({"label": df[args.label_col]}))
        cols = ([a.strip() for a in args.annotators.split(",") if a.strip()] if args.annotators is not None else
                [c for c in df.columns if c not in (args.item_col, args.score_col, args.gold, "gold")])
        return is_multiclass_labels(pd.DataFrame(df[cols]))
    except (ValueError, KeyError, OSError):
        return False


def _cmd_evaluate_multiclass(args, json_path, out_dir) -> int:
    """``evaluate`` for K-class labels: :func:`load_multiclass` -> :func:`evaluate_multiclass`."""
    from .data import load_multiclass
    from .evaluation import evaluate_multiclass
    from .report import atomic_write_text

    given = [flag for attr, default, flag in _BINARY_DATA_OPTIONS if getattr(args, attr) != default]
    if given:
        raise CommandError(f"{', '.join(given)}: not available for K-class labels (files with columns item, annotator, "
                           "label or item + one column per annotator; gold labels in a column named by --gold).")
    if args.scores is None:
        raise CommandError(f"{args.annotations}: K-class labels need --scores PROBS.csv with an `item` column and one "
                           "probability column per class, named as the class appears in the labels file.")
    method = "em" if args.method in (None, "auto") else args.method
    bins = MULTICLASS_BINS if args.bins is None else args.bins
    _check_flags(args, method, bins)
    notes: list = []
    with collect_warnings(notes):
        annotators = None if args.annotators is None else [a.strip() for a in args.annotators.split(",") if a.strip()]
        data = load_multiclass(args.annotations, args.scores, repeated=args.repeated, gold=args.gold,
                               annotators=annotators)
    print(_data_line(data)[:-1] + f"; {data.n_classes} classes.", flush=True)
    ev = evaluate_multiclass(data, method=method, bins=bins, groups=args.groups, weights=args.weights,
                             level=args.level, seed=args.seed, n_boot=args.n_boot, n_chains=args.chains,
                             n_warmup=args.warmup, n_draws=args.draws, checks=not args.no_checks,
                             progress_bar=sys.stderr.isatty(), metrics=not args.no_metrics, plan=args.plan,
                             expand={"auto": "auto", "on": True, "off": False}[getattr(args, "expand", "auto")])
    if notes:
        ev = replace(ev, warnings=tuple(n for n in notes if n not in ev.warnings) + tuple(ev.warnings))
    print(ev.summary(title=f"noisycal-bayes evaluate {args.annotations} ({data.n_classes} classes)"))
    if out_dir is not None:
        ev.write_report(out_dir, source=str(args.annotations))
        print(f"\nReport written to {out_dir}/ (report.html, summary.md, results.json, annotators.csv, "
              "top_label_reliability.png, confusion_matrices.png).")
        if ev.plan is not None:
            print(f"Labelling plan written to {out_dir}/plan.csv ({len(ev.plan.table)} rows, best first).")
    if json_path is not None:
        atomic_write_text(json_path, ev.to_json())
        print(f"Results written to {json_path}.")
    return EXIT_OK


def _cmd_evaluate(args) -> int:
    from .report import atomic_write_text

    json_path = None if args.json is None else _check_out_file(args.json)
    out_dir = None if args.out is None else _check_out_dir(args.out)
    if _is_multiclass(args):
        return _cmd_evaluate_multiclass(args, json_path, out_dir)
    opts = _options(args, _default_method(args.method))
    notes: list = []
    data = _load(args, notes)
    if data.scores is None:
        raise CommandError(f"{args.annotations}: no scores; pass --scores SCORES.csv (columns item, score) or add a "
                           "'score' column.")
    print(_data_line(data), flush=True)
    ev = _with_notes(evaluate(data, **opts.evaluate_kwargs()), notes)
    print(ev.summary(title=f"noisycal-bayes evaluate {args.annotations}"))
    if out_dir is not None:
        ev.write_report(out_dir, source=str(args.annotations))
        print(f"\nReport written to {out_dir}/ (report.html, summary.md, results.json, figures).")
        if ev.plan is not None:
            print(f"Labelling plan written to {out_dir}/plan.csv ({len(ev.plan.table)} rows, best first).")
    if json_path is not None:
        atomic_write_text(json_path, ev.to_json())
        print(f"Results written to {json_path}.")
    return EXIT_OK


def _nuts_arguments(p) -> None:
    """The NUTS settings and the seed, as ``evaluate`` and ``plan`` take them."""
    p.add_argument("--chains", type=int, default=4, help="NUTS chains (default: 4)")
    p.add_argument("--warmup", type=int, default=1000, help="NUTS warm-up iterations per chain (default: 1000)")
    p.add_argument("--draws", type=int, default=1000, help="NUTS draws per chain (default: 1000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")


def _cmd_plan(args) -> int:
    """``plan``: :func:`noisycal_bayes.labels.plan_labels` on a fit of the loaded data; the plan as CSV."""
    from .inference import fit_em, fit_nuts
    from .labels import plan_labels
    from .report import atomic_write_text

    out = _check_out_file(args.out)
    notes: list = []
    multiclass = _is_multiclass(args)
    if multiclass:
        from .data import load_multiclass

        if args.scores is None:
            raise CommandError(f"{args.annotations}: K-class labels need --scores PROBS.csv (item + one probability "
                               "column per class).")
        with collect_warnings(notes):
            annotators = None if args.annotators is None else [a.strip() for a in args.annotators.split(",")
                                                               if a.strip()]
            data = load_multiclass(args.annotations, args.scores, repeated=args.repeated, gold=args.gold,
                                   annotators=annotators)
    else:
        data = _load(args, notes)
        if data.scores is None:
            raise CommandError(f"{args.annotations}: no scores; pass --scores SCORES.csv (columns item, score) or add "
                               "a 'score' column.")
    print(_data_line(data), flush=True)
    with collect_warnings(notes):
        kw = {} if multiclass else {"groups": Binning.equal_mass(BINARY_GROUPS if args.groups is None else args.groups)}
        if args.method == "nuts":
            if not multiclass:  # crowds (EM's sparse path: many annotators, repeated or gold labels): pooled channels,
                from .models.em_result import choose_path  # as `evaluate` fits them

                kw["pooling"] = "partial" if choose_path(data, "auto", func="plan")[0] == "sparse" else "none"
            fit = fit_nuts(data, seed=args.seed, n_chains=args.chains, n_warmup=args.warmup, n_draws=args.draws,
                           progress_bar=sys.stderr.isatty(), **kw)
        else:
            fit = fit_em(data, seed=args.seed, **kw)
        ask = None
        if args.ask is not None:
            by_name = {str(a): a for a in data.annotator_ids}
            ask = [by_name.get(a.strip(), a.strip()) for a in args.ask.split(",") if a.strip()]
        plan = plan_labels(data, fit, budget=args.budget, kind=args.kind, target=args.target, bins=args.bins,
                           annotators=ask, repeats=not args.no_repeats, level=args.level)
    print(plan.summary())
    print(plan.table.head(10).to_string(index=False))
    atomic_write_text(out, plan.table.to_csv(index=False))
    print(f"Plan written to {out} ({len(plan.table)} rows, best first).")
    for note in dict.fromkeys(notes + list(plan.warnings)):
        print(f"warning: {_one_line(note)}", file=sys.stderr)
    return EXIT_OK


def _cmd_demo(args) -> int:
    from .data.loaders import load_demo

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
    # The last evaluation also compares recalibration maps on held-out items.
    kw = dict(opts.evaluate_kwargs(), clean_labels=truth["clean_labels"])
    evs = [evaluate(data, **dict(kw, method="em"), recalibration=method == "em")]
    if method == "nuts":
        print("Sampling the Bayesian model (NUTS)...", file=sys.stderr, flush=True)
        evs.append(evaluate(data, **kw, recalibration=True))
    ev = evs[-1]
    print(ev.summary(truth=truth, title=f"Results ({ev.method.upper()})", comparison=evs))
    print("\nReading the results: NC-ECE should be close to the oracle ECE (computed from the clean labels the\n"
          "method never sees), while the naive ECEs against votes are biased. Recalibrating against the\n"
          "corrected labels should lower the oracle ECE on held-out items; fitting to votes does not.")
    ev.write_report(out_dir, truth=truth, title="noisycal-bayes demo report",
                    source="bundled simulated demo data (noisycal_bayes.data.loaders.load_demo)", comparison=evs)
    print(f"\nReport written to {out_dir}/ (report.html, summary.md, results.json, reliability.png, channels.png, "
          f"gap_sensitivity.png{', nc_ece.png' if ev.draws is not None else ''}).")
    return EXIT_OK


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
    print(_data_line(data), flush=True)
    from .inference import fit_em
    from .reference.calibration import nc_ece

    with collect_warnings(notes):
        fit = fit_em(data, groups=Binning.equal_mass(opts.groups), n_starts=opts.n_starts, seed=opts.seed)
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
          f"{fit.groups.n_groups} score groups): {describe_map(m)}.")
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
        print(f"Recalibrated {len(scores)} scores with {type(m).__name__} ({describe_map(m)}); written to {out}.")
    return EXIT_OK


def _csv_cell(v) -> str:
    s = str(v)
    return '"' + s.replace('"', '""') + '"' if any(c in s for c in ',"\n') else s


# ============================================================================================ parser
def _add_data_args(p):
    p.add_argument("annotations", metavar="ANNOTATIONS.csv",
                   help="labels: long format (item, annotator, label) or wide (item + one column per annotator)")
    p.add_argument("--scores", metavar="SCORES.csv", help="scores: columns item, score (or a 'score' column in "
                   "ANNOTATIONS.csv); K classes: item + one probability column per class")
    p.add_argument("--layout", choices=("auto", "long", "wide"), default="auto", help="file layout (default: auto)")
    p.add_argument("--item-col", default="item", help="item column name (default: item)")
    p.add_argument("--annotator-col", default="annotator", help="annotator column name (long format)")
    p.add_argument("--label-col", default="label", help="label column name (long format)")
    p.add_argument("--score-col", default="score", help="score column name (default: score)")
    p.add_argument("--annotators", metavar="COL1,COL2,...",
                   help="wide format: the columns holding annotators' labels (default: all but item, score and the --gold column)")
    gold = p.add_mutually_exclusive_group()
    gold.add_argument("--gold", metavar="COLUMN",
                      help="a column of ANNOTATIONS.csv with known clean labels (0 or 1, K classes: class names; "
                           "empty where unknown)")
    gold.add_argument("--gold-file", metavar="GOLD.csv",
                      help="known clean labels in a separate file with columns item, gold (empty gold: unknown)")
    p.add_argument("--repeated", choices=("keep", "first", "error"), default="keep",
                   help="an annotator who labels an item more than once (long format): keep every label, each a "
                        "conditionally independent response (default), keep the first, or stop with an error")


def _add_fit_args(p, *, methods=("auto", "nuts", "em"), default_method="auto"):
    p.add_argument("--bins", type=int, default=None,
                   help="equal-width evaluation bins (default: 10; K-class labels: 15 equal-width confidence bins)")
    p.add_argument("--groups", type=int, default=None,
                   help="equal-mass score groups identifying the channels (default: 5; K-class labels: confidence "
                        "quantiles per predicted class, default 2)")
    p.add_argument("--method", choices=methods, default=default_method,
                   help="channel engine: nuts (Bayesian) or em (reference EM + bootstrap); auto = nuts when "
                        "available, else em (K-class labels: auto = em)")
    p.add_argument("--weights", choices=("iv", "equal", "gap", "squared_gap"), default="iv",
                   help="annotator weights (default: iv, inverse variance; K-class labels: iv or equal)")
    p.add_argument("--level", type=float, default=0.9, help="interval level (default: 0.9)")
    p.add_argument("--n-boot", type=int, default=200, help="bootstrap replicates for EM intervals (0: none; default 200)")
    _nuts_arguments(p)
    p.add_argument("--no-checks", action="store_true",
                   help="skip the predictive checks of the channel model (run by default; about a second)")
    p.add_argument("--expand", choices=("auto", "on", "off"), default="auto",
                   help="also fit the score-dependent channel model (binary: channels per score group; K classes: "
                        "confusion matrices per confidence stratum), compare it with the shared channels by PSIS-LOO "
                        "and report the stacked models' NC-ECE as the headline (auto: when a predictive check warned; "
                        "default auto)")
    p.add_argument("--no-expand", dest="expand", action="store_const", const="off",
                   help="the same as --expand off: the shared-channel model only")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``noisycal-bayes``."""
    parser = _ArgumentParser(prog="noisycal-bayes", description="Calibration of a classifier (two or more classes) "
                             "judged and fixed with labels from several unreliable annotators.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"noisycal-bayes {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)

    p = sub.add_parser("demo", help="run the whole job on bundled simulated data with known truth")
    p.add_argument("--out", metavar="DIR", help=f"report folder (default: ./{DEFAULT_REPORT_DIR})")
    _add_fit_args(p)
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("evaluate", help="NC-ECE with interval, channels and naive metrics for your CSV files",
                       description="NC-ECE with interval, channels and naive metrics. Labels with classes other than "
                       "0 and 1 (K classes) are detected from ANNOTATIONS.csv: then --scores is a probabilities file "
                       "(item + one column per class, named as the classes appear in the labels), the headline is "
                       "the top-label NC-ECE, --bins defaults to 15 and --groups counts confidence quantiles per "
                       "predicted class (docs/multiclass.md).")
    _add_data_args(p)
    _add_fit_args(p)
    p.add_argument("--out", metavar="DIR", help="also write a report folder (report.html, figures, summary.md, results.json)")
    p.add_argument("--json", metavar="FILE", help="write machine-readable results to FILE")
    p.add_argument("--threshold", type=float, default=0.5,
                   help="binary data: operating threshold of the clean-label metrics (sensitivity, specificity, PPV, "
                        "NPV, F1...; predict 1 when score >= threshold; default 0.5)")
    p.add_argument("--no-metrics", action="store_true",
                   help="skip the clean-label metrics (accuracy, sensitivity, AUC, Brier, log loss...; computed by "
                        "default, docs/metrics.md)")
    p.add_argument("--plan", type=int, default=None, metavar="N",
                   help="also plan the N extra labels ((item, annotator) pairs) expected to narrow the NC-ECE "
                        "interval most: the top rows in the summary and the report, the whole plan as plan.csv in the "
                        "--out folder and under label_plan in the JSON (docs/planning.md; the plan subcommand offers "
                        "gold checks and more options)")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser("recalibrate", help="fit a recalibration map against noise-corrected labels")
    _add_data_args(p)
    p.add_argument("--groups", type=int, default=5, help="equal-mass score groups identifying the channels (default: 5)")
    p.add_argument("--bins", type=int, default=10, help="equal-width bins of the NC-ECE printed before/after (default: 10)")
    p.add_argument("--method", choices=("em",), default="em", help="channel engine (em; Bayesian maps are not wired in yet)")
    p.add_argument("--weights", choices=("iv", "equal", "gap", "squared_gap"), default="iv",
                   help="annotator weights of the corrected labels (default: iv)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the EM starts (default: 0)")
    p.add_argument("--map", required=True, choices=sorted(MAPS), help="the map to fit")
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

    p = sub.add_parser("plan", help="where the next labels (or gold checks) narrow the NC-ECE interval most: a "
                       "ranked plan as CSV", description="Fit the channels, then rank (item, annotator) pairs for one "
                       "more label each (or items for a gold check) by the expected reduction of the variance of the "
                       "NC-ECE (K classes: top-label NC-ECE), and write the greedy plan for --budget actions as CSV "
                       "(docs/planning.md).")
    _add_data_args(p)
    p.add_argument("--budget", type=int, required=True, help="number of extra labels (or gold checks) to plan")
    p.add_argument("--kind", choices=("label", "gold"), default="label",
                   help="label: one more label from an annotator per row (default); gold: a gold check per item")
    p.add_argument("--out", metavar="PLAN.csv", default="plan.csv", help="the plan (default: plan.csv)")
    p.add_argument("--target", choices=("nc_ece", "top_label_nc_ece"), default=None,
                   help="the interval to narrow (default: nc_ece for binary labels, top_label_nc_ece for K classes)")
    p.add_argument("--bins", type=int, default=None, help="equal-width evaluation bins (default: 10; K classes: 15)")
    p.add_argument("--groups", type=int, default=None, help="binary: equal-mass score groups of the fit (default: 5)")
    p.add_argument("--method", choices=("em", "nuts"), default="em",
                   help="channel fit: em (point estimate, Fisher information; default) or nuts (posterior draws)")
    p.add_argument("--ask", metavar="A1,A2,...", help="annotators who may be asked (default: every annotator)")
    p.add_argument("--no-repeats", action="store_true",
                   help="never ask an annotator about an item it already labelled (crowds)")
    p.add_argument("--level", type=float, default=0.9, help="level of the reported widths (default: 0.9)")
    _nuts_arguments(p)
    p.set_defaults(func=_cmd_plan)
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
