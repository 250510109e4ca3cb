"""``P(Y = 1 | responses)`` at every draw of the channel parameters: the E-step of the paper's EM (Appendix F.1) for
a batch of posterior draws (or bootstrap replicates) in one compiled call. Details: docs/foundations.md,
*noisycal_bayes.core.posterior*.
"""
import jax
import jax.numpy as jnp
import numpy as np

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


def posterior_positive_group_channels(patterns, group, fpr_group, tpr_group, prevalence) -> np.ndarray:
    """``P(Y = 1 | row r, theta_s)`` when every score group has its own channels (the score-dependent model):
    row ``r`` of group ``g = group[r]`` is evaluated by :func:`posterior_positive_draws` at ``(fpr_group[:, g],
    tpr_group[:, g])`` and the prevalence ``prevalence[:, g]``.

    Parameters
    ----------
    patterns : array of shape (n_rows, n_annotators), int (0/1, -1 missing)
    group : array of shape (n_rows,), int
    fpr_group, tpr_group : arrays of shape (n_draws, n_groups, n_annotators)
    prevalence : array of shape (n_draws, n_groups)

    Returns
    -------
    ndarray of shape (n_draws, n_rows), float64

    Examples
    --------
    With the same channel in every group it is :func:`posterior_positive_draws`:

    >>> import numpy as np
    >>> pat, grp = np.array([[1, 1], [0, -1], [1, 0]]), np.array([0, 1, 1])
    >>> f, t, p = np.array([[0.1, 0.2]]), np.array([[0.9, 0.8]]), np.array([[0.3, 0.6]])
    >>> a = posterior_positive_group_channels(pat, grp, np.stack([f, f], 1), np.stack([t, t], 1), p)
    >>> bool(np.allclose(a, posterior_positive_draws(pat, grp, f, t, p)))
    True
    """
    from ._x64 import x64

    patterns, group = np.asarray(patterns), np.asarray(group)
    f, t = np.asarray(fpr_group, np.float64), np.asarray(tpr_group, np.float64)
    prev = np.asarray(prevalence, np.float64).reshape(f.shape[0], -1)
    out = np.zeros((f.shape[0], group.size))
    with x64():
        for g in range(f.shape[1]):
            rows = np.flatnonzero(group == g)
            if rows.size:
                out[:, rows] = np.asarray(posterior_positive_draws(
                    jnp.asarray(patterns[rows], jnp.int32), jnp.zeros(rows.size, jnp.int32), jnp.asarray(f[:, g]),
                    jnp.asarray(t[:, g]), jnp.asarray(prev[:, g:g + 1])))
    return out
