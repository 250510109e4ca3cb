"""Identifiability checks run before (and right after) a channel fit (paper §4, Appendix D), binary and K-class.

One annotator is an error; two annotators without score groups, or no co-labelled item, give an
:class:`IdentifiabilityWarning` and ``identified=False``; three annotators on common items identify the model (paper
§4.3; K classes: Kruskal 1977, Allman, Matias & Rhodes 2009). Details: docs/foundations.md,
*noisycal_bayes.data.design*.
"""
from __future__ import annotations

import warnings

import numpy as np

from .._validation import _preview, check_choice
from ..warnings import IdentifiabilityWarning
from .responses import pair_keys, repeated_runs

#: Two-annotator grouped fits warn when max(prevalence) - min(prevalence) is below this (the same
#: threshold as the reference EM, ``noisycal_bayes.reference.em.MIN_PREVALENCE_SPREAD``).
MIN_PREVALENCE_SPREAD = 0.05
#: The K-class channel models the design checks know.
MULTICLASS_MODELS = ("dawid_skene", "grouped", "pooled")


#: Why no channel is identified when no item has two labels (see :func:`co_labelling_problem`).
NO_CO_LABELLING = (
    "no item was labelled by two or more annotators: with one label per item the data fix only each annotator's "
    "positive rate per score group (fpr_j + gap_j pi_g), and any affine change of the prevalences (pi -> c + d pi, "
    "gap -> gap / d, fpr -> fpr - c gap / d) fits equally well. Have some items labelled by several annotators.")


def co_labelling_problem(observed) -> str:
    """Why no channel is identified because no item has two labels, or ``''``.

    With one label per item the data fix only each annotator's positive rate per group,
    ``fpr_j + gap_j pi_g``; any affine change ``pi -> c + d pi`` with ``gap -> gap / d``,
    ``fpr -> fpr - c gap / d`` leaves every such rate, hence the likelihood, unchanged.

    Parameters
    ----------
    observed : bool array of shape (n_items, n_annotators)
        Which annotator labelled which item.
    """
    obs = np.asarray(observed, dtype=bool)
    # Column by column (boolean passes that stop at the first co-labelled item; a row sum costs an int64 array).
    if obs.ndim == 2 and obs.shape[1] >= 2:
        seen = obs[:, 0].copy()
        for col in range(1, obs.shape[1]):
            if (seen & obs[:, col]).any():
                return ""
            seen |= obs[:, col]
    return NO_CO_LABELLING


def _co_labelled(data) -> bool:
    """Whether some item of ``data`` has labels of two different annotators, read from the sparse responses (an
    out-of-core ``SufficientStats`` has none: its pattern-level ``observed`` stand-in is read instead)."""
    if not hasattr(data, "responses"):
        return not co_labelling_problem(data.observed)
    item, ann, _ = (np.asarray(a) for a in data.responses)
    # Sorted by item, then annotator: a co-labelled item has two neighbouring responses of different annotators.
    return bool(np.any((item[1:] == item[:-1]) & (ann[1:] != ann[:-1])))


def design_problems(observed, model: str, n_groups: int | None = None) -> list:
    """Reasons why a design cannot identify the channels under ``model`` (empty when it can).

    Parameters
    ----------
    observed : bool array of shape (n_items, n_annotators)
    model : str
    n_groups : int or None
        Number of non-empty score groups the fit uses (None: not known yet; 1 for the marginal model).

    Returns
    -------
    list of str
        - two annotators and one group (the marginal model, or every item in one score group): the joint
          label distribution arises from a continuum of channels (paper §D.1);
        - no item with two labels: see :func:`co_labelling_problem`.
    """
    observed = np.asarray(observed)
    return _problems(observed.shape[1], not co_labelling_problem(observed), model, n_groups)


def _problems(n_annotators: int, co_labelled: bool, model: str, n_groups: int | None) -> list:
    """:func:`design_problems` from what its rules read: the number of annotators and whether an item is co-labelled."""
    problems = []
    single_group = model in ("dawid_skene", "platt") or n_groups == 1
    if n_annotators == 2 and single_group and model != "platt":
        where = ("without score groups" if model == "dawid_skene" else
                 "whose items all fall in one score group")
        problems.append(
            f"two annotators {where}: channels not identified, since the same joint label distribution arises from "
            "a continuum of channels (paper §D.1). Treat this fit as a labelled control only; use score groups with "
            "different prevalences or add a third annotator.")
    # Platt: a logistic curve is not closed under affine maps, so one label per item still pins its channel.
    if model != "platt" and not co_labelled:
        problems.append(NO_CO_LABELLING)
    return problems


def require_two_annotators(data, func: str = "fit") -> None:
    """Raise ``ValueError`` naming the annotator when ``data`` has a single one (it never identifies a channel)."""
    if data.n_annotators < 2:
        raise ValueError(
            f"{func}: the data has a single annotator ({_preview(data.annotator_ids)}); one annotator's labels do not "
            "identify its channel (paper §D.1). Add annotators, or pass a known Channel to nc_ece instead."
        )


def check_design(data, model: str, *, n_groups: int | None = None, func: str = "fit", stacklevel: int = 3) -> list:
    """Check that ``model`` can identify the channels of ``data`` before fitting.

    Parameters
    ----------
    data : AnnotationSet
    model : str
        ``"dawid_skene"``, ``"grouped"``, ``"histogram"``, ``"monotone"`` or ``"platt"``.
    n_groups : int, optional
        Number of non-empty score groups (checked when given; see :func:`design_problems`).

    Returns
    -------
    list of str
        The warning messages issued (also emitted as :class:`IdentifiabilityWarning`); a fit with any of them
        is reported with ``identified=False``.

    Raises
    ------
    ValueError
        A single annotator.
    """
    require_two_annotators(data, func)
    # From the sparse responses: no dense items x annotators mask, whatever the size of the crowd.
    return _warn(_problems(data.n_annotators, _co_labelled(data), model, n_groups), func, stacklevel + 1)


def _warn(problems: list, func: str, stacklevel: int) -> list:
    """``problems`` prefixed with ``func``, each also emitted as an :class:`IdentifiabilityWarning`.

    ``stacklevel`` counts from this function's frame (a caller passes its own + 1).
    """
    notes = [f"{func}: {msg}" for msg in problems]
    for msg in notes:
        warnings.warn(msg, IdentifiabilityWarning, stacklevel=stacklevel)
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


def multiclass_design_problems(data, model: str = "dawid_skene", *,
                               n_groups: int | None = None) -> list:
    """Reasons why the design of ``data`` cannot identify K x K confusion matrices (empty when it can).

    Problems: one group (``model="dawid_skene"`` or ``n_groups == 1``) with two annotators, or with no item
    labelled by three distinct annotators; any model with no item labelled by two annotators. Why:
    docs/foundations.md, *When K x K confusion matrices are identified*.

    Parameters
    ----------
    data : MulticlassAnnotationSet
    model : str
        ``"dawid_skene"`` (one group), ``"grouped"`` or ``"pooled"``.
    n_groups : int, optional
        Number of non-empty score groups the fit uses (1 counts as the one-group model).

    Returns
    -------
    list of str
    """
    check_choice(model, MULTICLASS_MODELS, name="model", func="multiclass_design_problems")
    one_group = model == "dawid_skene" or n_groups == 1
    item, ann, _ = data.responses
    first = ~repeated_runs(pair_keys(item, ann, data.n_annotators))[0]  # one response per (item, annotator)
    # The most distinct annotators on one item, from the responses: no dense items x annotators mask.
    most = int(np.bincount(item[first], minlength=data.n_items).max())
    problems = []
    if one_group and data.n_annotators == 2:
        problems.append(
            "two annotators without score groups: K x K confusion matrices are not identified (the joint label table "
            "has K^2 - 1 free cells for (2K + 1)(K - 1) parameters). Add a third annotator on common items, or use "
            "score groups whose class prevalences differ (model='grouped').")
    elif one_group and data.n_annotators > 2 and most == 2:
        problems.append(
            "no item was labelled by three or more distinct annotators: without score groups, pairwise label "
            "tables do not identify K x K confusion matrices. Have some items labelled by three annotators, or "
            "use score groups (model='grouped').")
    if data.n_annotators >= 2 and most < 2:
        problems.append(
            "no item was labelled by two or more annotators: one label per item fixes only each annotator's label "
            "distribution per score group, which many pairs of confusion matrices and prevalences reproduce. Have "
            "some items labelled by several annotators.")
    return problems


def check_multiclass_design(data, model: str = "dawid_skene", *, n_groups: int | None = None,
                            func: str = "fit", stacklevel: int = 3) -> list:
    """Check that ``model`` can identify the K x K channels of ``data`` before fitting.

    Parameters
    ----------
    data : MulticlassAnnotationSet
    model : str
        ``"dawid_skene"``, ``"grouped"`` or ``"pooled"``.
    n_groups : int, optional
        Number of non-empty score groups (see :func:`multiclass_design_problems`).
    func : str
        Name of the calling function, prefixed to the messages.

    Returns
    -------
    list of str
        The messages of :func:`multiclass_design_problems`, each also emitted as an
        :class:`~noisycal_bayes.warnings.IdentifiabilityWarning`.

    Raises
    ------
    ValueError
        A single annotator: its labels never identify its confusion matrix.

    Examples
    --------
    >>> import warnings
    >>> from noisycal_bayes.data import MulticlassAnnotationSet
    >>> data = MulticlassAnnotationSet.from_responses([0, 0, 1, 1], [0, 1, 0, 1], [0, 2, 1, 1])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     notes = check_multiclass_design(data)
    >>> len(notes), caught[0].category.__name__
    (1, 'IdentifiabilityWarning')
    """
    if data.n_annotators < 2:
        raise ValueError(f"{func}: the data has a single annotator {_preview(data.annotator_ids)}; one annotator's "
                         "labels never identify its K x K confusion matrix. Add annotators (three on common items, or "
                         "two with score groups).")
    return _warn(multiclass_design_problems(data, model, n_groups=n_groups), func, stacklevel + 1)
