"""IBCC (models/ibcc.py): its log density against an independent NumPy/SciPy implementation, with repeated (item,
annotator) labels and gold items, for both population modes; and fit_nuts_multiclass(model="ibcc") on small crowds
(gold, repeats, K = 2 against the binary pooled model and the pooled EM)."""
import warnings

import jax
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy.stats import dirichlet, gamma, norm

import noisycal_bayes as nb
from noisycal_bayes.core import x64
from noisycal_bayes.inference._em_loop import padded_class_responses
from noisycal_bayes.models import MulticlassPrior
from noisycal_bayes.models.ibcc import CONCENTRATION_SCALE, concentration_loc, gamma_scaling, ibcc_multiclass
from noisycal_bayes.models.inputs import class_arrays
from tests.inference.test_population import _crowd


def _ibcc_log_joint(item, ann, lab, gold, conf, prev, alpha, beta):
    """``log p(A, C, pi)`` on the simplex (``alpha`` None: ``log p(A | C, pi)``), item by item (a Python loop over
    items; gold items: ``log P(Y = g, A_i)``)."""
    K = prev.size
    out = 0.0
    if alpha is not None:
        out += sum(dirichlet.logpdf(conf[j, y], alpha[y]) for j in range(conf.shape[0]) for y in range(K))
        out += dirichlet.logpdf(prev, np.full(K, beta))
    for i in range(gold.size):  # every item: a gold item without labels still has log pi_gold
        r = item == i
        lp = np.log(prev) + np.array([np.log(conf[ann[r], y, lab[r]]).sum() for y in range(K)])
        out += lp[gold[i]] if gold[i] >= 0 else np.logaddexp.reduce(lp)
    return out


def _rows(u, loc, scale, total, alpha):
    """Normalised-Gamma rows, written out: ``(p, log density of u)`` with density ``Dirichlet(p | alpha) Gamma(T |
    a_0 + total)`` times the Jacobian ``prod_k G_k scale_k / T^(K-1)`` of ``u -> (p_1..p_{K-1}, T)``."""
    g = np.exp(loc + scale * u)
    t = g.sum(axis=-1)
    p = g / t[..., None]
    alpha = np.broadcast_to(alpha, p.shape)
    K = p.shape[-1]
    out = 0.0
    for idx in np.ndindex(p.shape[:-1]):
        out += dirichlet.logpdf(p[idx], alpha[idx]) + gamma.logpdf(t[idx], alpha[idx].sum() + total[idx])
        out += np.log(g[idx] * scale[idx]).sum() - (K - 1) * np.log(t[idx])
    return p, out


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
    scaling = gamma_scaling(rng.random((J, K, K)) * 3, rng.random((1, K)) * 10, alpha, np.full(K, 1.7))
    item, code, padded, _, grp, gold, w = padded_class_responses(x, np.zeros(x.n_items, np.int32))
    args = (item, code, padded, grp, gold, w, scaling, alpha, prior.params())
    values = []
    for seed in (1, 2):
        r = np.random.default_rng(seed)
        z = {"confusion_u": r.normal(size=(J, K, K)), "prevalence_u": r.normal(size=(1, K))}
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
            # Population mean in log-odds against the diagonal: Dirichlet density times its Jacobian prod_k m_k.
            extra = sum(dirichlet.logpdf(m[y], hyper[y]) + log_m[y].sum() for y in range(K))
            extra += norm.logpdf(z["log_concentration"], concentration_loc(K), CONCENTRATION_SCALE).sum()
        with x64():
            got, _ = log_density(lambda *q: ibcc_multiclass(*q, n_annotators=J, n_classes=K, learn_population=learn),
                                 args, {}, jax.tree.map(np.asarray, z))
        conf, d_conf = _rows(z["confusion_u"], scaling.conf_loc, scaling.conf_scale, scaling.conf_total, a)
        prev, d_prev = _rows(z["prevalence_u"], scaling.prev_loc, scaling.prev_scale, scaling.prev_total, 1.7)
        # The Dirichlet densities are in d_conf / d_prev: the joint's prior terms are dropped (alpha -> flat).
        like = _ibcc_log_joint(x.item, x.annotator, x.label, x.gold, conf, prev[0], None, None)
        values.append((float(got), like + d_conf + d_prev + extra))
    # The model's constants (the Dirichlet normalisers) are included: equal, not only equal up to a constant.
    np.testing.assert_allclose([v[0] for v in values], [v[1] for v in values], rtol=1e-10, atol=1e-8)
