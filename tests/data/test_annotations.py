"""Tests for noisycal_bayes/data/annotations.py: AnnotationSet construction, validation, round trips."""
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes import AnnotationSet
from noisycal_bayes.warnings import DataWarning, NoisyCalWarning


def _long():
    """Six labels from three annotators on three items; annotator 'c' skips item 30."""
    return pd.DataFrame({
        "item": [10, 10, 10, 20, 20, 20, 30, 30],
        "annotator": ["a", "b", "c", "a", "b", "c", "a", "b"],
        "label": [1, 1, 0, 0, 0, 1, 1, 0],
    })


def _scores():
    return pd.Series([0.9, 0.1, 0.6], index=[10, 20, 30])


# ---------------------------------------------------------------------------------------- construction
def test_from_long_layout_and_missing_marker():
    data = AnnotationSet.from_long(_long(), _scores())
    assert data.n_items == 3 and data.n_annotators == 3
    assert data.item_ids.tolist() == [10, 20, 30]
    assert data.annotator_ids.tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(data.labels, [[1, 1, 0], [0, 0, 1], [1, 0, -1]])
    np.testing.assert_array_equal(data.scores, [0.9, 0.1, 0.6])
    assert data.labels.dtype == np.int8
    assert data.has_missing
    np.testing.assert_array_equal(data.observed, data.labels != -1)


def test_from_long_scores_as_dataframe_and_as_column_agree():
    series = AnnotationSet.from_long(_long(), _scores())
    frame = AnnotationSet.from_long(_long(), pd.DataFrame({"item": [30, 10, 20], "score": [0.6, 0.9, 0.1]}))
    with_col = _long().assign(score=lambda d: d["item"].map(_scores()))
    column = AnnotationSet.from_long(with_col)
    for other in (frame, column):
        np.testing.assert_array_equal(other.scores, series.scores)
        np.testing.assert_array_equal(other.labels, series.labels)


def test_from_long_custom_column_names():
    renamed = _long().rename(columns={"item": "img", "annotator": "rater", "label": "y"})
    data = AnnotationSet.from_long(renamed, _scores(), item="img", annotator="rater", label="y")
    np.testing.assert_array_equal(data.labels, AnnotationSet.from_long(_long()).labels)


def test_from_wide_nan_and_minus_one_both_mean_missing():
    nan_form = AnnotationSet.from_wide(np.array([[1, np.nan], [0, 1.0]]), [0.3, 0.4])
    neg_form = AnnotationSet.from_wide(np.array([[1, -1], [0, 1]]), [0.3, 0.4])
    np.testing.assert_array_equal(nan_form.labels, [[1, -1], [0, 1]])
    np.testing.assert_array_equal(nan_form.labels, neg_form.labels)


def test_from_wide_dataframe_keeps_ids_and_aligns_series_scores():
    frame = pd.DataFrame([[1, 0], [np.nan, 1], [0, 0]], index=["x", "y", "z"], columns=["ann1", "ann2"])
    data = AnnotationSet.from_wide(frame, pd.Series([0.3, 0.2, 0.1], index=["z", "y", "x"]))
    assert data.item_ids.tolist() == ["x", "y", "z"]
    assert data.annotator_ids.tolist() == ["ann1", "ann2"]
    np.testing.assert_array_equal(data.scores, [0.1, 0.2, 0.3])
    renamed = AnnotationSet.from_wide(frame.to_numpy(), annotators=["p", "q"])
    assert renamed.annotator_ids.tolist() == ["p", "q"]


def test_majority_vote_ties_and_vote_fraction():
    data = AnnotationSet.from_wide(np.array([[1, 0, -1], [1, 1, 0], [0, 0, 1], [1, -1, -1]]))
    np.testing.assert_array_equal(data.majority_vote(ties="positive"), [1, 1, 0, 1])
    np.testing.assert_array_equal(data.majority_vote(ties="negative"), [0, 1, 0, 1])
    assert data.n_ties() == 1
    np.testing.assert_allclose(data.vote_fraction(), [0.5, 2 / 3, 1 / 3, 1.0])
    with pytest.raises(ValueError, match="`ties` must be 'positive' or 'negative'; got 'random'"):
        data.majority_vote(ties="random")


def test_subset_drops_annotators_left_without_labels():
    data = AnnotationSet.from_long(_long(), _scores())
    sub = data.subset([2])  # item 30 was not labelled by annotator "c"
    assert sub.annotator_ids.tolist() == ["a", "b"]
    np.testing.assert_array_equal(sub.labels, [[1, 0]])
    np.testing.assert_array_equal(sub.scores, [0.6])


def test_with_scores_and_require_helpers():
    data = AnnotationSet.from_long(_long())
    assert data.scores is None
    with pytest.raises(ValueError, match="needs classifier scores"):
        data.require_scores()
    scored = data.with_scores([0.2, 0.4, 0.6])
    np.testing.assert_array_equal(scored.require_scores(), [0.2, 0.4, 0.6])
    with pytest.raises(ValueError, match="the moment method needs at least 4 annotators; this data has 3"):
        data.require_annotators(4, "the moment method")


# ---------------------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("item_ids,annotator_ids", [
    (["i3", "i1", "i2", "i0"], ["r2", "r0", "r1"]),            # strings
    ([7, 3, 11, 5], [2, 9, 4]),                                # integers
    ([1, "b", 2.5, "a"], ["x", 1, ("t", 2)]),                  # mixed, unsortable
])
def test_long_wide_round_trip(item_ids, annotator_ids):
    labels = np.array([[1, -1, 0], [0, 1, 1], [-1, -1, 1], [1, 0, -1]])
    scores = np.array([0.05, 0.5, 0.75, 1.0])
    frame = pd.DataFrame(np.where(labels < 0, np.nan, labels), index=pd.Index(item_ids, dtype=object),
                         columns=pd.Index(annotator_ids, dtype=object))
    wide = AnnotationSet.from_wide(frame, scores)
    long = wide.to_long()
    assert list(long.columns) == ["item", "annotator", "label", "score"]
    assert len(long) == int((labels >= 0).sum())
    back = AnnotationSet.from_long(long)
    # from_long orders ids sorted when they are sortable, by first appearance otherwise: align by id.
    order_i = [list(back.item_ids).index(i) for i in wide.item_ids]
    order_j = [list(back.annotator_ids).index(j) for j in wide.annotator_ids]
    np.testing.assert_array_equal(back.labels[np.ix_(order_i, order_j)], wide.labels)
    np.testing.assert_array_equal(back.scores[order_i], wide.scores)
    # A second trip from long format is the identity, ids and order included.
    again = AnnotationSet.from_long(back.to_long())
    np.testing.assert_array_equal(again.labels, back.labels)
    np.testing.assert_array_equal(again.scores, back.scores)
    assert again.item_ids.tolist() == back.item_ids.tolist()
    assert again.annotator_ids.tolist() == back.annotator_ids.tolist()
    pd.testing.assert_frame_equal(again.to_long(), back.to_long())


def test_round_trip_without_scores_has_no_score_column():
    data = AnnotationSet.from_long(_long())
    long = data.to_long()
    assert "score" not in long.columns
    back = AnnotationSet.from_long(long)
    assert back.scores is None
    np.testing.assert_array_equal(back.labels, data.labels)


# ---------------------------------------------------------------------------------------- immutability
def test_arrays_are_read_only():
    data = AnnotationSet.from_long(_long(), _scores())
    for arr in (data.labels, data.scores, data.item_ids, data.annotator_ids):
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = arr[0]
    with pytest.raises(AttributeError):
        data.labels = np.zeros((3, 3))


def test_caller_data_is_never_modified():
    long, scores = _long(), _scores().astype(object)  # object dtype: conversion must not write back
    long_copy, scores_copy = long.copy(deep=True), scores.copy(deep=True)
    data = AnnotationSet.from_long(long, scores)
    pd.testing.assert_frame_equal(long, long_copy)
    pd.testing.assert_series_equal(scores, scores_copy)

    wide = np.array([[1.0, np.nan], [0.0, 1.0]])
    z = np.array([0.2, 0.7])
    wide_copy, z_copy = wide.copy(), z.copy()
    data = AnnotationSet.from_wide(wide, z)
    np.testing.assert_array_equal(wide, wide_copy)
    np.testing.assert_array_equal(z, z_copy)
    # The set holds copies: the caller's arrays stay writable and independent.
    wide[0, 0] = 0.0
    z[0] = 0.99
    assert data.labels[0, 0] == 1 and data.scores[0] == 0.2

    frame = pd.DataFrame({"p": [1, 0], "q": [0, 1]}, index=["u", "v"])
    frame_copy = frame.copy(deep=True)
    AnnotationSet.from_wide(frame, pd.Series([0.1, 0.9], index=["u", "v"]))
    pd.testing.assert_frame_equal(frame, frame_copy)


# ---------------------------------------------------------------------------------------- bad input: long
def test_long_labels_other_than_zero_one_are_named():
    bad = _long()
    bad.loc[[3, 6], "label"] = [2, -1]
    with pytest.raises(ValueError, match=r"`label` must be 0 or 1; got \[2, -1\] at rows \[3, 6\]"):
        AnnotationSet.from_long(bad)


def test_long_string_labels_are_named():
    bad = _long().astype({"label": object})
    bad.loc[4, "label"] = "yes"
    with pytest.raises(ValueError, match=r"`label` must be 0 or 1; got \['yes'\] at rows \[4\]\. Map your classes"):
        AnnotationSet.from_long(bad)


def test_long_nan_label_is_named():
    bad = _long().astype({"label": float})
    bad.loc[5, "label"] = np.nan
    with pytest.raises(ValueError, match=r"`label` must be 0 or 1; got \[nan\] at rows \[5\]"):
        AnnotationSet.from_long(bad)


def test_long_repeated_pairs_are_named_when_refused():
    bad = pd.concat([_long(), pd.DataFrame({"item": [20], "annotator": ["b"], "label": [1]})], ignore_index=True)
    with pytest.raises(ValueError, match=re.escape("1 repeated (item, annotator) pair [(20, 'b')]: an annotator "
                                                   "labelled the same item more than once")):
        AnnotationSet.from_long(bad, repeated="error")


def test_long_missing_columns_raise_value_error_not_key_error():
    with pytest.raises(ValueError, match=r"missing column\(s\) \['label'\]; it has \['item', 'annotator', 'y'\]"):
        AnnotationSet.from_long(_long().rename(columns={"label": "y"}))
    with pytest.raises(ValueError, match=r"`scores` is missing column\(s\) \['score'\]"):
        AnnotationSet.from_long(_long(), pd.DataFrame({"item": [10, 20, 30], "prob": [0.1, 0.2, 0.3]}))


def test_long_null_ids_are_named():
    bad = _long().astype({"annotator": object})
    bad.loc[2, "annotator"] = None
    with pytest.raises(ValueError, match=r"column `annotator` has missing values at rows \[2\]"):
        AnnotationSet.from_long(bad)


def test_long_empty_input_and_wrong_type():
    with pytest.raises(ValueError, match="`annotations` is empty"):
        AnnotationSet.from_long(_long().iloc[:0])
    with pytest.raises(ValueError, match="must be a pandas DataFrame in long format; got ndarray"):
        AnnotationSet.from_long(_long().to_numpy())


@pytest.mark.parametrize("value,pattern", [
    (np.nan, r"`scores` must be finite; got NaN or inf at items \[20\]"),
    (np.inf, r"`scores` must be finite; got NaN or inf at items \[20\]"),
    (1.5, r"`scores` must lie in \[0, 1\]; got \[1\.5\] at items \[20\]"),
    (-0.1, r"`scores` must lie in \[0, 1\]; got \[-0\.1\] at items \[20\]"),
])
def test_bad_scores_are_named_by_item(value, pattern):
    scores = _scores().copy()
    scores[20] = value
    with pytest.raises(ValueError, match=pattern):
        AnnotationSet.from_long(_long(), scores)


def test_non_numeric_scores_are_named():
    scores = _scores().astype(object)
    scores[30] = "high"
    with pytest.raises(ValueError, match=r"`scores` must be numeric; got \['high'\] at items \[30\]"):
        AnnotationSet.from_long(_long(), scores)


def test_annotated_items_without_score_are_named():
    with pytest.raises(ValueError, match=r"annotated items \[20\] have no score"):
        AnnotationSet.from_long(_long(), _scores().drop(20))


def test_conflicting_scores_in_score_column_are_named():
    bad = _long().assign(score=0.5)
    bad.loc[1, "score"] = 0.7  # item 10 now has two scores
    with pytest.raises(ValueError, match=r"items \[10\] have more than one score"):
        AnnotationSet.from_long(bad)


def test_duplicate_score_entries_are_named():
    scores = pd.concat([_scores(), pd.Series([0.3], index=[30])])
    with pytest.raises(ValueError, match=r"`scores` lists items \[30\] more than once"):
        AnnotationSet.from_long(_long(), scores)


def test_unannotated_scores_are_dropped_with_counted_warning():
    scores = pd.concat([_scores(), pd.Series([0.5, 0.4], index=[40, 50])])
    with pytest.warns(DataWarning, match=r"^2 scored items have no annotation and were dropped") as record:
        data = AnnotationSet.from_long(_long(), scores)
    assert len([w for w in record if issubclass(w.category, NoisyCalWarning)]) == 1
    np.testing.assert_array_equal(data.scores, [0.9, 0.1, 0.6])
    # The warning points at the caller's line, not at library internals.
    assert record[0].filename == __file__
    # Invalid scores of dropped items do not matter.
    scores[40] = np.nan
    with pytest.warns(DataWarning, match="^2 scored items"):
        AnnotationSet.from_long(_long(), scores)


def test_no_warning_when_every_score_is_used():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        AnnotationSet.from_long(_long(), _scores())


# ---------------------------------------------------------------------------------------- bad input: wide
def test_wide_labels_other_than_zero_one_are_named():
    pattern = r"`labels` must be 0 or 1; got \[0\.5, 2\.0\] at positions \[\(0, 1\), \(2, 0\)\]"
    with pytest.raises(ValueError, match=pattern):
        AnnotationSet.from_wide(np.array([[1, 0.5], [0, 1], [2, 0]]))


def test_wide_string_labels_are_named():
    frame = pd.DataFrame({"a": [1, "yes", 0], "b": [0, 1, "no"]}, dtype=object)
    with pytest.raises(ValueError, match=r"non-numeric values \['yes', 'no'\] at positions \[\(1, 0\), \(2, 1\)\]"):
        AnnotationSet.from_wide(frame)


def test_wide_items_without_label_are_named():
    frame = pd.DataFrame([[1, 0], [np.nan, np.nan], [0, 1], [-1, -1]], index=["p", "q", "r", "s"])
    with pytest.raises(ValueError, match=r"items \['q', 's'\] have no label from any annotator"):
        AnnotationSet.from_wide(frame)


def test_wide_annotators_without_label_are_named():
    frame = pd.DataFrame({"ann1": [1, 0], "ann2": [np.nan, np.nan], "ann3": [0, 1]})
    with pytest.raises(ValueError, match=r"annotators \['ann2'\] did not label any item"):
        AnnotationSet.from_wide(frame)


def test_wide_duplicate_pairs_are_named():
    rows = pd.DataFrame([[1, 0], [0, 1]], index=["u", "u"], columns=["a", "b"])
    with pytest.raises(ValueError, match=r"`item_ids` must be unique; \['u'\] appear more than once"):
        AnnotationSet.from_wide(rows)
    cols = pd.DataFrame([[1, 0], [0, 1]], index=["u", "v"], columns=["a", "a"])
    with pytest.raises(ValueError, match=r"`annotator_ids` must be unique; \['a'\] appear more than once"):
        AnnotationSet.from_wide(cols)


def test_wide_empty_and_misshaped_input():
    with pytest.raises(ValueError, match="empty"):
        AnnotationSet.from_wide(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="empty"):
        AnnotationSet.from_wide(pd.DataFrame())
    with pytest.raises(ValueError, match=r"must have shape \(n_items, n_annotators\); got \(3,\)"):
        AnnotationSet.from_wide(np.array([1, 0, 1]))
    with pytest.raises(ValueError, match=r"`annotators` has 3 names for 2 label columns"):
        AnnotationSet.from_wide(np.array([[1, 0]]), annotators=["a", "b", "c"])


@pytest.mark.parametrize("value,pattern", [
    (np.nan, r"finite; got NaN or inf at items \[1\]"),
    (-np.inf, r"finite; got NaN or inf at items \[1\]"),
    (3.0, r"must lie in \[0, 1\]; got \[3\.0\] at items \[1\]"),
])
def test_wide_bad_scores_are_named(value, pattern):
    with pytest.raises(ValueError, match=pattern):
        AnnotationSet.from_wide(np.array([[1, 0], [0, 1], [1, 1]]), [0.1, value, 0.3])


def test_wide_score_length_mismatch():
    with pytest.raises(ValueError, match=r"`scores` must have shape \(3,\), one per row of `labels`; got \(2,\)"):
        AnnotationSet.from_wide(np.array([[1, 0], [0, 1], [1, 1]]), [0.1, 0.2])


def test_wide_series_scores_missing_an_item_and_extra_items():
    frame = pd.DataFrame([[1, 0], [0, 1]], index=["u", "v"])
    with pytest.raises(ValueError, match=r"annotated items \['v'\] have no score"):
        AnnotationSet.from_wide(frame, pd.Series([0.1], index=["u"]))
    with pytest.warns(DataWarning, match="^1 scored items have no annotation"):
        data = AnnotationSet.from_wide(frame, pd.Series([0.1, 0.2, 0.3], index=["u", "v", "w"]))
    np.testing.assert_array_equal(data.scores, [0.1, 0.2])


def test_direct_constructor_validates():
    with pytest.raises(ValueError, match="must hold 0, 1 or -1"):
        AnnotationSet(np.array([[0, 3]]), None, np.array([0], dtype=object), np.array(["a", "b"], dtype=object))
    with pytest.raises(ValueError, match="do not match the shape"):
        AnnotationSet(np.array([[0, 1]]), None, np.array([0, 1], dtype=object), np.array(["a", "b"], dtype=object))


def test_wide_nullable_dtypes_read_pd_na_as_missing():
    frame = pd.DataFrame({"a": pd.array([1, pd.NA, 0], dtype="Int64"),
                          "b": pd.array([True, False, pd.NA], dtype="boolean")})
    data = AnnotationSet.from_wide(frame)
    np.testing.assert_array_equal(data.labels, [[1, 1], [-1, 0], [0, -1]])


def test_long_nullable_and_boolean_labels():
    frame = _long()
    as_bool = AnnotationSet.from_long(frame.assign(label=frame["label"].astype(bool)))
    np.testing.assert_array_equal(as_bool.labels, AnnotationSet.from_long(frame).labels)
    nullable = frame.assign(label=pd.array([1, 1, 0, pd.NA, 0, 1, 1, 0], dtype="Int64"))
    with pytest.raises(ValueError, match=r"`label` must be 0 or 1; got \[nan\] at rows \[3\]"):
        AnnotationSet.from_long(nullable)


# ---------------------------------------------------------------------------------------- repeated and gold
def _repeated_long():
    """Annotator 'a' labels item 10 twice (1 then 0); item 20 once each by 'a' and 'b'."""
    return pd.DataFrame({"item": [10, 20, 10, 20], "annotator": ["a", "a", "a", "b"], "label": [1, 0, 0, 1],
                         "gold": [1.0, np.nan, np.nan, np.nan]})


def test_from_long_repeated_keep_first_error():
    keep = AnnotationSet.from_long(_repeated_long())
    assert keep.n_responses == 4 and keep.n_repeated == 1
    assert keep.responses.label.tolist() == [1, 0, 0, 1]  # item 10 / 'a' in file order: 1, then 0
    first = AnnotationSet.from_long(_repeated_long(), repeated="first")
    np.testing.assert_array_equal(first.labels, [[1, -1], [0, 1]])
    with pytest.raises(ValueError, match=re.escape("1 repeated (item, annotator) pair [(10, 'a')]")):
        AnnotationSet.from_long(_repeated_long(), repeated="error")


def test_from_long_gold_column_one_value_per_item():
    data = AnnotationSet.from_long(_repeated_long(), gold="gold")
    assert data.gold.tolist() == [1, -1] and data.gold.dtype == np.int8
    as_text = _repeated_long().assign(gold=["1", "", " ", None])  # blank strings mean unknown, like NaN
    assert AnnotationSet.from_long(as_text, gold="gold").gold.tolist() == [1, -1]
    by_id = AnnotationSet.from_long(_repeated_long(), gold=pd.Series({20: 0}))
    assert by_id.gold.tolist() == [-1, 0]
    assert AnnotationSet.from_long(_repeated_long(), gold={10: 1, 20: 1}).gold.tolist() == [1, 1]


@pytest.mark.parametrize("gold, message", [
    ([1, np.nan, 0, np.nan], r"conflicting gold labels \(both 0 and 1\) in column `gold` for item \[10\]"),
    ([1, 2, np.nan, np.nan], r"column `gold` must hold gold labels 0 or 1 .*got \[2\.0\] at rows \[1\], item \[20\]"),
    (["yes", None, None, None], r"column `gold` must hold gold labels 0 or 1 .*got \['yes'\] at rows \[0\], item \[10\]"),
])
def test_from_long_bad_gold_column_is_named(gold, message):
    with pytest.raises(ValueError, match=message):
        AnnotationSet.from_long(_repeated_long().assign(gold=gold), gold="gold")


def test_from_long_gold_errors_for_unknown_items_and_columns():
    with pytest.raises(ValueError, match=r"`gold` has labels for items \[99\] that are not in the annotations"):
        AnnotationSet.from_long(_repeated_long(), gold={99: 1})
    with pytest.raises(ValueError, match=r"missing column\(s\) \['truth'\]"):
        AnnotationSet.from_long(_repeated_long(), gold="truth")


def test_from_wide_gold_array_and_series():
    frame = pd.DataFrame([[1, 0], [np.nan, 1], [0, 0]], index=["x", "y", "z"], columns=["p", "q"])
    assert AnnotationSet.from_wide(frame, gold=[1, np.nan, 0]).gold.tolist() == [1, -1, 0]
    assert AnnotationSet.from_wide(frame, gold=pd.Series({"z": 1})).gold.tolist() == [-1, -1, 1]
    with pytest.raises(ValueError, match=r"`gold` must hold 0, 1, or -1/NaN for unknown; got \['maybe'\] at items \['y'\]"):
        AnnotationSet.from_wide(frame, gold=[1, "maybe", 0])


def test_from_crowdkit_picks_up_a_gold_column_and_keeps_repeats():
    df = _repeated_long().rename(columns={"item": "task", "annotator": "worker"})
    data = AnnotationSet.from_crowdkit(df, scores={10: 0.9, 20: 0.1})
    assert data.gold.tolist() == [1, -1] and data.n_repeated == 1
    assert AnnotationSet.from_crowdkit(df, gold=None).gold is None
    assert AnnotationSet.from_crowdkit(df.drop(columns="gold")).gold is None
    with pytest.raises(ValueError, match="`df` has no gold column 'truth'"):
        AnnotationSet.from_crowdkit(df, gold="truth")
    with pytest.raises(ValueError, match=re.escape("1 repeated (task, worker) pair [(10, 'a')]")):
        AnnotationSet.from_crowdkit(df, repeated="error")
