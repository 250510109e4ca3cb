"""Tests for noisycal_bayes/propagate/reliability.py: the corrected reliability table."""
import numpy as np
import pytest

from noisycal_bayes import simulate_annotations
from noisycal_bayes.propagate import posterior_nc_ece
from noisycal_bayes.propagate.reliability import posterior_reliability


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(600, fpr=[0.1, 0.3, 0.2], tpr=[0.9, 0.7, 0.8], curve="overconfident", seed=2)


def test_table_extends_the_nc_ece_table_with_naive_frequencies(sim):
    table = posterior_reliability(sim.data, sim.channel, method="plugin", n_draws=100, bins=5, seed=3)
    res = posterior_nc_ece(sim.data, sim.channel, method="plugin", n_draws=100, bins=5, seed=3)
    np.testing.assert_allclose(table[res.table.columns].to_numpy(float), res.table.to_numpy(float))
    # Naive curves by hand: mean majority label and mean vote fraction per bin.
    idx = np.minimum((sim.data.scores * 5).astype(int), 4)
    maj = sim.data.majority_vote()
    vf = sim.data.vote_fraction()
    for k in range(5):
        assert table.loc[k, "majority_vote_frequency"] == pytest.approx(maj[idx == k].mean())
        assert table.loc[k, "vote_fraction_frequency"] == pytest.approx(vf[idx == k].mean())
    assert table.attrs["level"] == 0.9 and table.attrs["method"] == "plugin"


def test_table_feeds_the_reliability_diagram(sim):
    pytest.importorskip("matplotlib")
    from noisycal_bayes.plotting import reliability_diagram

    table = posterior_reliability(sim.data, sim.channel, method="plugin", n_draws=50, bins=5)
    fig = reliability_diagram(table, lower=table["frequency_lower"], upper=table["frequency_upper"],
                              level=table.attrs["level"], data=sim.data)
    assert fig.axes


@pytest.mark.parametrize("ties", ["positive", "negative"])
def test_table_from_sufficient_stats_equals_the_annotation_set_table(sim, ties):
    # The naive curves from the statistics' (bin, pattern) counts equal the per-item ones; the corrected
    # columns are posterior_nc_ece's, equal for both inputs without bootstrap.
    from noisycal_bayes import Binning
    from noisycal_bayes.data import SufficientStats

    bins = Binning.equal_width(5)
    stats = SufficientStats.from_annotations(sim.data, bins=bins)
    a = posterior_reliability(stats, sim.channel, bootstrap=False, n_draws=3, ties=ties)
    b = posterior_reliability(sim.data, sim.channel, bootstrap=False, n_draws=3, bins=bins, ties=ties)
    np.testing.assert_allclose(a.to_numpy(float), b.to_numpy(float), rtol=1e-12)
    assert list(a.columns) == list(b.columns)
