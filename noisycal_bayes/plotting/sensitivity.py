"""Gap sensitivity: NC-ECE and its interval as the channel gap shrinks (``diagnostics.gap_sensitivity``)."""
from __future__ import annotations

import numpy as np

from ._mpl import CORRECTED, MAJORITY, ORACLE, TRUTH, new_figure


def gap_sensitivity(result, *, ax=None, title: str | None = None):
    """Plot a :class:`~noisycal_bayes.diagnostics.gaps.GapSensitivity` result.

    ``mode="perturb"``: x = gap scale factor (mean gap on a second axis label), the plug-in estimate with
    its interval (band) and the NC-ECE at the perturbed channels. ``mode="simulate"``: x = gap, the mean
    sample oracle ECE, the mean NC-ECE with the true and with EM-estimated channels, and the mean reported
    interval of the tracked route, with its empirical coverage as text.

    Parameters
    ----------
    result : GapSensitivity
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    table = getattr(result, "table", None)
    mode = getattr(result, "mode", None)
    if table is None or mode not in ("perturb", "simulate"):
        raise ValueError("`result` must be the output of noisycal_bayes.diagnostics.gap_sensitivity.")
    if ax is None:
        fig, ax = new_figure(figsize=(5.5, 4.0))
    else:
        fig = ax.figure
    level = getattr(result, "level", None)
    band = "interval" if level is None else f"{100 * level:.0f}% interval"
    if mode == "perturb":
        x = table["factor"].to_numpy(dtype=np.float64)
        ax.fill_between(x, table["lower"], table["upper"], color=CORRECTED, alpha=0.2, label=f"plug-in {band}")
        ax.plot(x, table["debiased"], "o-", color=CORRECTED, label="debiased estimate")
        ax.plot(x, table["nc_ece"], "s--", color=MAJORITY, ms=4, label="NC-ECE at the perturbed channels")
        ax.axvline(1.0, color="0.6", lw=1, ls=":")
        labels = [f"{f:g}\n({g:.2f})" for f, g in zip(x, table["mean_gap"])]
        ax.set_xticks(x)
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_xlabel("gap scale factor (mean gap)")
    else:
        x = table["gap"].to_numpy(dtype=np.float64)
        ax.fill_between(x, table["lower"], table["upper"], color=CORRECTED, alpha=0.2,
                        label=f"mean reported {band} (EM channels)")
        ax.plot(x, table["oracle_ece"], "D-", color=ORACLE, ms=4, label="sample oracle ECE (truth)")
        ax.plot(x, table["nc_ece_known"], "^--", color=TRUTH, ms=4, label="NC-ECE, true channels")
        ax.plot(x, table["nc_ece_em"], "o-", color=CORRECTED, label="NC-ECE, EM channels")
        for xi, cov in zip(x, table["coverage"]):
            if np.isfinite(cov):
                ax.annotate(f"{100 * cov:.0f}%", (xi, 0), xytext=(0, 4), textcoords="offset points", ha="center",
                            fontsize=7, color=CORRECTED, xycoords=("data", "axes fraction"))
        ax.set_xlabel("channel gap (labels: interval coverage)")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("calibration error")
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(title if title is not None else "Sensitivity to the channel gap")
    return fig
