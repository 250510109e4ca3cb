"""NUTS speed of the grouped model: compressed (group, pattern) likelihood vs a per-item likelihood.

Usage::

    python benchmarks/bench_nuts.py [--sizes 1e4 1e5 1e6] [--reps 3] [--per-item-max 1e5] [--out FILE.json]

For each n in ``--sizes`` (3 annotators with channels (0.1, 0.85), (0.2, 0.75), (0.15, 0.8), 10
equal-mass score groups, calibrated truth, scores ~ U(0, 1)), ``fit_nuts(data, groups=10, n_chains=4,
n_warmup=1000, n_draws=1000)`` in float64 (the defaults) is timed:

- **compressed** (the default, ``compress=True``): the likelihood on the (group, pattern) table padded to
  10 x 3^3 = 270 rows, the same shape for every n, so one compiled program serves every size;
- **per item** (``compress=False``): the same model evaluated on the n x 3 label matrix, item by item
  (compiled once per n, since the shapes change).

Reported per configuration (median over ``--reps`` repetitions of the *sampling* runs):

- ``compile_s``: wall time of the first fit of that shape minus the median wall time of the repeated
  fits (tracing + XLA compilation of the NUTS program; the EM start and diagnostics are in both);
- ``wall_s``: wall time of a fit whose program is already compiled (EM start + warm-up + sampling +
  diagnostics);
- ``min_ess_bulk`` and ``min_ess_per_s``: the smallest bulk ESS over fpr, tpr and prevalence, and that
  divided by ``wall_s``;
- for compressed fits, the ratio of ``wall_s`` at each n to ``wall_s`` at the smallest n (target: < 2 at
  n = 1e6 vs 1e4), and per-item / compressed ratios where both ran.

Compressed fits are timed in interleaved rounds (every size and chain layout once per round), because the
machine is shared and background load drifts: sequential timing of one size after another measured load,
not n.

Per-item fits above ``--per-item-max`` items are skipped (at 1e6 items one fit takes tens of minutes on 2
cores: each gradient is a pass over 3e6 responses). Per-item fits are repeated once at the smallest n only;
above it a single fit is timed and the per-item compile time measured at the smallest n is subtracted
(``compile_estimated: true`` in the JSON; compilation does not depend on n beyond array sizes).
Compressed fits are also timed with chain_method="vectorized" (all chains in one batched program), to choose
the default layout when JAX has fewer devices than chains.

Results go to ``benchmarks/results/bench_nuts.json`` (or ``--out``) and a table is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np

FPR = [0.1, 0.2, 0.15]
TPR = [0.85, 0.75, 0.8]
SETTINGS = dict(groups=10, n_chains=4, n_warmup=1000, n_draws=1000, progress_bar=False)


def _min_ess(fit) -> float:
    table = fit.diagnostics
    keep = table["name"].isin(["fpr", "tpr", "prevalence"])
    return float(table.loc[keep, "ess_bulk"].min())


def _timed_fit(data, **kw):
    from noisycal_bayes.inference import fit_nuts

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        fit = fit_nuts(data, **SETTINGS, **kw)
        wall = time.perf_counter() - t0
    return fit, wall, [str(w.message)[:120] for w in caught]


def bench_config(data, *, reps: int, seed0: int, compile_estimate: float | None = None, **kw) -> dict:
    """Time a first fit (compiles) and ``reps`` repeats. With ``reps=0`` the compile time is not measured but
    taken from ``compile_estimate`` (the same program compiled at another n), and ``wall_s`` is the first fit
    minus that estimate."""
    first_fit, first_wall, first_warn = _timed_fit(data, seed=seed0, **kw)
    if reps == 0:
        wall = first_wall - compile_estimate
        ess = _min_ess(first_fit)
        return {"first_fit_s": first_wall, "compile_s": compile_estimate, "compile_estimated": True, "wall_s": wall,
                "walls_s": [], "min_ess_bulk": ess, "min_ess_per_s": ess / wall, "min_ess_first_fit": ess,
                "n_divergent": [first_fit.n_divergent], "warnings": sorted(set(first_warn))}
    walls, ess, warns, div = [], [], [], []
    for r in range(reps):
        fit, wall, w = _timed_fit(data, seed=seed0 + 1 + r, **kw)
        walls.append(wall)
        ess.append(_min_ess(fit))
        warns.extend(w)
        div.append(fit.n_divergent)
    wall = float(np.median(walls))
    min_ess = float(np.median(ess))
    return {"first_fit_s": first_wall, "compile_s": first_wall - wall, "wall_s": wall, "walls_s": walls,
            "min_ess_bulk": min_ess, "min_ess_per_s": min_ess / wall,
            "min_ess_first_fit": _min_ess(first_fit), "n_divergent": div,
            "warnings": sorted(set(first_warn + warns))}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e4, 1e5, 1e6])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--per-item-max", type=float, default=1e5)
    parser.add_argument("--no-vectorized", action="store_true")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_nuts.json"))
    args = parser.parse_args(argv)

    import jax
    import numpyro

    from noisycal_bayes.simulate import simulate_annotations

    sizes = [int(s) for s in args.sizes]
    sims = {n: simulate_annotations(n, fpr=FPR, tpr=TPR, seed=n % 9973) for n in sizes}
    methods = ["sequential"] + ([] if args.no_vectorized else ["vectorized"])

    # Warm-up: one-time process costs (EM compilation, first ArviZ call) would otherwise be booked as the
    # compile time of whichever layout runs first.
    from noisycal_bayes.diagnostics import mcmc_diagnostics
    from noisycal_bayes.inference import fit_em

    fit_em(sims[sizes[0]].data, groups=SETTINGS["groups"])
    mcmc_diagnostics({"x": np.random.default_rng(0).normal(size=(4, 100))})

    # Compressed fits, interleaved: the machine is shared, so every size and chain layout is timed in each
    # round and the medians see the same background load. The padded table has the same shape at every n, so
    # each layout compiles once (at the smallest n); later first fits show compile_s ~ 0.
    first, repeat = {}, {(n, m): [] for n in sizes for m in methods}
    for m in methods:
        for n in sizes:
            first[(n, m)] = _timed_fit(sims[n].data, seed=0, compress=True, chain_method=m)
            print(f"first fit compressed {m} n={n:.0e}: {first[(n, m)][1]:.2f}s", flush=True)
    for r in range(args.reps):
        for m in methods:
            for n in sizes:
                repeat[(n, m)].append(_timed_fit(sims[n].data, seed=1 + r, compress=True, chain_method=m))
        print(f"round {r + 1}/{args.reps} done", flush=True)
    rows = []
    for m in methods:
        for n in sizes:
            walls = [w for _, w, _ in repeat[(n, m)]]
            ess = [_min_ess(f) for f, _, _ in repeat[(n, m)]]
            wall = float(np.median(walls))
            f0, w0, warn0 = first[(n, m)]
            rows.append({"n_items": n, "likelihood": "compressed", "chain_method": m, "first_fit_s": w0,
                         "compile_s": max(0.0, w0 - wall), "wall_s": wall, "walls_s": walls,
                         "min_ess_bulk": float(np.median(ess)), "min_ess_per_s": float(np.median(ess)) / wall,
                         "n_divergent": [f.n_divergent for f, _, _ in repeat[(n, m)]],
                         "warnings": sorted(set(warn0 + [x for _, _, w in repeat[(n, m)] for x in w]))})

    # Per item: one fit at 1e5 takes about ten times one at 1e4, so repeat (to measure the compile time) only at
    # the smallest n, and reuse that compile time (same program, other array sizes) above it.
    per_item_compile = None
    for n in sizes:
        if n > args.per_item_max:
            rows.append({"n_items": n, "likelihood": "per_item", "chain_method": "sequential", "skipped": True,
                         "reason": f"n > --per-item-max={args.per_item_max:.0e}: one fit would take tens of minutes"})
            continue
        is_first = per_item_compile is None
        res = bench_config(sims[n].data, reps=1 if is_first else 0, seed0=100, compress=False,
                           compile_estimate=per_item_compile)
        if is_first:
            per_item_compile = res["compile_s"]
        rows.append({"n_items": n, "likelihood": "per_item", "chain_method": "sequential", **res})
        print(f"per item n={n:.0e}: wall {res['wall_s']:.2f}s compile {res['compile_s']:.2f}s", flush=True)

    for r in rows:
        if r.get("skipped"):
            continue
        if r["likelihood"] == "compressed":
            base = next(b for b in rows if b["likelihood"] == "compressed" and b["chain_method"] == r["chain_method"]
                        and b["n_items"] == sizes[0])
            r["wall_ratio_vs_smallest"] = r["wall_s"] / base["wall_s"]
        if r["likelihood"] == "per_item":
            comp = next(c for c in rows if c["n_items"] == r["n_items"] and c["likelihood"] == "compressed"
                        and c["chain_method"] == "sequential")
            r["wall_ratio_vs_compressed"] = r["wall_s"] / comp["wall_s"]
            r["ess_per_s_ratio_vs_compressed"] = r["min_ess_per_s"] / comp["min_ess_per_s"]

    meta = {"python": platform.python_version(), "jax": jax.__version__, "numpyro": numpyro.__version__,
            "cpu_count": os.cpu_count(), "jax_devices": jax.local_device_count(),
            "load_average_at_end": os.getloadavg(), "settings": {k: v for k, v in SETTINGS.items()},
            "precision": "float64", "reps": args.reps, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    out = {"meta": meta, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2, default=float))

    print(f"\nNUTS, grouped model, J=3, 10 groups, 4 chains x (1000 warm-up + 1000 draws), float64; "
          f"compressed: medians of {args.reps} interleaved repeated fits (compile once per chain layout: ~0 above "
          "the smallest n); per item: 1 fit (compile time * estimated at the smallest n)")
    head = f"{'n_items':>9} {'likelihood':>10} {'chains':>10} {'compile_s':>9} {'wall_s':>8} {'minESS':>7} " \
           f"{'ESS/s':>8} {'vs 1e4':>7} {'item/comp':>9}"
    print(head)
    print("-" * len(head))
    for r in rows:
        if r.get("skipped"):
            print(f"{r['n_items']:>9.0e} {r['likelihood']:>10} {r['chain_method']:>10}   skipped: {r['reason']}")
            continue
        ratio = f"{r['wall_ratio_vs_smallest']:.2f}" if "wall_ratio_vs_smallest" in r else ""
        item = f"{r['wall_ratio_vs_compressed']:.1f}x" if "wall_ratio_vs_compressed" in r else ""
        star = "*" if r.get("compile_estimated") else " "
        print(f"{r['n_items']:>9.0e} {r['likelihood']:>10} {r['chain_method']:>10} {r['compile_s']:>8.1f}{star} "
              f"{r['wall_s']:>8.2f} {r['min_ess_bulk']:>7.0f} {r['min_ess_per_s']:>8.1f} {ratio:>7} {item:>9}")
    print(f"\nload average at the end: {meta['load_average_at_end']} on {meta['cpu_count']} CPUs; written to {args.out}")
    return out


if __name__ == "__main__":
    main()
