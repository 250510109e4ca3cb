"""Multiclass recalibration from noisy labels: corrected-loss temperature / vector scaling, top-label histogram.

Issue 18, item 4; DESIGN §8 ("K classes"). Each map is fitted on a classifier's class probabilities (or
logits) of shape (n_items, K) and a *target matrix* of the same shape:

* **corrected targets** (the noise-corrected fit): per item the combined corrected clean-label vector
  ``t_i = sum_r w_{j_r} C_{j_r}^{-T} e_{A_r} / sum_r w_{j_r}`` (``core.channel.corrected_targets``), which is
  unbiased for the one-hot clean label ``e_{Y_i}`` but may leave [0, 1];
* one-hot labels (majority vote, or clean labels when known: the oracle) or the vote distribution: the naive
  fits, for comparison.

**Corrected loss** (the multiclass form of paper §5.1). The cross-entropy is linear in the label vector,
``l(q, y) = -sum_k y_k log q_k``, so replacing ``e_Y`` by ``t_i`` gives
``E[-sum_k t_ik log q_ik | Y_i] = -log q_{i, Y_i}``: the corrected loss is unbiased for the clean loss of *any*
fixed map, and its minimiser over a family targets the clean-risk minimiser. For logits ``v_i`` of the map,
``-sum_k t_ik log softmax(v_i)_k = s_i logsumexp(v_i) - sum_k t_ik v_ik`` with ``s_i = sum_k t_ik`` (1 for
one-hot labels, vote distributions and corrected vectors with the same weight on every coordinate).

**Unbounded below.** Because corrected targets have negative entries, the corrected loss of a rich enough family
can decrease without end (e.g. for vector scaling, ``t_i0 < 0`` for the items of one class lets
``bias_0 -> -inf`` lower the loss linearly). As for the binary maps, every parameter lives in a compact box and
an optimum on its boundary is flagged (``on_boundary_``, :class:`~noisycal_bayes.warnings.BoundaryWarning`);
vector scaling adds a small ridge toward the identity map (see :class:`VectorScaling`).

Logits from probabilities: ``log(clip(p, 1e-6, 1 - 1e-6))`` per class (the binary maps' clipping rule, paper
Appendix E.2; softmax is unchanged by the log's missing normaliser). For K = 2 the logit difference is then
exactly the binary ``clipped_logit(p_1)``, and ``softmax((z_0, z_1) / T)_1 = sigmoid((z_1 - z_0) / T)``, so
:class:`MulticlassTemperatureScaling` on ``(1 - z, z)`` with targets ``(1 - y, y)`` is the binary
:class:`~noisycal_bayes.recalibration.TemperatureScaling` on ``(z, y)`` (tested).

Posterior versions (:class:`PosteriorMulticlassTemperature`, :class:`PosteriorTopLabelHistogram`) refit the map
for each posterior confusion draw (confusion -> annotator weights -> corrected targets) on Bayesian-bootstrap
weights of the items, as :class:`~noisycal_bayes.recalibration.PosteriorTemperature` does for two classes.
"""
from __future__ import annotations

import warnings

import numpy as np
from scipy import optimize, sparse
from scipy.special import logsumexp, softmax

from .._validation import _preview, check_bounds, check_choice, check_level
from ..data import Binning, as_binning, bin_index
from ..propagate.draws import output_index
from ..warnings import BoundaryWarning, ConvergenceWarning, DataWarning
from ._newton import newton_temperatures
from ._params import ParamsMixin
from .maps import NotFittedError, _jsonable, _Map

__all__ = ["MulticlassTemperatureScaling", "PosteriorMulticlassTemperature", "PosteriorTopLabelHistogram",
           "TopLabelHistogram", "VectorScaling"]

from ..core import annotator_weights, corrected_vectors, usable_confusions


#: Default temperature box ``[T_min, T_max]`` (the binary maps' box).
TEMPERATURE_BOUNDS = (0.05, 20.0)
#: Default vector-scaling boxes: per-class scale (positive: each class's logit stays increasing) and bias.
SCALE_BOUNDS = (0.01, 20.0)
BIAS_BOUNDS = (-10.0, 10.0)
#: Default ridge of vector scaling toward the identity map.
VECTOR_L2 = 1e-3
#: Rows of ``probs`` must sum to 1 within this (absolute); they are then renormalised. Probabilities written
#: with 5 decimals (CIFAR-10N's file) are off by up to 3e-5; a row off by more is not a probability vector.
PROBS_SUM_TOL = 1e-3
LOGIT_CLIP = 1e-6
_INPUTS = ("probs", "logits")
# Floats per chunk of (draws x items x classes) arrays: bounds the memory of the vectorised refits.
_CHUNK_FLOATS = 4_000_000


# ----------------------------------------------------------------------------- validation (one helper per kind)
def _check_probs(probs, *, name="probs") -> np.ndarray:
    """``probs`` as a float64 (n, K) copy: finite, in [0, 1], rows summing to 1 within PROBS_SUM_TOL (renormalised)."""
    p = _matrix(probs, name)
    bad = ~np.isfinite(p).all(axis=1)
    if bad.any():
        raise ValueError(f"`{name}` must be finite; got NaN or inf in rows {_preview(np.flatnonzero(bad))}.")
    bad = ((p < 0) | (p > 1)).any(axis=1)
    if bad.any():
        raise ValueError(f"`{name}` must lie in [0, 1]; got values outside in rows {_preview(np.flatnonzero(bad))}. "
                         "Pass logits with `inputs='logits'`.")
    off = np.abs(p.sum(axis=1) - 1.0) > PROBS_SUM_TOL
    if off.any():
        rows = np.flatnonzero(off)
        raise ValueError(f"rows of `{name}` must sum to 1 (within {PROBS_SUM_TOL}); rows {_preview(rows)} sum to "
                         f"{_preview(np.round(p[rows].sum(axis=1), 6))}. Pass softmax probabilities, or logits with "
                         "`inputs='logits'`.")
    return p / p.sum(axis=1, keepdims=True)


def _matrix(x, name) -> np.ndarray:
    try:
        a = np.array(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be a numeric array of shape (n_items, n_classes); could not convert: "
                         f"{exc}") from None
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] < 2:
        raise ValueError(f"`{name}` must have shape (n_items, n_classes) with n_items >= 1 and n_classes >= 2; got "
                         f"shape {a.shape}.")
    return a


def _check_logits_or_probs(x, inputs, *, n_classes=None, name=None):
    """``(logits, probs)`` of validated inputs, each float64 (n, K); ``n_classes`` checks a fitted map's K."""
    if inputs == "probs":
        name = name or "probs"
        p = _check_probs(x, name=name)
        z = np.log(np.clip(p, LOGIT_CLIP, 1 - LOGIT_CLIP))
    else:
        name = name or "logits"
        z = _matrix(x, name)
        bad = ~np.isfinite(z).all(axis=1)
        if bad.any():
            raise ValueError(f"`{name}` must be finite; got NaN or inf in rows {_preview(np.flatnonzero(bad))}.")
        p = softmax(z, axis=1)
    if n_classes is not None and z.shape[1] != n_classes:
        raise ValueError(f"`{name}` has {z.shape[1]} classes but the map was fitted with {n_classes}.")
    return z, p


def _check_targets(targets, shape) -> np.ndarray:
    """Target matrix of shape ``shape`` = (n, K): finite reals (corrected targets may leave [0, 1])."""
    t = _matrix(targets, "targets")
    if t.shape != shape:
        raise ValueError(f"`targets` must have the shape of the inputs {shape}; got {t.shape}.")
    bad = ~np.isfinite(t).all(axis=1)
    if bad.any():
        raise ValueError(f"`targets` must be finite; got NaN or inf in rows {_preview(np.flatnonzero(bad))}. Items "
                         "without a usable response have a NaN corrected target: drop them, e.g. "
                         "`keep = np.isfinite(targets).all(axis=1)`.")
    return t


def _check_inputs_kind(inputs, func):
    return check_choice(inputs, _INPUTS, name="inputs", func=func)


def _check_confusion(confusion, func):
    """``(draws (S, J, K, K), is_posterior)`` from draws, one confusion (J, K, K) or a fit with ``.confusion``."""
    c = getattr(confusion, "confusion", confusion)
    try:
        c = np.array(c, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{func}: `confusion` must be an array of shape (n_draws, J, K, K) or (J, K, K); could not "
                         f"convert: {exc}") from None
    if c.ndim not in (3, 4) or c.shape[-1] != c.shape[-2] or c.shape[-1] < 2:
        raise ValueError(f"{func}: `confusion` must have shape (n_draws, J, K, K) or (J, K, K) with K >= 2; got "
                         f"{c.shape}.")
    is_posterior = c.ndim == 4
    c = c if is_posterior else c[None]
    if not np.isfinite(c).all() or (c < 0).any():
        raise ValueError(f"{func}: `confusion` must be finite and non-negative.")
    off = np.abs(c.sum(axis=-1) - 1) > 1e-6
    if off.any():
        s, j, y = np.argwhere(off)[0]
        raise ValueError(f"{func}: each confusion row C[j, y, :] must sum to 1 (row-stochastic); draw {s}, annotator "
                         f"{j}, row {y} sums to {c[s, j, y].sum():.6g}.")
    return c, is_posterior


def _check_responses(responses, n_items, n_annotators, n_classes, func):
    """``(item, annotator, label)`` int arrays from a Responses, a 3-tuple, or an object with ``.responses``."""
    r = getattr(responses, "responses", responses)
    try:
        item, annotator, label = (np.asarray(x) for x in tuple(r)[:3])
    except (TypeError, ValueError):
        raise ValueError(f"{func}: `responses` must be a Responses (item, annotator, label) or a data set with "
                         f"`.responses`; got {type(responses).__name__}.") from None
    if not (item.shape == annotator.shape == label.shape) or item.ndim != 1 or item.size == 0:
        raise ValueError(f"{func}: `responses` needs three 1-d arrays of one length; got shapes {item.shape}, "
                         f"{annotator.shape}, {label.shape}.")
    for name, arr, top in (("item", item, n_items), ("annotator", annotator, n_annotators), ("label", label, n_classes)):
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"{func}: response `{name}` must be integers; got dtype {arr.dtype}.")
        bad = (arr < 0) | (arr >= top)
        if bad.any():
            raise ValueError(f"{func}: response `{name}` must lie in 0..{top - 1}; got {_preview(arr[bad])} at "
                             f"responses {_preview(np.flatnonzero(bad))}.")
    return item.astype(np.int64), annotator.astype(np.int64), label.astype(np.int64)


def _check_l2(l2):
    try:
        v = float(l2)
    except (TypeError, ValueError):
        raise ValueError(f"`l2` must be a number > 0; got {l2!r}.") from None
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"`l2` must be finite and > 0 (it keeps the fit unique and finite); got {l2!r}.")
    return v


# ----------------------------------------------------------------------------- shared numerics
def _expected_logit(beta, z):
    """``(E_q[z_i], Var_q[z_i])`` under ``q = softmax(beta z_i)``; ``beta`` broadcasts against ``z[..., 0]``."""
    q = softmax(beta[..., None] * z, axis=-1)
    m = np.sum(q * z, axis=-1)
    return m, np.sum(q * (z - m[..., None]) ** 2, axis=-1)


def _temperature_terms(z, t):
    """``(s_i, c_i)``: row sums of the targets and ``sum_k t_ik z_ik``, the only way the targets enter the loss."""
    return t.sum(axis=-1), np.sum(t * z, axis=-1)


def _top_label_full(p, top, conf_new):
    """Probability vectors whose top class keeps its index and gets probability ``conf_new`` (>= 1/K).

    The remaining mass ``r = 1 - conf_new`` goes to the other classes in proportion to their probabilities,
    mixed with an even split ``r / (K - 1)`` (mixing weight ``lam`` in [0, 1], as close to 1 as allowed) so that
    no other class exceeds ``(conf_new + r / (K - 1)) / 2``, halfway between the even share and ``conf_new``: then
    the top class stays the strict argmax whenever ``conf_new > 1/K`` (an even split always fits because
    ``conf_new >= 1/K``).
    """
    n, k = p.shape
    rows = np.arange(n)
    rest = 1.0 - conf_new
    other = p.copy()
    other[rows, top] = 0.0
    tot = other.sum(axis=1)
    even = 1.0 / (k - 1)
    # Proportional shares of the other classes (an even split when the top class held all the mass).
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(tot[:, None] > 0, other / tot[:, None], even)
    share[rows, top] = 0.0
    smax = share.max(axis=1)
    cap = 0.5 * (conf_new + rest * even)
    # rest * (lam * smax + (1 - lam) * even) <= cap  <=>  lam <= (cap / rest - even) / (smax - even).
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where((rest > 0) & (smax > even), (cap / rest - even) / (smax - even), 1.0)
    lam = np.clip(lam, 0.0, 1.0)
    out = rest[:, None] * (lam[:, None] * share + (1 - lam[:, None]) * even)
    out[rows, top] = conf_new
    return out


def _top_label_edges(bins, conf, n_classes):
    """Fitting edges on the confidence: an int or ``Binning.equal_width`` is equal width on [1/K, 1]."""
    b = as_binning(bins)
    if b.kind == "equal_width":
        # The top-label confidence max_k p_k is never below 1/K: equal width over the values it can take.
        lo = 1.0 / n_classes
        return np.concatenate([[0.0], lo + (1 - lo) * np.arange(1, b.n_bins) / b.n_bins, [1.0]])
    return b.edges_for(conf)


def _bins_to_json(b):
    if isinstance(b, Binning):
        return {"kind": b.kind, "n_bins": b.n_bins, "edges": None if b.edges is None else list(b.edges)}
    return _jsonable(b)


def _bins_from_json(b, cls):
    if not isinstance(b, dict):
        return b
    kind = b.get("kind")
    if kind == "edges":
        return Binning.from_edges(b["edges"])
    if kind in ("equal_mass", "equal_width"):
        return getattr(Binning, kind)(b["n_bins"])
    raise ValueError(f"unknown binning kind {kind!r} in saved {cls}.")


# ----------------------------------------------------------------------------- point maps
def _projected_newton(objective, x0, lo, hi, *, gtol=1e-10, max_iter=100):
    """Minimise a smooth function on the box ``[lo, hi]`` by projected Newton steps with backtracking.

    ``objective(x)`` returns ``(value, gradient, Hessian)``, ``objective(x, hessian=False)`` the value. Variables at
    a bound whose gradient points out of the box are held there; the others take a Newton step (the Hessian is
    lifted to positive definite if needed), projected onto the box, halved until the value decreases enough.
    Returns ``(x, gradient, converged, message)``; converged when the projected gradient is below ``gtol``.
    """
    x = np.clip(x0, lo, hi)
    for it in range(max_iter):
        f, g, h = objective(x)
        if np.max(np.abs(x - np.clip(x - g, lo, hi))) < gtol:
            return x, g, True, f"projected gradient < {gtol:g} after {it} Newton steps"
        held = ((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0))
        free = np.flatnonzero(~held)
        hf = h[np.ix_(free, free)]
        # Lift the free block to positive definite (only when target rows with negative sums make it indefinite).
        low = np.linalg.eigvalsh(hf)[0]
        if low < 1e-12:
            hf = hf + (1e-12 - low) * np.eye(free.size)
        d = np.zeros_like(x)
        d[free] = -np.linalg.solve(hf, g[free])
        step = 1.0
        while True:
            xn = np.clip(x + step * d, lo, hi)
            if objective(xn, hessian=False) <= f + 1e-4 * g @ (xn - x) or step < 1e-10:
                break
            step *= 0.5
        if np.max(np.abs(xn - x)) < 1e-15:
            f, g, _ = objective(xn)
            ok = np.max(np.abs(xn - np.clip(xn - g, lo, hi))) < 1e-6
            return xn, g, ok, f"no further progress after {it + 1} Newton steps"
        x = xn
    f, g, _ = objective(x)
    return x, g, False, f"no convergence in {max_iter} Newton steps"


class _MulticlassMap(_Map):
    """Shared plumbing of the multiclass point maps (JSON round trip from :class:`_Map`)."""

    def _inputs(self, x, *, fitted: bool):
        _check_inputs_kind(self.inputs, type(self).__name__)
        return _check_logits_or_probs(x, self.inputs, n_classes=self.n_classes_ if fitted else None)

    @classmethod
    def _params_from_json(cls, params: dict) -> dict:
        return {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}


class MulticlassTemperatureScaling(_MulticlassMap):
    """``q = softmax(z / T)`` with one temperature ``T`` fitted by (corrected) cross-entropy on ``[T_min, T_max]``.

    Parameters
    ----------
    bounds : (T_min, T_max), default (0.05, 20)
    inputs : {"probs", "logits"}, default "probs"
        What ``fit`` and ``predict_proba`` receive: class probabilities (rows summing to 1) or logits.

    Attributes
    ----------
    temperature_ : float
    loss_ : float
        Mean (corrected) cross-entropy at the optimum.
    on_boundary_ : bool
        ``T`` ended at ``T_min`` or ``T_max`` (a BoundaryWarning was issued).
    n_classes_, n_items_ : int

    Notes
    -----
    With ``beta = 1/T`` the mean loss ``mean_i [s_i logsumexp(beta z_i) - beta sum_k t_ik z_ik]`` has derivative
    ``mean_i [s_i E_{softmax(beta z_i)}[z_i] - sum_k t_ik z_ik]`` and second derivative
    ``mean_i s_i Var_{softmax(beta z_i)}[z_i]``: convex in ``beta`` when the target rows sum to ``s_i >= 0``
    (always for one-hot labels, vote distributions and corrected vectors with one weight per annotator). The
    root of the derivative is found by Brent's method, or the optimum is a box end (as in the binary
    :func:`~noisycal_bayes.reference.recalibration.fit_temperature`). Relabelling the classes permutes the
    columns of ``z`` and ``t`` and leaves ``T`` unchanged.

    **When the corrected loss is unbounded below in T.** As ``T -> 0`` the slope of the loss in ``beta`` tends to
    ``mean_i [s_i max_k z_ik - sum_k t_ik z_ik]``, whose expectation is ``mean_i (max_k z_ik - z_{i, Y_i}) >= 0``.
    With a misspecified confusion (or few items) it can be negative: a confident item whose corrected target puts
    small negative mass on classes with very negative logits (``log 1e-6 = -13.8`` for probabilities rounded to
    0) has ``sum_k t_ik z_ik > max_k z_ik``. The fit then ends at ``T_min`` with a BoundaryWarning; read it as a
    sign that the confusion estimate does not fit the labels.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> u = rng.normal(size=(3000, 4))                        # true logits
    >>> y = (u + rng.gumbel(size=u.shape)).argmax(axis=1)     # Y ~ softmax(u)
    >>> ts = MulticlassTemperatureScaling(inputs="logits").fit(2 * u, np.eye(4)[y])   # overconfident by T = 2
    >>> 1.7 < ts.temperature_ < 2.3
    True
    """

    _fitted_names = ("temperature_", "loss_", "on_boundary_", "n_classes_", "n_items_")
    _array_names = frozenset()

    def __init__(self, *, bounds=TEMPERATURE_BOUNDS, inputs="probs"):
        self.bounds = bounds
        self.inputs = inputs

    def fit(self, X, targets) -> "MulticlassTemperatureScaling":
        """Fit ``T``.

        Parameters
        ----------
        X : array-like of shape (n_items, n_classes)
            Class probabilities (``inputs="probs"``) or logits (``inputs="logits"``).
        targets : array-like of shape (n_items, n_classes)
            Corrected clean-label vectors (noise-corrected fit; entries may leave [0, 1]), one-hot labels or
            vote distributions (naive fits).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad shapes, probability rows not summing to 1, non-finite targets, bad ``bounds``, or inputs whose
            every row is uniform (``T`` is then not identified).
        """
        z, _ = self._inputs(X, fitted=False)
        t = _check_targets(targets, z.shape)
        t_lo, t_hi = check_bounds(self.bounds, name="bounds", positive=True)
        if np.all(np.ptp(z, axis=1) == 0):
            raise ValueError("every row of the inputs is uniform (all logits equal): the temperature is not "
                             "identified.")
        s, c = _temperature_terms(z, t)

        def grad(beta):
            return float(np.mean(s * _expected_logit(np.array(beta), z)[0] - c))

        def loss(beta):
            return float(np.mean(s * logsumexp(beta * z, axis=1) - beta * c))

        b_lo, b_hi = 1.0 / t_hi, 1.0 / t_lo
        if grad(b_lo) >= 0:
            beta, on_boundary = b_lo, True
        elif grad(b_hi) <= 0:
            beta, on_boundary = b_hi, True
        else:
            beta, on_boundary = optimize.brentq(grad, b_lo, b_hi, xtol=1e-14, rtol=1e-12), False
            # Guard for non-convex losses (target rows with negative sums): a lower box end wins.
            ends = {b_lo: loss(b_lo), b_hi: loss(b_hi)}
            best = min(ends, key=ends.get)
            if ends[best] < loss(beta):
                beta, on_boundary = best, True
        self.temperature_ = 1.0 / beta
        self.loss_ = loss(beta)
        self.on_boundary_ = on_boundary
        self.n_classes_, self.n_items_ = int(z.shape[1]), int(z.shape[0])
        if on_boundary:
            warnings.warn(f"the temperature fit ended on the boundary T = {self.temperature_:.4g} of [{t_lo}, {t_hi}]: "
                          "the loss still decreases beyond it. With corrected targets this can mean the corrected "
                          "loss is unbounded below (targets outside [0, 1], e.g. an ill-conditioned confusion); "
                          "otherwise widen `bounds`.", BoundaryWarning, stacklevel=2)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Recalibrated class probabilities ``softmax(z / T)``, shape (n_items, n_classes)."""
        self._check_fitted()
        z, _ = self._inputs(X, fitted=True)
        return softmax(z / self.temperature_, axis=1)


class VectorScaling(_MulticlassMap):
    """``q = softmax(scale * z + bias)`` (per-class scale and bias) fitted by (corrected) cross-entropy.

    Parameters
    ----------
    scale_bounds : (low, high), default (0.01, 20)
        Box of every ``scale_k``; positive, so each class's probability increases with its own logit.
    bias_bounds : (low, high), default (-10, 10)
    l2 : float, default 1e-3
        Ridge ``l2 / 2 (||scale - 1||^2 + ||bias||^2)`` added to the mean loss (shrinks toward the identity map).
    inputs : {"probs", "logits"}, default "probs"

    Attributes
    ----------
    scale_, bias_ : ndarray of shape (n_classes,)
    loss_ : float
        Mean (corrected) cross-entropy at the optimum, without the ridge.
    on_boundary_ : bool
    boundary_params_ : tuple of str
        Parameters at a box end, e.g. ``("bias[0]",)``.
    converged_ : bool
    n_classes_, n_items_ : int

    Notes
    -----
    **Why the ridge and the box.** (1) Adding one constant to every bias leaves the softmax unchanged, so the
    unpenalised fit is not unique; the ridge picks the centred bias (the constant only raises the penalty), which
    makes the fit unique and equivariant under relabelling the classes (the parameters are permuted). (2) With
    corrected targets (negative entries) the corrected loss can be unbounded below: e.g. if ``sum_i t_i0 < 0``,
    then ``bias_0 -> -inf`` lowers the loss at the rate ``-mean_i t_i0``. The loss grows at most linearly in the
    parameters, so the quadratic ridge makes the objective coercive (a finite minimiser always exists) and the box
    keeps it where the map means something; an optimum on the box is flagged with a BoundaryWarning, as for the
    binary Platt map. The ridge's pull on an interior fit is of order ``l2 / curvature`` (about 1e-3 relative).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> u = rng.normal(size=(3000, 3))
    >>> y = (u + rng.gumbel(size=u.shape)).argmax(axis=1)
    >>> vs = VectorScaling(inputs="logits").fit(u, np.eye(3)[y])   # already calibrated: scale ~ 1, bias ~ 0
    >>> bool(np.all(np.abs(vs.scale_ - 1) < 0.2) and np.all(np.abs(vs.bias_) < 0.2))
    True
    """

    _fitted_names = ("scale_", "bias_", "loss_", "on_boundary_", "boundary_params_", "converged_", "n_classes_",
                     "n_items_")
    _array_names = frozenset({"scale_", "bias_"})

    def __init__(self, *, scale_bounds=SCALE_BOUNDS, bias_bounds=BIAS_BOUNDS, l2=VECTOR_L2, inputs="probs"):
        self.scale_bounds = scale_bounds
        self.bias_bounds = bias_bounds
        self.l2 = l2
        self.inputs = inputs

    def fit(self, X, targets) -> "VectorScaling":
        """Fit ``(scale, bias)``; arguments as in :meth:`MulticlassTemperatureScaling.fit`. Returns self."""
        z, _ = self._inputs(X, fitted=False)
        t = _check_targets(targets, z.shape)
        a_lo, a_hi = check_bounds(self.scale_bounds, name="scale_bounds", positive=True)
        b_lo, b_hi = check_bounds(self.bias_bounds, name="bias_bounds")
        l2 = _check_l2(self.l2)
        n, k = z.shape
        s = t.sum(axis=1)

        centre = np.concatenate([np.ones(k), np.zeros(k)])

        def objective(theta, hessian=True):
            """Penalised mean loss, its gradient and Hessian in theta = (scale, bias)."""
            v = theta[:k] * z + theta[k:]
            lse = logsumexp(v, axis=1)
            d = theta - centre
            val = np.mean(s * lse - np.sum(t * v, axis=1)) + 0.5 * l2 * d @ d
            if not hessian:
                return val
            q = np.exp(v - lse[:, None])
            sq = s[:, None] * q
            # d/dv_ik of the mean loss: (s_i q_ik - t_ik) / n; dv_k/dscale_k = z_k, dv_k/dbias_k = 1.
            gv = (sq - t) / n
            grad = np.concatenate([np.sum(gv * z, axis=0), np.sum(gv, axis=0)]) + l2 * d
            # d2/dv2 of item i: s_i (diag(q_i) - q_i q_i^T), mapped through the same Jacobian.
            sz, qz = sq * z, q * z
            h_aa = np.diag(np.sum(sz * z, axis=0)) - sz.T @ qz
            h_ab = np.diag(np.sum(sz, axis=0)) - sz.T @ q
            h_bb = np.diag(np.sum(sq, axis=0)) - sq.T @ q
            hess = np.block([[h_aa, h_ab], [h_ab.T, h_bb]]) / n + l2 * np.eye(2 * k)
            return val, grad, hess

        lo = np.array([a_lo] * k + [b_lo] * k)
        hi = np.array([a_hi] * k + [b_hi] * k)
        theta, grad, converged, message = _projected_newton(objective, np.clip(centre, lo, hi), lo, hi)
        # On the boundary: at a box end with the gradient pointing out of the box.
        at = ((theta <= lo + 1e-9) & (grad > 0)) | ((theta >= hi - 1e-9) & (grad < 0))
        names = [f"scale[{i}]" for i in range(k)] + [f"bias[{i}]" for i in range(k)]
        self.scale_, self.bias_ = theta[:k].copy(), theta[k:].copy()
        d = theta - centre
        self.loss_ = float(objective(theta, hessian=False) - 0.5 * l2 * d @ d)
        self.boundary_params_ = tuple(names[i] for i in np.flatnonzero(at))
        self.on_boundary_ = bool(at.any())
        self.converged_ = converged
        self.n_classes_, self.n_items_ = int(k), int(n)
        if self.on_boundary_:
            warnings.warn(f"the vector-scaling fit ended on the box boundary for {list(self.boundary_params_)}: the "
                          "loss still decreases beyond it. With corrected targets this can mean the corrected loss is "
                          "unbounded below (negative target entries); otherwise widen the bounds.", BoundaryWarning,
                          stacklevel=2)
        if not self.converged_:
            warnings.warn(f"vector scaling did not converge: {message}", ConvergenceWarning, stacklevel=2)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Recalibrated class probabilities ``softmax(scale * z + bias)``, shape (n_items, n_classes)."""
        self._check_fitted()
        z, _ = self._inputs(X, fitted=True)
        return softmax(self.scale_ * z + self.bias_, axis=1)


class TopLabelHistogram(_MulticlassMap):
    """Corrected top-label histogram: each confidence bin maps to its mean corrected target of the predicted class.

    Parameters
    ----------
    bins : int or Binning, default 10
        Bins on the confidence ``max_k p_k``: an int (or ``Binning.equal_width``) is equal width on [1/K, 1]
        (the values a confidence can take); ``Binning.equal_mass(b)`` takes quantiles of the fitting
        confidences; ``Binning.from_edges`` is used as given.
    inputs : {"probs", "logits"}, default "probs"

    Attributes
    ----------
    edges_ : ndarray of shape (n_bins + 1,)
    bin_values_ : ndarray of shape (n_bins,), in [1/K, 1]
        Recalibrated confidence of each bin; an empty bin holds its midpoint (clipped to [1/K, 1]).
    raw_means_ : ndarray of shape (n_bins,)
        Unprojected mean target of the predicted class (NaN for empty bins).
    counts_ : ndarray of shape (n_bins,)
    empty_bins_, clipped_bins_ : tuple of int
    n_classes_, n_items_ : int

    Notes
    -----
    With ``yhat_i = argmax_k p_ik`` (ties to the lowest index) and confidence ``c_i = p_{i, yhat_i}``, bin ``b``'s
    raw value is ``m_b = mean_{i in b} t_{i, yhat_i}``: with corrected targets an unbiased estimate of the
    bin's accuracy ``P(Y = yhat | c in b)`` (the top-label analogue of the projected histogram, paper §5.2).

    **The projection onto [1/K, 1]** mirrors
    :class:`~noisycal_bayes.recalibration.ProjectedHistogram`'s clip to [0, 1]. A recalibrated confidence must be
    the largest entry of a probability vector, so it lies in [1/K, 1]; ``m_b`` may leave that interval (corrected
    targets leave [0, 1], and a bin with few items is noisy). Among valid values, ``clip(m_b, 1/K, 1)`` is the one
    closest to ``m_b`` and minimises the bin's squared error ``(v - m_b)^2`` (the Brier score of the top label,
    up to a constant). It never moves the estimate farther from a true accuracy in [1/K, 1] (projection onto a
    convex set containing it is non-expansive); a true accuracy below 1/K cannot be represented by a top-label
    confidence at all, and 1/K is then the closest one.

    ``predict_proba`` returns full vectors: the predicted class keeps its index and gets the recalibrated
    confidence; the rest of the mass ``r`` goes to the other classes in proportion to their probabilities, shrunk
    toward an even split just enough that none exceeds ``(confidence + r / (K - 1)) / 2`` (so the top class stays
    the strict argmax with the map's probability, except at a confidence of exactly 1/K, where all are equal).

    Examples
    --------
    >>> import numpy as np
    >>> p = np.array([[0.9, 0.05, 0.05], [0.8, 0.1, 0.1], [0.2, 0.4, 0.4], [0.1, 0.1, 0.8]])
    >>> t = np.array([[1.2, -0.1, -0.1], [1.0, 0.0, 0.0], [0.5, 0.0, 0.5], [0.0, 1.0, 0.0]])
    >>> th = TopLabelHistogram(bins=2).fit(p, t)
    >>> th.raw_means_.round(4).tolist()       # bins [1/3, 2/3) and [2/3, 1]: mean target of the predicted class
    [0.0, 0.7333]
    >>> th.bin_values_.round(4).tolist()      # projected onto [1/K, 1]
    [0.3333, 0.7333]
    >>> th.predict_proba([[0.5, 0.3, 0.2]]).round(4).tolist()   # top class 1/3; the rest shared evenly
    [[0.3333, 0.3333, 0.3333]]
    """

    _fitted_names = ("edges_", "bin_values_", "raw_means_", "counts_", "empty_bins_", "clipped_bins_", "n_classes_",
                     "n_items_")
    _array_names = frozenset({"edges_", "bin_values_", "raw_means_", "counts_"})

    def __init__(self, *, bins=10, inputs="probs"):
        self.bins = bins
        self.inputs = inputs

    def fit(self, X, targets) -> "TopLabelHistogram":
        """Fit the bin values; arguments as in :meth:`MulticlassTemperatureScaling.fit`. Returns self."""
        _, p = self._inputs(X, fitted=False)
        t = _check_targets(targets, p.shape)
        n, k = p.shape
        top = p.argmax(axis=1)
        conf = p[np.arange(n), top]
        edges = _top_label_edges(self.bins, conf, k)
        idx = bin_index(conf, edges)
        n_bins = edges.size - 1
        counts = np.bincount(idx, minlength=n_bins).astype(np.float64)
        sums = np.bincount(idx, weights=t[np.arange(n), top], minlength=n_bins)
        empty = counts == 0
        with np.errstate(invalid="ignore", divide="ignore"):
            raw = np.where(empty, np.nan, sums / counts)
        lo = 1.0 / k
        mid = np.clip((edges[:-1] + edges[1:]) / 2, lo, 1.0)
        # Projection onto [1/K, 1], the values a top-label confidence can take (class Notes).
        self.bin_values_ = np.where(empty, mid, np.clip(raw, lo, 1.0))
        self.edges_, self.raw_means_, self.counts_ = edges, raw, counts
        self.empty_bins_ = tuple(int(b) for b in np.flatnonzero(empty))
        self.clipped_bins_ = tuple(int(b) for b in np.flatnonzero(~empty & ((raw < lo) | (raw > 1))))
        self.n_classes_, self.n_items_ = int(k), int(n)
        if empty.any():
            warnings.warn(f"confidence bins {_preview(np.flatnonzero(empty))} are empty; they map to their midpoints.",
                          DataWarning, stacklevel=2)
        return self

    def predict_confidence(self, X) -> np.ndarray:
        """Recalibrated top-label confidence, shape (n_items,), in [1/K, 1]."""
        self._check_fitted()
        _, p = self._inputs(X, fitted=True)
        return self.bin_values_[bin_index(p.max(axis=1), self.edges_)]

    def predict_proba(self, X) -> np.ndarray:
        """Recalibrated class probabilities, shape (n_items, n_classes): top class = :meth:`predict_confidence`."""
        self._check_fitted()
        _, p = self._inputs(X, fitted=True)
        top = p.argmax(axis=1)
        return _top_label_full(p, top, self.bin_values_[bin_index(p[np.arange(p.shape[0]), top], self.edges_)])

    def _params_to_json(self) -> dict:
        return {"bins": _bins_to_json(self.bins), "inputs": self.inputs}

    @classmethod
    def _params_from_json(cls, params: dict) -> dict:
        return {**params, "bins": _bins_from_json(params.get("bins", 10), cls.__name__)}


# ----------------------------------------------------------------------------- posterior maps
def _response_design(responses, n_items, n_annotators, n_classes):
    """Sparse (n_items, J K) counts of each item's (annotator, label) responses (repeats count twice)."""
    item, annotator, label = responses
    return sparse.csr_matrix((np.ones(item.size), (item, annotator * n_classes + label)),
                             shape=(n_items, n_annotators * n_classes))


def _combine(design, vectors, weights):
    """Weighted per-item means of corrected vectors for a batch of draws, shape (n_draws, n_items, K).

    ``vectors`` (S, J, K, K) = ``corrected_vectors`` per draw, ``weights`` (S, J, K): the formula of
    ``corrected_targets`` for all draws at once, as one sparse product (NaN rows for items without a usable
    response).
    """
    s_n, j, k, _ = vectors.shape
    w = np.broadcast_to(weights[:, :, None, :], (s_n, j, k, k))  # weight of (annotator, label) row, per coordinate
    # (J K, S K) right-hand sides: one column block per draw.
    num = design @ (w * vectors).reshape(s_n, j * k, k).transpose(1, 0, 2).reshape(j * k, s_n * k)
    den = design @ w.reshape(s_n, j * k, k).transpose(1, 0, 2).reshape(j * k, s_n * k)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (num / den).reshape(-1, s_n, k).transpose(1, 0, 2)
    ok = (den > 0).reshape(-1, s_n, k).all(axis=2).T
    return np.where(ok[..., None], out, np.nan)


def _target_draws(confusion, design, rule, prevalence):
    """Corrected targets for each confusion draw, shape (n_draws, n_items, K).

    ``rule`` is "iv" / "equal" or explicit weights (J, K); IV needs the overall prevalence: given (per draw) or
    the mean equal-weight corrected target of the items (as the binary IV weights estimate ``mu``). Per-draw
    vectors and weights come from the contract's ``corrected_vectors`` / ``annotator_weights``.
    """
    s_n, j, k = confusion.shape[:3]
    usable = np.stack([usable_confusions(c) for c in confusion])
    none = np.flatnonzero(~usable.any(axis=1))
    if none.size:
        raise ValueError(f"no annotator's confusion is invertible enough in draws {_preview(none)} (see "
                         "usable_confusions): the corrected targets are not defined.")
    # Unusable annotators get weight 0; the identity stands in for their (possibly singular) matrices.
    confusion = np.where(usable[:, :, None, None], confusion, np.eye(k))
    vectors = np.stack([corrected_vectors(c) for c in confusion])
    if isinstance(rule, str) and rule == "iv":
        if prevalence is None:
            eq = _combine(design, vectors, np.broadcast_to(usable[:, :, None], (s_n, j, k)).astype(np.float64))
            prevalence = np.nanmean(eq, axis=1)
        w = np.stack([annotator_weights(c, pi, rule="iv", usable=u) for c, pi, u in zip(confusion, prevalence, usable)])
    elif isinstance(rule, str):
        w = np.stack([annotator_weights(c, np.full(c.shape[-1], 1.0 / c.shape[-1]), rule="equal", usable=u) for c, u in zip(confusion, usable)])
    else:
        w = np.where(usable[:, :, None], rule[None], 0.0)
    return _combine(design, vectors, w)


class _PosteriorMulticlassMap(ParamsMixin):
    """Shared plumbing: validation of ``fit``'s inputs, fitted checks, draw summaries chunked over items."""

    def _check_fitted(self):
        if not hasattr(self, "n_draws_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call `fit` first.")

    def _prepare(self, X, responses, confusion, prevalence, func):
        """Validated ``(logits, probs, confusion draws, responses, rule, prevalence draws, rng)`` for ``fit``."""
        _check_inputs_kind(self.inputs, func)
        z, p = _check_logits_or_probs(X, self.inputs)
        n, k = z.shape
        conf, is_posterior = _check_confusion(confusion, func)
        if conf.shape[-1] != k:
            raise ValueError(f"{func}: the confusion matrices are {conf.shape[-1]} x {conf.shape[-1]} but the inputs "
                             f"have {k} classes.")
        j = conf.shape[1]
        resp = _check_responses(responses, n, j, k, func)
        rule = self.weights
        if isinstance(rule, str):
            check_choice(rule, ("iv", "equal"), name="weights", func=func)
        else:
            w = np.asarray(rule, dtype=np.float64)
            if w.shape == (j,):
                w = np.repeat(w[:, None], k, axis=1)
            if w.shape != (j, k) or not np.isfinite(w).all() or (w < 0).any():
                raise ValueError(f"{func}: explicit `weights` must be finite, non-negative, of shape ({j},) or "
                                 f"({j}, {k}); got shape {np.shape(rule)}.")
            rule = w
        n_source = conf.shape[0]
        if prevalence is not None:
            pi = np.array(prevalence, dtype=np.float64)
            if pi.shape == (k,):
                pi = np.broadcast_to(pi, (n_source, k))
            if pi.shape != (n_source, k):
                raise ValueError(f"{func}: `prevalence` must have shape ({k},) or ({n_source}, {k}) (one row per "
                                 f"confusion draw); got {np.shape(prevalence)}.")
            if not np.isfinite(pi).all() or (pi < 0).any():
                raise ValueError(f"{func}: `prevalence` must be finite and non-negative.")
        idx = output_index(n_source, self.n_draws, is_posterior=is_posterior)
        conf = conf[idx]
        prevalence = None if prevalence is None else pi[idx]
        return z, p, conf, _response_design(resp, n, j, k), rule, prevalence

    def _chunks(self, n_items):
        """Item chunks whose draws x items x classes arrays stay below ``_CHUNK_FLOATS``."""
        size = max(1, _CHUNK_FLOATS // max(1, self.n_draws_ * self.n_classes_))
        return [slice(a, min(a + size, n_items)) for a in range(0, n_items, size)]

    def predict_draws(self, X) -> np.ndarray:
        """Recalibrated class probabilities per draw, shape (n_draws, n_items, n_classes)."""
        self._check_fitted()
        z, p = _check_logits_or_probs(X, self.inputs, n_classes=self.n_classes_)
        return self._draws_of(z, p)

    def predict_proba(self, X) -> np.ndarray:
        """Posterior mean of the recalibrated class probabilities, shape (n_items, n_classes)."""
        self._check_fitted()
        z, p = _check_logits_or_probs(X, self.inputs, n_classes=self.n_classes_)
        out = np.empty(z.shape)
        for sl in self._chunks(z.shape[0]):
            out[sl] = self._draws_of(z[sl], p[sl]).mean(axis=0)
        return out

    def predict_interval(self, X, level: float = 0.9):
        """Equal-tailed ``level`` band of each recalibrated class probability: ``(lower, upper)``, each (n_items,
        n_classes)."""
        self._check_fitted()
        level = check_level(level)
        z, p = _check_logits_or_probs(X, self.inputs, n_classes=self.n_classes_)
        lo, hi = np.empty(z.shape), np.empty(z.shape)
        for sl in self._chunks(z.shape[0]):
            lo[sl], hi[sl] = np.quantile(self._draws_of(z[sl], p[sl]), [(1 - level) / 2, (1 + level) / 2], axis=0)
        return lo, hi


def _bootstrap_weights(rng, s_n, n, bootstrap):
    """Bayesian-bootstrap item weights (Dirichlet(1, ..., 1) rows), shape (s_n, n); ones without bootstrap."""
    g = rng.standard_exponential((s_n, n)) if bootstrap else np.ones((s_n, n))
    return g / g.sum(axis=1, keepdims=True)


def _temperatures(z, s, c, g, bounds, x0=0.0):
    """Corrected-loss temperature per draw: safeguarded Newton on ``log beta`` (``beta = 1/T``), as the binary.

    ``z`` (n, K); ``s, c, g`` (n_draws, n): target row sums, ``sum_k t_ik z_ik`` and item weights (0 for items
    without a target); ``x0`` the starting ``log beta``. Returns ``(T, at_T_min, at_T_max)``, each (n_draws,).
    """
    # softmax(beta z) = softmax(beta (z - max_k z)) for beta > 0: exp of non-positive numbers never overflows.
    zmax = z.max(axis=1)
    zc = z - zmax[:, None]
    zc2 = zc**2

    def grad_hess(x, rows):
        beta = np.exp(x)
        e = np.exp(beta[:, None, None] * zc[None])
        tot = e.sum(axis=2)
        m = np.einsum("snk,nk->sn", e, zc) / tot
        v = np.maximum(np.einsum("snk,nk->sn", e, zc2) / tot - m**2, 0.0)
        gr = np.sum(g[rows] * (s[rows] * (m + zmax) - c[rows]), axis=1)
        # Derivative with respect to log(beta): beta * sum_i g_i s_i Var(z_i) (only steers the Newton step).
        return gr, beta * np.sum(g[rows] * s[rows] * v, axis=1)

    return newton_temperatures(grad_hess, s.shape[0], bounds, x0)


class PosteriorMulticlassTemperature(_PosteriorMulticlassMap):
    """Multiclass temperature scaling with uncertainty: the corrected-loss ``T`` refitted per confusion draw.

    Parameters
    ----------
    bounds : (T_min, T_max), default (0.05, 20)
    weights : {"iv", "equal"} or array of shape (J,) or (J, K), default "iv"
        Annotator weights of the corrected targets, recomputed from each draw's confusions (IV per coordinate).
    bootstrap : bool, default True
        Reweight the items by Bayesian-bootstrap weights in each draw (sampling uncertainty of the fitting items).
    n_draws : int, optional
        Output draws: default every confusion draw, or 1000 for a single confusion (J, K, K).
    seed : int, default 0
        Seeds the bootstrap weights.
    inputs : {"probs", "logits"}, default "probs"

    Attributes
    ----------
    temperature_draws_ : ndarray of shape (n_draws,)
    temperature_ : float
        Posterior median temperature.
    n_boundary_ : int
        Draws whose optimum sits on the box boundary (a BoundaryWarning says how many).
    n_draws_, n_classes_ : int

    Notes
    -----
    The multiclass form of :class:`~noisycal_bayes.recalibration.PosteriorTemperature` (see its Notes for why a
    corrected-loss refit per channel draw and not a temperature curve model). Per draw ``s``: confusions
    ``C_s`` -> annotator weights -> corrected targets ``t_s`` -> ``beta_s = 1/T_s`` solving
    ``sum_i g_si [s_i E_{softmax(beta z_i)}[z_i] - sum_k t_sik z_ik] = 0``; the targets enter only through two
    numbers per item, so the refits of all draws run as one vectorised Newton iteration (safeguarded by
    bisection). With a single confusion and the same ``seed``, K = 2 gives the binary map's draws.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> u = rng.normal(size=(1500, 3)); y = (u + rng.gumbel(size=u.shape)).argmax(axis=1)
    >>> conf = np.array([[[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]] * 3)   # 3 annotators
    >>> lab = (rng.random((1500, 3, 1)) > conf[0][y][:, None].cumsum(axis=2)).sum(axis=2)  # A_ij ~ C[y_i, :]
    >>> responses = (np.repeat(np.arange(1500), 3), np.tile(np.arange(3), 1500), lab.ravel())
    >>> pt = PosteriorMulticlassTemperature(inputs="logits", n_draws=50).fit(2 * u, responses, conf)
    >>> lo, hi = pt.predict_interval(2 * u[:5])
    >>> bool(1.6 < pt.temperature_ < 2.4 and np.all(lo <= hi))
    True
    """

    def __init__(self, *, bounds=TEMPERATURE_BOUNDS, weights="iv", bootstrap: bool = True, n_draws=None,
                 seed: int = 0, inputs="probs"):
        self.bounds = bounds
        self.weights = weights
        self.bootstrap = bootstrap
        self.n_draws = n_draws
        self.seed = seed
        self.inputs = inputs

    def fit(self, X, responses, confusion, *, prevalence=None) -> "PosteriorMulticlassTemperature":
        """Fit on the classifier's outputs and the noisy labels, with confusion draws.

        Parameters
        ----------
        X : array-like of shape (n_items, n_classes)
            Probabilities or logits (``inputs``).
        responses : Responses, (item, annotator, label) arrays, or a data set with ``.responses``
            Labels in ``0..K-1`` of annotators ``0..J-1`` on items ``0..n_items-1``.
        confusion : array of shape (n_draws, J, K, K) or (J, K, K), or a fit with ``.confusion``
            Row-stochastic ``C[j, y, a] = P(A_j = a | Y = y)``: posterior draws, or one (point) estimate.
        prevalence : array of shape (K,) or (n_draws, K), optional
            Overall class prevalence for the IV weights; default the mean equal-weight corrected target.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad shapes, labels / annotators / items out of range, non-stochastic confusions, bad ``bounds``.
        """
        func = f"{type(self).__name__}.fit"
        t_lo, t_hi = check_bounds(self.bounds, name="bounds", positive=True)
        z, _, conf, design, rule, pi = self._prepare(X, responses, confusion, prevalence, func)
        n, k = z.shape
        n_out = conf.shape[0]
        rng = np.random.default_rng(self.seed)
        temps, at_min, at_max = np.empty(n_out), np.zeros(n_out, bool), np.zeros(n_out, bool)
        step = max(1, _CHUNK_FLOATS // (n * k))
        for a in range(0, n_out, step):
            b = min(a + step, n_out)
            t = _target_draws(conf[a:b], design, rule, None if pi is None else pi[a:b])
            ok = np.isfinite(t).all(axis=2)
            t = np.where(ok[..., None], t, 0.0)
            s, c = _temperature_terms(z[None], t)
            g = _bootstrap_weights(rng, b - a, n, self.bootstrap) * ok
            # Start at the median log(1/T) of the draws so far (fewer Newton steps; the root does not depend on it).
            x0 = -np.log(np.median(temps[:a])) if a else 0.0
            temps[a:b], at_min[a:b], at_max[a:b] = _temperatures(z, s, c, g, (t_lo, t_hi), x0)
        n_boundary = int((at_min | at_max).sum())
        if n_boundary:
            warnings.warn(f"{func}: in {n_boundary} of {n_out} draws the corrected-loss temperature sits on the box "
                          f"boundary ({int(at_min.sum())} at T_min={t_lo}, {int(at_max.sum())} at T_max={t_hi}); the "
                          "corrected loss may be unbounded there. Widen `bounds` or check the confusions.",
                          BoundaryWarning, stacklevel=2)
        self.temperature_draws_ = temps
        self.temperature_ = float(np.median(temps))
        self.n_boundary_ = n_boundary
        self.n_draws_, self.n_classes_ = int(n_out), int(k)
        return self

    def _draws_of(self, z, p):
        return softmax(z[None] / self.temperature_draws_[:, None, None], axis=2)


class PosteriorTopLabelHistogram(_PosteriorMulticlassMap):
    """Corrected top-label histogram with uncertainty: the bin values refitted per confusion draw.

    Parameters
    ----------
    bins : int or Binning, default 10
        As in :class:`TopLabelHistogram` (edges fixed once from the fitting confidences).
    weights, bootstrap, n_draws, seed, inputs
        As in :class:`PosteriorMulticlassTemperature`.

    Attributes
    ----------
    edges_ : ndarray of shape (n_bins + 1,)
    bin_draws_ : ndarray of shape (n_draws, n_bins), in [1/K, 1]
        Projected bin values per draw (midpoints for empty bins).
    bin_values_ : ndarray of shape (n_bins,)
        Posterior mean of each bin value.
    empty_bins_ : tuple of int
        Bins without fitting items: predictions there keep the midpoint and get the widest band (confidence in
        [1/K, 1], the other classes in [0, 1 - 1/K]).
    n_draws_, n_classes_ : int

    Notes
    -----
    Per draw ``s``: corrected targets ``t_s`` from the draw's confusions; bin value
    ``clip(sum_{i in b} g_si t_{s, i, yhat_i} / sum_{i in b} g_si, 1/K, 1)`` with Bayesian-bootstrap weights
    ``g_s`` (the projection is explained in :class:`TopLabelHistogram`). ``predict_proba`` is the posterior mean
    of the full vectors built as in :class:`TopLabelHistogram`.
    """

    def __init__(self, *, bins=10, weights="iv", bootstrap: bool = True, n_draws=None, seed: int = 0,
                 inputs="probs"):
        self.bins = bins
        self.weights = weights
        self.bootstrap = bootstrap
        self.n_draws = n_draws
        self.seed = seed
        self.inputs = inputs

    def fit(self, X, responses, confusion, *, prevalence=None) -> "PosteriorTopLabelHistogram":
        """Fit the bin values per draw; arguments as in :meth:`PosteriorMulticlassTemperature.fit`. Returns self."""
        func = f"{type(self).__name__}.fit"
        z, p, conf, design, rule, pi = self._prepare(X, responses, confusion, prevalence, func)
        n, k = p.shape
        top = p.argmax(axis=1)
        conf_top = p[np.arange(n), top]
        edges = _top_label_edges(self.bins, conf_top, k)
        n_bins = edges.size - 1
        idx = bin_index(conf_top, edges)
        empty = np.bincount(idx, minlength=n_bins) == 0
        mid = np.clip((edges[:-1] + edges[1:]) / 2, 1.0 / k, 1.0)
        n_out = conf.shape[0]
        rng = np.random.default_rng(self.seed)
        draws = np.empty((n_out, n_bins))
        onehot = np.zeros((n, n_bins))
        onehot[np.arange(n), idx] = 1.0
        step = max(1, _CHUNK_FLOATS // (n * k))
        for a in range(0, n_out, step):
            b = min(a + step, n_out)
            t = _target_draws(conf[a:b], design, rule, None if pi is None else pi[a:b])
            y = t[:, np.arange(n), top]
            ok = np.isfinite(y)
            g = _bootstrap_weights(rng, b - a, n, self.bootstrap) * ok
            counts = g @ onehot
            sums = np.where(ok, g * y, 0.0) @ onehot
            with np.errstate(invalid="ignore", divide="ignore"):
                raw = sums / counts
            # Projection onto [1/K, 1]; a bin without weight in this draw keeps its midpoint.
            draws[a:b] = np.where(counts > 0, np.clip(raw, 1.0 / k, 1.0), mid)
        if empty.any():
            warnings.warn(f"{func}: confidence bins {_preview(np.flatnonzero(empty))} are empty; they map to their "
                          "midpoints with the widest band.", DataWarning, stacklevel=2)
        self.edges_ = edges
        self.bin_draws_ = draws
        self.bin_values_ = draws.mean(axis=0)
        self.empty_bins_ = tuple(int(e) for e in np.flatnonzero(empty))
        self.n_draws_, self.n_classes_ = int(n_out), int(k)
        return self

    def _draws_of(self, z, p):
        n = p.shape[0]
        top = p.argmax(axis=1)
        b = bin_index(p[np.arange(n), top], self.edges_)
        return np.stack([_top_label_full(p, top, row[b]) for row in self.bin_draws_])

    def predict_interval(self, X, level: float = 0.9):
        """Equal-tailed ``level`` band per class, ``(lower, upper)`` each (n_items, n_classes); the widest band for
        items in empty bins."""
        lo, hi = super().predict_interval(X, level)
        if self.empty_bins_:
            _, p = _check_logits_or_probs(X, self.inputs, n_classes=self.n_classes_)
            n, k = p.shape
            top = p.argmax(axis=1)
            rows = np.flatnonzero(np.isin(bin_index(p[np.arange(n), top], self.edges_), self.empty_bins_))
            lo[rows], hi[rows] = 0.0, 1.0 - 1.0 / k
            lo[rows, top[rows]], hi[rows, top[rows]] = 1.0 / k, 1.0
        return lo, hi
