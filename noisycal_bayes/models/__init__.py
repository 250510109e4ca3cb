"""NumPyro channel models (plain functions) and their priors.

Models are addressed by name in the inference front door (``fit_em`` / ``fit_map`` / ``fit_nuts``):

=================  ===========================================  =========================
name               function                                     clean-label probability
=================  ===========================================  =========================
``"dawid_skene"``  :func:`dawid_skene`                          one prevalence
``"grouped"``      :func:`grouped_dawid_skene`                  one per score group
``"histogram"``    :func:`histogram_dawid_skene`                one per score bin
``"monotone"``     :func:`monotone_dawid_skene`                 ordered, one per score bin
``"platt"``        :func:`platt_dawid_skene`                    ``sigmoid(slope logit z + intercept)``
=================  ===========================================  =========================

Each of them also comes with partially pooled channels (``pooling="partial"`` in ``fit_nuts`` / ``fit_map``):
:func:`pooled_model` with ``kind=`` the name above, for crowds of many sparse annotators
(:mod:`noisycal_bayes.models.pooled`).

K classes (``fit_em_multiclass`` / ``fit_map_multiclass`` / ``fit_nuts_multiclass``, :data:`MULTICLASS_MODELS`):
:func:`dawid_skene_multiclass` and :func:`grouped_multiclass` (Dirichlet confusion rows,
:mod:`~noisycal_bayes.models.dawid_skene`), :func:`pooled_multiclass` (:mod:`~noisycal_bayes.models.pooled`), and
the NUTS coordinates :func:`grouped_multiclass_log_ratio` (:mod:`~noisycal_bayes.models.log_ratio`), IBCC (Bayesian
Dawid-Skene with a population prior, for crowds) :func:`ibcc_multiclass` (:mod:`~noisycal_bayes.models.ibcc`); priors
:class:`MulticlassPrior` (:mod:`~noisycal_bayes.models.priors`).
"""
from .curves import histogram_dawid_skene, monotone_dawid_skene, platt_dawid_skene
from .dawid_skene import dawid_skene, grouped_dawid_skene, oriented_channels, responses
from .pooled import (POOLED_KINDS, POPULATION_SITES, PRECOND_SUFFIX, pooled_channels, pooled_model, posterior_scales,
                     precondition_start, unprecondition_draws)
from .priors import DEFAULT_PRIOR, Prior, PriorParams
from .dawid_skene import dawid_skene_multiclass, grouped_multiclass
from .log_ratio import LogRatioScaling, grouped_multiclass_log_ratio, log_ratio_scaling
from .pooled import pooled_multiclass
from .ibcc import ibcc_multiclass
from .priors import DEFAULT_MULTICLASS_PRIOR, MulticlassPrior, MulticlassPriorParams

#: Model functions by the name used in ``model=``.
MODELS = {
    "dawid_skene": dawid_skene,
    "grouped": grouped_dawid_skene,
    "histogram": histogram_dawid_skene,
    "monotone": monotone_dawid_skene,
    "platt": platt_dawid_skene,
}

#: K-class model functions by the name used in ``model=`` of ``fit_nuts_multiclass``.
MULTICLASS_MODELS = {"dawid_skene": dawid_skene_multiclass, "grouped": grouped_multiclass,
                     "pooled": pooled_multiclass, "ibcc": ibcc_multiclass}

__all__ = ["DEFAULT_PRIOR", "MODELS", "POOLED_KINDS", "POPULATION_SITES", "Prior", "PriorParams", "dawid_skene",
           "grouped_dawid_skene", "histogram_dawid_skene", "monotone_dawid_skene", "oriented_channels",
           "platt_dawid_skene", "pooled_channels", "pooled_model", "responses"]
__all__ += ["MULTICLASS_MODELS", "MulticlassPrior", "dawid_skene_multiclass", "grouped_multiclass",
            "pooled_multiclass", "ibcc_multiclass", "LogRatioScaling", "grouped_multiclass_log_ratio", "log_ratio_scaling"]
__all__ += ["PRECOND_SUFFIX", "posterior_scales", "precondition_start", "unprecondition_draws"]
