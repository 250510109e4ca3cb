"""Hard statistical cases: degenerate, adversarial and non-identified data, precision, failing fits.

For each case the package must return a correct answer, or say clearly (an error, or a flagged result with
a warning naming the reason) that it cannot; never a confident number that is silently wrong. Both EM
implementations (the reference one and the Bayesian layer's vectorised one) are held to the same rules.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from noisycal_bayes import AnnotationSet, Channel, ece, nc_ece, simulate_annotations, smece
from noisycal_bayes.core import ds_loglik, em_step, nc_ece_from_stats, bin_stats, pad_bin_stats, x64
from noisycal_bayes.data import bin_index, compress_patterns, resolve_groups
from noisycal_bayes.warnings import ConvergenceWarning, IdentifiabilityWarning, NoisyCalWarning, SmallGapWarning

from ._helpers import assert_one_line_error, run_cli, tree
from noisycal_bayes.data import Binning

G = 4  # score groups everywhere: one compiled EM per number of annotators


def inference_em(data, **kw):
    from noisycal_bayes.inference import fit_em

    return fit_em(data, **{"groups": Binning.equal_mass(G), **kw})


def reference_em(data, **kw):
    from noisycal_bayes.reference import fit_em

    return fit_em(data, **{"groups": Binning.equal_mass(G), **kw})


FITS = {"inference": inference_em, "reference": reference_em}


def fit_recording(fit, data, **kw):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        result = fit(data, **kw)
    return result, [w for w in rec if issubclass(w.category, NoisyCalWarning)]


def corrected_items(labels, fpr, gap, weights):
    """Per-item combined corrected labels in NumPy (DESIGN §2)."""
    obs = labels >= 0
    W = np.where(obs, weights, 0.0)
    W = W / W.sum(1, keepdims=True)
    return (W * np.where(obs, (labels - fpr) / gap, 0.0)).sum(1)


def write_csv(path, data: AnnotationSet):
    long = data.to_long()
    long["annotator"] = long["annotator"].astype(str)
    long[["item", "annotator", "label"]].to_csv(path / "ann.csv", index=False)
    long.drop_duplicates("item")[["item", "score"]].to_csv(path / "scores.csv", index=False)
    return path / "ann.csv", path / "scores.csv"


@pytest.fixture(scope="module")
def sim3():
    return simulate_annotations(600, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], curve="overconfident", seed=11)


# ---------------------------------------------------------------------------------------------- agreement, all zero
@pytest.mark.parametrize("which", sorted(FITS))
def test_annotators_who_agree_everywhere_give_the_noiseless_channel_and_plain_ece(which, sim3):
    y = sim3.clean_labels
    data = AnnotationSet.from_wide(np.repeat(y[:, None], 3, axis=1), sim3.data.scores)
    fit, warned = fit_recording(FITS[which], data)
    assert fit.channel is not None and fit.identified, fit.reason
    # Perfect agreement is explained best by perfect annotators: the MLE is fpr = 0, tpr = 1.
    np.testing.assert_allclose(fit.channel.fpr, 0.0, atol=1e-6)
    np.testing.assert_allclose(fit.channel.tpr, 1.0, atol=1e-6)
    # Then NC-ECE is the plain ECE against the common label. NC-ECE moves by at most
    # max|d Ytilde / d(fpr, gap)| * 1e-6 <= 2e-6 / gap^2 ~ 2e-6 here: 1e-5 is a safe bound.
    assert abs(nc_ece(data, fit.channel).value - ece(data.scores, y)) < 1e-5


@pytest.mark.parametrize("which", sorted(FITS))
def test_all_labels_zero_fail_with_the_reason(which, sim3):
    data = AnnotationSet.from_wide(np.zeros((600, 3), dtype=int), sim3.data.scores)
    fit, warned = fit_recording(FITS[which], data)
    assert fit.channel is None and not fit.identified
    # Every start fails, and the message says why (no annotator separates the classes).
    assert "EM starts failed" in fit.reason and "gap <= min_gap" in fit.reason
    assert any(issubclass(w.category, ConvergenceWarning) for w in warned)
    # With known channels the metric itself is still well defined (and equals the NumPy formula).
    ch = Channel([0.1, 0.2, 0.15], [0.9, 0.8, 0.85])
    got = nc_ece(data, ch, weights="equal").value
    y = corrected_items(data.labels, ch.fpr, ch.gap, np.ones(3))
    z = data.scores
    b = np.minimum((z * 10).astype(int), 9)
    assert abs(got - np.abs(np.bincount(b, weights=y - z, minlength=10)).sum() / z.size) < 1e-12


def test_all_labels_zero_on_the_command_line(sim3, tmp_path):
    data = AnnotationSet.from_wide(np.zeros((600, 3), dtype=int), sim3.data.scores)
    ann, sc = write_csv(tmp_path, data)
    before = tree(tmp_path)
    code, out, err = run_cli(["evaluate", ann, "--scores", sc, "--method", "em", "--groups", G, "--n-boot", 0,
                              "--json", tmp_path / "r.json", "--out", tmp_path / "rep"])
    assert code == 2
    assert_one_line_error(err, piece="EM could not estimate the annotators' channels")
    assert "gap <= min_gap" in err
    assert tree(tmp_path) == before


# ---------------------------------------------------------------------------------------------- one bin, one group
@pytest.mark.parametrize("score", [0.0, 0.55, 1.0])
def test_every_item_in_one_bin(score, sim3):
    data = sim3.data.with_scores(np.full(sim3.data.n_items, score))
    res = nc_ece(data, sim3.channel)
    counts = res.table["count"].to_numpy()
    k = min(int(score * 10), 9)  # equal-width bins, the last one closed
    assert counts[k] == data.n_items and counts.sum() == data.n_items
    w = res.weights
    y = corrected_items(data.labels, sim3.channel.fpr, sim3.channel.gap, w)
    assert abs(res.value - abs(y.mean() - score)) < 1e-12
    # Equal-mass score groups collapse to one group.
    assert resolve_groups(data.scores, Binning.equal_mass(G), data.n_items)[1] == 1
    # Three annotators are identified without groups (third cross-moment, paper §4.3): fits go through.
    for which, fit in FITS.items():
        f, warned = fit_recording(fit, data)
        assert f.identified and f.channel is not None, (which, f.reason)
        assert not [w for w in warned if issubclass(w.category, IdentifiabilityWarning)]


def _two_annotators_one_group(sim3):
    d = sim3.data
    return AnnotationSet(d.labels[:, :2], np.full(d.n_items, 0.5), d.item_ids, d.annotator_ids[:2])


def test_two_annotators_in_a_single_score_group_reference_em_warns(sim3):
    data = _two_annotators_one_group(sim3)
    with pytest.warns(IdentifiabilityWarning, match="continuum"):
        fit = reference_em(data)
    assert not fit.identified


def test_two_annotators_in_a_single_score_group_inference_em_warns(sim3):
    data = _two_annotators_one_group(sim3)
    fit, warned = fit_recording(inference_em, data)
    assert any(issubclass(w.category, IdentifiabilityWarning) for w in warned)
    assert not fit.identified


@pytest.mark.parametrize("which", sorted(FITS))
def test_two_annotators_with_uninformative_groups_warn(which):
    """Scores independent of the labels: every group has the same prevalence, the ridge of §D.2."""
    sim = simulate_annotations(3000, fpr=[0.1, 0.2], tpr=[0.9, 0.8], curve=lambda z: np.full_like(z, 0.4), seed=4)
    fit, warned = fit_recording(FITS[which], sim.data)
    # On the ridge EM either stalls (no start converges: the best one returned with converged=False and a
    # ConvergenceWarning, or no channel) or stops somewhere on it, which must come with the IdentifiabilityWarning;
    # an unflagged estimate would be silently arbitrary. (Every start hits max_iter for seeds 4-6.)
    identifiability = [w for w in warned if issubclass(w.category, IdentifiabilityWarning)]
    if fit.channel is None or not fit.converged:
        assert not fit.converged and any(issubclass(w.category, ConvergenceWarning) for w in warned)
        assert fit.channel is not None or not fit.identified
    else:
        assert identifiability and "barely differ" in str(identifiability[0].message)


# ---------------------------------------------------------------------------------------------- gap 0, negative gap
@pytest.mark.parametrize("fpr, tpr", [(0.3, 0.3), (0.6, 0.4), (0.9, 0.1)])
def test_a_channel_with_gap_zero_or_negative_is_refused(fpr, tpr):
    with pytest.raises(ValueError, match=r"annotators \[1\] have tpr <= fpr"):
        Channel([0.1, fpr], [0.9, tpr])


@pytest.mark.parametrize("kind", ["coin flip (gap 0)", "adversarial (gap < 0)"])
@pytest.mark.parametrize("which", sorted(FITS))
def test_uninformative_or_adversarial_annotator_is_flagged(kind, which):
    sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], curve="overconfident", seed=8)
    lab = sim.data.labels.copy()
    if kind.startswith("coin"):
        lab[:, 2] = np.random.default_rng(1).integers(0, 2, size=lab.shape[0])
    else:
        lab[:, 2] = 1 - lab[:, 2]  # always the opposite of what it would have said
    data = AnnotationSet(lab, sim.data.scores, sim.data.item_ids, np.array(["ann", "bob", "eve"], dtype=object))
    # The default (orientation="auto") keeps eve in a crowd-oriented fit, flagged by name (issue 16); her gap
    # interval decides the downstream rule (weight 0 when it contains 0, her labels with their sign if negative).
    fit, warned = fit_recording(FITS[which], data)
    assert fit.details["orientation"] == "crowd" and fit.channel.orientation == "crowd"
    flag = fit.annotators.set_index("annotator").loc["eve", "flag"]
    assert flag == ("uninformative" if kind.startswith("coin") else "adversarial")
    assert any("'eve'" in str(w.message) for w in warned if issubclass(w.category, SmallGapWarning))
    # The paper's rule (orientation="every"): never an accepted fit that divides by eve's (near-)zero or
    # negative gap.
    fit, warned = fit_recording(FITS[which], data, orientation="every")
    if fit.channel is not None:
        assert fit.channel.gap[2] > 0.05 and fit.identified
        pytest.fail(f"accepted a fit with eve's gap {fit.channel.gap[2]:.3f}")
    assert not fit.identified
    assert any(issubclass(w.category, ConvergenceWarning) for w in warned), [str(w.message) for w in warned]
    if kind.startswith("adversarial"):
        # The reason names the annotator and the negative gap.
        assert "'eve'" in fit.reason and "gap <= min_gap" in fit.reason


# ---------------------------------------------------------------------------------------------- disjoint annotators
def _one_label_per_item(sim3):
    lab = sim3.data.labels.copy()
    who = np.random.default_rng(2).integers(0, 3, size=lab.shape[0])
    lab[np.arange(3)[None, :] != who[:, None]] = -1
    return AnnotationSet(lab, sim3.data.scores, sim3.data.item_ids, sim3.data.annotator_ids)


def test_one_label_per_item_is_not_identified_proof(sim3):
    """Why a warning is required: an affine change of the prevalences leaves the likelihood unchanged.

    With one label per item, P(A_j = 1 | g) = fpr_j + gap_j pi_g is all the data see. Mapping
    pi -> c + d pi, gap -> gap / d, fpr -> fpr - c gap / d keeps every such rate, so two different channels
    have exactly the same likelihood.
    """
    data = _one_label_per_item(sim3)
    group, n_groups = resolve_groups(data.scores, Binning.equal_mass(G), data.n_items)
    pc = compress_patterns(data.labels, group, n_groups)
    fpr, tpr, prev = np.array([0.1, 0.2, 0.15]), np.array([0.9, 0.8, 0.85]), np.linspace(0.3, 0.7, n_groups)
    c, d = 0.1, 0.8
    gap2 = (tpr - fpr) / d
    fpr2 = fpr - c * gap2
    prev2 = c + d * prev
    with x64():
        a = float(ds_loglik(pc.patterns, pc.group, pc.counts, fpr, tpr, prev))
        b = float(ds_loglik(pc.patterns, pc.group, pc.counts, fpr2, fpr2 + gap2, prev2))
    assert abs(a - b) < 1e-9 * abs(a)
    assert np.max(np.abs(fpr2 - fpr)) > 0.05  # genuinely different channels


def test_one_label_per_item_reference_estimators_warn(sim3):
    from noisycal_bayes.reference import fit_gmm

    data = _one_label_per_item(sim3)
    for fit in (lambda d: reference_em(d), lambda d: fit_gmm(d, Binning.equal_mass(G), n_starts=2)):
        with pytest.warns(IdentifiabilityWarning, match="no item was labelled by two or more annotators"):
            est = fit(data)
        assert not est.identified
        with pytest.raises(ValueError, match="not identified"):
            est.require()


def test_one_label_per_item_inference_em_warns(sim3):
    fit, warned = fit_recording(inference_em, _one_label_per_item(sim3))
    assert any(issubclass(w.category, IdentifiabilityWarning) for w in warned)
    assert not fit.identified


def test_disjoint_blocks_of_annotators_are_fitted_consistently():
    """Annotators {0, 1} label the first half, {2, 3} the second: identified through the shared prevalences."""
    sim = simulate_annotations(1200, fpr=[0.1, 0.2, 0.1, 0.15], tpr=[0.9, 0.8, 0.85, 0.9], curve="overconfident",
                               seed=2)
    lab = sim.data.labels.copy()
    lab[:600, 2:] = -1
    lab[600:, :2] = -1
    data = AnnotationSet(lab, sim.data.scores, sim.data.item_ids, sim.data.annotator_ids)
    a, b = inference_em(data), reference_em(data)
    assert a.identified and b.identified
    # Two implementations of the same maximum likelihood; EM stops within ~1e-8 steps (see test_fuzz_cli).
    assert abs(a.loglik - b.loglik) < 1e-6 * abs(b.loglik)
    np.testing.assert_allclose(a.channel.fpr, b.channel.fpr, atol=1e-5)
    np.testing.assert_allclose(a.channel.tpr, b.channel.tpr, atol=1e-5)
    assert np.isfinite(nc_ece(data, a.channel).value)


# ---------------------------------------------------------------------------------------------- one item
def test_one_item(tmp_path):
    data = AnnotationSet.from_wide(np.array([[1, 0, 1]]), [0.3])
    ch = Channel([0.1, 0.2, 0.15], [0.9, 0.8, 0.85])
    res = nc_ece(data, ch, weights="equal")
    y = corrected_items(data.labels, ch.fpr, ch.gap, np.ones(3))[0]
    assert abs(res.value - abs(y - 0.3)) < 1e-12
    assert ece([0.3], [1]) == pytest.approx(0.7, abs=1e-15) and smece([0.3], [2 / 3]) == pytest.approx(2 / 3 - 0.3)
    for which, fit in FITS.items():
        f, warned = fit_recording(fit, data)
        assert f.channel is None and not f.identified, which
        assert warned and f.reason
    ann, sc = write_csv(tmp_path, data)
    before = tree(tmp_path)
    code, out, err = run_cli(["evaluate", ann, "--scores", sc, "--method", "em", "--n-boot", 0,
                              "--json", tmp_path / "r.json"])
    assert code == 2
    assert_one_line_error(err)
    assert tree(tmp_path) == before


# ---------------------------------------------------------------------------------------------- float32 vs float64
@pytest.fixture(scope="module")
def million():
    sim = simulate_annotations(1_000_000, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], curve="overconfident",
                               missing=0.2, seed=0)
    group, n_groups = resolve_groups(sim.data.scores, Binning.equal_mass(5), sim.data.n_items)
    return sim, compress_patterns(sim.data.labels, group, n_groups)


def test_float32_and_float64_agree_on_the_compressed_likelihood_and_em(million):
    """1e6 items compressed to <= 5 * 3^3 rows.

    float32 unit roundoff u = 2^-24 ~ 6e-8. The log-likelihood is a sum of <= 135 same-sign terms, each
    computed to a few u: relative error <= ~150 u ~ 1e-5 (stated tolerance; measured 2e-9). EM is a
    contraction near its fixed point, so after 500 steps the float32 iterate sits within a few u / (1 - r)
    of the float64 one: 1e-5 absolute on every rate (measured 2e-7).
    """
    import jax
    import jax.numpy as jnp

    sim, pc = million
    n_groups = pc.n_groups

    def run(dtype):
        pat, grp = jnp.asarray(pc.patterns, jnp.int32), jnp.asarray(pc.group, jnp.int32)
        c = jnp.asarray(pc.counts, dtype)
        theta = (jnp.full(3, 0.3, dtype), jnp.full(3, 0.7, dtype), jnp.full(n_groups, 0.5, dtype))
        theta = jax.lax.fori_loop(0, 500, lambda i, s: em_step(pat, grp, c, n_groups, *s), theta)
        return [np.asarray(t, dtype=np.float64) for t in theta], float(ds_loglik(pat, grp, c, *theta))

    p32, ll32 = run(jnp.float32)
    with x64():
        p64, ll64 = run(jnp.float64)
        ll64_at_32 = float(ds_loglik(pc.patterns, pc.group, pc.counts, *p32))
    assert abs(ll32 - ll64_at_32) <= 1e-5 * abs(ll64_at_32)
    assert abs(ll32 - ll64) <= 1e-5 * abs(ll64)
    for a, b in zip(p32, p64):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


def test_float32_and_float64_agree_on_nc_ece(million):
    """Counts and label sums up to 1e6 < 2^24 are exact in float32; score sums carry relative error ~ u per
    addition in a pairwise reduction (~ u log2 n); the result is a sum of 10 bins: 1e-5 relative is safe
    (measured 2e-8)."""
    import jax.numpy as jnp

    sim, _ = million
    z = sim.data.scores
    st = pad_bin_stats(bin_stats(sim.data.labels, z, bin_index(z, np.arange(11) / 10), 10))
    with x64():
        v64 = float(nc_ece_from_stats(st, sim.channel.fpr, sim.channel.gap))
    st32 = st._replace(count=st.count.astype(np.float32), label_sum=st.label_sum.astype(np.float32),
                       score_sum=st.score_sum.astype(np.float32))
    v32 = float(nc_ece_from_stats(st32, jnp.asarray(sim.channel.fpr, jnp.float32),
                                  jnp.asarray(sim.channel.gap, jnp.float32)))
    assert abs(v32 - v64) <= 1e-5 * v64


# ------------------------------------------------------------------------------------------ EM where no start converges
@pytest.mark.parametrize("which", sorted(FITS))
def test_em_where_no_start_converges_says_why(which, sim3):
    d = sim3.data
    data = AnnotationSet(d.labels[:, :2], d.scores, d.item_ids, d.annotator_ids[:2])  # no moment start
    fit, warned = fit_recording(FITS[which], data, max_iter=1, n_starts=4)
    # The best start is returned, unconverged (core.starts rule 5, second tier); every start's reason is recorded.
    assert fit.channel is not None and not fit.converged
    msgs = [str(w.message) for w in warned if issubclass(w.category, ConvergenceWarning)]
    assert len(msgs) == 1
    assert f"start {fit.selected_start}" in msgs[0] and "converged=False" in msgs[0]
    assert "max_iter=1" in msgs[0] and "n_starts" in msgs[0]  # the advice
    assert [r for _, r in fit.failed_starts] == ["did not converge within max_iter=1 iterations"] * 4
    # The result's reason says the same as the warning (one may carry the function's name as a prefix). It is
    # checked on its own first: an empty reason is contained in any message, so containment alone is vacuous.
    assert "max_iter=1" in fit.reason and "n_starts" in fit.reason, fit.reason
    assert fit.reason in msgs[0] or msgs[0] in fit.reason


# ---------------------------------------------------------------------------------------------- non-identified designs
def test_a_single_annotator_is_an_error_for_every_estimator(sim3):
    from noisycal_bayes.inference import fit_map, fit_nuts
    from noisycal_bayes.reference import fit_gmm

    d = sim3.data
    one = AnnotationSet(d.labels[:, :1], d.scores, d.item_ids, d.annotator_ids[:1])
    for fit in (inference_em, reference_em, lambda x: fit_gmm(x, Binning.equal_mass(G)), lambda x: fit_map(x, groups=Binning.equal_mass(G)),
                lambda x: fit_nuts(x, groups=Binning.equal_mass(G), progress_bar=False)):
        with pytest.raises(ValueError, match="single annotator"):
            fit(one)


@pytest.mark.parametrize("which", sorted(FITS))
def test_two_annotators_without_groups_warn_and_are_flagged(which, sim3):
    d = sim3.data
    data = AnnotationSet(d.labels[:, :2], d.scores, d.item_ids, d.annotator_ids[:2])
    with pytest.warns(IdentifiabilityWarning, match="continuum"):
        fit = FITS[which](data, model="dawid_skene")
    assert not fit.identified and "not identified" in fit.reason


# ---------------------------------------------------------------------------------------------- NUTS divergences
def test_nuts_divergences_give_a_warning_with_advice(tiny_bad_nuts):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        fit = tiny_bad_nuts(0)
    assert fit.n_divergent > 0 and not fit.converged
    msgs = [str(w.message) for w in rec if issubclass(w.category, ConvergenceWarning) and "divergent" in str(w.message)]
    assert len(msgs) == 1
    assert f"{fit.n_divergent} divergent transitions" in msgs[0]
    assert "target_accept" in msgs[0]  # what to do about it
    assert msgs[0] in fit.warnings  # and it stays on the result


# Each design compiles its own MAP program (~9 s CPU cold): the second runs in make test-all (the one-label-per-item
# design stays in the default run through test_one_label_per_item_* above).
@pytest.mark.parametrize("design", ["two annotators, one score group",
                                    pytest.param("one label per item", marks=pytest.mark.slow)])
def test_non_identified_designs_are_flagged_by_fit_map(sim3, design):
    """fit_map shares check_design with fit_em and fit_nuts: the same warning and identified=False."""
    from noisycal_bayes import fit_map

    data = _two_annotators_one_group(sim3) if design.startswith("two") else _one_label_per_item(sim3)
    fit, warned = fit_recording(lambda d: fit_map(d, model="grouped", groups=Binning.equal_mass(G), n_starts=2), data)
    assert any(issubclass(w.category, IdentifiabilityWarning) for w in warned)
    assert not fit.identified
    assert "not identified" in fit.reason or "no item was labelled" in fit.reason
