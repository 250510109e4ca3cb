"""Per-draw bin sums for the three propagation routes (plug-in, model-based, latent-label).

Each route returns, per output draw ``s`` and evaluation bin ``k``: the item weight ``N_sk``, the score
sum ``S_sk`` and a clean-frequency sum ``F_sk`` (corrected labels, curve values or clean-label draws).
Then ``ECE_s = sum_k |F_sk - S_sk| / sum_k N_sk``. Only bin- or pattern-level arrays enter the per-draw
work, except the Bayesian bootstrap (one exponential weight per item and draw) and the Platt curve
(one curve value per item and draw).
"""
from __future__ import annotations

import jax
import numpy as np
from scipy import sparse

from ..core import BinStats, bin_table, clipped_logit, posterior_positive, x64

# Work arrays of at most this many (draw x item) entries are built at once.
_CHUNK_ENTRIES = 4_000_000
_MAX_CHUNK = 256

_JIT: dict = {}


def _pow2(r: int, minimum: int = 8) -> int:
    """Next power of two >= r (>= minimum): a handful of padded shapes keeps JAX from recompiling per data set."""
    return max(minimum, 1 << max(r - 1, 0).bit_length())


def chunk_size(n_items: int) -> int:
    return int(np.clip(_CHUNK_ENTRIES // max(n_items, 1), 1, _MAX_CHUNK))


def _indicator(index: np.ndarray, n_cols: int) -> sparse.csr_matrix:
    """Sparse (n_cols, n) matrix with a 1 at (index[i], i): ``M @ x`` sums ``x`` per index."""
    n = index.size
    return sparse.csr_matrix((np.ones(n), (index, np.arange(n))), shape=(n_cols, n))


# ----------------------------------------------------------------------------- plug-in
def _plugin_fn(n_bins: int, rule, per_draw_stats: bool):
    """jit(vmap(bin_table)) over draws: channels always vary; the row statistics vary with the bootstrap."""
    key = ("plugin", n_bins, rule, per_draw_stats)
    fn = _JIT.get(key)
    if fn is None:
        def one(row_bin, row_mask, count, label_sum, score_sum, fpr, gap, w_explicit):
            stats = BinStats(row_bin, row_mask, count, label_sum, score_sum, n_bins)
            c, s, corr, _ = bin_table(stats, fpr, gap, rule if rule is not None else w_explicit)
            return c, s, corr

        ax = 0 if per_draw_stats else None
        fn = jax.jit(jax.vmap(one, in_axes=(None, None, ax, ax, ax, 0, 0, None)))
        _JIT[key] = fn
    return fn


def plugin_sums(labels, scores, bin_idx, n_bins, fpr, gap, rule, *, bootstrap: bool, rng):
    """Plug-in corrected bin sums per draw.

    Parameters
    ----------
    labels : (n_items, n_annotators) int, -1 = missing
    scores : (n_items,)
    bin_idx : (n_items,) evaluation bin of each item
    fpr, gap : (n_out, n_annotators), one channel per output draw
    rule : str or ndarray of shape (n_annotators,)
        Weight rule (recomputed per draw, IV from that draw's channels and weights) or explicit weights.
    bootstrap : bool
        Bayesian bootstrap: each draw reweights the items by ``n * Dirichlet(1, ..., 1)`` (independent
        exponential weights, normalised), so the per-(bin, missingness) sums are recomputed per draw.

    Returns
    -------
    count, score_sum, freq_sum : ndarrays of shape (n_out, n_bins)
    """
    labels = np.asarray(labels)
    n, j = labels.shape
    obs = labels >= 0
    # Rows keyed by (bin, missingness mask), as in core.bin_stats; the inverse maps items to rows.
    keys = np.concatenate([np.asarray(bin_idx)[:, None], obs], axis=1).astype(np.int64)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    r = uniq.shape[0]
    size = _pow2(r)
    row_bin = np.zeros(size, np.int32)
    row_bin[:r] = uniq[:, 0]
    # Padding rows: count 0 and all annotators "observed" (keeps the per-row weight normalisation finite).
    row_mask = np.ones((size, j), bool)
    row_mask[:r] = uniq[:, 1:].astype(bool)
    M = _indicator(inv, size)
    pos = (labels == 1).astype(np.float64)
    z = np.asarray(scores, dtype=np.float64)
    explicit = None if isinstance(rule, str) else np.asarray(rule, np.float64)
    rule_key = rule if isinstance(rule, str) else None
    n_out = fpr.shape[0]
    out = [np.empty((n_out, n_bins)) for _ in range(3)]
    with x64():
        if not bootstrap:
            count = M @ np.ones(n)
            stats = (count, np.stack([M @ pos[:, k] for k in range(j)], axis=1), M @ z)
            fn = _plugin_fn(n_bins, rule_key, False)
            # One vmapped call over all draws (arrays are (n_out, n_bins)); chunk to bound memory.
            step = 4096
            for a in range(0, n_out, step):
                b = min(a + step, n_out)
                res = fn(row_bin, row_mask, *stats, fpr[a:b], gap[a:b],
                         explicit if explicit is not None else np.zeros(j))
                for o, v in zip(out, res):
                    o[a:b] = np.asarray(v)
            return tuple(out)
        fn = _plugin_fn(n_bins, rule_key, True)
        c = min(chunk_size(n), _MAX_CHUNK)
        for a in range(0, n_out, c):
            b = min(a + c, n_out)
            g = rng.standard_exponential((c, n))
            g *= n / g.sum(axis=1, keepdims=True)
            count = (M @ g.T).T
            score_sum = (M @ (g * z).T).T
            label_sum = np.stack([(M @ (g * pos[:, k]).T).T for k in range(j)], axis=2)
            f_pad = np.concatenate([fpr[a:b], np.repeat(fpr[-1:], c - (b - a), axis=0)])
            g_pad = np.concatenate([gap[a:b], np.repeat(gap[-1:], c - (b - a), axis=0)])
            res = fn(row_bin, row_mask, count, label_sum, score_sum, f_pad, g_pad,
                     explicit if explicit is not None else np.zeros(j))
            for o, v in zip(out, res):
                o[a:b] = np.asarray(v)[: b - a]
    return tuple(out)


# ----------------------------------------------------------------------------- model-based
def fitted_logits(fit) -> np.ndarray:
    """``clipped_logit`` of the fitted items' original scores in float64, shape (n_items,).

    Recomputed from the fit's recorded scores when available (the model inputs may hold them in the
    precision JAX ran in); otherwise the inputs' ``logit_score``.
    """
    scores = fit.details.get("scores") if isinstance(fit.details, dict) else None
    if scores is not None:
        with x64():
            return np.asarray(clipped_logit(np.asarray(scores, dtype=np.float64)), dtype=np.float64)
    return np.asarray(fit.inputs.logit_score, dtype=np.float64)


def model_sums(scores, bin_idx, n_bins, draws, fit):
    """Curve bin sums ``sum_{i in B_k} m_s(Z_i)`` per draw, from the fitted calibration curve.

    Grouped models: ``m_s(Z_i) = prevalence_s[g(i)]`` (a step curve on the fit's groups), computed through
    the (group x bin) count matrix. Platt: ``m_s(Z_i) = sigmoid(slope_s logit(z_i) + intercept_s)`` with the
    fitted items' original scores.
    """
    z = np.asarray(scores, dtype=np.float64)
    n = z.size
    count = np.bincount(bin_idx, minlength=n_bins).astype(np.float64)
    score_sum = np.bincount(bin_idx, weights=z, minlength=n_bins)
    n_out = draws.n_source
    if draws.model == "platt":
        s0 = fitted_logits(fit)
        M = _indicator(np.asarray(bin_idx), n_bins)
        freq = np.empty((n_out, n_bins))
        c = chunk_size(n)
        for a in range(0, n_out, c):
            b = min(a + c, n_out)
            lin = draws.slope[a:b, None] * s0[None, :] + draws.intercept[a:b, None]
            m = 0.5 * (1.0 + np.tanh(0.5 * lin))  # sigmoid without overflow warnings
            freq[a:b] = (M @ m.T).T
    else:
        g = np.asarray(fit.groups.index)
        C = np.zeros((fit.groups.n_groups, n_bins))
        np.add.at(C, (g, np.asarray(bin_idx)), 1.0)
        freq = draws.prevalence @ C
    return np.broadcast_to(count, (n_out, n_bins)), np.broadcast_to(score_sum, (n_out, n_bins)), freq


# ----------------------------------------------------------------------------- latent-label
@jax.jit
def _posterior_rows(patterns, group, fpr, tpr, prevalence):
    return jax.vmap(lambda f, t, p: posterior_positive(patterns, group, f, t, p))(fpr, tpr, prevalence)


@jax.jit
def _posterior_items(labels, fpr, tpr, prob):
    return jax.vmap(lambda f, t, p: posterior_positive(labels, None, f, t, p))(fpr, tpr, prob)


def latent_sums(data, bin_idx, n_bins, draws, fit, rng):
    """Sums of clean-label draws per bin: ``Y_i ~ Bernoulli(P(Y_i = 1 | A_i, g_i, theta_s))``.

    Grouped models: items sharing (evaluation bin, fitted group, response pattern) are exchangeable given
    ``theta_s``, so their number of positives is one Binomial draw per such atom (no per-item work per
    draw). Platt: one Bernoulli draw per item (the prior probability differs per item).
    """
    z = data.scores
    n = z.size
    bin_idx = np.asarray(bin_idx)
    count = np.bincount(bin_idx, minlength=n_bins).astype(np.float64)
    score_sum = np.bincount(bin_idx, weights=z, minlength=n_bins)
    n_out = draws.n_source
    tpr = draws.fpr + draws.gap
    freq = np.empty((n_out, n_bins))
    with x64():
        if draws.model == "platt":
            s0 = fitted_logits(fit)
            labels = np.asarray(data.labels, dtype=np.int32)
            M = _indicator(bin_idx, n_bins)
            c = chunk_size(n)
            for a in range(0, n_out, c):
                b = min(a + c, n_out)
                lin = draws.slope[a:b, None] * s0[None, :] + draws.intercept[a:b, None]
                prob = 0.5 * (1.0 + np.tanh(0.5 * lin))
                p = np.asarray(_posterior_items(labels, draws.fpr[a:b], tpr[a:b], prob))
                y = rng.random(p.shape) < p
                freq[a:b] = (M @ y.T.astype(np.float64)).T
        else:
            rows = np.asarray(fit.inputs.item_rows())
            key = rows.astype(np.int64) * n_bins + bin_idx
            atoms, atom_count = np.unique(key, return_counts=True)
            atom_row, atom_bin = atoms // n_bins, (atoms % n_bins).astype(np.int64)
            B = np.zeros((atoms.size, n_bins))
            B[np.arange(atoms.size), atom_bin] = 1.0
            patterns = np.asarray(fit.inputs.patterns, dtype=np.int32)
            group = np.asarray(fit.inputs.row_group, dtype=np.int32)
            step = 1024
            for a in range(0, n_out, step):
                b = min(a + step, n_out)
                p = np.asarray(_posterior_rows(patterns, group, draws.fpr[a:b], tpr[a:b], draws.prevalence[a:b]))
                p = np.clip(p[:, atom_row], 0.0, 1.0)
                y = rng.binomial(atom_count[None, :], p)
                freq[a:b] = y @ B
    return np.broadcast_to(count, (n_out, n_bins)), np.broadcast_to(score_sum, (n_out, n_bins)), freq
