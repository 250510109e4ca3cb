"""Plots (matplotlib, imported lazily). Every function returns the ``Figure`` and never opens a window.

Figures are built with :class:`matplotlib.figure.Figure` directly, not through ``pyplot``, so nothing is
registered with a GUI backend: call ``fig.savefig("x.png")`` to write one, or let a notebook display it.
Pass ``ax=`` (or ``axes=``) to draw into your own axes instead.
"""
from .channels import channel_forest, plot_confusion_matrices
from .checks import check_residuals, plot_prior_predictive
from .display import NoisyCalibrationDisplay
from .posterior import nc_ece_posterior
from .reliability import plot_top_label_reliability, reliability_diagram, reliability_table
from .sensitivity import gap_sensitivity

__all__ = ["NoisyCalibrationDisplay", "channel_forest", "check_residuals", "gap_sensitivity", "nc_ece_posterior",
           "plot_confusion_matrices", "plot_prior_predictive", "plot_top_label_reliability", "reliability_diagram",
           "reliability_table"]
