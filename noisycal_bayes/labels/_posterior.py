"""Per-item posteriors ``P(Y_i = 1 | A_i, c_i, theta)`` at every draw of a fit (shared by the public functions),
and the checked K-class clean-label posteriors ``P(Y_i = k | data)`` of shape (n_draws, n_items, K).

``c_i`` is what the fitted model conditions the clean label on: the item's score group (grouped,
histogram and monotone models), nothing (marginal Dawid-Skene) or the score itself (Platt curve).
For grouped models the posterior depends on the item only through its (group, response pattern) row,
so it is computed once per distinct row; the Platt model needs one value per item.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .._validation import _preview, binary_only, check_level, check_positive_int, shared_channels_only
from ..core import clipped_logit, x64
from ..core.posterior import posterior_positive_draws, posterior_positive_group_channels
from ..data import AnnotationSet, compress_patterns
from ..models.inputs import item_groups as _item_groups
from ..propagate.draws import extract_draws, thin_index
from ..models.result import CORRELATED_POSTERIOR
from ..reference.calibration import PROBS_ROW_TOL, check_responses

#: Cap on (draws x rows) posterior values held at once for per-item (Platt) models: 1e7 float64 = 80 MB.
MAX_VALUES = 10_000_000
#: Above this many (item, annotator) cells the posteriors come from the sparse responses, one row per item, instead
#: of the compressed dense patterns (5e7 int8 cells = 50 MB); repeated labels always take that route.
MAX_DENSE_CELLS = 50_000_000


def check_data(data, func: str) -> AnnotationSet:
    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"{func}: `data` must be an AnnotationSet; got {type(data).__name__}. Build one with "
                         "AnnotationSet.from_long or AnnotationSet.from_wide.")
    return data


def check_fit(fit, func: str):
    """A FitResult with an estimate (duck-typed, so that this layer needs no import of the inference layer)."""
    needed = ("model", "method", "point", "groups", "draws", "annotator_ids")
    if not all(hasattr(fit, k) for k in needed):
        raise ValueError(f"{func}: `fit` must be a FitResult from fit_em, fit_map or fit_nuts; got "
                         f"{type(fit).__name__}.")
    binary_only(fit, func, "fit.clean_label_probability(data) of the K-class fit", name="fit")
    if fit.model == "correlated" and getattr(fit, "group_channels", None) is not None:
        raise ValueError(f"{func}: {CORRELATED_POSTERIOR}")
    if fit.draws is None and not fit.point:
        raise ValueError(f"{func}: this fit has no estimate (every EM start failed: {fit.reason}). Refit with more "
                         "starts, or check for uninformative annotators.")
    return fit


#: What to use instead of the replicate-based label functions for a fit with channels per score group.
_PER_GROUP_INSTEAD = ("item_posteriors, annotation_posteriors or label_issues (they read each item's group channel), "
                      "fit.clean_label_probability() or posterior_nc_ece(data, fit)")


def level_and_draws(level, n_draws) -> tuple[float, int | None]:
    """Validated ``level`` and ``n_draws`` (None: every draw) of a public function."""
    return check_level(level), None if n_draws is None else check_positive_int(n_draws, name="n_draws")


@dataclass(frozen=True)
class Rows:
    """The distinct rows the posterior depends on: (group, pattern) pairs, or items for the Platt model.

    patterns (n_rows, n_annotators) int8, -1 = missing; group (n_rows,) or None (Platt); counts (n_rows,);
    inverse (n_items,) row of each item; logit_score (n_rows,) for Platt.
    """

    model: str
    patterns: np.ndarray
    group: np.ndarray | None
    counts: np.ndarray
    inverse: np.ndarray
    n_groups: int
    logit_score: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return self.patterns.shape[0]

    def positive(self, params: dict) -> np.ndarray:
        """``P(Y = 1 | row, theta_s)`` for a batch of parameters (leading axis S), shape (S, n_rows)."""
        with x64():
            f64 = lambda a: jnp.asarray(a, dtype=jnp.float64)  # noqa: E731
            if self.model == "platt":
                # The prior log-odds a * logit(z) + b enter additively: no clipping of m(z) is needed.
                # In NumPy: one rounded product and one rounded sum per entry, the numbers the op-by-op JAX
                # multiply and add gave, without compiling two programs per data shape.
                n64 = lambda a: np.asarray(a, dtype=np.float64)  # noqa: E731
                prior_logit = f64(n64(params["slope"])[:, None] * n64(self.logit_score)[None, :]
                                  + n64(params["intercept"])[:, None])
                out = posterior_positive_draws(jnp.asarray(self.patterns, dtype=jnp.int32), None, f64(params["fpr"]),
                                               f64(params["tpr"]), prior_logit=prior_logit)
                return np.asarray(out)
            s = np.shape(params["fpr"])[0]
            if np.ndim(params["fpr"]) == 3:  # channels per score group (S, G, J): each row at its group's channel
                return posterior_positive_group_channels(self.patterns, self.group, params["fpr"], params["tpr"],
                                                         np.asarray(params["prevalence"]).reshape(s, -1))
            # Pad the rows to a power of two so that one compiled function serves many data sets (padding
            # rows are all-missing and are dropped again).
            n_rows, j = self.patterns.shape
            size = padded_rows(n_rows)
            pat = np.concatenate([self.patterns, -np.ones((size - n_rows, j), dtype=self.patterns.dtype)])
            grp = np.concatenate([self.group, np.zeros(size - n_rows, dtype=self.group.dtype)])
            # The draws too, to a power of two (padding draws repeat the last one; vmap computes each draw on its own).
            n_pad = (1 << (s - 1).bit_length()) - s
            pad = lambda a: np.concatenate([a, np.repeat(a[-1:], n_pad, axis=0)])  # noqa: E731
            out = posterior_positive_draws(jnp.asarray(pat, dtype=jnp.int32), jnp.asarray(grp, dtype=jnp.int32),
                                           f64(pad(np.asarray(params["fpr"]))), f64(pad(np.asarray(params["tpr"]))),
                                           f64(pad(np.asarray(params["prevalence"]).reshape(s, -1))))
            return np.asarray(out)[:s, :n_rows]


@dataclass(frozen=True)
class ItemRows:
    """One row per item, from the sparse responses (repeated labels, or crowds above :data:`MAX_DENSE_CELLS`).

    ``P(Y_i = 1 | A_i, theta_s) = sigmoid(prior log-odds_i + sum_{r: i_r = i} [log P(A_r | Y = 1) - log P(A_r | Y = 0)])``:
    the segment sum over item ``i``'s responses (each a conditionally independent label given the clean label, repeats
    included) of the annotator's log-likelihood ratio, read from a (draws, annotators, 2) table; no dense matrix.
    """

    model: str
    item: np.ndarray        # (n_responses,) int
    annotator: np.ndarray   # (n_responses,) int
    label: np.ndarray       # (n_responses,) int
    group: np.ndarray | None  # (n_items,) score group of each item, None for Platt
    counts: np.ndarray      # (n_items,) ones
    inverse: np.ndarray     # (n_items,) arange
    n_groups: int
    logit_score: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return self.inverse.size

    def positive(self, params: dict) -> np.ndarray:
        """``P(Y = 1 | item, theta_s)`` for a batch of parameters (leading axis S), shape (S, n_items)."""
        fpr = np.clip(np.asarray(params["fpr"], np.float64), 1e-12, 1 - 1e-12)
        tpr = np.clip(np.asarray(params["tpr"], np.float64), 1e-12, 1 - 1e-12)
        # Log-likelihood ratio of a label 0 / 1 per draw and annotator: (S, J, 2) (channels per score group:
        # (S, G, J, 2), read at each response's item's group).
        llr = np.stack([np.log1p(-tpr) - np.log1p(-fpr), np.log(tpr) - np.log(fpr)], axis=-1)
        terms = llr[:, self.group[self.item], self.annotator, self.label] if llr.ndim == 4 else \
            llr[:, self.annotator, self.label]
        s, n = fpr.shape[0], self.n_rows
        if self.model == "platt":
            prior = (np.asarray(params["slope"], np.float64)[:, None] * self.logit_score[None, :]
                     + np.asarray(params["intercept"], np.float64)[:, None])
        else:
            pi = np.clip(np.asarray(params["prevalence"], np.float64).reshape(s, -1), 1e-12, 1 - 1e-12)
            prior = (np.log(pi) - np.log1p(-pi))[:, self.group]
        flat = (np.arange(s)[:, None] * n + self.item[None, :]).ravel()
        sums = np.bincount(flat, weights=terms.ravel(), minlength=s * n).reshape(s, n)
        # sigmoid via log-odds: exp(-logaddexp(0, -x)) is stable at both ends.
        return np.exp(-np.logaddexp(0.0, -(prior + sums)))


def padded_rows(n_rows: int) -> int:
    """Row-table size used by compiled kernels: the next power of two (at least 8)."""
    return max(8, 1 << int(np.ceil(np.log2(max(n_rows, 1)))))


def check_annotators(data: AnnotationSet, fit, func: str) -> None:
    ids = tuple(fit.annotator_ids)
    if len(ids) != data.n_annotators or (ids and tuple(data.annotator_ids) != ids):
        raise ValueError(f"{func}: the fit has annotators {_preview(list(ids))} but `data` has "
                         f"{_preview(list(data.annotator_ids))}; pass the AnnotationSet the fit was made on (same "
                         "annotator columns, same order).")


def build_rows(data: AnnotationSet, fit, func: str) -> Rows:
    """The rows of ``data`` under the fit's model (validated against the fit)."""
    check_annotators(data, fit, func)
    if data.has_repeats or data.n_items * data.n_annotators > MAX_DENSE_CELLS:
        return _item_rows(data, fit, func)
    if fit.model == "platt":
        z = data.require_scores()
        n = data.n_items
        with x64():
            lz = np.asarray(clipped_logit(jnp.asarray(z)))
        return Rows("platt", data.labels, None, np.ones(n), np.arange(n), 1, lz)
    group = _item_groups(data, fit, func)
    n_groups = int(fit.groups.n_groups)
    pc = compress_patterns(data.labels, group, n_groups)
    return Rows(fit.model, pc.patterns, pc.group, np.asarray(pc.counts), np.asarray(pc.inverse), n_groups)


def _item_rows(data: AnnotationSet, fit, func: str) -> ItemRows:
    item, ann, lab = (np.asarray(a, np.int64) for a in data.responses)
    n = data.n_items
    if fit.model == "platt":
        with x64():
            lz = np.asarray(clipped_logit(jnp.asarray(data.require_scores())))
        return ItemRows("platt", item, ann, lab, None, np.ones(n), np.arange(n), 1, lz)
    return ItemRows(fit.model, item, ann, lab, np.asarray(_item_groups(data, fit, func), np.int64), np.ones(n),
                    np.arange(n), int(fit.groups.n_groups))


@dataclass(frozen=True)
class RowPosteriors:
    """``p[s, r] = P(Y = 1 | row r, theta_s)``; item ``i`` has row ``inverse[i]``.

    rows are distinct (group, pattern) pairs for grouped models and items for the Platt model.
    """

    p: np.ndarray            # (n_samples, n_rows)
    inverse: np.ndarray      # (n_items,)
    counts: np.ndarray       # (n_rows,) items per row
    n_samples: int
    has_draws: bool
    model: str
    thinned_from: int        # number of draws in the fit (0 for a point fit)
    rows: Rows = None

    def item_mean(self) -> np.ndarray:
        return self.p.mean(axis=0)[self.inverse]

    def item_quantiles(self, q) -> np.ndarray:
        """Quantiles over draws per item, shape (len(q), n_items)."""
        return np.quantile(self.p, q, axis=0)[:, self.inverse]


def row_posteriors(data: AnnotationSet, fit, *, n_draws: int | None = 1000,
                   func: str = "label_issues") -> RowPosteriors:
    """Posterior probability of a positive clean label per row and per draw (see module docstring).

    The fit's draws are thinned to at most ``n_draws`` by :func:`noisycal_bayes.propagate.draws.thin_index`.
    """
    if n_draws is not None:
        n_draws = check_positive_int(n_draws, name="n_draws")
    rows = build_rows(data, fit, func)
    n_fit = 0 if fit.draws is None else int(np.prod(fit.draws["fpr"].shape[:2]))
    if (fit.model == "platt" or isinstance(rows, ItemRows)) and n_draws is not None and n_fit:
        width = max(rows.n_rows, rows.item.size) if isinstance(rows, ItemRows) else rows.n_rows
        n_draws = max(1, min(n_draws, MAX_VALUES // width))
    if getattr(fit, "group_channels", None) is not None:  # each row at its score group's channel
        f, t = fit.group_channels
        prev = fit._samples(("prevalence",))["prevalence"].reshape(f.shape[0], -1)
        pick = thin_index(f.shape[0], n_draws) if n_draws is not None and n_draws < f.shape[0] else slice(None)
        params = {"fpr": f[pick], "tpr": t[pick], "prevalence": prev[pick]}
        n_s = params["fpr"].shape[0]
    else:
        params, n_s = parameter_draws(fit, n_draws)
    if fit.model != "platt":
        n_prev = np.asarray(params["prevalence"]).reshape(n_s, -1).shape[1]
        if n_prev != rows.n_groups:
            raise ValueError(f"{func}: the fit has {n_prev} prevalences for {rows.n_groups} groups.")
    p = rows.positive(params)
    return RowPosteriors(p, rows.inverse, rows.counts, n_s, fit.draws is not None, fit.model, n_fit, rows)


def parameter_draws(fit, n_draws: int | None) -> tuple[dict, int]:
    """The fit's parameters with a leading sample axis, thinned to at most ``n_draws``, and their number.

    (S, ...) draws of a NUTS (or bootstrap) fit, or (1, ...) for a point fit; keys ``fpr``, ``tpr`` and, where
    the model has them, ``prevalence``, ``slope``, ``intercept`` (see :class:`~noisycal_bayes.propagate.draws.Draws`).
    """
    shared_channels_only(fit, "parameter_draws", _PER_GROUP_INSTEAD)
    draws = extract_draws(fit).thinned(n_draws)
    return draws.params(), draws.n_source


def posterior_mean_accuracy(rp: RowPosteriors, yhat: np.ndarray) -> np.ndarray:
    """``mean_s (1/n) sum_i P(Y_i = yhat_im | A_i, c_i, theta_s)`` per model, shape (M,)."""
    p = rp.p.mean(axis=0)[rp.inverse]                      # (n_items,)
    yhat = np.asarray(yhat)
    return np.mean(np.where(yhat == 1, p[:, None], 1 - p[:, None]), axis=0)


def equal_tailed(x, level: float) -> tuple:
    """``(lower, upper)``: the equal-tailed ``level`` quantiles of ``x`` over its first axis."""
    return tuple(np.quantile(x, [(1 - level) / 2, (1 + level) / 2], axis=0))


# ----------------------------------------------------------------------------- K classes
def check_clean_probs(clean_probs, *, n_items=None, n_classes=None) -> np.ndarray:
    """Clean-label posteriors as float64 (S, n, K) (a (n, K) point becomes S = 1), rows summing to 1."""
    try:
        q = np.array(clean_probs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`clean_probs` must be a numeric (n_items, n_classes) or (n_draws, n_items, n_classes) "
                         f"array; could not convert: {exc}") from None
    if q.ndim == 2:
        q = q[None]
    if q.ndim != 3 or q.shape[2] < 2:
        raise ValueError("`clean_probs` must have shape (n_items, n_classes) or (n_draws, n_items, n_classes) with "
                         f"n_classes >= 2; got {np.shape(clean_probs)}.")
    if n_items is not None and q.shape[1] != n_items:
        raise ValueError(f"`clean_probs` must have one row per item ({n_items}); got {q.shape[1]}.")
    if n_classes is not None and q.shape[2] != n_classes:
        raise ValueError(f"`clean_probs` must have one column per class ({n_classes}); got {q.shape[2]}.")
    bad = ~np.isfinite(q).all(axis=(0, 2)) | (q < 0).any(axis=(0, 2)) | (np.abs(q.sum(axis=2) - 1) >
                                                                         PROBS_ROW_TOL).any(axis=0)
    if bad.any():
        raise ValueError(f"`clean_probs` must be probabilities whose rows sum to 1 (within {PROBS_ROW_TOL}); items "
                         f"{_preview(np.flatnonzero(bad))} are not.")
    return q


def class_votes(data, n_items: int, n_classes: int, func: str):
    """``(responses, votes (n_items, K))``: the checked responses and each item's label counts per class."""
    n_data = getattr(data, "n_items", None)
    if n_data is not None and not isinstance(data, tuple) and n_data != n_items:
        raise ValueError(f"{func}: the data hold {n_data} items but the probabilities {n_items} rows.")
    resp = check_responses(data, n_items, n_classes, func=func)
    votes = np.zeros((n_items, n_classes), np.int64)
    np.add.at(votes, (resp.item, resp.label), 1)
    return resp, votes


def class_names(data, classes, n_classes):
    """Class names as an object array of length K (``classes``, else ``data.classes``), or None for indices."""
    names = classes if classes is not None else getattr(data, "classes", None)
    if names is None:
        return None
    names = list(names)
    if len(names) != n_classes:
        raise ValueError(f"`classes` must name the {n_classes} classes; got {len(names)} names.")
    return np.asarray(names, dtype=object)
