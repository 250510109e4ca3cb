"""Warm starts of the K-class EM (``fit_em_multiclass(init=...)``) and the bootstrap estimator
``multiclass_em_estimator`` (refits warm-started at the full-sample fit, gold labels seen by the refits).

Independent routes: the cold multi-start fit (a warm start at the optimum must stay there), the closed-form
maximum-likelihood confusion when every item has a gold label (empirical label frequencies per gold class).
"""
from types import SimpleNamespace

import numpy as np
import pytest

from noisycal_bayes.inference import fit_em_multiclass, multiclass_em_estimator
from noisycal_bayes.simulate import simulate_multiclass


@pytest.fixture(scope="module")
def sim():
    return simulate_multiclass(600, 3, 3, accuracy=0.8, seed=21)


@pytest.mark.slow  # two EM compilations (~3-10 s cold)
def test_warm_start_at_the_fit_stays_there_and_stops_at_once(sim):
    cold = fit_em_multiclass(sim, model="dawid_skene", n_starts=2, tol=1e-10, max_iter=5000)
    warm = fit_em_multiclass(sim, model="dawid_skene", n_starts=0, tol=1e-10, max_iter=5000, init=cold)
    # EM's fixed point: one or two iterations move nothing beyond the tolerance (the cold fit needed many).
    assert warm.converged and warm.selected_start == 0 and warm.start_logliks.shape == (1,)
    assert warm.n_iter <= 3 < cold.n_iter
    np.testing.assert_allclose(warm.confusion, cold.confusion, atol=1e-8)
    np.testing.assert_allclose(warm.prevalence, cold.prevalence, atol=1e-8)
    # The same start given as arrays, the prevalence as (K,) or None (uniform: EM re-estimates it).
    for prev in (cold.prevalence[0], None):
        arr = fit_em_multiclass(sim, model="dawid_skene", n_starts=0, tol=1e-10, max_iter=5000,
                                init=(cold.confusion, prev))
        np.testing.assert_allclose(arr.confusion, cold.confusion, atol=1e-6)
    # A grouped fit (G = 6) as the start of a one-group fit: its item-weighted overall prevalence is used, and the
    # fit reaches the same optimum as the cold fit.
    grouped = fit_em_multiclass(sim, n_starts=0, tol=1e-10, max_iter=5000)
    assert grouped.n_groups == 6
    cross = fit_em_multiclass(sim, model="dawid_skene", n_starts=0, tol=1e-10, max_iter=5000, init=grouped)
    np.testing.assert_allclose(cross.confusion, cold.confusion, atol=1e-6)


def test_warm_start_errors(sim):
    C = np.tile(np.eye(3) * 0.7 + 0.1, (3, 1, 1))
    bad_row = C.copy()
    bad_row[1, 2] = [0.5, 0.5, 0.5]
    neg = C.copy()
    neg[0, 0] = [1.2, -0.1, -0.1]
    cases = [
        ("a string", "`init` must be None, a MulticlassEMFit or a tuple"),
        ((C[:2], None), r"`init` confusion must have shape \(3, 3, 3\); got \(2, 3, 3\)"),
        ((C, np.ones(4) / 4), r"`init` prevalence must have shape \(3,\) or \(1, 3\)"),
        ((bad_row, None), r"`init` confusion rows must be finite, >= 0 and sum to 1 .* rows \[\(1, 2\)\]"),
        ((neg, None), r"rows \[\(0, 0\)\] do not"),
        ((C, np.array([0.5, 0.6, -0.1])), r"`init` prevalence rows must be finite"),
    ]
    for init, match in cases:
        with pytest.raises(ValueError, match=match):
            fit_em_multiclass(sim, model="dawid_skene", init=init)
    with pytest.raises(ValueError, match="`model` must be 'grouped', 'dawid_skene' or 'pooled'"):
        multiclass_em_estimator(model="platt")
    with pytest.raises(ValueError, match="`refit_starts`"):
        multiclass_em_estimator(refit_starts=-1)


@pytest.mark.slow  # EM compilations on the sparse (gold) path
def test_estimator_uses_gold_labels_and_warm_starts():
    # Every item gold: the maximum-likelihood confusion is the table of labels per gold class (closed form).
    s = simulate_multiclass(800, 3, 4, accuracy=0.7, seed=5)
    gold = np.asarray(s.y, dtype=np.int64)
    resp = (s.item, s.annotator, s.label)
    est = multiclass_em_estimator(model="dawid_skene", tol=1e-12)
    conf, prev = est(resp, 800, s.probs, gold=gold)
    counts = np.zeros((3, 4, 4))
    np.add.at(counts, (s.annotator, gold[s.item], s.label), 1.0)
    np.testing.assert_allclose(conf, counts / counts.sum(axis=2, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(prev, np.bincount(gold, minlength=4) / 800, atol=1e-6)
    # Without gold the estimate differs (the latent classes are inferred), so gold really entered.
    conf0, _ = est(resp, 800, s.probs)
    assert np.abs(conf0 - conf).max() > 1e-3
    # A warm refit from the cold estimate on the same data returns it (grouped: (G, K) prevalences as init).
    g_est = multiclass_em_estimator(tol=1e-10, max_iter=5000)
    c1, p1 = g_est(resp, 800, s.probs)
    assert p1.shape == (8, 4)
    c2, p2 = g_est(resp, 800, s.probs, init=(c1, p1))
    np.testing.assert_allclose(c2, c1, atol=1e-6)
    np.testing.assert_allclose(p2, p1, atol=1e-6)


def test_stand_in_object_with_gold_reaches_the_sparse_path():
    # The adapter reads gold from any object; fitting is not needed to check the route choice.
    from noisycal_bayes.models.em_result import choose_path
    from noisycal_bayes.models.inputs import class_arrays as _as_arrays

    s = simulate_multiclass(50, 3, 3, seed=2)
    gold = np.full(50, -1)
    gold[:5] = s.y[:5]
    data = SimpleNamespace(responses=(s.item, s.annotator, s.label), n_items=50, n_annotators=3, n_classes=3,
                           probs=s.probs, gold=gold)
    x = _as_arrays(data, "t")
    assert choose_path(x, "auto", "t") == ("sparse", "5 gold labels (observed clean labels)")


def test_annotator_without_labels_keeps_its_warm_start(sim):
    # Regression (bootstrap replicates of a sparse crowd): an annotator without a label was an error even with a
    # warm start. It keeps its `init` matrix; the others are the fit without it; warnings name full-data indices.
    n = sim.probs.shape[0]
    spam = np.zeros(n, np.int64)  # a spammer (always class 0): a singular fitted matrix
    data = SimpleNamespace(responses=(np.concatenate([sim.item, np.arange(n)]), np.concatenate([sim.annotator + 1,
                                      np.full(n, 4)]), np.concatenate([sim.label, spam])),
                           n_items=n, n_annotators=5, n_classes=3, probs=sim.probs, gold=None)
    kept = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.2, 0.2, 0.6]])
    sub = SimpleNamespace(**{**vars(data), "responses": (data.responses[0], data.responses[1] - 1,
                                                         data.responses[2]), "n_annotators": 4})
    ref = fit_em_multiclass(sub, model="dawid_skene", n_starts=1)
    init = (np.concatenate([kept[None], ref.confusion]), ref.prevalence[0])
    with pytest.raises(ValueError, match=r"annotators \[0\] gave no label.*pass `init`"):
        fit_em_multiclass(data, model="dawid_skene", n_starts=0)
    with pytest.warns(Warning, match=r"annotators \[4\] have a near-singular") as record:
        fit = fit_em_multiclass(data, model="dawid_skene", n_starts=0, init=init)
    assert not any("annotators [3] have" in str(w.message) for w in record)  # the sub-fit's own index
    np.testing.assert_array_equal(fit.confusion[0], kept)
    warm = fit_em_multiclass(sub, model="dawid_skene", n_starts=0, init=(ref.confusion, ref.prevalence[0]))
    np.testing.assert_allclose(fit.confusion[1:], warm.confusion, atol=1e-10)  # the same warm refit without it
    assert fit.n_labels.tolist()[0] == 0 and fit.n_annotators == 5 and fit.warnings[-1].startswith("fit_em_multiclass")
