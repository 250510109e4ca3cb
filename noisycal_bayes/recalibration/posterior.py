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

For K classes, ``fit(X, responses, confusion)`` then ``predict_proba(X)``, ``predict_interval(X)``,
``predict_draws(X)``: :class:`PosteriorMulticlassTemperature` and :class:`PosteriorTopLabelHistogram` refit the
point map (:mod:`~noisycal_bayes.recalibration.maps`) for each posterior confusion draw (confusion -> annotator
weights -> corrected targets) on Bayesian-bootstrap weights of the items, as :class:`PosteriorTemperature` does
for two classes.
"""
from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from scipy import sparse
from scipy.special import softmax

from .._validation import _preview, binary_only, check_bounds, check_confusion, check_level, check_scores, check_weights
from ..core import annotator_weights, clipped_logit, corrected_vectors, item_corrected_label, usable_confusions, x64
from ..core.weights import weights_for_labels
from ..data import AnnotationSet, bin_index
from ..propagate.draws import check_fit, extract_draws, output_index
from ..reference.calibration import check_responses
from ..reference.recalibration import TEMPERATURE_BOUNDS
from ..warnings import BoundaryWarning, DataWarning
from ._newton import newton_temperatures
from ._params import ParamsMixin
from ._inputs import _check_inputs_kind, _check_logits_or_probs, _temperature_terms, _top_label_edges, _top_label_full
from .maps import NotFittedError

# Floats per chunk of (draws x items x classes) arrays: bounds the memory of the vectorised K-class refits.
_CHUNK_FLOATS = 4_000_000


def _sigmoid(x):
    # tanh form: no overflow warning for large |x|.
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _logits(scores) -> np.ndarray:
    """Clipped logits of validated scores, in float64."""
    with x64():
        return np.asarray(clipped_logit(check_scores(scores)), dtype=np.float64)


class _Fitted(ParamsMixin):
    """The fitted check of every posterior map: ``n_draws_`` is set by ``fit``."""

    def _check_fitted(self):
        if not hasattr(self, "n_draws_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call `fit` first.")


def _bootstrap_weights(rng, s_n, n, bootstrap):
    """Bayesian-bootstrap item weights (Dirichlet(1, ..., 1) rows), shape (s_n, n); ones without bootstrap."""
    g = rng.standard_exponential((s_n, n)) if bootstrap else np.ones((s_n, n))
    return g / g.sum(axis=1, keepdims=True)


def _set_temperatures(est, func, temps, at_min, at_max, bounds, what):
    """Set ``temperature_draws_``, ``temperature_`` (median), ``n_boundary_``, ``n_draws_`` of a posterior
    temperature map; a BoundaryWarning counts the draws whose optimum sits on the box ``bounds``."""
    t_lo, t_hi = bounds
    n_boundary = int((at_min | at_max).sum())
    if n_boundary:
        warnings.warn(f"{func}: in {n_boundary} of {temps.size} draws the corrected-loss temperature sits on the box "
                      f"boundary ({int(at_min.sum())} at T_min={t_lo}, {int(at_max.sum())} at T_max={t_hi}); the "
                      f"corrected loss may be unbounded there. Widen `bounds` or check the {what}.",
                      BoundaryWarning, stacklevel=3)
    est.temperature_draws_ = temps
    est.temperature_ = float(np.median(temps))
    est.n_boundary_ = n_boundary
    est.n_draws_ = int(temps.size)


class _PosteriorMap(_Fitted, ABC):
    """Shared plumbing of the binary maps: the summaries of ``predict_draws`` (abstract: each map defines it)."""

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
        """Take the bin prevalence draws of ``result`` (a histogram / monotone / grouped NUTS fit on score bins, or a
        score-dependent / correlated one, whose prevalence per score group is the same map).

        ``data`` is the fitted AnnotationSet (checked for size). Returns self.
        """
        binary_only(data, "PosteriorHistogram.fit", "PosteriorTopLabelHistogram")
        func = "PosteriorHistogram.fit"
        _check_data(data, func)
        # The richer channel models have a prevalence per score group too: with groups on score bins it is the
        # histogram map (their channels differ across groups, which this map does not read).
        result = _need_draws(result, func, ("histogram", "monotone", "grouped", "score_dependent", "correlated"))
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
        binary_only(data, "PosteriorPlatt.fit", "PosteriorMulticlassTemperature")
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
    The target is the risk-minimising temperature ``T* = argmin_T E[l(sigmoid(logit Z / T), Y)]``, whether or not
    the true curve is a temperature curve; the corrected log loss is unbiased for that risk (paper §5.1). Why this
    and not a temperature curve model (which :class:`PosteriorPlatt` provides): docs/methods.md.

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
        self.bounds, self.weights, self.bootstrap = bounds, weights, bootstrap
        self.n_draws, self.seed = n_draws, seed

    def fit(self, data: AnnotationSet, result) -> "PosteriorTemperature":
        """Fit on ``data`` (scores and noisy labels) with channel draws from ``result``.

        ``result`` is a FitResult (NUTS draws, or an EM / MAP point) or a known Channel, for the
        annotators of ``data``. A fit with channels per score group (``fit_nuts`` / ``fit_map`` with
        ``model="score_dependent"`` or ``"correlated"``, :attr:`~noisycal_bayes.models.result.FitResult.group_channels`)
        corrects each item at its own group's channel in every draw (the fit's score edges applied to ``data.scores``,
        or its own assignment on the fitted items), with the rule's weights estimated from the group's items, as
        :func:`~noisycal_bayes.reference.recalibration.group_corrected_labels`. Returns self.
        """
        binary_only(data, "PosteriorTemperature.fit", "PosteriorMulticlassTemperature")
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
        idx = output_index(src.n_source, self.n_draws, is_posterior=src.is_posterior)
        src = src.take(idx)
        n_out = src.n_source
        channels = getattr(result, "group_channels", None)
        if channels is None:
            targets = _corrected_label_draws(data.labels, src.fpr, src.gap, rule)
        else:  # each item at its score group's channel draws (the rule's weights from the group's items)
            from ..models.inputs import item_groups

            f, t = (np.asarray(c, np.float64)[idx] for c in channels)
            group = item_groups(data, result, func)
            targets = np.empty((n_out, data.n_items))
            for g in np.unique(group):
                rows = np.flatnonzero(group == g)
                targets[:, rows] = _corrected_label_draws(data.labels[rows], f[:, g], t[:, g] - f[:, g], rule)
        logits = _logits(z)[None, :]
        rng = np.random.default_rng(self.seed)
        temps, at_min, at_max = np.empty(n_out), np.zeros(n_out, bool), np.zeros(n_out, bool)
        step = max(1, 2_000_000 // z.size)
        for a in range(0, n_out, step):
            b = min(a + step, n_out)
            g = _bootstrap_weights(rng, b - a, z.size, self.bootstrap)
            temps[a:b], at_min[a:b], at_max[a:b] = _temperatures(logits, targets[a:b], g, (t_min, t_max))
        _set_temperatures(self, func, temps, at_min, at_max, (t_min, t_max), "channels")
        return self

    def predict_draws(self, scores) -> np.ndarray:
        """Recalibrated probability per draw, shape (n_draws, n_items)."""
        self._check_fitted()
        s = _logits(scores)
        return _sigmoid(s[None, :] / self.temperature_draws_[:, None])


# ----------------------------------------------------------------------------- K classes
def _check_confusion(confusion, func):
    """``(draws (S, J, K, K), is_posterior)`` from draws, one confusion (J, K, K) or a fit with ``.confusion``."""
    c = getattr(confusion, "confusion", confusion)
    try:
        draws = check_confusion(c, draws=True)
    except ValueError as err:
        raise ValueError(f"{func}: {err}") from None
    return draws, np.ndim(c) == 4


def _response_design(responses, n_items, n_annotators, n_classes):
    """Sparse (n_items, J K) counts of each item's (annotator, label) responses (repeats count twice)."""
    item, annotator, label = responses[:3]
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


class _PosteriorMulticlassMap(_Fitted):
    """Shared plumbing of the K-class maps: validation of ``fit``'s inputs, corrected targets per block of draws,
    draw summaries chunked over items."""

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
        resp = check_responses(responses, n, k, n_annotators=j, func=func)
        try:
            rule, _ = check_weights(self.weights, j, n_classes=k)
        except ValueError as err:
            raise ValueError(f"{func}: {err}") from None
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

    @staticmethod
    def _target_blocks(conf, design, rule, prevalence, n_items, n_classes):
        """``(a, b, targets)`` for blocks ``a:b`` of the confusion draws, targets (b - a, n_items, K), each block below
        ``_CHUNK_FLOATS``; computed lazily, so a caller drawing bootstrap weights per block keeps its stream."""
        n_out = conf.shape[0]
        step = max(1, _CHUNK_FLOATS // (n_items * n_classes))
        for a in range(0, n_out, step):
            b = min(a + step, n_out)
            yield a, b, _target_draws(conf[a:b], design, rule, None if prevalence is None else prevalence[a:b])

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


def _class_temperatures(z, s, c, g, bounds, x0=0.0):
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
    temperature_draws_, temperature_, n_boundary_, n_draws_
        As in :class:`PosteriorTemperature` (draws, posterior median, draws on the box boundary).
    n_classes_ : int

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
        self.bounds, self.weights, self.bootstrap = bounds, weights, bootstrap
        self.n_draws, self.seed, self.inputs = n_draws, seed, inputs

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
        for a, b, t in self._target_blocks(conf, design, rule, pi, n, k):
            ok = np.isfinite(t).all(axis=2)
            t = np.where(ok[..., None], t, 0.0)
            s, c = _temperature_terms(z[None], t)
            g = _bootstrap_weights(rng, b - a, n, self.bootstrap) * ok
            # Start at the median log(1/T) of the draws so far (fewer Newton steps; the root does not depend on it).
            x0 = -np.log(np.median(temps[:a])) if a else 0.0
            temps[a:b], at_min[a:b], at_max[a:b] = _class_temperatures(z, s, c, g, (t_lo, t_hi), x0)
        _set_temperatures(self, func, temps, at_min, at_max, (t_lo, t_hi), "confusions")
        self.n_classes_ = int(k)
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
        self.bins, self.weights, self.bootstrap = bins, weights, bootstrap
        self.n_draws, self.seed, self.inputs = n_draws, seed, inputs

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
        for a, b, t in self._target_blocks(conf, design, rule, pi, n, k):
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
