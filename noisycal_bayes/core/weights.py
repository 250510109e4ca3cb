"""Annotator weight rules (paper §4.4 and Appendix F.4).

IV: ``sigma_j^2 = [mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)] / delta_j^2`` with ``b_j = a_j + delta_j``,
``w_j ∝ 1 / max(sigma_j^2, floor)``; ``mu`` clipped to [1e-4, 1 - 1e-4]. Equal ``∝ 1``, Gap ``∝ delta_j``,
Squared-gap ``∝ delta_j^2``.
"""
import jax.numpy as jnp

from .._validation import WEIGHT_RULES  # the names live with the check that accepts them
MU_CLIP = 1e-4
# A zero variance (a perfect annotator) would give an infinite weight; the floor keeps weights finite.
VARIANCE_FLOOR = 1e-8


def iv_weights(fpr, gap, mu):
    """Inverse-variance weights, shape (n_annotators,), summing to 1."""
    mu = jnp.clip(mu, MU_CLIP, 1 - MU_CLIP)
    tpr = fpr + gap
    var = (mu * tpr * (1 - tpr) + (1 - mu) * fpr * (1 - fpr)) / gap**2
    inv = 1.0 / jnp.maximum(var, VARIANCE_FLOOR)
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
