"""Bayesian bootstrap around an EM fit: replicate channels shaped like NUTS draws (one chain).

Each replicate reweights the items with Dirichlet(1, ..., 1) weights (Rubin 1981), sums the weights into the
fit's own compressed (group, pattern) counts, and refits EM on those counts from the full-data estimate
(the EM loop and rules of :mod:`noisycal_bayes.inference.em` on the steps of :mod:`noisycal_bayes.core.em`,
batched over replicates with ``jax.vmap``). A fit on sparse responses (``fit.details["path"] == "sparse"``)
is refitted on the same responses with the item weights, by the sparse EM loop of ``fit_em`` (replicates as
its batch axis). The replicates then stand in for posterior draws:
``posterior_nc_ece(data, bootstrap_em(data, fit), ...)`` propagates them exactly as it propagates NUTS draws.
This is the channel step of the command line's EM route; its coverage is in docs/coverage.md.
"""
from __future__ import annotations

import warnings
from functools import partial

import jax
import numpy as np

from .._validation import _preview, binary_only, check_positive_int
from ..core import score_groups, x64
from ..core.starts import BAD_START, CONVERGED, MAX_ITER, NONFINITE, START_EPS, orient, orient_crowd
from ..core.tables import Responses
from ..data import AnnotationSet
from ..models.em_result import sparse_args as _sparse_args
from ..models.inputs import ClassData, differing_items
from ..models.priors import em_prior_counts
from ..models.result import FitResult
from ..warnings import ConvergenceWarning
from ._em_loop import _pattern_steps, _sparse_program, em_loop
from .em import fit_em_multiclass


#: Warm starts are clipped into ``[START_CLIP, 1 - START_CLIP]``: EM from a rate of exactly 0 or 1 stays there
#: (the E-step gives that class zero weight), and its log-likelihood can be -inf (issue 16).
START_CLIP = START_EPS
#: Iteration budget of each replicate's EM (at least the fit's ``max_iter``). From the warm start EM converges
#: linearly, and slowly where the data say little (gaps of 0.3, two annotators: often beyond 1000 iterations, the
#: fit's default); dropping those replicates would keep only the fast-converging ones and narrow the interval.
REPLICATEMAX_ITER = 20000
#: Replicates refitted per call of the batched EM program (one compiled shape; the last batch is padded).
BATCH = 200
#: Share of failed replicates above which :func:`bootstrap_em` warns.
MAX_FAILED_SHARE = 0.05
#: Models with a closed-form EM (the only ones ``fit_em`` fits).
EM_MODELS = ("dawid_skene", "grouped", "histogram")


def _replicate_em(theta0, patterns, group, counts, tol, *, n_annotators, n_groups, prior, max_iter):
    """EM from ``theta0`` (K,) on one count vector: the :func:`~._em_loop.em_loop` of ``inference.em._run_all``
    (the same E- and M-steps, objective and stopping rule) without its trace.

    The trace is left out: under ``vmap`` each replicate writes it at its own iteration, which turns the write into
    a scatter that copies the whole (batch, max_iter) buffer every iteration. Returns ``(theta (K,), n_iter,
    status)``.
    """

    evaluate, em_map = _pattern_steps(patterns, group, counts, n_annotators=n_annotators, n_groups=n_groups,
                                      prior=prior)
    theta, _, it, st, _ = em_loop(theta0, evaluate, em_map, tol, max_iter=max_iter, keep_trace=False)
    return theta, it, st


def _batch_program(n_annotators: int, n_groups: int, prior, max_iter: int):
    """:func:`_replicate_em` mapped over a batch of count vectors (batch, n_rows), compiled once per configuration."""
    key = (n_annotators, n_groups, prior, max_iter)
    program = _PROGRAMS.get(key)
    if program is None:
        fn = partial(_replicate_em, n_annotators=n_annotators, n_groups=n_groups, prior=prior, max_iter=max_iter)
        program = _PROGRAMS[key] = jax.jit(jax.vmap(fn, in_axes=(None, None, None, 0, None)))
    return program


# Batched EM programs by static configuration (jit keeps one compiled version per input shape).
_PROGRAMS: dict = {}


def item_weights(seed, n_boot: int, n_items: int):
    """Dirichlet(1, ..., 1) weights of the items, one replicate at a time, scaled to sum to ``n_items``.

    Yields ``n_boot`` arrays of shape (n_items,): ``w = n E / sum(E)`` with ``E_i ~ Exponential(1)`` from
    ``numpy.random.default_rng(seed)`` (a normalised vector of i.i.d. exponentials is Dirichlet(1, ..., 1)).
    One replicate at a time keeps the memory at O(n_items).
    """
    rng = np.random.default_rng(seed)
    for _ in range(n_boot):
        e = rng.standard_exponential(n_items)
        yield e * (n_items / e.sum())


def _check(data, fit, n_boot):
    """Validate the arguments of :func:`bootstrap_em`; return ``n_boot`` as an int."""
    func = "bootstrap_em"
    if not isinstance(fit, FitResult):
        raise ValueError(f"{func}: `fit` must be a FitResult from fit_em; got {type(fit).__name__}.")
    binary_only(fit, func, "bootstrap_multiclass_nc_ece (which refits fit_em_multiclass per replicate)", name="fit")
    if fit.method != "em":
        raise ValueError(f"{func}: `fit` must be an EM fit (fit_em); got a {fit.method!r} fit. For NUTS the "
                         "posterior draws already carry the channel uncertainty.")
    if fit.model == "score_dependent":
        raise ValueError(f"{func}: refits of the score-dependent model are not implemented: 200 warm-started EM refits "
                         "took ten times the CPU of its Laplace draws on CIFAR-10N vehicle (docs/model_checks.md, "
                         "registration). Use fit_nuts(data, model='score_dependent') for its posterior, or "
                         "diagnostics.alternatives.fit_alternative(data, 'score_dependent', method='laplace').")
    if fit.model not in EM_MODELS:
        raise ValueError(f"{func}: model {fit.model!r} has no closed-form EM; expected one of {list(EM_MODELS)}.")
    if fit.channel is None or not fit.point:
        raise ValueError(f"{func}: the EM fit has no estimate ({fit.reason or 'every start failed'}); there is nothing "
                         "to bootstrap around. Refit with more starts.")
    n_boot = check_positive_int(n_boot, name="n_boot")
    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"{func}: `data` must be the AnnotationSet the EM was fitted on (the bootstrap reweights its "
                         f"items); got {type(data).__name__}.")
    inp = fit.inputs
    if inp.inverse is None or fit.groups.index is None:
        raise ValueError(f"{func}: this fit was made from SufficientStats, which keep no items to reweight; fit the "
                         "AnnotationSet itself.")
    if (data.n_items, data.n_annotators) != (inp.n_items, inp.n_annotators):
        raise ValueError(f"{func}: `data` must hold the items the EM was fitted on ({inp.n_items} items x "
                         f"{inp.n_annotators} annotators); got {data.n_items} x {data.n_annotators}.")
    diff = differing_items(inp, data)
    if diff.size:
        raise ValueError(f"{func}: the labels of `data` differ from the fitted ones at items "
                         f"{_preview(np.asarray(data.item_ids)[diff])}; pass the AnnotationSet the EM was fitted on.")
    return n_boot


def _warm_start(fit) -> np.ndarray:
    """The full-data estimate as one EM start (1, 2 J + G), clipped strictly inside (0, 1)."""
    prev = np.atleast_1d(np.asarray(fit.point["prevalence"], dtype=np.float64))
    theta = np.concatenate([np.asarray(fit.point["fpr"], np.float64), np.asarray(fit.point["tpr"], np.float64), prev])
    return np.clip(theta, START_CLIP, 1 - START_CLIP)[None]


def sparse_refits(fit, counts, tol, max_iter: int):
    """EM refits of a fit made on the sparse responses (``fit.inputs.sparse``), one per row of the item weights
    ``counts`` (S, n_items), each started at the fit's estimate: the fit's compiled sparse EM loop with the replicates
    as its batch axis. Returns its ``(theta (S, 2 J + G), objective, n_iter, status, trace)``, not oriented. Call
    inside ``x64()``. Used by :func:`bootstrap_em` and the weighted-likelihood refits of
    :mod:`noisycal_bayes.labels` (corrected accuracy, clean-label metrics)."""
    inp = fit.inputs
    program = _sparse_program(inp.n_annotators, inp.n_groups, em_prior_counts(fit.prior), max_iter, keep_trace=False)
    theta = np.repeat(_warm_start(fit), counts.shape[0], axis=0)
    return program(theta, *_sparse_args(inp), tol, np.ascontiguousarray(np.asarray(counts, np.float64).T))


def _refit(fit, weight_rows, n_boot: int, *, progress_bar: bool = False) -> dict:
    """EM refits on the weighted counts of ``weight_rows`` (an iterable of ``n_boot`` item-weight vectors).

    Returns ``theta`` (n_boot, 2 J + G) oriented by the label-exchange rule, ``status`` (n_boot,) (the EM
    status codes), ``n_iter`` (n_boot,), ``exchanged`` (n_boot,) bool.
    """
    inp = fit.inputs
    j, g = inp.n_annotators, inp.n_groups
    n_rows = inp.n_items if inp.sparse else inp.patterns.shape[0]
    settings = fit.settings or {}
    max_iter = max(int(settings.get("max_iter", 1000)), REPLICATEMAX_ITER)
    tol = float(settings.get("tol", 1e-8))
    theta0 = _warm_start(fit)[0]
    if inp.sparse:
        def program(theta0, counts, tol):
            out = sparse_refits(fit, counts, tol, max_iter)
            return out[0], out[2], out[3]
    else:
        batch = _batch_program(j, g, em_prior_counts(fit.prior), max_iter)
        args = (np.asarray(inp.patterns, np.int32), np.asarray(inp.row_group, np.int32))

        def program(theta0, counts, tol):
            return batch(theta0, *args, counts, tol)
    size = min(BATCH, n_boot)
    thetas, statuses, iters = [], [], []
    bar = None
    if progress_bar:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_boot, desc="bootstrap EM", leave=True)
    rows = iter(weight_rows)
    done = 0
    while done < n_boot:
        m = min(size, n_boot - done)
        counts = np.zeros((size, n_rows))
        for b in range(m):
            w = next(rows)
            # Weighted (group, pattern) counts: each item's weight added to its compressed row (sparse: the
            # item weights themselves).
            counts[b] = w if inp.sparse else np.bincount(inp.inverse, weights=w, minlength=n_rows)
        counts[m:] = counts[0]  # padding of the last batch (discarded)
        with x64():
            theta, n_iter, status = (np.asarray(v) for v in program(theta0, counts, np.float64(tol)))
        thetas.append(theta[:m])
        statuses.append(status[:m])
        iters.append(n_iter[:m])
        done += m
        if bar is not None:
            bar.update(m)
    if bar is not None:
        bar.close()
    theta, status, n_iter = np.concatenate(thetas), np.concatenate(statuses), np.concatenate(iters)
    exchanged = np.zeros(n_boot, bool)
    crowd = (fit.details or {}).get("orientation", "every") == "crowd"
    n_labels = inp.labels_per_annotator()
    for b in range(n_boot):
        # The fit's own orientation rule (a crowd fit keeps annotators with negative gaps).
        f, t, p, exchanged[b] = (orient_crowd(theta[b, :j], theta[b, j:2 * j], theta[b, 2 * j:], n_labels) if crowd
                                 else orient(theta[b, :j], theta[b, j:2 * j], theta[b, 2 * j:]))
        theta[b] = np.concatenate([f, t, p])
    return {"theta": theta, "status": status, "n_iter": n_iter, "exchanged": exchanged, "max_iter": max_iter}


def _draws(model: str, theta: np.ndarray, j: int) -> dict:
    """Replicates (n, 2 J + G) as NUTS-shaped draws: ``name -> (1, n, ...)``."""
    fpr, tpr = theta[:, :j], theta[:, j:2 * j]
    prev = np.clip(theta[:, 2 * j:], 0.0, 1.0)
    gap = tpr - fpr
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(fpr < 1, gap / (1 - fpr), 0.0)
    out = {"fpr": fpr, "tpr": tpr, "gap": gap, "u": u, "prevalence": prev[:, 0] if model == "dawid_skene" else prev}
    return {k: v[None] for k, v in out.items()}


def bootstrap_em(data, fit, *, n_boot: int = 200, seed: int = 0, progress_bar: bool = False) -> FitResult:
    """Bayesian bootstrap of an EM fit: channel replicates laid out like NUTS draws with one chain.

    Parameters
    ----------
    data : AnnotationSet
        The items ``fit`` was fitted on (n_items, n_annotators); their labels are checked against the fit.
    fit : FitResult
        From :func:`~noisycal_bayes.inference.fit_em` (``model`` "grouped", "histogram" or "dawid_skene").
    n_boot : int, default 200
        Replicates.
    seed : int, default 0
        Seed of ``numpy.random.default_rng`` for the item weights (no global seeding).
    progress_bar : bool, default False
        A tqdm bar over the replicates.

    Returns
    -------
    FitResult
        ``method="em_bootstrap"``; ``point``, ``channel``, ``groups``, ``inputs``, ``prior``, ``loglik`` those
        of ``fit`` (the full-data EM estimate); ``draws`` with one chain, ``fpr``, ``tpr``, ``gap``, ``u`` of
        shape (1, n_ok, n_annotators) and ``prevalence`` of shape (1, n_ok, n_groups) ((1, n_ok) for the
        marginal model), where ``n_ok`` is the number of replicates kept (converged, or stopped by ``max_iter`` at a
        finite point that passes the screen); ``sample_stats`` with ``n_iter`` (1, n_ok), the EM iterations of each
        replicate (so ``to_arviz()`` works); ``details`` with ``n_boot``, ``n_failed``, ``failed`` (replicate ->
        reason), ``n_unconverged`` (kept replicates stopped by ``max_iter``), ``n_iter`` per kept replicate,
        ``n_exchanged`` (replicates re-oriented by the label-exchange rule) and ``em_fit`` (``fit``).

    Raises
    ------
    ValueError
        ``fit`` is not an EM FitResult with an estimate, or was made from SufficientStats; ``n_boot < 1``;
        ``data`` is not the AnnotationSet of the fit; every replicate failed.

    Warns
    -----
    ConvergenceWarning
        More than 5% of the replicates failed (they are dropped); some replicates stopped at ``max_iter`` (kept; the
        result then has ``converged=False``).

    Notes
    -----
    Replicate ``b`` draws item weights ``w^b = n (E_1, ..., E_n) / sum_i E_i`` with ``E_i ~ Exponential(1)``,
    i.e. ``w^b / n ~ Dirichlet(1, ..., 1)`` (Rubin's Bayesian bootstrap), and forms weighted counts of the
    fit's compressed rows ``c^b_r = sum_{i: row(i) = r} w^b_i`` on the fit's own score groups. EM then
    maximises ``sum_r c^b_r log P(A_r | g_r; fpr, tpr, prevalence)`` (plus the fit's Beta log-kernels for
    MAP), started from the full-data estimate clipped into ``[1e-6, 1 - 1e-6]`` and stopped by the rules of
    ``fit_em`` (``tol`` from ``fit.settings``; ``max_iter`` raised to at least ``REPLICATEMAX_ITER`` = 20000:
    EM can converge slowly, and a budget cut would drop the slow replicates). The label-exchange rule of
    ``fit_em`` that made the fit (``fit.details["orientation"]``: every-gap or crowd) orients each replicate; a
    replicate fails when EM ends non-finite or (every-gap fits only) has a gap ``<= fit.settings["min_gap"]`` (the
    screen of ``fit_em``); one stopped by ``max_iter`` is kept at its last iterate, as ``fit_em`` keeps its best
    unconverged start. A fit on sparse responses is refitted on the
    responses with per-item weights ``w^b_i`` (the same weighted likelihood). With a smooth likelihood the replicates
    approximate the sampling distribution of the EM estimate (equivalently, a flat-prior posterior), so
    :func:`~noisycal_bayes.propagate.posterior_nc_ece` treats them as it treats posterior draws.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> from noisycal_bayes.inference import fit_em
    >>> sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], seed=0)
    >>> from noisycal_bayes.data import Binning
    >>> fit = fit_em(sim.data, groups=Binning.equal_mass(5), n_starts=3)
    >>> boot = bootstrap_em(sim.data, fit, n_boot=50, seed=1)
    >>> boot.method, boot.draws["gap"].shape, boot.draws["prevalence"].shape
    ('em_bootstrap', (1, 50, 3), (1, 50, 5))
    >>> sd = boot.draws["gap"][0].std(axis=0)
    >>> bool(np.all((sd > 0.005) & (sd < 0.05)))
    True
    """
    binary_only(data, "bootstrap_em", "bootstrap_multiclass_nc_ece (which refits fit_em_multiclass per replicate)")
    n_boot = _check(data, fit, n_boot)
    return _bootstrap(fit, item_weights(seed, n_boot, fit.inputs.n_items), n_boot,
                      settings={"n_boot": n_boot, "seed": seed}, progress_bar=progress_bar)


def _bootstrap(fit, weight_rows, n_boot: int, *, settings: dict, progress_bar: bool = False) -> FitResult:
    """:func:`bootstrap_em` on given item weights (an iterable of ``n_boot`` arrays of shape (n_items,))."""
    j = fit.inputs.n_annotators
    out = _refit(fit, weight_rows, n_boot, progress_bar=progress_bar)
    theta, status = out["theta"], out["status"]
    min_gap = float((fit.settings or {}).get("min_gap", 0.05))
    finite = np.all(np.isfinite(theta), axis=1)
    gap_ok = np.all(theta[:, j:2 * j] - theta[:, :j] > min_gap, axis=1)
    if (fit.details or {}).get("orientation", "every") == "crowd":
        gap_ok[:] = True  # the crowd rule screens no gaps (fit_em's rule 4)
    # fit_em's contract (core.starts rule 5): a replicate stopped by max_iter at a finite point that passes the
    # screen is kept at its last iterate (dropping the slow replicates would narrow the interval), and counted.
    late = (status == MAX_ITER) & finite & gap_ok
    failed = {}
    for b in np.flatnonzero(((status != CONVERGED) & ~late) | ~finite | ~gap_ok):
        failed[int(b)] = ("non-finite estimate" if not finite[b] or status[b] in (NONFINITE, BAD_START)
                          else f"gap <= min_gap={min_gap}" if not gap_ok[b]
                          else f"did not converge within {out['max_iter']} iterations")
    keep = np.array([b not in failed for b in range(n_boot)])
    notes = list(fit.warnings)
    n_late = int(np.sum(late))
    if n_late:
        msg = (f"bootstrap_em: {n_late} of {n_boot} replicates did not converge within max_iter={out['max_iter']} "
               "iterations; they are kept at their last iterate (the intervals include them). EM crawls where the "
               "likelihood is nearly flat: check the fit (identified, gaps, labels per annotator), or use fit_nuts.")
        warnings.warn(msg, ConvergenceWarning, stacklevel=3)
        notes.append(msg)
    if not keep.any():
        raise ValueError(f"bootstrap_em: all {n_boot} replicates failed ({sorted(set(failed.values()))}); the EM fit "
                         "is too fragile to bootstrap. Check the fit (identified, gaps) or use fit_nuts.")
    if len(failed) > MAX_FAILED_SHARE * n_boot:
        reasons = ", ".join(f"{r}: {list(failed.values()).count(r)}" for r in sorted(set(failed.values())))
        msg = (f"bootstrap_em: {len(failed)} of {n_boot} replicates failed and were dropped ({reasons}); the interval "
               "comes from the others and may be too narrow. Check the fit, or use fit_nuts.")
        warnings.warn(msg, ConvergenceWarning, stacklevel=3)
        notes.append(msg)
    details = {"n_boot": n_boot, "n_failed": len(failed), "failed": failed, "n_unconverged": n_late,
               "n_iter": out["n_iter"][keep],
               "n_exchanged": int(out["exchanged"][keep].sum()), "em_fit": fit}
    return FitResult(model=fit.model, method="em_bootstrap", channel=fit.channel, point=fit.point, groups=fit.groups,
                     inputs=fit.inputs, prior=fit.prior, annotator_ids=fit.annotator_ids,
                     draws=_draws(fit.model, theta[keep], j), sample_stats={"n_iter": out["n_iter"][keep][None]},
                     converged=fit.converged and n_late == 0 and len(failed) <= MAX_FAILED_SHARE * n_boot,
                     identified=fit.identified, reason=fit.reason, loglik=fit.loglik, n_iter=fit.n_iter,
                     failed_starts=fit.failed_starts, warnings=tuple(notes),
                     settings={**(fit.settings or {}), **settings}, details=details)


def multiclass_em_estimator(*, model: str = "grouped", n_quantiles: int = 2, n_starts: int = 4, refit_starts: int = 0,
                            seed: int = 0, max_iter: int = 1000, tol: float = 1e-8, prior=None, path: str = "auto",
                            population=None, population_options=None):
    """The ``estimator`` of :func:`~noisycal_bayes.reference.bootstrap_multiclass_nc_ece`: EM, warm-started refits.

    Parameters
    ----------
    model : {"grouped", "dawid_skene", "pooled"}, default "grouped"
        As in :func:`~noisycal_bayes.inference.fit_em_multiclass`; the grouped model's groups are
        :func:`~noisycal_bayes.core.score_groups` ``(probs, n_quantiles=n_quantiles)`` of the items passed (the
        replicate's items: the same recipe, predicted class x confidence quantile, on every replicate).
        ``"pooled"`` (crowds) refits the partially pooled Dawid-Skene from the warm start (population included unless
        ``population`` is given);
        it takes no starts, groups, ``prior`` or ``path`` of its own.
    population : array of shape (K, K), optional
        ``"pooled"`` only: the population ``alpha`` (the full-sample fit's ``prior[0]``) that every replicate (a call
        with ``init``) keeps fixed instead of refitting it
        (:func:`~noisycal_bayes.inference.population.fit_em_population`; why: docs/coverage.md, *Sparse K-class
        crowds on the EM route*). None refits the population too.
    population_options : dict, optional
        ``"pooled"`` only: keyword arguments of :func:`~noisycal_bayes.inference.population.fit_em_population` for
        every fit whose population is refitted (e.g. ``{"objective": "sampled_labels", "spread": 1.5}``, the
        population fitted to clean-label draws with per-annotator concentrations: docs/crowds.md, *Outlying
        annotators*); None: its defaults.
    n_quantiles : int, default 2
    n_starts : int, default 4
        Random starts besides the majority-vote start for a call without ``init`` (the full-sample fit).
    refit_starts : int, default 0
        Random starts besides the warm start for a call with ``init`` (a replicate): 0 refits from the full-sample
        fit alone, which is both faster and the mode that the replicate's likelihood surface has near the fit.
    seed, max_iter, tol, prior, path
        As in :func:`~noisycal_bayes.inference.fit_em_multiclass`.

    Returns
    -------
    callable
        ``estimator(responses, n_items, probs, *, init=None, gold=None) -> (confusion (J, K, K), prevalence)``;
        ``responses`` an ``(item, annotator, label)`` tuple, ``probs`` (n_items, K), ``init`` a
        ``(confusion, prevalence)`` warm start (:func:`~noisycal_bayes.inference.fit_em_multiclass`'s ``init``), ``gold`` (n_items,) observed
        clean labels (-1 unknown) of the items passed. ``prevalence`` is (K,) for ``"dawid_skene"`` and ``"pooled"``, (G, K)
        for ``"grouped"``.

    Raises
    ------
    ValueError
        Bad ``model`` or ``n_quantiles``; when called, as :func:`~noisycal_bayes.inference.fit_em_multiclass`.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_multiclass
    >>> sim = simulate_multiclass(2000, 3, 3, accuracy=0.8, seed=0)
    >>> est = multiclass_em_estimator(model="dawid_skene")
    >>> resp = (sim.item, sim.annotator, sim.label)
    >>> conf, prev = est(resp, 2000, sim.probs)
    >>> conf2, _ = est(resp, 2000, sim.probs, init=(conf, prev))  # a warm refit on the same data
    >>> bool(np.abs(conf2 - conf).max() < 1e-5), prev.shape
    (True, (3,))
    """
    if model not in ("grouped", "dawid_skene", "pooled"):
        raise ValueError(f"multiclass_em_estimator: `model` must be 'grouped', 'dawid_skene' or 'pooled'; got "
                         f"{model!r}.")
    if population_options is not None and model != "pooled":
        raise ValueError(f"multiclass_em_estimator: `population_options` are the pooled model's (model='pooled'); "
                         f"got model={model!r}.")
    if population_options is not None and not isinstance(population_options, dict):
        raise ValueError("multiclass_em_estimator: `population_options` must be None or a dict of "
                         f"fit_em_population keyword arguments; got {type(population_options).__name__}.")
    if population is not None and model != "pooled":
        raise ValueError(f"multiclass_em_estimator: `population` is the pooled model's (model='pooled'); got "
                         f"model={model!r}.")
    n_quantiles = check_positive_int(n_quantiles, name="n_quantiles")
    n_starts = check_positive_int(n_starts, name="n_starts", minimum=0)
    refit_starts = check_positive_int(refit_starts, name="refit_starts", minimum=0)

    def estimator(responses, n_items, probs, *, init=None, gold=None):
        item, ann, lab = (np.asarray(v) for v in responses)
        probs = np.asarray(probs, dtype=np.float64)
        K = probs.shape[1]
        J = int(ann.max()) + 1 if init is None else int(np.shape(init[0])[0])
        data = ClassData(Responses(item, ann, lab), int(n_items), J, K, probs, gold)
        if model == "pooled" and population is not None and init is not None:
            from .population import fit_em_population

            fit = fit_em_population(data, max_iter=max_iter, tol=tol, init=init, population=population)
            return np.asarray(fit.confusion), np.asarray(fit.prevalence[0])
        if model == "pooled" and population_options:
            from .population import fit_em_population

            fit = fit_em_population(data, max_iter=max_iter, tol=tol, init=init, **population_options)
            return np.asarray(fit.confusion), np.asarray(fit.prevalence[0])
        if model == "pooled":
            fit = fit_em_multiclass(data, model=model, max_iter=max_iter, tol=tol, init=init)
            return np.asarray(fit.confusion), np.asarray(fit.prevalence[0])
        groups = score_groups(probs, n_quantiles=n_quantiles) if model == "grouped" else None
        fit = fit_em_multiclass(data, model=model, groups=groups, n_starts=n_starts if init is None else refit_starts,
                                seed=seed, max_iter=max_iter, tol=tol, prior=prior, path=path, init=init)
        prev = fit.prevalence[0] if model == "dawid_skene" else fit.prevalence
        return np.asarray(fit.confusion), np.asarray(prev)

    return estimator
