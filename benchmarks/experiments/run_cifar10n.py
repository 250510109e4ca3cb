"""CIFAR-10N real label noise (paper §6.3, Table 3), with the Bayesian intervals beside each number.

Usage::

    python benchmarks/experiments/run_cifar10n.py [--n-warmup 500 --n-draws 500 --seed 0]

Writes benchmarks/results/experiments_cifar10n_table3.csv and experiments_cifar10n.json.
Data: CIFAR-10N labels (Wei et al., ICLR 2022; CC BY-NC 4.0) and cross-validated ResNet-50 scores from
cgnorthcutt/confidentlearning-reproduce (MIT), assembled in cifar10n_vehicle.csv: pass --path or set NOISYCAL_CIFAR10N to its location.
"""
from __future__ import annotations

import argparse
import json
import os
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
from noisycal_bayes.experiments.cifar10n import ENV_VAR, cifar10n_table  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--path", default=os.environ.get(ENV_VAR),
                   help=f"cifar10n_vehicle.csv (default: the environment variable {ENV_VAR})")
    p.add_argument("--n-warmup", type=int, default=500)
    p.add_argument("--n-draws", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    table = cifar10n_table(path=a.path, n_warmup=a.n_warmup, n_draws=a.n_draws, seed=a.seed)
    table.to_csv(OUT / "experiments_cifar10n_table3.csv", index=False)
    meta = dict(vars(a), code=code_version(), seconds=round(time.time() - t0, 1), **table.attrs, table3=table.to_dict(orient="records"))
    (OUT / "experiments_cifar10n.json").write_text(json.dumps(meta, indent=1, default=float))
    print(table.round(4).to_string())
    print(table.attrs)


if __name__ == "__main__":
    main()
