"""Inputs in other tools' formats: crowd-kit's long frame and cleanlab's multi-annotator matrix.

Neither library is needed: the frames are built by hand in their documented shapes (crowd-kit's
aggregators take a DataFrame with columns ``task, worker, label`` and ignore other columns;
cleanlab's ``get_label_quality_multiannotator`` takes an (N, M) matrix with NaN for a missing label
and ``pred_probs`` of shape (N, K)).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes import AnnotationSet, Binning
from noisycal_bayes.cli import main
from noisycal_bayes.inference.em import fit_em
from noisycal_bayes.simulate import simulate_annotations


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(300, fpr=[0.1, 0.25, 0.15], tpr=[0.9, 0.75, 0.85], curve="overconfident",
                                missing=0.2, seed=3)


@pytest.fixture(scope="module")
def native(sim):
    """The simulated set with string ids, built by the native long constructor."""
    long = sim.data.to_long()
    long["item"] = long["item"].map(lambda i: f"t{i:04d}")
    long["annotator"] = long["annotator"].map({0: "w_a", 1: "w_b", 2: "w_c"})
    scores = long.drop_duplicates("item").set_index("item")["score"]
    return AnnotationSet.from_long(long[["item", "annotator", "label"]], scores), long, scores


def crowdkit_frame(long: pd.DataFrame) -> pd.DataFrame:
    """crowd-kit's format: task, worker, label (rows in any order, extra columns allowed)."""
    frame = long.rename(columns={"item": "task", "annotator": "worker"})[["task", "worker", "label"]]
    return frame.sample(frac=1.0, random_state=0).assign(assignment_id=np.arange(len(frame)))


def same_set(a: AnnotationSet, b: AnnotationSet) -> None:
    assert list(a.item_ids) == list(b.item_ids)
    assert list(a.annotator_ids) == list(b.annotator_ids)
    np.testing.assert_array_equal(a.labels, b.labels)
    if a.scores is None or b.scores is None:
        assert a.scores is None and b.scores is None
    else:
        np.testing.assert_array_equal(a.scores, b.scores)


# ------------------------------------------------------------------------------------------ crowd-kit
def test_from_crowdkit_of_to_long_renamed_equals_from_long(native):
    ref, long, scores = native
    frame = crowdkit_frame(long)
    same_set(AnnotationSet.from_crowdkit(frame, scores), ref)                       # Series keyed by task
    same_set(AnnotationSet.from_crowdkit(frame, scores.to_dict()), ref)             # dict
    same_set(AnnotationSet.from_crowdkit(frame, scores.rename_axis("task").reset_index()), ref)  # task, score frame
    # An array is aligned with the sorted unique tasks: give it in that order from a shuffled Series.
    shuffled = scores.sample(frac=1.0, random_state=1)
    same_set(AnnotationSet.from_crowdkit(frame, shuffled.sort_index().to_numpy()), ref)
    # A 'score' column is read when `scores` is not given; without one there are no scores.
    same_set(AnnotationSet.from_crowdkit(long.rename(columns={"item": "task", "annotator": "worker"})), ref)
    labels_only = AnnotationSet.from_crowdkit(frame)
    assert labels_only.scores is None
    np.testing.assert_array_equal(labels_only.labels, ref.labels)


def test_from_crowdkit_matches_the_simulated_matrix_cell_by_cell(sim, native):
    # Independent of from_long: rebuild the matrix from the simulation's own labels.
    ref, long, scores = native
    data = AnnotationSet.from_crowdkit(crowdkit_frame(long), scores)
    order = np.argsort([f"t{i:04d}" for i in sim.data.item_ids])
    np.testing.assert_array_equal(data.labels, sim.data.labels[order])
    np.testing.assert_array_equal(data.scores, sim.data.scores[order])


def test_from_crowdkit_accepts_boolean_and_string_labels():
    ints = pd.DataFrame({"task": [1, 1, 2], "worker": ["a", "b", "a"], "label": [1, 0, 1]})
    for labels in ([True, False, True], ["1", "0", "1"], [1.0, 0.0, 1.0]):
        data = AnnotationSet.from_crowdkit(ints.assign(label=labels))
        assert data.labels.tolist() == [[1, 0], [1, -1]]


@pytest.fixture(scope="module")
def small():
    return pd.DataFrame({"task": ["x", "x", "y", "y", "z"], "worker": ["a", "b", "a", "b", "a"],
                         "label": [1, 0, 0, 0, 1]})


@pytest.mark.parametrize("frame, scores, message", [
    ("not a frame", None, "must be a pandas DataFrame with columns task, worker, label"),
    ("drop:label", None, r"missing column\(s\) \['label'\]"),
    ("performer", None, r"missing column\(s\) \['worker'\].*called the worker column 'performer'"),
    ("label2", None, r"`label` must be 0 or 1; got \[2\] at rows \[2\].*Those rows are task \['y'\]"),
    ("labelyes", None, r"`label` must be 0 or 1; got \['yes'\].*Those rows are task \['x'\]"),
    ("nan task", None, r"column `task` has missing values at rows \[1\]"),
    (None, {"x": 0.1, "y": 0.2}, re.escape("tasks ['z'] have no score")),
    (None, {"x": 0.1, "y": 0.2, "z": 0.3, "w": 0.4}, re.escape("`scores` has tasks ['w'] that are not in")),
    (None, [0.1, 0.2], r"`scores` has 2 values but `df` has 3 distinct tasks.*\['x', 'y', 'z'\]"),
    (None, np.zeros((3, 1)), r"or an array of shape \(3,\) aligned with the sorted unique tasks"),
    (None, {"x": 0.1, "y": 1.5, "z": 0.3}, r"`scores` must lie in \[0, 1\]; got \[1\.5\] at items \['y'\]"),
    (None, {"x": 0.1, "y": "high", "z": 0.3}, r"`scores` must be numeric; got \['high'\] at items \['y'\]"),
    (None, pd.DataFrame({"item": ["x"], "score": [0.1]}), r"`scores` is missing column\(s\) \['task'\]"),
])
def test_from_crowdkit_errors_name_the_offending_entries(small, frame, scores, message):
    df = {"not a frame": "not a frame", "drop:label": small.drop(columns="label"),
          "performer": small.rename(columns={"worker": "performer"}),
          "label2": small.assign(label=[1, 0, 2, 0, 1]), "labelyes": small.assign(label=["yes", 0, 0, 0, 1]),
          "dup": pd.concat([small, small.iloc[[0]].assign(label=0)], ignore_index=True),
          "nan task": small.assign(task=["x", None, "y", "y", "z"]), None: small}[frame]
    with pytest.raises(ValueError, match=message):
        AnnotationSet.from_crowdkit(df, scores)


def test_from_crowdkit_hints_when_ids_differ_only_in_type():
    df = pd.DataFrame({"task": [7, 8], "worker": ["a", "a"], "label": [1, 0]})
    with pytest.raises(ValueError, match=r"tasks \[7\] have no score.*\['7'\].*differ only in type"):
        AnnotationSet.from_crowdkit(df, {"7": 0.5, 8: 0.5})


# ------------------------------------------------------------------------------------------ cleanlab
def cleanlab_inputs(data: AnnotationSet):
    """cleanlab's shapes: labels (N, M) float with NaN for missing; pred_probs (N, 2) = [1 - z, z]."""
    wide = pd.DataFrame(np.where(data.observed, data.labels, np.nan), index=pd.Index(data.item_ids, dtype=object),
                        columns=pd.Index(data.annotator_ids, dtype=object))
    return wide, np.column_stack([1.0 - data.scores, data.scores])


def test_from_cleanlab_of_the_wide_labels_equals_from_wide(native):
    ref = native[0]
    wide, probs = cleanlab_inputs(ref)
    same_set(AnnotationSet.from_cleanlab(wide, probs), AnnotationSet.from_wide(wide, ref.scores))
    same_set(AnnotationSet.from_cleanlab(wide, probs), ref)
    # A plain array gives positional ids, as from_wide does; pred_probs may be a frame with the same index.
    same_set(AnnotationSet.from_cleanlab(wide.to_numpy(), probs), AnnotationSet.from_wide(wide.to_numpy(), ref.scores))
    same_set(AnnotationSet.from_cleanlab(wide, pd.DataFrame(probs, index=wide.index)), ref)
    # Nullable integers (pd.NA for missing) read the same; no pred_probs means no scores.
    same_set(AnnotationSet.from_cleanlab(wide.astype("Int64")), AnnotationSet.from_wide(wide))


def test_from_cleanlab_score_is_column_one_not_the_row_max():
    labels = np.array([[1.0, np.nan], [0.0, 1.0]])
    data = AnnotationSet.from_cleanlab(labels, np.array([[0.7, 0.3], [0.25, 0.75]]))
    assert data.scores.tolist() == [0.3, 0.75]


@pytest.mark.parametrize("labels, probs, message", [
    ([[1.0, 2.0], [0.0, np.nan]], None,
     r"got \(item, annotator, label\) \[\(0, 1, 2\.0\)\]\. Labels 2, 3, \.\.\. are K-class data: use MulticlassAnnotationSet\.from_cleanlab"),
    ([[1.0, "cat"], [0.0, np.nan]], None, r"\[\(0, 1, 'cat'\)\]\. Map your classes to 0/1"),
    ([[1.0, -1.0], [0.0, np.nan]], None, r"\[\(0, 1, -1\.0\)\]\. cleanlab marks a missing label with NaN"),
    ([1.0, 0.0], None, r"must have shape \(n_items, n_annotators\).*got shape \(2,\)"),
    ([[1.0, np.nan], [np.nan, np.nan]], None, r"items \[1\] have no label from any annotator"),
    ([[1.0, np.nan], [0.0, np.nan]], None, r"annotators \[1\] did not label any item"),
    ([[1.0, 0.0], [0.0, 1.0]], np.full((2, 3), 1 / 3), r"has 3 columns \(classes\): K-class data; use MulticlassAnnotationSet\.from_cleanlab"),
    ([[1.0, 0.0], [0.0, 1.0]], np.array([0.2, 0.8]), r"must have shape \(2, 2\).*got shape \(2,\).*from_wide"),
    ([[1.0, 0.0], [0.0, 1.0]], np.full((3, 2), 0.5), r"one row per row of `labels_multiannotator`; got \(3, 2\)"),
    ([[1.0, 0.0], [0.0, 1.0]], np.array([[0.5, 0.5], [0.5, 0.6]]), r"must sum to 1.*items \[1\] sum to \[1\.1\]"),
    ([[1.0, 0.0], [0.0, 1.0]], np.array([[-1.0, 2.0], [0.5, 0.5]]), r"must hold probabilities in \[0, 1\]; got \[-1\.0, 2\.0\] at items \[0\]"),
    ([[1.0, 0.0], [0.0, 1.0]], np.array([[np.nan, 0.5], [0.5, 0.5]]), r"must hold probabilities in \[0, 1\]; got \[nan\] at items \[0\]"),
])
def test_from_cleanlab_errors_name_the_offending_entries(labels, probs, message):
    with pytest.raises(ValueError, match=message):
        AnnotationSet.from_cleanlab(np.array(labels, dtype=object), probs)


def test_from_cleanlab_names_item_and_annotator_ids_of_a_frame():
    wide = pd.DataFrame({"ann1": [1.0, 0.0], "ann2": [3.0, 1.0]}, index=["img_a", "img_b"])
    with pytest.raises(ValueError, match=re.escape("[('img_a', 'ann2', 3.0)]")):
        AnnotationSet.from_cleanlab(wide, np.full((2, 2), 0.5))
    probs = pd.DataFrame(np.full((2, 2), 0.5), index=["img_b", "img_a"])
    with pytest.raises(ValueError, match="different indexes; rows are matched by position"):
        AnnotationSet.from_cleanlab(wide.assign(ann2=[1.0, 0.0]), probs)


# ------------------------------------------------------------------------------------------ fits
def test_fits_on_interop_sets_equal_fits_on_the_native_set(native):
    ref, long, scores = native
    via_crowdkit = AnnotationSet.from_crowdkit(crowdkit_frame(long), scores)
    via_cleanlab = AnnotationSet.from_cleanlab(*cleanlab_inputs(ref))
    fits = [fit_em(d, groups=Binning.equal_mass(3), n_starts=3, seed=0) for d in (ref, via_crowdkit, via_cleanlab)]
    for fit in fits[1:]:
        np.testing.assert_array_equal(fit.channel.fpr, fits[0].channel.fpr)
        np.testing.assert_array_equal(fit.channel.tpr, fits[0].channel.tpr)
        assert fit.loglik == fits[0].loglik


# ------------------------------------------------------------------------------------------ CLI
def test_cli_reads_crowdkit_column_names_without_flags(tmp_path, capsys, native):
    ref, long, scores = native
    # Same row order as the native file (the loader keeps string ids in file order), crowd-kit's names,
    # an extra column as crowd-kit allows.
    frame = long.rename(columns={"item": "task", "annotator": "worker"})[["task", "worker", "label"]]
    frame.assign(assignment_id=np.arange(len(frame))).to_csv(tmp_path / "labels.csv", index=False)
    scores.rename_axis("task").rename("score").reset_index().to_csv(tmp_path / "scores.csv", index=False)
    long[["item", "annotator", "label"]].to_csv(tmp_path / "native.csv", index=False)
    scores.rename_axis("item").rename("score").reset_index().to_csv(tmp_path / "native_scores.csv", index=False)
    outputs = []
    for ann, sc in (("labels.csv", "scores.csv"), ("native.csv", "native_scores.csv")):
        json_path = tmp_path / f"{ann}.json"
        code = main(["evaluate", str(tmp_path / ann), "--scores", str(tmp_path / sc), "--method", "em",
                     "--n-boot", "0", "--json", str(json_path)])
        out, err = capsys.readouterr()
        assert code == 0, err
        outputs.append(json_path.read_text())
    assert outputs[0].replace("labels.csv", "X").replace("scores.csv", "Y") == \
        outputs[1].replace("native.csv", "X").replace("native_scores.csv", "Y")
