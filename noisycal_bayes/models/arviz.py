"""Posterior draws to ArviZ, for both kinds of fit: :meth:`FitResult.to_arviz
<noisycal_bayes.models.result.FitResult.to_arviz>` (binary variables ``fpr``, ``tpr``, ``gap``, ... with dims
``annotator | group | bin``) and :meth:`MulticlassPosterior.to_arviz
<noisycal_bayes.models.result.MulticlassPosterior.to_arviz>` (``confusion`` (annotator, true_class, label_class),
``prevalence`` (group, true_class)). The groups are built as ``xarray.Dataset`` objects and wrapped in the container
of the installed ArviZ line (``InferenceData`` with ArviZ 0.x, an ``xarray.DataTree`` with ArviZ >= 1).
"""
from __future__ import annotations

import warnings

import numpy as np


#: Above this many (draw x item) log-likelihood values, ``to_arviz()`` leaves the per-item
#: log-likelihood out unless asked explicitly (8 bytes each: 5e7 is 400 MB).
MAX_LOGLIK_VALUES = 50_000_000


def _arviz_major() -> int:
    import arviz as az

    try:
        return int(str(az.__version__).split(".")[0])
    except ValueError:  # pragma: no cover - unusual version strings
        return 1 if not hasattr(az, "InferenceData") else 0


def _left_out(n_values) -> None:
    # stacklevel 4: the user's call of to_arviz (warn <- _left_out <- *_to_arviz <- to_arviz).
    warnings.warn(f"to_arviz: the per-item log-likelihood would hold {n_values:.3g} values (> {MAX_LOGLIK_VALUES:.0e}); "
                  "it was left out. Pass log_likelihood=True to build it anyway.", UserWarning, stacklevel=4)


def _container(groups: dict, attrs: dict):
    """The groups (name -> ``xarray.Dataset``) with ``attrs`` on each, in the installed ArviZ line's container."""
    import xarray as xr

    for ds in groups.values():
        ds.attrs.update(attrs)
    if _arviz_major() >= 1:
        return xr.DataTree.from_dict(groups)
    import arviz as az

    return az.InferenceData(**groups)


def fit_to_arviz(fit, log_likelihood="auto"):
    """:meth:`FitResult.to_arviz <noisycal_bayes.models.result.FitResult.to_arviz>`."""
    import xarray as xr

    if fit.draws is None:
        raise ValueError(f"a {fit.method!r} fit has no posterior draws to convert; use fit_nuts.")
    coords = fit.coords
    dims = fit.dims
    post = xr.Dataset({k: (("chain", "draw") + dims[k], v) for k, v in fit.draws.items()},
                      coords={"chain": np.arange(fit.n_chains), "draw": np.arange(fit.n_draws),
                              **{d: coords[d] for d in set(sum((dims[k] for k in fit.draws), ()))}})
    stats = xr.Dataset({k: (("chain", "draw"), v) for k, v in fit.sample_stats.items()},
                       coords={"chain": np.arange(fit.n_chains), "draw": np.arange(fit.n_draws)})
    groups = {"posterior": post, "sample_stats": stats}
    n_values = fit.n_chains * fit.n_draws * fit.inputs.n_items
    include = log_likelihood is True or (log_likelihood == "auto" and n_values <= MAX_LOGLIK_VALUES)
    if fit.inputs.inverse is None:
        # A fit from SufficientStats: no items, hence no per-item observed data or log-likelihood.
        if log_likelihood is True:
            fit.inputs.item_rows()  # raises the explanation
        include = False
    else:
        labels = fit.details.get("labels")
        obs_vars = {"group": (("item",), np.asarray(fit.groups.index))}
        if labels is not None:
            obs_vars["labels"] = (("item", "annotator"), labels)
        if fit.details.get("scores") is not None:
            obs_vars["scores"] = (("item",), fit.details["scores"])
        groups["observed_data"] = xr.Dataset(obs_vars, coords={"item": np.arange(fit.inputs.n_items),
                                                               "annotator": coords["annotator"]})
    if log_likelihood == "auto" and not include and fit.inputs.inverse is not None:
        _left_out(n_values)
    if include:
        ll = fit.log_likelihood(per="item")
        groups["log_likelihood"] = xr.Dataset(
            {"labels": (("chain", "draw", "item"), ll)},
            coords={"chain": np.arange(fit.n_chains), "draw": np.arange(fit.n_draws),
                    "item": np.arange(fit.inputs.n_items)})
    return _container(groups, {"created_by": "noisycal_bayes", "inference_library": "numpyro", "model": fit.model,
                               "method": fit.method})



def confusion_to_arviz(fit, log_likelihood="auto"):
    """:meth:`MulticlassPosterior.to_arviz <noisycal_bayes.models.result.MulticlassPosterior.to_arviz>`."""
    import xarray as xr

    k = fit.confusion.shape[-1]
    chain, draw = np.arange(fit.n_chains), np.arange(fit.n_draws)
    ann = list(fit.annotator_ids) if fit.annotator_ids is not None else list(range(fit.confusion.shape[1]))
    classes = list(fit.classes) if len(fit.classes) == k else list(range(k))
    base = {"chain": chain, "draw": draw}
    post = {"confusion": (("chain", "draw", "annotator", "true_class", "label_class"), fit._chain_draw(fit.confusion)),
            "prevalence": (("chain", "draw", "group", "true_class"), fit._chain_draw(fit.prevalence))}
    if fit.population_confusion is not None:
        post["population_confusion"] = (("chain", "draw", "true_class", "label_class"),
                                        fit._chain_draw(fit.population_confusion))
    for name, value in fit.extra_draws.items():
        post[name] = (("chain", "draw"), fit._chain_draw(value))
    groups = {"posterior": xr.Dataset(post, coords={**base, "annotator": ann, "true_class": classes,
                                                    "label_class": classes,
                                                    "group": np.arange(fit.prevalence.shape[1])}),
              "sample_stats": xr.Dataset({k_: (("chain", "draw"), v) for k_, v in fit.sample_stats.items()},
                                         coords=base)}
    t = fit.table
    n_items = int(np.asarray(t.item_group).shape[0])
    groups["observed_data"] = xr.Dataset(
        {"response_item": (("response",), np.asarray(t.item)),
         "response_annotator": (("response",), np.asarray(t.annotator)),
         "labels": (("response",), np.asarray(t.label)), "group": (("item",), np.asarray(t.item_group)),
         "gold": (("item",), np.asarray(t.gold))}, coords={"item": np.arange(n_items)})
    n_values = fit.n_chains * fit.n_draws * n_items
    include = log_likelihood is True or (log_likelihood == "auto" and n_values <= MAX_LOGLIK_VALUES)
    if include:
        groups["log_likelihood"] = xr.Dataset({"labels": (("chain", "draw", "item"), fit.log_likelihood())},
                                              coords={**base, "item": np.arange(n_items)})
    elif log_likelihood == "auto":
        _left_out(n_values)
    return _container(groups, {"created_by": "noisycal_bayes", "inference_library": "numpyro", "model": fit.model,
                               "method": "nuts", "n_classes": k})
