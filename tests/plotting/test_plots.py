"""Tests of noisycal_bayes/plotting: each function returns a Figure, writes a PNG, never uses pyplot."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from matplotlib.figure import Figure

from noisycal_bayes import AnnotationSet, Channel, nc_ece, simulate_annotations
from noisycal_bayes.plotting import channel_forest, nc_ece_posterior, reliability_diagram, reliability_table

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(600, fpr=[0.1, 0.2, 0.3], tpr=[0.9, 0.8, 0.9], curve="overconfident", missing=0.1,
                                seed=3)


def assert_png(fig, path):
    fig.savefig(path, dpi=50)
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 1000


def test_plotting_is_lazy_and_needs_no_display(tmp_path):
    # In a fresh interpreter without a display: importing the package's plotting and report modules does not
    # import matplotlib; drawing and saving a figure works and never imports pyplot (no GUI backend).
    code = (
        "import sys, noisycal_bayes.plotting as P, noisycal_bayes.report\n"
        "print('matplotlib' in sys.modules)\n"
        "from noisycal_bayes import Channel\n"
        f"P.channel_forest(Channel([0.1], [0.9])).savefig({str(tmp_path / 'x.png')!r})\n"
        "print('matplotlib.pyplot' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "MPLBACKEND", "WAYLAND_DISPLAY")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["False", "False"]
    assert (tmp_path / "x.png").read_bytes()[:8] == PNG_MAGIC


def test_figures_are_not_registered_with_pyplot(sim, tmp_path):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    fig = reliability_diagram(nc_ece(sim.data, sim.channel))
    channel_forest(sim.channel)
    nc_ece_posterior(np.linspace(0, 0.1, 50))
    assert plt.get_fignums() == before
    assert isinstance(fig, Figure)


def test_reliability_diagram_full(sim, tmp_path):
    res = nc_ece(sim.data, sim.channel, bins=8)
    freq = res.table["corrected_frequency"].to_numpy()
    fig = reliability_diagram(res, lower=freq - 0.05, upper=freq + 0.05, level=0.9, data=sim.data,
                              clean_labels=sim.clean_labels, title="t")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("90% interval" in s for s in labels)
    assert any("majority vote" in s and "ties" in s for s in labels) or sim.data.n_ties() == 0
    assert any("vote fraction" in s for s in labels) and any("oracle" in s for s in labels)
    assert len(fig.axes) == 2  # reliability + count histogram
    assert_png(fig, tmp_path / "rel.png")


def test_reliability_diagram_accepts_table_and_axes(sim, tmp_path):
    res = nc_ece(sim.data, sim.channel)
    fig0 = Figure()
    ax = fig0.subplots()
    fig = reliability_diagram(res.table, ax=ax)
    assert fig is fig0 and len(fig.axes) == 1
    assert_png(fig, tmp_path / "rel2.png")


def test_reliability_diagram_plots_the_corrected_frequencies(sim):
    res = nc_ece(sim.data, sim.channel, bins=5)
    fig = reliability_diagram(res, histogram=False)
    line = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "noise-corrected"][0]
    ok = res.table["count"].to_numpy() > 0
    np.testing.assert_allclose(line.get_xdata(), res.table["mean_score"].to_numpy()[ok])
    np.testing.assert_allclose(line.get_ydata(), res.table["corrected_frequency"].to_numpy()[ok])


def test_reliability_diagram_errors(sim):
    res = nc_ece(sim.data, sim.channel, bins=5)
    with pytest.raises(ValueError, match=r"shape \(5,\)"):
        reliability_diagram(res, lower=np.zeros(4), upper=np.ones(4))
    with pytest.raises(ValueError, match="needs `data`"):
        reliability_diagram(res, clean_labels=sim.clean_labels)
    with pytest.raises(ValueError, match="missing column"):
        reliability_diagram(res.table.drop(columns="mean_score"))


def test_reliability_table_by_hand():
    # Bins [0, .5) and [.5, 1]: first holds 0.1, 0.2 (labels 0, 1); second 0.5, 0.9 (labels 1, 1).
    t = reliability_table([0.1, 0.2, 0.5, 0.9], [0, 1, 1, 1], [0.0, 0.5, 1.0])
    assert t["count"].tolist() == [2, 2]
    np.testing.assert_allclose(t["mean_score"], [0.15, 0.7])
    np.testing.assert_allclose(t["frequency"], [0.5, 1.0])


def test_majority_vote_curve_matches_reliability_table():
    labels = np.array([[1, 1], [0, 1], [0, 0], [1, -1]])
    data = AnnotationSet.from_wide(labels, [0.1, 0.3, 0.6, 0.8])
    res = nc_ece(data, Channel.identity(2), bins=2)
    fig = reliability_diagram(res, data=data, histogram=False)
    maj = [ln for ln in fig.axes[0].get_lines() if ln.get_label().startswith("naive: majority")][0]
    # Ties -> 1: majority votes [1, 1, 0, 1]; bin 0 holds items 0, 1 -> 1.0; bin 1 holds 2, 3 -> 0.5.
    np.testing.assert_allclose(maj.get_ydata(), [1.0, 0.5])
    assert "1 ties -> 1" in maj.get_label()


def test_oracle_curve_is_named_and_placed_by_the_reference_labels():
    labels = np.array([[1, 1], [0, 1], [0, 0], [1, -1]])
    data = AnnotationSet.from_wide(labels, [0.1, 0.3, 0.6, 0.8])
    res = nc_ece(data, Channel.identity(2), bins=2)
    fig = reliability_diagram(res, data=data, clean_labels=[0, 1, 1, 1], clean_labels_name="reference labels",
                              histogram=False)
    names = [ln.get_label() for ln in fig.axes[0].get_lines()]
    assert "oracle: reference labels" in names and "oracle: clean labels" not in names
    orc = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "oracle: reference labels"][0]
    # Bin 0 holds items 0, 1 (labels 0, 1) -> 0.5; bin 1 holds items 2, 3 (labels 1, 1) -> 1.0.
    np.testing.assert_allclose(orc.get_ydata(), [0.5, 1.0])


def test_channel_forest(sim, tmp_path):
    ch = sim.channel
    iv = {q: (getattr(ch, q) - 0.05, getattr(ch, q) + 0.05) for q in ("fpr", "tpr", "gap")}
    fig = channel_forest(ch, intervals=iv, level=0.9, truth=ch, title="channels")
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["0", "1", "2"]
    # The gap panel's estimates are the channel's gaps.
    est = [ln for ln in fig.axes[2].get_lines() if ln.get_label() == "estimate"][0]
    np.testing.assert_allclose(est.get_xdata(), ch.gap)
    assert_png(fig, tmp_path / "ch.png")
    with pytest.raises(ValueError, match="intervals for `gap`"):
        channel_forest(ch, intervals={"gap": (np.zeros(2), np.ones(2))})


def test_nc_ece_posterior(tmp_path):
    draws = np.random.default_rng(0).normal(0.1, 0.01, size=(2, 300))
    fig = nc_ece_posterior(draws, value=0.1, interval=(0.085, 0.115), level=0.9, truth=0.098, label="posterior")
    assert isinstance(fig, Figure)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "posterior (600 draws)" in labels and "90% interval" in labels
    assert_png(fig, tmp_path / "post.png")
    with pytest.raises(ValueError, match="no finite"):
        nc_ece_posterior([np.nan])
