"""Cost and result of the model expansion of ``evaluate`` (issue 36) on CIFAR-10N vehicle, both routes side by side.

For each route (``em``, ``nuts``) and each setting (``expand=False``: today's evaluate; ``expand=True``) one fresh
Python process loads ``cifar10n_vehicle.csv`` (50,000 items, shared data folder) and times ``evaluate(data,
method=...)`` with the defaults (checks on), so compilation is included as a command-line user pays it. The order
alternates (off, on, off, on, ...) ``--reps`` times so that both settings see the same machine load; the load
average is recorded. Each row: wall time, headline NC-ECE, interval, headline model, weights, the shared model's
figure, and whether the interval covers the reference-label ECE 0.0163 (docs/model_checks.md).

Run: ``PYTHONPATH=. python benchmarks/bench_expansion.py [--reps 2]`` -> ``benchmarks/results/bench_expansion.json``.
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

#: Reference-label ECE of the CIFAR-10N vehicle scores (10 equal-width bins; docs/model_checks.md).
REFERENCE_ECE = 0.0163

_CHILD = r"""
import json, os, time, warnings
warnings.simplefilter("ignore")
from noisycal_bayes.experiments.cifar10n import load_cifar10n
from noisycal_bayes import evaluate
data, _ = load_cifar10n()
t = time.perf_counter()
ev = evaluate(data, method=os.environ["ROUTE"], expand=os.environ["EXPAND"] == "1")
wall = time.perf_counter() - t
nc, exp = ev.nc_ece, ev.expansion
row = {"wall_s": wall, "value": nc.value, "debiased": nc.debiased, "lower": nc.lower, "upper": nc.upper,
       "headline_model": ev.headline_model, "load_avg_1min": os.getloadavg()[0]}
if exp is not None:
    row.update(weights=exp.weights, rule=exp.rule, expansion_s=exp.seconds,
               shared=[ev.nc_ece_shared.value, ev.nc_ece_shared.lower, ev.nc_ece_shared.upper],
               models=exp.table.drop(columns=["extra"]).to_dict(orient="records"),
               extra=exp.table["extra"].tolist())
print("ROW" + json.dumps(row))
"""


def run_one(route: str, expand: bool) -> dict:
    env = dict(os.environ, ROUTE=route, EXPAND="1" if expand else "0")
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("ROW"))
    row = json.loads(line[3:])
    row.update(route=route, expand=expand, stage=f"evaluate {route} expand={expand}", n_items=50_000, n_annotators=3,
               covers_reference=bool(row["lower"] <= REFERENCE_ECE <= row["upper"]))
    return row


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--routes", default="em,nuts")
    args = ap.parse_args(argv)
    info = machine()
    rows = []
    for route in args.routes.split(","):
        for _ in range(args.reps):
            for expand in (False, True):
                rows.append(run_one(route, expand))
                r = rows[-1]
                print(f"{route:4s} expand={expand!s:5s} {r['wall_s']:6.1f} s  NC-ECE {r['value']:.4f} "
                      f"[{r['lower']:.4f}, {r['upper']:.4f}] {r['headline_model']} load {r['load_avg_1min']:.1f}",
                      flush=True)
    summary = []
    for route in args.routes.split(","):
        off = median([r["wall_s"] for r in rows if r["route"] == route and not r["expand"]])
        on = median([r["wall_s"] for r in rows if r["route"] == route and r["expand"]])
        summary.append({"stage": f"evaluate {route}: expand on / off", "route": route, "n_items": 50_000,
                        "n_annotators": 3, "median_s": on, "median_off_s": off, "ratio": on / off})
        print(f"{route}: median {off:.1f} s off, {on:.1f} s on, ratio {on / off:.2f}")
    write_json("bench_expansion", info, {"reps": args.reps, "reference_ece": REFERENCE_ECE}, summary + rows)


if __name__ == "__main__":
    main()
