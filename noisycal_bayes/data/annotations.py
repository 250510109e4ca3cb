"""`AnnotationSet`: the validated, immutable container for noisy labels and classifier scores."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validation import _preview, check_binary_labels, check_scores
from ..warnings import DataWarning

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

    Build it with :meth:`from_long` or :meth:`from_wide`; the constructor expects validated arrays.

    Attributes
    ----------
    labels : ndarray of shape (n_items, n_annotators), int8
        ``A_ij`` in {0, 1}; -1 where annotator ``j`` did not label item ``i``. Read-only.
    scores : ndarray of shape (n_items,) or None
        Classifier scores ``Z_i`` in [0, 1]. Read-only.
    item_ids : ndarray of shape (n_items,), object
    annotator_ids : ndarray of shape (n_annotators,), object

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
                f"{_preview(np.asarray(annotations.index)[bad])}. Map your classes to 0/1 first."
            ) from None
        bad = (lab != 0) & (lab != 1)
        if bad.any():
            raise ValueError(
                f"`{label}` must be 0 or 1; got {_preview(pd.unique(raw[bad])[:5])} at rows "
                f"{_preview(np.asarray(annotations.index)[bad])}. Map your classes to 0/1 first."
            )
        dup = frame.duplicated([item, annotator], keep=False).to_numpy()
        if dup.any():
            pairs = list(dict.fromkeys(zip(frame[item].to_numpy()[dup], frame[annotator].to_numpy()[dup])))
            raise ValueError(
                f"duplicate (item, annotator) pairs {_preview(pairs)}: each annotator may label an item once. "
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

    # ------------------------------------------------------------------ views
    @property
    def n_items(self) -> int:
        return self.labels.shape[0]

    @property
    def n_annotators(self) -> int:
        return self.labels.shape[1]

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
                             self.item_ids[idx], self.annotator_ids[keep])

    def with_scores(self, scores) -> "AnnotationSet":
        """The same labels with new scores of shape (n_items,)."""
        return AnnotationSet(self.labels, check_scores(scores, ids=self.item_ids), self.item_ids, self.annotator_ids)

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
