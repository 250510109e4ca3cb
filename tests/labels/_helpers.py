"""Independent NumPy routes for the label tests: Bayes' rule item by item, corrected labels by the formula."""
import dataclasses

import numpy as np


def bayes_positive(labels, fpr, tpr, prior):
    """``P(Y_i = 1 | A_i)`` item by item with a per-item prior (loops; no shared code with the package)."""
    out = np.empty(labels.shape[0])
    for i, row in enumerate(labels):
        l1, l0 = prior[i], 1 - prior[i]
        for j, a in enumerate(row):
            if a < 0:
                continue
            l1 *= tpr[j] if a == 1 else 1 - tpr[j]
            l0 *= fpr[j] if a == 1 else 1 - fpr[j]
        out[i] = l1 / (l1 + l0)
    return out


def iv_corrected_labels(labels, fpr, tpr):
    """Combined corrected label per item with inverse-variance weights (DESIGN §3), item by item."""
    gap = tpr - fpr
    obs = labels >= 0
    yt = np.where(obs, (labels - fpr) / gap, 0.0)
    eq = (yt * obs).sum(axis=1) / obs.sum(axis=1)
    mu = np.clip(eq.mean(), 1e-4, 1 - 1e-4)
    var = (mu * tpr * (1 - tpr) + (1 - mu) * fpr * (1 - fpr)) / gap**2
    w = 1 / np.maximum(var, 1e-8)
    w = w / w.sum()
    W = np.where(obs, w, 0.0)
    W = W / W.sum(axis=1, keepdims=True)
    return (W * yt).sum(axis=1)


def with_point(fit, *, fpr, tpr, prevalence=None, slope=None, intercept=None, model=None, groups=None):
    """A copy of ``fit`` whose point estimate is replaced by known parameters."""
    fpr, tpr = np.asarray(fpr, float), np.asarray(tpr, float)
    point = {"fpr": fpr, "tpr": tpr, "gap": tpr - fpr, "u": (tpr - fpr) / (1 - fpr)}
    if prevalence is not None:
        point["prevalence"] = np.asarray(prevalence, float)
    if slope is not None:
        point["slope"], point["intercept"] = np.float64(slope), np.float64(intercept)
    changes = {"point": point, "draws": None}
    if model is not None:
        changes["model"] = model
    if groups is not None:
        changes["groups"] = groups
    return dataclasses.replace(fit, **changes)


def with_draws(fit, draws):
    """A copy of ``fit`` carrying posterior draws (dict of (n_chains, n_draws, ...) arrays)."""
    d = {k: np.asarray(v, float) for k, v in draws.items()}
    d["gap"] = d["tpr"] - d["fpr"]
    d["u"] = d["gap"] / (1 - d["fpr"])
    return dataclasses.replace(fit, draws=d, method="nuts")
