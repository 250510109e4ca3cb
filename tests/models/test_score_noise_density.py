"""Joint log density of the score-dependent and correlated channel models against an independent route.

A cheap (non-slow) check of what SBC (tests/statistical/test_sbc.py, slow) tests statistically: the density the
sampler targets is prior x likelihood of the process the prior predictive simulates. numpyro's
``log_density`` at a point is compared with scipy.stats log-priors of every sample site plus a per-item
likelihood that sums the clean label out by hand (and, for the correlated model, integrates the item effect
with 80-node Gauss-Hermite quadrature in NumPy). A wrong plate, scale, Jacobian or non-centred map changes the
total by far more than the rounding tolerance (1e-8 relative).
"""
import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, logit

from noisycal_bayes.models import Prior
from noisycal_bayes.models.correlated import correlated_dawid_skene
from noisycal_bayes.models.score_noise import DEFAULT_SCALE, score_dependent_dawid_skene

PRIOR = Prior(fpr=(2.0, 8.0), u=(4.0, 2.0), prevalence=(2.0, 3.0))
RNG = np.random.default_rng(3)
G, J, N = 2, 3, 40
GROUP = np.repeat(np.arange(G), N // G).astype(np.int32)
LABELS = RNG.integers(0, 2, size=(N, J)).astype(np.int32)
LABELS[::7, 1] = -1  # missing responses drop out


def _items_loglik(f, t, prev):
    """Per-item log-likelihood with rates f, t of shape (N, J) (or (N, Q, J) with weights over Q)."""
    obs = LABELS >= 0

    def cls(rate):
        return np.prod(np.where(obs, np.where(LABELS == 1, rate, 1 - rate), 1.0), axis=-1)

    return np.log((1 - prev[GROUP]) * cls(f) + prev[GROUP] * cls(t))


def _numpyro_log_density(fn, params):
    from numpyro.infer.util import log_density

    from noisycal_bayes.core import x64

    import jax

    with x64():
        # One compiled program instead of an eager pass that compiles every primitive on its own.
        ld = jax.jit(lambda p: log_density(fn, (LABELS, GROUP, None), dict(n_annotators=J, n_groups=G, prior=PRIOR),
                                           p)[0])({k: np.asarray(v, np.float64) for k, v in params.items()})
    return float(ld)


def test_score_dependent_log_density_is_prior_times_likelihood():
    fpr, u = RNG.beta(2, 8, J), RNG.beta(4, 2, J)
    tau_f, tau_u = 0.7, 0.3
    e_f, e_u = RNG.normal(size=(G, J)), RNG.normal(size=(G, J))
    prev = RNG.beta(2, 3, G)
    params = dict(fpr=fpr, u=u, tau_fpr=tau_f, tau_u=tau_u, e_fpr=e_f, e_u=e_u, prevalence=prev)
    got = _numpyro_log_density(score_dependent_dawid_skene, params)
    fg = expit(logit(fpr) + tau_f * e_f)
    tg = fg + (1 - fg) * expit(logit(u) + tau_u * e_u)
    want = (stats.beta.logpdf(fpr, 2, 8).sum() + stats.beta.logpdf(u, 4, 2).sum()
            + stats.halfnorm.logpdf([tau_f, tau_u], scale=DEFAULT_SCALE).sum()
            + stats.norm.logpdf(e_f).sum() + stats.norm.logpdf(e_u).sum() + stats.beta.logpdf(prev, 2, 3).sum()
            + _items_loglik(fg[GROUP], tg[GROUP], prev).sum())
    assert got == pytest.approx(want, rel=1e-8)


@pytest.mark.slow
def test_correlated_log_density_is_prior_times_likelihood():
    fpr, u = RNG.beta(2, 8, J), RNG.beta(4, 2, J)
    s, prev = 0.9, RNG.beta(2, 3, G)
    got = _numpyro_log_density(correlated_dawid_skene, dict(fpr=fpr, u=u, dependence=s, prevalence=prev))
    tpr = fpr + (1 - fpr) * u
    x, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    obs = LABELS >= 0

    def cls(rate):  # E_b prod_j P(A_j | rate_j, b): (N,)
        p = expit(logit(rate)[None, :] + s * x[:, None])  # (Q, J)
        term = np.where(obs[:, None, :], np.where(LABELS[:, None, :] == 1, p[None], 1 - p[None]), 1.0)
        return np.prod(term, axis=-1) @ w

    lik = np.log((1 - prev[GROUP]) * cls(fpr) + prev[GROUP] * cls(tpr)).sum()
    want = (stats.beta.logpdf(fpr, 2, 8).sum() + stats.beta.logpdf(u, 4, 2).sum()
            + stats.halfnorm.logpdf(s, scale=1.0) + stats.beta.logpdf(prev, 2, 3).sum() + lik)
    # 15 nodes in the model against 80 here: relative error of a row's likelihood about 1e-6 at s = 0.9.
    assert got == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("fn, params", [
    (score_dependent_dawid_skene, dict(fpr=[0.1, 0.2, 0.15], u=[0.7, 0.6, 0.8], tau_fpr=0.7, tau_u=0.3,
                                       e_fpr=[[0.5, -1.0, 0.2], [1.5, 0.3, -0.4]],
                                       e_u=[[-0.3, 0.8, 0.1], [0.2, -1.2, 0.6]], prevalence=[0.3, 0.6])),
    (correlated_dawid_skene, dict(fpr=[0.1, 0.2, 0.15], u=[0.7, 0.6, 0.8], dependence=0.9, prevalence=[0.3, 0.6])),
], ids=["score_dependent", "correlated"])
def test_padded_pattern_table_gives_the_per_item_log_density(fn, params):
    """The compressed table fit_alternative samples on (every (group, pattern) cell, zero-count rows kept so that
    one compiled sampler serves every data set of the design) must give the per-item density exactly: padding
    rows carry count 0 and a finite row value. A dropped count or a wrong row group changes it by whole
    log-likelihood terms (order 1), far above the rounding tolerance."""
    import jax
    from numpyro.infer.util import log_density

    from noisycal_bayes.core import x64
    from noisycal_bayes.data import AnnotationSet
    from noisycal_bayes.models.inputs import prepare_inputs, resolve_assignment

    data = AnnotationSet.from_wide(LABELS, (GROUP + 0.5) / G)
    inp = prepare_inputs(data, "grouped", resolve_assignment(data, "grouped", GROUP, "test"))
    assert np.sum(inp.counts == 0) > 0  # the table has padding rows
    kw = dict(n_annotators=J, n_groups=G, prior=PRIOR)
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    with x64():
        ld = jax.jit(lambda p, a, g, c: log_density(fn, (a, g, c), kw, p)[0])
        table = float(ld(p, np.asarray(inp.patterns, np.int32), np.asarray(inp.row_group, np.int32),
                         np.asarray(inp.counts, np.float64)))
        items = float(ld(p, LABELS, GROUP, np.ones(N)))
    assert table == pytest.approx(items, rel=1e-10)
