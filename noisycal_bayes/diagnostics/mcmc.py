"""MCMC health checks: re-exported from :mod:`noisycal_bayes.inference.mcmc`.

They moved to the inference layer (issue 15) because ``fit_nuts`` runs them and ``diagnostics`` sits above
``inference``; this module keeps their public names under ``diagnostics``.
"""
from ..inference.mcmc import MIN_ESS_PER_CHAIN, RHAT_MAX, check_mcmc, mcmc_diagnostics

__all__ = ["MIN_ESS_PER_CHAIN", "RHAT_MAX", "check_mcmc", "mcmc_diagnostics"]
