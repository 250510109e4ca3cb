"""Is the item bootstrap of the corrected-label metrics too narrow on K = 3? A clean experiment with an oracle control
(issue 37; docs/metrics.md, *K = 3: the seeds, not the bootstrap*).

``coverage_metrics.py`` found the K-class cells' AUC, Brier and log loss (the corrected-label estimator and its
EM-refit replicates) 1-3 binomial standard errors below 0.90 on the data sets of seeds 1000-1199, which every K = 3
cell shares. This script isolates that estimator. Per data set (``simulate_multiclass(n, J, 3, seed=seed)``, the
cells' generator: random channels with accuracy 0.8, an over-confident classifier):

* ``route``: the confusion of the route's EM (``multiclass_em_estimator(model="grouped", n_quantiles=2,
  n_starts=4)``: predicted class x 2 confidence quantiles), the corrected-label metrics
  (``core.corrected_targets`` with ``annotator_weights(rule="iv")``, read by ``MetricKernel``); ``n_boot`` item
  resamples (multinomial rows), each refitted warm from the full fit and read on its own item multiplicities (the
  shipped joint draws), percentile interval;
* ``oracle``: the same estimator and resamples with the *true* channels, not refitted. Then the estimate is a mean
  of independent item terms, for which the item bootstrap is first-order exact: a negative control, which tells how
  much of a cell's shortfall is its seeds' chance.

Both read the same resamples of the same data sets, so their coverages compare pairwise. ``--fixed-channels`` draws
every data set's labels from one channel (``random_confusion(J, 3, seed=12345)``) instead of the seed's own.

Results (per block of seeds, every data set's estimate, 5/50/95% replicate quantiles and replicate sd) in
``benchmarks/results/corrected_label_bootstrap.json``; ``--summary`` prints coverage per block and pooled, the paired
route - oracle difference, and the route's bootstrap sd over its sampling sd relative to the oracle's (the oracle as a
control variate: that ratio's noise is far below the raw ratio's).

Usage::

    python benchmarks/corrected_label_bootstrap.py --seed0 5000 --sets 400          # ~0.5-1 s of CPU a data set
    python benchmarks/corrected_label_bootstrap.py --seed0 1000 --sets 200          # the cells' seeds
    python benchmarks/corrected_label_bootstrap.py --annotators 5 --seed0 2000 --sets 200
    python benchmarks/corrected_label_bootstrap.py --n-items 8000 --seed0 5000 --sets 200
    python benchmarks/corrected_label_bootstrap.py --summary
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import RESULTS, machine  # noqa: E402
from coverage_metrics import population  # noqa: E402

from noisycal_bayes.core import annotator_weights, corrected_targets, usable_confusions  # noqa: E402
from noisycal_bayes.inference import multiclass_em_estimator  # noqa: E402
from noisycal_bayes.labels.metrics import MetricKernel  # noqa: E402
from noisycal_bayes.reference.nc_ece_bootstrap import _resample  # noqa: E402
from noisycal_bayes.simulate import random_confusion, simulate_multiclass  # noqa: E402

OUT = RESULTS / "corrected_label_bootstrap.json"
K = 3
METRICS = ("accuracy", "brier", "log_loss", "auc", "auc[1]")
VARIANTS = ("oracle", "route")


class _Responses:
    """The ``(item, annotator, label, n_items)`` record ``_resample`` reads."""

    def __init__(self, item, annotator, label, n_items):
        self.item, self.annotator, self.label, self.n_items = item, annotator, label, n_items


def corrected_metrics(kern, resp, n, conf, prev, item_weights):
    """The corrected-label estimate of ``METRICS`` with channels ``conf`` on items weighted ``item_weights`` (as
    ``labels.metrics`` computes it for the coarse metrics: IV annotator weights at the group-averaged prevalence,
    items without a usable annotator left out)."""
    with np.errstate(all="ignore"):
        wt = annotator_weights(conf, np.asarray(prev).reshape(-1, K).mean(axis=0), rule="iv",
                               usable=np.asarray(usable_confusions(conf)))
        yt = np.asarray(corrected_targets(resp, n, conf, weights=np.asarray(wt)))
    has = np.isfinite(yt).all(axis=1)
    v = kern.values(np.where(has[:, None], yt, 1.0 / K), (item_weights * has)[None], metrics=list(METRICS))
    return np.array([v[m][0] for m in METRICS])


def one(seed, n, n_annotators, n_boot, fixed):
    """One data set: per variant the estimate, the replicates' 5/50/95% quantiles and sd, and its CPU seconds."""
    sim = simulate_multiclass(n, n_annotators, K, confusion=fixed, seed=seed)
    truth_conf = np.asarray(sim.confusion)
    resp = (np.asarray(sim.item), np.asarray(sim.annotator), np.asarray(sim.label))
    rec = _Responses(*resp, n)
    probs = np.asarray(sim.probs)
    kern = MetricKernel(probs=probs)
    rng = np.random.default_rng(seed + 77)
    rows_all = [rng.integers(0, n, n) for _ in range(n_boot)]
    est = multiclass_em_estimator(model="grouped", n_quantiles=2, n_starts=4, seed=0)
    out = {}
    for name in VARIANTS:
        t0 = time.process_time()
        conf, prev = (truth_conf, np.full(K, 1.0 / K)) if name == "oracle" else est(resp, n, probs)
        value = corrected_metrics(kern, resp, n, conf, prev, np.ones(n))
        reps = []
        for rows in rows_all:
            mult = np.bincount(rows, minlength=n).astype(np.float64)
            c_r, p_r = (conf, prev) if name == "oracle" else est(_resample(rec, rows), n, probs[rows],
                                                                 init=(conf, prev))
            reps.append(corrected_metrics(kern, resp, n, c_r, p_r, mult))
        reps = np.array(reps)
        out[name] = {"est": value.tolist(), "q": np.quantile(reps, [0.05, 0.5, 0.95], axis=0).tolist(),
                     "sd": reps.std(axis=0, ddof=1).tolist(), "cpu_s": time.process_time() - t0}
    return out


def block_name(n, n_annotators, seed0, fixed):
    return f"J{n_annotators}_n{n}_seeds{seed0}" + ("_fixed" if fixed else "")


def run(seed0, sets, n, n_annotators, n_boot, fixed, path=OUT):
    body = json.loads(path.read_text()) if path.exists() else {"blocks": {}}
    body.setdefault("truth", population("k3_J3"))
    name = block_name(n, n_annotators, seed0, fixed)
    block = body["blocks"].setdefault(name, {"n_items": n, "n_annotators": n_annotators, "n_boot": n_boot,
                                             "fixed_channels": fixed, "machine": machine(), "rows": {}})
    conf = random_confusion(n_annotators, K, accuracy=0.8, seed=12345) if fixed else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(seed0, seed0 + sets):
            if str(seed) in block["rows"]:
                continue
            block["rows"][str(seed)] = one(seed, n, n_annotators, n_boot, conf)
            path.write_text(json.dumps(body) + "\n")
            print(name, seed, {k: round(v["cpu_s"], 2) for k, v in block["rows"][str(seed)].items()}, flush=True)


def summarise(rows, truth):
    """Per metric: each variant's coverage, the paired difference with its SE, and the control-variate ratio
    ``(mean replicate variance route / oracle)^(1/2) / (sampling sd route / oracle)`` with a bootstrap SE over data
    sets (1 when the route's bootstrap is as right as the oracle's)."""
    rng = np.random.default_rng(0)
    out = []
    for i, m in enumerate(METRICS):
        q = {v: np.array([r[v]["q"] for r in rows])[:, :, i] for v in VARIANTS}
        cov = {v: (q[v][:, 0] <= truth[m]) & (truth[m] <= q[v][:, 2]) for v in VARIANTS}
        d = cov["route"].astype(float) - cov["oracle"]
        e = {v: np.array([r[v]["est"][i] for r in rows]) for v in VARIANTS}
        s = {v: np.array([r[v]["sd"][i] for r in rows]) for v in VARIANTS}

        def ratio(ix):
            boot = np.sqrt((s["route"][ix] ** 2).mean() / (s["oracle"][ix] ** 2).mean())
            return boot / (e["route"][ix].std() / e["oracle"][ix].std())

        k = len(rows)
        out.append({"metric": m, "n_sets": k, "coverage_oracle": float(cov["oracle"].mean()),
                    "coverage_route": float(cov["route"].mean()), "coverage_se": float(np.sqrt(0.09 / k)),
                    "route_minus_oracle": float(d.mean()), "route_minus_oracle_se": float(d.std(ddof=1) / np.sqrt(k)),
                    "sd_ratio_route_over_oracle": float(ratio(np.arange(k))),
                    "sd_ratio_se": float(np.std([ratio(rng.integers(0, k, k)) for _ in range(1000)])),
                    "bias_route_in_sd": float((e["route"].mean() - truth[m]) / e["route"].std())})
    return out


def summary(path=OUT):
    body = json.loads(path.read_text())
    truth, blocks = body["truth"], body["blocks"]
    groups = {name: list(b["rows"].values()) for name, b in blocks.items()}
    for key in {(b["n_annotators"], b["n_items"], b["fixed_channels"]) for b in blocks.values()}:
        names = [nm for nm, b in blocks.items() if (b["n_annotators"], b["n_items"], b["fixed_channels"]) == key]
        if len(names) > 1:
            groups[f"J{key[0]}_n{key[1]}" + ("_fixed" if key[2] else "") + "_pooled"] = sum(
                (list(blocks[nm]["rows"].values()) for nm in names), [])
    body["summary"] = {name: summarise(rows, truth) for name, rows in groups.items() if len(rows) > 10}
    path.write_text(json.dumps(body) + "\n")
    for name, rows in body["summary"].items():
        print(f"\n{name} ({rows[0]['n_sets']} data sets; binomial SE {rows[0]['coverage_se']:.3f})")
        for r in rows:
            print(f"  {r['metric']:9s} coverage oracle {r['coverage_oracle']:.3f} route {r['coverage_route']:.3f} "
                  f"(route - oracle {r['route_minus_oracle']:+.3f}, SE {r['route_minus_oracle_se']:.3f}); "
                  f"route's bootstrap sd / sampling sd, over the oracle's: {r['sd_ratio_route_over_oracle']:.3f} "
                  f"(SE {r['sd_ratio_se']:.3f}); bias {r['bias_route_in_sd']:+.2f} sd")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed0", type=int, default=5000)
    ap.add_argument("--sets", type=int, default=200)
    ap.add_argument("--n-items", type=int, default=2000)
    ap.add_argument("--annotators", type=int, default=3)
    ap.add_argument("--n-boot", type=int, default=200, help="evaluate_multiclass's default")
    ap.add_argument("--fixed-channels", action="store_true")
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    if not a.summary:
        run(a.seed0, a.sets, a.n_items, a.annotators, a.n_boot, a.fixed_channels)
    summary()
