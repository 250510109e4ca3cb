"""The checks and alignments behind :class:`~noisycal_bayes.data.AnnotationSet`'s constructors: positions, labels,
ids, scores, probabilities and gold labels read from arrays, long or wide tables, each with messages that name the
offending entries (the container itself is :mod:`noisycal_bayes.data.annotations`).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from .._validation import PROBS_TOL, _preview, check_scores
from ..core.tables import Responses
from ..warnings import DataWarning
from .classes import MISSING, _class_name, _encode

_INT32_MAX = int(np.iinfo(np.int32).max)


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr = np.array(arr, copy=True)
    arr.setflags(write=False)
    return arr


def _frozen(arr: np.ndarray) -> np.ndarray:
    """``arr`` itself, made read-only (for arrays this module has just created: no copy)."""
    arr.setflags(write=False)
    return arr


def _factorize(values: pd.Series):
    """Codes and sorted unique ids; falls back to first-appearance order for unsortable mixed ids."""
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:
        codes, uniques = pd.factorize(values, sort=False)
    return codes, np.asarray(uniques, dtype=object)


def _check_gold(gold, item_ids) -> np.ndarray:
    """Gold labels of shape (n_items,): 0, 1, or -1 / NaN where unknown; offending items named."""
    arr = np.asarray(gold)
    if arr.dtype.kind in "iub" and arr.shape == (len(item_ids),):
        # Integer input (the fast route of from_responses): no conversion through objects.
        bad = (arr != -1) & (arr != 0) & (arr != 1)
        if not bad.any():
            return arr.astype(np.int8)
    raw = np.asarray(gold, dtype=object)
    if raw.shape != (len(item_ids),):
        raise ValueError(f"`gold` must have shape ({len(item_ids)},), one entry per item (-1 or NaN where unknown); "
                         f"got {raw.shape}.")
    values = pd.to_numeric(pd.Series(raw), errors="coerce").to_numpy(dtype=np.float64)
    values = np.where(pd.isna(raw), -1.0, values)
    bad = ~np.isin(values, (-1.0, 0.0, 1.0))
    if bad.any():
        raise ValueError(f"`gold` must hold 0, 1, or -1/NaN for unknown; got {_preview(pd.unique(raw[bad])[:5])} "
                         f"at items {_preview(np.asarray(item_ids)[bad])}.")
    return values.astype(np.int8)


def _align_scores(scores, item_ids: np.ndarray, *, item: str = "item", score: str = "score") -> np.ndarray:
    """Scores aligned to ``item_ids`` from a Series (indexed by item) or an (item, score) DataFrame."""
    if isinstance(scores, pd.DataFrame):
        missing_cols = [c for c in (item, score) if c not in scores.columns]
        if missing_cols:
            raise ValueError(f"`scores` is missing column(s) {missing_cols}; it has {list(scores.columns)}.")
        series = pd.Series(scores[score].to_numpy(), index=scores[item].to_numpy())
    elif isinstance(scores, pd.Series):
        series = scores
    else:
        raise ValueError("`scores` must be a DataFrame with item and score columns or a Series indexed by item.")
    if series.index.has_duplicates:
        dups = series.index[series.index.duplicated()].unique()
        raise ValueError(f"`scores` lists items {_preview(dups)} more than once.")
    values = pd.to_numeric(series, errors="coerce")
    non_numeric = values.isna() & series.notna()
    if non_numeric.any():
        raise ValueError(f"`scores` must be numeric; got {_preview(series[non_numeric].unique()[:5])} "
                         f"at items {_preview(series.index[non_numeric])}.")
    lookup = pd.Series(values.to_numpy(dtype=np.float64), index=pd.Index(series.index, dtype=object))
    wanted = pd.Index(item_ids, dtype=object)
    absent = ~wanted.isin(lookup.index)
    if absent.any():
        raise ValueError(f"annotated items {_preview(wanted[absent])} have no score. "
                         "Score every annotated item, or drop those items.")
    extra = int((~lookup.index.isin(wanted)).sum())
    if extra:
        warnings.warn(f"{extra} scored items have no annotation and were dropped.", DataWarning, stacklevel=3)
    return check_scores(lookup.reindex(wanted).to_numpy(), ids=item_ids)


def _dense_to_responses(dense: np.ndarray, observed: np.ndarray, *, cells: int = 1 << 22) -> Responses:
    """Read-only responses (int32, int32, int8) of a dense (n_items, n_annotators) matrix, sorted by item.

    np.nonzero walks the matrix row by row, so the triples come out sorted by item, then annotator. It
    returns int64 positions: converting blocks of about ``cells`` cells at a time keeps those temporaries
    small (a 1e7 x 3 matrix would otherwise need 0.4 GB of them).
    """
    n, j = dense.shape
    n_obs = int(np.count_nonzero(observed))
    item = np.empty(n_obs, dtype=np.int32)
    ann = np.empty(n_obs, dtype=np.int32)
    lab = np.empty(n_obs, dtype=np.int8)
    step = max(1, cells // j)
    at = 0
    for start in range(0, n, step):
        ii, jj = np.nonzero(observed[start:start + step])
        stop = at + ii.size
        item[at:stop] = ii + start
        ann[at:stop] = jj
        lab[at:stop] = dense[start:start + step][ii, jj]
        at = stop
    return Responses(_frozen(item), _frozen(ann), _frozen(lab))


def _checked_positions(item, annotator, label: np.ndarray, n_items, n_annotators, item_ids, annotator_ids):
    """``(item, annotator, n_items, n_annotators, item_ids, annotator_ids)`` of ``from_responses``, checked.

    Positions are integer arrays as long as ``label`` and in range; the counts default to the number of ids,
    else the largest position + 1; ids default to the positions and are object arrays, checked unique.
    """
    it = _positions_array(item, "item")
    an = _positions_array(annotator, "annotator")
    if not (it.shape == an.shape == label.shape):
        raise ValueError(f"`item`, `annotator` and `label` must have the same length; got {it.size}, {an.size} "
                         f"and {label.size}.")
    if it.size == 0:
        raise ValueError("no responses: `item`, `annotator` and `label` are empty.")
    n_items = _count(n_items, item_ids, it, "n_items", "item_ids", "item")
    n_annotators = _count(n_annotators, annotator_ids, an, "n_annotators", "annotator_ids", "annotator")
    _check_range(it, n_items, "item", "n_items")
    _check_range(an, n_annotators, "annotator", "n_annotators")
    ids = []
    for given, n, what in ((item_ids, n_items, "item_ids"), (annotator_ids, n_annotators, "annotator_ids")):
        if given is not None:
            _check_unique_ids(given, what)
        ids.append(np.arange(n).astype(object) if given is None else np.asarray(given, dtype=object))
    return it, an, n_items, n_annotators, ids[0], ids[1]


def _check_long(df, arg: str, item: str, annotator: str, label: str, gold, *, labels_too: bool) -> None:
    """What ``from_long`` of both kinds checks first: a non-empty DataFrame with the columns, ids never missing.

    ``labels_too``: a missing label is an error here too (the binary set names it as a label that is not 0/1).
    """
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"`{arg}` must be a pandas DataFrame in long format; got {type(df).__name__}.")
    missing_cols = [c for c in (item, annotator, label) if c not in df.columns]
    if isinstance(gold, str) and gold not in df.columns:
        missing_cols.append(gold)
    if missing_cols:
        raise ValueError(f"`{arg}` is missing column(s) {missing_cols}; it has {list(df.columns)}. Pass item=, "
                         "annotator=, label= (and gold=) to name your columns.")
    if len(df) == 0:
        raise ValueError(f"`{arg}` is empty.")
    for col in (item, annotator, label) if labels_too else (item, annotator):
        nulls = df[col].isna().to_numpy()
        if nulls.any():
            hint = " Drop rows without a label." if col == label else ""
            raise ValueError(f"column `{col}` has missing values at rows {_preview(np.asarray(df.index)[nulls])}.{hint}")


def _wide_matrix(labels, annotators, *, dtype):
    """``(values, item ids, annotator ids)`` of a wide (n_items, n_annotators) matrix, for ``from_wide``.

    A DataFrame's index gives the item ids and its columns the annotator ids (``annotators`` overrides them);
    an array gives ``0, 1, ...``. ``dtype=None`` reads numbers (pd.NA of nullable columns as NaN), ``object``
    reads class names (missing cells as None).
    """
    if isinstance(labels, pd.DataFrame):
        item_ids = labels.index.to_numpy(dtype=object)
        ann_ids = np.asarray(labels.columns, dtype=object)
        values = labels.to_numpy(na_value=np.nan) if dtype is None else labels.to_numpy(dtype=dtype, na_value=None)
    else:
        values = np.asarray(labels, dtype=dtype)
        if values.ndim != 2:
            raise ValueError(f"`labels` must have shape (n_items, n_annotators); got {values.shape}.")
        item_ids = np.arange(values.shape[0]).astype(object)
        ann_ids = np.arange(values.shape[1]).astype(object)
    if annotators is not None:
        ann_ids = np.asarray(annotators, dtype=object)
    if values.ndim != 2 or values.size == 0:
        raise ValueError(f"`labels` is empty (shape {values.shape}).")
    if len(ann_ids) != values.shape[1]:
        raise ValueError(f"`annotators` has {len(ann_ids)} names for {values.shape[1]} label columns.")
    return values, item_ids, ann_ids


def _check_unique_ids(ids, what: str) -> None:
    """Ids must be unique; the repeated ones are named."""
    ids = pd.Series(list(ids), dtype=object)
    dup = ids.duplicated(keep=False).to_numpy()
    if dup.any():
        # Repeated ids in wide input are repeated (item, annotator) pairs: name them.
        raise ValueError(f"`{what}` must be unique; {_preview(pd.unique(ids[dup]))} appear more than once. "
                         "Each item (row) and annotator (column) may appear once.")


def _positions_array(values, name: str) -> np.ndarray:
    """A one-dimensional integer array of positions (not copied when it already is one)."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional, shape (n_responses,); got shape {arr.shape}.")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"`{name}` must hold integer positions 0, 1, ...; got dtype {arr.dtype}. For ids (strings, "
                         "or numbers that are not positions) use AnnotationSet.from_long.")
    return arr


def _label_array(values) -> np.ndarray:
    """Labels as a one-dimensional array with values 0/1 (bool, integer or float input); offenders named."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"`label` must be one-dimensional, shape (n_responses,); got shape {arr.shape}.")
    if arr.dtype == bool:
        return arr.view(np.int8)
    if arr.size and arr.dtype.kind not in "iuf":
        raise ValueError(f"`label` must hold 0 or 1; got dtype {arr.dtype}. Map your classes to 0/1 first.")
    bad = (arr != 0) & (arr != 1)
    if bad.any():
        pos = np.flatnonzero(bad)
        raise ValueError(f"`label` must be 0 or 1; got {_preview(pd.unique(arr[pos]))} at responses {_preview(pos)}. "
                         "Map your classes to 0/1 first.")
    return arr


def _count(n, ids, codes: np.ndarray, name: str, ids_name: str, what: str) -> int:
    """``n_items`` / ``n_annotators``: given, else the number of ids, else the largest position + 1."""
    if n is None:
        n = len(ids) if ids is not None else int(codes.max()) + 1 if codes.size else 0
    elif isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"`{name}` must be a positive integer; got {n!r}.")
    n = int(n)
    if ids is not None and len(ids) != n:
        raise ValueError(f"`{ids_name}` has {len(ids)} entries but `{name}` is {n}.")
    if n > _INT32_MAX:
        raise ValueError(f"`{name}` = {n} exceeds the int32 positions of the responses ({_INT32_MAX}).")
    return n


def _check_range(codes: np.ndarray, n: int, name: str, n_name: str, what: str = "positions") -> None:
    lo, hi = int(codes.min()), int(codes.max())
    if lo < 0 or hi >= n:
        bad = np.flatnonzero((codes < 0) | (codes >= n))
        raise ValueError(f"`{name}` must hold {what} 0 .. {n - 1} (`{n_name}` = {n}); got "
                         f"{_preview(pd.unique(codes[bad]))} at responses {_preview(bad)}.")


def _describe_repeats(key, starts, n_annotators, item_ids, annotator_ids, names=("item", "annotator")) -> str:
    """``"3 repeated (item, annotator) pairs [(7, 'a'), ...]"`` from sorted pair keys and run starts."""
    shown = [(_plain_id(item_ids[int(k // n_annotators)]), _plain_id(annotator_ids[int(k % n_annotators)]))
             for k in key[starts[:8]]]
    more = f" and {starts.size - 8} more" if starts.size > 8 else ""
    noun = "pair" if starts.size == 1 else "pairs"
    return f"{starts.size} repeated ({names[0]}, {names[1]}) {noun} {_preview(shown)}{more}"


def _plain_id(value):
    return value.item() if isinstance(value, np.generic) else value


def _gold_from_column(values: pd.Series, item_codes: np.ndarray, item_ids: np.ndarray, *, column: str = "gold",
                      item: str = "item") -> np.ndarray:
    """Gold labels of shape (n_items,), int8 (-1 unknown), from a per-row column of long data.

    Cells are 0 or 1, blank / NaN where unknown. Rows of one item may leave the value blank, but may not
    disagree. Offending rows (by the frame's index) and items are named.
    """
    raw = values.to_numpy(dtype=object)
    blank = pd.isna(raw) | np.array([isinstance(v, str) and not v.strip() for v in raw], dtype=bool)
    numeric = pd.to_numeric(pd.Series(np.where(blank, None, raw), dtype=object), errors="coerce").to_numpy(np.float64)
    bad = ~blank & ~np.isin(numeric, (0.0, 1.0))
    if bad.any():
        rows = np.asarray(values.index)[bad]
        raise ValueError(f"column `{column}` must hold gold labels 0 or 1 (blank or NaN where unknown); got "
                         f"{_preview(pd.unique(raw[bad]))} at rows {_preview(rows)}, {item} "
                         f"{_preview(pd.unique(item_ids[item_codes[bad]]))}.")
    n = len(item_ids)
    codes = item_codes[~blank]
    ones = np.bincount(codes, weights=numeric[~blank], minlength=n)
    given = np.bincount(codes, minlength=n)
    conflict = (ones > 0) & (ones < given)
    if conflict.any():
        raise ValueError(f"conflicting gold labels (both 0 and 1) in column `{column}` for {item} "
                         f"{_preview(item_ids[conflict])}: give each item one gold label.")
    gold = np.full(n, -1, dtype=np.int8)
    gold[given > 0] = (ones[given > 0] > 0).astype(np.int8)
    return gold


def _gold_vector(gold, item_ids: np.ndarray):
    """``gold`` as an array of shape (n_items,): a Series or dict keyed by item id is aligned (absent: -1)."""
    if isinstance(gold, dict):
        gold = pd.Series(list(gold.values()), index=pd.Index(list(gold.keys()), dtype=object), dtype=object)
    if not isinstance(gold, pd.Series):
        return gold
    if gold.index.has_duplicates:
        raise ValueError(f"`gold` lists items {_preview(gold.index[gold.index.duplicated()].unique())} more than once.")
    index = pd.Index(gold.index, dtype=object)
    wanted = pd.Index(item_ids, dtype=object)
    unknown = ~index.isin(wanted)
    if unknown.any():
        raise ValueError(f"`gold` has labels for items {_preview(index[unknown])} that are not in the annotations.")
    aligned = pd.Series(gold.to_numpy(dtype=object), index=index).reindex(wanted)
    return aligned.to_numpy(dtype=object)


# ---------------------------------------------------------------------------------------------- K classes
def _check_probs(probs, item_ids, classes, *, tol: float = PROBS_TOL) -> np.ndarray:
    """``probs`` as a read-only float64 array of shape (n_items, K), rows renormalised; offending items named."""
    n, k = len(item_ids), len(classes)
    try:
        arr = np.array(probs, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"`probs` must be numeric, shape ({n}, {k}).") from None
    if arr.shape != (n, k):
        raise ValueError(f"`probs` must have shape ({n}, {k}): one row per item, one column per class "
                         f"{_preview(list(classes))}; got {arr.shape}.")
    ids = np.asarray(item_ids, dtype=object)
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        raise ValueError(f"`probs` must be finite; NaN or inf at items {_preview(ids[bad])}.")
    bad = (arr < 0).any(axis=1)
    if bad.any():
        raise ValueError(f"`probs` must be non-negative; negative at items {_preview(ids[bad])}. Pass probabilities "
                         "(a softmax), not logits.")
    # Sum each row in sorted order: the sums (so the renormalised rows) do not depend on the column order.
    sums = np.sort(arr, axis=1).sum(axis=1)
    bad = np.abs(sums - 1.0) > tol
    if bad.any():
        raise ValueError(f"each row of `probs` must sum to 1 (within {tol:g}); items {_preview(ids[bad])} sum to "
                         f"{_preview(np.round(sums[bad], 6))}. Is a class column missing, or are these logits?")
    # Rows within the tolerance but off by more than rounding are renormalised; the others are left as given.
    off = np.abs(sums - 1.0) > 8 * k * np.finfo(np.float64).eps
    arr[off] /= sums[off, None]
    return _frozen(arr)


def _probs_column(frame: pd.DataFrame, name) -> object:
    """The column of ``frame`` for class ``name`` (the class itself or its string form), or None."""
    for candidate in (name, str(name)):
        if candidate in frame.columns:
            return candidate
    return None


def _align_probs(probs, item_ids: np.ndarray, classes: tuple, *, item: str = "item") -> np.ndarray:
    """Probabilities of shape (n_items, K) in item and class order.

    A DataFrame is matched by name: rows by its ``item`` column (or its index), columns by class name (the
    class or ``str(class)``); every class needs a column and every column other than ``item`` must be a
    class. Rows of items nobody annotated are dropped with a :class:`DataWarning`. An array is taken as is:
    rows in item order, columns in class order.
    """
    if not isinstance(probs, pd.DataFrame):
        return _check_probs(probs, item_ids, classes)
    frame = probs.set_index(item) if item in probs.columns else probs
    cols = [_probs_column(frame, c) for c in classes]
    absent = [c for c, col in zip(classes, cols) if col is None]
    if absent:
        raise ValueError(f"`probs` has no column for class(es) {_preview(absent)}; it has "
                         f"{_preview(list(frame.columns))}. Give one column per class, named as in the labels.")
    extra = [c for c in frame.columns if c not in cols]
    if extra:
        raise ValueError(f"`probs` column(s) {_preview(extra)} are not classes {_preview(list(classes))}. Drop them, "
                         "or pass classes= to include classes no annotator used.")
    if frame.index.has_duplicates:
        raise ValueError(f"`probs` lists items {_preview(frame.index[frame.index.duplicated()].unique())} more "
                         "than once.")
    index = pd.Index(frame.index, dtype=object)
    wanted = pd.Index(item_ids, dtype=object)
    absent = ~wanted.isin(index)
    if absent.any():
        raise ValueError(f"annotated items {_preview(wanted[absent])} have no row in `probs`. Give probabilities for "
                         "every annotated item, or drop those items.")
    n_extra = int((~index.isin(wanted)).sum())
    if n_extra:
        warnings.warn(f"{n_extra} items in `probs` have no annotation and were dropped.", DataWarning, stacklevel=3)
    numeric = frame[cols].apply(pd.to_numeric, errors="coerce")  # text cells become NaN, named as not finite
    numeric.index = index
    return _check_probs(numeric.reindex(wanted).to_numpy(dtype=np.float64), item_ids, classes)


def _gold_codes(gold, item_ids: np.ndarray, classes: tuple, *, names: bool) -> np.ndarray:
    """Gold labels as class indices of shape (n_items,), int16, -1 where unknown.

    ``gold`` is an array of shape (n_items,) or a Series / dict keyed by item id (items left out: unknown);
    -1, NaN or None mark unknown. Its values are class names when ``names`` (from_long, from_wide) and class
    indices otherwise (from_responses, like its labels).
    """
    if not names and not isinstance(gold, (pd.Series, dict)):
        arr = np.asarray(gold)
        if arr.dtype.kind in "iu" and arr.shape == (len(item_ids),) and ((arr >= MISSING) & (arr < len(classes))).all():
            return arr.astype(np.int16)  # class indices already (the fast route of from_responses)
    raw = np.asarray(_gold_vector(gold, item_ids), dtype=object)
    if raw.shape != (len(item_ids),):
        raise ValueError(f"`gold` must have shape ({len(item_ids)},), one entry per item (-1 or NaN where unknown); "
                         f"got {raw.shape}.")
    unknown = np.asarray([v is None or (isinstance(v, (float, np.floating)) and math.isnan(v))
                          or _class_name(v) == MISSING for v in raw], dtype=bool)
    out = np.full(len(item_ids), MISSING, dtype=np.int16)
    if unknown.all():
        return out
    ids = np.asarray(item_ids, dtype=object)
    known = np.flatnonzero(~unknown)
    index_of = {c: k for k, c in enumerate(classes)} if names else {k: k for k in range(len(classes))}
    codes = [index_of.get(_class_name(v)) for v in raw[known]]
    bad = np.asarray([c is None for c in codes], dtype=bool)
    if bad.any():
        allowed = f"classes {_preview(list(classes))}" if names else f"class indices 0 .. {len(classes) - 1}"
        raise ValueError(f"`gold` must hold {allowed} (-1 or NaN where unknown); got "
                         f"{_preview(pd.unique(raw[known[bad]])[:5])} at items {_preview(ids[known[bad]])}.")
    out[known] = codes
    return out


def _gold_from_rows(values: pd.Series, item_codes: np.ndarray, item_ids: np.ndarray, classes: tuple, *,
                    column: str, item: str) -> np.ndarray:
    """Gold class indices (n_items,) from a per-row column of long data; blank rows unknown, conflicts named."""
    raw = values.to_numpy(dtype=object)
    blank = pd.isna(raw) | np.array([isinstance(v, str) and not v.strip() for v in raw], dtype=bool)
    rows = np.asarray(values.index)
    codes, _ = _encode(raw[~blank], classes, what=f"column `{column}` (gold labels)",
                       where=lambda m: f"at rows {_preview(rows[~blank][m])}")
    per_item = pd.DataFrame({"item": item_codes[~blank], "gold": codes}).groupby("item")["gold"].agg(["min", "max"])
    conflict = per_item.index[per_item["min"].to_numpy() != per_item["max"].to_numpy()]
    if len(conflict):
        raise ValueError(f"conflicting gold labels in column `{column}` for {item} "
                         f"{_preview(item_ids[np.asarray(conflict)])}: give each item one gold label.")
    out = np.full(len(item_ids), MISSING, dtype=np.int16)
    out[per_item.index.to_numpy()] = per_item["min"].to_numpy()
    return out
