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
#: Bayesian bootstrap with more than this many (item x draw) weights goes through per-cell totals
#: (:func:`cell_bootstrap`); below it every item gets its own exponential weight per draw.
_ITEM_BOOTSTRAP_ENTRIES = 20_000_000
#: Cells with at most this many items get per-item weights inside :func:`cell_bootstrap`.
_EXACT_CELL = 32
#: Draws per compiled call of the cell route (a fixed shape: compiled once per bins and rule).
_CELL_CHUNK = 256

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


def _row_keys(bin_idx: np.ndarray, obs: np.ndarray, n_bins: int):
    """Distinct (bin, missingness mask) rows, sorted lexicographically, and each item's row.

    The same as ``np.unique(np.c_[bin_idx, obs], axis=0, return_inverse=True)`` (rows ``(n_rows, 1 + J)``),
    through one integer code per item ``bin 2^J + sum_j obs_j 2^(J-1-j)`` (whose order is the lexicographic
    order of the rows): a row-wise ``np.unique`` sorts void records and took ~18 s at 1e6 items.
    """
    n, j = obs.shape
    if j > 40:
        keys = np.concatenate([bin_idx[:, None], obs], axis=1).astype(np.int64)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        return uniq, inv.reshape(-1)
    code = bin_idx.astype(np.int64) << j
    for col in range(j):
        code |= obs[:, col].astype(np.int64) << (j - 1 - col)
    space = n_bins << j
    if space <= (1 << 22) and (n == 0 or (code.min() >= 0 and code.max() < space)):
        present = np.flatnonzero(np.bincount(code, minlength=space))
        lut = np.zeros(space, np.int64)
        lut[present] = np.arange(present.size)
        inv = lut[code]
    else:
        present, inv = np.unique(code, return_inverse=True)
        inv = inv.reshape(-1)
    uniq = np.empty((present.size, 1 + j), np.int64)
    uniq[:, 0] = present >> j
    for col in range(j):
        uniq[:, 1 + col] = (present >> (j - 1 - col)) & 1
    return uniq, inv


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
    uniq, inv = _row_keys(np.asarray(bin_idx), obs, n_bins)
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
        if n * n_out > _ITEM_BOOTSTRAP_ENTRIES:
            cell_bootstrap(labels, z, inv, size, fn, (row_bin, row_mask),
                           explicit if explicit is not None else np.zeros(j), fpr, gap, out, rng)
            return tuple(out)
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


def cell_bootstrap(labels, z, row_inv, n_rows, fn, row_args, w_explicit, fpr, gap, out, rng):
    """Bayesian-bootstrap bin sums from per-cell totals (the route for large ``n_items x n_draws``).

    Items are grouped into cells ``c`` = (bin, missingness) row x response pattern. Under the Bayesian
    bootstrap the item weights are ``g_i = n E_i / sum E``, ``E_i ~ Exp(1)`` independent. Per cell,
    ``G_c = sum_{i in c} E_i ~ Gamma(n_c, 1)`` and, independently of ``G_c``, ``(E_i / G_c)_{i in c} ~
    Dirichlet(1, ..., 1)`` (Gamma-Dirichlet independence), so the count and label sums of every row are exact
    draws from the cell totals alone. The score sum ``sum_{i in c} E_i z_i = G_c M_c`` with ``M_c = sum D_i z_i``:
    for cells of more than ``_EXACT_CELL`` items ``M_c`` is drawn from the normal with its exact mean
    ``zbar_c`` and variance ``s_c^2 / (n_c + 1)`` (``s_c^2`` the within-cell variance of the scores, divisor
    ``n_c``); for smaller cells every item gets its own exponential weight (exact). Cost per draw: the
    number of cells plus the items in small cells, instead of ``n_items``.
    """
    from ..data.compress import compress_patterns

    n, j = labels.shape
    pc = compress_patterns(labels, row_inv, n_rows)
    cell_row = pc.group.astype(np.int64)
    n_c = pc.counts
    inv = pc.inverse
    k = n_c.size
    zsum = np.bincount(inv, weights=z, minlength=k)
    zbar = zsum / n_c
    var = np.bincount(inv, weights=(z - zbar[inv]) ** 2, minlength=k) / n_c
    sd = np.sqrt(var / (n_c + 1.0))
    small = n_c <= _EXACT_CELL
    small_items = np.flatnonzero(small[inv])
    s_cells = np.flatnonzero(small)
    # Items of small cells: indicator (len(s_cells), m) for their exponential weights.
    local = np.full(k, -1, np.int64)
    local[s_cells] = np.arange(s_cells.size)
    S_ind = _indicator(local[inv[small_items]], s_cells.size) if s_cells.size else None
    z_small = z[small_items]
    big = np.flatnonzero(~small)
    R = np.zeros((k, n_rows))
    R[np.arange(k), cell_row] = 1.0
    pos = (pc.patterns == 1).astype(np.float64)  # (k, j)
    n_out = fpr.shape[0]
    c = _CELL_CHUNK
    for a in range(0, n_out, c):
        b = min(a + c, n_out)
        G = np.empty((c, k))
        S = np.empty((c, k))
        if big.size:
            gb = rng.standard_gamma(n_c[big], size=(c, big.size))
            G[:, big] = gb
            S[:, big] = gb * (zbar[big] + sd[big] * rng.standard_normal((c, big.size)))
        if s_cells.size:
            e = rng.standard_exponential((c, small_items.size))
            G[:, s_cells] = (S_ind @ e.T).T
            S[:, s_cells] = (S_ind @ (e * z_small).T).T
        scale = n / G.sum(axis=1, keepdims=True)
        G *= scale
        S *= scale
        count = G @ R
        score_sum = S @ R
        label_sum = np.stack([(G * pos[:, jj]) @ R for jj in range(j)], axis=2)
        f_pad = np.concatenate([fpr[a:b], np.repeat(fpr[-1:], c - (b - a), axis=0)])
        g_pad = np.concatenate([gap[a:b], np.repeat(gap[-1:], c - (b - a), axis=0)])
        res = fn(*row_args, count, label_sum, score_sum, f_pad, g_pad, w_explicit)
        for o, v in zip(out, res):
            o[a:b] = np.asarray(v)[: b - a]


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
