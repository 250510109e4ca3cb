"""Tests for noisycal_bayes/reference/confident_learning.py (Northcutt et al., seeds/003)."""
import numpy as np
import pytest

from noisycal_bayes.reference.confident_learning import (confident_joint, confident_learning,
                                                         normalized_margin)


def _loop_confident_joint(labels, probs):
    """Independent route: the per-item loop of the method's description (JAIR 2021, §3.1)."""
    k = probs.shape[1]
    t = [probs[labels == c, c].mean() for c in range(k)]
    cj = np.zeros((k, k), dtype=np.int64)
    for s, row in zip(labels, probs):
        passing = [c for c in range(k) if row[c] >= t[c]]
        if passing:
            cj[s, max(passing, key=lambda c: row[c])] += 1
    for c in range(k):
        cj[c, c] = max(cj[c, c], 1)
    return cj


# Hand example, binary scores z = P(class 1), given labels s.
#   thresholds: class 1 over items {0, 1}: (0.9 + 0.8) / 2 = 0.85;
#               class 0 over items {2, 3, 4, 5}: (0.8 + 0.9 + 0.05 + 0.95) / 4 = 0.675.
#   item 0 (s=1): p1 = .9 >= .85 -> (1, 1); item 1 (s=1): p1 = .8 < .85, p0 = .2 < .675 -> not counted;
#   items 2, 3, 5 (s=0): p0 >= .675 -> (0, 0); item 4 (s=0): p1 = .95 >= .85 -> (0, 1).
Z = np.array([0.9, 0.8, 0.2, 0.1, 0.95, 0.05])
S = np.array([1, 1, 0, 0, 0, 0])


def test_hand_example_thresholds_joint_and_calibration():
    res = confident_learning(S, Z)
    np.testing.assert_allclose(res.thresholds, [0.675, 0.85])
    assert res.confident_joint.tolist() == [[3, 1], [0, 1]]
    # Calibration: row 0 (3, 1) rescaled to 4 labelled-0 items stays (3, 1); row 1 (0, 1) -> (0, 2); total 6.
    np.testing.assert_allclose(res.calibrated_joint, [[3, 1], [0, 2]])
    np.testing.assert_allclose(res.joint, np.array([[3, 1], [0, 2]]) / 6)
    # noise matrix P(s = i | y = j): column 1 is (1, 2) / 3; inverse P(y = j | s = i): row 0 is (3, 1) / 4.
    np.testing.assert_allclose(res.noise_matrix, [[1, 1 / 3], [0, 2 / 3]])
    np.testing.assert_allclose(res.inverse_noise_matrix, [[0.75, 0.25], [0, 1]])
    assert res.n_issues_estimate == pytest.approx(6 * (1 - 5 / 6))
    # prune_by_noise_rate: round(C_cal[0, 1]) = 1 item labelled 0 with the largest p1 - p0: item 4.
    assert res.is_issue.tolist() == [False, False, False, False, True, False]
    # Normalised margin (2 p_s - 1 + 1) / 2 = p_s: [.9, .8, .8, .9, .05, .95]; item 4 first, then 1 and 2.
    np.testing.assert_allclose(res.label_quality, [0.9, 0.8, 0.8, 0.9, 0.05, 0.95])
    assert res.ranking.tolist()[:3] == [4, 1, 2]
    assert res.confident_class.tolist() == [1, -1, 0, 0, 1, 0]


def test_three_class_joint_matches_the_loop_and_margins_by_hand():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(400, 3)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = np.where(rng.random(400) < 0.8, probs.argmax(axis=1), rng.integers(0, 3, 400))
    np.testing.assert_array_equal(confident_joint(labels, probs, calibrate=False), _loop_confident_joint(labels, probs))
    cal = confident_joint(labels, probs)
    np.testing.assert_allclose(cal.sum(axis=1), np.bincount(labels, minlength=3))
    assert cal.sum() == pytest.approx(400)
    # Margin of item 0 by hand: own probability minus the largest other one, mapped to [0, 1].
    p0, s0 = probs[0], labels[0]
    assert normalized_margin(labels, probs)[0] == pytest.approx((p0[s0] - np.delete(p0, s0).max() + 1) / 2)
    res = confident_learning(labels, probs)
    np.testing.assert_allclose(res.noise_matrix.sum(axis=0), 1)
    np.testing.assert_allclose(res.inverse_noise_matrix.sum(axis=1), 1)


def test_clean_labels_and_sharp_probabilities_find_no_issue():
    labels = np.array([0, 1, 1, 0, 1, 0, 0, 1])
    z = np.where(labels == 1, 0.97, 0.02)
    res = confident_learning(labels, z)
    assert res.confident_joint.tolist() == [[4, 0], [0, 4]]
    np.testing.assert_allclose(res.noise_matrix, np.eye(2))
    assert res.n_issues == 0 and res.n_issues_estimate == 0


def test_invariant_to_item_order_and_to_relabelling_the_classes():
    rng = np.random.default_rng(0)
    z = rng.beta(0.5, 0.5, 300)
    s = np.where(rng.random(300) < 0.9, (z > 0.5).astype(int), 1 - (z > 0.5).astype(int))
    res = confident_learning(s, z)
    perm = rng.permutation(300)
    res_p = confident_learning(s[perm], z[perm])
    np.testing.assert_allclose(res_p.calibrated_joint, res.calibrated_joint)
    np.testing.assert_allclose(res_p.label_quality, res.label_quality[perm])
    np.testing.assert_array_equal(res_p.is_issue, res.is_issue[perm])
    # Swapping class names swaps rows and columns of every matrix and keeps each item's quality.
    res_f = confident_learning(1 - s, 1 - z)
    np.testing.assert_allclose(res_f.calibrated_joint, res.calibrated_joint[::-1, ::-1])
    np.testing.assert_allclose(res_f.noise_matrix, res.noise_matrix[::-1, ::-1])
    np.testing.assert_allclose(res_f.label_quality, res.label_quality)


def test_prune_by_noise_rate_flags_the_calibrated_off_diagonal_counts():
    rng = np.random.default_rng(5)
    z = rng.beta(0.4, 0.4, 2000)
    y = (rng.random(2000) < z).astype(int)
    s = np.where(rng.random(2000) < np.where(y == 1, 0.1, 0.2), 1 - y, y)
    res = confident_learning(s, z)
    for i in (0, 1):
        assert int(res.is_issue[s == i].sum()) == int(np.round(res.calibrated_joint[i, 1 - i]))
    # The flagged items of class i are the ones with the lowest self-confidence in that class.
    for i in (0, 1):
        members = np.flatnonzero(s == i)
        flagged = res.is_issue[members]
        if flagged.any() and (~flagged).any():
            assert res.label_quality[members][flagged].max() <= res.label_quality[members][~flagged].min()
    cl = confident_learning(s, z, filter_by="confident_learning")
    # "confident_learning" flags exactly the items counted off the diagonal of the raw confident joint.
    assert cl.n_issues == int(res.confident_joint.sum() - np.trace(res.confident_joint))
    np.testing.assert_array_equal(cl.is_issue, (res.confident_class >= 0) & (res.confident_class != s))
    frame = res.to_frame(item_ids=np.arange(2000) + 100)
    assert frame["item"].iloc[0] == res.ranking[0] + 100
    assert frame["label_quality"].is_monotonic_increasing


@pytest.mark.parametrize("labels, probs, match", [
    (np.array([0, 1, 2]), np.array([0.2, 0.8, 0.5]),
     r"`labels` must be integer classes in 0\.\.1; got \[2\] at items \[2\]"),
    (np.array([0, 1, -1]), np.array([0.2, 0.8, 0.5]), r"Missing labels are not allowed"),
    (np.array([0, 1, 0.5]), np.array([0.2, 0.8, 0.5]), r"integer classes"),
    (np.array([0, 1]), np.array([0.2, 0.8, 0.5]), r"same number of items; got 2 and 3"),
    (np.array([0, 1, 1]), np.array([0.2, 1.8, 0.5]), r"must hold probabilities in \[0, 1\].*items \[1\]"),
    (np.array([0, 1, 1]), np.array([0.2, np.nan, 0.5]), r"in \[0, 1\]; got \[nan, nan\] at items \[1\]"),
    (np.array([0, 1, 1]), np.array([[0.2, 0.7], [0.5, 0.5], [0.1, 0.9]]), r"rows must sum to 1 \(within 0\.0001\); items \[0\] sum to \[0\.9\]"),
    (np.array([1, 1, 1]), np.array([0.2, 0.8, 0.5]), r"classes \[0\] never occur"),
    (np.array([[0, 1]]), np.array([0.2, 0.8]), r"one noisy label per item"),
    (np.array([0, 1]), np.ones((2, 1)), r"at least 2 classes"),
])
def test_bad_inputs_are_named(labels, probs, match):
    with pytest.raises(ValueError, match=match):
        confident_learning(labels, probs)


def test_bad_filter_and_item_ids():
    with pytest.raises(ValueError, match="`filter_by` must be one of"):
        confident_learning(S, Z, filter_by="both")
    with pytest.raises(ValueError, match="`item_ids` must have shape"):
        confident_learning(S, Z).to_frame(item_ids=[1, 2])
