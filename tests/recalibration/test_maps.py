"""Tests for noisycal_bayes/recalibration/maps.py: scikit-learn-style recalibration maps."""
import json
import warnings

import numpy as np
import pytest

from noisycal_bayes import AnnotationSet, Binning, Channel, simulate_annotations
from noisycal_bayes.recalibration import (NotFittedError, PlattScaling, ProjectedHistogram, TemperatureScaling,
                                          map_from_dict)
from noisycal_bayes.reference.recalibration import (corrected_item_labels, fit_platt, fit_projected_histogram,
                                                    fit_temperature)
from noisycal_bayes.warnings import BoundaryWarning

MAPS = [TemperatureScaling, PlattScaling, ProjectedHistogram]


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(2000, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.75], curve="overconfident",
                                missing=0.25, seed=12)


def test_init_stores_parameters_only_and_fit_returns_self(sim):
    for cls in MAPS:
        m = cls()
        assert not any(k.endswith("_") for k in vars(m))
        assert m.fit(sim.data.scores, sim.data, channel=sim.channel) is m
        assert any(k.endswith("_") for k in vars(m))
    assert repr(TemperatureScaling(bounds=(0.1, 5.0))) == "TemperatureScaling(bounds=(0.1, 5.0))"


def test_corrected_fit_equals_the_pure_function_on_corrected_labels(sim):
    z = sim.data.scores
    y = corrected_item_labels(sim.data, sim.channel, weights="gap").values
    ts = TemperatureScaling().fit(z, sim.data, channel=sim.channel, weights="gap")
    assert ts.temperature_ == fit_temperature(z, y).temperature and ts.fit_kind_ == "corrected"
    ps = PlattScaling().fit(z, sim.data, channel=sim.channel, weights="gap")
    ref = fit_platt(z, y)
    assert (ps.alpha_, ps.beta_) == (ref.alpha, ref.beta)
    ph = ProjectedHistogram(bins=Binning.equal_mass(8)).fit(z, sim.data, channel=sim.channel, weights="gap")
    np.testing.assert_array_equal(ph.bin_values_, fit_projected_histogram(z, y, bins=Binning.equal_mass(8)).bin_values)
    np.testing.assert_allclose(ts.weights_, sim.channel.gap / sim.channel.gap.sum())


def test_identity_channel_with_equal_weights_is_the_naive_vote_fraction_fit(sim):
    z = sim.data.scores
    ident = Channel.identity(3)
    for cls in MAPS:
        corrected = cls().fit(z, sim.data, channel=ident, weights="equal").predict(z)
        naive = cls().fit(z, sim.data.vote_fraction()).predict(z)
        np.testing.assert_allclose(corrected, naive, rtol=1e-9, atol=1e-12)


def test_projected_histogram_is_in_unit_interval_and_equals_clipped_corrected_bin_means(sim):
    z = sim.data.scores
    ph = ProjectedHistogram(bins=10).fit(z, sim.data, channel=sim.channel)
    # Independent route: per item corrected label with IV weights written out (DESIGN §3), bin means.
    lab, fpr, gap = sim.data.labels, sim.channel.fpr, sim.channel.gap
    obs = lab >= 0
    yt = np.where(obs, (lab - fpr) / gap, 0.0)
    mu = np.clip(np.mean(yt.sum(1) / obs.sum(1)), 1e-4, 1 - 1e-4)
    tpr = fpr + gap
    w = 1 / ((mu * tpr * (1 - tpr) + (1 - mu) * fpr * (1 - fpr)) / gap**2)
    W = np.where(obs, w, 0.0)
    item = (W * yt).sum(1) / W.sum(1)
    b = np.minimum((z * 10).astype(int), 9)
    means = np.array([item[b == k].mean() for k in range(10)])
    np.testing.assert_allclose(ph.raw_means_, means, rtol=1e-10)
    np.testing.assert_allclose(ph.bin_values_, np.clip(means, 0, 1), rtol=1e-10)
    grid = np.linspace(0, 1, 101)
    p = ph.predict(grid)
    assert p.min() >= 0 and p.max() <= 1


def test_boundary_optimum_is_flagged_on_the_estimator():
    z = np.linspace(0.02, 0.98, 40)
    labels = (z > 0.5).astype(float)  # perfectly separated: the loss keeps falling as T -> 0
    with pytest.warns(BoundaryWarning):
        ts = TemperatureScaling(bounds=(0.5, 5.0)).fit(z, labels)
    assert ts.on_boundary_ and ts.temperature_ == pytest.approx(0.5)
    with pytest.warns(BoundaryWarning):
        ps = PlattScaling(alpha_bounds=(0.1, 4.0)).fit(z, labels)
    assert ps.on_boundary_ and ps.boundary_params_ == ("alpha",)


def test_interior_fit_is_not_flagged(sim):
    with warnings.catch_warnings():
        warnings.simplefilter("error", BoundaryWarning)
        ts = TemperatureScaling().fit(sim.data.scores, sim.data, channel=sim.channel)
    assert not ts.on_boundary_


@pytest.mark.parametrize("cls", MAPS)
def test_json_round_trip(sim, cls):
    z = sim.data.scores
    kwargs = {"bins": Binning.equal_mass(6)} if cls is ProjectedHistogram else {}
    m = cls(**kwargs).fit(z, sim.data, channel=sim.channel)
    restored = map_from_dict(json.loads(json.dumps(m.to_dict())))
    assert type(restored) is cls and restored.get_params() == m.get_params()
    np.testing.assert_array_equal(restored.predict(z), m.predict(z))
    unfitted = cls.from_dict(json.loads(json.dumps(cls(**kwargs).to_dict())))
    with pytest.raises(NotFittedError, match="not fitted yet"):
        unfitted.predict(z)


def test_json_round_trip_keeps_nan_for_empty_bins():
    with pytest.warns(Warning, match="empty"):
        ph = ProjectedHistogram(bins=4).fit([0.1, 0.2, 0.9], [0, 1, 1])
    text = json.dumps(ph.to_dict(), allow_nan=False)  # strict JSON: NaN stored as null
    back = map_from_dict(json.loads(text))
    assert np.isnan(back.raw_means_[1]) and back.empty_bins_ == (1, 2)
    np.testing.assert_array_equal(back.bin_values_, ph.bin_values_)


def test_bad_inputs_raise_clear_errors(sim):
    z = sim.data.scores
    with pytest.raises(ValueError, match="needs the annotators' `channel=`.*data.vote_fraction"):
        TemperatureScaling().fit(z, sim.data)
    with pytest.raises(ValueError, match="`channel` was given but the labels are not an AnnotationSet"):
        PlattScaling().fit(z, sim.data.vote_fraction(), channel=sim.channel)
    with pytest.raises(ValueError, match="`weights` combines annotators"):
        ProjectedHistogram().fit(z, sim.data.majority_vote(), weights="iv")
    with pytest.raises(ValueError, match="`scores` has 10 entries but `data` has 2000 items"):
        TemperatureScaling().fit(z[:10], sim.data, channel=sim.channel)
    with pytest.raises(ValueError, match=r"`labels` must lie in \[0, 1\]"):
        TemperatureScaling().fit(z[:3], [0, 2, 1])
    with pytest.raises(ValueError, match="`labels` must be finite"):
        PlattScaling().fit(z[:3], [0, np.nan, 1])
    with pytest.raises(ValueError, match="`fit` needs labels"):
        PlattScaling().fit(z, None)
    with pytest.raises(ValueError, match="`scores` must be finite"):
        TemperatureScaling().fit([0.2, np.inf], [0, 1])
    with pytest.raises(ValueError, match="has 2 annotators but the data has 3"):
        TemperatureScaling().fit(z, sim.data, channel=Channel([0.1, 0.1], [0.9, 0.9]))
    with pytest.raises(ValueError, match="`bounds` must be finite with 0 < low < high"):
        TemperatureScaling(bounds=(2.0, 1.0)).fit(z[:3], [0, 1, 1])
    with pytest.raises(ValueError, match="`bins` must be an int"):
        ProjectedHistogram(bins="auto").fit(z[:3], [0, 1, 1])
    with pytest.raises(NotFittedError, match="PlattScaling is not fitted yet"):
        PlattScaling().predict(z)
    with pytest.raises(ValueError, match="describes a PlattScaling, not a TemperatureScaling"):
        TemperatureScaling.from_dict(PlattScaling().to_dict())
    with pytest.raises(ValueError, match="expected a dict from `to_dict\\(\\)` of one of"):
        map_from_dict({"class": "Isotonic"})
    with pytest.raises(ValueError, match="unknown parameters \\['n_bins'\\]"):
        ProjectedHistogram.from_dict({"class": "ProjectedHistogram", "params": {"n_bins": 3}, "fitted": None})


def test_fit_does_not_modify_the_callers_data():
    data = AnnotationSet.from_wide(np.array([[1, 0], [0, -1], [1, 1], [0, 0]]), [0.2, 0.5, 0.9, 0.1])
    z = np.array([0.2, 0.5, 0.9, 0.1])
    soft = np.array([0.5, 0.0, 1.0, 0.0])
    zc, sc, lc = z.copy(), soft.copy(), data.labels.copy()
    ch = Channel([0.1, 0.2], [0.8, 0.9])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # four items: boundary optima and empty bins are expected
        for cls in MAPS:
            cls().fit(z, data, channel=ch).predict(z)
            cls().fit(z, soft).predict(z)
    np.testing.assert_array_equal(z, zc)
    np.testing.assert_array_equal(soft, sc)
    np.testing.assert_array_equal(data.labels, lc)
