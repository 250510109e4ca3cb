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

Orientation is fixed at the crowd's level: the population mean is diagonally dominant at the start (the pooled EM
relabels its classes so, :mod:`noisycal_bayes.inference.population`); a single annotator may be adversarial. Gold
items are observed clean labels; repeated responses are conditionally independent given ``Y_i``. Coordinates and
likelihood: those of :func:`~noisycal_bayes.models.log_ratio.grouped_multiclass_log_ratio`, on coded responses in
O(n_responses) (docs/methods.md). Accuracy, speed and mixing on real crowds: docs/crowds.md ("Bayesian route").
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from ..core.sparse import CodedResponses, coded_class_log_joint
from .log_ratio import _dirichlet_log_ratio_density, insert_diagonal_zero, log_ratio_point
from .priors import DEFAULT_MULTICLASS_PRIOR

__all__ = ["CONCENTRATION_SCALE", "concentration_loc", "ibcc_multiclass", "population_alpha"]

#: Hierarchical IBCC: ``log s_y ~ Normal(concentration_loc(K), CONCENTRATION_SCALE)``.
CONCENTRATION_SCALE = 1.5


def concentration_loc(n_classes: int) -> float:
    """Prior median of each row's concentration on the log scale, ``log(2 K)`` (a row worth 2 K pseudo-labels).

    >>> round(concentration_loc(5), 4)
    2.3026
    """
    return float(np.log(2.0 * n_classes))


def population_alpha(population_u, log_concentration):
    """``alpha_y = s_y m_y`` (K, K) from the population's log-odds against the diagonal ``population_u`` (K, K-1)
    and ``log s`` (K,); also returns ``log m`` (K, K)."""
    log_m = jax.nn.log_softmax(insert_diagonal_zero(population_u), axis=-1)
    return jnp.exp(log_concentration)[:, None] * jnp.exp(log_m), log_m


def ibcc_multiclass(item, code, padded, item_group, gold, item_weight, scaling, alpha, prior=DEFAULT_MULTICLASS_PRIOR,
                    *, n_annotators: int, n_classes: int, learn_population: bool = False):
    """IBCC (module docstring) in scaled log-ratio coordinates, likelihood on coded responses.

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
    scaling : LogRatioScaling
        ``conf_*`` (J, K, K-1), ``prev_*`` (1, K-1).
    alpha : float array of shape (K, K)
        Empirical Bayes: the population ``s_y m_y`` (row y). Hierarchical: the start of the population.
    prior : MulticlassPrior or MulticlassPriorParams
        ``prevalence``; hierarchical also ``diagonal`` and ``off_diagonal`` (the population mean's hyperprior).
    n_annotators, n_classes : int
    learn_population : bool

    Sites: ``confusion_u`` (J, K, K-1), ``prevalence_u`` (1, K-1); hierarchical also ``population_u`` (K, K-1) (the
    population mean's log-odds against the diagonal) and ``log_concentration`` (K,).
    """
    k, real = n_classes, dist.constraints.real
    u = numpyro.sample("confusion_u", dist.ImproperUniform(real, (), (n_annotators, k, k - 1)))
    v = numpyro.sample("prevalence_u", dist.ImproperUniform(real, (), (1, k - 1)))
    log_conf, log_prev = log_ratio_point(scaling, u, v)
    if learn_population:
        w = numpyro.sample("population_u", dist.ImproperUniform(real, (), (k, k - 1)))
        log_s = numpyro.sample("log_concentration",
                               dist.Normal(concentration_loc(k), CONCENTRATION_SCALE).expand([k]).to_event(1))
        alpha, log_m = population_alpha(w, log_s)
        hyper = prior.off_diagonal + (prior.diagonal - prior.off_diagonal) * jnp.eye(k)
        numpyro.factor("population_prior", _dirichlet_log_ratio_density(log_m, hyper, jnp.ones(())))
    numpyro.factor("confusion_prior", _dirichlet_log_ratio_density(
        log_conf, jnp.broadcast_to(alpha, (n_annotators, k, k)), scaling.conf_scale))
    numpyro.factor("prevalence_prior", _dirichlet_log_ratio_density(
        log_prev, jnp.full((1, k), 1.0) * prior.prevalence, scaling.prev_scale))
    lp = coded_class_log_joint(CodedResponses(item, code, padded), item_group, log_conf[None], log_prev[None],
                               gold)[:, :, 0]
    numpyro.factor("responses", jnp.sum(item_weight * jax.nn.logsumexp(lp, axis=1)))
