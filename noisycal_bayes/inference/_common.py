"""Helpers shared by fit_map and fit_nuts: model binding, start values, unconstrained transforms."""
from __future__ import annotations

import numpy as np

from ..models import MODELS

# Keep starting values off the boundary, where the unconstrained coordinates are infinite.
_CLIP = (1e-3, 1 - 1e-3)


def bound_model(model: str, static: dict):
    """The model function with static sizes bound and the prior taken as the last positional argument.

    The prior then travels as a traced pytree (``Prior.params()``), so one compiled program serves every
    prior.
    """
    fn = MODELS[model]

    def bound(*args):
        *data, prior = args
        return fn(*data, prior=prior, **static)

    bound.__name__ = f"{model}_bound"
    return bound


def sample_sites(model: str, point: dict, n_groups: int) -> dict:
    """Constrained values of the model's sample sites from a point estimate (clipped off the boundary)."""
    fpr = np.clip(np.asarray(point["fpr"], dtype=np.float64), *_CLIP)
    tpr = np.clip(np.asarray(point["tpr"], dtype=np.float64), *_CLIP)
    tpr = np.maximum(tpr, fpr + 1e-3)
    u = np.clip((tpr - fpr) / (1 - fpr), *_CLIP)
    out = {"fpr": fpr, "u": u}
    if model == "platt":
        out["slope"] = np.float64(point["slope"])
        out["intercept"] = np.float64(point["intercept"])
        return out
    prev = np.clip(np.asarray(point["prevalence"], dtype=np.float64), *_CLIP)
    if model == "monotone":
        prev = np.sort(np.atleast_1d(prev))
        inc = np.diff(np.concatenate([[0.0], prev, [1.0]]))
        # Ties in the start would put an increment at 0 (the boundary of the simplex).
        inc = np.maximum(inc, 1e-3)
        out["increments"] = inc / inc.sum()
        return out
    out["prevalence"] = prev.reshape(()) if model == "dawid_skene" else prev.reshape(n_groups)
    return out


def with_derived(model: str, sites: dict) -> dict:
    """Add ``tpr``, ``gap`` (and ``prevalence`` for the monotone model) to constrained sample-site values."""
    out = {k: np.asarray(v, dtype=np.float64) for k, v in sites.items()}
    out["gap"] = (1 - out["fpr"]) * out["u"]
    out["tpr"] = out["fpr"] + out["gap"]
    if model == "monotone":
        out["prevalence"] = np.cumsum(out["increments"], axis=-1)[..., :-1]
    return out
