"""Tests for noisycal_bayes/simulate/annotations.py: simulated scores, clean labels and annotations."""
import numpy as np
import pytest
from scipy.stats import norm

from noisycal_bayes import AnnotationSet, Channel, simulate_annotations
from noisycal_bayes.simulate import CURVES

FPR, TPR = [0.1, 0.2, 0.05, 0.3], [0.9, 0.75, 0.6, 0.8]
# One false-alarm rate for every tolerance in this file: 1e-4 two-sided -> z = 3.89.
Z = norm.ppf(1 - 0.5e-4)


def test_shapes_and_types():
    sim = simulate_annotations(250, fpr=FPR, tpr=TPR, seed=0)
    assert isinstance(sim.data, AnnotationSet)
    assert sim.data.labels.shape == (250, 4)
    assert sim.data.scores.shape == sim.clean_labels.shape == sim.true_probability.shape == (250,)
    assert set(np.unique(sim.clean_labels)) <= {0, 1}
    assert set(np.unique(sim.data.labels)) <= {0, 1}  # missing=0: every response observed
    assert isinstance(sim.channel, Channel)
    np.testing.assert_allclose(sim.channel.fpr, FPR)
    np.testing.assert_allclose(sim.channel.tpr, TPR)
    np.testing.assert_allclose(sim.true_probability, sim.data.scores)  # "calibrated": m(z) = z


@pytest.mark.parametrize("missing", [0.2, 0.5, 0.8])
def test_missing_rate_and_every_item_keeps_a_label(missing):
    n, j = 3000, 4
    sim = simulate_annotations(n, fpr=FPR, tpr=TPR, missing=missing, seed=1)
    observed = sim.data.labels >= 0
    assert observed.any(axis=1).all()
    # Each response is dropped with probability p and restored only when all J were dropped and it is
    # the one chosen: P(missing) = p - p^J / J. Responses of different items are independent; within
    # an item they are dependent, so use the per-item count of missing responses (independent over
    # items) for the standard error.
    rate = missing - missing ** j / j
    per_item = (~observed).sum(axis=1)
    se = per_item.std(ddof=1) / np.sqrt(n) / j
    assert abs(per_item.mean() / j - rate) < Z * se
    # The naive scheme (always keep one random response) would give p (J - 1) / J: far outside.
    assert abs(missing * (j - 1) / j - rate) > 3 * Z * se


def test_channel_rates_are_respected():
    n = 20000
    sim = simulate_annotations(n, fpr=FPR, tpr=TPR, seed=2)
    y = sim.clean_labels
    for j in range(4):
        a = sim.data.labels[:, j]
        for clean, p in ((0, FPR[j]), (1, TPR[j])):
            sel = a[y == clean]
            se = np.sqrt(p * (1 - p) / sel.size)  # binomial standard error
            assert abs(sel.mean() - p) < Z * se


def test_clean_labels_follow_the_curve():
    n = 20000
    sim = simulate_annotations(n, fpr=FPR, tpr=TPR, curve="overconfident", seed=3)
    np.testing.assert_allclose(sim.true_probability, CURVES["overconfident"](sim.data.scores), rtol=1e-12)
    # Binned: mean of Y in a bin versus mean of m(Z), binomial se from m(Z).
    k = np.minimum((sim.data.scores * 5).astype(int), 4)
    for b in range(5):
        m = sim.true_probability[k == b]
        se = np.sqrt(np.sum(m * (1 - m))) / m.size
        assert abs(sim.clean_labels[k == b].mean() - m.mean()) < Z * se


def test_score_distribution():
    sim = simulate_annotations(5000, fpr=FPR, tpr=TPR, score_beta=(2.0, 5.0), seed=4)
    mean, var = 2 / 7, (2 * 5) / (7 ** 2 * 8)  # Beta(2, 5) moments
    assert abs(sim.data.scores.mean() - mean) < Z * np.sqrt(var / 5000)


def test_callable_curve_is_clipped():
    sim = simulate_annotations(100, fpr=FPR, tpr=TPR, curve=lambda z: 2 * z - 0.5, seed=5)
    assert sim.true_probability.min() >= 0 and sim.true_probability.max() <= 1


def test_seed_determinism():
    a = simulate_annotations(200, fpr=FPR, tpr=TPR, missing=0.3, seed=7)
    b = simulate_annotations(200, fpr=FPR, tpr=TPR, missing=0.3, seed=7)
    c = simulate_annotations(200, fpr=FPR, tpr=TPR, missing=0.3, seed=8)
    np.testing.assert_array_equal(a.data.labels, b.data.labels)
    np.testing.assert_array_equal(a.data.scores, b.data.scores)
    np.testing.assert_array_equal(a.clean_labels, b.clean_labels)
    assert not np.array_equal(a.data.labels, c.data.labels)
    # A Generator is accepted and advanced: two draws from one generator differ.
    rng = np.random.default_rng(9)
    first = simulate_annotations(50, fpr=FPR, tpr=TPR, seed=rng)
    second = simulate_annotations(50, fpr=FPR, tpr=TPR, seed=rng)
    assert not np.array_equal(first.data.scores, second.data.scores)


def test_global_numpy_random_state_untouched():
    np.random.seed(12345)
    before = np.random.get_state()
    simulate_annotations(300, fpr=FPR, tpr=TPR, missing=0.4, curve="nonlinear", seed=3)
    after = np.random.get_state()
    assert before[0] == after[0]
    np.testing.assert_array_equal(before[1], after[1])
    assert before[2:] == after[2:]


def test_bad_arguments():
    with pytest.raises(ValueError, match="tpr > fpr"):
        simulate_annotations(10, fpr=[0.5], tpr=[0.4])
    with pytest.raises(ValueError, match=r"`missing` must be a probability in \[0, 1\]; got 1.5"):
        simulate_annotations(10, fpr=FPR, tpr=TPR, missing=1.5)
    with pytest.raises(ValueError, match="`n_items` must be an integer >= 1; got 0"):
        simulate_annotations(0, fpr=FPR, tpr=TPR)
    with pytest.raises(ValueError, match=r"`curve` must be one of \['calibrated', .*got 'sigmoidal'"):
        simulate_annotations(10, fpr=FPR, tpr=TPR, curve="sigmoidal")
