"""Per-item posteriors ``P(Y_i = 1 | A_i, c_i, theta)`` at every draw of a fit (shared by the public functions).

``c_i`` is what the fitted model conditions the clean label on: the item's score group (grouped,
histogram and monotone models), nothing (marginal Dawid-Skene) or the score itself (Platt curve).
For grouped models the posterior depends on the item only through its (group, response pattern) row,
so it is computed once per distinct row; the Platt model needs one value per item.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import _preview, check_positive_int
from ..core import clipped_logit, pattern_loglik, posterior_positive, x64
from ..data import AnnotationSet, compress_patterns

#: Cap on (draws x rows) posterior values held at once for per-item (Platt) models: 1e7 float64 = 80 MB.
MAX_VALUES = 10_000_000


def check_data(data, func: str) -> AnnotationSet:
    if not isinstance(data, AnnotationSet):
        raise ValueError(f"{func}: `data` must be an AnnotationSet; got {type(data).__name__}. Build one with "
                         "AnnotationSet.from_long or AnnotationSet.from_wide.")
    return data


def check_fit(fit, func: str):
    """A FitResult with an estimate (duck-typed, so that this layer needs no import of the inference layer)."""
    needed = ("model", "method", "point", "groups", "draws", "annotator_ids")
    if not all(hasattr(fit, k) for k in needed):
        raise ValueError(f"{func}: `fit` must be a FitResult from fit_em, fit_map or fit_nuts; got "
                         f"{type(fit).__name__}.")
    if fit.draws is None and not fit.point:
        raise ValueError(f"{func}: this fit has no estimate (every EM start failed: {fit.reason}). Refit with more "
                         "starts, or check for uninformative annotators.")
    return fit


def check_prob(prob) -> float:
    try:
        prob = float(prob)
    except (TypeError, ValueError):
        raise ValueError(f"`prob` must be a number strictly between 0 and 1; got {prob!r}.") from None
    if not 0 < prob < 1:
        raise ValueError(f"`prob` must lie strictly between 0 and 1; got {prob}.")
    return prob


def check_threshold(threshold) -> float:
    try:
        t = float(threshold)
    except (TypeError, ValueError):
        raise ValueError(f"`threshold` must be a number in [0, 1]; got {threshold!r}.") from None
    if not 0 <= t <= 1:
        raise ValueError(f"`threshold` must lie in [0, 1]; got {t}.")
    return t


def _item_groups(data: AnnotationSet, fit, func: str) -> np.ndarray:
    """Group of each item of ``data`` under the fit's partition.

    The fit's own assignment when ``data`` holds the items it was fitted on; otherwise the fitted score
    edges applied to ``data.scores``.
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
    if inputs is None or inputs.n_items != data.n_items:
        return False
    if inputs.compressed or inputs.patterns is not None:
        rebuilt = np.asarray(inputs.patterns)[np.asarray(inputs.inverse)]
        return bool(np.array_equal(rebuilt, data.labels))
    lab = data.labels[np.asarray(inputs.item), np.asarray(inputs.annotator)]
    return bool(np.array_equal(lab, np.asarray(inputs.label)) and inputs.label.size == int(data.observed.sum()))


def parameter_draws(fit, max_draws: int | None) -> tuple[dict, int]:
    """Parameter values as arrays with a leading sample axis: (S, ...) draws, or (1, ...) for a point fit.

    Draws are thinned evenly (deterministically) to at most ``max_draws``.
    """
    names = ("fpr", "tpr", "prevalence", "slope", "intercept")
    if fit.draws is None:
        out = {k: np.asarray(fit.point[k], dtype=np.float64)[None] for k in names if k in fit.point}
        return out, 1
    flat = {k: np.asarray(v, dtype=np.float64).reshape((-1,) + np.shape(v)[2:]) for k, v in fit.draws.items()
            if k in names}
    n = flat["fpr"].shape[0]
    if max_draws is not None and n > max_draws:
        keep = np.unique(np.linspace(0, n - 1, max_draws).round().astype(np.int64))
        flat = {k: v[keep] for k, v in flat.items()}
    return flat, flat["fpr"].shape[0]


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

    def item_mean(self) -> np.ndarray:
        return self.p.mean(axis=0)[self.inverse]

    def item_quantiles(self, q) -> np.ndarray:
        """Quantiles over draws per item, shape (len(q), n_items)."""
        return np.quantile(self.p, q, axis=0)[:, self.inverse]


def row_posteriors(data: AnnotationSet, fit, *, max_draws: int | None = 1000, func: str = "label_issues") -> RowPosteriors:
    """Posterior probability of a positive clean label per row and per draw (see module docstring)."""
    if max_draws is not None:
        max_draws = check_positive_int(max_draws, name="max_draws")
    ids = tuple(fit.annotator_ids)
    if len(ids) != data.n_annotators or (ids and tuple(data.annotator_ids) != ids):
        raise ValueError(f"{func}: the fit has annotators {_preview(list(ids))} but `data` has "
                         f"{_preview(list(data.annotator_ids))}; pass the AnnotationSet the fit was made on (same "
                         "annotator columns, same order).")
    model = fit.model
    n_fit = 0 if fit.draws is None else int(np.prod(fit.draws["fpr"].shape[:2]))
    if model == "platt":
        z = data.require_scores()
        n = data.n_items
        if max_draws is not None and n_fit:
            max_draws = max(1, min(max_draws, MAX_VALUES // n))
        params, n_s = parameter_draws(fit, max_draws)
        with x64():
            pat = jnp.asarray(data.labels, dtype=jnp.int32)
            lz = jnp.asarray(clipped_logit(jnp.asarray(z)))

            def one(fpr, tpr, slope, intercept):
                l0, l1 = pattern_loglik(pat, fpr, tpr)
                # The prior log-odds slope * logit(z) + intercept enter additively: no clipping of m(z) needed.
                return jax.nn.sigmoid(slope * lz + intercept + l1 - l0)

            p = np.asarray(jax.jit(jax.vmap(one))(*(jnp.asarray(params[k]) for k in
                                                    ("fpr", "tpr", "slope", "intercept"))))
        return RowPosteriors(p, np.arange(n), np.ones(n), n_s, fit.draws is not None, model, n_fit)
    group = _item_groups(data, fit, func)
    params, n_s = parameter_draws(fit, max_draws)
    n_groups = int(fit.groups.n_groups)
    pc = compress_patterns(data.labels, group, n_groups)
    prev = params["prevalence"].reshape(n_s, -1)
    if prev.shape[1] != n_groups:
        raise ValueError(f"{func}: the fit has {prev.shape[1]} prevalences for {n_groups} groups.")
    with x64():
        pat = jnp.asarray(pc.patterns, dtype=jnp.int32)
        grp = jnp.asarray(pc.group, dtype=jnp.int32)
        p = np.asarray(jax.jit(jax.vmap(lambda f, t, pi: posterior_positive(pat, grp, f, t, pi)))(
            jnp.asarray(params["fpr"]), jnp.asarray(params["tpr"]), jnp.asarray(prev)))
    return RowPosteriors(p, np.asarray(pc.inverse), np.asarray(pc.counts), n_s, fit.draws is not None, model, n_fit)
