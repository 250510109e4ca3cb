"""Inference front door: ``fit_em`` (EM / MAP-EM), ``fit_map`` (optimiser), ``fit_nuts`` (NUTS) -> ``FitResult``.

``FitResult`` and the model inputs live in :mod:`noisycal_bayes.models` (shared with ``reference``);
``check_mcmc`` / ``mcmc_diagnostics`` in :mod:`noisycal_bayes.inference.mcmc`.
"""
from ..models.inputs import MODEL_NAMES, GroupAssignment, ModelInputs
from ..models.result import FitResult, MulticlassEMFit, MulticlassMAPFit, MulticlassPosterior
from ._sampler import clear_sampler_cache
from .bootstrap import bootstrap_em, multiclass_em_estimator
from .cache import clear_cache
from .em import em_starts, fit_em, fit_em_multiclass
from .map import fit_map, fit_map_multiclass
from .mcmc import check_mcmc, mcmc_diagnostics
from .nuts import fit_nuts, fit_nuts_multiclass, sample_model
from .setup import configure_jax, enable_compilation_cache

__all__ = ["FitResult", "GroupAssignment", "MODEL_NAMES", "ModelInputs", "bootstrap_em", "check_mcmc", "clear_cache",
           "clear_sampler_cache", "configure_jax", "em_starts", "enable_compilation_cache", "fit_em", "fit_map",
           "fit_em_multiclass", "fit_nuts", "mcmc_diagnostics", "MulticlassEMFit"]
__all__ += ["multiclass_em_estimator", "sample_model", "MulticlassMAPFit", "MulticlassPosterior", "fit_map_multiclass", "fit_nuts_multiclass"]
