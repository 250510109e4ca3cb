"""Tests for noisycal_bayes/reference/variants.py: NC-ECE independent / reuse / cross-fit, bootstrap."""
import warnings

import numpy as np
import pytest

from noisycal_bayes import AnnotationSet, Binning, Channel, nc_ece, simulate_annotations
from noisycal_bayes.reference.variants import (bootstrap_nc_ece, nc_ece_cross_fit, nc_ece_reuse, nc_ece_split)
from noisycal_bayes.warnings import ConvergenceWarning, DataWarning, IdentifiabilityWarning

FPR = [0.1, 0.2, 0.15]
TPR = [0.9, 0.8, 0.75]


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(600, fpr=FPR, tpr=TPR, curve="overconfident", missing=0.2, seed=3)


class Spy:
    """Estimator returning a fixed channel (or a perturbed one) and recording the data it was given."""

    def __init__(self, channel, perturb=False):
        self.channel, self.perturb, self.calls = channel, perturb, []

    def __call__(self, data):
        self.calls.append(data)
        if not self.perturb:
            return self.channel
        # A channel that depends on the data, so that different fitting sets give different channels.
        shift = 0.05 * (data.labels == 1).mean()
        return Channel(self.channel.fpr + shift, self.channel.tpr - shift)


class Result:
    def __init__(self, channel, identified=True, converged=True, reason=""):
        self.channel, self.identified, self.converged, self.reason = channel, identified, converged, reason


def _subset_all(data, rows):
    return AnnotationSet(data.labels[rows], data.scores[rows], data.item_ids[rows], data.annotator_ids)


def _direct_sums(labels, z, edges, fpr, gap, w):
    """Independent NumPy route: per-bin (count, score sum, corrected-label sum), weights renormalised per item."""
    obs = labels >= 0
    W = np.where(obs, w, 0.0)
    W = W / W.sum(axis=1, keepdims=True)
    item = (W * np.where(obs, (labels - fpr) / gap, 0.0)).sum(axis=1)
    b = np.searchsorted(edges[1:-1], z, side="right")
    k = edges.size - 1
    return (np.bincount(b, minlength=k).astype(float), np.bincount(b, weights=z, minlength=k),
            np.bincount(b, weights=item, minlength=k))


def _direct_iv(labels, fpr, gap):
    """IV weights of DESIGN §3 written out: mu = mean equally weighted corrected label, clipped."""
    obs = labels >= 0
    mu = np.mean(np.where(obs, (labels - fpr) / gap, 0.0).sum(axis=1) / obs.sum(axis=1))
    mu = np.clip(mu, 1e-4, 1 - 1e-4)
    tpr = fpr + gap
    inv = 1 / np.maximum((mu * tpr * (1 - tpr) + (1 - mu) * fpr * (1 - fpr)) / gap**2, 1e-8)
    return inv / inv.sum()


# ----------------------------------------------------------------------------- reuse
def test_reuse_equals_nc_ece_with_the_estimated_channel(sim):
    spy = Spy(sim.channel, perturb=True)
    res = nc_ece_reuse(sim.data, estimator=spy, bins=8, weights="iv")
    ref = nc_ece(sim.data, spy(sim.data), bins=8, weights="iv")
    assert res.variant == "reuse" and res.fold is None
    assert res.value == pytest.approx(ref.value, rel=1e-12)
    np.testing.assert_allclose(res.table["residual"], ref.table["residual"], rtol=1e-12)
    assert spy.calls[0] is sim.data  # fitted on the very sample it evaluates


def test_reuse_warns_when_bins_depend_on_the_sample(sim):
    with pytest.warns(DataWarning, match="fixed independently"):
        nc_ece_reuse(sim.data, estimator=Spy(sim.channel), bins=Binning.equal_mass(5))


def test_reuse_requires_bins_keyword(sim):
    with pytest.raises(TypeError):
        nc_ece_reuse(sim.data, estimator=Spy(sim.channel))


# ----------------------------------------------------------------------------- independent samples
def test_split_fits_channels_weights_and_edges_on_one_part_and_evaluates_the_other(sim):
    spy = Spy(sim.channel, perturb=True)
    res = nc_ece_split(sim.data, estimator=spy, bins=Binning.equal_mass(6), weights="iv", fraction=0.4, seed=7)
    assert len(spy.calls) == 1
    fit_ids = set(spy.calls[0].item_ids)
    fit_rows = np.flatnonzero(res.fold == 0)
    eval_rows = np.flatnonzero(res.fold == 1)
    assert fit_ids == set(sim.data.item_ids[fit_rows])
    assert fit_ids.isdisjoint(sim.data.item_ids[eval_rows])
    assert (res.n_fit, res.n_eval) == (240, 360) and res.table["count"].sum() == 360
    lab, z = sim.data.labels.astype(float), sim.data.scores
    ch = res.channels[0]
    # Edges and IV weights come from the fitting part ...
    np.testing.assert_allclose(res.edges, Binning.equal_mass(6).edges_for(z[fit_rows]))
    np.testing.assert_allclose(res.weights[0], _direct_iv(lab[fit_rows], ch.fpr, ch.gap), rtol=1e-10)
    count, score, corr = _direct_sums(lab[eval_rows], z[eval_rows], res.edges, ch.fpr, ch.gap, res.weights[0])
    assert res.value == pytest.approx(np.abs(corr - score).sum() / count.sum(), rel=1e-10)
    # ... and not from the evaluation part (the check has power: IV weights there differ).
    assert not np.allclose(_direct_iv(lab[eval_rows], ch.fpr, ch.gap), res.weights[0], rtol=1e-6)


def test_split_is_reproducible_and_seed_dependent(sim):
    a = nc_ece_split(sim.data, estimator=Spy(sim.channel), seed=1)
    b = nc_ece_split(sim.data, estimator=Spy(sim.channel), seed=1)
    c = nc_ece_split(sim.data, estimator=Spy(sim.channel), seed=2)
    assert a.value == b.value and np.array_equal(a.fold, b.fold)
    assert not np.array_equal(a.fold, c.fold)


# ----------------------------------------------------------------------------- cross-fitting
def test_cross_fit_fits_each_fold_out_of_fold(sim):
    spy = Spy(sim.channel, perturb=True)
    res = nc_ece_cross_fit(sim.data, estimator=spy, n_folds=4, seed=5)
    assert len(spy.calls) == 4 and len(res.channels) == 4
    for k, fitted_on in enumerate(spy.calls):
        assert set(fitted_on.item_ids) == set(sim.data.item_ids[res.fold != k])
    assert np.bincount(res.fold).tolist() == [150, 150, 150, 150]


def test_cross_fit_accumulates_fold_statistics_on_one_common_partition(sim):
    binning = Binning.equal_mass(7)
    res = nc_ece_cross_fit(sim.data, estimator=Spy(sim.channel, perturb=True), n_folds=3, bins=binning, seed=11)
    common = binning.edges_for(sim.data.scores)
    np.testing.assert_allclose(res.edges, common)  # edges from ALL scores, once
    assert res.fold_table.groupby("fold")["bin"].apply(list).map(lambda b: b == list(range(7))).all()
    # Independent route: per fold, the held-out items' bin sums on the common edges with that fold's
    # channel and weights; add them up and take |.| once.
    lab, z = sim.data.labels.astype(float), sim.data.scores
    total = np.zeros((3, 7))
    own_partition = 0.0
    for k in range(3):
        rows = res.fold == k
        ch, w = res.channels[k], res.weights[k]
        np.testing.assert_allclose(w, _direct_iv(lab[~rows], ch.fpr, ch.gap), rtol=1e-10)  # out of fold
        sums = np.array(_direct_sums(lab[rows], z[rows], common, ch.fpr, ch.gap, w))
        np.testing.assert_allclose(res.fold_table.query("fold == @k")[["count", "score_sum", "corrected_sum"]].T,
                                   sums, rtol=1e-10, atol=1e-12)
        total += sums
        fold_edges = binning.edges_for(z[rows])
        assert not np.allclose(fold_edges, common)  # per-fold partitions would differ ...
        c, sc, co = _direct_sums(lab[rows], z[rows], fold_edges, ch.fpr, ch.gap, w)
        own_partition += np.abs(co - sc).sum()
    count, score, corr = total
    assert res.value == pytest.approx(np.abs(corr - score).sum() / count.sum(), rel=1e-10)
    np.testing.assert_allclose(res.table["count"], count)
    # ... and would give another number (so the equality above distinguishes the two constructions).
    assert abs(own_partition / sim.data.n_items - res.value) > 1e-6


def test_cross_fit_with_a_constant_channel_and_fixed_weights_equals_reuse(sim):
    # With the same channel and weights in every fold, summed bin statistics are those of the full sample.
    w = np.array([0.5, 0.3, 0.2])
    cf = nc_ece_cross_fit(sim.data, estimator=Spy(sim.channel), n_folds=5, weights=w)
    full = nc_ece(sim.data, sim.channel, weights=w)
    assert cf.value == pytest.approx(full.value, rel=1e-12)
    np.testing.assert_allclose(cf.table["residual"], full.table["residual"], rtol=1e-10)


def test_cross_fit_with_default_estimator_is_fit_em_with_five_groups():
    from noisycal_bayes.reference.em import fit_em

    sim = simulate_annotations(1500, fpr=FPR, tpr=TPR, curve="overconfident", seed=4)
    default = nc_ece_cross_fit(sim.data, n_folds=2, seed=0)
    explicit = nc_ece_cross_fit(sim.data, estimator=lambda d: fit_em(d, groups=Binning.equal_mass(5)), n_folds=2, seed=0)
    assert default.value == explicit.value
    for a, b in zip(default.channels, explicit.channels):
        np.testing.assert_array_equal(a.fpr, b.fpr)


# ----------------------------------------------------------------------------- bootstrap
def test_bootstrap_reestimates_channels_in_every_replicate(sim):
    spy = Spy(sim.channel, perturb=True)
    res = bootstrap_nc_ece(sim.data, estimator=spy, n_boot=30, level=0.8, seed=2)
    assert len(spy.calls) == 31  # full sample + one per replicate
    assert spy.calls[0] is sim.data
    for rep in spy.calls[1:4]:
        assert rep.n_items == sim.data.n_items
        assert not np.array_equal(np.sort(rep.scores), np.sort(sim.data.scores))  # resampled with replacement
    assert res.n_failed == 0 and res.replicates.shape == (30,)
    assert np.unique(res.replicates).size == 30
    assert res.value == pytest.approx(nc_ece(sim.data, spy(sim.data), edges=res.edges).value)
    # Percentile interval: quantiles of the replicates. (It need not contain the point estimate: NC-ECE's
    # Jensen bias enters a replicate twice; `bias` reports the shift.)
    q10, q80, q90 = np.quantile(res.replicates, [0.1, 0.8, 0.9])
    assert res.interval == pytest.approx((q10, q90)) and res.upper_bound == pytest.approx(q80)
    assert res.bias == pytest.approx(res.replicates.mean() - res.value)


def test_basic_bootstrap_reflects_the_quantiles_around_the_estimate(sim):
    kw = dict(estimator=Spy(sim.channel, perturb=True), n_boot=30, level=0.8, seed=2)
    pct = bootstrap_nc_ece(sim.data, **kw)
    basic = bootstrap_nc_ece(sim.data, method="basic", **kw)
    np.testing.assert_array_equal(pct.replicates, basic.replicates)
    v = pct.value
    q10, q20, q90 = np.quantile(pct.replicates, [0.1, 0.2, 0.9])
    assert basic.interval == pytest.approx((max(2 * v - q90, 0), max(2 * v - q10, 0)))
    assert basic.upper_bound == pytest.approx(max(2 * v - q20, 0))
    assert basic.method == "basic" and pct.method == "percentile"


def test_bootstrap_is_reproducible(sim):
    a = bootstrap_nc_ece(sim.data, estimator=Spy(sim.channel), n_boot=10, seed=4)
    b = bootstrap_nc_ece(sim.data, estimator=Spy(sim.channel), n_boot=10, seed=4)
    c = bootstrap_nc_ece(sim.data, estimator=Spy(sim.channel), n_boot=10, seed=5)
    np.testing.assert_array_equal(a.replicates, b.replicates)
    assert not np.array_equal(a.replicates, c.replicates)


def test_bootstrap_counts_and_reports_failed_replicates(sim):
    calls = []

    def flaky(data):
        calls.append(1)
        # The full-sample fit is call 1; replicates are calls 2..; every third fails.
        ok = len(calls) == 1 or len(calls) % 3 != 0
        return Result(sim.channel if ok else None, identified=ok, reason="" if ok else "groups look alike")

    with pytest.warns(IdentifiabilityWarning, match="7 of 21 bootstrap replicates failed"):
        res = bootstrap_nc_ece(sim.data, estimator=flaky, n_boot=21, seed=0)
    assert res.n_failed == 7 and res.replicates.shape == (14,)
    assert res.failure_reasons == {"groups look alike": 7}


def test_bootstrap_counts_estimator_errors_and_missing_annotators_as_failures():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, size=(40, 3))
    labels[1:, 2] = -1  # annotator 2 labelled one item: most replicates lose it
    data = AnnotationSet.from_wide(labels, rng.random(40))
    ch = Channel([0.1, 0.1, 0.1], [0.9, 0.9, 0.9])
    with pytest.warns(IdentifiabilityWarning, match="failed"):
        res = bootstrap_nc_ece(data, estimator=lambda d: ch, n_boot=20, seed=1)
    # P(item 0 absent from a replicate) = (39/40)^40 = 0.36; the count must match the reasons exactly.
    assert res.n_failed == sum(res.failure_reasons.values()) > 0
    assert all("have no label in the replicate" in r for r in res.failure_reasons)

    def raising(d):
        if d is not data:
            raise ValueError("groups have identical prevalence")
        return ch

    labels[:, 2] = rng.integers(0, 2, size=40)
    data = AnnotationSet.from_wide(labels, rng.random(40))
    with pytest.raises(ValueError, match="all 5 bootstrap replicates failed.*identical prevalence"):
        bootstrap_nc_ece(data, estimator=raising, n_boot=5)


def test_bootstrap_summarises_warnings_from_replicates_once(sim):
    def noisy(data):
        warnings.warn("did not converge", ConvergenceWarning)
        return Result(sim.channel, converged=False)

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        res = bootstrap_nc_ece(sim.data, estimator=noisy, n_boot=12)
    msgs = [str(w.message) for w in rec if issubclass(w.category, ConvergenceWarning)]
    # One from the full-sample fit, one summary of the 12 replicate warnings, one about unconverged fits.
    assert len(msgs) == 3
    assert any("12 warning(s)" in m for m in msgs) and any("13 of 13 channel fits" in m for m in msgs)
    assert res.n_unconverged == 12


# ----------------------------------------------------------------------------- bad input
def test_bad_inputs_raise_clear_errors(sim):
    est = Spy(sim.channel)
    with pytest.raises(ValueError, match="must be an AnnotationSet"):
        nc_ece_split(sim.data.labels, estimator=est)
    no_scores = AnnotationSet.from_wide(sim.data.labels)
    with pytest.raises(ValueError, match="needs classifier scores"):
        nc_ece_cross_fit(no_scores, estimator=est)
    with pytest.raises(ValueError, match="must be a callable"):
        bootstrap_nc_ece(sim.data, estimator=sim.channel)
    with pytest.raises(ValueError, match="must return a Channel or an object with a `.channel`"):
        nc_ece_reuse(sim.data, estimator=lambda d: (0.1, 0.9), bins=10)
    with pytest.raises(ValueError, match="channel for 2 annotators"):
        nc_ece_split(sim.data, estimator=lambda d: Channel([0.1, 0.1], [0.9, 0.9]))
    with pytest.raises(ValueError, match=r"`fraction`.*\(0, 1\)"):
        nc_ece_split(sim.data, estimator=est, fraction=1.0)
    with pytest.raises(ValueError, match="leaves one part empty"):
        nc_ece_split(sim.data, estimator=est, fraction=0.0001)
    with pytest.raises(ValueError, match="`n_folds` must be an integer >= 2"):
        nc_ece_cross_fit(sim.data, estimator=est, n_folds=1)
    with pytest.raises(ValueError, match="exceeds the number of items"):
        nc_ece_cross_fit(sim.data, estimator=est, n_folds=601)
    with pytest.raises(ValueError, match="`n_boot` must be an integer >= 1"):
        bootstrap_nc_ece(sim.data, estimator=est, n_boot=0)
    with pytest.raises(ValueError, match="`level` must lie strictly between 0 and 1"):
        bootstrap_nc_ece(sim.data, estimator=est, level=90)
    with pytest.raises(ValueError, match="`method` must be 'percentile' or 'basic'"):
        bootstrap_nc_ece(sim.data, estimator=est, method="bca")
    with pytest.raises(ValueError, match="`weights` must be one of"):
        nc_ece_cross_fit(sim.data, estimator=est, weights="inverse")
    with pytest.raises(ValueError, match="channel estimation failed on the channel-fitting part: no groups"):
        nc_ece_split(sim.data, estimator=lambda d: Result(None, identified=False, reason="no groups"))
    with pytest.raises(ValueError, match="failed on the full sample"):
        bootstrap_nc_ece(sim.data, estimator=lambda d: Result(sim.channel, identified=False))


def test_a_part_without_labels_from_an_annotator_is_an_error():
    labels = np.zeros((20, 2), dtype=int)
    labels[1:, 1] = -1
    data = AnnotationSet.from_wide(labels, np.linspace(0, 1, 20))
    est = lambda d: Channel([0.1, 0.1], [0.9, 0.9])  # noqa: E731
    with pytest.raises(ValueError, match=r"annotators \[1\] have no label in the training part of fold"):
        nc_ece_cross_fit(data, estimator=est, n_folds=2)


def test_inputs_are_not_modified(sim):
    before = sim.data.labels.copy(), sim.data.scores.copy()
    w = np.array([1.0, 2.0, 3.0])
    nc_ece_cross_fit(sim.data, estimator=Spy(sim.channel), weights=w, n_folds=2)
    np.testing.assert_array_equal(w, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(sim.data.labels, before[0])
    np.testing.assert_array_equal(sim.data.scores, before[1])


def test_bootstrap_result_value_is_the_full_sample_value():
    # Issue 15, item 7: `.value` is the one point estimate; the full-sample NCECEResult is `.full_sample`.
    from noisycal_bayes import simulate_annotations

    sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    res = bootstrap_nc_ece(sim.data, estimator=lambda d: sim.channel, n_boot=5, seed=1)
    assert res.value == res.full_sample.value
