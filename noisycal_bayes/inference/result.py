"""`FitResult` lives in :mod:`noisycal_bayes.models.result` (issue 15) so that ``inference`` and ``reference``
share it without importing each other; this module keeps the old import path."""
from ..models.result import MAX_LOGLIK_VALUES, FitResult, channel_from, point_dict

__all__ = ["MAX_LOGLIK_VALUES", "FitResult", "channel_from", "point_dict"]
