"""Partially pooled Dawid-Skene against plain Dawid-Skene and majority vote on real crowds with gold labels.

    PYTHONPATH=$PWD python benchmarks/bench_crowds_bayes.py [--reps 3] [--out FILE]

Sets: the five ``crowds/`` (cf, ms, zencrowd_us, sp, adult; README there: sources, licences, published figures)
and ``crowd_gold/{bluebirds,rte,temp}.csv`` of the shared data folder. Each file is read with
:func:`noisycal_bayes.load_multiclass` without its gold column (the fit never sees gold); accuracy is the argmax
of the clean-label posterior against gold on the items that have one. Routes: ``ds`` =
``fit_em_multiclass(data, model="dawid_skene")`` (the plain EM, default starts), ``pooled`` =
``fit_em_multiclass(data, model="pooled")``, ``pooled_refit`` = the pooled fit of one Bayesian-bootstrap replicate
(item weights ~ Exp(1), seed 0) warm-started from the full pooled fit (``init=``, as ``evaluate``'s bootstrap refits),
``vote`` = majority vote (ties to the lowest class index); with ``--ibcc`` also ``ibcc`` =
``fit_nuts_multiclass(data, model="ibcc")`` (2 chains x (300 warm-up + 300 draws), the matrix's NUTS settings; its
posterior mean's argmax; K-class sets only, binary ones go through ``evaluate``'s binary route).
``first_s`` is the first call in the process, ``warm_s`` the median of ``--reps`` later calls (IBCC: one call,
``first_s`` with its compilation; ``first_cpu_s`` its CPU seconds, steadier than wall time on a shared machine).
Results: ``benchmarks/results/crowds_bayes.json``; table in docs/crowds.md.

Two versions of the Bayesian route side by side (each run in its own process on its own checkout)::

    PYTHONPATH=OLD python benchmarks/bench_crowds_bayes.py --routes vote pooled ibcc --reps 0 --sets crowds/cf \
        crowds/ms crowds/zencrowd_us crowds/sp crowds/adult --label before --out before.json
    PYTHONPATH=$PWD python benchmarks/bench_crowds_bayes.py ... --label after --out after.json
    python benchmarks/bench_crowds_bayes.py --pair before.json after.json   # results/crowds_ibcc.json + table
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import noisycal_bayes as nb
from noisycal_bayes.experiments.real_data import SHARED_DATA_HINT, shared_data_path

SETS = ("crowds/cf", "crowds/ms", "crowds/zencrowd_us", "crowds/sp", "crowds/adult",
        "crowd_gold/bluebirds", "crowd_gold/rte", "crowd_gold/temp")


def _vote(data):
    item, _, label = (np.asarray(v) for v in data.responses)
    counts = np.zeros((data.n_items, data.n_classes))
    np.add.at(counts, (item, label), 1.0)
    return counts


def _cpu():
    """CPU seconds of this process (all threads): less sensitive than wall time to a machine shared with other jobs."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(fn, reps):
    times, out = [], None
    for _ in range(1 + reps):
        t0, c0 = time.perf_counter(), _cpu()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn()
        times.append(time.perf_counter() - t0)
        if len(times) == 1:
            _timed.first_cpu = _cpu() - c0
    return out, times[0], float(np.median(times[1:])) if reps else times[0]


def _gold_of(path, item_ids):
    """The gold column per item, in the data's item order (the fit never sees it)."""
    per_item = pd.read_csv(path, usecols=["item", "gold"]).drop_duplicates("item").set_index("item")["gold"]
    return per_item.reindex(list(item_ids)).to_numpy()


#: ``--ibcc`` sampler settings (``--warmup``, ``--draws`` change the first two).
NUTS = {"n_chains": 2, "n_warmup": 300, "n_samples": 300}


def _ibcc(data):
    return nb.fit_nuts_multiclass(data, model="ibcc", **NUTS)


def run(name, reps, ibcc=False, routes=("vote", "ds", "pooled", "pooled_refit")):
    if (path := shared_data_path(f"{name}.csv")) is None:
        raise SystemExit(f"{name}.csv not found: {SHARED_DATA_HINT}.")
    data = nb.load_multiclass(str(path))
    gold = _gold_of(path, data.item_ids)
    known = ~pd.isna(gold) & (gold.astype(str) != "-1")  # -1: no gold label (adult: 333 gold items)
    classes = np.asarray(data.classes)

    def acc(scores):
        pred = classes[np.argmax(scores, axis=1)]
        return float(np.mean(pred[known].astype(str) == gold[known].astype(str)))

    row = {"data": name, "n_items": int(data.n_items), "n_annotators": int(data.n_annotators),
           "n_classes": int(data.n_classes), "n_labels": int(np.asarray(data.responses[0]).size),
           "n_gold": int(known.sum())}
    weights = np.random.default_rng(0).exponential(size=data.n_items)
    full = {}
    for route, fn in (("vote", lambda: _vote(data)),
                      ("ds", lambda: nb.fit_em_multiclass(data, model="dawid_skene")),
                      ("pooled", lambda: nb.fit_em_multiclass(data, model="pooled")),
                      ("pooled_refit", lambda: nb.fit_em_multiclass(data, model="pooled", init=full["pooled"],
                                                                    weights=weights)),
                      *((("ibcc", lambda: _ibcc(data)),) if ibcc and (data.n_classes > 2 or "ibcc" in routes)
                        else ())):
        if route not in routes and route != "ibcc" or (route == "pooled_refit" and "pooled" not in full):
            continue
        # NUTS (minutes): one call, its first (compilation included); the EM routes: first call and warm median.
        out, first, warm = _timed(fn, 0 if route == "ibcc" else reps)
        full[route] = out
        scores = out if route == "vote" else out.clean_label_probability(data)
        row[route] = {"accuracy": acc(scores), "first_s": first, "warm_s": warm, "first_cpu_s": _timed.first_cpu,
                      "load_avg_1min": os.getloadavg()[0]}
        if route == "ibcc":
            row[route].update({k: out.diagnostics[k] for k in ("max_rhat", "min_ess_bulk", "min_ess_tail",
                                                                "mean_tree_depth", "n_divergent")})
            st = out.sample_stats
            row[route].update(step_size=[float(v) for v in np.asarray(st["step_size"])[:, -1]],
                              mean_leapfrog_steps=float(np.mean(st["n_steps"])), settings=dict(NUTS),
                              warnings=[w[:160] for w in out.warnings])
        elif route != "vote":
            row[route].update(converged=bool(out.converged), n_iter=int(out.n_iter))
        if route.startswith("pooled"):
            row[route]["concentration"] = [float(v) for v in out.prior[0].sum(axis=1)]
    print(json.dumps({k: row[k] for k in ("data", "n_classes")} | {r: round(row[r]["accuracy"], 4)
                                                                  for r in ("vote", "ds", "pooled", "ibcc") if r in row}
                     | {f"{r}_s": round(row[r]["warm_s"], 3) for r in ("ds", "pooled", "pooled_refit", "ibcc")
                        if r in row}), flush=True)
    return row


def pair(before_path, after_path, out):
    """Two runs of ``--routes ... ibcc`` (e.g. two commits, each in its own process) as one file, row by row, and their
    IBCC rows as a Markdown table (the docs' before / after table)."""
    runs = [json.loads(Path(p).read_text()) for p in (before_path, after_path)]
    after_rows = {r["data"]: r for r in runs[1]["rows"]}
    rows = [{"data": b["data"], "n_classes": b["n_classes"], "n_gold": b["n_gold"],
             "pooled_em_accuracy": b.get("pooled", {}).get("accuracy"), "before": b.get("ibcc"),
             "after": after_rows[b["data"]].get("ibcc")} for b in runs[0]["rows"] if b["data"] in after_rows]
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from _benchutil import machine, write_json

    write_json("crowds_ibcc", machine(start=False), {"before": runs[0]["settings"], "after": runs[1]["settings"]}, rows,
               out)
    print("| set | K | before: wall (CPU) s / R-hat / min bulk ESS / leapfrog steps / accuracy | after: the same | "
          "pooled EM |")
    print("|---|---|---|---|---|")
    for r in rows:
        cell = [f"{x['first_s']:.0f} ({x['first_cpu_s']:.0f}) / {x['max_rhat']:.3f} / {x['min_ess_bulk']:.0f} / "
                f"{x['mean_leapfrog_steps']:.0f} / {x['accuracy']:.3f}" for x in (r["before"], r["after"])]
        print(f"| {r['data']} | {r['n_classes']} | {cell[0]} | {cell[1]} | {r['pooled_em_accuracy']:.3f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "crowds_bayes.json"))
    ap.add_argument("--sets", nargs="*", default=list(SETS))
    ap.add_argument("--ibcc", action="store_true", help="also the Bayesian route (IBCC by NUTS) on K-class sets")
    ap.add_argument("--routes", nargs="*", default=["vote", "ds", "pooled", "pooled_refit"],
                    help="routes to run (\"ibcc\" among them: IBCC on binary sets too)")
    ap.add_argument("--warmup", type=int, default=NUTS["n_warmup"])
    ap.add_argument("--draws", type=int, default=NUTS["n_samples"])
    ap.add_argument("--label", default="", help="recorded in the settings (e.g. the commit measured)")
    ap.add_argument("--pair", nargs=2, metavar=("BEFORE", "AFTER"),
                    help="write two runs' results side by side (results/crowds_ibcc.json unless --out) and stop")
    args = ap.parse_args(argv)
    if args.pair:
        return pair(*args.pair, None if args.out == ap.get_default("out") else args.out)
    NUTS.update(n_warmup=args.warmup, n_samples=args.draws)
    if "ibcc" in args.routes or args.ibcc:
        from noisycal_bayes.inference import configure_jax
        configure_jax()  # two chains on two devices, as the command line runs them
    rows = [run(name, args.reps, args.ibcc or "ibcc" in args.routes, tuple(args.routes)) for name in args.sets]
    Path(args.out).write_text(json.dumps({"settings": {"reps": args.reps, "routes": args.routes, "nuts": NUTS,
                                                       "label": args.label}, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
