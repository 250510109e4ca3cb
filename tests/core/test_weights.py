"""Tests for noisycal_bayes/core/weights.py: IV, equal, gap and squared-gap annotator weights."""
import jax
import numpy as np
import pytest

from noisycal_bayes.core import WEIGHT_RULES, iv_weights, rule_weights, x64


def _iv_numpy(fpr, gap, mu):
    """DESIGN §3 written out independently in NumPy, one annotator at a time.

    sigma_j^2 = [mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)] / delta_j^2, b_j = a_j + delta_j,
    mu clipped to [1e-4, 1 - 1e-4], sigma_j^2 floored at 1e-8, w_j = (1 / sigma_j^2) / sum_k (1 / sigma_k^2).
    """
    mu = min(max(float(mu), 1e-4), 1 - 1e-4)
    inv = []
    for a, d in zip(fpr, gap):
        b = a + d
        var = (mu * b * (1 - b) + (1 - mu) * a * (1 - a)) / d ** 2
        inv.append(1.0 / max(var, 1e-8))
    inv = np.array(inv)
    return inv / inv.sum()


CHANNELS = [
    (np.array([0.1, 0.2, 0.05]), np.array([0.8, 0.5, 0.3])),
    (np.array([0.3, 0.01, 0.4, 0.2]), np.array([0.6, 0.97, 0.3, 0.5])),
]


@pytest.mark.parametrize("fpr,gap", CHANNELS)
@pytest.mark.parametrize("mu", [0.5, 0.1, 0.93])
def test_iv_weights_match_numpy_formula(fpr, gap, mu):
    with x64():
        w = np.asarray(iv_weights(fpr, gap, mu))
    np.testing.assert_allclose(w, _iv_numpy(fpr, gap, mu), rtol=1e-12)


@pytest.mark.parametrize("mu,clipped", [(-0.3, 1e-4), (0.0, 1e-4), (1.0, 1 - 1e-4), (1.7, 1 - 1e-4)])
def test_iv_weights_clip_mu(mu, clipped):
    # mu outside [1e-4, 1 - 1e-4] (possible for a mean corrected label) is clipped before use.
    fpr, gap = CHANNELS[1]
    with x64():
        w = np.asarray(iv_weights(fpr, gap, mu))
        w_clipped = np.asarray(iv_weights(fpr, gap, clipped))
    np.testing.assert_allclose(w, w_clipped, rtol=1e-12)
    np.testing.assert_allclose(w, _iv_numpy(fpr, gap, mu), rtol=1e-12)
    # Clipping matters: the unclipped formula at mu = 0 differs from the clipped one.
    if mu == 0.0:
        unclipped = 1 / (fpr * (1 - fpr) / gap ** 2)
        assert not np.allclose(w, unclipped / unclipped.sum(), rtol=1e-6)


def test_iv_variance_floor():
    # Annotator 0 is perfect (variance 0): the floor 1e-8 keeps its weight finite, and it dominates.
    fpr, gap = np.array([0.0, 0.1]), np.array([1.0, 0.7])
    with x64():
        w = np.asarray(iv_weights(fpr, gap, 0.4))
    assert np.all(np.isfinite(w))
    np.testing.assert_allclose(w, _iv_numpy(fpr, gap, 0.4), rtol=1e-12)
    var1 = (0.4 * 0.8 * 0.2 + 0.6 * 0.1 * 0.9) / 0.49
    np.testing.assert_allclose(w[1], (1 / var1) / (1e8 + 1 / var1), rtol=1e-12)
    # Two perfect annotators share the weight equally.
    with x64():
        np.testing.assert_allclose(np.asarray(iv_weights(np.zeros(3), np.ones(3), 0.3)), np.full(3, 1 / 3))


@pytest.mark.parametrize("rule", WEIGHT_RULES)
@pytest.mark.parametrize("fpr,gap", CHANNELS)
def test_rules_are_convex(rule, fpr, gap):
    with x64():
        w = np.asarray(rule_weights(rule, fpr, gap, 0.3))
    assert w.shape == fpr.shape
    assert np.all(w >= 0)
    np.testing.assert_allclose(w.sum(), 1.0, rtol=1e-12)


def test_named_rules():
    fpr, gap = CHANNELS[0]
    with x64():
        np.testing.assert_allclose(rule_weights("equal", fpr, gap), np.full(3, 1 / 3))
        np.testing.assert_allclose(rule_weights("gap", fpr, gap), gap / gap.sum())
        np.testing.assert_allclose(rule_weights("squared_gap", fpr, gap), gap ** 2 / (gap ** 2).sum())
        np.testing.assert_allclose(rule_weights("iv", fpr, gap, 0.2), _iv_numpy(fpr, gap, 0.2))


def test_iv_prefers_the_less_noisy_annotator():
    # Same fpr, larger gap => smaller variance => larger weight.
    with x64():
        w = np.asarray(iv_weights(np.array([0.1, 0.1]), np.array([0.8, 0.4]), 0.5))
    assert w[0] > w[1]


def test_unknown_rule():
    with pytest.raises(ValueError, match=r"`weights` must be one of \('iv', 'equal', 'gap', 'squared_gap'\)"):
        rule_weights("inverse", np.array([0.1]), np.array([0.8]))


def test_iv_weights_jit_and_vmap_over_draws():
    rng = np.random.default_rng(0)
    fpr = rng.uniform(0.0, 0.3, size=(6, 4))
    gap = rng.uniform(0.2, 0.7, size=(6, 4))
    mu = rng.uniform(0.05, 0.95, size=6)
    with x64():
        batched = np.asarray(jax.vmap(iv_weights)(fpr, gap, mu))
        jitted = np.asarray(jax.jit(iv_weights)(fpr[0], gap[0], mu[0]))
    loop = np.stack([_iv_numpy(f, g, m) for f, g, m in zip(fpr, gap, mu)])
    np.testing.assert_allclose(batched, loop, rtol=1e-12)
    np.testing.assert_allclose(jitted, loop[0], rtol=1e-12)


@pytest.mark.parametrize("fpr,gap", CHANNELS)
def test_annotator_noise_variance_is_the_recipe(fpr, gap):
    from noisycal_bayes.core.weights import annotator_noise_variance

    mu = 0.3
    b = fpr + gap
    expected = (mu * b * (1 - b) + (1 - mu) * fpr * (1 - fpr)) / gap**2  # DESIGN §3, written out
    np.testing.assert_allclose(np.asarray(annotator_noise_variance(fpr, gap, mu)), expected, rtol=1e-12)


@pytest.mark.parametrize("rule", WEIGHT_RULES)
def test_weights_for_labels_estimate_mu_from_the_items(rule):
    # Independent route: mu = mean over items of the equally weighted combined corrected label, by loops.
    from noisycal_bayes.core.weights import weights_for_labels

    rng = np.random.default_rng(5)
    fpr, gap = np.array([0.1, 0.2, 0.15]), np.array([0.7, 0.5, 0.6])
    labels = rng.integers(0, 2, size=(200, 3))
    labels[rng.random((200, 3)) < 0.3] = -1
    labels[(labels < 0).all(axis=1), 0] = 1
    per_item = [np.mean([(a - f) / g for a, f, g in zip(row, fpr, gap) if a >= 0]) for row in labels]
    mu = float(np.mean(per_item))
    with x64():
        got = np.asarray(weights_for_labels(rule, labels, fpr, gap))
        want = np.asarray(rule_weights(rule, fpr, gap, mu if rule == "iv" else None))
        # Compressed rows with counts give the same weights as the items.
        uniq, inv, counts = np.unique(labels, axis=0, return_inverse=True, return_counts=True)
        compressed = np.asarray(weights_for_labels(rule, uniq, fpr, gap, counts.astype(float)))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(compressed, got, rtol=1e-12)


def test_weights_for_labels_normalises_explicit_weights():
    from noisycal_bayes.core.weights import weights_for_labels

    w = np.asarray(weights_for_labels(np.array([2.0, 1.0, 1.0]), np.zeros((3, 3), int), np.full(3, 0.1),
                                      np.full(3, 0.8)))
    np.testing.assert_allclose(w, [0.5, 0.25, 0.25])
