"""Why the real-data matrix's crowd intervals sit below the reference-label ECE: three measurements, no ``evaluate`` run.

``benchmarks/real_data_matrix.py`` records beside each headline NC-ECE interval the calibration error of the scores
against the gold / reference labels. Many crowd intervals lie entirely below it (rte, temp, zencrowd_us, sp and
cifar10n_10class). This script separates the candidate causes (docs/crowds.md, *Synthetic scores for the crowds*):

``reference``
    Per set: the plug-in reference (``reference_ece``, the sample oracle ECE) and the headline's own estimator with
    gold as a noiseless annotator (``reference_ece_debiased`` and its 90% interval, target: the population binned
    ECE, as the headline's; :func:`noisycal_bayes.experiments.real_data.reference_figures`), beside the matrix's
    intervals read from ``benchmarks/results/real_data_matrix.json``; ``covers_*`` says whether each interval holds
    each reference.
``plugin_bias``
    The crowds' scores are synthetic, drawn from gold by a known formula, so their population error is known up to
    Monte Carlo: the items' gold classes repeated with fresh score draws (``--pop-items`` items in all), the plug-in
    ECE of that sample. Beside it the mean and sd of the plug-in and of the debiased estimate over ``--reps`` fresh
    samples of the set's own size: their bias, measured.
``channels``
    The binary crowds and cifar10n_10class: the EM fit of ``evaluate`` (grouped Dawid-Skene, 5 equal-mass score
    groups; K classes 2 confidence quantiles per predicted class) without gold, and the same fit with the gold labels
    observed (channels then measured against gold). Each fit's channels are propagated as known (Bayesian bootstrap
    of the items only; debiased 90% interval), so the two rows differ only by the channels. Also: how often the
    fit's most probable clean label agrees with gold, the plug-in ECE against that label, and for the binary crowds
    the share of items whose majority vote contradicts gold, observed and as simulated with annotators independent
    given gold (each labelling at its own gold-measured rates, ``--reps`` replicates).

    python benchmarks/real_data_reference.py                 # writes benchmarks/results/real_data_reference.json
    python benchmarks/real_data_reference.py --no-fits       # references and plug-in bias only (a few seconds)
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from _benchutil import RESULTS, machine, print_table, write_json
from noisycal_bayes.core import top_label_ece
from noisycal_bayes.experiments.real_data import (REAL_SETS, REFERENCE_KEYS, SHARED_DATA_HINT, _synthetic_probs,
                                                  reference_figures, shared_data_dir, write_real_set)
from noisycal_bayes.reference.calibration import ece

BINARY_CROWDS = ("bluebirds", "rte", "temp", "zencrowd_us", "sp")


def _gold_frame(name: str, root: Path, work: Path):
    """The files ``evaluate`` reads, and per item (in the scores file's order) its gold class (-1 unknown)."""
    info = write_real_set(name, work / name)
    spec = REAL_SETS[name]
    src = pd.read_csv(root / spec.path)
    if spec.layout.startswith("cifar"):
        return info, src, src["y_ref"].to_numpy()
    items = pd.read_csv(info["args"][2])["item"]
    gold = src.groupby("item")["gold"].first().reindex(items).to_numpy()
    return info, src.rename(columns={spec.annotator_col: "annotator"}), gold


def reference_rows(root: Path, work: Path) -> list[dict]:
    matrix = json.loads((RESULTS / "real_data_matrix.json").read_text())
    rows = []
    for r in matrix["rows"]:
        info = write_real_set(r["set"], work / r["set"])
        row = {"set": r["set"], "route": r["route"], "lower": r["lower"], "upper": r["upper"], "value": r["value"],
               **{k: info[k] for k in REFERENCE_KEYS}}
        if r["lower"] is not None:
            row["covers_plugin"] = r["lower"] <= info["reference_ece"] <= r["upper"]
            row["covers_debiased"] = r["lower"] <= info["reference_ece_debiased"] <= r["upper"]
            row["overlaps_reference_interval"] = (r["lower"] <= info["reference_upper"]
                                                  and info["reference_lower"] <= r["upper"])
        rows.append(row)
    return rows


def _plugin(probs: np.ndarray, y: np.ndarray, k: int) -> float:
    return ece(probs[:, 1], y, bins=10) if k == 2 else top_label_ece(probs, np.eye(k)[y], bins=15).value


def plugin_bias_rows(root: Path, work: Path, *, reps: int, reps_debiased: int, pop_items: int) -> list[dict]:
    rows = []
    for name, spec in REAL_SETS.items():
        if spec.layout != "crowd":
            continue
        t0 = time.process_time()
        info, _, gold = _gold_frame(name, root, work)
        y = gold[gold >= 0].astype(np.int64)
        k, n = spec.n_classes, y.size
        big = np.tile(y, max(1, -(-pop_items // n)))
        population = _plugin(_synthetic_probs(big, k, f"{name}/population"), big, k)
        plug, deb = [], []
        for r in range(reps):
            p = _synthetic_probs(y, k, f"{name}/rep{r}")
            plug.append(_plugin(p, y, k))
            if r < reps_debiased:
                deb.append(reference_figures(p[:, 1] if k == 2 else p, y, k)["reference_ece_debiased"])
        rows.append({"set": name, "n_gold": n, "reference_ece": info["reference_ece"],
                     "reference_ece_debiased": info["reference_ece_debiased"], "population_ece": population,
                     "population_items": int(big.size), "plugin_mean": float(np.mean(plug)),
                     "plugin_sd": float(np.std(plug, ddof=1)), "plugin_bias": float(np.mean(plug) - population),
                     "debiased_mean": float(np.mean(deb)), "debiased_sd": float(np.std(deb, ddof=1)),
                     "debiased_bias": float(np.mean(deb) - population), "reps": reps, "reps_debiased": reps_debiased,
                     "cpu_s": round(time.process_time() - t0, 1)})
        print(f"plugin_bias {name:12s} population {population:.4f} plug-in {np.mean(plug):.4f} +- "
              f"{np.std(plug, ddof=1):.4f} debiased {np.mean(deb):.4f} +- {np.std(deb, ddof=1):.4f}", flush=True)
    return rows


def _majority_wrong(item_codes: np.ndarray, labels: np.ndarray, gold_of_item: np.ndarray) -> float:
    """Share of items whose labels mostly contradict gold (a tie counts one half)."""
    n_items = gold_of_item.size
    wrong = np.bincount(item_codes, weights=labels != gold_of_item[item_codes], minlength=n_items)
    total = np.bincount(item_codes, minlength=n_items)
    return float(np.mean((2 * wrong > total) + 0.5 * (2 * wrong == total)))


def _gold_rates(frame: pd.DataFrame):
    """Per label row: its item's code, its gold class and its annotator's rate of label 1 given that class, measured
    against gold (no pseudo-counts: the simulated crowd is as accurate as the real one; a rate of 0 or 1 is kept)."""
    item_codes, items = pd.factorize(frame["item"])
    ann_codes, _ = pd.factorize(frame["annotator"])
    gold_of_item = frame.groupby("item")["gold"].first().reindex(items).to_numpy()
    y = gold_of_item[item_codes]
    a = frame["label"].to_numpy()
    rate = np.zeros((ann_codes.max() + 1, 2))
    for c in (0, 1):
        hits = np.bincount(ann_codes[y == c], weights=a[y == c], minlength=rate.shape[0])
        tot = np.bincount(ann_codes[y == c], minlength=rate.shape[0])
        rate[:, c] = hits / np.maximum(tot, 1)
    return item_codes, gold_of_item, rate[ann_codes, y]


def dispersion(frame: pd.DataFrame, reps: int, seed: int = 0) -> dict:
    """Majority-wrong share observed, and simulated with annotators independent given gold at their gold rates."""
    item_codes, g, p = _gold_rates(frame)
    rng = np.random.default_rng(seed)
    sims = [_majority_wrong(item_codes, (rng.uniform(size=p.size) < p).astype(int), g) for _ in range(reps)]
    return {"majority_wrong_observed": _majority_wrong(item_codes, frame["label"].to_numpy(), g),
            "majority_wrong_independent": float(np.mean(sims)),
            "majority_wrong_independent_sd": float(np.std(sims, ddof=1))}


def _em_known_channels(data, gold: np.ndarray) -> dict:
    """``evaluate``'s EM fit (grouped, 5 equal-mass score groups, 10 starts), its channels propagated as known."""
    from noisycal_bayes.data import Binning
    from noisycal_bayes.inference import fit_em
    from noisycal_bayes.propagate import posterior_nc_ece

    fit = fit_em(data, model="grouped", n_starts=10, seed=0)
    post = posterior_nc_ece(data, fit, bins=Binning.equal_width(10), seed=0, usable=fit.usable_annotators())
    clean = (np.asarray(fit.clean_label_probability(data)) > 0.5).astype(int)
    return {"value": post.value, "debiased": post.debiased, "lower": post.lower, "upper": post.upper,
            "target": post.target, "agreement_with_gold": float(np.mean(clean == gold)),
            "ece_against_fit_label": ece(data.scores, clean, bins=10),
            "mean_fpr": float(np.mean(fit.channel.fpr)), "mean_tpr": float(np.mean(fit.channel.tpr))}


def _binary_channel_rows(name: str, root: Path, work: Path, reps: int, reps_simulated: int) -> list[dict]:
    from noisycal_bayes.data import AnnotationSet
    from noisycal_bayes.data.loaders import load_annotations_csv

    info, frame, _ = _gold_frame(name, root, work)
    gold_of = frame.groupby("item")["gold"].first()
    gold_path = work / name / "gold.csv"
    gold_of.rename("gold").reset_index().to_csv(gold_path, index=False)
    data = load_annotations_csv(info["args"][0], info["args"][2])
    gold = gold_of.reindex(data.item_ids).to_numpy()
    ref = {k: info[k] for k in ("reference_ece", "reference_ece_debiased")}
    rows = []
    for channels, fit_data in (("em", data), ("em_gold_observed",
                                              load_annotations_csv(info["args"][0], info["args"][2],
                                                                   gold_path=gold_path))):
        t0 = time.process_time()
        rows.append({"set": name, "channels": channels, "labels": "real", **_em_known_channels(fit_data, gold), **ref,
                     "cpu_s": round(time.process_time() - t0, 1)})
    rows[0].update(dispersion(frame, reps))
    # The same design with labels simulated from the model the EM assumes, annotators independent given gold at
    # their gold-measured rates: does the EM route's NC-ECE then find the gold-defined error?
    item_codes, _, p = _gold_rates(frame)
    scores = pd.read_csv(info["args"][2]).set_index("item")["score"]
    rng = np.random.default_rng(1)
    for r in range(reps_simulated):
        t0 = time.process_time()
        sim = frame[["item", "annotator"]].assign(label=(rng.uniform(size=p.size) < p).astype(int))
        sim_data = AnnotationSet.from_long(sim, scores)
        rows.append({"set": name, "channels": "em", "labels": f"simulated {r}",
                     **_em_known_channels(sim_data, gold_of.reindex(sim_data.item_ids).to_numpy()), **ref,
                     "cpu_s": round(time.process_time() - t0, 1)})
    return rows


def _multiclass_channel_rows(name: str, root: Path, work: Path) -> list[dict]:
    from noisycal_bayes.data import MulticlassAnnotationSet
    from noisycal_bayes.evaluation import evaluate_multiclass
    from noisycal_bayes.propagate import posterior_top_label_nc_ece

    info, src, gold = _gold_frame(name, root, work)
    k = REAL_SETS[name].n_classes
    probs = src[[f"p{c}" for c in range(k)]].to_numpy(np.float64)
    labels = src[["ann1", "ann2", "ann3"]].to_numpy()
    data = MulticlassAnnotationSet.from_wide(labels, probs, classes=list(range(k)))
    rows = []
    for channels, g in (("em", None), ("em_gold_observed", gold)):
        t0 = time.process_time()
        fit_data = MulticlassAnnotationSet.from_wide(labels, probs, classes=list(range(k)), gold=g)
        # evaluate's EM fit (grouped, 2 confidence quantiles per predicted class), no bootstrap: its confusion only.
        ev = evaluate_multiclass(fit_data, method="em", n_boot=0, checks=False, metrics=False, expand=False)
        confusion = np.asarray(ev.confusion)
        post = posterior_top_label_nc_ece(probs, data.responses, confusion, bins=15, seed=0)
        rows.append({"set": name, "channels": channels, "value": post.value, "debiased": post.debiased,
                     "lower": post.lower, "upper": post.upper, "target": post.target,
                     "mean_diagonal": float(np.mean([np.diag(c).mean() for c in confusion])),
                     "reference_ece": info["reference_ece"], "reference_ece_debiased": info["reference_ece_debiased"],
                     "cpu_s": round(time.process_time() - t0, 1)})
    # Instance-dependent noise: each annotator's agreement with the reference label by confidence fifth.
    conf = probs.max(axis=1)
    fifth = np.minimum((pd.Series(conf).rank(pct=True).to_numpy() * 5).astype(int), 4)
    agree = (labels == gold[:, None]).mean(axis=1)
    rows[0]["agreement_by_confidence_fifth"] = [float(agree[fifth == q].mean()) for q in range(5)]
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200, help="fresh score samples per crowd (plug-in bias; dispersion)")
    ap.add_argument("--reps-debiased", type=int, default=40, help="of which the debiased estimate runs on")
    ap.add_argument("--pop-items", type=int, default=2_000_000, help="items of the population Monte Carlo")
    ap.add_argument("--reps-simulated", type=int, default=5,
                    help="crowds per binary set relabelled from the gold-measured rates and refitted")
    ap.add_argument("--no-fits", action="store_true", help="skip the channel section (EM fits; about a minute)")
    ap.add_argument("--out", default=str(RESULTS / "real_data_reference.json"))
    args = ap.parse_args(argv)
    root = shared_data_dir()
    if root is None:
        print(f"real_data_reference: no shared data folder ({SHARED_DATA_HINT}); nothing run.")
        return 0
    info = machine()
    t0 = time.process_time()
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp:
        warnings.simplefilter("ignore")  # flagged workers and sparse-crowd notes are expected here
        work = Path(tmp)
        rows = [dict(section="reference", **r) for r in reference_rows(root, work)]
        print_table(rows, ["set", "route", "lower", "upper", *REFERENCE_KEYS, "covers_plugin", "covers_debiased"])
        rows += [dict(section="plugin_bias", **r) for r in plugin_bias_rows(
            root, work, reps=args.reps, reps_debiased=args.reps_debiased, pop_items=args.pop_items)]
        if not args.no_fits:
            for name in BINARY_CROWDS:
                part = _binary_channel_rows(name, root, work, args.reps, args.reps_simulated)
                print_table(part, ["set", "channels", "labels", "debiased", "lower", "upper", "reference_ece_debiased",
                                   "agreement_with_gold", "ece_against_fit_label", "majority_wrong_observed",
                                   "majority_wrong_independent"])
                rows += [dict(section="channels", **r) for r in part]
            part = _multiclass_channel_rows("cifar10n_10class", root, work)
            print_table(part, ["set", "channels", "debiased", "lower", "upper", "reference_ece_debiased",
                               "mean_diagonal"])
            print("agreement with y_ref by confidence fifth:", np.round(part[0]["agreement_by_confidence_fifth"], 3))
            rows += [dict(section="channels", **r) for r in part]
    info["cpu_s"] = round(time.process_time() - t0, 1)
    write_json("real_data_reference", info, {"reps": args.reps, "reps_debiased": args.reps_debiased,
                                             "pop_items": args.pop_items, "reps_simulated": args.reps_simulated,
                                             "fits": not args.no_fits}, rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
