"""One EM step of the (grouped) Dawid-Skene model on compressed counts (paper Appendix F.1).

E-step: ``T_r = P(Y = 1 | pattern_r, g_r)``. M-step with optional Beta(alpha, beta) pseudo-counts
(MAP when a prior is given): ``pi_g = (sum_{r in g} c_r T_r + alpha_pi - 1) / (sum_{r in g} c_r + alpha_pi + beta_pi - 2)``,
``tpr_j = (sum_r c_r T_r A_rj + alpha - 1) / (sum_r c_r T_r O_rj + alpha + beta - 2)``, ``fpr_j`` the same with
``1 - T_r``. The flat prior (all ones) gives maximum likelihood.

An EM loop needs the log-likelihood at every iterate too; :func:`e_step` returns it with ``T`` from the
same pattern terms (``l0``, ``l1`` and one exponential per row), so that a loop evaluating ``m_step``
then ``e_step`` does the row work once per iteration rather than twice.
"""
import jax
import jax.numpy as jnp

from .likelihood import _row_logs, _eager_jit, pattern_loglik, posterior_positive


@_eager_jit  # one fused program per shape when called eagerly (core.likelihood._eager_jit)
def e_step(patterns, group, counts, fpr, tpr, prevalence):
    """``(loglik, T)``: total log-likelihood ``sum_r c_r log P(row_r)`` (scalar) and ``T_r = P(Y = 1 | row_r)``
    (n_rows,), from one evaluation of the pattern terms.

    With ``a_r = log(1 - pi_g) + l0_r``, ``b_r = log pi_g + l1_r``, ``d = b - a`` and ``e = exp(-|d|)``:
    ``log P(row_r) = max(a, b) + log1p(e)`` and ``T_r = sigmoid(d)`` = ``1 / (1 + e)`` (d >= 0) or
    ``e / (1 + e)`` (d < 0). The same numbers, to rounding, as :func:`~noisycal_bayes.core.ds_loglik` and
    :func:`~noisycal_bayes.core.posterior_positive`.
    """
    l0, l1 = pattern_loglik(patterns, fpr, tpr)
    log_neg, log_pos = _row_logs(prevalence, group)
    a, b = log_neg + l0, log_pos + l1
    d = b - a
    e = jnp.exp(-jnp.abs(d))
    loglik = jnp.sum(counts * (jnp.maximum(a, b) + jnp.log1p(e)))
    return loglik, jnp.where(d >= 0, 1.0, e) / (1.0 + e)


@_eager_jit(static_argnames=("n_groups", "prior"))
def m_step(patterns, group, counts, n_groups: int, posterior, prior=None):
    """M-step: ``(fpr, tpr, prevalence)`` from ``T = posterior`` (n_rows,), with the module's formulas.

    ``prior`` is None (maximum likelihood) or a tuple of Beta ``(alpha, beta)`` pairs
    ``((a_fpr, b_fpr), (a_tpr, b_tpr), (a_prev, b_prev))`` applied to fpr, tpr and prevalence.
    """
    w1 = counts * posterior
    w0 = counts - w1
    obs = (patterns >= 0).astype(w1.dtype)
    pos = (patterns == 1).astype(w1.dtype)
    (af, bf), (at, bt), (ap, bp) = ((1.0, 1.0),) * 3 if prior is None else prior
    n_g = jax.ops.segment_sum(counts, group, num_segments=n_groups)
    t_g = jax.ops.segment_sum(w1, group, num_segments=n_groups)
    prevalence = (t_g + ap - 1) / (n_g + ap + bp - 2)
    tpr = (w1 @ pos + at - 1) / (w1 @ obs + at + bt - 2)
    fpr = (w0 @ pos + af - 1) / (w0 @ obs + af + bf - 2)
    return fpr, tpr, prevalence


@_eager_jit(static_argnames=("n_groups", "prior"))
def em_step(patterns, group, counts, n_groups: int, fpr, tpr, prevalence, prior=None):
    """Return updated ``(fpr, tpr, prevalence)``: :func:`m_step` of the E-step ``T`` at the given parameters."""
    t = posterior_positive(patterns, group, fpr, tpr, prevalence)
    return m_step(patterns, group, counts, n_groups, t, prior)


def log_prior(parts, prior):
    """Sum of Beta log-kernels ``(alpha - 1) log p + (beta - 1) log(1 - p)`` over ``parts`` (0 when ``prior`` is None).

    ``parts = (fpr (J,), tpr (J,), prevalence (G,))`` and ``prior = ((a_fpr, b_fpr), (a_tpr, b_tpr),
    (a_prev, b_prev))`` Beta pseudo-counts; the objective of a MAP-EM fit is log-likelihood + this.
    """
    if prior is None:
        return 0.0
    total = 0.0
    for p, (al, be) in zip(parts, prior):
        # Clip as the likelihood does, so a rate on the boundary with a flat side contributes 0, not NaN.
        p = jnp.clip(p, 1e-12, 1 - 1e-12)
        total = total + jnp.sum((al - 1.0) * jnp.log(p) + (be - 1.0) * jnp.log1p(-p))
    return total
