"""Posterior recalibration maps: a distribution over the map, so every recalibrated probability has a band.

Three maps, each with ``fit(data, result)`` then ``predict(scores)`` (posterior mean of the map) and
``predict_interval(scores, level=0.9)`` (equal-tailed band), ``predict_draws(scores)`` (one row per draw):

* :class:`PosteriorHistogram` — the histogram calibration-curve model (``fit_nuts(model="histogram")``):
  its bin prevalences ``pi_k`` *are* a Bayesian histogram recalibrator (DESIGN §4).
* :class:`PosteriorPlatt` — the Platt calibration-curve model (``fit_nuts(model="platt")``):
  ``sigmoid(slope logit z + intercept)`` per draw (cf. Raykar et al. 2010).
* :class:`PosteriorTemperature` — the corrected-loss temperature (paper §5.1) refitted for every
  posterior channel draw on Bayesian-bootstrap weights of the items (see its Notes for why this and
  not a temperature curve model).

Built on :mod:`noisycal_bayes.core` only (the frequentist point maps live in
:mod:`noisycal_bayes.recalibration.maps`).
"""
from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_level, check_scores, check_weights
from ..core import clipped_logit, item_corrected_label, x64
from ..core.weights import weights_for_labels
from ..data import AnnotationSet, bin_index
from ..propagate.draws import check_fit, extract_draws, output_index
from ..warnings import BoundaryWarning
from ._newton import newton_temperatures
from ._params import ParamsMixin
from .maps import NotFittedError

#: Default temperature box ``[T_min, T_max]`` (the same as the point map's).
TEMPERATURE_BOUNDS = (0.05, 20.0)
# Newton iterations on log(1/T) (bisection fallback halves the bracket each time: 2^-100 of it at worst).


def _sigmoid(x):
    # tanh form: no overflow warning for large |x|.
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _logits(scores) -> np.ndarray:
    """Clipped logits of validated scores, in float64."""
    with x64():
        return np.asarray(clipped_logit(check_scores(scores)), dtype=np.float64)


class _PosteriorMap(ParamsMixin, ABC):
    """Shared plumbing: fitted checks and the summaries of ``predict_draws`` (abstract: each map defines it)."""

    _fitted_attr = "n_draws_"

    def _check_fitted(self):
        if not hasattr(self, self._fitted_attr):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call `fit` first.")

    @abstractmethod
    def predict_draws(self, scores) -> np.ndarray:
        """Recalibrated probability per posterior draw, shape (n_draws, n_items)."""

    def predict(self, scores) -> np.ndarray:
        """Posterior mean of the recalibrated probability, shape (n_items,)."""
        return self.predict_draws(scores).mean(axis=0)

    def predict_interval(self, scores, level: float = 0.9):
        """Equal-tailed ``level`` band of the recalibrated probability: ``(lower, upper)``, each (n_items,)."""
        level = check_level(level)
        d = self.predict_draws(scores)
        lo, hi = np.quantile(d, [(1 - level) / 2, (1 + level) / 2], axis=0)
        return lo, hi



def _check_data(data, func):
    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"{func}: `data` must be an AnnotationSet; got {type(data).__name__}.")
    return data.require_scores()


def _need_draws(result, func, model_names):
    result = check_fit(result, func, allow_channel=False)
    if result.model not in model_names:
        raise ValueError(f"{func}: needs a fit of model {' or '.join(repr(m) for m in model_names)}; got "
                         f"model={result.model!r}.")
    if result.draws is None:
        raise ValueError(f"{func}: needs posterior draws of the curve (fit_nuts); a {result.method!r} fit is a single "
                         "map. Use the point maps in noisycal_bayes.recalibration for it.")
    return result


class _ThinnedDrawsMap(_PosteriorMap):
    """A map read off a fit's posterior draws, thinned to ``n_draws`` by
    :func:`noisycal_bayes.propagate.draws.thin_index` (more than the fit has cycles through them)."""


    def __init__(self, *, n_draws=None):
        self.n_draws = n_draws

    def _draws(self, result):
        src = extract_draws(result)
        return src.take(output_index(src.n_source, self.n_draws, is_posterior=True))


class PosteriorHistogram(_ThinnedDrawsMap):
    """Histogram recalibration with a posterior: a score maps to its bin's clean-label probability ``pi_k``.

    Parameters
    ----------
    n_draws : int, optional
        Keep this many posterior draws (evenly thinned); default all.

    Attributes
    ----------
    edges_ : ndarray of shape (n_edges,)
        Score edges of the fitted bins.
    bin_draws_ : ndarray of shape (n_draws, n_edges - 1)
        Draws of each bin's clean-label probability; NaN for bins that held no fitted items.
    empty_bins_ : tuple of int
        Bins without fitted items: a score there keeps the bin midpoint (the point map's rule) and gets
        the band ``[0, 1]`` (no information).
    n_draws_ : int

    Notes
    -----
    The histogram model ``Y_i ~ Bernoulli(pi_{k(i)})`` with shared channels (DESIGN §4) is the grouped
    Dawid-Skene model with groups = bins, so the posterior of ``pi_k`` is a posterior over the
    histogram map; unlike the projected corrected mean (paper §5.2) it needs no clipping, as
    ``pi_k`` lies in [0, 1] in every draw.

    Examples
    --------
    >>> from noisycal_bayes.data import Binning
    >>> from noisycal_bayes.inference.nuts import fit_nuts
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(1000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], curve="overconfident", seed=0)
    >>> fit = fit_nuts(sim.data, model="histogram", groups=Binning.equal_width(5), n_chains=1,
    ...                n_warmup=200, n_draws=200, progress_bar=False)  # doctest: +SKIP
    >>> ph = PosteriorHistogram().fit(sim.data, fit)  # doctest: +SKIP
    >>> lo, hi = ph.predict_interval([0.05, 0.95])  # doctest: +SKIP
    """

    def fit(self, data: AnnotationSet, result) -> "PosteriorHistogram":
        """Take the bin prevalence draws of ``result`` (a histogram / monotone / grouped NUTS fit on score bins).

        ``data`` is the fitted AnnotationSet (checked for size). Returns self.
        """
        func = "PosteriorHistogram.fit"
        _check_data(data, func)
        result = _need_draws(result, func, ("histogram", "monotone", "grouped"))
        if result.groups.edges is None:
            raise ValueError(f"{func}: the fit's groups were integer labels, not score bins; fit with groups=<int or "
                             "Binning> so that new scores can be placed in bins.")
        if data.n_items != result.inputs.n_items:
            raise ValueError(f"{func}: `data` has {data.n_items} items but the fit has {result.inputs.n_items}.")
        src = self._draws(result)
        edges = np.asarray(result.groups.edges, dtype=np.float64)
        used = np.asarray(result.groups.used)
        full = np.full((src.n_source, edges.size - 1), np.nan)
        full[:, used] = src.prevalence
        self.edges_ = edges
        self.bin_draws_ = full
        self.empty_bins_ = tuple(int(k) for k in np.setdiff1d(np.arange(edges.size - 1), used))
        self.n_draws_ = int(src.n_source)
        return self

    def predict_draws(self, scores) -> np.ndarray:
        """Recalibrated probability per draw, shape (n_draws, n_items); the bin midpoint in empty bins."""
        self._check_fitted()
        z = check_scores(scores)
        k = bin_index(z, self.edges_)
        out = self.bin_draws_[:, k]
        mid = 0.5 * (self.edges_[:-1] + self.edges_[1:])
        return np.where(np.isnan(out), mid[k][None, :], out)

    def predict_interval(self, scores, level: float = 0.9):
        """Equal-tailed ``level`` band per score, ``(lower, upper)``; ``(0, 1)`` in bins without fitted items."""
        self._check_fitted()
        level = check_level(level)
        z = check_scores(scores)
        k = bin_index(z, self.edges_)
        lo = np.zeros(z.size)
        hi = np.ones(z.size)
        ok = ~np.isnan(self.bin_draws_[0, k])
        if ok.any():
            qlo, qhi = np.quantile(self.bin_draws_[:, k[ok]], [(1 - level) / 2, (1 + level) / 2], axis=0)
            lo[ok], hi[ok] = qlo, qhi
        return lo, hi


class PosteriorPlatt(_ThinnedDrawsMap):
    """Platt recalibration with a posterior: ``sigmoid(slope_s logit z + intercept_s)`` per draw.

    Parameters
    ----------
    n_draws : int, optional
        As in :class:`PosteriorHistogram`: the posterior draws kept.

    Attributes
    ----------
    slope_draws_, intercept_draws_ : ndarray of shape (n_draws,)
    slope_, intercept_ : float
        Posterior means.
    n_draws_ : int

    Notes
    -----
    The Platt calibration-curve model ``Y_i ~ Bernoulli(sigmoid(slope logit z_i + intercept))`` with the
    latent ``Y`` summed out (``fit_nuts(model="platt")``, DESIGN §4); logits of scores are clipped at
    ``1e-6`` as in the point maps (paper Appendix E.2).
    """

    def fit(self, data: AnnotationSet, result) -> "PosteriorPlatt":
        """Take the (slope, intercept) draws of a ``fit_nuts(model="platt")`` result. Returns self."""
        func = "PosteriorPlatt.fit"
        _check_data(data, func)
        result = _need_draws(result, func, ("platt",))
        src = self._draws(result)
        self.slope_draws_, self.intercept_draws_ = src.slope, src.intercept
        self.slope_, self.intercept_ = float(src.slope.mean()), float(src.intercept.mean())
        self.n_draws_ = int(src.n_source)
        return self

    def predict_draws(self, scores) -> np.ndarray:
        """Recalibrated probability per draw, shape (n_draws, n_items)."""
        self._check_fitted()
        s = _logits(scores)
        return _sigmoid(self.slope_draws_[:, None] * s[None, :] + self.intercept_draws_[:, None])


_LABEL_CHUNK = 64


@jax.jit
def _chunk_corrected_labels(labels, fpr, gap, weights):
    return jax.vmap(lambda f, g, w: item_corrected_label(labels, f, g, w))(fpr, gap, weights)


@partial(jax.jit, static_argnames=("rule",))
def _chunk_weights(labels, fpr, gap, rule):
    return jax.vmap(lambda f, g: weights_for_labels(rule, labels, f, g))(fpr, gap)


def _corrected_label_draws(labels, fpr, gap, rule):
    """Combined corrected labels per draw, shape (n_draws, n_items), in fixed-size chunks (one compilation)."""
    n_out = fpr.shape[0]
    out = np.empty((n_out, labels.shape[0]))
    with x64():
        lab = jnp.asarray(labels, dtype=jnp.int32)
        for a in range(0, n_out, _LABEL_CHUNK):
            b = min(a + _LABEL_CHUNK, n_out)
            pad = _LABEL_CHUNK - (b - a)
            f = np.concatenate([fpr[a:b], np.repeat(fpr[b - 1:b], pad, axis=0)])
            g = np.concatenate([gap[a:b], np.repeat(gap[b - 1:b], pad, axis=0)])
            if isinstance(rule, str):
                w = _chunk_weights(lab, f, g, rule)
            else:
                w = np.broadcast_to(rule / rule.sum(), f.shape)
            out[a:b] = np.asarray(_chunk_corrected_labels(lab, f, g, w))[: b - a]
    return out


def _temperatures(logits, targets, item_weights, bounds):
    """Corrected-loss temperature per draw: safeguarded Newton on ``log(1/T)`` (the loss is convex in 1/T).

    ``d/d beta mean_i g_i [softplus(beta s_i) - y_i beta s_i] = sum_i g_i s_i (sigmoid(beta s_i) - y_i)`` is
    increasing in ``beta = 1/T``; Newton steps that leave the current bracket are replaced by bisection.
    Returns ``(T (n_draws,), at_T_min (n_draws,), at_T_max (n_draws,))``.
    """
    def grad_hess(x, rows):
        beta = np.exp(x)[:, None]
        lg = logits if logits.shape[0] == 1 else logits[rows]
        sig = _sigmoid(beta * lg)
        w = item_weights[rows]
        g = np.sum(w * lg * (sig - targets[rows]), axis=1)
        # Derivative with respect to log(beta): beta * sum g_i s_i^2 sigmoid'(.)
        h = np.exp(x) * np.sum(w * lg**2 * sig * (1 - sig), axis=1)
        return g, h

    return newton_temperatures(grad_hess, targets.shape[0], bounds)


class PosteriorTemperature(_PosteriorMap):
    """Temperature scaling with uncertainty: the corrected-loss temperature refitted per posterior channel draw.

    Parameters
    ----------
    bounds : (T_min, T_max), default (0.05, 20)
        The compact box the corrected loss is minimised over (it can be unbounded below, paper §5.1).
    weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,), default "iv"
        Annotator weights of the corrected labels, recomputed from each draw's channels.
    bootstrap : bool, default True
        Reweight the items by Bayesian-bootstrap weights in each draw (sampling uncertainty of the fitting
        items). Without it the band reflects channel uncertainty only.
    n_draws : int, optional
        Output draws: default every posterior draw (NUTS) or 1000 for a point estimate / known channel.
    seed : int, default 0
        Seeds the bootstrap weights.

    Attributes
    ----------
    temperature_draws_ : ndarray of shape (n_draws,)
    temperature_ : float
        Posterior median temperature.
    n_boundary_ : int
        Draws whose optimum sits on the box boundary (a :class:`~noisycal_bayes.warnings.BoundaryWarning`
        says how many).
    n_draws_ : int

    Notes
    -----
    **Why a corrected-loss fit per channel draw, not a temperature curve model.** Temperature scaling is a
    recalibration *family*, not a belief about the clean-label curve: its target is the risk-minimising
    temperature ``T* = argmin_T E[l(sigmoid(logit Z / T), Y)]``, well defined whether or not the true curve
    is a temperature curve. The corrected log loss ``softplus(s/T) - Ytilde s/T`` is unbiased for that
    risk (paper §5.1), so refitting it for each posterior channel draw ``s`` (channels -> weights ->
    corrected labels ``Ytilde_s``) propagates channel uncertainty into ``T`` exactly as the point estimator
    uses them, and Bayesian-bootstrap weights add the uncertainty of the fitting sample. A curve model
    ``Y ~ Bernoulli(sigmoid(logit z / T))`` would instead *assume* the curve is a temperature curve: when it
    is not, its posterior concentrates on a misspecified projection with bands that are too narrow. The
    curve-model route is available as :class:`PosteriorPlatt` (which contains temperature scaling as
    ``intercept = 0``).

    For each draw, ``beta = 1/T`` solves ``sum_i g_i s_i (sigmoid(beta s_i) - Ytilde_i) = 0`` (the loss is
    convex in ``beta``), found by safeguarded Newton steps on ``log beta`` inside the box.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], curve="overconfident", seed=0)
    >>> pt = PosteriorTemperature(n_draws=200).fit(sim.data, sim.channel)
    >>> 1.5 < pt.temperature_ < 2.5   # the curve sigmoid(0.5 logit z) is a temperature curve with T = 2
    True
    """


    def __init__(self, *, bounds=TEMPERATURE_BOUNDS, weights="iv", bootstrap: bool = True, n_draws=None,
                 seed: int = 0):
        self.bounds = bounds
        self.weights = weights
        self.bootstrap = bootstrap
        self.n_draws = n_draws
        self.seed = seed

    def fit(self, data: AnnotationSet, result) -> "PosteriorTemperature":
        """Fit on ``data`` (scores and noisy labels) with channel draws from ``result``.

        ``result`` is a FitResult (NUTS draws, or an EM / MAP point) or a known Channel, for the
        annotators of ``data``. Returns self.
        """
        func = "PosteriorTemperature.fit"
        z = _check_data(data, func)
        data.require_one_label_per_pair(func, "Use PosteriorHistogram, or the point maps of "
                                        "noisycal_bayes.recalibration on corrected_item_labels (both read every response).")
        try:
            t_min, t_max = (float(b) for b in self.bounds)
        except (TypeError, ValueError):
            raise ValueError(f"{func}: `bounds` must be a pair (T_min, T_max); got {self.bounds!r}.") from None
        if not (np.isfinite(t_min) and np.isfinite(t_max) and 0 < t_min < t_max):
            raise ValueError(f"{func}: `bounds` must satisfy 0 < T_min < T_max; got {self.bounds!r}.")
        result = check_fit(result, func, allow_channel=True)
        src = extract_draws(result)
        if src.fpr.shape[1] != data.n_annotators:
            raise ValueError(f"{func}: the fit has {src.fpr.shape[1]} annotators but `data` has {data.n_annotators}.")
        try:
            rule, _ = check_weights(self.weights, data.n_annotators, allow_zero=False)
        except ValueError as exc:
            raise ValueError(f"{func}: {exc}") from None
        src = src.take(output_index(src.n_source, self.n_draws, is_posterior=src.is_posterior))
        n_out = src.n_source
        targets = _corrected_label_draws(data.labels, src.fpr, src.gap, rule)
        logits = _logits(z)[None, :]
        rng = np.random.default_rng(self.seed)
        temps, at_min, at_max = np.empty(n_out), np.zeros(n_out, bool), np.zeros(n_out, bool)
        step = max(1, 2_000_000 // z.size)
        for a in range(0, n_out, step):
            b = min(a + step, n_out)
            g = rng.standard_exponential((b - a, z.size)) if self.bootstrap else np.ones((b - a, z.size))
            g /= g.sum(axis=1, keepdims=True)
            temps[a:b], at_min[a:b], at_max[a:b] = _temperatures(logits, targets[a:b], g, (t_min, t_max))
        n_boundary = int((at_min | at_max).sum())
        if n_boundary:
            warnings.warn(f"{func}: in {n_boundary} of {n_out} draws the corrected-loss temperature sits on the box "
                          f"boundary ({int(at_min.sum())} at T_min={t_min}, {int(at_max.sum())} at T_max={t_max}); the "
                          "corrected loss may be unbounded there. Widen `bounds` or check the channels.",
                          BoundaryWarning, stacklevel=2)
        self.temperature_draws_ = temps
        self.temperature_ = float(np.median(temps))
        self.n_boundary_ = n_boundary
        self.n_draws_ = n_out
        return self

    def predict_draws(self, scores) -> np.ndarray:
        """Recalibrated probability per draw, shape (n_draws, n_items)."""
        self._check_fitted()
        s = _logits(scores)
        return _sigmoid(s[None, :] / self.temperature_draws_[:, None])
