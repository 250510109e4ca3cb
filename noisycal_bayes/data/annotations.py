"""`AnnotationSet`: the validated, immutable container for noisy labels and the classifier's output.

Labels are stored sparse, as (item, annotator, label) triples; the dense matrix is built on demand. Binary data has
scores ``Z_i = P(Y = 1)``; the subclass :class:`MulticlassAnnotationSet` holds K named classes and ``probs`` (n_items,
K), rows summing to 1 within :data:`PROBS_TOL` (renormalised). Details: docs/foundations.md,
*noisycal_bayes.data.annotations*.
"""
from __future__ import annotations

from dataclasses import FrozenInstanceError

import numpy as np
import pandas as pd

from .._validation import PROBS_TOL  # noqa: F401 (named in this module's docstring; data/__init__ re-exports it)
from .._validation import _preview, binary_only, check_binary_labels, check_choice, check_scores
from ..core.tables import Responses
from .classes import MISSING, _check_classes, _class_name, _encode
from .responses import pair_keys, repeated_runs, sort_responses
from ._inputs import (_align_probs, _align_scores, _check_gold, _check_long, _check_probs, _check_range,
                      _check_unique_ids, _checked_positions, _count, _dense_to_responses, _describe_repeats, _factorize,
                      _frozen, _gold_codes, _gold_from_column, _gold_from_rows, _gold_vector, _label_array,
                      _positions_array, _readonly, _wide_matrix)

#: What to do when an annotator labels the same item more than once (see :meth:`AnnotationSet.from_responses`).
REPEATED = ("keep", "first", "error")


def _require_labelled(labelled_items, labelled_annotators, item_ids, annotator_ids, *, positions: bool = False):
    """``ValueError`` naming the items (annotators) without a response; ``positions``: built from positions, whose
    ``n_items`` / ``n_annotators`` the message may suggest lowering."""
    for what, ok, ids in (("items", labelled_items, item_ids), ("annotators", labelled_annotators, annotator_ids)):
        if not ok.all():
            named = _preview(np.asarray(ids, dtype=object)[~ok])
            lower = f" (or lower `n_{what}`)" if positions else ""
            if what == "items":
                raise ValueError(f"items {named} have no label from any annotator. Drop them{lower} before building "
                                 "the AnnotationSet.")
            raise ValueError(f"annotators {named} did not label any item. Drop them{lower}, or check the annotator "
                             "column.")


class AnnotationSet:
    """Binary labels from several annotators, and optionally a classifier score per item.

    Build it with :meth:`from_long` or :meth:`from_wide`, from integer arrays with :meth:`from_responses`
    (the fast route for large crowds), or from other tools' formats with :meth:`from_crowdkit` and
    :meth:`from_cleanlab`. The constructor ``AnnotationSet(labels, scores, item_ids, annotator_ids[, gold])``
    takes a dense matrix. The set is immutable.

    The labels are stored as (item, annotator, label) triples (:attr:`responses`). A repeated label of one
    annotator on one item (``repeated="keep"``) is a response of its own, **conditionally independent of the
    others given the clean label** ``Y_i``: one more likelihood factor ``P(A | Y_i)`` and one more vote.

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
        _require_labelled(observed.any(axis=1), observed.any(axis=0), item_ids, annotator_ids)
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
        # After the sort: counting sorted item positions is cache friendly.
        _require_labelled(np.bincount(it, minlength=n_items) > 0, np.bincount(an, minlength=n_annotators) > 0,
                          item_ids, annotator_ids, positions=True)
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
            bad = (lab != 0) & (lab != 1)
        except (TypeError, ValueError):
            lab, bad = None, ~frame[label].astype(str).isin(["0", "1", "0.0", "1.0", "True", "False"]).to_numpy()
        if lab is None or bad.any():
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
        check_choice(ties, ("positive", "negative"), name="ties")
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

    Build it with :meth:`from_long`, :meth:`from_wide`, :meth:`from_cleanlab`, :meth:`from_crowdkit`,
    :meth:`from_responses` or :func:`~noisycal_bayes.data.load_multiclass`; immutable. An :class:`AnnotationSet`
    whose labels are class indices of K named classes and whose classifier output is ``probs`` (``scores`` is
    None); storage, repeats, ids, :meth:`subset`, :meth:`summary` and :meth:`to_long` are the binary set's.
    Binary-only functions refuse it, naming their K-class alternative (``docs/multiclass.md``, "Binary-only
    features").

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
