"""Corrected-loss recalibration recovers the oracle map; naive fits to votes do not (paper §5).

Simulation design: scores Z ~ U(0, 1), three annotators with known channels, the TRUE channels used to
correct the labels. R independent data sets per curve; every claim is an assertion about the mean of
R estimates, with tolerance ``t * sd / sqrt(R)``.

False-alarm rate: 1e-3 for the file, Bonferroni over the 7 two-sided tests below (temperature: calibrated,
overconfident, vote fraction, majority vote; Platt alpha and beta; histogram comparison), so
``t = t_{R-1}^{-1}(1 - 1e-3 / 14)`` (about 4.8 at R = 20).

Oracle values come from the curves themselves: ``m(z) = z`` is in the temperature family at T = 1,
``sigmoid(logit(z) / 2)`` at T = 2, ``sigmoid(0.6 logit(z) + 0.4)`` is Platt (0.6, 0.4); the population
log-loss minimiser is then exactly that parameter. The naive fits' population limits are computed
independently by quadrature: a vote fraction has ``E[q | z] = mean(fpr) + mean(gap) m(z)``, a majority of
three ``E[v | z] = m(z) P(>= 2 of 3 | Y = 1) + (1 - m(z)) P(>= 2 of 3 | Y = 0)``. The estimators'
finite-sample (Jensen) bias, e.g. of ``T = 1/theta``, is O(1/n) (about 0.01 at T = 2, n = 3000), below
the tolerances.
"""
import itertools

import numpy as np
import pytest
from scipy import optimize, stats

from noisycal_bayes import simulate_annotations
from noisycal_bayes.recalibration import PlattScaling, ProjectedHistogram, TemperatureScaling
from noisycal_bayes.reference.recalibration import fit_temperature

pytestmark = pytest.mark.statistical

R = 20
N_ITEMS = 3000
FPR = np.array([0.1, 0.2, 0.15])
TPR = np.array([0.85, 0.8, 0.9])
T_CRIT = stats.t.ppf(1 - 1e-3 / 14, df=R - 1)


def _sigmoid(s):
    return 1 / (1 + np.exp(-s))


def _logit(z):
    z = np.clip(z, 1e-6, 1 - 1e-6)
    return np.log(z) - np.log1p(-z)


def _platt_curve(z):
    return _sigmoid(0.6 * _logit(z) + 0.4)


def _check_mean(values, truth, what):
    v = np.asarray(values)
    se = v.std(ddof=1) / np.sqrt(v.size)
    assert abs(v.mean() - truth) < T_CRIT * se, f"{what}: mean {v.mean():.4f} vs {truth:.4f} (se {se:.4f})"
    return v.mean(), se


def _population_temperature(expected_label):
    """Population minimiser of E[softplus(s/T) - E[y|z] s/T] over Z ~ U(0,1), by midpoint quadrature."""
    z = (np.arange(200_000) + 0.5) / 200_000
    s = _logit(z)
    q = expected_label(z)
    theta = optimize.brentq(lambda t: np.mean((_sigmoid(t * s) - q) * s), 0.01, 10, xtol=1e-12)
    return 1 / theta


def _majority_rate(y):
    """P(at least 2 of the 3 annotators say 1 | Y = y)."""
    p = TPR if y == 1 else FPR
    return sum(np.prod([p[j] if a else 1 - p[j] for j, a in enumerate(bits)])
               for bits in itertools.product([0, 1], repeat=3) if sum(bits) >= 2)


@pytest.fixture(scope="module")
def calibrated_fits():
    out = {"corrected": [], "vote_fraction": [], "majority_vote": []}
    for r in range(R):
        sim = simulate_annotations(N_ITEMS, fpr=FPR, tpr=TPR, curve="calibrated", seed=20_000 + r)
        z = sim.data.scores
        out["corrected"].append(TemperatureScaling().fit(z, sim.data, channel=sim.channel).temperature_)
        out["vote_fraction"].append(TemperatureScaling().fit(z, sim.data.vote_fraction()).temperature_)
        out["majority_vote"].append(TemperatureScaling().fit(z, sim.data.majority_vote()).temperature_)
    return {k: np.array(v) for k, v in out.items()}


def test_calibrated_model_gets_temperature_one_when_corrected(calibrated_fits):
    _check_mean(calibrated_fits["corrected"], 1.0, "corrected T, calibrated model")


def test_naive_fits_to_votes_converge_to_the_wrong_temperature(calibrated_fits):
    t_vote = _population_temperature(lambda z: FPR.mean() + (TPR - FPR).mean() * z)
    t_major = _population_temperature(lambda z: z * _majority_rate(1) + (1 - z) * _majority_rate(0))
    # The naive limits are far from the oracle T = 1 (vote fractions are flatter than m(z)) ...
    assert t_vote > 1.5 and t_major > 1.15
    # ... and the naive estimates sit at those limits, many standard errors away from 1.
    _check_mean(calibrated_fits["vote_fraction"], t_vote, "T fitted to vote fractions")
    _check_mean(calibrated_fits["majority_vote"], t_major, "T fitted to majority vote")
    for kind in ("vote_fraction", "majority_vote"):
        v = calibrated_fits[kind]
        assert (v.mean() - 1) / (v.std(ddof=1) / np.sqrt(R)) > T_CRIT


def test_overconfident_model_gets_the_oracle_temperature_two():
    temps = []
    for r in range(R):
        sim = simulate_annotations(N_ITEMS, fpr=FPR, tpr=TPR, curve="overconfident", seed=21_000 + r)
        temps.append(TemperatureScaling().fit(sim.data.scores, sim.data, channel=sim.channel).temperature_)
    _check_mean(temps, 2.0, "corrected T, overconfident model")


def test_platt_recovers_a_known_logistic_curve():
    alphas, betas = [], []
    for r in range(R):
        sim = simulate_annotations(N_ITEMS, fpr=FPR, tpr=TPR, curve=_platt_curve, seed=22_000 + r)
        ps = PlattScaling().fit(sim.data.scores, sim.data, channel=sim.channel)
        alphas.append(ps.alpha_)
        betas.append(ps.beta_)
    _check_mean(alphas, 0.6, "Platt alpha")
    _check_mean(betas, 0.4, "Platt beta")


def test_corrected_histogram_beats_the_naive_histogram_on_the_truth():
    # True calibration error of the recalibrated scores, E|m(Z) - h(Z)| over the sample (m known here).
    diff = []
    for r in range(R):
        sim = simulate_annotations(N_ITEMS, fpr=FPR, tpr=TPR, curve="overconfident", seed=23_000 + r)
        z, m = sim.data.scores, sim.true_probability
        corrected = ProjectedHistogram(bins=10).fit(z, sim.data, channel=sim.channel).predict(z)
        naive = ProjectedHistogram(bins=10).fit(z, sim.data.vote_fraction()).predict(z)
        diff.append(np.mean(np.abs(m - naive)) - np.mean(np.abs(m - corrected)))
    d = np.array(diff)
    assert d.mean() / (d.std(ddof=1) / np.sqrt(R)) > T_CRIT


def test_population_temperature_helper_recovers_known_oracles():
    # Check of the quadrature route used above: it must return the oracle for in-family curves.
    assert _population_temperature(lambda z: z) == pytest.approx(1.0, abs=1e-4)
    assert _population_temperature(lambda z: _sigmoid(_logit(z) / 2)) == pytest.approx(2.0, abs=1e-4)
    # And the sample route agrees with the population one on a huge noiseless sample.
    z = (np.arange(100_000) + 0.5) / 100_000
    assert fit_temperature(z, _sigmoid(_logit(z) / 2)).temperature == pytest.approx(2.0, abs=1e-4)
