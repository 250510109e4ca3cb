"""EM (and MAP-EM) for the K-class (grouped) Dawid-Skene model in JAX: every start at once with ``vmap``.

The iteration is that of the binary EM (:mod:`noisycal_bayes.inference.em`) with the K-class steps of
:mod:`noisycal_bayes.core.em` and :mod:`noisycal_bayes.core.sparse`. Two paths, one iteration:

- ``"patterns"``: compressed (group x response pattern) counts, ``(K + 1)^J`` possible patterns per group
  (``-1`` = missing); cost per iteration ~ distinct rows x J x K, independent of the number of items. Only for a
  few annotators, one label per (item, annotator) and no gold labels.
- ``"sparse"``: segment sums over the (item, annotator, label) responses; cost per iteration ~ responses x K.
  Crowds, repeated labels and gold labels (observed clean labels).

Rules (the binary rules of :mod:`noisycal_bayes.core.starts`, adapted to K classes):

1. *Starts*: start 0 is the majority-vote start (the M-step at each item's vote distribution, gold items one-hot;
   the standard Dawid-Skene initialisation, crowd-kit's too), or the warm start ``init`` when given; then ``n_starts`` random diagonal-dominant starts
   (``C_j[y, y] ~ U(0.5, 0.95)``, the rest of the row split by a flat Dirichlet; prevalence rows ~ Dirichlet(5)),
   reproducible from ``seed``.
2. *Iteration*: ``theta = (confusion, prevalence)``, ``theta_t = EMstep(theta_{t-1})`` in float64; stop at the
   first ``t`` with ``max|theta_t - theta_{t-1}| <= tol`` and ``|l_t - l_{t-1}| <= tol (1 + |l_t|)`` on the
   objective (log-likelihood, plus the Dirichlet log-kernels for MAP); non-finite values fail a start, so does
   reaching ``max_iter``.
3. *Orientation*: the likelihood is invariant under relabelling the latent classes; the labelling is fixed by the
   crowd's average confusion ``Cbar = sum_j n_j C_j / sum_j n_j`` (``n_j`` the labels of annotator ``j``):
   each row's diagonal entry must be its strict maximum (class ``y``'s most frequent label is ``y``). A converged
   start that breaks it is relabelled by the permutation maximising ``sum_y Cbar[y, sigma(y)]`` (an assignment
   problem; the binary label exchange is the K = 2 case) and accepted if the result satisfies it.
4. *Selection*: among accepted (converged, oriented) starts the highest objective wins, ties within
   ``1e-9 (1 + |best|)`` to the lowest start index. When none is accepted, the binary contract
   (:mod:`noisycal_bayes.core.starts`, rule 5): the best oriented start stopped by ``max_iter``, with
   ``converged=False`` and a :class:`~noisycal_bayes.warnings.ConvergenceWarning`; when no start is oriented, the
   best converged (else finite) start with an :class:`~noisycal_bayes.warnings.IdentifiabilityWarning`. No
   estimate (a ``ValueError``) only when no start ends finite.
"""
from __future__ import annotations

import warnings as _warnings
from dataclasses import dataclass, field, replace
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import _preview, check_em_settings, check_positive_int
from ..core import (multiclass_e_step, multiclass_m_step, score_groups, sparse_multiclass_e_step,
                    sparse_multiclass_m_step, usable_confusions, x64)
from ..core.channel import MAX_CONDITION
from ..core.starts import CONVERGED, START_EPS, TIE_RTOL, all_failed_message, failure_reason, unconverged_message
from ..simulate.annotations import MulticlassSimulation
from ..warnings import ConvergenceWarning, IdentifiabilityWarning, SmallGapWarning
from ._em_loop import em_loop, resolve_accelerate
from ._saved import SavedProgram

__all__ = ["MULTICLASS_EM_PATHS", "MulticlassEMFit", "fit_em_multiclass", "multiclass_em_estimator"]

#: Values of ``path``.
MULTICLASS_EM_PATHS = ("auto", "patterns", "sparse")
# A warm start is mixed by this much only (off exact zeros, far below any tolerance).
_WARM_EPS = 1e-13
#: ``accelerate="auto"`` runs this many plain EM iterations before the SQUAREM cycles: a fit that plain EM stops by
#: then keeps the plain iterate sequence; the slow ones (sparse crowds: often past ``max_iter``) are accelerated.
PLAIN_STEPS = 100


# ----------------------------------------------------------------------------------------------------- inputs
class _Arrays(NamedTuple):
    """What the fit reads from a data object (the adapter's output)."""

    item: np.ndarray
    annotator: np.ndarray
    label: np.ndarray
    n_items: int
    n_annotators: int
    n_classes: int
    probs: np.ndarray | None
    gold: np.ndarray | None
    classes: tuple


def _as_arrays(data, func: str) -> _Arrays:
    """Duck-typed adapter: a MulticlassAnnotationSet-like object (``responses``, ``n_items``, ``n_annotators``,
    ``n_classes``, ``probs``, ``gold``) or a :class:`~noisycal_bayes.simulate.MulticlassSimulation`."""
    if isinstance(data, MulticlassSimulation):
        item, ann, lab = data.item, data.annotator, data.label
        n, J, K = data.probs.shape[0], data.confusion.shape[0], data.probs.shape[1]
        probs, gold, classes = data.probs, None, tuple(range(K))
    elif all(hasattr(data, a) for a in ("responses", "n_items", "n_annotators", "n_classes")):
        item, ann, lab = data.responses
        n, J, K = int(data.n_items), int(data.n_annotators), int(data.n_classes)
        probs, gold = getattr(data, "probs", None), getattr(data, "gold", None)
        classes = tuple(getattr(data, "classes", None) or range(K))
    else:
        raise ValueError(f"{func}: `data` must be a MulticlassAnnotationSet (responses, n_items, n_annotators, "
                         f"n_classes, probs, gold) or a MulticlassSimulation; got {type(data).__name__}.")
    item, ann, lab = (np.asarray(v).astype(np.int64) for v in (item, ann, lab))
    if K < 2:
        raise ValueError(f"{func}: needs at least 2 classes; got n_classes={K}.")
    if J < 2:
        raise ValueError(f"{func}: {J} annotator cannot identify K x K channels (any channel with the observed label "
                         "frequencies fits equally well). Add annotators, or supply the confusion matrix.")
    if not (item.shape == ann.shape == lab.shape) or item.size == 0:
        raise ValueError(f"{func}: `responses` must be three arrays of one positive length; got shapes "
                         f"{item.shape}, {ann.shape}, {lab.shape}.")
    for name, v, hi in (("item", item, n), ("annotator", ann, J), ("label", lab, K)):
        bad = (v < 0) | (v >= hi)
        if bad.any():
            raise ValueError(f"{func}: response {name}s must lie in 0..{hi - 1}; got {_preview(v[bad])} at responses "
                             f"{_preview(np.flatnonzero(bad))}."
                             + (" Map the classes to 0..K-1 first." if name == "label" else ""))
    if probs is not None:
        probs = np.asarray(probs, dtype=np.float64)
        if probs.shape != (n, K):
            raise ValueError(f"{func}: `probs` must have shape ({n}, {K}); got {probs.shape}.")
    if gold is not None:
        gold = np.asarray(gold).astype(np.int64)
        if gold.shape != (n,):
            raise ValueError(f"{func}: `gold` must have shape ({n},); got {gold.shape}.")
        bad = (gold < -1) | (gold >= K)
        if bad.any():
            raise ValueError(f"{func}: `gold` must be -1 (unknown) or a class in 0..{K - 1}; got {_preview(gold[bad])} "
                             f"at items {_preview(np.flatnonzero(bad))}.")
        if not (gold >= 0).any():
            gold = None
    return _Arrays(item, ann, lab, n, J, K, probs, gold, classes)


def _n_repeats(x: _Arrays) -> int:
    key = x.item * x.n_annotators + x.annotator
    if key.size > 1 and np.all(key[1:] >= key[:-1]):
        return int(np.sum(key[1:] == key[:-1]))
    return int(key.size - np.unique(key).size)


def _resolve_groups(x: _Arrays, model: str, groups, func: str):
    if model not in ("grouped", "dawid_skene"):  # "pooled" is dispatched before (fit_em_multiclass)
        raise ValueError(f"{func}: `model` must be 'grouped' or 'dawid_skene' (or 'pooled' in fit_em_multiclass); "
                         f"got {model!r}.")
    if model == "dawid_skene":
        return np.zeros(x.n_items, np.int32), 1, "one group (dawid_skene)"
    if groups is None:
        if x.probs is None:
            return np.zeros(x.n_items, np.int32), 1, "one group (no probs)"
        g = score_groups(x.probs)
        return g, x.n_classes * 2, "score_groups(probs): predicted class x 2 confidence quantiles"
    g = np.asarray(groups)
    if g.shape != (x.n_items,) or not np.issubdtype(g.dtype, np.integer):
        raise ValueError(f"{func}: `groups` must be None or an int array of shape ({x.n_items},); got "
                         f"{g.dtype} {g.shape}.")
    if (g < 0).any():
        raise ValueError(f"{func}: `groups` must be >= 0; got {_preview(g[g < 0])} at items "
                         f"{_preview(np.flatnonzero(g < 0))}.")
    return g.astype(np.int32), int(g.max()) + 1, "given"


def _choose_path(x: _Arrays, path: str, n_repeats: int, func: str):
    if path not in MULTICLASS_EM_PATHS:
        raise ValueError(f"{func}: `path` must be one of {list(MULTICLASS_EM_PATHS)}; got {path!r}.")
    n_gold = 0 if x.gold is None else int(np.sum(x.gold >= 0))
    space = (x.n_classes + 1) ** x.n_annotators
    if path == "sparse":
        return "sparse", "requested"
    if path == "patterns":
        if n_repeats:
            raise ValueError(f"{func}: path='patterns' holds one label per (item, annotator); these data have "
                             f"{n_repeats} repeated labels. Use path='sparse' or 'auto'.")
        if n_gold:
            raise ValueError(f"{func}: path='patterns' cannot use the {n_gold} gold labels (observed clean labels "
                             "enter item by item); use path='sparse' or 'auto'.")
        if space > 2**62:  # Python ints: exact (a float overflows for a crowd)
            raise ValueError(f"{func}: path='patterns' needs (K + 1)^J < 2^62 pattern codes; got (K + 1)^J = "
                             f"{x.n_classes + 1}^{x.n_annotators}. Use path='sparse'.")
        return "patterns", "requested"
    if n_gold:
        return "sparse", f"{n_gold} gold labels (observed clean labels)"
    if n_repeats:
        return "sparse", f"{n_repeats} repeated labels (each a response of its own)"
    if space > x.n_items:
        return "sparse", f"(K + 1)^J = {space} possible patterns > {x.n_items} items (patterns do not compress)"
    return "patterns", f"(K + 1)^J = {space} possible patterns <= {x.n_items} items (patterns compress)"


def _compress(x: _Arrays, group, n_groups: int):
    """(group x pattern) counts of the items, ``(patterns (P, J), counts (G, P))``: the distinct response patterns
    (``-1`` missing) and the items per (group, pattern) cell. ``P`` is padded (:func:`_bucket`; padded patterns have
    count 0) so that few shapes are compiled."""
    K1, J = x.n_classes + 1, x.n_annotators
    # Pattern code: sum_j (label_j + 1) (K + 1)^j (0 = missing), then the group as the most significant digit.
    digit = (x.label + 1) * (K1 ** x.annotator)
    if float(K1) ** J < 2.0**52:
        # bincount sums in float64: exact for integer codes below 2^53, and much faster than np.add.at.
        code = np.rint(np.bincount(x.item, weights=digit.astype(np.float64), minlength=x.n_items)).astype(np.int64)
    else:
        code = np.zeros(x.n_items, np.int64)
        np.add.at(code, x.item, digit)
    key = group.astype(np.int64) * K1**J + code
    space = n_groups * K1**J
    if space <= 1 << 22:
        counts = np.bincount(key, minlength=space)
        uniq = np.flatnonzero(counts)
        counts = counts[uniq]
    else:
        uniq, counts = np.unique(key, return_counts=True)
    codes, pattern_index = np.unique(uniq % K1**J, return_inverse=True)
    digits = (codes[:, None] // (K1 ** np.arange(J, dtype=np.int64))[None, :]) % K1
    p = codes.size
    p_pad = _bucket(p)
    patterns = np.full((p_pad, J), -1, np.int32)
    patterns[:p] = digits - 1
    grid = np.zeros((n_groups, p_pad))
    grid[uniq // K1**J, pattern_index.reshape(-1)] = counts
    return patterns, grid


def _prior_counts(prior, K: int, func: str):
    """``(conf_pc (K, K), prev_pc (K,))`` Dirichlet pseudo-counts ``alpha - 1`` (zeros for None)."""
    if prior is None:
        return np.zeros((K, K)), np.zeros(K)
    if isinstance(prior, tuple) and len(prior) == 2:
        a_c, a_p = prior
    else:
        a_c, a_p = prior, 1.0
    try:
        a_c = np.broadcast_to(np.asarray(a_c, dtype=np.float64), (K, K)).copy()
        a_p = np.broadcast_to(np.asarray(a_p, dtype=np.float64), (K,)).copy()
    except (TypeError, ValueError):
        raise ValueError(f"{func}: `prior` must be None, a Dirichlet concentration alpha >= 1 for every confusion row "
                         f"(a number or a ({K}, {K}) array), or a tuple (alpha_confusion, alpha_prevalence); got "
                         f"{prior!r}.") from None
    if not (np.all(np.isfinite(a_c)) and np.all(a_c >= 1) and np.all(np.isfinite(a_p)) and np.all(a_p >= 1)):
        raise ValueError(f"{func}: Dirichlet concentrations in `prior` must be >= 1 (the posterior mode is then inside "
                         f"the simplex); got {prior!r}.")
    return a_c - 1.0, a_p - 1.0


# ----------------------------------------------------------------------------------------------------- starts
def _vote_start(x: _Arrays, group, n_groups: int, conf_pc, prev_pc, compressed=None, item_weight=None):
    """Start 0: the M-step (with the prior's pseudo-counts) at each item's vote distribution (gold items one-hot),
    each item counted ``item_weight[i]`` times (None: once).

    On compressed rows (``compressed`` from :func:`_compress`) the vote distribution is that of each pattern;
    else ``N[j, y, a] = sum_{responses (i, j, a)} t[i, y]`` is one sparse product ``M t`` with ``M`` the
    (annotator-label key x item) response counts.
    """
    from scipy import sparse

    K, J, n = x.n_classes, x.n_annotators, x.n_items
    if compressed is not None:
        patterns, grid = compressed
        onehot = (patterns[:, :, None] == np.arange(K)).astype(np.float64)      # (P, J, K)
        votes = onehot.sum(axis=1)
        tp = np.where(votes.sum(1, keepdims=True) > 0, votes / np.maximum(votes.sum(1, keepdims=True), 1), 1.0 / K)
        n_jya = np.einsum("py,pja->jya", grid.sum(axis=0)[:, None] * tp, onehot)
        prev = grid @ tp
    else:
        ones = np.ones(x.item.size)
        votes = sparse.csr_matrix((ones, (x.item, x.label)), shape=(n, K)).toarray()
        tot = votes.sum(axis=1, keepdims=True)
        t = np.where(tot > 0, votes / np.maximum(tot, 1.0), 1.0 / K)
        if x.gold is not None:
            g = x.gold >= 0
            t[g] = np.eye(K)[x.gold[g]]
        if item_weight is not None:
            t = t * item_weight[:, None]
        m = sparse.csr_matrix((ones, (x.annotator * K + x.label, x.item)), shape=(J * K, n))
        n_jya = np.swapaxes(np.asarray(m @ t).reshape(J, K, K), 1, 2)           # (J, a, y) -> (J, y, a)
        prev = np.stack([np.bincount(group, weights=t[:, y], minlength=n_groups) for y in range(K)], axis=1)
    return _rows(n_jya + conf_pc), _rows(prev + prev_pc)


def _rows(x, eps=START_EPS):
    # Rows mixed with the uniform row by ``eps``: EM from an exact zero cell stays at zero.
    s = x.sum(axis=-1, keepdims=True)
    out = np.where(s > 1e-12, x / np.where(s > 1e-12, s, 1.0), 1.0 / x.shape[-1])
    return (1 - eps) * out + eps / x.shape[-1]


def _random_starts(n_starts: int, J: int, K: int, G: int, seed: int):
    rng = np.random.default_rng(seed)
    d = rng.uniform(0.5, 0.95, size=(n_starts, J, K))
    off = rng.dirichlet(np.ones(K - 1), size=(n_starts, J, K))
    C = np.zeros((n_starts, J, K, K))
    for y in range(K):
        others = [a for a in range(K) if a != y]
        C[:, :, y, y] = d[:, :, y]
        C[:, :, y, others] = (1 - d[:, :, y])[..., None] * off[:, :, y]
    prev = rng.dirichlet(5.0 * np.ones(K), size=(n_starts, G))
    return _rows(C), _rows(prev)


def _warm_start(init, J: int, K: int, G: int, func: str):
    """``(C (J, K, K), pi (G, K))`` from ``init``: a :class:`MulticlassEMFit` or ``(confusion, prevalence)``.

    A prevalence of shape (K,) (or a fit with another number of groups: its item-weighted overall prevalence) is
    used for every group; ``None`` starts every group uniform. Rows are renormalised and mixed with the uniform
    matrix by ``_WARM_EPS`` (EM never leaves an exact zero cell; the cold starts' ``START_EPS`` would move a
    converged fit by more than the tolerance, and the refit would crawl back at EM's linear rate).
    """
    if isinstance(init, MulticlassEMFit):
        conf, prev = init.confusion, init.prevalence
        if prev.shape[0] != G:
            w = np.bincount(init.groups, minlength=prev.shape[0]).astype(np.float64)
            prev = w @ prev / max(w.sum(), 1.0)  # overall prevalence: groups weighted by their items
    elif isinstance(init, tuple) and len(init) == 2:
        conf, prev = init
    else:
        raise ValueError(f"{func}: `init` must be None, a MulticlassEMFit or a tuple (confusion (J, K, K), prevalence "
                         f"(K,) or (G, K) or None); got {type(init).__name__}.")
    conf = np.asarray(conf, dtype=np.float64)
    if conf.shape != (J, K, K):
        raise ValueError(f"{func}: `init` confusion must have shape ({J}, {K}, {K}); got {conf.shape}.")
    prev = np.full(K, 1.0 / K) if prev is None else np.asarray(prev, dtype=np.float64)
    if prev.shape == (K,):
        prev = np.broadcast_to(prev, (G, K))
    if prev.shape != (G, K):
        raise ValueError(f"{func}: `init` prevalence must have shape ({K},) or ({G}, {K}) (one row per group); got "
                         f"{prev.shape}.")
    for name, arr in (("confusion", conf), ("prevalence", prev)):
        rows = arr.sum(axis=-1)
        bad = ~(np.all(np.isfinite(arr), axis=-1) & np.all(arr >= 0, axis=-1) & (np.abs(rows - 1) <= 1e-6))
        if bad.any():
            raise ValueError(f"{func}: `init` {name} rows must be finite, >= 0 and sum to 1 (within 1e-6); rows "
                             f"{_preview([tuple(int(i) for i in r) for r in np.argwhere(bad)])} do not.")
    return _rows(conf, _WARM_EPS), _rows(prev, _WARM_EPS)


# ----------------------------------------------------------------------------------------------------- the loop
def _log_prior(C, pi, conf_pc, prev_pc):
    # Clip as the likelihood does, so a zero cell with a flat prior contributes 0, not 0 * -inf = NaN.
    return (jnp.sum(conf_pc * jnp.log(jnp.clip(C, 1e-12, 1.0)))
            + jnp.sum(prev_pc * jnp.log(jnp.clip(pi, 1e-12, 1.0))))


def _flat_steps(e_step, m_step, conf_pc, prev_pc, shape_c):
    """``(evaluate, em_map)`` of :func:`~._em_loop.em_loop` on one start's flat ``theta = [C.ravel(), pi.ravel()]``
    from the K-class ``e_step(C, pi) -> (loglik, T)`` and ``m_step(T) -> (C, pi)``; the objective adds the
    Dirichlet log-kernels."""
    nc = int(np.prod(shape_c))

    def evaluate(theta):
        C, pi = theta[:nc].reshape(shape_c), theta[nc:].reshape(-1, shape_c[-1])
        ll, post = e_step(C, pi)
        return ll + _log_prior(C, pi, conf_pc, prev_pc), post

    def em_map(post):
        C, pi = m_step(post)
        return jnp.concatenate([C.ravel(), pi.ravel()])

    return evaluate, em_map


def _patterns_loop(theta0, patterns, counts, conf_pc, prev_pc, tol, *, max_iter, shape_c):
    """EM from every start (rows of ``theta0``) on compressed rows, one plain :func:`~._em_loop.em_loop` per start
    under ``vmap``. Returns ``(theta, objective, n_iter, status, trace)``."""
    evaluate, em_map = _flat_steps(lambda C, pi: multiclass_e_step(patterns, counts, C, pi),
                                   lambda post: multiclass_m_step(patterns, counts, post, conf_pc, prev_pc),
                                   conf_pc, prev_pc, shape_c)
    return jax.vmap(lambda th: em_loop(th, evaluate, em_map, tol, max_iter=max_iter))(theta0)


def _sparse_loop(theta0, item, annotator, label, item_group, gold, item_weight, conf_pc, prev_pc, tol, *, n_groups,
                 max_iter, shape_c, accelerate, plain_steps):
    """EM from every start (rows of ``theta0``) on sparse responses, one batched :func:`~._em_loop.em_loop` (the
    steps mapped over the starts), plain or SQUAREM cycles (``accelerate``) after ``plain_steps`` plain steps."""
    responses = (item, annotator, label)
    evaluate, em_map = _flat_steps(
        lambda C, pi: sparse_multiclass_e_step(responses, item_group, C, pi, gold, item_weight),
        lambda post: sparse_multiclass_m_step(responses, item_group, n_groups, shape_c[0], post, conf_pc, prev_pc,
                                              item_weight),
        conf_pc, prev_pc, shape_c)
    return em_loop(theta0, jax.vmap(evaluate), jax.vmap(em_map), tol, max_iter=max_iter, accelerate=accelerate,
                   plain_steps=plain_steps, post_axis=0)


# Compiled K-class EM programs by path, static configuration and argument shapes (the padded sizes of `_bucket`
# keep them few), saved across processes with the compilation cache on (`._saved.SavedProgram`).
_PROGRAMS: dict = {}


def _call(fn, args, **static):
    """``fn(*args, **static)`` by its program (:class:`~._saved.SavedProgram`, one per configuration and shape)."""
    shapes = tuple((np.shape(a), np.asarray(a).dtype.str) for a in args)
    key = (fn.__name__,) + tuple(sorted(static.items())) + shapes
    program = _PROGRAMS.get(key)
    if program is None:
        program = _PROGRAMS[key] = SavedProgram(partial(fn, **static), partial(jax.jit, keep_unused=True), 0,
                                                name=("em_multiclass",) + tuple(map(repr, key)))
    return program(*args)


def _run_patterns(theta0, patterns, counts, conf_pc, prev_pc, tol, *, max_iter, shape_c):
    """:func:`_patterns_loop`, compiled once per configuration and shape (:func:`_call`)."""
    return _call(_patterns_loop, (theta0, patterns, counts, conf_pc, prev_pc, tol), max_iter=max_iter,
                 shape_c=shape_c)


def _run_sparse(theta0, item, annotator, label, item_group, gold, item_weight, conf_pc, prev_pc, tol, *, n_groups,
                max_iter, shape_c, accelerate=False, plain_steps=0):
    """:func:`_sparse_loop`, compiled once per configuration and shape (:func:`_call`)."""
    return _call(_sparse_loop, (theta0, item, annotator, label, item_group, gold, item_weight, conf_pc, prev_pc, tol),
                 n_groups=n_groups, max_iter=max_iter, shape_c=shape_c, accelerate=accelerate,
                 plain_steps=plain_steps)


def _bucket(n: int) -> int:
    """``n`` rounded up to a size with 3 significant bits (>= 8): at most 1/8 padding, few distinct shapes to
    compile."""
    n = max(int(n), 8)
    step = 1 << max(n.bit_length() - 3, 0)
    return -(-n // step) * step


def _sparse_inputs(x: _Arrays, group, item_weight=None):
    """Padded sparse arrays: responses and items up to :func:`_bucket` sizes. Items have weight ``item_weight``
    (None: 1); padded items have weight 0 (they add nothing to the likelihood or the M-step); padded responses
    belong to the first padded item."""
    n, m = x.n_items, x.item.size
    n_pad, m_pad = _bucket(n + 1), _bucket(m)
    fill = np.full(m_pad - m, n, np.int32)
    item = np.concatenate([x.item.astype(np.int32), fill])
    ann = np.concatenate([x.annotator.astype(np.int32), np.zeros(m_pad - m, np.int32)])
    lab = np.concatenate([x.label.astype(np.int32), np.zeros(m_pad - m, np.int32)])
    grp = np.concatenate([group.astype(np.int32), np.zeros(n_pad - n, np.int32)])
    gold = np.full(n_pad, -1, np.int32)
    if x.gold is not None:
        gold[:n] = x.gold
    weight = np.concatenate([np.ones(n) if item_weight is None else item_weight, np.zeros(n_pad - n)])
    return item, ann, lab, grp, gold, weight


# ----------------------------------------------------------------------------------------------------- NumPy side
def _log_joint_items(item, ann, lab, n_items, group, gold, confusion, prevalence):
    """``log P(Y_i = y, A_i)`` per item, shape (n_items, K) (NumPy, float64; gold items -inf off their label)."""
    K = confusion.shape[1]
    logc = np.log(np.clip(confusion, 1e-12, 1.0))
    lr = logc[ann, :, lab]
    out = np.stack([np.bincount(item, weights=lr[:, y], minlength=n_items) for y in range(K)], axis=1)
    out += np.log(np.clip(prevalence, 1e-12, 1.0))[group]
    if gold is not None:
        out = np.where((gold[:, None] < 0) | (gold[:, None] == np.arange(K)[None, :]), out, -np.inf)
    return out


def _logsumexp_rows(a):
    m = np.max(a, axis=1, keepdims=True)
    return m[:, 0] + np.log(np.sum(np.exp(a - m), axis=1))  # the max shifted out: no overflow


def _average_confusion(C, n_labels):
    w = np.asarray(n_labels, np.float64)
    return np.einsum("j,jya->ya", w, C) / w.sum()


def _diagonally_dominant(cbar) -> bool:
    """Each row's diagonal entry is its strict maximum (module rule 3)."""
    K = cbar.shape[0]
    off = np.where(np.eye(K, dtype=bool), -np.inf, cbar)
    return bool(np.all(np.diag(cbar) > off.max(axis=1)))


def _orient(C, pi, n_labels):
    """``(C, pi, permutation or None, ok)``: relabel the latent classes so that the crowd's average confusion has
    its row maxima on the diagonal (module rule 3); ``permutation[y]`` is the new index of latent class ``y``."""
    cbar = _average_confusion(C, n_labels)
    if _diagonally_dominant(cbar):
        return C, pi, None, True
    from scipy.optimize import linear_sum_assignment

    rows, sigma = linear_sum_assignment(-cbar)       # maximise sum_y Cbar[y, sigma(y)]
    inv = np.argsort(sigma)                           # the latent class that becomes class k
    C2, pi2 = C[:, inv, :], pi[:, inv]
    if np.array_equal(sigma, np.arange(cbar.shape[0])):
        return C, pi, None, False
    return C2, pi2, tuple(int(s) for s in sigma), _diagonally_dominant(_average_confusion(C2, n_labels))


# ----------------------------------------------------------------------------------------------------- result
@dataclass(frozen=True)
class MulticlassEMFit:
    """A K-class EM (or MAP-EM) fit of the (grouped) Dawid-Skene model.

    Attributes
    ----------
    confusion : ndarray of shape (n_annotators, K, K)
        ``confusion[j, y, a] = P(A_j = a | Y = y)``, oriented (module rule 3).
    prevalence : ndarray of shape (n_groups, K)
        Clean-label class frequencies per score group.
    groups : ndarray of int32, shape (n_items,)
        The group of each item.
    n_groups : int
    log_likelihood : float
        At the estimate (without the prior's log density for MAP).
    n_iter : int
    converged : bool
        The selected start converged and satisfies the orientation rule.
    path : {"patterns", "sparse"}
    model : {"grouped", "dawid_skene"}
    classes : tuple
        Class names; index ``k`` <-> ``classes[k]``.
    warnings : tuple of str
        The texts of the warnings issued by the fit.
    objective : float
        Log-likelihood plus the Dirichlet log-kernels (equals ``log_likelihood`` without a prior).
    start_logliks : ndarray of shape (n_starts_total,)
        Final objective of every start (NaN where non-finite); start 0 is the majority-vote start (or ``init``).
    selected_start : int
    loglik_trace : ndarray
        Objective at the start and after each iteration of the selected start.
    path_reason : str
    groups_reason : str
    label_permutation : tuple or None
        The relabelling applied to the selected start (rule 3), ``None`` when none was needed.
    prior : tuple of ndarray or None
        Dirichlet concentrations ``(alpha_confusion (K, K), alpha_prevalence (K,))`` for MAP, None for ML.
    n_labels : ndarray of shape (n_annotators,)
        Responses per annotator.
    """

    confusion: np.ndarray
    prevalence: np.ndarray
    groups: np.ndarray
    n_groups: int
    log_likelihood: float
    n_iter: int
    converged: bool
    path: str
    model: str
    classes: tuple
    warnings: tuple = ()
    objective: float = np.nan
    start_logliks: np.ndarray = field(default_factory=lambda: np.zeros(0))
    selected_start: int = 0
    loglik_trace: np.ndarray = field(default_factory=lambda: np.zeros(0))
    path_reason: str = ""
    groups_reason: str = ""
    label_permutation: tuple | None = None
    prior: tuple | None = None
    n_labels: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def n_annotators(self) -> int:
        return int(self.confusion.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.confusion.shape[1])

    def clean_label_probability(self, data) -> np.ndarray:
        """``P(Y_i = k | A_i, group_i)`` at the estimate, shape (n_items, K); gold items one-hot.

        ``data`` must be the data the model was fitted to (or data with the same items and annotators).
        """
        x = _as_arrays(data, "clean_label_probability")
        if x.n_items != self.groups.shape[0] or x.n_annotators != self.n_annotators or x.n_classes != self.n_classes:
            raise ValueError(f"clean_label_probability: `data` has {x.n_items} items, {x.n_annotators} annotators, "
                             f"{x.n_classes} classes; the fit has {self.groups.shape[0]}, {self.n_annotators}, "
                             f"{self.n_classes}. Pass the data the model was fitted to.")
        lj = _log_joint_items(x.item, x.annotator, x.label, x.n_items, self.groups, x.gold, self.confusion,
                              self.prevalence)
        return np.exp(lj - _logsumexp_rows(lj)[:, None])

    def usable_annotators(self, *, max_condition: float = MAX_CONDITION) -> np.ndarray:
        """:func:`~noisycal_bayes.core.usable_confusions` of the fitted confusions, shape (n_annotators,) bool."""
        with x64():
            return np.asarray(usable_confusions(self.confusion, max_condition=max_condition))


# ----------------------------------------------------------------------------------------------------- the fit
def fit_em_multiclass(data, *, model: str = "grouped", groups=None, n_starts: int = 4, seed: int = 0,
                      max_iter: int = 1000, tol: float = 1e-8, prior=None, path: str = "auto",
                      init=None, weights=None, accelerate="auto") -> MulticlassEMFit:
    """Maximum-likelihood (or MAP) K x K confusion matrices and class prevalences by EM in JAX, all starts at once.

    Parameters
    ----------
    data : MulticlassAnnotationSet or MulticlassSimulation
        Any object with ``responses`` (item, annotator, label), ``n_items``, ``n_annotators``, ``n_classes``,
        ``probs`` ((n_items, K) or None) and ``gold`` ((n_items,), -1 unknown, or None); or the output of
        :func:`~noisycal_bayes.simulate.simulate_multiclass`.
    model : {"grouped", "dawid_skene", "pooled"}, default "grouped"
        ``"dawid_skene"``: one prevalence vector. ``"grouped"``: one per score group, confusions shared.
        ``"pooled"``: partially pooled confusions around a learned population
        (:func:`~noisycal_bayes.inference.population.fit_em_population`).
    groups : int array of shape (n_items,), optional
        Group of each item (``0..G-1``; a group without items keeps a uniform prevalence). Default
        :func:`~noisycal_bayes.core.score_groups` of ``data.probs`` (predicted class x 2 confidence quantiles), or
        one group without probs. Ignored by ``"dawid_skene"``.
    n_starts : int, default 4
        Random diagonal-dominant starts, besides the majority-vote start (module rule 1); 0 runs the vote start (or ``init``) only.
    seed : int, default 0
        Seed of the random starts.
    max_iter : int, default 1000
    tol : float, default 1e-8
        Convergence tolerance (module rule 2).
    prior : None, float, (K, K) array or tuple, optional
        None: maximum likelihood. Otherwise Dirichlet concentrations (each >= 1) for MAP: ``alpha`` for every
        confusion row (a number or a (K, K) array, row ``y`` the concentration of ``C_j[y, :]``), or a tuple
        ``(alpha_confusion, alpha_prevalence)``. A weak prior such as ``1.01`` keeps near-perfect annotators' zero
        cells off the boundary and gives rows without any soft count a defined value.
    path : {"auto", "patterns", "sparse"}, default "auto"
        ``"auto"``: sparse with gold labels, repeated labels, or more possible patterns ``(K + 1)^J`` than items;
        else patterns. Both give the same fit (to rounding) where both apply.
    init : MulticlassEMFit or tuple, optional
        A warm start that replaces the majority-vote start as start 0: a previous fit, or ``(confusion (J, K, K),
        prevalence)`` with ``prevalence`` of shape (K,) (every group), (G, K) (one row per group) or None
        (uniform). A fit with another number of groups gives its item-weighted overall prevalence to every group.
        With ``n_starts=0`` the fit runs from ``init`` alone: the cheap refit of a bootstrap replicate at the
        full-sample fit (:func:`multiclass_em_estimator`). The orientation and selection rules apply as usual.
        An annotator without a label in ``data`` keeps its ``init`` matrix (``data`` does not identify it, and no
        item depends on it): a bootstrap replicate of a sparse crowd that drew none of that annotator's items.
    weights : float array of shape (n_items,), optional
        Item ``i`` counted ``weights[i]`` times in the likelihood, the M-step, the vote start and the label counts
        of the orientation rule (None: once). With the distinct (group, response pattern) rows as items and their
        counts as weights this is the fit of the full data on the sparse path at the cost of the distinct rows (the
        refits of the K-class pattern check). Sparse path only (``path="auto"`` chooses it).
    accelerate : {"auto", True, False}, default "auto"
        Run the EM loop as SQUAREM cycles (:func:`~noisycal_bayes.inference.fit_em`'s ``accelerate``: the same
        cycle, safeguard and stopping rule, :func:`~noisycal_bayes.inference._em_loop.squarem_cycle`), sparse path
        only. ``"auto"``: on the sparse path without ``init``, after :data:`PLAIN_STEPS` plain iterations (a fit
        that plain EM stops by then is the plain fit; a warm refit from ``init`` stays plain); True: from the first
        iteration. ``n_iter``, ``max_iter`` and ``loglik_trace``
        then count the plain iterations and the cycles (three EM steps each).

    Returns
    -------
    MulticlassEMFit

    Raises
    ------
    ValueError
        No EM start ended with a finite likelihood; data of the wrong kind; fewer than two annotators or classes;
        labels, annotators or items out of range; bad ``groups``, ``prior``, ``path``, ``init`` (shapes, rows not on
        the simplex), ``weights`` or numeric settings; ``path="patterns"`` with repeats, gold labels or weights;
        annotators without a label and no ``init``.

    Warns
    -----
    IdentifiabilityWarning
        Two annotators and one group (K x K channels are not identified); the selected fit breaks the orientation
        rule.
    SmallGapWarning
        Annotators with a near-singular fitted confusion matrix (:func:`~noisycal_bayes.core.usable_confusions`).
    ConvergenceWarning
        No start converged (the best one is returned with ``converged=False``; module rule 4).

    Notes
    -----
    E- and M-steps: :mod:`noisycal_bayes.core.em` and :mod:`noisycal_bayes.core.sparse`; the starts, stopping rule, orientation and selection are
    rules 1-4 of this module's docstring. For K = 2 this is :func:`~noisycal_bayes.inference.fit_em` (same
    estimate to rounding, with ``fpr = C[:, 0, 1]``, ``tpr = C[:, 1, 1]``).

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_multiclass
    >>> sim = simulate_multiclass(4000, 3, 3, accuracy=0.8, seed=0)
    >>> fit = fit_em_multiclass(sim, model="dawid_skene", n_starts=2)
    >>> bool(np.abs(fit.confusion - sim.confusion).max() < 0.06), fit.path
    (True, 'patterns')
    """
    func = "fit_em_multiclass"
    if model == "pooled":   # the partially pooled Dawid-Skene (inference/population.py): one group, its own prior
        unused = [name for name, is_set in (("groups", groups is not None), ("prior", prior is not None),
                                            ("path", path != "auto"), ("n_starts", n_starts != 4)) if is_set]
        if unused:
            raise ValueError(f"{func}: model='pooled' learns its own population prior from one vote start on the "
                             f"sparse path, with one prevalence vector; {', '.join(unused)} cannot be set with it "
                             "(use model='grouped' or 'dawid_skene' for them).")
        from .population import fit_em_population
        return fit_em_population(data, max_iter=max_iter, tol=tol, weights=weights, init=init)
    x = _as_arrays(data, func)
    n_starts = check_positive_int(n_starts, name="n_starts", minimum=0)
    _, max_iter, tol, _ = check_em_settings(1, max_iter, tol, 0.0)
    J, K = x.n_annotators, x.n_classes
    group, G, groups_reason = _resolve_groups(x, model, groups, func)
    n_rep = _n_repeats(x)
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (x.n_items,) or not np.all(np.isfinite(weights)) or (weights < 0).any():
            raise ValueError(f"{func}: `weights` must be None or finite non-negative numbers of shape ({x.n_items},), "
                             f"one per item; got shape {weights.shape}.")
        if path == "patterns":
            raise ValueError(f"{func}: path='patterns' does not take item `weights`; use path='sparse' or 'auto'.")
        path, path_reason = "sparse", "item weights"
    else:
        path, path_reason = _choose_path(x, path, n_rep, func)
    # "auto": SQUAREM after PLAIN_STEPS plain iterations on the sparse path (fits that plain EM settles by then keep
    # its result); a warm refit (`init`, the bootstrap's) stays plain: from the fit it converges in a few steps.
    accelerated = resolve_accelerate(accelerate, path == "sparse" and (init is None or accelerate is True),
                                     x.item.size, min_responses=0)
    plain_steps = PLAIN_STEPS if accelerated and isinstance(accelerate, str) else 0
    conf_pc, prev_pc = _prior_counts(prior, K, func)
    notes = []
    n_labels = np.bincount(x.annotator, weights=None if weights is None else weights[x.item],
                           minlength=J).astype(np.float64)
    if (n_labels == 0).any():
        if init is None:
            raise ValueError(f"{func}: annotators {_preview(np.flatnonzero(n_labels == 0))} gave no label. Drop them, "
                             "or pass `init` to keep their confusion matrices at a previous fit.")
        return _fit_labelled(x, init, G, func, model=model, groups=groups, n_starts=n_starts, seed=seed,
                             max_iter=max_iter, tol=tol, prior=prior, path=path, accelerate=accelerate)
    if J == 2 and len(np.unique(group)) == 1:
        notes.append((IdentifiabilityWarning,
                      f"{func}: two annotators and one group do not identify K x K channels (K^2 - 1 free cell "
                      "probabilities cannot pin 2 K (K - 1) + K - 1 parameters); the fit is one of many. Add "
                      "annotators, score groups or gold labels."))
    compressed = _compress(x, group, G) if path == "patterns" else None
    if init is None:
        C0, p0 = _vote_start(x, group, G, conf_pc, prev_pc, compressed, weights)
    else:
        C0, p0 = _warm_start(init, J, K, G, func)
    Cr, pr = _random_starts(n_starts, J, K, G, seed)
    theta0 = np.concatenate([np.concatenate([C0.ravel(), p0.ravel()])[None],
                             np.concatenate([Cr.reshape(n_starts, J * K * K), pr.reshape(n_starts, G * K)], axis=1)])  # explicit sizes: n_starts may be 0
    shape_c = (J, K, K)
    with x64():
        if path == "patterns":
            patterns, grid = compressed
            out = _run_patterns(theta0, patterns, grid, conf_pc, prev_pc, np.float64(tol), max_iter=max_iter,
                                shape_c=shape_c)
        else:
            out = _run_sparse(theta0, *_sparse_inputs(x, group, weights), conf_pc, prev_pc, np.float64(tol), n_groups=G,
                              max_iter=max_iter, shape_c=shape_c, accelerate=accelerated, plain_steps=plain_steps)
        theta, obj, n_iter, status, trace = (np.asarray(v) for v in out)
    nc = J * K * K
    cands = []
    for s in range(theta.shape[0]):
        if not (np.isfinite(obj[s]) and np.all(np.isfinite(theta[s]))):
            continue
        C, pi = theta[s, :nc].reshape(J, K, K), theta[s, nc:].reshape(G, K)
        C, pi, perm, ok = _orient(C, pi, n_labels)
        cands.append((s, C, pi, perm, ok, status[s] == CONVERGED, float(obj[s])))
    if not cands:
        failed = [(int(k), failure_reason(status[k], n_iter[k], max_iter)) for k in range(theta.shape[0])]
        raise ValueError(all_failed_message(func, theta.shape[0], failed, "nonfinite"))
    # The binary contract (core.starts rule 5) with the K-class orientation rule (module rule 3) as the screen:
    # converged oriented starts, else oriented starts stopped by max_iter; then, K-class only, the best converged
    # (else finite) start although no start is oriented, with an IdentifiabilityWarning.
    tiers = ([c for c in cands if c[4] and c[5]], [c for c in cands if c[4]], [c for c in cands if c[5]], cands)
    tier = next(k for k, t in enumerate(tiers) if t)
    pool = tiers[tier]
    top = max(c[6] for c in pool)
    sel = min((c for c in pool if c[6] >= top - TIE_RTOL * (1.0 + abs(top))), key=lambda c: c[0])
    s, C, pi, perm, ok, conv, objective = sel
    if not conv:
        notes.append((ConvergenceWarning, unconverged_message(
            func, max_iter, {"selected": int(s), "objective": objective},
            other_starts="more `n_starts`, or `init=` a previous fit")))
    if not ok:
        notes.append((IdentifiabilityWarning,
                      f"{func}: no {'converged ' if conv else ''}start has a crowd-average confusion matrix whose row "
                      "maxima lie on the diagonal, even after relabelling the classes: the crowd does not say which "
                      "latent class is which. The highest-likelihood fit is returned; add reliable annotators or gold "
                      "labels."))
    lj = None
    if path == "patterns":
        lp = _log_joint_patterns(patterns, C)[None, :, :] + np.log(np.clip(pi, 1e-12, 1.0))[:, None, :]
        loglik = float(np.sum(grid * _logsumexp_rows(lp.reshape(-1, K)).reshape(grid.shape)))
    else:
        lj = _log_joint_items(x.item, x.annotator, x.label, x.n_items, group, x.gold, C, pi)
        loglik = float(np.sum(_logsumexp_rows(lj) if weights is None else weights * _logsumexp_rows(lj)))
    with x64():
        use = np.asarray(usable_confusions(C))
    if not use.all():
        notes.append((SmallGapWarning, _unusable_text(func, np.flatnonzero(~use))))
    for cls, text in notes:
        _warnings.warn(text, cls, stacklevel=2)
    it = int(n_iter[s])
    prior_out = None if prior is None else (conf_pc + 1.0, prev_pc + 1.0)
    return MulticlassEMFit(confusion=C, prevalence=pi, groups=group, n_groups=G, log_likelihood=loglik, n_iter=it,
                           converged=bool(conv and ok), path=path, model=model, classes=x.classes,
                           warnings=tuple(t for _, t in notes), objective=objective,
                           start_logliks=np.where(np.isfinite(obj), obj, np.nan), selected_start=int(s),
                           loglik_trace=trace[s, :it + 1], path_reason=path_reason, groups_reason=groups_reason,
                           label_permutation=perm, prior=prior_out, n_labels=n_labels)


def _unusable_text(func: str, annotators) -> str:
    """The SmallGapWarning text for the annotators (indices) whose fitted confusion matrix is near singular."""
    return (f"{func}: annotators {_preview(annotators)} have a near-singular fitted confusion matrix (condition number "
            f"> {MAX_CONDITION}): their labels say little about the clean label (spammers) and get weight 0 in "
            "corrected targets.")


def _fit_labelled(x: _Arrays, init, G: int, func: str, **kwargs) -> MulticlassEMFit:
    """:func:`fit_em_multiclass` with ``init`` when some annotators have no label in ``x`` (a bootstrap replicate
    that drew none of their items): the annotators with labels are fitted, warm-started at ``init``; the others
    keep their ``init`` confusion matrix (relabelled with the fit's latent classes when rule 3 relabels them).

    The likelihood of ``x`` does not depend on the confusion matrix of an annotator without labels, and no item of
    ``x`` is corrected with it, so every value is a maximiser and the data's NC-ECE is the same for all; the warm
    start is the one that leaves a bootstrap's confusion draws centred at the full-sample fit.
    """
    J, K = x.n_annotators, x.n_classes
    C0, p0 = _warm_start(init, J, K, G, func)  # validated at full size
    kept = np.asarray(init.confusion if isinstance(init, MulticlassEMFit) else init[0], dtype=np.float64).copy()
    n_labels = np.bincount(x.annotator, minlength=J).astype(np.float64)
    present = np.flatnonzero(n_labels > 0)
    index = np.full(J, -1, np.int64)
    index[present] = np.arange(present.size)
    sub = _Refit((x.item, index[x.annotator], x.label), x.n_items, int(present.size), K, x.probs, x.gold)
    with _warnings.catch_warnings(record=True) as record:  # re-issued below with the full data's indices
        _warnings.simplefilter("always")
        fit = fit_em_multiclass(sub, init=(C0[present], p0), **kwargs)
    if fit.label_permutation is not None:  # the latent classes of the kept matrices follow the fit's relabelling
        kept = kept[:, np.argsort(fit.label_permutation), :]
    kept[present] = fit.confusion
    texts = []
    for w in record:
        text = str(w.message)
        if issubclass(w.category, SmallGapWarning):
            with x64():
                use = np.asarray(usable_confusions(fit.confusion))
            text = _unusable_text(func, present[~use])
        texts.append(text)
        _warnings.warn(text, w.category, stacklevel=3)
    return replace(fit, confusion=kept, classes=x.classes, warnings=tuple(texts), n_labels=n_labels)


class _Refit(NamedTuple):
    """The data of one bootstrap replicate, in the shape :func:`_as_arrays` reads."""

    responses: tuple
    n_items: int
    n_annotators: int
    n_classes: int
    probs: np.ndarray
    gold: np.ndarray | None


def multiclass_em_estimator(*, model: str = "grouped", n_quantiles: int = 2, n_starts: int = 4, refit_starts: int = 0,
                            seed: int = 0, max_iter: int = 1000, tol: float = 1e-8, prior=None, path: str = "auto"):
    """The ``estimator`` of :func:`~noisycal_bayes.reference.bootstrap_multiclass_nc_ece`: EM, warm-started refits.

    Parameters
    ----------
    model : {"grouped", "dawid_skene"}, default "grouped"
        As in :func:`fit_em_multiclass`; the grouped model's groups are
        :func:`~noisycal_bayes.core.score_groups` ``(probs, n_quantiles=n_quantiles)`` of the items passed (the
        replicate's items: the same recipe, predicted class x confidence quantile, on every replicate).
    n_quantiles : int, default 2
    n_starts : int, default 4
        Random starts besides the majority-vote start for a call without ``init`` (the full-sample fit).
    refit_starts : int, default 0
        Random starts besides the warm start for a call with ``init`` (a replicate): 0 refits from the full-sample
        fit alone, which is both faster and the mode that the replicate's likelihood surface has near the fit.
    seed, max_iter, tol, prior, path
        As in :func:`fit_em_multiclass`.

    Returns
    -------
    callable
        ``estimator(responses, n_items, probs, *, init=None, gold=None) -> (confusion (J, K, K), prevalence)``;
        ``responses`` an ``(item, annotator, label)`` tuple, ``probs`` (n_items, K), ``init`` a
        ``(confusion, prevalence)`` warm start (:func:`fit_em_multiclass`'s ``init``), ``gold`` (n_items,) observed
        clean labels (-1 unknown) of the items passed. ``prevalence`` is (K,) for ``"dawid_skene"`` and (G, K) for
        ``"grouped"``.

    Raises
    ------
    ValueError
        Bad ``model`` or ``n_quantiles``; when called, as :func:`fit_em_multiclass`.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_multiclass
    >>> sim = simulate_multiclass(2000, 3, 3, accuracy=0.8, seed=0)
    >>> est = multiclass_em_estimator(model="dawid_skene")
    >>> resp = (sim.item, sim.annotator, sim.label)
    >>> conf, prev = est(resp, 2000, sim.probs)
    >>> conf2, _ = est(resp, 2000, sim.probs, init=(conf, prev))  # a warm refit on the same data
    >>> bool(np.abs(conf2 - conf).max() < 1e-5), prev.shape
    (True, (3,))
    """
    from ..core import score_groups

    if model not in ("grouped", "dawid_skene"):
        raise ValueError(f"multiclass_em_estimator: `model` must be 'grouped' or 'dawid_skene'; got {model!r}.")
    n_quantiles = check_positive_int(n_quantiles, name="n_quantiles")
    n_starts = check_positive_int(n_starts, name="n_starts", minimum=0)
    refit_starts = check_positive_int(refit_starts, name="refit_starts", minimum=0)

    def estimator(responses, n_items, probs, *, init=None, gold=None):
        item, ann, lab = (np.asarray(v) for v in responses)
        probs = np.asarray(probs, dtype=np.float64)
        K = probs.shape[1]
        J = int(ann.max()) + 1 if init is None else int(np.shape(init[0])[0])
        data = _Refit((item, ann, lab), int(n_items), J, K, probs, gold)
        groups = score_groups(probs, n_quantiles=n_quantiles) if model == "grouped" else None
        fit = fit_em_multiclass(data, model=model, groups=groups, n_starts=n_starts if init is None else refit_starts,
                                seed=seed, max_iter=max_iter, tol=tol, prior=prior, path=path, init=init)
        prev = fit.prevalence[0] if model == "dawid_skene" else fit.prevalence
        return np.asarray(fit.confusion), np.asarray(prev)

    return estimator


def _log_joint_patterns(patterns, confusion):
    """``log P(pattern_p | Y = y)``, shape (P, K) (NumPy, float64; -1 = missing adds 0)."""
    J, K = confusion.shape[0], confusion.shape[1]
    logc = np.concatenate([np.log(np.clip(confusion, 1e-12, 1.0)), np.zeros((J, K, 1))], axis=2)
    pat = np.where(patterns < 0, K, patterns)
    return logc[np.arange(J)[None, :], :, pat].sum(axis=1)
