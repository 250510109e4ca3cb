"""Tests of noisycal_bayes/cli.py, driven in-process through ``main([...])``."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes import Channel, ece, nc_ece, simulate_annotations, smece
from noisycal_bayes.cli import bayes_available, main
from noisycal_bayes.data.loaders import load_annotations_csv


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small simulated data set written as long-format annotations + scores CSV files."""
    folder = tmp_path_factory.mktemp("data")
    sim = simulate_annotations(500, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], curve="overconfident", missing=0.1,
                               seed=11)
    long = sim.data.to_long()
    long["annotator"] = long["annotator"].map({0: "ann_a", 1: "ann_b", 2: "ann_c"})
    long[["item", "annotator", "label"]].to_csv(folder / "ann.csv", index=False)
    pd.DataFrame({"item": sim.data.item_ids, "score": sim.data.scores}).to_csv(folder / "scores.csv", index=False)
    return folder / "ann.csv", folder / "scores.csv"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in err


# ------------------------------------------------------------------------------------------ demo
def test_demo_runs_and_writes_the_report(tmp_path, capsys):
    out_dir = tmp_path / "report"
    code, out, err = run(capsys, "demo", "--out", out_dir, "--n-boot", 10, "--method", "em")
    assert code == 0, err
    for piece in ("NC-ECE", "oracle ECE", "majority vote", "vote fraction", "true gap", "Recalibration",
                  f"Report written to {out_dir}"):
        assert piece in out
    names = {p.name for p in out_dir.iterdir()}
    assert {"summary.md", "results.json", "reliability.png", "channels.png", "nc_ece.png", "gap_sensitivity.png"} <= names
    assert not [n for n in names if n.endswith(".tmp")]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left behind
    for png in ("reliability.png", "channels.png", "nc_ece.png", "gap_sensitivity.png"):
        assert (out_dir / png).read_bytes()[:4] == b"\x89PNG"
    summary = (out_dir / "summary.md").read_text()
    assert "![reliability.png](reliability.png)" in summary and "oracle ECE" in summary
    results = json.loads((out_dir / "results.json").read_text())
    assert results["n_items"] == 4000 and len(results["recalibration"]) == 10
    # The oracle ECE in the demo is the ECE of the bundled clean labels (independent recomputation).
    from noisycal_bayes.data.loaders import load_demo

    data, truth = load_demo()
    oracle = ece(data.scores, truth["clean_labels"], bins=10)
    assert f"{oracle:.3f}" in out


# ------------------------------------------------------------------------------------------ evaluate
def test_evaluate_writes_json_with_the_schema(files, tmp_path, capsys):
    ann, scores = files
    js = tmp_path / "res.json"
    code, out, err = run(capsys, "evaluate", ann, "--scores", scores, "--method", "em", "--n-boot", 8,
                         "--bins", 8, "--groups", 4, "--json", js)
    assert code == 0, err
    assert "NC-ECE" in out and f"Results written to {js}" in out
    res = json.loads(js.read_text())
    assert set(res["nc_ece"]) >= {"value", "lower", "upper", "level", "target", "method"}
    assert res["nc_ece"]["method"] == "em" and res["nc_ece"]["level"] == 0.9
    assert res["nc_ece"]["lower"] <= res["nc_ece"]["upper"]
    assert [c["annotator"] for c in res["channels"]] == ["ann_a", "ann_b", "ann_c"]
    for c in res["channels"]:
        for q in ("fpr", "tpr", "gap"):
            assert c[f"{q}_lower"] <= c[f"{q}_upper"]
        assert math.isclose(c["gap"], c["tpr"] - c["fpr"], abs_tol=1e-12)
    assert set(res["naive"]) >= {"ece_majority", "smece_vote_fraction", "ece_per_annotator"}
    assert set(res["naive"]["ece_per_annotator"]) == {"ann_a", "ann_b", "ann_c"}
    assert set(res["diagnostics"]) == {"rhat_max", "ess_min", "divergences", "warnings"}
    assert res["diagnostics"]["rhat_max"] is None  # EM has no MCMC diagnostics
    assert (res["n_items"], res["n_annotators"]) == (500, 3)

    # Independent recomputation from the files: the reported numbers are the package's estimators
    # evaluated at the reported channels.
    data = load_annotations_csv(ann, scores)
    ch = Channel([c["fpr"] for c in res["channels"]], [c["tpr"] for c in res["channels"]])
    assert math.isclose(res["nc_ece"]["value"], nc_ece(data, ch, bins=8).value, rel_tol=1e-9)
    assert math.isclose(res["naive"]["ece_majority"], ece(data.scores, data.majority_vote(), bins=8), rel_tol=1e-12)
    assert math.isclose(res["naive"]["smece_vote_fraction"], smece(data.scores, data.vote_fraction(), bins=8),
                        rel_tol=1e-12)
    obs = data.labels[:, 1] >= 0
    assert math.isclose(res["naive"]["ece_per_annotator"]["ann_b"],
                        ece(data.scores[obs], data.labels[obs, 1], bins=8), rel_tol=1e-12)
    assert len(res["reliability"]) == 8


def test_evaluate_wide_file_and_report_folder(files, tmp_path, capsys):
    ann, scores = files
    long = pd.read_csv(ann)
    wide = long.pivot(index="item", columns="annotator", values="label").reset_index()
    wide = wide.merge(pd.read_csv(scores), on="item")
    wide["batch"] = wide["item"] // 10  # a column that is not an annotator
    path = tmp_path / "wide.csv"
    wide.to_csv(path, index=False)  # missing responses become empty cells
    code, out, err = run(capsys, "evaluate", path, "--method", "em", "--n-boot", 0, "--out", tmp_path / "rep",
                         "--annotators", "ann_a,ann_b,ann_c")
    assert code == 0, err
    assert {"summary.md", "results.json", "reliability.png", "channels.png"} <= {p.name for p in (tmp_path / "rep").iterdir()}
    res = json.loads((tmp_path / "rep" / "results.json").read_text())
    assert res["nc_ece"]["lower"] is None and res["channels"][0]["gap_lower"] is None
    assert any("no interval" in w for w in res["diagnostics"]["warnings"])


def test_method_nuts_without_the_bayesian_layer(files, tmp_path, capsys, monkeypatch):
    import sys

    # Simulate an installation without the Bayesian layer: importing it fails.
    monkeypatch.setitem(sys.modules, "noisycal_bayes.propagate", None)
    assert not bayes_available()
    ann, scores = files
    js = tmp_path / "x.json"
    code, out, err = run(capsys, "evaluate", ann, "--scores", scores, "--method", "nuts", "--json", js)
    assert code == 2
    assert_one_line_error(err)
    assert "Bayesian layer" in err and "--method em" in err
    assert not js.exists()


@pytest.mark.slow
def test_evaluate_with_nuts(files, tmp_path, capsys):
    if not bayes_available():
        pytest.skip("the Bayesian layer is not installed")
    ann, scores = files
    js = tmp_path / "nuts.json"
    code, out, err = run(capsys, "evaluate", ann, "--scores", scores, "--method", "nuts", "--chains", 2,
                         "--warmup", 150, "--draws", 150, "--json", js)
    assert code == 0, err
    res = json.loads(js.read_text())
    from noisycal_bayes.propagate import DEFAULT_METHOD, TARGETS

    assert res["nc_ece"]["method"] == "nuts" and res["nc_ece"]["target"] == TARGETS[DEFAULT_METHOD]
    assert 0 <= res["nc_ece"]["lower"] <= res["nc_ece"]["upper"]
    d = res["diagnostics"]
    assert d["rhat_max"] >= 1 - 1e-6 and d["ess_min"] > 0 and isinstance(d["divergences"], int)
    for c in res["channels"]:
        assert c["gap_lower"] <= c["gap_upper"] and c["fpr_lower"] <= c["fpr_upper"]
    assert "MCMC diagnostics" in out
    # The reliability bands are the posterior bands of each bin's clean frequency.
    rel = [r for r in res["reliability"] if r["count"] > 0]
    assert all(r["band_lower"] <= r["band_upper"] for r in rel)


# ------------------------------------------------------------------------------------------ bad input
GOOD_ANN = "item,annotator,label\n1,a,1\n1,b,1\n2,a,0\n2,b,1\n3,a,0\n3,b,0\n"
GOOD_SCORES = "item,score\n1,0.9\n2,0.4\n3,0.1\n"
BAD_CASES = {
    "missing column": ("item,annotator,lbl\n1,a,1\n", GOOD_SCORES, "'label'"),
    "label outside 0/1": (GOOD_ANN.replace("2,a,0", "2,a,2"), GOOD_SCORES, "line 4, column 'label'"),
    "label wrong type": (GOOD_ANN.replace("2,a,0", "2,a,no"), GOOD_SCORES, "'no'"),
    "score above 1": (GOOD_ANN, GOOD_SCORES.replace("0.4", "40"), "line 3, column 'score'"),
    "score negative": (GOOD_ANN, GOOD_SCORES.replace("0.4", "-0.4"), "'-0.4'"),
    "score NaN": (GOOD_ANN, GOOD_SCORES.replace("0.4", "NaN"), "'NaN'"),
    "score wrong type": (GOOD_ANN, GOOD_SCORES.replace("0.4", "high"), "'high'"),
    "duplicate pair": (GOOD_ANN + "1,a,0\n", GOOD_SCORES, "duplicate (item, annotator)"),
    "duplicate score": (GOOD_ANN, GOOD_SCORES + "1,0.3\n", "duplicate item"),
    "empty annotations": ("", GOOD_SCORES, "empty"),
    "empty scores": (GOOD_ANN, "", "empty"),
    "header only": ("item,annotator,label\n", GOOD_SCORES, "no data rows"),
    "item without score": (GOOD_ANN, "item,score\n1,0.9\n2,0.4\n", "no score"),
    "ragged row": (GOOD_ANN + "4,a\n", GOOD_SCORES, "expected 3 fields"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_files_give_one_line_errors_and_no_output(case, tmp_path, capsys):
    ann_text, sc_text, piece = BAD_CASES[case]
    (tmp_path / "ann.csv").write_text(ann_text)
    (tmp_path / "scores.csv").write_text(sc_text)
    before = {p.name for p in tmp_path.iterdir()}
    # Repeated labels are accepted by default; "duplicate pair" is refused on request (--repeated error).
    extra = ["--repeated", "error"] if case == "duplicate pair" else []
    code, out, err = run(capsys, "evaluate", tmp_path / "ann.csv", "--scores", tmp_path / "scores.csv",
                         "--method", "em", "--json", tmp_path / "out.json", "--out", tmp_path / "rep", *extra)
    assert code == 2
    assert_one_line_error(err)
    assert piece in err
    assert {p.name for p in tmp_path.iterdir()} == before  # no JSON, no report, no temporary files


@pytest.mark.parametrize("argv, piece", [
    (["evaluate", "missing.csv", "--scores", "s.csv"], "missing.csv: no such file"),
    (["evaluate", "a.csv", "--bins", "x"], "invalid int value"),
    (["evaluate", "a.csv", "--bins", "0"], "--bins must be at least 1"),
    (["evaluate", "a.csv", "--level", "1.5"], "--level"),
    (["evaluate", "a.csv", "--method", "mcmc"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
    (["recalibrate", "a.csv", "--save", "m.json"], "--map"),
    (["evaluate", "a.csv", "--json", "no/such/folder/x.json"], "does not exist"),
])
def test_bad_command_lines(argv, piece, capsys):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert_one_line_error(err)
    assert piece in err


def test_no_scores_is_an_error(tmp_path, capsys):
    (tmp_path / "ann.csv").write_text(GOOD_ANN)
    code, out, err = run(capsys, "evaluate", tmp_path / "ann.csv", "--method", "em")
    assert code == 2
    assert_one_line_error(err)
    assert "--scores" in err


def test_tiny_data_on_the_em_route_names_what_is_missing(tmp_path, capsys):
    # Three items, two annotators: no annotator's gap interval excludes 0, so no label is usable. One line that
    # says so and what to add (it was "error: need at least one array to stack").
    pd.DataFrame({"item": [0, 0, 1, 1, 2, 2], "annotator": ["a", "b"] * 3, "label": [1, 1, 0, 0, 1, 0]}).to_csv(
        tmp_path / "ann.csv", index=False)
    pd.DataFrame({"item": [0, 1, 2], "score": [0.9, 0.2, 0.6]}).to_csv(tmp_path / "scores.csv", index=False)
    code, out, err = run(capsys, "evaluate", tmp_path / "ann.csv", "--scores", tmp_path / "scores.csv", "--method",
                         "em", "--n-boot", 10, "--no-checks", "--json", tmp_path / "x.json")
    assert code == 2
    assert_one_line_error(err)
    assert "no annotator's labels are usable" in err and "(a, b)" in err and "3 items and 6 labels" in err
    assert "Add items or labels" in err and not (tmp_path / "x.json").exists()


def test_help_and_version(capsys):
    assert main(["--help"]) == 0
    assert "evaluate" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert main([]) == 2


def test_internal_errors_are_one_line_with_exit_code_1(files, tmp_path, capsys, monkeypatch):
    import noisycal_bayes.cli as cli

    def broken(data, opts):
        raise RuntimeError("boom")

    monkeypatch.setitem(cli.ENGINES, "em", broken)
    monkeypatch.delenv("NOISYCAL_DEBUG", raising=False)
    ann, scores = files
    code, out, err = run(capsys, "evaluate", ann, "--scores", scores, "--method", "em", "--json", tmp_path / "x.json")
    assert code == 1
    assert_one_line_error(err)
    assert "RuntimeError: boom" in err and not (tmp_path / "x.json").exists()


def test_failed_report_leaves_nothing_behind(files, tmp_path, capsys, monkeypatch):
    import noisycal_bayes.report as report

    def broken(*args, **kwargs):
        raise ValueError("cannot draw")

    monkeypatch.setattr(report, "_figures", broken)
    ann, scores = files
    code, out, err = run(capsys, "evaluate", ann, "--scores", scores, "--method", "em", "--n-boot", 0,
                         "--out", tmp_path / "rep", "--json", tmp_path / "x.json")
    assert code == 2
    assert_one_line_error(err)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------ recalibrate / apply
@pytest.mark.parametrize("kind", ["temperature", "platt", "histogram"])
def test_recalibrate_and_apply_round_trip(kind, files, tmp_path, capsys):
    from noisycal_bayes.recalibration.maps import map_from_dict

    ann, scores = files
    map_path = tmp_path / "map.json"
    code, out, err = run(capsys, "recalibrate", ann, "--scores", scores, "--map", kind, "--save", map_path)
    assert code == 0, err
    assert "NC-ECE on the same items" in out
    saved = json.loads(map_path.read_text())
    assert saved["map"] == kind and saved["fitted_on"]["n_items"] == 500

    new = tmp_path / "new.csv"
    z = np.array([0.01, 0.2, 0.5, 0.77, 0.999])
    pd.DataFrame({"item": ["p", "q", "r", "s", "t"], "score": z}).to_csv(new, index=False)
    out_csv = tmp_path / "recal.csv"
    code, out, err = run(capsys, "apply", map_path, new, "--out", out_csv)
    assert code == 0, err
    got = pd.read_csv(out_csv)
    assert got["item"].tolist() == ["p", "q", "r", "s", "t"]
    np.testing.assert_allclose(got["score"], z)
    expected = map_from_dict(saved["model"]).predict(z)
    np.testing.assert_allclose(got["recalibrated"], expected, rtol=1e-12)
    if kind == "temperature":
        # Independent formula: sigmoid(logit(z) / T).
        t = saved["model"]["fitted"]["temperature_"]
        logit = np.log(z) - np.log1p(-z)
        np.testing.assert_allclose(got["recalibrated"], 1 / (1 + np.exp(-logit / t)), rtol=1e-9)
    assert np.all(np.diff(got["recalibrated"]) >= 0)  # every map is monotone non-decreasing

    # To standard output when --out is omitted.
    code, out, err = run(capsys, "apply", map_path, new)
    assert code == 0 and out.splitlines()[0] == "item,score,recalibrated" and len(out.splitlines()) == 6


def test_apply_rejects_bad_map_files(tmp_path, capsys):
    sc = tmp_path / "s.csv"
    sc.write_text(GOOD_SCORES)
    bad = tmp_path / "bad.json"
    for text, piece in [("{not json", "not a JSON file"), ('{"a": 1}', "not a recalibration map")]:
        bad.write_text(text)
        code, out, err = run(capsys, "apply", bad, sc, "--out", tmp_path / "o.csv")
        assert code == 2
        assert_one_line_error(err)
        assert piece in err
    assert not (tmp_path / "o.csv").exists()


# ------------------------------------------------------------------------------------------ README
def _readme():
    from pathlib import Path

    return (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_first_screen_shows_exactly_the_two_commands():
    text = _readme()
    first_block = text.split("```")[1]
    assert [ln.strip() for ln in first_block.strip().splitlines()] == ["make demo", "make test"]
    assert text.index("make demo") < 2500  # on the first screen, after one paragraph


def _python_blocks():
    return [part.split("```", 1)[0] for part in _readme().split("```python")[1:]]


def test_readme_python_quickstart_runs(capsys):
    namespace: dict = {}
    exec(compile(_python_blocks()[0], "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "NC-ECE" in out and "oracle ECE" in out
    # The quickstart's comment "the simulated model needs T = 2" (true curve sigmoid(0.5 logit z)): the corrected
    # fit must land nearer 2 than the same map fitted naively to vote fractions (the bias the package removes).
    from noisycal_bayes.recalibration.maps import TemperatureScaling

    data = namespace["data"]
    naive = TemperatureScaling().fit(data.scores, data.vote_fraction()).temperature_
    assert abs(namespace["ts"].temperature_ - 2) < abs(naive - 2)


@pytest.mark.slow
def test_readme_bayesian_block_runs(capsys):
    if not bayes_available():
        pytest.skip("the Bayesian layer is not installed")
    blocks = _python_blocks()
    assert len(blocks) == 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    post = namespace["ece_post"]
    assert "gap[careful]" in out and f"target: {post.target.split(':')[0]}" in out
    # A single 90% interval may miss the demo's oracle ECE by design, so only its ordering is checked here;
    # coverage is a property of repeated simulations, not of one run.
    lo, hi = post.reported_interval
    assert 0 <= lo <= hi
