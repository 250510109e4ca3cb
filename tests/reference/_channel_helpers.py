"""Exact population quantities for the channel-estimator tests (enumeration of response patterns).

These compute the model's moments from the joint pattern probabilities directly, an independent route
from the closed-form expressions the estimators invert.
"""
import itertools

import numpy as np

from noisycal_bayes.data import AnnotationSet


def pattern_probabilities(fpr, tpr, prevalence):
    """All 2^J response patterns (2^J, J) and their probabilities per group (G, 2^J)."""
    fpr, tpr, prevalence = (np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in (fpr, tpr, prevalence))
    patterns = np.array(list(itertools.product([0, 1], repeat=fpr.size)))
    p0 = np.prod(np.where(patterns == 1, fpr, 1 - fpr), axis=1)
    p1 = np.prod(np.where(patterns == 1, tpr, 1 - tpr), axis=1)
    return patterns, (1 - prevalence)[:, None] * p0[None, :] + prevalence[:, None] * p1[None, :]


def population_moments(fpr, tpr, prevalence):
    """Group means (J, G), covariances (J, J, G) and, for J = 3, third central cross-moments (G,)."""
    patterns, probs = pattern_probabilities(fpr, tpr, prevalence)
    means = probs @ patterns  # (G, J)
    cov, third = [], []
    for g in range(probs.shape[0]):
        c = patterns - means[g]
        cov.append(np.einsum("r,rj,rk->jk", probs[g], c, c))
        if patterns.shape[1] == 3:
            third.append(float(np.sum(probs[g] * c[:, 0] * c[:, 1] * c[:, 2])))
    return means.T, np.stack(cov, axis=-1), np.array(third)


def population_data(fpr, tpr, prevalence, n_per_group):
    """An AnnotationSet whose (group, pattern) frequencies equal the model's probabilities exactly.

    Needs ``probability * n_per_group`` to be an integer for every pattern (rates in tenths and
    ``n_per_group = 10 ** (J + 1)`` do it). Returns ``(data, groups)``.
    """
    patterns, probs = pattern_probabilities(fpr, tpr, prevalence)
    counts = probs * n_per_group
    rounded = np.round(counts).astype(int)
    if np.max(np.abs(counts - rounded)) > 1e-6:
        raise ValueError("pattern counts are not integers; choose rates in tenths and n_per_group = 10**(J+1)")
    rows, groups = [], []
    for g in range(probs.shape[0]):
        rows.append(np.repeat(patterns, rounded[g], axis=0))
        groups.append(np.full(rounded[g].sum(), g))
    return AnnotationSet.from_wide(np.concatenate(rows)), np.concatenate(groups)
