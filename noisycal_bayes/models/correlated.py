"""Correlated annotators: a latent item effect shared by every annotator (issue 17 item 3).

The paper's model assumes annotators err independently given the clean label. Here each item ``i`` carries a
latent effect ``b_i ~ Normal(0, 1)`` (its "difficulty" or "salience"), shared by all annotators who label it:

``P(A_ij = 1 | Y_i = y, b_i) = sigmoid(logit r_jy + s b_i)``,  ``r_j0 = fpr_j``,  ``r_j1 = tpr_j``,

the random-effects latent class model of Qu, Tan and Kutner (*Biometrics* 52, 1996, 797-810), with a logistic
instead of a probit link and one dependence scale ``s >= 0`` common to the classes and annotators; ``s = 0`` is the
conditional-independence model. ``b_i`` is integrated out with Gauss-Hermite quadrature (``n_nodes`` nodes ``x_q``,
weights ``w_q`` for N(0, 1)):

``P(A | g) = sum_y pi_g^y (1 - pi_g)^(1-y) sum_q w_q prod_j p_jyq^A_j (1 - p_jyq)^(1 - A_j)``,
``p_jyq = sigmoid(logit r_jy + s x_q)``.

The channels that matter for NC-ECE are the *marginal* rates ``E_b[P(A_j = 1 | Y = y, b)]`` (deterministic sites
``fpr_marginal``, ``tpr_marginal``). Why one scale, why the marginal rates, and what three annotators identify:
docs/methods.md.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import expit, logit

from ..core.likelihood import _eager_jit  # one fused program per shape on concrete inputs; traced as before otherwise
from .dawid_skene import oriented_channels
from .priors import DEFAULT_PRIOR, Prior
from .score_noise import rows_factor

#: Default number of Gauss-Hermite nodes: relative error of a row's likelihood 1.4e-6 at s = 1.3 (9 nodes: 1e-4;
#: measured against 60 nodes and scipy quad in tests/diagnostics/test_alternatives.py).
N_NODES = 15
#: Default scale of the HalfNormal prior on the dependence scale ``s``.
DEFAULT_SCALE = 1.0


def hermite_nodes(n_nodes: int = N_NODES):
    """Nodes and weights of Gauss-Hermite quadrature for a standard normal: ``E f(b) ~ sum_q w_q f(x_q)``."""
    x, w = np.polynomial.hermite_e.hermegauss(int(n_nodes))
    return x, w / w.sum()


@_eager_jit
def correlated_rows_loglik(patterns, group, fpr, tpr, prevalence, s, nodes, weights):
    """Marginal log-likelihood of each row under the random-effects model, shape (n_rows,).

    ``patterns`` (n_rows, J), ``group`` (n_rows,), ``fpr``/``tpr`` (J,), ``prevalence`` (G,), ``s`` scalar,
    ``nodes``/``weights`` (Q,).
    """
    eps = 1e-9
    pos = (patterns == 1).astype(fpr.dtype)
    neg = (patterns == 0).astype(fpr.dtype)

    def per_class(rate):
        p = expit(logit(jnp.clip(rate, eps, 1 - eps))[None, :] + s * nodes[:, None])  # (Q, J)
        l = pos @ jnp.log(p).T + neg @ jnp.log1p(-p).T  # (n_rows, Q)
        return jnp.log(jnp.sum(weights[None, :] * jnp.exp(l - l.max(axis=1, keepdims=True)), axis=1)) + l.max(axis=1)

    pi = jnp.clip(prevalence[group], eps, 1 - eps)
    return jnp.logaddexp(jnp.log1p(-pi) + per_class(fpr), jnp.log(pi) + per_class(tpr))


def correlated_dawid_skene(labels=None, group=None, counts=None, *, n_annotators: int, n_groups: int,
                           prior: Prior = DEFAULT_PRIOR, scale: float = DEFAULT_SCALE, n_nodes: int = N_NODES,
                           record_loglik: bool = False):
    """Grouped Dawid-Skene model with a latent item effect shared by the annotators (Qu, Tan and Kutner 1996).

    ``labels``, ``group``, ``counts``, ``n_annotators``, ``n_groups`` and ``record_loglik`` as in
    :func:`~noisycal_bayes.models.score_noise.score_dependent_dawid_skene`; ``prior`` gives the priors of the
    conditional rates at ``b = 0`` (``fpr``, ``u``) and of the prevalences.

    Parameters
    ----------
    scale : float, default 1
        Scale of the HalfNormal prior of the dependence scale ``s``.
    n_nodes : int, default 15
        Gauss-Hermite nodes.

    Notes
    -----
    Sites: ``fpr``, ``u``, ``tpr``, ``gap`` (rates at ``b = 0``), ``dependence`` (``s``), ``prevalence``, and
    deterministic ``fpr_marginal``, ``tpr_marginal`` ((J,)), the rates averaged over ``b``.
    """
    fpr, tpr = oriented_channels(n_annotators, prior)
    s = numpyro.sample("dependence", dist.HalfNormal(scale))
    x, w = hermite_nodes(n_nodes)
    nodes, weights = jnp.asarray(x, fpr.dtype), jnp.asarray(w, fpr.dtype)
    eps = 1e-9

    def marginal(rate):
        return jnp.sum(weights[:, None] * expit(logit(jnp.clip(rate, eps, 1 - eps))[None, :] + s * nodes[:, None]),
                       axis=0)

    numpyro.deterministic("fpr_marginal", marginal(fpr))
    numpyro.deterministic("tpr_marginal", marginal(tpr))
    with numpyro.plate("group", n_groups):
        prevalence = numpyro.sample("prevalence", dist.Beta(*prior.prevalence))
    if labels is None:
        n_rows = group.shape[0]
        with numpyro.plate("row", n_rows):
            y = numpyro.sample("y", dist.Bernoulli(probs=prevalence[group]))
            b = numpyro.sample("b", dist.Normal(0.0, 1.0))
            rate = jnp.where(y[:, None] == 1, tpr, fpr)
            p = expit(logit(jnp.clip(rate, eps, 1 - eps)) + s * b[:, None])
            return numpyro.sample("labels", dist.Bernoulli(probs=p).to_event(1))
    return rows_factor(correlated_rows_loglik(labels, group, fpr, tpr, prevalence, s, nodes, weights), counts,
                       record_loglik)
