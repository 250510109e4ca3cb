"""The (grouped) Dawid-Skene likelihood and EM step on sparse responses: segment sums over (item, annotator, label)
triples, never a dense items x annotators array (the path of real crowds).

Binary: ``a_i = log(1 - pi_{g_i}) + l0_i``, ``b_i = log pi_{g_i} + l1_i``; log-likelihood
``sum_i w_i logsumexp(a_i, b_i)``, E-step ``T_i = sigmoid(b_i - a_i)``, M-step with Beta pseudo-counts; K classes:
``l_i(y) = log pi_{g_i, y} + sum_{r: i_r = i} log C_{j_r}[y, A_r]`` with Dirichlet pseudo-counts. Gold items are
observed latent labels. All functions work under ``jax.jit`` and ``jax.vmap``. Details: docs/foundations.md,
*noisycal_bayes.core.sparse*.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .likelihood import _EPS, _log_clip, _segment_sum, _xp  # _EPS: rates are clipped as in the likelihood
from .tables import Responses

__all__ = ["CodedResponses", "SparseTotals", "batched_e_step", "batched_m_step", "channel_tables", "class_codes",
           "code_sums", "coded_class_counts", "coded_class_e_step", "coded_class_marginal_loglik", "coded_class_m_step", "coded_e_step", "coded_m_step", "coded_responses", "materialise", "padded_codes", "rate_or_half",
           "response_codes", "response_loglik", "sparse_e_step", "sparse_item_loglik", "sparse_m_step",
           "sparse_multiclass_e_step", "sparse_multiclass_m_step", "sparse_totals"]


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


#: Below this (weighted) count a rate has no data: the M-step leaves it at 1/2 (see :func:`rate_or_half`).
EMPTY_COUNT = 1e-12


def rate_or_half(num, den):
    """``num / den`` clipped into [0, 1]; 1/2 where ``den <= EMPTY_COUNT``.

    An annotator all of whose items have posterior 1 (or 0) has no soft count for its fpr (or tpr): any value
    maximises the likelihood, and ``0 / 0`` would stop EM with non-finite parameters (seen on sparse crowds
    with annotators who gave one or two labels). 1/2 is the uninformative value; rounding can also push
    ``num`` a hair outside ``[0, den]``, hence the clip.
    """
    ok = den > EMPTY_COUNT
    return jnp.where(ok, jnp.clip(num / jnp.where(ok, den, 1.0), 0.0, 1.0), 0.5)


def _normalise_rows(x, axis=-1):
    """Rows of non-negative counts divided by their sums; a row summing to ~0 becomes uniform (no data)."""
    xp = _xp(x)
    s = xp.sum(x, axis=axis, keepdims=True)
    ok = s > EMPTY_COUNT
    return xp.where(ok, xp.clip(x, 0.0, None) / xp.where(ok, s, 1.0), 1.0 / x.shape[axis])


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

    tpr = rate_or_half(per_annotator(w1 * a) + at - 1, per_annotator(w1) + at + bt - 2)
    fpr = rate_or_half(per_annotator(w0 * a) + af - 1, per_annotator(w0) + af + bf - 2)
    n_g = jax.ops.segment_sum(w, item_group, num_segments=n_groups)
    t_g = jax.ops.segment_sum(w1_item, item_group, num_segments=n_groups)
    prevalence = rate_or_half(t_g + ap - 1, n_g + ap + bp - 2)
    return fpr, tpr, prevalence


# ---------------------------------------------------------------------------------------------------------------
# Many starts (or bootstrap replicates) at once: parameters with a trailing batch axis, fewest segment sums.
# (Design notes: docs/foundations.md, *noisycal_bayes.core.sparse*.)


class SparseTotals(NamedTuple):
    """What :func:`batched_e_step` / :func:`batched_m_step` need besides the responses, fixed during a loop.

    Shapes (``B`` the batch size; a trailing axis of length 1 broadcasts over the batch):
    ``item_weight`` (n_items, B); ``c1`` and ``n_labels`` (n_annotators, B), the weighted counts of each
    annotator's labels equal to 1 and of all its labels; ``n_group`` (n_groups, B), the weighted items per group.
    """

    item_weight: object
    c1: object
    n_labels: object
    n_group: object


def sparse_totals(responses: Responses, item_group, n_groups: int, n_annotators: int, item_weight=None):
    """The fixed sums of a batched EM loop (:class:`SparseTotals`); ``item_weight`` (n_items, B) or None (all 1)."""
    item, ann, lab = responses
    n_items = item_group.shape[0]
    w = jnp.ones((n_items, 1)) if item_weight is None else jnp.asarray(item_weight)
    wr = w[item]
    a = lab.astype(wr.dtype)[:, None]
    c1 = jax.ops.segment_sum(wr * a, ann, num_segments=n_annotators)
    n_lab = jax.ops.segment_sum(wr, ann, num_segments=n_annotators)
    n_g = jax.ops.segment_sum(w, item_group, num_segments=n_groups)
    return SparseTotals(w, c1, n_lab, n_g)


def _item_terms(x, gold):
    """Per-item log(1 + e^x) and posterior sigmoid(x) from the log-odds ``x`` (n_items, S).

    Gold items (``gold`` (n_items,) in {-1, 0, 1}, or None) have a known label: the term is x (label 1) or 0
    (label 0), the posterior 1 or 0."""
    h = jax.nn.softplus(x)
    post = jax.nn.sigmoid(x)
    if gold is not None:
        g = gold[:, None]
        h = jnp.where(g == 1, x, jnp.where(g == 0, 0.0, h))
        post = jnp.where(g == 1, 1.0, jnp.where(g == 0, 0.0, post))
    return h, post


def batched_e_step(responses: Responses, item_group, totals: SparseTotals, fpr, tpr, prevalence, gold=None):
    """``(loglik (B,), T (n_items, B))`` for a batch of parameters ``fpr, tpr`` (J, B), ``prevalence`` (G, B).

    The same numbers as :func:`sparse_e_step` column by column, from one per-item segment sum (docs/foundations.md):
    ``loglik = sum_i w_i [log(1 - pi_{g_i}) + h_i] + sum_j [c1_j log fpr_j + c0_j log(1 - fpr_j)]`` with
    ``h_i = softplus(x_i)`` (``x_i`` for gold 1, 0 for gold 0) and ``T_i = sigmoid(x_i)`` (or the gold label).
    """
    item, ann, lab = responses
    f = jnp.clip(fpr, _EPS, 1 - _EPS)
    t = jnp.clip(tpr, _EPS, 1 - _EPS)
    p = jnp.clip(prevalence, _EPS, 1 - _EPS)
    log_f, log_1f = jnp.log(f), jnp.log1p(-f)
    w1 = jnp.log(t) - log_f            # log-ratio of a label 1, per annotator (J, B)
    w0 = jnp.log1p(-t) - log_1f        # of a label 0
    ratio = jnp.where((lab == 1)[:, None], w1[ann], w0[ann])
    # Responses are sorted by item (Responses' contract): the sorted scatter is the cheaper one.
    x = (jax.ops.segment_sum(ratio, item, num_segments=item_group.shape[0], indices_are_sorted=True)
         + (jnp.log(p) - jnp.log1p(-p))[item_group])
    h, post = _item_terms(x, gold)
    c0 = totals.n_labels - totals.c1
    loglik = (jnp.sum(totals.item_weight * (jnp.log1p(-p)[item_group] + h), axis=0)
              + jnp.sum(totals.c1 * log_f + c0 * log_1f, axis=0))
    return loglik, post


def _batched_rates(s1, n1, wt, item_group, totals: SparseTotals, prior):
    """The M-step's rates from the per-annotator sums ``s1 = sum_{r in j} w T A`` and ``n1 = sum_{r in j} w T``
    (J, B) and the item terms ``wt = w T`` (n_items, B): the fpr sums are the fixed totals minus these (module
    notes); shared by :func:`batched_m_step` and :func:`coded_m_step`."""
    (af, bf), (at, bt), (ap, bp) = ((1.0, 1.0),) * 3 if prior is None else prior
    tpr = rate_or_half(s1 + at - 1, n1 + at + bt - 2)
    fpr = rate_or_half(totals.c1 - s1 + af - 1, totals.n_labels - n1 + af + bf - 2)
    t_g = jax.ops.segment_sum(wt, item_group, num_segments=totals.n_group.shape[0])
    prevalence = rate_or_half(t_g + ap - 1, totals.n_group + ap + bp - 2)
    return fpr, tpr, prevalence


def batched_m_step(responses: Responses, item_group, totals: SparseTotals, n_annotators: int, posterior, prior=None):
    """M-step for a batch: ``(fpr (J, B), tpr (J, B), prevalence (G, B))`` from ``T = posterior`` (n_items, B);
    the formulas of :func:`sparse_m_step`, with the fpr sums as the fixed totals minus the tpr sums."""
    item, ann, lab = responses
    wt = totals.item_weight * posterior
    wtr = wt[item]
    a = lab.astype(wtr.dtype)[:, None]
    both = jax.ops.segment_sum(jnp.concatenate([wtr * a, wtr], axis=1), ann, num_segments=n_annotators)
    s1, n1 = jnp.split(both, 2, axis=1)
    return _batched_rates(s1, n1, wt, item_group, totals, prior)


# ---------------------------------------------------------------------------------------------------------------
# The EM loop's steps: one gather and one segment sum of each kind per iteration, from response codes.
# (Design notes: docs/foundations.md, *noisycal_bayes.core.sparse*.)


class CodedResponses(NamedTuple):
    """Responses laid out for :func:`coded_e_step` / :func:`coded_m_step` (:func:`coded_responses`).

    ``item`` (n_responses,) sorted (the :class:`Responses` contract), ``code`` (n_responses,) int32
    ``2 * annotator + label``, ``padded`` None or (n_items, L) int32 codes per item with pad code ``2 J``.
    """

    item: object
    code: object
    padded: object


def coded_responses(responses: Responses, padded=None) -> CodedResponses:
    """:class:`CodedResponses` of ``responses`` (works under ``jax.jit``); ``padded`` from :func:`padded_codes`
    (with ``n_codes = 2 J``) or None."""
    item, ann, lab = responses
    return CodedResponses(jnp.asarray(item, jnp.int32), response_codes(ann, lab), padded)


def materialise(table):
    """``table`` itself, computed once into a buffer before it is gathered from.

    XLA on CPU fuses an elementwise producer into a gather that reads it, so a table of logarithms gathered once per
    response would be re-evaluated once per response (docs/performance.md, *Implementation choices*). A scatter is
    never fused into its consumer: adding the table into zeros at its own indices costs one pass over the (small)
    table and forces the buffer.
    """
    flat = table.reshape(-1)
    return jnp.zeros_like(flat).at[jnp.arange(flat.size)].add(flat).reshape(table.shape)


def _item_sums(table, coded, n_items: int):
    """Per item, the sum of the table rows of its coded responses, shape (n_items, B): from the padded
    (item, slot) code matrix when there is one, else a sorted segment sum over the responses."""
    if coded.padded is not None:
        return _take_rows(table, coded.padded).sum(axis=1)
    return jax.ops.segment_sum(_take_rows(table, coded.code), coded.item, num_segments=n_items,
                               indices_are_sorted=True)


def _take_rows(table, index):
    """``table[index]`` for ``table`` (M, B) and integer ``index`` of any shape: shape ``index.shape + (B,)``."""
    b = table.shape[1]
    if b == 1:
        return jnp.take(table[:, 0], index, mode="clip")[..., None]
    flat = index[..., None] * b + jnp.arange(b, dtype=index.dtype)
    return jnp.take(table.reshape(-1), flat, mode="clip")


def coded_e_step(coded: CodedResponses, item_group, totals: SparseTotals, fpr, tpr, prevalence, gold=None):
    """:func:`batched_e_step` from response codes (docs/foundations.md): ``(loglik (B,), T (n_items, B))``."""
    f = jnp.clip(fpr, _EPS, 1 - _EPS)
    t = jnp.clip(tpr, _EPS, 1 - _EPS)
    p = jnp.clip(prevalence, _EPS, 1 - _EPS)
    log_f, log_1f = jnp.log(f), jnp.log1p(-f)
    n_ann, b = f.shape
    # Interleaved per-code log-ratios [label 0, label 1] per annotator, plus a 0 row for the pad code.
    table = jnp.concatenate([jnp.stack([jnp.log1p(-t) - log_1f, jnp.log(t) - log_f], axis=1).reshape(2 * n_ann, b),
                             jnp.zeros((1, b), f.dtype)])
    # Both gathered tables (log-ratios per code, prior log-odds per group) forced into one buffer by one scatter
    # (materialise: each scatter costs about a second of XLA compilation on CPU).
    logit_p = jnp.log(p) - jnp.log1p(-p)
    both = materialise(jnp.concatenate([table, logit_p]))
    table, logit_p = both[:table.shape[0]], both[table.shape[0]:]
    n_items = item_group.shape[0]
    x = _item_sums(table, coded, n_items)
    x = x + _take_rows(logit_p, item_group)
    h, post = _item_terms(x, gold)
    c0 = totals.n_labels - totals.c1
    # sum_i w_i log(1 - pi_{g_i}) = sum_g (weighted items in g) log(1 - pi_g): no per-item gather needed.
    loglik = (jnp.sum(totals.item_weight * h, axis=0) + jnp.sum(totals.n_group * jnp.log1p(-p), axis=0)
              + jnp.sum(totals.c1 * log_f + c0 * log_1f, axis=0))
    return loglik, post


def coded_m_step(coded: CodedResponses, item_group, totals: SparseTotals, n_annotators: int, posterior, prior=None):
    """:func:`batched_m_step` from response codes: ``(fpr (J, B), tpr (J, B), prevalence (G, B))``."""
    wt = totals.item_weight * posterior
    n_codes = 2 * n_annotators + 1  # the last bin collects the pad slots and is dropped
    if coded.padded is not None:
        vals = jnp.broadcast_to(wt[:, None, :], coded.padded.shape + wt.shape[1:]).reshape(-1, wt.shape[1])
        sums = jax.ops.segment_sum(vals, coded.padded.reshape(-1), num_segments=n_codes)
    else:
        sums = jax.ops.segment_sum(_take_rows(wt, coded.item), coded.code, num_segments=n_codes)
    pairs = sums[:-1].reshape(n_annotators, 2, -1)
    s1, n1 = pairs[:, 1], pairs[:, 0] + pairs[:, 1]
    return _batched_rates(s1, n1, wt, item_group, totals, prior)


# ---------------------------------------------------------------------------------------------------------------
# The sampler's likelihood: one gather per response (and one scatter in the gradient), from logit rates.
# (Design notes: docs/foundations.md, *noisycal_bayes.core.sparse*.)


def response_codes(annotator, label):
    """``2 * annotator + label`` (int32, shape (n_responses,)): the row of a response in :func:`channel_tables`."""
    return (2 * jnp.asarray(annotator, jnp.int32) + jnp.asarray(label, jnp.int32)).astype(jnp.int32)


def padded_codes(item, code, n_items: int, n_codes: int, *, max_fill: float = 2.0):
    """Codes laid out per item: int32 array of shape (n_items, L), ``L`` the most responses of any item, unused
    slots holding ``n_codes`` (a code whose table entry is 0); None when that array would exceed ``max_fill``
    times the responses (a few items with very many labels: the segment sum is then cheaper). NumPy; ``item``
    sorted (the :class:`Responses` contract)."""
    import numpy as np

    item, code = np.asarray(item), np.asarray(code)
    counts = np.bincount(item, minlength=n_items)
    width = int(counts.max()) if counts.size else 0
    if n_items * max(width, 1) > max_fill * max(item.size, 1):
        return None
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(item.size) - first[item]
    out = np.full((n_items, max(width, 1)), n_codes, np.int32)
    out[item, slot] = code
    return out


def channel_tables(logit_fpr, logit_tpr):
    """``(L0, W)``, each of shape (2 J,): per code ``k = 2 j + a``, ``L0[k] = log P(A = a | Y = 0)`` and
    ``W[k] = log P(A = a | Y = 1) - L0[k]``, from the rates' logits (``log_sigmoid``: exact in the tails, no
    clipping)."""
    def per_code(x):  # [log(1 - r_j), log r_j] interleaved
        return jnp.stack([jax.nn.log_sigmoid(-x), jax.nn.log_sigmoid(x)], axis=-1).reshape(-1)

    l0 = per_code(logit_fpr)
    return l0, per_code(logit_tpr) - l0


def code_sums(table, code, item, n_items: int, padded=None):
    """``sum_{r: i_r = i} table[k_r]`` per item, shape (n_items,): from the padded layout (:func:`padded_codes`)
    when given, else a sorted segment sum over the responses (``item`` sorted, the :class:`Responses` contract)."""
    table = materialise(table)  # log-sigmoids once per code, not once per response (see :func:`materialise`)
    if padded is not None:
        # The pad code indexes an appended 0: unused slots add nothing.
        return jnp.concatenate([table, jnp.zeros(1, table.dtype)])[padded].sum(axis=1)
    return jax.ops.segment_sum(table[code], item, num_segments=n_items, indices_are_sorted=True)


# ---------------------------------------------------------------------------------------------------------------
# K classes (docs/foundations.md). Pseudo-counts ``conf_pc`` (K, K) and ``prev_pc`` (K,) are ``alpha - 1`` (None: ML).


def _e_from_logs(lp, counts):
    xp = _xp(lp)
    m = xp.max(lp, axis=-1, keepdims=True)
    # logsumexp with the max shifted out; the posterior shares the same exponentials.
    e = xp.exp(lp - m)
    s = xp.sum(e, axis=-1, keepdims=True)
    row = m[..., 0] + xp.log(s[..., 0])
    total = xp.sum(row) if counts is None else xp.sum(counts * row)
    return total, e / s


def _sparse_item_logs(item, annotator, label, item_group, n_items, confusion, prevalence, gold):
    xp = _xp(item, confusion, prevalence)
    logc = _log_clip(xp.asarray(confusion))
    lr = logc[annotator, :, label]                                   # (n_responses, K): log C_j[y, a_r]
    lp = _segment_sum(xp, lr, item, n_items) + _log_clip(prevalence)[item_group]
    if gold is not None:
        K = lp.shape[1]
        keep = (gold[:, None] < 0) | (gold[:, None] == xp.arange(K)[None, :])
        lp = xp.where(keep, lp, -xp.inf)
    return lp


def sparse_multiclass_e_step(responses, item_group, confusion, prevalence, gold=None, item_weight=None):
    """``(loglik, T)`` on sparse triples: ``sum_i w_i log P(A_i)`` and ``T[i, y] = P(Y_i = y | A_i)`` (n_items, K).

    ``responses`` = (item, annotator, label); ``item_group`` (n_items,); ``gold`` (n_items,) the known clean label
    or ``-1`` (gold items contribute ``log P(Y_i = gold_i, A_i)`` and ``T_i = e_{gold_i}``); ``item_weight``
    (n_items,) weights each item's term (a padded item has weight 0).
    """
    item, annotator, label = responses
    lp = _sparse_item_logs(item, annotator, label, item_group, item_group.shape[0], confusion, prevalence, gold)
    return _e_from_logs(lp, item_weight)


def sparse_multiclass_m_step(responses, item_group, n_groups: int, n_annotators: int, posterior, conf_pc=None,
                             prev_pc=None, item_weight=None):
    """M-step on sparse triples: ``(confusion (J, K, K), prevalence (G, K))`` from ``T = posterior`` (n_items, K)."""
    item, annotator, label = responses
    xp = _xp(item, posterior)
    K = posterior.shape[1]
    w = posterior if item_weight is None else item_weight[:, None] * posterior
    # One segment sum over (annotator, label) keys of the responses' posteriors: N[j, a, y].
    n = _segment_sum(xp, w[item], annotator * K + label, n_annotators * K)
    n = xp.swapaxes(n.reshape(n_annotators, K, K), 1, 2)
    if conf_pc is not None:
        n = n + conf_pc
    t_g = _segment_sum(xp, w, item_group, n_groups)
    if prev_pc is not None:
        t_g = t_g + prev_pc
    return _normalise_rows(n), _normalise_rows(t_g)


# ---------------------------------------------------------------------------------------------------------------
# The K-class EM loop's steps, for a batch of S starts at once (the starts a trailing axis, as in coded_e_step).
# (Design notes: docs/foundations.md, *noisycal_bayes.core.sparse*.)


def class_codes(annotator, label, n_classes: int):
    """``K * annotator + label`` (int32): the row of a K-class response in :func:`coded_class_e_step`'s table."""
    return (n_classes * jnp.asarray(annotator, jnp.int32) + jnp.asarray(label, jnp.int32)).astype(jnp.int32)


def coded_class_e_step(coded: CodedResponses, item_group, confusion, prevalence, gold=None, item_weight=None):
    """``(loglik (S,), T (n_items, K, S))`` for S starts: ``confusion`` (S, J, K, K), ``prevalence`` (S, G, K).

    ``coded`` from :func:`coded_responses` with :func:`class_codes` (pad code ``J K``); the rest as in
    :func:`sparse_multiclass_e_step`, whose numbers this returns start by start (to rounding).
    """
    lp = coded_class_log_joint(coded, item_group, _log_clip(confusion), _log_clip(prevalence), gold)
    one = lp.shape[2] == 1   # one start (the sparse path's vote start, the pooled EM): the same numbers without
    if one:                  # the trailing axis, whose (n, K, 1) reductions XLA runs about 1.4x slower on CPU
        lp = lp[:, :, 0]
    m = jnp.max(lp, axis=1, keepdims=True)
    # logsumexp over the classes with the max shifted out; the posterior shares the same exponentials.
    e = jnp.exp(lp - m)
    s = jnp.sum(e, axis=1, keepdims=True)
    row = m[:, 0] + jnp.log(s[:, 0])                                      # (n_items, S) or (n_items,)
    w = None if item_weight is None else (item_weight if one else item_weight[:, None])
    total = jnp.sum(row, axis=0) if w is None else jnp.sum(w * row, axis=0)
    return (total[None], (e / s)[:, :, None]) if one else (total, e / s)


def coded_class_log_joint(coded: CodedResponses, item_group, log_confusion, log_prevalence, gold=None):
    """``log P(Y_i = y, A_i)`` for S parameter sets, shape (n_items, K, S) (``-inf`` off a gold label), from the logs
    ``log_confusion`` (S, J, K, K) and ``log_prevalence`` (S, G, K): the E-step's log-joint (docs/foundations.md), also
    the likelihood of the K-class sampler on responses (:func:`noisycal_bayes.models.ibcc.ibcc_multiclass`)."""
    S, J, K, _ = log_confusion.shape
    table = jnp.transpose(log_confusion, (1, 3, 2, 0)).reshape(J * K, K * S)       # row (j, a), column (y, s)
    logp = jnp.transpose(log_prevalence, (1, 2, 0)).reshape(-1, K * S)             # (G, K S)
    # Both tables computed once into one buffer before the gathers (XLA would otherwise fuse the logs into them and
    # evaluate them once per response); an optimisation barrier does it without materialise's scatter, whose cost
    # grows with the table (J K x K S: more than the responses' gathers on a crowd of many annotators, e.g. cf).
    both = jax.lax.optimization_barrier(jnp.concatenate([table, jnp.zeros((1, K * S), table.dtype), logp]))
    table, logp = both[:J * K + 1], both[J * K + 1:]
    n_items = item_group.shape[0]
    x = _item_sums(table, coded, n_items)
    lp = (x + _take_rows(logp, item_group)).reshape(n_items, K, S)
    if gold is not None:
        keep = (gold[:, None] < 0) | (gold[:, None] == jnp.arange(K)[None, :])
        lp = jnp.where(keep[:, :, None], lp, -jnp.inf)
    return lp


def coded_class_marginal_loglik(coded: CodedResponses, item_group, log_confusion, log_prevalence, gold, item_weight,
                                by_code):
    """``sum_i w_i log sum_y P(Y_i = y, A_i)`` for one parameter set (``log_confusion`` (J, K, K), ``log_prevalence``
    (G, K)): the K-class samplers' likelihood on responses, with its gradient written out.

    The gradient of the log marginal likelihood is the E-step's expected counts (Fisher's identity):
    ``d/d log C[j, y, a] = sum_{r: j_r = j, A_r = a} w T_{i_r}(y)`` and ``d/d log pi[g, y] = sum_{i in g} w T_i(y)``
    with ``T`` the clean-label posteriors, computed by :func:`coded_class_counts` (a scatter on responses sorted by
    code, ``by_code``), where reverse-mode differentiation of the gathers would scatter in response order.
    ``item_group``, ``gold``, ``item_weight`` and the codes are data (no gradient)."""
    return _marginal_loglik(log_confusion, log_prevalence, coded, item_group, gold, item_weight, by_code)


@jax.custom_vjp
def _marginal_loglik(log_confusion, log_prevalence, coded, item_group, gold, item_weight, by_code):
    return _marginal_loglik_fwd(log_confusion, log_prevalence, coded, item_group, gold, item_weight, by_code)[0]


def _marginal_loglik_fwd(log_confusion, log_prevalence, coded, item_group, gold, item_weight, by_code):
    lp = coded_class_log_joint(coded, item_group, log_confusion[None], log_prevalence[None], gold)[:, :, 0]
    ll = jax.nn.logsumexp(lp, axis=1)
    post = jnp.exp(lp - ll[:, None])
    return jnp.sum(item_weight * ll), (post, log_confusion, log_prevalence, coded, item_group, item_weight, by_code)


def _marginal_loglik_bwd(res, g):
    post, log_confusion, log_prevalence, coded, item_group, item_weight, by_code = res
    counts, wt = coded_class_counts(coded, log_confusion.shape[0], post[:, :, None], item_weight, by_code)
    d_prev = jax.ops.segment_sum(wt, item_group, num_segments=log_prevalence.shape[0])
    return g * counts[0], g * d_prev, None, None, None, None, None


_marginal_loglik.defvjp(_marginal_loglik_fwd, _marginal_loglik_bwd)


def coded_class_counts(coded: CodedResponses, n_annotators: int, posterior, item_weight=None, by_code=None):
    """Expected counts for S starts from ``T = posterior`` (n_items, K, S): ``N[s, j, y, a] = sum_{r: j_r = j, A_r = a}
    w T_{i_r}(y)`` (S, J, K, K) and the weighted posteriors ``w T`` (n_items, K S) (one scatter; docs/foundations.md).
    ``by_code``: ``(item, code)`` of the responses sorted by code, or None; the scatter then takes sorted indices
    and skips the padded layout's pad slots (measured 4x faster on cf's shape, the same on adult's)."""
    n_items, K, S = posterior.shape
    J = n_annotators
    wt = (posterior if item_weight is None else item_weight[:, None, None] * posterior).reshape(n_items, K * S)
    n_codes = J * K + 1   # the last bin collects the pad slots and is dropped
    if by_code is not None:
        sums = jax.ops.segment_sum(_take_rows(wt, by_code[0]), by_code[1], num_segments=n_codes,
                                   indices_are_sorted=True)
    elif coded.padded is not None:
        vals = jnp.broadcast_to(wt[:, None, :], coded.padded.shape + (K * S,)).reshape(-1, K * S)
        sums = jax.ops.segment_sum(vals, coded.padded.reshape(-1), num_segments=n_codes)
    else:
        sums = jax.ops.segment_sum(_take_rows(wt, coded.item), coded.code, num_segments=n_codes)
    return jnp.transpose(sums[:-1].reshape(J, K, K, S), (3, 0, 2, 1)), wt   # (j, a, y, s) -> (s, j, y, a)


def coded_class_m_step(coded: CodedResponses, item_group, n_groups: int, n_annotators: int, posterior, conf_pc=None,
                       prev_pc=None, item_weight=None, by_code=None):
    """M-step for S starts from ``T = posterior`` (n_items, K, S): ``(confusion (S, J, K, K), prevalence (S, G, K))``,
    the numbers of :func:`sparse_multiclass_m_step` start by start (to rounding)."""
    n_items, K, S = posterior.shape
    n, wt = coded_class_counts(coded, n_annotators, posterior, item_weight, by_code)
    if conf_pc is not None:
        n = n + conf_pc
    t_g = jnp.transpose(jax.ops.segment_sum(wt, item_group, num_segments=n_groups).reshape(n_groups, K, S), (2, 0, 1))
    if prev_pc is not None:
        t_g = t_g + prev_pc
    return _normalise_rows(n), _normalise_rows(t_g)
