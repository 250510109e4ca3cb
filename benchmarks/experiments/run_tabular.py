"""Semi-synthetic tabular recalibration (paper §6.2, Table 2; Appendix G.3).

Usage::

    python benchmarks/experiments/run_tabular.py                    # the paper's 10 seeds (720 cells per data set)
    python benchmarks/experiments/run_tabular.py --seeds 3 --bayes-seeds 0
    python benchmarks/experiments/run_tabular.py --bayes-only --bayes-seeds 1 --bayes-regimes moderate asymmetric
    python benchmarks/experiments/run_tabular.py --merge      # table from the rows files on disk

``--bayes-only`` writes the Bayesian rows to experiments_tabular_bayes_rows.csv (it can run beside or after
the point run); ``--merge`` rebuilds the table and JSON from experiments_tabular_rows.csv plus that file.

Runs one seed at a time and rewrites the results after each, so an interrupted run leaves a valid table
over the seeds completed (``seeds_done`` in the JSON). Writes
benchmarks/results/experiments_tabular_{rows,table2}.csv and experiments_tabular.json. Needs
scikit-learn (``pip install noisycal_bayes[experiments]``).
"""
from __future__ import annotations

import argparse
import json
import platform
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
from noisycal_bayes._progress import progress  # noqa: E402
from noisycal_bayes.experiments.tabular import (DATASETS, N_ANNOTATORS, PREDICTORS, REGIMES,  # noqa: E402
                                                summarise_tabular, tabular_recalibration)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10, help="seeds (paper: 10)")
    p.add_argument("--n-starts", type=int, default=5)
    p.add_argument("--bayes-seeds", type=int, default=1, help="seeds with PosteriorPlatt rows (J = 3 only), run after all point seeds")
    p.add_argument("--n-warmup", type=int, default=300)
    p.add_argument("--n-draws", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bayes-only", action="store_true")
    p.add_argument("--bayes-regimes", nargs="+", default=list(REGIMES))
    p.add_argument("--merge", action="store_true")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (shown only when stderr is a terminal)")
    a = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if a.bayes_only:
        rows = tabular_recalibration(seeds=range(a.bayes_seeds), n_starts=a.n_starts, point=False, bayes=True,
                                     bayes_seeds=a.bayes_seeds, regimes=a.bayes_regimes, n_warmup=a.n_warmup,
                                     n_draws=a.n_draws, seed=a.seed, progress_bar=not a.no_progress)
        rows.to_csv(OUT / "experiments_tabular_bayes_rows.csv", index=False)
        (OUT / "experiments_tabular_bayes.json").write_text(json.dumps(
            dict(bayes_seeds=a.bayes_seeds, bayes_regimes=a.bayes_regimes, n_warmup=a.n_warmup, n_draws=a.n_draws,
                 seed=a.seed, n_rows=len(rows), seconds=round(time.time() - t0, 1)), indent=1))
        print(rows.to_string())
        return
    if a.merge:
        rows = pd.read_csv(OUT / "experiments_tabular_rows.csv", keep_default_na=False, na_values=[""])
        rows["failure"] = rows["failure"].astype(object).where(rows["failure"].notna(), "")
        bpath = OUT / "experiments_tabular_bayes_rows.csv"
        bmeta = {}
        if bpath.exists():  # the separate Bayesian rows replace any in the main rows file
            rows = rows[rows["fit"] != "bayes"]
            b = pd.read_csv(bpath, keep_default_na=False, na_values=[""])
            b["failure"] = b["failure"].astype(object).where(b["failure"].notna(), "")
            rows = pd.concat([rows, b[b["seed"].isin(rows["seed"].unique())]], ignore_index=True)
            bmeta = json.loads((OUT / "experiments_tabular_bayes.json").read_text())
        meta = json.loads((OUT / "experiments_tabular.json").read_text())
        table = summarise_tabular(rows)
        table.to_csv(OUT / "experiments_tabular_table2.csv", index=False)
        meta.update(table2=table.to_dict(orient="records"))
        if bmeta:
            meta.update(bayes=bmeta, bayes_seeds_done=int(bmeta.get("bayes_seeds", 0)))
        (OUT / "experiments_tabular.json").write_text(json.dumps(meta, indent=1, default=float))
        print(table.round(4).to_string())
        return
    parts = []
    # point rows seed by seed, then the (slower) Bayesian rows for the first seeds
    jobs = [(s, True, False) for s in range(a.seeds)] + [(s, False, True) for s in range(min(a.bayes_seeds, a.seeds))]
    seeds_done, bayes_done = 0, 0
    for s, point, bayes in progress(jobs, enabled=not a.no_progress, desc="tabular jobs (seed, rows)"):
        parts.append(tabular_recalibration(seeds=[s], n_starts=a.n_starts, point=point, bayes=bayes,
                                           bayes_seeds=a.bayes_seeds, n_warmup=a.n_warmup, n_draws=a.n_draws,
                                           seed=a.seed))
        seeds_done, bayes_done = seeds_done + point, bayes_done + bayes
        rows = pd.concat(parts, ignore_index=True)
        table = summarise_tabular(rows)
        rows.to_csv(OUT / "experiments_tabular_rows.csv", index=False)
        table.to_csv(OUT / "experiments_tabular_table2.csv", index=False)
        meta = dict(vars(a), code=code_version(), seeds_done=seeds_done, bayes_seeds_done=bayes_done, seconds=round(time.time() - t0, 1),
                    datasets={k: v[1] for k, v in DATASETS.items()}, predictors=list(PREDICTORS),
                    n_annotators=list(N_ANNOTATORS), regimes={k: [list(r) for r in v] for k, v in REGIMES.items()},
                    python=platform.python_version(), table2=table.to_dict(orient="records"))
        (OUT / "experiments_tabular.json").write_text(json.dumps(meta, indent=1, default=float))
        print(f"seed {s} ({'point' if point else 'bayes'}) done, {time.time() - t0:.0f} s", flush=True)
    print(table.round(4).to_string())


if __name__ == "__main__":
    main()
