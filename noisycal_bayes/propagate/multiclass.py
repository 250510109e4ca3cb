"""Posterior of the K-class top-label and class-wise NC-ECE from confusion-matrix draws (issue 18, DESIGN §8).

The plug-in route of :func:`~noisycal_bayes.propagate.posterior_nc_ece` (module :mod:`.nc_ece`), for K classes.
Per output draw ``s``: confusion matrices ``C_s`` (a posterior draw, or the point estimate repeated) ->
``T_s = C_s^{-1}`` per annotator -> per-coordinate weights ``w_s`` (IV from ``C_s`` and the prevalence; with
``prevalence=None`` the prevalence of draw ``s`` is the bootstrap-weighted mean equally weighted corrected
vector, as the binary IV rule estimates ``mu``) -> corrected targets ``t_si`` -> per bin (segment) the item
weight ``N_sb``, score sum ``S_sb`` and target sum ``F_sb`` with Bayesian-bootstrap item weights
``g_s ~ n Dirichlet(1, ..., 1)``:

- top-label: bins on the confidence ``c_i = max_k p_ik``, ``S_sb = sum_{i in b} g_si c_i``,
  ``F_sb = sum_{i in b} g_si t_si[yhat_i]``, ``NC-ECE_s = sum_b |F_sb - S_sb| / sum_b N_sb``;
- class-wise: per class ``k`` bins on ``p_ik`` with ``t_si[k]``; ``ECE_sk`` as above over class ``k``'s bins,
  and the mean over classes (every item enters each class once, so the mean is ``sum_{k,b} |F - S| / (K n)``).

Everything downstream of the sums is the binary code (:func:`~noisycal_bayes.propagate.result._summarise`): the
``value`` (NC-ECE at the point confusion = the mean of the draws), the draws, the debiased estimate and interval
(default) or the equal-tailed posterior interval, the one-sided reading near zero, the per-bin table. One
difference: the debiased draws are *centred* on the debiased estimate (shifted by their mean offset, clipped at
0; ``_centred``) before the interval is read from them. The binary route's simulated draws sit above its estimate
by a sum of per-bin offsets; over 15 bins that is small against the spread, but the class-wise mean sums
``K x bins`` of them (at K = 10 the offset was half the half-width and its 90% interval covered 0.75-0.85,
missing low), while the estimate itself is close to unbiased. A second difference, with confusion *draws*
(``bias_correct=True``, ``_bias_corrected``): each bin's debiasing is centred on ``2 e_b(C_0) - mean_s e_sb`` (the
residual at the fit ``C_0``, minus the draws' own offset from it: the bootstrap bias correction) instead of
``mean_s e_sb``. ``C_0`` is the fit the draws scatter around, ``point_confusion=`` (the full-sample EM fit when the
draws are its bootstrap refits, as in ``evaluate_multiclass(method="em")``), or by default the draws' mean
``C_bar`` (posterior draws). The corrected targets are non-linear in the confusion matrix (its inverse), and the
draws' mean carries that bias twice (the fit, then the draws around it); uncorrected, the debiased estimate was
biased low by about half the draws' sd for under-confident classifiers (K = 3 and 10, EM-bootstrap draws;
docs/coverage.md). Centred on ``C_bar`` instead of the EM fit, the refits' own offset from the fit enters the
centre twice and the correction removes only the part of the bias that is not linear in it: with 3 annotators
the debiased estimate kept a bias of up to 0.20 (top-label) and 0.42 (class-wise mean) draws' sd, against 0.04
and 0.19 centred on the fit (docs/coverage.md, K-class section, fourth session of 2026-12-02). With a point
confusion there is nothing to correct. A third difference, for the class-wise mean over classes (default) and
the top-label with joint draws (``calibrate=True``, ``_calibrated_level``; the EM route): the two-sided debiased
interval is read at a *calibrated* nominal level (prepivoting, Beran 1987; Loh 1987). The simulated draws are
made at the debiased bins, so they are replicates of the estimator in a world whose true value is the estimate;
the level is raised (never lowered) until the centred interval of those replicates covers that value with
frequency ``level``. Cause: the per-bin debiasing inverts the
folded-normal mean, a concave map, so a sum of many bins is biased (low where bins lie 1-2 sd from 0, high near 0)
and its draws are slightly narrow; with 150 class-wise bins (K = 10) the centred interval covered 0.86-0.88 in an
idealised model with normal bin residuals (docs/coverage.md), 0.94-0.96 calibrated. The one-sided bound and the
per-class intervals (15 bins each: 0.89-0.91 nominal in that model) are not calibrated; the top-label's joint draws
are (its calibrated level averaged 0.91-0.92 on the study, and covered 0.87-0.93 against 0.86-0.91 nominal). Target:
the population binned ECE on the fixed partition (channel draws + bootstrap), or none without the bootstrap.

*Joint draws* (``item_weights=``, top-label and class-wise mean): when the confusion draws are refits on bootstrap
item weights (a weighted-likelihood bootstrap of the EM fit), draw ``s`` can sum the items with the weights ``g_s``
of its own refit instead of fresh ones. The fit's error and the items' sampling error are negatively correlated
(an unusual sample moves the fit so as to partly cancel it: -0.4 to -0.6 across data sets), and independent
weights add the two spreads as if they were not; the joint draws keep the correlation. On the coverage study's
EM-refit draws (docs/coverage.md, K-class section; 400 data sets per K = 3 cell, 700 per K = 10 cell), read at the
calibrated level with the bias correction centred on the EM fit and the ``p (B + 1)`` quantile rule
(``draw_quantiles``): the class-wise mean covers 0.90-0.95, the top-label 0.88-0.93 (z sd 0.98-1.06); on 600
fresh data sets per cell, not used for any choice, 0.90-0.94 and 0.87-0.91 (z sd 1.01-1.08); earlier,
centred on the refits' mean, 0.91-0.97 for the top-label with fresh weights (z sd down to 0.78: too wide where the
two errors cancel most). A per-bin debiasing with a finite slope and empirical-Bayes widths were measured as
alternatives and not adopted (docs/coverage.md, sixth session of 2026-12-02): the class-wise mean stays
conservative at K = 10. The per-class intervals (15 bins each) keep independent weights, in a second pass with
fresh weights: their joint draws were too narrow (pooled 0.85-0.90). NUTS draws have no item weights and keep
the independent bootstrap.

For K = 2 the class-wise entry of class 1 is the binary plug-in NC-ECE of the scores ``p_i1`` with the same
channel draws, weights and item weights: the draws agree with :func:`~noisycal_bayes.propagate.posterior_nc_ece`
to rounding, and with ``bias_correct=False`` the debiased estimate too, and with ``calibrate=False`` as well the
debiased interval up to the centring (tests/propagate/test_multiclass.py).

*Vectorised.* Items are compressed to distinct response patterns (multisets of (annotator, label) among the
usable annotators; ``P`` patterns) and atoms (pattern x class x bin): per draw the work is one inversion of ``J``
K x K matrices, ``P x K`` targets and sparse sums over atoms, in chunks of draws with bounded memory; only the
Bayesian bootstrap needs one weight per (draw, item). *Near-singular confusion*: annotators whose condition
number exceeds ``max_condition`` in more than ``(1 - USABLE_LEVEL) / 2`` of the draws are not used (weight 0,
responses left out, :class:`~noisycal_bayes.warnings.IdentifiabilityWarning`); items left without a usable response
are left out (:class:`~noisycal_bayes.warnings.DataWarning`). In the remaining draws where a used annotator's
matrix is near singular, its singular values are clipped from below at ``s_max / max_condition`` before
inversion (warned), so no draw explodes.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import sparse

from .._validation import _preview, check_level
from ..reference.multiclass import (MAX_CONDITION, bin_edges, check_confusion, check_mc_weights, check_prevalence,
                                    check_probs, check_responses, ece_entries, usable_from_draws, warn_unusable)
# The point estimators for a point fit live in the reference layer (the bootstrap needs them); importable here too.
from ..reference.multiclass import MulticlassNCECE, classwise_nc_ece, top_label_nc_ece  # noqa: F401
from ..core import confusion_condition, corrected_vectors
from ..reference.multiclass import annotator_weights  # draw-batched (leading draw axes)
from ..warnings import DataWarning, IdentifiabilityWarning
from .draws import output_index
from .nc_ece import INTERVAL_METHODS, USABLE_LEVEL
from .result import PosteriorNCECE, _bin_table, _summarise, draw_quantiles

__all__ = ["MC_TARGETS", "PosteriorClasswiseNCECE", "posterior_classwise_nc_ece", "posterior_top_label_nc_ece"]

MC_TARGETS = {
    "top_label": ("population top-label binned ECE on the fixed partition: sum_b P(conf in B_b) "
                  "|E[1[Y = yhat] - conf | conf in B_b]|"),
    "classwise": ("population class-wise binned ECE on the fixed partitions: mean_k sum_b P(p_k in B_kb) "
                  "|E[1[Y = k] - p_k | p_k in B_kb]| (and each class's term)"),
    "no_bootstrap": ("none: NC-ECE of this sample with confusion uncertainty only (no evaluation-sample "
                     "uncertainty, so the interval is too narrow for any target)"),
}
# Work arrays of at most this many entries per chunk of draws (as propagate._sums).
_CHUNK_ENTRIES = 4_000_000
_MAX_CHUNK = 256
# Patterns are compressed through a dense (items x annotator-label) count table when it has at most this many
# columns; wider (many sparse annotators) keeps one pattern per item.
_DENSE_PATTERN_COLS = 64


@dataclass(frozen=True)
class PosteriorClasswiseNCECE:
    """Posterior of the class-wise NC-ECE: the mean over classes with its interval, and each class's.

    The mean-level attributes have the meaning of :class:`~noisycal_bayes.propagate.PosteriorNCECE`'s (``value``
    the mean over classes of the class-wise NC-ECE at the point confusion; ``debiased``, ``lower``, ``upper``,
    ``upper_one_sided``, ``interval_to_read``, ``calibration_p_value`` from the draws of the mean, which keep
    the correlation across classes). ``per_class`` holds one ``PosteriorNCECE`` per class (its ``table`` the
    class's bins), ``per_class_table`` their scalars in one frame (``class, value, debiased, lower, upper,
    upper_one_sided, interval_to_read``), ``edges`` one array per class. ``two_sided_level``: the level of the
    draws' quantiles that give the mean's ``lower, upper`` (the calibrated level by default; ``level`` with
    ``calibrate=False``).
    """

    value: float
    debiased: float
    mean: float
    median: float
    lower: float
    upper: float
    upper_one_sided: float
    interval_to_read: str
    calibration_p_value: float
    level: float
    two_sided_level: float
    draws: np.ndarray = field(repr=False)
    debiased_draws: np.ndarray = field(repr=False)
    interval_method: str
    target: str
    method: str
    uncertainty: str
    per_class: tuple = field(repr=False)
    per_class_table: pd.DataFrame = field(repr=False)
    edges: list = field(repr=False)
    weights_rule: str
    fit_method: str
    model: str | None
    bootstrap: bool
    n_items: int
    seed: int

    @property
    def interval(self) -> tuple:
        return (self.lower, self.upper)

    @property
    def reported_interval(self) -> tuple:
        """``(lower, upper)`` or ``(0, upper_one_sided)``, as ``interval_to_read`` says."""
        return self.interval if self.interval_to_read == "two_sided" else (0.0, self.upper_one_sided)

    @property
    def n_draws(self) -> int:
        return int(self.draws.size)

    @property
    def table(self) -> pd.DataFrame:
        """Per-bin tables of every class, stacked, with a ``class`` column."""
        return pd.concat([r.table.assign(**{"class": k}) for k, r in enumerate(self.per_class)], ignore_index=True)


# ----------------------------------------------------------------------------- the engine
class _Design:
    """Everything per item that the per-draw work needs, compressed (built once per call)."""

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
                # One integer per item (mixed radix `base` over the annotator-label counts): a 1-d unique is ~100x
                # faster than np.unique(axis=0) on the rows (3 s at 50,000 x 30).
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


def _clip_condition(conf, max_condition):
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


def _sums(des: _Design, conf, prev, rule, usable, bootstrap, rng, max_condition, draw_weights=None):
    """Per output draw (rows of ``conf`` (n_out, J, K, K)): count, score sum, target sum per segment.

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
        cc = _clip_condition(cc, max_condition)
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


def _prepare(func, probs, responses, confusion_draws, prevalence, *, bins, weights, level, interval, n_draws,
             usable, max_condition, kind):
    """Validated inputs, the output draws and the design."""
    p = check_probs(probs)
    n, k = p.shape
    resp = check_responses(responses, n, k, func=func)
    conf = check_confusion(confusion_draws, resp.n_annotators, k, name="confusion_draws", draws=True)
    is_posterior = conf.shape[0] > 1
    prev = check_prevalence(prevalence, k, n_draws=conf.shape[0])
    rule, label = check_mc_weights(weights, resp.n_annotators, k)
    level = check_level(level)
    if interval not in INTERVAL_METHODS:
        raise ValueError(f"{func}: `interval` must be one of {INTERVAL_METHODS}; got {interval!r}.")
    if usable is None:
        usable = usable_from_draws(conf, max_condition=max_condition, level=USABLE_LEVEL)
    elif np.shape(usable) != (resp.n_annotators,):
        raise ValueError(f"{func}: `usable` must be a bool array of shape ({resp.n_annotators},); got shape "
                         f"{np.shape(usable)}.")
    usable = np.asarray(usable, dtype=bool)
    warn_unusable(usable, np.arange(resp.n_annotators), func, stacklevel=5)
    if not usable.any():
        raise ValueError(f"{func}: no annotator has a usable (invertible) confusion matrix; the corrected targets are "
                         "undefined.")
    cond = confusion_condition(conf)[:, usable]
    bad = (cond > max_condition).any(axis=1)
    if bad.any():
        warnings.warn(f"{func}: in {int(bad.sum())} of {conf.shape[0]} draws a used annotator's confusion matrix is "
                      f"near singular (condition number up to {float(cond.max()):.3g} > {max_condition}); those draws "
                      "have their singular values clipped to that condition number before inversion.",
                      IdentifiabilityWarning, stacklevel=4)
    edges = bin_edges(p, bins, kind)
    des = _Design(p, resp, usable, kind, edges)
    if not des.has.all():
        warnings.warn(f"{func}: {int((~des.has).sum())} items (e.g. {_preview(np.flatnonzero(~des.has))}) have no "
                      "response from an annotator with a usable confusion matrix and are left out.", DataWarning,
                      stacklevel=4)
    idx = output_index(conf.shape[0], n_draws, is_posterior=is_posterior)
    return p, resp, conf, prev, rule, label, level, usable, edges, des, idx, is_posterior


def _check_draw_weights(item_weights, n_source: int, n_items: int, bootstrap: bool, func: str):
    """The items' bootstrap weights of each confusion draw (n_source, n_items), checked and not copied (any real
    dtype: bootstrap multiplicities may come as small integers), or None."""
    if item_weights is None:
        return None
    w = np.asarray(item_weights)
    if not (np.issubdtype(w.dtype, np.integer) or np.issubdtype(w.dtype, np.floating)):
        raise ValueError(f"{func}: `item_weights` must be a numeric array; got dtype {w.dtype}.")
    if not bootstrap:
        raise ValueError(f"{func}: `item_weights` are the items' bootstrap weights of each confusion draw; they need "
                         "bootstrap=True.")
    if n_source < 2:
        raise ValueError(f"{func}: `item_weights` need confusion draws (one per row), not a point estimate.")
    if w.shape != (n_source, n_items):
        raise ValueError(f"{func}: `item_weights` must have shape (n_draws, n_items) = ({n_source}, {n_items}), one "
                         f"row per confusion draw; got {w.shape}.")
    finite = np.isfinite(w).all(axis=1) if np.issubdtype(w.dtype, np.floating) else np.ones(n_source, bool)
    bad = ~finite | (w < 0).any(axis=1) | ~(w.sum(axis=1, dtype=np.float64) > 0)
    if bad.any():
        raise ValueError(f"{func}: `item_weights` rows must be finite, non-negative and not all zero; rows "
                         f"{_preview(np.flatnonzero(bad))} are not.")
    return w


class _DrawWeights:
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


def _run(func, kind, probs, responses, confusion_draws, prevalence, *, bins, weights, level, seed, interval,
         bootstrap, n_draws, usable, max_condition, bias_correct=True, calibrate=True, item_weights=None,
         point_confusion=None):
    p, resp, conf, prev, rule, label, level, usable, edges, des, idx, is_post = _prepare(
        func, probs, responses, confusion_draws, prevalence, bins=bins, weights=weights, level=level,
        interval=interval, n_draws=n_draws, usable=usable, max_condition=max_condition, kind=kind)
    centre = _check_point_confusion(point_confusion, conf, func)
    joint = _check_draw_weights(item_weights, conf.shape[0], p.shape[0], bool(bootstrap), func)
    if joint is not None:
        joint = _DrawWeights(joint, idx, des.has, func)
    rng = np.random.default_rng(seed)
    prev_out = prev[idx] if prev is not None and prev.ndim == 2 else (None if prev is None else
                                                                      np.broadcast_to(prev, (idx.size, des.k)))
    count, score, freq = _sums(des, conf[idx], prev_out, rule, usable, bool(bootstrap), rng, max_condition, joint)
    # The point value: the same sums at the fit the draws scatter around (``point_confusion``; default the draws'
    # mean confusion) and the mean prevalence, without the bootstrap.
    prev_pt = None if prev is None else (prev.mean(axis=0) if prev.ndim == 2 else prev)[None]
    c0, s0, f0 = _sums(des, centre[None], prev_pt, rule, usable, False, None, max_condition)
    parts = ["confusion posterior draws" if is_post else "confusion fixed at the point estimate"]
    if bootstrap:
        parts.append("Bayesian bootstrap of the evaluated items" + ("" if joint is None else
                                                                   " (each draw's own item weights: joint draws)"))
    meta = dict(target=MC_TARGETS[kind] if bootstrap else MC_TARGETS["no_bootstrap"], uncertainty=" + ".join(parts),
                label=label, fit_method="draws" if is_post else "point", n_items=des.n, edges=edges, level=level,
                bias_correct=bool(bias_correct) and is_post, calibrate=bool(calibrate))
    return count, score, freq, (c0[0], s0[0], f0[0]), des, meta


def _check_point_confusion(point_confusion, conf, func: str) -> np.ndarray:
    """The confusion at which the point value and the bias correction's centre are computed: ``point_confusion``
    (validated, shape (J, K, K) like one draw) or, by default, the draws' mean."""
    if point_confusion is None:
        return conf.mean(axis=0)
    if conf.shape[0] < 2:
        raise ValueError(f"{func}: `point_confusion` is the fit that confusion *draws* scatter around; with a single "
                         "confusion matrix per annotator (a point estimate) pass that alone.")
    j, k = conf.shape[1], conf.shape[2]
    try:
        return check_confusion(point_confusion, j, k, name="point_confusion")
    except ValueError as err:
        raise ValueError(f"{func}: {err}") from None


def _centred(debiased, estimate: float, interval: str):
    """The debiased draws shifted so that their mean is the debiased estimate (``interval="debiased"`` only).

    The simulated draws ``sum_b debias_abs(|x_sb|, sd_b)`` of :func:`~noisycal_bayes.propagate.result._summarise`
    sit above the estimate ``sum_b m_b``: every bin whose ``m_b`` is 0 (or small against its ``sd_b``) adds a
    positive mean, although the estimate itself is close to unbiased there (the debiasing's purpose; measured in
    ``benchmarks/coverage_multiclass.py``). That offset grows with the number of bins summed (``K x bins`` for the
    class-wise mean: +0.0019 against a half-width of 0.0038 at K = 10), while the spread grows more slowly, so
    the uncorrected interval missed low. Subtracting the mean offset keeps the draws' spread and shape and centres
    them on the estimate (the bootstrap bias correction of a percentile interval for an unbiased estimator).
    """
    if interval != "debiased":
        return debiased
    return np.maximum(debiased - (debiased.mean() - estimate), 0.0)  # an NC-ECE is never below 0


def _quantiles(source, level, two_sided_level=None):
    """Two-sided interval at ``two_sided_level`` (default ``level``) and the one-sided ``level`` bound."""
    a = level if two_sided_level is None else two_sided_level
    return draw_quantiles(source, [(1 - a) / 2, (1 + a) / 2, level])


def _calibrated_level(draws, estimate: float, level: float, grid: int = 201) -> float:
    """Nominal level at which the centred interval covers with estimated frequency ``level`` (prepivoting).

    ``draws`` are the uncentred simulated draws ``sum_b debias_abs(|x_sb|, sd_b)`` of
    :func:`~noisycal_bayes.propagate.result._summarise`, made at the debiased bins ``m_b`` (``x_sb = sign m_b +
    e_sb - mean_s e_sb``), so they are replicates of the estimator in a world whose true value is ``estimate =
    sum_b m_b``. The centred interval of a replicate ``T_s`` is ``T_s + [lo(a), hi(a)]`` (``lo, hi`` the
    ``(1 -+ a)/2`` quantiles of ``d_s = T_s - mean T``); it covers ``estimate`` when ``d_s + beta + lo <= 0 <=
    d_s + beta + hi`` with ``beta = mean T - estimate`` the estimator's bias there. Returned: the smallest ``a``
    in ``[level, 1]`` (on a grid of ``grid`` points) whose coverage so estimated reaches ``level`` (Beran 1987;
    Loh 1987), with the draws themselves standing in for each replicate's interval (no nested simulation).
    Why: the debiasing's inverse is concave, so a sum of many bins is biased (low where bins are 1-2 sd from
    0, high where they are near 0) and its simulated draws slightly narrow; the centred interval then covered
    0.86-0.88 in the idealised model of docs/coverage.md (150 class-wise bins at K = 10), and 0.94-0.96 after
    this calibration. Never narrows the interval (``a >= level``).
    """
    dev = draws - draws.mean()
    beta = draws.mean() - estimate
    a = np.linspace(level, 1.0, grid)
    lo = draw_quantiles(dev, (1 - a) / 2)
    hi = draw_quantiles(dev, (1 + a) / 2)
    shifted = dev[:, None] + beta  # (draws, grid): replicate error T_s - estimate
    cover = ((shifted + lo[None] <= 0) & (shifted + hi[None] >= 0)).mean(axis=0)
    # Coverage is non-decreasing in a (nested quantile intervals): the first grid point that reaches level.
    ok = np.flatnonzero(cover >= level - 1e-12)
    return float(a[ok[0]]) if ok.size else 1.0


def _bias_corrected(count, score, freq, point, correct: bool):
    """Per-draw target sums whose bin residuals average ``2 e_b(C_0) - mean_s e_sb`` (``correct=True``).

    ``e_sb = (F_sb - S_sb) / N_s`` (draw ``s``, bin ``b``) and ``e_b(C_0)`` the residual at the fit ``C_0`` without
    the bootstrap (``point``: at ``point_confusion``, or the draws' mean ``C_bar``). The corrected targets are
    non-linear in the confusion matrix (its inverse), so a plug-in residual at an estimated confusion is biased;
    the draws around the estimate repeat that bias once more, and their mean ``mean_s e_sb`` carries it twice. The
    bootstrap bias correction ``e_b(C_0) - (mean_s e_sb - e_b(C_0))`` removes it to first order (Efron &
    Tibshirani 1993, ch. 10), when ``C_0`` is the fit whose refits the draws are.
    Measured (benchmarks/coverage_multiclass.py, 77 data sets of K = 3, 3 annotators, under-confident): bias of
    the debiased top-label estimate -0.0039 +- 0.0011 -> -0.0008 +- 0.0011, class-wise -0.0033 +- 0.0008 ->
    -0.0011 +- 0.0007; with the true confusion matrices (no correction needed) +0.0004 and -0.0003.
    Shifting each draw's target sum by ``delta_b N_s`` moves every draw's residual by ``delta_b``, so the
    draws' spread and correlation across bins are kept.
    """
    if not correct:
        return freq
    total = count.sum(axis=1, keepdims=True)
    c0, s0, f0 = point
    e_bar = ((freq - score) / total).mean(axis=0)
    return freq + 2.0 * ((f0 - s0) / c0.sum() - e_bar) * total


def _summary(count, score, freq, point, interval, correct, calibrate, level):
    """ECE draws, centred debiased draws, debiased estimate, p value (bias-corrected bin centres) and the
    two-sided interval's level (calibrated with ``calibrate`` and ``interval="debiased"``, else ``level``)."""
    ece = np.abs((freq - score) / count.sum(axis=1, keepdims=True)).sum(axis=1)
    _, debiased, estimate, p_value = _summarise(count, score, _bias_corrected(count, score, freq, point, correct))
    two = _calibrated_level(debiased, estimate, level) if calibrate and interval == "debiased" else level
    return ece, _centred(debiased, estimate, interval), estimate, p_value, two


def _result(count, score, freq, point, edges, meta, interval, bootstrap, seed, level) -> PosteriorNCECE:
    """A :class:`PosteriorNCECE` from per-draw sums over one block of bins (binary summaries, centred draws)."""
    ece, debiased, estimate, p_value, two = _summary(count, score, freq, point, interval, meta["bias_correct"],
                                                     meta["calibrate"], level)
    source = debiased if interval == "debiased" else ece
    lo, hi, one = _quantiles(source, level, two)
    c0, s0, f0 = point
    table = _bin_table(edges, c0, s0, count, score, freq, level)
    return PosteriorNCECE(
        value=float(np.abs(f0 - s0).sum() / c0.sum()), debiased=estimate, mean=float(ece.mean()),
        median=float(np.median(ece)), lower=float(lo), upper=float(hi), upper_one_sided=float(one),
        interval_to_read="two_sided" if p_value <= 1 - level else "upper_one_sided", calibration_p_value=p_value,
        level=level, two_sided_level=float(two), draws=ece, debiased_draws=debiased, interval_method=interval,
        target=meta["target"], method="plugin", uncertainty=meta["uncertainty"], table=table, edges=edges,
        weights_rule=meta["label"],
        fit_method=meta["fit_method"], model=None, bootstrap=bool(bootstrap), n_items=meta["n_items"], seed=seed)


_PARAMS_DOC = """
    Parameters
    ----------
    probs : array of shape (n_items, n_classes)
        Class probabilities of the evaluated classifier; rows sum to 1 (within ``PROBS_ROW_TOL`` = 1e-4).
    responses : Responses, (item, annotator, label) tuple of int arrays, or MulticlassAnnotationSet
        Labels as class indices ``0..K-1`` (the columns of ``probs``); repeats count as responses. The items may
        be held out from the fit (only the confusion matrices are used).
    confusion_draws : array of shape (n_draws, n_annotators, n_classes, n_classes) or (n_annotators, K, K)
        Posterior draws of the confusion matrices (e.g. ``MulticlassPosterior.confusion``, or EM bootstrap
        replicates), or one point estimate (treated as known: the interval then carries the item bootstrap only).
    prevalence : array of shape (n_classes,) or (n_draws, n_classes), optional
        Overall class frequencies for the IV weights (per draw, or fixed). None (default): per draw, the
        item-weighted mean equally weighted corrected vector, as the binary IV rule estimates ``mu``.
    bins : int or Binning, default 15
        Bins on the confidence (top-label) or on each class's probability (class-wise); an int means equal width.
    weights : {"iv", "equal"} or array of shape (n_annotators,) or (n_annotators, n_classes), default "iv"
        Per-coordinate annotator weights, recomputed from each draw's confusion matrices.
    level : float, default 0.9
    seed : int, default 0
        Seeds the Bayesian bootstrap weights (``numpy.random.default_rng``).
    interval : {"debiased", "posterior"}, default "debiased"
        As in :func:`~noisycal_bayes.propagate.posterior_nc_ece`.
    bootstrap : bool, default True
        Add evaluation-sample uncertainty by a Bayesian bootstrap of the items. Without it the interval has no
        target (confusion uncertainty only).
    n_draws : int, optional
        Output draws: default every draw, or 1000 for a point estimate; fewer thins evenly, more cycles.
    usable : bool array of shape (n_annotators,), optional
        The annotators whose labels enter (default: :func:`~noisycal_bayes.reference.multiclass.usable_from_draws`:
        condition number at most ``max_condition`` in all but ``(1 - 0.9) / 2`` of the draws).
    max_condition : float, default 100
    bias_correct : bool, default True
        With confusion draws (not a point estimate): centre each bin's debiasing on the bootstrap
        bias-corrected residual ``2 e_b(C_bar) - mean_s e_sb`` (module docstring), which removes the bias that
        the non-linear inverse of an estimated confusion matrix puts into the debiased estimate. False: the
        binary route's centre ``mean_s e_sb`` (for K = 2 then equal to
        :func:`~noisycal_bayes.propagate.posterior_nc_ece` up to the centring of the interval's draws).
    point_confusion : array of shape (n_annotators, n_classes, n_classes), optional
        With confusion draws that are refits around a fit (an EM bootstrap): that fit, ``C_hat``. The point
        ``value`` is then computed at it and the bias correction is centred on ``2 e_b(C_hat) - mean_s e_sb``,
        the bootstrap bias correction proper (module docstring). Default: the draws' mean ``C_bar`` (posterior
        draws, which have no separate fit).

    Raises
    ------
    ValueError
        Bad ``probs`` (shape, range, rows not summing to 1), responses (labels outside ``0..K-1``, items out of
        range), confusion draws (shape, rows not summing to 1), prevalence, weights, level, interval, n_draws,
        or usable (class-wise also item_weights: shape, negative or non-finite rows, without bootstrap or
        confusion draws); no usable annotator.

    Warns
    -----
    IdentifiabilityWarning
        Annotators with near-singular confusion matrices (left out), or draws in which a used one is.
    DataWarning
        Items without a usable response (left out).
"""


def posterior_top_label_nc_ece(probs, responses, confusion_draws, prevalence=None, *, bins=15, weights="iv",
                               level: float = 0.9, seed: int = 0, interval: str = "debiased", bootstrap: bool = True,
                               n_draws=None, usable=None, max_condition: float = MAX_CONDITION,
                               bias_correct: bool = True, calibrate: bool = False,
                               item_weights=None, point_confusion=None) -> PosteriorNCECE:
    """Posterior of the top-label NC-ECE (the K-class headline), with an interval for a stated target.
    {params}
    Returns
    -------
    PosteriorNCECE
        As :func:`~noisycal_bayes.propagate.posterior_nc_ece`'s plug-in route: ``value`` (the top-label NC-ECE at
        ``point_confusion``, default the posterior-mean confusion: :func:`top_label_nc_ece`), ``debiased``,
        ``lower``, ``upper``, ``upper_one_sided``, ``interval_to_read``, ``draws``, ``target``, ``method="plugin"``,
        ``uncertainty``, ``table`` (per confidence bin), ``edges``, ``weights_rule``, ``fit_method`` (``"draws"`` or
        ``"point"``).

    Notes
    -----
    Module docstring (:mod:`noisycal_bayes.propagate.multiclass`); the interval definitions are those of the
    binary plug-in route (:mod:`noisycal_bayes.propagate.nc_ece`). Coverage:
    ``benchmarks/coverage_multiclass.py``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> C = np.array([[[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]] * 3)
    >>> y = rng.integers(0, 3, 500)
    >>> lab = (y[:, None] + (rng.random((500, 3)) < 0.2) * rng.integers(1, 3, (500, 3))) % 3
    >>> resp = (np.repeat(np.arange(500), 3), np.tile(np.arange(3), 500), lab.reshape(-1))
    >>> p = np.full((500, 3), 0.05); p[np.arange(500), y] = 0.9
    >>> draws = np.array([[[rng.dirichlet(300 * row) for row in c] for c in C] for _ in range(50)])
    >>> res = posterior_top_label_nc_ece(p, resp, draws, n_draws=50)
    >>> res.lower <= res.debiased <= res.upper, res.n_draws
    (True, 50)
    """
    func = "posterior_top_label_nc_ece"
    count, score, freq, point, des, meta = _run(func, "top_label", probs, responses, confusion_draws, prevalence,
                                                bins=bins, weights=weights, level=level, seed=seed, interval=interval,
                                                bootstrap=bootstrap, n_draws=n_draws, usable=usable,
                                                max_condition=max_condition, bias_correct=bias_correct,
                                                calibrate=calibrate, item_weights=item_weights,
                                                point_confusion=point_confusion)
    return _result(count, score, freq, point, meta["edges"][0], meta, interval, bootstrap, seed, meta["level"])


def posterior_classwise_nc_ece(probs, responses, confusion_draws, prevalence=None, *, bins=15, weights="iv",
                               level: float = 0.9, seed: int = 0, interval: str = "debiased", bootstrap: bool = True,
                               n_draws=None, usable=None, max_condition: float = MAX_CONDITION,
                               bias_correct: bool = True, calibrate: bool = True,
                               item_weights=None, point_confusion=None) -> PosteriorClasswiseNCECE:
    """Posterior of the class-wise NC-ECE: the mean over classes and each class, with intervals.
    {params}
    Returns
    -------
    PosteriorClasswiseNCECE
        Mean over classes (``value`` = :func:`classwise_nc_ece` at ``point_confusion``, default the posterior-mean
        confusion; interval from
        the draws of the mean) and ``per_class``: one :class:`PosteriorNCECE` per class from the same draws.

    Notes
    -----
    Module docstring. For K = 2 ``per_class[1]`` is the binary plug-in NC-ECE of ``p[:, 1]``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> C = np.array([[[0.8, 0.2], [0.1, 0.9]]] * 3)
    >>> y = rng.integers(0, 2, 400)
    >>> lab = np.where(rng.random((400, 3)) < C[0, y, 1 - y][:, None], 1 - y[:, None], y[:, None])
    >>> resp = (np.repeat(np.arange(400), 3), np.tile(np.arange(3), 400), lab.reshape(-1))
    >>> p = np.c_[1 - (0.1 + 0.8 * y), 0.1 + 0.8 * y]
    >>> res = posterior_classwise_nc_ece(p, resp, C, n_draws=40)
    >>> len(res.per_class), res.per_class_table.columns[:3].tolist()
    (2, ['class', 'value', 'debiased'])
    """
    func = "posterior_classwise_nc_ece"
    count, score, freq, point, des, meta = _run(func, "classwise", probs, responses, confusion_draws, prevalence,
                                                bins=bins, weights=weights, level=level, seed=seed, interval=interval,
                                                bootstrap=bootstrap, n_draws=n_draws, usable=usable,
                                                max_condition=max_condition, bias_correct=bias_correct,
                                                calibrate=calibrate, item_weights=item_weights,
                                                point_confusion=point_confusion)
    level = meta["level"]
    off = des.entries.offset
    pc_count, pc_score, pc_freq, pc_meta = count, score, freq, meta
    if item_weights is not None:
        # Per class (15 bins, like the top-label) fresh item weights: their joint draws were too narrow (pooled
        # per-class coverage 0.85-0.90 against 0.89-0.95 on the study, docs/coverage.md); the same seed gives
        # the draws of the call without item_weights.
        pc_count, pc_score, pc_freq, _, _, pc_meta = _run(
            func, "classwise", probs, responses, confusion_draws, prevalence, bins=bins, weights=weights, level=level,
            seed=seed, interval=interval, bootstrap=bootstrap, n_draws=n_draws, usable=usable,
            max_condition=max_condition, bias_correct=bias_correct, calibrate=calibrate,
            point_confusion=point_confusion)
    # Per class (15 bins): the nominal level; only the mean over classes (K x bins terms) is calibrated.
    per = tuple(_result(pc_count[:, a:b], pc_score[:, a:b], pc_freq[:, a:b], tuple(x[a:b] for x in point),
                        meta["edges"][c], {**pc_meta, "calibrate": False}, interval, bootstrap, seed, level)
                for c, (a, b) in enumerate(zip(off[:-1], off[1:])))
    # The mean over classes: every class block holds every item once, so the concatenated blocks give
    # sum_{k,b} |F - S| / (K n) = the mean of the per-class ECEs, draw by draw (correlation kept).
    ece, debiased, estimate, p_value, two = _summary(count, score, freq, point, interval, meta["bias_correct"],
                                                     meta["calibrate"], level)
    source = debiased if interval == "debiased" else ece
    lo, hi, one = _quantiles(source, level, two)
    c0, s0, f0 = point
    table = pd.DataFrame({"class": np.arange(len(per)), "value": [r.value for r in per],
                          "debiased": [r.debiased for r in per], "lower": [r.lower for r in per],
                          "upper": [r.upper for r in per], "upper_one_sided": [r.upper_one_sided for r in per],
                          "interval_to_read": [r.interval_to_read for r in per]})
    return PosteriorClasswiseNCECE(
        value=float(np.abs(f0 - s0).sum() / c0.sum()), debiased=estimate, mean=float(ece.mean()),
        median=float(np.median(ece)), lower=float(lo), upper=float(hi), upper_one_sided=float(one),
        interval_to_read="two_sided" if p_value <= 1 - level else "upper_one_sided", calibration_p_value=p_value,
        level=level, two_sided_level=float(two), draws=ece, debiased_draws=debiased, interval_method=interval,
        target=meta["target"], method="plugin", uncertainty=meta["uncertainty"], per_class=per, per_class_table=table,
        edges=meta["edges"],
        weights_rule=meta["label"], fit_method=meta["fit_method"], model=None, bootstrap=bool(bootstrap),
        n_items=meta["n_items"], seed=seed)


_CALIBRATE_DOC = """    calibrate : bool, default True
        (Class-wise only; ``interval="debiased"``.) Read the two-sided interval of the *mean over classes* at the
        nominal level whose coverage, estimated by its simulated draws made at the debiased bins, is ``level``
        (prepivoting, Beran 1987; at least ``level``, so the interval only widens; module docstring). The
        per-class intervals (15 bins each), the one-sided bound and the top-label interval stay at ``level``.
        False: the mean's interval at ``level`` (as before; with ``bias_correct=False`` the K = 2
        binary-compatible setting).
    item_weights : array of shape (n_draws, n_items), optional
        *Joint draws*: the item weights from which each confusion draw was refitted (a weighted-likelihood
        bootstrap: EM refits on Bayesian-bootstrap weights, row ``s`` for ``confusion_draws[s]``). Draw ``s``
        then sums the items with the same weights (rescaled to mean 1 over the items with a usable response)
        instead of fresh ones, so the draws keep the correlation between the fit's error and the items'
        sampling error (negative: an unusual sample moves the fit so as to partly cancel it). They enter the
        *mean over classes* only; ``per_class`` keeps fresh weights (``seed``; their joint draws were too narrow).
        Default None: independent Bayesian-bootstrap weights (NUTS draws, or refits whose weights are unknown).
        Needs ``bootstrap=True`` and confusion draws.
"""

_TOP_JOINT_DOC = """    calibrate : bool, default False
        (``interval="debiased"``.) Read the two-sided interval at the calibrated nominal level of the class-wise
        mean (prepivoting; at least ``level``). The EM route of
        :func:`~noisycal_bayes.evaluation.evaluate_multiclass` sets it with ``item_weights``; False keeps
        ``level`` (NUTS draws, and the binary-compatible setting).
    item_weights : array of shape (n_draws, n_items), optional
        *Joint draws*, as for :func:`posterior_classwise_nc_ece`: draw ``s`` sums the items with the weights from
        which ``confusion_draws[s]`` was refitted, keeping the negative correlation of the fit's error and the
        items' sampling error. Default None: independent Bayesian-bootstrap weights (``seed``). Needs
        ``bootstrap=True`` and confusion draws.
"""

posterior_top_label_nc_ece.__doc__ = posterior_top_label_nc_ece.__doc__.replace(
    "{params}", _PARAMS_DOC.replace("\n    Raises\n", _TOP_JOINT_DOC + "\n    Raises\n"))
posterior_classwise_nc_ece.__doc__ = posterior_classwise_nc_ece.__doc__.replace(
    "{params}", _PARAMS_DOC.replace("\n    Raises\n", _CALIBRATE_DOC + "\n    Raises\n"))
