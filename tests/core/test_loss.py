"""Tests for noisycal_bayes/core/loss.py: corrected log loss and the recalibration maps."""
import jax
import numpy as np
from scipy.stats import norm

from noisycal_bayes.core import (clipped_logit, corrected_log_loss, item_corrected_label, platt_map,
                                 temperature_map, x64)


def _plain_log_loss(p, y):
    """-mean[y log p + (1 - y) log(1 - p)], written directly (no sklearn)."""
    return -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))


def test_clipped_logit():
    with x64():
        s = np.asarray(clipped_logit(np.array([0.5, 0.25, 0.0, 1.0])))
    np.testing.assert_allclose(s[:2], [0.0, np.log(0.25 / 0.75)], atol=1e-15)
    # 0 and 1 are clipped to 1e-6 and 1 - 1e-6 (finite logits of about -+13.8).
    np.testing.assert_allclose(s[2:], [np.log(1e-6 / (1 - 1e-6)), np.log((1 - 1e-6) / 1e-6)], rtol=1e-9)


def test_maps():
    s = np.array([-2.0, 0.5, 3.0])
    with x64():
        np.testing.assert_allclose(np.asarray(temperature_map(s, 2.0)), s / 2)
        np.testing.assert_allclose(np.asarray(platt_map(s, 0.5, -1.0)), 0.5 * s - 1)


def test_identity_channel_gives_plain_log_loss():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.02, 0.98, 200)
    labels = (rng.random((200, 1)) < p[:, None]).astype(int)
    with x64():
        ytilde = item_corrected_label(labels, np.zeros(1), np.ones(1), np.ones(1))
        for temperature in (1.0, 0.7, 2.5):
            got = float(corrected_log_loss(temperature_map(clipped_logit(p), temperature), ytilde))
            q = 1 / (1 + np.exp(-np.log(p / (1 - p)) / temperature))
            np.testing.assert_allclose(got, _plain_log_loss(q, labels[:, 0]), rtol=1e-10)


def test_item_weights():
    rng = np.random.default_rng(1)
    s = rng.normal(size=50)
    y = rng.random(50)
    w = rng.integers(1, 4, 50).astype(float)
    with x64():
        weighted = float(corrected_log_loss(s, y, w))
        repeated = float(corrected_log_loss(np.repeat(s, w.astype(int)), np.repeat(y, w.astype(int))))
    np.testing.assert_allclose(weighted, repeated, rtol=1e-12)


def test_corrected_loss_is_unbiased_for_clean_loss():
    """Simulation: mean corrected loss over replicated noisy labels == clean loss, within z * se.

    Clean labels and scores are fixed; each replicate redraws three annotators' labels through the
    channel. False-alarm rate 1e-4 (two-sided) gives z = norm.ppf(1 - 0.5e-4) = 3.89; se is the
    Monte Carlo standard error of the replicate mean. A negative control (plain loss against vote
    fractions) must miss the clean loss by many standard errors, so the test has power.
    """
    rng = np.random.default_rng(2)
    n, n_rep = 400, 300
    fpr, tpr = np.array([0.1, 0.2, 0.05]), np.array([0.8, 0.7, 0.6])
    gap = tpr - fpr
    p = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < p).astype(int)
    temperature = 1.3
    clean = _plain_log_loss(1 / (1 + np.exp(-np.log(p / (1 - p)) / temperature)), y)
    labels = (rng.random((n_rep, n, 3)) < np.where(y[None, :, None] == 1, tpr, fpr)).astype(int)
    labels[rng.random(labels.shape) < 0.2] = -1  # missing responses, renormalised per item
    labels[:, np.arange(n), 0] = (rng.random((n_rep, n)) < np.where(y == 1, tpr[0], fpr[0])).astype(int)
    with x64():
        s = temperature_map(clipped_logit(p), temperature)
        w = np.array([0.5, 0.3, 0.2])
        loss = jax.jit(jax.vmap(lambda lab: corrected_log_loss(s, item_corrected_label(lab, fpr, gap, w))))
        corrected = np.asarray(loss(labels))
        vote = (labels == 1).sum(-1) / (labels >= 0).sum(-1)
        naive = np.asarray(jax.vmap(lambda q: corrected_log_loss(s, q))(vote))
    z = norm.ppf(1 - 0.5e-4)
    se = corrected.std(ddof=1) / np.sqrt(n_rep)
    assert abs(corrected.mean() - clean) < z * se, (corrected.mean(), clean, se)
    se_naive = naive.std(ddof=1) / np.sqrt(n_rep)
    assert abs(naive.mean() - clean) > 10 * z * max(se_naive, se)
