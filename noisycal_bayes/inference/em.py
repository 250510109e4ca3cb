"""EM (and MAP-EM) for the grouped Dawid-Skene models in JAX: all starts at once with ``vmap``.

The rules are those of the reference EM (``noisycal_bayes.reference.em.fit_em``, documented in its Notes)
so that the two agree to rounding from identical starts. Two paths, the same iteration and rules:

- ``"patterns"``: the E- and M-steps :func:`noisycal_bayes.core.em_step` on compressed, padded (group,
  pattern) counts, evaluated as ``core.em.m_step`` then ``core.em.e_step`` so that the objective and the
  next E-step share one pass. Cost per iteration ~ rows x annotators, independent of the number of items.
- ``"sparse"``: :func:`~noisycal_bayes.core.sparse.sparse_m_step` then
  :func:`~noisycal_bayes.core.sparse.sparse_e_step` on (item, annotator, label) responses with segment sums
  (gold labels as observed latent labels). Cost per iteration ~ responses; nothing items x annotators.

K classes (:func:`fit_em_multiclass`): the same iteration with the K-class steps of :mod:`noisycal_bayes.core.em`
(``"patterns"``: (group x pattern) counts, ``(K + 1)^J`` possible patterns per group; a few annotators, one label
per (item, annotator), no gold labels) and :mod:`noisycal_bayes.core.sparse` (``"sparse"``: segment sums over the
responses; crowds, repeated labels, gold labels). Its starts, orientation and selection are rules K1-K4 of
:mod:`noisycal_bayes.core.starts`; the compiled loops are in :mod:`._em_loop`.
"""
from __future__ import annotations

import warnings as _warnings
from dataclasses import replace

import numpy as np

from .._validation import _preview, check_em_settings, check_positive_int
from ..core import ds_loglik, x64
from ..core.likelihood import logsumexp_rows
from ..core.sparse import sparse_e_step
from ..core.starts import (START_EPS, TIE_RTOL, check_orientation, check_starts as _check_starts, check_warm_start,
                           class_random_starts,
                           class_vote_start, em_starts, select_class_start, select_start, unconverged_message)
from ..core import usable_confusions
from ..core.tables import Responses
from ..data.binning import Binning
from ..data.compress import class_pattern_grid
from ..data.outofcore import SufficientStats
from ..models.em_result import (choose_path, em_result, prepare_em, soft_counts, sparse_args as _sparse_args,
                                unusable_message)
from ..models.inputs import (ClassData, class_arrays, class_log_joint_items, prepare_inputs,
                             resolve_assignment, resolve_class_groups)
from ..models.priors import dirichlet_prior_counts, em_prior_counts
from ..models.result import FitResult, MulticlassEMFit, point_dict
from ..warnings import ConvergenceWarning, IdentifiabilityWarning, SmallGapWarning
from ._common import class_door
from ._em_loop import (DEFAULT_N_STARTS, DEFAULT_N_STARTS_K, _em_program, _pad_starts, _sparse_program, padded_class_responses,
                       resolve_accelerate as _resolve_accelerate, run_class_patterns, run_class_sparse)

__all__ = ["ACCELERATE_MIN_RESPONSES", "DEFAULT_N_STARTS", "PLAIN_STEPS", "TIE_RTOL", "em_starts", "fit_em",
           "fit_em_multiclass", "resolve_accelerate", "resolve_starts", "run_em", "start_point"]


def vote_start(inputs):
    """One EM start from the vote fractions (crowd-kit's initialisation): the M-step at ``T_i`` = the item's share
    of positive labels (its gold label where known), clipped into ``[START_EPS, 1 - START_EPS]``.

    Returns ``(fpr (1, J), tpr (1, J), prevalence (1, G))``. NumPy (the formulas of
    :func:`~noisycal_bayes.core.sparse.sparse_m_step`), so that it compiles nothing.
    """
    n_ann, n_groups = inputs.n_annotators, inputs.n_groups
    if inputs.sparse:
        item, ann, lab, group, gold = _sparse_args(inputs)
        n = np.bincount(item, minlength=inputs.n_items)
        vf = np.bincount(item, weights=lab, minlength=inputs.n_items) / np.maximum(n, 1)
        vf = np.where(gold >= 0, gold, vf)
        c = np.ones(inputs.n_items)
        w1 = vf[item]
        s1, n1 = np.bincount(ann, weights=w1 * lab, minlength=n_ann), np.bincount(ann, weights=w1, minlength=n_ann)
        c1, nl = np.bincount(ann, weights=lab, minlength=n_ann), np.bincount(ann, minlength=n_ann)
        s0, n0 = c1 - s1, nl - n1
    else:
        pat = np.asarray(inputs.patterns)
        group, c = np.asarray(inputs.row_group), np.asarray(inputs.counts, np.float64)
        obs, pos = (pat >= 0).astype(np.float64), (pat == 1).astype(np.float64)
        vf = pos.sum(1) / np.maximum(obs.sum(1), 1)
        s1, n1, s0, n0 = (c * vf) @ pos, (c * vf) @ obs, (c * (1 - vf)) @ pos, (c * (1 - vf)) @ obs
    with np.errstate(invalid="ignore", divide="ignore"):
        prev = (np.bincount(group, weights=c * vf, minlength=n_groups)
                / np.bincount(group, weights=c, minlength=n_groups))
        parts = (s0 / n0, s1 / n1, prev)
    # An annotator who labelled only unanimous-negative (or -positive) items has 0/0 for one rate: start at 0.5.
    return tuple(np.clip(np.nan_to_num(v, nan=0.5), START_EPS, 1 - START_EPS)[None] for v in parts)


#: ``accelerate="auto"`` turns SQUAREM on for sparse fits with at least this many responses: there an EM step
#: costs milliseconds and convergence hundreds of them; below it plain EM is fast and keeps the reference EM's
#: iterate sequence (identical traces, tests/inference/test_crowd_em.py).
ACCELERATE_MIN_RESPONSES = 100_000
#: ``accelerate="auto"`` in :func:`fit_em_multiclass` runs this many plain EM iterations before the SQUAREM cycles: a fit that plain EM stops by
#: then keeps the plain iterate sequence; the slow ones (sparse crowds: often past ``max_iter``) are accelerated.
PLAIN_STEPS = 100


def resolve_starts(starts, n_starts, sparse: bool, func: str = "fit_em"):
    """:func:`fit_em`'s starts: ``starts`` itself when given (``"vote"``, ``"random"`` or a tuple), else ``"vote"`` on
    the sparse path without ``n_starts`` and ``"random"`` otherwise."""
    if starts is None:
        return "vote" if sparse and n_starts is None else "random"
    if isinstance(starts, str) and starts not in ("vote", "random"):
        raise ValueError(f"{func}: `starts` must be None, 'vote', 'random' or a tuple (fpr (S, J), tpr (S, J), "
                         f"prevalence (S, G)); got {starts!r}.")
    return starts


def resolve_accelerate(accelerate, inputs) -> bool:
    """``accelerate`` (``"auto"``, True or False) for ``inputs``: whether the EM loop runs SQUAREM cycles
    (``"auto"``: sparse inputs with at least :data:`ACCELERATE_MIN_RESPONSES` responses)."""
    return _resolve_accelerate(accelerate, inputs.sparse, np.asarray(inputs.item).size if inputs.sparse else 0,
                               min_responses=ACCELERATE_MIN_RESPONSES)


def run_em(inputs, *, n_starts, seed, max_iter, tol, min_gap, prior_counts, starts=None, annotator_ids=None,
           orientation: str = "every", accelerate=False):
    """EM on prepared inputs (pattern or sparse, as ``inputs.sparse`` says). Returns a dict with the selected
    estimate and the bookkeeping (no warnings); with an estimate also ``soft_counts`` and ``n_labels``.
    ``starts``: None or ``"random"`` (``n_starts`` random starts), ``"vote"`` or a tuple; ``accelerate`` as in
    :func:`fit_em` (resolved by :func:`resolve_accelerate`; ``out["accelerated"]`` records it)."""
    n_ann, n_groups = inputs.n_annotators, inputs.n_groups
    accelerated = resolve_accelerate(accelerate, inputs)
    if isinstance(starts, str) and starts == "random":
        starts = None
    if isinstance(starts, str):
        if starts != "vote":
            raise ValueError(f"`starts` must be 'vote', 'random' or a tuple (fpr (S, J), tpr (S, J), prevalence "
                             f"(S, G)); got {starts!r}.")
        fpr0, tpr0, prev0 = vote_start(inputs)
    elif starts is not None:
        fpr0, tpr0, prev0 = _check_starts(starts, n_ann, n_groups)
    else:
        if n_starts < 1:
            raise ValueError("`n_starts` must be at least 1.")
        fpr0, tpr0, prev0 = em_starts(n_ann, n_groups, n_starts, seed)
    theta0 = np.concatenate([fpr0, tpr0, prev0], axis=1)
    ids = list(range(n_ann)) if annotator_ids is None else list(annotator_ids)
    n_labels = inputs.labels_per_annotator()
    with x64():
        if inputs.sparse:
            args = _sparse_args(inputs)
            # The segment layout (padded=None): measured as fast as the padded one for B = 1 and faster for B > 1,
            # without building the (n_items, L) code matrix.
            program = _sparse_program(n_ann, n_groups, prior_counts, int(max_iter), accelerate=accelerated)
        else:
            # NumPy arguments: converting them with jnp would compile small programs of its own in a new process.
            args = (np.asarray(inputs.patterns, dtype=np.int32), np.asarray(inputs.row_group, dtype=np.int32),
                    np.asarray(inputs.counts, dtype=np.float64))
            # The starts padded to a few sizes (copies of start 0, dropped below): one compiled program serves
            # every n_starts of a bucket (each start's loop is its own under vmap, so the kept ones are unchanged).
            theta0 = _pad_starts(theta0)
            program = _em_program(args[0].shape[0], theta0.shape[0], n_annotators=n_ann, n_groups=n_groups,
                                  prior=prior_counts, max_iter=int(max_iter))
        n_kept = fpr0.shape[0]
        theta, obj, n_iter, status, trace = (np.asarray(v)[:n_kept] for v in program(
            np.asarray(theta0, dtype=np.float64), *args, np.float64(tol)))
        out = select_start(theta, obj, n_iter, status, trace, n_annotators=n_ann, min_gap=min_gap,
                           max_iter=max_iter, annotator_ids=ids, orientation=orientation, n_labels=n_labels)
        if out["selected"] is not None:
            f, t, p = (np.asarray(out[k], np.float64) for k in ("fpr", "tpr", "prevalence"))  # no eager jnp ops
            if prior_counts is None:
                out["loglik"] = out["objective"]
            elif inputs.sparse:
                out["loglik"] = float(sparse_e_step(Responses(*args[:3]), args[3], f, t, p, gold=args[4])[0])
            else:
                out["loglik"] = float(ds_loglik(*args, f, t, p))
    out["accelerated"] = accelerated
    if out["selected"] is not None:
        out["soft_counts"] = soft_counts(inputs, out["fpr"], out["tpr"], out["prevalence"])
        out["n_labels"] = n_labels
    return out


@class_door("fit_em_multiclass", passed=("model", "n_starts", "seed", "prior", "max_iter", "tol", "min_gap", "orientation",
                                         "path", "accelerate"))
def fit_em(data, *, model: str = "grouped", groups=Binning.equal_mass(5), n_starts=None, seed: int = 0, prior=None,
           max_iter: int = 1000, tol: float = 1e-8, min_gap: float = 0.05, starts=None, orientation: str = "auto",
           path: str = "auto", accelerate="auto") -> FitResult:
    """Maximum-likelihood (or MAP) channels by EM in JAX, all starts at once.

    K classes: data with more than two classes (a :class:`~noisycal_bayes.data.MulticlassAnnotationSet`) go to
    :func:`fit_em_multiclass` with its own defaults and those of ``model``, ``groups`` (a group per item), ``n_starts``,
    ``seed``, ``prior``, ``max_iter``, ``tol``, ``min_gap``, ``orientation``, ``path`` and ``accelerate`` that the caller set (the others are
    binary: setting one is an error); the defaults below are those of binary data.

    Parameters
    ----------
    data : AnnotationSet
        Labels (n_items, n_annotators), -1 = missing (missing at random; they drop out of the likelihood).
    model : {"grouped", "dawid_skene", "histogram", "score_dependent"}, default "grouped"
        ``"dawid_skene"``: one prevalence (``groups`` ignored). ``"grouped"``: one prevalence per score
        group, channels shared (the paper's model). ``"histogram"``: the same with the dimension called
        ``bin``. ``"score_dependent"``: channels per score group partially pooled toward a shared centre (the
        model of ``fit_map(model="score_dependent")``); its posterior mode by EM with Newton M-steps
        (:func:`~noisycal_bayes.inference.score_em.fit_em_score_dependent`: the same mode as ``fit_map``'s, the
        result's :attr:`~noisycal_bayes.models.result.FitResult.group_channels` set; ``prior=None`` is the
        model's default prior, ``path`` the compressed rows, no SQUAREM). ``"monotone"`` and ``"platt"`` have no
        closed-form M-step: use :func:`fit_map`. ``"correlated"`` raises: its E-step would integrate a latent item
        effect; use ``fit_map`` or ``fit_nuts``.
    groups : Binning, int or int array of shape (n_items,), default ``Binning.equal_mass(5)``
        Score groups: a Binning (the default: five equal-mass groups), an int ``k`` meaning
        ``Binning.equal_width(k)`` as for ``bins`` (it warns: it used to mean equal mass), or a group label
        per item; empty groups are dropped.
    n_starts : int, optional
        Random starts (:func:`em_starts`), run in parallel with ``jax.vmap``. Giving it asks for random starts;
        left out, the starts follow ``starts`` (10 random starts where those are random).
    seed : int, default 0
        Seed of the random starts.
    prior : None or Prior
        None: maximum likelihood. A :class:`~noisycal_bayes.models.Prior`: the posterior mode in
        ``(fpr, tpr, prevalence)`` coordinates via Beta pseudo-counts
        (:meth:`~noisycal_bayes.models.Prior.em_pseudo_counts`; the default ``Prior()`` is flat there,
        so it gives the maximum-likelihood estimate).
    max_iter, tol, min_gap : see Notes.
    starts : None, "vote", "random" or tuple (fpr (S, J), tpr (S, J), prevalence (S, G)), default None
        None: ``"random"`` when ``n_starts`` is given or on the pattern path, else ``"vote"`` (the sparse path,
        crowds: one start instead of ten, measured as accurate on the crowd_gold sets, docs/crowds.md).
        ``"vote"``: one start, the M-step at the items' vote fractions (:func:`vote_start`; the standard
        Dawid-Skene initialisation, and crowd-kit's); on crowds it reaches the best of the random starts' optima in
        a fraction of their time (docs/crowds.md); ``n_starts`` and ``seed`` are then unused. ``"random"``:
        ``n_starts`` random starts from ``seed`` (:func:`em_starts`). A tuple: explicit starts in [0, 1]
        (clipped into ``[1e-6, 1 - 1e-6]``). ``settings["starts"]`` records the choice.
    orientation : {"auto", "every", "crowd"}, default "auto"
        How the label exchange ``Y <-> 1 - Y`` is fixed (:mod:`noisycal_bayes.core.starts`, rules 3-4).
        ``"every"``: the paper's constraint for a few trusted annotators: every gap ``> min_gap``, starts
        that break it are screened out (and the fit fails when none is left). ``"crowd"``: every annotator
        stays in the likelihood with its own gap of any sign; only the crowd's label-count-weighted mean gap
        must be positive, so spammers and adversarial workers neither flip nor break the fit. ``"auto"``:
        ``"every"`` when a start passes its screen, else ``"crowd"`` (with a :class:`SmallGapWarning`).
        ``details["orientation"]`` records the rule applied; the channel has that ``orientation``.
    path : {"auto", "patterns", "sparse"}, default "auto"
        Compressed (group, pattern) counts or sparse responses; ``"auto"`` takes the sparse path with gold
        labels or more than 12 annotators (:func:`~noisycal_bayes.models.em_result.choose_path`). The two
        give the same fit (to rounding) where both apply. ``details["path"]`` and ``details["path_reason"]``
        record the choice.
    accelerate : {"auto", True, False}, default "auto"
        Run the EM loop as SQUAREM cycles (Varadhan & Roland 2008; two EM steps, an extrapolation, one stabilising
        EM step, and a fallback to the two plain steps whenever the objective would decrease), sparse path only.
        ``"auto"``: on the sparse path with at least :data:`ACCELERATE_MIN_RESPONSES` responses. The stopping rule
        is the plain loop's, applied to the plain EM step that opens each cycle, so both stop at the same fixed
        point (to the plain loop's own distance from it); ``n_iter``, ``max_iter`` and ``loglik_trace`` then count
        cycles (three EM steps each). ``settings["accelerate"]`` records the choice.

    Returns
    -------
    FitResult
        ``method="em"``, ``draws=None``; ``channel`` and ``prevalence`` the selected estimate,
        ``loglik`` the log-likelihood there, ``details`` with ``loglik_trace`` (objective at the start
        and after each iteration of the selected start), ``start_logliks``, ``selected_start``,
        ``failed_starts``, ``path``, ``orientation``; ``annotators`` (:attr:`FitResult.annotators`) the
        per-annotator rates with 90% intervals and flags ("ok", "uninformative", "adversarial"). When no start
        converged within ``max_iter``, the best accepted start at its last iterate, with ``converged=False`` (and
        the warning in ``reason``); ``channel=None`` only when no start ends with a finite likelihood, or none that
        does passes the orientation screen (``reason`` says which).

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
        The best converged fit has a gap ``<= min_gap`` (it is screened out); ``"auto"`` fell back to the crowd
        orientation; annotators flagged "uninformative" or "adversarial" (named, up to 10 per flag).
    ConvergenceWarning
        No start converged (the best unconverged accepted start is returned), or no start was accepted.

    Notes
    -----
    The rules (starts from :func:`em_starts`; ``theta_t = EMstep(theta_{t-1})`` in float64 until both the
    parameters and the objective stop moving by ``tol``; orientation by global label exchange; screening by
    ``min_gap`` or the crowd rule; the largest objective wins, ties to the lowest start index; converged starts
    first, then those stopped by ``max_iter``) are spelled out in
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

    Channels per score group (every consumer of the fit reads ``group_channels``):

    >>> rich = fit_em(sim.data, model="score_dependent", n_starts=3)
    >>> rich.method, rich.group_channels[0].shape, rich.converged
    ('em', (1, 5, 3), True)
    """
    func = "fit_em"
    if model == "correlated":
        raise ValueError(f"{func}: model='correlated' has no EM here: its latent item effect b_i enters every "
                         "annotator's label, so the E-step is a joint posterior over (Y_i, b_i) and the M-step has no "
                         "closed form in the dependence scale (a Monte Carlo or quadrature EM, no cheaper than the "
                         "direct optimisation). Use fit_map(data, model='correlated') for its mode or "
                         "fit_nuts(data, model='correlated') for its posterior.")
    if model == "score_dependent":
        if path not in ("auto", "patterns") or accelerate not in ("auto", False):
            raise ValueError(f"{func}: model='score_dependent' runs on the compressed (group, pattern) rows without "
                             f"SQUAREM; `path` must be 'auto' or 'patterns' and `accelerate` 'auto' or False; got "
                             f"path={path!r}, accelerate={accelerate!r}.")
        from .score_em import fit_em_score_dependent
        return fit_em_score_dependent(data, groups=groups, n_starts=n_starts, seed=seed, prior=prior,
                                      max_iter=max_iter, tol=tol, min_gap=min_gap, starts=starts,
                                      orientation=orientation, func=func)
    prior_counts = em_prior_counts(prior)
    data, model, assignment, notes, inputs, settings = prepare_em(
        data, model=model, groups=groups, n_starts=DEFAULT_N_STARTS if n_starts is None else n_starts, seed=seed,
        max_iter=max_iter, tol=tol, min_gap=min_gap, starts=starts, func=func, orientation=orientation, path=path)
    starts = resolve_starts(starts, n_starts, inputs.sparse, func)
    accelerated = resolve_accelerate(accelerate, inputs)
    settings.update(starts=starts if isinstance(starts, str) else "given",
                    explicit_starts=not isinstance(starts, str), accelerate=accelerated)
    out = run_em(inputs, n_starts=settings["n_starts"], seed=seed, max_iter=settings["max_iter"], tol=settings["tol"],
                 min_gap=settings["min_gap"], prior_counts=prior_counts, starts=starts,
                 annotator_ids=data.annotator_ids, orientation=orientation, accelerate=accelerated)
    return em_result(data, model, assignment, inputs, out, prior, notes, func, loglik=out.get("loglik", np.nan),
                     settings=settings)


def start_point(data, inputs, model: str, seed: int = 0):
    """A maximum-likelihood EM estimate to start an optimiser or sampler from, as a ``point`` dict (or None).

    The selection of :func:`fit_em` (converged starts first, else the best one stopped by ``max_iter``: a start
    needs no convergence); None only when no EM start gives an estimate.

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


# ------------------------------------------------------------------------------------------------ K classes
def fit_em_multiclass(data, *, model: str = "grouped", groups=None, n_starts=None, seed: int = 0,
                      max_iter: int = 1000, tol: float = 1e-8, prior=None, path: str = "auto",
                      init=None, weights=None, accelerate="auto", orientation: str = "auto",
                      min_gap: float = 0.05) -> MulticlassEMFit:
    """Maximum-likelihood (or MAP) K x K confusion matrices and class prevalences by EM in JAX, all starts at once.

    Parameters
    ----------
    data : MulticlassAnnotationSet, MulticlassSimulation or SufficientStats
        Any object with ``responses`` (item, annotator, label), ``n_items``, ``n_annotators``, ``n_classes``,
        ``probs`` ((n_items, K) or None) and ``gold`` ((n_items,), -1 unknown, or None); or the output of
        :func:`~noisycal_bayes.simulate.simulate_multiclass`; or K-class
        :class:`~noisycal_bayes.data.SufficientStats` (out-of-core data): their (group, pattern) rows weighted by
        their counts, on the path the items would take, so the fit equals the fit of the items (identical on
        the patterns path, to rounding on the sparse one; ``groups`` must be None, the statistics' own groups,
        and the result's ``groups`` holds the group of each row).
    model : {"grouped", "dawid_skene", "pooled"}, default "grouped"
        ``"dawid_skene"``: one prevalence vector. ``"grouped"``: one per score group, confusions shared.
        ``"pooled"``: partially pooled confusions around a learned population
        (:func:`~noisycal_bayes.inference.population.fit_em_population`).
    groups : int array of shape (n_items,), optional
        Group of each item (``0..G-1``; a group without items keeps a uniform prevalence). Default
        :func:`~noisycal_bayes.core.score_groups` of ``data.probs`` (predicted class x 2 confidence quantiles), or
        one group without probs. Ignored by ``"dawid_skene"``.
    n_starts : int, optional
        Random diagonal-dominant starts, besides the majority-vote start (:mod:`noisycal_bayes.core.starts`, rule K1); 0 runs
        the vote start (or ``init``) only. Not given: 0 on the sparse path (crowds: the vote start alone, as
        :func:`fit_em`'s default there; it is the start selected on the public crowds, docs/crowds.md), 4 on the
        pattern path.
    seed : int, default 0
        Seed of the random starts.
    max_iter : int, default 1000
    tol : float, default 1e-8
        Convergence tolerance (rule K2).
    prior : None, float, (K, K) array or tuple, optional
        None: maximum likelihood. Otherwise Dirichlet concentrations (each >= 1) for MAP: ``alpha`` for every
        confusion row (a number or a (K, K) array, row ``y`` the concentration of ``C_j[y, :]``), or a tuple
        ``(alpha_confusion, alpha_prevalence)``. A weak prior such as ``1.01`` keeps near-perfect annotators' zero
        cells off the boundary and gives rows without any soft count a defined value.
    path : {"auto", "patterns", "sparse"}, default "auto"
        ``"auto"``: sparse with gold labels, repeated labels, or more possible patterns ``(K + 1)^J`` than items;
        else patterns. Both give the same fit (to rounding) where both apply.
    init : MulticlassEMFit or tuple, optional
        A warm start that replaces the majority-vote start as start 0: a previous fit, or ``(confusion (J, K, K),
        prevalence)`` with ``prevalence`` of shape (K,) (every group), (G, K) (one row per group) or None
        (uniform). A fit with another number of groups gives its item-weighted overall prevalence to every group.
        With ``n_starts=0`` the fit runs from ``init`` alone: the cheap refit of a bootstrap replicate at the
        full-sample fit (:func:`~noisycal_bayes.inference.multiclass_em_estimator`). The orientation and selection rules apply as usual.
        An annotator without a label in ``data`` keeps its ``init`` matrix (``data`` does not identify it, and no
        item depends on it): a bootstrap replicate of a sparse crowd that drew none of that annotator's items.
    weights : float array of shape (n_items,), optional
        Item ``i`` counted ``weights[i]`` times in the likelihood, the M-step, the vote start and the label counts
        of the orientation rule (None: once). With the distinct (group, response pattern) rows as items and their
        counts as weights this is the fit of the full data on the sparse path at the cost of the distinct rows (the
        refits of the K-class pattern check). Sparse path only (``path="auto"`` chooses it).
    accelerate : {"auto", True, False}, default "auto"
        Run the EM loop as SQUAREM cycles (:func:`~noisycal_bayes.inference.fit_em`'s ``accelerate``: the same
        cycle, safeguard and stopping rule, :func:`~noisycal_bayes.inference._em_loop.squarem_cycle`), sparse path
        only. ``"auto"``: on the sparse path without ``init``, after :data:`PLAIN_STEPS` plain iterations (a fit
        that plain EM stops by then is the plain fit; a warm refit from ``init`` stays plain); True: from the first
        iteration. ``n_iter``, ``max_iter`` and ``loglik_trace``
        then count the plain iterations and the cycles (three EM steps each). ``model="pooled"``: the same rule
        (:func:`~noisycal_bayes.inference.population.fit_em_population`'s ``accelerate``).
    orientation : {"auto", "every", "crowd"}, default "auto"
        Which labelling of the latent classes is accepted (rule K3, binary's ``orientation``): ``"every"``: every
        row of the crowd's average confusion has its maximum on the diagonal; ``"crowd"``: the crowd gap
        ``(trace - 1) / (K - 1)`` of that average exceeds ``min_gap`` (a class that the crowd confuses with another
        more often than it names it is kept); ``"auto"``: ``"every"`` when a start passes it, else ``"crowd"`` (with
        a :class:`SmallGapWarning`). ``details["orientation"]`` records the screen applied.
    min_gap : float, default 0.05
        The ``"crowd"`` screen's threshold.

    Returns
    -------
    MulticlassEMFit

    Raises
    ------
    ValueError
        No EM start ended with a finite likelihood; data of the wrong kind; fewer than two annotators or classes;
        labels, annotators or items out of range; bad ``groups``, ``prior``, ``path``, ``init`` (shapes, rows not on
        the simplex), ``weights`` or numeric settings; ``path="patterns"`` with repeats, gold labels or weights;
        annotators without a label and no ``init``.

    Warns
    -----
    IdentifiabilityWarning
        Two annotators and one group (K x K channels are not identified); no start passes the orientation screen
        (rule K3; the best one is returned with ``converged=False``).
    SmallGapWarning
        Annotators with a near-singular fitted confusion matrix (:func:`~noisycal_bayes.core.usable_confusions`);
        ``orientation="auto"`` accepted the fit by the crowd screen (no start passed the class-level one).
    ConvergenceWarning
        No start converged (the best one is returned with ``converged=False``; rule K4).

    Notes
    -----
    E- and M-steps: :mod:`noisycal_bayes.core.em` and :mod:`noisycal_bayes.core.sparse`; the starts, stopping rule, orientation and selection are
    rules K1-K4 of :mod:`noisycal_bayes.core.starts`. For K = 2 this is :func:`~noisycal_bayes.inference.fit_em` (same
    estimate to rounding, with ``fpr = C[:, 0, 1]``, ``tpr = C[:, 1, 1]``).

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_multiclass
    >>> sim = simulate_multiclass(4000, 3, 3, accuracy=0.8, seed=0)
    >>> fit = fit_em_multiclass(sim, model="dawid_skene", n_starts=2)
    >>> bool(np.abs(fit.confusion - sim.confusion).max() < 0.06), fit.path
    (True, 'patterns')
    """
    func = "fit_em_multiclass"
    stats = isinstance(data, SufficientStats)
    if model == "pooled" and stats:
        raise ValueError(f"{func}: model='pooled' reads the responses (sparse path); SufficientStats hold (group, "
                         "pattern) counts. Use model='grouped' or 'dawid_skene', or fit the MulticlassAnnotationSet.")
    if model == "pooled":   # the partially pooled Dawid-Skene (inference/population.py): one group, its own prior
        unused = [name for name, is_set in (("groups", groups is not None), ("prior", prior is not None),
                                            ("path", path != "auto"), ("n_starts", n_starts not in (None, 0)),
                                            ("orientation", orientation != "auto"), ("min_gap", min_gap != 0.05))
                  if is_set]
        if unused:
            raise ValueError(f"{func}: model='pooled' learns its own population prior from one vote start on the "
                             f"sparse path, with one prevalence vector; {', '.join(unused)} cannot be set with it "
                             "(use model='grouped' or 'dawid_skene' for them).")
        from .population import fit_em_population
        return fit_em_population(data, max_iter=max_iter, tol=tol, weights=weights, init=init, accelerate=accelerate)
    x = _stats_rows(data, func) if stats else class_arrays(data, func)
    if n_starts is not None:
        n_starts = check_positive_int(n_starts, name="n_starts", minimum=0)
    _, max_iter, tol, min_gap = check_em_settings(1, max_iter, tol, min_gap)
    orientation = check_orientation(orientation)
    J, K = x.n_annotators, x.n_classes
    if model not in ("grouped", "dawid_skene"):
        raise ValueError(f"{func}: `model` must be 'grouped' or 'dawid_skene' (or 'pooled' in fit_em_multiclass); "
                         f"got {model!r}.")
    if stats:
        group, G, groups_reason = _stats_groups(data, model, groups, func)
    else:
        group, G, groups_reason = resolve_class_groups(model, groups, n_items=x.n_items, n_classes=K, probs=x.probs,
                                                       func=func)
    if stats:  # the rows weighted by their counts; the path the items would take (the same fit, to rounding)
        if weights is not None:
            raise ValueError(f"{func}: SufficientStats weigh their (group, pattern) rows by their counts; `weights` "
                             "cannot be given with them.")
        weights = np.asarray(data.counts, dtype=np.float64)
        path, path_reason = choose_path(x._replace(n_items=data.n_items), path, func)
    elif weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (x.n_items,) or not np.all(np.isfinite(weights)) or (weights < 0).any():
            raise ValueError(f"{func}: `weights` must be None or finite non-negative numbers of shape ({x.n_items},), "
                             f"one per item; got shape {weights.shape}.")
        if path == "patterns":
            raise ValueError(f"{func}: path='patterns' does not take item `weights`; use path='sparse' or 'auto'.")
        path, path_reason = "sparse", "item weights"
    else:
        path, path_reason = choose_path(x, path, func)
    starts_rule = "given" if n_starts is not None else ("vote" if path == "sparse" else "random")
    if n_starts is None:  # rule K1: the vote start alone on the sparse path (crowds), random starts beside it otherwise
        n_starts = 0 if path == "sparse" else DEFAULT_N_STARTS_K
    # "auto": SQUAREM after PLAIN_STEPS plain iterations on the sparse path (fits that plain EM settles by then keep
    # its result); a warm refit (`init`, the bootstrap's) stays plain: from the fit it converges in a few steps.
    accelerated = _resolve_accelerate(accelerate, path == "sparse" and (init is None or accelerate is True),
                                     x.item.size, min_responses=0)
    plain_steps = PLAIN_STEPS if accelerated and isinstance(accelerate, str) else 0
    conf_pc, prev_pc = dirichlet_prior_counts(prior, K, func)
    notes = []
    n_labels = np.bincount(x.annotator, weights=None if weights is None else weights[x.item],
                           minlength=J).astype(np.float64)
    if (n_labels == 0).any():
        if init is None:
            raise ValueError(f"{func}: annotators {_preview(np.flatnonzero(n_labels == 0))} gave no label. Drop them, "
                             "or pass `init` to keep their confusion matrices at a previous fit.")
        return _fit_labelled(x, init, G, func, model=model, groups=groups, n_starts=n_starts, seed=seed,
                             max_iter=max_iter, tol=tol, prior=prior, path=path, accelerate=accelerate,
                             orientation=orientation, min_gap=min_gap)
    if J == 2 and len(np.unique(group)) == 1:
        notes.append((IdentifiabilityWarning,
                      f"{func}: two annotators and one group do not identify K x K channels (K^2 - 1 free cell "
                      "probabilities cannot pin 2 K (K - 1) + K - 1 parameters); the fit is one of many. Add "
                      "annotators, score groups or gold labels."))
    compressed = (class_pattern_grid(x.item, x.annotator, x.label, group, n_items=x.n_items, n_annotators=J,
                                     n_classes=K, n_groups=G, weights=weights) if path == "patterns" else None)
    if init is None:
        C0, p0 = class_vote_start(x.item, x.annotator, x.label, group, n_items=x.n_items, n_annotators=J, n_classes=K,
                                  n_groups=G, gold=x.gold, conf_pc=conf_pc, prev_pc=prev_pc, compressed=compressed,
                                  item_weight=weights)
    else:
        C0, p0 = _warm_start(init, J, K, G, func)
    Cr, pr = class_random_starts(n_starts, J, K, G, seed)
    theta0 = np.concatenate([np.concatenate([C0.ravel(), p0.ravel()])[None],
                             np.concatenate([Cr.reshape(n_starts, J * K * K), pr.reshape(n_starts, G * K)], axis=1)])  # explicit sizes: n_starts may be 0
    shape_c = (J, K, K)
    with x64():
        if path == "patterns":
            patterns, grid = compressed
            out = run_class_patterns(theta0, patterns, grid, conf_pc, prev_pc, np.float64(tol), max_iter=max_iter,
                                shape_c=shape_c)
        else:
            out = run_class_sparse(theta0, *padded_class_responses(x, group, weights), conf_pc, prev_pc, np.float64(tol), n_groups=G,
                              max_iter=max_iter, shape_c=shape_c, accelerate=accelerated, plain_steps=plain_steps)
        theta, obj, n_iter, status, trace = (np.asarray(v) for v in out)
    sel = select_class_start(theta, obj, n_iter, status, shape=(J, K, G), n_labels=n_labels, max_iter=max_iter,
                             func=func, orientation=orientation, min_gap=min_gap)
    s, C, pi, perm, ok, conv, objective, rule = sel
    if not conv:
        notes.append((ConvergenceWarning, unconverged_message(
            func, max_iter, {"selected": int(s), "objective": objective},
            other_starts="more `n_starts`, or `init=` a previous fit")))
    if not ok:
        what = ("a crowd gap (trace - 1) / (K - 1) of its average confusion matrix above min_gap="
                f"{min_gap}" if rule == "crowd" else "a crowd-average confusion matrix whose row maxima lie on the "
                "diagonal")
        notes.append((IdentifiabilityWarning,
                      f"{func}: no {'converged ' if conv else ''}start has {what}, even after relabelling the "
                      "classes: the crowd does not say which latent class is which. The highest-likelihood fit is "
                      "returned; add reliable annotators or gold labels."))
    elif rule == "crowd" and orientation == "auto":
        notes.append((SmallGapWarning,
                      f"{func}: no start has a crowd-average confusion matrix with every row's maximum on the diagonal "
                      "(the crowd names some class less often than another one), so orientation='auto' applied the "
                      f"crowd screen (crowd gap (trace - 1) / (K - 1) > min_gap={min_gap}). Pass orientation='every' "
                      "to require the class-level rule instead."))
    if path == "patterns":
        lp = _log_joint_patterns(patterns, C)[None, :, :] + np.log(np.clip(pi, 1e-12, 1.0))[:, None, :]
        loglik = float(np.sum(grid * logsumexp_rows(lp.reshape(-1, K)).reshape(grid.shape)))
    else:
        lj = class_log_joint_items(x, group, C, pi)
        loglik = float(np.sum(logsumexp_rows(lj) if weights is None else weights * logsumexp_rows(lj)))
    with x64():
        use = np.asarray(usable_confusions(C))
    if not use.all():
        notes.append((SmallGapWarning, unusable_message(func, np.flatnonzero(~use))))
    for cls, text in notes:
        _warnings.warn(text, cls, stacklevel=2)
    it = int(n_iter[s])
    prior_out = None if prior is None else (conf_pc + 1.0, prev_pc + 1.0)
    return MulticlassEMFit(confusion=C, prevalence=pi, groups=group, n_groups=G, log_likelihood=loglik, n_iter=it,
                           converged=bool(conv and ok), path=path, model=model, classes=x.classes,
                           warnings=tuple(t for _, t in notes), objective=objective,
                           start_logliks=np.where(np.isfinite(obj), obj, np.nan), selected_start=int(s),
                           loglik_trace=trace[s, :it + 1], path_reason=path_reason, groups_reason=groups_reason,
                           label_permutation=perm, prior=prior_out, n_labels=n_labels,
                           settings={"n_starts": int(n_starts), "starts": starts_rule, "orientation": orientation,
                                     "min_gap": float(min_gap), "accelerate": bool(accelerated)},
                           details={"orientation": rule})


def _stats_rows(stats: SufficientStats, func: str) -> ClassData:
    """K-class :class:`~noisycal_bayes.data.SufficientStats` as :class:`ClassData` whose items are the statistics'
    (group, pattern) rows; :func:`fit_em_multiclass` weighs them by their counts, which gives the (group x pattern)
    grid of the items themselves (patterns path) or their weighted likelihood (sparse path)."""
    if stats.classes is None:
        raise ValueError(f"{func}: these SufficientStats are binary (labels 0/1, no `classes`); fit them with fit_em.")
    if stats.n_items == 0:
        raise ValueError(f"{func}: these SufficientStats hold no items.")
    rows, cols = np.nonzero(np.asarray(stats.patterns) >= 0)
    responses = Responses(rows.astype(np.int64), cols.astype(np.int64),
                          np.asarray(stats.patterns)[rows, cols].astype(np.int64))
    return ClassData(responses, stats.n_patterns, stats.n_annotators, stats.n_classes, None, None, stats.classes)


def _stats_groups(stats: SufficientStats, model: str, groups, func: str):
    """``(group of each row, n_groups, reason)`` of a fit from K-class statistics: theirs, or one for Dawid-Skene."""
    if groups is not None:
        raise ValueError(f"{func}: with SufficientStats the groups are those the statistics were counted in "
                         f"({stats.n_groups}); pass groups=None, or recompute the statistics with other group labels.")
    if model == "dawid_skene":
        return np.zeros(stats.n_patterns, np.int32), 1, "one group (dawid_skene)"
    return np.asarray(stats.group, np.int32), stats.n_groups, "the statistics' groups"


def _warm_start(init, J: int, K: int, G: int, func: str):
    """``(C (J, K, K), pi (G, K))`` from ``init``: a :class:`MulticlassEMFit` or ``(confusion, prevalence)``.

    A fit with another number of groups gives its item-weighted overall prevalence to every group; the rest is
    :func:`~noisycal_bayes.core.starts.check_warm_start`.
    """
    if isinstance(init, MulticlassEMFit):
        conf, prev = init.confusion, init.prevalence
        if prev.shape[0] != G:
            w = np.bincount(init.groups, minlength=prev.shape[0]).astype(np.float64)
            prev = w @ prev / max(w.sum(), 1.0)  # overall prevalence: groups weighted by their items
    elif isinstance(init, tuple) and len(init) == 2:
        conf, prev = init
    else:
        raise ValueError(f"{func}: `init` must be None, a MulticlassEMFit or a tuple (confusion (J, K, K), prevalence "
                         f"(K,) or (G, K) or None); got {type(init).__name__}.")
    return check_warm_start(conf, prev, J, K, G, func)


def _fit_labelled(x: ClassData, init, G: int, func: str, **kwargs) -> MulticlassEMFit:
    """:func:`fit_em_multiclass` with ``init`` when some annotators have no label in ``x`` (a bootstrap replicate
    that drew none of their items): the annotators with labels are fitted, warm-started at ``init``; the others
    keep their ``init`` confusion matrix (relabelled with the fit's latent classes when rule K3 relabels them).

    The likelihood of ``x`` does not depend on the confusion matrix of an annotator without labels, and no item of
    ``x`` is corrected with it, so every value is a maximiser and the data's NC-ECE is the same for all; the warm
    start is the one that leaves a bootstrap's confusion draws centred at the full-sample fit.
    """
    J, K = x.n_annotators, x.n_classes
    C0, p0 = _warm_start(init, J, K, G, func)  # validated at full size
    kept = np.asarray(init.confusion if isinstance(init, MulticlassEMFit) else init[0], dtype=np.float64).copy()
    n_labels = np.bincount(x.annotator, minlength=J).astype(np.float64)
    present = np.flatnonzero(n_labels > 0)
    index = np.full(J, -1, np.int64)
    index[present] = np.arange(present.size)
    sub = ClassData(Responses(x.item, index[x.annotator], x.label), x.n_items, int(present.size), K, x.probs, x.gold)
    with _warnings.catch_warnings(record=True) as record:  # re-issued below with the full data's indices
        _warnings.simplefilter("always")
        fit = fit_em_multiclass(sub, init=(C0[present], p0), **kwargs)
    if fit.label_permutation is not None:  # the latent classes of the kept matrices follow the fit's relabelling
        kept = kept[:, np.argsort(fit.label_permutation), :]
    kept[present] = fit.confusion
    texts = []
    for w in record:
        text = str(w.message)
        if issubclass(w.category, SmallGapWarning):
            with x64():
                use = np.asarray(usable_confusions(fit.confusion))
            text = unusable_message(func, present[~use])
        texts.append(text)
        _warnings.warn(text, w.category, stacklevel=3)
    return replace(fit, confusion=kept, classes=x.classes, warnings=tuple(texts), n_labels=n_labels)


def _log_joint_patterns(patterns, confusion):
    """``log P(pattern_p | Y = y)``, shape (P, K) (NumPy, float64; -1 = missing adds 0)."""
    J, K = confusion.shape[0], confusion.shape[1]
    logc = np.concatenate([np.log(np.clip(confusion, 1e-12, 1.0)), np.zeros((J, K, 1))], axis=2)
    pat = np.where(patterns < 0, K, patterns)
    return logc[np.arange(J)[None, :], :, pat].sum(axis=1)
