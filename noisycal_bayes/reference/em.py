"""Dawid-Skene EM, marginal and score-grouped: the reference implementation (paper §4.3, Appendix F.1).

An independent implementation of :func:`noisycal_bayes.fit_em` for cross-checks, with the same signature, defaults and
result type; a Python loop over starts, each start's iterations in one compiled ``lax.while_loop``. Details:
docs/foundations.md, *noisycal_bayes.reference.em*.
"""
from __future__ import annotations

import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..core import ds_loglik, em_step, x64
from ..core.em import log_prior
from ..core.starts import (BAD_START, CONVERGED, MAX_ITER, NONFINITE, TIE_RTOL, check_starts, em_starts,
                           select_start)
from ..data.design import MIN_PREVALENCE_SPREAD
from ..models.em_result import CavityPairs, em_result, prepare_em
from ..models.priors import em_prior_counts
from ..models.result import FitResult
from ..data.binning import Binning
from .._validation import binary_only

METHOD = "em"

__all__ = ["METHOD", "MIN_PREVALENCE_SPREAD", "TIE_RTOL", "em_starts", "fit_em"]


@partial(jax.jit, static_argnames=("n_annotators", "prior"))
def _objective(theta, patterns, group, counts, n_annotators, prior):
    fpr, tpr, prev = theta[:n_annotators], theta[n_annotators:2 * n_annotators], theta[2 * n_annotators:]
    return ds_loglik(patterns, group, counts, fpr, tpr, prev) + log_prior((fpr, tpr, prev), prior)


def _step(theta, patterns, group, counts, n_annotators, n_groups, prior):
    """One EM step on ``theta = concat(fpr, tpr, prevalence)``; returns the new theta and its objective."""
    fpr, tpr, prev = theta[:n_annotators], theta[n_annotators:2 * n_annotators], theta[2 * n_annotators:]
    f, t, p = em_step(patterns, group, counts, n_groups, fpr, tpr, prev, prior)
    new = jnp.concatenate([f, t, p])
    return new, _objective(new, patterns, group, counts, n_annotators, prior)


@partial(jax.jit, static_argnames=("n_annotators", "n_groups", "prior", "trace_size"))
def _iterate(theta0, patterns, group, counts, tol, max_iter, n_annotators, n_groups, prior, trace_size):
    """EM from ``theta0`` until the stopping rule holds (see fit_em Notes, rule 2), or ``max_iter``.

    Returns ``(theta, objective, n_iter, trace (trace_size,) NaN-padded, converged, nonfinite)``;
    ``trace_size >= max_iter + 1``. The loop runs inside one compiled ``lax.while_loop`` only for speed
    (``max_iter`` is traced, the trace length rounded up to a power of 2, so few compilations serve
    every setting); it is the plain iteration.
    """
    obj0 = _objective(theta0, patterns, group, counts, n_annotators, prior)
    trace = jnp.full(trace_size, jnp.nan, dtype=theta0.dtype).at[0].set(obj0)

    def cond(state):
        it, _, _, trace, done, bad = state
        return (it < max_iter) & ~done & ~bad

    def body(state):
        it, theta, obj, trace, _, _ = state
        new, new_obj = _step(theta, patterns, group, counts, n_annotators, n_groups, prior)
        bad = ~(jnp.all(jnp.isfinite(new)) & jnp.isfinite(new_obj))
        small_step = jnp.max(jnp.abs(new - theta)) <= tol
        small_change = jnp.abs(new_obj - obj) <= tol * (1.0 + jnp.abs(new_obj))
        return it + 1, new, new_obj, trace.at[it + 1].set(new_obj), small_step & small_change, bad

    state = (jnp.asarray(0), theta0, obj0, trace, jnp.asarray(False), ~jnp.isfinite(obj0))
    it, theta, obj, trace, done, bad = jax.lax.while_loop(cond, body, state)
    return theta, obj, it, trace, done & ~bad, bad


def _check_prior(prior):
    """Beta pseudo-counts for the M-step from a Prior (or None), or from the deprecated tuple form."""
    if prior is None or not isinstance(prior, (tuple, list)):
        return em_prior_counts(prior)
    try:
        out = tuple((float(a), float(b)) for a, b in prior)
    except (TypeError, ValueError):
        out = ()
    if len(out) != 3 or not all(np.isfinite(v) and v >= 1 for pair in out for v in pair):
        raise ValueError(
            "`prior` must be None, a Prior, or (deprecated) three Beta (alpha, beta) pairs ((a_fpr, b_fpr), "
            "(a_tpr, b_tpr), (a_prev, b_prev)) with every value >= 1 (pseudo-counts alpha - 1, beta - 1 >= 0 keep "
            f"the M-step in [0, 1]); got {prior!r}.")
    (af, bf), (at, bt), pp = out
    hint = (f"Prior(fpr=({af:g}, {bf + bt:g}), u=(1, {bt:g}), prevalence={pp})" if at == 1.0 else
            "fit_map with a Prior (a tpr pseudo-count alpha != 1 has no Prior with closed-form EM)")
    warnings.warn(f"fit_em: a tuple of Beta pairs as `prior` is deprecated; it is used as the M-step pseudo-counts "
                  f"as before. Pass {hint} instead.", DeprecationWarning, stacklevel=3)
    return None if all(v == 1.0 for pair in out for v in pair) else out


def _run_start(theta0, arrays, n_annotators, n_groups, prior, max_iter, tol):
    """Iterate EM from ``theta0``. Returns ``(theta, objective, n_iter, trace, status)`` (NumPy)."""
    trace_size = 1 << int(max_iter).bit_length()  # the next power of 2 above max_iter
    theta, obj, it, trace, converged, bad = _iterate(np.asarray(theta0, np.float64), *arrays, tol, max_iter, n_annotators,
                                                     n_groups, prior, trace_size)
    it = int(it)
    status = (BAD_START if it == 0 else NONFINITE) if bool(bad) else (CONVERGED if bool(converged) else MAX_ITER)
    return np.asarray(theta, dtype=np.float64), float(obj), it, np.asarray(trace)[:max_iter + 1], status


def _run_all(inputs, fpr0, tpr0, prev0, prior_counts, max_iter, tol):
    """Every start in turn; returns stacked ``(theta, objective, n_iter, status, trace)``."""
    n_ann, n_groups = inputs.n_annotators, inputs.n_groups
    # NumPy arrays (converted in NumPy): a jnp conversion of dtype compiles a small program of its own per shape.
    arrays = (np.asarray(inputs.patterns, dtype=np.int32), np.asarray(inputs.row_group, dtype=np.int32),
              np.asarray(inputs.counts, dtype=np.float64))
    runs = [_run_start(np.concatenate([f, t, p]), arrays, n_ann, n_groups, prior_counts, max_iter, tol)
            for f, t, p in zip(fpr0, tpr0, prev0)]
    theta, obj, n_iter, trace, status = (np.array(v) for v in zip(*runs))
    return theta, obj, n_iter, status, trace, arrays


def _vote_start(inputs):
    """``starts="vote"``, in NumPy: the M-step (paper App. F.1) at each row's share of positive labels."""
    pat = np.asarray(inputs.patterns)
    obs, pos = (pat >= 0).astype(float), (pat == 1).astype(float)
    c = np.asarray(inputs.counts, np.float64)
    t = pos.sum(1) / np.maximum(obs.sum(1), 1)
    w1, w0 = c * t, c * (1 - t)
    g = np.asarray(inputs.row_group)
    prev = np.bincount(g, weights=w1, minlength=inputs.n_groups) / np.bincount(g, weights=c, minlength=inputs.n_groups)
    out = (w0 @ pos / (w0 @ obs), w1 @ pos / (w1 @ obs), prev)
    return tuple(np.clip(v, 1e-6, 1 - 1e-6)[None] for v in out)


def _soft_counts(selection, inputs):
    """``(s0, n0, s1, n1, m0, m1)`` at the selected estimate (see ``inference.em.soft_counts``), in NumPy, row by
    row of the compressed table: ``m`` adds ``count_r T_r (1 - T_r) u_rj^2`` per observed cell."""
    pat = np.asarray(inputs.patterns)
    obs, pos = (pat >= 0), (pat == 1)
    f, t = selection["fpr"], selection["tpr"]
    prev = np.atleast_1d(selection["prevalence"])[np.asarray(inputs.row_group)]
    with np.errstate(divide="ignore"):
        l1 = np.where(obs, np.where(pos, np.log(t), np.log1p(-t)), 0.0).sum(1)
        l0 = np.where(obs, np.where(pos, np.log(f), np.log1p(-f)), 0.0).sum(1)
        d = np.log(prev) + l1 - np.log1p(-prev) - l0
    post = 1.0 / (1.0 + np.exp(-d))
    c = np.asarray(inputs.counts, np.float64)
    out = [np.zeros(pat.shape[1]) for _ in range(6)]
    for r in range(pat.shape[0]):
        if c[r] == 0:
            continue
        o, p1 = obs[r], pos[r]
        out[0] += c[r] * (1 - post[r]) * p1
        out[1] += c[r] * (1 - post[r]) * o
        out[2] += c[r] * post[r] * p1
        out[3] += c[r] * post[r] * o
        with np.errstate(divide="ignore", invalid="ignore"):
            out[4] += np.where(o, c[r] * post[r] * (1 - post[r]) * np.where(p1, 1 / f, -1 / (1 - f)) ** 2, 0.0)
            out[5] += np.where(o, c[r] * post[r] * (1 - post[r]) * np.where(p1, 1 / t, -1 / (1 - t)) ** 2, 0.0)
    # Cavity pairs (models.em_result.CavityPairs): per observed cell, the row's log-odds without the cell's own
    # log-likelihood ratio, cell by cell.
    cells = [[], [], [], [], []]
    with np.errstate(divide="ignore"):
        for r in range(pat.shape[0]):
            for j in np.flatnonzero(obs[r]) if c[r] > 0 else ():
                own = np.log(t[j] / f[j]) if pos[r, j] else np.log((1 - t[j]) / (1 - f[j]))
                for lst, v in zip(cells, (j, float(pos[r, j]), float(not pos[r, j]),
                                          1.0 / (1.0 + np.exp(own - d[r])), c[r])):
                    lst.append(v)
    pairs = CavityPairs(np.asarray(cells[0], np.int64), *(np.asarray(v, np.float64) for v in cells[1:]))
    return (*out, pairs)


def _loglik(selection, arrays, n_annotators, prior_counts) -> float:
    """Log-likelihood at the selected estimate (the objective itself unless MAP added the log prior)."""
    if prior_counts is None:
        return selection["objective"]
    theta = np.concatenate([selection["fpr"], selection["tpr"], selection["prevalence"]])
    return float(_objective(jnp.asarray(theta), *arrays, n_annotators, None))


def _pooled_orientation(theta, n_annotators, n_labels):
    """The crowd rule, written out here independently of ``core.starts.orient_crowd``: each start's label exchange
    ``Y <-> 1 - Y`` is fixed so that the label-weighted mean gap ``sum_j n_j (tpr_j - fpr_j) / sum_j n_j`` is >= 0
    (exchanging swaps fpr and tpr and complements the prevalences). Returns the oriented copy of ``theta``."""
    out = np.array(theta, dtype=np.float64, copy=True)
    J = n_annotators
    for s in range(out.shape[0]):
        fpr, tpr = out[s, :J].copy(), out[s, J:2 * J].copy()
        pooled = float(np.sum(n_labels * (tpr - fpr)) / np.sum(n_labels))
        if pooled < 0:
            out[s, :J], out[s, J:2 * J], out[s, 2 * J:] = tpr, fpr, 1.0 - out[s, 2 * J:]
    return out


def fit_em(data, *, model: str = "grouped", groups=Binning.equal_mass(5), n_starts: int = 10, seed: int = 0, prior=None,
           max_iter: int = 1000, tol: float = 1e-8, min_gap: float = 0.05, starts=None,
           orientation: str = "auto") -> FitResult:
    """Maximum-likelihood (or MAP) Dawid-Skene channels by EM, one start after another (reference).

    The contract of :func:`noisycal_bayes.fit_em` (same arguments, defaults, result and warnings),
    implemented independently; the two agree to rounding from identical starts.

    Parameters
    ----------
    data, model, n_starts, seed, max_iter, tol, min_gap, starts, orientation
        As in :func:`noisycal_bayes.fit_em` (``model`` in ``{"grouped", "dawid_skene", "histogram"}``). This
        EM always works on compressed (group, pattern) counts (``path="patterns"``), so it refuses gold labels;
        under ``orientation="crowd"`` (or ``"auto"`` falling back to it) each start is oriented here by the
        pooled-gap rule, in code of its own, before the shared selection.
    groups : Binning, int or int array of shape (n_items,), default ``Binning.equal_mass(5)``
        Score groups, as in :func:`noisycal_bayes.fit_em` (an int ``k`` is ``Binning.equal_width(k)``; needs
        scores); empty groups are dropped. ``None``: for SufficientStats their own groups, as in
        :func:`noisycal_bayes.fit_em`.
    prior : None or Prior
        As in :func:`noisycal_bayes.fit_em`. Deprecated: three Beta pairs ``((a_fpr, b_fpr), (a_tpr, b_tpr),
        (a_prev, b_prev))`` (each value >= 1), used as the M-step pseudo-counts directly
        (``Prior(fpr=(a_fpr, b_fpr + b_tpr), u=(1, b_tpr), prevalence=(a_prev, b_prev))`` gives the same
        counts when ``a_tpr = 1``).

    Returns
    -------
    FitResult
        As :func:`noisycal_bayes.fit_em` returns it (``method="em"``, ``draws=None``, ``loglik_trace`` of the
        selected start, ``start_logliks``, ``failed_starts``, ``selected_start``).

    Raises
    ------
    ValueError
        As :func:`noisycal_bayes.fit_em`, and for gold labels.

    Warns
    -----
    IdentifiabilityWarning, SmallGapWarning, ConvergenceWarning
        As :func:`noisycal_bayes.fit_em`.
    DeprecationWarning
        A tuple ``prior``.

    Notes
    -----
    The rules of both EMs (starts, stopping, orientation, screening, selection) are spelled out once, in
    :mod:`noisycal_bayes.core.starts`; only the iteration is this module's own. Neither EM adds a moment-estimator
    start: stack :func:`~noisycal_bayes.reference.moments.moment_start` under :func:`em_starts` and pass ``starts=``.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=0)
    >>> est = fit_em(sim.data, n_starts=3)
    >>> est.identified, bool(np.allclose(est.channel.fpr, [0.1, 0.2, 0.1], atol=0.05))
    (True, True)
    """
    binary_only(data, "reference.fit_em", "fit_em_multiclass")
    func = "fit_em"
    gold = getattr(data, "gold", None)
    if gold is not None and np.any(np.asarray(gold) >= 0):
        raise ValueError("reference.fit_em works on compressed (group, pattern) counts and cannot use gold labels "
                         "(observed latent labels enter item by item); use noisycal_bayes.fit_em, whose sparse path "
                         "takes them.")
    prior_counts = _check_prior(prior)
    data, model, assignment, notes, inputs, settings = prepare_em(
        data, model=model, groups=groups, n_starts=n_starts, seed=seed, max_iter=max_iter, tol=tol, min_gap=min_gap,
        starts=starts, func=func, orientation=orientation, path="patterns")
    n_ann, n_groups, max_iter = data.n_annotators, inputs.n_groups, settings["max_iter"]
    fpr0, tpr0, prev0 = (_vote_start(inputs) if isinstance(starts, str) and starts == "vote"
                         else check_starts(starts, n_ann, n_groups) if starts is not None
                         else em_starts(n_ann, n_groups, settings["n_starts"], seed))
    with x64():
        theta, obj, n_iter, status, trace, arrays = _run_all(inputs, fpr0, tpr0, prev0, prior_counts, max_iter,
                                                             settings["tol"])
        # Labels per annotator: count-weighted observed cells of the compressed table.
        n_labels = np.asarray(inputs.counts) @ (np.asarray(inputs.patterns) >= 0)
        pooled = _pooled_orientation(theta, n_ann, n_labels)

        def choose(unconverged):
            sel = select_start(theta, obj, n_iter, status, trace, n_annotators=n_ann, min_gap=settings["min_gap"],
                               max_iter=max_iter, annotator_ids=data.annotator_ids, orientation="every",
                               unconverged=unconverged)
            if orientation == "crowd" or (orientation == "auto" and sel["selected"] is None):
                crowd = select_start(pooled, obj, n_iter, status, trace, n_annotators=n_ann,
                                     min_gap=settings["min_gap"], max_iter=max_iter,
                                     annotator_ids=data.annotator_ids, orientation="crowd", n_labels=n_labels,
                                     unconverged=unconverged)
                if orientation == "crowd" or crowd["selected"] is not None:
                    crowd["screened_every"] = sel["failed"] if orientation == "auto" else None
                    if crowd["selected"] is not None:
                        s = crowd["selected"]
                        crowd["label_exchanged"] = bool(np.any(pooled[s] != theta[s]))
                    sel = crowd
            return sel

        # Converged starts first; only when none is accepted, those stopped by max_iter too (rule 5's tiers).
        sel = choose(False)
        if sel["selected"] is None:
            sel = choose(True)
        loglik = np.nan if sel["selected"] is None else _loglik(sel, arrays, n_ann, prior_counts)
        if sel["selected"] is not None:
            sel["soft_counts"] = _soft_counts(sel, inputs)
            sel["n_labels"] = n_labels
    return em_result(data, model, assignment, inputs, sel, prior, notes, func, settings=settings, loglik=loglik)
