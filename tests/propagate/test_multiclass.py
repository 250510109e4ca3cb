"""Tests for noisycal_bayes/propagate/nc_ece.py (K-class posterior top-label and class-wise NC-ECE).

Independent routes: the binary posterior_nc_ece on the same data and channel draws (K = 2), the reference
point estimators (one confusion = the draws' common value), hand-written top-label ECE loops (identity
confusion), a simulation of the corrected targets' unbiasedness, and the class-relabelling invariance.
"""
import warnings

import numpy as np
import pytest

from noisycal_bayes import Binning, Channel, simulate_annotations
from noisycal_bayes.propagate import debias_abs, posterior_nc_ece
from noisycal_bayes.core import corrected_targets
from noisycal_bayes.propagate import MC_TARGETS, posterior_classwise_nc_ece, posterior_top_label_nc_ece
from noisycal_bayes.reference import classwise_nc_ece, naive_multiclass_ece, top_label_nc_ece
from noisycal_bayes.warnings import DataWarning, IdentifiabilityWarning


# ----------------------------------------------------------------------------- helpers
def sim_multiclass(n, k, j, *, seed, acc=0.75, curve=1.0):
    """Probabilities, true labels, dense labels, confusion (J, K, K) and responses of a K-class crowd."""
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, k))
    logits[np.arange(n), rng.integers(0, k, n)] += 2.0
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    q = np.exp(curve * np.log(p))
    q /= q.sum(axis=1, keepdims=True)
    y = (rng.random((n, 1)) > np.cumsum(q, axis=1)).sum(axis=1)
    conf = np.empty((j, k, k))
    for a in range(j):
        for c in range(k):
            conf[a, c] = np.insert(rng.dirichlet(np.ones(k - 1)) * (1 - acc), c, acc)
    cdf = np.cumsum(conf[np.arange(j)[None, :], y[:, None]], axis=2)
    labels = (rng.random((n, j))[:, :, None] > cdf).sum(axis=2)
    resp = (np.repeat(np.arange(n), j), np.tile(np.arange(j), n), labels.reshape(-1))
    return p, y, labels, conf, resp


def dirichlet_draws(conf, n_draws, rng, concentration=300.0):
    """Draws around ``conf`` (J, K, K): each row Dirichlet(concentration * row), shape (n_draws, J, K, K)."""
    j, k, _ = conf.shape
    out = np.empty((n_draws, j, k, k))
    for a in range(j):
        for y in range(k):
            out[:, a, y] = rng.dirichlet(concentration * conf[a, y], size=n_draws)
    return out


@pytest.fixture(scope="module")
def mc3():
    return sim_multiclass(600, 3, 3, seed=5, curve=0.6)


# ----------------------------------------------------------------------------- point value and references
def test_point_confusion_draws_equal_reference_point_estimators(mc3):
    p, y, labels, conf, resp = mc3
    for weights in ("iv", "equal"):
        top = posterior_top_label_nc_ece(p, resp, conf, weights=weights, bootstrap=False, n_draws=2)
        ref = top_label_nc_ece(p, resp, conf, weights=weights)
        np.testing.assert_allclose(top.draws, ref.value, rtol=1e-12)
        assert top.value == pytest.approx(ref.value, rel=1e-12)
        cw = posterior_classwise_nc_ece(p, resp, conf, weights=weights, bootstrap=False, n_draws=2)
        ref = classwise_nc_ece(p, resp, conf, weights=weights)
        assert cw.value == pytest.approx(ref.value, rel=1e-12)
        np.testing.assert_allclose([r.value for r in cw.per_class], ref.per_class, rtol=1e-12)
        assert cw.fit_method == "point" and cw.target == MC_TARGETS["no_bootstrap"]


def test_value_is_at_the_posterior_mean_confusion(mc3):
    p, y, labels, conf, resp = mc3
    rng = np.random.default_rng(1)
    draws = dirichlet_draws(conf, 20, rng)
    res = posterior_top_label_nc_ece(p, resp, draws, n_draws=20)
    assert res.value == pytest.approx(top_label_nc_ece(p, resp, draws.mean(axis=0)).value, rel=1e-12)
    assert res.fit_method == "draws" and res.target == MC_TARGETS["top_label"] and res.n_draws == 20
    assert "confusion posterior draws" in res.uncertainty and "Bayesian bootstrap" in res.uncertainty
    # Explicit prevalence per draw: the same as a fixed prevalence when all rows are equal.
    pr = np.full((20, 3), 1 / 3)
    a = posterior_top_label_nc_ece(p, resp, draws, pr, bootstrap=False)
    b = posterior_top_label_nc_ece(p, resp, draws, pr[0], bootstrap=False)
    np.testing.assert_allclose(a.draws, b.draws, rtol=1e-12)


def _residual_masses(ref):
    """Per-bin residual mass ``count * residual / n`` of a reference point estimate (0 in empty bins)."""
    t = ref.table
    return np.nan_to_num(t["count"].to_numpy() * t["residual"].to_numpy()) / ref.n_items


def test_bias_correction_centres_bins_on_2_point_minus_mean_of_draws(mc3):
    # Independent route: without the bootstrap, draw s's bin residual masses are the reference point estimator's
    # at C_s, and e0 those at the mean confusion. The debiased estimate is sum_b debias_abs(|c_b|, sd_b) with the
    # centre c_b = 2 e0_b - mean_s e_sb (bias_correct=True) or mean_s e_sb (False); sd_b the draws' sd.
    p, y, labels, conf, resp = mc3
    draws = dirichlet_draws(conf, 8, np.random.default_rng(3), concentration=40.0)
    for post, ref_fn in ((posterior_top_label_nc_ece, top_label_nc_ece),
                         (posterior_classwise_nc_ece, classwise_nc_ece)):
        e = np.array([_residual_masses(ref_fn(p, resp, c)) for c in draws])
        e0 = _residual_masses(ref_fn(p, resp, draws.mean(axis=0)))
        k = 1 if ref_fn is top_label_nc_ece else 3  # the class-wise mean divides by K n
        e, e0, sd = e / k, e0 / k, (e / k).std(axis=0)
        on = post(p, resp, draws, bootstrap=False)
        off = post(p, resp, draws, bootstrap=False, bias_correct=False)
        assert on.debiased == pytest.approx(debias_abs(np.abs(2 * e0 - e.mean(axis=0)), sd).sum(), rel=1e-9)
        assert off.debiased == pytest.approx(debias_abs(np.abs(e.mean(axis=0)), sd).sum(), rel=1e-9)
        assert on.debiased != pytest.approx(off.debiased, rel=1e-3)  # the correction is not empty here
        # The correction moves bin centres only: value and the raw draws are unchanged.
        np.testing.assert_array_equal(on.draws, off.draws)
        assert on.value == off.value
    # A point confusion has no draws to correct from: identical results.
    a = posterior_top_label_nc_ece(p, resp, conf, n_draws=30)
    b = posterior_top_label_nc_ece(p, resp, conf, n_draws=30, bias_correct=False)
    assert (a.debiased, a.lower, a.upper) == (b.debiased, b.lower, b.upper)


def test_point_confusion_moves_the_value_and_the_bias_correction_centre(mc3):
    # With refits scattered around a fit C_hat (an EM bootstrap), the value is the reference point estimator at
    # C_hat and each bin's centre is 2 e_b(C_hat) - mean_s e_sb; the draws themselves do not change.
    p, y, labels, conf, resp = mc3
    draws = dirichlet_draws(conf, 8, np.random.default_rng(3), concentration=40.0)
    c_hat = dirichlet_draws(conf, 1, np.random.default_rng(4), concentration=40.0)[0]  # not the draws' mean
    for post, ref_fn in ((posterior_top_label_nc_ece, top_label_nc_ece),
                         (posterior_classwise_nc_ece, classwise_nc_ece)):
        e = np.array([_residual_masses(ref_fn(p, resp, c)) for c in draws])
        e_hat = _residual_masses(ref_fn(p, resp, c_hat))
        k = 1 if ref_fn is top_label_nc_ece else 3
        e, e_hat, sd = e / k, e_hat / k, (e / k).std(axis=0)
        at = post(p, resp, draws, bootstrap=False, point_confusion=c_hat)
        default = post(p, resp, draws, bootstrap=False)
        assert at.value == pytest.approx(ref_fn(p, resp, c_hat).value, rel=1e-12)
        assert at.debiased == pytest.approx(debias_abs(np.abs(2 * e_hat - e.mean(axis=0)), sd).sum(), rel=1e-9)
        np.testing.assert_array_equal(at.draws, default.draws)
        # The draws' mean as the point: exactly the default.
        mean = post(p, resp, draws, bootstrap=False, point_confusion=draws.mean(axis=0))
        assert (mean.value, mean.debiased, mean.lower, mean.upper) == (default.value, default.debiased,
                                                                       default.lower, default.upper)
    # Per class too (the class-wise result's entries share the centre).
    cw = posterior_classwise_nc_ece(p, resp, draws, bootstrap=False, point_confusion=c_hat)
    np.testing.assert_allclose([r.value for r in cw.per_class], classwise_nc_ece(p, resp, c_hat).per_class,
                               rtol=1e-12)


@pytest.mark.parametrize("point, match", [
    ("point estimate", "confusion \\*draws\\*"),
    (np.full((3, 3, 3), 1 / 3)[:2], "point_confusion.*must have shape"),
    (np.full((3, 3, 3), 0.5), "`point_confusion` rows must sum to 1"),
])
def test_bad_point_confusion_raises(mc3, point, match):
    p, y, labels, conf, resp = mc3
    draws = dirichlet_draws(conf, 4, np.random.default_rng(3))
    if isinstance(point, str):  # a point estimate as the draws: nothing scatters around a fit
        draws, point = conf, conf
    for post in (posterior_top_label_nc_ece, posterior_classwise_nc_ece):
        with pytest.raises(ValueError, match=match):
            post(p, resp, draws, point_confusion=point)

def test_identity_confusion_gives_plain_top_label_ece():
    # One annotator, identity confusion: the corrected target is the annotator's one-hot label, so the NC-ECE is
    # the plain top-label ECE against it, computed here by a hand-written loop over bins.
    p, y, labels, conf, resp = sim_multiclass(400, 4, 1, seed=2)
    res = posterior_top_label_nc_ece(p, resp, np.eye(4)[None], bins=8, bootstrap=False, n_draws=1)
    conf_ = p.max(axis=1)
    hit = (p.argmax(axis=1) == labels[:, 0]).astype(float)
    b = np.minimum((conf_ * 8).astype(int), 7)
    loop = sum(abs(np.sum(hit[b == k] - conf_[b == k])) for k in range(8)) / 400
    assert res.value == pytest.approx(loop, abs=1e-12)
    assert res.draws[0] == pytest.approx(loop, abs=1e-12)


def test_identity_confusion_with_several_annotators_is_the_vote_distribution_smece(mc3):
    # Identity confusion: every corrected vector is a one-hot label; equal weights average them into the vote
    # distribution, so the NC-ECE is the SMECE against it (the naive "vote_distribution" row).
    p, y, labels, conf, resp = mc3
    ident = np.broadcast_to(np.eye(3), (3, 3, 3))
    naive = naive_multiclass_ece(p, resp).set_index("target")
    top = posterior_top_label_nc_ece(p, resp, ident, weights="equal", bootstrap=False, n_draws=1)
    cw = posterior_classwise_nc_ece(p, resp, ident, weights="equal", bootstrap=False, n_draws=1)
    assert top.value == pytest.approx(naive.loc["vote_distribution", "top_label_ece"], abs=1e-12)
    assert cw.value == pytest.approx(naive.loc["vote_distribution", "classwise_ece"], abs=1e-12)


def test_corrected_targets_are_unbiased_by_simulation():
    # E[t_i | Y_i] = e_{Y_i}: over R relabellings of fixed clean labels, the mean of sum_i (t_{i, yhat_i} -
    # 1[Y_i = yhat_i]) is 0. z = 4.4 (two-sided false-alarm rate 1e-5 per coordinate, 3 coordinates + the
    # top-label sum) with the Monte Carlo standard error sd / sqrt(R).
    rng = np.random.default_rng(11)
    p, y, labels, conf, resp = sim_multiclass(300, 3, 3, seed=4)
    w = np.ones((3, 3))
    yhat = p.argmax(axis=1)
    R = 300
    diffs, cls = np.empty(R), np.empty((R, 3))
    cdf = np.cumsum(conf[np.arange(3)[None, :], y[:, None]], axis=2)
    for r in range(R):
        lab = (rng.random((300, 3))[:, :, None] > cdf).sum(axis=2)
        t = corrected_targets((resp[0], resp[1], lab.reshape(-1)), 300, conf, weights=w)
        diffs[r] = np.sum(t[np.arange(300), yhat] - (y == yhat))
        cls[r] = (t - np.eye(3)[y]).sum(axis=0)
    z = 4.4
    assert abs(diffs.mean()) < z * diffs.std(ddof=1) / np.sqrt(R)
    assert np.all(np.abs(cls.mean(axis=0)) < z * cls.std(axis=0, ddof=1) / np.sqrt(R))
    # Negative control: the uncorrected one-hot labels are biased, and the same test must reject them.
    raw = np.array([np.sum(((rng.random((300, 3))[:, :, None] > cdf).sum(axis=2) == yhat[:, None]).mean(axis=1)
                           - (y == yhat)) for _ in range(50)])
    assert abs(raw.mean()) > z * raw.std(ddof=1) / np.sqrt(50)


def test_relabelling_classes_changes_nothing(mc3):
    p, y, labels, conf, resp = mc3
    perm = np.array([2, 0, 1])  # new class c is old class perm[c]
    inv = np.argsort(perm)
    p2 = p[:, perm]
    resp2 = (resp[0], resp[1], inv[resp[2]])
    conf2 = conf[:, perm][:, :, perm]
    rng = np.random.default_rng(3)
    draws = dirichlet_draws(conf, 15, rng)
    draws2 = draws[:, :, perm][:, :, :, perm]
    a = posterior_top_label_nc_ece(p, resp, draws, seed=4)
    b = posterior_top_label_nc_ece(p2, resp2, draws2, seed=4)
    np.testing.assert_allclose(a.draws, b.draws, rtol=1e-10)
    assert (a.value, a.lower, a.upper) == pytest.approx((b.value, b.lower, b.upper), rel=1e-10)
    ca = posterior_classwise_nc_ece(p, resp, draws, seed=4)
    cb = posterior_classwise_nc_ece(p2, resp2, draws2, seed=4)
    np.testing.assert_allclose(ca.draws, cb.draws, rtol=1e-10)
    for c in range(3):
        np.testing.assert_allclose(cb.per_class[c].draws, ca.per_class[perm[c]].draws, rtol=1e-10)


# ----------------------------------------------------------------------------- near-singular confusion
def test_near_singular_confusion_is_left_out_not_exploding(mc3):
    p, y, labels, conf, resp = mc3
    bad = conf.copy()
    bad[2] = np.full((3, 3), 0.332) + np.eye(3) * 0.004  # eigenvalues 1 and 0.004: condition number 250
    with pytest.warns(IdentifiabilityWarning, match=r"annotators \[2\]"):
        res = posterior_top_label_nc_ece(p, resp, bad, bootstrap=False, n_draws=1)
    keep = resp[1] != 2
    without = top_label_nc_ece(p, tuple(r[keep] for r in resp), conf[:2])
    assert res.value == pytest.approx(without.value, abs=1e-12) and res.value < 1
    # Negative control: forced into use (equal weights, no condition clipping), the near-singular matrix inflates
    # the estimate.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        forced = posterior_top_label_nc_ece(p, resp, bad, bootstrap=False, n_draws=1, usable=np.ones(3, bool),
                                            weights="equal", max_condition=1e6)
    assert forced.value > 3 * res.value


def test_items_without_usable_response_are_left_out_with_a_warning(mc3):
    p, y, labels, conf, resp = mc3
    bad = conf.copy()
    bad[2] = np.full((3, 3), 1 / 3)  # exactly singular
    keep = ~((resp[1] != 2) & (resp[0] < 50))  # items 0..49 labelled by annotator 2 only
    r2 = tuple(r[keep] for r in resp)
    with pytest.warns(DataWarning, match="50 items"), pytest.warns(IdentifiabilityWarning, match=r"\[2\]"):
        res = posterior_classwise_nc_ece(p, r2, bad, bootstrap=False, n_draws=1)
    assert res.n_items == 550 and np.isfinite(res.value)


def test_draws_with_a_near_singular_used_confusion_warn(mc3):
    p, y, labels, conf, resp = mc3
    draws = np.repeat(conf[None], 40, axis=0)
    draws[0, 1] = np.full((3, 3), 1 / 3)  # one exactly singular draw (of 40): the annotator stays usable
    with pytest.warns(IdentifiabilityWarning, match="in 1 of 40 draws"):
        res = posterior_top_label_nc_ece(p, resp, draws, bootstrap=False)
    # the singular draw is regularised (singular values clipped): finite; every other draw is untouched
    assert np.isfinite(res.draws).all()
    np.testing.assert_allclose(res.draws[1:], top_label_nc_ece(p, resp, conf).value, rtol=1e-12)


# ----------------------------------------------------------------------------- joint draws (item_weights)
@pytest.fixture(scope="module")
def tiny_joint():
    """A small K = 3 crowd, 5 confusion draws and integer item weights (multinomial resampling counts)."""
    p, y, labels, conf, resp = sim_multiclass(90, 3, 3, seed=21, curve=0.6)
    rng = np.random.default_rng(8)
    draws = dirichlet_draws(conf, 5, rng)
    counts = rng.multinomial(90, np.full(90, 1 / 90), size=5).astype(float)
    return p, labels, resp, draws, counts


def test_joint_draws_equal_the_point_estimator_on_the_resampled_items(tiny_joint):
    # Independent route: draw s with item weights w_s (integers) is the reference point estimator at confusion
    # draws[s] on the data set in which item i appears w_si times (with all its labels). Both the bin sums and the
    # IV prevalence (the weighted mean corrected vector) are weighted sums over items, and the ECE is a ratio,
    # so the rescaling of the weights to mean 1 changes nothing: equal to rounding.
    p, labels, resp, draws, counts = tiny_joint
    res = posterior_classwise_nc_ece(p, resp, draws, item_weights=counts, bias_correct=False, calibrate=False)
    j = labels.shape[1]
    for s in range(draws.shape[0]):
        rows = np.repeat(np.arange(p.shape[0]), counts[s].astype(int))
        n = rows.size
        dup = (np.repeat(np.arange(n), j), np.tile(np.arange(j), n), labels[rows].reshape(-1))
        ref = classwise_nc_ece(p[rows], dup, draws[s])
        assert res.draws[s] == pytest.approx(ref.value, abs=1e-12)
    # Per class: fresh weights from the seed, the draws of the call without item_weights.
    ind = posterior_classwise_nc_ece(p, resp, draws, bias_correct=False, calibrate=False)
    for r, q in zip(res.per_class, ind.per_class):
        np.testing.assert_allclose(r.draws, q.draws, rtol=1e-12)


def test_top_label_joint_draws_equal_the_point_estimator_on_the_resampled_items(tiny_joint):
    # As above for the top-label NC-ECE (the EM route's headline draws), with uint16 multiplicities as
    # evaluate_multiclass passes them; the calibrated level only moves the interval, never the draws.
    p, labels, resp, draws, counts = tiny_joint
    res = posterior_top_label_nc_ece(p, resp, draws, item_weights=counts.astype(np.uint16), bias_correct=False,
                                     calibrate=True)
    j = labels.shape[1]
    for s in range(draws.shape[0]):
        rows = np.repeat(np.arange(p.shape[0]), counts[s].astype(int))
        n = rows.size
        dup = (np.repeat(np.arange(n), j), np.tile(np.arange(j), n), labels[rows].reshape(-1))
        assert res.draws[s] == pytest.approx(top_label_nc_ece(p[rows], dup, draws[s]).value, abs=1e-12)
    # Bin 5 holds one item, which some multiplicities leave out: its band is over the draws that keep it (finite),
    # the bins without items stay empty.
    t = res.table
    assert t.loc[5, "count"] == 1 and (counts[:, np.flatnonzero(
        np.searchsorted(np.arange(1, 15) / 15, p.max(axis=1), side="right") == 5)] == 0).any()
    assert np.isfinite(t.loc[t["count"] > 0, ["frequency_lower", "frequency_upper"]].to_numpy()).all()
    assert t.loc[t["count"] == 0, "frequency_lower"].isna().all()
    nominal = posterior_top_label_nc_ece(p, resp, draws, item_weights=counts, bias_correct=False)
    np.testing.assert_allclose(nominal.draws, res.draws, rtol=1e-12)
    assert nominal.lower >= res.lower and nominal.upper <= res.upper  # calibrated: at least the nominal level
    fresh = posterior_top_label_nc_ece(p, resp, draws, bias_correct=False)  # negative control: the seed's weights
    assert np.abs(fresh.draws - res.draws).max() > 1e-4


def test_joint_draws_follow_their_weights_not_the_seed(tiny_joint):
    p, labels, resp, draws, counts = tiny_joint
    a = posterior_classwise_nc_ece(p, resp, draws, item_weights=counts, seed=0)
    b = posterior_classwise_nc_ece(p, resp, draws, item_weights=3.0 * counts, seed=1)  # scale-free, seed unused
    np.testing.assert_allclose(a.draws, b.draws, rtol=1e-12)
    # Integer multiplicities (as evaluate_multiclass passes them, uint16) are the same weights as their floats.
    u = posterior_classwise_nc_ece(p, resp, draws, item_weights=counts.astype(np.uint16), seed=0)
    np.testing.assert_allclose(u.draws, a.draws, rtol=1e-12)
    perm = np.array([3, 0, 4, 1, 2])
    c = posterior_classwise_nc_ece(p, resp, draws[perm], item_weights=counts[perm])  # pairs kept: draws permuted
    np.testing.assert_allclose(c.draws, a.draws[perm], rtol=1e-12)
    # Negative controls: the weights moved to other draws, or fresh weights, give other draws.
    d = posterior_classwise_nc_ece(p, resp, draws, item_weights=counts[perm])
    e = posterior_classwise_nc_ece(p, resp, draws, seed=0)
    assert np.abs(d.draws - a.draws).max() > 1e-4 and np.abs(e.draws - a.draws).max() > 1e-4
    # Unit weights: no resampling of the items, so the draws are those without the bootstrap.
    f = posterior_classwise_nc_ece(p, resp, draws, item_weights=np.ones_like(counts))
    g = posterior_classwise_nc_ece(p, resp, draws, bootstrap=False)
    np.testing.assert_allclose(f.draws, g.draws, rtol=1e-12)
    assert "joint draws" in a.uncertainty and "joint draws" not in e.uncertainty


@pytest.mark.parametrize("change, match", [
    (dict(item_weights=np.ones((5, 89))), r"must have shape \(n_draws, n_items\) = \(5, 90\)"),
    (dict(item_weights=np.r_[-np.ones((1, 90)), np.ones((4, 90))]), r"rows \[0\] are not"),
    (dict(item_weights=np.r_[np.zeros((1, 90)), np.ones((4, 90))]), "not all zero"),
    (dict(item_weights=np.ones((5, 90)), bootstrap=False), "need bootstrap=True"),
])
def test_bad_item_weights_raise(tiny_joint, change, match):
    p, labels, resp, draws, counts = tiny_joint
    with pytest.raises(ValueError, match=match):
        posterior_classwise_nc_ece(p, resp, draws, **change)
    with pytest.raises(ValueError, match="not a point estimate"):
        posterior_classwise_nc_ece(p, resp, draws[0], item_weights=np.ones((1, 90)))


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("change, match", [
    (dict(probs=np.full((600, 3), 0.3)), "must sum to 1"),
    (dict(probs=np.ones(600)), "shape"),
    (dict(confusion_draws=np.ones((3, 3, 2))), "must have shape"),
    (dict(confusion_draws=np.full((3, 3, 3), 0.5)), "`confusion_draws` rows must sum to 1"),
    (dict(prevalence=np.ones(4) / 4), "prevalence"),
    (dict(weights="gap"), "weights"),
    (dict(weights=np.ones(2)), "explicit `weights`"),
    (dict(interval="hpd"), "interval"),
    (dict(level=1.5), "level"),
    (dict(usable=np.ones(2, bool)), "usable"),
    (dict(n_draws=0), "n_draws"),
])
def test_bad_inputs_raise(mc3, change, match):
    p, y, labels, conf, resp = mc3
    kw = dict(probs=p, responses=resp, confusion_draws=conf)
    kw.update(change)
    args = [kw.pop("probs"), kw.pop("responses"), kw.pop("confusion_draws")]
    with pytest.raises(ValueError, match=match):
        posterior_top_label_nc_ece(*args, **kw)


def test_bad_labels_raise(mc3):
    p, y, labels, conf, resp = mc3
    with pytest.raises(ValueError, match=r"class indices in 0..2"):
        posterior_classwise_nc_ece(p, (resp[0], resp[1], resp[2] + 1), conf)
    with pytest.raises(ValueError, match="response items must lie"):
        posterior_classwise_nc_ece(p[:10], resp, conf)
    with pytest.raises(ValueError, match="no annotator has a usable"), pytest.warns(IdentifiabilityWarning):
        posterior_classwise_nc_ece(p, resp, np.full((3, 3, 3), 1 / 3))


# ----------------------------------------------------------------------------- coverage
def _coverage_rows(n_sets, k, j, n_items, n_boot, seed0):
    """Cover flags of the reported 90% intervals over simulated data sets (EM-bootstrap draws, as the script)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "coverage_multiclass.py"
    spec = importlib.util.spec_from_file_location("coverage_multiclass", path)
    cm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cm)
    targets = cm.population_target(k, "overconfident", size=500_000)
    rows = [cm.run_one(seed0 + r, k, j, "overconfident", n_items, n_boot, targets) for r in range(n_sets)]
    return rows


@pytest.mark.slow
def test_coverage_of_the_90_percent_interval_small_simulation():
    # 40 data sets (K = 3, 3 annotators, 1500 items; confusion draws from Bayesian-bootstrap EM refits, never from
    # the true labels). Under correct coverage the number covered is Binomial(40, 0.9); accept >= 30 (P(X < 30)
    # = 0.006 for p = 0.9). The class-wise mean is tested the same way (joint draws: the script passes each refit's
    # item weights, item_weights=g).
    rows = _coverage_rows(40, 3, 3, 1500, 100, seed0=777)
    assert sum(r["top_label"]["covered"] for r in rows) >= 30
    assert sum(r["classwise"]["covered"] for r in rows) >= 30
