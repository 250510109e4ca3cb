"""Which labels are wrong: per-item and per-annotation posteriors, and a ranked table of likely errors.

For an item with responses ``A_i`` and conditioning information ``c_i`` (its score group, or its score
under a calibration-curve model) the fitted channel model gives (paper Appendix F.1, the E-step)

``P(Y_i = 1 | A_i, c_i, theta) = sigmoid(logit pi(c_i) + sum_j [l1_ij - l0_ij])``

with ``l_y,ij = log P(A_ij | Y = y)`` over the observed responses. With posterior draws ``theta_s`` the
answer averages over them, ``P(Y_i = 1 | data) = mean_s P(Y_i = 1 | A_i, c_i, theta_s)``, and the spread
of the per-draw values is the channel (and prevalence) uncertainty. Then

- ``P(A_ij is wrong | data) = P(Y_i != A_ij | data)``;
- ``P(majority label is wrong | data) = P(Y_i != maj_i | data)``.

No single label, and not the majority vote, is ever taken as the truth.

For K classes :func:`multiclass_label_issues` reads the same two numbers, ``P(majority wrong | data) =
1 - P(Y_i = maj_i | data)`` and the most likely clean class, from a given clean-label posterior (n, K) (e.g.
``fit_em_multiclass(...).clean_label_probability(data)``) or one per draw (S, n, K).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..data import Binning
from .._validation import binary_only, check_choice, check_level
from ._posterior import (RowPosteriors, check_clean_probs, check_data, check_fit, class_names, class_votes,
                         equal_tailed, level_and_draws, row_posteriors)

#: Most equal-mass score bins of the default model for ranking label errors (see :func:`default_issue_fit`).
DEFAULT_BINS = 50
#: The default model needs about this many items per bin; smaller data get fewer bins.
MIN_ITEMS_PER_BIN = 100


def default_issue_fit(data, *, n_starts: int = 5, seed: int = 0):
    """The fit :func:`label_issues` uses when none is given.

    With scores: the histogram calibration-curve model (``model="histogram"``) on
    ``min(50, max(2, n_items // 100))`` equal-mass score bins (one bin per 100 items, at most 50),
    fitted by EM. Without scores: the marginal Dawid-Skene model.

    Why: the score is the main evidence for items with split votes, and a fine histogram ranks as well as the best
    alternative with no parametric curve and closed-form EM (the comparison: docs/label_errors.md, *model choice*).
    """
    from ..inference.em import fit_em

    if data.scores is None:
        return fit_em(data, model="dawid_skene", n_starts=n_starts, seed=seed)
    n_bins = min(DEFAULT_BINS, max(2, data.n_items // MIN_ITEMS_PER_BIN))
    return fit_em(data, model="histogram", groups=Binning.equal_mass(n_bins), n_starts=n_starts, seed=seed)


def _interval(rp: RowPosteriors, level: float):
    if not rp.has_draws:
        nan = np.full(rp.inverse.size, np.nan)
        return nan, nan
    q = rp.item_quantiles([(1 - level) / 2, (1 + level) / 2])
    return q[0], q[1]


def _item_frame(data, rp: RowPosteriors, level: float, ties: str) -> pd.DataFrame:
    p = rp.item_mean()
    lo, hi = _interval(rp, level)
    maj = data.majority_vote(ties=ties).astype(np.int64)
    # From the sparse responses (repeats count as labels, as in the vote): no dense items x annotators matrix.
    n_lab = data.labels_per_item()
    n_pos = np.rint(data.vote_fraction() * n_lab)
    # P(Y != maj): 1 - p for a positive majority, p for a negative one; its interval flips the same way.
    wrong = np.where(maj == 1, 1 - p, p)
    wlo = np.where(maj == 1, 1 - hi, lo)
    whi = np.where(maj == 1, 1 - lo, hi)
    return pd.DataFrame({
        "item": data.item_ids, "n_labels": n_lab.astype(np.int64), "n_positive": n_pos.astype(np.int64),
        "majority_label": maj, "tie": 2 * n_pos == n_lab,
        "p_positive": p, "p_positive_lower": lo, "p_positive_upper": hi,
        "p_majority_wrong": wrong, "p_majority_wrong_lower": wlo, "p_majority_wrong_upper": whi,
    })


def _describe(fit, rp: RowPosteriors) -> dict:
    return {"model": fit.model, "method": fit.method, "n_groups": int(fit.groups.n_groups),
            "n_draws_used": int(rp.n_samples) if rp.has_draws else 0, "n_draws_fit": int(rp.thinned_from)}


def item_posteriors(data, fit, *, level: float = 0.9, ties: str = "positive",
                    n_draws: int | None = 1000) -> pd.DataFrame:
    """Posterior of each item's clean label, and of its majority label being wrong.

    Parameters
    ----------
    data : AnnotationSet
        The items to score: those the fit was made on, or new items with scores when the fit's groups
        come from score edges (they are assigned with ``fit.groups.assign``).
    fit : FitResult
        From ``fit_em``, ``fit_map`` or ``fit_nuts``, any model.
    level : float, default 0.9
        Mass of the equal-tailed interval over posterior draws.
    ties : {"positive", "negative"}, default "positive"
        How an evenly split vote is broken for ``majority_label`` (the ``tie`` column marks those items).
    n_draws : int or None, default 1000
        Thin the posterior draws evenly to at most this many (None: all). For the per-item Platt model
        the draws are also capped so that draws x items stays below 1e7.

    Returns
    -------
    DataFrame, one row per item in data order, columns
        ``item``, ``n_labels``, ``n_positive``, ``majority_label``, ``tie``, ``p_positive`` (posterior
        mean of ``P(Y_i = 1 | A_i, c_i, theta)``), ``p_positive_lower`` / ``_upper`` (equal-tailed
        ``level`` interval over draws: the channel and prevalence uncertainty; NaN for EM / MAP fits,
        which have no draws), ``p_majority_wrong`` and its ``_lower`` / ``_upper``.
        ``attrs`` records the model, method and numbers of draws.

    Raises
    ------
    ValueError
        ``data`` is not an AnnotationSet; ``fit`` is not a fit, has no estimate, or was made on other
        annotators; a Platt or score-edge fit with data without scores; new items whose score bin held
        no item in the fit; bad ``level``, ``ties`` or ``n_draws``.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> from noisycal_bayes.inference.em import fit_em
    >>> sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> fit = fit_em(sim.data, model="histogram", groups=Binning.equal_mass(10), n_starts=3)
    >>> post = item_posteriors(sim.data, fit)
    >>> bool(((post["p_positive"] > 0.5) == sim.clean_labels.astype(bool)).mean() > 0.9)
    True
    """
    binary_only(data, "item_posteriors", "fit_em_multiclass(data).clean_label_probability(data)")
    func = "item_posteriors"
    data = check_data(data, func)
    fit = check_fit(fit, func)
    level, n_draws = level_and_draws(level, n_draws)
    ties = check_choice(ties, ("positive", "negative"), name="ties")
    rp = row_posteriors(data, fit, n_draws=n_draws, func=func)
    out = _item_frame(data, rp, level, ties)
    out.attrs.update(_describe(fit, rp), level=level, ties=ties)
    return out


def annotation_posteriors(data, fit, *, level: float = 0.9, n_draws: int | None = 1000) -> pd.DataFrame:
    """``P(A_ij is wrong | data) = P(Y_i != A_ij | data)`` for every observed annotation.

    Parameters
    ----------
    data, fit, level, n_draws
        As in :func:`item_posteriors`.

    Returns
    -------
    DataFrame in long format, one row per observed response (item-major order), columns ``item``,
    ``annotator``, ``label``, ``p_wrong``, ``p_wrong_lower``, ``p_wrong_upper`` (NaN without draws).

    Notes
    -----
    ``p_wrong = 1 - P(Y_i = 1 | data)`` for a positive response and ``P(Y_i = 1 | data)`` for a
    negative one: every annotator's response on an item is judged against the same posterior, which
    already includes that response (it is the posterior that the response is an error, not a
    leave-one-out prediction).
    """
    binary_only(data, "annotation_posteriors", "fit_em_multiclass(data).clean_label_probability(data) (a response "
                "in class k is wrong with probability 1 - P(Y = k))")
    func = "annotation_posteriors"
    data = check_data(data, func)
    fit = check_fit(fit, func)
    level, n_draws = level_and_draws(level, n_draws)
    rp = row_posteriors(data, fit, n_draws=n_draws, func=func)
    p = rp.item_mean()
    lo, hi = _interval(rp, level)
    ii, jj, lab = (np.asarray(a) for a in data.responses)  # one row per response, repeats included
    lab = lab.astype(np.int64)
    pos = lab == 1
    out = pd.DataFrame({
        "item": data.item_ids[ii], "annotator": data.annotator_ids[jj], "label": lab,
        "p_wrong": np.where(pos, 1 - p[ii], p[ii]),
        "p_wrong_lower": np.where(pos, 1 - hi[ii], lo[ii]),
        "p_wrong_upper": np.where(pos, 1 - lo[ii], hi[ii]),
    })
    out.attrs.update(_describe(fit, rp), level=level)
    return out


def label_issues(data, fit=None, *, level: float = 0.9, ties: str = "positive", n_draws: int | None = 1000,
                 seed: int = 0) -> pd.DataFrame:
    """Items ranked by the posterior probability that their majority label is wrong, largest first.

    Parameters
    ----------
    data : AnnotationSet
    fit : FitResult, optional
        Any fit (``fit_em``, ``fit_map``, ``fit_nuts``) of ``data``; a NUTS fit adds intervals that
        carry the channel uncertainty. None fits :func:`default_issue_fit` (a histogram curve
        model by EM when there are scores, the marginal Dawid-Skene model otherwise).
    level, ties, n_draws
        As in :func:`item_posteriors`.
    seed : int, default 0
        Seed of the EM starts when ``fit`` is None.

    Returns
    -------
    DataFrame
        The columns of :func:`item_posteriors` plus ``rank`` (1 = most likely wrong) and
        ``expected_errors`` (the cumulative sum of ``p_majority_wrong``: the posterior expected number
        of wrong majority labels among the first ``rank`` rows, so ``expected_errors / rank`` is the
        expected precision of flagging them). Sorted by ``p_majority_wrong`` descending (ties keep data
        order). ``attrs`` holds the model, method and ``expected_total_errors``.

    Raises
    ------
    ValueError
        As :func:`item_posteriors`.

    Notes
    -----
    **Which conditioning information.** The posterior of an item with split votes is decided mostly by
    its prior ``P(Y = 1 | c_i)``, so a model that uses the score finely ranks errors much better than
    one that ignores it (the marginal model) or pools wide score groups (see
    :func:`default_issue_fit` for the measurements).

    **Circularity.** The ranking uses the classifier's scores as evidence about the clean labels. Do
    not then treat the top of this list as "corrected labels" and score *that* classifier against them:
    the items it disagrees with the annotators about are exactly the ones whose labels get flipped in
    its favour, so its accuracy is inflated (the same holds for confident learning, which uses the
    evaluated model's predicted probabilities; seeds/003). Use :func:`corrected_accuracy` and
    :func:`compare_models`, which average over the posterior instead of hardening it, and which
    condition on the predictions being judged (docs/label_errors.md, *Circularity*).

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], score_beta=(0.5, 0.5), seed=0)
    >>> issues = label_issues(sim.data)
    >>> list(issues.columns[:5])
    ['item', 'rank', 'n_labels', 'n_positive', 'majority_label']
    >>> bool(issues["p_majority_wrong"].is_monotonic_decreasing)
    True
    """
    binary_only(data, "label_issues", "multiclass_label_issues")
    func = "label_issues"
    data = check_data(data, func)
    level, n_draws = level_and_draws(level, n_draws)
    ties = check_choice(ties, ("positive", "negative"), name="ties")
    if fit is None:
        fit = default_issue_fit(data, seed=seed)
    fit = check_fit(fit, func)
    rp = row_posteriors(data, fit, n_draws=n_draws, func=func)
    out = _ranked(_item_frame(data, rp, level, ties))
    out.attrs.update(_describe(fit, rp), level=level, ties=ties,
                     expected_total_errors=float(out["expected_errors"].iloc[-1]))
    return out


def _ranked(out: pd.DataFrame) -> pd.DataFrame:
    """``out`` sorted by ``p_majority_wrong`` (largest first, ties keep their order, NaN rows last), with ``rank``
    and ``expected_errors`` (the cumulative posterior expected number of wrong majority labels)."""
    wrong = out["p_majority_wrong"].to_numpy()
    out = out.iloc[np.argsort(np.where(np.isnan(wrong), np.inf, -wrong), kind="stable")].reset_index(drop=True)
    out.insert(1, "rank", np.arange(1, len(out) + 1))
    out["expected_errors"] = np.nancumsum(out["p_majority_wrong"].to_numpy())
    return out


def multiclass_label_issues(data, clean_probs, *, level: float = 0.9, classes=None) -> pd.DataFrame:
    """Items ranked by the posterior probability that their majority label is wrong, largest first.

    Parameters
    ----------
    data : MulticlassAnnotationSet, Responses or (item, annotator, label) tuple of int arrays
        The items' labels as class indices ``0..K-1``.
    clean_probs : array of shape (n_items, n_classes) or (n_draws, n_items, n_classes)
        ``P(Y_i = k | data)`` of a fit of these items (a point fit, or one posterior per draw).
    level : float, default 0.9
        Mass of the equal-tailed intervals over draws (NaN with a point posterior).
    classes : sequence of n_classes names, optional
        Names for ``majority_label`` and ``likely_class`` (default ``data.classes`` if present, else indices).

    Returns
    -------
    DataFrame
        ``item`` (``data.item_ids`` or the index), ``rank`` (1 = most likely wrong), ``n_labels``,
        ``majority_label`` (ties: the lowest class index), ``n_majority_votes``, ``tie``,
        ``p_majority_wrong`` (``1 - P(Y_i = maj_i | data)``, mean over draws) with ``_lower`` / ``_upper``,
        ``likely_class`` (``argmax_k P(Y_i = k | data)``), ``p_likely_class`` with ``_lower`` / ``_upper``,
        ``expected_errors`` (cumulative sum of ``p_majority_wrong``). Items without a label come last (NaN).
        ``attrs``: ``level``, ``n_draws``, ``expected_total_errors``.

    Raises
    ------
    ValueError
        ``clean_probs`` of the wrong shape or not summing to 1; labels outside ``0..K-1``; bad ``level`` or
        ``classes``.

    Examples
    --------
    >>> resp = (np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([2, 2, 0, 1]))
    >>> q = np.array([[0.1, 0.1, 0.8], [0.2, 0.7, 0.1]])
    >>> out = multiclass_label_issues(resp, q)
    >>> out[["item", "majority_label", "likely_class"]].values.tolist(), out["p_majority_wrong"].round(2).tolist()
    ([[1, 0, 1], [0, 2, 2]], [0.8, 0.2])
    """
    func = "multiclass_label_issues"
    level = check_level(level)
    q = check_clean_probs(clean_probs)
    s, n, k = q.shape
    _, votes = class_votes(data, n, k, func)
    n_lab = votes.sum(axis=1)
    maj = votes.argmax(axis=1)  # ties to the lowest class index
    n_max = votes.max(axis=1)
    tie = (votes == n_max[:, None]).sum(axis=1) > 1
    labelled = n_lab > 0
    p_maj = q[:, np.arange(n), maj]  # (S, n)
    mean = q.mean(axis=0)
    likely = mean.argmax(axis=1)
    p_lik = q[:, np.arange(n), likely]
    if s > 1:
        m_lo, m_hi = equal_tailed(p_maj, level)
        l_lo, l_hi = equal_tailed(p_lik, level)
    else:
        m_lo = m_hi = l_lo = l_hi = np.full(n, np.nan)
    wrong = np.where(labelled, 1 - p_maj.mean(axis=0), np.nan)
    names = class_names(data, classes, k)
    lab = (lambda idx: names[idx]) if names is not None else (lambda idx: idx)
    ids = getattr(data, "item_ids", None)
    out = pd.DataFrame({
        "item": np.arange(n) if ids is None else np.asarray(ids), "n_labels": n_lab,
        "majority_label": np.where(labelled, lab(maj), None) if names is not None else np.where(labelled, maj, -1),
        "n_majority_votes": n_max, "tie": tie & labelled,
        "p_majority_wrong": wrong,
        "p_majority_wrong_lower": np.where(labelled, 1 - m_hi, np.nan),
        "p_majority_wrong_upper": np.where(labelled, 1 - m_lo, np.nan),
        "likely_class": lab(likely), "p_likely_class": p_lik.mean(axis=0),
        "p_likely_class_lower": l_lo, "p_likely_class_upper": l_hi,
    })
    out = _ranked(out)  # unlabelled items (NaN) last
    out.attrs.update(level=level, n_draws=int(s), expected_total_errors=float(np.nansum(wrong)))
    return out
