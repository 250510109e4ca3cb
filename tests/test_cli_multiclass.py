"""``noisycal-bayes evaluate`` on K-class files: detection, the JSON keys, the report folder, bad input (clear
error, exit code 2, nothing written)."""
import json

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes.cli import EXIT_ERROR, EXIT_OK, build_parser, main
from noisycal_bayes.simulate import simulate_multiclass

NAMES = ["bird", "cat", "dog"]


def _write(folder, sim, *, probs=None, columns=NAMES):
    labels = folder / "labels.csv"
    pd.DataFrame({"item": sim.item, "annotator": [f"w{a}" for a in sim.annotator],
                  "label": [NAMES[k] for k in sim.label]}).to_csv(labels, index=False)
    p = pd.DataFrame(sim.probs if probs is None else probs, columns=columns)
    p.insert(0, "item", np.arange(len(p)))
    path = folder / "probs.csv"
    p.to_csv(path, index=False)
    return labels, path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mc_cli")
    sim = simulate_multiclass(240, 3, 3, accuracy=0.8, seed=4)
    labels, probs = _write(folder, sim)
    out, js = folder / "report", folder / "out.json"
    rc = main(["evaluate", labels, "--scores", probs, "--method", "em", "--n-boot", "20", "--json", js, "--out", out,
               "--level", "0.8", "--seed", "3", "--no-checks"])
    return rc, folder, json.loads(js.read_text()), out


def test_k_class_files_give_the_documented_json(run, capsys):
    rc, _, payload, _ = run
    assert rc == EXIT_OK
    for key in ("schema_version", "n_items", "n_annotators", "n_classes", "classes", "nc_ece", "classwise_nc_ece",
                "confusion", "prevalence", "naive", "reliability", "checks", "settings"):
        assert key in payload, key
    assert payload["n_classes"] == 3 and payload["classes"] == NAMES and payload["n_items"] == 240
    nc = payload["nc_ece"]
    assert set(nc) >= {"value", "lower", "upper", "level", "target", "method"}
    assert nc["level"] == 0.8 and nc["method"] == "em" and nc["lower"] <= nc["upper"]
    cw = payload["classwise_nc_ece"]
    assert [r["class"] for r in cw["per_class"]] == NAMES
    assert cw["interval_to_read"] in ("two_sided", "upper_one_sided") and cw["lower"] <= cw["upper"]
    if cw["interval_to_read"] == "two_sided":  # the interval is centred on the debiased estimate it reports
        assert cw["lower"] <= cw["debiased"] <= cw["upper"]
    # The class-wise value is the mean over classes of its per-class entries.
    assert cw["value"] == pytest.approx(np.mean([r["value"] for r in cw["per_class"]]), abs=1e-12)
    conf = payload["confusion"]
    assert [c["annotator"] for c in conf] == ["w0", "w1", "w2"]
    assert np.allclose(np.asarray(conf[0]["matrix"]).sum(axis=1), 1)
    assert np.shape(conf[0]["lower"]) == (3, 3)
    assert set(payload["naive"]["top_label"]) == {"majority_vote", "annotator w0", "annotator w1", "annotator w2",
                                                  "vote_distribution"}
    assert len(payload["reliability"]) == 15 and payload["settings"]["bins"] == 15  # multiclass default bins
    assert payload["checks"] == []  # --no-checks


def test_report_folder(run):
    _, _, payload, out = run
    names = {p.name for p in out.iterdir()}
    assert names == {"report.html", "summary.md", "results.json", "annotators.csv", "top_label_reliability.png",
                     "confusion_matrices.png"}
    assert json.loads((out / "results.json").read_text())["nc_ece"] == payload["nc_ece"]
    page = (out / "report.html").read_text()
    assert "Top-label NC-ECE" in page and "data:image/png;base64," in page
    assert "Top-label NC-ECE" in (out / "summary.md").read_text()


@pytest.mark.parametrize("case, message", [
    ("missing_column", "no probability column for class"),
    ("rows_off", "sum to 1"),
])
def test_bad_probs_file_is_a_clear_error_and_nothing_is_written(tmp_path, capsys, case, message):
    sim = simulate_multiclass(30, 3, 3, seed=1)
    if case == "missing_column":
        labels, probs = _write(tmp_path, sim, probs=sim.probs[:, :2], columns=NAMES[:2])
    else:
        bad = sim.probs.copy()
        bad[4] *= 1.2
        labels, probs = _write(tmp_path, sim, probs=bad)
    before = set(tmp_path.iterdir())
    rc = main(["evaluate", labels, "--scores", probs, "--json", tmp_path / "r.json", "--out", tmp_path / "rep"])
    err = capsys.readouterr().err
    assert rc == EXIT_ERROR and err.startswith("error: ") and message in err and "Traceback" not in err
    assert set(tmp_path.iterdir()) == before


def test_other_bad_input(tmp_path, capsys):
    sim = simulate_multiclass(30, 3, 3, seed=1)
    labels, probs = _write(tmp_path, sim)
    before = set(tmp_path.iterdir())
    for argv, message in ((["--weights", "gap"], "`weights` must be one of"),
                          (["--layout", "wide"], "not available for K-class labels"),
                          ([], "need --scores")):
        args = ["evaluate", labels] + ([] if message == "need --scores" else ["--scores", probs]) + argv
        rc = main(args + ["--json", tmp_path / "r.json"])
        err = capsys.readouterr().err
        assert rc == EXIT_ERROR and message in err, (argv, err)
    one = tmp_path / "one.csv"
    pd.DataFrame({"item": [0, 1, 2], "annotator": ["a"] * 3, "label": ["bird", "cat", "dog"]}).to_csv(one, index=False)
    assert main(["evaluate", one, "--scores", probs, "--json", tmp_path / "r.json"]) == EXIT_ERROR
    assert "single annotator" in capsys.readouterr().err
    assert set(tmp_path.iterdir()) == before | {one}


def test_help_states_the_multiclass_defaults():
    text = build_parser()._subparsers._group_actions[0].choices["evaluate"].format_help()
    assert "K-class labels: 15" in " ".join(text.split())
