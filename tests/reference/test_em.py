"""Tests for noisycal_bayes/reference/em.py (Dawid-Skene EM, marginal and score-grouped)."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

from noisycal_bayes.core import ds_loglik, em_step, x64
from noisycal_bayes import fit_em as fit_em_vectorised
from noisycal_bayes.data import AnnotationSet, Binning, compress_patterns
from noisycal_bayes.models import Prior
from noisycal_bayes.models.result import FitResult
from noisycal_bayes.reference.closed_form import closed_form_two_groups
from noisycal_bayes.reference.em import em_starts, fit_em
from noisycal_bayes.reference.moments import moment_start, moments_three
from noisycal_bayes.simulate import simulate_annotations
from noisycal_bayes.warnings import ConvergenceWarning, IdentifiabilityWarning, SmallGapWarning

from ._channel_helpers import pattern_probabilities, population_data


def _quiet_fit(data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentifiabilityWarning)
        return fit_em(data, **kw)


# ----------------------------------------------------------------------------------------------- starts
def test_em_starts_follow_documented_recipe():
    fpr, tpr, prev = em_starts(3, 2, 5, 42)
    rng = np.random.default_rng(42)
    np.testing.assert_array_equal(fpr, rng.uniform(0.05, 0.45, (5, 3)))
    np.testing.assert_array_equal(tpr, rng.uniform(0.55, 0.95, (5, 3)))
    np.testing.assert_array_equal(prev, rng.uniform(0.2, 0.8, (5, 2)))
    assert (fpr < 0.5).all() and (tpr > 0.5).all()


def test_fit_is_deterministic_and_explicit_starts_reproduce_it():
    sim = simulate_annotations(1000, fpr=[0.1, 0.2], tpr=[0.9, 0.7], seed=1)
    a = fit_em(sim.data, groups=Binning.equal_mass(3), n_starts=4, seed=7)
    b = fit_em(sim.data, groups=Binning.equal_mass(3), n_starts=4, seed=7)
    c = fit_em(sim.data, groups=Binning.equal_mass(3), starts=em_starts(2, 3, 4, 7))  # two annotators: no moment start
    for other in (b, c):
        np.testing.assert_array_equal(other.channel.fpr, a.channel.fpr)
        np.testing.assert_array_equal(other.prevalence, a.prevalence)
        np.testing.assert_array_equal(other.start_logliks, a.start_logliks)
        assert other.selected_start == a.selected_start and other.n_iter == a.n_iter


def test_moment_start_is_not_added_but_can_be_passed():
    # One EM contract (issue 15): neither EM adds the moment start by itself; stacking moment_start under
    # the random starts reproduces the old reference behaviour (the moment start got index n_starts).
    sim = simulate_annotations(1000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=2)
    est = fit_em(sim.data, model="dawid_skene", n_starts=3)
    assert est.start_logliks.shape == (3,)
    ms = moment_start(sim.data)
    starts = tuple(np.vstack([r, m]) for r, m in zip(em_starts(3, 1, 3, 0), ms))
    with_ms = fit_em(sim.data, model="dawid_skene", starts=starts)
    assert with_ms.start_logliks.shape == (4,)
    np.testing.assert_allclose(with_ms.start_logliks[:3], est.start_logliks, rtol=1e-12)


# ----------------------------------------------------------------------------------------------- EM algebra
@pytest.mark.parametrize("case", ["marginal3", "grouped2_missing", "map4"])
def test_loglik_trace_is_monotone(case):
    if case == "marginal3":
        sim = simulate_annotations(1500, fpr=[0.1, 0.3, 0.2], tpr=[0.8, 0.7, 0.9], seed=3)
        est = fit_em(sim.data, model="dawid_skene", n_starts=2)
    elif case == "grouped2_missing":
        sim = simulate_annotations(1500, fpr=[0.2, 0.1], tpr=[0.7, 0.9], missing=0.2, seed=4)
        est = fit_em(sim.data, groups=Binning.equal_mass(3), n_starts=2)
    else:
        sim = simulate_annotations(800, fpr=[0.1, 0.3, 0.2, 0.1], tpr=[0.8, 0.7, 0.9, 0.6], seed=5)
        with pytest.warns(DeprecationWarning, match="tuple of Beta pairs"):
            est = fit_em(sim.data, groups=Binning.equal_mass(2), n_starts=2, prior=((2, 5), (5, 2), (2, 2)))
    trace = est.loglik_trace
    assert trace.size == est.n_iter + 1 and est.n_iter > 3
    # EM never decreases its objective; 1e-10 allows for rounding of a sum of O(100) float64 terms.
    assert np.all(np.diff(trace) >= -1e-10), np.diff(trace).min()


def test_estimate_is_a_fixed_point_and_loglik_is_reported():
    sim = simulate_annotations(1500, fpr=[0.1, 0.3, 0.2], tpr=[0.8, 0.7, 0.9], seed=6)
    prior = ((2.0, 5.0), (5.0, 2.0), (2.0, 2.0))
    for kw in ({}, {"prior": prior}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the tuple prior (checked in test_deprecated_forms)
            est = fit_em(sim.data, groups=Binning.equal_mass(2), tol=1e-12, max_iter=20000, n_starts=1, **kw)
        group = Binning.equal_mass(2).assign(sim.data.scores)
        pc = compress_patterns(sim.data.labels, group, 2)
        with x64():
            step = jax.jit(em_step, static_argnums=(3, 7))  # compiled once instead of per primitive
            f, t, p = step(pc.patterns, pc.group, pc.counts, 2, est.channel.fpr, est.channel.tpr, est.prevalence,
                           kw.get("prior"))
            ll = float(jax.jit(ds_loglik)(pc.patterns, pc.group, pc.counts, est.channel.fpr, est.channel.tpr,
                                          est.prevalence))
        np.testing.assert_allclose(np.concatenate([f, t, p]),
                                   np.concatenate([est.channel.fpr, est.channel.tpr, est.prevalence]), atol=1e-9)
        np.testing.assert_allclose(est.loglik, ll, rtol=1e-12)


def test_population_frequencies_give_exact_parameters():
    # When the data's (group, pattern) frequencies are exactly the model's, the truth maximises the
    # likelihood (it reproduces every frequency), so EM must return it.
    fpr, tpr, prev = [0.1, 0.2, 0.3], [0.9, 0.7, 0.8], [0.2, 0.7]
    data, groups = population_data(fpr, tpr, prev, 10**4)
    est = fit_em(data, groups=groups, tol=1e-13, max_iter=20000, n_starts=3)
    np.testing.assert_allclose(est.channel.fpr, fpr, atol=1e-7)
    np.testing.assert_allclose(est.channel.tpr, tpr, atol=1e-7)
    np.testing.assert_allclose(est.prevalence, prev, atol=1e-7)


# ----------------------------------------------------------------------------------------------- independent routes
@pytest.mark.parametrize("seed", [8, 9])
def test_two_groups_em_equals_closed_form(seed):
    # Two annotators x two groups is exactly identified (6 cell probabilities, 6 parameters): the MLE
    # reproduces the empirical frequencies, so it solves the same plug-in moment equations as the closed
    # form. Agreement is limited only by EM's stopping rule.
    sim = simulate_annotations(3000, fpr=[0.15, 0.25], tpr=[0.85, 0.75], seed=seed)
    cf = closed_form_two_groups(sim.data, Binning.equal_mass(2))
    est = fit_em(sim.data, groups=Binning.equal_mass(2), tol=1e-13, max_iter=20000, n_starts=2)
    assert cf.identified and est.identified
    np.testing.assert_allclose(est.channel.fpr, cf.channel.fpr, atol=1e-7)
    np.testing.assert_allclose(est.channel.tpr, cf.channel.tpr, atol=1e-7)
    np.testing.assert_allclose(est.prevalence, cf.prevalence, atol=1e-7)


def test_three_annotator_marginal_em_equals_moments():
    # Three annotators, marginal model: 7 free pattern probabilities, 7 parameters; exactly identified,
    # so the MLE and the plug-in moment solution coincide.
    sim = simulate_annotations(3000, fpr=[0.1, 0.3, 0.2], tpr=[0.8, 0.7, 0.9], seed=10)
    mo = moments_three(sim.data)
    est = fit_em(sim.data, model="dawid_skene", tol=1e-13, max_iter=20000, n_starts=2)
    np.testing.assert_allclose(est.channel.fpr, mo.channel.fpr, atol=1e-7)
    np.testing.assert_allclose(est.channel.tpr, mo.channel.tpr, atol=1e-7)
    np.testing.assert_allclose(est.prevalence, mo.prevalence, atol=1e-7)


@pytest.mark.statistical
def test_recovers_simulated_channels_within_fisher_standard_errors():
    # Truth vs estimate with se from the observed Fisher information (Hessian of the compressed
    # log-likelihood at the estimate). False-alarm rate: alpha = 1e-3 for the whole family of K = 2J + G
    # parameters, Bonferroni z = Phi^{-1}(1 - alpha / (2K)); under asymptotic normality this test fails
    # with probability <= 1e-3 over the simulation seed. A larger-than-z deviation means a biased EM.
    fpr, tpr = np.array([0.1, 0.25, 0.05, 0.2]), np.array([0.85, 0.7, 0.8, 0.95])
    sim = simulate_annotations(3000, fpr=fpr, tpr=tpr, missing=0.2, seed=21)
    groups = Binning.equal_width(3)
    est = fit_em(sim.data, groups=groups, n_starts=3)
    group = groups.assign(sim.data.scores)
    true_prev = np.array([sim.true_probability[group == g].mean() for g in range(3)])  # conditional target
    pc = compress_patterns(sim.data.labels, group, 3)
    J = fpr.size
    with x64():
        def ll(theta):
            return ds_loglik(pc.patterns, pc.group, pc.counts, theta[:J], theta[J:2 * J], theta[2 * J:])
        theta = jnp.asarray(np.concatenate([est.channel.fpr, est.channel.tpr, est.prevalence]))
        hess = np.asarray(jax.jit(jax.hessian(ll))(theta))
    se = np.sqrt(np.diag(np.linalg.inv(-hess)))
    K = theta.size
    z = norm.ppf(1 - 1e-3 / (2 * K))
    truth = np.concatenate([fpr, tpr, true_prev])
    dev = np.abs(np.asarray(theta) - truth) / se
    assert np.all(dev < z), (dev, z)
    # The test has power: the labels-exchanged truth is many standard errors away.
    wrong = np.concatenate([1 - tpr, 1 - fpr, 1 - true_prev])
    assert np.max(np.abs(np.asarray(theta) - wrong) / se) > 10 * z


# ----------------------------------------------------------------------------------------------- identification (§D.1)
def _joint_probabilities(mu, fpr, tpr):
    """P(A1, A2) for patterns (1,1), (1,0), (0,1), (0,0), written out from the model (independent route)."""
    out = []
    for a1, a2 in [(1, 1), (1, 0), (0, 1), (0, 0)]:
        p1 = (tpr[0] if a1 else 1 - tpr[0]) * (tpr[1] if a2 else 1 - tpr[1])
        p0 = (fpr[0] if a1 else 1 - fpr[0]) * (fpr[1] if a2 else 1 - fpr[1])
        out.append(mu * p1 + (1 - mu) * p0)
    return np.array(out)


def test_paper_d1_two_annotators_without_scores_not_identified():
    # Paper §D.1: joint probabilities (0.31, 0.19, 0.19, 0.31) arise from different positively oriented
    # channels. Both solutions below have marginals 0.5 and covariance gap_1 gap_2 mu (1 - mu) = 0.06.
    target = np.array([0.31, 0.19, 0.19, 0.31])
    sol_a = (0.5, np.array([0.2, 0.3]), np.array([0.8, 0.7]))  # gaps 0.6 and 0.4
    sol_b = (0.5, np.array([0.1, 0.35]), np.array([0.9, 0.65]))  # gaps 0.8 and 0.3
    s = np.sqrt(0.06 / 0.16)  # mu = 0.2, equal gaps: gap^2 * 0.16 = 0.06
    sol_c = (0.2, np.array([0.5 - 0.2 * s] * 2), np.array([0.5 + 0.8 * s] * 2))
    for mu, f, t in (sol_a, sol_b, sol_c):
        assert np.all(t > f)
        np.testing.assert_allclose(_joint_probabilities(mu, f, t), target, atol=1e-15)
    assert not np.allclose(sol_a[1], sol_b[1])

    # Data with exactly these frequencies: every solution attains the maximum likelihood n sum p log p.
    rows = [[1, 1]] * 31 + [[1, 0]] * 19 + [[0, 1]] * 19 + [[0, 0]] * 31
    data = AnnotationSet.from_wide(np.array(rows * 10))
    with pytest.warns(IdentifiabilityWarning, match=r"§D.1"):
        est = fit_em(data, model="dawid_skene", n_starts=4)
    assert not est.identified and est.channel is not None and "§D.1" in est.reason
    with pytest.raises(ValueError, match="not identified"):
        est.require()
    max_ll = 1000 * np.sum(target * np.log(target))
    pc = compress_patterns(data.labels)
    with x64():
        for mu, f, t in (sol_a, sol_b, sol_c):
            ll = float(jax.jit(ds_loglik)(pc.patterns, pc.group, pc.counts, f, t, np.array([mu])))
            np.testing.assert_allclose(ll, max_ll, rtol=1e-12)
    np.testing.assert_allclose(est.loglik, max_ll, rtol=1e-9)
    # And EM itself lands on different channels from different starts, at the same likelihood.
    with pytest.warns(IdentifiabilityWarning):
        other = fit_em(data, model="dawid_skene", starts=em_starts(2, 1, 1, 123))
    np.testing.assert_allclose(other.loglik, est.loglik, rtol=1e-9)
    assert np.max(np.abs(other.channel.fpr - est.channel.fpr)) > 0.01


# ----------------------------------------------------------------------------------------------- invariances
def test_flipping_labels_gives_flipped_channel():
    sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=30)
    est = fit_em(sim.data, groups=Binning.equal_mass(2), tol=1e-12, max_iter=20000, n_starts=3)
    flipped = AnnotationSet.from_wide(1 - sim.data.labels, sim.data.scores)
    est_f = fit_em(flipped, groups=Binning.equal_mass(2), tol=1e-12, max_iter=20000, n_starts=3)
    expected = est.channel.flipped()
    np.testing.assert_allclose(est_f.channel.fpr, expected.fpr, atol=1e-7)
    np.testing.assert_allclose(est_f.channel.tpr, expected.tpr, atol=1e-7)
    np.testing.assert_allclose(est_f.prevalence, 1 - est.prevalence, atol=1e-7)
    np.testing.assert_allclose(est_f.loglik, est.loglik, rtol=1e-10)


def test_label_exchanged_start_is_reoriented():
    # A start with every tpr < fpr converges to the label-swapped optimum; orientation must undo it.
    sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=31)
    fpr0, tpr0, prev0 = em_starts(3, 1, 1, 0)
    good = fit_em(sim.data, model="dawid_skene", starts=(fpr0, tpr0, prev0), tol=1e-12, max_iter=20000)
    swapped = fit_em(sim.data, model="dawid_skene", starts=(tpr0, fpr0, 1 - prev0), tol=1e-12, max_iter=20000)
    assert swapped.details["label_exchanged"] and not good.details["label_exchanged"]
    np.testing.assert_allclose(swapped.channel.fpr, good.channel.fpr, atol=1e-7)
    np.testing.assert_allclose(swapped.prevalence, good.prevalence, atol=1e-7)


def test_ties_go_to_the_lowest_start_index():
    sim = simulate_annotations(1000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=32)
    f, t, p = em_starts(3, 1, 1, 5)
    est = fit_em(sim.data, model="dawid_skene", starts=(np.vstack([f, f]), np.vstack([t, t]), np.vstack([p, p])))
    assert est.selected_start == 0 and est.start_logliks[0] == est.start_logliks[1]


def test_permuting_items_and_annotators_changes_nothing():
    sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.7], missing=0.1, seed=33)
    groups = Binning.equal_mass(2).assign(sim.data.scores)
    est = fit_em(sim.data, groups=groups, tol=1e-12, max_iter=20000, n_starts=3)
    perm = np.random.default_rng(3).permutation(2000)
    est_i = fit_em(sim.data.subset(perm), groups=groups[perm], tol=1e-12, max_iter=20000, n_starts=3)
    # Compressed patterns do not depend on item order: identical, not merely close.
    np.testing.assert_array_equal(est_i.channel.fpr, est.channel.fpr)
    cols = np.array([2, 0, 1])
    est_a = fit_em(AnnotationSet.from_wide(sim.data.labels[:, cols], sim.data.scores), groups=groups, tol=1e-12,
                   max_iter=20000, n_starts=3)
    np.testing.assert_allclose(est_a.channel.fpr, est.channel.fpr[cols], atol=1e-7)
    np.testing.assert_allclose(est_a.channel.tpr, est.channel.tpr[cols], atol=1e-7)
    np.testing.assert_allclose(est_a.prevalence, est.prevalence, atol=1e-7)


# ----------------------------------------------------------------------------------------------- warnings and errors
def test_grouped_two_annotators_with_equal_prevalences_warns():
    # Groups drawn independently of everything: the true group prevalences are equal.
    sim = simulate_annotations(3000, fpr=[0.1, 0.2], tpr=[0.9, 0.7], seed=40)
    groups = np.random.default_rng(0).integers(0, 2, 3000)
    with pytest.warns(IdentifiabilityWarning, match="prevalences barely differ"):
        est = fit_em(sim.data, groups=groups, n_starts=4, min_gap=0.0)
    assert any("barely differ" in w for w in est.warnings)


def test_uninformative_annotator_small_gap_warning():
    sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=41)
    noise = (np.random.default_rng(1).random(2000) < 0.4).astype(int)
    data = AnnotationSet.from_wide(np.column_stack([sim.data.labels, noise]), annotators=["a", "b", "c", "coin"])
    # The paper's rule (orientation="every"): the coin rejects every start.
    with pytest.warns(SmallGapWarning, match=r"'coin'"):
        with pytest.warns(ConvergenceWarning, match="all .* EM starts failed"):
            est = fit_em(data, model="dawid_skene", n_starts=3, orientation="every")
    assert not est.identified and est.channel is None and "gap <= min_gap" in est.reason
    assert all("coin" in r for _, r in est.failed_starts)
    with pytest.raises(ValueError, match="not identified.*gap <= min_gap"):
        est.require()
    # The default ("auto") keeps the coin in a crowd-oriented fit and flags it uninformative by name.
    with pytest.warns(SmallGapWarning, match=r"1 uninformative .*'coin'"):
        est = fit_em(data, model="dawid_skene", n_starts=3)
    assert est.identified and est.details["orientation"] == "crowd"
    assert est.annotators.set_index("annotator").loc["coin", "flag"] == "uninformative"


def test_no_start_converging_returns_the_best_unconverged_start():
    sim = simulate_annotations(500, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=42)
    # Two random starts, neither converged after 2 iterations: the better one is the estimate (core.starts rule 5,
    # second tier), with converged=False and a warning naming max_iter.
    with pytest.warns(ConvergenceWarning, match=r"max_iter=2 .*converged=False"):
        est = fit_em(sim.data, groups=Binning.equal_mass(3), n_starts=2, max_iter=2)
    assert est.identified and not est.converged and est.channel is not None and len(est.failed_starts) == 2
    assert est.failed_starts[0] == (0, "did not converge within max_iter=2 iterations")
    assert est.selected_start == int(np.nanargmax(est.start_logliks))


def test_errors():
    sim = simulate_annotations(200, fpr=[0.1, 0.2], tpr=[0.9, 0.8], seed=43)
    one = AnnotationSet.from_wide(sim.data.labels[:, :1], annotators=["bob"])
    with pytest.raises(ValueError, match=r"single annotator \(\['bob'\]\)"):
        fit_em(one)
    with pytest.raises(ValueError, match="must be an AnnotationSet"):
        fit_em(sim.data.labels)
    with pytest.raises(ValueError, match="need classifier scores"):
        _quiet_fit(AnnotationSet.from_wide(sim.data.labels), groups=Binning.equal_mass(2))
    with pytest.raises(ValueError, match="`prior` must be None, a Prior, or .deprecated. three Beta"):
        fit_em(sim.data, groups=Binning.equal_mass(2), prior=((0.5, 1), (1, 1), (1, 1)))
    with pytest.raises(ValueError, match="`prior` must be None, a Prior, or .deprecated. three Beta"):
        fit_em(sim.data, groups=Binning.equal_mass(2), prior=((1, 1),))
    with pytest.raises(ValueError, match="`starts` must have shapes"):
        fit_em(sim.data, groups=Binning.equal_mass(2), starts=em_starts(3, 2, 2, 0))
    f, t, p = em_starts(2, 2, 2, 0)
    with pytest.raises(ValueError, match=r"`starts` must lie in \[0, 1\]"):
        fit_em(sim.data, groups=Binning.equal_mass(2), starts=(f, t + 1, p))
    with pytest.raises(ValueError, match="`tol` must be a positive number"):
        fit_em(sim.data, groups=Binning.equal_mass(2), tol=0)
    with pytest.raises(ValueError, match=r"`min_gap` must lie in \[0, 1\)"):
        fit_em(sim.data, groups=Binning.equal_mass(2), min_gap=1.0)
    with pytest.raises(ValueError, match="`n_starts` must be an integer >= 1"):
        fit_em(sim.data, groups=Binning.equal_mass(2), n_starts=-1)
    with pytest.raises(ValueError, match="`n_starts` must be an integer >= 1"):
        fit_em(sim.data, groups=Binning.equal_mass(2), n_starts=0)
    with pytest.raises(ValueError, match="no closed-form M-step"):
        fit_em(sim.data, model="platt")


def test_result_is_frozen():
    probs = pattern_probabilities([0.1], [0.9], [0.5])[1]
    assert probs.shape == (1, 2)
    sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=44)
    est = fit_em(sim.data, model="dawid_skene", n_starts=1)
    with pytest.raises(Exception):
        est.identified = False
    with pytest.raises(ValueError):
        est.prevalence[0] = 0.0


# ----------------------------------------------------------------------------------------------- one contract (issue 15)
def test_defaults_fit_the_same_model_as_the_vectorised_em():
    # Independent route: the vectorised EM (vmap over starts) and this loop, with their defaults (grouped
    # model, 5 equal-mass groups, 10 starts from seed 0), fit the same model and agree to rounding.
    sim = simulate_annotations(2000, fpr=[0.1, 0.25, 0.15], tpr=[0.85, 0.7, 0.9], missing=0.1, seed=50)
    ref, vec = fit_em(sim.data), fit_em_vectorised(sim.data)
    assert isinstance(ref, FitResult) and isinstance(vec, FitResult)
    assert ref.model == vec.model == "grouped" and ref.n_groups == vec.n_groups == 5
    assert ref.selected_start == vec.selected_start
    for name in ("fpr", "tpr", "prevalence"):
        # 1e-9: both stop by the same rule (tol 1e-8 on parameters); the remaining difference is rounding.
        np.testing.assert_allclose(ref.point[name], vec.point[name], atol=1e-9)
    np.testing.assert_allclose(ref.loglik, vec.loglik, rtol=1e-12)
    np.testing.assert_allclose(ref.start_logliks, vec.start_logliks, rtol=1e-10)


@pytest.mark.parametrize("model, groups", [("dawid_skene", 5), ("histogram", Binning.equal_width(4))])
def test_explicit_identical_starts_agree_with_the_vectorised_em(model, groups):
    sim = simulate_annotations(1500, fpr=[0.1, 0.3, 0.2, 0.05], tpr=[0.8, 0.7, 0.9, 0.75], seed=51)
    n_groups = 1 if model == "dawid_skene" else 4
    starts = em_starts(4, n_groups, 6, 99)
    prior = Prior(fpr=(2.0, 6.0), u=(1.0, 3.0), prevalence=(2.0, 2.0))
    for kw in ({}, {"prior": prior}):
        ref = fit_em(sim.data, model=model, groups=groups, starts=starts, **kw)
        vec = fit_em_vectorised(sim.data, model=model, groups=groups, starts=starts, **kw)
        assert ref.selected_start == vec.selected_start and ref.n_iter == vec.n_iter
        np.testing.assert_allclose(ref.loglik_trace, vec.loglik_trace, rtol=1e-11)
        for name in ("fpr", "tpr", "prevalence"):
            np.testing.assert_allclose(ref.point[name], vec.point[name], atol=1e-10)
        assert ref.failed_starts == vec.failed_starts


def test_deprecated_forms_map_to_the_new_contract():
    sim = simulate_annotations(1000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=52)
    # groups=None on an AnnotationSet is the vectorised EM's error (one contract), no longer model="dawid_skene".
    with pytest.raises(ValueError, match="model='grouped' needs `groups`"):
        fit_em(sim.data, groups=None, n_starts=3)
    # A tuple prior with a_tpr = 1 is the Prior named in the warning: the same pseudo-counts, the same fit.
    with pytest.warns(DeprecationWarning, match=r"Prior\(fpr=\(2, 7\), u=\(1, 3\)"):
        old = fit_em(sim.data, groups=Binning.equal_mass(2), n_starts=3, prior=((2, 4), (1, 3), (2, 2)))
    new = fit_em(sim.data, groups=Binning.equal_mass(2), n_starts=3, prior=Prior(fpr=(2, 7), u=(1, 3), prevalence=(2, 2)))
    np.testing.assert_array_equal(old.point["tpr"], new.point["tpr"])
    assert old.loglik == new.loglik


def test_result_offers_what_channel_estimate_readers_use():
    sim = simulate_annotations(800, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=53)
    est = fit_em(sim.data, groups=Binning.equal_mass(3), n_starts=2)
    assert est.require() is est.channel and est.method == "em" and est.n_groups == 3
    np.testing.assert_array_equal(est.gap, est.channel.tpr - est.channel.fpr)
    assert est.group_sizes.sum() == 800 and est.loglik_trace.size == est.n_iter + 1


def test_sufficient_statistics_fit_like_the_vectorised_em():
    # groups=None on SufficientStats means their own bins (the noisycal_bayes.fit_em meaning, not deprecated).
    from noisycal_bayes.data import SufficientStats

    sim = simulate_annotations(1200, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.7], seed=54)
    stats = SufficientStats.from_annotations(sim.data, bins=Binning.equal_width(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        ref = fit_em(stats, model="histogram", groups=None, n_starts=3)
    vec = fit_em_vectorised(stats, model="histogram", groups=None, n_starts=3)
    assert ref.n_groups == vec.n_groups == 4
    np.testing.assert_allclose(ref.point["prevalence"], vec.point["prevalence"], atol=1e-10)
