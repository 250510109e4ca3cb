"""Scaled additive log-ratio coordinates of the K-class channel models (the NUTS parametrisation).

:func:`grouped_multiclass_log_ratio` is :func:`~noisycal_bayes.models.dawid_skene.grouped_multiclass` written in
scaled additive log-ratio coordinates: each confusion row's log-odds against its diagonal entry, and each group's
prevalence log-odds against a reference class, as ``loc + scale * u``, with the Dirichlet densities carried over by
their Jacobians. The same prior and posterior on ``C`` and ``pi``, in coordinates where the posterior is close to
standard normal (:func:`log_ratio_scaling`). ``fit_nuts_multiclass`` samples it by default. The log-odds against
the diagonal (:func:`insert_diagonal_zero`) are also the coordinates of the pooled K-class model
(:func:`~noisycal_bayes.models.pooled.pooled_multiclass`).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from .dawid_skene import add_class_likelihood, dirichlet_alpha
from .priors import DEFAULT_MULTICLASS_PRIOR

__all__ = ["LogRatioScaling", "grouped_multiclass_log_ratio", "insert_diagonal_zero", "log_ratio_coordinates",
           "log_ratio_point", "log_ratio_prevalence", "log_ratio_scaling"]


def insert_diagonal_zero(off, xp=None):
    """(..., K, K-1) log-odds against the diagonal -> (..., K, K) with 0 on the diagonal (``xp``: NumPy or
    ``jax.numpy``; None: as ``off``).

    Column ``a`` of row ``y`` reads entry ``a`` (a < y) or ``a - 1`` (a > y) of the off-diagonal list, or an
    appended 0 (a == y).
    """
    xp = xp or (jnp if isinstance(off, jax.Array) else np)
    k = off.shape[-2]
    zeros = jnp.zeros(off.shape[:-1] + (1,), off.dtype) if xp is jnp else np.zeros(off.shape[:-1] + (1,))
    ext = xp.concatenate([off, zeros], axis=-1)
    a, y = np.arange(k)[None, :], np.arange(k)[:, None]
    index = np.where(a == y, k - 1, np.where(a < y, a, a - 1))
    return xp.take_along_axis(ext, xp.broadcast_to(index, off.shape[:-2] + (k, k)), axis=-1)


class LogRatioScaling(NamedTuple):
    """Affine map from the sampler's coordinates to additive log-ratio coordinates (a pytree of arrays).

    ``conf_loc``, ``conf_scale`` (J, K, K-1): ``eta[j, y] = conf_loc[j, y] + conf_scale[j, y] * u[j, y]``, the
    log-odds ``log(C[j, y, a] / C[j, y, y])`` of the off-diagonal entries ``a != y`` in increasing order of
    ``a``. ``prev_loc``, ``prev_scale`` (G, K-1) and ``prev_index`` (G, K) int32: the same for the prevalences,
    against a reference class per group; ``prev_index[g, a]`` is the position of class ``a`` in the (K-1)
    free coordinates followed by the reference's 0 (so the reference has index K-1). Any values give the same
    model; they only decide how round the posterior looks to the sampler (:func:`log_ratio_scaling`).
    """

    conf_loc: object
    conf_scale: object
    prev_loc: object
    prev_scale: object
    prev_index: object


def log_ratio_scaling(confusion_counts, prevalence_counts, prior=DEFAULT_MULTICLASS_PRIOR, *,
                      confusion_alpha=None) -> LogRatioScaling:
    """The scaling that makes each coordinate's approximate posterior standard normal.

    Parameters
    ----------
    confusion_counts : array of shape (J, K, K)
        Expected counts ``sum_r [j_r = j, a_r = a] P(Y_{i_r} = y | A)`` at some point (an E-step).
    prevalence_counts : array of shape (G, K)
        Expected clean-label counts per group at the same point.
    prior : MulticlassPrior
    confusion_alpha : array of shape (K, K) or (J, K, K), optional
        The confusion rows' Dirichlet parameters when they are not the prior's (IBCC's population
        ``s_y m_y``, :mod:`noisycal_bayes.models.ibcc`).

    Returns
    -------
    LogRatioScaling
        Float64 NumPy arrays. Each row is treated as its conjugate Dirichlet posterior ``Dir(n + alpha)``
        given the expected counts, for which ``log(X_a / X_r)`` has mean ``digamma(A_a) - digamma(A_r)`` and
        variance ``trigamma(A_a) + trigamma(A_r)`` exactly; the reference ``r`` is the diagonal entry of a
        confusion row and the largest class of a group.

    Examples
    --------
    >>> s = log_ratio_scaling(np.full((1, 2, 2), 50.0), np.array([[80.0, 20.0]]))
    >>> s.conf_scale.shape, s.prev_index.tolist()
    ((1, 2, 1), [[1, 0]])
    """
    from scipy.special import digamma, polygamma

    n_conf = np.asarray(confusion_counts, np.float64)
    n_prev = np.asarray(prevalence_counts, np.float64)
    k = n_conf.shape[-1]
    alpha = prior.pseudo_counts(k) + 1.0 if confusion_alpha is None else np.asarray(confusion_alpha, np.float64)
    a_conf = np.maximum(n_conf, 0.0) + alpha
    a_prev = np.maximum(n_prev, 0.0) + prior.prevalence
    off = ~np.eye(k, dtype=bool)
    diag = np.diagonal(a_conf, axis1=-2, axis2=-1)[..., None]              # (J, K, 1)
    a_off = a_conf[:, off].reshape(a_conf.shape[0], k, k - 1)              # row y without column y
    conf_loc = digamma(a_off) - digamma(diag)
    conf_scale = np.sqrt(polygamma(1, a_off) + polygamma(1, diag))
    ref = np.argmax(a_prev, axis=-1)                                       # (G,)
    cls = np.arange(k)[None, :]
    index = np.where(cls == ref[:, None], k - 1, np.where(cls < ref[:, None], cls, cls - 1))
    free = np.argsort(index, axis=-1)[:, : k - 1]                          # class of each free coordinate
    a_free = np.take_along_axis(a_prev, free, axis=-1)
    a_ref = np.take_along_axis(a_prev, ref[:, None], axis=-1)
    prev_loc = digamma(a_free) - digamma(a_ref)
    prev_scale = np.sqrt(polygamma(1, a_free) + polygamma(1, a_ref))
    return LogRatioScaling(conf_loc, conf_scale, prev_loc, prev_scale, index.astype(np.int32))


def log_ratio_coordinates(scaling: LogRatioScaling, confusion, prevalence):
    """``(u (..., J, K, K-1), v (..., G, K-1))``: the sampler's coordinates of points (inverse of
    :func:`log_ratio_point`; ``confusion`` (..., J, K, K), ``prevalence`` (..., G, K), leading batch dimensions
    allowed)."""
    s = jax.tree.map(np.asarray, scaling)
    log_c = np.log(np.asarray(confusion, np.float64))
    k = log_c.shape[-1]
    eta = (log_c - np.diagonal(log_c, axis1=-2, axis2=-1)[..., None])[..., ~np.eye(k, dtype=bool)]
    u = (eta.reshape(log_c.shape[:-1] + (k - 1,)) - s.conf_loc) / s.conf_scale
    log_p = np.log(np.asarray(prevalence, np.float64))
    free = np.broadcast_to(np.argsort(s.prev_index, axis=-1), log_p.shape)
    xi = np.take_along_axis(log_p, free[..., : k - 1], axis=-1) - np.take_along_axis(log_p, free[..., k - 1:], axis=-1)
    return u, (xi - s.prev_loc) / s.prev_scale


def log_ratio_point(scaling: LogRatioScaling, u, v):
    """``(log C (..., J, K, K), log pi (..., G, K))`` from the sampler's coordinates (the model's map; NumPy or
    JAX arrays, leading batch dimensions allowed)."""
    xp = jnp if isinstance(u, jax.Array) or isinstance(v, jax.Array) else np
    eta = scaling.conf_loc + scaling.conf_scale * u
    # Off-diagonal log-odds plus a 0 on the diagonal, then log-softmax (shift-invariant, no exp/log round trip).
    return _log_softmax(xp, insert_diagonal_zero(eta, xp)), log_ratio_prevalence(scaling, v)


def log_ratio_prevalence(scaling: LogRatioScaling, v):
    """``log pi (..., G, K)`` from the sampler's prevalence coordinates ``v`` (..., G, K-1) (the prevalence half of
    :func:`log_ratio_point`; NumPy or JAX arrays)."""
    xp = jnp if isinstance(v, jax.Array) or isinstance(scaling.prev_loc, jax.Array) else np
    xi = scaling.prev_loc + scaling.prev_scale * v
    ext = xp.concatenate([xi, xp.zeros(xi.shape[:-1] + (1,), xi.dtype)], axis=-1)
    index = xp.broadcast_to(scaling.prev_index, ext.shape)
    return _log_softmax(xp, xp.take_along_axis(ext, index, axis=-1))


def _log_softmax(xp, x):
    if xp is jnp:
        return jax.nn.log_softmax(x, axis=-1)
    m = x.max(axis=-1, keepdims=True)  # shift by the row maximum: exp never overflows
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def _dirichlet_log_ratio_density(log_p, alpha, scale):
    """Dirichlet log density of rows given by ``log_p`` (..., K), in scaled log-ratio coordinates.

    With ``x = log(p_{-r} / p_r)`` (K-1 free coordinates), ``p = softmax([x, 0])`` has Jacobian
    ``|dp_{-r}/dx| = prod_k p_k``, so the density of ``x`` is ``prod_k p_k^alpha_k / B(alpha)``; the affine
    ``x = loc + scale u`` adds ``sum log scale``.
    """
    lognorm = jnp.sum(jax.scipy.special.gammaln(alpha), -1) - jax.scipy.special.gammaln(jnp.sum(alpha, -1))
    return jnp.sum(alpha * log_p) - jnp.sum(jnp.broadcast_to(lognorm, log_p.shape[:-1])) + jnp.sum(jnp.log(scale))


def grouped_multiclass_log_ratio(table, scaling, *, n_annotators: int, n_classes: int, n_groups: int,
                                 prior=DEFAULT_MULTICLASS_PRIOR, record_loglik: bool = False):
    """:func:`grouped_multiclass` in scaled additive log-ratio coordinates (the NUTS parametrisation).

    The same model (same prior and posterior on ``C`` and ``pi``; module docstring), written for the
    sampler: each confusion row's log-odds against its diagonal entry and each group's log-odds against its
    reference class are ``loc + scale * u`` (:class:`LogRatioScaling`), ``u`` real (improper flat sites whose
    density comes from the Dirichlet factors with their Jacobians, :func:`_dirichlet_log_ratio_density`).
    Stick-breaking coordinates (NumPyro's default for the simplex) put each row's posterior on very different
    scales and skew it; here a scaling from the start's expected counts makes it close to standard normal,
    so NUTS needs a short warm-up and shallow trees.

    Parameters
    ----------
    table : PatternTable or SparseTable
    scaling : LogRatioScaling
    n_annotators, n_classes, n_groups : int
    prior : MulticlassPrior or MulticlassPriorParams
    record_loglik : bool

    Sites: ``confusion_u`` (J, K, K-1), ``prevalence_u`` (G, K-1); :func:`log_ratio_point` maps them to
    ``(log C, log pi)``.
    """
    k = n_classes
    real = dist.constraints.real
    u = numpyro.sample("confusion_u", dist.ImproperUniform(real, (), (n_annotators, k, k - 1)))
    v = numpyro.sample("prevalence_u", dist.ImproperUniform(real, (), (n_groups, k - 1)))
    log_conf, log_prev = log_ratio_point(scaling, u, v)
    alpha = jnp.broadcast_to(dirichlet_alpha(prior, k), (n_annotators, k, k))
    numpyro.factor("confusion_prior", _dirichlet_log_ratio_density(log_conf, alpha, scaling.conf_scale))
    beta = jnp.full((n_groups, k), 1.0) * prior.prevalence
    numpyro.factor("prevalence_prior", _dirichlet_log_ratio_density(log_prev, beta, scaling.prev_scale))
    add_class_likelihood(table, log_conf, log_prev, record_loglik)
