"""Tests for noisycal_bayes/labels/accuracy.py: noise-corrected accuracy of a thresholded classifier."""
import dataclasses
import warnings

import numpy as np
import pytest

from noisycal_bayes import AnnotationSet, simulate_annotations
from noisycal_bayes.data import Binning, bin_index
from noisycal_bayes.inference import GroupAssignment, fit_em
from noisycal_bayes.labels import corrected_accuracy
from noisycal_bayes.labels.accuracy import threshold_bins
from noisycal_bayes.warnings import DataWarning

from ._helpers import bayes_positive, iv_corrected_labels, with_draws, with_point

FPR, TPR = np.array([0.1, 0.2, 0.15]), np.array([0.8, 0.9, 0.85])


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(800, fpr=FPR, tpr=TPR, score_beta=(0.6, 0.6), missing=0.15, seed=21)


@pytest.fixture(scope="module")
def fit(sim):
    """Groups with 0.5 as an edge, so 1[z >= 0.5] is a function of the groups."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_em(sim.data, model="histogram", groups=threshold_bins(sim.data.scores, [0.5], 800), n_starts=3)


def test_point_estimate_is_the_mean_posterior_probability_of_being_right(sim, fit):
    prev = np.linspace(0.05, 0.95, fit.groups.n_groups)
    known = with_point(fit, fpr=FPR, tpr=TPR, prevalence=prev)
    res = corrected_accuracy(sim.data, known, threshold=0.5, n_replicates=200)
    p = bayes_positive(sim.data.labels, FPR, TPR, prev[np.asarray(fit.groups.index)])
    yhat = sim.data.scores >= 0.5
    expected = np.mean(np.where(yhat, p, 1 - p))
    assert res.accuracy == pytest.approx(expected, rel=1e-10)
    assert res.error_rate == pytest.approx(1 - expected, rel=1e-10)
    np.testing.assert_allclose(res.p_correct, np.where(yhat, p, 1 - p), rtol=1e-10)
    # The corrected-label estimate, by the formula item by item (IV weights, DESIGN §3).
    yt = iv_corrected_labels(sim.data.labels, FPR, TPR)
    assert res.corrected_label_accuracy == pytest.approx(np.mean(np.where(yhat, yt, 1 - yt)), rel=1e-9)
    assert res.conditioned and res.method == "em"
    assert res.parameter_uncertainty == "weighted-likelihood bootstrap (EM refits)" and res.failed_refits == 0
    assert res.lower <= res.accuracy <= res.upper


def test_naive_accuracies_by_hand(fit):
    # Votes (ties -> 1): [1, 0, 1 (tie), 0]; predictions 1[z >= .5] = [1, 0, 0, 1] -> majority accuracy 2/4.
    # Annotator 0 labels [1, 0, 1, 0]: 2/4 agree; annotator 1 labels [1, 0, 0, -]: 3/3 agree. Mean 3/4.
    labels = np.array([[1, 1], [0, 0], [1, 0], [0, -1]])
    data = AnnotationSet.from_wide(np.tile(labels, (25, 1)), np.tile([0.9, 0.1, 0.3, 0.6], 25))
    marginal = dataclasses.replace(
        with_point(fit, fpr=[0.1, 0.1], tpr=[0.9, 0.9], prevalence=0.5, model="dawid_skene",
                   groups=GroupAssignment(np.zeros(100, dtype=np.int32), 1, None)), annotator_ids=(0, 1))
    with pytest.warns(DataWarning):   # one prevalence for all items: the predictions are not a function of it
        res = corrected_accuracy(data, marginal, n_replicates=50)
    assert res.majority_accuracy == pytest.approx(0.5)
    assert res.annotator_accuracy == pytest.approx(0.75)


def test_near_perfect_annotators_give_the_accuracy_against_their_labels(sim, fit):
    # Unanimous, nearly error-free labels: the clean label is known, both estimates equal plain accuracy.
    y = sim.clean_labels
    data = AnnotationSet.from_wide(np.repeat(y[:, None], 3, axis=1), sim.data.scores)
    # New labels for the same items: the fit must carry score edges to place them (0.5 is one of them).
    edges = np.unique(np.r_[Binning.equal_mass(8).edges_for(sim.data.scores), 0.5])
    idx = bin_index(sim.data.scores, edges)
    groups = GroupAssignment(idx, edges.size - 1, "bin", edges, np.arange(edges.size - 1, dtype=np.int32))
    perfect = with_point(fit, fpr=[1e-9] * 3, tpr=[1 - 1e-9] * 3, prevalence=np.full(edges.size - 1, 0.5),
                         groups=groups)
    res = corrected_accuracy(data, perfect, n_replicates=100)
    truth = np.mean((sim.data.scores >= 0.5) == y)
    assert res.accuracy == pytest.approx(truth, abs=1e-9)
    assert res.corrected_label_accuracy == pytest.approx(truth, abs=1e-8)
    assert res.lower == pytest.approx(truth, abs=0.05) and res.majority_accuracy == pytest.approx(truth)


def test_draws_widen_the_interval_and_are_averaged(sim, fit):
    rng = np.random.default_rng(4)
    g = fit.groups.n_groups
    prev = np.clip(np.linspace(0.05, 0.95, g) + rng.normal(0, 0.08, (2, 25, g)), 0.01, 0.99)
    fpr = np.clip(FPR + rng.normal(0, 0.03, (2, 25, 3)), 0.01, 0.4)
    tpr = np.clip(TPR + rng.normal(0, 0.03, (2, 25, 3)), 0.6, 0.99)
    drawn = with_draws(fit, {"fpr": fpr, "tpr": tpr, "prevalence": prev})
    res = corrected_accuracy(sim.data, drawn, n_replicates=400, bootstrap=False)
    gi = np.asarray(fit.groups.index)
    yhat = sim.data.scores >= 0.5
    per_draw = [np.mean(np.where(yhat, p, 1 - p)) for p in
                (bayes_positive(sim.data.labels, fpr[c, d], tpr[c, d], prev[c, d][gi])
                 for c in range(2) for d in range(25))]
    assert res.accuracy == pytest.approx(np.mean(per_draw), rel=1e-10)
    assert res.parameter_uncertainty == "posterior draws" and "sample accuracy" in res.target
    # One draw: only the latent labels vary, so the interval is narrower.
    one = with_draws(fit, {"fpr": fpr[:1, :1], "tpr": tpr[:1, :1], "prevalence": prev[:1, :1]})
    single = corrected_accuracy(sim.data, one, n_replicates=400, bootstrap=False)
    assert (res.upper - res.lower) > (single.upper - single.lower)


def test_predictions_not_measurable_by_the_fit_warn(sim, fit):
    # The fixture's bins have 0.5 as an edge but not 0.3: 1[z >= 0.3] changes inside a bin.
    with pytest.warns(DataWarning, match="not a function of what this 'histogram' fit conditions"):
        res = corrected_accuracy(sim.data, fit, threshold=0.3, n_replicates=50)
    assert not res.conditioned
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        warnings.simplefilter("ignore", UserWarning)
        res = corrected_accuracy(sim.data, threshold=0.3, n_replicates=50)      # default fit: 0.3 is an edge
    assert res.conditioned and res.model == "histogram"
    assert res.to_frame().shape == (1, 17)


def test_bad_inputs(sim, fit):
    with pytest.raises(ValueError, match="`scores` must have shape \\(800,\\)"):
        corrected_accuracy(sim.data, fit, scores=np.full(5, 0.5))
    with pytest.raises(ValueError, match="`scores` must lie in \\[0, 1\\]"):
        corrected_accuracy(sim.data, fit, scores=np.full(800, 2.0))
    with pytest.raises(ValueError, match="`threshold` must lie in \\[0, 1\\]; got 1.5"):
        corrected_accuracy(sim.data, fit, threshold=1.5)
    with pytest.raises(ValueError, match="`threshold` must be a number"):
        corrected_accuracy(sim.data, fit, threshold="half")
    with pytest.raises(ValueError, match="`n_replicates` must be an integer >= 1"):
        corrected_accuracy(sim.data, fit, n_replicates=0)
    with pytest.raises(ValueError, match="`weights` must be one of"):
        corrected_accuracy(sim.data, fit, weights="best")
    with pytest.raises(ValueError, match="explicit `weights` must be finite, non-negative and not all zero; got \\[1.0, -1.0, 1.0\\]"):
        corrected_accuracy(sim.data, fit, weights=[1, -1, 1])
    with pytest.raises(ValueError, match="`level` must lie strictly between 0 and 1"):
        corrected_accuracy(sim.data, fit, level=0)
    with pytest.raises(ValueError, match="needs classifier scores"):
        corrected_accuracy(AnnotationSet.from_wide(sim.data.labels), fit)
    with pytest.raises(ValueError, match="`fit` must be a FitResult"):
        corrected_accuracy(sim.data, "em")
