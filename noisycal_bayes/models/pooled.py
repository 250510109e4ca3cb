"""Partially pooled (hierarchical) channel models for crowds: many annotators, few labels each.

Each annotator's channel is drawn from a population distribution whose parameters are learned, in
non-centred form (so that an annotator with 20 labels costs the sampler no funnel):

.. math::

    \\operatorname{logit} fpr_j = \\mu_f + \\sigma_f z_{fj}, \\qquad
    \\operatorname{logit} tpr_j = \\mu_t + \\sigma_t z_{tj}, \\qquad z_{fj}, z_{tj} \\sim N(0, 1),

with ``mu_tpr = mu_fpr + mean_gap``. Sites and priors (numbers from :class:`~noisycal_bayes.models.Prior`):

==================  ==========================================  =======================================
site                prior                                       meaning
==================  ==========================================  =======================================
``mu_fpr``          ``Normal(*prior.population_fpr)``           population median fpr, logit scale
``mean_gap``        ``HalfNormal(prior.population_gap)``        ``mu_tpr - mu_fpr`` > 0 (orientation)
``sigma_fpr``,      ``HalfNormal(prior.population_spread)``     spread of logit fpr / logit tpr
``sigma_tpr``
``z_fpr, z_tpr``    ``Normal(0, 1)`` per annotator              standardised channel of annotator j
prevalence part     as the non-pooled model of the same name    ``"dawid_skene"``, ``"grouped"``, ...
==================  ==========================================  =======================================

**Orientation at the level of the crowd** (paper Appendix D.5, DESIGN §8). The likelihood is invariant
under the label exchange ``Y -> 1 - Y``, which maps every ``(fpr_j, tpr_j)`` to ``(tpr_j, fpr_j)`` and
each prevalence ``pi`` to ``1 - pi``; under the pooled prior it maps ``(mu_fpr, mu_tpr)`` to
``(mu_tpr, mu_fpr)``, i.e. ``mean_gap`` to ``-mean_gap``. Constraining ``mean_gap > 0`` (the population's
median tpr above its median fpr) therefore selects one of the two mirror modes, for the whole crowd at once,
and leaves every single annotator free: a spammer (``gap_j ~ 0``) or an adversary (``gap_j < 0``) is
estimated with its interval, not rejected, and cannot flip the fit. The paper's every-gap-positive
constraint (the non-pooled models) stays the choice for a few trusted annotators who each label many items.

**Likelihood.** From sparse responses ``(item, annotator, label)`` by segment sums over items
(:func:`noisycal_bayes.core.sparse.sparse_item_loglik`): ``log p(A_i) = logaddexp(log(1 - pi_i) + l0_i,
log pi_i + l1_i)`` with ``l_y = sum_{r: i_r = i} log P(A_r | Y = y)``; items with a gold label contribute
``log P(Y_i = gold_i, A_i)`` (an observed latent label). The cost is O(n_responses), with no dense
items x annotators array; an annotator may label an item more than once (conditionally independent
responses given ``Y_i``).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from ..core.sparse import Responses, sparse_item_loglik
from .priors import DEFAULT_PRIOR, Prior

#: The prevalence structures a pooled channel model can be combined with (same names as ``model=``).
POOLED_KINDS = ("dawid_skene", "grouped", "histogram", "monotone", "platt")
#: Sample sites of the population (hyper-)parameters, in the order results report them.
POPULATION_SITES = ("mu_fpr", "mean_gap", "sigma_fpr", "sigma_tpr")


def pooled_channels(n_annotators: int, prior: Prior):
    """Sample the population and the standardised channels; expose ``fpr``, ``tpr``, ``gap``, ``u``.

    Returns ``(fpr, tpr)``, each of shape (n_annotators,). ``u = gap / (1 - fpr)`` is recorded so that the
    draws read like the non-pooled models' (it is negative for an adversarial annotator).
    """
    loc, scale = prior.population_fpr
    mu_f = numpyro.sample("mu_fpr", dist.Normal(loc, scale))
    # mean_gap > 0 is the crowd-level orientation constraint (module docstring): built into the support.
    mean_gap = numpyro.sample("mean_gap", dist.HalfNormal(prior.population_gap))
    sigma_f = numpyro.sample("sigma_fpr", dist.HalfNormal(prior.population_spread))
    sigma_t = numpyro.sample("sigma_tpr", dist.HalfNormal(prior.population_spread))
    with numpyro.plate("annotator", n_annotators):
        z_f = numpyro.sample("z_fpr", dist.Normal(0.0, 1.0))
        z_t = numpyro.sample("z_tpr", dist.Normal(0.0, 1.0))
    fpr = numpyro.deterministic("fpr", jax.nn.sigmoid(mu_f + sigma_f * z_f))
    tpr = numpyro.deterministic("tpr", jax.nn.sigmoid(mu_f + mean_gap + sigma_t * z_t))
    gap = numpyro.deterministic("gap", tpr - fpr)
    numpyro.deterministic("u", gap / (1 - fpr))
    return fpr, tpr


def _prevalence(kind: str, n_groups: int, prior: Prior, logit_score):
    """Clean-label probability per prevalence cell: (n_groups,), or (n_items,) for Platt (per item)."""
    if kind == "dawid_skene":
        return numpyro.sample("prevalence", dist.Beta(*prior.prevalence))[None]
    if kind in ("grouped", "histogram"):
        with numpyro.plate("group" if kind == "grouped" else "bin", n_groups):
            return numpyro.sample("prevalence", dist.Beta(*prior.prevalence))
    if kind == "monotone":
        inc = numpyro.sample("increments", dist.Dirichlet(jnp.full(n_groups + 1, prior.increments)))
        return numpyro.deterministic("prevalence", jnp.cumsum(inc)[:-1])
    slope = numpyro.sample("slope", dist.Normal(*prior.slope))
    intercept = numpyro.sample("intercept", dist.Normal(*prior.intercept))
    return jax.nn.sigmoid(slope * logit_score + intercept)


def pooled_model(item, annotator, label=None, item_group=None, gold=None, logit_score=None, *, kind: str,
                 n_items: int, n_annotators: int, n_groups: int = 1, prior: Prior = DEFAULT_PRIOR,
                 record_loglik: bool = False):
    """Partially pooled channels with the prevalence structure ``kind`` (module docstring).

    Parameters
    ----------
    item, annotator : int arrays of shape (n_responses,)
        Who labelled what (:attr:`noisycal_bayes.data.AnnotationSet.responses`).
    label : int array of shape (n_responses,) or None
        The responses (0/1). None samples the prior predictive: ``y`` of shape (n_items,) and ``labels``
        of shape (n_responses,), one per (item, annotator) entry given.
    item_group : int array of shape (n_items,)
        Prevalence group (score bin) of each item, in ``0..n_groups-1`` (zeros for ``"dawid_skene"``;
        ignored by ``"platt"``).
    gold : int array of shape (n_items,) or None
        Known clean label per item (0/1), -1 where unknown; None when there are none.
    logit_score : float array of shape (n_items,) or None
        ``logit(z_i)``, clipped (Platt only).
    kind : {"dawid_skene", "grouped", "histogram", "monotone", "platt"}
    n_items, n_annotators, n_groups : int
        Static sizes.
    prior : Prior or PriorParams
        Uses ``population_fpr``, ``population_gap``, ``population_spread`` and the prevalence part's fields.
    record_loglik : bool
        Add a deterministic site ``log_likelihood`` of shape (n_items,).

    Notes
    -----
    ``log p(A | theta) = sum_i logaddexp(log(1 - pi_i) + l0_i, log pi_i + l1_i)`` with ``pi_i`` the
    prevalence of item i's group (Platt: ``sigmoid(slope logit z_i + intercept)``); paper Appendix F.1
    with the per-item prior of the calibration-curve models.
    """
    if kind not in POOLED_KINDS:
        raise ValueError(f"`kind` must be one of {list(POOLED_KINDS)}; got {kind!r}.")
    fpr, tpr = pooled_channels(n_annotators, prior)
    prob = _prevalence(kind, n_groups, prior, logit_score)
    # Platt has one clean-label probability per item: each item is its own "group".
    group = jnp.arange(n_items) if kind == "platt" else item_group
    if label is None:
        with numpyro.plate("item", n_items):
            y = numpyro.sample("y", dist.Bernoulli(probs=prob[group]))
        rate = jnp.where(y[item] == 1, tpr[annotator], fpr[annotator])
        with numpyro.plate("response", item.shape[0]):
            return numpyro.sample("labels", dist.Bernoulli(probs=rate))
    rows = sparse_item_loglik(Responses(item, annotator, label), group, fpr, tpr, prob, gold)
    if record_loglik:
        numpyro.deterministic("log_likelihood", rows)
    numpyro.factor("responses", jnp.sum(rows))
    return None
