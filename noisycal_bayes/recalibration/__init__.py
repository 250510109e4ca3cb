"""Recalibration maps (scikit-learn style): noise-corrected fits from an AnnotationSet and a channel,
or naive fits to plain / soft labels (paper §5); multiclass maps fitted on corrected clean-label vectors
(issue 18)."""
from .maps import NotFittedError, PlattScaling, ProjectedHistogram, TemperatureScaling, map_from_dict
from .multiclass import (MulticlassTemperatureScaling, PosteriorMulticlassTemperature, PosteriorTopLabelHistogram,
                         TopLabelHistogram, VectorScaling)
from .posterior import PosteriorHistogram, PosteriorPlatt, PosteriorTemperature

__all__ = ["MulticlassTemperatureScaling", "NotFittedError", "PlattScaling", "PosteriorHistogram",
           "PosteriorMulticlassTemperature", "PosteriorPlatt", "PosteriorTemperature", "PosteriorTopLabelHistogram",
           "ProjectedHistogram", "TemperatureScaling", "TopLabelHistogram", "VectorScaling", "map_from_dict"]
