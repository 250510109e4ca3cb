"""The whole calibration job in one call: :func:`evaluate` -> :class:`Evaluation` (K classes:
:func:`evaluate_multiclass` -> :class:`MulticlassEvaluation`, see :mod:`noisycal_bayes.evaluation.engines`).

``evaluate(data)`` estimates the annotators' channels, the noise-corrected ECE (NC-ECE) with an interval
for a named target, and the naive metrics (ECE against votes, SMECE against vote fractions); with
``recalibration=True`` it also compares recalibration maps on held-out items. The command line
(:mod:`noisycal_bayes.cli`) is argument parsing and printing around this function: ``Evaluation.summary()``
is the text ``noisycal-bayes evaluate`` prints, ``Evaluation.to_json()`` its ``--json`` file and
``Evaluation.write_report(dir)`` its ``--out`` folder (the renderers live in :mod:`noisycal_bayes.report`).

Two routes, one propagation:

=========  ===========================================================  =================================
method     channels                                                     NC-ECE interval
=========  ===========================================================  =================================
``nuts``   ``fit_nuts`` (posterior; point channel = posterior mean)      ``posterior_nc_ece(data, fit)``
``em``     ``fit_em`` (MLE) + ``bootstrap_em`` (Bayesian bootstrap      ``posterior_nc_ece(data, boot)``
           around EM; ``n_boot`` replicates as draws)
=========  ===========================================================  =================================

The fields mean the same on both routes: ``nc_ece.value`` is the paper's NC-ECE
(:func:`noisycal_bayes.nc_ece` at the point channel), ``nc_ece.debiased`` the bias-corrected estimate of
:func:`noisycal_bayes.propagate.posterior_nc_ece`, around which its (default) interval is built; channel
intervals are equal-tailed quantiles of the draws (posterior draws or bootstrap replicates).
"""
from __future__ import annotations

import functools
import inspect

from ..data.binning import DEFAULT_GROUPS
from .engines import ENGINES, METHODS, MULTICLASS_METHODS, EngineResult, Settings, collect_warnings, evaluate_multiclass
from .engines import _settings, assemble, run_checks
from .expansion import ModelExpansion, expand_models, wants_expansion
from .recalibration import MAPS, _map_classes, compare_recalibration, describe_map
from .result import ClasswiseSummary, Evaluation, MulticlassEvaluation, NCECESummary, RecalibrationRow

__all__ = ["ENGINES", "MAPS", "METHODS", "MULTICLASS_METHODS", "ClasswiseSummary", "EngineResult", "Evaluation",
           "ModelExpansion", "MulticlassEvaluation", "NCECESummary", "RecalibrationRow", "Settings", "collect_warnings",
           "compare_recalibration", "describe_map", "evaluate", "evaluate_multiclass"]

#: Options of :func:`evaluate` passed on to :func:`evaluate_multiclass` for K-class data when the caller sets them
#: (evaluate_multiclass's own defaults otherwise).
_MULTICLASS_OPTIONS = ("method", "bins", "weights", "level", "seed", "n_boot", "n_chains", "n_warmup", "n_draws",
                       "clean_labels", "checks", "progress_bar", "expand", "metrics")


def _one_door(binary):
    """``evaluate``: K-class data goes to :func:`evaluate_multiclass` with only the options the caller set, so that
    both doors give the same answer; binary data to ``binary`` (whose signature and defaults are evaluate's)."""
    names = set(inspect.signature(binary).parameters) - {"data"}

    @functools.wraps(binary)
    def evaluate(data, **options):
        from ..data import MulticlassAnnotationSet

        if not isinstance(data, MulticlassAnnotationSet):
            return binary(data, **options)
        unknown = sorted(set(options) - names)
        if unknown:
            raise TypeError(f"evaluate() got an unexpected keyword argument {unknown[0]!r}")
        binary_only = {"groups": options.get("groups", DEFAULT_GROUPS) is not DEFAULT_GROUPS,
                       "n_starts": options.get("n_starts", 10) != 10,
                       "recalibration": bool(options.get("recalibration", False)),
                       "threshold": options.get("threshold", 0.5) != 0.5}
        given = [k for k, v in binary_only.items() if v]
        if given:
            raise ValueError(f"evaluate: {given} apply to binary data only; for K-class data call "
                             "evaluate_multiclass(data, groups=<confidence quantiles>, ...) directly.")
        return evaluate_multiclass(data, **{k: options[k] for k in _MULTICLASS_OPTIONS if k in options})

    return evaluate


@_one_door
def evaluate(data, *, method: str = "nuts", bins: int = 10, groups=DEFAULT_GROUPS, weights: str = "iv",
             level: float = 0.9, seed: int = 0, n_boot: int = 200, n_starts: int = 10, n_chains: int = 4,
             n_warmup: int = 1000, n_draws: int = 1000, clean_labels=None, recalibration: bool = False,
             progress_bar: bool = False, checks: bool = True, expand="auto", threshold: float = 0.5,
             metrics: bool = True, plan: int | None = None):
    """Channels with intervals, NC-ECE with an interval for a named target, and the naive metrics.

    K classes: when ``data`` is a :class:`~noisycal_bayes.data.MulticlassAnnotationSet`, this returns
    ``evaluate_multiclass(data, ...)`` (a :class:`MulticlassEvaluation`: top-label NC-ECE as the headline,
    class-wise NC-ECE, confusion matrices) with those of ``method``, ``bins``, ``weights``, ``level``, ``seed``,
    ``n_boot``, ``n_chains``, ``n_warmup``, ``n_draws``, ``clean_labels``, ``checks`` and ``progress_bar`` that
    the caller set, and :func:`evaluate_multiclass`'s own defaults for the others (EM, 15 bins, 2 x 500 draws),
    so ``evaluate(data)`` and ``evaluate_multiclass(data)`` give the same answer (docs/multiclass.md). The
    defaults below are those of binary data. ``groups``, ``n_starts`` and ``recalibration`` are binary options
    (a non-default value is an error: ``groups`` counts confidence quantiles for K classes, call
    ``evaluate_multiclass`` for those).

    Parameters
    ----------
    data : AnnotationSet with scores, or MulticlassAnnotationSet with probs
        Labels of shape (n_items, n_annotators) and the classifier's scores of shape (n_items,); or K-class
        labels with class probabilities (n_items, K).
    method : {"nuts", "em"}, default "nuts"
        ``"nuts"``: ``fit_nuts`` and the posterior of the calibration error. ``"em"``: ``fit_em`` and a
        Bayesian bootstrap around it (``bootstrap_em``, ``n_boot`` replicates), propagated the same way.
    bins : int, default 10
        Equal-width evaluation bins.
    groups : Binning or int, default ``Binning.equal_mass(5)``
        Score groups identifying the channels (see :func:`noisycal_bayes.fit_em`); an int ``k`` means
        ``Binning.equal_width(k)``, as for ``bins``.
    weights : {"iv", "equal", "gap", "squared_gap"}, default "iv"
        Annotator weights of the corrected labels.
    level : float, default 0.9
        Level of every interval.
    seed : int, default 0
        Seeds EM starts, bootstrap weights, chains and the held-out split.
    n_boot : int, default 200
        Bootstrap replicates (EM route); 0 gives no interval (said in ``warnings``).
    n_starts : int, default 10
        EM starts.
    n_chains, n_warmup, n_draws : int, default 4, 1000, 1000
        NUTS settings.
    clean_labels : array of shape (n_items,), optional
        True labels (simulations): adds the oracle ECE to the naive metrics and the recalibration table.
    recalibration : bool, default False
        Also compare temperature, Platt and histogram maps fitted on half the items (to corrected labels,
        majority vote and vote fractions) and judged on the other half (:func:`compare_recalibration`);
        stored in ``Evaluation.recalibration``. After a model expansion that moved the headline, the corrected
        labels (of the fitted maps and of the held-out judge) follow the same stacked channel models, and the
        table says so.
    progress_bar : bool, default False
    checks : bool, default True
        Run the predictive checks of the channel model (:func:`noisycal_bayes.diagnostics.model_checks`:
        199 parametric-bootstrap replicates refitted by EM, or 199 posterior draws; about a second) and
        report them in ``Evaluation.checks``, the text output and the JSON.
    expand : {"auto", True, False}, default "auto"
        Model expansion (:mod:`noisycal_bayes.evaluation.expansion`): also fit the score-dependent channel model
        (NUTS on the NUTS route, MAP + Laplace draws on the EM route), compare it with the shared channels by
        PSIS-LOO and report the NC-ECE of the stacked models as the headline; ``Evaluation.expansion`` holds the
        comparison and ``nc_ece_shared`` the shared model's figure. With the weight on the shared model the
        headline is unchanged. ``"auto"``: expand when a predictive check warned
        (:func:`~noisycal_bayes.evaluation.expansion.wants_expansion`). Binary data only (ignored for K
        classes). Cost on CIFAR-10N: docs/performance.md.
    threshold : float in [0, 1], default 0.5
        Operating threshold of the binary clean-label metrics (predict 1 when ``score >= threshold``).
    metrics : bool, default True
        Also estimate the clean-label metrics (sensitivity, specificity, PPV, NPV, balanced accuracy, F1, ROC AUC,
        Brier, log loss, accuracy) with intervals, the corrected-label and majority-vote values beside them
        (:func:`noisycal_bayes.labels.clean_metrics`, :mod:`noisycal_bayes.evaluation.metrics`); stored in
        ``Evaluation.metrics``.
    plan : int, optional
        Also plan where ``plan`` extra labels narrow the NC-ECE interval most
        (:func:`noisycal_bayes.labels.plan_labels` on the route's own fit, at these ``bins`` and ``level``): the
        ranked (item, annotator) pairs and the expected interval narrowing, in ``Evaluation.plan``, the summary,
        the report (its top rows; ``plan.csv`` beside it) and the JSON (``label_plan``). None or 0 (default): no
        plan, at no cost. docs/planning.md.

    Returns
    -------
    Evaluation (MulticlassEvaluation for K-class data)
        ``.summary()``, ``.to_json()``, ``.write_report(dir)``; ``.nc_ece.value`` is the paper's NC-ECE at
        the point channel, ``.nc_ece.debiased`` the bias-corrected estimate the interval is built around.

    Raises
    ------
    ValueError
        Unknown method or weights; bad counts or level; data without scores; ``clean_labels`` not 0/1 of
        shape (n_items,); channels that could not be
        estimated (the reason is in the message); recalibration with an annotator missing from a half.

    Notes
    -----
    Warnings raised while fitting are recorded in ``Evaluation.warnings`` (and shown by ``summary()``)
    rather than emitted. Near a perfectly calibrated model (``nc_ece.interval_to_read ==
    "upper_one_sided"``) the interval is ``[0, upper_bound]`` and a note says why: two-sided intervals
    undercover there (docs/coverage.md).

    Examples
    --------
    >>> from noisycal_bayes import simulate_annotations
    >>> sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.85], seed=1)
    >>> from noisycal_bayes.data import Binning
    >>> ev = evaluate(sim.data, method="em", n_boot=0, bins=5, groups=Binning.equal_mass(3))
    >>> ev.nc_ece.lower is None, ev.warnings[-1]
    (True, 'no interval: --n-boot 0.')
    """
    from .._validation import check_binary_labels, check_probability
    from ..data import Binning

    from ..reference.baselines import naive_calibration
    from ..propagate import usable_annotators_of
    from ..reference.calibration import nc_ece

    s = _settings(data, "evaluate", method=method, bins=bins, groups=groups, weights=weights, level=level, seed=seed,
                  n_boot=n_boot, n_starts=n_starts, n_chains=n_chains, n_warmup=n_warmup, n_draws=n_draws,
                  progress_bar=bool(progress_bar), checks=bool(checks), expand=expand)
    data.require_scores()
    threshold = check_probability(threshold, name="threshold")
    from .metrics import check_plan

    plan = check_plan(plan, "evaluate")
    if clean_labels is not None:  # checked before any fitting (the same check naive_calibration makes)
        clean_labels = check_binary_labels(clean_labels, name="clean_labels")
        if clean_labels.shape != (data.n_items,):
            raise ValueError(f"`clean_labels` must have shape ({data.n_items},), one per item; got "
                             f"{clean_labels.shape}.")
    clean = (None, None)
    if metrics:
        # The metrics' set-up now; their replicates in a worker thread beside the fit below (a second core).
        from .metrics import start_binary_metrics

        metrics_result = start_binary_metrics(data, s, threshold)
    caught: list = []
    with collect_warnings(caught):
        res = ENGINES[s.method](data, s)
        est = nc_ece(data, res.fit.channel, bins=Binning.equal_width(s.bins), weights=s.weights,
                     usable=usable_annotators_of(res.fit))
        naive = naive_calibration(data, bins=s.bins, clean_labels=clean_labels)
        checks = run_checks(data, res.fit, s) if s.checks else ((), None)
        expansion = expand_models(data, s, res) if wants_expansion(s.expand, checks[0]) else None
        # After the expansion: the corrected labels of the held-out comparison follow the headline's channel model.
        recal = None if not recalibration else tuple(compare_recalibration(data, s, clean_labels=clean_labels,
                                                                           expansion=expansion))
    if metrics:
        clean = metrics_result()
    planned = (None, None)
    if plan:
        from .metrics import label_plan

        planned = label_plan(data, res.fit, s, plan)
    return assemble(data, s, res, est, naive, recal, caught, clean_labels, checks, expansion, clean, planned)
