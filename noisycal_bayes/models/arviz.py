"""Posterior draws to ArviZ for every fit: :meth:`FitResult.to_arviz
<noisycal_bayes.models.result.FitResult.to_arviz>` (binary variables ``fpr``, ``tpr``, ``gap``, ... with dims
``annotator | group | bin``; K classes ``confusion`` (annotator, true_class, label_class), ``prevalence`` (group,
true_class)). The groups are built as ``xarray.Dataset`` objects and wrapped in the container
of the installed ArviZ line (``InferenceData`` with ArviZ 0.x, an ``xarray.DataTree`` with ArviZ >= 1).
"""
from __future__ import annotations

import warnings

import numpy as np


#: Above this many (draw x item) log-likelihood values, ``to_arviz()`` leaves the per-item
#: log-likelihood out unless asked explicitly (8 bytes each: 5e7 is 400 MB).
MAX_LOGLIK_VALUES = 50_000_000


def _container(groups: dict, attrs: dict):
    """The groups (name -> ``xarray.Dataset``) with ``attrs`` on each, in the installed ArviZ line's container."""
    import arviz as az
    import xarray as xr

    for ds in groups.values():
        ds.attrs.update(attrs)
    try:
        major = int(str(az.__version__).split(".")[0])
    except ValueError:  # pragma: no cover - unusual version strings
        major = 1 if not hasattr(az, "InferenceData") else 0
    return xr.DataTree.from_dict(groups) if major >= 1 else az.InferenceData(**groups)


def fit_to_arviz(fit, log_likelihood="auto"):
    """:meth:`FitResult.to_arviz <noisycal_bayes.models.result.FitResult.to_arviz>`, for any storage kind: the
    variables of ``fit._values()`` with ``fit.dims`` and ``fit.coords``, ``fit.sample_stats``, ``fit._observed_data()``
    and ``fit.log_likelihood(per="item")``."""
    import xarray as xr

    values, per_draw = fit._values()
    if not per_draw:
        raise ValueError(f"a {fit.method!r} fit has no posterior draws to convert; use fit_nuts.")
    coords, dims = fit.coords, fit.dims
    base = {"chain": np.arange(fit.n_chains), "draw": np.arange(fit.n_draws)}
    post = xr.Dataset({k: (("chain", "draw") + dims[k], v) for k, v in values.items()},
                      coords={**base, **{d: coords[d] for d in set(sum((dims[k] for k in values), ()))}})
    stats = xr.Dataset({k: (("chain", "draw"), v) for k, v in fit.sample_stats.items()}, coords=base)
    groups = {"posterior": post, "sample_stats": stats}
    observed = fit._observed_data()
    if observed is None:
        # A fit from SufficientStats: no items, hence no per-item observed data or log-likelihood.
        if log_likelihood is True:
            fit.inputs.item_rows()  # raises the explanation
        include = False
    else:
        obs_coords = observed.pop("coords")
        groups["observed_data"] = xr.Dataset(observed, coords=obs_coords)
        n_items = len(obs_coords["item"])
        n_values = fit.n_chains * fit.n_draws * n_items
        include = log_likelihood is True or (log_likelihood == "auto" and n_values <= MAX_LOGLIK_VALUES)
        if log_likelihood == "auto" and not include:  # stacklevel 3: the user's call of to_arviz
            warnings.warn(f"to_arviz: the per-item log-likelihood would hold {n_values:.3g} values (> "
                          f"{MAX_LOGLIK_VALUES:.0e}); it was left out. Pass log_likelihood=True to build it anyway.",
                          UserWarning, stacklevel=3)
    if include:
        groups["log_likelihood"] = xr.Dataset({"labels": (("chain", "draw", "item"), fit.log_likelihood(per="item"))},
                                              coords={**base, "item": np.arange(n_items)})
    return _container(groups, {"created_by": "noisycal_bayes", "inference_library": "numpyro", "model": fit.model,
                               "method": fit.method, "n_classes": fit.n_classes})
