"""Inference front door: ``fit_em`` (EM / MAP-EM), ``fit_map`` (optimiser), ``fit_nuts`` (NUTS) -> ``FitResult``."""
from ._inputs import MODEL_NAMES, GroupAssignment, ModelInputs
from ._sampler import clear_sampler_cache
from .bootstrap import bootstrap_em  # noqa: F401  (to be listed in __all__ by the owner of this file)
from .em import em_starts, fit_em
from .map import fit_map
from .nuts import enable_compilation_cache, fit_nuts
from .result import FitResult
from .setup import configure_jax

__all__ = ["FitResult", "GroupAssignment", "MODEL_NAMES", "ModelInputs", "clear_sampler_cache", "configure_jax",
           "em_starts", "enable_compilation_cache", "fit_em", "fit_map", "fit_nuts"]
