"""Model expansion of ``evaluate`` (issue 36, binary half): stacking weights, the group-channel propagation, the
entry rule on well-specified data, and strong score-dependent noise (noisycal_bayes/evaluation/expansion.py)."""
from __future__ import annotations

import warnings

import numpy as np
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
    kw = dict(method="em", n_boot=30, checks=False, groups=Binning.equal_mass(5))
    on, off = evaluate(sim.data, expand=True, **kw), evaluate(sim.data, **kw)  # auto without checks: off
    assert off.expansion is None and off.headline_model == "shared"
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
    ev = evaluate(data, method="em", n_boot=50)  # auto: the checks warn
    assert ev.expansion.weights["score_dependent"] > 0.9 and ev.headline_model == "stacking"
    assert ev.nc_ece.lower <= TRUE_ECE <= ev.nc_ece.upper
    assert not ev.nc_ece_shared.lower <= TRUE_ECE <= ev.nc_ece_shared.upper


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
