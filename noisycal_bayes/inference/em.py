"""EM (and MAP-EM) for the grouped Dawid-Skene models in JAX: all starts at once with ``vmap``.

The rules are those of the reference EM (``noisycal_bayes.reference.em.fit_em``, documented in its Notes)
so that the two agree to rounding from identical starts; the E- and M-steps are
:func:`noisycal_bayes.core.em_step` on compressed, padded (group, pattern) counts, evaluated as
``core.em.m_step`` then ``core.em.e_step`` so that the objective and the next E-step share one pass.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..core import ds_loglik, x64
from ..core.em import e_step, log_prior, m_step
from ..core.starts import (BAD_START as _BAD_START, CONVERGED as _CONVERGED, MAX_ITER as _MAX_ITER,
                           NONFINITE as _NONFINITE, RUNNING as _RUNNING, TIE_RTOL, check_starts as _check_starts,
                           em_starts, select_start)
from ..models.em_result import em_result, prepare_em
from ..models.inputs import prepare_inputs, resolve_assignment
from ..models.priors import em_prior_counts
from ..models.result import FitResult, point_dict
from ._saved import SavedProgram
from ..data.binning import Binning

__all__ = ["TIE_RTOL", "em_starts", "fit_em", "run_em", "start_point"]


def _split(theta, n_annotators):
    return theta[:n_annotators], theta[n_annotators:2 * n_annotators], theta[2 * n_annotators:]


def _em_program(n_rows: int, n_starts: int, *, n_annotators: int, n_groups: int, prior, max_iter: int):
    """The compiled EM for one static configuration and input shape (:func:`_run_all`), kept per process and,
    with the compilation cache on, saved across processes (:class:`~._sampler.SavedProgram`): a new process
    then neither traces the EM loop again nor compiles it."""
    key = ("em", n_rows, n_starts, n_annotators, n_groups, prior, max_iter)
    program = _EM_PROGRAMS.get(key)
    if program is None:
        fn = partial(_run_all, n_annotators=n_annotators, n_groups=n_groups, prior=prior, max_iter=max_iter)
        program = _EM_PROGRAMS[key] = SavedProgram(fn, partial(jax.jit, keep_unused=True), 0,
                                                   name=("em",) + tuple(map(repr, key[1:])))
    return program


# EM programs by static configuration and shape (see `_em_program`); the padded row counts keep them few.
_EM_PROGRAMS: dict = {}


def _run_all(theta0, patterns, group, counts, tol, *, n_annotators, n_groups, prior, max_iter):
    """EM from every start (rows of ``theta0``) with one ``lax.while_loop`` each, batched by ``vmap``.

    Returns ``(theta (S, K), objective (S,), n_iter (S,), status (S,), trace (S, max_iter + 1))``.
    """

    def evaluate(theta):
        """Objective at ``theta`` and the E-step there (one pass over the rows serves both)."""
        f, t, p = _split(theta, n_annotators)
        loglik, posterior = e_step(patterns, group, counts, f, t, p)
        return loglik + log_prior((f, t, p), prior), posterior

    def one(th0):
        obj0, post0 = evaluate(th0)
        trace = jnp.full(max_iter + 1, jnp.nan, dtype=th0.dtype).at[0].set(obj0)
        status = jnp.where(jnp.isfinite(obj0), _RUNNING, _BAD_START)

        def cond(c):
            return c[4] == _RUNNING

        def body(c):
            it, theta, obj, post, _, tr = c
            it = it + 1
            new = jnp.concatenate(m_step(patterns, group, counts, n_groups, post, prior))
            new_obj, new_post = evaluate(new)
            finite = jnp.all(jnp.isfinite(new)) & jnp.isfinite(new_obj)
            # The reference rule: parameters AND objective both stopped moving.
            small = (jnp.max(jnp.abs(new - theta)) <= tol) & (jnp.abs(new_obj - obj) <= tol * (1.0 + jnp.abs(new_obj)))
            st = jnp.where(~finite, _NONFINITE, jnp.where(small, _CONVERGED, jnp.where(it >= max_iter, _MAX_ITER,
                                                                                         _RUNNING)))
            return it, new, new_obj, new_post, st, tr.at[it].set(new_obj)

        it, theta, obj, _, st, tr = jax.lax.while_loop(cond, body, (jnp.int32(0), th0, obj0, post0, status, trace))
        return theta, obj, it, st, tr

    return jax.vmap(one)(theta0)


def run_em(inputs, *, n_starts, seed, max_iter, tol, min_gap, prior_counts, starts=None, annotator_ids=None):
    """EM on prepared inputs. Returns a dict with the selected estimate and the bookkeeping (no warnings)."""
    n_ann, n_groups = inputs.n_annotators, inputs.n_groups
    if starts is not None:
        fpr0, tpr0, prev0 = _check_starts(starts, n_ann, n_groups)
    else:
        if n_starts < 1:
            raise ValueError("`n_starts` must be at least 1.")
        fpr0, tpr0, prev0 = em_starts(n_ann, n_groups, n_starts, seed)
    theta0 = np.concatenate([fpr0, tpr0, prev0], axis=1)
    ids = list(range(n_ann)) if annotator_ids is None else list(annotator_ids)
    with x64():
        # NumPy arguments: converting them with jnp would compile small programs of its own in a new process.
        args = (np.asarray(inputs.patterns, dtype=np.int32), np.asarray(inputs.row_group, dtype=np.int32),
                np.asarray(inputs.counts, dtype=np.float64))
        program = _em_program(args[0].shape[0], theta0.shape[0], n_annotators=n_ann, n_groups=n_groups,
                              prior=prior_counts, max_iter=int(max_iter))
        theta, obj, n_iter, status, trace = (np.asarray(v) for v in program(
            np.asarray(theta0, dtype=np.float64), *args, np.float64(tol)))
        out = select_start(theta, obj, n_iter, status, trace, n_annotators=n_ann, min_gap=min_gap,
                           max_iter=max_iter, annotator_ids=ids)
        if out["selected"] is not None:
            out["loglik"] = out["objective"] if prior_counts is None else float(
                ds_loglik(*args, jnp.asarray(out["fpr"]), jnp.asarray(out["tpr"]), jnp.asarray(out["prevalence"])))
    return out


def fit_em(data, *, model: str = "grouped", groups=Binning.equal_mass(5), n_starts: int = 10, seed: int = 0, prior=None,
           max_iter: int = 1000, tol: float = 1e-8, min_gap: float = 0.05, starts=None) -> FitResult:
    """Maximum-likelihood (or MAP) channels by EM in JAX, all starts at once.

    Parameters
    ----------
    data : AnnotationSet
        Labels (n_items, n_annotators), -1 = missing (missing at random; they drop out of the likelihood).
    model : {"grouped", "dawid_skene", "histogram"}, default "grouped"
        ``"dawid_skene"``: one prevalence (``groups`` ignored). ``"grouped"``: one prevalence per score
        group, channels shared (the paper's model). ``"histogram"``: the same with the dimension called
        ``bin``. ``"monotone"`` and ``"platt"`` have no closed-form M-step: use :func:`fit_map`.
    groups : Binning, int or int array of shape (n_items,), default ``Binning.equal_mass(5)``
        Score groups: a Binning (the default: five equal-mass groups), an int ``k`` meaning
        ``Binning.equal_width(k)`` as for ``bins`` (it warns: it used to mean equal mass), or a group label
        per item; empty groups are dropped.
    n_starts : int, default 10
        Random starts (:func:`em_starts`), run in parallel with ``jax.vmap``.
    seed : int, default 0
        Seed of the starts.
    prior : None or Prior
        None: maximum likelihood. A :class:`~noisycal_bayes.models.Prior`: the posterior mode in
        ``(fpr, tpr, prevalence)`` coordinates via Beta pseudo-counts
        (:meth:`~noisycal_bayes.models.Prior.em_pseudo_counts`; the default ``Prior()`` is flat there,
        so it gives the maximum-likelihood estimate).
    max_iter, tol, min_gap : see Notes.
    starts : tuple (fpr (S, J), tpr (S, J), prevalence (S, G)), optional
        Explicit starts instead of the random ones.

    Returns
    -------
    FitResult
        ``method="em"``, ``draws=None``; ``channel`` and ``prevalence`` the selected estimate,
        ``loglik`` the log-likelihood there, ``details`` with ``loglik_trace`` (objective at the start
        and after each iteration of the selected start), ``start_logliks``, ``selected_start``,
        ``failed_starts``.

    Raises
    ------
    ValueError
        Not an AnnotationSet; one annotator; unknown model or a model without closed-form EM; score
        groups without scores; a prior that EM cannot handle; bad numeric settings.

    Warns
    -----
    IdentifiabilityWarning
        Two annotators with the marginal model (paper §D.1); two annotators whose estimated group
        prevalences differ by less than 0.05.
    SmallGapWarning
        The best converged fit has a gap ``<= min_gap`` (it is screened out).
    ConvergenceWarning
        No start was accepted.

    Notes
    -----
    The rules (starts from :func:`em_starts`; ``theta_t = EMstep(theta_{t-1})`` in float64 until both the
    parameters and the objective stop moving by ``tol``; orientation by global label exchange; screening by
    ``min_gap``; the largest objective wins, ties to the lowest start index) are spelled out in
    :mod:`noisycal_bayes.core.starts`; ``noisycal_bayes.reference.fit_em`` implements them independently,
    and the two agree to rounding. No moment-estimator start is added; pass ``starts=`` to choose the starts.
    Paper §4.3 and Appendix F.1-F.2.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=0)
    >>> fit = fit_em(sim.data, model="grouped", groups=Binning.equal_mass(5), n_starts=3)
    >>> bool(np.allclose(fit.channel.fpr, [0.1, 0.2, 0.1], atol=0.05))
    True
    """
    func = "fit_em"
    prior_counts = em_prior_counts(prior)
    data, model, assignment, notes, inputs, settings = prepare_em(
        data, model=model, groups=groups, n_starts=n_starts, seed=seed, max_iter=max_iter, tol=tol, min_gap=min_gap,
        starts=starts, func=func)
    out = run_em(inputs, n_starts=settings["n_starts"], seed=seed, max_iter=settings["max_iter"], tol=settings["tol"],
                 min_gap=settings["min_gap"], prior_counts=prior_counts, starts=starts,
                 annotator_ids=data.annotator_ids)
    return em_result(data, model, assignment, inputs, out, prior, notes, func, loglik=out.get("loglik", np.nan),
                     settings=settings)


def start_point(data, inputs, model: str, seed: int = 0):
    """A maximum-likelihood EM estimate to start an optimiser or sampler from, as a ``point`` dict (or None).

    Grouped models: EM on their own compressed table (the monotone model then sorts the prevalences).
    Platt: channels from EM on 5 equal-mass score groups, and the slope and intercept from a weighted
    least-squares line through ``(mean logit score, logit prevalence)`` of those groups.
    """
    if model == "platt":
        assignment = resolve_assignment(data, "grouped", Binning.equal_mass(5), "start_point")
        em_inputs = prepare_inputs(data, "grouped", assignment)
    else:
        em_inputs = inputs
    out = run_em(em_inputs, n_starts=10, seed=seed, max_iter=1000, tol=1e-8, min_gap=0.0, prior_counts=None)
    if out["selected"] is None:
        return None
    if model != "platt":
        prev = np.sort(out["prevalence"]) if model == "monotone" else out["prevalence"]
        return point_dict(model, out["fpr"], out["tpr"], prev)
    s = np.asarray(inputs.logit_score)
    n_g = np.bincount(assignment.index, minlength=assignment.n_groups).astype(np.float64)
    s_g = np.bincount(assignment.index, weights=s, minlength=assignment.n_groups) / np.maximum(n_g, 1)
    p = np.clip(out["prevalence"], 0.01, 0.99)
    y = np.log(p) - np.log1p(-p)
    w = n_g / n_g.sum()
    sm, ym = w @ s_g, w @ y
    var = w @ (s_g - sm) ** 2
    slope = (w @ ((s_g - sm) * (y - ym))) / var if var > 0 else 1.0
    return point_dict("platt", out["fpr"], out["tpr"], slope=slope, intercept=ym - slope * sm)
