"""Tests for noisycal_bayes/diagnostics/checks.py (and its plot entry point, noisycal_bayes/plotting/checks.py).

Independent routes: observed and expected cell counts, Pearson residuals, X^2 and agreement rates recomputed
here with NumPy from the raw label matrix and the fitted parameters (no compression, no JAX); degrees of
freedom from DESIGN.md §8; the not-testable designs (1 group x 3 annotators: 7 = 7; 2 groups x 2 annotators:
6 = 6); invariance of the observed statistic to the order of the annotators.
"""
import dataclasses
from itertools import product

import numpy as np
import pytest

from noisycal_bayes import AnnotationSet, Binning, fit_em
from noisycal_bayes.data import SufficientStats
from noisycal_bayes.diagnostics import CHECK_NAMES, model_checks
from noisycal_bayes.models import Prior
from noisycal_bayes.simulate import simulate_annotations

from ..propagate._fakes import channel_draws, fake_nuts

FPR, TPR = [0.1, 0.2, 0.15], [0.85, 0.8, 0.9]


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(1500, fpr=FPR, tpr=TPR, missing=0.2, seed=7)


@pytest.fixture(scope="module")
def fit(sim):
    return fit_em(sim.data, groups=Binning.equal_mass(3), n_starts=3)


@pytest.fixture(scope="module")
def checks(sim, fit):
    return model_checks(sim.data, fit, n_replicates=39, seed=1)


def numpy_cells(labels, group, fpr, tpr, prev):
    """Every (group, observed-annotators) stratum's cells: observed and expected counts, by brute force."""
    n, j = labels.shape
    rows = []
    for g in np.unique(group):
        lab_g = labels[group == g]
        for mask in product([False, True], repeat=j):
            mask = np.array(mask)
            if not mask.any():
                continue
            in_stratum = np.all((lab_g >= 0) == mask, axis=1)
            n_s = in_stratum.sum()
            if n_s == 0:
                continue
            for bits in product([0, 1], repeat=int(mask.sum())):
                pat = np.full(j, -1)
                pat[mask] = bits
                obs = np.sum(np.all(lab_g == pat, axis=1))
                l0 = np.prod(np.where(pat[mask] == 1, fpr[mask], 1 - fpr[mask]))
                l1 = np.prod(np.where(pat[mask] == 1, tpr[mask], 1 - tpr[mask]))
                p = (1 - prev[g]) * l0 + prev[g] * l1
                key = "".join("-" if v < 0 else str(v) for v in pat)
                rows.append((int(g), key, obs, n_s * p))
    return rows


def test_table_shape_and_statuses(checks):
    assert checks.table["name"].tolist() == list(CHECK_NAMES)
    assert set(checks.table["status"]) <= {"pass", "warn"}
    assert list(checks.table.columns) == ["name", "status", "statistic", "p_value", "detail"]
    assert checks.method == "bootstrap" and checks.replicated.shape == (39 - checks.n_failed,)
    # p-values live on the grid (1 + k) / (1 + B).
    b = checks.replicated.size
    k = checks.table["p_value"].to_numpy() * (1 + b) - 1
    np.testing.assert_allclose(k, np.round(k), atol=1e-9)
    with pytest.raises(dataclasses.FrozenInstanceError):
        checks.statistic = 0.0


def test_residuals_match_numpy(sim, fit, checks):
    rows = numpy_cells(sim.data.labels, fit.groups.index, fit.fpr, fit.tpr, fit.prevalence)
    res = checks.residuals.set_index(["group", "pattern"])
    assert len(rows) == len(res)
    for g, key, obs, exp in rows:
        r = res.loc[(g, key)]
        assert r["observed"] == obs
        np.testing.assert_allclose(r["expected"], exp, rtol=1e-8)
        np.testing.assert_allclose(r["pearson"], (obs - exp) / np.sqrt(exp), rtol=1e-7, atol=1e-10)


def test_statistic_without_pooling_is_pearson_x2(sim, fit):
    out = model_checks(sim.data, fit, n_replicates=19, min_expected=0.0)
    rows = numpy_cells(sim.data.labels, fit.groups.index, fit.fpr, fit.tpr, fit.prevalence)
    x2 = sum((o - e) ** 2 / e for _, _, o, e in rows)
    np.testing.assert_allclose(out.statistic, x2, rtol=1e-8)
    # df = sum over strata (2^|O| - 1) - (G + 2J); the strata are the distinct (group, mask) combinations.
    strata = {(g, "".join("-" if c == "-" else "x" for c in key)) for g, key, _, _ in rows}
    free = sum(2 ** (m.count("x")) - 1 for _, m in strata)
    assert out.df == free - (3 + 2 * 3)
    assert out.residuals["pooled_cell"].nunique() == len(rows)


def test_pooling_rule(checks):
    res = checks.residuals
    for _, cells in res.groupby("pooled_cell"):
        assert cells["stratum"].nunique() == 1  # pooling never crosses strata
        if len(cells) > 1:  # a merged cell holds every small cell of its stratum and reaches min_expected
            stratum = res[res["stratum"] == cells["stratum"].iloc[0]]
            assert set(stratum.index[stratum["expected"] < 5.0]) <= set(cells.index)
            assert cells["expected"].sum() >= 5.0 or len(cells) == len(stratum)


def test_agreement_matches_numpy(sim, fit, checks):
    lab, g = sim.data.labels, fit.groups.index
    agr = checks.agreement
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        both = (lab[:, a] >= 0) & (lab[:, b] >= 0)
        want = np.mean(lab[both, a] == lab[both, b])
        got = agr[(agr.kind == "pair") & (agr.annotator == a) & (agr.other == b) & (agr.group == -1)]
        np.testing.assert_allclose(got["observed"].item(), want, rtol=1e-12)
        sel = both & (g == 2)
        got2 = agr[(agr.kind == "pair") & (agr.annotator == a) & (agr.other == b) & (agr.group == 2)]
        np.testing.assert_allclose(got2["observed"].item(), np.mean(lab[sel, a] == lab[sel, b]), rtol=1e-12)
    # Annotator 0 with the others: pooled over its pairs.
    num = den = 0
    for b in (1, 2):
        both = (lab[:, 0] >= 0) & (lab[:, b] >= 0)
        num, den = num + np.sum(lab[both, 0] == lab[both, b]), den + both.sum()
    got = agr[(agr.kind == "annotator") & (agr.annotator == 0)]
    np.testing.assert_allclose(got["observed"].item(), num / den, rtol=1e-12)


def test_statistic_invariant_to_annotator_order(sim):
    data = sim.data
    perm = [2, 0, 1]
    other = AnnotationSet.from_wide(data.labels[:, perm], data.scores)
    a = model_checks(data, fit_em(data, groups=Binning.equal_mass(3), n_starts=3), n_replicates=19, min_expected=0.0)
    b = model_checks(other, fit_em(other, groups=Binning.equal_mass(3), n_starts=3), n_replicates=19,
                     min_expected=0.0)
    np.testing.assert_allclose(a.statistic, b.statistic, rtol=1e-6)


def test_seed_reproducible(sim, fit, checks):
    again = model_checks(sim.data, fit, n_replicates=39, seed=1)
    np.testing.assert_array_equal(again.replicated, checks.replicated)


@pytest.mark.parametrize("model,groups,labels_j", [("dawid_skene", None, 3), ("grouped", 2, 2)])
def test_not_testable_designs(model, groups, labels_j):
    # 1 group x 3 annotators: 7 free cell probabilities, 1 + 6 parameters; 2 groups x 2 annotators: 6 and 2 + 4.
    s = simulate_annotations(600, fpr=FPR[:labels_j], tpr=TPR[:labels_j], seed=3)
    kw = {"model": model} if groups is None else {"model": model, "groups": Binning.equal_mass(groups)}
    f = fit_em(s.data, n_starts=3, **kw)
    out = model_checks(s.data, f, n_replicates=19)
    assert out.status == "not_testable" and not out.warned
    assert (out.table["status"] == "not_testable").all()
    assert "no degrees of freedom" in out.reason and out.df <= 0
    assert np.isnan(out.statistic) and np.isnan(out.p_value)


def test_too_few_items_not_testable():
    s = simulate_annotations(40, fpr=FPR, tpr=TPR, seed=4)
    f = fit_em(s.data, groups=Binning.equal_mass(3), n_starts=3)
    out = model_checks(s.data, f, n_replicates=19)
    assert out.status == "not_testable" and "too few items" in out.reason


def test_posterior_predictive_route(sim, fit):
    rng = np.random.default_rng(0)
    f, t = channel_draws(rng, fit.fpr, fit.tpr, 2, 30, spread=0.01)
    prev = np.clip(fit.prevalence + 0.01 * rng.standard_normal((2, 30, 3)), 0.01, 0.99)
    nuts = fake_nuts(fit, {"fpr": f, "tpr": t, "prevalence": prev})
    out = model_checks(sim.data, nuts, n_replicates=40, seed=0)
    assert out.method == "posterior_predictive"
    assert out.replicated.shape == out.observed_discrepancy.shape == (40,)
    np.testing.assert_allclose(out.statistic, out.observed_discrepancy.mean())
    # Expected counts are the posterior mean over the draws used.
    assert np.all(np.isfinite(out.residuals["standardized"]) | (out.residuals["expected"] < 1e-6))


def test_sufficient_stats_give_the_same_checks(sim, checks):
    # A fit from SufficientStats (counts per score bin, no items) sees the same (group, pattern) counts.
    stats = SufficientStats.from_annotations(sim.data, bins=Binning.equal_width(3))
    data = AnnotationSet.from_wide(sim.data.labels, sim.data.scores)
    by_items = model_checks(data, fit_em(data, groups=Binning.equal_width(3), n_starts=3), n_replicates=19)
    by_stats = model_checks(stats, fit_em(stats, groups=None, n_starts=3), n_replicates=19)
    np.testing.assert_allclose(by_stats.statistic, by_items.statistic, rtol=1e-6)
    np.testing.assert_array_equal(by_stats.residuals["observed"], by_items.residuals["observed"])


def test_plot(checks):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from noisycal_bayes.plotting import check_residuals

    fig = checks.plot()
    assert len(fig.axes) == 2  # heat map and colour bar
    own = Figure()
    ax = own.add_subplot()
    assert check_residuals(checks, ax=ax) is own
    with pytest.raises(ValueError, match="must be the output of"):
        check_residuals(object())
    assert checks.residual_matrix().shape[0] == 3


def test_error_paths(sim, fit):
    with pytest.raises(ValueError, match="must be a FitResult"):
        model_checks(sim.data, "fit")
    with pytest.raises(ValueError, match="is not supported"):
        model_checks(sim.data, dataclasses.replace(fit, model="platt"))
    with pytest.raises(ValueError, match="n_replicates"):
        model_checks(sim.data, fit, n_replicates=5)
    with pytest.raises(ValueError, match="alpha"):
        model_checks(sim.data, fit, alpha=1.5)
    with pytest.raises(ValueError, match="min_expected"):
        model_checks(sim.data, fit, min_expected=-1)
    with pytest.raises(ValueError, match="AnnotationSet"):
        model_checks(sim.data.labels, fit)
    other = simulate_annotations(1500, fpr=FPR, tpr=TPR, missing=0.2, seed=8).data
    with pytest.raises(ValueError, match="differ from those the model was fitted to"):
        model_checks(other, fit)
    with pytest.raises(ValueError, match="1400 items"):
        model_checks(simulate_annotations(1400, fpr=FPR, tpr=TPR, seed=8).data, fit)
    with pytest.raises(ValueError, match="no estimate"):
        model_checks(sim.data, dataclasses.replace(fit, channel=None))
    with pytest.raises(ValueError, match="closed-form MAP-EM"):
        model_checks(sim.data, dataclasses.replace(fit, method="map", prior=Prior(fpr=(0.5, 2.0))), n_replicates=19)
    with pytest.raises(ValueError, match="residual_matrix|standardized"):
        model_checks(sim.data, fit, n_replicates=19).residual_matrix("raw")



def test_score_trend_and_excess_agreement_match_numpy(sim, fit, checks):
    # Independent route from the raw label matrix and the fitted parameters (missing at random, so the expected
    # positives of annotator j in group g are n_gj (fpr_j + gap_j pi_g) whatever the other responses, and a
    # pair agrees with probability (1 - pi_g)(a a' + (1 - a)(1 - a')) + pi_g (b b' + (1 - b)(1 - b'))).
    lab, g = sim.data.labels, fit.groups.index
    fpr, tpr, prev = np.asarray(fit.fpr), np.asarray(fit.tpr), np.asarray(fit.prevalence)
    n_groups = prev.size
    c = np.arange(n_groups) - (n_groups - 1) / 2
    z = []
    for j in range(3):
        num = var = 0.0
        for k in range(n_groups):
            lab_gj = lab[(g == k) & (lab[:, j] >= 0), j]
            m = fpr[j] + (tpr[j] - fpr[j]) * prev[k]
            num += c[k] * (lab_gj.sum() - lab_gj.size * m)
            var += c[k] ** 2 * lab_gj.size * m * (1 - m)
        z.append(num / np.sqrt(var))
    tab = checks.table.set_index("name")
    np.testing.assert_allclose(tab.loc["score_dependent_noise", "statistic"], np.max(np.abs(z)), rtol=1e-8)
    num = var = 0.0
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        for k in range(n_groups):
            sel = (g == k) & (lab[:, a] >= 0) & (lab[:, b] >= 0)
            m = ((1 - prev[k]) * (fpr[a] * fpr[b] + (1 - fpr[a]) * (1 - fpr[b]))
                 + prev[k] * (tpr[a] * tpr[b] + (1 - tpr[a]) * (1 - tpr[b])))
            num += np.sum(lab[sel, a] == lab[sel, b]) - sel.sum() * m
            var += sel.sum() * m * (1 - m)
    np.testing.assert_allclose(tab.loc["annotator_dependence", "statistic"], num / np.sqrt(var), rtol=1e-8)


def test_targeted_checks_warn_on_their_alternatives():
    # Negative controls that must fail the model. (1) Annotator 0's fpr = 0.02 + 0.5 z, n = 4000: the score
    # trend of its residuals lies above every one of 19 replicates (p = 1/20 = 0.05 = alpha).
    # (2) A common item difficulty: 30% of items flip every annotator's label with probability 0.3, the rest
    # are labelled by accurate annotators. The observed excess-agreement z at the fit is small (0.5: the shared
    # channels absorb part of it), but every replicate's, at its own refit, is smaller still.
    rng = np.random.default_rng(3)
    n = 4000
    z = rng.uniform(size=n)
    y = rng.random(n) < z
    fpr = np.stack([0.02 + 0.5 * z, np.full(n, 0.08), np.full(n, 0.05)], 1)
    lab = (rng.random((n, 3)) < np.where(y[:, None], np.array([0.9, 0.85, 0.92]), fpr)).astype(np.int8)
    data = AnnotationSet.from_wide(lab, z)
    out = model_checks(data, fit_em(data, groups=Binning.equal_mass(5), n_starts=3), n_replicates=19, seed=0)
    assert out.table.set_index("name").loc["score_dependent_noise", "status"] == "warn"
    hard = rng.random(n) < 0.3
    err = np.where(hard[:, None], 0.3, 0.05)
    lab2 = np.where(rng.random((n, 3)) < err, 1 - y[:, None], y[:, None]).astype(np.int8)
    data2 = AnnotationSet.from_wide(lab2, z)
    out2 = model_checks(data2, fit_em(data2, groups=Binning.equal_mass(5), n_starts=3), n_replicates=19, seed=0)
    tab2 = out2.table.set_index("name")
    assert tab2.loc["annotator_dependence", "status"] == "warn", tab2
    assert tab2.loc["annotator_dependence", "p_value"] == pytest.approx(0.05)


# ------------------------------------------------------------------ crowds: response-level checks
def _crowd(correlated=False, seed=11):
    """A crowd of 600 items and 60 annotators, 8 per item (EM's sparse path; 3^60 cells do not fit 64-bit keys).
    With ``correlated``, the same slots are relabelled so that errors coincide: on a hard 40% of the items every
    annotator errs with probability 0.4, elsewhere with probability 0.05 (conditional independence fails)."""
    from noisycal_bayes.simulate import simulate_crowd

    sim = simulate_crowd(600, 60, labels_per_item=8, curve="calibrated", seed=seed)
    if not correlated:
        return sim.data, sim.fpr, sim.tpr
    rng = np.random.default_rng(seed)
    item, ann, _ = sim.data.responses
    y = sim.clean_labels.astype(np.int64)
    err = np.where(rng.random(600) < 0.4, 0.4, 0.05)[item]
    lab = np.where(rng.random(item.size) < err, 1 - y[item], y[item])
    data = AnnotationSet.from_responses(item, ann, lab, n_items=600, n_annotators=60, scores=sim.data.scores)
    return data, None, None


def _crowd_nuts(data, fpr=None, tpr=None, seed=0):
    """EM's sparse fit and posterior-like draws around ``(fpr, tpr)`` (default: the EM estimate), prevalence at EM's."""
    em = fit_em(data, groups=Binning.equal_mass(3), n_starts=2)
    assert em.inputs.sparse
    rng = np.random.default_rng(seed)
    f, t = channel_draws(rng, em.fpr if fpr is None else fpr, em.tpr if tpr is None else tpr, 1, 99, spread=0.005)
    prev = np.broadcast_to(np.asarray(em.prevalence), (1, 99, 3))
    return em, fake_nuts(em, {"fpr": f, "tpr": t, "prevalence": prev})


def test_sparse_em_fit_gives_not_testable_rows_with_a_reason():
    data, _, _ = _crowd()
    em, _ = _crowd_nuts(data)
    out = model_checks(data, em, n_replicates=19)
    assert out.status == "not_testable" and out.table["name"].tolist() == list(CHECK_NAMES)
    assert (out.table["status"] == "not_testable").all()
    assert "sparse-response path" in out.reason and "fit_nuts" in out.reason
    other, _, _ = _crowd(seed=12)
    with pytest.raises(ValueError, match="responses of `data` differ"):
        model_checks(other, em, n_replicates=19)


@pytest.mark.statistical
def test_response_level_checks_are_calibrated_and_see_correlated_errors():
    # Well specified, draws at the true channels: the replicates are exchangeable with the data, so each p-value
    # is (up to ties) uniform. False-alarm rate of this assertion: at most 4 x 0.01 (four checks computed).
    data, fpr, tpr = _crowd()
    _, nuts = _crowd_nuts(data, fpr, tpr)
    out = model_checks(data, nuts, n_replicates=99, seed=0)
    assert out.settings["design"] == "responses" and out.method == "posterior_predictive"
    tab = out.table.set_index("name")
    assert tab.loc["posterior_predictive", "status"] == "not_testable"
    computed = tab[tab["status"] != "not_testable"]
    assert {"annotator_agreement", "score_dependent_noise", "annotator_dependence"} <= set(computed.index)
    assert (computed["p_value"] > 0.01).all(), computed
    agree = out.agreement[out.agreement["kind"] == "annotator"]
    assert len(agree) == 60 and np.all(np.isfinite(agree["z"]))
    # Negative control: errors that coincide raise the agreement beyond conditional independence. With 99 draws
    # the smallest p-value is 0.01; the pooled excess agreement here is far out in the tail.
    bad, _, _ = _crowd(correlated=True)
    _, nuts_bad = _crowd_nuts(bad)
    dep = model_checks(bad, nuts_bad, n_replicates=99, seed=0).table.set_index("name").loc["annotator_dependence"]
    assert dep["status"] == "warn" and dep["p_value"] <= 0.02, dep
