"""What both EMs do before and after their iterations: validation and inputs (:func:`prepare_em`), and the
:class:`~noisycal_bayes.models.result.FitResult` with its warnings (:func:`em_result`).

``noisycal_bayes.fit_em`` (vectorised) and ``noisycal_bayes.reference.fit_em`` (a plain loop) run their starts
independently, select with :func:`noisycal_bayes.core.starts.select_start`, and hand the selection here: the
warnings (small gap, every start failed, prevalences that barely differ) and the result are the same for both.
"""
from __future__ import annotations

import warnings

import numpy as np

from .._validation import check_em_settings
from ..core.starts import all_failed_message, small_gap_message
from ..data.design import check_design, check_prevalence_spread, require_two_annotators
from .inputs import check_data, check_model, prepare_inputs, resolve_assignment
from ..warnings import ConvergenceWarning, SmallGapWarning
from .result import FitResult, channel_from, point_dict


#: Models with a closed-form M-step (the others go to ``fit_map`` or ``fit_nuts``).
EM_MODELS = ("dawid_skene", "grouped", "histogram")


def prepare_em(data, *, model: str, groups, n_starts, seed, max_iter, tol, min_gap, starts, func: str = "fit_em"):
    """Validate an EM call and prepare what its iterations run on (the same for both EMs).

    Returns
    -------
    tuple
        ``(data, model, assignment, notes, inputs, settings)``: the validated data and model, the
        :class:`~noisycal_bayes.models.inputs.GroupAssignment`, the design warnings issued
        (:func:`~noisycal_bayes.data.design.check_design`), the compressed
        :class:`~noisycal_bayes.models.inputs.ModelInputs`, and ``settings`` (``n_starts``, ``seed``,
        ``max_iter``, ``tol``, ``min_gap``, ``explicit_starts``) validated.

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
    settings = dict(n_starts=n_starts, seed=seed, max_iter=max_iter, tol=tol, min_gap=min_gap,
                    explicit_starts=starts is not None)
    assignment = resolve_assignment(data, model, groups, func)
    notes = check_design(data, model, n_groups=assignment.n_groups, func=func, stacklevel=4)
    return data, model, assignment, notes, prepare_inputs(data, model, assignment), settings


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
    """
    ids = list(data.annotator_ids)
    design, notes = list(notes), list(notes)
    if selection["best_rejected"] is not None:
        _, s, small, gaps = selection["best_rejected"]
        msg = small_gap_message(func, s, settings["min_gap"], [ids[j] for j in small], gaps)
        warnings.warn(msg, SmallGapWarning, stacklevel=stacklevel)
        notes.append(msg)
    details = {"start_logliks": selection["start_logliks"], "n_starts_total": selection["n_starts_total"],
               "selected_start": -1 if selection["selected"] is None else selection["selected"]}
    common = dict(model=model, method=method, groups=assignment, inputs=inputs, prior=prior, annotator_ids=tuple(ids),
                  failed_starts=tuple(selection["failed"]), settings=settings, details=details)
    if selection["selected"] is None:
        # Weak identification also stalls EM: check the best start's prevalences even though none was accepted.
        if selection["best_prevalence"] is not None:
            notes += check_prevalence_spread(selection["best_prevalence"], data.n_annotators, model, func=func,
                                             stacklevel=stacklevel + 1)
        msg = all_failed_message(func, selection["n_starts_total"], selection["failed"])
        warnings.warn(msg, ConvergenceWarning, stacklevel=stacklevel)
        notes.append(msg)
        return FitResult(channel=None, point={}, converged=False, identified=False, reason=msg, warnings=tuple(notes),
                         **common)
    fpr, tpr, prev = selection["fpr"], selection["tpr"], np.clip(selection["prevalence"], 0.0, 1.0)
    notes += check_prevalence_spread(prev, data.n_annotators, model, func=func, stacklevel=stacklevel + 1)
    # Design problems (check_design): the estimate is one point of a set of channels with the same likelihood.
    identified, reason = not design, design[0] if design else ""
    details.update(loglik_trace=np.asarray(selection["trace"]), objective=selection["objective"],
                   label_exchanged=selection["label_exchanged"])
    return FitResult(channel=channel_from(fpr, tpr, ids), point=point_dict(model, fpr, tpr, prev), converged=True,
                     identified=identified, reason=reason, loglik=float(loglik), n_iter=int(selection["n_iter"]),
                     warnings=tuple(notes), **common)
