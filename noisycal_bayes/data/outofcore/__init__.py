"""Sufficient statistics of data that does not fit in memory: Dask, chunked CSV and Parquet readers.

The grouped Dawid-Skene likelihood depends on the responses only through the counts of distinct
(score bin, response pattern) rows. Counts are sums, so they can be computed piece by piece and added:
:class:`SufficientStats` holds them (with the annotator ids, the score edges, per-bin score sums and, per
row, the sums of the scores and of the squared scores, which the Bayesian bootstrap of
:func:`~noisycal_bayes.propagate.posterior_nc_ece` needs),
:meth:`SufficientStats.merge` adds them, and the fitters (:func:`~noisycal_bayes.inference.fit_em`,
:func:`~noisycal_bayes.inference.fit_map`, :func:`~noisycal_bayes.inference.fit_nuts`) accept them in
place of an :class:`~noisycal_bayes.AnnotationSet` for the grouped models.

Sources:

- :func:`stats_from_dask`: a Dask dataframe (the optional ``dask`` extra), long or wide layout. Long
  layout: each response contributes ``(label + 1) 3**(J - 1 - j)`` (annotator ``j`` of ``J``), the
  per-item sum (a ``groupby(item)`` with ``split_out``, so the item table stays distributed) is the
  base-3 code of the item's pattern; then each partition of the item table counts (bin, code) and the
  small tables are merged on the driver. Wide layout: no shuffle, each partition is counted directly.
- :func:`stats_from_chunks`, :func:`read_stats_csv`, :func:`read_stats_parquet`: one pass over pandas
  chunks (``pandas.read_csv(chunksize=...)``, ``pyarrow`` ``to_batches``). Wide layout, or long layout
  whose rows are sorted by item (checked; otherwise use the Dask path, which shuffles).

Pattern codes: digit ``j`` (the first annotator most significant) is 0 for a missing response, 1 for
label 0 and 2 for label 1; a row's key is ``bin * 3**J + code``. Rows are kept in increasing key order,
which is the order of :func:`~noisycal_bayes.data.compress_patterns`, so the statistics of a data set
are identical, row for row, to the in-memory compression.

K classes (``classes=`` to a source, or K-class data to ``from_annotations``): the same sums in base ``K + 1``
(digit ``k + 1`` for class ``k``; K = 2 is the binary key), counted per group label instead of score bin
(a ``group`` column, an int per item), in :class:`MulticlassSufficientStats`; ``fit_em`` fits them, equal to the
fit of the items. Crowds whose ``n_groups (K + 1)**J`` keys exceed int64 do not compress: their responses are
fitted in memory, or on Dask by :func:`~noisycal_bayes.inference.dask_em.fit_em_dask` (``classes=``).

Modules (public names are re-exported here, so ``noisycal_bayes.data.outofcore.X`` works for each):

- :mod:`._common`: pattern keys, edge resolution and the validation shared by every source (its
  :func:`label_indices` and :func:`group_labels` also read the K-class columns of ``fit_em_dask``, and
  :func:`class_groups` is the K-class fits' group rule).
- :mod:`.stats`: :class:`SufficientStats`, its K-class subclass :class:`MulticlassSufficientStats`, and
  :func:`row_moments`.
- :mod:`._pieces`: statistics of one pandas piece (wide chunk, long rows, item table).
- :mod:`.chunks`: :func:`stats_from_chunks`, :func:`read_stats_csv`, :func:`read_stats_parquet`.
- :mod:`.dask_stats`: :func:`stats_from_dask`.
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
