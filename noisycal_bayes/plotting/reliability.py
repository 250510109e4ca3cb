"""Corrected reliability diagram with bands, beside the naive majority-vote and vote-fraction curves."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ._mpl import CORRECTED, MAJORITY, ORACLE, VOTE_FRACTION, new_figure


def _edges_and_table(result):
    """Bin edges (n_bins + 1,) and the per-bin table from an NC-ECE result or a DataFrame."""
    table = getattr(result, "table", result)
    if not isinstance(table, pd.DataFrame):
        raise ValueError("`result` must be an NC-ECE result (with `.table`) or a DataFrame with columns "
                         "lower, upper, count, mean_score, corrected_frequency.")
    need = ["lower", "upper", "count", "mean_score", "corrected_frequency"]
    missing = [c for c in need if c not in table.columns]
    if missing:
        raise ValueError(f"the reliability table is missing column(s) {missing}; it has {list(table.columns)}.")
    edges = getattr(result, "edges", None)
    if edges is None:
        edges = np.append(table["lower"].to_numpy(), table["upper"].to_numpy()[-1])
    return np.asarray(edges, dtype=np.float64), table


def reliability_table(scores, labels, edges) -> pd.DataFrame:
    """Per-bin count, mean score and mean label (0/1 or soft labels) for fixed ``edges``.

    Parameters
    ----------
    scores, labels : array-like of shape (n_items,)
    edges : array-like of shape (n_bins + 1,)

    Returns
    -------
    DataFrame with columns ``bin, count, mean_score, frequency`` (NaN means in empty bins).
    """
    z = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    edges = np.asarray(edges, dtype=np.float64)
    n_bins = edges.size - 1
    idx = np.searchsorted(edges[1:-1], z, side="right")
    count = np.bincount(idx, minlength=n_bins).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.DataFrame({"bin": np.arange(n_bins), "count": count.astype(np.int64),
                             "mean_score": np.bincount(idx, weights=z, minlength=n_bins) / count,
                             "frequency": np.bincount(idx, weights=y, minlength=n_bins) / count})


def reliability_diagram(result, *, lower=None, upper=None, level=None, data=None, ties: str = "positive",
                        clean_labels=None, clean_labels_name: str = "clean labels", ax=None, title: str | None = None,
                        histogram: bool = True):
    """Corrected reliability diagram: noise-corrected frequency per bin against the mean score.

    Parameters
    ----------
    result : NCECEResult or DataFrame
        Output of :func:`noisycal_bayes.nc_ece` (or its ``table``: columns ``lower, upper, count,
        mean_score, corrected_frequency``).
    lower, upper : array-like of shape (n_bins,), optional
        Interval for the corrected frequency of each bin (e.g. posterior or bootstrap quantiles),
        drawn as error bars.
    level : float, optional
        Level of that interval, for the legend.
    data : AnnotationSet with scores, optional
        Adds the naive curves on the same bins: frequency of the majority vote (ties broken by
        ``ties``) and the mean vote fraction.
    clean_labels : array-like of shape (n_items,), optional
        Clean labels of ``data``'s items (simulations, or a reference label set): adds the oracle curve.
    clean_labels_name : str, default "clean labels"
        What ``clean_labels`` are, for the legend (e.g. "original CIFAR-10 label" for a reference label set).
    ax : matplotlib Axes, optional
        Draw here (no count histogram); otherwise a new figure is made.
    title : str, optional
    histogram : bool
        With a new figure, add a panel with the number of items per bin.

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    A perfectly calibrated model lies on the diagonal; the corrected frequency of bin ``B_k`` is the
    mean corrected label ``mean_{i in B_k} Ytilde_i`` (paper §3), unbiased for the clean frequency
    given the channels. Corrected frequencies may leave [0, 1] in small bins: that is noise, not an error.
    """
    edges, table = _edges_and_table(result)
    if ax is None:
        if histogram:
            fig, (ax, hax) = new_figure(2, 1, figsize=(5.5, 5.5), sharex=True, height_ratios=[4, 1])
        else:
            fig, ax = new_figure(figsize=(5.5, 4.5))
            hax = None
    else:
        fig, hax = ax.figure, None

    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls=":", label="perfect calibration")
    low_y, high_y = _corrected_curve(ax, table, edges.size - 1, lower, upper, level)
    if data is not None:
        _naive_curves(ax, data, edges, ties, clean_labels, clean_labels_name)
    elif clean_labels is not None:
        raise ValueError("`clean_labels` needs `data` (their scores) to place the oracle curve.")

    pad = 0.05
    ax.set_xlim(0, 1)
    ax.set_ylim(min(0.0, low_y) - pad, max(1.0, high_y) + pad)
    ax.set_ylabel("frequency of the positive class")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.set_title(title if title is not None else "Reliability diagram")
    if hax is not None:
        hax.bar(edges[:-1], table["count"].to_numpy(), width=np.diff(edges), align="edge", color="0.75",
                edgecolor="white")
        hax.set_ylabel("items")
        hax.set_xlabel("score (mean per bin)")
    else:
        ax.set_xlabel("score (mean per bin)")
    return fig


def _corrected_curve(ax, table, n_bins, lower, upper, level):
    """Draw the corrected frequency of the non-empty bins (with error bars when ``lower``/``upper``, shape
    (n_bins,), are given); return the smallest and largest value drawn, for the y limits."""
    ok = table["count"].to_numpy() > 0
    x = table["mean_score"].to_numpy(dtype=np.float64)[ok]
    y = table["corrected_frequency"].to_numpy(dtype=np.float64)[ok]
    low_y, high_y = [np.nanmin(y, initial=0.0)], [np.nanmax(y, initial=1.0)]
    if lower is not None and upper is not None:
        lo = np.asarray(lower, dtype=np.float64)
        hi = np.asarray(upper, dtype=np.float64)
        if lo.shape != (n_bins,) or hi.shape != (n_bins,):
            raise ValueError(f"`lower` and `upper` must have shape ({n_bins},), one value per bin; "
                             f"got {lo.shape} and {hi.shape}.")
        lo, hi = lo[ok], hi[ok]
        band = "interval" if level is None else f"{100 * level:.0f}% interval"
        ax.errorbar(x, y, yerr=np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)]), fmt="o-",
                    color=CORRECTED, lw=1.8, ms=5, capsize=3, label=f"noise-corrected ({band})")
        low_y.append(np.nanmin(lo, initial=0.0))
        high_y.append(np.nanmax(hi, initial=1.0))
    else:
        ax.plot(x, y, "o-", color=CORRECTED, lw=1.8, ms=5, label="noise-corrected")
    return min(low_y), max(high_y)


def _naive_curves(ax, data, edges, ties, clean_labels, clean_labels_name):
    """Draw the majority-vote and vote-fraction curves of ``data`` on ``edges`` (and the oracle curve of
    ``clean_labels``, shape (n_items,), when given)."""
    z = data.require_scores()
    maj = reliability_table(z, data.majority_vote(ties=ties), edges)
    vf = reliability_table(z, data.vote_fraction(), edges)
    tie_note = f", {data.n_ties()} ties -> {1 if ties == 'positive' else 0}" if data.n_ties() else ""
    ax.plot(maj["mean_score"], maj["frequency"], "s--", color=MAJORITY, lw=1.2, ms=4,
            label=f"naive: majority vote{tie_note}")
    ax.plot(vf["mean_score"], vf["frequency"], "^--", color=VOTE_FRACTION, lw=1.2, ms=4,
            label="naive: vote fraction")
    if clean_labels is not None:
        orc = reliability_table(z, np.asarray(clean_labels), edges)
        ax.plot(orc["mean_score"], orc["frequency"], "D-", color=ORACLE, lw=1, ms=3, alpha=0.8,
                label=f"oracle: {clean_labels_name}")
