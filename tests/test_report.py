"""Tests of noisycal_bayes/report/__init__.py: summary text, JSON schema, atomic files (report.html:
tests/test_report_html.py)."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from noisycal_bayes import simulate_annotations
from noisycal_bayes import evaluate
from noisycal_bayes.report import (atomic_write_text, evaluation_to_dict, format_summary, summary_markdown,
                                   write_json, write_report)
from noisycal_bayes.data import Binning


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(400, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.85], curve="overconfident", seed=5)


@pytest.fixture(scope="module")
def ev(sim):
    # EM without bootstrap: quick, and exercises the "no interval" path.
    return evaluate(sim.data, method="em", n_boot=0, bins=5, groups=Binning.equal_mass(4), clean_labels=sim.clean_labels)


def test_summary_shows_estimates_truth_and_naive_metrics(ev, sim):
    text = format_summary(ev, truth={"channel": sim.channel, "clean_labels": sim.clean_labels}, title="T")
    assert text.startswith("T\n=")
    for piece in ("NC-ECE (noise-corrected)", "no interval", "ECE vs majority vote", "SMECE vs vote fraction",
                  "oracle ECE (clean labels)", "true gap", f"{ev.nc_ece.value:.3f}"):
        assert piece in text
    assert "Warnings:" in text and "no interval: --n-boot 0." in text


def test_comparison_of_two_engines(ev, sim):
    other = replace(ev, method="nuts", nc_ece=replace(ev.nc_ece, value=0.5, lower=0.4, upper=0.6,
                                                      target="sample oracle ECE: x"))
    truth = {"channel": sim.channel, "clean_labels": sim.clean_labels}
    text = format_summary(other, truth=truth, comparison=[ev, other])
    block = text.split("Engines side by side")[1]
    header = block.splitlines()[1].split()
    assert header[:3] == ["quantity", "EM", "NUTS"] and header[-1] == "truth"
    assert "0.500 [0.400, 0.600]" in block and f"{ev.nc_ece.value:.3f}" in block
    assert "gap 2" in block and "sample oracle ECE" in block
    md = summary_markdown(other, truth=truth, comparison=[ev, other])
    assert "## Engines side by side" in md and "| quantity | EM | NUTS | truth |" in md


def test_json_schema_and_nan_as_null(ev):
    d = evaluation_to_dict(ev)
    assert set(d) >= {"nc_ece", "channels", "naive", "diagnostics", "n_items", "n_annotators"}
    assert d["nc_ece"]["lower"] is None and d["nc_ece"]["upper"] is None
    assert d["channels"][0]["fpr_lower"] is None
    # The whole dict is strict JSON (no NaN tokens), and bins without items have null means.
    text = json.dumps(d, allow_nan=False)
    back = json.loads(text)
    assert back["n_items"] == 400 and len(back["reliability"]) == 5
    bad = replace(ev, nc_ece=replace(ev.nc_ece, value=float("nan")))
    assert evaluation_to_dict(bad)["nc_ece"]["value"] is None


def test_atomic_write_leaves_no_temporary_file_on_failure(tmp_path):
    path = tmp_path / "x.txt"
    with pytest.raises(TypeError):
        atomic_write_text(path, object())  # not a str: fails inside the write, after the temporary file exists
    assert list(tmp_path.iterdir()) == []
    atomic_write_text(path, "hello")
    assert path.read_text() == "hello" and len(list(tmp_path.iterdir())) == 1
    with pytest.raises(ValueError, match="does not exist"):
        atomic_write_text(tmp_path / "no" / "x.txt", "a")


def test_write_json_converts_numpy_and_nan(tmp_path):
    write_json(tmp_path / "a.json", {"x": np.float64("nan"), "y": np.arange(3), "z": np.int64(4)})
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": None, "y": [0, 1, 2], "z": 4}


def test_write_report_replaces_its_files_and_keeps_others(ev, sim, tmp_path):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "summary.md").write_text("old")
    written = write_report(out, ev, data=sim.data, truth={"channel": sim.channel, "clean_labels": sim.clean_labels})
    names = sorted(p.name for p in written)
    # No draws (no bootstrap): no NC-ECE histogram.
    assert names == ["annotators.csv", "channels.png", "checks.png", "gap_sensitivity.png", "reliability.png", "report.html", "results.json",
                     "summary.md"]
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "summary.md").read_text().startswith("# Calibration report")
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]  # the temporary folder is gone
    with pytest.raises(ValueError, match="not a folder"):
        write_report(out / "notes.txt", ev)
