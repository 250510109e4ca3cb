"""The K-class inputs and numerics that the point maps (:mod:`~noisycal_bayes.recalibration.maps`) and the posterior
maps (:mod:`~noisycal_bayes.recalibration.posterior`) share: validated probabilities or logits (logits from
probabilities by the binary maps' clipping rule, ``log(clip(p, LOGIT_CLIP, 1 - LOGIT_CLIP))``), target matrices,
the temperature loss terms, top-label confidence bins and their JSON form.
"""
from __future__ import annotations

import numpy as np
from scipy.special import softmax

from .._validation import _preview, as_float_matrix, check_choice, check_probs
from ..core.loss import LOGIT_CLIP
from ..data import Binning, as_binning

_INPUTS = ("probs", "logits")


def _jsonable(x):
    if isinstance(x, np.ndarray):
        # NaN is not valid JSON: store it as null (restored as NaN by from_dict).
        return [None if isinstance(v, float) and np.isnan(v) else v for v in x.tolist()]
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    if isinstance(x, tuple):
        return [_jsonable(v) for v in x]
    return x


# ----------------------------------------------------------------------------- inputs (one helper per kind)
def _check_logits_or_probs(x, inputs, *, n_classes=None, name=None):
    """``(logits, probs)`` of validated inputs, each float64 (n, K); ``n_classes`` checks a fitted map's K."""
    if inputs == "probs":
        name = name or "probs"
        p = check_probs(x, name=name, hint="Pass softmax probabilities, or logits with `inputs='logits'`.")
        p = p / p.sum(axis=1, keepdims=True)  # rows within PROBS_TOL of 1, renormalised
        z = np.log(np.clip(p, LOGIT_CLIP, 1 - LOGIT_CLIP))
    else:
        name = name or "logits"
        z = as_float_matrix(x, name=name)
        bad = ~np.isfinite(z).all(axis=1)
        if bad.any():
            raise ValueError(f"`{name}` must be finite; got NaN or inf in rows {_preview(np.flatnonzero(bad))}.")
        p = softmax(z, axis=1)
    if n_classes is not None and z.shape[1] != n_classes:
        raise ValueError(f"`{name}` has {z.shape[1]} classes but the map was fitted with {n_classes}.")
    return z, p


def _check_targets(targets, shape) -> np.ndarray:
    """Target matrix of shape ``shape`` = (n, K): finite reals (corrected targets may leave [0, 1])."""
    t = as_float_matrix(targets, name="targets")
    if t.shape != shape:
        raise ValueError(f"`targets` must have the shape of the inputs {shape}; got {t.shape}.")
    bad = ~np.isfinite(t).all(axis=1)
    if bad.any():
        raise ValueError(f"`targets` must be finite; got NaN or inf in rows {_preview(np.flatnonzero(bad))}. Items "
                         "without a usable response have a NaN corrected target: drop them, e.g. "
                         "`keep = np.isfinite(targets).all(axis=1)`.")
    return t


def _check_inputs_kind(inputs, func):
    return check_choice(inputs, _INPUTS, name="inputs", func=func)


def _check_l2(l2):
    try:
        v = float(l2)
    except (TypeError, ValueError):
        raise ValueError(f"`l2` must be a number > 0; got {l2!r}.") from None
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"`l2` must be finite and > 0 (it keeps the fit unique and finite); got {l2!r}.")
    return v



# ----------------------------------------------------------------------------- numerics
def _expected_logit(beta, z):
    """``(E_q[z_i], Var_q[z_i])`` under ``q = softmax(beta z_i)``; ``beta`` broadcasts against ``z[..., 0]``."""
    q = softmax(beta[..., None] * z, axis=-1)
    m = np.sum(q * z, axis=-1)
    return m, np.sum(q * (z - m[..., None]) ** 2, axis=-1)


def _temperature_terms(z, t):
    """``(s_i, c_i)``: row sums of the targets and ``sum_k t_ik z_ik``, the only way the targets enter the loss."""
    return t.sum(axis=-1), np.sum(t * z, axis=-1)


def _top_label_full(p, top, conf_new):
    """Probability vectors whose top class keeps its index and gets probability ``conf_new`` (>= 1/K).

    The remaining mass ``r = 1 - conf_new`` goes to the other classes in proportion to their probabilities,
    mixed with an even split ``r / (K - 1)`` (mixing weight ``lam`` in [0, 1], as close to 1 as allowed) so that
    no other class exceeds ``(conf_new + r / (K - 1)) / 2``, halfway between the even share and ``conf_new``: then
    the top class stays the strict argmax whenever ``conf_new > 1/K`` (an even split always fits because
    ``conf_new >= 1/K``).
    """
    n, k = p.shape
    rows = np.arange(n)
    rest = 1.0 - conf_new
    other = p.copy()
    other[rows, top] = 0.0
    tot = other.sum(axis=1)
    even = 1.0 / (k - 1)
    # Proportional shares of the other classes (an even split when the top class held all the mass).
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(tot[:, None] > 0, other / tot[:, None], even)
    share[rows, top] = 0.0
    smax = share.max(axis=1)
    cap = 0.5 * (conf_new + rest * even)
    # rest * (lam * smax + (1 - lam) * even) <= cap  <=>  lam <= (cap / rest - even) / (smax - even).
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where((rest > 0) & (smax > even), (cap / rest - even) / (smax - even), 1.0)
    lam = np.clip(lam, 0.0, 1.0)
    out = rest[:, None] * (lam[:, None] * share + (1 - lam[:, None]) * even)
    out[rows, top] = conf_new
    return out


def _top_label_edges(bins, conf, n_classes):
    """Fitting edges on the confidence: an int or ``Binning.equal_width`` is equal width on [1/K, 1]."""
    b = as_binning(bins)
    if b.kind == "equal_width":
        # The top-label confidence max_k p_k is never below 1/K: equal width over the values it can take.
        lo = 1.0 / n_classes
        return np.concatenate([[0.0], lo + (1 - lo) * np.arange(1, b.n_bins) / b.n_bins, [1.0]])
    return b.edges_for(conf)


def _bins_to_json(b):
    if isinstance(b, Binning):
        return {"kind": b.kind, "n_bins": b.n_bins, "edges": None if b.edges is None else list(b.edges)}
    return _jsonable(b)


def _bins_from_json(b, cls):
    if not isinstance(b, dict):
        return b
    kind = b.get("kind")
    if kind == "edges":
        return Binning.from_edges(b["edges"])
    if kind in ("equal_mass", "equal_width"):
        return getattr(Binning, kind)(b["n_bins"])
    raise ValueError(f"unknown binning kind {kind!r} in saved {cls}.")
