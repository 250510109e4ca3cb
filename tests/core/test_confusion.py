"""K-class core math (noisycal_bayes/core/ channel, weights, calibration, em, sparse): corrected vectors, weights, targets, ECEs, EM steps."""
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from noisycal_bayes.core import x64
from noisycal_bayes.core import (annotator_weights, classwise_ece, confusion_condition, corrected_targets,
                                 corrected_vectors, multiclass_e_step, multiclass_m_step, score_groups,
                                 sparse_multiclass_e_step, sparse_multiclass_m_step, top_label_ece, usable_confusions)
from noisycal_bayes.simulate import random_confusion, simulate_multiclass
from noisycal_bayes.warnings import SmallGapWarning

FPR, TPR = np.array([0.1, 0.25, 0.05]), np.array([0.8, 0.7, 0.95])


def binary_confusion(fpr, tpr):
    return np.stack([np.stack([1 - fpr, fpr], -1), np.stack([1 - tpr, tpr], -1)], axis=1)


def onehot(y, k):
    return np.eye(k)[y]


# ------------------------------------------------------------------------------------------ corrected vectors
def test_corrected_vectors_unbiased_exactly():
    # E[T[A] | Y = y] = sum_a C[y, a] T[a, :] = e_y for every annotator and class.
    C = random_confusion(4, 5, accuracy=[0.9, 0.6, 0.5, 0.75], seed=3)
    with x64():
        T = np.asarray(corrected_vectors(C))
    np.testing.assert_allclose(np.einsum("jya,jak->jyk", C, T), np.broadcast_to(np.eye(5), (4, 5, 5)), atol=1e-12)


def test_corrected_targets_unbiased_by_simulation():
    # Per item the combined corrected vector is unbiased for e_Y, so D_i = t_i - e_{Y_i} has mean 0; the test
    # statistic is mean(D[:, k]) / (sd / sqrt(n)) per class, with z for a 1e-4 false-alarm rate over the K
    # classes (Bonferroni: two-sided 1e-4 / K each).
    n, K = 20000, 3
    sim = simulate_multiclass(n, 3, K, accuracy=[0.8, 0.65, 0.55], curve="calibrated", seed=11)
    z = norm.isf(1e-4 / (2 * K))
    with x64():
        w = annotator_weights(sim.confusion, np.bincount(sim.y, minlength=K) / n)
        t = np.asarray(corrected_targets((sim.item, sim.annotator, sim.label), n, sim.confusion, weights=w))
        d = t - onehot(sim.y, K)
        stat = np.abs(d.mean(0)) / (d.std(0, ddof=1) / np.sqrt(n))
        assert np.all(stat < z), stat
        # Negative control: the plain vote distribution (identity channels) is biased toward the noise and must fail.
        v = np.asarray(corrected_targets((sim.item, sim.annotator, sim.label), n, np.broadcast_to(np.eye(K), (3, K, K)),
                                         weights=np.ones((3, K))))
        dv = v - onehot(sim.y, K)
        assert np.max(np.abs(dv.mean(0)) / (dv.std(0, ddof=1) / np.sqrt(n))) > z


def test_corrected_targets_identity_is_vote_distribution_and_nan_rows():
    K = 3
    item, ann, lab = np.array([0, 0, 0, 1, 1, 1]), np.array([0, 1, 1, 0, 1, 2]), np.array([2, 1, 1, 0, 0, 2])
    C = np.broadcast_to(np.eye(K), (3, K, K))
    with x64():
        t = np.asarray(corrected_targets((item, ann, lab), 3, C, weights=np.ones((3, K))))
    np.testing.assert_allclose(t[0], [0, 2 / 3, 1 / 3])     # the repeat of annotator 1 counts twice
    np.testing.assert_allclose(t[1], [2 / 3, 0, 1 / 3])
    assert np.isnan(t[2]).all()                             # no response


def test_corrected_targets_zero_weight_singular_annotator_is_ignored():
    good = random_confusion(1, 3, accuracy=0.8, seed=0)[0]
    spam = np.full((3, 3), 1 / 3)
    C = np.stack([good, spam])
    with x64(), pytest.warns(SmallGapWarning, match=r"annotators \[1\]"):
        w = np.asarray(annotator_weights(C, np.ones(3) / 3))
    assert np.all(w[1] == 0) and np.allclose(w[0], 1)
    with x64():
        t = np.asarray(corrected_targets((np.array([0, 0, 1]), np.array([0, 1, 1]), np.array([2, 0, 0])), 2, C,
                                         weights=w))
        ref = np.linalg.inv(good)[2]
    np.testing.assert_allclose(t[0], ref, rtol=1e-12)
    assert np.isnan(t[1]).all()                             # only the unusable annotator labelled item 1


# ------------------------------------------------------------------------------------------ weights
def test_iv_variance_matches_enumeration():
    # Independent route: v[j, k] = sum_y pi_y sum_a C[y, a] (T[a, k] - 1[y = k])^2 by enumeration; w ∝ 1 / v.
    C = random_confusion(3, 4, accuracy=[0.9, 0.6, 0.7], seed=5)
    pi = np.array([0.1, 0.2, 0.3, 0.4])
    T = np.linalg.inv(C)
    v = np.zeros((3, 4))
    for j in range(3):
        for k in range(4):
            v[j, k] = sum(pi[y] * C[j, y, a] * (T[j, a, k] - (y == k)) ** 2 for y in range(4) for a in range(4))
    with x64():
        w = np.asarray(annotator_weights(C, pi))
    np.testing.assert_allclose(w, (1 / v) / (1 / v).sum(0), rtol=1e-10)
    with x64():
        we = np.asarray(annotator_weights(C, pi, rule="equal"))
    np.testing.assert_allclose(we, np.full((3, 4), 1 / 3))


def test_usable_confusions_flags_singular_and_condition_grows_like_inverse_gap():
    good = random_confusion(1, 3, accuracy=0.8, seed=1)[0]
    spam = np.tile([[0.2, 0.5, 0.3]], (3, 1))              # identical rows: labels independent of Y
    near = 0.999 * spam + 0.001 * np.eye(3)
    with x64():
        ok = np.asarray(usable_confusions(np.stack([good, spam, near])))
        cond = np.asarray(confusion_condition(binary_confusion(np.array([0.4, 0.45]), np.array([0.6, 0.55]))))
    assert ok.tolist() == [True, False, False]
    assert cond[1] > 1.9 * cond[0]                         # gap 0.1 vs 0.2


# ------------------------------------------------------------------------------------------ ECEs
def loop_top_label_ece(p, t, bins):
    n = len(p)
    sums = [[0, 0.0, 0.0] for _ in range(bins)]
    for i in range(n):
        k = max(range(p.shape[1]), key=lambda c: p[i, c])  # first maximum, as argmax
        conf = p[i, k]
        b = min(int(conf * bins), bins - 1)
        sums[b][0] += 1
        sums[b][1] += conf
        sums[b][2] += t[i, k]
    return sum(abs(s[1] - s[2]) for s in sums) / n


def test_top_label_ece_equals_loop_and_classwise_equals_loop():
    sim = simulate_multiclass(3000, 3, 4, seed=2)
    t = onehot(sim.y, 4)
    r = top_label_ece(sim.probs, t, bins=15)
    assert r.value == pytest.approx(loop_top_label_ece(sim.probs, t, 15), abs=1e-12)
    assert r.n_used == 3000 and r.table.count.sum() == 3000 and r.edges.shape == (16,)
    # class-wise by loops too
    per = []
    for k in range(4):
        b = np.minimum((sim.probs[:, k] * 15).astype(int), 14)
        per.append(sum(abs(sim.probs[b == m, k].sum() - t[b == m, k].sum()) for m in range(15)) / 3000)
    cw = classwise_ece(sim.probs, t, bins=15)
    np.testing.assert_allclose(cw.per_class, per, atol=1e-12)
    assert cw.value == pytest.approx(np.mean(per))


def test_top_label_ece_truth_and_nan_rows():
    # Against the clean-label probability itself (the exact calibration truth of the simulation), the top-label
    # residual is the overconfidence; with targets NaN at some items those items are left out.
    sim = simulate_multiclass(2000, 3, 3, curve="overconfident", seed=4)
    rows = np.arange(2000)
    yhat = sim.probs.argmax(1)
    r = top_label_ece(sim.probs, sim.clean_probs, bins=10)
    assert r.value > 0.02 and np.all(r.table.mean_probability[r.table.count > 0]
                                     >= r.table.mean_target[r.table.count > 0])
    t = sim.clean_probs.copy()
    t[:100] = np.nan
    r2 = top_label_ece(sim.probs, t, bins=10)
    assert r2.n_used == 1900
    assert r2.value == pytest.approx(loop_top_label_ece(sim.probs[100:], sim.clean_probs[100:], 10), abs=1e-12)
    assert sim.clean_probs[rows, yhat].mean() < sim.probs.max(1).mean()


def test_relabelling_classes_permutes_everything():
    K, n = 4, 500
    sim = simulate_multiclass(n, 3, K, seed=6)
    perm = np.array([2, 0, 3, 1])                          # class k becomes perm[k]
    inv = np.argsort(perm)
    probs2 = sim.probs[:, inv]
    C2 = sim.confusion[:, inv][:, :, inv]
    lab2 = perm[sim.label]
    pi = np.bincount(sim.y, minlength=K) / n
    with x64():
        w = np.asarray(annotator_weights(sim.confusion, pi))
        w2 = np.asarray(annotator_weights(C2, pi[inv]))
        t = np.asarray(corrected_targets((sim.item, sim.annotator, sim.label), n, sim.confusion, weights=w))
        t2 = np.asarray(corrected_targets((sim.item, sim.annotator, lab2), n, C2, weights=w2))
    np.testing.assert_allclose(w2, w[:, inv], rtol=1e-10)
    np.testing.assert_allclose(t2, t[:, inv], rtol=1e-9, atol=1e-12)
    assert top_label_ece(probs2, t2).value == pytest.approx(top_label_ece(sim.probs, t).value, abs=1e-12)
    np.testing.assert_allclose(classwise_ece(probs2, t2).per_class, classwise_ece(sim.probs, t).per_class[inv],
                               atol=1e-12)


def test_score_groups():
    p = np.array([[0.9, 0.1, 0.0], [0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.3, 0.6, 0.1], [0.5, 0.2, 0.3],
                  [0.6, 0.3, 0.1]])
    g = score_groups(p, n_quantiles=2)
    # class 0 confidences 0.9, 0.6, 0.5, 0.6 (median 0.6: ties share the upper group); class 1 0.7, 0.6.
    assert g.tolist() == [1, 1, 3, 2, 0, 1]
    assert score_groups(p, n_quantiles=1).tolist() == [0, 0, 1, 1, 0, 0]


# ------------------------------------------------------------------------------------------ EM steps
def _dense(sim, n, J):
    labels = np.full((n, J), -1)
    labels[sim.item, sim.annotator] = sim.label
    return labels


def test_pattern_and_sparse_steps_agree_with_missing_and_groups():
    n, J, K, G = 600, 3, 3, 2
    sim = simulate_multiclass(n, J, K, labels_per_item=2, seed=8)
    labels = _dense(sim, n, J)
    group = (np.arange(n) % G).astype(np.int32)
    pats, inv = np.unique(labels, axis=0, return_inverse=True)
    counts = np.zeros((G, len(pats)))
    np.add.at(counts, (group, inv.ravel()), 1.0)
    C = random_confusion(J, K, accuracy=0.7, seed=9)
    pi = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    with x64():
        ll_p, T_p = multiclass_e_step(pats, counts, C, pi)
        ll_s, T_s = sparse_multiclass_e_step((sim.item, sim.annotator, sim.label), group, C, pi)
        assert float(ll_p) == pytest.approx(float(ll_s), abs=1e-10 * abs(float(ll_s)))
        np.testing.assert_allclose(np.asarray(T_p)[group, inv.ravel()], np.asarray(T_s), atol=1e-12)
        Cp, pp = multiclass_m_step(pats, counts, T_p)
        Cs, ps = sparse_multiclass_m_step((sim.item, sim.annotator, sim.label), group, G, J, T_s)
        np.testing.assert_allclose(np.asarray(Cp), np.asarray(Cs), atol=1e-12)
        np.testing.assert_allclose(np.asarray(pp), np.asarray(ps), atol=1e-12)
        # Independent route for the log-likelihood: a plain loop over items.
        ref = 0.0
        for i in range(n):
            obs = labels[i] >= 0
            terms = [np.log(pi[group[i], y]) + np.sum(np.log(C[np.flatnonzero(obs), y, labels[i, obs]]))
                     for y in range(K)]
            ref += np.log(np.sum(np.exp(terms)))
        assert float(ll_s) == pytest.approx(ref, abs=1e-9)


def test_sparse_steps_gold_and_weights():
    item, ann, lab = np.array([0, 0, 1, 1, 2]), np.array([0, 1, 0, 1, 0]), np.array([1, 1, 0, 2, 2])
    C = random_confusion(2, 3, accuracy=0.7, seed=1)
    pi = np.array([[0.5, 0.3, 0.2]])
    gold = np.array([-1, 0, -1])
    with x64():
        ll, T = sparse_multiclass_e_step((item, ann, lab), np.zeros(3, np.int32), C, pi, gold)
        T = np.asarray(T)
        # gold item 1: T one-hot and the log-likelihood term log P(Y = 0, A)
        np.testing.assert_allclose(T[1], [1, 0, 0])
        ll_free, _ = sparse_multiclass_e_step((item, ann, lab), np.zeros(3, np.int32), C, pi)
        full = np.log(pi[0, 0] * C[0, 0, 0] * C[1, 0, 2])
        marg = np.log(np.sum(pi[0] * C[0, :, 0] * C[1, :, 2]))
        assert float(ll) - float(ll_free) == pytest.approx(full - marg, abs=1e-12)
        # item weights: weight 2 on item 0 equals duplicating item 0's responses as a new item
        llw, _ = sparse_multiclass_e_step((item, ann, lab), np.zeros(3, np.int32), C, pi, None, np.array([2.0, 1, 1]))
        ll4, _ = sparse_multiclass_e_step((np.r_[item, 3, 3], np.r_[ann, 0, 1], np.r_[lab, 1, 1]),
                                          np.zeros(4, np.int32), C, pi)
        assert float(llw) == pytest.approx(float(ll4), abs=1e-12)


# ------------------------------------------------------------------------------------------ errors
def test_errors():
    p = np.array([[0.5, 0.4], [0.2, 0.8]])
    with pytest.raises(ValueError, match=r"rows must sum to 1.*items \[0\]"):
        top_label_ece(p, np.eye(2))
    with pytest.raises(ValueError, match="must have the shape of `probs`"):
        top_label_ece(np.eye(2), np.eye(3))
    with pytest.raises(ValueError, match="`bins` must be a positive integer"):
        classwise_ece(np.eye(2), np.eye(2), bins=0)
    with pytest.raises(ValueError, match="shape \\(n_items, n_classes\\)"):
        score_groups(np.ones(3))
    with pytest.raises(ValueError, match="`n_quantiles`"):
        score_groups(np.eye(2), n_quantiles=0)
    with pytest.raises(ValueError, match="`rule` must be 'iv' or 'equal'"):
        annotator_weights(np.stack([np.eye(2)] * 2), np.ones(2) / 2, rule="gap")
    with pytest.raises(ValueError, match=r"`prevalence_overall` must have shape \(2,\)"):
        annotator_weights(np.stack([np.eye(2)] * 2), np.ones(3) / 3)
    with pytest.raises(ValueError, match="`weights` must have shape"):
        corrected_targets((np.array([0]), np.array([0]), np.array([0])), 1, np.stack([np.eye(2)] * 2),
                          weights=np.ones(2))
    with pytest.raises(ValueError, match="`max_condition` must be >= 1"):
        usable_confusions(np.stack([np.eye(2)]), max_condition=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with x64():
            annotator_weights(np.stack([np.eye(2)] * 2), np.ones(2) / 2)  # all usable: no warning
