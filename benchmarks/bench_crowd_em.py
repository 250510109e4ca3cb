"""EM on real crowds: our ``fit_em`` (sparse path, crowd orientation) vs crowd-kit's ``DawidSkene`` (issue 16, item 3).

Usage (crowd-kit is not a dependency; the benchmark venv has it)::

    /work/main/.venv/bin/python -m venv --system-site-packages .venv-bench && .venv-bench/bin/pip install crowd-kit
    PYTHONPATH=$PWD .venv-bench/bin/python benchmarks/bench_crowd_em.py [--reps 7] [--out FILE]

Data: ``/work/shared/data/crowd_gold/{bluebirds,rte,temp}.csv`` (long format item, worker, label, gold).
Sources: bluebirds, Welinder et al., NIPS 2010 (welinder/cubam, BSD); rte and temp, Snow et al., EMNLP 2008.

Rows, side by side in one process:

- ``ours``: ``fit_em(data, model="dawid_skene")`` with its defaults (10 random starts, ``tol=1e-8``,
  ``max_iter=1000``, ``orientation="auto"``, ``path="auto"``: sparse responses here, >12 annotators). The
  clock covers the whole call on a built ``AnnotationSet`` (path choice, sparse inputs, the 10 EM runs in one
  compiled loop, selection, per-annotator intervals, the FitResult). ``first_call_s``: the first call in the
  process (tracing and compilation included; the persistent compilation cache is off); ``median_s`` the median
  of ``--reps`` later calls. Labels: posterior mode ``T_i > 0.5`` (``fit.clean_label_probability()``).
- ``ours_vote``: the same with ``starts="vote"`` (one start from the vote fractions, crowd-kit's
  initialisation).
- ``crowdkit_default``: ``DawidSkene()`` (``n_iter=100, tol=1e-5`` on the ELBO per response; one start from
  majority vote), ``fit_predict`` on the DataFrame ``(task, worker, label)`` (building it is not timed).
- ``crowdkit_converged``: ``DawidSkene(n_iter=1000, tol=1e-10)``.
- ``majority_vote``: ``AnnotationSet.majority_vote()`` (ties to positive), for reference.

Accuracy is against the gold column. Goals (issue 16): accuracy >= crowd-kit converged - 0.005 on each set;
``ours`` median <= 1/5 of ``crowdkit_converged``'s. The machine is shared (2 cores; the load average is in
the JSON): times are medians of ``--reps`` runs, side by side. Results: ``benchmarks/results/bench_crowd_em.json``.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import machine, median, print_table, write_json  # noqa: E402

DATA = Path("/work/shared/data/crowd_gold")
SETS = ("bluebirds", "rte", "temp")


def load(name):
    from noisycal_bayes import AnnotationSet

    df = pd.read_csv(DATA / f"{name}.csv")
    data = AnnotationSet.from_long(df.rename(columns={"worker": "annotator"})[["item", "annotator", "label"]])
    gold = df.groupby("item")["gold"].first().reindex(data.item_ids).to_numpy()
    return df, data, gold


def run_ours(data, gold, reps, **kw):
    from noisycal_bayes import fit_em

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the flag warnings are expected on real crowds
        t = time.perf_counter()
        fit = fit_em(data, model="dawid_skene", **kw)
        first = time.perf_counter() - t
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fit = fit_em(data, model="dawid_skene", **kw)
            times.append(time.perf_counter() - t)
    acc = float(np.mean((fit.clean_label_probability() > 0.5) == gold))
    flags = fit.annotators["flag"].value_counts().to_dict()
    return {"stage": "ours_vote" if kw else "ours", "first_call_s": first, "median_s": median(times), "accuracy": acc,
            "path": fit.details["path"], "orientation": fit.details["orientation"], "n_iter": fit.n_iter,
            "n_uninformative": int(flags.get("uninformative", 0)), "n_adversarial": int(flags.get("adversarial", 0)),
            "reps": reps}


def run_crowdkit(stage, df, gold_by_item, reps, **kw):
    from crowdkit.aggregation import DawidSkene

    frame = df.rename(columns={"item": "task"})[["task", "worker", "label"]]
    times = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas deprecation warnings from crowd-kit
        for _ in range(reps):
            t = time.perf_counter()
            labels = DawidSkene(**kw).fit_predict(frame)
            times.append(time.perf_counter() - t)
    acc = float(np.mean(labels.to_numpy() == gold_by_item.reindex(labels.index).to_numpy()))
    return {"stage": stage, "median_s": median(times), "accuracy": acc, "reps": reps, "settings": str(kw or "default")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    info = machine()
    rows = []
    for name in SETS:
        df, data, gold = load(name)
        base = {"data": name, "n_items": data.n_items, "n_annotators": data.n_annotators,
                "n_responses": data.n_responses}
        gold_by_item = df.groupby("item")["gold"].first()
        ours = {**base, **run_ours(data, gold, args.reps)}
        vote = {**base, **run_ours(data, gold, args.reps, starts="vote")}
        ck_def = {**base, **run_crowdkit("crowdkit_default", df, gold_by_item, args.reps)}
        ck_conv = {**base, **run_crowdkit("crowdkit_converged", df, gold_by_item, args.reps, n_iter=1000, tol=1e-10)}
        mv = {**base, "stage": "majority_vote", "accuracy": float(np.mean(data.majority_vote() == gold))}
        for r in (ours, vote):
            r["crowdkit_converged_over_ours"] = ck_conv["median_s"] / r["median_s"]
            r["accuracy_minus_crowdkit_converged"] = r["accuracy"] - ck_conv["accuracy"]
        rows += [ours, vote, ck_def, ck_conv, mv]
    print_table(rows, ["data", "stage", "n_responses", "first_call_s", "median_s", "accuracy",
                       "crowdkit_converged_over_ours", "accuracy_minus_crowdkit_converged"])
    write_json("bench_crowd_em", info, {"reps": args.reps, "sets": list(SETS)}, rows, args.out)


if __name__ == "__main__":
    main()
