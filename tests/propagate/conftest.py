"""Fixtures shared by the NC-ECE tests: one simulated data set, its histogram EM fit and posterior-like draws
around it (``_fakes``), built once per test module."""
import numpy as np
import pytest

from noisycal_bayes import simulate_annotations

from ._fakes import FPR, TPR, channel_draws, fake_nuts, histogram_fit


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(800, fpr=FPR, tpr=TPR, curve="overconfident", missing=0.2, seed=3)


@pytest.fixture(scope="module")
def em(sim):
    return histogram_fit(sim.data)


@pytest.fixture(scope="module")
def post(em):
    rng = np.random.default_rng(0)
    f, t = channel_draws(rng, FPR, TPR, 2, 30)
    prev = np.clip(em.point["prevalence"] + 0.03 * rng.standard_normal((2, 30, em.groups.n_groups)), 0.01, 0.99)
    return fake_nuts(em, {"fpr": f, "tpr": t, "prevalence": prev})
