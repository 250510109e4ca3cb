"""Fuzzing the CSV loaders and the command line with malformed files.

Contract (cli.py docstring, issue 7): every input ends either in a correct result, or in exactly one
``error: ...`` line naming the problem with exit code 2; never a traceback, never a hang (each run is
under a time limit), never an output file (or a partial one) left behind on failure.

"Correct" is checked, not assumed: a file that spells the canonical data differently (BOM, CRLF, quotes,
blank lines, shuffled rows, renamed ids, wide layout, ...) must give the same numbers as the canonical file.
"""
from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from noisycal_bayes import simulate_annotations
from noisycal_bayes.data.loaders import load_annotations_csv, load_scores_csv

from ._helpers import assert_one_line_error, property_settings, run_cli, time_limit, tree

ANNOTATORS = {0: "a", 1: "b", 2: "c"}
EVAL = ["--method", "em", "--n-boot", "0", "--groups", "4", "--seed", "1"]


# ---------------------------------------------------------------------------------------------- canonical data
@pytest.fixture(scope="module")
def canon():
    """80 items, 3 annotators, 10% missing; long-format rows and scores as data frames."""
    sim = simulate_annotations(80, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], curve="overconfident",
                               missing=0.1, seed=3)
    long = sim.data.to_long()
    long["item"] = long["item"].astype(int) + 1001
    long["annotator"] = long["annotator"].map(ANNOTATORS)
    scores = pd.DataFrame({"item": np.arange(80) + 1001, "score": sim.data.scores})
    return long[["item", "annotator", "label"]], scores


def write(path, text, encoding="utf-8"):
    path.write_bytes(text if isinstance(text, bytes) else text.encode(encoding))
    return path


def csv_text(frame: pd.DataFrame, **kw) -> str:
    return frame.to_csv(index=False, lineterminator="\n", **kw)


@pytest.fixture(scope="module")
def canon_result(canon, tmp_path_factory):
    folder = tmp_path_factory.mktemp("canon")
    long, scores = canon
    ann, sc = write(folder / "ann.csv", csv_text(long)), write(folder / "scores.csv", csv_text(scores))
    code, out, err = run_cli(["evaluate", ann, "--scores", sc, *EVAL, "--json", folder / "r.json"])
    assert code == 0, err
    return json.loads((folder / "r.json").read_text())


def summary(result: dict, rename_annotators=None) -> dict:
    """The numbers a user reads: NC-ECE, channels by annotator, naive metrics."""
    rename = rename_annotators or {}
    inv = {v: k for k, v in rename.items()}
    return {
        "nc_ece": result["nc_ece"]["value"],
        "channels": {inv.get(c["annotator"], c["annotator"]): (c["fpr"], c["tpr"]) for c in result["channels"]},
        "ece_majority": result["naive"]["ece_majority"],
        "smece": result["naive"]["smece_vote_fraction"],
    }


def assert_same_numbers(got: dict, want: dict, tol=1e-9):
    assert got["channels"].keys() == want["channels"].keys()
    for k in want["channels"]:
        np.testing.assert_allclose(got["channels"][k], want["channels"][k], rtol=0, atol=tol)
    for k in ("nc_ece", "ece_majority", "smece"):
        assert abs(got[k] - want[k]) <= tol, (k, got[k], want[k])


# ---------------------------------------------------------------------------------------------- same data, spelt differently
def _wide_with_score(long, scores, missing=""):
    w = long.pivot(index="item", columns="annotator", values="label")
    w = w.map(lambda v: missing if pd.isna(v) else str(int(v)))
    w = w.reset_index().merge(scores, on="item")
    return csv_text(w)


def _rename_items(long, scores, mapping):
    return long.assign(item=long["item"].map(mapping)), scores.assign(item=scores["item"].map(mapping))


HUGE = {i: str(10**40 + i) for i in range(1001, 1081)}          # integers far beyond int64
UNICODE_ITEMS = {i: f"画像-{i}-ü" for i in range(1001, 1081)}
LONG_ITEMS = {i: "x" * 2000 + str(i) for i in range(1001, 1081)}   # 2 kB ids
UNICODE_ANNOTATORS = {"a": "Ärztin α", "b": "医生", "c": "d,r"}  # the last one needs quoting


def _equivalent_cases(long, scores):
    """name -> (annotation text, scores text or None, annotator renaming)."""
    L, S = csv_text(long), csv_text(scores)
    shuffled = long.sample(frac=1.0, random_state=0)
    cases = {
        "bom": ("\ufeff" + L, "\ufeff" + S, None),
        "crlf": (L.replace("\n", "\r\n"), S.replace("\n", "\r\n"), None),
        "blank lines": ("\n" + L.replace("\n", "\n\n"), S + "\n\n\n", None),
        "blank separator lines": (L.replace("\n", "\n,,\n", 3), S, None),
        "all fields quoted": (csv_text(long, quoting=1), csv_text(scores, quoting=1), None),
        "spaces around fields": (L.replace(",", " , "), S.replace(",", ", "), None),
        "trailing separators": (L.replace("\n", ",\n"), S.replace("\n", ",\n"), None),
        "extra columns": (csv_text(long.assign(comment="ok, fine", rater_age=33)),
                          csv_text(scores.assign(model="v2")), None),
        "columns reordered": (csv_text(long[["label", "annotator", "item"]]), csv_text(scores[["score", "item"]]), None),
        "labels as 1.0 / 0.0": (csv_text(long.assign(label=long["label"].astype(float))), S, None),
        "scores in exponent notation": (L, csv_text(scores.assign(score=[f"{z:.17e}" for z in scores["score"]])), None),
        "rows shuffled": (csv_text(shuffled), csv_text(scores.sample(frac=1.0, random_state=1)), None),
        "huge integer ids": (*map(csv_text, _rename_items(shuffled, scores, HUGE)), None),
        "unicode item ids": (*map(csv_text, _rename_items(shuffled, scores, UNICODE_ITEMS)), None),
        "2 kB item ids": (*map(csv_text, _rename_items(long, scores, LONG_ITEMS)), None),
        "unicode annotator ids": (csv_text(long.assign(annotator=long["annotator"].map(UNICODE_ANNOTATORS))), S,
                                  UNICODE_ANNOTATORS),
        "scores for unannotated items too": (L, csv_text(pd.concat([scores, pd.DataFrame(
            {"item": [5000, 5001], "score": [0.5, 0.25]})])), None),
        "score column in the long file": (csv_text(long.merge(scores, on="item")), None, None),
        "wide layout, empty cells": (_wide_with_score(long, scores), None, None),
        "wide layout, NA cells": (_wide_with_score(long, scores, missing="NA"), None, None),
        "wide layout, -1 cells": (_wide_with_score(long, scores, missing="-1"), None, None),
    }
    return cases


EQUIVALENT_NAMES = sorted(_equivalent_cases(pd.DataFrame({"item": [], "annotator": [], "label": []}),
                                            pd.DataFrame({"item": [], "score": []})))


@pytest.mark.parametrize("case", EQUIVALENT_NAMES)
def test_differently_spelt_files_give_the_canonical_result(case, canon, canon_result, tmp_path):
    long, scores = canon
    ann_text, sc_text, rename = _equivalent_cases(long, scores)[case]
    ann = write(tmp_path / "ann.csv", ann_text)
    argv = ["evaluate", ann, *EVAL, "--json", tmp_path / "r.json"]
    if sc_text is not None:
        argv[2:2] = ["--scores", write(tmp_path / "scores.csv", sc_text)]
    code, out, err = run_cli(argv)
    assert code == 0, err
    assert "Traceback" not in out + err
    got = json.loads((tmp_path / "r.json").read_text())
    # Same annotator order: the same compressed table and EM starts, so equal up to summation order (1e-9).
    # Renamed annotators sort differently, so each annotator gets another column of random EM starts; EM stops
    # when a step moves < 1e-8, which leaves the fixed point within 1e-8 r / (1 - r) <= 1e-6 for any
    # linear rate r <= 0.99.
    tol = 1e-9 if rename is None else 1e-6
    assert_same_numbers(summary(got, rename), summary(canon_result), tol=tol)
    assert not [p for p in tree(tmp_path) if p.endswith(".tmp") or p.startswith(".")]


# ---------------------------------------------------------------------------------------------- malformed files
def _flip_label(line: str) -> str:
    head, label = line.rstrip("\n").rsplit(",", 1)
    return f"{head},{1 - int(label)}\n"


def _bad_cases(long, scores):
    """name -> (annotation text or bytes, scores text or None, a piece the error must contain)."""
    L, S = csv_text(long), csv_text(scores)
    first_item = str(long["item"].iloc[0])
    lines = L.splitlines(keepends=True)
    return {
        "empty annotation file": ("", S, "empty"),
        "empty scores file": (L, "", "empty"),
        "only blank lines": ("\n\n  \n", S, "empty"),
        "header only": ("item,annotator,label\n", S, "no data rows"),
        "header without newline": ("item,annotator,label", S, "no data rows"),
        "one row (one annotator)": ("item,annotator,label\n1001,a,1\n", S, "single annotator"),
        "one annotator": (csv_text(long[long["annotator"] == "a"]), S, "single annotator"),
        "missing label column": (csv_text(long.rename(columns={"label": "lbl"})), S, "'label'"),
        "missing item column in scores": (L, csv_text(scores.rename(columns={"item": "id"})), "'item'"),
        "missing score column": (L, csv_text(scores[["item"]]), "'score'"),
        "semicolon delimiter": (L.replace(",", ";"), S, "item;annotator;label"),
        "tab delimiter": (L.replace(",", "\t"), S, "item\\tannotator\\tlabel"),
        "labels yes/no": (csv_text(long.assign(label=long["label"].map({1: "yes", 0: "no"}))), S, "'yes'"),
        "labels true/false": (csv_text(long.assign(label=long["label"].map({1: "true", 0: "false"}))), S, "must be 0 or 1"),
        "label 2": (csv_text(long.assign(label=long["label"].where(long.index != 5, 2))), S, "must be 0 or 1"),
        "label NaN": (csv_text(long.assign(label=long["label"].astype(object).where(long.index != 5, "NaN"))), S,
                      "'NaN'"),
        "label empty": (csv_text(long.assign(label=long["label"].astype(object).where(long.index != 5, ""))), S,
                        "empty cell"),
        "label 0.5": (csv_text(long.assign(label=long["label"].astype(float).where(long.index != 5, 0.5))), S, "'0.5'"),
        "score NaN": (L, csv_text(scores.assign(score=scores["score"].astype(object).where(scores.index != 3, "nan"))),
                      "'nan'"),
        "score inf": (L, csv_text(scores.assign(score=scores["score"].astype(object).where(scores.index != 3, "inf"))),
                      "finite"),
        "score -inf": (L, csv_text(scores.assign(score=scores["score"].astype(object).where(scores.index != 3, "-inf"))),
                       "finite"),
        "negative score": (L, csv_text(scores.assign(score=scores["score"].where(scores.index != 3, -0.2))), "'-0.2'"),
        "score above 1": (L, csv_text(scores.assign(score=scores["score"].where(scores.index != 3, 1.5))), "'1.5'"),
        "score as a logit": (L, csv_text(scores.assign(score=scores["score"].where(scores.index != 3, 3.2))), "logits"),
        "score as a percentage": (L, csv_text(scores.assign(score=scores["score"].astype(object).where(
            scores.index != 3, "40%"))), "'40%'"),
        "decimal comma": (L, 'item,score\n' + "".join(f'{i},"{str(z).replace(".", ",")}"\n'
                                                       for i, z in zip(scores["item"], scores["score"])), "got '0,"),
        "item with an empty score": (L, csv_text(scores.assign(score=scores["score"].astype(object).where(
            scores.index != 3, ""))), "empty cell"),
        "item without a score row": (L, csv_text(scores.iloc[1:]), "no score"),
        "duplicated row": (L + lines[1], S, "duplicate (item, annotator)"),
        "conflicting duplicate": (L + _flip_label(lines[1]), S, "duplicate (item, annotator)"),
        "duplicated score row": (L, S + csv_text(scores.iloc[:1]).splitlines(keepends=True)[1], "duplicate item"),
        "ragged row": (L + "1001,a\n", S, "expected 3 fields"),
        "too many fields": (L + "1001,a,1,extra,more\n", S, "expected 3 fields"),
        "duplicate column names": ("item,annotator,label,label\n1001,a,1,1\n", S, "duplicate column"),
        "empty column name": ("item,,label\n1001,a,1\n", S, "no name"),
        "empty item id": (L + ",a,1\n", S, "empty item id"),
        "empty annotator id": (L + f"{first_item},,1\n", S, "empty annotator id"),
        "latin-1 encoded": (L.replace(",a,", ",é,").encode("latin-1"), S, "UTF-8"),
        "binary garbage": (bytes(range(256)) * 4, S, "UTF-8"),
        "a zip file": (b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(200), S, "ann.csv"),
        "NUL bytes": (L.replace("\n1001,", "\n1001\x00,", 1), S, "['1001\\x00'] have no score"),
        "unterminated quote": (L + '"1001,a,1\n1002,a,0\n', S, "ann.csv"),
        "scores given twice": (csv_text(long.merge(scores, on="item")), S, "one source of scores"),
        "no scores at all": (L, None, "--scores"),
        "wide item without labels": ("item,a,b,score\n1,1,0,0.5\n2,,,0.4\n3,0,0,0.1\n", None, "no label"),
        "wide only item and score": ("item,score\n1,0.5\n2,0.4\n", None, "one column per annotator"),
        "wide label yes": ("item,a,b,score\n1,yes,0,0.5\n2,1,1,0.4\n", None, "'yes'"),
        "huge id with a bad label": (f"item,annotator,label\n{'9' * 4000},a,7\n", S, "must be 0 or 1"),
    }


BAD_NAMES = sorted(_bad_cases(pd.DataFrame({"item": [1], "annotator": ["a"], "label": [1]}),
                              pd.DataFrame({"item": [1], "score": [0.5]})))


@pytest.mark.parametrize("case", BAD_NAMES)
def test_malformed_files_give_one_error_line_and_leave_nothing_behind(case, canon, tmp_path):
    long, scores = canon
    ann_text, sc_text, piece = _bad_cases(long, scores)[case]
    ann = write(tmp_path / "ann.csv", ann_text)
    argv = ["evaluate", ann, *EVAL, "--json", tmp_path / "r.json", "--out", tmp_path / "report"]
    if "duplicate" in case and "score" not in case:
        argv += ["--repeated", "error"]  # repeated labels are accepted by default; refused on request
    if sc_text is not None:
        argv[2:2] = ["--scores", write(tmp_path / "scores.csv", sc_text)]
    before = tree(tmp_path)
    code, out, err = run_cli(argv)
    assert code == 2, (code, out, err)
    assert_one_line_error(err, piece=piece)
    assert tree(tmp_path) == before  # no JSON, no report folder, no temporary file


@pytest.mark.parametrize("target", ["folder", "missing"])
def test_unreadable_paths_are_one_line_errors(target, tmp_path):
    path = tmp_path if target == "folder" else tmp_path / "nope.csv"
    code, out, err = run_cli(["evaluate", path, "--scores", tmp_path / "s.csv", *EVAL])
    assert code == 2
    assert_one_line_error(err, piece=str(path))


def test_distinct_zero_padded_ids_are_not_merged(tmp_path):
    """'007' and '7' are different items; reading both as 7 merges their labels without a word."""
    ann = write(tmp_path / "ann.csv", "item,annotator,label\n007,a,1\n7,b,0\n8,a,0\n8,b,0\n")
    try:
        data = load_annotations_csv(ann)
    except ValueError:
        return  # an error naming the clash is acceptable
    assert data.n_items == 3, f"items {data.item_ids.tolist()} with labels {data.labels.tolist()}"


def test_ids_beyond_the_int_conversion_limit_load_or_name_the_file(tmp_path):
    huge = "9" * 5000
    ann = write(tmp_path / "ann.csv", f"item,annotator,label\n{huge},a,1\n{huge},b,0\n1,a,0\n1,b,0\n")
    try:
        data = load_annotations_csv(ann)
    except ValueError as exc:
        assert str(ann) in str(exc), str(exc)
        return
    assert data.n_items == 2


# ---------------------------------------------------------------------------------------------- apply
@pytest.fixture(scope="module")
def saved_map(canon, tmp_path_factory):
    folder = tmp_path_factory.mktemp("map")
    long, scores = canon
    ann, sc = write(folder / "ann.csv", csv_text(long)), write(folder / "scores.csv", csv_text(scores))
    code, out, err = run_cli(["recalibrate", ann, "--scores", sc, "--map", "temperature", "--groups", "4",
                              "--save", folder / "map.json"])
    assert code == 0, err
    return folder / "map.json"


APPLY_BAD = {
    "empty": ("", "empty"),
    "score NaN": ("item,score\n1,0.5\n2,NaN\n", "'NaN'"),
    "score inf": ("item,score\n1,0.5\n2,inf\n", "finite"),
    "negative score": ("item,score\n1,-0.5\n", "'-0.5'"),
    "missing score column": ("item,prob\n1,0.5\n", "'score'"),
    "duplicate item": ("item,score\n1,0.5\n1,0.6\n", "duplicate item"),
    "semicolons": ("item;score\n1;0.5\n", "'item'"),
    "binary": (bytes(range(256)), "UTF-8"),
}


@pytest.mark.parametrize("case", sorted(APPLY_BAD))
def test_apply_with_malformed_scores(case, saved_map, tmp_path):
    text, piece = APPLY_BAD[case]
    sc = write(tmp_path / "new.csv", text)
    before = tree(tmp_path)
    code, out, err = run_cli(["apply", saved_map, sc, "--out", tmp_path / "out.csv"])
    assert code == 2
    assert_one_line_error(err, piece=piece)
    assert tree(tmp_path) == before


def test_apply_is_correct_on_awkward_but_valid_scores(saved_map, tmp_path):
    from noisycal_bayes.recalibration.maps import map_from_dict

    text = "\ufeffitem,score\r\n\r\n\"画像,1\",0\r\n2,1\r\n3,\"0.5\"\r\n" + "9" * 60 + ",1e-300\r\n"
    sc = write(tmp_path / "new.csv", text)
    code, out, err = run_cli(["apply", saved_map, sc, "--out", tmp_path / "out.csv"])
    assert code == 0, err
    got = pd.read_csv(tmp_path / "out.csv", dtype={"item": str})
    model = map_from_dict(json.loads(saved_map.read_text())["model"])
    want = model.predict(np.array([0.0, 1.0, 0.5, 1e-300]))
    assert got["item"].tolist() == ["画像,1", "2", "3", "9" * 60]
    np.testing.assert_allclose(got["recalibrated"].to_numpy(), want, rtol=0, atol=1e-15)
    assert np.all(np.isfinite(want)) and np.all((want >= 0) & (want <= 1))
    assert sorted(tree(tmp_path)) == ["new.csv", "out.csv"]


# ---------------------------------------------------------------------------------------------- random mutations
GOOD_LONG = "item,annotator,label\n1,a,1\n1,b,1\n2,a,0\n2,b,1\n3,a,0\n3,b,0\n4,c,1\n4,a,1\n"
GOOD_SCORES = "item,score\n1,0.9\n2,0.4\n3,0.1\n4,0.7\n"
GOOD_WIDE = "item,a,b,c,score\n1,1,1,,0.9\n2,0,1,0,0.4\n3,0,,0,0.1\n4,1,1,1,0.7\n"
NASTY = [",", ";", "\t", '"', "\n", "\r", "\x00", "\ufeff", " ", "é", "-", "1", "0", "2", ".", "e", "nan", "inf",
         "-1", "NA", "\\", "'", "\u2028", "９"]


@st.composite
def mutated(draw):
    base = draw(st.sampled_from([GOOD_LONG, GOOD_WIDE, GOOD_SCORES]))
    text = base
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["insert", "delete", "replace", "dup_line", "drop_line", "swap_lines"]))
        pos = draw(st.integers(0, max(len(text) - 1, 0)))
        if kind == "insert":
            text = text[:pos] + draw(st.sampled_from(NASTY)) + text[pos:]
        elif kind == "delete":
            text = text[:pos] + text[pos + 1:]
        elif kind == "replace":
            text = text[:pos] + draw(st.sampled_from(NASTY)) + text[pos + 1:]
        else:
            lines = text.splitlines(keepends=True) or [""]
            k = draw(st.integers(0, len(lines) - 1))
            if kind == "dup_line":
                lines.insert(k, lines[k])
            elif kind == "drop_line":
                del lines[k]
            else:
                m = draw(st.integers(0, len(lines) - 1))
                lines[k], lines[m] = lines[m], lines[k]
            text = "".join(lines)
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "latin-1", "utf-16"]))
    return base, text.encode(encoding, errors="replace")


@property_settings(300)
@given(mutated())
def test_mutated_files_load_correctly_or_raise_one_line_value_errors(tmp_path_factory, case):
    base, raw = case
    folder = tmp_path_factory.mktemp("mut")
    path = write(folder / "f.csv", raw)
    scores = write(folder / "s.csv", GOOD_SCORES)
    try:
        with time_limit(20):
            if base is GOOD_SCORES:
                out = load_scores_csv(path)
            elif base is GOOD_WIDE:
                out = load_annotations_csv(path)
            else:
                out = load_annotations_csv(path, scores)
    except ValueError as exc:
        msg = str(exc)
        assert "\n" not in msg and "\r" not in msg and msg.strip() == msg, repr(msg)
        assert msg.startswith(str(folder)), msg  # names the file
        return
    # Loaded: whatever came out satisfies the data invariants.
    if base is GOOD_SCORES:
        z = out.to_numpy()
        assert np.all(np.isfinite(z)) and np.all((z >= 0) & (z <= 1)) and not out.index.has_duplicates
        return
    # Repeated (item, annotator) labels are kept: check the invariants on the responses, which hold them all.
    item, ann, lab = out.responses
    assert set(np.unique(lab)) <= {0, 1}
    assert np.all(np.bincount(item, minlength=out.n_items) > 0) and np.all(np.bincount(ann, minlength=out.n_annotators) > 0)
    if out.scores is not None:
        assert np.all(np.isfinite(out.scores)) and np.all((out.scores >= 0) & (out.scores <= 1))


def test_random_junk_files_through_the_command_line(tmp_path):
    """A few hundred bytes of random printable junk per file: always a one-line error, exit 2."""
    rng = random.Random(7)
    alphabet = "0123456789abc,;\t\"\n\r -.éx\ufeff"
    for k in range(25):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        ann = write(tmp_path / f"junk{k}.csv", text)
        sc = write(tmp_path / "s.csv", GOOD_SCORES)
        before = tree(tmp_path)
        code, out, err = run_cli(["evaluate", ann, "--scores", sc, *EVAL, "--json", tmp_path / "r.json"])
        assert code == 2, (text, out, err)
        assert_one_line_error(err)
        assert tree(tmp_path) == before


@pytest.mark.parametrize("layout", ["long", "wide"])
def test_non_canonical_annotator_ids_are_not_merged(tmp_path, layout):
    """Annotators '01' and '1' are two people; reading both as the int 1 would pool their labels."""
    if layout == "long":
        text = "item,annotator,label\na,01,1\na,1,0\nb,01,0\nb,1,0\n"
    else:
        text = "item,01,1\na,1,0\nb,0,0\n"
    data = load_annotations_csv(write(tmp_path / "ann.csv", text))
    assert data.n_annotators == 2 and sorted(map(str, data.annotator_ids)) == ["01", "1"]
    assert data.labels[list(data.item_ids).index("a")].tolist() in ([1, 0], [0, 1])


def test_canonical_integer_ids_are_still_read_as_ints(tmp_path):
    data = load_annotations_csv(write(tmp_path / "ann.csv", "item,annotator,label\n10,1,1\n9,2,0\n10,2,0\n9,1,1\n"))
    assert list(data.item_ids) == [9, 10] and list(data.annotator_ids) == [1, 2]
