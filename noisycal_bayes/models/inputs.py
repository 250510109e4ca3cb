"""Validated model inputs: group assignment, compressed (group, pattern) counts, flat response arrays."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .._validation import _preview, binary_only
from ..core import clipped_logit
from ..core.likelihood import rows_class_log_joint
from ..core.tables import Responses, SparseTable
from ..data import (AnnotationSet, Binning, bin_index, groups_from_int, compress_patterns, grid_patterns, pad_patterns, padded_size,
                    resolve_groups)
from ..data.compress import PatternCounts, compress_multiclass
from ..data.responses import pair_keys, repeated_runs
from ..data.outofcore import SufficientStats, class_groups
from ..simulate.annotations import MulticlassSimulation


#: Models whose likelihood depends on the data only through (group, response pattern) counts.
GROUPED_MODELS = ("dawid_skene", "grouped", "histogram", "monotone")
MODEL_NAMES = GROUPED_MODELS + ("platt",)
#: Name of the prevalence dimension per model (None: a scalar prevalence or no prevalence at all).
PREVALENCE_DIM = {"dawid_skene": None, "grouped": "group", "histogram": "bin", "monotone": "bin", "platt": None}
#: Values of ``path`` (every EM and the K-class NUTS): compressed pattern counts or sparse responses.
PATHS = ("auto", "patterns", "sparse")
# Patterns path only for few annotators: (K+1)^J keys and the one-hot (rows, J K) stay small.
MAX_PATTERN_ANNOTATORS = 8
#: What a K-class data object must have (:func:`check_class_data`).
CLASS_DATA_FIELDS = ("responses", "n_items", "n_annotators", "n_classes", "probs", "gold", "classes")


def _readonly(a):
    if a is None:
        return None
    a = np.asarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class GroupAssignment:
    """The score groups (or bins) a fit used, so that downstream code can reuse exactly the same ones.

    Attributes
    ----------
    index : ndarray of shape (n_items,), int32, or None
        Group (or bin) of each item, in ``0..n_groups-1``; None for a fit made from
        :class:`~noisycal_bayes.data.SufficientStats` (which keep no items).
    n_groups : int
    dim : str or None
        ``"group"``, ``"bin"``, or None for models without groups (marginal, Platt).
    edges : ndarray of shape (n_edges,) or None
        Score edges of the partition (half-open bins ``[e_k, e_{k+1})``, the last one closed), when the
        groups came from an int or a :class:`~noisycal_bayes.Binning`; None for integer labels.
    used : ndarray of shape (n_groups,) or None
        For each group, the index of its bin among ``edges`` (bins without items are dropped, so
        ``used`` can skip values); with integer labels, the original label of each group.
    spec : object
        The ``groups`` argument as given.
    """

    index: np.ndarray
    n_groups: int
    dim: str | None
    edges: np.ndarray | None = None
    used: np.ndarray | None = None
    spec: object = None

    def __post_init__(self):
        for name in ("index", "edges", "used"):
            object.__setattr__(self, name, _readonly(getattr(self, name)))

    def assign(self, scores) -> np.ndarray:
        """Group of new scores under the fitted partition, shape (n,); -1 where the bin had no items.

        Raises
        ------
        ValueError
            The groups were integer labels (there is no score rule to apply).
        """
        if self.edges is None:
            raise ValueError("these groups were given as integer labels per item; there is no score partition to apply "
                             "to new scores.")
        raw = bin_index(np.asarray(scores, dtype=np.float64), self.edges)
        lookup = np.full(self.edges.size - 1, -1, dtype=np.int32)
        lookup[self.used] = np.arange(self.n_groups, dtype=np.int32)
        return lookup[raw]


@dataclass(frozen=True, eq=False)
class ModelInputs:
    """Arrays a model is evaluated on, built once per data set (read-only).

    Grouped models: ``patterns`` (n_rows, n_annotators) int8 with -1 = missing, ``row_group`` (n_rows,),
    ``counts`` (n_rows,) (None when rows are items). Compressed rows are padded with zero-count rows to
    :func:`~noisycal_bayes.data.padded_size`, so that one compiled sampler serves every data set with
    the same numbers of groups and annotators; when that size is every (group, pattern) cell the table is the
    grid of :func:`~noisycal_bayes.data.grid_patterns` (``grid=True``, evaluated without per-row gathers).
    ``inverse`` (n_items,) gives each item's row.

    Platt: flat responses ``item``, ``annotator``, ``label`` (n_responses,) and ``logit_score`` (n_items,).

    Sparse grouped inputs (``sparse=True``, :func:`sparse_inputs`; EM's path for crowds): the flat responses,
    ``row_group`` the group of each item (n_items,), ``gold`` (n_items,) int8 with -1 unknown (or None), and
    no ``patterns``: nothing of shape items x annotators.
    """

    model: str
    n_items: int
    n_annotators: int
    n_groups: int
    compressed: bool
    patterns: np.ndarray | None = None
    row_group: np.ndarray | None = None
    counts: np.ndarray | None = None
    n_patterns: int = 0
    grid: bool = False
    inverse: np.ndarray | None = None
    item: np.ndarray | None = None
    annotator: np.ndarray | None = None
    label: np.ndarray | None = None
    logit_score: np.ndarray | None = None
    static: dict = field(default_factory=dict)
    sparse: bool = False
    gold: np.ndarray | None = None

    def __post_init__(self):
        for name in ("patterns", "row_group", "counts", "inverse", "item", "annotator", "label", "logit_score", "gold"):
            object.__setattr__(self, name, _readonly(getattr(self, name)))

    def labels_per_annotator(self) -> np.ndarray:
        """Number of labels of each annotator, shape (n_annotators,) (float: compressed counts may be weights)."""
        if self.patterns is None:
            return np.bincount(np.asarray(self.annotator), minlength=self.n_annotators).astype(np.float64)
        return np.asarray(self.counts, np.float64) @ (np.asarray(self.patterns) >= 0).astype(np.float64)

    def model_args(self):
        """Positional data arguments of the model function (NumPy arrays; the prior is appended later)."""
        if self.sparse:
            raise ValueError("these inputs are sparse responses (EM's crowd path); the NumPyro grouped models take "
                             "compressed patterns. Refit with fit_map / fit_nuts for posterior draws.")
        if self.model == "platt":
            return (self.item.astype(np.int32), self.annotator.astype(np.int32), self.label.astype(np.int32),
                    self.logit_score)
        return (self.patterns.astype(np.int32), self.row_group.astype(np.int32), self.counts)

    def static_kwargs(self) -> dict:
        """Keyword arguments fixed at compile time (sizes)."""
        if self.model == "platt":
            return {"n_items": self.n_items, "n_annotators": self.n_annotators}
        return {"n_annotators": self.n_annotators, "n_groups": self.n_groups, "grid": self.grid}

    def item_rows(self) -> np.ndarray:
        """Row of each item in ``patterns`` (the identity for per-item rows), shape (n_items,).

        Raises
        ------
        ValueError
            The inputs were built from :class:`~noisycal_bayes.data.SufficientStats`, which keep counts of
            (group, pattern) rows but not which item is which.
        """
        if self.inverse is None:
            raise ValueError(STATS_ONLY)
        return self.inverse


#: Error for item-level outputs of a fit made from sufficient statistics.
STATS_ONLY = ("this fit was made from SufficientStats, which hold counts of (score group, response pattern) rows but "
              "not which item is which: item-level outputs (per-item log-likelihood for LOO, clean-label "
              "probabilities per item) are not available. Use per='row' for the log-likelihood of each (group, "
              "pattern) row, or fit an AnnotationSet of the items you need.")


def check_data(data, func: str) -> AnnotationSet | SufficientStats:
    """``data`` if it is an AnnotationSet or (for the grouped models, checked later) SufficientStats."""
    # K > 2 classes never get here (the fit's class_door sends them to the K-class fit); a two-class
    # MulticlassAnnotationSet does, and is told to pick its positive class (to_binary) or the K-class fit.
    binary_only(data, func, f"{func}_multiclass" if func in ("fit_em", "fit_map", "fit_nuts") else "fit_em_multiclass")
    if not isinstance(data, (AnnotationSet, SufficientStats)) or getattr(data, "kind", "binary") != "binary":
        raise ValueError(f"{func}: `data` must be an AnnotationSet (or SufficientStats for the grouped models); got "
                         f"{type(data).__name__}. Build one with AnnotationSet.from_long or AnnotationSet.from_wide.")
    if isinstance(data, SufficientStats) and data.n_items == 0:
        raise ValueError(f"{func}: these SufficientStats hold no items.")
    return data


def check_model(model, func: str) -> str:
    if model not in MODEL_NAMES:
        raise ValueError(f"{func}: `model` must be one of {list(MODEL_NAMES)}; got {model!r}.")
    return model


def resolve_assignment(data: AnnotationSet, model: str, groups, func: str) -> GroupAssignment:
    """Group assignment for ``model``: one group for the marginal and Platt models, else from ``groups``."""
    if isinstance(data, SufficientStats):
        return _stats_assignment(data, model, groups, func)
    n = data.n_items
    if model in ("dawid_skene", "platt"):
        return GroupAssignment(np.zeros(n, dtype=np.int32), 1, None, spec=None)
    dim = PREVALENCE_DIM[model]
    if groups is None:
        raise ValueError(f"{func}: model={model!r} needs `groups` (an int, a Binning or a group label per item); "
                         "use model='dawid_skene' for one prevalence.")
    is_rule = isinstance(groups, (Binning, int, np.integer)) and not isinstance(groups, bool)
    if is_rule and data.scores is None:
        raise ValueError(f"{func}: score groups given as {groups!r} need classifier scores, and this AnnotationSet has "
                         "none. Build it with `scores=`, pass an integer group label per item, or use "
                         "model='dawid_skene'.")
    if is_rule:
        # What resolve_groups does for a rule (edges, bin index, empty bins dropped), with the edges and the
        # bin index computed once (each is a pass over the scores; the quantiles sort them).
        binning = groups if isinstance(groups, Binning) else groups_from_int(groups, stacklevel=5)
        edges = binning.edges_for(data.scores)
        idx = bin_index(data.scores, edges)
        present = np.bincount(idx, minlength=edges.size - 1)
        used = np.flatnonzero(present)
        if used.size == edges.size - 1:
            index = idx
        else:
            rank = np.zeros(present.size, np.int32)
            rank[used] = np.arange(used.size)
            index = rank[idx]
        return GroupAssignment(index.astype(np.int32), int(used.size), dim, edges, used.astype(np.int32), spec=binning)
    index, n_groups = resolve_groups(data.scores, groups, n)
    used = np.unique(np.asarray(groups))
    return GroupAssignment(index, n_groups, dim, None, used, spec="labels")


def prepare_inputs(data: AnnotationSet, model: str, assignment: GroupAssignment, *, compress: bool = True,
                   func: str = "prepare_inputs") -> ModelInputs:
    """Build the arrays of ``model`` for ``data`` (one O(n J) pass); ``func`` names the caller in errors.

    The Platt model reads the responses (every repeated label a factor of its own); the grouped models one
    (group, pattern) row per item, which holds one label per (item, annotator) pair.

    Raises
    ------
    ValueError
        A grouped model on data with repeated (item, annotator) labels: they have no pattern row. Use the
        responses (:func:`sparse_inputs`: ``fit_em``'s sparse path, ``pooling="partial"``) or keep one label
        per pair (``repeated="first"``).
    """
    if isinstance(data, SufficientStats):
        return _stats_inputs(data, model, assignment, compress=compress)
    n, j = data.n_items, data.n_annotators
    if model == "platt":
        scores = data.require_scores()
        item, ann, lab = data.responses  # sorted by item then annotator: the order of np.nonzero(observed)
        return ModelInputs(model, n, j, 1, False, item=np.asarray(item, np.int32), annotator=np.asarray(ann, np.int32),
                           label=np.asarray(lab, np.int32),
                           logit_score=np.asarray(clipped_logit(scores), dtype=np.float64),
                           inverse=np.arange(n))
    data.require_one_label_per_pair(
        f"{func} (model={model!r}, one (group, pattern) row per item)",
        "Fit from the responses instead: fit_em chooses its sparse path; fit_nuts and fit_map take pooling='partial'.")
    g = assignment.index
    if not compress:
        return ModelInputs(model, n, j, assignment.n_groups, False, patterns=data.labels, row_group=g,
                           counts=np.ones(n), n_patterns=n, inverse=np.arange(n))
    pc = compress_patterns(data.labels, g, assignment.n_groups)
    return _compressed_inputs(model, n, pc)


def sparse_inputs(data: AnnotationSet, model: str, assignment: GroupAssignment) -> ModelInputs:
    """Flat responses (:attr:`AnnotationSet.responses`), each item's group and the gold labels: EM's sparse path.

    Nothing of shape (n_items, n_annotators) is built; the arrays are O(n_responses + n_items).
    """
    if isinstance(data, SufficientStats):
        raise ValueError("SufficientStats hold compressed (group, pattern) counts, not responses; the sparse path needs "
                         "an AnnotationSet.")
    item, ann, lab = data.responses
    n = data.n_items
    gold = getattr(data, "gold", None)
    return ModelInputs(model, n, data.n_annotators, assignment.n_groups, False, row_group=assignment.index,
                       inverse=np.arange(n), item=np.asarray(item, np.int32), annotator=np.asarray(ann, np.int32),
                       label=np.asarray(lab, np.int32), sparse=True,
                       gold=None if gold is None else np.asarray(gold, np.int8))


def differing_items(inputs: ModelInputs, data: AnnotationSet) -> np.ndarray:
    """Positions (sorted, int64) of the items of ``data`` whose labels differ from those ``inputs`` were built from.

    ``inputs`` and ``data`` must have the same numbers of items and annotators (callers check that first, with
    their own message). Pattern inputs (one row per item) are compared with the dense labels; a set with repeated
    (item, annotator) labels differs from them at every item with a repeat, which no pattern row holds. Response
    inputs (the sparse path, Platt) are compared as (item, annotator, label) triples in one canonical order, so
    the order of an annotator's repeats on an item does not matter. O(n_items x n_annotators) for patterns,
    O(n_responses log n_responses) for responses.
    """
    if inputs.patterns is not None:
        if data.has_repeats:
            item, ann, _ = data.responses
            return np.unique(np.asarray(item, np.int64)[repeated_runs(pair_keys(item, ann, data.n_annotators))[0]])
        fitted = np.asarray(inputs.patterns)[np.asarray(inputs.inverse)]
        return np.flatnonzero((fitted != data.labels).any(axis=1))
    n = data.n_items
    mine = np.c_[tuple(np.asarray(a, np.int64) for a in data.responses)]
    theirs = np.c_[np.asarray(inputs.item), np.asarray(inputs.annotator), np.asarray(inputs.label)].astype(np.int64)
    if mine.shape != theirs.shape:  # items whose number of responses changed
        return np.flatnonzero(np.bincount(mine[:, 0], minlength=n) != np.bincount(theirs[:, 0], minlength=n))
    mine, theirs = mine[np.lexsort(mine.T[::-1])], theirs[np.lexsort(theirs.T[::-1])]
    bad = (mine != theirs).any(axis=1)
    return np.unique(np.concatenate([mine[bad, 0], theirs[bad, 0]]))


def _compressed_inputs(model: str, n_items: int, pc) -> ModelInputs:
    """Inputs from compressed rows: the grid table when it has the padded size, else zero-count padding."""
    n_patterns, j = pc.patterns.shape
    size = padded_size(n_patterns, pc.n_groups, j)
    grid = size == pc.n_groups * 3 ** j
    table = grid_patterns(pc) if grid else pad_patterns(pc, size)
    return ModelInputs(model, n_items, j, pc.n_groups, True, patterns=table.patterns, row_group=table.group,
                       counts=table.counts, n_patterns=n_patterns, grid=grid, inverse=table.inverse)



# ------------------------------------------------------------------ fits from sufficient statistics
def _stats_assignment(stats: SufficientStats, model: str, groups, func: str) -> GroupAssignment:
    """Groups of a fit from SufficientStats: their non-empty score bins (or one group for the marginal model).

    The bins were fixed when the statistics were computed, so ``groups`` must be None or a Binning /
    edges equal to ``stats.edges`` (an int, meaning equal-mass groups of the scores, cannot be honoured).
    """
    if model == "platt":
        raise ValueError(f"{func}: model='platt' needs each item's score; SufficientStats keep only counts per score "
                         "bin. Fit an AnnotationSet, or use a grouped model ('grouped', 'histogram', 'dawid_skene', "
                         "'monotone').")
    if model == "dawid_skene":
        return GroupAssignment(None, 1, None, spec=None)
    dim = PREVALENCE_DIM[model]
    if stats.edges is None:
        raise ValueError(f"{func}: model={model!r} needs score groups, and these SufficientStats were computed without "
                         "scores (one bin). Recompute them with `bins=` and a score column, or use model='dawid_skene'.")
    if groups is not None:
        edges = None
        if isinstance(groups, Binning) and groups.kind != "equal_mass":
            edges = groups.edges_for(None)
        elif not isinstance(groups, (Binning, int, np.integer)):
            try:
                edges = np.asarray(groups, dtype=np.float64)
            except (TypeError, ValueError):
                edges = None
        if edges is None or edges.shape != stats.edges.shape or not np.array_equal(edges, stats.edges):
            raise ValueError(f"{func}: with SufficientStats the score groups are the bins the statistics were computed "
                             f"with (edges {np.round(stats.edges, 6).tolist()}); pass groups=None (or that Binning), "
                             f"not {groups!r}. Recompute the statistics to change the groups.")
    used = np.flatnonzero(stats.bin_counts > 0).astype(np.int32)
    return GroupAssignment(None, int(used.size), dim, stats.edges, used, spec=stats.binning)


def _stats_inputs(stats: SufficientStats, model: str, assignment: GroupAssignment, *, compress: bool) -> ModelInputs:
    """Compressed, padded inputs from SufficientStats: bins re-indexed to the non-empty groups (or merged).

    The rows come out in the order :func:`~noisycal_bayes.data.compress_patterns` gives for the same
    items, so a fit from the statistics sees exactly the arrays of a fit from the AnnotationSet.
    """
    if not compress:
        raise ValueError("`compress=False` evaluates the likelihood item by item, and SufficientStats keep no items; "
                         "use compress=True.")
    j = stats.n_annotators
    if assignment.n_groups == 1 and assignment.used is None:
        new_group = np.zeros(stats.n_patterns, np.int64)
    else:
        lookup = np.full(stats.n_bins, -1, np.int64)
        lookup[assignment.used] = np.arange(assignment.n_groups)
        new_group = lookup[stats.group]
    key = new_group * 3 ** j
    for col in range(j):
        key = key + (stats.patterns[:, col].astype(np.int64) + 1) * 3 ** (j - 1 - col)
    uniq, inv = np.unique(key, return_inverse=True)
    counts = np.bincount(inv.reshape(-1), weights=stats.counts, minlength=uniq.size)
    first = np.zeros(uniq.size, np.int64)
    first[inv.reshape(-1)[::-1]] = np.arange(stats.n_patterns)[::-1]
    pc = PatternCounts(np.asarray(stats.patterns)[first], (uniq // 3 ** j).astype(np.int32), counts,
                       assignment.n_groups, None)
    return _compressed_inputs(model, stats.n_items, pc)


# ------------------------------------------------------------------------------------------------ K classes
class ClassData(NamedTuple):
    """K-class data as validated arrays: what the K-class fits read (:func:`class_arrays`), and a data object they
    accept (a bootstrap replicate's rows, a fit on the annotators with labels).

    ``responses`` (item, annotator, label) int64 of shape (n_responses,); ``probs`` (n_items, K) float64 or None;
    ``gold`` (n_items,) int64 with -1 unknown, or None; ``classes`` the class names (empty: ``0..K-1``).
    """

    responses: Responses
    n_items: int
    n_annotators: int
    n_classes: int
    probs: np.ndarray | None = None
    gold: np.ndarray | None = None
    classes: tuple = ()

    @property
    def item(self):
        return self.responses[0]

    @property
    def annotator(self):
        return self.responses[1]

    @property
    def label(self):
        return self.responses[2]


def _refuse_stats(data, func: str) -> None:
    """K-class fits that read responses refuse SufficientStats, naming the fit that takes them."""
    if isinstance(data, SufficientStats):
        raise ValueError(f"{func}: SufficientStats hold counts of (group, response pattern) rows, not responses; "
                         f"{func} needs the MulticlassAnnotationSet. K-class statistics are fitted by fit_em "
                         "(fit_em_multiclass).")


def class_arrays(data, func: str) -> ClassData:
    """Duck-typed adapter: a MulticlassAnnotationSet-like object (``responses``, ``n_items``, ``n_annotators``,
    ``n_classes``, ``probs``, ``gold``) or a :class:`~noisycal_bayes.simulate.MulticlassSimulation`."""
    _refuse_stats(data, func)
    if isinstance(data, MulticlassSimulation):
        item, ann, lab = data.item, data.annotator, data.label
        n, J, K = data.probs.shape[0], data.confusion.shape[0], data.probs.shape[1]
        probs, gold, classes = data.probs, None, tuple(range(K))
    elif all(hasattr(data, a) for a in ("responses", "n_items", "n_annotators", "n_classes")):
        item, ann, lab = data.responses
        n, J, K = int(data.n_items), int(data.n_annotators), int(data.n_classes)
        probs, gold = getattr(data, "probs", None), getattr(data, "gold", None)
        classes = tuple(getattr(data, "classes", None) or range(K))
    else:
        raise ValueError(f"{func}: `data` must be a MulticlassAnnotationSet (responses, n_items, n_annotators, "
                         f"n_classes, probs, gold) or a MulticlassSimulation; got {type(data).__name__}.")
    item, ann, lab = (np.asarray(v).astype(np.int64) for v in (item, ann, lab))
    if K < 2:
        raise ValueError(f"{func}: needs at least 2 classes; got n_classes={K}.")
    if J < 2:
        raise ValueError(f"{func}: {J} annotator cannot identify K x K channels (any channel with the observed label "
                         "frequencies fits equally well). Add annotators, or supply the confusion matrix.")
    if not (item.shape == ann.shape == lab.shape) or item.size == 0:
        raise ValueError(f"{func}: `responses` must be three arrays of one positive length; got shapes "
                         f"{item.shape}, {ann.shape}, {lab.shape}.")
    for name, v, hi in (("item", item, n), ("annotator", ann, J), ("label", lab, K)):
        bad = (v < 0) | (v >= hi)
        if bad.any():
            raise ValueError(f"{func}: response {name}s must lie in 0..{hi - 1}; got {_preview(v[bad])} at responses "
                             f"{_preview(np.flatnonzero(bad))}."
                             + (" Map the classes to 0..K-1 first." if name == "label" else ""))
    if probs is not None:
        probs = np.asarray(probs, dtype=np.float64)
        if probs.shape != (n, K):
            raise ValueError(f"{func}: `probs` must have shape ({n}, {K}); got {probs.shape}.")
    if gold is not None:
        gold = np.asarray(gold).astype(np.int64)
        if gold.shape != (n,):
            raise ValueError(f"{func}: `gold` must have shape ({n},); got {gold.shape}.")
        bad = (gold < -1) | (gold >= K)
        if bad.any():
            raise ValueError(f"{func}: `gold` must be -1 (unknown) or a class in 0..{K - 1}; got {_preview(gold[bad])} "
                             f"at items {_preview(np.flatnonzero(bad))}.")
        if not (gold >= 0).any():
            gold = None
    return ClassData(Responses(item, ann, lab), n, J, K, probs, gold, classes)


def repeat_count(item, annotator, n_annotators: int) -> int:
    """Responses that repeat an (item, annotator) pair of an earlier response."""
    key = np.asarray(item).astype(np.int64) * n_annotators + annotator
    if key.size > 1 and np.all(key[1:] >= key[:-1]):
        return int(np.sum(key[1:] == key[:-1]))
    return int(key.size - np.unique(key).size)


def resolve_class_groups(model: str, groups, *, n_items: int, n_classes: int, probs, func: str):
    """``(index (n_items,), n_groups, reason)``: the score groups of a K-class fit.

    One group for ``model="dawid_skene"`` or without ``probs``; ``groups=None``:
    :func:`~noisycal_bayes.core.score_groups` ``(probs)`` (predicted class x 2 confidence quantiles, ``n_groups =
    2 K``); else ``groups`` validated (an int per item, >= 0; ``n_groups = max + 1``).
    """
    if model == "dawid_skene":
        return np.zeros(n_items, np.int32), 1, "one group (dawid_skene)"
    g, n_groups = class_groups(groups, probs, n_items, n_classes, func)
    if groups is not None:
        reason = "given"
    elif probs is None:
        reason = "one group (no probs)"
    else:
        reason = "score_groups(probs): predicted class x 2 confidence quantiles"
    return g.astype(np.int32), n_groups, reason


def class_log_joint_items(x: ClassData, group, confusion, prevalence):
    """``log P(Y_i = y, A_i)`` per item, shape (n_items, K) (NumPy, float64; gold items -inf off their label), with
    the logs clipped at 1e-12 as the EM's E-step does."""
    return rows_class_log_joint(x.item, x.annotator, x.label, x.n_items, group, x.gold,
                                np.log(np.clip(confusion, 1e-12, 1.0)), np.log(np.clip(prevalence, 1e-12, 1.0)))


def check_class_data(data, func: str):
    """``(item, annotator, label, gold)`` as int arrays, validated against the duck-typed data's sizes."""
    _refuse_stats(data, func)
    missing = [a for a in CLASS_DATA_FIELDS if not hasattr(data, a)]
    if missing:
        raise ValueError(f"{func}: `data` must be a MulticlassAnnotationSet (or an object with {list(CLASS_DATA_FIELDS)}); "
                         f"{type(data).__name__} has no {missing}.")
    n, n_ann, k = int(data.n_items), int(data.n_annotators), int(data.n_classes)
    if k < 2:
        raise ValueError(f"{func}: `n_classes` must be at least 2; got {k}.")
    if n < 1 or n_ann < 1:
        raise ValueError(f"{func}: the data hold {n} items and {n_ann} annotators; need at least one of each.")
    item, ann, lab = (np.asarray(a) for a in data.responses)
    if item.size == 0:
        raise ValueError(f"{func}: the data hold no responses.")
    bad = np.flatnonzero((lab < 0) | (lab >= k))
    if bad.size:
        raise ValueError(f"{func}: labels must lie in 0..{k - 1}; got {lab[bad[:5]].tolist()} at responses "
                         f"{bad[:5].tolist()}.")
    if item.min() < 0 or item.max() >= n or ann.min() < 0 or ann.max() >= n_ann:
        raise ValueError(f"{func}: response indices out of range (items 0..{n - 1}, annotators 0..{n_ann - 1}).")
    gold = data.gold
    if gold is None:
        gold = np.full(n, -1, np.int32)
    gold = np.asarray(gold)
    if gold.shape != (n,):
        raise ValueError(f"{func}: `gold` must have shape ({n},); got {gold.shape}.")
    bad = np.flatnonzero((gold < -1) | (gold >= k))
    if bad.size:
        raise ValueError(f"{func}: gold labels must be -1 (unknown) or in 0..{k - 1}; got {gold[bad[:5]].tolist()} "
                         f"at items {bad[:5].tolist()}.")
    return item.astype(np.int32), ann.astype(np.int32), lab.astype(np.int32), gold.astype(np.int32)


def patterns_feasible(item, ann, *, path, func, n_groups, n_annotators, n_classes) -> bool:
    """Whether the responses fit the pattern path; ValueError for an unknown ``path`` or ``"patterns"`` when they
    do not."""
    if path not in PATHS:
        raise ValueError(f"{func}: `path` must be one of {list(PATHS)}; got {path!r}.")
    # Python ints: exact at any number of annotators (a float (K + 1)^(J + 1) overflows for a crowd).
    fits_key = n_groups * (n_classes + 1) ** (n_annotators + 1) < 2 ** 62
    feasible = (fits_key and n_annotators <= MAX_PATTERN_ANNOTATORS and not repeat_count(item, ann, n_annotators))
    if path == "patterns" and not feasible:
        raise ValueError(f"{func}: path='patterns' needs one response per (item, annotator) pair and at most "
                         f"{MAX_PATTERN_ANNOTATORS} annotators; use path='sparse' (or 'auto').")
    return feasible


def build_class_tables(item, ann, lab, gold, index, *, n_groups, n_items, n_annotators, n_classes, path, func):
    """``(table for the likelihood, sparse table, path used)``."""
    sparse = SparseTable(*sorted_responses(item, ann, lab), index, gold)
    feasible = patterns_feasible(item, ann, path=path, func=func, n_groups=n_groups, n_annotators=n_annotators,
                                  n_classes=n_classes)
    if path == "sparse" or (path == "auto" and not feasible):
        return sparse, sparse, "sparse"
    table, _ = compress_multiclass(item, ann, lab, index, gold, n_items=n_items, n_annotators=n_annotators,
                                   n_classes=n_classes)
    n_rows = int(np.count_nonzero(table.counts))
    if path == "auto" and n_rows > n_items / 2:
        return sparse, sparse, "sparse"  # compression does not pay
    # Padded to a power of two: data sets of one design (e.g. SBC replicates) share one compiled sampler.
    size = max(16, 1 << (n_rows - 1).bit_length())
    table, _ = compress_multiclass(item, ann, lab, index, gold, n_items=n_items, n_annotators=n_annotators,
                                   n_classes=n_classes, pad_to=size)
    return table, sparse, "patterns"


def sorted_responses(item, ann, lab):
    """The responses sorted by item (stable), as they are when already sorted."""
    if item.size > 1 and np.any(np.diff(item) < 0):
        order = np.argsort(item, kind="stable")
        return item[order], ann[order], lab[order]
    return item, ann, lab


def table_args(table):
    """A table's arrays as NumPy float64 / int32 (the traced arguments of a compiled program)."""
    return tuple(np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a, np.int32)
                 for a in table)


def item_groups(data: AnnotationSet, fit, func: str) -> np.ndarray:
    """Group of each item of ``data`` under the fit's partition, int array of shape (n_items,).

    The fit's own assignment when ``data`` holds the items it was fitted on; otherwise the fitted score
    edges applied to ``data.scores`` (``ValueError`` for integer-label groups or items in bins the fit never saw).
    Read by the label posteriors and by the NC-ECE of a fit with channels per score group.
    """
    g = fit.groups
    if g.n_groups == 1 and g.edges is None:
        return np.zeros(data.n_items, dtype=np.int32)
    if _same_items(data, fit):
        return np.asarray(g.index, dtype=np.int32)
    if g.edges is None:
        raise ValueError(f"{func}: the fit's groups were integer labels for its own {g.index.size} items, and `data` "
                         "holds other items; pass the AnnotationSet the fit was made on.")
    z = data.require_scores()
    idx = g.assign(z)
    bad = idx < 0
    if bad.any():
        raise ValueError(f"{func}: items {_preview(data.item_ids[bad])} fall in score bins that held no item when the "
                         "fit was made, so the fit has no prevalence for them.")
    return idx


def _same_items(data: AnnotationSet, fit) -> bool:
    inputs = getattr(fit, "inputs", None)
    if inputs is None or inputs.n_items != data.n_items or inputs.n_annotators != data.n_annotators:
        return False
    if inputs.inverse is None:  # a fit from SufficientStats: no items to compare
        return False
    return differing_items(inputs, data).size == 0
