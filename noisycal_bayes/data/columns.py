"""Responses as dense columns, one per (annotator, repeat): the table the plug-in NC-ECE sums run over."""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from ..warnings import DataWarning
from .annotations import AnnotationSet

__all__ = ["MAX_COLUMN_CELLS", "ResponseColumns", "response_columns"]


class ResponseColumns(NamedTuple):
    """The labels the plug-in sums run over: one column per (annotator, repeat) of a usable annotator.

    ``labels`` (n_kept_items, n_cols) int8 with -1 = missing; ``annotator`` (n_cols,) the annotator of each
    column (its channel); ``keep`` (n_items,) the items with at least one usable response;
    ``dropped_annotators`` the annotators left out (not usable).
    """

    labels: np.ndarray
    annotator: np.ndarray
    keep: np.ndarray
    dropped_annotators: np.ndarray


#: Above this many (item x column) cells the dense plug-in table is refused (int8: 1 byte each).
MAX_COLUMN_CELLS = 400_000_000


def response_columns(data: AnnotationSet, usable: np.ndarray, *, func: str = "nc_ece") -> ResponseColumns:
    """Responses of usable annotators as columns: column ``(j, k)`` holds annotator ``j``'s ``k``-th label of
    each item, so a repeated label is one more conditionally independent response with ``j``'s channel (the
    model's assumption), weighted like any other response of ``j``. Without repeats and with every annotator
    usable this is ``data.labels`` itself. Items left without a usable response are dropped with a warning.
    """
    usable = np.asarray(usable, dtype=bool)
    n, j = data.n_items, data.n_annotators
    if not usable.any():
        n_labels = np.bincount(np.asarray(data.responses[1]), minlength=j)
        raise ValueError(f"{func}: no annotator's labels are usable: the gap interval of every annotator "
                         f"({_ids(data.annotator_ids, np.arange(j))}) contains 0, so no label says anything about the "
                         f"clean label and the NC-ECE is undefined. There are {n} items and {int(n_labels.sum())} "
                         f"labels ({int(n_labels.min())}-{int(n_labels.max())} per annotator): too few to tell the "
                         "annotators from coin flips. Add items or labels per annotator, or pass known channels.")
    if usable.all() and not data.has_repeats:
        return ResponseColumns(data.labels, np.arange(j), np.ones(n, bool), np.zeros(0, np.int64))
    item, ann, lab = (np.asarray(v) for v in data.responses)
    sel = usable[ann]
    item, ann, lab = item[sel], ann[sel], lab[sel]
    # Responses are sorted by item then annotator, so a pair's repeats are adjacent: rank them.
    pair = item.astype(np.int64) * j + ann
    idx = np.arange(pair.size)
    start = np.ones(pair.size, bool)
    start[1:] = pair[1:] != pair[:-1]
    rank = idx - np.maximum.accumulate(np.where(start, idx, 0))
    n_cols = np.zeros(j, np.int64)
    np.maximum.at(n_cols, ann, rank + 1)
    offset = np.concatenate([[0], np.cumsum(n_cols)[:-1]])
    keep = np.bincount(item, minlength=n) > 0
    if keep.sum() * n_cols.sum() > MAX_COLUMN_CELLS:
        raise ValueError(f"{func}: the plug-in propagation holds a dense (items x annotator columns) table, here "
                         f"{int(keep.sum())} x {int(n_cols.sum())}; that is too large. Evaluate a subset of the items.")
    new_item = np.cumsum(keep) - 1
    labels = np.full((int(keep.sum()), int(n_cols.sum())), -1, np.int8)
    labels[new_item[item], offset[ann] + rank] = lab
    dropped = np.flatnonzero(~usable)
    if (~keep).any():
        warnings.warn(f"{func}: {int((~keep).sum())} of {n} items were labelled only by annotators whose gap interval "
                      f"contains 0 ({_ids(data.annotator_ids, dropped)}); they carry no usable label and are left out "
                      "of the NC-ECE.", DataWarning, stacklevel=4)
    return ResponseColumns(labels, np.repeat(np.arange(j), n_cols), keep, dropped)


def _ids(ids, idx, shown: int = 5) -> str:
    names = [str(ids[k]) for k in idx[:shown]]
    return ", ".join(names) + (f" and {len(idx) - shown} more" if len(idx) > shown else "")
