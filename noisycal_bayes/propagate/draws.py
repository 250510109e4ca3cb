"""Posterior (or point) draws of a fitted channel model, flattened over chains, as plain arrays.

Every user of a fit's draws starts here (propagation, posterior recalibration maps, label posteriors, gap
diagnostics): a :class:`~noisycal_bayes.models.result.FitResult` from ``fit_nuts`` (posterior draws),
``fit_em`` / ``fit_map`` (one point), or a known :class:`~noisycal_bayes.data.Channel` becomes a :class:`Draws`
with a leading ``draw`` axis (chain-major). Thinning has one rule, :func:`thin_index`: ``n`` of ``S`` draws
are those at ``floor(k S / n)``, ``k = 0..n-1`` (every ``S / n``-th draw when ``n`` divides ``S``).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import _preview, binary_only, check_positive_int
from ..data import AnnotationSet, Channel, SufficientStats
from ..data.compress import pattern_keys
from ..models.inputs import differing_items
from ..warnings import ConvergenceWarning, IdentifiabilityWarning

#: Output draws made from a point estimate (EM / MAP fit or a known channel) when ``n_draws`` is not given:
#: the intervals then come from the Bayesian bootstrap or from label draws only.
POINT_FIT_DRAWS = 1000


@dataclass(frozen=True)
class Draws:
    """Channel (and curve) parameters per draw.

    Attributes
    ----------
    fpr, gap : ndarray of shape (n_source, n_annotators)
    prevalence : ndarray of shape (n_source, n_groups) or None
        Clean-label probability per group / bin (marginal model: one column); None for Platt fits and
        known channels.
    slope, intercept : ndarray of shape (n_source,) or None (Platt fits only)
    source : str
        ``"nuts"`` (posterior draws), ``"em_bootstrap"`` (bootstrap replicates of an EM fit, read as draws),
        ``"em"`` / ``"map"`` (one point estimate) or ``"channel"`` (known channel).
    model : str or None
        The fitted model's name (None for a known channel).
    """

    fpr: np.ndarray
    gap: np.ndarray
    prevalence: np.ndarray | None
    slope: np.ndarray | None
    intercept: np.ndarray | None
    source: str
    model: str | None

    @property
    def n_source(self) -> int:
        return int(self.fpr.shape[0])

    @property
    def is_posterior(self) -> bool:
        return self.source in ("nuts", "em_bootstrap")  # bootstrap replicates of an EM fit count as draws

    @property
    def tpr(self) -> np.ndarray:
        return self.fpr + self.gap

    def take(self, idx) -> "Draws":
        """The draws at positions ``idx`` (shape (n,))."""
        pick = lambda a: None if a is None else a[idx]  # noqa: E731
        return Draws(self.fpr[idx], self.gap[idx], pick(self.prevalence), pick(self.slope), pick(self.intercept),
                     self.source, self.model)

    def thinned(self, n_draws: int | None) -> "Draws":
        """At most ``n_draws`` draws, evenly thinned by :func:`thin_index` (all of them when None or fewer)."""
        if n_draws is None or n_draws >= self.n_source:
            return self
        return self.take(thin_index(self.n_source, n_draws))

    def params(self) -> dict:
        """The parameters as a dict of arrays with a leading draw axis: ``fpr``, ``tpr`` and, where the model
        has them, ``prevalence`` (n_source, n_groups), ``slope`` and ``intercept`` (n_source,)."""
        out = {"fpr": self.fpr, "tpr": self.tpr, "prevalence": self.prevalence, "slope": self.slope,
               "intercept": self.intercept}
        return {k: v for k, v in out.items() if v is not None}


def is_fit_result(obj) -> bool:
    """Duck-typed check for a FitResult (avoids importing the inference layer at module import)."""
    return all(hasattr(obj, a) for a in ("model", "method", "draws", "point", "groups", "inputs"))


def check_fit(fit, func: str, *, allow_channel: bool = True):
    """Validate ``fit`` (FitResult or Channel); warn about unconverged or unidentified fits."""
    if isinstance(fit, Channel):
        if not allow_channel:
            raise ValueError(f"{func}: this method needs a fitted model (fit_nuts / fit_em), not a bare Channel.")
        return fit
    binary_only(fit, func, "the K-class counterpart in docs/multiclass.md (Binary-only features)", name="fit")
    if not is_fit_result(fit):
        raise ValueError(f"{func}: `fit` must be a FitResult from fit_nuts / fit_em / fit_map"
                         f"{' or a Channel' if allow_channel else ''}; got {type(fit).__name__}.")
    if fit.channel is None or (fit.draws is None and not fit.point):
        raise ValueError(f"{func}: the fit has no estimate ({fit.reason or 'every start failed'}); refit before "
                         "propagating.")
    if not fit.identified:
        warnings.warn(f"{func}: the channels of this fit are not identified ({fit.reason}); intervals built on it "
                      "do not estimate anything.", IdentifiabilityWarning, stacklevel=3)
    if fit.method == "nuts" and (not fit.converged or fit.n_divergent > 0):
        warnings.warn(f"{func}: the NUTS fit reported problems (converged={fit.converged}, {fit.n_divergent} "
                      "divergent transitions); the draws may not represent the posterior, and neither will the "
                      "interval. Rerun fit_nuts with more warm-up or a higher target_accept.",
                      ConvergenceWarning, stacklevel=3)
    return fit


def extract_draws(fit) -> Draws:
    """All draws of ``fit`` flattened over chains (chain-major), or its point estimate as one draw."""
    if isinstance(fit, Channel):
        return Draws(np.asarray(fit.fpr, np.float64)[None], np.asarray(fit.gap, np.float64)[None], None, None, None,
                     "channel", None)
    src = fit.draws if fit.draws is not None else {k: np.asarray(v)[None, None] for k, v in fit.point.items()}

    def flat(name):
        if name not in src:
            return None
        a = np.asarray(src[name], dtype=np.float64)
        return a.reshape((-1,) + a.shape[2:])

    fpr = flat("fpr")
    gap = flat("gap") if "gap" in src else flat("tpr") - fpr
    prev = flat("prevalence")
    if prev is not None and prev.ndim == 1:
        prev = prev[:, None]
    source = fit.method if fit.draws is None or fit.method == "em_bootstrap" else "nuts"
    return Draws(fpr, gap, prev, flat("slope"), flat("intercept"), source, fit.model)


def thin_index(n_source: int, n_draws: int) -> np.ndarray:
    """Positions of ``n_draws`` evenly spaced draws out of ``n_source``: ``floor(k n_source / n_draws)``.

    The package's one thinning rule; with more outputs than draws it cycles (``k mod n_source``).

    Examples
    --------
    >>> thin_index(10, 5).tolist(), thin_index(8, 3).tolist(), thin_index(3, 7).tolist()
    ([0, 2, 4, 6, 8], [0, 2, 5], [0, 1, 2, 0, 1, 2, 0])
    """
    if n_draws <= n_source:
        return (np.arange(n_draws, dtype=np.int64) * n_source) // n_draws
    return np.arange(n_draws, dtype=np.int64) % n_source


def output_index(n_source: int, n_draws, *, is_posterior: bool) -> np.ndarray:
    """Which source draw feeds each output draw: evenly thinned (or cycled) to ``n_draws`` outputs.

    Default ``n_draws``: every posterior draw, or :data:`POINT_FIT_DRAWS` repetitions of a point estimate.
    """
    if n_draws is None:
        n_draws = n_source if is_posterior else POINT_FIT_DRAWS
    n_draws = check_positive_int(n_draws, name="n_draws")
    return thin_index(n_source, n_draws)


def check_same_items(data: AnnotationSet, fit, func: str, method: str) -> None:
    """``method`` needs per-item quantities of the fit: ``data`` must hold the fitted items (scores may differ)."""
    if getattr(fit.groups, "index", True) is None:
        raise ValueError(f"{func}: method={method!r} uses the fit's per-item posterior, and this fit was made from "
                         "SufficientStats, which keep no items. Pass the statistics themselves "
                         "(posterior_nc_ece(stats, fit, ...), or SufficientStats.from_annotations(data, bins=...)), "
                         "use method='plugin' (it needs only the channels), or fit an AnnotationSet of these items.")
    n_fit = fit.inputs.n_items
    if data.n_items != n_fit or data.n_annotators != fit.inputs.n_annotators:
        raise ValueError(
            f"{func}: method={method!r} uses the fit's per-item posterior, so `data` must hold the items the model was "
            f"fitted on ({n_fit} items x {fit.inputs.n_annotators} annotators); got {data.n_items} x "
            f"{data.n_annotators}. Fit the model on these items, or use method='plugin' for held-out items.")
    diff = differing_items(fit.inputs, data)
    if diff.size:
        raise ValueError(f"{func}: method={method!r}: the labels of `data` differ from the fitted ones at items "
                         f"{_preview(data.item_ids[diff])}; pass the AnnotationSet the model was fitted on (new "
                         "scores via `data.with_scores(...)` are fine).")


def stats_fit_rows(stats: SufficientStats, fit, func: str, method: str):
    """Fitted group and fitted input row of each row of ``stats``, for the model and latent routes.

    The routes need, for every (score bin, response pattern) row of the statistics, the fit's group (to read
    its prevalence) and the fit's row with that (group, pattern) (to read its clean-label posterior). So the
    fit's groups must be the statistics' bins (or one group: the marginal model), and the fit must have seen
    these items: its (group, pattern) counts must equal the statistics' counts (the analogue of
    :func:`check_same_items`).

    Returns
    -------
    cell_group, cell_row : ndarrays of shape (n_patterns,), int64

    Raises
    ------
    ValueError
        A Platt fit (it needs each item's score); groups that are not the statistics' bins; counts that
        differ from the fitted ones.
    """
    if fit.model == "platt":
        raise ValueError(f"{func}: method={method!r} with a Platt fit evaluates the curve at each item's score, and "
                         "SufficientStats keep only counts per score bin. Use method='plugin', or a grouped fit "
                         "(e.g. fit_nuts(stats, model='histogram')).")
    n_bins = stats.n_bins
    groups = fit.groups
    if fit.model == "dawid_skene":
        lookup = np.zeros(n_bins, np.int64)
    elif groups.edges is not None and np.array_equal(np.asarray(groups.edges), stats.edges):
        lookup = np.full(n_bins, -1, np.int64)
        lookup[np.asarray(groups.used)] = np.arange(groups.n_groups)
    else:
        got = "integer labels" if groups.edges is None else f"edges {np.round(groups.edges, 6).tolist()}"
        raise ValueError(f"{func}: method={method!r} from SufficientStats needs a fit whose groups are the statistics' "
                         f"bins (edges {np.round(stats.edges, 6).tolist()}): the statistics know each item's bin, not "
                         f"its place in other groups. This {fit.model!r} fit has groups with {got}. Fit the statistics "
                         "themselves (fit_nuts(stats, model='histogram'), groups=None).")
    j = stats.n_annotators
    inp = fit.inputs
    cell_group = lookup[np.asarray(stats.group)]
    real = np.flatnonzero(np.asarray(inp.counts) > 0)
    fit_key = pattern_keys(np.asarray(inp.patterns)[real], np.asarray(inp.row_group)[real], j)
    fit_uniq, first, fit_inv = np.unique(fit_key, return_index=True, return_inverse=True)
    fit_counts = np.bincount(fit_inv.reshape(-1), weights=np.asarray(inp.counts)[real], minlength=fit_uniq.size)
    ok = (cell_group >= 0).all()
    if ok:
        key = pattern_keys(stats.patterns, cell_group, j)
        uniq, inv = np.unique(key, return_inverse=True)
        counts = np.bincount(inv.reshape(-1), weights=stats.counts, minlength=uniq.size)
        ok = np.array_equal(uniq, fit_uniq) and np.allclose(counts, fit_counts, rtol=0, atol=1e-6)
    if not ok or inp.n_items != stats.n_items:
        raise ValueError(
            f"{func}: method={method!r} uses the fit's posterior for the items it was fitted on, so the statistics "
            f"must describe those items ({inp.n_items} items); got {stats.n_items} items whose counts of (group, "
            "response pattern) rows differ from the fitted ones. Fit the model on these statistics "
            "(fit_nuts(stats, ...)), or use method='plugin' for held-out items.")
    cell_row = real[first[np.searchsorted(fit_uniq, key)]]
    return cell_group, cell_row


#: Level of the gap interval behind the downstream rule "zero weight where the gap's interval contains 0".
USABLE_LEVEL = 0.9


def usable_annotators_of(fit) -> np.ndarray:
    """The downstream rule of a fit or Channel, bool (n_annotators,): see :func:`usable_for`.

    Examples
    --------
    >>> from noisycal_bayes.data import Channel
    >>> usable_annotators_of(Channel([0.1, 0.5], [0.9, 0.5], orientation="crowd")).tolist()
    [True, False]
    """
    fit = check_fit(fit, "usable_annotators_of", allow_channel=True)
    return usable_for(fit, extract_draws(fit))


def usable_for(fit, src: Draws) -> np.ndarray:
    """Which annotators' labels enter the corrected labels, bool (n_annotators,) (the downstream rule).

    An annotator whose gap interval contains 0 carries no usable information about the clean label, and
    correcting its labels would divide by a gap near 0: it gets weight 0 under every weight rule (its
    responses are left out of the corrected labels). An adversarial annotator (gap < 0, interval excluding
    0) is kept: ``(A - fpr) / (tpr - fpr)`` uses its labels with their sign. The interval is the EM fit's
    per-annotator interval (:attr:`FitResult.annotators`), else the equal-tailed ``USABLE_LEVEL`` interval
    of the gap draws (NUTS posterior or EM bootstrap replicates); a known Channel keeps every ``gap != 0``.
    """
    from ..core.channel import usable_annotators

    if is_fit_result(fit) and fit.details.get("annotators") is not None:
        return np.asarray(fit.usable_annotators(), dtype=bool)
    gap = np.asarray(src.gap, dtype=np.float64)
    if src.is_posterior and gap.shape[0] > 1:
        lo, hi = np.quantile(gap, [(1 - USABLE_LEVEL) / 2, (1 + USABLE_LEVEL) / 2], axis=0)
        return np.asarray(usable_annotators(gap.mean(axis=0), lo, hi), dtype=bool)
    return np.asarray(usable_annotators(gap.mean(axis=0)), dtype=bool)


#: K-class models whose confusion matrices are partially pooled: each annotator's rows are drawn around a population
#: learned from the crowd (:func:`~noisycal_bayes.inference.fit_nuts_multiclass` ``model="ibcc"`` and ``"pooled"``,
#: :func:`~noisycal_bayes.inference.fit_em_multiclass` ``model="pooled"``).
POOLED_CLASS_MODELS = ("ibcc", "pooled")


def usable_confusions_of(fit, *, level: float = USABLE_LEVEL) -> np.ndarray:
    """K classes: which annotators' labels enter the corrected targets of a fit, bool (n_annotators,).

    - A point estimate (EM, MAP) or partially pooled draws (:data:`POOLED_CLASS_MODELS`): the condition number of
      the estimate (for draws: of the posterior mean) is finite and at most ``MAX_CONDITION``
      (:meth:`~noisycal_bayes.models.result.ConfusionFit.usable_annotators`).
    - Draws of a model without pooling: the ``(1 + level) / 2`` quantile of each annotator's condition number over
      the draws (:func:`~noisycal_bayes.reference.calibration.usable_from_draws`).

    Why pooled draws are judged by their mean: an annotator with a handful of labels has confusion draws spread like
    the population's Dirichlet rows, and a Dirichlet draw of K x K cells is near singular in a sizeable share of
    draws whatever the annotator does; the quantile rule, meant for maximum-likelihood-like draws, then drops the
    labels of every lightly active worker (cf: 51 of 461 annotators). The posterior mean is shrunk towards the
    population and is invertible unless the annotator's labels say that it is not (a spammer with many labels: rows
    alike); the propagation clips each draw's near-singular inverse. Measured on cf and ms in docs/crowds.md.

    Examples
    --------
    >>> from noisycal_bayes.models.result import MulticlassEMFit
    >>> good, spam = np.array([[0.9, 0.1], [0.2, 0.8]]), np.full((2, 2), 0.5)
    >>> fit = MulticlassEMFit(confusion=np.stack([good, spam]), prevalence=np.array([[0.5, 0.5]]),
    ...                       groups=np.zeros(3, int), n_groups=1, log_likelihood=0.0, n_iter=1, converged=True,
    ...                       path="sparse", model="dawid_skene", classes=(0, 1))
    >>> usable_confusions_of(fit).tolist()
    [True, False]
    """
    from ..reference.calibration import usable_from_draws

    conf = np.asarray(fit.confusion, dtype=np.float64)
    if conf.ndim == 3 or getattr(fit, "model", None) in POOLED_CLASS_MODELS:
        return np.asarray(fit.usable_annotators(), dtype=bool)
    return np.asarray(usable_from_draws(conf.reshape((-1,) + conf.shape[-3:]), level=level), dtype=bool)
