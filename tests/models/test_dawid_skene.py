"""Tests for noisycal_bayes/models/dawid_skene.py: the NumPyro log density against independent formulas.

Independent routes (STYLE.md, "Testing statistical code honestly", item 3): the log density NumPyro
computes from the model equals (i) the likelihood by hand with the latent label summed out, plus (ii) the
log prior computed with ``scipy.stats``; and the compressed (group, pattern) likelihood equals the
per-item likelihood.
"""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.handlers import seed, substitute, trace
from scipy import stats

from noisycal_bayes.core import x64
from noisycal_bayes.data import compress_patterns, grid_patterns
from noisycal_bayes.models import Prior, dawid_skene, grouped_dawid_skene

from ._jit import jit_log_density, jit_trace_values

FPR = np.array([0.1, 0.25, 0.05])
U = np.array([0.8, 0.5, 0.7])
TPR = FPR + (1 - FPR) * U
PREV = np.array([0.2, 0.55, 0.8])
PRIOR = Prior(fpr=(1.5, 4.0), u=(2.0, 1.2), prevalence=(1.3, 1.7))


def _labels(n=400, seed=0, missing=0.2):
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 3, n)
    y = rng.random(n) < PREV[group]
    labels = (rng.random((n, 3)) < np.where(y[:, None], TPR, FPR)).astype(np.int8)
    drop = rng.random((n, 3)) < missing
    drop[np.arange(n), rng.integers(0, 3, n)] = False  # every item keeps a label
    labels[drop] = -1
    return labels, group.astype(np.int32)


def _loglik_by_hand(labels, group, fpr, tpr, prev):
    """sum_i log[(1 - pi_g) prod_j a_j^A (1 - a_j)^(1 - A) + pi_g prod_j b_j^A (1 - b_j)^(1 - A)], loops in NumPy."""
    total = 0.0
    for row, g in zip(labels, group):
        p0, p1 = 1 - prev[g], prev[g]
        for j, a in enumerate(row):
            if a < 0:
                continue
            p0 *= fpr[j] if a == 1 else 1 - fpr[j]
            p1 *= tpr[j] if a == 1 else 1 - tpr[j]
        total += np.log(p0 + p1)
    return total


def _log_prior_scipy(prior, fpr, u, prev):
    return (stats.beta(*prior.fpr).logpdf(fpr).sum() + stats.beta(*prior.u).logpdf(u).sum()
            + stats.beta(*prior.prevalence).logpdf(prev).sum())


def _log_density(model, *args, params, **kw):
    with x64():
        return jit_log_density(model, args, kw, params)


def test_grouped_log_density_equals_likelihood_by_hand_plus_scipy_prior():
    labels, group = _labels()
    lp = _log_density(grouped_dawid_skene, labels, group, None, params={"fpr": FPR, "u": U, "prevalence": PREV},
                      n_annotators=3, n_groups=3, prior=PRIOR)
    expected = _loglik_by_hand(labels, group, FPR, TPR, PREV) + _log_prior_scipy(PRIOR, FPR, U, PREV)
    np.testing.assert_allclose(lp, expected, rtol=1e-12)


def test_compressed_counts_give_the_per_item_likelihood():
    labels, group = _labels(n=1000, seed=3)
    pc = compress_patterns(labels, group, 3)
    assert pc.patterns.shape[0] < 1000  # compression happened
    params = {"fpr": FPR, "u": U, "prevalence": PREV}
    kw = dict(n_annotators=3, n_groups=3, prior=PRIOR)
    per_item = _log_density(grouped_dawid_skene, labels, group, None, params=params, **kw)
    compressed = _log_density(grouped_dawid_skene, pc.patterns, pc.group, pc.counts, params=params, **kw)
    np.testing.assert_allclose(compressed, per_item, rtol=1e-12)


def test_zero_count_padding_rows_change_nothing():
    labels, group = _labels(n=300, seed=4)
    pc = compress_patterns(labels, group, 3)
    pad = 81 - pc.patterns.shape[0]
    patterns = np.concatenate([pc.patterns, np.full((pad, 3), -1, np.int8)])
    params = {"fpr": FPR, "u": U, "prevalence": PREV}
    kw = dict(n_annotators=3, n_groups=3, prior=PRIOR)
    a = _log_density(grouped_dawid_skene, pc.patterns, pc.group, pc.counts, params=params, **kw)
    b = _log_density(grouped_dawid_skene, patterns, np.concatenate([pc.group, np.zeros(pad, np.int32)]),
                     np.concatenate([pc.counts, np.zeros(pad)]), params=params, **kw)
    np.testing.assert_allclose(b, a, rtol=1e-14)


def test_marginal_log_density_uses_one_prevalence():
    labels, _ = _labels(n=200, seed=5)
    prev = 0.37
    lp = _log_density(dawid_skene, labels, None, None, params={"fpr": FPR, "u": U, "prevalence": prev},
                      n_annotators=3, prior=PRIOR)
    expected = (_loglik_by_hand(labels, np.zeros(200, int), FPR, TPR, [prev])
                + _log_prior_scipy(PRIOR, FPR, U, np.array([prev])))
    np.testing.assert_allclose(lp, expected, rtol=1e-12)


def test_marginal_model_refuses_groups():
    with pytest.raises(ValueError, match="one prevalence"):
        dawid_skene(np.zeros((2, 3), np.int8), n_annotators=3, n_groups=2)


def test_deterministic_sites_expose_tpr_gap_and_row_loglik():
    labels, group = _labels(n=50, seed=6)
    with x64():
        params = {"fpr": jnp.asarray(FPR), "u": jnp.asarray(U), "prevalence": jnp.asarray(PREV)}
        tr = jit_trace_values(lambda: trace(substitute(grouped_dawid_skene, data=params)).get_trace(
            labels, group, None, n_annotators=3, n_groups=3, prior=PRIOR, record_loglik=True))
    np.testing.assert_allclose(tr["tpr"], TPR, rtol=1e-14)
    np.testing.assert_allclose(tr["gap"], TPR - FPR, rtol=1e-14)
    rows = tr["log_likelihood"]
    assert rows.shape == (50,)
    by_hand = [_loglik_by_hand(labels[i:i + 1], group[i:i + 1], FPR, TPR, PREV) for i in range(50)]
    np.testing.assert_allclose(rows, by_hand, rtol=1e-12)


def test_a_missing_response_drops_out():
    # An item labelled only by annotator 1 (label 1): P = (1 - pi) a_1 + pi b_1.
    labels = np.array([[-1, 1, -1]], np.int8)
    with x64():
        lp = _log_density(grouped_dawid_skene, labels, np.array([1]), None,
                          params={"fpr": FPR, "u": U, "prevalence": PREV}, n_annotators=3, n_groups=3, prior=PRIOR)
    expected = np.log((1 - PREV[1]) * FPR[1] + PREV[1] * TPR[1]) + _log_prior_scipy(PRIOR, FPR, U, PREV)
    np.testing.assert_allclose(lp, expected, rtol=1e-12)


def test_prior_draws_are_oriented():
    # The parametrisation tpr = fpr + (1 - fpr) u puts every prior draw in the positive orientation.
    # 5000 annotators in one trace = 5000 independent prior draws of (fpr, u).
    tr = jit_trace_values(lambda: trace(seed(grouped_dawid_skene, 0)).get_trace(
        None, np.zeros(2, np.int32), n_annotators=5000, n_groups=1, prior=Prior(fpr=(0.5, 0.5), u=(0.3, 0.3))))
    gap, fpr, tpr = (tr[k] for k in ("gap", "fpr", "tpr"))
    assert (gap > 0).all() and (tpr <= 1).all()
    np.testing.assert_allclose(tpr, fpr + gap, rtol=1e-6)


def test_prior_predictive_labels_follow_the_channel():
    # With fixed parameters the simulated responses have P(A_j = 1 | y) = fpr_j or tpr_j. Tolerance: the
    # frequency of n Bernoulli draws has sd sqrt(p (1 - p) / n); z = 4.4 for a two-sided false-alarm rate
    # of 1e-5 per comparison (6 comparisons).
    n = 20000
    params = {"fpr": jnp.asarray(FPR), "u": jnp.asarray(U), "prevalence": jnp.asarray(PREV)}
    model = substitute(grouped_dawid_skene, data=params)
    tr = jit_trace_values(lambda: trace(seed(model, 1)).get_trace(None, np.full(n, 2, np.int32), n_annotators=3,
                                                                  n_groups=3, prior=PRIOR))
    y = tr["y"].astype(bool)
    lab = tr["labels"]
    assert lab.shape == (n, 3)
    z = stats.norm.isf(1e-5 / 2)
    for rate, rows in ((FPR, ~y), (TPR, y)):
        freq = lab[rows].mean(axis=0)
        se = np.sqrt(rate * (1 - rate) / rows.sum())
        assert np.all(np.abs(freq - rate) < z * se)
    se = np.sqrt(PREV[2] * (1 - PREV[2]) / n)
    assert abs(y.mean() - PREV[2]) < z * se


@pytest.mark.parametrize("j", [2, 4])
def test_pattern_probabilities_sum_to_one_under_the_model(j):
    # exp(row log-likelihood) over every complete pattern sums to 1 (a proper distribution over responses).
    full = np.array(list(itertools.product((0, 1), repeat=j)), np.int8)
    with x64():
        params = {"fpr": jnp.full(j, 0.2), "u": jnp.full(j, 0.6), "prevalence": jnp.array([0.3])}
        tr = jit_trace_values(lambda: trace(substitute(grouped_dawid_skene, data=params)).get_trace(
            full, np.zeros(len(full), np.int32), None, n_annotators=j, n_groups=1, record_loglik=True))
    np.testing.assert_allclose(np.exp(tr["log_likelihood"]).sum(), 1.0, rtol=1e-12)


@pytest.mark.parametrize("model,n_groups", [(grouped_dawid_skene, 3), (dawid_skene, 1)])
def test_grid_table_gives_the_per_item_likelihood(model, n_groups):
    # The grid layout evaluates the likelihood per (group, pattern) cell without reading the table's rows; the
    # per-item hand loop is an independent route to the same number.
    labels, group = _labels(n=700, seed=8)
    group = group if n_groups > 1 else np.zeros_like(group)
    grid = grid_patterns(compress_patterns(labels, group, n_groups))
    params = {"fpr": FPR, "u": U, "prevalence": PREV[:n_groups] if n_groups > 1 else PREV[0]}
    kw = dict(n_annotators=3, n_groups=n_groups, prior=PRIOR)
    lp = _log_density(model, grid.patterns, grid.group, grid.counts, params=params, grid=True, **kw)
    prev = PREV[:n_groups] if n_groups > 1 else PREV[:1]
    expected = (_loglik_by_hand(labels, group, FPR, TPR, prev)
                + _log_prior_scipy(PRIOR, FPR, U, np.atleast_1d(params["prevalence"])))
    np.testing.assert_allclose(lp, expected, rtol=1e-12)


def test_grid_row_loglik_matches_the_rows_layout_row_by_row():
    labels, group = _labels(n=300, seed=9)
    grid = grid_patterns(compress_patterns(labels, group, 3))
    sites = {}
    for layout in (False, True):
        with x64():
            params = {"fpr": jnp.asarray(FPR), "u": jnp.asarray(U), "prevalence": jnp.asarray(PREV)}
            tr = jit_trace_values(lambda: trace(substitute(seed(grouped_dawid_skene, 0), params)).get_trace(
                grid.patterns, grid.group, grid.counts, n_annotators=3, n_groups=3, prior=PRIOR, grid=layout,
                record_loglik=True))
        sites[layout] = tr["log_likelihood"]
    # Different but equivalent formulas (log_add vs logaddexp): equal to rounding, ~1e-16 absolute on values of order 1.
    np.testing.assert_allclose(sites[True], sites[False], rtol=1e-12, atol=1e-13)


def test_grid_layout_refuses_a_table_of_another_size():
    labels, group = _labels(n=100, seed=10)
    pc = compress_patterns(labels, group, 3)
    with pytest.raises(ValueError, match="grid=True needs the grid table of 81 rows"):
        _log_density(grouped_dawid_skene, pc.patterns, pc.group, pc.counts,
                     params={"fpr": FPR, "u": U, "prevalence": PREV}, n_annotators=3, n_groups=3, prior=PRIOR,
                     grid=True)
