"""Replicates for intervals of corrected accuracy and NC-ECE, shared by accuracy and model comparison.

Each replicate ``r`` has parameters ``theta_r`` and, when asked, Bayesian-bootstrap item weights ``w_r``
(independent Exp(1) per item, i.e. Dirichlet(1, ..., 1) after normalising; Rubin 1981):

- a fit with posterior draws (NUTS): ``theta_r`` cycles through the (thinned) draws;
- an EM / MAP fit of a grouped model: ``theta_r`` is the **weighted-likelihood bootstrap** refit
  (Newton & Raftery 1994): EM on the compressed (group, pattern) counts re-weighted by ``w_r``, started at
  the fit's estimate. It approximates posterior draws of the channel and prevalences at no NUTS cost
  (the counts have one entry per distinct row, so a refit costs ``O(rows x J)`` per iteration); a fit made on
  the sparse responses (crowds) is refitted by its own sparse EM on the responses and oriented by its own rule;
- otherwise (Platt / monotone MAP fits) ``theta_r`` is the point estimate: no channel uncertainty.

Given ``theta_r``: latent clean labels are drawn from their posterior. Items sharing a *cell* (the same
row and the same predictions of every model) are exchangeable: the number of clean positives in a cell
of ``n_c`` items is ``Binomial(n_c, p_c)`` and, with bootstrap weights summing to ``G_c`` over the
cell, the positives' share of it is ``Beta(k, n_c - k)``. Costs ``O(R x cells)`` plus, with bootstrap
or refits, ``O(R x n_items)`` to draw and aggregate the item weights.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..core import em_step, item_corrected_label, x64
from ..core.weights import weights_for_labels
from ..data import bin_index
from ..propagate.draws import thin_index
from ._posterior import Rows, padded_rows, parameter_draws

#: Models whose point fits are refitted by closed-form EM in the weighted-likelihood bootstrap.
REFIT_MODELS = ("dawid_skene", "grouped", "histogram")
SOURCES = {"draws": "posterior draws", "refit": "weighted-likelihood bootstrap (EM refits)",
           "point": "none (point estimate)"}
# Work in blocks of at most _BLOCK_MAX replicates and _BLOCK_VALUES (replicate x item) values.
_BLOCK_VALUES = 2_000_000
_BLOCK_MAX = 256
# EM refits start at the fit's estimate and stop when no parameter moves by more than _REFIT_TOL (far below
# the bootstrap spread, about 1e-2 here).
_REFIT_TOL = 1e-5
# A start at the estimate typically converges in about 50 iterations; the vmapped loop runs as long as
# the slowest replicate, so it is capped and the last iterate kept (its remaining move is tiny next
# to the bootstrap spread).
_REFIT_MAX_ITER = 300
_REFIT_FNS: dict = {}


def _em_prior(fit):
    """Beta pseudo-counts of the fit's prior for the EM M-step (None = maximum likelihood), or False if EM cannot."""
    prior = getattr(fit, "prior", None)
    if prior is None:
        return None
    try:
        counts = prior.em_pseudo_counts()
    except (AttributeError, ValueError):
        return False
    if any(v < 1 for pair in counts for v in pair):
        return False
    if all(v == 1.0 for pair in counts for v in pair):
        return None
    return tuple(tuple(float(v) for v in pair) for pair in counts)


def parameter_source(fit) -> str:
    if fit.draws is not None:
        return "draws"
    if fit.model in REFIT_MODELS and _em_prior(fit) is not False:
        return "refit"
    return "point"


def _refit_fn(n_groups: int, prior):
    key = (n_groups, prior)
    fn = _REFIT_FNS.get(key)
    if fn is None:
        def one(patterns, group, counts, fpr, tpr, prev):
            def cond(c):
                return (c[0] < _REFIT_MAX_ITER) & (c[2] > _REFIT_TOL)

            def body(c):
                it, (f, t, p), _ = c
                nf, nt, npi = em_step(patterns, group, counts, n_groups, f, t, p, prior)
                move = jnp.maximum(jnp.max(jnp.abs(nf - f)), jnp.maximum(jnp.max(jnp.abs(nt - t)),
                                                                         jnp.max(jnp.abs(npi - p))))
                return it + 1, (nf, nt, npi), move

            it, theta, move = jax.lax.while_loop(cond, body, (0, (fpr, tpr, prev), jnp.inf))
            return theta, move

        fn = jax.jit(jax.vmap(one, in_axes=(None, None, 0, None, None, None)))
        _REFIT_FNS[key] = fn
    return fn


def _corrected_rows(rows: Rows, fpr, tpr, weights) -> np.ndarray:
    """Combined corrected label ``sum_j W_ij (A_ij - fpr_j) / gap_j`` of each row, per parameter set (S, n_rows)."""
    n_rows, j = rows.patterns.shape
    # Padded to a power of two (one compilation for similar data sets); padding rows carry no items.
    size = padded_rows(n_rows)
    pat = np.concatenate([rows.patterns, np.zeros((size - n_rows, j), dtype=rows.patterns.dtype)])
    cnt = np.concatenate([rows.counts, np.zeros(size - n_rows)])
    # The parameter sets too, to a power of two (padding sets repeat the last; vmap computes each set on its own),
    # so that one compiled program serves every number of replicates in a bucket.
    fpr, tpr = np.atleast_2d(np.asarray(fpr, np.float64)), np.atleast_2d(np.asarray(tpr, np.float64))
    s = fpr.shape[0]
    n_pad = (1 << (s - 1).bit_length()) - s
    fpr, tpr = (np.concatenate([a, np.repeat(a[-1:], n_pad, axis=0)]) for a in (fpr, tpr))
    with x64():
        f, t = jnp.asarray(fpr, dtype=jnp.float64), jnp.asarray(tpr, dtype=jnp.float64)
        pat = jnp.asarray(pat, dtype=jnp.int32)
        if isinstance(weights, str):
            out = _corrected_rule(pat, jnp.asarray(cnt, dtype=jnp.float64), f, t, rule=weights)
        else:
            out = _corrected_explicit(pat, f, t, jnp.asarray(weights, dtype=jnp.float64))
        return np.asarray(out)[:s, :n_rows]


@partial(jax.jit, static_argnames="rule")
def _corrected_rule(patterns, counts, fpr, tpr, *, rule):
    def one(f, t):
        gap = t - f
        return item_corrected_label(patterns, f, gap, weights_for_labels(rule, patterns, f, gap, counts))

    return jax.vmap(one)(fpr, tpr)


@jax.jit
def _corrected_explicit(patterns, fpr, tpr, weights):
    return jax.vmap(lambda f, t: item_corrected_label(patterns, f, t - f, weights))(fpr, tpr)


def exponential_weights(rng: np.random.Generator, shape) -> np.ndarray:
    """Exp(1) draws of ``shape`` in float32 by inversion: ``-log(1 - U)``, ``U`` a float32 uniform on [0, 1).

    ``U`` is a multiple of ``2**-24``, so ``1 - U`` is exact and in (0, 1]: the draws are the Exp(1) quantiles of
    ``2**24`` equally likely levels (largest 16.6; the distribution's mass beyond it is 6e-8). Three in-place passes
    over one uniform draw: about four times faster than ``rng.standard_exponential(dtype=np.float32)`` (docs/
    performance.md, clean-label metrics), whose stream it does not reproduce.

    >>> w = exponential_weights(np.random.default_rng(0), (200_000,))
    >>> w.dtype, bool(abs(w.mean() - 1) < 0.01), bool(abs(w.var() - 1) < 0.03), bool(w.min() >= 0)
    (dtype('float32'), True, True, True)
    """
    u = rng.random(shape, dtype=np.float32)
    np.subtract(np.float32(1), u, out=u)
    np.log(u, out=u)
    np.negative(u, out=u)
    return u


def _beta_share(rng, k, m):
    """Share of ``k`` Exp(1) weights among ``m`` of them: Beta(k, m - k), with 0 and 1 at the ends."""
    a = np.maximum(k, 1).astype(np.float64)
    b = np.maximum(m - k, 1).astype(np.float64)
    share = rng.beta(a, b)
    return np.where(k == 0, 0.0, np.where(k == m, 1.0, share))


class Replicates:
    """Replicates of accuracy, corrected-label accuracy and NC-ECE for M sets of predictions.

    Parameters
    ----------
    fit : FitResult
    rows : Rows of the data under the fit
    yhat : int array (n_items, M), predictions of each model
    weights : weight rule or array for the corrected labels
    n_draws : thinning of the fit's draws (at most this many)
    ece : list of (scores (n_items,), edges) per model, or None (no NC-ECE)
    """

    def __init__(self, fit, rows: Rows, yhat: np.ndarray, *, weights, n_draws, ece=None):
        if not isinstance(rows, Rows):
            # The replicates refit and correct labels on (group, pattern) rows; sparse responses have none.
            raise ValueError("the corrected-accuracy / model-comparison replicates run on response patterns, and this "
                             "data set has repeated labels or too many (item, annotator) cells for patterns (one row per item). "
                             "Build the set with repeated='first' (command line: --repeated first), or use "
                             "label_issues / annotation_posteriors, which work from the responses.")
        self.fit, self.rows, self.weights = fit, rows, weights
        self.yhat = np.asarray(yhat, dtype=np.int64)
        self.source = parameter_source(fit)
        self.params, self.n_samples = parameter_draws(fit, n_draws)
        m = self.yhat.shape[1]
        code = (self.yhat << np.arange(m, dtype=np.int64)).sum(axis=1)
        key = rows.inverse.astype(np.int64) * (1 << m) + code
        _, first, self.cell_of_item, self.n_c = np.unique(key, return_index=True, return_inverse=True,
                                                          return_counts=True)
        self.cell_of_item = self.cell_of_item.reshape(-1)
        self.cell_row = rows.inverse[first]
        self.cell_pred = self.yhat[first].astype(bool)
        self.n_items = int(self.n_c.sum())
        self.ece = None
        if ece is not None:
            self.ece = []
            for z, edges in ece:
                b = bin_index(z, edges).astype(np.int64)
                self.ece.append((np.asarray(z, dtype=np.float64), b, b * rows.n_rows + rows.inverse,
                                 edges.size - 1))

    # ------------------------------------------------------------------ point values
    def point_moment_accuracy(self) -> np.ndarray:
        """Corrected-label accuracy averaged over the fit's draws (or at its point), shape (M,)."""
        yt = _corrected_rows(self.rows, self.params["fpr"], self.params["tpr"], self.weights)[:, self.cell_row]
        contrib = np.where(self.cell_pred[None], yt[..., None], 1 - yt[..., None])
        return np.einsum("scm,c->m", contrib, self.n_c) / (yt.shape[0] * self.n_items)

    # ------------------------------------------------------------------ replicates
    def _theta(self, r0, b, item_w, inverse=None):
        """Parameters for replicates r0..r0+b-1: a dict of (b, ...) arrays, and the number of failed refits."""
        if self.source == "draws":
            s = thin_index(self.n_samples, self.n_replicates)[r0:r0 + b]
            return {k: v[s] for k, v in self.params.items()}, 0
        point = {k: v[0] for k, v in self.params.items()}
        if self.source == "point":
            return {k: np.broadcast_to(v, (b,) + np.shape(v)) for k, v in point.items()}, 0
        if getattr(getattr(self.fit, "inputs", None), "sparse", False):
            return self._theta_sparse(b, item_w, point)
        inverse = self.rows.inverse if inverse is None else inverse
        rw = np.stack([np.bincount(inverse, weights=w, minlength=self.rows.n_rows) for w in item_w])
        # Pad to the block size and the rows to a power of two (zero-count rows change nothing), so that one
        # compiled refit serves every block and data sets of similar shape.
        pad = self.block - b
        if pad:
            rw = np.concatenate([rw, np.repeat(rw[-1:], pad, axis=0)])
        n_rows = self.rows.n_rows
        size = padded_rows(n_rows)
        patterns = np.concatenate([self.rows.patterns, -np.ones((size - n_rows, self.rows.patterns.shape[1]),
                                                                 dtype=self.rows.patterns.dtype)])
        group = np.concatenate([self.rows.group, np.zeros(size - n_rows, dtype=self.rows.group.dtype)])
        rw = np.concatenate([rw, np.zeros((rw.shape[0], size - n_rows))], axis=1)
        prev0 = np.atleast_1d(np.asarray(point["prevalence"], dtype=np.float64))
        fn = _refit_fn(self.rows.n_groups, _em_prior(self.fit))
        with x64():
            (f, t, p), _ = fn(jnp.asarray(patterns, dtype=jnp.int32), jnp.asarray(group, dtype=jnp.int32),
                               jnp.asarray(rw),
                               jnp.asarray(point["fpr"]), jnp.asarray(point["tpr"]), jnp.asarray(prev0))
        f, t, p = (np.array(a)[:b] for a in (f, t, p))  # writable copies: failed refits are replaced below
        bad = ~np.all(np.isfinite(f), axis=1) | ~np.all(t > f, axis=1)
        if bad.any():
            # A refit that broke down or lost its orientation falls back to the estimate.
            f[bad], t[bad], p[bad] = point["fpr"], point["tpr"], prev0
        return {"fpr": f, "tpr": t, "prevalence": p}, int(bad.sum())

    def _theta_sparse(self, b, item_w, point):
        """The weighted-likelihood refits of a fit made on the sparse responses (crowds: many annotators, gold or
        repeated labels), by the fit's own sparse EM program over the responses (``O(responses)`` a step, against
        ``O(rows x annotators)`` for the dense patterns: 60 times less on the sp crowd), oriented by the fit's own
        rule (a crowd fit keeps annotators with negative gaps) as :func:`~noisycal_bayes.inference.bootstrap_em`
        does. A refit that is not finite falls back to the estimate. The batch is padded to a power of two."""
        from ..core.starts import orient, orient_crowd
        from ..inference.bootstrap import sparse_refits

        inp = self.fit.inputs
        j = inp.n_annotators
        w = item_w if self._order is None else np.empty_like(item_w)
        if self._order is not None:
            w[:, self._order] = item_w                                   # back to the items' order
        size = max(8, 1 << (b - 1).bit_length())
        counts = np.concatenate([w, np.repeat(w[-1:], size - b, axis=0)])
        with x64():
            theta = np.array(sparse_refits(self.fit, counts, np.float64(_REFIT_TOL), _REFIT_MAX_ITER)[0])[:b]
        crowd = (self.fit.details or {}).get("orientation", "every") == "crowd"
        n_labels = inp.labels_per_annotator() if crowd else None
        prev0 = np.atleast_1d(np.asarray(point["prevalence"], dtype=np.float64))
        f, t, p = np.empty((b, j)), np.empty((b, j)), np.empty((b, prev0.size))
        bad = ~np.all(np.isfinite(theta), axis=1)
        for r in range(b):
            if bad[r]:
                f[r], t[r], p[r] = point["fpr"], point["tpr"], prev0
                continue
            fr, tr, pr = theta[r, :j], theta[r, j:2 * j], theta[r, 2 * j:]
            f[r], t[r], p[r], _ = orient_crowd(fr, tr, pr, n_labels) if crowd else orient(fr, tr, pr)
        return {"fpr": f, "tpr": t, "prevalence": p}, int(bad.sum())

    def blocks(self, n_replicates: int, rng: np.random.Generator, *, corrected: bool = True, order=None,
               dtype=np.float64, inversion: bool = False):
        """Blocks of replicates: yields ``(r0, item_w (b, n_items), p (b, n_rows), yt (b, n_rows) or None,
        failed refits)`` for replicates ``r0 .. r0 + b - 1``.

        ``item_w`` are the Exp(1) item weights (the refit's re-weighting; the caller's bootstrap weights), in the
        items' order or, with ``order`` (a permutation of the items), ``item_w[:, k]`` of item ``order[k]``; drawn
        in ``dtype`` by NumPy's ziggurat or, with ``inversion``, as :func:`exponential_weights` (float32, about
        four times faster; another stream). ``p`` is ``P(Y = 1 | row, theta_r)`` and ``yt`` the rows' corrected
        labels under ``theta_r`` (``corrected``).
        """
        inverse = None if order is None else self.rows.inverse[order]
        self.n_replicates, self._order = n_replicates, order
        n, m = self.n_items, self.yhat.shape[1]
        # A fixed block size (not tied to n_replicates), so that the compiled kernels are reused.
        self.block = max(1, min(_BLOCK_MAX, _BLOCK_VALUES // max(n, self.n_c.size * m)))
        for r0 in range(0, n_replicates, self.block):
            b = min(self.block, n_replicates - r0)
            # Item weights: the refit's re-weighting, the corrected-label estimate's bootstrap and (with
            # ``bootstrap``) the average of the posterior accuracy and NC-ECE.
            item_w = exponential_weights(rng, (b, n)) if inversion else rng.standard_exponential((b, n), dtype=dtype)
            theta, nf = self._theta(r0, b, item_w, inverse)
            # Kernels see full blocks (the last one padded by repetition), then the padding is dropped.
            full = {k: np.concatenate([v, np.repeat(v[-1:], self.block - b, axis=0)]) if b < self.block else v
                    for k, v in theta.items()}
            p = self.rows.positive(full)[:b]                                              # (b, n_rows)
            yt = (_corrected_rows(self.rows, full["fpr"], full["tpr"], self.weights)[:b]  # (b, n_rows)
                  if corrected else None)
            yield r0, item_w, p, yt, nf

    def run(self, n_replicates: int, bootstrap: bool, rng: np.random.Generator) -> dict:
        """Replicate arrays ``accuracy``, ``corrected_label_accuracy`` (R, M), ``nc_ece`` (R, M) or None."""
        n, m = self.n_items, self.yhat.shape[1]
        acc = np.empty((n_replicates, m))
        mom = np.empty((n_replicates, m))
        ece = None if self.ece is None else np.empty((n_replicates, len(self.ece)))
        failed = 0
        fixed_ece = None
        for r0, item_w, p, yt, nf in self.blocks(n_replicates, rng):
            b = item_w.shape[0]
            failed += nf
            avg_w = item_w if bootstrap else None
            if avg_w is not None:
                g = np.stack([np.bincount(self.cell_of_item, weights=w, minlength=self.n_c.size) for w in avg_w])
            else:
                g = np.broadcast_to(self.n_c.astype(np.float64), (b, self.n_c.size))
            pc = p[:, self.cell_row]
            k = rng.binomial(self.n_c[None], pc)                             # clean positives per cell
            if avg_w is not None:
                g1 = g * _beta_share(rng, k, self.n_c[None])
                g0 = g - g1
            else:
                g1, g0 = k.astype(np.float64), (self.n_c[None] - k).astype(np.float64)
            total = g.sum(axis=1, keepdims=True)
            pred = self.cell_pred[None]
            acc[r0:r0 + b] = np.einsum("bcm->bm", np.where(pred, g1[..., None], g0[..., None])) / total
            ytc = yt[:, self.cell_row][..., None]
            # The corrected-label estimate has annotation noise of its own: always bootstrap its average.
            gm = g if avg_w is not None else np.stack([np.bincount(self.cell_of_item, weights=w,
                                                                   minlength=self.n_c.size) for w in item_w])
            mom[r0:r0 + b] = np.einsum("bcm,bc->bm", np.where(pred, ytc, 1 - ytc), gm) / gm.sum(axis=1, keepdims=True)
            if ece is not None:
                for i in range(b):
                    w = None if avg_w is None else avg_w[i]
                    if w is None and fixed_ece is not None:
                        stats, tot = fixed_ece
                    else:
                        stats = [(np.bincount(key, weights=w, minlength=kb * self.rows.n_rows)
                                  .reshape(kb, self.rows.n_rows),
                                  np.bincount(bi, weights=z if w is None else w * z, minlength=kb))
                                 for z, bi, key, kb in self.ece]
                        tot = n if w is None else w.sum()
                        if w is None:
                            fixed_ece = (stats, tot)
                    ece[r0 + i] = [np.abs(W @ yt[i] - Z).sum() / tot for W, Z in stats]
        return {"accuracy": acc, "corrected_label_accuracy": mom, "nc_ece": ece, "failed_refits": failed}
