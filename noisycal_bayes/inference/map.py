"""MAP by an optimiser on the NumPyro log density: every model, including those without closed-form EM.

The objective is the log posterior density of the user-facing parameters ``(fpr, tpr, prevalence)``
(or ``(fpr, tpr, slope, intercept)``): NumPyro's ``log_density`` of the sampled sites ``(fpr, u, ...)``
minus ``sum_j log(1 - fpr_j)``, the log-Jacobian of ``u -> tpr = fpr + (1 - fpr) u``. Hence with the
default prior (flat over oriented channels) the MAP is the maximum-likelihood estimate and equals EM.
It is maximised over unconstrained coordinates (a bijection, which moves no mode) by damped Newton
steps with exact Hessians in float64, from several starts. (BFGS from ``jax.scipy.optimize`` compiled
several times slower here and stopped further from the mode.)

K classes (:func:`fit_map_multiclass`): the posterior mode of the Dawid-Skene / grouped K-class model by MAP-EM,
i.e. :func:`~noisycal_bayes.inference.fit_em_multiclass` with the Dirichlet prior's pseudo-counts, from the
majority-vote start (the NUTS start uses the same iterations in NumPy on compressed rows, :func:`_np_map_em`).
"""
from __future__ import annotations

import dataclasses
import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.handlers import substitute, trace
from numpyro.infer.util import constrain_fn, log_density, potential_energy, unconstrain_fn

from .._validation import check_positive_int
from ..core import ds_loglik, x64
from ..core.em import table_counts, table_posterior, table_responses
from ..core.starts import orientation_message
from ..data.design import check_design, check_prevalence_spread
from ..models.priors import check_class_prior, check_prior
from ..models.result import MulticlassMAPFit
from ..warnings import ConvergenceWarning, IdentifiabilityWarning
from ._common import (bound_model, channel_or_none, check_class_model, class_door, check_pooling, pooled_bound, pooled_derived,
                      pooled_fit_inputs, pooled_inputs,
                      pooled_start, population_summary, sample_sites, with_derived)
from ..models.inputs import (check_class_data, check_data, check_model, patterns_feasible, prepare_inputs,
                             resolve_assignment, resolve_class_groups)
from .em import em_starts, fit_em_multiclass, start_point
from ..models.result import FitResult, channel_from, point_dict
from ..data.binning import Binning
from .alternatives import GROUP_CHANNEL_MODELS, registered_fit

_PROGRAMS: dict = {}



def log_posterior(model_fn, args, prior_params, sites):
    """Log posterior density of ``(fpr, tpr, ...)`` at constrained sample-site values ``sites`` (unnormalised)."""
    lp, _ = log_density(model_fn, args + (prior_params,), {}, sites)
    # Density of (fpr, tpr) = density of (fpr, u) / |d tpr / d u| with d tpr / d u = 1 - fpr.
    return lp - jnp.sum(jnp.log1p(-sites["fpr"]))


def _newton(vgh, z0, maxiter, gtol):
    """Damped Newton from ``z0`` with ``vgh(z) -> (f, gradient, Hessian)``: returns ``(z, f, converged, n_iter)``.

    Each step solves ``(H + shift I) step = -g`` with the shift making ``H`` positive definite (Levenberg),
    then halves the step until the Armijo condition holds. The parameter count is small (annotators plus
    groups), so exact Hessians are cheap, and near the mode the convergence is quadratic. Converged when
    the max-abs gradient is below ``gtol`` or the Newton decrement ``-g . step / 2`` (the predicted gain)
    is below float64 resolution of ``f`` (``1e-15 (1 + |f|)``): no step can improve ``f`` any more.
    The loop runs in Python around one compiled ``vgh``: compiling the whole loop (``lax.while_loop``) cost
    2-3 times more compilation here, and compilation dominates.
    """
    x = np.asarray(z0, dtype=np.float64)
    fx, g, h = (np.asarray(v) for v in vgh(x))
    for it in range(maxiter + 1):
        if not np.isfinite(fx) or not np.all(np.isfinite(g)) or not np.all(np.isfinite(h)):
            return x, fx, False, it
        eig_min = np.linalg.eigvalsh(h)[0]
        step = -np.linalg.solve(h + max(0.0, 1e-10 - eig_min) * np.eye(h.shape[0]), g)
        slope = float(g @ step)
        if np.max(np.abs(g)) <= gtol or -slope / 2 <= 1e-15 * (1 + abs(fx)):
            return x, fx, True, it
        if it == maxiter:
            break
        t = 1.0
        while True:
            cand = x + t * step
            fc, gc, hc = (np.asarray(v) for v in vgh(cand))
            if np.isfinite(fc) and fc <= fx + 1e-4 * t * slope:
                break
            t /= 2
            if t < 1e-12:
                return x, fx, False, it
        x, fx, g, h = cand, float(fc), gc, hc
    return x, fx, False, maxiter


def _program(model: str, static: dict):
    key = (model, tuple(sorted(static.items())))
    prog = _PROGRAMS.get(key)
    if prog is not None:
        return prog
    model_fn = bound_model(model, static)

    def objective(zf, unravel, args, prior_params, scale):
        sites = constrain_fn(model_fn, args + (prior_params,), {}, unravel(zf))
        # Per-item scale keeps the gradient tolerance meaningful for any number of items.
        return -log_posterior(model_fn, args, prior_params, sites) / scale

    # Start points to unconstrained coordinates and back, compiled: run op by op, the model and its transforms
    # compiled one small program per operation (data shapes of grid tables are fixed by the numbers of annotators and
    # groups, so one program serves every data set of a design).
    unconstrain = jax.jit(lambda a, pp, sites: unconstrain_fn(model_fn, a + (pp,), {}, sites))
    constrain = jax.jit(lambda a, pp, z: constrain_fn(model_fn, a + (pp,), {}, z))
    prog = {"model_fn": model_fn, "objective": objective, "cache": {}, "unconstrain": unconstrain,
            "constrain": constrain}
    _PROGRAMS[key] = prog
    return prog


def map_fit(data, inputs, assignment, model, prior, *, n_starts, seed, init, maxiter=200, gtol=1e-10):
    """Run the optimiser. Returns a dict with the best point, objective, success flag and per-start values."""
    static = inputs.static_kwargs()
    prog = _program(model, static)
    model_fn = prog["model_fn"]
    starts = []
    if init == "em":
        p = start_point(data, inputs, model, seed)
        if p is not None:
            starts.append(p)
    fpr0, tpr0, prev0 = em_starts(inputs.n_annotators, inputs.n_groups, n_starts, seed)
    for s in range(n_starts):
        starts.append(point_dict(model if model != "monotone" else "grouped", fpr0[s], tpr0[s],
                                 prev0[s] if model != "dawid_skene" else prev0[s, 0], slope=1.0, intercept=0.0))
    with x64():
        args = tuple(jnp.asarray(a) for a in inputs.model_args())
        prior_params = jax.tree.map(jnp.asarray, prior.params())
        z = [prog["unconstrain"](args, prior_params, sample_sites(model, p, inputs.n_groups)) for p in starts]
        flat = [ravel_pytree(zz)[0] for zz in z]
        unravel = ravel_pytree(z[0])[1]
        key = (flat[0].shape, tuple(a.shape for a in args))
        vgh = prog["cache"].get(key)
        if vgh is None:
            def value_grad_hess(zf, a, pp, sc):
                f = partial(prog["objective"], unravel=unravel, args=a, prior_params=pp, scale=sc)
                return f(zf), jax.grad(f)(zf), jax.hessian(f)(zf)

            vgh = jax.jit(value_grad_hess)
            prog["cache"][key] = vgh
        scale = jnp.float64(inputs.n_items)
        runs = [_newton(lambda x: vgh(jnp.asarray(x), args, prior_params, scale), zf, maxiter, gtol) for zf in flat]
        x = np.stack([r[0] for r in runs])
        obj = np.array([-r[1] * inputs.n_items for r in runs])
        success = np.array([r[2] for r in runs])
        nit = np.array([r[3] for r in runs])
        obj = np.where(np.isfinite(obj), obj, -np.inf)
        # Starts that reach the same mode tie; among ties prefer one that converged, then the lowest index.
        top = obj.max()
        ties = np.flatnonzero(obj >= top - 1e-9 * (1.0 + abs(top)))
        good = ties[success[ties]]
        best = int(good[0] if good.size else ties[0])
        sites = prog["constrain"](args, prior_params, unravel(jnp.asarray(x[best])))
        sites = {k: np.asarray(v) for k, v in sites.items()}
        vals = with_derived(model, sites)
        loglik = None
        if model != "platt":
            loglik = float(ds_loglik(args[0], args[1], args[2], jnp.asarray(vals["fpr"]), jnp.asarray(vals["tpr"]),
                                     jnp.atleast_1d(jnp.asarray(vals["prevalence"]))))
    return {"values": vals, "objective": float(obj[best]), "success": bool(success[best]), "n_iter": int(nit[best]),
            "start_objectives": obj, "start_success": success, "start_n_iter": nit, "selected": best, "n_em_starts": int(init == "em" and len(starts) > n_starts),
            "loglik": loglik}


@class_door("fit_map_multiclass", passed=("model", "prior"))
def fit_map(data, *, model: str = "grouped", groups=Binning.equal_mass(5), n_starts: int = 10, seed: int = 0, prior=None,
            init: str = "em", pooling: str = "none") -> FitResult:
    """Posterior mode by Newton's method on the NumPyro log density (every model, including Platt and monotone).

    K classes: data with more than two classes go to :func:`fit_map_multiclass` (MAP-EM) with its own defaults and
    those of ``model``, ``groups`` (a group per item) and ``prior`` that the caller set (the others are binary:
    setting one is an error); the defaults below are those of binary data.

    Parameters
    ----------
    data : AnnotationSet
    model : {"grouped", "dawid_skene", "histogram", "monotone", "platt", "score_dependent", "correlated"}
        Default "grouped". ``"score_dependent"`` and ``"correlated"`` (channels per score group) are the mode of
        :func:`~noisycal_bayes.inference.alternatives.fit_alternative` (``method="map"``; ``n_starts`` unused)
        returned by :func:`~noisycal_bayes.inference.alternatives.registered_fit`: ``channel`` is the
        item-weighted average of the group channels, ``group_channels`` the channels of each group.
    groups : Binning, int or int array of shape (n_items,), default ``Binning.equal_mass(5)``
        Score groups (bins), as in :func:`~noisycal_bayes.inference.fit_em` (an int ``k`` is
        ``Binning.equal_width(k)``); ignored by ``"dawid_skene"`` and ``"platt"``.
    n_starts : int, default 10
        Random starts (:func:`~noisycal_bayes.inference.em_starts`; Platt starts at slope 1, intercept 0).
    seed : int, default 0
    prior : None or Prior
        None means the default :class:`~noisycal_bayes.models.Prior` (flat over oriented channels, so the
        MAP is the maximum-likelihood estimate).
    init : {"em", "random"}, default "em"
        "em" adds the maximum-likelihood EM estimate as start 0 (Platt: EM with 5 score groups for the
        channels); "random" uses the random starts only (an independent route to the optimum).
    pooling : {"none", "partial"}, default "none"
        ``"partial"``: the partially pooled channel model (:mod:`noisycal_bayes.models.pooled`; see
        :func:`~noisycal_bayes.inference.fit_nuts`). Its MAP is the mode in the sampler's unconstrained
        coordinates ``(z_fpr, z_tpr, mu_fpr, log mean_gap, log sigma_fpr, log sigma_tpr, logit prevalence)``
        (the minimum of NumPyro's potential energy). A joint mode in the annotators' own logit rates does not
        exist: the density grows without bound as every annotator joins the population median and
        ``sigma -> 0`` (measured: that optimum collapsed to ``sigma = 1e-211``). In ``z`` the mode is finite
        but shrinks little: it overstates the population's spread (4.5 on the logit scale where the
        simulated crowd had 0.7 plus spammers and adversaries), and the annotators' rates sit near their
        own maximum-likelihood values. Use ``fit_nuts(pooling="partial")`` for the pooled estimate and its
        intervals; this mode is a fast point estimate and a start. Found by the same Newton iterations from
        one bounded sparse-EM
        start (``n_starts``, ``seed`` and ``init`` are not used). ``details["population"]`` as in
        ``fit_nuts`` (at the mode), ``details["flagged"]`` the annotators with a gap <= 0 at the mode.

    Returns
    -------
    FitResult
        ``method="map"``; ``details`` holds ``objective`` (log posterior density at the mode, up to a
        constant), ``start_objectives``, ``selected_start``, ``success``.

    Raises
    ------
    ValueError
        Bad data, model, groups, prior or ``init``; one annotator.

    Warns
    -----
    IdentifiabilityWarning
        As in :func:`fit_em`.
    ConvergenceWarning
        The optimiser did not reach a zero gradient for the selected start (often a mode on the boundary, e.g. an
        annotator with no false positives at all).

    Notes
    -----
    Maximises ``log p(A | theta) + log p(theta)`` with ``theta = (fpr, tpr, prevalence | slope, intercept)``;
    NumPyro's density of the sampled ``(fpr, u)`` is converted with the Jacobian ``d tpr / d u = 1 - fpr``.
    For the monotone model ``prevalence = cumsum(increments)`` has unit Jacobian.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], curve="overconfident", seed=0)
    >>> fit = fit_map(sim.data, model="platt", n_starts=2)
    >>> fit.method, bool(0.3 < fit.point["slope"] < 0.8)
    ('map', True)
    """
    func = "fit_map"
    if model in GROUP_CHANNEL_MODELS:
        if pooling != "none" or init != "em":
            raise ValueError(f"{func}: `pooling` and `init` cannot be set for model={model!r} (channels per score "
                             "group; its mode is found by L-BFGS from the shared-channel EM estimate).")
        return registered_fit(data, model, method="map", groups=groups, seed=seed, prior=prior, func=func)
    data = check_data(data, func)
    model = check_model(model, func)
    n_starts = check_positive_int(n_starts, name="n_starts")
    if init not in ("em", "random"):
        raise ValueError(f"`init` must be 'em' or 'random'; got {init!r}.")
    prior = check_prior(prior)
    pooling = check_pooling(pooling, model, func)
    assignment = resolve_assignment(data, model, groups, func)
    if pooling == "partial":
        return _fit_map_pooled(data, model, assignment, prior, func)
    notes = check_design(data, model, n_groups=assignment.n_groups, func=func)
    inputs = prepare_inputs(data, model, assignment, func=func)
    out = map_fit(data, inputs, assignment, model, prior, n_starts=n_starts, seed=seed, init=init)
    return _map_result(data, model, assignment, inputs, prior, out, notes, func,
                       settings=dict(n_starts=n_starts, seed=seed, init=init))


def _map_result(data, model, assignment, inputs, prior, out, notes, func, *, settings):
    design, notes = list(notes), list(notes)
    v = out["values"]
    ids = list(data.annotator_ids)
    if not out["success"]:
        msg = (f"{func}: the optimiser did not reach a zero gradient for the best start (objective {out['objective']:.6g}); the mode "
               "may lie on the boundary (e.g. an annotator with no false positives), where the unconstrained "
               "coordinates diverge. Check the estimate, or use fit_nuts for the posterior.")
        warnings.warn(msg, ConvergenceWarning, stacklevel=3)
        notes.append(msg)
    if model != "platt":
        notes += check_prevalence_spread(v["prevalence"], data.n_annotators, model, func=func, stacklevel=4)
    point = {k: v[k] for k in ("fpr", "tpr", "gap", "u")}
    for k in ("prevalence", "increments", "slope", "intercept"):
        if k in v:
            point[k] = v[k]
    identified, reason = not design, design[0] if design else ""
    loglik = out["loglik"] if out["loglik"] is not None else float("nan")
    result = FitResult(model=model, method="map", channel=channel_from(v["fpr"], v["tpr"], ids), point=point,
                     groups=assignment, inputs=inputs, prior=prior, annotator_ids=tuple(ids),
                     converged=out["success"], identified=identified, reason=reason, loglik=loglik,
                     n_iter=out["n_iter"], warnings=tuple(notes), settings=settings,
                     details={"objective": out["objective"], "start_objectives": out["start_objectives"],
                              "selected_start": out["selected"], "success": out["success"]})
    if out["loglik"] is None:
        result = dataclasses.replace(result, loglik=float(np.sum(result.log_likelihood())))
    return result


def pooled_map(args, static, prior, *, maxiter: int = 200, gtol: float = 1e-8):
    """Mode of the pooled model in unconstrained coordinates (minimum of NumPyro's potential energy).

    Returns ``(sites, loglik, converged, n_iter)``: constrained sample-site values at the mode, the
    log-likelihood there (sum over items), whether the Newton iterations converged, and their number.
    """
    model_fn = pooled_bound(static)
    key = ("pooled", tuple(sorted(static.items())), int(args[0].shape[0]))
    with x64():
        dev_args = tuple(jnp.asarray(a) for a in args)
        prior_params = jax.tree.map(jnp.asarray, prior.params())
        start = {k: jnp.asarray(v) for k, v in pooled_start(args, static).items()}
        z0 = unconstrain_fn(model_fn, dev_args + (prior_params,), {}, start)
        flat0, unravel = ravel_pytree(z0)
        prog = _PROGRAMS.get(key)
        if prog is None:
            def objective(zf, a, pp, scale):
                return potential_energy(model_fn, a + (pp,), {}, unravel(zf)) / scale

            def value_grad_hess(zf, a, pp, scale):
                f = partial(objective, a=a, pp=pp, scale=scale)
                return f(zf), jax.grad(f)(zf), jax.hessian(f)(zf)

            def loglik(zf, a, pp):
                sites = constrain_fn(model_fn, a + (pp,), {}, unravel(zf))
                tr = trace(substitute(_with_loglik(static), sites)).get_trace(*a, pp)
                return sites, jnp.sum(tr["log_likelihood"]["value"])

            prog = _PROGRAMS[key] = (jax.jit(value_grad_hess), jax.jit(loglik))
        vgh, loglik_fn = prog
        scale = jnp.float64(static["n_items"])
        x, fx, ok, n_iter = _newton(lambda z: vgh(jnp.asarray(z), dev_args, prior_params, scale), flat0, maxiter, gtol)
        sites, ll = loglik_fn(jnp.asarray(x), dev_args, prior_params)
        sites = {k: np.asarray(v) for k, v in sites.items()}
    return sites, float(ll), bool(ok), int(n_iter)


def _with_loglik(static):
    """The pooled model with its per-item ``log_likelihood`` site recorded (prior as the last argument)."""
    from ..models import pooled_model

    def bound(*args):
        *data, prior = args
        return pooled_model(*data, prior=prior, record_loglik=True, **static)

    return bound


def pooled_data_inputs(data, model, assignment, func, *, centered: bool = False):
    """``pooled_inputs`` of ``data`` after the checks both pooled routes (``fit_map``, ``fit_nuts``) need: an
    AnnotationSet (the likelihood is per response) with at least two annotators. ``centered``: NUTS's partial
    centring (``pooled_inputs``)."""
    from ..data.annotations import AnnotationSet

    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"{func}: pooling='partial' evaluates the likelihood per response and needs an AnnotationSet; "
                         "SufficientStats keep only pattern counts. Use pooling='none'.")
    if data.n_annotators < 2:
        raise ValueError(f"{func}: the pooled model needs at least 2 annotators; got {data.n_annotators}.")
    return pooled_inputs(data, model, assignment, centered=centered)


def _fit_map_pooled(data, model, assignment, prior, func):
    """``fit_map`` with partially pooled channels (``pooling="partial"``)."""
    args, static = pooled_data_inputs(data, model, assignment, func)
    sites, loglik, ok, n_iter = pooled_map(args, static, prior)
    values, population = pooled_derived(sites)
    notes = []
    if not ok:
        msg = (f"{func}: the Newton iterations on the pooled model did not reach a zero gradient in {n_iter} steps; "
               "check the estimate, or use fit_nuts(pooling='partial') for the posterior.")
        warnings.warn(msg, ConvergenceWarning, stacklevel=3)
        notes.append(msg)
    ids = list(data.annotator_ids)
    point = point_dict(model, values["fpr"], values["tpr"], values.get("prevalence"), slope=values.get("slope"),
                       intercept=values.get("intercept"))
    if model == "monotone":
        point = dict(point, increments=values["increments"])
    gap = values["gap"]
    flagged = {"level": None, "uninformative": [], "adversarial": [ids[j] for j in np.flatnonzero(gap <= 0)]}
    return FitResult(model=model, method="map", channel=channel_or_none(values["fpr"], values["tpr"], ids), point=point,
                     groups=assignment, inputs=pooled_fit_inputs(data, model, assignment), prior=prior,
                     annotator_ids=tuple(ids), converged=ok, identified=True, reason="", loglik=loglik, n_iter=n_iter,
                     warnings=tuple(notes), settings=dict(pooling="partial", likelihood="sparse responses",
                                                          start="sparse-em"),
                     details={"population": population_summary(population), "population_point": population,
                              "sites": sites, "success": ok, "flagged": flagged,
                              "n_gold": 0 if data.gold is None else int((data.gold >= 0).sum())})


# ------------------------------------------------------------------------------------------------ K classes
def _class_groups(data, model: str, groups, func: str):
    """``(index (n,) int32, n_groups)`` of a K-class MAP or NUTS fit: :func:`~noisycal_bayes.models.inputs.resolve_class_groups`
    with ``n_groups`` the largest group + 1."""
    index, _, _ = resolve_class_groups(model, groups, n_items=int(data.n_items), n_classes=int(data.n_classes),
                                       probs=data.probs, func=func)
    index = np.asarray(index).astype(np.int32)
    return index, int(index.max()) + 1


def fit_map_multiclass(data, *, model: str = "grouped", groups=None, prior=None, path: str = "auto",
                       max_iter: int = 5000, tol: float = 1e-8) -> MulticlassMAPFit:
    """Posterior mode of the K-class Dawid-Skene model (``"dawid_skene"``) or its grouped version, by MAP-EM.

    Parameters
    ----------
    data : MulticlassAnnotationSet
        Or any object with ``responses``, ``n_items``, ``n_annotators``, ``n_classes``, ``probs``, ``gold``,
        ``classes`` (module docstring).
    model : {"grouped", "dawid_skene"}, default "grouped"
        (The pooled model has no useful mode in its own coordinates; sample it with
        :func:`fit_nuts_multiclass`.)
    groups : int array of shape (n_items,) or None
        Score group of each item (``G = max + 1`` groups, empty ones allowed). None: the score groups of
        ``noisycal_bayes.core.score_groups(data.probs)`` (predicted class x top-probability
        quantile), or one group without ``probs``. Ignored by ``"dawid_skene"``.
    prior : MulticlassPrior or None
        None: :class:`~noisycal_bayes.models.MulticlassPrior` defaults. Its concentrations must be
        >= 1 (an interior mode, closed-form M-step).
    path : {"auto", "patterns", "sparse"}
        Compressed (group x pattern) counts or responses (:func:`~noisycal_bayes.inference.fit_em_multiclass`;
        ``"auto"`` chooses as it does). ``"patterns"`` with gold labels runs on responses, where gold items enter
        as observed clean labels. The same mode either way, to rounding.
    max_iter : int, default 5000
    tol : float, default 1e-8
        Converged when no probability changes by more than ``tol`` in an iteration and the log posterior by at
        most ``tol (1 + |objective|)`` (fit_em_multiclass's rule 2).

    Returns
    -------
    MulticlassMAPFit

    Raises
    ------
    ValueError
        Bad data, model, groups, path or prior (a concentration below 1), or model="pooled"; fewer than two
        annotators, or an annotator without labels (fit_em_multiclass's checks).

    Warns
    -----
    ConvergenceWarning
        ``max_iter`` reached.
    IdentifiabilityWarning
        The mode's average confusion is not diagonally dominant (orientation, see
        :mod:`noisycal_bayes.models.dawid_skene`, "K classes"); two annotators and one group (not identified).
    SmallGapWarning
        Annotators with a near-singular fitted confusion matrix.

    Notes
    -----
    Maximises ``log p(A | C, pi) + sum (alpha - 1) log C + (beta - 1) log pi`` over the simplices; EM
    (Dawid & Skene 1979) with the Dirichlet pseudo-counts added to the expected counts in the M-step:
    ``C[j, y, a] = (sum_r [j_r = j, a_r = a] T_{i_r y} + alpha_{ya} - 1) / (row total)``,
    ``pi[g, y] = (sum_{i in g} T_iy + beta - 1) / (group total)``. This is
    ``fit_em_multiclass(data, model=model, groups=groups, prior=(alpha, beta), n_starts=0)``: the iterations start
    from the vote share of each item (majority-vote-like, which leads to the diagonal-dominant mode), and a mode
    whose crowd-average confusion is not diagonally dominant is relabelled when a relabelling makes it so
    (fit_em_multiclass's rule 3). K = 2 gives the binary Dawid-Skene EM.
    """
    func = "fit_map_multiclass"
    model = check_class_model(model, func)
    if model in ("pooled", "ibcc"):
        raise ValueError(f"{func}: the {model} model has no MAP route (the pooled model's density grows without bound "
                         "as the spread goes to 0; IBCC's point fit is fit_em_multiclass(model='pooled')); use "
                         f"fit_nuts_multiclass(model={model!r}), or model='grouped' for a point fit.")
    prior = check_class_prior(prior, func)
    if min(prior.diagonal, prior.off_diagonal, prior.prevalence) < 1:
        raise ValueError(f"{func}: MAP-EM needs Dirichlet concentrations >= 1 (an interior mode); got diagonal="
                         f"{prior.diagonal}, off_diagonal={prior.off_diagonal}, prevalence={prior.prevalence}.")
    max_iter = check_positive_int(max_iter, name="max_iter")
    item, ann, lab, gold = check_class_data(data, func)
    index, n_groups = _class_groups(data, model, groups, func)
    sizes = dict(n_annotators=int(data.n_annotators), n_classes=int(data.n_classes), n_groups=n_groups)
    patterns_feasible(item, ann, path=path, func=func, **sizes)
    return _map_fit(data, None, path, index, model, prior, sizes, max_iter=max_iter, tol=float(tol), func=func)


def _map_fit(data, table, used, index, model, prior, sizes, *, max_iter, tol, func, stacklevel=3, engine="jax"):
    """The MAP-EM fit as a :class:`MulticlassMAPFit`.

    ``engine="jax"``: :func:`~noisycal_bayes.inference.fit_em_multiclass` with the prior's concentrations, from the
    vote start alone (``n_starts=0``); ``used`` is the path asked for (``"auto"``, ``"patterns"`` or ``"sparse"``;
    ``"patterns"`` runs on responses when there are gold labels, which fit_em_multiclass's pattern counts do not
    hold) and ``table`` is not read. ``engine="numpy"``: :func:`_np_map_em` on the compressed ``table`` (the NUTS
    start: the same iterations with no JAX loop to compile).
    """
    k = sizes["n_classes"]
    conf_pc, prev_pc = np.asarray(prior.pseudo_counts(k), np.float64), prior.prevalence - 1.0
    if engine == "numpy":
        conf, prev, ll, _, it, ok = _np_map_em(table, prior, max_iter=max_iter, tol=tol, **sizes)
        notes = [] if ok else [(ConvergenceWarning, f"{func}: EM stopped after {max_iter} iterations with "
                                                    f"probabilities still moving by more than {tol}; raise `max_iter`.")]
    else:
        gold = getattr(data, "gold", None)
        has_gold = gold is not None and bool(np.any(np.asarray(gold) >= 0))
        path = "sparse" if used == "patterns" and has_gold else used
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                fit = fit_em_multiclass(data, model=model, groups=index if model == "grouped" else None, n_starts=0,
                                        max_iter=max_iter, tol=tol, prior=(conf_pc + 1.0, prior.prevalence),
                                        path=path)
            except ValueError as exc:  # its data checks, in this function's name
                raise ValueError(str(exc).replace("fit_em_multiclass:", f"{func}:", 1)) from None
        notes = [(w.category, str(w.message).replace("fit_em_multiclass:", f"{func}:", 1)) for w in caught]
        conf, prev, ll, it, used = fit.confusion, fit.prevalence, fit.log_likelihood, fit.n_iter, fit.path
        ok = not any(issubclass(cls, ConvergenceWarning) for cls, _ in notes)
    orient = orientation_message(conf[None], func, "mode")
    if orient:
        notes.append((IdentifiabilityWarning, orient))
    for cls, text in notes:
        warnings.warn(text, cls, stacklevel=stacklevel)
    return MulticlassMAPFit(confusion=conf, prevalence=prev, groups=index, n_groups=sizes["n_groups"],
                            log_likelihood=float(ll), log_posterior=float(ll) + _log_kernels(conf, prev, conf_pc,
                                                                                              prev_pc),
                            n_iter=int(it), converged=bool(ok), path=used, model=model,
                            classes=tuple(data.classes), warnings=tuple(text for _, text in notes))


def _log_kernels(confusion, prevalence, conf_pc, prev_pc) -> float:
    """``sum (alpha - 1) log C + sum (beta - 1) log pi``: the Dirichlet log kernels in simplex coordinates."""
    log_c = np.log(np.clip(np.asarray(confusion, np.float64), 1e-300, 1.0))
    log_p = np.log(np.clip(np.asarray(prevalence, np.float64), 1e-300, 1.0))
    # 0 * log 0 = 0: a zero pseudo-count contributes nothing even where the estimate is 0.
    return float(np.sum(np.where(conf_pc > 0, conf_pc * log_c, 0.0)) + np.sum(np.where(prev_pc > 0, prev_pc * log_p,
                                                                                      0.0)))


def _np_map_em(table, prior, *, n_annotators, n_classes, n_groups, max_iter, tol):
    """MAP-EM in NumPy on a compressed table, the start of :func:`fit_nuts_multiclass` (a few thousand rows: cheap
    NumPy iterations instead of compiling a first :func:`~noisycal_bayes.inference.fit_em_multiclass` program).
    The updates of fit_em_multiclass (vote-share start, M-step with the prior's pseudo-counts); it stops when no
    probability moves by more than ``tol``. Returns ``(confusion, prevalence, log_likelihood, log_posterior, n_iter,
    converged)``."""
    k = n_classes
    responses = table_responses(table)
    conf_pc, prev_pc = prior.pseudo_counts(k), prior.prevalence - 1.0
    row, ann, lab = responses
    n_rows = np.asarray(table.gold).shape[0]
    votes = np.stack([np.bincount(row, lab == y, minlength=n_rows) for y in range(k)], 1).astype(np.float64)
    tot = votes.sum(1, keepdims=True)
    post = np.where(tot > 0, votes / np.where(tot > 0, tot, 1.0), 1.0 / k)
    gold = np.asarray(table.gold)
    post = np.where(gold[:, None] >= 0, np.eye(k)[np.maximum(gold, 0)], post)

    def m_step(post):
        n_conf, n_prev = table_counts(table, responses, post, n_annotators, n_groups)
        counts, m = n_conf + conf_pc, n_prev + prev_pc
        t, tg = counts.sum(-1, keepdims=True), m.sum(-1, keepdims=True)
        # Rows or groups without data (and zero pseudo-counts): uniform instead of 0 / 0, as the JAX M-step.
        return (np.where(t > 0, counts / np.where(t > 0, t, 1.0), 1.0 / k),
                np.where(tg > 0, m / np.where(tg > 0, tg, 1.0), 1.0 / k))

    def logs(conf, prev):
        return np.log(np.clip(conf, 1e-300, 1.0)), np.log(np.clip(prev, 1e-300, 1.0))

    conf, prev = m_step(post)
    it, change = 0, np.inf
    while it < max_iter and change > tol:
        new_conf, new_prev = m_step(table_posterior(table, responses, *logs(conf, prev))[0])
        change = max(np.abs(new_conf - conf).max(), np.abs(new_prev - prev).max())
        conf, prev, it = new_conf, new_prev, it + 1
    rows = table_posterior(table, responses, *logs(conf, prev))[1]
    weight = np.asarray(table.counts, np.float64)
    ll = float(np.sum(np.where(weight > 0, weight * rows, 0.0)))
    return conf, prev, ll, ll + _log_kernels(conf, prev, conf_pc, prev_pc), it, bool(change <= tol)
