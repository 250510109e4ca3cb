"""Constrained generalised method of moments for score-grouped channels (paper §4.2, Appendix D.4).

Minimises ``Q = sum_g w_g [ sum_j (mhat_jg - m_jg)^2 + sum_{j<k} (chat_jkg - c_jkg)^2 ]`` (``w_g = n_g / n``) over
``a_j, u_j, pi_g in [0, 1]``, ``delta_j = (1 - a_j) u_j``, by SLSQP from several starts; the final ``Q`` is reported as
the optimisation gap. Details: docs/foundations.md, *noisycal_bayes.reference.gmm*.
"""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize

from .._validation import _preview, check_positive_int
from ..core import ds_loglik, x64
from ..data import compress_patterns, pad_patterns, padded_size
from ..warnings import ConvergenceWarning, IdentifiabilityWarning, SmallGapWarning
from .channels import (ChannelEstimate, check_annotation_set, co_labelling_problem, group_moments, infeasibility,
                       make_channel, resolve_data_groups)
from .closed_form import closed_form_two_groups
from ..core.starts import em_starts
from ..data.design import MIN_PREVALENCE_SPREAD
from .moments import _moment_start

METHOD = "gmm"
# One compiled call instead of ~25 eagerly compiled primitives per new shape.
_ds_loglik = jax.jit(ds_loglik)
#: Starts whose objectives differ by less than this (absolute + relative) tie; the lowest index wins.
TIE_TOL = 1e-12


def gmm_objective(params, means, cov, mask_mean, mask_cov, weights):
    """GMM objective ``Q`` and its gradient in the ``(fpr, u, prevalence)`` parametrisation.

    Parameters
    ----------
    params : ndarray of shape (2 J + G,)
        ``concat(fpr, u, prevalence)`` with ``gap = (1 - fpr) u``.
    means : (J, G) empirical group means; cov : (J, J, G) empirical within-group covariances
    mask_mean : (J, G), mask_cov : (J, J, G)
        1 where the moment is used (0 for missing moments; ``mask_cov`` is 0 on the diagonal).
    weights : (G,) group weights ``n_g / n``

    Returns
    -------
    (float, ndarray of shape (2 J + G,))
    """
    n_ann = means.shape[0]
    fpr, u, prev = params[:n_ann], params[n_ann:2 * n_ann], params[2 * n_ann:]
    gap = (1.0 - fpr) * u
    v = prev * (1.0 - prev)
    r_m = mask_mean * (fpr[:, None] + gap[:, None] * prev[None, :] - means)
    r_c = mask_cov * (gap[:, None, None] * gap[None, :, None] * v[None, None, :] - cov)
    # The full symmetric sum over j != k counts each pair twice, hence the factor 1/2.
    q = float(np.sum(weights * (np.sum(r_m**2, axis=0) + 0.5 * np.sum(r_c**2, axis=(0, 1)))))
    d_fpr_direct = 2.0 * np.sum(weights * r_m, axis=1)
    d_gap = 2.0 * np.sum(weights * (r_m * prev[None, :] + np.einsum("jkg,k,g->jg", r_c, gap, v)), axis=1)
    d_prev = weights * (2.0 * np.sum(r_m * gap[:, None], axis=0)
                        + np.einsum("jkg,j,k->g", r_c, gap, gap) * (1.0 - 2.0 * prev))
    grad = np.concatenate([d_fpr_direct - u * d_gap, (1.0 - fpr) * d_gap, d_prev])
    return q, grad


def _to_params(fpr, tpr, prev):
    fpr, tpr = np.asarray(fpr, dtype=np.float64), np.asarray(tpr, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.where(fpr < 1, (tpr - fpr) / (1.0 - fpr), 0.0)
    return np.clip(np.concatenate([fpr, u, np.asarray(prev, dtype=np.float64)]), 0.0, 1.0)


def fit_gmm(data, groups, *, n_starts: int = 10, seed: int = 0, min_gap: float = 0.05,
            max_iter: int = 5000) -> ChannelEstimate:
    """Constrained GMM estimate of channels shared across score groups (paper §4.2, §D.4).

    Parameters
    ----------
    data : AnnotationSet
        Labels of shape (n_items, n_annotators), ``n_annotators >= 2``; scores needed when ``groups``
        is an int or a Binning.
    groups : int, Binning or integer array of shape (n_items,)
        Score groups (at least 2 are needed for identification).
    n_starts : int, default 10
        Random starts from :func:`~noisycal_bayes.reference.em.em_starts` (converted to
        ``u = gap / (1 - fpr)``); the closed-form estimate (two annotators, two groups) or the moment
        estimate (three or more annotators) is appended as one more start when identified.
    seed : int, default 0
    min_gap : float, default 0.05
        A fitted gap at or below this raises a :class:`SmallGapWarning`.
    max_iter : int, default 5000
        SLSQP iterations per start.

    Returns
    -------
    ChannelEstimate
        ``method="gmm"``; ``optimisation_gap`` the minimum objective ``Q``; ``start_logliks`` the final
        ``Q`` of every start; ``loglik`` the grouped Dawid-Skene log-likelihood at the estimate;
        ``converged`` whether SLSQP reported success for the selected start;
        ``details["moments"]`` the empirical moments. Not identified (``identified=False``, with the
        reason) with a single score group (means and covariances then fix only ``delta_j delta_k mu (1 - mu)``:
        a one-parameter family fits equally well), or when the selected estimate has a gap of 0.

    Raises
    ------
    ValueError
        Not an AnnotationSet; a single annotator; score groups without scores; bad settings.

    Warns
    -----
    IdentifiabilityWarning
        A single score group, no item labelled by two or more annotators (then ``identified=False``), or
        estimated group prevalences that differ by less than 0.05.
    SmallGapWarning
        A fitted gap ``<= min_gap``.
    ConvergenceWarning
        The selected start did not report convergence.

    Notes
    -----
    Moments: ``mhat_jg`` averages annotator ``j``'s labels over the items of group ``g`` it labelled;
    ``chat_jkg`` is the plug-in covariance over the items of ``g`` labelled by both ``j`` and ``k`` (pairs
    with fewer than 2 such items are left out). Selection: the smallest final ``Q``; starts within
    ``1e-12 (1 + Q)`` of it tie and the lowest index wins. The objective is smooth, and its exact
    gradient is supplied (see :func:`gmm_objective`).

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(20000, fpr=[0.1, 0.2], tpr=[0.9, 0.7], seed=0)
    >>> from noisycal_bayes.data import Binning
    >>> est = fit_gmm(sim.data, Binning.equal_mass(2), n_starts=2)
    >>> bool(np.allclose(est.channel.tpr, [0.9, 0.7], atol=0.05))
    True
    """
    func = "fit_gmm"
    data = check_annotation_set(data, func)
    n_starts, max_iter, min_gap = _check_settings(n_starts, max_iter, min_gap, groups, func)
    group, n_groups = resolve_data_groups(data, groups, func)
    n_ann = data.n_annotators
    ids = list(data.annotator_ids)
    notes, co_why = _design_notes(data, n_groups)
    moments = _moments(data, group, n_groups)
    group_sizes = np.bincount(group, minlength=n_groups)
    starts, analytic_index = _starts(data, group, n_groups, n_starts, seed)
    if not starts:
        raise ValueError(f"{func}: no starts: n_starts=0 and no analytic start is available.")
    results, failed = _minimise_all(starts, tuple(moments.values()) + (group_sizes / group_sizes.sum(),), n_ann,
                                    n_groups, max_iter)
    objs = np.array([r.fun if np.isfinite(r.fun) else np.nan for r in results], dtype=np.float64)
    if np.all(np.isnan(objs)):
        msg = f"all {len(starts)} GMM starts gave a non-finite objective."
        warnings.warn(msg, ConvergenceWarning, stacklevel=2)
        return ChannelEstimate(None, np.full(n_groups, np.nan), False, False, msg, METHOD, failed_starts=failed,
                               n_groups=n_groups, group_sizes=group_sizes, start_logliks=objs)
    best = np.nanmin(objs)
    sel = int(np.flatnonzero(objs <= best + TIE_TOL * (1.0 + abs(best)))[0])
    res = results[sel]
    x = np.clip(res.x, 0.0, 1.0)
    fpr, u, prev = x[:n_ann], x[n_ann:2 * n_ann], x[2 * n_ann:]
    gap = (1.0 - fpr) * u
    tpr = fpr + gap
    converged = bool(res.success)
    details = {"moments": {"means": moments["means"], "covariances": moments["cov"],
                           "mask_mean": moments["mask_mean"], "mask_cov": moments["mask_cov"],
                           "weights": group_sizes / group_sizes.sum()},
               "analytic_start_index": analytic_index, "message": str(res.message)}
    common = dict(method=METHOD, n_iter=int(res.nit), failed_starts=failed, n_groups=n_groups,
                  group_sizes=group_sizes, optimisation_gap=float(res.fun), start_logliks=objs, selected_start=sel)
    if not converged:
        msg = (f"the selected GMM start {sel} did not report convergence ({res.message}); the optimisation gap "
               f"{res.fun:.3g} is not certified. Try more starts or a larger `max_iter`.")
        warnings.warn(msg, ConvergenceWarning, stacklevel=2)
        notes.append(msg)
    why = infeasibility(fpr, tpr, prev)
    if why:
        details["warnings"] = tuple(notes)
        details.update(fpr=fpr, tpr=tpr)
        return ChannelEstimate(None, prev, False, converged, f"the GMM estimate is on the edge of the model: {why}",
                               details=details, **common)
    identified, reason = _identification(notes, co_why, n_groups, gap, prev, min_gap, ids)
    details["warnings"] = tuple(notes)
    return ChannelEstimate(make_channel(fpr, tpr, ids), prev, identified, converged, reason,
                           loglik=_loglik(data, group, n_groups, fpr, tpr, prev), details=details, **common)


def _check_settings(n_starts, max_iter, min_gap, groups, func):
    n_starts = check_positive_int(n_starts, name="n_starts", minimum=0)
    max_iter = check_positive_int(max_iter, name="max_iter")
    min_gap = float(min_gap)
    if not (np.isfinite(min_gap) and 0 <= min_gap < 1):
        raise ValueError(f"`min_gap` must lie in [0, 1); got {min_gap!r}.")
    if groups is None:
        raise ValueError(f"{func}: needs score groups (`groups` as an int, Binning or integer array); means and "
                         "covariances of a single group do not identify the channels.")
    return n_starts, max_iter, min_gap


def _identification(notes, co_why, n_groups, gap, prev, min_gap, ids):
    """Small-gap and identification warnings on the (feasible) estimate, appended to ``notes``;
    returns ``(identified, reason)``."""
    small = np.flatnonzero(gap <= min_gap)
    if small.size:
        msg = (f"GMM gaps <= min_gap={min_gap} for annotators {_preview([ids[j] for j in small])} "
               f"(gaps {_preview(np.round(gap[small], 4))}): corrected labels of these annotators have huge variance.")
        warnings.warn(msg, SmallGapWarning, stacklevel=3)
        notes.append(msg)
    identified, reason = True, ""
    if n_groups == 1:
        identified, reason = False, notes[0]
    elif co_why:
        identified, reason = False, co_why
    elif prev.max() - prev.min() < MIN_PREVALENCE_SPREAD:
        msg = (f"the estimated group prevalences barely differ ({_preview(np.round(prev, 4))}); means and "
               "covariances identify the channels only through prevalence differences between groups, so this "
               "estimate is unstable. Use groups that separate the classes better.")
        warnings.warn(msg, IdentifiabilityWarning, stacklevel=3)
        notes.append(msg)
    return identified, reason


def _design_notes(data, n_groups):
    """Warnings about the design (one group; no co-labelled item), issued; returns ``(notes, co_why)``."""
    notes = []
    if n_groups == 1:
        msg = ("a single score group: group means and covariances determine only gap_j gap_k mu (1 - mu), so a "
               "one-parameter family of channels fits equally well. Use at least two score groups with different "
               "prevalences.")
        warnings.warn(msg, IdentifiabilityWarning, stacklevel=3)
        notes.append(msg)
    co_why = co_labelling_problem(data)
    if co_why:
        warnings.warn(co_why, IdentifiabilityWarning, stacklevel=3)
        notes.append(co_why)
    return notes, co_why


def _moments(data, group, n_groups) -> dict:
    """Group means and pairwise covariances with their masks (entries without data set to 0 and masked out)."""
    means, cov, n_single, n_pair = group_moments(data.labels, group, n_groups)
    mask_mean = (n_single > 0).astype(np.float64)
    mask_cov = (n_pair >= 2).astype(np.float64) * (1.0 - np.eye(data.n_annotators))[:, :, None]
    return {"means": np.where(mask_mean > 0, means, 0.0), "cov": np.where(mask_cov > 0, cov, 0.0),
            "mask_mean": mask_mean, "mask_cov": mask_cov}


def _starts(data, group, n_groups, n_starts, seed):
    """Random starts, then the analytic one (closed form for 2 x 2, moments for >= 3 annotators) if identified.

    Returns ``(list of parameter vectors, index of the analytic start or -1)``.
    """
    n_ann = data.n_annotators
    fpr0, tpr0, prev0 = em_starts(n_ann, n_groups, n_starts, seed)
    starts = [_to_params(f, t, p) for f, t, p in zip(fpr0, tpr0, prev0)]
    analytic = None
    if n_ann == 2 and n_groups == 2:
        cf = closed_form_two_groups(data, group)
        if cf.identified:
            analytic = _to_params(cf.channel.fpr, cf.channel.tpr, cf.prevalence)
    elif n_ann >= 3:
        ms = _moment_start(data, group, n_groups)
        if ms is not None:
            analytic = _to_params(*ms)
    if analytic is None:
        return starts, -1
    return starts + [analytic], len(starts)


def _minimise_all(starts, args, n_ann, n_groups, max_iter):
    """SLSQP from every start; returns ``(results, failed starts with reasons)``."""
    bounds = [(0.0, 1.0)] * (2 * n_ann + n_groups)
    results, failed = [], []
    for s, x0 in enumerate(starts):
        # ftol far below the default: the objective is O(1/n) at its minimum (0 for exact moments), and the
        # default (1e-6) would stop long before the parameters settle. SLSQP rather than L-BFGS-B, whose
        # multi-threaded BLAS calls are slow on 9 parameters (docs/performance.md, *Implementation choices*).
        res = minimize(gmm_objective, x0, args=args, jac=True, method="SLSQP", bounds=bounds,
                       options={"maxiter": max_iter, "ftol": 1e-20})
        results.append(res)
        if not np.isfinite(res.fun):
            failed.append((s, "non-finite objective"))
        elif not res.success:
            failed.append((s, f"optimiser did not report convergence: {res.message}"))
    return results, failed


def _loglik(data, group, n_groups, fpr, tpr, prev) -> float:
    """Dawid-Skene log-likelihood of the data at the GMM estimate (on padded compressed patterns)."""
    pc = compress_patterns(data.labels, group, n_groups)
    pc = pad_patterns(pc, padded_size(pc.patterns.shape[0], n_groups, data.n_annotators))  # shares compilations
    with x64():
        return float(_ds_loglik(jnp.asarray(pc.patterns, dtype=jnp.int32), jnp.asarray(pc.group),
                                jnp.asarray(pc.counts), jnp.asarray(fpr), jnp.asarray(tpr), jnp.asarray(prev)))
