"""Every clean-label metric an evaluator reports, with channel-aware intervals, for 2 or K classes (issue 37).

:func:`clean_metrics` estimates, on the clean labels the annotators saw through their noisy channels,

- binary (predict 1 when ``score >= threshold``): accuracy, balanced accuracy, sensitivity, specificity, PPV,
  NPV, F1 (of the positive class), ROC AUC, Brier score ``(z - Y)^2`` and log loss;
- K classes (predict ``argmax_k p_ik``): top-1 accuracy, balanced accuracy (= macro recall), macro precision,
  macro F1, macro one-vs-rest ROC AUC, Brier score ``sum_k (p_ik - 1[Y_i = k])^2``, log loss, and per class
  recall, precision, F1 and one-vs-rest AUC;

for one classifier or several scored on the same items (then :meth:`CleanMetrics.compare`: the posterior
probability that one beats the other on every metric, with the paired interval of the difference).

**One kernel.** Every metric is a function of weighted sums over items of the clean-label indicator
``t_ik = 1[Y_i = k]``: the confusion matrix ``C[k, l] = sum_i w_i t_ik 1[yhat_i = l]`` (accuracy, recall,
precision, F1 and the binary names), ``sum_i w_i sum_k t_ik F_ik`` for a per-item loss table ``F`` (Brier, log
loss, accuracy: the metrics *linear* in the label) and the weighted Mann-Whitney statistic (AUC, by rank sums
over the distinct scores, ties counted half; pairs ``i != j`` only). :class:`MetricKernel` computes them all for
hard labels (R, n), soft targets (n, K) or (R, n, K) and item weights (R, n) at once: a metric from
(clean-label probabilities or draws, scores) costs ``O(R n K)``.

**Estimates.** Three, side by side, as for NC-ECE:

- ``estimate``: the kernel on the posterior-mean clean-label probabilities ``q_ik = P(Y_i = k | data)`` (the
  posterior mean itself for the linear metrics; the ratio of posterior-mean sums for the others, which agree
  with the posterior mean of the ratio to ``O(1/n)``);
- ``lower``, ``upper``: the equal-tailed ``level`` interval over replicates ``r``, each drawing the parameters
  ``theta_r`` (NUTS draws; weighted-likelihood bootstrap EM refits for binary EM fits, as
  :func:`~noisycal_bayes.labels.corrected_accuracy`; K-class bootstrap refits inside ``evaluate``), the clean
  labels ``Y_ri ~ P(Y_i | data, theta_r)`` and (``bootstrap=True``) Exp(1) item weights ``w_ri`` (Bayesian
  bootstrap, Rubin 1981): then the target is the metric of the population the items were drawn from; with
  ``bootstrap=False`` the metric of these items' clean labels;
- ``corrected_label``: the kernel on the corrected labels ``Ytilde_i`` (paper §3; K classes the corrected
  target vectors ``C_j^{-T} e_a`` combined over the item's annotators). ``E[Ytilde_i | Y_i] = e_{Y_i}`` given the
  channel, so for the linear metrics (accuracy, Brier, log loss) it is unbiased for any predictions; for the
  ratio metrics (sensitivity, AUC, F1...) it is a ratio of unbiased sums (AUC: the U-statistic over pairs
  ``i != j``, whose expectation is built from ``P(Y_i = 1 | z_i)`` products), hence consistent.

Beside them ``majority_vote``: the same metric against the majority vote (binary ties -> 1; K: lowest class),
the naive number.

**When the posterior estimate is unbiased.** By the tower property ``E[P(Y_i = k | A_i, c_i) f(z_i)] =
E[1[Y_i = k] f(z_i)]`` when ``f(z_i)`` is a function of what the fit conditions on (``c_i``: its score group).
The default fits make every model's predictions a function of the groups (the threshold is a bin edge;
K classes: the predicted class is part of the group), so the confusion-matrix metrics are unbiased up to the
channel assumptions. The AUC, the Brier score and the log loss use the score inside a group, which the grouped
model treats as independent of ``Y`` within it: their posterior estimate is pulled towards what the group-level
score would give, more the coarser the groups (about one group per 100 items by default for binary data,
:data:`~noisycal_bayes.labels.issues.MIN_ITEMS_PER_BIN`). When a fit has fewer than :data:`FINE_GROUPS` groups
(10 per predicted class, ``10 K`` for K classes; e.g. ``evaluate_multiclass``'s predicted class x 2 confidence
quantiles) these three are centred on the
corrected-label estimate, which does not depend on the groups, and a :class:`~noisycal_bayes.warnings.DataWarning`
says so. Their interval: binary, the posterior replicates shifted by ``corrected - posterior``; K classes,
replicates of the corrected-label estimator itself (draw ``s``'s confusion and annotator weights, the replicate's
item weights), whose spread is its own (the shifted posterior spread is too narrow at K = 10: docs/metrics.md).

**Predictions the fit did not condition on** (K classes; e.g. a crowd's pooled Dawid-Skene: one group). The
posterior is refined to the groups (fit group x every model's predicted class) and, for each replicate, the
prevalence of each refined group is re-estimated with the draw's confusion held fixed (:meth:`ClassPosterior.
conditional`, with the replicate's item weights): under the shared-channel assumption (the annotators' confusion
does not depend on the prediction) the conditional maximum-likelihood prevalence, so the tower property holds for
the confusion metrics again (before, a sparse K = 3 crowd's accuracy was 0.17 too low). The binary route refits with
groups instead (:func:`~noisycal_bayes.labels.comparison_groups`).
Coverage, bias and the CIFAR-10N check: docs/metrics.md.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import _preview, check_level, check_positive_int, check_scores, check_weights
from ..propagate.draws import thin_index
from ..warnings import DataWarning

__all__ = ["BINARY_METRICS", "CleanMetrics", "MULTICLASS_METRICS", "MetricKernel", "clean_metrics"]

#: Binary metrics, in table order.
BINARY_METRICS = ("accuracy", "balanced_accuracy", "sensitivity", "specificity", "ppv", "npv", "f1", "auc",
                  "brier", "log_loss")
#: K-class summary metrics, in table order (per-class ``recall[c]``, ``precision[c]``, ``f1[c]``, ``auc[c]``
#: follow them).
MULTICLASS_METRICS = ("accuracy", "balanced_accuracy", "macro_precision", "macro_f1", "auc", "brier", "log_loss")
PER_CLASS = ("recall", "precision", "f1", "auc")
#: Metrics where lower is better.
LOWER_IS_BETTER = ("brier", "log_loss")
#: Metrics linear in the clean-label indicator (the corrected-label estimate is unbiased for them).
LINEAR = ("accuracy", "brier", "log_loss")
#: Metrics that use the score inside a group (their posterior estimate needs fine groups).
WITHIN_GROUP = ("auc", "brier", "log_loss")
#: Fewer groups than this in the fit: the within-group metrics get a DataWarning. It is 10 score levels per
#: predicted class for binary data; K classes need as many per predicted class, ``10 K`` in all
#: (:func:`_fine_groups`).
FINE_GROUPS = 20
#: Floor of the probabilities inside the log loss.
LOG_FLOOR = 1e-15
TARGETS = {True: "population metric (Bayesian bootstrap over items)",
           False: "sample metric (clean labels of these items)"}
_BLOCK_VALUES = 4_000_000


def _base(name: str) -> str:
    return name.split("[", 1)[0]


def higher_is_better(name: str) -> bool:
    """Whether a larger value of metric ``name`` is better (all but Brier and log loss)."""
    return _base(name) not in LOWER_IS_BETTER


class MetricKernel:
    """All metrics of one classifier from clean labels (hard or soft) and item weights, vectorised over replicates.

    Parameters
    ----------
    scores : array of shape (n_items,), optional
        Binary classifier: ``P(Y = 1)``; predictions ``1[score >= threshold]``.
    probs : array of shape (n_items, K), optional
        K-class classifier (rows summing to 1); predictions ``argmax_k`` (ties to the lowest class).
    threshold : float, default 0.5
        Binary only.
    classes : sequence of K names, optional
        K classes: names in the per-class metric names (``recall[cat]``); default the indices.

    Examples
    --------
    >>> k = MetricKernel(scores=np.array([0.9, 0.2, 0.6, 0.4]))
    >>> v = k.values(np.array([1, 0, 0, 1]))
    >>> float(v["sensitivity"][0]), float(v["specificity"][0]), float(v["auc"][0])
    (0.5, 0.5, 0.75)
    """

    def __init__(self, *, scores=None, probs=None, threshold: float = 0.5, classes=None):
        if (scores is None) == (probs is None):
            raise ValueError("MetricKernel: give exactly one of `scores` (binary) and `probs` (K classes).")
        if scores is not None:
            z = np.asarray(scores, dtype=np.float64)
            if z.ndim != 1 or not np.all(np.isfinite(z)) or (z < 0).any() or (z > 1).any():
                raise ValueError("MetricKernel: `scores` must be probabilities in [0, 1] of shape (n_items,).")
            self.kind, self.threshold = "binary", float(threshold)
            self.probs = np.stack([1 - z, z], axis=1)
            self.yhat = (z >= self.threshold).astype(np.int64)
            self.names = BINARY_METRICS
            auc_classes = (1,)
        else:
            p = np.asarray(probs, dtype=np.float64)
            if p.ndim != 2 or p.shape[1] < 2 or not np.all(np.isfinite(p)) or (p < 0).any():
                raise ValueError("MetricKernel: `probs` must be probabilities of shape (n_items, K), K >= 2.")
            self.kind, self.threshold = "multiclass", None
            self.probs = p
            self.yhat = p.argmax(axis=1).astype(np.int64)
            k = p.shape[1]
            self.classes = [str(c) for c in (classes if classes is not None else range(k))]
            self.names = MULTICLASS_METRICS + tuple(f"{m}[{c}]" for m in PER_CLASS for c in self.classes)
            auc_classes = tuple(range(k))
        n, k = self.probs.shape
        self.n_items, self.n_classes = n, k
        pl = np.clip(self.probs, LOG_FLOOR, 1.0)
        if self.kind == "binary":
            brier = np.stack([self.probs[:, 1] ** 2, self.probs[:, 0] ** 2], axis=1)
        else:
            brier = (self.probs ** 2).sum(axis=1, keepdims=True) - 2 * self.probs + 1
        # Per-item loss of each clean class: the linear metrics are sum_i w_i sum_k t_ik F_ik / sum_i w_i.
        self.loss = {"brier": brier, "log_loss": -np.log(pl)}
        # Each AUC class's items sorted by its score, and the starts of the runs of tied scores (None: no ties).
        self.ranks = {}
        for c in auc_classes:
            order = np.argsort(self.probs[:, c], kind="stable")
            sz = self.probs[order, c]
            starts = np.flatnonzero(np.r_[True, sz[1:] != sz[:-1]])
            identity = bool(np.all(order == np.arange(n)))
            self.ranks[c] = (None if identity else order, None if starts.size == n else starts)

    # ------------------------------------------------------------------ the kernel
    def values(self, target, weights=None, metrics=None) -> dict:
        """Every metric (or those named in ``metrics``), one value per replicate: dict name -> (R,).

        ``target``: int class labels of shape (n,) or (R, n) (binary: 0/1), or clean-label probabilities /
        corrected targets of shape (n, K) or (R, n, K) (binary also (n,) or (R, n) floats: ``P(Y = 1)``).
        ``weights``: None (all 1), (n,) or (R, n). Undefined ratios (no positive, no predicted positive) are NaN.
        """
        n, k = self.n_items, self.n_classes
        t = np.asarray(target)
        hard = np.issubdtype(t.dtype, np.integer) or t.dtype == bool
        if t.dtype == bool and self.kind == "binary" and t.ndim == 2 and t.shape[1] == n:
            # Replicates of 0 / 1 labels (bool), weights kept in their dtype (float32 in the replicates).
            w = np.ones(t.shape, np.float32) if weights is None else np.asarray(weights)
            return self._binary(t, np.broadcast_to(w, t.shape), set(self.names if metrics is None else metrics),
                                hard=True)
        if hard:
            t = np.atleast_2d(t).astype(np.int64)
            if t.shape[1] != n or (t < 0).any() or (t >= k).any():
                raise ValueError(f"MetricKernel.values: hard labels must be classes 0..{k - 1} of shape (R, {n}).")
        else:
            t = t.astype(np.float64, copy=False)
            if self.kind == "binary" and t.ndim in (1, 2) and t.shape[-1] == n and (t.ndim == 1 or n != k):
                t = t[None] if t.ndim == 1 else t    # P(Y = 1) of shape (R, n)
                r = t.shape[0]
                w = np.ones((r, n)) if weights is None else np.broadcast_to(np.asarray(weights, np.float64), (r, n))
                return self._binary(t, w, set(self.names if metrics is None else metrics))
            if t.ndim == 2:
                t = t[None]
            if t.ndim != 3 or t.shape[1:] != (n, k):
                raise ValueError(f"MetricKernel.values: soft targets must have shape (n, K) or (R, n, K) with "
                                 f"n={n}, K={k}; got {np.shape(target)}.")
        r = t.shape[0]
        w = np.ones((r, n)) if weights is None else np.broadcast_to(np.asarray(weights, dtype=np.float64), (r, n))
        want = set(self.names if metrics is None else metrics)
        if self.kind == "binary":
            return self._binary(t if hard else t[..., 1], w, want, hard=hard)
        tk = (lambda c: (t == c).astype(np.float64)) if hard else (lambda c: t[..., c])
        total = w.sum(axis=1)
        rows = np.arange(r, dtype=np.int64)[:, None]
        # Weighted confusion matrix (R, K, K): C[:, true, predicted].
        if hard:
            flat = ((rows * k + t) * k + self.yhat[None]).ravel()
            conf = np.bincount(flat, weights=w.ravel(), minlength=r * k * k).reshape(r, k, k)
        else:
            flat = (rows * k + self.yhat[None]).ravel()
            conf = np.stack([np.bincount(flat, weights=(w * t[..., c]).ravel(), minlength=r * k).reshape(r, k)
                             for c in range(k)], axis=1)
        out = {}
        with np.errstate(invalid="ignore", divide="ignore"):
            diag = np.diagonal(conf, axis1=1, axis2=2)
            actual, predicted = conf.sum(axis=2), conf.sum(axis=1)
            recall, precision = diag / actual, diag / predicted
            f1 = 2 * diag / (actual + predicted)
            out["accuracy"] = diag.sum(axis=1) / total
            out["balanced_accuracy"] = recall.mean(axis=1)
            if self.kind == "binary":
                out.update(sensitivity=recall[:, 1], specificity=recall[:, 0], ppv=precision[:, 1],
                           npv=precision[:, 0], f1=f1[:, 1])
            else:
                out.update(macro_precision=precision.mean(axis=1), macro_f1=f1.mean(axis=1))
                for c, name in enumerate(self.classes):
                    out[f"recall[{name}]"], out[f"precision[{name}]"] = recall[:, c], precision[:, c]
                    out[f"f1[{name}]"] = f1[:, c]
            for name, table in self.loss.items():
                if name in want:
                    if hard:
                        per = np.take_along_axis(table[None], t[..., None], axis=2)[..., 0]
                    else:
                        per = np.einsum("rnk,nk->rn", t, table)
                    out[name] = (w * per).sum(axis=1) / total
            if any(_base(m) == "auc" for m in want):
                aucs = {}
                for c in self.ranks:
                    wp = w * tk(c)
                    aucs[c] = self._auc(c, wp, w - wp)
                if self.kind == "binary":
                    out["auc"] = aucs[1]
                else:
                    for c, name in enumerate(self.classes):
                        out[f"auc[{name}]"] = aucs[c]
                    out["auc"] = np.mean(np.stack(list(aucs.values())), axis=0)
        return {m: np.asarray(out[m], dtype=np.float64) for m in self.names if m in want}

    def _binary(self, t1, w, want, *, hard: bool = False) -> dict:
        """The binary metrics from ``t1`` (R, n) = the clean label (``hard``) or ``P(Y = 1)`` and weights (R, n).

        One buffer ``S = [w; w t1]`` (2R, n) in the weights' dtype; every weighted count and linear-metric sum is
        a column of ``S F`` with the item table ``F = [1, yhat, f0, f1 - f0]`` (Brier and log loss ``f``):
        ``total, predicted`` and the losses' ``f0`` parts from the ``w`` rows, ``positives, tp`` and the ``f1 - f0``
        parts from the ``w t1`` rows (:func:`_row_sums`, one pass instead of eight); the AUC one sorted pass.
        """
        r = w.shape[0]
        dtype = w.dtype if hard else np.result_type(w, t1)
        s = np.empty((2 * r, self.n_items), dtype)
        s[:r] = w
        np.multiply(w, t1, out=s[r:])
        sums = _row_sums(s, self._features(dtype))
        total, pred, pos, tp = sums[:r, 0], sums[:r, 1], sums[r:, 0], sums[r:, 1]
        fn, fp = pos - tp, pred - tp
        tn = total - pos - fp
        out = {}
        with np.errstate(invalid="ignore", divide="ignore"):
            sens, spec = tp / pos, tn / (tn + fp)
            out.update(accuracy=(tp + tn) / total, balanced_accuracy=(sens + spec) / 2, sensitivity=sens,
                       specificity=spec, ppv=tp / pred, npv=tn / (tn + fn), f1=2 * tp / (2 * tp + fp + fn))
            for i, name in enumerate(self.loss):
                if name in want:
                    out[name] = (sums[:r, 2 + 2 * i] + sums[r:, 3 + 2 * i]) / total
            if "auc" in want:
                out["auc"] = self._auc(1, s[r:], s[:r] - s[r:], hard=hard)
        return {m: np.asarray(out[m], dtype=np.float64) for m in self.names if m in want}

    def _features(self, dtype) -> np.ndarray:
        """The binary item table ``F`` (n, 6) of :meth:`_binary` in ``dtype``: ``1, yhat`` and ``f0, f1 - f0`` of each
        loss (Brier, log loss), ``f_k`` the loss of the clean class ``k``; kept per dtype."""
        key = np.dtype(dtype).str
        cache = self.__dict__.setdefault("_feature_tables", {})
        if key not in cache:
            cols = [np.ones(self.n_items), self.yhat.astype(np.float64)]
            for table in self.loss.values():
                cols += [table[:, 0], table[:, 1] - table[:, 0]]
            cache[key] = np.ascontiguousarray(np.stack(cols, axis=1), dtype=dtype)
        return cache[key]

    def _auc(self, c: int, wp, wn, *, hard: bool = False):
        """Weighted Mann-Whitney AUC of class ``c`` against the rest, shape (R,): pairs ``i != j``, ties half.

        ``sum_{i != j} w_i w_j t_i (1 - t_j) (1[z_i > z_j] + 1[z_i = z_j] / 2) / sum_{i != j} w_i w_j t_i (1 - t_j)``
        with ``wp = w t`` and ``wn = w (1 - t)`` (R, n): one pass over the items sorted by score (runs of tied scores
        summed first, :func:`_pairs_below`); the ``i = j`` terms (non-zero for soft targets only) are removed.
        """
        order, starts = self.ranks[c]
        p, q = (wp, wn) if order is None else (np.take(wp, order, axis=1), np.take(wn, order, axis=1))
        if hard and starts is None:  # no self pairs (t_i (1 - t_i) = 0) and no ties
            num, ps, qs = _pairs_below(p, q)
            return num / (ps * qs)
        self_pairs = (p * q).sum(axis=1)                 # w_i^2 t_i (1 - t_i)
        if starts is not None:
            p, q = np.add.reduceat(p, starts, axis=1), np.add.reduceat(q, starts, axis=1)
        below, ps, qs = _pairs_below(p, q)              # negatives at or below, ties counted whole: remove half
        num = below - 0.5 * np.einsum("rn,rn->r", p, q) - 0.5 * self_pairs
        return num / (ps * qs - self_pairs)


#: :func:`_pairs_below` cuts the items into chunks of _CHUNK, and its matrix products into calls of _CALL chunks:
#: 512 x 16 x 16 stays below OpenBLAS's threading threshold (M N K = 262144), so no call starts threads, which on
#: a busy machine (or beside JAX's own pool) made one product 400 times slower (docs/performance.md).
_CHUNK, _CALL = 16, 512
_BLAS_SINGLE = 262_144
_UPPER = np.triu(np.ones((_CHUNK, _CHUNK)))


def _row_sums(s, f) -> np.ndarray:
    """``s @ f`` (m, n) x (n, k) in float64: matrix products of item chunks in the arrays' dtype (each below
    OpenBLAS's threading threshold ``M N K = 262144``, so that no call starts threads: see :data:`_CHUNK`), summed
    in float64. One pass over ``s`` for all ``k`` sums, about four times faster than ``k`` separate
    ``einsum("rn,n->r")`` passes (docs/performance.md, clean-label metrics)."""
    m, n = s.shape
    step = max(16, _BLAS_SINGLE // (m * f.shape[1]) // 16 * 16)
    out = np.zeros((m, f.shape[1]))
    for i in range(0, n, step):
        out += s[:, i:i + step] @ f[i:i + step]
    return out


def _pairs_below(p, q):
    """``(sum_i p_i sum_{j <= i} q_j, sum_i p_i, sum_i q_i)`` per row of ``p, q`` (R, n); float64 results.

    NumPy's cumulative sum is a sequential loop (2-5 ns a value), so it is formed for chunks of :data:`_CHUNK`
    items only: within a chunk the inclusive sums are ``q_c U`` (``U`` the upper triangle of ones, one batched
    matrix product in the arrays' dtype), across chunks ``sum_c P_c Qbelow_c`` from the chunk sums (an exclusive
    cumulative sum over n / 16 chunks, in float64). Items beyond the last whole call (fewer than 8192) take the
    plain cumulative sum. Equal to ``sum(p * cumsum(q))`` up to rounding (tests/labels/test_metrics.py).
    """
    r, n = p.shape
    span = _CHUNK * _CALL
    n0 = n - n % span
    within = np.zeros(r)
    pc, qc = np.zeros((r, 0)), np.zeros((r, 0))
    if n0:
        p4, q4 = p[:, :n0].reshape(r, -1, _CALL, _CHUNK), q[:, :n0].reshape(r, -1, _CALL, _CHUNK)
        inclusive = q4 @ _UPPER.astype(q.dtype, copy=False)
        within = np.einsum("rbcm,rbcm->r", p4, inclusive).astype(np.float64)
        pc = (p4 @ np.ones(_CHUNK, p.dtype)).astype(np.float64).reshape(r, -1)  # a sum over axis 3: 10 times slower
        qc = inclusive[..., -1].astype(np.float64).reshape(r, -1)
    if n0 < n:
        pt, qt = p[:, n0:], q[:, n0:]
        within = within + np.einsum("rn,rn->r", pt, np.cumsum(qt, axis=1))
        pc = np.concatenate([pc, pt.sum(axis=1, dtype=np.float64)[:, None]], axis=1)
        qc = np.concatenate([qc, qt.sum(axis=1, dtype=np.float64)[:, None]], axis=1)
    across = np.einsum("rc,rc->r", pc, np.cumsum(qc, axis=1) - qc)
    return within + across, pc.sum(axis=1), qc.sum(axis=1)


# ============================================================================================ result
@dataclass(frozen=True)
class CleanMetrics:
    """Clean-label metrics of one or more classifiers on the same annotated items (:func:`clean_metrics`).

    Attributes
    ----------
    table : DataFrame
        One row per (model, metric): ``model, metric, estimate`` (the estimate read: ``posterior`` or, per
        ``centre``, the corrected-label one), ``lower, upper`` (the equal-tailed ``level`` interval of ``target``),
        ``corrected_label`` (the corrected-label estimate), ``majority_vote`` (the naive metric), ``posterior``
        (the posterior-mean plug-in), ``centre`` (``"posterior"``, or ``"corrected labels"`` for AUC, Brier and log
        loss when the fit has fewer than :data:`FINE_GROUPS` groups, ``10 K`` for K classes: their replicates are then
        the corrected-label estimator's own (K classes) or shifted by ``corrected_label - posterior`` (binary)),
        ``higher_is_better``, ``linear`` (linear in the clean label: the
        corrected-label estimate is unbiased), ``conditioned`` (the metric is a function of what the fit
        conditions on: its posterior estimate is unbiased given the channel model).
    draws : dict of model -> dict of metric -> ndarray (n_replicates,)
        The replicates (shared by every model: paired).
    models : tuple of str
    kind : {"binary", "multiclass"}
    level : float
    target : str
    threshold : dict of model -> float or None
    n_items, n_replicates : int
    fit_model, fit_method, n_groups : what the clean-label posterior comes from
    parameter_uncertainty : str
        "posterior draws", "weighted-likelihood bootstrap (EM refits)", "bootstrap refits (EM)" or "none (point
        estimate)" (the interval then omits the channel uncertainty).
    failed_refits : int
    notes : tuple of str
        What the estimates rest on (coarse groups, predictions not a function of the groups).
    """

    table: pd.DataFrame
    draws: dict = field(repr=False)
    models: tuple
    kind: str
    level: float
    target: str
    threshold: dict
    n_items: int
    n_replicates: int
    fit_model: str
    fit_method: str
    n_groups: int
    parameter_uncertainty: str
    failed_refits: int = 0
    notes: tuple = ()

    def to_frame(self) -> pd.DataFrame:
        """The table (a copy)."""
        return self.table.copy()

    def _pair(self, a, b, metric):
        for name in (a, b):
            if name not in self.models:
                raise ValueError(f"unknown model {name!r}; models are {list(self.models)}.")
        if metric not in self.draws[a]:
            raise ValueError(f"unknown metric {metric!r}; metrics are {list(self.draws[a])}.")
        return self.draws[a][metric] - self.draws[b][metric]

    def probability_better(self, a, b, *, metric: str = "accuracy") -> float:
        """Posterior probability that model ``a`` beats model ``b`` on ``metric`` (higher, or lower for Brier and log
        loss); ties count half, replicates with an undefined metric are left out."""
        d = self._pair(a, b, metric)
        d = d[np.isfinite(d)]
        if not higher_is_better(metric):
            d = -d
        return float(np.mean(d > 0) + 0.5 * np.mean(d == 0)) if d.size else float("nan")

    def compare(self, a, b) -> pd.DataFrame:
        """Model ``a`` against model ``b`` on every metric: ``metric, difference`` (``a - b`` of the estimates),
        ``lower, upper`` (paired equal-tailed interval of the difference over the shared replicates),
        ``p_a_better`` (:meth:`probability_better`), ``majority_vote_difference`` (the naive one)."""
        t = self.table.set_index(["model", "metric"])
        rows = []
        for m in self.draws[a]:
            d = self._pair(a, b, m)
            lo, hi = _interval(d, self.level)
            rows.append({"metric": m, "difference": t.loc[(a, m), "estimate"] - t.loc[(b, m), "estimate"],
                         "lower": lo, "upper": hi, "p_a_better": self.probability_better(a, b, metric=m),
                         "majority_vote_difference": t.loc[(a, m), "majority_vote"] - t.loc[(b, m), "majority_vote"]})
        return pd.DataFrame(rows)


def _interval(x, level):
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(x, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


# ============================================================================================ public function
def clean_metrics(data, fit=None, *, scores=None, probs=None, threshold=0.5, metrics=None, level: float = 0.9,
                  n_replicates: int = 1000, bootstrap: bool = True, weights="iv", n_draws: int | None = 1000,
                  seed: int = 0) -> CleanMetrics:
    """Clean-label metrics (binary or K classes) of one or several classifiers, with intervals (module notes).

    Parameters
    ----------
    data : AnnotationSet or MulticlassAnnotationSet
        The annotated evaluation items.
    fit : FitResult, optional
        A channel fit of ``data``. Binary: ``fit_em`` / ``fit_map`` / ``fit_nuts``. K classes: ``fit_em_multiclass``
        / ``fit_nuts_multiclass`` (EM: the point estimate, no channel uncertainty in the interval). None (advised):
        binary, EM of the histogram model on equal-mass score bins with the threshold as an edge (several models:
        :func:`~noisycal_bayes.labels.comparison_groups`), with weighted-likelihood bootstrap refits; K classes,
        EM of the grouped model on the predicted class (of every model) x confidence quantiles of about 100 items.
    scores : array (n_items,) or dict of name -> array, optional
        Binary classifier scores; default ``data.scores``. A dict compares several models.
    probs : array (n_items, K) or dict of name -> array, optional
        K-class probabilities; default ``data.probs``.
    threshold : float or dict of name -> float, default 0.5
        Binary: predict 1 when ``score >= threshold``.
    metrics : sequence of str, optional
        Restrict the table to these metrics (default: all, :data:`BINARY_METRICS` / :data:`MULTICLASS_METRICS` and
        the per-class ones).
    level : float, default 0.9
    n_replicates : int, default 1000
    bootstrap : bool, default True
        True: target the population metric (Bayesian-bootstrap item weights); False: these items' clean labels.
    weights : {"iv", "equal", "gap", "squared_gap"} or array, default "iv"
        Annotator weights of the corrected labels (K classes: "iv" or "equal").
    n_draws : int or None, default 1000
        Thin the fit's draws to at most this many.
    seed : int, default 0

    Returns
    -------
    CleanMetrics
        ``.table``, ``.compare(a, b)``, ``.probability_better(a, b, metric=...)``.

    Raises
    ------
    ValueError
        Bad data, fit, scores / probs (shape, range), threshold, metrics, level, n_replicates, weights.

    Warns
    -----
    DataWarning
        Binary: some model's predictions are not a function of the fit's groups (K classes: the posterior's
        prevalence is re-estimated per predicted class instead, and ``notes`` says so). AUC / Brier / log loss are
        asked of a fit with fewer than :data:`FINE_GROUPS` (K classes ``10 K``) groups (their posterior estimate is
        then pulled towards the group-level score; the corrected-label column is not).

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(3000, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], seed=0)
    >>> res = clean_metrics(sim.data, n_replicates=300)
    >>> row = res.table.set_index("metric").loc["sensitivity"]
    >>> truth = float(np.mean(sim.data.scores[sim.clean_labels == 1] >= 0.5))
    >>> bool(row.lower < truth < row.upper)
    True
    """
    return prepare_clean_metrics(data, fit, scores=scores, probs=probs, threshold=threshold, metrics=metrics,
                                 level=level, n_replicates=n_replicates, bootstrap=bootstrap, weights=weights,
                                 n_draws=n_draws, seed=seed)()


def prepare_clean_metrics(data, fit=None, *, scores=None, probs=None, threshold=0.5, metrics=None, level: float = 0.9,
                          n_replicates: int = 1000, bootstrap: bool = True, weights="iv", n_draws: int | None = 1000,
                          seed: int = 0):
    """:func:`clean_metrics` in two steps: the set-up now, the replicates when the returned function is called.

    Binary data: the set-up (checks, the default fit, the point estimates; every error and warning of
    ``clean_metrics``) runs here; the returned ``finish()`` runs the replicate blocks (array work and compiled refits,
    which release the GIL and emit no warnings: NumPy's floating-point warnings are silenced there, in a
    thread-local ``errstate``) and returns the :class:`CleanMetrics`, identical to ``clean_metrics`` with the same
    arguments. :func:`~noisycal_bayes.evaluate` runs ``finish`` in a worker thread beside its own fit, so that the
    metrics' replicates use a second core (docs/metrics.md, *Measured*). K-class data: everything runs in
    ``finish()``.

    Parameters and errors: :func:`clean_metrics`.

    Returns
    -------
    callable
        ``finish() -> CleanMetrics``.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(500, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], seed=0)
    >>> finish = prepare_clean_metrics(sim.data, n_replicates=50)
    >>> finish().table.equals(clean_metrics(sim.data, n_replicates=50).table)
    True
    """
    from ..data import MulticlassAnnotationSet

    level = check_level(level)
    n_replicates = check_positive_int(n_replicates, name="n_replicates")
    n_draws = None if n_draws is None else check_positive_int(n_draws, name="n_draws")
    if isinstance(data, MulticlassAnnotationSet):
        if scores is not None:
            raise ValueError("clean_metrics: K-class data take `probs`, not `scores`.")
        res = _multiclass(data, fit, probs, metrics, level, n_replicates, bool(bootstrap), weights, n_draws, seed)
        return lambda: res
    if probs is not None:
        raise ValueError("clean_metrics: binary data take `scores`, not `probs` (K-class data: a "
                         "MulticlassAnnotationSet).")
    return _binary(data, fit, scores, threshold, metrics, level, n_replicates, bool(bootstrap), weights, n_draws, seed)


def _models(given, default, func, check):
    """Named models: a dict as given, one array as ``{"model": array}``."""
    if given is None:
        given = default
    if isinstance(given, dict):
        if not given:
            raise ValueError(f"{func}: the dict of models is empty.")
        return {str(k): check(v, str(k)) for k, v in given.items()}
    return {"model": check(given, "model")}


def _check_metrics(metrics, names, func):
    if metrics is None:
        return None
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    unknown = [m for m in metrics if m not in names]
    if unknown or not metrics:
        raise ValueError(f"{func}: unknown metrics {_preview(unknown)}; choose from {list(names)}.")
    return metrics


def _table(models, kernels, plug, corr, naive, draws, level, conditioned, coarse: bool, own=()):
    """The result table; with ``coarse`` groups the within-group metrics are centred on the corrected-label estimate:
    the metrics in ``own`` have replicates of the corrected-label estimator already, the others' draws are shifted by
    ``corrected - posterior`` (in place, so that comparisons use the same centre)."""
    rows = []
    for name in models:
        for m in plug[name]:
            est, centre = float(plug[name][m][0]), "posterior"
            if coarse and _base(m) in WITHIN_GROUP and np.isfinite(corr[name][m][0]):
                if m not in own:
                    draws[name][m] = draws[name][m] + (float(corr[name][m][0]) - est)
                est, centre = float(corr[name][m][0]), "corrected labels"
            lo, hi = _interval(draws[name][m], level)
            rows.append({"model": name, "metric": m, "estimate": est, "lower": lo, "upper": hi,
                         "corrected_label": float(corr[name][m][0]), "majority_vote": float(naive[name][m][0]),
                         "posterior": float(plug[name][m][0]), "centre": centre,
                         "higher_is_better": higher_is_better(m), "linear": _base(m) in LINEAR,
                         "conditioned": bool(conditioned[name]) and _base(m) not in WITHIN_GROUP})
    return pd.DataFrame(rows)


def _fine_groups(n_classes: int) -> int:
    """Fewest groups of a fit for its posterior AUC, Brier and log loss: 10 per predicted class.

    ``FINE_GROUPS // 2 * K``: 20 for binary data (10 score levels per predicted class), 30 for three classes, 100 for
    ten, so ``evaluate_multiclass``'s groups (predicted class x 2 confidence quantiles: 20 at K = 10) are coarse at
    K = 10 as at K = 3; counting all groups against 20 let their bias through at K = 10 (docs/metrics.md).

    >>> _fine_groups(2), _fine_groups(3), _fine_groups(10)
    (20, 30, 100)
    """
    return FINE_GROUPS // 2 * max(int(n_classes), 2)


def _coarse_warning(n_groups, wanted, func, fine=FINE_GROUPS, stacklevel=4):
    within = [m for m in wanted if _base(m) in WITHIN_GROUP]
    if within and n_groups < fine:
        warnings.warn(f"{func}: {sorted(set(map(_base, within)))} use the score inside the fit's {n_groups} groups, "
                      "which its model treats as independent of the clean label within a group, so their posterior "
                      "estimates are pulled towards what the group-level score would give: their estimates and "
                      "intervals are centred on the corrected-label estimate (consistent for any groups; column "
                      "`centre`), the posterior one kept in column `posterior`. Finer groups avoid this.",
                      DataWarning, stacklevel=stacklevel)


def _collect(kernels, blocks, n_replicates, metrics):
    """Run the replicate blocks: ``blocks`` yields ``(r0, target (b, n) int, weights (b, n) or None)``, or
    ``(r0, target, weights, metrics_of_target, (other_target, other_weights, other_metrics))`` when some metrics
    have replicates of another estimator (K classes, coarse groups: the corrected targets)."""
    draws = {name: {} for name in kernels}
    for block in blocks:
        r0, target, w = block[:3]
        parts = [(target, w, metrics)] if len(block) == 3 else [(target, w, block[3]), block[4]]
        b = np.shape(target)[0]
        for t, wt, ms in parts:
            if ms is not None and not ms:
                continue
            for name, k in kernels.items():
                for m, v in k.values(t, wt, ms).items():
                    draws[name].setdefault(m, np.empty(n_replicates))[r0:r0 + b] = v
    return draws


# ---------------------------------------------------------------------------------------------- binary
def _binary(data, fit, scores, threshold, metrics, level, n_replicates, bootstrap, weights, n_draws, seed):
    from .accuracy import fitted_posteriors, predictions, threshold_bins
    from .compare import _thresholds, comparison_groups
    from ._posterior import check_data, parameter_draws
    from ._replicates import SOURCES, Replicates, _corrected_rows

    func = "clean_metrics"
    data = check_data(data, func)

    def check(z, name):
        arr = check_scores(z, name=f"scores[{name!r}]", ids=data.item_ids)
        if arr.shape != (data.n_items,):
            raise ValueError(f"{func}: `scores[{name!r}]` must have shape ({data.n_items},); got {arr.shape}.")
        return arr

    sc = _models(scores, data.require_scores() if scores is None else None, func, check)
    names = tuple(sc)
    th = _thresholds(threshold, names, func)
    w_rule, _ = check_weights(weights, data.n_annotators)
    metrics = _check_metrics(metrics, BINARY_METRICS, func)
    yhat = np.stack([predictions(sc[n], th[n]) for n in names], axis=1)
    if len(names) == 1:
        groups = lambda: threshold_bins(sc[names[0]], [th[names[0]]], data.n_items)  # noqa: E731
        model = "histogram"
    else:
        groups, model = (lambda: comparison_groups(yhat, list(sc.values()))), "grouped"
    fit, rp, cond = fitted_posteriors(data, fit, yhat, names, model=model, groups=groups, n_draws=n_draws,
                                      seed=seed, func=func)
    _coarse_warning(int(fit.groups.n_groups), metrics or BINARY_METRICS, func, stacklevel=5)  # clean_metrics' caller
    # Every per-item array in the order of the first model's scores: its AUC then needs no gather (the metrics do
    # not depend on the order of the items).
    order = np.argsort(sc[names[0]], kind="stable")
    kernels = {n: MetricKernel(scores=sc[n][order], threshold=th[n]) for n in names}
    engine = Replicates(fit, rp.rows, yhat, weights=w_rule, n_draws=n_draws)
    inverse = rp.inverse[order]
    q = rp.item_mean()[order]
    params, _ = parameter_draws(fit, n_draws)
    yt = _corrected_rows(rp.rows, params["fpr"], params["tpr"], w_rule).mean(axis=0)[inverse]
    maj = data.majority_vote(ties="positive").astype(np.int64)[order]
    plug = {n: k.values(q, None, metrics) for n, k in kernels.items()}
    corr = {n: k.values(yt, None, metrics) for n, k in kernels.items()}
    naive = {n: k.values(maj, None, metrics) for n, k in kernels.items()}
    rng = np.random.default_rng(seed)
    failed = [0]

    def blocks():
        # The replicates in float32 (half the memory traffic; their sums carry relative errors near 1e-6, far below
        # the intervals' Monte Carlo error), the weights by inversion, the items in score order.
        for r0, item_w, p, _, nf in engine.blocks(n_replicates, rng, corrected=False, order=order,
                                                  dtype=np.float32, inversion=True):
            failed[0] += nf
            y = _bernoulli16(rng, p, inverse)
            yield r0, y, item_w if bootstrap else None

    def finish():
        with np.errstate(all="ignore"):      # thread-local: nothing of the worker thread reaches `warnings`
            draws = _collect(kernels, blocks(), n_replicates, metrics)
        notes = _notes(names, cond, fit.model)
        if failed[0]:
            notes += (f"{failed[0]} of {n_replicates} bootstrap refits broke down or lost their orientation (a refit "
                      "needs tpr > fpr for every annotator, which adversarial annotators break) and used the "
                      "estimate: the interval omits that much of the channel uncertainty.",)
        coarse = int(fit.groups.n_groups) < FINE_GROUPS
        table = _table(names, kernels, plug, corr, naive, draws, level, dict(zip(names, cond)), coarse)
        return CleanMetrics(table=table, draws=draws, models=names, kind="binary", level=level,
                            target=TARGETS[bootstrap], threshold=th, n_items=data.n_items, n_replicates=n_replicates,
                            fit_model=fit.model, fit_method=fit.method, n_groups=int(fit.groups.n_groups),
                            parameter_uncertainty=SOURCES[engine.source], failed_refits=failed[0], notes=notes)

    return finish


def _bernoulli16(rng, p, inverse) -> np.ndarray:
    """Clean labels ``Y[r, k] ~ Bernoulli(p[r, inverse[k]])`` (bool (b, n)) from 16-bit uniforms: ``U < T`` with ``U``
    uniform on 0..65535 (four to a 64-bit draw of the generator, three times cheaper than float32 uniforms) and
    ``T = min(rint(65536 p), 65535)``, so each label's probability is off by at most ``2**-17`` (``p`` rounded) or
    ``2**-16`` (``p > 1 - 2**-17``): far below the Monte Carlo error of any interval here."""
    t = np.minimum(np.rint(np.asarray(p) * 65536.0), 65535).astype(np.uint16)
    b, n = t.shape[0], inverse.size
    u = rng.bit_generator.random_raw(-(-b * n // 4)).view(np.uint16)[:b * n].reshape(b, n)
    return u < np.take(t, inverse, axis=1)


def _notes(names, cond, fit_model):
    bad = [n for n, c in zip(names, cond) if not c]
    if not bad:
        return ()
    return (f"the predictions of {bad} are not a function of the {fit_model!r} fit's groups: their posterior "
            "estimates are biased towards a predictor using the groups only; read the corrected_label column.",)


# ---------------------------------------------------------------------------------------------- K classes
class ClassPosterior:
    """``P(Y_i = k | A_i, g_i, theta_s)`` per parameter draw ``s`` (confusion (S, J, K, K), prevalence (S, G, K)).

    Computed once per distinct (group, gold, response pattern) row (items sharing one have the same posterior), then
    read per item; one row per item when the patterns do not fit (repeated labels, more than 5e7 cells).
    """

    def __init__(self, responses, n_items, group, confusion, prevalence):
        self.item, self.ann, self.lab, self.gold = responses
        self.n, self.group = n_items, np.asarray(group, dtype=np.int64)
        conf = np.asarray(confusion, dtype=np.float64)
        prev = np.asarray(prevalence, dtype=np.float64)
        self.conf = conf.reshape((-1,) + conf.shape[-3:])
        self.prev = prev.reshape((-1,) + prev.shape[-2:])
        if self.prev.shape[0] not in (1, self.conf.shape[0]):
            self.prev = self.prev.mean(axis=0, keepdims=True)
        self.n_samples = self.conf.shape[0]
        self._rows()

    def _rows(self):
        n, j = self.n, self.conf.shape[1]
        cells = self.item * j + self.ann
        gold = np.full(n, -1, np.int64) if self.gold is None else np.asarray(self.gold, np.int64)
        if n * j > 50_000_000 or np.unique(cells).size != cells.size:  # repeats: one row per item
            self.rows = (self.item, self.ann, self.lab, n, self.group, self.gold)
            self.inverse = None
            return
        table = np.full((n, j), -1, np.int64)
        table[self.item, self.ann] = self.lab
        key = np.column_stack([self.group, gold, table])
        uniq, inverse = np.unique(key, axis=0, return_inverse=True)
        r, a = np.nonzero(uniq[:, 2:] >= 0)
        row_gold = uniq[:, 1]
        self.rows = (r, a, uniq[r, 2 + a], uniq.shape[0], uniq[:, 0], None if self.gold is None else row_gold)
        self.inverse = inverse.reshape(-1)

    def __call__(self, s: int) -> np.ndarray:
        from ..core.likelihood import logsumexp_rows, rows_class_log_joint

        floor = 1e-12
        prev = self.prev[s if self.prev.shape[0] > 1 else 0]
        row, ann, lab, n_rows, group, gold = self.rows
        lj = rows_class_log_joint(row, ann, lab, n_rows, group, gold, np.log(np.clip(self.conf[s], floor, 1.0)),
                                  np.log(np.clip(prev, floor, 1.0)))
        q = np.exp(lj - logsumexp_rows(lj)[:, None])
        return q if self.inverse is None else np.take(q, self.inverse, axis=0)

    def refined(self, group) -> "ClassPosterior":
        """The same responses and draws on finer groups ``group`` (n,), each inside one of this posterior's groups;
        every draw's prevalence copied from the coarse group containing it (:meth:`conditional`'s start). The rows
        are this posterior's rows split by the new group (no new pass over the response patterns)."""
        group = np.asarray(group, dtype=np.int64)
        n_new = int(group.max()) + 1
        parent = np.zeros(n_new, np.int64)
        parent[group] = self.group
        out = object.__new__(ClassPosterior)
        out.__dict__.update({a: v for a, v in self.__dict__.items() if a != "_by_group"})
        out.group, out.prev = group, self.prev[:, parent]
        row, ann, lab, n_rows, _, gold = self.rows
        if self.inverse is None:   # one row per item
            out.rows = (row, ann, lab, n_rows, group, gold)
            return out
        key, inverse = np.unique(self.inverse * n_new + group, return_inverse=True)
        old, new_group = key // n_new, key % n_new
        # Each new row carries its old row's responses: responses sorted by old row, repeated per new row.
        by_row = np.argsort(row, kind="stable")
        count = np.bincount(row, minlength=n_rows)
        first = np.concatenate([[0], np.cumsum(count)[:-1]])
        reps = count[old]
        within = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
        take = by_row[np.repeat(first[old], reps) + within]
        new_row = np.repeat(np.arange(key.size), reps)
        out.rows = (new_row, ann[take], lab[take], key.size, new_group, None if gold is None else gold[old])
        out.inverse = inverse.reshape(-1)
        return out

    def conditional(self, which, weights=None, start=None, *, tol: float = 1e-8, max_iter: int = 500):
        """Posteriors ``(b, n, K)`` and prevalences ``(b, G, K)`` with the prevalence of every group re-estimated
        for each draw ``which[r]``, its confusion held fixed: EM over the prevalences only.

        Given draw ``s``'s confusion the rows' likelihoods ``l_rk = P(A_r | Y = k)`` are fixed, so EM iterates
        ``pi_gk <- pi_gk sum_{r in g} c_r l_rk / (l_r . pi_g) / sum_{r in g} c_r`` (the weighted mean of the rows'
        posteriors in ``g``) with row weights ``c`` (the items' ``weights`` (b, n), default 1): the maximisation of a
        concave log-likelihood, stopped when no entry moves by more than ``tol``. Under the shared-channel assumption
        (the annotators' confusion does not depend on the group) this is the conditional maximum-likelihood
        prevalence, so ``q`` is ``P(Y_i | A_i, g_i)`` for groups the fit did not condition on. ``start`` (G, K): the
        first iterate (default: the draws' own prevalences). Groups without weight keep their start. Two
        matrix-vector products per group and iteration (rows sorted by group once).
        """
        from ..core.likelihood import rows_class_log_joint

        floor = 1e-12
        row, ann, lab, n_rows, group, gold = self.rows
        n_groups, k = self.prev.shape[1], self.conf.shape[-1]
        which = np.asarray(which, dtype=np.int64)
        b = which.size
        if "_by_group" not in self.__dict__:
            order = np.argsort(group, kind="stable")
            bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
            self._by_group = (order, bounds)
        order, bounds = self._by_group
        uniq, pos = np.unique(which, return_inverse=True)
        zero = np.zeros((n_groups, k))
        lik = []
        for s in uniq:
            ll = rows_class_log_joint(row, ann, lab, n_rows, group, gold, np.log(np.clip(self.conf[s], floor, 1.0)),
                                      zero)[order]
            lik.append(np.exp(ll - ll.max(axis=1, keepdims=True)))           # (rows, K), row maximum 1
        if weights is None:
            c1 = np.ones(n_rows) if self.inverse is None else np.bincount(self.inverse, minlength=n_rows) * 1.0
            c = np.broadcast_to(c1[order], (b, n_rows))
        else:
            w = np.asarray(weights, dtype=np.float64)
            c = (w if self.inverse is None else np.stack([np.bincount(self.inverse, weights=x, minlength=n_rows)
                                                          for x in w]))[:, order]
        if start is None:
            pi = np.stack([self.prev[s if self.prev.shape[0] > 1 else 0] for s in which])
        else:
            pi = np.broadcast_to(np.asarray(start, dtype=np.float64), (b, n_groups, k)).copy()
        pi = np.clip(pi, floor, None)
        pi /= pi.sum(axis=2, keepdims=True)
        spans = [(g, bounds[g], bounds[g + 1]) for g in range(n_groups) if bounds[g + 1] > bounds[g]]
        q = np.empty((b, n_rows, k))
        for j in range(b):
            el, cj, p = lik[pos[j]], c[j], pi[j]
            for g, lo, hi in spans:
                lg, cg = el[lo:hi], cj[lo:hi]
                total = cg.sum()
                if total <= 0:
                    continue
                for _ in range(max_iter):
                    new = p[g] * ((cg / (lg @ p[g])) @ lg) / total
                    moved = float(np.max(np.abs(new - p[g])))
                    p[g] = new
                    if moved < tol:
                        break
            for g, lo, hi in spans:
                qg = el[lo:hi] * np.clip(p[g], floor, None)
                q[j, lo:hi] = qg / qg.sum(axis=1, keepdims=True)
        back = np.empty_like(order)
        back[order] = np.arange(order.size)
        q = np.take(q, back, axis=1)
        return (q if self.inverse is None else np.take(q, self.inverse, axis=1)), pi


def _multiclass(data, fit, probs, metrics, level, n_replicates, bootstrap, weights, n_draws, seed):
    from .._validation import check_probs
    from ..models.inputs import class_arrays

    func = "clean_metrics"
    k = int(data.n_classes)

    def check(p, name):
        arr = check_probs(p, name=f"probs[{name!r}]")
        if arr.shape != (data.n_items, k):
            raise ValueError(f"{func}: `probs[{name!r}]` must have shape ({data.n_items}, {k}); got {arr.shape}.")
        return arr

    pr = _models(probs, data.require_probs() if probs is None else None, func, check)
    if fit is None:
        from ..inference import fit_em_multiclass

        fit = fit_em_multiclass(data, model="grouped", groups=default_class_groups(list(pr.values())), seed=seed)
    if not hasattr(fit, "confusion") or np.ndim(fit.confusion) < 3:
        raise ValueError(f"{func}: `fit` must be a K-class fit (fit_em_multiclass, fit_nuts_multiclass); got "
                         f"{type(fit).__name__}.")
    x = class_arrays(data, func)
    post = ClassPosterior((x.item, x.annotator, x.label, x.gold), data.n_items, fit.groups, fit.confusion,
                           fit.prevalence)
    source = "posterior draws" if post.n_samples > 1 else "none (point estimate)"
    return multiclass_metrics(data, pr, post, metrics=metrics, level=level, n_replicates=n_replicates,
                              bootstrap=bootstrap, weights=weights, n_draws=n_draws, seed=seed,
                              fit_model=str(fit.model), fit_method=str(getattr(fit, "method", "")),
                              parameter_uncertainty=source)


def default_class_groups(probs: list, n_items_per_group: int = 100) -> np.ndarray:
    """Default K-class groups of :func:`clean_metrics`: every model's predicted class x confidence quantiles of the
    mean probabilities (``max(2, n / (K x 100))`` quantiles, at most 10), as consecutive integers."""
    mean = np.mean(np.stack(probs), axis=0)
    n, k = mean.shape
    q = int(min(10, max(2, n // (k * n_items_per_group))))
    from ..core import score_groups

    g = score_groups(mean, n_quantiles=q).astype(np.int64)
    for p in probs:
        g = g * k + np.asarray(p).argmax(axis=1)
    return np.unique(g, return_inverse=True)[1].reshape(-1).astype(np.int32)


def multiclass_metrics(data, probs: dict, post, *, metrics=None, level=0.9, n_replicates=1000, bootstrap=True,
                       weights="iv", n_draws=1000, seed=0, fit_model="", fit_method="",
                       parameter_uncertainty="posterior draws", item_weights=None, centre=None) -> CleanMetrics:
    """The K-class engine of :func:`clean_metrics` from a clean-label posterior ``post`` (callable ``s -> (n, K)``
    with ``n_samples``, ``conf``, ``prev``, ``group``); :func:`~noisycal_bayes.evaluate` hands it its own draws
    (NUTS, or the EM route's bootstrap refits).

    ``item_weights`` (S, n), for draws that are bootstrap refits: draw ``s``'s item multiplicities. Then (with
    ``bootstrap``) a replicate on draw ``s`` weighs the items with them instead of fresh Exp(1) weights (joint draws,
    as the binary refits): the refit's channel error and its items' sampling error come from one resample. With fresh
    weights the channel part is under-propagated (the posteriors ``q_i(theta_s)`` of the original items move by only
    a fraction of the refit's shift) and the intervals were about 10% too narrow (docs/metrics.md, *Measured*).

    Coarse groups (fewer than ``10 K``): AUC, Brier and log loss are centred on the corrected-label estimate and
    their replicate ``r`` on draw ``s`` is that estimator with draw ``s``'s confusion (and annotator weights from it)
    on the replicate's item weights, items without a usable annotator under that draw left out (as in the point
    estimate). Predictions not a function of ``post.group``: the posterior is refined by predicted class and each
    replicate's prevalence re-estimated with its draw's confusion fixed and its item weights
    (:meth:`ClassPosterior.conditional`; ``conditioned`` is then True and a note says so). Both only change K-class
    outputs; the draws stay paired across models (same draw, weights and labels per replicate).

    ``centre``, a posterior like ``post`` (same responses and groups; e.g. the full-sample fit, one draw): the
    estimates (plug-in and corrected-label) are its, and every metric's replicates from ``post`` are moved by one
    constant so that their mean is the estimate. For draws whose spread is right but whose location is not: a crowd's
    refits with the population refitted (``evaluate_multiclass``), whose channels put the accuracy 0.036 too low while
    the full fit's are within 0.008 (docs/metrics.md, *The crowd's metrics: centred on the full fit*)."""
    from .accuracy import mixed_groups
    from ..core import annotator_weights, corrected_targets, usable_confusions
    from ..propagate.draws import thin_index as _thin

    func = "clean_metrics"
    if weights not in ("iv", "equal"):
        raise ValueError(f"{func}: K-class `weights` must be 'iv' or 'equal'; got {weights!r}.")
    names = tuple(probs)
    classes = list(getattr(data, "classes", None) or range(data.n_classes))
    kernels = {nm: MetricKernel(probs=p, classes=classes) for nm, p in probs.items()}
    all_names = kernels[names[0]].names
    metrics = _check_metrics(metrics, all_names, func)
    n, k = data.n_items, data.n_classes
    n_groups = int(np.max(post.group)) + 1
    item_w = None if item_weights is None else np.asarray(item_weights, dtype=np.float64)
    if item_w is not None and item_w.shape != (post.n_samples, n):
        raise ValueError(f"{func}: `item_weights` must have shape (n_draws, n_items) = ({post.n_samples}, {n}); got "
                         f"{item_w.shape}.")
    cond = {nm: mixed_groups(post.group, kern.yhat).size == 0 for nm, kern in kernels.items()}
    unconditioned = [nm for nm in names if not cond[nm]]
    coarse_post = post
    point = post if centre is None else centre
    coarse_point = point
    if unconditioned:
        # The fit's groups do not determine some predictions (a crowd's pooled fit: one group): refine them by every
        # model's predicted class and re-estimate each draw's prevalence there, its confusion fixed (conditional ML
        # under the shared channel), so the tower property holds for the confusion metrics (docs/metrics.md).
        g = post.group.astype(np.int64)
        for kern in kernels.values():
            g = g * k + kern.yhat
        g = np.unique(g, return_inverse=True)[1].reshape(-1)
        post = post.refined(g)
        point = post if centre is None else centre.refined(g)
        cond = {nm: True for nm in names}
    n_fine = int(np.unique(post.group).size)
    _coarse_warning(n_fine, metrics or all_names, func, _fine_groups(k))
    n_s = post.n_samples if n_draws is None else min(post.n_samples, n_draws)
    use = _thin(post.n_samples, n_s)
    # Plug-in: the clean-label posterior averaged over (at most 100 of) the draws (of `centre` when given).
    use_point = use if centre is None else _thin(point.n_samples, point.n_samples if n_draws is None else
                                                 min(point.n_samples, n_draws))
    mean_of = use_point[_thin(use_point.size, min(use_point.size, 100))]
    start = None
    if unconditioned:
        qs, pis = point.conditional(mean_of)
        q, start = qs.mean(axis=0), pis.mean(axis=0)
    else:
        q = np.mean([point(s) for s in mean_of], axis=0)
    conf = point.conf[use_point].mean(axis=0)
    prev = coarse_point.prev.mean(axis=0)
    with np.errstate(all="ignore"):
        usable = np.asarray(usable_confusions(conf))
        wt = np.asarray(annotator_weights(conf, prev.mean(axis=0), rule=weights, usable=usable))
        yt = np.asarray(corrected_targets((post.item, post.ann, post.lab), n, conf, weights=wt))
    has = np.isfinite(yt).all(axis=1)
    yt = np.where(has[:, None], yt, 1.0 / k)
    votes = np.zeros((n, k))
    np.add.at(votes, (post.item, post.lab), 1)
    labelled = votes.sum(axis=1) > 0
    maj = votes.argmax(axis=1).astype(np.int64)
    plug = {nm: kern.values(q, None, metrics) for nm, kern in kernels.items()}
    corr = {nm: kern.values(yt, has.astype(np.float64), metrics) for nm, kern in kernels.items()}
    naive = {nm: kern.values(maj, labelled.astype(np.float64), metrics) for nm, kern in kernels.items()}
    coarse = n_fine < _fine_groups(k)
    # With coarse groups the within-group metrics are centred on the corrected-label estimate; their replicates are
    # that estimator's own (each draw's corrected targets on the replicate's items), so that the interval has its
    # spread. Only where every model's corrected-label value is defined (else the posterior ones, as before).
    wanted = list(metrics or all_names)
    own = [m for m in wanted if coarse and _base(m) in WITHIN_GROUP
           and all(np.isfinite(corr[nm][m][0]) for nm in names)]
    rest = [m for m in wanted if m not in own]
    rng = np.random.default_rng(seed)
    which = use[_thin(use.size, n_replicates)]
    step = max(1, _BLOCK_VALUES // (n * k))
    targets = {}

    def corrected_of(s):
        """Draw ``s``'s corrected targets (n, K) and their item mask, as the point ``yt`` with the draw's channel."""
        if s not in targets:
            pv = np.asarray(coarse_post.prev[s if coarse_post.prev.shape[0] > 1 else 0]).mean(axis=0)
            with np.errstate(all="ignore"):
                w_s = np.asarray(annotator_weights(post.conf[s], pv, rule=weights,
                                                   usable=np.asarray(usable_confusions(post.conf[s]))))
                t_s = np.asarray(corrected_targets((post.item, post.ann, post.lab), n, post.conf[s], weights=w_s))
            ok = np.isfinite(t_s).all(axis=1)
            if len(targets) >= 64:
                targets.clear()
            targets[s] = (np.where(ok[:, None], t_s, 1.0 / k), ok)
        return targets[s]

    def blocks():
        for r0 in range(0, n_replicates, step):
            b = min(step, n_replicates - r0)
            ss = which[r0:r0 + b]
            u = rng.random((b, n, 1))
            if not bootstrap:
                w = None
            elif item_w is None:
                w = rng.standard_exponential((b, n))
            else:
                w = item_w[ss]
            if unconditioned and w is not None and item_w is None:
                qb = post.conditional(ss, w, start)[0]                      # fresh weights: per replicate
            elif unconditioned:                                             # weights of the draw: once per draw
                us, at = np.unique(ss, return_inverse=True)
                qb = post.conditional(us, None if w is None else item_w[us], start)[0][at.reshape(-1)]
            else:
                qb = np.stack([post(s) for s in ss])                        # (b, n, K)
            y = np.minimum((u > np.cumsum(qb, axis=2)).sum(axis=2), k - 1).astype(np.int64)
            if not own:
                yield r0, y, w
                continue
            tb = [corrected_of(s) for s in ss]
            wo = np.stack([ok for _, ok in tb]).astype(np.float64)
            yield r0, y, w, rest, (np.stack([t for t, _ in tb]), wo if w is None else w * wo, own)

    draws = _collect(kernels, blocks(), n_replicates, metrics)
    draws = {nm: {m: draws[nm][m] for m in plug[nm]} for nm in names}   # table order
    notes = []
    if centre is not None:
        # The replicates' spread, moved to the centre's estimates (the corrected-label one for `own` metrics; the
        # other within-group metrics are moved on to it by _table).
        for nm in names:
            for m, d in draws[nm].items():
                to = corr[nm][m][0] if m in own else plug[nm][m][0]
                if np.isfinite(to) and np.isfinite(d).any():
                    draws[nm][m] = d + (float(to) - float(np.nanmean(d)))
        notes.append("the estimates are the full-sample fit's; the replicates (their spread) come from the draws, "
                     "moved so that each metric's replicates average to its estimate.")
    if unconditioned:
        notes.append(f"the predictions of {unconditioned} are not a function of the {fit_model!r} fit's groups: the "
                     "clean-label posterior's prevalence was re-estimated per fit group x predicted class, each "
                     "draw's confusion held fixed (conditional maximum likelihood, assuming the annotators' channel "
                     "does not depend on the classifier's prediction), so that the confusion metrics' posterior "
                     "estimates are consistent.")
    if not has.all():
        notes.append(f"{int((~has).sum())} items have no response of a usable annotator: the corrected_label column "
                     "leaves them out.")
    return CleanMetrics(table=_table(names, kernels, plug, corr, naive, draws, level, cond, coarse, own),
                        draws=draws,
                        models=names, kind="multiclass", level=level, target=TARGETS[bool(bootstrap)],
                        threshold={nm: None for nm in names}, n_items=int(n), n_replicates=n_replicates,
                        fit_model=fit_model, fit_method=fit_method, n_groups=n_groups,
                        parameter_uncertainty=parameter_uncertainty if post.n_samples > 1 else
                        "none (point estimate)", notes=tuple(notes))
