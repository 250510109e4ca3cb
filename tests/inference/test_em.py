"""Tests for noisycal_bayes/inference/em.py: JAX EM vectorised over starts.

The frequentist reference (``noisycal_bayes.reference.em.fit_em``, a plain loop over starts) is an
independent implementation of the same rules; from identical starts both must agree to rounding.

K classes (``fit_em_multiclass``, below the binary tests): K = 2 equals the binary EM, paths agree, recovery,
relabelling, gold labels, priors, warnings and errors.
"""
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import norm

from noisycal_bayes.core import annotator_weights

from noisycal_bayes.data import AnnotationSet, Binning
from noisycal_bayes.inference import MulticlassEMFit, em_starts, fit_em, fit_em_multiclass
from noisycal_bayes.models import Prior
from noisycal_bayes.reference import em as ref
from noisycal_bayes.simulate import random_confusion, simulate_annotations, simulate_crowd, simulate_multiclass
from noisycal_bayes.warnings import ConvergenceWarning, IdentifiabilityWarning, SmallGapWarning

SIM = simulate_annotations(2000, fpr=[0.1, 0.2, 0.05], tpr=[0.9, 0.75, 0.7], curve="overconfident", missing=0.15,
                           seed=11)


def _agree(ours, theirs, atol):
    np.testing.assert_allclose(ours.channel.fpr, theirs.channel.fpr, atol=atol, rtol=0)
    np.testing.assert_allclose(ours.channel.tpr, theirs.channel.tpr, atol=atol, rtol=0)
    np.testing.assert_allclose(ours.prevalence, theirs.prevalence, atol=atol, rtol=0)


def test_starts_are_the_reference_starts():
    for args in [(3, 5, 10, 0), (2, 1, 4, 123)]:
        for a, b in zip(em_starts(*args), ref.em_starts(*args)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("groups", [Binning.equal_mass(5), Binning.equal_width(4)])
def test_agrees_with_reference_em_from_identical_starts(groups):
    # Same starts, same iteration, stopping, orientation, screening and selection rules: every number agrees
    # to rounding (1e-10; float64 EM iterates differ by ~1e-16 per step and EM is a contraction).
    starts = ref.em_starts(3, groups.n_bins, 8, 3)
    ours = fit_em(SIM.data, groups=groups, starts=starts)
    theirs = ref.fit_em(SIM.data, groups=groups, starts=starts)
    _agree(ours, theirs, 1e-10)
    np.testing.assert_allclose(ours.loglik, theirs.loglik, rtol=1e-12)
    assert ours.n_iter == theirs.n_iter
    assert ours.details["selected_start"] == theirs.selected_start
    np.testing.assert_allclose(ours.details["loglik_trace"], theirs.loglik_trace, rtol=1e-12)
    np.testing.assert_allclose(ours.details["start_logliks"], theirs.start_logliks, rtol=1e-12)
    assert [s for s, _ in ours.failed_starts] == [s for s, _ in theirs.failed_starts]


def test_marginal_model_agrees_with_reference():
    starts = ref.em_starts(3, 1, 6, 0)
    ours = fit_em(SIM.data, model="dawid_skene", starts=starts)
    theirs = ref.fit_em(SIM.data, model="dawid_skene", starts=starts)
    _agree(ours, theirs, 1e-10)
    assert ours.prevalence.shape == (1,)


def test_map_with_pseudo_counts_agrees_with_reference():
    prior = Prior(fpr=(2.0, 6.0), u=(1.0, 2.0), prevalence=(2.0, 3.0))
    starts = ref.em_starts(3, 5, 5, 1)
    ours = fit_em(SIM.data, groups=Binning.equal_mass(5), prior=prior, starts=starts)
    theirs = ref.fit_em(SIM.data, groups=Binning.equal_mass(5), prior=prior, starts=starts)
    _agree(ours, theirs, 1e-10)
    np.testing.assert_allclose(ours.loglik, theirs.loglik, rtol=1e-12)


def test_default_starts_agree_with_reference_defaults():
    # One contract (issue 15): the same defaults and the same starts (the reference no longer adds a moment
    # start), so both stop at the same iterate and agree to rounding; 1e-6, the old bound for different
    # starts (distance to the fixed point about 1e-8 r / (1 - r) for an EM rate r <= 0.99), still holds a fortiori.
    ours = fit_em(SIM.data, groups=Binning.equal_mass(5))
    theirs = ref.fit_em(SIM.data, groups=Binning.equal_mass(5))
    _agree(ours, theirs, 1e-6)
    _agree(ours, theirs, 1e-10)


def test_objective_never_decreases():
    fit = fit_em(SIM.data, groups=Binning.equal_mass(5), n_starts=3)
    trace = fit.details["loglik_trace"]
    assert trace.size == fit.n_iter + 1
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))


def test_invariances():
    base = fit_em(SIM.data, groups=Binning.equal_mass(5), tol=1e-12)
    # Permuting items changes nothing: the compressed table is the same.
    perm = np.random.default_rng(0).permutation(SIM.data.n_items)
    shuffled = fit_em(SIM.data.subset(perm), groups=Binning.equal_mass(5), tol=1e-12)
    _agree(shuffled, base, 1e-12)
    # Exchanging A <-> 1 - A (Y <-> 1 - Y) maps the channel to Channel.flipped() and prevalence to 1 - prevalence.
    flipped = SIM.data.labels.copy()
    obs = flipped >= 0
    flipped[obs] = 1 - flipped[obs]
    other = fit_em(AnnotationSet.from_wide(flipped, 1 - SIM.data.scores), groups=Binning.equal_mass(5), tol=1e-12)
    np.testing.assert_allclose(other.channel.fpr, base.channel.flipped().fpr, atol=1e-7)
    np.testing.assert_allclose(other.channel.tpr, base.channel.flipped().tpr, atol=1e-7)
    # Scores 1 - z reverse the equal-mass groups (ties aside), so group g becomes group 4 - g.
    np.testing.assert_allclose(other.prevalence[::-1], 1 - base.prevalence, atol=1e-7)


def test_result_records_how_it_was_made():
    fit = fit_em(SIM.data, groups=Binning.equal_mass(5), n_starts=4, seed=9)
    assert fit.method == "em" and fit.draws is None and fit.converged and fit.identified
    assert fit.settings["n_starts"] == 4 and fit.settings["seed"] == 9
    assert fit.groups.n_groups == 5 and fit.groups.index.shape == (SIM.data.n_items,)
    np.testing.assert_array_equal(fit.groups.assign(SIM.data.scores), fit.groups.index)
    assert fit.inputs.compressed and fit.inputs.inverse.shape == (SIM.data.n_items,)
    table = fit.summary()
    assert list(table.columns) == ["value"] and "fpr[0]" in table.index and "prevalence[4]" in table.index
    with pytest.raises(ValueError, match="no posterior draws"):
        fit.to_arviz()


def test_two_annotators_without_groups_warn_and_are_not_identified():
    sim = simulate_annotations(500, fpr=[0.1, 0.2], tpr=[0.9, 0.8], seed=2)
    with pytest.warns(IdentifiabilityWarning, match="continuum"):
        fit = fit_em(sim.data, model="dawid_skene", n_starts=3)
    assert not fit.identified and "not identified" in fit.reason


def test_two_annotators_with_flat_prevalence_warn():
    # The prevalence does not depend on the score, so two annotators are not identified: the likelihood is flat
    # along a ridge, EM crawls (a loose tol stops it there) and the estimated prevalences barely differ.
    sim = simulate_annotations(3000, fpr=[0.1, 0.2], tpr=[0.9, 0.8], curve=lambda z: np.full_like(z, 0.4), seed=3)
    with pytest.warns(IdentifiabilityWarning, match="barely differ"):
        fit_em(sim.data, groups=Binning.equal_mass(2), n_starts=3, tol=1e-4)


def test_no_converged_start_returns_the_best_unconverged_one():
    # One contract for non-convergence (core.starts rule 5, second tier): with max_iter=1 no start converges; the
    # best accepted start is the estimate, at its last iterate, with converged=False and a warning saying what to do.
    with pytest.warns(ConvergenceWarning, match=r"max_iter=1 .*converged=False.*Raise `max_iter`"):
        fit = fit_em(SIM.data, groups=Binning.equal_mass(5), n_starts=2, max_iter=1)
    assert fit.channel is not None and not fit.converged and fit.identified and fit.n_iter == 1
    assert "converged=False" in fit.reason and any("converged=False" in w for w in fit.warnings)
    assert [r for _, r in fit.failed_starts] == ["did not converge within max_iter=1 iterations"] * 2
    logliks = fit.details["start_logliks"]
    assert fit.details["selected_start"] == int(np.argmax(logliks))
    # The estimate is that start's iterate: the same EM from it alone, one step, gives the same numbers.
    s = fit.details["selected_start"]
    fpr0, tpr0, prev0 = em_starts(3, 5, 2, 0)
    with pytest.warns(ConvergenceWarning):
        one = fit_em(SIM.data, groups=Binning.equal_mass(5), starts=(fpr0[s:s + 1], tpr0[s:s + 1], prev0[s:s + 1]),
                     max_iter=1)
    _agree(fit, one, 1e-12)


def test_a_converged_start_beats_a_better_unconverged_one():
    # The first tier (converged starts) wins whenever it has an accepted start, even against an unconverged start
    # with a larger objective: starts that converge keep the estimate they had before the second tier existed.
    conv = fit_em(SIM.data, groups=Binning.equal_mass(5), n_starts=2)
    warm = tuple(np.asarray(v, np.float64)[None] for v in (conv.channel.fpr, conv.channel.tpr, conv.prevalence))
    cold = em_starts(3, 5, 1, 0)
    starts = tuple(np.concatenate([c, w]) for c, w in zip(cold, warm))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fit = fit_em(SIM.data, groups=Binning.equal_mass(5), starts=starts, max_iter=5)
    assert fit.converged and fit.details["selected_start"] == 1
    assert fit.failed_starts == ((0, "did not converge within max_iter=5 iterations"),)


def test_fits_that_converge_are_unchanged_by_the_second_tier(monkeypatch):
    # The demo data and a crowd converge: their estimate must be the one of the first tier alone (select_start
    # with unconverged=False is the selection as it was before unconverged starts became candidates), exactly.
    from functools import partial

    from noisycal_bayes import load_demo
    from noisycal_bayes.core import starts as core_starts
    from noisycal_bayes.inference import em as em_module

    crowd = simulate_crowd(300, 20, labels_per_item=4, curve="calibrated", seed=1).data
    cases = [(load_demo()[0], {}), (crowd, {"path": "sparse"})]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        now = [fit_em(d, **kw) for d, kw in cases]
        monkeypatch.setattr(em_module, "select_start", partial(core_starts.select_start, unconverged=False))
        before = [fit_em(d, **kw) for d, kw in cases]
    for a, b in zip(now, before):
        assert a.converged and b.converged
        _agree(a, b, 0.0)
        assert a.loglik == b.loglik and a.details["selected_start"] == b.details["selected_start"]


@pytest.mark.parametrize("path, accelerate", [("patterns", False), ("sparse", False), ("sparse", True)])
def test_unconverged_contract_on_every_path(path, accelerate):
    # A sparse crowd (40 annotators, 3 labels per item) and max_iter=3: no start converges on any path (pattern
    # EM, sparse EM, SQUAREM cycles); each returns its best start, and the reference EM (patterns) agrees.
    sim = simulate_crowd(300, 40, labels_per_item=3, curve="calibrated", seed=0)
    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        fit = fit_em(sim.data, model="dawid_skene", path=path, accelerate=accelerate, max_iter=3, starts="vote")
    assert fit.channel is not None and not fit.converged and fit.details["path"] == path
    assert np.all(np.isfinite(fit.channel.gap)) and np.isfinite(fit.loglik) and fit.n_iter == 3
    if not accelerate:
        with pytest.warns(ConvergenceWarning, match="max_iter=3"):
            theirs = ref.fit_em(sim.data, model="dawid_skene", max_iter=3, starts="vote")
        # The vote start and three plain EM steps: both EMs, and both paths, reach the same iterate (to rounding).
        _agree(fit, theirs, 1e-10)
        assert not theirs.converged


def test_no_estimate_says_why():
    # No estimate only when no start passed the screen (here every start is screened out: all labels equal)...
    data = AnnotationSet.from_wide(np.zeros((200, 3), dtype=int), SIM.data.scores[:200])
    with pytest.warns(ConvergenceWarning, match="no estimate: every start with a finite likelihood broke the "
                                                "orientation screen"):
        fit = fit_em(data, model="dawid_skene", n_starts=2, orientation="every")
    assert fit.channel is None and not fit.converged and "min_gap" in fit.reason
    # (No start ending finite, the other reason, is tested on select_start itself: tests/core/test_starts.py.)


@pytest.mark.parametrize("kwargs, match", [
    ({"model": "platt"}, "no closed-form M-step"),
    ({"model": "nope"}, "must be one of"),
    ({"prior": Prior(u=(2.0, 1.0))}, "fit_map"),
    ({"prior": Prior(fpr=(1.0, 1.5), u=(1.0, 1.0))}, "pseudo-counts >= 1"),
    ({"prior": ((1, 1), (1, 1), (1, 1))}, "Prior"),
    ({"tol": 0.0}, "tol"),
    ({"n_starts": 0}, "n_starts"),
    ({"starts": (np.full((2, 3), -0.1), np.zeros((2, 3)), np.zeros((2, 5)))}, r"must lie in \[0, 1\]"),
    ({"starts": "median"}, "'vote', 'random' or a tuple"),
    ({"orientation": "some"}, "`orientation` must be one of"),
    ({"path": "dense"}, "`path` must be one of"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_em(SIM.data, **kwargs)


def test_bad_data():
    with pytest.raises(ValueError, match="AnnotationSet"):
        fit_em(np.zeros((3, 3)))
    one = AnnotationSet.from_wide(np.array([[0], [1]]), np.array([0.2, 0.8]))
    with pytest.raises(ValueError, match="single annotator"):
        fit_em(one)
    no_scores = AnnotationSet.from_wide(SIM.data.labels)
    with pytest.raises(ValueError, match="need classifier scores"):
        fit_em(no_scores, groups=Binning.equal_mass(5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_em(no_scores, model="dawid_skene", n_starts=2)  # the marginal model needs no scores


def test_clean_label_probability_at_the_estimate():
    fit = fit_em(SIM.data, groups=Binning.equal_mass(5), n_starts=3)
    p = fit.clean_label_probability()
    assert p.shape == (SIM.data.n_items,)
    # The EM fixed point: the mean posterior probability in each group equals that group's prevalence (M-step).
    means = np.bincount(fit.groups.index, weights=p) / np.bincount(fit.groups.index)
    np.testing.assert_allclose(means, fit.prevalence, atol=1e-6)


def test_em_program_is_saved_in_the_compilation_cache_and_reused(tmp_path):
    # With a compilation cache directory, the EM program is exported there once; a rebuilt program (as in a new
    # process) loads it instead of tracing the loop again, and gives the same estimate.
    import jax

    from noisycal_bayes.inference import _em_loop as em_module

    sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.75, 0.8], seed=11)
    old = jax.config.jax_compilation_cache_dir
    saved_programs = dict(em_module._EM_PROGRAMS)
    try:
        jax.config.update("jax_compilation_cache_dir", str(tmp_path))
        em_module._EM_PROGRAMS.clear()
        first = fit_em(sim.data, groups=Binning.equal_mass(4), n_starts=3)
        (program,) = em_module._EM_PROGRAMS.values()
        assert program.path.parent == tmp_path / "noisycal_programs" and program.path.exists()
        stamp = program.path.stat().st_mtime_ns
        em_module._EM_PROGRAMS.clear()
        again = fit_em(sim.data, groups=Binning.equal_mass(4), n_starts=3)
        assert program.path.stat().st_mtime_ns == stamp  # loaded, not rewritten
        np.testing.assert_array_equal(again.channel.fpr, first.channel.fpr)
        np.testing.assert_array_equal(again.details["loglik_trace"], first.details["loglik_trace"])
    finally:
        jax.config.update("jax_compilation_cache_dir", old)
        em_module._EM_PROGRAMS.clear()
        em_module._EM_PROGRAMS.update(saved_programs)


def test_starts_padded_to_a_bucket_give_the_unpadded_results_and_share_one_program():
    """The pattern-path EM runs n_starts padded to a few sizes (copies of start 0, dropped after): the kept starts'
    results equal those of the unpadded program to 1e-12 (every start's loop is its own under vmap), and fits
    with 3 and 4 starts use one compiled program."""
    from functools import partial

    import jax

    from noisycal_bayes.core import x64
    from noisycal_bayes.inference import _em_loop as em_mod
    from noisycal_bayes.models.inputs import prepare_inputs, resolve_assignment

    inputs = prepare_inputs(SIM.data, "dawid_skene", resolve_assignment(SIM.data, "dawid_skene", None, "t"))
    args = (np.asarray(inputs.patterns, np.int32), np.asarray(inputs.row_group, np.int32),
            np.asarray(inputs.counts, np.float64))
    theta0 = np.concatenate(em_starts(3, 1, 3, 1), axis=1)
    assert em_mod._pad_starts(theta0).shape[0] == 4
    with x64():
        padded = em_mod._em_program(args[0].shape[0], 4, n_annotators=3, n_groups=1, prior=None, max_iter=1000)(
            em_mod._pad_starts(theta0), *args, np.float64(1e-8))
        plain = jax.jit(partial(em_mod._run_all, n_annotators=3, n_groups=1, prior=None, max_iter=1000))(
            theta0, *args, np.float64(1e-8))
    for a, b in zip(padded, plain):  # theta, objective, n_iter, status, trace (NaN after the last iteration)
        np.testing.assert_allclose(np.asarray(a)[:3], np.asarray(b), rtol=1e-12, atol=0)
    fits = [fit_em(SIM.data, model="dawid_skene", n_starts=s, seed=s) for s in (3, 4)]
    assert [len(f.details["start_logliks"]) for f in fits] == [3, 4]
    keys = [k for k in em_mod._EM_PROGRAMS if k[1] == args[0].shape[0] and k[3:5] == (3, 1) and k[5:] == (None, 1000)]
    assert sorted(k[2] for k in keys if k[2] in (3, 4)) == [4]  # one program for 3 and 4 starts


# ------------------------------------------------------------------------------------------------ K classes
FPR, TPR = [0.1, 0.2, 0.15], [0.85, 0.75, 0.8]


def stand_in(sim, gold=None, label=None, probs=None):
    """A MulticlassAnnotationSet-like object from a MulticlassSimulation (optionally with gold / new labels)."""
    return SimpleNamespace(responses=(sim.item, sim.annotator, sim.label if label is None else label),
                           n_items=sim.probs.shape[0], n_annotators=sim.confusion.shape[0],
                           n_classes=sim.probs.shape[1], probs=sim.probs if probs is None else probs, gold=gold)


@pytest.mark.slow
def test_patterns_path_equals_sparse_path():
    sim = simulate_multiclass(2000, 3, 4, labels_per_item=2, seed=3)
    a = fit_em_multiclass(sim, path="patterns", tol=1e-11, max_iter=5000)
    b = fit_em_multiclass(sim, path="sparse", tol=1e-11, max_iter=5000)
    assert (a.path, b.path) == ("patterns", "sparse")
    assert a.log_likelihood == pytest.approx(b.log_likelihood, abs=1e-10 * abs(b.log_likelihood))
    np.testing.assert_allclose(a.confusion, b.confusion, atol=1e-7)
    np.testing.assert_allclose(a.prevalence, b.prevalence, atol=1e-7)
    np.testing.assert_allclose(a.clean_label_probability(sim), b.clean_label_probability(sim), atol=1e-7)


@pytest.mark.slow
def test_recovery_of_confusions_within_standard_errors():
    # Tolerance: the complete-data standard error sqrt(C (1 - C) / n_{j,y}) (n_{j,y} the labels of annotator j on
    # items of true class y) inflated for the latent labels by 1 / sqrt(1 - r), r the largest fraction of missing
    # information = EM's rate of convergence (Dempster, Laird & Rubin 1977), estimated from the objective trace
    # (increments shrink by r^2 per iteration). Added: the distance between the simulated C and the oracle
    # complete-data estimate is within the same z. z for a 1e-3 family-wise false-alarm rate over J K K entries.
    J, K, n = 3, 4, 20000
    sim = simulate_multiclass(n, J, K, accuracy=[0.85, 0.75, 0.7], seed=12)
    fit = fit_em_multiclass(sim, model="grouped", tol=1e-10, max_iter=5000)
    inc = np.diff(fit.loglik_trace)
    ok = inc > 1e-7 * abs(fit.loglik_trace[-1])
    ratios = inc[1:][ok[1:] & ok[:-1]] / inc[:-1][ok[1:] & ok[:-1]]
    r = float(np.sqrt(np.max(ratios[-5:]))) if ratios.size else 0.0
    assert r < 0.9
    n_jy = np.zeros((J, K))
    np.add.at(n_jy, (sim.annotator, sim.y[sim.item]), 1)
    se = np.sqrt(sim.confusion * (1 - sim.confusion) / n_jy[:, :, None]) / np.sqrt(1 - r)
    z = norm.isf(1e-3 / (2 * J * K * K))
    err = np.abs(fit.confusion - sim.confusion)
    assert np.all(err <= z * se + 1e-12), (err / se).max()
    # Negative control: the confusion counted against the majority vote is biased beyond the same tolerance.
    votes = np.zeros((n, K))
    np.add.at(votes, (sim.item, sim.label), 1)
    mv = votes.argmax(1)
    cnt = np.zeros((J, K, K))
    np.add.at(cnt, (sim.annotator, mv[sim.item], sim.label), 1)
    naive = cnt / cnt.sum(2, keepdims=True)
    assert np.any(np.abs(naive - sim.confusion) > z * se)


@pytest.mark.slow
def test_relabelling_classes_permutes_the_fit():
    sim = simulate_multiclass(3000, 3, 3, seed=5)
    perm = np.array([2, 0, 1])
    inv = np.argsort(perm)
    group = (np.arange(3000) % 2).astype(np.int64)
    a = fit_em_multiclass(stand_in(sim), groups=group, tol=1e-11, max_iter=5000)
    b = fit_em_multiclass(stand_in(sim, label=perm[sim.label], probs=sim.probs[:, inv]), groups=group, tol=1e-11,
                          max_iter=5000)
    np.testing.assert_allclose(b.confusion, a.confusion[:, inv][:, :, inv], atol=1e-7)
    np.testing.assert_allclose(b.prevalence, a.prevalence[:, inv], atol=1e-7)
    assert b.log_likelihood == pytest.approx(a.log_likelihood, abs=1e-8 * abs(a.log_likelihood))


@pytest.mark.slow
def test_gold_repeats_map_prior_and_spammer():
    # One sparse fit covers: gold items (observed clean labels, one-hot posteriors), repeated labels (path choice),
    # a MAP prior (the fit is the M-step fixed point with the Dirichlet pseudo-counts, checked by an independent
    # NumPy M-step at the returned posterior) and a spammer (a singular true channel: its estimate is near-singular,
    # the condition number ~ 1 / (sampling noise of its rows) ~ 100 here, far above the others' <= 3, and its
    # inverse-variance weight is negligible).
    K, n = 3, 1500
    C = random_confusion(4, K, accuracy=[0.9, 0.8, 0.75, 0.9], seed=1)
    C[3] = np.tile([[0.2, 0.5, 0.3]], (K, 1))               # annotator 3: labels independent of Y
    sim = simulate_multiclass(n, 4, K, confusion=C, repeat_rate=0.1, seed=2)
    gold = np.full(n, -1)
    gold[:200] = sim.y[:200]
    data = stand_in(sim, gold=gold)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallGapWarning)
        fit = fit_em_multiclass(data, model="dawid_skene", prior=2.0, tol=1e-11, max_iter=5000)
    assert fit.path == "sparse" and "gold" in fit.path_reason
    assert fit.usable_annotators(max_condition=20.0).tolist() == [True, True, True, False]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallGapWarning)  # `usable` given: the caller decided (and reports it)
        w = annotator_weights(fit.confusion, fit.prevalence[0], usable=fit.usable_annotators(max_condition=20.0))
    assert np.all(w[3] == 0)
    assert np.all(annotator_weights(fit.confusion, fit.prevalence[0], usable=np.ones(4, bool))[3] < 1e-3)
    post = fit.clean_label_probability(data)
    np.testing.assert_allclose(post[:200], np.eye(K)[sim.y[:200]])
    np.testing.assert_allclose(post.sum(1), 1.0)
    cnt = np.zeros((4, K, K))
    for y in range(K):
        np.add.at(cnt[:, y, :], (sim.annotator, sim.label), post[sim.item, y])
    ref = (cnt + 1.0) / (cnt + 1.0).sum(2, keepdims=True)     # alpha = 2: one pseudo-count per cell
    np.testing.assert_allclose(fit.confusion, ref, atol=1e-7)
    assert fit.prior is not None and np.all(fit.prior[0] == 2.0)
    assert fit.objective > fit.log_likelihood - 1e6 and fit.objective != fit.log_likelihood


def test_errors_and_identifiability():
    sim = simulate_multiclass(200, 3, 3, seed=0)
    with pytest.raises(ValueError, match="must be a MulticlassAnnotationSet"):
        fit_em_multiclass(np.zeros((3, 3)))
    one = SimpleNamespace(responses=(sim.item[:5], np.zeros(5, int), sim.label[:5]), n_items=200, n_annotators=1,
                          n_classes=3, probs=None, gold=None)
    with pytest.raises(ValueError, match="1 annotator cannot identify K x K channels"):
        fit_em_multiclass(one)
    with pytest.raises(ValueError, match=r"labels must lie in 0..2; got \[3\] at responses \[0\]"):
        fit_em_multiclass(stand_in(sim, label=np.r_[3, sim.label[1:]]))
    with pytest.raises(ValueError, match="`model` must be 'grouped' or 'dawid_skene'"):
        fit_em_multiclass(sim, model="histogram")
    with pytest.raises(ValueError, match="`path` must be one of"):
        fit_em_multiclass(sim, path="dense")
    with pytest.raises(ValueError, match="`groups` must be None or an int array"):
        fit_em_multiclass(sim, groups=np.zeros(5, int))
    with pytest.raises(ValueError, match="concentrations in `prior` must be >= 1"):
        fit_em_multiclass(sim, prior=0.5)
    with pytest.raises(ValueError, match="`probs` must have shape"):
        fit_em_multiclass(stand_in(sim, probs=np.ones((200, 2)) / 2))
    with pytest.raises(ValueError, match="`gold` must be -1"):
        fit_em_multiclass(stand_in(sim, gold=np.full(200, 5)))
    rep = simulate_multiclass(200, 3, 3, repeat_rate=0.3, seed=1)
    with pytest.raises(ValueError, match="repeated labels"):
        fit_em_multiclass(rep, path="patterns")
    with pytest.raises(ValueError, match="`n_starts`"):
        fit_em_multiclass(sim, n_starts=-1)
    with pytest.raises(ValueError, match="`tol`"):
        fit_em_multiclass(sim, tol=0)


@pytest.mark.slow
def test_two_annotators_one_group_warns():
    sim = simulate_multiclass(500, 2, 3, seed=0)
    with pytest.warns(IdentifiabilityWarning, match="two annotators and one group"):
        fit_em_multiclass(sim, model="dawid_skene")


def test_orientation_relabels_a_label_switched_solution():
    # A fit with the latent classes permuted (same likelihood) is relabelled back by the assignment rule.
    from noisycal_bayes.core.starts import diagonally_dominant, orient_classes as _orient

    C = random_confusion(3, 4, accuracy=[0.8, 0.6, 0.7], seed=4)
    pi = np.array([[0.1, 0.2, 0.3, 0.4]])
    sigma = np.array([1, 3, 0, 2])                          # latent y is stored at position sigma[y]
    Cs, ps = C[:, np.argsort(sigma)], pi[:, np.argsort(sigma)]
    assert not diagonally_dominant(Cs)
    Co, po, perm, ok = _orient(Cs, ps, np.ones(3))
    assert ok and perm is not None
    np.testing.assert_allclose(Co, C)
    np.testing.assert_allclose(po, pi)
    assert _orient(C, pi, np.ones(3))[2] is None


def test_compressed_counts_reproduce_the_labels():
    from noisycal_bayes.data.compress import class_pattern_grid
    from noisycal_bayes.models.inputs import class_arrays as _as_arrays

    sim = simulate_multiclass(500, 3, 4, labels_per_item=2, seed=9)
    x = _as_arrays(sim, "test")
    group = (np.arange(500) % 3).astype(np.int32)
    patterns, grid = class_pattern_grid(x.item, x.annotator, x.label, group, n_items=500, n_annotators=3, n_classes=4,
                                        n_groups=3)
    dense = np.full((500, 3), -1)
    dense[sim.item, sim.annotator] = sim.label
    ref = {}
    for i in range(500):
        ref[(group[i], tuple(dense[i]))] = ref.get((group[i], tuple(dense[i])), 0) + 1
    got = {(g, tuple(patterns[p])): grid[g, p] for g, p in zip(*np.nonzero(grid))}
    assert got == ref


@pytest.mark.slow  # 8-64 s with a cold compilation cache (CI); make test-all runs it
def test_vote_start_alone_equals_the_best_of_more_starts_on_an_easy_design():
    # n_starts=0 runs the majority-vote start only (documented); on well-separated channels every start reaches
    # the same optimum, so the two fits agree to the stopping tolerance.
    sim = simulate_multiclass(600, 3, 3, accuracy=0.85, seed=11)
    one = fit_em_multiclass(sim, model="dawid_skene", n_starts=0)
    more = fit_em_multiclass(sim, model="dawid_skene", n_starts=2)
    assert one.start_logliks.shape == (1,)
    np.testing.assert_allclose(one.confusion, more.confusion, atol=1e-5)


# ---------------------------------------------------------------------------------------- non-convergence contract
@pytest.mark.parametrize("path", ["patterns", "sparse"])
def test_no_converged_start_returns_the_best_oriented_one(path):
    # The binary contract (core.starts rule 5): with max_iter=3 no start converges; the best oriented start is the
    # estimate, at its last iterate, with converged=False and a ConvergenceWarning saying what to do.
    from noisycal_bayes.warnings import ConvergenceWarning

    sim = simulate_multiclass(300, 30, 3, labels_per_item=3, accuracy=0.7, seed=2)
    with pytest.warns(ConvergenceWarning, match=r"max_iter=3 .*converged=False.*`init=`"):
        fit = fit_em_multiclass(sim, model="dawid_skene", n_starts=2, max_iter=3, path=path)
    assert not fit.converged and fit.n_iter == 3 and fit.path == path
    assert fit.selected_start == int(np.nanargmax(fit.start_logliks))
    assert any("converged=False" in w for w in fit.warnings)
    # Here the vote start (start 0) is the best; its iterate is that of the vote start alone after three steps.
    assert fit.selected_start == 0
    with pytest.warns(ConvergenceWarning):
        alone = fit_em_multiclass(sim, model="dawid_skene", n_starts=0, max_iter=3, path=path)
    np.testing.assert_allclose(alone.confusion, fit.confusion, atol=1e-12)


def test_a_converged_start_beats_unconverged_ones():
    from noisycal_bayes.warnings import ConvergenceWarning

    sim = simulate_multiclass(600, 4, 3, accuracy=0.8, seed=3)
    conv = fit_em_multiclass(sim, model="dawid_skene", n_starts=0, tol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fit = fit_em_multiclass(sim, model="dawid_skene", n_starts=2, init=conv, max_iter=20, tol=1e-6)
    assert fit.converged and fit.selected_start == 0


def test_no_finite_start_is_a_clear_error(monkeypatch):
    # No estimate only when no start ends finite: a ValueError naming each start's reason, not a RuntimeError.
    from noisycal_bayes.inference import em as mc

    sim = simulate_multiclass(200, 3, 3, seed=0)
    real = mc.run_class_patterns

    def nonfinite(*args, **kw):
        theta, obj, n_iter, status, trace = real(*args, **kw)
        return theta * np.nan, obj * np.nan, n_iter, np.full_like(status, 2), trace  # 2 = non-finite parameters

    monkeypatch.setattr(mc, "run_class_patterns", nonfinite)
    with pytest.raises(ValueError, match=r"all 3 EM starts failed, so there is no estimate: no start gave a finite "
                                         r"likelihood \(start 0: non-finite parameters at iteration"):
        fit_em_multiclass(sim, model="dawid_skene", n_starts=2, path="patterns")


def test_weighted_distinct_rows_equal_the_full_data_fit():
    """Independent route: the distinct (group, response pattern) rows as items with their counts as ``weights``
    give the full data's fit (same likelihood, same starts, same stopping rule), to EM's tolerance; the vote start
    and the orientation's label counts are weighted the same way. Bad weights are refused."""
    sim = simulate_multiclass(3000, 4, 3, labels_per_item=3, accuracy=0.75, seed=5)
    item, ann, lab = (np.asarray(v) for v in (sim.item, sim.annotator, sim.label))
    groups = np.arange(3000) % 3
    data = SimpleNamespace(responses=(item, ann, lab), n_items=3000, n_annotators=4, n_classes=3, probs=None,
                           gold=None)
    full = fit_em_multiclass(data, groups=groups, n_starts=1, seed=2, path="sparse", tol=1e-10)
    dense = np.full((3000, 4), -1)
    dense[item, ann] = lab
    rows, row_of, counts = np.unique(np.column_stack([groups, dense]), axis=0, return_inverse=True,
                                     return_counts=True)
    it, an = np.nonzero(rows[:, 1:] >= 0)
    cells = SimpleNamespace(responses=(it, an, rows[it, 1 + an]), n_items=rows.shape[0], n_annotators=4,
                            n_classes=3, probs=None, gold=None)
    weighted = fit_em_multiclass(cells, groups=rows[:, 0], weights=counts, n_starts=1, seed=2, tol=1e-10)
    assert rows.shape[0] < 400 and weighted.path == "sparse" and weighted.path_reason == "item weights"
    np.testing.assert_allclose(weighted.confusion, full.confusion, atol=1e-7)
    np.testing.assert_allclose(weighted.prevalence, full.prevalence, atol=1e-7)
    assert weighted.log_likelihood == pytest.approx(full.log_likelihood, abs=1e-6)
    np.testing.assert_allclose(weighted.n_labels, full.n_labels)
    # Negative control: unit weights on the distinct rows are another data set, with another fit.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this design converges slowly from its own starts; not the point here
        unit = fit_em_multiclass(cells, groups=rows[:, 0], n_starts=1, seed=2, path="sparse")
    assert np.abs(unit.confusion - full.confusion).max() > 1e-3
    with pytest.raises(ValueError, match="`weights` must be"):
        fit_em_multiclass(cells, groups=rows[:, 0], weights=counts[:-1])
    with pytest.raises(ValueError, match="`weights` must be"):
        fit_em_multiclass(cells, groups=rows[:, 0], weights=-counts)
    with pytest.raises(ValueError, match="does not take item `weights`"):
        fit_em_multiclass(cells, groups=rows[:, 0], weights=counts, path="patterns")


def _class_data(n=600, k=3, seed=0):
    """A K-class data set (MulticlassAnnotationSet) from a simulation."""
    from noisycal_bayes.data import MulticlassAnnotationSet

    sim = simulate_multiclass(n, 3, k, accuracy=0.8, seed=seed)
    return MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=k, probs=sim.probs)


def test_fit_em_on_class_data_is_fit_em_multiclass():
    # One door: fit_em(K-class data) is fit_em_multiclass with its own defaults and the options the caller set;
    # options without a K-class meaning are an error naming them.
    data = _class_data()
    a, b = fit_em(data), fit_em_multiclass(data)
    assert isinstance(a, MulticlassEMFit)
    np.testing.assert_array_equal(a.confusion, b.confusion)
    np.testing.assert_array_equal(a.prevalence, b.prevalence)
    c, d = fit_em(data, model="dawid_skene", n_starts=1, seed=3), fit_em_multiclass(data, model="dawid_skene", n_starts=1, seed=3)
    np.testing.assert_array_equal(c.confusion, d.confusion)
    assert c.model == "dawid_skene" and len(c.start_logliks) == 2
    groups = np.arange(data.n_items) % 2
    np.testing.assert_array_equal(fit_em(data, groups=groups).groups, groups)
    e = fit_em(data, orientation="crowd", min_gap=0.1)  # K-class orientation rules (rule K3): passed through
    assert e.settings["orientation"] == "crowd" and e.settings["min_gap"] == 0.1 and e.details["orientation"] == "crowd"
    with pytest.raises(ValueError, match=r"\['starts'\] apply to binary data only.*fit_em_multiclass"):
        fit_em(data, starts="vote")
    with pytest.raises(ValueError, match=r"\['groups'\] apply to binary data only"):
        fit_em(data, groups=Binning.equal_mass(3))


def test_class_orientation_rules_and_default_starts():
    # Rule K3 of core.starts: a crowd whose third class is named less often than the first (row 2 of every confusion
    # not diagonally dominant, crowd gap (trace - 1) / (K - 1) = 0.5) fails the class-level "every" screen; "auto"
    # falls back to the crowd screen (binary's rule) and returns the same estimate as converged. Rule K1: the sparse
    # path runs the vote start alone unless n_starts is given (the pattern path's 4 random starts: goldens k3).
    from noisycal_bayes.core.starts import class_crowd_gap
    from noisycal_bayes.simulate import simulate_multiclass
    from noisycal_bayes.warnings import IdentifiabilityWarning, SmallGapWarning

    row = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.45, 0.15, 0.4]])
    sim = simulate_multiclass(1500, 30, 3, confusion=np.broadcast_to(row, (30, 3, 3)).copy(), labels_per_item=4,
                              seed=1)
    with pytest.warns(IdentifiabilityWarning, match="row maxima"):
        every = fit_em_multiclass(sim, model="dawid_skene", orientation="every")
    with pytest.warns(SmallGapWarning, match="orientation='auto' applied the crowd screen"):
        auto = fit_em_multiclass(sim, model="dawid_skene")
    assert every.path == "sparse" and len(auto.start_logliks) == 1 and auto.settings["starts"] == "vote"
    assert not every.converged and auto.converged and auto.details["orientation"] == "crowd"
    np.testing.assert_array_equal(auto.confusion, every.confusion)
    cbar = np.average(auto.confusion, axis=0, weights=auto.n_labels)
    assert np.abs(cbar - row).max() < 0.05 and abs(class_crowd_gap(auto.confusion, auto.n_labels) - 0.5) < 0.05
    with pytest.warns(IdentifiabilityWarning, match="crowd gap"):  # negative control: a screen nothing passes
        strict = fit_em_multiclass(sim, model="dawid_skene", orientation="crowd", min_gap=0.9)
    assert not strict.converged
