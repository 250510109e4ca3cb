"""NC-ECE with estimated channels (paper §3, Appendix C.2–C.4): independent samples (:func:`nc_ece_split`), reuse
(:func:`nc_ece_reuse`), cross-fitting (:func:`nc_ece_cross_fit`) and a bootstrap (:func:`bootstrap_nc_ece`).

Each takes an ``estimator``: ``data -> Channel`` or a result with ``.channel``; default the reference EM with
``Binning.equal_mass(5)`` groups. Details: docs/foundations.md, *noisycal_bayes.reference.variants*.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._progress import progress
from .._validation import binary_only, check_positive_int
from ..data import AnnotationSet, as_binning
from ..warnings import DataWarning
from ._estimated import (_TARGET, _bin_sums, _check_common, _check_estimator, _fit_or_raise, _require_all_annotators,
                         _subset, _table, _warn_unconverged, _weights_for)
from .calibration import nc_ece
from .nc_ece_bootstrap import BootstrapNCECEResult, bootstrap_nc_ece  # noqa: F401 (re-exported)

# The K-class alternative every variant names when refusing K-class data.
_K_CLASS = ("top_label_nc_ece or classwise_nc_ece, or bootstrap_multiclass_nc_ece (which refits the channels per "
            "replicate)")


@dataclass(frozen=True)
class NCECEVariantResult:
    """NC-ECE with estimated channels, and how it was made.

    Attributes
    ----------
    value : float
        ``sum_k |sum_{i in B_k} Rtilde_i| / n_eval`` over the evaluated items.
    table : DataFrame
        One row per evaluation bin: ``bin, lower, upper, count, mean_score, corrected_frequency, residual``
        (NaN means for empty bins); for cross-fitting the sums over all held-out folds.
    variant : str
        ``"independent"``, ``"reuse"`` or ``"cross_fit"``.
    edges : ndarray of shape (n_bins + 1,)
        The one evaluation partition used (for cross-fitting: shared by every fold).
    channels : tuple of Channel
        One fitted channel (independent, reuse) or one per fold (cross-fit, fitted out of fold).
    weights : ndarray of shape (n_fits, n_annotators)
        Annotator weights used with each channel.
    weights_rule : str
    n_fit : int
        Items the channels were fitted on (cross-fit: ``n_items``, each item used in ``n_folds - 1`` fits).
    n_eval : int
        Items the NC-ECE averages over.
    fold : ndarray of shape (n_items,) or None
        Independent: 0 = channel-fitting item, 1 = evaluation item. Cross-fit: the item's held-out fold.
        Reuse: None.
    fold_table : DataFrame or None
        Cross-fit only: per (fold, bin) ``count, score_sum, corrected_sum`` before summing.
    n_unconverged : int
        Channel fits whose estimator reported ``converged = False`` (their channels are still used).
    seed : int or None
    target : str
    """

    value: float
    table: pd.DataFrame = field(repr=False)
    variant: str
    edges: np.ndarray = field(repr=False)
    channels: tuple = field(repr=False)
    weights: np.ndarray = field(repr=False)
    weights_rule: str
    n_fit: int
    n_eval: int
    fold: np.ndarray | None = field(default=None, repr=False)
    fold_table: pd.DataFrame | None = field(default=None, repr=False)
    n_unconverged: int = 0
    seed: int | None = None
    target: str = _TARGET

    def __float__(self) -> float:
        return self.value


def nc_ece_split(data: AnnotationSet, *, estimator=None, bins=10, weights="iv", fraction: float = 0.5,
                 seed: int = 0) -> NCECEVariantResult:
    """NC-ECE from independent samples: channels fitted on one part, evaluated on the other (paper §3).

    Items are split at random (``seed``) into a channel-fitting part (a share ``fraction``) and an
    evaluation part. The channels, the annotator weights (IV weights use the fitting part's mean
    corrected label) and, for equal-mass ``bins``, the edges come from the fitting part; NC-ECE is then
    ``sum_k |sum_{i in B_k, i in eval} Rtilde_i| / n_eval`` (Theorem C.1).

    Parameters
    ----------
    data : AnnotationSet with scores
    estimator : callable ``AnnotationSet -> ChannelEstimate | Channel``, optional
        Default: ``fit_em(data, groups=Binning.equal_mass(5))`` (:mod:`noisycal_bayes.reference.em`).
    bins : int or Binning
    weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,)
    fraction : float in (0, 1)
        Share of items used to fit the channels.
    seed : int

    Returns
    -------
    NCECEVariantResult with ``variant = "independent"``.

    Raises
    ------
    ValueError
        Bad ``fraction``; a part left empty or without labels from some annotator; the estimator found
        no identified channel on the fitting part.

    Examples
    --------
    >>> from noisycal_bayes import simulate_annotations
    >>> sim = simulate_annotations(400, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> res = nc_ece_split(sim.data, estimator=lambda d: sim.channel, seed=1)
    >>> res.variant, res.n_fit, res.n_eval
    ('independent', 200, 200)
    """
    binary_only(data, "nc_ece_split", _K_CLASS)
    z, rule, label = _check_common(data, weights, "nc_ece_split")
    estimator = _check_estimator(estimator)
    fraction = float(fraction)
    if not 0 < fraction < 1:
        raise ValueError(f"`fraction` (share of items used to fit the channels) must lie in (0, 1); got {fraction}.")
    n = data.n_items
    n_fit = int(round(fraction * n))
    if n_fit < 1 or n_fit > n - 1:
        raise ValueError(f"`fraction` = {fraction} of {n} items leaves one part empty ({n_fit} fitting items).")
    perm = np.random.default_rng(seed).permutation(n)
    fit_rows, eval_rows = np.sort(perm[:n_fit]), np.sort(perm[n_fit:])
    _require_all_annotators(data, fit_rows, "the channel-fitting part")
    fit_data = _subset(data, fit_rows)
    channel, converged = _fit_or_raise(estimator, fit_data, data.n_annotators, "the channel-fitting part")
    w = _weights_for(fit_data.labels, channel, rule)
    edges = as_binning(bins).edges_for(z[fit_rows])
    count, score_sum, corr_sum = _bin_sums(data.labels[eval_rows], z[eval_rows], edges, channel, w)
    fold = np.zeros(n, dtype=np.int8)
    fold[eval_rows] = 1
    _warn_unconverged(int(not converged), 1)
    return NCECEVariantResult(
        float(np.sum(np.abs(corr_sum - score_sum)) / np.sum(count)), _table(edges, count, score_sum, corr_sum),
        "independent", edges, (channel,), w[None, :], label, n_fit, n - n_fit, fold, None, int(not converged), seed,
    )


def nc_ece_reuse(data: AnnotationSet, *, estimator=None, bins, weights="iv") -> NCECEVariantResult:
    """NC-ECE with the channels fitted on the same sample it evaluates, bins fixed in advance (paper §3).

    Equivalent to ``nc_ece(data, estimator(data).channel, bins=bins, weights=weights)``. The reuse
    bound (Appendix C.3) needs the partition fixed independently of the sample: pass an int
    (equal-width bins) or ``Binning.from_edges``. Equal-mass bins computed from the same scores are
    accepted with a :class:`~noisycal_bayes.warnings.DataWarning`.

    Parameters
    ----------
    data : AnnotationSet with scores
    estimator : callable, optional (default ``fit_em(data, groups=Binning.equal_mass(5))``)
    bins : int or Binning (required; keyword)
    weights : rule name or array of shape (n_annotators,)

    Returns
    -------
    NCECEVariantResult with ``variant = "reuse"``.

    Examples
    --------
    >>> from noisycal_bayes import simulate_annotations
    >>> sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> nc_ece_reuse(sim.data, estimator=lambda d: sim.channel, bins=5).variant
    'reuse'
    """
    binary_only(data, "nc_ece_reuse", _K_CLASS)
    z, rule, label = _check_common(data, weights, "nc_ece_reuse")
    estimator = _check_estimator(estimator)
    binning = as_binning(bins)
    if binning.kind == "equal_mass":
        warnings.warn("sample reuse assumes bins fixed independently of the sample; equal-mass bins are computed "
                      "from the evaluated scores. Pass equal-width bins or Binning.from_edges for the guarantee.",
                      DataWarning, stacklevel=2)
    channel, converged = _fit_or_raise(estimator, data, data.n_annotators, "the data")
    res = nc_ece(data, channel, bins=binning, weights=rule)
    _warn_unconverged(int(not converged), 1)
    return NCECEVariantResult(res.value, res.table, "reuse", res.edges, (channel,), np.asarray(res.weights)[None, :],
                              label, data.n_items, data.n_items, None, None, int(not converged), None)


def nc_ece_cross_fit(data: AnnotationSet, *, estimator=None, n_folds: int = 5, bins=10, weights="iv",
                     seed: int = 0, progress_bar: bool = False) -> NCECEVariantResult:
    """Cross-fitted NC-ECE on one common evaluation partition (paper §3, Appendix C.4).

    The edges are computed ONCE from all scores. Items are split at random (``seed``) into
    ``n_folds`` folds; for each fold ``k`` the channels and weights are fitted on the other folds and the
    held-out items' per-bin sufficient statistics ``(count, sum Z, sum Rtilde + Z)`` are computed on the
    common partition. The per-bin sums are added over folds and
    ``NC-ECE = sum_k |S_k(corrected) - S_k(score)| / n``.

    Parameters
    ----------
    data : AnnotationSet with scores
    estimator : callable, optional (default ``fit_em(data, groups=Binning.equal_mass(5))``)
    n_folds : int >= 2
    bins : int or Binning
    weights : rule name or array of shape (n_annotators,)
    seed : int
    progress_bar : bool, default False
        A bar over the folds, shown only when stderr is a terminal; the result is the same either way.

    Returns
    -------
    NCECEVariantResult with ``variant = "cross_fit"``, ``channels`` one per fold and ``fold_table``.

    Raises
    ------
    ValueError
        ``n_folds`` < 2 or > n_items; a training part without labels from some annotator; a fold whose
        channels are not identified.

    Examples
    --------
    >>> from noisycal_bayes import simulate_annotations
    >>> sim = simulate_annotations(500, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> res = nc_ece_cross_fit(sim.data, estimator=lambda d: sim.channel, n_folds=5)
    >>> len(res.channels), int(res.table["count"].sum())
    (5, 500)
    """
    binary_only(data, "nc_ece_cross_fit", _K_CLASS)
    z, rule, label = _check_common(data, weights, "nc_ece_cross_fit")
    estimator = _check_estimator(estimator)
    n = data.n_items
    n_folds = check_positive_int(n_folds, name="n_folds", minimum=2)
    if n_folds > n:
        raise ValueError(f"`n_folds` = {n_folds} exceeds the number of items ({n}).")
    edges = as_binning(bins).edges_for(z)  # one common partition from ALL scores
    n_bins = edges.size - 1
    perm = np.random.default_rng(seed).permutation(n)
    fold = np.empty(n, dtype=np.int32)
    fold[perm] = np.arange(n) % n_folds
    channels, ws, rows, n_unconverged = [], [], [], 0
    total = np.zeros((3, n_bins))
    for k in progress(range(n_folds), enabled=progress_bar, desc="cross-fit folds"):
        train = np.flatnonzero(fold != k)
        test = np.flatnonzero(fold == k)
        where = f"the training part of fold {k}"
        _require_all_annotators(data, train, where)
        train_data = _subset(data, train)
        channel, converged = _fit_or_raise(estimator, train_data, data.n_annotators, where)
        n_unconverged += int(not converged)
        w = _weights_for(train_data.labels, channel, rule)
        sums = _bin_sums(data.labels[test], z[test], edges, channel, w)
        total += np.stack(sums)
        channels.append(channel)
        ws.append(w)
        rows.append(pd.DataFrame({"fold": k, "bin": np.arange(n_bins), "count": sums[0], "score_sum": sums[1],
                                  "corrected_sum": sums[2]}))
    count, score_sum, corr_sum = total
    _warn_unconverged(n_unconverged, n_folds)
    return NCECEVariantResult(
        float(np.sum(np.abs(corr_sum - score_sum)) / np.sum(count)), _table(edges, count, score_sum, corr_sum),
        "cross_fit", edges, tuple(channels), np.stack(ws), label, n, n, fold,
        pd.concat(rows, ignore_index=True), n_unconverged, seed,
    )
