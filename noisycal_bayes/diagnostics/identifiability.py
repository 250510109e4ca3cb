"""Identifiability checks run before (and right after) a channel fit (paper §4, Appendix D).

- One annotator: its labels never identify its channel -> ``ValueError``.
- Two annotators and the marginal model: the joint label distribution arises from a continuum of
  channels (paper §D.1, e.g. joint probabilities (0.31, 0.19, 0.19, 0.31)) -> :class:`IdentifiabilityWarning`.
- Two annotators with score groups (or bins): identified only through differences of the group
  prevalences (DESIGN §3, closed form needs ``pi_1 != pi_2``); when the estimated prevalences barely
  differ -> :class:`IdentifiabilityWarning`. With three or more annotators the channels are identified
  by the third cross-moment without groups (paper §4.3), so no such warning.
"""
from __future__ import annotations

import warnings

import numpy as np

from .._validation import _preview
from ..warnings import IdentifiabilityWarning

#: Two-annotator grouped fits warn when max(prevalence) - min(prevalence) is below this (the same
#: threshold as the reference EM, ``noisycal_bayes.reference.em.MIN_PREVALENCE_SPREAD``).
MIN_PREVALENCE_SPREAD = 0.05


def check_design(data, model: str, *, func: str = "fit", stacklevel: int = 3) -> list:
    """Check that ``model`` can identify the channels of ``data`` before fitting.

    Parameters
    ----------
    data : AnnotationSet
    model : str
        ``"dawid_skene"``, ``"grouped"``, ``"histogram"``, ``"monotone"`` or ``"platt"``.

    Returns
    -------
    list of str
        The warning messages issued (also emitted as :class:`IdentifiabilityWarning`).

    Raises
    ------
    ValueError
        A single annotator.
    """
    if data.n_annotators < 2:
        raise ValueError(
            f"{func}: the data has a single annotator ({_preview(data.annotator_ids)}); one annotator's labels do not "
            "identify its channel (paper §D.1). Add annotators, or pass a known Channel to nc_ece instead."
        )
    notes = []
    if data.n_annotators == 2 and model == "dawid_skene":
        msg = (f"{func}: two annotators without score groups do not identify their channels: the same joint label "
               "distribution arises from a continuum of channels (paper §D.1). Treat this fit as a labelled control "
               "only; use model='grouped' (score groups with different prevalences) or add a third annotator.")
        warnings.warn(msg, IdentifiabilityWarning, stacklevel=stacklevel)
        notes.append(msg)
    return notes


def check_prevalence_spread(prevalence, n_annotators: int, model: str, *, func: str = "fit",
                            min_spread: float = MIN_PREVALENCE_SPREAD, stacklevel: int = 3) -> list:
    """Warn when a two-annotator grouped fit rests on group prevalences that barely differ.

    Parameters
    ----------
    prevalence : array-like of shape (n_groups,)
        Estimated prevalence per group or bin (EM/MAP estimate).
    n_annotators : int
    model : str

    Returns
    -------
    list of str
        The warning messages issued.
    """
    prevalence = np.atleast_1d(np.asarray(prevalence, dtype=np.float64))
    if n_annotators != 2 or model not in ("grouped", "histogram", "monotone") or prevalence.size < 2:
        return []
    spread = float(prevalence.max() - prevalence.min())
    if spread >= min_spread:
        return []
    msg = (f"{func}: the estimated group prevalences barely differ ({_preview(np.round(prevalence, 4))}, spread "
           f"{spread:.3g} < {min_spread}): with two annotators the channels are identified only through prevalence "
           "differences between groups, so the posterior is nearly flat along a ridge. Use groups that separate the "
           "classes better (fewer, wider score groups) or add an annotator.")
    warnings.warn(msg, IdentifiabilityWarning, stacklevel=stacklevel)
    return [msg]
