"""``NoisyCalibrationDisplay``: the corrected reliability diagram in the style of scikit-learn's
``CalibrationDisplay``, with the noise-corrected frequency and its band beside the naive majority-vote curve.
Details: docs/foundations.md, *noisycal_bayes.plotting.display*.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from .._validation import binary_only, check_level
from ._mpl import CORRECTED, MAJORITY, new_figure
from .reliability import _edges_and_table, reliability_table

_BAND_COLUMNS = ("band_lower", "band_upper")


class NoisyCalibrationDisplay:
    """Corrected reliability diagram with its interval band, beside the naive (majority-vote) one.

    Build it with :meth:`from_predictions` or :meth:`from_evaluation`; the constructor takes the numbers
    already computed.

    Parameters
    ----------
    table : DataFrame with one row per bin
        Columns ``lower, upper, count, mean_score, corrected_frequency`` and, for the band,
        ``band_lower, band_upper`` (NaN or absent: no band).
    edges : array-like of shape (n_bins + 1,)
        Bin edges of ``table``.
    naive_table : DataFrame, optional
        The naive curve on the same bins: columns ``count, mean_score, frequency`` (as returned by
        :func:`~noisycal_bayes.plotting.reliability_table` of the majority vote). None: no naive curve.
    level : float, optional
        Level of the band, for the legend.
    estimator_name : str, optional
        Name of the classifier, for the legend and title.
    naive_name : str, default "majority vote"
        What the naive labels are, for the legend.

    Attributes
    ----------
    prob_pred : ndarray of shape (n_nonempty_bins,)
        Mean score of each non-empty bin (the x values; scikit-learn's name).
    prob_true : ndarray of shape (n_nonempty_bins,)
        Corrected frequency of each non-empty bin (the y values).
    band_lower, band_upper : ndarray of shape (n_nonempty_bins,) or None
        The ``level`` band of ``prob_true`` (None without one).
    naive_prob_pred, naive_prob_true : ndarray of shape (n_nonempty_bins,) or None
        The naive curve.
    line_ : matplotlib Line2D
        The corrected curve (after :meth:`plot`).
    band_ : matplotlib PolyCollection or None
        The interval band.
    naive_line_ : matplotlib Line2D or None
        The naive curve.
    ref_line_ : matplotlib Line2D or None
        The diagonal of perfect calibration.
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> table = pd.DataFrame({"lower": [0.0, 0.5], "upper": [0.5, 1.0], "count": [10, 10],
    ...                       "mean_score": [0.25, 0.75], "corrected_frequency": [0.3, 0.7],
    ...                       "band_lower": [0.2, 0.6], "band_upper": [0.4, 0.8]})
    >>> disp = NoisyCalibrationDisplay(table, [0.0, 0.5, 1.0], level=0.9).plot()
    >>> disp.line_.get_ydata().tolist()
    [0.3, 0.7]
    """

    def __init__(self, table, edges, *, naive_table=None, level=None, estimator_name=None,
                 naive_name: str = "majority vote"):
        self.edges, self.table = _edges_and_table(_with_edges(table, edges))
        n_bins = self.edges.size - 1
        if len(self.table) != n_bins:
            raise ValueError(f"`table` has {len(self.table)} rows but `edges` define {n_bins} bins; pass one row per "
                             "bin.")
        self.level = None if level is None else check_level(level)
        self.estimator_name = estimator_name
        self.naive_name = naive_name
        ok = self.table["count"].to_numpy() > 0
        self.prob_pred = self.table["mean_score"].to_numpy(dtype=np.float64)[ok]
        self.prob_true = self.table["corrected_frequency"].to_numpy(dtype=np.float64)[ok]
        self.band_lower = self.band_upper = None
        if all(c in self.table.columns for c in _BAND_COLUMNS):
            lo = self.table["band_lower"].to_numpy(dtype=np.float64)[ok]
            hi = self.table["band_upper"].to_numpy(dtype=np.float64)[ok]
            if np.isfinite(lo).any():
                self.band_lower, self.band_upper = lo, hi
        self.naive_table = naive_table
        self.naive_prob_pred = self.naive_prob_true = None
        if naive_table is not None:
            missing = [c for c in ("count", "mean_score", "frequency") if c not in naive_table.columns]
            if missing or len(naive_table) != n_bins:
                raise ValueError(f"`naive_table` needs {n_bins} rows (one per bin) and columns count, mean_score, "
                                 f"frequency; got {len(naive_table)} rows, missing {missing}.")
            nok = naive_table["count"].to_numpy() > 0
            self.naive_prob_pred = naive_table["mean_score"].to_numpy(dtype=np.float64)[nok]
            self.naive_prob_true = naive_table["frequency"].to_numpy(dtype=np.float64)[nok]

    def plot(self, *, ax=None, name=None, ref_line: bool = True):
        """Draw the diagram.

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Draw here; otherwise a new figure (not registered with pyplot) is made.
        name : str, optional
            Classifier name for the legend and title (default ``estimator_name``).
        ref_line : bool, default True
            Draw the diagonal of perfect calibration.

        Returns
        -------
        self
        """
        if ax is None:
            fig, ax = new_figure(figsize=(5.5, 4.5))
        else:
            fig = ax.figure
        name = self.estimator_name if name is None else name
        self.ref_line_ = None
        if ref_line:
            (self.ref_line_,) = ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls=":", label="perfect calibration")
        self.band_ = None
        low, high = [0.0, np.nanmin(self.prob_true, initial=0.0)], [1.0, np.nanmax(self.prob_true, initial=1.0)]
        if self.band_lower is not None:
            band = "interval" if self.level is None else f"{100 * self.level:.0f}% interval"
            self.band_ = ax.fill_between(self.prob_pred, self.band_lower, self.band_upper, color=CORRECTED, alpha=0.2,
                                         lw=0, label=f"noise-corrected {band}")
            low.append(np.nanmin(self.band_lower, initial=0.0))
            high.append(np.nanmax(self.band_upper, initial=1.0))
        (self.line_,) = ax.plot(self.prob_pred, self.prob_true, "o-", color=CORRECTED, lw=1.8, ms=5,
                                label="noise-corrected" if name is None else f"{name}: noise-corrected")
        self.naive_line_ = None
        if self.naive_prob_pred is not None:
            (self.naive_line_,) = ax.plot(self.naive_prob_pred, self.naive_prob_true, "s--", color=MAJORITY, lw=1.2,
                                          ms=4, label=f"naive: {self.naive_name}")
        pad = 0.05
        ax.set_xlim(0, 1)
        ax.set_ylim(min(low) - pad, max(high) + pad)
        ax.set_xlabel("score (mean per bin)")
        ax.set_ylabel("frequency of the positive class")
        ax.set_title("Reliability diagram" if name is None else f"Reliability diagram: {name}")
        ax.legend(loc="upper left", fontsize=8, frameon=False)
        self.ax_, self.figure_ = ax, fig
        return self

    @classmethod
    def from_predictions(cls, scores, data, fit, *, bins=10, level: float = 0.9, weights="iv", seed: int = 0,
                         n_draws=None, ties: str = "positive", name=None, ax=None, ref_line: bool = True):
        """Corrected reliability diagram of ``scores`` judged by ``data``'s annotators with channels from ``fit``.

        Parameters
        ----------
        scores : array-like of shape (n_items,), in [0, 1]
            The classifier's scores of ``data``'s items (e.g. ``data.scores``, or recalibrated scores).
        data : AnnotationSet
            Labels of shape (n_items, n_annotators).
        fit : FitResult or Channel
            ``fit_nuts(...)`` (posterior draws), ``fit_em(...)`` / ``fit_map(...)`` or a known Channel, as
            :func:`noisycal_bayes.propagate.posterior_reliability` takes it (which computes the frequencies,
            bands and the naive curve).
        bins : int or Binning, default 10
            Evaluation bins (an int means equal width).
        level : float, default 0.9
            Level of the band.
        weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,), default "iv"
        seed : int, default 0
        n_draws : int, optional
            Draws of the propagation (default: every posterior draw, or 1000 for a point estimate).
        ties : {"positive", "negative"}, default "positive"
            How the majority vote breaks ties (the naive curve).
        name : str, optional
            Classifier name for the legend.
        ax : matplotlib Axes, optional
        ref_line : bool, default True

        Returns
        -------
        NoisyCalibrationDisplay
            Already plotted.
        """
        binary_only(scores, "NoisyCalibrationDisplay.from_predictions", "plot_top_label_reliability", name="scores")
        binary_only(data, "NoisyCalibrationDisplay.from_predictions", "plot_top_label_reliability")
        from ..propagate import posterior_reliability

        if not hasattr(data, "with_scores") or not hasattr(data, "majority_vote"):
            raise ValueError(f"`data` must be an AnnotationSet (the annotators' labels); got {type(data).__name__}.")
        evaluated = data.with_scores(scores)
        rel = posterior_reliability(evaluated, fit, bins=bins, weights=weights, level=level, seed=seed,
                                    n_draws=n_draws, ties=ties)
        table = rel.rename(columns={"frequency_lower": "band_lower", "frequency_upper": "band_upper"})
        naive = rel[["count", "mean_score", "majority_vote_frequency"]].rename(
            columns={"majority_vote_frequency": "frequency"})
        edges = np.append(rel["lower"].to_numpy(), rel["upper"].to_numpy()[-1])
        disp = cls(table, edges, naive_table=naive, level=rel.attrs.get("level", level), estimator_name=name,
                   naive_name=_naive_name(evaluated, ties))
        return disp.plot(ax=ax, ref_line=ref_line)

    @classmethod
    def from_evaluation(cls, evaluation, *, ties: str = "positive", name=None, ax=None, ref_line: bool = True):
        """The diagram of an ``Evaluation`` (returned by :func:`noisycal_bayes.evaluate`), from its table.

        Reads ``evaluation.table`` (``corrected_frequency``, ``band_lower``, ``band_upper`` per bin),
        ``evaluation.edges``, ``evaluation.level`` and ``evaluation.data`` (for the majority-vote curve;
        none when it is None). Nothing is recomputed but the naive curve.

        Parameters
        ----------
        evaluation : Evaluation
        ties, name, ax, ref_line
            As in :meth:`from_predictions`.

        Returns
        -------
        NoisyCalibrationDisplay
            Already plotted.
        """
        missing = [a for a in ("table", "edges", "level") if not hasattr(evaluation, a)]
        if missing:
            raise ValueError(f"`evaluation` must be the Evaluation returned by `noisycal_bayes.evaluate`; this "
                             f"{type(evaluation).__name__} has no attribute(s) {missing}.")
        data = getattr(evaluation, "data", None)
        naive = naive_name = None
        edges = np.asarray(evaluation.edges, dtype=np.float64)
        if data is not None:
            naive = reliability_table(data.require_scores(), data.majority_vote(ties=ties), edges)
            naive_name = _naive_name(data, ties)
        disp = cls(evaluation.table, edges, naive_table=naive, level=evaluation.level, estimator_name=name,
                   naive_name=naive_name or "majority vote")
        return disp.plot(ax=ax, ref_line=ref_line)


def _with_edges(table, edges):
    if not isinstance(table, pd.DataFrame):
        raise ValueError(f"`table` must be a DataFrame of per-bin values; got {type(table).__name__}.")
    edges = np.asarray(edges, dtype=np.float64)
    if edges.ndim != 1 or edges.size < 2:
        raise ValueError(f"`edges` must have shape (n_bins + 1,) with n_bins >= 1; got shape {edges.shape}.")
    return SimpleNamespace(table=table, edges=edges)  # what _edges_and_table reads


def _naive_name(data, ties: str) -> str:
    n_ties = data.n_ties()
    return f"majority vote, {n_ties} ties -> {1 if ties == 'positive' else 0}" if n_ties else "majority vote"
