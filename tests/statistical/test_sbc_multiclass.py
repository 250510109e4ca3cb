"""Posterior calibration of the K-class grouped model (models/dawid_skene.py, "K classes") sampled by fit_nuts_multiclass.

**SBC** (slow; Talts et al. 2018, as tests/statistical/test_sbc.py, whose rank test ``_check`` is reused): for
theta ~ prior and data ~ model(theta), the rank of each true scalar among L = 49 thinned posterior draws is
uniform on {0, ..., 49}. Design per replicate: K = 3 classes, 3 annotators labelling all 150 items, 2 score
groups of 75; one chain, 200 warm-up steps and 200 draws thinned by 4. Scalars: the 9 diagonal entries
``C[j, y, y]`` and ``prevalence[g, 0]`` of both groups (11). The prior is ``MulticlassPrior(diagonal=8,
off_diagonal=1, prevalence=2)`` restricted to the orientation region (the annotators' average confusion
diagonally dominant, module docstring of models/dawid_skene.py, "K classes"): the sampler starts there and stays in that
mode, so the truth is drawn from the prior conditioned on it (rejection; about 1% of draws are rejected).
Ranks in 10 bins of 5, chi-square per scalar (9 df, expected 6 per bin at 60 replicates); false-alarm rate
1e-3 per model, Bonferroni over the 11 scalars. Negative control (must FAIL): fitted with ``diagonal=40``
(39 pseudo-labels on each diagonal entry against about 50 labels per row), which pulls every diagonal entry
up, so the truth ranks low.

**Cheap version** (default run): with a gold label on every item the posterior is conjugate and exact,
``C[j, y, :] ~ Dirichlet(alpha_y + N_jy)`` and ``prevalence[g] ~ Dirichlet(beta + M_g)`` (``N_jy`` the counts
of annotator j's labels on items of class y, ``M_g`` the class counts of group g). One NUTS run (the shapes of
tests/inference/test_confusion_nuts.py, so the compiled sampler is shared) must match its means within
Monte Carlo error: ``|mean_NUTS - mean_exact| < z sd_exact / sqrt(ESS)``, ``z`` for a false-alarm rate of
1e-3 over the 33 scalars (Bonferroni), ESS the bulk ESS of each scalar. Its negative control (a wrong prior,
``diagonal=40``, against the exact posterior of the right one) must fail.
"""
import warnings

import numpy as np
import pytest
from scipy.special import ndtri
from test_sbc import FAMILY_ALPHA, L, _check

from noisycal_bayes.inference import fit_nuts_multiclass
from noisycal_bayes.core.starts import diagonally_dominant
from noisycal_bayes.models.priors import MulticlassPrior
from noisycal_bayes.warnings import ConvergenceWarning
from tests.inference.test_confusion_nuts import G, J, K, N, NUTS, Crowd, simulate

pytestmark = pytest.mark.statistical

WRONG_DIAGONAL = 40.0


def _exact_gold_posterior(data, group, prior):
    """Means and sds of the conjugate Dirichlet posterior when every item is gold: (J K K,), (G K,) each."""
    item, ann, lab = data.responses
    y = data.gold
    counts = np.zeros((J, K, K))
    np.add.at(counts, (ann, y[item], lab), 1.0)
    a = counts + prior.pseudo_counts(K) + 1.0
    b = np.zeros((G, K))
    np.add.at(b, (group, y), 1.0)
    b += prior.prevalence
    out = []
    for alpha in (a, b):
        a0 = alpha.sum(-1, keepdims=True)
        mean = alpha / a0
        out.append((mean, np.sqrt(mean * (1 - mean) / (a0 + 1))))
    return out


def _gold_check(fit, exact):
    """``(z-scores, ok)`` of the NUTS means against the exact posterior means (Monte Carlo error from bulk ESS)."""
    tab = fit.diagnostics_table
    scores = []
    for name, draws, (mean, sd) in (("confusion", fit.confusion, exact[0]), ("prevalence", fit.prevalence, exact[1])):
        ess = tab.loc[tab["name"] == name, "ess_bulk"].to_numpy().reshape(mean.shape)
        scores.append(((draws.mean(axis=0) - mean) / (sd / np.sqrt(ess))).ravel())
    z = np.concatenate(scores)
    return z, bool(np.max(np.abs(z)) < ndtri(1 - 1e-3 / (2 * z.size)))


@pytest.fixture(scope="module")
def all_gold():
    data, group, _, _ = simulate(N, J, K, G, seed=21, gold_frac=1.0)
    return data, group


def _fit(data, group, prior, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit_nuts_multiclass(data, groups=group, prior=prior, seed=seed, **NUTS)


@pytest.mark.slow  # 8-64 s with a cold compilation cache (CI); make test-all runs it
def test_all_gold_posterior_matches_the_conjugate_posterior(all_gold):
    data, group = all_gold
    prior = MulticlassPrior()
    fit = _fit(data, group, prior, 0)
    assert fit.diagnostics["max_rhat"] < 1.05 and fit.diagnostics["min_ess_bulk"] > 50
    z, ok = _gold_check(fit, _exact_gold_posterior(data, group, prior))
    assert ok, f"NUTS means off the exact conjugate posterior: max |z| = {np.max(np.abs(z)):.2f}"


@pytest.mark.slow  # 8-64 s with a cold compilation cache (CI); make test-all runs it
def test_all_gold_negative_control_with_a_wrong_prior_fails(all_gold):
    data, group = all_gold
    fit = _fit(data, group, MulticlassPrior(diagonal=WRONG_DIAGONAL), 1)
    z, ok = _gold_check(fit, _exact_gold_posterior(data, group, MulticlassPrior()))
    assert not ok, f"a wrong prior matched the exact posterior (max |z| = {np.max(np.abs(z)):.2f}): no power"
    diag = z[: J * K * K].reshape(J, K, K)[:, np.arange(K), np.arange(K)]
    assert np.all(diag > 0)  # the failure is where it should be: diagonal entries pulled up


# ------------------------------------------------------------------------------------------------ SBC (slow)
SBC_PRIOR = MulticlassPrior(diagonal=8.0, off_diagonal=1.0, prevalence=2.0)
SBC_ITEMS, SBC_GROUPS = 150, 2
SBC_NUTS = dict(n_chains=1, n_warmup=200, n_samples=200, path="sparse", progress_bar=False)


def _simulate_sbc(rng):
    """Truth from SBC_PRIOR conditioned on orientation (rejection), and complete responses."""
    while True:
        conf, prev = SBC_PRIOR.sample(rng, J, K, SBC_GROUPS)
        if diagonally_dominant(conf):
            break
    group = np.repeat(np.arange(SBC_GROUPS), SBC_ITEMS // SBC_GROUPS)
    y = (rng.random(SBC_ITEMS)[:, None] > np.cumsum(prev[group], axis=1)).sum(axis=1)
    item, ann = np.repeat(np.arange(SBC_ITEMS), J), np.tile(np.arange(J), SBC_ITEMS)
    lab = (rng.random(item.size)[:, None] > np.cumsum(conf[ann, y[item]], axis=1)).sum(axis=1)
    data = Crowd((item, ann, lab), SBC_ITEMS, J, K, None, None, tuple(range(K)))
    truth = np.concatenate([conf[:, np.arange(K), np.arange(K)].ravel(), prev[:, 0]])
    return data, group, truth


def _sbc(fit_prior, n_reps, seed):
    rng = np.random.default_rng(seed)
    ranks = []
    for r in range(n_reps):
        data, group, truth = _simulate_sbc(rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # one short chain: ESS / R-hat warnings are expected
            fit = fit_nuts_multiclass(data, groups=group, prior=fit_prior, seed=r, **SBC_NUTS)
        draws = np.concatenate([fit.confusion[:, :, np.arange(K), np.arange(K)].reshape(-1, J * K),
                                fit.prevalence[:, :, 0]], axis=1)[::4][:L]
        ranks.append((draws < truth).sum(axis=0))
    return np.array(ranks)


@pytest.mark.slow
def test_sbc_multiclass_ranks_are_uniform():
    ranks = _sbc(SBC_PRIOR, 60, seed=18)
    p, ok = _check(ranks)
    assert ranks.min() >= 0 and ranks.max() <= L
    assert ok, f"SBC ranks not uniform (multiclass): min p = {p.min():.2e} (threshold {FAMILY_ALPHA / len(p):.1e})"


@pytest.mark.slow
def test_sbc_multiclass_negative_control_fails():
    ranks = _sbc(MulticlassPrior(diagonal=WRONG_DIAGONAL, off_diagonal=1.0, prevalence=2.0), 30, seed=19)
    p, ok = _check(ranks)
    assert not ok, f"the wrong prior passed SBC (min p = {p.min():.2e}): the check has no power"
    assert ranks[:, : J * K].mean() < L / 4  # the diagonal entries rank low
