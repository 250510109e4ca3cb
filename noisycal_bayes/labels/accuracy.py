"""Noise-corrected accuracy of a thresholded classifier, from the posterior of the clean labels.

With predictions ``yhat_i = 1[z_i >= t]`` the accuracy on the clean labels of these items is
``(1/n) sum_i 1[Y_i = yhat_i]``. Its posterior mean is

``acc = (1/n) sum_i P(Y_i = yhat_i | data) = (1/n) sum_i [yhat_i p_i + (1 - yhat_i)(1 - p_i)]``

with ``p_i = P(Y_i = 1 | A_i, c_i)`` averaged over the posterior draws. Intervals come from replicates
that draw the channel (NUTS draws), the latent clean labels given it, and (``bootstrap=True``)
Bayesian-bootstrap item weights for the population the items were drawn from.

**When it is unbiased.** By the tower property ``E[P(Y_i = yhat_i | A_i, c_i)] = P(Y_i = yhat_i)``
whenever ``yhat_i`` is a function of the conditioning information ``c_i`` and the model of
``P(Y | c)`` and the channel are right. With ``c_i`` = the score bin and the threshold an edge of the
bins, ``yhat`` is a function of ``c``, and ``Y | c ~ Bernoulli(pi_c)`` holds exactly for any discrete
``c``: only the channel assumptions remain (class-conditional, score-invariant, independent
annotators). When ``yhat`` carries information that ``c`` does not (another model's predictions, a
threshold inside a bin), the posterior treats that information as irrelevant and the estimate is
biased (towards the accuracy a predictor using only ``c`` would have). The functions here check this
and warn; the default fit puts the threshold on a bin edge.

The corrected-label estimate ``(1/n) sum_i [yhat_i Ytilde_i + (1 - yhat_i)(1 - Ytilde_i)]`` (paper §3
corrected labels) is reported beside it: linear in the clean label, hence unbiased given the channel
for any predictions, at the price of a larger variance.

For K classes :func:`corrected_accuracy_multiclass` takes the clean-label posterior (n, K) or (S, n, K) and the
classifier's probabilities: the accuracy of ``yhat_i = argmax_k p_ik`` is ``(1/n) sum_i P(Y_i = yhat_i | data)``,
unbiased under the same condition (``yhat`` a function of the fit's groups, e.g. predicted class x confidence
quantile, ``core.score_groups``; checked when ``groups`` is given).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import (_preview, binary_only, check_level, check_positive_int, check_probability, check_scores,
                           check_weights, shared_channels_only)
from ..data import Binning, bin_index
from ..propagate.draws import thin_index
from ..reference.calibration import check_probs
from ..warnings import DataWarning
from ._posterior import (_PER_GROUP_INSTEAD, _item_groups, check_clean_probs, check_data, check_fit, class_votes,
                         equal_tailed, level_and_draws, posterior_mean_accuracy, row_posteriors)
from ._replicates import _BLOCK_VALUES, SOURCES, Replicates
from .issues import DEFAULT_BINS, MIN_ITEMS_PER_BIN

TARGETS = {True: "population accuracy (Bayesian bootstrap over items)",
           False: "sample accuracy (clean labels of these items)"}


def predictions(scores, threshold: float) -> np.ndarray:
    """``1[z >= threshold]`` as int8, shape (n_items,)."""
    return (np.asarray(scores) >= threshold).astype(np.int8)


def threshold_bins(scores, thresholds, n_items: int) -> np.ndarray:
    """Equal-mass score bins with every threshold added as an edge, as integer groups (n_items,)."""
    n_bins = min(DEFAULT_BINS, max(2, n_items // MIN_ITEMS_PER_BIN))
    edges = Binning.equal_mass(n_bins).edges_for(scores)
    edges = np.unique(np.concatenate([edges, np.asarray(thresholds, dtype=np.float64)]))
    return bin_index(scores, edges)


def conditioned_on(data, fit, yhat: np.ndarray, func: str) -> bool:
    """Whether the predictions ``yhat`` are a function of what the fit conditions ``Y_i`` on.

    Grouped models: ``yhat`` constant within every group. Platt: ``yhat`` a threshold of the fit's
    scores (``max z[yhat = 0] < min z[yhat = 1]``).
    """
    if fit.model == "platt":
        z = data.require_scores()
        if yhat.min() == yhat.max():
            return True
        return bool(z[yhat == 0].max() < z[yhat == 1].min())
    return mixed_groups(_item_groups(data, fit, func), yhat).size == 0


def mixed_groups(groups: np.ndarray, yhat: np.ndarray) -> np.ndarray:
    """The groups (sorted) in which the predictions ``yhat`` (n_items,) are not constant; ``groups`` (n_items,)
    non-negative ints. Binary or K-class predictions alike."""
    first = np.full(int(groups.max()) + 1, -1, dtype=np.int64)
    first[groups[::-1]] = yhat[::-1]  # the first prediction of each group (later assignments win)
    return np.unique(groups[first[groups] != yhat])


def warn_unconditioned(names, fit, func: str, *, stacklevel: int = 3):
    names = list(names)
    warnings.warn(
        f"{func}: the predictions of {names} are not a function of what this {fit.model!r} fit conditions the clean "
        "labels on (its score groups, or its own scores), so the posterior ignores what those predictions know and "
        "their corrected accuracy is biased (pulled towards that of a predictor using only the fit's groups). Refit "
        "with groups that every prediction is constant on, or pass fit=None to let this function do so; the "
        "corrected-label estimate does not depend on the groups.", DataWarning, stacklevel=stacklevel)


def fitted_posteriors(data, fit, yhat: np.ndarray, names, *, model: str, groups, n_draws, seed: int, func: str):
    """The fit (EM of ``model`` on ``groups()`` when None), its row posteriors, and whether each model's
    predictions (columns of ``yhat``, (n_items, M)) are a function of what it conditions on (warns if not).

    Returns ``(fit, RowPosteriors, conditioned list of bool)``.
    """
    if fit is None:
        from ..inference.em import fit_em

        fit = fit_em(data, model=model, groups=groups(), n_starts=5, seed=seed)
    fit = check_fit(fit, func)
    shared_channels_only(fit, func, _PER_GROUP_INSTEAD)  # the replicates correct labels with one channel
    rp = row_posteriors(data, fit, n_draws=n_draws, func=func)
    conditioned = [conditioned_on(data, fit, yhat[:, m], func) for m in range(yhat.shape[1])]
    if not all(conditioned):
        warn_unconditioned([n for n, c in zip(names, conditioned) if not c], fit, func, stacklevel=4)
    return fit, rp, conditioned


@dataclass(frozen=True)
class CorrectedAccuracy:
    """Noise-corrected accuracy of one thresholded classifier.

    accuracy, error_rate : float
        Posterior mean ``(1/n) sum_i P(Y_i = yhat_i | data)`` and one minus it.
    lower, upper : float
        Equal-tailed ``level`` interval of ``target``.
    corrected_label_accuracy, corrected_label_lower, corrected_label_upper : float
        The corrected-label (moment) estimate and its interval (channel draws x bootstrap).
    majority_accuracy : float
        Accuracy against the majority vote (ties -> 1): the naive number.
    annotator_accuracy : float
        Mean over annotators of the accuracy against that annotator's own labels.
    parameter_uncertainty : str
        Where the replicates' channel and prevalence values come from: "posterior draws" (NUTS),
        "weighted-likelihood bootstrap (EM refits)" (EM / MAP fits of grouped models) or "none (point
        estimate)" (other point fits; the interval then omits the channel uncertainty).
    failed_refits : int
        Bootstrap refits that did not converge or lost their orientation (replaced by the estimate).
    conditioned : bool
        Whether the predictions are a function of the fit's conditioning information (see module notes).
    p_correct : ndarray (n_items,)
        ``P(Y_i = yhat_i | data)`` per item.
    draws : dict of name -> ndarray (n_replicates,)
        ``accuracy`` and ``corrected_label_accuracy`` replicates.
    """

    accuracy: float
    error_rate: float
    lower: float
    upper: float
    corrected_label_accuracy: float
    corrected_label_lower: float
    corrected_label_upper: float
    majority_accuracy: float
    annotator_accuracy: float
    threshold: float
    level: float
    target: str
    n_items: int
    n_replicates: int
    model: str
    method: str
    parameter_uncertainty: str
    failed_refits: int
    conditioned: bool
    p_correct: np.ndarray = field(repr=False)
    draws: dict = field(repr=False)


    def to_frame(self) -> pd.DataFrame:
        """One-row table of the scalar fields."""
        keys = ("accuracy", "error_rate", "lower", "upper", "corrected_label_accuracy", "corrected_label_lower",
                "corrected_label_upper", "majority_accuracy", "annotator_accuracy", "threshold", "level", "target",
                "n_items", "model", "method", "parameter_uncertainty", "conditioned")
        return pd.DataFrame({k: [getattr(self, k)] for k in keys})


def naive_accuracies(data, yhat: np.ndarray) -> tuple:
    """Accuracy against the majority vote (ties -> 1) and the mean over annotators of accuracy against each."""
    maj = data.majority_vote(ties="positive")
    item, ann, lab = (np.asarray(a) for a in data.responses)  # every response, repeats included
    per_ann = (np.bincount(ann, weights=lab == yhat[item], minlength=data.n_annotators)
               / np.bincount(ann, minlength=data.n_annotators))
    return float(np.mean(maj == yhat)), float(np.mean(per_ann))


def corrected_accuracy(data, fit=None, *, scores=None, threshold: float = 0.5, level: float = 0.9,
                       n_replicates: int = 2000, bootstrap: bool = True, weights="iv",
                       n_draws: int | None = 1000, seed: int = 0) -> CorrectedAccuracy:
    """Accuracy (and error rate) of ``1[score >= threshold]`` on the clean labels, with an interval.

    Parameters
    ----------
    data : AnnotationSet
    fit : FitResult, optional
        A fit of ``data`` (``fit_em``, ``fit_map``, ``fit_nuts``). None fits a histogram model by EM on
        equal-mass bins of ``scores`` with ``threshold`` added as a bin edge, so that the predictions are
        a function of the bins (see Notes).
    scores : array of shape (n_items,), optional
        The classifier's scores; default ``data.scores``.
    threshold : float in [0, 1], default 0.5
        Predict 1 when ``score >= threshold``.
    level : float, default 0.9
    n_replicates : int, default 2000
        Replicates for the interval (each: channel and prevalence values, latent labels, item weights).
    bootstrap : bool, default True
        True: interval for the population accuracy (the replicates' item weights also weight the
        average). False: for the accuracy on these items' clean labels.
    weights : {"iv", "equal", "gap", "squared_gap"} or array (n_annotators,)
        Annotator weights of the corrected-label estimate.
    n_draws : int or None, default 1000
        Thin the fit's posterior draws to at most this many.
    seed : int, default 0
        Seed of the replicates (and of the EM starts when ``fit`` is None).

    Returns
    -------
    CorrectedAccuracy

    Raises
    ------
    ValueError
        Bad ``data``, ``fit``, ``scores`` (shape, range), ``threshold``, ``level``, ``n_replicates``,
        ``weights``.

    Warns
    -----
    DataWarning
        The predictions are not a function of what the fit conditions on (the posterior estimate is then
        biased; the corrected-label estimate is not).

    Notes
    -----
    ``accuracy = (1/n) sum_i [yhat_i p_i + (1 - yhat_i)(1 - p_i)]`` with ``p_i = P(Y_i = 1 | data)``
    (module docstring). The interval is over replicates ``r``: parameters ``theta_r`` (a posterior draw
    of a NUTS fit; for an EM / MAP fit of a grouped model the weighted-likelihood bootstrap refit on
    Dirichlet(1)-reweighted counts, Newton & Raftery 1994; otherwise the point estimate, see
    ``parameter_uncertainty``), latent labels ``Y_i ~ Bernoulli(P(Y_i = 1 | A_i, c_i, theta_r))`` and,
    with ``bootstrap``, the same Dirichlet(1) item weights in the average. Coverage of the 90% interval
    is checked by simulation in ``tests/statistical/test_label_errors.py``.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], seed=0)
    >>> res = corrected_accuracy(sim.data, n_replicates=500)
    >>> truth = float(np.mean((sim.data.scores >= 0.5) == sim.clean_labels))
    >>> bool(res.lower < truth < res.upper)
    True
    """
    binary_only(data, "corrected_accuracy", "corrected_accuracy_multiclass")
    func = "corrected_accuracy"
    data = check_data(data, func)
    z = data.require_scores() if scores is None else check_scores(scores, ids=data.item_ids)
    if z.shape != (data.n_items,):
        raise ValueError(f"{func}: `scores` must have shape ({data.n_items},), one per item; got {z.shape}.")
    t = check_probability(threshold, name="threshold")
    level, n_draws = level_and_draws(level, n_draws)
    n_replicates = check_positive_int(n_replicates, name="n_replicates")
    w_rule, _ = check_weights(weights, data.n_annotators)
    yhat = predictions(z, t)
    fit, rp, (conditioned,) = fitted_posteriors(data, fit, yhat[:, None], ["scores"], model="histogram",
                                                groups=lambda: threshold_bins(z, [t], data.n_items),
                                                n_draws=n_draws, seed=seed, func=func)
    engine = Replicates(fit, rp.rows, yhat[:, None], weights=w_rule, n_draws=n_draws)
    reps = engine.run(n_replicates, bool(bootstrap), np.random.default_rng(seed))
    return _accuracy_result(data, rp, engine, reps, yhat, t, level, bootstrap, fit, conditioned)


def _accuracy_result(data, rp, engine, reps, yhat, t, level, bootstrap, fit, conditioned) -> CorrectedAccuracy:
    """Assemble :class:`CorrectedAccuracy` from the posteriors and the replicates."""
    acc = float(posterior_mean_accuracy(rp, yhat[:, None])[0])
    m_point = engine.point_moment_accuracy()
    lo, hi = equal_tailed(reps["accuracy"][:, 0], level)
    mlo, mhi = equal_tailed(reps["corrected_label_accuracy"][:, 0], level)
    p = rp.item_mean()
    maj_acc, ann_acc = naive_accuracies(data, yhat)
    return CorrectedAccuracy(
        accuracy=acc, error_rate=1 - acc, lower=float(lo), upper=float(hi),
        corrected_label_accuracy=float(m_point[0]), corrected_label_lower=float(mlo), corrected_label_upper=float(mhi),
        majority_accuracy=maj_acc, annotator_accuracy=ann_acc, threshold=t, level=level,
        target=TARGETS[bool(bootstrap)],
        n_items=data.n_items, n_replicates=reps["accuracy"].shape[0], model=fit.model, method=fit.method,
        parameter_uncertainty=SOURCES[engine.source], failed_refits=reps["failed_refits"], conditioned=conditioned,
        p_correct=np.where(yhat == 1, p, 1 - p),
        draws={"accuracy": reps["accuracy"][:, 0], "corrected_label_accuracy": reps["corrected_label_accuracy"][:, 0]})


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
        mixed = mixed_groups(g, yhat)
        conditioned = mixed.size == 0
        if not conditioned:
            warnings.warn(f"{func}: the predictions vary within the groups {_preview(mixed)} the "
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
    lo, hi = equal_tailed(reps, level)
    maj_acc = ann_acc = float("nan")
    if responses is not None:
        resp, votes = class_votes(responses, n, k, func)
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
