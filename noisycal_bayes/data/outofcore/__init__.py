"""Sufficient statistics of data that does not fit in memory: Dask, chunked CSV and Parquet readers.

The counts of distinct (score bin, response pattern) rows are sums, so they are computed piece by piece and added
(:class:`SufficientStats`, :meth:`SufficientStats.merge`); the fitters accept them in place of an ``AnnotationSet``.
Keys are ``bin * 3**J + code`` (base ``K + 1`` for K classes), in the order of the in-memory compression. Details:
docs/foundations.md, *noisycal_bayes.data.outofcore*.
"""
from __future__ import annotations

from ._common import MAX_ANNOTATORS, class_groups, group_labels, label_indices
from .chunks import read_stats_csv, read_stats_parquet, stats_from_chunks
from .dask_stats import stats_from_dask
from .stats import MulticlassSufficientStats, SufficientStats, row_moments

# Pickles and reprs name the package, where the class has always been importable from.
SufficientStats.__module__ = __name__
MulticlassSufficientStats.__module__ = __name__

__all__ = ["MulticlassSufficientStats", "SufficientStats", "read_stats_csv", "read_stats_parquet", "stats_from_chunks",
           "stats_from_dask"]
