"""Tests for the score-dependent and correlated channel models (noisycal_bayes/models/score_noise.py,
noisycal_bayes/models/correlated.py) and their comparison (noisycal_bayes/diagnostics/alternatives.py).

Independent routes: the shared-channel likelihood of noisycal_bayes.core (equal channels in every group;
dependence 0); numerical integration over the item effect with scipy.integrate.quad; the reference
``nc_ece`` (one channel, equal weights); ArviZ's ``az.loo`` on the per-item (expanded) log-likelihood.
"""
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import expit, logit

from noisycal_bayes import Binning, nc_ece
from noisycal_bayes.core import ds_loglik_rows, x64
from noisycal_bayes.diagnostics.alternatives import (row_loo, _weighted_total, compare_noise_models,
                                                      fit_alternative, nc_ece_group_channels)
from noisycal_bayes.models.correlated import correlated_rows_loglik, hermite_nodes
from noisycal_bayes.models.score_noise import grouped_rows_loglik
from noisycal_bayes.simulate import simulate_annotations

FPR, TPR = np.array([0.1, 0.2, 0.15]), np.array([0.85, 0.8, 0.9])
PATTERNS = np.array([[1, 1, 1], [0, 1, -1], [0, 0, 0], [1, -1, 0], [-1, -1, 1]], np.int32)
GROUP = np.array([0, 1, 1, 0, 1], np.int32)
PREV = np.array([0.3, 0.7])


def test_group_channels_equal_everywhere_give_the_shared_likelihood():
    with x64():
        want = np.asarray(ds_loglik_rows(PATTERNS, GROUP, FPR, TPR, PREV))
        got = np.asarray(grouped_rows_loglik(PATTERNS, GROUP, jnp.stack([FPR, FPR]), jnp.stack([TPR, TPR]), PREV))
        np.testing.assert_allclose(got, want, rtol=1e-12)
        x, w = hermite_nodes(9)
        zero = np.asarray(correlated_rows_loglik(PATTERNS, GROUP, FPR, TPR, PREV, 0.0, x, w))
    np.testing.assert_allclose(zero, want, rtol=1e-10)


def test_correlated_likelihood_matches_numerical_integration():
    # P(A | g) = sum_y P(y | g) int phi(b) prod_j p_jy(b)^A (1 - p_jy(b))^(1 - A) db, with
    # p_jy(b) = sigmoid(logit r_jy + s b); quad over b, against 40 Gauss-Hermite nodes (to 1e-9), and the
    # default 15 nodes (to 1e-5: the quadrature error of the model's default, measured 1.4e-6 here at s = 1.3).
    s = 1.3
    with x64():
        got = np.asarray(correlated_rows_loglik(PATTERNS, GROUP, FPR, TPR, PREV, s, *hermite_nodes(40)))
        default = np.asarray(correlated_rows_loglik(PATTERNS, GROUP, FPR, TPR, PREV, s, *hermite_nodes()))
    for r, (pat, g) in enumerate(zip(PATTERNS, GROUP)):
        obs = pat >= 0

        def lik(b, rate):
            p = expit(logit(rate[obs]) + s * b)
            return stats.norm.pdf(b) * np.prod(np.where(pat[obs] == 1, p, 1 - p))

        total = sum(pr * integrate.quad(lik, -12, 12, args=(rate,), epsabs=1e-13)[0]
                    for pr, rate in ((1 - PREV[g], FPR), (PREV[g], TPR)))
        assert got[r] == pytest.approx(np.log(total), rel=1e-9)
        assert default[r] == pytest.approx(np.log(total), rel=1e-5)


def test_nc_ece_with_one_channel_everywhere_is_the_reference():
    sim = simulate_annotations(700, fpr=FPR, tpr=TPR, missing=0.2, seed=4)
    groups = np.minimum((sim.data.scores * 3).astype(int), 2)
    f, t = np.repeat(FPR[None], 3, 0), np.repeat(TPR[None], 3, 0)
    got = nc_ece_group_channels(sim.data, groups, f, t, bins=10, weights="equal")
    assert got == pytest.approx(nc_ece(sim.data, sim.channel, bins=10, weights="equal").value, rel=1e-12)
    # With a different channel in one group only that group's items change: permuting the groups' labels
    # together with their channels changes nothing.
    f2 = f.copy()
    f2[1] = [0.05, 0.3, 0.1]
    perm = np.array([2, 0, 1])
    a = nc_ece_group_channels(sim.data, groups, f2, t, weights="iv")
    b = nc_ece_group_channels(sim.data, perm[groups], f2[np.argsort(perm)], t[np.argsort(perm)], weights="iv")
    assert a == pytest.approx(b, rel=1e-12)


def test_loo_on_rows_equals_loo_on_items():
    # Independent route: az.loo on the per-item log-likelihood (rows expanded by their counts).
    import arviz as az

    rng = np.random.default_rng(0)
    ll_rows = -rng.gamma(2.0, 0.5, size=(2, 200, 6)) + 0.3 * rng.normal(size=(2, 200, 1))
    counts = np.array([3, 1, 5, 2, 4, 1], np.float64)
    elpd_r, k = row_loo(ll_rows)
    total, se = _weighted_total(elpd_r, counts)
    items = np.repeat(ll_rows, counts.astype(int), axis=2)
    elpd_items, _ = row_loo(items)
    assert total == pytest.approx(elpd_items.sum(), rel=1e-10)
    assert se == pytest.approx(np.sqrt(items.shape[2] * np.var(elpd_items, ddof=1)), rel=1e-10)
    assert k.shape == (6,)
    del az


def test_errors_name_the_bad_input():
    sim = simulate_annotations(200, fpr=FPR, tpr=TPR, seed=1)
    with pytest.raises(ValueError, match="`model` must be one of"):
        fit_alternative(sim.data, "latent_class")
    with pytest.raises(ValueError, match="`method` must be 'nuts', 'map' or 'laplace'"):
        fit_alternative(sim.data, "shared", method="vi")
    with pytest.raises(ValueError, match="must include 'shared'"):
        compare_noise_models(sim.data, models=("correlated",))


@pytest.mark.slow
def test_map_score_dependent_fpr_rises_with_the_score():
    # Annotator 0's fpr = 0.02 + 0.3 z; the score-dependent model's group fpr for annotator 0 must rise across
    # groups (its MAP), while the shared model has one fpr.
    rng = np.random.default_rng(1)
    n = 6000
    z = rng.uniform(size=n)
    y = rng.random(n) < z
    fpr = np.stack([0.02 + 0.3 * z, np.full(n, 0.08), np.full(n, 0.05)], 1)
    lab = (rng.random((n, 3)) < np.where(y[:, None], np.array([0.9, 0.85, 0.92]), fpr)).astype(np.int8)
    from noisycal_bayes import AnnotationSet

    data = AnnotationSet.from_wide(lab, z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_alternative(data, "score_dependent", groups=Binning.equal_mass(4), method="map")
    f0 = fit.fpr_group[0, :, 0]
    assert np.all(np.diff(f0) > 0), f0
    assert f0[-1] - f0[0] > 0.1


@pytest.mark.slow
def test_nuts_comparison_runs_loo_for_each_model():
    sim = simulate_annotations(1500, fpr=FPR, tpr=TPR, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cmp = compare_noise_models(sim.data, groups=Binning.equal_mass(3), n_warmup=300, n_draws=300)
    t = cmp.table.set_index("model")
    assert np.all(np.isfinite(t["elpd_loo"])) and t.loc["shared", "elpd_diff"] == 0
    # Well-specified data: the richer models do not beat the shared one by more than 2 standard errors.
    assert np.all(t["elpd_diff"] < 2 * t["se_diff"].clip(lower=0.5))
    assert np.all(t["pareto_k_max"] < 0.7)


@pytest.mark.parametrize("name", ["score_dependent", "correlated"])
def test_prior_predictive_samples_oriented_channels_and_labels(name):
    # labels=None samples the prior predictive (DESIGN §4): responses for the given rows, tpr > fpr in every
    # draw (per group for the score-dependent model, marginally for the correlated one).
    import jax
    from numpyro.infer import Predictive

    from noisycal_bayes.diagnostics.alternatives import _model_fn
    from noisycal_bayes.models import DEFAULT_PRIOR

    group = np.repeat(np.arange(2, dtype=np.int32), 50)
    pred = Predictive(_model_fn(name), num_samples=20)
    out = pred(jax.random.PRNGKey(0), None, group, None, n_annotators=3, n_groups=2, prior=DEFAULT_PRIOR)
    assert out["labels"].shape == (20, 100, 3) and set(np.unique(out["labels"])) <= {0, 1}
    if name == "score_dependent":
        assert out["tpr_group"].shape == (20, 2, 3) and np.all(out["tpr_group"] > out["fpr_group"])
    else:
        assert np.all(out["tpr_marginal"] > out["fpr_marginal"]) and np.all(out["dependence"] >= 0)
