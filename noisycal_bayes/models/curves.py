"""Calibration-curve models: the clean-label probability is a function ``m(z)`` of the score (DESIGN §4).

- :func:`histogram_dawid_skene`: ``m`` is constant on each score bin; this *is* the grouped model with
  groups = bins, so the posterior of the bin prevalences is a Bayesian histogram recalibrator.
- :func:`monotone_dawid_skene`: the same with ordered bin prevalences ``pi_1 < ... < pi_K``.
- :func:`platt_dawid_skene`: ``m(z) = sigmoid(slope * logit(z) + intercept)`` (cf. Raykar et al. 2010),
  evaluated per item on flat ``(item, annotator, label)`` response arrays with segment sums, so sparse
  designs (many annotators, few labels each) never build a dense ``n x J`` matrix.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from ..core.likelihood import log_add, response_loglik
from .dawid_skene import oriented_channels, responses
from .priors import DEFAULT_PRIOR, Prior


def histogram_dawid_skene(labels=None, group=None, counts=None, *, n_annotators: int, n_groups: int,
                          prior: Prior = DEFAULT_PRIOR, grid: bool = False, record_loglik: bool = False):
    """Histogram calibration curve: ``Y_i ~ Bernoulli(prevalence[bin(z_i)])``, channels shared.

    Identical to :func:`~noisycal_bayes.models.grouped_dawid_skene` with ``group`` = score bin; it
    exists as its own name so that results label the dimension ``bin`` and read as a recalibration map.
    """
    fpr, tpr = oriented_channels(n_annotators, prior)
    with numpyro.plate("bin", n_groups):
        prevalence = numpyro.sample("prevalence", dist.Beta(*prior.prevalence))
    return responses(labels, group, prevalence, fpr, tpr, counts, grid=grid, record_loglik=record_loglik)


def monotone_dawid_skene(labels=None, group=None, counts=None, *, n_annotators: int, n_groups: int,
                         prior: Prior = DEFAULT_PRIOR, grid: bool = False, record_loglik: bool = False):
    """Monotone histogram: ordered bin prevalences ``0 < pi_1 < ... < pi_K < 1``.

    ``increments ~ Dirichlet(prior.increments * ones(K + 1))`` and ``pi_k = sum_{l <= k} increments_l``
    (a linear map with unit Jacobian, so concentration 1 is uniform over the ordered region).
    Other arguments as in :func:`~noisycal_bayes.models.grouped_dawid_skene`.
    """
    fpr, tpr = oriented_channels(n_annotators, prior)
    inc = numpyro.sample("increments", dist.Dirichlet(jnp.full(n_groups + 1, prior.increments)))
    prevalence = numpyro.deterministic("prevalence", jnp.cumsum(inc)[:-1])
    return responses(labels, group, prevalence, fpr, tpr, counts, grid=grid, record_loglik=record_loglik)


def platt_dawid_skene(item, annotator, label=None, logit_score=None, *, n_items: int, n_annotators: int,
                      prior: Prior = DEFAULT_PRIOR, record_loglik: bool = False):
    """Platt calibration curve ``P(Y_i = 1 | z_i) = sigmoid(slope * logit(z_i) + intercept)``.

    Parameters
    ----------
    item, annotator : int arrays of shape (n_responses,)
        Who labelled what: one entry per observed response (flat, no missing entries).
    label : int array of shape (n_responses,) or None
        The responses (0/1); None samples the prior predictive (``y`` per item, ``labels`` per response).
    logit_score : float array of shape (n_items,)
        ``logit(z_i)`` (clipped, see :func:`noisycal_bayes.core.clipped_logit`).
    n_items, n_annotators : int
    prior : Prior (uses ``slope``, ``intercept``, ``fpr``, ``u``)
    record_loglik : bool
        Add a deterministic site ``log_likelihood`` of shape (n_items,).

    Notes
    -----
    Per item, ``l_y = sum_{responses of i} log P(A | Y = y)`` by a segment sum, then
    ``log p_i = logaddexp(log(1 - m_i) + l_0, log m_i + l_1)`` (paper Appendix F.1 with a per-item prior).
    """
    fpr, tpr = oriented_channels(n_annotators, prior)
    slope = numpyro.sample("slope", dist.Normal(*prior.slope))
    intercept = numpyro.sample("intercept", dist.Normal(*prior.intercept))
    s = slope * logit_score + intercept
    if label is None:
        with numpyro.plate("item", n_items):
            y = numpyro.sample("y", dist.Bernoulli(logits=s))
        rate = jnp.where(y[item] == 1, tpr[annotator], fpr[annotator])
        with numpyro.plate("response", item.shape[0]):
            return numpyro.sample("labels", dist.Bernoulli(probs=rate))
    # Each response with its own annotator's rates; then sum per item.
    l0, l1 = response_loglik(label, fpr[annotator], tpr[annotator])
    l0 = jax.ops.segment_sum(l0, item, num_segments=n_items)
    l1 = jax.ops.segment_sum(l1, item, num_segments=n_items)
    # log(1 - sigmoid(s)) = log_sigmoid(-s): exact for large |s|, where 1 - sigmoid(s) would round to 0.
    rows = log_add(jax.nn.log_sigmoid(-s) + l0, jax.nn.log_sigmoid(s) + l1)
    if record_loglik:
        numpyro.deterministic("log_likelihood", rows)
    numpyro.factor("responses", jnp.sum(rows))
    return None
