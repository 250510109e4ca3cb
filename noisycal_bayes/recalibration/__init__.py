"""Recalibration maps (scikit-learn style): noise-corrected fits from an AnnotationSet and a channel,
or naive fits to plain / soft labels (paper §5); K-class maps fitted on corrected clean-label vectors.
Point maps in :mod:`.maps`, maps with a posterior band in :mod:`.posterior`."""
from .maps import (MulticlassTemperatureScaling, NotFittedError, PlattScaling, ProjectedHistogram, TemperatureScaling,
                   TopLabelHistogram, VectorScaling, map_from_dict)
from .posterior import (PosteriorHistogram, PosteriorMulticlassTemperature, PosteriorPlatt, PosteriorTemperature,
                        PosteriorTopLabelHistogram)

__all__ = ["MulticlassTemperatureScaling", "NotFittedError", "PlattScaling", "PosteriorHistogram",
           "PosteriorMulticlassTemperature", "PosteriorPlatt", "PosteriorTemperature", "PosteriorTopLabelHistogram",
           "ProjectedHistogram", "TemperatureScaling", "TopLabelHistogram", "VectorScaling", "map_from_dict"]
