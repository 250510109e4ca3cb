"""Score-dependent channels, partially pooled toward a shared channel (issue 17 item 2; DESIGN §2 relaxed).

The paper's model (:func:`~noisycal_bayes.models.grouped_dawid_skene`) assumes every annotator's channel is
the same in every score group. Here annotator ``j`` has its own channel in group ``g``, on the logit scale a
random deviation from a shared channel:

``logit fpr_gj = logit fpr_j + tau_fpr * e_gj``,  ``logit u_gj = logit u_j + tau_u * f_gj``,
``tpr_gj = fpr_gj + (1 - fpr_gj) u_gj``,  ``e_gj, f_gj ~ Normal(0, 1)``,  ``tau ~ HalfNormal(scale)``,

so ``gap_gj = (1 - fpr_gj) u_gj > 0`` in every draw (the orientation constraint of DESIGN §4 holds per
group), and ``tau -> 0`` recovers the shared-channel model (partial pooling, Gelman and Hill, *Data Analysis Using
Regression and Multilevel/Hierarchical Models*, 2007, ch. 12; non-centred deviations). What the pooling identifies:
docs/methods.md.

The likelihood is that of the grouped model with the rates of each row's group,
``log P(A_r | g) = logaddexp(log(1 - pi_g) + sum_j log P(A_rj | Y=0, g), log pi_g + sum_j log P(A_rj | Y=1, g))``
over observed responses, on compressed ``(group, pattern)`` rows with counts.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import expit, logit

from .dawid_skene import oriented_channels
from .priors import DEFAULT_PRIOR, Prior

#: Default scale of the HalfNormal priors on the between-group standard deviations (logit scale): 0.5 lets a
#: false-positive rate of 0.05 move to about 0.13 at one prior standard deviation.
DEFAULT_SCALE = 0.5


def grouped_rows_loglik(patterns, group, fpr_g, tpr_g, prevalence):
    """Marginal log-likelihood of each row with group-specific rates, shape (n_rows,).

    ``patterns`` (n_rows, J) 0/1/-1, ``group`` (n_rows,), ``fpr_g``/``tpr_g`` (n_groups, J), ``prevalence``
    (n_groups,). Missing responses (-1) contribute 0.
    """
    f, t = fpr_g[group], tpr_g[group]
    pos, neg = patterns == 1, patterns == 0
    eps = 1e-12

    def rows(rate):
        return jnp.sum(jnp.where(pos, jnp.log(jnp.clip(rate, eps, 1.0)), 0.0)
                       + jnp.where(neg, jnp.log(jnp.clip(1 - rate, eps, 1.0)), 0.0), axis=-1)

    pi = jnp.clip(prevalence[group], eps, 1 - eps)
    return jnp.logaddexp(jnp.log1p(-pi) + rows(f), jnp.log(pi) + rows(t))


def score_dependent_dawid_skene(labels=None, group=None, counts=None, *, n_annotators: int, n_groups: int,
                                prior: Prior = DEFAULT_PRIOR, scale: float = DEFAULT_SCALE,
                                record_loglik: bool = False):
    """Grouped Dawid-Skene model with channels per score group, partially pooled toward a shared channel.

    Parameters
    ----------
    labels : int array of shape (n_rows, n_annotators) or None
        Response patterns (0/1, -1 = missing); None samples the prior predictive.
    group : int array of shape (n_rows,)
    counts : float array of shape (n_rows,) or None
        Items per row (None: one each).
    n_annotators, n_groups : int
    prior : Prior
        Priors of the shared channel (``fpr``, ``u``) and of the prevalences.
    scale : float, default 0.5
        Scale of the HalfNormal priors of ``tau_fpr`` and ``tau_u`` (logit scale).
    record_loglik : bool
        Add a deterministic site ``log_likelihood`` (n_rows,) (per row, not weighted by counts).

    Notes
    -----
    Sites: ``fpr``, ``u`` (shared, (J,)), ``tau_fpr``, ``tau_u``, ``e_fpr``, ``e_u`` ((G, J)), deterministic
    ``fpr_group``, ``tpr_group``, ``gap_group`` ((G, J)), ``prevalence`` ((G,)). The formulas are in the
    module docstring.
    """
    fpr, tpr = oriented_channels(n_annotators, prior)
    u = (tpr - fpr) / (1 - fpr)
    tau_f = numpyro.sample("tau_fpr", dist.HalfNormal(scale))
    tau_u = numpyro.sample("tau_u", dist.HalfNormal(scale))
    with numpyro.plate("group_j", n_annotators, dim=-1), numpyro.plate("group_g", n_groups, dim=-2):
        e_f = numpyro.sample("e_fpr", dist.Normal(0.0, 1.0))
        e_u = numpyro.sample("e_u", dist.Normal(0.0, 1.0))
    eps = 1e-9
    fpr_g = expit(logit(jnp.clip(fpr, eps, 1 - eps)) + tau_f * e_f)
    u_g = expit(logit(jnp.clip(u, eps, 1 - eps)) + tau_u * e_u)
    gap_g = numpyro.deterministic("gap_group", (1 - fpr_g) * u_g)
    fpr_g = numpyro.deterministic("fpr_group", fpr_g)
    tpr_g = numpyro.deterministic("tpr_group", fpr_g + gap_g)
    with numpyro.plate("group", n_groups):
        prevalence = numpyro.sample("prevalence", dist.Beta(*prior.prevalence))
    if labels is None:
        with numpyro.plate("row", group.shape[0]):
            y = numpyro.sample("y", dist.Bernoulli(probs=prevalence[group]))
            rate = jnp.where(y[:, None] == 1, tpr_g[group], fpr_g[group])
            return numpyro.sample("labels", dist.Bernoulli(probs=rate).to_event(1))
    return rows_factor(grouped_rows_loglik(labels, group, fpr_g, tpr_g, prevalence), counts, record_loglik)


def rows_factor(rows, counts, record_loglik):
    """Add the log-likelihood of compressed rows (n_rows,), weighted by ``counts`` (None: one item each), as the
    factor ``responses``; with ``record_loglik`` also the per-row values as the deterministic ``log_likelihood``."""
    if record_loglik:
        numpyro.deterministic("log_likelihood", rows)
    numpyro.factor("responses", jnp.sum(rows) if counts is None else jnp.sum(counts * rows))
