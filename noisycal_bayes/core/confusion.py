"""K classes: confusion matrices, corrected clean-label vectors, top-label and class-wise ECE, and the EM steps
of the K-class (grouped) Dawid-Skene model (DESIGN §8 "K classes").

Notation: ``K`` classes ``0..K-1``, ``J`` annotators, ``n`` items, ``G`` score groups. The channel of annotator
``j`` is a row-stochastic confusion matrix ``C_j`` (K x K), ``C_j[y, a] = P(A_j = a | Y = y)``; the classifier's
class probabilities are ``probs`` (n, K); the clean-label prevalence of group ``g`` is ``pi_g`` (K,).

Corrected vectors. With ``e_a`` the one-hot vector of a label, ``E[e_{A_j} | Y = y] = C_j^T e_y``, so
``T_j(a) = C_j^{-T} e_a`` (row ``a`` of ``C_j^{-1}``) satisfies ``E[T_j(A_j) | Y] = sum_a C_j[Y, a] C_j^{-1}[a, :]
= e_Y``: an unbiased estimate of the clean one-hot label from one response. For K = 2, with ``fpr = C[0, 1]``,
``tpr = C[1, 1]``, ``C^{-1} = [[tpr, -fpr], [-(1 - tpr), 1 - fpr]] / (tpr - fpr)``, so coordinate 1 of
``T(A)`` is the paper's ``(A - fpr) / (tpr - fpr)`` (§3). Responses of one item are combined per coordinate
with weights ``w[j, k]`` (:func:`annotator_weights`, :func:`corrected_targets`); an annotator whose ``C_j`` is
near-singular (:func:`usable_confusions`, the K-class "gap near zero") gets weight 0.

Calibration errors. Top-label ECE: equal-width bins on the confidence ``c_i = max_k p_ik``,
``sum_b (n_b / n) |mean_{i in b} (c_i - t_{i, yhat_i})|`` with ``yhat_i = argmax_k p_ik`` and targets ``t`` (n, K):
one-hot labels give the plain top-label ECE, the vote distribution the top-label SMECE and corrected vectors
the top-label NC-ECE. Class-wise ECE: the binned ECE of ``p_ik`` against ``t_ik`` for each class, averaged.

EM (Dawid & Skene 1979, K classes; the binary case is :mod:`~noisycal_bayes.core.em` and
:mod:`~noisycal_bayes.core.sparse`). Per item (or compressed row) ``r`` in group ``g_r`` with responses ``A_r``:

- ``l_r(y) = log pi_{g_r, y} + sum_{responses (j, a) of r} log C_j[y, a]``; log-likelihood
  ``sum_r c_r logsumexp_y l_r(y)`` and E-step ``T_r = softmax_y l_r(y)`` (``c_r`` the row's count);
  an item with a known clean label (gold) has ``l_r(y) = -inf`` for ``y != gold`` (an observed latent label);
- M-step with Dirichlet pseudo-counts (``alpha - 1``; zero for maximum likelihood):
  ``C_j[y, a] ∝ sum_{responses (r, j, a)} c_r T_r(y) + alpha_C[y, a] - 1`` and
  ``pi_g[y] ∝ sum_{r in g} c_r T_r(y) + alpha_pi[y] - 1``; a row without any (pseudo-)count stays uniform
  (``1 / K``; cf. :func:`~noisycal_bayes.core.sparse.rate_or_half`).

Two forms of the same sums: (group x pattern) counts (``patterns`` (P, J), one label or ``-1`` per annotator,
``K^J`` or ``(K + 1)^J`` possible patterns; ``counts`` (G, P)), for a few annotators who label every item; sparse triples (``item``,
``annotator``, ``label``) with segment sums over items, for crowds, repeats and gold labels.

Every array function here runs in NumPy (float64, nothing to compile) when its inputs are NumPy arrays, and in
``jax.numpy`` when any input is a JAX array or a tracer: then it works under ``jit`` and ``vmap`` (the numbers of
groups, items and annotators static; :func:`annotator_weights` does not warn while traced).
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import _preview
from ..warnings import SmallGapWarning

__all__ = ["BinTable", "ClasswiseECE", "MAX_CONDITION", "PROBS_TOL", "TopLabelECE", "annotator_weights", "classwise_ece",
           "confusion_condition", "corrected_targets", "corrected_vectors", "multiclass_e_step",
           "multiclass_m_step", "multiclass_pattern_loglik", "score_groups", "sparse_multiclass_e_step",
           "sparse_multiclass_m_step", "top_label_ece", "usable_confusions"]

#: Default largest condition number of a usable confusion matrix (:func:`usable_confusions`).
MAX_CONDITION = 100.0
# Probabilities are clipped here inside logarithms (as the binary likelihood clips rates): log 0 -> log 1e-12.
_EPS = 1e-12
# A zero noise variance (a perfect annotator) would give an infinite weight; the same floor as the binary IV rule.
_VARIANCE_FLOOR = 1e-8
# Below this (weighted) count a row of C or a group's prevalence has no data and stays uniform.
_EMPTY = 1e-12
#: Rows of ``probs`` must sum to 1 within this (probabilities stored with 4-5 decimals sum to 1 within ~1e-4).
PROBS_TOL = 1e-3


def _is_traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _xp(*arrays):
    """``jax.numpy`` when any argument is a JAX array (or a tracer under ``jit``/``vmap``), else NumPy: the same
    formulas run eagerly in NumPy (float64, nothing to compile) and traced in JAX."""
    return jnp if any(isinstance(a, jax.Array) for a in arrays) else np


def _segment_sum(xp, data, segment, n: int):
    """Sum of the rows of ``data`` (m, K) per ``segment`` (m,) into (n, K)."""
    if xp is jnp:
        return jax.ops.segment_sum(data, segment, num_segments=n)
    return np.stack([np.bincount(segment, weights=data[:, k], minlength=n) for k in range(data.shape[1])], axis=1)


def _check_confusion(confusion, name: str = "confusion") -> np.ndarray:
    c = np.asarray(confusion, dtype=np.float64)
    if c.ndim == 2:
        c = c[None]
    if c.ndim != 3 or c.shape[1] != c.shape[2] or c.shape[1] < 2:
        raise ValueError(f"`{name}` must have shape (n_annotators, K, K) with K >= 2; got {c.shape}.")
    bad = ~np.isfinite(c) | (c < -1e-9) | (c > 1 + 1e-9)
    if bad.any():
        raise ValueError(f"`{name}` must hold probabilities in [0, 1]; got {_preview(c[bad])} at annotators "
                         f"{_preview(np.unique(np.nonzero(bad)[0]))}.")
    rows = c.sum(axis=2)
    off = np.abs(rows - 1.0) > 1e-6
    if off.any():
        j, y = np.nonzero(off)
        raise ValueError(f"`{name}` rows must sum to 1 (C[j, y, a] = P(A_j = a | Y = y)); rows (annotator, class) "
                         f"{_preview(list(zip(j.tolist(), y.tolist())))} sum to {_preview(np.round(rows[off], 6))}.")
    return c


def _check_probs(probs, name: str = "probs", tol: float = PROBS_TOL) -> np.ndarray:
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"`{name}` must have shape (n_items, K) with K >= 2; got {p.shape}.")
    bad = ~np.isfinite(p) | (p < 0) | (p > 1)
    if bad.any():
        raise ValueError(f"`{name}` must hold probabilities in [0, 1]; got {_preview(p[bad])} at items "
                         f"{_preview(np.unique(np.nonzero(bad)[0]))}.")
    off = np.abs(p.sum(axis=1) - 1.0) > tol
    if off.any():
        raise ValueError(f"`{name}` rows must sum to 1 (within {tol}); items {_preview(np.flatnonzero(off))} sum to "
                         f"{_preview(np.round(p.sum(axis=1)[off], 6))}. Normalise the class probabilities first.")
    return p


def score_groups(probs, *, n_quantiles: int = 2) -> np.ndarray:
    """Score groups for the grouped model: predicted class x top-probability quantile within that class.

    Parameters
    ----------
    probs : array of shape (n_items, K)
        Class probabilities, rows summing to 1.
    n_quantiles : int, default 2
        Quantile groups of the confidence ``max_k p_ik`` among the items predicted as each class.

    Returns
    -------
    ndarray of int32, shape (n_items,)
        ``g_i = yhat_i * n_quantiles + q_i`` in ``0 .. K * n_quantiles - 1``; groups may be empty.

    Notes
    -----
    ``q_i`` counts the within-class quantile edges (``np.quantile`` of the confidences of the items predicted
    as ``yhat_i``, at ``1/Q, ..., (Q-1)/Q``) lying below or at the item's confidence, capped at ``Q - 1``; tied
    confidences share a group.

    Examples
    --------
    >>> score_groups(np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8], [0.3, 0.7]]), n_quantiles=2).tolist()
    [1, 0, 3, 2]
    """
    p = _check_probs(probs)
    q = int(n_quantiles)
    if q < 1:
        raise ValueError(f"`n_quantiles` must be a positive integer; got {n_quantiles!r}.")
    yhat = np.argmax(p, axis=1)
    conf = np.take_along_axis(p, yhat[:, None], axis=1)[:, 0]
    sub = np.zeros(p.shape[0], dtype=np.int64)
    if q > 1:
        # Per predicted class, its items' confidences: np.quantile selects order statistics by partitioning (O(m)),
        # so no sort of all the items is needed (a sort by (class, confidence) took 3x as long at 1e6 items).
        for k in np.flatnonzero(np.bincount(yhat, minlength=p.shape[1])):
            idx = np.flatnonzero(yhat == k)
            run = conf[idx]
            edges = np.quantile(run, np.arange(1, q) / q)
            sub[idx] = np.minimum(np.searchsorted(edges, run, side="right"), q - 1)
    return (yhat * q + sub).astype(np.int32)


def corrected_vectors(confusion):
    """Corrected clean-label vectors ``T[j, a, :] = C_j^{-T} e_a`` (row ``a`` of ``inv(C_j)``).

    Parameters
    ----------
    confusion : array of shape (n_annotators, K, K)
        Row-stochastic, ``C[j, y, a] = P(A_j = a | Y = y)``.

    Returns
    -------
    array of shape (n_annotators, K, K)
        ``E[T[j, A_j, :] | Y] = e_Y`` (module notes). Non-finite rows for a singular ``C_j``: check
        :func:`usable_confusions` first.

    Examples
    --------
    >>> fpr, tpr = 0.1, 0.8
    >>> T = np.asarray(corrected_vectors(np.array([[[1 - fpr, fpr], [1 - tpr, tpr]]])))
    >>> np.allclose(T[0, :, 1], [(0 - fpr) / (tpr - fpr), (1 - fpr) / (tpr - fpr)])
    True
    """
    # E[T[A] | Y = y] = sum_a C[y, a] T[a] = (C T)[y] = e_y needs T = inv(C).
    xp = _xp(confusion)
    return xp.linalg.inv(xp.asarray(confusion))


def confusion_condition(confusion):
    """2-norm condition number of each ``C_j``, shape (n_annotators,) (``inf`` for a singular matrix).

    The corrected vectors :func:`corrected_vectors` scale noise by up to ``||C_j^{-1}||``; the condition number is
    the K-class analogue of ``1 / gap`` (for K = 2 it grows like ``1 / |tpr - fpr|``).
    """
    xp = _xp(confusion)
    s = xp.linalg.svd(xp.asarray(confusion), compute_uv=False)
    smin = s[..., -1]
    return xp.where(smin > 0, s[..., 0] / xp.where(smin > 0, smin, 1.0), xp.inf)


def usable_confusions(confusion, *, max_condition: float = MAX_CONDITION):
    """Annotators whose confusion matrix is invertible enough to correct with, shape (n_annotators,) bool.

    ``True`` where the condition number (:func:`confusion_condition`) is finite and at most ``max_condition``:
    the K-class version of the binary "gap near zero" rule. A spammer (identical rows, labels independent of
    ``Y``) has a singular ``C_j`` and is flagged.

    Examples
    --------
    >>> good = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> spam = np.array([[0.5, 0.5], [0.5, 0.5]])
    >>> np.asarray(usable_confusions(np.stack([good, spam]))).tolist()
    [True, False]
    """
    if not float(max_condition) >= 1.0:
        raise ValueError(f"`max_condition` must be >= 1 (a condition number); got {max_condition!r}.")
    cond = confusion_condition(confusion)
    xp = _xp(cond)
    return xp.isfinite(cond) & (cond <= max_condition)


def annotator_weights(confusion, prevalence_overall, *, rule: str = "iv", usable=None):
    """Per-annotator, per-coordinate weights ``w[j, k]`` for combining corrected vectors, shape (J, K).

    Parameters
    ----------
    confusion : array of shape (..., n_annotators, K, K)
        Leading axes (e.g. posterior draws) are batched over.
    prevalence_overall : array of shape (..., K)
        Clean-label class frequencies ``pi`` (normalised here; clipped at 1e-4 as the binary ``mu``), broadcast
        against the leading axes of ``confusion``.
    rule : {"iv", "equal"}, default "iv"
        ``"iv"``: ``w[j, k] ∝ 1 / v[j, k]`` (Notes); ``"equal"``: ``w[j, k] ∝ 1``.
    usable : bool array of shape (..., n_annotators), optional
        Default :func:`usable_confusions`. Unusable annotators get weight 0.

    Returns
    -------
    array of shape (..., n_annotators, K)
        Each column sums to 1 over the usable annotators (all zero when none is usable).

    Warns
    -----
    SmallGapWarning
        Some annotators are unusable (named); only when ``usable`` is not given (a caller who passes it has
        decided, and says so itself) and not under ``jit``.

    Notes
    -----
    Derivation of the IV weight. Let ``Y ~ pi``, ``A_j | Y ~ C_j[Y, :]`` and ``t_a = T[j, a, k]`` (row ``a`` of
    ``C_j^{-1}``, coordinate ``k``); the marginal label frequencies are ``q_a = sum_y pi_y C_j[y, a]``.

    - ``E[t_A | Y = y] = 1[y = k]`` (unbiasedness), hence ``E[t_A] = pi_k``;
    - ``E[t_A^2] = sum_a q_a t_a^2``, so ``Var(t_A) = sum_a q_a t_a^2 - pi_k^2``;
    - the error ``t_A - 1[Y = k]`` has mean 0 and variance ``v[j, k] = E[t_A^2] - 2 E[t_A 1[Y = k]] + pi_k =
      sum_a q_a t_a^2 - pi_k`` (using ``E[t_A 1[Y = k]] = pi_k E[t_A | Y = k] = pi_k``), and
      ``Var(t_A) = v[j, k] + pi_k (1 - pi_k)`` (the error is uncorrelated with ``1[Y = k]``).

    The responses of one item share its clean label, so the part ``pi_k (1 - pi_k)`` is common to all annotators
    and the errors are independent given ``Y``: the inverse-variance combination weighs by ``1 / v[j, k]``, the
    variance of annotator ``j``'s error (floored at 1e-8). For K = 2 and ``k = 1``, ``v = [pi tpr (1 - tpr) +
    (1 - pi) fpr (1 - fpr)] / (tpr - fpr)^2``, the binary IV variance (:mod:`~noisycal_bayes.core.weights`).

    Examples
    --------
    >>> C = np.array([[[0.9, 0.1], [0.1, 0.9]], [[0.7, 0.3], [0.3, 0.7]]])
    >>> w = np.asarray(annotator_weights(C, np.array([0.5, 0.5])))
    >>> bool(w[0, 1] > w[1, 1]) and np.allclose(w.sum(axis=0), 1)
    True
    """
    if rule not in ("iv", "equal"):
        raise ValueError(f"`rule` must be 'iv' or 'equal'; got {rule!r}.")
    xp = _xp(confusion, prevalence_overall, usable)
    c = xp.asarray(confusion)
    if c.ndim < 3 or c.shape[-1] != c.shape[-2]:
        raise ValueError(f"`confusion` must have shape (..., n_annotators, K, K); got {c.shape}.")
    J, K = c.shape[-3], c.shape[-1]
    pi = xp.asarray(prevalence_overall, dtype=c.dtype)
    if pi.ndim < 1 or pi.shape[-1] != K or pi.ndim > c.ndim - 2:
        raise ValueError(f"`prevalence_overall` must have shape ({K},) (or (..., {K}) with the leading axes of "
                         f"`confusion`); got {pi.shape}.")
    use = usable_confusions(c) if usable is None else xp.asarray(usable, dtype=bool)
    if use.ndim < 1 or use.shape[-1] != J:
        raise ValueError(f"`usable` must have shape ({J},) (or (..., {J})); got {use.shape}.")
    if usable is None and not _is_traced(use) and not bool(np.all(np.asarray(use))):
        bad = np.flatnonzero(~np.all(np.asarray(use).reshape(-1, J), axis=0))
        warnings.warn(f"annotator_weights: annotators {_preview(bad)} have a near-singular confusion matrix "
                      "(usable_confusions False): their corrected labels would explode, so they get weight 0.",
                      SmallGapWarning, stacklevel=2)
    if rule == "equal":
        w = xp.ones(c.shape[:-1], dtype=c.dtype)
    else:
        pi = xp.clip(pi / xp.sum(pi, axis=-1, keepdims=True), 1e-4, 1.0)
        # Unusable matrices are replaced by the identity before inverting: their weight is 0 anyway, and the
        # inverse of a singular matrix would put NaN into the sums below.
        safe = xp.where(use[..., None, None], c, xp.eye(K, dtype=c.dtype))
        T = xp.linalg.inv(safe)
        q = xp.einsum("...y,...jya->...ja", pi, safe)    # marginal label frequencies q[j, a]
        v = xp.einsum("...ja,...jak->...jk", q, T**2) - pi[..., None, :]
        w = 1.0 / xp.maximum(v, _VARIANCE_FLOOR)
    w = xp.where(use[..., None], w, 0.0)
    tot = xp.sum(w, axis=-2, keepdims=True)
    return xp.where(tot > 0, w / xp.where(tot > 0, tot, 1.0), 0.0)


def corrected_targets(responses, n_items: int, confusion, *, weights):
    """Combined corrected clean-label vector per item, shape (n_items, K).

    Parameters
    ----------
    responses : (item, annotator, label) triple of int arrays of shape (n_responses,)
        Labels in ``0..K-1``; repeated (item, annotator) pairs count as separate responses.
    n_items : int
    confusion : array of shape (n_annotators, K, K)
    weights : array of shape (n_annotators, K)
        :func:`annotator_weights` (0 for unusable annotators).

    Returns
    -------
    array of shape (n_items, K)
        ``t[i, k] = sum_r w[j_r, k] T[j_r, a_r, k] / sum_r w[j_r, k]`` over the item's responses; a NaN row for an
        item without a response of positive weight. Each coordinate is unbiased for ``1[Y_i = k]``.

    Examples
    --------
    >>> C = np.array([[[0.9, 0.1], [0.2, 0.8]]] * 2)
    >>> t = np.asarray(corrected_targets((np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([1, 1, 0])), 3, C,
    ...                                   weights=np.full((2, 2), 0.5)))
    >>> [round(float(v), 4) for v in t[0]], bool(np.isnan(t[2]).all())  # (A - fpr) / gap = (1 - 0.1) / 0.7
    ([-0.2857, 1.2857], True)
    """
    xp = _xp(confusion, weights, *responses)
    item, ann, lab = (xp.asarray(x) for x in responses)
    c = xp.asarray(confusion)
    w = xp.asarray(weights, dtype=c.dtype)
    if w.shape != c.shape[:2]:
        raise ValueError(f"`weights` must have shape {tuple(c.shape[:2])} (n_annotators, K); got {w.shape}.")
    K = c.shape[1]
    # Zero-weight (unusable) annotators: replace C by I so that no NaN from a singular inverse enters the sums.
    safe = xp.where(xp.any(w > 0, axis=1)[:, None, None], c, xp.eye(K, dtype=c.dtype))
    T = xp.linalg.inv(safe)
    wr = w[ann]                                           # (n_responses, K)
    num = _segment_sum(xp, xp.where(wr > 0, wr * T[ann, lab], 0.0), item, n_items)
    den = _segment_sum(xp, wr, item, n_items)
    with np.errstate(invalid="ignore", divide="ignore"):
        return xp.where(den > 0, num / xp.where(den > 0, den, 1.0), xp.nan)


class BinTable(NamedTuple):
    """Per-bin summary of a binned ECE: ``count`` (n_bins,), ``mean_probability`` and ``mean_target`` (n_bins,),
    NaN in empty bins (a reliability diagram plots ``mean_target`` against ``mean_probability``)."""

    count: np.ndarray
    mean_probability: np.ndarray
    mean_target: np.ndarray


class TopLabelECE(NamedTuple):
    """Top-label ECE: ``value``, per-bin ``table`` (:class:`BinTable`, on the confidence), bin ``edges`` (n_bins + 1,)
    and ``n_used`` (items with a finite target at their predicted class; the others are left out)."""

    value: float
    table: BinTable
    edges: np.ndarray
    n_used: int


class ClasswiseECE(NamedTuple):
    """Class-wise ECE: ``value`` (mean over classes), ``per_class`` (K,), bin ``edges`` (n_bins + 1,), or (K, n_bins +
    1) when a Binning gives each class its own edges (equal-mass bins)."""

    value: float
    per_class: np.ndarray
    edges: np.ndarray


def _bin_index(x, n_bins: int):
    # Equal-width bins [b/B, (b+1)/B), the last one closed: x = 1 goes to bin B - 1.
    return np.clip(np.floor(x * n_bins).astype(np.int64), 0, n_bins - 1)


def _check_bins(bins):
    """``bins`` as an int >= 1 or a :class:`~noisycal_bayes.data.Binning` (returned as given)."""
    from ..data.binning import Binning

    if isinstance(bins, Binning):
        return bins
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"`bins` must be a positive integer (equal-width bins on [0, 1]) or a Binning; got "
                         f"{bins!r}.")
    return int(bins)


def _edges_index(x, bins):
    """``(edges (n_bins + 1,), bin of each x, n_bins)`` for an int (equal-width) or a Binning (checked)."""
    if isinstance(bins, int):
        return np.linspace(0.0, 1.0, bins + 1), _bin_index(x, bins), bins
    from ..data.binning import bin_index

    edges = bins.edges_for(x)
    return edges, bin_index(x, edges), edges.size - 1


def _check_targets(targets, shape) -> np.ndarray:
    t = np.asarray(targets, dtype=np.float64)
    if t.shape != shape:
        raise ValueError(f"`targets` must have the shape of `probs`, {shape}; got {t.shape}. Pass one-hot labels, "
                         "the vote distribution or corrected_targets(...).")
    return t


def _binned(x, t, bins):
    """``(value, BinTable, edges)`` of the binned ECE of scores ``x`` against targets ``t``."""
    edges, b, n_bins = _edges_index(x, bins)
    count = np.bincount(b, minlength=n_bins).astype(np.float64)
    sx = np.bincount(b, weights=x, minlength=n_bins)
    st = np.bincount(b, weights=t, minlength=n_bins)
    value = float(np.sum(np.abs(sx - st)) / max(x.size, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return value, BinTable(count, np.where(count > 0, sx / count, np.nan),
                               np.where(count > 0, st / count, np.nan)), edges


def top_label_ece(probs, targets, *, bins: int = 15) -> TopLabelECE:
    """Top-label ECE ``sum_b (n_b / n) |mean_{i in b} (c_i - targets[i, yhat_i])|`` on equal-width confidence bins.

    Parameters
    ----------
    probs : array of shape (n_items, K)
    targets : array of shape (n_items, K)
        One-hot labels (plain top-label ECE), the vote distribution (top-label SMECE) or
        :func:`corrected_targets` (top-label NC-ECE). Items whose target at ``yhat_i`` is NaN are left out.
    bins : int or Binning, default 15
        An int ``B``: equal-width bins ``[b/B, (b+1)/B)`` on the confidence ``c_i = max_k p_ik`` (the last bin
        closed); a :class:`~noisycal_bayes.data.Binning` (e.g. equal-mass) is computed on the confidences used.

    Returns
    -------
    TopLabelECE

    Examples
    --------
    >>> p = np.array([[0.8, 0.2], [0.7, 0.3], [0.4, 0.6]])
    >>> round(top_label_ece(p, np.eye(2)[[0, 1, 1]], bins=10).value, 4)
    0.4333
    """
    p = _check_probs(probs)
    n_bins = _check_bins(bins)
    t = _check_targets(targets, p.shape)
    yhat = np.argmax(p, axis=1)
    rows = np.arange(p.shape[0])
    conf, tt = p[rows, yhat], t[rows, yhat]
    ok = np.isfinite(tt)
    value, table, edges = _binned(conf[ok], tt[ok], n_bins)
    return TopLabelECE(value, table, edges, int(ok.sum()))


def classwise_ece(probs, targets, *, bins: int = 15) -> ClasswiseECE:
    """Class-wise ECE: for each class ``k`` the binned ECE of ``p_ik`` against ``targets[i, k]``, and their mean.

    Parameters
    ----------
    probs, targets : arrays of shape (n_items, K)
        As :func:`top_label_ece`; items with a NaN target row are left out.
    bins : int or Binning, default 15
        An int: equal-width bins on ``p_ik`` (the same edges for every class); a
        :class:`~noisycal_bayes.data.Binning` is computed on each class's ``p_ik``.

    Returns
    -------
    ClasswiseECE

    Examples
    --------
    >>> p = np.array([[0.8, 0.2], [0.3, 0.7]])
    >>> r = classwise_ece(p, np.eye(2)[[0, 1]], bins=10)
    >>> round(r.value, 4), np.round(r.per_class, 4).tolist()
    (0.25, [0.25, 0.25])
    """
    p = _check_probs(probs)
    n_bins = _check_bins(bins)
    t = _check_targets(targets, p.shape)
    ok = np.all(np.isfinite(t), axis=1)
    out = [_binned(p[ok, k], t[ok, k], n_bins) for k in range(p.shape[1])]
    per = np.array([o[0] for o in out])
    edges = [o[2] for o in out]
    same = all(e.shape == edges[0].shape and np.array_equal(e, edges[0]) for e in edges)
    return ClasswiseECE(float(per.mean()), per, edges[0] if same else np.stack(edges))


# ---------------------------------------------------------------------------------------------------------------
# EM steps (module notes). Pseudo-counts ``conf_pc`` (K, K) and ``prev_pc`` (K,) are ``alpha - 1`` (zeros: ML).


def _normalise_rows(x, axis=-1):
    """Rows of non-negative counts divided by their sums; a row summing to ~0 becomes uniform (no data)."""
    xp = _xp(x)
    s = xp.sum(x, axis=axis, keepdims=True)
    ok = s > _EMPTY
    return xp.where(ok, xp.clip(x, 0.0, None) / xp.where(ok, s, 1.0), 1.0 / x.shape[axis])


def _log_clip(x):
    # Clip as the binary likelihood does: an exact 0 becomes log 1e-12, not -inf (EM can reach zero cells).
    xp = _xp(x)
    return xp.log(xp.clip(xp.asarray(x), _EPS, 1.0))


def _one_hot(xp, labels, K: int, dtype):
    """``labels[..., None] == arange(K)`` as numbers; a label of -1 gives a zero row."""
    return (labels[..., None] == xp.arange(K)).astype(dtype)


def multiclass_pattern_loglik(patterns, confusion):
    """``L[p, y] = sum_{j observed} log C_j[y, patterns[p, j]]``, shape (P, K); ``-1`` = missing (adds 0).

    A matrix product of the one-hot patterns (P, J x K) with the log confusions (J x K, K): dense work, no gather.
    """
    xp = _xp(patterns, confusion)
    logc = _log_clip(xp.asarray(confusion))                            # (J, K, K)
    onehot = _one_hot(xp, xp.asarray(patterns), logc.shape[1], logc.dtype)   # (P, J, K)
    return xp.einsum("pja,jya->py", onehot, logc)


def _e_from_logs(lp, counts):
    xp = _xp(lp)
    m = xp.max(lp, axis=-1, keepdims=True)
    # logsumexp with the max shifted out; the posterior shares the same exponentials.
    e = xp.exp(lp - m)
    s = xp.sum(e, axis=-1, keepdims=True)
    row = m[..., 0] + xp.log(s[..., 0])
    total = xp.sum(row) if counts is None else xp.sum(counts * row)
    return total, e / s


def multiclass_e_step(patterns, counts, confusion, prevalence):
    """``(loglik, T)`` on (group x pattern) counts: ``sum_{g,p} c_gp log P(pattern_p | g)`` and
    ``T[g, p, y] = P(Y = y | pattern_p, g)``, shape (G, P, K).

    ``patterns`` (P, J) int labels (``-1`` missing), ``counts`` (G, P) items per (group, pattern) cell (zeros
    allowed), ``confusion`` (J, K, K), ``prevalence`` (G, K). Dense: the pattern terms are computed once per
    pattern and broadcast over the groups.
    """
    xp = _xp(patterns, counts, confusion, prevalence)
    pll = multiclass_pattern_loglik(patterns, confusion)                # (P, K)
    m = xp.max(pll, axis=-1, keepdims=True)
    # Exponentiated once per pattern, shifted by the row maximum (values in (0, 1], the largest 1); the groups
    # multiply them by their prevalence: G P K products instead of G P K exponentials. The row sum is at least
    # the clipped prevalence 1e-12 of the maximising class, so its log is finite.
    joint = xp.clip(xp.asarray(prevalence), _EPS, 1.0)[:, None, :] * xp.exp(pll - m)[None, :, :]   # (G, P, K)
    s = xp.sum(joint, axis=-1, keepdims=True)
    return xp.sum(counts * (m[None, :, 0] + xp.log(s[..., 0]))), joint / s


def multiclass_m_step(patterns, counts, posterior, conf_pc=None, prev_pc=None):
    """M-step on (group x pattern) counts: ``(confusion (J, K, K), prevalence (G, K))`` from ``T = posterior``
    (G, P, K); ``conf_pc`` (K, K) and ``prev_pc`` (K,) are Dirichlet pseudo-counts ``alpha - 1`` (None: maximum
    likelihood)."""
    xp = _xp(patterns, counts, posterior)
    K = posterior.shape[-1]
    w = counts[..., None] * posterior                                 # (G, P, K)
    onehot = _one_hot(xp, xp.asarray(patterns), K, w.dtype)          # (P, J, K)
    n = xp.einsum("py,pja->jya", xp.sum(w, axis=0), onehot)
    if conf_pc is not None:
        n = n + conf_pc
    t_g = xp.sum(w, axis=1)
    if prev_pc is not None:
        t_g = t_g + prev_pc
    return _normalise_rows(n), _normalise_rows(t_g)


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
