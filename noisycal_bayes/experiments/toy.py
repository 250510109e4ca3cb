"""Toy ECE estimation (paper §6.1, Table 1 and Figure 1; Appendix G.2): NC-ECE with known or estimated channels
against the population binned ECE, on three curves of :data:`noisycal_bayes.simulate.CURVES`. The protocol:
docs/foundations.md, *noisycal_bayes.experiments.toy*.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .._progress import progress
from ..reference import fit_em, nc_ece, nc_ece_cross_fit, nc_ece_reuse, nc_ece_split
from ..simulate import CURVES, simulate_annotations
from ._common import N_BINS, N_GROUPS, mc_summary, population_binned_ece
from ..data.binning import Binning

#: The three toy conditions of the paper (names of :data:`noisycal_bayes.simulate.CURVES`).
CONDITIONS = ("calibrated", "shifted", "nonlinear")
#: Sample sizes of Figure 1; Table 1 uses the largest.
SIZES = (500, 1000, 2000, 4000, 8000)
#: Default annotator channels (three annotators, gaps 0.75, 0.6, 0.75).
FPR = (0.10, 0.20, 0.15)
TPR = (0.85, 0.80, 0.90)
ESTIMATORS = ("known", "independent", "reuse", "cross_fit")


def _estimator(n_starts):
    return lambda d: fit_em(d, groups=Binning.equal_mass(N_GROUPS), n_starts=n_starts)


def toy_ece(*, conditions=CONDITIONS, sizes=SIZES, n_reps: int = 200, fpr=FPR, tpr=TPR,
            estimators=ESTIMATORS, n_starts: int = 5, n_folds: int = 5, bayes: bool = False,
            bayes_reps: int | None = None, n_warmup: int = 500, n_draws: int = 500, level: float = 0.9,
            seed: int = 0, progress_bar: bool = False) -> pd.DataFrame:
    """Run the toy ECE-estimation experiment; one row per (condition, n_items, repetition, estimator).

    Parameters
    ----------
    conditions : sequence of names in :data:`noisycal_bayes.simulate.CURVES`
    sizes : sequence of int
    n_reps : int, default 200 (the paper's)
    fpr, tpr : channels of the annotators, shape (n_annotators,)
    estimators : subset of ``("known", "independent", "reuse", "cross_fit")``
    n_starts : random EM starts per channel fit (``reference.fit_em`` adds no moment start)
    n_folds : folds of cross-fitting
    bayes : bool
        Also fit the grouped model by NUTS (2 chains) and propagate (``estimator = "bayes"`` rows).
    bayes_reps : int, optional
        Bayesian rows only for the first ``bayes_reps`` repetitions of each cell (default all).
    n_warmup, n_draws : NUTS settings per chain
    level : interval level of the Bayesian rows
    seed : int
        Repetition ``r`` of cell ``(c, n)`` uses ``numpy`` seed ``(seed, c, n, r)`` for the data and the
        split / folds.
    progress_bar : bool, default False
        A bar over the repetitions of each cell (only in a terminal); the rows are the same either way.

    Returns
    -------
    DataFrame with columns ``condition, n_items, rep, estimator, estimate, target, error, abs_error``,
    ``oracle_ece`` (binned ECE with the simulated clean labels) and, for ``"bayes"`` rows,
    ``posterior_mean, lower, upper, interval_to_read, covered, n_divergent, converged`` (``converged``: the
    NUTS fit's R-hat, ESS and divergence checks passed; its warnings are not raised here). ``target`` is the
    population binned ECE.
    Failed channel fits are rows with NaN ``estimate`` and the reason in ``failure``.
    """
    from ..reference import ece

    rows = []
    for ci, cond in enumerate(conditions):
        target = population_binned_ece(CURVES[cond], n_bins=N_BINS)
        for n in sizes:
            for r in progress(range(n_reps), enabled=progress_bar, desc=f"toy {cond}, n={int(n)}"):
                rep_seed = np.random.SeedSequence([seed, ci, int(n), r])
                data_seed, split_seed = (int(s.generate_state(1)[0]) for s in rep_seed.spawn(2))
                sim = simulate_annotations(int(n), fpr=fpr, tpr=tpr, curve=cond, seed=data_seed)
                oracle = ece(sim.data.scores, sim.clean_labels, bins=N_BINS)
                base = dict(condition=cond, n_items=int(n), rep=r, target=target, oracle_ece=oracle)
                for est in estimators:
                    row = dict(base, estimator=est, failure="")
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            row["estimate"] = _one(sim, est, n_starts, n_folds, split_seed)
                    except ValueError as exc:  # channels not identified on a part: recorded, not hidden
                        row["estimate"], row["failure"] = np.nan, str(exc)
                    rows.append(row)
                if bayes and (bayes_reps is None or r < bayes_reps):
                    rows.append(dict(base, estimator="bayes", failure="",
                                     **_bayes(sim, target, n_warmup, n_draws, level, split_seed)))
    out = pd.DataFrame(rows)
    out["error"] = out["estimate"] - out["target"]
    out["abs_error"] = out["error"].abs()
    return out


def _one(sim, est, n_starts, n_folds, seed):
    if est == "known":
        return nc_ece(sim.data, sim.channel, bins=N_BINS).value
    if est == "independent":
        return nc_ece_split(sim.data, estimator=_estimator(n_starts), bins=N_BINS, seed=seed).value
    if est == "reuse":
        return nc_ece_reuse(sim.data, estimator=_estimator(n_starts), bins=N_BINS).value
    if est == "cross_fit":
        return nc_ece_cross_fit(sim.data, estimator=_estimator(n_starts), bins=N_BINS, n_folds=n_folds,
                                seed=seed).value
    raise ValueError(f"unknown estimator {est!r}; expected one of {ESTIMATORS}.")


def _bayes(sim, target, n_warmup, n_draws, level, seed):
    from ..inference import fit_nuts
    from ..propagate import posterior_nc_ece

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_nuts(sim.data, model="grouped", groups=Binning.equal_mass(N_GROUPS), n_chains=2, n_warmup=n_warmup,
                       n_draws=n_draws, seed=seed % (2**31), progress_bar=False)
        post = posterior_nc_ece(sim.data, fit, bins=N_BINS, method="plugin", level=level, seed=seed)
    if post.interval_to_read == "upper_one_sided":
        lower, upper = 0.0, post.upper_one_sided
    else:
        lower, upper = post.lower, post.upper
    return dict(estimate=post.debiased, posterior_mean=post.mean, lower=lower, upper=upper,
                interval_to_read=post.interval_to_read, covered=bool(lower <= target <= upper),
                n_divergent=int(getattr(fit, "n_divergent", 0) or 0), converged=bool(fit.converged))


def summarise_toy(frame: pd.DataFrame) -> pd.DataFrame:
    """MAE x 100 (with its Monte Carlo SE), mean error x 100 (bias) and the sd of the error x 100 per cell.

    For ``"bayes"`` rows also the posterior-mean MAE x 100 and the interval coverage with its binomial SE.
    """
    keys = ["condition", "n_items", "estimator"]
    ok = frame[np.isfinite(frame["estimate"])]
    mae = mc_summary(ok, keys, "abs_error", scale=100).rename(
        columns={"mean": "mae_x100", "sd": "sd_abs_x100", "mc_se": "mae_se_x100"})
    bias = mc_summary(ok, keys, "error", scale=100)[keys + ["mean", "sd"]].rename(
        columns={"mean": "bias_x100", "sd": "sd_error_x100"})
    out = mae.merge(bias, on=keys)
    fails = frame.groupby(keys, sort=False)["estimate"].apply(lambda s: int(s.isna().sum())).rename("n_failed")
    out = out.merge(fails.reset_index(), on=keys)
    if "covered" in frame:
        b = frame[frame["estimator"] == "bayes"]
        if len(b):
            b = b.assign(pm_abs_error=(b["posterior_mean"] - b["target"]).abs(), covered=b["covered"].astype(float))
            cov = b.groupby(keys, sort=False).agg(coverage=("covered", "mean"),
                                                  posterior_mean_mae_x100=("pm_abs_error", lambda s: 100 * s.mean()))
            n_b = b.groupby(keys, sort=False).size().to_numpy()
            cov["coverage_se"] = np.sqrt(cov["coverage"].to_numpy() * (1 - cov["coverage"].to_numpy()) / n_b)
            out = out.merge(cov.reset_index(), on=keys, how="left")
    return out
