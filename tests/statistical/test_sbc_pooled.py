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

These fits take several seconds each on 2 cores, so the two full SBC tests are ``slow`` (``make test-all``).

Cheap, not slow (runs in ``make test``, and can fail): the prior half of the SBC identity. The truths drawn by
this module's NumPy simulator (the documented generative story) must rank uniformly among draws of the NumPyro
model's own prior (``pooled_model`` with ``label=None``, sampled through a random partial centring, the
parametrisation fit_nuts samples in): a wrong prior, a wrong population transform or a centring that changed the
distribution of the rates would fail it. Its negative control (NumPyro draws under the WRONG prior) must fail.
"""
import warnings

import numpy as np
import pytest
from scipy import stats

from noisycal_bayes.data import AnnotationSet
from noisycal_bayes.inference import fit_nuts
from noisycal_bayes.models import Prior

pytestmark = [pytest.mark.statistical]

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


@pytest.mark.slow
def test_sbc_pooled_ranks_are_uniform():
    ranks = _sbc(PRIOR, 60, seed=16)
    p, ok = _check(ranks)
    assert ranks.min() >= 0 and ranks.max() <= L
    assert ok, f"SBC ranks not uniform for the pooled model: min p = {p.min():.2e}; p = {np.round(p, 4)}"


@pytest.mark.slow
def test_sbc_pooled_negative_control_fails():
    ranks = _sbc(WRONG, 30, seed=17)
    p, ok = _check(ranks)
    assert not ok, f"the wrong population prior passed SBC (min p = {p.min():.2e}): the check has no power"
    assert ranks[:, 0].mean() < L / 4  # mu_fpr (column 0) ranks low, as the wrong prior pulls it up


def _prior_ranks(model_prior, n_reps, seed):
    """Ranks of NumPy-simulated truths (``PRIOR``) among L draws of the NumPyro pooled model's prior under
    ``model_prior``, sampled with a random partial centring (same 11 scalars as the SBC)."""
    draws = _prior_draws(model_prior.params(), n_reps * L, seed)
    rng = np.random.default_rng(seed)
    ranks = []
    for r in range(n_reps):
        _, truth = _simulate_params(rng)
        row = []
        for name in NAMES:
            d = draws[name][r * L:(r + 1) * L]
            d = d[:, :3] if name in ("fpr", "tpr") else d.reshape(L)
            row.append(np.atleast_1d((d < truth[name]).sum(axis=0)))
        ranks.append(np.concatenate(row))
    return np.array(ranks)


_PRIOR_DRAWS = []


def _prior_draws(params, n, seed):
    """n draws of the pooled model's prior sites (one compiled vmap; the prior is a traced pytree, so both priors
    share the program)."""
    import jax
    from numpyro.handlers import seed as seeded
    from numpyro.handlers import trace

    from noisycal_bayes.models import pooled_channels, pooled_model  # noqa: F401 - the model under test

    if not _PRIOR_DRAWS:
        def one(key, prior, centering):
            tr = trace(seeded(pooled_channels, key)).get_trace(N_ANN, prior, centering)
            prev = jax.random.beta(jax.random.fold_in(key, 1), prior.prevalence[0], prior.prevalence[1])
            return {**{k: tr[k]["value"] for k in ("mu_fpr", "mean_gap", "sigma_fpr", "sigma_tpr", "fpr", "tpr")},
                    "prevalence": prev}

        _PRIOR_DRAWS.append(jax.jit(jax.vmap(one, in_axes=(0, None, None))))
    centering = np.random.default_rng(seed).uniform(0, 1, (2, N_ANN))
    keys = jax.random.split(jax.random.PRNGKey(seed), n)
    return {k: np.asarray(v) for k, v in _PRIOR_DRAWS[0](keys, params, centering).items()}


def _simulate_params(rng):
    """The parameters of ``_simulate`` (same NumPy story), without the responses."""
    loc, scale = PRIOR.population_fpr
    th = {"mu_fpr": rng.normal(loc, scale), "mean_gap": abs(rng.normal(0, PRIOR.population_gap)),
          "sigma_fpr": abs(rng.normal(0, PRIOR.population_spread)),
          "sigma_tpr": abs(rng.normal(0, PRIOR.population_spread)), "prevalence": rng.beta(*PRIOR.prevalence)}
    th["fpr"] = 1 / (1 + np.exp(-(th["mu_fpr"] + th["sigma_fpr"] * rng.normal(size=3))))
    th["tpr"] = 1 / (1 + np.exp(-(th["mu_fpr"] + th["mean_gap"] + th["sigma_tpr"] * rng.normal(size=3))))
    return None, th


def test_prior_ranks_are_uniform_and_the_wrong_prior_fails():
    """N = 300 truths, 10 bins (expected 30 per bin), chi-square per scalar with the module's Bonferroni level;
    the wrong population prior (median fpr 0.5 instead of 0.12) puts mu_fpr's draws above the truth: fails."""
    ranks = _prior_ranks(PRIOR, 300, seed=3)
    p, ok = _check(ranks)
    assert ok, f"NumPyro prior of the pooled model differs from its generative story: min p = {p.min():.2e}"
    wrong = _prior_ranks(WRONG, 300, seed=4)
    p_wrong, ok_wrong = _check(wrong)
    assert not ok_wrong and wrong[:, 0].mean() < L / 4, f"the wrong prior passed (min p = {p_wrong.min():.2e})"
