"""NUTS on real and simulated crowds with partially pooled channels (issue 16 item 2).

Usage::

    python benchmarks/bench_crowds_nuts.py [--n-warmup 500] [--n-draws 750] [--chains 4] [--only rte sim]
                                           [--out FILE]

Data:

- ``rte``: ``../shared/data/crowd_gold/rte.csv`` (Snow et al. 2008, recognising textual entailment; 800 items,
  164 workers, 8,000 labels; see the data README). The ``gold`` column is used for evaluation only, never
  in the fit.
- ``sim``: a simulated sparse crowd: 150 annotators, 1,500 items, 6 labels per item (9,000 labels),
  logit fpr ~ N(-2, 0.7), logit tpr ~ N(2, 0.7), of which 5% spammers (fpr = tpr = 0.5) and 2% adversaries
  (fpr 0.8, tpr 0.2); prevalence 0.4; seed 0.

Fit: ``fit_nuts(data, model="dawid_skene", pooling="partial", n_chains, n_warmup, n_draws)`` after
``configure_jax()`` (one device per core: chains run two at a time on 2 cores). Each data set is fitted
twice in the same process: the first call traces and compiles (``first_s``), the second reuses the compiled
sampler (``warm_s``, another seed). No persistent compilation cache. Reported per fit: wall time, max
R-hat, min bulk / tail ESS (over fpr, tpr, gap, u, prevalence and the population parameters), divergent
transitions, transitions at the maximum tree depth, mean tree depth, step size; the population summary;
flagged annotators; clean-label accuracy against gold (rte: posterior mean P(Y = 1) > 0.5) beside majority
vote; for ``sim``, the coverage of the true fpr / tpr by the 90% intervals.
Results: ``benchmarks/results/bench_crowds_nuts.json``. Goals (issue 16): R-hat <= 1.01, no saturated tree
depth, bulk ESS >= 400; rte <= 30 s including compilation on 2 cores (<= 10 s warm).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RTE = HERE.parent.parent.parent / "shared" / "data" / "crowd_gold" / "rte.csv"


def simulate_crowd(*, n_items=1500, n_annotators=150, per_item=6, spammers=0.05, adversaries=0.02, prevalence=0.4,
                   seed=0):
    """``(data, fpr, tpr, y)`` of a sparse simulated crowd (module docstring)."""
    import numpy as np
    import pandas as pd

    from noisycal_bayes.data import AnnotationSet

    rng = np.random.default_rng(seed)
    fpr = 1 / (1 + np.exp(-rng.normal(-2.0, 0.7, n_annotators)))
    tpr = 1 / (1 + np.exp(-rng.normal(2.0, 0.7, n_annotators)))
    k_s, k_a = int(round(spammers * n_annotators)), int(round(adversaries * n_annotators))
    fpr[:k_s] = tpr[:k_s] = 0.5
    fpr[k_s:k_s + k_a], tpr[k_s:k_s + k_a] = 0.8, 0.2
    y = (rng.random(n_items) < prevalence).astype(int)
    item = np.repeat(np.arange(n_items), per_item)
    ann = np.concatenate([rng.choice(n_annotators, per_item, replace=False) for _ in range(n_items)])
    lab = (rng.random(item.size) < np.where(y[item] == 1, tpr[ann], fpr[ann])).astype(int)
    data = AnnotationSet.from_crowdkit(pd.DataFrame({"task": item, "worker": ann, "label": lab}))
    order = np.asarray(data.annotator_ids).astype(int)
    return data, fpr[order], tpr[order], y[np.asarray(data.item_ids).astype(int)]


def load_rte():
    import pandas as pd

    from noisycal_bayes.data import AnnotationSet

    df = pd.read_csv(RTE)
    data = AnnotationSet.from_crowdkit(df.rename(columns={"item": "task"})[["task", "worker", "label"]])
    gold = df.groupby("item")["gold"].first().reindex(data.item_ids).to_numpy().astype(int)
    return data, gold


def clean_label_posterior(data, fit, *, thin=10):
    """Posterior mean of P(Y_i = 1 | A_i) over (thinned) draws, by the sparse E-step of core/sparse.py.

    (``FitResult.clean_label_probability`` needs an oriented ``channel``, which a pooled fit leaves None when
    some annotator's posterior-mean gap is <= 0.)
    """
    import jax
    import numpy as np

    from noisycal_bayes.core import x64
    from noisycal_bayes.core.sparse import sparse_e_step

    f = fit.draws["fpr"].reshape(-1, data.n_annotators)[::thin]
    t = fit.draws["tpr"].reshape(-1, data.n_annotators)[::thin]
    p = fit.draws["prevalence"].reshape(-1, 1)[::thin]
    group = np.zeros(data.n_items, np.int32)
    with x64():
        post = jax.vmap(lambda a, b, c: sparse_e_step(data.responses, group, a, b, c)[1])(f, t, p)
    return np.asarray(post).mean(axis=0)


def one_fit(data, seed, args):
    import warnings

    import numpy as np

    from noisycal_bayes.inference import fit_nuts

    t = time.perf_counter()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        fit = fit_nuts(data, model="dawid_skene", pooling="partial", n_chains=args.chains, n_warmup=args.n_warmup,
                       n_draws=args.n_draws, seed=seed, progress_bar=False)
    wall = time.perf_counter() - t
    tab, st = fit.diagnostics, fit.sample_stats
    worst = tab["r_hat"].idxmax()
    row = {"wall_s": round(wall, 2), "r_hat_max": float(tab["r_hat"].max()), "r_hat_worst": worst,
           "ess_bulk_min": float(tab["ess_bulk"].min()), "ess_tail_min": float(tab["ess_tail"].min()),
           "n_divergent": fit.n_divergent, "n_max_depth": fit.details["n_max_depth"],
           "tree_depth_mean": float(np.mean(st["tree_depth"])), "tree_depth_max": int(np.max(st["tree_depth"])),
           "step_size_mean": float(np.mean(st["step_size"])), "warnings": list(fit.warnings)}
    return fit, row


def main(argv=None):
    import numpy as np

    from noisycal_bayes.inference import configure_jax

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-warmup", type=int, default=500)
    p.add_argument("--n-draws", type=int, default=750)
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--only", nargs="+", default=["rte", "sim"], choices=["rte", "sim"])
    p.add_argument("--out", default=str(HERE / "results" / "bench_crowds_nuts.json"))
    args = p.parse_args(argv)
    configure_jax()
    out = {"settings": vars(args), "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                               "load_avg_at_start": os.getloadavg()}, "results": {}}
    for name in args.only:
        if name == "rte":
            data, gold = load_rte()
            truth = None
        else:
            data, fpr, tpr, gold = simulate_crowd()
            truth = (fpr, tpr)
        rows = []
        for rep in range(2):
            fit, row = one_fit(data, rep, args)
            row["stage"] = "first (compiles)" if rep == 0 else "warm (compiled sampler reused)"
            rows.append(row)
            print(name, row["stage"], {k: v for k, v in row.items() if k != "warnings"}, flush=True)
        post = clean_label_posterior(data, fit)
        votes = (data.labels == 1).sum(1) / np.maximum((data.labels >= 0).sum(1), 1)
        res = {"n_items": data.n_items, "n_annotators": data.n_annotators, "n_responses": data.n_responses,
               "fits": rows, "population": fit.details["population"],
               "flagged": {k: (len(v) if isinstance(v, list) else v) for k, v in fit.details["flagged"].items()},
               "accuracy_pooled": float(np.mean((post > 0.5) == gold)),
               "accuracy_majority_vote": float(np.mean((votes > 0.5) == gold))}
        if truth is not None:
            lo = {k: np.quantile(fit.draws[k], 0.05, axis=(0, 1)) for k in ("fpr", "tpr")}
            hi = {k: np.quantile(fit.draws[k], 0.95, axis=(0, 1)) for k in ("fpr", "tpr")}
            res["coverage_90"] = {k: float(np.mean((lo[k] <= t) & (t <= hi[k]))) for k, t in zip(("fpr", "tpr"), truth)}
            res["true_spammers"], res["true_adversaries"] = round(0.05 * 150), round(0.02 * 150)
        out["results"][name] = res
        print(name, {k: v for k, v in res.items() if k != "fits"}, flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
