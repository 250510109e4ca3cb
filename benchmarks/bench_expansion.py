"""Cost and result of the model expansion of ``evaluate`` (issue 36) on CIFAR-10N, binary and 10 classes, both
routes side by side.

For each data set (``vehicle``: ``cifar10n_vehicle.csv``, binary; ``10class``: ``cifar10n_10class.csv``, 10 classes;
50,000 items each, shared data folder), each route (``em``, ``nuts``) and each setting (``expand=False``: evaluate
without the expansion; ``expand=True``) one fresh Python process loads the data and times ``evaluate(data,
method=...)`` with the defaults (checks on; for 10 classes ``evaluate_multiclass``'s: EM with 200 refits or NUTS 2 x
500, 15 bins), so compilation is included as a command-line user pays it. The order alternates (off, on, off, on,
...) ``--reps`` times so that both settings see the same machine load; the load average is recorded. Each row: wall
time, CPU seconds of the child process (all its threads; steadier than wall time on a loaded shared machine),
headline NC-ECE, interval, headline model, weights, the shared model's figure, whether the interval covers the
reference-label ECE (0.0163 binary, top-label 0.0931 for 10 classes; docs/model_checks.md), and for the binary
expansion where its time went (the richer fit, the PSIS-LOO, the propagation of its channels).

Run: ``PYTHONPATH=. python benchmarks/bench_expansion.py [--reps 2] [--reps-k 1] [--sets vehicle,10class]
[--routes em,nuts]`` (``--reps-k``: repeats of the slow 10-class runs, default ``--reps``)
-> ``benchmarks/results/bench_expansion.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import machine, median, write_json  # noqa: E402

#: Reference-label ECE of the CIFAR-10N vehicle scores (10 equal-width bins) and top-label ECE of the 10-class
#: probabilities (15 bins) against the original CIFAR-10 labels (docs/model_checks.md).
REFERENCE_ECE = {"vehicle": 0.0163, "10class": 0.0931}

_CHILD = r"""
import json, os, time, warnings
warnings.simplefilter("ignore")
import pandas as pd
from noisycal_bayes import evaluate
import noisycal_bayes.diagnostics.alternatives as alt
import noisycal_bayes.propagate.group_channels as gc

spent = {"rich_fit_s": 0.0, "loo_s": 0.0, "propagation_s": 0.0}


def timed(mod, name, key):
    f = getattr(mod, name)

    def g(*a, **k):
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            spent[key] += time.perf_counter() - t0
    setattr(mod, name, g)


timed(alt, "fit_alternative", "rich_fit_s")
timed(alt, "row_loo", "loo_s")
timed(gc, "posterior_nc_ece_group_channels", "propagation_s")
if os.environ["SET"] == "vehicle":
    from noisycal_bayes.experiments.cifar10n import load_cifar10n
    data, _ = load_cifar10n()
else:
    from noisycal_bayes.data import MulticlassAnnotationSet
    from noisycal_bayes.experiments.real_data import shared_data_path
    raw = pd.read_csv(shared_data_path("cifar10n_10class.csv"))
    data = MulticlassAnnotationSet.from_wide(raw.set_index("item")[["ann1", "ann2", "ann3"]],
                                             raw[[f"p{k}" for k in range(10)]].to_numpy(), classes=range(10))
t, c = time.perf_counter(), time.process_time()
ev = evaluate(data, method=os.environ["ROUTE"], expand=os.environ["EXPAND"] == "1")
wall, cpu = time.perf_counter() - t, time.process_time() - c
nc, exp = ev.nc_ece, ev.expansion
row = {"wall_s": wall, "cpu_s": cpu, "value": nc.value, "debiased": nc.debiased, "lower": nc.lower, "upper": nc.upper,
       "headline_model": ev.headline_model, "load_avg_1min": os.getloadavg()[0]}
if os.environ["SET"] == "vehicle":
    row.update(spent)
if exp is not None:
    row.update(weights=exp.weights, rule=exp.rule, expansion_s=exp.seconds,
               shared=[ev.nc_ece_shared.value, ev.nc_ece_shared.lower, ev.nc_ece_shared.upper],
               models=exp.table.drop(columns=["extra"]).to_dict(orient="records"),
               extra=exp.table["extra"].tolist())
print("ROW" + json.dumps(row))
"""


def run_one(dataset: str, route: str, expand: bool) -> dict:
    env = dict(os.environ, SET=dataset, ROUTE=route, EXPAND="1" if expand else "0")
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("ROW"))
    row = json.loads(line[3:])
    ref = REFERENCE_ECE[dataset]
    row.update(dataset=dataset, route=route, expand=expand, stage=f"evaluate {dataset} {route} expand={expand}",
               n_items=50_000, n_annotators=3, reference_ece=ref,
               covers_reference=None if row["lower"] is None else bool(row["lower"] <= ref <= row["upper"]))
    return row


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--routes", default="em,nuts")
    ap.add_argument("--sets", default="vehicle,10class")
    ap.add_argument("--reps-k", type=int, default=None, help="repeats of the 10-class runs (default --reps)")
    ap.add_argument("--out", default=None, help="results path (default benchmarks/results/bench_expansion.json)")
    args = ap.parse_args(argv)
    info = machine()
    rows = []
    combos = [(d, r) for d in args.sets.split(",") for r in args.routes.split(",")]
    for dataset, route in combos:
        for _ in range(args.reps if dataset == "vehicle" or args.reps_k is None else args.reps_k):
            for expand in (False, True):
                rows.append(run_one(dataset, route, expand))
                r = rows[-1]
                print(f"{dataset:8s} {route:4s} expand={expand!s:5s} {r['wall_s']:6.1f} s (CPU {r['cpu_s']:6.1f} s)  "
                      f"NC-ECE {r['value']:.4f} "
                      f"[{r['lower']:.4f}, {r['upper']:.4f}] {r['headline_model']} load {r['load_avg_1min']:.1f}"
                      + (f" rich fit {r['rich_fit_s']:.1f} s" if r.get("rich_fit_s") else ""), flush=True)
    summary = []
    for dataset, route in combos:
        mine = [r for r in rows if r["dataset"] == dataset and r["route"] == route]
        off = median([r["wall_s"] for r in mine if not r["expand"]])
        on = median([r["wall_s"] for r in mine if r["expand"]])
        off_cpu = median([r["cpu_s"] for r in mine if not r["expand"]])
        on_cpu = median([r["cpu_s"] for r in mine if r["expand"]])
        summary.append({"stage": f"evaluate {dataset} {route}: expand on / off", "dataset": dataset, "route": route,
                        "n_items": 50_000, "n_annotators": 3, "reps": len(mine) // 2, "median_s": on, "median_off_s": off,
                        "ratio": on / off, "median_cpu_s": on_cpu, "median_cpu_off_s": off_cpu,
                        "ratio_cpu": on_cpu / off_cpu})
        print(f"{dataset} {route}: median {off:.1f} s off, {on:.1f} s on, ratio {on / off:.2f}; CPU {off_cpu:.1f} s "
              f"off, {on_cpu:.1f} s on, ratio {on_cpu / off_cpu:.2f}")
    write_json("bench_expansion", info, {"reps": args.reps, "reps_k": args.reps_k, "reference_ece": REFERENCE_ECE,
                                       "sets": args.sets,
                                       "routes": args.routes}, summary + rows, out=args.out)


if __name__ == "__main__":
    main()
