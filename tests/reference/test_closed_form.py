"""Tests for noisycal_bayes/reference/closed_form.py (two annotators, two score groups; paper §4.2, §D.2)."""
import numpy as np
import pytest

from noisycal_bayes.data import AnnotationSet, Binning
from noisycal_bayes.reference.channels import ChannelEstimate
from noisycal_bayes.reference.closed_form import closed_form_two_groups, two_group_from_moments
from noisycal_bayes.simulate import simulate_annotations

from ._channel_helpers import population_data, population_moments

# (fpr, tpr, prevalence per group): ordinary, a perfect annotator on the boundary, a weak annotator,
# prevalences close together, extreme prevalences. Each is used in both prevalence orders.
SETTINGS = [
    ([0.1, 0.2], [0.9, 0.7], [0.3, 0.6]),
    ([0.0, 0.25], [1.0, 0.8], [0.2, 0.9]),
    ([0.3, 0.05], [0.5, 0.95], [0.1, 0.4]),
    ([0.15, 0.35], [0.85, 0.6], [0.45, 0.55]),
    ([0.02, 0.4], [0.6, 0.99], [0.01, 0.97]),
]


@pytest.mark.parametrize("order", ["increasing", "decreasing"])
@pytest.mark.parametrize("fpr, tpr, prev", SETTINGS)
def test_population_moments_give_exact_parameters(fpr, tpr, prev, order):
    # Reference values: the model's own parameters; moments from enumerating the joint pattern distribution.
    prev = np.array(prev) if order == "increasing" else np.array(prev)[::-1]
    means, cov, _ = population_moments(fpr, tpr, prev)
    est = two_group_from_moments(means, cov[0, 1])
    assert isinstance(est, ChannelEstimate) and est.identified and est.converged and est.reason == ""
    np.testing.assert_allclose(est.channel.fpr, fpr, atol=1e-10)
    np.testing.assert_allclose(est.channel.tpr, tpr, atol=1e-10)
    np.testing.assert_allclose(est.prevalence, prev, atol=1e-10)
    assert est.method == "closed_form_two_groups" and est.n_groups == 2 and est.prevalence.shape == (2,)


def test_random_population_settings_exact():
    # 200 random interior settings with well-separated prevalences (|pi_2 - pi_1| >= 0.1) and gaps >= 0.1;
    # the inverse is then well conditioned and must be exact to rounding.
    rng = np.random.default_rng(12)
    for _ in range(200):
        fpr = rng.uniform(0.0, 0.45, 2)
        tpr = fpr + rng.uniform(0.1, 1.0 - fpr)
        prev = rng.uniform(0.02, 0.98, 2)
        if abs(prev[1] - prev[0]) < 0.1:
            continue
        means, cov, _ = population_moments(fpr, tpr, prev)
        est = two_group_from_moments(means, cov[0, 1])
        assert est.identified, est.reason
        np.testing.assert_allclose(np.concatenate([est.channel.fpr, est.channel.tpr, est.prevalence]),
                                   np.concatenate([fpr, tpr, prev]), atol=1e-8)


@pytest.mark.parametrize("prev", [[0.3, 0.6], [0.6, 0.3]])
def test_data_with_population_frequencies_gives_exact_parameters(prev):
    # Items whose (group, pattern) counts equal the model's probabilities times 1000 exactly: the
    # empirical plug-in moments are the population moments, so the data-level estimator is exact too.
    data, groups = population_data([0.1, 0.2], [0.9, 0.7], prev, 1000)
    est = closed_form_two_groups(data, groups)
    np.testing.assert_allclose(est.channel.fpr, [0.1, 0.2], atol=1e-10)
    np.testing.assert_allclose(est.channel.tpr, [0.9, 0.7], atol=1e-10)
    np.testing.assert_allclose(est.prevalence, prev, atol=1e-10)
    np.testing.assert_array_equal(est.group_sizes, [1000, 1000])


def test_equal_prevalences_not_identified():
    means, cov, _ = population_moments([0.1, 0.2], [0.9, 0.7], [0.4, 0.4])
    est = two_group_from_moments(means, cov[0, 1])
    assert not est.identified and est.channel is None
    assert "pi_1 == pi_2" in est.reason
    with pytest.raises(ValueError, match="not identified.*pi_1 == pi_2"):
        est.require()


def test_opposite_mean_differences_not_identified():
    # Annotator 2 labels the opposite class (tpr < fpr): its mean moves the other way between groups.
    means, cov, _ = population_moments([0.1, 0.8], [0.9, 0.2], [0.3, 0.6])
    est = two_group_from_moments(means, cov[0, 1])
    assert not est.identified and "opposite signs" in est.reason


def test_inconsistent_moments_not_identified():
    # Covariances far too negative for any channel: 1 + k^2 + 2 (c1 + c2) / D < 0.
    m = np.array([[0.2, 0.5], [0.3, 0.6]])
    est = two_group_from_moments(m, np.array([-0.2, -0.2]))
    assert not est.identified and "admit no solution" in est.reason


def test_solution_outside_unit_interval_not_identified():
    # Valid moments of the *algebra* but with a negative fpr: scale the means' offset below zero.
    means, cov, _ = population_moments([0.1, 0.2], [0.9, 0.7], [0.3, 0.6])
    est = two_group_from_moments(means - 0.2, cov[0, 1])
    assert not est.identified and "outside the model" in est.reason and "fpr outside [0, 1]" in est.reason
    assert est.prevalence.shape == (2,)


def test_nonfinite_moments_not_identified():
    est = two_group_from_moments(np.array([[0.2, np.nan], [0.3, 0.6]]), np.array([0.01, 0.02]))
    assert not est.identified and "non-finite" in est.reason


def test_moment_shapes_validated():
    with pytest.raises(ValueError, match=r"`m` must have shape \(2, 2\)"):
        two_group_from_moments(np.zeros(4), np.zeros(2))


def test_sample_estimate_close_to_truth_and_binning_equivalent():
    sim = simulate_annotations(4000, fpr=[0.1, 0.2], tpr=[0.9, 0.7], seed=3)
    by_int = closed_form_two_groups(sim.data, Binning.equal_mass(2))
    by_binning = closed_form_two_groups(sim.data, Binning.equal_mass(2))
    groups = Binning.equal_mass(2).assign(sim.data.scores)
    by_array = closed_form_two_groups(sim.data, groups)
    for other in (by_binning, by_array):
        np.testing.assert_array_equal(other.channel.fpr, by_int.channel.fpr)
        np.testing.assert_array_equal(other.prevalence, by_int.prevalence)
    assert by_int.identified
    # Sanity bound only (the precise sampling checks are in test_em / tests/statistical): se of each rate is
    # about 0.03 here, and 0.15 is 5 se.
    np.testing.assert_allclose(by_int.channel.tpr, [0.9, 0.7], atol=0.15)


def test_flipping_labels_gives_flipped_channel():
    sim = simulate_annotations(3000, fpr=[0.1, 0.2], tpr=[0.9, 0.7], seed=4)
    est = closed_form_two_groups(sim.data, Binning.equal_mass(2))
    flipped_data = AnnotationSet.from_wide(1 - sim.data.labels, sim.data.scores)
    est_f = closed_form_two_groups(flipped_data, Binning.equal_mass(2))
    expected = est.channel.flipped()
    np.testing.assert_allclose(est_f.channel.fpr, expected.fpr, atol=1e-12)
    np.testing.assert_allclose(est_f.channel.tpr, expected.tpr, atol=1e-12)
    np.testing.assert_allclose(est_f.prevalence, 1 - est.prevalence, atol=1e-12)


def test_permuting_items_and_annotators_changes_nothing():
    sim = simulate_annotations(3000, fpr=[0.1, 0.2], tpr=[0.9, 0.7], missing=0.1, seed=5)
    est = closed_form_two_groups(sim.data, Binning.equal_mass(2))
    perm = np.random.default_rng(0).permutation(sim.data.n_items)
    est_items = closed_form_two_groups(sim.data.subset(perm), Binning.equal_mass(2))
    np.testing.assert_allclose(est_items.channel.fpr, est.channel.fpr, atol=1e-12)
    np.testing.assert_allclose(est_items.prevalence, est.prevalence, atol=1e-12)
    swapped = AnnotationSet.from_wide(sim.data.labels[:, ::-1], sim.data.scores)
    est_ann = closed_form_two_groups(swapped, Binning.equal_mass(2))
    np.testing.assert_allclose(est_ann.channel.fpr, est.channel.fpr[::-1], atol=1e-12)
    np.testing.assert_allclose(est_ann.channel.tpr, est.channel.tpr[::-1], atol=1e-12)
    np.testing.assert_allclose(est_ann.prevalence, est.prevalence, atol=1e-12)


def test_missing_responses_use_items_both_labelled():
    sim = simulate_annotations(2000, fpr=[0.1, 0.2], tpr=[0.9, 0.7], missing=0.3, seed=6)
    est = closed_form_two_groups(sim.data, Binning.equal_mass(2))
    both = (sim.data.labels >= 0).all(axis=1)
    groups = Binning.equal_mass(2).assign(sim.data.scores)
    est_complete = closed_form_two_groups(sim.data.subset(both), groups[both])
    np.testing.assert_allclose(est.channel.fpr, est_complete.channel.fpr, atol=1e-12)
    assert est.group_sizes.sum() == both.sum()


def test_annotator_pair_selection():
    sim = simulate_annotations(3000, fpr=[0.1, 0.3, 0.2], tpr=[0.9, 0.6, 0.7], seed=7)
    est = closed_form_two_groups(sim.data, Binning.equal_mass(2), annotators=(2, 0))
    two = AnnotationSet.from_wide(sim.data.labels[:, [2, 0]], sim.data.scores)
    ref = closed_form_two_groups(two, Binning.equal_mass(2))
    np.testing.assert_allclose(est.channel.fpr, ref.channel.fpr, atol=1e-12)
    assert est.channel.annotator_ids == (2, 0)


def test_errors():
    sim = simulate_annotations(200, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.7, 0.8], seed=8)
    with pytest.raises(ValueError, match="must be an AnnotationSet"):
        closed_form_two_groups(sim.data.labels, Binning.equal_mass(2))
    one = AnnotationSet.from_wide(sim.data.labels[:, :1], sim.data.scores, annotators=["alice"])
    with pytest.raises(ValueError, match=r"single annotator \(\['alice'\]\)"):
        closed_form_two_groups(one, Binning.equal_mass(2))
    with pytest.raises(ValueError, match="has 3 annotators; pass `annotators"):
        closed_form_two_groups(sim.data, Binning.equal_mass(2))
    with pytest.raises(ValueError, match="two distinct column positions"):
        closed_form_two_groups(sim.data, Binning.equal_mass(2), annotators=(1, 1))
    with pytest.raises(ValueError, match="two distinct column positions"):
        closed_form_two_groups(sim.data, Binning.equal_mass(2), annotators=(0, 5))
    with pytest.raises(ValueError, match="exactly 2 score groups; `groups` gave 3"):
        closed_form_two_groups(sim.data, Binning.equal_mass(3), annotators=(0, 1))
    no_scores = AnnotationSet.from_wide(sim.data.labels[:, :2])
    with pytest.raises(ValueError, match="need classifier scores"):
        closed_form_two_groups(no_scores, Binning.equal_mass(2))
    with pytest.raises(ValueError, match="need classifier scores"):
        closed_form_two_groups(no_scores, Binning.equal_width(2))


def test_group_with_too_few_items_not_identified():
    labels = np.array([[1, 1], [0, 0], [1, 0], [0, 1], [1, 1]])
    est = closed_form_two_groups(AnnotationSet.from_wide(labels), np.array([0, 0, 0, 0, 1]))
    assert not est.identified and "fewer than 2 items" in est.reason
    np.testing.assert_array_equal(est.group_sizes, [4, 1])
