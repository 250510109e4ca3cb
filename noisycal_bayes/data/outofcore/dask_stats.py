"""Statistics of a Dask dataframe, computed on its scheduler: :func:`stats_from_dask`."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..binning import Binning
from ._common import (MAX_ANNOTATORS, _check_columns, _check_key_space, _check_layout, _is_equal_mass, _resolve_classes,
                      _resolve_edges, _sorted_ids)
from ._pieces import _AGG, _items_from_rows, _long_rows, _wide_frame_stats
from .stats import SufficientStats, _merge_all


def _dask_item_scores(ddf, layout, item, score) -> np.ndarray:
    """One score per item of a Dask dataframe, on the driver (long layout: one row per item kept)."""
    frame = ddf[[item, score]]
    if layout == "long":
        frame = frame.drop_duplicates(subset=[item])
    return pd.to_numeric(frame[score].compute(), errors="coerce").to_numpy(dtype=np.float64)


def stats_from_dask(ddf, *, layout: str = "long", bins=None, item: str = "item", annotator: str = "annotator",
                    label: str = "label", score: str | None = "score", annotators=None,
                    split_out: int | None = None, classes=None, group: str | None = None) -> SufficientStats:
    """Sufficient statistics of a Dask dataframe, computed on its scheduler (needs the ``dask`` extra).

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        Long layout: one row per response ``item, annotator, label`` [, ``score``] in any order (the
        responses of an item may sit in several partitions). Wide layout: one row per item (an ``item``
        column, one column per annotator with 0/1/NaN, optionally ``score``).
    layout : {"long", "wide"}, default "long"
    bins : Binning, array of edges, or None
        Score bins. ``Binning.equal_mass(k)`` costs a first pass that brings one score per item to the
        driver (8 bytes an item; long layout: ``drop_duplicates`` on item) for exact quantiles, the edges
        the same items would get in memory.
    item, annotator, label, score : str
        Column names.
    annotators : sequence, optional
        Long layout: the annotator ids (skips one pass over the data to collect them; sorted as given
        otherwise sorted like ``AnnotationSet.from_long``). Wide layout: the annotator columns.
    split_out : int, optional
        Output partitions of the ``groupby(item)`` (long layout); default: the input's partition count,
        so the item table stays distributed and no single task holds all items.
    classes, group : optional
        K-class statistics: the class names in index order and the column of each item's group label, as in
        :func:`stats_from_chunks` (digits ``label + 1`` in base ``K + 1``).

    Returns
    -------
    SufficientStats

    Notes
    -----
    Only small per-partition (bin, code) tables reach the driver; duplicate (item, annotator) pairs are found
    exactly (long layout), duplicate items across partitions are not (wide layout). How: docs/foundations.md,
    *How the Dask statistics are computed*.

    Raises
    ------
    ValueError
        As :func:`stats_from_chunks`, raised from the worker that found the problem.
    """
    _check_layout(layout)
    classes = _resolve_classes(classes, bins, group)
    if _is_equal_mass(bins):
        _check_columns(ddf.columns, [item, score])
        bins = Binning.from_edges(_resolve_edges(bins, score, lambda: _dask_item_scores(ddf, layout, item, score)))
    edges = _resolve_edges(bins, score)
    score_col = score if edges is not None else None
    if layout == "wide":
        return _dask_wide_stats(ddf, item=item, score=score, score_col=score_col, annotators=annotators, edges=edges,
                                classes=classes, group=group)
    return _dask_long_stats(ddf, item=item, annotator=annotator, label=label, score_col=score_col,
                            annotators=annotators, split_out=split_out, edges=edges, classes=classes, group=group)


def _dask_wide_stats(ddf, *, item, score, score_col, annotators, edges, classes, group) -> SufficientStats:
    """Wide layout of :func:`stats_from_dask`: each partition reduced to its counts, no shuffle."""
    import dask

    ann_cols = (list(annotators) if annotators is not None
                else [c for c in ddf.columns if c not in (item, score, group)])
    _check_columns(ddf.columns, [item] + ann_cols + ([score_col] if score_col else [])
                   + ([group] if group is not None else []))
    if not ann_cols:
        raise ValueError(f"wide layout needs one column per annotator besides '{item}'; found {list(ddf.columns)}.")
    _check_key_space(len(ann_cols), classes)
    parts = [dask.delayed(_wide_frame_stats)(p, item=item, annotators=ann_cols, score=score_col, edges=edges,
                                             classes=classes, group=group) for p in ddf.to_delayed()]
    return _merge_all(dask.compute(*parts), ann_cols, edges, classes)


def _dask_long_stats(ddf, *, item, annotator, label, score_col, annotators, split_out, edges, classes,
                     group) -> SufficientStats:
    """Long layout of :func:`stats_from_dask`: per-response codes summed per item by a ``groupby(item)``
    (``split_out`` partitions), then each partition of the item table reduced to its counts."""
    import dask

    need = [item, annotator, label] + ([score_col] if score_col else []) + ([group] if group is not None else [])
    _check_columns(ddf.columns, need)
    ddf = ddf[need]
    if annotators is None:
        ann_ids = _sorted_ids(ddf[annotator].dropna().unique().compute().tolist())
    else:
        ann_ids = list(dict.fromkeys(annotators))
    if not ann_ids:
        raise ValueError("no data: no annotator ids found.")
    if classes is None and len(ann_ids) > MAX_ANNOTATORS:
        raise ValueError(f"at most {MAX_ANNOTATORS} annotators are supported; found {len(ann_ids)}.")
    _check_key_space(len(ann_ids), classes)
    ann_index = {a: k for k, a in enumerate(ann_ids)}
    meta = pd.DataFrame({item: pd.Series([], dtype=ddf._meta[item].dtype), "_code": pd.Series([], dtype=np.int64),
                         "_mask": pd.Series([], dtype=np.int64), "_n": pd.Series([], dtype=np.int64)})
    if score_col:
        meta["_smin"] = pd.Series([], dtype=np.float64)
        meta["_smax"] = pd.Series([], dtype=np.float64)
    if group is not None:
        meta["_gmin"] = pd.Series([], dtype=np.int64)
        meta["_gmax"] = pd.Series([], dtype=np.int64)

    def rows_of(frame):
        return _long_rows(frame, item=item, annotator=annotator, label=label, score=score_col, ann_index=ann_index,
                          classes=classes, group=group)[0]

    rows = ddf.map_partitions(rows_of, meta=meta)
    agg = {k: v for k, v in _AGG.items() if k in meta.columns}
    n_out = int(split_out) if split_out is not None else max(1, ddf.npartitions)
    per_item = rows.groupby(item).agg(agg, split_out=n_out)
    parts = [dask.delayed(_items_from_rows)(p, ann_ids, edges, has_score=bool(score_col), classes=classes)
             for p in per_item.to_delayed()]
    return _merge_all(dask.compute(*parts), ann_ids, edges, classes)
