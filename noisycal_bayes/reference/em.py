"""Dawid-Skene EM, marginal and score-grouped: the reference implementation (paper §4.3, Appendix F.1).

E-step ``T_r = P(Y = 1 | pattern_r, g_r)``; M-step ``pi_g`` = mean of ``T`` in group ``g``,
``tpr_j = sum_r c_r T_r A_rj / sum_r c_r T_r O_rj`` and ``fpr_j`` the same with ``1 - T_r`` (``O`` = observed),
all on compressed (group, pattern) counts (:func:`noisycal_bayes.core.em_step`, in float64). This is a
plain Python loop over starts (each start's iterations run in one compiled ``lax.while_loop``); a
vectorised JAX version must reproduce it exactly given the same starts, so every rule is spelled out
in :func:`fit_em`'s Notes.
"""
from __future__ import annotations

import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import _preview, check_positive_int
from ..core import ds_loglik, em_step, x64
from ..core.starts import check_starts as _check_starts, em_starts, orient as _orient
from ..data import compress_patterns, pad_patterns, padded_size
from ..warnings import ConvergenceWarning, IdentifiabilityWarning, SmallGapWarning
from .channels import (ChannelEstimate, check_annotation_set, co_labelling_problem, group_moments, make_channel,
                       require_several_annotators, resolve_data_groups)
from .moments import moments_three

METHOD = "em"
#: The moment start is clipped into this interval so that EM does not start on the boundary.
START_CLIP = (0.01, 0.99)
#: Accepted starts whose objective is within this relative distance of the best are ties.
TIE_RTOL = 1e-9
#: Two-annotator grouped fits warn when max(prevalence) - min(prevalence) is below this.
MIN_PREVALENCE_SPREAD = 0.05


def _log_prior(fpr, tpr, prevalence, prior):
    """Unnormalised Beta log-densities ``(alpha - 1) log p + (beta - 1) log(1 - p)`` summed (0 when flat)."""
    if prior is None:
        return 0.0
    total = 0.0
    for p, (al, be) in zip((fpr, tpr, prevalence), prior):
        # Clip as the likelihood does, so a rate on the boundary with a flat side contributes 0, not NaN.
        p = jnp.clip(p, 1e-12, 1 - 1e-12)
        total = total + jnp.sum((al - 1.0) * jnp.log(p) + (be - 1.0) * jnp.log1p(-p))
    return total


@partial(jax.jit, static_argnames=("n_annotators", "n_groups", "prior"))
def _objective(theta, patterns, group, counts, n_annotators, n_groups, prior):
    fpr, tpr, prev = theta[:n_annotators], theta[n_annotators:2 * n_annotators], theta[2 * n_annotators:]
    return ds_loglik(patterns, group, counts, fpr, tpr, prev) + _log_prior(fpr, tpr, prev, prior)


def _step(theta, patterns, group, counts, n_annotators, n_groups, prior):
    """One EM step on ``theta = concat(fpr, tpr, prevalence)``; returns the new theta and its objective."""
    fpr, tpr, prev = theta[:n_annotators], theta[n_annotators:2 * n_annotators], theta[2 * n_annotators:]
    f, t, p = em_step(patterns, group, counts, n_groups, fpr, tpr, prev, prior)
    new = jnp.concatenate([f, t, p])
    return new, _objective(new, patterns, group, counts, n_annotators, n_groups, prior)


@partial(jax.jit, static_argnames=("n_annotators", "n_groups", "prior", "trace_size"))
def _iterate(theta0, patterns, group, counts, tol, max_iter, n_annotators, n_groups, prior, trace_size):
    """EM from ``theta0`` until the stopping rule holds (see fit_em Notes, rule 2), or ``max_iter``.

    Returns ``(theta, objective, n_iter, trace (trace_size,) NaN-padded, converged, nonfinite)``;
    ``trace_size >= max_iter + 1``. The loop runs inside one compiled ``lax.while_loop`` only for speed
    (``max_iter`` is traced, the trace length rounded up to a power of 2, so few compilations serve
    every setting); it is the plain iteration.
    """
    obj0 = _objective(theta0, patterns, group, counts, n_annotators, n_groups, prior)
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
    if prior is None:
        return None
    try:
        out = tuple((float(a), float(b)) for a, b in prior)
    except (TypeError, ValueError):
        out = ()
    if len(out) != 3 or not all(np.isfinite(v) and v >= 1 for pair in out for v in pair):
        raise ValueError(
            "`prior` must be None or three Beta (alpha, beta) pairs ((a_fpr, b_fpr), (a_tpr, b_tpr), (a_prev, b_prev)) "
            f"with every value >= 1 (pseudo-counts alpha - 1, beta - 1 >= 0 keep the M-step in [0, 1]); got {prior!r}.")
    return out


def _moment_start(data, group, n_groups):
    """The moment estimate as an EM start (fpr, tpr (J,), prevalence (G,)), or None if not identified."""
    est = moments_three(data)
    if not est.identified:
        return None
    lo, hi = START_CLIP
    fpr, tpr = np.clip(est.channel.fpr, lo, hi), np.clip(est.channel.tpr, lo, hi)
    if n_groups == 1:
        prev = np.clip(est.prevalence, lo, hi)
    else:
        # Per group, the mean over annotators of the corrected group mean (m_jg - a_j) / delta_j.
        means, _, _, _ = group_moments(data.labels, group, n_groups)
        with np.errstate(invalid="ignore"):
            corr = (means - est.channel.fpr[:, None]) / est.channel.gap[:, None]
            prev = np.nanmean(corr, axis=0)
        prev = np.clip(np.where(np.isfinite(prev), prev, float(est.prevalence[0])), lo, hi)
    return fpr, tpr, prev


def _run_start(theta0, arrays, n_annotators, n_groups, prior, max_iter, tol):
    """Iterate EM from ``theta0``. Returns ``(theta, objective, n_iter, trace, converged, reason)``."""
    trace_size = 1 << int(max_iter).bit_length()  # the next power of 2 above max_iter
    theta, obj, it, trace, converged, bad = _iterate(jnp.asarray(theta0), *arrays, tol, max_iter, n_annotators,
                                                     n_groups, prior, trace_size)
    it = int(it)
    theta, obj, trace = np.asarray(theta, dtype=np.float64), float(obj), np.asarray(trace)[:it + 1]
    if bool(bad):
        why = "non-finite objective at the start" if it == 0 else f"non-finite parameters at iteration {it}"
        return theta, obj, it, trace, False, why
    if not bool(converged):
        return theta, obj, it, trace, False, f"did not converge within max_iter={max_iter} iterations"
    return theta, obj, it, trace, True, ""


def fit_em(data, *, groups=None, n_starts: int = 10, seed: int = 0, max_iter: int = 1000, tol: float = 1e-8,
           min_gap: float = 0.05, prior=None, starts=None) -> ChannelEstimate:
    """Maximum-likelihood (or MAP) Dawid-Skene channels by EM from several starts.

    Parameters
    ----------
    data : AnnotationSet
        Labels of shape (n_items, n_annotators), -1 = missing (missing responses drop out of the
        likelihood; they are assumed missing at random).
    groups : None, int, Binning or integer array of shape (n_items,)
        None fits the marginal model (one prevalence). Otherwise the score-grouped model of the paper:
        channels shared across groups, one prevalence per group (an int means equal-mass score groups
        and needs scores).
    n_starts : int, default 10
        Number of random starts from :func:`em_starts`. With three or more annotators the moment
        estimate (:func:`~noisycal_bayes.reference.moments.moments_three`) is appended as one more start
        (index ``n_starts``) when it is identified.
    seed : int, default 0
        Seed of the random starts.
    max_iter : int, default 1000
        Iterations per start; a start that has not converged by then is rejected.
    tol : float, default 1e-8
        Convergence tolerance (see Notes).
    min_gap : float, default 0.05
        Screening: a fit is accepted only if every annotator's gap ``tpr - fpr`` exceeds this.
    prior : None or ((a_fpr, b_fpr), (a_tpr, b_tpr), (a_prev, b_prev))
        Beta pseudo-counts (each value >= 1) for a MAP fit; None is maximum likelihood.
    starts : tuple (fpr (S, J), tpr (S, J), prevalence (S, G)), optional
        Explicit starts, used instead of the random and moment starts (e.g. to compare two
        implementations from identical starts).

    Returns
    -------
    ChannelEstimate
        ``method="em"``; ``loglik`` the log-likelihood at the estimate, ``loglik_trace`` the objective
        at the start and after every iteration of the selected start (length ``n_iter + 1``),
        ``start_logliks`` the final objective of every start (NaN if non-finite),
        ``failed_starts`` the rejected starts with reasons, ``selected_start`` the chosen index.
        When every start fails: ``identified=False``, ``channel=None``, the reasons in ``reason``, and a
        :class:`ConvergenceWarning`. The marginal two-annotator fit returns its channel with
        ``identified=False`` (a labelled control; ``.require()`` raises).

    Raises
    ------
    ValueError
        Not an AnnotationSet; a single annotator; score groups without scores; bad ``prior``,
        ``starts`` or numeric settings.

    Warns
    -----
    IdentifiabilityWarning
        Two annotators and no score groups (not identified, paper §D.1); no item labelled by two or more
        annotators (then ``identified=False``: the prevalences are fixed only up to an affine map); or a
        two-annotator grouped fit whose estimated group prevalences differ by less than
        ``MIN_PREVALENCE_SPREAD`` (0.05) (checked
        on the selected fit, or on the best start when none was accepted: weak identification also
        stalls EM, so this warning often comes with a ConvergenceWarning).
    SmallGapWarning
        The highest-objective converged fit has a gap ``<= min_gap`` (and was screened out).
    ConvergenceWarning
        No start was accepted.

    Notes
    -----
    The rules, exactly (a vectorised implementation must follow them to agree to rounding):

    1. *Starts*: ``em_starts(J, G, n_starts, seed)`` (indices ``0..n_starts-1``), then, if ``J >= 3``
       and the moment estimate is identified, that estimate clipped to [0.01, 0.99], with group
       prevalences the across-annotator mean of ``(m_jg - fpr_j) / gap_j`` clipped likewise
       (index ``n_starts``). ``starts=`` replaces both.
    2. *Iteration*: ``theta = (fpr, tpr, prevalence)``; ``theta_t = EMstep(theta_{t-1})``
       (:func:`noisycal_bayes.core.em_step`, float64, compressed patterns), objective ``l_t`` =
       log-likelihood (+ Beta log prior density for MAP). Stop at the first ``t <= max_iter`` with
       ``max|theta_t - theta_{t-1}| <= tol`` *and* ``|l_t - l_{t-1}| <= tol (1 + |l_t|)``: converged.
       Non-finite ``theta_t`` or ``l_t`` fails the start at once; reaching ``max_iter`` fails it.
    3. *Orientation*: if more than half the annotators have ``tpr < fpr`` (or exactly half and the summed
       gap is negative), exchange ``Y <-> 1 - Y``: ``(fpr, tpr) -> (tpr, fpr)``, ``prevalence -> 1 - prevalence``.
    4. *Screening*: accept a converged start if every gap ``tpr - fpr > min_gap``.
    5. *Selection*: among accepted starts, those with objective ``>= best - 1e-9 (1 + |best|)`` tie;
       the lowest start index wins.

    EM never decreases the objective (the test suite asserts it along ``loglik_trace``). A converged
    start certifies a stationary point, not the global maximum (paper §D.6): hence several starts.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=0)
    >>> est = fit_em(sim.data, n_starts=3)
    >>> est.identified, bool(np.allclose(est.channel.fpr, [0.1, 0.2, 0.1], atol=0.05))
    (True, True)
    """
    func = "fit_em"
    data = check_annotation_set(data, func)
    require_several_annotators(data, func)
    n_starts = check_positive_int(n_starts, name="n_starts", minimum=0)
    max_iter = check_positive_int(max_iter, name="max_iter")
    tol, min_gap = float(tol), float(min_gap)
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"`tol` must be a positive number; got {tol!r}.")
    if not (np.isfinite(min_gap) and 0 <= min_gap < 1):
        raise ValueError(f"`min_gap` must lie in [0, 1); got {min_gap!r}.")
    prior = _check_prior(prior)
    group, n_groups = resolve_data_groups(data, groups, func)
    n_ann = data.n_annotators
    ids = list(data.annotator_ids)
    notes = []

    if starts is not None:
        fpr0, tpr0, prev0 = _check_starts(starts, n_ann, n_groups)
        moment_index = -1
    else:
        fpr0, tpr0, prev0 = em_starts(n_ann, n_groups, n_starts, seed)
        moment_index = -1
        if n_ann >= 3:
            ms = _moment_start(data, group, n_groups)
            if ms is not None:
                fpr0, tpr0, prev0 = (np.vstack([s, extra[None, :]]) for s, extra in zip((fpr0, tpr0, prev0), ms))
                moment_index = fpr0.shape[0] - 1
        if fpr0.shape[0] == 0:
            raise ValueError(f"{func}: no starts: n_starts=0 and no identified moment start (needs >= 3 annotators).")

    if n_ann == 2 and n_groups == 1:
        msg = ("two annotators without score groups do not identify their channels: the same joint label "
               "distribution arises from a continuum of channels (paper §D.1). This fit is a labelled control only; "
               "pass `groups=` (score groups with different prevalences) or add a third annotator.")
        warnings.warn(msg, IdentifiabilityWarning, stacklevel=2)
        notes.append(msg)
    co_why = co_labelling_problem(data)
    if co_why:
        warnings.warn(co_why, IdentifiabilityWarning, stacklevel=2)
        notes.append(co_why)

    pc = compress_patterns(data.labels, group, n_groups)
    # Padding to a size fixed by (J, G) lets one compiled EM step serve many data sets.
    pc = pad_patterns(pc, padded_size(pc.patterns.shape[0], n_groups, n_ann))
    group_sizes = np.bincount(group, minlength=n_groups)

    n_total = fpr0.shape[0]
    results = []
    with x64():
        arrays = (jnp.asarray(pc.patterns, dtype=jnp.int32), jnp.asarray(pc.group), jnp.asarray(pc.counts))
        for s in range(n_total):
            theta0 = np.concatenate([fpr0[s], tpr0[s], prev0[s]])
            results.append(_run_start(theta0, arrays, n_ann, n_groups, prior, max_iter, tol))
        fitted = {}
        failed = []
        start_obj = np.full(n_total, np.nan)
        best_rejected = None  # (objective, start, small-gap annotators, gaps) of converged fits screened out
        best_any = None  # (objective, oriented prevalence) of the best finite start, converged or not
        for s, (theta, obj, n_iter, trace, converged, why) in enumerate(results):
            if np.isfinite(obj):
                start_obj[s] = obj
            if np.isfinite(obj) and np.all(np.isfinite(theta)) and (best_any is None or obj > best_any[0]):
                best_any = (obj, _orient(theta[:n_ann], theta[n_ann:2 * n_ann], theta[2 * n_ann:])[2])
            if not converged:
                failed.append((s, why))
                continue
            fpr, tpr, prev, swapped = _orient(theta[:n_ann], theta[n_ann:2 * n_ann], theta[2 * n_ann:])
            gap = tpr - fpr
            small = np.flatnonzero(~(gap > min_gap))
            if small.size:
                failed.append((s, f"gap <= min_gap={min_gap} for annotators {_preview([ids[j] for j in small])} "
                                  f"(gaps {_preview(np.round(gap[small], 4))})"))
                if best_rejected is None or obj > best_rejected[0]:
                    best_rejected = (obj, s, small, gap[small])
                continue
            fitted[s] = (fpr, tpr, prev, obj, n_iter, trace, swapped)

        if fitted:
            best = max(v[3] for v in fitted.values())
            sel = min(s for s, v in fitted.items() if v[3] >= best - TIE_RTOL * (1.0 + abs(best)))
            fpr, tpr, prev, obj, n_iter, trace, swapped = fitted[sel]
            loglik = obj if prior is None else float(
                _objective(jnp.asarray(np.concatenate([fpr, tpr, prev])), *arrays, n_ann, n_groups, None))

    top_obj = max((v[3] for v in fitted.values()), default=-np.inf)
    if best_rejected is not None and best_rejected[0] > top_obj + TIE_RTOL * (1.0 + abs(best_rejected[0])):
        _, s, small, gaps = best_rejected
        msg = (f"the highest-likelihood EM fit (start {s}) has gap <= min_gap={min_gap} for annotators "
               f"{_preview([ids[j] for j in small])} (gaps {_preview(np.round(gaps, 4))}): those annotators look "
               "uninformative, and correcting their labels would divide by a gap near zero. Drop them, or lower "
               "`min_gap` to inspect the fit.")
        warnings.warn(msg, SmallGapWarning, stacklevel=2)
        notes.append(msg)

    # Two annotators are identified only through prevalence differences between groups (§D.2); check the
    # selected fit, or the best start when none was accepted (weak identification also stalls EM).
    prev_check = prev if fitted else (None if best_any is None else best_any[1])
    if n_ann == 2 and n_groups > 1 and prev_check is not None and np.ptp(prev_check) < MIN_PREVALENCE_SPREAD:
        msg = (f"the estimated group prevalences barely differ ({_preview(np.round(prev_check, 4))}, spread "
               f"{np.ptp(prev_check):.3g} < {MIN_PREVALENCE_SPREAD}): with two annotators the channels are "
               "identified only through prevalence differences between groups, so this estimate is unstable. Use "
               "groups that separate the classes better (fewer, wider score groups) or add an annotator.")
        warnings.warn(msg, IdentifiabilityWarning, stacklevel=2)
        notes.append(msg)

    common = dict(method=METHOD, n_groups=n_groups, group_sizes=group_sizes, start_logliks=start_obj,
                  details={"moment_start_index": moment_index, "n_starts_total": n_total, "prior": prior,
                           "tol": tol, "max_iter": max_iter, "min_gap": min_gap, "warnings": tuple(notes)})
    if not fitted:
        reasons = "; ".join(f"start {s}: {r}" for s, r in failed[:6])
        more = f" (and {len(failed) - 6} more)" if len(failed) > 6 else ""
        msg = (f"all {n_total} EM starts failed: {reasons}{more}. Try more starts (`n_starts`), a larger `max_iter`, "
               "or check for uninformative annotators.")
        warnings.warn(msg, ConvergenceWarning, stacklevel=2)
        notes.append(msg)
        common["details"]["warnings"] = tuple(notes)
        return ChannelEstimate(None, np.full(n_groups, np.nan), False, False, msg, failed_starts=failed, **common)

    identified, reason = True, ""
    if n_ann == 2 and n_groups == 1:
        identified = False
        reason = ("two annotators without score groups: not identified (paper §D.1); this estimate is one point of a "
                  "continuum of channels with the same likelihood.")
    elif co_why:
        identified, reason = False, co_why
    common["details"]["warnings"] = tuple(notes)
    common["details"]["label_exchanged"] = swapped
    return ChannelEstimate(make_channel(fpr, tpr, ids), np.clip(prev, 0.0, 1.0), identified, True, reason,
                           loglik=loglik, n_iter=n_iter, failed_starts=failed, loglik_trace=np.asarray(trace),
                           selected_start=sel, **common)
