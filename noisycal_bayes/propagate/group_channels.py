"""Plug-in NC-ECE posterior with channels that differ across score groups (the score-dependent channel model).

Under the score-dependent model (:mod:`noisycal_bayes.models.score_noise`) item ``i`` in score group ``g`` has the
channel ``(fpr_gj, tpr_gj)``, so its corrected label is ``(A_ij - fpr_gj) / gap_gj`` with weights of the rule
evaluated at the group's channel. The plug-in bin sums are additive over items: they are the sums over groups of
:func:`~noisycal_bayes.propagate._sums.plugin_sums` of each group's items at that group's channel, each group's
scaled by a Gamma factor so that the Bayesian bootstrap is exactly that of
:func:`~noisycal_bayes.propagate.posterior_nc_ece` (docs/methods.md). With the same channel in every group the
result has the distribution of ``posterior_nc_ece``'s, and without the bootstrap it is equal to it.
"""
from __future__ import annotations

import numpy as np

from .._validation import check_level, check_weights
from ..data import AnnotationSet, as_binning, bin_index
from ..data.columns import response_columns
from ._sums import item_cells, plugin_sums
from .intervals import check_interval, read_interval
from .nc_ece import TARGETS
from .result import PosteriorNCECE, _bin_table

__all__ = ["posterior_nc_ece_group_channels"]


def _group_sums(cols, keep_groups, z, bin_idx, n_bins, fpr, gap, rule, *, bootstrap, rng):
    """Per-group plug-in sums ``[(count, score, freq)]`` (each (S, n_bins)) and the group sizes."""
    out, sizes = [], []
    for g, rows in enumerate(keep_groups):
        sizes.append(rows.size)
        if rows.size == 0:
            out.append(None)
            continue
        cells = item_cells(cols.labels[rows], z[rows], bin_idx[rows], n_bins)
        out.append(plugin_sums(cells, n_bins, fpr[:, g], gap[:, g], rule, bootstrap=bootstrap, rng=rng))
    return out, np.asarray(sizes, np.float64)


def posterior_nc_ece_group_channels(data: AnnotationSet, group_index, fpr_group, tpr_group, *, point=None, bins=10,
                                    weights="iv", level: float = 0.9, seed: int = 0, usable=None,
                                    interval: str = "debiased",
                                    source: str = "channel posterior per score group",
                                    model: str = "score_dependent") -> PosteriorNCECE:
    """Posterior of the plug-in NC-ECE when every score group has its own channels (module docstring).

    Parameters
    ----------
    data : AnnotationSet with scores
    group_index : int array of shape (n_items,)
        Score group of each item (``0 .. n_groups - 1``).
    fpr_group, tpr_group : arrays of shape (n_draws, n_groups, n_annotators)
        Channel draws per group (posterior draws, Laplace draws or bootstrap replicates).
    point : (fpr, tpr) of shape (n_groups, n_annotators), optional
        The point channels of ``.value`` (default: the mean of the draws).
    bins : int or Binning, default 10
        Evaluation bins (an int means equal width).
    weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,)
    level : float, default 0.9
    seed : int, default 0
        Seeds the Bayesian bootstrap.
    usable : bool array of shape (n_annotators,), optional
        Annotators whose labels enter the corrected labels (default all).
    interval : {"debiased", "posterior"}, default "debiased"
        As in :func:`~noisycal_bayes.propagate.posterior_nc_ece`.
    source, model : str
        What the draws are and the model's name (for ``uncertainty`` and ``model``).

    Returns
    -------
    PosteriorNCECE
        As :func:`~noisycal_bayes.propagate.posterior_nc_ece` with ``method="plugin"``. ``posterior_nc_ece`` of a
        fit with channels per score group (``fit_nuts(model="score_dependent")``) is this function on the fit's
        :attr:`~noisycal_bayes.models.result.FitResult.group_channels`.

    Examples
    --------
    The same channel in every group gives ``nc_ece``'s point value (exactly with one group or equal weights; the
    IV weights are estimated per (group, bin, missingness) row, so with several groups they differ slightly):

    >>> import numpy as np
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> from noisycal_bayes import nc_ece
    >>> sim = simulate_annotations(400, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.85], seed=0)
    >>> g = (sim.data.scores > 0.5).astype(int)
    >>> f = np.tile(sim.channel.fpr, (20, 2, 1)); t = np.tile(sim.channel.tpr, (20, 2, 1))
    >>> res = posterior_nc_ece_group_channels(sim.data, g, f, t, weights="equal")
    >>> bool(np.isclose(res.value, nc_ece(sim.data, sim.channel, weights="equal").value))
    True
    """
    func = "posterior_nc_ece_group_channels"
    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"{func}: `data` must be a binary AnnotationSet; got {type(data).__name__}.")
    z = data.require_scores()
    level = check_level(level)
    check_interval(interval, func)
    rule, rule_label = check_weights(weights, data.n_annotators, allow_zero=False)
    f = np.asarray(fpr_group, np.float64)
    t = np.asarray(tpr_group, np.float64)
    if f.ndim != 3 or f.shape != t.shape or f.shape[2] != data.n_annotators:
        raise ValueError(f"{func}: `fpr_group` and `tpr_group` must have the same shape (n_draws, n_groups, "
                         f"{data.n_annotators}); got {f.shape} and {t.shape}.")
    idx = np.asarray(group_index)
    if idx.shape != (data.n_items,) or idx.min() < 0 or idx.max() >= f.shape[1]:
        raise ValueError(f"{func}: `group_index` must have shape ({data.n_items},) with values in 0..{f.shape[1] - 1}.")
    usable = np.ones(data.n_annotators, bool) if usable is None else np.asarray(usable, bool)
    cols = response_columns(data, usable, func=func)
    a = cols.annotator
    gap = (t - f)[..., a]
    f = f[..., a]
    rule_c = rule if isinstance(rule, str) else np.asarray(rule)[a]
    zk, gk = z[cols.keep], idx[cols.keep]
    edges = as_binning(bins).edges_for(zk)
    n_bins = edges.size - 1
    bin_idx = bin_index(zk, edges)
    members = [np.flatnonzero(gk == g) for g in range(f.shape[1])]
    rng = np.random.default_rng(seed)
    sums, sizes = _group_sums(cols, members, zk, bin_idx, n_bins, f, gap, rule_c, bootstrap=True, rng=rng)
    n_draws, n = f.shape[0], float(zk.size)
    # Unstratified Bayesian bootstrap: group totals G_g ~ Gamma(n_g) rescale each group's normalised sums.
    big = rng.standard_gamma(np.maximum(sizes, 1.0), size=(n_draws, sizes.size)) * (sizes > 0)
    scale = n * big / big.sum(axis=1, keepdims=True) / np.maximum(sizes, 1.0)
    count, score, freq = (np.zeros((n_draws, n_bins)) for _ in range(3))
    for g, s in enumerate(sums):
        if s is not None:
            for acc, v in zip((count, score, freq), s):
                acc += scale[:, g, None] * np.asarray(v)
    pf, pt = (f.mean(axis=0), (f + gap).mean(axis=0)) if point is None else (
        np.asarray(point[0], np.float64)[..., a], np.asarray(point[1], np.float64)[..., a])
    psums, _ = _group_sums(cols, members, zk, bin_idx, n_bins, pf[None], (pt - pf)[None], rule_c, bootstrap=False,
                           rng=None)
    resid = sum(np.asarray(s[2])[0] - np.asarray(s[1])[0] for s in psums if s is not None)
    obs_count = np.bincount(bin_idx, minlength=n_bins).astype(np.float64)
    obs_score = np.bincount(bin_idx, weights=zk, minlength=n_bins)
    return PosteriorNCECE(
        value=float(np.abs(resid).sum() / n), **read_interval(count, score, freq, level=level, interval=interval),
        target=TARGETS["plugin"], method="plugin",
        uncertainty=f"{source} + Bayesian bootstrap of the evaluated items", edges=edges,
        table=_bin_table(edges, obs_count, obs_score, count, score, freq, level), weights_rule=rule_label,
        fit_method="group_channels", model=model, bootstrap=True, n_items=int(zk.size), seed=seed)
