"""The score-dependent channel model's mode by EM (``fit_em(model="score_dependent")``) against MAP
(``fit_map(model="score_dependent")``, L-BFGS on NumPyro's potential) on CIFAR-10N vehicle (50,000 items, 3
annotators, 5 equal-mass score groups; the shared data folder).

Each repeat runs one fresh Python process per method (so the first call pays its compilation, as a command-line user
does) that loads the data and times two calls of the fit: ``first_cpu_s`` (compilation included) and ``warm_cpu_s``
(the same call again, compiled programs cached), in CPU seconds of the process (``time.process_time``: every thread;
the machine is shared, so CPU seconds move less with the load than wall time), with the wall times beside them. The
order alternates (em, map, em, map, ...) ``--reps`` times. Each row also records the fit's log posterior density (the
same function for both: NumPyro's log density in its unconstrained coordinates; the EM's objective equals it to
rounding, tests/inference/test_score_em.py) and the group channels; the summary gives the medians, the ratios map /
em and the largest difference of the two modes.

Run: ``PYTHONPATH=. python benchmarks/bench_score_em.py [--reps 3]`` -> ``benchmarks/results/bench_score_em.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import machine, median, write_json  # noqa: E402

_CHILD = r"""
import json, os, time, warnings
warnings.simplefilter("ignore")
import numpy as np
from noisycal_bayes.experiments.cifar10n import load_cifar10n
from noisycal_bayes.inference import fit_em, fit_map

data, _ = load_cifar10n()
fit = {"em": lambda: fit_em(data, model="score_dependent"), "map": lambda: fit_map(data, model="score_dependent")}[
    os.environ["METHOD"]]
row = {}
for key in ("first", "warm"):
    c, w = time.process_time(), time.perf_counter()
    res = fit()
    row[key + "_cpu_s"], row[key + "_wall_s"] = time.process_time() - c, time.perf_counter() - w
row["objective"] = (res.details["objective"] if res.method == "em" else res.details["alternative"]["log_density"])
row.update(n_iter=res.n_iter, converged=res.converged, load_avg_1min=os.getloadavg()[0],
           fpr_group=res.point["fpr_group"].tolist(), tpr_group=res.point["tpr_group"].tolist(),
           prevalence=res.point["prevalence"].tolist(), tau_fpr=float(res.point["tau_fpr"]),
           tau_u=float(res.point["tau_u"]))
print("ROW" + json.dumps(row))
"""


def run_one(method: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD], env=dict(os.environ, METHOD=method), capture_output=True,
                         text=True, check=True)
    row = json.loads(next(x for x in out.stdout.splitlines() if x.startswith("ROW"))[3:])
    row.update(method=method, stage=f"fit_{method}(model='score_dependent') CIFAR-10N vehicle", n_items=50_000,
               n_annotators=3, n_groups=5)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None, help="results path (default benchmarks/results/bench_score_em.json)")
    args = ap.parse_args(argv)
    info = machine()
    rows = []
    for _ in range(args.reps):
        for method in ("em", "map"):
            rows.append(run_one(method))
            r = rows[-1]
            print(f"{method:3s} first {r['first_cpu_s']:6.2f} cpu s ({r['first_wall_s']:6.2f} wall)  warm "
                  f"{r['warm_cpu_s']:6.2f} cpu s ({r['warm_wall_s']:6.2f} wall)  objective {r['objective']:.6f}  "
                  f"iterations {r['n_iter']}  load {r['load_avg_1min']:.1f}", flush=True)
    summary = []
    med = {m: {k: median([r[k] for r in rows if r["method"] == m]) for k in
               ("first_cpu_s", "warm_cpu_s", "first_wall_s", "warm_wall_s")} for m in ("em", "map")}
    em, mp = (next(r for r in rows if r["method"] == m) for m in ("em", "map"))
    diff = {k: float(np.max(np.abs(np.asarray(em[k]) - np.asarray(mp[k])))) for k in
            ("fpr_group", "tpr_group", "prevalence")}
    for key in ("first", "warm"):
        summary.append({"stage": f"score_dependent mode on CIFAR-10N vehicle, {key} call: map / em",
                        "n_items": 50_000, "n_annotators": 3, "n_groups": 5, "reps": args.reps,
                        "median_s": med["em"][f"{key}_cpu_s"], "median_map_s": med["map"][f"{key}_cpu_s"],
                        "ratio": med["map"][f"{key}_cpu_s"] / med["em"][f"{key}_cpu_s"],
                        "median_wall_s": med["em"][f"{key}_wall_s"], "median_map_wall_s": med["map"][f"{key}_wall_s"],
                        "unit": "cpu seconds", "objective_em_minus_map": em["objective"] - mp["objective"],
                        "max_abs_diff": diff})
        s = summary[-1]
        print(f"{key}: em {s['median_s']:.2f} cpu s, map {s['median_map_s']:.2f} cpu s, ratio map/em {s['ratio']:.1f}")
    print(f"modes: objective em - map {summary[0]['objective_em_minus_map']:.3g}, max |diff| {diff}")
    write_json("bench_score_em", info, {"reps": args.reps}, summary + rows, out=args.out)


if __name__ == "__main__":
    main()
