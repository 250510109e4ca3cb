"""Distribution of NC-ECE draws (posterior draws or bootstrap replicates)."""
from __future__ import annotations

import numpy as np

from ._mpl import CORRECTED, ORACLE, new_figure


def nc_ece_posterior(draws, *, value=None, interval=None, level=None, truth=None, label: str = "posterior",
                     ax=None, title: str | None = None):
    """Histogram of NC-ECE draws with the point estimate, an interval and (optionally) the truth.

    Parameters
    ----------
    draws : array-like
        NC-ECE draws of any shape (flattened), e.g. ``(n_chains, n_draws)`` or bootstrap replicates.
    value : float, optional
        Point estimate.
    interval : (lower, upper), optional
    level : float, optional
        Level of the interval, for the legend.
    truth : float, optional
        The target's true value (e.g. the sample oracle ECE in a simulation).
    label : str
        What the draws are (``"posterior"``, ``"bootstrap"``).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    x = np.asarray(draws, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        raise ValueError("`draws` holds no finite values.")
    if ax is None:
        fig, ax = new_figure(figsize=(5.5, 3.5))
    else:
        fig = ax.figure
    ax.hist(x, bins=min(50, max(10, x.size // 20)), color=CORRECTED, alpha=0.35, label=f"{label} ({x.size} draws)")
    if interval is not None:
        lo, hi = interval
        ax.axvspan(lo, hi, color=CORRECTED, alpha=0.12,
                   label="interval" if level is None else f"{100 * level:.0f}% interval")
    if value is not None:
        ax.axvline(value, color=CORRECTED, lw=2, label=f"estimate {value:.3f}")
    if truth is not None:
        ax.axvline(truth, color=ORACLE, lw=1.5, ls="--", label=f"truth {truth:.3f}")
    ax.set_xlabel("NC-ECE")
    ax.set_ylabel("draws")
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(title if title is not None else "NC-ECE")
    return fig
