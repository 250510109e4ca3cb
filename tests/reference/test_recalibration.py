"""Tests for noisycal_bayes/reference/recalibration.py: corrected targets, bounded fits, projected histogram."""
import warnings

import numpy as np
import pytest
from scipy import optimize

from noisycal_bayes import AnnotationSet, Binning, Channel, simulate_annotations
from noisycal_bayes.reference.recalibration import (corrected_item_labels, fit_platt, fit_projected_histogram,
                                                    fit_temperature, predict_histogram, predict_platt,
                                                    predict_temperature)
from noisycal_bayes.warnings import BoundaryWarning, DataWarning


def _logit(z):
    z = np.clip(z, 1e-6, 1 - 1e-6)
    return np.log(z) - np.log1p(-z)


def _loss(s, y):
    """Mean log loss ``softplus(s) - y s`` written out in NumPy (independent of core.loss)."""
    return np.mean(np.logaddexp(0.0, s) - y * s)


@pytest.fixture(scope="module")
def noisy():
    sim = simulate_annotations(3000, fpr=[0.1, 0.25, 0.15], tpr=[0.85, 0.8, 0.7], curve="overconfident",
                               missing=0.3, seed=8)
    return sim, corrected_item_labels(sim.data, sim.channel).values


def test_corrected_item_labels_match_the_formula_with_per_item_renormalisation(noisy):
    sim, _ = noisy
    w = np.array([0.2, 0.5, 0.3])
    got = corrected_item_labels(sim.data, sim.channel, weights=w)
    lab = sim.data.labels
    obs = lab >= 0
    W = np.where(obs, w, 0.0)
    W /= W.sum(axis=1, keepdims=True)
    direct = (W * np.where(obs, (lab - sim.channel.fpr) / sim.channel.gap, 0.0)).sum(axis=1)
    np.testing.assert_allclose(got.values, direct, rtol=1e-12)
    assert got.weights_rule == "explicit" and (got.values < 0).any() and (got.values > 1).any()
    # The identity channel with equal weights gives back the vote fraction.
    ident = corrected_item_labels(sim.data, Channel.identity(3), weights="equal")
    np.testing.assert_allclose(ident.values, sim.data.vote_fraction(), rtol=1e-12)


def test_temperature_minimises_the_loss_against_an_independent_optimiser(noisy):
    sim, y = noisy
    z = sim.data.scores
    fit = fit_temperature(z, y)
    s = _logit(z)
    ref = optimize.minimize_scalar(lambda t: _loss(s / t, y), bounds=(0.05, 20), method="bounded",
                                   options={"xatol": 1e-10})
    assert fit.temperature == pytest.approx(ref.x, rel=1e-6)
    assert fit.loss == pytest.approx(_loss(s / fit.temperature, y), rel=1e-12)
    assert not fit.on_boundary and fit.n_items == 3000


def test_platt_minimises_the_loss_against_an_independent_optimiser(noisy):
    sim, y = noisy
    z = sim.data.scores
    fit = fit_platt(z, y)
    s = _logit(z)
    ref = optimize.minimize(lambda p: _loss(p[0] * s + p[1], y), [1.0, 0.0], method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 5000})
    np.testing.assert_allclose([fit.alpha, fit.beta], ref.x, atol=1e-5)
    assert fit.converged and not fit.on_boundary and fit.boundary_params == ()
    np.testing.assert_allclose(predict_platt(z, fit.alpha, fit.beta), 1 / (1 + np.exp(-(fit.alpha * s + fit.beta))),
                               rtol=1e-12)


def test_unbounded_corrected_loss_ends_on_the_boundary_with_a_warning():
    z = np.linspace(0.02, 0.98, 50)
    s = _logit(z)
    # Targets outside [0, 1] on the "right" side of each logit: the loss falls without bound as 1/T grows.
    y = np.where(s > 0, 2.0, -1.0)
    with pytest.warns(BoundaryWarning, match=r"boundary T = 0.05"):
        fit = fit_temperature(z, y)
    assert fit.on_boundary and fit.temperature == pytest.approx(0.05)
    # Constant targets 1/2: the best temperature is infinite, so T_max.
    with pytest.warns(BoundaryWarning, match=r"boundary T = 20"):
        fit = fit_temperature(z, np.full(50, 0.5))
    assert fit.on_boundary and fit.temperature == pytest.approx(20.0)
    with pytest.warns(BoundaryWarning, match=r"\['alpha'\]"):
        pf = fit_platt(z, np.full(50, 0.5))
    assert pf.boundary_params == ("alpha",) and pf.alpha == pytest.approx(0.01) and abs(pf.beta) < 1e-6
    with pytest.warns(BoundaryWarning, match="alpha"):
        pf = fit_platt(z, y, alpha_bounds=(0.1, 3.0))
    assert pf.on_boundary and pf.alpha == pytest.approx(3.0)


def test_interior_fits_do_not_warn(noisy):
    sim, y = noisy
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_temperature(sim.data.scores, y)
        fit_platt(sim.data.scores, y)


def test_projected_histogram_is_the_clipped_corrected_bin_mean(noisy):
    sim, y = noisy
    z = sim.data.scores
    binning = Binning.equal_mass(12)
    fit = fit_projected_histogram(z, y, bins=binning)
    edges = binning.edges_for(z)
    b = np.searchsorted(edges[1:-1], z, side="right")
    means = np.array([y[b == k].mean() for k in range(12)])
    np.testing.assert_allclose(fit.raw_means, means, rtol=1e-12)
    np.testing.assert_allclose(fit.bin_values, np.clip(means, 0, 1), rtol=1e-12)
    pred = predict_histogram(z, fit.edges, fit.bin_values)
    assert pred.min() >= 0 and pred.max() <= 1
    np.testing.assert_allclose(pred, np.clip(means, 0, 1)[b])


def test_projected_histogram_clips_and_handles_empty_bins():
    z = np.array([0.05, 0.1, 0.15, 0.85, 0.9])
    y = np.array([-0.5, -0.2, 0.1, 1.4, 1.2])
    with pytest.warns(DataWarning, match=r"fitting bins \[1, 2\] are empty"):
        fit = fit_projected_histogram(z, y, bins=4)
    # Bin 0: mean -0.2 -> 0; bins 1, 2 empty -> midpoints 0.375, 0.625; bin 3: mean 1.3 -> 1.
    np.testing.assert_allclose(fit.bin_values, [0.0, 0.375, 0.625, 1.0])
    assert fit.empty_bins == (1, 2) and fit.clipped_bins == (0, 3)
    assert np.isnan(fit.raw_means[1])


def test_predict_temperature_matches_the_formula():
    z = np.array([0.0, 0.2, 0.5, 0.9, 1.0])
    np.testing.assert_allclose(predict_temperature(z, 2.0), 1 / (1 + np.exp(-_logit(z) / 2)), rtol=1e-12)


def test_item_weights_equal_repeated_items(noisy):
    sim, y = noisy
    z = sim.data.scores[:200]
    reps = np.arange(200) % 3 + 1
    a = fit_temperature(z, y[:200], item_weights=reps)
    b = fit_temperature(np.repeat(z, reps), np.repeat(y[:200], reps))
    assert a.temperature == pytest.approx(b.temperature, rel=1e-9)


def test_bad_inputs_raise_clear_errors(noisy):
    sim, y = noisy
    z = sim.data.scores
    with pytest.raises(ValueError, match="same length"):
        fit_temperature(z, y[:-1])
    with pytest.raises(ValueError, match=r"`targets` must be finite; got NaN or inf at items \[3\]"):
        fit_platt(z[:5], [0, 1, 0, np.nan, 1])
    with pytest.raises(ValueError, match="`scores` must lie in"):
        fit_temperature([0.2, 1.3], [0, 1])
    with pytest.raises(ValueError, match=r"`bounds` must be finite with 0 < low < high; got \(0.0, 5.0\)"):
        fit_temperature(z, y, bounds=(0, 5))
    with pytest.raises(ValueError, match="`bounds` must be a pair"):
        fit_temperature(z, y, bounds=3)
    with pytest.raises(ValueError, match="`beta_bounds` must be finite with low < high"):
        fit_platt(z, y, beta_bounds=(1, -1))
    with pytest.raises(ValueError, match="every score is 0.5"):
        fit_temperature([0.5, 0.5], [0, 1])
    with pytest.raises(ValueError, match="`item_weights` must be finite, non-negative"):
        fit_projected_histogram(z, y, item_weights=-np.ones_like(z))
    with pytest.raises(ValueError, match="has 2 annotators but the data has 3"):
        corrected_item_labels(sim.data, Channel([0.1, 0.1], [0.9, 0.9]))
    with pytest.raises(ValueError, match="must be an AnnotationSet"):
        corrected_item_labels(sim.data.labels, sim.channel)
    with pytest.raises(ValueError, match="explicit `weights` must have shape"):
        corrected_item_labels(sim.data, sim.channel, weights=[1.0, 2.0])


def test_inputs_are_not_modified():
    data = AnnotationSet.from_wide(np.array([[1, 0], [0, -1], [1, 1]]), [0.2, 0.5, 0.9])
    z = np.array([0.2, 0.5, 0.9])
    y = np.array([0.3, -0.1, 1.2])
    zc, yc = z.copy(), y.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BoundaryWarning)  # three items: the fits end on the box
        fit_temperature(z, y)
        fit_platt(z, y)
    fit_projected_histogram(z, y, bins=2)
    corrected_item_labels(data, Channel([0.1, 0.2], [0.8, 0.9]))
    np.testing.assert_array_equal(z, zc)
    np.testing.assert_array_equal(y, yc)


def test_corrected_item_labels_take_repeated_labels_as_responses_with_their_annotators_channel():
    """A label given twice equals the same label from a twin annotator with the same channel (and weight rule)."""
    import pandas as pd

    rng = np.random.default_rng(3)
    n = 90
    y = rng.random(n) < 0.4
    fpr, tpr = np.array([0.1, 0.2, 0.15]), np.array([0.9, 0.8, 0.7])
    lab = (rng.random((n, 3)) < np.where(y[:, None], tpr, fpr)).astype(int)
    rows = [(i, j, lab[i, j]) for i in range(n) for j in range(3)]
    extra = [(i, 0, int(rng.random() < (tpr[0] if y[i] else fpr[0]))) for i in range(0, n, 3)]
    long = pd.DataFrame(rows + extra, columns=["item", "annotator", "label"])
    data = AnnotationSet.from_long(long)
    twin = AnnotationSet.from_long(long.assign(annotator=[r[1] for r in rows] + ["0b"] * len(extra)))
    assert data.has_repeats and list(twin.annotator_ids) == [0, 1, 2, "0b"]
    for rule in ("iv", "equal", "gap"):
        got = corrected_item_labels(data, Channel(fpr, tpr), weights=rule)
        want = corrected_item_labels(twin, Channel(np.r_[fpr, fpr[0]], np.r_[tpr, tpr[0]]), weights=rule)
        np.testing.assert_allclose(got.values, want.values, rtol=1e-12)
        np.testing.assert_allclose(got.weights, np.r_[want.weights[0] + want.weights[3], want.weights[1:3]],
                                   rtol=1e-12)
