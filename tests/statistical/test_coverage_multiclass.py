"""Coverage of the centred debiased interval of the K-class class-wise NC-ECE (propagate/multiclass.py).

The class-wise mean over K = 10 classes sums 150 bin terms. The simulated debiased draws sit above the debiased
estimate by the sum over bins of ``E debias_abs(|m_b + noise|) - m_b`` (positive wherever ``m_b`` is small against
its sd), an offset that grows with the number of bins faster than the draws' spread; the estimate itself is close
to unbiased (benchmarks/coverage_multiclass.py: bias +0.0000 +- 0.0003, sd 0.0023, at K = 10 and 3 annotators).
The interval is therefore centred on the estimate (``_centred``).

Design (isolates the interval definition): the confusion matrices are known (the true ones, passed as a point
estimate), so the only uncertainty is the evaluation sample's (the items' Bayesian bootstrap) and the target is
the population binned class-wise ECE of the simulator (``population_target`` of the study, from 500,000 fresh
outputs: Monte Carlo error ~2e-4, a tenth of the intervals' half-width). K = 10, 3 annotators, 2,000 items,
over-confident classifier, 200 bootstrap draws, 40 data sets.

Test (slow), two parts, both must pass:
- covered ~ Binomial(40, 0.9) under correct coverage; accept >= 31 (P(X <= 30) = 0.016);
- centre: ``z_r = (target - mean of the interval's draws) / sd of the draws`` is about N(0, 1) when the draws
  describe the estimator's sampling distribution; accept ``|mean z| < 3 / sqrt(40) = 0.47`` (false alarm 0.003).
Negative control (must FAIL): the uncentred interval (``_centred`` replaced by the identity, the binary route's
definition) on the same data sets. Its draws sit ~0.8 sd above the estimate (offset 0.0019, sd 0.0023), so its
mean z is about -0.8 (P(|mean z| < 0.47) ~ 0.02) and its coverage about 0.79.
"""
import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest

import noisycal_bayes.propagate.multiclass as pm

pytestmark = pytest.mark.statistical

N_SETS, K, J, N_ITEMS, N_DRAWS = 40, 10, 3, 2000, 200
MIN_COVERED = 31


def _study():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "coverage_multiclass.py"
    spec = importlib.util.spec_from_file_location("coverage_multiclass", path)
    cm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cm)
    return cm


def _passes():
    """Both criteria of the module docstring on the N_SETS data sets."""
    cm = _study()
    target = cm.population_target(K, "overconfident", size=500_000)[1]
    hits, z = [], []
    for r in range(N_SETS):
        rng = np.random.default_rng(4242 + r)
        p, y, labels, conf = cm.simulate(rng, N_ITEMS, K, J, "overconfident")
        resp = (np.repeat(np.arange(N_ITEMS), J), np.tile(np.arange(J), N_ITEMS), labels.reshape(-1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = pm.posterior_classwise_nc_ece(p, resp, conf, n_draws=N_DRAWS, seed=r)
        lo, hi = res.reported_interval
        hits.append(lo <= target <= hi)
        z.append((target - res.debiased_draws.mean()) / res.debiased_draws.std())
    covered, mean_z = int(np.sum(hits)), float(np.mean(z))
    return covered >= MIN_COVERED and abs(mean_z) < 3 / np.sqrt(N_SETS), (covered, mean_z)


@pytest.mark.slow
def test_classwise_mean_interval_covers_at_k10():
    ok, detail = _passes()
    assert ok, detail


@pytest.mark.slow
def test_negative_control_uncentred_interval_misses(monkeypatch):
    monkeypatch.setattr(pm, "_centred", lambda debiased, estimate, interval: debiased)
    ok, detail = _passes()
    assert not ok, detail
