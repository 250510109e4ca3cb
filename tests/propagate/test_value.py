"""``PosteriorNCECE.value`` is the paper's NC-ECE at the point channel on every route; ``.debiased`` is the
bias-corrected estimate (issue 15, items 5 and 7)."""
import numpy as np
import pytest

from noisycal_bayes import nc_ece
from noisycal_bayes.data import Binning, SufficientStats
from noisycal_bayes.propagate import posterior_nc_ece


@pytest.mark.parametrize("weights", ["iv", "equal", "squared_gap", np.array([0.5, 0.3, 0.2])])
@pytest.mark.parametrize("bins", [10, Binning.equal_mass(6)])
def test_value_is_nc_ece_at_the_em_estimate(sim, em, weights, bins):
    # Independent route: the reference layer's nc_ece on the same channel, bins and weights.
    res = posterior_nc_ece(sim.data, em, bins=bins, weights=weights, n_draws=20)
    ref = nc_ece(sim.data, em.channel, bins=bins, weights=weights)
    assert res.value == pytest.approx(ref.value, rel=1e-10, abs=1e-13)


@pytest.mark.parametrize("method", ["plugin", "model", "latent"])
def test_value_is_nc_ece_at_the_posterior_mean_channel(sim, post, method):
    res = posterior_nc_ece(sim.data, post, method=method, bins=Binning.equal_width(10), n_draws=20)
    mean_channel = (post.draws["fpr"].mean(axis=(0, 1)), post.draws["tpr"].mean(axis=(0, 1)))
    np.testing.assert_allclose((post.channel.fpr, post.channel.tpr), mean_channel, rtol=1e-12)
    assert res.value == pytest.approx(nc_ece(sim.data, post.channel, bins=10).value, rel=1e-10)
    # The route changes the debiased estimate and the interval, never the paper's number.
    assert res.debiased != res.value


def test_value_from_sufficient_statistics_matches_the_items(sim, em):
    stats = SufficientStats.from_annotations(sim.data, bins=Binning.equal_width(10))
    a = posterior_nc_ece(stats, em, bootstrap=False, n_draws=5)
    b = posterior_nc_ece(sim.data, em, bins=Binning.equal_width(10), bootstrap=False, n_draws=5)
    assert a.value == pytest.approx(b.value, rel=1e-10)


def test_summary_names_the_value_and_the_debiased_estimate(sim, em):
    res = posterior_nc_ece(sim.data, em, n_draws=20)
    assert f"NC-ECE {res.value:.4f}" in res.summary() and f"debiased {res.debiased:.4f}" in res.summary()
