"""plan_labels (noisycal_bayes/labels/plan.py): one-step scores against brute-force preposterior computations, the
Kalman update of the channel covariance against an explicit refit of the Fisher information, invariances, a negative
control (random relabelling narrows the interval less) and the documented errors."""
from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from noisycal_bayes.data import AnnotationSet, Binning, MulticlassAnnotationSet
from noisycal_bayes.inference import fit_em
from noisycal_bayes.labels import PlanTarget, plan_labels
from noisycal_bayes.labels import plan as P
from noisycal_bayes.labels._posterior import row_posteriors
from noisycal_bayes.reference.calibration import ece
from noisycal_bayes.simulate import simulate_annotations, simulate_multiclass

FPR, TPR = [0.1, 0.3, 0.2], [0.85, 0.7, 0.8]


@pytest.fixture(scope="module")
def binary():
    sim = simulate_annotations(40, fpr=FPR, tpr=TPR, curve="overconfident", seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_em(sim.data, model="histogram", groups=Binning.equal_width(4))
    return sim, fit


@pytest.fixture(scope="module")
def k3():
    sim = simulate_multiclass(40, 3, 3, accuracy=0.75, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_em(sim.data)
    return sim, fit


def _weights(n):
    return np.linspace(0.5, 2.0, n) / n


def _binary_q(data, fit):
    p = row_posteriors(data, fit, n_draws=None).item_mean()
    return np.stack([1 - p, p], 1)


def _with_label(data, i, j, label):
    item, ann, lab = (np.asarray(v) for v in data.responses)
    args = (np.append(item, i), np.append(ann, j), np.append(lab, label))
    if data.kind == "binary":
        return AnnotationSet.from_responses(*args, n_items=data.n_items, n_annotators=data.n_annotators,
                                            scores=np.asarray(data.scores))
    return MulticlassAnnotationSet.from_responses(*args, n_items=data.n_items, n_annotators=data.n_annotators,
                                                  n_classes=data.n_classes, probs=np.asarray(data.probs))


def test_label_gain_equals_brute_force_preposterior_binary(binary):
    """A linear target sum_i w_i q_i1 has label-part variance sum_i w_i^2 q_i1 (1 - q_i1) exactly; the expected
    variance after one more label from j on i, enumerated over the label's two values with the clean-label
    posterior recomputed from the data with that label (row_posteriors at the fitted channels), must equal the plan's
    label_gain (same channels; only the model's arithmetic differs)."""
    sim, fit = binary
    data, n = sim.data, sim.data.n_items
    w = jnp.asarray(_weights(n))
    target = PlanTarget("linear", lambda q: (w * q[:, 1]).sum())
    plan = plan_labels(data, fit, budget=1, target=target)
    scores = plan.scores.set_index(["item", "annotator"])
    q = _binary_q(data, fit)
    conf = np.asarray(fit.confusion)

    def variance(qq):
        return float((np.asarray(w) ** 2 * qq[:, 1] * qq[:, 0]).sum())

    before = variance(q)
    for i, j in [(0, 0), (5, 1), (17, 2), (int(np.argmin(np.abs(q[:, 1] - 0.5))), 1)]:
        after = 0.0
        for label in (0, 1):
            p_label = float(q[i] @ conf[j, :, label])
            after += p_label * variance(_binary_q(_with_label(data, i, j, label), fit))
        assert scores.loc[(data.item_ids[i], data.annotator_ids[j]), "label_gain"] == pytest.approx(
            before - after, rel=1e-6, abs=1e-14)


def test_label_gain_equals_brute_force_preposterior_k3(k3):
    """The same enumeration over the three values of the new label, K = 3, target sum_i w_i q_i,yhat_i."""
    sim, fit = k3
    data = sim.data
    n = data.n_items
    yhat = np.asarray(data.probs).argmax(1)
    w = jnp.asarray(_weights(n))
    pick = jnp.asarray(np.eye(3)[yhat])
    target = PlanTarget("linear", lambda q: (w * (q * pick).sum(1)).sum())
    scores = plan_labels(data, fit, budget=1, target=target).scores.set_index(["item", "annotator"])
    q = np.asarray(fit.clean_label_probability(data))
    conf = np.asarray(fit.confusion)

    def variance(qq):
        t = qq[np.arange(n), yhat]
        return float((np.asarray(w) ** 2 * t * (1 - t)).sum())

    before = variance(q)
    for i, j in [(0, 0), (9, 2), (int(np.argmin(q.max(1))), 1)]:
        after = sum(float(q[i] @ conf[j, :, label]) * variance(
            np.asarray(fit.clean_label_probability(_with_label(data, i, j, label)))) for label in range(3))
        assert scores.loc[(i, j), "label_gain"] == pytest.approx(before - after, rel=1e-6, abs=1e-14)


def test_channel_gain_equals_explicit_fisher_refit(k3):
    """Kalman (Woodbury) update of Sigma_j = explicit constrained inverse of (I_j + Delta I), with I_j assembled
    here by a loop over labels (an independent implementation of fisher_covariance's sum)."""
    sim, fit = k3
    data = sim.data
    q = np.asarray(fit.clean_label_probability(data))
    cbar = np.clip(np.asarray(fit.confusion), 1e-12, 1)
    item, ann, lab = (np.asarray(v, np.int64) for v in data.responses)
    k, d = 3, 9

    def constrained_inverse(info):
        A = np.kron(np.eye(k), np.ones(k))  # row sums of C[y, :] in vec (y, a) order
        kkt = np.block([[info, A.T], [A, np.zeros((k, k))]])
        return np.linalg.inv(kkt)[:d, :d]

    j = 1
    info = np.diag(1 / cbar[j].ravel())
    for r in np.flatnonzero(ann == j):
        qm = q[item[r]] / cbar[j, :, lab[r]]
        qm /= qm.sum()
        for a in range(k):
            u = np.zeros((k, k))
            u[:, a] = qm / np.sqrt(qm @ cbar[j, :, a])
            info += np.outer(u.ravel(), u.ravel())
    sigma = P.fisher_covariance(q, cbar, item, ann, lab)[j]
    np.testing.assert_allclose(sigma, constrained_inverse(info), atol=1e-10)
    g = np.random.default_rng(0).normal(size=d)
    i = 7
    extra = sum(np.outer(c, c) for c in P._label_u(q[i:i + 1], cbar[j])[0].T)
    explicit = g @ sigma @ g - g @ constrained_inverse(info + extra) @ g
    assert P._kalman_gain(sigma, g, P._label_u(q[i:i + 1], cbar[j]))[0] == pytest.approx(explicit, rel=1e-8)


def test_nc_ece_target_value_is_the_sample_ece_at_one_hot_labels(binary):
    """At q = e_Y the default target is the binned ECE of the scores against Y (reference.calibration.ece)."""
    sim, _ = binary
    tgt = P._nc_ece_target(sim.data, "nc_ece", 10, "test")
    y = np.asarray(sim.clean_labels)
    assert tgt.value(np.eye(2)[y]) == pytest.approx(ece(np.asarray(sim.data.scores), y, bins=10), abs=1e-12)


def test_gold_items_and_certain_items_get_no_label_value(binary):
    """A gold-labelled item is no candidate for a gold check and gains nothing from a new label; an item whose clean
    label is certain gains ~0 from a gold check beyond the channel part."""
    sim, fit = binary
    data = sim.data
    gold = np.full(data.n_items, -1)
    gold[[2, 11]] = np.asarray(sim.clean_labels)[[2, 11]]
    item, ann, lab = data.responses
    gdata = AnnotationSet.from_responses(item, ann, lab, scores=np.asarray(data.scores), gold=gold)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gfit = fit_em(gdata, model="histogram", groups=Binning.equal_width(4))
    gplan = plan_labels(gdata, gfit, budget=3, kind="gold")
    assert not set(gplan.scores["item"]) & {2, 11}
    lab_scores = plan_labels(gdata, gfit, budget=1).scores
    assert lab_scores.loc[lab_scores["item"].isin([2, 11]), "label_gain"].max() == pytest.approx(0.0, abs=1e-15)
    q = _binary_q(data, fit)
    sure = np.flatnonzero(np.minimum(q[:, 0], q[:, 1]) < 1e-9)
    scores = plan_labels(data, fit, budget=1, kind="gold").scores.set_index("item")
    assert sure.size and (scores.loc[sure, "label_gain"] < 1e-12).all()


def test_greedy_batch_has_diminishing_returns_and_narrows(binary):
    sim, fit = binary
    plan = plan_labels(sim.data, fit, budget=15)
    gains = plan.table["gain"].to_numpy()
    assert len(plan.table) == 15 and (gains >= 0).all()
    assert plan.width_after < plan.width_before
    assert np.all(np.diff(plan.table["variance_after"]) <= 1e-15)
    # the batch's first step is the best one-step candidate
    assert gains[0] == pytest.approx(plan.scores["gain"].iloc[0])


def test_crowd_pairs_only_new_to_their_annotators():
    from noisycal_bayes.simulate.crowd import simulate_crowd

    sim = simulate_crowd(120, 8, labels_per_item=3, curve="overconfident", seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_em(sim.data, model="dawid_skene")
    plan = plan_labels(sim.data, fit, budget=10, repeats=False)
    seen = set(zip(np.asarray(sim.data.item_ids)[sim.data.responses[0]],
                   np.asarray(sim.data.annotator_ids)[sim.data.responses[1]]))
    pairs = set(zip(plan.table["item"], plan.table["annotator"]))
    assert len(pairs) == 10 and not pairs & seen


def test_negative_control_random_relabelling_narrows_less():
    """Across 8 simulated data sets, the plan's 30 labels must narrow the latent-label interval of the sample NC-ECE
    more than 30 labels on random (item, annotator) pairs: the mean difference of the reductions exceeds t * its
    standard error (one-sided, false-alarm rate 0.01, Student t with 7 degrees of freedom: t = 3.00). New labels come
    from the true channels."""
    from scipy.stats import t as student

    diffs = []
    for seed in range(8):
        sim = simulate_annotations(200, fpr=FPR, tpr=TPR, curve="overconfident", seed=10 + seed)
        rng = np.random.default_rng(seed)
        data, y = sim.data, np.asarray(sim.clean_labels)

        def fitted(d):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return fit_em(d, model="histogram", groups=Binning.equal_width(10))

        def width(d):
            p = _binary_q(d, fitted(d))[:, 1]
            draws = np.random.default_rng(0).random((1000, d.n_items)) < p
            z = np.asarray(d.scores)
            idx = np.minimum((z * 10).astype(int), 9)
            ece_s = np.abs((draws - z) @ np.eye(10)[idx]).sum(1) / d.n_items
            lo, hi = np.quantile(ece_s, [0.05, 0.95])
            return hi - lo

        def add(items, anns):
            rates = np.where(y[items] == 1, np.asarray(TPR)[anns], np.asarray(FPR)[anns])
            labs = (rng.random(items.size) < rates).astype(int)
            item, ann, lab = (np.asarray(v) for v in data.responses)
            return AnnotationSet.from_responses(np.append(item, items), np.append(ann, anns), np.append(lab, labs),
                                                scores=np.asarray(data.scores))

        before = width(data)
        plan = plan_labels(data, fitted(data), budget=30)
        planned = add(plan.table["item"].to_numpy(int), plan.table["annotator"].to_numpy(int))
        rand = add(rng.integers(200, size=30), rng.integers(3, size=30))
        diffs.append((before - width(planned)) - (before - width(rand)))
    diffs = np.asarray(diffs)
    se = diffs.std(ddof=1) / np.sqrt(diffs.size)
    assert diffs.mean() > student.ppf(0.99, diffs.size - 1) * se, diffs


def test_errors(binary, k3):
    sim, fit = binary
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="budget"):
            plan_labels(sim.data, fit, budget=bad)
    with pytest.raises(ValueError, match=r"annotators \['zz'\] are not in the data"):
        plan_labels(sim.data, fit, budget=2, annotators=[0, "zz"])
    with pytest.raises(ValueError, match="kind"):
        plan_labels(sim.data, fit, budget=2, kind="relabel")
    with pytest.raises(ValueError, match="target"):
        plan_labels(sim.data, fit, budget=2, target="auc")
    with pytest.raises(ValueError, match="no \\(item, annotator\\) pair is left"):
        plan_labels(sim.data, fit, budget=2, repeats=False)
    ksim, kfit = k3
    with pytest.raises(ValueError, match="target='nc_ece' is the paper's binary NC-ECE"):
        plan_labels(ksim.data, kfit, budget=2, target="nc_ece")
    with pytest.raises(ValueError, match="different kinds"):
        plan_labels(ksim.data, fit, budget=2)


def test_callable_target_without_jax_uses_finite_differences(binary):
    """A NumPy-only target (not traceable) gives the same scores as its JAX twin."""
    sim, fit = binary
    w = _weights(sim.data.n_items)

    def numpy_target(q):
        return float(np.asarray(w) @ np.asarray(q)[:, 1] ** 2)

    wj = jnp.asarray(w)
    a = plan_labels(sim.data, fit, budget=3, target=numpy_target).scores
    b = plan_labels(sim.data, fit, budget=3, target=lambda q: (wj * q[:, 1] ** 2).sum()).scores
    np.testing.assert_allclose(a["gain"].to_numpy(), b["gain"].to_numpy(), rtol=1e-5, atol=1e-14)


def test_fast_label_channel_gains_equal_the_dense_kalman_gain(k3):
    sim, fit = k3
    q = np.asarray(fit.clean_label_probability(sim.data))
    cbar = np.asarray(fit.confusion)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(9, 9))
    sigma, g = x @ x.T / 90, rng.normal(size=9)
    np.testing.assert_allclose(P._label_channel_gains(sigma, g, q, cbar[0]),
                               P._kalman_gain(sigma, g, P._label_u(q, cbar[0])), rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("kind", ["label", "gold"])
def test_k3_plans_narrow_the_top_label_interval(k3, kind):
    sim, fit = k3
    plan = plan_labels(sim.data, fit, budget=5, kind=kind)
    assert plan.target == "top_label_nc_ece" and len(plan.table) == 5
    assert plan.width_after < plan.width_before
    if kind == "gold":
        assert plan.table["item"].is_unique
