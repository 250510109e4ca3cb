"""What both EMs do before and after their iterations: validation and inputs (:func:`prepare_em`), and the
:class:`~noisycal_bayes.models.result.FitResult` with its warnings (:func:`em_result`).

``noisycal_bayes.fit_em`` (vectorised) and ``noisycal_bayes.reference.fit_em`` (a plain loop) run their starts
independently, select with :func:`noisycal_bayes.core.starts.select_start`, and hand the selection here: the
warnings (small gap, every start failed, prevalences that barely differ) and the result are the same for both.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd

from .._validation import _preview, check_em_settings
from ..core.channel import MAX_CONDITION
from ..core.starts import all_failed_message, check_orientation, small_gap_message, unconverged_message
from ..data.design import check_design, check_prevalence_spread, require_two_annotators
from ..data.outofcore import SufficientStats
from .inputs import (PATHS, ClassData, check_data, check_model, prepare_inputs, repeat_count, resolve_assignment,
                     sparse_inputs)
from ..warnings import ConvergenceWarning, SmallGapWarning
from .result import FitResult, channel_from, point_dict


#: Models with a closed-form M-step (the others go to ``fit_map`` or ``fit_nuts``).
EM_MODELS = ("dawid_skene", "grouped", "histogram")
#: ``path="auto"`` takes the sparse path above this many annotators: with J annotators a group has up to
#: 3**J patterns, and beyond about a dozen sparse crowds rarely repeat a pattern, so compression stops paying
#: (each distinct row costs J cells against one cell per response on the sparse path).
SPARSE_MIN_ANNOTATORS = 12
#: Level of the per-annotator intervals in ``FitResult.annotators`` and of the flags derived from them.
ANNOTATOR_LEVEL = 0.9
#: How many annotators a flag warning names before summarising the rest by count.
MAX_NAMED = 10
#: Annotators with fewer labels than this get the exact conditional posterior on a grid instead of the Louis-scaled
#: Beta (see :func:`annotator_table`): there the missing-information scaling over-covers (docs/crowds.md).
GRID_LABELS = 50
#: Grid points per rate, uniform in arcsin(sqrt(p)), where the Jeffreys prior is flat.
GRID_SIZE = 64
#: At most this many (pair x grid cell) evaluations per fit (about 0.3 s); annotators with the fewest labels first.
GRID_BUDGET = 5e7


class CavityPairs(NamedTuple):
    """Per (item, annotator) pair: the annotator, its numbers of labels 1 and 0 on the item, the item's clean-label
    probability given the other annotators, and the pair's weight (``inference.em.cavity_pairs``); shape (P,)."""

    annotator: np.ndarray
    k1: np.ndarray
    k0: np.ndarray
    q: np.ndarray
    weight: np.ndarray


def choose_path(data, path: str, func: str = "fit_em") -> tuple[str, str]:
    """``(path, reason)``: the EM path for ``data`` (``path``: compressed counts or sparse responses) and why, any K.

    ``"auto"``: ``"sparse"`` when there are gold labels (observed clean labels, handled per item), repeated labels
    (each a response of its own: a pattern row holds one label per annotator) or when patterns do not compress:
    binary data with more than :data:`SPARSE_MIN_ANNOTATORS` annotators, K-class data
    (:class:`~noisycal_bayes.models.inputs.ClassData`) with more possible patterns ``(K + 1)^J`` than items;
    otherwise ``"patterns"``. SufficientStats always take the pattern path (they hold no responses).
    """
    if path not in PATHS:
        raise ValueError(f"{func}: `path` must be one of {list(PATHS)}; got {path!r}.")
    stats, classes = isinstance(data, SufficientStats), isinstance(data, ClassData)
    gold = None if stats else getattr(data, "gold", None)
    n_gold = 0 if gold is None else int(np.sum(np.asarray(gold) >= 0))
    observed = "observed clean labels" if classes else "observed latent labels"
    n_repeats = 0  # counted on the responses, never on a dense (items x annotators) mask (1e6 x 1e4: 10 GB)
    if classes:
        n_repeats = repeat_count(data.item, data.annotator, data.n_annotators)
    elif getattr(data, "has_repeats", False):  # (SufficientStats hold none)
        n_repeats = repeat_count(*data.responses[:2], data.n_annotators)
    space = (data.n_classes + 1) ** data.n_annotators if classes else 0  # Python ints: exact for a crowd
    if path == "sparse":
        if stats:
            raise ValueError(f"{func}: path='sparse' needs an AnnotationSet; SufficientStats hold compressed counts only.")
        return "sparse", "requested"
    if path == "patterns":
        if n_repeats > 0:
            raise ValueError(f"{func}: path='patterns' holds one label per (item, annotator); these data have "
                             f"{n_repeats} repeated labels. Use path='sparse' or 'auto'.")
        if n_gold:
            raise ValueError(f"{func}: path='patterns' cannot use the {n_gold} gold labels ({observed} enter item by "
                             "item); use path='sparse' or 'auto'.")
        if space > 2**62:
            raise ValueError(f"{func}: path='patterns' needs (K + 1)^J < 2^62 pattern codes; got (K + 1)^J = "
                             f"{data.n_classes + 1}^{data.n_annotators}. Use path='sparse'.")
        return "patterns", "requested"
    if stats:
        return "patterns", "SufficientStats (compressed counts)"
    if n_gold:
        return "sparse", f"{n_gold} gold labels ({observed})"
    if n_repeats > 0:
        return "sparse", f"{n_repeats} repeated labels (each a response of its own)"
    if classes:
        fits = space <= data.n_items
        why = f"(K + 1)^J = {space} possible patterns {'<=' if fits else '>'} {data.n_items} items"
        return ("patterns", why + " (patterns compress)") if fits else ("sparse", why + " (patterns do not compress)")
    if data.n_annotators > SPARSE_MIN_ANNOTATORS:
        return "sparse", f"{data.n_annotators} annotators > {SPARSE_MIN_ANNOTATORS} (patterns do not compress)"
    return "patterns", f"{data.n_annotators} annotators <= {SPARSE_MIN_ANNOTATORS} (patterns compress)"


def prepare_em(data, *, model: str, groups, n_starts, seed, max_iter, tol, min_gap, starts, func: str = "fit_em",
               orientation: str = "every", path: str = "patterns"):
    """Validate an EM call and prepare what its iterations run on (the same for both EMs).

    Returns
    -------
    tuple
        ``(data, model, assignment, notes, inputs, settings)``: the validated data and model, the
        :class:`~noisycal_bayes.models.inputs.GroupAssignment`, the design warnings issued
        (:func:`~noisycal_bayes.data.design.check_design`), the compressed
        :class:`~noisycal_bayes.models.inputs.ModelInputs`, and ``settings`` (``n_starts``, ``seed``,
        ``max_iter``, ``tol``, ``min_gap``, ``explicit_starts``, ``orientation``, ``path``, ``path_reason``)
        validated. On the sparse path ``inputs`` are :func:`~noisycal_bayes.models.inputs.sparse_inputs`.

    Raises
    ------
    ValueError
        Not an AnnotationSet / SufficientStats, a single annotator, an unknown model or one without a
        closed-form M-step, bad numeric settings, score groups without scores.
    """
    data = check_data(data, func)
    require_two_annotators(data, func)
    model = check_model(model, func)
    if model not in EM_MODELS:
        raise ValueError(f"{func}: model={model!r} has no closed-form M-step; use fit_map (optimiser) or fit_nuts.")
    n_starts, max_iter, tol, min_gap = check_em_settings(n_starts, max_iter, tol, min_gap)
    orientation = check_orientation(orientation)
    path, reason = choose_path(data, path, func)
    settings = dict(n_starts=n_starts, seed=seed, max_iter=max_iter, tol=tol, min_gap=min_gap,
                    explicit_starts=starts is not None, orientation=orientation, path=path, path_reason=reason)
    assignment = resolve_assignment(data, model, groups, func)
    notes = check_design(data, model, n_groups=assignment.n_groups, func=func, stacklevel=4)
    inputs = sparse_inputs(data, model, assignment) if path == "sparse" else prepare_inputs(data, model, assignment)
    return data, model, assignment, notes, inputs, settings


def _grid_quantiles(edges_cdf, probs, theta_edges):
    """Quantiles ``probs`` of a distribution given by its CDF at cell edges (uniform in theta), mapped to p."""
    return np.sin(np.interp(probs, edges_cdf, theta_edges)) ** 2


def conditional_intervals(pairs: CavityPairs, chosen, level: float):
    """Equal-tailed ``level`` intervals of fpr, tpr and gap for the ``chosen`` annotators from their posterior given
    the other annotators' channels: ``prod_pairs [q tpr^k1 (1 - tpr)^k0 + (1 - q) fpr^k1 (1 - fpr)^k0]^weight`` times
    the Jeffreys prior Beta(1/2, 1/2) on each rate, evaluated on a ``GRID_SIZE`` x ``GRID_SIZE`` grid uniform in
    ``arcsin(sqrt(p))`` (where that prior is flat, so the cell masses are the likelihood's).

    Returns a dict of arrays of shape (len(chosen),): ``fpr_lower, fpr_upper, tpr_lower, tpr_upper, gap_lower,
    gap_upper`` (NaN for annotators not chosen).
    """
    g = GRID_SIZE
    theta_edges = np.linspace(0.0, np.pi / 2, g + 1)
    rate = np.sin(0.5 * (theta_edges[1:] + theta_edges[:-1])) ** 2  # cell midpoints
    lr, l1r = np.log(rate), np.log1p(-rate)
    gap = rate[None, :] - rate[:, None]  # rows fpr, columns tpr
    order = np.argsort(gap, axis=None)
    a = (1 - level) / 2
    out = {k: np.full(len(chosen), np.nan) for k in ("fpr_lower", "fpr_upper", "tpr_lower", "tpr_upper",
                                                       "gap_lower", "gap_upper")}
    by_ann = np.argsort(pairs.annotator, kind="stable")
    starts = np.searchsorted(pairs.annotator[by_ann], np.arange(len(chosen) + 1))
    with np.errstate(divide="ignore"):
        lq, l1q = np.log(pairs.q), np.log1p(-pairs.q)
    for j in np.flatnonzero(chosen):
        idx = by_ann[starts[j]:starts[j + 1]]
        if idx.size == 0:
            continue
        # log rate^k1 (1 - rate)^k0 per pair and grid point; then the 2-D mixture over the pair's unknown Y.
        lp = pairs.k1[idx, None] * lr + pairs.k0[idx, None] * l1r
        wj, qj = pairs.weight[idx], pairs.q[idx]
        # Pairs whose clean label the others settle (q within 1e-8 of 0 or 1) separate: their term is the tpr's
        # (or fpr's) factor alone, up to log(1 + 1e-8 max b/a) < 1e-4 on this grid (rates >= sin^2(pi/256)).
        # Only the rest need the 2-D mixture, the expensive part.
        pos, neg = qj >= 1 - 1e-8, qj <= 1e-8
        mixed = ~(pos | neg)
        ll = (wj[neg] @ lp[neg])[:, None] + (wj[pos] @ lp[pos])[None, :]
        if mixed.any():
            lpm = lp[mixed]
            if lpm.min() > -600:
                # Linear space (one add and one log per cell, about 3x faster than logaddexp): rate^k1 (1 -
                # rate)^k0 >= e^-600 here, far from underflow.
                e = np.exp(lpm)
                term = np.log((qj[mixed, None] * e)[:, None, :] + ((1 - qj[mixed])[:, None] * e)[:, :, None])
            else:
                term = np.logaddexp((lq[idx][mixed, None] + lpm)[:, None, :], (l1q[idx][mixed, None] + lpm)[:, :, None])
            ll = ll + np.tensordot(wj[mixed], term, axes=1)
        mass = np.exp(ll - ll.max())
        mass /= mass.sum()
        for name, marg in (("fpr", mass.sum(1)), ("tpr", mass.sum(0))):
            cdf = np.r_[0.0, np.cumsum(marg)]
            out[f"{name}_lower"][j], out[f"{name}_upper"][j] = _grid_quantiles(cdf, [a, 1 - a], theta_edges)
        # The one-sided Jeffreys convention of the Beta route, for counts known only through q: when the most
        # likely number of the annotator's labels 1 on negative items is 0 (all its labels 1 fell on positives, with
        # probability prod q >= 1/2), the fpr's lower limit is 0; likewise the other three ends.
        w, k1, k0 = pairs.weight[idx], pairs.k1[idx] > 0, pairs.k0[idx] > 0
        # (np.where, not a product: log q is -inf where q = 0, and -inf * 0 would be NaN.)
        log_all = {"fpr_lower": np.sum(np.where(k1, w * lq[idx], 0.0)),
                   "tpr_lower": np.sum(np.where(k1, w * l1q[idx], 0.0)),
                   "fpr_upper": np.sum(np.where(k0, w * lq[idx], 0.0)),
                   "tpr_upper": np.sum(np.where(k0, w * l1q[idx], 0.0))}
        for end, lp_all in log_all.items():
            if lp_all >= np.log(0.5):
                out[end][j] = 0.0 if end.endswith("lower") else 1.0
        cg = np.cumsum(mass.ravel()[order])
        vals = gap.ravel()[order]
        out["gap_lower"][j] = vals[min(np.searchsorted(cg, a), vals.size - 1)]
        out["gap_upper"][j] = vals[min(np.searchsorted(cg, 1 - a), vals.size - 1)]
    return out


def annotator_table(ids, fpr, tpr, soft_counts, n_labels, *, level: float = ANNOTATOR_LEVEL) -> pd.DataFrame:
    """Per-annotator rates with intervals and a flag, from the E-step's soft counts at the estimate.

    Parameters
    ----------
    ids : sequence of length J
    fpr, tpr : arrays of shape (J,)
        The estimate.
    soft_counts : tuple of four or six arrays of shape (J,)
        ``(s0, n0, s1, n1[, m0, m1])``: ``n1_j = sum_{r: j_r = j} T_{i_r}`` (labels of items expected to be
        positive), ``s1_j = sum T_{i_r} A_r`` (of those, labelled 1); ``n0``, ``s0`` the same with ``1 - T``;
        ``m0``, ``m1`` the missing information about fpr and tpr (``inference.em.soft_counts``), optionally
        followed by the :class:`CavityPairs` of ``inference.em.cavity_pairs``.
    n_labels : array of shape (J,)
    level : float
        Interval level.

    Returns
    -------
    DataFrame with columns ``annotator, n_labels, fpr, fpr_lower, fpr_upper, tpr, tpr_lower, tpr_upper, gap,
    gap_lower, gap_upper, flag``.

    Notes
    -----
    Given the clean labels, annotator ``j``'s labels on positive items are Binomial(n1_j, tpr_j) and those on
    negative items Binomial(n0_j, fpr_j), independent. With the clean labels replaced by the E-step's
    posterior ``T`` (soft counts) the complete-data information about ``tpr_j`` is ``I_c = s1/tpr^2 +
    (n1 - s1)/(1 - tpr)^2``; not knowing ``Y`` removes ``m1`` of it (Louis 1982, the diagonal term: the other
    annotators' channels held fixed), so the counts are scaled to the observed share ``rho = 1 - m1 / I_c``
    (clipped to [0.01, 1]): ``Beta(rho s1 + 1/2, rho (n1 - s1) + 1/2)``, equal-tailed at ``level`` (fpr alike).
    The gap interval is ``gap -+ z sqrt(V_tpr + V_fpr)`` with the two Beta variances
    (``z = Phi^{-1}((1 + level) / 2)``), clipped to [-1, 1]. With a count of 0 (or all) the lower (upper) limit
    is 0 (1), the one-sided Jeffreys convention. The covariance with the other annotators' channels is left out;
    ``benchmarks/bench_crowds.py`` (section recovery) measures the coverage on simulated crowds.

    Annotators with fewer than :data:`GRID_LABELS` labels (with the cavity pairs given, and within
    :data:`GRID_BUDGET`, fewest labels first) get their intervals from their exact posterior given the other
    annotators' channels (:func:`conditional_intervals`, Jeffreys prior, equal-tailed; the gap's too): for them the
    Louis scaling above is a poor large-sample approximation and over-covers (docs/crowds.md).
    ``table.attrs["conditional"]`` marks them. Flags: ``"uninformative"`` when the gap interval contains 0,
    ``"adversarial"`` when it lies below 0, else ``"ok"``; the downstream rule
    (:func:`noisycal_bayes.core.channel.usable_annotators`) gives uninformative annotators weight 0.
    """
    from scipy import special  # betaincinv / ndtri: the Beta and normal quantiles without stats' overhead

    s0, n0, s1, n1 = (np.asarray(v, np.float64) for v in soft_counts[:4])
    missing = soft_counts[4:6] if len(soft_counts) >= 6 else (np.zeros_like(s0), np.zeros_like(s0))
    a = (1 - level) / 2
    out = {"annotator": list(ids), "n_labels": np.asarray(n_labels)}
    var = {}
    for name, est, s, n, m in (("fpr", fpr, s0, n0, missing[0]), ("tpr", tpr, s1, n1, missing[1])):
        p = np.clip(np.asarray(est, np.float64), 1e-9, 1 - 1e-9)
        with np.errstate(divide="ignore", invalid="ignore"):
            complete = s / p**2 + np.maximum(n - s, 0.0) / (1 - p) ** 2
            rho = np.clip(np.where(complete > 0, 1.0 - np.asarray(m, np.float64) / complete, 1.0), 0.01, 1.0)
        al, be = rho * s + 0.5, rho * np.maximum(n - s, 0.0) + 0.5
        out[name] = np.asarray(est, np.float64)
        # One-sided Jeffreys convention (Brown, Cai & DasGupta 2001): no label counted as 1 (x = 0) gives lower
        # limit 0, all of them (x = n) upper limit 1; the Beta quantile would exclude the observed value there.
        out[f"{name}_lower"] = np.where(rho * s <= 0, 0.0, special.betaincinv(al, be, a))
        out[f"{name}_upper"] = np.where(rho * np.maximum(n - s, 0.0) <= 0, 1.0, special.betaincinv(al, be, 1 - a))
        var[name] = al * be / ((al + be) ** 2 * (al + be + 1))
    gap = out["tpr"] - out["fpr"]
    half = special.ndtri(1 - a) * np.sqrt(var["fpr"] + var["tpr"])
    # A difference of two rates lies in [-1, 1]; the normal approximation can reach past it near the boundary.
    out.update(gap=gap, gap_lower=np.clip(gap - half, -1.0, 1.0), gap_upper=np.clip(gap + half, -1.0, 1.0))
    chosen = np.zeros(len(s0), bool)
    if len(soft_counts) >= 7 and soft_counts[6] is not None:
        pairs = soft_counts[6]
        n_pairs = np.bincount(pairs.annotator, minlength=len(s0))
        small = np.flatnonzero(np.asarray(n_labels) < GRID_LABELS)
        small = small[np.argsort(np.asarray(n_labels)[small], kind="stable")]
        # Within the budget, fewest labels first (their Beta approximation is the worst).
        within = np.cumsum(n_pairs[small]) * GRID_SIZE**2 <= GRID_BUDGET
        chosen[small[within]] = True
        exact = conditional_intervals(pairs, chosen, level)
        for k, v in exact.items():
            out[k] = np.where(chosen, v, out[k])
    flag = np.where(out["gap_upper"] < 0, "adversarial", np.where(out["gap_lower"] > 0, "ok", "uninformative"))
    out["flag"] = flag
    table = pd.DataFrame(out)
    table.attrs["level"] = level
    table.attrs["conditional"] = chosen
    return table


def flag_message(func: str, table: pd.DataFrame) -> str | None:
    """Warning text naming flagged annotators (up to :data:`MAX_NAMED` per flag), or None when all are ok."""
    parts = []
    flags, ids = table["flag"].to_numpy(dtype=object), table["annotator"].to_numpy(dtype=object)
    for flag, what in (("uninformative", "gap interval contains 0: weight 0 downstream"),
                       ("adversarial", "gap < 0, interval excludes 0: labels used with their sign")):
        names = ids[flags == flag].tolist()
        if names:
            more = f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
            parts.append(f"{len(names)} {flag} ({what}): {_preview(names[:MAX_NAMED])}{more}")
    if not parts:
        return None
    level = table.attrs.get("level", ANNOTATOR_LEVEL)
    return (f"{func}: {int(np.sum(flags != 'ok'))} of {len(table)} annotators are flagged at the {level:.0%} level; "
            + "; ".join(parts) + ". They stay in the likelihood; see `fit.annotators` for rates and intervals.")


def _data_note(data, inputs) -> str:
    """What the data hold, for the no-estimate text: items and labels, and whether every label is the same."""
    n_labels = inputs.labels_per_annotator()
    note = (f" The data: {inputs.n_items} items, {n_labels.sum():.0f} labels ({n_labels.min():.0f}-"
            f"{n_labels.max():.0f} per annotator).")
    responses = getattr(data, "responses", None)
    if responses is not None:
        lab = np.asarray(responses[2])
        if lab.size and np.all(lab == lab[0]):
            note += (f" Every label is {int(lab[0])}: nothing in them separates the classes; EM needs labels of "
                     "both values.")
    return note


def em_result(data, model: str, assignment, inputs, selection: dict, prior, notes, func: str, *, settings: dict,
              loglik: float = float("nan"), method: str = "em", stacklevel: int = 3) -> FitResult:
    """The FitResult of an EM fit from ``selection`` (the dict of ``select_start``), issuing its warnings.

    Parameters
    ----------
    data : AnnotationSet or SufficientStats
    model : str
    assignment : GroupAssignment
    inputs : ModelInputs
    selection : dict
        From :func:`~noisycal_bayes.core.starts.select_start`.
    prior : Prior, tuple of Beta pairs or None
        Stored in the result as given.
    notes : list of str
        Design warnings already issued (:func:`~noisycal_bayes.data.design.check_design`); any of them makes
        the fit ``identified=False``.
    func : str
        Name used in the warning texts.
    settings : dict
        How the fit was made; ``settings["min_gap"]`` is used in the small-gap text.
    loglik : float
        Log-likelihood at the selected estimate.

    ``selection`` may also hold ``soft_counts`` (``(s0, n0, s1, n1)`` at the estimate, see
    :func:`annotator_table`) and ``n_labels``; the result then carries ``details["annotators"]`` and a
    :class:`SmallGapWarning` names the flagged annotators.
    """
    ids = list(data.annotator_ids)
    design, notes = list(notes), list(notes)
    if selection["best_rejected"] is not None:
        _, s, small, gaps = selection["best_rejected"]
        msg = small_gap_message(func, s, settings["min_gap"], [ids[j] for j in small], gaps)
        warnings.warn(msg, SmallGapWarning, stacklevel=stacklevel)
        notes.append(msg)
    details = {"start_logliks": selection["start_logliks"], "n_starts_total": selection["n_starts_total"],
               "selected_start": -1 if selection["selected"] is None else selection["selected"],
               "path": settings.get("path", "patterns"), "path_reason": settings.get("path_reason", ""),
               "orientation": selection.get("orientation", "every")}
    common = dict(model=model, method=method, groups=assignment, inputs=inputs, prior=prior, annotator_ids=tuple(ids),
                  failed_starts=tuple(selection["failed"]), settings=settings, details=details)
    if selection["selected"] is None:
        # Weak identification also stalls EM: check the best start's prevalences even though none was accepted.
        if selection["best_prevalence"] is not None:
            notes += check_prevalence_spread(selection["best_prevalence"], data.n_annotators, model, func=func,
                                             stacklevel=stacklevel + 1)
        msg = all_failed_message(func, selection["n_starts_total"], selection["failed"],
                                 selection.get("no_estimate") or "screened") + _data_note(data, inputs)
        warnings.warn(msg, ConvergenceWarning, stacklevel=stacklevel)
        notes.append(msg)
        return FitResult(channel=None, point={}, converged=False, identified=False, reason=msg, warnings=tuple(notes),
                         **common)
    fpr, tpr, prev = selection["fpr"], selection["tpr"], np.clip(selection["prevalence"], 0.0, 1.0)
    notes += check_prevalence_spread(prev, data.n_annotators, model, func=func, stacklevel=stacklevel + 1)
    if selection.get("screened_every"):
        msg = (f"{func}: no start passed the every-gap screen (gap > min_gap={settings['min_gap']} for every "
               "annotator), so orientation='auto' fitted the crowd orientation (pooled gap > min_gap): every annotator is "
               "kept with its own gap. Pass orientation='every' to require the paper's constraint instead.")
        warnings.warn(msg, SmallGapWarning, stacklevel=stacklevel)
        notes.append(msg)
    # Rule 5's second tier (core.starts): an estimate from a start that stopped at max_iter, returned with a warning.
    converged = bool(selection.get("converged", True))
    unconverged = "" if converged else unconverged_message(func, settings["max_iter"], selection)
    if unconverged:
        warnings.warn(unconverged, ConvergenceWarning, stacklevel=stacklevel)
        notes.append(unconverged)
    if selection.get("soft_counts") is not None:
        table = annotator_table(ids, fpr, tpr, selection["soft_counts"], selection["n_labels"])
        details["annotators"] = table
        msg = flag_message(func, table)
        if msg is not None:
            warnings.warn(msg, SmallGapWarning, stacklevel=stacklevel)
            notes.append(msg)
    # Design problems (check_design): the estimate is one point of a set of channels with the same likelihood.
    identified, reason = not design, design[0] if design else unconverged
    details.update(loglik_trace=np.asarray(selection["trace"]), objective=selection["objective"],
                   label_exchanged=selection["label_exchanged"])
    channel = channel_from(fpr, tpr, ids, orientation=selection.get("orientation", "every"))
    return FitResult(channel=channel, point=point_dict(model, fpr, tpr, prev), converged=converged,
                     identified=identified, reason=reason, loglik=float(loglik), n_iter=int(selection["n_iter"]),
                     warnings=tuple(notes), **common)


# ------------------------------------------------------------------------------------------------ soft counts
def sparse_args(inputs):
    """NumPy arrays of the sparse path: responses, item groups and gold (-1 everywhere when there is none)."""
    gold = (np.full(inputs.n_items, -1, np.int32) if inputs.gold is None else np.asarray(inputs.gold, np.int32))
    return (np.asarray(inputs.item, np.int32), np.asarray(inputs.annotator, np.int32),
            np.asarray(inputs.label, np.int32), np.asarray(inputs.row_group, np.int32), gold)


def _log_odds(inputs, fpr, tpr, prevalence):
    """``(x, w0, w1, gold)``: each item's (sparse) or row's (patterns) posterior log-odds of ``Y = 1`` without its
    gold label, ``logit pi_g + sum_r [A w1_j + (1 - A) w0_j]`` with ``w1 = log(tpr/fpr)``, ``w0 = log((1 - tpr)/(1 -
    fpr))``; ``gold`` is None on the pattern path. NumPy, float64."""
    f = np.clip(np.asarray(fpr, np.float64), 1e-12, 1 - 1e-12)
    t = np.clip(np.asarray(tpr, np.float64), 1e-12, 1 - 1e-12)
    p = np.clip(np.atleast_1d(np.asarray(prevalence, np.float64)), 1e-12, 1 - 1e-12)
    w1, w0 = np.log(t) - np.log(f), np.log1p(-t) - np.log1p(-f)
    if inputs.sparse:
        item, ann, lab, group, gold = sparse_args(inputs)
        # One gather from the per-code table [w0_j, w1_j] (code 2 j + A) instead of two gathers and a select.
        x = np.bincount(item, weights=np.stack([w0, w1], axis=1).reshape(-1)[2 * ann + lab], minlength=inputs.n_items)
    else:
        pat = np.asarray(inputs.patterns)
        group, gold = np.asarray(inputs.row_group), None
        x = (pat == 1) @ w1 + (pat == 0) @ w0
    return x + (np.log(p) - np.log1p(-p))[group], w0, w1, gold


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # sigmoid without overflow


def _item_posterior(inputs, fpr, tpr, prevalence):
    """``T_i = P(Y_i = 1 | A_i)`` per item (sparse) or per row (patterns), in NumPy (float64, no compilation):
    ``sigmoid(logit pi_g + sum_r [A log(tpr/fpr) + (1 - A) log((1 - tpr)/(1 - fpr))])``, gold items their label."""
    x, _, _, gold = _log_odds(inputs, fpr, tpr, prevalence)
    post = _sigmoid(x)
    return post if gold is None else np.where(gold >= 0, gold, post)


def cavity_pairs(inputs, fpr, tpr, prevalence, annotators=None) -> CavityPairs:
    """Each (item, annotator) pair's labels and the item's clean-label probability given the OTHER annotators.

    For the pair of item ``i`` and annotator ``j``: ``k1``, ``k0`` = the numbers of labels 1 and 0 that ``j`` gave
    ``i`` (more than one with repeated labels), ``q = P(Y_i = 1 | labels of i by annotators other than j)`` at the
    estimate (the item's log-odds minus ``j``'s own log-likelihood ratios; the gold label where known) and the
    pair's weight (1, or the row count on the pattern path). Annotator ``j``'s likelihood given the others'
    channels is then ``prod_pairs [q tpr^k1 (1 - tpr)^k0 + (1 - q) fpr^k1 (1 - fpr)^k0]^weight``, which
    :func:`~noisycal_bayes.models.em_result.annotator_table` evaluates on a grid for annotators with few labels.
    ``annotators`` (bool, shape (J,)), optional: only the pairs of these annotators (the others' pairs would be
    unused; on a large crowd they are most of the responses). NumPy, float64.
    """
    x, w0, w1, gold = _log_odds(inputs, fpr, tpr, prevalence)
    if inputs.sparse:
        item, ann, lab, _, gold = sparse_args(inputs)
        if annotators is not None:
            keep = np.asarray(annotators, bool)[ann]
            item, ann, lab = item[keep], ann[keep], lab[keep]
        if item.size == 0:
            empty = np.zeros(0)
            return CavityPairs(np.zeros(0, np.int32), empty, empty, empty, empty)
        lr = np.stack([w0, w1], axis=1).reshape(-1)[2 * ann + lab]
        # Responses are sorted by item, then annotator: a pair's repeated labels are adjacent.
        first = np.r_[True, (item[1:] != item[:-1]) | (ann[1:] != ann[:-1])]
        pair = np.cumsum(first) - 1
        own, k1 = np.bincount(pair, weights=lr), np.bincount(pair, weights=lab)
        k = np.bincount(pair).astype(np.float64)
        i_pair = item[first]
        q = np.where(gold[i_pair] >= 0, gold[i_pair], _sigmoid(x[i_pair] - own))
        return CavityPairs(ann[first], k1, k - k1, q, np.ones_like(q))
    pat = np.asarray(inputs.patterns)
    c = np.asarray(inputs.counts, np.float64)
    cells = (pat >= 0) & (c[:, None] > 0)
    if annotators is not None:
        cells &= np.asarray(annotators, bool)[None, :]
    row, col = np.nonzero(cells)
    one = (pat[row, col] == 1).astype(np.float64)
    q = _sigmoid(x[row] - np.where(one > 0, w1[col], w0[col]))
    return CavityPairs(col, one, 1.0 - one, q, c[row])


def soft_counts(inputs, fpr, tpr, prevalence):
    """E-step soft counts at an estimate, ``(s0, n0, s1, n1, m0, m1)`` each of shape (n_annotators,) (float64),
    followed by the annotators' :func:`cavity_pairs`.

    ``n1_j = sum_r T_{i_r}`` over annotator ``j``'s responses (``T_i = P(Y_i = 1 | A_i)``, the gold label where
    known), ``s1_j = sum_r T_{i_r} A_r``; ``n0``, ``s0`` the same with ``1 - T``. ``m1_j`` is the missing
    information about ``tpr_j`` (Louis 1982, the diagonal term): ``sum_i T_i (1 - T_i) u_ij^2`` with ``u_ij =
    sum_{r in (i, j)} [A_r / tpr_j - (1 - A_r) / (1 - tpr_j)]`` the complete-data score of item ``i`` when
    ``Y_i = 1``; ``m0`` the same for fpr. Pattern inputs weight each compressed row by its count. Used for the
    per-annotator intervals (:func:`~noisycal_bayes.models.em_result.annotator_table`). NumPy: nothing to compile.
    """
    post = _item_posterior(inputs, fpr, tpr, prevalence)
    f = np.clip(np.asarray(fpr, np.float64), 1e-12, 1 - 1e-12)
    t = np.clip(np.asarray(tpr, np.float64), 1e-12, 1 - 1e-12)
    n = inputs.n_annotators
    if inputs.sparse:
        item, ann, lab, _, _ = sparse_args(inputs)
        code = 2 * ann + lab  # one gather per per-annotator quantity (code 2 j + A)
        w1 = post[item]
        # n1_j = sum T, s1_j = sum T A; n0 and s0 from the label counts (no products with A over the responses).
        n1 = np.bincount(ann, weights=w1, minlength=n)
        s1 = np.bincount(ann[lab == 1], weights=w1[lab == 1], minlength=n)
        n_lab, c1 = np.bincount(ann, minlength=n).astype(np.float64), np.bincount(ann, weights=lab, minlength=n)
        # Complete-data scores per response: A / r - (1 - A) / (1 - r), from per-code tables.
        u1 = np.stack([-1 / (1 - t), 1 / t], axis=1).reshape(-1)[code]
        u0 = np.stack([-1 / (1 - f), 1 / f], axis=1).reshape(-1)[code]
        # Scores summed per (item, annotator) pair first (repeated labels of one pair share one Y_i); responses
        # are sorted by item, then annotator, so a pair's repeats are adjacent.
        first = np.r_[True, (item[1:] != item[:-1]) | (ann[1:] != ann[:-1])]
        if not first.all():
            pair = np.cumsum(first) - 1
            u1, u0 = np.bincount(pair, weights=u1), np.bincount(pair, weights=u0)
            item, ann = item[first], ann[first]
        v = (post * (1 - post))[item]
        return (c1 - s1, n_lab - n1, s1, n1, np.bincount(ann, weights=v * u0**2, minlength=n),
                np.bincount(ann, weights=v * u1**2, minlength=n),
                cavity_pairs(inputs, fpr, tpr, prevalence, annotators=n_lab < GRID_LABELS))
    pat = np.asarray(inputs.patterns)
    c = np.asarray(inputs.counts, np.float64)
    obs, pos = (pat >= 0).astype(np.float64), (pat == 1).astype(np.float64)
    w1, w0 = c * post, c * (1 - post)
    cv = c * post * (1 - post)
    u1 = np.where(pos > 0, 1 / t, -1 / (1 - t)) * obs
    u0 = np.where(pos > 0, 1 / f, -1 / (1 - f)) * obs
    return (w0 @ pos, w0 @ obs, w1 @ pos, w1 @ obs, cv @ u0**2, cv @ u1**2,
            cavity_pairs(inputs, fpr, tpr, prevalence, annotators=c @ obs < GRID_LABELS))


# ------------------------------------------------------------------------------------------------ K classes
def unusable_message(func: str, annotators) -> str:
    """The SmallGapWarning text for the annotators (indices) whose fitted confusion matrix is near singular."""
    return (f"{func}: annotators {_preview(annotators)} have a near-singular fitted confusion matrix (condition number "
            f"> {MAX_CONDITION}): their labels say little about the clean label (spammers) and get weight 0 in "
            "corrected targets.")
