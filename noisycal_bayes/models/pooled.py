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

**Likelihood.** From sparse responses ``(item, annotator, label)`` by one per-item sum of a per-response
table (:func:`noisycal_bayes.core.sparse.channel_tables`, :func:`~noisycal_bayes.core.sparse.code_sums`; equal
to :func:`~noisycal_bayes.core.sparse.sparse_item_loglik`): ``log p(A_i) = logaddexp(log(1 - pi_i) + l0_i,
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

from ..core.sparse import channel_tables, code_sums, response_codes
from .priors import DEFAULT_PRIOR, Prior

_EPS = 1e-12  # prevalence kept off {0, 1} before its log (as core.sparse)

#: The prevalence structures a pooled channel model can be combined with (same names as ``model=``).
POOLED_KINDS = ("dawid_skene", "grouped", "histogram", "monotone", "platt")
#: Sample sites of the population (hyper-)parameters, in the order results report them.
POPULATION_SITES = ("mu_fpr", "mean_gap", "sigma_fpr", "sigma_tpr")


def pooled_channels(n_annotators: int, prior: Prior, centering=None):
    """Sample the population and the annotators' channels; expose ``fpr``, ``tpr``, ``gap``, ``u``.

    Returns ``(logit_fpr, logit_tpr)``, each of shape (n_annotators,). ``u = gap / (1 - fpr)`` is recorded so
    that the draws read like the non-pooled models' (it is negative for an adversarial annotator).

    ``centering`` (float array of shape (2, n_annotators) in [0, 1], or None = all 0) sets how centred each
    annotator's site is (partial centring, Papaspiliopoulos, Roberts & Skold 2007; NumPyro's
    ``LocScaleReparam``): with ``c`` the annotator's value, ``z ~ N(c mu, sigma^c)`` and
    ``logit r = mu + sigma^(1 - c) (z - c mu)``, which is the non-centred form at ``c = 0`` (``z ~ N(0, 1)``)
    and the centred one at ``c = 1`` (``z = logit r``). The distribution of the rates is the same for every
    ``c``; only the sampler's geometry changes (``noisycal_bayes.inference._common.partial_centering``).
    """
    loc, scale = prior.population_fpr
    mu_f = numpyro.sample("mu_fpr", dist.Normal(loc, scale))
    # mean_gap > 0 is the crowd-level orientation constraint (module docstring): built into the support.
    mean_gap = numpyro.sample("mean_gap", dist.HalfNormal(prior.population_gap))
    sigma_f = numpyro.sample("sigma_fpr", dist.HalfNormal(prior.population_spread))
    sigma_t = numpyro.sample("sigma_tpr", dist.HalfNormal(prior.population_spread))
    mu_t = mu_f + mean_gap
    if centering is None:
        with numpyro.plate("annotator", n_annotators):
            z_f = numpyro.sample("z_fpr", dist.Normal(0.0, 1.0))
            z_t = numpyro.sample("z_tpr", dist.Normal(0.0, 1.0))
        lf, lt = mu_f + sigma_f * z_f, mu_t + sigma_t * z_t
    else:
        # In the sites' dtype: a float64 constant with float32 sites (x64 off) would not combine in lax.
        c = jnp.asarray(centering, jnp.result_type(mu_f))
        c_f, c_t = c[0], c[1]
        # sigma^c as exp(c log sigma): finite gradient at c = 0 (sigma^0 = 1 for every sigma > 0).
        with numpyro.plate("annotator", n_annotators):
            z_f = numpyro.sample("z_fpr", dist.Normal(c_f * mu_f, jnp.exp(c_f * jnp.log(sigma_f))))
            z_t = numpyro.sample("z_tpr", dist.Normal(c_t * mu_t, jnp.exp(c_t * jnp.log(sigma_t))))
        lf = mu_f + jnp.exp((1 - c_f) * jnp.log(sigma_f)) * (z_f - c_f * mu_f)
        lt = mu_t + jnp.exp((1 - c_t) * jnp.log(sigma_t)) * (z_t - c_t * mu_t)
    fpr = numpyro.deterministic("fpr", jax.nn.sigmoid(lf))
    tpr = numpyro.deterministic("tpr", jax.nn.sigmoid(lt))
    gap = numpyro.deterministic("gap", tpr - fpr)
    numpyro.deterministic("u", gap / (1 - fpr))
    return lf, lt


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


def pooled_model(item, annotator, label=None, item_group=None, gold=None, logit_score=None, padded=None,
                 code_counts=None, centering=None, *, kind: str, n_items: int, n_annotators: int, n_groups: int = 1,
                 prior: Prior = DEFAULT_PRIOR, record_loglik: bool = False):
    """Partially pooled channels with the prevalence structure ``kind`` (module docstring).

    Parameters
    ----------
    item, annotator : int arrays of shape (n_responses,)
        Who labelled what (:attr:`noisycal_bayes.data.AnnotationSet.responses`), sorted by item.
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
    padded : int array of shape (n_items, L) or None
        The responses' codes ``2 j + A`` per item (:func:`noisycal_bayes.core.sparse.padded_codes`); None sums
        over the responses by a segment sum. Either gives the same numbers.
    code_counts : float array of shape (2 n_annotators,) or None
        Number of responses per code (computed when None).
    centering : float array of shape (2, n_annotators) or None
        Partial centring of the fpr / tpr sites (:func:`pooled_channels`); None is the non-centred form.
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
    with the per-item prior of the calibration-curve models. Computed as ``sum_k n_k L0[k] + sum_i
    logaddexp(log(1 - pi_i), log pi_i + x_i)`` with one per-item sum ``x_i = l1_i - l0_i`` of a per-code table
    (:func:`noisycal_bayes.core.sparse.channel_tables`); gold items keep only their known label's term.
    """
    if kind not in POOLED_KINDS:
        raise ValueError(f"`kind` must be one of {list(POOLED_KINDS)}; got {kind!r}.")
    lf, lt = pooled_channels(n_annotators, prior, centering)
    prob = _prevalence(kind, n_groups, prior, logit_score)
    # Platt has one clean-label probability per item: each item is its own "group".
    group = jnp.arange(n_items) if kind == "platt" else item_group
    if label is None:
        fpr, tpr = jax.nn.sigmoid(lf), jax.nn.sigmoid(lt)
        with numpyro.plate("item", n_items):
            y = numpyro.sample("y", dist.Bernoulli(probs=prob[group]))
        rate = jnp.where(y[item] == 1, tpr[annotator], fpr[annotator])
        with numpyro.plate("response", item.shape[0]):
            return numpyro.sample("labels", dist.Bernoulli(probs=rate))
    code = response_codes(annotator, label)
    if code_counts is None:
        code_counts = jax.ops.segment_sum(jnp.ones(code.shape[0], lf.dtype), code, num_segments=2 * n_annotators)
    code_counts = jnp.asarray(code_counts, lf.dtype)
    l0_table, w_table = channel_tables(lf, lt)
    if padded is not None and padded.shape[-1] == 0:
        padded = None  # pooled_inputs' marker for "sum by segments" (shapes are static under tracing)
    x = code_sums(w_table, code, item, n_items, padded)
    p = jnp.clip(prob, _EPS, 1 - _EPS)[group]
    a, b = jnp.log1p(-p), jnp.log(p) + x
    if gold is not None:
        # Observed latent label: only the known class's term (l0_i is common to both and added below).
        a = jnp.where(gold == 1, -jnp.inf, a)
        b = jnp.where(gold == 0, -jnp.inf, b)
    rel = jnp.logaddexp(a, b)
    if record_loglik:
        numpyro.deterministic("log_likelihood", rel + code_sums(l0_table, code, item, n_items, padded))
    # sum_i l0_i = sum_k n_k L0[k]: the responses' counts per code carry it (module notes of core.sparse).
    numpyro.factor("responses", jnp.sum(code_counts * l0_table) + jnp.sum(rel))
    return None
