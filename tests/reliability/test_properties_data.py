"""Property tests (hypothesis) for the data layer: AnnotationSet, CSV loaders, binning, pattern compression.

Each property holds for every input the strategies can produce; hypothesis searches for a counterexample
with a fixed, derandomised set of examples (``_helpers.property_settings``), so the run is reproducible.
"""
from __future__ import annotations

import re
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from noisycal_bayes import AnnotationSet
from noisycal_bayes.data import Binning, bin_index, compress_patterns, pad_patterns, padded_size, resolve_groups
from noisycal_bayes.data.loaders import load_annotations_csv

from ._helpers import property_settings

# ---------------------------------------------------------------------------------------------- strategies
INT_IDS = st.integers(-10**12, 10**12)
BIG_IDS = st.integers(2**63, 2**80)  # beyond int64: must survive as Python ints in object arrays
TEXT_IDS = st.text(min_size=1, max_size=6)  # any unicode (no surrogates), including blanks and controls
ID_KINDS = {"int": INT_IDS, "big": BIG_IDS, "text": TEXT_IDS, "mixed": st.one_of(INT_IDS, TEXT_IDS)}
SCORES = st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.7, 1.0]))


@st.composite
def label_matrix(draw, max_items=12, max_annotators=5, annotators=None):
    """(n_items, n_annotators) int8 in {-1, 0, 1}; every item and every annotator has a response."""
    n = draw(st.integers(1, max_items))
    j = annotators if annotators is not None else draw(st.integers(1, max_annotators))
    flat = draw(st.lists(st.sampled_from([-1, 0, 1]), min_size=n * j, max_size=n * j))
    lab = np.asarray(flat, dtype=np.int8).reshape(n, j)
    # Give each empty row and column one response, at a drawn position and value.
    for i in np.flatnonzero((lab < 0).all(axis=1)):
        lab[i, draw(st.integers(0, j - 1))] = draw(st.sampled_from([0, 1]))
    for k in np.flatnonzero((lab < 0).all(axis=0)):
        lab[draw(st.integers(0, n - 1)), k] = draw(st.sampled_from([0, 1]))
    return lab


@st.composite
def designs(draw, max_items=12, max_annotators=5):
    """Labels, unique item ids and annotator ids of one kind, scores, and a row permutation."""
    lab = draw(label_matrix(max_items, max_annotators))
    n, j = lab.shape
    kind = draw(st.sampled_from(sorted(ID_KINDS)))
    items = draw(st.lists(ID_KINDS[kind], min_size=n, max_size=n, unique=True))
    anns = draw(st.lists(ID_KINDS[kind], min_size=j, max_size=j, unique=True))
    scores = np.asarray(draw(st.lists(SCORES, min_size=n, max_size=n)), dtype=np.float64)
    n_obs = int((lab >= 0).sum())
    perm = draw(st.permutations(range(n_obs)))
    return lab, items, anns, scores, np.asarray(perm, dtype=np.int64), kind


def wide_frame(lab, items, anns):
    return pd.DataFrame(np.where(lab < 0, np.nan, lab.astype(np.float64)), index=pd.Index(items, dtype=object),
                        columns=pd.Index(anns, dtype=object))


def content(data: AnnotationSet):
    """Order-free content: {(item, annotator): label}, {item: score}."""
    ii, jj = np.nonzero(data.observed)
    labels = {(data.item_ids[i], data.annotator_ids[j]): int(data.labels[i, j]) for i, j in zip(ii, jj)}
    scores = None if data.scores is None else dict(zip(data.item_ids.tolist(), data.scores.tolist()))
    return labels, scores


def same_ids(a, b) -> bool:
    """Equal ids with equal Python types (7 and '7' are different ids)."""
    return len(a) == len(b) and all(type(x) is type(y) and x == y for x, y in zip(a, b))


# ---------------------------------------------------------------------------------------------- AnnotationSet
@property_settings(40)
@given(designs())
def test_long_wide_round_trip_with_arbitrary_ids_missing_patterns_and_row_orders(design):
    lab, items, anns, scores, perm, kind = design
    wide = AnnotationSet.from_wide(wide_frame(lab, items, anns), pd.Series(scores, index=pd.Index(items, dtype=object)))
    # from_wide keeps the frame's order exactly.
    np.testing.assert_array_equal(wide.labels, lab)
    assert same_ids(wide.item_ids, items) and same_ids(wide.annotator_ids, anns)
    np.testing.assert_array_equal(wide.scores, scores)
    # Long format, rows in any order, scores in a column: the same content.
    long = wide.to_long()
    assert len(long) == int((lab >= 0).sum())
    shuffled = long.iloc[perm].reset_index(drop=True)
    back = AnnotationSet.from_long(shuffled)
    assert content(back) == content(wide)
    # ... and the round trip through long format is the identity on an AnnotationSet built from long format.
    again = AnnotationSet.from_long(back.to_long())
    np.testing.assert_array_equal(again.labels, back.labels)
    np.testing.assert_array_equal(again.scores, back.scores)
    assert same_ids(again.item_ids, back.item_ids) and same_ids(again.annotator_ids, back.annotator_ids)


@property_settings(40)
@given(designs())
def test_from_long_does_not_depend_on_row_order(design):
    lab, items, anns, scores, perm, kind = design
    long = AnnotationSet.from_wide(wide_frame(lab, items, anns), scores).to_long()
    a = AnnotationSet.from_long(long)
    b = AnnotationSet.from_long(long.iloc[perm].reset_index(drop=True))
    assert content(a) == content(b)
    if kind != "mixed":
        # Sortable ids are sorted, so the arrays themselves (and everything computed from them) agree.
        np.testing.assert_array_equal(a.labels, b.labels)
        np.testing.assert_array_equal(a.scores, b.scores)
        assert same_ids(a.item_ids, b.item_ids) and same_ids(a.annotator_ids, b.annotator_ids)


@property_settings(40)
@given(designs(), st.data())
def test_votes_do_not_depend_on_annotator_order_and_subset_is_a_restriction(design, data):
    lab, items, anns, scores, _, _ = design
    d = AnnotationSet.from_wide(lab, scores)
    cols = np.asarray(data.draw(st.permutations(range(lab.shape[1]))))
    p = AnnotationSet.from_wide(lab[:, cols], scores)
    for ties in ("positive", "negative"):
        np.testing.assert_array_equal(d.majority_vote(ties=ties), p.majority_vote(ties=ties))
    np.testing.assert_array_equal(d.vote_fraction(), p.vote_fraction())
    assert d.n_ties() == p.n_ties()
    frac = d.vote_fraction()
    assert np.all((frac >= 0) & (frac <= 1))
    # The two tie rules differ exactly on the tied items.
    differ = d.majority_vote(ties="positive") != d.majority_vote(ties="negative")
    assert int(differ.sum()) == d.n_ties()
    np.testing.assert_array_equal(differ, frac == 0.5)
    # subset: rows restricted, annotators left without a label dropped.
    rows = np.asarray(data.draw(st.lists(st.integers(0, lab.shape[0] - 1), min_size=1, max_size=lab.shape[0],
                                         unique=True)))
    s = d.subset(rows)
    keep = (lab[rows] >= 0).any(axis=0)
    np.testing.assert_array_equal(s.labels, lab[rows][:, keep])
    np.testing.assert_array_equal(s.scores, scores[rows])
    assert list(s.annotator_ids) == list(np.arange(lab.shape[1])[keep])


# ---------------------------------------------------------------------------------------------- CSV loaders
_INT_LIKE = re.compile(r"^[+-]?\d+$")  # the loader reads such ids as integers (documented)
CSV_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=8).filter(
    lambda s: s == s.strip() and not _INT_LIKE.match(s))


@property_settings(40)
@given(label_matrix(max_items=10, max_annotators=4), st.data())
def test_csv_long_round_trip(tmp_path_factory, lab, data):
    n, j = lab.shape
    kind = data.draw(st.sampled_from(["int", "text"]))
    ids = INT_IDS if kind == "int" else CSV_TEXT
    items = data.draw(st.lists(ids, min_size=n, max_size=n, unique=True))
    anns = data.draw(st.lists(ids, min_size=j, max_size=j, unique=True))
    scores = np.asarray(data.draw(st.lists(SCORES, min_size=n, max_size=n)))
    ref = AnnotationSet.from_wide(wide_frame(lab, items, anns), pd.Series(scores, index=pd.Index(items, dtype=object)))
    long = ref.to_long()
    perm = data.draw(st.permutations(range(len(long))))
    path = tmp_path_factory.mktemp("csv") / "labels.csv"
    # repr() round-trips floats exactly; pandas quotes ids holding commas, quotes or leading signs.
    long.iloc[list(perm)].to_csv(path, index=False, float_format=None)
    got = load_annotations_csv(path)
    assert content(got) == content(ref)


# ---------------------------------------------------------------------------------------------- binning
@property_settings(80)
@given(st.lists(SCORES, min_size=1, max_size=40), st.integers(1, 12))
def test_equal_mass_bins_are_valid_and_never_empty(scores, n_bins):
    z = np.asarray(scores)
    edges = Binning.equal_mass(n_bins).edges_for(z)
    assert edges[0] == 0.0 and edges[-1] == 1.0 and np.all(np.diff(edges) > 0)
    assert edges.size - 1 <= n_bins
    idx = bin_index(z, edges)
    assert idx.min() >= 0 and idx.max() <= edges.size - 2
    # Every bin holds at least one of the scores it was computed from.
    assert np.all(np.bincount(idx, minlength=edges.size - 1) > 0), (edges.tolist(), sorted(z.tolist()))


@property_settings(80)
@given(st.lists(SCORES, min_size=1, max_size=40), st.integers(1, 12), st.sampled_from(["equal_width", "equal_mass"]))
def test_bin_index_follows_the_half_open_convention(scores, n_bins, kind):
    z = np.asarray(scores)
    edges = getattr(Binning, kind)(n_bins).edges_for(z)
    idx = bin_index(z, edges)
    last = edges.size - 2
    lower, upper = edges[idx], edges[idx + 1]
    assert np.all(lower <= z)
    assert np.all((z < upper) | ((idx == last) & (z <= 1.0)))


@property_settings(60)
@given(st.lists(SCORES, min_size=1, max_size=40), st.integers(1, 8))
def test_resolve_groups_uses_every_label_and_ignores_item_order(scores, n_groups):
    z = np.asarray(scores)
    idx, g = resolve_groups(z, Binning.equal_mass(n_groups), z.size)
    assert 1 <= g <= n_groups
    assert set(idx.tolist()) == set(range(g))
    # Groups are a function of the score: permuting the items permutes the groups.
    perm = np.random.default_rng(len(scores)).permutation(z.size)
    idx_p, g_p = resolve_groups(z[perm], Binning.equal_mass(n_groups), z.size)
    assert g_p == g
    np.testing.assert_array_equal(idx_p, idx[perm])
    # Groups are ordered by score.
    order = np.argsort(z, kind="stable")
    assert np.all(np.diff(idx[order]) >= 0)


# ---------------------------------------------------------------------------------------------- compression
@st.composite
def grouped_labels(draw):
    j = draw(st.one_of(st.integers(1, 6), st.sampled_from([34, 37, 40])))  # base-3 code, group-free code, row sort
    lab = draw(label_matrix(max_items=30, annotators=j))
    n = lab.shape[0]
    n_groups = draw(st.integers(1, 4))
    group = np.asarray(draw(st.lists(st.integers(0, n_groups - 1), min_size=n, max_size=n)), dtype=np.int64)
    perm = np.asarray(draw(st.permutations(range(n))))
    return lab, group, n_groups, perm


@property_settings(40)
@given(grouped_labels())
def test_compression_is_lossless_and_order_free(case):
    lab, group, n_groups, perm = case
    pc = compress_patterns(lab, group, n_groups)
    # Lossless: every item is its row.
    np.testing.assert_array_equal(pc.patterns[pc.inverse], lab)
    np.testing.assert_array_equal(pc.group[pc.inverse], group)
    np.testing.assert_array_equal(pc.counts, np.bincount(pc.inverse, minlength=pc.counts.size))
    assert pc.counts.sum() == lab.shape[0] and np.all(pc.counts >= 1)
    rows = {(int(g),) + tuple(p.tolist()) for g, p in zip(pc.group, pc.patterns)}
    assert len(rows) == pc.counts.size  # distinct (group, pattern) rows
    # Order-free: permuting the items gives the same table.
    pp = compress_patterns(lab[perm], group[perm], n_groups)
    np.testing.assert_array_equal(pp.patterns, pc.patterns)
    np.testing.assert_array_equal(pp.group, pc.group)
    np.testing.assert_array_equal(pp.counts, pc.counts)
    # The bounded-memory pass (chunked, dense code table) and the sorting route give identical tables, in
    # chunks of any size.
    from noisycal_bayes.data import compress as compress_module

    with mock.patch.object(compress_module, "_DENSE_CODES", 0):
        sorted_route = compress_patterns(lab, group, n_groups)
    with mock.patch.object(compress_module, "_CHUNK", 7):
        chunked = compress_patterns(lab, group, n_groups)
    for other in (sorted_route, chunked):
        for a, b in zip(other, pc):
            np.testing.assert_array_equal(a, b)
    # Padding adds zero-count rows only.
    size = padded_size(pc.counts.size, n_groups, lab.shape[1])
    padded = pad_patterns(pc, size)
    assert padded.counts.size == size >= pc.counts.size
    assert padded.counts.sum() == pc.counts.sum() and np.all(padded.counts[pc.counts.size:] == 0)


def test_compression_rejects_nothing_silently_for_the_largest_code():
    """J = 33 annotators and several groups: the base-3 code with the group must not overflow int64."""
    rng = np.random.default_rng(0)
    lab = rng.integers(-1, 2, size=(200, 33)).astype(np.int8)
    lab[:, 0] = rng.integers(0, 2, size=200)
    group = rng.integers(0, 7, size=200)
    pc = compress_patterns(lab, group, 7)
    np.testing.assert_array_equal(pc.patterns[pc.inverse], lab)
    np.testing.assert_array_equal(pc.group[pc.inverse], group)


@pytest.mark.parametrize("kind", ["int", "big", "text"])
def test_huge_and_unicode_ids_survive(kind):
    ids = {"int": [10**12, -5, 0], "big": [2**70, 2**64 + 1, 2**63], "text": ["名前", "α" * 5000, "a,b\"c"]}[kind]
    long = pd.DataFrame({"item": ids * 2, "annotator": ["x"] * 3 + ["y"] * 3, "label": [1, 0, 1, 1, 1, 0]})
    d = AnnotationSet.from_long(long, pd.Series([0.1, 0.5, 0.9], index=pd.Index(ids, dtype=object)))
    assert sorted(d.item_ids.tolist(), key=repr) == sorted(ids, key=repr)
    assert all(type(i) is type(ids[0]) for i in d.item_ids)
    assert content(d)[0] == {(i, a): y for i, a, y in zip(long["item"], long["annotator"], long["label"])}
