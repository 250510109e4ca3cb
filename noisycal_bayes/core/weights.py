"""Annotator weight rules (paper §4.4 and Appendix F.4): the one place the inverse-variance recipe lives.

IV ``w_j ∝ delta_j^2 / [mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)]`` (``b_j = a_j + delta_j``), Equal, Gap
``∝ |delta_j|``, Squared-gap ``∝ delta_j^2``; every rule gives weight 0 where the gap's interval contains 0. K classes:
the IV rule per coordinate of the corrected vectors. Details: docs/foundations.md, *noisycal_bayes.core.weights*.
"""
import warnings

import jax.numpy as jnp
import numpy as np

from .._validation import WEIGHT_RULES, _preview, check_choice  # the rule names live with the check that accepts them
from ..warnings import SmallGapWarning
from .channel import item_corrected_label, usable_annotators, usable_confusions
from .likelihood import _eager_jit  # one fused program per shape on concrete inputs; traced as before otherwise
from .likelihood import _is_traced, _xp

MU_CLIP = 1e-4
# A zero variance (a perfect annotator) would give an infinite weight; the floor keeps weights finite.
VARIANCE_FLOOR = 1e-8


def annotator_noise_variance(fpr, gap, mu):
    """``sigma_j^2 = [mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)] / delta_j^2``: the variance of annotator ``j``'s
    corrected label around the clean label, for clean-label frequency ``mu`` (not clipped, not floored).

    Shapes broadcast: ``fpr``, ``gap`` (..., n_annotators) with ``mu`` (..., 1) or scalar.
    """
    tpr = fpr + gap
    return (mu * tpr * (1 - tpr) + (1 - mu) * fpr * (1 - fpr)) / gap**2


@_eager_jit
def iv_weights(fpr, gap, mu, usable=None):
    """Inverse-variance weights, shape (n_annotators,), summing to 1; 0 for unusable annotators.

    ``1 / sigma_j^2 = gap_j^2 / v_j`` with ``v_j = mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)``, the variance
    floored at ``VARIANCE_FLOOR`` as ``1 / max(v_j / gap_j^2, floor)`` (written without dividing by the gap).
    """
    mu = jnp.clip(mu, MU_CLIP, 1 - MU_CLIP)
    tpr = fpr + gap
    v = mu * tpr * (1 - tpr) + (1 - mu) * fpr * (1 - fpr)
    inv = jnp.minimum(gap**2 / jnp.maximum(v, 1e-300), 1.0 / VARIANCE_FLOOR)
    inv = jnp.where(usable_annotators(gap) if usable is None else usable, inv, 0.0)
    return inv / jnp.sum(inv)


@_eager_jit(static_argnames=("rule",))
def rule_weights(rule: str, fpr, gap, mu=None, usable=None):
    """Weights of a named rule (``"iv"`` needs ``mu``), shape (n_annotators,), summing to 1.

    ``usable`` (bool, (n_annotators,)) is :func:`~noisycal_bayes.core.channel.usable_annotators` (default:
    ``gap != 0``); unusable annotators get weight 0 under every rule.
    """
    usable = usable_annotators(gap) if usable is None else jnp.asarray(usable)
    if rule == "iv":
        return iv_weights(fpr, gap, mu, usable)
    if rule == "equal":
        w = jnp.ones_like(gap)
    elif rule == "gap":
        w = jnp.abs(gap)
    elif rule == "squared_gap":
        w = gap**2
    else:
        raise ValueError(f"`weights` must be one of {WEIGHT_RULES} or an array; got {rule!r}.")
    w = jnp.where(usable, w, 0.0)
    return w / jnp.sum(w)


def weights_for_labels(rule, labels, fpr, gap, counts=None, usable=None):
    """Convex annotator weights of ``rule`` at the channel ``(fpr, gap)`` for these items.

    Parameters
    ----------
    rule : str or array of shape (n_annotators,)
        A rule name (IV estimates ``mu`` from ``labels``) or explicit weights (normalised to sum 1).
    labels : array of shape (n_rows, n_annotators), -1 = missing
        Items, or distinct response patterns with ``counts``.
    fpr, gap : arrays of shape (n_annotators,)
    counts : array of shape (n_rows,), optional
        Items per row of ``labels`` (default 1 each).
    usable : bool array of shape (n_annotators,), optional
        :func:`~noisycal_bayes.core.channel.usable_annotators`; default ``gap != 0``.

    Returns
    -------
    array of shape (n_annotators,)

    Notes
    -----
    ``mu`` is the (count-weighted) mean of the equally weighted combined corrected labels (DESIGN §3), then
    :func:`rule_weights`. Pure ``jax.numpy``: works under ``jit`` and ``vmap`` (``rule`` static).
    """
    if not isinstance(rule, str):
        w = jnp.asarray(rule)
        return w / jnp.sum(w)
    return _rule_weights_for_labels(rule, labels, fpr, gap, counts, usable)


@_eager_jit(static_argnames=("rule",))
def _rule_weights_for_labels(rule: str, labels, fpr, gap, counts, usable):
    """:func:`weights_for_labels` for a rule name, jitted (one fused program per shape and rule)."""
    mu = None
    if rule == "iv":
        use = usable_annotators(gap) if usable is None else jnp.asarray(usable)
        eq = item_corrected_label(labels, fpr, gap, use.astype(jnp.result_type(gap)), use)
        # Items labelled only by unusable annotators have no corrected label (NaN): left out of mu.
        ok = jnp.isfinite(eq)
        c = jnp.ones_like(eq) if counts is None else counts
        mu = jnp.sum(jnp.where(ok, c * eq, 0.0)) / jnp.sum(jnp.where(ok, c, 0.0))
    return rule_weights(rule, fpr, gap, mu, usable)


def annotator_weights(confusion, prevalence_overall, *, rule: str = "iv", usable=None):
    """Per-annotator, per-coordinate weights ``w[j, k]`` for combining corrected vectors, shape (J, K).

    Parameters
    ----------
    confusion : array of shape (..., n_annotators, K, K)
        Leading axes (e.g. posterior draws) are batched over.
    prevalence_overall : array of shape (..., K)
        Clean-label class frequencies ``pi`` (normalised here; clipped at 1e-4 as the binary ``mu``), broadcast
        against the leading axes of ``confusion``.
    rule : {"iv", "equal"}, default "iv"
        ``"iv"``: ``w[j, k] ∝ 1 / v[j, k]`` (Notes); ``"equal"``: ``w[j, k] ∝ 1``.
    usable : bool array of shape (..., n_annotators), optional
        Default :func:`usable_confusions`. Unusable annotators get weight 0.

    Returns
    -------
    array of shape (..., n_annotators, K)
        Each column sums to 1 over the usable annotators (all zero when none is usable).

    Warns
    -----
    SmallGapWarning
        Some annotators are unusable (named); only when ``usable`` is not given (a caller who passes it has
        decided, and says so itself) and not under ``jit``.

    Notes
    -----
    ``v[j, k] = sum_a q_a T[j, a, k]^2 - pi_k`` with ``q_a = sum_y pi_y C_j[y, a]``: the variance of annotator
    ``j``'s error on coordinate ``k`` (floored at 1e-8); for K = 2, ``k = 1`` the binary IV variance. Derivation:
    docs/foundations.md, *The K-class IV weight: derivation*.

    Examples
    --------
    >>> C = np.array([[[0.9, 0.1], [0.1, 0.9]], [[0.7, 0.3], [0.3, 0.7]]])
    >>> w = np.asarray(annotator_weights(C, np.array([0.5, 0.5])))
    >>> bool(w[0, 1] > w[1, 1]) and np.allclose(w.sum(axis=0), 1)
    True
    """
    check_choice(rule, ("iv", "equal"), name="rule")
    xp = _xp(confusion, prevalence_overall, usable)
    c = xp.asarray(confusion)
    if c.ndim < 3 or c.shape[-1] != c.shape[-2]:
        raise ValueError(f"`confusion` must have shape (..., n_annotators, K, K); got {c.shape}.")
    J, K = c.shape[-3], c.shape[-1]
    pi = xp.asarray(prevalence_overall, dtype=c.dtype)
    if pi.ndim < 1 or pi.shape[-1] != K or pi.ndim > c.ndim - 2:
        raise ValueError(f"`prevalence_overall` must have shape ({K},) (or (..., {K}) with the leading axes of "
                         f"`confusion`); got {pi.shape}.")
    use = usable_confusions(c) if usable is None else xp.asarray(usable, dtype=bool)
    if use.ndim < 1 or use.shape[-1] != J:
        raise ValueError(f"`usable` must have shape ({J},) (or (..., {J})); got {use.shape}.")
    if usable is None and not _is_traced(use) and not bool(np.all(np.asarray(use))):
        bad = np.flatnonzero(~np.all(np.asarray(use).reshape(-1, J), axis=0))
        warnings.warn(f"annotator_weights: annotators {_preview(bad)} have a near-singular confusion matrix "
                      "(usable_confusions False): their corrected labels would explode, so they get weight 0.",
                      SmallGapWarning, stacklevel=2)
    if rule == "equal":
        w = xp.ones(c.shape[:-1], dtype=c.dtype)
    else:
        pi = xp.clip(pi / xp.sum(pi, axis=-1, keepdims=True), MU_CLIP, 1.0)
        # Unusable matrices are replaced by the identity before inverting: their weight is 0 anyway, and the
        # inverse of a singular matrix would put NaN into the sums below.
        safe = xp.where(use[..., None, None], c, xp.eye(K, dtype=c.dtype))
        T = xp.linalg.inv(safe)
        q = xp.einsum("...y,...jya->...ja", pi, safe)    # marginal label frequencies q[j, a]
        v = xp.einsum("...ja,...jak->...jk", q, T**2) - pi[..., None, :]
        w = 1.0 / xp.maximum(v, VARIANCE_FLOOR)
    w = xp.where(use[..., None], w, 0.0)
    tot = xp.sum(w, axis=-2, keepdims=True)
    return xp.where(tot > 0, w / xp.where(tot > 0, tot, 1.0), 0.0)
