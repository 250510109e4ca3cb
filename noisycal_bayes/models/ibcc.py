"""Bayesian Dawid-Skene with a population prior on the confusion rows (IBCC) for K-class crowds, for NUTS.

Model (Kim & Ghahramani 2012, "Bayesian classifier combination"; the population of
:mod:`noisycal_bayes.core.population`): clean labels ``Y_i ~ Categorical(pi)``, ``pi ~ Dirichlet(prior.prevalence
1_K)``; every annotator's confusion row ``C[j, y, :] ~ Dirichlet(alpha_y)``, ``alpha_y = s_y m_y`` (population mean
row ``m_y``, concentration ``s_y``); responses ``A_r ~ Categorical(C[j_r, Y_{i_r}, :])``, the clean labels summed
out. Two ways to set the population:

- **empirical Bayes** (``learn_population=False``, the default of ``fit_nuts_multiclass(model="ibcc")``): ``alpha``
  is the population of the partially pooled EM (``fit_em_multiclass(model="pooled").prior[0]``, type-II maximum
  likelihood with the weak ``s^(-5/2)`` hyperprior), plugged in as data;
- **hierarchical** (``learn_population=True``): ``m_y ~ Dirichlet(prior.off_diagonal + (prior.diagonal -
  prior.off_diagonal) e_y)`` (favours the diagonal: the crowd is better than chance) and ``log s_y ~ Normal(log(2 K),
  1.5)`` are sampled with the rest.

Orientation is fixed at the crowd's level: the population mean is diagonally dominant at the start (the pooled EM
relabels its classes so, :mod:`noisycal_bayes.inference.population`); a single annotator may be adversarial. Gold
items are observed clean labels; repeated responses are conditionally independent given ``Y_i``. Likelihood on
coded responses in O(n_responses) (docs/methods.md); prevalence in the scaled log-ratio coordinates of
:func:`~noisycal_bayes.models.log_ratio.grouped_multiclass_log_ratio`.

**Gamma-quantile coordinates of the confusion rows.** A row ``C[j, y] ~ Dirichlet(alpha)`` is ``G / sum(G)`` with
independent ``G_a ~ Gamma(alpha_a)``. The sampler's coordinate of cell ``(j, y, a)`` is a standard normal quantile
``t``, mapped to ``x = log G_a = h_b(t)``, an interpolant (:func:`gamma_quantile_table`) of the exact quantile map
``log F_b^{-1}(Phi(t))`` of ``Gamma(b)``, ``b = n + alpha`` the row's conjugate posterior at the start's expected
counts ``n``. The row sum ``S = sum(G)`` is an auxiliary variable given ``Gamma(A + N)`` (``A = sum alpha``, ``N =
sum n``) independently of ``C``, so the marginal of ``C`` is the model's; the log density in ``t`` is::

    sum_a [alpha_a x_a - exp(x_a) - lgamma(alpha_a) + log h_b'(t_a)] + N log S + lgamma(A) - lgamma(A + N) + loglik(C)

If the clean labels were the start's posteriors, the posterior of ``t`` would be exactly standard normal (up to the
interpolation, ``< 1e-3`` in log density on ``|t| < 7``). The log-odds coordinates used before
(:mod:`~noisycal_bayes.models.log_ratio`, affine) cannot be: a crowd's population has entries ``alpha_a << 1``
(adult 0.07, cf 0.04), and ``log G`` under ``Gamma(a)`` has an exponential tail of scale ``1 / a`` on one side
against a double-exponential wall on the other, which held NUTS at step sizes near 0.03 and trees of 127-255
leapfrog steps on the rows that few labels touch. Measured: docs/crowds.md ("Bayesian route").
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from typing import NamedTuple

from ..core.sparse import CodedResponses, coded_class_log_joint, coded_class_marginal_loglik
from .log_ratio import _dirichlet_log_ratio_density, insert_diagonal_zero, log_ratio_prevalence
from .priors import DEFAULT_MULTICLASS_PRIOR

__all__ = ["CONCENTRATION_SCALE", "GammaQuantiles", "QUANTILE_KNOTS", "concentration_loc", "gamma_quantile_point",
           "gamma_quantile_table", "ibcc_multiclass", "population_alpha"]

#: Knots ``t`` of the Gamma-quantile coordinates (standard normal quantiles, step 0.25); linear beyond them.
QUANTILE_KNOTS = np.linspace(-7.0, 7.0, 57)

#: Hierarchical IBCC: ``log s_y ~ Normal(concentration_loc(K), CONCENTRATION_SCALE)``.
CONCENTRATION_SCALE = 1.5


def concentration_loc(n_classes: int) -> float:
    """Prior median of each row's concentration on the log scale, ``log(2 K)`` (a row worth 2 K pseudo-labels).

    >>> round(concentration_loc(5), 4)
    2.3026
    """
    return float(np.log(2.0 * n_classes))


def population_alpha(population_u, log_concentration):
    """``alpha_y = s_y m_y`` (K, K) from the population's log-odds against the diagonal ``population_u`` (K, K-1)
    and ``log s`` (K,); also returns ``log m`` (K, K)."""
    log_m = jax.nn.log_softmax(insert_diagonal_zero(population_u), axis=-1)
    return jnp.exp(log_concentration)[:, None] * jnp.exp(log_m), log_m


class GammaQuantiles(NamedTuple):
    """The Gamma-quantile coordinates of IBCC's confusion rows (module docstring; a pytree of arrays).

    ``log_g``, ``slope`` (J, K, K, n_knots): ``h_b`` and ``h_b'`` at :data:`QUANTILE_KNOTS` for each cell's ``b``;
    ``row_counts`` (J, K): ``N``, the expected counts of each row at the start (the auxiliary row sum's shape is
    ``A + N``). Any values give the same model; they decide how round the posterior looks to the sampler."""

    log_g: object
    slope: object
    row_counts: object


def gamma_quantile_table(shape, knots=QUANTILE_KNOTS):
    """``(log_g, slope)`` of shape ``shape.shape + (n_knots,)``: ``x = log F_b^{-1}(Phi(t))`` for ``G ~ Gamma(b)``
    at the knots ``t`` and its derivative ``dx/dt = phi(t) / (G f_b(G))``, exact (SciPy's ``gammaincinv`` /
    ``gammainccinv``; where ``G`` underflows, the lower-tail expansion ``F_b(G) = G^b / Gamma(b + 1) (1 + O(G))``,
    ``x = (log Phi(t) + lgamma(b + 1)) / b``), the slopes capped at 3 x the adjacent secants (Fritsch-Carlson: the
    interpolant is increasing). Computed once per distinct ``b`` (many rows share the population's).

    >>> log_g, slope = gamma_quantile_table(np.array([0.05, 40.0]))
    >>> np.round(np.exp(log_g[:, 28]), 4).tolist()   # t = 0: the medians of Gamma(0.05) and Gamma(40)
    [0.0, 39.6672]
    """
    from scipy.special import gammainccinv, gammaincinv, gammaln, log_ndtr, ndtr

    b = np.asarray(shape, np.float64)
    if not np.all(np.isfinite(b)) or (b <= 0).any():
        raise ValueError(f"gamma_quantile_table: every shape must be finite and > 0; got {b[~(b > 0)][:5].tolist()} "
                         "among them.")
    uniq, inv = np.unique(b.ravel(), return_inverse=True)
    u, t = uniq[:, None], np.asarray(knots, np.float64)[None, :]
    with np.errstate(divide="ignore", under="ignore"):
        g = np.where(t < 0, gammaincinv(u, ndtr(np.minimum(t, 0.0))), gammainccinv(u, ndtr(-np.maximum(t, 0.0))))
        x = np.where(g > 1e-250, np.log(np.where(g > 0, g, 1.0)), (log_ndtr(t) + gammaln(u + 1.0)) / u)
    slope = np.exp(-0.5 * t * t - 0.5 * np.log(2.0 * np.pi) - (u * x - np.exp(x) - gammaln(u)))
    # Fritsch-Carlson: slopes at most 3 x the adjacent secants keep the cubic pieces increasing (binds nowhere on 400
    # shapes from 1e-6 to 1e5; a guarantee, not a correction).
    secant = np.diff(x, axis=1) / (t[0, 1] - t[0, 0])
    cap = 3.0 * np.minimum(np.concatenate([secant[:, :1], secant], axis=1),
                           np.concatenate([secant, secant[:, -1:]], axis=1))
    slope = np.minimum(slope, cap)
    shape_out = b.shape + (t.size,)
    return x[inv].reshape(shape_out), slope[inv].reshape(shape_out)


def gamma_quantile_point(t, log_g, slope, knots=QUANTILE_KNOTS):
    """``(x, log dx/dt)``, both of ``t``'s shape (..., J, K, K): the cubic Hermite interpolant of the table
    (:func:`gamma_quantile_table`, values and exact slopes at the knots), linear beyond the end knots; a monotone
    C1 map of the real line (NumPy or JAX arrays)."""
    xp = jnp if any(isinstance(a, jax.Array) for a in (t, log_g, slope)) else np
    n_knots = log_g.shape[-1]
    dt = float(knots[1] - knots[0])
    pos = (t - float(knots[0])) / dt
    i = xp.clip(xp.floor(pos), 0, n_knots - 2).astype(np.int32)
    s = pos - i
    sc = xp.clip(s, 0.0, 1.0)
    cell = xp.arange(int(np.prod(log_g.shape[:-1]))).reshape(log_g.shape[:-1]) * n_knots
    flat_g, flat_m = xp.asarray(log_g).reshape(-1), xp.asarray(slope).reshape(-1)
    at = cell + i
    x0, x1, m0, m1 = flat_g[at], flat_g[at + 1], flat_m[at] * dt, flat_m[at + 1] * dt
    s2 = sc * sc
    s3 = s2 * sc
    x = (2 * s3 - 3 * s2 + 1) * x0 + (s3 - 2 * s2 + sc) * m0 + (3 * s2 - 2 * s3) * x1 + (s3 - s2) * m1
    dx = (6 * s2 - 6 * sc) * (x0 - x1) + (3 * s2 - 4 * sc + 1) * m0 + (3 * s2 - 2 * sc) * m1
    return x + (s - sc) * dx, xp.log(dx / dt)


def gamma_quantile_log_density(t, quantiles: GammaQuantiles, alpha):
    """``(log C (..., J, K, K), log density)`` of confusion rows ``Dirichlet(alpha)`` (``alpha`` broadcast to (J, K,
    K)) in Gamma-quantile coordinates ``t`` (module docstring), the auxiliary row sums included."""
    x, log_jac = gamma_quantile_point(t, quantiles.log_g, quantiles.slope)
    lse = jax.nn.logsumexp(x, axis=-1)
    a_row = jnp.sum(alpha, axis=-1)
    n_row = quantiles.row_counts
    gammaln = jax.scipy.special.gammaln
    density = (jnp.sum(alpha * x - jnp.exp(x) + log_jac) - jnp.sum(jnp.broadcast_to(gammaln(alpha), x.shape))
               + jnp.sum(n_row * lse + gammaln(a_row) - gammaln(a_row + n_row)))
    return x - lse[..., None], density


def ibcc_multiclass(item, code, padded, item_group, gold, item_weight, scaling, alpha, quantiles, by_code=None,
                    prior=DEFAULT_MULTICLASS_PRIOR, *, n_annotators: int, n_classes: int,
                    learn_population: bool = False):
    """IBCC (module docstring): confusion rows in Gamma-quantile coordinates, prevalence in scaled log-ratio
    coordinates, likelihood on coded responses.

    Parameters
    ----------
    item, code : int32 arrays of shape (n_responses,)
        Responses sorted by item, coded ``K annotator + label`` (pad code ``J K``:
        :func:`~noisycal_bayes.inference._em_loop.padded_class_responses`).
    padded : int32 array of shape (n_items, L) or None
        The codes per item (None: segment sums).
    item_group : int32 array of shape (n_items,)
        All zeros (one prevalence); kept for the shared kernel.
    gold : int32 array of shape (n_items,)
        Known clean label or -1.
    item_weight : float array of shape (n_items,)
        1 for a real item, 0 for a padding item.
    scaling : LogRatioScaling
        ``prev_*`` (1, K-1) (the ``conf_*`` entries are not read).
    alpha : float array of shape (K, K)
        Empirical Bayes: the population ``s_y m_y`` (row y). Hierarchical: the start of the population.
    quantiles : GammaQuantiles
        The confusion rows' coordinates (:func:`gamma_quantile_table` of ``n + alpha`` at the start's counts).
    by_code : (item, code) int32 arrays or None
        The responses sorted by code: the likelihood's gradient is then the E-step's expected counts, one sorted
        scatter (:func:`~noisycal_bayes.core.sparse.coded_class_marginal_loglik`); None: reverse-mode through the
        gathers (the same numbers, slower).
    prior : MulticlassPrior or MulticlassPriorParams
        ``prevalence``; hierarchical also ``diagonal`` and ``off_diagonal`` (the population mean's hyperprior).
    n_annotators, n_classes : int
    learn_population : bool

    Sites: ``confusion_t`` (J, K, K) (one standard-normal-like coordinate per cell, module docstring),
    ``prevalence_u`` (1, K-1); hierarchical also ``population_u`` (K, K-1) (the population mean's log-odds against the
    diagonal) and ``log_concentration`` (K,).
    """
    k, real = n_classes, dist.constraints.real
    t = numpyro.sample("confusion_t", dist.ImproperUniform(real, (), (n_annotators, k, k)))
    v = numpyro.sample("prevalence_u", dist.ImproperUniform(real, (), (1, k - 1)))
    log_prev = log_ratio_prevalence(scaling, v)
    if learn_population:
        w = numpyro.sample("population_u", dist.ImproperUniform(real, (), (k, k - 1)))
        log_s = numpyro.sample("log_concentration",
                               dist.Normal(concentration_loc(k), CONCENTRATION_SCALE).expand([k]).to_event(1))
        alpha, log_m = population_alpha(w, log_s)
        hyper = prior.off_diagonal + (prior.diagonal - prior.off_diagonal) * jnp.eye(k)
        numpyro.factor("population_prior", _dirichlet_log_ratio_density(log_m, hyper, jnp.ones(())))
    log_conf, density = gamma_quantile_log_density(t, quantiles, jnp.broadcast_to(alpha, (n_annotators, k, k)))
    numpyro.factor("confusion_prior", density)
    numpyro.factor("prevalence_prior", _dirichlet_log_ratio_density(
        log_prev, jnp.full((1, k), 1.0) * prior.prevalence, scaling.prev_scale))
    coded = CodedResponses(item, code, padded)
    if by_code is not None:
        loglik = coded_class_marginal_loglik(coded, item_group, log_conf, log_prev, gold, item_weight, by_code)
    else:
        lp = coded_class_log_joint(coded, item_group, log_conf[None], log_prev[None], gold)[:, :, 0]
        loglik = jnp.sum(item_weight * jax.nn.logsumexp(lp, axis=1))
    numpyro.factor("responses", loglik)
