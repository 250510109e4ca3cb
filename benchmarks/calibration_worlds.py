"""Which simulated world calibrates the level of a sum of debiased |bin residuals|? (docs/coverage.md, K-class.)

The K-class intervals are read at a *calibrated* level (``propagate.intervals.calibrated_level``): the level at
which the centred interval covers, estimated in a world whose true bin residuals are the debiased ones, ``m_b``
(the "clamped world": every bin below ``sd sqrt(2/pi)`` is exactly 0 there). This script compares it with an
empirical-Bayes world, in which each world draws the bins' true ``|mu_b| / sd_b`` from their posterior under the
nonparametric maximum-likelihood prior fitted across the bins (Kiefer & Wolfowitz 1956; EM on a grid, Laird
1978), so that bins near the threshold are neither all 0 nor at their noisy observed size.

Two modes:

* ``--idealised`` (default; no EM, a few minutes): 150 independent bins with sd 1 (the K = 10 class-wise mean),
  fixed true ``|mu_b|`` configurations, 400 replicates each; coverage of the nominal, clamped-world (shipped) and
  empirical-Bayes levels.
* ``--study K J CURVE FIRST LAST --cache DIR``: the same three readings on the study's data sets of
  ``coverage_multiclass.py`` (its joint EM-refit draws, class-wise mean or ``--kind top_label``), cached EM
  draws reused.

Measured (2026-12-02): the empirical-Bayes world narrows the class-wise over-coverage of the study (K = 10,
3 annotators, over-confident: 0.96 -> 0.935 on data sets 0-199, 0.935 -> 0.925 on 500-699), but it covers 0.805
in the idealised configuration with a quarter of the bins exactly 0 (the clamped world 0.877) and 0.870 against
0.920 at K = 10, 3 annotators, under-confident, so it is not used (benchmarks/results/calibration_worlds.txt).
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from noisycal_bayes.propagate.intervals import bias_corrected, calibrated_level as _calibrated_level  # noqa: E402
from noisycal_bayes.propagate.intervals import quantiles as _quantiles  # noqa: E402
from noisycal_bayes.propagate.result import _summarise, debias_abs  # noqa: E402

LEVEL = 0.9
GRID = np.linspace(0.0, 8.0, 161)  # theta = |mu| / sd


def npmle_posterior(t_abs, iters=300):
    """Posterior over ``GRID`` of each bin's ``theta`` given ``|t| = |theta + Z|``, under the NPMLE prior."""
    lik = np.exp(-0.5 * (t_abs[:, None] - GRID) ** 2) + np.exp(-0.5 * (t_abs[:, None] + GRID) ** 2)
    w = np.full(GRID.size, 1.0 / GRID.size)
    for _ in range(iters):
        post = lik * w
        post /= post.sum(axis=1, keepdims=True)
        w = post.mean(axis=0)
    post = lik * w
    return post / post.sum(axis=1, keepdims=True)


def readings(e):
    """Estimate, p value and the clamped world's draws from bin draws ``e`` (n_draws, n_bins): the shipped
    computation, ``propagate.result._summarise`` with unit counts (so its residuals are ``e`` itself)."""
    _, clamped, estimate, p_value = _summarise(np.ones((e.shape[0], 1)), np.zeros_like(e), e)
    return estimate, p_value, clamped


def eb_level(e, level=LEVEL, worlds=2000, seed=0, grid=201):
    """Calibrated level in the empirical-Bayes world (at least ``level``, as the shipped one)."""
    ebar, sd = e.mean(axis=0), e.std(axis=0)
    cen = e - ebar
    ok = sd > 0
    post = npmle_posterior(np.abs(ebar[ok]) / sd[ok])
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(post, axis=1)
    idx = np.minimum((rng.random((worlds, ok.sum()))[:, :, None] > cdf[None]).sum(axis=2), GRID.size - 1)
    mu = np.zeros((worlds, e.shape[1]))
    mu[:, ok] = np.sign(ebar[ok]) * sd[ok] * GRID[idx]
    err = debias_abs(np.abs(mu + cen[rng.integers(0, e.shape[0], worlds)]), sd).sum(axis=1) - np.abs(mu).sum(axis=1)
    _, _, clamped = readings(e)
    dev = clamped - clamped.mean()
    a = np.linspace(level, 1.0, grid)
    lo, hi = np.quantile(dev, (1 - a) / 2), np.quantile(dev, (1 + a) / 2)
    cover = ((err[:, None] + lo[None] <= 0) & (err[:, None] + hi[None] >= 0)).mean(axis=0)
    hit = np.flatnonzero(cover >= level)
    return float(a[hit[0]]) if hit.size else 1.0


def covers(e, truth, seed):
    """Whether the nominal, clamped-world and empirical-Bayes readings cover ``truth`` (as the shipped
    interval: centred draws, one-sided reading when the calibration check does not reject)."""
    est, p_value, clamped = readings(e)
    centred = np.maximum(clamped - (clamped.mean() - est), 0.0)
    out = []
    for a in (LEVEL, _calibrated_level(clamped, est, LEVEL), eb_level(e, seed=seed)):
        lo, hi, one = _quantiles(centred, LEVEL, a)
        if p_value > 1 - LEVEL:
            lo, hi = 0.0, one
        out.append(lo <= truth <= hi)
    return out


def idealised(reps=400, n_sim=100, seed=2):
    rng = np.random.default_rng(1)
    configs = {"|mu|/sd uniform on [0, 3]": rng.uniform(0, 3, 150),
               "a quarter exactly 0, the rest uniform on [0.5, 3]": np.r_[np.zeros(38), rng.uniform(0.5, 3, 112)],
               "all at 5 sd": np.full(150, 5.0)}
    for name, u in configs.items():
        sim = np.random.default_rng(seed)
        hits = []
        for r in range(reps):
            x = u + sim.standard_normal(u.size)
            z = sim.standard_normal((n_sim, u.size))
            hits.append(covers(x + z - z.mean(axis=0), np.abs(u).sum(), r))
        h = np.mean(hits, axis=0)
        print(f"{name}: nominal {h[0]:.3f}  clamped world (shipped) {h[1]:.3f}  empirical-Bayes world {h[2]:.3f}"
              f"  ({reps} replicates, se {np.sqrt(0.09 / reps):.3f})", flush=True)


def study(k, j, curve, first, last, kind, cache):
    import coverage_multiclass as cm
    import noisycal_bayes.propagate.nc_ece as pm

    truth = cm.population_target(k, curve)[0 if kind == "top_label" else 1]
    hits = []
    for r in range(first, last):
        seed = cm.data_seed(k, j, curve, r)
        p, resp, g, _, draws, _ = cm._data(seed, k, j, curve, 2000, 100, cache=cache)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            count, score, freq, point, _, meta, _ = pm._run(
                "calibration_worlds", kind, p, resp, draws, None, bins=cm.BINS, weights="iv", level=LEVEL, seed=seed,
                interval="debiased", bootstrap=True, n_draws=None, usable=None, max_condition=pm.MAX_CONDITION,
                item_weights=g)
        e = (bias_corrected(count, score, freq, point) - score) / count.sum(axis=1, keepdims=True)
        hits.append(covers(e, truth, seed))
    h = np.mean(hits, axis=0)
    print(f"{kind} K={k} J={j} {curve} data sets {first}-{last - 1}: nominal {h[0]:.3f}  clamped world (shipped) "
          f"{h[1]:.3f}  empirical-Bayes world {h[2]:.3f}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--study", nargs=5, metavar=("K", "J", "CURVE", "FIRST", "LAST"))
    ap.add_argument("--kind", choices=["classwise", "top_label"], default="classwise")
    ap.add_argument("--cache", help="the EM draws' cache directory of coverage_multiclass.py")
    args = ap.parse_args(argv)
    if args.study:
        k, j, curve, first, last = args.study
        study(int(k), int(j), curve, int(first), int(last), args.kind, args.cache)
    else:
        idealised()


if __name__ == "__main__":
    main()
