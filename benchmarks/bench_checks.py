"""Cost of the model checks that ``evaluate`` runs by default (issue 17, "Cost"): with and without, side by side.

Usage::

    python benchmarks/bench_checks.py [--n 1e5] [--reps 3] [--nuts-reps 2] [--n-chains 4] [--n-warmup 1000]
                                      [--n-draws 1000] [--out FILE]

Data: ``simulate_annotations(n, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.75, 0.8], seed=0)`` (three annotators,
calibrated uniform scores). Configurations, in one process, alternating so that load drifts hit both alike:

- ``evaluate_em``: ``noisycal_bayes.evaluate(data, method="em", checks=...)`` (default settings: 10 EM starts,
  200 bootstrap replicates for the intervals; with checks, ``model_checks`` with 199 parametric bootstrap
  replicates, each refitted by EM);
- ``evaluate_nuts``: ``evaluate(data, method="nuts", checks=...)`` with ``--n-chains`` x (``--n-warmup`` +
  ``--n-draws``) (with checks, the posterior predictive check on 199 draws).

A first call of each configuration compiles and is not timed; ``median_s`` is the median of the timed calls.
``added_s`` and ``added_fraction`` compare the medians with and without checks. Goals: the checks add at most 20%
to ``evaluate --method em`` and at most 5 s to the NUTS route at 1e5 items.
Results: ``benchmarks/results/bench_checks.json``; ``render_performance.py`` puts them in docs/performance.md.
"""
from __future__ import annotations

import argparse
import warnings

from _benchutil import machine, median, print_table, timed, write_json


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=float, default=1e5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--nuts-reps", type=int, default=2)
    ap.add_argument("--n-chains", type=int, default=4)
    ap.add_argument("--n-warmup", type=int, default=1000)
    ap.add_argument("--n-draws", type=int, default=1000)
    ap.add_argument("--skip-nuts", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    from noisycal_bayes.inference import configure_jax

    configure_jax(n_devices=2)
    import noisycal_bayes as nb
    from noisycal_bayes.simulate import simulate_annotations

    info = machine()
    n = int(a.n)
    data = simulate_annotations(n, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.75, 0.8], seed=0).data
    configs = [("evaluate_em", dict(method="em"), a.reps)]
    if not a.skip_nuts:
        configs.append(("evaluate_nuts", dict(method="nuts", n_chains=a.n_chains, n_warmup=a.n_warmup,
                                              n_draws=a.n_draws), a.nuts_reps))
    rows = []
    goals = []
    for stage, kw, reps in configs:
        times = {False: [], True: []}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for checks in (False, True):  # compile both routes first (not timed)
                nb.evaluate(data, checks=checks, **kw)
            for _ in range(reps):
                for checks in (False, True):
                    _, s = timed(nb.evaluate, data, checks=checks, **kw)
                    times[checks].append(s)
        off, on = median(times[False]), median(times[True])
        for checks in (False, True):
            rows.append({"stage": stage, "checks": checks, "n_items": n, "n_annotators": 3,
                         "median_s": median(times[checks]), "reps": reps,
                         "added_s": on - off if checks else None,
                         "added_fraction": (on - off) / off if checks else None})
        if stage == "evaluate_em":
            goals.append({"goal": "checks add at most 20% to evaluate --method em at 1e5 items",
                          "value": f"{100 * (on - off) / off:.0f}%", "met": (on - off) / off <= 0.20})
        else:
            goals.append({"goal": "checks add at most 5 s to the NUTS route at 1e5 items",
                          "value": f"{on - off:.1f} s", "met": on - off <= 5.0})
    print_table(rows, ["stage", "checks", "n_items", "median_s", "added_s", "added_fraction", "reps"])
    write_json("bench_checks", info, dict(vars(a), goals=goals), rows, a.out)


if __name__ == "__main__":
    main()
