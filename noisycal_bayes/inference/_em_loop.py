"""The EM loop, written once for every kind of data: a ``lax.while_loop`` over a parameter vector given an EM map
and an objective, as plain EM steps or as SQUAREM cycles.

The binary EM (:mod:`.em`: pattern and sparse paths), its bootstrap (:mod:`.bootstrap`) and the K-class EM
(:func:`.em.fit_em_multiclass`) differ only in what one EM step computes; the iteration, the status codes
(:mod:`noisycal_bayes.core.starts`) and the stopping rule are these:

- ``theta_t = F(theta_{t-1})`` with ``F`` the EM map (the M-step at the E-step's posterior), in float64;
- stop (``CONVERGED``) at the first ``t`` where ``max |theta_t - theta_{t-1}| <= tol`` and
  ``|l_t - l_{t-1}| <= tol (1 + |l_t|)`` on the objective ``l`` (log-likelihood, plus the log prior for MAP):
  parameters AND objective both stopped moving (the rule of ``noisycal_bayes.reference.fit_em``);
- a non-finite parameter or objective stops the start with ``NONFINITE``; reaching ``max_iter`` with
  ``MAX_ITER``; a start whose objective is not finite at ``theta_0`` never runs (``BAD_START``).

``theta`` is one start (``(P,)``, the form ``vmap`` maps over starts) or a batch of starts (``(S, P)``, the form
whose SQUAREM fallback step runs only when some start needs it). In a batch a start that has stopped keeps its
values while the others iterate, so each start's result is that of its own loop.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..core import multiclass_e_step, multiclass_m_step
from ..core.em import e_step, log_prior, m_step
from ..core.sparse import (CodedResponses, coded_class_e_step, coded_class_m_step, coded_e_step, coded_m_step,
                           coded_responses, sparse_totals)
from ..core.starts import BAD_START, CONVERGED, MAX_ITER, NONFINITE, RUNNING
from ..core.tables import Responses
from ..data.compress import bucket_size
from ._saved import SavedProgram

__all__ = ["DEFAULT_N_STARTS", "DEFAULT_N_STARTS_K", "SQUAREM_MSTEP", "em_loop", "padded_class_responses", "resolve_accelerate", "run_class_patterns",
           "run_class_sparse", "small_change", "squarem_cycle"]


#: SQUAREM's step-length growth factor (``mstep`` of Varadhan & Roland 2008, their default).
SQUAREM_MSTEP = 4.0


def resolve_accelerate(accelerate, sparse: bool, n_responses: int, *, min_responses: int) -> bool:
    """``accelerate`` (``"auto"``, True or False) for a fit on the sparse path (``sparse``) or not: whether the EM
    loop runs SQUAREM cycles. ``"auto"``: on the sparse path with at least ``min_responses`` responses; the
    pattern path runs plain EM, whose steps cost little at any number of items."""
    if isinstance(accelerate, str):
        if accelerate != "auto":
            raise ValueError(f"`accelerate` must be 'auto', True or False; got {accelerate!r}.")
        return bool(sparse and n_responses >= min_responses)
    if not isinstance(accelerate, (bool, np.bool_)):
        raise ValueError(f"`accelerate` must be 'auto', True or False; got {accelerate!r}.")
    if accelerate and not sparse:
        raise ValueError("`accelerate=True` needs the sparse path (path='sparse'); the pattern path runs plain EM, "
                         "whose steps cost little at any number of items.")
    return bool(accelerate)


def _where_start(mask, new, old, axis: int):
    """``new`` where the start's ``mask`` holds, else ``old``; ``mask`` () or (S,), the starts on ``axis``."""
    def pick(a, b):
        if jnp.ndim(mask) == 0:
            return jnp.where(mask, a, b)
        shape = [1] * a.ndim
        shape[axis] = mask.shape[0]
        return jnp.where(mask.reshape(shape), a, b)
    return jax.tree.map(pick, new, old)


def small_change(new, theta, new_obj, obj, tol):
    """The reference stopping rule, per start: parameters AND objective both stopped moving (``tol``)."""
    return ((jnp.max(jnp.abs(new - theta), axis=-1) <= tol)
            & (jnp.abs(new_obj - obj) <= tol * (1.0 + jnp.abs(new_obj))))


def em_loop(theta0, evaluate, em_map, tol, *, max_iter: int, keep_trace: bool = True, accelerate: bool = False,
            plain_steps: int = 0, post_axis: int = -1, bounds=(0.0, 1.0)):
    """EM from ``theta0`` until every start has stopped (module docstring).

    Parameters
    ----------
    theta0 : array of shape (P,) or (S, P)
        One start, or a batch of starts.
    evaluate : callable
        ``evaluate(theta) -> (objective, posterior)``: the objective at ``theta`` (shape () or (S,)) and the
        E-step there (any pytree; one pass serves both). ``em_map(posterior) -> theta``: the M-step.
    tol : float
    max_iter : int
    keep_trace : bool, default True
        Record the objective after each iteration, ``trace`` of shape (..., max_iter + 1); else (..., 1).
    accelerate : bool, default False
        SQUAREM cycles (:func:`squarem_cycle`) instead of single EM steps; an iteration is then one cycle.
    plain_steps : int, default 0
        With ``accelerate``: the first ``plain_steps`` iterations are plain EM steps, the cycles start after them
        (the batch switches together). A start that plain EM stops within them has the plain loop's result.
    post_axis : int, default -1
        The axis of the starts in the posterior's leaves (batched ``theta`` only).
    bounds : (float, float), default (0, 1)
        Where the parameters live; a SQUAREM extrapolation is clipped into them before its stabilising EM step.

    Returns
    -------
    ``(theta, objective, n_iter, status, trace)``, each with the starts' leading shape.
    """
    obj0, post0 = evaluate(theta0)
    lead = jnp.shape(obj0)
    trace = jnp.full(lead + (max_iter + 1 if keep_trace else 1,), jnp.nan, dtype=theta0.dtype)
    trace = trace.at[..., 0].set(obj0)
    status = jnp.where(jnp.isfinite(obj0), RUNNING, BAD_START)
    # SQUAREM's largest step length per start (Varadhan & Roland 2008, the adaptive ``step.max``): starts at 1.
    step_max = jnp.ones(lead, theta0.dtype)

    def body(c):
        it, theta, obj, post, st, n_it, tr, smax = c
        it = it + 1
        running = st == RUNNING

        def plain(_):
            new = em_map(post)
            new_obj, new_post = evaluate(new)
            return new, new_obj, new_post, small_change(new, theta, new_obj, obj, tol), smax

        def cycle(_):
            return squarem_cycle(theta, obj, post, smax, evaluate, em_map, tol, running, post_axis=post_axis,
                                 bounds=bounds)

        if not accelerate:
            step = plain(None)
        elif plain_steps:
            step = jax.lax.cond(it > plain_steps, cycle, plain, None)
        else:
            step = cycle(None)
        new, new_obj, new_post, small, smax_new = step
        finite = jnp.all(jnp.isfinite(new), axis=-1) & jnp.isfinite(new_obj)
        new_st = jnp.where(~finite, NONFINITE, jnp.where(small, CONVERGED, jnp.where(it >= max_iter, MAX_ITER,
                                                                                     RUNNING)))
        return (it, _where_start(running, new, theta, 0), jnp.where(running, new_obj, obj),
                _where_start(running, new_post, post, post_axis), jnp.where(running, new_st, st),
                jnp.where(running, it, n_it),
                tr.at[..., it].set(jnp.where(running, new_obj, jnp.nan)) if keep_trace else tr,
                jnp.where(running, smax_new, smax))

    state = (jnp.int32(0), theta0, obj0, post0, status, jnp.zeros(lead, jnp.int32), trace, step_max)
    _, theta, obj, _, st, n_it, tr, _ = jax.lax.while_loop(lambda c: jnp.any(c[4] == RUNNING), body, state)
    return theta, obj, n_it, st, tr


def squarem_cycle(theta, obj, post, step_max, evaluate, em_map, tol, running, *, post_axis: int = -1,
                  bounds=(0.0, 1.0)):
    """One SQUAREM cycle (Varadhan & Roland 2008, Scand. J. Statist. 35: 335-353; scheme S3 with their monotone
    safeguard), for starts ``theta`` ((P,) or (S, P)) with objective ``obj`` and E-step ``post`` there.

    ``p1 = F(theta)``, ``p2 = F(p1)`` (``F`` the EM map), ``r = p1 - theta``, ``v = p2 - p1 - r``, step length
    ``a = clip(||r|| / ||v||, 1, step_max)``; the extrapolation ``theta + 2 a r + a^2 v`` (clipped into ``bounds``,
    where the parameters live) is stabilised by one more EM step, ``p_new = F(.)``, which maps it back into the
    model's parameter space (rates in [0, 1], simplex rows). Safeguard: when ``p_new``'s objective is below
    ``obj`` (or not finite) the cycle returns ``p2`` instead, two plain EM steps, which never decrease the
    objective; so the objective never decreases from cycle to cycle. ``a = 1`` gives ``p_new = F(p2)``, three
    plain steps. ``step_max`` grows by :data:`SQUAREM_MSTEP` when the step reached it and shrinks back (not
    below 1) when such a step was rejected (their adaptive rule).

    Stopping: the first EM step of the cycle, ``theta -> p1``, is a plain EM step from the current iterate; when it
    meets the reference rule (:func:`small_change`) the cycle returns ``p1``, the point where plain EM stops
    under the same rule. The accelerated and the plain loop therefore stop by one criterion on one map, and
    their results differ by the plain loop's own distance to the fixed point (``tol r / (1 - r)`` for an EM
    rate ``r``), not by anything the extrapolation adds.

    Returns ``(theta_new, objective, posterior, converged, step_max_new)``.
    """
    p1 = em_map(post)
    obj1, post1 = evaluate(p1)
    small = small_change(p1, theta, obj1, obj, tol)
    p2 = em_map(post1)
    r = p1 - theta
    v = p2 - p1 - r
    sr2, sv2 = jnp.sum(r * r, axis=-1), jnp.sum(v * v, axis=-1)
    # S3 step length ||r|| / ||v|| (v = 0: the map is locally a translation; take the plain step length 1).
    alpha = jnp.where(sv2 > 0, jnp.sqrt(sr2 / jnp.where(sv2 > 0, sv2, 1.0)), 1.0)
    alpha = jnp.clip(jnp.where(jnp.isfinite(alpha), alpha, 1.0), 1.0, step_max)
    a = alpha[..., None]
    extrapolated = jnp.clip(theta + 2.0 * a * r + a * a * v, *bounds)
    _, post_x = evaluate(extrapolated)
    p_new = em_map(post_x)
    obj_new, post_new = evaluate(p_new)
    accept = jnp.isfinite(obj_new) & (obj_new >= obj) & jnp.all(jnp.isfinite(p_new), axis=-1)
    reject = running & ~accept & ~small

    def fall_back(_):
        p = _where_start(reject, p2, p_new, 0)
        o, q = evaluate(p)
        return p, jnp.where(reject, o, obj_new), _where_start(reject, q, post_new, post_axis)

    # The fallback E-step runs only in the (rare) cycles where some start rejected its extrapolation.
    p_out, obj_out, post_out = jax.lax.cond(jnp.any(reject), fall_back, lambda _: (p_new, obj_new, post_new), None)
    at_max = alpha >= step_max
    step_new = jnp.where(reject & at_max, jnp.maximum(1.0, step_max / SQUAREM_MSTEP),
                         jnp.where(at_max, step_max * SQUAREM_MSTEP, step_max))
    # A converged start stops at p1 (the plain EM step), as the plain loop would.
    return (_where_start(small, p1, p_out, 0), jnp.where(small, obj1, obj_out),
            _where_start(small, post1, post_out, post_axis), small, step_new)


# ------------------------------------------------------------------------------------------------ compiled programs
# The binary EM: patterns (one em_loop per start under vmap) and sparse responses (a batch of starts).
def _split(theta, n_annotators):
    return theta[:n_annotators], theta[n_annotators:2 * n_annotators], theta[2 * n_annotators:]


def _em_program(n_rows: int, n_starts: int, *, n_annotators: int, n_groups: int, prior, max_iter: int):
    """The compiled EM for one static configuration and input shape (:func:`_run_all`), kept per process and,
    with the compilation cache on, saved across processes (:class:`~._sampler.SavedProgram`): a new process
    then neither traces the EM loop again nor compiles it."""
    key = ("em", n_rows, n_starts, n_annotators, n_groups, prior, max_iter)
    program = _EM_PROGRAMS.get(key)
    if program is None:
        fn = partial(_run_all, n_annotators=n_annotators, n_groups=n_groups, prior=prior, max_iter=max_iter)
        program = _EM_PROGRAMS[key] = SavedProgram(fn, partial(jax.jit, keep_unused=True), 0,
                                                   name=("em",) + tuple(map(repr, key[1:])))
    return program

# EM programs by static configuration and shape (see `_em_program`); the padded row counts keep them few.
_EM_PROGRAMS: dict = {}


#: Random starts of :func:`fit_em` when they are random and ``n_starts`` is not given.
DEFAULT_N_STARTS = 10
#: Random starts of :func:`~.em.fit_em_multiclass` beside the vote start on the pattern path when ``n_starts`` is not
#: given (the sparse path runs the vote start alone, rule K1 of :mod:`noisycal_bayes.core.starts`).
DEFAULT_N_STARTS_K = 4


def _start_bucket(n_starts: int) -> int:
    """The number of starts the pattern-path EM program runs for ``n_starts`` starts: 1, 2, 4, 10 (the default
    ``n_starts``), then powers of 2, so that a handful of compiled programs serve every ``n_starts``."""
    for size in (1, 2, 4, DEFAULT_N_STARTS):
        if n_starts <= size:
            return size
    return 1 << (int(n_starts) - 1).bit_length()


def _pad_starts(theta0):
    """``theta0`` (S, K) with copies of its first row appended up to :func:`_start_bucket` ``(S)`` rows."""
    extra = _start_bucket(theta0.shape[0]) - theta0.shape[0]
    return np.concatenate([theta0, np.repeat(theta0[:1], extra, axis=0)]) if extra else theta0


def _pattern_steps(patterns, group, counts, *, n_annotators, n_groups, prior):
    """``(evaluate, em_map)`` of :func:`~._em_loop.em_loop` on compressed rows, for one start ``theta`` (K,):
    the objective and the E-step at ``theta`` (one pass over the rows serves both), and the M-step."""

    def evaluate(theta):
        f, t, p = _split(theta, n_annotators)
        loglik, posterior = e_step(patterns, group, counts, f, t, p)
        return loglik + log_prior((f, t, p), prior), posterior

    def em_map(post):
        return jnp.concatenate(m_step(patterns, group, counts, n_groups, post, prior))

    return evaluate, em_map


def _run_all(theta0, patterns, group, counts, tol, *, n_annotators, n_groups, prior, max_iter):
    """EM from every start (rows of ``theta0``) with one :func:`~._em_loop.em_loop` each, batched by ``vmap``.

    Returns ``(theta (S, K), objective (S,), n_iter (S,), status (S,), trace (S, max_iter + 1))``.
    """
    evaluate, em_map = _pattern_steps(patterns, group, counts, n_annotators=n_annotators, n_groups=n_groups,
                                      prior=prior)
    return jax.vmap(lambda th0: em_loop(th0, evaluate, em_map, tol, max_iter=max_iter))(theta0)


def _run_all_sparse(theta0, item, annotator, label, item_group, gold, tol, item_weight=None, padded=None, *,
                    n_annotators, n_groups, prior, max_iter, keep_trace: bool = True, accelerate: bool = False):
    """:func:`_run_all` on sparse responses: the same iteration, stopping rule and outputs, every start at once.

    The starts form a trailing batch axis of the parameters (``fpr`` (J, S), ...) and each EM step is
    :func:`~noisycal_bayes.core.sparse.coded_m_step` then :func:`~noisycal_bayes.core.sparse.coded_e_step`
    (one gather and one segment sum of each kind for all starts; see :mod:`noisycal_bayes.core.sparse`), in one
    batched :func:`~._em_loop.em_loop`. ``item_weight`` (n_items, S) reweights the items per start (bootstrap);
    ``padded`` (n_items, L) the codes per item (:func:`~noisycal_bayes.core.sparse.padded_codes`) or None;
    ``keep_trace=False`` returns a trace of shape (S, 1) (the bootstrap needs none). ``accelerate``: SQUAREM
    cycles instead of single EM steps (:func:`~._em_loop.squarem_cycle`); an iteration is then one cycle.
    """
    responses = Responses(item, annotator, label)
    coded = coded_responses(responses, padded)
    totals = sparse_totals(responses, item_group, n_groups, n_annotators, item_weight)
    J = n_annotators

    def evaluate(theta):  # theta (S, K) -> objective (S,), posterior (n_items, S)
        f, t, p = theta[:, :J].T, theta[:, J:2 * J].T, theta[:, 2 * J:].T
        loglik, posterior = coded_e_step(coded, item_group, totals, f, t, p, gold=gold)
        if prior is not None:
            loglik = loglik + jax.vmap(lambda th: log_prior(_split(th, J), prior))(theta)
        return loglik, posterior

    def em_map(post):  # the M-step from the posterior: the EM map's second half, theta (S, K)
        return jnp.concatenate(coded_m_step(coded, item_group, totals, J, post, prior), axis=0).T

    return em_loop(theta0, evaluate, em_map, tol, max_iter=max_iter, keep_trace=keep_trace, accelerate=accelerate,
                   post_axis=-1)

# Compiled sparse EM programs by static configuration (jit keeps one executable per input shape).
_SPARSE_PROGRAMS: dict = {}


def _sparse_program(n_annotators: int, n_groups: int, prior, max_iter: int, keep_trace: bool = True,
                    accelerate: bool = False):
    """The compiled :func:`_run_all_sparse` for one static configuration (one executable per input shape)."""
    key = (n_annotators, n_groups, prior, max_iter, keep_trace, accelerate)
    program = _SPARSE_PROGRAMS.get(key)
    if program is None:
        program = _SPARSE_PROGRAMS[key] = jax.jit(partial(_run_all_sparse, n_annotators=n_annotators,
                                                          n_groups=n_groups, prior=prior, max_iter=max_iter,
                                                          keep_trace=keep_trace, accelerate=accelerate))
    return program


# ------------------------------------------------------------------------------------------------ K classes
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


def _sparse_loop(theta0, item, code, padded, by_code, item_group, gold, item_weight, conf_pc, prev_pc, tol, *, n_groups,
                 max_iter, shape_c, accelerate, plain_steps):
    """EM from every start (rows of ``theta0``) on coded sparse responses (:func:`padded_class_responses`), one
    batched :func:`~._em_loop.em_loop` whose steps take every start at once (the starts a trailing axis of the
    tables: :func:`~noisycal_bayes.core.sparse.coded_class_e_step`), plain or SQUAREM cycles (``accelerate``) after
    ``plain_steps`` plain steps."""
    J, K, _ = shape_c
    nc = J * K * K
    coded = CodedResponses(item, code, padded)

    def evaluate(theta):  # theta (S, P) -> objective (S,), posterior (n_items, K, S)
        C, pi = theta[:, :nc].reshape((-1,) + shape_c), theta[:, nc:].reshape(theta.shape[0], -1, K)
        ll, post = coded_class_e_step(coded, item_group, C, pi, gold, item_weight)
        return ll + jax.vmap(_log_prior, in_axes=(0, 0, None, None))(C, pi, conf_pc, prev_pc), post

    def em_map(post):
        C, pi = coded_class_m_step(coded, item_group, n_groups, J, post, conf_pc, prev_pc, item_weight, by_code)
        return jnp.concatenate([C.reshape(C.shape[0], -1), pi.reshape(pi.shape[0], -1)], axis=1)

    return em_loop(theta0, evaluate, em_map, tol, max_iter=max_iter, accelerate=accelerate,
                   plain_steps=plain_steps, post_axis=-1)

# Compiled K-class EM programs by path, static configuration and argument shapes (the padded sizes of `bucket_size`
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


def run_class_patterns(theta0, patterns, counts, conf_pc, prev_pc, tol, *, max_iter, shape_c):
    """:func:`_patterns_loop`, compiled once per configuration and shape (:func:`_call`)."""
    return _call(_patterns_loop, (theta0, patterns, counts, conf_pc, prev_pc, tol), max_iter=max_iter,
                 shape_c=shape_c)


def run_class_sparse(theta0, item, code, padded, by_code, item_group, gold, item_weight, conf_pc, prev_pc, tol, *,
                     n_groups, max_iter, shape_c, accelerate=False, plain_steps=0):
    """:func:`_sparse_loop`, compiled once per configuration and shape (:func:`_call`)."""
    return _call(_sparse_loop, (theta0, item, code, padded, by_code, item_group, gold, item_weight, conf_pc, prev_pc,
                                tol),
                 n_groups=n_groups, max_iter=max_iter, shape_c=shape_c, accelerate=accelerate,
                 plain_steps=plain_steps)


def padded_class_responses(x, group, item_weight=None):
    """Coded sparse arrays for :func:`run_class_sparse`, responses and items padded up to
    :func:`~noisycal_bayes.data.compress.bucket_size` sizes: ``(item, code, padded, by_code, group, gold, weight)``.

    ``code = K annotator + label`` (:func:`~noisycal_bayes.core.sparse.class_codes`); padded responses carry the pad
    code ``J K`` (a zero table row, a dropped bin) and belong to the first padded item. ``padded`` is the (items, L)
    code matrix (:func:`~noisycal_bayes.core.sparse.padded_codes`, ``L`` rounded up to a bucket size) or None when
    it would exceed twice the responses; ``by_code`` the ``(item, code)`` pairs sorted by code (the M-step's scatter
    takes sorted indices). Items have weight ``item_weight`` (None: 1); padded
    items weight 0."""
    n, m = x.n_items, x.item.size
    J, K = x.n_annotators, x.n_classes
    n_pad, m_pad = bucket_size(n + 1), bucket_size(m)
    pad_code = J * K
    order = np.argsort(x.item, kind="stable")  # sorted by item: the segment sums take sorted indices
    it = x.item[order].astype(np.int32)
    item = np.concatenate([it, np.full(m_pad - m, n, np.int32)])
    code = np.concatenate([(K * x.annotator + x.label)[order].astype(np.int32),
                           np.full(m_pad - m, pad_code, np.int32)])
    counts = np.bincount(x.item, minlength=n)
    width = bucket_size(int(counts.max()) if counts.size else 1)
    padded = None
    if n_pad * width <= 2 * m_pad:
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        padded = np.full((n_pad, width), pad_code, np.int32)
        padded[it, np.arange(m) - first[it]] = code[:m]
    by = np.argsort(code, kind="stable")
    by_code = (item[by], code[by])
    grp = np.concatenate([group.astype(np.int32), np.zeros(n_pad - n, np.int32)])
    gold = np.full(n_pad, -1, np.int32)
    if x.gold is not None:
        gold[:n] = x.gold
    weight = np.concatenate([np.ones(n) if item_weight is None else item_weight, np.zeros(n_pad - n)])
    return item, code, padded, by_code, grp, gold, weight
