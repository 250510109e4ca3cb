"""Residual heat map of the predictive model checks (``diagnostics.model_checks``)."""
from __future__ import annotations


def check_residuals(result, *, ax=None, value: str = "standardized", title: str | None = None):
    """Plot the residuals per (score group, response pattern) cell of a :func:`~noisycal_bayes.diagnostics.model_checks` result.

    The drawing is :meth:`ModelChecks.plot <noisycal_bayes.diagnostics.checks.ModelChecks.plot>` (the result
    draws itself, and ``diagnostics`` sits below ``plotting``, so the code lives there); this is the same
    figure under the plotting package's name.

    Parameters
    ----------
    result : ModelChecks
    ax : matplotlib Axes, optional
    value : {"standardized", "pearson"}, default "standardized"
        Replicate-standardised residuals ``(observed - mean replicate) / sd replicate`` or Pearson residuals
        ``(observed - expected) / sqrt(expected)``.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        ``result`` is not a model-check result.
    """
    from ..diagnostics.checks import ModelChecks

    return _drawn(result, ModelChecks, "model_checks", ax, value=value, title=title)


def plot_prior_predictive(result, *, ax=None, statistics=("positive_rate", "agreement"), title: str | None = None):
    """Plot a :func:`~noisycal_bayes.diagnostics.prior_predictive_check` result: each observed statistic against
    its prior predictive interval.

    The drawing is :meth:`PriorPredictiveCheck.plot <noisycal_bayes.diagnostics.prior_predictive.PriorPredictiveCheck.plot>`
    (under the plotting package's name, as :func:`check_residuals`).

    Parameters
    ----------
    result : PriorPredictiveCheck
    ax : matplotlib Axes, optional
    statistics : sequence of {"positive_rate", "agreement", "pattern_count"}, default ("positive_rate", "agreement")
    title : str, optional
        Default: the model and the check's status.

    Returns
    -------
    matplotlib.figure.Figure
        As :func:`check_residuals`, which also says when ``ValueError`` is raised (here: ``result`` is not a prior
        predictive check, or an unknown statistic).
    """
    from ..diagnostics.prior_predictive import PriorPredictiveCheck

    return _drawn(result, PriorPredictiveCheck, "prior_predictive_check", ax, statistics=statistics, title=title)


def _drawn(result, kind, producer: str, ax, **options):
    """The figure a diagnostics result draws itself (``result.plot``), once ``result`` is checked to be a ``kind``
    (the output of ``diagnostics.<producer>``)."""
    if not isinstance(result, kind):
        raise ValueError(f"`result` must be the output of noisycal_bayes.diagnostics.{producer}; got "
                         f"{type(result).__name__}.")
    return result.plot(ax, **options)
