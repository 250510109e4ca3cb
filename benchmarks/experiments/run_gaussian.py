"""Gaussian recalibration (paper Appendix G.2, Table 5).

Usage::

    python benchmarks/experiments/run_gaussian.py                   # the paper's 60 reps, Bayesian rows 4
    python benchmarks/experiments/run_gaussian.py --bayes-reps 60   # Bayesian rows at every repetition

Writes benchmarks/results/experiments_gaussian_{rows,table5}.csv and experiments_gaussian.json.
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

from _provenance import code_version  # noqa: E402  (this folder is on sys.path when run as a script)
from noisycal_bayes.experiments.gaussian import SIZES, gaussian_recalibration, summarise_gaussian  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=60, help="repetitions per size (paper: 60)")
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    p.add_argument("--bayes-reps", type=int, default=4, help="repetitions with the Bayesian maps (largest size only)")
    p.add_argument("--n-warmup", type=int, default=300)
    p.add_argument("--n-draws", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="no progress bar (shown only when stderr is a terminal)")
    a = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    big = max(a.sizes)
    rows = gaussian_recalibration(sizes=[s for s in a.sizes if s != big], n_reps=a.reps, seed=a.seed,
                                  progress_bar=not a.no_progress)
    rows_big = gaussian_recalibration(sizes=[big], n_reps=a.reps, bayes=a.bayes_reps > 0, bayes_reps=a.bayes_reps,
                                      n_warmup=a.n_warmup, n_draws=a.n_draws, seed=a.seed,
                                      progress_bar=not a.no_progress)
    import pandas as pd

    rows = pd.concat([rows, rows_big], ignore_index=True)
    table = summarise_gaussian(rows)
    rows.to_csv(OUT / "experiments_gaussian_rows.csv", index=False)
    table.to_csv(OUT / "experiments_gaussian_table5.csv", index=False)
    meta = dict(vars(a), code=code_version(), seconds=round(time.time() - t0, 1), table5=table.to_dict(orient="records"))
    (OUT / "experiments_gaussian.json").write_text(json.dumps(meta, indent=1, default=float))
    print(table.round(4).to_string())


if __name__ == "__main__":
    main()
