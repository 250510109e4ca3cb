"""Tests for the K-class label issues (labels/issues.py) and corrected accuracy (labels/accuracy.py).

Clean-label posteriors come from a local stand-in (the exact posterior given known confusion matrices and
prevalence, 5 lines of NumPy) instead of the multiclass EM, which another module provides.
"""
import numpy as np
import pytest

from noisycal_bayes.labels import corrected_accuracy_multiclass, label_issues, multiclass_label_issues
from noisycal_bayes.warnings import DataWarning


def simulate(n, k, j, *, seed, acc=0.7):
    rng = np.random.default_rng(seed)
    prev = rng.dirichlet(5 * np.ones(k))
    y = rng.choice(k, size=n, p=prev)
    conf = np.empty((j, k, k))
    for a in range(j):
        for c in range(k):
            conf[a, c] = np.insert(rng.dirichlet(np.ones(k - 1)) * (1 - acc), c, acc)
    cdf = np.cumsum(conf[np.arange(j)[None, :], y[:, None]], axis=2)
    labels = (rng.random((n, j))[:, :, None] > cdf).sum(axis=2)
    resp = (np.repeat(np.arange(n), j), np.tile(np.arange(j), n), labels.reshape(-1))
    return y, labels, conf, prev, resp


def exact_posterior(labels, conf, prev):
    """P(Y_i = k | A_i) = prev_k prod_j C_j[k, A_ij] / normaliser (log space)."""
    logp = np.log(prev)[None, :] + sum(np.log(conf[a][:, labels[:, a]]).T for a in range(labels.shape[1]))
    logp -= logp.max(axis=1, keepdims=True)  # shift before exp: no overflow
    post = np.exp(logp)
    return post / post.sum(axis=1, keepdims=True)


def test_label_issues_columns_ranking_and_values():
    y, labels, conf, prev, resp = simulate(300, 4, 3, seed=0)
    q = exact_posterior(labels, conf, prev)
    out = multiclass_label_issues(resp, q)
    assert out["p_majority_wrong"].is_monotonic_decreasing and out["rank"].tolist() == list(range(1, 301))
    row = out.set_index("item").loc[7]
    votes = np.bincount(labels[7], minlength=4)
    assert row["majority_label"] == votes.argmax() and row["n_majority_votes"] == votes.max()
    assert row["p_majority_wrong"] == pytest.approx(1 - q[7, votes.argmax()], abs=1e-12)
    assert row["likely_class"] == q[7].argmax() and row["p_likely_class"] == pytest.approx(q[7].max())
    assert np.isnan(row["p_majority_wrong_lower"])  # a point posterior has no interval
    assert out.attrs["expected_total_errors"] == pytest.approx(out["expected_errors"].iloc[-1])
    # The ranking finds wrong majorities: the top 30 hold more of them than the base rate (negative control:
    # a reversed ranking holds fewer).
    maj = out["majority_label"].to_numpy().astype(int)
    wrong = maj != y[out["item"].to_numpy()]
    assert wrong[:30].mean() > 2 * wrong.mean() > 2 * wrong[-30:].mean()


def test_label_issues_with_draws_gives_intervals_and_class_names():
    y, labels, conf, prev, resp = simulate(200, 3, 3, seed=1)
    rng = np.random.default_rng(2)
    # one exact posterior per confusion draw (rows Dirichlet around the truth)
    draws = np.stack([exact_posterior(labels, np.apply_along_axis(lambda r: rng.dirichlet(200 * r), 2, conf), prev)
                      for _ in range(20)])
    out = multiclass_label_issues(resp, draws, classes=["cat", "dog", "fox"], level=0.8)
    assert set(out["majority_label"]) <= {"cat", "dog", "fox"} and out.attrs["n_draws"] == 20
    ok = out["p_majority_wrong_lower"] <= out["p_majority_wrong"] + 1e-12
    assert ok.all() and (out["p_majority_wrong"] <= out["p_majority_wrong_upper"] + 1e-12).all()


def test_label_issues_relabelling_classes_permutes_only():
    y, labels, conf, prev, resp = simulate(150, 3, 3, seed=6)
    q = exact_posterior(labels, conf, prev)
    perm = np.array([1, 2, 0])
    inv = np.argsort(perm)
    a = multiclass_label_issues(resp, q).set_index("item").sort_index()
    b = multiclass_label_issues((resp[0], resp[1], inv[resp[2]]), q[:, perm]).set_index("item").sort_index()
    untied = ~a["tie"].to_numpy()  # ties go to the lowest index, which relabelling moves
    np.testing.assert_allclose(a["p_majority_wrong"][untied], b["p_majority_wrong"][untied], atol=1e-12)
    np.testing.assert_array_equal(perm[b["likely_class"].to_numpy().astype(int)], a["likely_class"].to_numpy())


def test_unlabelled_items_come_last():
    resp = (np.array([0, 2]), np.array([0, 0]), np.array([1, 0]))
    q = np.array([[0.5, 0.5], [0.5, 0.5], [0.9, 0.1]])
    out = multiclass_label_issues(resp, q)
    assert out["item"].iloc[-1] == 1 and np.isnan(out["p_majority_wrong"].iloc[-1])


def test_corrected_accuracy_point_and_naive_numbers():
    y, labels, conf, prev, resp = simulate(400, 3, 3, seed=7)
    q = exact_posterior(labels, conf, prev)
    rng = np.random.default_rng(0)
    p = 0.6 * np.eye(3)[np.where(rng.random(400) < 0.8, y, rng.integers(0, 3, 400))] + 0.4 * rng.dirichlet(
        np.ones(3), 400)
    res = corrected_accuracy_multiclass(p, q, responses=resp, n_replicates=500)
    yhat = p.argmax(axis=1)
    assert res.accuracy == pytest.approx(q[np.arange(400), yhat].mean(), abs=1e-12)
    maj = np.array([np.bincount(labels[i], minlength=3).argmax() for i in range(400)])
    assert res.majority_accuracy == pytest.approx(np.mean(maj == yhat))
    assert res.annotator_accuracy == pytest.approx(np.mean([(labels[:, a] == yhat).mean() for a in range(3)]))
    assert res.lower < res.accuracy < res.upper and res.parameter_uncertainty == "none (point estimate)"
    assert res.target.startswith("population")


def test_corrected_accuracy_interval_covers_the_sample_accuracy():
    # Exact posteriors (known confusion and prevalence) and bootstrap=False: the interval is for these items'
    # clean-label accuracy. The classifier sees only the labels (plus noise), so its predictions carry no
    # information about Y beyond what the posterior conditions on (the unbiasedness condition). Over 60 data
    # sets the number covered is Binomial(60, 0.9) when correct; accept >= 47 (P(X < 47) = 0.006). Negative
    # control: a posterior that ignores the labels (the prevalence) must cover far less often.
    covered, control = 0, 0
    for s in range(60):
        y, labels, conf, prev, resp = simulate(300, 3, 3, seed=100 + s)
        q = exact_posterior(labels, conf, prev)
        rng = np.random.default_rng(s)
        p = 0.5 * np.eye(3)[labels[:, 0]] + 0.5 * rng.dirichlet(np.ones(3), 300)
        truth = np.mean(p.argmax(axis=1) == y)
        res = corrected_accuracy_multiclass(p, q, bootstrap=False, n_replicates=200, seed=s)
        covered += res.lower <= truth <= res.upper
        bad = corrected_accuracy_multiclass(p, np.broadcast_to(prev, (300, 3)), bootstrap=False, n_replicates=200)
        control += bad.lower <= truth <= bad.upper
    assert covered >= 47
    assert control < 30


def test_groups_check_warns_when_predictions_vary_within_a_group():
    p = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4], [0.1, 0.9]])
    q = np.full((4, 2), 0.5)
    res = corrected_accuracy_multiclass(p, q, groups=np.array([0, 1, 0, 1]), n_replicates=50)
    assert res.conditioned is True
    with pytest.warns(DataWarning, match=r"groups \[0\]"):
        res = corrected_accuracy_multiclass(p, q, groups=np.array([0, 0, 1, 2]), n_replicates=50)
    assert res.conditioned is False


@pytest.mark.parametrize("call, match", [
    (lambda: multiclass_label_issues((np.array([0]), np.array([0]), np.array([3])), np.full((1, 3), 1 / 3)),
     "class indices"),
    (lambda: multiclass_label_issues((np.array([0]), np.array([0]), np.array([0])), np.full((1, 3), 0.5)),
     "sum to 1"),
    (lambda: multiclass_label_issues((np.array([0]), np.array([0]), np.array([0])), np.ones(3)), "shape"),
    (lambda: multiclass_label_issues((np.array([0]), np.array([0]), np.array([0])), np.full((1, 2), 0.5),
                                     classes=["a"]), "name the 2 classes"),
    (lambda: corrected_accuracy_multiclass(np.full((2, 2), 0.5), np.full((3, 2), 0.5)), "one row per item"),
    (lambda: corrected_accuracy_multiclass(np.full((2, 2), 0.5), np.full((2, 3), 1 / 3)), "one column per class"),
    (lambda: corrected_accuracy_multiclass(np.full((2, 2), 0.5), np.full((2, 2), 0.5), level=0), "level"),
    (lambda: corrected_accuracy_multiclass(np.full((2, 2), 0.5), np.full((2, 2), 0.5), groups=[0.5, 1]), "groups"),
    (lambda: corrected_accuracy_multiclass(np.full((2, 2), 0.6), np.full((2, 2), 0.5)), "sum to 1"),
])
def test_bad_inputs_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()
