"""``noisycal-bayes plan``: the labelling plan as CSV (issue 37, part 3); bad options end in one ``error:`` line."""
from __future__ import annotations

import pandas as pd
import pytest

from noisycal_bayes.cli import main

# Clean label 1 for items 21..40 (scores rise with the item); annotators a, b, c flip the label of items that are
# multiples of 7, 5 and 6.
LABELS = ("item,annotator,label\n"
          + "".join(f"{i},{a},{(i > 20) != (i % m == 0):d}\n" for i in range(1, 41) for a, m in zip("abc", (7, 5, 6))))
SCORES = "item,score\n" + "".join(f"{i},{i / 41:.4f}\n" for i in range(1, 41))


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "ann.csv").write_text(LABELS)
    (tmp_path / "scores.csv").write_text(SCORES)
    return tmp_path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("kind", ["label", "gold"])
def test_plan_writes_the_csv(folder, capsys, kind):
    out_csv = folder / "plan.csv"
    code, out, err = run(capsys, "plan", folder / "ann.csv", "--scores", folder / "scores.csv", "--budget", 6,
                         "--kind", kind, "--out", out_csv)
    assert code == 0, err
    assert "Labelling plan for nc_ece" in out and f"Plan written to {out_csv}" in out
    plan = pd.read_csv(out_csv, keep_default_na=False)
    assert list(plan.columns) == ["rank", "item", "annotator", "action", "gain", "label_gain", "channel_gain",
                                  "variance_after", "width_after"]
    assert list(plan["rank"]) == list(range(1, 7)) and set(plan["action"]) == {kind}
    assert set(plan["item"]) <= set(range(1, 41))
    if kind == "label":
        assert set(plan["annotator"]) <= {"a", "b", "c"}
    else:
        assert plan["item"].is_unique and set(plan["annotator"]) == {""}
    assert (plan["variance_after"].diff().dropna() <= 0).all()


def test_plan_asks_only_the_named_annotators(folder, capsys):
    code, _, err = run(capsys, "plan", folder / "ann.csv", "--scores", folder / "scores.csv", "--budget", 4, "--ask",
                       "b,c", "--out", folder / "p.csv")
    assert code == 0, err
    assert set(pd.read_csv(folder / "p.csv")["annotator"]) <= {"b", "c"}


@pytest.mark.parametrize("argv, piece", [
    (["--budget", "0"], "`budget` must be an integer >= 1"),
    (["--budget", "3", "--ask", "a,zz"], "annotators ['zz'] are not in the data"),
    (["--budget", "3", "--no-repeats"], "no (item, annotator) pair is left"),
    (["--budget", "3", "--kind", "gold", "--ask", "a"], "a gold check needs none"),
])
def test_bad_options_are_one_line_errors(folder, capsys, argv, piece):
    out_csv = folder / "never.csv"
    code, _, err = run(capsys, "plan", folder / "ann.csv", "--scores", folder / "scores.csv", *argv, "--out", out_csv)
    assert code == 2 and err.startswith("error:") and piece in err and err.count("\n") == 1
    assert not out_csv.exists()


def test_nuts_plan_takes_repeated_labels_as_a_crowd(folder, capsys):
    """Repeated (item, annotator) labels send EM to its sparse path; the NUTS plan then fits the partially pooled
    channels, as ``evaluate`` does (the grouped model refused them: zencrowd_us stopped with an error)."""
    pytest.importorskip("numpyro")
    (folder / "rep.csv").write_text(LABELS + "".join(f"{i},a,{int(i > 20)}\n" for i in range(1, 41, 3)))
    out_csv = folder / "plan.csv"
    code, out, err = run(capsys, "plan", folder / "rep.csv", "--scores", folder / "scores.csv", "--budget", 4,
                         "--method", "nuts", "--chains", 1, "--warmup", 100, "--draws", 100, "--out", out_csv)
    assert code == 0, err
    assert len(pd.read_csv(out_csv)) == 4
