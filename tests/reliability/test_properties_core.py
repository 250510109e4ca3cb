"""Property tests (hypothesis) for core/ and the metrics: NC-ECE / ECE / SMECE invariances, convex weights,
compressed = per-item likelihood, and fits that do not depend on the order of the items.

Independent routes are NumPy re-implementations written here from the formulas in DESIGN §2-§3, not calls
into the package. Tolerances are rounding tolerances: every quantity is a sum of at most a few hundred
float64 terms of size <= 1 / min(gap) <= 50, so 1e-9 is far above rounding and far below any real error.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from noisycal_bayes import AnnotationSet, Channel, ece, nc_ece, smece
from noisycal_bayes.core import (combine_item_weights, ds_loglik, ds_loglik_rows, em_step, posterior_positive,
                                 rule_weights, x64)
from noisycal_bayes.data import compress_patterns, pad_patterns, padded_size

from ._helpers import property_settings
from .test_properties_data import SCORES, label_matrix
from noisycal_bayes.data import Binning

RULES = ["iv", "equal", "gap", "squared_gap"]
TOL = 1e-9
N_BINS = 10


# ---------------------------------------------------------------------------------------------- strategies
@st.composite
def channels(draw, n_annotators, min_gap=0.02):
    fpr = np.asarray(draw(st.lists(st.floats(0.0, 0.9), min_size=n_annotators, max_size=n_annotators)))
    share = np.asarray(draw(st.lists(st.floats(0.0, 1.0), min_size=n_annotators, max_size=n_annotators)))
    tpr = np.minimum(fpr + min_gap + share * (1.0 - fpr - min_gap), 1.0)
    assume(np.all(tpr - fpr > min_gap / 2))
    return Channel(fpr, tpr)


@st.composite
def scored_designs(draw, max_items=20, max_annotators=3, scores=SCORES):
    lab = draw(label_matrix(max_items=max_items, max_annotators=max_annotators))
    z = np.asarray(draw(st.lists(scores, min_size=lab.shape[0], max_size=lab.shape[0])))
    ch = draw(channels(lab.shape[1]))
    return lab, z, ch


#: Scores at least 1e-6 away from every equal-width edge k / 10.
OFF_EDGE_SCORES = st.builds(lambda k, u: (k + u) / N_BINS, st.integers(0, N_BINS - 1), st.floats(1e-4, 1 - 1e-4))


def numpy_nc_ece(labels, z, fpr, gap, rule, n_bins=N_BINS):
    """NC-ECE from the per-item formula (DESIGN §2-§3), in plain NumPy."""
    obs = labels >= 0
    ytil = np.where(obs, (labels - fpr) / gap, 0.0)
    if rule == "iv":
        mu = np.mean((ytil * obs).sum(1) / obs.sum(1))
        mu = np.clip(mu, 1e-4, 1 - 1e-4)
        tpr = fpr + gap
        var = (mu * tpr * (1 - tpr) + (1 - mu) * fpr * (1 - fpr)) / gap**2
        w = 1.0 / np.maximum(var, 1e-8)
    else:
        w = {"equal": np.ones_like(gap), "gap": gap, "squared_gap": gap**2}[rule]
    W = np.where(obs, w, 0.0)
    W = W / W.sum(1, keepdims=True)
    y = (W * ytil).sum(1)
    idx = np.minimum(np.floor(z * n_bins).astype(int), n_bins - 1)
    sums = np.bincount(idx, weights=y - z, minlength=n_bins)
    return np.abs(sums).sum() / z.size


def numpy_loglik(labels, group, fpr, tpr, prevalence):
    obs, pos = labels >= 0, labels == 1
    l0 = np.where(obs, np.where(pos, np.log(fpr), np.log1p(-fpr)), 0.0).sum(1)
    l1 = np.where(obs, np.where(pos, np.log(tpr), np.log1p(-tpr)), 0.0).sum(1)
    pi = prevalence[group]
    return float(np.logaddexp(np.log1p(-pi) + l0, np.log(pi) + l1).sum())


def off_edges(z, n_bins=N_BINS, eps=1e-6):
    """No score within eps of an equal-width edge (there, z and 1 - z may round into different bins)."""
    return bool(np.all(np.abs(z * n_bins - np.round(z * n_bins)) > eps))


# ---------------------------------------------------------------------------------------------- weights
@property_settings(50)
@given(st.integers(1, 4).flatmap(lambda j: st.tuples(channels(j, min_gap=1e-6), st.floats(0.0, 1.0))),
       st.sampled_from(RULES))
def test_weights_are_convex_for_every_rule(case, rule):
    ch, mu = case
    with x64():
        w = np.asarray(rule_weights(rule, ch.fpr, ch.gap, mu))
    assert np.all(np.isfinite(w)) and np.all(w >= 0)
    assert abs(w.sum() - 1.0) < 1e-12


@property_settings(40)
@given(st.integers(1, 4).flatmap(lambda j: st.tuples(label_matrix(max_items=15, annotators=j), channels(j))),
       st.sampled_from(RULES))
def test_per_item_weights_are_convex_over_the_annotators_who_labelled(case, rule):
    lab, ch = case
    # Pad to 16 rows (fully observed) so that JAX compiles one shape per number of annotators.
    padded = np.concatenate([lab, np.zeros((16 - lab.shape[0], lab.shape[1]), lab.dtype)])
    with x64():
        w = rule_weights(rule, ch.fpr, ch.gap, 0.5)
        W = np.asarray(combine_item_weights(padded >= 0, w))[: lab.shape[0]]
    assert np.all(W >= 0) and np.all(W[lab < 0] == 0)
    np.testing.assert_allclose(W.sum(1), 1.0, atol=1e-12)


# ---------------------------------------------------------------------------------------------- NC-ECE, ECE, SMECE
@property_settings(40)
@given(scored_designs(), st.sampled_from(RULES))
def test_nc_ece_matches_an_independent_numpy_implementation(design, rule):
    lab, z, ch = design
    data = AnnotationSet.from_wide(lab, z)
    got = nc_ece(data, ch, bins=N_BINS, weights=rule).value
    want = numpy_nc_ece(lab, z, ch.fpr, ch.gap, rule)
    assert abs(got - want) <= TOL * max(1.0, abs(want)), (got, want)
    assert got >= 0 and np.isfinite(got)


@property_settings(30)
@given(scored_designs(), st.sampled_from(RULES), st.data())
def test_nc_ece_does_not_depend_on_the_order_of_items_or_annotators(design, rule, data):
    lab, z, ch = design
    base = nc_ece(AnnotationSet.from_wide(lab, z), ch, weights=rule).value
    rows = np.asarray(data.draw(st.permutations(range(lab.shape[0]))))
    cols = np.asarray(data.draw(st.permutations(range(lab.shape[1]))))
    perm = AnnotationSet.from_wide(lab[rows][:, cols], z[rows])
    got = nc_ece(perm, Channel(ch.fpr[cols], ch.tpr[cols]), weights=rule).value
    assert abs(got - base) <= TOL, (got, base)


@property_settings(30)
@given(scored_designs(scores=OFF_EDGE_SCORES), st.sampled_from(RULES))
def test_nc_ece_is_symmetric_under_exchanging_the_classes(design, rule):
    """Y <-> 1 - Y: labels A -> 1 - A, scores z -> 1 - z, channel (fpr, tpr) -> (1 - tpr, 1 - fpr).

    Corrected labels become 1 - Ytilde, residuals change sign, bins mirror: NC-ECE is unchanged (the IV
    rule's variance is symmetric too).
    """
    lab, z, ch = design
    assume(off_edges(z))
    base = nc_ece(AnnotationSet.from_wide(lab, z), ch, weights=rule).value
    flipped = AnnotationSet.from_wide(np.where(lab < 0, -1, 1 - lab), 1.0 - z)
    got = nc_ece(flipped, ch.flipped(), weights=rule).value
    assert abs(got - base) <= TOL, (got, base)


@property_settings(30)
@given(scored_designs())
def test_identity_channel_gives_smece_of_vote_fractions_and_ece_when_annotators_agree(design):
    lab, z, _ = design
    data = AnnotationSet.from_wide(lab, z)
    ident = Channel.identity(lab.shape[1])
    # Equal weights and fpr 0, gap 1: the combined corrected label is the vote fraction.
    got = nc_ece(data, ident, weights="equal").value
    assert abs(got - smece(z, data.vote_fraction())) <= TOL
    # When every annotator of an item gives the same label, every weight rule gives ECE against it.
    agree = np.where(lab < 0, -1, (data.vote_fraction() >= 0.5).astype(np.int8)[:, None])
    d2 = AnnotationSet.from_wide(agree, z)
    y = d2.majority_vote()
    for rule in RULES:
        assert abs(nc_ece(d2, ident, weights=rule).value - ece(z, y)) <= TOL


@property_settings(60)
@given(st.lists(st.tuples(SCORES, st.sampled_from([0, 1])), min_size=1, max_size=60), st.sampled_from([1, 4, 10]))
def test_ece_and_smece_agree_on_binary_labels_and_are_bounded(pairs, n_bins):
    z = np.asarray([p[0] for p in pairs])
    y = np.asarray([p[1] for p in pairs])
    e = ece(z, y, bins=n_bins)
    assert e == smece(z, y.astype(float), bins=n_bins)
    # 0 <= ECE <= mean |y - z| (triangle inequality inside each bin).
    assert 0.0 <= e <= np.mean(np.abs(y - z)) + 1e-12
    # Perfect scores have zero error; permuting items changes nothing.
    assert ece(y.astype(float), y, bins=n_bins) == 0.0
    perm = np.random.default_rng(len(pairs)).permutation(z.size)
    assert abs(ece(z[perm], y[perm], bins=n_bins) - e) <= 1e-12


@property_settings(40)
@given(st.integers(1, 5).flatmap(lambda j: label_matrix(max_items=30, annotators=j)), st.integers(1, 12), st.data())
def test_bin_statistics_are_exact_sums_whatever_the_route(lab, n_bins, data):
    """The per-(bin, mask) sums against a dictionary built item by item; the chunked dense-table pass and the
    sorting route give the same rows in the same order (sums equal up to the order of additions)."""
    from unittest import mock

    from noisycal_bayes.core import bin_stats
    from noisycal_bayes.core import calibration as calibration_module

    n, j = lab.shape
    z = np.asarray(data.draw(st.lists(SCORES, min_size=n, max_size=n)))
    b = np.asarray(data.draw(st.lists(st.integers(0, n_bins - 1), min_size=n, max_size=n)))
    w = np.asarray(data.draw(st.lists(st.floats(0.0, 3.0), min_size=n, max_size=n)))
    want = {}
    for i in range(n):
        key = (int(b[i]), tuple((lab[i] >= 0).tolist()))
        c, s, ls = want.get(key, (0.0, 0.0, np.zeros(j)))
        want[key] = (c + w[i], s + w[i] * z[i], ls + w[i] * (lab[i] == 1))
    got = bin_stats(lab, z, b, n_bins, item_weights=w)
    keys = [(int(k), tuple(m.tolist())) for k, m in zip(got.bin, got.mask)]
    assert sorted(keys) == sorted(want) and len(set(keys)) == len(keys)
    for r, key in enumerate(keys):
        c, s, ls = want[key]
        np.testing.assert_allclose([got.count[r], got.score_sum[r], *got.label_sum[r]], [c, s, *ls], rtol=1e-12,
                                   atol=1e-12)
    with mock.patch.object(calibration_module, "_DENSE_KEYS", 0):
        sorted_route = bin_stats(lab, z, b, n_bins, item_weights=w)
    with mock.patch.object(calibration_module, "_CHUNK", 7):
        chunked = bin_stats(lab, z, b, n_bins, item_weights=w)
    for other in (sorted_route, chunked):
        np.testing.assert_array_equal(other.bin, got.bin)
        np.testing.assert_array_equal(other.mask, got.mask)
        for name in ("count", "score_sum", "label_sum"):
            np.testing.assert_allclose(getattr(other, name), getattr(got, name), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------- likelihood
#: Likelihood cases are padded to one shape (items, annotators, groups, pattern rows) so that JAX compiles
#: the checks once: padded annotators never respond and padded items have count 0, so neither changes
#: anything (which is itself part of what is checked).
N_MAX, J_MAX, G_MAX, ROWS_MAX = 40, 5, 4, 64


@st.composite
def likelihood_cases(draw):
    j = draw(st.integers(1, J_MAX))
    lab = draw(label_matrix(max_items=N_MAX, annotators=j))
    n = lab.shape[0]
    g = draw(st.integers(1, G_MAX))
    group = np.asarray(draw(st.lists(st.integers(0, g - 1), min_size=n, max_size=n)), dtype=np.int64)
    rate = st.floats(1e-3, 1 - 1e-3)
    fpr = np.asarray(draw(st.lists(rate, min_size=j, max_size=j)))
    tpr = np.asarray(draw(st.lists(rate, min_size=j, max_size=j)))  # any rates: the likelihood needs no orientation
    prev = np.asarray(draw(st.lists(rate, min_size=g, max_size=g)))
    return lab, group, g, fpr, tpr, prev


def _pad(a, shape, fill):
    out = np.full(shape, fill, dtype=np.asarray(a).dtype)
    out[tuple(slice(0, k) for k in np.shape(a))] = a
    return out


@__import__("functools").lru_cache(maxsize=None)
def _likelihood_checks():
    import jax

    def checks(lab, group, counts, pat, pgroup, pcounts, fpr, tpr, prev):
        rows = ds_loglik_rows(lab, group, fpr, tpr, prev)
        compressed = ds_loglik(pat, pgroup, pcounts, fpr, tpr, prev)
        t_item = posterior_positive(lab, group, fpr, tpr, prev)
        t_row = posterior_positive(pat, pgroup, fpr, tpr, prev)
        step_i = em_step(lab, group, counts, G_MAX, fpr, tpr, prev)
        step_c = em_step(pat, pgroup, pcounts, G_MAX, fpr, tpr, prev)
        return rows, compressed, t_item, t_row, step_i, step_c

    return jax.jit(checks)


@property_settings(60)
@given(likelihood_cases())
def test_compressed_likelihood_equals_the_per_item_likelihood(case):
    lab, group, g, fpr, tpr, prev = case
    n, j = lab.shape
    pc = compress_patterns(lab, group, g)
    # The package's own padding to a design-fixed size adds zero-count rows only.
    size = padded_size(pc.counts.size, g, j)
    assert pad_patterns(pc, size).counts.sum() == n
    pc = pad_patterns(pc, ROWS_MAX)
    with x64():
        out = _likelihood_checks()(
            _pad(lab, (N_MAX, J_MAX), -1), _pad(group, (N_MAX,), 0), _pad(np.ones(n), (N_MAX,), 0.0),
            _pad(pc.patterns, (ROWS_MAX, J_MAX), -1), pc.group, pc.counts,
            _pad(fpr, (J_MAX,), 0.5), _pad(tpr, (J_MAX,), 0.5), _pad(prev, (G_MAX,), 0.5))
        rows, compressed, t_item, t_row, step_i, step_c = (np.asarray(o) if not isinstance(o, tuple) else
                                                           tuple(np.asarray(x) for x in o) for o in out)
    want = numpy_loglik(lab, group, fpr, tpr, prev)
    scale = max(1.0, abs(want))
    assert abs(rows[:n].sum() - want) <= TOL * scale
    assert abs(float(compressed) - want) <= TOL * scale
    # The E-step: each item's posterior is its row's posterior.
    np.testing.assert_allclose(t_row[pc.inverse], t_item[:n], rtol=0, atol=1e-12)
    # One EM step from the same point, for the real annotators and groups (a group without items is 0/0 in both).
    for a, b, k in zip(step_c, step_i, (j, j, g)):
        a, b = a[:k], b[:k]
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_allclose(a[~np.isnan(a)], b[~np.isnan(b)], rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------------- fits and row order
@pytest.fixture(scope="module")
def fit_data():
    from noisycal_bayes import simulate_annotations

    return simulate_annotations(150, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], curve="overconfident",
                                missing=0.2, seed=5).data


@property_settings(8)
@given(st.permutations(range(150)))
def test_channel_fits_do_not_depend_on_the_order_of_items(fit_data, perm):
    from noisycal_bayes.inference import fit_em
    from noisycal_bayes.reference import fit_em as reference_fit_em

    perm = np.asarray(perm)
    d = fit_data
    p = AnnotationSet(d.labels[perm], d.scores[perm], d.item_ids[perm], d.annotator_ids)
    for fit in (lambda x: fit_em(x, groups=Binning.equal_mass(4), n_starts=3), lambda x: reference_fit_em(x, groups=Binning.equal_mass(4), n_starts=3)):
        a, b = fit(d), fit(p)
        # The fit sees only the compressed (group, pattern) table, which is the same table for any order.
        np.testing.assert_array_equal(a.channel.fpr, b.channel.fpr)
        np.testing.assert_array_equal(a.channel.tpr, b.channel.tpr)
        np.testing.assert_array_equal(a.prevalence, b.prevalence)
    ch = reference_fit_em(d, groups=Binning.equal_mass(4), n_starts=3).channel
    assert abs(nc_ece(d, ch).value - nc_ece(p, ch).value) <= 1e-12
