"""The :class:`~noisycal_bayes.models.result.FitResult` of an EM fit, built once for both EMs.

``noisycal_bayes.fit_em`` (vectorised) and ``noisycal_bayes.reference.fit_em`` (a plain loop) run their starts
independently, select with :func:`noisycal_bayes.core.starts.select_start`, and hand the selection here: the
warnings (small gap, every start failed, prevalences that barely differ) and the result are the same for both.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..core.starts import all_failed_message, small_gap_message
from ..data.design import check_prevalence_spread
from ..warnings import ConvergenceWarning, SmallGapWarning
from .result import FitResult, channel_from, point_dict


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
