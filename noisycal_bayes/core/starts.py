"""EM starting points and the label-exchange rule, shared by the reference EM and the vectorised EM.

Both EMs must give identical answers from identical starts, so the recipe lives in one place.
"""
import numpy as np

#: Random starts: fpr ~ U(FPR_RANGE), tpr ~ U(TPR_RANGE), prevalence ~ U(PREVALENCE_RANGE).
FPR_RANGE = (0.05, 0.45)
TPR_RANGE = (0.55, 0.95)
PREVALENCE_RANGE = (0.2, 0.8)


def _count(value, name: str, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value!r}.")
    return int(value)


def em_starts(n_annotators: int, n_groups: int, n_starts: int, seed: int = 0):
    """Random EM starts with ``fpr < 0.5 < tpr``, reproducible from ``seed``.

    Parameters
    ----------
    n_annotators, n_groups, n_starts : int
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    fpr : ndarray of shape (n_starts, n_annotators)
    tpr : ndarray of shape (n_starts, n_annotators)
    prevalence : ndarray of shape (n_starts, n_groups)

    Notes
    -----
    Exactly: ``rng = np.random.default_rng(seed)``; ``fpr = rng.uniform(0.05, 0.45, (S, J))``, then
    ``tpr = rng.uniform(0.55, 0.95, (S, J))``, then ``prevalence = rng.uniform(0.2, 0.8, (S, G))``, in
    this order. Starting with ``fpr < 0.5 < tpr`` avoids most label-swapped solutions (ENVIRONMENT.md).

    Examples
    --------
    >>> fpr, tpr, prevalence = em_starts(3, 2, 4, seed=0)
    >>> fpr.shape, tpr.shape, prevalence.shape
    ((4, 3), (4, 3), (4, 2))
    >>> bool((fpr < 0.5).all() and (tpr > 0.5).all())
    True
    """
    n_annotators = _count(n_annotators, "n_annotators", 1)
    n_groups = _count(n_groups, "n_groups", 1)
    n_starts = _count(n_starts, "n_starts", 0)
    rng = np.random.default_rng(seed)
    fpr = rng.uniform(*FPR_RANGE, size=(n_starts, n_annotators))
    tpr = rng.uniform(*TPR_RANGE, size=(n_starts, n_annotators))
    prevalence = rng.uniform(*PREVALENCE_RANGE, size=(n_starts, n_groups))
    return fpr, tpr, prevalence


def check_starts(starts, n_annotators: int, n_groups: int):
    """Validate user starts ``(fpr (S, J), tpr (S, J), prevalence (S, G))``, all strictly inside (0, 1)."""
    try:
        fpr, tpr, prev = (np.array(s, dtype=np.float64) for s in starts)
    except (TypeError, ValueError):
        raise ValueError("`starts` must be a tuple (fpr (S, J), tpr (S, J), prevalence (S, G)).") from None
    if fpr.ndim != 2 or fpr.shape[1] != n_annotators or tpr.shape != fpr.shape or prev.shape != (fpr.shape[0], n_groups):
        raise ValueError(f"`starts` must have shapes (S, {n_annotators}), (S, {n_annotators}), (S, {n_groups}); got "
                         f"{fpr.shape}, {tpr.shape}, {prev.shape}.")
    if fpr.shape[0] == 0:
        raise ValueError("`starts` is empty.")
    vals = np.concatenate([fpr.ravel(), tpr.ravel(), prev.ravel()])
    if not np.all(np.isfinite(vals)) or np.any((vals <= 0) | (vals >= 1)):
        raise ValueError("`starts` must lie strictly inside (0, 1).")
    return fpr, tpr, prev


def orient(fpr, tpr, prevalence):
    """Global label exchange ``Y <-> 1 - Y`` when most annotators have ``tpr < fpr``.

    The exchange maps ``(fpr, tpr) -> (tpr, fpr)`` and ``prevalence -> 1 - prevalence`` (the likelihood
    is unchanged). Ties (exactly half the annotators reversed) go by the sign of the summed gaps; a
    summed gap of exactly 0 is left as it is. Returns ``(fpr, tpr, prevalence, exchanged)``.
    """
    gap = tpr - fpr
    n_rev = int(np.sum(gap < 0))
    if 2 * n_rev > gap.size or (2 * n_rev == gap.size and gap.sum() < 0):
        return tpr.copy(), fpr.copy(), 1.0 - prevalence, True
    return fpr, tpr, prevalence, False
