"""Which classifier is really better: posterior probabilities on the clean labels (seeds/003).

For classifiers ``m = 1..M`` scored on the same annotated items, every replicate ``r`` gives each
model an accuracy on the clean labels (latent labels drawn from their posterior, optionally with
Bayesian-bootstrap item weights) and an NC-ECE (paper §3, under the replicate's channel draw and the
same item weights). Then

- ``P(m most accurate) = mean_r 1[acc_m^(r) = max_k acc_k^(r)]`` (ties share the credit);
- ``P(m best calibrated) = mean_r 1[NCECE_m^(r) = min_k NCECE_k^(r)]``.

All models in a replicate share the draws, so the comparison is paired.

**Circularity** (seeds/003): judging models against labels "corrected" with one model's own predicted
probabilities credits that model with every disagreement it wins. Here the accuracy is a posterior
expectation, unbiased for a model whose predictions are a function of the fit's conditioning information
(tower property; :mod:`noisycal_bayes.labels.accuracy`), and biased for the others, so the default fit of
:func:`compare_models` conditions on groups that refine the joint prediction pattern of all models: for any
discrete grouping ``Y | group ~ Bernoulli(pi_group)`` is exactly right, and only the channel assumptions
remain; the groups also split by score, which absorbs annotator errors that depend on the score (CIFAR-10N:
docs/label_errors.md, section 5). The NC-ECE uses the channel only, never a prior from any model's scores.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import _preview, binary_only, check_positive_int, check_probability, check_scores, check_weights
from ..core import ece_from_labels, x64
from ..data import Binning, as_binning, bin_index
from ._posterior import check_data, level_and_draws, posterior_mean_accuracy
from ._replicates import SOURCES, Replicates
from .issues import DEFAULT_BINS, MIN_ITEMS_PER_BIN
from .accuracy import TARGETS, fitted_posteriors, naive_accuracies, predictions


@dataclass(frozen=True)
class ModelComparison:
    """Posterior comparison of several classifiers on the clean labels.

    table : DataFrame, one row per model
        ``model``, ``threshold``, ``accuracy`` (posterior mean), ``accuracy_lower`` / ``_upper``,
        ``p_most_accurate``, ``nc_ece`` (mean over replicates), ``nc_ece_lower`` / ``_upper``,
        ``p_best_calibrated``, ``majority_accuracy`` and ``majority_ece`` (the naive numbers against
        the majority vote), ``conditioned`` (predictions a function of the fit's conditioning
        information).
    draws : dict with ``accuracy`` and ``nc_ece``, each (n_replicates, n_models) in table order
    """

    table: pd.DataFrame
    draws: dict = field(repr=False)
    models: tuple
    level: float
    target: str
    bins: object
    weights: object
    n_replicates: int
    fit_model: str
    fit_method: str
    parameter_uncertainty: str
    failed_refits: int


    def probability_better(self, a, b, *, metric: str = "accuracy") -> float:
        """Posterior probability that model ``a`` beats model ``b`` (higher accuracy / lower NC-ECE)."""
        if metric not in ("accuracy", "nc_ece"):
            raise ValueError(f"`metric` must be 'accuracy' or 'nc_ece'; got {metric!r}.")
        for name in (a, b):
            if name not in self.models:
                raise ValueError(f"unknown model {name!r}; models are {list(self.models)}.")
        x = self.draws[metric]
        ia, ib = self.models.index(a), self.models.index(b)
        d = x[:, ia] - x[:, ib]
        if metric == "nc_ece":
            d = -d
        return float(np.mean(d > 0) + 0.5 * np.mean(d == 0))


def _check_scores_dict(scores, data, func):
    if not isinstance(scores, dict) or len(scores) < 2:
        raise ValueError(f"{func}: `scores` must be a dict of at least two models, name -> scores of shape "
                         f"({data.n_items},); got {type(scores).__name__}"
                         + (f" with {len(scores)} entry" if isinstance(scores, dict) else "")
                         + ". For one model use corrected_accuracy.")
    out = {}
    for name, z in scores.items():
        try:
            arr = check_scores(z, name=f"scores[{name!r}]", ids=data.item_ids)
        except ValueError as exc:
            raise ValueError(f"{func}: {exc}") from None
        if arr.shape != (data.n_items,):
            raise ValueError(f"{func}: `scores[{name!r}]` must have shape ({data.n_items},), one per item of `data`; "
                             f"got {arr.shape}.")
        out[name] = arr
    return out


def _thresholds(threshold, names, func):
    if isinstance(threshold, dict):
        missing = [n for n in names if n not in threshold]
        extra = [n for n in threshold if n not in names]
        if missing or extra:
            raise ValueError(f"{func}: `threshold` as a dict must name exactly the models {list(names)}; missing "
                             f"{_preview(missing)}, unknown {_preview(extra)}.")
        return {n: check_probability(threshold[n], name="threshold") for n in names}
    t = check_probability(threshold, name="threshold")
    return {n: t for n in names}


def _share_best(x: np.ndarray, largest: bool) -> np.ndarray:
    """Fraction of rows where each column is the best (ties split evenly), shape (M,)."""
    best = x.max(axis=1, keepdims=True) if largest else x.min(axis=1, keepdims=True)
    win = (x == best).astype(np.float64)
    return (win / win.sum(axis=1, keepdims=True)).mean(axis=0)


def joint_prediction_groups(yhat: np.ndarray) -> np.ndarray:
    """Integer group per item: the pattern of every model's prediction (at most 2^M groups)."""
    return (yhat.astype(np.int64) << np.arange(yhat.shape[1], dtype=np.int64)).sum(axis=1)


def comparison_groups(yhat: np.ndarray, scores) -> np.ndarray:
    """The default groups of :func:`compare_models`: joint prediction pattern x score bins.

    Equal-mass bins (``min(50, max(2, n_items // 100))``, as for :func:`label_issues`) of the mean of
    the models' scores, split by the pattern of their predictions. Every model's predictions are
    constant on every group (a refinement of :func:`joint_prediction_groups`), and the bins let the
    prior follow the scores finely, which the ranking measurements favour; the mean score favours no
    single model.
    """
    n = yhat.shape[0]
    zbar = np.mean(np.stack([np.asarray(z, dtype=np.float64) for z in scores]), axis=0)
    n_bins = min(DEFAULT_BINS, max(2, n // MIN_ITEMS_PER_BIN))
    b = bin_index(zbar, Binning.equal_mass(n_bins).edges_for(zbar)).astype(np.int64)
    return joint_prediction_groups(yhat) * (n_bins + 1) + b


def compare_models(data, scores: dict, fit=None, *, threshold=0.5, bins=10, weights="iv", level: float = 0.9,
                   n_replicates: int = 1000, bootstrap: bool = True, n_draws: int | None = 1000,
                   seed: int = 0) -> ModelComparison:
    """Posterior probability that each classifier is the most accurate / best calibrated on clean labels.

    Parameters
    ----------
    data : AnnotationSet
        The annotated evaluation items (its own scores, if any, are not used unless ``fit`` uses them).
    scores : dict of name -> array of shape (n_items,)
        Two or more classifiers' scores on the items of ``data``.
    fit : FitResult, optional
        A channel fit of ``data``. None (recommended) fits the grouped model by EM on
        :func:`comparison_groups`: score bins of the models' mean score split by the pattern of their
        predictions, so that every model's predictions are a function of the groups and no model is
        favoured (see Notes). A fit whose groups come from one model's scores favours that model; it is
        accepted with a :class:`DataWarning`.
    threshold : float or dict of name -> float, default 0.5
    bins : int or Binning, default 10
        Evaluation bins of the NC-ECE (int: equal width), computed per model on its own scores.
    weights : {"iv", "equal", "gap", "squared_gap"} or array, default "iv"
        Annotator weights of the corrected labels in NC-ECE.
    level : float, default 0.9
    n_replicates : int, default 1000
    bootstrap : bool, default True
        True: population targets (Bayesian bootstrap item weights shared by all models in a replicate).
        False: accuracy on these items' clean labels; the NC-ECE then varies with the channel values only.
    n_draws : int or None, default 1000
    seed : int, default 0

    Returns
    -------
    ModelComparison

    Raises
    ------
    ValueError
        Not an AnnotationSet; ``scores`` not a dict of at least two valid score arrays of the right
        length; bad threshold(s), bins, weights, level, n_replicates; an unusable fit.

    Warns
    -----
    DataWarning
        Some model's predictions are not a function of what ``fit`` conditions on.

    Notes
    -----
    Why the default fit conditions on the joint prediction pattern: module docstring ("Circularity").
    Replicates draw the parameters as :func:`corrected_accuracy` does (posterior draws of a NUTS fit,
    weighted-likelihood bootstrap refits of an EM fit), the latent labels, and Bayesian-bootstrap item
    weights shared by every model in the replicate.
    """
    binary_only(data, "compare_models", "corrected_accuracy_multiclass, once per model")
    func = "compare_models"
    data = check_data(data, func)
    sc = _check_scores_dict(scores, data, func)
    names = tuple(sc)
    th = _thresholds(threshold, names, func)
    level, n_draws = level_and_draws(level, n_draws)
    n_replicates = check_positive_int(n_replicates, name="n_replicates")
    w_rule, _ = check_weights(weights, data.n_annotators)
    binning = as_binning(bins)
    yhat = np.stack([predictions(sc[n], th[n]) for n in names], axis=1)
    fit, rp, conditioned = fitted_posteriors(data, fit, yhat, names, model="grouped",
                                             groups=lambda: comparison_groups(yhat, list(sc.values())),
                                             n_draws=n_draws, seed=seed, func=func)
    edges = [binning.edges_for(sc[n]) for n in names]
    engine = Replicates(fit, rp.rows, yhat, weights=w_rule, n_draws=n_draws,
                        ece=[(sc[n], e) for n, e in zip(names, edges)])
    reps = engine.run(n_replicates, bool(bootstrap), np.random.default_rng(seed))
    table = _comparison_table(data, sc, th, yhat, edges, posterior_mean_accuracy(rp, yhat), reps, conditioned, level)
    return ModelComparison(table=table, draws={"accuracy": reps["accuracy"], "nc_ece": reps["nc_ece"]}, models=names,
                           level=level, target=TARGETS[bool(bootstrap)], bins=bins, weights=weights,
                           n_replicates=n_replicates, fit_model=fit.model, fit_method=fit.method,
                           parameter_uncertainty=SOURCES[engine.source], failed_refits=reps["failed_refits"])


def _comparison_table(data, sc: dict, th: dict, yhat, edges, acc_mean, reps, conditioned, level) -> pd.DataFrame:
    """One row per model: posterior accuracy and NC-ECE with intervals, P(best), and the naive baselines."""
    names = list(sc)
    acc, ece = reps["accuracy"], reps["nc_ece"]
    q = [(1 - level) / 2, (1 + level) / 2]
    acc_q, ece_q = np.quantile(acc, q, axis=0), np.quantile(ece, q, axis=0)
    maj = data.majority_vote(ties="positive").astype(np.float64)
    maj_acc, maj_ece = [], []
    with x64():
        for m, n in enumerate(names):
            maj_acc.append(naive_accuracies(data, yhat[:, m])[0])
            maj_ece.append(float(ece_from_labels(sc[n], maj, bin_index(sc[n], edges[m]), edges[m].size - 1)))
    return pd.DataFrame({
        "model": list(names), "threshold": [th[n] for n in names], "accuracy": acc_mean,
        "accuracy_lower": acc_q[0], "accuracy_upper": acc_q[1], "p_most_accurate": _share_best(acc, True),
        "nc_ece": ece.mean(axis=0), "nc_ece_lower": ece_q[0], "nc_ece_upper": ece_q[1],
        "p_best_calibrated": _share_best(ece, False), "majority_accuracy": maj_acc, "majority_ece": maj_ece,
        "conditioned": conditioned,
    })
