"""Tests for noisycal_bayes/reference/moments.py (three or more annotators, no scores; paper §4.3, §D.5)."""
import numpy as np
import pytest

from noisycal_bayes.data import AnnotationSet
from noisycal_bayes.reference.moments import moments_three, three_from_moments
from noisycal_bayes.simulate import simulate_annotations

from ._channel_helpers import population_data, population_moments

# (fpr, tpr, mu): mu below, at and above 1/2 (rho < 0, = 0, > 0 selects the root), a perfect annotator,
# a weak annotator.
SETTINGS = [
    ([0.1, 0.2, 0.05], [0.9, 0.7, 0.8], 0.3),
    ([0.1, 0.2, 0.05], [0.9, 0.7, 0.8], 0.7),
    ([0.1, 0.2, 0.05], [0.9, 0.7, 0.8], 0.5),
    ([0.0, 0.3, 0.1], [1.0, 0.6, 0.95], 0.15),
    ([0.4, 0.1, 0.2], [0.6, 0.9, 0.75], 0.9),
]


@pytest.mark.parametrize("fpr, tpr, mu", SETTINGS)
def test_population_moments_give_exact_parameters(fpr, tpr, mu):
    # Reference: the model's own parameters; moments from enumerating the 8 response patterns.
    means, cov, third = population_moments(fpr, tpr, [mu])
    est = three_from_moments(means[:, 0], cov[:, :, 0], third[0])
    assert est.identified and est.reason == "" and est.method == "moments_three"
    np.testing.assert_allclose(est.channel.fpr, fpr, atol=1e-10)
    np.testing.assert_allclose(est.channel.tpr, tpr, atol=1e-10)
    np.testing.assert_allclose(est.prevalence, [mu], atol=1e-10)


def test_random_population_settings_exact():
    # 200 random interior settings, gaps >= 0.1, mu in [0.05, 0.95]: exact to rounding.
    rng = np.random.default_rng(3)
    for _ in range(200):
        fpr = rng.uniform(0.0, 0.45, 3)
        tpr = fpr + rng.uniform(0.1, 1.0 - fpr)
        mu = rng.uniform(0.05, 0.95)
        means, cov, third = population_moments(fpr, tpr, [mu])
        est = three_from_moments(means[:, 0], cov[:, :, 0], third[0])
        assert est.identified, est.reason
        np.testing.assert_allclose(np.concatenate([est.channel.fpr, est.channel.tpr, est.prevalence]),
                                   np.concatenate([fpr, tpr, [mu]]), atol=1e-8)


def test_complement_solution_has_negative_gaps():
    # Orientation: (1 - mu, -gap, fpr + gap) reproduces the same moments; the estimator must return the
    # positively oriented one, never the complement.
    fpr, tpr, mu = np.array([0.1, 0.2, 0.05]), np.array([0.9, 0.7, 0.8]), 0.3
    m1, c1, t1 = population_moments(fpr, tpr, [mu])
    m2, c2, t2 = population_moments(tpr, fpr, [1 - mu])  # complement: swapped rates, 1 - mu
    np.testing.assert_allclose(m1, m2, atol=1e-15)
    np.testing.assert_allclose(c1, c2, atol=1e-15)
    np.testing.assert_allclose(t1, t2, atol=1e-15)
    est = three_from_moments(m2[:, 0], c2[:, :, 0], t2[0])
    np.testing.assert_allclose(est.prevalence, [mu], atol=1e-10)
    assert np.all(est.channel.gap > 0)


def test_data_with_population_frequencies_exact_and_four_annotators_combined():
    # Counts equal to probabilities x 10^5 exactly (rates in tenths): every triplet is exact, so the
    # median combination over triplets must be exact too.
    fpr, tpr = [0.1, 0.2, 0.3, 0.0], [0.9, 0.7, 0.8, 0.6]
    data, _ = population_data(fpr, tpr, [0.4], 10**5)
    est = moments_three(data)
    assert est.identified
    np.testing.assert_allclose(est.channel.fpr, fpr, atol=1e-9)
    np.testing.assert_allclose(est.channel.tpr, tpr, atol=1e-9)
    np.testing.assert_allclose(est.prevalence, [0.4], atol=1e-9)
    assert est.details["n_identified_triplets"] == 4 and est.details["combine"] == "median"


def test_four_annotators_use_median_over_triplets():
    # Independent check of the combination rule on a sample: recompute every triplet by hand.
    sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.1, 0.15], tpr=[0.9, 0.8, 0.7, 0.85], seed=11)
    est = moments_three(sim.data)
    per = {j: [] for j in range(4)}
    mus = []
    for trip in [(0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3)]:
        sub = moments_three(AnnotationSet.from_wide(sim.data.labels[:, list(trip)]))
        mus.append(sub.prevalence[0])
        for pos, j in enumerate(trip):
            per[j].append(sub.channel.fpr[pos])
    np.testing.assert_allclose(est.channel.fpr, [np.median(per[j]) for j in range(4)], atol=1e-12)
    np.testing.assert_allclose(est.prevalence, [np.median(mus)], atol=1e-12)


def test_uninformative_annotator_named_and_not_identified():
    # Annotator "noise" answers independently of Y (gap 0): every triplet containing it fails.
    rng = np.random.default_rng(0)
    sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=12)
    labels = np.column_stack([sim.data.labels, (rng.random(3000) < 0.5).astype(int),
                              # an adversarial copy: reversed orientation
                              (rng.random(3000) < np.where(sim.clean_labels == 1, 0.1, 0.9)).astype(int)])
    data = AnnotationSet.from_wide(labels, annotators=["a", "b", "c", "noise", "liar"])
    est = moments_three(data)
    assert not est.identified and est.channel is None
    assert "'noise'" in est.reason and "'liar'" in est.reason and "'a'" not in est.reason
    with pytest.raises(ValueError, match="not identified"):
        est.require()


def test_nonpositive_covariance_not_identified():
    means, cov, third = population_moments([0.1, 0.2, 0.3], [0.9, 0.7, 0.8], [0.4])
    cov = cov[:, :, 0].copy()
    cov[0, 2] = cov[2, 0] = -0.01
    est = three_from_moments(means[:, 0], cov, third[0])
    assert not est.identified and "C_13" in est.reason and "<= 0" in est.reason


def test_infeasible_solution_not_identified():
    means, cov, third = population_moments([0.1, 0.2, 0.05], [0.9, 0.7, 0.8], [0.3])
    est = three_from_moments(means[:, 0] + 0.3, cov[:, :, 0], third[0])  # pushes tpr above 1
    assert not est.identified and "tpr outside [0, 1]" in est.reason


def test_nonfinite_and_shape_errors():
    est = three_from_moments(np.array([0.2, np.nan, 0.3]), np.eye(3), 0.0)
    assert not est.identified and "non-finite" in est.reason
    with pytest.raises(ValueError, match=r"`means` must have shape \(3,\)"):
        three_from_moments(np.zeros(4), np.eye(3), 0.0)


def test_flipping_labels_gives_flipped_channel():
    sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=13)
    est = moments_three(sim.data)
    est_f = moments_three(AnnotationSet.from_wide(1 - sim.data.labels))
    expected = est.channel.flipped()
    np.testing.assert_allclose(est_f.channel.fpr, expected.fpr, atol=1e-12)
    np.testing.assert_allclose(est_f.channel.tpr, expected.tpr, atol=1e-12)
    np.testing.assert_allclose(est_f.prevalence, 1 - est.prevalence, atol=1e-12)


def test_permutations_change_nothing():
    sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.1, 0.2], tpr=[0.9, 0.8, 0.7, 0.9], missing=0.1, seed=14)
    est = moments_three(sim.data)
    perm_items = np.random.default_rng(1).permutation(2000)
    est_i = moments_three(sim.data.subset(perm_items))
    np.testing.assert_allclose(est_i.channel.tpr, est.channel.tpr, atol=1e-12)
    perm_ann = np.array([2, 0, 3, 1])
    est_a = moments_three(AnnotationSet.from_wide(sim.data.labels[:, perm_ann]))
    np.testing.assert_allclose(est_a.channel.tpr, est.channel.tpr[perm_ann], atol=1e-12)
    np.testing.assert_allclose(est_a.prevalence, est.prevalence, atol=1e-12)


def test_missing_responses_use_triple_complete_items():
    sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], missing=0.3, seed=15)
    complete = (sim.data.labels >= 0).all(axis=1)
    est = moments_three(sim.data)
    ref = moments_three(sim.data.subset(complete))
    np.testing.assert_allclose(est.channel.fpr, ref.channel.fpr, atol=1e-12)
    np.testing.assert_array_equal(est.group_sizes, [complete.sum()])


def test_triplets_with_too_few_items_skipped():
    # Annotator 3 labels only 5 items: its triplets fall under min_items and it is reported.
    sim = simulate_annotations(1000, fpr=[0.1, 0.2, 0.1, 0.1], tpr=[0.9, 0.8, 0.7, 0.9], seed=16)
    labels = sim.data.labels.copy()
    labels[5:, 3] = -1
    est = moments_three(AnnotationSet.from_wide(labels))
    assert not est.identified and "[3]" in est.reason
    assert any("min_items" in t["reason"] for t in est.details["triplets"])


def test_errors():
    sim = simulate_annotations(100, fpr=[0.1, 0.2], tpr=[0.9, 0.8], seed=17)
    with pytest.raises(ValueError, match="at least 3 annotators; the data has 2.*§D.1"):
        moments_three(sim.data)
    with pytest.raises(ValueError, match="single annotator"):
        moments_three(AnnotationSet.from_wide(sim.data.labels[:, :1]))
    with pytest.raises(ValueError, match="must be an AnnotationSet"):
        moments_three(sim.data.labels)
    with pytest.raises(ValueError, match="`min_items` must be an integer >= 3"):
        moments_three(simulate_annotations(50, fpr=[0.1] * 3, tpr=[0.9] * 3, seed=1).data, min_items=1)
