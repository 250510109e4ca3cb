"""False-alarm rate and power of the predictive model checks (noisycal_bayes/diagnostics/checks.py).

1. False alarms. On R = 100 well-specified simulations (2 to 4 annotators, missing responses, imbalanced
   classes, 2 to 4 score groups, 300 to 600 items) the summary check ``posterior_predictive`` (Pearson X^2,
   bootstrap with EM refits, B = 19 replicates) should warn with probability alpha = 0.05: with B = 19 it warns
   when the observed X^2 exceeds every replicate, which has probability 1 / (B + 1) = 0.05 when the observed
   and replicated statistics are exchangeable (asymptotically, for the parametric bootstrap). The number of
   warnings is then Binomial(100, 0.05) (mean 5); we accept it when it is at most the 1 - 1e-3 quantile
   (false-failure rate 1e-3). That bounds the rate from above only (P(0 warnings) = 0.006, so no lower bound
   is testable at 1e-3 with 100 data sets); the lower side is tested through the whole p-value distribution: the p
   is uniform on {1/20, ..., 20/20}, mean 0.525, sd sqrt((20^2 - 1) / 12) / 20 = 0.2884, so the mean of 100
   p-values is within z * 0.2884 / sqrt(100) of 0.525 with z = 3.29 (two-sided 1e-3). The agreement checks
   are held to the same one-sided bound.
2. Power. One annotator's false-positive rate rises with the score, fpr = 0.02 + 0.3 z (the issue's
   alternative), n = 20,000, 10 equal-mass groups: the summary check must warn in every one of 5 simulations
   (at least 90% of them). Measured power there is 1 (X^2 of several hundred on ~50 df), so a miss is
   far rarer than the 1e-3 we accept elsewhere.
"""
import numpy as np
import pytest
from scipy import stats

from noisycal_bayes import AnnotationSet, Binning, fit_em
from noisycal_bayes.diagnostics import model_checks
from noisycal_bayes.simulate import simulate_annotations

pytestmark = pytest.mark.statistical

N_SETS, B, ALPHA = 100, 19, 0.05
FALSE_FAILURE = 1e-3

# (fpr, tpr, missing, score_beta, n_groups, n_items): 2 to 4 annotators, missing responses, imbalanced classes.
SETTINGS = [
    ([0.1, 0.2, 0.15], [0.85, 0.8, 0.9], 0.0, (1.0, 1.0), 3, 400),
    ([0.1, 0.2, 0.15, 0.05], [0.85, 0.8, 0.9, 0.75], 0.3, (1.0, 1.0), 2, 500),
    ([0.05, 0.15, 0.1], [0.8, 0.9, 0.85], 0.1, (1.0, 4.0), 3, 600),   # prevalence about 0.2
    ([0.1, 0.2], [0.9, 0.8], 0.0, (1.0, 1.0), 4, 300),                # 2 annotators: 4 x 3 cells - 8 params
]


@pytest.fixture(scope="module")
def null_results():
    out = []
    for r in range(N_SETS):
        fpr, tpr, missing, beta, groups, n = SETTINGS[r % len(SETTINGS)]
        sim = simulate_annotations(n, fpr=fpr, tpr=tpr, missing=missing, score_beta=beta, seed=1000 + r)
        fit = fit_em(sim.data, groups=Binning.equal_mass(groups), n_starts=3, seed=r)
        out.append(model_checks(sim.data, fit, n_replicates=B, seed=r))
    return out


def test_false_alarm_rate(null_results):
    assert all(c.status != "not_testable" for c in null_results)
    limit = stats.binom.ppf(1 - FALSE_FAILURE, N_SETS, ALPHA)
    table = {name: [c.table.set_index("name").loc[name] for c in null_results
                    if name in set(c.table["name"])]
             for name in ("posterior_predictive", "pairwise_agreement", "pairwise_agreement_by_group",
                          "annotator_agreement")}
    for name, rows in table.items():
        warned = sum(r["status"] == "warn" for r in rows)
        assert warned <= stats.binom.ppf(1 - FALSE_FAILURE, len(rows), ALPHA), (name, warned, limit)
    p = np.array([r["p_value"] for r in table["posterior_predictive"]])
    sd = np.sqrt((20 ** 2 - 1) / 12) / 20
    z = stats.norm.ppf(1 - FALSE_FAILURE / 2)
    assert abs(p.mean() - 0.525) < z * sd / np.sqrt(p.size), p.mean()


def score_dependent(n, seed):
    """Three annotators; annotator 0's false-positive rate is 0.02 + 0.3 z (score-dependent noise)."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(size=n)
    y = rng.random(n) < z  # calibrated scores
    fpr = np.stack([0.02 + 0.3 * z, np.full(n, 0.08), np.full(n, 0.05)], 1)
    tpr = np.array([0.9, 0.85, 0.92])
    labels = (rng.random((n, 3)) < np.where(y[:, None], tpr, fpr)).astype(np.int8)
    return AnnotationSet.from_wide(labels, z)


def test_power_against_score_dependent_noise():
    warned = []
    for s in range(5):
        data = score_dependent(20_000, seed=s)
        fit = fit_em(data, groups=Binning.equal_mass(10), n_starts=3, seed=s)
        checks = model_checks(data, fit, n_replicates=B, seed=s)
        warned.append(checks.table.set_index("name").loc["posterior_predictive", "status"] == "warn")
    assert np.mean(warned) >= 0.9, warned
