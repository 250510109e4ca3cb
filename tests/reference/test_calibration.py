"""Tests for noisycal_bayes/reference/calibration.py: public ece, smece and nc_ece."""
import numpy as np
import pandas as pd
import pytest

from noisycal_bayes import AnnotationSet, Binning, Channel, ece, nc_ece, simulate_annotations, smece


def _ece_by_hand(z, y, n_bins):
    """sum_k (n_k / n) |mean_{B_k}(y - z)| with bins [k/M, (k+1)/M), the last including 1."""
    k = np.minimum(np.floor(np.asarray(z) * n_bins), n_bins - 1).astype(int)
    return sum((k == b).mean() * abs((np.asarray(y) - z)[k == b].mean()) for b in range(n_bins) if (k == b).any())


def _sim(seed=0, n=400, missing=0.3, curve="overconfident"):
    return simulate_annotations(n, fpr=[0.1, 0.2, 0.05], tpr=[0.85, 0.7, 0.65], curve=curve, missing=missing,
                                seed=seed)


# ---------------------------------------------------------------------------------------- ece / smece
def test_ece_small_example_by_hand():
    # Bin [0, .5): scores .1, .3 with labels 0, 1 -> mean residual (-.1 + .7) / 2 = .3, weight 2/4.
    # Bin [.5, 1]: scores .6, 1.0 with labels 0, 1 -> mean residual (-.6 + 0) / 2 = -.3, weight 2/4.
    assert ece([0.1, 0.3, 0.6, 1.0], [0, 1, 0, 1], bins=2) == pytest.approx(0.3, abs=1e-15)


def test_ece_matches_direct_formula_and_binning_objects():
    rng = np.random.default_rng(1)
    z = rng.random(500)
    y = (rng.random(500) < z ** 1.5).astype(int)
    assert ece(z, y) == pytest.approx(_ece_by_hand(z, y, 10), rel=1e-12)
    assert ece(z, y, bins=7) == pytest.approx(_ece_by_hand(z, y, 7), rel=1e-12)
    assert ece(z, y, bins=Binning.equal_width(7)) == ece(z, y, bins=7)
    edges = Binning.equal_mass(5).edges_for(z)
    k = np.searchsorted(edges[1:-1], z, side="right")
    by_hand = sum(abs((y - z)[k == b].sum()) for b in range(5)) / 500
    assert ece(z, y, bins=Binning.equal_mass(5)) == pytest.approx(by_hand, rel=1e-12)


def test_smece_on_hard_labels_equals_ece():
    rng = np.random.default_rng(2)
    z = rng.random(300)
    y = (rng.random(300) < z).astype(int)
    for bins in (5, 10, Binning.equal_mass(4)):
        assert smece(z, y.astype(float), bins=bins) == pytest.approx(ece(z, y, bins=bins), rel=1e-12)
    q = rng.random(300)
    assert smece(z, q, bins=6) == pytest.approx(_ece_by_hand(z, q, 6), rel=1e-12)


@pytest.mark.parametrize("scores,labels,pattern", [
    ([0.1, np.nan, 0.3], [0, 1, 0], r"`scores` must be finite; got NaN or inf at items \[1\]"),
    ([0.1, 0.2, np.inf], [0, 1, 0], r"`scores` must be finite; got NaN or inf at items \[2\]"),
    ([0.1, 1.2, 0.3], [0, 1, 0], r"`scores` must lie in \[0, 1\]; got \[1\.2\] at items \[1\]"),
    ([0.1, 0.2, 0.3], [0, 2, 0], r"`labels` must be 0 or 1; got \[2\.0\] at positions \[1\]"),
    ([0.1, 0.2, 0.3], ["no", "yes", "no"], r"non-numeric values \['no', 'yes'\] at positions \[0, 1, 2\]"),
    ([0.1, 0.2, 0.3], [0, np.nan, 1], r"`labels` contains missing values at positions \[1\]"),
    ([0.1, 0.2, 0.3], [0, 1], r"must have the same length; got 3 and 2"),
    ([], [], r"`scores` is empty"),
])
def test_ece_bad_input(scores, labels, pattern):
    with pytest.raises(ValueError, match=pattern):
        ece(scores, labels)


def test_smece_bad_input():
    with pytest.raises(ValueError, match=r"`soft_labels` must lie in \[0, 1\]; got \[1\.5\] at items \[0\]"):
        smece([0.2, 0.4], [1.5, 0.3])
    with pytest.raises(ValueError, match="`bins` must be an int"):
        smece([0.2, 0.4], [0.5, 0.3], bins=2.0)


def test_ece_does_not_modify_inputs():
    z, y = np.array([0.2, 0.7, 0.9]), np.array([0, 1, 1])
    zc, yc = z.copy(), y.copy()
    ece(z, y)
    smece(z, y.astype(float))
    np.testing.assert_array_equal(z, zc)
    np.testing.assert_array_equal(y, yc)


# ---------------------------------------------------------------------------------------- nc_ece invariances
def test_identity_channel_nc_ece_equals_ece_per_annotator():
    sim = _sim(3, missing=0.0)
    z = sim.data.scores
    for j in range(3):
        one = AnnotationSet.from_wide(sim.data.labels[:, [j]], z)
        for weights in ("iv", "equal", "gap", "squared_gap"):
            got = nc_ece(one, Channel.identity(1), weights=weights).value
            assert got == pytest.approx(ece(z, sim.data.labels[:, j]), rel=1e-12)


def test_identity_channel_equal_weights_is_smece_on_vote_fractions():
    sim = _sim(4, missing=0.4)
    data = sim.data
    assert data.has_missing
    target = smece(data.scores, data.vote_fraction(), bins=8)
    # IV weights under the identity channel hit the variance floor for every annotator: equal weights.
    for weights in ("equal", "iv", [1.0, 1.0, 1.0]):
        assert nc_ece(data, Channel.identity(3), bins=8, weights=weights).value == pytest.approx(target, rel=1e-12)
    # Unequal weights with missing responses give a different number (the check can fail).
    other = nc_ece(data, Channel.identity(3), bins=8, weights=[0.7, 0.2, 0.1]).value
    assert abs(other - target) > 1e-6


def test_nc_ece_matches_per_item_loop_with_missing_responses():
    sim = _sim(5, n=150, missing=0.4)
    data, ch = sim.data, sim.channel
    w = np.array([0.5, 0.2, 0.3])
    resid = []
    for row, zi in zip(data.labels, data.scores):
        seen = row >= 0
        ww = w[seen] / w[seen].sum()
        resid.append(np.sum(ww * (row[seen] - ch.fpr[seen]) / ch.gap[seen]) - zi)
    expected = _ece_by_hand(data.scores, np.array(resid) + data.scores, 6)
    assert nc_ece(data, ch, bins=6, weights=w).value == pytest.approx(expected, rel=1e-12)


def test_permuting_items_or_annotators_changes_nothing():
    sim = _sim(6)
    data, ch = sim.data, sim.channel
    base = nc_ece(data, ch).value
    long = data.to_long()
    shuffled = long.sample(frac=1.0, random_state=np.random.RandomState(0))  # a local RNG, not the global one
    # Rename items so that their sorted order is a permutation of the original order.
    renamed = shuffled.assign(item=shuffled["item"].map(lambda i: f"i{(i * 7919) % 1009}"))
    perm_items = AnnotationSet.from_long(renamed)
    assert nc_ece(perm_items, ch).value == pytest.approx(base, rel=1e-12)
    order = [2, 0, 1]
    perm_ann = AnnotationSet.from_wide(data.labels[:, order], data.scores)
    ch_perm = Channel(ch.fpr[order], ch.tpr[order])
    for weights in ("iv", "gap"):
        assert nc_ece(perm_ann, ch_perm, weights=weights).value == pytest.approx(nc_ece(data, ch, weights=weights).value,
                                                                                rel=1e-12)
    ys = sim.clean_labels
    pi = np.random.default_rng(1).permutation(data.n_items)
    assert ece(data.scores[pi], ys[pi]) == pytest.approx(ece(data.scores, ys), rel=1e-12)


def test_flipping_label_orientation_gives_the_same_nc_ece():
    # A -> 1 - A with channel.flipped() and scores 1 - z: every corrected residual changes sign and
    # mirrored bins hold the same items (continuous scores avoid the edges), so NC-ECE is unchanged.
    sim = _sim(7, missing=0.3)
    data, ch = sim.data, sim.channel
    flipped_labels = np.where(data.labels >= 0, 1 - data.labels, -1)
    flipped = AnnotationSet.from_wide(flipped_labels, 1 - data.scores)
    for weights in ("iv", "equal", "gap", "squared_gap"):
        a = nc_ece(data, ch, weights=weights)
        b = nc_ece(flipped, ch.flipped(), weights=weights)
        assert b.value == pytest.approx(a.value, rel=1e-10)
        np.testing.assert_allclose(b.weights, a.weights, rtol=1e-10)
    # Without flipping the channel the answer changes (the check can fail).
    assert abs(nc_ece(flipped, ch).value - nc_ece(data, ch).value) > 1e-3


def test_result_table_and_record():
    sim = _sim(8, n=300)
    res = nc_ece(sim.data, sim.channel, bins=5, weights="gap")
    t = res.table
    assert list(t.columns) == ["bin", "lower", "upper", "count", "mean_score", "corrected_frequency", "residual"]
    assert t["count"].sum() == 300
    np.testing.assert_allclose(t["residual"], t["corrected_frequency"] - t["mean_score"], atol=1e-12)
    assert res.value == pytest.approx(float((t["count"] / 300 * t["residual"].abs()).sum()), rel=1e-12)
    assert res.weights_rule == "gap" and res.channel is sim.channel
    np.testing.assert_allclose(res.weights, sim.channel.gap / sim.channel.gap.sum())
    np.testing.assert_array_equal(res.edges, [0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert float(res) == res.value
    assert "sample oracle" in res.target
    explicit = nc_ece(sim.data, sim.channel, weights=[2.0, 1.0, 1.0])
    assert explicit.weights_rule == "explicit"
    np.testing.assert_allclose(explicit.weights, [0.5, 0.25, 0.25])


def test_empty_bins_have_nan_means_and_do_not_count():
    data = AnnotationSet.from_wide(np.array([[1, 0], [0, 0], [1, 1]]), [0.05, 0.1, 0.95])
    res = nc_ece(data, Channel.identity(2), bins=4)
    assert res.table["count"].tolist() == [2, 0, 0, 1]
    assert res.table["mean_score"].isna().tolist() == [False, True, True, False]
    # bin 0: corrected labels .5, 0 vs scores .05, .1 -> |.5 - .15| = .35; bin 3: |1 - .95| = .05.
    assert res.value == pytest.approx((0.35 + 0.05) / 3, rel=1e-12)


def test_edges_argument_overrides_bins():
    sim = _sim(9)
    edges = [0.0, 0.3, 0.55, 1.0]
    a = nc_ece(sim.data, sim.channel, edges=edges)
    b = nc_ece(sim.data, sim.channel, bins=Binning.from_edges(edges))
    assert a.value == b.value
    np.testing.assert_array_equal(a.edges, edges)


# ---------------------------------------------------------------------------------------- nc_ece bad input
def test_nc_ece_bad_input():
    sim = _sim(10, n=50)
    data = sim.data
    with pytest.raises(ValueError, match="needs classifier scores"):
        nc_ece(AnnotationSet.from_wide(data.labels), sim.channel)
    with pytest.raises(ValueError, match="`channel` must be a Channel; got tuple"):
        nc_ece(data, ([0.1] * 3, [0.9] * 3))
    with pytest.raises(ValueError, match="`channel` has 2 annotators but the data has 3"):
        nc_ece(data, Channel.identity(2))
    with pytest.raises(ValueError, match=r"`weights` must be one of .* got 'inverse'"):
        nc_ece(data, sim.channel, weights="inverse")
    with pytest.raises(ValueError, match=r"explicit `weights` must have shape \(3,\); got \(2,\)"):
        nc_ece(data, sim.channel, weights=[0.5, 0.5])
    with pytest.raises(ValueError, match=r"finite, non-negative and not all zero; got \[1\.0, -1\.0, 1\.0\]"):
        nc_ece(data, sim.channel, weights=[1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="must start at 0 and end at 1"):
        nc_ece(data, sim.channel, edges=[0.1, 0.5, 1.0])
    with pytest.raises(ValueError, match="`bins` must be an int"):
        nc_ece(data, sim.channel, bins="10")


def test_zero_weight_annotator_alone_on_an_item_is_named():
    data = AnnotationSet.from_wide(pd.DataFrame({"a": [1, np.nan, 0], "b": [1, 0, np.nan]}, index=["p", "q", "r"]),
                                   [0.2, 0.5, 0.7])
    with pytest.raises(ValueError, match=r"items \['r'\] were labelled only by annotators with zero weight"):
        nc_ece(data, Channel.identity(2), weights=[0.0, 1.0])
    with pytest.raises(ValueError, match=r"items \['q'\] were labelled only by annotators with zero weight"):
        nc_ece(data, Channel.identity(2), weights=[1.0, 0.0])
    # A zero weight is fine when every item has another annotator with weight: it ignores that annotator.
    full = AnnotationSet.from_wide(np.array([[1, 0], [0, 0], [1, 1]]), [0.2, 0.5, 0.7])
    value = nc_ece(full, Channel.identity(2), bins=2, weights=[1.0, 0.0]).value
    assert value == pytest.approx(ece(full.scores, full.labels[:, 0], bins=2), rel=1e-12)
