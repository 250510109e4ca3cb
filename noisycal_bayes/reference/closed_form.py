"""Two annotators, two score groups: the closed-form channel estimator (paper §4.2, Appendix D.2-D.3).

The group means ``m_jg = a_j + delta_j pi_g`` and covariances ``c_g = delta_1 delta_2 pi_g (1 - pi_g)`` give six
equations in six unknowns, solved in closed form (DESIGN §3). Details: docs/foundations.md,
*noisycal_bayes.reference.closed_form*.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import _preview
from .channels import (ChannelEstimate, check_annotation_set, group_moments, infeasibility, make_channel,
                       resolve_data_groups)

METHOD = "closed_form_two_groups"


def _not_identified(reason: str, details: dict) -> ChannelEstimate:
    return ChannelEstimate(None, np.full(2, np.nan), False, True, reason, METHOD, n_groups=2, details=details)


def two_group_from_moments(m, c, *, annotator_ids=None) -> ChannelEstimate:
    """Solve the two-annotator, two-group moment equations exactly.

    Parameters
    ----------
    m : array-like of shape (2, 2)
        ``m[j, g]``: mean response of annotator ``j`` in score group ``g``.
    c : array-like of shape (2,)
        ``c[g]``: covariance of the two annotators' responses within group ``g``.
    annotator_ids : sequence of 2 names, optional

    Returns
    -------
    ChannelEstimate
        ``prevalence`` has shape (2,). Not identified (``identified=False``, ``channel=None``, with the
        reason) when the group means do not differ (``pi_1 == pi_2``, ``D = 0``), when the two
        annotators' mean differences have opposite signs (no common positive orientation), when the
        moments admit no solution (``1 + k^2 + 2 (c_1 + c_2) / D <= 0``), or when the solution leaves
        [0, 1] or has a gap ``<= 0``.

    Notes
    -----
    Paper §4.2 / Appendix D.2. Orientation: the sign of ``pi_2 - pi_1`` is that of ``m_12 - m_11``, which
    makes both gaps positive. The system is exactly identified, so it has no excess moments to test
    the model with (§D.2).

    Examples
    --------
    >>> fpr, tpr, pi = np.array([0.1, 0.2]), np.array([0.9, 0.7]), np.array([0.3, 0.6])
    >>> m = fpr[:, None] + (tpr - fpr)[:, None] * pi[None, :]
    >>> c = (tpr - fpr).prod() * pi * (1 - pi)
    >>> est = two_group_from_moments(m, c)
    >>> est.channel.fpr.round(6).tolist(), est.prevalence.round(6).tolist()
    ([0.1, 0.2], [0.3, 0.6])
    """
    m = np.asarray(m, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    if m.shape != (2, 2) or c.shape != (2,):
        raise ValueError(f"`m` must have shape (2, 2) and `c` shape (2,); got {m.shape} and {c.shape}.")
    details = {"means": m.copy(), "covariances": c.copy()}
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(c))):
        return _not_identified("non-finite moments (a group without items labelled by both annotators?)", details)
    d1, d2 = m[0, 1] - m[0, 0], m[1, 1] - m[1, 0]
    D = d1 * d2
    details["D"] = D
    if D == 0.0 or abs(D) < 1e-15:
        return _not_identified(
            "the two groups have the same mean responses (D = 0): pi_1 == pi_2, so the groups carry no "
            "information about the channels. Use groups whose class prevalences differ.", details)
    if D < 0:
        return _not_identified(
            f"the annotators' mean differences between the groups have opposite signs ({d1:.4g} and {d2:.4g}): "
            "no common positive orientation; one annotator may be adversarial or the model is wrong.", details)
    k = (c[1] - c[0]) / D
    q = 1.0 + k * k + 2.0 * (c[0] + c[1]) / D
    details["k"] = k
    if not q > 0:
        return _not_identified(f"the moments admit no solution (1 + k^2 + 2 (c_1 + c_2) / D = {q:.4g} <= 0).", details)
    dpi = np.sign(d1) / np.sqrt(q)  # pi_2 - pi_1, oriented so that delta_1 > 0
    s = 1.0 - dpi * k  # pi_1 + pi_2
    prevalence = np.array([(s - dpi) / 2.0, (s + dpi) / 2.0])
    gap = np.array([d1, d2]) / dpi
    fpr = m[:, 0] - gap * prevalence[0]
    tpr = fpr + gap
    why = infeasibility(fpr, tpr, prevalence)
    details.update(fpr=fpr, tpr=tpr, raw_prevalence=prevalence)
    if why:
        return dataclasses.replace(_not_identified(f"the closed-form solution is outside the model: {why}", details),
                                   prevalence=prevalence)
    return ChannelEstimate(make_channel(fpr, tpr, annotator_ids), np.clip(prevalence, 0.0, 1.0), True, True, "",
                           METHOD, n_groups=2, details=details)


def closed_form_two_groups(data, groups, *, annotators=None) -> ChannelEstimate:
    """Closed-form channels of two annotators from two score groups (paper §4.2).

    Parameters
    ----------
    data : AnnotationSet
        Labels of shape (n_items, n_annotators); scores needed when ``groups`` is an int or a Binning.
    groups : int, Binning or integer array of shape (n_items,)
        Score groups; must resolve to exactly 2 non-empty groups (an int means equal-mass groups).
    annotators : pair of int, optional
        Column positions of the two annotators to use when the data has more than two.

    Returns
    -------
    ChannelEstimate
        ``method="closed_form_two_groups"``, ``prevalence`` of shape (2,), ``group_sizes`` the number of
        items labelled by both annotators in each group. See :func:`two_group_from_moments` for when
        the result is *not identified* (``identified=False`` with the reason; ``.require()`` raises).

    Raises
    ------
    ValueError
        Not an AnnotationSet; a single annotator; more than two annotators without ``annotators``;
        groups that do not resolve to two; score groups without scores.

    Notes
    -----
    Uses only items labelled by *both* annotators (missing responses drop the item). Means and the
    within-group covariance are plug-in moments (divided by the group count), so the estimate is an
    exact function of the (group, pattern) frequencies and coincides with the maximum-likelihood
    estimate of the grouped two-annotator model whenever the latter is interior.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(20000, fpr=[0.1, 0.2], tpr=[0.9, 0.7], seed=0)
    >>> from noisycal_bayes.data import Binning
    >>> est = closed_form_two_groups(sim.data, Binning.equal_mass(2))
    >>> bool(np.allclose(est.channel.fpr, [0.1, 0.2], atol=0.05))
    True
    """
    func = "closed_form_two_groups"
    data = check_annotation_set(data, func)
    if annotators is None:
        if data.n_annotators != 2:
            raise ValueError(f"{func}: the data has {data.n_annotators} annotators; pass `annotators=(j, k)` (column "
                             "positions) to choose two, or use moments_three / fit_em for three or more.")
        pair = (0, 1)
    else:
        pair = tuple(int(a) for a in annotators)
        if len(pair) != 2 or pair[0] == pair[1] or not all(0 <= p < data.n_annotators for p in pair):
            raise ValueError(f"{func}: `annotators` must be two distinct column positions in "
                             f"[0, {data.n_annotators - 1}]; got {annotators!r}.")
    group, n_groups = resolve_data_groups(data, groups, func)
    if n_groups != 2:
        raise ValueError(f"{func}: needs exactly 2 score groups; `groups` gave {n_groups}. Pass groups=Binning.equal_mass(2), a "
                         "two-bin Binning, or an array of two group labels.")
    labels = data.labels[:, list(pair)]
    both = (labels >= 0).all(axis=1)
    labels, group = labels[both], group[both]
    sizes = np.bincount(group, minlength=2)
    ids = [data.annotator_ids[p] for p in pair]
    if (sizes < 2).any():
        est = _not_identified(f"groups {_preview(np.flatnonzero(sizes < 2))} have fewer than 2 items labelled by both "
                              "annotators.", {})
        return dataclasses.replace(est, group_sizes=sizes)
    means, cov, _, _ = group_moments(labels, group, 2)
    est = two_group_from_moments(means, cov[0, 1], annotator_ids=ids)
    return dataclasses.replace(est, group_sizes=sizes, details={**est.details, "annotators": pair})
