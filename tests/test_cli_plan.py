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


# The NUTS case (a NUTS compile, about 7 s idle) is in make test-all; the EM case keeps the path in make test.
@pytest.mark.parametrize("method, opts", [("em", ()), pytest.param("nuts", ("--chains", 1, "--warmup", 100,
                                                                           "--draws", 100), marks=pytest.mark.slow)])
def test_plan_takes_repeated_labels_as_a_crowd(folder, capsys, method, opts):
    """Repeated (item, annotator) labels send EM to its sparse path; the NUTS plan then fits the partially pooled
    channels, as ``evaluate`` does (the grouped model refused them: zencrowd_us stopped with an error)."""
    if method == "nuts":
        pytest.importorskip("numpyro")
    (folder / "rep.csv").write_text(LABELS + "".join(f"{i},a,{int(i > 20)}\n" for i in range(1, 41, 3)))
    out_csv = folder / "plan.csv"
    code, out, err = run(capsys, "plan", folder / "rep.csv", "--scores", folder / "scores.csv", "--budget", 4,
                         "--method", method, *opts, "--out", out_csv)
    assert code == 0, err
    assert len(pd.read_csv(out_csv)) == 4


# ------------------------------------------------------------------------------ the plan inside evaluate's report
def test_evaluate_plan_is_the_planner_on_the_route_fit_and_reaches_every_output(tmp_path):
    """evaluate(plan=N): the plan is plan_labels on the route's own fit at the evaluation's bins and level (an
    independent call gives the same table); it reaches the text, Markdown, HTML, JSON and plan.csv; without it (None
    or 0) none of them carries a plan."""
    import json

    from noisycal_bayes import evaluate, simulate_annotations
    from noisycal_bayes.labels import plan_labels

    sim = simulate_annotations(400, fpr=[0.1, 0.3, 0.2], tpr=[0.9, 0.7, 0.8], curve="overconfident", seed=1)
    kw = dict(method="em", n_boot=0, checks=False, metrics=False, bins=8, level=0.8)
    ev = evaluate(sim.data, plan=6, **kw)
    ref = plan_labels(sim.data, ev.fit, budget=6, bins=8, level=0.8)
    pd.testing.assert_frame_equal(ev.plan.table, ref.table)
    assert ev.plan.width_after < ev.plan.width_before and ev.plan.level == 0.8
    text = ev.summary()
    assert "Where the next labels help most" in text and f"{ev.plan.width_after:.3f} after the plan" in text
    top = ev.plan.table.iloc[0]
    assert any(line.split()[:3] == ["1", str(top["item"]), str(top["annotator"])] for line in text.splitlines())
    d = json.loads(ev.to_json())["label_plan"]
    assert d["budget"] == 6 and [a["item"] for a in d["actions"]] == list(ev.plan.table["item"])
    files = ev.write_report(tmp_path / "rep")
    names = {f.name for f in files}
    assert "plan.csv" in names
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "rep" / "plan.csv"), ev.plan.table, check_dtype=False)
    assert "## Where the next labels help most" in (tmp_path / "rep" / "summary.md").read_text()
    assert '<section id="plan">' in (tmp_path / "rep" / "report.html").read_text()
    for off in (None, 0):
        ev0 = evaluate(sim.data, plan=off, **kw)
        assert ev0.plan is None and "label_plan" not in ev0.to_dict() and "next labels" not in ev0.summary()
        assert "plan.csv" not in {f.name for f in ev0.write_report(tmp_path / f"off{off}")}
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="plan"):
            evaluate(sim.data, plan=bad, **kw)


def test_evaluate_multiclass_plan_targets_the_top_label_nc_ece():
    from noisycal_bayes import evaluate_multiclass
    from noisycal_bayes.simulate import simulate_multiclass

    ev = evaluate_multiclass(simulate_multiclass(300, 3, 3, seed=0).data, n_boot=0, checks=False, metrics=False,
                             plan=4)
    assert ev.plan.target == "top_label_nc_ece" and len(ev.plan.table) == 4
    assert ev.to_dict()["label_plan"]["budget"] == 4 and "Where the next labels help most" in ev.summary()


def test_evaluate_cli_plan_writes_plan_csv_beside_the_report(folder, capsys):
    import json

    code, out, err = run(capsys, "evaluate", folder / "ann.csv", "--scores", folder / "scores.csv", "--method", "em",
                         "--n-boot", 0, "--no-checks", "--no-metrics", "--plan", 4, "--out", folder / "rep",
                         "--json", folder / "r.json")
    assert code == 0, err
    assert "Where the next labels help most" in out and "plan.csv (4 rows" in out
    plan = pd.read_csv(folder / "rep" / "plan.csv", keep_default_na=False)
    assert list(plan["rank"]) == [1, 2, 3, 4]
    assert json.loads((folder / "r.json").read_text())["label_plan"]["budget"] == 4
    code, out, err = run(capsys, "evaluate", folder / "ann.csv", "--scores", folder / "scores.csv", "--method", "em",
                         "--plan", -2)
    assert code != 0 and "--plan" in err
