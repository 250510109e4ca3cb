"""The population options of the partially pooled EM on the five real crowds: accuracy against gold and CPU seconds.

``fit_em_population`` with each configuration of ``benchmarks/coverage_confusion_crowds.py`` (``CONFIGS``: the
default single population on the expected counts, ``sampled_labels``, per-annotator factors, and the mixture
population of annotator types), on each crowd of ``crowds/`` (README there; gold labels kept aside, the fit never
sees them; loading as ``benchmarks/crowds_em_multiclass.py``). The decision rule that reads these numbers (a
configuration becomes the crowd default only if no crowd loses more than 0.005 of accuracy against the default, and
the simulated coverage improves) is in docs/crowds.md, *A mixture population*, written before they were measured.

    PYTHONPATH=$PWD python benchmarks/crowds_population_options.py [--configs soft mixture ...] [--out FILE]

``cpu_s``: CPU seconds of one fit (``time.process_time``; the first call in this process, compilation included).
Results: ``benchmarks/results/crowds_population_options.json``.
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
from _benchutil import machine, write_json  # noqa: E402
from bench_crowds_bayes import _gold_of  # noqa: E402
from coverage_confusion_crowds import CONFIGS  # noqa: E402

import noisycal_bayes as nb  # noqa: E402
from noisycal_bayes.experiments.real_data import SHARED_DATA_HINT, shared_data_path  # noqa: E402
from noisycal_bayes.inference.population import fit_em_population  # noqa: E402

SETS = ("cf", "ms", "sp", "zencrowd_us", "adult")


def run(name, configs):
    if (path := shared_data_path(f"crowds/{name}.csv")) is None:
        raise SystemExit(f"crowds/{name}.csv not found: {SHARED_DATA_HINT}.")
    data = nb.load_multiclass(str(path))
    gold = _gold_of(path, data.item_ids)
    known = ~pd.isna(gold) & (gold.astype(str) != "-1")   # -1: no gold label (adult: 333 gold items)
    classes = np.asarray(data.classes)
    rows = []
    for config in configs:
        t = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_em_population(data, **CONFIGS[config])
        cpu = time.process_time() - t
        pred = classes[np.argmax(fit.clean_label_probability(data), axis=1)]
        row = {"data": name, "config": config, "K": int(data.n_classes), "n_annotators": int(data.n_annotators),
               "accuracy": float(np.mean(pred[known].astype(str) == gold[known].astype(str))), "cpu_s": cpu,
               "n_iter": int(fit.n_iter), "converged": bool(fit.converged),
               "concentration": np.round(fit.prior[0].sum(axis=1), 2).tolist()}
        if fit.mixture_weight is not None:
            row["type_weight"] = np.round(fit.mixture_weight, 3).tolist()
            row["type_concentration"] = np.round(fit.mixture_alpha.sum(axis=2), 2).tolist()
        print(row, flush=True)
        rows.append(row)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=list(SETS))
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS))
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.configs) - set(CONFIGS))
    if unknown:
        raise SystemExit(f"unknown configs {unknown}; known: {sorted(CONFIGS)}")
    rows = [r for name in args.sets for r in run(name, args.configs)]
    write_json("crowds_population_options", machine(), {"sets": args.sets, "configs": {c: CONFIGS[c] for c in
                                                                                        args.configs}}, rows, args.out)


if __name__ == "__main__":
    main()
