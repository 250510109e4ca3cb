"""posterior_nc_ece from SufficientStats (noisycal_bayes/propagate/nc_ece.py with _sums.Cells, _draws.stats_fit_rows).

Reference: the same call on the AnnotationSet the statistics summarise (an independent input path: items,
per-item bins and the fit's per-item rows). Same seed, same draws: exact equality for the plug-in route
without bootstrap, the model route and the latent route; for the bootstrap, equality with the AnnotationSet
path forced onto the per-cell bootstrap (every cell on the normal draw), and agreement in distribution
with its default per-item bootstrap (tolerances from Monte Carlo standard errors).
"""
import dataclasses
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from noisycal_bayes import Binning
from noisycal_bayes.data import SufficientStats, stats_from_chunks
from noisycal_bayes.inference.em import fit_em
from noisycal_bayes.propagate import posterior_nc_ece
from noisycal_bayes.propagate._sums import item_cells, plugin_sums, stats_cells
from noisycal_bayes.warnings import DataWarning

from ._fakes import FPR, TPR, channel_draws, fake_nuts, fake_platt, histogram_fit

BINS = Binning.equal_width(10)


@pytest.fixture(scope="module")
def stats(sim):
    return SufficientStats.from_annotations(sim.data, bins=BINS)


def _same(a, b):
    """Identical draws, summaries and bin table (the same arithmetic on the same arrays)."""
    np.testing.assert_array_equal(a.draws, b.draws)
    np.testing.assert_array_equal(a.debiased_draws, b.debiased_draws)
    assert (a.debiased, a.lower, a.upper, a.interval_to_read) == (b.debiased, b.lower, b.upper, b.interval_to_read)
    np.testing.assert_array_equal(a.edges, b.edges)
    np.testing.assert_allclose(a.table.drop(columns="count").to_numpy(float),
                               b.table.drop(columns="count").to_numpy(float), rtol=0, atol=0)
    assert a.target == b.target and a.n_items == b.n_items


# ----------------------------------------------------------------------------- exact equality
@pytest.mark.parametrize("weights", ["iv", "equal", [1.0, 2.0, 3.0]])
def test_plugin_without_bootstrap_equals_annotation_set(sim, stats, post, weights):
    a = posterior_nc_ece(stats, post, weights=weights, bootstrap=False)
    b = posterior_nc_ece(sim.data, post, weights=weights, bootstrap=False, bins=BINS)
    _same(a, b)
    # bins=None is the statistics' own bins; restating them (as an int or the Binning) is accepted.
    _same(a, posterior_nc_ece(stats, post, weights=weights, bootstrap=False, bins=10))
    _same(a, posterior_nc_ece(stats, post, weights=weights, bootstrap=False, bins=BINS.edges_for(None)))


def test_plugin_with_a_known_channel_equals_annotation_set(sim, stats):
    _same(posterior_nc_ece(stats, sim.channel, bootstrap=False, n_draws=2),
          posterior_nc_ece(sim.data, sim.channel, bootstrap=False, n_draws=2, bins=BINS))


def test_model_route_equals_annotation_set_and_hand_formula(sim, stats, post):
    a = posterior_nc_ece(stats, post, method="model")
    _same(a, posterior_nc_ece(sim.data, post, method="model", bins=BINS))
    # Groups = bins: e_sk = (n_k prevalence_sk - S_k) / n (DESIGN §4, model route).
    prev = post.draws["prevalence"].reshape(-1, post.groups.n_groups)
    n_k, s_k = stats.bin_counts, stats.score_sum
    full = np.zeros((prev.shape[0], stats.n_bins))
    full[:, post.groups.used] = prev
    want = np.abs(n_k * full - s_k).sum(axis=1) / stats.n_items
    np.testing.assert_allclose(a.draws, want, rtol=1e-12)


@pytest.mark.parametrize("which", ["em", "post"])
def test_latent_route_equals_annotation_set(sim, stats, em, post, which):
    fit = em if which == "em" else post
    a = posterior_nc_ece(stats, fit, method="latent", n_draws=200, seed=4)
    _same(a, posterior_nc_ece(sim.data, fit, method="latent", n_draws=200, seed=4, bins=BINS))


def test_latent_with_the_marginal_model_equals_annotation_set(sim, stats):
    # One prevalence: every row of the statistics maps to the fit's row of its pattern (group 0).
    fit = fit_em(sim.data, model="dawid_skene", n_starts=2)
    with pytest.warns(DataWarning, match="not the evaluation bins"):
        a = posterior_nc_ece(stats, fit, method="latent", n_draws=100)
    with pytest.warns(DataWarning, match="not the evaluation bins"):
        b = posterior_nc_ece(sim.data, fit, method="latent", n_draws=100, bins=BINS)
    _same(a, b)


def test_fit_from_stats_propagates_like_fit_from_items(sim, stats, em):
    # fit_em on the statistics gives the same inputs and estimate; its latent route from the statistics
    # equals the in-memory fit's latent route on the items.
    fit = fit_em(stats, model="histogram", groups=None, n_starts=2, seed=0)
    a = posterior_nc_ece(stats, fit, method="latent", n_draws=100)
    b = posterior_nc_ece(sim.data, em, method="latent", n_draws=100, bins=BINS)
    np.testing.assert_allclose(a.draws, b.draws, rtol=1e-10)


def test_bootstrap_equals_annotation_set_forced_onto_the_cell_route(sim, stats, post, monkeypatch):
    import noisycal_bayes.propagate._sums as sums

    a = posterior_nc_ece(stats, post, n_draws=300, seed=9)
    # The AnnotationSet path takes the per-cell route above _ITEM_BOOTSTRAP_ENTRIES (item x draw) weights, with
    # per-item weights inside cells of at most _EXACT_CELL items; statistics have no items, so every cell takes
    # the normal draw. Forced onto that route, the in-memory path draws the same numbers in the same order.
    monkeypatch.setattr(sums, "_ITEM_BOOTSTRAP_ENTRIES", 0)
    monkeypatch.setattr(sums, "_EXACT_CELL", 0)
    b = posterior_nc_ece(sim.data, post, n_draws=300, seed=9, bins=BINS)
    _same(a, b)
    assert "moment-matched" in a.uncertainty and a.bootstrap


def test_bootstrap_agrees_in_distribution_with_the_item_bootstrap(sim, stats):
    # Channels fixed: the spread is the bootstrap's. The statistics' cell route (Gamma cell totals: exact;
    # cell score means: normal with the exact Dirichlet mean and variance) against the in-memory default
    # (one exponential weight per item), d draws each, independent seeds. Compared: NC-ECE draws and the
    # per-bin count and score sums. Means: |difference| < z se, se = sqrt((v1 + v2) / d); sds: |log ratio| <
    # z sqrt(1 / (d - 1)) (normal-theory se of a log sd is sqrt(1 / (2 (d - 1))), two independent samples).
    # z gives a family-wise false-alarm rate of 1e-4 over the 2 + 2 * 2 * 10 comparisons (Bonferroni).
    d = 3000
    z_idx = sim.data.scores
    idx = np.searchsorted(BINS.edges_for(None)[1:-1], z_idx, side="right")
    fpr, gap = np.tile(sim.channel.fpr, (d, 1)), np.tile(sim.channel.gap, (d, 1))
    cs = plugin_sums(stats_cells(stats), 10, fpr, gap, "iv", bootstrap=True, rng=np.random.default_rng(1))
    it = plugin_sums(item_cells(sim.data.labels, z_idx, idx, 10), 10, fpr, gap, "iv", bootstrap=True,
                     rng=np.random.default_rng(2))
    z = sps.norm.isf(1e-4 / (2 * 42))
    ece = [np.abs(f - s).sum(1) / c.sum(1) for c, s, f in (cs, it)]
    assert abs(ece[0].mean() - ece[1].mean()) < z * np.sqrt((ece[0].var() + ece[1].var()) / d)
    assert abs(np.log(ece[0].std() / ece[1].std())) < z * np.sqrt(1.0 / (d - 1))
    for k in (0, 1):  # count and score sums per bin
        x, y = cs[k], it[k]
        np.testing.assert_array_less(np.abs(x.mean(0) - y.mean(0)), z * np.sqrt((x.var(0) + y.var(0)) / d))
        np.testing.assert_array_less(np.abs(np.log(x.std(0) / y.std(0))), z * np.sqrt(1.0 / (d - 1)))


def test_stats_merged_from_chunks_give_the_in_memory_result(sim, stats, post):
    # Statistics built chunk by chunk (wide layout, 3 chunks) hold the same rows and moments up to rounding of
    # the sums: the route without bootstrap is equal to 1e-12, the bootstrap draws the same Gamma and normal
    # variates, so it agrees to rounding too.
    import pandas as pd

    lab = sim.data.labels.astype(float)
    lab[lab < 0] = np.nan
    frame = pd.DataFrame(lab, columns=list(sim.data.annotator_ids))
    frame.insert(0, "item", np.arange(sim.data.n_items))
    frame["score"] = sim.data.scores
    chunked = stats_from_chunks([frame.iloc[:250], frame.iloc[250:600], frame.iloc[600:]], bins=BINS)
    assert chunked.same_as(stats)
    np.testing.assert_allclose(chunked.row_score_sq, stats.row_score_sq, rtol=1e-12)
    for kw in (dict(bootstrap=False), dict(n_draws=200, seed=3), dict(method="model"),
               dict(method="latent", seed=5)):
        a = posterior_nc_ece(chunked, post, **kw)
        b = posterior_nc_ece(stats, post, **kw)
        np.testing.assert_allclose(a.draws, b.draws, rtol=1e-9)


def test_old_statistics_without_row_moments(sim, stats, post):
    # An object pickled before the row moments existed unpickles with them missing (class defaults None):
    # everything but the bootstrap still works, and the bootstrap says what is missing.
    old = SufficientStats.__new__(SufficientStats)
    old.__dict__.update({k: v for k, v in stats.__dict__.items() if not k.startswith("row_")})
    assert old.row_score_sum is None and not old.has_row_moments
    a = posterior_nc_ece(old, post, bootstrap=False)
    np.testing.assert_allclose(a.draws, posterior_nc_ece(stats, post, bootstrap=False).draws, rtol=1e-12)
    _same(posterior_nc_ece(old, post, method="model"), posterior_nc_ece(stats, post, method="model"))
    with pytest.raises(ValueError, match="row_score_sum.*bootstrap=False"):
        posterior_nc_ece(old, post)


# ----------------------------------------------------------------------------- errors
def test_errors_name_why(sim, stats, em, post):
    for bad in (5, Binning.equal_width(5), Binning.equal_mass(10), [0.0, 0.5, 1.0], "ten"):
        with pytest.raises(ValueError, match="bins the statistics were computed with.*cannot be split"):
            posterior_nc_ece(stats, post, bins=bad)
    no_scores = SufficientStats.from_annotations(sim.data)
    with pytest.raises(ValueError, match="computed without scores"):
        posterior_nc_ece(no_scores, post)
    # A Platt fit needs each item's score (plug-in takes it: channels only).
    rng = np.random.default_rng(5)
    f, t = channel_draws(rng, FPR, TPR, 1, 10)
    platt = fake_platt(sim.data, fpr=f, tpr=t, slope=np.full((1, 10), 0.5), intercept=np.zeros((1, 10)))
    for method in ("model", "latent"):
        with pytest.raises(ValueError, match="Platt fit evaluates the curve at each item's score"):
            posterior_nc_ece(stats, platt, method=method)
    assert posterior_nc_ece(stats, platt, bootstrap=False).n_draws == 10
    # Groups that are not the statistics' bins.
    coarse = fake_nuts(histogram_fit(sim.data, n_bins=5), {"fpr": post.draws["fpr"], "tpr": post.draws["tpr"],
                                                           "prevalence": np.full((2, 30, 5), 0.4)})
    for method in ("model", "latent"):
        with pytest.raises(ValueError, match="groups are the statistics' bins"):
            posterior_nc_ece(stats, coarse, method=method)
    # Statistics of other items than the fitted ones.
    fewer = SufficientStats.from_annotations(sim.data.subset(np.arange(700)), bins=BINS)
    with pytest.raises(ValueError, match="must describe those items"):
        posterior_nc_ece(fewer, post, method="latent")
    assert posterior_nc_ece(fewer, post, bootstrap=False).n_items == 700  # held-out items: plug-in is fine
    with pytest.raises(ValueError, match="needs posterior draws"):
        posterior_nc_ece(stats, em, method="model")
    empty = dataclasses.replace(stats, patterns=np.zeros((0, 3), np.int8), group=np.zeros(0), counts=np.zeros(0),
                                n_items=0, score_sum=np.zeros(10), row_score_sum=np.zeros(0), row_score_sq=np.zeros(0))
    with pytest.raises(ValueError, match="hold no items"):
        posterior_nc_ece(empty, post)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the statistics' own bins: no DataWarning about other cuts
        posterior_nc_ece(stats, post, method="latent", n_draws=5)
