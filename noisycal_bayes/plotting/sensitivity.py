"""Gap sensitivity: NC-ECE and its interval as the channel gap shrinks (``diagnostics.gap_sensitivity``)."""
from __future__ import annotations

import numpy as np

from ._mpl import CORRECTED, MAJORITY, ORACLE, TRUTH, new_figure


def gap_sensitivity(result, *, ax=None, title: str | None = None):
    """Plot a :class:`~noisycal_bayes.diagnostics.GapProfile` or :class:`~noisycal_bayes.diagnostics.GapSensitivity`.

    ``GapProfile`` (:func:`~noisycal_bayes.diagnostics.gap_profile`, the report's figure): x = gap scale
    factor; the NC-ECE at the profile channels (the other parameters re-fitted), the factors the data allow
    (shaded, ``LR <= chi2_1(level)``) with the NC-ECE range they imply, and for contrast the NC-ECE with
    ``fpr`` held fixed (a direction the data rule out). Without ``ax`` a second panel shows the profile
    likelihood-ratio statistic and its cutoff.

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
    if table is None or mode not in ("perturb", "simulate", "profile"):
        raise ValueError("`result` must be the output of noisycal_bayes.diagnostics.gap_sensitivity or "
                         "noisycal_bayes.diagnostics.gap_profile.")
    if mode == "profile":
        return _profile(result, ax=ax, title=title)
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


def _profile(result, *, ax=None, title=None):
    """The ``GapProfile`` figure (see :func:`gap_sensitivity`)."""
    t = result.table
    feasible = t[np.isfinite(t["lr"].to_numpy(dtype=np.float64))]
    if ax is None:
        fig, (ax, ax_lr) = new_figure(2, 1, figsize=(5.5, 5.6), sharex=True, height_ratios=(2.2, 1.0))
    else:
        fig, ax_lr = ax.figure, None
    lo, hi = result.factor_range
    pct = f"{100 * result.level:.0f}%"
    x = feasible["factor"].to_numpy(dtype=np.float64)
    ax.axvspan(lo, hi, color=CORRECTED, alpha=0.15, lw=0, label=f"gap scales the data allow ({pct})")
    ax.plot(x, feasible["nc_ece"], "o-", color=CORRECTED, ms=3, label="NC-ECE, other parameters re-fitted (profile)")
    fixed = t[np.isfinite(t["nc_ece_fixed_fpr"].to_numpy(dtype=np.float64))]
    ax.plot(fixed["factor"], fixed["nc_ece_fixed_fpr"], "s--", color=MAJORITY, ms=3,
            label="NC-ECE with fpr held fixed (ruled out)")
    r0, r1 = result.nc_ece_range
    ax.axhspan(r0, r1, color=CORRECTED, alpha=0.3, lw=0)
    ax.axvline(1.0, color="0.6", lw=1, ls=":")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("NC-ECE")
    ax.legend(fontsize=7, frameon=False)
    ax.set_title(title if title is not None else
                 f"Gap sensitivity: NC-ECE the data allow {r0:.3f} to {r1:.3f} (factors {lo:.3f} to {hi:.3f})",
                 fontsize=9)
    if ax_lr is not None:
        ax_lr.plot(x, feasible["lr"], "o-", color=CORRECTED, ms=3, label="profile LR")
        fx = fixed["factor"].to_numpy(dtype=np.float64)
        ax_lr.plot(fx, fixed["lr_fixed_fpr"], "s--", color=MAJORITY, ms=3, label="LR, fpr fixed")
        ax_lr.axhline(result.cutoff, color="0.3", lw=1, ls="--", label=f"chi2_1 cutoff ({pct})")
        ax_lr.set_yscale("symlog", linthresh=1.0)
        ax_lr.set_ylabel("2 x log-lik. drop")
        ax_lr.legend(fontsize=7, frameon=False)
        ax_lr.set_xlabel("gap scale factor (1 = maximum-likelihood channels)")
    else:
        ax.set_xlabel("gap scale factor (1 = maximum-likelihood channels)")
    return fig
