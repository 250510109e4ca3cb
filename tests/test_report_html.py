"""Tests of ``report.html`` (noisycal_bayes/report/page.py, issue 19 item 4): one self-contained page.

The page is parsed with the standard library's :class:`html.parser.HTMLParser`: the embedded images must be
the PNG files of the folder byte for byte, nothing may be fetched from elsewhere, the numbers in the tables
must equal the Evaluation's fields, and user-provided text (annotator and file names) must arrive as text,
never as markup.
"""
from __future__ import annotations

import base64
import json
import re
from dataclasses import replace
from html.parser import HTMLParser

import pandas as pd
import pytest

import noisycal_bayes.report.page as page_module
from noisycal_bayes import evaluate, simulate_annotations
from noisycal_bayes.cli import main
from noisycal_bayes.data import Binning
from noisycal_bayes.report import write_report
from noisycal_bayes.report.page import report_page

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FETCHING_TAGS = {"script", "link", "iframe", "object", "embed", "base", "audio", "video", "source"}


class Page(HTMLParser):
    """Tags, attributes and the tables of each ``<section id=...>`` (cell text unescaped by the parser)."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.images, self.tables, self.text = [], [], [], {}, []
        self._section, self._row, self._cell = None, None, None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, k, v) for k, v in attrs]
        attrs = dict(attrs)
        if tag == "section":
            self._section = attrs.get("id")
        elif tag == "table":
            self.tables.setdefault(self._section, []).append([])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(attrs)

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr":
            self.tables[self._section][-1].append(self._row)
        elif tag == "section":
            self._section = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def table(self, section, k=0):
        """``(header, rows)`` of the k-th table of a section."""
        rows = self.tables[section][k]
        return rows[0], rows[1:]


def floats(cell):
    return [float(x) for x in re.findall(r"-?\d+\.\d+", cell)]


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(300, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.85], curve="overconfident", seed=5)


@pytest.fixture(scope="module")
def ev(sim):
    # EM with a small bootstrap: intervals, draws (nc_ece.png) and the recalibration rows, cheaply.
    return evaluate(sim.data, method="em", n_boot=10, bins=5, groups=Binning.equal_mass(3), recalibration=True,
                    clean_labels=sim.clean_labels)


@pytest.fixture(scope="module")
def report(ev, tmp_path_factory):
    folder = tmp_path_factory.mktemp("rep") / "out"
    written = ev.write_report(folder, source="labels <v2> & scores.csv")
    text = (folder / "report.html").read_text(encoding="utf-8")
    return folder, written, text, Page(text)


@pytest.fixture(scope="module")
def cli_run(sim, tmp_path_factory):
    """``evaluate --out`` on CSV files whose annotator names and folder name contain markup."""
    folder = tmp_path_factory.mktemp("data") / "d<i>&x"
    folder.mkdir()
    names = {0: "<script>", 1: "a&b", 2: 'q"t'}
    long = sim.data.to_long()
    long["annotator"] = long["annotator"].map(names)
    long[["item", "annotator", "label"]].to_csv(folder / "ann.csv", index=False)
    pd.DataFrame({"item": sim.data.item_ids, "score": sim.data.scores}).to_csv(folder / "scores.csv", index=False)
    out = folder / "rep"
    code = main([str(a) for a in ("evaluate", folder / "ann.csv", "--scores", folder / "scores.csv", "--method", "em",
                                  "--n-boot", 0, "--bins", 5, "--groups", 3, "--out", out)])
    return code, folder, out


# ------------------------------------------------------------------------------------------ self-contained
def test_report_html_is_written_with_the_other_files(report):
    folder, written, text, _ = report
    names = sorted(p.name for p in written)
    assert names == ["annotators.csv", "channels.png", "checks.png", "gap_sensitivity.png", "nc_ece.png", "reliability.png", "report.html",
                     "results.json", "summary.md"]
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_every_image_is_an_embedded_png_of_the_folder(report):
    folder, _, _, page = report
    pngs = sorted(p.name for p in folder.glob("*.png"))
    assert sorted(img["alt"] for img in page.images) == pngs
    for img in page.images:
        prefix = "data:image/png;base64,"
        assert img["src"].startswith(prefix)
        data = base64.b64decode(img["src"][len(prefix):], validate=True)
        assert data[:8] == PNG_MAGIC
        assert data == (folder / img["alt"]).read_bytes()  # the same figure as the file beside it


def test_nothing_is_fetched_and_nothing_runs(report):
    _, _, text, page = report
    assert not FETCHING_TAGS & set(page.tags)
    links = [(tag, k, v) for tag, k, v in page.attrs if k in ("src", "href", "srcset", "action", "data")]
    assert links and all(v.startswith("data:") or v.startswith("#") for _, _, v in links)
    assert not [a for a in page.attrs if a[1].startswith("on")]  # no event handlers
    for needle in ("http://", "https://", "url(", "@import", "//cdn"):
        assert needle not in text


# ------------------------------------------------------------------------------------------ the numbers
def test_calibration_table_equals_the_evaluation(report, ev):
    page = report[3]
    header, rows = page.table("calibration")
    assert header == ["metric", "value", "note"]
    got = {r[0]: r for r in rows}
    nc = ev.nc_ece
    assert float(got["NC-ECE (noise-corrected)"][1]) == pytest.approx(nc.value, abs=5e-4)
    assert "paper's plug-in estimate" in got["NC-ECE (noise-corrected)"][2]
    # The debiased estimate is a row of its own, and it carries the interval (built around it).
    assert float(got["NC-ECE, debiased estimate"][1]) == pytest.approx(nc.debiased, abs=5e-4)
    assert floats(got["NC-ECE, debiased estimate"][2].split("interval")[1])[:2] == pytest.approx(
        [nc.lower, nc.upper], abs=5e-4)
    nv = ev.naive
    assert float(got["ECE vs majority vote"][1]) == pytest.approx(nv.majority_vote_ece, abs=5e-4)
    assert float(got["SMECE vs vote fraction"][1]) == pytest.approx(nv.vote_fraction_smece, abs=5e-4)
    for r in nv.annotator_ece.itertuples(index=False):
        assert float(got[f"ECE vs annotator {r.annotator}"][1]) == pytest.approx(r.ece, abs=5e-4)
    assert float(got["oracle ECE (clean labels)"][1]) == pytest.approx(nv.clean_ece, abs=5e-4)
    words = " ".join(page.text)
    assert f"target: {nc.target}" in words  # the interval's named target, under the table


def test_channel_table_equals_the_evaluation(report, ev):
    header, rows = report[3].table("channels")
    assert header == ["annotator", "fpr", "interval", "tpr", "interval", "gap", "interval"]
    assert [r[0] for r in rows] == [str(a) for a in ev.channel.annotator_ids]
    for j, row in enumerate(rows):
        for k, q in ((1, "fpr"), (3, "tpr"), (5, "gap")):
            assert float(row[k]) == pytest.approx(getattr(ev.channel, q)[j], abs=5e-4)
            lo, hi = ev.channel_intervals[q]
            assert floats(row[k + 1]) == pytest.approx([lo[j], hi[j]], abs=5e-3)  # two decimals


def test_recalibration_and_settings_tables(report, ev):
    page = report[3]
    header, rows = page.table("recalibration")
    assert len(rows) == len(ev.recalibration) == 10
    for row, r in zip(rows, ev.recalibration):
        assert row[:3] == [r.map_name, r.fitted_to, r.params]
        assert float(row[3]) == pytest.approx(r.nc_ece, abs=5e-4)
    settings = dict(page.table("settings")[1])
    assert settings["data"] == "labels <v2> & scores.csv"
    assert (int(settings["items"]), int(settings["annotators"]), int(settings["seed"])) == (
        ev.n_items, ev.n_annotators, ev.seed)
    assert settings["evaluation bins"] == f"{ev.bins} equal-width"
    assert int(settings["score groups (channel model)"]) == ev.groups == 3
    assert settings["interval target"] == ev.nc_ece.target and settings["method"] == "em"
    assert float(settings["level"]) == ev.level and settings["draws"].startswith(f"{len(ev.draws)} ")
    assert "diagnostics" not in page.tables and "not sampled by MCMC" in " ".join(page.text)  # EM: no MCMC table


def test_diagnostics_and_engines_side_by_side(ev):
    # No figures needed: the page builder alone, on an evaluation relabelled as a NUTS run with diagnostics.
    other = replace(ev, method="nuts", diagnostics={"rhat_max": 1.012, "ess_min": 412.4, "divergences": 3})
    page = Page(report_page(other, comparison=[ev, other], figures={"x.pdf": b"%PDF-1.4"}))
    assert dict(page.table("diagnostics")[1]) == {"R-hat max": "1.012", "ESS min": "412", "divergences": "3"}
    header, rows = page.table("comparison")
    assert header == ["quantity", "EM", "NUTS"] and rows[0][0] == "NC-ECE"
    assert floats(rows[0][1])[0] == pytest.approx(ev.nc_ece.value, abs=5e-4)
    assert not page.images and "x.pdf: in the report folder" in " ".join(page.text)  # not embeddable: named only


# ------------------------------------------------------------------------------------------ escaping
def test_user_text_is_escaped(cli_run):
    code, folder, out = cli_run
    assert code == 0
    text = (out / "report.html").read_text(encoding="utf-8")
    page = Page(text)
    assert "script" not in page.tags and "i" not in page.tags
    assert "&lt;script&gt;" in text and "<script>" not in text
    annotators = [r[0] for r in page.table("channels")[1]]
    assert sorted(annotators) == sorted(["<script>", "a&b", 'q"t'])
    assert dict(page.table("settings")[1])["data"] == str(folder / "ann.csv")  # the folder name d<i>&x, as text
    # The numbers are those of results.json, written by the same run.
    res = {c["annotator"]: c for c in json.loads((out / "results.json").read_text())["channels"]}
    for row in page.table("channels")[1]:
        assert float(row[1]) == pytest.approx(res[row[0]]["fpr"], abs=5e-4)
        assert float(row[3]) == pytest.approx(res[row[0]]["gap"], abs=5e-4)  # no intervals: --n-boot 0


def test_escaped_figure_names(ev):
    png = PNG_MAGIC + b"rest"
    page = Page(report_page(ev, figures={"<script>.png": png}))
    assert "script" not in page.tags and [img["alt"] for img in page.images] == ["<script>.png"]
    assert base64.b64decode(page.images[0]["src"].split(",", 1)[1]) == png


# ------------------------------------------------------------------------------------------ failures
def test_failed_page_leaves_the_folder_as_it_was(ev, tmp_path, monkeypatch):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "report.html").write_text("old")
    (out / "notes.txt").write_text("mine")

    def broken(*args, **kwargs):
        raise ValueError("cannot render")

    monkeypatch.setattr(page_module, "report_page", broken)
    with pytest.raises(ValueError, match="cannot render"):
        write_report(out, ev)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "report.html"]
    assert (out / "report.html").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]  # no temporary folder left


def test_cli_failure_leaves_nothing_behind(cli_run, tmp_path, monkeypatch, capsys):
    _, folder, _ = cli_run

    def broken(*args, **kwargs):
        raise ValueError("cannot render")

    monkeypatch.setattr(page_module, "report_page", broken)
    code = main([str(a) for a in ("evaluate", folder / "ann.csv", "--scores", folder / "scores.csv", "--method",
                                  "em", "--n-boot", 0, "--out", tmp_path / "rep", "--json", tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert code == 2 and "cannot render" in err
    assert list(tmp_path.iterdir()) == []
