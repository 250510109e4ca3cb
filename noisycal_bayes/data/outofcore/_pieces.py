"""Statistics of one pandas piece: a wide chunk, the rows of a long chunk, or a table of items' codes."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..._validation import _preview
from ...core.calibration import bin_index
from ..compress import pattern_keys
from ._common import _base, _check_scores_frame, _sorted_ids, group_labels, label_indices
from .stats import SufficientStats


def _item_table_stats(codes: np.ndarray, scores, ids, annotator_ids, edges, n_responses, *, classes=None,
                      groups=None) -> SufficientStats:
    """Statistics of items given their pattern codes (no bin part) and scores (validated here); K classes
    (``classes`` set): codes in base ``K + 1`` and each item's group label ``groups`` (None: one group)."""
    g = np.zeros(codes.size, np.int64) if groups is None else np.asarray(groups, np.int64)
    score_sum = moments = n_groups = None
    if classes is not None:
        n_groups = int(g.max()) + 1 if g.size else 1
    elif scores is not None and edges is not None:
        z = np.asarray(scores, dtype=np.float64)
        _check_scores_frame(z, ids)
        g = bin_index(z, edges).astype(np.int64)
        score_sum = np.bincount(g, weights=z, minlength=edges.size - 1)
        moments = np.stack([z, z * z])  # per item; summed per (bin, pattern) row with the counts
    keys = g * _base(classes) ** len(annotator_ids) + np.asarray(codes, dtype=np.int64)
    return SufficientStats._from_keys(keys, None, annotator_ids, edges, codes.size, n_responses, score_sum, moments,
                                      classes=classes, n_groups=n_groups)


def _wide_frame_stats(frame: pd.DataFrame, *, item, annotators, score, edges, classes=None,
                      group=None) -> SufficientStats:
    """Statistics of one wide chunk: one row per item, one column per annotator (NaN / -1 = missing); K classes:
    class names of ``classes`` and the group label column ``group`` (None: one group)."""
    if len(frame) == 0:
        return None
    ids = frame[item].to_numpy() if item is not None else frame.index.to_numpy()
    if item is not None:
        dup = pd.Series(ids).duplicated(keep=False).to_numpy()
        if dup.any():
            raise ValueError(f"items {_preview(pd.unique(ids[dup]))} appear in more than one row; in wide layout each "
                             "item is one row.")
    lab = np.empty((len(frame), len(annotators)), dtype=np.int8 if classes is None else np.int16)
    for k, a in enumerate(annotators):
        lab[:, k] = label_indices(frame[a], classes, allow_missing=True,
                            where=lambda bad, a=a: f"column {a!r}, items {_preview(ids[bad])}")
    empty = (lab < 0).all(axis=1)
    if empty.any():
        raise ValueError(f"items {_preview(ids[empty])} have no label from any annotator; drop those rows.")
    code = pattern_keys(lab, None, len(annotators), _base(classes))
    z = None
    if edges is not None:
        z = pd.to_numeric(frame[score], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    g = None if group is None else group_labels(frame[group], ids, group)
    return _item_table_stats(code, z, ids, annotators, edges, int((lab >= 0).sum()), classes=classes, groups=g)


def _long_rows(frame: pd.DataFrame, *, item, annotator, label, score, ann_index: dict | None, classes=None,
               group=None):
    """Per-response contributions of a long chunk, validated: code, bit mask, count and score (K classes: group
    label) per row."""
    for col in (item, annotator):
        nulls = frame[col].isna().to_numpy()
        if nulls.any():
            raise ValueError(f"column `{col}` has missing values at rows {_preview(np.asarray(frame.index)[nulls])}.")
    items = frame[item].to_numpy()
    anns = frame[annotator].to_numpy()
    lab = label_indices(frame[label], classes, allow_missing=False,
                  where=lambda bad: f"(item, annotator) {_preview(list(zip(items[bad], anns[bad])))}")
    if ann_index is None:
        ann_ids = _sorted_ids(pd.unique(anns))
        ann_index = {a: k for k, a in enumerate(ann_ids)}
    j = len(ann_index)
    idx = pd.Series(anns, dtype=object).map(ann_index).to_numpy(dtype=np.float64, na_value=np.nan)
    unknown = np.isnan(idx)
    if unknown.any():
        raise ValueError(f"annotators {_preview(pd.unique(anns[unknown]))} are not among the given `annotators` "
                         f"{_preview(list(ann_index))}.")
    idx = idx.astype(np.int64)
    out = pd.DataFrame({item: items,
                        "_code": (lab.astype(np.int64) + 1) * _base(classes) ** (j - 1 - idx),
                        "_mask": np.left_shift(np.int64(1), idx),
                        "_n": np.ones(len(frame), np.int64)})
    if score is not None:
        z = pd.to_numeric(frame[score], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        _check_scores_frame(z, items)
        out["_smin"] = z
        out["_smax"] = z
    if group is not None:
        g = group_labels(frame[group], items, group)
        out["_gmin"] = g
        out["_gmax"] = g
    return out, ann_index


_AGG = {"_code": "sum", "_mask": "sum", "_n": "sum", "_smin": "min", "_smax": "max", "_gmin": "min", "_gmax": "max"}


def _items_from_rows(per_item: pd.DataFrame, annotator_ids, edges, *, has_score, classes=None) -> SufficientStats:
    """Statistics of an item table (index = item; ``_code, _mask, _n`` [, ``_smin, _smax``] [, ``_gmin, _gmax``])."""
    if len(per_item) == 0:
        return None
    ids = per_item.index.to_numpy()
    n = per_item["_n"].to_numpy()
    dup = np.bitwise_count(per_item["_mask"].to_numpy().astype(np.uint64)).astype(np.int64) != n
    if dup.any():
        # A sum of distinct powers of two has one bit per term; a repeated annotator carries into another bit.
        raise ValueError(f"items {_preview(ids[dup])} have more than one label from the same annotator (duplicate "
                         "(item, annotator) pairs): each annotator may label an item once. Aggregate or drop repeated "
                         "responses first.")
    z = _one_per_item(per_item, "_s", ids, "score") if has_score else None
    g = _one_per_item(per_item, "_g", ids, "group") if "_gmin" in per_item.columns else None
    return _item_table_stats(per_item["_code"].to_numpy(), z, ids, annotator_ids, edges, int(n.sum()), classes=classes,
                             groups=g)


def _one_per_item(per_item: pd.DataFrame, prefix: str, ids, what: str) -> np.ndarray:
    """The per-item value of columns ``<prefix>min`` and ``<prefix>max``, which must agree (naming the items)."""
    lo, hi = per_item[f"{prefix}min"].to_numpy(), per_item[f"{prefix}max"].to_numpy()
    diff = lo != hi
    if diff.any():
        raise ValueError(f"items {_preview(ids[diff])} have more than one {what} (e.g. {lo[diff][0]} and "
                         f"{hi[diff][0]}); each item has one {what}.")
    return lo


def _long_frame_stats(frame, *, item, annotator, label, score, edges, classes=None, group=None) -> SufficientStats:
    """Statistics of long rows that hold every response of their items (annotators: those present, sorted)."""
    if len(frame) == 0:
        return None
    rows, ann_index = _long_rows(frame, item=item, annotator=annotator, label=label,
                                 score=score if edges is not None else None, ann_index=None, classes=classes,
                                 group=group)
    agg = {k: v for k, v in _AGG.items() if k in rows.columns}
    per_item = rows.groupby(item, sort=False).agg(agg)
    return _items_from_rows(per_item, list(ann_index), edges, has_score=edges is not None, classes=classes)
