"""noisycal_bayes: calibration of a binary classifier judged and fixed with noisy multi-annotator labels.

Notation (Hanada & Futami): ``a_j`` -> ``fpr``, ``a_j + delta_j`` -> ``tpr``, ``delta_j`` -> ``gap``,
``pi_g`` -> ``prevalence``.
"""
from . import warnings
from .data import AnnotationSet, Binning, Channel
from .reference.calibration import NCECEResult, ece, nc_ece, smece
from .simulate import simulate_annotations

__version__ = "0.1.0"

__all__ = ["AnnotationSet", "Binning", "Channel", "NCECEResult", "ece", "nc_ece", "simulate_annotations", "smece",
           "warnings"]
