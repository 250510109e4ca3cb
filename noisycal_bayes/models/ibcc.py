"""Bayesian Dawid-Skene with a population prior on the confusion rows (IBCC) for K-class crowds, for NUTS.

Model (Kim & Ghahramani 2012, "Bayesian classifier combination"; the population of
:mod:`noisycal_bayes.core.population`): clean labels ``Y_i ~ Categorical(pi)``, ``pi ~ Dirichlet(prior.prevalence
1_K)``; every annotator's confusion row ``C[j, y, :] ~ Dirichlet(alpha_y)``, ``alpha_y = s_y m_y`` (population mean
row ``m_y``, concentration ``s_y``); responses ``A_r ~ Categorical(C[j_r, Y_{i_r}, :])``, the clean labels summed
out. Two ways to set the population:

- **empirical Bayes** (``learn_population=False``, the default of ``fit_nuts_multiclass(model="ibcc")``): ``alpha``
  is the population of the partially pooled EM (``fit_em_multiclass(model="pooled").prior[0]``, type-II maximum
  likelihood with the weak ``s^(-5/2)`` hyperprior), plugged in as data;
- **hierarchical** (``learn_population=True``): ``m_y ~ Dirichlet(prior.off_diagonal + (prior.diagonal -
  prior.off_diagonal) e_y)`` (favours the diagonal: the crowd is better than chance) and ``log s_y ~ Normal(log(2 K),
  1.5)`` are sampled with the rest.

Orientation is fixed at the crowd's level: the population mean (fixed or sampled) is diagonally dominant at the
start (the pooled EM relabels its classes so, :mod:`noisycal_bayes.inference.population`); a single annotator
may be adversarial. Gold items (``gold >= 0``) are observed clean labels; repeated (item, annotator) responses are
conditionally independent given ``Y_i``.

**Coordinates** (normalised Gammas). A Dirichlet row ``p ~ Dirichlet(a)`` is ``p = G / T``, ``T = sum_k G_k``, with
independent ``G_k ~ Gamma(a_k, 1)``; the sampler moves ``u`` with ``log G = loc + scale * u``, ``loc = digamma(a +
n)``, ``scale = sqrt(trigamma(a + n))`` (``n`` the start's expected counts: the conjugate posterior's
``Gamma(a + n)`` made standard). Unlike the log-odds against the diagonal, which have an exponential tail of rate
``a_k`` on one side and ``a_0 - a_k`` on the other (at ``a_k = 0.05``: a step size of 0.03 and trees of 255 leapfrog
steps on cf), ``log G_k`` under ``Gamma(a_k)`` is a left exponential tail against a steep right wall whose widths
differ by ``sqrt(a_k)`` only. The total ``T`` is free (its distribution leaves ``p``'s unchanged); a factor
``T^N`` (``N`` the row's expected count) makes it ``Gamma(a_0 + N)``, as the posterior of ``log G`` is centred: each
row's density is ``Dirichlet(p | a) Gamma(T | a_0 + N)`` exactly (:func:`gamma_rows`). **Likelihood** from the coded
responses (one gather per response of a ``J K x K`` table of ``log C``, summed per item over a padded code matrix
or by segments, :func:`~noisycal_bayes.core.sparse.coded_class_log_joint`): O(n_responses), no items x annotators
array.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from ..core.sparse import CodedResponses, coded_class_log_joint
from typing import NamedTuple

from .log_ratio import _dirichlet_log_ratio_density, insert_diagonal_zero
from .priors import DEFAULT_MULTICLASS_PRIOR

__all__ = ["CONCENTRATION_SCALE", "GammaScaling", "concentration_loc", "gamma_rows", "gamma_scaling", "ibcc_multiclass",
           "population_alpha"]

#: Hierarchical IBCC: ``log s_y ~ Normal(concentration_loc(K), CONCENTRATION_SCALE)``.
CONCENTRATION_SCALE = 1.5


def concentration_loc(n_classes: int) -> float:
    """Prior median of each row's concentration on the log scale, ``log(2 K)`` (a row worth 2 K pseudo-labels)."""
    return float(np.log(2.0 * n_classes))


class GammaScaling(NamedTuple):
    """Sampler coordinates of Dirichlet rows as normalised Gammas (module docstring): ``log G = loc + scale * u``;
    ``total`` the tilt exponent ``N`` per row. Confusion rows ``conf_*`` (J, K, K) and ``conf_total`` (J, K);
    prevalence ``prev_*`` (1, K), ``prev_total`` (1,)."""

    conf_loc: object
    conf_scale: object
    conf_total: object
    prev_loc: object
    prev_scale: object
    prev_total: object


def gamma_scaling(confusion_counts, prevalence_counts, confusion_alpha, prevalence_alpha) -> GammaScaling:
    """:class:`GammaScaling` from the start's expected counts (J, K, K) and (1, K) and the Dirichlet parameters (K, K)
    and (K,) (NumPy float64): ``loc = digamma(a + n)``, ``scale = sqrt(trigamma(a + n))``, ``total = sum_k n_k``."""
    from scipy.special import digamma, polygamma

    out = []
    for n, a in ((confusion_counts, confusion_alpha), (prevalence_counts, prevalence_alpha)):
        n = np.maximum(np.asarray(n, np.float64), 0.0)
        post = n + np.asarray(a, np.float64)
        out += [digamma(post), np.sqrt(polygamma(1, post)), n.sum(axis=-1)]
    return GammaScaling(*out)


def gamma_rows(u, loc, scale, total, alpha):
    """``(log p, log density)`` of Dirichlet rows in normalised-Gamma coordinates ``u`` (..., K).

    ``log G = loc + scale u``, ``log T = logsumexp(log G)``, ``log p = log G - log T``. The density of ``u`` is that
    of independent ``log G_k`` under ``Gamma(alpha_k, 1)`` (``alpha_k log G_k - G_k - lgamma(alpha_k)``, plus ``log
    scale``), tilted by ``T^total Gamma(a_0) / Gamma(a_0 + total)``: in ``(p, T)`` it is ``Dirichlet(p | alpha)
    Gamma(T | a_0 + total)``, so ``p``'s distribution is exactly ``Dirichlet(alpha)``.
    """
    from jax.scipy.special import gammaln

    log_g = loc + scale * u
    log_t = jax.nn.logsumexp(log_g, axis=-1)
    alpha = jnp.broadcast_to(alpha, log_g.shape)
    a0 = alpha.sum(axis=-1)
    dens = (jnp.sum(alpha * log_g - jnp.exp(log_g) - gammaln(alpha)) + jnp.sum(jnp.log(scale))
            + jnp.sum(total * log_t + gammaln(a0) - gammaln(a0 + total)))
    return log_g - log_t[..., None], dens


def population_alpha(population_u, log_concentration):
    """``alpha_y = s_y m_y`` (K, K) from the population's log-odds against the diagonal ``population_u`` (K, K-1)
    and ``log s`` (K,); also returns ``log m`` (K, K)."""
    log_m = jax.nn.log_softmax(insert_diagonal_zero(population_u), axis=-1)
    return jnp.exp(log_concentration)[:, None] * jnp.exp(log_m), log_m


def ibcc_multiclass(item, code, padded, item_group, gold, item_weight, scaling, alpha, prior=DEFAULT_MULTICLASS_PRIOR,
                    *, n_annotators: int, n_classes: int, learn_population: bool = False):
    """IBCC (module docstring) in normalised-Gamma coordinates, likelihood on coded responses.

    Parameters
    ----------
    item, code : int32 arrays of shape (n_responses,)
        Responses sorted by item, coded ``K annotator + label`` (pad code ``J K``:
        :func:`~noisycal_bayes.inference._em_loop.padded_class_responses`).
    padded : int32 array of shape (n_items, L) or None
        The codes per item (None: segment sums).
    item_group : int32 array of shape (n_items,)
        All zeros (one prevalence); kept for the shared kernel.
    gold : int32 array of shape (n_items,)
        Known clean label or -1.
    item_weight : float array of shape (n_items,)
        1 for a real item, 0 for a padding item.
    scaling : GammaScaling
        :func:`gamma_scaling`.
    alpha : float array of shape (K, K)
        Empirical Bayes: the population ``s_y m_y`` (row y). Hierarchical: unused (sampled).
    prior : MulticlassPrior or MulticlassPriorParams
        ``prevalence``; hierarchical also ``diagonal`` and ``off_diagonal`` (the population mean's hyperprior).
    n_annotators, n_classes : int
    learn_population : bool

    Sites: ``confusion_u`` (J, K, K), ``prevalence_u`` (1, K); hierarchical also ``population_u`` (K, K-1) (the
    population mean's log-odds against the diagonal) and ``log_concentration`` (K,).
    """
    k, real = n_classes, dist.constraints.real
    u = numpyro.sample("confusion_u", dist.ImproperUniform(real, (), (n_annotators, k, k)))
    v = numpyro.sample("prevalence_u", dist.ImproperUniform(real, (), (1, k)))
    if learn_population:
        w = numpyro.sample("population_u", dist.ImproperUniform(real, (), (k, k - 1)))
        log_s = numpyro.sample("log_concentration",
                               dist.Normal(concentration_loc(k), CONCENTRATION_SCALE).expand([k]).to_event(1))
        alpha, log_m = population_alpha(w, log_s)
        hyper = prior.off_diagonal + (prior.diagonal - prior.off_diagonal) * jnp.eye(k)
        numpyro.factor("population_prior", _dirichlet_log_ratio_density(log_m, hyper, jnp.ones(())))
    log_conf, conf_density = gamma_rows(u, scaling.conf_loc, scaling.conf_scale, scaling.conf_total, alpha)
    log_prev, prev_density = gamma_rows(v, scaling.prev_loc, scaling.prev_scale, scaling.prev_total,
                                        jnp.full((1, k), 1.0) * prior.prevalence)
    numpyro.factor("confusion_prior", conf_density)
    numpyro.factor("prevalence_prior", prev_density)
    lp = coded_class_log_joint(CodedResponses(item, code, padded), item_group, log_conf[None], log_prev[None],
                               gold)[:, :, 0]
    numpyro.factor("responses", jnp.sum(item_weight * jax.nn.logsumexp(lp, axis=1)))
