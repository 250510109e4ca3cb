"""Sparse (segment-sum) likelihood and EM step against the dense pattern ones (issue 16: equal to 1e-10)."""
import jax.numpy as jnp
import numpy as np
import pytest

from noisycal_bayes.core import x64
from noisycal_bayes.core.em import e_step, m_step
from noisycal_bayes.core.sparse import Responses, sparse_e_step, sparse_item_loglik, sparse_m_step
from noisycal_bayes.simulate import simulate_annotations


def _dense_rows(data, group):
    """Every item as its own pattern row (count 1): the dense computation, no compression."""
    return jnp.asarray(data.labels, dtype=jnp.int32), jnp.asarray(group), jnp.ones(data.n_items)


@pytest.mark.parametrize("missing", [0.0, 0.4])
def test_sparse_equals_dense(missing):
    sim = simulate_annotations(400, fpr=[0.1, 0.25, 0.05, 0.3], tpr=[0.9, 0.7, 0.8, 0.6], missing=missing, seed=3)
    data = sim.data
    rng = np.random.default_rng(0)
    group = rng.integers(0, 3, data.n_items).astype(np.int32)
    with x64():
        f, t, p = jnp.array([0.12, 0.2, 0.1, 0.35]), jnp.array([0.8, 0.75, 0.9, 0.55]), jnp.array([0.2, 0.5, 0.7])
        ll_s, post_s = sparse_e_step(data.responses, jnp.asarray(group), f, t, p)
        ll_d, post_d = e_step(*_dense_rows(data, group), f, t, p)
        np.testing.assert_allclose(float(ll_s), float(ll_d), rtol=0, atol=1e-10)
        np.testing.assert_allclose(post_s, post_d, atol=1e-12)
        for a, b in zip(sparse_m_step(data.responses, jnp.asarray(group), 3, 4, post_s),
                        m_step(*_dense_rows(data, group), 3, post_d)):
            np.testing.assert_allclose(a, b, atol=1e-12)


def test_repeated_response_and_gold_by_hand():
    # Item 0: annotator 0 says 1 twice, annotator 1 says 0; item 1: annotator 1 says 1, and its clean label is 0.
    r = Responses(np.array([0, 0, 0, 1]), np.array([0, 0, 1, 1]), np.array([1, 1, 0, 1]))
    f, t, pi = np.array([0.1, 0.2]), np.array([0.8, 0.7]), 0.4
    with x64():
        got = sparse_item_loglik(r, jnp.zeros(2, jnp.int32), jnp.asarray(f), jnp.asarray(t), jnp.array([pi]),
                                 gold=jnp.array([-1, 0]))
        ll, post = sparse_e_step(r, jnp.zeros(2, jnp.int32), jnp.asarray(f), jnp.asarray(t), jnp.array([pi]),
                                 gold=jnp.array([-1, 0]))
    p1 = pi * 0.8 * 0.8 * (1 - 0.7)
    p0 = (1 - pi) * 0.1 * 0.1 * (1 - 0.2)
    item1 = (1 - pi) * 0.2  # gold 0: P(Y = 0, A = 1)
    np.testing.assert_allclose(np.asarray(got), [np.log(p0 + p1), np.log(item1)], rtol=1e-12)
    np.testing.assert_allclose(float(ll), np.log(p0 + p1) + np.log(item1), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(post), [p1 / (p0 + p1), 0.0], atol=1e-15)
