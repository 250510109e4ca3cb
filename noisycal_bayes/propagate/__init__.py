"""Posterior propagation (DESIGN §4): channel posteriors -> calibration error with intervals for a stated
target, corrected reliability curves; for K classes the top-label and class-wise NC-ECE (:mod:`.nc_ece`).
Recalibration posteriors live in :mod:`noisycal_bayes.recalibration.posterior`, small-gap diagnostics in
:mod:`noisycal_bayes.diagnostics.gaps`."""
from .nc_ece import (DEFAULT_INTERVAL, DEFAULT_METHOD, INTERVAL_METHODS, MC_TARGETS, METHODS, TARGETS,
                     posterior_classwise_nc_ece, posterior_nc_ece, posterior_top_label_nc_ece, usable_annotators_of)
from .result import PosteriorClasswiseNCECE, PosteriorNCECE, debias_abs
from .reliability import posterior_reliability

__all__ = ["DEFAULT_INTERVAL", "DEFAULT_METHOD", "INTERVAL_METHODS", "METHODS", "MC_TARGETS", "PosteriorClasswiseNCECE",
           "PosteriorNCECE", "TARGETS", "debias_abs", "posterior_classwise_nc_ece", "posterior_nc_ece",
           "posterior_reliability", "posterior_top_label_nc_ece", "usable_annotators_of"]
