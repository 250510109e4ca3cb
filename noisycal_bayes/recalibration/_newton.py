"""The corrected-loss temperature per draw, shared by the binary and the K-class posterior maps.

Both corrected losses are convex in ``beta = 1/T``, and their derivative in ``beta`` is increasing; the minimiser
over the box ``[1/T_max, 1/T_min]`` is found per draw by safeguarded Newton steps on ``x = log beta`` (a step that
leaves the current bracket is replaced by bisection). Each map supplies its own derivative.
"""
from __future__ import annotations

import numpy as np

#: Newton steps at most (bisection alone would halve the bracket to 1e-30 in 100 steps).
NEWTON_STEPS = 100


def newton_temperatures(grad_hess, n_draws: int, bounds, x0: float = 0.0):
    """Minimise one convex loss in ``beta = 1/T`` per draw.

    Parameters
    ----------
    grad_hess : callable ``(x, rows) -> (g, h)``
        For ``x`` (len(rows),) values of ``log beta`` at the draws ``rows``: the loss's derivative in ``beta``
        (its sign steers the bracket) and the derivative of that in ``log beta`` (the Newton step), each
        (len(rows),).
    n_draws : int
    bounds : (T_min, T_max)
    x0 : float
        Starting ``log beta`` (clipped into the box).

    Returns
    -------
    (T, at_T_min, at_T_max), each of shape (n_draws,)
    """
    t_min, t_max = bounds
    x_lo, x_hi = np.log(1.0 / t_max), np.log(1.0 / t_min)
    every = np.arange(n_draws)
    g_lo, _ = grad_hess(np.full(n_draws, x_lo), every)
    g_hi, _ = grad_hess(np.full(n_draws, x_hi), every)
    lo, hi = np.full(n_draws, x_lo), np.full(n_draws, x_hi)
    x = np.full(n_draws, np.clip(x0, x_lo, x_hi))
    # Draws whose optimum is on the boundary need no iterations.
    active = np.flatnonzero((g_lo < 0) & (g_hi > 0))
    for _ in range(NEWTON_STEPS):
        if active.size == 0:
            break
        xa = x[active]
        g, h = grad_hess(xa, active)
        hi[active] = np.where(g > 0, xa, hi[active])
        lo[active] = np.where(g > 0, lo[active], xa)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = xa - g / h
        inside = np.isfinite(step) & (step > lo[active]) & (step < hi[active])
        new = np.where(inside, step, 0.5 * (lo[active] + hi[active]))
        x[active] = new
        # Converged to a relative precision of 1e-10 in T (rounding jitter is ~1e-15).
        active = active[np.abs(new - xa) >= 1e-10]
    # Derivative already >= 0 at the smallest beta: the optimum is beta_min (T = T_max); <= 0 at the largest:
    # beta_max (T = T_min).
    at_tmax = g_lo >= 0
    at_tmin = g_hi <= 0
    x = np.where(at_tmax, x_lo, np.where(at_tmin, x_hi, x))
    return np.exp(-x), at_tmin, at_tmax


def projected_newton(objective, x0, lo, hi, *, gtol=1e-10, max_iter=100):
    """Minimise a smooth function on the box ``[lo, hi]`` by projected Newton steps with backtracking.

    ``objective(x)`` returns ``(value, gradient, Hessian)``, ``objective(x, hessian=False)`` the value. Variables at
    a bound whose gradient points out of the box are held there; the others take a Newton step (the Hessian is
    lifted to positive definite if needed), projected onto the box, halved until the value decreases enough.
    Returns ``(x, gradient, converged, message)``; converged when the projected gradient is below ``gtol``.
    """
    x = np.clip(x0, lo, hi)
    for it in range(max_iter):
        f, g, h = objective(x)
        if np.max(np.abs(x - np.clip(x - g, lo, hi))) < gtol:
            return x, g, True, f"projected gradient < {gtol:g} after {it} Newton steps"
        held = ((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0))
        free = np.flatnonzero(~held)
        hf = h[np.ix_(free, free)]
        # Lift the free block to positive definite (only when target rows with negative sums make it indefinite).
        low = np.linalg.eigvalsh(hf)[0]
        if low < 1e-12:
            hf = hf + (1e-12 - low) * np.eye(free.size)
        d = np.zeros_like(x)
        d[free] = -np.linalg.solve(hf, g[free])
        step = 1.0
        while True:
            xn = np.clip(x + step * d, lo, hi)
            if objective(xn, hessian=False) <= f + 1e-4 * g @ (xn - x) or step < 1e-10:
                break
            step *= 0.5
        if np.max(np.abs(xn - x)) < 1e-15:
            f, g, _ = objective(xn)
            ok = np.max(np.abs(xn - np.clip(xn - g, lo, hi))) < 1e-6
            return xn, g, ok, f"no further progress after {it + 1} Newton steps"
        x = xn
    f, g, _ = objective(x)
    return x, g, False, f"no convergence in {max_iter} Newton steps"
