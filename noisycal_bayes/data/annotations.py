"""`AnnotationSet`: the validated, immutable container for noisy labels and classifier scores.

Labels are stored sparse, as (item, annotator, label) triples (:class:`~noisycal_bayes.core.tables.Responses`),
so that a crowd of a million items and ten thousand annotators costs memory in proportion to its responses;
the dense items x annotators matrix :attr:`AnnotationSet.labels` is built only when asked for, and cached.
"""
from __future__ import annotations

import warnings
from dataclasses import FrozenInstanceError

import numpy as np
import pandas as pd

from .._validation import _preview, check_binary_labels, check_choice, check_scores
from ..core.tables import Responses
from ..warnings import DataWarning
from .responses import pair_keys, repeated_runs, sort_responses

MISSING = -1
#: What to do when an annotator labels the same item more than once (see :meth:`AnnotationSet.from_responses`).
REPEATED = ("keep", "first", "error")
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


class AnnotationSet:
    """Binary labels from several annotators, and optionally a classifier score per item.

    Build it with :meth:`from_long` or :meth:`from_wide`, from integer arrays with :meth:`from_responses`
    (the fast route for large crowds), or from other tools' formats with :meth:`from_crowdkit` and
    :meth:`from_cleanlab`. The constructor ``AnnotationSet(labels, scores, item_ids, annotator_ids[, gold])``
    takes a dense matrix. The set is immutable.

    The labels are stored as responses, one (item, annotator, label) triple each (:attr:`responses`). An
    annotator may label the same item more than once (``repeated="keep"``, the default of the constructors
    that read long data): each such label is a response of its own, **conditionally independent of the
    others given the item's clean label** ``Y_i``, so it enters the likelihood as one more factor
    ``P(A | Y_i)``, and it counts as one more vote in :meth:`majority_vote` and :meth:`vote_fraction`.

    Attributes
    ----------
    responses : Responses
        ``item`` (int32), ``annotator`` (int32), ``label`` (int8 in {0, 1}), each of shape (n_responses,),
        sorted by item then annotator (repeats of a pair in input order). Read-only. Free: this is the storage.
    labels : ndarray of shape (n_items, n_annotators), int8
        Dense view: ``A_ij`` in {0, 1}; -1 where annotator ``j`` did not label item ``i``. Read-only; built on
        first access (n_items x n_annotators bytes) and cached. A set with repeated (item, annotator) pairs
        has no dense view (one cell cannot hold two labels): accessing it raises ``ValueError``.
    scores : ndarray of shape (n_items,) or None
        Classifier scores ``Z_i`` in [0, 1]. Read-only.
    item_ids : ndarray of shape (n_items,), object
    annotator_ids : ndarray of shape (n_annotators,), object
    gold : ndarray of shape (n_items,), int8, or None
        Known clean labels for some items (say a biopsy-confirmed subset): 0 or 1, -1 where unknown.
        They enter the fits as observed latent labels. Read-only.

    Examples
    --------
    >>> import pandas as pd
    >>> long = pd.DataFrame({"item": [1, 1, 2, 2], "annotator": ["a", "b", "a", "b"], "label": [1, 1, 0, 1]})
    >>> data = AnnotationSet.from_long(long, pd.Series([0.9, 0.2], index=[1, 2]))
    >>> data.labels.tolist(), data.n_items, data.n_annotators
    ([[1, 1], [0, 1]], 2, 2)
    >>> data.responses.item.tolist(), data.responses.annotator.tolist(), data.responses.label.tolist()
    ([0, 0, 1, 1], [0, 1, 0, 1], [1, 1, 0, 1])
    """

    def __init__(self, labels, scores, item_ids, annotator_ids, gold=None):
        labels = np.asarray(labels)
        if labels.ndim != 2:
            raise ValueError(f"`labels` must have shape (n_items, n_annotators); got {labels.shape}.")
        n, j = labels.shape
        if n == 0 or j == 0:
            raise ValueError("the annotation set is empty: no items or no annotators.")
        if not np.isin(labels, (MISSING, 0, 1)).all():
            raise ValueError("`labels` must hold 0, 1 or -1 (missing).")
        if len(item_ids) != n or len(annotator_ids) != j:
            raise ValueError("`item_ids` / `annotator_ids` do not match the shape of `labels`.")
        observed = labels != MISSING
        empty_items = ~observed.any(axis=1)
        if empty_items.any():
            raise ValueError(
                f"items {_preview(np.asarray(item_ids, dtype=object)[empty_items])} have no label from any "
                "annotator. Drop them before building the AnnotationSet."
            )
        empty_ann = ~observed.any(axis=0)
        if empty_ann.any():
            raise ValueError(
                f"annotators {_preview(np.asarray(annotator_ids, dtype=object)[empty_ann])} did not label any "
                "item. Drop them, or check the annotator column."
            )
        _check_unique_ids(item_ids, "item_ids")
        _check_unique_ids(annotator_ids, "annotator_ids")
        dense = _readonly(labels.astype(np.int8))
        responses = _dense_to_responses(dense, observed)
        self._setup(responses, n, j, n_repeated=0, n_pairs=responses.item.size, scores=scores, item_ids=item_ids,
                    annotator_ids=annotator_ids, gold=gold, dense=dense)

    def _setup(self, responses, n_items, n_annotators, *, n_repeated, n_pairs, scores, item_ids, annotator_ids,
               gold, dense=None):
        """Store validated responses; check and store scores and gold (shared by every constructor)."""
        item_ids = _readonly(np.asarray(item_ids, dtype=object))
        set_ = object.__setattr__
        set_(self, "_responses", responses)
        set_(self, "_n_items", int(n_items))
        set_(self, "_n_annotators", int(n_annotators))
        set_(self, "_n_repeated", int(n_repeated))
        set_(self, "_n_pairs", int(n_pairs))
        set_(self, "_labels", dense)
        set_(self, "item_ids", item_ids)
        set_(self, "annotator_ids", _readonly(np.asarray(annotator_ids, dtype=object)))
        z = None
        if scores is not None:
            z = check_scores(scores, ids=item_ids)
            if z.shape != (n_items,):
                raise ValueError(f"`scores` must have shape ({n_items},); got {z.shape}.")
            z.setflags(write=False)
        set_(self, "scores", z)
        set_(self, "gold", None if gold is None else _frozen(_check_gold(gold, item_ids)))

    def __setattr__(self, name, value):
        raise FrozenInstanceError(f"cannot assign to field {name!r}: an AnnotationSet is immutable "
                                  "(build a new one, e.g. with .with_scores() or .subset()).")

    def __delattr__(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}: an AnnotationSet is immutable.")

    def __setstate__(self, state):
        # Unpickling restores the arrays writeable: freeze them again.
        self.__dict__.update(state)
        for value in list(state.values()) + list(state["_responses"]):
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_responses(cls, item, annotator, label, *, n_items=None, n_annotators=None, scores=None, item_ids=None,
                       annotator_ids=None, gold=None, repeated: str = "keep") -> "AnnotationSet":
        """Build from integer arrays of responses, one (item, annotator, label) triple each: the fast route.

        No ids are factorised and no dense matrix is built: the cost is a few passes over the arrays, plus
        one sort when they are not already sorted by item then annotator. Measured on 2 cores, 10 million
        responses on 1 million items and 10,000 annotators: about 0.3 s sorted, 0.8 s in random order,
        with a peak of 0.21 GB (sorted) to 0.34 GB (random order) above the input, and 0.13 GB held by the
        set (``benchmarks/bench_from_responses.py``).

        Parameters
        ----------
        item : int array of shape (n_responses,)
            Item positions ``0 .. n_items - 1``.
        annotator : int array of shape (n_responses,)
            Annotator positions ``0 .. n_annotators - 1``.
        label : int or bool array of shape (n_responses,)
            Labels in {0, 1}.
        n_items, n_annotators : int, optional
            Default: ``len(item_ids)`` when ids are given, else the largest position + 1. Every item and
            every annotator needs at least one response.
        scores : array of shape (n_items,) or Series indexed by item id, optional
            Classifier scores in [0, 1].
        item_ids, annotator_ids : array-like of shape (n_items,) / (n_annotators,), optional
            Ids (unique). Default: the positions ``0, 1, ...``.
        gold : array of shape (n_items,) or Series indexed by item id, optional
            Known clean labels: 0, 1, or -1 / NaN where unknown (a Series may leave items out).
        repeated : {"keep", "first", "error"}
            An annotator who labels the same item more than once: ``"keep"`` every label, each a
            conditionally independent response given the clean label; ``"first"`` keeps the first in input
            order; ``"error"`` refuses, naming the pairs.

        Returns
        -------
        AnnotationSet
            Its :attr:`responses` hold the triples sorted by item then annotator (int32, int32, int8).

        Raises
        ------
        ValueError
            Arrays of different lengths or not integers, positions out of range, labels other than 0/1
            (naming the responses), items or annotators without a response, repeated pairs with
            ``repeated="error"``, ids that are not unique or of the wrong length, bad scores or gold.

        Examples
        --------
        >>> data = AnnotationSet.from_responses([1, 0, 0, 1, 1], [0, 1, 0, 1, 1], [1, 0, 1, 1, 0],
        ...                                     annotator_ids=["ann", "bob"])
        >>> data.n_items, data.n_annotators, data.n_responses, data.n_repeated
        (2, 2, 5, 1)
        >>> data.responses.label.tolist()          # item 1, annotator 'bob' labelled twice: 1, then 0
        [1, 0, 1, 1, 0]
        >>> data.vote_fraction().tolist()
        [0.5, 0.6666666666666666]
        >>> AnnotationSet.from_responses([1, 0, 0, 1, 1], [0, 1, 0, 1, 1], [1, 0, 1, 1, 0],
        ...                              repeated="first").labels.tolist()
        [[1, 0], [1, 1]]
        """
        check_choice(repeated, REPEATED, name="repeated", func="AnnotationSet.from_responses")
        it = _positions_array(item, "item")
        an = _positions_array(annotator, "annotator")
        lab = _label_array(label)
        if not (it.shape == an.shape == lab.shape):
            raise ValueError(f"`item`, `annotator` and `label` must have the same length; got {it.size}, {an.size} "
                             f"and {lab.size}.")
        if it.size == 0:
            raise ValueError("no responses: `item`, `annotator` and `label` are empty.")
        n_items = _count(n_items, item_ids, it, "n_items", "item_ids", "item")
        n_annotators = _count(n_annotators, annotator_ids, an, "n_annotators", "annotator_ids", "annotator")
        _check_range(it, n_items, "item", "n_items")
        _check_range(an, n_annotators, "annotator", "n_annotators")
        if item_ids is None:
            item_ids = np.arange(n_items).astype(object)
        else:
            _check_unique_ids(item_ids, "item_ids")
        if annotator_ids is None:
            annotator_ids = np.arange(n_annotators).astype(object)
        else:
            _check_unique_ids(annotator_ids, "annotator_ids")
        if isinstance(scores, pd.Series):
            scores = _align_scores(scores, np.asarray(item_ids, dtype=object))
        if isinstance(gold, (pd.Series, dict)):
            gold = _gold_vector(gold, np.asarray(item_ids, dtype=object))
        return cls._from_codes(it, an, lab, n_items, n_annotators, scores=scores, item_ids=item_ids,
                               annotator_ids=annotator_ids, gold=gold, repeated=repeated)

    @classmethod
    def _from_codes(cls, item, annotator, label, n_items, n_annotators, *, scores, item_ids, annotator_ids, gold,
                    repeated, names=("item", "annotator")) -> "AnnotationSet":
        """Build from checked positions (in range, integer) and 0/1 labels; sorts, handles repeats."""
        if n_items * n_annotators >= 2 ** 62:
            raise ValueError(f"{n_items} items x {n_annotators} annotators is too large to index pairs with int64.")
        key, order = sort_responses(item, annotator, label, n_annotators)
        later, starts = repeated_runs(key)
        n_repeated = starts.size
        if n_repeated and repeated == "error":
            raise ValueError(f"{_describe_repeats(key, starts, n_annotators, item_ids, annotator_ids, names)}: an "
                             "annotator labelled the same item more than once. Pass repeated='keep' to use every label "
                             "(each a conditionally independent response given the clean label) or repeated='first' "
                             "to keep the first.")
        if n_repeated and repeated == "first":
            keep = ~later
            key = key[keep]
            order = np.flatnonzero(keep) if order is None else order[keep]
            n_repeated = 0
        n_pairs = key.size - int(later.sum()) if n_repeated else key.size
        del later
        if order is None:
            del key  # not needed on this route: free its 8 bytes per response before the int32 copies
            it, an = np.asarray(item, dtype=np.int32), np.asarray(annotator, dtype=np.int32)
            it = it.copy() if it is item else it
            an = an.copy() if an is annotator else an
            lab = np.array(label, dtype=np.int8, copy=True)
        else:
            # Positions from the sorted keys (arithmetic) rather than two more gathers through `order`.
            it = (key // n_annotators).astype(np.int32)
            an = (key % n_annotators).astype(np.int32)
            lab = np.asarray(label)[order].astype(np.int8, copy=False)
            del key, order
        for what, codes, n, ids in (("items", it, n_items, item_ids), ("annotators", an, n_annotators, annotator_ids)):
            # After the sort: counting sorted item positions is cache friendly.
            empty = np.bincount(codes, minlength=n) == 0
            if empty.any():
                named = _preview(np.asarray(ids, dtype=object)[empty])
                if what == "items":
                    raise ValueError(f"items {named} have no label from any annotator. Drop them (or lower "
                                     "`n_items`) before building the AnnotationSet.")
                raise ValueError(f"annotators {named} did not label any item. Drop them (or lower `n_annotators`), "
                                 "or check the annotator column.")
        obj = cls.__new__(cls)
        obj._setup(Responses(_frozen(it), _frozen(an), _frozen(lab)), n_items, n_annotators, n_repeated=n_repeated,
                   n_pairs=n_pairs, scores=scores, item_ids=item_ids, annotator_ids=annotator_ids, gold=gold)
        return obj

    @classmethod
    def from_long(cls, annotations: pd.DataFrame, scores=None, *, item: str = "item", annotator: str = "annotator",
                  label: str = "label", score: str = "score", gold=None, repeated: str = "keep") -> "AnnotationSet":
        """Build from long format: one row per (item, annotator, label).

        Parameters
        ----------
        annotations : DataFrame
            Columns ``item``, ``annotator``, ``label`` (names configurable). If it also has a ``score``
            column and ``scores`` is None, that column gives the scores (one value per item).
        scores : DataFrame with columns ``item`` and ``score``, or Series indexed by item, optional
            Scores of items nobody annotated are dropped with a :class:`DataWarning`.
        gold : str, Series or dict, optional
            Known clean labels. A column name of ``annotations`` (say ``gold="gold"``): one value per item,
            0 or 1, blank / NaN where unknown (rows of an item may leave it blank, but two different values
            for one item are an error); or a Series / dict ``{item: 0 or 1}`` over some of the items.
        repeated : {"keep", "first", "error"}
            Rows that repeat an (item, annotator) pair: ``"keep"`` each (a conditionally independent response
            given the clean label), ``"first"`` keeps the first row, ``"error"`` refuses, naming the pairs.

        Raises
        ------
        ValueError
            Missing columns, labels other than 0/1, repeated (item, annotator) pairs with
            ``repeated="error"``, bad scores, annotated items without a score, gold labels other than 0/1
            (naming the rows), conflicting gold labels of an item, gold for unknown items, or empty input.

        Examples
        --------
        >>> import pandas as pd
        >>> long = pd.DataFrame({"item": [1, 1, 2, 2, 2], "annotator": ["a", "b", "a", "b", "b"],
        ...                      "label": [1, 1, 0, 1, 0], "gold": [1, 1, None, None, None]})
        >>> data = AnnotationSet.from_long(long, gold="gold")
        >>> data.gold.tolist(), data.n_responses, data.n_repeated
        ([1, -1], 5, 1)
        """
        check_choice(repeated, REPEATED, name="repeated", func="AnnotationSet.from_long")
        if not isinstance(annotations, pd.DataFrame):
            raise ValueError(f"`annotations` must be a pandas DataFrame in long format; got {type(annotations).__name__}.")
        missing_cols = [c for c in (item, annotator, label) if c not in annotations.columns]
        if isinstance(gold, str) and gold not in annotations.columns:
            missing_cols.append(gold)
        if missing_cols:
            raise ValueError(
                f"`annotations` is missing column(s) {missing_cols}; it has {list(annotations.columns)}. "
                "Pass item=, annotator=, label= (and gold=) to name your columns."
            )
        if len(annotations) == 0:
            raise ValueError("`annotations` is empty.")
        frame = annotations[[item, annotator, label]]
        for col in (item, annotator):
            nulls = frame[col].isna().to_numpy()
            if nulls.any():
                raise ValueError(f"column `{col}` has missing values at rows {_preview(np.asarray(annotations.index)[nulls])}.")
        raw = frame[label].to_numpy()
        try:
            lab = pd.to_numeric(frame[label], errors="raise").to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            bad = ~frame[label].astype(str).isin(["0", "1", "0.0", "1.0", "True", "False"]).to_numpy()
            raise ValueError(
                f"`{label}` must be 0 or 1; got {_preview(pd.unique(raw[bad])[:5])} at rows "
                f"{_preview(np.asarray(annotations.index)[bad])}. Map your classes to 0/1 first. "
                f"Those rows are {item} {_preview(pd.unique(frame[item].to_numpy()[bad]))}."
            ) from None
        bad = (lab != 0) & (lab != 1)
        if bad.any():
            raise ValueError(
                f"`{label}` must be 0 or 1; got {_preview(pd.unique(raw[bad])[:5])} at rows "
                f"{_preview(np.asarray(annotations.index)[bad])}. Map your classes to 0/1 first. "
                f"Those rows are {item} {_preview(pd.unique(frame[item].to_numpy()[bad]))}."
            )
        item_codes, item_ids = _factorize(frame[item])
        ann_codes, ann_ids = _factorize(frame[annotator])

        if scores is None and score in annotations.columns:
            per_item = annotations[[item, score]]
            nunique = per_item.groupby(item, sort=False)[score].nunique(dropna=False)
            conflicting = nunique.index[nunique.to_numpy() > 1]
            if len(conflicting):
                raise ValueError(f"items {_preview(conflicting)} have more than one score in column `{score}`.")
            scores = per_item.drop_duplicates(item).set_index(item)[score]
        z = None if scores is None else _align_scores(scores, item_ids, item=item, score=score)
        if isinstance(gold, str):
            gold = _gold_from_column(annotations[gold], item_codes, item_ids, column=gold, item=item)
        elif gold is not None:
            gold = _gold_vector(gold, item_ids)
        return cls._from_codes(item_codes, ann_codes, lab.astype(np.int8), item_ids.size, ann_ids.size, scores=z,
                               item_ids=item_ids, annotator_ids=ann_ids, gold=gold, repeated=repeated,
                               names=(item, annotator))

    @classmethod
    def from_wide(cls, labels, scores=None, *, annotators=None, gold=None) -> "AnnotationSet":
        """Build from a wide matrix of shape (n_items, n_annotators); NaN or -1 marks a missing response.

        ``labels`` may be a DataFrame (index = item ids, columns = annotator ids) or an array.
        ``scores`` is an array of shape (n_items,) or a Series indexed by item id. ``gold`` (known clean
        labels) is an array of shape (n_items,) with 0, 1 and -1 / NaN where unknown, or a Series / dict
        ``{item: 0 or 1}`` over some of the items. A wide matrix holds one label per (item, annotator) pair;
        for repeated labels use :meth:`from_long` or :meth:`from_responses`.
        """
        if isinstance(labels, pd.DataFrame):
            item_ids = labels.index.to_numpy(dtype=object)
            ann_ids = np.asarray(labels.columns, dtype=object) if annotators is None else np.asarray(annotators, dtype=object)
            # Nullable dtypes (Int64, boolean) mark missing responses with pd.NA; read them as NaN.
            values = labels.to_numpy(na_value=np.nan)
        else:
            values = np.asarray(labels)
            if values.ndim != 2:
                raise ValueError(f"`labels` must have shape (n_items, n_annotators); got {values.shape}.")
            item_ids = np.arange(values.shape[0]).astype(object)
            ann_ids = np.arange(values.shape[1]).astype(object) if annotators is None else np.asarray(annotators, dtype=object)
        if values.ndim != 2 or values.size == 0:
            raise ValueError(f"`labels` is empty (shape {values.shape}).")
        if len(ann_ids) != values.shape[1]:
            raise ValueError(f"`annotators` has {len(ann_ids)} names for {values.shape[1]} label columns.")
        lab = check_binary_labels(values, allow_missing=True)
        if scores is None:
            z = None
        elif isinstance(scores, pd.Series):
            z = _align_scores(scores, item_ids)
        else:
            z = check_scores(scores, ids=item_ids)
            if z.shape != (values.shape[0],):
                raise ValueError(f"`scores` must have shape ({values.shape[0]},), one per row of `labels`; got {z.shape}.")
        if isinstance(gold, (pd.Series, dict)):
            gold = _gold_vector(gold, item_ids)
        return cls(lab, z, item_ids, ann_ids, gold)

    @classmethod
    def from_crowdkit(cls, df: pd.DataFrame, scores=None, *, gold="gold", repeated: str = "keep") -> "AnnotationSet":
        """Build from a crowd-kit frame: one row per response, columns ``task``, ``worker``, ``label``.

        This is the frame crowd-kit's aggregators (``DawidSkene().fit(df)``, ``MajorityVote`` ...) take.
        As there, other columns are ignored, except a ``score`` column when ``scores`` is None (one value
        per task) and a ``gold`` column (known clean labels, one value per task, blank where unknown). Labels must be 0/1 (ints, floats, booleans or the strings ``"0"``/``"1"``); the binary
        case only. Items are the sorted unique tasks, annotators the sorted unique workers.

        Parameters
        ----------
        df : DataFrame of shape (n_responses, >= 3)
            Columns ``task``, ``worker``, ``label``. Each (task, worker) pair at most once.
        scores : Series, dict, DataFrame or array-like of shape (n_tasks,), optional
            The classifier score of each task, in [0, 1]:

            - a Series indexed by task, or a dict ``{task: score}``;
            - a DataFrame with columns ``task`` and ``score``;
            - an array (or list) **aligned with the sorted unique tasks**, i.e. with
              ``sorted(df["task"].unique())``, which is the order of the returned ``item_ids`` (ids that
              cannot be sorted together, such as a mix of ints and strings, keep their order of first
              appearance: pass a Series or dict for those).

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
            Missing columns (naming crowd-kit's old ``performer`` column if that is what ``df`` has),
            labels other than 0/1 (naming rows and tasks), repeated (task, worker) pairs with
            ``repeated="error"`` (naming them), gold labels other than 0/1 or conflicting within a task,
            tasks without a score, scores for tasks not in ``df``, an array of the wrong length, or
            scores outside [0, 1].

        Examples
        --------
        >>> import pandas as pd
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


    @classmethod
    def from_cleanlab(cls, labels_multiannotator, pred_probs=None) -> "AnnotationSet":
        """Build from cleanlab's multi-annotator format (``cleanlab.multiannotator``).

        Parameters
        ----------
        labels_multiannotator : DataFrame or array of shape (n_items, n_annotators)
            One row per example, one column per annotator, NaN where an annotator gave no label: the
            input of ``cleanlab.multiannotator.get_label_quality_multiannotator``. Labels are class
            indices 0/1, possibly stored as floats because of the NaN. A DataFrame's index gives the
            item ids and its columns the annotator ids; an array gives ids 0, 1, ...
        pred_probs : array or DataFrame of shape (n_items, 2), optional
            The model's predicted class probabilities, row ``i`` for row ``i`` of
            ``labels_multiannotator`` (matched by position, as in cleanlab); each row sums to 1. The
            score of item ``i`` is ``pred_probs[i, 1]``, the probability of class 1.

        Returns
        -------
        AnnotationSet
            The same set as ``AnnotationSet.from_wide(labels_multiannotator, pred_probs[:, 1])``.

        Raises
        ------
        ValueError
            Labels other than 0, 1 or NaN (naming the item, annotator and value; labels 2, 3, ... say
            that multiclass data is not supported yet), rows or columns with no label, ``pred_probs``
            of the wrong shape, with more than 2 columns (multiclass, not supported yet), with values
            outside [0, 1] or rows not summing to 1 (naming the items).

        Examples
        --------
        >>> import numpy as np, pandas as pd
        >>> labels = pd.DataFrame({"a": [1.0, 0.0, np.nan], "b": [1.0, np.nan, 0.0]})
        >>> data = AnnotationSet.from_cleanlab(labels, np.array([[0.1, 0.9], [0.8, 0.2], [0.6, 0.4]]))
        >>> data.labels.tolist(), data.scores.tolist()
        ([[1, 1], [0, -1], [-1, 0]], [0.9, 0.2, 0.4])
        """
        if isinstance(labels_multiannotator, pd.DataFrame):
            item_ids = labels_multiannotator.index.to_numpy(dtype=object)
            ann_ids = np.asarray(labels_multiannotator.columns, dtype=object)
            values = labels_multiannotator.to_numpy(dtype=object, copy=True)  # pd.isna reads NaN, None and pd.NA
        else:
            values = np.asarray(labels_multiannotator, dtype=object)
            if values.ndim != 2:
                raise ValueError("`labels_multiannotator` must have shape (n_items, n_annotators), one column per "
                                 f"annotator; got shape {values.shape}.")
            item_ids = np.arange(values.shape[0]).astype(object)
            ann_ids = np.arange(values.shape[1]).astype(object)
        _check_cleanlab_labels(values, item_ids, ann_ids)
        scores = None
        if pred_probs is not None:
            scores = _positive_class_probs(pred_probs, labels_multiannotator, item_ids)
        return cls.from_wide(labels_multiannotator, scores)


    # ------------------------------------------------------------------ views
    @property
    def n_items(self) -> int:
        return self._n_items

    @property
    def n_annotators(self) -> int:
        return self._n_annotators

    @property
    def responses(self) -> Responses:
        """The labels as sparse (item, annotator, label) triples, sorted by item then annotator.

        ``item`` and ``annotator`` are int32 positions into :attr:`item_ids` / :attr:`annotator_ids`,
        ``label`` int8 in {0, 1}; shape (n_responses,) each, read-only. This is the storage: no cost.
        Repeated labels of one (item, annotator) pair are adjacent, in input order.
        """
        return self._responses

    @property
    def n_responses(self) -> int:
        """Number of responses (labels), repeats included."""
        return int(self._responses.item.size)

    @property
    def n_repeated(self) -> int:
        """Number of (item, annotator) pairs labelled more than once."""
        return self._n_repeated

    @property
    def has_repeats(self) -> bool:
        """Whether some annotator labelled some item more than once."""
        return self._n_repeated > 0

    @property
    def labels(self) -> np.ndarray:
        """Dense labels of shape (n_items, n_annotators), int8: 0, 1, or -1 where missing. Built once, cached.

        Raises
        ------
        ValueError
            The set has repeated (item, annotator) pairs, which one cell cannot hold.
        """
        if self._labels is None:
            if self._n_repeated:
                item, ann, _ = self._responses
                key = pair_keys(item, ann, self._n_annotators)
                _, starts = repeated_runs(key)
                raise ValueError(
                    f"this AnnotationSet has {_describe_repeats(key, starts, self._n_annotators, self.item_ids, self.annotator_ids)}"
                    ", and the dense `labels` matrix holds one label per pair. Use `.responses` (every label, as "
                    "(item, annotator, label) triples), or build the set with repeated='first' (command line: "
                    "--repeated first) to keep the first label of each pair.")
            dense = np.full((self._n_items, self._n_annotators), MISSING, dtype=np.int8)
            item, ann, lab = self._responses
            dense[item, ann] = lab
            object.__setattr__(self, "_labels", _frozen(dense))
        return self._labels

    @property
    def observed(self) -> np.ndarray:
        """Boolean mask (n_items, n_annotators) of the (item, annotator) pairs with at least one response."""
        if not self._n_repeated:
            return self.labels != MISSING
        mask = np.zeros((self._n_items, self._n_annotators), dtype=bool)
        mask[self._responses.item, self._responses.annotator] = True
        return mask

    @property
    def has_missing(self) -> bool:
        """Whether some (item, annotator) pair has no response."""
        return self._n_pairs < self._n_items * self._n_annotators

    def labels_per_item(self) -> np.ndarray:
        """Number of responses of each item, shape (n_items,), int64 (repeats included)."""
        return np.bincount(self._responses.item, minlength=self._n_items)

    def labels_per_annotator(self) -> np.ndarray:
        """Number of responses of each annotator, shape (n_annotators,), int64 (repeats included)."""
        return np.bincount(self._responses.annotator, minlength=self._n_annotators)

    def _positives(self) -> np.ndarray:
        """Number of positive responses of each item, shape (n_items,)."""
        item, _, lab = self._responses
        return np.bincount(item, weights=lab, minlength=self._n_items).astype(np.int64)

    def to_long(self) -> pd.DataFrame:
        """Long format with columns ``item, annotator, label`` (and ``score`` when scores exist).

        One row per response, sorted by item then annotator (repeated labels kept, in input order).
        """
        item, ann, lab = self._responses
        out = pd.DataFrame({"item": self.item_ids[item], "annotator": self.annotator_ids[ann],
                            "label": lab.astype(np.int64)})
        if self.scores is not None:
            out["score"] = self.scores[item]
        return out

    def require_one_label_per_pair(self, func: str, instead: str) -> None:
        """Raise ``ValueError`` when some (item, annotator) pair holds more than one label.

        For the computations that read one label per pair (the dense :attr:`labels`, response patterns): the
        message names ``func``, the repeated pairs, the alternative ``instead`` (a sentence) and
        ``repeated="first"``.
        """
        if not self._n_repeated:
            return
        item, ann, _ = self._responses
        key = pair_keys(item, ann, self._n_annotators)
        _, starts = repeated_runs(key)
        raise ValueError(
            f"{func} reads one label per (item, annotator) pair, and this data set has "
            f"{_describe_repeats(key, starts, self._n_annotators, self.item_ids, self.annotator_ids)}. {instead} "
            "Or build the set with repeated='first' (command line: --repeated first) to keep the first label of "
            "each pair.")

    def require_scores(self) -> np.ndarray:
        if self.scores is None:
            raise ValueError("this computation needs classifier scores; build the AnnotationSet with `scores=`.")
        return self.scores

    def require_annotators(self, minimum: int, why: str) -> None:
        if self.n_annotators < minimum:
            raise ValueError(f"{why} needs at least {minimum} annotators; this data has {self.n_annotators}.")

    def subset(self, items) -> "AnnotationSet":
        """A new set restricted to rows ``items`` (integer positions or a boolean mask), in that order.

        Annotators left without any label are dropped. Costs O(n_responses); no dense matrix is built.
        """
        idx = np.arange(self._n_items)[np.asarray(items)]
        if idx.size == 0:
            raise ValueError("the annotation set is empty: no items or no annotators.")
        dup = pd.Series(idx).duplicated(keep=False).to_numpy()
        if dup.any():
            raise ValueError(f"`item_ids` must be unique; {_preview(pd.unique(self.item_ids[idx[dup]]))} appear more "
                             "than once. Each item (row) and annotator (column) may appear once.")
        new_pos = np.full(self._n_items, -1, dtype=np.int64)
        new_pos[idx] = np.arange(idx.size)
        item, ann, lab = self._responses
        pos = new_pos[item]
        sel = pos >= 0
        ann = ann[sel]
        used = np.bincount(ann, minlength=self._n_annotators) > 0
        remap = np.cumsum(used) - 1
        return type(self)._from_codes(pos[sel], remap[ann], lab[sel], idx.size, int(used.sum()),
                                      scores=None if self.scores is None else self.scores[idx],
                                      item_ids=self.item_ids[idx], annotator_ids=self.annotator_ids[used],
                                      gold=None if self.gold is None else self.gold[idx], repeated="keep")

    def with_scores(self, scores) -> "AnnotationSet":
        """The same labels with new scores of shape (n_items,)."""
        z = check_scores(scores, ids=self.item_ids)
        if z.shape != (self._n_items,):
            raise ValueError(f"`scores` must have shape ({self._n_items},); got {z.shape}.")
        z.setflags(write=False)
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)  # share the read-only responses, ids, gold and dense cache
        object.__setattr__(new, "scores", z)
        return new

    def majority_vote(self, *, ties: str = "positive") -> np.ndarray:
        """Majority label per item, shape (n_items,); ties broken by ``ties`` in {"positive", "negative"}.

        Every response is a vote: an annotator who labelled an item twice votes twice.
        """
        if ties not in ("positive", "negative"):
            raise ValueError(f"`ties` must be 'positive' or 'negative'; got {ties!r}.")
        pos = self._positives()
        n = self.labels_per_item()
        maj = (2 * pos > n).astype(np.int8)
        maj[2 * pos == n] = 1 if ties == "positive" else 0
        return maj

    def n_ties(self) -> int:
        """Number of items whose vote is split evenly."""
        return int((2 * self._positives() == self.labels_per_item()).sum())

    def vote_fraction(self) -> np.ndarray:
        """Fraction of positive votes among an item's responses, shape (n_items,) (repeats count as votes)."""
        return self._positives() / self.labels_per_item()

    def summary(self) -> dict:
        """Counts that describe the set, as a dict of plain numbers.

        Keys: ``items``, ``annotators``, ``responses``; ``repeated_pairs`` ((item, annotator) pairs labelled
        more than once) and ``repeated_responses`` (responses beyond the first of their pair);
        ``labels_per_item_min``, ``_median``, ``_max`` and the same for ``labels_per_annotator``;
        ``gold_items`` (items with a known clean label; 0 without gold); ``scores`` (whether scores exist).

        Examples
        --------
        >>> data = AnnotationSet.from_responses([0, 0, 1, 1, 1], [0, 1, 0, 1, 1], [1, 1, 0, 1, 0],
        ...                                     gold=[1, -1])
        >>> s = data.summary()
        >>> s["responses"], s["repeated_pairs"], s["labels_per_item_max"], s["gold_items"]
        (5, 1, 3, 1)
        """
        per_item, per_ann = self.labels_per_item(), self.labels_per_annotator()
        out = {"items": self._n_items, "annotators": self._n_annotators, "responses": self.n_responses,
               "repeated_pairs": self._n_repeated, "repeated_responses": self.n_responses - self._n_pairs}
        for name, counts in (("labels_per_item", per_item), ("labels_per_annotator", per_ann)):
            out[f"{name}_min"] = int(counts.min())
            out[f"{name}_median"] = float(np.median(counts))
            out[f"{name}_max"] = int(counts.max())
        out["gold_items"] = 0 if self.gold is None else int((self.gold >= 0).sum())
        out["scores"] = self.scores is not None
        return out

    def __repr__(self) -> str:
        extra = f", repeated_pairs={self._n_repeated}" if self._n_repeated else ""
        if self.gold is not None:
            extra += f", gold_items={int((self.gold >= 0).sum())}"
        return (f"AnnotationSet(n_items={self.n_items}, n_annotators={self.n_annotators}, "
                f"n_labels={self.n_responses}{extra}, scores={'yes' if self.scores is not None else 'no'})")


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
        hint = "Multiclass labels (2, 3, ...) are not supported yet: this package handles the binary case, classes 0 and 1."
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
        raise ValueError(f"`pred_probs` has {probs.shape[1]} columns (classes): multiclass data is not supported yet; "
                         "this package handles the binary case, pred_probs of shape (n_items, 2).")
    if probs.shape[1] != 2 or probs.shape[0] != n:
        raise ValueError(f"`pred_probs` must have shape ({n}, 2), one row per row of `labels_multiannotator`; "
                         f"got {probs.shape}.")
    bad = ~np.isfinite(probs).all(axis=1)
    if bad.any():
        raise ValueError(f"`pred_probs` must be finite; NaN or inf at items {_preview(np.asarray(item_ids)[bad])}.")
    bad = ((probs < 0) | (probs > 1)).any(axis=1)
    if bad.any():
        raise ValueError(f"`pred_probs` must lie in [0, 1]; not so at items {_preview(np.asarray(item_ids)[bad])}. "
                         "Pass probabilities (a softmax), not logits.")
    sums = probs.sum(axis=1)
    bad = np.abs(sums - 1.0) > 1e-4
    if bad.any():
        raise ValueError(f"each row of `pred_probs` must sum to 1 (probabilities of classes 0 and 1); items "
                         f"{_preview(np.asarray(item_ids)[bad])} sum to {_preview(np.round(sums[bad], 6))}.")
    return probs[:, 1].copy()

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


def _check_range(codes: np.ndarray, n: int, name: str, n_name: str) -> None:
    lo, hi = int(codes.min()), int(codes.max())
    if lo < 0 or hi >= n:
        bad = np.flatnonzero((codes < 0) | (codes >= n))
        raise ValueError(f"`{name}` must hold positions 0 .. {n - 1} (`{n_name}` = {n}); got "
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
