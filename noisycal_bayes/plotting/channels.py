"""Annotator channels: the binary forest plot (fpr, tpr and gap per annotator, with intervals and optional true
values) and the K-class confusion matrices as heat maps."""
from __future__ import annotations

import math

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


#: Largest number of classes whose cells are annotated with their values.
MAX_ANNOTATED_CLASSES = 10
_PANELS_PER_ROW = 4


def _confusion_array(confusion, name: str) -> np.ndarray:
    """``confusion`` as float64 of shape (n_annotators, K, K) (a single (K, K) matrix is one annotator)."""
    try:
        arr = np.array(confusion, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be numeric, shape (n_annotators, K, K).") from None
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[1] != arr.shape[2] or arr.shape[1] < 2 or arr.shape[0] < 1:
        raise ValueError(f"`{name}` must have shape (n_annotators, K, K) with K >= 2; got {np.shape(confusion)}.")
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1)
    if bad.any():
        raise ValueError(f"`{name}` must hold probabilities in [0, 1]; not so at (annotator, true class, label) "
                         f"{[tuple(int(v) for v in p) for p in np.argwhere(bad)[:8]]}.")
    return arr


def plot_confusion_matrices(confusion, *, classes=None, truth=None, annotators=None, ax=None,
                            title: str | None = None):
    """Heat maps of the annotators' confusion matrices, one panel per annotator.

    Parameters
    ----------
    confusion : array-like of shape (n_annotators, K, K) or (K, K)
        ``confusion[j, y, a] = P(A_j = a | Y = y)``: rows are clean classes, columns the annotator's labels
        (each row sums to 1). Point estimates, e.g. an EM fit or a posterior mean.
    classes : sequence of length K, optional
        Class names for the tick labels (default ``0 .. K - 1``).
    truth : array-like of the same shape, optional
        True confusion matrices (simulations): each annotated cell also shows the true value in brackets.
    annotators : sequence of length n_annotators, optional
        Panel titles (default ``annotator 0``, ``annotator 1``, ...).
    ax : matplotlib Axes or sequence of n_annotators Axes, optional
        Draw here; otherwise a new figure with up to four panels per row is made.
    title : str, optional
        Title above all panels.

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Cells are annotated with their values when K <= 10 (:data:`MAX_ANNOTATED_CLASSES`); one colour scale
    from 0 to 1 is shared by every panel. A strong diagonal means a reliable annotator; mass off the diagonal
    shows which classes it confuses (DESIGN §8).

    Examples
    --------
    >>> import numpy as np
    >>> conf = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.7, 0.3], [0.1, 0.9]]])
    >>> fig = plot_confusion_matrices(conf, classes=["cat", "dog"])
    >>> [a.get_title() for a in fig.axes[:2]]
    ['annotator 0', 'annotator 1']
    """
    conf = _confusion_array(confusion, "confusion")
    n_ann, k = conf.shape[:2]
    if truth is not None:
        truth = _confusion_array(truth, "truth")
        if truth.shape != conf.shape:
            raise ValueError(f"`truth` must have the shape of `confusion` {conf.shape}; got {truth.shape}.")
    names = [str(c) for c in (range(k) if classes is None else classes)]
    if len(names) != k:
        raise ValueError(f"`classes` must name the {k} classes of `confusion`; got {len(names)} names.")
    titles = [f"annotator {j}" for j in range(n_ann)] if annotators is None else [str(a) for a in annotators]
    if len(titles) != n_ann:
        raise ValueError(f"`annotators` must name the {n_ann} annotators of `confusion`; got {len(titles)} names.")
    if ax is None:
        ncols = min(n_ann, _PANELS_PER_ROW)
        nrows = math.ceil(n_ann / ncols)
        side = 2.2 + 0.22 * k
        fig, grid = new_figure(nrows, ncols, figsize=(side * ncols + 0.8, side * nrows), squeeze=False)
        axes = list(grid.ravel())
        for extra in axes[n_ann:]:
            extra.set_visible(False)
        axes = axes[:n_ann]
    else:
        axes = [ax] if not isinstance(ax, (list, tuple, np.ndarray)) else list(np.ravel(ax))
        if len(axes) != n_ann:
            raise ValueError(f"`ax` must hold {n_ann} Axes, one per annotator; got {len(axes)}.")
        fig = axes[0].figure
    annotate = k <= MAX_ANNOTATED_CLASSES
    font = max(5.0, 9.0 - 0.4 * k) - (1.0 if truth is not None else 0.0)
    image = None
    for j, a in enumerate(axes):
        image = a.imshow(conf[j], cmap="Blues", vmin=0.0, vmax=1.0, origin="upper")
        a.set_xticks(np.arange(k), names, rotation=90 if k > 4 else 0, fontsize=8)
        a.set_yticks(np.arange(k), names, fontsize=8)
        a.set_title(titles[j], fontsize=10)
        a.set_xlabel("annotator's label", fontsize=9)
        a.set_ylabel("clean class", fontsize=9)
        if annotate:
            for y in range(k):
                for lab in range(k):
                    value = conf[j, y, lab]
                    text = f"{value:.2f}" if truth is None else f"{value:.2f}\n({truth[j, y, lab]:.2f})"
                    # White text on dark cells, black on light ones.
                    a.text(lab, y, text, ha="center", va="center", fontsize=font,
                           color="white" if value > 0.6 else "black")
    fig.colorbar(image, ax=axes, shrink=0.8, label="P(label | clean class)")
    if title is not None:
        fig.suptitle(title)
    return fig
