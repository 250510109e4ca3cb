"""Posterior sampling with NumPyro's NUTS, started from the EM / MAP fit.

Speed on this kind of machine (ENVIRONMENT.md): compilation, not sampling, dominates small fits. The
sampler here is compiled once per *shape* (model, numbers of annotators and groups, padded pattern table,
chains, warm-up and draws, precision) and cached for the life of the process (see
``noisycal_bayes.inference._sampler``): the data and the prior are traced inputs, so a second data set
of the same shape, or another prior, reuses the compiled program.

Across processes, JAX's persistent compilation cache removes most of the first compilation too. It
writes to disk, so it is off unless you opt in, before the first fit::

    import jax
    jax.config.update("jax_compilation_cache_dir", "/path/to/cache")   # or JAX_COMPILATION_CACHE_DIR=...
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)

or call :func:`noisycal_bayes.inference.enable_compilation_cache`.

Chains run ``"parallel"`` (one per device at a time) when JAX has two or more devices, which a library
cannot arrange after JAX has started: a script or notebook calls
:func:`noisycal_bayes.inference.configure_jax` first thing (one device per core, and small loops compiled
whole, which makes NUTS on compressed counts about 1.6x faster). Otherwise ``"sequential"``.
With the compilation cache on, the sampler is also saved across processes (``_sampler.SavedProgram``).

K classes (:func:`fit_nuts_multiclass`): the same compiled driver samples the K-class models
(:data:`~noisycal_bayes.models.MULTICLASS_MODELS`, by default in the coordinates of :mod:`noisycal_bayes.models.log_ratio`)
from the MAP-EM fit, on compressed (group, gold, response pattern) rows or on responses
(:func:`~noisycal_bayes.models.inputs.build_class_tables`), and returns a
:class:`~noisycal_bayes.models.result.MulticlassPosterior`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import warnings

import jax
import numpy as np

from .._validation import check_positive_int
from ..core import x64
from ..core.em import expected_class_counts
from ..core.starts import diagonally_dominant, orientation_message
from ..data.design import check_design, check_prevalence_spread
from .mcmc import check_mcmc, mcmc_diagnostics
from ..models.log_ratio import LogRatioScaling, insert_diagonal_zero, log_ratio_point, log_ratio_scaling
from ..core.likelihood import softmax_rows
from ..models.priors import (DEFAULT_MULTICLASS_PRIOR, MulticlassPriorParams, check_class_prior, check_prior,
                             prior_pull_note)
from ._common import (ARG_CENTERING, NOT_DOMINANT, bound_class_model, bound_log_ratio, bound_model, check_class_model,
                      check_pooling, class_door, class_draws, class_start_from_init, class_start_sites, pooled_bound, pooled_derived,
                      pooled_fit_inputs, pooled_start,
                      population_summary, sample_sites, with_derived, channel_or_none, flag_annotators)
from ..models.inputs import (GROUPED_MODELS, build_class_tables, check_class_data, check_data, check_model,
                             prepare_inputs, resolve_assignment, table_args)
from ._sampler import NutsProgram, chain_keys, choose_chain_method, chunk_size, get_program, parallel_width
from .em import em_starts, start_point
from .map import _class_groups, _map_fit, pooled_data_inputs
from ..models.pooled import posterior_scales, precondition_start, unprecondition_draws
from ..models.result import FitResult, MulticlassPosterior, channel_from, point_dict
from ..warnings import IdentifiabilityWarning, PriorWarning
from ..data.binning import Binning
from .alternatives import GROUP_CHANNEL_MODELS, registered_fit

PRECISIONS = ("float64", "float32")
#: ``precision`` of :func:`fit_nuts_multiclass` (``"auto"``: float32 on compressed patterns, float64 on responses).
CLASS_PRECISIONS = ("auto", "float32", "float64")
PARAMETRISATIONS = ("log_ratio", "simplex")
#: ``population`` of :func:`fit_nuts_multiclass` (``model="ibcc"``): plugged in from the pooled EM, or sampled.
IBCC_POPULATIONS = ("empirical", "learned")


def _start_point(data, inputs, model, seed):
    """Where the chains start: the maximum-likelihood EM estimate (see ``em.start_point``), else a random start."""
    point = start_point(data, inputs, model, seed)
    if point is not None:
        return point, "em"
    fpr, tpr, prev = em_starts(inputs.n_annotators, inputs.n_groups, 1, seed)
    prev = prev[0, 0] if model == "dawid_skene" else np.sort(prev[0])
    return point_dict(model, fpr[0], tpr[0], prev, slope=1.0, intercept=0.0), "random"


@class_door("fit_nuts_multiclass", passed=("model", "n_chains", "n_warmup", "seed", "prior", "progress_bar",
                                           "target_accept", "max_tree_depth", "dense_mass", "chain_method", "precision"),
            renamed={"n_draws": "n_samples"})
def fit_nuts(data, *, model: str = "grouped", groups=Binning.equal_mass(5), n_chains: int = 4, n_warmup: int = 1000, n_draws: int = 1000,
             seed: int = 0, prior=None, progress_bar: bool = True, target_accept: float = 0.8,
             max_tree_depth: int = 10, dense_mass: bool | None = None, chain_method: str | None = None,
             precision: str = "float64", compress: bool = True, pooling: str = "none") -> FitResult:
    """Posterior draws of a channel model by NumPyro's NUTS.

    K classes: data with more than two classes go to :func:`fit_nuts_multiclass` with its own defaults (2 x 500
    draws) and the sampler options and ``model``, ``groups`` (a group per item), ``prior`` the caller set
    (``n_draws`` as its ``n_samples``; ``compress`` and ``pooling`` are binary: setting one is an error).

    Parameters
    ----------
    data, model, groups
        As in :func:`~noisycal_bayes.inference.fit_map` (``groups`` ignored by ``"dawid_skene"`` and ``"platt"``),
        including the richer models ``"score_dependent"`` and ``"correlated"`` (channels per score group), sampled
        by :func:`~noisycal_bayes.inference.alternatives.fit_alternative` and returned by
        :func:`~noisycal_bayes.inference.alternatives.registered_fit` (their ``channel`` is the item-weighted
        average of the group channels; read ``fit.group_channels``); the sampler options below except ``n_chains``,
        ``n_warmup``, ``n_draws``, ``seed``, ``prior`` cannot be set for them.
    n_chains, n_warmup, n_draws : int, defaults 4, 1000, 1000
    seed : int, default 0
        Seeds the EM start, and through ``numpy.random.SeedSequence(seed)`` one JAX key per chain (its
        start jitter and its sampler); a non-negative integer.
    prior : None or Prior
        None means the default :class:`~noisycal_bayes.models.Prior` (uniform over oriented channels,
        uniform prevalences; see its Notes).
    progress_bar : bool, default True
    target_accept : float, default 0.8
        Target acceptance probability of step-size adaptation; raise it (0.9-0.99) after divergences.
    max_tree_depth : int, default 10
    dense_mass : bool or None, default None
        None: True with ``pooling="none"``, False with ``pooling="partial"`` (2 J + groups parameters: a dense
        matrix of a few hundred annotators is not learnt in a normal warm-up, and measured on rte it ran every
        transition to the maximum tree depth where the diagonal one needed 31 leapfrog steps). True: adapt a dense mass matrix (the posterior covariance over all parameters) during warm-up instead of a
        diagonal one. These models have few parameters (2J + groups) that are correlated (the channels with
        the prevalences), and a dense matrix measured 1.6x the bulk ESS per draw at about 10% more time.
    chain_method : {None, "parallel", "sequential", "vectorized"}
        None: ``"parallel"`` when JAX has two or more devices (:func:`configure_jax`, as the command line
        does; one chain runs on each device, in rounds of ``n_devices`` chains), else ``"sequential"``.
    precision : {"float64", "float32"}, default "float64"
        float64 is the default because a per-item likelihood loses precision in float32 at large n
        (ENVIRONMENT.md); the compressed likelihood is fine in either.
    compress : bool, default True
        Grouped models: evaluate the likelihood on compressed (group, pattern) counts (cost independent
        of the number of items). False evaluates it item by item (for validation and benchmarks).
        Ignored with ``pooling="partial"``, whose likelihood is always a segment sum over responses.
    pooling : {"none", "partial"}, default "none"
        ``"none"``: each annotator's channel has its own prior and every gap is > 0 (the paper's model, for
        a few trusted annotators who label many items). ``"partial"``: channels drawn from a population
        whose median fpr / tpr and spread are learned (:mod:`noisycal_bayes.models.pooled`), orientation
        fixed at the crowd's level (population median tpr > median fpr), so spammers (gap ~ 0) and
        adversaries (gap < 0) are estimated, not rejected; for crowds of many sparse annotators. The
        likelihood is then evaluated from ``data.responses`` by segment sums (no items x annotators
        array), gold labels (``data.gold``) enter as observed clean labels, and the chains start from a
        bounded sparse-EM estimate, each site sampled in coordinates shifted to that start and scaled by a
        normal approximation of its posterior sd (:func:`noisycal_bayes.models.pooled.posterior_scales`; the
        same model, a 3x cheaper warm-up). ``details["population"]`` holds the population's median fpr / tpr
        with 90% intervals and the range of the middle 90% of its annotators;
        ``details["population_draws"]`` the draws of ``mu_fpr``, ``mean_gap``, ``sigma_fpr``,
        ``sigma_tpr``, ``median_fpr``, ``median_tpr``.

    Returns
    -------
    FitResult
        ``method="nuts"``; ``draws`` with dims ``(chain, draw, annotator | group | bin)``, ``channel``
        the posterior mean, ``point`` the EM/MAP start, ``diagnostics`` (R-hat, bulk/tail ESS),
        ``n_divergent``, ``sample_stats``; ``to_arviz()`` and ``summary()``.

    Raises
    ------
    ValueError
        Bad data, model, groups, prior or settings; one annotator; ``chain_method="parallel"`` without
        enough devices.

    Warns
    -----
    IdentifiabilityWarning
        Two annotators with the marginal model; two annotators and group prevalences that barely differ.
    ConvergenceWarning
        Divergent transitions, R-hat above 1.01, bulk or tail ESS below 100 per chain, or transitions
        that hit the maximum tree depth; each message says what to do.

    Notes
    -----
    Model and priors: DESIGN §4 (paper §4 and Appendix F.1 for the likelihood). Chains start at the
    maximum-likelihood EM estimate (Platt: EM channels on 5 score groups and a line through the group
    prevalences) plus uniform jitter of +-0.5 in unconstrained coordinates. Diagnostics follow Vehtari et al. (2021).

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=0)
    >>> fit = fit_nuts(sim.data, n_chains=2, n_warmup=200, n_draws=200, progress_bar=False)  # doctest: +SKIP
    >>> fit.draws["gap"].shape  # doctest: +SKIP
    (2, 200, 3)
    """
    func = "fit_nuts"
    if model in GROUP_CHANNEL_MODELS:
        _check_registered(func, target_accept=target_accept, max_tree_depth=max_tree_depth, dense_mass=dense_mass,
                          chain_method=chain_method, precision=precision, compress=compress, pooling=pooling)
        return registered_fit(data, model, method="nuts", groups=groups, n_chains=n_chains, n_warmup=n_warmup,
                              n_draws=n_draws, seed=seed, prior=prior, func=func)
    data = check_data(data, func)
    model = check_model(model, func)
    pooling = check_pooling(pooling, model, func)
    if dense_mass is None:
        dense_mass = pooling == "none"
    opts = _check_settings(model, n_chains=n_chains, n_warmup=n_warmup, n_draws=n_draws, seed=seed,
                           target_accept=target_accept, max_tree_depth=max_tree_depth, dense_mass=dense_mass,
                           chain_method=chain_method, precision=precision, compress=compress)
    prior = check_prior(prior)
    assignment = resolve_assignment(data, model, groups, func)
    if pooling == "partial":
        return _fit_nuts_pooled(data, model, assignment, prior, opts, progress_bar=progress_bar)
    design = list(check_design(data, model, n_groups=assignment.n_groups, func=func))
    notes = list(design)
    inputs = prepare_inputs(data, model, assignment, compress=compress, func=func)
    # Compressed inputs for the EM start even when sampling per item (EM costs the same either way).
    start_inputs = inputs if (compress or model == "platt") else prepare_inputs(data, model, assignment)
    point, start_kind = _start_point(data, start_inputs, model, opts["seed"])
    if model != "platt":
        notes += check_prevalence_spread(point["prevalence"], data.n_annotators, model, func=func)
    draws, stats = _sample(model, inputs, point, prior, opts, progress_bar=progress_bar)
    ids = list(data.annotator_ids)
    n_divergent = int(stats["diverging"].sum())
    # A trajectory of depth d has 2**d - 1 leapfrog steps: reaching that count at the maximum depth means the
    # doubling was stopped by the cap, not by the U-turn criterion.
    n_max_depth = int((stats["n_steps"] >= 2 ** opts["max_tree_depth"] - 1).sum())
    result = FitResult(model=model, method="nuts", channel=None, point=point, groups=assignment, inputs=inputs,
                       prior=prior, annotator_ids=tuple(ids), draws=draws, sample_stats=stats,
                       n_divergent=n_divergent, identified=not design, reason=design[0] if design else "",
                       settings=dict(opts, start=start_kind), details={"labels": data.labels, "scores": data.scores})
    table = mcmc_diagnostics(draws, result.dims, result.coords)
    notes += check_mcmc(table, n_chains=opts["n_chains"], n_divergent=n_divergent, n_draws=opts["n_draws"],
                        n_max_depth=n_max_depth, max_tree_depth=opts["max_tree_depth"], func=func)
    fpr_mean, tpr_mean = draws["fpr"].mean(axis=(0, 1)), draws["tpr"].mean(axis=(0, 1))
    converged = not any(("R-hat" in m or "divergent" in m) for m in notes)
    return dataclasses.replace(result, channel=channel_from(fpr_mean, tpr_mean, ids), diagnostics=table,
                               warnings=tuple(notes), converged=converged)


#: Sampler options of :func:`fit_nuts` that the registered richer models do not take (their sampler is
#: :func:`~noisycal_bayes.inference.alternatives.fit_alternative`'s), with the values that mean "not set".
_REGISTERED_DEFAULTS = {"target_accept": 0.8, "max_tree_depth": 10, "dense_mass": None, "chain_method": None,
                        "precision": "float64", "compress": True, "pooling": "none"}


def _check_registered(func, **given):
    """ValueError naming the options set for a registered richer model that its sampler does not take."""
    bad = [k for k, v in given.items() if v != _REGISTERED_DEFAULTS[k]]
    if bad:
        raise ValueError(f"{func}: {', '.join(bad)} cannot be set for the models with channels per score group "
                         f"({list(GROUP_CHANNEL_MODELS)}): they are sampled by "
                         "inference.alternatives.fit_alternative (diagonal mass matrix, target acceptance 0.9, "
                         "maximum tree depth 10, float64, compressed rows, no annotator pooling).")


def _check_settings(model, *, n_chains, n_warmup, n_draws, seed, target_accept, max_tree_depth, dense_mass,
                    chain_method, precision, compress) -> dict:
    """The sampler settings validated, in the order and with the names ``FitResult.settings`` records."""
    out = dict(n_chains=check_positive_int(n_chains, name="n_chains"),
               n_warmup=check_positive_int(n_warmup, name="n_warmup", minimum=0),
               n_draws=check_positive_int(n_draws, name="n_draws"),
               seed=check_positive_int(seed, name="seed", minimum=0))
    max_tree_depth = check_positive_int(max_tree_depth, name="max_tree_depth")
    target_accept = float(target_accept)
    if not 0 < target_accept < 1:
        raise ValueError(f"`target_accept` must lie strictly between 0 and 1; got {target_accept}.")
    if precision not in PRECISIONS:
        raise ValueError(f"`precision` must be one of {PRECISIONS}; got {precision!r}.")
    if not compress and model not in GROUPED_MODELS:
        raise ValueError("`compress=False` applies to grouped models only; the Platt model is always per item.")
    out.update(chain_method=choose_chain_method(out["n_chains"], chain_method), target_accept=target_accept,
               max_tree_depth=max_tree_depth, dense_mass=bool(dense_mass), precision=precision, compress=compress)
    return out



def _sample(model, inputs, point, prior, opts, *, progress_bar):
    """Run the (cached) NUTS program from ``point``; returns ``(draws, sample_stats)`` as NumPy arrays."""
    static = inputs.static_kwargs()
    use_x64 = opts["precision"] == "float64"
    # The histogram model is the grouped model with another dimension name: same compiled program.
    program_model = "grouped" if model == "histogram" else model
    n_warmup, chain_method = opts["n_warmup"], opts["chain_method"]
    chunk = chunk_size(n_warmup, opts["n_draws"])
    # Sequential chains reuse single-chain functions: the number of chains and draws is not compiled in.
    width = parallel_width(opts["n_chains"]) if chain_method == "parallel" else 1
    layout = {"sequential": None, "parallel": width}.get(chain_method, opts["n_chains"])
    key = ("nuts", program_model, tuple(sorted(static.items())), layout, n_warmup, chunk, chain_method,
           opts["target_accept"], opts["max_tree_depth"], opts["dense_mass"], opts["precision"])

    def build():
        return NutsProgram(bound_model(program_model, static), n_warmup=n_warmup, chunk=chunk,
                           chain_method=chain_method, target_accept=opts["target_accept"],
                           max_tree_depth=opts["max_tree_depth"], dense_mass=opts["dense_mass"], width=width, key=key)

    with (x64() if use_x64 else _null()):
        program = get_program(key, build)
        dtype = np.float64 if use_x64 else np.float32
        # NumPy arrays in, so that no eager JAX operation compiles a program of its own (each would cost a
        # trace and a cache lookup in every new process).
        args = tuple(np.asarray(a, dtype=dtype) if np.asarray(a).dtype.kind == "f" else np.asarray(a)
                     for a in inputs.model_args())
        prior_params = jax.tree.map(lambda x: np.asarray(x, dtype=dtype), prior.params())
        sites = jax.tree.map(lambda x: np.asarray(x, dtype=dtype), sample_sites(model, point, inputs.n_groups))
        sites, stats = program.run(chain_keys(opts["seed"], opts["n_chains"]), sites, args + (prior_params,),
                                   n_draws=opts["n_draws"], progress_bar=progress_bar, desc=f"NUTS {model}")
    # Constrained sample sites (chain, draw, ...); the deterministic sites (tpr, gap, prevalence of the monotone
    # model) in NumPy.
    draws = with_derived(model, {k: np.asarray(v) for k, v in sites.items()})
    order = ["fpr", "tpr", "gap", "u", "prevalence", "increments", "slope", "intercept"]
    return {k: draws[k] for k in order if k in draws}, stats


def sample_model(model_fn, args, start, *, name, n_chains: int, n_warmup: int, n_draws: int, seed: int,
                 target_accept: float = 0.8, max_tree_depth: int = 10, dense_mass: bool = False):
    """NUTS draws of any NumPyro model function by the cached compiled program ``fit_nuts`` uses.

    For models outside :data:`~noisycal_bayes.inference.MODEL_NAMES` (the richer channel models of
    :mod:`noisycal_bayes.diagnostics.alternatives`): the program is compiled once per ``name``, argument
    shapes and settings and reused, with the data, the prior and the start as traced inputs.

    Parameters
    ----------
    model_fn : callable
        ``model_fn(*args)``: a NumPyro model with its static sizes bound (traced arrays only in ``args``).
    args : tuple of arrays and pytrees of arrays
        Data arguments, typically ending with ``Prior.params()``.
    start : dict of name -> array
        Constrained value of every sample site; each chain starts there, jittered by +-0.5 in unconstrained
        coordinates.
    name : hashable
        Identifies ``model_fn`` and its static sizes in the program cache (two different functions must not
        share a name).
    n_chains, n_warmup, n_draws, seed : int
        Sequential chains; ``seed`` gives one key per chain as in :func:`fit_nuts`.
    target_accept, max_tree_depth, dense_mass
        NUTS settings, as in :func:`fit_nuts`.

    Returns
    -------
    draws : dict of name -> ndarray of shape (n_chains, n_draws, ...)
        Constrained sample sites.
    stats : dict of name -> ndarray of shape (n_chains, n_draws)
        ``diverging``, ``n_steps``, ``acceptance_rate``, ``energy``, ``lp``, ``step_size``, ``tree_depth``.
    """
    n_chains = check_positive_int(n_chains, name="n_chains")
    n_warmup = check_positive_int(n_warmup, name="n_warmup", minimum=0)
    n_draws = check_positive_int(n_draws, name="n_draws")
    chunk = chunk_size(n_warmup, n_draws)
    # The saved program is specialised to the argument shapes and dtypes: they are part of the key.
    shapes = tuple((np.shape(a), np.asarray(a).dtype.str) for a in jax.tree.leaves(args))
    key = ("nuts-model", name, shapes, n_warmup, chunk, "sequential", float(target_accept), int(max_tree_depth),
           bool(dense_mass), bool(jax.config.jax_enable_x64))

    def build():
        return NutsProgram(model_fn, n_warmup=n_warmup, chunk=chunk, chain_method="sequential",
                           target_accept=float(target_accept), max_tree_depth=int(max_tree_depth),
                           dense_mass=bool(dense_mass), key=key)

    program = get_program(key, build)
    sites, stats = program.run(chain_keys(check_positive_int(seed, name="seed", minimum=0), n_chains),
                               {k: np.asarray(v) for k, v in start.items()}, args, n_draws=n_draws)
    return {k: np.asarray(v) for k, v in sites.items()}, stats


def _fit_nuts_pooled(data, model, assignment, prior, opts, *, progress_bar, precondition: bool = True):
    """``fit_nuts`` with partially pooled channels (``pooling="partial"``)."""
    func = "fit_nuts"
    # Partial centring per annotator from the start's soft counts (_common.partial_centering): same model.
    args, static = pooled_data_inputs(data, model, assignment, func, centered=True)
    start = pooled_start(args, static)
    # Sites sampled in coordinates scaled by their approximate posterior sd (models.pooled.posterior_scales): the
    # same model, and a warm-up whose first windows (identity mass matrix) are no longer 10x slower than sampling.
    precond = _pooled_precond(args, static, start, prior) if precondition else None
    use_x64 = opts["precision"] == "float64"
    n_warmup, chain_method = opts["n_warmup"], opts["chain_method"]
    chunk = chunk_size(n_warmup, opts["n_draws"])
    width = parallel_width(opts["n_chains"]) if chain_method == "parallel" else 1
    layout = {"sequential": None, "parallel": width}.get(chain_method, opts["n_chains"])
    # The number of responses is part of the key: the saved program is specialised to the argument shapes.
    key = ("nuts-pooled", precond is not None, tuple(sorted(static.items())), int(args[0].shape[0]), layout,
           n_warmup, chunk, chain_method, opts["target_accept"], opts["max_tree_depth"], opts["dense_mass"],
           opts["precision"])

    def build():
        return NutsProgram(pooled_bound(static), n_warmup=n_warmup, chunk=chunk, chain_method=chain_method,
                           target_accept=opts["target_accept"], max_tree_depth=opts["max_tree_depth"],
                           dense_mass=opts["dense_mass"], width=width, key=key)

    dtype = np.float64 if use_x64 else np.float32
    with (x64() if use_x64 else _null()):
        program = get_program(key, build)
        run_args = tuple(np.asarray(a, dtype=dtype) if a.dtype.kind == "f" else a for a in args)
        if precond is not None:
            run_args += (jax.tree.map(lambda x: np.asarray(x, dtype=dtype), precond),)
        prior_params = jax.tree.map(lambda x: np.asarray(x, dtype=dtype), prior.params())
        sites = start if precond is None else precondition_start(start, precond)
        sites = {k: np.asarray(v, dtype=dtype) for k, v in sites.items()}
        got, stats = program.run(chain_keys(opts["seed"], opts["n_chains"]), sites, run_args + (prior_params,),
                                 n_draws=opts["n_draws"], progress_bar=progress_bar, desc=f"NUTS pooled {model}")
    got = {k: np.asarray(v) for k, v in got.items()}
    draws, population = pooled_derived(got if precond is None else unprecondition_draws(got, precond),
                                       args[ARG_CENTERING])
    start_draws, _ = pooled_derived(start, args[ARG_CENTERING])
    point = point_dict(model, start_draws["fpr"], start_draws["tpr"], start_draws.get("prevalence"),
                       slope=start.get("slope"), intercept=start.get("intercept"))
    if model == "monotone":
        point = dict(point, increments=start["increments"])
    ids = list(data.annotator_ids)
    n_divergent = int(stats["diverging"].sum())
    n_max_depth = int((stats["n_steps"] >= 2 ** opts["max_tree_depth"] - 1).sum())
    # Downstream code (log-likelihood per item, clean-label probabilities) reads the non-pooled inputs of the
    # same model with the pooled draws of fpr, u and prevalence: the same likelihood, with the gold labels.
    inputs = pooled_fit_inputs(data, model, assignment)  # gold labels attached (observed latent labels)
    result = FitResult(model=model, method="nuts", channel=None, point=point, groups=assignment, inputs=inputs,
                       prior=prior, annotator_ids=tuple(ids), draws=draws, sample_stats=stats,
                       n_divergent=n_divergent, identified=True, reason="",
                       settings=dict(opts, start="sparse-em", pooling="partial", likelihood="sparse responses",
                                     compress=False),
                       # Repeated labels have no dense matrix: the responses are in `inputs` (sparse).
                       details={"labels": None if data.has_repeats else data.labels, "scores": data.scores,
                                "population": population_summary(population),
                                "population_draws": population, "n_max_depth": n_max_depth,
                                "n_gold": 0 if data.gold is None else int((data.gold >= 0).sum())})
    hyper = {k: population[k] for k in ("mu_fpr", "mean_gap", "sigma_fpr", "sigma_tpr")}
    table = mcmc_diagnostics({**draws, **hyper}, result.dims, result.coords)
    notes = check_mcmc(table, n_chains=opts["n_chains"], n_divergent=n_divergent, n_draws=opts["n_draws"],
                       n_max_depth=n_max_depth, max_tree_depth=opts["max_tree_depth"], func=func, stacklevel=4)
    converged = not any(("R-hat" in m or "divergent" in m) for m in notes)
    channel = channel_or_none(draws["fpr"].mean(axis=(0, 1)), draws["tpr"].mean(axis=(0, 1)), ids)
    return dataclasses.replace(result, channel=channel, diagnostics=table, warnings=tuple(notes), converged=converged,
                               details=dict(result.details, flagged=flag_annotators(draws["gap"], ids)))


def _pooled_precond(args, static, start, prior) -> dict:
    """``precond`` of the pooled sampler (:func:`~noisycal_bayes.models.pooled.posterior_scales`) from the
    start's EM: soft counts per annotator and class, and the items' posteriors."""
    from ._common import _start_em

    _, _, _, post = _start_em(args, static)
    item, annotator = args[0], args[1]
    n_ann = static["n_annotators"]
    n1 = np.bincount(annotator, weights=post[item], minlength=n_ann)
    n0 = np.bincount(annotator, minlength=n_ann) - n1
    return posterior_scales(start, args[ARG_CENTERING], n0=n0, n1=n1, item_posterior=post, item_group=args[3],
                            n_groups=static["n_groups"], kind=static["kind"], prior=prior, logit_score=args[5])


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ------------------------------------------------------------------------------------------------ K classes
def fit_nuts_multiclass(data, *, model: str = "grouped", groups=None, n_chains: int = 2, n_warmup: int = 500,
                        n_samples: int = 500, seed: int = 0, init=None, prior=None, path: str = "auto",
                        target_accept: float = 0.8, max_tree_depth: int = 10, dense_mass: bool = False,
                        chain_method: str | None = None, precision: str = "auto",
                        parametrisation: str = "log_ratio", population: str = "empirical",
                        progress_bar: bool = False) -> MulticlassPosterior:
    """Posterior draws of a K-class channel model by NumPyro's NUTS.

    Parameters
    ----------
    data : MulticlassAnnotationSet
        Or any object with ``responses``, ``n_items``, ``n_annotators``, ``n_classes``, ``probs``, ``gold``,
        ``classes``. Gold labels (``gold >= 0``) enter as observed clean labels.
    model : {"grouped", "dawid_skene", "pooled", "ibcc"}, default "grouped"
        :mod:`noisycal_bayes.models.dawid_skene` ("K classes"): Dirichlet confusion rows with a prevalence per score group,
        one prevalence, or confusion matrices pooled around a population (for many annotators; prevalence
        per group). ``"ibcc"``: Bayesian Dawid-Skene with Dirichlet population rows ``C[j, y] ~ Dirichlet(s_y m_y)``
        (:mod:`noisycal_bayes.models.ibcc`; one prevalence, ``groups`` ignored), started from and (by default) with the
        population of ``fit_em_multiclass(model="pooled")``: the crowd model of ``evaluate_multiclass(method="nuts")``.
    groups : int array of shape (n_items,) or None
        As in :func:`~noisycal_bayes.inference.fit_map_multiclass`; ignored by ``"dawid_skene"``.
    n_chains, n_warmup, n_samples : int, defaults 2, 500, 500
        Warm-up from the MAP start is short in the log-ratio coordinates, so few warm-up steps serve; R-hat on
        CIFAR-10N's shape: docs/performance.md ("K classes: NUTS on the CIFAR-10N shape").
    seed : int, default 0
        One JAX key per chain through ``numpy.random.SeedSequence(seed)``.
    init : None, ndarray of shape (J, K, K), or a fit with ``confusion`` (and ``prevalence`` (G, K))
        Where the chains start (e.g. an EM fit). None: the MAP-EM fit of :func:`~noisycal_bayes.inference.fit_map_multiclass` for the
        grouped model (marginal model: of itself), to ``tol=1e-6``; on compressed rows its iterations run in
        NumPy (the same updates; no JAX loop to compile). It must be diagonally dominant on average (orientation).
    prior : MulticlassPrior or None
    path : {"auto", "patterns", "sparse"}
        Likelihood on compressed pattern counts or on responses (module docstring).
    target_accept : float, default 0.8
    max_tree_depth : int, default 10
    dense_mass : bool, default False
        Diagonal mass matrix by default: a K = 10 model has hundreds of parameters, too many for a dense
        matrix to be learnt in a normal warm-up.
    chain_method : {None, "parallel", "sequential", "vectorized"}
        None: parallel when JAX has two or more devices (:func:`~noisycal_bayes.inference.configure_jax`).
    precision : {"auto", "float32", "float64"}, default "auto"
        Floating-point type of the sampler. ``"auto"``: float32 on the compressed pattern path (a sum over a
        few thousand rows with counts, where float32 is precise enough and faster per leapfrog step), float64 on
        the sparse path (a sum over every item, which loses precision in float32 at large n). The MAP-EM start
        is always computed in float64. Speed: docs/performance.md ("K classes: NUTS on the CIFAR-10N shape").
    parametrisation : {"log_ratio", "simplex"}, default "log_ratio"
        Coordinates of the sampler for the ``"grouped"`` and ``"dawid_skene"`` models (the model, its prior and
        posterior are the same either way). ``"log_ratio"``: each confusion row's log-odds against its diagonal
        and each group's log-odds against its largest class, shifted and scaled so that the conjugate
        Dirichlet posterior given the start's expected counts is standard normal
        (:func:`~noisycal_bayes.models.log_ratio.grouped_multiclass_log_ratio`): no stick-breaking transforms
        or Dirichlet terms to evaluate per gradient, and the chains start near the bulk on a near-unit scale,
        so they need no long warm-up (cost per gradient: docs/performance.md, "K classes: NUTS on the CIFAR-10N
        shape"). ``"simplex"``: NumPyro's
        stick-breaking coordinates of the Dirichlet sites
        (:func:`~noisycal_bayes.models.dawid_skene.grouped_multiclass`), the earlier default. The pooled
        model has its own log-odds coordinates and ignores this; ``"ibcc"`` samples its confusion rows in Gamma-quantile
        coordinates (:mod:`noisycal_bayes.models.ibcc`) and its prevalence in log-ratio coordinates.
    population : {"empirical", "learned"}, default "empirical"
        ``"ibcc"`` only. ``"empirical"``: the population ``s_y m_y`` of the pooled EM plugged in (empirical Bayes);
        ``"learned"``: sampled too (hierarchical IBCC, :mod:`noisycal_bayes.models.ibcc`). Measured on five real crowds
        in docs/crowds.md ("Bayesian route").
    progress_bar : bool, default False

    Returns
    -------
    MulticlassPosterior

    Raises
    ------
    ValueError
        Bad data, model, groups, prior, path, init or sampler settings; an ``init`` whose average confusion is
        not diagonally dominant.

    Warns
    -----
    ConvergenceWarning
        Divergences, R-hat above 1.01, low ESS, saturated tree depth (:func:`~noisycal_bayes.inference.check_mcmc`).
    IdentifiabilityWarning
        Some draws' average confusion is not diagonally dominant (label switching or a crowd that confuses
        classes systematically).

    Notes
    -----
    The orientation constraint and the models are documented in :mod:`noisycal_bayes.models.dawid_skene` ("K classes").
    ``"simplex"`` and the pooled model: chains start at the MAP-EM point plus uniform jitter of +-0.5 in
    unconstrained coordinates. ``"log_ratio"``: at the mean of the Dirichlet approximation given the expected
    counts at the MAP-EM point (u = 0) plus the same jitter, i.e. +-0.5 approximate posterior standard
    deviations.

    Examples
    --------
    >>> fit = fit_nuts_multiclass(data, groups=groups)  # doctest: +SKIP
    >>> fit.confusion.shape  # doctest: +SKIP
    (1000, 3, 10, 10)
    """
    func = "fit_nuts_multiclass"
    model = check_class_model(model, func)
    prior = check_class_prior(prior, func)
    n_chains = check_positive_int(n_chains, name="n_chains")
    n_warmup = check_positive_int(n_warmup, name="n_warmup", minimum=0)
    n_samples = check_positive_int(n_samples, name="n_samples")
    seed = check_positive_int(seed, name="seed", minimum=0)
    max_tree_depth = check_positive_int(max_tree_depth, name="max_tree_depth")
    target_accept = float(target_accept)
    if not 0 < target_accept < 1:
        raise ValueError(f"{func}: `target_accept` must lie strictly between 0 and 1; got {target_accept}.")
    chain_method = choose_chain_method(n_chains, chain_method)
    if precision not in CLASS_PRECISIONS:
        raise ValueError(f"{func}: `precision` must be one of {list(CLASS_PRECISIONS)}; got {precision!r}.")
    if parametrisation not in PARAMETRISATIONS:
        raise ValueError(f"{func}: `parametrisation` must be one of {list(PARAMETRISATIONS)}; got "
                         f"{parametrisation!r}.")
    if population not in IBCC_POPULATIONS:
        raise ValueError(f"{func}: `population` must be one of {list(IBCC_POPULATIONS)}; got {population!r}.")
    item, ann, lab, gold = check_class_data(data, func)
    if model == "ibcc":
        return _fit_nuts_ibcc(data, init=init, prior=prior, n_chains=n_chains, n_warmup=n_warmup, n_samples=n_samples,
                              seed=seed, target_accept=target_accept, max_tree_depth=max_tree_depth,
                              dense_mass=dense_mass, chain_method=chain_method, learn=population == "learned",
                              progress_bar=progress_bar, func=func)
    index, n_groups = _class_groups(data, model, groups, func)
    sizes = dict(n_annotators=int(data.n_annotators), n_classes=int(data.n_classes), n_groups=n_groups)
    table, sparse, used = build_class_tables(item, ann, lab, gold, index, n_items=int(data.n_items), path=path,
                                        func=func, **sizes)
    notes = []
    start_fit = None
    if init is None:
        map_prior = prior if min(prior.diagonal, prior.off_diagonal, prior.prevalence) >= 1 else DEFAULT_MULTICLASS_PRIOR
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # Compressed rows: EM in NumPy (no JAX loop to compile for a start; same iterations as fit_map_multiclass).
            start_fit = _map_fit(data, table, used, index, "dawid_skene" if model == "dawid_skene" else "grouped",
                                 map_prior, sizes, max_iter=5000, tol=1e-6, func=func,
                                 engine="numpy" if used == "patterns" else "jax")
        conf0, prev0 = start_fit.confusion, start_fit.prevalence
    else:
        conf0, prev0 = class_start_from_init(init, table, prior, sizes, func)
    if not diagonally_dominant(conf0[None])[0]:
        raise ValueError(NOT_DOMINANT.format(func=func))
    log_ratio = parametrisation == "log_ratio" and model != "pooled"
    scaling = None
    counts = expected_class_counts(table, conf0, prev0, n_groups) if model != "pooled" else None
    if counts is not None:
        pull = prior_pull_note(prior, counts[0], func)
        if pull:
            notes.append(pull)
            warnings.warn(pull, PriorWarning, stacklevel=2)
    if log_ratio:
        scaling = log_ratio_scaling(*counts, prior)
        sites = {"confusion_u": np.zeros(scaling.conf_scale.shape), "prevalence_u": np.zeros(scaling.prev_scale.shape)}
    else:
        sites = class_start_sites(model, conf0, prev0, n_groups)

    chunk = chunk_size(n_warmup, n_samples)
    width = parallel_width(n_chains) if chain_method == "parallel" else 1
    layout = {"sequential": None, "parallel": width}.get(chain_method, n_chains)
    if precision == "auto":
        precision = "float32" if used == "patterns" else "float64"
    dtype = np.float64 if precision == "float64" else np.float32
    # NumPy arrays of the sampler's float type in: no eager JAX conversion (each would compile a program).
    args = tuple(a.astype(dtype) if a.dtype.kind == "f" else a for a in table_args(table))
    if log_ratio:
        args += (LogRatioScaling(*(np.asarray(a, dtype) if a.dtype.kind == "f" else a for a in scaling)),)
    sites = {k_: np.asarray(v, dtype) for k_, v in sites.items()}
    static = dict(sizes) if model != "dawid_skene" else dict(sizes, n_groups=1)
    key = ("nuts-multiclass", "grouped-log-ratio" if log_ratio else model, type(table).__name__,
           tuple(sorted(static.items())), tuple(np.shape(a) for a in args[:len(table)]), layout, n_warmup, chunk,
           chain_method, target_accept, max_tree_depth, bool(dense_mass), precision)
    model_fn = bound_log_ratio(type(table), static) if log_ratio else bound_class_model(model, type(table), static)

    def build():
        return NutsProgram(model_fn, n_warmup=n_warmup, chunk=chunk,
                           chain_method=chain_method, target_accept=target_accept, max_tree_depth=max_tree_depth,
                           dense_mass=bool(dense_mass), width=width, key=key)

    with (x64() if precision == "float64" else contextlib.nullcontext()):
        program = get_program(key, build)
        prior_params = MulticlassPriorParams(*(dtype(v) for v in prior.params()))
        got, stats = program.run(chain_keys(seed, n_chains), sites, args + (prior_params,), n_draws=n_samples,
                                 progress_bar=progress_bar, desc=f"NUTS multiclass {model}")
    conf, prev, pop, extra, draws, dims = class_draws(got, model, scaling if log_ratio else None, n_chains=n_chains,
                                                      n_draws=n_samples, n_classes=sizes["n_classes"])
    settings = dict(n_chains=n_chains, n_warmup=n_warmup, n_samples=n_samples, seed=seed, path=used,
                    chain_method=chain_method, target_accept=target_accept, max_tree_depth=max_tree_depth,
                    dense_mass=bool(dense_mass), precision=precision, start="map-em" if init is None else "init",
                    parametrisation="log_ratio" if log_ratio else ("log_odds" if model == "pooled" else "simplex"),
                    n_rows=int(np.count_nonzero(table.counts)) if used == "patterns" else int(data.n_items))
    return _class_posterior(data, model, conf, prev, pop, extra, draws, dims, stats, index=index, table=sparse,
                            start=start_fit, settings=settings, notes=notes, func=func)


def _class_posterior(data, model, conf, prev, pop, extra, draws, dims, stats, *, index, table, start, settings, notes,
                     func) -> MulticlassPosterior:
    """The K-class draws' diagnostics, orientation check and :class:`MulticlassPosterior` (every K-class model)."""
    n_chains, n_samples, max_tree_depth = settings["n_chains"], settings["n_samples"], settings["max_tree_depth"]
    k = conf.shape[-1]
    table_diag = mcmc_diagnostics(draws, dims)
    n_divergent = int(stats["diverging"].sum())
    # A trajectory of depth d has 2**d - 1 leapfrog steps: that count at the cap means the doubling was stopped by it.
    at_max = stats["n_steps"] >= 2 ** max_tree_depth - 1
    notes += check_mcmc(table_diag, n_chains=n_chains, n_divergent=n_divergent, n_draws=n_samples,
                        n_max_depth=int(at_max.sum()), max_tree_depth=max_tree_depth, func=func)
    flat_conf = conf.reshape((-1,) + conf.shape[2:])
    dominant = diagonally_dominant(flat_conf)
    orient = orientation_message(flat_conf, func, "posterior draws")
    if orient:
        notes.append(orient)
        warnings.warn(orient, IdentifiabilityWarning, stacklevel=3)
    diagnostics = {"max_rhat": float(np.nanmax(table_diag["r_hat"])) if n_chains > 1 else float("nan"),
                   "min_ess_bulk": float(np.nanmin(table_diag["ess_bulk"])),
                   "min_ess_tail": float(np.nanmin(table_diag["ess_tail"])),
                   "frac_max_treedepth": float(at_max.mean()), "n_divergent": n_divergent,
                   "frac_not_dominant": float(1.0 - dominant.mean()),
                   "mean_tree_depth": float(np.mean(stats["tree_depth"]))}
    ids = getattr(data, "annotator_ids", None)
    return MulticlassPosterior(
        confusion=flat_conf, prevalence=prev.reshape((-1,) + prev.shape[2:]), groups=index, diagnostics=diagnostics,
        classes=tuple(data.classes), model=model, n_chains=n_chains, n_draws=n_samples,
        population_confusion=None if pop is None else pop.reshape((-1, k, k)), sample_stats=stats,
        diagnostics_table=table_diag, start=start, n_divergent=n_divergent,
        converged=not any(("R-hat" in m or "divergent" in m) for m in notes), settings=settings,
        warnings=tuple(notes), annotator_ids=None if ids is None else tuple(ids), table=table, extra_draws=extra)


def _fit_nuts_ibcc(data, *, init, prior, n_chains, n_warmup, n_samples, seed, target_accept, max_tree_depth,
                   dense_mass, chain_method, learn: bool, progress_bar: bool, func: str) -> MulticlassPosterior:
    """``fit_nuts_multiclass(model="ibcc")``: IBCC (:mod:`noisycal_bayes.models.ibcc`) from the pooled EM.

    The partially pooled EM (``init`` when it is such a fit, else ``fit_em_multiclass(model="pooled")``) gives the
    population ``alpha = s_y m_y`` (oriented: diagonally dominant mean rows) and the start; its expected counts ``n``
    give each row's conjugate ``Dirichlet(n + alpha)``, whose Gamma quantiles are the confusion rows' coordinates
    (:mod:`noisycal_bayes.models.ibcc`; standard normal if that were the posterior), and whose log-ratio mean and sd
    centre and scale the prevalence's (the chains start at 0 plus the sampler's jitter).
    """
    from ..core.population import expected_counts
    from ..models.ibcc import GammaQuantiles, gamma_quantile_point, gamma_quantile_table, ibcc_multiclass
    from ..models.log_ratio import log_ratio_prevalence
    from ..models.inputs import class_arrays, sorted_responses
    from ..core.tables import SparseTable
    from .population import fit_em_population
    from ._em_loop import padded_class_responses

    x = class_arrays(data, func)
    J, K, n = x.n_annotators, x.n_classes, x.n_items
    start = init if (getattr(init, "model", None) == "pooled" and getattr(init, "prior", None) is not None) else None
    if init is not None and start is None:
        raise ValueError(f"{func}: model='ibcc' starts from a partially pooled EM fit "
                         "(fit_em_multiclass(model='pooled')) or from None; got an `init` without a population.")
    notes = []
    if start is None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = fit_em_population(x)
        notes += [str(w.message) for w in caught]
    alpha = np.asarray(start.prior[0], np.float64)
    if not bool(diagonally_dominant(alpha[None])):
        # As the EM route (the pooled fit returns converged=False with the same warning): the population prior
        # anchors the class labels, but the crowd itself does not confirm them.
        msg = (f"{func}: the pooled EM's population mean confusion is not diagonally dominant, so the crowd does not "
               "confirm the class labelling (orientation at the crowd's level); the IBCC prior keeps the EM's labels. "
               "Add reliable annotators or gold labels.")
        notes.append(msg)
        warnings.warn(msg, IdentifiabilityWarning, stacklevel=3)
    group = np.zeros(n, np.int32)
    post = start.clean_label_probability(x)
    counts = expected_counts(x.item, x.annotator, x.label, post, J)
    scaling = log_ratio_scaling(counts, post.sum(axis=0)[None], prior, confusion_alpha=alpha)
    # Confusion rows in Gamma-quantile coordinates centred on each row's conjugate Dir(n + alpha) (models.ibcc).
    quantiles = GammaQuantiles(*gamma_quantile_table(np.maximum(counts, 0.0) + alpha), counts.sum(axis=-1))
    item, code, padded, by_code, grp, gold, weight = padded_class_responses(x, group)
    args = (item, code, padded, grp, gold, weight, scaling, alpha, quantiles, by_code)
    sites = {"confusion_t": np.zeros((J, K, K)), "prevalence_u": np.zeros(scaling.prev_scale.shape)}
    if learn:
        s0 = alpha.sum(axis=1)
        log_m = np.log(alpha / s0[:, None])
        sites.update(population_u=(log_m - np.diagonal(log_m)[:, None])[~np.eye(K, dtype=bool)].reshape(K, K - 1),
                     log_concentration=np.log(s0))
    chunk = chunk_size(n_warmup, n_samples)
    width = parallel_width(n_chains) if chain_method == "parallel" else 1
    layout = {"sequential": None, "parallel": width}.get(chain_method, n_chains)
    static = dict(n_annotators=J, n_classes=K, learn_population=learn)
    key = ("nuts-multiclass", "ibcc-gamma-quantile", tuple(sorted(static.items())),
           tuple(None if a is None else np.shape(a) for a in args[:6]), layout, n_warmup, chunk, chain_method,
           target_accept, max_tree_depth, bool(dense_mass))

    def model_fn(*a):
        return ibcc_multiclass(*a, **static)

    model_fn.__name__ = "ibcc_multiclass_bound"

    def build():
        return NutsProgram(model_fn, n_warmup=n_warmup, chunk=chunk, chain_method=chain_method,
                           target_accept=target_accept, max_tree_depth=max_tree_depth, dense_mass=bool(dense_mass),
                           width=width, key=key)

    with x64():
        program = get_program(key, build)
        got, stats = program.run(chain_keys(seed, n_chains), sites, args + (prior.params(),), n_draws=n_samples,
                                 progress_bar=progress_bar, desc="NUTS multiclass ibcc")
    got = {k_: np.asarray(v, np.float64) for k_, v in got.items()}
    x_draws, _ = gamma_quantile_point(got["confusion_t"], quantiles.log_g, quantiles.slope)
    conf = np.exp(x_draws - np.logaddexp.reduce(x_draws, axis=-1, keepdims=True))
    prev = np.exp(log_ratio_prevalence(jax.tree.map(np.asarray, scaling), got["prevalence_u"]))
    if learn:
        eta = insert_diagonal_zero(got["population_u"], np)
        pop = softmax_rows(eta)
        conc = np.exp(got["log_concentration"])
    else:
        pop = np.broadcast_to(alpha / alpha.sum(axis=1, keepdims=True), (n_chains, n_samples, K, K))
        conc = np.broadcast_to(alpha.sum(axis=1), (n_chains, n_samples, K))
    draws = {"confusion": conf, "prevalence": prev}
    dims = {"confusion": ("annotator", "true_class", "label_class"), "prevalence": ("group", "true_class")}
    if learn:
        draws.update(population_confusion=pop, concentration=conc)
        dims.update(population_confusion=("true_class", "label_class"), concentration=("true_class",))
        if not diagonally_dominant(pop.reshape(-1, K, K)[:, None]).all():
            notes.append(f"{func}: some draws of the learned population mean confusion are not diagonally dominant "
                         "(the crowd's orientation is uncertain); read the posterior with care.")
            warnings.warn(notes[-1], IdentifiabilityWarning, stacklevel=3)
    settings = dict(n_chains=n_chains, n_warmup=n_warmup, n_samples=n_samples, seed=seed, path="sparse",
                    chain_method=chain_method, target_accept=target_accept, max_tree_depth=max_tree_depth,
                    dense_mass=bool(dense_mass), precision="float64", start="pooled-em" if init is None else "init",
                    parametrisation="log_ratio", population="learned" if learn else "empirical", n_rows=int(n))
    table = SparseTable(*sorted_responses(*(np.asarray(v, np.int32) for v in x.responses)), group,
                        np.full(n, -1, np.int32) if x.gold is None else x.gold.astype(np.int32))
    return _class_posterior(data, "ibcc", conf, prev, pop, {"concentration": conc.reshape(-1, K)}, draws, dims, stats,
                            index=group, table=table, start=start, settings=settings, notes=notes, func=func)
