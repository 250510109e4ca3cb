"""The clean-label metrics of :func:`~noisycal_bayes.evaluate` (issue 37): :func:`~noisycal_bayes.labels.clean_metrics`
run beside the calibration error, its warnings kept with it (``CleanMetrics.notes``), never in the evaluation's own.

Binary data: ``clean_metrics(data, threshold=...)`` with its default fit (EM of the histogram model on equal-mass
score bins with the threshold as an edge, weighted-likelihood bootstrap refits), independent of the route that
estimated the NC-ECE (whose coarse score groups would bias the threshold metrics); its replicates run in a worker
thread while ``evaluate`` fits (:func:`start_binary_metrics`). K classes: the route's own
clean-label posterior (NUTS draws, or the EM route's bootstrap refits) on its groups (predicted class x confidence
quantile), so that the intervals carry the channel uncertainty at no extra fit; on a crowd (the pooled
Dawid-Skene, one group) ``multiclass_metrics`` re-estimates the prevalence per predicted class for each refit, and
its estimates are the full fit's, the refits' replicates moved to them (``centre``: refits with the population
refitted put the accuracy 0.036 too low).
Cost: docs/metrics.md.
"""
from __future__ import annotations

import numpy as np

from .._validation import one_line
from .engines import collect_warnings

#: Replicates of the metrics' intervals inside ``evaluate`` (the standalone function's default is 1000).
N_METRIC_REPLICATES = 300


def start_binary_metrics(data, s, threshold: float, *, thread: bool = True):
    """The binary clean-label metrics of ``evaluate``, started: the set-up of
    :func:`~noisycal_bayes.labels.metrics.prepare_clean_metrics` (its default fit, checks and warnings) now, in the
    caller's thread; its replicates in a worker thread when ``thread``, so that they run on a second core beside
    ``evaluate``'s own fit. Returns ``result()``, which waits for them and gives ``(CleanMetrics or None, note or
    None)``: a data set the replicates cannot handle (e.g. repeated labels) gets a note instead. The numbers do not
    depend on ``thread`` (the replicates' random stream is their own)."""
    from ..labels.metrics import prepare_clean_metrics

    caught: list = []
    try:
        with collect_warnings(caught):
            finish = prepare_clean_metrics(data, threshold=threshold, level=s.level, seed=s.seed,
                                           n_replicates=N_METRIC_REPLICATES, weights=s.weights)
    except ValueError as exc:
        note = f"clean-label metrics not computed: {one_line(exc)}"
        return lambda: (None, note)
    if not thread:
        return lambda: _finished(finish, caught)
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="noisycal-metrics")
    future = pool.submit(finish)
    pool.shutdown(wait=False)
    return lambda: _finished(future.result, caught)


def _finished(run, caught):
    try:
        res = run()
    except ValueError as exc:
        return None, f"clean-label metrics not computed: {one_line(exc)}"
    return _with_notes(res, caught), None


def multiclass_metrics_of(data, s, res: dict):
    """``(CleanMetrics or None, note or None)`` from a K-class route's result ``res`` (its fit, and the EM route's
    bootstrap refits under ``"refits"``)."""
    from ..labels.metrics import ClassPosterior, multiclass_metrics
    from ..models.inputs import class_arrays

    fit = res["fit"]
    conf, prev = np.asarray(fit.confusion), np.asarray(fit.prevalence)
    source, item_weights, centre = "posterior draws", None, None
    refits = res.get("refits")
    if conf.ndim == 3:  # an EM point fit: its bootstrap refits as draws
        if refits is not None and len(refits[0]) >= 2:
            conf = np.asarray(refits[0])
            prev = np.asarray(refits[1]) if np.shape(refits[1])[1:] == prev.shape else prev[None]
            # Each refit with its own resample's item multiplicities (joint draws; multiclass_metrics).
            item_weights = res.get("refit_counts")
            source = f"bootstrap refits (EM, {conf.shape[0]}, each with its items)"
            if res.get("metrics_centre") == "fit":   # a crowd: the full fit's estimates, the refits' spread
                centre = (np.asarray(fit.confusion)[None], np.asarray(fit.prevalence)[None])
                source += ", moved to the full fit's estimates"
        else:
            source = "none (point estimate)"
    x = class_arrays(data, "evaluate")
    responses = (x.item, x.annotator, x.label, x.gold)
    post = ClassPosterior(responses, data.n_items, np.asarray(fit.groups), conf, prev)
    if centre is not None:
        centre = ClassPosterior(responses, data.n_items, np.asarray(fit.groups), *centre)
    caught: list = []
    try:
        with collect_warnings(caught):
            out = multiclass_metrics(data, {"model": np.asarray(data.probs)}, post, level=s.level,
                                     n_replicates=N_METRIC_REPLICATES, weights=s.weights, n_draws=s.n_draws,
                                     seed=s.seed, fit_model=str(fit.model), fit_method=s.method,
                                     parameter_uncertainty=source, item_weights=item_weights, centre=centre)
    except ValueError as exc:
        return None, f"clean-label metrics not computed: {one_line(exc)}"
    return _with_notes(out, caught), None


def _with_notes(res, caught):
    import dataclasses

    return dataclasses.replace(res, notes=tuple(res.notes) + tuple(caught))


def check_plan(plan, func: str):
    """``plan`` of :func:`~noisycal_bayes.evaluate`: None / 0 (off) or a positive number of extra labels."""
    if plan is None or (isinstance(plan, (int, np.integer)) and not isinstance(plan, bool) and plan == 0):
        return None
    if isinstance(plan, bool) or not isinstance(plan, (int, np.integer)) or plan < 0:
        raise ValueError(f"{func}: `plan` must be None or a number of extra labels (a positive integer); got {plan!r}.")
    return int(plan)


def label_plan(data, fit, s, budget: int):
    """``(LabelPlan or None, note or None)``: :func:`~noisycal_bayes.labels.plan_labels` of ``budget`` extra labels on
    the route's own fit (the channels behind the headline), for the headline's target (binary NC-ECE, K classes the
    top-label NC-ECE) on the evaluation's bins and level; its warnings kept in ``LabelPlan.warnings``. A data set the
    planner cannot handle gets a note instead."""
    import dataclasses

    from ..labels.plan import plan_labels

    caught: list = []
    try:
        with collect_warnings(caught):
            plan = plan_labels(data, fit, budget=budget, bins=s.bins, level=s.level, n_draws=s.n_draws)
    except ValueError as exc:
        return None, f"labelling plan not computed: {one_line(exc)}"
    return dataclasses.replace(plan, warnings=tuple(plan.warnings) + tuple(caught)), None
