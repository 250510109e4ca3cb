"""Post-hoc recalibration from noisy labels (paper §5, Appendix E.2–E.3): corrected-loss temperature / Platt over a
compact box (an optimum on its boundary is flagged), and the projected histogram (per-bin mean corrected label
clipped to [0, 1]). Each takes a target vector: corrected labels, or 0/1 / soft labels for the naive baselines.
Details: docs/foundations.md, *noisycal_bayes.reference.recalibration*.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import optimize

from .._validation import _preview, binary_only, check_bounds, check_scores, check_targets
from ..core import clipped_logit, corrected_log_loss, item_corrected_label, platt_map, temperature_map, x64
from ..core.weights import weights_for_labels
from ..data import AnnotationSet, as_binning, bin_index
from ..data.columns import response_columns
from ..warnings import BoundaryWarning, ConvergenceWarning, DataWarning
from .calibration import check_channel, check_weights

#: Default temperature box ``[T_min, T_max]``.
TEMPERATURE_BOUNDS = (0.05, 20.0)
#: Default Platt box: slope ``alpha`` (kept positive, so the map is increasing) and intercept ``beta``.
PLATT_ALPHA_BOUNDS = (0.01, 20.0)
PLATT_BETA_BOUNDS = (-10.0, 10.0)


# ----------------------------------------------------------------------------- targets
class CorrectedLabels(NamedTuple):
    """Combined corrected label per item and the annotator weights that combined them.

    values : (n_items,) ``sum_j W_ij (A_ij - fpr_j) / gap_j`` (may leave [0, 1]); a repeated label of
        annotator ``j`` is one more term with ``j``'s channel and weight
    weights : (n_annotators,) convex weights (renormalised per item over observed responses; an annotator's
        repeat columns added up)
    weights_rule : str
    """

    values: np.ndarray
    weights: np.ndarray
    weights_rule: str


def group_corrected_labels(labels, group_index, fpr_group, tpr_group, weights="iv") -> tuple:
    """Combined corrected labels when every score group has its own channels (the score-dependent and correlated
    models, :attr:`~noisycal_bayes.models.result.FitResult.group_channels`).

    Item ``i`` of group ``g`` gets ``sum_j W_gij (A_ij - fpr_gj) / gap_gj``: the paper's corrected label (§3) at its
    group's channel, so it is unbiased for ``Y_i`` when that channel is the item's, as the shared-channel label is
    under shared channels. The weights are the rule's at the group's channel, estimated from the group's items (IV:
    ``mu`` the group's mean equally weighted corrected label), renormalised per item over the annotators who
    labelled it. With one group this is :func:`corrected_item_labels` at that channel.

    Parameters
    ----------
    labels : int array of shape (n_items, n_annotators), -1 = missing
    group_index : int array of shape (n_items,), values in ``0 .. n_groups - 1``
    fpr_group, tpr_group : arrays of shape (n_groups, n_annotators)
    weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,)

    Returns
    -------
    (values, group_weights)
        ``values`` (n_items,) (NaN for an item without a label); ``group_weights`` (n_groups, n_annotators), each
        group's convex weights (NaN for a group without items).

    Examples
    --------
    >>> import numpy as np
    >>> lab = np.array([[1, 0], [1, 1]])
    >>> f, t = np.array([[0.2, 0.2], [0.1, 0.3]]), np.array([[0.7, 0.7], [0.9, 0.8]])
    >>> v, _ = group_corrected_labels(lab, np.array([0, 1]), f, t, weights="equal")
    >>> v.round(4).tolist()   # item 0 at group 0's channel, item 1 at group 1's: ((1-.1)/.8 + (1-.3)/.5) / 2
    [0.6, 1.2625]
    """
    f = np.asarray(fpr_group, np.float64)
    t = np.asarray(tpr_group, np.float64)
    labels = np.asarray(labels)
    obs = labels >= 0
    idx = np.asarray(group_index)
    values = np.full(labels.shape[0], np.nan)
    group_weights = np.full(f.shape, np.nan)
    for g in range(f.shape[0]):
        rows = np.flatnonzero(idx == g)
        if rows.size == 0:
            continue
        gap = t[g] - f[g]
        with x64():
            w = np.asarray(weights_for_labels(weights, labels[rows], f[g], gap), np.float64)
        group_weights[g] = w
        wi = np.where(obs[rows], w, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            wi = wi / wi.sum(axis=1, keepdims=True)
        values[rows] = np.sum(wi * np.where(obs[rows], (labels[rows] - f[g]) / gap, 0.0), axis=1)
    return values, group_weights


def corrected_item_labels(data: AnnotationSet, channel, *, weights="iv") -> CorrectedLabels:
    """Combined corrected labels ``Ytilde_i`` of every item under ``channel`` (paper §3, §5.1).

    Parameters
    ----------
    data : AnnotationSet
    channel : Channel of shape (n_annotators,), or a fit with channels per score group
        A :class:`~noisycal_bayes.models.result.FitResult` with ``group_channels`` (``fit_map`` / ``fit_nuts`` with
        ``model="score_dependent"`` or ``"correlated"``): each item reads its own score group's channel (the fit's
        score edges applied to ``data.scores``; the fit's own assignment on the items it was fitted on), at the
        point estimate (MAP) or the posterior mean of the group channels (NUTS), by :func:`group_corrected_labels`;
        one label per (item, annotator) pair. ``weights`` of the result are then the item-weighted mean of the
        groups' weights.
    weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,)
        IV weights use ``mu`` = the equally weighted mean corrected label (DESIGN §3); per score group with group
        channels.

    Returns
    -------
    CorrectedLabels

    Examples
    --------
    >>> import numpy as np
    >>> from noisycal_bayes import Channel
    >>> data = AnnotationSet.from_wide(np.array([[1, 0], [1, 1]]))
    >>> corrected_item_labels(data, Channel([0.2, 0.2], [0.7, 0.7]), weights="equal").values.round(2).tolist()
    [0.6, 1.6]
    """
    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"`data` must be an AnnotationSet; got {type(data).__name__}.")
    if getattr(channel, "group_channels", None) is not None:
        return _group_fit_labels(data, channel, weights)
    channel = check_channel(channel, data)
    rule, label = check_weights(weights, data.n_annotators)
    # One column per (annotator, k-th label of an item): a repeated label is one more response with its
    # annotator's channel and weight, as in nc_ece. Without repeats the columns are data.labels.
    cols = response_columns(data, np.ones(data.n_annotators, bool), func="corrected_item_labels")
    a = cols.annotator
    with x64():
        if isinstance(rule, str):
            w = weights_for_labels(rule, cols.labels, channel.fpr[a], channel.gap[a])
        else:
            w = jnp.asarray(rule[a])
        values = item_corrected_label(cols.labels, channel.fpr[a], channel.gap[a], w)
    w = np.asarray(w, dtype=np.float64)
    if a.size != data.n_annotators:
        w = np.bincount(a, weights=w, minlength=data.n_annotators)  # per annotator (repeat columns added up)
    return CorrectedLabels(np.asarray(values, dtype=np.float64), w, label)


def _group_fit_labels(data: AnnotationSet, fit, weights) -> CorrectedLabels:
    """:func:`corrected_item_labels` of a fit with channels per score group (its docstring)."""
    from ..models.inputs import item_groups

    func = "corrected_item_labels"
    data.require_one_label_per_pair(func, "Channels per score group are read from one label per pair.")
    f, t = (np.asarray(x, np.float64).mean(axis=0) for x in fit.group_channels)
    if f.shape[1] != data.n_annotators:
        raise ValueError(f"{func}: the fit has {f.shape[1]} annotators but the data has {data.n_annotators}.")
    rule, label = check_weights(weights, data.n_annotators)
    group = item_groups(data, fit, func)
    values, group_weights = group_corrected_labels(data.labels, group, f, t, rule)
    sizes = np.bincount(group, minlength=f.shape[0]).astype(np.float64)
    w = np.nansum(sizes[:, None] * group_weights, axis=0) / sizes.sum()
    return CorrectedLabels(values, w, label)


def _pad(x, value=0.0):
    """``x`` padded with ``value`` to the next power of two (>= 64).

    Padding keeps the jitted functions compiled for a handful of shapes instead of once per sample
    size; padded items get weight 0 in the loss (so add nothing) and are cut from predictions.
    """
    n = x.size
    size = max(64, 1 << max(n - 1, 0).bit_length())
    return jnp.asarray(np.concatenate([x, np.full(size - n, value)]))


def _padded(z, y, w):
    return _pad(z, 0.5), _pad(y), _pad(w)


# ----------------------------------------------------------------------------- temperature
@jax.jit
def _temperature_value_grad(inv_t, scores, targets, item_weights):
    # Parametrised by inverse temperature theta = 1/T: the loss is convex in theta (affine in the logits).
    logits = clipped_logit(scores)
    return jax.value_and_grad(
        lambda t: corrected_log_loss(temperature_map(logits, 1.0 / t), targets, item_weights))(inv_t)


@jax.jit
def _predict_temperature(scores, temperature):
    return jax.nn.sigmoid(temperature_map(clipped_logit(scores), temperature))


@jax.jit
def _predict_platt(scores, alpha, beta):
    return jax.nn.sigmoid(platt_map(clipped_logit(scores), alpha, beta))


@dataclass(frozen=True)
class TemperatureFit:
    """A fitted temperature ``p = sigmoid(logit(z) / T)``.

    temperature : float
    loss : float, the (corrected) mean log loss at the optimum
    on_boundary : bool, whether ``T`` is ``T_min`` or ``T_max`` (the loss decreases towards the boundary)
    bounds : (T_min, T_max)
    n_items : int
    """

    temperature: float
    loss: float
    on_boundary: bool
    bounds: tuple
    n_items: int
    method: str = "log loss over T in a box (convex in 1/T), root of the derivative by Brent's method"


def inverse_temperature_root(grad, t_lo: float, t_hi: float) -> tuple[float, bool]:
    """``(theta, on_boundary)``: the minimiser ``theta = 1/T`` of a loss convex in ``theta`` on ``[1/T_max, 1/T_min]``.

    ``grad(theta)`` is the loss's derivative, non-decreasing in ``theta``. If it is ``>= 0`` at ``1/T_max`` the
    optimum is that end, if ``<= 0`` at ``1/T_min`` it is the other end (``on_boundary`` True); otherwise the
    root is found by Brent's method. Shared by the binary (sigmoid) and K-class (softmax) temperature fits.

    Examples
    --------
    >>> round(inverse_temperature_root(lambda th: th - 0.5, 0.05, 20.0)[0], 12)   # root at theta = 1/2, T = 2
    0.5
    """
    th_lo, th_hi = 1.0 / t_hi, 1.0 / t_lo
    if grad(th_lo) >= 0:
        return th_lo, True
    if grad(th_hi) <= 0:
        return th_hi, True
    return optimize.brentq(grad, th_lo, th_hi, xtol=1e-14, rtol=1e-12), False


def fit_temperature(scores, targets, *, bounds=TEMPERATURE_BOUNDS, item_weights=None) -> TemperatureFit:
    """Minimise ``mean_i softplus(s_i / T) - y_i s_i / T`` over ``T in [T_min, T_max]`` (paper §5.1).

    ``y`` are corrected labels (noise-corrected fit) or 0/1 / soft labels (naive fit). The loss is convex
    in ``theta = 1/T``, so its derivative ``mean_i (sigmoid(theta s_i) - y_i) s_i`` is non-decreasing: if it
    is ``>= 0`` at ``theta = 1/T_max`` the optimum is ``T_max``, if ``<= 0`` at ``1/T_min`` it is ``T_min``
    (both reported as on the boundary, with a BoundaryWarning), else the root is found by Brent's method.

    Parameters
    ----------
    scores : array-like of shape (n_items,), in [0, 1]
    targets : array-like of shape (n_items,), finite reals
    bounds : (T_min, T_max) with 0 < T_min < T_max
    item_weights : array-like of shape (n_items,), optional

    Returns
    -------
    TemperatureFit

    Examples
    --------
    >>> import numpy as np
    >>> z = np.linspace(0.05, 0.95, 19)
    >>> round(fit_temperature(z, z).temperature, 4)   # the scores' own probabilities: T = 1
    1.0
    """
    binary_only(scores, "fit_temperature", "MulticlassTemperatureScaling", name="scores")
    z, y, w = check_targets(scores, targets, item_weights)
    t_lo, t_hi = check_bounds(bounds, name="bounds", positive=True)
    if np.all(z == 0.5):
        raise ValueError("every score is 0.5: the temperature is not identified (all logits are 0).")
    with x64():
        args = _padded(z, y, w)

        def grad(theta):
            return float(_temperature_value_grad(theta, *args)[1])

        theta, on_boundary = inverse_temperature_root(grad, t_lo, t_hi)
        loss = float(_temperature_value_grad(theta, *args)[0])
    temperature = 1.0 / theta
    if on_boundary:
        warnings.warn(
            f"the temperature fit ended on the boundary T = {temperature:.4g} of [{t_lo}, {t_hi}]: the loss still "
            "decreases beyond it. With corrected labels this can mean the corrected loss is unbounded below (labels "
            "outside [0, 1], e.g. a small channel gap); otherwise widen `bounds`.", BoundaryWarning, stacklevel=2)
    return TemperatureFit(float(temperature), loss, on_boundary, (t_lo, t_hi), int(z.size))


def predict_temperature(scores, temperature: float) -> np.ndarray:
    """``sigmoid(clipped_logit(z) / T)``, shape (n_items,)."""
    z = check_scores(scores)
    with x64():
        return np.asarray(_predict_temperature(_pad(z, 0.5), float(temperature)), dtype=np.float64)[:z.size]


# ----------------------------------------------------------------------------- Platt
@jax.jit
def _platt_value_grad(params, scores, targets, item_weights):
    logits = clipped_logit(scores)
    return jax.value_and_grad(
        lambda p: corrected_log_loss(platt_map(logits, p[0], p[1]), targets, item_weights))(params)


@dataclass(frozen=True)
class PlattFit:
    """A fitted Platt map ``p = sigmoid(alpha logit(z) + beta)``.

    alpha, beta : float
    loss : float, (corrected) mean log loss at the optimum
    on_boundary : bool, whether any parameter ended on its bound
    boundary_params : tuple of str, which ones (``"alpha"``, ``"beta"``)
    alpha_bounds, beta_bounds : (low, high)
    converged : bool, L-BFGS-B success flag
    n_iter : int
    n_items : int
    """

    alpha: float
    beta: float
    loss: float
    on_boundary: bool
    boundary_params: tuple
    alpha_bounds: tuple
    beta_bounds: tuple
    converged: bool
    n_iter: int
    n_items: int
    method: str = "log loss over (alpha, beta) in a box, L-BFGS-B (convex objective)"


def fit_platt(scores, targets, *, alpha_bounds=PLATT_ALPHA_BOUNDS, beta_bounds=PLATT_BETA_BOUNDS,
              item_weights=None) -> PlattFit:
    """Minimise ``mean_i softplus(alpha s_i + beta) - y_i (alpha s_i + beta)`` over a box (paper §5.1).

    Convex in ``(alpha, beta)``; solved with L-BFGS-B from ``(1, 0)`` (projected into the box) with the
    exact gradient. A parameter within ``1e-8 (high - low)`` of a bound is reported as on the boundary
    (BoundaryWarning); a failed optimiser run raises a ConvergenceWarning.

    Parameters
    ----------
    scores, targets, item_weights
        As in :func:`fit_temperature`.
    alpha_bounds, beta_bounds : (low, high)

    Returns
    -------
    PlattFit

    Examples
    --------
    Targets equal to the scores' own probabilities give the identity map (``alpha = 1``, ``beta = 0``):

    >>> fit = fit_platt([0.05 * k for k in range(1, 20)], [0.05 * k for k in range(1, 20)])
    >>> round(fit.alpha, 4), round(fit.beta, 4) + 0.0
    (1.0, 0.0)
    """
    binary_only(scores, "fit_platt", "VectorScaling or MulticlassTemperatureScaling", name="scores")
    z, y, w = check_targets(scores, targets, item_weights)
    a_box = check_bounds(alpha_bounds, name="alpha_bounds")
    b_box = check_bounds(beta_bounds, name="beta_bounds")
    with x64():
        args = _padded(z, y, w)

        def fun(p):
            v, g = _platt_value_grad(jnp.asarray(p), *args)
            return float(v), np.asarray(g, dtype=np.float64)

        x0 = np.array([np.clip(1.0, *a_box), np.clip(0.0, *b_box)])
        res = optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=[a_box, b_box],
                                options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-10})
    hit = []
    for name, x, (lo, hi) in (("alpha", res.x[0], a_box), ("beta", res.x[1], b_box)):
        if min(abs(x - lo), abs(x - hi)) <= 1e-8 * (hi - lo):
            hit.append(name)
    if hit:
        warnings.warn(
            f"the Platt fit ended on the boundary for {hit} (alpha = {res.x[0]:.4g} in {a_box}, beta = {res.x[1]:.4g} "
            f"in {b_box}): the loss still decreases beyond it. With corrected labels the corrected loss may be "
            "unbounded below; otherwise widen the bounds.", BoundaryWarning, stacklevel=2)
    if not res.success:
        warnings.warn(f"L-BFGS-B did not converge for the Platt fit: {res.message}", ConvergenceWarning, stacklevel=2)
    return PlattFit(float(res.x[0]), float(res.x[1]), float(res.fun), bool(hit), tuple(hit), a_box, b_box,
                    bool(res.success), int(res.nit), int(z.size))


def predict_platt(scores, alpha: float, beta: float) -> np.ndarray:
    """``sigmoid(alpha clipped_logit(z) + beta)``, shape (n_items,)."""
    z = check_scores(scores)
    with x64():
        return np.asarray(_predict_platt(_pad(z, 0.5), float(alpha), float(beta)), dtype=np.float64)[:z.size]


# ----------------------------------------------------------------------------- projected histogram
@dataclass(frozen=True)
class HistogramFit:
    """A fitted projected histogram: each score maps to its bin's value.

    edges : (n_bins + 1,) fitting bins
    bin_values : (n_bins,) ``clip(mean target, 0, 1)``; empty bins hold the bin midpoint
    raw_means : (n_bins,) unclipped mean target (NaN for empty bins)
    counts : (n_bins,) items (or item weight) per bin
    empty_bins : tuple of int
    clipped_bins : tuple of int, bins whose mean left [0, 1] and was projected
    """

    edges: np.ndarray = field(repr=False)
    bin_values: np.ndarray
    raw_means: np.ndarray = field(repr=False)
    counts: np.ndarray = field(repr=False)
    empty_bins: tuple
    clipped_bins: tuple
    method: str = "projected histogram: per-bin mean target clipped to [0, 1]; empty bin -> bin midpoint"


def fit_projected_histogram(scores, targets, *, bins=10, item_weights=None) -> HistogramFit:
    """Per fitting bin, the mean target projected onto [0, 1] (paper §5.2).

    With corrected labels this is the projected-histogram recalibrator; with 0/1 or soft labels it is
    plain histogram binning (the naive baseline). An empty bin has no evidence; it maps to its midpoint
    ``(lower + upper) / 2`` (the identity map's value there) and a :class:`DataWarning` names it.

    Parameters
    ----------
    scores, targets, item_weights
        As in :func:`fit_temperature`.
    bins : int (equal width) or Binning (equal-mass edges come from ``scores``)

    Returns
    -------
    HistogramFit

    Examples
    --------
    >>> fit = fit_projected_histogram([0.1, 0.2, 0.8, 0.9], [-0.2, 0.4, 1.0, 1.6], bins=2)
    >>> fit.bin_values.tolist(), fit.clipped_bins
    ([0.1, 1.0], (1,))
    """
    binary_only(scores, "fit_projected_histogram", "TopLabelHistogram", name="scores")
    z, y, w = check_targets(scores, targets, item_weights)
    edges = as_binning(bins).edges_for(z)
    n_bins = edges.size - 1
    idx = bin_index(z, edges)
    counts = np.bincount(idx, weights=w, minlength=n_bins)
    sums = np.bincount(idx, weights=w * y, minlength=n_bins)
    empty = counts == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = np.where(empty, np.nan, sums / counts)
    values = np.where(empty, (edges[:-1] + edges[1:]) / 2, np.clip(raw, 0.0, 1.0))
    clipped = ~empty & ((raw < 0) | (raw > 1))
    if empty.any():
        warnings.warn(f"fitting bins {_preview(np.flatnonzero(empty))} are empty; they map to their midpoints.",
                      DataWarning, stacklevel=2)
    return HistogramFit(edges, values, raw, counts, tuple(int(k) for k in np.flatnonzero(empty)),
                        tuple(int(k) for k in np.flatnonzero(clipped)))


def predict_histogram(scores, edges, bin_values) -> np.ndarray:
    """The value of each score's bin, shape (n_items,)."""
    z = check_scores(scores)
    return np.asarray(bin_values, dtype=np.float64)[bin_index(z, np.asarray(edges, dtype=np.float64))]
