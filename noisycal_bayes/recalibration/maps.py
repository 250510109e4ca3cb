"""Recalibration maps in scikit-learn style: ``fit(scores, data, channel=...)`` then ``predict(scores)``.

Each estimator wraps a pure fitting function of :mod:`noisycal_bayes.reference.recalibration`
(paper §5). Two ways to fit:

* ``fit(scores, data, channel=channel)`` with an :class:`~noisycal_bayes.data.AnnotationSet` and a
  channel: the **noise-corrected** fit on the combined corrected labels (corrected log loss for the
  temperature / Platt maps, clipped corrected bin means for the histogram);
* ``fit(scores, corrected)`` with a :class:`~noisycal_bayes.reference.recalibration.CorrectedLabels` made
  beforehand (:func:`~noisycal_bayes.reference.recalibration.corrected_item_labels`, or a weighted mixture of
  them over channel models, as ``evaluate(..., recalibration=True)`` makes after a model expansion): the same
  noise-corrected fit on those labels;
* ``fit(scores, labels)`` with an array of 0/1 labels or soft labels in [0, 1]: the **naive** fit,
  e.g. ``fit(scores, data.majority_vote())`` or ``fit(scores, data.vote_fraction())``, as a baseline
  (or with clean labels, when known, as the oracle).

For K classes (:class:`MulticlassTemperatureScaling`, :class:`VectorScaling`, :class:`TopLabelHistogram`) a map
is fitted on class probabilities (or logits) of shape (n_items, K) and a target matrix of the same shape,
``fit(X, targets)`` then ``predict_proba(X)``: corrected targets ``t_i = sum_r w_{j_r} C_{j_r}^{-T} e_{A_r} /
sum_r w_{j_r}`` (``core.corrected_targets``, unbiased for ``e_{Y_i}``; the corrected cross-entropy is then
unbiased for the clean loss of any fixed map, paper §5.1), or one-hot / vote-distribution labels for the naive
fits. Every parameter lives in a compact box and an optimum on its boundary is flagged (``on_boundary_``,
:class:`~noisycal_bayes.warnings.BoundaryWarning`). For K = 2, :class:`MulticlassTemperatureScaling` on ``(1 - z,
z)`` is :class:`TemperatureScaling` on ``z``. The derivations: docs/methods.md.

``__init__`` only stores parameters; ``fit`` returns ``self`` and sets trailing-underscore attributes;
``to_dict`` / ``from_dict`` (or :func:`map_from_dict`) round-trip a fitted map through JSON.
"""
from __future__ import annotations

import warnings

import numpy as np
from scipy.special import logsumexp, softmax

from .._validation import _preview, binary_only, check_bounds, check_soft_labels
from ..data import AnnotationSet, as_binning, bin_index
from ..reference.recalibration import (PLATT_ALPHA_BOUNDS, PLATT_BETA_BOUNDS, TEMPERATURE_BOUNDS,
                                       CorrectedLabels, corrected_item_labels, fit_platt, fit_projected_histogram, fit_temperature,
                                       inverse_temperature_root, predict_histogram, predict_platt,
                                       predict_temperature)
from ..warnings import BoundaryWarning, ConvergenceWarning, DataWarning
from ._params import ParamsMixin
from ._inputs import (_bins_from_json, _bins_to_json, _check_inputs_kind, _check_l2, _check_logits_or_probs,
                      _check_targets, _expected_logit, _jsonable, _temperature_terms, _top_label_edges, _top_label_full)
from ._newton import projected_newton

_FORMAT_VERSION = 1
#: Default vector-scaling boxes: per-class scale (positive: each class's logit stays increasing) and bias.
SCALE_BOUNDS = (0.01, 20.0)
BIAS_BOUNDS = (-10.0, 10.0)
#: Default ridge of vector scaling toward the identity map.
VECTOR_L2 = 1e-3


class NotFittedError(ValueError, AttributeError):
    """``predict`` (or ``to_dict`` of fitted values) was called before ``fit``."""


def _targets(scores, data, channel, weights, func: str, instead: str):
    """``(targets, kind, annotator_weights)`` for a corrected fit (AnnotationSet + channel) or a naive one, once
    K-class ``scores`` or ``data`` are refused (``func`` is the binary map's ``fit``, ``instead`` its K-class map)."""
    binary_only(scores, func, instead, name="scores")
    binary_only(data, func, instead)
    if isinstance(data, CorrectedLabels):
        if channel is not None or weights is not None:
            raise ValueError("the labels are already corrected (a CorrectedLabels); drop `channel` and `weights`, "
                             "which were used to make them.")
        n = np.shape(scores)[0] if np.ndim(scores) == 1 else None
        values = np.asarray(data.values, np.float64)
        if n is not None and n != values.size:
            raise ValueError(f"`scores` has {n} entries but the corrected labels have {values.size}; pass one score "
                             "per item.")
        return values, "corrected", np.asarray(data.weights, np.float64)
    if isinstance(data, AnnotationSet) and data.kind == "binary":
        if channel is None:
            raise ValueError(
                "fitting to an AnnotationSet needs the annotators' `channel=` (e.g. `fit_em(data).channel`) for the "
                "noise-corrected fit. For a naive fit pass labels instead, e.g. `fit(scores, data.vote_fraction())` "
                "or `fit(scores, data.majority_vote())`."
            )
        n = np.shape(scores)[0] if np.ndim(scores) == 1 else None
        if n is not None and n != data.n_items:
            raise ValueError(f"`scores` has {n} entries but `data` has {data.n_items} items; pass one score per item "
                             "(e.g. `data.scores`).")
        corrected = corrected_item_labels(data, channel, weights="iv" if weights is None else weights)
        return corrected.values, "corrected", corrected.weights
    if channel is not None:
        raise ValueError("`channel` was given but the labels are not an AnnotationSet; pass the AnnotationSet to use "
                         "the channel, or drop `channel` for a naive fit to plain labels.")
    if weights is not None:
        raise ValueError("`weights` combines annotators' corrected labels and needs an AnnotationSet and a `channel`; "
                         "it has no meaning for a fit to plain labels.")
    if data is None:
        raise ValueError("`fit` needs labels: an AnnotationSet with `channel=`, or an array of 0/1 or soft labels.")
    return check_soft_labels(data, name="labels"), "labels", None


#: Every public map class by name, for :func:`map_from_dict` (filled by ``_Map.__init_subclass__``).
_MAPS: dict = {}


class _Map(ParamsMixin):
    """Shared plumbing: scikit-learn's parameter protocol (:class:`ParamsMixin`), fitted checks, JSON round trip."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            _MAPS[cls.__name__] = cls

    _fitted_names: tuple = ()
    # Fitted attributes restored as float arrays by from_dict (other lists become tuples).
    _array_names: frozenset = frozenset({"weights_", "edges_", "bin_values_", "raw_means_", "counts_"})

    def _check_fitted(self):
        if not hasattr(self, self._fitted_names[0]):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call `fit` first.")

    def _params_to_json(self) -> dict:
        return {k: _jsonable(v) for k, v in self.get_params(deep=False).items()}

    @classmethod
    def _params_from_json(cls, params: dict) -> dict:
        return {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}

    def to_dict(self) -> dict:
        """A JSON-serialisable description: class, parameters and (if fitted) fitted attributes."""
        fitted = None
        if hasattr(self, self._fitted_names[0]):
            fitted = {k: _jsonable(getattr(self, k)) for k in self._fitted_names}
        return {"class": type(self).__name__, "version": _FORMAT_VERSION, "params": self._params_to_json(),
                "fitted": fitted}

    @classmethod
    def from_dict(cls, d: dict):
        """Rebuild a map saved with :meth:`to_dict`."""
        if not isinstance(d, dict) or "class" not in d or "params" not in d:
            raise ValueError("expected a dict from `to_dict()` with keys 'class', 'params' and 'fitted'.")
        if d["class"] != cls.__name__:
            raise ValueError(f"this dict describes a {d['class']}, not a {cls.__name__}; use map_from_dict().")
        unknown = set(d["params"]) - set(cls._get_param_names())
        if unknown:
            raise ValueError(f"unknown parameters {sorted(unknown)} for {cls.__name__}.")
        obj = cls(**cls._params_from_json(d["params"]))
        fitted = d.get("fitted")
        if fitted is not None:
            missing = [k for k in cls._fitted_names if k not in fitted]
            if missing:
                raise ValueError(f"saved {cls.__name__} lacks fitted values {missing}.")
            for k in cls._fitted_names:
                v = fitted[k]
                if v is not None and k in cls._array_names:
                    v = np.array([np.nan if e is None else e for e in v], dtype=np.float64)
                elif isinstance(v, list):
                    v = tuple(v)
                setattr(obj, k, v)
        return obj


class TemperatureScaling(_Map):
    """``p = sigmoid(logit(z) / T)`` with ``T`` fitted by (corrected) log loss on ``[T_min, T_max]``.

    Parameters
    ----------
    bounds : (T_min, T_max), default (0.05, 20)

    Attributes
    ----------
    temperature_ : float
    loss_ : float, (corrected) mean log loss at the optimum
    on_boundary_ : bool, ``T`` ended at ``T_min`` or ``T_max`` (a BoundaryWarning was issued)
    fit_kind_ : str, ``"corrected"`` (AnnotationSet + channel) or ``"labels"`` (plain / soft labels)
    weights_ : ndarray of shape (n_annotators,) or None, annotator weights of a corrected fit
    n_items_ : int

    Examples
    --------
    >>> from noisycal_bayes import simulate_annotations
    >>> sim = simulate_annotations(4000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], curve="overconfident", seed=0)
    >>> ts = TemperatureScaling().fit(sim.data.scores, sim.data, channel=sim.channel)
    >>> 1.5 < ts.temperature_ < 2.5   # the oracle temperature is 2
    True
    """

    _fitted_names = ("temperature_", "loss_", "on_boundary_", "fit_kind_", "weights_", "n_items_")

    def __init__(self, *, bounds=TEMPERATURE_BOUNDS):
        self.bounds = bounds

    def fit(self, scores, data, *, channel=None, weights=None) -> "TemperatureScaling":
        """Fit ``T``.

        Parameters
        ----------
        scores : array-like of shape (n_items,), in [0, 1]
        data : AnnotationSet (with ``channel``), CorrectedLabels, or array-like of shape (n_items,) of 0/1 or soft labels
        channel : Channel or a fit with channels per score group, optional
            Required with an AnnotationSet: the noise-corrected fit uses its corrected labels
            (:func:`~noisycal_bayes.reference.recalibration.corrected_item_labels`).
        weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,), optional
            Annotator weights of the corrected labels (default "iv"); only with ``channel``.

        Returns
        -------
        self
        """
        y, kind, w = _targets(scores, data, channel, weights, "TemperatureScaling.fit", "MulticlassTemperatureScaling")
        fit = fit_temperature(scores, y, bounds=self.bounds)
        self.temperature_, self.loss_, self.on_boundary_ = fit.temperature, fit.loss, fit.on_boundary
        self.fit_kind_, self.weights_, self.n_items_ = kind, w, fit.n_items
        return self

    def predict(self, scores) -> np.ndarray:
        """Recalibrated probabilities, shape (n_items,)."""
        self._check_fitted()
        return predict_temperature(scores, self.temperature_)


class PlattScaling(_Map):
    """``p = sigmoid(alpha logit(z) + beta)`` fitted by (corrected) log loss on a box.

    Parameters
    ----------
    alpha_bounds : (low, high), default (0.01, 20); a positive slope keeps the map increasing
    beta_bounds : (low, high), default (-10, 10)

    Attributes
    ----------
    alpha_, beta_ : float
    loss_ : float
    on_boundary_ : bool
    boundary_params_ : tuple of str
    converged_ : bool
    fit_kind_ : str
    weights_ : ndarray or None
    n_items_ : int

    Examples
    --------
    >>> import numpy as np
    >>> z = np.linspace(0.05, 0.95, 19)
    >>> round(PlattScaling().fit(z, z).alpha_, 4)
    1.0
    """

    _fitted_names = ("alpha_", "beta_", "loss_", "on_boundary_", "boundary_params_", "converged_", "fit_kind_",
                     "weights_", "n_items_")

    def __init__(self, *, alpha_bounds=PLATT_ALPHA_BOUNDS, beta_bounds=PLATT_BETA_BOUNDS):
        self.alpha_bounds = alpha_bounds
        self.beta_bounds = beta_bounds

    def fit(self, scores, data, *, channel=None, weights=None) -> "PlattScaling":
        """Fit ``(alpha, beta)``; arguments as in :meth:`TemperatureScaling.fit`. Returns self."""
        y, kind, w = _targets(scores, data, channel, weights, "PlattScaling.fit", "VectorScaling or MulticlassTemperatureScaling")
        fit = fit_platt(scores, y, alpha_bounds=self.alpha_bounds, beta_bounds=self.beta_bounds)
        self.alpha_, self.beta_, self.loss_ = fit.alpha, fit.beta, fit.loss
        self.on_boundary_, self.boundary_params_, self.converged_ = fit.on_boundary, fit.boundary_params, fit.converged
        self.fit_kind_, self.weights_, self.n_items_ = kind, w, fit.n_items
        return self

    def predict(self, scores) -> np.ndarray:
        """Recalibrated probabilities, shape (n_items,)."""
        self._check_fitted()
        return predict_platt(scores, self.alpha_, self.beta_)


class ProjectedHistogram(_Map):
    """Histogram recalibration: each score maps to its fitting bin's mean (corrected) label, clipped to [0, 1].

    Parameters
    ----------
    bins : int (equal width) or Binning, default 10
        Fitting bins (equal-mass edges are computed from the fitting scores).

    Attributes
    ----------
    edges_ : ndarray of shape (n_bins + 1,)
    bin_values_ : ndarray of shape (n_bins,), in [0, 1]; empty bins hold the bin midpoint
    raw_means_ : ndarray of shape (n_bins,), unclipped means (NaN for empty bins)
    counts_ : ndarray of shape (n_bins,)
    empty_bins_, clipped_bins_ : tuple of int
    fit_kind_ : str
    weights_ : ndarray or None
    n_items_ : int

    Examples
    --------
    >>> ph = ProjectedHistogram(bins=2).fit([0.1, 0.2, 0.8, 0.9], [0, 1, 1, 1])
    >>> ph.predict([0.15, 0.85]).tolist()
    [0.5, 1.0]
    """

    _fitted_names = ("edges_", "bin_values_", "raw_means_", "counts_", "empty_bins_", "clipped_bins_", "fit_kind_",
                     "weights_", "n_items_")

    def __init__(self, *, bins=10):
        self.bins = bins

    def fit(self, scores, data, *, channel=None, weights=None) -> "ProjectedHistogram":
        """Fit the bin values; arguments as in :meth:`TemperatureScaling.fit`. Returns self."""
        binning = as_binning(self.bins)
        y, kind, w = _targets(scores, data, channel, weights, "ProjectedHistogram.fit", "TopLabelHistogram")
        fit = fit_projected_histogram(scores, y, bins=binning)
        self.edges_, self.bin_values_ = fit.edges, fit.bin_values
        self.raw_means_, self.counts_ = fit.raw_means, fit.counts
        self.empty_bins_, self.clipped_bins_ = fit.empty_bins, fit.clipped_bins
        self.fit_kind_, self.weights_, self.n_items_ = kind, w, int(np.size(y))
        return self

    def predict(self, scores) -> np.ndarray:
        """The fitted value of each score's bin, shape (n_items,)."""
        self._check_fitted()
        return predict_histogram(scores, self.edges_, self.bin_values_)

    def _params_to_json(self) -> dict:
        return {"bins": _bins_to_json(self.bins)}

    @classmethod
    def _params_from_json(cls, params: dict) -> dict:
        return {"bins": _bins_from_json(params.get("bins", 10), cls.__name__)}


# ----------------------------------------------------------------------------- K-class maps
class _MulticlassMap(_Map):
    """Shared plumbing of the K-class point maps: validated probabilities or logits (JSON round trip from
    :class:`_Map`)."""

    def _inputs(self, x, *, fitted: bool):
        _check_inputs_kind(self.inputs, type(self).__name__)
        return _check_logits_or_probs(x, self.inputs, n_classes=self.n_classes_ if fitted else None)


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

    A fit that ends at ``T_min`` with a BoundaryWarning is a sign that the confusion estimate does not fit the
    labels (the corrected loss is then unbounded below in ``T``: docs/methods.md).

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
        self : MulticlassTemperatureScaling
            With ``temperature_`` set.

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

        beta, on_boundary = inverse_temperature_root(grad, t_lo, t_hi)
        if not on_boundary:
            # Guard for non-convex losses (target rows with negative sums): a lower box end wins.
            ends = {b: loss(b) for b in (1.0 / t_hi, 1.0 / t_lo)}
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
        theta, grad, converged, message = projected_newton(objective, np.clip(centre, lo, hi), lo, hi)
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

    The bin value is ``clip(m_b, 1/K, 1)`` (a top-label confidence lies in [1/K, 1]), as
    :class:`~noisycal_bayes.recalibration.ProjectedHistogram` clips to [0, 1]; why: docs/methods.md.

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


def map_from_dict(d: dict):
    """Rebuild any map saved with ``to_dict()`` (dispatches on ``d["class"]``; binary and K-class maps).

    Examples
    --------
    >>> ts = TemperatureScaling(bounds=(0.1, 10.0))
    >>> map_from_dict(ts.to_dict())
    TemperatureScaling(bounds=(0.1, 10.0))
    """
    if not isinstance(d, dict) or d.get("class") not in _MAPS:
        got = d.get("class") if isinstance(d, dict) else type(d).__name__
        raise ValueError(f"expected a dict from `to_dict()` of one of {sorted(_MAPS)}; got {got!r}.")
    return _MAPS[d["class"]].from_dict(d)
