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

``--expansion``: the measurement behind keeping the EM route's richer fit as it is (``evaluate``'s expansion,
``fit_alternative(method="laplace")``: MAP and 200 Laplace draws with the scales at their mode). In one process, side
by side: those Laplace draws, against ``fit_em(model="score_dependent")`` plus 200 Bayesian-bootstrap refits
(Gamma(count) row weights, the item-level Dirichlet weights summed per compressed row; each refit the same EM
iterations warm-started at the full-data mode), the draws the shared model has on that route. For each: CPU and wall
seconds, the richer model's PSIS-LOO (``row_loo``: elpd, its se, largest Pareto k) and its NC-ECE posterior
(``posterior_nc_ece_group_channels``, seed 0).

Run: ``PYTHONPATH=. python benchmarks/bench_score_em.py [--reps 3] [--expansion]`` ->
``benchmarks/results/bench_score_em.json``.
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


_EXPANSION = r"""
import json, os, time, warnings
warnings.simplefilter("ignore")
import numpy as np
from noisycal_bayes.data import Binning
from noisycal_bayes.diagnostics.alternatives import _weighted_total, row_loo
from noisycal_bayes.experiments.cifar10n import load_cifar10n
from noisycal_bayes.inference import fit_em
from noisycal_bayes.inference import score_em as se
from noisycal_bayes.inference.alternatives import _table, fit_alternative
from noisycal_bayes.models import DEFAULT_PRIOR
from noisycal_bayes.propagate.group_channels import posterior_nc_ece_group_channels

data, _ = load_cifar10n()
B, groups = 200, Binning.equal_mass(5)
shared = fit_em(data, groups=groups)
out = {}
c, w = time.process_time(), time.perf_counter()
lap = fit_alternative(data, "score_dependent", groups=groups, method="laplace", n_draws=B, seed=0, init=shared)
out["laplace"] = dict(cpu_s=time.process_time() - c, wall_s=time.perf_counter() - w)
draws = {"laplace": (lap.fpr_group, lap.tpr_group, lap.loglik_rows)}
c, w = time.process_time(), time.perf_counter()
em = fit_em(data, model="score_dependent", groups=groups)
assignment, inp = _table(data, groups, "bench")
lay = se._Layout(assignment.n_groups, data.n_annotators)
logit = lambda p: np.log(p) - np.log1p(-p)
p = em.point
v0 = np.zeros(lay.size)
v0[lay.a], v0[lay.b] = logit(p["fpr_centre"]), logit(p["u_centre"])
v0[lay.sf], v0[lay.su], v0[lay.e], v0[lay.h] = np.log(p["tau_fpr"]), np.log(p["tau_u"]), p["e_fpr"], p["e_u"]
z0 = logit(p["prevalence"])
full = se._Rows(inp.patterns, inp.row_group, inp.counts, lay.G)
rng = np.random.default_rng(0)
fg, tg, ll, its = [], [], [], []
for b in range(B):
    cnt = np.zeros(full.keep.size)
    wts = rng.gamma(full.counts)
    cnt[full.keep] = wts * full.counts.sum() / wts.sum()
    rows = se._Rows(inp.patterns, inp.row_group, cnt, lay.G)
    v, z, *_, it = se.run_score_em(rows, lay, v0.copy(), z0.copy(), prior=DEFAULT_PRIOR, scale=0.5, max_iter=1000,
                                   tol=1e-8)
    f, t = se._channels(lay, v)
    fg.append(f), tg.append(t), its.append(it), ll.append(full.rows_loglik(f, t, se._sigmoid(z)))
out["em_bootstrap"] = dict(cpu_s=time.process_time() - c, wall_s=time.perf_counter() - w,
                           median_refit_iterations=float(np.median(its)))
draws["em_bootstrap"] = (np.array(fg), np.array(tg), np.array(ll)[None])
for name, (f, t, rows_ll) in draws.items():
    elpd, k = row_loo(rows_ll)
    total, se_ = _weighted_total(elpd, full.counts)
    post = posterior_nc_ece_group_channels(data, np.asarray(assignment.index), f, t, point=(f.mean(0), t.mean(0)),
                                           seed=0)
    out[name].update(elpd_loo=total, elpd_se=se_, pareto_k_max=float(np.max(k)), nc_ece=float(post.value),
                     lower=float(post.lower), upper=float(post.upper), fpr_group_sd_mean=float(f.std(0).mean()),
                     load_avg_1min=os.getloadavg()[0])
print("ROW" + json.dumps(out))
"""


def run_expansion() -> list[dict]:
    out = subprocess.run([sys.executable, "-c", _EXPANSION], capture_output=True, text=True, check=True)
    res = json.loads(next(x for x in out.stdout.splitlines() if x.startswith("ROW"))[3:])
    rows = []
    for name, r in res.items():
        rows.append(dict(r, stage=f"EM route's richer fit on CIFAR-10N vehicle: {name} (200 draws)", draws=name,
                         n_items=50_000, n_annotators=3, n_groups=5, median_s=r["cpu_s"], unit="cpu seconds"))
        print(f"{name:13s} {r['cpu_s']:6.1f} cpu s ({r['wall_s']:6.1f} wall)  elpd {r['elpd_loo']:.1f} (se "
              f"{r['elpd_se']:.1f}), Pareto k max {r['pareto_k_max']:.2f}  NC-ECE {r['nc_ece']:.5f} "
              f"[{r['lower']:.5f}, {r['upper']:.5f}]", flush=True)
    return rows


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
    ap.add_argument("--expansion", action="store_true", help="also the EM route's richer fit: Laplace vs bootstrap")
    ap.add_argument("--out", default=None, help="results path (default benchmarks/results/bench_score_em.json)")
    args = ap.parse_args(argv)
    info = machine()
    rows = run_expansion() if args.expansion else []
    for _ in range(args.reps):
        for method in ("em", "map"):
            rows.append(run_one(method))
            r = rows[-1]
            print(f"{method:3s} first {r['first_cpu_s']:6.2f} cpu s ({r['first_wall_s']:6.2f} wall)  warm "
                  f"{r['warm_cpu_s']:6.2f} cpu s ({r['warm_wall_s']:6.2f} wall)  objective {r['objective']:.6f}  "
                  f"iterations {r['n_iter']}  load {r['load_avg_1min']:.1f}", flush=True)
    summary = []
    med = {m: {k: median([r[k] for r in rows if r.get("method") == m]) for k in
               ("first_cpu_s", "warm_cpu_s", "first_wall_s", "warm_wall_s")} for m in ("em", "map")}
    em, mp = (next(r for r in rows if r.get("method") == m) for m in ("em", "map"))
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
    write_json("bench_score_em", info, {"reps": args.reps, "expansion": args.expansion}, summary + rows,
               out=args.out)


if __name__ == "__main__":
    main()
