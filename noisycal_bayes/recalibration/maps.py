"""Recalibration maps in scikit-learn style: ``fit(scores, data, channel=...)`` then ``predict(scores)``.

Each estimator wraps a pure fitting function of :mod:`noisycal_bayes.reference.recalibration`
(paper §5). Two ways to fit:

* ``fit(scores, data, channel=channel)`` with an :class:`~noisycal_bayes.data.AnnotationSet` and a
  channel: the **noise-corrected** fit on the combined corrected labels (corrected log loss for the
  temperature / Platt maps, clipped corrected bin means for the histogram);
* ``fit(scores, labels)`` with an array of 0/1 labels or soft labels in [0, 1]: the **naive** fit,
  e.g. ``fit(scores, data.majority_vote())`` or ``fit(scores, data.vote_fraction())``, as a baseline
  (or with clean labels, when known, as the oracle).

``__init__`` only stores parameters; ``fit`` returns ``self`` and sets trailing-underscore attributes;
``to_dict`` / ``from_dict`` (or :func:`map_from_dict`) round-trip a fitted map through JSON.
"""
from __future__ import annotations

import numpy as np

from .._validation import check_soft_labels
from ..data import AnnotationSet, Binning, as_binning
from ..reference.recalibration import (PLATT_ALPHA_BOUNDS, PLATT_BETA_BOUNDS, TEMPERATURE_BOUNDS,
                                       corrected_item_labels, fit_platt, fit_projected_histogram, fit_temperature,
                                       predict_histogram, predict_platt, predict_temperature)
from ._params import ParamsMixin

_FORMAT_VERSION = 1


class NotFittedError(ValueError, AttributeError):
    """``predict`` (or ``to_dict`` of fitted values) was called before ``fit``."""


def _targets(scores, data, channel, weights):
    """``(targets, kind, annotator_weights)`` for a corrected fit (AnnotationSet + channel) or a naive one."""
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


def _jsonable(x):
    if isinstance(x, np.ndarray):
        # NaN is not valid JSON: store it as null (restored as NaN by from_dict).
        return [None if isinstance(v, float) and np.isnan(v) else v for v in x.tolist()]
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    if isinstance(x, tuple):
        return [_jsonable(v) for v in x]
    return x


#: Every public map class by name, for :func:`map_from_dict` (filled by ``_Map.__init_subclass__``, so maps defined
#: in other modules of this package, e.g. the multiclass ones, are found too).
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
        data : AnnotationSet (with ``channel``) or array-like of shape (n_items,) of 0/1 or soft labels
        channel : Channel, optional
            Required with an AnnotationSet: the noise-corrected fit uses its corrected labels.
        weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,), optional
            Annotator weights of the corrected labels (default "iv"); only with ``channel``.

        Returns
        -------
        self
        """
        y, kind, w = _targets(scores, data, channel, weights)
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
        y, kind, w = _targets(scores, data, channel, weights)
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
        y, kind, w = _targets(scores, data, channel, weights)
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
        b = self.bins
        if isinstance(b, Binning):
            return {"bins": {"kind": b.kind, "n_bins": b.n_bins, "edges": None if b.edges is None else list(b.edges)}}
        return {"bins": _jsonable(b)}

    @classmethod
    def _params_from_json(cls, params: dict) -> dict:
        b = params.get("bins", 10)
        if isinstance(b, dict):
            kind = b.get("kind")
            if kind == "edges":
                b = Binning.from_edges(b["edges"])
            elif kind == "equal_mass":
                b = Binning.equal_mass(b["n_bins"])
            elif kind == "equal_width":
                b = Binning.equal_width(b["n_bins"])
            else:
                raise ValueError(f"unknown binning kind {kind!r} in saved ProjectedHistogram.")
        return {"bins": b}


def map_from_dict(d: dict):
    """Rebuild any map saved with ``to_dict()`` (dispatches on ``d["class"]``; binary and multiclass maps).

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
