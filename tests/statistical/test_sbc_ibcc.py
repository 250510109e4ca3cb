"""Posterior calibration of IBCC (models/ibcc.py) sampled by fit_nuts_multiclass(model="ibcc").

**Cheap version** (default run, as tests/statistical/test_sbc_multiclass.py): with a gold label on every item the
posterior is conjugate and exact, ``C[j, y, :] ~ Dirichlet(alpha_y + N_jy)`` and ``pi ~ Dirichlet(beta + M)``
(``N_jy`` annotator j's label counts on items of class y, ``M`` the class counts). One NUTS run from a population
``alpha`` with small off-diagonal entries (0.1-0.4, the cf regime where log-ratio coordinates failed) must match
the exact means within Monte Carlo error (``_gold_check``: Bonferroni at 1e-3 over the scalars, ESS the bulk ESS).
Negative control (must FAIL): the fit with a wrong population (diagonal x 6) against the exact posterior of the
right one; the diagonal entries are pulled up.

**SBC** (slow; Talts et al. 2018, rank test ``_check`` of tests/statistical/test_sbc.py): ``C[j, y] ~
Dirichlet(alpha_y)`` (the population fixed, as in the empirical-Bayes fit), ``pi ~ Dirichlet(2, 2, 2)``, K = 3,
20 annotators, 80 items with 4 labels each by distinct annotators, no gold; one chain, 200 warm-up steps and 200
draws thinned by 4 to L = 49. Scalars: ``pi_0`` and the diagonal of annotators 0-2 (10). Ranks in 10 bins of 5,
chi-square per scalar, Bonferroni over 10 at 1e-3. Negative control (must FAIL): fitted with the diagonal x 6.
"""
import dataclasses
import warnings

import numpy as np
import pytest
from test_sbc import L, _check
from test_sbc_multiclass import _gold_check

from noisycal_bayes.inference import fit_nuts_multiclass
from noisycal_bayes.inference.population import fit_em_population
from noisycal_bayes.models import MulticlassPrior
from tests.inference.test_confusion_nuts import Crowd

pytestmark = pytest.mark.statistical

K = 3
ALPHA = np.array([[3.0, 0.3, 0.1], [0.4, 4.0, 0.2], [0.1, 0.3, 2.0]])
WRONG = ALPHA + 5.0 * np.diag(np.diag(ALPHA))
PRIOR = MulticlassPrior(prevalence=2.0)


def _simulate(rng, n_items, n_ann, per_item, gold: bool):
    conf = np.stack([[rng.dirichlet(ALPHA[y]) for y in range(K)] for _ in range(n_ann)])
    prev = rng.dirichlet(np.full(K, PRIOR.prevalence))
    y = rng.choice(K, size=n_items, p=prev)
    item = np.repeat(np.arange(n_items), per_item)
    ann = np.concatenate([rng.choice(n_ann, per_item, replace=False) for _ in range(n_items)])
    lab = (rng.random(item.size)[:, None] > np.cumsum(conf[ann, y[item]], axis=1)).sum(axis=1)
    data = Crowd((item, ann, lab), n_items, n_ann, K, None, y if gold else None, tuple(range(K)))
    return data, conf, prev, y


def _fit(data, alpha, seed, **kw):
    """IBCC with the population ``alpha`` plugged in (``init``: a pooled EM fit carrying it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        em = fit_em_population(data)
        start = dataclasses.replace(em, prior=(alpha, em.prior[1]))
        return fit_nuts_multiclass(data, model="ibcc", init=start, prior=PRIOR, seed=seed, **kw)


def _exact(data, y, alpha):
    item, ann, lab = data.responses
    n = np.zeros((data.n_annotators, K, K))
    np.add.at(n, (ann, y[item], lab), 1.0)
    out = []
    for a in (n + alpha, (np.bincount(y, minlength=K) + PRIOR.prevalence)[None]):
        mean = a / a.sum(-1, keepdims=True)
        out.append((mean, np.sqrt(mean * (1 - mean) / (a.sum(-1, keepdims=True) + 1))))
    return out


GOLD = dict(n_chains=2, n_warmup=150, n_samples=150)


@pytest.fixture(scope="module")
def all_gold():
    data, _, _, y = _simulate(np.random.default_rng(3), 60, 6, 3, gold=True)
    return data, y


def test_all_gold_posterior_matches_the_conjugate_posterior(all_gold):
    data, y = all_gold
    fit = _fit(data, ALPHA, 0, **GOLD)
    assert fit.diagnostics["max_rhat"] < 1.05 and fit.diagnostics["min_ess_bulk"] > 30, fit.diagnostics
    z, ok = _gold_check(fit, _exact(data, y, ALPHA))
    assert ok, f"NUTS means off the exact conjugate posterior: max |z| = {np.max(np.abs(z)):.2f}"


def test_all_gold_negative_control_with_a_wrong_population_fails(all_gold):
    data, y = all_gold
    fit = _fit(data, WRONG, 1, **GOLD)
    z, ok = _gold_check(fit, _exact(data, y, ALPHA))
    assert not ok, f"a wrong population matched the exact posterior (max |z| = {np.max(np.abs(z)):.2f}): no power"
    J = data.n_annotators
    diag = z[: J * K * K].reshape(J, K, K)[:, np.arange(K), np.arange(K)]
    assert diag.mean() > 0  # the failure is where it should be: diagonal entries pulled up


# ------------------------------------------------------------------------------------------------ SBC (slow)
SBC_NUTS = dict(n_chains=1, n_warmup=200, n_samples=200)


def _sbc(alpha, n_reps, seed):
    rng = np.random.default_rng(seed)
    ranks = []
    for r in range(n_reps):
        data, conf, prev, _ = _simulate(rng, 80, 20, 4, gold=False)
        truth = np.concatenate([[prev[0]], conf[:3, np.arange(K), np.arange(K)].ravel()])
        fit = _fit(data, alpha, r, **SBC_NUTS)
        draws = np.concatenate([fit.prevalence[:, 0, :1], fit.confusion[:, :3, np.arange(K), np.arange(K)]
                                .reshape(-1, 3 * K)], axis=1)[::4][:L]
        ranks.append((draws < truth).sum(axis=0))
    return np.array(ranks)


@pytest.mark.slow
def test_sbc_ibcc_ranks_are_uniform():
    ranks = _sbc(ALPHA, 60, seed=31)
    p, ok = _check(ranks)
    assert ok, f"SBC ranks not uniform (IBCC): min p = {p.min():.2e}"


@pytest.mark.slow
def test_sbc_ibcc_negative_control_fails():
    ranks = _sbc(WRONG, 30, seed=32)
    p, ok = _check(ranks)
    assert not ok, f"the wrong population passed SBC (min p = {p.min():.2e}): the check has no power"
    assert ranks[:, 1:].mean() < L / 4  # the diagonal entries rank low
