"""CSV loaders with one-line errors, and the bundled demo data.

Long files (``item, annotator, label``, or crowd-kit's ``task, worker, label``) and wide files (``item`` and one column
per annotator); scores and gold labels from a column or a separate file. Every problem is a one-line ``ValueError``
naming the file, line and column. Details: docs/foundations.md, *noisycal_bayes.data.loaders*.
"""
from __future__ import annotations

import csv
import math
import warnings
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from .._validation import _preview, check_choice
from .._validation import one_line as _one_line
from ..warnings import DataWarning
# COLUMN_ALIASES and MISSING_TOKENS are named here too (what the loaders read); they live beside the cell readers.
from ._cells import (COLUMN_ALIASES, MISSING_TOKENS, _check_unique, _file_class, _file_gold, _gold,  # noqa: F401
                     _id_kinds, _item_ids, _read_label_cells, _read_long, _read_wide, _require, _resolve, _score,
                     _table_layout)
from ._inputs import _check_probs
from .annotations import REPEATED, AnnotationSet, MulticlassAnnotationSet
from .channel import Channel
from .classes import MISSING, _check_classes, _class_name, _sorted_classes

__all__ = ["demo_paths", "is_multiclass_labels", "load_annotations_csv", "load_demo", "load_gold_csv",
           "load_multiclass", "load_scores_csv", "read_table"]

_BUNDLED = "bundled"
#: Columns of a wide labels file that :func:`is_multiclass_labels` never reads as annotators.
_NOT_LABELS = ("score", "gold")
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
        A single line naming the file, line and column of the first problem: missing columns, empty file,
        labels other than 0/1, scores not in [0, 1], bad, conflicting or unknown items' gold labels, repeated
        pairs with ``repeated="error"``, duplicate items, annotated items without a score, scores given twice.

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
    found, item, annotator = _table_layout(table, item, annotator, label)
    if gold is not None and gold not in table.header:
        raise ValueError(f"{table.path}: no gold column '{gold}'; found {table.header}.")
    layout = found if layout == "auto" else layout
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


def _read_probs_file(path, item_ids: list, classes: tuple, *, item: str, source: str) -> np.ndarray:
    """Probabilities (n_items, K) from a CSV with ``item`` and one column per class; lines named on error."""
    table = read_table(path)
    item = _resolve(table, item, "item")
    _require(table, (item,), "probabilities (expected an item column and one column per class)")
    names = [str(c) for c in classes]
    absent = [c for c in names if c not in table.header]
    if absent:
        raise ValueError(f"{table.path}: no probability column for class(es) {absent} of the labels ({source}); "
                         f"found {table.header}. Name one column per class as it appears in the labels.")
    extra = [c for c in table.header if c not in names and c != item]
    if extra:
        raise ValueError(f"{table.path}: column(s) {extra} are not classes of the labels {_preview(names)}; drop "
                         "them, or pass classes= (--classes) to include classes no annotator used.")
    ids = _item_ids(table, item)
    _check_unique(table, ids, "item")
    wanted = list(item_ids)
    if {type(i) is int for i in ids} != {type(i) is int for i in wanted}:
        ids, wanted = [str(i) for i in ids], [str(i) for i in wanted]  # 7 in one file, "7" in the other
    cols = [table.header.index(c) for c in names]
    cells = [[row[k] for k in cols] for row in table.rows]
    try:
        values = np.array(cells, dtype=np.float64)  # NumPy parses the strings; on failure the loop names the cell
    except ValueError:
        values = np.full((len(cells), len(names)), np.nan)
    if not (np.isfinite(values) & (values >= 0)).all():
        for r, row in enumerate(cells):
            for c, text in zip(names, row):
                try:
                    x = float(text)
                except ValueError:
                    x = math.nan
                if not (math.isfinite(x) and x >= 0):
                    raise ValueError(f"{table.where(r, c)}: probabilities must be finite numbers >= 0; got {text!r}.")
    row_of = {i: r for r, i in enumerate(ids)}
    absent = [i for i in wanted if i not in row_of]
    if absent:
        raise ValueError(f"{table.path}: annotated items {_preview(absent)} have no probabilities. Give every "
                         "annotated item a row, or drop those items.")
    n_extra = len(row_of) - len(wanted)
    if n_extra:
        warnings.warn(f"{table.path}: {n_extra} items have probabilities but no annotation and were dropped.",
                      DataWarning, stacklevel=3)
    try:
        return _check_probs(values[[row_of[i] for i in wanted]], wanted, classes)
    except ValueError as exc:
        raise ValueError(f"{table.path}: {_one_line(exc)}") from None


def load_multiclass(labels_path, probs_path=None, *, classes=None, repeated: str = "keep", gold: str | None = None,
                    annotators=None) -> MulticlassAnnotationSet:
    """Read K-class labels (and class probabilities) from the command line's CSV files. Writes nothing.

    Parameters
    ----------
    labels_path : str or Path
        Long (``item, annotator, label`` [, gold column]) or wide (``item`` + one column per annotator, an
        empty cell, ``NA`` or ``-1`` for a missing label). Labels are class names: integers or strings.
        crowd-kit's ``task, worker`` columns are read as ``item, annotator``.
    probs_path : str or Path, optional
        A CSV with ``item`` and one column per class, named as the class appears in the labels file (say
        ``0`` .. ``9``, or ``cat``, ``dog``); rows sum to 1 within :data:`PROBS_TOL` (renormalised). Rows of
        items nobody annotated are dropped with a :class:`~noisycal_bayes.warnings.DataWarning`.
    classes : sequence, optional
        The classes in index order (a label outside them is an error). Default: the sorted distinct labels
        (integers numerically).
    repeated : {"keep", "first", "error"}
        Long format: rows that repeat an (item, annotator) pair (see :meth:`MulticlassAnnotationSet.from_long`).
    gold : str, optional
        A column of the labels file holding known clean labels (class names; empty where unknown).
    annotators : sequence of str, optional
        Wide format only: the columns holding labels (default: every column except ``item`` and ``gold``).

    Returns
    -------
    MulticlassAnnotationSet
        Items in file order (sorted when every id is an integer); annotators sorted (long) or in column order
        (wide).

    Raises
    ------
    ValueError
        One line naming the file, line, column and value of the first problem: missing columns or cells, labels
        outside ``classes``, bad or conflicting gold labels, probability columns that are not the classes, bad
        probability rows (naming the items), annotated items without probabilities, repeated pairs with
        ``repeated="error"``, a single annotator (:func:`check_multiclass_design`).

    Examples
    --------
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> labels, probs = os.path.join(folder, "labels.csv"), os.path.join(folder, "probs.csv")
    >>> _ = open(labels, "w").write("item,annotator,label\\n1,a,cat\\n1,b,dog\\n2,a,bird\\n2,b,bird\\n")
    >>> _ = open(probs, "w").write("item,bird,cat,dog\\n1,0.1,0.6,0.3\\n2,0.8,0.1,0.1\\n")
    >>> data = load_multiclass(labels, probs)
    >>> data.classes, data.labels.tolist(), data.probs[1].tolist()
    (('bird', 'cat', 'dog'), [[1, 2], [0, 0]], [0.8, 0.1, 0.1])
    """
    check_choice(repeated, REPEATED, name="repeated", func="load_multiclass")
    table = read_table(labels_path)
    if gold is not None and gold not in table.header:
        raise ValueError(f"{table.path}: no gold column '{gold}'; found {table.header}.")
    if classes is not None:
        # Given as text (the command line's --classes 0,1,2): read like the file's cells, "3" as the class 3.
        classes = _check_classes([_file_class(c) if isinstance(c, str) else c for c in classes])
    layout, item, cells, item_ids, ann_ids = _read_label_cells(table, item="item", annotators=annotators,
                                                                   exclude=(gold,))
    name_of = {v: _file_class(v) for v in {v for _, _, _, _, v in cells}}  # few distinct labels: parse each once
    names = [name_of[v] for _, _, _, _, v in cells]
    inferred = _sorted_classes(names)
    if classes is None:
        classes = inferred
        if len(classes) < 2:
            raise ValueError(f"{table.path}: every label is {classes[0]!r}; pass classes= (--classes) to name the "
                             "other classes.")
    index = {c: k for k, c in enumerate(classes)}
    for (r, col, _, _, value), name in zip(cells, names):
        if name == MISSING:
            raise ValueError(f"{table.where(r, col)}: label -1 marks a missing label; drop the row.")
        if name not in index:
            raise ValueError(f"{table.where(r, col)}: label {value!r} is not among the classes "
                             f"{_preview(list(classes))}.")
    if repeated == "error" and layout == "long":
        _check_unique(table, [(i, a) for _, _, i, a, _ in cells], f"({item}, annotator) pair",
                      hint=" Pass repeated='keep' (--repeated keep) to use every label, or 'first' to keep the first.")
    if len(ann_ids) < 2:
        raise ValueError(f"{table.path}: a single annotator {_preview(ann_ids)}; K x K confusion matrices need at "
                         "least two annotators (three on common items, or two with score groups).")
    ipos = {v: n for n, v in enumerate(item_ids)}
    apos = {v: n for n, v in enumerate(ann_ids)}
    apos.update({str(v): n for n, v in enumerate(ann_ids)})  # wide columns are read as strings
    codes = (np.fromiter((ipos[i] for _, _, i, _, _ in cells), dtype=np.int32, count=len(cells)),
             np.fromiter((apos[a] for _, _, _, a, _ in cells), dtype=np.int32, count=len(cells)),
             np.fromiter((index[n] for n in names), dtype=np.int16, count=len(cells)))
    probs = None if probs_path is None else _read_probs_file(probs_path, item_ids, classes, item=item,
                                                             source=table.path)
    gold_codes = None
    if gold is not None:
        rows_items = _item_ids(table, item)
        gold_codes = _file_gold(table, gold, rows_items, item_ids, classes)
    try:
        return MulticlassAnnotationSet.from_responses(
            *codes, n_items=len(item_ids), n_annotators=len(ann_ids), classes=classes, probs=probs,
            item_ids=np.asarray(item_ids, dtype=object), annotator_ids=np.asarray(ann_ids, dtype=object),
            gold=gold_codes, repeated=repeated)
    except ValueError as exc:
        raise ValueError(f"{table.path}: {_one_line(exc)}") from None


def is_multiclass_labels(labels) -> bool:
    """Whether labels need the K-class path: True unless every label is 0 or 1.

    Parameters
    ----------
    labels : str, Path or DataFrame
        A labels CSV file, long or wide (as for :func:`load_multiclass`), or a DataFrame in long format
        (a ``label`` column) or wide format (one column per annotator besides ``item``; NaN / -1 missing).

    Returns
    -------
    bool
        True when some label is neither 0 nor 1 (more classes, or names such as ``cat`` / ``dog`` or 1 / 2). In
        wide format ``item``, ``task``, ``score`` and ``gold`` are not label columns.

    Examples
    --------
    >>> import pandas as pd
    >>> is_multiclass_labels(pd.DataFrame({"item": [1, 1], "annotator": ["a", "b"], "label": [0, 2]}))
    True
    >>> is_multiclass_labels(pd.DataFrame({"item": [1, 2], "ann1": [0, 1], "ann2": [1.0, float("nan")]}))
    False
    """
    if isinstance(labels, pd.DataFrame):
        if "label" in labels.columns:
            values = labels["label"].to_numpy(dtype=object)
        else:
            other = [c for c in ("item", "task") + _NOT_LABELS if c in labels.columns]
            values = labels.drop(columns=other).to_numpy(dtype=object)
        values = values[~pd.isna(values)]
        names = {_class_name(v) for v in values.ravel()} - {MISSING}
    else:
        table = read_table(labels)
        _, _, cells, _, _ = _read_label_cells(table, item="item", exclude=_NOT_LABELS)
        names = {_file_class(v) for v in {v for _, _, _, _, v in cells}}
    return not names <= {0, 1}


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
