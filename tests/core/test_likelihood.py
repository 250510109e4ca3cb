"""Tests for noisycal_bayes/core/likelihood.py: Dawid-Skene log-likelihood and the E-step posterior."""
import itertools

import jax
import numpy as np
import pytest

from noisycal_bayes.core import ds_loglik, ds_loglik_rows, pattern_loglik, posterior_positive, x64
from noisycal_bayes.data import compress_patterns

FPR = np.array([0.1, 0.25, 0.05])
TPR = np.array([0.85, 0.6, 0.7])
PREV = np.array([0.3, 0.65])


def _item_loglik_by_hand(row, g):
    """log P(A_i | g) = log[(1 - pi_g) prod_j a_j^A (1 - a_j)^(1-A) + pi_g prod_j b_j^A (1 - b_j)^(1-A)]."""
    p0, p1 = 1 - PREV[g], PREV[g]
    for j, a in enumerate(row):
        if a < 0:
            continue
        p0 *= FPR[j] if a == 1 else 1 - FPR[j]
        p1 *= TPR[j] if a == 1 else 1 - TPR[j]
    return np.log(p0 + p1), p1 / (p0 + p1)


def _all_patterns(j):
    """Every pattern in {missing, 0, 1}^J except all-missing."""
    return np.array([p for p in itertools.product((-1, 0, 1), repeat=j) if max(p) >= 0])


def test_pattern_probabilities_sum_to_one():
    # Summing P(A | g) over every complete pattern gives 1 in each group (a proper distribution).
    full = np.array(list(itertools.product((0, 1), repeat=3)))
    with x64():
        for g in (0, 1):
            total = np.exp(np.asarray(ds_loglik_rows(full, np.full(8, g), FPR, TPR, PREV))).sum()
            np.testing.assert_allclose(total, 1.0, rtol=1e-12)


def test_rows_match_bayes_rule_by_hand():
    pats = _all_patterns(3)
    for g in (0, 1):
        group = np.full(len(pats), g)
        with x64():
            ll = np.asarray(ds_loglik_rows(pats, group, FPR, TPR, PREV))
            post = np.asarray(posterior_positive(pats, group, FPR, TPR, PREV))
        by_hand = np.array([_item_loglik_by_hand(p, g) for p in pats])
        np.testing.assert_allclose(ll, by_hand[:, 0], rtol=1e-12)
        np.testing.assert_allclose(post, by_hand[:, 1], rtol=1e-12)


def test_pattern_loglik_conditionals():
    pats = np.array([[1, 0, -1], [-1, -1, 1]])
    with x64():
        l0, l1 = (np.asarray(v) for v in pattern_loglik(pats, FPR, TPR))
    np.testing.assert_allclose(l0, [np.log(0.1 * 0.75), np.log(0.05)], rtol=1e-12)
    np.testing.assert_allclose(l1, [np.log(0.85 * 0.4), np.log(0.7)], rtol=1e-12)


def test_compressed_loglik_equals_sum_over_items():
    rng = np.random.default_rng(0)
    n = 400
    labels = rng.integers(0, 2, size=(n, 3))
    labels[rng.random((n, 3)) < 0.3] = -1
    labels[np.arange(n), rng.integers(0, 3, n)] = rng.integers(0, 2, n)
    group = rng.integers(0, 2, n)
    pc = compress_patterns(labels, group, 2)
    assert pc.patterns.shape[0] < n
    with x64():
        compressed = float(ds_loglik(pc.patterns, pc.group, pc.counts, FPR, TPR, PREV))
        per_item = np.asarray(ds_loglik_rows(labels, group, FPR, TPR, PREV))
    by_hand = sum(_item_loglik_by_hand(row, g)[0] for row, g in zip(labels, group))
    np.testing.assert_allclose(compressed, per_item.sum(), rtol=1e-12)
    np.testing.assert_allclose(compressed, by_hand, rtol=1e-12)


def test_per_row_prevalence_when_group_is_none():
    # Calibration-curve models pass P(Y=1) per row instead of per group.
    rng = np.random.default_rng(1)
    pats = _all_patterns(3)
    group = rng.integers(0, 2, len(pats))
    with x64():
        by_group = np.asarray(ds_loglik_rows(pats, group, FPR, TPR, PREV))
        by_row = np.asarray(ds_loglik_rows(pats, None, FPR, TPR, PREV[group]))
        post_group = np.asarray(posterior_positive(pats, group, FPR, TPR, PREV))
        post_row = np.asarray(posterior_positive(pats, None, FPR, TPR, PREV[group]))
    np.testing.assert_allclose(by_row, by_group, rtol=1e-12)
    np.testing.assert_allclose(post_row, post_group, rtol=1e-12)


def test_zero_count_padding_rows_do_not_change_the_loglik():
    pats = _all_patterns(3)
    counts = np.arange(len(pats), dtype=float)
    padded = np.concatenate([pats, np.full((5, 3), -1)])
    with x64():
        base = float(ds_loglik(pats, np.zeros(len(pats), int), counts, FPR, TPR, PREV))
        pad = float(ds_loglik(padded, np.zeros(len(padded), int), np.r_[counts, np.zeros(5)], FPR, TPR, PREV))
    np.testing.assert_allclose(pad, base, rtol=1e-12)


def test_boundary_rates_stay_finite_with_finite_gradient():
    # A perfect annotator (fpr 0, tpr 1) and a group with prevalence 0 would give log(0); clipping keeps
    # the log-likelihood and its gradient finite.
    pats = _all_patterns(2)
    counts = np.ones(len(pats))
    fpr, tpr, prev = np.array([0.0, 0.2]), np.array([1.0, 0.7]), np.array([0.0])
    with x64():
        f = lambda a, b, p: ds_loglik(pats, np.zeros(len(pats), int), counts, a, b, p)  # noqa: E731
        val, grads = jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2)))(fpr, tpr, prev)
    assert np.isfinite(float(val))
    assert all(np.all(np.isfinite(np.asarray(g))) for g in grads)


def test_posterior_jit_and_vmap():
    pats = _all_patterns(3)
    group = np.zeros(len(pats), int)
    rng = np.random.default_rng(2)
    fprs = rng.uniform(0.0, 0.3, (4, 3))
    tprs = rng.uniform(0.6, 1.0, (4, 3))
    prev = rng.uniform(0.1, 0.9, (4, 1))
    with x64():
        f = lambda a, b, p: ds_loglik_rows(pats, group, a, b, p)  # noqa: E731
        batched = np.asarray(jax.vmap(f)(fprs, tprs, prev))
        loop = np.stack([np.asarray(jax.jit(f)(a, b, p)) for a, b, p in zip(fprs, tprs, prev)])
        nojit = np.stack([np.asarray(f(a, b, p)) for a, b, p in zip(fprs, tprs, prev)])
    np.testing.assert_allclose(batched, loop, rtol=1e-12)
    np.testing.assert_allclose(loop, nojit, rtol=1e-12)


@pytest.mark.parametrize("g", [0, 1])
def test_label_exchange_symmetry(g):
    # Y <-> 1 - Y with every channel swapped (fpr <-> tpr) and pi -> 1 - pi leaves P(A) unchanged and
    # maps the posterior T to 1 - T (the reason EM needs an orientation rule).
    pats = _all_patterns(3)
    group = np.full(len(pats), g)
    with x64():
        ll = np.asarray(ds_loglik_rows(pats, group, FPR, TPR, PREV))
        ll_swapped = np.asarray(ds_loglik_rows(pats, group, TPR, FPR, 1 - PREV))
        t = np.asarray(posterior_positive(pats, group, FPR, TPR, PREV))
        t_swapped = np.asarray(posterior_positive(pats, group, TPR, FPR, 1 - PREV))
    np.testing.assert_allclose(ll_swapped, ll, rtol=1e-12)
    np.testing.assert_allclose(t_swapped, 1 - t, rtol=1e-10)
