"""EM on crowds (issue 16): crowd orientation, per-annotator flags and intervals, the sparse path, gold labels,
real crowds with gold, and low-noise designs through fit_em and bootstrap_em.

Real data: crowd_gold/ of the shared data folder (bluebirds: Welinder et al., NIPS 2010, welinder/cubam, BSD; rte and
temp: Snow et al., EMNLP 2008).
"""
from pathlib import Path
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from noisycal_bayes import AnnotationSet, fit_em
from noisycal_bayes.data import Binning
from noisycal_bayes.experiments.real_data import SHARED_DATA_HINT, shared_data_path
from noisycal_bayes.inference import bootstrap_em
from noisycal_bayes.reference import fit_em as reference_fit_em
from noisycal_bayes.simulate import simulate_annotations, simulate_crowd
from noisycal_bayes.warnings import ConvergenceWarning, SmallGapWarning

CROWD_GOLD = shared_data_path("crowd_gold")


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallGapWarning)
        return fn(*args, **kwargs)


# ------------------------------------------------------------------ real crowds with gold labels
@pytest.fixture(scope="module")
def crowd_gold():
    if CROWD_GOLD is None:
        pytest.skip(f"crowd_gold data not found: {SHARED_DATA_HINT}")
    out = {}
    for name in ("bluebirds", "rte", "temp"):
        df = pd.read_csv(CROWD_GOLD / f"{name}.csv")
        data = AnnotationSet.from_long(df.rename(columns={"worker": "annotator"})[["item", "annotator", "label"]])
        gold = df.groupby("item")["gold"].first().reindex(data.item_ids).to_numpy()
        out[name] = (data, gold)
    return out


@pytest.mark.parametrize("name", ["bluebirds", "rte", "temp"])
def test_crowd_gold_fits_and_beats_majority_vote(crowd_gold, name):
    data, gold = crowd_gold[name]
    with pytest.warns(SmallGapWarning, match="annotators are flagged"):
        fit = fit_em(data, model="dawid_skene", starts="vote")
    # Every annotator kept: before issue 16 every start failed here (one spammer or adversary rejected the fit).
    assert fit.converged and fit.channel is not None
    assert fit.details["path"] == "sparse" and fit.details["orientation"] == "crowd"
    assert fit.channel.orientation == "crowd" and fit.annotators.shape[0] == data.n_annotators
    acc = np.mean((fit.clean_label_probability() > 0.5) == gold)
    mv = np.mean(data.majority_vote() == gold)
    # Measured (benchmarks/results/bench_crowds.json, section gold): EM 0.898 / 0.9275 / 0.9416 against majority vote
    # 0.759 / 0.875 / 0.933; crowd-kit's converged Dawid-Skene 0.889 / 0.9275 / 0.9416.
    assert acc > mv
    assert acc >= {"bluebirds": 0.889, "rte": 0.9275, "temp": 0.9416}[name] - 0.005


def test_vote_start_reaches_the_best_random_start(crowd_gold):
    """On temp the single vote start and the best of 10 random starts reach the same optimum."""
    data, _ = crowd_gold["temp"]
    a = _quiet(fit_em, data, model="dawid_skene", starts="vote")
    b = _quiet(fit_em, data, model="dawid_skene")
    assert a.loglik == pytest.approx(b.loglik, abs=1e-5)
    np.testing.assert_allclose(a.channel.fpr, b.channel.fpr, atol=1e-5)


# ------------------------------------------------------------------ orientation
@pytest.fixture(scope="module")
def one_adversary():
    """Five annotators labelling every item, annotator 4 adversarial (gap -0.5)."""
    fpr, tpr = [0.1, 0.15, 0.2, 0.1, 0.7], [0.9, 0.8, 0.85, 0.75, 0.2]
    rng = np.random.default_rng(3)
    n = 3000
    y = rng.random(n) < 0.4
    labels = (rng.random((n, 5)) < np.where(y[:, None], tpr, fpr)).astype(int)
    return AnnotationSet.from_wide(labels), np.array(fpr), np.array(tpr)


def test_one_adversary_neither_flips_nor_breaks_the_fit(one_adversary):
    data, fpr, tpr = one_adversary
    with pytest.warns(ConvergenceWarning, match="all 10 EM starts failed"):
        every = fit_em(data, model="dawid_skene", orientation="every")
    assert every.channel is None  # the paper's rule: one negative gap rejects every start
    with pytest.warns(SmallGapWarning, match="orientation='auto' fitted the crowd orientation"):
        fit = fit_em(data, model="dawid_skene", tol=1e-10)
    assert fit.details["orientation"] == "crowd" and fit.details["path"] == "patterns"
    # Sampling error of a rate from ~1200-1800 labels: sd <= 0.015; 0.06 is 4 sd.
    np.testing.assert_allclose(fit.channel.fpr, fpr, atol=0.06)
    np.testing.assert_allclose(fit.channel.tpr, tpr, atol=0.06)
    assert fit.annotators["flag"].tolist() == ["ok"] * 4 + ["adversarial"]
    assert fit.usable_annotators().tolist() == [True] * 5  # the adversary's labels are used, with their sign
    crowd = _quiet(fit_em, data, model="dawid_skene", orientation="crowd", tol=1e-10)
    np.testing.assert_allclose(crowd.channel.fpr, fit.channel.fpr, atol=1e-12)


def test_reference_em_applies_the_same_crowd_rule(one_adversary):
    data, _, _ = one_adversary
    a = _quiet(fit_em, data, model="dawid_skene", orientation="crowd", tol=1e-10)
    b = _quiet(reference_fit_em, data, model="dawid_skene", orientation="crowd", tol=1e-10)
    assert b.details["orientation"] == "crowd" and b.selected_start == a.selected_start
    np.testing.assert_allclose(b.channel.fpr, a.channel.fpr, atol=1e-9)
    np.testing.assert_allclose(b.channel.tpr, a.channel.tpr, atol=1e-9)
    pd.testing.assert_frame_equal(b.annotators, a.annotators, atol=1e-8)


def test_vote_start_is_the_same_in_both_ems_and_both_paths(one_adversary):
    """starts="vote": the M-step at the vote fractions, written three times (reference NumPy on patterns,
    fit_em on patterns and on responses); all three runs end at the same estimate after the same iterations."""
    data, _, _ = one_adversary
    fits = [_quiet(reference_fit_em, data, model="dawid_skene", starts="vote", orientation="crowd", tol=1e-10)]
    fits += [_quiet(fit_em, data, model="dawid_skene", starts="vote", orientation="crowd", tol=1e-10, path=p)
             for p in ("patterns", "sparse")]
    assert len({f.n_iter for f in fits}) == 1
    for f in fits[1:]:
        np.testing.assert_allclose(f.loglik_trace, fits[0].loglik_trace, rtol=1e-12)
        np.testing.assert_allclose(f.channel.tpr, fits[0].channel.tpr, atol=1e-9)


def test_relabelling_the_data_gives_the_exchanged_fit(one_adversary):
    """A <-> 1 - A in every label (and so Y <-> 1 - Y): fpr -> 1 - tpr, tpr -> 1 - fpr, prevalence -> 1 - p."""
    data, _, _ = one_adversary
    fit = _quiet(fit_em, data, model="dawid_skene", orientation="crowd", tol=1e-11)
    swapped = AnnotationSet.from_wide(np.where(data.labels >= 0, 1 - data.labels, -1))
    other = _quiet(fit_em, swapped, model="dawid_skene", orientation="crowd", tol=1e-11)
    flipped = fit.channel.flipped()
    np.testing.assert_allclose(other.channel.fpr, flipped.fpr, atol=1e-7)
    np.testing.assert_allclose(other.channel.tpr, flipped.tpr, atol=1e-7)
    np.testing.assert_allclose(other.prevalence, 1 - fit.prevalence, atol=1e-7)
    assert other.loglik == pytest.approx(fit.loglik, rel=1e-10)


# ------------------------------------------------------------------ sparse path = pattern path, gold labels
@pytest.fixture(scope="module")
def small_sim():
    return simulate_annotations(1500, fpr=[0.1, 0.2, 0.15, 0.3], tpr=[0.85, 0.8, 0.7, 0.9], missing=0.3, seed=5)


@pytest.mark.parametrize("model", ["dawid_skene", "grouped"])
def test_sparse_path_equals_pattern_path(small_sim, model):
    kw = dict(model=model, groups=Binning.equal_mass(3), tol=1e-11, n_starts=4)
    a = _quiet(fit_em, small_sim.data, path="patterns", **kw)
    b = _quiet(fit_em, small_sim.data, path="sparse", **kw)
    assert (a.details["path"], b.details["path"]) == ("patterns", "sparse")
    for name in ("fpr", "tpr", "prevalence"):
        np.testing.assert_allclose(b.point[name], a.point[name], atol=1e-8)
    assert b.loglik == pytest.approx(a.loglik, abs=1e-8)
    np.testing.assert_allclose(b.start_logliks, a.start_logliks, atol=1e-7)
    if model == "dawid_skene":  # per-item outputs: core.sparse against the NumPyro model's own log density
        np.testing.assert_allclose(b.clean_label_probability(), a.clean_label_probability(), atol=1e-8)
        np.testing.assert_allclose(b.log_likelihood(), a.log_likelihood(), atol=1e-8)
    np.testing.assert_allclose(b.annotators[["fpr_lower", "gap_upper"]], a.annotators[["fpr_lower", "gap_upper"]],
                               atol=1e-8)


def test_gold_on_every_item_gives_the_complete_data_estimate(small_sim):
    """With every clean label known, the MLE is the empirical rate of each annotator on each class."""
    y = small_sim.clean_labels
    data = AnnotationSet(small_sim.data.labels, small_sim.data.scores, small_sim.data.item_ids,
                         small_sim.data.annotator_ids, gold=y)
    fit = _quiet(fit_em, data, model="dawid_skene", tol=1e-12)
    assert fit.details["path"] == "sparse" and "gold" in fit.details["path_reason"]
    lab, obs = data.labels, data.labels >= 0
    tpr = ((lab == 1) & (y[:, None] == 1)).sum(0) / (obs & (y[:, None] == 1)).sum(0)
    fpr = ((lab == 1) & (y[:, None] == 0)).sum(0) / (obs & (y[:, None] == 0)).sum(0)
    np.testing.assert_allclose(fit.channel.tpr, tpr, atol=1e-10)
    np.testing.assert_allclose(fit.channel.fpr, fpr, atol=1e-10)
    assert fit.prevalence[0] == pytest.approx(y.mean(), abs=1e-12)
    np.testing.assert_array_equal(fit.clean_label_probability(), y)
    with pytest.raises(ValueError, match="path='patterns' cannot use the 1500 gold labels"):
        fit_em(data, model="dawid_skene", path="patterns")
    with pytest.raises(ValueError, match="reference.fit_em .* cannot use gold labels"):
        reference_fit_em(data, model="dawid_skene")


def test_partial_gold_pins_those_items(small_sim):
    gold = np.full(small_sim.data.n_items, -1, np.int8)
    gold[:200] = small_sim.clean_labels[:200]
    data = AnnotationSet(small_sim.data.labels, small_sim.data.scores, small_sim.data.item_ids,
                         small_sim.data.annotator_ids, gold=gold)
    fit = _quiet(fit_em, data, model="dawid_skene")
    post = fit.clean_label_probability()
    np.testing.assert_array_equal(post[:200], gold[:200])
    assert np.all((post[200:] > 0) & (post[200:] < 1))


# ------------------------------------------------------------------ flags and intervals on simulated crowds
@pytest.fixture(scope="module")
def crowd_fits():
    """Three crowds of the same shape (one compiled program): 40 annotators, 6 labels per item."""
    sims = [simulate_crowd(1500, 40, labels_per_item=6, spammers=0.1, adversaries=0.05, seed=s) for s in range(3)]
    return sims, [_quiet(fit_em, s.data, model="dawid_skene", starts="vote") for s in sims]


def test_flags_find_spammers_and_adversaries(crowd_fits):
    sims, fits = crowd_fits
    n_spam_found = 0
    for sim, fit in zip(sims, fits):
        flag = fit.annotators["flag"].to_numpy()
        # Adversaries (|gap| >= 0.4, ~225 labels each: gap sd ~0.05) and honest annotators are never confused.
        assert np.all(flag[sim.kind == "adversary"] == "adversarial")
        assert np.all(flag[sim.kind == "honest"] == "ok")
        np.testing.assert_array_equal(fit.usable_annotators(), flag != "uninformative")
        n_spam_found += int(np.sum(flag[sim.kind == "spammer"] == "uninformative"))
    # 12 spammers; each is flagged when its 90% gap interval covers 0 (probability ~0.9, independent):
    # P(at most 7 of 12) = 0.0043 under Binomial(12, 0.9).
    assert n_spam_found >= 8


def test_annotator_intervals_cover_at_the_nominal_rate(crowd_fits):
    """90% intervals of fpr and tpr over 3 x 40 annotators: 240 intervals, ~independent across annotators.

    Binomial(240, 0.9): sd 4.6 intervals; a two-sided false-alarm rate of 1e-3 gives z = 3.29, so the count of
    covering intervals must lie in 216 +- 15.
    """
    sims, fits = crowd_fits
    covered = 0
    for sim, fit in zip(sims, fits):
        t = fit.annotators
        covered += int(np.sum((t.fpr_lower <= sim.fpr) & (sim.fpr <= t.fpr_upper)))
        covered += int(np.sum((t.tpr_lower <= sim.tpr) & (sim.tpr <= t.tpr_upper)))
    z = stats.norm.ppf(1 - 1e-3 / 2)
    assert abs(covered - 216) <= z * np.sqrt(240 * 0.9 * 0.1), covered


# ------------------------------------------------------------------ low noise (issue 16 item 6)
def test_low_noise_three_annotators_fit_and_bootstrap():
    """Near-perfect annotators and a confident classifier: group prevalences near 0 and 1."""
    sim = simulate_annotations(2000, fpr=[0.002, 0.002, 0.003], tpr=[0.99, 0.99, 0.985], score_beta=(0.1, 0.1),
                               seed=2)
    fit = _quiet(fit_em, sim.data, groups=Binning.equal_mass(10))
    assert fit.converged and fit.details["orientation"] == "every"
    assert fit.prevalence.min() < 0.01 and fit.prevalence.max() > 0.99
    boot = bootstrap_em(sim.data, fit, n_boot=40, seed=1)
    assert boot.details["n_failed"] == 0 and boot.draws["gap"].shape == (1, 40, 3)


def test_low_noise_crowd_fit_and_bootstrap():
    sim = simulate_crowd(400, 20, labels_per_item=5, fpr_range=(0.001, 0.005), tpr_range=(0.985, 0.995),
                         curve="calibrated", score_beta=(0.1, 0.1), seed=4)
    fit = _quiet(fit_em, sim.data, groups=Binning.equal_mass(5), starts="vote")
    assert fit.converged and fit.details["path"] == "sparse"
    boot = _quiet(bootstrap_em, sim.data, fit, n_boot=30, seed=1)
    assert boot.details["n_failed"] == 0
    # The sparse fit's data check names the items whose labels differ.
    lab = sim.data.labels.copy()
    j = int(np.flatnonzero(lab[7] >= 0)[0])
    lab[7, j] = 1 - lab[7, j]
    other = AnnotationSet(lab, sim.data.scores, sim.data.item_ids, sim.data.annotator_ids)
    with pytest.raises(ValueError, match=r"differ from the fitted ones at items \[7\]"):
        bootstrap_em(other, fit, n_boot=2)
    # No replicate flipped or collapsed: each rate rests on ~100 labels, so a gap below 0.5 (true ~0.99) would be
    # a broken replicate, not sampling error.
    assert np.all(boot.draws["gap"] > 0.5)


def test_annotator_intervals_one_sided_jeffreys_and_gap_clipped():
    """Counts of 0 or all: the one-sided Jeffreys limits (lower 0 at x = 0, upper 1 at x = n); the gap interval
    stays inside [-1, 1] (an annotator with tpr 1, fpr 0 and two labels has a normal half-width above 1)."""
    from scipy import special

    from noisycal_bayes.models.em_result import annotator_table

    # Annotator 0: 0 of 30 negatives labelled 1 (fpr x = 0), 40 of 40 positives labelled 1 (tpr x = n).
    # Annotator 1: 1 label on each class, fpr 0, tpr 1: gap 1 with a wide interval.
    # Annotator 2: an interior count, where the two-sided Beta quantiles apply unchanged.
    s0, n0 = np.array([0.0, 0.0, 3.0]), np.array([30.0, 1.0, 30.0])
    s1, n1 = np.array([40.0, 1.0, 20.0]), np.array([40.0, 1.0, 40.0])
    table = annotator_table(["a", "b", "c"], s0 / n0, s1 / n1, (s0, n0, s1, n1), n0 + n1, level=0.9)
    assert table["fpr_lower"].tolist()[:2] == [0.0, 0.0] and table["tpr_upper"].tolist()[:2] == [1.0, 1.0]
    # The other limits are the Jeffreys Beta(x + 1/2, n - x + 1/2) quantiles.
    assert table["fpr_upper"][0] == pytest.approx(special.betaincinv(0.5, 30.5, 0.95), rel=1e-12)
    assert table["tpr_lower"][0] == pytest.approx(special.betaincinv(40.5, 0.5, 0.05), rel=1e-12)
    assert table["fpr_lower"][2] == pytest.approx(special.betaincinv(3.5, 27.5, 0.05), rel=1e-12)
    assert table["tpr_upper"][2] == pytest.approx(special.betaincinv(20.5, 20.5, 0.95), rel=1e-12)
    assert (table["gap_lower"] >= -1).all() and (table["gap_upper"] <= 1).all()
    assert table["gap_upper"][1] == 1.0 and table["gap_lower"][1] < 1.0


def test_conditional_intervals_with_known_labels_are_the_jeffreys_posterior():
    """With every cavity probability 0 or 1 (the clean labels known, e.g. gold), an annotator's conditional
    posterior is the product of Jeffreys posteriors Beta(x + 1/2, n - x + 1/2) of fpr and tpr. The grid's
    quantiles must match the Beta quantiles to well within one grid cell (64 cells in arcsin(sqrt p): at most
    pi / 128 = 0.025 wide in p), and the gap's those of tpr - fpr under independent Betas (Monte Carlo, 400,000
    draws: se of a 5% / 95% quantile below 1e-3). Negative control: the same labels with uninformative cavities
    (q = 1/2, the clean labels unknown) give wider intervals."""
    from noisycal_bayes.models.em_result import CavityPairs, annotator_table, conditional_intervals

    rng = np.random.default_rng(7)
    # Annotator 0: 3 of 12 negatives labelled 1, 9 of 10 positives; annotator 1: 0 of 4 negatives, 2 of 3 positives.
    y = [np.r_[np.zeros(12), np.ones(10)], np.r_[np.zeros(4), np.ones(3)]]
    a = [np.r_[np.ones(3), np.zeros(9), np.ones(9), 0], np.r_[np.zeros(4), 1, 1, 0]]
    ann = np.concatenate([np.full(len(v), j) for j, v in enumerate(y)])
    lab, q = np.concatenate(a), np.concatenate(y)
    pairs = CavityPairs(ann, lab, 1 - lab, q, np.ones_like(q))
    got = conditional_intervals(pairs, np.array([True, True]), 0.9)
    for j, (x0, n0, x1, n1) in enumerate([(3, 12, 9, 10), (0, 4, 2, 3)]):
        f, t = stats.beta(x0 + 0.5, n0 - x0 + 0.5), stats.beta(x1 + 0.5, n1 - x1 + 0.5)
        np.testing.assert_allclose([got["fpr_lower"][j], got["fpr_upper"][j]], f.ppf([0.05, 0.95]), atol=0.004)
        np.testing.assert_allclose([got["tpr_lower"][j], got["tpr_upper"][j]], t.ppf([0.05, 0.95]), atol=0.004)
        gap = t.rvs(400_000, random_state=rng) - f.rvs(400_000, random_state=rng)
        np.testing.assert_allclose([got["gap_lower"][j], got["gap_upper"][j]], np.quantile(gap, [0.05, 0.95]),
                                   atol=0.025)
    # The one-sided convention, as in the Beta route: annotator 1 gave no label 1 on a negative item (x = 0), so its
    # fpr's lower limit is 0; annotator 0 did (x = 3), so its is not. (q is exactly 0 or 1 here: log q = -inf must
    # not turn the rule's sum into NaN.)
    assert got["fpr_lower"][1] == 0.0 and got["fpr_lower"][0] > 0.0
    assert got["tpr_upper"][0] < 1.0 and got["tpr_lower"][1] > 0.0
    vague = conditional_intervals(pairs._replace(q=np.full_like(q, 0.5)), np.array([True, True]), 0.9)
    assert np.all(vague["tpr_upper"] - vague["tpr_lower"] > got["tpr_upper"] - got["tpr_lower"])
    # Through annotator_table: annotators under GRID_LABELS labels take these limits, the flag follows the gap's.
    n = np.array([22.0, 7.0])
    counts = (np.array([3.0, 0.0]), np.array([12.0, 4.0]), np.array([9.0, 2.0]), np.array([10.0, 3.0]))
    table = annotator_table(["a", "b"], counts[0] / counts[1], counts[2] / counts[3], (*counts, 0 * n, 0 * n, pairs), n)
    np.testing.assert_array_equal(table["fpr_upper"], got["fpr_upper"])
    assert table.attrs["conditional"].tolist() == [True, True]


@pytest.mark.parametrize("case", ["co_labelled", "one_label_per_item", "two_annotators"])
def test_sparse_design_check_equals_dense_check(case):
    """check_design reads the sparse responses (no dense observed mask) and gives the dense mask's messages."""
    from noisycal_bayes.data.design import check_design, design_problems

    if case == "co_labelled":
        item, ann = [0, 0, 1, 2], [0, 1, 2, 0]
    elif case == "one_label_per_item":
        item, ann = [0, 1, 2, 3], [0, 1, 2, 0]
    else:
        item, ann = [0, 0, 1, 1], [0, 1, 0, 1]
    data = AnnotationSet.from_responses(np.array(item), np.array(ann), np.array([1, 0, 1, 0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sparse = check_design(data, "dawid_skene", n_groups=1, func="fit_em")
    dense = [f"fit_em: {m}" for m in design_problems(data.observed, "dawid_skene", 1)]
    assert sparse == dense
    assert bool(dense) == (case != "co_labelled")
