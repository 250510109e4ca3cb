"""Sparse (segment-sum) likelihood and EM step against the dense pattern ones (issue 16: equal to 1e-10)."""
import jax.numpy as jnp
import numpy as np
import pytest

from noisycal_bayes.core import x64
from noisycal_bayes.core.em import e_step, m_step
from noisycal_bayes.core.sparse import sparse_e_step, sparse_item_loglik, sparse_m_step
from noisycal_bayes.core.tables import Responses
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


def test_batched_steps_equal_the_plain_ones_column_by_column():
    """batched_e_step / batched_m_step (one segment sum of each kind, batch as a trailing axis) against
    sparse_e_step / sparse_m_step per column, with item weights, gold labels, a prior and a repeated response."""
    from noisycal_bayes.core.sparse import batched_e_step, batched_m_step, sparse_totals

    sim = simulate_annotations(300, fpr=[0.1, 0.25, 0.05], tpr=[0.9, 0.7, 0.8], missing=0.3, seed=4)
    item, ann, lab = (np.asarray(v) for v in sim.data.responses)
    # A repeated response (item 0, its first annotator, label flipped): allowed on the sparse path.
    item, ann, lab = (np.concatenate([v[:1], v]) for v in (item, ann, np.concatenate([1 - lab[:1], lab[1:]])))
    r = Responses(item.astype(np.int32), ann.astype(np.int32), lab.astype(np.int32))
    rng = np.random.default_rng(1)
    group = rng.integers(0, 2, sim.data.n_items).astype(np.int32)
    gold = np.where(rng.random(sim.data.n_items) < 0.1, sim.clean_labels, -1).astype(np.int32)
    B = 3
    w = rng.exponential(size=(sim.data.n_items, B))
    f, t, p = rng.uniform(0.05, 0.4, (3, B)), rng.uniform(0.6, 0.95, (3, B)), rng.uniform(0.2, 0.8, (2, B))
    prior = ((1.5, 2.0), (2.0, 1.5), (1.0, 1.0))
    with x64():
        tot = sparse_totals(r, group, 2, 3, w)
        ll, post = batched_e_step(r, group, tot, f, t, p, gold=gold)
        mf, mt, mp = batched_m_step(r, group, tot, 3, post, prior)
        for b in range(B):
            ll_b, post_b = sparse_e_step(r, group, f[:, b], t[:, b], p[:, b], item_weight=w[:, b], gold=gold)
            np.testing.assert_allclose(float(ll[b]), float(ll_b), rtol=1e-13)
            np.testing.assert_allclose(post[:, b], post_b, atol=1e-14)
            for got, want in zip((mf[:, b], mt[:, b], mp[:, b]),
                                 sparse_m_step(r, group, 2, 3, post_b, item_weight=w[:, b], prior=prior)):
                np.testing.assert_allclose(got, want, atol=1e-13)


def test_m_step_leaves_rates_without_data_at_one_half():
    """An annotator whose items all have posterior 1 has no count for its fpr: 1/2, not 0/0 (EM used to stop
    with non-finite parameters on sparse crowds with one-label annotators)."""
    r = Responses(np.array([0, 1, 1]), np.array([0, 0, 1]), np.array([1, 0, 1]))
    with x64():
        fpr, tpr, prev = sparse_m_step(r, jnp.zeros(2, jnp.int32), 1, 2, jnp.array([0.5, 1.0]))
    assert np.isfinite(np.asarray(fpr)).all() and float(fpr[1]) == 0.5
    assert float(tpr[1]) == 1.0 and float(fpr[0]) == pytest.approx(1.0)  # annotator 0: its only T<1 item says 1


@pytest.mark.parametrize("B, layout", [pytest.param(1, "segments", marks=pytest.mark.slow), (3, "padded")])
def test_coded_steps_equal_the_batched_ones(B, layout):
    """coded_e_step / coded_m_step (response codes 2 j + A, one gather and one segment sum each; padded or segment
    layout; batch width 1 takes the 1-D gather, > 1 the flattened one) against batched_e_step / batched_m_step, with
    item weights, gold labels, a prior and a repeated response. Same sums in another order: 1e-12."""
    from noisycal_bayes.core.sparse import (batched_e_step, batched_m_step, coded_e_step, coded_m_step,
                                            coded_responses, padded_codes, sparse_totals)

    sim = simulate_annotations(300, fpr=[0.1, 0.25, 0.05], tpr=[0.9, 0.7, 0.8], missing=0.3, seed=4)
    item, ann, lab = (np.asarray(v) for v in sim.data.responses)
    item, ann, lab = (np.concatenate([v[:1], v]) for v in (item, ann, np.concatenate([1 - lab[:1], lab[1:]])))
    r = Responses(item.astype(np.int32), ann.astype(np.int32), lab.astype(np.int32))
    # (The default run keeps the padded, batch-3 case; the segment layout with the 1-D gather is also what every
    # sparse fit_em runs, compared with the reference EM in tests/inference/test_em_accel.py.)
    rng = np.random.default_rng(2)
    group = rng.integers(0, 2, sim.data.n_items).astype(np.int32)
    gold = np.where(rng.random(sim.data.n_items) < 0.1, sim.clean_labels, -1).astype(np.int32)
    w = rng.exponential(size=(sim.data.n_items, B))
    f, t, p = rng.uniform(0.05, 0.4, (3, B)), rng.uniform(0.6, 0.95, (3, B)), rng.uniform(0.2, 0.8, (2, B))
    prior = ((1.5, 2.0), (2.0, 1.5), (1.0, 1.0))
    padded = padded_codes(item, 2 * ann + lab, sim.data.n_items, 6) if layout == "padded" else None
    assert layout == "segments" or padded is not None
    import jax

    @jax.jit
    def both(f, t, p, w, padded):  # one compiled program per case (eager dispatch compiles every primitive)
        tot = sparse_totals(r, group, 2, 3, w)
        coded = coded_responses(r, padded)
        ll, post = batched_e_step(r, group, tot, f, t, p, gold=gold)
        ll_c, post_c = coded_e_step(coded, group, tot, f, t, p, gold=gold)
        return (ll, post, ll_c, post_c, batched_m_step(r, group, tot, 3, post, prior),
                coded_m_step(coded, group, tot, 3, post, prior))

    with x64():
        ll, post, ll_c, post_c, m_b, m_c = both(f, t, p, w, padded)
    np.testing.assert_allclose(ll_c, ll, rtol=1e-12)
    np.testing.assert_allclose(post_c, post, atol=1e-12)
    for got, want in zip(m_c, m_b):
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_materialise_keeps_values_and_gradients():
    """materialise (a scatter that stops XLA fusing a table's logarithms into its gathers) is the identity, also
    for the gradient that NUTS takes through code_sums."""
    import jax

    from noisycal_bayes.core.sparse import code_sums, materialise

    x = np.linspace(-2.0, 2.0, 12).reshape(4, 3)
    code, item = jnp.array([0, 3, 1, 3, 2]), jnp.array([0, 0, 1, 2, 2])

    def total(tab):
        return jnp.sum(code_sums(jnp.sin(tab), code, item, 3) ** 2)

    def plain(tab):
        return jnp.sum(jax.ops.segment_sum(jnp.sin(tab)[code], item, num_segments=3) ** 2)

    @jax.jit
    def both(x, tab):  # one compiled program (eager dispatch compiles every primitive)
        return materialise(x), jax.grad(total)(tab), jax.grad(plain)(tab)

    with x64():
        same, g_total, g_plain = both(jnp.asarray(x), jnp.array([0.3, -0.2, 0.5, 1.1]))
    np.testing.assert_array_equal(same, x)
    np.testing.assert_allclose(g_total, g_plain, rtol=1e-14)


@pytest.mark.parametrize("layout", ["padded", "segments"])
def test_coded_class_steps_are_the_per_start_sparse_steps(layout):
    # Independent routes agree: the batched, coded K-class steps of the EM loop (all starts at once, codes
    # K j + a, padded or segment layout) give sparse_multiclass_e_step / _m_step start by start, to rounding.
    from noisycal_bayes.core.sparse import (CodedResponses, coded_class_e_step, coded_class_m_step,
                                            sparse_multiclass_e_step, sparse_multiclass_m_step)
    from noisycal_bayes.inference._em_loop import padded_class_responses
    from noisycal_bayes.models.inputs import class_arrays
    from noisycal_bayes.simulate import simulate_multiclass

    sim = simulate_multiclass(120, 9, 4, accuracy=0.7, labels_per_item=4, repeat_rate=0.2, seed=3)
    x = class_arrays(sim, "test")
    J, K, G, S = x.n_annotators, x.n_classes, 2, 3
    group = (np.arange(x.n_items) % G).astype(np.int32)
    gold = np.full(x.n_items, -1)
    gold[:10] = sim.y[:10]
    x = x._replace(gold=gold)
    weight = np.random.default_rng(1).exponential(size=x.n_items)
    item, code, padded, by_code, grp, gld, w = padded_class_responses(x, group, weight)
    coded = CodedResponses(jnp.asarray(item), jnp.asarray(code), None if layout == "segments" else padded)
    if layout == "padded":
        assert padded is not None
    else:  # the M-step's scatter over the responses sorted by code
        by = np.argsort(code, kind="stable")
        by_code = (jnp.asarray(item[by]), jnp.asarray(code[by]))
    rng = np.random.default_rng(0)
    C = rng.dirichlet(np.ones(K), size=(S, J, K))
    pi = rng.dirichlet(np.ones(K), size=(S, G))
    with x64():
        ll, T = coded_class_e_step(coded, jnp.asarray(grp), C, pi, jnp.asarray(gld), jnp.asarray(w))
        C2, pi2 = coded_class_m_step(coded, jnp.asarray(grp), G, J, T, 0.5 * np.ones((K, K)), np.ones(K),
                                     jnp.asarray(w), by_code)
        r = (x.item, x.annotator, x.label)
        for s in range(S):
            ll_s, T_s = sparse_multiclass_e_step(r, group, C[s], pi[s], gold, weight)
            np.testing.assert_allclose(ll[s], ll_s, rtol=1e-12)
            np.testing.assert_allclose(np.asarray(T)[:x.n_items, :, s], T_s, rtol=1e-10, atol=1e-14)
            Cm, pm = sparse_multiclass_m_step(r, group, G, J, T_s, 0.5 * np.ones((K, K)), np.ones(K), weight)
            np.testing.assert_allclose(np.asarray(C2)[s], Cm, rtol=1e-10, atol=1e-14)
            np.testing.assert_allclose(np.asarray(pi2)[s], pm, rtol=1e-10, atol=1e-14)
