"""Corrected reliability diagram with bands, beside the naive majority-vote and vote-fraction curves; for K classes
the top-label diagram (accuracy of the predicted class per confidence bin) drawn by the same function."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ._mpl import CORRECTED, MAJORITY, ORACLE, VOTE_FRACTION, new_figure
from .._validation import binary_only

#: Colours of the naive top-label curves, in the order given (majority vote and vote distribution first, as in the
#: binary diagram).
_NAIVE_COLOURS = (MAJORITY, VOTE_FRACTION, "#009E73", "#56B4E9", "#F0E442", "0.45")


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
    binary_only(scores, "reliability_table", "top_label_ece (noisycal_bayes.core; its table)", name="scores")
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
    binary_only(data, "reliability_diagram", "plot_top_label_reliability")
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


def _per_bin(values, n_bins: int, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape != (n_bins,):
        raise ValueError(f"`{name}` must have shape ({n_bins},), one value per bin; got {arr.shape}.")
    return arr


def plot_top_label_reliability(conf_bin_means, corrected_freq, lower, upper, counts, *, naive=None, edges=None,
                               level=None, ax=None, title: str | None = None, histogram: bool = True):
    """Corrected top-label reliability diagram: corrected accuracy of the predicted class per confidence bin.

    Parameters
    ----------
    conf_bin_means : array-like of shape (n_bins,)
        Mean confidence ``max_k p_ik`` of the items in each bin.
    corrected_freq : array-like of shape (n_bins,)
        Mean corrected indicator of the top label per bin: the ``yhat_i``-th coordinate of the corrected
        clean-label vector, averaged over the bin (the per-bin term of the top-label NC-ECE).
    lower, upper : array-like of shape (n_bins,) or None
        Interval for ``corrected_freq`` (posterior or bootstrap quantiles), drawn as error bars (the binary
        :func:`~noisycal_bayes.plotting.reliability_diagram` draws the corrected curve, bands and histogram).
    counts : array-like of shape (n_bins,)
        Items per bin; empty bins are not drawn.
    naive : dict, optional
        ``{name: frequencies of shape (n_bins,)}``: naive curves on the same bins, e.g. the accuracy against
        the majority vote, each annotator, or the vote distribution; drawn dashed, in the order given.
    edges : array-like of shape (n_bins + 1,), optional
        Bin edges for the count histogram. Default: equal-width bins on [0, 1], as the top-label ECE uses.
    level : float, optional
        Level of the interval, for the legend.
    ax, title, histogram
        As in :func:`reliability_diagram` (default title "Top-label reliability diagram").

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    A calibrated model lies on the diagonal: among items predicted with confidence ``c``, a fraction ``c`` has
    the predicted class as clean label. Corrected frequencies are unbiased for that fraction given the
    confusion matrices and may leave [0, 1] in small bins (DESIGN §8).

    Examples
    --------
    >>> fig = plot_top_label_reliability([0.55, 0.75, 0.95], [0.5, 0.7, 0.97], [0.4, 0.6, 0.95],
    ...                                  [0.6, 0.8, 0.99], [10, 40, 300], edges=[0.4, 0.6, 0.8, 1.0],
    ...                                  naive={"majority vote": [0.45, 0.6, 0.85]})
    >>> fig.axes[0].get_legend_handles_labels()[1]
    ['perfect calibration', 'naive: majority vote', 'noise-corrected (interval)']
    """
    x = np.asarray(conf_bin_means, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"`conf_bin_means` must have shape (n_bins,); got {x.shape}.")
    n_bins = x.size
    if (lower is None) != (upper is None):
        raise ValueError("give both `lower` and `upper`, or neither.")
    edges = np.linspace(0.0, 1.0, n_bins + 1) if edges is None else np.asarray(edges, dtype=np.float64)
    if edges.shape != (n_bins + 1,):
        raise ValueError(f"`edges` must have shape ({n_bins + 1},), the bin edges; got {edges.shape}.")
    # The binary diagram's table: `lower` / `upper` there are the bin edges, not the interval.
    table = pd.DataFrame({"lower": edges[:-1], "upper": edges[1:], "count": _per_bin(counts, n_bins, "counts"),
                          "mean_score": x,
                          "corrected_frequency": _per_bin(corrected_freq, n_bins, "corrected_freq")})
    curves = {name: _per_bin(freq, n_bins, f"naive[{name!r}]") for name, freq in dict(naive or {}).items()}
    fig = reliability_diagram(table, lower=lower, upper=upper, level=level, ax=ax, histogram=histogram,
                              title=title if title is not None else "Top-label reliability diagram")
    main = ax if ax is not None else fig.axes[0]
    ok = table["count"].to_numpy() > 0
    colours = _NAIVE_COLOURS * (1 + len(curves) // len(_NAIVE_COLOURS))
    for (name, freq), colour in zip(curves.items(), colours):
        main.plot(x[ok], freq[ok], "s--", color=colour, lw=1.2, ms=4, label=f"naive: {name}")
    main.legend(loc="upper left", fontsize=8, frameon=False)
    main.set_ylabel("accuracy of the predicted class")
    xlabel = "confidence (mean top-label probability per bin)"
    (fig.axes[1] if ax is None and histogram else main).set_xlabel(xlabel)
    return fig
