"""Tests for noisycal_bayes/labels/metrics.py: clean-label metrics (issue 37, parts 1 and 2).

Independent implementation: scikit-learn's metrics (weighted) for the kernel; known truth in simulations for the
estimates (tolerances from the intervals' and the corrected labels' standard errors); negative controls (the
majority vote is biased on the same data); invariances (K = 2 against binary, soft one-hot targets against hard).
"""
import warnings

import numpy as np
import pytest
from sklearn import metrics as skm

from noisycal_bayes import simulate_annotations
from noisycal_bayes.data import AnnotationSet
from noisycal_bayes.inference import fit_em
from noisycal_bayes.labels import MetricKernel, clean_metrics
from noisycal_bayes.labels.accuracy import threshold_bins
from noisycal_bayes.labels.metrics import BINARY_METRICS
from noisycal_bayes.simulate import simulate_multiclass
from noisycal_bayes.warnings import DataWarning


def _sklearn_binary(y, z, w, t=0.5):
    yhat = (z >= t).astype(int)
    return {"accuracy": skm.accuracy_score(y, yhat, sample_weight=w),
            "balanced_accuracy": skm.balanced_accuracy_score(y, yhat, sample_weight=w),
            "sensitivity": skm.recall_score(y, yhat, sample_weight=w),
            "specificity": skm.recall_score(1 - y, 1 - yhat, sample_weight=w),
            "ppv": skm.precision_score(y, yhat, sample_weight=w),
            "npv": skm.precision_score(1 - y, 1 - yhat, sample_weight=w),
            "f1": skm.f1_score(y, yhat, sample_weight=w), "auc": skm.roc_auc_score(y, z, sample_weight=w),
            "brier": skm.brier_score_loss(y, z, sample_weight=w), "log_loss": skm.log_loss(y, z, sample_weight=w)}


@pytest.mark.parametrize("threshold", [0.5, 0.3])
def test_kernel_binary_matches_sklearn_with_weights_and_ties(threshold):
    rng = np.random.default_rng(0)
    z = np.round(rng.random(400), 2)  # ties in the scores
    y = (rng.random(400) < z).astype(np.int64)
    w = rng.exponential(size=400)
    got = MetricKernel(scores=z, threshold=threshold).values(np.stack([y, y]), np.stack([w, np.ones(400)]))
    fast = MetricKernel(scores=z, threshold=threshold).values(np.stack([y, y]).astype(bool),
                                                              np.stack([w, np.ones(400)]).astype(np.float32))
    for weights, r in ((w, 0), (None, 1)):
        ref = _sklearn_binary(y, z, weights, threshold)
        for m in BINARY_METRICS:
            assert got[m][r] == pytest.approx(ref[m], rel=1e-10), m
            assert fast[m][r] == pytest.approx(ref[m], rel=1e-5), m  # the replicates' float32 path


def test_kernel_multiclass_matches_sklearn():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(4), size=500)
    y = np.array([rng.choice(4, p=q) for q in p])
    w = rng.exponential(size=500)
    got = {k: v[0] for k, v in MetricKernel(probs=p, classes=list("abcd")).values(y, w).items()}
    yhat = p.argmax(axis=1)
    assert got["accuracy"] == pytest.approx(skm.accuracy_score(y, yhat, sample_weight=w))
    assert got["balanced_accuracy"] == pytest.approx(skm.balanced_accuracy_score(y, yhat, sample_weight=w))
    assert got["macro_f1"] == pytest.approx(skm.f1_score(y, yhat, average="macro", sample_weight=w))
    assert got["macro_precision"] == pytest.approx(skm.precision_score(y, yhat, average="macro", sample_weight=w))
    assert got["auc"] == pytest.approx(skm.roc_auc_score(y, p, multi_class="ovr", average="macro", sample_weight=w))
    assert got["log_loss"] == pytest.approx(skm.log_loss(y, p, sample_weight=w))
    onehot = np.eye(4)[y]
    assert got["brier"] == pytest.approx(np.average(((p - onehot) ** 2).sum(axis=1), weights=w))
    rec = skm.recall_score(y, yhat, average=None, sample_weight=w)
    assert [got[f"recall[{c}]"] for c in "abcd"] == pytest.approx(rec)
    assert got["auc[c]"] == pytest.approx(skm.roc_auc_score(y == 2, p[:, 2], sample_weight=w))


def test_kernel_soft_targets_invariances():
    """One-hot soft targets give the hard values (the i = j AUC pairs vanish); K = 2 equals binary."""
    rng = np.random.default_rng(2)
    z = rng.random(300)
    y = (rng.random(300) < z).astype(np.int64)
    kb = MetricKernel(scores=z)
    hard, soft, prob = kb.values(y), kb.values(np.eye(2)[y]), kb.values(y.astype(np.float64))
    for m in BINARY_METRICS:
        assert soft[m][0] == pytest.approx(hard[m][0]) and prob[m][0] == pytest.approx(hard[m][0])
    kk = MetricKernel(probs=np.stack([1 - z, z], axis=1)).values(y)
    zz = z.copy()
    zz[zz == 0.5] = 0.4  # argmax and the 0.5 threshold differ only at a tie
    assert kk["auc"][0] == pytest.approx(hard["auc"][0]) and kk["auc[1]"][0] == pytest.approx(hard["auc"][0])
    assert kk["log_loss"][0] == pytest.approx(hard["log_loss"][0])
    assert kk["brier"][0] == pytest.approx(2 * hard["brier"][0])
    assert kk["recall[1]"][0] == pytest.approx(hard["sensitivity"][0])
    # Soft AUC = the U-statistic over i != j: by brute force.
    q = rng.random(40)
    s = rng.random(40)
    num = den = 0.0
    for i in range(40):
        for j in range(40):
            if i != j:
                pair = q[i] * (1 - q[j])
                num += pair * ((s[i] > s[j]) + 0.5 * (s[i] == s[j]))
                den += pair
    assert MetricKernel(scores=s).values(q)["auc"][0] == pytest.approx(num / den)


def test_perfect_annotators_give_the_true_metrics():
    """A degenerate posterior (every label right): estimate, interval ends and corrected labels equal sklearn's
    metrics on the true labels (bootstrap=False: the sample target)."""
    rng = np.random.default_rng(3)
    z = rng.beta(0.7, 0.7, size=1200)
    y = (rng.random(1200) < z).astype(np.int64)
    labels = np.stack([y, y, y], axis=1)
    labels[:30, 0] = 1 - labels[:30, 0]  # one annotator errs a little (EM needs a non-degenerate channel)
    data = AnnotationSet.from_wide(labels, z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = clean_metrics(data, n_replicates=50, bootstrap=False)
    ref = _sklearn_binary(y, z, None)
    t = res.table.set_index("metric")
    for m in BINARY_METRICS:
        assert t.loc[m, "estimate"] == pytest.approx(ref[m], abs=2e-3), m
        assert t.loc[m, "lower"] <= ref[m] + 2e-3 and ref[m] - 2e-3 <= t.loc[m, "upper"], m


@pytest.fixture(scope="module")
def noisy():
    sim = simulate_annotations(12000, fpr=[0.15, 0.25, 0.2], tpr=[0.8, 0.75, 0.85], curve="overconfident",
                               seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_em(sim.data, model="histogram", groups=threshold_bins(sim.data.scores, [0.5], 12000), n_starts=2)
        res = clean_metrics(sim.data, fit, n_replicates=200, bootstrap=False, seed=1)
    truth = {m: float(v[0]) for m, v in MetricKernel(scores=sim.data.scores).values(sim.clean_labels.astype(np.int64)).items()}
    return sim, res, truth, fit


def test_simulation_ours_unbiased_majority_vote_biased(noisy):
    """Known truth (the metrics of these items' clean labels): each estimate within 3.5 of its standard errors
    (interval width / 3.29) of the truth; the majority vote's further than 3.5 of them for the metrics it biases."""
    _, res, truth, _ = noisy
    t = res.table.set_index("metric")
    biased = 0
    for m in BINARY_METRICS:
        se = (t.loc[m, "upper"] - t.loc[m, "lower"]) / 3.29
        assert abs(t.loc[m, "estimate"] - truth[m]) < 3.5 * se, (m, t.loc[m, "estimate"], truth[m], se)
        biased += abs(t.loc[m, "majority_vote"] - truth[m]) > 3.5 * se
    assert biased >= 6  # accuracy, sensitivity, specificity, AUC, Brier, log loss... all visibly off


def test_corrected_label_agrees_with_posterior_on_linear_metrics(noisy):
    """For accuracy, Brier and log loss the corrected-label estimate is unbiased: it agrees with the posterior one
    within its own Monte Carlo (annotation-noise) standard error, estimated from its per-item terms."""
    sim, res, _, _ = noisy
    t = res.table.set_index("metric")
    z = sim.data.scores
    # per-item terms of the corrected-label estimate vary with Ytilde: SE ~ sd(Ytilde * loss difference) / sqrt(n)
    spread = {"accuracy": np.ones_like(z), "brier": np.abs(1 - 2 * z), "log_loss": np.abs(np.log(z / (1 - z)))}
    for m, d in spread.items():
        se = 2.0 * np.std(d) / np.sqrt(z.size) + 1e-3  # sd(Ytilde) <= 2 for these channels
        assert abs(t.loc[m, "corrected_label"] - t.loc[m, "estimate"]) < 4 * se, m


def test_compare_is_paired_and_orders_models(noisy):
    """Several models on one fit (the noisy fixture's: only "good" and "same" are a function of its groups, which
    the test does not need), sharing the replicates."""
    sim, _, _, fit = noisy
    z = sim.data.scores
    noise = np.random.default_rng(9).normal(scale=0.3, size=z.size)
    worse = np.clip(z + noise, 0, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = clean_metrics(sim.data, fit, scores={"good": z, "worse": worse, "same": z.copy()}, n_replicates=60,
                            metrics=["accuracy", "auc", "brier"])
    assert res.probability_better("good", "worse", metric="auc") > 0.99
    assert res.probability_better("good", "worse", metric="brier") > 0.99
    assert res.probability_better("good", "same", metric="auc") == 0.5  # identical scores: every replicate ties
    c = res.compare("good", "worse").set_index("metric")
    assert c.loc["auc", "lower"] > 0 and c.loc["brier", "upper"] < 0
    assert (res.compare("good", "same")[["difference", "lower", "upper"]].abs().to_numpy() < 1e-12).all()


def test_multiclass_clean_metrics_cover_and_beat_majority():
    sim = simulate_multiclass(3000, 3, 3, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = clean_metrics(sim.data, n_replicates=200, bootstrap=False)
    truth = {m: float(v[0]) for m, v in MetricKernel(probs=sim.probs).values(np.asarray(sim.y)).items()}
    t = res.table.set_index("metric")
    assert res.kind == "multiclass" and "recall[2]" in t.index
    for m in ("accuracy", "balanced_accuracy", "macro_f1"):
        se = (t.loc[m, "upper"] - t.loc[m, "lower"]) / 3.29
        assert abs(t.loc[m, "estimate"] - truth[m]) < 4 * se, m
        assert abs(t.loc[m, "majority_vote"] - truth[m]) > abs(t.loc[m, "estimate"] - truth[m])


def test_coarse_groups_warn():
    sim = simulate_multiclass(600, 3, 3, seed=1)
    with pytest.warns(Warning, match="use the score inside"):
        res = clean_metrics(sim.data, n_replicates=20, metrics=["auc", "accuracy"])
    t = res.table.set_index("metric")
    assert t.loc["auc", "centre"] == "corrected labels" and t.loc["accuracy", "centre"] == "posterior"
    assert t.loc["auc", "estimate"] == t.loc["auc", "corrected_label"]
    shift = t.loc["auc", "corrected_label"] - t.loc["auc", "posterior"]
    assert np.quantile(res.draws["model"]["auc"] - shift, 0.95) == pytest.approx(t.loc["auc", "upper"] - shift)


def test_coarse_rule_counts_groups_per_predicted_class():
    """Ten classes x 2 confidence levels are 20 groups, as coarse per class as 3 x 2: before the per-class rule they
    passed the 20-group threshold and the posterior AUC / log loss were biased (docs/metrics.md, K = 10)."""
    from noisycal_bayes.labels.metrics import _fine_groups

    assert [_fine_groups(k) for k in (2, 3, 10)] == [20, 30, 100]
    sim = simulate_multiclass(1500, 3, 10, seed=2)
    with pytest.warns(Warning, match="use the score inside the fit's 20 groups"):
        res = clean_metrics(sim.data, n_replicates=20, metrics=["auc", "log_loss", "accuracy"])
    t = res.table.set_index("metric")
    assert t.loc["auc", "centre"] == "corrected labels" and t.loc["log_loss", "centre"] == "corrected labels"
    assert t.loc["accuracy", "centre"] == "posterior"


def test_bad_inputs():
    sim = simulate_annotations(200, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.85], seed=0)
    with pytest.raises(ValueError, match="shape"):
        clean_metrics(sim.data, scores=np.full(10, 0.5))
    with pytest.raises(ValueError, match="unknown metrics"):
        clean_metrics(sim.data, metrics=["aucc"])
    with pytest.raises(ValueError, match="not `probs`"):
        clean_metrics(sim.data, probs=np.full((200, 2), 0.5))
    with pytest.raises(ValueError, match="level"):
        clean_metrics(sim.data, level=1.5)
    with pytest.raises(ValueError, match="exactly one"):
        MetricKernel()
    with pytest.raises(ValueError, match="hard labels"):
        MetricKernel(scores=np.array([0.2, 0.7])).values(np.array([0, 2]))
    with pytest.raises(ValueError, match="soft targets"):
        MetricKernel(scores=np.array([0.2, 0.7])).values(np.ones((2, 3)))


def test_evaluate_carries_the_metrics_and_the_cli_flags(tmp_path):
    """evaluate: metrics in the result, the text and the JSON (additive key); --threshold reaches them; metrics=False
    leaves them out; K-class data refuse a threshold."""
    import json

    from noisycal_bayes import evaluate
    from noisycal_bayes.cli import main

    sim = simulate_annotations(600, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], seed=2)
    ev = evaluate(sim.data, method="em", n_boot=0, checks=False, threshold=0.4)
    assert ev.metrics.threshold == {"model": 0.4} and "Clean-label metrics" in ev.summary()
    d = ev.to_dict()["clean_metrics"]
    assert d["threshold"] == 0.4 and {r["metric"] for r in d["metrics"]} == set(BINARY_METRICS)
    assert "clean_metrics" not in evaluate(sim.data, method="em", n_boot=0, checks=False, metrics=False).to_dict()
    k = simulate_multiclass(300, 3, 3, seed=0).data
    with pytest.raises(ValueError, match="threshold"):
        evaluate(k, threshold=0.3)
    labels = tmp_path / "a.csv"
    sim.data.to_long().to_csv(labels, index=False)  # labels and a score column
    out = tmp_path / "o.json"
    assert main(["evaluate", str(labels), "--method", "em", "--n-boot", "0", "--no-checks", "--threshold", "0.3",
                 "--json", str(out)]) == 0
    assert json.loads(out.read_text())["clean_metrics"]["threshold"] == 0.3


def test_evaluate_runs_the_replicates_beside_its_fit_with_the_same_numbers():
    """evaluate starts the binary metrics' replicates in a worker thread: the table equals clean_metrics' own (same
    arguments), with the thread and without; a set-up error (repeated labels) becomes the note, not a crash; the
    worker's errors come back to the caller as the same note."""
    import pandas as pd

    from noisycal_bayes import evaluate
    from noisycal_bayes.evaluation import metrics as em
    from noisycal_bayes.labels.metrics import clean_metrics

    sim = simulate_annotations(800, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], seed=4)
    ev = evaluate(sim.data, method="em", n_boot=20, checks=False, threshold=0.45, seed=3)
    ref = clean_metrics(sim.data, threshold=0.45, seed=3, n_replicates=em.N_METRIC_REPLICATES)
    pd.testing.assert_frame_equal(ev.metrics.table, ref.table)
    settings = type("S", (), {"level": 0.9, "seed": 3, "weights": "iv"})()
    threaded, plain = (em.start_binary_metrics(sim.data, settings, 0.45, thread=t)()[0] for t in (True, False))
    pd.testing.assert_frame_equal(threaded.table, plain.table)
    pd.testing.assert_frame_equal(threaded.table, ref.table)

    def boom():
        raise ValueError("broken\nreplicates")

    assert em._finished(boom, []) == (None, "clean-label metrics not computed: broken replicates")


def test_multiclass_compare_on_every_metric():
    """K classes, models on the same items: the classifier beats a copy whose probabilities are scrambled on 40% of
    the items (on accuracy and AUC), and the paired differences of a model with itself are exactly 0."""
    sim = simulate_multiclass(1500, 3, 3, seed=7)
    p = sim.probs
    rng = np.random.default_rng(0)
    blurred = p.copy()
    hit = rng.random(1500) < 0.4
    blurred[hit] = rng.permuted(p[hit], axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = clean_metrics(sim.data, probs={"sharp": p, "blurred": blurred, "copy": p.copy()}, n_replicates=100,
                            metrics=["accuracy", "log_loss", "auc"])
    assert res.probability_better("sharp", "copy", metric="accuracy") == 0.5
    assert res.probability_better("sharp", "blurred", metric="accuracy") > 0.95
    assert res.probability_better("sharp", "blurred", metric="auc") > 0.95
    c = res.compare("sharp", "copy")
    assert (c[["difference", "lower", "upper"]].abs().to_numpy() < 1e-12).all()


@pytest.mark.parametrize("n", [5, 8192, 8193, 30_011])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pairs_below_equals_the_cumulative_sum(n, dtype):
    """The chunked pair sums of the AUC equal sum(p * cumsum(q)) computed in float64 (an independent reference), for
    sizes below, at and beyond one matrix-product call (8192 items), in both dtypes."""
    from noisycal_bayes.labels.metrics import _pairs_below

    rng = np.random.default_rng(n)
    p, q = rng.exponential(size=(3, n)).astype(dtype), rng.exponential(size=(3, n)).astype(dtype)
    num, ps, qs = _pairs_below(p, q)
    p64, q64 = p.astype(np.float64), q.astype(np.float64)
    tol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(num, (p64 * np.cumsum(q64, axis=1)).sum(axis=1), rtol=tol)
    np.testing.assert_allclose(ps, p64.sum(axis=1), rtol=tol)
    np.testing.assert_allclose(qs, q64.sum(axis=1), rtol=tol)


def test_replicate_draws_have_their_distributions():
    """The replicates' fast draws: Exp(1) weights by inversion (mean, variance and a tail probability within 5
    standard errors) and 16-bit Bernoulli labels (frequency within 5 standard errors of p, p = 0 and 1 exact up to
    2**-16)."""
    from noisycal_bayes.labels._replicates import exponential_weights
    from noisycal_bayes.labels.metrics import _bernoulli16

    rng = np.random.default_rng(7)
    n = 400_000
    w = exponential_weights(rng, (n,)).astype(np.float64)
    assert abs(w.mean() - 1) < 5 / np.sqrt(n) and abs(w.var() - 1) < 5 * np.sqrt(8 / n)
    tail = np.exp(-3)
    assert abs(np.mean(w > 3) - tail) < 5 * np.sqrt(tail * (1 - tail) / n) and w.min() >= 0
    p = np.array([[0.0, 0.02, 0.5, 0.97, 1.0]])
    y = _bernoulli16(rng, p, np.repeat(np.arange(5), n // 5))
    freq = np.array([y[0, k * (n // 5):(k + 1) * (n // 5)].mean() for k in range(5)])
    assert freq[0] == 0 and freq[4] > 1 - 1e-4
    assert np.all(np.abs(freq[1:4] - p[0, 1:4]) < 5 * np.sqrt(p[0, 1:4] * (1 - p[0, 1:4]) / (n // 5)))


def test_crowd_with_adversaries_gets_channel_uncertainty_from_sparse_refits():
    """A crowd fitted on the sparse responses (20 annotators, two adversaries): the replicates refit it by its own
    sparse EM and orientation rule. The dense refits' `tpr > fpr` check failed every one of them (the estimate keeps
    the adversaries' negative gaps), leaving an interval without channel uncertainty; now none fails."""
    from noisycal_bayes.simulate import simulate_crowd

    sim = simulate_crowd(400, 20, labels_per_item=4, spammers=0.1, adversaries=0.1, curve="overconfident", seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = clean_metrics(sim.data, n_replicates=40)
        fit = fit_em(sim.data, model="histogram", groups=threshold_bins(sim.data.scores, [0.5], 400), n_starts=5)
    assert fit.inputs.sparse and np.any(fit.channel.tpr < fit.channel.fpr)
    assert res.failed_refits == 0 and res.parameter_uncertainty.startswith("weighted-likelihood")


def _binary_by_einsums(kern, t1, w):
    """The binary kernel before the one-buffer sums (2026-12-05), kept as an independent reference: each weighted
    count and loss sum its own ``einsum`` pass, in float64."""
    t1, w = np.asarray(t1, np.float64), np.asarray(w, np.float64)
    yhat = kern.yhat.astype(np.float64)
    wt = w * t1
    total, pos = w.sum(axis=1), wt.sum(axis=1)
    pred, tp = np.einsum("rn,n->r", w, yhat), np.einsum("rn,n->r", wt, yhat)
    fn, fp = pos - tp, pred - tp
    tn = total - pos - fp
    sens, spec = tp / pos, tn / (tn + fp)
    out = dict(accuracy=(tp + tn) / total, balanced_accuracy=(sens + spec) / 2, sensitivity=sens, specificity=spec,
               ppv=tp / pred, npv=tn / (tn + fn), f1=2 * tp / (2 * tp + fp + fn))
    for name, table in kern.loss.items():
        out[name] = (np.einsum("rn,n->r", w, table[:, 0]) + np.einsum("rn,n->r", wt, table[:, 1] - table[:, 0])) / total
    return out


@pytest.mark.parametrize("ties", [False, True])
def test_binary_kernel_sums_equal_separate_einsums(ties):
    """The one-buffer sums of the binary kernel (:func:`_row_sums`, the replicates' float32 path and the float64
    path of soft targets) equal the former separate einsum passes in float64, over 40,000 items (five item chunks of
    the matrix products) and 7 replicates; the AUC against scikit-learn on two replicates."""
    rng = np.random.default_rng(11)
    n, r = 40_000, 7
    z = rng.random(n)
    if ties:
        z = np.round(z, 3)
    kern = MetricKernel(scores=z, threshold=0.4)
    w = rng.exponential(size=(r, n))
    y = rng.random((r, n)) < z
    soft = np.clip(z + 0.1 * rng.standard_normal((r, n)), 0, 1)
    for target, weights, tol in ((y, w.astype(np.float32), 1e-5), (soft, w, 1e-12)):
        got = kern.values(target, weights)
        ref = _binary_by_einsums(kern, target, weights)
        for m, v in ref.items():
            np.testing.assert_allclose(got[m], v, rtol=tol, err_msg=m)
    got = kern.values(y, w.astype(np.float32))
    for k in range(2):
        assert got["auc"][k] == pytest.approx(skm.roc_auc_score(y[k], z, sample_weight=w[k]), rel=1e-5)


@pytest.mark.parametrize("m", [2, 40, 600])
def test_row_sums_equal_the_float64_product(m):
    """``_row_sums`` (item chunks below OpenBLAS's threading threshold, summed in float64) equals the float64 matrix
    product, for chunk counts from one to hundreds and a size that is not a multiple of the chunk."""
    from noisycal_bayes.labels.metrics import _row_sums

    rng = np.random.default_rng(m)
    s, f = rng.exponential(size=(m, 10_007)).astype(np.float32), rng.random((10_007, 6)).astype(np.float32)
    np.testing.assert_allclose(_row_sums(s, f), s.astype(np.float64) @ f.astype(np.float64), rtol=2e-6)


def test_multiclass_joint_item_weights_pair_each_draw_with_its_items():
    """EM route's refits as draws: a replicate on draw ``s`` weighs the items with draw ``s``'s own multiplicities
    (joint draws), not fresh Exp(1) weights. Perfect annotators make the clean labels known; draw 0 weighs only the
    items the classifier gets right, draw 1 only those it gets wrong, so every replicate's accuracy is exactly 1 or 0
    (fresh weights would give about the items' accuracy), half of them each."""
    from noisycal_bayes.labels.metrics import ClassPosterior, multiclass_metrics
    from noisycal_bayes.models.inputs import class_arrays

    sim = simulate_multiclass(300, 3, 3, accuracy=1.0, seed=3)
    right = sim.probs.argmax(axis=1) == sim.y
    assert 0.3 < right.mean() < 0.95
    x = class_arrays(sim.data, "test")
    conf = np.broadcast_to(np.eye(3), (2, 3, 3, 3))
    post = ClassPosterior((x.item, x.annotator, x.label, x.gold), 300, np.zeros(300, np.int32), conf,
                          np.full((2, 1, 3), 1 / 3))
    w = np.stack([right, ~right]).astype(float)
    res = multiclass_metrics(sim.data, {"model": sim.probs}, post, metrics=["accuracy"], n_replicates=40,
                             item_weights=w)
    acc = res.draws["model"]["accuracy"]
    assert set(np.round(acc, 12)) == {0.0, 1.0} and acc.mean() == 0.5
    free = multiclass_metrics(sim.data, {"model": sim.probs}, post, metrics=["accuracy"], n_replicates=40)
    assert abs(free.draws["model"]["accuracy"].mean() - right.mean()) < 0.05
    with pytest.raises(ValueError, match="item_weights"):
        multiclass_metrics(sim.data, {"model": sim.probs}, post, metrics=["accuracy"], item_weights=w[:, :10])


@pytest.mark.slow
def test_evaluate_multiclass_em_metrics_use_joint_refit_draws():
    """evaluate_multiclass's EM route hands each bootstrap refit's item multiplicities to the metrics (joint draws)."""
    from noisycal_bayes import evaluate_multiclass

    sim = simulate_multiclass(400, 3, 3, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = evaluate_multiclass(sim.data, method="em", n_boot=4, checks=False, seed=1)
    assert ev.metrics.parameter_uncertainty == "bootstrap refits (EM, 4, each with its items)"
    t = ev.metrics.table.set_index("metric")
    assert t.loc["accuracy", "lower"] < t.loc["accuracy", "estimate"] < t.loc["accuracy", "upper"]


def test_multiclass_unconditioned_fit_prevalence_refined_by_prediction():
    """A one-group posterior (a crowd's pooled fit) with the TRUE channels: its plug-in accuracy ignores that the
    classifier knows the clean label (biased by many standard errors: the negative control, the rule before
    2026-12-05); re-estimating the prevalence per predicted class with the confusion fixed (conditional ML) removes
    it. 16 data sets of 1500 items, 3 labels each from 30 annotators of accuracy 0.6; target: these items' accuracy."""
    from noisycal_bayes.labels.metrics import ClassPosterior, multiclass_metrics
    from noisycal_bayes.models.inputs import class_arrays

    new, old = [], []
    for seed in range(16):
        sim = simulate_multiclass(1500, 30, 3, accuracy=0.6, labels_per_item=3, seed=100 + seed)
        x = class_arrays(sim.data, "test")
        post = ClassPosterior((x.item, x.annotator, x.label, x.gold), 1500, np.zeros(1500, np.int32),
                              sim.confusion[None], np.bincount(sim.y, minlength=3)[None, None] / 1500)
        truth = float(np.mean(sim.probs.argmax(axis=1) == sim.y))
        res = multiclass_metrics(sim.data, {"model": sim.probs}, post, metrics=["accuracy", "recall[0]"],
                                 n_replicates=20, bootstrap=False)
        row = res.table.set_index("metric").loc["accuracy"]
        assert bool(row.conditioned) and "re-estimated per fit group x predicted class" in res.notes[0]
        new.append(row.estimate - truth)
        old.append(float(MetricKernel(probs=sim.probs).values(post(0))["accuracy"][0]) - truth)
    new, old = np.array(new), np.array(old)
    se_new, se_old = new.std(ddof=1) / 4, old.std(ddof=1) / 4
    assert abs(old.mean()) > 8 * se_old and old.mean() < -0.05          # the negative control: biased
    assert abs(new.mean()) < 3 * se_new + 0.002, (new.mean(), se_new)


def test_conditional_prevalence_is_the_weighted_em_fixed_point():
    """ClassPosterior.conditional against a plain NumPy EM loop over the items (per group, weighted), and its
    fixed-point property: each group's prevalence is the weighted mean of its items' posteriors."""
    from noisycal_bayes.labels.metrics import ClassPosterior
    from noisycal_bayes.models.inputs import class_arrays

    sim = simulate_multiclass(400, 4, 3, accuracy=0.7, seed=11)
    x = class_arrays(sim.data, "test")
    g = sim.probs.argmax(axis=1)
    conf = np.stack([sim.confusion, 0.8 * sim.confusion + 0.2 / 3])
    post = ClassPosterior((x.item, x.annotator, x.label, x.gold), 400, g, conf, np.full((2, 3, 3), 1 / 3))
    w = np.random.default_rng(0).standard_exponential((2, 400))
    q, pi = post.conditional([0, 1], w, tol=1e-13, max_iter=5000)
    for s in range(2):
        lik = np.ones((400, 3))
        for i, a, lab in zip(x.item, x.annotator, x.label):
            lik[i] *= conf[s, a, :, lab]
        p = np.full((3, 3), 1 / 3)
        for _ in range(5000):
            qq = lik * p[g]
            qq /= qq.sum(axis=1, keepdims=True)
            p, before = np.stack([(w[s, g == c, None] * qq[g == c]).sum(axis=0) / w[s, g == c].sum()
                                  for c in range(3)]), p
            if np.abs(p - before).max() < 1e-14:
                break
        np.testing.assert_allclose(pi[s], p, atol=1e-9)
        np.testing.assert_allclose(q[s], qq, atol=1e-9)
    # The same from a one-group posterior split by the groups (rows reused, not rebuilt).
    coarse = ClassPosterior((x.item, x.annotator, x.label, x.gold), 400, np.zeros(400, np.int32), conf,
                            np.full((2, 1, 3), 1 / 3))
    q2, pi2 = coarse.refined(g).conditional([0, 1], w, tol=1e-13, max_iter=5000)
    np.testing.assert_allclose(pi2, pi, atol=1e-10)
    np.testing.assert_allclose(q2, q, atol=1e-10)


def test_coarse_within_group_replicates_are_the_corrected_label_estimator():
    """With coarse groups, each replicate of Brier / AUC on draw ``s`` is the corrected-label estimator with draw
    ``s``'s confusion and the replicate's item weights (here the draws' own, ``item_weights``): checked against a
    NumPy loop for the corrected targets (row ``a`` of ``C_j^{-1}`` averaged over the item's annotators, equal weights) and
    the Brier sum; the interval is their quantiles (no shift)."""
    from noisycal_bayes.labels.metrics import ClassPosterior, multiclass_metrics
    from noisycal_bayes.models.inputs import class_arrays

    sim = simulate_multiclass(300, 3, 3, accuracy=0.75, seed=6)
    x = class_arrays(sim.data, "test")
    g = sim.probs.argmax(axis=1)
    conf = np.stack([sim.confusion, 0.9 * sim.confusion + 0.1 / 3, 0.8 * sim.confusion + 0.2 / 3])
    post = ClassPosterior((x.item, x.annotator, x.label, x.gold), 300, g, conf, np.full((3, 3, 3), 1 / 3))
    w = np.random.default_rng(1).multinomial(300, np.full(300, 1 / 300), size=3).astype(float)
    with pytest.warns(DataWarning, match="corrected-label"):
        res = multiclass_metrics(sim.data, {"model": sim.probs}, post, metrics=["brier", "auc", "accuracy"],
                                 n_replicates=30, weights="equal", item_weights=w)
    brier = np.empty(3)
    p = sim.probs
    loss = (p ** 2).sum(axis=1, keepdims=True) - 2 * p + 1
    for s in range(3):
        t = np.zeros((300, 3))
        m = np.zeros(300)
        for i, a, lab in zip(x.item, x.annotator, x.label):
            t[i] += np.linalg.inv(conf[s, a])[lab]              # E[C^{-1}[A, k] | Y = y] = 1[y = k]
            m[i] += 1
        t /= m[:, None]
        brier[s] = (w[s] * (t * loss).sum(axis=1)).sum() / w[s].sum()
    d = res.draws["model"]["brier"]
    which = np.unique(d.round(12))
    np.testing.assert_allclose(np.sort(which), np.sort(brier), atol=1e-10)
    row = res.table.set_index("metric").loc["brier"]
    assert row.centre == "corrected labels"
    assert (row.lower, row.upper) == tuple(np.quantile(d, [0.05, 0.95]))
