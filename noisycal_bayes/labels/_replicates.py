"""Replicate draws shared by corrected accuracy and model comparison.

Each replicate ``r`` pairs one channel draw ``s_r`` (the point estimate for EM / MAP fits) with, when
asked, Bayesian-bootstrap weights of the items (Dirichlet(1, ..., 1), Rubin 1981). Items that share a
*cell* (the same posterior row and the same predictions) are exchangeable, so their draws aggregate
exactly: the number of clean positives in a cell of ``n_c`` items is ``Binomial(n_c, p_c)`` given the
channel draw, and the summed Dirichlet weight of ``k`` items is ``Gamma(k, 1)`` up to the common
normaliser. Cost ``O(R x n_cells)`` instead of ``O(R x n_items)``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..core import item_corrected_label, rule_weights, x64
from ..core.weights import WEIGHT_RULES
from ..data import compress_patterns
from ._posterior import RowPosteriors

# Work in blocks of at most this many (replicate x cell) values.
_BLOCK_VALUES = 2_000_000


def check_weights(weights, n_annotators: int):
    if isinstance(weights, str):
        if weights not in WEIGHT_RULES:
            raise ValueError(f"`weights` must be one of {WEIGHT_RULES} or an array of shape ({n_annotators},); got "
                             f"{weights!r}.")
        return weights
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n_annotators,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"explicit `weights` must be {n_annotators} finite non-negative numbers, not all zero; got "
                         f"{np.asarray(weights).tolist()}.")
    return w / w.sum()


def draw_index(n_samples: int, n_replicates: int) -> np.ndarray:
    """Channel draw of each replicate: evenly spaced draws, cycling when there are fewer draws than replicates."""
    if n_samples >= n_replicates:
        return np.linspace(0, n_samples - 1, n_replicates).round().astype(np.int64)
    return np.arange(n_replicates) % n_samples


def _cells(row_of_item: np.ndarray, yhat: np.ndarray):
    """Distinct (row, prediction pattern) cells: row (C,), predictions (C, M), counts (C,)."""
    m = yhat.shape[1]
    code = (yhat.astype(np.int64) << np.arange(m, dtype=np.int64)).sum(axis=1)
    key = row_of_item.astype(np.int64) * (1 << m) + code
    _, first, counts = np.unique(key, return_index=True, return_counts=True)
    return row_of_item[first], yhat[first].astype(bool), counts.astype(np.int64)


def posterior_mean_accuracy(rp: RowPosteriors, yhat: np.ndarray) -> np.ndarray:
    """``mean_s (1/n) sum_i P(Y_i = yhat_im | A_i, c_i, theta_s)`` per model, shape (M,)."""
    row, pred, n_c = _cells(rp.inverse, yhat)
    p = rp.p[:, row]                                           # (S, C)
    correct = np.where(pred[None], p[..., None], 1 - p[..., None])  # (S, C, M)
    return np.einsum("scm,c->m", correct, n_c) / (rp.p.shape[0] * n_c.sum())


def accuracy_replicates(rp: RowPosteriors, yhat: np.ndarray, n_replicates: int, bootstrap: bool,
                        rng: np.random.Generator) -> np.ndarray:
    """Replicates of each model's accuracy on the clean labels, shape (R, M).

    Without bootstrap: ``(1/n) sum_i 1[Y_i^(r) = yhat_im]`` with latent labels drawn from their posterior
    (the *sample* target: these items' clean labels). With bootstrap: the same labels weighted by
    Dirichlet(1) item weights (the *population* target).
    """
    row, pred, n_c = _cells(rp.inverse, yhat)
    s_idx = draw_index(rp.n_samples, n_replicates)
    out = np.empty((n_replicates, yhat.shape[1]))
    block = max(1, _BLOCK_VALUES // max(1, row.size))
    for start in range(0, n_replicates, block):
        s = s_idx[start:start + block]
        p = rp.p[s][:, row]                                    # (B, C)
        k = rng.binomial(n_c[None], p)                         # clean positives per cell
        if bootstrap:
            g1 = rng.standard_gamma(k.astype(np.float64))      # Gamma(0) = 0: an empty part weighs nothing
            g0 = rng.standard_gamma((n_c[None] - k).astype(np.float64))
            total = (g1 + g0).sum(axis=1)
            out[start:start + s.size] = np.einsum("bcm,b->bm", np.where(pred[None], g1[..., None], g0[..., None]),
                                                  1.0 / total)
        else:
            correct = np.where(pred[None], k[..., None], (n_c[None] - k)[..., None])
            out[start:start + s.size] = correct.sum(axis=1) / n_c.sum()
    return out


class CorrectedLabels:
    """Combined corrected labels ``Ytilde = sum_j W_ij (A_ij - fpr_j) / gap_j`` per response pattern and draw.

    ``values`` (S, P) for the distinct response patterns of ``labels``; ``inverse`` (n_items,).
    """

    def __init__(self, labels: np.ndarray, fpr: np.ndarray, tpr: np.ndarray, weights):
        pc = compress_patterns(labels)
        self.inverse = np.asarray(pc.inverse)
        self.counts = np.asarray(pc.counts)
        n = labels.shape[0]
        with x64():
            pat = jnp.asarray(pc.patterns, dtype=jnp.int32)
            cnt = jnp.asarray(pc.counts)

            def one(f, t):
                gap = t - f
                if isinstance(weights, str):
                    # IV needs mu: the equally weighted mean corrected label over the items (DESIGN §3).
                    mu = jnp.sum(cnt * item_corrected_label(pat, f, gap, jnp.ones_like(gap))) / n
                    w = rule_weights(weights, f, gap, mu)
                else:
                    w = jnp.asarray(weights)
                return item_corrected_label(pat, f, gap, w)

            self.values = np.asarray(jax.jit(jax.vmap(one))(jnp.asarray(fpr), jnp.asarray(tpr)))


def moment_accuracy(cl: CorrectedLabels, yhat: np.ndarray, n_replicates: int, bootstrap: bool,
                    rng: np.random.Generator):
    """Corrected-label accuracy ``(1/n) sum_i [yhat Ytilde_i + (1 - yhat)(1 - Ytilde_i)]``.

    Returns (point (M,) averaged over draws, replicates (R, M)). Linear in the clean label, so unbiased
    given the channel whatever the predictions are; replicates vary the channel draw and, with
    bootstrap, the item weights (Gamma(n_c) per (pattern, prediction) cell).
    """
    row, pred, n_c = _cells(cl.inverse, yhat)
    yt = cl.values[:, row]                                         # (S, C)
    contrib = np.where(pred[None], yt[..., None], 1 - yt[..., None])  # (S, C, M)
    point = np.einsum("scm,c->m", contrib, n_c) / (yt.shape[0] * n_c.sum())
    s_idx = draw_index(yt.shape[0], n_replicates)
    w = rng.standard_gamma(np.broadcast_to(n_c.astype(np.float64), (n_replicates, n_c.size))) if bootstrap \
        else np.broadcast_to(n_c.astype(np.float64), (n_replicates, n_c.size))
    reps = np.einsum("rcm,rc->rm", contrib[s_idx], w) / w.sum(axis=1, keepdims=True)
    return point, reps


def nc_ece_replicates(cl: CorrectedLabels, scores: list, edges: list, n_replicates: int, bootstrap: bool,
                      rng: np.random.Generator) -> np.ndarray:
    """NC-ECE ``sum_k |sum_{i in B_k} w_i (Ytilde_i - z_i)| / sum_i w_i`` per replicate and model, (R, M).

    ``scores[m]`` (n_items,) and ``edges[m]`` are model ``m``'s scores and evaluation bin edges. Every
    model in a replicate shares the channel draw and the item weights (Exp(1) per item, i.e.
    Dirichlet(1) after normalising; all 1 without bootstrap), so differences between models are paired.
    """
    from ..data import bin_index

    n_pat = cl.values.shape[1]
    setup = []
    for z, e in zip(scores, edges):
        b = bin_index(z, e).astype(np.int64)
        setup.append((z, b, b * n_pat + cl.inverse, e.size - 1))
    s_idx = draw_index(cl.values.shape[0], n_replicates)
    out = np.empty((n_replicates, len(scores)))
    fixed = None
    for r in range(n_replicates):
        w = rng.standard_exponential(cl.inverse.size) if bootstrap else None
        if w is not None or fixed is None:
            stats = [(np.bincount(key, weights=w, minlength=k * n_pat).reshape(k, n_pat),
                      np.bincount(b, weights=z if w is None else w * z, minlength=k)) for z, b, key, k in setup]
            total = cl.inverse.size if w is None else w.sum()
            if w is None:
                fixed = (stats, total)
        else:
            stats, total = fixed
        yt = cl.values[s_idx[r]]
        out[r] = [np.abs(W @ yt - Z).sum() / total for W, Z in stats]
    return out
