"""Other tools' formats, for any number of classes: crowd-kit's long frame (``task, worker, label``) and cleanlab's
multi-annotator matrix with ``pred_probs``; neither library is needed. Details: docs/foundations.md,
*noisycal_bayes.data.interop*.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import _preview, check_probs
from ._inputs import _check_unique_ids, _factorize
from .annotations import AnnotationSet, MulticlassAnnotationSet
from .classes import MISSING, _class_name

__all__ = ["from_cleanlab", "from_crowdkit"]


def from_crowdkit(cls, df: pd.DataFrame, scores=None, *, gold="gold", repeated: str = "keep") -> AnnotationSet:
    """Build ``cls`` from a crowd-kit frame: one row per response, columns ``task``, ``worker``, ``label``.

    The frame crowd-kit's aggregators (``DawidSkene().fit(df)``, ``MajorityVote`` ...) take; other columns are
    ignored, except ``score`` (when ``scores`` is None) and ``gold`` (one value per task, blank where unknown).
    Binary labels are 0/1 (ints, floats, booleans or ``"0"``/``"1"``). Items are the sorted unique tasks,
    annotators the sorted unique workers. :class:`MulticlassAnnotationSet` reads the labels as class names and
    takes class probabilities in place of ``scores`` (a DataFrame with ``task`` and one column per class, or an
    array aligned with the sorted tasks).

    Parameters
    ----------
    df : DataFrame of shape (n_responses, >= 3)
        Columns ``task``, ``worker``, ``label``. Each (task, worker) pair at most once.
    scores : Series, dict, DataFrame or array-like of shape (n_tasks,), optional
        The score of each task, in [0, 1]: a Series or dict keyed by task, a DataFrame with columns ``task`` and
        ``score``, or an array **aligned with** ``sorted(df["task"].unique())`` (the returned ``item_ids``; ids
        that cannot be sorted together keep their order of first appearance: pass a Series or dict for those).
        Every task needs a score, and every scored task must appear in ``df``.
    gold : str, Series, dict or None
        Known clean labels: the name of a column of ``df`` (default ``"gold"``, used when present), or a
        Series / dict ``{task: 0 or 1}``; None ignores any gold column. See :meth:`from_long`.
    repeated : {"keep", "first", "error"}
        A worker who labels the same task more than once: keep every label (each a conditionally
        independent response given the clean label), the first, or refuse (naming the pairs).

    Returns
    -------
    AnnotationSet
        The same set :meth:`from_long` builds from ``df`` renamed to ``item, annotator, label``.

    Raises
    ------
    ValueError
        Missing columns (naming crowd-kit's old ``performer`` column), labels other than 0/1, repeated pairs with
        ``repeated="error"``, bad or conflicting gold labels, tasks without a score or scores of unknown tasks,
        an array of the wrong length, scores outside [0, 1]; the offending rows, tasks or pairs named.

    Examples
    --------
    >>> import pandas as pd
    >>> from noisycal_bayes.data import AnnotationSet
    >>> df = pd.DataFrame({"task": ["t2", "t1", "t1", "t2"], "worker": ["w1", "w1", "w2", "w2"],
    ...                    "label": [0, 1, 1, 1]})
    >>> data = AnnotationSet.from_crowdkit(df, scores={"t1": 0.8, "t2": 0.3})
    >>> list(data.item_ids), data.labels.tolist(), data.scores.tolist()
    (['t1', 't2'], [[1, 1], [0, 1]], [0.8, 0.3])
    """
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"`df` must be a pandas DataFrame with columns task, worker, label (crowd-kit's format); "
                         f"got {type(df).__name__}.")
    missing_cols = [c for c in ("task", "worker", "label") if c not in df.columns]
    if missing_cols:
        hint = (" crowd-kit before 1.0 called the worker column 'performer': rename it to 'worker'."
                if "performer" in df.columns and "worker" in missing_cols else
                " For other column names use AnnotationSet.from_long(df, item=..., annotator=..., label=...).")
        raise ValueError(f"`df` is missing column(s) {missing_cols}; it has {list(df.columns)}.{hint}")
    if isinstance(gold, str) and gold not in df.columns:
        if gold != "gold":
            raise ValueError(f"`df` has no gold column {gold!r}; it has {list(df.columns)}.")
        gold = None  # the default name, absent: no gold labels
    gold_cols = [gold] if isinstance(gold, str) else []
    opts = dict(item="task", annotator="worker", label="label", gold=gold, repeated=repeated)
    if cls.kind != "binary":
        return cls.from_long(df[list(dict.fromkeys(["task", "worker", "label"] + gold_cols))], scores, **opts)
    if scores is None:
        keep = [c for c in ("task", "worker", "label", "score") if c in df.columns] + gold_cols
        return cls.from_long(df[list(dict.fromkeys(keep))], score="score", **opts)
    frame = df[list(dict.fromkeys(["task", "worker", "label"] + gold_cols))]
    if frame["task"].isna().any():
        # from_long names the rows.
        return cls.from_long(frame, **opts)
    tasks = pd.Index(_factorize(frame["task"])[1], dtype=object)
    series = _crowdkit_scores(scores, tasks)
    given = pd.Index(series.index, dtype=object)
    unscored = tasks[~tasks.isin(given)]
    unknown = given[~given.isin(tasks)]
    if len(unscored) or len(unknown):
        parts = []
        if len(unscored):
            parts.append(f"tasks {_preview(unscored)} have no score")
        if len(unknown):
            parts.append(f"`scores` has tasks {_preview(unknown)} that are not in the `task` column of `df`")
        hint = ""
        if len(unscored) and len(unknown) and {str(t) for t in unscored} & {str(t) for t in unknown}:
            hint = " The ids differ only in type (e.g. 7 and '7'): convert one side."
        raise ValueError("; ".join(parts) + "." + hint)
    return cls.from_long(frame, series, **opts)


def from_cleanlab(cls, labels_multiannotator, pred_probs=None) -> AnnotationSet:
    """Build ``cls`` from cleanlab's multi-annotator format (``cleanlab.multiannotator``).

    ``cls.from_cleanlab(...)`` calls this: binary data below; for :class:`MulticlassAnnotationSet` see
    :func:`_multiclass_cleanlab` (labels ``0 .. K - 1``, ``pred_probs`` of shape (n_items, K)).

    Parameters
    ----------
    labels_multiannotator : DataFrame or array of shape (n_items, n_annotators)
        The input of ``cleanlab.multiannotator.get_label_quality_multiannotator``: one row per example, one
        column per annotator, class indices 0/1 (floats because of the NaN), NaN where missing. A DataFrame's
        index and columns give the item and annotator ids; an array gives ids 0, 1, ...
    pred_probs : array or DataFrame of shape (n_items, 2), optional
        Predicted class probabilities, matched by position as in cleanlab; rows sum to 1. The score of item
        ``i`` is ``pred_probs[i, 1]``.

    Returns
    -------
    AnnotationSet
        The same set as ``AnnotationSet.from_wide(labels_multiannotator, pred_probs[:, 1])``.

    Raises
    ------
    ValueError
        Labels other than 0, 1 or NaN (naming item, annotator and value; labels 2, 3, ... point to
        :class:`MulticlassAnnotationSet`), rows or columns with no label, bad ``pred_probs`` (naming the items).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from noisycal_bayes.data import AnnotationSet
    >>> labels = pd.DataFrame({"a": [1.0, 0.0, np.nan], "b": [1.0, np.nan, 0.0]})
    >>> data = AnnotationSet.from_cleanlab(labels, np.array([[0.1, 0.9], [0.8, 0.2], [0.6, 0.4]]))
    >>> data.labels.tolist(), data.scores.tolist()
    ([[1, 1], [0, -1], [-1, 0]], [0.9, 0.2, 0.4])
    """
    values, item_ids, ann_ids = _cleanlab_matrix(labels_multiannotator)
    if cls.kind != "binary":
        return _multiclass_cleanlab(cls, labels_multiannotator, pred_probs, values, item_ids, ann_ids)
    _check_cleanlab_labels(values, item_ids, ann_ids)
    scores = None
    if pred_probs is not None:
        scores = _positive_class_probs(pred_probs, labels_multiannotator, item_ids)
    return cls.from_wide(labels_multiannotator, scores)


def _cleanlab_matrix(labels):
    """``(values, item ids, annotator ids)`` of cleanlab's matrix: object arrays; a DataFrame names the ids."""
    if isinstance(labels, pd.DataFrame):
        # pd.isna reads NaN, None and pd.NA in the object copy.
        return (labels.to_numpy(dtype=object, copy=True), labels.index.to_numpy(dtype=object),
                np.asarray(labels.columns, dtype=object))
    values = np.asarray(labels, dtype=object)
    if values.ndim != 2:
        raise ValueError("`labels_multiannotator` must have shape (n_items, n_annotators), one column per "
                         f"annotator; got shape {values.shape}.")
    return values, np.arange(values.shape[0]).astype(object), np.arange(values.shape[1]).astype(object)


def _multiclass_cleanlab(cls, labels, pred_probs, values, item_ids, ann_ids) -> MulticlassAnnotationSet:
    """:func:`from_cleanlab` for K classes.

    Labels are class indices ``0 .. K - 1`` (cleanlab's convention), possibly floats because of the NaN;
    ``K`` is the number of columns of ``pred_probs`` (shape (n_items, K), rows matched by position), or without
    it the largest label + 1. The set has ``classes == (0, 1, ..., K - 1)``.

    Raises
    ------
    ValueError
        An empty matrix, labels that are not class indices ``0 .. K - 1`` or NaN (naming item, annotator and
        value; -1 gets the hint that cleanlab marks a missing label with NaN), rows or columns with no label,
        ``pred_probs`` with a different index, of the wrong shape or with bad rows (naming the items).

    Examples
    --------
    >>> import numpy as np
    >>> from noisycal_bayes.data import MulticlassAnnotationSet
    >>> labels = np.array([[0, 2, np.nan], [1, 1, 1], [np.nan, 2, 2]])
    >>> probs = np.array([[0.5, 0.2, 0.3], [0.1, 0.8, 0.1], [0.0, 0.1, 0.9]])
    >>> data = MulticlassAnnotationSet.from_cleanlab(labels, probs)
    >>> data.classes, data.labels.tolist()
    ((0, 1, 2), [[0, 2, -1], [1, 1, 1], [-1, 2, 2]])
    """
    if values.size == 0:
        raise ValueError("`labels_multiannotator` must have shape (n_items, n_annotators), one column per "
                         f"annotator, and not be empty; got shape {values.shape}.")
    _check_unique_ids(item_ids, "item_ids")
    _check_unique_ids(ann_ids, "annotator_ids")
    names = np.vectorize(_class_name, otypes=[object])(values)
    given = ~pd.isna(values)
    if pred_probs is not None:
        if isinstance(pred_probs, pd.DataFrame):
            if isinstance(labels, pd.DataFrame) and not pred_probs.index.equals(labels.index):
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


def _crowdkit_scores(scores, tasks: pd.Index) -> pd.Series:
    """``scores`` of :meth:`AnnotationSet.from_crowdkit` as a Series indexed by task."""
    if isinstance(scores, pd.Series):
        return scores
    if isinstance(scores, dict):
        return pd.Series(list(scores.values()), index=pd.Index(list(scores.keys()), dtype=object), dtype=object)
    if isinstance(scores, pd.DataFrame):
        missing_cols = [c for c in ("task", "score") if c not in scores.columns]
        if missing_cols:
            raise ValueError(f"`scores` is missing column(s) {missing_cols}; it has {list(scores.columns)}. "
                             "A scores DataFrame needs columns task and score.")
        return pd.Series(scores["score"].to_numpy(), index=pd.Index(scores["task"].to_numpy(), dtype=object))
    values = np.asarray(scores)
    if values.ndim != 1:
        raise ValueError("`scores` must be a Series or dict keyed by task, a DataFrame with columns task and score, "
                         f"or an array of shape ({len(tasks)},) aligned with the sorted unique tasks; "
                         f"got {type(scores).__name__} of shape {values.shape}.")
    if values.shape[0] != len(tasks):
        raise ValueError(f"`scores` has {values.shape[0]} values but `df` has {len(tasks)} distinct tasks; an array "
                         "of scores must hold one score per task, in the order of the sorted unique tasks "
                         f"({_preview(tasks)}). Pass a Series or dict keyed by task to match by id.")
    return pd.Series(values, index=tasks)


def _check_cleanlab_labels(values: np.ndarray, item_ids, ann_ids) -> None:
    """Cells of a cleanlab label matrix must be 0, 1 or missing; name the offending (item, annotator, value)."""
    missing = pd.isna(values)
    numeric = np.full(values.shape, np.nan)
    for idx in zip(*np.nonzero(~missing)):
        v = values[idx]
        if isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating)):
            numeric[idx] = float(v)
    bad = ~missing & ~np.isin(numeric, (0.0, 1.0))
    if not bad.any():
        return
    rows, cols = np.nonzero(bad)
    cells = [(item_ids[i], ann_ids[j], values[i, j]) for i, j in zip(rows, cols)]
    shown = _preview([(i, a, v if isinstance(v, str) else float(v) if np.isscalar(v) else v) for i, a, v in cells])
    hint = "Map your classes to 0/1 first."
    found = numeric[bad]
    if np.any(np.isfinite(found) & (found >= 2) & (found == np.round(found))):
        hint = "Labels 2, 3, ... are K-class data: use MulticlassAnnotationSet.from_cleanlab."
    elif np.any(found == -1):
        hint = "cleanlab marks a missing label with NaN, not -1."
    raise ValueError(f"`labels_multiannotator` must hold class indices 0 or 1, or NaN for no label; got "
                     f"(item, annotator, label) {shown}. {hint}")


def _positive_class_probs(pred_probs, labels, item_ids) -> np.ndarray:
    """Column 1 of cleanlab's ``pred_probs`` (shape (n_items, 2)) after checking shape and rows."""
    if isinstance(pred_probs, pd.DataFrame) and isinstance(labels, pd.DataFrame) \
            and not pred_probs.index.equals(labels.index):
        raise ValueError("`pred_probs` and `labels_multiannotator` have different indexes; rows are matched by "
                         "position (as in cleanlab). Pass `pred_probs.to_numpy()` if the order is right, or reindex "
                         "`pred_probs` like `labels_multiannotator`.")
    raw = pred_probs.to_numpy() if isinstance(pred_probs, pd.DataFrame) else pred_probs
    try:
        probs = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("`pred_probs` must be numeric, shape (n_items, 2).") from None
    n = len(item_ids)
    if probs.ndim != 2:
        raise ValueError(f"`pred_probs` must have shape ({n}, 2), the probabilities of classes 0 and 1; got shape "
                         f"{probs.shape}. For one positive-class score per item use AnnotationSet.from_wide(labels, scores).")
    if probs.shape[1] > 2:
        raise ValueError(f"`pred_probs` has {probs.shape[1]} columns (classes): K-class data; use "
                         "MulticlassAnnotationSet.from_cleanlab (AnnotationSet takes pred_probs of shape (n_items, 2)).")
    if probs.shape[1] != 2 or probs.shape[0] != n:
        raise ValueError(f"`pred_probs` must have shape ({n}, 2), one row per row of `labels_multiannotator`; "
                         f"got {probs.shape}.")
    probs = check_probs(probs, name="pred_probs", tol=1e-4, ids=item_ids,
                        hint="Pass probabilities (a softmax) of classes 0 and 1, not logits.")
    return probs[:, 1].copy()
