"""Recalibration maps (scikit-learn style): noise-corrected fits from an AnnotationSet and a channel,
or naive fits to plain / soft labels. Paper §5."""
from .maps import NotFittedError, PlattScaling, ProjectedHistogram, TemperatureScaling, map_from_dict
from .posterior import PosteriorHistogram, PosteriorPlatt, PosteriorTemperature

__all__ = ["NotFittedError", "PlattScaling", "PosteriorHistogram", "PosteriorPlatt", "PosteriorTemperature", "ProjectedHistogram", "TemperatureScaling", "map_from_dict"]
