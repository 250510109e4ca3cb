"""Coverage of bootstrap_em's replicates: the 90% percentile interval of a channel gap covers the true gap.

R independent data sets with known channels; on each, fit_em (grouped, 5 groups) and bootstrap_em, and the
interval ``[q_0.05, q_0.95]`` of annotator 0's replicate gaps. A correct interval gives a count of covering
data sets X ~ Binomial(R, 0.9). We fail when X < binom.ppf(ALPHA, R, 0.9) (too narrow) or
X > binom.isf(ALPHA, R, 0.9) (too wide): a false-alarm rate of at most 2 ALPHA = 2e-3 for a correct interval.
For R = 100: accepted counts 80..98.

Negative control, which must fail: replicates with item weights Dirichlet(4, ..., 4) instead of
Dirichlet(1, ..., 1). Their variance is 1/4 of the Bayesian bootstrap's, so the replicate spread is halved
and the nominal 90% interval covers about 2 Phi(1.645 / 2) - 1 = 0.59 of the time; the test checks that
its count falls below the same lower bound (and states the chance that it would not).

The full-route coverage (NC-ECE through posterior_nc_ece, per setting) is in docs/coverage.md
(benchmarks/coverage_study.py, column "EM route (CLI default)").
"""
import numpy as np
import pytest
from scipy import stats

from noisycal_bayes import simulate_annotations
from noisycal_bayes.inference import fit_em
from noisycal_bayes.inference.bootstrap import _bootstrap, bootstrap_em
from noisycal_bayes.data import Binning

# A coverage study (15 s CPU cold, with its negative control): make test-all runs it.
pytestmark = [pytest.mark.statistical, pytest.mark.slow]

LEVEL = 0.9
ALPHA = 1e-3
R = 100
N_BOOT = 100
#: Items per data set: at 1,000 the replicate sd of a gap is ~8% below the sampling sd of the EM estimate
#: (coverage ~0.85, a finite-sample shortfall of the bootstrap); at 3,000 it is within a few percent.
N_ITEMS = 3000
FPR, TPR = [0.10, 0.20, 0.15], [0.85, 0.80, 0.90]


def concentrated_weights(seed, n_boot, n_items, shape=4.0):
    """Dirichlet(shape, ..., shape) item weights scaled to sum to n (the negative control)."""
    rng = np.random.default_rng(seed)
    for _ in range(n_boot):
        e = rng.standard_gamma(shape, n_items)
        yield e * (n_items / e.sum())


def covers(draws, truth):
    lo, hi = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return bool(lo <= truth <= hi)


@pytest.fixture(scope="module")
def counts():
    truth = TPR[0] - FPR[0]
    good = narrow = 0
    for s in range(R):
        sim = simulate_annotations(N_ITEMS, fpr=FPR, tpr=TPR, curve="overconfident", seed=5000 + s)
        fit = fit_em(sim.data, groups=Binning.equal_mass(5), n_starts=3, seed=s)
        boot = bootstrap_em(sim.data, fit, n_boot=N_BOOT, seed=s)
        good += covers(boot.draws["gap"][0, :, 0], truth)
        control = _bootstrap(fit, concentrated_weights(s, N_BOOT, sim.data.n_items), N_BOOT, settings={})
        narrow += covers(control.draws["gap"][0, :, 0], truth)
    return good, narrow


def test_gap_interval_covers_at_the_nominal_rate(counts):
    good, narrow = counts
    print(f"coverage counts: bootstrap_em {good} / {R}, negative control {narrow} / {R}")
    lo, hi = int(stats.binom.ppf(ALPHA, R, LEVEL)), int(stats.binom.isf(ALPHA, R, LEVEL))
    assert lo <= good <= hi, f"{good} of {R} intervals covered the true gap; accepted {lo}..{hi}"


def test_negative_control_too_narrow_replicates_fail(counts):
    _, narrow = counts
    lo = int(stats.binom.ppf(ALPHA, R, LEVEL))
    # Power: with true coverage 2 Phi(1.645 / 2) - 1 = 0.59, P(X >= lo = 80) = 7e-6, so the control fails except
    # by a 1-in-100,000 chance (at a coverage of 0.70 that chance would be 0.016).
    p_control = 2 * stats.norm.cdf(stats.norm.ppf(0.95) / 2) - 1
    assert stats.binom.sf(lo - 1, R, p_control) < 1e-4
    assert narrow < lo, f"the negative control covered {narrow} of {R} (threshold {lo}): the test has no power"
