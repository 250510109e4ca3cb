"""Annotator weight rules (paper §4.4 and Appendix F.4): the one place the inverse-variance recipe lives.

IV: ``sigma_j^2 = [mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)] / delta_j^2`` with ``b_j = a_j + delta_j``
(:func:`annotator_noise_variance`), ``w_j ∝ 1 / max(sigma_j^2, floor)``; ``mu`` clipped to [1e-4, 1 - 1e-4].
Equal ``∝ 1``, Gap ``∝ delta_j``, Squared-gap ``∝ delta_j^2``. Weights are convex over the annotators and are
renormalised per item over the annotators who labelled it where they are used
(:func:`~noisycal_bayes.core.channel.combine_item_weights`). IV needs ``mu``, the clean-label frequency, which
:func:`weights_for_labels` estimates by the equally weighted mean corrected label of the items.
"""
import jax.numpy as jnp

from .._validation import WEIGHT_RULES  # the names live with the check that accepts them
from .channel import item_corrected_label

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


def iv_weights(fpr, gap, mu):
    """Inverse-variance weights, shape (n_annotators,), summing to 1."""
    mu = jnp.clip(mu, MU_CLIP, 1 - MU_CLIP)
    inv = 1.0 / jnp.maximum(annotator_noise_variance(fpr, gap, mu), VARIANCE_FLOOR)
    return inv / jnp.sum(inv)


def rule_weights(rule: str, fpr, gap, mu=None):
    """Weights of a named rule (``"iv"`` needs ``mu``), shape (n_annotators,), summing to 1."""
    if rule == "iv":
        return iv_weights(fpr, gap, mu)
    if rule == "equal":
        w = jnp.ones_like(gap)
    elif rule == "gap":
        w = gap
    elif rule == "squared_gap":
        w = gap**2
    else:
        raise ValueError(f"`weights` must be one of {WEIGHT_RULES} or an array; got {rule!r}.")
    return w / jnp.sum(w)


def weights_for_labels(rule, labels, fpr, gap, counts=None):
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
    mu = None
    if rule == "iv":
        eq = item_corrected_label(labels, fpr, gap, jnp.ones_like(gap))
        mu = jnp.mean(eq) if counts is None else jnp.sum(counts * eq) / jnp.sum(counts)
    return rule_weights(rule, fpr, gap, mu)
