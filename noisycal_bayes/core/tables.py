"""Array containers of the core formulas: sparse responses, compressed pattern rows and NC-ECE statistics.

Plain :class:`~typing.NamedTuple` s of arrays (NumPy or JAX), so they pass through ``jax.jit`` and ``jax.vmap`` as
pytrees. The data layer builds them (:mod:`noisycal_bayes.data`); the formulas of :mod:`noisycal_bayes.core`
and the models read them.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["BinStats", "PatternTable", "Responses", "SparseTable"]


class Responses(NamedTuple):
    """Sparse labels: one entry per response, sorted by item then annotator.

    Attributes
    ----------
    item : int array of shape (n_responses,)
        Row index ``i_r`` in ``0 .. n_items - 1`` (int32 in an :class:`~noisycal_bayes.data.AnnotationSet`).
    annotator : int array of shape (n_responses,)
        Column index ``j_r`` in ``0 .. n_annotators - 1`` (int32).
    label : int array of shape (n_responses,)
        ``A_r`` in {0, 1} (int8), or a class index in ``0 .. K - 1`` for K classes.

    Repeated (item, annotator) pairs sit next to each other, in the order they were given.
    """

    item: object
    annotator: object
    label: object


class PatternTable(NamedTuple):
    """Compressed rows: ``patterns`` (R, J) int32 in ``-1..K-1`` (-1 missing), ``group`` (R,) int32, ``gold``
    (R,) int32 (-1 unknown), ``counts`` (R,) float (items with that row; 0 for padding)."""

    patterns: object
    group: object
    gold: object
    counts: object


class SparseTable(NamedTuple):
    """Responses sorted by item: ``item``, ``annotator``, ``label`` (n_responses,) int32; ``item_group`` and
    ``gold`` (n_items,) int32 (gold -1 unknown)."""

    item: object
    annotator: object
    label: object
    item_group: object
    gold: object


class BinStats(NamedTuple):
    """Sufficient statistics of NC-ECE; rows are distinct (bin, missingness-mask) pairs.

    bin : (n_rows,) int32 bin of the row
    mask : (n_rows, n_annotators) bool, which annotators responded
    count : (n_rows,) number (or bootstrap weight) of items
    label_sum : (n_rows, n_annotators) sum of ``A_ij`` over the row's items (0 where not observed)
    score_sum : (n_rows,) sum of ``Z_i``
    n_bins : int (static)
    """

    bin: np.ndarray
    mask: np.ndarray
    count: np.ndarray
    label_sum: np.ndarray
    score_sum: np.ndarray
    n_bins: int
