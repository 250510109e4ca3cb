"""Three or more annotators: the moment estimator of the channels, no scores needed (paper §4.3, §D.5).

``rho = T / sqrt(C_12 C_13 C_23)`` from the pairwise covariances and the third central cross-moment ``T``;
``x = mu (1 - mu) = 1 / (rho^2 + 4)``, ``delta_j = sqrt(C_jk C_jl / C_kl / x)``, ``a_j = m_j - delta_j mu`` (positive
gaps: the orientation choice). Details: docs/foundations.md, *noisycal_bayes.reference.moments*.
"""
from __future__ import annotations

import dataclasses
from itertools import combinations

import numpy as np

from .._validation import _preview, check_positive_int
from .channels import (ChannelEstimate, check_annotation_set, group_moments, infeasibility, make_channel,
                       resolve_data_groups)

METHOD = "moments_three"


def _not_identified(reason: str, details: dict) -> ChannelEstimate:
    return ChannelEstimate(None, np.full(1, np.nan), False, True, reason, METHOD, n_groups=1, details=details)


def _solve(means, cov, third):
    """Raw solution ``(fpr, tpr, mu, reason)`` of the three-annotator equations (reason '' when feasible)."""
    c12, c13, c23 = cov[0, 1], cov[0, 2], cov[1, 2]
    pair = np.array([c12, c13, c23])
    nan3 = np.full(3, np.nan)
    if not (np.all(np.isfinite(pair)) and np.isfinite(third) and np.all(np.isfinite(means))):
        return nan3, nan3, np.nan, "non-finite moments"
    if np.any(pair <= 0):
        names = np.array(["C_12", "C_13", "C_23"])[pair <= 0]
        return nan3, nan3, np.nan, (
            f"pairwise covariances {_preview(names)} are <= 0: an annotator is uninformative (gap 0) or oriented "
            "against the others, so the three do not share a positive orientation.")
    rho = third / np.sqrt(c12 * c13 * c23)
    x = 1.0 / (rho * rho + 4.0)  # mu (1 - mu)
    mu = (1.0 - np.sign(rho) * np.sqrt(1.0 - 4.0 * x)) / 2.0
    gap = np.sqrt(np.array([c12 * c13 / c23, c12 * c23 / c13, c13 * c23 / c12]) / x)
    fpr = means - gap * mu
    tpr = fpr + gap
    why = infeasibility(fpr, tpr, mu)
    return fpr, tpr, mu, (f"the moment solution is outside the model: {why}" if why else "")


def three_from_moments(means, cov, third, *, annotator_ids=None) -> ChannelEstimate:
    """Solve the three-annotator moment equations exactly.

    Parameters
    ----------
    means : array-like of shape (3,)
        ``E[A_j]``.
    cov : array-like of shape (3, 3)
        Covariance matrix of the three responses (only the off-diagonal entries are used).
    third : float
        Third central cross-moment ``E[(A_1 - m_1)(A_2 - m_2)(A_3 - m_3)]``.
    annotator_ids : sequence of 3 names, optional

    Returns
    -------
    ChannelEstimate
        ``method="moments_three"``, ``prevalence`` of shape (1,) (``mu``). Not identified when a
        pairwise covariance is ``<= 0`` (an uninformative annotator, or no common orientation) or the
        solution leaves [0, 1].

    Notes
    -----
    Paper §4.3 and Appendix D.5; orientation (positive square roots) fixes the complement.

    Examples
    --------
    >>> fpr, tpr, mu = np.array([0.1, 0.2, 0.05]), np.array([0.9, 0.7, 0.8]), 0.3
    >>> gap = tpr - fpr
    >>> cov = np.outer(gap, gap) * mu * (1 - mu)
    >>> est = three_from_moments(fpr + gap * mu, cov, gap.prod() * mu * (1 - mu) * (1 - 2 * mu))
    >>> est.channel.tpr.round(6).tolist(), est.prevalence.round(6).tolist()
    ([0.9, 0.7, 0.8], [0.3])
    """
    means = np.asarray(means, dtype=np.float64)
    cov = np.asarray(cov, dtype=np.float64)
    if means.shape != (3,) or cov.shape != (3, 3) or np.ndim(third) != 0:
        raise ValueError(f"`means` must have shape (3,), `cov` (3, 3) and `third` be a scalar; got {means.shape}, "
                         f"{cov.shape} and {np.shape(third)}.")
    third = float(third)
    details = {"means": means.copy(), "covariances": cov.copy(), "third": third}
    fpr, tpr, mu, why = _solve(means, cov, third)
    details.update(fpr=fpr, tpr=tpr, raw_prevalence=mu)
    if why:
        return dataclasses.replace(_not_identified(why, details), prevalence=np.atleast_1d(mu))
    return ChannelEstimate(make_channel(fpr, tpr, annotator_ids), np.atleast_1d(np.clip(mu, 0.0, 1.0)), True, True,
                           "", METHOD, n_groups=1, details=details)


def _triplet_moments(labels: np.ndarray):
    """Plug-in means, covariance matrix and third central cross-moment of three complete columns."""
    a = labels.astype(np.float64)
    means = a.mean(axis=0)
    centred = a - means
    cov = centred.T @ centred / a.shape[0]
    third = float(np.mean(centred[:, 0] * centred[:, 1] * centred[:, 2]))
    return means, cov, third


def moments_three(data, *, min_items: int = 10) -> ChannelEstimate:
    """Moment estimate of the channels of three or more annotators, without scores (paper §4.3).

    Parameters
    ----------
    data : AnnotationSet
        Labels of shape (n_items, n_annotators) with ``n_annotators >= 3``; scores are not used.
    min_items : int, default 10
        A triplet is used only if at least this many items were labelled by all three of its annotators.

    Returns
    -------
    ChannelEstimate
        ``method="moments_three"``, marginal ``prevalence`` of shape (1,), ``n_groups=1``.
        ``details["triplets"]`` lists every triplet with its items, its estimate or why it failed.

    Raises
    ------
    ValueError
        Not an AnnotationSet; fewer than three annotators.

    Notes
    -----
    *Moments.* Each triplet ``(j, k, l)`` uses the items labelled by all three (triple-complete items):
    plug-in means, pairwise covariances and the third central cross-moment on that subsample, solved by
    :func:`three_from_moments`. Under responses missing at random every triplet's moments are
    consistent; items missing a response simply drop out of that triplet.

    *Combining triplets* (``n_annotators > 3``): annotator ``j``'s ``fpr`` and ``tpr`` are the medians of
    its estimates over the identified triplets containing it, and the prevalence is the median over all
    identified triplets. Medians are used because a triplet containing an uninformative annotator gives
    a wild or infeasible solution; they stay in [0, 1] because every triplet estimate does. With exactly
    three annotators this is the single triplet's solution. Cost: ``O(n_items * C(n_annotators, 3))``.
    Annotators with no identified triplet make the whole estimate *not identified*.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(20000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=0)
    >>> est = moments_three(sim.data)
    >>> bool(np.allclose(est.channel.tpr, [0.9, 0.8, 0.7], atol=0.05))
    True
    """
    func = "moments_three"
    data = check_annotation_set(data, func)
    min_items = check_positive_int(min_items, name="min_items", minimum=3)
    if data.n_annotators < 3:
        raise ValueError(f"{func}: needs at least 3 annotators; the data has {data.n_annotators}. Two annotators "
                         "without scores do not identify their channels (paper §D.1): use closed_form_two_groups or "
                         "fit_em with score groups.")
    n_ann = data.n_annotators
    ids = list(data.annotator_ids)
    triplets, fpr_by, tpr_by, mus = _all_triplets(data.labels, min_items)
    details = {"triplets": triplets, "n_identified_triplets": len(mus), "combine": "median"}
    sizes = np.array([triplets[0]["n_items"]]) if n_ann == 3 else np.array([data.n_items])
    if not mus:
        reasons = "; ".join(f"{t['annotators']}: {t['reason']}" for t in triplets[:5])
        est = _not_identified(f"no triplet of annotators is identified ({reasons}).", details)
        return dataclasses.replace(est, group_sizes=sizes)
    missing = [j for j in range(n_ann) if not fpr_by[j]]
    if missing:
        est = _not_identified(
            f"annotators {_preview([ids[j] for j in missing])} are in no identified triplet (uninformative, oriented "
            "against the others, or too few shared items); drop them or use fit_em.", details)
        return dataclasses.replace(est, group_sizes=sizes)
    fpr = np.array([np.median(v) for v in fpr_by])
    tpr = np.array([np.median(v) for v in tpr_by])
    mu = float(np.median(mus))
    why = infeasibility(fpr, tpr, mu)
    if why:
        est = _not_identified(f"the combined triplet estimate is outside the model: {why}", details)
        return dataclasses.replace(est, group_sizes=sizes)
    return ChannelEstimate(make_channel(fpr, tpr, ids), np.array([mu]), True, True, "", METHOD, n_groups=1,
                           group_sizes=sizes, details=details)


def _all_triplets(labels, min_items):
    """Solve every triplet of annotators on its triple-complete items.

    Returns ``(triplets, fpr_by, tpr_by, mus)``: one dict per triplet (annotators, items, estimate or
    reason), and per annotator the ``fpr`` / ``tpr`` of every identified triplet containing it, and the
    prevalence of every identified triplet.
    """
    obs = labels >= 0
    n_ann = labels.shape[1]
    triplets, mus = [], []
    fpr_by = [[] for _ in range(n_ann)]
    tpr_by = [[] for _ in range(n_ann)]
    for trip in combinations(range(n_ann), 3):
        cols = list(trip)
        rows = obs[:, cols].all(axis=1)
        n_trip = int(rows.sum())
        entry = {"annotators": trip, "n_items": n_trip}
        triplets.append(entry)
        if n_trip < min_items:
            entry["reason"] = f"only {n_trip} items labelled by all three (< min_items={min_items})"
            continue
        means, cov, third = _triplet_moments(labels[np.ix_(rows, cols)])
        fpr, tpr, mu, why = _solve(means, cov, third)
        entry.update(fpr=fpr, tpr=tpr, prevalence=mu, reason=why, moments=(means, cov, third))
        if why:
            continue
        mus.append(mu)
        for pos, j in enumerate(trip):
            fpr_by[j].append(fpr[pos])
            tpr_by[j].append(tpr[pos])
    return triplets, fpr_by, tpr_by, mus


#: The moment start is clipped into this interval so that an iterative fit does not start on the boundary.
START_CLIP = (0.01, 0.99)


def moment_start(data, groups=None):
    """The moment estimate as a start for EM or GMM: ``(fpr (1, J), tpr (1, J), prevalence (1, G))`` or None.

    Parameters
    ----------
    data : AnnotationSet
        Three or more annotators.
    groups : None, int, Binning or integer array of shape (n_items,)
        Score groups of the fit to start (None: one prevalence).

    Returns
    -------
    tuple of ndarray or None
        :func:`moments_three`'s channels clipped to :data:`START_CLIP`; per group, the mean over annotators
        of the corrected group mean ``(m_jg - fpr_j) / gap_j``, clipped likewise. None when the moment
        estimate is not identified (e.g. two annotators). The shapes are those of ``fit_em(starts=...)``:
        stack it under :func:`~noisycal_bayes.core.starts.em_starts` to add it to the random starts.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=0)
    >>> from noisycal_bayes.data import Binning
    >>> [a.shape for a in moment_start(sim.data, groups=Binning.equal_mass(3))]
    [(1, 3), (1, 3), (1, 3)]
    """
    if data.n_annotators < 3 or data.has_repeats:  # the moments read one label per (item, annotator)
        return None
    group, n_groups = resolve_data_groups(data, groups, "moment_start")
    fpr, tpr, prev = _moment_start(data, group, n_groups) or (None, None, None)
    return None if fpr is None else (fpr[None, :], tpr[None, :], prev[None, :])


def _moment_start(data, group, n_groups):
    """The moment estimate as a start (fpr, tpr (J,), prevalence (G,)), or None if not identified."""
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
