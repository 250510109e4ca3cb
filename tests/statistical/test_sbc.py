"""Simulation-based calibration (Talts, Betancourt, Simpson, Vehtari & Gelman 2018) of the NumPyro models.

Claim: if the model, its prior and the sampler are right, then for theta ~ prior and data ~ model(theta),
the rank of each true parameter among L posterior draws is uniform on {0, ..., L}. We draw N data sets,
fit each with ``fit_nuts`` (one chain of 200 draws after 200 warm-up steps, thinned by 4 to L = 49 nearly
independent draws; NUTS on these posteriors has ESS close to the number of draws), bin the ranks into 10
bins of 5 and test uniformity per scalar parameter with a chi-square test (9 df, expected 6 per bin at
N = 60; the chi-square approximation is adequate from about 5 per bin).

False-alarm rate: 1e-3 per model, split (Bonferroni) over its K scalar parameters: reject if any p-value
is below 1e-3 / K. The negative control fits with a wrong prior (prevalence ~ Beta(20, 2), mean 0.91,
while the truth is drawn from Beta(2, 2)): 22 prior pseudo-observations against 30 items per group pull
every prevalence posterior upwards, so the true prevalence ranks low; this check must FAIL.

The SBC prior is not the default (flat) one but a proper, moderately informative prior that keeps the
simulated annotators informative (gap mostly > 0.3): it exercises the prior as a traced input of the
compiled sampler. ``slow``-marked versions run more replications.
"""
import warnings

import numpy as np
import pytest
from scipy import stats

from noisycal_bayes.data import AnnotationSet
from noisycal_bayes.inference import fit_nuts
from noisycal_bayes.models import Prior

pytestmark = pytest.mark.statistical

PRIOR = Prior(fpr=(2.0, 8.0), u=(4.0, 2.0), prevalence=(2.0, 2.0))
WRONG = Prior(fpr=(2.0, 8.0), u=(4.0, 2.0), prevalence=(20.0, 2.0))
N_ITEMS, N_GROUPS, N_ANN = 150, 5, 3
L, N_BINS = 49, 10
FAMILY_ALPHA = 1e-3
# Same warm-up and chunking as the other tests: one compiled program per model serves all of them.
NUTS = dict(n_chains=1, n_warmup=200, n_draws=200, progress_bar=False)


def _simulate(rng, model):
    n_groups = N_GROUPS if model == "grouped" else 1
    fpr, tpr, prev = PRIOR.sample(rng, N_ANN, n_groups)
    group = np.repeat(np.arange(n_groups), N_ITEMS // n_groups)
    y = rng.random(N_ITEMS) < prev[group]
    labels = (rng.random((N_ITEMS, N_ANN)) < np.where(y[:, None], tpr, fpr)).astype(np.int8)
    truth = {"fpr": fpr, "tpr": tpr, "prevalence": prev if model == "grouped" else prev[0]}
    return AnnotationSet.from_wide(labels), group, truth


def _ranks(fit, truth):
    out = []
    for name in ("fpr", "tpr", "prevalence"):
        d = fit.draws[name]
        d = d.reshape((-1,) + d.shape[2:])[::4][:L]  # thinned to L draws
        out.append(np.atleast_1d((d < truth[name]).sum(axis=0)))
    return np.concatenate(out)


def _sbc(model, prior, n_reps, seed):
    rng = np.random.default_rng(seed)
    ranks = []
    for r in range(n_reps):
        data, group, truth = _simulate(rng, model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # short chains: ESS / R-hat warnings are expected here
            fit = fit_nuts(data, model=model, groups=group if model == "grouped" else 5, prior=prior, seed=r, **NUTS)
        ranks.append(_ranks(fit, truth))
    return np.array(ranks)


def _pvalues(ranks):
    counts = np.stack([np.bincount(ranks[:, k] // ((L + 1) // N_BINS), minlength=N_BINS) for k in range(ranks.shape[1])])
    return stats.chisquare(counts, axis=1).pvalue


def _check(ranks):
    p = _pvalues(ranks)
    return p, bool(p.min() >= FAMILY_ALPHA / ranks.shape[1])


# 15 s and 13 s with a cold compilation cache: make test-all runs them. The default run keeps NUTS's exact check
# against a conjugate posterior (test_recovery.py::test_known_labels_give_the_closed_form_beta_posterior) and the
# pooled model's prior-rank check with its negative control (test_sbc_pooled.py).
@pytest.mark.slow
@pytest.mark.parametrize("model, n_reps", [("grouped", 60), ("dawid_skene", 60)])
def test_sbc_ranks_are_uniform(model, n_reps):
    ranks = _sbc(model, PRIOR, n_reps, seed=2024)
    p, ok = _check(ranks)
    assert ranks.min() >= 0 and ranks.max() <= L
    assert ok, f"SBC ranks not uniform for {model}: min p = {p.min():.2e} (threshold {FAMILY_ALPHA / len(p):.1e}); p = {np.round(p, 4)}"


@pytest.mark.slow  # 8 s cold; runs with the SBC above in make test-all
def test_sbc_negative_control_with_a_wrong_prior_fails():
    ranks = _sbc("grouped", WRONG, 30, seed=7)
    p, ok = _check(ranks)
    assert not ok, f"the wrong prior passed SBC (min p = {p.min():.2e}): the check has no power"
    # The failure is where it should be: the prevalences (last N_GROUPS columns) rank low.
    assert ranks[:, -N_GROUPS:].mean() < L / 4


@pytest.mark.slow
@pytest.mark.parametrize("model", ["grouped", "dawid_skene"])
def test_sbc_ranks_are_uniform_long(model):
    ranks = _sbc(model, PRIOR, 400, seed=99)
    p, ok = _check(ranks)
    assert ok, f"SBC ranks not uniform for {model} (400 reps): min p = {p.min():.2e}; p = {np.round(p, 4)}"


# ------------------------------------------------------------------ the score-dependent and correlated models
# SBC of the two richer channel models (noisycal_bayes/models/score_noise.py, models/correlated.py), fitted by
# diagnostics.alternatives.fit_alternative, simulated by the model functions' own prior predictive
# (labels=None) under the SBC prior above. Design as benchmarks/sbc_alternatives.py: 600 items in three score
# groups, three annotators, one chain of 300 draws after 500 warm-up steps thinned to L = 30, ranks of the
# shared fpr of every annotator, the prevalences and the hierarchical scale, 5 bins (expected 12 per bin at 60
# simulations), Bonferroni over the tracked scalars at family rate 1e-3. The simulation and the sampler use
# independent seeds (the first version shared one JAX key between them). Negative control (must fail): every
# negative response turns positive with probability 0.2, so the data's false-positive rates are
# fpr + 0.2 (1 - fpr) while the recorded truth is fpr: the fpr ranks pile up at the bottom.
# Measured (2026-12-01; benchmarks/results/sbc_alternatives.json, same seeds): min p 0.098 (score-dependent) and
# 0.019 (correlated) against the threshold 1.4e-4; negative controls min p 5e-21 and 6e-23. The four tests take
# about 20 min on 2 loaded cores (fit_alternative reuses one compiled sampler: ~6 s and ~11 s per simulation).
ALT_TRACKED = {"score_dependent": ("fpr", "prevalence", "tau_fpr"), "correlated": ("fpr", "prevalence", "dependence")}
ALT_L, ALT_BINS, ALT_SAMPLER_OFFSET = 30, 5, 1_000_003


def _alt_ranks(model, seed, shift=0.0):
    import jax
    from numpyro.infer import Predictive

    from noisycal_bayes import Binning
    from noisycal_bayes.diagnostics.alternatives import _model_fn, fit_alternative

    group = np.repeat(np.arange(3), 200).astype(np.int32)
    draw = Predictive(_model_fn(model), num_samples=1)(jax.random.PRNGKey(seed), None, group, None, n_annotators=3,
                                                       n_groups=3, prior=PRIOR)
    truth = {k: np.asarray(v[0]) for k, v in draw.items()}
    labels = np.asarray(truth["labels"]).astype(np.int8)
    if shift:
        rng = np.random.default_rng(seed)
        labels = np.where((labels == 0) & (rng.random(labels.shape) < shift), 1, labels).astype(np.int8)
    data = AnnotationSet.from_wide(labels, (group + 0.5) / 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_alternative(data, model, groups=Binning.equal_width(3), n_chains=1, n_warmup=500, n_draws=300,
                              seed=seed + ALT_SAMPLER_OFFSET, prior=PRIOR)
    out = []
    for name in ALT_TRACKED[model]:
        post = np.asarray(fit.draws[name]).reshape(300, -1)[::10][:ALT_L]
        out.append(np.atleast_1d((post < np.asarray(truth[name]).reshape(-1)).sum(axis=0)))
    return np.concatenate(out)


def _alt_check(ranks):
    counts = np.stack([np.bincount(ranks[:, k] * ALT_BINS // (ALT_L + 1), minlength=ALT_BINS)
                       for k in range(ranks.shape[1])])
    p = stats.chisquare(counts, axis=1).pvalue
    return p, bool(p.min() >= FAMILY_ALPHA / ranks.shape[1])


@pytest.mark.slow
@pytest.mark.parametrize("model", ["score_dependent", "correlated"])
def test_sbc_of_the_richer_channel_models(model):
    ranks = np.array([_alt_ranks(model, 5000 + r) for r in range(60)])
    p, ok = _alt_check(ranks)
    print(f"SBC {model}: p = {np.round(p, 4)}, mean rank fractions = {np.round(ranks.mean(axis=0) / ALT_L, 3)}")
    assert ok, f"SBC ranks not uniform for {model}: p = {np.round(p, 4)}"


@pytest.mark.slow
@pytest.mark.parametrize("model", ["score_dependent", "correlated"])
def test_sbc_negative_control_of_the_richer_channel_models_fails(model):
    ranks = np.array([_alt_ranks(model, 7000 + r, shift=0.2) for r in range(30)])
    p, ok = _alt_check(ranks)
    print(f"negative control {model}: p = {np.round(p, 4)}, mean rank fractions = "
          f"{np.round(ranks.mean(axis=0) / ALT_L, 3)}")
    assert not ok, f"the shifted data passed SBC for {model} (p = {np.round(p, 4)}): the check has no power"
    assert ranks[:, :3].mean() < ALT_L / 3  # the fpr columns rank low
