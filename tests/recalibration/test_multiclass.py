"""Tests for the K-class maps of noisycal_bayes/recalibration/maps.py and posterior.py (corrected targets).

False-alarm rate of the statistical checks: z = 4 (two-sided normal tail 6e-5 per check).
"""
import json
import warnings

import numpy as np
import pytest
from scipy.special import softmax

from noisycal_bayes.data import Binning
from noisycal_bayes.recalibration import (MulticlassTemperatureScaling, NotFittedError, PosteriorMulticlassTemperature,
                                          PosteriorTemperature, PosteriorTopLabelHistogram, TemperatureScaling,
                                          TopLabelHistogram, VectorScaling, map_from_dict)
from noisycal_bayes.core import annotator_weights, corrected_vectors
from noisycal_bayes.recalibration.posterior import _combine, _response_design, _target_draws
from noisycal_bayes.reference.recalibration import corrected_item_labels
from noisycal_bayes.warnings import BoundaryWarning, DataWarning

Z = 4.0
T_TRUE = 2.0
POINT_MAPS = [MulticlassTemperatureScaling, VectorScaling, TopLabelHistogram]
CONF3 = np.array([[[0.75, 0.15, 0.10], [0.10, 0.80, 0.10], [0.05, 0.20, 0.75]],
                  [[0.70, 0.20, 0.10], [0.15, 0.70, 0.15], [0.10, 0.10, 0.80]],
                  [[0.85, 0.05, 0.10], [0.10, 0.75, 0.15], [0.20, 0.10, 0.70]]])


# ----------------------------------------------------------------------------- local stand-ins (contract B)
def simulate_crowd(n, confusion, *, t_true=T_TRUE, scale=1.0, seed=0):
    """Clean labels from a temperature-miscalibrated classifier and noisy labels of every annotator.

    True logits u ~ N(0, scale^2 I), Y ~ softmax(u); the classifier reports logits t_true * u, so softmax(z / t_true)
    is the clean-label probability and the risk-minimising temperature is t_true.
    """
    rng = np.random.default_rng(seed)
    k = confusion.shape[-1]
    u = scale * rng.normal(size=(n, k))
    y = (u + rng.gumbel(size=u.shape)).argmax(axis=1)  # Gumbel-max: Y ~ softmax(u)
    cum = np.cumsum(confusion[:, y, :], axis=2)        # (J, n, K)
    labels = (rng.random((confusion.shape[0], n, 1)) > cum).sum(axis=2).T  # (n, J)
    return t_true * u, y, labels


def corrected_targets(responses, n_items, confusion, *, weights):
    """Contract B's corrected_targets, written as a plain loop over responses (stand-in for core.channel)."""
    inv = np.linalg.inv(confusion)
    num, den = np.zeros((n_items, confusion.shape[-1])), np.zeros((n_items, confusion.shape[-1]))
    for i, j, a in zip(*responses):
        num[i] += weights[j] * inv[j][a]
        den[i] += weights[j]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((den > 0).all(1, keepdims=True), num / den, np.nan)


def equal_weight_targets(labels, confusion):
    """Per item the mean over annotators of inv(C_j)[a_ij] (every annotator labels every item)."""
    inv = np.linalg.inv(confusion)
    return np.mean([inv[j][labels[:, j]] for j in range(labels.shape[1])], axis=0)


def responses_of(labels):
    n, j = labels.shape
    return np.repeat(np.arange(n), j), np.tile(np.arange(j), n), labels.ravel()


def sandwich_se_temperature(z, t, temperature):
    """Delta-method se of the fitted T: beta = 1/T solves mean_i psi_i = 0, psi_i = s_i E_q[z_i] - t_i . z_i.

    Var(beta_hat) ~ Var(psi) / (n H^2) with H = mean_i s_i Var_q[z_i] (q = softmax(beta z_i)); se_T = se_beta T^2.
    """
    beta = 1.0 / temperature
    q = softmax(beta * z, axis=1)
    m = (q * z).sum(1)
    s = t.sum(1)
    psi = s * m - (t * z).sum(1)
    h = np.mean(s * (q * (z - m[:, None]) ** 2).sum(1))
    return np.std(psi, ddof=1) / (np.sqrt(z.shape[0]) * h) * temperature**2


def loss(q, t):
    return float(np.mean(-(t * np.log(q)).sum(1)))


@pytest.fixture(scope="module")
def crowd():
    z, y, labels = simulate_crowd(4000, CONF3, seed=3)
    return z, y, labels


def test_batched_targets_equal_the_per_draw_contract_formula(crowd):
    # _target_draws combines all draws in one sparse product; the loop of corrected_targets is the reference.
    _, _, labels = crowd
    labels = labels[:60].copy()
    resp = responses_of(labels)
    keep = ~((resp[0] == 5) | ((resp[0] == 7) & (resp[1] > 0)))  # item 5 unlabelled, item 7 by annotator 0 only
    resp = tuple(r[keep] for r in resp)
    rng = np.random.default_rng(1)
    draws = np.stack([np.stack([[rng.dirichlet(300 * row) for row in c] for c in CONF3]) for _ in range(3)])
    design = _response_design(resp, 60, 3, 3)
    for rule in ("iv", "equal"):
        got = _target_draws(draws, design, rule, None)
        for s, c in enumerate(draws):
            eq = corrected_targets(resp, 60, c, weights=np.ones((3, 3)))
            w = annotator_weights(c, np.nanmean(eq, axis=0), rule=rule)
            np.testing.assert_allclose(got[s], corrected_targets(resp, 60, c, weights=w), rtol=1e-12, atol=1e-14)
    assert np.isnan(got[:, 5]).all() and np.isfinite(got[:, 7]).all()
    np.testing.assert_allclose(got[:, 7], np.linalg.inv(draws[:, 0])[:, labels[7, 0]], rtol=1e-12)


# ----------------------------------------------------------------------------- recovery and unbiasedness
def test_temperature_recovered_from_clean_one_hot_targets(crowd):
    z, y, _ = crowd
    t = np.eye(3)[y]
    ts = MulticlassTemperatureScaling(inputs="logits").fit(z, t)
    se = sandwich_se_temperature(z, t, ts.temperature_)
    assert abs(ts.temperature_ - T_TRUE) < Z * se, (ts.temperature_, se)
    # The probability route gives the same fit (no probability is near the 1e-6 clip here).
    assert softmax(z, axis=1).min() > 1e-6
    ts_p = MulticlassTemperatureScaling().fit(softmax(z, axis=1), t)
    assert ts_p.temperature_ == pytest.approx(ts.temperature_, rel=1e-9)


def test_corrected_targets_recover_temperature_and_naive_labels_do_not(crowd):
    z, y, labels = crowd
    t = equal_weight_targets(labels, CONF3)
    assert t.min() < 0  # corrected targets leave [0, 1]
    ts = MulticlassTemperatureScaling(inputs="logits").fit(z, t)
    # The sandwich se uses the corrected targets, so it contains the label-noise variance.
    se = sandwich_se_temperature(z, t, ts.temperature_)
    assert abs(ts.temperature_ - T_TRUE) < Z * se, (ts.temperature_, se)
    # Negative control: the naive fit to one annotator's labels is biased (noise looks like underconfidence).
    naive_t = np.eye(3)[labels[:, 0]]
    naive = MulticlassTemperatureScaling(inputs="logits").fit(z, naive_t)
    assert abs(naive.temperature_ - T_TRUE) > Z * sandwich_se_temperature(z, naive_t, naive.temperature_)


def test_corrected_loss_is_exactly_unbiased_for_the_clean_loss():
    # E[-sum_k T[A, k] log q_k | Y = y] = sum_a C[y, a] (-sum_k T[a, k] log q_k) = -log q_y for any map's q.
    rng = np.random.default_rng(0)
    c = CONF3[0]
    tv = corrected_vectors(c[None])[0]
    z = rng.normal(size=(6, 3))
    vs = VectorScaling(inputs="logits")
    vs.scale_, vs.bias_, vs.n_classes_ = np.array([0.5, 1.0, 2.0]), np.array([0.3, -0.1, -0.2]), 3
    for q in (softmax(z / 1.7, axis=1), vs.predict_proba(z)):
        for y in range(3):
            expected = sum(c[y, a] * -(tv[a] * np.log(q)).sum(1) for a in range(3))
            np.testing.assert_allclose(expected, -np.log(q[:, y]), rtol=1e-12)


# ----------------------------------------------------------------------------- relabelling the classes
def test_relabelling_classes_permutes_parameters_and_keeps_temperature(crowd):
    z, _, labels = crowd
    t = equal_weight_targets(labels, CONF3)
    perm = np.array([2, 0, 1])
    ts = MulticlassTemperatureScaling(inputs="logits").fit(z, t)
    ts_p = MulticlassTemperatureScaling(inputs="logits").fit(z[:, perm], t[:, perm])
    assert ts_p.temperature_ == pytest.approx(ts.temperature_, rel=1e-10)
    z, t = z[:1500], t[:1500]  # vector scaling on fewer items (test time)
    vs = VectorScaling(inputs="logits").fit(z, t)
    vs_p = VectorScaling(inputs="logits").fit(z[:, perm], t[:, perm])
    assert not np.allclose(vs.scale_, vs.scale_[perm], atol=1e-3)  # the permutation is visible in the parameters
    np.testing.assert_allclose(vs_p.scale_, vs.scale_[perm], atol=1e-6)
    np.testing.assert_allclose(vs_p.bias_, vs.bias_[perm], atol=1e-6)
    np.testing.assert_allclose(vs_p.predict_proba(z[:, perm]), vs.predict_proba(z)[:, perm], atol=1e-6)
    th = TopLabelHistogram(inputs="logits").fit(z, t)
    th_p = TopLabelHistogram(inputs="logits").fit(z[:, perm], t[:, perm])
    np.testing.assert_array_equal(th_p.bin_values_, th.bin_values_)
    np.testing.assert_allclose(th_p.predict_proba(z[:, perm]), th.predict_proba(z)[:, perm], rtol=1e-12)


def test_relabelling_classes_leaves_posterior_temperature_draws_unchanged(crowd):
    z, _, labels = crowd
    perm = np.array([1, 2, 0])
    inv = np.argsort(perm)  # new label of an old class
    resp = responses_of(labels[:500])
    pt = PosteriorMulticlassTemperature(inputs="logits", n_draws=10).fit(z[:500], resp, CONF3)
    resp_p = (resp[0], resp[1], inv[resp[2]])
    pt_p = PosteriorMulticlassTemperature(inputs="logits", n_draws=10).fit(z[:500, perm], resp_p,
                                                                          CONF3[:, perm][:, :, perm])
    np.testing.assert_allclose(pt_p.temperature_draws_, pt.temperature_draws_, rtol=1e-9)


# ----------------------------------------------------------------------------- vector scaling
def test_vector_scaling_newton_fit_is_the_minimum_found_by_a_generic_optimiser(crowd):
    from scipy import optimize
    from scipy.special import logsumexp
    z, _, labels = crowd
    z, t = z[:1000], equal_weight_targets(labels[:1000], CONF3)
    vs = VectorScaling(inputs="logits").fit(z, t)
    assert vs.converged_ and not vs.on_boundary_

    def objective(theta):  # written out again: mean corrected loss + l2 / 2 ||theta - (1, 0)||^2, and gradient
        v = theta[:3] * z + theta[3:]
        d = theta - np.r_[np.ones(3), np.zeros(3)]
        gv = (t.sum(1)[:, None] * softmax(v, axis=1) - t) / z.shape[0]
        val = np.mean(t.sum(1) * logsumexp(v, axis=1) - (t * v).sum(1)) + 0.5 * 1e-3 * d @ d
        return val, np.r_[(gv * z).sum(0), gv.sum(0)] + 1e-3 * d

    ref = optimize.minimize(objective, np.r_[np.ones(3), np.zeros(3)], jac=True, method="BFGS",
                            options={"gtol": 1e-11})
    np.testing.assert_allclose(np.r_[vs.scale_, vs.bias_], ref.x, atol=1e-7)
    assert objective(np.r_[vs.scale_, vs.bias_])[0] <= ref.fun + 1e-13
    assert vs.bias_.sum() == pytest.approx(0, abs=1e-9)  # the ridge picks the centred bias (shift invariance)


def unbounded_problem():
    """Corrected-style targets with t_i0 = -0.5 for every item (rows sum to 1); logit 0 carries no information."""
    rng = np.random.default_rng(4)
    z = np.c_[np.zeros(300), rng.normal(size=(300, 2))]
    y = 1 + (z[:, 1:] + rng.gumbel(size=(300, 2))).argmax(axis=1)  # Y in {1, 2}, calibrated on logits 1, 2
    return z, np.eye(3)[y] + np.array([-0.5, 0.25, 0.25])


def test_vector_scaling_stays_finite_where_the_corrected_loss_is_unbounded_below():
    z, t = unbounded_problem()
    # The problem is real: without penalty or box, bias_0 -> -inf keeps lowering the corrected loss.
    losses = [loss(softmax(z + np.array([b, 0.0, 0.0]), axis=1), t) for b in (0.0, -10.0, -50.0)]
    assert losses[0] > losses[1] > losses[2] + 15
    with pytest.warns(BoundaryWarning, match=r"bias\[0\]"):
        vs = VectorScaling(inputs="logits").fit(z, t)
    assert vs.on_boundary_ and "bias[0]" in vs.boundary_params_ and vs.bias_[0] == -10.0
    q = vs.predict_proba(z)
    assert np.isfinite(vs.scale_).all() and np.isfinite(q).all()
    np.testing.assert_allclose(q.sum(1), 1.0)
    # Without a binding box the ridge alone keeps the fit finite, at the stationary point of
    # mean_i (q_i0 - t_i0) + l2 bias_0 = 0 with q_i0 ~ 0: bias_0 = mean(t_0) / l2.
    with warnings.catch_warnings():
        warnings.simplefilter("error", BoundaryWarning)
        wide = VectorScaling(inputs="logits", bias_bounds=(-1e6, 1e6), l2=1e-2).fit(z, t)
    assert wide.bias_[0] == pytest.approx(t[:, 0].mean() / 1e-2, rel=1e-6)


def test_temperature_boundary_is_flagged():
    z = np.random.default_rng(2).normal(size=(200, 4))
    t = np.eye(4)[z.argmax(1)]  # perfectly separated: the loss keeps falling as T -> 0
    with pytest.warns(BoundaryWarning, match="boundary"):
        ts = MulticlassTemperatureScaling(inputs="logits", bounds=(0.5, 5.0)).fit(z, t)
    assert ts.on_boundary_ and ts.temperature_ == pytest.approx(0.5)


# ----------------------------------------------------------------------------- top-label histogram
def test_top_label_histogram_is_projected_bin_mean_of_the_predicted_class(crowd):
    z, _, labels = crowd
    t = equal_weight_targets(labels, CONF3)[:300]  # few items per bin: some means leave [1/3, 1]
    p = softmax(z[:300], axis=1)
    th = TopLabelHistogram(bins=12).fit(p, t)
    top, conf = p.argmax(1), p.max(1)
    edges = 1 / 3 + (2 / 3) * np.arange(13) / 12  # equal width on [1/K, 1]
    np.testing.assert_allclose(th.edges_[1:-1], edges[1:-1], rtol=1e-12)
    b = np.clip(np.searchsorted(edges, conf, side="right") - 1, 0, 11)
    means = np.array([t[b == k, top[b == k]].mean() for k in range(12)])
    np.testing.assert_allclose(th.raw_means_, means, rtol=1e-12)
    np.testing.assert_allclose(th.bin_values_, np.clip(means, 1 / 3, 1), rtol=1e-12)
    assert th.clipped_bins_  # the projection was exercised
    q = th.predict_proba(p)
    np.testing.assert_allclose(q.sum(1), 1.0, rtol=1e-12)
    c_new = th.predict_confidence(p)
    np.testing.assert_allclose(q[np.arange(300), top], c_new, rtol=1e-12)
    # The predicted class stays the strict argmax unless the confidence is exactly 1/K (all entries equal then).
    assert (c_new == 1 / 3).any() and (c_new > 1 / 3).any()
    strict = c_new > 1 / 3
    others = np.where(np.eye(3, dtype=bool)[top], -np.inf, q).max(1)
    assert np.all(others[strict] < c_new[strict])
    np.testing.assert_allclose(q[~strict], 1 / 3, rtol=1e-12)
    # The two other classes keep their order (proportional shares mixed with an even split).
    rest = ~np.eye(3, dtype=bool)[top]
    po, qo = p[rest].reshape(300, 2), q[rest].reshape(300, 2)
    assert np.all((po[:, 0] - po[:, 1]) * (qo[:, 0] - qo[:, 1]) >= 0)
    assert (q >= 0).all()


# ----------------------------------------------------------------------------- posterior maps
def test_posterior_maps_without_bootstrap_equal_the_point_maps_per_draw(crowd):
    z, _, labels = crowd
    z, labels = z[:800], labels[:800]
    t = equal_weight_targets(labels, CONF3)
    resp = responses_of(labels)
    pt = PosteriorMulticlassTemperature(weights="equal", bootstrap=False, n_draws=3, inputs="logits")
    pt.fit(z, resp, CONF3)
    point = MulticlassTemperatureScaling(inputs="logits").fit(z, t)
    np.testing.assert_allclose(pt.temperature_draws_, point.temperature_, rtol=1e-9)
    ph = PosteriorTopLabelHistogram(bins=8, weights="equal", bootstrap=False, n_draws=3, inputs="logits")
    ph.fit(z, resp, CONF3)
    th = TopLabelHistogram(bins=8, inputs="logits").fit(z, t)
    np.testing.assert_allclose(ph.bin_draws_, np.broadcast_to(th.bin_values_, ph.bin_draws_.shape), rtol=1e-12)
    np.testing.assert_allclose(ph.predict_proba(z[:20]), th.predict_proba(z[:20]), rtol=1e-12)


def test_posterior_fit_accepts_fit_objects_and_a_given_prevalence(crowd):
    from types import SimpleNamespace
    z, _, labels = crowd
    z, resp = z[:400], responses_of(labels[:400])
    ref = PosteriorMulticlassTemperature(inputs="logits", n_draws=4).fit(z, resp, CONF3)
    # A fit object with `.confusion` (MulticlassEMFit / MulticlassPosterior) and a data set with `.responses`.
    obj = PosteriorMulticlassTemperature(inputs="logits", n_draws=4).fit(
        z, SimpleNamespace(responses=resp), SimpleNamespace(confusion=CONF3))
    np.testing.assert_array_equal(obj.temperature_draws_, ref.temperature_draws_)
    # The default IV prevalence is the mean equal-weight corrected target: passing it gives the same fit.
    pi = np.nanmean(corrected_targets(resp, 400, CONF3, weights=np.ones((3, 3))), axis=0)
    given = PosteriorMulticlassTemperature(inputs="logits", n_draws=4).fit(z, resp, CONF3, prevalence=pi)
    np.testing.assert_allclose(given.temperature_draws_, ref.temperature_draws_, rtol=1e-12)
    other = PosteriorMulticlassTemperature(inputs="logits", n_draws=4).fit(z, resp, CONF3,
                                                                          prevalence=[0.8, 0.1, 0.1])
    assert not np.allclose(other.temperature_draws_, ref.temperature_draws_, rtol=1e-6)


def test_unusable_annotator_is_left_out(crowd):
    # A singular confusion (annotator 2 labels at random) gets weight 0: the fit equals the fit without its labels.
    z, _, labels = crowd
    z, labels = z[:400], labels[:400]
    conf = CONF3.copy()
    conf[2] = 1 / 3
    resp = responses_of(labels)
    with_random = PosteriorMulticlassTemperature(inputs="logits", n_draws=3).fit(z, resp, conf)
    keep = resp[1] < 2
    without = PosteriorMulticlassTemperature(inputs="logits", n_draws=3).fit(z, tuple(r[keep] for r in resp),
                                                                            conf[:2])
    np.testing.assert_allclose(with_random.temperature_draws_, without.temperature_draws_, rtol=1e-12)


def test_posterior_intervals_from_confusion_draws(crowd):
    z, _, labels = crowd
    z, labels = z[:1000], labels[:1000]
    rng = np.random.default_rng(7)
    # Confusion "draws": Dirichlet rows around CONF3 (concentration 400).
    draws = np.stack([np.stack([[rng.dirichlet(400 * row) for row in c] for c in CONF3]) for _ in range(30)])
    resp = responses_of(labels)
    for m in (PosteriorMulticlassTemperature(inputs="logits"), PosteriorTopLabelHistogram(bins=6, inputs="logits")):
        m.fit(z, resp, draws)
        assert m.n_draws_ == 30
        lo, hi = m.predict_interval(z[:40], level=0.9)
        mean = m.predict_proba(z[:40])
        assert lo.shape == hi.shape == mean.shape == (40, 3)
        assert np.all(lo <= mean + 1e-12) and np.all(mean <= hi + 1e-12) and np.all(hi - lo > 0)
        np.testing.assert_allclose(mean.sum(1), 1.0, rtol=1e-12)
        np.testing.assert_allclose(mean, m.predict_draws(z[:40]).mean(0), rtol=1e-12)


def test_posterior_top_label_empty_bins_get_the_widest_band(crowd):
    z, _, labels = crowd
    p = softmax(z[:200] / 20, axis=1)  # confidences near 1/3: the upper bins are empty
    with pytest.warns(DataWarning, match="empty"):
        ph = PosteriorTopLabelHistogram(bins=5, n_draws=5).fit(p, responses_of(labels[:200]), CONF3)
    assert ph.empty_bins_
    lo, hi = ph.predict_interval(np.array([[0.96, 0.02, 0.02]]))
    np.testing.assert_allclose(lo, [[1 / 3, 0, 0]])
    np.testing.assert_allclose(hi, [[1, 2 / 3, 2 / 3]])


# ----------------------------------------------------------------------------- JSON round trips
@pytest.mark.parametrize("cls", POINT_MAPS)
def test_json_round_trip_is_exact(crowd, cls):
    z, _, labels = crowd
    t = equal_weight_targets(labels[:1000], CONF3)
    p = softmax(z[:1000], axis=1)
    kwargs = {"bins": Binning.equal_mass(6)} if cls is TopLabelHistogram else {}
    m = cls(**kwargs).fit(p, t)
    restored = map_from_dict(json.loads(json.dumps(m.to_dict(), allow_nan=False)))
    assert type(restored) is cls and restored.get_params() == m.get_params()
    for name in m._fitted_names:
        np.testing.assert_array_equal(getattr(restored, name), getattr(m, name))
    np.testing.assert_array_equal(restored.predict_proba(p), m.predict_proba(p))
    unfitted = map_from_dict(json.loads(json.dumps(cls(**kwargs).to_dict())))
    with pytest.raises(NotFittedError, match="not fitted yet"):
        unfitted.predict_proba(p)


def test_json_round_trip_keeps_nan_of_empty_bins():
    p = np.array([[0.9, 0.05, 0.05], [0.4, 0.35, 0.25]])
    with pytest.warns(DataWarning, match="empty"):
        th = TopLabelHistogram(bins=4).fit(p, np.eye(3)[[0, 1]])
    restored = map_from_dict(json.loads(json.dumps(th.to_dict(), allow_nan=False)))
    np.testing.assert_array_equal(restored.raw_means_, th.raw_means_)
    assert np.isnan(restored.raw_means_).sum() == 2


# ----------------------------------------------------------------------------- errors
def test_clear_errors_for_bad_inputs():
    p = np.full((4, 3), 1 / 3)
    p[:, 0] += 0.1
    p[:, 1] -= 0.1
    t = np.eye(3)[[0, 1, 2, 0]]
    with pytest.raises(ValueError, match=r"shape \(n_items, n_classes\)"):
        MulticlassTemperatureScaling().fit(p[:, 0], t)
    with pytest.raises(ValueError, match=r"n_classes >= 2"):
        VectorScaling().fit(np.ones((4, 1)), t[:, :1])
    with pytest.raises(ValueError, match=r"shape of the inputs \(4, 3\)"):
        TopLabelHistogram().fit(p, t[:3])
    bad = p.copy()
    bad[2] = [0.5, 0.4, 0.3]
    with pytest.raises(ValueError, match=r"must sum to 1 .*items \[2\] sum to \[1.2\]"):
        MulticlassTemperatureScaling().fit(bad, t)
    with pytest.raises(ValueError, match=r"in \[0, 1\].*items \[1\]"):
        MulticlassTemperatureScaling().fit(p - np.array([[0], [0.5], [0], [0]]), t)
    nan_t = t.astype(float)
    nan_t[3] = np.nan
    with pytest.raises(ValueError, match=r"finite; got NaN or inf in rows \[3\].*drop them"):
        VectorScaling().fit(p, nan_t)
    with pytest.raises(ValueError, match="inputs"):
        MulticlassTemperatureScaling(inputs="scores").fit(p, t)
    with pytest.raises(ValueError, match="bounds"):
        MulticlassTemperatureScaling(bounds=(2.0, 1.0)).fit(p, t)
    with pytest.raises(ValueError, match="l2"):
        VectorScaling(l2=0).fit(p, t)
    with pytest.raises(ValueError, match="not identified"):
        MulticlassTemperatureScaling().fit(np.full((4, 3), 1 / 3), t)
    ts = MulticlassTemperatureScaling().fit(p, t)
    with pytest.raises(ValueError, match="has 2 classes but the map was fitted with 3"):
        ts.predict_proba(np.full((2, 2), 0.5))


@pytest.mark.parametrize("cls", POINT_MAPS + [PosteriorMulticlassTemperature, PosteriorTopLabelHistogram])
def test_not_fitted(cls):
    with pytest.raises(NotFittedError, match="not fitted yet; call `fit` first"):
        cls().predict_proba(np.full((2, 3), 1 / 3))


def test_clear_errors_for_bad_posterior_inputs(crowd):
    z, _, labels = crowd
    p = softmax(z[:50], axis=1)
    resp = responses_of(labels[:50])
    pt = PosteriorMulticlassTemperature(n_draws=2)
    with pytest.raises(ValueError, match=r"shape \(n_draws, J, K, K\) or \(J, K, K\)"):
        pt.fit(p, resp, CONF3[0])
    off = CONF3.copy()
    off[1, 2, 0] += 0.1
    with pytest.raises(ValueError, match=r"rows \(annotator, class\) \[\(1, 2\)\] sum to \[1.1\]"):
        pt.fit(p, resp, off)
    with pytest.raises(ValueError, match="2 x 2 but the inputs have 3 classes"):
        pt.fit(p, resp, CONF3[:, :2, :2] / CONF3[:, :2, :2].sum(-1, keepdims=True))
    with pytest.raises(ValueError, match=r"labels must be class indices in 0..2 .*; got \[3\]"):
        pt.fit(p, (resp[0], resp[1], np.where(np.arange(resp[2].size) == 4, 3, resp[2])), CONF3)
    with pytest.raises(ValueError, match=r"annotator indices must lie in 0..1"):
        pt.fit(p, resp, CONF3[:2])
    with pytest.raises(ValueError, match=r"`prevalence` must have shape \(3,\)"):
        pt.fit(p, resp, CONF3, prevalence=[0.5, 0.5])
    with pytest.raises(ValueError, match=r"weights='gap' is defined for two classes.*'iv' or 'equal'"):
        PosteriorMulticlassTemperature(weights="gap").fit(p, resp, CONF3)
    with pytest.raises(ValueError, match=r"invertible enough in draws \[0, 1\]"):
        pt.fit(p, resp, np.full((3, 3, 3), 1 / 3))
    fitted = PosteriorTopLabelHistogram(n_draws=2, bins=3).fit(p, resp, CONF3)
    with pytest.raises(ValueError, match="level"):
        fitted.predict_interval(p, level=1.5)


@pytest.mark.slow
def test_posterior_temperature_interval_covers_the_true_temperature():
    # Known confusions, noisy labels, Bayesian-bootstrap draws: the 90% interval of T covers T_TRUE (the
    # risk-minimising temperature) in 90% of data sets. R = 120: binomial se sqrt(0.9 * 0.1 / 120) = 0.027, z = 4.
    r_sets, level = 120, 0.9
    covered, covered_no_bootstrap = [], []
    for rep in range(r_sets):
        z, _, labels = simulate_crowd(800, CONF3, seed=100 + rep)
        resp = responses_of(labels)
        draws = PosteriorMulticlassTemperature(inputs="logits", n_draws=100, seed=rep).fit(z, resp, CONF3)
        lo, hi = np.quantile(draws.temperature_draws_, [(1 - level) / 2, (1 + level) / 2])
        covered.append(lo <= T_TRUE <= hi)
        point = PosteriorMulticlassTemperature(inputs="logits", n_draws=2, bootstrap=False).fit(z, resp, CONF3)
        covered_no_bootstrap.append(point.temperature_draws_.min() <= T_TRUE <= point.temperature_draws_.max())
    se = np.sqrt(level * (1 - level) / r_sets)
    assert abs(np.mean(covered) - level) < Z * se, np.mean(covered)
    # Negative control: without the bootstrap (known confusions) the band has no width and must fail.
    assert abs(np.mean(covered_no_bootstrap) - level) > Z * se


# ----------------------------------------------------------------------------- scikit-learn conventions
@pytest.mark.parametrize("cls", POINT_MAPS + [PosteriorMulticlassTemperature, PosteriorTopLabelHistogram])
def test_scikit_learn_conventions(crowd, cls):
    # The conventions tests/recalibration/test_sklearn.py checks with scikit-learn itself for the binary maps
    # (same ParamsMixin); here without importing scikit-learn (its import alone costs seconds).
    z, _, labels = crowd
    z, labels = z[:300], labels[:300]
    m = cls(inputs="logits")
    assert not any(k.endswith("_") for k in vars(m)) and set(vars(m)) == set(m.get_params())
    assert repr(m) == f"{cls.__name__}(inputs='logits')"
    posterior = cls.__name__.startswith("Posterior")
    args = (responses_of(labels), CONF3) if posterior else (equal_weight_targets(labels, CONF3),)
    if posterior:
        assert m.set_params(n_draws=5) is m and m.n_draws == 5
    with pytest.raises(ValueError, match="invalid parameter"):
        m.set_params(n_bins=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)  # empty top-label bins in 300 items
        assert m.fit(z, *args) is m
        c = cls(**m.get_params())  # what sklearn.base.clone does
        np.testing.assert_array_equal(c.fit(z, *args).predict_proba(z), m.predict_proba(z))
