"""Posterior propagation (DESIGN §4): channel posteriors -> calibration error with intervals for a stated
target, corrected reliability curves. Recalibration posteriors live in
:mod:`noisycal_bayes.recalibration.posterior`, small-gap diagnostics in :mod:`noisycal_bayes.diagnostics.gaps`."""
from .nc_ece import (DEFAULT_INTERVAL, DEFAULT_METHOD, INTERVAL_METHODS, METHODS, TARGETS, PosteriorNCECE, debias_abs,
                     posterior_nc_ece, usable_annotators_of)
from .reliability import posterior_reliability

__all__ = ["DEFAULT_INTERVAL", "DEFAULT_METHOD", "INTERVAL_METHODS", "METHODS", "PosteriorNCECE", "TARGETS",
           "debias_abs", "posterior_nc_ece", "posterior_reliability", "usable_annotators_of"]
