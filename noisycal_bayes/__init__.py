"""noisycal_bayes: calibration of a classifier (binary or K classes) judged and fixed with noisy multi-annotator labels.

Notation (Hanada & Futami): ``a_j`` -> ``fpr``, ``a_j + delta_j`` -> ``tpr``, ``delta_j`` -> ``gap``,
``pi_g`` -> ``prevalence``.

The data layer and the simulator import eagerly; the metrics (``ece``, ``nc_ece``, ``smece``, which use JAX),
the Bayesian layer (NumPyro) and the reference layer are loaded on first use, so ``import noisycal_bayes``
does not start JAX.
"""
from importlib import import_module

from . import warnings
from .data import AnnotationSet, Binning, Channel
from .simulate import simulate_annotations

__version__ = "0.2.0"

# Public name -> module that defines it (imported lazily by __getattr__).
_LAZY = {
    "NCECEResult": "noisycal_bayes.reference.calibration",
    "ece": "noisycal_bayes.reference.calibration",
    "nc_ece": "noisycal_bayes.reference.calibration",
    "smece": "noisycal_bayes.reference.calibration",
    "TemperatureScaling": "noisycal_bayes.recalibration",
    "PlattScaling": "noisycal_bayes.recalibration",
    "ProjectedHistogram": "noisycal_bayes.recalibration",
    "configure_jax": "noisycal_bayes.inference",
    "fit_em": "noisycal_bayes.inference",
    "fit_map": "noisycal_bayes.inference",
    "fit_nuts": "noisycal_bayes.inference",
    "clear_cache": "noisycal_bayes.inference",
    "FitResult": "noisycal_bayes.inference",
    "Prior": "noisycal_bayes.models",
    "label_issues": "noisycal_bayes.labels",
    "item_posteriors": "noisycal_bayes.labels",
    "annotation_posteriors": "noisycal_bayes.labels",
    "corrected_accuracy": "noisycal_bayes.labels",
    "compare_models": "noisycal_bayes.labels",
    "evaluate": "noisycal_bayes.evaluation",
    "Evaluation": "noisycal_bayes.evaluation",
    "posterior_nc_ece": "noisycal_bayes.propagate",
    "posterior_reliability": "noisycal_bayes.propagate",
    "PosteriorNCECE": "noisycal_bayes.propagate",
    "load_annotations_csv": "noisycal_bayes.data.loaders",
    "load_demo": "noisycal_bayes.data.loaders",
    "SufficientStats": "noisycal_bayes.data.outofcore",
    "stats_from_dask": "noisycal_bayes.data.outofcore",
    "stats_from_chunks": "noisycal_bayes.data.outofcore",
    "read_stats_csv": "noisycal_bayes.data.outofcore",
    "read_stats_parquet": "noisycal_bayes.data.outofcore",
    "labels": "noisycal_bayes.labels",
    "propagate": "noisycal_bayes.propagate",
    "experiments": "noisycal_bayes.experiments",
    "reference": "noisycal_bayes.reference",
    "diagnostics": "noisycal_bayes.diagnostics",
    "inference": "noisycal_bayes.inference",
    "models": "noisycal_bayes.models",
    "recalibration": "noisycal_bayes.recalibration",
    # K classes (issue 18)
    "MulticlassAnnotationSet": "noisycal_bayes.data",
    "load_multiclass": "noisycal_bayes.data",
    "simulate_multiclass": "noisycal_bayes.simulate",
    "fit_em_multiclass": "noisycal_bayes.inference",
    "fit_nuts_multiclass": "noisycal_bayes.inference",
    "top_label_nc_ece": "noisycal_bayes.reference.calibration",
    "classwise_nc_ece": "noisycal_bayes.reference.calibration",
    "posterior_top_label_nc_ece": "noisycal_bayes.propagate.nc_ece",
    "posterior_classwise_nc_ece": "noisycal_bayes.propagate.nc_ece",
    "evaluate_multiclass": "noisycal_bayes.evaluation",
    "MulticlassEvaluation": "noisycal_bayes.evaluation",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'noisycal_bayes' has no attribute {name!r}")
    mod = import_module(module)
    value = mod if module.endswith("." + name) else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["AnnotationSet", "Binning", "Channel", "simulate_annotations", "warnings", *_LAZY]
