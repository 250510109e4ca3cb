"""Profile likelihood of the channel gaps: which gap scales the data allow, and the NC-ECE range they imply.

Scaling each fitted gap ``delta_j`` by a factor ``f`` while holding ``fpr_j`` fixed (the old "perturb" sweep)
moves the channels in a direction the data rule out. The profile instead maximises, for each ``f``, the grouped
Dawid-Skene log-likelihood (:mod:`noisycal_bayes.core.likelihood`) over every other parameter with the gaps held at
``delta_j(f) = f * delta_hat_j``:

``l_p(f) = max_{a, pi} sum_r c_r log[(1 - pi_{g_r}) prod_j a_j^A (1 - a_j)^(1-A)
+ pi_{g_r} prod_j (a_j + delta_j(f))^A (1 - a_j - delta_j(f))^(1-A)]``

over the compressed (group, pattern) rows ``r`` with counts ``c_r``. The factors with ``LR(f) = 2 [l(theta_hat) -
l_p(f)] <= chi2_1(level)`` form a ``level`` profile-likelihood confidence set for the common gap scale (Wilks;
Venzon and Moolgavkar, *Appl. Statist.* 37, 1988; Pawitan, *In All Likelihood*, 2001, §3.4), and the NC-ECE at
the profile channels over that set is the range the data cannot rule out along the gap direction. The
maximisation is a monotone ECM algorithm (Meng and Rubin, *Biometrika* 80, 1993): docs/methods.md.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._progress import progress
from .._validation import binary_only, check_level
from ..data import AnnotationSet, Binning, Channel

__all__ = ["GapProfile", "gap_profile", "profile_fit"]

#: Default factors (the two ends of the allowed set are added by root finding).
DEFAULT_FACTORS = tuple(np.round(np.linspace(0.5, 1.5, 21), 3))
_TOL = 1e-10
_MAX_ITER = 5000


def check_factors(factors, func: str) -> np.ndarray:
    """Gap scale factors as a non-empty 1-d float array of finite positive numbers (this profile's and
    :func:`~noisycal_bayes.diagnostics.gap_sensitivity`'s ``mode="perturb"``)."""
    f = np.asarray(factors, dtype=np.float64)
    if f.ndim != 1 or f.size == 0 or np.any(~np.isfinite(f)) or np.any(f <= 0):
        raise ValueError(f"{func}: `factors` must be positive numbers; got {list(np.atleast_1d(f))}.")
    return f


@dataclass(frozen=True)
class GapProfile:
    """Profile likelihood of a common gap scale and the NC-ECE it implies (:func:`gap_profile`).

    Attributes
    ----------
    table : DataFrame, one row per factor (sorted)
        ``factor``, ``mean_gap``, ``loglik`` (profile log-likelihood ``l_p(f)``), ``lr`` (``2 [l_hat -
        l_p(f)]``), ``allowed`` (``lr <= cutoff``), ``nc_ece`` (NC-ECE at the profile channels),
        ``nc_ece_fixed_fpr`` (NC-ECE with ``fpr`` held at the estimate: the old, ruled-out direction, for
        comparison), ``lr_fixed_fpr`` (its likelihood-ratio statistic), ``endpoint`` (True for the two
        factors found by root finding where ``lr = cutoff``), ``fpr_<id>`` and ``gap_<id>`` per annotator
        (the profile channels), ``n_iter``.
    factor_range : tuple of float
        ``(lower, upper)`` ends of the allowed factors (the profile confidence interval of the gap scale);
        an end equal to a grid end means the set was not bounded within the grid (see ``bounded``).
    nc_ece_range : tuple of float
        Smallest and largest NC-ECE over the allowed factors.
    nc_ece_at_estimate : float
        NC-ECE at the maximum-likelihood channels (factor 1).
    cutoff : float
        ``chi2_1`` quantile at ``level``.
    level : float
    bounded : tuple of bool
        Whether the allowed set ended inside the grid below / above 1.
    loglik : float
        Maximum log-likelihood ``l_hat``.
    channel : Channel
        The maximum-likelihood channels the factors scale.
    settings : dict
    """

    table: pd.DataFrame = field(repr=False)
    factor_range: tuple
    nc_ece_range: tuple
    nc_ece_at_estimate: float
    cutoff: float
    level: float
    bounded: tuple
    loglik: float
    channel: Channel = field(repr=False)
    settings: dict = field(default_factory=dict)

    @property
    def mode(self) -> str:
        """``"profile"`` (the plot dispatches on it)."""
        return "profile"


# ------------------------------------------------------------------ the constrained maximisation
def _e_step(pos, neg, group, counts, fpr, tpr, prev):
    """``(loglik, T)`` on rows: ``pos``/``neg`` (R, J) indicators of positive / negative responses."""
    with np.errstate(divide="ignore"):
        la, l1a, lb, l1b = np.log(fpr), np.log1p(-fpr), np.log(tpr), np.log1p(-tpr)
    l0 = pos @ la + neg @ l1a
    l1 = pos @ lb + neg @ l1b
    a = np.log1p(-prev)[group] + l0
    b = np.log(prev)[group] + l1
    ll_rows = np.logaddexp(a, b)
    return float(np.sum(counts * ll_rows)), np.exp(b - ll_rows)


def _m_fpr(s0p, s0n, s1p, s1n, gap):
    """``argmax_a s0p log a + s0n log(1-a) + s1p log(a+d) + s1n log(1-a-d)`` on ``(0, 1-d)``, per annotator.

    The derivative ``s0p/a - s0n/(1-a) + s1p/(a+d) - s1n/(1-a-d)`` decreases from ``+inf`` to ``-inf`` (when
    the counts on each side are positive), so bisection finds the root to machine precision in 60 halvings.
    """
    lo = np.full_like(gap, 1e-12)
    hi = 1.0 - gap - 1e-12
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        d = s0p / mid - s0n / (1 - mid) + s1p / (mid + gap) - s1n / (1 - mid - gap)
        up = d > 0
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    return 0.5 * (lo + hi)


def profile_fit(patterns, group, counts, n_groups: int, gap, *, fpr0, prev0, tol: float = _TOL,
                max_iter: int = _MAX_ITER):
    """Maximise the grouped Dawid-Skene log-likelihood over ``fpr`` and the prevalences with the gaps fixed.

    Parameters
    ----------
    patterns : int array of shape (n_rows, J)
        0/1 responses, -1 missing.
    group : int array of shape (n_rows,)
    counts : float array of shape (n_rows,)
    n_groups : int
    gap : array of shape (J,)
        The fixed gaps ``delta_j`` in (0, 1).
    fpr0 : array of shape (J,), prev0 : array of shape (n_groups,)
        Starting values (clipped into the feasible set ``0 < a_j < 1 - delta_j``).
    tol, max_iter : convergence on the change of the log-likelihood.

    Returns
    -------
    dict
        ``fpr`` (J,), ``tpr`` (J,), ``prevalence`` (G,), ``loglik``, ``n_iter``, ``trace`` (log-likelihood per
        iteration, non-decreasing up to rounding).
    """
    patterns = np.asarray(patterns)
    pos = (patterns == 1).astype(np.float64)
    neg = (patterns == 0).astype(np.float64)
    group = np.asarray(group, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.float64)
    gap = np.asarray(gap, dtype=np.float64)
    fpr = np.clip(np.asarray(fpr0, dtype=np.float64), 1e-6, 1 - gap - 1e-6)
    prev = np.clip(np.asarray(prev0, dtype=np.float64), 1e-9, 1 - 1e-9)
    n_g = np.bincount(group, weights=counts, minlength=n_groups)
    ll, t = _e_step(pos, neg, group, counts, fpr, fpr + gap, prev)
    trace = [ll]
    it = 0
    for it in range(1, max_iter + 1):
        w1 = counts * t
        w0 = counts - w1
        with np.errstate(invalid="ignore", divide="ignore"):
            prev = np.where(n_g > 0, np.bincount(group, weights=w1, minlength=n_groups) / n_g, 0.5)
        prev = np.clip(prev, 1e-12, 1 - 1e-12)
        fpr = _m_fpr(w0 @ pos, w0 @ neg, w1 @ pos, w1 @ neg, gap)
        new, t = _e_step(pos, neg, group, counts, fpr, fpr + gap, prev)
        trace.append(new)
        if abs(new - ll) <= tol * max(1.0, abs(new)):
            ll = new
            break
        ll = new
    return {"fpr": fpr, "tpr": fpr + gap, "prevalence": prev, "loglik": ll, "n_iter": it, "trace": np.array(trace)}


# ------------------------------------------------------------------ public function
def _mle(fit, data, groups, func):
    """``(inputs, fpr, tpr, prevalence, loglik)`` at the maximum-likelihood estimate of the grouped model."""
    from ..inference.em import fit_em, run_em
    from ..models.result import FitResult

    if isinstance(fit, Channel):
        if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
            raise ValueError(f"{func}: with a Channel, `data` must be an AnnotationSet with scores.")
        if fit.fpr.size != data.n_annotators:
            raise ValueError(f"{func}: the channel has {fit.fpr.size} annotators but `data` has {data.n_annotators}.")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_em(data, model="grouped", groups=groups, n_starts=1,
                         starts=(fit.fpr[None], fit.tpr[None], np.full((1, _n_groups(data, groups)), 0.5)))
        if fit.channel is None:
            raise ValueError(f"{func}: EM from the given channel failed ({fit.reason}); pass a FitResult.")
    binary_only(fit, func, "usable_confusions (noisycal_bayes.core), the confusions' condition numbers", name="fit")
    if not isinstance(fit, FitResult):
        raise ValueError(f"{func}: `fit` must be a FitResult of fit_em / fit_map / fit_nuts or a Channel; got "
                         f"{type(fit).__name__}.")
    if fit.model not in ("dawid_skene", "grouped", "histogram"):
        raise ValueError(f"{func}: the profile needs a grouped channel model ('dawid_skene', 'grouped' or "
                         f"'histogram'); got model={fit.model!r}.")
    if fit.channel is None:
        raise ValueError(f"{func}: the fit has no channel estimate ({fit.reason or 'failed'}).")
    inp = fit.inputs
    if isinstance(data, AnnotationSet) and inp.n_items != data.n_items:
        raise ValueError(f"{func}: the fit was made on {inp.n_items} items but `data` has {data.n_items}; "
                         "the profile needs the fit of these items.")
    # Maximum likelihood from the fit's point (a NUTS posterior mean or a MAP estimate is near, not at, it).
    start = (np.asarray(fit.channel.fpr)[None], np.asarray(fit.channel.tpr)[None],
             np.asarray(fit.prevalence, dtype=np.float64).reshape(1, -1))
    out = run_em(inp, n_starts=1, seed=0, max_iter=2000, tol=1e-12, min_gap=0.0, prior_counts=None, starts=start)
    if out["selected"] is None:
        raise ValueError(f"{func}: the maximum-likelihood refit failed; the estimate may sit on the boundary.")
    return inp, np.asarray(out["fpr"]), np.asarray(out["tpr"]), np.asarray(out["prevalence"]), fit


def _n_groups(data, groups):
    from ..models.inputs import resolve_assignment

    return resolve_assignment(data, "grouped", groups, "gap_profile").n_groups


def gap_profile(data: AnnotationSet, fit, *, factors=DEFAULT_FACTORS, level: float = 0.95, bins=10,
                weights="iv", groups=None, progress_bar: bool = False) -> GapProfile:
    """Profile likelihood of a common scale of the channel gaps, and the NC-ECE values the data cannot rule out.

    Parameters
    ----------
    data : AnnotationSet with scores
        The items the channels were fitted on (and whose NC-ECE is reported).
    fit : FitResult or Channel
        A grouped-model fit (``fit_em``, ``fit_map`` or ``fit_nuts`` with model ``"grouped"``,
        ``"histogram"`` or ``"dawid_skene"``); the maximum-likelihood estimate is recomputed from its point.
        A :class:`~noisycal_bayes.data.Channel` starts a grouped EM fit on ``groups``.
    factors : sequence of positive float, default 0.5, 0.55, ..., 1.5
        Gap scale factors ``f`` (``delta_j(f) = f delta_hat_j``); factors with ``f delta_hat_j >= 1`` for some
        annotator are infeasible (``lr = inf``). The ends of the allowed set are added.
    level : float, default 0.95
        Confidence level of the allowed set (``LR(f) <= chi2_1(level)``).
    bins : int or Binning, default 10
        Evaluation bins of the NC-ECE (an int means equal width, as in :func:`~noisycal_bayes.nc_ece`).
    weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,), default "iv"
    groups : Binning, optional
        Score groups of the EM fit when ``fit`` is a Channel (default ``Binning.equal_mass(5)``).
    progress_bar : bool, default False
        A bar over the factors (shown only when stderr is a terminal).

    Returns
    -------
    GapProfile

    Raises
    ------
    ValueError
        ``data`` not an AnnotationSet with scores; ``fit`` not a grouped-model FitResult or Channel, or not
        fitted on ``data``; factors not positive; a bad level.

    Notes
    -----
    The profile log-likelihood, the ECM maximisation and the confidence set are described in
    :mod:`noisycal_bayes.diagnostics.profile`. ``LR(f)`` is 0 at ``f = 1`` and grows on each side; for
    well-separated annotators the allowed set is a narrow interval around 1 that shrinks like
    ``1 / sqrt(n)``, so the NC-ECE range is much narrower than a fixed-``fpr`` sweep over the same factors
    suggests.

    Examples
    --------
    >>> from noisycal_bayes import Binning, fit_em, load_demo
    >>> data, _ = load_demo()
    >>> fit = fit_em(data, groups=Binning.equal_mass(5), n_starts=3)
    >>> prof = gap_profile(data, fit, factors=(0.8, 1.0, 1.2))
    >>> lo, hi = prof.factor_range
    >>> bool(0.8 < lo < 1.0 < hi < 1.2)
    True
    """
    binary_only(data, "gap_profile", "usable_confusions (noisycal_bayes.core), the confusions' condition numbers")
    from scipy.optimize import brentq
    from scipy.stats import chi2

    from ..reference.calibration import nc_ece

    func = "gap_profile"
    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"{func}: `data` must be an AnnotationSet; got {type(data).__name__}.")
    data.require_one_label_per_pair(f"{func} (a profile likelihood on response patterns)",
                                    "Read the channels' intervals from evaluate (bootstrap or NUTS) instead.")
    data.require_scores()
    level = check_level(level)
    f = check_factors(factors, func)
    groups = Binning.equal_mass(5) if groups is None else groups
    inp, fpr_hat, tpr_hat, prev_hat, fit = _mle(fit, data, groups, func)
    gap_hat = tpr_hat - fpr_hat
    ids = tuple(data.annotator_ids)
    args = (np.asarray(inp.patterns), np.asarray(inp.row_group), np.asarray(inp.counts, dtype=np.float64),
            inp.n_groups)
    pos = (args[0] == 1).astype(np.float64)
    neg = (args[0] == 0).astype(np.float64)
    ll_hat = _e_step(pos, neg, args[1].astype(np.int64), args[2], fpr_hat, tpr_hat, prev_hat)[0]
    cutoff = float(chi2.ppf(level, 1))
    cache: dict = {}

    def at(fac):
        fac = float(fac)
        if fac not in cache:
            gap = fac * gap_hat
            if np.any(gap >= 1 - 1e-9):
                cache[fac] = None
            else:
                cache[fac] = profile_fit(*args, gap, fpr0=fpr_hat, prev0=prev_hat)
        return cache[fac]

    def lr(fac):
        res = at(fac)
        return np.inf if res is None else max(0.0, 2.0 * (ll_hat - res["loglik"]))

    grid = np.unique(np.concatenate([f, [1.0]]))
    for fac in progress(list(grid), enabled=progress_bar, desc="gap sensitivity (profile likelihood)"):
        at(fac)
    lrs = np.array([lr(x) for x in grid])
    # Ends of the allowed set: the first grid factor beyond the cutoff on each side of 1, then the root of
    # LR(f) = cutoff between it and its inner neighbour (LR grows monotonically away from 1).
    ends, bounded = [], []
    one = int(np.flatnonzero(grid == 1.0)[0])
    for side in (-1, 1):
        k = one
        while 0 <= k + side < grid.size and lrs[k + side] <= cutoff:
            k += side
        if 0 <= k + side < grid.size:
            outer, inner = grid[k + side], grid[k]
            if not np.isfinite(lrs[k + side]):
                # Infeasible beyond: find the feasible boundary first.
                outer = (1 - 1e-6) / float(np.max(gap_hat))
            # xtol far below the factor scale: at 5e4 items LR moves by ~1e3 per 0.01 of factor.
            root = brentq(lambda x: lr(x) - cutoff, min(inner, outer), max(inner, outer), xtol=1e-12,
                          rtol=1e-12) if lr(outer) > cutoff else outer
            ends.append(float(root))
            bounded.append(True)
        else:
            ends.append(float(grid[k]))
            bounded.append(False)
    # A few factors inside the allowed set, so that its NC-ECE range does not rest on the grid alone.
    all_f = np.unique(np.concatenate([grid, ends, np.linspace(ends[0], ends[1], 7)[1:-1]]))
    edges_bins = bins
    rows = []
    for fac in all_f:
        res = at(fac)
        gap = fac * gap_hat
        row = {"factor": float(fac), "mean_gap": float(gap.mean()), "loglik": np.nan if res is None else res["loglik"],
               "lr": lr(fac), "endpoint": bool(fac in ends), "n_iter": 0 if res is None else res["n_iter"]}
        # The ends solve LR = cutoff up to the root finder's tolerance: allowed by construction.
        row["allowed"] = bool(row["endpoint"] or row["lr"] <= cutoff)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            row["nc_ece"] = np.nan if res is None else float(
                nc_ece(data, Channel(res["fpr"], res["tpr"], ids), bins=edges_bins, weights=weights).value)
            fixed_tpr = fpr_hat + gap
            if np.all(fixed_tpr < 1):
                ch = Channel(fpr_hat, fixed_tpr, ids)
                row["nc_ece_fixed_fpr"] = float(nc_ece(data, ch, bins=edges_bins, weights=weights).value)
                row["lr_fixed_fpr"] = max(0.0, 2.0 * (ll_hat - _e_step(pos, neg, args[1].astype(np.int64), args[2],
                                                                      fpr_hat, fixed_tpr, prev_hat)[0]))
            else:
                row["nc_ece_fixed_fpr"] = row["lr_fixed_fpr"] = np.nan
        for j, a in enumerate(ids):
            row[f"fpr_{a}"] = np.nan if res is None else float(res["fpr"][j])
            row[f"gap_{a}"] = float(gap[j])
        rows.append(row)
    table = pd.DataFrame(rows)
    ok = table[table["allowed"]]
    est = float(table.loc[table["factor"] == 1.0, "nc_ece"].iloc[0])
    rng = (float(ok["nc_ece"].min()), float(ok["nc_ece"].max()))
    return GapProfile(table=table, factor_range=(ends[0], ends[1]), nc_ece_range=rng, nc_ece_at_estimate=est,
                      cutoff=cutoff, level=level, bounded=tuple(bounded), loglik=float(ll_hat),
                      channel=Channel(fpr_hat, tpr_hat, ids),
                      settings=dict(factors=f.tolist(), bins=bins, weights=weights, model=fit.model,
                                    n_groups=int(inp.n_groups)))
