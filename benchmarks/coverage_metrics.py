"""Coverage and bias of the clean-label metrics (issue 37): :func:`noisycal_bayes.labels.clean_metrics` (binary) and
the metrics of :func:`noisycal_bayes.evaluate_multiclass` (K = 3 and 10), and the CIFAR-10N vehicle check.

Cells (``CELLS``): binary with 3 annotators (fpr 0.1-0.2, tpr 0.8-0.9), binary with 10 annotators each labelling
an item with probability 0.4 (fpr 0.15-0.3, tpr 0.7-0.85); K = 3 with 3 and 5 annotators and K = 10 with 3
(``simulate_multiclass`` defaults: accuracy 0.8, over-confident classifier), K = 3 with 3 at accuracy 0.6 (small
gaps); a sparse K = 3 crowd (200 annotators, 3 labels per item, about 30 labels each, accuracies U(0.5, 0.9): the
generator of ``benchmarks/coverage_crowds_multiclass.py``, ``crowd_data``). ``n_items`` items per data set.

Per data set: the default route a user gets. Binary: ``clean_metrics(data, n_replicates=300)`` (EM of the histogram
model on equal-mass score bins with the threshold 0.5 as an edge, weighted-likelihood bootstrap refits, Bayesian
bootstrap of the items). K classes: ``evaluate_multiclass(data, method="em", n_boot=50, checks=False)`` (grouped EM
on predicted class x 2 confidence quantiles, or on a crowd the partially pooled Dawid-Skene; the item-bootstrap
refits as parameter draws, each with its own items), whose metrics are read.

Target: the population metric (the interval's stated target), computed once per cell from 400,000 fresh items of
the same generating process with their clean labels (Monte Carlo error ~1e-3 or below). An interval covers when
``lower <= target <= upper``. Bias: mean of ``estimate - target`` with its standard error, for the posterior
estimate, the corrected-label estimate and the naive metric against the majority vote.

Resumable: every data set's row is written to ``coverage_metrics_rows.json`` (per cell, keyed by seed) as it
finishes; a rerun skips the seeds present, and the summary in ``coverage_metrics.json`` is recomputed from all rows.
Cells are visited round-robin, so that ``--max-minutes`` leaves every cell sampled.

CIFAR-10N vehicle (``--cifar``): ``clean_metrics`` on the 50,000 items with the three human labels, the ResNet-50
cross-validated scores (shared data README), threshold 0.5; the reference values are the metrics against the
original CIFAR-10 labels (``y_ref``; a sample target, so the run also uses ``bootstrap=False``).

Usage::

    python benchmarks/coverage_metrics.py --reps 200 --max-minutes 60     # resumes where the last run stopped
    python benchmarks/coverage_metrics.py --reps 200 --cells k10_J3 k3_crowd
    python benchmarks/coverage_metrics.py --cifar              # the real-data check only
    python benchmarks/coverage_metrics.py --render benchmarks/results/coverage_metrics.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import RESULTS, machine  # noqa: E402

import noisycal_bayes as nb  # noqa: E402
from noisycal_bayes.data import AnnotationSet  # noqa: E402
from noisycal_bayes.labels.metrics import MetricKernel, clean_metrics  # noqa: E402
from noisycal_bayes.simulate import simulate_annotations, simulate_multiclass  # noqa: E402

OUT = RESULTS / "coverage_metrics.json"
ROWS = RESULTS / "coverage_metrics_rows.json"
N_POP = 400_000
COLUMNS = ["estimate", "lower", "upper", "corrected_label", "majority_vote"]
CELLS = {
    "binary_J3": dict(kind="binary", fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], missing=0.0),
    "binary_J10_sparse": dict(kind="binary", fpr=list(np.linspace(0.15, 0.3, 10)), tpr=list(np.linspace(0.7, 0.85, 10)),
                              missing=0.6),
    # Small gaps (tpr - fpr 0.25-0.35): labels barely better than chance, the corrected labels' variance 10-15x
    # that of binary_J3's.
    "binary_J3_small_gap": dict(kind="binary", fpr=[0.3, 0.35, 0.3], tpr=[0.6, 0.6, 0.65], missing=0.0),
    "k3_J3": dict(kind="multiclass", n_classes=3, n_annotators=3),
    "k3_J5": dict(kind="multiclass", n_classes=3, n_annotators=5),
    "k10_J3": dict(kind="multiclass", n_classes=10, n_annotators=3),
    # Small gaps at K = 3: accuracy 0.6 against chance 1/3 (off-diagonal entries up to 0.4).
    "k3_J3_small_gap": dict(kind="multiclass", n_classes=3, n_annotators=3, accuracy=0.6),
    "k3_crowd": dict(kind="crowd", n_classes=3, n_annotators=200, labels_per_item=3),
}


def simulate(cell, n, seed):
    c = CELLS[cell]
    if c["kind"] == "binary":
        sim = simulate_annotations(n, fpr=c["fpr"], tpr=c["tpr"], curve="overconfident", missing=c["missing"],
                                   seed=seed)
        return sim.data, sim.data.scores, np.asarray(sim.clean_labels, dtype=np.int64)
    if c["kind"] == "crowd":
        from coverage_crowds_multiclass import crowd_data

        data, sim, _ = crowd_data(c["n_classes"], c["n_annotators"], n, c["labels_per_item"], seed)
        return data, sim.probs, np.asarray(sim.y, dtype=np.int64)
    sim = simulate_multiclass(n, c["n_annotators"], c["n_classes"], accuracy=c.get("accuracy", 0.8), seed=seed)
    return sim.data, sim.probs, np.asarray(sim.y, dtype=np.int64)


def population(cell):
    """The population metrics: the classifier and the clean labels do not depend on the annotators."""
    c = CELLS[cell]
    if c["kind"] == "binary":
        sim = simulate_annotations(N_POP, fpr=c["fpr"][:2], tpr=c["tpr"][:2], curve="overconfident", seed=10 ** 6)
        kern = MetricKernel(scores=sim.data.scores)
        y = np.asarray(sim.clean_labels, dtype=np.int64)
    else:
        sim = simulate_multiclass(N_POP, 1, c["n_classes"], seed=10 ** 6)
        kern = MetricKernel(probs=sim.probs)
        y = np.asarray(sim.y, dtype=np.int64)
    return {m: float(v[0]) for m, v in kern.values(y).items()}


def one(cell, n, seed, n_boot=50):
    """One data set's row: ``{metric: [estimate, lower, upper, corrected_label, majority_vote]}`` and its CPU s."""
    data, _, _ = simulate(cell, n, seed)
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if CELLS[cell]["kind"] == "binary":
            res = clean_metrics(data, n_replicates=300, seed=seed)
        else:
            res = nb.evaluate_multiclass(data, method="em", n_boot=n_boot, checks=False, seed=seed).metrics
    t = res.table.set_index("metric")
    return {"seed": seed, "cpu_s": time.process_time() - t0,
            "metrics": {m: [float(t.loc[m, c]) for c in COLUMNS] for m in t.index}}


def summarise(cell, rows, truth):
    out = []
    for m in rows[0]["metrics"]:
        v = np.array([r["metrics"][m] for r in rows], dtype=np.float64)
        est, lo, hi, corr, maj = v.T
        k = len(rows)
        cov = float(np.mean((lo <= truth[m]) & (truth[m] <= hi)))
        s = {"cell": cell, "metric": m, "n_sets": k, "target": truth[m], "coverage": cov,
             "coverage_se": float(np.sqrt(0.9 * 0.1 / k)), "width": float(np.mean(hi - lo))}
        for x, name in ((est, "bias"), (corr, "bias_corrected_label"), (maj, "bias_majority_vote")):
            d = x[np.isfinite(x)] - truth[m]
            s[name], s[name + "_se"] = float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size))
        out.append(s)
    return out


def label(cell, n_boot, seed0=1000):
    """A cell's name in the summary: the K-class cells at another ``n_boot`` than 50 carry it, other seeds theirs."""
    name = cell if n_boot == 50 or CELLS[cell]["kind"] == "binary" else f"{cell}_nboot{n_boot}"
    return name if seed0 == 1000 else f"{name}_seeds{seed0}"


def run(cells, reps, n, max_minutes=None, rows_path=ROWS, n_boot=50, seed0=1000):
    """Round-robin over ``cells`` up to ``reps`` data sets each (seeds ``seed0``, ``seed0 + 1``, ...), resuming from
    ``rows_path`` (rows stored under :func:`label`)."""
    store = json.loads(rows_path.read_text()) if rows_path.exists() else {}
    truths = {}
    for cell in cells:
        part = store.setdefault(label(cell, n_boot, seed0), {"n_items": n, "rows": {}})
        if part["n_items"] != n:
            raise SystemExit(f"{cell}: the stored rows have {part['n_items']} items, not {n}; use another --rows file.")
        truths[cell] = part.setdefault("truth", population(cell))
    t0 = time.time()
    for r in range(reps):
        for cell in cells:
            if max_minutes is not None and time.time() - t0 > 60 * max_minutes:
                break
            seed = seed0 + r
            rows = store[label(cell, n_boot, seed0)]["rows"]
            if str(seed) in rows:
                continue
            rows[str(seed)] = one(cell, n, seed, n_boot)
            rows_path.write_text(json.dumps(store) + "\n")
            print(f"{label(cell, n_boot, seed0)} seed {seed}: {rows[str(seed)]['cpu_s']:.1f} s CPU", flush=True)
    summary = []
    for cell in cells:
        name = label(cell, n_boot, seed0)
        rows = list(store[name]["rows"].values())
        if rows:
            summary += summarise(name, rows, truths[cell])
            print(pd.DataFrame([s for s in summary if s["cell"] == name]).round(4).to_string(), flush=True)
    return summary, {label(c, n_boot, seed0): len(store[label(c, n_boot, seed0)]["rows"]) for c in cells}


DIAGNOSIS = RESULTS / "coverage_metrics_diagnosis.json"
#: The replicate rules compared by ``--diagnose`` on the same EM refits: item weights fresh Exp(1) (``f``) or each
#: refit's own multiplicities (``j``, joint); clean labels drawn (``y``) or the posterior probabilities themselves
#: (``q``); ``jc``: the corrected-label estimate recomputed per refit with its items. ``fy`` was the shipped rule
#: until 2026-12-05, ``jy`` is it since.
RULES = ("fy", "fq", "jy", "jq", "jc")


def diagnose_one(cell, n, seed):
    """One data set of ``--diagnose``: the route's own refits (``evaluate_multiclass``, n_boot=50) turned into metric
    replicates by each rule of ``RULES``; per metric the plug-in estimates and each rule's 5/50/95% quantiles and sd."""
    import noisycal_bayes.evaluation.metrics as em
    from noisycal_bayes.core import annotator_weights, corrected_targets, usable_confusions
    from noisycal_bayes.labels.metrics import ClassPosterior
    from noisycal_bayes.models.inputs import class_arrays

    data, _, _ = simulate(cell, n, seed)
    captured, shipped = {}, em.multiclass_metrics_of
    em.multiclass_metrics_of = lambda d, s, res: (captured.setdefault("res", res), shipped(d, s, res))[1]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tab = nb.evaluate_multiclass(data, method="em", n_boot=50, checks=False, seed=seed).metrics.table
    finally:
        em.multiclass_metrics_of = shipped
    res = captured["res"]
    conf, prev = res["refits"]
    mult = res["refit_counts"].astype(np.float64)
    x = class_arrays(data, "diagnose")
    post = ClassPosterior((x.item, x.annotator, x.label, x.gold), data.n_items, np.asarray(res["fit"].groups), conf,
                          prev)
    kern = MetricKernel(probs=np.asarray(data.probs))
    n_s, k = conf.shape[0], data.n_classes
    qs = np.stack([post(s) for s in range(n_s)])
    rng = np.random.default_rng(seed)
    which = np.arange(300) % n_s
    u = rng.random((which.size, n, 1))
    y = np.minimum((u > np.cumsum(qs[which], axis=2)).sum(axis=2), k - 1).astype(np.int64)
    fresh = rng.standard_exponential((which.size, n))
    yts = []
    for s in range(n_s):
        with np.errstate(all="ignore"):
            wt = annotator_weights(conf[s], np.asarray(prev[s]).reshape(-1, k).mean(axis=0), rule="iv",
                                   usable=np.asarray(usable_confusions(conf[s])))
            yts.append(np.asarray(corrected_targets((x.item, x.annotator, x.label), n, conf[s], weights=np.asarray(wt))))
    yt = np.stack(yts)
    has = np.isfinite(yt).all(axis=2)
    draws = {"fy": kern.values(y, fresh), "fq": kern.values(qs[which], fresh), "jy": kern.values(y, mult[which]),
             "jq": kern.values(qs, mult), "jc": kern.values(np.where(has[..., None], yt, 1.0 / k), mult * has)}
    t = tab.set_index("metric")
    out = {}
    for m in t.index:
        out[m] = {c: float(t.loc[m, c]) for c in ("estimate", "posterior", "corrected_label", "majority_vote")}
        for rule in RULES:
            d = draws[rule][m][np.isfinite(draws[rule][m])]
            out[m][rule] = [float(v) for v in np.quantile(d, [0.05, 0.5, 0.95])] + [float(d.std())]
    return {"seed": seed, "metrics": out}


def diagnosis_summary(cell, rows, truth):
    """Per metric: the sampling sd of the posterior and corrected-label estimates across data sets, each rule's mean
    replicate sd over it (the corrected-label rule ``jc`` over the corrected-label sd), and each rule's coverage (the
    coarse metrics' rules shifted to the corrected-label centre, as the table does)."""
    out = []
    for m in rows[0]["metrics"]:
        g = [r["metrics"][m] for r in rows]
        post = np.array([x["posterior"] for x in g])
        corr = np.array([x["corrected_label"] for x in g])
        est = np.array([x["estimate"] for x in g])
        shift = est - post
        s = {"cell": cell, "metric": m, "n_sets": len(g), "target": truth[m], "sd_posterior": float(post.std(ddof=1)),
             "sd_corrected_label": float(corr.std(ddof=1)), "centre": "corrected labels" if np.any(shift) else
             "posterior"}
        for rule in RULES:
            ref = s["sd_corrected_label"] if rule == "jc" else s["sd_posterior"]
            s[f"sd_ratio_{rule}"] = float(np.mean([x[rule][3] for x in g]) / ref)
            sh = np.zeros_like(shift) if rule == "jc" else shift
            s[f"coverage_{rule}"] = float(np.mean([x[rule][0] + d <= truth[m] <= x[rule][2] + d
                                                   for x, d in zip(g, sh)]))
        out.append(s)
    return out


def diagnose(cell, reps, n, path=DIAGNOSIS):
    """``--diagnose``: resumable, rows and summary in ``coverage_metrics_diagnosis.json``."""
    body = json.loads(path.read_text()) if path.exists() else {}
    part = body.setdefault(cell, {"n_items": n, "rows": {}})
    truth = part.setdefault("truth", population(cell))
    for r in range(reps):
        if str(1000 + r) not in part["rows"]:
            part["rows"][str(1000 + r)] = diagnose_one(cell, n, 1000 + r)
            path.write_text(json.dumps(body) + "\n")
            print(f"{cell} seed {1000 + r}", flush=True)
    part["summary"] = diagnosis_summary(cell, list(part["rows"].values()), truth)
    path.write_text(json.dumps(body) + "\n")
    print(pd.DataFrame(part["summary"]).round(3).to_string(), flush=True)


def cifar():
    from noisycal_bayes.experiments.real_data import shared_data_path

    path = shared_data_path("cifar10n_vehicle.csv")
    if path is None:
        print("cifar10n_vehicle.csv not found (shared data folder): skipped")
        return None
    frame = pd.read_csv(path)
    ann = ["ann1", "ann2", "ann3"]
    z = frame["score"].clip(0, 1).to_numpy()
    data = AnnotationSet.from_wide(frame[ann].to_numpy(), z, annotators=ann)
    ref = {m: float(v[0]) for m, v in MetricKernel(scores=z).values(frame["y_ref"].to_numpy().astype(np.int64)).items()}
    out = {}
    for boot in (False, True):
        t0 = time.time()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            res = clean_metrics(data, n_replicates=1000, bootstrap=boot, seed=0)
        t = res.table.set_index("metric")
        out["sample" if not boot else "population"] = {
            "seconds": time.time() - t0, "n_groups": res.n_groups, "warnings": [str(x.message)[:200] for x in w],
            "rows": [{"metric": m, "reference": ref[m], "estimate": t.loc[m, "estimate"], "lower": t.loc[m, "lower"],
                      "upper": t.loc[m, "upper"], "covers": bool(t.loc[m, "lower"] <= ref[m] <= t.loc[m, "upper"]),
                      "corrected_label": t.loc[m, "corrected_label"], "majority_vote": t.loc[m, "majority_vote"]}
                     for m in t.index]}
        print(pd.DataFrame(out["sample" if not boot else "population"]["rows"]).round(4).to_string(), flush=True)
    return out


def render(path):
    body = json.loads(Path(path).read_text())
    lines = []
    if body.get("summary"):
        s = pd.DataFrame(body["summary"])
        lines += ["| cell | metric | data sets | coverage (SE) | mean width | bias posterior (SE) | bias corrected "
                  "labels (SE) | bias majority vote (SE) |", "|---|---|---|---|---|---|---|---|"]
        for r in s.itertuples():
            lines.append(f"| {r.cell} | {r.metric} | {r.n_sets} | {r.coverage:.2f} ({r.coverage_se:.2f}) | "
                         f"{r.width:.3f} | {r.bias:+.4f} ({r.bias_se:.4f}) | {r.bias_corrected_label:+.4f} "
                         f"({r.bias_corrected_label_se:.4f}) | {r.bias_majority_vote:+.4f} ({r.bias_majority_vote_se:.4f}) |")
    if body.get("cifar"):
        for key, part in body["cifar"].items():
            lines += ["", f"CIFAR-10N vehicle, {key} target ({part['n_groups']} groups, {part['seconds']:.0f} s):", "",
                      "| metric | reference (y_ref) | estimate | 90% interval | covers | corrected labels | majority vote |",
                      "|---|---|---|---|---|---|---|"]
            for r in part["rows"]:
                lines.append(f"| {r['metric']} | {r['reference']:.4f} | {r['estimate']:.4f} | [{r['lower']:.4f}, "
                             f"{r['upper']:.4f}] | {'yes' if r['covers'] else 'no'} | {r['corrected_label']:.4f} | "
                             f"{r['majority_vote']:.4f} |")
    print("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--n-items", type=int, default=2000)
    ap.add_argument("--cells", nargs="*", default=list(CELLS))
    ap.add_argument("--seed0", type=int, default=1000, help="the first data set's seed (the cells share 1000, ...)")
    ap.add_argument("--n-boot", type=int, default=50, help="the K-class route's refits (evaluate's default: 200)")
    ap.add_argument("--max-minutes", type=float, default=None, help="start no new data set after this many minutes")
    ap.add_argument("--rows", default=str(ROWS), help="the per-data-set rows (resumed)")
    ap.add_argument("--cifar", action="store_true", help="the CIFAR-10N check only")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--render", default=None)
    ap.add_argument("--diagnose", default=None, metavar="CELL",
                    help="compare the replicate rules (RULES) on one K-class cell's refits")
    args = ap.parse_args(argv)
    if args.render:
        render(args.render)
        return
    if args.diagnose:
        diagnose(args.diagnose, args.reps, args.n_items)
        return
    out_path = Path(args.out)
    body = json.loads(out_path.read_text()) if out_path.exists() else {}
    body["benchmark"] = "coverage_metrics"
    body["machine"] = machine()
    if args.cifar:
        body["cifar"] = cifar()
    else:
        summary, counts = run(args.cells, args.reps, args.n_items, args.max_minutes, Path(args.rows), args.n_boot, args.seed0)
        old = [s for s in body.get("summary", []) if s["cell"] not in counts]
        body["summary"] = old + summary
        settings = body.setdefault("settings", {})
        settings.update({"n_items": args.n_items, "n_pop": N_POP, "level": 0.9, "rows": Path(args.rows).name})
        settings.setdefault("reps_per_cell", {}).update(counts)
    out_path.write_text(json.dumps(body, indent=1, default=float) + "\n")
    print(f"written {out_path}")


if __name__ == "__main__":
    main()
