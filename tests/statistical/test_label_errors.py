"""Statistical tests of label-error ranking, corrected accuracy, and SMECE on soft labels (seeds/002, 003).

Each test simulates data with known clean labels (``simulate_annotations``; fixed seeds) and compares an
estimate with the truth using a tolerance derived from a standard error. False-alarm rates are stated per
test; each test also contains a negative control that the same assertion must reject, so that the
assertion is shown to have power.
"""
import warnings

import numpy as np
import pytest
from scipy import stats

from noisycal_bayes import AnnotationSet, Channel, ece, nc_ece, simulate_annotations, smece
from noisycal_bayes.inference import fit_em
from noisycal_bayes.labels import corrected_accuracy, label_issues
from noisycal_bayes.reference.confident_learning import confident_learning
from noisycal_bayes.simulate import CURVES
from noisycal_bayes.data import Binning

pytestmark = pytest.mark.statistical

FPR, TPR = np.array([0.1, 0.15, 0.2]), np.array([0.85, 0.8, 0.9])


def _paired_z(hit, a, b):
    """z statistic of precision(a) - precision(b) for two top-k sets of equal size (McNemar-type).

    Only items in one set but not the other differ: ``d = (hits in a\\b - hits in b\\a) / k`` with
    variance ``(n_ab p_ab (1 - p_ab) + n_ba p_ba (1 - p_ba)) / k^2`` (binomial within each part).
    """
    k = a.sum()
    ab, ba = a & ~b, b & ~a
    p_ab = hit[ab].mean() if ab.any() else 0.0
    p_ba = hit[ba].mean() if ba.any() else 0.0
    d = (hit[ab].sum() - hit[ba].sum()) / k
    se = np.sqrt(ab.sum() * p_ab * (1 - p_ab) + ba.sum() * p_ba * (1 - p_ba)) / k
    return d / se if se > 0 else np.inf * np.sign(d)


@pytest.fixture(scope="module")
def rankings():
    """Four data sets (3,000 items, 3 annotators): who is flagged in the top k = number of wrong majorities."""
    hit, ours, cl, disagree, random, p_top, p_all, n_all, cl_top = [], [], [], [], [], [], [], [], []
    rng = np.random.default_rng(7)
    for seed in range(4):
        sim = simulate_annotations(3000, fpr=FPR, tpr=TPR, score_beta=(0.5, 0.5), seed=100 + seed)
        d = sim.data
        maj = d.majority_vote()
        wrong = maj != sim.clean_labels
        k = int(wrong.sum())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            iss = label_issues(d)
        top = np.zeros(3000, bool)
        top[iss["item"].to_numpy()[:k].astype(int)] = True
        top_cl = np.zeros(3000, bool)
        res_cl = confident_learning(maj, d.scores)
        top_cl[res_cl.ranking[:k]] = True
        cl_top.append(1 - res_cl.label_quality[top_cl])
        # Majority disagreement: split votes first, in random order (a fair tie-break).
        vf = d.vote_fraction()
        order = np.lexsort((rng.random(3000), -np.minimum(vf, 1 - vf)))
        top_dis = np.zeros(3000, bool)
        top_dis[order[:k]] = True
        top_rand = np.zeros(3000, bool)
        top_rand[rng.permutation(3000)[:k]] = True
        hit.append(wrong), ours.append(top), cl.append(top_cl), disagree.append(top_dis), random.append(top_rand)
        p_top.append(iss["p_majority_wrong"].to_numpy()[:k])
        p_all.append(iss["p_majority_wrong"].to_numpy())
        n_all.append(wrong[iss["item"].to_numpy().astype(int)])
    cat = np.concatenate
    return dict(hit=cat(hit), ours=cat(ours), cl=cat(cl), disagree=cat(disagree), random=cat(random),
                p_top=cat(p_top), p_all=cat(p_all), hit_sorted=cat(n_all), cl_top=cat(cl_top))


def test_posterior_ranking_beats_majority_disagreement_and_confident_learning(rankings):
    # Pooled over 4 data sets (about 700 flagged items). One-sided tests at false-alarm 1e-3 each,
    # Bonferroni over the 2 claims: z = Phi^{-1}(1 - 5e-4) = 3.29.
    z = stats.norm.ppf(1 - 1e-3 / 2)
    r = rankings
    assert _paired_z(r["hit"], r["ours"], r["disagree"]) > z
    assert _paired_z(r["hit"], r["ours"], r["cl"]) > z
    # Negative control: a random ranking must not pass the same test against majority disagreement.
    assert not _paired_z(r["hit"], r["random"], r["disagree"]) > z


def test_p_majority_wrong_is_calibrated(rankings):
    # Under the model, wrong-majority indicators are independent Bernoulli(p_i) given the data, so the
    # count of errors among flagged items has mean sum p and variance sum p (1 - p). The plug-in (EM)
    # estimate ignores parameter uncertainty, which the 2-sided z = 3.29 (false alarm 1e-3) absorbs.
    z = stats.norm.ppf(1 - 1e-3 / 2)
    r = rankings
    p = r["p_top"]
    realised = r["hit"][r["ours"]].sum()
    assert abs(realised - p.sum()) < z * np.sqrt(np.sum(p * (1 - p)))
    q = r["p_all"]
    assert abs(r["hit_sorted"].sum() - q.sum()) < z * np.sqrt(np.sum(q * (1 - q)))
    # Negative control: confident learning's score 1 - normalised margin, read as a probability, fails the
    # same test (it ranks, but it is not a probability of error).
    c = r["cl_top"]
    realised_cl = r["hit"][r["cl"]].sum()
    assert abs(realised_cl - c.sum()) > z * np.sqrt(np.sum(c * (1 - c)))


@pytest.fixture(scope="module")
def accuracy_runs():
    """R data sets; per set the true sample accuracy at threshold 0.3, three estimates, and two intervals.

    Columns: truth, accuracy, lower, upper, majority accuracy, biased accuracy (2 groups), corrected-label
    accuracy, and the negative control's lower / upper: the same EM fit with its channels and prevalences held
    at the point estimate in every replicate (no refits: only the latent labels vary).
    """
    import noisycal_bayes.labels._replicates as replicates

    rows = []
    for seed in range(40):
        sim = simulate_annotations(1500, fpr=FPR, tpr=TPR, score_beta=(0.6, 0.6), curve="overconfident",
                                   seed=200 + seed)
        d = sim.data
        truth = np.mean((d.scores >= 0.3) == sim.clean_labels)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = corrected_accuracy(d, threshold=0.3, n_replicates=200, bootstrap=False, seed=seed)
            coarse = fit_em(d, model="grouped", groups=Binning.equal_mass(2), n_starts=3)
            biased = corrected_accuracy(d, coarse, threshold=0.3, n_replicates=20, bootstrap=False, seed=seed)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(replicates, "parameter_source", lambda fit: "point")
                fixed = corrected_accuracy(d, threshold=0.3, n_replicates=200, bootstrap=False, seed=seed)
        assert res.parameter_uncertainty == replicates.SOURCES["refit"]
        assert fixed.parameter_uncertainty == replicates.SOURCES["point"]
        rows.append((truth, res.accuracy, res.lower, res.upper, res.majority_accuracy, biased.accuracy,
                     res.corrected_label_accuracy, fixed.lower, fixed.upper))
    return np.array(rows)


@pytest.mark.slow  # 15 s CPU cold (a study over simulated data sets); make test-all runs it
def test_corrected_accuracy_is_unbiased_and_its_interval_covers(accuracy_runs):
    truth, est, lo, hi, maj, biased, moment, fixed_lo, fixed_hi = accuracy_runs.T
    r = truth.size
    # Unbiased: mean(estimate - truth) within t * se over R = 40 sets; two-sided false alarm 1e-3 for each
    # of the 4 mean assertions below (Bonferroni 2.5e-4 -> t_{39}).
    t = stats.t.ppf(1 - 1e-3 / 8, r - 1)
    for x in (est, moment):
        d = x - truth
        assert abs(d.mean()) < t * d.std(ddof=1) / np.sqrt(r)
    # Negative controls that the same test must reject: accuracy against the majority vote, and the
    # posterior under 2 score groups whose wide lower group contains the threshold (not a function of
    # the groups: biased, the case corrected_accuracy warns about).
    for x in (maj, biased):
        d = x - truth
        assert abs(d.mean()) > t * d.std(ddof=1) / np.sqrt(r)
    # Coverage of the 90% interval of the sample accuracy (EM fit + weighted-likelihood bootstrap): a correct
    # interval covers X ~ Binomial(40, 0.9) times. Reject X <= c with c = binom.ppf(1e-3, 40, 0.9) = 29, i.e.
    # accept only X >= 30: false alarm P(X <= 29) = 1.5e-3 (P(X <= 28) = 3.8e-4). The earlier criterion
    # `X >= ppf` accepted 29, the very count of its own negative control, which therefore passed.
    c = stats.binom.ppf(1e-3, r, 0.9)
    assert c == 29 and stats.binom.cdf(c, r, 0.9) < 1.5e-3
    covered = int(np.sum((lo <= truth) & (truth <= hi)))
    assert covered > c
    # Negative control, computed here on the same data sets: the EM interval without the refits (channels
    # and prevalences fixed at the estimate) ignores the parameter uncertainty and must fail the criterion
    # (seeds 200-239: the refit interval covers 33 of 40, the fixed-parameter control 29, at the boundary).
    fixed_covered = int(np.sum((fixed_lo <= truth) & (truth <= fixed_hi)))
    assert not fixed_covered > c, fixed_covered


@pytest.fixture(scope="module")
def soft():
    """Scores z ~ U(0, 1), clean probability m(z) over-confident (seeds/002 setting with soft labels)."""
    rng = np.random.default_rng(0)
    n = 20000
    z = rng.beta(1, 1, n)
    m = CURVES["overconfident"](z)
    y = (rng.random(n) < m).astype(int)
    edges = np.arange(11) / 10
    k = np.searchsorted(edges[1:-1], z, side="right")
    genuine = rng.beta(5 * m, 5 * (1 - m))          # a calibrated soft label: E[q | z] = m(z)
    labels = (rng.random((n, 3)) < np.where(y[:, None] == 1, TPR, FPR)).astype(int)
    votes = labels.mean(axis=1)                      # E[q | z] = mean(fpr) + mean(gap) m(z)
    return dict(z=z, m=m, y=y, k=k, genuine=genuine, votes=votes, labels=labels, n=n)


def _binned(x, k):
    """sum_b (n_b / n) |mean_b x| and its delta-method se sqrt(sum_b (n_b/n)^2 var_b / n_b)."""
    n = x.size
    val, var = 0.0, 0.0
    for b in np.unique(k):
        xb = x[k == b]
        val += xb.size / n * abs(xb.mean())
        var += (xb.size / n) ** 2 * xb.var(ddof=1) / xb.size
    return val, np.sqrt(var)


def test_smece_is_right_for_genuine_probabilities_and_biased_for_vote_fractions(soft):
    s = soft
    z, m, k = s["z"], s["m"], s["k"]
    # Target: conditional binned ECE sum_b (n_b/n) |mean_b (m(z) - z)| on these scores (DESIGN §2).
    target, _ = _binned(m - z, k)
    # Every bin's mean residual is > 5 se away from 0 here, so |.| is locally linear and the delta-method
    # se applies. Two-sided false alarm 1e-3 over the 4 assertions: z = Phi^{-1}(1 - 1.25e-4).
    zq = stats.norm.ppf(1 - 1e-3 / 8)
    # (1) Genuine probability labels: SMECE estimates the target; its noise is the label noise q - m(z).
    _, se_q = _binned(s["genuine"] - m, k)
    assert abs(smece(z, s["genuine"], bins=10) - target) < zq * se_q
    # (2) Vote fractions of noisy annotators converge to sum_b |mean_b (a + delta m(z) - z)| instead.
    limit_q = FPR.mean() + (TPR - FPR).mean() * m
    limit, _ = _binned(limit_q - z, k)
    _, se_v = _binned(s["votes"] - limit_q, k)
    sm_votes = smece(z, s["votes"], bins=10)
    assert abs(sm_votes - limit) < zq * se_v
    # ... which is far from the target (the same test as (1) rejects it: the bias is ~0.04, se ~0.002).
    assert abs(sm_votes - target) > zq * se_v
    # (3) The fix: NC-ECE with the true channel on the same votes estimates the target. Its se comes from
    # the corrected residuals' within-bin spread.
    data = AnnotationSet.from_wide(s["labels"], z)
    gap = TPR - FPR
    corrected = ((s["labels"] - FPR) / gap)
    nc = nc_ece(data, Channel(FPR, TPR), bins=10, weights="equal").value
    _, se_nc = _binned(corrected.mean(axis=1) - m, k)
    assert abs(nc - target) < zq * se_nc
    # SMECE reduces to ECE on 0/1 labels (seeds/002) - an identity, not a statistical claim.
    assert smece(z, s["y"].astype(float), bins=10) == pytest.approx(ece(z, s["y"], bins=10), abs=1e-12)


def test_vote_fraction_smece_makes_a_calibrated_model_look_miscalibrated(soft):
    # A calibrated model (m(z) = z): target 0; vote-fraction SMECE converges to
    # sum_b (n_b/n) |mean_b (a + delta z - z)| = |0.15 - 0.3 z| averaged per bin (about 0.075 here).
    rng = np.random.default_rng(1)
    z, k, n = soft["z"], soft["k"], soft["n"]
    y = (rng.random(n) < z).astype(int)
    labels = (rng.random((n, 3)) < np.where(y[:, None] == 1, TPR, FPR)).astype(int)
    votes = labels.mean(axis=1)
    limit_q = FPR.mean() + (TPR - FPR).mean() * z
    limit, _ = _binned(limit_q - z, k)
    _, se_v = _binned(votes - limit_q, k)
    zq = stats.norm.ppf(1 - 1e-3 / 4)          # two assertions, two-sided, total false alarm 1e-3
    sm = smece(z, votes, bins=10)
    assert abs(sm - limit) < zq * se_v
    assert sm > zq * se_v and limit > 0.05      # far from the target 0
