"""Tests for noisycal_bayes/propagate/nc_ece.py (posterior_nc_ece) and its draw/sum helpers.

Independent routes: the frequentist reference ``nc_ece`` (one channel), ``core.bin_stats`` with item
weights (the Bayesian bootstrap), hand-written bin sums (model route), plain ECE on clean labels
(identity channel; latent route with near-perfect annotators), quadrature (folded-normal inversion).
"""
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from noisycal_bayes import AnnotationSet, Binning, Channel, ece, nc_ece, simulate_annotations
from noisycal_bayes.core import bin_stats, nc_ece_from_stats, posterior_positive, x64
from noisycal_bayes.propagate import TARGETS, posterior_nc_ece
from noisycal_bayes.propagate.draws import output_index
from noisycal_bayes.propagate._sums import chunk_size, item_cells, plugin_sums
from noisycal_bayes.propagate.result import debias_abs
from noisycal_bayes.warnings import DataWarning

from ._fakes import FPR, TPR, channel_draws, fake_nuts, fake_platt, histogram_fit



# ----------------------------------------------------------------------------- plug-in
@pytest.mark.parametrize("weights", ["iv", "equal", "gap", "squared_gap", [1.0, 2.0, 3.0]])
def test_plugin_without_bootstrap_equals_reference_nc_ece(sim, weights):
    # Independent route: the reference layer's nc_ece with the same channel and rule.
    res = posterior_nc_ece(sim.data, sim.channel, method="plugin", weights=weights, bootstrap=False, n_draws=3)
    ref = nc_ece(sim.data, sim.channel, weights=weights)
    np.testing.assert_allclose(res.draws, ref.value, rtol=1e-12)
    np.testing.assert_allclose(res.table["corrected_frequency"], ref.table["corrected_frequency"], rtol=1e-12)
    assert res.fit_method == "channel" and res.target == TARGETS["plugin_no_bootstrap"]


def test_plugin_draws_equal_reference_per_channel_draw(sim, post):
    # Vectorised over draws = a loop of the reference estimator over the same draws.
    res = posterior_nc_ece(sim.data, post, method="plugin", bootstrap=False)
    f = post.draws["fpr"].reshape(-1, 3)
    t = post.draws["tpr"].reshape(-1, 3)
    loop = [nc_ece(sim.data, Channel(f[s], t[s])).value for s in range(f.shape[0])]
    np.testing.assert_allclose(res.draws, loop, rtol=1e-10)
    assert res.n_draws == 60 and res.fit_method == "nuts"


def test_plugin_draws_padded_to_a_power_of_two_are_the_unpadded_ones_with_one_program(sim):
    # plugin_sums pads the draws to a power of two (repeating the last): 5 and 7 draws share the program of 8, and
    # the real draws' sums are those of the compiled function called on the unpadded draws (exactness to 1e-12).
    from noisycal_bayes.propagate._sums import _plugin_fn, _row_keys

    z = sim.data.scores
    idx = np.minimum((z * 10).astype(int), 9)
    cells = item_cells(sim.data.labels, z, idx, 10)
    rng = np.random.default_rng(5)
    fpr = np.clip(np.asarray(FPR) + 0.02 * rng.standard_normal((7, 3)), 0.01, 0.5)
    gap = np.clip(np.asarray(TPR) - np.asarray(FPR) + 0.02 * rng.standard_normal((7, 3)), 0.1, 0.9)
    fn = _plugin_fn(10, "iv", False)
    with x64():
        seven = plugin_sums(cells, 10, fpr, gap, "iv", bootstrap=False, rng=None)
        compiled = fn._cache_size()
        five = plugin_sums(cells, 10, fpr[:5], gap[:5], "iv", bootstrap=False, rng=None)
        assert fn._cache_size() == compiled
        # The same call by hand, unpadded: (bin, missingness) rows and their sums as plugin_sums builds them.
        uniq, cell_row = _row_keys(np.asarray(cells.bin), cells.patterns >= 0, 10)
        size = max(8, 1 << (uniq.shape[0] - 1).bit_length())
        row_bin = np.zeros(size, np.int32)
        row_bin[:uniq.shape[0]] = uniq[:, 0]
        row_mask = np.ones((size, 3), bool)
        row_mask[:uniq.shape[0]] = uniq[:, 1:].astype(bool)
        rs = lambda w: np.bincount(cell_row, weights=w, minlength=size)  # noqa: E731
        pos = (cells.patterns == 1).astype(float)
        stats = (rs(cells.count), np.stack([rs(cells.count * pos[:, k]) for k in range(3)], axis=1),
                 rs(cells.score_sum))
        direct = [np.asarray(v) for v in fn(row_bin, row_mask, *stats, fpr[:5], gap[:5], np.zeros(3))]
    for got, seven_got, want in zip(five, seven, direct):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(seven_got[:5], want, rtol=1e-12, atol=1e-12)
    assert not np.allclose(seven[2][5], seven[2][0])  # the draws differ: a test that could fail


def test_identity_channel_gives_plain_ece():
    sim = simulate_annotations(500, fpr=[0.0, 0.0], tpr=[1.0, 1.0], seed=1)
    ident = Channel([0.0, 0.0], [1.0, 1.0])
    res = posterior_nc_ece(sim.data, ident, method="plugin", bootstrap=False, n_draws=1, bins=8)
    assert res.median == pytest.approx(ece(sim.data.scores, sim.clean_labels, bins=8), abs=1e-12)


def test_bayesian_bootstrap_matches_bin_stats_with_item_weights(sim):
    # The draws reweight items by n * Dirichlet(1,...,1); recompute one with core.bin_stats(item_weights=...).
    n = sim.data.n_items
    z = sim.data.scores
    edges = Binning.equal_width(10).edges_for(z)
    idx = np.searchsorted(edges[1:-1], z, side="right")
    fpr = np.tile(sim.channel.fpr, (5, 1))
    gap = np.tile(sim.channel.gap, (5, 1))
    count, score_sum, freq = plugin_sums(item_cells(sim.data.labels, z, idx, 10), 10, fpr, gap, "iv", bootstrap=True,
                                         rng=np.random.default_rng(7))
    g = np.random.default_rng(7).standard_exponential((chunk_size(n), n))[:5]
    g *= n / g.sum(axis=1, keepdims=True)
    for s in range(5):
        stats_s = bin_stats(sim.data.labels, z, idx, 10, item_weights=g[s])
        with x64():
            want = float(nc_ece_from_stats(stats_s, sim.channel.fpr, sim.channel.gap, "iv"))
        got = np.abs(freq[s] - score_sum[s]).sum() / count[s].sum()
        assert got == pytest.approx(want, rel=1e-10)
        np.testing.assert_allclose(count[s].sum(), n)


def _boot_sums(sim, n_draws, seed, monkeypatch, *, item_route: bool, exact_cell=None):
    import noisycal_bayes.propagate._sums as sums

    monkeypatch.setattr(sums, "_ITEM_BOOTSTRAP_ENTRIES", 10**15 if item_route else 0)
    if exact_cell is not None:
        monkeypatch.setattr(sums, "_EXACT_CELL", exact_cell)
    z = sim.data.scores
    idx = np.searchsorted(Binning.equal_width(10).edges_for(z)[1:-1], z, side="right")
    fpr, gap = np.tile(sim.channel.fpr, (n_draws, 1)), np.tile(sim.channel.gap, (n_draws, 1))
    return plugin_sums(item_cells(sim.data.labels, z, idx, 10), 10, fpr, gap, "iv", bootstrap=True,
                       rng=np.random.default_rng(seed))


def test_cell_bootstrap_with_all_cells_exact_is_the_item_bootstrap(sim, monkeypatch):
    # With every cell below the exact threshold the cell route draws one exponential per item, in item order,
    # from the same stream: identical sums (checks the cell bookkeeping: rows, patterns, normalisation).
    a = _boot_sums(sim, 300, 5, monkeypatch, item_route=True)
    b = _boot_sums(sim, 300, 5, monkeypatch, item_route=False, exact_cell=10**9)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-9)


def test_cell_bootstrap_matches_item_bootstrap_in_distribution(sim, monkeypatch):
    # Gamma cell totals are exact; within-cell score means are normal with the exact Dirichlet moments.
    # Compare the two routes' NC-ECE draws and per-bin sums: means within 4 standard errors, sds within 4 SE.
    d = 3000
    ia = _boot_sums(sim, d, 11, monkeypatch, item_route=True)
    cb = _boot_sums(sim, d, 12, monkeypatch, item_route=False)
    ece = [np.abs(f - s).sum(1) / c.sum(1) for c, s, f in (ia, cb)]
    se_mean = np.sqrt((ece[0].var() + ece[1].var()) / d)
    assert abs(ece[0].mean() - ece[1].mean()) < 4 * se_mean
    assert abs(np.log(ece[0].std() / ece[1].std())) < 4 * np.sqrt(2.0 / (2 * d))
    for k in (0, 1):  # count and score sums per bin
        x, y = ia[k], cb[k]
        np.testing.assert_array_less(np.abs(x.mean(0) - y.mean(0)), 4 * np.sqrt((x.var(0) + y.var(0)) / d) + 1e-9)
        np.testing.assert_array_less(np.abs(np.log(x.std(0) / y.std(0))), 4 * np.sqrt(1.0 / d))


def test_permuting_items_changes_nothing_without_bootstrap(sim, post):
    perm = np.random.default_rng(1).permutation(sim.data.n_items)
    shuffled = sim.data.subset(perm)
    a = posterior_nc_ece(sim.data, post, method="plugin", bootstrap=False)
    b = posterior_nc_ece(shuffled, post, method="plugin", bootstrap=False)
    np.testing.assert_allclose(a.draws, b.draws, rtol=1e-12)


def test_em_fit_interval_comes_from_bootstrap_only(sim, em):
    res = posterior_nc_ece(sim.data, em, method="plugin", n_draws=50)
    assert res.fit_method == "em" and res.n_draws == 50
    assert "Bayesian bootstrap" in res.uncertainty and "fixed at the em estimate" in res.uncertainty
    assert res.lower < res.upper
    # Same seed, same draws; another seed, other draws.
    again = posterior_nc_ece(sim.data, em, method="plugin", n_draws=50)
    other = posterior_nc_ece(sim.data, em, method="plugin", n_draws=50, seed=1)
    np.testing.assert_array_equal(res.draws, again.draws)
    assert not np.array_equal(res.draws, other.draws)
    # Invariance: an EM fit has no channel draws, so its draws are those of its point channel passed as a
    # fixed Channel (same seed, same item weights): equal, draw by draw, and so is the interval.
    fixed = posterior_nc_ece(sim.data, em.channel, method="plugin", n_draws=50)
    np.testing.assert_allclose(res.draws, fixed.draws, rtol=1e-12)
    assert (res.lower, res.upper) == pytest.approx((fixed.lower, fixed.upper), rel=1e-12)


def test_output_index_thins_and_cycles():
    np.testing.assert_array_equal(output_index(10, 5, is_posterior=True), [0, 2, 4, 6, 8])
    np.testing.assert_array_equal(output_index(3, 7, is_posterior=True), [0, 1, 2, 0, 1, 2, 0])
    assert output_index(1, None, is_posterior=False).size == 1000
    assert output_index(60, None, is_posterior=True).size == 60


# ----------------------------------------------------------------------------- model-based
def test_model_route_equals_hand_computed_step_curve(sim, post):
    res = posterior_nc_ece(sim.data, post, method="model")
    z = sim.data.scores
    idx = Binning.equal_width(10).assign(z)
    prev = post.draws["prevalence"].reshape(-1, post.groups.n_groups)
    g = np.asarray(post.groups.index)
    want = [np.abs(np.bincount(idx, weights=p[g] - z, minlength=10)).sum() / z.size for p in prev]
    np.testing.assert_allclose(res.draws, want, rtol=1e-12)
    assert res.target == TARGETS["model"]


def test_model_route_platt_curve(sim):
    rng = np.random.default_rng(2)
    f, t = channel_draws(rng, FPR, TPR, 1, 20)
    slope = 0.5 + 0.05 * rng.standard_normal((1, 20))
    intercept = 0.02 * rng.standard_normal((1, 20))
    fit = fake_platt(sim.data, fpr=f, tpr=t, slope=slope, intercept=intercept)
    res = posterior_nc_ece(sim.data, fit, method="model")
    z = sim.data.scores
    idx = Binning.equal_width(10).assign(z)
    s0 = np.log(np.clip(z, 1e-6, 1 - 1e-6)) - np.log1p(-np.clip(z, 1e-6, 1 - 1e-6))
    want = [np.abs(np.bincount(idx, weights=1 / (1 + np.exp(-(a * s0 + b))) - z, minlength=10)).sum() / z.size
            for a, b in zip(slope.ravel(), intercept.ravel())]
    np.testing.assert_allclose(res.draws, want, rtol=1e-10)


# ----------------------------------------------------------------------------- latent-label
def test_latent_with_near_perfect_annotators_recovers_the_oracle_ece():
    # tpr = 1 - 1e-9, fpr = 1e-9: every posterior P(Y=1 | A) is 0 or 1 up to 1e-9, so every draw of the clean
    # labels equals the majority label = the clean label (the annotators are perfect in the simulation).
    sim = simulate_annotations(600, fpr=[0.0, 0.0, 0.0], tpr=[1.0, 1.0, 1.0], curve="overconfident", seed=4)
    em = histogram_fit(sim.data)
    pt = dict(em.point)
    pt["fpr"], pt["tpr"] = np.full(3, 1e-9), np.full(3, 1 - 1e-9)
    pt["gap"] = pt["tpr"] - pt["fpr"]
    import dataclasses

    fit = dataclasses.replace(em, point=pt)
    res = posterior_nc_ece(sim.data, fit, method="latent", n_draws=20)
    np.testing.assert_allclose(res.draws, ece(sim.data.scores, sim.clean_labels, bins=10), rtol=1e-12)


def test_latent_bin_frequencies_match_posterior_probabilities(sim, em):
    # Mean over label draws of each bin's clean frequency -> mean of P(Y_i = 1 | A_i, g_i) (Monte Carlo).
    n_draws = 1500
    res = posterior_nc_ece(sim.data, em, method="latent", n_draws=n_draws)
    p = np.asarray(posterior_positive(sim.data.labels, None, em.point["fpr"], em.point["tpr"],
                                      em.point["prevalence"][em.groups.index]))
    idx = Binning.equal_width(10).assign(sim.data.scores)
    count = np.bincount(idx, minlength=10)
    want = np.bincount(idx, weights=p, minlength=10) / count
    # Per-bin MC se = sqrt(sum p(1-p)) / n_k / sqrt(n_draws); z = 4.4 gives a 1e-4 family-wise false alarm
    # rate over 10 bins (two-sided, Bonferroni).
    se = np.sqrt(np.bincount(idx, weights=p * (1 - p), minlength=10)) / count / np.sqrt(n_draws)
    z = stats.norm.isf(1e-4 / 20)
    assert np.all(np.abs(res.table["corrected_frequency"] - want) <= z * se + 1e-12)


def test_latent_platt_runs_per_item(sim):
    n_draws = 400
    rng = np.random.default_rng(5)
    f, t = channel_draws(rng, FPR, TPR, 1, n_draws)
    slope = 0.5 + 0.05 * rng.standard_normal((1, n_draws))
    intercept = 0.02 * rng.standard_normal((1, n_draws))
    fit = fake_platt(sim.data, fpr=f, tpr=t, slope=slope, intercept=intercept)
    res = posterior_nc_ece(sim.data, fit, method="latent", n_draws=n_draws)
    assert res.n_draws == n_draws and res.target == TARGETS["latent"]
    # Values: per draw s the clean labels are Bernoulli(p_is), p_is = P(Y_i = 1 | A_i) under the item's own
    # prior m_s(z_i) = sigmoid(slope_s logit z_i + intercept_s) (the per-item Platt curve) and channel s,
    # computed here with core.posterior_positive. Each bin's mean frequency over draws estimates
    # mean_s mean_{i in k} p_is with Monte Carlo se sqrt(sum_s sum_{i in k} p_is (1 - p_is)) / (n_k S);
    # z = 4.4: 1e-4 family-wise false alarm over the 10 bins (two-sided, Bonferroni).
    z = sim.data.scores
    zc = np.clip(z, 1e-6, 1 - 1e-6)
    logit = np.log(zc) - np.log1p(-zc)
    p = np.stack([np.asarray(posterior_positive(sim.data.labels, None, f[0, s], t[0, s],
                                                1 / (1 + np.exp(-(slope[0, s] * logit + intercept[0, s])))))
                  for s in range(n_draws)])                          # (S, n_items)
    idx = Binning.equal_width(10).assign(z)
    count = np.bincount(idx, minlength=10)
    want = np.bincount(idx, weights=p.mean(axis=0), minlength=10) / count
    se = np.sqrt(np.bincount(idx, weights=(p * (1 - p)).sum(axis=0), minlength=10)) / count / n_draws
    zq = stats.norm.isf(1e-4 / 20)
    assert np.all(np.abs(res.table["corrected_frequency"] - want) <= zq * se + 1e-12)
    # Negative control for the same assertion: the curve ignored (prior 1/2 for every item) is rejected.
    flat = np.stack([np.asarray(posterior_positive(sim.data.labels, None, f[0, s], t[0, s], np.full(z.size, 0.5)))
                     for s in range(n_draws)])
    wrong = np.bincount(idx, weights=flat.mean(axis=0), minlength=10) / count
    assert np.any(np.abs(res.table["corrected_frequency"] - wrong) > zq * se + 1e-12)


def test_latent_accepts_new_scores_for_the_same_items(sim, em):
    new = sim.data.with_scores(np.clip(sim.data.scores * 0.5 + 0.25, 0, 1))
    n_draws = 400
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)  # the new scores fall in other bins than the fit's groups
        res = posterior_nc_ece(new, em, method="latent", n_draws=n_draws)
    assert res.n_items == sim.data.n_items
    # Values: the clean labels are drawn from the fit (the items' posterior P(Y_i = 1 | A_i, g_i) under the
    # fit's own groups of the OLD scores), then binned and compared with the NEW scores. Per new bin the mean
    # frequency estimates the mean of p_i with MC se sqrt(sum p (1 - p)) / n_k / sqrt(S) (z = 4.4: 1e-4
    # family-wise over the bins, two-sided, Bonferroni); mean_score is the new scores' bin mean, exactly.
    p = np.asarray(posterior_positive(sim.data.labels, None, em.point["fpr"], em.point["tpr"],
                                      em.point["prevalence"][em.groups.index]))
    idx = Binning.equal_width(10).assign(new.scores)
    count = np.bincount(idx, minlength=10)
    ok = count > 0
    want = np.bincount(idx, weights=p, minlength=10)[ok] / count[ok]
    se = np.sqrt(np.bincount(idx, weights=p * (1 - p), minlength=10)[ok]) / count[ok] / np.sqrt(n_draws)
    zq = stats.norm.isf(1e-4 / 20)
    table = res.table[ok]
    assert np.all(np.abs(table["corrected_frequency"].to_numpy() - want) <= zq * se + 1e-12)
    np.testing.assert_allclose(table["mean_score"], np.bincount(idx, weights=new.scores, minlength=10)[ok] / count[ok],
                               rtol=1e-12)


def test_latent_warns_when_groups_are_not_the_evaluation_bins(sim):
    fit = histogram_fit(sim.data, n_bins=5)
    with pytest.warns(DataWarning, match="not the evaluation bins"):
        posterior_nc_ece(sim.data, fit, method="latent", bins=10, n_draws=20)


# ----------------------------------------------------------------------------- summaries and reading
def test_quantiles_and_reading(sim, post):
    res = posterior_nc_ece(sim.data, post, method="plugin", n_draws=60, level=0.8)
    np.testing.assert_allclose([res.lower, res.upper, res.upper_one_sided],
                               np.quantile(res.debiased_draws, [0.1, 0.9, 0.8], method="weibull"))
    raw = posterior_nc_ece(sim.data, post, method="plugin", n_draws=60, level=0.8, interval="posterior")
    np.testing.assert_allclose([raw.lower, raw.upper], np.quantile(raw.draws, [0.1, 0.9], method="weibull"))
    assert res.median == pytest.approx(np.median(res.draws)) and res.mean == pytest.approx(res.draws.mean())
    expect = "two_sided" if res.calibration_p_value <= 0.2 else "upper_one_sided"
    assert res.interval_to_read == expect
    lo, hi = res.reported_interval
    assert (lo, hi) == (res.interval if expect == "two_sided" else (0.0, res.upper_one_sided))
    table = res.table
    assert list(table.columns[:4]) == ["bin", "lower", "upper", "count"]
    ok = table["count"] > 0
    assert np.all(table.loc[ok, "frequency_lower"] <= table.loc[ok, "frequency_upper"])


def test_exactly_calibrated_sample_reads_one_sided_and_strong_miscalibration_two_sided():
    # 40 items per bin with score (k + 0.5)/10 and exactly 40 (k + 0.5)/10 positive clean labels: every bin's
    # residual is exactly 0, so the point value sum_k |mean_s e_sk| is only Monte Carlo noise, far inside
    # the centred draws' spread (p-value near 1).
    scores, labels = [], []
    for k in range(10):
        z = (k + 0.5) / 10
        n_pos = int(round(40 * z))
        scores += [z] * 40
        labels += [1] * n_pos + [0] * (40 - n_pos)
    y = np.array(labels)
    data = AnnotationSet.from_wide(np.stack([y, y], axis=1), np.array(scores))
    ident = Channel([0.0, 0.0], [1.0, 1.0])
    res = posterior_nc_ece(data, ident, method="plugin", n_draws=400)
    assert res.calibration_p_value > 0.5 and res.interval_to_read == "upper_one_sided"
    assert res.reported_interval == (0.0, res.upper_one_sided)
    # All labels flipped: every bin is off by |1 - 2 z| on average, dozens of standard errors.
    flipped = AnnotationSet.from_wide(np.stack([1 - y, 1 - y], axis=1), np.array(scores))
    res2 = posterior_nc_ece(flipped, ident, method="plugin", n_draws=400)
    assert res2.calibration_p_value == 0.0 and res2.interval_to_read == "two_sided"


def test_debias_abs_inverts_the_folded_normal_mean():
    for m, sd in [(0.0, 1.0), (0.3, 1.0), (1.7, 0.5), (5.0, 2.0), (40.0, 1.0)]:
        # E|m + sd Z| by quadrature, then invert.
        x, _ = integrate.quad(lambda u: abs(m + sd * u) * stats.norm.pdf(u), -np.inf, np.inf)
        if m > 0:
            assert debias_abs(x, sd) == pytest.approx(m, abs=1e-3 * sd)
    assert debias_abs(0.5 * np.sqrt(2 / np.pi), 1.0) == 0.0  # below E|Z|: magnitude 0
    assert debias_abs(0.37, 0.0) == 0.37  # no uncertainty: unchanged
    assert debias_abs(1e6, 1.0) == pytest.approx(1e6)


# ----------------------------------------------------------------------------- errors
def test_error_paths(sim, em, post):
    with pytest.raises(ValueError, match="`method` must be one of"):
        posterior_nc_ece(sim.data, em, method="oracle")
    with pytest.raises(ValueError, match="`weights` must be one of"):
        posterior_nc_ece(sim.data, em, weights="votes")
    with pytest.raises(ValueError, match="explicit `weights` must have shape"):
        posterior_nc_ece(sim.data, em, weights=[1.0, 1.0])
    with pytest.raises(ValueError, match="`level` must lie strictly between 0 and 1"):
        posterior_nc_ece(sim.data, em, level=1.5)
    with pytest.raises(ValueError, match="`interval` must be one of"):
        posterior_nc_ece(sim.data, em, interval="hdi")
    with pytest.raises(ValueError, match="must be an AnnotationSet"):
        posterior_nc_ece(sim.data.labels, em)
    with pytest.raises(ValueError, match="needs posterior draws"):
        posterior_nc_ece(sim.data, em, method="model")
    with pytest.raises(ValueError, match="fitted model"):
        posterior_nc_ece(sim.data, sim.channel, method="latent")
    with pytest.raises(ValueError, match="must be a FitResult"):
        posterior_nc_ece(sim.data, {"fpr": FPR}, method="plugin")
    with pytest.raises(ValueError, match="the fit has 2 annotators"):
        posterior_nc_ece(sim.data, Channel([0.1, 0.1], [0.9, 0.9]))
    other = simulate_annotations(500, fpr=FPR, tpr=TPR, seed=9).data
    with pytest.raises(ValueError, match="must hold the items the model was fitted on"):
        posterior_nc_ece(other, post, method="latent")
    no_scores = type(sim.data).from_wide(sim.data.labels)
    with pytest.raises(ValueError, match="scores"):
        posterior_nc_ece(no_scores, em)
    marginal = fake_nuts(histogram_fit(sim.data), {"fpr": post.draws["fpr"], "tpr": post.draws["tpr"],
                                                   "prevalence": np.full((2, 30), 0.4)})
    import dataclasses

    marginal = dataclasses.replace(marginal, model="dawid_skene")
    with pytest.raises(ValueError, match="no calibration curve"):
        posterior_nc_ece(sim.data, marginal, method="model")


def test_held_out_evaluation_of_a_recalibrated_model():
    # Fit a temperature map on one half with the known channels, evaluate NC-ECE on the other half: the
    # over-confident model (clean curve sigmoid(0.5 logit z), i.e. T = 2) is corrected, so its NC-ECE
    # falls by far more than the interval widths (fixed seed; effect about 10 standard errors).
    from noisycal_bayes.recalibration.posterior import PosteriorTemperature

    sim = simulate_annotations(3000, fpr=FPR, tpr=TPR, curve="overconfident", seed=11)
    fit_part, held = sim.data.subset(np.arange(1500)), sim.data.subset(np.arange(1500, 3000))
    pt = PosteriorTemperature(n_draws=100).fit(fit_part, sim.channel)
    before = posterior_nc_ece(held, sim.channel, method="plugin", n_draws=200)
    after = posterior_nc_ece(held.with_scores(pt.predict(held.scores)), sim.channel, method="plugin", n_draws=200)
    assert after.reported_interval[1] < before.lower
