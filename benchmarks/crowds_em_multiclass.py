"""K-class sparse EM on the five crowds of the shared data folder: converged or not, iterations, time, accuracy.

    PYTHONPATH=$PWD python benchmarks/crowds_em_multiclass.py [--accelerate auto|true|false] [--out FILE]

Each crowd of ``crowds/`` (README there) is read with :func:`noisycal_bayes.load_multiclass` (gold labels kept
aside, not given to the fit) and fitted with ``fit_em_multiclass(data, model="dawid_skene")`` with its defaults
(``max_iter=1000``, ``tol=1e-8``, ``orientation="auto"``; since 2026-12-04 the sparse path, which these crowds take
(more possible patterns than items), runs the vote start alone, as binary ``fit_em`` does; before, 4 random starts
besides it). ``--n-starts N`` passes ``n_starts=N`` (the former default: 4). ``first_s`` is the first call in this process (compilation, or loading the saved
program with a warm compilation cache), ``warm_s`` the median of ``--reps`` later calls. Run it once per
checkout with the same interpreter to compare branches; ``--model pooled`` fits ``model="pooled"`` (the EM route on
crowds; ``cpu_s`` the median CPU time of the later calls, ``objective`` the fit's); ``--accelerate`` is passed only where
``fit_em_multiclass`` takes it; ``--cache DIR`` turns the persistent compilation cache on (run twice on one folder:
the second process's ``first_s`` is the first call with a warm cache). Results: ``benchmarks/results/crowds_em_multiclass.json``; docs/performance.md.
"""
from __future__ import annotations

import argparse
import inspect
import json
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import noisycal_bayes as nb
from noisycal_bayes.experiments.real_data import SHARED_DATA_HINT, shared_data_path

CROWDS = ("cf", "ms", "adult", "sp", "zencrowd_us")


def run(name, accelerate, reps, n_starts=None, model="dawid_skene"):
    path = shared_data_path(f"crowds/{name}.csv")
    if path is None:
        raise SystemExit(f"crowds/{name}.csv not found: {SHARED_DATA_HINT}.")
    frame = pd.read_csv(path)
    data = nb.load_multiclass(str(path))
    gold = frame.groupby("item")["gold"].first().reindex(list(data.item_ids)).to_numpy()
    kw = {"model": model}
    if n_starts is not None:
        kw["n_starts"] = n_starts
    if accelerate != "default" and "accelerate" in inspect.signature(nb.fit_em_multiclass).parameters:
        kw["accelerate"] = {"auto": "auto", "true": True, "false": False}[accelerate]
    times, cpus = [], []
    for _ in range(1 + reps):
        t0, c0 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = nb.fit_em_multiclass(data, **kw)
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    classes = np.asarray(data.classes)
    T = np.asarray(fit.clean_label_probability(data))
    extra = {}
    if model == "pooled" and kw.get("accelerate", "auto") is not False:   # the plain fit's fixed point beside it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plain = nb.fit_em_multiclass(data, **(kw | {"accelerate": False}))
        extra["max_T_diff_vs_plain"] = float(np.abs(T - np.asarray(plain.clean_label_probability(data))).max())
    pred = classes[np.argmax(T, axis=1)]
    known = ~pd.isna(gold) & (gold.astype(str) != "-1")  # -1: no gold label (adult: 333 gold items)
    acc = float(np.mean(pred[known].astype(str) == gold[known].astype(str)))
    return {"data": name, "n_items": int(data.n_items), "n_annotators": int(data.n_annotators),
            "n_classes": int(data.n_classes), "n_labels": int(np.asarray(data.responses[0]).size),
            "path": fit.path, "converged": bool(fit.converged), "n_iter": int(fit.n_iter),
            "em_stopped_by_rule": bool(int(fit.n_iter) < 1000), "n_start_runs": int(np.size(fit.start_logliks)),
            "selected_start": int(fit.selected_start), "orientation": (fit.settings or {}).get("orientation"),
            "orientation_applied": (fit.details or {}).get("orientation"),
            "loglik": float(fit.log_likelihood), "accuracy": acc, "first_s": times[0],
            "warm_s": float(np.median(times[1:])), "cpu_s": float(np.median(cpus[1:])),
            "objective": float(fit.objective), **extra, "settings": {k: str(v) for k, v in kw.items()}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--accelerate", default="default", choices=["default", "auto", "true", "false"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--n-starts", type=int, default=None)
    ap.add_argument("--model", default="dawid_skene", choices=["dawid_skene", "pooled"],
                    help="pooled: the partially pooled Dawid-Skene (the EM route's fit on crowds); with --accelerate "
                         "other than false also max_T_diff_vs_plain, the largest posterior difference from the plain "
                         "fit")
    ap.add_argument("--only", nargs="+", default=list(CROWDS))
    ap.add_argument("--label", default="")
    ap.add_argument("--cache", help="turn on the persistent compilation cache in this folder (threshold 0 s)")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.cache:
        nb.inference.enable_compilation_cache(args.cache, min_compile_time_secs=0)
    commit = subprocess.run(["git", "-C", str(Path(nb.__file__).parent), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    rows = []
    for name in args.only:
        row = {"label": args.label, "commit": commit, "cache": bool(args.cache),
               **run(name, args.accelerate, args.reps, args.n_starts, args.model)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        out = Path(args.out)
        old = json.loads(out.read_text()) if out.exists() else {"rows": []}
        # The file's other keys (settings, machine notes) are kept.
        out.write_text(json.dumps(old | {"about": __doc__.splitlines()[0], "rows": old["rows"] + rows}, indent=1)
                       + "\n")


if __name__ == "__main__":
    main()
