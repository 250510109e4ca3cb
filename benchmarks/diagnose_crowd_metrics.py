"""Why the sparse crowd's clean-label metrics were biased (issue 37): the same data sets' metrics on three sets of
channel draws, side by side.

Data: the ``k3_crowd`` cell of ``coverage_metrics.py`` (K = 3, 200 annotators, 3 labels per item, 2,000 items,
accuracies U(0.5, 0.9): ``coverage_crowds_multiclass.crowd_data``), seeds 1000, 1001, ... Per data set,
``evaluate_multiclass(data, method="em", n_boot=50, checks=False)`` is run once, with its two refit estimators spied
on, and ``multiclass_metrics`` (300 replicates) is run on:

* ``free``: the 50 refits whose population is refitted too, each with its item multiplicities (estimate and
  replicates: the rule until 2026-12-05);
* ``kept``: the 50 refits that keep the full fit's population (the NC-ECE's draws), likewise;
* ``centred``: the route's own metrics since 2026-12-05: the full fit's estimates, the ``free`` replicates moved to
  them (``multiclass_metrics(centre=)``);
* ``full``: the full-sample fit alone (one draw: fresh Exp(1) item weights and label draws, no channel uncertainty);
* ``true``: the generator's own confusions, one draw as ``full`` (the prevalence re-estimated as always): what is
  left of a bias with the channels known.

Per metric and variant: the estimate, interval, corrected-label value, the replicates' mean and sd, and the metric of
the data set's own clean labels (``sample``). The summary compares the estimates' bias (against the population target
of ``coverage_metrics.population`` and against each set's sample value, whose difference removes the items' sampling
noise) and the replicates' sd with the sd of the estimate across data sets (independent draws: the truth an interval
width is compared with).

Usage::

    python benchmarks/diagnose_crowd_metrics.py --reps 12      # resumable: rows in the output file
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

import coverage_metrics as cm  # noqa: E402

OUT = RESULTS / "coverage_metrics_crowd_diagnosis.json"
VARIANTS = ("free", "kept", "centred", "full", "true")
FIELDS = ("estimate", "lower", "upper", "corrected_label", "posterior")


def one(seed, n=2000):
    import noisycal_bayes as nb
    import noisycal_bayes.evaluation.metrics as em
    import noisycal_bayes.inference as inference
    from noisycal_bayes.labels.metrics import ClassPosterior, MetricKernel, multiclass_metrics
    from noisycal_bayes.models.inputs import class_arrays

    from coverage_crowds_multiclass import crowd_data

    c = cm.CELLS["k3_crowd"]
    data, sim, _ = crowd_data(c["n_classes"], c["n_annotators"], n, c["labels_per_item"], seed)   # cm.simulate's
    y = np.asarray(sim.y, dtype=np.int64)
    true_conf = np.asarray(sim.confusion)[np.unique(sim.annotator)]     # data's annotators: those drawn at all
    t0 = time.process_time()
    refits, original = {"free": [], "kept": []}, inference.multiclass_em_estimator

    def spy(**kw):
        est, kind = original(**kw), "kept" if kw.get("population") is not None else "free"

        def run(*a, **k):
            out = est(*a, **k)
            if k.get("init") is not None:
                refits[kind].append(np.asarray(out[0]))
            return out
        return run

    cap, shipped = {}, em.multiclass_metrics_of
    inference.multiclass_em_estimator = spy
    em.multiclass_metrics_of = lambda d, s, res: (cap.setdefault("res", res), shipped(d, s, res))[1]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ev = nb.evaluate_multiclass(data, method="em", n_boot=50, checks=False, seed=seed)
    finally:
        inference.multiclass_em_estimator, em.multiclass_metrics_of = original, shipped
    res = cap["res"]
    fit = res["fit"]
    x = class_arrays(data, "diagnose")
    resp, g, probs = (x.item, x.annotator, x.label, x.gold), np.asarray(fit.groups), {"model": np.asarray(data.probs)}
    prev = np.asarray(fit.prevalence)[None]
    variants = {"centred": ev.metrics}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in ("free", "kept"):
            post = ClassPosterior(resp, data.n_items, g, np.stack(refits[kind]), prev)
            variants[kind] = multiclass_metrics(data, probs, post, n_replicates=300, seed=seed,
                                                item_weights=res["refit_counts"])
        variants["full"] = multiclass_metrics(data, probs, ClassPosterior(resp, data.n_items, g,
                                                                          np.asarray(fit.confusion)[None], prev),
                                              n_replicates=300, seed=seed)
        variants["true"] = multiclass_metrics(data, probs, ClassPosterior(resp, data.n_items, g, true_conf[None], prev),
                                              n_replicates=300, seed=seed)
    sample = {m: float(v[0]) for m, v in MetricKernel(probs=np.asarray(data.probs)).values(y).items()}
    out = {}
    for name in VARIANTS:
        r = variants[name]
        t = r.table.set_index("metric")
        for m in t.index:
            d = r.draws["model"][m]
            out.setdefault(m, {"sample": sample[m]})[name] = ([float(t.loc[m, c]) for c in FIELDS]
                                                              + [float(np.mean(d)), float(np.std(d))])
    return {"seed": seed, "cpu_s": time.process_time() - t0, "metrics": out}


def summarise(rows, truth):
    out = []
    for m in rows[0]["metrics"]:
        samp = np.array([r["metrics"][m]["sample"] for r in rows])
        for v in VARIANTS:
            est, lo, hi, corr, _, rmean, rsd = np.array([r["metrics"][m][v] for r in rows]).T
            k = est.size
            out.append({"metric": m, "variant": v, "n_sets": k, "target": truth[m],
                        "bias": est.mean() - truth[m], "bias_se": est.std(ddof=1) / np.sqrt(k),
                        "bias_vs_sample": np.mean(est - samp), "bias_vs_sample_se": np.std(est - samp, ddof=1) / np.sqrt(k),
                        "bias_corrected_label": corr.mean() - truth[m], "sd_estimate": est.std(ddof=1),
                        "replicate_sd": rsd.mean(), "sd_ratio": rsd.mean() / est.std(ddof=1),
                        "replicate_mean_minus_estimate": np.mean(rmean - est),
                        "coverage": np.mean((lo <= truth[m]) & (truth[m] <= hi))})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    path = Path(args.out)
    body = json.loads(path.read_text()) if path.exists() else {"rows": {}}
    body["benchmark"], body["machine"] = "diagnose_crowd_metrics", machine()
    truth = body.setdefault("truth", cm.population("k3_crowd"))
    for seed in range(1000, 1000 + args.reps):
        if str(seed) not in body["rows"]:
            body["rows"][str(seed)] = one(seed)
            path.write_text(json.dumps(body, default=float) + "\n")
            print(f"seed {seed}: {body['rows'][str(seed)]['cpu_s']:.0f} s CPU", flush=True)
    body["summary"] = summarise(list(body["rows"].values()), truth)
    path.write_text(json.dumps(body, indent=1, default=float) + "\n")
    show = ["accuracy", "balanced_accuracy", "macro_f1", "recall[0]", "f1[2]", "auc", "brier", "log_loss"]
    print(pd.DataFrame([s for s in body["summary"] if s["metric"] in show]).round(4).to_string())


if __name__ == "__main__":
    main()
