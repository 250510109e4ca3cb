"""Channel forest plot: fpr, tpr and gap per annotator, with intervals and optional true values."""
from __future__ import annotations

import numpy as np

from ._mpl import CORRECTED, TRUTH, new_figure

_QUANTITIES = ("fpr", "tpr", "gap")
_TITLES = {"fpr": "false-positive rate", "tpr": "true-positive rate", "gap": "gap = tpr - fpr"}


def channel_forest(channel, *, intervals=None, level=None, truth=None, axes=None, title: str | None = None):
    """Forest plot of each annotator's false-positive rate, true-positive rate and gap.

    Parameters
    ----------
    channel : Channel
        Point estimates (e.g. EM, posterior mean or median).
    intervals : dict, optional
        ``{"fpr": (lower, upper), "tpr": (lower, upper), "gap": (lower, upper)}`` with arrays of shape
        (n_annotators,); any key may be missing or None.
    level : float, optional
        Level of the intervals, for the legend.
    truth : Channel, optional
        True channels (simulations), drawn as crosses.
    axes : sequence of three matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    The gap ``delta_j = tpr_j - fpr_j`` scales every corrected label by ``1 / delta_j``: annotators
    with a small gap carry little information and inflate the variance of NC-ECE.
    """
    names = [str(a) for a in channel.annotator_ids]
    n = len(names)
    if axes is None:
        fig, axes = new_figure(1, 3, figsize=(9.0, 1.5 + 0.45 * n), sharey=True)
    else:
        axes = list(axes)
        if len(axes) != 3:
            raise ValueError(f"`axes` must hold 3 Axes (fpr, tpr, gap); got {len(axes)}.")
        fig = axes[0].figure
    intervals = intervals or {}
    ypos = np.arange(n)[::-1]
    for ax, q in zip(axes, _QUANTITIES):
        est = np.asarray(getattr(channel, q), dtype=np.float64)
        iv = intervals.get(q)
        if iv is not None:
            lo, hi = (np.asarray(v, dtype=np.float64) for v in iv)
            if lo.shape != (n,) or hi.shape != (n,):
                raise ValueError(f"intervals for `{q}` must have shape ({n},); got {lo.shape} and {hi.shape}.")
            ax.hlines(ypos, lo, hi, color=CORRECTED, lw=2,
                      label=None if level is None else f"{100 * level:.0f}% interval")
        ax.plot(est, ypos, "o", color=CORRECTED, ms=6, label="estimate")
        if truth is not None:
            ax.plot(np.asarray(getattr(truth, q)), ypos, "x", color=TRUTH, ms=8, mew=2, label="truth")
        ax.set_xlim(-0.02, 1.02)
        ax.set_title(_TITLES[q], fontsize=10)
        ax.grid(axis="x", color="0.9")
    axes[0].set_yticks(ypos, names)
    axes[0].set_ylim(-0.7, n - 0.3)
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8, frameon=False)
    if title is not None:
        fig.suptitle(title)
    return fig
