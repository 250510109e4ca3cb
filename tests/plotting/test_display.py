"""Tests of noisycal_bayes/plotting/display.py: ``NoisyCalibrationDisplay`` draws exactly the numbers of its table.

Independent routes: the drawn artists are read back from matplotlib and compared with the ``Evaluation``'s
table and with ``posterior_nc_ece``'s; the naive curve is recomputed here with ``np.digitize``; with the
identity channel and equal weights the corrected frequency of a bin is its mean vote fraction.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from noisycal_bayes import Channel, evaluate, simulate_annotations
from noisycal_bayes.data import Binning
from noisycal_bayes.inference import fit_em
from noisycal_bayes.plotting import NoisyCalibrationDisplay
from noisycal_bayes.propagate import posterior_nc_ece

FPR, TPR = [0.1, 0.2, 0.15], [0.9, 0.8, 0.85]


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(400, fpr=FPR, tpr=TPR, curve="overconfident", seed=1)


@pytest.fixture(scope="module")
def evaluation(sim):
    # checks=False: the display draws none of the model checks, and computing them doubles the fixture's CPU
    # time (13 s -> 7.5 s cold).
    return evaluate(sim.data, method="em", n_boot=20, bins=5, seed=0, checks=False)


def _bin_means(z, values, edges):
    """Per-bin means of ``values`` over the non-empty bins (bins closed on the left, the last also on the right)."""
    k = np.clip(np.digitize(z, edges[1:-1], right=False), 0, edges.size - 2)
    return np.array([values[k == j].mean() for j in range(edges.size - 1) if (k == j).any()])


def _band_vertices(band):
    return band.get_paths()[0].vertices


def test_from_evaluation_draws_the_table_columns(evaluation, sim):
    disp = NoisyCalibrationDisplay.from_evaluation(evaluation)
    table = evaluation.table
    ok = table["count"].to_numpy() > 0
    np.testing.assert_array_equal(disp.line_.get_xdata(), table["mean_score"].to_numpy()[ok])
    np.testing.assert_array_equal(disp.line_.get_ydata(), table["corrected_frequency"].to_numpy()[ok])
    np.testing.assert_array_equal(disp.prob_true, table["corrected_frequency"].to_numpy()[ok])
    # The band polygon passes through every band end (fill_between: lower edge, then upper edge reversed).
    ys = _band_vertices(disp.band_)[:, 1]
    for col in ("band_lower", "band_upper"):
        want = table[col].to_numpy()[ok]
        assert np.isfinite(want).all()
        assert all(np.isclose(ys, v, rtol=0, atol=1e-12).any() for v in want), col
    assert np.all(disp.band_lower <= disp.prob_true) and np.all(disp.prob_true <= disp.band_upper)
    # Naive curve: the majority vote (ties -> 1) per bin, recomputed independently.
    z, edges = sim.data.scores, evaluation.edges
    np.testing.assert_allclose(disp.naive_line_.get_xdata(), _bin_means(z, z, edges), rtol=1e-12)
    np.testing.assert_allclose(disp.naive_line_.get_ydata(),
                               _bin_means(z, sim.data.majority_vote().astype(float), edges), rtol=1e-12)
    assert disp.level == evaluation.level == 0.9
    assert "90% interval" in disp.band_.get_label()
    assert isinstance(disp.figure_, Figure) and disp.ax_.figure is disp.figure_
    assert disp.figure_.canvas.manager is None, "the figure must not be registered with pyplot"


def test_from_evaluation_reads_the_object_it_is_handed(evaluation):
    """Duck typing: anything with ``table``, ``edges``, ``level`` (and optionally ``data``) works."""

    class Stub:
        table, edges, level, data = evaluation.table, evaluation.edges, 0.8, None

    disp = NoisyCalibrationDisplay.from_evaluation(Stub())
    assert disp.naive_line_ is None and "80% interval" in disp.band_.get_label()

    class NoTable:
        edges, level = evaluation.edges, 0.9

    with pytest.raises(ValueError, match=r"NoTable has no attribute\(s\) \['table'\]"):
        NoisyCalibrationDisplay.from_evaluation(NoTable())


def test_from_predictions_draws_the_propagated_table_and_plots_into_given_axes(sim):
    fit = fit_em(sim.data, groups=Binning.equal_mass(3), seed=0, n_starts=2)
    bins = Binning.equal_width(5)
    fig = Figure()
    ax = fig.add_subplot()
    disp = NoisyCalibrationDisplay.from_predictions(sim.data.scores, sim.data, fit, bins=bins, level=0.8,
                                                    n_draws=200, ax=ax, name="model A")
    post = posterior_nc_ece(sim.data, fit, bins=bins, level=0.8, n_draws=200)
    ok = post.table["count"].to_numpy() > 0
    np.testing.assert_array_equal(disp.line_.get_ydata(), post.table["corrected_frequency"].to_numpy()[ok])
    np.testing.assert_array_equal(disp.band_lower, post.table["frequency_lower"].to_numpy()[ok])
    np.testing.assert_array_equal(disp.band_upper, post.table["frequency_upper"].to_numpy()[ok])
    z = sim.data.scores
    np.testing.assert_allclose(disp.naive_line_.get_ydata(),
                               _bin_means(z, sim.data.majority_vote().astype(float), np.linspace(0, 1, 6)), rtol=1e-12)
    assert disp.ax_ is ax and disp.figure_ is fig
    assert disp.line_.get_label() == "model A: noise-corrected" and "model A" in ax.get_title()


def test_identity_channel_corrected_curve_is_the_vote_fraction_and_new_scores_move_x(sim):
    z = sim.data.scores
    edges = np.linspace(0, 1, 6)
    disp = NoisyCalibrationDisplay.from_predictions(z, sim.data, Channel.identity(3), bins=Binning.equal_width(5),
                                                    weights="equal", n_draws=200)
    vf = _bin_means(z, sim.data.vote_fraction(), edges)
    # With known identity channels the corrected label is the vote fraction; the drawn value is the mean over
    # Bayesian-bootstrap replicates, so equal up to bootstrap noise, and the band contains the sample value.
    np.testing.assert_allclose(disp.prob_true, vf, atol=0.02)
    assert np.all(disp.band_lower <= vf) and np.all(vf <= disp.band_upper)
    # Recalibrated scores (squeezed towards 1/2): x = their per-bin means, the labels are the same.
    z2 = 0.5 + 0.5 * (z - 0.5)
    disp2 = NoisyCalibrationDisplay.from_predictions(z2, sim.data, Channel.identity(3), bins=Binning.equal_width(5),
                                                     weights="equal", n_draws=200)
    np.testing.assert_allclose(disp2.prob_pred, _bin_means(z2, z2, edges), rtol=1e-12)


def test_plot_again_and_png(evaluation, tmp_path):
    disp = NoisyCalibrationDisplay.from_evaluation(evaluation)
    first_ax = disp.ax_
    disp.plot(ref_line=False)
    assert disp.ax_ is not first_ax and disp.ref_line_ is None
    path = tmp_path / "d.png"
    disp.figure_.savefig(path, dpi=40)
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_no_band_without_draws_and_clear_errors(evaluation, sim):
    table = evaluation.table.assign(band_lower=np.nan, band_upper=np.nan)
    disp = NoisyCalibrationDisplay(table, evaluation.edges).plot()
    assert disp.band_ is None and disp.band_lower is None
    with pytest.raises(ValueError, match="has 5 rows but `edges` define 4 bins"):
        NoisyCalibrationDisplay(table, evaluation.edges[:-1])
    with pytest.raises(ValueError, match=r"missing column\(s\) \['corrected_frequency'\]"):
        NoisyCalibrationDisplay(table.drop(columns="corrected_frequency"), evaluation.edges)
    with pytest.raises(ValueError, match="`table` must be a DataFrame"):
        NoisyCalibrationDisplay(table.to_numpy(), evaluation.edges)
    with pytest.raises(ValueError, match="`naive_table` needs 5 rows"):
        NoisyCalibrationDisplay(table, evaluation.edges, naive_table=pd.DataFrame({"count": [1]}))
    with pytest.raises(ValueError, match="`data` must be an AnnotationSet"):
        NoisyCalibrationDisplay.from_predictions(sim.data.scores, sim.data.labels, Channel.identity(3))
