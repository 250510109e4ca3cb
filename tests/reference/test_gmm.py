"""Tests for noisycal_bayes/reference/gmm.py (constrained GMM over score groups; paper §4.2, §D.4)."""
import numpy as np
import pytest
from scipy.optimize import approx_fprime

from noisycal_bayes.data import AnnotationSet, Binning
from noisycal_bayes.reference.closed_form import closed_form_two_groups
from noisycal_bayes.reference.gmm import fit_gmm, gmm_objective
from noisycal_bayes.simulate import simulate_annotations
from noisycal_bayes.warnings import ConvergenceWarning, IdentifiabilityWarning, SmallGapWarning

from ._channel_helpers import population_data, population_moments


def test_gradient_matches_finite_differences():
    # Independent route: central finite differences of the objective (step 1e-7, error O(1e-12)).
    rng = np.random.default_rng(0)
    J, G = 4, 3
    means = rng.uniform(0.1, 0.9, (J, G))
    cov = rng.uniform(-0.02, 0.08, (J, J, G))
    cov = (cov + cov.transpose(1, 0, 2)) / 2
    mask_mean = (rng.random((J, G)) < 0.9).astype(float)
    mask_cov = (rng.random((J, J, G)) < 0.8).astype(float)
    mask_cov = mask_cov * mask_cov.transpose(1, 0, 2) * (1 - np.eye(J))[:, :, None]
    weights = np.array([0.2, 0.5, 0.3])
    for _ in range(5):
        x = rng.uniform(0.05, 0.95, 2 * J + G)
        args = (means, cov, mask_mean, mask_cov, weights)
        _, grad = gmm_objective(x, *args)
        f = lambda y: gmm_objective(y, *args)[0]  # noqa: E731
        fd = np.array([(f(x + 1e-7 * e) - f(x - 1e-7 * e)) / 2e-7 for e in np.eye(x.size)])
        np.testing.assert_allclose(grad, fd, atol=1e-8)
        np.testing.assert_allclose(grad, approx_fprime(x, f, 1e-8), atol=1e-5)


def test_objective_is_zero_at_the_truth_of_population_moments():
    fpr, tpr, prev = np.array([0.1, 0.2, 0.3]), np.array([0.9, 0.7, 0.8]), np.array([0.2, 0.5, 0.7])
    means, cov, _ = population_moments(fpr, tpr, prev)
    ones = np.ones_like(means)
    mask_cov = np.ones_like(cov) * (1 - np.eye(3))[:, :, None]
    x = np.concatenate([fpr, (tpr - fpr) / (1 - fpr), prev])
    q, grad = gmm_objective(x, means, cov, ones, mask_cov, np.full(3, 1 / 3))
    assert q < 1e-30 and np.max(np.abs(grad)) < 1e-15
    q_off, _ = gmm_objective(x + 0.01, means, cov, ones, mask_cov, np.full(3, 1 / 3))
    assert q_off > 1e-6


@pytest.mark.parametrize("fpr, tpr, prev", [
    ([0.1, 0.2], [0.9, 0.7], [0.3, 0.6]),
    ([0.1, 0.2], [0.9, 0.7], [0.6, 0.3]),  # the other prevalence order
    ([0.1, 0.2, 0.3], [0.9, 0.7, 0.8], [0.2, 0.5, 0.7]),
    ([0.1, 0.2, 0.3], [0.9, 0.7, 0.8], [0.7, 0.5, 0.2]),
])
def test_population_frequencies_give_exact_parameters_and_zero_gap(fpr, tpr, prev):
    # Data whose (group, pattern) frequencies equal the model's exactly: the moments are the population
    # moments, the truth is a global minimum with objective 0, and (identified) the only one.
    data, groups = population_data(fpr, tpr, prev, 10 ** (len(fpr) + 1))
    est = fit_gmm(data, groups, n_starts=4)
    assert est.identified and est.converged and est.method == "gmm"
    assert est.optimisation_gap < 1e-18
    np.testing.assert_allclose(est.channel.fpr, fpr, atol=1e-7)
    np.testing.assert_allclose(est.channel.tpr, tpr, atol=1e-7)
    np.testing.assert_allclose(est.prevalence, prev, atol=1e-7)
    assert np.isfinite(est.loglik) and est.start_logliks.shape == (5,)


def test_exactly_identified_sample_equals_closed_form():
    # Two annotators x two groups: 6 moments, 6 parameters. When the closed form is feasible it makes
    # every moment residual zero, so the GMM minimum is 0 and attained at the closed form.
    sim = simulate_annotations(3000, fpr=[0.15, 0.25], tpr=[0.85, 0.75], seed=1)
    cf = closed_form_two_groups(sim.data, Binning.equal_mass(2))
    est = fit_gmm(sim.data, Binning.equal_mass(2), n_starts=3)
    assert cf.identified and est.optimisation_gap < 1e-18
    np.testing.assert_allclose(est.channel.fpr, cf.channel.fpr, atol=1e-7)
    np.testing.assert_allclose(est.channel.tpr, cf.channel.tpr, atol=1e-7)
    np.testing.assert_allclose(est.prevalence, cf.prevalence, atol=1e-7)
    assert est.details["analytic_start_index"] == 3


def test_overidentified_sample_has_positive_gap_and_is_close():
    sim = simulate_annotations(4000, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.7], missing=0.1, seed=2)
    est = fit_gmm(sim.data, Binning.equal_width(4), n_starts=3)
    assert est.identified and 0 < est.optimisation_gap < 1e-3
    # Sanity bound only: sampling se of each rate is about 0.02 here; 0.1 is 5 se.
    np.testing.assert_allclose(est.channel.tpr, [0.9, 0.8, 0.7], atol=0.1)


def test_flipping_labels_gives_flipped_channel():
    sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.7], seed=3)
    est = fit_gmm(sim.data, Binning.equal_mass(3), n_starts=3)
    est_f = fit_gmm(AnnotationSet.from_wide(1 - sim.data.labels, sim.data.scores), Binning.equal_mass(3), n_starts=3)
    expected = est.channel.flipped()
    # The objective is exactly invariant under the flip (means -> 1 - means, covariances unchanged); the
    # optimiser's stopping point agrees to its tolerance.
    np.testing.assert_allclose(est_f.channel.fpr, expected.fpr, atol=1e-5)
    np.testing.assert_allclose(est_f.channel.tpr, expected.tpr, atol=1e-5)
    np.testing.assert_allclose(est_f.prevalence, 1 - est.prevalence, atol=1e-5)
    np.testing.assert_allclose(est_f.optimisation_gap, est.optimisation_gap, rtol=1e-4, atol=1e-14)


def test_permutations_change_nothing():
    sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.7], missing=0.1, seed=4)
    groups = Binning.equal_mass(3).assign(sim.data.scores)
    est = fit_gmm(sim.data, groups, n_starts=3)
    perm = np.random.default_rng(0).permutation(3000)
    est_i = fit_gmm(sim.data.subset(perm), groups[perm], n_starts=3)
    np.testing.assert_allclose(est_i.channel.fpr, est.channel.fpr, atol=1e-10)
    cols = np.array([1, 2, 0])
    est_a = fit_gmm(AnnotationSet.from_wide(sim.data.labels[:, cols], sim.data.scores), groups, n_starts=3)
    np.testing.assert_allclose(est_a.channel.fpr, est.channel.fpr[cols], atol=1e-5)
    np.testing.assert_allclose(est_a.prevalence, est.prevalence, atol=1e-5)


def test_single_group_not_identified():
    sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.7], seed=5)
    with pytest.warns(IdentifiabilityWarning, match="single score group"):
        est = fit_gmm(sim.data, np.zeros(2000, dtype=int), n_starts=2)
    assert not est.identified and "single score group" in est.reason
    with pytest.raises(ValueError, match="not identified"):
        est.require()


def test_equal_group_prevalences_warn():
    sim = simulate_annotations(3000, fpr=[0.1, 0.2], tpr=[0.9, 0.7], seed=6)
    groups = np.random.default_rng(1).integers(0, 2, 3000)  # independent of Y: equal prevalences
    with pytest.warns(IdentifiabilityWarning):
        fit_gmm(sim.data, groups, n_starts=4)


def test_small_gap_warning():
    sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.7], seed=7)
    coin = (np.random.default_rng(2).random(3000) < 0.4).astype(int)
    data = AnnotationSet.from_wide(np.column_stack([sim.data.labels, coin]), sim.data.scores,
                                   annotators=["a", "b", "c", "coin"])
    with pytest.warns(SmallGapWarning, match=r"\['coin'\]"):
        est = fit_gmm(data, Binning.equal_mass(3), n_starts=3)
    assert est.gap[3] <= 0.05 or est.channel is None


def test_convergence_warning():
    sim = simulate_annotations(1000, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.7], seed=8)
    with pytest.warns(ConvergenceWarning, match="did not report convergence"):
        est = fit_gmm(sim.data, Binning.equal_mass(3), n_starts=2, max_iter=1)
    assert not est.converged and len(est.failed_starts) >= 1


def test_errors():
    sim = simulate_annotations(200, fpr=[0.1, 0.2], tpr=[0.9, 0.8], seed=9)
    with pytest.raises(ValueError, match="needs score groups"):
        fit_gmm(sim.data, None)
    with pytest.raises(ValueError, match=r"single annotator \(\['x'\]\)"):
        fit_gmm(AnnotationSet.from_wide(sim.data.labels[:, :1], sim.data.scores, annotators=["x"]), 2)
    with pytest.raises(ValueError, match="must be an AnnotationSet"):
        fit_gmm(sim.data.labels, Binning.equal_mass(2))
    with pytest.raises(ValueError, match="need classifier scores"):
        fit_gmm(AnnotationSet.from_wide(sim.data.labels), 2)
    with pytest.raises(ValueError, match=r"`min_gap` must lie in \[0, 1\)"):
        fit_gmm(sim.data, Binning.equal_mass(2), min_gap=-0.1)
    with pytest.raises(ValueError, match="`n_starts` must be an integer >= 0"):
        fit_gmm(sim.data, Binning.equal_mass(2), n_starts=1.5)
