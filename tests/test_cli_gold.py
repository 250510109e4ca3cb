"""Command line options for gold and repeated labels (issue 16, items 4-5): --gold, --gold-file, --repeated.

Bad input ends in one ``error:`` line naming the file, line and value, exit code 2, and nothing written.
"""
from __future__ import annotations

import json

import pytest

from noisycal_bayes.cli import main

# Clean label 1 for items 21..40 (scores rise with the item); annotators a, b, c flip the label of items that
# are multiples of 7, 5 and 6; gold known for items 4, 8, ..., 40 (column gold: 0 for 4..20, 1 for 24..40).
LABELS = ("item,annotator,label,gold\n"
          + "".join(f"{i},{a},{(i > 20) != (i % m == 0):d},{'' if i % 4 else int(i > 20)}\n"
                    for i in range(1, 41) for a, m in zip("abc", (7, 5, 6)))
          + "5,a,1,\n")  # a repeated label: annotator a on item 5 again (line 122; first at line 14)
SCORES = "item,score\n" + "".join(f"{i},{i / 41:.4f}\n" for i in range(1, 41))


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "ann.csv").write_text(LABELS)
    (tmp_path / "scores.csv").write_text(SCORES)
    return tmp_path


def test_gold_column_and_repeated_first_run_and_are_summarised(folder, capsys):
    code, out, err = run(capsys, "evaluate", folder / "ann.csv", "--scores", folder / "scores.csv", "--gold", "gold",
                         "--repeated", "first", "--method", "em", "--n-boot", 0, "--no-checks",
                         "--json", folder / "out.json")
    assert code == 0, err
    # 40 items, 3 annotators, 120 labels once the repeat is dropped; gold known for items 4, 8, ..., 40.
    assert "Data: 40 items, 3 annotators, 120 labels (per item 3-3, median 3; per annotator 40-40, median 40); " \
           "10 items with a gold label." in out
    assert json.loads((folder / "out.json").read_text())


@pytest.mark.parametrize("edit, extra, pieces", [
    (("4,a,0,0", "4,a,0,2"), ["--gold", "gold"], ["ann.csv, line 11, column 'gold'", "'2'"]),
    (("4,a,0,0", "4,a,0,yes"), ["--gold", "gold"], ["ann.csv, line 11, column 'gold'", "'yes'"]),
    (("4,b,0,0", "4,b,0,1"), ["--gold", "gold"], ["ann.csv, line 12, column 'gold'", "item 4 has gold label 1 here"]),
    (None, ["--gold", "truth"], ["no gold column 'truth'"]),
    (None, ["--gold-file", "GOLD:item,gold\n1,1\n99,0\n"], ["gold.csv, line 3", "item 99", "not in the annotations"]),
    (None, ["--gold-file", "GOLD:item,gold\n1,1\n2,high\n"], ["gold.csv, line 3, column 'gold'", "'high'"]),
    (None, ["--gold-file", "GOLD:item,gold\n1,1\n2,-1\n"], ["gold.csv, line 3, column 'gold'", "'-1'"]),
    (None, ["--repeated", "error"], ["ann.csv, line 122: duplicate (item, annotator) pair (5, 'a') (first at line 14)"]),
    (None, ["--gold", "gold", "--gold-file", "GOLD:item,gold\n1,1\n"], ["not allowed with argument"]),
    (None, ["--repeated", "last"], ["invalid choice: 'last'"]),
])
def test_bad_gold_or_repeats_give_one_line_errors_and_write_nothing(folder, capsys, edit, extra, pieces):
    if edit is not None:
        (folder / "ann.csv").write_text(LABELS.replace(*edit, 1))
    extra = list(extra)
    for k, arg in enumerate(extra):
        if arg.startswith("GOLD:"):
            (folder / "gold.csv").write_text(arg[5:])
            extra[k] = folder / "gold.csv"
    before = {p.name for p in folder.iterdir()}
    code, out, err = run(capsys, "evaluate", folder / "ann.csv", "--scores", folder / "scores.csv", "--method", "em",
                         *extra, "--json", folder / "out.json", "--out", folder / "report")
    assert code == 2, (out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for piece in pieces:
        assert piece in err, (piece, err)
    assert {p.name for p in folder.iterdir()} == before  # no JSON, no report folder, no temporary files
