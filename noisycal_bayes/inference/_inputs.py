"""Model inputs live in :mod:`noisycal_bayes.models.inputs` (issue 15), shared by ``inference`` and
``reference``; this module keeps the old import path."""
from ..models.inputs import (GROUPED_MODELS, MODEL_NAMES, PREVALENCE_DIM, GroupAssignment, ModelInputs, check_data,
                             check_model, prepare_inputs, resolve_assignment)

__all__ = ["GROUPED_MODELS", "MODEL_NAMES", "PREVALENCE_DIM", "GroupAssignment", "ModelInputs", "check_data",
           "check_model", "prepare_inputs", "resolve_assignment"]
