"""Why the class-wise mean's debiased interval is narrow at the nominal level (docs/coverage.md, K-class section).

The debiased estimate of a binned ECE is ``sum_b g(|x_b|)``, ``g = propagate.result.debias_abs`` (the inverse of
the folded-normal mean, 0 below ``sd sqrt(2/pi)`` and with an infinite slope just above it). Its draws (the
"clamped world" of ``propagate.result._summarise``) evaluate the per-bin spread at the debiased centres ``m_b``,
and the plain bootstrap of the estimator ("plug-in world") at the observed centres ``x_b``. The estimator's own
per-bin variance ``v(mu) = Var g(|mu + Z|)`` (sd 1) is not monotone: 0.50 at ``mu = 0``, a peak of about 1.19 near
``mu = 2``, then back to 1. Around the peak ``v`` is concave, so a spread evaluated at a noisy centre averages ``v``
over the centre's noise and falls short of ``v(mu)``. The K = 10 class-wise mean sums 150 bins, many of them at
1-3 sd from 0, so its draws are a few per cent narrow (z sd 1.03-1.19 on the study).

Three modes, each printing and writing ``benchmarks/results/debias_variance.json`` (``--out``):

* ``--table``: ``v(mu)`` and the mean ``G(mu) = E g(|mu + Z|)`` on a grid (quadrature on 4,001 nodes).
* ``--idealised`` (default, about 2 minutes): 150 independent bins with sd 1, fixed true ``|mu_b|`` configurations,
  ``--reps`` replicates of 100 draws each; coverage and z sd of the centred nominal interval read off the clamped
  world, the plug-in world, and the clamped world with its spread rescaled by the empirical-Bayes factor
  ``sqrt(sum_b E[v(theta_b) | x_b] / sum_b Var_s g_sb)`` (NPMLE prior over the bins, as
  ``calibration_worlds.npmle_posterior``).
* ``--study K J CURVE N --cache DIR``: the same readings on the first ``N`` data sets of a setting of
  ``coverage_multiclass.py`` (joint EM-refit draws, bias correction centred on the fit, class-wise mean and
  top-label), with cached EM draws reused.
* ``--smooth`` (alone: per-bin table and idealised model, about 3 minutes; with ``--study``: on the study's data
  sets): would a per-bin debiasing with a *finite* slope make the interval nominal? ``SMOOTH_ESTIMATORS``: the
  shipped moment-matched inverse and the one- and two-step bootstrap bias corrections of ``|x|``
  (``max(0, 2 t - E|t + Z|)`` and its iterate; slopes 1-3 at most). Each is read as the library reads its own:
  draws in its clamped world, centred, at the nominal and at the calibrated level
  (``propagate.intervals.calibrated_level``), and at the nominal level with the empirical-Bayes width (and bias)
  of ``smooth_readings``.

Measured (2026-12-02, fifth session; ``--smooth``: sixth session): see ``benchmarks/results/debias_variance.json``
and docs/coverage.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from calibration_worlds import GRID, npmle_posterior  # noqa: E402
from scipy.stats import norm  # noqa: E402

from noisycal_bayes.propagate.intervals import bias_corrected, calibrated_level as _calibrated_level  # noqa: E402
from noisycal_bayes.propagate.result import debias_abs, draw_quantiles  # noqa: E402

LEVEL = 0.9
_Z = np.linspace(-8.0, 8.0, 4001)
_W = np.exp(-0.5 * _Z ** 2) / np.exp(-0.5 * _Z ** 2).sum()


def moments(mu):
    """``G(mu) = E g(|mu + Z|)`` and ``v(mu) = Var g(|mu + Z|)`` (sd 1), by quadrature on a fine grid."""
    g = debias_abs(np.abs(np.asarray(mu, dtype=float)[:, None] + _Z[None]), 1.0)
    mean = (g * _W).sum(axis=1)
    return mean, (g ** 2 * _W).sum(axis=1) - mean ** 2


_, V_GRID = moments(GRID)


def readings(est, centre, dev_noise, sd, truth, scale_eb=True):
    """Cover flags and sd of the centred nominal intervals of three worlds from one data set's bins.

    ``centre``: observed bin residuals ``x_b`` (bias-corrected bin means), ``dev_noise``: the draws' deviations
    ``e_sb - mean_s e_sb`` (n_draws, bins), ``sd``: their sd per bin (0 for empty bins: left out)."""
    ok = sd > 0
    x, c, s = centre[ok], dev_noise[:, ok], sd[ok]
    m = debias_abs(np.abs(x), s)
    out = {}
    for name, at in (("clamped", np.sign(x) * m), ("plugin", x)):
        g = debias_abs(np.abs(at + c), s)
        dev = g.sum(axis=1) - g.sum(axis=1).mean()
        if name == "clamped" and scale_eb:
            post = npmle_posterior(np.abs(x) / s)
            factor = np.sqrt((s ** 2 * (post @ V_GRID)).sum() / max(g.var(axis=0).sum(), 1e-300))
            out["clamped_eb_scaled"] = _flag(est, dev * factor, truth)
        out[name] = _flag(est, dev, truth)
    return out


def _flag(est, dev, truth):
    lo, hi = draw_quantiles(dev, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return {"covered": bool(est + lo <= truth <= est + hi), "sd": float(dev.std()), "err": float(est - truth)}


def fold_mean(t):
    """``E|t + Z|`` for ``Z ~ N(0, 1)``: the folded-normal mean."""
    t = np.asarray(t, dtype=float)
    return 2.0 * norm.pdf(t) + t * (2.0 * norm.cdf(t) - 1.0)


def one_step(t):
    """One bootstrap bias-correction step of ``|x|`` (sd 1): ``|x| - (E|t + Z| - t)`` at ``t = |x|``, floored at 0."""
    return np.maximum(0.0, 2.0 * t - fold_mean(t))


def two_step(t):
    """The bias correction iterated once more, evaluated at the one-step estimate."""
    g1 = one_step(t)
    return np.maximum(0.0, t - (fold_mean(g1) - g1))


# Per-bin debiasing of |x| / sd (sd 1): the shipped inverse (infinite slope at its threshold) and two smooth ones.
SMOOTH_ESTIMATORS = {"moment_matched": lambda t: debias_abs(t, 1.0), "one_step": one_step, "two_step": two_step}


def smooth_table():
    """Per-bin bias ``E g(|mu + Z|) - mu`` and variance of each estimator on a grid of ``mu`` (quadrature)."""
    mu = np.array([0, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 4, 6], dtype=float)
    out = {"mu": mu.tolist()}
    for name, g in SMOOTH_ESTIMATORS.items():
        v = g(np.abs(mu[:, None] + _Z[None]))
        mean = (v * _W).sum(axis=1)
        var = (v ** 2 * _W).sum(axis=1) - mean ** 2
        out[name] = {"bias": (mean - mu).round(4).tolist(), "v": var.round(4).tolist()}
        print(name, "bias", out[name]["bias"], "v", out[name]["v"], flush=True)
    return out


def _grid_moments(g):
    """Variance and bias of ``g(|theta + Z|)`` on the NPMLE grid ``GRID`` of ``theta = |mu| / sd``."""
    v = g(np.abs(GRID[:, None] + _Z[None]))
    mean = (v * _W).sum(axis=1)
    return (v ** 2 * _W).sum(axis=1) - mean ** 2, mean - GRID


GRID_MOMENTS = {name: _grid_moments(g) for name, g in SMOOTH_ESTIMATORS.items()}


def smooth_readings(centre, dev_noise, sd, truth):
    """Cover flags of each estimator's centred interval (its own clamped world): at the nominal level, at the
    calibrated level (``propagate.intervals.calibrated_level``), and at the nominal level with the draws' spread
    rescaled to the empirical-Bayes variance ``sum_b sd_b^2 E[v(theta_b) | x_b]`` (NPMLE prior over the bins), alone
    (``eb_width``) and with the estimate shifted by the empirical-Bayes bias ``sum_b sd_b E[bias(theta_b) | x_b]``
    (``eb_width_bias``)."""
    ok = sd > 0
    x, c, s = centre[ok], dev_noise[:, ok], sd[ok]
    post = npmle_posterior(np.abs(x) / s)
    out = {}
    for name, g in SMOOTH_ESTIMATORS.items():
        m = g(np.abs(x) / s) * s
        est = m.sum()
        t = (g(np.abs(np.sign(x) * m + c) / s) * s).sum(axis=1)
        centred = np.maximum(t - (t.mean() - est), 0.0)  # as propagate.intervals.centred
        for reading, a in (("nominal", LEVEL), ("calibrated", _calibrated_level(t, est, LEVEL))):
            lo, hi = draw_quantiles(centred, [(1 - a) / 2, (1 + a) / 2])
            out[f"{name}_{reading}"] = {"covered": bool(lo <= truth <= hi), "sd": float(centred.std()),
                                        "err": float(est - truth)}
        var_eb, bias_eb = GRID_MOMENTS[name]
        dev = (t - t.mean()) * np.sqrt((s ** 2 * (post @ var_eb)).sum() / max(t.var(), 1e-300))
        lo, hi = draw_quantiles(dev, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
        for reading, shift in (("eb_width", 0.0), ("eb_width_bias", (s * (post @ bias_eb)).sum())):
            out[f"{name}_{reading}"] = {"covered": bool(est - shift + lo <= truth <= est - shift + hi),
                                        "sd": float(dev.std()), "err": float(est - shift - truth)}
    return out


def _configs():
    """Fixed true ``mu_b`` configurations of 150 bins (sd 1)."""
    rng = np.random.default_rng(1)
    configs = {}
    for lo, hi in ((0.0, 3.0), (1.0, 3.0), (0.5, 2.0), (2.0, 4.0), (4.0, 6.0)):
        configs[f"|mu|/sd uniform on [{lo:g}, {hi:g}]"] = rng.uniform(lo, hi, 150) * rng.choice([-1, 1], 150)
    u = rng.uniform(0.0, 3.0, 150) * rng.choice([-1, 1], 150)
    u[:38] = 0.0
    configs["a quarter of the bins at 0, the rest uniform on [0, 3]"] = u
    return configs


def smooth_idealised(reps, seed=0):
    out = {}
    for label, u in _configs().items():
        gen = np.random.default_rng(seed)
        rows = []
        for _ in range(reps):
            x = u + gen.standard_normal(u.size)
            draws = x + gen.standard_normal((100, u.size))
            centre = draws.mean(axis=0)
            rows.append(smooth_readings(centre, draws - centre, draws.std(axis=0), np.abs(u).sum()))
        out[label] = summarise(rows)
        print(label, {k: (round(v["coverage"], 3), round(v["z_mean"], 2)) for k, v in out[label].items()}, flush=True)
    return out


def summarise(rows):
    out = {}
    for name in rows[0]:
        z = np.array([r[name]["err"] / r[name]["sd"] for r in rows])
        out[name] = {"coverage": float(np.mean([r[name]["covered"] for r in rows])),
                     "z_mean": float(z.mean()), "z_sd": float(z.std(ddof=1)), "n": len(rows)}
    return out


def idealised(reps, seed=0):
    rng = np.random.default_rng(1)
    configs = {}
    for lo, hi in ((0.0, 3.0), (1.0, 3.0), (2.0, 4.0), (4.0, 6.0)):
        u = rng.uniform(lo, hi, 150) * rng.choice([-1, 1], 150)
        gen = np.random.default_rng(seed)
        rows = []
        for _ in range(reps):
            x = u + gen.standard_normal(u.size)
            draws = x + gen.standard_normal((100, u.size))  # the estimator's bootstrap replicates of the bins
            centre, dev = draws.mean(axis=0), draws - draws.mean(axis=0)
            sd = draws.std(axis=0)
            est = debias_abs(np.abs(centre), sd).sum()
            rows.append(readings(est, centre, dev, sd, np.abs(u).sum()))
        configs[f"|mu|/sd uniform on [{lo:g}, {hi:g}]"] = summarise(rows)
        print(f"[{lo:g}, {hi:g}]", {k: round(v["coverage"], 3) for k, v in configs[list(configs)[-1]].items()},
              {k: round(v["z_sd"], 2) for k, v in configs[list(configs)[-1]].items()}, flush=True)
    return configs


def study(k, j, curve, n, cache, smooth=False):
    import coverage_multiclass as cm
    import noisycal_bayes.propagate.nc_ece as pm
    targets = cm.population_target(k, curve)
    kinds = (("top_label", targets[0]), ("classwise", targets[1]))
    rows = {kind: [] for kind, _ in kinds}
    for r in range(n):
        seed = cm.data_seed(k, j, curve, r)
        # One data set (and, without a cache, one set of EM refits) serves both kinds.
        p, resp, g, fit_c, draws, _ = cm._data(seed, k, j, curve, 2000, 100, 1e-3, cache)
        for kind, truth in kinds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                count, score, freq, point, _, meta, _ = pm._run(
                    "debias_variance", kind, p, resp, draws, None, bins=cm.BINS, weights="iv", level=LEVEL,
                    seed=seed, interval="debiased", bootstrap=True, n_draws=None, usable=None,
                    max_condition=pm.MAX_CONDITION, item_weights=g, point_confusion=fit_c[0])
            e = (bias_corrected(count, score, freq, point) - score) / count.sum(axis=1, keepdims=True)
            centre, sd = e.mean(axis=0), e.std(axis=0)
            est = debias_abs(np.abs(centre), sd).sum()
            rows[kind].append(smooth_readings(centre, e - centre, sd, truth) if smooth
                              else readings(est, centre, e - centre, sd, truth))
    res = {kind: summarise(rows[kind]) for kind, _ in kinds}
    for kind, _ in kinds:
        print(k, j, curve, kind, {a: (round(b["coverage"], 3), round(b["z_sd"], 2)) for a, b in res[kind].items()},
              flush=True)
    return {f"K={k} J={j} {curve}" + (f", first {n} data sets" if smooth else ""): res}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--idealised", action="store_true")
    ap.add_argument("--study", nargs=4, metavar=("K", "J", "CURVE", "N"))
    ap.add_argument("--smooth", action="store_true")
    ap.add_argument("--cache", help="with --study: the EM-draws cache of coverage_multiclass.py")
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "debias_variance.json"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}
    if args.table:
        mu = np.array([0, 0.5, 1, 1.5, 2, 2.5, 3, 4, 6], dtype=float)
        mean, var = moments(mu)
        results["table"] = {"mu": mu.tolist(), "G": mean.round(4).tolist(), "v": var.round(4).tolist()}
        print(results["table"])
    if args.study:
        k, j, curve, n = int(args.study[0]), int(args.study[1]), args.study[2], int(args.study[3])
        key = "smooth_study" if args.smooth else "study"
        results.setdefault(key, {}).update(study(k, j, curve, n, args.cache, smooth=args.smooth))
    elif args.smooth:
        results["smooth"] = {"table": smooth_table(), "reps": args.reps, "idealised": smooth_idealised(args.reps)}
    if args.idealised or not (args.table or args.study or args.smooth):
        results["idealised"] = {"reps": args.reps, "configs": idealised(args.reps)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
