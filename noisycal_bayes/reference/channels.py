"""The result type of every frequentist channel estimator, and helpers they share.

Estimators (paper §4 and Appendix D): :func:`~noisycal_bayes.reference.closed_form.closed_form_two_groups`,
:func:`~noisycal_bayes.reference.moments.moments_three` and :func:`~noisycal_bayes.reference.gmm.fit_gmm` return a
:class:`ChannelEstimate`; :func:`~noisycal_bayes.reference.em.fit_em` returns a
:class:`~noisycal_bayes.models.result.FitResult` (the contract of ``noisycal_bayes.fit_em``). Consumers of either
read ``.channel`` (or call ``.require()``, which raises with the reason when the channels are not identified).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validation import _preview, binary_only
from ..data import AnnotationSet, Channel, resolve_groups
from ..data.design import co_labelling_problem as _co_labelling_problem, require_two_annotators
from ..models.result import ChannelAccess

#: Tolerance used when checking that an estimate lies in the parameter space (population moments fed
#: through the closed forms reproduce boundary values such as fpr = 0 only up to rounding).
FEASIBILITY_TOL = 1e-10


@dataclass(frozen=True, eq=False)
class ChannelEstimate(ChannelAccess):
    """Estimated annotator channels and class prevalences, and how they were obtained.

    Attributes
    ----------
    channel : Channel or None
        The fitted channels (positive orientation, ``tpr > fpr``). None when no admissible estimate
        exists. A fit can carry a channel while ``identified`` is False: the marginal two-annotator EM
        fit (paper §D.1) returns one point of a continuum of equally good channels, as a labelled
        control only.
    prevalence : ndarray of shape (n_groups,)
        ``P(Y = 1)`` per score group; shape (1,) for a marginal (ungrouped) fit; NaN when unknown.
    identified : bool
        Whether the design and the estimate identify the channels.
    converged : bool
        Whether the optimiser converged (always True for the closed forms).
    reason : str
        Why the channels are not identified or the fit did not converge; '' when all is well.
    method : str
        ``"closed_form_two_groups"``, ``"moments_three"``, ``"em"`` or ``"gmm"``.
    loglik : float
        Dawid-Skene log-likelihood of the data at the estimate (EM); NaN for the moment methods.
    n_iter : int
        Iterations of the selected start (EM) or optimiser iterations (GMM); 0 for closed forms.
    failed_starts : list of (int, str)
        Starts rejected by screening, with the reason.
    n_groups : int
        Number of score groups used (1 for a marginal fit).
    group_sizes : ndarray of shape (n_groups,)
        Items per group used by the estimator.
    optimisation_gap : float
        GMM: the final objective value (0 at a global minimum for exactly identified population
        moments). NaN for the other methods.
    loglik_trace : ndarray
        EM: objective after each iteration of the selected start (log-likelihood, plus the log prior
        density for MAP). Empty otherwise.
    start_logliks : ndarray of shape (n_starts,)
        EM / GMM: final objective per start (log-likelihood for EM, the GMM objective for GMM); NaN
        for starts that failed before producing a finite value.
    selected_start : int
        Index of the start that produced the estimate (-1 when none or not applicable).
    details : dict
        Method-specific extras (e.g. the moments used, the per-triplet estimates).
    """

    channel: Channel | None
    prevalence: np.ndarray
    identified: bool
    converged: bool
    reason: str
    method: str
    loglik: float = float("nan")
    n_iter: int = 0
    failed_starts: list = field(default_factory=list)
    n_groups: int = 1
    group_sizes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    optimisation_gap: float = float("nan")
    loglik_trace: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    start_logliks: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    selected_start: int = -1
    details: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        prev = np.atleast_1d(np.array(self.prevalence, dtype=np.float64))
        prev.setflags(write=False)
        object.__setattr__(self, "prevalence", prev)
        object.__setattr__(self, "group_sizes", np.asarray(self.group_sizes))
        object.__setattr__(self, "loglik_trace", np.asarray(self.loglik_trace, dtype=np.float64))
        object.__setattr__(self, "start_logliks", np.asarray(self.start_logliks, dtype=np.float64))
        object.__setattr__(self, "failed_starts", list(self.failed_starts))

    def __repr__(self) -> str:
        ch = "None" if self.channel is None else repr(self.channel)
        tail = "" if not self.reason else f", reason={self.reason!r}"
        return (f"ChannelEstimate(method={self.method!r}, channel={ch}, prevalence="
                f"{np.round(self.prevalence, 4).tolist()}, identified={self.identified}, "
                f"converged={self.converged}{tail})")


# --------------------------------------------------------------------------------------------- helpers
def check_annotation_set(data, func: str) -> AnnotationSet:
    """The data every paper estimator (closed form, moments, GMM) reads: a binary :class:`AnnotationSet` with one
    label per (item, annotator) pair (they count response patterns) and two annotators or more (one annotator
    never identifies a channel, §D.1). Errors name ``func`` and the way out."""
    binary_only(data, func, "fit_em_multiclass")
    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"{func}: `data` must be an AnnotationSet; got {type(data).__name__}. "
                         "Build one with AnnotationSet.from_long or AnnotationSet.from_wide.")
    data.require_one_label_per_pair(func, "Use fit_em, which reads every response.")
    require_two_annotators(data, func)
    return data


def co_labelling_problem(data: AnnotationSet) -> str:
    """Why the design cannot identify any channel because no item has two labels, or ''.

    See :func:`noisycal_bayes.data.design.co_labelling_problem` (the one rule both layers use).
    """
    return _co_labelling_problem(data.observed)


def resolve_data_groups(data: AnnotationSet, groups, func: str):
    """``(group_index (n_items,), n_groups)`` from an int, a Binning or an integer array (or None)."""
    if groups is None:
        return np.zeros(data.n_items, dtype=np.int32), 1
    if data.scores is None and not hasattr(groups, "__len__"):
        raise ValueError(f"{func}: score groups given as {groups!r} need classifier scores, and this AnnotationSet "
                         "has none. Build it with `scores=`, or pass an integer group label per item.")
    return resolve_groups(data.scores, groups, data.n_items)


def infeasibility(fpr, tpr, prevalence, *, tol: float = FEASIBILITY_TOL) -> str:
    """Reason why ``(fpr, tpr, prevalence)`` is outside the positively oriented model, or ''."""
    fpr, tpr, prevalence = (np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in (fpr, tpr, prevalence))
    vals = np.concatenate([fpr, tpr, prevalence])
    if not np.all(np.isfinite(vals)):
        return "non-finite estimate"
    problems = []
    for name, v in (("fpr", fpr), ("tpr", tpr), ("prevalence", prevalence)):
        bad = (v < -tol) | (v > 1 + tol)
        if bad.any():
            problems.append(f"{name} outside [0, 1] ({_preview(np.round(v[bad], 4))} at {_preview(np.flatnonzero(bad))})")
    bad = ~(tpr - fpr > tol)
    if bad.any():
        problems.append(f"gap tpr - fpr <= 0 for annotators {_preview(np.flatnonzero(bad))}")
    return "; ".join(problems)


def make_channel(fpr, tpr, annotator_ids=None) -> Channel:
    """A Channel from a feasible estimate (rounding excursions beyond [0, 1] clipped)."""
    fpr = np.clip(np.asarray(fpr, dtype=np.float64), 0.0, 1.0)
    tpr = np.clip(np.asarray(tpr, dtype=np.float64), 0.0, 1.0)
    return Channel(fpr, tpr, None if annotator_ids is None else tuple(annotator_ids))


def group_moments(labels: np.ndarray, group: np.ndarray, n_groups: int):
    """Per-group means and within-group pairwise covariances of the responses.

    ``means[j, g]`` averages ``A_ij`` over items in group ``g`` that annotator ``j`` labelled;
    ``cov[j, k, g]`` is the plug-in (divide by the count) covariance of ``A_j, A_k`` over items in ``g``
    labelled by both, each pair using its own means on those items. ``n_single[j, g]`` and
    ``n_pair[j, k, g]`` count those items. Entries without data are NaN.

    Returns ``(means (J, G), cov (J, J, G), n_single (J, G), n_pair (J, J, G))``.
    """
    labels = np.asarray(labels)
    obs = (labels >= 0).astype(np.float64)
    a = np.where(labels == 1, 1.0, 0.0)
    onehot = np.zeros((labels.shape[0], n_groups))
    onehot[np.arange(labels.shape[0]), group] = 1.0
    n_single = np.einsum("ij,ig->jg", obs, onehot)
    s_single = np.einsum("ij,ig->jg", a, onehot)
    # For a pair (j, k) every moment is taken over items both labelled, so that each covariance is the
    # plug-in covariance of one subsample (and exactly a function of the pattern frequencies).
    n_pair = np.einsum("ij,ik,ig->jkg", obs, obs, onehot)
    s_jk = np.einsum("ij,ik,ig->jkg", a, obs, onehot)  # sum of A_j over items labelled by j and k
    s_prod = np.einsum("ij,ik,ig->jkg", a, a, onehot)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = s_single / n_single
        m_j = s_jk / n_pair
        cov = s_prod / n_pair - m_j * np.swapaxes(m_j, 0, 1)
    return means, cov, n_single, n_pair
