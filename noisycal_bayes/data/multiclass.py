"""`MulticlassAnnotationSet`: labels in K classes from several annotators, and a classifier's class probabilities.

The K-class companion of :class:`~noisycal_bayes.data.AnnotationSet` (DESIGN §8, "K classes"). Labels are
stored sparse, as (item, annotator, label) triples (:class:`~noisycal_bayes.core.tables.Responses`) whose
``label`` is the class index ``k`` in ``0 .. K - 1``; the class it stands for is ``classes[k]``, the name as the
user gave it (an integer or a string). The classifier's output is a probability matrix ``probs`` of shape
(n_items, K), column ``k`` for class ``classes[k]``.

Classes are inferred from the labels (sorted: integers numerically, strings alphabetically) or given with
``classes=`` (then a label outside them is an error naming it, and a class nobody used still gets its
index). Probability rows must be finite, non-negative and sum to 1 within :data:`PROBS_TOL`; rows within the
tolerance are renormalised, rows beyond it are an error naming the items.

Identifiability of K x K channels (:func:`multiclass_design_problems`): one annotator never identifies its
confusion matrix (an error); two annotators without score groups do not either (the joint table
``C_1^T diag(pi) C_2`` has K^2 - 1 free cells for (2K + 1)(K - 1) parameters: a warning); three annotators
on common items identify the Dawid-Skene model generically (Kruskal's theorem on three-way arrays, Kruskal
1977, Linear Algebra Appl. 18; applied to latent class models by Allman, Matias & Rhodes 2009, Ann.
Statist. 37: Kruskal ranks K + K + K >= 2K + 2 when every confusion matrix is invertible).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import FrozenInstanceError

import numpy as np
import pandas as pd

from .._validation import _preview, check_choice
from .._validation import one_line as _one_line
from ..core.tables import Responses
from ..warnings import DataWarning, IdentifiabilityWarning
from .annotations import (MISSING, REPEATED, AnnotationSet, _check_unique_ids, _count, _describe_repeats, _factorize,
                          _frozen, _gold_vector, _positions_array, _readonly)
from .loaders import (MISSING_TOKENS, _check_unique, _ids_as_ints, _item_ids, _natural_ids, _require,
                      _resolve, read_table)
from .responses import pair_keys, repeated_runs, sort_responses

__all__ = ["MulticlassAnnotationSet", "PROBS_TOL", "check_multiclass_design", "is_multiclass_labels",
           "load_multiclass", "multiclass_design_problems"]

#: Largest ``|sum_k probs[i, k] - 1|`` accepted (rows within it are renormalised). A float16 / float32 softmax
#: rounded to 4-5 decimals sums to 1 within about 1e-4; a larger gap means the columns are not the
#: probabilities of these classes (a class column missing, logits, percentages).
PROBS_TOL = 1e-3
_INT16_MAX = int(np.iinfo(np.int16).max)
#: Columns of a wide labels file that :func:`is_multiclass_labels` never reads as annotators.
_NOT_LABELS = ("score", "gold")
#: The K-class channel models the design checks know (contract of issue 18).
MODELS = ("dawid_skene", "grouped", "pooled")


# ---------------------------------------------------------------------------------------------- class names
def _class_name(value):
    """A label value as a class name: ``int`` for integral numbers (3, 3.0, np.int64(3)), ``str`` for strings.

    Returns None for values that cannot name a class (NaN, non-integral floats, booleans, other objects).
    """
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return int(value) if math.isfinite(value) and float(value).is_integer() else None
    if isinstance(value, (str, np.str_)):
        return str(value) if str(value).strip() else None
    return None


def _sorted_classes(names) -> tuple:
    """Sorted class names: integers numerically first, then strings alphabetically."""
    return tuple(sorted(set(names), key=lambda c: (isinstance(c, str), c)))


def _check_classes(classes) -> tuple:
    """``classes=`` as a tuple of distinct class names (ints or strings), at least two of them."""
    if isinstance(classes, (str, bytes)) or not hasattr(classes, "__iter__"):
        raise ValueError(f"`classes` must be a sequence of class names (integers or strings); got {classes!r}.")
    raw = list(classes)
    names = [_class_name(c) for c in raw]
    bad = [c for c, n in zip(raw, names) if n is None]
    if bad:
        raise ValueError(f"`classes` must hold integers or non-empty strings; got {_preview(bad)}.")
    dup = sorted({c for c in names if names.count(c) > 1}, key=str)
    if dup:
        raise ValueError(f"`classes` must be distinct; {_preview(dup)} appear more than once.")
    if len(names) < 2:
        raise ValueError(f"`classes` must name at least two classes; got {names}.")
    if len(names) > _INT16_MAX:
        raise ValueError(f"{len(names)} classes exceed the int16 labels of the responses ({_INT16_MAX}).")
    if MISSING in names:
        raise ValueError("`classes` may not contain -1, which marks a missing label.")
    return tuple(names)


def _encode(values, classes, *, what: str, where) -> tuple:
    """Class indices (int16) of ``values`` (no missing entries) and the class tuple.

    Parameters
    ----------
    values : array-like of shape (m,)
        Class names (integers, integral floats or strings).
    classes : tuple or None
        Given classes (checked), or None to infer them from ``values``.
    what : str
        Name of the input in messages (``"`label`"``).
    where : callable
        ``where(mask) -> str`` describing the offending positions, e.g. ``"at rows [3, 9]"``.

    Notes
    -----
    ``pd.factorize`` runs once over the values; only the distinct values are converted in Python, so the
    cost is O(m) whatever the number of classes.
    """
    codes, uniques = pd.factorize(pd.Series(np.asarray(values, dtype=object)))
    uniques = list(uniques)
    names = [_class_name(u) for u in uniques]
    not_names = np.asarray([n is None for n in names], dtype=bool)
    if not_names.any():
        bad = not_names[codes]
        raise ValueError(f"{what} must hold class names (integers or strings); got "
                         f"{_preview([uniques[k] for k in np.flatnonzero(not_names)][:5])} {where(bad)}.")
    if MISSING in names:
        bad = codes == names.index(MISSING)
        raise ValueError(f"{what} holds -1 {where(bad)}, the marker of a missing label. Drop those responses.")
    if classes is None:
        classes = _sorted_classes(names)
        if len(classes) < 2:
            raise ValueError(f"{what} holds a single class {list(classes)}; pass classes= to name the others.")
    index = {c: k for k, c in enumerate(classes)}
    outside = np.asarray([n not in index for n in names], dtype=bool)
    if outside.any():
        bad = outside[codes]
        raise ValueError(f"{what} holds {_preview([names[k] for k in np.flatnonzero(outside)])}, which are not among "
                         f"the classes {_preview(list(classes))}, {where(bad)}. Add them to `classes` or fix the "
                         "labels.")
    lookup = np.asarray([index[n] for n in names], dtype=np.int16)
    return lookup[codes], classes


def _unique_ids(ids, what: str) -> np.ndarray:
    """``ids`` as an object array, checked to be unique (the repeated ones named)."""
    _check_unique_ids(ids, what)
    return np.asarray(ids, dtype=object)


# ---------------------------------------------------------------------------------------------- probs and gold
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


# ---------------------------------------------------------------------------------------------- the set
class MulticlassAnnotationSet:
    """Labels in K classes from several annotators, and optionally the classifier's class probabilities.

    Build it with :meth:`from_long`, :meth:`from_wide`, :meth:`from_cleanlab`, from integer arrays with
    :meth:`from_responses`, or from CSV files with :func:`load_multiclass`. The set is immutable. As in
    :class:`~noisycal_bayes.data.AnnotationSet`, an annotator may label an item more than once: each label is
    a response of its own, conditionally independent of the others given the item's clean label.

    Attributes
    ----------
    classes : tuple of int or str
        The class names; class index ``k`` stands for ``classes[k]``. ``n_classes = len(classes)``.
    responses : Responses
        ``item`` (int32), ``annotator`` (int32), ``label`` (int16 class index in ``0 .. K - 1``), each of
        shape (n_responses,), sorted by item then annotator (repeats of a pair in input order). Read-only.
    probs : ndarray of shape (n_items, n_classes), float64, or None
        Classifier probabilities, column ``k`` for ``classes[k]``; rows sum to 1. Read-only.
    gold : ndarray of shape (n_items,), int16, or None
        Known clean labels as class indices, -1 where unknown. Read-only.
    item_ids : ndarray of shape (n_items,), object
    annotator_ids : ndarray of shape (n_annotators,), object

    Examples
    --------
    >>> import pandas as pd
    >>> long = pd.DataFrame({"item": [1, 1, 1, 2, 2, 2], "annotator": ["a", "b", "c"] * 2,
    ...                      "label": ["cat", "dog", "cat", "bird", "bird", "dog"]})
    >>> probs = pd.DataFrame({"item": [1, 2], "bird": [0.1, 0.7], "cat": [0.6, 0.1], "dog": [0.3, 0.2]})
    >>> data = MulticlassAnnotationSet.from_long(long, probs)
    >>> data.classes, data.n_classes, data.labels.tolist()
    (('bird', 'cat', 'dog'), 3, [[1, 2, 1], [0, 0, 2]])
    >>> data.majority_vote().tolist(), data.probs[0].tolist()
    ([1, 0], [0.1, 0.6, 0.3])
    """

    def __init__(self, *args, **kwargs):
        raise TypeError("build a MulticlassAnnotationSet with MulticlassAnnotationSet.from_long, .from_wide, "
                        ".from_responses, .from_cleanlab, or load_multiclass.")

    # Response-level views that do not depend on the label alphabet: the binary set's own.
    n_items = AnnotationSet.n_items
    n_annotators = AnnotationSet.n_annotators
    n_responses = AnnotationSet.n_responses
    n_repeated = AnnotationSet.n_repeated
    has_repeats = AnnotationSet.has_repeats
    has_missing = AnnotationSet.has_missing
    observed = AnnotationSet.observed
    labels_per_item = AnnotationSet.labels_per_item
    labels_per_annotator = AnnotationSet.labels_per_annotator
    __setstate__ = AnnotationSet.__setstate__

    def __setattr__(self, name, value):
        raise FrozenInstanceError(f"cannot assign to field {name!r}: a MulticlassAnnotationSet is immutable "
                                  "(build a new one, e.g. with .subset()).")

    def __delattr__(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}: a MulticlassAnnotationSet is immutable.")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def _from_codes(cls, item, annotator, label, n_items, n_annotators, *, classes, probs, item_ids, annotator_ids,
                    gold, repeated, names=("item", "annotator")) -> "MulticlassAnnotationSet":
        """Build from checked positions and class indices; sorts, handles repeats, checks probs and gold.

        ``probs`` is an aligned (n_items, K) array or None (checked here); ``gold`` checked class indices
        (n_items,), int, -1 unknown, or None.
        """
        item_ids = np.asarray(item_ids, dtype=object)
        annotator_ids = np.asarray(annotator_ids, dtype=object)
        if n_items * n_annotators >= 2 ** 62:
            raise ValueError(f"{n_items} items x {n_annotators} annotators is too large to index pairs with int64.")
        key, order = sort_responses(item, annotator, label, n_annotators)
        later, starts = repeated_runs(key)
        if starts.size and repeated == "error":
            raise ValueError(f"{_describe_repeats(key, starts, n_annotators, item_ids, annotator_ids, names)}: an "
                             "annotator labelled the same item more than once. Pass repeated='keep' to use every label "
                             "(each a conditionally independent response given the clean label) or repeated='first' "
                             "to keep the first.")
        n_repeated = 0 if repeated == "first" else starts.size
        if starts.size and repeated == "first":
            key = key[~later]
            order = np.flatnonzero(~later) if order is None else order[~later]
        if order is None:  # already sorted, nothing dropped: plain int32 / int16 copies
            it, an = np.array(item, dtype=np.int32), np.array(annotator, dtype=np.int32)
            lab = np.array(label, dtype=np.int16)
        else:  # positions from the sorted keys (arithmetic, cheaper than two gathers); labels through `order`
            it, an = (key // n_annotators).astype(np.int32), (key % n_annotators).astype(np.int32)
            lab = np.asarray(label)[order].astype(np.int16)
        for what, codes, n, ids in (("items", it, n_items, item_ids), ("annotators", an, n_annotators, annotator_ids)):
            empty = np.bincount(codes, minlength=n) == 0
            if empty.any():
                hint = ("have no label from any annotator. Drop them (or lower `n_items`)" if what == "items" else
                        "did not label any item. Drop them (or lower `n_annotators`), or check the annotator column")
                raise ValueError(f"{what} {_preview(ids[empty])} {hint}.")
        obj = cls.__new__(cls)
        set_ = object.__setattr__
        set_(obj, "_responses", Responses(_frozen(it), _frozen(an), _frozen(lab)))
        set_(obj, "_n_items", int(n_items))
        set_(obj, "_n_annotators", int(n_annotators))
        set_(obj, "_n_repeated", int(n_repeated))
        set_(obj, "_n_pairs", int(it.size - (later.sum() if n_repeated else 0)))
        set_(obj, "_labels", None)
        set_(obj, "classes", tuple(classes))
        set_(obj, "item_ids", _readonly(item_ids))
        set_(obj, "annotator_ids", _readonly(annotator_ids))
        set_(obj, "probs", None if probs is None else _check_probs(probs, item_ids, classes))
        set_(obj, "gold", None if gold is None else _frozen(np.array(gold, dtype=np.int16)))
        return obj

    @classmethod
    def from_responses(cls, item, annotator, label, *, n_items=None, n_annotators=None, n_classes=None, classes=None,
                       probs=None, item_ids=None, annotator_ids=None, gold=None,
                       repeated: str = "keep") -> "MulticlassAnnotationSet":
        """Build from integer arrays of responses, one (item, annotator, class index) triple each: the fast route.

        Parameters
        ----------
        item : int array of shape (n_responses,)
            Item positions ``0 .. n_items - 1``.
        annotator : int array of shape (n_responses,)
            Annotator positions ``0 .. n_annotators - 1``.
        label : int array of shape (n_responses,)
            Class indices ``0 .. n_classes - 1``.
        n_items, n_annotators : int, optional
            Default: the number of ids when given, else the largest position + 1.
        n_classes : int, optional
            Default: ``len(classes)`` when given, else the largest class index + 1 (at least 2).
        classes : sequence of int or str, optional
            Names of the classes ``0 .. K - 1``. Default: ``(0, 1, ..., K - 1)``.
        probs : array of shape (n_items, n_classes) or DataFrame, optional
            Class probabilities (rows sum to 1 within :data:`PROBS_TOL`; renormalised). A DataFrame is
            matched by item id (its index or ``item`` column) and class name (column per class).
        item_ids, annotator_ids : array-like, optional
            Ids (unique). Default: the positions ``0, 1, ...``.
        gold : array of shape (n_items,) or Series / dict keyed by item id, optional
            Known clean labels as class **indices** (like ``label``), -1 or NaN where unknown.
        repeated : {"keep", "first", "error"}
            An annotator who labels an item more than once: keep every label, the first, or refuse.

        Returns
        -------
        MulticlassAnnotationSet

        Raises
        ------
        ValueError
            Arrays of different lengths or not integers, positions or class indices out of range (naming the
            responses), items or annotators without a response, repeated pairs with ``repeated="error"``,
            bad ids, probabilities or gold labels (naming the items).

        Examples
        --------
        >>> data = MulticlassAnnotationSet.from_responses([0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2],
        ...                                               [2, 2, 1, 0, 0, 0], classes=["a", "b", "c"])
        >>> data.n_classes, data.majority_vote().tolist(), data.vote_distribution()[0].round(3).tolist()
        (3, [2, 0], [0.0, 0.333, 0.667])
        """
        check_choice(repeated, REPEATED, name="repeated", func="MulticlassAnnotationSet.from_responses")
        it = _positions_array(item, "item")
        an = _positions_array(annotator, "annotator")
        lab = _positions_array(label, "label")
        if not (it.shape == an.shape == lab.shape):
            raise ValueError(f"`item`, `annotator` and `label` must have the same length; got {it.size}, {an.size} "
                             f"and {lab.size}.")
        if it.size == 0:
            raise ValueError("no responses: `item`, `annotator` and `label` are empty.")
        if classes is not None:
            classes = _check_classes(classes)
        n_classes = _count(n_classes, classes, lab, "n_classes", "classes", "label")
        if n_classes < 2:
            raise ValueError(f"`n_classes` must be at least 2; the labels use {n_classes} class. Pass n_classes= or "
                             "classes= to name the others.")
        classes = tuple(range(n_classes)) if classes is None else classes
        n_items = _count(n_items, item_ids, it, "n_items", "item_ids", "item")
        n_annotators = _count(n_annotators, annotator_ids, an, "n_annotators", "annotator_ids", "annotator")
        for codes, n, name, n_name in ((it, n_items, "item", "n_items"), (an, n_annotators, "annotator", "n_annotators"),
                                       (lab, n_classes, "label", "n_classes")):
            bad = (codes < 0) | (codes >= n)
            if bad.any():
                pos = np.flatnonzero(bad)
                what = "class indices" if name == "label" else "positions"
                raise ValueError(f"`{name}` must hold {what} 0 .. {n - 1} (`{n_name}` = {n}); got "
                                 f"{_preview(pd.unique(codes[pos]))} at responses {_preview(pos)}.")
        item_ids = np.arange(n_items).astype(object) if item_ids is None else _unique_ids(item_ids, "item_ids")
        annotator_ids = (np.arange(n_annotators).astype(object) if annotator_ids is None
                         else _unique_ids(annotator_ids, "annotator_ids"))
        if probs is not None:
            probs = _align_probs(probs, item_ids, classes)
        if gold is not None:
            gold = _gold_codes(gold, item_ids, classes, names=False)
        return cls._from_codes(it, an, lab, n_items, n_annotators, classes=classes, probs=probs, item_ids=item_ids,
                               annotator_ids=annotator_ids, gold=gold, repeated=repeated)

    @classmethod
    def from_long(cls, df: pd.DataFrame, probs=None, *, item: str = "item", annotator: str = "annotator",
                  label: str = "label", classes=None, gold=None, repeated: str = "keep") -> "MulticlassAnnotationSet":
        """Build from long format: one row per (item, annotator, label); labels are class names.

        Parameters
        ----------
        df : DataFrame
            Columns ``item``, ``annotator``, ``label`` (names configurable). Labels are integers or strings.
        probs : DataFrame, or array of shape (n_items, n_classes), optional
            A DataFrame with an ``item`` column (or indexed by item id) and one column per class, named as the
            class (``3`` or ``"3"`` for class 3); rows of items nobody annotated are dropped with a
            :class:`~noisycal_bayes.warnings.DataWarning`. An array has rows in the order of the sorted unique
            items (:attr:`item_ids`) and columns in class order.
        classes : sequence, optional
            The classes in index order. Default: the sorted distinct labels (integers numerically).
        gold : str, Series or dict, optional
            Known clean labels as class names: a column of ``df`` (blank / NaN where unknown; rows of one item
            may not disagree) or a Series / dict ``{item: class}`` over some of the items.
        repeated : {"keep", "first", "error"}
            Rows that repeat an (item, annotator) pair: keep each, keep the first, or refuse naming the pairs.

        Raises
        ------
        ValueError
            Missing columns, missing ids or labels, a label outside ``classes`` (naming rows and items), bad
            probabilities (a class without a column, columns that are not classes, rows not summing to 1,
            negatives, NaN; naming them), gold labels that are not classes, conflicting or for unknown items,
            repeated pairs with ``repeated="error"``, empty input.
        """
        check_choice(repeated, REPEATED, name="repeated", func="MulticlassAnnotationSet.from_long")
        if not isinstance(df, pd.DataFrame):
            raise ValueError(f"`df` must be a pandas DataFrame in long format; got {type(df).__name__}.")
        missing_cols = [c for c in (item, annotator, label) if c not in df.columns]
        if isinstance(gold, str) and gold not in df.columns:
            missing_cols.append(gold)
        if missing_cols:
            raise ValueError(f"`df` is missing column(s) {missing_cols}; it has {list(df.columns)}. Pass item=, "
                             "annotator=, label= (and gold=) to name your columns.")
        if len(df) == 0:
            raise ValueError("`df` is empty.")
        rows = np.asarray(df.index)
        for col in (item, annotator, label):
            nulls = df[col].isna().to_numpy()
            if nulls.any():
                hint = " Drop rows without a label." if col == label else ""
                raise ValueError(f"column `{col}` has missing values at rows {_preview(rows[nulls])}.{hint}")
        if classes is not None:
            classes = _check_classes(classes)
        items = df[item].to_numpy()
        codes, classes = _encode(df[label].to_numpy(), classes, what=f"`{label}`",
                                 where=lambda m: f"at rows {_preview(rows[m])} ({item} {_preview(pd.unique(items[m]))})")
        item_codes, item_ids = _factorize(df[item])
        ann_codes, ann_ids = _factorize(df[annotator])
        if probs is not None:
            probs = _align_probs(probs, item_ids, classes, item=item)
        if isinstance(gold, str):
            gold = _gold_from_rows(df[gold], item_codes, item_ids, classes, column=gold, item=item)
        elif gold is not None:
            gold = _gold_codes(gold, item_ids, classes, names=True)
        return cls._from_codes(item_codes, ann_codes, codes, item_ids.size, ann_ids.size, classes=classes, probs=probs,
                               item_ids=item_ids, annotator_ids=ann_ids, gold=gold, repeated=repeated,
                               names=(item, annotator))

    @classmethod
    def from_wide(cls, labels, probs=None, *, classes=None, annotators=None, gold=None) -> "MulticlassAnnotationSet":
        """Build from a wide matrix of shape (n_items, n_annotators); NaN, None or -1 marks a missing label.

        Parameters
        ----------
        labels : DataFrame or array of shape (n_items, n_annotators)
            Class names (integers, integral floats because of NaN, or strings). A DataFrame's index gives the
            item ids and its columns the annotator ids; an array gives ids ``0, 1, ...``.
        probs : array of shape (n_items, n_classes) or DataFrame, optional
            An array has rows in the order of ``labels`` and columns in class order; a DataFrame is matched by
            item id (index or ``item`` column) and class name (one column per class).
        classes : sequence, optional
            The classes in index order. Default: the sorted distinct labels.
        annotators : sequence, optional
            Annotator ids (default: the columns of a DataFrame, else ``0, 1, ...``).
        gold : array of shape (n_items,), Series or dict, optional
            Known clean labels as class names, -1 / NaN where unknown.

        Raises
        ------
        ValueError
            A wrong shape, labels that are not class names or outside ``classes`` (naming item, annotator and
            value), rows or columns with no label, bad probabilities or gold labels (naming them).

        Examples
        --------
        A file laid out like CIFAR-10N's ``cifar10n_10class.csv`` (``item, ann1..ann3, p0..p9``) gives the
        labels and the softmax columns directly; here with three classes:

        >>> import pandas as pd
        >>> df = pd.DataFrame({"item": [7, 8], "ann1": [2, 0], "ann2": [2, 1], "ann3": [1, None],
        ...                    "p0": [0.1, 0.6], "p1": [0.2, 0.3], "p2": [0.7, 0.1]}).set_index("item")
        >>> data = MulticlassAnnotationSet.from_wide(df[["ann1", "ann2", "ann3"]],
        ...                                          df[["p0", "p1", "p2"]].to_numpy(), classes=range(3))
        >>> data.labels.tolist(), data.majority_vote().tolist(), data.probs.shape
        ([[2, 2, 1], [0, 1, -1]], [2, 0], (2, 3))
        """
        if isinstance(labels, pd.DataFrame):
            item_ids = labels.index.to_numpy(dtype=object)
            ann_ids = labels.columns.to_numpy(dtype=object)
            values = labels.to_numpy(dtype=object, na_value=None)
        else:
            values = np.asarray(labels, dtype=object)
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
        item_ids, ann_ids = _unique_ids(item_ids, "item_ids"), _unique_ids(ann_ids, "annotator_ids")
        missing = pd.isna(values) | np.vectorize(lambda v: _class_name(v) == MISSING, otypes=[bool])(values)
        rows, cols = np.nonzero(~missing)  # row by row: responses sorted by item, then annotator
        if classes is not None:
            classes = _check_classes(classes)

        def where(mask):
            cells = [(item_ids[i], ann_ids[j], values[i, j]) for i, j in zip(rows[mask][:8], cols[mask][:8])]
            return f"at (item, annotator, label) {_preview(cells)}"

        codes, classes = _encode(values[rows, cols], classes, what="`labels`", where=where)
        if probs is not None:
            probs = _align_probs(probs, item_ids, classes)
        if gold is not None:
            gold = _gold_codes(gold, item_ids, classes, names=True)
        return cls._from_codes(rows, cols, codes, len(item_ids), len(ann_ids), classes=classes, probs=probs,
                               item_ids=item_ids, annotator_ids=ann_ids, gold=gold, repeated="keep")

    @classmethod
    def from_cleanlab(cls, labels_multiannotator, pred_probs=None) -> "MulticlassAnnotationSet":
        """Build from cleanlab's multi-annotator format (``cleanlab.multiannotator``), K classes.

        Parameters
        ----------
        labels_multiannotator : DataFrame or array of shape (n_items, n_annotators)
            One row per example, one column per annotator, NaN where an annotator gave no label; labels are
            class indices ``0 .. K - 1`` (cleanlab's convention), possibly floats because of the NaN.
        pred_probs : array or DataFrame of shape (n_items, K), optional
            Predicted class probabilities, row ``i`` for row ``i`` of ``labels_multiannotator`` (matched by
            position, as in cleanlab), column ``k`` for class ``k``. ``K`` is its number of columns; without
            it, ``K`` is the largest label + 1.

        Returns
        -------
        MulticlassAnnotationSet
            With ``classes == (0, 1, ..., K - 1)``.

        Raises
        ------
        ValueError
            Labels that are not class indices ``0 .. K - 1`` or NaN (naming item, annotator and value; -1 gets
            the hint that cleanlab marks a missing label with NaN), rows or columns with no label,
            ``pred_probs`` with a different index, of the wrong shape or with bad rows (naming the items).

        Examples
        --------
        >>> import numpy as np
        >>> labels = np.array([[0, 2, np.nan], [1, 1, 1], [np.nan, 2, 2]])
        >>> probs = np.array([[0.5, 0.2, 0.3], [0.1, 0.8, 0.1], [0.0, 0.1, 0.9]])
        >>> data = MulticlassAnnotationSet.from_cleanlab(labels, probs)
        >>> data.classes, data.labels.tolist()
        ((0, 1, 2), [[0, 2, -1], [1, 1, 1], [-1, 2, 2]])
        """
        is_frame = isinstance(labels_multiannotator, pd.DataFrame)
        values = (labels_multiannotator.to_numpy(dtype=object, na_value=None) if is_frame
                  else np.asarray(labels_multiannotator, dtype=object))
        if values.ndim != 2 or values.size == 0:
            raise ValueError("`labels_multiannotator` must have shape (n_items, n_annotators), one column per "
                             f"annotator, and not be empty; got shape {values.shape}.")
        item_ids = (labels_multiannotator.index.to_numpy(dtype=object) if is_frame
                    else np.arange(values.shape[0]).astype(object))
        ann_ids = (labels_multiannotator.columns.to_numpy(dtype=object) if is_frame
                   else np.arange(values.shape[1]).astype(object))
        item_ids, ann_ids = _unique_ids(item_ids, "item_ids"), _unique_ids(ann_ids, "annotator_ids")
        names = np.vectorize(_class_name, otypes=[object])(values)
        given = ~pd.isna(values)
        if pred_probs is not None:
            if isinstance(pred_probs, pd.DataFrame):
                if is_frame and not pred_probs.index.equals(labels_multiannotator.index):
                    raise ValueError("`pred_probs` and `labels_multiannotator` have different indexes; rows are "
                                     "matched by position (as in cleanlab). Pass `pred_probs.to_numpy()` if the order "
                                     "is right, or reindex `pred_probs` like `labels_multiannotator`.")
                pred_probs = pred_probs.to_numpy()
            shape = np.shape(pred_probs)
            if len(shape) != 2 or shape[1] < 2:
                raise ValueError(f"`pred_probs` must have shape ({values.shape[0]}, K), one column per class; got "
                                 f"{shape}.")
            n_classes = shape[1]
        else:
            ints = [n for n in names[given] if isinstance(n, int)]
            n_classes = max(2, max(ints, default=0) + 1)
        bad = given & ~np.isin(names, list(range(n_classes)))
        if bad.any():
            cells = [(item_ids[i], ann_ids[j], values[i, j]) for i, j in zip(*np.nonzero(bad))]
            hint = (" cleanlab marks a missing label with NaN, not -1." if any(n == MISSING for n in names[bad])
                    else f" Classes are the columns 0 .. {n_classes - 1} of `pred_probs`." if pred_probs is not None
                    else "")
            raise ValueError(f"`labels_multiannotator` must hold class indices 0 .. {n_classes - 1}, or NaN for no "
                             f"label; got (item, annotator, label) {_preview(cells)}.{hint}")
        rows, cols = np.nonzero(given)
        return cls._from_codes(rows, cols, names[rows, cols].astype(np.int16), len(item_ids), len(ann_ids),
                               classes=tuple(range(n_classes)), probs=pred_probs, item_ids=item_ids,
                               annotator_ids=ann_ids, gold=None, repeated="keep")

    # ------------------------------------------------------------------ views
    @property
    def n_classes(self) -> int:
        """Number of classes K."""
        return len(self.classes)

    @property
    def responses(self) -> Responses:
        """The labels as (item, annotator, class index) triples (int32, int32, int16), sorted by item then annotator.

        Read-only; this is the storage (no cost). Repeated labels of one pair are adjacent, in input order.
        """
        return self._responses

    @property
    def labels(self) -> np.ndarray:
        """Dense class indices of shape (n_items, n_annotators), int16, -1 where missing. Built once, cached.

        Raises
        ------
        ValueError
            The set has repeated (item, annotator) pairs, which one cell cannot hold.
        """
        if self._labels is None:
            item, ann, lab = self._responses
            if self._n_repeated:
                key = pair_keys(item, ann, self._n_annotators)
                _, starts = repeated_runs(key)
                raise ValueError(
                    f"this MulticlassAnnotationSet has "
                    f"{_describe_repeats(key, starts, self._n_annotators, self.item_ids, self.annotator_ids)}, and the "
                    "dense `labels` matrix holds one label per pair. Use `.responses`, or build the set with "
                    "repeated='first' to keep the first label of each pair.")
            dense = np.full((self._n_items, self._n_annotators), MISSING, dtype=np.int16)
            dense[item, ann] = lab
            object.__setattr__(self, "_labels", _frozen(dense))
        return self._labels

    def require_probs(self) -> np.ndarray:
        """The class probabilities (n_items, n_classes); ``ValueError`` when the set has none."""
        if self.probs is None:
            raise ValueError("this computation needs class probabilities; build the MulticlassAnnotationSet with "
                             "`probs=` (command line: a probabilities file with `item` and one column per class).")
        return self.probs

    def vote_counts(self) -> np.ndarray:
        """Responses per item and class, shape (n_items, n_classes), int64 (repeats count as votes)."""
        item, _, lab = self._responses
        k = self.n_classes
        # One bincount over the flat (item, class) cell index instead of K passes.
        flat = item.astype(np.int64) * k + lab
        return np.bincount(flat, minlength=self._n_items * k).reshape(self._n_items, k)

    def vote_distribution(self) -> np.ndarray:
        """Fraction of an item's responses in each class, shape (n_items, n_classes); rows sum to 1."""
        counts = self.vote_counts()
        return counts / counts.sum(axis=1, keepdims=True)

    def majority_vote(self) -> np.ndarray:
        """Most frequent class index per item, shape (n_items,), int64.

        Every response is a vote (repeats included). Ties are broken toward the **lowest class index**
        (``np.argmax`` returns the first maximum); count them with :meth:`n_ties`.
        """
        return self.vote_counts().argmax(axis=1)

    def n_ties(self) -> int:
        """Number of items whose top vote count is shared by two or more classes."""
        counts = self.vote_counts()
        return int(((counts == counts.max(axis=1, keepdims=True)).sum(axis=1) > 1).sum())

    def to_long(self) -> pd.DataFrame:
        """Long format with columns ``item, annotator, label`` (class names), one row per response, sorted."""
        item, ann, lab = self._responses
        return pd.DataFrame({"item": self.item_ids[item], "annotator": self.annotator_ids[ann],
                             "label": np.asarray(self.classes, dtype=object)[lab]})

    def summary(self) -> dict:
        """Counts that describe the set, as a dict of plain values.

        The keys of :meth:`AnnotationSet.summary() <noisycal_bayes.data.AnnotationSet.summary>` (``items``,
        ``annotators``, ``responses``, ``repeated_pairs``, ``repeated_responses``, ``labels_per_item_min`` /
        ``_median`` / ``_max``, the same for ``labels_per_annotator``, ``gold_items``), with ``probs`` (whether
        probabilities exist) in place of ``scores``, and ``n_classes``, ``classes`` (list) and ``label_counts``
        (responses per class, a dict keyed by class name).

        Examples
        --------
        >>> data = MulticlassAnnotationSet.from_responses([0, 0, 1, 1, 1], [0, 1, 0, 1, 1], [2, 1, 0, 2, 2],
        ...                                               gold=[2, -1])
        >>> s = data.summary()
        >>> s["n_classes"], s["label_counts"], s["repeated_pairs"], s["gold_items"]
        (3, {0: 1, 1: 1, 2: 3}, 1, 1)
        """
        counts = {"labels_per_item": self.labels_per_item(), "labels_per_annotator": self.labels_per_annotator()}
        out = {"items": self._n_items, "annotators": self._n_annotators, "responses": self.n_responses,
               "repeated_pairs": self._n_repeated, "repeated_responses": self.n_responses - self._n_pairs}
        out.update({f"{name}_{stat}": (float(np.median(c)) if stat == "median" else int(getattr(c, stat)()))
                    for name, c in counts.items() for stat in ("min", "median", "max")})
        out["gold_items"] = 0 if self.gold is None else int((self.gold >= 0).sum())
        out["probs"] = self.probs is not None
        per_class = np.bincount(self._responses.label, minlength=self.n_classes)
        out.update(n_classes=self.n_classes, classes=list(self.classes),
                   label_counts={c: int(n) for c, n in zip(self.classes, per_class)})
        return out

    def subset(self, items) -> "MulticlassAnnotationSet":
        """A new set restricted to rows ``items`` (integer positions or a boolean mask), in that order.

        The classes are kept (a class nobody labels in the subset keeps its index); annotators left without a
        label are dropped.
        """
        idx = np.arange(self._n_items)[np.asarray(items)]
        if idx.size == 0:
            raise ValueError("the subset is empty: no items selected.")
        new_pos = np.full(self._n_items, -1, dtype=np.int64)
        new_pos[idx] = np.arange(idx.size)
        dup = pd.Series(idx).duplicated().to_numpy()
        if dup.any():
            raise ValueError(f"`items` selects items {_preview(self.item_ids[pd.unique(idx[dup])])} more than once.")
        item, ann, lab = self._responses
        sel = new_pos[item] >= 0
        kept = np.unique(ann[sel])  # sorted annotator positions that keep a label
        return type(self)._from_codes(new_pos[item][sel], np.searchsorted(kept, ann[sel]), lab[sel], idx.size,
                                      kept.size, classes=self.classes,
                                      probs=None if self.probs is None else self.probs[idx],
                                      item_ids=self.item_ids[idx], annotator_ids=self.annotator_ids[kept],
                                      gold=None if self.gold is None else self.gold[idx], repeated="keep")

    def to_binary(self) -> AnnotationSet:
        """The same data as a binary :class:`~noisycal_bayes.data.AnnotationSet` (only for K = 2).

        Class index 1 (``classes[1]``) is the positive class: labels are the class indices, ``scores`` is
        ``probs[:, 1]`` and ``gold`` the gold class indices. Responses, repeats, ids and gold are kept.

        Raises
        ------
        ValueError
            The set has more than two classes.
        """
        if self.n_classes != 2:
            raise ValueError(f"to_binary needs 2 classes; this set has {self.n_classes} {_preview(list(self.classes))}.")
        item, ann, lab = self._responses
        return AnnotationSet.from_responses(item, ann, lab, n_items=self._n_items, n_annotators=self._n_annotators,
                                            scores=None if self.probs is None else self.probs[:, 1],
                                            item_ids=self.item_ids, annotator_ids=self.annotator_ids,
                                            gold=self.gold, repeated="keep")

    def __repr__(self) -> str:
        extra = f", repeated_pairs={self._n_repeated}" if self._n_repeated else ""
        if self.gold is not None:
            extra += f", gold_items={int((self.gold >= 0).sum())}"
        return (f"MulticlassAnnotationSet(n_items={self._n_items}, n_annotators={self._n_annotators}, "
                f"n_classes={self.n_classes}, n_labels={self.n_responses}{extra}, "
                f"probs={'yes' if self.probs is not None else 'no'})")


# ---------------------------------------------------------------------------------------------- identifiability
def multiclass_design_problems(data: MulticlassAnnotationSet, model: str = "dawid_skene", *,
                               n_groups: int | None = None) -> list:
    """Reasons why the design of ``data`` cannot identify K x K confusion matrices (empty when it can).

    The rule checked (one-group models are ``model="dawid_skene"``, or any model with ``n_groups == 1``):

    - one group and two annotators: the joint label table ``C_1^T diag(pi) C_2`` has K^2 - 1 free cells for
      (2K + 1)(K - 1) parameters, so a continuum of confusion matrices fits it equally well;
    - one group and no item labelled by three distinct annotators: pairwise tables ``C_i^T diag(pi) C_j``
      leave ``C_i`` free up to a rotation of ``diag(pi)^(1/2) C_i``. With three annotators on common items the
      three-way table identifies every ``C_j`` generically (Kruskal 1977; Allman, Matias & Rhodes 2009, Ann.
      Statist. 37: Kruskal ranks K + K + K >= 2K + 2 for invertible confusion matrices);
    - any model, no item labelled by two annotators: one label per item fixes only each annotator's label
      distribution per group.

    With score groups, two annotators are identified through the groups' different class prevalences
    (``M_g = C_1^T diag(pi_g) C_2``, so ``M_1 M_2^-1`` has eigenvectors fixed by ``C_1`` when the ratios
    ``pi_1k / pi_2k`` differ), which a fit can only check afterwards.

    Parameters
    ----------
    data : MulticlassAnnotationSet
    model : str
        ``"dawid_skene"`` (one group), ``"grouped"`` or ``"pooled"``.
    n_groups : int, optional
        Number of non-empty score groups the fit uses (1 counts as the one-group model).

    Returns
    -------
    list of str
    """
    check_choice(model, MODELS, name="model", func="multiclass_design_problems")
    one_group = model == "dawid_skene" or n_groups == 1
    item, ann, _ = data.responses
    first = ~repeated_runs(pair_keys(item, ann, data.n_annotators))[0]  # one response per (item, annotator)
    # The most distinct annotators on one item, from the responses: no dense items x annotators mask.
    most = int(np.bincount(item[first], minlength=data.n_items).max())
    problems = []
    if one_group and data.n_annotators == 2:
        problems.append(
            "two annotators without score groups: K x K confusion matrices are not identified (the joint label table "
            "has K^2 - 1 free cells for (2K + 1)(K - 1) parameters). Add a third annotator on common items, or use "
            "score groups whose class prevalences differ (model='grouped').")
    elif one_group and data.n_annotators > 2 and most == 2:
        problems.append(
            "no item was labelled by three or more distinct annotators: without score groups, pairwise label "
            "tables do not identify K x K confusion matrices. Have some items labelled by three annotators, or "
            "use score groups (model='grouped').")
    if data.n_annotators >= 2 and most < 2:
        problems.append(
            "no item was labelled by two or more annotators: one label per item fixes only each annotator's label "
            "distribution per score group, which many pairs of confusion matrices and prevalences reproduce. Have "
            "some items labelled by several annotators.")
    return problems


def check_multiclass_design(data: MulticlassAnnotationSet, model: str = "dawid_skene", *, n_groups: int | None = None,
                            func: str = "fit", stacklevel: int = 3) -> list:
    """Check that ``model`` can identify the K x K channels of ``data`` before fitting.

    Parameters
    ----------
    data : MulticlassAnnotationSet
    model : str
        ``"dawid_skene"``, ``"grouped"`` or ``"pooled"``.
    n_groups : int, optional
        Number of non-empty score groups (see :func:`multiclass_design_problems`).
    func : str
        Name of the calling function, prefixed to the messages.

    Returns
    -------
    list of str
        The messages of :func:`multiclass_design_problems`, each also emitted as an
        :class:`~noisycal_bayes.warnings.IdentifiabilityWarning`.

    Raises
    ------
    ValueError
        A single annotator: its labels never identify its confusion matrix.

    Examples
    --------
    >>> import warnings
    >>> data = MulticlassAnnotationSet.from_responses([0, 0, 1, 1], [0, 1, 0, 1], [0, 2, 1, 1])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     notes = check_multiclass_design(data)
    >>> len(notes), caught[0].category.__name__
    (1, 'IdentifiabilityWarning')
    """
    if data.n_annotators < 2:
        raise ValueError(f"{func}: the data has a single annotator {_preview(data.annotator_ids)}; one annotator's "
                         "labels never identify its K x K confusion matrix. Add annotators (three on common items, or "
                         "two with score groups).")
    notes = [f"{func}: {msg}" for msg in multiclass_design_problems(data, model, n_groups=n_groups)]
    for msg in notes:
        warnings.warn(msg, IdentifiabilityWarning, stacklevel=stacklevel)
    return notes


# ---------------------------------------------------------------------------------------------- files
def _table_layout(table, item: str) -> tuple:
    """``("long" | "wide", item column, annotator column)`` of a labels table, as the binary loader decides."""
    item = _resolve(table, item, "item")
    annotator = _resolve(table, "annotator", "annotator")
    layout = "long" if annotator in table.header or "label" in table.header else "wide"
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
        item_ids = list(dict.fromkeys(items))
        item_ids = sorted(item_ids) if all(isinstance(i, int) for i in item_ids) else item_ids
        return layout, item, out, item_ids, ann_ids
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

    Raises
    ------
    ValueError
        One line naming the file, line, column and value of the first problem: missing columns, empty cells,
        a label outside ``classes``, a gold label that is not a class or conflicting for one item, a class
        without a probability column, probability columns that are not classes, probabilities that are not
        numbers >= 0, rows not summing to 1 (naming the items), annotated items without probabilities,
        repeated pairs with ``repeated="error"``, and a single annotator (K x K channels need at least two:
        see :func:`check_multiclass_design`).

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
        True when some label is neither 0 nor 1: more than two classes, or class names other than 0 and 1
        (say ``cat`` / ``dog``, or 1 / 2), which the binary loader refuses. In wide format the columns
        ``item``, ``task``, ``score`` and ``gold`` are not labels. Reads the file; writes nothing.

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
