"""Tests for noisycal_bayes/models/priors.py: validation, the documented default, EM pseudo-counts."""
import numpy as np
import pytest
from scipy import stats

from noisycal_bayes.models import DEFAULT_PRIOR, Prior


def _density_fpr_tpr(prior, fpr, tpr):
    """Density of (fpr, tpr) implied by fpr ~ Beta, u ~ Beta, tpr = fpr + (1 - fpr) u (Jacobian 1 / (1 - fpr))."""
    u = (tpr - fpr) / (1 - fpr)
    return stats.beta(*prior.fpr).pdf(fpr) * stats.beta(*prior.u).pdf(u) / (1 - fpr)


def test_default_prior_is_uniform_on_the_oriented_triangle():
    # The documented claim: density 2 everywhere on 0 < fpr < tpr < 1 (the triangle has area 1/2).
    rng = np.random.default_rng(0)
    fpr = rng.uniform(0, 1, 500)
    tpr = fpr + (1 - fpr) * rng.uniform(0, 1, 500)
    np.testing.assert_allclose(_density_fpr_tpr(DEFAULT_PRIOR, fpr, tpr), 2.0, rtol=1e-10)
    assert DEFAULT_PRIOR.em_pseudo_counts() == ((1.0, 1.0), (1.0, 1.0), (1.0, 1.0))


def test_em_pseudo_counts_are_the_prior_in_fpr_tpr_coordinates():
    # The log density in (fpr, tpr) coordinates minus the Beta kernels of the pseudo-counts is a constant.
    prior = Prior(fpr=(2.0, 6.0), u=(1.0, 2.5), prevalence=(3.0, 2.0))
    (af, bf), (at, bt), prev = prior.em_pseudo_counts()
    assert (af, bf, at, bt) == (2.0, 3.5, 1.0, 2.5) and prev == (3.0, 2.0)
    rng = np.random.default_rng(1)
    fpr = rng.uniform(0.01, 0.9, 200)
    tpr = fpr + (1 - fpr) * rng.uniform(0.01, 0.99, 200)
    kernel = (af - 1) * np.log(fpr) + (bf - 1) * np.log1p(-fpr) + (at - 1) * np.log(tpr) + (bt - 1) * np.log1p(-tpr)
    diff = np.log(_density_fpr_tpr(prior, fpr, tpr)) - kernel
    np.testing.assert_allclose(diff, diff[0], rtol=1e-10)


def test_em_pseudo_counts_refuse_a_coupling_prior():
    with pytest.raises(ValueError, match="fit_map"):
        Prior(u=(2.0, 1.0)).em_pseudo_counts()


@pytest.mark.parametrize("kwargs, match", [
    ({"fpr": (0.0, 1.0)}, "finite and > 0"),
    ({"u": (1.0,)}, "pair"),
    ({"prevalence": "flat"}, "pair"),
    ({"increments": -1.0}, "Dirichlet"),
    ({"slope": (0.0, 0.0)}, "scale > 0"),
    ({"intercept": (np.nan, 1.0)}, "finite loc"),
])
def test_bad_priors_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Prior(**kwargs)


def test_sample_and_params():
    rng = np.random.default_rng(2)
    fpr, tpr, prev = Prior().sample(rng, 4, 3)
    assert fpr.shape == tpr.shape == (4,) and prev.shape == (3,)
    assert np.all(tpr > fpr)
    p = Prior(fpr=(2, 3)).params()
    assert p.fpr == (2.0, 3.0) and p.increments == 1.0
