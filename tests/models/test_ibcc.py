"""IBCC (models/ibcc.py): its log density against an independent NumPy/SciPy implementation, with repeated (item,
annotator) labels and gold items, for both population modes; and fit_nuts_multiclass(model="ibcc") on small crowds
(gold, repeats, K = 2 against the binary pooled model and the pooled EM)."""
import warnings

import jax
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy.special import gammaincinv, gammaln, ndtr
from scipy.stats import dirichlet, gamma, norm

import noisycal_bayes as nb
from noisycal_bayes.core import x64
from noisycal_bayes.inference._em_loop import padded_class_responses
from noisycal_bayes.models import MulticlassPrior
from noisycal_bayes.models.ibcc import (CONCENTRATION_SCALE, GammaQuantiles, concentration_loc, gamma_quantile_point,
                                        gamma_quantile_table, ibcc_multiclass)
from noisycal_bayes.models.inputs import class_arrays
from noisycal_bayes.models.log_ratio import log_ratio_prevalence, log_ratio_scaling
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


def _jacobian(t, quantiles, alpha, log_p, scaling):
    """``log |d(simplex, S) / dt|`` plus the auxiliary row sums' density, computed from the change of variables
    (not from the model's formula): ``G = exp(x)``, ``x = h(t)`` per cell; ``(C, S)`` with ``G = S C`` has Jacobian
    ``S^(K-1)`` per row; ``S ~ Gamma(A + N)``. Prevalence: ``sum log pi + sum log scale`` (log-ratio to simplex)."""
    x, log_dx = gamma_quantile_point(t, quantiles.log_g, quantiles.slope)
    K = x.shape[-1]
    S = np.exp(x).sum(axis=-1)
    a_row = np.broadcast_to(alpha, x.shape).sum(axis=-1)
    aux = gamma.logpdf(S, a_row + quantiles.row_counts).sum()
    return aux + (x.sum() + log_dx.sum() - (K - 1) * np.log(S).sum()) + log_p.sum() + np.log(scaling.prev_scale).sum()


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
    counts = rng.random((J, K, K)) * 3
    scaling = log_ratio_scaling(counts, rng.random((1, K)) * 10, prior, confusion_alpha=alpha)
    quantiles = GammaQuantiles(*gamma_quantile_table(counts + alpha), counts.sum(axis=-1))
    item, code, padded, by_code, grp, gold, w = padded_class_responses(x, np.zeros(x.n_items, np.int32))
    args = (item, code, padded, grp, gold, w, scaling, alpha, quantiles, by_code, prior.params())
    values = []
    for seed in (1, 2):
        r = np.random.default_rng(seed)
        # Some coordinates beyond the knots (the linear extension).
        z = {"confusion_t": r.normal(size=(J, K, K)) * 3, "prevalence_u": r.normal(size=(1, K - 1))}
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
        xc, _ = gamma_quantile_point(z["confusion_t"], quantiles.log_g, quantiles.slope)
        conf = np.exp(xc) / np.exp(xc).sum(axis=-1, keepdims=True)
        log_p = log_ratio_prevalence(scaling, z["prevalence_u"])
        want = (_ibcc_log_joint(x.item, x.annotator, x.label, x.gold, conf, np.exp(log_p[0]), a, 1.7)
                + _jacobian(z["confusion_t"], quantiles, a, log_p, scaling) + extra)
        values.append((float(got), want))
    # The model's constants (the Dirichlet normalisers) are included: equal, not only equal up to a constant.
    np.testing.assert_allclose([v[0] for v in values], [v[1] for v in values], rtol=1e-10, atol=1e-8)


@pytest.mark.parametrize("b", [1e-6, 1e-4, 0.04, 0.3, 1.0, 7.0, 300.0, 2e4])
def test_gamma_quantile_coordinates_are_the_gamma_quantile_map(b):
    """The interpolant against SciPy's exact quantile map ``log F_b^{-1}(Phi(t))`` between the knots, its derivative
    against finite differences, and the density it induces on ``t`` against the standard normal's: the coordinates in
    which a conjugate row posterior ``Gamma(b)`` is ``N(0, 1)`` (models/ibcc.py)."""
    log_g, slope = gamma_quantile_table(np.array([b]))
    t = np.linspace(-6.9, 6.9, 553)
    x, log_dx = gamma_quantile_point(t, np.broadcast_to(log_g, (t.size, log_g.shape[-1])),
                                     np.broadcast_to(slope, (t.size, slope.shape[-1])))
    with np.errstate(divide="ignore"):
        exact = np.log(gammaincinv(b, ndtr(t)))
    ok = np.isfinite(exact) & (exact > -600)   # SciPy's quantile underflows in the far lower tail for small b
    np.testing.assert_allclose(x[ok], exact[ok], rtol=2e-3, atol=2e-3 / min(b, 1.0) ** 0.5)
    h = 1e-6
    xp, _ = gamma_quantile_point(t + h, np.broadcast_to(log_g, (t.size, log_g.shape[-1])),
                                 np.broadcast_to(slope, (t.size, slope.shape[-1])))
    np.testing.assert_allclose(np.exp(log_dx), (xp - x) / h, rtol=1e-4)
    # log f_b(x) + log dx/dt = log phi(t): the induced density is the standard normal's.
    # (within 1e-3 for b >= 0.01; measured 0.016 at b = 1e-6, the floor ALPHA_MIN of the pooled EM's population)
    np.testing.assert_allclose(b * x - np.exp(x) - gammaln(b) + log_dx, norm.logpdf(t),
                               atol=2e-3 if b >= 0.01 else 2e-2)
    assert np.all(np.diff(x) > 0)  # monotone


def test_marginal_loglik_gradient_is_the_expected_counts(crowd):
    """core.sparse.coded_class_marginal_loglik (gradient written out as the E-step's expected counts, Fisher's
    identity) against reverse-mode differentiation of the plain log joint, with gold items, repeated labels and
    item weights."""
    from noisycal_bayes.core.sparse import CodedResponses, coded_class_log_joint, coded_class_marginal_loglik

    x = crowd
    J, K = x.n_annotators, x.n_classes
    item, code, padded, by_code, grp, gold, w = padded_class_responses(x, np.zeros(x.n_items, np.int32))
    w = w * np.random.default_rng(1).random(w.size)
    coded = CodedResponses(item, code, padded)
    r = np.random.default_rng(0)
    with x64():
        lc = jax.nn.log_softmax(r.normal(size=(J, K, K)), -1)
        lpv = jax.nn.log_softmax(r.normal(size=(1, K)), -1)

        def plain(a, b):
            lp = coded_class_log_joint(coded, grp, a[None], b[None], gold)[:, :, 0]
            return jax.numpy.sum(w * jax.nn.logsumexp(lp, axis=1))

        v1, g1 = jax.value_and_grad(plain, (0, 1))(lc, lpv)
        v2, g2 = jax.jit(jax.value_and_grad(
            lambda a, b: coded_class_marginal_loglik(coded, grp, a, b, gold, w, by_code), (0, 1)))(lc, lpv)
    np.testing.assert_allclose(float(v2), float(v1), rtol=1e-12)
    for a, b in zip(g2, g1):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)
