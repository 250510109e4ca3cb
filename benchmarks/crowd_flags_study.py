"""Flags and per-annotator intervals of ``fit_em`` on simulated crowds (issue 16, items 1 and the recovery goal).

Usage::

    PYTHONPATH=$PWD python benchmarks/crowd_flags_study.py [--n-sims 20] [--out FILE]

Design: ``simulate_crowd(n_items=2000, n_annotators=100, labels_per_item=6, activity="heavy", spammers=0.05,
adversaries=0.02, seed=s)`` for ``s = 0 .. n_sims - 1`` (heavy-tailed activity: some annotators have only a few
labels); ``fit_em(data, model="dawid_skene", starts="vote", max_iter=5000)`` (annotators with one or two labels put
rates on the boundary of [0, 1], where EM converges slowly: seed 7 needs more than the default 1000
iterations; fits that still fail are counted in ``n_failed`` and left out). Reported:

- coverage of the 90% intervals of fpr and tpr (``fit.annotators``) over all annotators and data sets, with its
  binomial standard error, overall and by labels per annotator (fewer than 50 / at least 50);
- flags: precision and recall of "adversarial" for the simulated adversaries, and of "uninformative" for the
  spammers (a spammer is found when its gap interval contains 0: expected recall about 0.9 at the 90% level;
  honest annotators with few labels are flagged uninformative too, which lowers the precision: that is the
  rule's purpose, a gap that cannot be told from 0 gets weight 0).

Results: ``benchmarks/results/crowd_flags_study.json``.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import machine, print_table, write_json  # noqa: E402


def main(argv=None):
    from noisycal_bayes import fit_em
    from noisycal_bayes.simulate import simulate_crowd

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-sims", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    info = machine()
    cover, few, kinds, flags, n_failed = [], [], [], [], 0
    t0 = time.perf_counter()
    for s in range(args.n_sims):
        sim = simulate_crowd(2000, 100, labels_per_item=6, activity="heavy", spammers=0.05, adversaries=0.02, seed=s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_em(sim.data, model="dawid_skene", starts="vote", max_iter=5000)
        t = fit.annotators
        if t is None:
            n_failed += 1
            continue
        for name, truth in (("fpr", sim.fpr), ("tpr", sim.tpr)):
            cover.append((t[f"{name}_lower"] <= truth) & (truth <= t[f"{name}_upper"]))
            few.append(t["n_labels"].to_numpy() < 50)
        kinds.append(sim.kind)
        flags.append(t["flag"].to_numpy())
    cover, few = np.concatenate(cover), np.concatenate(few)
    kinds, flags = np.concatenate(kinds), np.concatenate(flags)
    rows = []
    for label, mask in (("all", np.ones_like(few)), ("n_labels < 50", few), ("n_labels >= 50", ~few)):
        n = int(mask.sum())
        p = float(cover[mask].mean()) if n else float("nan")
        rows.append({"stage": "coverage_90", "subset": label, "n_intervals": n, "coverage": p,
                     "se": float(np.sqrt(0.9 * 0.1 / n)) if n else float("nan")})
    for kind, flag in (("adversary", "adversarial"), ("spammer", "uninformative")):
        tp = int(np.sum((kinds == kind) & (flags == flag)))
        rows.append({"stage": f"flag_{flag}", "subset": kind, "n_true": int(np.sum(kinds == kind)),
                     "n_flagged": int(np.sum(flags == flag)), "recall": tp / max(int(np.sum(kinds == kind)), 1),
                     "precision": tp / max(int(np.sum(flags == flag)), 1)})
    print_table(rows, ["stage", "subset", "n_intervals", "coverage", "se", "n_true", "n_flagged", "recall",
                       "precision"])
    print(f"failed fits: {n_failed} of {args.n_sims}")
    write_json("crowd_flags_study", info, {"n_sims": args.n_sims, "n_failed": n_failed,
                                           "wall_s": time.perf_counter() - t0}, rows,
               args.out)


if __name__ == "__main__":
    main()
