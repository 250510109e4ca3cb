"""Refresh the result tables of docs/experiments.md from benchmarks/results/experiments_*.

Each table sits between ``<!-- BEGIN <name> -->`` and ``<!-- END <name> -->`` markers; the prose around
them is hand-written. Run after any of the run_*.py drivers.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
RES = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "experiments.md"


def _md(frame: pd.DataFrame) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in frame.iterrows():
        lines.append("| " + " | ".join(str(r[c]) for c in cols) + " |")
    return "\n".join(lines)


def _pm(m, s, d=2):
    return f"{m:.{d}f} ± {s:.{d}f}"


# Which code produced each row (the "code" column of the tables); functions are in noisycal_bayes.
TOY_CODE = {
    "known": "`reference.nc_ece` with the true channels",
    "independent": "`reference.nc_ece_split` + `reference.fit_em`",
    "reuse": "`reference.nc_ece_reuse` + `reference.fit_em`",
    "cross_fit": "`reference.nc_ece_cross_fit` + `reference.fit_em`",
    "bayes": "`inference.fit_nuts(model=\"grouped\")` + `propagate.posterior_nc_ece(method=\"plugin\")`",
}
GAUSSIAN_CODE = {
    "none": "the predictor's scores (`experiments.simulate_gaussian`)",
    "corrected": "`experiments._common.fit_point_map` on `reference.recalibration.corrected_item_labels` "
                 "(channels: `reference.fit_em`)",
    "naive": "`experiments._common.fit_point_map` on the vote fraction",
    "oracle": "`experiments._common.fit_point_map` on the clean labels",
    ("temperature", "bayes"): "`recalibration.PosteriorTemperature` (channels: `inference.fit_nuts(model=\"grouped\")`)",
    ("histogram", "bayes"): "`recalibration.PosteriorHistogram` (`inference.fit_nuts(model=\"histogram\")`)",
}
CIFAR_CODE = {
    "none": "the predictor's scores",
    "naive": "`reference.fit_{map}` on the vote fraction",
    "corrected": "`reference.fit_{map}` on `reference.recalibration.corrected_item_labels` (EM channels)",
}


def _code(meta) -> str:
    """The package code of the run, when its JSON records it (``run_*.py`` do since issue 15)."""
    return f" Package code of the run: {meta['code']}." if meta.get("code") else ""


def _gaussian_code(kind, fit):
    return GAUSSIAN_CODE.get((kind, fit)) or GAUSSIAN_CODE[fit]


def toy_table1() -> str:
    t = pd.read_csv(RES / "experiments_toy_table1.csv")
    meta = json.loads((RES / "experiments_toy.json").read_text())
    rows = []
    for _, r in t.iterrows():
        bayes = r["estimator"] == "bayes"
        rows.append({
            "condition": r["condition"], "estimator": r["estimator"], "reps": int(r["n_reps"]),
            "MAE x100 ± MC SE": _pm(r["mae_x100"], r["mae_se_x100"]),
            "SD x100": f"{r['sd_abs_x100']:.2f}", "bias x100": f"{r['bias_x100']:.2f}",
            "failed fits": int(r["n_failed"]),
            "posterior-mean MAE x100": f"{r['posterior_mean_mae_x100']:.2f}" if bayes else "",
            "90% coverage ± SE": _pm(r["coverage"], r["coverage_se"]) if bayes else "",
            "code": TOY_CODE[r["estimator"]],
        })
    reused = (f" Bayesian rows reused from {meta['bayes_rows_from']} (not refitted)." if meta.get("bayes_rows_from")
              else " Every row refitted in this run.")
    return (f"N = 8000, {meta['reps']} repetitions per cell ({meta['bayes_reps']} for the Bayesian rows: NUTS, "
            f"{meta['n_chains']} chains x {meta['n_draws']} draws after {meta['n_warmup']} warm-up), all by "
            f"`experiments.toy.toy_ece` driven by `benchmarks/experiments/run_toy.py`.{reused}{_code(meta)} "
            f"Wall time {meta['seconds_table1']:.0f} s on a shared 2-core machine.\n\n" + _md(pd.DataFrame(rows)))


def toy_figure1() -> str:
    t = pd.read_csv(RES / "experiments_toy_figure1.csv")
    w = t.pivot(index="n_items", columns="estimator", values="mae_x100")
    s = t.pivot(index="n_items", columns="estimator", values="mae_se_x100")
    n = t.pivot(index="n_items", columns="estimator", values="n_reps")
    rows = [{"N": int(k), "reps": int(n.loc[k].min()), "supplied channels": _pm(w.loc[k, "known"], s.loc[k, "known"]),
             "estimated channels (reuse)": _pm(w.loc[k, "reuse"], s.loc[k, "reuse"])} for k in w.index]
    return ("MAE x 100 ± one Monte Carlo SE, calibrated condition; `experiments.toy.toy_ece` (supplied channels: "
            f"{TOY_CODE['known']}; estimated: {TOY_CODE['reuse']}) driven by `benchmarks/experiments/run_toy.py`.\n\n"
            + _md(pd.DataFrame(rows)))


def cifar_table3() -> str:
    t = pd.read_csv(RES / "experiments_cifar10n_table3.csv")
    meta = json.loads((RES / "experiments_cifar10n.json").read_text())
    rows = []
    for _, r in t.iterrows():
        iv = "" if r["bayes_interval"] == "two_sided" else " (one-sided)"
        rows.append({
            "scores": r["method"] if r["fit"] == "none" else f"{r['method']}, {r['fit']}",
            "oracle ECE x100 [90% BB]": f"{100 * r['oracle_ece']:.2f} [{100 * r['oracle_lower']:.2f}, {100 * r['oracle_upper']:.2f}]",
            "soft-vote ECE x100 [90% BB]": f"{100 * r['softvote_ece']:.2f} [{100 * r['softvote_lower']:.2f}, {100 * r['softvote_upper']:.2f}]",
            "NC-ECE x100 (EM)": f"{100 * r['nc_ece']:.2f}",
            "Bayesian NC-ECE x100 [90%]": f"{100 * r['bayes_estimate']:.2f} [{100 * r['bayes_lower']:.2f}, {100 * r['bayes_upper']:.2f}]{iv}",
            "map": r["params"] if isinstance(r["params"], str) else "",
            "code": CIFAR_CODE[r["fit"]].format(map=r["method"]),
        })
    fpr = ", ".join(f"{v:.3f}" for v in meta["em_fpr"])
    tpr = ", ".join(f"{v:.3f}" for v in meta["em_tpr"])
    return (f"Fitting half n = {meta['n_fit']}, evaluation half n = {meta['n_eval']}. Marginal Dawid-Skene EM "
            f"channels (fitting half): fpr = ({fpr}), tpr = ({tpr}); NUTS posterior means agree to 1e-3 "
            f"({meta['nuts_divergent']} divergent transitions). BB = Bayesian bootstrap of the evaluation items "
            f"({meta['seconds']:.0f} s wall). Every row: `experiments.cifar10n.cifar10n_table` driven by "
            f"`benchmarks/experiments/run_cifar10n.py`; columns: oracle `reference.ece`, soft vote `reference.smece`, "
            f"NC-ECE `reference.nc_ece` with `reference.fit_em(groups=None)` channels, Bayesian "
            f"`inference.fit_nuts(model=\"dawid_skene\")` + `propagate.posterior_nc_ece(method=\"plugin\")`; the "
            f"code column says how each row's scores were made.{_code(meta)}\n\n" + _md(pd.DataFrame(rows)))


def gaussian_table5() -> str:
    t = pd.read_csv(RES / "experiments_gaussian_table5.csv")
    meta = json.loads((RES / "experiments_gaussian.json").read_text())
    big = t[t["n_items"] == t["n_items"].max()]
    rows = []
    for _, r in big.iterrows():
        rows.append({
            "map": r["map"], "fit": r["fit"], "reps": int(r["n_reps"]),
            "L1(m) x100 (sd)": f"{100 * r['l1']:.2f} ({100 * r['l1_sd']:.2f})",
            "log loss (sd)": f"{r['log_loss']:.4f} ({r['log_loss_sd']:.4f})",
            "Brier (sd)": f"{r['brier']:.4f} ({r['brier_sd']:.4f})",
            "90% band covers m(z)": "" if pd.isna(r.get("band_coverage")) else f"{r['band_coverage']:.2f}",
            "code": _gaussian_code(r["map"], r["fit"]),
        })
    by_size = t[t["fit"].isin(["none", "corrected", "naive", "oracle"])].copy()
    by_size["cell"] = by_size["map"] + ", " + by_size["fit"]

    def size_table(metric, scale, digits):
        w = by_size.pivot(index="cell", columns="n_items", values=metric) * scale
        se = by_size.pivot(index="cell", columns="n_items", values=f"{metric}_se") * scale
        reps = by_size.pivot(index="cell", columns="n_items", values="n_reps")
        return _md(pd.DataFrame([{"fit": c, **{f"n = {int(n)}": _pm(w.loc[c, n], se.loc[c, n], digits)
                                                + ("" if reps.loc[c, n] == meta["reps"] else f" ({int(reps.loc[c, n])} reps)")
                                                for n in w.columns}} for c in w.index]))

    fails = ""
    try:
        raw = pd.read_csv(RES / "experiments_gaussian_rows.csv")
        bad = raw[raw["failure"].fillna("").astype(str) != ""].drop_duplicates(["n_items", "rep"])
        per = bad.groupby("n_items")["rep"].apply(lambda r: ", ".join(str(int(v)) for v in sorted(r)))
        fails = ("\n\nFailed channel fits (`reference.fit_em` reported every start failed; the three corrected maps of "
                 "that repetition are dropped from the means, its base, naive and oracle rows kept): "
                 f"{len(bad)} of {meta['reps'] * len(meta['sizes'])} — "
                 + "; ".join(f"n = {int(n)}: repetition(s) {per[n]}" for n in per.index)
                 + (f"; none at n = {', '.join(str(n) for n in meta['sizes'] if n not in per.index)}"
                    if set(meta["sizes"]) - set(per.index) else "") + ".")
    except FileNotFoundError:
        pass
    return (f"Total n = {int(big['n_items'].iloc[0])} (thirds of {int(big['n_items'].iloc[0]) // 3}); {meta['reps']} "
            f"repetitions (Bayesian rows: {meta['bayes_reps']}); mean (sample sd); every row by "
            f"`experiments.gaussian.gaussian_recalibration` driven by `benchmarks/experiments/run_gaussian.py`, the "
            f"code column naming the map's fitter.{_code(meta)} Wall time {meta['seconds']:.0f} s.\n\n"
            + _md(pd.DataFrame(rows)) + fails
            + "\n\nL1(m) x 100 ± MC SE by total size (fewer reps where failed fits were dropped):\n\n"
            + size_table("l1", 100, 2)
            + "\n\nLog loss ± MC SE by total size (fewer reps where failed fits were dropped):\n\n"
            + size_table("log_loss", 1, 4))


def tabular_table2() -> str:
    t = pd.read_csv(RES / "experiments_tabular_table2.csv")
    meta = json.loads((RES / "experiments_tabular.json").read_text())
    order = [d for d in meta["datasets"] if d in set(t["dataset"])] + ["all"]
    cell = {(r["dataset"], r["map"], r["fit"]): r for _, r in t.iterrows()}

    def ms(d, m, f):
        r = cell.get((d, m, f))
        return "" if r is None else f"{100 * r['ece']:.2f} ± {100 * r['ece_sd']:.2f}" if pd.notna(r["ece_sd"]) \
            else f"{100 * r['ece']:.2f}"

    def diff(d, m, f):
        r = cell.get((d, m, f))
        if r is None:
            return ""
        z = r["diff_vs_base"] / r["diff_se"] if r["diff_se"] > 0 else float("nan")
        return f"{100 * r['diff_vs_base']:+.2f} ± {100 * r['diff_se']:.2f} (z = {z:.1f})"

    main, diffs, others = [], [], []
    for d in order:
        b = cell[(d, "base", "none")]
        main.append({"data set": d, "cells used / run": f"{int(b['n_cells'])} / {int(b['n_cells_total'])}",
                     "seeds": int(b["n_seeds"]), "Base": ms(d, "base", "none"),
                     "Temperature (corr.)": ms(d, "temperature", "corrected"),
                     "Platt (corr.)": ms(d, "platt", "corrected"), "Histogram (corr.)": ms(d, "histogram", "corrected")})
        diffs.append({"data set": d, **{f"{m} (corr.) - Base": diff(d, m, "corrected")
                                        for m in ("temperature", "platt", "histogram")}})
        others.append({"data set": d, **{f"{m} {f}": ms(d, m, f) for m in ("temperature", "platt", "histogram")
                                         for f in ("naive", "oracle")}})
    bayes = t[t["fit"] == "bayes"]
    btxt = ""
    if len(bayes):
        brow = [{"data set": r["dataset"], "cells": int(r["n_cells"]), "Base (same seed)": "",
                 "PosteriorPlatt (posterior-mean map)": f"{100 * r['ece']:.2f}",
                 "- Base": f"{100 * r['diff_vs_base']:+.2f}",
                 "mean 90% band width": f"{r['band_width']:.3f}"} for _, r in bayes.iterrows()]
        bm = meta.get("bayes") or {}
        regs = ", ".join(bm.get("bayes_regimes", meta["regimes"]))
        btxt = (f"\n\nBayesian layer ({meta.get('bayes_seeds_done', 0)} seed(s), J = 3, all six predictors, regimes: "
                f"{regs}; NUTS 2 chains x {bm.get('n_draws', meta['n_draws'])} draws after "
                f"{bm.get('n_warmup', meta['n_warmup'])} warm-up); ECE x 100 and its difference from the base of the same seed "
                f"(the base does not depend on J or the regime):\n\n"
                + _md(pd.DataFrame(brow).drop(columns="Base (same seed)")))
    return (f"{meta['seeds_done']} seeds (paper: 10) x {len(meta['predictors'])} predictors x "
            f"{len(meta['n_annotators'])} annotator counts x {len(meta['regimes'])} regimes per data set; ECE x 100 "
            f"against the clean test labels, mean ± sample sd of the seed-level means. Wall time {meta['seconds']:.0f} s "
            f"(shared 2-core machine, nice 19). Every cell: `experiments.tabular.tabular_recalibration` driven by "
            f"`benchmarks/experiments/run_tabular.py`; Base = the predictor (`experiments.tabular.make_predictor`), "
            f"(corr.) = `experiments._common.fit_point_map` on `reference.recalibration.corrected_item_labels` "
            f"(channels: `reference.fit_em`), naive = the same on the vote fraction, oracle = on the clean labels, "
            f"Bayesian = `recalibration.PosteriorPlatt` on `inference.fit_nuts(model=\"platt\")`.{_code(meta)}\n\n"
            + _md(pd.DataFrame(main))
            + "\n\nPaired difference from the base, ECE x 100 (mean over seeds ± SE = sd / sqrt(seeds)):\n\n"
            + _md(pd.DataFrame(diffs))
            + "\n\nNaive (fitted to the vote fraction) and oracle (fitted to the clean labels of the fitting part) "
              "maps, ECE x 100, mean ± sd of seed-level means:\n\n" + _md(pd.DataFrame(others)) + btxt)


TABLES = {"toy_table1": toy_table1, "toy_figure1": toy_figure1, "cifar_table3": cifar_table3,
          "gaussian_table5": gaussian_table5, "tabular_table2": tabular_table2}


def main():
    text = DOC.read_text()
    for name, make in TABLES.items():
        try:
            body = make()
        except FileNotFoundError as exc:  # that experiment has not been run here: keep its table as it is
            print(f"{name}: results missing ({exc.filename}); table left unchanged")
            continue
        pat = re.compile(rf"(<!-- BEGIN {name} -->\n)(?:.*?\n)?(<!-- END {name} -->)", re.S)
        text, n = pat.subn(lambda m, body=body: m.group(1) + body + "\n" + m.group(2), text)
        if n != 1:
            raise SystemExit(f"marker {name} found {n} times in {DOC}")
    DOC.write_text(text)
    print(f"updated {DOC}")


if __name__ == "__main__":
    main()
