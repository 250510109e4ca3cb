"""Model expansion of ``evaluate`` (issue 36, binary half): stacking weights, the group-channel propagation, the
entry rule on well-specified data, and strong score-dependent noise (noisycal_bayes/evaluation/expansion.py)."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes import evaluate, nc_ece
from noisycal_bayes.data import AnnotationSet, Binning
from noisycal_bayes.diagnostics.alternatives import stacking_weights
from noisycal_bayes.evaluation.expansion import mixture_summary
from noisycal_bayes.propagate import posterior_nc_ece
from noisycal_bayes.propagate.group_channels import posterior_nc_ece_group_channels
from noisycal_bayes.simulate import simulate_annotations


def _grouped_noise(n, seed, strength=1.0):
    """Calibration curve ``m(z) = z^1.5`` (population ECE 0.1000 on 10 equal-width bins) and channels that change
    across the 5 equal-mass score groups (the score-dependent model's own form): ``fpr`` 0.02 -> 0.28, ``fnr``
    0.30 -> 0.04 (times ``strength`` around their mean), per-annotator factors."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(size=n)
    y = rng.random(n) < z**1.5
    g = np.minimum((np.argsort(np.argsort(z)) * 5) // n, 4)
    f = np.array([0.02, 0.05, 0.10, 0.18, 0.28])
    r = np.array([0.30, 0.22, 0.15, 0.08, 0.04])
    f, r = f.mean() + strength * (f - f.mean()), r.mean() + strength * (r - r.mean())
    fpr = f[g][:, None] * np.array([1.0, 1.2, 0.8])
    fnr = r[g][:, None] * np.array([1.0, 0.8, 1.2])
    labels = (rng.random((n, 3)) < np.where(y[:, None], 1 - fnr, fpr)).astype(np.int8)
    return AnnotationSet.from_wide(labels, z)


#: Population binned ECE of m(z) = z^1.5 with uniform scores on 10 equal-width bins (numerical integral on a
#: 1e5-point grid; the curve is below the diagonal on every bin, so it is the integral of z - z^1.5 = 0.1).
TRUE_ECE = 0.1


def test_stacking_weights_match_arviz_compare():
    """Independent computation: ArviZ's compare(method="stacking") (scipy optimiser on its own LOO) against
    stacking_weights (EM fixed point) on the same pointwise LOO values."""
    az = pytest.importorskip("arviz")
    rng = np.random.default_rng(0)
    n, s = 300, 400
    y = rng.normal(0.3, 1.0, n)
    idatas, lpd = {}, []
    for name, (mu, sd) in {"a": (0.0, 1.0), "b": (0.5, 1.3), "c": (0.3, 0.7)}.items():
        mus = mu + 0.05 * rng.standard_normal(s)
        ll = -0.5 * ((y[None] - mus[:, None]) / sd) ** 2 - np.log(sd * np.sqrt(2 * np.pi))
        idata = az.from_dict(posterior={"mu": mus[None]}, log_likelihood={"y": ll[None]})
        idatas[name] = idata
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lpd.append(np.asarray(az.loo(idata, pointwise=True).loo_i))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = az.compare(idatas, method="stacking")["weight"]
    mine = stacking_weights(np.stack(lpd, axis=1))
    assert np.allclose(mine, [ref[k] for k in "abc"], atol=2e-3)
    assert mine.min() >= 0 and np.isclose(mine.sum(), 1)


def test_stacking_weights_compressed_rows_equal_expanded():
    rng = np.random.default_rng(1)
    lpd = rng.normal(-1, 0.5, (20, 2))
    counts = rng.integers(1, 6, 20)
    assert np.allclose(stacking_weights(lpd, counts), stacking_weights(np.repeat(lpd, counts, axis=0)), atol=1e-6)
    # A model better on every row takes all the weight.
    assert stacking_weights(np.stack([lpd[:, 0], lpd[:, 0] - 1], axis=1))[0] > 0.999


def test_group_channel_propagation_matches_posterior_nc_ece():
    """One channel in every group: the same point value as nc_ece (equal weights: exact) and, by the Gamma
    rescaling, the same unstratified bootstrap distribution as posterior_nc_ece (within Monte Carlo error)."""
    sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], curve="overconfident", seed=0)
    g = np.minimum((sim.data.scores * 4).astype(int), 3)
    f = np.tile(sim.channel.fpr, (2000, 4, 1))
    t = np.tile(sim.channel.tpr, (2000, 4, 1))
    mine = posterior_nc_ece_group_channels(sim.data, g, f, t, weights="equal", seed=1)
    ref = posterior_nc_ece(sim.data, sim.channel, weights="equal", n_draws=2000, seed=2)
    assert np.isclose(mine.value, nc_ece(sim.data, sim.channel, weights="equal").value)
    assert np.isclose(mine.debiased, ref.debiased, rtol=0.03)
    sd = np.std(ref.debiased_draws)
    assert abs(np.std(mine.debiased_draws) - sd) < 0.1 * sd  # a stratified bootstrap would be narrower
    assert abs(mine.lower - ref.lower) < 0.2 * sd and abs(mine.upper - ref.upper) < 0.2 * sd


def test_mixture_with_all_weight_on_one_model_is_that_model():
    sim = simulate_annotations(1500, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], curve="overconfident", seed=0)
    post = posterior_nc_ece(sim.data, sim.channel, n_draws=300)
    other = posterior_nc_ece(sim.data, sim.channel, n_draws=300, seed=5)
    m = mixture_summary({"shared": post, "score_dependent": other}, {"shared": 1.0, "score_dependent": 0.0}, 0.9)
    assert (m["value"], m["lower"], m["upper"]) == (post.value, post.lower, post.upper)
    assert m["draws"] is post.debiased_draws or np.array_equal(m["draws"], post.debiased_draws)


def test_well_specified_keeps_the_shared_headline_em():
    """Shared channels simulated: the entry rule keeps the weight on the shared model and the headline is
    today's (expand=False) exactly, with the comparison reported beside it."""
    sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], curve="overconfident", seed=3)
    kw = dict(method="em", n_boot=30, checks=False, groups=Binning.equal_mass(5), recalibration=True)
    on, off = evaluate(sim.data, expand=True, **kw), evaluate(sim.data, **kw)  # auto without checks: off
    assert off.expansion is None and off.headline_model == "shared"
    # The held-out recalibration follows the weights: all on the shared model, so the same table and text.
    assert on.recalibration == off.recalibration and on.recalibration[1].fitted_to == "noisy labels, corrected"
    assert on.to_dict()["recalibration_labels"]["model"] == "shared"
    assert on.headline_model == "shared" and on.expansion.weights == {"shared": 1.0, "score_dependent": 0.0}
    assert on.nc_ece == off.nc_ece and on.nc_ece_shared == off.nc_ece
    table = on.expansion.table.set_index("model")
    assert table.loc["score_dependent", "elpd_diff"] <= 2 * table.loc["score_dependent", "se_diff"]
    d = on.to_dict()
    assert d["headline_model"] == "shared" and d["model_expansion"]["weights"]["shared"] == 1.0
    assert set(off.to_dict()) < set(d)  # schema 2, additive: new keys only
    assert "Channel models compared by PSIS-LOO" in on.summary()


@pytest.mark.slow
def test_strong_score_dependent_noise_moves_the_headline_em():
    """Channels that change strongly across the score groups (``_grouped_noise``, seed 2): the data prefer the
    score-dependent model, it takes > 0.9 of the weight, and the headline interval covers the population ECE
    0.100 where the shared model's [0.1025, 0.1194] (measured) does not. About 25 s (EM, Laplace draws)."""
    data = _grouped_noise(10_000, 2)
    ev = evaluate(data, method="em", n_boot=50, recalibration=True)  # auto: the checks warn
    assert ev.expansion.weights["score_dependent"] > 0.9 and ev.headline_model == "stacking"
    assert ev.nc_ece.lower <= TRUE_ECE <= ev.nc_ece.upper
    assert not ev.nc_ece_shared.lower <= TRUE_ECE <= ev.nc_ece_shared.upper
    # The held-out recalibration follows the same models: its corrected rows, text and JSON name them.
    corrected = [r for r in ev.recalibration if r.fitted_to.startswith("noisy labels, corrected")]
    w = ev.expansion.weights
    assert len(corrected) == 3 and all(f"shared {w['shared']:.2f}, score_dependent {w['score_dependent']:.2f}"
                                       in r.fitted_to for r in corrected)
    labels = ev.to_dict()["recalibration_labels"]
    assert labels["model"] == "stacking" and labels["weights"]["score_dependent"] > 0.9
    assert "follow the headline's channel models" in ev.summary()


@pytest.mark.slow
def test_expansion_nuts_route():
    """NUTS route, both cases: shared data keep the shared headline (equal to expand=False); strong score-dependent
    noise gives the richer model the weight and an interval covering 0.100."""
    kw = dict(method="nuts", n_chains=2, n_warmup=300, n_draws=300, checks=False, expand=True)
    sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], curve="overconfident", seed=3)
    on, off = evaluate(sim.data, **kw), evaluate(sim.data, **dict(kw, expand=False))
    assert on.headline_model == "shared" and on.nc_ece == off.nc_ece
    ev = evaluate(_grouped_noise(10_000, 2), **kw)
    assert ev.expansion.weights["score_dependent"] > 0.9
    assert ev.nc_ece.lower <= TRUE_ECE <= ev.nc_ece.upper


# ============================================================================================ K classes
from noisycal_bayes.core import top_label_ece  # noqa: E402
from noisycal_bayes.data import MulticlassAnnotationSet  # noqa: E402
from noisycal_bayes.evaluation import evaluate_multiclass  # noqa: E402
from noisycal_bayes.evaluation.expansion import (_k_row_loglik, _k_rows, confidence_strata,  # noqa: E402
                                                 stratified_annotators)
from noisycal_bayes.simulate import simulate_multiclass  # noqa: E402


def _confidence_noise(n, seed, k=3, lo=0.35, hi=0.95):
    """Every annotator right with probability ``lo + (hi - lo) * rank(confidence)``, else a uniform other class:
    confusion matrices that change with the classifier's confidence."""
    sim = simulate_multiclass(n, 3, k, accuracy=0.8, seed=seed)
    rng = np.random.default_rng(seed + 7)
    item = np.asarray(sim.item)
    y = np.asarray(sim.y)[item]
    rank = np.argsort(np.argsort(sim.probs.max(axis=1))) / (n - 1)
    right = rng.random(item.size) < lo + (hi - lo) * rank[item]
    label = np.where(right, y, (y + rng.integers(1, k, item.size)) % k)
    return sim, MulticlassAnnotationSet.from_responses(item, sim.annotator, label, n_classes=k, probs=sim.probs)


def test_k_row_loglik_equals_a_direct_sum_per_item():
    """Independent implementation: loops over items, classes and responses (with repeated labels and a missing
    annotator), each item's row value at each draw."""
    rng = np.random.default_rng(3)
    n, j, k, d = 40, 3, 3, 4
    item = np.r_[np.repeat(np.arange(n), 2), np.arange(0, n, 5)]
    ann = np.r_[np.tile([0, 1], n), np.full(n // 5, 0)]   # annotator 2 absent; items 0, 5, ... labelled twice by 0
    lab = rng.integers(0, k, item.size)
    probs = rng.dirichlet(np.ones(k), n)
    data = MulticlassAnnotationSet.from_responses(item, ann, lab, n_classes=k, n_annotators=2, probs=probs)
    groups = rng.integers(0, 2, n)
    stratum = confidence_strata(probs, 2)
    conf = rng.dirichlet(np.ones(k), (d, j * 2, k))
    prev = rng.dirichlet(np.ones(k), (d, 2))
    amap = np.arange(4).reshape(2, 2)
    first, counts, rows = _k_rows(data, groups, stratum)
    got = _k_row_loglik(rows, groups[first], stratum[first], conf, prev, amap, chunk=3)
    assert counts.sum() == n and got.shape == (d, first.size)
    for r, i in enumerate(first):
        for dd in range(d):
            mine = [(a, b) for it, a, b in zip(item, ann, lab) if it == i]
            p = sum(prev[dd, groups[i], y] * np.prod([conf[dd, amap[a, stratum[i]], y, b] for a, b in mine])
                    for y in range(k))
            assert got[dd, r] == pytest.approx(np.log(p), rel=1e-12)


def test_one_stratum_is_the_shared_model():
    sim = simulate_multiclass(600, 3, 3, seed=4)
    virt, pairs = stratified_annotators(sim.data, np.zeros(600, dtype=np.int64))
    assert virt.n_annotators == 3 and pairs.tolist() == [[0, 0], [1, 0], [2, 0]]
    a = evaluate_multiclass(sim.data, n_boot=0, checks=False, groups=2)
    b = evaluate_multiclass(virt, n_boot=0, checks=False, groups=2)
    np.testing.assert_allclose(a.confusion, b.confusion, rtol=0, atol=1e-12)
    assert a.nc_ece.value == b.nc_ece.value


def test_k_expansion_well_specified_keeps_the_shared_headline():
    sim = simulate_multiclass(1500, 3, 3, accuracy=0.8, seed=1)
    off = evaluate_multiclass(sim.data, n_boot=20, checks=False, expand=False)
    on = evaluate_multiclass(sim.data, n_boot=20, checks=False, expand=True)
    assert off.expansion is None and on.expansion is not None
    assert on.expansion.weights == {"shared": 1.0, "score_dependent": 0.0} and on.expansion.headline == "shared"
    assert (on.nc_ece.value, on.nc_ece.lower, on.nc_ece.upper) == (off.nc_ece.value, off.nc_ece.lower,
                                                                     off.nc_ece.upper)
    payload = json.loads(on.to_json())
    assert payload["headline_model"] == "shared" and len(payload["model_expansion"]["models"]) == 2
    assert "Channel models compared by PSIS-LOO" in on.summary()


@pytest.mark.slow
def test_k_expansion_confidence_dependent_noise_moves_the_headline():
    """Negative control for the entry rule: confusion that changes with confidence must bring the stratified model
    in, and the headline must move towards the oracle top-label ECE of the simulated clean labels."""
    sim, data = _confidence_noise(3000, 2)
    oracle = top_label_ece(sim.probs, np.eye(3)[np.asarray(sim.y)], bins=15).value
    ev = evaluate_multiclass(data, n_boot=30, checks=False, expand=True)
    assert ev.expansion.weights["score_dependent"] > 0.5, ev.expansion.rule
    assert abs(ev.nc_ece.value - oracle) < abs(ev.nc_ece_shared.value - oracle)
    assert ev.nc_ece.lower <= oracle <= ev.nc_ece.upper
    assert "confusion models stacked by PSIS-LOO" in ev.summary()


def test_k_expansion_skipped_on_a_pooled_crowd_with_a_warning():
    data = simulate_multiclass(300, 30, 3, labels_per_item=3, seed=0).data   # 30 annotators: a crowd
    ev = evaluate_multiclass(data, n_boot=5, checks=False, expand=True)
    assert ev.expansion is None
    assert any("model expansion skipped" in w for w in ev.warnings)


def test_richer_models_refuse_gold_labels_and_the_expansion_says_why():
    """The score-dependent model's compressed rows hold no gold label: fit_map / fit_nuts / fit_alternative refuse
    gold-labelled data by name (before, the gold labels were dropped silently), and evaluate's expansion is skipped
    with a warning naming them; the same data without gold are fitted (negative control)."""
    from noisycal_bayes.data import AnnotationSet
    from noisycal_bayes.inference import fit_map, fit_nuts
    from noisycal_bayes.inference.alternatives import fit_alternative

    sim = simulate_annotations(600, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], curve="overconfident", seed=5)
    gold = np.full(sim.data.n_items, -1)
    gold[:9] = sim.clean_labels[:9]
    data = AnnotationSet.from_wide(sim.data.labels, sim.data.scores, gold=gold)
    for fit in (lambda: fit_map(data, model="score_dependent"), lambda: fit_nuts(data, model="score_dependent"),
                lambda: fit_alternative(data, "shared", method="map")):
        with pytest.raises(ValueError, match="these data have 9 gold labels"):
            fit()
    kw = dict(method="em", n_boot=10, checks=False, groups=Binning.equal_mass(5), expand=True)
    ev = evaluate(data, **kw)
    assert ev.expansion is None and ev.headline_model == "shared"
    assert any("model expansion skipped: these data have 9 gold labels" in w for w in ev.warnings)
    from noisycal_bayes.inference.alternatives import check_row_data

    assert check_row_data(sim.data, "fit_map", "score_dependent") is None
    with pytest.raises(ValueError, match="repeated"):
        check_row_data(AnnotationSet.from_long(pd.concat([sim.data.to_long()] * 2)), "fit_map", "score_dependent")
