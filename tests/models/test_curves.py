"""Tests for noisycal_bayes/models/curves.py: histogram, monotone and Platt calibration-curve models.

Each NumPyro log density is checked against an independent computation: the dense likelihood of
``noisycal_bayes.core.ds_loglik_rows`` (or the grouped model it must equal) plus log priors from
``scipy.stats``.
"""
import jax.numpy as jnp
import numpy as np
from numpyro.handlers import seed, substitute, trace
from scipy import stats

from noisycal_bayes.core import clipped_logit, ds_loglik_rows, x64
from noisycal_bayes.models import (Prior, grouped_dawid_skene, histogram_dawid_skene, monotone_dawid_skene,
                                   platt_dawid_skene)

from ._jit import jit_log_density, jit_trace_values

FPR = np.array([0.1, 0.25, 0.05])
U = np.array([0.8, 0.5, 0.7])
TPR = FPR + (1 - FPR) * U
PRIOR = Prior(fpr=(1.5, 4.0), u=(2.0, 1.2), prevalence=(1.3, 1.7), increments=1.7, slope=(0.8, 1.5),
              intercept=(0.2, 2.5))


def _data(n=300, seed=0, missing=0.3):
    rng = np.random.default_rng(seed)
    z = rng.beta(1, 1, n)
    y = rng.random(n) < z
    labels = (rng.random((n, 3)) < np.where(y[:, None], TPR, FPR)).astype(np.int8)
    drop = rng.random((n, 3)) < missing
    drop[np.arange(n), rng.integers(0, 3, n)] = False
    labels[drop] = -1
    return labels, z


def _lp(model, *args, params, **kw):
    with x64():
        return jit_log_density(model, args, kw, params)


def _channel_prior(prior):
    return stats.beta(*prior.fpr).logpdf(FPR).sum() + stats.beta(*prior.u).logpdf(U).sum()


def test_histogram_is_the_grouped_model():
    labels, z = _data()
    group = np.minimum((z * 4).astype(np.int32), 3)
    params = {"fpr": FPR, "u": U, "prevalence": np.array([0.1, 0.4, 0.6, 0.9])}
    kw = dict(n_annotators=3, n_groups=4, prior=PRIOR)
    np.testing.assert_allclose(_lp(histogram_dawid_skene, labels, group, None, params=params, **kw),
                               _lp(grouped_dawid_skene, labels, group, None, params=params, **kw), rtol=1e-14)


def test_monotone_log_density_is_likelihood_plus_dirichlet_prior():
    labels, z = _data(seed=1)
    group = np.minimum((z * 4).astype(np.int32), 3)
    inc = np.array([0.1, 0.2, 0.15, 0.35, 0.2])
    prev = np.cumsum(inc)[:-1]
    lp = _lp(monotone_dawid_skene, labels, group, None, params={"fpr": FPR, "u": U, "increments": inc},
             n_annotators=3, n_groups=4, prior=PRIOR)
    with x64():
        lik = float(jnp.sum(ds_loglik_rows(labels, group, FPR, TPR, prev)))
    expected = lik + _channel_prior(PRIOR) + stats.dirichlet(np.full(5, PRIOR.increments)).logpdf(inc)
    np.testing.assert_allclose(lp, expected, rtol=1e-12)


def test_monotone_prevalences_are_ordered_in_prior_draws():
    # Eager, and 3 annotators like the Platt prior draws below: the Beta draws of (fpr, u) then reuse one compiled
    # Gamma sampler (its compilation, ~3 s CPU, dominates these tests).
    tr = trace(seed(monotone_dawid_skene, 3)).get_trace(None, np.arange(6, dtype=np.int32), n_annotators=3,
                                                        n_groups=6, prior=Prior())
    prev = np.asarray(tr["prevalence"]["value"])
    assert prev.shape == (6,) and np.all(np.diff(prev) > 0) and 0 < prev[0] and prev[-1] < 1


def _flat(labels):
    ii, jj = np.nonzero(labels >= 0)
    return ii.astype(np.int32), jj.astype(np.int32), labels[ii, jj].astype(np.int32)


def test_platt_log_density_on_flat_responses_equals_dense_likelihood():
    labels, z = _data(n=250, seed=2)
    item, ann, lab = _flat(labels)
    s = np.asarray(clipped_logit(z), dtype=np.float64)
    slope, intercept = 0.7, -0.3
    lp = _lp(platt_dawid_skene, item, ann, lab, s,
             params={"fpr": FPR, "u": U, "slope": slope, "intercept": intercept},
             n_items=250, n_annotators=3, prior=PRIOR)
    m = 1 / (1 + np.exp(-(slope * s + intercept)))
    with x64():
        lik = float(jnp.sum(ds_loglik_rows(labels, None, FPR, TPR, m)))
    expected = (lik + _channel_prior(PRIOR) + stats.norm(*PRIOR.slope).logpdf(slope)
                + stats.norm(*PRIOR.intercept).logpdf(intercept))
    np.testing.assert_allclose(lp, expected, rtol=1e-12)


def test_platt_per_item_loglik_matches_dense_rows():
    labels, z = _data(n=40, seed=4)
    item, ann, lab = _flat(labels)
    s = np.asarray(clipped_logit(z), dtype=np.float64)
    with x64():
        params = {"fpr": jnp.asarray(FPR), "u": jnp.asarray(U), "slope": jnp.asarray(1.3), "intercept": jnp.asarray(0.4)}
        tr = jit_trace_values(lambda: trace(substitute(platt_dawid_skene, data=params)).get_trace(
            item, ann, lab, s, n_items=40, n_annotators=3, record_loglik=True))
        dense = np.asarray(ds_loglik_rows(labels, None, FPR, TPR, 1 / (1 + np.exp(-(1.3 * s + 0.4)))))
    np.testing.assert_allclose(tr["log_likelihood"], dense, rtol=1e-12)


def test_platt_prior_predictive_shapes_and_orientation():
    labels, z = _data(n=30, seed=5)
    item, ann, _ = _flat(labels)
    # Eager on purpose (see test_monotone_prevalences_are_ordered_in_prior_draws).
    tr = trace(seed(platt_dawid_skene, 0)).get_trace(item, ann, None, np.asarray(clipped_logit(z)), n_items=30,
                                                     n_annotators=3)
    assert np.asarray(tr["y"]["value"]).shape == (30,)
    assert np.asarray(tr["labels"]["value"]).shape == item.shape
    assert (np.asarray(tr["gap"]["value"]) > 0).all()
