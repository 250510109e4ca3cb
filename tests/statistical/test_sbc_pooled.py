"""Simulation-based calibration (Talts et al. 2018) of the partially pooled channel model (models/pooled.py).

Claim: for theta ~ prior and sparse crowd responses ~ model(theta), the rank of each true scalar among L
posterior draws of ``fit_nuts(pooling="partial")`` is uniform on {0, ..., L}. Design per replicate: 150
items, 20 annotators, 3 distinct annotators per item (450 responses), one prevalence (``"dawid_skene"``);
one chain, 200 warm-up steps and 200 draws thinned by 4 to L = 49. Ranks in 10 bins of 5; a chi-square
test of uniformity per scalar (9 df; expected 6 per bin at N = 60).

Scalars: the population (``mu_fpr``, ``mean_gap``, ``sigma_fpr``, ``sigma_tpr``), the prevalence, and the
fpr and tpr of annotators 0-2 (11 scalars). False-alarm rate 1e-3 per model, Bonferroni over the 11:
reject if any p-value is below 1e-3 / 11.

Negative control (must FAIL): data from the SBC prior (``mu_fpr ~ N(-2, 0.5)``) fitted with a prior that
puts the population's median fpr at ``mu_fpr ~ N(0, 0.2)`` (fpr 0.5): the posterior of ``mu_fpr`` is pulled
up, so the truth ranks low.

These fits take several seconds each on 2 cores, so the whole module is ``slow``.
"""
import warnings

import numpy as np
import pytest
from scipy import stats

from noisycal_bayes.data import AnnotationSet
from noisycal_bayes.inference import fit_nuts
from noisycal_bayes.models import Prior

pytestmark = [pytest.mark.statistical, pytest.mark.slow]

PRIOR = Prior(prevalence=(2.0, 2.0), population_fpr=(-2.0, 0.5), population_gap=3.0, population_spread=0.5)
WRONG = Prior(prevalence=(2.0, 2.0), population_fpr=(0.0, 0.2), population_gap=3.0, population_spread=0.5)
N_ITEMS, N_ANN, PER_ITEM = 150, 20, 3
L, N_BINS = 49, 10
FAMILY_ALPHA = 1e-3
NUTS = dict(n_chains=1, n_warmup=200, n_draws=200, progress_bar=False, model="dawid_skene", pooling="partial")
NAMES = ("mu_fpr", "mean_gap", "sigma_fpr", "sigma_tpr", "prevalence", "fpr", "tpr")


def _simulate(rng, prior):
    """Parameters from ``prior`` (the model's own generative story, written in NumPy) and sparse responses."""
    loc, scale = prior.population_fpr
    th = {"mu_fpr": rng.normal(loc, scale), "mean_gap": abs(rng.normal(0, prior.population_gap)),
          "sigma_fpr": abs(rng.normal(0, prior.population_spread)),
          "sigma_tpr": abs(rng.normal(0, prior.population_spread)), "prevalence": rng.beta(*prior.prevalence)}
    fpr = 1 / (1 + np.exp(-(th["mu_fpr"] + th["sigma_fpr"] * rng.normal(size=N_ANN))))
    tpr = 1 / (1 + np.exp(-(th["mu_fpr"] + th["mean_gap"] + th["sigma_tpr"] * rng.normal(size=N_ANN))))
    y = rng.random(N_ITEMS) < th["prevalence"]
    labels = np.full((N_ITEMS, N_ANN), -1, np.int8)
    for i in range(N_ITEMS):
        who = rng.choice(N_ANN, PER_ITEM, replace=False)
        labels[i, who] = rng.random(PER_ITEM) < np.where(y[i], tpr[who], fpr[who])
    # Annotators who labelled nothing cannot be columns of an AnnotationSet: redraw (rare at 22 labels each).
    if (labels >= 0).sum(0).min() == 0:
        return _simulate(rng, prior)
    th["fpr"], th["tpr"] = fpr[:3], tpr[:3]
    return AnnotationSet.from_wide(labels), th


def _ranks(fit, truth):
    pop = fit.details["population_draws"]
    out = []
    for name in NAMES:
        d = np.asarray(pop[name] if name in pop else fit.draws[name])
        d = d.reshape((-1,) + d.shape[2:])[::4][:L]
        if name in ("fpr", "tpr"):
            d = d[:, :3]
        out.append(np.atleast_1d((d < truth[name]).sum(axis=0)))
    return np.concatenate(out)


def _sbc(fit_prior, n_reps, seed):
    rng = np.random.default_rng(seed)
    ranks = []
    for r in range(n_reps):
        data, truth = _simulate(rng, PRIOR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # one short chain: ESS / R-hat warnings are expected
            fit = fit_nuts(data, prior=fit_prior, seed=r, **NUTS)
        ranks.append(_ranks(fit, truth))
    return np.array(ranks)


def _check(ranks):
    counts = np.stack([np.bincount(ranks[:, k] // ((L + 1) // N_BINS), minlength=N_BINS)
                       for k in range(ranks.shape[1])])
    p = stats.chisquare(counts, axis=1).pvalue
    return p, bool(p.min() >= FAMILY_ALPHA / ranks.shape[1])


def test_sbc_pooled_ranks_are_uniform():
    ranks = _sbc(PRIOR, 60, seed=16)
    p, ok = _check(ranks)
    assert ranks.min() >= 0 and ranks.max() <= L
    assert ok, f"SBC ranks not uniform for the pooled model: min p = {p.min():.2e}; p = {np.round(p, 4)}"


def test_sbc_pooled_negative_control_fails():
    ranks = _sbc(WRONG, 30, seed=17)
    p, ok = _check(ranks)
    assert not ok, f"the wrong population prior passed SBC (min p = {p.min():.2e}): the check has no power"
    assert ranks[:, 0].mean() < L / 4  # mu_fpr (column 0) ranks low, as the wrong prior pulls it up
