"""EM starts, orientation, screening and selection, shared by the reference EM and the vectorised EM.

Both EMs (:func:`noisycal_bayes.fit_em`, vectorised with ``jax.vmap``, and
:func:`noisycal_bayes.reference.fit_em`, a plain loop over starts) must give identical answers from
identical starts, so every rule after the iteration itself lives here once: the random starts
(:func:`em_starts`), user starts (:func:`check_starts`), the label exchange (:func:`orient`), the
screening and the choice of the best accepted start (:func:`select_start`, ties within
:data:`TIE_RTOL`), and the texts of the failure and small-gap warnings.

The rules of both EMs, exactly (following them, the two agree to rounding from identical starts):

1. *Starts*: ``em_starts(J, G, n_starts, seed)``; ``starts=`` replaces them (a tuple, clipped into
   ``[START_EPS, 1 - START_EPS]``, or ``"vote"``: one start, the M-step at the items' vote fractions). No moment-estimator start
   is added (it was, for three or more annotators, before the two EMs shared one contract; pass
   ``starts=`` with :func:`~noisycal_bayes.reference.moments.moment_start` stacked under the random
   starts to reproduce such a fit).
2. *Iteration*: ``theta = (fpr, tpr, prevalence)``; ``theta_t = EMstep(theta_{t-1})``
   (:func:`noisycal_bayes.core.em_step`, float64, compressed patterns), objective ``l_t`` =
   log-likelihood (+ Beta log prior density for MAP). Stop at the first ``t <= max_iter`` with
   ``max|theta_t - theta_{t-1}| <= tol`` *and* ``|l_t - l_{t-1}| <= tol (1 + |l_t|)``: converged.
   Non-finite ``theta_t`` or ``l_t`` fails the start at once; reaching ``max_iter`` leaves it unconverged
   at its last iterate (still a candidate of rule 5's second tier).
3. *Orientation* (``orientation="every"``, the paper's rule for a few trusted annotators): if more than
   half the annotators have ``tpr < fpr`` (or exactly half and the summed gap is negative), exchange
   ``Y <-> 1 - Y``: ``(fpr, tpr) -> (tpr, fpr)``, ``prevalence -> 1 - prevalence``.
   ``orientation="crowd"``: exchange when the crowd's pooled gap ``sum_j n_j gap_j`` is negative, ``n_j``
   the number of labels of annotator ``j`` (:func:`orient_crowd`).
4. *Screening*: ``"every"``: accept a converged start if every gap ``tpr - fpr > min_gap``. ``"crowd"``:
   accept it if the pooled gap ``sum_j n_j gap_j / sum_j n_j > min_gap`` (the same screen at the crowd's
   level: a crowd whose labels say nothing about ``Y``, e.g. all labels equal, is not a fit); single
   annotators keep any gap: spammers (gap ~ 0) and adversaries (gap < 0) stay in the likelihood. ``"auto"``
   selects by ``"every"`` and, when no start passes its screen, by ``"crowd"`` from the same runs.
5. *Selection*: among accepted starts, those with objective ``>= best - 1e-9 (1 + |best|)`` tie;
   the lowest start index wins. Two tiers: first the converged starts (rules 3-4, ``"auto"``'s fallback to
   ``"crowd"`` included); only when none of them is accepted, the same rules applied to every start with a
   finite objective and parameters, converged or stopped by ``max_iter`` (``converged=False``: the caller warns).
   No estimate only when no start ends finite, or none that does passes the screen (``no_estimate`` says which).

Why the pooled gap (paper App. D.5): the likelihood is invariant under the global exchange ``Y <-> 1 - Y``,
so one of the two mirror solutions must be chosen by a constraint. Requiring *every* gap to be positive
(the paper's parametrisation) is a constraint on each annotator; it cannot represent a crowd with one
adversarial worker, whose gap is negative in the true orientation, and the fit then fails. Only the
exchange needs fixing: ``sum_j n_j gap_j`` is ``n`` times the gap of a label drawn at random from the
data (how much a typical label says about ``Y``), it changes sign under the exchange, and a spammer
(gap ~ 0) or one adversary with a minority of the labels cannot flip it.

Rules 1 and 3-5 are :func:`noisycal_bayes.core.starts.em_starts`, ``orient`` and ``select_start``. EM
never decreases the objective (the test suite asserts it along ``loglik_trace``). A converged start
certifies a stationary point, not the global maximum (paper §D.6): hence several starts.

**K classes** (``fit_em_multiclass``; the binary rules adapted, the EM loop and status codes shared):

K1. *Starts*: start 0 is the majority-vote start (:func:`class_vote_start`: the M-step at each item's vote
    distribution, gold items one-hot; the standard Dawid-Skene initialisation, crowd-kit's too), or the warm start
    ``init`` when given (:func:`check_warm_start`); then ``n_starts`` random diagonal-dominant starts
    (:func:`class_random_starts`: ``C_j[y, y] ~ U(0.5, 0.95)``, the rest of the row split by a flat Dirichlet;
    prevalence rows ~ Dirichlet(5)), reproducible from ``seed``. ``n_starts`` not given: none on the sparse path
    (crowds; binary's rule 1 default there), 4 on the pattern path.
K2. *Iteration*: ``theta = (confusion, prevalence)``, rule 2 with the objective log-likelihood plus the Dirichlet
    log-kernels for MAP.
K3. *Orientation*: the likelihood is invariant under relabelling the latent classes; the labelling is fixed by the
    crowd's average confusion ``Cbar = sum_j n_j C_j / sum_j n_j`` (``n_j`` the labels of annotator ``j``): a
    finite start is relabelled by the permutation maximising ``sum_y Cbar[y, sigma(y)]`` (an assignment problem,
    :func:`orient_classes`; for K = 2 the exchange of :func:`orient_crowd`). Screens (``orientation``, as rules 3-4):
    ``"every"`` accepts it when every row of ``Cbar`` has its strict maximum on the diagonal (class ``y``'s most
    frequent label is ``y``; :func:`diagonally_dominant`); ``"crowd"`` when the crowd gap
    ``(trace(Cbar) - 1) / (K - 1)`` exceeds ``min_gap`` (:func:`class_crowd_gap`; for K = 2 binary's pooled gap): a
    class that the crowd names less often than another (cf's fifth class) is kept; ``"auto"``: ``"every"``, and
    ``"crowd"`` when no start passes it.
K4. *Selection* (:func:`select_class_start`): among accepted (converged, oriented) starts the highest objective
    wins, ties within ``1e-9 (1 + |best|)`` to the lowest start index (``"auto"``: those accepted by ``"every"``
    first). When none is accepted, rule 5's second tier: the best accepted start stopped by ``max_iter``
    (``converged=False``, a ConvergenceWarning); when no start is accepted, the best converged (else finite) start
    with an IdentifiabilityWarning. No estimate (a ``ValueError``) only when no start ends finite.
"""
import numpy as np

from .._validation import _preview, check_positive_int


#: Random starts: fpr ~ U(FPR_RANGE), tpr ~ U(TPR_RANGE), prevalence ~ U(PREVALENCE_RANGE).
FPR_RANGE = (0.05, 0.45)
TPR_RANGE = (0.55, 0.95)
PREVALENCE_RANGE = (0.2, 0.8)


#: Values of the ``orientation`` keyword of both EMs (see rules 3-4 above).
ORIENTATIONS = ("auto", "every", "crowd")
#: Starts (user or warm) are clipped into ``[START_EPS, 1 - START_EPS]``: EM from a rate of exactly 0 or 1 stays
#: there (the E-step gives that class zero weight) and its log-likelihood can be -inf (issue 16, low noise).
START_EPS = 1e-6


#: Accepted starts whose objective is within this relative distance of the best are ties (lowest index wins).
TIE_RTOL = 1e-9
#: A K-class warm start (``init``) is mixed with the uniform rows by this much only (off exact zeros, far below
#: any tolerance).
WARM_EPS = 1e-13
#: Status of one EM run: still iterating, converged, non-finite parameters, ``max_iter`` reached, or a
#: non-finite objective at the start.
RUNNING, CONVERGED, NONFINITE, MAX_ITER, BAD_START = 0, 1, 2, 3, 4


def em_starts(n_annotators: int, n_groups: int, n_starts: int, seed: int = 0):
    """Random EM starts with ``fpr < 0.5 < tpr``, reproducible from ``seed``.

    Parameters
    ----------
    n_annotators, n_groups, n_starts : int
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    fpr : ndarray of shape (n_starts, n_annotators)
    tpr : ndarray of shape (n_starts, n_annotators)
    prevalence : ndarray of shape (n_starts, n_groups)

    Notes
    -----
    Exactly: ``rng = np.random.default_rng(seed)``; ``fpr = rng.uniform(0.05, 0.45, (S, J))``, then
    ``tpr = rng.uniform(0.55, 0.95, (S, J))``, then ``prevalence = rng.uniform(0.2, 0.8, (S, G))``, in
    this order. Starting with ``fpr < 0.5 < tpr`` avoids most label-swapped solutions (ENVIRONMENT.md).

    Examples
    --------
    >>> fpr, tpr, prevalence = em_starts(3, 2, 4, seed=0)
    >>> fpr.shape, tpr.shape, prevalence.shape
    ((4, 3), (4, 3), (4, 2))
    >>> bool((fpr < 0.5).all() and (tpr > 0.5).all())
    True
    """
    n_annotators = check_positive_int(n_annotators, name="n_annotators")
    n_groups = check_positive_int(n_groups, name="n_groups")
    n_starts = check_positive_int(n_starts, name="n_starts", minimum=0)
    rng = np.random.default_rng(seed)
    fpr = rng.uniform(*FPR_RANGE, size=(n_starts, n_annotators))
    tpr = rng.uniform(*TPR_RANGE, size=(n_starts, n_annotators))
    prevalence = rng.uniform(*PREVALENCE_RANGE, size=(n_starts, n_groups))
    return fpr, tpr, prevalence


def check_starts(starts, n_annotators: int, n_groups: int):
    """Validate user starts ``(fpr (S, J), tpr (S, J), prevalence (S, G))`` in [0, 1]; clip them into
    ``[START_EPS, 1 - START_EPS]`` (a start on the boundary would stay there: a near-perfect annotator's
    estimate, fpr = 0, is a valid warm start once moved inside)."""
    try:
        fpr, tpr, prev = (np.array(s, dtype=np.float64) for s in starts)
    except (TypeError, ValueError):
        raise ValueError("`starts` must be a tuple (fpr (S, J), tpr (S, J), prevalence (S, G)).") from None
    if fpr.ndim != 2 or fpr.shape[1] != n_annotators or tpr.shape != fpr.shape or prev.shape != (fpr.shape[0], n_groups):
        raise ValueError(f"`starts` must have shapes (S, {n_annotators}), (S, {n_annotators}), (S, {n_groups}); got "
                         f"{fpr.shape}, {tpr.shape}, {prev.shape}.")
    if fpr.shape[0] == 0:
        raise ValueError("`starts` is empty.")
    vals = np.concatenate([fpr.ravel(), tpr.ravel(), prev.ravel()])
    bad = ~np.isfinite(vals) | (vals < 0) | (vals > 1)
    if bad.any():
        raise ValueError(f"`starts` must lie in [0, 1]; got {_preview(vals[bad])}.")
    return tuple(np.clip(v, START_EPS, 1 - START_EPS) for v in (fpr, tpr, prev))


def check_orientation(orientation) -> str:
    """``orientation`` if it is one of :data:`ORIENTATIONS`, else a ``ValueError`` naming the choices."""
    if orientation not in ORIENTATIONS:
        raise ValueError(f"`orientation` must be one of {list(ORIENTATIONS)}; got {orientation!r}. Use 'every' for a "
                         "few trusted annotators (every gap > min_gap), 'crowd' for crowds with spammers or "
                         "adversarial workers.")
    return orientation


def orient(fpr, tpr, prevalence):
    """Global label exchange ``Y <-> 1 - Y`` when most annotators have ``tpr < fpr``.

    The exchange maps ``(fpr, tpr) -> (tpr, fpr)`` and ``prevalence -> 1 - prevalence`` (the likelihood
    is unchanged). Ties (exactly half the annotators reversed) go by the sign of the summed gaps; a
    summed gap of exactly 0 is left as it is. Returns ``(fpr, tpr, prevalence, exchanged)``.
    """
    gap = tpr - fpr
    n_rev = int(np.sum(gap < 0))
    if 2 * n_rev > gap.size or (2 * n_rev == gap.size and gap.sum() < 0):
        return tpr.copy(), fpr.copy(), 1.0 - prevalence, True
    return fpr, tpr, prevalence, False


def orient_crowd(fpr, tpr, prevalence, n_labels):
    """Global label exchange ``Y <-> 1 - Y`` when the crowd's pooled gap ``sum_j n_j (tpr_j - fpr_j)`` is negative.

    ``n_labels`` (n_annotators,) counts each annotator's labels. A pooled gap of exactly 0 is left as it
    is. Returns ``(fpr, tpr, prevalence, exchanged)``.

    Examples
    --------
    >>> import numpy as np
    >>> f, t, p, ex = orient_crowd(np.array([0.8, 0.1]), np.array([0.2, 0.7]), np.array([0.3]), np.array([10, 100]))
    >>> ex, f.tolist()  # the adversary (10 labels, gap -0.6) does not outweigh the 100 labels with gap 0.6
    (False, [0.8, 0.1])
    """
    if np.dot(np.asarray(n_labels, dtype=np.float64), tpr - fpr) < 0:
        return tpr.copy(), fpr.copy(), 1.0 - prevalence, True
    return fpr, tpr, prevalence, False


def failure_reason(status: int, n_iter: int, max_iter: int) -> str:
    """The text recorded for a start that did not converge (``status`` one of the codes above)."""
    return {BAD_START: "non-finite objective at the start",
            NONFINITE: f"non-finite parameters at iteration {n_iter}",
            MAX_ITER: f"did not converge within max_iter={max_iter} iterations"}[int(status)]


def select_start(theta, objective, n_iter, status, trace, *, n_annotators: int, min_gap: float, max_iter: int,
                 annotator_ids=None, orientation: str = "every", n_labels=None, unconverged: bool = True) -> dict:
    """Screen every EM run and select the estimate (the rules 3-5 of the module docstring).

    Parameters
    ----------
    theta : ndarray of shape (S, 2 J + G)
        Final ``concat(fpr, tpr, prevalence)`` of each start.
    objective : ndarray of shape (S,)
        Final objective (log-likelihood, plus the Beta log-kernels for MAP).
    n_iter, status : int arrays of shape (S,)
        Iterations run and status code (:data:`CONVERGED`, :data:`NONFINITE`, ...).
    trace : ndarray of shape (S, T), T > max(n_iter)
        Objective at the start and after each iteration (NaN-padded).
    n_annotators : int
    min_gap : float
        A start is accepted only if every oriented gap ``tpr - fpr`` exceeds it (``"every"``; ``"crowd"``: the
        pooled gap).
    max_iter : int
        For the failure text.
    annotator_ids : sequence, optional
        Names used in the texts (default ``0..J-1``).
    orientation : {"every", "crowd", "auto"}, default "every"
        Rules 3-4 of the module docstring.
    n_labels : array of shape (n_annotators,), optional
        Labels per annotator (the weights of the pooled gap); required unless ``orientation="every"``.
    unconverged : bool, default True
        Rule 5's second tier: when no converged start is accepted, select among the starts stopped by
        ``max_iter`` too. False selects among converged starts only.

    Returns
    -------
    dict
        ``failed`` (list of (start, reason); an unconverged start is listed even when selected),
        ``start_logliks`` (S,) (NaN where non-finite), ``n_starts_total``, ``best_rejected`` (``(objective, start,
        small-gap annotators, gaps)`` of the best start screened out for small gaps, when it beats every accepted
        one, else None), ``best_prevalence`` (oriented prevalence of the best finite start, converged or not, or
        None), ``selected`` (start index or None), ``converged`` (the selected start converged; False without a
        selection), ``no_estimate`` (without a selection: ``"nonfinite"`` when no start ended finite, else
        ``"screened"``; None with one) and, when one is selected, ``fpr``, ``tpr``, ``prevalence``, ``objective``,
        ``n_iter``, ``trace`` (length ``n_iter + 1``), ``label_exchanged``; ``orientation`` the rule that
        selected it (``"every"`` or ``"crowd"``; under ``"auto"`` the one that applied).
    """
    orientation = check_orientation(orientation)
    if orientation != "every" and n_labels is None:
        raise ValueError(f"select_start: orientation={orientation!r} needs `n_labels`.")
    runs = (theta, objective, n_iter, status, trace)
    kw = dict(n_annotators=n_annotators, min_gap=min_gap, max_iter=max_iter, annotator_ids=annotator_ids,
              orientation=orientation, n_labels=n_labels)
    out = _select_rule(*runs, converged_only=True, **kw)
    if out["selected"] is None and unconverged:
        # Rule 5's second tier: the same rules over every finite start, converged or stopped by max_iter.
        out = _select_rule(*runs, converged_only=False, **kw)
    finite = np.isfinite(np.asarray(objective, np.float64)) & np.all(np.isfinite(np.asarray(theta, np.float64)), axis=1)
    out["converged"] = out["selected"] is not None and int(np.asarray(status)[out["selected"]]) == CONVERGED
    out["no_estimate"] = None if out["selected"] is not None else ("screened" if finite.any() else "nonfinite")
    return out


def _select_rule(theta, objective, n_iter, status, trace, *, n_annotators, min_gap, max_iter, annotator_ids,
                 orientation, n_labels, converged_only):
    """:func:`select_start` for one tier: ``"every"``, ``"crowd"``, or ``"auto"`` (every, then crowd)."""
    kw = dict(n_annotators=n_annotators, min_gap=min_gap, max_iter=max_iter, annotator_ids=annotator_ids,
              converged_only=converged_only)
    if orientation == "crowd":
        return _select(theta, objective, n_iter, status, trace, n_labels=n_labels, **kw)
    out = _select(theta, objective, n_iter, status, trace, n_labels=None, **kw)
    if orientation == "auto" and out["selected"] is None:
        crowd = _select(theta, objective, n_iter, status, trace, n_labels=n_labels, **kw)
        if crowd["selected"] is not None:
            # The every-gap screen's rejections stay on record (they explain why "crowd" applied).
            crowd["screened_every"] = out["failed"]
            return crowd
    return out


def _select(theta, objective, n_iter, status, trace, *, n_annotators, min_gap, max_iter, annotator_ids, n_labels,
            converged_only=True):
    """:func:`select_start` under one rule: with ``n_labels`` the crowd rule (pooled-gap orientation, the pooled
    gap screened by ``min_gap``), else the every-gap rule (every gap screened by ``min_gap``). ``converged_only``:
    the first tier of rule 5 (converged starts); else starts stopped by ``max_iter`` at a finite point compete too."""
    crowd = n_labels is not None
    rule = "crowd" if crowd else "every"

    def oriented(th):
        f, t, p = th[:J], th[J:2 * J], th[2 * J:]
        return orient_crowd(f, t, p, n_labels) if crowd else orient(f, t, p)

    theta, objective = np.asarray(theta, dtype=np.float64), np.asarray(objective, dtype=np.float64)
    n_iter, status, trace = np.asarray(n_iter), np.asarray(status), np.asarray(trace)
    ids = list(range(n_annotators)) if annotator_ids is None else list(annotator_ids)
    J = n_annotators
    failed, fitted, best_rejected, best_any = [], {}, None, None
    for s in range(theta.shape[0]):
        obj, th = float(objective[s]), theta[s]
        finite = np.isfinite(obj) and np.all(np.isfinite(th))
        if finite and (best_any is None or obj > best_any[0]):
            best_any = (obj, oriented(th)[2])
        late = None  # why a start that competes in the second tier did not converge
        if status[s] != CONVERGED:
            if converged_only or status[s] != MAX_ITER or not finite:
                failed.append((s, failure_reason(status[s], n_iter[s], max_iter)))
                continue
            late = failure_reason(status[s], n_iter[s], max_iter)
        fpr, tpr, prev, swapped = oriented(th)
        gap = tpr - fpr
        head = "" if late is None else f"{late}; "
        if crowd:
            pooled = float(np.dot(n_labels, gap) / np.sum(n_labels))
            if not pooled > min_gap:
                failed.append((s, f"{head}pooled gap {pooled:.4g} <= min_gap={min_gap}: the crowd as a whole carries "
                                  "no information about the clean label"))
                continue
            small = np.zeros(0, int)
        else:
            small = np.flatnonzero(~(gap > min_gap))
        if small.size:
            failed.append((s, f"{head}gap <= min_gap={min_gap} for annotators {_preview([ids[j] for j in small])} "
                              f"(gaps {_preview(np.round(gap[small], 4))})"))
            if best_rejected is None or obj > best_rejected[0]:
                best_rejected = (obj, s, small, gap[small])
            continue
        if late is not None:
            failed.append((s, late))
        fitted[s] = (fpr, tpr, prev, obj, int(n_iter[s]), trace[s, :int(n_iter[s]) + 1], swapped)
    top = max((v[3] for v in fitted.values()), default=-np.inf)
    if best_rejected is not None and not best_rejected[0] > top + TIE_RTOL * (1.0 + abs(best_rejected[0])):
        best_rejected = None
    out = {"failed": failed, "start_logliks": np.where(np.isfinite(objective), objective, np.nan),
           "n_starts_total": theta.shape[0], "best_rejected": best_rejected,
           "best_prevalence": None if best_any is None else best_any[1], "selected": None, "orientation": rule}
    if fitted:
        sel = min(s for s, v in fitted.items() if v[3] >= top - TIE_RTOL * (1.0 + abs(top)))
        fpr, tpr, prev, obj, it, tr, swapped = fitted[sel]
        out.update(selected=sel, fpr=fpr, tpr=tpr, prevalence=prev, objective=obj, n_iter=it, trace=tr,
                   label_exchanged=swapped)
    return out


def small_gap_message(func: str, start: int, min_gap: float, names, gaps) -> str:
    """Warning text when the highest-objective converged fit was screened out for a gap ``<= min_gap``."""
    return (f"{func}: the highest-likelihood EM fit (start {start}) has gap <= min_gap={min_gap} for annotators "
            f"{_preview(list(names))} (gaps {_preview(np.round(gaps, 4))}): those annotators look uninformative, "
            "and correcting their labels would divide by a gap near zero (or they are adversarial, gap < 0). Drop them, "
            "lower `min_gap` to inspect the fit, or pass orientation='crowd' to keep them in the likelihood, flagged.")


def all_failed_message(func: str, n_total: int, failed, no_estimate: str = "screened") -> str:
    """Warning (and ``reason``) text when no EM start gave an estimate; lists the first six reasons.

    ``no_estimate`` (from :func:`select_start`): ``"nonfinite"`` when no start ended with a finite likelihood,
    ``"screened"`` when those that did all broke the orientation screen (rule 4); the advice differs."""
    reasons = "; ".join(f"start {s}: {r}" for s, r in failed[:6])
    more = f" (and {len(failed) - 6} more)" if len(failed) > 6 else ""
    if no_estimate == "nonfinite":
        why = "no start gave a finite likelihood"
        advice = ("Check the labels and score groups (e.g. a group or an annotator whose labels are all equal), try "
                  "other starts (more `n_starts`, or explicit starts), or pass a prior (`prior=`) to keep the rates "
                  "off 0 and 1.")
    else:
        why = "every start with a finite likelihood broke the orientation screen (rule 4 of core.starts)"
        advice = ("Check for uninformative annotators (drop them, or pass orientation='crowd' to keep them), lower "
                  "`min_gap`, or try more starts (`n_starts`)")
        advice += (", or raise `max_iter` (some starts stopped before converging)." if any(
            "did not converge" in r for _, r in failed) else ".")
    return f"{func}: all {n_total} EM starts failed, so there is no estimate: {why} ({reasons}{more}). {advice}"


def unconverged_message(func: str, max_iter: int, selection: dict,
                        other_starts: str = "`starts='vote'`, more `n_starts`") -> str:
    """Warning (and ``reason``) text when the estimate is an unconverged start (rule 5's second tier); ``selection``
    holds ``selected`` and ``objective``; ``other_starts`` names the caller's ways to choose other starts."""
    return (f"{func}: no EM start converged within max_iter={max_iter} iterations and passed the screen; the best "
            f"accepted start (start {selection['selected']}, objective {selection['objective']:.6g}) stopped at "
            "max_iter and is returned with converged=False. Raise `max_iter` (or loosen `tol`), or try other starts "
            f"({other_starts}); EM also crawls where the likelihood is nearly flat (weakly identified "
            "channels: few labels per annotator, score groups with similar prevalences).")


# ------------------------------------------------------------------------------------------------ K classes
def diagonally_dominant(confusion) -> np.ndarray:
    """Whether the annotators' average confusion is diagonally dominant, per draw.

    Parameters
    ----------
    confusion : array of shape (..., J, K, K)

    Returns
    -------
    ndarray of bool, shape (...)
        ``mean_j C[j, y, y] > mean_j C[j, y, a]`` for every row ``y`` and every ``a != y`` (the orientation
        constraint of the module docstring).

    Examples
    --------
    >>> c = np.array([[[0.8, 0.2], [0.3, 0.7]]])
    >>> bool(diagonally_dominant(c)), bool(diagonally_dominant(c[:, ::-1]))
    (True, False)
    """
    avg = np.asarray(confusion, np.float64).mean(axis=-3)
    k = avg.shape[-1]
    diag = np.diagonal(avg, axis1=-2, axis2=-1)
    off = np.where(np.eye(k, dtype=bool), -np.inf, avg)
    return np.all(diag > off.max(axis=-1), axis=-1)


def normalised_rows(x, eps=START_EPS):
    """Rows of ``x`` divided by their sums (uniform where a row sums to ~0), mixed with the uniform row by ``eps``."""
    # Rows mixed with the uniform row by ``eps``: EM from an exact zero cell stays at zero.
    s = x.sum(axis=-1, keepdims=True)
    out = np.where(s > 1e-12, x / np.where(s > 1e-12, s, 1.0), 1.0 / x.shape[-1])
    return (1 - eps) * out + eps / x.shape[-1]


def class_vote_start(item, annotator, label, group, *, n_items: int, n_annotators: int, n_classes: int, n_groups: int,
                     gold, conf_pc, prev_pc, compressed=None, item_weight=None):
    """Start 0: the M-step (with the prior's pseudo-counts) at each item's vote distribution (gold items one-hot),
    each item counted ``item_weight[i]`` times (None: once).

    On compressed rows (``compressed`` from :func:`~noisycal_bayes.data.compress.class_pattern_grid`) the vote distribution is that of each pattern;
    else ``N[j, y, a] = sum_{responses (i, j, a)} t[i, y]`` is one sparse product ``M t`` with ``M`` the
    (annotator-label key x item) response counts.
    """
    from scipy import sparse

    K, J, n = n_classes, n_annotators, n_items
    if compressed is not None:
        patterns, grid = compressed
        onehot = (patterns[:, :, None] == np.arange(K)).astype(np.float64)      # (P, J, K)
        votes = onehot.sum(axis=1)
        tp = np.where(votes.sum(1, keepdims=True) > 0, votes / np.maximum(votes.sum(1, keepdims=True), 1), 1.0 / K)
        n_jya = np.einsum("py,pja->jya", grid.sum(axis=0)[:, None] * tp, onehot)
        prev = grid @ tp
    else:
        ones = np.ones(item.size)
        votes = sparse.csr_matrix((ones, (item, label)), shape=(n, K)).toarray()
        tot = votes.sum(axis=1, keepdims=True)
        t = np.where(tot > 0, votes / np.maximum(tot, 1.0), 1.0 / K)
        if gold is not None:
            g = gold >= 0
            t[g] = np.eye(K)[gold[g]]
        if item_weight is not None:
            t = t * item_weight[:, None]
        m = sparse.csr_matrix((ones, (annotator * K + label, item)), shape=(J * K, n))
        n_jya = np.swapaxes(np.asarray(m @ t).reshape(J, K, K), 1, 2)           # (J, a, y) -> (J, y, a)
        prev = np.stack([np.bincount(group, weights=t[:, y], minlength=n_groups) for y in range(K)], axis=1)
    return normalised_rows(n_jya + conf_pc), normalised_rows(prev + prev_pc)


def class_random_starts(n_starts: int, J: int, K: int, G: int, seed: int):
    """``n_starts`` random diagonal-dominant starts ``(C (S, J, K, K), pi (S, G, K))`` (rule K1)."""
    rng = np.random.default_rng(seed)
    d = rng.uniform(0.5, 0.95, size=(n_starts, J, K))
    off = rng.dirichlet(np.ones(K - 1), size=(n_starts, J, K))
    C = np.zeros((n_starts, J, K, K))
    for y in range(K):
        others = [a for a in range(K) if a != y]
        C[:, :, y, y] = d[:, :, y]
        C[:, :, y, others] = (1 - d[:, :, y])[..., None] * off[:, :, y]
    prev = rng.dirichlet(5.0 * np.ones(K), size=(n_starts, G))
    return normalised_rows(C), normalised_rows(prev)


def check_warm_start(conf, prev, J: int, K: int, G: int, func: str):
    """``(C (J, K, K), pi (G, K))`` of a warm start, validated: a prevalence of shape (K,) is used for every group,
    ``None`` starts every group uniform. Rows are renormalised and mixed with the uniform matrix by :data:`WARM_EPS`
    (EM never leaves an exact zero cell; the cold starts' ``START_EPS`` would move a converged fit by more than the
    tolerance, and the refit would crawl back at EM's linear rate)."""
    conf = np.asarray(conf, dtype=np.float64)
    if conf.shape != (J, K, K):
        raise ValueError(f"{func}: `init` confusion must have shape ({J}, {K}, {K}); got {conf.shape}.")
    prev = np.full(K, 1.0 / K) if prev is None else np.asarray(prev, dtype=np.float64)
    if prev.shape == (K,):
        prev = np.broadcast_to(prev, (G, K))
    if prev.shape != (G, K):
        raise ValueError(f"{func}: `init` prevalence must have shape ({K},) or ({G}, {K}) (one row per group); got "
                         f"{prev.shape}.")
    for name, arr in (("confusion", conf), ("prevalence", prev)):
        rows = arr.sum(axis=-1)
        bad = ~(np.all(np.isfinite(arr), axis=-1) & np.all(arr >= 0, axis=-1) & (np.abs(rows - 1) <= 1e-6))
        if bad.any():
            raise ValueError(f"{func}: `init` {name} rows must be finite, >= 0 and sum to 1 (within 1e-6); rows "
                             f"{_preview([tuple(int(i) for i in r) for r in np.argwhere(bad)])} do not.")
    return normalised_rows(conf, WARM_EPS), normalised_rows(prev, WARM_EPS)


def _average_confusion(C, n_labels):
    w = np.asarray(n_labels, np.float64)
    return np.einsum("j,jya->ya", w, C) / w.sum()


def orient_classes(C, pi, n_labels):
    """``(C, pi, permutation or None, ok)``: relabel the latent classes so that the crowd's average confusion has
    its row maxima on the diagonal (rule K3); ``permutation[y]`` is the new index of latent class ``y``."""
    cbar = _average_confusion(C, n_labels)
    if diagonally_dominant(cbar[None]):
        return C, pi, None, True
    from scipy.optimize import linear_sum_assignment

    rows, sigma = linear_sum_assignment(-cbar)       # maximise sum_y Cbar[y, sigma(y)]
    inv = np.argsort(sigma)                           # the latent class that becomes class k
    C2, pi2 = C[:, inv, :], pi[:, inv]
    if np.array_equal(sigma, np.arange(cbar.shape[0])):
        return C, pi, None, False
    return C2, pi2, tuple(int(s) for s in sigma), bool(diagonally_dominant(_average_confusion(C2, n_labels)[None]))


def class_crowd_gap(confusion, n_labels) -> float:
    """The crowd's gap for K classes: ``(trace(Cbar) - 1) / (K - 1)`` of the label-count-weighted average confusion
    ``Cbar = sum_j n_j C_j / sum_j n_j`` (rule K3's ``"crowd"`` screen).

    It is 1 for a crowd of perfect annotators, 0 for one whose labels ignore the clean class (every row of ``Cbar``
    equal), negative when the crowd names other classes more often than the right one; for K = 2 it is the binary
    pooled gap ``sum_j n_j (tpr_j - fpr_j) / sum_j n_j`` (``C[1, 1] + C[0, 0] - 1 = tpr - fpr``), whose sign
    :func:`orient_crowd` fixes.

    Examples
    --------
    >>> c = np.array([[[0.9, 0.1], [0.3, 0.7]], [[0.5, 0.5], [0.5, 0.5]]])
    >>> round(class_crowd_gap(c, [3, 1]), 4)   # (3 * 0.6 + 1 * 0.0) / 4
    0.45
    """
    cbar = _average_confusion(np.asarray(confusion, np.float64), n_labels)
    return float((np.trace(cbar) - 1.0) / (cbar.shape[0] - 1))


def select_class_start(theta, objective, n_iter, status, *, shape, n_labels, max_iter: int, func: str,
                       orientation: str = "every", min_gap: float = 0.05):
    """Orient every finite K-class EM run (rule K3) and select the estimate (rule K4).

    ``theta`` (S, J K K + G K) holds each start's final ``concat(C.ravel(), pi.ravel())``, ``shape`` is
    ``(J, K, G)``. ``orientation`` (rule K3): ``"every"`` accepts a relabelled start whose crowd-average confusion
    has every row's maximum on the diagonal, ``"crowd"`` one whose crowd gap (:func:`class_crowd_gap`) exceeds
    ``min_gap``, ``"auto"`` the first and, when no start passes it, the second (binary's rules 3-5). Returns
    ``(start, C, pi, permutation, oriented, converged, objective, rule)`` of the selected start (``rule`` the screen
    that accepted it, or the one asked for when none did); a ValueError naming every start's failure when no start
    ends finite.
    """
    orientation = check_orientation(orientation)
    J, K, G = shape
    nc = J * K * K
    cands = []
    for s in range(theta.shape[0]):
        if not (np.isfinite(objective[s]) and np.all(np.isfinite(theta[s]))):
            continue
        C, pi = theta[s, :nc].reshape(J, K, K), theta[s, nc:].reshape(G, K)
        C, pi, perm, ok = orient_classes(C, pi, n_labels)
        crowd_ok = class_crowd_gap(C, n_labels) > min_gap
        cands.append((s, C, pi, perm, {"every": ok, "crowd": crowd_ok}, status[s] == CONVERGED, float(objective[s])))
    if not cands:
        failed = [(int(k), failure_reason(status[k], n_iter[k], max_iter)) for k in range(theta.shape[0])]
        raise ValueError(all_failed_message(func, theta.shape[0], failed, "nonfinite"))
    # The binary contract (rule 5) with rule K3 as the screen: converged accepted starts (under "auto": "every", then
    # "crowd"), else accepted starts stopped by max_iter; then, K-class only, the best converged (else finite) start
    # although no start is accepted (the caller warns).
    rules = ("every", "crowd") if orientation == "auto" else (orientation,)
    tiers = [(r, [c for c in cands if c[4][r] and c[5]]) for r in rules]
    tiers += [(r, [c for c in cands if c[4][r]]) for r in rules]
    tiers += [(None, [c for c in cands if c[5]]), (None, cands)]
    rule, pool = next((r, t) for r, t in tiers if t)
    top = max(c[6] for c in pool)
    s, C, pi, perm, oks, conv, obj = min((c for c in pool if c[6] >= top - TIE_RTOL * (1.0 + abs(top))),
                                         key=lambda c: c[0])
    return s, C, pi, perm, rule is not None, conv, obj, rule or rules[-1]


def orientation_message(confusion, func: str, what: str) -> str | None:
    """The IdentifiabilityWarning text when some of ``confusion`` (..., J, K, K) are not diagonally dominant (else None)."""
    ok = diagonally_dominant(confusion)
    frac_bad = float(1.0 - np.mean(ok))
    if frac_bad == 0.0:
        return None
    msg = (f"{func}: the annotators' average confusion matrix is not diagonally dominant in {frac_bad:.1%} of the "
           f"{what}: the class labelling (orientation) is not fixed there, or the crowd confuses some class with "
           "another more often than it names it. Check the fit's confusion matrices; add gold items or annotators.")
    return msg
