"""How :mod:`noisycal_bayes.propagate.nc_ece` turns draws into per-bin sums: the evaluation bins, the three binary
routes (plug-in, model, latent) of :func:`~noisycal_bayes.propagate.posterior_nc_ece`, and the K-class plug-in run
behind :func:`~noisycal_bayes.propagate.posterior_top_label_nc_ece` and
:func:`~noisycal_bayes.propagate.posterior_classwise_nc_ece`. The formulas are in docs/methods.md.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from .._validation import _preview, check_confusion, check_level, check_weights
from ..data import Binning, SufficientStats, as_binning, bin_index
from ..data.columns import response_columns
from ..core import confusion_condition
from ..reference.calibration import (bin_edges, check_prevalence, check_probs, check_responses, usable_from_draws,
                                     warn_unusable)
from ..warnings import DataWarning, IdentifiabilityWarning
from .result import MC_TARGETS, TARGETS, PosteriorNCECE, _bin_table
from .draws import USABLE_LEVEL, Draws, check_same_items, is_fit_result, output_index, stats_fit_rows
from .intervals import check_interval, read_interval
from ._sums import (Atoms, DrawWeights, atom_sums, group_bin_counts, item_cells, latent_atoms, latent_freq, model_freq,
                    plugin_sums, stats_cells)


def _stats_edges(stats: SufficientStats, bins, func: str) -> np.ndarray:
    """The evaluation edges of SufficientStats: their own bins; ``bins`` may only restate them."""
    if stats.edges is None:
        raise ValueError(f"{func}: these SufficientStats were computed without scores (one bin, no score sums), and a "
                         "calibration error needs score bins: recompute them with `bins=` and a score column.")
    if bins is None:
        return np.asarray(stats.edges)
    if isinstance(bins, Binning) and bins.kind == "equal_mass":
        edges = None
    elif isinstance(bins, (Binning, int, np.integer)) and not isinstance(bins, bool):
        edges = as_binning(bins).edges_for(None)
    else:
        try:
            edges = Binning.from_edges(bins).edges_for(None)
        except (TypeError, ValueError):
            edges = None
    if edges is None or edges.shape != stats.edges.shape or not np.array_equal(edges, stats.edges):
        raise ValueError(f"{func}: with SufficientStats the evaluation bins are the bins the statistics were computed "
                         f"with (edges {np.round(stats.edges, 6).tolist()}): their sums over the items of a bin cannot "
                         f"be split into other bins. Pass bins=None (or that Binning), not {bins!r}, or recompute "
                         "the statistics with the bins you want.")
    return np.asarray(stats.edges)


class _Bins(NamedTuple):
    """Evaluation bins of ``data``: edges (n_bins + 1,), each item's bin (None for SufficientStats), and the
    observed count and score sum per bin (n_bins,)."""

    edges: np.ndarray
    bin_idx: np.ndarray | None
    count: np.ndarray
    score_sum: np.ndarray

    @property
    def n_bins(self) -> int:
        return self.edges.size - 1


def _evaluation_bins(data, z, bins, func) -> _Bins:
    """The evaluation bins: SufficientStats' own bins (their rows are the cells), else ``bins`` on the scores."""
    if z is None:
        edges = _stats_edges(data, bins, func)
        return _Bins(edges, None, data.bin_counts, np.asarray(data.score_sum, dtype=np.float64))
    return _evaluation_bins_on(z, as_binning(10 if bins is None else bins).edges_for(z))


def _evaluation_bins_on(z, edges) -> _Bins:
    """The evaluation bins of scores ``z`` on fixed ``edges``."""
    n_bins = edges.size - 1
    bin_idx = bin_index(z, edges)
    return _Bins(edges, bin_idx, np.bincount(bin_idx, minlength=n_bins).astype(np.float64),
                 np.bincount(bin_idx, weights=z, minlength=n_bins))


def _check_route(data, fit, src: Draws, method, edges, func):
    """Checks of the model and latent routes; ``(cell_group, cell_row)`` of SufficientStats rows (else None)."""
    rows = None
    if isinstance(data, SufficientStats):
        rows = stats_fit_rows(data, fit, func, method)
    else:
        check_same_items(data, fit, func, method)
    if method == "latent" and src.model != "platt" and getattr(fit.inputs, "sparse", False):
        raise ValueError(f"{func}: method='latent' draws clean labels per (group, response pattern) row, and this fit "
                         "used the sparse responses (repeated labels, gold labels or a large crowd), which have no "
                         "pattern rows. Use method='plugin' (the default) or method='model'.")
    if src.model == "dawid_skene" and method == "model":
        raise ValueError(f"{func}: the marginal model (one prevalence) has no calibration curve; fit "
                         "model='histogram' with groups equal to the evaluation bins for method='model'.")
    if method == "model" and not src.is_posterior:
        raise ValueError(f"{func}: method='model' needs posterior draws of the curve (fit_nuts); a "
                         f"{src.source!r} fit is a single curve. Use method='plugin' or 'latent' with it.")
    if src.model != "platt":
        same = fit.groups.edges is not None and np.array_equal(np.asarray(fit.groups.edges), edges)
        if not same:
            warnings.warn(
                f"{func}: method={method!r} with a {src.model!r} fit whose groups are not the evaluation bins "
                f"(fit edges {None if fit.groups.edges is None else np.round(fit.groups.edges, 3).tolist()}, "
                f"evaluation edges {np.round(edges, 3).tolist()}): the fitted curve is a step function on other "
                "cuts, so the target is estimated with a bias. Fit model='histogram' with "
                "groups=<the evaluation Binning> (e.g. Binning.equal_width(10)).", DataWarning, stacklevel=3)
    return rows


def _cells(data, z, ev: _Bins, cols):
    """The (bin, pattern) cells the plug-in sums run over."""
    return stats_cells(data) if z is None else item_cells(cols.labels, z, ev.bin_idx, ev.n_bins)


def _on_columns(cols, fpr, gap, rule):
    """Channels (and explicit weights) gathered per response column (identity without repeats or exclusions)."""
    if cols is None:
        return fpr, gap, rule
    a = cols.annotator
    return fpr[..., a], gap[..., a], rule if isinstance(rule, str) else np.asarray(rule)[a]


def _plugin_route(data, z, ev: _Bins, src: Draws, draws: Draws, rule, bootstrap, rng, cols):
    """Plug-in route: ``(count, score_sum, freq)`` per draw and bin, the target and what varies."""
    fpr, gap, rule = _on_columns(cols, draws.fpr, draws.gap, rule)
    count, score_sum, freq = plugin_sums(_cells(data, z, ev, cols), ev.n_bins, fpr, gap, rule,
                                         bootstrap=bootstrap, rng=rng)
    if src.is_posterior:
        # EM bootstrap replicates stand in for posterior draws; say which the interval varies.
        parts = ["EM bootstrap replicates of the channels" if src.source == "em_bootstrap" else "channel posterior"]
    else:
        parts = [f"channels fixed at the {'known channel' if src.source == 'channel' else src.source + ' estimate'}"]
    if bootstrap:
        parts.append("Bayesian bootstrap of the evaluated items" + (
            " (per cell: exact cell totals, moment-matched cell score means)" if z is None else ""))
    return count, score_sum, freq, TARGETS["plugin" if bootstrap else "plugin_no_bootstrap"], " + ".join(parts)


def _observed(ev: _Bins, n_out: int):
    """The observed count and score sum per bin, repeated for every output draw: (n_out, n_bins) each."""
    return tuple(np.broadcast_to(v, (n_out, ev.n_bins)) for v in (ev.count, ev.score_sum))


def _model_route(data, fit, ev: _Bins, src: Draws, draws: Draws, rows):
    """Model-based route: the fitted calibration curve's bin frequencies per draw."""
    if src.model == "platt":
        freq = model_freq(draws, fit=fit, bin_idx=ev.bin_idx, n_bins=ev.n_bins)
    else:
        C = (group_bin_counts(rows[0], data.group, fit.groups.n_groups, ev.n_bins, data.counts) if rows is not None
             else group_bin_counts(fit.groups.index, ev.bin_idx, fit.groups.n_groups, ev.n_bins))
        freq = model_freq(draws, group_bin=C)
    uncertainty = f"posterior of the {src.model} calibration curve (channels and curve jointly)"
    return (*_observed(ev, draws.n_source), freq, TARGETS["model"], uncertainty)


def _latent_route(data, fit, ev: _Bins, src: Draws, draws: Draws, rows, rng):
    """Latent-label route: clean labels drawn from their posterior, summed per bin and draw."""
    if src.model == "platt":
        cols = response_columns(data, np.ones(data.n_annotators, bool), func="posterior_nc_ece")
        freq = latent_freq(draws, fit, rng, labels=cols.labels, bin_idx=ev.bin_idx, n_bins=ev.n_bins,
                           column_annotator=None if not data.has_repeats else cols.annotator)
    else:
        atoms = (latent_atoms(rows[1], data.group, ev.n_bins, data.counts) if rows is not None
                 else latent_atoms(fit.inputs.item_rows(), ev.bin_idx, ev.n_bins))
        freq = latent_freq(draws, fit, rng, atoms=atoms, n_bins=ev.n_bins)
    uncertainty = ("clean-label draws from their posterior given the responses"
                   + (" (channels and prevalences from the posterior)" if src.is_posterior else
                      f" (channels and prevalences fixed at the {src.source} estimate)"))
    return (*_observed(ev, draws.n_source), freq, TARGETS["latent"], uncertainty)


def _point_value(data, z, ev: _Bins, fit, rule, cols) -> float:
    """The paper's NC-ECE at the fit's point channel: ``sum_k |F_k - S_k| / n`` for one channel without the
    bootstrap (the plug-in sums of :func:`plugin_sums`, the same as :func:`noisycal_bayes.nc_ece`'s)."""
    channel = fit.channel if is_fit_result(fit) else fit
    fpr = np.asarray(channel.fpr, dtype=np.float64)[None]
    gap = np.asarray(channel.gap, dtype=np.float64)[None]
    fpr, gap, rule = _on_columns(cols, fpr, gap, rule)
    if cols is not None and z.size != cols.labels.shape[0]:  # model / latent routes keep every item
        z = z[cols.keep]
        ev = _evaluation_bins_on(z, ev.edges)
    count, score_sum, freq = plugin_sums(_cells(data, z, ev, cols), ev.n_bins, fpr, gap, rule, bootstrap=False,
                                         rng=None)
    return float(np.sum(np.abs(np.asarray(freq) - np.asarray(score_sum))) / np.sum(count))


def _prepare(func, probs, responses, confusion_draws, prevalence, *, bins, weights, level, interval, n_draws,
             usable, max_condition, kind):
    """Validated inputs, the output draws and the design."""
    p = check_probs(probs)
    n, k = p.shape
    resp = check_responses(responses, n, k, func=func)
    conf = check_confusion(confusion_draws, name="confusion_draws", n_annotators=resp.n_annotators, n_classes=k,
                           draws=True)
    is_posterior = conf.shape[0] > 1
    prev = check_prevalence(prevalence, k, n_draws=conf.shape[0])
    rule, label = check_weights(weights, resp.n_annotators, allow_zero=False, n_classes=k)
    level = check_level(level)
    check_interval(interval, func)
    usable = (usable_from_draws(conf, max_condition=max_condition, level=USABLE_LEVEL) if usable is None
              else _check_usable(usable, resp.n_annotators, func))
    warn_unusable(usable, np.arange(resp.n_annotators), func, stacklevel=5)
    if not usable.any():
        raise ValueError(f"{func}: no annotator has a usable (invertible) confusion matrix; the corrected targets are "
                         "undefined.")
    cond = confusion_condition(conf)[:, usable]
    bad = (cond > max_condition).any(axis=1)
    if bad.any():
        warnings.warn(f"{func}: in {int(bad.sum())} of {conf.shape[0]} draws a used annotator's confusion matrix is "
                      f"near singular (condition number up to {float(cond.max()):.3g} > {max_condition}); those draws "
                      "have their singular values clipped to that condition number before inversion.",
                      IdentifiabilityWarning, stacklevel=4)
    edges = bin_edges(p, bins, kind)
    des = Atoms(p, resp, usable, kind, edges)
    if not des.has.all():
        warnings.warn(f"{func}: {int((~des.has).sum())} items (e.g. {_preview(np.flatnonzero(~des.has))}) have no "
                      "response from an annotator with a usable confusion matrix and are left out.", DataWarning,
                      stacklevel=4)
    idx = output_index(conf.shape[0], n_draws, is_posterior=is_posterior)
    return p, resp, conf, prev, rule, label, level, usable, edges, des, idx, is_posterior


def _check_usable(usable, n_annotators: int, func: str) -> np.ndarray:
    """A given ``usable``: a bool array of shape (n_annotators,)."""
    if np.shape(usable) != (n_annotators,):
        raise ValueError(f"{func}: `usable` must be a bool array of shape ({n_annotators},); got shape "
                         f"{np.shape(usable)}.")
    return np.asarray(usable, dtype=bool)


def _check_draw_weights(item_weights, n_source: int, n_items: int, bootstrap: bool, func: str):
    """The items' bootstrap weights of each confusion draw (n_source, n_items), checked and not copied (any real
    dtype: bootstrap multiplicities may come as small integers), or None."""
    if item_weights is None:
        return None
    w = np.asarray(item_weights)
    if not (np.issubdtype(w.dtype, np.integer) or np.issubdtype(w.dtype, np.floating)):
        raise ValueError(f"{func}: `item_weights` must be a numeric array; got dtype {w.dtype}.")
    if not bootstrap:
        raise ValueError(f"{func}: `item_weights` are the items' bootstrap weights of each confusion draw; they need "
                         "bootstrap=True.")
    if n_source < 2:
        raise ValueError(f"{func}: `item_weights` need confusion draws (one per row), not a point estimate.")
    if w.shape != (n_source, n_items):
        raise ValueError(f"{func}: `item_weights` must have shape (n_draws, n_items) = ({n_source}, {n_items}), one "
                         f"row per confusion draw; got {w.shape}.")
    finite = np.isfinite(w).all(axis=1) if np.issubdtype(w.dtype, np.floating) else np.ones(n_source, bool)
    bad = ~finite | (w < 0).any(axis=1) | ~(w.sum(axis=1, dtype=np.float64) > 0)
    if bad.any():
        raise ValueError(f"{func}: `item_weights` rows must be finite, non-negative and not all zero; rows "
                         f"{_preview(np.flatnonzero(bad))} are not.")
    return w


def _run(func, kind, probs, responses, confusion_draws, prevalence, *, bins, weights, level, seed, interval,
         bootstrap, n_draws, usable, max_condition, bias_correct=True, calibrate=True, item_weights=None,
         point_confusion=None):
    """``(count, score, freq, point, design, meta, fresh)``: the per-draw sums (n_out, n_segments) of the output
    draws, the sums at the point confusion, the design, how the draws were made, and the sums and meta with fresh
    item weights (the class-wise per-class intervals; the same as the first four without ``item_weights``)."""
    p, resp, conf, prev, rule, label, level, usable, edges, des, idx, is_post = _prepare(
        func, probs, responses, confusion_draws, prevalence, bins=bins, weights=weights, level=level,
        interval=interval, n_draws=n_draws, usable=usable, max_condition=max_condition, kind=kind)
    centre = _check_point_confusion(point_confusion, conf, func)
    joint = _check_draw_weights(item_weights, conf.shape[0], p.shape[0], bool(bootstrap), func)
    if joint is not None:
        joint = DrawWeights(joint, idx, des.has, func)
    prev_out = prev[idx] if prev is not None and prev.ndim == 2 else (None if prev is None else
                                                                      np.broadcast_to(prev, (idx.size, des.k)))

    def sums(weights):
        # Fresh Bayesian-bootstrap weights come from ``seed`` (joint draws use none): both sums share the seed.
        return atom_sums(des, conf[idx], prev_out, rule, usable, bool(bootstrap), np.random.default_rng(seed),
                         max_condition, weights)

    def uncertainty(weights):
        parts = ["confusion posterior draws" if is_post else "confusion fixed at the point estimate"]
        if bootstrap:
            parts.append("Bayesian bootstrap of the evaluated items" + ("" if weights is None else
                                                                       " (each draw's own item weights: joint draws)"))
        return " + ".join(parts)

    count, score, freq = sums(joint)
    # The point value: the same sums at the fit the draws scatter around (``point_confusion``; default the draws'
    # mean confusion) and the mean prevalence, without the bootstrap.
    prev_pt = None if prev is None else (prev.mean(axis=0) if prev.ndim == 2 else prev)[None]
    c0, s0, f0 = atom_sums(des, centre[None], prev_pt, rule, usable, False, None, max_condition)
    meta = dict(target=MC_TARGETS[kind] if bootstrap else MC_TARGETS["no_bootstrap"], uncertainty=uncertainty(joint),
                label=label, fit_method="draws" if is_post else "point", n_items=des.n, edges=edges, level=level,
                bias_correct=bool(bias_correct) and is_post, calibrate=bool(calibrate))
    # Class-wise: the per-class intervals keep fresh item weights (their joint draws were too narrow:
    # docs/coverage.md); the same seed gives the draws of the call without ``item_weights``.
    fresh = (count, score, freq, meta) if joint is None or kind != "classwise" else (
        *sums(None), {**meta, "uncertainty": uncertainty(None)})
    return count, score, freq, (c0[0], s0[0], f0[0]), des, meta, fresh


def _check_point_confusion(point_confusion, conf, func: str) -> np.ndarray:
    """The confusion at which the point value and the bias correction's centre are computed: ``point_confusion``
    (validated, shape (J, K, K) like one draw) or, by default, the draws' mean."""
    if point_confusion is None:
        return conf.mean(axis=0)
    if conf.shape[0] < 2:
        raise ValueError(f"{func}: `point_confusion` is the fit that confusion *draws* scatter around; with a single "
                         "confusion matrix per annotator (a point estimate) pass that alone.")
    j, k = conf.shape[1], conf.shape[2]
    try:
        return check_confusion(point_confusion, name="point_confusion", n_annotators=j, n_classes=k)
    except ValueError as err:
        raise ValueError(f"{func}: {err}") from None


def _read(count, score, freq, point, meta, interval, level) -> dict:
    """The fields every K-class result shares: the value at the point fit (``point``: its sums without the
    bootstrap), the interval with the K-class options (:func:`~noisycal_bayes.propagate.intervals.read_interval`,
    always centred) and how the draws were made (``meta`` of :func:`_run`)."""
    c0, s0, f0 = point
    return dict(value=float(np.abs(f0 - s0).sum() / c0.sum()),
                **read_interval(count, score, freq, level=level, interval=interval, point=point,
                                bias_correct=meta["bias_correct"], calibrate=meta["calibrate"], centre=True),
                target=meta["target"], method="plugin", uncertainty=meta["uncertainty"], weights_rule=meta["label"],
                fit_method=meta["fit_method"], model=None, n_items=meta["n_items"])


def _result(count, score, freq, point, edges, meta, interval, bootstrap, seed, level) -> PosteriorNCECE:
    """A :class:`PosteriorNCECE` from per-draw sums over one block of segments (top-label, or one class)."""
    return PosteriorNCECE(**_read(count, score, freq, point, meta, interval, level),
                          table=_bin_table(edges, point[0], point[1], count, score, freq, level), edges=edges,
                          bootstrap=bool(bootstrap), seed=seed)
