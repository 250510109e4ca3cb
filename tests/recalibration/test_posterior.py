"""Tests for noisycal_bayes/recalibration/posterior.py: posterior histogram, Platt and temperature maps.

Independent routes: the reference corrected-loss temperature fit (one channel, no bootstrap), direct
formulas on the draws (histogram, Platt).
"""
import numpy as np
import pytest

from noisycal_bayes import Channel, simulate_annotations
from noisycal_bayes.recalibration.posterior import (NotFittedError, PosteriorHistogram, PosteriorPlatt,
                                                    PosteriorTemperature)
from noisycal_bayes.reference.recalibration import corrected_item_labels, fit_temperature
from noisycal_bayes.warnings import BoundaryWarning

from ..propagate._fakes import channel_draws, fake_nuts, fake_platt, histogram_fit

FPR, TPR = [0.1, 0.2, 0.15], [0.85, 0.8, 0.9]


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(1000, fpr=FPR, tpr=TPR, curve="overconfident", missing=0.2, seed=21)


@pytest.mark.parametrize("weights", ["iv", "equal"])
def test_temperature_without_bootstrap_equals_reference_fit(sim, weights):
    pt = PosteriorTemperature(bootstrap=False, n_draws=4, weights=weights).fit(sim.data, sim.channel)
    targets = corrected_item_labels(sim.data, sim.channel, weights=weights).values
    ref = fit_temperature(sim.data.scores, targets).temperature
    np.testing.assert_allclose(pt.temperature_draws_, ref, rtol=1e-6)
    assert pt.n_boundary_ == 0


def test_temperature_per_channel_draw_equals_reference_per_draw(sim):
    rng = np.random.default_rng(1)
    f, t = channel_draws(rng, FPR, TPR, 1, 4, spread=0.03)
    em = histogram_fit(sim.data)
    post = fake_nuts(em, {"fpr": f, "tpr": t, "prevalence": np.tile(em.point["prevalence"], (1, 4, 1))})
    pt = PosteriorTemperature(bootstrap=False).fit(sim.data, post)
    for s in range(4):
        ch = Channel(f[0, s], t[0, s])
        ref = fit_temperature(sim.data.scores, corrected_item_labels(sim.data, ch).values).temperature
        assert pt.temperature_draws_[s] == pytest.approx(ref, rel=1e-6)


def test_temperature_bootstrap_band_and_predictions(sim):
    pt = PosteriorTemperature(n_draws=200, seed=3).fit(sim.data, sim.channel)
    assert np.ptp(pt.temperature_draws_) > 0
    z = np.array([0.05, 0.5, 0.95])
    d = pt.predict_draws(z)
    assert d.shape == (200, 3)
    s = np.log(z / (1 - z))
    np.testing.assert_allclose(d, 1 / (1 + np.exp(-s[None] / pt.temperature_draws_[:, None])), rtol=1e-12)
    np.testing.assert_allclose(pt.predict(z), d.mean(axis=0))
    lo, hi = pt.predict_interval(z, level=0.8)
    np.testing.assert_allclose(lo, np.quantile(d, 0.1, axis=0))
    np.testing.assert_allclose(hi, np.quantile(d, 0.9, axis=0))
    # Temperature scaling leaves 0.5 at 0.5 in every draw.
    assert lo[1] == pytest.approx(0.5) and hi[1] == pytest.approx(0.5)


def test_temperature_boundary_is_reported(sim):
    # The clean curve is sigmoid(0.5 logit z) (T = 2); a box [0.5, 1] forces the optimum onto T_max = 1.
    with pytest.warns(BoundaryWarning, match="box boundary"):
        pt = PosteriorTemperature(bounds=(0.5, 1.0), n_draws=20).fit(sim.data, sim.channel)
    assert pt.n_boundary_ == 20
    np.testing.assert_allclose(pt.temperature_draws_, 1.0)


def test_histogram_map_is_the_bin_prevalence_draws(sim):
    em = histogram_fit(sim.data, n_bins=5)
    rng = np.random.default_rng(4)
    f, t = channel_draws(rng, FPR, TPR, 2, 25)
    prev = np.clip(em.point["prevalence"] + 0.05 * rng.standard_normal((2, 25, em.groups.n_groups)), 0.0, 1.0)
    post = fake_nuts(em, {"fpr": f, "tpr": t, "prevalence": prev})
    ph = PosteriorHistogram().fit(sim.data, post)
    z = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    flat = prev.reshape(50, -1)
    np.testing.assert_allclose(ph.predict_draws(z), flat)
    np.testing.assert_allclose(ph.predict(z), flat.mean(axis=0))
    lo, hi = ph.predict_interval(z)
    np.testing.assert_allclose(lo, np.quantile(flat, 0.05, axis=0))
    np.testing.assert_allclose(hi, np.quantile(flat, 0.95, axis=0))
    assert ph.empty_bins_ == ()


def test_histogram_empty_bins_keep_midpoint_and_full_band():
    # Scores only below 0.6: bins [0.6, 0.8) and [0.8, 1] of a 5-bin fit hold no items.
    sim = simulate_annotations(600, fpr=FPR, tpr=TPR, score_beta=(1.0, 1.0), seed=5)
    data = sim.data.with_scores(sim.data.scores * 0.59)
    em = histogram_fit(data, n_bins=5)
    rng = np.random.default_rng(6)
    f, t = channel_draws(rng, FPR, TPR, 1, 10)
    post = fake_nuts(em, {"fpr": f, "tpr": t, "prevalence": np.tile(em.point["prevalence"], (1, 10, 1))})
    ph = PosteriorHistogram().fit(data, post)
    assert ph.empty_bins_ == (3, 4)
    assert ph.predict([0.9]) == pytest.approx(0.9)
    lo, hi = ph.predict_interval([0.7, 0.9])
    np.testing.assert_allclose(lo, 0.0) and np.testing.assert_allclose(hi, 1.0)


def test_platt_map_formula(sim):
    rng = np.random.default_rng(7)
    f, t = channel_draws(rng, FPR, TPR, 1, 30)
    slope, intercept = 0.5 + 0.1 * rng.standard_normal((1, 30)), 0.1 * rng.standard_normal((1, 30))
    fit = fake_platt(sim.data, fpr=f, tpr=t, slope=slope, intercept=intercept)
    pp = PosteriorPlatt().fit(sim.data, fit)
    z = np.array([0.2, 0.7])
    s = np.log(z / (1 - z))
    want = 1 / (1 + np.exp(-(slope.reshape(-1, 1) * s + intercept.reshape(-1, 1))))
    np.testing.assert_allclose(pp.predict_draws(z), want, rtol=1e-12)
    assert pp.slope_ == pytest.approx(slope.mean())
    assert PosteriorPlatt(n_draws=10).fit(sim.data, fit).n_draws_ == 10


def test_errors(sim):
    em = histogram_fit(sim.data)
    with pytest.raises(NotFittedError, match="not fitted"):
        PosteriorTemperature().predict([0.5])
    with pytest.raises(ValueError, match="needs posterior draws"):
        PosteriorHistogram().fit(sim.data, em)
    rng = np.random.default_rng(0)
    f, t = channel_draws(rng, FPR, TPR, 1, 5)
    post = fake_nuts(em, {"fpr": f, "tpr": t, "prevalence": np.tile(em.point["prevalence"], (1, 5, 1))})
    with pytest.raises(ValueError, match="model 'platt'"):
        PosteriorPlatt().fit(sim.data, post)
    with pytest.raises(ValueError, match="0 < T_min < T_max"):
        PosteriorTemperature(bounds=(2.0, 1.0)).fit(sim.data, sim.channel)
    with pytest.raises(ValueError, match="`weights` must be one of"):
        PosteriorTemperature(weights="votes").fit(sim.data, sim.channel)
    with pytest.raises(ValueError, match="must be an AnnotationSet"):
        PosteriorTemperature().fit(sim.data.labels, sim.channel)
    with pytest.raises(ValueError, match="annotators"):
        PosteriorTemperature().fit(sim.data, Channel([0.1, 0.1], [0.9, 0.9]))
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        PosteriorTemperature(n_draws=5).fit(sim.data, sim.channel).predict([1.5])


def test_posterior_maps_raise_the_exported_not_fitted_error():
    """One NotFittedError for point and posterior maps, so `except recalibration.NotFittedError` catches both."""
    from noisycal_bayes import recalibration

    for cls in (PosteriorHistogram, PosteriorPlatt, PosteriorTemperature):
        with pytest.raises(recalibration.NotFittedError):
            cls().predict([0.5])
