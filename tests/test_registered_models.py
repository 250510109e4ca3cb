"""The richer channel models registered with fit_map / fit_nuts (issue 36, part 3).

Every consumer of the registered fit reads the channel NC-ECE needs (each item's score-group channel) or refuses the
fit: the registered fit's channels, NC-ECE, clean-label posterior and log-likelihood equal those of
``diagnostics.alternatives`` on the same seed, or an independent NumPy computation from the per-group channels.
"""
import warnings

import numpy as np
import pytest

from noisycal_bayes import Binning
from noisycal_bayes.diagnostics import gap_diagnostics
from noisycal_bayes.diagnostics.alternatives import fit_alternative
from noisycal_bayes.inference import fit_em, fit_map, fit_nuts
from noisycal_bayes.labels import (annotation_posteriors, clean_metrics, corrected_accuracy, item_posteriors,
                                   label_issues, plan_labels)
from noisycal_bayes.propagate import posterior_nc_ece
from noisycal_bayes.propagate.group_channels import posterior_nc_ece_group_channels
from noisycal_bayes.recalibration.posterior import PosteriorTemperature
from noisycal_bayes.simulate import simulate_annotations

GROUPS = Binning.equal_mass(3)


@pytest.fixture(scope="module")
def data():
    return simulate_annotations(400, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.85], curve="overconfident", seed=3).data


@pytest.fixture(scope="module")
def map_pair(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_map(data, model="score_dependent", groups=GROUPS, seed=0)
        alt = fit_alternative(data, "score_dependent", groups=GROUPS, method="map", seed=0)
    return fit, alt


def _numpy_clean_posterior(labels, group, fpr_g, tpr_g, prev):
    """P(Y_i = 1 | A_i) and log P(A_i) with item i's group channel, by Bayes' rule in plain NumPy."""
    f, t, pi = fpr_g[group], tpr_g[group], prev[group]
    obs = labels >= 0
    l1 = np.sum(np.where(obs, np.where(labels == 1, np.log(t), np.log1p(-t)), 0.0), axis=1)
    l0 = np.sum(np.where(obs, np.where(labels == 1, np.log(f), np.log1p(-f)), 0.0), axis=1)
    a, b = np.log(pi) + l1, np.log1p(-pi) + l0
    return 1 / (1 + np.exp(b - a)), np.logaddexp(a, b)


def test_map_fit_carries_the_group_channels_of_alternatives(data, map_pair):
    fit, alt = map_pair
    assert (fit.model, fit.method) == ("score_dependent", "map")
    f, t = fit.group_channels
    assert f.shape == (1, fit.n_groups, data.n_annotators)
    np.testing.assert_array_equal(f, alt.fpr_group)
    np.testing.assert_array_equal(t, alt.tpr_group)
    np.testing.assert_array_equal(fit.groups.index, alt.group_index)
    # `channel` is the item-weighted average of the group channels (each item's channel, averaged over items) ...
    np.testing.assert_allclose(fit.channel.fpr, alt.fpr_group[0][alt.group_index].mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(fit.channel.tpr, alt.tpr_group[0][alt.group_index].mean(axis=0), rtol=1e-12)
    # ... not the shared centre of the model (renamed, and different here: the groups' channels spread).
    assert "fpr_centre" in fit.point and not np.allclose(fit.point["fpr"], fit.point["fpr_centre"], atol=1e-3)
    table = fit.summary()
    assert "fpr_group[1, 2]" in table.index and "tau_fpr" in table.index


def test_map_fit_nc_ece_is_the_group_channel_propagation(data, map_pair):
    fit, alt = map_pair
    res = posterior_nc_ece(data, fit, n_draws=300, seed=5)
    rep = np.repeat(alt.fpr_group, 300, axis=0), np.repeat(alt.tpr_group, 300, axis=0)
    ref = posterior_nc_ece_group_channels(data, alt.group_index, *rep, seed=5, model="score_dependent")
    assert res.model == "score_dependent" and res.fit_method == "group_channels"
    np.testing.assert_array_equal(res.draws, ref.draws)
    assert (res.value, res.lower, res.upper) == (ref.value, ref.lower, ref.upper)
    # Other routes read one channel per item through the fit's groups: refused, naming the alternative.
    with pytest.raises(ValueError, match="channels per score group.*method='plugin'"):
        posterior_nc_ece(data, fit, method="latent")


def test_map_fit_clean_labels_and_loglik_use_each_items_group_channel(data, map_pair):
    fit, alt = map_pair
    prev = np.asarray(alt.draws["prevalence"]).reshape(-1)
    p, ll = _numpy_clean_posterior(data.labels, alt.group_index, alt.fpr_group[0], alt.tpr_group[0], prev)
    np.testing.assert_allclose(fit.clean_label_probability(data), p, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fit.log_likelihood(), ll, rtol=0, atol=1e-9)
    assert np.isclose(fit.loglik, ll.sum())
    # Negative control: the item-weighted average channel gives other clean-label posteriors.
    q, _ = _numpy_clean_posterior(data.labels, np.zeros(data.n_items, int), fit.channel.fpr[None],
                                  fit.channel.tpr[None], np.array([fit.prevalence.mean()]))
    assert np.max(np.abs(q - p)) > 1e-3


def test_label_posteriors_read_each_items_group_channel(data, map_pair):
    fit, alt = map_pair
    prev = np.asarray(alt.draws["prevalence"]).reshape(-1)
    p, _ = _numpy_clean_posterior(data.labels, alt.group_index, alt.fpr_group[0], alt.tpr_group[0], prev)
    np.testing.assert_allclose(item_posteriors(data, fit)["p_positive"].to_numpy(), p, rtol=0, atol=1e-12)
    issues = label_issues(data, fit)
    ann = annotation_posteriors(data, fit)
    assert issues.attrs["model"] == "score_dependent" and len(issues) == data.n_items
    ii, _, lab = (np.asarray(a) for a in data.responses)
    np.testing.assert_allclose(ann["p_wrong"].to_numpy(), np.where(lab == 1, 1 - p[ii], p[ii]), rtol=0, atol=1e-12)


def test_consumers_of_one_channel_refuse_a_group_channel_fit(data, map_pair):
    fit, _ = map_pair
    for call in (lambda f: corrected_accuracy(data, f, n_replicates=20, n_draws=10),
                 lambda f: clean_metrics(data, f, n_replicates=20, n_draws=10),
                 lambda f: plan_labels(data, f, budget=5), lambda f: gap_diagnostics(data, f)):
        with pytest.raises(ValueError, match="channels per score group"):
            call(fit)
    # Negative control: the shared-channel fit of the same data is accepted by the same calls.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shared = fit_em(data, groups=GROUPS)
        assert corrected_accuracy(data, shared, n_replicates=20, n_draws=10).accuracy >= 0
        gap_diagnostics(data, shared)
        PosteriorTemperature().fit(data, shared)


def _numpy_corrected(labels, group, fpr_g, tpr_g, w):
    """Corrected label of each item at its own group's channel, explicit annotator weights ``w`` renormalised over
    the annotators who labelled it, by a loop over items in plain NumPy."""
    out = np.empty(labels.shape[0])
    for i, (row, g) in enumerate(zip(labels, group)):
        obs = row >= 0
        out[i] = np.sum(w[obs] * (row[obs] - fpr_g[g, obs]) / (tpr_g[g, obs] - fpr_g[g, obs])) / w[obs].sum()
    return out


def test_corrected_labels_of_a_group_channel_fit_read_each_items_group_channel(data, map_pair):
    """Independent computation (a loop over items with the item's group channel) for equal and explicit weights, on
    the fitted items and on new items (the fit's score edges); IV weights per group equal the shared-channel route
    on that group's items at its channel; negative control: the average channel."""
    from noisycal_bayes import Channel
    from noisycal_bayes.reference.recalibration import corrected_item_labels

    fit, alt = map_pair
    f, t = alt.fpr_group[0], alt.tpr_group[0]
    for w in ("equal", np.array([1.0, 2.0, 3.0])):
        ref = _numpy_corrected(data.labels, alt.group_index, f, t, np.ones(3) if isinstance(w, str) else w)
        np.testing.assert_allclose(corrected_item_labels(data, fit, weights=w).values, ref, rtol=0, atol=1e-12)
    other = simulate_annotations(300, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.85], seed=11).data
    g_other = fit.groups.assign(other.scores)
    assert g_other.min() >= 0 and np.unique(g_other).size == fit.n_groups
    np.testing.assert_allclose(corrected_item_labels(other, fit, weights="equal").values,
                               _numpy_corrected(other.labels, g_other, f, t, np.ones(3)), rtol=0, atol=1e-12)
    iv = corrected_item_labels(data, fit, weights="iv").values
    for g in range(fit.n_groups):
        rows = np.flatnonzero(alt.group_index == g)
        shared = corrected_item_labels(data.subset(rows), Channel(f[g], t[g]), weights="iv").values
        np.testing.assert_allclose(iv[rows], shared, rtol=0, atol=1e-12)
    average = corrected_item_labels(data, fit.channel, weights="equal").values
    assert np.max(np.abs(average - corrected_item_labels(data, fit, weights="equal").values)) > 1e-2


def test_posterior_temperature_reads_each_items_group_channel(data, map_pair):
    """A MAP group-channel fit without the bootstrap: every draw is the corrected-loss temperature on the labels
    corrected at each item's group channel, i.e. the point map TemperatureScaling on those labels."""
    from noisycal_bayes.recalibration import TemperatureScaling
    from noisycal_bayes.reference.recalibration import corrected_item_labels

    fit, _ = map_pair
    pt = PosteriorTemperature(bootstrap=False, n_draws=4).fit(data, fit)
    point = TemperatureScaling().fit(data.scores, corrected_item_labels(data, fit))
    np.testing.assert_allclose(pt.temperature_draws_, point.temperature_, rtol=1e-6)
    average = TemperatureScaling().fit(data.scores, data, channel=fit.channel)
    assert abs(average.temperature_ - point.temperature_) > 1e-3   # negative control


def test_held_out_recalibration_follows_the_expansion_weights(data):
    """compare_recalibration after an expansion: all weight on shared is the comparison without one (same rows);
    stacked weights fit and judge on the weighted mixture of the shared EM's and the score-dependent MAP's corrected
    labels of each half (recomputed here from the two fits), and the rows name the models."""
    from types import SimpleNamespace

    from noisycal_bayes.evaluation.engines import Settings
    from noisycal_bayes.evaluation.recalibration import compare_recalibration
    from noisycal_bayes.reference.recalibration import corrected_item_labels, fit_temperature

    s = Settings(method="em", groups=GROUPS, n_starts=3, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = compare_recalibration(data, s, maps=("temperature",))
        same = compare_recalibration(data, s, maps=("temperature",),
                                     expansion=SimpleNamespace(weights={"shared": 1.0, "score_dependent": 0.0}))
        mixed = compare_recalibration(data, s, maps=("temperature",),
                                      expansion=SimpleNamespace(weights={"shared": 0.3, "score_dependent": 0.7}))
        perm = np.random.default_rng(1).permutation(data.n_items)
        halves = [data.subset(np.sort(perm[:200])), data.subset(np.sort(perm[200:]))]
        ch = fit_em(halves[0], groups=GROUPS, n_starts=3, seed=1).channel
        rich = fit_map(halves[0], model="score_dependent", groups=GROUPS, seed=1)
    assert same == plain
    y = [0.3 * corrected_item_labels(h, ch).values + 0.7 * corrected_item_labels(h, rich).values for h in halves]
    z = halves[1].scores
    edges = np.linspace(0, 1, 11)
    k = np.minimum(np.searchsorted(edges, z, side="right") - 1, 9)
    assert mixed[0].nc_ece == pytest.approx(np.abs(np.bincount(k, y[1] - z, 10)).sum() / z.size, rel=1e-9)
    assert mixed[1].fitted_to == "noisy labels, corrected (stacked channels: shared 0.30, score_dependent 0.70)"
    assert mixed[1].params == f"T = {fit_temperature(halves[0].scores, y[0]).temperature:.3f}"
    assert mixed[0].nc_ece != pytest.approx(plain[0].nc_ece, rel=1e-3)   # negative control: the labels moved


def test_registered_models_refuse_options_their_sampler_does_not_take(data):
    with pytest.raises(ValueError, match="target_accept.*cannot be set"):
        fit_nuts(data, model="score_dependent", target_accept=0.95)
    with pytest.raises(ValueError, match="`pooling` and `init` cannot be set"):
        fit_map(data, model="correlated", pooling="partial")


@pytest.mark.slow
def test_nuts_fit_equals_alternatives_draws_and_nc_ece(data):
    kw = dict(n_chains=2, n_warmup=100, n_draws=100, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_nuts(data, model="score_dependent", groups=GROUPS, progress_bar=False, **kw)
        alt = fit_alternative(data, "score_dependent", groups=GROUPS, method="nuts", **kw)
    assert fit.draws["fpr_group"].shape == (2, 100, fit.n_groups, data.n_annotators)
    np.testing.assert_array_equal(fit.group_channels[0], alt.fpr_group)
    np.testing.assert_array_equal(fit.group_channels[1], alt.tpr_group)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = posterior_nc_ece(data, fit, seed=2)
    ref = posterior_nc_ece_group_channels(data, alt.group_index, alt.fpr_group, alt.tpr_group, seed=2)
    np.testing.assert_array_equal(res.draws, ref.draws)
    prev = np.asarray(alt.draws["prevalence"]).reshape(200, -1)
    p = np.stack([_numpy_clean_posterior(data.labels, alt.group_index, alt.fpr_group[s], alt.tpr_group[s], prev[s])[0]
                  for s in range(0, 200, 40)])
    np.testing.assert_allclose(fit.clean_label_probability().reshape(200, -1)[::40], p, rtol=0, atol=1e-12)
    idata = fit.to_arviz()
    post = idata["posterior"] if not hasattr(idata, "posterior") else idata.posterior
    assert post["fpr_group"].dims == ("chain", "draw", "group", "annotator")
    assert fit.summary().loc["tpr_group[0, 1]", "r_hat"] > 0


@pytest.mark.slow
def test_correlated_map_fit_nc_ece_and_refused_clean_labels(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_map(data, model="correlated", groups=GROUPS, seed=0)
        alt = fit_alternative(data, "correlated", groups=GROUPS, method="map", seed=0)
    np.testing.assert_array_equal(fit.group_channels[0], alt.fpr_group)
    res = posterior_nc_ece(data, fit, n_draws=50, seed=0)
    rep = np.repeat(alt.fpr_group, 50, axis=0), np.repeat(alt.tpr_group, 50, axis=0)
    ref = posterior_nc_ece_group_channels(data, alt.group_index, *rep, seed=0)
    np.testing.assert_array_equal(res.draws, ref.draws)
    with pytest.raises(ValueError, match="correlated model.*item effect"):
        fit.clean_label_probability()


def test_sparse_item_rows_read_the_group_channels_as_the_patterns_do(data, map_pair):
    """The per-response route (repeated labels, very large crowds) against the compressed patterns, same fit."""
    from noisycal_bayes.labels._posterior import _item_rows, build_rows

    fit, _ = map_pair
    f, t = fit.group_channels
    params = {"fpr": f, "tpr": t, "prevalence": fit.point["prevalence"][None]}
    dense = build_rows(data, fit, "test")
    per_item = _item_rows(data, fit, "test")
    np.testing.assert_allclose(per_item.positive(params), dense.positive(params)[:, dense.inverse], rtol=0, atol=1e-10)
