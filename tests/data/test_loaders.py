"""Tests of noisycal_bayes/data/loaders.py: CSV layouts, one-line errors, bundled demo data."""
from __future__ import annotations

import importlib.util
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes import AnnotationSet
from noisycal_bayes.data.loaders import demo_paths, load_annotations_csv, load_demo, load_scores_csv, read_table
from noisycal_bayes.experiments.real_data import SHARED_DATA_HINT, shared_data_path
from noisycal_bayes.warnings import DataWarning

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path, name, text, *, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


LONG = "item,annotator,label\n1,a,1\n1,b,0\n2,a,0\n3,b,1\n3,a,1\n"
SCORES = "item,score\n1,0.9\n2,0.2\n3,0.6\n"


# ------------------------------------------------------------------------------------------ layouts
def test_long_format_matches_from_long(tmp_path):
    ann = write(tmp_path, "ann.csv", LONG)
    sc = write(tmp_path, "sc.csv", SCORES)
    data = load_annotations_csv(ann, sc)
    ref = AnnotationSet.from_long(pd.read_csv(ann), pd.read_csv(sc))
    assert data.labels.tolist() == ref.labels.tolist() == [[1, 0], [0, -1], [1, 1]]
    assert data.scores.tolist() == ref.scores.tolist() == [0.9, 0.2, 0.6]
    assert list(data.item_ids) == [1, 2, 3] and list(data.annotator_ids) == ["a", "b"]


def test_wide_format_with_score_column_and_missing_cells(tmp_path):
    path = write(tmp_path, "wide.csv", "item,ann1,ann2,ann3,score\nx,1,,0,0.8\ny,0,0,NA,0.1\nz,,1,1,0.5\n")
    data = load_annotations_csv(path)
    assert data.labels.tolist() == [[1, -1, 0], [0, 0, -1], [-1, 1, 1]]
    assert list(data.annotator_ids) == ["ann1", "ann2", "ann3"]
    assert data.scores.tolist() == [0.8, 0.1, 0.5]
    # The same file read through the wide constructor gives the same set.
    frame = pd.read_csv(path).set_index("item")
    ref = AnnotationSet.from_wide(frame.drop(columns="score"), frame["score"])
    assert data.labels.tolist() == ref.labels.tolist()


def test_bom_blank_lines_quotes_crlf_and_trailing_separator(tmp_path):
    text = '\ufeff"item","annotator","label"\r\n\r\n"1","a","1"\r\n1,b,"0",\r\n\r\n2, a ,0\r\n'
    ann = write(tmp_path, "messy.csv", text)
    sc = write(tmp_path, "sc.csv", '\ufeffitem,score\n"1","0.25"\n\n2,1\n')
    data = load_annotations_csv(ann, sc)
    assert data.labels.tolist() == [[1, 0], [0, -1]]
    assert data.scores.tolist() == [0.25, 1.0]
    assert list(data.annotator_ids) == ["a", "b"]


def test_custom_column_names(tmp_path):
    ann = write(tmp_path, "ann.csv", "id,worker,answer,p\n1,w1,1,0.7\n1,w2,1,0.7\n2,w1,0,0.3\n")
    data = load_annotations_csv(ann, item="id", annotator="worker", label="answer", score="p")
    assert data.labels.tolist() == [[1, 1], [0, -1]] and data.scores.tolist() == [0.7, 0.3]


def test_integer_ids_match_across_files_and_sort_numerically(tmp_path):
    ann = write(tmp_path, "ann.csv", "item,annotator,label\n10,a,1\n2,a,0\n10,b,1\n2,b,1\n")
    sc = write(tmp_path, "sc.csv", "item,score\n2,0.3\n10,0.6\n")
    data = load_annotations_csv(ann, sc)
    assert list(data.item_ids) == [2, 10]
    assert data.scores.tolist() == [0.3, 0.6]


def test_unannotated_scores_are_dropped_with_a_warning(tmp_path):
    ann = write(tmp_path, "ann.csv", LONG)
    sc = write(tmp_path, "sc.csv", SCORES + "4,0.5\n5,0.5\n")
    with pytest.warns(DataWarning, match="2 scored items"):
        data = load_annotations_csv(ann, sc)
    assert data.n_items == 3


def test_load_scores_csv(tmp_path):
    s = load_scores_csv(write(tmp_path, "sc.csv", SCORES))
    assert s.index.tolist() == [1, 2, 3] and s.tolist() == [0.9, 0.2, 0.6]


# ------------------------------------------------------------------------------------------ errors
BAD_ANNOTATIONS = {
    # name: (annotations text, scores text or None, pieces the message must contain)
    "empty file": ("", SCORES, ["ann.csv", "empty"]),
    "only blank lines": ("\n\n  \n", SCORES, ["ann.csv", "empty"]),
    "header only": ("item,annotator,label\n", SCORES, ["ann.csv", "no data rows"]),
    "missing label column": ("item,annotator,lab\n1,a,1\n", SCORES, ["ann.csv", "'label'"]),
    "label 2": ("item,annotator,label\n1,a,1\n2,a,2\n", SCORES, ["ann.csv, line 3, column 'label'", "'2'"]),
    "label text": ("item,annotator,label\n1,a,yes\n", SCORES, ["line 2, column 'label'", "'yes'"]),
    "label empty": ("item,annotator,label\n1,a,\n", SCORES, ["line 2, column 'label'", "empty"]),
    "label NaN": ("item,annotator,label\n1,a,nan\n", SCORES, ["line 2, column 'label'", "'nan'"]),
    "label 0.5": ("item,annotator,label\n1,a,0.5\n", SCORES, ["line 2", "'0.5'"]),
    "duplicate pair": ("item,annotator,label\n1,a,1\n2,a,0\n1,a,0\n", SCORES,
                       ["line 4", "duplicate (item, annotator)", "line 2"]),
    "ragged row": ("item,annotator,label\n1,a,1,7,8\n", SCORES, ["line 2", "expected 3 fields", "got 5"]),
    "empty item id": ("item,annotator,label\n,a,1\n", SCORES, ["line 2, column 'item'", "empty item"]),
    "duplicate column": ("item,label,annotator,label\n1,1,a,1\n", SCORES, ["line 1", "duplicate column"]),
    "wide item without labels": ("item,a,b\n1,1,0\n2,,\n", SCORES, ["line 3", "no label"]),
    "wide annotator without labels": ("item,a,b\n1,1,\n2,0,\n", "item,score\n1,0.5\n2,0.5\n", ["'b'", "did not label"]),
    "wide label 3": ("item,a,b\n1,1,3\n", SCORES, ["line 2, column 'b'", "'3'"]),
    "wide missing item column": ("id,a,b\n1,1,0\n", SCORES, ["missing column 'item'"]),
    "binary garbage": ("\x00\xff\xfe", SCORES, ["ann.csv"]),
}
BAD_SCORES = {
    "score above 1": ("item,score\n1,0.9\n2,1.5\n3,0.1\n", ["sc.csv, line 3, column 'score'", "'1.5'"]),
    "negative score": ("item,score\n1,-0.1\n2,0.5\n3,0.1\n", ["line 2", "'-0.1'"]),
    "score NaN": ("item,score\n1,0.9\n2,nan\n3,0.1\n", ["line 3", "'nan'"]),
    "score inf": ("item,score\n1,inf\n2,0.5\n3,0.1\n", ["line 2", "'inf'"]),
    "score text": ("item,score\n1,high\n2,0.5\n3,0.1\n", ["line 2, column 'score'", "'high'"]),
    "score empty": ("item,score\n1,\n2,0.5\n3,0.1\n", ["line 2", "empty"]),
    "duplicate score item": ("item,score\n1,0.9\n2,0.5\n1,0.1\n3,0.2\n", ["line 4", "duplicate item", "line 2"]),
    "missing score column": ("item,prob\n1,0.9\n", ["sc.csv", "'score'"]),
    "annotated item without score": ("item,score\n1,0.9\n2,0.5\n", ["sc.csv", "no score", "3"]),
    "empty scores file": ("", ["sc.csv", "empty"]),
}


@pytest.mark.parametrize("case", sorted(BAD_ANNOTATIONS))
def test_bad_annotation_files_raise_one_line_errors(tmp_path, case):
    ann_text, sc_text, pieces = BAD_ANNOTATIONS[case]
    ann = tmp_path / "ann.csv"
    ann.write_bytes(ann_text.encode("latin-1"))
    sc = write(tmp_path, "sc.csv", sc_text)
    with pytest.raises(ValueError) as info:
        load_annotations_csv(ann, sc, repeated="error")  # repeated pairs are refused only when asked
    msg = str(info.value)
    assert "\n" not in msg
    for piece in pieces:
        assert piece in msg, (piece, msg)


@pytest.mark.parametrize("case", sorted(BAD_SCORES))
def test_bad_score_files_raise_one_line_errors(tmp_path, case):
    sc_text, pieces = BAD_SCORES[case]
    ann = write(tmp_path, "ann.csv", LONG)
    sc = write(tmp_path, "sc.csv", sc_text)
    with pytest.raises(ValueError) as info:
        load_annotations_csv(ann, sc, repeated="error")  # repeated pairs are refused only when asked
    msg = str(info.value)
    assert "\n" not in msg
    for piece in pieces:
        assert piece in msg, (piece, msg)


def test_conflicting_scores_in_long_file(tmp_path):
    ann = write(tmp_path, "ann.csv", "item,annotator,label,score\n1,a,1,0.9\n1,b,1,0.8\n")
    with pytest.raises(ValueError, match=r"line 3, column 'score': item 1 has score 0.8 here but 0.9 at line 2"):
        load_annotations_csv(ann)


def test_scores_given_twice(tmp_path):
    ann = write(tmp_path, "ann.csv", "item,a,b,score\n1,1,0,0.9\n")
    sc = write(tmp_path, "sc.csv", SCORES)
    with pytest.raises(ValueError, match="one source of scores"):
        load_annotations_csv(ann, sc)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ValueError, match="nope.csv: no such file"):
        read_table(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match="is a directory"):
        read_table(tmp_path)


def test_bad_layout_argument(tmp_path):
    with pytest.raises(ValueError, match="`layout`"):
        load_annotations_csv(write(tmp_path, "a.csv", LONG), layout="tall")


def test_caller_file_is_not_modified(tmp_path):
    ann = write(tmp_path, "ann.csv", LONG)
    before = ann.read_bytes()
    load_annotations_csv(ann, write(tmp_path, "sc.csv", SCORES))
    assert ann.read_bytes() == before


# ------------------------------------------------------------------------------------------ demo data
def test_demo_data_shapes_and_truth_alignment():
    data, truth = load_demo()
    assert (data.n_items, data.n_annotators) == (4000, 3)
    assert list(data.annotator_ids) == ["careful", "hasty", "lenient"]
    assert truth["clean_labels"].shape == (4000,) and set(np.unique(truth["clean_labels"])) == {0, 1}
    np.testing.assert_allclose(truth["channel"].fpr, [0.05, 0.20, 0.35])
    np.testing.assert_allclose(truth["channel"].tpr, [0.90, 0.70, 0.95])
    # The clean labels must belong to these items: each annotator's empirical rates against them must match
    # the true channel. Binomial standard error sqrt(p(1-p)/n) with n >= ~1300 responses per class; z = 4.9
    # gives a two-sided false-alarm rate of 1e-6 per comparison (6 comparisons). Misaligned truth would
    # give tpr - fpr near 0, many standard errors away.
    y = truth["clean_labels"]
    for j in range(3):
        obs = data.labels[:, j] >= 0
        for cls, rate in ((0, truth["channel"].fpr[j]), (1, truth["channel"].tpr[j])):
            sel = obs & (y == cls)
            est = data.labels[sel, j].mean()
            se = np.sqrt(rate * (1 - rate) / sel.sum())
            assert abs(est - rate) < 4.9 * se, (j, cls, est, rate)


def test_bundled_files_are_small_and_reproduced_by_the_script(tmp_path):
    paths = demo_paths()
    assert sum(p.stat().st_size for p in paths.values()) < 300_000
    spec = importlib.util.spec_from_file_location("make_demo_data", REPO / "benchmarks" / "make_demo_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module.main(tmp_path)
    for key, path in paths.items():
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), (
            f"{path.name} differs from what benchmarks/make_demo_data.py makes now; regenerate it with "
            "`.venv/bin/python benchmarks/make_demo_data.py` if the simulator changed on purpose")


def test_wide_format_selects_annotator_columns(tmp_path):
    # Like the CIFAR-10N file: extra columns (batch, reference label) beside the annotators' labels.
    path = write(tmp_path, "w.csv", "item,batch,y_ref,score,ann1,ann2\n0,0,1,0.9,1,1\n1,0,0,0.2,0,1\n2,7,1,0.6,,1\n")
    data = load_annotations_csv(path, annotators=["ann1", "ann2"])
    assert list(data.annotator_ids) == ["ann1", "ann2"]
    assert data.labels.tolist() == [[1, 1], [0, 1], [-1, 1]]
    with pytest.raises(ValueError, match=r"w.csv, line 4, column 'batch'.*'7'"):
        load_annotations_csv(path)  # without the selection, 'batch' is read as an annotator
    with pytest.raises(ValueError, match=r"annotator column\(s\) \['ann9'\] not found"):
        load_annotations_csv(path, annotators=["ann1", "ann9"])
    with pytest.raises(ValueError, match="distinct label columns"):
        load_annotations_csv(path, annotators=["ann1", "score"])
    with pytest.raises(ValueError, match="wide file"):
        load_annotations_csv(write(tmp_path, "l.csv", LONG), annotators=["a"])


# ------------------------------------------------------------------------------------------ crowd-kit column names
CROWDKIT = "task,worker,label\n1,a,1\n1,b,0\n2,a,0\n3,b,1\n3,a,1\n"


@pytest.mark.parametrize("scores_text", [SCORES, SCORES.replace("item,", "task,")])
def test_crowdkit_column_names_read_as_long_format(tmp_path, scores_text):
    ref = load_annotations_csv(write(tmp_path, "ann.csv", LONG), write(tmp_path, "sc.csv", SCORES))
    data = load_annotations_csv(write(tmp_path, "ck.csv", CROWDKIT), write(tmp_path, "ck_sc.csv", scores_text))
    assert data.labels.tolist() == ref.labels.tolist() == [[1, 0], [0, -1], [1, 1]]
    assert data.scores.tolist() == ref.scores.tolist()
    assert list(data.item_ids) == [1, 2, 3] and list(data.annotator_ids) == ["a", "b"]
    # crowd-kit before 1.0 called the worker column 'performer'; a score column in the file works too.
    old = write(tmp_path, "old.csv", CROWDKIT.replace("worker", "performer"))
    assert load_annotations_csv(old).labels.tolist() == ref.labels.tolist()
    assert load_scores_csv(write(tmp_path, "t.csv", "task,score\n1,0.5\n")).to_dict() == {1: 0.5}


def test_crowdkit_aliases_only_stand_in_for_absent_default_columns(tmp_path):
    # Both 'item' and 'task' present: 'item' is the item column, 'task' an ignored extra.
    both = write(tmp_path, "both.csv", "item,task,annotator,label\n1,9,a,1\n2,9,a,0\n")
    assert list(load_annotations_csv(both).item_ids) == [1, 2]
    # An explicitly named column is never replaced by an alias.
    with pytest.raises(ValueError, match=r"missing column\(s\) \['id'\]"):
        load_annotations_csv(write(tmp_path, "ck.csv", CROWDKIT), item="id")


@pytest.mark.parametrize("text, where", [
    ("task,worker,label\n1,a,1\n1,b,7\n", "ck.csv, line 3, column 'label': labels must be 0 or 1; got '7'"),
    ("task,worker,label\n1,a,1\n1,a,0\n", "ck.csv, line 3: duplicate (task, worker) pair (1, 'a') (first at line 2)"),
    ("task,worker,label\n,a,1\n", "ck.csv, line 2, column 'task': empty item id"),
    ("task,label\n1,1\n", "missing column(s) ['annotator'] for long format (expected columns item, annotator, label, "
                          "or crowd-kit's task, worker, label)"),
])
def test_crowdkit_file_errors_name_file_line_and_column(tmp_path, text, where):
    with pytest.raises(ValueError, match=re.escape(where)):
        load_annotations_csv(write(tmp_path, "ck.csv", text), repeated="error")


def test_crowdkit_scores_file_errors_name_file_line_and_column(tmp_path):
    ann = write(tmp_path, "ck.csv", CROWDKIT)
    with pytest.raises(ValueError, match=re.escape("sc.csv, line 3, column 'score': scores must lie in [0, 1]")):
        load_annotations_csv(ann, write(tmp_path, "sc.csv", "task,score\n1,0.5\n2,1.5\n3,0.1\n"))
    with pytest.raises(ValueError, match=re.escape("sc.csv: annotated items [3] have no score")):
        load_annotations_csv(ann, write(tmp_path, "sc.csv", "task,score\n1,0.5\n2,0.5\n"))


# ------------------------------------------------------------------------------------------ repeated labels
REPEATS = "item,annotator,label\n1,a,1\n1,b,0\n2,a,0\n1,a,0\n2,b,1\n"  # (1, a) at lines 2 and 5


def test_repeated_labels_keep_first_error(tmp_path):
    path = write(tmp_path, "rep.csv", REPEATS)
    keep = load_annotations_csv(path)
    assert keep.n_responses == 5 and keep.n_repeated == 1
    assert keep.responses.label.tolist() == [1, 0, 0, 0, 1]  # item 1 / a: line 2 (1), then line 5 (0)
    first = load_annotations_csv(path, repeated="first")
    assert first.labels.tolist() == [[1, 0], [0, 1]]
    with pytest.raises(ValueError, match=re.escape("rep.csv, line 5: duplicate (item, annotator) pair (1, 'a') "
                                                   "(first at line 2). Pass repeated='keep'")):
        load_annotations_csv(path, repeated="error")
    with pytest.raises(ValueError, match=r"`repeated` must be one of"):
        load_annotations_csv(path, repeated="all")


# ------------------------------------------------------------------------------------------ gold labels
GOLD_LONG = "item,annotator,label,gold\n1,a,1,1\n1,b,0,1\n2,a,0,\n3,b,1,0\n3,a,1,\n"


def test_gold_column_long_and_wide(tmp_path):
    data = load_annotations_csv(write(tmp_path, "g.csv", GOLD_LONG), gold="gold")
    assert data.gold.tolist() == [1, -1, 0] and data.labels.tolist() == [[1, 0], [0, -1], [1, 1]]
    wide = load_annotations_csv(write(tmp_path, "w.csv", "item,p,q,gold,score\n1,1,0,1,0.9\n2,0,,,0.2\n"), gold="gold")
    assert list(wide.annotator_ids) == ["p", "q"]  # the gold column is not an annotator
    assert wide.gold.tolist() == [1, -1] and wide.scores.tolist() == [0.9, 0.2]


def test_gold_file(tmp_path):
    ann = write(tmp_path, "ann.csv", LONG)
    gold = write(tmp_path, "gold.csv", "item,gold\n3,1\n1,0\n2,\n")
    data = load_annotations_csv(ann, write(tmp_path, "sc.csv", SCORES), gold_path=gold)
    assert data.gold.tolist() == [0, -1, 1]
    # Ids written as strings in one file and integers in the other still match.
    quoted = load_annotations_csv(write(tmp_path, "t.csv", "item,annotator,label\nx1,a,1\nx2,a,0\n"),
                                  gold_path=write(tmp_path, "tg.csv", "task,gold\nx2,1\n"))
    assert quoted.gold.tolist() == [-1, 1]


@pytest.mark.parametrize("labels, gold_file, pieces", [
    (GOLD_LONG.replace("3,b,1,0", "3,b,1,2"), None, ["g.csv, line 5, column 'gold'", "must be 0 or 1", "'2'"]),
    (GOLD_LONG.replace("3,b,1,0", "3,b,1,yes"), None, ["g.csv, line 5, column 'gold'", "'yes'"]),
    (GOLD_LONG.replace("1,b,0,1", "1,b,0,0"), None, ["g.csv, line 3, column 'gold'", "item 1 has gold label 0 here but 1 "
                                                     "at line 2"]),
    (LONG, "item,gold\n1,1\n7,0\n", ["gold.csv, line 3", "gold label 0 for item 7", "not in the annotations"]),
    (LONG, "item,gold\n1,1\n2,0.5\n", ["gold.csv, line 3, column 'gold'", "'0.5'"]),
    (LONG, "item,gold\n1,1\n2,positive\n", ["gold.csv, line 3, column 'gold'", "'positive'"]),
    (LONG, "item,gold\n1,1\n1,0\n", ["gold.csv, line 3", "duplicate item 1 (first at line 2)"]),
    (LONG, "item,truth\n1,1\n", ["gold.csv", "missing column(s) ['gold']"]),
])
def test_bad_gold_names_file_line_and_value(tmp_path, labels, gold_file, pieces):
    ann = write(tmp_path, "g.csv", labels)
    kw = dict(gold="gold") if gold_file is None else dict(gold_path=write(tmp_path, "gold.csv", gold_file))
    with pytest.raises(ValueError) as info:
        load_annotations_csv(ann, **kw)
    msg = str(info.value)
    assert "\n" not in msg
    for piece in pieces:
        assert piece in msg, (piece, msg)


def test_gold_option_errors(tmp_path):
    ann = write(tmp_path, "g.csv", GOLD_LONG)
    with pytest.raises(ValueError, match="g.csv: no gold column 'truth'"):
        load_annotations_csv(ann, gold="truth")
    with pytest.raises(ValueError, match="not both"):
        load_annotations_csv(ann, gold="gold", gold_path=ann)


CROWD_GOLD = shared_data_path("crowd_gold")


@pytest.mark.skipif(CROWD_GOLD is None, reason=f"shared crowd_gold data not found: {SHARED_DATA_HINT}")
@pytest.mark.parametrize("name", ["bluebirds", "rte", "temp"])
def test_crowd_gold_sets_load_with_gold(name):
    # Welinder et al. 2010 (bluebirds) and Snow et al. 2008 (rte, temp), as assembled in shared/data/README.md.
    path = CROWD_GOLD / f"{name}.csv"
    data = load_annotations_csv(path, gold="gold")
    frame = pd.read_csv(path)
    assert data.n_items == frame["item"].nunique()
    assert data.n_annotators == frame["worker"].nunique()
    assert data.n_responses == len(frame)
    assert data.n_repeated == int(frame.duplicated(["item", "worker"]).sum())
    gold = frame.groupby("item")["gold"].first()
    ids = [type(gold.index[0])(i) for i in data.item_ids]
    np.testing.assert_array_equal(data.gold, gold.reindex(ids).to_numpy())
    # The labels per item / annotator and the positive votes agree with pandas' group-bys.
    votes = frame.groupby("item")["label"].mean().reindex(ids).to_numpy()
    np.testing.assert_allclose(data.vote_fraction(), votes)
    assert data.summary()["labels_per_annotator_max"] == frame.groupby("worker").size().max()
