"""Tests for noisycal_bayes/core/em.py: one EM step of the grouped Dawid-Skene model."""
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from noisycal_bayes.core import ds_loglik, em_step, x64
from noisycal_bayes.core.em import e_step, m_step
from noisycal_bayes.data import compress_patterns, pad_patterns, padded_size

TRUE_FPR = np.array([0.1, 0.2, 0.15])
TRUE_TPR = np.array([0.85, 0.75, 0.9])
TRUE_PREV = np.array([0.25, 0.7])
PRIOR = ((2.0, 8.0), (8.0, 2.0), (3.0, 3.0))  # Beta pseudo-counts on fpr, tpr, prevalence
START = (np.array([0.3, 0.3, 0.3]), np.array([0.6, 0.65, 0.7]), np.array([0.5, 0.5]))
N_GROUPS = 2


def _data(seed=0, n=1500, missing=0.25):
    """Grouped DS data, compressed and padded to every possible row (one compiled shape for all tests)."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, N_GROUPS, n)
    y = rng.random(n) < TRUE_PREV[group]
    labels = (rng.random((n, 3)) < np.where(y[:, None], TRUE_TPR, TRUE_FPR)).astype(int)
    labels[rng.random((n, 3)) < missing] = -1
    labels[np.arange(n), rng.integers(0, 3, n)] = (rng.random(n) < np.where(y, 0.8, 0.2)).astype(int)
    pc = compress_patterns(labels, group, N_GROUPS)
    return labels, group, pad_patterns(pc, padded_size(pc.patterns.shape[0], N_GROUPS, 3))


@jax.jit
def _loglik(pc, f, t, p):
    return ds_loglik(pc.patterns, pc.group, pc.counts, f, t, p)


def _log_prior(f, t, p):
    (af, bf), (at, bt), (ap, bp) = PRIOR
    beta = lambda x, a, b: jnp.sum((a - 1) * jnp.log(x) + (b - 1) * jnp.log1p(-x))  # noqa: E731
    return beta(f, af, bf) + beta(t, at, bt) + beta(p, ap, bp)


@partial(jax.jit, static_argnames=("use_prior",))
def _step(patterns, group, counts, params, use_prior=False):
    return em_step(patterns, group, counts, N_GROUPS, *params, PRIOR if use_prior else None)


@partial(jax.jit, static_argnames=("use_prior",))
def _fixed_point(patterns, group, counts, start, use_prior=False, n_steps=3000):
    """n_steps EM steps in one compiled loop (EM converges linearly; 3000 steps reach round-off here)."""
    body = lambda _, params: em_step(patterns, group, counts, N_GROUPS, *params,  # noqa: E731
                                     PRIOR if use_prior else None)
    return jax.lax.fori_loop(0, n_steps, body, start)


@jax.jit
def _grads(patterns, group, counts, params):
    """Gradients of the log-likelihood and of the log prior with respect to (fpr, tpr, prevalence)."""
    ll = lambda f, t, p: ds_loglik(patterns, group, counts, f, t, p)  # noqa: E731
    return jax.grad(ll, argnums=(0, 1, 2))(*params), jax.grad(_log_prior, argnums=(0, 1, 2))(*params)


def _numpy_em_step(labels, group, fpr, tpr, prev, prior=None):
    """Independent per-item EM step (DESIGN §3), with optional Beta pseudo-counts."""
    obs, pos = labels >= 0, labels == 1
    l1 = np.log(prev[group]) + np.where(obs, np.where(pos, np.log(tpr), np.log(1 - tpr)), 0).sum(1)
    l0 = np.log(1 - prev[group]) + np.where(obs, np.where(pos, np.log(fpr), np.log(1 - fpr)), 0).sum(1)
    t = 1 / (1 + np.exp(l0 - l1))
    (af, bf), (at, bt), (ap, bp) = ((1, 1),) * 3 if prior is None else prior
    new_prev = np.array([(t[group == g].sum() + ap - 1) / ((group == g).sum() + ap + bp - 2) for g in range(2)])
    new_tpr = np.array([((t * pos[:, j]).sum() + at - 1) / ((t * obs[:, j]).sum() + at + bt - 2) for j in range(3)])
    new_fpr = np.array([(((1 - t) * pos[:, j]).sum() + af - 1) / (((1 - t) * obs[:, j]).sum() + af + bf - 2)
                        for j in range(3)])
    return new_fpr, new_tpr, new_prev


@pytest.mark.parametrize("use_prior", [False, True])
def test_step_matches_per_item_numpy_step(use_prior):
    labels, group, pc = _data(1)
    with x64():
        got = _step(pc.patterns, pc.group, pc.counts, START, use_prior=use_prior)
    want = _numpy_em_step(labels, group, *START, PRIOR if use_prior else None)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-11)


@pytest.mark.parametrize("scale", [1.0, 40.0])
def test_e_step_matches_per_item_numpy_loglik_and_posterior(scale):
    # e_step's shared pass (one exponential per row) against an independent per-item NumPy computation of
    # log P(A_i) and P(Y = 1 | A_i); scale = 40 repeats every annotator 40 times (120 columns), so the
    # log-odds reach |d| > 60 (posteriors below 1e-26, relative accuracy still required).
    labels, group, pc = _data(3)
    if scale > 1:
        labels = np.tile(labels, int(scale))
        pc = compress_patterns(labels, group, N_GROUPS)
    f, t = (np.tile(x, int(scale)) for x in START[:2])
    prev = START[2]
    obs, pos = labels >= 0, labels == 1
    a = np.log(1 - prev[group]) + np.where(obs, np.where(pos, np.log(f), np.log(1 - f)), 0).sum(1)
    b = np.log(prev[group]) + np.where(obs, np.where(pos, np.log(t), np.log(1 - t)), 0).sum(1)
    with x64():
        loglik, post = jax.jit(e_step)(pc.patterns, pc.group, pc.counts, f, t, prev)
    np.testing.assert_allclose(float(loglik), np.logaddexp(a, b).sum(), rtol=1e-12)
    # Per item from the row posterior (compressed rows hold identical items).
    rows = {(g, tuple(r)): k for k, (g, r) in enumerate(zip(pc.group, pc.patterns))}
    item_post = np.asarray(post)[[rows[(g, tuple(r))] for g, r in zip(group, labels)]]
    want = np.exp(b - np.logaddexp(a, b))
    np.testing.assert_allclose(item_post, want, rtol=1e-11, atol=1e-300)
    if scale > 1:
        assert np.min(np.abs(b - a)) < 5 < 60 < np.max(np.abs(b - a))  # both regimes covered


def test_m_step_of_e_step_is_em_step():
    _, _, pc = _data(4)
    with x64():
        _, post = e_step(pc.patterns, pc.group, pc.counts, *START)
        got = m_step(pc.patterns, pc.group, pc.counts, N_GROUPS, post, PRIOR)
        want = em_step(pc.patterns, pc.group, pc.counts, N_GROUPS, *START, PRIOR)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)


def test_loglik_is_monotone():
    _, _, pc = _data(2)
    with x64():
        params = tuple(jnp.asarray(x) for x in START)
        values = [float(_loglik(pc, *params))]
        for _ in range(100):
            params = _step(pc.patterns, pc.group, pc.counts, params)
            values.append(float(_loglik(pc, *params)))
    diffs = np.diff(values)
    # EM never decreases the likelihood; allow float64 round-off relative to |loglik| ~ 3e3.
    assert np.all(diffs > -1e-9 * abs(values[-1])), diffs.min()
    assert values[-1] - values[0] > 1.0  # and it actually moved from the poor start


def test_flat_prior_fixed_point_is_stationary_for_the_loglik():
    _, _, pc = _data(3)
    with x64():
        params = _fixed_point(pc.patterns, pc.group, pc.counts, START)
        again = _step(pc.patterns, pc.group, pc.counts, params)
        grads, _ = _grads(pc.patterns, pc.group, pc.counts, params)
        start_grads, _ = _grads(pc.patterns, pc.group, pc.counts, START)
    for a, b in zip(again, params):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-12)  # converged
    # Gradient entries are sums of ~n = 1500 terms of size up to 1 / rate; 1e-6 is round-off level.
    for g in grads:
        np.testing.assert_allclose(np.asarray(g), 0.0, atol=1e-6)
    # The start was not a stationary point (the check can fail).
    assert max(np.abs(np.asarray(g)).max() for g in start_grads) > 1.0
    fpr, tpr, _ = params
    assert np.all(np.asarray(tpr) > np.asarray(fpr))  # a start with fpr < 0.5 < tpr keeps orientation


def test_beta_prior_fixed_point_maximises_penalised_loglik():
    _, _, pc = _data(4, n=300)  # small n so that the prior visibly moves the estimate
    with x64():
        params = _fixed_point(pc.patterns, pc.group, pc.counts, START, use_prior=True)
        again = _step(pc.patterns, pc.group, pc.counts, params, use_prior=True)
        ll_grads, prior_grads = _grads(pc.patterns, pc.group, pc.counts, params)
    for a, b in zip(again, params):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-12)  # converged
    for g_ll, g_prior in zip(ll_grads, prior_grads):
        np.testing.assert_allclose(np.asarray(g_ll) + np.asarray(g_prior), 0.0, atol=1e-6)
    # The MAP point is not the ML point: the plain log-likelihood gradient is clearly non-zero there.
    assert max(np.abs(np.asarray(g)).max() for g in ll_grads) > 0.5


def test_zero_count_padding_does_not_change_the_step():
    labels, group, pc = _data(5)
    n_real = int((pc.counts > 0).sum())
    assert n_real < pc.patterns.shape[0]  # the table is padded
    with x64():
        a = em_step(pc.patterns[:n_real], pc.group[:n_real], pc.counts[:n_real], 2, *START)
        b = _step(pc.patterns, pc.group, pc.counts, START)
    for x, y in zip(a, b):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-13)


def test_vmap_over_starts_equals_loop():
    _, _, pc = _data(6)
    rng = np.random.default_rng(7)
    starts = (rng.uniform(0.05, 0.4, (5, 3)), rng.uniform(0.6, 0.95, (5, 3)), rng.uniform(0.2, 0.8, (5, 2)))
    with x64():
        batched = jax.vmap(lambda *p: _step(pc.patterns, pc.group, pc.counts, p))(*starts)
        for s in range(5):
            single = _step(pc.patterns, pc.group, pc.counts, tuple(x[s] for x in starts))
            for x, y in zip(batched, single):
                np.testing.assert_allclose(np.asarray(x)[s], np.asarray(y), rtol=1e-12)
