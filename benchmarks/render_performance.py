"""Regenerate ``docs/performance.md`` and its log-log figure from the benchmark results.

Usage::

    python benchmarks/render_performance.py

Reads ``benchmarks/results/bench_*.json`` (written by the ``bench_*.py`` scripts, see ``_benchutil.py`` for
the format: ``{"benchmark", "machine", "settings", "rows"}``) and ``memory_1e7.json``. Every number on the
page comes from those files; nothing is typed in by hand. Each ``bench_*.py`` calls :func:`render` when it
finishes, so the page always shows the latest run of every benchmark (with that run's machine and load).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "performance.md"
FIGURE = ROOT / "docs" / "figures" / "performance_scaling.png"

#: Benchmarks in page order: (file stem, title, what it compares, table columns).
SECTIONS = [
    ("bench_em", "EM: ours vs crowd-kit's DawidSkene",
     "Our vectorised EM (10 starts, compressed counts) against `crowdkit.aggregation.DawidSkene`. Both stop by the "
     "same rule, the largest absolute change of the parameters <= 1e-6 (neither library has a relative rule; "
     "crowd-kit's own E- and M-steps run with only its stopping test replaced, see `bench_em.py`); "
     "`crowdkit_ds_default` is crowd-kit as shipped, which stops after a few iterations with a larger error. Our time "
     "includes compression (`compress_median_s` is that part). `max_abs_err` is the largest error of fpr and tpr "
     "against the simulated truth; `converged` is the stopping rule met within 1000 iterations; `reps` is the "
     "number of timed runs behind each median. The notes under the table say at which sizes crowd-kit ran.",
     ["stage", "n_items", "n_annotators", "n_groups", "median_s", "compress_median_s", "n_iter", "converged",
      "max_abs_err", "crowdkit_max_abs_err", "ratio_crowdkit_over_ours", "reps"]),
    ("bench_nuts", "NUTS: compressed vs per-item vs enumerated vs PyMC",
     "The grouped model (3 annotators, 10 score groups) sampled by our compressed likelihood, an item-level "
     "likelihood, NumPyro's discrete enumeration (the style of NumPyro's annotation example) and PyMC. The process "
     "starts with `configure_jax(n_devices=2)`, the set-up of the command line and the user guide (one JAX device "
     "per core, small loops compiled whole); our chains run one per device, PyMC's one process per core.",
     ["stage", "n_items", "chain_method", "compile_s", "wall_s", "wall_total_s", "min_ess_bulk", "min_ess_per_s",
      "compressed_ess_per_s_ratio", "max_abs_z_vs_compressed"]),
    ("bench_compile", "Compilation",
     "First fit vs a second fit on new data of the same shape (same process: one compiled program serves both), "
     "and a new process with the persistent compilation cache cold or warm.",
     ["stage", "n_items", "median_s", "warm_s", "compile_overhead_s", "import_s", "process_s", "reps"]),
    ("bench_propagation", "Propagation: posterior NC-ECE",
     "`posterior_nc_ece` over 4,000 posterior draws, with and without the Bayesian bootstrap.",
     ["stage", "n_items", "bootstrap", "n_draws", "first_call_s", "median_s", "per_draw_ms", "reps", "nc_ece"]),
    ("bench_import", "Import time", "`import noisycal_bayes` in fresh processes.",
     ["stage", "statement", "median_s", "process_median_s", "process_minus_python_s", "n_modules",
      "heavy_modules_loaded"]),
    ("bench_dask", "Beyond one machine: Dask",
     "Sufficient statistics from a Parquet data set on a local Dask cluster, checked against the in-memory path.",
     ["stage", "n_responses", "n_items", "seconds", "driver_base_mb", "driver_peak_mb", "n_partitions", "workers",
      "equal_to_in_memory", "equal_to_dask", "max_abs_param_diff", "max_abs_error_vs_truth"]),
    ("bench_multiclass_em", "K classes: EM vs crowd-kit's DawidSkene (K = 10)",
     "`fit_em_multiclass` (compressed (group x pattern) counts, 5 starts) against crowd-kit's multiclass "
     "`DawidSkene` run to the same tolerance, on simulated data (K = 10, 3 annotators); errors are against the "
     "simulated confusion matrices. Goals (issue 18): >= 20x faster than crowd-kit at 1e5 items with equal or lower "
     "error; 1e6 items <= 2 s. `max_abs_err` and `rms_err` are the largest and the root-mean-square error of the "
     "J K^2 = 300 confusion entries on one simulation (seed 0); the largest of 300 errors is noisy, so at 1e5 the "
     "same data-generating recipe is run with `seeds` seeds (new truth and data each): `*_mean` and `*_se` are the "
     "mean over seeds and its standard error, `*_minus_crowdkit_*` the paired difference ours - crowd-kit (negative: "
     "ours is closer to the truth). `tol_check_max_diff`: how much the seed-0 fit moves when refitted to tol 1e-10. "
     "The `cifar10n_*` rows fit the real CIFAR-10N labels (50,000 images, 3 annotators); "
     "their clean-label accuracy is scored against the reference labels (evaluation only).",
     ["stage", "n_items", "n_groups", "median_s", "first_call_s", "n_iter", "converged", "max_abs_err",
      "rms_err", "tol_check_max_diff", "seeds", "max_abs_err_mean", "max_abs_err_se", "rms_err_mean", "rms_err_se",
      "max_abs_err_minus_crowdkit_mean", "max_abs_err_minus_crowdkit_se", "rms_err_minus_crowdkit_mean",
      "rms_err_minus_crowdkit_se", "ratio_crowdkit_over_ours", "clean_label_accuracy_em",
      "clean_label_accuracy_majority_vote"]),
    ("crowds_em_multiclass", "K classes: sparse EM on the five crowds (one EM loop, SQUAREM)",
     "`fit_em_multiclass(data, model=\"dawid_skene\")` (max_iter 1000, tol 1e-8) on "
     "each set of `crowds/` in the shared data folder, read with `load_multiclass` (gold kept aside), by "
     "`benchmarks/crowds_em_multiclass.py`. Rows up to the \"vote start\" ones: the vote start + 4 random starts "
     "(the former default), main (plain EM) against the branch (SQUAREM after 100 plain iterations, "
     "`accelerate=\"auto\"`; saved programs), with the class-level orientation rule (cf and adult failed it at the ML "
     "optimum: `converged` no). Rows \"vote start\": today's defaults (the vote start alone on the sparse path, "
     "`orientation=\"auto\"`: the crowd rule where the class-level one fails). `first_s` is the first call in a new "
     "process (cold, then warm compilation cache), `warm_s` a later call. `em_stopped_by_rule`: the selected start met "
     "the stopping rule before max_iter; `converged` also asks the orientation rule. "
     "Goal (issues 34, 35): converged on all five and no slower than crowd-kit's DawidSkene at 100 iterations "
     "(measured side by side in the section \"The five public crowds of any K\" of the crowd benchmark below).",
     ["label", "data", "n_classes", "n_labels", "em_stopped_by_rule", "converged", "n_iter", "warm_s", "first_s",
      "cpu_s", "accuracy", "loglik", "objective", "max_T_diff_vs_plain"]),
    ("bench_multiclass_nuts", "K classes: NUTS on the CIFAR-10N shape",
     "`fit_nuts_multiclass(model=\"grouped\")` on CIFAR-10N (K = 10, 50,000 images x 3 annotators, 20 score groups: "
     "predicted class x 2 confidence quantiles), 2 chains in parallel, 300 warm-up + 1,500 draws, in the log-ratio "
     "coordinates (`parametrisation=\"log_ratio\"`, the default; `benchmarks/results/bench_multiclass_nuts_compare.json` "
     "holds the side-by-side run against the stick-breaking coordinates). `cpu_s` is the process's CPU time; "
     "`compile_init_s`, `warmup_s` and `sampling_s` split the wall time. Goal (issue 18): <= 60 s including "
     "compilation on 2 cores, R-hat <= 1.01.\n\n"
     "The defaults of `fit_nuts_multiclass` measured on this shape (4,053 compressed rows): 500 draws per chain left "
     "the largest R-hat near 1.01, 300 warm-up steps and 1,500 draws gave 1.005-1.009 at about the same cost "
     "(warm-up from the MAP start is short in the log-ratio coordinates); `precision=\"auto\"` samples the "
     "pattern path in float32, about 2.7x faster per leapfrog step than float64; in the log-ratio coordinates a "
     "gradient of the log density costs 0.49 ms CPU against 1.7 ms in stick-breaking coordinates (whose transforms "
     "and Dirichlet terms cost three times the likelihood); the pattern likelihood gathers `log C[j, :, a_j]` per "
     "annotator, where a one-hot matrix product, the same numbers, ran about 10x slower inside the NUTS loop.",
     ["stage", "parametrisation", "path", "n_rows", "wall_s", "cpu_s", "compile_init_s", "warmup_s", "sampling_s",
      "r_hat_max", "ess_bulk_min", "ess_tail_min", "n_divergent", "frac_max_treedepth", "tree_depth_mean",
      "accuracy_posterior_vs_ref", "accuracy_majority_vs_ref"]),
    ("bench_metrics", "Clean-label metrics",
     "`evaluate` with and without its clean-label metrics (issue 37: `clean_metrics`, every binary metric with its "
     "interval over 300 replicates; K = 3: from the EM route's bootstrap refits), alternating in one process after a "
     "warm-up of each, by `benchmarks/bench_metrics.py`. Goal (issue 37): the metrics add at most 20% "
     "(`added_fraction` <= 0.2) at 1e5 items. `cpu_s`: the process's CPU time (every thread), steadier than the wall "
     "time on a shared machine; rows marked \"before\" ran the same script on the code before the change.",
     ["stage", "n_items", "n_annotators", "median_s", "median_s_without_metrics", "ratio", "added_fraction",
      "cpu_s", "cpu_s_without_metrics", "cpu_added_fraction", "repeats"]),
]

#: Lines of the log-log figure: (benchmark, stage, row filter, label, panel).
CURVES = [
    ("bench_em", "compress", lambda r: r.get("n_annotators") == 3 and r.get("n_groups", 0) > 1,
     "compression (J=3)", 0),
    ("bench_em", "em_grouped", lambda r: r.get("n_annotators") == 3, "EM grouped, ours (J=3)", 0),
    ("bench_em", "em_marginal", lambda r: r.get("n_annotators") == 3, "EM marginal, ours (J=3)", 0),
    ("bench_em", "crowdkit_ds", lambda r: r.get("n_annotators") == 3, "crowd-kit DawidSkene (J=3)", 0),
    ("bench_propagation", "propagation", lambda r: bool(r.get("bootstrap")), "posterior NC-ECE, bootstrap", 0),
    ("bench_propagation", "propagation", lambda r: r.get("bootstrap") is False, "posterior NC-ECE, no bootstrap", 0),
    ("bench_nuts", "nuts_compressed", lambda r: r.get("chain_method") in (None, "sequential", "parallel"),
     "NUTS compressed (ours)", 1),
    ("bench_nuts", "nuts_per_item", lambda r: True, "NUTS per item", 1),
    ("bench_nuts", "nuts_enumerated", lambda r: True, "NUTS enumerated (NumPyro)", 1),
    ("bench_nuts", "pymc_marginal", lambda r: True, "PyMC NUTS, marginal", 1),
]
TIME_KEYS = ("median_s", "wall_s", "seconds")


def load(stem: str):
    path = RESULTS / f"{stem}.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())


def _time(row):
    for k in TIME_KEYS:
        v = row.get(k)
        if isinstance(v, (int, float)) and math.isfinite(v):
            return float(v)
    return None


def fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.2e}"
        return f"{v:.4g}"
    if isinstance(v, (list, dict)):
        return ", ".join(fmt(x) for x in v) if isinstance(v, list) and len(v) <= 4 else "…"
    if isinstance(v, int) and abs(v) >= 10_000 and v % 1000 == 0:
        return f"{v:.0e}".replace("+0", "")
    return str(v)


def table(rows, cols) -> list[str]:
    cols = [c for c in cols if any(c in r for r in rows)]
    if not rows or not cols:
        return []
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return out


def machine_line(m: dict) -> str:
    parts = [f"Python {m.get('python')}", f"jax {m.get('jax')}", f"numpy {m.get('numpy')}"]
    for k in ("numpyro", "pymc", "crowd_kit", "dask"):
        if m.get(k):
            parts.append(f"{k.replace('_', '-')} {m[k]}")
    # bench_nuts.py wrote its own key names before it used _benchutil.machine(): read both.
    load_s = m.get("load_avg_start", m.get("load_average_start"))
    load_e = m.get("load_avg_end", m.get("load_average_end"))
    when = m.get("started_utc", "")
    cores = m.get("cores", m.get("cpu_count"))
    cpu = m.get("cpu", "")
    load_txt = ""
    if load_s and load_e:
        load_txt = f"; 1-min load average {load_s[0]:.1f} at start, {load_e[0]:.1f} at end"
    return f"{when} · {cores} cores ({cpu}) · " + ", ".join(parts) + load_txt


def goals_of(payload) -> list[dict]:
    settings = payload.get("settings") or {}
    goals = settings.get("goals") or payload.get("goals") or []
    return [g for g in goals if isinstance(g, dict) and "goal" in g]


def plot(results: dict) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    drawn = [0, 0]
    for stem, stage, keep, label, panel in CURVES:
        payload = results.get(stem)
        if payload is None:
            continue
        pts = sorted((r["n_items"], _time(r)) for r in payload["rows"]
                     if r.get("stage") == stage and r.get("n_items") and _time(r) is not None and keep(r))
        # One point per n (the first configuration listed).
        seen, xs, ys = set(), [], []
        for n, t in pts:
            if n not in seen:
                seen.add(n)
                xs.append(n)
                ys.append(t)
        if not xs:
            continue
        axes[panel].plot(xs, ys, marker="o", label=label)
        drawn[panel] += 1
    titles = ["Compression, EM, propagation (after compilation)", "NUTS, 4 chains x (1000 + 1000), compile excluded"]
    for ax, title, n in zip(axes, titles, drawn):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("number of items")
        ax.set_ylabel("wall time (s), median")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        if n:  # headroom above the curves (log scale), so the legend hides no point
            lo, hi = ax.get_ylim()
            frac = 0.055 * n + 0.03  # share of the axes height the legend takes
            ax.set_ylim(lo, lo * (hi / lo) ** (1 / (1 - frac)))
            ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)
    plt.close(fig)
    return any(drawn)

#: Sections of ``bench_crowds.json`` in page order: (section, title, table columns).
CROWD_SECTIONS = [
    ("gold", "crowd_gold: accuracy against gold and EM time",
     ["data", "stage", "n_annotators", "n_responses", "settings", "starts", "accelerated", "accuracy", "first_call_s", "median_s", "n_iter",
      "accuracy_minus_crowdkit", "crowdkit_over_ours"]),
    ("crowds", "The five public crowds of any K: accuracy against gold and EM time, beside crowd-kit",
     ["data", "n_classes", "n_annotators", "n_responses", "n_gold", "stage", "settings", "accuracy", "converged",
      "n_iter", "first_call_s", "median_s", "median_cpu_s", "crowdkit_100_over_ours", "crowdkit_100_over_ours_cpu",
      "max_abs_diff_vs_plain", "accuracy_minus_crowdkit_converged"]),
    ("rte", "Pooled NUTS on rte",
     ["stage", "settings", "wall_s", "cpu_s", "load_avg_1min", "r_hat_max", "ess_bulk_min", "ess_tail_min",
      "n_divergent", "n_max_depth", "tree_depth_mean", "leapfrog_per_draw", "step_size_mean", "accuracy"]),
    ("scale", "A simulated crowd at scale",
     ["stage", "n_items", "n_annotators", "n_responses", "settings", "accelerated", "first_s", "first_call_s",
      "median_s", "n_iter", "converged", "max_abs_diff_vs_accelerated", "peak_above_input_gb", "accuracy", "source"]),
    ("nuts_scale", "Pooled NUTS at 100,000 labels",
     ["n_items", "n_annotators", "n_responses", "wall_s", "cpu_s", "load_avg_1min", "r_hat_max", "ess_bulk_min",
      "n_divergent", "n_max_depth", "tree_depth_mean", "coverage_90_fpr_tpr"]),
    ("recovery", "Recovery: interval coverage and flags",
     ["stage", "subset", "intervals", "n_labels_from", "n_labels_to", "min_labels", "n_sims", "n_failed",
      "n_intervals", "coverage", "se", "se_binomial", "z_vs_nominal", "coverage_honest", "coverage_spammer",
      "coverage_adversary", "n_true", "n_flagged", "recall", "precision"]),
    ("recovery_nuts", "Recovery with the pooled NUTS posterior (EM beside it on the same crowds)",
     ["route", "stage", "subset", "n_labels_from", "n_labels_to", "min_labels", "n_intervals", "coverage", "se",
      "z_vs_nominal", "coverage_honest", "coverage_spammer", "coverage_adversary", "n_true", "n_flagged", "recall",
      "precision", "n_fits", "wall_median_s", "r_hat_max", "ess_bulk_min", "n_divergent", "n_max_depth"]),
]


def crowd_lines(payload) -> list[str]:
    """The crowd benchmark (``benchmarks/bench_crowds.py``, issue 16): its goals with measured values and pass /
    fail, then one table per section."""
    head = ["## Real and simulated crowds (issue 16)", ""]
    if payload is None:
        return head + ["Not run yet: `benchmarks/bench_crowds.py` writes `benchmarks/results/bench_crowds.json`.", ""]
    rows = payload["rows"]
    goals = [r for r in rows if r.get("stage") == "goal"]
    spark = (payload.get("settings") or {}).get("spark_crowd") or {}
    lines = head + ["`benchmarks/bench_crowds.py` (its module docstring says exactly what each row times; the runs "
                    "are listed below). "
                    "The machine is shared: times under a high load average are upper bounds; `cpu_s` is the "
                    "process's CPU time.", ""]
    runs = (payload.get("settings") or {}).get("runs") or [{"only": None, "machine": payload.get("machine", {})}]
    for run in runs:
        which = f"sections {', '.join(run['only'])}: " if run.get("only") else ""
        lines += [f"- {which}{machine_line(run.get('machine', {}))}"]
    lines.append("")
    if goals:
        lines += ["| section | goal | measured | target | met |", "|---|---|---|---|---|"]
        lines += [f"| {g['section']} | {g['goal']} | {fmt(g['measured'])} | {g['op']} {fmt(g['target'])} | "
                  f"{'yes' if g['pass'] else '**no**'} |" for g in goals]
        lines.append("")
    for section, title, cols in CROWD_SECTIONS:
        # Per-fit rows ("fit") stay in the JSON; the page shows the summaries.
        got = [r for r in rows if r.get("section") == section and r.get("stage") not in ("goal", "fit")]
        if got:
            lines += [f"### {title}", ""] + table(got, cols) + [""]
    if spark:
        lines += [f"Outside reference (quoted, not run here): {spark.get('source')}, {spark.get('seconds')} s for "
                  f"{spark.get('labels'):,} labels.", ""]
    return lines


def gates_section(baseline) -> list[str]:
    """Section "Performance gates" (``benchmarks/gates.py``, ``make gates``): how they gate and the baseline."""
    lines = ["## Performance gates", "",
             "`make gates` (`benchmarks/gates.py`; not part of `make test` or CI) runs the headline case of each "
             "benchmark in one process on the current checkout, writes `benchmarks/results/gates.json` and compares "
             "it with `benchmarks/results/gates_baseline.json` at +-10%. The machine is shared and noisy, so a time "
             "is not gated directly: each case runs once untimed (compilation), then in several rounds a fixed "
             "reference computation (a NumPy sort and a jitted JAX reduction, no package code) and the case back "
             "to back; the gated figure is the median of the case over the median of the reference, which other "
             "processes' load moves much less than either time. A ratio more than 10% above the baseline's fails; "
             "one more than 10% below asks for the baseline to be recorded again "
             "(`python benchmarks/gates.py --record-baseline`). Peak memory (tracemalloc) is gated directly.", "",
             "How far to trust a verdict: on the shared 2-core machine, with six other test runs beside it (load "
             "average 3-12), three runs of the same code (main 0bd4ed5, 2026-12-03) moved the ratio of the cases "
             "under 0.3 s (binary EM, K-class EM, propagation) by up to 35% and that of the longer cases (NUTS, "
             "Dask) by 5-15%; only peak memory was exactly repeatable. A FAIL on a quiet machine is a regression; "
             "on a loaded one, run `make gates` again before reading it as one.", ""]
    if baseline is None:
        return lines + ["No baseline recorded yet.", ""]
    lines += [f"Baseline: {machine_line(baseline.get('machine', {}))}; {baseline.get('reps')} rounds per case, "
              f"{fmt(baseline.get('total_s'))} s in all.", "",
              "| case | median_s | reference_median_s | ratio (gated) | first_call_s |", "|---|---|---|---|---|"]
    for name, c in baseline.get("cases", {}).items():
        if "peak_extra_mb" in c:
            lines.append(f"| {name} | {fmt(c.get('seconds'))} |  | {fmt(c['peak_extra_mb'])} MB (gated) |  |")
        else:
            lines.append(f"| {name} | {fmt(c['median_s'])} | {fmt(c['reference_median_s'])} | {fmt(c['ratio'])} | "
                         f"{fmt(c['first_call_s'])} |")
    return lines + [""]


def render() -> Path:
    results = {stem: load(stem) for stem, *_ in SECTIONS}
    memory = load("memory_1e7")
    lines = [
        "# Performance and scale",
        "",
        "<!-- Generated by benchmarks/render_performance.py from benchmarks/results/*.json; do not edit by hand. -->",
        "",
        "The grouped likelihood depends on the data only through counts of (score group, response pattern), so one",
        "pass over the responses builds sufficient statistics and every later EM step, NUTS gradient and posterior",
        "NC-ECE draw costs nothing that grows with the number of items. The benchmarks below measure that, side by",
        "side with what a user would otherwise pick, in one process run each. Run them all with `make bench`",
        "(it installs the `bench` extra: crowd-kit, PyMC, Dask, scikit-learn) or one at a time with",
        "`.venv/bin/python benchmarks/bench_<name>.py`; each writes `benchmarks/results/bench_<name>.json` and",
        "regenerates this page. Figures are medians of repeated runs on a shared 2-core machine, so read the",
        "ratios rather than the absolute times; each section names its run's machine and load.",
        "",
    ]
    all_goals = []
    for stem, title, what, cols in SECTIONS:
        payload = results.get(stem)
        if payload is not None:
            all_goals += [(title, g) for g in goals_of(payload)]
    if all_goals:
        lines += ["## Goals of issue 6", "", "| benchmark | goal | measured | met |", "|---|---|---|---|"]
        for t, g in all_goals:
            text = g["goal"]
            if "detail" in g:  # structured goal: id, detail, direction, target
                text = g["detail"] if g.get("target") is None else f"{g['detail']} {g.get('direction', '')} {fmt(g['target'])}"
            value = g.get("value")
            value = "not measured" if value is None else (fmt(value) if not isinstance(value, str) else value)
            met = {True: "yes", False: "**no**", None: "–"}[g.get("met")]
            lines.append(f"| {t} | {text} | {value} | {met} |")
        lines.append("")
    if plot(results):
        lines += ["## Time against the number of items", "",
                  f"![log-log time vs items]({FIGURE.relative_to(DOC.parent).as_posix()})", "",
                  "Compression is the one pass over the data and grows linearly; after it, EM and NUTS on the "
                  "compressed counts stay flat, while crowd-kit, the per-item likelihood and enumeration grow "
                  "with n.", ""]
    for stem, title, what, cols in SECTIONS:
        payload = results.get(stem)
        lines += [f"## {title}", ""]
        if payload is None:
            lines += [f"Not run yet: `benchmarks/{stem}.py` writes `benchmarks/results/{stem}.json`.", ""]
            continue
        lines += [what, "", f"Machine: {machine_line(payload.get('machine', {}))}.", ""]
        lines += table(payload["rows"], cols)
        notes = (payload.get("settings") or {}).get("notes")
        if notes:
            lines += [""] + [f"- {n}" for n in (notes if isinstance(notes, list) else [notes])]
        prose = RESULTS / f"{stem}.notes.md"  # hand-written analysis of a run, kept beside its results
        if prose.exists():
            lines += ["", prose.read_text().rstrip()]
        lines.append("")
    lines += crowd_lines(load("bench_crowds"))
    if memory is not None:
        steps = memory.get("steps", {})
        lines += ["## Memory at 1e7 items", "",
                  f"{memory.get('n_items'):,} items, {memory.get('n_annotators')} annotators, "
                  f"{memory.get('n_responses'):,} responses ({memory.get('inputs_mb')} MB of input arrays); "
                  "`benchmarks/memory_1e7.py`, peak memory above the inputs (tracemalloc).", "",
                  "| step | peak extra MB | seconds |", "|---|---|---|"]
        lines += [f"| {k} | {fmt(v.get('peak_extra_mb'))} | {fmt(v.get('seconds'))} |" for k, v in steps.items()]
        lines.append("")
    lines += checks_section(load("bench_checks"))
    expansion = RESULTS / "bench_expansion.notes.md"  # hand-written: benchmarks/bench_expansion.py's run, read
    if expansion.exists():
        lines += ["## Model expansion in `evaluate` (issue 36)", "", expansion.read_text().strip(), ""]
    choices = RESULTS / "implementation_choices.notes.md"  # hand-written: measurements behind choices in the code
    if choices.exists():
        lines += ["## Implementation choices", "", choices.read_text().strip(), ""]
    lines += gates_section(load("gates_baseline"))
    DOC.write_text("\n".join(lines).rstrip() + "\n")
    return DOC


def checks_section(payload) -> list[str]:
    """Section "Cost of the model checks" from ``bench_checks.json`` (issue 17), or a not-run note."""
    lines = ["## Cost of the model checks", ""]
    if payload is None:
        return lines + ["Not run yet: `benchmarks/bench_checks.py` writes `benchmarks/results/bench_checks.json`.", ""]
    settings = payload.get("settings") or {}
    lines += ["`evaluate` runs the predictive model checks by default (`model_checks`: a parametric bootstrap of 199 "
              "EM refits after `method=\"em\"`, a posterior predictive check on 199 draws after NUTS). "
              "`benchmarks/bench_checks.py` times `evaluate` with and without them, alternating, on three simulated "
              f"annotators (NUTS: {settings.get('n_chains')} chains x ({settings.get('n_warmup')} + "
              f"{settings.get('n_draws')}) draws; compilation excluded).", "",
              f"Machine: {machine_line(payload.get('machine', {}))}.", ""]
    lines += table(payload["rows"], ["stage", "checks", "n_items", "median_s", "added_s", "added_fraction", "reps"])
    goals = [g for g in settings.get("goals", []) if isinstance(g, dict)]
    if goals:
        lines += ["", "| goal (issue 17) | measured | met |", "|---|---|---|"]
        lines += [f"| {g['goal']} | {g.get('value')} | {dict([(True, 'yes'), (False, '**no**')]).get(g.get('met'), '–')} |"
                  for g in goals]
    return lines + ["", "Timed calls alternate with and without checks; a difference smaller than the spread of repeated "
                    "calls on the loaded machine (a negative `added_s`) means the checks' cost is below what it resolves. "
                    "The bootstrap's EM refits run batched (one vmapped EM loop per 100 replicates).", ""]


if __name__ == "__main__":
    print(f"wrote {render()}")
