"""Input validation at the public boundary: one helper per kind of input.

Every helper validates *and* standardises, and never modifies the caller's object. Error messages
name the offending entries and, where possible, suggest the fix.
"""
from __future__ import annotations

import numpy as np

# The annotator weight rules every public function accepts (formulas in ``core/weights.py``).
WEIGHT_RULES = ("iv", "equal", "gap", "squared_gap")
#: The weight rules of the K-class corrected targets (``core/confusion.py``).
MC_WEIGHT_RULES = ("iv", "equal")
#: Largest ``|sum_k probs[i, k] - 1|`` accepted (stored data renormalise such rows). A float16 / float32 softmax
#: rounded to 4-5 decimals sums to 1 within about 1e-4; a larger gap means the columns are not the probabilities
#: of these classes (a class column missing, logits, percentages).
PROBS_TOL = 1e-3
# Entries of a confusion matrix may stray this far outside [0, 1] by rounding; rows must sum to 1 within 1e-6.
_CONFUSION_SLACK = 1e-9
_CONFUSION_ROW_TOL = 1e-6


def _plain(value):
    """Python scalar for a NumPy scalar (also inside tuples), so messages read ``(20, 'b')``."""
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value.item() if isinstance(value, np.generic) else value


def _preview(values, limit: int = 8) -> str:
    """Format the first ``limit`` offending entries as ``[a, b, ...]`` for error messages."""
    # NumPy scalars print as ``np.str_('yes')`` / ``np.int64(4)`` under NumPy 2; show the plain value.
    # Only the shown entries are converted: an error path may hand over millions of offending entries.
    if not hasattr(values, "__getitem__") or isinstance(values, dict):
        values = list(values)  # sets, dict views, generators
    n = len(values)
    shown = [_plain(v) for v in list(values[:limit])]
    head = ", ".join(repr(v) if isinstance(v, str) else str(v) for v in shown)
    more = f", ... ({n} in all)" if n > limit else ""
    return f"[{head}{more}]"


def _positions(mask: np.ndarray) -> list:
    """Positions of the True entries: integers for a 1-d mask, (row, column) tuples otherwise."""
    pos = np.argwhere(mask).tolist()
    return [p[0] for p in pos] if mask.ndim == 1 else [tuple(p) for p in pos]


def as_float_vector(values, *, name: str, what: str = "numeric") -> np.ndarray:
    """Return ``values`` as a one-dimensional float64 copy, shape (n_items,); ``what`` describes the expected
    values in the error message."""
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be {what}; could not convert: {exc}") from None
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional (n_items,); got shape {arr.shape}.")
    return arr


def binary_only(value, func: str, instead: str | None, *, name: str = "data") -> None:
    """Refuse K-class input to the binary-only function ``func``: one ``ValueError`` naming ``instead``.

    ``value`` is the function's annotation set (``name="data"``), its fit (``name="fit"``) or its scores (any
    other ``name``). Refused: a set whose ``kind`` is not ``"binary"`` (a
    :class:`~noisycal_bayes.data.MulticlassAnnotationSet`, whatever its number of classes), a K-class fit (confusion
    matrices and no ``(fpr, tpr)`` channel) and scores with two dimensions (one column per class). Anything else passes
    unchanged, for the function's own checks. With two classes the set is refused too (which class is positive
    is the caller's choice), and the message names the binary view: ``data.to_binary()`` (class index 1
    positive) or the column ``probs[:, 1]``. ``instead`` completes "For K classes use ..." (None: the feature
    has no K-class counterpart). The table of alternatives: ``docs/multiclass.md``, "Binary-only features".
    """
    kind = getattr(value, "kind", None)
    if isinstance(kind, str) and hasattr(value, "n_classes"):
        if kind == "binary":
            return
        k = value.n_classes
        got = f"`{name}` is a {type(value).__name__} with {k} classes {_preview(list(value.classes))}"
        two = " With two classes, `data.to_binary()` gives the binary set (class index 1 is the positive class)."
    elif name == "fit" and getattr(value, "channel", 0) is None and getattr(value, "confusion", None) is not None:
        k = int(getattr(value, "n_classes", 0))  # a K-class fit: confusion matrices, no (fpr, tpr) channel
        got = f"`fit` is a {type(value).__name__}, a fit to K-class data with {k} classes"
        two = " With two classes, fit the binary view `data.to_binary()`."
    elif (name != "data" and kind is None and not isinstance(value, (str, bytes, dict)) and np.ndim(value) == 2
          and np.shape(value)[1] > 1):
        k = np.shape(value)[1]
        got = f"`{name}` has shape {np.shape(value)}, one column per class"
        two = " With two classes, pass the positive class's column (`probs[:, 1]`)."
    else:
        return
    alternative = f" For K classes use {instead}." if instead else " It has no K-class counterpart."
    raise ValueError(f"{func} is defined for two classes (a binary AnnotationSet: 0/1 labels, scores P(Y = 1) of "
                     f"shape (n_items,)); {got}.{alternative}{two if k == 2 else ''}")


def shared_channels_only(fit, func: str, instead: str | None) -> None:
    """Refuse a fit whose channels differ across score groups (``fit.group_channels`` not None: the registered
    ``"score_dependent"`` and ``"correlated"`` models of ``fit_map`` / ``fit_nuts``) in ``func``, which reads one
    channel per annotator: one ``ValueError`` naming ``instead``, never a silent answer from the fit's item-weighted
    average channel. Anything else passes unchanged (the pattern of :func:`binary_only`)."""
    if getattr(fit, "group_channels", None) is None:
        return
    alternative = f" Use {instead}." if instead else ""
    raise ValueError(f"{func} reads one channel per annotator, and this {fit.model!r} fit has channels per score group "
                     f"({getattr(fit, 'n_groups', '?')} groups; its `channel` is only their item-weighted average)."
                     f"{alternative} Or fit the shared-channel model (model='grouped').")


def check_scores(scores, *, name: str = "scores", ids=None) -> np.ndarray:
    """Return ``scores`` as a float64 copy of shape (n,), checked to lie in [0, 1] and be finite."""
    arr = as_float_vector(scores, name=name, what="numeric probabilities in [0, 1]")
    if arr.size == 0:
        raise ValueError(f"`{name}` is empty.")
    where = ids if ids is not None else np.arange(arr.size)
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"`{name}` must be finite; got NaN or inf at items {_preview(np.asarray(where)[bad])}.")
    bad = (arr < 0) | (arr > 1)
    if bad.any():
        raise ValueError(
            f"`{name}` must lie in [0, 1]; got {_preview(arr[bad])} at items {_preview(np.asarray(where)[bad])}. "
            "Pass probabilities, not logits or percentages."
        )
    return arr


def as_float_matrix(values, *, name: str, copy: bool | None = True) -> np.ndarray:
    """``values`` as float64 of shape (n_items, n_classes), n_items >= 1 and n_classes >= 2: a copy, or with
    ``copy=None`` a copy only where the conversion needs one."""
    try:
        arr = np.array(values, dtype=np.float64, copy=copy)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be a numeric array of shape (n_items, n_classes); could not convert: "
                         f"{exc}") from None
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] < 2:
        raise ValueError(f"`{name}` must have shape (n_items, n_classes) with n_items >= 1 and n_classes >= 2; got "
                         f"shape {arr.shape}.")
    return arr


def check_probs(probs, *, name: str = "probs", tol: float = PROBS_TOL, ids=None,
                hint: str = "Normalise the class probabilities first.") -> np.ndarray:
    """Return class probabilities as float64 of shape (n_items, K), K >= 2: finite, in [0, 1], each row summing
    to 1 within ``tol`` (not copied when already float64; never modified).

    ``ids`` (n_items,), optional, names the offending items in messages (default: their positions); ``hint`` ends
    the message of rows that do not sum to 1. The rows are returned as given (not renormalised): a caller that
    stores them decides.

    Examples
    --------
    >>> check_probs([[0.2, 0.8], [0.5, 0.5]]).shape
    (2, 2)
    """
    p = as_float_matrix(probs, name=name, copy=None)
    where = np.arange(p.shape[0]) if ids is None else np.asarray(ids, dtype=object)
    bad = ~np.isfinite(p) | (p < 0) | (p > 1)
    if bad.any():
        raise ValueError(f"`{name}` must hold probabilities in [0, 1]; got {_preview(p[bad])} at items "
                         f"{_preview(where[np.unique(np.nonzero(bad)[0])])}.")
    off = np.abs(p.sum(axis=1) - 1.0) > tol
    if off.any():
        raise ValueError(f"`{name}` rows must sum to 1 (within {tol}); items {_preview(where[off])} sum to "
                         f"{_preview(np.round(p.sum(axis=1)[off], 6))}. {hint}")
    return p


def check_confusion(confusion, *, name: str = "confusion", n_annotators=None, n_classes=None,
                    draws: bool = False) -> np.ndarray:
    """Return confusion matrices as a float64 array of shape (n_annotators, K, K), K >= 2 (one (K, K) matrix
    becomes n_annotators = 1), or with ``draws`` of shape (n_draws, n_annotators, K, K) (one set (J, K, K) becomes
    n_draws = 1): entries in [0, 1], rows ``C[j, y, :] = P(A_j = . | Y = y)`` summing to 1. ``n_annotators`` and
    ``n_classes``, when given, are the shape required.

    Examples
    --------
    >>> check_confusion([[0.9, 0.1], [0.2, 0.8]]).shape
    (1, 2, 2)
    """
    try:
        c = np.array(confusion, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be a numeric array of confusion matrices; could not convert: {exc}") from None
    ndim = 4 if draws else 3
    if c.ndim == ndim - 1:
        c = c[None]
    j, k = n_annotators or "J", n_classes or "K"
    if (c.ndim != ndim or c.shape[-1] != c.shape[-2] or c.shape[-1] < 2 or n_classes not in (None, c.shape[-1])
            or n_annotators not in (None, c.shape[-3])):
        one = f"({j}, {k}, {k})"
        raise ValueError(f"`{name}` must have shape {f'(n_draws, {j}, {k}, {k}) or ' if draws else ''}{one} "
                         f"(annotators x true class x given label) with K >= 2; got {c.shape}.")
    bad = ~np.isfinite(c) | (c < -_CONFUSION_SLACK) | (c > 1 + _CONFUSION_SLACK)
    if bad.any():
        raise ValueError(f"`{name}` must hold probabilities in [0, 1]; got {_preview(c[bad])} at annotators "
                         f"{_preview(np.unique(np.nonzero(bad)[-3]))}.")
    rows = c.sum(axis=-1)
    off = np.abs(rows - 1.0) > _CONFUSION_ROW_TOL
    if off.any():
        where = sorted({(a, y) for a, y in np.argwhere(off)[:, -2:].tolist()})
        raise ValueError(f"`{name}` rows must sum to 1 (C[j, y, a] = P(A_j = a | Y = y)); rows (annotator, class) "
                         f"{_preview(where)} sum to {_preview(np.round(rows[off], 6))}.")
    return c


def check_binary_labels(labels, *, name: str = "labels", allow_missing: bool = False) -> np.ndarray:
    """Return labels as an int8 copy with values in {0, 1} (and -1 for missing if allowed).

    NaN is read as missing when ``allow_missing``; anything else is an error naming the positions.
    """
    arr = np.asarray(labels)
    if arr.size == 0:
        raise ValueError(f"`{name}` is empty.")
    if arr.dtype == object or arr.dtype.kind in "US":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            # Convert entry by entry so that the message names the offending values *and* positions.
            flat = arr.ravel()
            bad = np.zeros(flat.size, dtype=bool)
            for k, v in enumerate(flat):
                try:
                    float(v)
                except (TypeError, ValueError):
                    bad[k] = True
            pos = _positions(bad.reshape(arr.shape))
            values = list(dict.fromkeys(str(v) for v in flat[bad]))
            raise ValueError(
                f"`{name}` must be 0 or 1; got non-numeric values {_preview(values[:5])} at positions {_preview(pos)}. "
                "Map your classes to 0/1 first."
            ) from None
    arr = arr.astype(np.float64)
    missing = np.isnan(arr)
    if allow_missing:
        missing |= arr == -1
    elif missing.any():
        raise ValueError(f"`{name}` contains missing values at positions {_preview(_positions(missing))}.")
    bad = ~missing & (arr != 0) & (arr != 1)
    if bad.any():
        raise ValueError(
            f"`{name}` must be 0 or 1; got {_preview(np.unique(arr[bad]))} at positions {_preview(_positions(bad))}. "
            "Map your classes to 0/1 first."
        )
    out = np.where(missing, -1, arr).astype(np.int8)
    return out


def check_soft_labels(q, *, name: str = "soft_labels") -> np.ndarray:
    """Return soft labels as float64 in [0, 1] (same rules as scores)."""
    return check_scores(q, name=name)


def check_same_length(a, b, names=("scores", "labels")) -> None:
    if len(a) != len(b):
        raise ValueError(f"`{names[0]}` and `{names[1]}` must have the same length; got {len(a)} and {len(b)}.")


def check_level(level, *, name: str = "level") -> float:
    """Return a credible / confidence level as a float strictly between 0 and 1."""
    try:
        level = float(level)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a number strictly between 0 and 1; got {level!r}.") from None
    if not 0 < level < 1:
        raise ValueError(f"`{name}` must lie strictly between 0 and 1; got {level}.")
    return level


def check_probability(value, *, name: str) -> float:
    """Return a probability (e.g. a decision threshold) as a float in [0, 1]."""
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a number in [0, 1]; got {value!r}.") from None
    if not 0 <= t <= 1:
        raise ValueError(f"`{name}` must lie in [0, 1]; got {t}.")
    return t


def check_positive_int(value, *, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value!r}.")
    return int(value)


def check_choice(value, choices, *, name: str, func: str | None = None):
    """Return ``value`` if it is one of ``choices`` (a tuple of allowed values)."""
    if value not in choices:
        where = f"{func}: " if func else ""
        allowed = " or ".join(map(repr, choices)) if len(choices) == 2 else f"one of {choices}"
        raise ValueError(f"{where}`{name}` must be {allowed}; got {value!r}.")
    return value


def check_bounds(bounds, *, name: str, positive: bool = False) -> tuple:
    """Return a box ``(low, high)`` of finite floats with ``low < high`` (and ``0 < low`` if ``positive``)."""
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a pair (low, high); got {bounds!r}.") from None
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo >= hi or (positive and lo <= 0):
        need = "0 < low < high" if positive else "low < high"
        raise ValueError(f"`{name}` must be finite with {need}; got ({lo}, {hi}).")
    return lo, hi


def check_item_weights(item_weights, n_items: int) -> np.ndarray:
    """Return per-item weights as float64 of shape (n_items,): finite, non-negative, not all zero (default 1)."""
    if item_weights is None:
        return np.ones(n_items)
    w = np.array(item_weights, dtype=np.float64)
    if w.shape != (n_items,):
        raise ValueError(f"`item_weights` must have shape ({n_items},); got {w.shape}.")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("`item_weights` must be finite, non-negative and not all zero.")
    return w


def check_targets(scores, targets, item_weights=None) -> tuple:
    """Validate a recalibration fit's inputs: ``(scores, targets, item weights)``, each float64 (n_items,).

    ``targets`` are finite reals (corrected labels may leave [0, 1]); ``item_weights`` as in
    :func:`check_item_weights`.
    """
    z = check_scores(scores)
    y = as_float_vector(targets, name="targets")
    if y.shape != z.shape:
        raise ValueError(f"`scores` and `targets` must have the same length; got {z.size} and {y.size}.")
    bad = ~np.isfinite(y)
    if bad.any():
        raise ValueError(f"`targets` must be finite; got NaN or inf at items {_preview(np.flatnonzero(bad))}.")
    return z, y, check_item_weights(item_weights, z.size)


def check_weights(weights, n_annotators: int, *, allow_zero: bool = True, n_classes=None):
    """Validate annotator weights: a rule name, or an explicit vector of shape (n_annotators,).

    Returns ``(rule, label)``: the rule name twice, or the vector normalised to sum 1 and ``"explicit"``.
    ``allow_zero=False`` (for code paths that cannot drop items whose annotators all weigh 0) requires
    every explicit weight to be positive.

    With ``n_classes`` (K-class corrected targets): a rule of ``MC_WEIGHT_RULES``, or weights of shape
    (n_annotators,) (the same for every class) or (n_annotators, n_classes), returned as given with shape
    (n_annotators, n_classes) (the K-class rule normalises them per item and class).
    """
    rules = WEIGHT_RULES if n_classes is None else MC_WEIGHT_RULES
    shapes = [(n_annotators,)] + ([] if n_classes is None else [(n_annotators, n_classes)])
    shape_text = " or ".join(map(str, shapes))
    if isinstance(weights, str):
        if n_classes is not None and weights in WEIGHT_RULES and weights not in rules:
            raise ValueError(f"weights={weights!r} is defined for two classes (it reads the binary gap tpr - fpr); "
                             f"these are {n_classes}-class corrected targets. For K classes use weights='iv' or "
                             "'equal'.")
        if weights not in rules:
            raise ValueError(f"`weights` must be one of {rules} or an array of shape {shape_text}; got {weights!r}.")
        return weights, weights
    w = np.asarray(weights, dtype=np.float64)
    if w.shape not in shapes:
        raise ValueError(f"explicit `weights` must have shape {shape_text}; got {w.shape}.")
    if allow_zero:
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError(f"explicit `weights` must be finite, non-negative and not all zero; got {w.tolist()}.")
    elif not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"explicit `weights` must be finite and positive; got {w.tolist()}.")
    if n_classes is not None:
        return np.broadcast_to(w.reshape(n_annotators, -1), (n_annotators, n_classes)).copy(), "explicit"
    return w / w.sum(), "explicit"


def check_em_settings(n_starts, max_iter, tol, min_gap):
    """Validate the numeric settings of an EM fit (both EMs: ``inference.fit_em`` and ``reference.fit_em``).

    Returns ``(n_starts, max_iter, tol, min_gap)`` as ``(int, int, float, float)``; raises ``ValueError`` naming
    the setting: ``n_starts`` and ``max_iter`` integers >= 1, ``tol`` > 0, ``min_gap`` in [0, 1).
    """
    n_starts = check_positive_int(n_starts, name="n_starts")
    max_iter = check_positive_int(max_iter, name="max_iter")
    tol, min_gap = float(tol), float(min_gap)
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"`tol` must be a positive number; got {tol!r}.")
    if not (np.isfinite(min_gap) and 0 <= min_gap < 1):
        raise ValueError(f"`min_gap` must lie in [0, 1); got {min_gap!r}.")
    return n_starts, max_iter, tol, min_gap


def one_line(text) -> str:
    """``text`` as one line (white space folded): for messages that must stay on one terminal line."""
    return " ".join(str(text).split())
