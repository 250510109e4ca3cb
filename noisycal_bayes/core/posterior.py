"""``P(Y = 1 | responses)`` at every draw of the channel parameters: the E-step of the paper's EM (Appendix F.1) for
a batch of posterior draws (or bootstrap replicates) in one compiled call. Details: docs/foundations.md,
*noisycal_bayes.core.posterior*.
"""
import jax

from .likelihood import pattern_loglik, posterior_positive


@jax.jit
def posterior_positive_draws(patterns, group, fpr, tpr, prevalence=None, *, prior_logit=None):
    """``P(Y = 1 | row r, theta_s)`` for every draw ``s`` and row ``r``.

    Parameters
    ----------
    patterns : array of shape (n_rows, n_annotators), int
        0/1 responses, -1 for missing.
    group : array of shape (n_rows,), int, or None
        Group of each row (indexes ``prevalence``); None when ``prevalence`` is per row or ``prior_logit`` given.
    fpr, tpr : arrays of shape (n_draws, n_annotators)
    prevalence : array of shape (n_draws, n_groups), or (n_draws, n_rows) with ``group=None``
    prior_logit : array of shape (n_draws, n_rows), optional
        Prior log-odds of each row (replaces ``prevalence``).

    Returns
    -------
    array of shape (n_draws, n_rows)

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> p = posterior_positive_draws(jnp.array([[1, 1], [0, -1]]), jnp.array([0, 0]), jnp.array([[0.1, 0.2]]),
    ...                              jnp.array([[0.9, 0.8]]), jnp.array([[0.5]]))
    >>> [round(float(v), 4) for v in p[0]]  # 0.72 / (0.72 + 0.02); 0.1 / (0.1 + 0.9)
    [0.973, 0.1]
    """
    if prior_logit is not None:
        def one(f, t, lo):
            l0, l1 = pattern_loglik(patterns, f, t)
            return jax.nn.sigmoid(lo + l1 - l0)

        return jax.vmap(one)(fpr, tpr, prior_logit)
    return jax.vmap(lambda f, t, p: posterior_positive(patterns, group, f, t, p))(fpr, tpr, prevalence)
