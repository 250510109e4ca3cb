"""Tests for noisycal_bayes/core/channel.py: corrected labels and their per-item combination."""
import jax
import numpy as np
import pytest

from noisycal_bayes.core import (combine_item_weights, corrected_labels, item_corrected_label,
                                 mean_corrected_label, x64)


def _design(seed=0, n=40, j=4, p_missing=0.4):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=(n, j))
    labels[rng.random((n, j)) < p_missing] = -1
    labels[np.arange(n), rng.integers(0, j, n)] = rng.integers(0, 2, n)  # every item keeps a label
    fpr = rng.uniform(0.0, 0.3, j)
    gap = rng.uniform(0.3, 0.7, j)
    w = rng.dirichlet(np.ones(j))
    return labels, fpr, gap, w


def _item_loop(labels, fpr, gap, w):
    """Independent per-item implementation: renormalise the weights over the annotators who responded."""
    out = []
    for row in labels:
        seen = [j for j, a in enumerate(row) if a >= 0]
        total = sum(w[j] for j in seen)
        out.append(sum(w[j] / total * (row[j] - fpr[j]) / gap[j] for j in seen))
    return np.array(out)


def test_corrected_labels_values_and_missing():
    labels = np.array([[1, 0, -1], [0, -1, 1]])
    fpr, gap = np.array([0.1, 0.2, 0.3]), np.array([0.8, 0.5, 0.4])
    with x64():
        y = np.asarray(corrected_labels(labels, fpr, gap))
    expected = np.array([[0.9 / 0.8, -0.2 / 0.5, 0.0], [-0.1 / 0.8, 0.0, 0.7 / 0.4]])
    np.testing.assert_allclose(y, expected, rtol=1e-12)


def test_corrected_label_is_conditionally_unbiased():
    # E[Ytilde | Y] = (P(A=1 | Y) - a) / delta = Y exactly: average over A in {0, 1} with its probabilities.
    fpr, gap = np.array([0.15, 0.3]), np.array([0.6, 0.25])
    with x64():
        y1 = np.asarray(corrected_labels(np.array([[1, 1]]), fpr, gap))[0]
        y0 = np.asarray(corrected_labels(np.array([[0, 0]]), fpr, gap))[0]
    for clean, p1 in ((0, fpr), (1, fpr + gap)):
        np.testing.assert_allclose(p1 * y1 + (1 - p1) * y0, clean, atol=1e-12)


def test_identity_channel_gives_the_labels():
    labels, _, _, w = _design(1)
    j = labels.shape[1]
    with x64():
        y = np.asarray(corrected_labels(labels, np.zeros(j), np.ones(j)))
        combined = np.asarray(item_corrected_label(labels, np.zeros(j), np.ones(j), np.ones(j)))
    np.testing.assert_array_equal(y, np.where(labels >= 0, labels, 0))
    vote_fraction = (labels == 1).sum(1) / (labels >= 0).sum(1)
    np.testing.assert_allclose(combined, vote_fraction, rtol=1e-12)


def test_combine_item_weights_renormalises_per_item():
    labels, _, _, w = _design(2)
    with x64():
        W = np.asarray(combine_item_weights(labels >= 0, w))
    np.testing.assert_allclose(W.sum(1), 1.0, rtol=1e-12)
    assert np.all(W[labels < 0] == 0)
    for i, row in enumerate(labels):
        seen = row >= 0
        np.testing.assert_allclose(W[i, seen], w[seen] / w[seen].sum(), rtol=1e-12)


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_item_corrected_label_matches_item_loop(seed):
    labels, fpr, gap, w = _design(seed)
    with x64():
        got = np.asarray(item_corrected_label(labels, fpr, gap, w))
    np.testing.assert_allclose(got, _item_loop(labels, fpr, gap, w), rtol=1e-12)


def test_mean_corrected_label_is_equal_weight_mean():
    labels, fpr, gap, _ = _design(6)
    with x64():
        mu = float(mean_corrected_label(labels, fpr, gap))
    np.testing.assert_allclose(mu, _item_loop(labels, fpr, gap, np.ones(4)).mean(), rtol=1e-12)


def test_jit_and_vmap_over_channel_draws():
    labels, _, _, w = _design(7)
    rng = np.random.default_rng(8)
    fpr = rng.uniform(0.0, 0.3, (5, 4))
    gap = rng.uniform(0.3, 0.6, (5, 4))
    with x64():
        batched = np.asarray(jax.vmap(lambda f, g: item_corrected_label(labels, f, g, w))(fpr, gap))
        jitted = np.asarray(jax.jit(item_corrected_label)(labels, fpr[0], gap[0], w))
    loop = np.stack([_item_loop(labels, f, g, w) for f, g in zip(fpr, gap)])
    np.testing.assert_allclose(batched, loop, rtol=1e-12)
    np.testing.assert_allclose(jitted, loop[0], rtol=1e-12)


# ------------------------------------------------------------------ small and negative gaps (issue 16)
def test_usable_annotators_rule_and_its_consumers():
    import jax.numpy as jnp

    from noisycal_bayes.core.channel import corrected_labels, inverse_gap, usable_annotators
    from noisycal_bayes.core.weights import rule_weights, weights_for_labels

    fpr, gap = jnp.array([0.1, 0.4, 0.8]), jnp.array([0.7, 0.001, -0.6])
    lo, hi = jnp.array([0.6, -0.05, -0.7]), jnp.array([0.8, 0.05, -0.5])
    use = usable_annotators(gap, lo, hi)
    assert use.tolist() == [True, False, True]
    assert usable_annotators(jnp.array([0.3, 0.0, -0.2])).tolist() == [True, False, True]
    np.testing.assert_allclose(inverse_gap(gap, use), [1 / 0.7, 0.0, -1 / 0.6])
    labels = jnp.array([[1, 1, 0], [0, -1, 1]])
    # The adversary's corrected label keeps its sign: (0 - 0.8) / -0.6 = 4/3, (1 - 0.8) / -0.6 = -1/3.
    np.testing.assert_allclose(corrected_labels(labels, fpr, gap, use),
                               [[0.9 / 0.7, 0.0, 0.8 / 0.6], [-0.1 / 0.7, 0.0, -0.2 / 0.6]], rtol=1e-6)
    for rule in ("equal", "gap", "squared_gap", "iv"):
        w = rule_weights(rule, fpr, gap, 0.4, use)
        assert float(w[1]) == 0.0 and np.all(np.asarray(w) >= 0) and float(w.sum()) == pytest.approx(1.0)
    # The Gap rule weights by |gap|: an adversary as informative as an annotator with the opposite gap.
    np.testing.assert_allclose(rule_weights("gap", fpr, gap, None, use), [0.7 / 1.3, 0.0, 0.6 / 1.3], rtol=1e-6)
    w = weights_for_labels("iv", labels, fpr, gap, usable=use)
    assert np.all(np.isfinite(np.asarray(w))) and float(w[1]) == 0.0


def test_unbiased_corrected_label_for_an_adversary():
    """E[(A - fpr) / gap | Y] = Y for gap < 0: exact expectation over A ~ Bernoulli(fpr + gap Y)."""
    from noisycal_bayes.core.channel import corrected_labels

    fpr, gap = np.array([0.8]), np.array([-0.6])
    for y in (0, 1):
        q = fpr + gap * y  # P(A = 1 | Y = y)
        vals = np.asarray(corrected_labels(np.array([[0], [1]]), fpr, gap))[:, 0]
        assert float((1 - q[0]) * vals[0] + q[0] * vals[1]) == pytest.approx(y, abs=1e-6)  # float32
