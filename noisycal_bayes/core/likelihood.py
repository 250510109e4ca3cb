"""Dawid-Skene log-likelihood with the latent label marginalised analytically.

For a response pattern ``A`` in group ``g``: ``log P(A) = logaddexp(log(1 - pi_g) + l0, log pi_g + l1)``
with ``l0 = sum_j log P(A_j | Y = 0) = sum_j [A_j log a_j + (1 - A_j) log(1 - a_j)]`` over observed
responses, ``l1`` the same with ``b_j = a_j + delta_j``. Paper: Appendix F.1.
"""
import jax
import jax.numpy as jnp

# Rates of exactly 0 or 1 (a perfect annotator, an empty group) would give log(0) = -inf and NaN
# gradients; clipping costs nothing measurable in the likelihood.
_EPS = 1e-12


def _log(p):
    return jnp.log(jnp.clip(p, _EPS, 1.0))


def pattern_loglik(patterns, fpr, tpr):
    """``(l0, l1)``: log-probability of each response pattern given Y = 0 and Y = 1, each (n_rows,).

    ``patterns`` is (n_rows, n_annotators) with 0/1 and -1 for missing.
    """
    obs = patterns >= 0
    pos = patterns == 1
    l0 = jnp.sum(jnp.where(obs, jnp.where(pos, _log(fpr), _log(1 - fpr)), 0.0), axis=-1)
    l1 = jnp.sum(jnp.where(obs, jnp.where(pos, _log(tpr), _log(1 - tpr)), 0.0), axis=-1)
    return l0, l1


def ds_loglik_rows(patterns, group, fpr, tpr, prevalence):
    """Marginal log-likelihood of each row (pattern or item), shape (n_rows,).

    ``prevalence`` is (n_groups,) indexed by ``group`` (n_rows,), or (n_rows,) per-row ``P(Y=1)``
    when ``group`` is None (calibration-curve models).
    """
    l0, l1 = pattern_loglik(patterns, fpr, tpr)
    pi = prevalence if group is None else prevalence[group]
    return jnp.logaddexp(_log(1 - pi) + l0, _log(pi) + l1)


def ds_loglik(patterns, group, counts, fpr, tpr, prevalence):
    """Total log-likelihood ``sum_rows counts * log P(row)`` (a scalar)."""
    return jnp.sum(counts * ds_loglik_rows(patterns, group, fpr, tpr, prevalence))


def posterior_positive(patterns, group, fpr, tpr, prevalence):
    """E-step: ``P(Y = 1 | A, g)`` per row, shape (n_rows,)."""
    l0, l1 = pattern_loglik(patterns, fpr, tpr)
    pi = prevalence if group is None else prevalence[group]
    return jax.nn.sigmoid(_log(pi) + l1 - _log(1 - pi) - l0)
