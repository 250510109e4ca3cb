"""IBCC (models/ibcc.py): its log density against an independent NumPy/SciPy implementation, with repeated (item,
annotator) labels and gold items, for both population modes; and fit_nuts_multiclass(model="ibcc") on small crowds
(gold, repeats, K = 2 against the binary pooled model and the pooled EM)."""
import warnings

import jax
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy.stats import dirichlet, norm

import noisycal_bayes as nb
from noisycal_bayes.core import x64
from noisycal_bayes.inference._em_loop import padded_class_responses
from noisycal_bayes.models import MulticlassPrior
from noisycal_bayes.models.ibcc import CONCENTRATION_SCALE, concentration_loc, ibcc_multiclass
from noisycal_bayes.models.inputs import class_arrays
from noisycal_bayes.models.log_ratio import log_ratio_point, log_ratio_scaling
from tests.inference.test_population import _crowd


def _ibcc_log_joint(item, ann, lab, gold, conf, prev, alpha, beta):
    """``log p(A, C, pi)`` on the simplex, item by item (a Python loop over items; gold items: ``log P(Y = g, A_i)``)."""
    K = prev.size
    out = sum(dirichlet.logpdf(conf[j, y], alpha[y]) for j in range(conf.shape[0]) for y in range(K))
    out += dirichlet.logpdf(prev, np.full(K, beta))
    for i in range(gold.size):  # every item: a gold item without labels still has log pi_gold
        r = item == i
        lp = np.log(prev) + np.array([np.log(conf[ann[r], y, lab[r]]).sum() for y in range(K)])
        out += lp[gold[i]] if gold[i] >= 0 else np.logaddexp.reduce(lp)
    return out


def _jacobian(log_c, log_p, scaling):
    """``log |d(simplex) / du|``: ``sum log C`` per row (log-ratio to simplex, one row) plus ``sum log scale``."""
    return log_c.sum() + np.log(scaling.conf_scale).sum() + log_p.sum() + np.log(scaling.prev_scale).sum()


@pytest.fixture(scope="module")
def crowd():
    data, y, m = _crowd(3, 12, 40, 3, 8, seed=5, gold_frac=0.3, repeat=0.5)
    x = class_arrays(data, "test")
    assert np.unique(x.item * 12 + x.annotator).size < x.item.size  # repeated (item, annotator) labels present
    assert (x.gold >= 0).any()
    return x


@pytest.mark.parametrize("learn", [False, True])
def test_log_density_matches_an_independent_implementation(crowd, learn):
    x = crowd
    J, K = x.n_annotators, x.n_classes
    rng = np.random.default_rng(0)
    alpha = 0.3 + rng.random((K, K)) + 3 * np.eye(K)
    prior = MulticlassPrior(diagonal=3.0, off_diagonal=1.5, prevalence=1.7)
    scaling = log_ratio_scaling(rng.random((J, K, K)) * 3, rng.random((1, K)) * 10, prior, confusion_alpha=alpha)
    item, code, padded, _, grp, gold, w = padded_class_responses(x, np.zeros(x.n_items, np.int32))
    args = (item, code, padded, grp, gold, w, scaling, alpha, prior.params())
    values = []
    for seed in (1, 2):
        r = np.random.default_rng(seed)
        z = {"confusion_u": r.normal(size=(J, K, K - 1)), "prevalence_u": r.normal(size=(1, K - 1))}
        a = alpha
        extra = 0.0
        if learn:
            z.update(population_u=r.normal(size=(K, K - 1)), log_concentration=r.normal(2.0, 0.5, size=K))
            log_m = np.zeros((K, K))
            for y in range(K):
                row = np.insert(z["population_u"][y], y, 0.0)
                log_m[y] = row - np.logaddexp.reduce(row)
            m = np.exp(log_m)
            a = np.exp(z["log_concentration"])[:, None] * m
            hyper = prior.off_diagonal + (prior.diagonal - prior.off_diagonal) * np.eye(K)
            extra = sum(dirichlet.logpdf(m[y], hyper[y]) + log_m[y].sum() for y in range(K))
            extra += norm.logpdf(z["log_concentration"], concentration_loc(K), CONCENTRATION_SCALE).sum()
        with x64():
            got, _ = log_density(lambda *q: ibcc_multiclass(*q, n_annotators=J, n_classes=K, learn_population=learn),
                                 args, {}, jax.tree.map(np.asarray, z))
        log_c, log_p = log_ratio_point(scaling, z["confusion_u"], z["prevalence_u"])
        want = (_ibcc_log_joint(x.item, x.annotator, x.label, x.gold, np.exp(log_c), np.exp(log_p[0]), a, 1.7)
                + _jacobian(log_c, log_p, scaling) + extra)
        values.append((float(got), want))
    # The model's constants (the Dirichlet normalisers) are included: equal, not only equal up to a constant.
    np.testing.assert_allclose([v[0] for v in values], [v[1] for v in values], rtol=1e-10, atol=1e-8)
