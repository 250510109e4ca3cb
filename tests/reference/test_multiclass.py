"""Tests for the K-class NC-ECE point estimators, item bootstrap and naive ECEs (reference/calibration.py,
nc_ece_bootstrap.py, baselines.py).

Independent routes: the binary reference nc_ece / bootstrap_nc_ece on the same data (K = 2), hand-written ECE
loops, the contract formulas (corrected_vectors: E[T[A] | Y] = e_Y exactly), class relabelling. The EM that
the bootstrap refits is replaced by a stand-in estimator (a known confusion), as the contract asks.
"""
import warnings

import numpy as np
import pytest

from noisycal_bayes.core import (annotator_weights, classwise_ece, corrected_targets, corrected_vectors,
                                 top_label_ece)
from noisycal_bayes.reference import (bootstrap_classwise_nc_ece, bootstrap_multiclass_nc_ece,
                                      bootstrap_top_label_nc_ece, classwise_nc_ece, naive_multiclass_ece,
                                      top_label_nc_ece)
from noisycal_bayes.warnings import IdentifiabilityWarning


def simulate(n, k, j, *, seed, acc=0.75):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, k))
    logits[np.arange(n), rng.integers(0, k, n)] += 2.0
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    q = p**0.6 / (p**0.6).sum(axis=1, keepdims=True)
    y = (rng.random((n, 1)) > np.cumsum(q, axis=1)).sum(axis=1)
    conf = np.empty((j, k, k))
    for a in range(j):
        for c in range(k):
            conf[a, c] = np.insert(rng.dirichlet(np.ones(k - 1)) * (1 - acc), c, acc)
    cdf = np.cumsum(conf[np.arange(j)[None, :], y[:, None]], axis=2)
    labels = (rng.random((n, j))[:, :, None] > cdf).sum(axis=2)
    return p, y, labels, conf, (np.repeat(np.arange(n), j), np.tile(np.arange(j), n), labels.reshape(-1))


@pytest.fixture(scope="module")
def mc():
    return simulate(500, 3, 3, seed=8)


# ----------------------------------------------------------------------------- formulas
def test_corrected_vectors_are_exactly_unbiased(mc):
    # E[T[j, A_j, :] | Y = y] = sum_a C[j, y, a] T[j, a, :] = (C_j C_j^{-1})[y] = e_y.
    conf = mc[3]
    t = corrected_vectors(conf)
    np.testing.assert_allclose(np.einsum("jya,jak->jyk", conf, t), np.broadcast_to(np.eye(3), (3, 3, 3)), atol=1e-12)


# ----------------------------------------------------------------------------- identities and naive ECEs
def test_identity_confusion_is_the_plain_top_label_ece_and_matches_naive(mc):
    p, y, labels, conf, resp = mc
    one = tuple(r[resp[1] == 0] for r in resp)
    res = top_label_nc_ece(p, one, np.eye(3)[None], bins=10)
    conf_, yhat = p.max(axis=1), p.argmax(axis=1)
    hit = (yhat == labels[:, 0]).astype(float)
    b = np.minimum((conf_ * 10).astype(int), 9)
    loop = sum(abs(np.sum(hit[b == k] - conf_[b == k])) for k in range(10)) / 500
    assert res.value == pytest.approx(loop, abs=1e-12)
    naive = naive_multiclass_ece(p, resp, bins=10).set_index("target")
    assert naive.loc["annotator 0", "top_label_ece"] == pytest.approx(loop, abs=1e-12)


def test_naive_majority_vote_row(mc):
    p, y, labels, conf, resp = mc
    maj = np.array([np.bincount(r, minlength=3).argmax() for r in labels])
    onehot = np.eye(3)[maj]
    naive = naive_multiclass_ece(p, resp).set_index("target")
    assert naive.loc["majority_vote", "top_label_ece"] == pytest.approx(top_label_ece(p, onehot).value, abs=1e-12)
    assert naive.loc["majority_vote", "classwise_ece"] == pytest.approx(classwise_ece(p, onehot).value, abs=1e-12)
    assert list(naive.index) == ["majority_vote", "annotator 0", "annotator 1", "annotator 2", "vote_distribution"]
    # NC-ECE is much closer to the oracle (true-label) ECE than the naive ones (noise 25% per annotator).
    oracle = top_label_ece(p, np.eye(3)[y]).value
    nc = top_label_nc_ece(p, resp, conf).value
    assert abs(nc - oracle) < min(abs(naive["top_label_ece"] - oracle))


def test_corrected_targets_handle_repeats_and_items_without_usable_response(mc):
    p, y, labels, conf, resp = mc
    w = np.ones((3, 3))
    t = corrected_targets(resp, 500, conf, weights=w)
    # a repeated response counts twice: doubling every response leaves the (weighted mean) targets unchanged
    rep = tuple(np.concatenate([r, r]) for r in resp)
    np.testing.assert_allclose(corrected_targets(rep, 500, conf, weights=w), t, atol=1e-12)
    # an item with no response of positive weight gets NaN
    t2 = corrected_targets(tuple(r[2:] for r in resp), 501, conf, weights=w)
    assert np.isnan(t2[500]).all() and np.isfinite(t2[:500]).all()


def test_near_singular_confusion_warns_and_is_left_out(mc):
    p, y, labels, conf, resp = mc
    bad = conf.copy()
    bad[0] = np.full((3, 3), 0.332) + 0.004 * np.eye(3)  # condition number 250
    with pytest.warns(IdentifiabilityWarning, match=r"annotators \[0\]"):
        res = classwise_nc_ece(p, resp, bad)
    keep = resp[1] != 0
    ref = classwise_nc_ece(p, (resp[0][keep], resp[1][keep] - 1, resp[2][keep]), conf[1:])
    assert res.value == pytest.approx(ref.value, abs=1e-12) and not res.usable[0]


# ----------------------------------------------------------------------------- bootstrap
def test_bootstrap_warm_start_relabelling_and_failures(mc):
    p, y, labels, conf, resp = mc
    seen = []

    def est(r, n, probs, init=None):
        seen.append(init is None)
        return conf, None

    res = bootstrap_multiclass_nc_ece(p, resp, estimator=est, n_boot=10, seed=1)
    assert seen[0] and not any(seen[1:])  # the full sample without init, every replicate warm-started
    assert res.top_label.kind == "top_label" and res.classwise.per_class.shape == (3, 5)
    assert res.top_label.replicates.size == 10 and res.top_label.lower <= res.top_label.upper
    # relabelling the classes: identical top-label replicates, permuted class-wise ones
    perm = np.array([2, 0, 1])
    inv = np.argsort(perm)
    conf2 = conf[:, perm][:, :, perm]
    res2 = bootstrap_multiclass_nc_ece(p[:, perm], (resp[0], resp[1], inv[resp[2]]),
                                       estimator=lambda r, n, q: (conf2, None), n_boot=10, seed=1)
    np.testing.assert_allclose(res2.top_label.replicates, res.top_label.replicates, rtol=1e-10)
    np.testing.assert_allclose(res2.classwise.per_class_replicates, res.classwise.per_class_replicates[:, perm],
                               rtol=1e-10)
    # the single-kind wrappers give the same as the combined call
    one = bootstrap_top_label_nc_ece(p, resp, estimator=lambda r, n, q: (conf, None), n_boot=10, seed=1)
    np.testing.assert_allclose(one.replicates, res.top_label.replicates)
    cw = bootstrap_classwise_nc_ece(p, resp, estimator=lambda r, n, q: (conf, None), n_boot=10, seed=1,
                                    method="basic")
    assert cw.method == "basic" and cw.interval[0] >= 0

    calls = []

    def flaky(r, n, probs):
        calls.append(1)
        if len(calls) % 2 == 0:
            raise ValueError("not identified")
        return conf, None

    with pytest.warns(IdentifiabilityWarning, match="5 of 10 bootstrap replicates failed"):
        out = bootstrap_multiclass_nc_ece(p, resp, estimator=flaky, n_boot=10)
    assert out.top_label.n_failed == 5 and "ValueError: not identified" in out.top_label.failure_reasons


@pytest.mark.parametrize("kwargs, match", [
    (dict(), "pass `estimator`"),
    (dict(estimator=3), "must be callable"),
    (dict(estimator=lambda r, n, p: np.eye(3)), "must return"),
    (dict(estimator=lambda r, n, p: (np.eye(3), None)), "must have shape"),
    (dict(estimator=lambda r, n, p: np.linalg.solve(np.zeros((2, 2)), np.ones(2))), "Singular matrix"),
    (dict(estimator=lambda r, n, p: None, n_boot=0), "n_boot"),
    (dict(estimator=lambda r, n, p: None, method="bca"), "method"),
])
def test_bootstrap_errors(mc, kwargs, match):
    p, y, labels, conf, resp = mc
    with pytest.raises(ValueError, match=match):
        bootstrap_multiclass_nc_ece(p, resp, **kwargs)


def test_all_replicates_failing_raises(mc):
    p, y, labels, conf, resp = mc
    calls = []

    def fails_after_first(r, n, probs):
        calls.append(1)
        if len(calls) > 1:
            raise np.linalg.LinAlgError("singular")
        return conf, None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="all 4 bootstrap replicates failed"):
            bootstrap_multiclass_nc_ece(p, resp, estimator=fails_after_first, n_boot=4)


@pytest.mark.parametrize("change, match", [
    (dict(probs=np.full((500, 3), 0.5)), "sum to 1"),
    (dict(probs=-np.ones((500, 3))), "must hold probabilities in"),
    (dict(confusion=np.ones((3, 3, 3))), "`confusion` rows must sum to 1"),
    (dict(confusion=np.ones((2, 3, 3)) / 3), "must have shape"),
    (dict(prevalence=np.ones(2) / 2), "prevalence"),
    (dict(weights="squared_gap"), "weights"),
    (dict(bins="ten"), "bins"),
])
def test_point_estimator_errors(mc, change, match):
    p, y, labels, conf, resp = mc
    kw = dict(probs=p, responses=resp, confusion=conf)
    kw.update(change)
    with pytest.raises(ValueError, match=match):
        top_label_nc_ece(kw.pop("probs"), kw.pop("responses"), kw.pop("confusion"), **kw)


def test_point_estimator_label_errors(mc):
    p, y, labels, conf, resp = mc
    with pytest.raises(ValueError, match=r"got \[3\] at responses"):
        classwise_nc_ece(p, (resp[0], resp[1], np.where(resp[2] == 2, 3, resp[2])), conf)
    with pytest.raises(ValueError, match="integer indices"):
        classwise_nc_ece(p, (resp[0] + 0.5, resp[1], resp[2]), conf)
    with pytest.raises(ValueError, match="tuple of three arrays"):
        classwise_nc_ece(p, 5, conf)


# ----------------------------------------------------------------------------- bootstrap: gold and warm start
def test_bootstrap_resamples_gold_with_its_items(mc):
    p, y, labels, conf, resp = mc
    n = p.shape[0]
    # gold = annotator 0's label on the first 200 items: in every replicate the gold passed must agree with
    # annotator 0's label of the same (resampled) item, which checks that gold travels with its item.
    gold = np.where(np.arange(n) < 200, labels[:, 0], -1)
    seen = []

    def est(r, n_items, probs, *, init=None, gold=None):
        item, ann, lab = r
        a0 = np.full(n_items, -1)
        a0[item[ann == 0]] = lab[ann == 0]
        known = gold >= 0
        seen.append((init, int(known.sum()), bool(np.array_equal(gold[known], a0[known]))))
        return conf, np.full((2, 3), 1 / 3)  # a grouped prevalence: ignored by the weights, handed back as init

    res = bootstrap_multiclass_nc_ece(p, resp, estimator=est, n_boot=8, seed=2, gold=gold)
    assert res.top_label.n_failed == 0 and len(seen) == 9
    assert seen[0][0] is None and seen[0][1] == 200
    assert all(ok for _, _, ok in seen)
    # about 200 of the n resampled items are gold (binomial(n, 200 / n): sd ~ sqrt(200 * 0.6) = 11)
    assert all(abs(c - 200) < 6 * 11 for _, c, _ in seen[1:])
    assert all(i[1].shape == (2, 3) and np.array_equal(i[0], conf) for i, _, _ in seen[1:])  # warm start: the full fit
    # The gold labels change nothing else: the NC-ECE uses the annotators' labels only.
    plain = bootstrap_multiclass_nc_ece(p, resp, estimator=lambda r, n_items, probs, init=None: (conf, None),
                                        n_boot=8, seed=2)
    np.testing.assert_allclose(res.top_label.replicates, plain.top_label.replicates, rtol=1e-12)
    # A MulticlassAnnotationSet-like object brings its own gold labels.
    obj = type("Set", (), {"responses": resp, "n_annotators": 3, "gold": gold})()
    seen.clear()
    bootstrap_multiclass_nc_ece(p, obj, estimator=est, n_boot=2, seed=2)
    assert seen[0][1] == 200


@pytest.mark.parametrize("gold, est, match", [
    (np.zeros(5, int), "kw", r"`gold` must be an int array of shape \(500,\)"),
    (np.full(500, 0.5), "kw", r"`gold` must be an int array"),
    (np.r_[[3, -2], np.zeros(498, int)], "kw", r"`gold` must be -1 \(unknown\) or a class in 0..2; got \[3, -2\] at "
                                               r"items \[0, 1\]"),
    (np.zeros(500, int), "plain", "500 gold labels but `estimator` takes no `gold` keyword"),
])
def test_bootstrap_gold_errors(mc, gold, est, match):
    p, y, labels, conf, resp = mc
    fn = (lambda r, n, q, gold=None: (conf, None)) if est == "kw" else (lambda r, n, q: (conf, None))
    with pytest.raises(ValueError, match=match):
        bootstrap_multiclass_nc_ece(p, resp, estimator=fn, n_boot=2, gold=gold)


def test_bootstrap_without_gold_labels_accepts_any_estimator(mc):
    # gold of all -1 means none: an estimator without the keyword is fine and never sees it.
    p, y, labels, conf, resp = mc
    res = bootstrap_multiclass_nc_ece(p, resp, estimator=lambda r, n, q: (conf, None), n_boot=3,
                                      gold=np.full(500, -1))
    assert res.top_label.replicates.size == 3


def test_bootstrap_keeps_replicates_that_miss_an_annotator(mc):
    # Regression: a replicate without annotator 3's single item was counted failed ("have no label in the
    # replicate"); it is kept. Its NC-ECE does not depend on the absent annotator's matrix (none of its items is
    # corrected with it): any matrix there gives the same replicates.
    p, y, labels, conf, resp = mc
    resp4 = tuple(np.append(a, v) for a, v in zip(resp, (0, 3, labels[0, 0])))
    conf4 = np.concatenate([conf, conf[:1]])
    other = np.array([[[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]])
    calls = []

    def held(r, n, q, *, init=None):
        calls.append(3 in r[1])
        return conf4, None

    def varied(r, n, q, *, init=None):
        return (conf4 if 3 in r[1] else np.concatenate([conf, other])), None

    a = bootstrap_multiclass_nc_ece(p, resp4, estimator=held, n_boot=20, seed=2)
    b = bootstrap_multiclass_nc_ece(p, resp4, estimator=varied, n_boot=20, seed=2)
    assert a.top_label.n_failed == 0 and a.top_label.replicates.size == 20
    assert 0 < calls[1:].count(False) < 20  # (1 - 1/500)^500 ~ 0.37 of the replicates miss annotator 3
    np.testing.assert_allclose(a.top_label.replicates, b.top_label.replicates, rtol=1e-12)  # to rounding
    np.testing.assert_allclose(a.classwise.per_class_replicates, b.classwise.per_class_replicates, rtol=1e-12)


def test_bootstrap_failure_reasons_are_one_readable_line(mc):
    # Regression: the error held every distinct reason as a dict (kilobytes for a crowd); now the most frequent
    # reasons with their counts, each one line, and how many others.
    p, y, labels, conf, resp = mc
    calls = []

    def fails(r, n, q):
        calls.append(1)
        if len(calls) > 1:
            raise ValueError(f"annotators {list(range(len(calls), len(calls) + 40))}\nare not identified")
        return conf, None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="all 30 bootstrap replicates failed") as err:
            bootstrap_multiclass_nc_ece(p, resp, estimator=fails, n_boot=30)
    msg = str(err.value)
    assert "\n" not in msg and len(msg) < 1000
    assert "1 x ValueError: annotators [2, 3" in msg and "27 other reason(s) in 27 replicate(s)" in msg


def test_usable_from_draws_falls_back_to_the_posterior_mean_when_no_annotator_passes():
    # Half of each annotator's draws near singular: its 95% quantile condition number exceeds 100 although the
    # mean matrix 0.5 I + 0.5 R is well conditioned. With no annotator passing, the mean's rule decides (warned);
    # with one passing, the draws' rule stands (the fallback does not apply).
    from noisycal_bayes.core import confusion_condition
    from noisycal_bayes.reference.calibration import usable_from_draws

    eye = np.eye(3)
    # condition number 1 / 0.004 = 250 (not a value on the 100 threshold, where rounding would decide)
    flat = np.array([[0.336, 0.332, 0.332], [0.332, 0.336, 0.332], [0.332, 0.332, 0.336]])
    draws = np.stack([np.stack([eye, eye]) if s % 2 else np.stack([flat, flat]) for s in range(40)])
    assert (confusion_condition(draws)[::2] > 100).all() and (confusion_condition(draws.mean(0)[None]) < 100).all()
    with pytest.warns(IdentifiabilityWarning, match="posterior-mean matrix"):
        assert usable_from_draws(draws).tolist() == [True, True]
    draws[:, 0] = eye
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert usable_from_draws(draws).tolist() == [True, False]
