"""K-class figures: confusion matrices as heat maps, and the corrected top-label reliability diagram."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ._mpl import MAJORITY, VOTE_FRACTION, new_figure
from .reliability import reliability_diagram

#: Largest number of classes whose cells are annotated with their values.
MAX_ANNOTATED_CLASSES = 10
_PANELS_PER_ROW = 4
#: Colours of the naive curves, in the order given (majority vote and vote distribution first, as in the binary plot).
_NAIVE_COLOURS = (MAJORITY, VOTE_FRACTION, "#009E73", "#56B4E9", "#F0E442", "0.45")


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
