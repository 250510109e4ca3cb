"""Power and false-alarm rate of the targeted model checks (issue 17 items 2 and 3).

Checks ``score_dependent_noise`` and ``annotator_dependence`` of
:func:`noisycal_bayes.diagnostics.model_checks` (EM fit, parametric bootstrap), on three designs:

* ``null``: three conditionally independent annotators with shared channels (the model holds);
* ``score``: annotator 0's false-positive rate is ``0.02 + 0.3 z`` (the issue's alternative);
* ``dependent``: a latent item difficulty: 20% of items are hard, where every annotator's error rate is
  multiplied by 2.55, and by 0.61 on the others, so that the mean error rate is unchanged and two annotators'
  errors coincide ``0.2 * 2.55^2 + 0.8 * 0.61^2 = 1.6`` times as often as independence predicts (the ratio the
  issue measured on CIFAR-10N against the reference labels).

Run: ``python benchmarks/checks_power.py --n 20000 --reps 20 --out benchmarks/results/checks_power.json``.
"""
from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from noisycal_bayes import AnnotationSet, Binning, fit_em
from noisycal_bayes.diagnostics import model_checks

FPR = np.array([0.08, 0.08, 0.05])
FNR = np.array([0.10, 0.15, 0.08])
HARD, R_HARD = 0.2, 2.549
R_EASY = (1 - HARD * R_HARD) / (1 - HARD)


def simulate(kind: str, n: int, seed: int) -> AnnotationSet:
    """One data set of the design ``kind`` (module docstring); calibrated uniform scores."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(size=n)
    y = rng.random(n) < z
    fpr = np.broadcast_to(FPR, (n, 3)).copy()
    fnr = np.broadcast_to(FNR, (n, 3)).copy()
    if kind == "score":
        fpr[:, 0] = 0.02 + 0.3 * z
    elif kind == "dependent":
        scale = np.where(rng.random(n) < HARD, R_HARD, R_EASY)[:, None]
        fpr, fnr = fpr * scale, fnr * scale
    elif kind != "null":
        raise ValueError(kind)
    p1 = np.where(y[:, None], 1 - fnr, fpr)
    labels = (rng.random((n, 3)) < p1).astype(np.int8)
    return AnnotationSet.from_wide(labels, z)


def run(kind, n, reps, n_replicates, groups, seed0=0):
    out = []
    for r in range(reps):
        data = simulate(kind, n, seed0 + r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_em(data, groups=Binning.equal_mass(groups), n_starts=3, seed=r)
            t0 = time.perf_counter()
            checks = model_checks(data, fit, n_replicates=n_replicates, seed=r)
        tab = checks.table.set_index("name")
        out.append({name: {"status": tab.loc[name, "status"], "p_value": float(tab.loc[name, "p_value"])}
                    for name in tab.index} | {"seconds": time.perf_counter() - t0})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--replicates", type=int, default=99)
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--kinds", default="null,score,dependent")
    ap.add_argument("--seed0", type=int, default=0,
                    help="first simulation seed; give each run (each n) its own range: runs that share seeds share data")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    summary, p_values = {}, {}
    for kind in a.kinds.split(","):
        res = run(kind, a.n, a.reps, a.replicates, a.groups, seed0=a.seed0)
        names = [k for k in res[0] if k != "seconds"]
        summary[kind] = {name: float(np.mean([r[name]["status"] == "warn" for r in res])) for name in names}
        summary[kind]["seconds_per_check"] = float(np.mean([r["seconds"] for r in res]))
        p_values[kind] = {name: [r[name]["p_value"] for r in res] for name in names}
        print(kind, json.dumps(summary[kind]), flush=True)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"settings": vars(a), "warn_rate": summary, "p_values": p_values}, fh, indent=1)


if __name__ == "__main__":
    main()
