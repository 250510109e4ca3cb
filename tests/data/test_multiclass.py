"""Tests for the K-class data: MulticlassAnnotationSet (data/annotations.py), load_multiclass and
is_multiclass_labels (data/loaders.py), class names (data/classes.py), validation, design checks (data/design.py)."""
import os
import pickle
import warnings
from dataclasses import FrozenInstanceError

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes.data import (PROBS_TOL, AnnotationSet, MulticlassAnnotationSet, check_multiclass_design,
                                 is_multiclass_labels, load_multiclass, multiclass_design_problems)
from noisycal_bayes.experiments.real_data import SHARED_DATA_HINT, shared_data_path
from noisycal_bayes.warnings import DataWarning, IdentifiabilityWarning

CIFAR = shared_data_path("cifar10n_10class.csv")
M = MulticlassAnnotationSet


def _long():
    """Three annotators, four items, classes cat/dog/bird; 'c' skips item 40; 'a' labels item 20 twice."""
    return pd.DataFrame({
        "item": [10, 10, 10, 20, 20, 20, 20, 30, 30, 30, 40, 40],
        "annotator": ["a", "b", "c", "a", "b", "c", "a", "a", "b", "c", "a", "b"],
        "label": ["cat", "dog", "cat", "bird", "bird", "dog", "bird", "dog", "dog", "dog", "cat", "bird"],
    })


def _probs():
    """Class probabilities per item (columns bird, cat, dog), as a frame with an item column."""
    return pd.DataFrame({"item": [40, 30, 20, 10], "bird": [0.5, 0.1, 0.7, 0.2], "cat": [0.3, 0.1, 0.2, 0.5],
                         "dog": [0.2, 0.8, 0.1, 0.3]})


def _same(a, b):
    """Two sets hold the same data: responses, ids, classes, probs, gold, repeats."""
    assert a.classes == b.classes
    for x, y in zip(a.responses, b.responses):
        np.testing.assert_array_equal(x, y)
        assert x.dtype == y.dtype
    assert a.item_ids.tolist() == b.item_ids.tolist()
    assert a.annotator_ids.tolist() == b.annotator_ids.tolist()
    assert (a.probs is None) == (b.probs is None) and (a.gold is None) == (b.gold is None)
    if a.probs is not None:
        np.testing.assert_allclose(a.probs, b.probs, rtol=0, atol=1e-15)
    if a.gold is not None:
        np.testing.assert_array_equal(a.gold, b.gold)
    assert (a.n_repeated, a.n_responses) == (b.n_repeated, b.n_responses)


# ---------------------------------------------------------------------------------------- construction
def test_from_long_layout_classes_and_dtypes():
    data = M.from_long(_long(), _probs(), repeated="first")
    assert data.classes == ("bird", "cat", "dog") and data.n_classes == 3
    assert (data.n_items, data.n_annotators, data.n_responses) == (4, 3, 11)
    assert data.responses.label.dtype == np.int16 and data.responses.item.dtype == np.int32
    np.testing.assert_array_equal(data.labels, [[1, 2, 1], [0, 0, 2], [2, 2, 2], [1, 0, -1]])
    assert data.labels.dtype == np.int16 and data.has_missing
    np.testing.assert_array_equal(data.observed, data.labels >= 0)
    np.testing.assert_allclose(data.probs, [[0.2, 0.5, 0.3], [0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.5, 0.3, 0.2]])
    assert not data.probs.flags.writeable and not data.responses.label.flags.writeable


def test_integer_classes_sort_numerically_and_classes_option_adds_unused():
    long = pd.DataFrame({"item": [1, 1, 2, 2], "annotator": ["a", "b", "a", "b"], "label": [10, 2, 3, 10]})
    assert M.from_long(long).classes == (2, 3, 10)  # not ('10', '2', '3')
    data = M.from_long(long, classes=[10, 3, 2, 7])
    assert data.classes == (10, 3, 2, 7) and data.n_classes == 4
    np.testing.assert_array_equal(data.labels, [[0, 2], [1, 0]])
    assert data.summary()["label_counts"] == {10: 2, 3: 1, 2: 1, 7: 0}


def test_round_trips_long_wide_cleanlab_responses_agree():
    long = _long().iloc[[0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11]]  # no repeat: wide formats hold one label per cell
    base = M.from_long(long, _probs(), classes=["bird", "cat", "dog"])
    wide = long.pivot(index="item", columns="annotator", values="label")
    probs = _probs().set_index("item").loc[wide.index].to_numpy()
    _same(base, M.from_wide(wide, probs))
    _same(base, M.from_wide(wide, _probs()))  # frame matched by item id and class name
    codes = wide.apply(lambda col: col.map({"bird": 0, "cat": 1, "dog": 2}))
    clean = M.from_cleanlab(codes, probs)
    assert clean.classes == (0, 1, 2)
    for x, y in zip(clean.responses, base.responses):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(clean.probs, base.probs)
    r = base.responses
    _same(base, M.from_responses(r.item, r.annotator, r.label, classes=base.classes, probs=base.probs,
                                 item_ids=base.item_ids, annotator_ids=base.annotator_ids))
    _same(base, M.from_long(base.to_long(), base.probs))


def test_cleanlab_numpy_floats_with_nan_and_minus_one_hint():
    labels = np.array([[0, 2, np.nan], [1, 1, 1], [np.nan, 2, 2]])
    data = M.from_cleanlab(labels)
    assert data.classes == (0, 1, 2)
    np.testing.assert_array_equal(data.labels, [[0, 2, -1], [1, 1, 1], [-1, 2, 2]])
    with pytest.raises(ValueError, match=r"\(0, 2, -1\)\]\. cleanlab marks a missing label with NaN, not -1"):
        M.from_cleanlab(np.array([[0, 1, -1], [1, 1, 1]]))
    with pytest.raises(ValueError, match=r"class indices 0 \.\. 2.*\(1, 0, 3\.0\)"):
        M.from_cleanlab(np.array([[0, 2, 1], [3, 1, 1.0]]), np.full((2, 3), 1 / 3))
    with pytest.raises(ValueError, match=r"not be empty; got shape \(0, 3\)"):
        M.from_cleanlab(np.zeros((0, 3)))
    frame = pd.DataFrame(labels, index=[5, 6, 7])
    with pytest.raises(ValueError, match="different indexes"):
        M.from_cleanlab(frame, pd.DataFrame(np.full((3, 3), 1 / 3)))


def test_repeats_kept_counted_first_and_error():
    kept = M.from_long(_long())
    assert kept.has_repeats and kept.n_repeated == 1 and kept.n_responses == 12
    assert kept.summary()["repeated_responses"] == 1
    with pytest.raises(ValueError, match=r"1 repeated \(item, annotator\) pair \[\(20, 'a'\)\].*repeated='first'"):
        kept.labels
    # Every response votes: item 20 has bird x3 (one repeat) and dog x1.
    np.testing.assert_array_equal(kept.vote_counts()[1], [3, 0, 1])
    first = M.from_long(_long(), repeated="first")
    assert not first.has_repeats and first.n_responses == 11
    with pytest.raises(ValueError, match=r"repeated \(item, annotator\) pair \[\(20, 'a'\)\]"):
        M.from_long(_long(), repeated="error")
    with pytest.raises(ValueError, match="repeated"):
        M.from_long(_long(), repeated="last")


def test_responses_unsorted_input_sorted_repeats_in_input_order():
    data = M.from_responses([1, 0, 1, 0, 1], [0, 1, 0, 0, 1], [2, 1, 0, 1, 1])
    assert data.responses.item.tolist() == [0, 0, 1, 1, 1]
    assert data.responses.annotator.tolist() == [0, 1, 0, 0, 1]
    assert data.responses.label.tolist() == [1, 1, 2, 0, 1]  # the repeated pair (1, 0) keeps 2 then 0
    assert M.from_responses([1, 0, 1, 0, 1], [0, 1, 0, 0, 1], [2, 1, 0, 1, 1], repeated="first").labels.tolist() \
        == [[1, 1], [2, 1]]


def test_relabelling_classes_permutes_everything_else_unchanged():
    base = M.from_long(_long(), _probs(), classes=["bird", "cat", "dog"], gold={10: "cat", 30: "dog"})
    perm_classes = ["dog", "bird", "cat"]
    other = M.from_long(_long(), _probs(), classes=perm_classes, gold={10: "cat", 30: "dog"})
    new_index = np.array([perm_classes.index(c) for c in base.classes])  # old index -> new index
    np.testing.assert_array_equal(other.responses.label, new_index[base.responses.label])
    np.testing.assert_array_equal(other.responses.item, base.responses.item)
    np.testing.assert_array_equal(other.probs[:, new_index], base.probs)
    np.testing.assert_array_equal(other.vote_distribution()[:, new_index], base.vote_distribution())
    np.testing.assert_array_equal(other.gold[base.gold >= 0], new_index[base.gold[base.gold >= 0]])
    names = np.asarray(base.classes, dtype=object)
    np.testing.assert_array_equal(np.asarray(other.classes, dtype=object)[other.majority_vote()],
                                  names[base.majority_vote()])  # no ties in these items


def test_majority_vote_ties_go_to_lowest_index_and_counts_match_a_loop():
    data = M.from_responses([0, 0, 1, 1, 1, 2], [0, 1, 0, 1, 2, 0], [2, 1, 0, 2, 2, 1], n_classes=4)
    np.testing.assert_array_equal(data.majority_vote(), [1, 2, 1])
    assert data.n_ties() == 1
    counts = np.zeros((3, 4), dtype=int)
    for i, lab in zip(data.responses.item, data.responses.label):
        counts[i, lab] += 1
    np.testing.assert_array_equal(data.vote_counts(), counts)
    np.testing.assert_allclose(data.vote_distribution(), counts / counts.sum(1, keepdims=True))


def test_subset_equals_building_from_the_rows():
    base = M.from_long(_long(), _probs(), gold={20: "bird"})
    sub = base.subset([3, 1])
    rows = _long()[_long()["item"].isin([40, 20])]
    expect = M.from_long(rows, _probs()[_probs()["item"].isin([40, 20])], classes=base.classes, gold={20: "bird"})
    # from_long sorts items (20, 40); subset keeps the requested order (40, 20): compare after reordering.
    _same(sub.subset([1, 0]), expect)
    assert sub.item_ids.tolist() == [40, 20]
    with pytest.raises(ValueError, match=r"`items` selects items \[20\] more than once"):
        base.subset([1, 1])


def test_immutable_and_pickles():
    data = M.from_long(_long(), _probs())
    with pytest.raises(FrozenInstanceError):
        data.probs = None
    with pytest.raises(TypeError, match="from_long"):
        M([[0, 1]])
    back = pickle.loads(pickle.dumps(data))
    _same(back, data)
    assert not back.probs.flags.writeable


def test_summary_and_require_probs():
    data = M.from_long(_long(), gold={10: "cat"})
    s = data.summary()
    assert (s["n_classes"], s["classes"], s["gold_items"], s["probs"]) == (3, ["bird", "cat", "dog"], 1, False)
    assert s["label_counts"] == {"bird": 4, "cat": 3, "dog": 5} and sum(s["label_counts"].values()) == s["responses"]
    with pytest.raises(ValueError, match="needs class probabilities"):
        data.require_probs()
    assert "n_classes=3" in repr(data)


# ---------------------------------------------------------------------------------------- bad input
def test_label_outside_classes_named():
    with pytest.raises(ValueError, match=r"`label` holds \['bird'\], which are not among the classes "
                                         r"\['cat', 'dog'\], at rows \[3, 4, 6, 11\] \(item \[20, 40\]\)"):
        M.from_long(_long(), classes=["cat", "dog"])
    wide = pd.DataFrame({"a": [1, 4], "b": [2, np.nan]}, index=["x", "y"])
    with pytest.raises(ValueError, match=r"\[4\].*at \(item, annotator, label\) \[\('y', 'a', 4\)\]"):
        M.from_wide(wide, classes=[1, 2, 3])
    with pytest.raises(ValueError, match=r"`label` must hold class indices 0 \.\. 2 .*got \[3\] at responses \[1\]"):
        M.from_responses([0, 0], [0, 1], [1, 3], n_classes=3)
    with pytest.raises(ValueError, match=r"class names \(integers or strings\); got \[2\.5\]"):
        M.from_long(_long().assign(label=[1, 2, 2.5] + [1] * 9))
    with pytest.raises(ValueError, match=r"holds -1 at rows \[0\].*marker of a missing label"):
        M.from_long(_long().assign(label=[-1] + [1, 2] * 5 + [1]))
    with pytest.raises(ValueError, match=r"column `label` has missing values at rows \[2\]\. Drop rows"):
        M.from_long(_long().assign(label=["cat", "dog", None] + ["cat"] * 9))


def test_duplicate_ids_named():
    with pytest.raises(ValueError, match=r"`item_ids` must be unique; \['x'\] appear more than once"):
        M.from_wide(pd.DataFrame({"a": [0, 1], "b": [1, 2]}, index=["x", "x"]))
    with pytest.raises(ValueError, match=r"`annotator_ids` must be unique; \['a'\]"):
        M.from_responses([0, 0], [0, 1], [0, 1], annotator_ids=["a", "a"])


def test_bad_classes_and_single_class():
    with pytest.raises(ValueError, match=r"single class \['cat'\]; pass classes="):
        M.from_long(_long().assign(label="cat"))
    with pytest.raises(ValueError, match=r"distinct; \['cat'\] appear more than once"):
        M.from_long(_long(), classes=["cat", "dog", "cat", "bird"])
    with pytest.raises(ValueError, match=r"at least two classes"):
        M.from_long(_long().assign(label="cat"), classes=["cat"])
    with pytest.raises(ValueError, match=r"`n_classes` must be at least 2"):
        M.from_responses([0, 1], [0, 0], [0, 0])


def test_gold_errors_named():
    with pytest.raises(ValueError, match=r"`gold` has labels for items \[99\] that are not in the annotations"):
        M.from_long(_long(), gold={10: "cat", 99: "dog"})
    with pytest.raises(ValueError, match=r"`gold` must hold classes \['bird', 'cat', 'dog'\].*got \['cow'\] at "
                                         r"items \[30\]"):
        M.from_long(_long(), gold={10: "cat", 30: "cow"})
    rows = _long().assign(gold=[None] * 7 + ["dog", "cow", None, None, None])
    with pytest.raises(ValueError, match=r"column `gold` \(gold labels\) holds \['cow'\].*at rows \[8\]"):
        M.from_long(rows, gold="gold")
    rows = _long().assign(gold=[None] * 7 + ["dog", "cat", None, None, None])
    with pytest.raises(ValueError, match=r"conflicting gold labels in column `gold` for item \[30\]"):
        M.from_long(rows, gold="gold")
    with pytest.raises(ValueError, match=r"class indices 0 \.\. 2.*got \[5\] at items \[1\]"):
        M.from_responses([0, 1], [0, 0], [0, 2], gold=[1, 5])
    ok = M.from_long(_long().assign(gold=[None] * 7 + ["dog", "dog", None, None, None]), gold="gold")
    np.testing.assert_array_equal(ok.gold, [-1, -1, 2, -1])


def test_probs_validation_names_items_and_columns():
    long = _long()
    bad_sum = _probs().assign(dog=[0.2, 0.8, 0.2, 0.3])  # item 20 sums to 1.1
    with pytest.raises(ValueError, match=r"must sum to 1 \(within 0\.001\); items \[20\] sum to \[1\.1\]"):
        M.from_long(long, bad_sum)
    with pytest.raises(ValueError, match=r"no column for class\(es\) \['dog'\]"):
        M.from_long(long, _probs().drop(columns="dog"))
    with pytest.raises(ValueError, match=r"column\(s\) \['cow'\] are not classes.*pass classes="):
        M.from_long(long, _probs().assign(cow=0.0))
    with pytest.raises(ValueError, match=r"negative at items \[30\]"):
        M.from_long(long, _probs().assign(bird=[0.5, -0.1, 0.7, 0.2], dog=[0.2, 1.0, 0.1, 0.3]))
    with pytest.raises(ValueError, match=r"NaN or inf at items \[40\]"):
        M.from_long(long, _probs().assign(bird=[np.nan, 0.1, 0.7, 0.2]))
    with pytest.raises(ValueError, match=r"annotated items \[10\] have no row in `probs`"):
        M.from_long(long, _probs().iloc[:3])
    with pytest.warns(DataWarning, match="1 items in `probs` have no annotation"):
        M.from_long(long, pd.concat([_probs(), _probs().iloc[:1].assign(item=50)]))
    with pytest.raises(ValueError, match=r"must have shape \(4, 3\)"):
        M.from_long(long, np.full((4, 2), 0.5))
    # Within the tolerance: renormalised, so that every row sums to 1 to rounding.
    near = _probs().assign(dog=_probs()["dog"] + 0.5 * PROBS_TOL)
    rows = M.from_long(long, near).probs
    np.testing.assert_allclose(rows.sum(1), 1.0, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------- design checks
def test_design_rule_one_two_three_annotators():
    three = M.from_long(_long(), repeated="first")
    assert multiclass_design_problems(three) == []  # items 10, 20, 30 have three distinct annotators
    two = M.from_long(_long()[_long()["annotator"] != "c"])
    with pytest.warns(IdentifiabilityWarning, match=r"fit: two annotators without score groups"):
        notes = check_multiclass_design(two)
    assert len(notes) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_multiclass_design(two, "grouped", n_groups=4) == []  # groups can identify two annotators
    one = M.from_long(_long()[_long()["annotator"] == "a"])
    with pytest.raises(ValueError, match=r"single annotator \['a'\]"):
        check_multiclass_design(one)
    # Three annotators, but no item labelled by all three (pairs only): not identified without groups.
    pairs = M.from_responses([0, 0, 1, 1, 2, 2], [0, 1, 1, 2, 0, 2], [0, 1, 1, 2, 0, 0])
    assert any("three or more distinct" in p for p in multiclass_design_problems(pairs))
    assert multiclass_design_problems(pairs, "grouped", n_groups=3) == []
    # No item with two labels: nothing identified, groups or not.
    alone = M.from_responses([0, 1, 2], [0, 1, 2], [0, 1, 2])
    assert any("two or more annotators" in p for p in multiclass_design_problems(alone, "grouped", n_groups=3))
    with pytest.raises(ValueError, match="model"):
        multiclass_design_problems(three, "platt")


# ---------------------------------------------------------------------------------------- files
def _write(folder, name, text):
    path = os.path.join(folder, name)
    with open(path, "w") as fh:
        fh.write(text)
    return path


LONG_CSV = ("item,annotator,label,gold\n10,a,cat,\n10,b,dog,cat\n10,c,cat,\n20,a,bird,\n20,b,bird,\n20,c,dog,\n"
            "20,a,bird,\n30,a,dog,\n30,b,dog,\n30,c,dog,\n40,a,cat,\n40,b,bird,\n")
PROBS_CSV = "item,bird,cat,dog\n40,0.5,0.3,0.2\n30,0.1,0.1,0.8\n20,0.7,0.2,0.1\n10,0.2,0.5,0.3\n"


def test_load_multiclass_long_and_wide_equal_in_memory_and_write_nothing(tmp_path):
    folder = str(tmp_path)
    labels = _write(folder, "labels.csv", LONG_CSV)
    probs = _write(folder, "probs.csv", PROBS_CSV)
    wide = _write(folder, "wide.csv", "item,a,b,c,gold\n10,cat,dog,cat,cat\n20,bird,bird,dog,\n30,dog,dog,dog,\n"
                                      "40,cat,bird,,\n")
    before = sorted(os.listdir(folder))
    data = load_multiclass(labels, probs, gold="gold")
    _same(data, M.from_long(_long(), _probs(), gold={10: "cat"}))
    from_wide = load_multiclass(wide, probs, gold="gold")
    _same(from_wide, M.from_long(_long(), _probs(), gold={10: "cat"}, repeated="first"))
    with pytest.raises(ValueError):
        load_multiclass(labels, _write(folder, "bad.csv", PROBS_CSV.replace("0.8", "0.9")))
    os.remove(os.path.join(folder, "bad.csv"))
    assert sorted(os.listdir(folder)) == before  # reading (and failing) writes nothing


def test_load_multiclass_errors_name_file_line_column(tmp_path):
    folder = str(tmp_path)
    labels = _write(folder, "labels.csv", LONG_CSV)
    with pytest.raises(ValueError, match=r"labels\.csv, line 3, column 'label': label 'dog' is not among the "
                                         r"classes \['bird', 'cat'\]"):
        load_multiclass(labels, classes=["bird", "cat"])
    with pytest.raises(ValueError, match=r"probs\.csv: no probability column for class\(es\) \['dog'\]"):
        load_multiclass(labels, _write(folder, "probs.csv", "item,bird,cat\n10,0.5,0.5\n"))
    with pytest.raises(ValueError, match=r"column\(s\) \['cow'\] are not classes"):
        load_multiclass(labels, _write(folder, "probs.csv", "item,bird,cat,dog,cow\n10,0.2,0.5,0.3,0\n"))
    with pytest.raises(ValueError, match=r"probs\.csv: each row of `probs` must sum to 1.*items \[30\] sum to \[1\.1\]"):
        load_multiclass(labels, _write(folder, "probs.csv", PROBS_CSV.replace("0.1,0.1,0.8", "0.1,0.2,0.8")))
    with pytest.raises(ValueError, match=r"probs\.csv, line 3, column 'cat': .*got 'x'"):
        load_multiclass(labels, _write(folder, "probs.csv", PROBS_CSV.replace("0.1,0.1,0.8", "0.1,x,0.8")))
    with pytest.raises(ValueError, match=r"annotated items \[10\] have no probabilities"):
        load_multiclass(labels, _write(folder, "probs.csv", PROBS_CSV.rsplit("10,", 1)[0]))
    with pytest.raises(ValueError, match=r"line 3, column 'gold': gold label 'cow' is not a class"):
        load_multiclass(_write(folder, "g.csv", LONG_CSV.replace("dog,cat", "dog,cow")), gold="gold")
    with pytest.raises(ValueError, match=r"line 4, column 'gold': item 10 has gold label 'dog' here but 'cat' at "
                                         r"line 3"):
        load_multiclass(_write(folder, "g.csv", LONG_CSV.replace("10,c,cat,", "10,c,cat,dog")), gold="gold")
    with pytest.raises(ValueError, match=r"line 8: duplicate \(item, annotator\) pair \(20, 'a'\)"):
        load_multiclass(labels, repeated="error")
    with pytest.raises(ValueError, match=r"single annotator \['a'\]; K x K confusion matrices need at least two"):
        load_multiclass(_write(folder, "one.csv", "item,annotator,label\n1,a,cat\n2,a,dog\n"))
    with pytest.raises(ValueError, match=r"line 3, column 'label': label -1 marks a missing label; drop the row"):
        load_multiclass(_write(folder, "m1.csv", "item,annotator,label\n1,a,2\n1,b,-1\n"))
    with pytest.raises(ValueError, match=r"line 2, column 'label': empty label"):
        load_multiclass(_write(folder, "e.csv", "item,annotator,label\n1,a,\n2,b,dog\n"))


def test_load_multiclass_crowdkit_columns_and_integer_classes(tmp_path):
    folder = str(tmp_path)
    labels = _write(folder, "l.csv", "task,worker,label\n1,w1,3\n1,w2,10\n2,w1,2\n2,w2,3\n")
    probs = _write(folder, "p.csv", "task,2,3,10\n1,0.1,0.6,0.3\n2,0.5,0.5,0\n")
    data = load_multiclass(labels, probs)
    assert data.classes == (2, 3, 10) and data.item_ids.tolist() == [1, 2]
    _same(load_multiclass(labels, probs, classes=["2", "3", "10"]), data)  # text classes read like the cells
    np.testing.assert_array_equal(data.labels, [[1, 2], [0, 1]])
    np.testing.assert_allclose(data.probs[0], [0.1, 0.6, 0.3])


def test_is_multiclass_labels_frames_and_files(tmp_path):
    folder = str(tmp_path)
    assert is_multiclass_labels(_long())
    assert not is_multiclass_labels(_long().assign(label=[0, 1] * 6))
    assert is_multiclass_labels(_long().assign(label=[1, 2] * 6))  # two classes, but not 0/1
    binary_wide = _write(folder, "b.csv", "item,ann1,ann2,score\n1,1,1,0.9\n2,0,,0.2\n")
    assert not is_multiclass_labels(binary_wide)  # the score column is not a label
    assert is_multiclass_labels(_write(folder, "m.csv", LONG_CSV))
    assert not is_multiclass_labels(pd.DataFrame({"item": [1, 2], "a": [0, 1], "b": [1, -1]}))


@pytest.mark.skipif(CIFAR is None, reason=f"cifar10n_10class.csv not found: {SHARED_DATA_HINT}")
def test_real_cifar10n_first_rows_three_routes_agree(tmp_path):
    """First 200 rows of CIFAR-10N 10-class (Wei et al., ICLR 2022; the shared data README)."""
    df = pd.read_csv(CIFAR, nrows=200)
    pcols = [f"p{k}" for k in range(10)]
    wide = M.from_wide(df.set_index("item")[["ann1", "ann2", "ann3"]], df[pcols].to_numpy(), classes=range(10))
    assert (wide.n_items, wide.n_annotators, wide.n_classes, wide.n_responses) == (200, 3, 10, 600)
    long = df.melt(id_vars="item", value_vars=["ann1", "ann2", "ann3"], var_name="annotator", value_name="label")
    probs = df[["item"] + pcols].rename(columns=dict(zip(pcols, map(str, range(10)))))
    _same(wide, M.from_long(long, probs, classes=range(10)))
    labels_path, probs_path = tmp_path / "labels.csv", tmp_path / "probs.csv"
    long.to_csv(labels_path, index=False)
    probs.to_csv(probs_path, index=False)
    _same(wide, load_multiclass(labels_path, probs_path, classes=range(10)))
    assert is_multiclass_labels(labels_path)
    # An independent route for the majority vote: pandas' per-row mode (smallest value among ties).
    mode = df[["ann1", "ann2", "ann3"]].mode(axis=1)[0].to_numpy()
    np.testing.assert_array_equal(wide.majority_vote(), mode)
    assert multiclass_design_problems(wide) == []  # every item labelled by all three annotators


# ---------------------------------------------------------------------------------------------- one container
def test_binary_set_is_the_two_class_case_of_one_container():
    data = AnnotationSet.from_responses([0, 0, 1, 1], [0, 1, 0, 1], [1, 1, 0, 1], scores=[0.75, 0.25])
    assert (data.kind, data.classes, data.n_classes) == ("binary", (0, 1), 2)
    np.testing.assert_array_equal(data.probs, [[0.25, 0.75], [0.75, 0.25]])
    assert not data.probs.flags.writeable
    assert AnnotationSet.from_responses([0, 1], [0, 0], [1, 0]).probs is None
    k = MulticlassAnnotationSet.from_long(_long(), _probs())
    assert isinstance(k, AnnotationSet) and k.kind == "multiclass" and k.scores is None
    assert k.probs.shape == (k.n_items, 3) and k.responses.label.dtype == np.int16 and data.labels.dtype == np.int8


def test_multiclass_set_refuses_the_binary_only_views():
    k = MulticlassAnnotationSet.from_long(_long(), _probs())
    with pytest.raises(ValueError, match="vote_distribution"):
        k.vote_fraction()
    with pytest.raises(ValueError, match="class probabilities, not scores"):
        k.with_scores(np.zeros(k.n_items))
    with pytest.raises(ValueError, match=r"this computation is defined for two classes.*3 classes"):
        k.require_scores()


def test_binary_only_functions_refuse_the_multiclass_set():
    from noisycal_bayes import fit_em, nc_ece
    from noisycal_bayes.data import SufficientStats
    k = MulticlassAnnotationSet.from_long(_long(), _probs())
    # fit_em is one door (K-class data go to fit_em_multiclass); its binary-only options refuse K-class data.
    with pytest.raises(ValueError, match="apply to binary data only"):
        fit_em(k, starts="vote")  # orientation passes through (rule K3); starts is binary
    with pytest.raises(ValueError, match="nc_ece is defined for two classes.*top_label_nc_ece or classwise_nc_ece"):
        nc_ece(k, None)
    # SufficientStats serve K classes (fit_em fits them: tests/data/test_outofcore_classes.py), one label per pair.
    with pytest.raises(ValueError, match=r"1 repeated \(item, annotator\) pair \[\(20, 'a'\)\]"):
        SufficientStats.from_annotations(k)
    stats = SufficientStats.from_annotations(MulticlassAnnotationSet.from_long(_long(), _probs(), repeated="first"))
    assert (stats.kind, stats.n_classes, stats.n_items) == ("multiclass", k.n_classes, k.n_items)


def test_from_crowdkit_reads_class_names_and_probabilities():
    long = _long()
    df = long.rename(columns={"item": "task", "annotator": "worker"})
    data = MulticlassAnnotationSet.from_crowdkit(df, _probs().rename(columns={"item": "task"}))
    _same(data, MulticlassAnnotationSet.from_long(long, _probs()))
