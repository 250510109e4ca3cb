"""Corrected log loss for recalibration (paper §5.1).

The log loss is linear in the label: ``l(p, y) = softplus(s) - y s`` with ``s = logit(p)``, so
replacing ``y`` by the corrected label ``Ytilde`` gives an unbiased estimate of the clean risk.
"""
import jax
import jax.numpy as jnp

from .likelihood import _eager_jit  # one fused program per shape on concrete inputs; traced as before otherwise

# Scores of exactly 0 or 1 have infinite logits; clip them (paper Appendix E.2 clips inputs too).
LOGIT_CLIP = 1e-6


# ``eps`` is static: as in the eager code, ``1 - eps`` is rounded in Python's float64, then cast to the array's dtype.
@_eager_jit(static_argnames=("eps",))
def clipped_logit(scores, eps: float = LOGIT_CLIP):
    """``logit(z)`` of scores clipped to ``[eps, 1 - eps]``, shape of ``scores`` (finite at 0 and 1)."""
    z = jnp.clip(scores, eps, 1 - eps)
    return jnp.log(z) - jnp.log1p(-z)


def temperature_map(logits, temperature):
    """Recalibrated logits ``s / T``."""
    return logits / temperature


def platt_map(logits, alpha, beta):
    """Recalibrated logits ``alpha s + beta``."""
    return alpha * logits + beta


@_eager_jit
def corrected_log_loss(mapped_logits, corrected_labels, item_weights=None):
    """Mean ``softplus(s) - Ytilde s`` over items (a scalar)."""
    loss = jax.nn.softplus(mapped_logits) - corrected_labels * mapped_logits
    if item_weights is None:
        return jnp.mean(loss)
    return jnp.sum(item_weights * loss) / jnp.sum(item_weights)
