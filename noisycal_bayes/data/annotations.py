"""`AnnotationSet`: the validated, immutable container for noisy labels and the classifier's output.

Labels are stored sparse, as (item, annotator, label) triples (:class:`~noisycal_bayes.core.tables.Responses`),
so that a crowd of a million items and ten thousand annotators costs memory in proportion to its responses;
the dense items x annotators matrix :attr:`AnnotationSet.labels` is built only when asked for, and cached.

One container for any number of classes (DESIGN §8, "K classes"): a label is a class index ``k`` in
``0 .. K - 1`` standing for ``classes[k]`` (:mod:`~noisycal_bayes.data.classes`). :class:`AnnotationSet` holds
binary data, the classes ``(0, 1)`` with a score ``Z_i = P(Y = 1)`` per item (its :attr:`~AnnotationSet.probs`
view is ``[1 - Z_i, Z_i]``); its subclass :class:`MulticlassAnnotationSet` holds K named classes and a
probability matrix ``probs`` of shape (n_items, K). Probability rows must be finite, non-negative and sum to 1
within :data:`PROBS_TOL`; rows within the tolerance are renormalised, rows beyond it are an error naming the
items. Both share the storage, repeat handling, ids, subsets, summaries and validation.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import FrozenInstanceError

import numpy as np
import pandas as pd

from .._validation import PROBS_TOL, _preview, binary_only, check_binary_labels, check_choice, check_scores
from ..core.tables import Responses
from ..warnings import DataWarning
from .classes import MISSING, _check_classes, _class_name, _encode
from .responses import pair_keys, repeated_runs, sort_responses

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
    classes : tuple
        ``(0, 1)``: class index ``k`` is the class ``k``; ``n_classes`` is 2.
    probs : ndarray of shape (n_items, 2), float64, or None
        The K-class view of the scores, ``column_stack([1 - scores, scores])`` (None without scores). Read-only.

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

    #: The label alphabet: class index ``k`` stands for ``classes[k]``.
    classes = (0, 1)
    #: ``"binary"`` or ``"multiclass"``: which functions the set is for (binary-only ones test it).
    kind = "binary"
    _LABEL_DTYPE = np.int8

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

    def _setup(self, responses, n_items, n_annotators, *, n_repeated, n_pairs, item_ids, annotator_ids, dense=None,
               **fields):
        """Store validated responses and ids, then the per-item ``fields`` of the kind (shared by every constructor)."""
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
        self._set_fields(item_ids, n_items, **fields)

    def _set_fields(self, item_ids, n_items, *, scores, gold):
        """Check and store the scores (n_items,) and the gold labels (0/1, -1 unknown)."""
        set_ = object.__setattr__
        z = None
        if scores is not None:
            z = check_scores(scores, ids=item_ids)
            if z.shape != (n_items,):
                raise ValueError(f"`scores` must have shape ({n_items},); got {z.shape}.")
            z.setflags(write=False)
        set_(self, "scores", z)
        set_(self, "gold", None if gold is None else _frozen(_check_gold(gold, item_ids)))

    def __setattr__(self, name, value):
        raise FrozenInstanceError(f"cannot assign to field {name!r}: a {type(self).__name__} is immutable "
                                  "(build a new one, e.g. with .subset()).")

    def __delattr__(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}: a {type(self).__name__} is immutable.")

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
        one sort when they are not already sorted by item then annotator (time and memory at 10 million
        responses: docs/user_guide.md, *Large crowds*).

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
        lab = _label_array(label)
        it, an, n_items, n_annotators, item_ids, annotator_ids = _checked_positions(
            item, annotator, lab, n_items, n_annotators, item_ids, annotator_ids)
        if isinstance(scores, pd.Series):
            scores = _align_scores(scores, item_ids)
        if isinstance(gold, (pd.Series, dict)):
            gold = _gold_vector(gold, item_ids)
        return cls._from_codes(it, an, lab, n_items, n_annotators, scores=scores, item_ids=item_ids,
                               annotator_ids=annotator_ids, gold=gold, repeated=repeated)

    @classmethod
    def _from_codes(cls, item, annotator, label, n_items, n_annotators, *, item_ids, annotator_ids, repeated,
                    names=("item", "annotator"), **fields) -> "AnnotationSet":
        """Build from checked positions (in range, integer) and class indices; sorts, handles repeats.

        ``fields`` are the per-item fields of the kind, checked by ``_set_fields``: ``scores`` and ``gold``
        (binary), or ``classes``, aligned ``probs`` and gold class indices (K classes).
        """
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
            lab = np.array(label, dtype=cls._LABEL_DTYPE, copy=True)
        else:
            # Positions from the sorted keys (arithmetic) rather than two more gathers through `order`.
            it = (key // n_annotators).astype(np.int32)
            an = (key % n_annotators).astype(np.int32)
            lab = np.asarray(label)[order].astype(cls._LABEL_DTYPE, copy=False)
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
                   n_pairs=n_pairs, item_ids=item_ids, annotator_ids=annotator_ids, **fields)
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
        _check_long(annotations, "annotations", item, annotator, label, gold, labels_too=False)
        frame = annotations[[item, annotator, label]]
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
        values, item_ids, ann_ids = _wide_matrix(labels, annotators, dtype=None)
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
        """Build from a crowd-kit frame (columns ``task``, ``worker``, ``label``): :func:`.interop.from_crowdkit`."""
        from .interop import from_crowdkit
        return from_crowdkit(cls, df, scores, gold=gold, repeated=repeated)

    @classmethod
    def from_cleanlab(cls, labels_multiannotator, pred_probs=None) -> "AnnotationSet":
        """Build from cleanlab's multi-annotator matrix and ``pred_probs``: :func:`.interop.from_cleanlab`."""
        from .interop import from_cleanlab
        return from_cleanlab(cls, labels_multiannotator, pred_probs)


    # ------------------------------------------------------------------ views
    @property
    def n_items(self) -> int:
        return self._n_items

    @property
    def n_classes(self) -> int:
        """Number of classes K (2 for binary data)."""
        return len(self.classes)

    @property
    def probs(self):
        """Class probabilities (n_items, 2): ``[1 - scores, scores]``, or None without scores. Built on access."""
        if self.scores is None:
            return None
        return _frozen(np.column_stack([1.0 - self.scores, self.scores]))

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
        """Dense labels of shape (n_items, n_annotators): class indices, -1 where missing. Built once, cached.

        int8 (0 or 1) for binary data, int16 for K classes.

        Raises
        ------
        ValueError
            The set has repeated (item, annotator) pairs, which one cell cannot hold.
        """
        if self._labels is None:
            if self._n_repeated:
                raise ValueError(
                    f"this {type(self).__name__} has {self._repeats()}, and the dense `labels` matrix holds one label per pair. Use `.responses` (every label, as "
                    "(item, annotator, label) triples), or build the set with repeated='first' (command line: "
                    "--repeated first) to keep the first label of each pair.")
            dense = np.full((self._n_items, self._n_annotators), MISSING, dtype=self._LABEL_DTYPE)
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
                            "label": self._label_values(lab)})
        if self.scores is not None:
            out["score"] = self.scores[item]
        return out

    def _repeats(self) -> str:
        """``"3 repeated (item, annotator) pairs [(7, 'a'), ...]"``: the pairs labelled more than once."""
        item, ann, _ = self._responses
        key = pair_keys(item, ann, self._n_annotators)
        return _describe_repeats(key, repeated_runs(key)[1], self._n_annotators, self.item_ids, self.annotator_ids)

    def _label_values(self, codes: np.ndarray) -> np.ndarray:
        """The labels of class indices ``codes`` as :meth:`to_long` writes them (0/1 as int64 for binary)."""
        return codes.astype(np.int64)

    def require_one_label_per_pair(self, func: str, instead: str) -> None:
        """Raise ``ValueError`` when some (item, annotator) pair holds more than one label.

        For the computations that read one label per pair (the dense :attr:`labels`, response patterns): the
        message names ``func``, the repeated pairs, the alternative ``instead`` (a sentence) and
        ``repeated="first"``.
        """
        if not self._n_repeated:
            return
        raise ValueError(
            f"{func} reads one label per (item, annotator) pair, and this data set has {self._repeats()}. {instead} "
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

        Annotators left without any label are dropped; the classes are kept (a class nobody labels in the
        subset keeps its index). Costs O(n_responses); no dense matrix is built.
        """
        idx = np.arange(self._n_items)[np.asarray(items)]
        if idx.size == 0:
            raise ValueError("the subset is empty: no items selected.")
        dup = pd.Series(idx).duplicated().to_numpy()
        if dup.any():
            raise ValueError(f"`items` selects items {_preview(self.item_ids[pd.unique(idx[dup])])} more than once.")
        new_pos = np.full(self._n_items, -1, dtype=np.int64)
        new_pos[idx] = np.arange(idx.size)
        item, ann, lab = self._responses
        pos = new_pos[item]
        sel = pos >= 0
        ann = ann[sel]
        used = np.bincount(ann, minlength=self._n_annotators) > 0
        remap = np.cumsum(used) - 1
        return type(self)._from_codes(pos[sel], remap[ann], lab[sel], idx.size, int(used.sum()),
                                      item_ids=self.item_ids[idx], annotator_ids=self.annotator_ids[used],
                                      repeated="keep", **self._item_fields(idx))

    def _item_fields(self, idx: np.ndarray) -> dict:
        """The per-item fields of rows ``idx``, as :meth:`_from_codes` takes them (used by :meth:`subset`)."""
        return {"scores": None if self.scores is None else self.scores[idx],
                "gold": None if self.gold is None else self.gold[idx]}

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
        out.update(self._kind_summary())
        return out

    def _kind_summary(self) -> dict:
        """The keys :meth:`summary` adds after the counts: ``scores`` for binary data."""
        return {"scores": self.scores is not None}

    def __repr__(self) -> str:
        extra = f", repeated_pairs={self._n_repeated}" if self._n_repeated else ""
        if self.gold is not None:
            extra += f", gold_items={int((self.gold >= 0).sum())}"
        binary = self.kind == "binary"
        output, given = ("scores", self.scores) if binary else ("probs", self.probs)
        return (f"{type(self).__name__}(n_items={self.n_items}, n_annotators={self.n_annotators}, "
                f"{'' if binary else f'n_classes={self.n_classes}, '}n_labels={self.n_responses}{extra}, "
                f"{output}={'yes' if given is not None else 'no'})")


class MulticlassAnnotationSet(AnnotationSet):
    """Labels in K classes from several annotators, and optionally the classifier's class probabilities.

    Build it with :meth:`from_long`, :meth:`from_wide`, :meth:`from_cleanlab`, :meth:`from_crowdkit`, from
    integer arrays with :meth:`from_responses`, or from CSV files with
    :func:`~noisycal_bayes.data.load_multiclass`. The set is immutable. It is an :class:`AnnotationSet` whose
    labels are class indices of K named classes and whose classifier output is the probability matrix
    ``probs`` (``scores`` is None): the storage, repeats, ids, :meth:`subset`, :meth:`summary` and
    :meth:`to_long` are the binary set's. An annotator may label an item more than once: each label is a
    response of its own, conditionally independent of the others given the item's clean label. Functions
    for binary data only refuse this set, whatever its number of classes, with one message naming their
    K-class alternative (``docs/multiclass.md``, "Binary-only features").

    Its ``responses`` are ``item`` (int32), ``annotator`` (int32) and ``label`` (int16 class index in
    ``0 .. K - 1``), each of shape (n_responses,), sorted by item then annotator (repeats of a pair in input
    order), read-only.

    Attributes
    ----------
    classes : tuple of int or str
        The class names; class index ``k`` stands for ``classes[k]``. ``n_classes = len(classes)``.
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

    kind = "multiclass"
    _LABEL_DTYPE = np.int16
    # The instance's own arrays (set by _set_fields) shadow AnnotationSet.probs, the view of the scores.
    probs = None
    scores = None

    def __init__(self, *args, **kwargs):
        raise TypeError("build a MulticlassAnnotationSet with MulticlassAnnotationSet.from_long, .from_wide, "
                        ".from_responses, .from_cleanlab, or load_multiclass.")

    def _set_fields(self, item_ids, n_items, *, classes, probs, gold):
        """Store the classes, the probabilities (n_items, K; checked) and the gold class indices (int16)."""
        set_ = object.__setattr__
        set_(self, "classes", tuple(classes))
        set_(self, "probs", None if probs is None else _check_probs(probs, item_ids, classes))
        set_(self, "gold", None if gold is None else _frozen(np.array(gold, dtype=np.int16)))

    def _item_fields(self, idx: np.ndarray) -> dict:
        return {"classes": self.classes, "probs": None if self.probs is None else self.probs[idx],
                "gold": None if self.gold is None else self.gold[idx]}

    def _label_values(self, codes: np.ndarray) -> np.ndarray:
        return np.asarray(self.classes, dtype=object)[codes]

    def _kind_summary(self) -> dict:
        per_class = np.bincount(self._responses.label, minlength=self.n_classes)
        return {"probs": self.probs is not None, "n_classes": self.n_classes, "classes": list(self.classes),
                "label_counts": {c: int(n) for c, n in zip(self.classes, per_class)}}

    @classmethod
    def from_responses(cls, item, annotator, label, *, n_items=None, n_annotators=None, n_classes=None, classes=None,
                       probs=None, item_ids=None, annotator_ids=None, gold=None,
                       repeated: str = "keep") -> "MulticlassAnnotationSet":
        """Build from integer arrays of responses, one (item, annotator, class index) triple each: the fast route.

        Parameters
        ----------
        item, annotator : int arrays of shape (n_responses,)
            Item and annotator positions, as in :meth:`AnnotationSet.from_responses`.
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
        lab = _positions_array(label, "label")
        it, an, n_items, n_annotators, item_ids, annotator_ids = _checked_positions(
            item, annotator, lab, n_items, n_annotators, item_ids, annotator_ids)
        if classes is not None:
            classes = _check_classes(classes)
        n_classes = _count(n_classes, classes, lab, "n_classes", "classes", "label")
        if n_classes < 2:
            raise ValueError(f"`n_classes` must be at least 2; the labels use {n_classes} class. Pass n_classes= or "
                             "classes= to name the others.")
        classes = tuple(range(n_classes)) if classes is None else classes
        _check_range(lab, n_classes, "label", "n_classes", what="class indices")
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
        _check_long(df, "df", item, annotator, label, gold, labels_too=True)
        rows = np.asarray(df.index)
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
        values, item_ids, ann_ids = _wide_matrix(labels, annotators, dtype=object)
        _check_unique_ids(item_ids, "item_ids")
        _check_unique_ids(ann_ids, "annotator_ids")
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

    def require_scores(self) -> np.ndarray:
        binary_only(self, "this computation", "its K-class counterpart (class probabilities: `probs`)")

    def with_scores(self, scores):
        raise ValueError("a MulticlassAnnotationSet holds class probabilities, not scores: build a new set with "
                         "`probs=` (e.g. MulticlassAnnotationSet.from_responses(*data.responses, probs=...)).")

    def vote_fraction(self):
        raise ValueError("vote_fraction is the share of positive votes of binary data; for K classes use "
                         "vote_distribution().")


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
