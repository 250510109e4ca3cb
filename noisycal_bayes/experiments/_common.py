"""Shared helpers of the experiment functions: population targets, Monte Carlo summaries."""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ..reference.recalibration import (fit_platt, fit_projected_histogram, fit_temperature, predict_histogram,
                                       predict_platt, predict_temperature)

#: Evaluation bins of every experiment (paper §6: ten fixed equal-width bins).
N_BINS = 10
#: Score groups of the channel-estimation EM in the toy experiment (paper Appendix G.2: five).
N_GROUPS = 5


def population_binned_ece(curve, *, score_beta=(1.0, 1.0), n_bins: int = N_BINS, n_grid: int = 20_000) -> float:
    """``sum_k P(Z in B_k) |E[m(Z) - Z | Z in B_k]|`` for ``Z ~ Beta(score_beta)`` on equal-width bins.

    Midpoint rule on ``n_grid`` points per bin (the integrands are bounded and piecewise smooth, so the
    error is far below the Monte Carlo error of any experiment here).
    """
    total = 0.0
    for k in range(n_bins):
        lo, hi = k / n_bins, (k + 1) / n_bins
        z = lo + (np.arange(n_grid) + 0.5) * (hi - lo) / n_grid
        dens = stats.beta.pdf(z, *score_beta) * (hi - lo) / n_grid
        total += abs(float(np.sum(dens * (np.asarray(curve(z), dtype=np.float64) - z))))
    return total


def mc_summary(frame: pd.DataFrame, by, value: str, *, scale: float = 1.0) -> pd.DataFrame:
    """Mean, sample sd, Monte Carlo standard error (sd / sqrt(n)) and count of ``value`` per ``by`` group."""
    g = frame.groupby(by, sort=False)[value]
    out = pd.DataFrame({"mean": g.mean() * scale, "sd": g.std(ddof=1) * scale, "n_reps": g.count()})
    out["mc_se"] = out["sd"] / np.sqrt(out["n_reps"])
    return out.reset_index()


def fit_point_map(kind: str, z, t, *, bins: int = N_BINS):
    """Prediction function of one corrected-loss map (``"temperature"``, ``"platt"`` or ``"histogram"``)
    fitted to targets ``t`` (0/1, soft or noise-corrected labels) at scores ``z``."""
    if kind == "temperature":
        temp = fit_temperature(z, t).temperature
        return lambda s: predict_temperature(s, temp)
    if kind == "platt":
        f = fit_platt(z, t)
        return lambda s: predict_platt(s, f.alpha, f.beta)
    f = fit_projected_histogram(z, t, bins=bins)
    return lambda s: predict_histogram(s, f.edges, f.bin_values)
