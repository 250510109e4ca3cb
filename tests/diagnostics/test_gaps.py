"""Tests for noisycal_bayes/diagnostics/gaps.py (and its plot, noisycal_bayes/plotting/sensitivity.py).

Independent routes: clean labels through the identity channel (``n_eff = n``), a hand-computed variance
for a single bin, frequencies of draws for ``P(gap < min_gap)``, the reference ``nc_ece`` at factor 1.
"""
import warnings

import numpy as np
import pytest

from noisycal_bayes import AnnotationSet, Channel, ece, nc_ece, simulate_annotations
from noisycal_bayes.diagnostics.gaps import gap_diagnostics, gap_sensitivity
from noisycal_bayes.warnings import SmallGapWarning

from ..propagate._fakes import fake_nuts, histogram_fit

FPR, TPR = [0.1, 0.2, 0.15], [0.85, 0.8, 0.9]


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(800, fpr=FPR, tpr=TPR, curve="overconfident", seed=31)


def test_identity_channel_has_one_clean_label_per_item():
    sim = simulate_annotations(500, fpr=[0.0, 0.0], tpr=[1.0, 1.0], seed=1)
    eps = 1e-12
    diag = gap_diagnostics(sim.data, Channel([eps, eps], [1 - eps, 1 - eps]), warn=False)
    ok = diag.bins["count"] > 0
    np.testing.assert_allclose(diag.bins.loc[ok, "effective_clean_labels"], diag.bins.loc[ok, "count"], rtol=1e-6)
    np.testing.assert_allclose(diag.annotators["variance_inflation"], 1.0, rtol=1e-9)


def test_effective_number_matches_hand_computation():
    # One bin (all scores 0.5), two annotators labelling every item, equal weights: per item
    # V = mu (1 - mu) + (1/4) sum_j [mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)] / d_j^2 and
    # n_eff = n mu (1 - mu) / V, with mu = (sum of equally weighted corrected labels + 1) / (n + 2).
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, size=(200, 2))
    data = AnnotationSet.from_wide(labels, np.full(200, 0.5))
    a, b = np.array([0.1, 0.3]), np.array([0.8, 0.9])
    d = b - a
    diag = gap_diagnostics(data, Channel(a, b), bins=1, weights="equal", warn=False)
    ytilde = ((labels - a) / d).mean(axis=1)
    mu = (ytilde.sum() + 1) / 202
    v = mu * (1 - mu) + 0.25 * np.sum((mu * b * (1 - b) + (1 - mu) * a * (1 - a)) / d**2)
    assert diag.bins.loc[0, "effective_clean_labels"] == pytest.approx(200 * mu * (1 - mu) / v, rel=1e-10)
    assert diag.bins.loc[0, "clean_frequency"] == pytest.approx(mu, rel=1e-12)


def test_posterior_probabilities_and_inflation_from_draws(sim):
    em = histogram_fit(sim.data)
    rng = np.random.default_rng(2)
    gap = np.stack([rng.uniform(0.05, 0.3, (1, 100)), np.full((1, 100), 0.7), np.full((1, 100), 0.75)], axis=2)
    fpr = np.full((1, 100, 3), 0.1)
    post = fake_nuts(em, {"fpr": fpr, "tpr": fpr + gap, "prevalence": np.tile(em.point["prevalence"], (1, 100, 1))})
    with pytest.warns(SmallGapWarning, match=r"annotators \[0\]"):
        diag = gap_diagnostics(sim.data, post, min_gap=0.1, n_draws=100, min_effective=0.0)
    g0 = gap[0, :, 0]
    assert diag.annotators.loc[0, "p_gap_below"] == pytest.approx(np.mean(g0 < 0.1))
    assert diag.annotators.loc[0, "variance_inflation"] == pytest.approx(np.mean(1 / g0**2))
    assert diag.annotators["alarming"].tolist() == [True, False, False]
    assert diag.source == "nuts" and diag.alarming


def test_healthy_channels_raise_no_warning(sim):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallGapWarning)
        diag = gap_diagnostics(sim.data, sim.channel, bins=5)
    assert not diag.alarming and diag.messages == ()


def test_errors(sim):
    with pytest.raises(ValueError, match="`min_gap` must lie in"):
        gap_diagnostics(sim.data, sim.channel, min_gap=1.5)
    with pytest.raises(ValueError, match="must be an AnnotationSet"):
        gap_diagnostics(sim.data.labels, sim.channel)
    with pytest.raises(ValueError, match="the fit has 2 annotators"):
        gap_diagnostics(sim.data, Channel([0.1, 0.1], [0.9, 0.9]))
    with pytest.raises(ValueError, match="mode='perturb' needs"):
        gap_sensitivity(sim.data)
    with pytest.raises(ValueError, match="`mode` must be"):
        gap_sensitivity(sim.data, sim.channel, mode="sweep")
    with pytest.raises(ValueError, match="`factors` must be positive"):
        gap_sensitivity(sim.data, sim.channel, factors=(0.0, 1.0))
    with pytest.raises(ValueError, match="`gaps` must lie in"):
        gap_sensitivity(mode="simulate", gaps=(0.0, 0.5))


def test_perturbation_at_factor_one_is_the_nc_ece_and_smaller_gaps_widen_the_interval(sim):
    res = gap_sensitivity(sim.data, sim.channel, factors=(0.5, 1.0, 1.2), n_draws=200)
    t = res.table.set_index("factor")
    assert t.loc[1.0, "nc_ece"] == pytest.approx(nc_ece(sim.data, sim.channel).value, rel=1e-12)
    # Halving every gap doubles each corrected label's deviation from fpr: the bootstrap spread of the
    # corrected bin means roughly doubles, far beyond the Monte Carlo noise of 200 draws.
    assert t.loc[0.5, "width"] > 1.5 * t.loc[1.0, "width"]
    assert t.loc[0.5, "min_effective_clean_labels"] < t.loc[1.0, "min_effective_clean_labels"]
    assert res.mode == "perturb"


def test_simulated_sweep_table():
    res = gap_sensitivity(mode="simulate", gaps=(0.4, 0.8), n_reps=2, n_items=400, n_draws=50, bins=5)
    t = res.table
    assert t["gap"].tolist() == [0.4, 0.8] and t["n_reps"].tolist() == [2, 2]
    np.testing.assert_allclose(t["variance_inflation"], [1 / 0.4**2, 1 / 0.8**2])
    reps = res.replicates
    assert len(reps) == 4 and set(reps["gap"]) == {0.4, 0.8}
    # Values, by independent routes: each replicate is re-simulated from its recorded seed with the symmetric
    # channel fpr = (1 - gap) / 2, tpr = fpr + gap (3 annotators, the default), and its oracle ECE
    # recomputed with the plain `ece` on the clean labels, its conditional ECE from m(Z_i), and the
    # known-channel NC-ECE with the reference `nc_ece`.
    for row in reps.itertuples(index=False):
        fpr = np.full(3, (1 - row.gap) / 2)
        sim = simulate_annotations(400, fpr=fpr, tpr=fpr + row.gap, curve="overconfident", seed=row.seed)
        z = sim.data.scores
        assert row.oracle_ece == pytest.approx(ece(z, sim.clean_labels, bins=5), rel=1e-12)
        k = np.minimum((z * 5).astype(int), 4)
        cond = np.abs(np.bincount(k, weights=sim.true_probability - z, minlength=5)).sum() / z.size
        assert row.conditional_ece == pytest.approx(cond, rel=1e-12)
        assert row.nc_ece_known == pytest.approx(nc_ece(sim.data, sim.channel, bins=5).value, rel=1e-10)
        assert row.target == row.oracle_ece  # method="latent" targets the sample oracle ECE
        if not row.failed:
            assert row.lower <= row.upper
    # The table aggregates the replicates: means per gap, and root mean squared errors against the oracle.
    for gap, grp in reps.groupby("gap"):
        tr = t.set_index("gap").loc[gap]
        assert tr["oracle_ece"] == pytest.approx(grp["oracle_ece"].mean(), rel=1e-12)
        assert tr["nc_ece_known"] == pytest.approx(grp["nc_ece_known"].mean(), rel=1e-12)
        err = grp["nc_ece_known"] - grp["oracle_ece"]
        assert tr["rmse_known"] == pytest.approx(np.sqrt(np.mean(err**2)), rel=1e-12)
        ok = ~grp["failed"].astype(bool)
        cover = ((grp["lower"] <= grp["target"]) & (grp["target"] <= grp["upper"]))[ok]
        assert tr["coverage"] == pytest.approx(cover.mean())


def test_plot_both_modes(sim):
    pytest.importorskip("matplotlib")
    from noisycal_bayes.plotting.sensitivity import gap_sensitivity as plot

    perturb = gap_sensitivity(sim.data, sim.channel, factors=(0.75, 1.0), n_draws=50)
    simulated = gap_sensitivity(mode="simulate", gaps=(0.5, 0.8), n_reps=1, n_items=300, n_draws=30, bins=5)
    # The figure draws the table's values (not only some axes): each labelled line's points are its column.
    columns = {"perturb": {"debiased estimate": "debiased", "NC-ECE at the perturbed channels": "nc_ece"},
               "simulate": {"sample oracle ECE (truth)": "oracle_ece", "NC-ECE, true channels": "nc_ece_known",
                            "NC-ECE, EM channels": "nc_ece_em"}}
    for res, x_col in ((perturb, "factor"), (simulated, "gap")):
        fig = plot(res)
        lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
        for label, col in columns[res.mode].items():
            np.testing.assert_allclose(lines[label].get_xdata(), res.table[x_col], rtol=1e-12)
            np.testing.assert_allclose(lines[label].get_ydata(), res.table[col], rtol=1e-12)
    with pytest.raises(ValueError, match="output of noisycal_bayes.diagnostics.gap_sensitivity"):
        plot(perturb.table)
