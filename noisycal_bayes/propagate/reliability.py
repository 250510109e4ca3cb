"""Corrected reliability diagram data: posterior clean frequency per bin with bands, beside the naive curves."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..data import AnnotationSet, SufficientStats
from .nc_ece import DEFAULT_METHOD, posterior_nc_ece
from .._validation import binary_only


def posterior_reliability(data, fit, *, bins=None, weights="iv", level: float = 0.9, seed: int = 0,
                          method: str = DEFAULT_METHOD, bootstrap: bool = True, n_draws=None,
                          ties: str = "positive") -> pd.DataFrame:
    """Per evaluation bin: mean score, posterior clean frequency with a band, and the naive frequencies.

    Parameters
    ----------
    data, fit, bins, weights, level, seed, method, bootstrap, n_draws
        As in :func:`~noisycal_bayes.propagate.posterior_nc_ece` (the same draws give the bands):
        ``data`` an AnnotationSet or SufficientStats (whose response patterns give the naive curves),
        ``bins`` by default 10 equal-width bins, or the statistics' own.
    ties : {"positive", "negative"}
        How majority-vote ties are broken for the naive curve.

    Returns
    -------
    DataFrame, one row per bin
        ``bin, lower, upper`` (edges), ``count``, ``mean_score``, ``corrected_frequency`` (posterior mean
        of the bin's clean frequency), ``frequency_lower``, ``frequency_upper`` (equal-tailed ``level``
        band), ``residual``, ``residual_lower``, ``residual_upper``, ``majority_vote_frequency`` and
        ``vote_fraction_frequency`` (the naive curves: frequency of the majority label and mean vote
        fraction; NaN in empty bins). ``attrs`` records ``level``, ``method``, ``target`` and
        ``uncertainty``.

    Notes
    -----
    The table has the columns :func:`noisycal_bayes.plotting.reliability_diagram` reads::

        table = posterior_reliability(data, fit)
        reliability_diagram(table, lower=table["frequency_lower"], upper=table["frequency_upper"],
                            level=table.attrs["level"], data=data)

    Majority vote and vote fractions estimate ``P(majority = 1 | B_k)`` and ``mean_j (a_j + delta_j m)``,
    not the clean frequency: they are drawn beside it to show the bias (DESIGN §1, job 6).

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(1000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> table = posterior_reliability(sim.data, sim.channel, method="plugin", n_draws=100, bins=5)
    >>> list(table.columns[-2:])
    ['majority_vote_frequency', 'vote_fraction_frequency']
    """
    binary_only(data, "posterior_reliability",
                "posterior_top_label_nc_ece (its reliability table) or posterior_classwise_nc_ece")
    res = posterior_nc_ece(data, fit, bins=bins, weights=weights, level=level, seed=seed, method=method,
                           bootstrap=bootstrap, n_draws=n_draws)
    table = res.table.copy()
    n_bins = res.edges.size - 1
    if isinstance(data, SufficientStats):
        # One row per (bin, pattern), weighted by its count: the votes of a pattern are those of its items.
        idx, weight = np.asarray(data.group), np.asarray(data.counts)
        votes = AnnotationSet.from_wide(np.where(data.patterns < 0, np.nan, data.patterns))
    else:
        idx, weight, votes = np.searchsorted(res.edges[1:-1], data.scores, side="right"), None, data
    count = np.bincount(idx, weights=weight, minlength=n_bins).astype(np.float64)
    w = 1.0 if weight is None else weight
    with np.errstate(invalid="ignore", divide="ignore"):
        table["majority_vote_frequency"] = np.bincount(idx, weights=w * votes.majority_vote(ties=ties),
                                                       minlength=n_bins) / count
        table["vote_fraction_frequency"] = np.bincount(idx, weights=w * votes.vote_fraction(), minlength=n_bins) / count
    table.attrs.update(level=res.level, method=res.method, target=res.target, uncertainty=res.uncertainty)
    return table
