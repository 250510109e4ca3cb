"""Binary is the K = 2 case: layer by layer, the binary path equals the K-class path at K = 2.

The bridge between the two is :class:`noisycal_bayes.Channel`: ``Channel.confusion`` is the (J, 2, 2) stack
``[[1 - fpr, fpr], [1 - tpr, tpr]]`` and ``Channel.from_confusion`` reads ``fpr = C[:, 0, 1]``,
``tpr = C[:, 1, 1]`` back. Every test below runs one binary function and its K-class twin on the same data and
compares them. Each tolerance names its cause:

- ``EXACT`` (0): the same numbers are copied or viewed, no arithmetic in between;
- ``ROUNDING`` (1e-12): the same formula in float64 with another order of operations (a handful of terms);
- ``SUMS`` (1e-10): the same formula, summed over hundreds of items, draws or cells in another order, or
  jitted on one side only (XLA may fuse and reassociate);
- ``SOLVER`` (1e-8 relative, 1e-7 on intervals): the same objective minimised by two Newton solvers, each
  to its own stopping tolerance;
- ``FIXED_POINT`` (1e-7, 1e-6): two EMs at K = 2 through different kernels (binary: ``(fpr, u)`` rates and
  the grid / pattern matmul with the rate clip; K-class: rows of ``C`` with the 1e-12 clip inside the logs),
  each stopped by ``tol``; they reach the same fixed point only within the stopping distance.

Imports use the public names of ``noisycal_bayes`` and its subpackages where they exist; the remaining
private ones are K-class internals that have no public name yet (issue 35 moves them).
"""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from numpyro.infer.util import log_density

from noisycal_bayes import (AnnotationSet, Binning, Channel, MulticlassAnnotationSet, MulticlassEvaluation, evaluate,
                            evaluate_multiclass, simulate_annotations, simulate_multiclass)
from noisycal_bayes.core import annotator_weights, corrected_vectors, iv_weights, multiclass_e_step, x64
from noisycal_bayes.core.em import e_step as binary_e_step
from noisycal_bayes.inference import MulticlassEMFit, fit_em, fit_em_multiclass, fit_map_multiclass
from noisycal_bayes.labels import label_issues, multiclass_label_issues
from noisycal_bayes.models import MulticlassPrior, Prior, grouped_dawid_skene, grouped_multiclass
from noisycal_bayes.data.compress import compress_multiclass, sparse_table
from noisycal_bayes.propagate import posterior_classwise_nc_ece, posterior_nc_ece, posterior_top_label_nc_ece
from noisycal_bayes.recalibration import (MulticlassTemperatureScaling, PosteriorMulticlassTemperature,
                                          PosteriorTemperature, TemperatureScaling)
from noisycal_bayes.recalibration.posterior import _combine, _response_design
from noisycal_bayes.reference import bootstrap_multiclass_nc_ece, bootstrap_nc_ece, classwise_nc_ece, nc_ece
from noisycal_bayes.reference.recalibration import corrected_item_labels

from ..propagate._fakes import FPR as DRAW_FPR, TPR as DRAW_TPR, channel_draws, fake_nuts, histogram_fit

EXACT = 0.0
ROUNDING = 1e-12
SUMS = 1e-10
SOLVER = 1e-8
SOLVER_INTERVAL = 1e-7
FIXED_POINT_TIGHT = 1e-7  # both EMs at tol 1e-12
FIXED_POINT = 1e-6        # both EMs at tol 1e-11

FPR, TPR = np.array([0.1, 0.25, 0.05]), np.array([0.8, 0.7, 0.95])
CROWD_FPR, CROWD_TPR = [0.1, 0.2, 0.15], [0.85, 0.75, 0.8]


def responses_of(data):
    """``(item, annotator, label)`` of the observed cells of a binary AnnotationSet."""
    ii, jj = np.nonzero(data.labels >= 0)
    return ii, jj, data.labels[ii, jj]


def two_class(data):
    """The K = 2 MulticlassAnnotationSet of a binary AnnotationSet: same responses, probs ``[1 - s, s]``."""
    item, ann, lab = responses_of(data)
    s = np.asarray(data.scores, dtype=np.float64)
    return MulticlassAnnotationSet.from_responses(item, ann, lab, n_items=data.n_items, n_annotators=data.n_annotators,
                                                  n_classes=2, probs=np.c_[1 - s, s])


# ================================================================================ channel: the bridge itself
def test_channel_confusion_is_the_two_by_two_stack():
    ch = Channel(FPR, TPR)
    c = ch.confusion
    assert c.shape == (3, 2, 2)
    np.testing.assert_array_equal(c[:, 0, 1], FPR)
    np.testing.assert_array_equal(c[:, 1, 1], TPR)
    np.testing.assert_allclose(c.sum(axis=2), 1.0, rtol=0, atol=ROUNDING)
    back = Channel.from_confusion(c, annotator_ids=ch.annotator_ids)
    np.testing.assert_array_equal(back.fpr, ch.fpr)  # EXACT: the same entries read back
    np.testing.assert_array_equal(back.tpr, ch.tpr)
    assert back.annotator_ids == ch.annotator_ids


def test_channel_from_confusion_keeps_the_channel_checks():
    adversarial = Channel([0.1, 0.7], [0.9, 0.2], orientation="crowd")
    assert Channel.from_confusion(adversarial.confusion, orientation="crowd").gap.tolist() == \
        pytest.approx([0.8, -0.5], abs=ROUNDING)
    with pytest.raises(ValueError, match="positive orientation requires tpr > fpr"):
        Channel.from_confusion(adversarial.confusion)
    with pytest.raises(ValueError, match=r"must have shape \(n_annotators, 2, 2\); got \(2, 3, 3\)"):
        Channel.from_confusion(np.full((2, 3, 3), 1 / 3))
    bad = Channel(FPR, TPR).confusion
    bad[1, 0] = [0.5, 0.6]
    with pytest.raises(ValueError, match=r"sum to 1; annotators \[1\] do not"):
        Channel.from_confusion(bad)


# ================================================================================ data
def test_constructors():
    long = pd.DataFrame({
        "item": [10, 10, 10, 20, 20, 20, 20, 30, 30, 30, 40, 40],
        "annotator": ["a", "b", "c", "a", "b", "c", "a", "a", "b", "c", "a", "b"],
        "label": [1, 1, 1, 0, 0, 1, 0, 1, 1, 1, 1, 0],
        "gold": [None] * 12,
    })
    long.loc[long["item"] == 30, "gold"] = 1
    scores = pd.Series([0.8, 0.3, 0.9, 0.6], index=[10, 20, 30, 40])
    binary = AnnotationSet.from_long(long, scores, gold="gold")
    multi = MulticlassAnnotationSet.from_long(long, pd.DataFrame({0: 1 - scores, 1: scores}), gold="gold")
    assert multi.classes == (0, 1)
    converted = multi.to_binary()
    assert isinstance(converted, AnnotationSet)
    for x, y in zip(converted.responses, binary.responses):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_allclose(converted.scores, binary.scores, rtol=0, atol=1e-15)  # 1 - (1 - s): one rounding
    np.testing.assert_array_equal(converted.gold, binary.gold)
    assert converted.item_ids.tolist() == binary.item_ids.tolist()
    assert converted.annotator_ids.tolist() == binary.annotator_ids.tolist()
    assert converted.summary() == binary.summary()
    np.testing.assert_array_equal(multi.majority_vote(), binary.majority_vote(ties="negative"))
    np.testing.assert_allclose(multi.vote_distribution()[:, 1], binary.vote_fraction(), rtol=0, atol=ROUNDING)
    s = multi.summary()
    assert {k: v for k, v in s.items() if k not in ("probs", "n_classes", "classes", "label_counts")} == \
        {k: v for k, v in binary.summary().items() if k != "scores"}


# ================================================================================ core
def test_corrected_vectors():
    with x64():
        T = np.asarray(corrected_vectors(Channel(FPR, TPR).confusion))
    for a in (0, 1):  # binary corrected label (a - fpr) / (tpr - fpr) and its complement
        np.testing.assert_allclose(T[:, a, 1], (a - FPR) / (TPR - FPR), rtol=ROUNDING)
        np.testing.assert_allclose(T[:, a, 0], 1 - (a - FPR) / (TPR - FPR), rtol=ROUNDING)


@pytest.mark.parametrize("fpr, tpr, mu", [(FPR, TPR, 0.35), (np.array([0.1, 0.3]), np.array([0.8, 0.7]), 0.35)])
def test_iv_weights(fpr, tpr, mu):
    # Binary sigma_j^2 = [mu tpr (1 - tpr) + (1 - mu) fpr (1 - fpr)] / gap^2 (paper §4.4), normalised over the
    # annotators; both coordinates of the K-class weights (T[., 0] = 1 - T[., 1]: the same error variance).
    sigma2 = (mu * tpr * (1 - tpr) + (1 - mu) * fpr * (1 - fpr)) / (tpr - fpr) ** 2
    iv = (1 / sigma2) / np.sum(1 / sigma2)
    conf = Channel(fpr, tpr).confusion
    with x64():
        w = np.asarray(annotator_weights(conf, np.array([1 - mu, mu]), rule="iv"))
        wb = np.asarray(jax.jit(iv_weights)(fpr, tpr - fpr, mu))  # one compilation, not one per operation
    np.testing.assert_allclose(w, np.c_[iv, iv], rtol=ROUNDING)
    np.testing.assert_allclose(w[:, 1], wb, rtol=SUMS)  # jitted binary rule on one side
    # Leading draw axes: a batch of draws gives each draw's weights.
    batch = np.stack([conf, Channel(fpr[::-1], tpr[::-1]).confusion])
    wd = annotator_weights(batch, np.array([[1 - mu, mu], [1 - mu, mu]]), rule="iv")
    np.testing.assert_allclose(wd[0], w, rtol=ROUNDING)
    np.testing.assert_allclose(wd[1], w[::-1], rtol=ROUNDING)


def test_pattern_e_step():
    pats = np.array([[0, 1, 1], [1, 1, 1], [0, 0, -1], [1, 0, 0]])
    counts_g = np.array([[3.0, 5.0, 1.0, 0.0], [2.0, 0.0, 4.0, 7.0]])
    prev = np.array([0.3, 0.6])
    with x64():
        ll, T = multiclass_e_step(pats, counts_g, Channel(FPR, TPR).confusion, np.stack([1 - prev, prev], 1))
        rows = np.concatenate([pats, pats])
        grp = np.repeat([0, 1], 4)
        llb, Tb = jax.jit(binary_e_step)(rows, grp, counts_g.ravel(), FPR, TPR, prev)
    assert float(ll) == pytest.approx(float(llb), abs=SUMS)  # a sum over 8 weighted cells, jitted on one side
    np.testing.assert_allclose(np.asarray(T)[..., 1].ravel(), np.asarray(Tb), atol=ROUNDING)


# ================================================================================ models
def test_log_density():
    """Flat priors (Beta(1, 1) on fpr, u, prevalence; Dirichlet(1, 1) on each row and prevalence) make both
    prior densities 1, so the log densities are the two log-likelihoods at ``Channel(fpr, tpr).confusion``."""
    rng = np.random.default_rng(5)
    n, n_ann, n_groups = 150, 3, 2
    fpr, tpr = np.array([0.1, 0.25, 0.2]), np.array([0.85, 0.7, 0.9])
    pi = np.array([0.3, 0.7])
    group = rng.integers(0, n_groups, n)
    y = rng.random(n) < pi[group]
    labels = (rng.random((n, n_ann)) < np.where(y[:, None], tpr, fpr)).astype(np.int32)
    labels[rng.random((n, n_ann)) < 0.15] = -1
    ii, jj = np.nonzero(labels >= 0)
    conf = Channel(fpr, tpr).confusion
    prev = np.stack([1 - pi, pi], axis=1)
    flat_binary = Prior(fpr=(1, 1), u=(1, 1), prevalence=(1, 1)).params()
    flat_multi = MulticlassPrior(diagonal=1, off_diagonal=1, prevalence=1).params()
    with x64():
        binary = jax.jit(lambda lab, grp, s: log_density(grouped_dawid_skene, (lab, grp, None), dict(
            n_annotators=n_ann, n_groups=n_groups, prior=flat_binary), s)[0])(
            jnp.asarray(labels), jnp.asarray(group),
            {"fpr": jnp.asarray(fpr), "u": jnp.asarray((tpr - fpr) / (1 - fpr)), "prevalence": jnp.asarray(pi)})
        for table in (sparse_table(ii, jj, labels[ii, jj], group),
                      compress_multiclass(ii, jj, labels[ii, jj], group, None, n_items=n, n_annotators=n_ann,
                                          n_classes=2)[0]):
            static = dict(n_annotators=n_ann, n_classes=2, n_groups=n_groups, prior=flat_multi)
            multi = float(jax.jit(lambda t, s: log_density(grouped_multiclass, (t,), static, s)[0])(
                type(table)(*map(jnp.asarray, table)),
                {"confusion": jnp.asarray(conf), "prevalence": jnp.asarray(prev)}))
            assert abs(multi - float(binary)) < SUMS  # the same log-likelihood summed over 150 items / patterns


# ================================================================================ inference
@pytest.fixture(scope="module")
def binary_sim():
    return simulate_annotations(3000, fpr=CROWD_FPR, tpr=CROWD_TPR, curve="overconfident", seed=7)


@pytest.mark.parametrize("model", ["dawid_skene", pytest.param("grouped", marks=pytest.mark.slow)])
def test_em(binary_sim, model):
    kw = dict(tol=1e-11, max_iter=5000)
    if model == "grouped":  # the same four score groups on both sides
        kw["groups"] = np.minimum((np.asarray(binary_sim.data.scores) * 4).astype(np.int64), 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = fit_em(binary_sim.data, model=model, **kw)
    fit = fit_em_multiclass(two_class(binary_sim.data), model=model, **kw)
    assert isinstance(fit, MulticlassEMFit) and fit.converged
    if model == "dawid_skene":
        assert fit.path == "patterns"
        # EM never decreases the objective along the selected start.
        assert np.all(np.diff(fit.loglik_trace) >= -1e-8 * abs(fit.loglik_trace[-1]))
    ch = Channel.from_confusion(fit.confusion)
    np.testing.assert_allclose(ch.fpr, ref.channel.fpr, atol=FIXED_POINT)
    np.testing.assert_allclose(ch.tpr, ref.channel.tpr, atol=FIXED_POINT)
    np.testing.assert_allclose(fit.prevalence[:, 1], np.ravel(ref.prevalence), atol=FIXED_POINT)
    assert fit.log_likelihood == pytest.approx(ref.loglik, abs=FIXED_POINT)


@pytest.mark.slow  # fit_map_multiclass is fit_em_multiclass(prior=...), whose K = 2 fit test_em checks by default
def test_map():
    """K = 2, flat prior: the MAP is the maximum-likelihood estimate, equal to the binary grouped EM's."""
    rng = np.random.default_rng(2)
    n, n_ann, n_groups, accuracy = 500, 3, 3, 0.75
    conf = np.stack([[rng.dirichlet(np.where(np.arange(2) == y, accuracy, 1 - accuracy) * 30.0) for y in range(2)]
                     for _ in range(n_ann)])
    prev = rng.dirichlet(np.full(2, 3.0), size=n_groups)
    group = rng.integers(0, n_groups, n)
    y = (rng.random(n)[:, None] > np.cumsum(prev[group], axis=1)).sum(axis=1)
    item, ann = np.repeat(np.arange(n), n_ann), np.tile(np.arange(n_ann), n)
    lab = (rng.random(item.size)[:, None] > np.cumsum(conf[ann, y[item]], axis=1)).sum(axis=1)
    data = MulticlassAnnotationSet.from_responses(item, ann, lab, n_items=n, n_annotators=n_ann, n_classes=2)
    fit = fit_map_multiclass(data, groups=group, prior=MulticlassPrior(diagonal=1, off_diagonal=1, prevalence=1),
                             tol=1e-12, max_iter=20000)
    labels = np.full((n, n_ann), -1)
    labels[item, ann] = lab
    binary = fit_em(AnnotationSet.from_wide(labels), model="grouped", groups=group, tol=1e-12, max_iter=20000)
    np.testing.assert_allclose(fit.confusion[:, 0, 1], binary.point["fpr"], atol=FIXED_POINT_TIGHT)
    np.testing.assert_allclose(fit.confusion[:, 1, 1], binary.point["tpr"], atol=FIXED_POINT_TIGHT)
    np.testing.assert_allclose(fit.prevalence[:, 1], binary.point["prevalence"], atol=FIXED_POINT_TIGHT)
    assert abs(fit.log_likelihood - binary.loglik) < FIXED_POINT


# ================================================================================ reference (point and bootstrap)
@pytest.fixture(scope="module")
def reference_case():
    sim = simulate_annotations(500, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], curve="overconfident", missing=0.2,
                               seed=3)
    d = sim.data
    return sim, np.c_[1 - d.scores, d.scores], responses_of(d)


# Slow: compiles the binary JAX bin_table (~5 s); the propagation tests below check the same at K = 2 by default.
@pytest.mark.slow
@pytest.mark.parametrize("weights", ["iv", "equal"])
def test_reference_classwise_nc_ece(reference_case, weights):
    # Class 1's class-wise NC-ECE is the paper's NC-ECE of p[:, 1] (same channel, weights, 15 equal-width bins;
    # IV with the prevalence estimated as binary mu). Class 0 mirrors it.
    sim, probs, resp = reference_case
    ref = nc_ece(sim.data, sim.channel, bins=Binning.equal_width(15), weights=weights).value
    res = classwise_nc_ece(probs, resp, sim.channel.confusion, weights=weights)
    assert res.per_class[1] == pytest.approx(ref, abs=ROUNDING)
    assert res.per_class[0] == pytest.approx(ref, abs=ROUNDING)


@pytest.mark.slow  # compiles the binary bootstrap's JAX code (~5 s)
def test_reference_bootstrap(reference_case):
    # Same seed -> same resampled items (rng.integers(0, n, n) per replicate), same known channel, same weights.
    sim, probs, resp = reference_case
    conf = sim.channel.confusion
    b = bootstrap_nc_ece(sim.data, estimator=lambda d: sim.channel, n_boot=25, bins=Binning.equal_width(15), seed=5)
    m = bootstrap_multiclass_nc_ece(probs, resp, estimator=lambda r, n, p: (conf, None), n_boot=25, seed=5)
    np.testing.assert_allclose(m.classwise.per_class_replicates[:, 1], b.replicates, atol=SUMS)
    assert m.classwise.per_class["value"][1] == pytest.approx(b.value, abs=ROUNDING)
    assert tuple(m.classwise.per_class.loc[1, ["lower", "upper"]]) == pytest.approx(b.interval, abs=SUMS)


# ================================================================================ propagation
@pytest.fixture(scope="module")
def propagation_case():
    sim = simulate_annotations(800, fpr=DRAW_FPR, tpr=DRAW_TPR, curve="overconfident", missing=0.2, seed=3)
    em = histogram_fit(sim.data)
    rng = np.random.default_rng(0)
    f, t = channel_draws(rng, DRAW_FPR, DRAW_TPR, 2, 30)
    post = fake_nuts(em, {"fpr": f, "tpr": t, "prevalence": np.broadcast_to(em.point["prevalence"],
                                                                           (2, 30, em.groups.n_groups))})
    conf = np.stack([Channel(fi, ti).confusion for fi, ti in zip(f.reshape(-1, 3), t.reshape(-1, 3))])
    d = sim.data
    return sim, post, np.c_[1 - d.scores, d.scores], responses_of(d), conf


@pytest.mark.parametrize("weights", ["iv", "equal"])
@pytest.mark.parametrize("bootstrap", [False, True])
def test_posterior_classwise_nc_ece(propagation_case, weights, bootstrap):
    # Same data, channel draws and weights rule: class 1's class-wise NC-ECE is the binary plug-in NC-ECE of
    # p[:, 1] (IV: binary mu = mean equally weighted corrected label, the prevalence=None route). With the
    # bootstrap both draw the (60, n) exponential item weights in one block from the same seed.
    sim, post, probs, resp, conf = propagation_case
    # bias_correct=False: the binary route's bin centres; calibrate=False: the binary route is never calibrated.
    b = posterior_nc_ece(sim.data, post, bins=Binning.equal_width(15), weights=weights, bootstrap=bootstrap)
    m = posterior_classwise_nc_ece(probs, resp, conf, bins=15, weights=weights, bootstrap=bootstrap,
                                   bias_correct=False, calibrate=False)
    np.testing.assert_allclose(m.per_class[1].draws, b.draws, rtol=0, atol=SUMS)
    assert m.per_class[1].value == pytest.approx(b.value, abs=SUMS)
    assert m.per_class[1].debiased == pytest.approx(b.debiased, abs=SUMS)
    assert b.two_sided_level == b.level == m.two_sided_level == 0.9
    # The K-class interval centres the binary debiased draws on the debiased estimate: the binary draws shifted
    # by (their mean - the estimate), clipped at 0.
    centred = np.maximum(b.debiased_draws - (b.debiased_draws.mean() - b.debiased), 0.0)
    np.testing.assert_allclose(m.per_class[1].debiased_draws, centred, rtol=0, atol=SUMS)
    q = np.quantile(centred, [0.05, 0.95], method="weibull")
    assert (m.per_class[1].lower, m.per_class[1].upper) == pytest.approx(tuple(q), abs=SUMS)
    # Class 0 (bins on 1 - z, mirrored equal-width edges) gives the same residual masses with flipped sign.
    np.testing.assert_allclose(m.per_class[0].draws, b.draws, rtol=0, atol=SUMS)


def test_posterior_top_label_is_the_folded_binary_table(propagation_case):
    # Top-label with K = 2 and 10 equal-width bins: confidence bin b (b >= 5) holds items with z in bin b
    # (predicted 1) and with z in the mirrored bin 9 - b (predicted 0, residual sign flipped), so the signed
    # residual mass is D[b] - D[9 - b] with D the binary per-bin (corrected frequency - score) sums.
    sim, post, probs, resp, conf = propagation_case
    ch = Channel(DRAW_FPR, DRAW_TPR)
    b = posterior_nc_ece(sim.data, ch, bins=Binning.equal_width(10), bootstrap=False, n_draws=1)
    d = (b.table["residual"] * b.table["count"]).fillna(0.0).to_numpy()
    folded = sum(abs(d[k] - d[9 - k]) for k in range(5, 10)) / sim.data.n_items
    m = posterior_top_label_nc_ece(probs, resp, ch.confusion, bins=10, bootstrap=False, n_draws=1)
    assert m.value == pytest.approx(folded, abs=ROUNDING)
    assert m.draws[0] == pytest.approx(folded, abs=ROUNDING)


# ================================================================================ recalibration
@pytest.fixture(scope="module")
def sim2():
    # The binary maps' test data (tests/recalibration/test_maps.py): same shapes, so JAX reuses its compilations.
    return simulate_annotations(2000, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.75], curve="overconfident",
                                missing=0.25, seed=12)


def test_recalibration_iv_weights(sim2):
    # E_Y[Var(T[j, A, 1] | Y)] = [mu tpr (1 - tpr) + (1 - mu) fpr (1 - fpr)] / gap^2 (the binary IV rule).
    ch, mu = sim2.channel, 0.37
    w = annotator_weights(ch.confusion, np.array([1 - mu, mu]), rule="iv")
    var = (mu * ch.tpr * (1 - ch.tpr) + (1 - mu) * ch.fpr * (1 - ch.fpr)) / ch.gap**2
    np.testing.assert_allclose(w[:, 1], (1 / var) / np.sum(1 / var), rtol=ROUNDING)
    np.testing.assert_allclose(w[:, 0], w[:, 1], rtol=ROUNDING)


def test_temperature_scaling(sim2):
    # softmax((z_0, z_1) / T)_1 = sigmoid((z_1 - z_0) / T), and log(clip p_1) - log(clip(1 - p_1)) is the binary
    # clipped logit; the corrected loss -(1 - y) log q_0 - y log q_1 is the binary softplus(s / T) - y s / T.
    z = sim2.data.scores
    binary = TemperatureScaling().fit(z, sim2.data, channel=sim2.channel, weights="gap")
    y = corrected_item_labels(sim2.data, sim2.channel, weights="gap").values
    assert y.min() < 0 and y.max() > 1  # corrected labels leave [0, 1]
    # The K-class corrected targets with the same (gap) weights on both coordinates are (1 - y, y).
    w = np.repeat((sim2.channel.gap / sim2.channel.gap.sum())[:, None], 2, axis=1)
    r = sim2.data.responses
    t = _combine(_response_design((r.item, r.annotator, r.label), sim2.data.n_items, 3, 2),
                 corrected_vectors(sim2.channel.confusion)[None], w[None])[0]
    np.testing.assert_allclose(t, np.c_[1 - y, y], rtol=ROUNDING, atol=ROUNDING)
    multi = MulticlassTemperatureScaling().fit(np.c_[1 - z, z], t)
    # One objective (the identity above), one Newton solve each, run to convergence: equal up to SUMS.
    assert multi.temperature_ == pytest.approx(binary.temperature_, rel=SUMS)
    assert multi.loss_ == pytest.approx(binary.loss_, rel=SUMS)
    np.testing.assert_allclose(multi.predict_proba(np.c_[1 - z, z])[:, 1], binary.predict(z), rtol=SUMS)


@pytest.mark.slow
def test_posterior_temperature(sim2):
    # Same channel, IV weights and bootstrap seed: the per-draw temperatures of both routes coincide.
    z = sim2.data.scores
    binary = PosteriorTemperature(n_draws=24, seed=5).fit(sim2.data, sim2.channel)
    multi = PosteriorMulticlassTemperature(n_draws=24, seed=5).fit(np.c_[1 - z, z], sim2.data.responses,
                                                                   sim2.channel.confusion)
    np.testing.assert_allclose(multi.temperature_draws_, binary.temperature_draws_, rtol=SOLVER)
    lo, hi = multi.predict_interval(np.c_[1 - z, z][:50])
    blo, bhi = binary.predict_interval(z[:50])
    np.testing.assert_allclose(lo[:, 1], blo, rtol=SOLVER_INTERVAL)
    np.testing.assert_allclose(hi[:, 1], bhi, rtol=SOLVER_INTERVAL)


# ================================================================================ labels
def test_label_issues():
    # K = 2 with the binary fit's own posterior: P(majority wrong) equals the binary label_issues' column
    # (same majority rule: with an odd number of labels per item there are no ties).
    sim = simulate_annotations(400, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], seed=4)
    fit = fit_em(sim.data, model="dawid_skene", n_starts=2)
    binary = label_issues(sim.data, fit).set_index("item").sort_index()
    p1 = binary["p_positive"].to_numpy()
    out = multiclass_label_issues(responses_of(sim.data), np.c_[1 - p1, p1]).set_index("item").sort_index()
    np.testing.assert_allclose(out["p_majority_wrong"].to_numpy(), binary["p_majority_wrong"].to_numpy(),
                               atol=ROUNDING)
    np.testing.assert_array_equal(out["majority_label"].to_numpy().astype(int), binary["majority_label"].to_numpy())


# ================================================================================ evaluation
def test_evaluate_class_1_is_the_binary_nc_ece():
    """For K = 2 the class-wise entry of class 1 is the binary NC-ECE of the scores p_i1 with the channel
    ``Channel.from_confusion(C)``, the same equal-width bins and IV weights. (The top-label NC-ECE bins the
    confidence max(p, 1 - p) instead, so it is not the binary number.)"""
    sim = simulate_multiclass(300, 3, 2, accuracy=0.85, seed=7)
    data = MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, np.asarray(sim.label), n_classes=2,
                                                  probs=np.asarray(sim.probs))
    ev = evaluate(data, method="em", bins=15, n_boot=0, checks=False)
    assert isinstance(ev, MulticlassEvaluation) and ev.nc_ece.lower is None
    assert any("no interval" in w for w in ev.warnings)
    binary = nc_ece(data.to_binary(), Channel.from_confusion(ev.confusion), bins=Binning.equal_width(15),
                    weights="iv")
    assert ev.classwise_nc_ece.per_class["value"].iloc[1] == pytest.approx(binary.value, abs=SUMS)
    assert ev.nc_ece.value == pytest.approx(evaluate_multiclass(data, n_boot=0, checks=False).nc_ece.value,
                                            abs=EXACT)


# ================================================================================ results: one FitResult for every K
def class_data(n, n_ann, k, seed, **kw):
    sim = simulate_multiclass(n, n_ann, k, accuracy=0.8, seed=seed, **kw)
    return MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=k, probs=sim.probs)


def brute_force_posterior(data, groups, confusion, prevalence):
    """``P(Y_i = y | A_i)`` by a plain loop over items: ``pi[g_i, y] prod_r C[j_r, y, a_r]``, normalised, with the
    EM's floor of 1e-12 on every probability (an implementation independent of the package's kernels)."""
    item, ann, lab = (np.asarray(v) for v in data.responses)
    confusion = np.clip(confusion, 1e-12, 1.0)
    post = np.clip(np.array(prevalence, dtype=np.float64), 1e-12, 1.0)[np.asarray(groups)]
    for i, j, a in zip(item, ann, lab):
        post[i] *= confusion[j, :, a]
    return post / post.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("k", [2, 3, 10])
def test_fit_em_returns_a_fit_result_for_every_k(binary_sim, k):
    """One result type: ``fit_em`` gives a FitResult with the same surface for binary data (K = 2) and K classes."""
    from noisycal_bayes import FitResult

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = binary_sim.data if k == 2 else class_data(2000, 4, k, seed=k)
        fit = fit_em(data) if k == 2 else fit_em(data, n_starts=1)
    assert isinstance(fit, FitResult)
    assert (fit.n_classes, fit.n_annotators) == (k, data.n_annotators)
    assert fit.confusion.shape == (data.n_annotators, k, k)
    np.testing.assert_allclose(fit.confusion.sum(axis=2), 1.0, rtol=0, atol=1e-12)
    assert np.isfinite(fit.loglik) and isinstance(fit.converged, bool) and fit.method == "em"
    post = fit.clean_label_probability(data)
    if k == 2:  # binary keeps its shape, P(Y = 1), and reads the inputs it holds (data optional, checked)
        assert post.shape == (data.n_items,)
        np.testing.assert_array_equal(post, fit.clean_label_probability())
        assert fit.classes == (0, 1) and np.ravel(fit.prevalence).shape == (fit.n_groups,)
    else:
        assert post.shape == (data.n_items, k)
        np.testing.assert_allclose(post, brute_force_posterior(data, fit.groups, fit.confusion, fit.prevalence),
                                   rtol=1e-9, atol=1e-15)
        assert fit.prevalence.shape == (fit.n_groups, k)
        assert fit.loglik == fit.log_likelihood
    table = fit.summary()
    assert list(table.columns) == ["value"]
    if k > 2:  # one row per confusion cell and group prevalence, in C order, with their labels
        assert len(table) == data.n_annotators * k * k + fit.n_groups * k
        np.testing.assert_array_equal(table["value"].to_numpy()[:data.n_annotators * k * k], fit.confusion.ravel())
        assert table.index[1] == f"confusion[{data.annotator_ids[0]}, {data.classes[0]}, {data.classes[1]}]"
    assert repr(fit).startswith(f"{type(fit).__name__}(model='grouped', method='em', ")
    with pytest.raises(ValueError, match="'em' fit has no posterior draws"):
        fit.to_arviz()


def test_binary_confusion_is_the_channel_at_k2(binary_sim):
    """K = 2: the binary fit's ``confusion`` is its channel's stack ``[[1 - fpr, fpr], [1 - tpr, tpr]]``, and the
    K-class EM on the same responses gives the same confusion and clean-label posterior (two EMs: FIXED_POINT)."""
    kw = dict(model="dawid_skene", tol=1e-11, max_iter=5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        binary = fit_em(binary_sim.data, **kw)
        two = two_class(binary_sim.data)
        multi = fit_em_multiclass(two, **kw)
    np.testing.assert_array_equal(binary.confusion, Channel(binary.fpr, binary.tpr).confusion)  # EXACT
    assert binary.n_classes == multi.n_classes == 2 and binary.n_annotators == multi.n_annotators
    np.testing.assert_allclose(multi.confusion, binary.confusion, atol=FIXED_POINT)
    np.testing.assert_allclose(multi.clean_label_probability(two)[:, 1], binary.clean_label_probability(),
                               atol=10 * FIXED_POINT)
    assert multi.loglik == pytest.approx(binary.loglik, abs=FIXED_POINT)


def test_the_data_argument_is_checked_and_needed_where_the_fit_keeps_no_responses(binary_sim):
    data = class_data(600, 3, 3, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_em(data, n_starts=1)
        binary = fit_em(binary_sim.data, n_starts=1)
    with pytest.raises(ValueError, match="a K-class EM fit keeps no responses; pass the data it was fitted to"):
        fit.clean_label_probability()
    with pytest.raises(ValueError, match=r"`data` has 500 items, 3 annotators, 3 classes; the fit has 600, 3, 3"):
        fit.clean_label_probability(class_data(500, 3, 3, seed=2))
    with pytest.raises(ValueError, match=r"`data` has 600 items, 3 annotators, 3 classes; the fit has 3000, 3, 2"):
        binary.clean_label_probability(data)
    with pytest.raises(ValueError, match="`max_draws` thins the posterior mean of a K-class fit"):
        binary.clean_label_probability(max_draws=10)


def test_map_and_nuts_return_fit_results_with_the_old_per_class_answers():
    """fit_map and fit_nuts on K-class data: FitResults whose clean-label posterior and log-likelihood equal the
    JAX kernels the per-class code used (``softmax(class_log_joint)`` at the mode; its mean over draws, and
    ``multiclass_loglik_rows`` per draw, for NUTS) to SUMS; the ArviZ names and dims are unchanged."""
    import pickle

    from noisycal_bayes import FitResult, fit_map, fit_nuts
    from noisycal_bayes.core.likelihood import class_log_joint, multiclass_loglik_rows
    from noisycal_bayes.inference import MulticlassMAPFit, MulticlassPosterior

    sim = simulate_multiclass(300, 3, 3, accuracy=0.8, seed=2)  # the data and settings of tests/inference/test_nuts.py
    data = MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=3, probs=sim.probs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mode = fit_map(data, model="dawid_skene")
        post = fit_nuts(data, model="dawid_skene", n_chains=1, n_warmup=50, n_draws=50, seed=4, progress_bar=False)
    assert isinstance(mode, MulticlassMAPFit) and isinstance(post, MulticlassPosterior)
    assert isinstance(mode, FitResult) and isinstance(post, FitResult)
    assert (mode.method, post.method, post.n_classes, post.n_annotators, post.n_groups) == ("map", "nuts", 3, 3, 1)
    assert mode.loglik == mode.log_likelihood and np.isnan(post.loglik)
    assert post.n_divergent == post.diagnostics["n_divergent"]
    table = post.table

    def old(conf, prev):
        with x64():
            return jax.nn.softmax(class_log_joint(table, jnp.log(jnp.asarray(conf)), jnp.log(jnp.asarray(prev))), -1)

    np.testing.assert_allclose(mode.clean_label_probability(data), old(mode.confusion, mode.prevalence),
                               rtol=0, atol=SUMS)
    want = np.mean([old(c, p) for c, p in zip(post.confusion, post.prevalence)], axis=0)
    got = post.clean_label_probability()
    np.testing.assert_allclose(got, want, rtol=0, atol=SUMS)
    np.testing.assert_array_equal(post.clean_label_probability(data), got)  # data given: the same responses
    with x64():
        ll = np.stack([multiclass_loglik_rows(table, jnp.log(jnp.asarray(c)), jnp.log(jnp.asarray(p)))
                       for c, p in zip(post.confusion, post.prevalence)])
    np.testing.assert_allclose(post.log_likelihood(), ll[None], rtol=SUMS)
    idata = post.to_arviz()
    assert dict(idata["posterior"]["confusion"].sizes) == {"chain": 1, "draw": 50, "annotator": 3, "true_class": 3,
                                                           "label_class": 3}
    assert idata["posterior"]["prevalence"].dims == ("chain", "draw", "group", "true_class")
    assert sorted(idata["observed_data"].data_vars) == ["gold", "group", "labels", "response_annotator",
                                                        "response_item"]
    assert idata["log_likelihood"]["labels"].dims == ("chain", "draw", "item")
    summary = post.summary()  # ESS matched by (variable, index): finite for every scalar (R-hat: NaN, one chain)
    assert len(summary) == 3 * 9 + 3 and summary["ess_bulk"].notna().all() and "r_hat" in summary
    assert repr(post).startswith("MulticlassPosterior(model='dawid_skene', method='nuts', n_annotators=3, ")
    back = pickle.loads(pickle.dumps(post))
    assert isinstance(back, MulticlassPosterior)
    np.testing.assert_array_equal(back.clean_label_probability(), got)
