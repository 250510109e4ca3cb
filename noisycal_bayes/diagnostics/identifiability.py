"""Identifiability checks of the design: re-exported from :mod:`noisycal_bayes.data.design`.

They moved to the data layer (issue 15) because the fitters in ``inference`` and ``reference``, which sit
below ``diagnostics``, run them; this module keeps their public names under ``diagnostics``.
"""
from ..data.design import (MIN_PREVALENCE_SPREAD, check_design, check_prevalence_spread, co_labelling_problem,
                           design_problems)

__all__ = ["MIN_PREVALENCE_SPREAD", "check_design", "check_prevalence_spread", "co_labelling_problem",
           "design_problems"]
