"""`AnnotationSet`: the validated, immutable container for noisy labels and classifier scores."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validation import _preview, check_binary_labels, check_scores
from ..warnings import DataWarning
from .responses import Responses

MISSING = -1


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr = np.array(arr, copy=True)
    arr.setflags(write=False)
    return arr


def _factorize(values: pd.Series):
    """Codes and sorted unique ids; falls back to first-appearance order for unsortable mixed ids."""
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:
        codes, uniques = pd.factorize(values, sort=False)
    return codes, np.asarray(uniques, dtype=object)


@dataclass(frozen=True, eq=False)
class AnnotationSet:
    """Binary labels from several annotators, and optionally a classifier score per item.

    Build it with :meth:`from_long` or :meth:`from_wide`, or from other tools' formats with
    :meth:`from_crowdkit` and :meth:`from_cleanlab`; the constructor expects validated arrays.

    Attributes
    ----------
    labels : ndarray of shape (n_items, n_annotators), int8
        ``A_ij`` in {0, 1}; -1 where annotator ``j`` did not label item ``i``. Read-only.
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
    """

    labels: np.ndarray
    scores: np.ndarray | None
    item_ids: np.ndarray
    annotator_ids: np.ndarray
    gold: np.ndarray | None = None

    def __post_init__(self):
        labels = np.asarray(self.labels)
        if labels.ndim != 2:
            raise ValueError(f"`labels` must have shape (n_items, n_annotators); got {labels.shape}.")
        n, j = labels.shape
        if n == 0 or j == 0:
            raise ValueError("the annotation set is empty: no items or no annotators.")
        if not np.isin(labels, (MISSING, 0, 1)).all():
            raise ValueError("`labels` must hold 0, 1 or -1 (missing).")
        if len(self.item_ids) != n or len(self.annotator_ids) != j:
            raise ValueError("`item_ids` / `annotator_ids` do not match the shape of `labels`.")
        observed = labels != MISSING
        empty_items = ~observed.any(axis=1)
        if empty_items.any():
            raise ValueError(
                f"items {_preview(np.asarray(self.item_ids)[empty_items])} have no label from any annotator. "
                "Drop them before building the AnnotationSet."
            )
        empty_ann = ~observed.any(axis=0)
        if empty_ann.any():
            raise ValueError(
                f"annotators {_preview(np.asarray(self.annotator_ids)[empty_ann])} did not label any item. "
                "Drop them, or check the annotator column."
            )
        for what, ids in (("item_ids", self.item_ids), ("annotator_ids", self.annotator_ids)):
            ids = pd.Series(list(ids), dtype=object)
            dup = ids.duplicated(keep=False).to_numpy()
            if dup.any():
                # Repeated ids in wide input are repeated (item, annotator) pairs: name them.
                raise ValueError(f"`{what}` must be unique; {_preview(pd.unique(ids[dup]))} appear more than once. "
                                 "Each item (row) and annotator (column) may appear once.")
        object.__setattr__(self, "labels", _readonly(labels.astype(np.int8)))
        object.__setattr__(self, "item_ids", _readonly(np.asarray(self.item_ids, dtype=object)))
        object.__setattr__(self, "annotator_ids", _readonly(np.asarray(self.annotator_ids, dtype=object)))
        if self.scores is not None:
            z = check_scores(self.scores, ids=self.item_ids)
            if z.shape != (n,):
                raise ValueError(f"`scores` must have shape ({n},); got {z.shape}.")
            object.__setattr__(self, "scores", _readonly(z))
        if self.gold is not None:
            object.__setattr__(self, "gold", _readonly(_check_gold(self.gold, self.item_ids)))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_long(cls, annotations: pd.DataFrame, scores=None, *, item: str = "item", annotator: str = "annotator",
                  label: str = "label", score: str = "score") -> "AnnotationSet":
        """Build from long format: one row per (item, annotator, label).

        Parameters
        ----------
        annotations : DataFrame
            Columns ``item``, ``annotator``, ``label`` (names configurable). If it also has a ``score``
            column and ``scores`` is None, that column gives the scores (one value per item).
        scores : DataFrame with columns ``item`` and ``score``, or Series indexed by item, optional
            Scores of items nobody annotated are dropped with a :class:`DataWarning`.

        Raises
        ------
        ValueError
            Missing columns, labels other than 0/1, duplicate (item, annotator) pairs, bad scores,
            annotated items without a score, or empty input.
        """
        if not isinstance(annotations, pd.DataFrame):
            raise ValueError(f"`annotations` must be a pandas DataFrame in long format; got {type(annotations).__name__}.")
        missing_cols = [c for c in (item, annotator, label) if c not in annotations.columns]
        if missing_cols:
            raise ValueError(
                f"`annotations` is missing column(s) {missing_cols}; it has {list(annotations.columns)}. "
                "Pass item=, annotator=, label= to name your columns."
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
        dup = frame.duplicated([item, annotator], keep=False).to_numpy()
        if dup.any():
            pairs = list(dict.fromkeys(zip(frame[item].to_numpy()[dup], frame[annotator].to_numpy()[dup])))
            raise ValueError(
                f"duplicate ({item}, {annotator}) pairs {_preview(pairs)}: each annotator may label an item once. "
                "Aggregate or drop repeated responses first."
            )
        item_codes, item_ids = _factorize(frame[item])
        ann_codes, ann_ids = _factorize(frame[annotator])
        labels = np.full((item_ids.size, ann_ids.size), MISSING, dtype=np.int8)
        labels[item_codes, ann_codes] = lab.astype(np.int8)

        if scores is None and score in annotations.columns:
            per_item = annotations[[item, score]]
            nunique = per_item.groupby(item, sort=False)[score].nunique(dropna=False)
            conflicting = nunique.index[nunique.to_numpy() > 1]
            if len(conflicting):
                raise ValueError(f"items {_preview(conflicting)} have more than one score in column `{score}`.")
            scores = per_item.drop_duplicates(item).set_index(item)[score]
        z = None if scores is None else _align_scores(scores, item_ids, item=item, score=score)
        return cls(labels, z, item_ids, ann_ids)

    @classmethod
    def from_wide(cls, labels, scores=None, *, annotators=None) -> "AnnotationSet":
        """Build from a wide matrix of shape (n_items, n_annotators); NaN or -1 marks a missing response.

        ``labels`` may be a DataFrame (index = item ids, columns = annotator ids) or an array.
        ``scores`` is an array of shape (n_items,) or a Series indexed by item id.
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
        return cls(lab, z, item_ids, ann_ids)

    @classmethod
    def from_crowdkit(cls, df: pd.DataFrame, scores=None) -> "AnnotationSet":
        """Build from a crowd-kit frame: one row per response, columns ``task``, ``worker``, ``label``.

        This is the frame crowd-kit's aggregators (``DawidSkene().fit(df)``, ``MajorityVote`` ...) take.
        As there, other columns are ignored, except a ``score`` column when ``scores`` is None (one value
        per task). Labels must be 0/1 (ints, floats, booleans or the strings ``"0"``/``"1"``); the binary
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

        Returns
        -------
        AnnotationSet
            The same set :meth:`from_long` builds from ``df`` renamed to ``item, annotator, label``.

        Raises
        ------
        ValueError
            Missing columns (naming crowd-kit's old ``performer`` column if that is what ``df`` has),
            labels other than 0/1 (naming rows and tasks), repeated (task, worker) pairs (naming them),
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
        if scores is None:
            keep = [c for c in ("task", "worker", "label", "score") if c in df.columns]
            return cls.from_long(df[keep], item="task", annotator="worker", label="label", score="score")
        frame = df[["task", "worker", "label"]]
        if frame["task"].isna().any():
            # from_long names the rows.
            return cls.from_long(frame, item="task", annotator="worker", label="label")
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
        return cls.from_long(frame, series, item="task", annotator="worker", label="label")

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
        return self.labels.shape[0]

    @property
    def n_annotators(self) -> int:
        return self.labels.shape[1]

    @property
    def responses(self) -> Responses:
        """The labels as sparse (item, annotator, label) triples, sorted by item then annotator.

        ``item`` and ``annotator`` are int32 positions into :attr:`item_ids` / :attr:`annotator_ids`,
        ``label`` int8 in {0, 1}; shape (n_responses,) each.
        """
        ii, jj = np.nonzero(self.observed)
        return Responses(ii.astype(np.int32), jj.astype(np.int32), self.labels[ii, jj].astype(np.int8))

    @property
    def n_responses(self) -> int:
        return int(self.observed.sum())

    @property
    def observed(self) -> np.ndarray:
        """Boolean mask (n_items, n_annotators) of observed responses."""
        return self.labels != MISSING

    @property
    def has_missing(self) -> bool:
        return bool((self.labels == MISSING).any())

    def to_long(self) -> pd.DataFrame:
        """Long format with columns ``item, annotator, label`` (and ``score`` when scores exist)."""
        ii, jj = np.nonzero(self.observed)
        out = pd.DataFrame({"item": self.item_ids[ii], "annotator": self.annotator_ids[jj],
                            "label": self.labels[ii, jj].astype(np.int64)})
        if self.scores is not None:
            out["score"] = self.scores[ii]
        return out

    def require_scores(self) -> np.ndarray:
        if self.scores is None:
            raise ValueError("this computation needs classifier scores; build the AnnotationSet with `scores=`.")
        return self.scores

    def require_annotators(self, minimum: int, why: str) -> None:
        if self.n_annotators < minimum:
            raise ValueError(f"{why} needs at least {minimum} annotators; this data has {self.n_annotators}.")

    def subset(self, items) -> "AnnotationSet":
        """A new set restricted to rows ``items`` (integer positions or a boolean mask).

        Annotators left without any label are dropped.
        """
        idx = np.arange(self.n_items)[np.asarray(items)]
        lab = self.labels[idx]
        keep = (lab != MISSING).any(axis=0)
        return AnnotationSet(lab[:, keep], None if self.scores is None else self.scores[idx],
                             self.item_ids[idx], self.annotator_ids[keep], None if self.gold is None else self.gold[idx])

    def with_scores(self, scores) -> "AnnotationSet":
        """The same labels with new scores of shape (n_items,)."""
        return AnnotationSet(self.labels, check_scores(scores, ids=self.item_ids), self.item_ids, self.annotator_ids,
                             self.gold)

    def majority_vote(self, *, ties: str = "positive") -> np.ndarray:
        """Majority label per item, shape (n_items,); ties broken by ``ties`` in {"positive", "negative"}."""
        if ties not in ("positive", "negative"):
            raise ValueError(f"`ties` must be 'positive' or 'negative'; got {ties!r}.")
        pos = (self.labels == 1).sum(axis=1)
        n = self.observed.sum(axis=1)
        maj = (2 * pos > n).astype(np.int8)
        tie = 2 * pos == n
        maj[tie] = 1 if ties == "positive" else 0
        return maj

    def n_ties(self) -> int:
        """Number of items whose vote is split evenly."""
        return int((2 * (self.labels == 1).sum(axis=1) == self.observed.sum(axis=1)).sum())

    def vote_fraction(self) -> np.ndarray:
        """Fraction of positive votes among observed responses, shape (n_items,)."""
        return (self.labels == 1).sum(axis=1) / self.observed.sum(axis=1)

    def __repr__(self) -> str:
        n_obs = int(self.observed.sum())
        return (f"AnnotationSet(n_items={self.n_items}, n_annotators={self.n_annotators}, "
                f"n_labels={n_obs}, scores={'yes' if self.scores is not None else 'no'})")


def _check_gold(gold, item_ids) -> np.ndarray:
    """Gold labels of shape (n_items,): 0, 1, or -1 / NaN where unknown; offending items named."""
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
