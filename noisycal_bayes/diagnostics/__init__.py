"""Diagnostics: identifiability checks, predictive model checks, MCMC health and small-gap sensitivity."""
from .checks import CHECK_NAMES, ModelChecks, model_checks
from .prior_predictive import PriorPredictiveCheck, prior_predictive_check
from .gaps import MIN_GAP, GapDiagnostics, GapSensitivity, gap_diagnostics, gap_sensitivity
from .profile import GapProfile, gap_profile
from .identifiability import MIN_PREVALENCE_SPREAD, check_design, check_prevalence_spread
from .mcmc import RHAT_MAX, check_mcmc, mcmc_diagnostics

__all__ = ["CHECK_NAMES", "GapDiagnostics", "GapProfile", "gap_profile", "GapSensitivity", "MIN_GAP", "MIN_PREVALENCE_SPREAD", "ModelChecks", "RHAT_MAX", "check_design",
           "check_mcmc", "check_prevalence_spread", "gap_diagnostics", "gap_sensitivity", "mcmc_diagnostics",
           "model_checks", "PriorPredictiveCheck", "prior_predictive_check"]
