"""K-class EM (noisycal_bayes/inference/multiclass_em.py): K = 2 equals the binary EM, paths agree, recovery,
relabelling, gold labels, priors, warnings and errors."""
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import norm

from noisycal_bayes.core import annotator_weights
from noisycal_bayes.inference import MulticlassEMFit, fit_em_multiclass
from noisycal_bayes.simulate import random_confusion, simulate_annotations, simulate_multiclass
from noisycal_bayes.warnings import IdentifiabilityWarning, SmallGapWarning

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
