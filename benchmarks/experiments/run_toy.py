"""Toy ECE estimation (paper §6.1, Table 1 / Figure 1).

Usage::

    python benchmarks/experiments/run_toy.py                        # the paper's 200 reps, Bayesian rows 10
    python benchmarks/experiments/run_toy.py --bayes-reps 200       # Bayesian rows at every repetition (hours)

Writes benchmarks/results/experiments_toy_{rows,table1,figure1}.csv and experiments_toy.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    import numpyro

    numpyro.set_host_device_count(2)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results"

import pandas as pd  # noqa: E402

from _provenance import code_version  # noqa: E402  (this folder is on sys.path when run as a script)
from noisycal_bayes.experiments.toy import CONDITIONS, SIZES, summarise_toy, toy_ece  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=200, help="repetitions per Table 1 cell (paper: 200)")
    p.add_argument("--figure-reps", type=int, default=200, help="repetitions per Figure 1 size (paper: 200)")
    p.add_argument("--bayes-reps", type=int, default=10, help="repetitions with the NUTS posterior per condition")
    p.add_argument("--n-warmup", type=int, default=300)
    p.add_argument("--n-draws", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bayes-rows", default=None,
                   help="reuse the Bayesian rows (repetitions < --bayes-reps) of an earlier rows CSV run with the same "
                        "--seed, --n-warmup and --n-draws instead of refitting them (each repetition's data and NUTS "
                        "seed depend only on (seed, condition, N, rep), so the rows are the ones a refit would give)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (shown only when stderr is a terminal)")
    a = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    refit = a.bayes_reps > 0 and a.bayes_rows is None
    table1_rows = toy_ece(conditions=CONDITIONS, sizes=(8000,), n_reps=a.reps, bayes=refit,
                          bayes_reps=a.bayes_reps, n_warmup=a.n_warmup, n_draws=a.n_draws, seed=a.seed,
                          progress_bar=not a.no_progress)
    if a.bayes_rows is not None:
        old = pd.read_csv(a.bayes_rows)
        old = old[(old["estimator"] == "bayes") & (old["rep"] < a.bayes_reps) & (old["n_items"] == 8000)]
        if old.groupby("condition")["rep"].nunique().min() < a.bayes_reps:
            raise SystemExit(f"{a.bayes_rows} has fewer than {a.bayes_reps} Bayesian repetitions per condition")
        old = old.assign(failure=old["failure"].astype(object).where(old["failure"].notna(), ""))
        table1_rows = pd.concat([table1_rows, old], ignore_index=True)
    t1 = time.time()
    fig_rows = toy_ece(conditions=("calibrated",), sizes=SIZES[:-1], n_reps=a.figure_reps,
                       estimators=("known", "reuse"), seed=a.seed)
    fig_rows = pd.concat([fig_rows, table1_rows[(table1_rows.condition == "calibrated")
                                                & table1_rows.estimator.isin(["known", "reuse"])
                                                & (table1_rows.rep < a.figure_reps)]], ignore_index=True)
    t2 = time.time()
    table1 = summarise_toy(table1_rows)
    figure1 = summarise_toy(fig_rows)
    table1_rows.to_csv(OUT / "experiments_toy_rows.csv", index=False)
    table1.to_csv(OUT / "experiments_toy_table1.csv", index=False)
    figure1.to_csv(OUT / "experiments_toy_figure1.csv", index=False)
    meta = dict(code=code_version(), bayes_rows_from=a.bayes_rows, reps=a.reps, figure_reps=a.figure_reps, bayes_reps=a.bayes_reps, n_warmup=a.n_warmup,
                n_draws=a.n_draws, n_chains=2, seed=a.seed, seconds_table1=round(t1 - t0, 1),
                seconds_figure1=round(t2 - t1, 1), table1=table1.to_dict(orient="records"),
                figure1=figure1.to_dict(orient="records"))
    (OUT / "experiments_toy.json").write_text(json.dumps(meta, indent=1, default=float))
    print(table1.to_string())
    print(figure1.to_string())


if __name__ == "__main__":
    main()
