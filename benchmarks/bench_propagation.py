"""Propagation speed: ``posterior_nc_ece`` over 4,000 posterior draws, with and without the Bayesian bootstrap.

Usage::

    python benchmarks/bench_propagation.py [--sizes 1e4 1e5 1e6] [--reps 3] [--bins 10] [--out FILE] [--quick]

For each n: simulate 3 annotators (fpr 0.1, 0.2, 0.15; tpr 0.85, 0.75, 0.8; an over-confident model, scores
~ U(0, 1)), fit ``fit_nuts(data, model="grouped", groups=Binning.equal_mass(10), n_chains=4, n_warmup=1000, n_draws=1000)``
(4,000 draws; not timed here, see bench_nuts.py), then time
``posterior_nc_ece(data, fit, bins=10, method="plugin", bootstrap=B)`` for B in (False, True):

- ``first_call_s``: the first call with this shape in the process (it traces and compiles the vmapped
  per-draw bin-table function; the padded shapes do not depend on n, so later sizes reuse it);
- ``median_s``: median of ``--reps`` further calls (warm).

``bootstrap=False``: the per-(bin, missingness) sums are computed once and the per-draw work is on
(draws x bins) arrays. ``bootstrap=True``: each draw also reweights the items by ``n Dirichlet(1,...,1)``.
Goal (issue 6): < 2 s at 1e6 items, 3 annotators, 10 bins, 4,000 draws. Rows: ``stage="propagation"``,
``bootstrap``, ``n_draws``, ``n_bins``, ``first_call_s``, ``median_s``, ``per_draw_ms``; the NUTS fit time is in
``fit_s`` (informative only). Results: ``benchmarks/results/bench_propagation.json``.
"""
from __future__ import annotations

import argparse
import gc
import sys
import warnings
from pathlib import Path

import numpy as np
from noisycal_bayes.data import Binning

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import machine, median, print_table, sizes_arg, timed, write_json  # noqa: E402

FPR, TPR = [0.1, 0.2, 0.15], [0.85, 0.75, 0.8]


def goals(rows) -> list[dict]:
    """Issue 6 goal: posterior NC-ECE over 4,000 draws at 1e6 items, 3 annotators, 10 bins, < 2 s (warm)."""
    out = []
    for r in rows:
        if r["stage"] == "propagation" and r["n_items"] == 1_000_000:
            out.append({"goal": f"posterior NC-ECE, {r['n_draws']} draws, 1e6 x 3, {r['n_bins']} bins, "
                                f"bootstrap={r['bootstrap']}: < 2 s",
                        "value": f"{r['median_s']:.2f} s (first call {r['first_call_s']:.2f} s)",
                        "met": bool(r["median_s"] < 2.0)})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", default=["1e4", "1e5", "1e6"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bins", type=int, default=10)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--max-rep-s", type=float, default=60.0, help="do not repeat calls longer than this")
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="tiny smoke run (1e3, 1e4; 2 chains x 200 draws)")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.reps, args.chains, args.draws, args.warmup = ["1e3", "1e4"], 2, 2, 200, 200
        args.out = args.out or "/tmp/bench_propagation_quick.json"
    info = machine()
    import jax

    from noisycal_bayes import fit_nuts, posterior_nc_ece
    from noisycal_bayes.simulate import simulate_annotations

    print(f"python {info['python']}, jax {info['jax']}, numpy {info['numpy']}, {info['cores']} cores, "
          f"load {info['load_avg_start']}; devices {jax.devices()}")
    rows = []
    cols = ["stage", "n_items", "bootstrap", "n_draws", "first_call_s", "median_s", "per_draw_ms", "reps", "nc_ece"]
    for n in sizes_arg(args.sizes):
        sim = simulate_annotations(n, fpr=FPR, tpr=TPR, curve="overconfident", seed=n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit, fit_s = timed(fit_nuts, sim.data, model="grouped", groups=Binning.equal_mass(10), n_chains=args.chains,
                               n_warmup=args.warmup, n_draws=args.draws, progress_bar=False, seed=1)
        n_draws = int(np.prod(fit.draws["fpr"].shape[:2]))
        block = []
        for boot in (False, True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res, first = timed(posterior_nc_ece, sim.data, fit, bins=args.bins, method="plugin", bootstrap=boot)
                times = []
                for _ in range(args.reps):
                    gc.collect()
                    res, t = timed(posterior_nc_ece, sim.data, fit, bins=args.bins, method="plugin", bootstrap=boot)
                    times.append(t)
                    if t > args.max_rep_s:
                        break
            med = median(times)
            block.append({"stage": "propagation", "method": "plugin", "n_items": n, "n_annotators": len(FPR),
                          "n_bins": args.bins, "bootstrap": boot, "n_draws": n_draws, "first_call_s": first,
                          "median_s": med, "times_s": times, "reps": len(times), "per_draw_ms": 1e3 * med / n_draws,
                          "compile_overhead_s": first - med, "nc_ece": float(res.debiased),
                          "interval": [float(res.lower), float(res.upper)], "fit_s": fit_s,
                          "goal_s": 2.0, "goal_met": bool(med < 2.0) if n == 1_000_000 else None})
        print_table(block, cols)
        rows += block
        del sim, fit
        gc.collect()
    settings = {"goals": goals(rows), "model": "grouped", "groups": 10, "n_chains": args.chains, "n_warmup": args.warmup,
                "n_draws_per_chain": args.draws, "bins": args.bins, "method": "plugin", "weights": "iv",
                "channels": {"fpr": FPR, "tpr": TPR}, "curve": "overconfident", "reps": args.reps}
    write_json("bench_propagation", info, settings, rows, args.out)


if __name__ == "__main__":
    main()
