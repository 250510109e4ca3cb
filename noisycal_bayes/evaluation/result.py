"""Result types of :func:`noisycal_bayes.evaluate`: :class:`Evaluation`, :class:`NCECESummary`,
:class:`RecalibrationRow`, and for K classes its subclass :class:`MulticlassEvaluation` with
:class:`ClasswiseSummary`. The renderers (text, JSON, HTML, report folder) are in :mod:`noisycal_bayes.report`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

__all__ = ["ClasswiseSummary", "Evaluation", "MulticlassEvaluation", "NCECESummary", "RecalibrationRow"]


@dataclass(frozen=True)
class NCECESummary:
    """The calibration error of one evaluation: the numbers, the interval and what it is for.

    Attributes
    ----------
    value : float
        The paper's NC-ECE (plug-in estimate, paper §3): ``noisycal_bayes.nc_ece(data, channel).value`` at
        the point channel (EM estimate, or posterior-mean channel for NUTS). Same meaning on every route.
    debiased : float or None
        Bias-corrected estimate of ``posterior_nc_ece`` (per-bin moment matching); None without draws.
    lower, upper : float or None
        The interval to read at ``level``: two-sided, or ``[0, upper_bound]`` when the one-sided reading
        applies (``interval_to_read == "upper_one_sided"``). None when there is no interval.
    upper_bound : float or None
        One-sided ``level`` upper bound.
    level : float
    target : str
        The quantity the interval is for (DESIGN §2).
    interval_method : str
        How the interval was made (``"none"`` without one).
    interval_to_read : {"two_sided", "upper_one_sided"} or None
    calibration_p_value : float or None
        How often a perfectly calibrated model with this much noise would give an error this large.
    centre : str or None
        The number the interval is built around: ``"debiased"`` or ``"posterior median"``.
    """

    value: float
    debiased: float | None
    lower: float | None
    upper: float | None
    upper_bound: float | None
    level: float
    target: str
    interval_method: str = "none"
    interval_to_read: str | None = None
    calibration_p_value: float | None = None
    centre: str | None = None


@dataclass(frozen=True)
class RecalibrationRow:
    """One recalibration map evaluated on held-out items.

    ``fitted_to`` says which labels fitted it (``"noisy labels, corrected"``, ``"majority vote"``,
    ``"vote fraction"``, or ``"-"`` for the raw scores); ``params`` the fitted parameters as text;
    ``nc_ece`` the noise-corrected ECE on the held-out items; ``oracle_ece`` the ECE against the clean
    labels (simulations only, else None).
    """

    map_name: str
    fitted_to: str
    params: str
    nc_ece: float
    oracle_ece: float | None = None


@dataclass(frozen=True)
class Evaluation:
    """What one calibration evaluation found, and how it was made (returned by :func:`evaluate`).

    Attributes
    ----------
    method : {"nuts", "em"}
    method_detail : str
        One line saying how the channels and the intervals were obtained.
    n_items, n_annotators : int
    channel : Channel
        Point estimate: EM estimate, or posterior mean (NUTS).
    channel_intervals : dict or None
        ``{"fpr": (lower, upper), "tpr": ..., "gap": ...}``, arrays of shape (n_annotators,): equal-tailed
        ``level`` quantiles of the draws (None without draws).
    prevalence : ndarray of shape (n_groups,)
        ``P(Y = 1)`` per score group (EM estimate or posterior mean).
    nc_ece : NCECESummary
        ``.value`` (paper's NC-ECE), ``.debiased``, ``.lower``, ``.upper``, ``.upper_bound``, ``.target``...
    table : DataFrame
        Per evaluation bin: ``bin, lower, upper, count, mean_score, corrected_frequency, residual,
        band_lower, band_upper`` (bands NaN without draws).
    edges : ndarray of shape (n_bins + 1,)
    naive : NaiveCalibrationResult
        ECE against majority vote and each annotator, SMECE against vote fractions (and the oracle ECE
        ``clean_ece`` when clean labels were given).
    diagnostics : dict
        ``rhat_max, ess_min, divergences`` (None for EM).
    warnings : tuple of str
        Warnings raised while fitting and notes (e.g. why there is no interval), one line each.
    draws : ndarray of shape (n_draws,) or None
        The NC-ECE draws the interval is read from (for the histogram figure).
    draws_label : str
    level : float
    bins, groups, weights, seed : the settings used (``groups``: the number the channel model used)
    recalibration : tuple of RecalibrationRow or None
        Held-out comparison of recalibration maps (``evaluate(..., recalibration=True)``).
    data, clean_labels : the evaluated AnnotationSet and optional clean labels (kept for the report).
    checks : tuple of dict
        Assumption checks of the channel model (``evaluate(..., checks=True)``, the default): one
        ``{name, status ("pass" | "warn" | "not_testable"), statistic, p_value, detail}`` per check
        (:func:`noisycal_bayes.diagnostics.model_checks`).
    model_checks : ModelChecks or None
        The checks themselves (residuals per cell, ``.plot()``: the report's ``checks.png``).
    fit : FitResult or None
        The point fit of the channels (EM estimate, or the NUTS fit); the report's gap-sensitivity figure
        (:func:`noisycal_bayes.diagnostics.gap_profile`) profiles its likelihood.
    expansion : ModelExpansion or None
        The model expansion (``evaluate(..., expand=True)``, binary data): the shared and score-dependent channel
        models compared by PSIS-LOO, their stacking weights, each model's NC-ECE
        (:mod:`noisycal_bayes.evaluation.expansion`). None when expansion was off or impossible (no draws).
    nc_ece_shared : NCECESummary or None
        The shared-channel model's NC-ECE summary (today's headline) when an expansion ran; ``nc_ece`` is then the
        headline of the model the data support (the same object when the weight stays on the shared model).
    metrics : CleanMetrics or None
        The clean-label metrics (``evaluate(..., metrics=True)``, the default; :func:`noisycal_bayes.labels.clean_metrics`):
        estimate, interval, corrected-label and majority-vote values per metric, at ``threshold`` for binary data.
    metrics_note : str or None
        Why the metrics are missing when they were asked for but could not be computed.
    plan : LabelPlan or None
        The labelling plan (``evaluate(..., plan=budget)``; :func:`noisycal_bayes.labels.plan_labels`): where the next
        labels narrow the headline interval most. None by default.
    plan_note : str or None
        Why the plan is missing when it was asked for but could not be computed.
    """

    method: str
    method_detail: str
    n_items: int
    n_annotators: int
    channel: object
    channel_intervals: dict | None
    prevalence: np.ndarray
    nc_ece: NCECESummary
    table: pd.DataFrame = field(repr=False)
    edges: np.ndarray = field(repr=False)
    naive: object = field(repr=False)
    diagnostics: dict = field(default_factory=dict)
    warnings: tuple = ()
    draws: np.ndarray | None = field(default=None, repr=False)
    draws_label: str = "bootstrap"
    level: float = 0.9
    bins: int = 10
    groups: int = 5
    weights: str = "iv"
    seed: int = 0
    recalibration: tuple | None = field(default=None, repr=False)
    data: object = field(default=None, repr=False, compare=False)
    clean_labels: np.ndarray | None = field(default=None, repr=False, compare=False)
    checks: tuple = ()
    model_checks: object = field(default=None, repr=False, compare=False)
    fit: object = field(default=None, repr=False, compare=False)
    expansion: object = field(default=None, repr=False, compare=False)
    nc_ece_shared: NCECESummary | None = field(default=None, repr=False)
    metrics: object = field(default=None, repr=False, compare=False)
    metrics_note: str | None = None
    plan: object = field(default=None, repr=False, compare=False)
    plan_note: str | None = None
    #: Which report schema renders it: ``"binary"`` (schema version 2, no ``kind`` key) or ``"multiclass"``.
    kind: ClassVar[str] = "binary"

    @property
    def headline_model(self) -> str:
        """The channel model behind ``nc_ece``: ``"shared"``, ``"score_dependent"`` or ``"stacking"``."""
        return "shared" if self.expansion is None else self.expansion.headline

    @property
    def warned_checks(self) -> list:
        """Names of the model checks that warned (the NC-ECE rests on a model the data question)."""
        return [c["name"] for c in self.checks if c.get("status") == "warn"]

    def summary(self, *, title: str | None = None, truth=None, comparison=None) -> str:
        """The plain-text summary the command line prints (``truth``: dict with the true ``channel``)."""
        from ..report import format_summary

        return format_summary(self, truth=truth, title=title, comparison=comparison)

    def to_dict(self) -> dict:
        """The JSON object (strict JSON types; NaN as None); keys in ``docs/cli.md``."""
        from ..report import evaluation_to_dict

        return evaluation_to_dict(self)

    def to_json(self) -> str:
        """The JSON text ``noisycal-bayes evaluate --json`` writes."""
        from ..report import json_text

        return json_text(self.to_dict())

    def write_report(self, out_dir, *, truth=None, title: str = "Calibration report", source: str | None = None,
                     comparison=None):
        """Write the report folder (PNG figures, ``summary.md``, ``results.json``, ``report.html``); returns
        the paths.

        See :func:`noisycal_bayes.report.write_report`. The evaluated data (and clean labels, if given to
        :func:`evaluate`) are used for the naive curves, the oracle curve and the gap sweep.
        """
        from ..report import write_report

        if truth is None and self.clean_labels is not None:
            truth = {"clean_labels": self.clean_labels}
        return write_report(out_dir, self, data=self.data, truth=truth, title=title, source=source,
                            comparison=comparison)

    def _repr_html_(self) -> str:
        from ..report import evaluation_html

        return evaluation_html(self)


@dataclass(frozen=True)
class ClasswiseSummary:
    """Class-wise NC-ECE: the mean over classes with its interval, and each class's.

    Attributes
    ----------
    value : float
        Mean over classes of the class-wise NC-ECE at the point confusion matrices.
    lower, upper : float or None
        The interval to read (``[0, upper_bound]`` when the one-sided reading applies); None without one.
    upper_bound : float or None
        One-sided ``level`` upper bound.
    level : float
    target : str
    interval_method : str
        How the interval was made (with the calibrated level of the draws' quantiles when it widened it).
    per_class : DataFrame
        ``class, value, lower, upper`` (one row per class, in class index order; bounds NaN without interval).
    debiased : float or None
        The debiased estimate of the mean over classes, the centre of its interval; None without one.
    interval_to_read : {"two_sided", "upper_one_sided"} or None
        Which interval ``lower, upper`` is (``upper_one_sided``: ``[0, upper_bound]``); None without one.
    """

    value: float
    lower: float | None
    upper: float | None
    upper_bound: float | None
    level: float
    target: str
    interval_method: str
    per_class: pd.DataFrame = field(repr=False)
    debiased: float | None = None
    interval_to_read: str | None = None

    @property
    def interval(self) -> tuple:
        return (self.lower, self.upper)


@dataclass(frozen=True, kw_only=True)
class MulticlassEvaluation(Evaluation):
    """What one K-class calibration evaluation found, and how (returned by :func:`evaluate_multiclass`).

    An :class:`Evaluation` (``isinstance`` holds; ``kind == "multiclass"`` tells the renderers of
    :mod:`noisycal_bayes.report` which schema to write): the binary ``channel``, ``channel_intervals``, ``table``
    and ``edges`` are None, and ``groups`` equals ``n_groups``. Its fields are keyword-only.

    Attributes
    ----------
    method : {"em", "nuts"}
    method_detail : str
        One line saying how the confusion matrices and the intervals were obtained.
    n_items, n_annotators, n_classes : int
    classes : tuple
        Class names; index ``k`` <-> ``classes[k]``.
    annotator_ids : tuple
    confusion : ndarray of shape (n_annotators, K, K)
        Point estimate (EM, or posterior mean): ``confusion[j, y, a] = P(A_j = a | Y = y)``.
    confusion_lower, confusion_upper : ndarray of shape (n_annotators, K, K) or None
        Equal-tailed ``level`` quantiles of the draws (posterior draws or bootstrap refits); None without draws.
    prevalence : ndarray of shape (n_groups, K)
        Clean-class frequencies per score group (EM estimate or posterior mean).
    nc_ece : NCECESummary
        Top-label NC-ECE (the headline): ``value``, ``lower``, ``upper``, ``upper_bound``, ``level``, ``target``...
    classwise_nc_ece : ClasswiseSummary
    reliability : DataFrame
        Per confidence bin: ``bin, lower, upper, count, mean_confidence, corrected_accuracy, residual,
        band_lower, band_upper`` (band NaN without draws).
    naive : DataFrame
        ``target, top_label_ece, classwise_ece, n_items``: majority vote, each annotator, vote distribution (and
        ``clean labels (oracle)`` when ``clean_labels`` were given).
    naive_curves : dict
        ``{name: accuracy per confidence bin}`` for the reliability figure (majority vote, vote distribution,
        oracle).
    usable : ndarray of shape (n_annotators,), bool
        Annotators whose confusion matrix is invertible enough to correct their labels (others weigh 0).
    warnings : tuple of str
    diagnostics : dict
        NUTS: ``max_rhat, min_ess_bulk, n_divergent, frac_max_treedepth``...; EM: ``converged, n_iter,
        log_likelihood`` and the bootstrap's ``n_failed``.
    checks : tuple of dict
        ``{name, status ("pass" | "warn" | "not_testable"), statistic, p_value, detail}``.
    draws : ndarray or None
        Top-label NC-ECE draws (bootstrap replicates or posterior draws).
    level, bins, weights, seed, n_groups : the settings used (``groups``: the same number as ``n_groups``)
    fit : MulticlassEMFit or MulticlassPosterior
    data : MulticlassAnnotationSet
    clean_labels : ndarray of shape (n_items,) or None
    """

    kind: ClassVar[str] = "multiclass"
    n_classes: int
    classes: tuple
    annotator_ids: tuple
    confusion: np.ndarray
    confusion_lower: np.ndarray | None
    confusion_upper: np.ndarray | None
    classwise_nc_ece: ClasswiseSummary
    reliability: pd.DataFrame = field(repr=False)
    naive: pd.DataFrame = field(repr=False)
    naive_curves: dict = field(default_factory=dict, repr=False)
    usable: np.ndarray = field(default=None, repr=False)
    bins: int = 15
    n_groups: int = 1
    channel: object = field(default=None, repr=False)
    channel_intervals: dict | None = field(default=None, repr=False)
    table: pd.DataFrame | None = field(default=None, repr=False)
    edges: np.ndarray | None = field(default=None, repr=False)

    def summary(self, *, title: str | None = None) -> str:
        """The plain-text summary the command line prints."""
        from ..report import format_summary

        return format_summary(self, title=title)

    def write_report(self, out_dir, *, title: str = "Calibration report (K classes)", source: str | None = None):
        """Write the report folder (``report.html``, ``summary.md``, ``results.json``,
        ``top_label_reliability.png``, ``confusion_matrices.png``); returns the paths
        (:func:`noisycal_bayes.report.write_report`)."""
        from ..report import write_report

        return write_report(out_dir, self, title=title, source=source)
