"""NC-ECE with the TRUE channels is unbiased for the clean binned residual moments (paper §3, Appendix C.1).

Claim: with known channels, fixed bins and fixed weights, ``E[Ytilde_i | Y_i, Z_i] = Y_i``, so each bin's
corrected mean residual ``mean_{B_k}(Ytilde - Z)`` is unbiased for the clean one ``mean_{B_k}(Y - Z)``
(and for the conditional one ``mean_{B_k}(m(Z) - Z)``). IV weights depend on the sample only through
``mu`` (one scalar), which adds an O(1/n) bias far below the test's resolution (se about 0.006 here).
We simulate R independent data sets and test, bin by bin, that the mean paired difference is 0 within
``t * se`` with ``se`` the replicate sd / sqrt(R).

False-alarm rate: 1e-3 for the whole file's unbiasedness assertions, split (Bonferroni) over
2 weight rules x 10 bins x 2 targets = 40 two-sided tests -> 1e-3 / 40 each, so
``t = t_{R-1}^{-1}(1 - 1e-3 / 80)`` (about 4.3 at R = 200).
A negative control (the uncorrected labels, i.e. the identity channel) must FAIL the same test.
"""
import numpy as np
import pytest
from scipy import stats

from noisycal_bayes import Channel, nc_ece, simulate_annotations
from noisycal_bayes.reference.variants import nc_ece_cross_fit

pytestmark = pytest.mark.statistical

R = 200
N_ITEMS = 1500
N_BINS = 10
FPR = [0.1, 0.25, 0.05]
TPR = [0.85, 0.7, 0.65]
FAMILY_ALPHA = 1e-3
N_TESTS = 2 * N_BINS * 2
T_CRIT = stats.t.ppf(1 - FAMILY_ALPHA / (2 * N_TESTS), df=R - 1)


def _bin_means(x, b):
    return np.bincount(b, weights=x, minlength=N_BINS) / np.bincount(b, minlength=N_BINS)


@pytest.fixture(scope="module")
def replicates():
    """Per replicate and bin: corrected residual (3 weight rules + identity), clean and conditional residuals."""
    rules = {"iv": "iv", "fixed": np.array([0.2, 0.3, 0.5])}
    out = {k: np.empty((R, N_BINS)) for k in [*rules, "identity", "clean", "conditional"]}
    for r in range(R):
        # Over-confident model (m(z) = sigmoid(logit(z) / 2)); 30% of responses missing (per-item renormalisation).
        sim = simulate_annotations(N_ITEMS, fpr=FPR, tpr=TPR, curve="overconfident", missing=0.3, seed=10_000 + r)
        z = sim.data.scores
        b = np.minimum((z * N_BINS).astype(int), N_BINS - 1)
        assert np.bincount(b, minlength=N_BINS).min() > 0
        for name, w in rules.items():
            out[name][r] = nc_ece(sim.data, sim.channel, bins=N_BINS, weights=w).table["residual"].to_numpy()
        out["identity"][r] = nc_ece(sim.data, Channel.identity(3), bins=N_BINS,
                                    weights="equal").table["residual"].to_numpy()
        out["clean"][r] = _bin_means(sim.clean_labels - z, b)
        out["conditional"][r] = _bin_means(sim.true_probability - z, b)
    return out


def _t_stats(diff):
    return diff.mean(axis=0) / (diff.std(axis=0, ddof=1) / np.sqrt(diff.shape[0]))


@pytest.mark.parametrize("rule", ["iv", "fixed"])
@pytest.mark.parametrize("target", ["clean", "conditional"])
def test_corrected_bin_residuals_are_unbiased(replicates, rule, target):
    t = _t_stats(replicates[rule] - replicates[target])
    assert np.all(np.abs(t) < T_CRIT), f"bins {np.flatnonzero(np.abs(t) >= T_CRIT)}: t = {np.round(t, 2)}"


def test_uncorrected_labels_fail_the_same_test(replicates):
    # Negative control: the vote fraction estimates mean(fpr) + mean(gap) m(z), not m(z); the test must see it.
    t = _t_stats(replicates["identity"] - replicates["clean"])
    assert np.sum(np.abs(t) >= T_CRIT) >= N_BINS - 1


def test_cross_fit_with_the_true_channel_is_the_full_sample_estimate():
    # Cross-fitting with a fixed (true) channel and fixed weights must equal the plain NC-ECE: the per-fold
    # sums on one partition add up to the full sample's (so it inherits the unbiasedness above).
    sim = simulate_annotations(N_ITEMS, fpr=FPR, tpr=TPR, curve="overconfident", missing=0.3, seed=1)
    w = np.array([0.2, 0.3, 0.5])
    cf = nc_ece_cross_fit(sim.data, estimator=lambda d: sim.channel, n_folds=5, weights=w)
    np.testing.assert_allclose(cf.table["residual"], nc_ece(sim.data, sim.channel, weights=w).table["residual"],
                               rtol=1e-10)
