"""The report's gap-sensitivity figure is the profile likelihood (diagnostics.gap_profile), not the fixed-fpr sweep."""
import numpy as np
import pytest

from noisycal_bayes import Binning, evaluate
from noisycal_bayes.diagnostics import gap_profile
from noisycal_bayes.simulate import simulate_annotations


def test_report_figure_draws_the_profile_of_the_evaluation_fit():
    pytest.importorskip("matplotlib")
    from noisycal_bayes.report import _figures

    sim = simulate_annotations(1200, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], seed=5)
    ev = evaluate(sim.data, method="em", n_boot=0, bins=5, groups=Binning.equal_mass(3), checks=False)
    fig = _figures(ev, sim.data, None)["gap_sensitivity.png"]
    assert "the data allow" in fig.axes[0].get_title()
    # Independent route: the profile of the same fit; the figure's profile line is its NC-ECE column.
    prof = gap_profile(sim.data, ev.fit, bins=Binning.from_edges(ev.edges), weights=ev.weights)
    line = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}["NC-ECE, other parameters re-fitted (profile)"]
    feasible = prof.table[np.isfinite(prof.table["lr"])]
    np.testing.assert_allclose(line.get_ydata(), feasible["nc_ece"], rtol=1e-8)
