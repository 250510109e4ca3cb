"""The (grouped) Dawid-Skene likelihood and EM step on sparse responses: segment sums over (item, annotator,
label) triples, never a dense items x annotators array.

This is the path for many annotators who each label few items (real crowds), where pattern compression
(:mod:`~noisycal_bayes.core.em`) does not pay: every distinct row of the dense matrix is its own pattern.
Each response ``r`` is a triple ``(i_r, j_r, A_r)``; an annotator may label an item more than once, each
response conditionally independent of the others given the clean label ``Y_i``.

With ``l1_i = sum_{r: i_r = i} [A_r log tpr_j + (1 - A_r) log(1 - tpr_j)]`` and ``l0_i`` the same with fpr,
``a_i = log(1 - pi_{g_i}) + l0_i``, ``b_i = log pi_{g_i} + l1_i``:

- log-likelihood ``sum_i w_i logsumexp(a_i, b_i)`` and E-step ``T_i = sigmoid(b_i - a_i)``;
- items with a known clean label (``gold_i`` in {0, 1}) contribute ``log P(Y_i = gold_i, A_i)`` and have
  ``T_i = gold_i``: an observed latent label;
- M-step (Beta pseudo-counts as in :func:`noisycal_bayes.core.em.m_step`):
  ``tpr_j = (sum_{r: j_r = j} w T A + alpha - 1) / (sum_{r: j_r = j} w T + alpha + beta - 2)``, fpr with
  ``1 - T``, ``pi_g = (sum_{i in g} w_i T_i + alpha - 1) / (sum_{i in g} w_i + alpha + beta - 2)``.

``w_i`` are item weights (1 by default; a Bayesian bootstrap replicate draws them). All functions work under
``jax.jit`` and ``jax.vmap``; the array arguments are those of :class:`Responses`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ..data.responses import Responses

__all__ = ["Responses", "response_loglik", "sparse_e_step", "sparse_item_loglik", "sparse_m_step"]

_EPS = 1e-12


def response_loglik(responses: Responses, n_items: int, fpr, tpr):
    """``(l0, l1)``, each of shape (n_items,): ``log P(A_i | Y_i = 0)`` and ``log P(A_i | Y_i = 1)`` per item."""
    item, ann, lab = responses
    a = lab.astype(jnp.result_type(fpr))
    f = jnp.clip(fpr, _EPS, 1 - _EPS)[ann]
    t = jnp.clip(tpr, _EPS, 1 - _EPS)[ann]
    r0 = a * jnp.log(f) + (1 - a) * jnp.log1p(-f)
    r1 = a * jnp.log(t) + (1 - a) * jnp.log1p(-t)
    return (jax.ops.segment_sum(r0, item, num_segments=n_items),
            jax.ops.segment_sum(r1, item, num_segments=n_items))


def _item_logs(responses, item_group, fpr, tpr, prevalence, gold):
    n_items = item_group.shape[0]
    l0, l1 = response_loglik(responses, n_items, fpr, tpr)
    p = jnp.clip(prevalence, _EPS, 1 - _EPS)[item_group]
    a, b = jnp.log1p(-p) + l0, jnp.log(p) + l1
    if gold is not None:
        a = jnp.where(gold == 1, -jnp.inf, a)
        b = jnp.where(gold == 0, -jnp.inf, b)
    return a, b


def sparse_e_step(responses: Responses, item_group, fpr, tpr, prevalence, item_weight=None, gold=None):
    """``(loglik, T)``: ``sum_i w_i log P(A_i)`` (scalar) and ``T_i = P(Y_i = 1 | A_i)`` of shape (n_items,).

    ``item_group`` (n_items,) gives each item's prevalence group; ``gold`` (n_items,) is None or holds the
    known clean label (0/1) and -1 where it is unknown.
    """
    a, b = _item_logs(responses, item_group, fpr, tpr, prevalence, gold)
    m = jnp.maximum(a, b)
    e = jnp.exp(-jnp.abs(b - a))
    per_item = m + jnp.log1p(e)
    t = jnp.where(b >= a, 1.0, e) / (1.0 + e)
    total = jnp.sum(per_item) if item_weight is None else jnp.sum(item_weight * per_item)
    return total, t


def sparse_item_loglik(responses: Responses, item_group, fpr, tpr, prevalence, gold=None):
    """``log P(A_i)`` per item, shape (n_items,) (``log P(Y_i = gold_i, A_i)`` for gold items)."""
    a, b = _item_logs(responses, item_group, fpr, tpr, prevalence, gold)
    return jnp.logaddexp(a, b)


def sparse_m_step(responses: Responses, item_group, n_groups: int, n_annotators: int, posterior, item_weight=None,
                  prior=None):
    """M-step ``(fpr (J,), tpr (J,), prevalence (G,))`` from ``T = posterior`` (n_items,), with the module's formulas.

    ``prior`` is None (maximum likelihood) or ``((a_fpr, b_fpr), (a_tpr, b_tpr), (a_prev, b_prev))``.
    """
    item, ann, lab = responses
    w = jnp.ones_like(posterior) if item_weight is None else item_weight
    w1_item = w * posterior
    w1 = w1_item[item]
    w0 = w[item] - w1
    a = lab.astype(posterior.dtype)
    (af, bf), (at, bt), (ap, bp) = ((1.0, 1.0),) * 3 if prior is None else prior

    def per_annotator(v):
        return jax.ops.segment_sum(v, ann, num_segments=n_annotators)

    tpr = (per_annotator(w1 * a) + at - 1) / (per_annotator(w1) + at + bt - 2)
    fpr = (per_annotator(w0 * a) + af - 1) / (per_annotator(w0) + af + bf - 2)
    n_g = jax.ops.segment_sum(w, item_group, num_segments=n_groups)
    t_g = jax.ops.segment_sum(w1_item, item_group, num_segments=n_groups)
    prevalence = (t_g + ap - 1) / (n_g + ap + bp - 2)
    return fpr, tpr, prevalence
