"""Fitting the channel models of :mod:`noisycal_bayes.diagnostics.alternatives` (shared, score-dependent and
correlated noise) by NUTS, MAP or Laplace on compressed ``(score group, response pattern)`` counts, and registering the
richer two with ``fit_map`` / ``fit_nuts`` as a :class:`~noisycal_bayes.models.result.FitResult`
(:func:`registered_fit`; ``fit_em(model="score_dependent")``, :mod:`~noisycal_bayes.inference.score_em`, returns the
same layout through :func:`group_channel_result`). The comparison by PSIS-LOO, stacking and the NC-ECE with channels per group are in
:mod:`noisycal_bayes.diagnostics.alternatives`, which re-exports these names.
"""
from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_positive_int
from ..data import AnnotationSet, Binning

__all__ = ["ALTERNATIVE_MODELS", "AlternativeFit", "GROUP_CHANNEL_MODELS", "fit_alternative", "group_channel_result",
           "registered_fit"]

#: Model names of :func:`fit_alternative`.
ALTERNATIVE_MODELS = ("shared", "score_dependent", "correlated")
#: The richer models registered with ``fit_map`` / ``fit_nuts`` (:func:`registered_fit`): channels per score group.
GROUP_CHANNEL_MODELS = ("score_dependent", "correlated")


@dataclass(frozen=True)
class AlternativeFit:
    """One fitted channel model of :func:`fit_alternative`.

    Attributes
    ----------
    model, method : str
    draws : dict of ndarray
        Every site, shape (n_chains, n_draws, ...) (NUTS) or (1, 1, ...) (MAP).
    fpr_group, tpr_group : ndarray of shape (n_draws_total, n_groups, n_annotators)
        Channels per score group (the same in every group for ``"shared"``; the marginal rates for
        ``"correlated"``).
    loglik_rows : ndarray of shape (n_chains, n_draws, n_rows)
        Log-likelihood of each compressed row with items (per item of the row, not weighted).
    counts : ndarray of shape (n_rows,)
        Items per row.
    group_index : ndarray of shape (n_items,)
        Score group of each item.
    diagnostics : dict
        NUTS: ``rhat_max``, ``ess_min``, ``divergences``; MAP: ``success``, ``loglik``.
    sample_stats : dict of name -> ndarray of shape (n_chains, n_draws) or None
        NUTS: the sampler's statistics (``diverging``, ``n_steps``, ...); None for MAP and Laplace.
    """

    model: str
    method: str
    draws: dict = field(repr=False)
    fpr_group: np.ndarray = field(repr=False)
    tpr_group: np.ndarray = field(repr=False)
    loglik_rows: np.ndarray = field(repr=False)
    counts: np.ndarray = field(repr=False)
    group_index: np.ndarray = field(repr=False)
    diagnostics: dict = field(default_factory=dict)
    sample_stats: dict | None = field(default=None, repr=False)


def _model_fn(model):
    from ..models import grouped_dawid_skene
    from ..models.correlated import correlated_dawid_skene
    from ..models.score_noise import score_dependent_dawid_skene

    return {"shared": grouped_dawid_skene, "score_dependent": score_dependent_dawid_skene,
            "correlated": correlated_dawid_skene}[model]


def _table(data, groups, func):
    """``(GroupAssignment, ModelInputs)`` of the grouped model on ``data``: the padded compressed table of every
    model here (:func:`_inputs` reads its arrays; :func:`registered_fit` keeps both on its FitResult)."""
    from ..models.inputs import prepare_inputs, resolve_assignment

    assignment = resolve_assignment(data, "grouped", groups, func)
    return assignment, prepare_inputs(data, "grouped", assignment, func=func)


def _inputs(data, groups, func):
    """Padded ``(group, pattern)`` table: ``(patterns, group, counts, keep, n_groups, item_group)``.

    The table keeps its zero-count padding rows (:func:`noisycal_bayes.models.inputs.prepare_inputs`), so its
    shape depends on the numbers of groups and annotators only and one compiled sampler serves every data set
    of that design; ``keep`` marks the rows with items (the ones LOO and the outputs use).
    """
    assignment, inp = _table(data, groups, func)
    patterns = np.asarray(inp.patterns, np.int32)
    group = np.asarray(inp.row_group, np.int32)
    counts = np.asarray(inp.counts, np.float64)
    return patterns, group, counts, counts > 0, int(inp.n_groups), np.asarray(assignment.index)


def _channels(model, samples, n_groups):
    """``(fpr_group, tpr_group)`` of shape (S, G, J) from flat samples (S, ...)."""
    if model == "score_dependent":
        return np.asarray(samples["fpr_group"]), np.asarray(samples["tpr_group"])
    f = np.asarray(samples["fpr_marginal" if model == "correlated" else "fpr"])
    t = np.asarray(samples["tpr_marginal" if model == "correlated" else "tpr"])
    return (np.repeat(f[:, None, :], n_groups, axis=1), np.repeat(t[:, None, :], n_groups, axis=1))


def check_row_data(data, func: str, model: str) -> None:
    """Refuse data the compressed ``(score group, response pattern)`` rows cannot hold: gold labels or repeated
    (item, annotator) labels (a row holds one label per annotator and no clean label). Fitting them anyway would
    silently drop the gold labels (or fail on the repeats), so the richer models refuse them by name.

    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> check_row_data(simulate_annotations(50, fpr=[0.1, 0.2], tpr=[0.9, 0.8], seed=0).data, "f", "shared")
    """
    n_gold = 0 if getattr(data, "gold", None) is None else int((np.asarray(data.gold) >= 0).sum())
    if n_gold or getattr(data, "has_repeats", False):
        what = f"{n_gold} gold labels" if n_gold else "repeated (item, annotator) labels"
        raise ValueError(f"{func}: model={model!r} is fitted on compressed (group, response pattern) rows, which hold "
                         f"one label per (item, annotator) and no gold label; these data have {what}. Fit "
                         "model='grouped' (its sparse path uses them), or drop them for this model.")


def fit_alternative(data: AnnotationSet, model: str, *, groups=Binning.equal_mass(5), method: str = "nuts",
                    n_chains: int = 2, n_warmup: int = 500, n_draws: int = 500, seed: int = 0,
                    prior=None, init=None) -> AlternativeFit:
    """Fit one of the channel models of :data:`ALTERNATIVE_MODELS` to ``data`` by NUTS or MAP.

    Parameters
    ----------
    data : AnnotationSet with scores
    model : {"shared", "score_dependent", "correlated"}
    groups : Binning, default ``Binning.equal_mass(5)``
        Score groups (prevalence per group; channels per group for ``"score_dependent"``).
    method : {"nuts", "map", "laplace"}, default "nuts"
        ``"nuts"``: NumPyro's NUTS kernel (sequential chains, float64, diagonal mass matrix, target acceptance
        0.9) compiled once per model and design (numbers of score groups and annotators, warm-up length) and
        reused: the data, the prior and the start are traced inputs, so the next data set of that design costs
        sampling time only. Chains start at the shared-channel EM estimate, jittered by +-0.5 in unconstrained
        coordinates per chain. ``"map"``: the mode of the posterior in NumPyro's unconstrained space, by
        L-BFGS from the EM estimate. ``"laplace"``: the MAP and ``n_draws`` draws (one chain) from the normal
        approximation there, ``N(mode, H^-1)`` in unconstrained space with ``H`` the Hessian of the potential
        (eigenvalues floored at 1e-8), with the hierarchical scales (``tau_fpr``, ``tau_u``, ``dependence``) held
        at their mode (the posterior is a funnel along them), mapped to the constrained sites: approximate
        posterior draws at the cost of one optimisation (the EM route of :func:`noisycal_bayes.evaluate` compares models on them).
    n_chains, n_warmup, n_draws : int
        NUTS settings (``n_draws`` also the Laplace draws).
    seed : int, default 0
    prior : Prior, optional
        Default :data:`noisycal_bayes.models.DEFAULT_PRIOR`.
    init : FitResult, optional
        A shared-channel EM fit of ``data`` with these ``groups`` to start from (default: one is made, 3 starts).

    Returns
    -------
    AlternativeFit

    Raises
    ------
    ValueError
        Unknown model or method; data without scores; fewer than two annotators; gold or repeated labels
        (:func:`check_row_data`).
    """
    import jax

    from ..core import x64
    from ..models import DEFAULT_PRIOR

    func = "fit_alternative"
    if model not in ALTERNATIVE_MODELS:
        raise ValueError(f"{func}: `model` must be one of {list(ALTERNATIVE_MODELS)}; got {model!r}.")
    if method not in ("nuts", "map", "laplace"):
        raise ValueError(f"{func}: `method` must be 'nuts', 'map' or 'laplace'; got {method!r}.")
    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"{func}: `data` must be an AnnotationSet; got {type(data).__name__}.")
    if data.n_annotators < 2:
        raise ValueError(f"{func}: at least two annotators are needed; got {data.n_annotators}.")
    data.require_scores()
    check_row_data(data, func, model)
    for name, v in (("n_chains", n_chains), ("n_warmup", n_warmup), ("n_draws", n_draws)):
        check_positive_int(v, name=name)
    prior = DEFAULT_PRIOR if prior is None else prior
    patterns, group, counts, keep, n_groups, index = _inputs(data, groups, func)
    fn = _model_fn(model)
    kw = dict(n_annotators=data.n_annotators, n_groups=n_groups, prior=prior)
    init = _init_values(data, groups, model, n_groups, seed, em=init)
    with x64():
        if method == "nuts":
            samples, diag, shape, stats = _nuts(model, (patterns, group, counts), prior, n_groups, data.n_annotators,
                                         n_chains, n_warmup, n_draws, seed, init)
        # Outputs (and MAP) on the rows with items only: padding rows carry no likelihood.
        args = (jax.numpy.asarray(patterns[keep]), jax.numpy.asarray(group[keep]), jax.numpy.asarray(counts[keep]))
        if method != "nuts":
            stats = None
            samples, diag, shape = _map(fn, args, kw, seed, init, n_laplace=n_draws if method == "laplace" else 0)
        from numpyro.infer import Predictive

        # The per-row log-likelihood and the deterministic sites at every draw (one vectorised pass).
        flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in samples.items()}
        pred = Predictive(fn, posterior_samples=flat, return_sites=["log_likelihood", "fpr_group", "tpr_group",
                                                                    "fpr_marginal", "tpr_marginal", "tpr", "gap"])
        det = pred(jax.random.PRNGKey(seed), *args, record_loglik=True, **kw)
        det = {k: np.asarray(v) for k, v in det.items()}
    flat.update({k: v for k, v in det.items() if k != "log_likelihood"})
    flat = {k: np.asarray(v) for k, v in flat.items()}
    fpr_g, tpr_g = _channels(model, flat, n_groups)
    ll = det["log_likelihood"].reshape(shape + (-1,))
    draws = {k: v.reshape(shape + v.shape[1:]) for k, v in flat.items()}
    return AlternativeFit(model, method, draws, fpr_g, tpr_g, ll, counts[keep], index, diag, stats)


#: Sites of the richer models that the registered FitResult renames ``<name>_centre``: in those models ``fpr`` and
#: ``u`` are the shared centre the group channels are pooled toward (``"score_dependent"``) or the rates at the
#: median item effect (``"correlated"``), not any item's channel; ``fpr``, ``tpr``, ``gap`` of the FitResult are
#: the item-weighted average of the group channels instead.
_CENTRE_SITES = ("fpr", "u", "tpr", "gap")


def registered_fit(data: AnnotationSet, model: str, *, method: str, groups=Binning.equal_mass(5), n_chains: int = 2,
                   n_warmup: int = 500, n_draws: int = 500, seed: int = 0, prior=None, func: str = "fit_nuts"):
    """A richer channel model of :func:`fit_alternative` as the one result type, :class:`~noisycal_bayes.models.
    result.FitResult`: what ``fit_nuts(model=...)`` / ``fit_map(model=...)`` return for :data:`GROUP_CHANNEL_MODELS`.

    The fit is :func:`fit_alternative`'s (same sampler, start and draws for the same seed); the FitResult carries

    * ``draws`` (NUTS, shape (n_chains, n_draws, ...)) or ``point`` (MAP, no leading axes): ``fpr_group``,
      ``tpr_group`` (n_groups, n_annotators), the channels NC-ECE needs (:attr:`FitResult.group_channels`);
      ``prevalence`` (n_groups,); ``fpr``, ``tpr``, ``gap`` (n_annotators,), the *item-weighted average* of the
      group channels, ``sum_g (n_g / n) fpr_gj``; and the model's own sites, those named ``fpr``, ``u`` in the
      model renamed ``fpr_centre``, ``u_centre`` (the shared centre; ``tau_fpr``, ``tau_u``, ``e_fpr``, ``e_u`` or
      ``dependence``, ``fpr_marginal``, ``tpr_marginal`` keep their names);
    * ``channel``: the item-weighted average channel (posterior mean for NUTS), documented as such: a consumer that
      needs the channel of an item reads ``group_channels`` (``posterior_nc_ece``, ``clean_label_probability``) or
      refuses the fit (:func:`noisycal_bayes._validation.shared_channels_only`);
    * ``groups``, ``inputs``: the grouped model's assignment and compressed table; ``details["loglik_rows"]`` (chain,
      draw, n_rows) the per-item log-likelihood of each table row (0 on padding rows), read by ``log_likelihood``.

    Parameters
    ----------
    data, model, groups, n_chains, n_warmup, n_draws, seed, prior
        As in :func:`fit_alternative` (``model`` one of :data:`GROUP_CHANNEL_MODELS`).
    method : {"nuts", "map"}
    func : str
        The public function named in warnings and errors.

    Returns
    -------
    FitResult
        ``model`` the model's name, ``method`` ``"nuts"`` or ``"map"``.
    """
    from ..data.design import check_design
    from .mcmc import check_mcmc, mcmc_diagnostics
    from ..models import DEFAULT_PRIOR
    from ..models.result import FitResult, channel_from

    if model not in GROUP_CHANNEL_MODELS or method not in ("nuts", "map"):
        raise ValueError(f"{func}: registered richer models are {list(GROUP_CHANNEL_MODELS)} by 'nuts' or 'map'; got "
                         f"model={model!r}, method={method!r}.")
    prior = DEFAULT_PRIOR if prior is None else prior
    alt = fit_alternative(data, model, groups=groups, method=method, n_chains=n_chains, n_warmup=n_warmup,
                          n_draws=n_draws, seed=seed, prior=prior)
    assignment, inp = _table(data, groups, func)
    design = list(check_design(data, "grouped", n_groups=assignment.n_groups, func=func))
    shape = alt.loglik_rows.shape[:2]
    sizes = np.bincount(alt.group_index, minlength=assignment.n_groups).astype(np.float64)
    w = sizes / sizes.sum()
    values = {(f"{k}_centre" if k in _CENTRE_SITES else k): np.asarray(v, np.float64) for k, v in alt.draws.items()}
    values["fpr_group"] = alt.fpr_group.reshape(shape + alt.fpr_group.shape[1:])
    values["tpr_group"] = alt.tpr_group.reshape(shape + alt.tpr_group.shape[1:])
    values["fpr"] = np.einsum("g,cdgj->cdj", w, values["fpr_group"])
    values["tpr"] = np.einsum("g,cdgj->cdj", w, values["tpr_group"])
    values["gap"] = values["tpr"] - values["fpr"]
    keep = np.asarray(inp.counts) > 0
    rows = np.zeros(shape + (keep.size,))
    rows[..., keep] = alt.loglik_rows
    if method == "map":
        sites = {k: v[0, 0] for k, v in values.items() if k not in ("fpr_group", "tpr_group", "fpr", "tpr", "gap")}
        return group_channel_result(data, model, "map", assignment, inp, prior, sites, values["fpr_group"][0, 0],
                                    values["tpr_group"][0, 0], rows[0, 0], func=func,
                                    converged=bool(alt.diagnostics.get("success", True)),
                                    loglik=float(np.sum(alt.counts * alt.loglik_rows[0, 0])),
                                    settings=dict(seed=seed, start="em"),
                                    extra_details={"alternative": dict(alt.diagnostics)}, design=design)
    ids = tuple(data.annotator_ids)
    details = {"loglik_rows": rows, "labels": data.labels, "scores": data.scores, "group_weights": w,
               "alternative": dict(alt.diagnostics)}
    common = dict(model=model, groups=assignment, inputs=inp, prior=prior, annotator_ids=ids,
                  identified=not design, reason=design[0] if design else "")
    stats = {k: np.asarray(v) for k, v in (alt.sample_stats or {}).items()}
    n_divergent = int(stats["diverging"].sum()) if "diverging" in stats else 0
    mean = {k: v.mean(axis=(0, 1)) for k, v in values.items()}
    result = FitResult(method="nuts", channel=channel_from(mean["fpr"], mean["tpr"], ids), point=mean, draws=values,
                       sample_stats=stats, n_divergent=n_divergent, details=details, **common,
                       settings=dict(n_chains=n_chains, n_warmup=n_warmup, n_draws=n_draws, seed=seed,
                                     target_accept=_TARGET_ACCEPT, max_tree_depth=_MAX_TREE_DEPTH, dense_mass=False,
                                     start="em"))
    table = mcmc_diagnostics(values, result.dims, result.coords)
    n_max = int((stats["n_steps"] >= 2 ** _MAX_TREE_DEPTH - 1).sum()) if "n_steps" in stats else 0
    notes = design + check_mcmc(table, n_chains=n_chains, n_divergent=n_divergent, n_draws=n_draws, n_max_depth=n_max,
                                max_tree_depth=_MAX_TREE_DEPTH, func=func)
    converged = not any(("R-hat" in m or "divergent" in m) for m in notes)
    return dataclasses.replace(result, diagnostics=table, warnings=tuple(notes), converged=converged)


def group_channel_result(data, model, method, assignment, inp, prior, sites, fpr_group, tpr_group, loglik_rows, *,
                         func, converged, loglik, settings, n_iter: int = 0, warnings=(), extra_details=None,
                         design=None):
    """The :class:`~noisycal_bayes.models.result.FitResult` of a point estimate (MAP or EM) with channels per score
    group, the layout :func:`registered_fit` documents: ``point`` holds the model's own ``sites`` (the centre already
    named ``fpr_centre``, ``u_centre``), ``fpr_group``, ``tpr_group`` (G, J) and the item-weighted average ``fpr``,
    ``tpr``, ``gap``; ``channel`` that average; ``details["loglik_rows"]`` (1, 1, n_rows) the per-item log-likelihood of
    each row of the padded table ``inp`` (``loglik_rows`` (n_rows,), 0 on padding rows). ``design``: the design notes
    (:func:`~noisycal_bayes.data.design.check_design`; computed when None), put first in ``warnings``."""
    from ..data.design import check_design
    from ..models.result import FitResult, channel_from

    if design is None:
        design = list(check_design(data, "grouped", n_groups=assignment.n_groups, func=func))
    sizes = np.bincount(np.asarray(assignment.index), minlength=assignment.n_groups).astype(np.float64)
    w = sizes / sizes.sum()
    point = {k: np.asarray(v, np.float64) for k, v in sites.items()}
    point["fpr_group"], point["tpr_group"] = np.asarray(fpr_group, np.float64), np.asarray(tpr_group, np.float64)
    # The weighted average as registered_fit's NUTS branch computes it (the same einsum: the same bits).
    point["fpr"] = np.einsum("g,cdgj->cdj", w, point["fpr_group"][None, None])[0, 0]
    point["tpr"] = np.einsum("g,cdgj->cdj", w, point["tpr_group"][None, None])[0, 0]
    point["gap"] = point["tpr"] - point["fpr"]
    ids = tuple(data.annotator_ids)
    details = {"loglik_rows": np.asarray(loglik_rows, np.float64)[None, None], "labels": data.labels,
               "scores": data.scores, "group_weights": w, **(extra_details or {})}
    return FitResult(model=model, method=method, channel=channel_from(point["fpr"], point["tpr"], ids), point=point,
                     groups=assignment, inputs=inp, prior=prior, annotator_ids=ids, identified=not design,
                     reason=design[0] if design else "", converged=bool(converged), loglik=float(loglik),
                     n_iter=int(n_iter), warnings=tuple(design) + tuple(warnings), settings=settings, details=details)


def _init_values(data, groups, model, n_groups, seed, em=None):
    """Starting values at the shared-channel EM estimate (dependence and between-group spread small).

    Random starts (NumPyro's default ``init_to_uniform``) sent chains of the correlated model on CIFAR-10N to
    a far worse mode (dependence scale 5, R-hat 2.9, 800 divergences); the EM estimate is a point every model
    nests (``tau = 0`` or ``s = 0``).
    """
    from .em import fit_em

    if em is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            em = fit_em(data, groups=groups, n_starts=3, seed=seed)
    if em.channel is None:
        return None
    fpr = np.clip(np.asarray(em.channel.fpr), 1e-3, 0.98)
    tpr = np.clip(np.asarray(em.channel.tpr), fpr + 1e-3, 0.999)
    values = {"fpr": fpr, "u": (tpr - fpr) / (1 - fpr),
              "prevalence": np.clip(np.asarray(em.prevalence, np.float64).reshape(-1), 1e-3, 1 - 1e-3)}
    return None if values["prevalence"].size != n_groups else _with_scales(values, model, n_groups)


def _with_scales(values, model, n_groups):
    """``values`` plus the model's own sites near their nested point: small between-group spread or dependence."""
    j = values["fpr"].size
    if model == "score_dependent":
        values.update(tau_fpr=0.1, tau_u=0.1, e_fpr=np.zeros((n_groups, j)), e_u=np.zeros((n_groups, j)))
    elif model == "correlated":
        values["dependence"] = 0.1
    return values


def _init_strategy(init):
    from numpyro.infer.initialization import init_to_uniform, init_to_value

    return init_to_uniform(radius=0.5) if init is None else init_to_value(values=init)


#: NUTS settings of :func:`fit_alternative` (a diagonal mass matrix: the score-dependent model has 2 J (G + 1) + G
#: + 2 parameters; a higher target acceptance than NumPyro's 0.8 because the hierarchical scales near 0 need
#: small steps).
_TARGET_ACCEPT, _MAX_TREE_DEPTH = 0.9, 10


def _default_sites(model, n_groups, n_annotators):
    """A start inside the prior's bulk when the EM start is unavailable (the sampler jitters it per chain)."""
    j = n_annotators
    return _with_scales({"fpr": np.full(j, 0.15), "u": np.full(j, 0.6), "prevalence": np.full(n_groups, 0.5)},
                        model, n_groups)


def _bound(model, static):
    fn = _model_fn(model)

    def bound(*args):
        *data, prior = args
        return fn(*data, prior=prior, **static)

    bound.__name__ = f"{model}_alternative_bound"
    return bound


def _nuts(model, data_args, prior, n_groups, n_annotators, n_chains, n_warmup, n_draws, seed, init=None):
    """NUTS by the package's cached compiled program (:func:`noisycal_bayes.inference.nuts.sample_model`).

    The padded table, the prior and the start are traced inputs, so a second data set with the same numbers
    of groups and annotators (a simulation study, SBC) reuses the compiled program instead of paying NumPyro's
    re-compilation on every ``MCMC.run``.
    """
    from .mcmc import mcmc_diagnostics
    from .nuts import sample_model

    static = {"n_annotators": int(n_annotators), "n_groups": int(n_groups)}
    sites = _default_sites(model, n_groups, n_annotators) if init is None else init
    args = tuple(np.asarray(a) for a in data_args) + (prior.params(),)
    samples, stats = sample_model(_bound(model, static), args, {k: np.asarray(v, np.float64) for k, v in sites.items()},
                                  name=("alternative", model, tuple(sorted(static.items()))), n_chains=n_chains,
                                  n_warmup=n_warmup, n_draws=n_draws, seed=seed, target_accept=_TARGET_ACCEPT,
                                  max_tree_depth=_MAX_TREE_DEPTH, dense_mass=False)
    # R-hat and bulk ESS of every scalar component (varying ones only: ArviZ returns NaN for a constant).
    table = mcmc_diagnostics(samples, {k: tuple(f"d{i}" for i in range(v.ndim - 2)) for k, v in samples.items()}, {})
    diag = {"rhat_max": float(np.nanmax(table["r_hat"])) if int(n_chains) > 1 else np.nan,
            "ess_min": float(np.nanmin(table["ess_bulk"])), "divergences": int(stats["diverging"].sum())}
    return samples, diag, (int(n_chains), int(n_draws)), stats


#: Sites held at the mode by the Laplace draws of :func:`_map`.
_SCALE_SITES = ("tau_", "dependence")


def _potential(fn, args, kw, seed, init):
    """``(z0, potential_fn, postprocess_fn)`` of the MAP: the unconstrained start, the potential (negative log
    density) and the map back to the constrained sites, as ``numpyro.infer.util.initialize_model`` gives them.

    With a start (``init``, every sample site's constrained value: :func:`_init_values`) they are built from
    NumPyro's ``unconstrain_fn``, ``potential_energy`` and ``constrain_fn`` and only ever evaluated compiled:
    ``initialize_model`` checks the start by evaluating the potential and its gradient op by op, compiling each of
    its ~300 primitives separately, which took 52 of the EM route's 81 s Laplace fit on CIFAR-10N vehicle
    (docs/performance.md). The functions are the same (so is the optimum); without a start, ``initialize_model``."""
    import jax
    from numpyro.infer.util import constrain_fn, initialize_model, potential_energy, unconstrain_fn

    if init is None:
        info = initialize_model(jax.random.PRNGKey(seed), fn, model_args=args, model_kwargs=kw,
                                init_strategy=_init_strategy(init))
        return info.param_info.z, info.potential_fn, info.postprocess_fn
    start = {k: jax.numpy.asarray(v) for k, v in init.items()}
    z0 = jax.jit(lambda p: unconstrain_fn(fn, args, kw, p))(start)

    def potential(z):
        return potential_energy(fn, args, kw, z)

    def postprocess(z):
        return constrain_fn(fn, args, kw, z, return_deterministic=True)

    return z0, potential, postprocess


def _map(fn, args, kw, seed, init=None, n_laplace: int = 0):
    """Posterior mode in NumPyro's unconstrained space: L-BFGS on the potential (negative log density); with
    ``n_laplace > 0`` that many draws from the normal approximation at the mode (one chain)."""
    import jax
    from jax.flatten_util import ravel_pytree
    from scipy.optimize import minimize

    z0, potential_fn, postprocess_fn = _potential(fn, args, kw, seed, init)
    flat0, unravel = ravel_pytree(z0)
    vg = jax.jit(jax.value_and_grad(lambda x: potential_fn(unravel(x))))

    def obj(x):
        v, g = vg(np.asarray(x, np.float64))
        return float(v), np.asarray(g, np.float64)

    res = minimize(obj, np.asarray(flat0, np.float64), jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "ftol": 1e-12, "gtol": 1e-7})
    diag = {"success": bool(res.success), "log_density": -float(res.fun)}
    if n_laplace:
        x = np.asarray(res.x, np.float64)
        # The hierarchical scales (tau_*, dependence) stay at their mode: the posterior is far from normal along
        # them (a funnel), and given them it is close to normal (empirical-Bayes Laplace).
        free, _ = ravel_pytree({k: np.full(np.shape(v), not k.startswith(_SCALE_SITES)) for k, v in z0.items()})
        free = np.asarray(free, bool)
        # Hessian of the free block by central differences of the compiled gradient (2 calls per coordinate;
        # compiling jax.hessian of this model took longer than the whole fit).
        cols, step = [], 1e-5
        for i in np.flatnonzero(free):
            e = np.zeros_like(x)
            e[i] = step
            cols.append((obj(x + e)[1] - obj(x - e)[1])[free] / (2 * step))
        h = np.stack(cols, axis=1)
        lam, vec = np.linalg.eigh(0.5 * (h + h.T))
        diag["hessian_min_eig"] = float(lam.min())
        root = vec / np.sqrt(np.maximum(lam, 1e-8))  # conditional covariance = root root'
        eps = np.random.default_rng(seed).standard_normal((int(n_laplace), int(free.sum())))
        pts = np.repeat(x[None], int(n_laplace), axis=0)
        pts[:, free] += eps @ root.T
        constrained = jax.jit(jax.vmap(lambda v: postprocess_fn(unravel(v))))(jax.numpy.asarray(pts))
        samples = {k: np.asarray(v)[None] for k, v in constrained.items() if k in z0}
        return samples, diag, (1, int(n_laplace))
    constrained = jax.jit(lambda v: postprocess_fn(unravel(v)))(jax.numpy.asarray(res.x))
    samples = {k: np.asarray(v)[None, None] for k, v in constrained.items() if k in z0}
    return samples, diag, (1, 1)
