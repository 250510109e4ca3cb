"""Tests for noisycal_bayes/data/responses.py and the sparse storage of AnnotationSet (issue 16, items 3-5).

Every expectation is computed by an independent route: a Python loop over the cells of a dense matrix, a
stable NumPy sort, pandas group-bys, or a hand-written example.
"""
import dataclasses
import pickle
import re
import tracemalloc

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes import AnnotationSet
from noisycal_bayes.core.tables import Responses
from noisycal_bayes.data.responses import pair_keys, repeated_runs, sort_responses


def _dense(seed=0, n=40, j=6, missing=0.4):
    """A random dense label matrix with -1 for missing and every row and column observed."""
    rng = np.random.default_rng(seed)
    lab = rng.integers(0, 2, (n, j)).astype(np.int8)
    lab[rng.random((n, j)) < missing] = -1
    lab[np.arange(n), np.arange(n) % j] = rng.integers(0, 2, n)  # every item and annotator labelled at least once
    return lab


def _triples_by_loop(lab):
    """(item, annotator, label) of a dense matrix, row by row: the definition of the sorted responses."""
    return [(i, j, int(lab[i, j])) for i in range(lab.shape[0]) for j in range(lab.shape[1]) if lab[i, j] >= 0]


# ------------------------------------------------------------------------------------ dense <-> responses
def test_dense_constructor_stores_the_triples_row_by_row():
    lab = _dense()
    data = AnnotationSet(lab, None, np.arange(40).astype(object), np.arange(6).astype(object))
    r = data.responses
    assert isinstance(r, Responses)
    assert (r.item.dtype, r.annotator.dtype, r.label.dtype) == (np.int32, np.int32, np.int8)
    assert list(zip(r.item.tolist(), r.annotator.tolist(), r.label.tolist())) == _triples_by_loop(lab)
    assert data.n_responses == int((lab >= 0).sum()) and data.n_repeated == 0 and not data.has_repeats
    for arr in r:
        assert not arr.flags.writeable


@pytest.mark.parametrize("shuffle", [False, True])
def test_from_responses_round_trips_to_the_dense_matrix(shuffle):
    lab = _dense(seed=1)
    triples = np.array(_triples_by_loop(lab))
    if shuffle:
        triples = triples[np.random.default_rng(2).permutation(len(triples))]
    data = AnnotationSet.from_responses(triples[:, 0], triples[:, 1], triples[:, 2])
    np.testing.assert_array_equal(data.labels, lab)
    assert data.has_missing == bool((lab < 0).any())
    np.testing.assert_array_equal(data.observed, lab >= 0)
    dense = AnnotationSet(lab, None, data.item_ids, data.annotator_ids)
    for a, b in zip(data.responses, dense.responses):
        np.testing.assert_array_equal(a, b)


def test_full_matrix_has_no_missing():
    data = AnnotationSet.from_responses([0, 0, 1, 1], [0, 1, 0, 1], [1, 0, 0, 1])
    assert not data.has_missing and data.labels.tolist() == [[1, 0], [0, 1]]


def test_dense_view_is_built_once_and_cached():
    data = AnnotationSet.from_responses([0, 1, 1], [0, 0, 1], [1, 0, 1])
    assert data.labels is data.labels
    assert not data.labels.flags.writeable


# ------------------------------------------------------------------------------------ sorting
def test_sort_responses_agrees_with_a_stable_sort_on_both_routes():
    rng = np.random.default_rng(3)
    item = rng.integers(0, 50, 2000)
    ann = rng.integers(0, 7, 2000)
    lab = rng.integers(0, 2, 2000)
    # Route 1 packs the 11 bits of input position into the keys; route 2 (n_annotators = 2**55 makes keys of
    # 61 bits, too wide to pack) argsorts and restores input order within runs of ties. 2000 responses on
    # 350 pairs: many repeated pairs, so the ties matter.
    for n_ann in (7, 2 ** 55):
        key, order = sort_responses(item, ann, lab, n_ann)
        expect = np.argsort(item.astype(np.int64) * n_ann + ann, kind="stable")
        np.testing.assert_array_equal(order, expect)
        np.testing.assert_array_equal(key, (item.astype(np.int64) * n_ann + ann)[expect])


def test_sorted_input_is_not_reordered():
    key, order = sort_responses(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 0]), np.array([1, 0, 1, 1]), 2)
    assert order is None
    later, starts = repeated_runs(key)
    assert later.tolist() == [False, False, False, True] and starts.tolist() == [2]


def test_pair_keys_do_not_modify_the_input():
    item = np.array([3, 1], dtype=np.int64)
    pair_keys(item, np.array([1, 0]), 5)
    assert item.tolist() == [3, 1]


def test_permuting_the_input_changes_nothing_but_the_order_of_repeats():
    rng = np.random.default_rng(4)
    item, ann, lab = rng.integers(0, 30, 300), rng.integers(0, 5, 300), rng.integers(0, 2, 300)
    a = AnnotationSet.from_responses(item, ann, lab, repeated="first")
    perm = rng.permutation(300)
    b = AnnotationSet.from_responses(item[perm], ann[perm], lab[perm], repeated="keep")
    assert b.has_repeats
    # The same multiset of (item, annotator, label) triples; counts per item do not depend on order.
    ta = sorted(zip(*[x.tolist() for x in AnnotationSet.from_responses(item, ann, lab).responses]))
    tb = sorted(zip(*[x.tolist() for x in b.responses]))
    assert ta == tb
    np.testing.assert_allclose(b.vote_fraction(), AnnotationSet.from_responses(item, ann, lab).vote_fraction())
    assert a.n_responses == len(set(zip(item.tolist(), ann.tolist())))


# ------------------------------------------------------------------------------------ repeated labels
ITEM, ANN, LAB = [2, 0, 2, 1, 2, 0, 1], [1, 0, 1, 0, 0, 1, 0], [1, 1, 0, 0, 1, 0, 1]
# Pairs: (0,0):[1]; (0,1):[0]; (1,0):[0, 1] repeated; (2,0):[1]; (2,1):[1, 0] repeated (input order kept).


def test_repeats_are_kept_as_responses_in_input_order():
    data = AnnotationSet.from_responses(ITEM, ANN, LAB, annotator_ids=["u", "v"])
    r = data.responses
    assert list(zip(r.item.tolist(), r.annotator.tolist(), r.label.tolist())) == [
        (0, 0, 1), (0, 1, 0), (1, 0, 0), (1, 0, 1), (2, 0, 1), (2, 1, 1), (2, 1, 0)]
    assert data.n_repeated == 2 and data.has_repeats and data.n_responses == 7
    # Every response is a vote: item 1 has votes [0, 1] (a tie), item 2 has [1, 1, 0].
    np.testing.assert_allclose(data.vote_fraction(), [0.5, 0.5, 2 / 3])
    np.testing.assert_array_equal(data.majority_vote(ties="negative"), [0, 0, 1])
    assert data.n_ties() == 2
    assert "repeated_pairs=2" in repr(data)
    s = data.summary()
    assert (s["repeated_pairs"], s["repeated_responses"], s["responses"]) == (2, 2, 7)


def test_dense_view_of_repeats_raises_naming_the_pairs():
    data = AnnotationSet.from_responses(ITEM, ANN, LAB, annotator_ids=["u", "v"])
    with pytest.raises(ValueError, match=re.escape("has 2 repeated (item, annotator) pairs [(1, 'u'), (2, 'v')]")) as e:
        data.labels
    assert ".responses" in str(e.value) and "repeated='first'" in str(e.value)
    np.testing.assert_array_equal(data.observed, [[True, True], [True, False], [True, True]])
    assert data.has_missing


def test_repeated_first_keeps_the_first_label_in_input_order():
    data = AnnotationSet.from_responses(ITEM, ANN, LAB, repeated="first")
    assert data.labels.tolist() == [[1, 0], [0, -1], [1, 1]]
    assert data.n_repeated == 0 and data.n_responses == 5


def test_repeated_error_names_the_pairs():
    with pytest.raises(ValueError, match=re.escape("2 repeated (item, annotator) pairs [(1, 'u'), (2, 'v')]: an "
                                                   "annotator labelled the same item more than once")):
        AnnotationSet.from_responses(ITEM, ANN, LAB, annotator_ids=["u", "v"], repeated="error")
    with pytest.raises(ValueError, match=r"`repeated` must be one of \('keep', 'first', 'error'\); got 'last'"):
        AnnotationSet.from_responses(ITEM, ANN, LAB, repeated="last")


def test_long_round_trip_keeps_repeats():
    data = AnnotationSet.from_responses(ITEM, ANN, LAB, scores=[0.1, 0.5, 0.9])
    long = data.to_long()
    assert len(long) == 7 and long["score"].tolist()[-1] == 0.9
    back = AnnotationSet.from_long(long)
    for a, b in zip(back.responses, data.responses):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------------ votes, subset, summary
def test_votes_agree_with_the_dense_computation():
    lab = _dense(seed=5, n=200, j=9)
    data = AnnotationSet.from_wide(np.where(lab < 0, np.nan, lab))
    pos, n = (lab == 1).sum(axis=1), (lab >= 0).sum(axis=1)
    np.testing.assert_allclose(data.vote_fraction(), pos / n)
    np.testing.assert_array_equal(data.majority_vote(), np.where(2 * pos >= n, 1, 0))
    np.testing.assert_array_equal(data.majority_vote(ties="negative"), np.where(2 * pos > n, 1, 0))
    assert data.n_ties() == int((2 * pos == n).sum())


def test_subset_agrees_with_the_dense_subset_in_the_given_order():
    lab = _dense(seed=6, n=30, j=5, missing=0.7)
    data = AnnotationSet(lab, np.linspace(0, 1, 30), np.array([f"i{k}" for k in range(30)], dtype=object),
                         np.array(list("abcde"), dtype=object), np.tile([1, -1, 0], 10))
    rows = [17, 3, 25, 4]
    sub = data.subset(rows)
    keep = (lab[rows] >= 0).any(axis=0)
    np.testing.assert_array_equal(sub.labels, lab[rows][:, keep])
    assert sub.item_ids.tolist() == [f"i{k}" for k in rows]
    assert sub.annotator_ids.tolist() == np.array(list("abcde"))[keep].tolist()
    np.testing.assert_allclose(sub.scores, np.linspace(0, 1, 30)[rows])
    assert sub.gold.tolist() == np.tile([1, -1, 0], 10)[rows].tolist()
    mask = np.zeros(30, dtype=bool)
    mask[rows] = True
    np.testing.assert_array_equal(data.subset(mask).labels, lab[np.sort(rows)][:, (lab[np.sort(rows)] >= 0).any(0)])
    with pytest.raises(ValueError, match=r"`items` selects items \['i3'\] more than once"):
        data.subset([3, 3])


def test_subset_keeps_repeats():
    data = AnnotationSet.from_responses(ITEM, ANN, LAB)
    sub = data.subset([2, 1])
    assert sub.n_repeated == 2 and sub.n_responses == 5
    assert sub.responses.label.tolist() == [1, 1, 0, 0, 1]  # item 2 (now 0): u:1, v:1, v:0; item 1: u:0, u:1


def test_summary_counts_agree_with_pandas():
    rng = np.random.default_rng(7)
    item, ann = rng.integers(0, 60, 500), rng.integers(0, 12, 500)
    data = AnnotationSet.from_responses(item, ann, rng.integers(0, 2, 500), gold=np.where(np.arange(60) < 9, 1, -1))
    frame = pd.DataFrame({"item": item, "ann": ann})
    per_item, per_ann = frame.groupby("item").size(), frame.groupby("ann").size()
    s = data.summary()
    assert s["items"] == 60 and s["annotators"] == 12 and s["responses"] == 500
    assert s["repeated_pairs"] == int((frame.groupby(["item", "ann"]).size() > 1).sum())
    assert s["repeated_responses"] == int(frame.duplicated().sum())
    assert (s["labels_per_item_min"], s["labels_per_item_median"], s["labels_per_item_max"]) == \
        (per_item.min(), per_item.median(), per_item.max())
    assert (s["labels_per_annotator_min"], s["labels_per_annotator_median"], s["labels_per_annotator_max"]) == \
        (per_ann.min(), per_ann.median(), per_ann.max())
    assert s["gold_items"] == 9 and s["scores"] is False


def test_sparse_operations_never_build_the_dense_matrix():
    # 20,000 items x 5,000 annotators: the dense matrix would take 100 MB; the responses take 0.4 MB.
    rng = np.random.default_rng(8)
    n, j, r = 20_000, 5_000, 40_000
    item = np.concatenate([np.arange(n), rng.integers(0, n, r - n)])
    ann = np.concatenate([np.arange(n) % j, rng.integers(0, j, r - n)])
    tracemalloc.start()
    data = AnnotationSet.from_responses(item, ann, rng.integers(0, 2, r), scores=rng.random(n))
    data.summary(), data.majority_vote(), data.vote_fraction(), data.n_ties(), data.has_missing, repr(data)
    data.subset(np.arange(0, n, 2)).to_long()
    data.with_scores(np.full(n, 0.5))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20 * 2 ** 20, peak  # well below the 100 MB of one dense matrix


# ------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("kwargs, message", [
    (dict(item=[0, 1, 2], annotator=[0, 0], label=[1, 0, 1]), "must have the same length; got 3, 2 and 3"),
    (dict(item=[0.0, 1.0], annotator=[0, 0], label=[1, 0]), "`item` must hold integer positions 0, 1, ...; got dtype float64"),
    (dict(item=[0, 5], annotator=[0, 0], label=[1, 0], n_items=3), r"`item` must hold positions 0 .. 2 \(`n_items` = 3\); got \[5\] at responses \[1\]"),
    (dict(item=[0, -1], annotator=[0, 0], label=[1, 0]), r"got \[-1\] at responses \[1\]"),
    (dict(item=[0, 1], annotator=[0, 3], label=[1, 0], annotator_ids=["a", "b"]), r"`annotator` must hold positions 0 .. 1"),
    (dict(item=[0, 1], annotator=[0, 0], label=[1, 2]), r"`label` must be 0 or 1; got \[2\] at responses \[1\]"),
    (dict(item=[0, 1], annotator=[0, 0], label=["1", "0"]), "`label` must hold 0 or 1; got dtype <U1"),
    (dict(item=[0, 2], annotator=[0, 0], label=[1, 0], item_ids=["x", "y", "z"]), r"items \['y'\] have no label from any annotator"),
    (dict(item=[0, 1], annotator=[0, 0], label=[1, 0], n_annotators=2), r"annotators \[1\] did not label any item"),
    (dict(item=[0, 1], annotator=[0, 0], label=[1, 0], item_ids=["x"], n_items=2),
     r"`item_ids` has 1 entries but `n_items` is 2"),
    (dict(item=[0, 1], annotator=[0, 0], label=[1, 0], item_ids=["x", "x"]), r"`item_ids` must be unique; \['x'\]"),
    (dict(item=[], annotator=[], label=[]), "no responses"),
    (dict(item=[0, 1], annotator=[0, 0], label=[1, 0], n_items=0), "`n_items` must be a positive integer; got 0"),
    (dict(item=[0, 1], annotator=[0, 0], label=[1, 0], scores=[0.5, 1.5]), r"`scores` must lie in \[0, 1\]"),
    (dict(item=[0, 1], annotator=[0, 0], label=[1, 0], gold=[1, 2]), r"`gold` must hold 0, 1, or -1/NaN for unknown; got \[2\]"),
    (dict(item=[0, 1], annotator=[0, 0], label=[1, 0], gold=pd.Series([1], index=[7])),
     r"`gold` has labels for items \[7\] that are not in the annotations"),
])
def test_from_responses_bad_input_is_named(kwargs, message):
    kw = dict(kwargs)
    with pytest.raises(ValueError, match=message):
        AnnotationSet.from_responses(kw.pop("item"), kw.pop("annotator"), kw.pop("label"), **kw)


def test_gold_and_scores_by_id():
    data = AnnotationSet.from_responses([0, 1, 2], [0, 0, 0], [1, 0, 1], item_ids=["x", "y", "z"],
                                        scores=pd.Series([0.3, 0.2, 0.1], index=["z", "y", "x"]),
                                        gold=pd.Series([0], index=["y"]))
    assert data.scores.tolist() == [0.1, 0.2, 0.3] and data.gold.tolist() == [-1, 0, -1]
    assert data.gold.dtype == np.int8 and "gold_items=1" in repr(data)


def test_boolean_labels_are_accepted():
    data = AnnotationSet.from_responses(np.array([0, 1]), np.array([0, 0]), np.array([True, False]))
    assert data.responses.label.tolist() == [1, 0] and data.responses.label.dtype == np.int8


def test_the_set_is_immutable_and_with_scores_shares_the_responses():
    data = AnnotationSet.from_responses([0, 1], [0, 0], [1, 0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.scores = np.array([0.1, 0.2])
    with pytest.raises(dataclasses.FrozenInstanceError):
        del data.gold
    scored = data.with_scores([0.1, 0.2])
    assert scored.responses is data.responses and data.scores is None
    with pytest.raises(ValueError, match=r"`scores` must have shape \(2,\)"):
        data.with_scores([0.1, 0.2, 0.3])


def test_pickle_round_trip_keeps_everything_read_only():
    data = AnnotationSet.from_responses(ITEM, ANN, LAB, scores=[0.1, 0.5, 0.9], gold=[1, -1, 0])
    back = pickle.loads(pickle.dumps(data))
    assert repr(back) == repr(data) and back.gold.tolist() == [1, -1, 0]
    for a, b in zip(back.responses, data.responses):
        np.testing.assert_array_equal(a, b)
        assert not a.flags.writeable
    assert not back.scores.flags.writeable and not back.item_ids.flags.writeable


def test_repeated_labels_and_gold_enter_the_sparse_likelihood_as_written_by_hand():
    # The storage feeds noisycal_bayes.core.sparse: each repeated label is one more factor P(A | Y).
    jnp = pytest.importorskip("jax.numpy")
    from noisycal_bayes.core.sparse import response_loglik, sparse_e_step

    data = AnnotationSet.from_responses(ITEM, ANN, LAB, gold=[-1, -1, 0])
    fpr, tpr = np.array([0.1, 0.2]), np.array([0.9, 0.7])
    l0, l1 = response_loglik(tuple(jnp.asarray(a) for a in data.responses), 3, jnp.asarray(fpr), jnp.asarray(tpr))
    # Item 1: annotator 0 twice (0, then 1). Item 2: annotator 0 once (1), annotator 1 twice (1, then 0).
    np.testing.assert_allclose(l1[1], np.log(0.1) + np.log(0.9), rtol=1e-6)
    np.testing.assert_allclose(l0[1], np.log(0.9) + np.log(0.1), rtol=1e-6)
    np.testing.assert_allclose(l1[2], np.log(0.9) + np.log(0.7) + np.log(0.3), rtol=1e-6)
    np.testing.assert_allclose(l0[2], np.log(0.1) + np.log(0.2) + np.log(0.8), rtol=1e-6)
    _, post = sparse_e_step(tuple(jnp.asarray(a) for a in data.responses), jnp.zeros(3, dtype=jnp.int32),
                            jnp.asarray(fpr), jnp.asarray(tpr), jnp.asarray([0.5]), gold=jnp.asarray(data.gold))
    # Item 0 (annotator 0 says 1, annotator 1 says 0): T = 0.9 * 0.3 / (0.9 * 0.3 + 0.1 * 0.8); item 2 is gold 0.
    np.testing.assert_allclose(post[0], 0.27 / (0.27 + 0.08), rtol=1e-5)
    assert float(post[2]) == 0.0
