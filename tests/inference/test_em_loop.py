"""The one EM loop (noisycal_bayes/inference/_em_loop.py) on K-class data: SQUAREM cycles stop at the plain loop's
fixed point, "auto" keeps fits that plain EM settles within PLAIN_STEPS, and bad settings are refused."""
import warnings

import numpy as np
import pytest

from noisycal_bayes.inference import fit_em_multiclass
from noisycal_bayes.inference import em as mc
from noisycal_bayes.simulate import simulate_multiclass


@pytest.fixture(scope="module")
def crowd():
    return simulate_multiclass(600, 8, 3, labels_per_item=3, accuracy=0.75, seed=3)


def _fit(data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_em_multiclass(data, model="dawid_skene", n_starts=1, path="sparse", tol=1e-10, **kw)


def test_squarem_reaches_the_plain_fixed_point(crowd):
    # Both loops stop by one rule on one EM map; they differ by the plain loop's distance to the fixed point,
    # tol r / (1 - r) for an EM rate r < 1: far below 1e-6 at tol = 1e-10.
    plain, fast = _fit(crowd, accelerate=False), _fit(crowd, accelerate=True)
    assert plain.converged and fast.converged
    assert fast.n_iter < plain.n_iter
    np.testing.assert_allclose(fast.confusion, plain.confusion, atol=1e-6)
    assert fast.log_likelihood >= plain.log_likelihood - 1e-8
    # The objective never decreases from cycle to cycle (the monotone safeguard).
    assert np.all(np.diff(fast.loglik_trace) >= -1e-9)


def test_auto_keeps_the_plain_fit_below_plain_steps(crowd):
    plain, auto = _fit(crowd, accelerate=False), _fit(crowd)
    if plain.n_iter <= mc.PLAIN_STEPS:  # settled by plain EM within the plain steps: the same iterate sequence
        np.testing.assert_array_equal(auto.confusion, plain.confusion)
        assert auto.n_iter == plain.n_iter


def test_accelerate_needs_the_sparse_path(crowd):
    with pytest.raises(ValueError, match="needs the sparse path"):
        fit_em_multiclass(crowd, model="dawid_skene", path="patterns", accelerate=True)
    with pytest.raises(ValueError, match="must be 'auto', True or False"):
        fit_em_multiclass(crowd, model="dawid_skene", accelerate="fast")
