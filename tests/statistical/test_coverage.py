"""Coverage of posterior_nc_ece's intervals for their stated targets: small-repetition versions of
``benchmarks/coverage_study.py`` (full table in docs/coverage.md).

Each check simulates R independent data sets with known truth and counts how often the reported 90%
interval contains the target its method states (propagate.TARGETS). A correct interval gives a count
X ~ Binomial(R, 0.9) (or a larger success probability for conservative constructions), so we fail only
when X < binom.ppf(ALPHA, R, 0.9): a one-sided false-alarm rate of ALPHA = 1e-3 per assertion.
Negative controls (intervals that ignore a source of uncertainty, or a two-sided interval at the boundary)
must FAIL the same criterion.

Targets: the population binned ECE ``sum_k |int_{B_k} (m(z) - z) dz|`` (Z ~ U(0, 1), equal-width bins)
by quadrature; the sample oracle ECE from the simulated clean labels; the conditional binned ECE from the
simulated ``m(Z_i)``.
"""
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from noisycal_bayes import Binning, simulate_annotations
from noisycal_bayes.propagate import posterior_nc_ece
from noisycal_bayes.simulate import CURVES

pytestmark = pytest.mark.statistical

LEVEL = 0.9
ALPHA = 1e-3
FPR, TPR = [0.10, 0.20, 0.15], [0.85, 0.80, 0.90]


def lowest_acceptable(r: int, p: float = LEVEL) -> int:
    """Smallest count of covering intervals not rejected at one-sided level ALPHA."""
    return int(stats.binom.ppf(ALPHA, r, p))


def population_ece(curve: str, n_bins: int) -> float:
    m = CURVES[curve]
    return sum(abs(integrate.quad(lambda z: float(m(np.array([z]))[0]) - z, k / n_bins, (k + 1) / n_bins)[0])
               for k in range(n_bins))


def binned(values, scores, n_bins):
    idx = Binning.equal_width(n_bins).assign(scores)
    return np.abs(np.bincount(idx, weights=values, minlength=n_bins)).sum() / scores.size


def test_plugin_with_known_channels_covers_the_population_ece():
    # Channels known exactly: the interval carries the evaluation-sample uncertainty (Bayesian bootstrap).
    r, truth = 60, population_ece("overconfident", 10)
    covered = naive = 0
    for s in range(r):
        sim = simulate_annotations(1000, fpr=FPR, tpr=TPR, curve="overconfident", seed=100 + s)
        res = posterior_nc_ece(sim.data, sim.channel, method="plugin", n_draws=200, seed=s)
        lo, hi = res.reported_interval
        covered += lo <= truth <= hi
        # Negative control: channel-only uncertainty (no bootstrap) with known channels is a point.
        none = posterior_nc_ece(sim.data, sim.channel, method="plugin", bootstrap=False, n_draws=2)
        naive += none.lower <= truth <= none.upper
    assert covered >= lowest_acceptable(r)
    assert naive < lowest_acceptable(r)


def test_calibrated_model_reported_interval_covers_zero_and_the_two_sided_one_cannot():
    # Population binned ECE of a calibrated model is 0, on the boundary. The reported interval is one-sided
    # whenever the data cannot tell the model from a calibrated one, which under calibration happens with
    # probability about LEVEL (the p-value is about uniform), so it covers 0 about LEVEL of the time.
    r = 60
    covered = two_sided = one_sided_reads = 0
    for s in range(r):
        sim = simulate_annotations(1000, fpr=FPR, tpr=TPR, curve="calibrated", seed=300 + s)
        res = posterior_nc_ece(sim.data, sim.channel, method="plugin", n_draws=200, seed=s)
        lo, hi = res.reported_interval
        covered += lo <= 0.0 <= hi
        two_sided += res.lower <= 0.0 <= res.upper
        one_sided_reads += res.interval_to_read == "upper_one_sided"
    assert covered >= lowest_acceptable(r)
    # Negative control: the two-sided interval of a sum of |.| essentially never reaches 0.
    assert two_sided < lowest_acceptable(r)
    # Share of one-sided readings: Binomial(r, ~LEVEL); two-sided check at ALPHA (split in two tails).
    lo_q, hi_q = stats.binom.ppf([ALPHA / 2, 1 - ALPHA / 2], r, LEVEL)
    assert lo_q <= one_sided_reads <= hi_q


@pytest.mark.slow  # 16 s CPU cold; the plug-in and reported intervals' coverage tests above stay in the default run; make test-all runs it
def test_nuts_routes_cover_their_targets_and_channel_uncertainty_alone_does_not():
    """R short NUTS fits of the histogram model on the evaluation bins, propagated three ways.

    One test (not a fixture shared by several) so that a parallel run compiles the sampler only once.
    """
    from noisycal_bayes.inference.nuts import fit_nuts

    r, n_bins = 30, 5
    pop = population_ece("overconfident", n_bins)
    covered = {"plugin": 0, "model": 0, "latent": 0, "plugin_channels_only": 0}
    for s in range(r):
        sim = simulate_annotations(1000, fpr=FPR, tpr=TPR, curve="overconfident", seed=500 + s)
        z = sim.data.scores
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # short chains: R-hat / ESS warnings are expected
            fit = fit_nuts(sim.data, model="histogram", groups=Binning.equal_width(n_bins), n_chains=1,
                           n_warmup=150, n_draws=150, seed=s, progress_bar=False)
            truths = {"plugin": pop, "model": binned(sim.true_probability - z, z, n_bins),
                      "latent": binned(sim.clean_labels - z, z, n_bins)}
            for method, truth in truths.items():
                res = posterior_nc_ece(sim.data, fit, method=method, bins=n_bins, seed=s)
                lo, hi = res.reported_interval
                covered[method] += lo <= truth <= hi
            # Negative control: the posterior plug-in without the Bayesian bootstrap (channel uncertainty only).
            res = posterior_nc_ece(sim.data, fit, method="plugin", bins=n_bins, bootstrap=False)
            covered["plugin_channels_only"] += res.lower <= pop <= res.upper
    for method in ("plugin", "model", "latent"):
        assert covered[method] >= lowest_acceptable(r), (method, covered)
    assert covered["plugin_channels_only"] < lowest_acceptable(r), covered
