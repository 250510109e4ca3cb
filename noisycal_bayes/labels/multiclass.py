"""K-class label errors and corrected accuracy from the clean-label posterior (issue 18, item 5).

Both functions take the posterior of the clean labels, ``P(Y_i = k | data)``: a point fit's
``MulticlassEMFit.clean_label_probability(data)`` (n, K), or per-draw posteriors (S, n, K) (e.g. one per NUTS
draw of the confusion matrices and prevalences), never a single label or the majority vote.

- :func:`multiclass_label_issues`: ``P(majority label wrong | data) = 1 - P(Y_i = maj_i | data)`` and the most
  likely clean class, items ranked by the former (the binary :func:`~noisycal_bayes.labels.label_issues`).
- :func:`corrected_accuracy_multiclass`: the accuracy of ``yhat_i = argmax_k p_ik`` on the clean labels,
  ``(1/n) sum_i P(Y_i = yhat_i | data)``, with an interval from replicates that draw the posterior (a draw),
  the latent labels given it, and (``bootstrap=True``) Bayesian-bootstrap item weights
  (the binary :func:`~noisycal_bayes.labels.corrected_accuracy`).

**When the accuracy is unbiased** (as in the binary case): by the tower property when ``yhat`` is a function of
what the posterior conditions on, e.g. a grouped fit whose groups are the predicted class x confidence quantile
(``core.calibration.score_groups``). Pass ``groups`` to have this checked (:class:`~noisycal_bayes.warnings.DataWarning`
otherwise).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import _preview, check_level, check_positive_int
from ..propagate.draws import thin_index
from ..reference.multiclass import PROBS_ROW_TOL, check_probs, check_responses
from ..warnings import DataWarning

TARGETS = {True: "population accuracy (Bayesian bootstrap over items)",
           False: "sample accuracy (clean labels of these items)"}
# Replicates are drawn in blocks of at most this many (replicate x item) values.
_BLOCK_VALUES = 2_000_000


def check_clean_probs(clean_probs, *, n_items=None, n_classes=None) -> np.ndarray:
    """Clean-label posteriors as float64 (S, n, K) (a (n, K) point becomes S = 1), rows summing to 1."""
    try:
        q = np.array(clean_probs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`clean_probs` must be a numeric (n_items, n_classes) or (n_draws, n_items, n_classes) "
                         f"array; could not convert: {exc}") from None
    if q.ndim == 2:
        q = q[None]
    if q.ndim != 3 or q.shape[2] < 2:
        raise ValueError("`clean_probs` must have shape (n_items, n_classes) or (n_draws, n_items, n_classes) with "
                         f"n_classes >= 2; got {np.shape(clean_probs)}.")
    if n_items is not None and q.shape[1] != n_items:
        raise ValueError(f"`clean_probs` must have one row per item ({n_items}); got {q.shape[1]}.")
    if n_classes is not None and q.shape[2] != n_classes:
        raise ValueError(f"`clean_probs` must have one column per class ({n_classes}); got {q.shape[2]}.")
    bad = ~np.isfinite(q).all(axis=(0, 2)) | (q < 0).any(axis=(0, 2)) | (np.abs(q.sum(axis=2) - 1) >
                                                                         PROBS_ROW_TOL).any(axis=0)
    if bad.any():
        raise ValueError(f"`clean_probs` must be probabilities whose rows sum to 1 (within {PROBS_ROW_TOL}); items "
                         f"{_preview(np.flatnonzero(bad))} are not.")
    return q


def _votes(data, n_items: int, n_classes: int, func: str):
    n_data = getattr(data, "n_items", None)
    if n_data is not None and not isinstance(data, tuple) and n_data != n_items:
        raise ValueError(f"{func}: the data hold {n_data} items but the probabilities {n_items} rows.")
    resp = check_responses(data, n_items, n_classes, func=func)
    votes = np.zeros((n_items, n_classes), np.int64)
    np.add.at(votes, (resp.item, resp.label), 1)
    return resp, votes


def _names(data, classes, n_classes):
    names = classes if classes is not None else getattr(data, "classes", None)
    if names is None:
        return None
    names = list(names)
    if len(names) != n_classes:
        raise ValueError(f"`classes` must name the {n_classes} classes; got {len(names)} names.")
    return np.asarray(names, dtype=object)


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
    resp, votes = _votes(data, n, k, func)
    n_lab = votes.sum(axis=1)
    maj = votes.argmax(axis=1)  # ties to the lowest class index
    n_max = votes.max(axis=1)
    tie = (votes == n_max[:, None]).sum(axis=1) > 1
    labelled = n_lab > 0
    p_maj = q[:, np.arange(n), maj]  # (S, n)
    mean = q.mean(axis=0)
    likely = mean.argmax(axis=1)
    p_lik = q[:, np.arange(n), likely]
    qs = [(1 - level) / 2, (1 + level) / 2]
    if s > 1:
        m_lo, m_hi = np.quantile(p_maj, qs, axis=0)
        l_lo, l_hi = np.quantile(p_lik, qs, axis=0)
    else:
        m_lo = m_hi = l_lo = l_hi = np.full(n, np.nan)
    wrong = np.where(labelled, 1 - p_maj.mean(axis=0), np.nan)
    names = _names(data, classes, k)
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
    key = np.where(labelled, -wrong, np.inf)  # unlabelled items last
    out = out.iloc[np.argsort(key, kind="stable")].reset_index(drop=True)
    out.insert(1, "rank", np.arange(1, n + 1))
    out["expected_errors"] = np.nancumsum(out["p_majority_wrong"].to_numpy())
    out.attrs.update(level=level, n_draws=int(s), expected_total_errors=float(np.nansum(wrong)))
    return out


@dataclass(frozen=True)
class MulticlassAccuracy:
    """Noise-corrected top-1 accuracy of a K-class classifier.

    Attributes
    ----------
    accuracy, error_rate : float
        ``(1/n) sum_i P(Y_i = yhat_i | data)`` (mean over draws) and one minus it.
    lower, upper : float
        Equal-tailed ``level`` interval of ``target``.
    level : float
    target : str
    majority_accuracy, annotator_accuracy : float
        Naive numbers (NaN without ``responses``): accuracy against the majority vote (ties to the lowest class)
        and the mean over annotators of the accuracy against their own labels.
    parameter_uncertainty : str
        ``"posterior draws"`` or ``"none (point estimate)"``.
    conditioned : bool or None
        Whether the predictions are constant within ``groups`` (None without ``groups``).
    n_items, n_replicates : int
    p_correct : ndarray of shape (n_items,)
        ``P(Y_i = yhat_i | data)``.
    draws : ndarray of shape (n_replicates,)
    """

    accuracy: float
    error_rate: float
    lower: float
    upper: float
    level: float
    target: str
    majority_accuracy: float
    annotator_accuracy: float
    parameter_uncertainty: str
    conditioned: bool | None
    n_items: int
    n_replicates: int
    p_correct: np.ndarray = field(repr=False)
    draws: np.ndarray = field(repr=False)

    @property
    def interval(self) -> tuple:
        return (self.lower, self.upper)


def corrected_accuracy_multiclass(probs, clean_probs, *, level: float = 0.9, responses=None, groups=None,
                                  n_replicates: int = 2000, bootstrap: bool = True,
                                  seed: int = 0) -> MulticlassAccuracy:
    """Top-1 accuracy of ``argmax_k probs`` on the clean labels, with an interval.

    Parameters
    ----------
    probs : array of shape (n_items, n_classes)
        The classifier's probabilities (predictions ``yhat_i = argmax_k p_ik``, ties to the lowest class).
    clean_probs : array of shape (n_items, n_classes) or (n_draws, n_items, n_classes)
        ``P(Y_i = k | data)`` (a point fit, or one posterior per draw).
    level : float, default 0.9
    responses : MulticlassAnnotationSet, Responses or (item, annotator, label), optional
        For the naive accuracies beside the corrected one.
    groups : int array of shape (n_items,), optional
        What the posterior conditions on (the fit's score groups): checks that the predictions are constant
        within every group (otherwise the posterior estimate is biased; warns).
    n_replicates : int, default 2000
    bootstrap : bool, default True
        True: interval for the population accuracy (Bayesian-bootstrap item weights); False: for these items'.
    seed : int, default 0

    Returns
    -------
    MulticlassAccuracy

    Raises
    ------
    ValueError
        Bad ``probs``, ``clean_probs`` (shape, rows), ``groups``, ``responses``, ``level``, ``n_replicates``.

    Warns
    -----
    DataWarning
        The predictions vary within a group of ``groups``.

    Notes
    -----
    Replicate ``r`` takes posterior draw ``s_r`` (cycling through the draws evenly), draws ``1[Y_ri = yhat_i] ~
    Bernoulli(P_{s_r}(Y_i = yhat_i | data))`` and (``bootstrap``) ``Exp(1)`` item weights; its accuracy is the
    weighted mean. As :func:`~noisycal_bayes.labels.corrected_accuracy` for two classes.

    Examples
    --------
    >>> p = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    >>> q = np.array([[0.9, 0.05, 0.05], [0.5, 0.4, 0.1], [0.0, 0.0, 1.0]])
    >>> res = corrected_accuracy_multiclass(p, q, n_replicates=200)
    >>> round(res.accuracy, 4), res.lower <= res.accuracy <= res.upper
    (0.7667, True)
    """
    func = "corrected_accuracy_multiclass"
    p = check_probs(probs)
    n, k = p.shape
    q = check_clean_probs(clean_probs, n_items=n, n_classes=k)
    level = check_level(level)
    n_replicates = check_positive_int(n_replicates, name="n_replicates")
    yhat = p.argmax(axis=1)
    pc = q[:, np.arange(n), yhat]  # (S, n): P_s(Y_i = yhat_i)
    conditioned = None
    if groups is not None:
        g = np.asarray(groups)
        if g.shape != (n,) or not np.issubdtype(g.dtype, np.integer) or (g < 0).any():
            raise ValueError(f"{func}: `groups` must be non-negative integers of shape ({n},); got {g.shape}.")
        first = np.full(int(g.max()) + 1, -1)
        first[g[::-1]] = yhat[::-1]
        mixed = np.flatnonzero(first[g] != yhat)
        conditioned = mixed.size == 0
        if not conditioned:
            warnings.warn(f"{func}: the predictions vary within the groups {_preview(np.unique(g[mixed]))} the "
                          "posterior conditions on, so it ignores what the predictions know and the corrected accuracy "
                          "is biased. "
                          "Refit with groups on which argmax(probs) is constant (predicted class x confidence "
                          "quantile).", DataWarning, stacklevel=2)
    rng = np.random.default_rng(seed)
    which = thin_index(q.shape[0], n_replicates)
    reps = np.empty(n_replicates)
    step = max(1, _BLOCK_VALUES // n)
    for a in range(0, n_replicates, step):
        b = min(a + step, n_replicates)
        correct = rng.random((b - a, n)) < pc[which[a:b]]
        if bootstrap:
            w = rng.standard_exponential((b - a, n))
            reps[a:b] = (w * correct).sum(axis=1) / w.sum(axis=1)
        else:
            reps[a:b] = correct.mean(axis=1)
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    maj_acc = ann_acc = float("nan")
    if responses is not None:
        resp, votes = _votes(responses, n, k, func)
        has = votes.sum(axis=1) > 0
        maj_acc = float(np.mean(votes.argmax(axis=1)[has] == yhat[has]))
        hit = resp.label == yhat[resp.item]
        per = np.bincount(resp.annotator, weights=hit, minlength=resp.n_annotators)
        cnt = np.bincount(resp.annotator, minlength=resp.n_annotators)
        ann_acc = float(np.mean(per[cnt > 0] / cnt[cnt > 0]))
    acc = float(pc.mean())
    return MulticlassAccuracy(
        accuracy=acc, error_rate=1 - acc, lower=float(lo), upper=float(hi), level=level,
        target=TARGETS[bool(bootstrap)], majority_accuracy=maj_acc, annotator_accuracy=ann_acc,
        parameter_uncertainty="posterior draws" if q.shape[0] > 1 else "none (point estimate)",
        conditioned=conditioned, n_items=n, n_replicates=n_replicates, p_correct=pc.mean(axis=0), draws=reps)
