"""Posterior-like FitResults built without MCMC, for testing propagation mechanics quickly.

Propagation is a function of the draws only; these helpers attach chosen draws to a real EM fit (or to
real Platt model inputs) so that every code path runs without compiling NUTS.
"""
import dataclasses

import numpy as np

from noisycal_bayes.data import Binning
from noisycal_bayes.models.inputs import GroupAssignment, prepare_inputs
from noisycal_bayes.inference.em import fit_em
from noisycal_bayes.models.result import FitResult, channel_from

#: Channels of the simulated data shared by the NC-ECE tests (conftest.py).
FPR, TPR = [0.1, 0.2, 0.15], [0.85, 0.8, 0.9]


def channel_draws(rng, fpr, tpr, n_chains, n_draws, spread=0.02):
    """Draws jittered around (fpr, tpr), kept oriented and inside (0, 1)."""
    fpr = np.asarray(fpr, float)
    tpr = np.asarray(tpr, float)
    f = np.clip(fpr + spread * rng.standard_normal((n_chains, n_draws, fpr.size)), 1e-3, 0.49)
    t = np.clip(tpr + spread * rng.standard_normal((n_chains, n_draws, tpr.size)), 0.51, 1 - 1e-3)
    return f, t


def fake_nuts(em, draws: dict) -> FitResult:
    """``em`` with posterior ``draws`` (shapes (n_chains, n_draws, ...)) as if it came from fit_nuts."""
    d = {k: np.asarray(v, float) for k, v in draws.items()}
    d["gap"] = d["tpr"] - d["fpr"]
    d["u"] = d["gap"] / (1 - d["fpr"])
    ch = channel_from(d["fpr"].mean(axis=(0, 1)), d["tpr"].mean(axis=(0, 1)), em.annotator_ids)
    return dataclasses.replace(em, method="nuts", draws=d, channel=ch, converged=True, n_divergent=0,
                               details={"labels": em.details.get("labels")})


def histogram_fit(data, n_bins=10, n_starts=2, seed=0):
    return fit_em(data, model="histogram", groups=Binning.equal_width(n_bins), n_starts=n_starts, seed=seed)


def fake_platt(data, *, fpr, tpr, slope, intercept) -> FitResult:
    """A Platt-model FitResult with the given draws (arrays of shape (n_chains, n_draws[, J]))."""
    n = data.n_items
    assignment = GroupAssignment(np.zeros(n, np.int32), 1, None)
    inputs = prepare_inputs(data, "platt", assignment)
    draws = {"fpr": np.asarray(fpr, float), "tpr": np.asarray(tpr, float), "slope": np.asarray(slope, float),
             "intercept": np.asarray(intercept, float)}
    draws["gap"] = draws["tpr"] - draws["fpr"]
    draws["u"] = draws["gap"] / (1 - draws["fpr"])
    ids = tuple(data.annotator_ids)
    ch = channel_from(draws["fpr"].mean(axis=(0, 1)), draws["tpr"].mean(axis=(0, 1)), ids)
    point = {k: v.mean(axis=(0, 1)) for k, v in draws.items()}
    return FitResult(model="platt", method="nuts", channel=ch, point=point, groups=assignment, inputs=inputs,
                     annotator_ids=ids, draws=draws, details={"labels": data.labels, "scores": data.scores})
