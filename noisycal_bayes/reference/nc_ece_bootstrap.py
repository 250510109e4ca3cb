"""Bootstrap interval for NC-ECE with the channels (or confusion matrices) re-estimated in every replicate (paper
§3): :func:`bootstrap_nc_ece` and, for K classes, :func:`bootstrap_multiclass_nc_ece`. Details: docs/foundations.md,
*noisycal_bayes.reference.nc_ece_bootstrap*.
"""
from __future__ import annotations

import inspect
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._progress import progress
from .._validation import (_preview, binary_only, check_choice, check_confusion, check_level, check_positive_int,
                           check_weights, one_line)
from ..data import AnnotationSet, as_binning
from ..warnings import IdentifiabilityWarning
from ._estimated import (_EstimationFailed, _bin_sums, _check_common, _check_estimator, _estimate_channel,
                         _fit_or_raise, _warn_unconverged, _weights_for)
from .calibration import (MAX_CONDITION, MCResponses, MulticlassNCECE, bin_edges,
                          check_probs, check_responses, nc_ece, point_nc_ece)


@dataclass(frozen=True)
class _BootstrapInterval:
    """What every item bootstrap of an NC-ECE reports first: the full-sample value, the interval at ``level``
    (``lower``, ``upper``), the one-sided upper bound, the replicates' bias and the replicates themselves."""

    value: float
    interval: tuple
    upper_bound: float
    bias: float
    level: float
    replicates: np.ndarray = field(repr=False)

    @property
    def lower(self) -> float:
        return self.interval[0]

    @property
    def upper(self) -> float:
        return self.interval[1]

    def __float__(self) -> float:
        return self.value


@dataclass(frozen=True)
class BootstrapNCECEResult(_BootstrapInterval):
    """Percentile bootstrap interval for NC-ECE with channels re-estimated in every replicate.

    Attributes
    ----------
    value : float
        Point estimate on the full sample (sample reuse, bins fixed from the full sample).
    interval : (float, float)
        Two-sided interval at ``level`` from the successful replicates (``method``).
    upper_bound : float
        One-sided ``level`` upper bound by the same method; report this when the NC-ECE is near 0, where
        a two-sided interval cannot cover a boundary value.
    bias : float
        ``mean(replicates) - value``. NC-ECE's upward (Jensen) bias enters a replicate once more, shifting
        percentile intervals upwards (even past ``value``); the ``"basic"`` method corrects it to first order.
    level : float
    replicates : ndarray of shape (n_boot - n_failed,)
        NC-ECE of each successful replicate.
    n_boot : int
        Replicates attempted.
    n_failed : int
        Replicates whose channels could not be estimated (not identified, or an annotator left without
        labels); they are excluded from the interval.
    failure_reasons : dict
        ``reason -> count`` over the failed replicates.
    n_unconverged : int
        Replicates whose estimator reported ``converged = False`` (kept).
    full_sample : NCECEResult
        The full-sample NC-ECE (per-bin table, weights, channel); ``value`` is its ``.value``.
    edges : ndarray of shape (n_bins + 1,)
        The partition, fixed from the full sample and used in every replicate.
    weights_rule : str
    seed : int
    method : str
    target : str
    """

    n_boot: int
    n_failed: int
    failure_reasons: dict
    n_unconverged: int
    full_sample: object = field(repr=False)
    edges: np.ndarray = field(repr=False)
    weights_rule: str
    seed: int
    method: str = "percentile"
    target: str = "population binned ECE on the fixed partition (sampling and channel-estimation uncertainty)"

    @property
    def table(self) -> pd.DataFrame:
        """Per-bin table of the full-sample estimate."""
        return self.full_sample.table


def bootstrap_nc_ece(data: AnnotationSet, *, estimator=None, n_boot: int = 200, level: float = 0.9, bins=10,
                     weights="iv", method: str = "percentile", seed: int = 0,
                     progress_bar: bool = False) -> BootstrapNCECEResult:
    """Nonparametric bootstrap over items for NC-ECE, re-estimating the channels in each replicate.

    Each replicate draws ``n_items`` items with replacement (``numpy.random.default_rng(seed)``), calls
    ``estimator`` on the replicate, recomputes the weights (IV: from the replicate) and the NC-ECE on the
    partition fixed from the full sample. With ``method="percentile"`` the interval is
    ``[q_{(1-level)/2}, q_{(1+level)/2}]`` of the successful replicates and the upper bound ``q_level``;
    with ``method="basic"`` it is ``[2v - q_{(1+level)/2}, 2v - q_{(1-level)/2}]`` and ``2v - q_{1-level}``
    (``v`` the point estimate), clipped below at 0. Replicates where the channels
    are not identified (or an annotator has no label in the replicate) are counted in ``n_failed`` with
    their reasons and reported with an :class:`~noisycal_bayes.warnings.IdentifiabilityWarning`;
    warnings raised inside replicates are collected and re-issued once per category with a count.

    Parameters
    ----------
    data : AnnotationSet with scores
    estimator : callable, optional (default ``fit_em(data, groups=Binning.equal_mass(5))``)
    n_boot : int >= 1
    level : float in (0, 1)
    bins : int or Binning
    weights : rule name or array of shape (n_annotators,)
    method : {"percentile", "basic"}
    seed : int
    progress_bar : bool, default False
        A bar over the replicates, shown only when stderr is a terminal; the result is the same either way.

    Returns
    -------
    BootstrapNCECEResult

    Raises
    ------
    ValueError
        Bad ``n_boot`` / ``level``; channels not identified on the full sample; every replicate failed.

    Examples
    --------
    >>> from noisycal_bayes import simulate_annotations
    >>> sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> res = bootstrap_nc_ece(sim.data, estimator=lambda d: sim.channel, n_boot=20, seed=1)
    >>> res.n_failed, res.interval[0] <= res.interval[1]
    (0, True)
    """
    binary_only(data, "bootstrap_nc_ece", "bootstrap_top_label_nc_ece or bootstrap_classwise_nc_ece")
    z, rule, label = _check_common(data, weights, "bootstrap_nc_ece")
    estimator = _check_estimator(estimator)
    n_boot = check_positive_int(n_boot, name="n_boot")
    level = check_level(level)
    check_choice(method, ("percentile", "basic"), name="method")
    edges = as_binning(bins).edges_for(z)
    channel, converged = _fit_or_raise(estimator, data, data.n_annotators, "the full sample")
    full_sample = nc_ece(data, channel, weights=rule, edges=edges)
    values, reasons, caught, n_unconverged = _replicates(data, z, edges, estimator, rule, n_boot, seed,
                                                         progress_bar=progress_bar)
    _reissue(caught, n_boot)
    n_failed = _failures(len(values), n_boot, f" to estimate the channels: {dict(reasons)}", str(dict(reasons)),
                         "channels")
    _warn_unconverged(int(not converged) + n_unconverged, n_boot + 1)
    reps = np.asarray(values)
    v = full_sample.value
    lo, hi, upper = _interval(reps, v, level, method)
    return BootstrapNCECEResult(
        v, (float(lo), float(hi)), float(upper), float(reps.mean() - v), level, reps, n_boot, n_failed,
        dict(reasons), n_unconverged, full_sample, edges, label, seed, method,
    )


def _replicates(data: AnnotationSet, z, edges, estimator, rule, n_boot: int, seed: int, *, progress_bar=False):
    """NC-ECE of every bootstrap replicate whose channels could be estimated.

    Returns ``(values, failure reasons (Counter), {warning category: (count, first message)}, n_unconverged)``;
    warnings raised inside replicates are collected, not issued.
    """
    rng = np.random.default_rng(seed)
    n, j = data.n_items, data.n_annotators
    rep_ids = np.arange(n).astype(object)
    values, reasons, caught = [], Counter(), {}
    n_unconverged = 0
    for _ in progress(range(n_boot), enabled=progress_bar, desc="bootstrap NC-ECE"):
        rows = rng.integers(0, n, size=n)
        labels = data.labels[rows]
        empty = ~(labels >= 0).any(axis=0)
        if empty.any():
            reasons[f"annotators {_preview(data.annotator_ids[empty])} have no label in the replicate"] += 1
            continue
        rep = AnnotationSet(labels, z[rows], rep_ids, data.annotator_ids)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            try:
                ch, ok = _estimate_channel(estimator, rep, j, "a bootstrap replicate", catch=True)
            except _EstimationFailed as exc:
                reasons[str(exc)] += 1
                ch = None
        _collect(record, caught)
        if ch is None:
            continue
        n_unconverged += int(not ok)
        w = _weights_for(labels, ch, rule)
        count, score_sum, corr_sum = _bin_sums(labels, z[rows], edges, ch, w)
        values.append(float(np.sum(np.abs(corr_sum - score_sum)) / np.sum(count)))
    return values, reasons, caught, n_unconverged


def _collect(record, caught: dict) -> None:
    """Add the warnings ``record``ed in one replicate to ``caught``: ``{category: (count, first message)}``."""
    for wrn in record:
        cnt, first = caught.get(wrn.category, (0, str(wrn.message)))
        caught[wrn.category] = (cnt + 1, first)


def _reissue(caught: dict, n_boot: int) -> None:
    """Issue the replicates' warnings once per category, with their count (warned at the public caller)."""
    for category, (cnt, first) in caught.items():
        warnings.warn(f"{cnt} warning(s) of this kind inside the {n_boot} bootstrap replicates; first: {first}",
                      category, stacklevel=3)


def _failures(n_ok: int, n_boot: int, why: str, reasons: str, what: str) -> int:
    """``n_failed``: raises when every replicate failed (``why`` follows "failed"), warns (at the public caller)
    when some did; ``what`` the estimated quantities a design must identify."""
    if not n_ok:
        raise ValueError(f"all {n_boot} bootstrap replicates failed{why}. Use more items, a design that identifies "
                         f"the {what}, or another estimator.")
    if n_ok < n_boot:
        warnings.warn(f"{n_boot - n_ok} of {n_boot} bootstrap replicates failed and were excluded from the interval "
                      f"(reasons: {reasons}); the interval may be too narrow.", IdentifiabilityWarning, stacklevel=3)
    return n_boot - n_ok


def _interval(reps, v, level: float, method: str):
    """``(lower, upper, one-sided upper)`` along axis 0 of ``reps``: percentile, or basic (reflected around ``v``,
    clipped at 0); ``reps`` (n_reps,) with a scalar ``v``, or (n_reps, n_classes) with ``v`` per class."""
    if method == "percentile":
        lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2], axis=0)
        return lo, hi, np.quantile(reps, level, axis=0)
    q_lo, q_hi, q_up = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2, 1 - level], axis=0)
    return np.maximum(2 * v - q_hi, 0.0), np.maximum(2 * v - q_lo, 0.0), np.maximum(2 * v - q_up, 0.0)


@dataclass(frozen=True)
class BootstrapMulticlassNCECE(_BootstrapInterval):
    """Percentile (or basic) item-bootstrap interval for a K-class NC-ECE, confusion refitted per replicate.

    Attributes
    ----------
    value : float
        The full-sample NC-ECE (top-label, or the class-wise mean) at the estimator's full-sample fit.
    interval : (float, float)
    upper_bound : float
        One-sided ``level`` upper bound (report it when the NC-ECE is near 0).
    bias : float
        ``mean(replicates) - value``.
    level : float
    replicates : ndarray of shape (n_boot - n_failed,)
    per_class : DataFrame or None
        Class-wise only: ``class, value, lower, upper, upper_bound`` per class (same replicates).
    per_class_replicates : ndarray of shape (n_boot - n_failed, n_classes) or None
    n_boot, n_failed : int
    failure_reasons : dict
    full_sample : MulticlassNCECE
    kind : {"top_label", "classwise"}
    weights_rule : str
    seed : int
    method : {"percentile", "basic"}
    target : str
    """

    per_class: pd.DataFrame | None = field(repr=False)
    per_class_replicates: np.ndarray | None = field(repr=False)
    n_boot: int
    n_failed: int
    failure_reasons: dict
    full_sample: MulticlassNCECE = field(repr=False)
    kind: str
    weights_rule: str
    seed: int
    method: str
    target: str = ("population binned ECE on the fixed partition (sampling and confusion-estimation uncertainty)")


@dataclass(frozen=True)
class MulticlassBootstrap:
    """Both bootstrap results of one set of replicates (:func:`bootstrap_multiclass_nc_ece`)."""

    top_label: BootstrapMulticlassNCECE
    classwise: BootstrapMulticlassNCECE


def _check_mc_estimator(estimator):
    """``(estimator, takes_init, takes_gold)``: which optional keywords the callable accepts."""
    if estimator is None:
        raise ValueError("bootstrap_multiclass_nc_ece: pass `estimator`, a callable (responses, n_items, probs) -> "
                         "(confusion (J, K, K), prevalence (K,) or None) that refits the confusion matrices on a "
                         "replicate, e.g. inference.multiclass_em_estimator(); there is no default in this layer.")
    if not callable(estimator):
        raise ValueError(f"`estimator` must be callable (responses, n_items, probs) -> (confusion, prevalence); got "
                         f"{type(estimator).__name__}.")
    try:
        params = inspect.signature(estimator).parameters
    except (TypeError, ValueError):
        params = {}
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return estimator, "init" in params or var_kw, "gold" in params or var_kw


def _call_estimator(estimator, takes, resp_tuple, n, probs, init, gold, j, k):
    """``(confusion, prevalence for the weights ((K,) or None), prevalence as returned (for the warm start))``."""
    kw = {}
    if takes[0] and init is not None:
        kw["init"] = init
    if takes[1] and gold is not None:
        kw["gold"] = gold
    out = estimator(resp_tuple, n, probs, **kw)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise ValueError(f"`estimator` must return (confusion, prevalence); got {type(out).__name__}.")
    conf = check_confusion(out[0], name="estimator(...)[0]", n_annotators=j, n_classes=k)
    raw = None if out[1] is None else np.asarray(out[1], dtype=np.float64)
    # grouped prevalences (G, K): the overall prevalence is estimated from the data instead (kept for init)
    prev = raw if raw is not None and raw.shape == (k,) else None
    return conf, prev, raw


def _check_gold(gold, n: int, k: int, func: str):
    """Gold labels (n,) int, -1 = unknown; None when there are none."""
    if gold is None:
        return None
    g = np.asarray(gold)
    if g.shape != (n,) or not (np.issubdtype(g.dtype, np.integer) or (np.issubdtype(g.dtype, np.floating)
                                                                      and np.all(g == np.round(g)))):
        raise ValueError(f"{func}: `gold` must be an int array of shape ({n},) (-1 = unknown); got {g.dtype} "
                         f"{g.shape}.")
    g = g.astype(np.int64)
    bad = (g < -1) | (g >= k)
    if bad.any():
        raise ValueError(f"{func}: `gold` must be -1 (unknown) or a class in 0..{k - 1}; got {_preview(g[bad])} at "
                         f"items {_preview(np.flatnonzero(bad))}.")
    return g if (g >= 0).any() else None


def _resample(resp: MCResponses, rows: np.ndarray):
    """Responses of the resampled items ``rows`` (new item ``r`` = old item ``rows[r]``), in item order."""
    counts = np.bincount(resp.item, minlength=resp.n_items)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    deg = counts[rows]
    total = int(deg.sum())
    new_item = np.repeat(np.arange(rows.size), deg)
    # position of each new response: its source item's first response plus its rank within the item
    first = np.repeat(start[rows] - np.concatenate([[0], np.cumsum(deg)[:-1]]), deg)
    pos = first + np.arange(total)
    return new_item, resp.annotator[pos], resp.label[pos]


def _reasons_text(reasons: Counter, *, shown: int = 3, width: int = 200) -> str:
    """The failure reasons of a bootstrap in one line: the ``shown`` most frequent with their counts (each cut to
    ``width`` characters), then how many other reasons there were."""
    top = reasons.most_common(shown)
    parts = [f"{cnt} x {text if len(text) <= width else text[:width - 3] + '...'}" for text, cnt in top]
    rest = len(reasons) - len(top)
    if rest:
        parts.append(f"{rest} other reason(s) in {sum(reasons.values()) - sum(c for _, c in top)} replicate(s)")
    return "; ".join(parts)


def bootstrap_multiclass_nc_ece(probs, responses, *, estimator=None, n_boot: int = 200, level: float = 0.9,
                                bins=15, weights="iv", method: str = "percentile", seed: int = 0,
                                max_condition: float = MAX_CONDITION, gold=None,
                                progress_bar: bool = False) -> MulticlassBootstrap:
    """Item bootstrap of the top-label and class-wise NC-ECE, refitting the confusion matrices per replicate.

    Each replicate draws ``n_items`` items with replacement (``numpy.random.default_rng(seed)``) with their
    responses and gold labels, calls ``estimator`` on it (with ``init=(confusion, prevalence)`` of the full-sample
    fit and ``gold=`` when it takes those keywords), and recomputes the usable annotators, the weights and both
    NC-ECEs on the partition fixed from the full sample; intervals as
    :func:`~noisycal_bayes.reference.bootstrap_nc_ece`. A replicate missing an annotator's every item is kept (none
    of its items needs that matrix); the estimator should keep absent annotators at ``init``
    (:func:`~noisycal_bayes.inference.multiclass_em_estimator` does).

    Parameters
    ----------
    probs : array of shape (n_items, n_classes)
    responses : as in :func:`top_label_nc_ece`
    estimator : callable
        ``estimator(responses, n_items, probs[, init=...][, gold=...]) -> (confusion (J, K, K), prevalence (K,)
        or None)``; ``responses`` is an ``(item, annotator, label)`` tuple. Required (this layer does not import
        the EM): :func:`~noisycal_bayes.inference.multiclass_em_estimator` (warm-started EM refits that use the
        gold labels), or any wrapper of a fit. A ``ValueError`` or ``LinAlgError`` it
        raises marks the replicate failed. Grouped prevalences (G, K) are accepted and ignored (the overall
        prevalence is then estimated from the replicate).
    n_boot : int, default 200
    level : float, default 0.9
    bins : int or Binning, default 15
    weights : {"iv", "equal"} or array
    method : {"percentile", "basic"}
    seed : int, default 0
    max_condition : float, default 100
    gold : int array of shape (n_items,), optional
        Observed clean labels (-1 unknown), resampled with their items and passed to the estimator as ``gold=``
        (an estimator without a ``gold`` keyword is refused when there are gold labels). Default: the ``gold`` of
        a ``MulticlassAnnotationSet`` passed as ``responses``, else none. The NC-ECE itself uses the annotators'
        labels only, as :func:`top_label_nc_ece` does.
    progress_bar : bool, default False

    Returns
    -------
    MulticlassBootstrap
        ``.top_label`` and ``.classwise`` (:class:`BootstrapMulticlassNCECE`, the latter with ``per_class``).

    Raises
    ------
    ValueError
        No ``estimator``; bad inputs (``gold`` of the wrong shape or outside -1..K-1; gold labels with an estimator
        that takes no ``gold``); the estimator fails on the full sample; every replicate failed.

    Warns
    -----
    IdentifiabilityWarning
        Failed replicates (excluded), or near-singular confusion on the full sample.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> C = np.array([[[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]] * 3)
    >>> y = rng.integers(0, 3, 300)
    >>> lab = np.array([[rng.choice(3, p=C[j, yi]) for j in range(3)] for yi in y])
    >>> resp = (np.repeat(np.arange(300), 3), np.tile(np.arange(3), 300), lab.reshape(-1))
    >>> p = np.full((300, 3), 0.1); p[np.arange(300), y] = 0.8
    >>> res = bootstrap_multiclass_nc_ece(p, resp, estimator=lambda r, n, q: (C, None), n_boot=20)
    >>> res.top_label.interval[0] <= res.top_label.interval[1], res.classwise.per_class.shape[0]
    (True, 3)
    """
    func = "bootstrap_multiclass_nc_ece"
    estimator, takes_init, takes_gold = _check_mc_estimator(estimator)
    p = check_probs(probs)
    n, k = p.shape
    if gold is None and hasattr(responses, "responses") and not isinstance(responses, tuple):
        gold = getattr(responses, "gold", None)
    resp = check_responses(responses, n, k, func=func)
    gold = _check_gold(gold, n, k, func)
    if gold is not None and not takes_gold:
        raise ValueError(f"{func}: the data have {int((gold >= 0).sum())} gold labels but `estimator` takes no `gold` "
                         "keyword, so its refits would ignore them; give it one (e.g. "
                         "inference.multiclass_em_estimator()) or pass gold=np.full(n_items, -1) to leave them out.")
    takes = (takes_init, takes_gold)
    n_boot = check_positive_int(n_boot, name="n_boot")
    level = check_level(level)
    check_choice(method, ("percentile", "basic"), name="method")
    rule, label = check_weights(weights, resp.n_annotators, allow_zero=False, n_classes=k)
    j = resp.n_annotators
    conf, prev, raw_prev = _call_estimator(estimator, takes, resp[:3], n, p, None, gold, j, k)
    edges = {kind: bin_edges(p, bins, kind) for kind in ("top_label", "classwise")}
    full = {kind: point_nc_ece(p, resp[:3], conf, prevalence=prev, bins=bins, weights=weights, kind=kind, func=func,
                               edges=edges[kind], max_condition=max_condition)
            for kind in ("top_label", "classwise")}
    rng = np.random.default_rng(seed)
    tops, cws, reasons = [], [], Counter()
    caught: dict = {}
    for _ in progress(range(n_boot), enabled=progress_bar, desc="bootstrap multiclass NC-ECE"):
        rows = rng.integers(0, n, size=n)
        rep = _resample(resp, rows)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            try:
                c_r, prev_r, _ = _call_estimator(estimator, takes, rep, n, p[rows], (conf, raw_prev),
                                                 None if gold is None else gold[rows], j, k)
                # all j annotators, also when the replicate misses the last ones
                vals = [point_nc_ece(p[rows], MCResponses(*rep, n, j, k), c_r, prevalence=prev_r, bins=bins,
                                     weights=weights, kind=kind, func=func, edges=edges[kind],
                                     max_condition=max_condition)
                        for kind in ("top_label", "classwise")]
            except (ValueError, np.linalg.LinAlgError) as exc:
                reasons[f"{type(exc).__name__}: {one_line(exc)}"] += 1
                vals = None
        _collect(record, caught)
        if vals is not None:
            tops.append(vals[0].value)
            cws.append(vals[1].per_class)
    _reissue(caught, n_boot)
    n_failed = _failures(len(tops), n_boot, f" ({_reasons_text(reasons)})", _reasons_text(reasons),
                         "confusion matrices")
    top_reps = np.asarray(tops)
    cw_reps = np.asarray(cws)
    out = {}
    for kind, reps, pc in (("top_label", top_reps, None), ("classwise", cw_reps.mean(axis=1), cw_reps)):
        v = full[kind].value
        lo, hi, up = _interval(reps, v, level, method)
        table = None
        if pc is not None:
            vk = full[kind].per_class
            plo, phi, pup = _interval(pc, vk, level, method)
            table = pd.DataFrame({"class": np.arange(k), "value": vk, "lower": plo, "upper": phi, "upper_bound": pup})
        out[kind] = BootstrapMulticlassNCECE(
            float(v), (float(lo), float(hi)), float(up), float(reps.mean() - v), level, reps, table, pc, n_boot,
            n_failed, dict(reasons), full[kind], kind, label, seed, method)
    return MulticlassBootstrap(out["top_label"], out["classwise"])


def bootstrap_top_label_nc_ece(probs, responses, **kwargs) -> BootstrapMulticlassNCECE:
    """The ``top_label`` part of :func:`bootstrap_multiclass_nc_ece` (same keyword arguments).

    Call :func:`bootstrap_multiclass_nc_ece` to get both from one set of refits."""
    return bootstrap_multiclass_nc_ece(probs, responses, **kwargs).top_label


def bootstrap_classwise_nc_ece(probs, responses, **kwargs) -> BootstrapMulticlassNCECE:
    """The ``classwise`` part of :func:`bootstrap_multiclass_nc_ece` (same keyword arguments), with ``per_class``."""
    return bootstrap_multiclass_nc_ece(probs, responses, **kwargs).classwise
