"""The cells of a parsed CSV table (:func:`~noisycal_bayes.data.loaders.read_table`) read as item ids, labels,
scores, gold labels and class names, and the long and wide layouts built from them; every error is one line
naming the file, the line and the column (the loaders themselves are :mod:`noisycal_bayes.data.loaders`).
"""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import numpy as np

from .._validation import _preview
from .classes import MISSING

if TYPE_CHECKING:  # the parsed table's type, for the annotations only
    from .loaders import _Table

#: Column names of other tools read as ours when our default name is absent: crowd-kit's long format
#: ``task, worker, label`` (``performer`` before crowd-kit 1.0).
COLUMN_ALIASES = {"item": ("task",), "annotator": ("worker", "performer")}
#: Cells read as a missing response in wide format (case-insensitive, after stripping blanks).
MISSING_TOKENS = frozenset({"", "na", "nan", "null", "none", "-1"})
# Integer ids in canonical form only ("7", "-12"; not "007", "+7" or "-0"), so that reading them as ints
# never merges two distinct strings. Longer ids stay strings: Python refuses int() beyond 4300 digits.
_INT = re.compile(r"^(0|-?[1-9]\d{0,4000})$")


def _item_ids(table: _Table, column: str) -> list:
    """Item ids of a column: ints when every id is a canonical integer ("7", not "007"), else the stripped strings."""
    values = table.column(column)
    for r, v in enumerate(values):
        if v == "":
            raise ValueError(f"{table.where(r, column)}: empty item id.")
    if all(_INT.match(v) for v in values):
        return [int(v) for v in values]
    return values


def _zero_one(value: str):
    """0 or 1 for a cell that spells one ("1", "1.0", "0e0"), else None."""
    try:
        x = float(value)
    except ValueError:
        return None
    return int(x) if x in (0.0, 1.0) else None


def _label(table: _Table, r: int, column: str, value: str, *, allow_missing: bool):
    """0, 1, or None (missing, wide format only)."""
    if allow_missing and value.lower() in MISSING_TOKENS:
        return None
    x = _zero_one(value)
    if x is None:
        shown = "an empty cell" if value == "" else repr(value)
        hint = " (leave the cell empty for a missing response)" if allow_missing else \
            " (drop the row for a missing response)"
        raise ValueError(f"{table.where(r, column)}: labels must be 0 or 1; got {shown}{hint}.")
    return x


def _score(table: _Table, r: int, column: str, value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        shown = "an empty cell" if value == "" else repr(value)
        raise ValueError(f"{table.where(r, column)}: scores must be numbers in [0, 1]; got {shown}.") from None
    if not math.isfinite(x):
        raise ValueError(f"{table.where(r, column)}: scores must be finite numbers in [0, 1]; got {value!r}.")
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"{table.where(r, column)}: scores must lie in [0, 1]; got {value!r} "
                         "(pass probabilities, not logits or percentages).")
    return x


def _gold(table: _Table, r: int, column: str, value: str):
    """0, 1, or None (an empty cell: gold label unknown)."""
    if value == "" or value.lower() in ("na", "nan", "null", "none"):
        return None
    x = _zero_one(value)
    if x is None:
        raise ValueError(f"{table.where(r, column)}: gold labels must be 0 or 1 (leave the cell empty where the "
                         f"clean label is unknown); got {value!r}.")
    return x


def _resolve(table: _Table, name: str, default: str) -> str:
    """``name``, or the alias of :data:`COLUMN_ALIASES` present in the file when ``name`` is the absent default."""
    if name != default or name in table.header:
        return name
    return next((a for a in COLUMN_ALIASES[default] if a in table.header), name)


def _require(table: _Table, columns, what: str) -> None:
    missing = [c for c in columns if c not in table.header]
    if missing:
        raise ValueError(f"{table.path}: missing column(s) {missing} for {what}; found {table.header}.")


def _check_unique(table: _Table, keys: list, what: str, *, hint: str = "") -> None:
    seen: dict = {}
    for r, k in enumerate(keys):
        if k in seen:
            raise ValueError(f"{table.where(r)}: duplicate {what} {k!r} (first at line {table.lines[seen[k]]}).{hint}")
        seen[k] = r


def _id_kinds(ids) -> set:
    return {type(i) is int for i in ids}


def _read_long(table: _Table, *, item, annotator, label, score, gold=None, repeated="keep"):
    """``((item, annotator, label) position arrays, item ids, annotator ids, scores or None, gold or None)``."""
    _require(table, (item, annotator, label),
             "long format (expected columns item, annotator, label, or crowd-kit's task, worker, label)")
    items = _item_ids(table, item)
    anns = table.column(annotator)
    for r, a in enumerate(anns):
        if a == "":
            raise ValueError(f"{table.where(r, annotator)}: empty annotator id.")
    if repeated == "error":
        _check_unique(table, list(zip(items, anns)), f"({item}, {annotator}) pair",
                      hint=" Pass repeated='keep' (--repeated keep) to use every label, or 'first' to keep the first.")
    k = table.header.index(label)
    lab = [_label(table, r, label, row[k], allow_missing=False) for r, row in enumerate(table.rows)]
    item_ids = _distinct_items(items)
    ann_ids = _natural_ids(dict.fromkeys(anns))
    anns = [int(a) for a in anns] if ann_ids and isinstance(ann_ids[0], int) else anns
    ipos = {v: n for n, v in enumerate(item_ids)}
    apos = {v: n for n, v in enumerate(ann_ids)}
    codes = (np.fromiter((ipos[i] for i in items), dtype=np.int32, count=len(items)),
             np.fromiter((apos[a] for a in anns), dtype=np.int32, count=len(anns)),
             np.asarray(lab, dtype=np.int8))
    file_scores = None
    if score in table.header:
        ks = table.header.index(score)
        per_item: dict = {}
        for r, (i, row) in enumerate(zip(items, table.rows)):
            z = _score(table, r, score, row[ks])
            if i in per_item and per_item[i][0] != z:
                raise ValueError(f"{table.where(r, score)}: item {i!r} has score {z} here but "
                                 f"{per_item[i][0]} at line {table.lines[per_item[i][1]]}.")
            per_item.setdefault(i, (z, r))
        file_scores = np.asarray([per_item[i][0] for i in item_ids], dtype=np.float64)
    gold_values = None
    if gold is not None:
        kg = table.header.index(gold)
        per_item = {}
        for r, (i, row) in enumerate(zip(items, table.rows)):
            g = _gold(table, r, gold, row[kg])
            if g is None:
                continue
            if i in per_item and per_item[i][0] != g:
                raise ValueError(f"{table.where(r, gold)}: item {i!r} has gold label {g} here but "
                                 f"{per_item[i][0]} at line {table.lines[per_item[i][1]]}.")
            per_item.setdefault(i, (g, r))
        gold_values = np.asarray([per_item[i][0] if i in per_item else -1 for i in item_ids], dtype=np.int8)
    return codes, item_ids, ann_ids, file_scores, gold_values


def _read_wide(table: _Table, *, item, score, annotators=None, gold=None):
    if item not in table.header:
        raise ValueError(f"{table.path}: missing column '{item}'; found {table.header}. Expected long format "
                         f"(item, annotator, label) or wide format ({item} + one column per annotator).")
    other = [c for c in (item, score, gold) if c is not None]
    if annotators is not None:
        ann_cols = [str(a) for a in annotators]
        missing = [c for c in ann_cols if c not in table.header]
        if missing:
            raise ValueError(f"{table.path}: annotator column(s) {missing} not found; found {table.header}.")
        if len(set(ann_cols)) != len(ann_cols) or any(c in ann_cols for c in other):
            raise ValueError(f"{table.path}: `annotators` must name distinct label columns other than "
                             f"{', '.join(repr(c) for c in other)}; got {ann_cols}.")
    else:
        ann_cols = [c for c in table.header if c not in other]
    if not ann_cols:
        raise ValueError(f"{table.path}: wide format needs one column per annotator besides '{item}'"
                         f"{' and ' + repr(score) if score in table.header else ''}; found {table.header}.")
    items = _item_ids(table, item)
    _check_unique(table, items, "item")
    idx = [table.header.index(c) for c in ann_cols]
    labels = np.full((len(items), len(ann_cols)), -1, dtype=np.int8)
    for r, row in enumerate(table.rows):
        for j, (c, k) in enumerate(zip(ann_cols, idx)):
            y = _label(table, r, c, row[k], allow_missing=True)
            if y is not None:
                labels[r, j] = y
    unlabelled = np.flatnonzero((labels < 0).all(axis=1))
    if unlabelled.size:
        r = int(unlabelled[0])
        raise ValueError(f"{table.where(r)}: item {items[r]!r} has no label from any annotator "
                         f"({unlabelled.size} such row(s)); drop those rows.")
    file_scores = None
    if score in table.header:
        ks = table.header.index(score)
        file_scores = np.asarray([_score(table, r, score, row[ks]) for r, row in enumerate(table.rows)])
    gold_values = None
    if gold is not None:
        kg = table.header.index(gold)
        gold_values = np.asarray([-1 if (g := _gold(table, r, gold, row[kg])) is None else g
                                  for r, row in enumerate(table.rows)], dtype=np.int8)
    # A wide file is one row per item, in file order; np.nonzero walks it row by row (sorted responses).
    ii, jj = np.nonzero(labels >= 0)
    codes = (ii.astype(np.int32), jj.astype(np.int32), labels[ii, jj])
    return codes, items, _ids_as_ints(ann_cols), file_scores, gold_values


def _ids_as_ints(ids) -> list:
    """Ids as ints when every one is a canonical integer string, else unchanged (so '01' and '1' stay distinct)."""
    ids = list(ids)
    return [int(v) for v in ids] if all(_INT.match(v) for v in ids) else ids


def _natural_ids(ids) -> list:
    """Sorted ids, as ints when every one is an integer string."""
    return sorted(_ids_as_ints(ids))


def _distinct_items(items: list) -> list:
    """The distinct item ids of a long file: sorted when every one is an int, else in order of first appearance."""
    ids = list(dict.fromkeys(items))
    return sorted(ids) if ids and _id_kinds(ids) == {True} else ids


def _table_layout(table: _Table, item: str = "item", annotator: str = "annotator", label: str = "label") -> tuple:
    """``("long" | "wide", item column, annotator column)`` of a labels table (crowd-kit's names resolved).

    Either long-format column (``annotator`` or ``label``) means long format; then a missing partner is reported.
    """
    item = _resolve(table, item, "item")
    annotator = _resolve(table, annotator, "annotator")
    layout = "long" if annotator in table.header or label in table.header else "wide"
    return layout, item, annotator


def _file_class(value: str):
    """A class name from a CSV cell: ``int`` for canonical integers ("3"; also "3.0"), else the string."""
    names = _ids_as_ints([value])
    if isinstance(names[0], int):
        return names[0]
    try:
        x = float(value)
    except ValueError:
        return value
    return int(x) if math.isfinite(x) and x.is_integer() else value


def _read_label_cells(table, *, item: str, annotators=None, exclude=()):
    """Per-response (row, column name, item id, annotator id, raw label) of a long or wide labels table.

    Returns ``(layout, item column, responses list, item ids, annotator ids)``; wide missing cells are skipped,
    and a wide table's annotators are ``annotators`` or every column but ``item`` and ``exclude``.
    """
    layout, item, annotator = _table_layout(table, item)
    out = []
    if layout == "long":
        if annotators is not None:
            raise ValueError("`annotators` selects columns of a wide file; a long file names annotators in its "
                             f"'{annotator}' column.")
        _require(table, (item, annotator, "label"), "long format (expected columns item, annotator, label)")
        items = _item_ids(table, item)
        ka, kl = table.header.index(annotator), table.header.index("label")
        for r, (i, row) in enumerate(zip(items, table.rows)):
            if row[ka] == "":
                raise ValueError(f"{table.where(r, annotator)}: empty annotator id.")
            if row[kl] == "":
                raise ValueError(f"{table.where(r, 'label')}: empty label (drop the row for a missing response).")
            out.append((r, "label", i, row[ka], row[kl]))
        ann_ids = _natural_ids(dict.fromkeys(a for _, _, _, a, _ in out))
        if ann_ids and isinstance(ann_ids[0], int):
            out = [(r, c, i, int(a), v) for r, c, i, a, v in out]
        return layout, item, out, _distinct_items(items), ann_ids
    _require(table, (item,), "wide format (item + one column per annotator)")
    items = _item_ids(table, item)
    _check_unique(table, items, "item")
    cols = [str(a) for a in annotators] if annotators is not None else \
        [c for c in table.header if c != item and c not in exclude]
    absent = [c for c in cols if c not in table.header]
    if absent or not cols:
        raise ValueError(f"{table.path}: annotator column(s) {absent or cols} not found; found {table.header}.")
    idx = [table.header.index(c) for c in cols]
    for r, (i, row) in enumerate(zip(items, table.rows)):
        for c, k in zip(cols, idx):
            if row[k].lower() not in MISSING_TOKENS:
                out.append((r, c, i, c, row[k]))
    labelled = {i for _, _, i, _, _ in out}
    for r, i in enumerate(items):
        if i not in labelled:
            raise ValueError(f"{table.where(r)}: item {i!r} has no label from any annotator; drop the row.")
    return layout, item, out, items, _ids_as_ints(cols)


def _file_gold(table, gold: str, items_of_rows: list, item_ids: list, classes: tuple) -> np.ndarray:
    """Gold class indices (n_items,) from column ``gold`` of the labels file; lines named on error."""
    k = table.header.index(gold)
    index = {c: n for n, c in enumerate(classes)}
    pos = {i: n for n, i in enumerate(item_ids)}
    out = np.full(len(item_ids), MISSING, dtype=np.int16)
    first: dict = {}
    for r, (i, row) in enumerate(zip(items_of_rows, table.rows)):
        value = row[k]
        if value.lower() in ("", "na", "nan", "null", "none"):
            continue
        g = index.get(_file_class(value))
        if g is None:
            raise ValueError(f"{table.where(r, gold)}: gold label {value!r} is not a class "
                             f"{_preview(list(classes))} (leave the cell empty where the clean label is unknown).")
        if i in first and out[pos[i]] != g:
            raise ValueError(f"{table.where(r, gold)}: item {i!r} has gold label {value!r} here but "
                             f"{classes[out[pos[i]]]!r} at line {table.lines[first[i]]}.")
        first.setdefault(i, r)
        out[pos[i]] = g
    return out
