"""CSV loaders with one-line errors, and the bundled demo data.

Two layouts are read:

- **long**: one row per response, columns ``item, annotator, label`` (a missing response is simply an
  absent row); an optional ``score`` column may carry each item's score;
- **wide**: an ``item`` column and one column per annotator holding 0, 1 or an empty cell (missing);
  an optional ``score`` column holds the scores.

crowd-kit's column names are recognised without options: a long file with columns ``task, worker, label``
(the frame crowd-kit's aggregators take) and a scores file with columns ``task, score`` read as
``item, annotator, label`` and ``item, score``. (An alias is used only when the column it stands for is
absent and its name was left at the default.)

Scores may also come from a separate file with columns ``item, score``; known clean labels ("gold") from a
column of the labels file (``gold="gold"``) or from a separate file with columns ``item, gold``. A long
file may repeat an (item, annotator) pair: by default every label is kept, each a conditionally independent
response given the clean label (``repeated="first"`` keeps the first, ``repeated="error"`` refuses). Files may start with a UTF-8
byte-order mark, contain blank lines, and quote their numbers. Every problem is raised as a
``ValueError`` whose message is a single line naming the file and, where there is one, the line and
column, e.g. ``labels.csv, line 7, column 'label': must be 0 or 1; got '2'.``
"""
from __future__ import annotations

import csv
import math
import re
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from .annotations import REPEATED, AnnotationSet
from .channel import Channel
from .._validation import check_choice
from .._validation import one_line as _one_line

__all__ = ["demo_paths", "load_annotations_csv", "load_demo", "load_gold_csv", "load_scores_csv", "read_table"]

#: Column names of other tools read as ours when our default name is absent: crowd-kit's long format
#: ``task, worker, label`` (``performer`` before crowd-kit 1.0).
COLUMN_ALIASES = {"item": ("task",), "annotator": ("worker", "performer")}
#: Cells read as a missing response in wide format (case-insensitive, after stripping blanks).
MISSING_TOKENS = frozenset({"", "na", "nan", "null", "none", "-1"})
# Integer ids in canonical form only ("7", "-12"; not "007", "+7" or "-0"), so that reading them as ints
# never merges two distinct strings. Longer ids stay strings: Python refuses int() beyond 4300 digits.
_INT = re.compile(r"^(0|-?[1-9]\d{0,4000})$")
_BUNDLED = "bundled"
#: How the bundled demo data was simulated (see ``benchmarks/make_demo_data.py``).
DEMO_CURVE = "overconfident"


class _Table:
    """A parsed CSV: header, rows of stripped strings, and the file line number of each row."""

    def __init__(self, path: str, header: list[str], rows: list[list[str]], lines: list[int]):
        self.path, self.header, self.rows, self.lines = path, header, rows, lines

    def column(self, name: str) -> list[str]:
        k = self.header.index(name)
        return [r[k] for r in self.rows]

    def where(self, row: int, column: str | None = None) -> str:
        """``file, line N, column 'c'`` for error messages."""
        out = f"{self.path}, line {self.lines[row]}"
        return out if column is None else f"{out}, column '{column}'"



def read_table(path) -> _Table:
    """Read a CSV file into a :class:`_Table` (strings only; blank lines skipped; BOM removed).

    Raises
    ------
    ValueError
        The file is missing, unreadable, not text, empty, has no data rows, has duplicate or empty
        column names, or a row with the wrong number of fields.
    """
    name = str(path)
    try:
        # utf-8-sig drops a leading byte-order mark (Excel writes one).
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh, skipinitialspace=True)
            header, rows, lines = None, [], []
            for fields in reader:
                if not fields or all(not f.strip() for f in fields):
                    continue  # blank line (or a line of empty separators)
                fields = [f.strip() for f in fields]
                if header is None:
                    header = fields
                    header_line = reader.line_num
                    continue
                if len(fields) != len(header):
                    # A trailing separator gives one extra empty field; tolerate only that.
                    if len(fields) == len(header) + 1 and fields[-1] == "":
                        fields = fields[:-1]
                    else:
                        raise ValueError(f"{name}, line {reader.line_num}: expected {len(header)} fields "
                                         f"({', '.join(header)}); got {len(fields)}.")
                rows.append(fields)
                lines.append(reader.line_num)
    except FileNotFoundError:
        raise ValueError(f"{name}: no such file.") from None
    except IsADirectoryError:
        raise ValueError(f"{name}: is a directory, not a CSV file.") from None
    except UnicodeDecodeError:
        raise ValueError(f"{name}: not a UTF-8 text file (is it a spreadsheet? export it as CSV).") from None
    except csv.Error as exc:
        raise ValueError(f"{name}: not a valid CSV file ({_one_line(exc)}).") from None
    except OSError as exc:
        raise ValueError(f"{name}: cannot read ({_one_line(exc.strerror or exc)}).") from None
    if header is None:
        raise ValueError(f"{name}: the file is empty.")
    if header and header[-1] == "" and len(header) > 1:
        header = header[:-1]  # trailing separator on the header line
        rows = [r[: len(header)] for r in rows]
    blank = [k + 1 for k, h in enumerate(header) if not h]
    if blank:
        raise ValueError(f"{name}, line {header_line}: column(s) {blank} have no name.")
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise ValueError(f"{name}, line {header_line}: duplicate column name(s) {dup}.")
    if not rows:
        raise ValueError(f"{name}: no data rows below the header.")
    return _Table(name, header, rows, lines)


# ---------------------------------------------------------------------------------------------- cells
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


# ---------------------------------------------------------------------------------------------- public
def load_scores_csv(path, *, item: str = "item", score: str = "score") -> pd.Series:
    """Read scores from a CSV with columns ``item, score`` (or crowd-kit style ``task, score``).

    Returns
    -------
    Series of float64 indexed by item id (ints when every id is an integer), in file order.

    Raises
    ------
    ValueError
        One line naming the file, line and column: missing columns, an empty file, a score that is not
        a number, NaN/inf, outside [0, 1], or an item listed twice.
    """
    table = read_table(path)
    item = _resolve(table, item, "item")
    _require(table, (item, score), "scores (expected columns item, score, or task, score)")
    ids = _item_ids(table, item)
    _check_unique(table, ids, "item")
    k = table.header.index(score)
    z = [_score(table, r, score, row[k]) for r, row in enumerate(table.rows)]
    return pd.Series(np.asarray(z, dtype=np.float64), index=pd.Index(ids, dtype=object, name=item), name=score)


def load_gold_csv(path, *, item: str = "item", gold: str = "gold") -> pd.Series:
    """Read known clean labels from a CSV with columns ``item, gold`` (or crowd-kit style ``task, gold``).

    An empty cell means the clean label of that item is unknown.

    Returns
    -------
    Series of int8 (0 or 1) indexed by item id (ints when every id is an integer), in file order; items with
    an empty cell are left out.

    Raises
    ------
    ValueError
        One line naming the file, line, column and value: missing columns, an empty file, a gold label
        that is not 0 or 1 (text included), or an item listed twice.
    """
    table = read_table(path)
    item = _resolve(table, item, "item")
    _require(table, (item, gold), f"gold labels (expected columns item, {gold}, or task, {gold})")
    ids = _item_ids(table, item)
    _check_unique(table, ids, "item")
    k = table.header.index(gold)
    values = [_gold(table, r, gold, row[k]) for r, row in enumerate(table.rows)]
    known = [(i, v, line) for i, v, line in zip(ids, values, table.lines) if v is not None]
    out = pd.Series(np.asarray([v for _, v, _ in known], dtype=np.int8),
                    index=pd.Index([i for i, _, _ in known], dtype=object, name=item), name=gold)
    out.attrs["lines"] = [line for _, _, line in known]  # for messages naming the line of an unknown item
    return out


def load_annotations_csv(path, scores_path=None, *, layout: str = "auto", item: str = "item",
                         annotator: str = "annotator", label: str = "label", score: str = "score",
                         annotators=None, gold: str | None = None, gold_path=None,
                         repeated: str = "keep") -> AnnotationSet:
    """Read noisy labels (and scores, and gold labels) from CSV into an :class:`AnnotationSet`.

    Parameters
    ----------
    path : str or Path
        Annotations, long (``item, annotator, label`` [, ``score``]) or wide (``item`` + one column per
        annotator [, ``score``]).
    scores_path : str or Path, optional
        A separate ``item, score`` file. Scored items that nobody annotated are dropped with a
        :class:`~noisycal_bayes.warnings.DataWarning`; annotated items without a score are an error.
    layout : {"auto", "long", "wide"}
        ``"auto"`` reads long format when the file has an ``annotator`` or a ``label`` column, else wide.
    item, annotator, label, score : str
        Column names. Left at their defaults, crowd-kit's ``task`` and ``worker`` (or ``performer``)
        are read as ``item`` and ``annotator`` when the file has no ``item`` / ``annotator`` column, in
        both the annotations and the scores file; ``task, worker, label`` is crowd-kit's long format.
    annotators : sequence of str, optional
        Wide format only: the columns holding annotators' labels (other columns are ignored). Default:
        every column except ``item``, ``score`` and the gold column.
    gold : str, optional
        A column of ``path`` holding known clean labels: 0 or 1, empty where unknown; one value per item
        (rows of an item may leave it empty, but may not disagree).
    gold_path : str or Path, optional
        A separate file with columns ``item, gold`` (empty gold cell: unknown). Every item in it must be
        annotated. Give ``gold`` or ``gold_path``, not both.
    repeated : {"keep", "first", "error"}
        Long format: rows that repeat an (item, annotator) pair. ``"keep"`` every label (each a
        conditionally independent response given the clean label), ``"first"`` keeps the first row,
        ``"error"`` refuses, naming the lines.

    Returns
    -------
    AnnotationSet

    Raises
    ------
    ValueError
        A single line naming the file, line and column of the first problem: missing columns, empty
        file, labels other than 0/1, scores that are not numbers in [0, 1], gold labels other than 0/1
        (text included) or conflicting for one item, gold for an item not in the annotations, repeated
        (item, annotator) pairs with ``repeated="error"``, duplicate items, annotated items without a
        score, scores given twice.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "labels.csv")
    >>> _ = open(path, "w").write("item,ann1,ann2,score\\n1,1,1,0.9\\n2,0,,0.2\\n3,0,1,0.4\\n")
    >>> data = load_annotations_csv(path)
    >>> data.labels.tolist(), data.scores.tolist()
    ([[1, 1], [0, -1], [0, 1]], [0.9, 0.2, 0.4])
    >>> _ = open(path, "w").write("item,annotator,label,gold\\n1,a,1,1\\n1,a,1,1\\n2,a,0,\\n2,b,1,\\n")
    >>> data = load_annotations_csv(path, gold="gold")
    >>> data.gold.tolist(), data.n_responses, data.n_repeated
    ([1, -1], 4, 1)
    """
    if layout not in ("auto", "long", "wide"):
        raise ValueError(f"`layout` must be 'auto', 'long' or 'wide'; got {layout!r}.")
    check_choice(repeated, REPEATED, name="repeated", func="load_annotations_csv")
    if gold is not None and gold_path is not None:
        raise ValueError("give `gold` (a column of the labels file) or `gold_path` (a separate item, gold file), "
                         "not both.")
    table = read_table(path)
    item_asked = item
    item = _resolve(table, item, "item")
    annotator = _resolve(table, annotator, "annotator")
    if gold is not None and gold not in table.header:
        raise ValueError(f"{table.path}: no gold column '{gold}'; found {table.header}.")
    if layout == "auto":
        # Either long-format column name means long format (then a missing partner is reported).
        layout = "long" if annotator in table.header or label in table.header else "wide"
    if layout == "long":
        if annotators is not None:
            raise ValueError("`annotators` selects columns of a wide file; a long file names annotators in its "
                             f"'{annotator}' column.")
        codes, item_ids, ann_ids, file_scores, gold_values = _read_long(
            table, item=item, annotator=annotator, label=label, score=score, gold=gold, repeated=repeated)
    else:
        codes, item_ids, ann_ids, file_scores, gold_values = _read_wide(table, item=item, score=score,
                                                                        annotators=annotators, gold=gold)

    if scores_path is not None and file_scores is not None:
        raise ValueError(f"{table.path}: has a '{score}' column and a separate scores file was given; "
                         "use one source of scores.")
    scores = None
    if file_scores is not None:
        scores = file_scores
    elif scores_path is not None:
        # The scores file resolves its own item column (``item`` or crowd-kit's ``task``).
        scores = load_scores_csv(scores_path, item=item_asked, score=score)
        # Match ids written as 7 in one file and "7" in the other: compare as strings when types differ.
        if _id_kinds(scores.index) != _id_kinds(item_ids):
            scores.index = pd.Index([str(i) for i in scores.index], dtype=object)
            item_ids = [str(i) for i in item_ids]
    if gold_path is not None:
        gold_values = _gold_from_file(gold_path, item_ids, item=item_asked, source=table.path)
    try:
        data = AnnotationSet.from_responses(*codes, n_items=len(item_ids), n_annotators=len(ann_ids), scores=scores,
                                            item_ids=np.asarray(item_ids, dtype=object),
                                            annotator_ids=np.asarray(ann_ids, dtype=object), gold=gold_values,
                                            repeated=repeated)
    except ValueError as exc:
        source = scores_path if scores_path is not None and "score" in str(exc) else path
        raise ValueError(f"{source}: {_one_line(exc)}") from None
    return data


def _id_kinds(ids) -> set:
    return {type(i) is int for i in ids}


def _gold_from_file(gold_path, item_ids: list, *, item: str, source: str) -> np.ndarray:
    """Gold labels of shape (n_items,) (-1 unknown) from an ``item, gold`` file; its unknown items named by line."""
    series = load_gold_csv(gold_path, item=item)
    lines = series.attrs["lines"]
    ids = list(series.index)
    wanted = list(item_ids)
    if _id_kinds(ids) != _id_kinds(wanted):
        # Ids written as 7 in one file and "7" in the other: compare as strings.
        ids, wanted = [str(i) for i in ids], [str(i) for i in wanted]
    pos = {v: n for n, v in enumerate(wanted)}
    out = np.full(len(wanted), -1, dtype=np.int8)
    for i, v, line in zip(ids, series.to_numpy(), lines):
        if i not in pos:
            raise ValueError(f"{gold_path}, line {line}: gold label {int(v)} for item {i!r}, which is not in the "
                             f"annotations ({source}).")
        out[pos[i]] = v
    return out


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
    item_ids = list(dict.fromkeys(items))
    item_ids = sorted(item_ids) if _id_kinds(item_ids) == {True} else item_ids
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


def _bundled(name: str):
    return resources.files(__package__).joinpath(_BUNDLED, name)


def load_demo() -> tuple[AnnotationSet, dict]:
    """The bundled simulated demo data and its truth.

    4000 items scored by an over-confident model (true curve ``m(z) = sigmoid(0.5 logit z)``), labelled
    by three annotators ``careful`` (fpr 0.05, tpr 0.90), ``hasty`` (0.20, 0.70) and ``lenient``
    (0.35, 0.95), about 15% of responses missing. Made by ``benchmarks/make_demo_data.py``.

    Returns
    -------
    data : AnnotationSet with scores
    truth : dict
        ``clean_labels`` (n_items,) int8 aligned with ``data.item_ids`` (for checking only, never for
        fitting); ``channel`` the true :class:`Channel` in ``data.annotator_ids`` order; ``curve`` the
        name of the true calibration curve in :data:`noisycal_bayes.simulate.CURVES`.

    Examples
    --------
    >>> data, truth = load_demo()
    >>> data.n_items, data.n_annotators, sorted(truth)
    (4000, 3, ['channel', 'clean_labels', 'curve'])
    """
    with resources.as_file(_bundled("demo_annotations.csv")) as ann, \
            resources.as_file(_bundled("demo_scores.csv")) as sc:
        data = load_annotations_csv(ann, sc)
    with resources.as_file(_bundled("demo_truth.csv")) as tr:
        truth = pd.read_csv(tr).set_index("item")["clean_label"]
    with resources.as_file(_bundled("demo_channels.csv")) as ch:
        channels = pd.read_csv(ch).set_index("annotator")
    clean = truth.reindex(list(data.item_ids)).to_numpy(dtype=np.int8)
    channels = channels.reindex(list(data.annotator_ids))
    channel = Channel(channels["fpr"].to_numpy(), channels["tpr"].to_numpy(), tuple(data.annotator_ids))
    return data, {"clean_labels": clean, "channel": channel, "curve": DEMO_CURVE}


def demo_paths() -> dict:
    """Paths of the bundled demo CSV files (``annotations``, ``scores``, ``truth``, ``channels``).

    Useful to try the command line on a real file: ``noisycal-bayes evaluate <annotations> --scores <scores>``.
    """
    out = {}
    for key in ("annotations", "scores", "truth", "channels"):
        out[key] = Path(str(_bundled(f"demo_{key}.csv")))
    return out
