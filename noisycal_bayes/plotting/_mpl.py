"""Lazy matplotlib access: importing :mod:`noisycal_bayes.plotting` does not import matplotlib."""
from __future__ import annotations

# Colours used consistently across figures (colour-blind-safe Okabe-Ito palette).
CORRECTED = "#0072B2"
MAJORITY = "#D55E00"
VOTE_FRACTION = "#E69F00"
ORACLE = "#000000"
TRUTH = "#CC79A7"


def new_figure(nrows: int = 1, ncols: int = 1, *, figsize=(6.0, 4.5), **subplot_kw):
    """A ``Figure`` (not registered with pyplot, so it is never shown) and its axes."""
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("plotting needs matplotlib: pip install 'noisycal_bayes[plot]'") from None
    fig = Figure(figsize=figsize, layout="constrained")
    axes = fig.subplots(nrows, ncols, **subplot_kw)
    return fig, axes
