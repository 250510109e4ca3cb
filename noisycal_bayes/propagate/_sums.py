"""Per-draw bin sums for the three propagation routes (plug-in, model-based, latent-label).

Each route gives, per output draw ``s`` and evaluation bin ``k``, a clean-frequency sum ``F_sk``
(corrected labels, curve values or clean-label draws); the plug-in route also the item weight ``N_sk`` and
the score sum ``S_sk`` (they vary with the Bayesian bootstrap; the other routes use the observed ``n_k``
and score sums). Then ``ECE_s = sum_k |F_sk - S_sk| / sum_k N_sk``. The plug-in route works on cells
(evaluation bin x response pattern, :class:`Cells`), which come from items or from SufficientStats alike;
the model and latent routes of grouped fits need per (fitted group, bin) counts and per (fitted row, bin)
atoms, which both sources also give. Only bin- or pattern-level arrays enter the per-draw
work, except the Bayesian bootstrap (one exponential weight per item and draw) and the Platt curve
(one curve value per item and draw).

For K classes the plug-in sums have the same contract (:func:`atom_sums`): the items are compressed to
response patterns and atoms (pattern x class x segment, :class:`Atoms`; a segment is a bin of the confidence,
or of one class's probability), and per draw the work is one inversion of ``J`` K x K matrices, ``P x K``
targets and sparse sums over atoms, in chunks of draws with bounded memory.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
from scipy import sparse

from ..core import BinStats, bin_table, clipped_logit, x64
from ..core import annotator_weights, corrected_vectors
from ..core.posterior import posterior_positive_draws
from ..reference.calibration import ece_entries

# Work arrays of at most this many (draw x item) entries are built at once (also by the K-class atoms).
_CHUNK_ENTRIES = 4_000_000
_MAX_CHUNK = 256
# K classes: patterns are compressed through a dense (items x annotator-label) count table when it has at most
# this many columns; wider (many sparse annotators) keeps one pattern per item.
_DENSE_PATTERN_COLS = 64
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


def _draws_per_call(entries_per_draw: int, cap: int) -> int:
    """Draws per vectorised call so that its per-draw arrays hold at most ``_CHUNK_ENTRIES`` entries in all
    (at least 1, at most ``cap``): with many (bin, missingness) rows, e.g. many sparse annotators, the
    ``(draws, rows, annotators)`` label sums would otherwise not fit in memory."""
    return int(np.clip(_CHUNK_ENTRIES // max(int(entries_per_draw), 1), 1, cap))


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
    order of the rows), not a row-wise ``np.unique`` (which sorts void records; docs/performance.md, *Implementation
    choices*).
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


class Cells(NamedTuple):
    """The evaluated items summarised by cell = (evaluation bin, response pattern): all the plug-in route needs.

    Built from items (:func:`item_cells`) or from :class:`~noisycal_bayes.data.SufficientStats`
    (:func:`stats_cells`, whose rows are exactly these cells); cells are in increasing order of
    ``bin * 3**J + code`` (the order of :func:`~noisycal_bayes.data.compress_patterns`).

    Attributes
    ----------
    bin : ndarray of shape (n_cells,), int64
    patterns : ndarray of shape (n_cells, n_annotators), int8, -1 = missing
    count : ndarray of shape (n_cells,), float64
        Items per cell ``n_c``.
    score_sum : ndarray of shape (n_cells,)
        ``sum_{i in c} z_i``.
    score_sq : ndarray of shape (n_cells,) or None
        ``sum_{i in c} z_i**2`` (None: unknown, then the Bayesian bootstrap is refused).
    inverse : ndarray of shape (n_items,) or None
        Cell of each item (in-memory data only: per-item bootstrap weights).
    scores : ndarray of shape (n_items,) or None
        Each item's score (in-memory data only).
    """

    bin: np.ndarray
    patterns: np.ndarray
    count: np.ndarray
    score_sum: np.ndarray
    score_sq: np.ndarray | None
    inverse: np.ndarray | None = None
    scores: np.ndarray | None = None

    @property
    def n_items(self) -> float:
        return float(self.count.sum())


def item_cells(labels, scores, bin_idx, n_bins: int) -> Cells:
    """Cells of in-memory items: ``labels`` (n_items, n_annotators) with -1 = missing, ``scores`` and
    ``bin_idx`` (n_items,). The same arrays as :meth:`SufficientStats.from_annotations` with these bins."""
    from ..data.compress import compress_patterns
    from ..data.outofcore import row_moments

    z = np.asarray(scores, dtype=np.float64)
    pc = compress_patterns(labels, np.asarray(bin_idx), n_bins)
    row_sum, row_sq = row_moments(pc.inverse, z, pc.counts.size)
    return Cells(pc.group.astype(np.int64), pc.patterns, pc.counts, row_sum, row_sq, pc.inverse, z)


def stats_cells(stats) -> Cells:
    """Cells of :class:`~noisycal_bayes.data.SufficientStats` (its rows; ``stats.edges`` are the bins).

    Statistics without row moments (made before they existed) know only per-bin score sums: each cell then
    gets its bin's mean score (``score_sum`` per bin is still exact, which is all the routes without the
    bootstrap use) and ``score_sq=None``, so the bootstrap is refused.
    """
    counts = np.asarray(stats.counts, dtype=np.float64)
    group = np.asarray(stats.group, dtype=np.int64)
    if stats.has_row_moments:
        return Cells(group, np.asarray(stats.patterns), counts, np.asarray(stats.row_score_sum),
                     np.asarray(stats.row_score_sq))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(stats.bin_counts > 0, np.asarray(stats.score_sum) / stats.bin_counts, 0.0)
    return Cells(group, np.asarray(stats.patterns), counts, counts * mean[group], None)


def plugin_sums(cells: Cells, n_bins, fpr, gap, rule, *, bootstrap: bool, rng):
    """Plug-in corrected bin sums per draw, from cells.

    Parameters
    ----------
    cells : Cells
        From :func:`item_cells` or :func:`stats_cells`.
    n_bins : int
    fpr, gap : (n_out, n_annotators), one channel per output draw
    rule : str or ndarray of shape (n_annotators,)
        Weight rule (recomputed per draw, IV from that draw's channels and weights) or explicit weights.
    bootstrap : bool
        Bayesian bootstrap: each draw reweights the items by ``n * Dirichlet(1, ..., 1)`` (independent
        exponential weights, normalised), so the per-(bin, missingness) sums are recomputed per draw. With
        per-item data and at most ``_ITEM_BOOTSTRAP_ENTRIES`` (item x draw) weights every item gets its own
        weight; otherwise (and always for cells without items) :func:`cell_bootstrap`.

    Returns
    -------
    count, score_sum, freq_sum : ndarrays of shape (n_out, n_bins)

    Raises
    ------
    ValueError
        ``bootstrap=True`` with cells whose ``score_sq`` is unknown.
    """
    j = cells.patterns.shape[1]
    # Rows keyed by (bin, missingness mask), as in core.bin_stats; cell_row maps cells to rows.
    uniq, cell_row = _row_keys(np.asarray(cells.bin), cells.patterns >= 0, n_bins)
    r = uniq.shape[0]
    size = _pow2(r)
    row_bin = np.zeros(size, np.int32)
    row_bin[:r] = uniq[:, 0]
    # Padding rows: count 0 and all annotators "observed" (keeps the per-row weight normalisation finite).
    row_mask = np.ones((size, j), bool)
    row_mask[:r] = uniq[:, 1:].astype(bool)
    pos = (cells.patterns == 1).astype(np.float64)  # (n_cells, J)
    explicit = None if isinstance(rule, str) else np.asarray(rule, np.float64)
    rule_key = rule if isinstance(rule, str) else None
    w_explicit = explicit if explicit is not None else np.zeros(j)
    n_out = fpr.shape[0]
    n = cells.n_items
    out = [np.empty((n_out, n_bins)) for _ in range(3)]
    with x64():
        if not bootstrap:
            row_sum = lambda w: np.bincount(cell_row, weights=w, minlength=size)  # noqa: E731
            stats = (row_sum(cells.count), np.stack([row_sum(cells.count * pos[:, k]) for k in range(j)], axis=1),
                     row_sum(cells.score_sum))
            fn = _plugin_fn(n_bins, rule_key, False)
            # One vmapped call over many draws (arrays are (n_out, n_bins)); chunk to bound memory. The draws are
            # padded to a power of two (the block size when there are more): one compiled program serves every
            # number of draws in a bucket, instead of one per n_out (each draw is computed on its own by vmap).
            step = _draws_per_call(size * (j + 2), 4096)
            block = min(step, _pow2(n_out))
            for a in range(0, n_out, block):
                _call_block(fn, (row_bin, row_mask), stats, fpr, gap, w_explicit, out, a, min(a + block, n_out),
                            block)
            return tuple(out)
        fn = _plugin_fn(n_bins, rule_key, True)
        if cells.inverse is None or n * n_out > _ITEM_BOOTSTRAP_ENTRIES:
            if cells.score_sq is None:
                raise ValueError("the Bayesian bootstrap from SufficientStats needs each (bin, pattern) row's sums of "
                                 "scores and squared scores (`row_score_sum`, `row_score_sq`), and these statistics "
                                 "were made without them (an older version): recompute them with this version, or "
                                 "pass bootstrap=False.")
            cell_bootstrap(cells, cell_row, size, fn, (row_bin, row_mask), w_explicit, fpr, gap, out, rng)
        else:
            _item_bootstrap(cells, cell_row, size, fn, (row_bin, row_mask), w_explicit, pos, fpr, gap, out, rng)
    return tuple(out)


def _item_bootstrap(cells: Cells, cell_row, n_rows, fn, row_args, w_explicit, pos, fpr, gap, out, rng):
    """Bayesian-bootstrap bin sums with one exponential weight per item and draw (writes into ``out``)."""
    j = cells.patterns.shape[1]
    n_out = fpr.shape[0]
    n_items = cells.inverse.size
    M = _indicator(cell_row[cells.inverse], n_rows)
    pos_items = pos[cells.inverse]
    z = cells.scores
    c = min(chunk_size(n_items), _draws_per_call(n_rows * (j + 2), _MAX_CHUNK))
    for a in range(0, n_out, c):
        b = min(a + c, n_out)
        g = rng.standard_exponential((c, n_items))
        g *= n_items / g.sum(axis=1, keepdims=True)
        count = (M @ g.T).T
        score_sum = (M @ (g * z).T).T
        label_sum = np.stack([(M @ (g * pos_items[:, k]).T).T for k in range(j)], axis=2)
        _call_block(fn, row_args, (count, label_sum, score_sum), fpr, gap, w_explicit, out, a, b, c)


def _call_block(fn, row_args, sums, fpr, gap, w_explicit, out, a: int, b: int, size: int) -> None:
    """Run the compiled plug-in function on draws ``a:b`` padded to the block ``size`` (one compilation for
    every block: the last channel is repeated), and write the ``b - a`` real rows of each output into ``out``."""
    f_pad = np.concatenate([fpr[a:b], np.repeat(fpr[-1:], size - (b - a), axis=0)])
    g_pad = np.concatenate([gap[a:b], np.repeat(gap[-1:], size - (b - a), axis=0)])
    res = fn(*row_args, *sums, f_pad, g_pad, w_explicit)
    for o, v in zip(out, res):
        o[a:b] = np.asarray(v)[: b - a]


def cell_bootstrap(cells: Cells, cell_row, n_rows, fn, row_args, w_explicit, fpr, gap, out, rng):
    """Bayesian-bootstrap bin sums from per-cell totals (large ``n_items x n_draws``, or SufficientStats): per cell
    (bin, response pattern) ``G_c ~ Gamma(n_c, 1)`` and a normal draw of its weighted score mean, per-item weights in
    cells of at most ``_EXACT_CELL`` items (docs/methods.md, the per-cell Bayesian bootstrap). Writes ``out``."""
    j = cells.patterns.shape[1]
    n_c = np.asarray(cells.count, dtype=np.float64)
    k = n_c.size
    zbar = cells.score_sum / n_c
    var = np.maximum(cells.score_sq / n_c - zbar**2, 0.0)
    sd = np.sqrt(var / (n_c + 1.0))
    inv = cells.inverse
    small = n_c <= _EXACT_CELL if inv is not None else np.zeros(k, bool)
    s_cells = np.flatnonzero(small)
    if s_cells.size:
        small_items = np.flatnonzero(small[inv])
        # Items of small cells: indicator (len(s_cells), m) for their exponential weights.
        local = np.full(k, -1, np.int64)
        local[s_cells] = np.arange(s_cells.size)
        S_ind = _indicator(local[inv[small_items]], s_cells.size)
        z_small = cells.scores[small_items]
    big = np.flatnonzero(~small)
    R = _indicator(cell_row, n_rows)  # sparse (n_rows, k): sums cells into rows (dense would be k x n_rows)
    pos = (cells.patterns == 1).astype(np.float64)  # (k, j)
    n = n_c.sum()
    n_out = fpr.shape[0]
    c = _draws_per_call(n_rows * (j + 2) + 3 * k, _CELL_CHUNK)
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
        count = (R @ G.T).T
        score_sum = (R @ S.T).T
        label_sum = np.stack([(R @ (G * pos[:, jj]).T).T for jj in range(j)], axis=2)
        _call_block(fn, row_args, (count, label_sum, score_sum), fpr, gap, w_explicit, out, a, b, c)


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


def group_bin_counts(group, bin_idx, n_groups: int, n_bins: int, weights=None) -> np.ndarray:
    """Items per (fitted group, evaluation bin), shape (n_groups, n_bins).

    ``group``, ``bin_idx`` (n,) and ``weights`` (n,) (None: one item per entry; SufficientStats: the
    row counts).
    """
    C = np.zeros((n_groups, n_bins))
    np.add.at(C, (np.asarray(group), np.asarray(bin_idx)), 1.0 if weights is None else np.asarray(weights, float))
    return C


def model_freq(draws, *, group_bin=None, fit=None, bin_idx=None, n_bins=None) -> np.ndarray:
    """Curve bin sums ``F_sk = sum_{i in B_k} m_s(Z_i)`` per draw, shape (n_out, n_bins).

    Grouped models: ``m_s(Z_i) = prevalence_s[g(i)]`` (a step curve on the fit's groups), so ``F_s =
    prevalence_s @ group_bin`` with ``group_bin`` from :func:`group_bin_counts`; when the groups are the
    evaluation bins, ``F_sk = n_k prevalence_sk``. Platt: ``m_s(Z_i) = sigmoid(slope_s logit(z_i) +
    intercept_s)`` with the fitted items' original scores (``fit``, ``bin_idx`` (n_items,), ``n_bins``).
    """
    if draws.model != "platt":
        return draws.prevalence @ group_bin
    s0 = fitted_logits(fit)
    n_out = draws.n_source
    M = _indicator(np.asarray(bin_idx), n_bins)
    freq = np.empty((n_out, n_bins))
    c = chunk_size(s0.size)
    for a in range(0, n_out, c):
        b = min(a + c, n_out)
        lin = draws.slope[a:b, None] * s0[None, :] + draws.intercept[a:b, None]
        m = 0.5 * (1.0 + np.tanh(0.5 * lin))  # sigmoid without overflow warnings
        freq[a:b] = (M @ m.T).T
    return freq


# ----------------------------------------------------------------------------- latent-label
def latent_atoms(fit_row, bin_idx, n_bins: int, weights=None):
    """Distinct (fitted row, evaluation bin) atoms, in increasing order of ``row * n_bins + bin``.

    ``fit_row`` and ``bin_idx`` (n,): each item's (or SufficientStats row's) row among the fit's inputs
    and evaluation bin; ``weights`` (n,) its number of items (None: one). Returns ``atom_row``,
    ``atom_bin`` and ``atom_count`` (int64), each of shape (n_atoms,). Items of one atom are exchangeable
    given the parameters.
    """
    key = np.asarray(fit_row, dtype=np.int64) * n_bins + np.asarray(bin_idx, dtype=np.int64)
    atoms, inv = np.unique(key, return_inverse=True)
    count = np.bincount(inv.reshape(-1), weights=weights, minlength=atoms.size)
    return atoms // n_bins, atoms % n_bins, np.rint(count).astype(np.int64)


def latent_freq(draws, fit, rng, *, atoms=None, labels=None, bin_idx=None, n_bins=None,
                column_annotator=None) -> np.ndarray:
    """Sums of clean-label draws per bin, ``F_sk = sum_{i in B_k} Y_si``, ``Y_si ~ Bernoulli(P(Y_i = 1 | A_i,
    g_i, theta_s))``, shape (n_out, n_bins).

    Grouped models: the items of one atom (:func:`latent_atoms`) are exchangeable given ``theta_s``, so their
    number of positives is one ``Binomial(atom_count, p_s[atom_row])`` draw (no per-item work per draw).
    Platt: one Bernoulli draw per item (the prior probability differs per item; ``labels`` (n_items,
    n_columns) response columns (:func:`~noisycal_bayes.data.columns.response_columns`: a repeated label is
    a column of its own), ``column_annotator`` (n_columns,) the annotator of each column (default: column
    ``j`` is annotator ``j``), ``bin_idx`` (n_items,)).
    """
    n_out = draws.n_source
    tpr = draws.fpr + draws.gap
    freq = np.empty((n_out, n_bins))
    with x64():
        if draws.model == "platt":
            s0 = fitted_logits(fit)
            labels = np.asarray(labels, dtype=np.int32)
            fpr, tpr_c = draws.fpr, tpr
            if column_annotator is not None:  # one factor per response column, with its annotator's channel
                fpr, tpr_c = fpr[:, column_annotator], tpr[:, column_annotator]
            M = _indicator(np.asarray(bin_idx), n_bins)
            c = chunk_size(s0.size)
            for a in range(0, n_out, c):
                b = min(a + c, n_out)
                lin = draws.slope[a:b, None] * s0[None, :] + draws.intercept[a:b, None]
                prob = 0.5 * (1.0 + np.tanh(0.5 * lin))
                p = np.asarray(posterior_positive_draws(labels, None, fpr[a:b], tpr_c[a:b], prob))
                y = rng.random(p.shape) < p
                freq[a:b] = (M @ y.T.astype(np.float64)).T
        else:
            atom_row, atom_bin, atom_count = atoms
            B = np.zeros((atom_row.size, n_bins))
            B[np.arange(atom_row.size), atom_bin] = 1.0
            patterns = np.asarray(fit.inputs.patterns, dtype=np.int32)
            group = np.asarray(fit.inputs.row_group, dtype=np.int32)
            # Rows and draws padded to powers of two so that one compiled program serves many data sets and
            # draw counts: padding rows are all-missing (group 0), padding draws repeat the last; both dropped.
            n_rows, j = patterns.shape
            size = _pow2(n_rows)
            patterns = np.concatenate([patterns, np.full((size - n_rows, j), -1, np.int32)])
            group = np.concatenate([group, np.zeros(size - n_rows, np.int32)])
            block = min(1024, _pow2(n_out))
            for a in range(0, n_out, block):
                b = min(a + block, n_out)
                pad = lambda x: np.concatenate([x[a:b], np.repeat(x[-1:], block - (b - a), axis=0)])  # noqa: E731
                p = np.asarray(posterior_positive_draws(patterns, group, pad(draws.fpr), pad(tpr),
                                                         pad(draws.prevalence)))[: b - a, :n_rows]
                p = np.clip(p[:, atom_row], 0.0, 1.0)
                y = rng.binomial(atom_count[None, :], p)
                freq[a:b] = y @ B
    return freq


# ----------------------------------------------------------------------------- K classes: atoms
class Atoms:
    """The K-class plug-in design: everything per item that the per-draw work needs, compressed into response
    patterns and atoms (pattern x class x segment), built once per call (the K-class counterpart of :class:`Cells`)."""

    def __init__(self, p, resp, usable, kind, edges):
        j, k = resp.n_annotators, resp.n_classes
        keep_r = usable[resp.annotator]
        has = np.zeros(resp.n_items, bool)
        has[resp.item[keep_r]] = True
        self.has = has
        new = np.cumsum(has) - 1
        item, code = new[resp.item[keep_r]], resp.annotator[keep_r] * k + resp.label[keep_r]
        n = int(has.sum())
        jk = j * k
        n_items = sparse.csr_matrix((np.ones(item.size), (item, code)), shape=(n, jk))
        n_items.sum_duplicates()
        if jk <= _DENSE_PATTERN_COLS:
            dense = n_items.toarray().astype(np.int64)
            base = int(dense.max()) + 1
            if jk * np.log2(base) < 62:
                # One integer per item (mixed radix `base` over the annotator-label counts): a 1-d unique is far
                # faster than np.unique(axis=0) on the rows.
                key = dense @ (base ** np.arange(jk, dtype=np.int64))
                _, first, pat = np.unique(key, return_index=True, return_inverse=True)
                uniq = dense[first]
            else:
                uniq, pat = np.unique(dense, axis=0, return_inverse=True)
            self.npat = sparse.csr_matrix(uniq.astype(np.float64))
            pat = pat.reshape(-1)
        else:
            self.npat, pat = n_items, np.arange(n)
        n_pat = self.npat.shape[0]
        to_ann = sparse.csr_matrix((np.ones(jk), (np.arange(jk), np.repeat(np.arange(j), k))), shape=(jk, j))
        self.mpat = (self.npat @ to_ann).tocsr()  # responses per (pattern, annotator)
        self.n_resp = np.asarray(self.npat.sum(axis=1)).reshape(-1)
        ent = ece_entries(p[has], edges, kind)
        self.entries = ent
        m = ent.n_segs
        key = (pat[ent.item] * k + ent.cls) * m + ent.seg
        uniq_a, atom = np.unique(key, return_inverse=True)
        atom = atom.reshape(-1)
        self.atom_seg = uniq_a % m
        self.atom_cls = (uniq_a // m) % k
        self.atom_pat = uniq_a // (m * k)
        n_atoms = uniq_a.size
        self.atom_count = np.bincount(atom, minlength=n_atoms).astype(np.float64)
        ones = np.ones(ent.item.size)
        self.E = sparse.csr_matrix((ones, (ent.item, atom)), shape=(n, n_atoms))
        self.Cs = sparse.csr_matrix((ones, (ent.item, ent.seg)), shape=(n, m))
        self.Zs = sparse.csr_matrix((ent.score, (ent.item, ent.seg)), shape=(n, m))
        self.Seg = sparse.csr_matrix((np.ones(n_atoms), (np.arange(n_atoms), self.atom_seg)), shape=(n_atoms, m))
        self.Pm = sparse.csr_matrix((np.ones(n), (np.arange(n), pat)), shape=(n, n_pat))
        self.pat_count = np.bincount(pat, minlength=n_pat).astype(np.float64)
        # One sparse matrix for every per-draw sum of the bootstrap: atom weights | bin counts | score sums |
        # pattern weights, so each chunk of draws needs one sparse product with its item weights.
        self.sums_t = sparse.hstack([self.E, self.Cs, self.Zs, self.Pm]).T.tocsr()
        self.splits = np.cumsum([n_atoms, m, m])
        self.count0 = np.asarray(self.Cs.sum(axis=0)).reshape(-1)
        self.score0 = np.asarray(self.Zs.sum(axis=0)).reshape(-1)
        self.n, self.j, self.k, self.m = n, j, k, m

    def chunk(self) -> int:
        width = max(self.n, self.npat.shape[0] * self.k, self.atom_count.size)
        return int(np.clip(_CHUNK_ENTRIES // max(width, 1), 1, _MAX_CHUNK))


def clip_condition(conf, max_condition):
    """Confusion draws (c, J, K, K) whose condition number exceeds ``max_condition`` get their singular values
    clipped from below at ``s_max / max_condition`` (condition exactly ``max_condition``): the corrected
    vectors of a near-singular draw of a used annotator stay bounded (such draws are warned about)."""
    u, sv, vt = np.linalg.svd(conf)
    bad = sv[..., 0] > max_condition * sv[..., -1]
    if not bad.any():
        return conf
    out = conf.copy()
    s_clip = np.maximum(sv[bad], sv[bad][:, :1] / max_condition)
    out[bad] = np.einsum("nij,nj,njk->nik", u[bad], s_clip, vt[bad])
    return out


def _per_pattern(mat, per_draw):
    """``mat`` (P, D) sparse times ``per_draw`` (c, D, K) -> (c, P, K)."""
    c, d, k = per_draw.shape
    out = mat @ per_draw.transpose(1, 0, 2).reshape(d, c * k)
    return np.asarray(out).reshape(-1, c, k).transpose(1, 0, 2)


def atom_sums(des: Atoms, conf, prev, rule, usable, bootstrap, rng, max_condition, draw_weights=None):
    """Per output draw (rows of ``conf`` (n_out, J, K, K)): count, score sum, target sum per segment.

    The contract of :func:`plugin_sums` (per draw ``N_sb``, ``S_sb``, ``F_sb``, each (n_out, n_segments)) for K
    classes: per draw the ``J`` confusion matrices are inverted (near-singular ones clipped,
    :func:`clip_condition`), the per-coordinate weights recomputed (IV from the draw, with the draw's
    item-weighted prevalence when ``prev`` is None), the ``P x K`` pattern targets formed and summed over atoms.

    ``draw_weights`` (n_out, n_kept_items), optional: the items' bootstrap weights of each draw (joint draws),
    used in place of fresh Bayesian-bootstrap weights.
    """
    n_out = conf.shape[0]
    out = [np.empty((n_out, des.m)) for _ in range(3)]
    eye = np.eye(des.k)
    step = des.chunk()
    for a in range(0, n_out, step):
        b = min(a + step, n_out)
        c = b - a
        # Unusable annotators never enter (weight 0, responses dropped): invert the identity in their place.
        cc = np.where(usable[None, :, None, None], conf[a:b], eye)
        cc = clip_condition(cc, max_condition)
        t = corrected_vectors(cc)  # (c, J, K, K): row a of inv(C_j)
        if bootstrap:
            if draw_weights is not None:
                g = draw_weights[a:b]  # joint draws: the weights that produced these confusion draws
            else:
                g = rng.standard_exponential((c, des.n))
                g *= des.n / g.sum(axis=1, keepdims=True)
            atom_w, count, score, pat_w = np.split(np.asarray(des.sums_t @ g.T).T, des.splits, axis=1)
        else:
            atom_w = np.broadcast_to(des.atom_count, (c, des.atom_count.size))
            count = np.broadcast_to(des.count0, (c, des.m))
            score = np.broadcast_to(des.score0, (c, des.m))
            pat_w = np.broadcast_to(des.pat_count, (c, des.pat_count.size))
        if isinstance(rule, str):
            if prev is None and rule == "iv":
                # The binary IV rule's mu: mean (item-weighted) equally weighted corrected vector of the draw.
                t_eq = _per_pattern(des.npat, t.reshape(c, des.j * des.k, des.k)) / des.n_resp[None, :, None]
                pr = np.einsum("cp,cpk->ck", pat_w, t_eq) / pat_w.sum(axis=1, keepdims=True)
            else:
                pr = np.full((c, des.k), 1.0 / des.k) if prev is None else prev[a:b]
            w = annotator_weights(cc, pr, rule=rule, usable=usable)  # (c, J, K)
        else:
            w = np.broadcast_to(np.where(usable[:, None], rule, 0.0), (c, des.j, des.k))
        v = w[:, :, None, :] * t  # (c, J, K_label, K_coord): w[j, k] T[j, a, k]
        num = _per_pattern(des.npat, v.reshape(c, des.j * des.k, des.k))
        den = _per_pattern(des.mpat, w)
        targ = num / den  # every kept pattern has a usable response, and usable weights are positive
        tt = targ[:, des.atom_pat, des.atom_cls]
        out[0][a:b] = count
        out[1][a:b] = score
        out[2][a:b] = np.asarray(des.Seg.T @ (atom_w * tt).T).T
    return out



class DrawWeights:
    """Rows ``idx`` of the draws' item weights, on the kept items only, each rescaled to mean 1 (as the bootstrap's
    own weights); sliced per chunk of draws so that no float64 copy of the whole (draws, items) array is made."""

    def __init__(self, w, idx, has, func: str):
        self.w, self.idx, self.has = w, idx, has
        n = int(has.sum())
        tot = np.array([w[i][has].sum(dtype=np.float64) for i in idx])
        if not (tot > 0).all():
            raise ValueError(f"{func}: some rows of `item_weights` put no weight on the items that have a usable "
                             "response.")
        self.scale = n / tot

    def __getitem__(self, sl: slice) -> np.ndarray:
        rows = self.idx[sl]
        return self.w[rows][:, self.has].astype(np.float64) * self.scale[sl, None]
