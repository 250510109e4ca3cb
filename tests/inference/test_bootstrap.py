"""bootstrap_em: layout of the replicates, agreement with an independent NumPy weighted EM, invariances, errors."""
import dataclasses
import warnings

import numpy as np
import pytest

from noisycal_bayes import Binning, simulate_annotations
from noisycal_bayes.data import AnnotationSet, SufficientStats
from noisycal_bayes.inference import fit_em
from noisycal_bayes.inference.bootstrap import START_CLIP, _bootstrap, bootstrap_em, item_weights
from noisycal_bayes.propagate import posterior_nc_ece
from noisycal_bayes.warnings import ConvergenceWarning

FPR, TPR = [0.10, 0.20, 0.15], [0.85, 0.80, 0.90]


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(1500, fpr=FPR, tpr=TPR, curve="overconfident", seed=3)


@pytest.fixture(scope="module")
def fit(sim):
    return fit_em(sim.data, model="grouped", groups=Binning.equal_mass(5), n_starts=3, seed=0)


@pytest.fixture(scope="module")
def boot(sim, fit):
    return bootstrap_em(sim.data, fit, n_boot=60, seed=7)


def numpy_weighted_em(labels, group, n_groups, weights, fpr, tpr, prev, *, tol=1e-13, max_iter=20000):
    """Weighted EM item by item (no pattern compression, no JAX): maximises sum_i w_i log P(A_i | g_i)."""
    obs, pos = labels >= 0, labels == 1
    for _ in range(max_iter):
        # E-step: log P(A_i | Y = y) summed over the observed annotators, then Bayes' rule with pi_{g(i)}.
        l1 = np.where(obs, np.where(pos, np.log(tpr), np.log1p(-tpr)), 0.0).sum(axis=1)
        l0 = np.where(obs, np.where(pos, np.log(fpr), np.log1p(-fpr)), 0.0).sum(axis=1)
        d = np.log(prev[group]) + l1 - np.log1p(-prev[group]) - l0
        t = 1.0 / (1.0 + np.exp(-d))
        # M-step with item weights: weighted frequencies.
        w1, w0 = weights * t, weights * (1 - t)
        new_tpr = (w1 @ pos) / (w1 @ obs)
        new_fpr = (w0 @ pos) / (w0 @ obs)
        new_prev = np.bincount(group, weights=w1, minlength=n_groups) / np.bincount(group, weights=weights,
                                                                                    minlength=n_groups)
        step = max(np.abs(new_fpr - fpr).max(), np.abs(new_tpr - tpr).max(), np.abs(new_prev - prev).max())
        fpr, tpr, prev = new_fpr, new_tpr, new_prev
        if step < tol:
            break
    return fpr, tpr, prev


def test_draws_are_shaped_like_one_nuts_chain(boot, fit):
    j, g = fit.inputs.n_annotators, fit.groups.n_groups
    assert boot.method == "em_bootstrap" and boot.model == fit.model
    assert list(boot.draws) == ["fpr", "tpr", "gap", "u", "prevalence"]
    for name in ("fpr", "tpr", "gap", "u"):
        assert boot.draws[name].shape == (1, 60, j)
    assert boot.draws["prevalence"].shape == (1, 60, g)
    assert boot.n_chains == 1 and boot.n_draws == 60
    np.testing.assert_allclose(boot.draws["gap"], boot.draws["tpr"] - boot.draws["fpr"], atol=1e-15)
    np.testing.assert_allclose(boot.draws["u"], boot.draws["gap"] / (1 - boot.draws["fpr"]), atol=1e-15)
    # The point estimate and the channel are the full-data EM fit's.
    assert boot.point is fit.point and boot.channel is fit.channel and boot.groups is fit.groups
    assert boot.details["n_boot"] == 60 and boot.details["n_failed"] == 0 and boot.details["em_fit"] is fit
    assert boot.details["n_exchanged"] == 0
    assert boot.sample_stats["n_iter"].shape == (1, 60) and (boot.sample_stats["n_iter"] >= 1).all()


def test_summary_and_arviz_read_the_replicates(boot):
    table = boot.summary()
    np.testing.assert_allclose(table.loc["gap[0]", "mean"], boot.draws["gap"][0, :, 0].mean())
    idata = boot.to_arviz(log_likelihood=False)
    assert idata["posterior"]["gap"].shape == (1, 60, 3)


def test_dawid_skene_prevalence_is_a_scalar_per_draw(sim):
    fit = fit_em(sim.data, model="dawid_skene", n_starts=3)
    boot = bootstrap_em(sim.data, fit, n_boot=5, seed=0)
    assert boot.draws["prevalence"].shape == (1, 5)
    assert boot.prevalence.shape == (1,)


def test_replicate_equals_an_independent_weighted_em(sim, fit, boot):
    # Same weights (the generator bootstrap_em uses, replicate 0) fed to a per-item NumPy EM from the same
    # clipped warm start. bootstrap_em stops when a step is <= tol = 1e-8; EM converges linearly with rate
    # r < 1, so its distance to the fixed point is <= 1e-8 * r / (1 - r): below 1e-6 for r <= 0.99.
    w = next(item_weights(7, 60, sim.data.n_items))
    clip = lambda a: np.clip(np.asarray(a, float), START_CLIP, 1 - START_CLIP)  # noqa: E731
    fpr, tpr, prev = numpy_weighted_em(sim.data.labels, fit.groups.index, fit.groups.n_groups, w,
                                       clip(fit.point["fpr"]), clip(fit.point["tpr"]), clip(fit.point["prevalence"]))
    np.testing.assert_allclose(boot.draws["fpr"][0, 0], fpr, atol=1e-6)
    np.testing.assert_allclose(boot.draws["tpr"][0, 0], tpr, atol=1e-6)
    np.testing.assert_allclose(boot.draws["prevalence"][0, 0], prev, atol=1e-6)
    # And the replicate really moved: weights change the estimate by about its standard error (~0.02).
    assert np.abs(fpr - fit.point["fpr"]).max() > 1e-3


def test_item_weights_are_flat_dirichlet(sim):
    # Dirichlet(1,...,1) scaled by n: mean 1 and variance (n - 1) / (n + 1) per weight, sum exactly n.
    w = np.stack(list(item_weights(0, 20, 500)))
    np.testing.assert_allclose(w.sum(axis=1), 500.0, rtol=1e-12)
    # 10,000 weights with sd ~1: 5 standard errors of the mean (0.01) and of the variance (~0.02).
    assert abs(w.mean() - 1) < 1e-12 and abs(w.var() - 499 / 501) < 5 * np.sqrt(8 / w.size)


def test_equal_weights_reproduce_the_full_data_fit(sim, fit):
    # A degenerate Dirichlet (all weights 1) gives the original counts: the refit from the warm start is the
    # full-data fixed point again, up to EM's stopping tolerance (see the bound in the test above).
    res = _bootstrap(fit, [np.ones(sim.data.n_items)] * 3, 3, settings={})
    for name in ("fpr", "tpr", "prevalence"):
        np.testing.assert_allclose(res.draws[name][0], np.broadcast_to(fit.point[name], (3,) + fit.point[name].shape),
                                   atol=1e-6)


def test_determinism_by_seed(sim, fit, boot):
    again = bootstrap_em(sim.data, fit, n_boot=60, seed=7)
    other = bootstrap_em(sim.data, fit, n_boot=60, seed=8)
    for name in boot.draws:
        np.testing.assert_array_equal(again.draws[name], boot.draws[name])
    assert not np.allclose(other.draws["gap"], boot.draws["gap"])


def test_plugin_nc_ece_reads_the_replicates_as_draws(sim, fit, boot):
    bins = Binning.equal_width(10)
    res = posterior_nc_ece(sim.data, boot, bins=bins, weights="iv", level=0.9, seed=0)
    assert res.fit_method == "em_bootstrap" and res.draws.shape == (60,)
    assert res.lower <= res.debiased <= res.upper
    # Without the item bootstrap only the channels vary: one value per replicate (60 distinct values), where
    # the channels held at the EM estimate give a single point.
    channels_only = posterior_nc_ece(sim.data, boot, bins=bins, weights="iv", bootstrap=False, seed=0)
    fixed = posterior_nc_ece(sim.data, fit, bins=bins, weights="iv", bootstrap=False, n_draws=5, seed=0)
    assert np.unique(np.round(channels_only.draws, 12)).size == 60 and np.std(channels_only.draws) > 1e-3
    assert np.ptp(fixed.draws) == 0


def test_near_perfect_annotators_and_a_confident_classifier():
    # Issue 16: rates near 0 / 1 and group prevalences near 0 / 1 used to break the warm start.
    sim = simulate_annotations(2000, fpr=[0.002] * 3, tpr=[0.99] * 3, curve="calibrated", score_beta=(0.1, 0.1),
                               seed=5)
    fit = fit_em(sim.data, groups=Binning.equal_mass(5), n_starts=3)
    assert fit.channel is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        boot = bootstrap_em(sim.data, fit, n_boot=40, seed=0)
    assert boot.details["n_failed"] == 0 and np.all(np.isfinite(boot.draws["gap"]))
    assert np.all(boot.draws["gap"] > 0.9) and boot.details["n_exchanged"] == 0


def test_failed_replicates_are_dropped_counted_and_warned(sim, fit):
    # min_gap at the middle annotator's fitted gap: about half the replicates fall below it and fail the screen.
    screen = dataclasses.replace(fit, settings={**fit.settings, "min_gap": float(fit.point["gap"].min())})
    with pytest.warns(ConvergenceWarning, match="replicates failed and were dropped"):
        res = bootstrap_em(sim.data, screen, n_boot=40, seed=0)
    n_failed = res.details["n_failed"]
    assert 0 < n_failed < 40 and res.draws["gap"].shape == (1, 40 - n_failed, 3)
    assert set(res.details["failed"].values()) == {f"gap <= min_gap={screen.settings['min_gap']}"}
    assert not res.converged
    never = dataclasses.replace(fit, settings={**fit.settings, "min_gap": 0.99})
    with pytest.raises(ValueError, match="all 5 replicates failed"):
        bootstrap_em(sim.data, never, n_boot=5, seed=0)


@pytest.mark.parametrize("path", ["patterns", "sparse"])
def test_unconverged_replicates_are_kept_counted_and_warned(sim, path, monkeypatch):
    # fit_em's contract for non-convergence: a replicate stopped by max_iter at a finite, screened point is kept at
    # its last iterate (here every replicate: a 2-iteration budget and tol=1e-14 from the warm start).
    from noisycal_bayes.inference import bootstrap as bootstrap_module

    fit = fit_em(sim.data, model="grouped", groups=Binning.equal_mass(5), n_starts=3, seed=0, path=path)
    monkeypatch.setattr(bootstrap_module, "REPLICATEMAX_ITER", 2)
    slow = dataclasses.replace(fit, settings={**fit.settings, "max_iter": 2, "tol": 1e-14})
    with pytest.warns(ConvergenceWarning, match="5 of 5 replicates did not converge within max_iter=2"):
        res = bootstrap_em(sim.data, slow, n_boot=5, seed=0)
    assert res.details["n_unconverged"] == 5 and res.details["n_failed"] == 0 and not res.converged
    assert res.draws["gap"].shape == (1, 5, 3) and np.all(np.isfinite(res.draws["gap"]))
    np.testing.assert_array_equal(res.details["n_iter"], 2)


def test_error_paths(sim, fit):
    with pytest.raises(ValueError, match="must be a FitResult from fit_em"):
        bootstrap_em(sim.data, sim.channel)
    with pytest.raises(ValueError, match="must be an EM fit"):
        bootstrap_em(sim.data, dataclasses.replace(fit, method="nuts"))
    with pytest.raises(ValueError, match="no estimate"):
        bootstrap_em(sim.data, dataclasses.replace(fit, channel=None, point={}, reason="all starts failed"))
    with pytest.raises(ValueError, match="closed-form EM"):
        bootstrap_em(sim.data, dataclasses.replace(fit, model="platt"))
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="n_boot"):
            bootstrap_em(sim.data, fit, n_boot=bad)
    with pytest.raises(ValueError, match="must be the AnnotationSet"):
        bootstrap_em(sim.data.labels, fit)
    other = simulate_annotations(1000, fpr=FPR, tpr=TPR, seed=4)
    with pytest.raises(ValueError, match="1500 items x 3 annotators"):
        bootstrap_em(other.data, fit)
    labels = sim.data.labels.copy()
    labels[[2, 9], 0] = 1 - np.maximum(labels[[2, 9], 0], 0)
    changed = AnnotationSet.from_wide(labels, scores=sim.data.scores)
    with pytest.raises(ValueError, match=r"differ from the fitted ones at items \[2, 9\]"):
        bootstrap_em(changed, fit)
    stats = SufficientStats.from_annotations(sim.data, bins=Binning.equal_width(5))
    stats_fit = fit_em(stats, model="histogram", groups=None, n_starts=3)
    with pytest.raises(ValueError, match="SufficientStats"):
        bootstrap_em(sim.data, stats_fit)
