"""NUTS for the K-class grouped Dawid-Skene model on CIFAR-10N (issue 18, goal: K = 10, 50,000 items x 3
annotators in <= 60 s wall including compilation on 2 cores, R-hat <= 1.01).

Usage::

    python benchmarks/bench_multiclass_nuts.py [--n-warmup 500] [--n-samples 500] [--chains 2]
                                               [--paths auto sparse] [--out FILE]

Data: ``../shared/data/cifar10n_10class.csv`` (CIFAR-10N, Wei et al. ICLR 2022): labels ``ann1..ann3`` (10 classes),
classifier probabilities ``p0..p9``. Score groups: predicted class x 2 top-probability quantiles within that class
(the median split; G = 20). ``y_ref`` is never used for fitting; it only scores the clean-label posterior
(accuracy of its argmax, beside majority vote).

Fit: ``fit_nuts_multiclass(data, model="grouped", groups, n_chains, n_warmup, n_samples)`` after
``configure_jax()`` (one device per core: the chains run in parallel), without a persistent compilation cache.
Each path is fitted twice in one process: ``first`` (traces and compiles; the MAP-EM start included) and ``warm``
(the compiled sampler reused, another seed). Reported: wall time, max R-hat and min bulk / tail ESS over every
confusion entry and prevalence, divergences, fraction of transitions at the maximum tree depth, mean tree depth,
the number of compressed (group, pattern) rows, and the fraction of draws whose average confusion is not
diagonally dominant. Results: ``benchmarks/results/bench_multiclass_nuts.json`` (format of ``_benchutil``).
"""
from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent.parent / "shared" / "data" / "cifar10n_10class.csv"


class Crowd(NamedTuple):
    """The attributes fit_nuts_multiclass reads (a MulticlassAnnotationSet stand-in)."""

    responses: tuple
    n_items: int
    n_annotators: int
    n_classes: int
    probs: object
    gold: object
    classes: tuple


def load(path=DATA):
    """``(data, groups, y_ref)`` from the CIFAR-10N file (module docstring)."""
    import numpy as np
    import pandas as pd

    df = pd.read_csv(path)
    labels = df[["ann1", "ann2", "ann3"]].to_numpy().astype(np.int32)
    probs = df[[f"p{k}" for k in range(10)]].to_numpy()
    n, j = labels.shape
    item, ann = np.repeat(np.arange(n, dtype=np.int32), j), np.tile(np.arange(j, dtype=np.int32), n)
    data = Crowd((item, ann, labels.ravel()), n, j, 10, probs, None, tuple(range(10)))
    yhat, top = probs.argmax(axis=1), probs.max(axis=1)
    upper = np.zeros(n, np.int32)
    for k in range(10):
        members = yhat == k
        if members.any():
            upper[members] = top[members] > np.median(top[members])
    return data, (yhat * 2 + upper).astype(np.int32), df["y_ref"].to_numpy(), labels


def one_fit(data, groups, *, path, seed, args):
    import numpy as np

    from noisycal_bayes.inference import fit_nuts_multiclass

    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_nuts_multiclass(data, model="grouped", groups=groups, n_chains=args.chains, n_warmup=args.n_warmup,
                                  n_samples=args.n_samples, seed=seed, path=path)
    wall = time.perf_counter() - t
    d = fit.diagnostics
    row = {"path": fit.settings["path"], "chain_method": fit.settings["chain_method"], "median_s": round(wall, 2),
           "wall_s": round(wall, 2), "r_hat_max": d["max_rhat"], "ess_bulk_min": d["min_ess_bulk"],
           "ess_tail_min": d["min_ess_tail"], "n_divergent": d["n_divergent"],
           "frac_max_treedepth": d["frac_max_treedepth"], "tree_depth_mean": d["mean_tree_depth"],
           "step_size_mean": float(np.mean(fit.sample_stats["step_size"])),
           "frac_not_dominant": d["frac_not_dominant"], "n_rows": fit.settings["n_rows"],
           "warnings": [str(w.message)[:160] for w in caught]}
    return fit, row


def main(argv=None):
    import numpy as np

    from _benchutil import machine, print_table, write_json
    from noisycal_bayes.inference import configure_jax

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-warmup", type=int, default=500)
    p.add_argument("--n-samples", type=int, default=500)
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--paths", nargs="+", default=["auto"], choices=["auto", "patterns", "sparse"])
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    configure_jax()
    info = machine()
    t = time.perf_counter()
    data, groups, y_ref, labels = load()
    load_s = time.perf_counter() - t
    rows = []
    for path in args.paths:
        for rep, stage in enumerate(("first (compiles)", "warm (compiled sampler reused)")):
            fit, row = one_fit(data, groups, path=path, seed=rep, args=args)
            row.update(stage=stage, n_items=data.n_items, n_annotators=data.n_annotators, n_classes=data.n_classes,
                       n_groups=int(groups.max()) + 1)
            rows.append(row)
            print({k: v for k, v in row.items() if k != "warnings"}, flush=True)
        post = fit.clean_label_probability(data, max_draws=100)
        votes = np.stack([(labels == k).sum(1) for k in range(10)], axis=1)
        majority = votes.argmax(axis=1)  # ties to the lowest class index
        rows[-1].update(accuracy_posterior_vs_ref=float(np.mean(post.argmax(1) == y_ref)),
                        accuracy_majority_vs_ref=float(np.mean(majority == y_ref)),
                        mean_diagonal=float(np.mean(np.diagonal(fit.confusion.mean(0), axis1=1, axis2=2))))
    print_table(rows, ["stage", "path", "wall_s", "r_hat_max", "ess_bulk_min", "frac_max_treedepth", "n_divergent",
                       "tree_depth_mean"])
    settings = dict(vars(args), data=str(DATA.name), load_s=round(load_s, 2), model="grouped",
                    groups="predicted class x 2 top-probability quantiles (median split)",
                    goal="wall <= 60 s including compilation on 2 cores; R-hat <= 1.01")
    write_json("bench_multiclass_nuts", info, settings, rows, args.out)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(HERE))
    main()
