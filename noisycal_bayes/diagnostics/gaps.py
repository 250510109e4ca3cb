"""Small channel gaps: how much the noise correction costs, and how NC-ECE responds to the gap (DESIGN §4).

Correction divides by the gap ``delta_j = tpr_j - fpr_j``: the corrected label of annotator ``j`` has
conditional variance ``[mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)] / delta_j^2`` (``a_j = fpr``,
``b_j = tpr``), so its variance grows like ``1 / delta_j^2`` (paper §7: small gaps amplify correction
variance). :func:`gap_diagnostics` reports, per annotator, ``P(delta_j < min_gap)`` and the variance
inflation ``1 / delta_j^2``, and per bin the effective number of clean labels; :func:`gap_sensitivity`
shows how NC-ECE and its interval move when the gap shrinks (in simulation, or by perturbing fitted
channels); :mod:`noisycal_bayes.diagnostics.profile` moves the gaps only where the data allow.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._progress import progress
from .._validation import _preview, binary_only, check_level, check_positive_int, check_weights, shared_channels_only
from ..core import x64
from ..core.weights import annotator_noise_variance, weights_for_labels
from ..data import AnnotationSet, Binning, Channel, as_binning, bin_index
from ..inference.em import fit_em
from ..propagate.draws import Draws, check_fit, extract_draws, output_index
from ..propagate.nc_ece import posterior_nc_ece
from ..simulate import simulate_annotations
from ..warnings import SmallGapWarning
from .profile import check_factors

#: Default smallest acceptable gap (the EM screening threshold is 0.05; 0.1 already inflates variance 100x).
MIN_GAP = 0.1
#: Warn when the posterior probability of a gap below ``min_gap`` exceeds this.
ALARM_PROBABILITY = 0.05
#: Warn when a bin with items carries fewer clean-label equivalents than this.
MIN_EFFECTIVE = 10.0


@dataclass(frozen=True)
class GapDiagnostics:
    """Cost of the noise correction per annotator and per bin.

    Attributes
    ----------
    annotators : DataFrame, one row per annotator
        ``annotator, gap`` (posterior mean or point estimate), ``gap_lower, gap_upper`` (equal-tailed
        ``level`` interval; equal to ``gap`` for a point estimate), ``p_gap_below`` (posterior
        probability that ``gap < min_gap``; 0 or 1 for a point estimate), ``variance_inflation``
        (posterior mean of ``1 / gap^2``), ``alarming`` (bool).
    bins : DataFrame, one row per evaluation bin
        ``bin, lower, upper, count``, ``clean_frequency`` (``(sum of corrected labels + 1) / (count + 2)``,
        kept in ``[1, count + 1] / (count + 2)``, used in the variances), ``effective_clean_labels`` (``n_eff``), ``efficiency`` (``n_eff / count``),
        ``alarming`` (bool).
    alarming : bool
    messages : tuple of str
        The warnings issued.
    min_gap, level, min_effective : float
    source : str
        ``"nuts"``, ``"em"``, ``"map"`` or ``"channel"``.
    """

    annotators: pd.DataFrame = field(repr=False)
    bins: pd.DataFrame = field(repr=False)
    alarming: bool
    messages: tuple[str, ...]
    min_gap: float
    level: float
    min_effective: float
    source: str


def _item_variance(obs, fpr, gap, weights, mu):
    """Variance of each item's combined corrected label around its clean frequency ``mu``.

    ``Var(sum_j W_ij Ytilde_ij) = mu (1 - mu) + sum_j W_ij^2 [mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)] / delta_j^2``
    (conditionally independent annotators; the first term is the clean label's own variance).
    Shapes: obs (n, J) (items or rows), fpr/gap/weights (S, J), mu (S, n) -> (S, n).
    """
    w = np.where(obs[None], weights[:, None, :], 0.0)
    W = w / w.sum(axis=2, keepdims=True)
    noise = annotator_noise_variance(fpr[:, None, :], gap[:, None, :], mu[..., None])
    return mu * (1 - mu) + np.sum(W**2 * noise, axis=2)


def gap_diagnostics(data: AnnotationSet, fit, *, min_gap: float = MIN_GAP, bins=10, weights="iv",
                    level: float = 0.9, alarm_probability: float = ALARM_PROBABILITY,
                    min_effective: float = MIN_EFFECTIVE, n_draws: int = 400, warn: bool = True) -> GapDiagnostics:
    """Per-annotator gap risk and per-bin effective number of clean labels, with a SmallGapWarning when alarming.

    Parameters
    ----------
    data : AnnotationSet with scores
        The evaluated items (labels and scores).
    fit : FitResult or Channel
        ``fit_nuts`` draws (probabilities are posterior probabilities), an EM / MAP point estimate or a
        known Channel (then ``p_gap_below`` is 0 or 1).
    min_gap : float, default 0.1
    bins : int or Binning, default 10
    weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,)
        Annotator weights of the combined corrected label (recomputed per draw).
    level : float, default 0.9
    alarm_probability : float, default 0.05
        An annotator is alarming when ``P(gap < min_gap) > alarm_probability``.
    min_effective : float, default 10
        A bin with items is alarming when it holds fewer than this many clean-label equivalents.
    n_draws : int, default 400
        Posterior draws used (evenly thinned).
    warn : bool, default True
        Issue a :class:`~noisycal_bayes.warnings.SmallGapWarning` when anything is alarming.

    Returns
    -------
    GapDiagnostics

    Notes
    -----
    *Effective number of clean labels* of bin ``B_k``: the number of clean labels whose mean would be as
    precise as the mean combined corrected label, ``n_eff,k = sum_{i in B_k} mu_k (1 - mu_k) / V_i`` with
    ``V_i`` the variance of item ``i``'s combined corrected label (:func:`_item_variance`, averaged over
    draws), ``mu_k`` the bin's clean frequency (its corrected frequency with one pseudo-label per class). ``V_i`` uses the
    annotators who labelled item ``i``, so missing responses lower ``n_eff``. Near ``mu_k = 0`` or 1 the
    clean labels are nearly constant and ``n_eff`` drops: estimating a rare frequency from noisy labels
    is hard even with good annotators.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(1000, fpr=[0.1, 0.45, 0.1], tpr=[0.9, 0.5, 0.8], seed=0)
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     diag = gap_diagnostics(sim.data, sim.channel)
    >>> diag.annotators["alarming"].tolist()
    [False, True, False]
    """
    binary_only(data, "gap_diagnostics", "usable_confusions (noisycal_bayes.core), the confusions' condition numbers")
    func = "gap_diagnostics"
    z, level, rule, src = _check_diagnostics_args(data, fit, func, min_gap=min_gap, level=level,
                                                  alarm_probability=alarm_probability, weights=weights)
    src = src.take(output_index(src.n_source, min(n_draws, src.n_source), is_posterior=True))
    ann = _annotator_table(src, list(data.annotator_ids), min_gap=float(min_gap), level=level,
                           alarm_probability=float(alarm_probability))
    bins_df = _effective_labels_table(data, z, bins, src, rule, min_effective=min_effective)
    messages = _diagnostics_messages(func, ann, bins_df, src, min_gap=float(min_gap), min_effective=min_effective)
    if warn:
        for m in messages:
            warnings.warn(m, SmallGapWarning, stacklevel=2)
    return GapDiagnostics(ann, bins_df, bool(messages), tuple(messages), float(min_gap), level, float(min_effective),
                          src.source)


def _check_diagnostics_args(data, fit, func, *, min_gap, level, alarm_probability, weights):
    """Validated ``(scores, level, weight rule, draws of the fit)`` of :func:`gap_diagnostics`."""
    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"{func}: `data` must be an AnnotationSet; got {type(data).__name__}.")
    data.require_one_label_per_pair(f"{func} (effective labels per bin from the dense labels)",
                                    "The gaps' intervals are in evaluate's channel table (annotators.csv).")
    z = data.require_scores()
    if not 0 < float(min_gap) < 1:
        raise ValueError(f"{func}: `min_gap` must lie in (0, 1); got {float(min_gap)}.")
    level = check_level(level)
    if not 0 <= float(alarm_probability) < 1:
        raise ValueError(f"{func}: `alarm_probability` must lie in [0, 1); got {float(alarm_probability)}.")
    rule, _ = check_weights(weights, data.n_annotators, allow_zero=False)
    src = extract_draws(check_fit(fit, func, allow_channel=True))
    shared_channels_only(fit, func, None)
    if src.fpr.shape[1] != data.n_annotators:
        raise ValueError(f"{func}: the fit has {src.fpr.shape[1]} annotators but `data` has {data.n_annotators}.")
    return z, level, rule, src


def _annotator_table(src: Draws, ids, *, min_gap, level, alarm_probability) -> pd.DataFrame:
    """Per annotator: the gap with its ``level`` interval, ``P(gap < min_gap)`` and the variance inflation."""
    gap = src.gap
    q = [(1 - level) / 2, (1 + level) / 2]
    with np.errstate(divide="ignore"):
        inflation = (1.0 / gap**2).mean(axis=0)
    p_below = (gap < min_gap).mean(axis=0)
    return pd.DataFrame({"annotator": ids, "gap": gap.mean(axis=0), "gap_lower": np.quantile(gap, q[0], axis=0),
                         "gap_upper": np.quantile(gap, q[1], axis=0), "p_gap_below": p_below,
                         "variance_inflation": inflation, "alarming": p_below > alarm_probability})


def _effective_labels_table(data: AnnotationSet, z, bins, src: Draws, rule, *, min_effective) -> pd.DataFrame:
    """Per evaluation bin: count, clean frequency and effective number of clean labels (Notes of
    :func:`gap_diagnostics`)."""
    fpr, gap = src.fpr, src.gap
    edges = as_binning(bins).edges_for(z)
    n_bins = edges.size - 1
    idx = bin_index(z, edges)
    obs = data.observed
    labels = data.labels
    with x64():
        if isinstance(rule, str):
            w = np.stack([np.asarray(weights_for_labels(rule, labels, f, g)) for f, g in zip(fpr, gap)])
        else:
            w = np.broadcast_to(rule, fpr.shape)
    # Items sharing (bin, missingness mask) have the same variance: work on those rows (O(draws x rows x J)).
    keys = np.concatenate([idx[:, None], obs], axis=1).astype(np.int64)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    r = uniq.shape[0]
    row_bin, row_mask = uniq[:, 0], uniq[:, 1:].astype(bool)
    row_count = np.bincount(inv, minlength=r).astype(np.float64)
    row_pos = np.stack([np.bincount(inv, weights=(labels[:, j] == 1).astype(np.float64), minlength=r)
                        for j in range(labels.shape[1])], axis=1)
    # Clean frequency of each bin per draw: the equally weighted corrected mean with one pseudo-label of each
    # class, (sum + 1) / (n_k + 2), kept inside [1, n_k + 1] / (n_k + 2) (a noisy corrected mean can leave
    # [0, 1], and a frequency of exactly 0 would make every bin of a rare class look empty of information).
    per_ann = (row_pos[None] - row_count[None, :, None] * fpr[:, None, :]) / gap[:, None, :]
    row_sum = np.where(row_mask[None], per_ann, 0.0).sum(axis=2) / row_mask.sum(axis=1)[None]
    count = np.bincount(idx, minlength=n_bins).astype(np.float64)
    sums = np.stack([np.bincount(row_bin, weights=v, minlength=n_bins) for v in row_sum])
    mu_bin = np.clip((sums + 1.0) / (count + 2.0), 1.0 / (count + 2.0), (count + 1.0) / (count + 2.0))
    var = _item_variance(row_mask, fpr, gap, np.asarray(w), mu_bin[:, row_bin]).mean(axis=0)
    mu_mean = mu_bin.mean(axis=0)
    clean_var = (mu_mean * (1 - mu_mean))[row_bin]
    n_eff = np.bincount(row_bin, weights=row_count * clean_var / var, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        efficiency = n_eff / count
    return pd.DataFrame({"bin": np.arange(n_bins), "lower": edges[:-1], "upper": edges[1:],
                         "count": count.astype(np.int64), "clean_frequency": np.where(count > 0, mu_mean, np.nan),
                         "effective_clean_labels": n_eff, "efficiency": efficiency,
                         "alarming": (count > 0) & (n_eff < min_effective)})


def _diagnostics_messages(func, ann: pd.DataFrame, bins_df: pd.DataFrame, src: Draws, *, min_gap, min_effective):
    """The warnings of :func:`gap_diagnostics`: alarming annotators, then alarming bins."""
    messages = []
    ids = ann["annotator"].tolist()
    p_below, inflation = ann["p_gap_below"].to_numpy(), ann["variance_inflation"].to_numpy()
    bad = np.flatnonzero(ann["alarming"].to_numpy())
    if bad.size:
        what = "posterior probability" if src.is_posterior else "estimate says"
        messages.append(
            f"{func}: annotators {_preview([ids[j] for j in bad])} have gap < {min_gap} ({what}: "
            f"{_preview(np.round(p_below[bad], 3))}); their corrected labels carry variance inflated by "
            f"{_preview(np.round(inflation[bad], 1))}x. Consider dropping them or collecting more labels.")
    badb = np.flatnonzero(bins_df["alarming"].to_numpy())
    if badb.size:
        n_eff = bins_df["effective_clean_labels"].to_numpy()
        messages.append(
            f"{func}: bins {_preview(badb.tolist())} hold fewer than {min_effective:g} clean-label equivalents "
            f"({_preview(np.round(n_eff[badb], 1))}); their corrected frequencies are very noisy. Use fewer or "
            "equal-mass bins, or more items.")
    return messages


@dataclass(frozen=True)
class GapSensitivity:
    """How NC-ECE and its interval respond to the channel gap.

    Attributes
    ----------
    table : DataFrame
        ``mode="perturb"``: one row per factor: ``factor, mean_gap, nc_ece`` (the paper's NC-ECE at the
        perturbed channels, ``PosteriorNCECE.value``), ``debiased, lower, upper, upper_one_sided,
        interval_to_read, width`` (plug-in with the perturbed channels treated as known, Bayesian bootstrap of
        the items), ``min_effective_clean_labels``.
        ``mode="simulate"``: one row per gap: ``gap, n_reps, variance_inflation`` (``1 / gap^2``),
        ``oracle_ece`` (mean sample oracle ECE), ``target`` (mean of the ``method``'s target: sample oracle
        ECE for ``"latent"``, conditional binned ECE for ``"plugin"``), ``nc_ece_known`` / ``nc_ece_em``
        (mean plug-in NC-ECE with the true / EM-estimated channels), ``rmse_known`` / ``rmse_em``
        (against the sample oracle ECE), ``debiased, lower, upper, width`` (means of the ``method``'s
        debiased estimate and reported interval with the EM channels treated as known), ``coverage`` (share
        of those intervals covering the target), ``n_failed`` (EM fits that failed).
    replicates : DataFrame or None
        ``mode="simulate"``: one row per simulated data set.
    mode : str
    level : float
    settings : dict
    """

    table: pd.DataFrame = field(repr=False)
    replicates: pd.DataFrame | None = field(repr=False)
    mode: str
    level: float
    settings: dict


def gap_sensitivity(data: AnnotationSet | None = None, fit=None, *, mode: str = "perturb",
                    factors=(0.5, 0.75, 1.0, 1.25, 1.5), gaps=(0.15, 0.3, 0.5, 0.7), n_items: int = 2000,
                    n_annotators: int = 3, curve="overconfident", n_reps: int = 10, bins=10, weights="iv",
                    level: float = 0.9, n_draws: int = 400, method: str = "latent", seed: int = 0,
                    progress_bar: bool = False) -> GapSensitivity:
    """Sweep the channel gap and report how NC-ECE and its interval respond (table; plot it with
    :func:`noisycal_bayes.plotting.gap_sensitivity`).

    Parameters
    ----------
    data : AnnotationSet with scores, optional
        ``mode="perturb"``: the evaluated items.
    fit : FitResult or Channel, optional
        ``mode="perturb"``: the fitted channels (posterior mean for NUTS).
    mode : {"perturb", "simulate"}
        ``"perturb"``: scale every annotator's gap by each factor, keeping ``fpr`` (``tpr = fpr + factor *
        gap``, capped below 1), and recompute NC-ECE with the perturbed channels treated as known. Holding
        ``fpr`` fixed is a direction the data rule out (the pattern frequencies no longer match), and it
        overstates fragility about twofold; for the NC-ECE values the data allow use
        :func:`noisycal_bayes.diagnostics.gap_profile` (profile likelihood), which the report plots.
        ``"simulate"``: for each gap, simulate ``n_reps`` data sets with ``n_annotators`` symmetric
        annotators (``fpr = (1 - gap)/2``, ``tpr = (1 + gap)/2``) and the calibration ``curve``, and compare
        NC-ECE with the true and the EM-estimated channels to the sample oracle ECE.
    factors : sequence of float, default (0.5, 0.75, 1, 1.25, 1.5)
    gaps : sequence of float in (0, 1), default (0.15, 0.3, 0.5, 0.7)
    n_items, n_annotators, curve, n_reps : simulation settings
    bins, weights, level : as in :func:`~noisycal_bayes.propagate.posterior_nc_ece`
    n_draws : int, default 400
        Draws per interval (Bayesian bootstrap or clean-label draws).
    method : {"latent", "plugin"}, default "latent"
        ``mode="simulate"``: the :func:`~noisycal_bayes.propagate.posterior_nc_ece` route whose interval is
        tracked (with the EM fit, i.e. channels treated as known). ``mode="perturb"`` always uses the
        plug-in (perturbed channels have no prevalences).
    seed : int, default 0
    progress_bar : bool, default False
        A bar over the factors (``"perturb"``) or the simulated data sets (``"simulate"``), shown only when
        stderr is a terminal; the result is the same either way.

    Returns
    -------
    GapSensitivity

    Raises
    ------
    ValueError
        Unknown mode; ``"perturb"`` without ``data`` and ``fit``; factors or gaps out of range.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(1000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> res = gap_sensitivity(sim.data, sim.channel, factors=(0.5, 1.0), n_draws=100)
    >>> res.table["factor"].tolist()
    [0.5, 1.0]
    """
    binary_only(data, "gap_sensitivity", "usable_confusions (noisycal_bayes.core), the confusions' condition numbers")
    func = "gap_sensitivity"
    level = check_level(level)
    n_draws = check_positive_int(n_draws, name="n_draws")
    common = dict(bins=bins, weights=weights, level=level, n_draws=n_draws, seed=seed)
    if mode == "perturb":
        if isinstance(data, AnnotationSet):
            data.require_one_label_per_pair(f"{func}(mode='perturb')", "Use mode='simulate' (no data needed).")
        return _perturb_sweep(data, fit, func, factors=factors, progress_bar=progress_bar, **common)
    if mode != "simulate":
        raise ValueError(f"{func}: `mode` must be 'perturb' or 'simulate'; got {mode!r}.")
    if method not in ("latent", "plugin"):
        raise ValueError(f"{func}: `method` must be 'latent' or 'plugin' for mode='simulate'; got {method!r}.")
    g = np.asarray(gaps, dtype=np.float64)
    if g.ndim != 1 or g.size == 0 or np.any(~np.isfinite(g)) or np.any((g <= 0) | (g >= 1)):
        raise ValueError(f"{func}: `gaps` must lie in (0, 1); got {list(np.atleast_1d(g))}.")
    n_reps = check_positive_int(n_reps, name="n_reps")
    n_annotators = check_positive_int(n_annotators, name="n_annotators", minimum=2)
    runs = [(a, gap, r) for a, gap in enumerate(g) for r in range(n_reps)]
    reps = [_simulated_replicate(gap, r, seed + 1000 * a + r, n_items=n_items, n_annotators=n_annotators,
                                 curve=curve, method=method, **{k: v for k, v in common.items() if k != "seed"})
            for a, gap, r in progress(runs, enabled=progress_bar, desc="gap sensitivity (simulated data sets)")]
    rep_df = pd.DataFrame(reps)
    table = pd.DataFrame([_summarise_gap(gap, grp) for gap, grp in rep_df.groupby("gap", sort=True)])
    return GapSensitivity(table, rep_df, "simulate", level,
                          dict(gaps=g.tolist(), n_items=n_items, n_annotators=n_annotators, curve=str(curve),
                               n_reps=n_reps, bins=bins, weights=weights, n_draws=n_draws, seed=seed, method=method))


def _perturb_sweep(data, fit, func, *, factors, bins, weights, level, n_draws, seed,
                   progress_bar=False) -> GapSensitivity:
    """``mode="perturb"``: scale the fitted gaps and recompute the plug-in NC-ECE with the channels as known."""
    if not (isinstance(data, AnnotationSet) and data.kind == "binary") or fit is None:
        raise ValueError(f"{func}: mode='perturb' needs `data` (an AnnotationSet) and `fit` (a FitResult or "
                         "Channel); for a simulated sweep use mode='simulate'.")
    f = check_factors(factors, func)
    src = extract_draws(check_fit(fit, func, allow_channel=True))
    shared_channels_only(fit, func, None)
    fpr0, gap0 = src.fpr.mean(axis=0), src.gap.mean(axis=0)
    rows = []
    for k, fac in progress(list(enumerate(f)), enabled=progress_bar, desc="gap sensitivity (factors)"):
        gap = np.minimum(fac * gap0, 1 - 1e-9 - fpr0)
        ch = Channel(fpr0, fpr0 + gap, tuple(data.annotator_ids))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmallGapWarning)
            res = posterior_nc_ece(data, ch, bins=bins, weights=weights, level=level, seed=seed + k,
                                   method="plugin", n_draws=n_draws)
            diag = gap_diagnostics(data, ch, bins=bins, weights=weights, warn=False)
        n_eff = diag.bins.loc[diag.bins["count"] > 0, "effective_clean_labels"]
        # res.value: the plug-in NC-ECE at the perturbed channel (no bootstrap), the paper's number.
        rows.append({"factor": float(fac), "mean_gap": float(gap.mean()), "nc_ece": res.value,
                     "debiased": res.debiased, "lower": res.lower, "upper": res.upper,
                     "upper_one_sided": res.upper_one_sided, "interval_to_read": res.interval_to_read,
                     "width": res.upper - res.lower, "min_effective_clean_labels": float(n_eff.min())})
    return GapSensitivity(pd.DataFrame(rows), None, "perturb", level,
                          dict(factors=f.tolist(), bins=bins, weights=weights, n_draws=n_draws, seed=seed,
                               base_channel=(fpr0.tolist(), (fpr0 + gap0).tolist())))


def _simulated_replicate(gap, rep, seed, *, n_items, n_annotators, curve, method, bins, weights, level,
                         n_draws) -> dict:
    """One simulated data set of ``mode="simulate"``: its oracle and target ECE, NC-ECE with the true and the
    EM channels, and the ``method``'s debiased estimate and reported interval (EM channels as known)."""
    binning = as_binning(bins)
    fpr = np.full(n_annotators, (1 - gap) / 2)
    sim = simulate_annotations(n_items, fpr=fpr, tpr=fpr + gap, curve=curve, seed=seed)
    z = sim.data.scores
    edges = binning.edges_for(z)
    idx = bin_index(z, edges)
    oracle = float(np.abs(np.bincount(idx, weights=sim.clean_labels - z, minlength=edges.size - 1)).sum() / z.size)
    conditional = float(np.abs(np.bincount(idx, weights=sim.true_probability - z,
                                           minlength=edges.size - 1)).sum() / z.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        known = posterior_nc_ece(sim.data, sim.channel, bins=binning, weights=weights, method="plugin",
                                 bootstrap=False, n_draws=1).value
        em = fit_em(sim.data, model="histogram", groups=Binning.from_edges(edges), n_starts=5, seed=seed)
        row = {"gap": float(gap), "rep": rep, "seed": seed, "oracle_ece": oracle, "conditional_ece": conditional,
               "target": oracle if method == "latent" else conditional, "nc_ece_known": known,
               "nc_ece_em": np.nan, "debiased": np.nan, "lower": np.nan, "upper": np.nan,
               "failed": em.channel is None}
        if em.channel is not None:
            res = posterior_nc_ece(sim.data, em, bins=binning, weights=weights, level=level, method=method,
                                   seed=seed, n_draws=n_draws)
            lo, hi = res.reported_interval
            # res.value is the plug-in NC-ECE at the EM channels whatever the route.
            row.update(nc_ece_em=res.value, debiased=res.debiased, lower=lo, upper=hi)
    return row


def _summarise_gap(gap, grp: pd.DataFrame) -> dict:
    """One row of the ``mode="simulate"`` table from the replicates at one gap."""
    ok = ~grp["failed"].astype(bool)
    err_k = grp["nc_ece_known"] - grp["oracle_ece"]
    err_e = (grp["nc_ece_em"] - grp["oracle_ece"])[ok]
    cover = ((grp["lower"] <= grp["target"]) & (grp["target"] <= grp["upper"]))[ok]
    mean_ok = lambda col: grp[col][ok].mean() if ok.any() else np.nan  # noqa: E731
    return {"gap": gap, "n_reps": int(len(grp)), "variance_inflation": 1.0 / gap**2,
            "oracle_ece": grp["oracle_ece"].mean(), "target": grp["target"].mean(),
            "nc_ece_known": grp["nc_ece_known"].mean(), "nc_ece_em": mean_ok("nc_ece_em"),
            "rmse_known": float(np.sqrt(np.mean(err_k**2))),
            "rmse_em": float(np.sqrt(np.mean(err_e**2))) if ok.any() else np.nan,
            "debiased": mean_ok("debiased"), "lower": mean_ok("lower"),
            "upper": mean_ok("upper"),
            "width": float((grp["upper"] - grp["lower"])[ok].mean()) if ok.any() else np.nan,
            "coverage": float(cover.mean()) if ok.any() else np.nan, "n_failed": int((~ok).sum())}
