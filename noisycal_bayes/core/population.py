"""A population of confusion rows: Dirichlet-multinomial fit and the M-step with population pseudo-counts.

Partially pooled Dawid-Skene (IBCC-like, Kim & Ghahramani 2012): ``C[j, y, :] ~ Dirichlet(s_y m_y)``; the population is
fitted by type-II maximum likelihood (Minka 2000) and each annotator gets its posterior-mean row. NumPy (float64).
Details: docs/foundations.md, *noisycal_bayes.core.population*.
"""
from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

__all__ = ["dirichlet_multinomial_loglik", "expected_counts", "fit_dirichlet_multinomial", "population_m_step"]

#: Bounds of the fitted Dirichlet parameters: ``alpha_k`` above ``ALPHA_MIN`` (a cell no annotator uses), the
#: concentration ``s`` below ``S_MAX`` (a crowd without over-dispersion: every annotator at the population mean).
ALPHA_MIN = 1e-6
S_MAX = 1e6


def expected_counts(item, annotator, label, posterior, n_annotators: int, item_weight=None) -> np.ndarray:
    """``n[j, y, a] = sum_{r: j_r = j, A_r = a} w_{i_r} T_{i_r}(y)``, shape (n_annotators, K, K)."""
    T = np.asarray(posterior, np.float64)
    K = T.shape[1]
    w = T if item_weight is None else np.asarray(item_weight, np.float64)[:, None] * T
    key = np.asarray(annotator) * K + np.asarray(label)
    n = np.stack([np.bincount(key, weights=w[item, y], minlength=n_annotators * K) for y in range(K)], axis=1)
    return n.reshape(n_annotators, K, K).swapaxes(1, 2).copy()  # (J*K, K_y) -> (J, a, y) -> (J, y, a)


def dirichlet_multinomial_loglik(counts, alpha) -> float:
    """``sum_j log DirMult(counts[j] | alpha)`` without the multinomial coefficient (constant in ``alpha``).

    ``counts`` (J, K) non-negative (fractional allowed), ``alpha`` (K,) positive:
    ``log G(a0) - log G(N_j + a0) + sum_k [log G(n_jk + a_k) - log G(a_k)]``.
    """
    n = np.asarray(counts, np.float64)
    a = np.asarray(alpha, np.float64)
    a0, N = a.sum(), n.sum(axis=1)
    return float(np.sum(gammaln(a0) - gammaln(N + a0)) + np.sum(gammaln(n + a) - gammaln(a)))


def fit_dirichlet_multinomial(counts, init=None, *, max_iter: int = 200, tol: float = 1e-7, power: float = 0.0):
    """Type-II maximum-likelihood (or MAP) Dirichlet-multinomial ``alpha`` (K,) for count rows ``counts`` (J, K).

    ``power > 0`` adds the hyperprior ``p(alpha) ∝ alpha_0^(-power)`` (``power = 5/2``: Gelman et al., BDA3
    §5.3), which keeps a crowd of few labels per annotator from running ``alpha_0`` to ``S_MAX`` (full pooling).

    Returns ``(m, s)``: the mean row ``m = alpha / alpha_0`` and concentration ``s = alpha_0``. ``init``: a previous
    ``alpha`` (warm start); default ``m`` = pooled frequencies, ``s = K``. Minka's fixed point (docs/foundations.md),
    ``alpha`` clipped to ``[ALPHA_MIN, S_MAX]`` (total at most ``S_MAX``); rows without counts are ignored, and
    without any count the uniform row with ``s = K`` is returned.
    """
    n = np.asarray(counts, np.float64)
    K = n.shape[1]
    n = n[n.sum(axis=1) > 0]
    if n.shape[0] == 0:
        return np.full(K, 1.0 / K), float(K)
    N = n.sum(axis=1)
    if init is None:
        tot = n.sum(axis=0) + 1e-3
        a = K * tot / tot.sum()
    else:
        a = np.clip(np.asarray(init, np.float64), ALPHA_MIN, S_MAX)
    for _ in range(max_iter):
        a0 = a.sum()
        den = np.sum(digamma(N + a0) - digamma(a0)) + power / a0
        num = np.sum(digamma(n + a) - digamma(a), axis=0)
        if den <= 0:  # every row has one label: the concentration is not identified from these counts
            break
        new = np.clip(a * num / den, ALPHA_MIN, S_MAX)
        if new.sum() > S_MAX:
            new *= S_MAX / new.sum()
        done = np.max(np.abs(new - a) / a) < tol
        a = new
        if done:
            break
    return a / a.sum(), float(a.sum())


def population_m_step(counts, mean, concentration) -> np.ndarray:
    """Posterior-mean rows ``C[j, y, :] = (n[j, y, :] + s_y m_y) / (N_jy + s_y)``, shape (J, K, K).

    ``counts`` (J, K, K) from :func:`expected_counts`, ``mean`` (K, K) (row ``y`` = ``m_y``), ``concentration`` (K,).
    """
    alpha = np.asarray(concentration, np.float64)[:, None] * np.asarray(mean, np.float64)
    num = np.asarray(counts, np.float64) + alpha[None]
    return num / num.sum(axis=2, keepdims=True)
