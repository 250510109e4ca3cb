"""The EM loop, written once for every kind of data: a ``lax.while_loop`` over a parameter vector given an EM map
and an objective, as plain EM steps or as SQUAREM cycles.

The binary EM (:mod:`.em`: pattern and sparse paths), its bootstrap (:mod:`.bootstrap`) and the K-class EM
(:mod:`.multiclass_em`) differ only in what one EM step computes; the iteration, the status codes
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

import jax
import jax.numpy as jnp
import numpy as np

from ..core.starts import BAD_START, CONVERGED, MAX_ITER, NONFINITE, RUNNING

__all__ = ["SQUAREM_MSTEP", "em_loop", "resolve_accelerate", "small_change", "squarem_cycle"]

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
