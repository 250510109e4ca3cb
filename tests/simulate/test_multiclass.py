"""simulate_multiclass: shapes, sorted responses, calibration truth by curve, channel frequencies, errors."""
import numpy as np
import pytest
from scipy.stats import norm

from noisycal_bayes.simulate import random_confusion, simulate_multiclass

Z = norm.isf(1e-4 / 2)  # two-sided 1e-4 false-alarm rate per comparison


def test_shapes_sorted_and_clean_labels_follow_clean_probs():
    n, K = 20000, 4
    sim = simulate_multiclass(n, 3, K, curve="calibrated", seed=0)
    assert sim.probs.shape == sim.clean_probs.shape == (n, K) and sim.item.size == 3 * n
    key = sim.item.astype(np.int64) * 3 + sim.annotator
    assert np.all(np.diff(key) > 0)
    np.testing.assert_allclose(sim.probs, sim.clean_probs)  # calibrated: the classifier reports the truth
    # Y ~ Categorical(clean_probs): sum_i (1[Y_i = k] - q_ik) has mean 0 and variance sum_i q_ik (1 - q_ik).
    d = np.eye(K)[sim.y] - sim.clean_probs
    se = np.sqrt(np.sum(sim.clean_probs * (1 - sim.clean_probs), axis=0))
    assert np.all(np.abs(d.sum(0)) < Z * se)


@pytest.mark.parametrize("curve, sign", [("overconfident", 1), ("underconfident", -1)])
def test_curves_give_known_direction(curve, sign):
    sim = simulate_multiclass(2000, 3, 5, curve=curve, seed=1)
    rows = np.arange(2000)
    yhat = sim.probs.argmax(1)
    assert np.all(yhat == sim.clean_probs.argmax(1))        # a temperature keeps the predicted class
    gap = sim.probs[rows, yhat] - sim.clean_probs[rows, yhat]
    assert np.all(sign * gap >= -1e-12) and sign * gap.mean() > 0.01


def test_labels_follow_the_confusion_and_missing_repeats():
    C = random_confusion(3, 3, accuracy=[0.9, 0.7, 0.5], seed=2)
    sim = simulate_multiclass(30000, 3, 3, confusion=C, labels_per_item=2, repeat_rate=0.2, seed=3)
    per_item = np.bincount(sim.item, minlength=30000)
    assert per_item.min() >= 2
    pairs = np.unique(sim.item.astype(np.int64) * 3 + sim.annotator)
    assert np.all(np.bincount(pairs // 3, minlength=30000) == 2)
    # Each response's label ~ C[j, y]: frequencies within binomial error.
    y = sim.y[sim.item]
    for j in range(3):
        for c in range(3):
            m = (sim.annotator == j) & (y == c)
            f = np.bincount(sim.label[m], minlength=3) / m.sum()
            assert np.all(np.abs(f - C[j, c]) < Z * np.sqrt(C[j, c] * (1 - C[j, c]) / m.sum()) + 1e-12)


def test_errors():
    with pytest.raises(ValueError, match="`curve` must be one of"):
        simulate_multiclass(10, 3, 3, curve="shifted")
    with pytest.raises(ValueError, match="`labels_per_item` must lie in 1..n_annotators=3"):
        simulate_multiclass(10, 3, 3, labels_per_item=4)
    with pytest.raises(ValueError, match="`repeat_rate` must lie in"):
        simulate_multiclass(10, 3, 3, repeat_rate=1.0)
    with pytest.raises(ValueError, match=r"`confusion` must have shape \(3, 3, 3\)"):
        simulate_multiclass(10, 3, 3, confusion=np.eye(3))
    with pytest.raises(ValueError, match="rows must be probabilities"):
        simulate_multiclass(10, 2, 2, confusion=np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="`accuracy` must be"):
        random_confusion(2, 3, accuracy=[0.5, 1.5])


def test_data_holds_every_response_item_and_annotator():
    # A sparse design where the last annotator answers nothing and some items get one label: `data` must
    # still have every item and annotator of the simulation, and the responses unchanged.
    sim = simulate_multiclass(200, 6, 3, labels_per_item=1, seed=3)
    data = sim.data
    assert (data.n_items, data.n_annotators, data.n_classes) == (200, 6, 3)
    np.testing.assert_array_equal(data.probs, sim.probs)
    assert data.vote_counts().sum() == sim.item.size
    counts = np.zeros((200, 3), dtype=int)
    np.add.at(counts, (sim.item, sim.label), 1)
    np.testing.assert_array_equal(data.vote_counts(), counts)
