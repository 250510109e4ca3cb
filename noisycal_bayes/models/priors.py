"""Priors of the Bayesian channel models, as one frozen, documented object.

Parametrisation with a hard orientation constraint (DESIGN §4): ``fpr_j ~ Beta(fpr)``,
``u_j ~ Beta(u)``, ``tpr_j = fpr_j + (1 - fpr_j) u_j``, so ``gap_j = (1 - fpr_j) u_j > 0`` in every
draw and the posterior cannot switch labels.

K classes: :class:`MulticlassPrior` (Dirichlet confusion rows favouring the diagonal, Dirichlet prevalences, and
the pooled K-class model's population), the Dirichlet pseudo-counts of the K-class MAP-EM
(:func:`dirichlet_prior_counts`) and the warning when those pseudo-counts pull the diagonal (:func:`prior_pull_note`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


def _beta_pair(value, name: str) -> tuple:
    try:
        a, b = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a pair (alpha, beta) of Beta parameters; got {value!r}.") from None
    if not (np.isfinite(a) and np.isfinite(b) and a > 0 and b > 0):
        raise ValueError(f"`{name}` Beta parameters must be finite and > 0; got ({a}, {b}).")
    return a, b


def _normal_pair(value, name: str) -> tuple:
    try:
        loc, scale = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a pair (loc, scale) of Normal parameters; got {value!r}.") from None
    if not (np.isfinite(loc) and np.isfinite(scale) and scale > 0):
        raise ValueError(f"`{name}` needs a finite loc and a finite scale > 0; got ({loc}, {scale}).")
    return loc, scale


def _positive(value, name: str, what: str = "number") -> float:
    """``value`` as a float, or a ValueError when it is not a finite number > 0."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"`{name}` must be a finite {what} > 0; got {value!r}.")
    return v


class PriorParams(NamedTuple):
    """The numbers of a :class:`Prior` as a pytree, so that a compiled sampler takes them as traced inputs
    (one compilation serves every prior). Model functions accept a ``Prior`` or a ``PriorParams``."""

    fpr: tuple
    u: tuple
    prevalence: tuple
    increments: object
    slope: tuple
    intercept: tuple
    population_fpr: tuple = (-2.0, 1.5)
    population_gap: object = 4.0
    population_spread: object = 1.5


@dataclass(frozen=True)
class Prior:
    """Prior distributions of the channel models (all proper).

    Parameters
    ----------
    fpr : (alpha, beta), default (1, 2)
        ``fpr_j ~ Beta(alpha, beta)`` (paper symbol ``a_j``).
    u : (alpha, beta), default (1, 1)
        ``u_j ~ Beta(alpha, beta)``, the fraction of the room above ``fpr_j`` taken by ``tpr_j``:
        ``tpr_j = fpr_j + (1 - fpr_j) u_j``.
    prevalence : (alpha, beta), default (1, 1)
        ``prevalence_g ~ Beta(alpha, beta)`` for every group or bin (marginal, grouped and
        histogram models).
    increments : float, default 1
        Monotone histogram: the ordered bin prevalences are the partial sums of
        ``Dirichlet(increments * ones(n_bins + 1))``; 1 is uniform over ``0 < pi_1 < ... < pi_K < 1``.
    slope, intercept : (loc, scale), defaults (1, 2) and (0, 2)
        Platt curve ``m(z) = sigmoid(slope * logit(z) + intercept)``: Normal priors centred on the
        identity map (a calibrated model) with a scale that allows strong over/under-confidence.
    population_fpr : (loc, scale), default (-2, 1.5)
        Partially pooled channels (``pooling="partial"``, :mod:`noisycal_bayes.models.pooled`):
        ``mu_fpr ~ Normal(loc, scale)``, the population's median fpr on the logit scale (-2 is fpr 0.12;
        the default's 90% range of the median is fpr 0.01 to 0.6).
    population_gap : float, default 4
        ``mean_gap = mu_tpr - mu_fpr ~ HalfNormal(population_gap)`` (logit scale; > 0 is the crowd-level
        orientation constraint). The default's median 2.7 puts the median tpr near 0.67 at fpr 0.12.
    population_spread : float, default 1.5
        ``sigma_fpr, sigma_tpr ~ HalfNormal(population_spread)``: spread of the annotators' logit fpr and
        logit tpr around the population medians (1.5 lets the crowd hold experts and spammers at once).

    Notes
    -----
    The defaults are the uniform distribution over the oriented triangle ``0 < fpr < tpr < 1`` with uniform
    prevalences: flat in ``(fpr, tpr, prevalence)``, so the MAP is the maximum-likelihood (EM) estimate, and
    proper (docs/methods.md).

    Closed-form EM (``fit_em``) handles priors that are Beta pseudo-counts on ``fpr`` and ``tpr``
    in ``(fpr, tpr)`` coordinates: that is the case when ``u = (1, beta_u)``, giving
    ``fpr ~ Beta(alpha_fpr, beta_fpr - beta_u)`` and ``tpr ~ Beta(1, beta_u)`` pseudo-counts
    (see :meth:`em_pseudo_counts`). Other priors need ``fit_map``.

    Examples
    --------
    >>> Prior().em_pseudo_counts()
    ((1.0, 1.0), (1.0, 1.0), (1.0, 1.0))
    """

    fpr: tuple = (1.0, 2.0)
    u: tuple = (1.0, 1.0)
    prevalence: tuple = (1.0, 1.0)
    increments: float = 1.0
    slope: tuple = (1.0, 2.0)
    intercept: tuple = (0.0, 2.0)
    population_fpr: tuple = (-2.0, 1.5)
    population_gap: float = 4.0
    population_spread: float = 1.5

    def __post_init__(self):
        object.__setattr__(self, "fpr", _beta_pair(self.fpr, "fpr"))
        object.__setattr__(self, "u", _beta_pair(self.u, "u"))
        object.__setattr__(self, "prevalence", _beta_pair(self.prevalence, "prevalence"))
        inc = float(self.increments)
        if not (np.isfinite(inc) and inc > 0):
            raise ValueError(f"`increments` must be a finite Dirichlet concentration > 0; got {self.increments!r}.")
        object.__setattr__(self, "increments", inc)
        object.__setattr__(self, "slope", _normal_pair(self.slope, "slope"))
        object.__setattr__(self, "intercept", _normal_pair(self.intercept, "intercept"))
        object.__setattr__(self, "population_fpr", _normal_pair(self.population_fpr, "population_fpr"))
        for name in ("population_gap", "population_spread"):
            object.__setattr__(self, name, _positive(getattr(self, name), name, "Half-Normal scale"))

    def em_pseudo_counts(self):
        """Beta pseudo-counts ``((a_fpr, b_fpr), (a_tpr, b_tpr), (a_prev, b_prev))`` for ``core.em_step``.

        The log prior density in ``(fpr, tpr)`` coordinates is
        ``(af-1) log fpr + (bf-1) log(1-fpr) + (au-1) log(tpr-fpr) + (bu-1) log(1-tpr) - (au+bu-1) log(1-fpr)``
        (the last term is the Jacobian ``|d u / d tpr| = 1 / (1 - fpr)``). It separates into Beta
        kernels in ``fpr`` and ``tpr`` only when ``au = 1``.

        Raises
        ------
        ValueError
            ``u[0] != 1`` (no closed-form M-step): use ``fit_map``.
        """
        (af, bf), (au, bu) = self.fpr, self.u
        if au != 1.0:
            raise ValueError(
                f"closed-form EM needs a prior with u = (1, beta); got u = {self.u}. The term (u_alpha - 1) log(tpr - fpr) "
                "couples fpr and tpr, so there is no closed-form M-step: use fit_map (optimiser) instead."
            )
        return (af, bf - bu), (1.0, bu), tuple(self.prevalence)

    def params(self) -> PriorParams:
        """The prior's numbers as float64 NumPy scalars in a :class:`PriorParams` pytree."""
        f = np.float64
        return PriorParams(tuple(map(f, self.fpr)), tuple(map(f, self.u)), tuple(map(f, self.prevalence)),
                           f(self.increments), tuple(map(f, self.slope)), tuple(map(f, self.intercept)),
                           tuple(map(f, self.population_fpr)), f(self.population_gap), f(self.population_spread))

    def sample(self, rng, n_annotators: int, n_groups: int = 1):
        """Draw ``(fpr, tpr, prevalence)`` from the prior with a NumPy ``Generator`` (for simulations).

        Returns arrays of shapes (n_annotators,), (n_annotators,), (n_groups,).
        """
        fpr = rng.beta(*self.fpr, size=n_annotators)
        u = rng.beta(*self.u, size=n_annotators)
        prevalence = rng.beta(*self.prevalence, size=n_groups)
        return fpr, fpr + (1 - fpr) * u, prevalence


DEFAULT_PRIOR = Prior()


def check_prior(prior) -> Prior:
    """``prior`` validated for ``fit_map`` / ``fit_nuts``: None means :data:`DEFAULT_PRIOR`; anything else must be
    a :class:`Prior` (``ValueError`` naming the type otherwise)."""
    if prior is None:
        return DEFAULT_PRIOR
    if not isinstance(prior, Prior):
        raise ValueError(f"`prior` must be None (the default Prior()) or a Prior; got {type(prior).__name__}.")
    return prior


def em_prior_counts(prior):
    """Beta pseudo-counts of ``prior`` for closed-form (MAP-)EM, validated; None for maximum likelihood.

    Parameters
    ----------
    prior : None or Prior
        None, or a :class:`Prior` whose :meth:`~Prior.em_pseudo_counts` are all >= 1.

    Returns
    -------
    None or ((a_fpr, b_fpr), (a_tpr, b_tpr), (a_prev, b_prev))
        None also when the counts are all 1 (flat in ``(fpr, tpr, prevalence)``: the MAP is the MLE).

    Raises
    ------
    ValueError
        Not a Prior, ``u[0] != 1``, or a pseudo-count below 1 (the mode may lie on the boundary, where the
        EM M-step does not apply: use ``fit_map``).
    """
    if prior is None:
        return None
    if not isinstance(prior, Prior):
        raise ValueError(f"`prior` must be None (maximum likelihood) or a Prior; got {type(prior).__name__}.")
    counts = prior.em_pseudo_counts()
    if any(v < 1 for pair in counts for v in pair):
        raise ValueError(
            f"closed-form EM needs Beta pseudo-counts >= 1 in (fpr, tpr, prevalence) coordinates; this prior gives "
            f"{counts} (fpr beta = prior.fpr[1] - prior.u[1]). The mode may then lie on the boundary, where the EM "
            "M-step does not apply: use fit_map.")
    if all(v == 1.0 for pair in counts for v in pair):
        return None  # flat in (fpr, tpr, prevalence): the MAP is the maximum-likelihood estimate
    return counts


# ------------------------------------------------------------------------------------------------ K classes
class MulticlassPriorParams(NamedTuple):
    """The numbers of a :class:`MulticlassPrior` as a pytree (traced inputs of a compiled sampler)."""

    diagonal: object
    off_diagonal: object
    prevalence: object
    population_loc: object
    population_scale: object
    population_spread: object


@dataclass(frozen=True)
class MulticlassPrior:
    """Priors of the K-class channel models (all proper).

    Parameters
    ----------
    diagonal, off_diagonal : float, defaults 2 and 1
        Row ``y`` of every confusion matrix is ``Dirichlet(alpha_y)`` with ``alpha_{y,y} = diagonal`` and
        ``alpha_{y,a} = off_diagonal`` for ``a != y``: with the defaults, one pseudo-label on the diagonal
        of every row (the MAP is the maximum-likelihood estimate with that one extra correct label).
    prevalence : float, default 1
        ``prevalence[g] ~ Dirichlet(prevalence * ones(K))`` (1: uniform on the simplex).
    population_loc, population_scale : float, defaults -3 and 1.5
        Pooled model: ``mu_{y,a} ~ Normal(loc, scale)``, the population's log-odds of answering ``a``
        instead of the true class ``y``. At -3 and K = 10 the typical diagonal entry is 0.69.
    population_spread : float, default 1
        Pooled model: ``sigma ~ HalfNormal(population_spread)``, the spread of the annotators' log-odds.

    Raises
    ------
    ValueError
        A concentration, scale or spread that is not a finite number > 0; a non-finite ``population_loc``.

    Examples
    --------
    >>> MulticlassPrior().pseudo_counts(3)[0]
    array([1., 0., 0.])
    """

    diagonal: float = 2.0
    off_diagonal: float = 1.0
    prevalence: float = 1.0
    population_loc: float = -3.0
    population_scale: float = 1.5
    population_spread: float = 1.0

    def __post_init__(self):
        for name in ("diagonal", "off_diagonal", "prevalence", "population_scale", "population_spread"):
            object.__setattr__(self, name, _positive(getattr(self, name), name))
        loc = float(self.population_loc)
        if not np.isfinite(loc):
            raise ValueError(f"`population_loc` must be finite; got {self.population_loc!r}.")
        object.__setattr__(self, "population_loc", loc)

    def params(self) -> MulticlassPriorParams:
        """The numbers as float64 NumPy scalars in a :class:`MulticlassPriorParams` pytree."""
        return MulticlassPriorParams(*(np.float64(getattr(self, f)) for f in MulticlassPriorParams._fields))

    def pseudo_counts(self, n_classes: int) -> np.ndarray:
        """``alpha - 1`` of the confusion rows, shape (K, K): what MAP-EM adds to the expected counts."""
        return self.off_diagonal - 1.0 + (self.diagonal - self.off_diagonal) * np.eye(n_classes)

    def diagonal_pull(self, counts) -> np.ndarray:
        """Shift of each confusion row's posterior-mean diagonal entry away from the counts' own proportion.

        ``counts`` (J, K, K) are (expected) label counts ``N[j, y, a]`` of annotator ``j`` answering ``a`` on
        items of class ``y``. Row ``y`` of ``C_j`` has the conjugate posterior ``Dirichlet(alpha_y + N[j, y])``,
        whose mean diagonal entry is ``(N_yy + diagonal) / (n_y + A)`` with ``n_y = sum_a N[j, y, a]`` and
        ``A = diagonal + (K - 1) off_diagonal``. Returned, shape (J, K): that mean minus ``N_yy / n_y`` (0 where
        ``n_y = 0``). With the defaults and ``n_y = 200`` labels at K = 10 (A = 11) a diagonal of 0.75 is pulled
        by ``(2 - 0.75 * 11) / 211 = -0.030``; at K = 2 (A = 3) by ``(2 - 0.75 * 3) / 203 = -0.001``.

        Examples
        --------
        >>> counts = np.array([[[150.0, 50.0], [20.0, 180.0]]])
        >>> MulticlassPrior().diagonal_pull(counts).round(5)
        array([[-0.00123, -0.00345]])
        """
        counts = np.asarray(counts, dtype=np.float64)
        k = counts.shape[-1]
        n_row = counts.sum(axis=-1)
        n_diag = np.diagonal(counts, axis1=-2, axis2=-1)
        total = self.diagonal + (k - 1) * self.off_diagonal
        with np.errstate(invalid="ignore", divide="ignore"):
            pull = (n_diag + self.diagonal) / (n_row + total) - n_diag / n_row
        return np.where(n_row > 0, pull, 0.0)

    def sample(self, rng, n_annotators: int, n_classes: int, n_groups: int = 1):
        """``(confusion (J, K, K), prevalence (G, K))`` drawn with a NumPy ``Generator`` (non-pooled models)."""
        alpha = self.pseudo_counts(n_classes) + 1.0
        conf = np.stack([[rng.dirichlet(alpha[y]) for y in range(n_classes)] for _ in range(n_annotators)])
        prev = rng.dirichlet(np.full(n_classes, self.prevalence), size=n_groups)
        return conf, prev


DEFAULT_MULTICLASS_PRIOR = MulticlassPrior()


def dirichlet_prior_counts(prior, K: int, func: str):
    """``(conf_pc (K, K), prev_pc (K,))`` Dirichlet pseudo-counts ``alpha - 1`` (zeros for None)."""
    if prior is None:
        return np.zeros((K, K)), np.zeros(K)
    if isinstance(prior, tuple) and len(prior) == 2:
        a_c, a_p = prior
    else:
        a_c, a_p = prior, 1.0
    try:
        a_c = np.broadcast_to(np.asarray(a_c, dtype=np.float64), (K, K)).copy()
        a_p = np.broadcast_to(np.asarray(a_p, dtype=np.float64), (K,)).copy()
    except (TypeError, ValueError):
        raise ValueError(f"{func}: `prior` must be None, a Dirichlet concentration alpha >= 1 for every confusion row "
                         f"(a number or a ({K}, {K}) array), or a tuple (alpha_confusion, alpha_prevalence); got "
                         f"{prior!r}.") from None
    if not (np.all(np.isfinite(a_c)) and np.all(a_c >= 1) and np.all(np.isfinite(a_p)) and np.all(a_p >= 1)):
        raise ValueError(f"{func}: Dirichlet concentrations in `prior` must be >= 1 (the posterior mode is then inside "
                         f"the simplex); got {prior!r}.")
    return a_c - 1.0, a_p - 1.0


def check_class_prior(prior, func: str) -> MulticlassPrior:
    """``prior`` of a K-class fit: None means :data:`DEFAULT_MULTICLASS_PRIOR`; else a :class:`MulticlassPrior`."""
    if prior is None:
        return DEFAULT_MULTICLASS_PRIOR
    if not isinstance(prior, MulticlassPrior):
        raise ValueError(f"{func}: `prior` must be None or a MulticlassPrior; got {type(prior).__name__}.")
    return prior


# When the prior's pull on the diagonal is worth a warning: the label-weighted mean shift of the posterior-mean
# diagonal exceeds both this floor (the NC-ECE moves by about as much or more, since the corrected targets invert
# the confusion matrices; below it the shift is small against any interval we report) and one standard error of
# that mean diagonal (the bias then matters against the channels' own uncertainty). Measured: docs/coverage.md
# ("The PriorWarning threshold").
PRIOR_PULL_FLOOR = 0.005


def prior_pull_note(prior: MulticlassPrior, counts, func: str) -> str:
    """A warning text when the Dirichlet rows' pseudo-counts pull the diagonal too far (else ``""``).

    ``counts`` (J, K, K): expected label counts at the MAP start. With ``n_y`` a row's labels, ``d_y`` its
    diagonal proportion and ``s_y`` the shift of its posterior-mean diagonal entry
    (:meth:`MulticlassPrior.diagonal_pull`), the mean shift is
    ``sum n_y s_y / sum n_y`` and the standard error of the mean diagonal ``sqrt(sum n_y d_y (1 - d_y)) / sum n_y``
    (rows independent, binomial). Warns when the mean shift exceeds :data:`PRIOR_PULL_FLOOR` and that error.
    """
    counts = np.asarray(counts, dtype=np.float64)
    pull = prior.diagonal_pull(counts)
    n_row = counts.sum(axis=-1)
    total_n = n_row.sum()
    if total_n <= 0:
        return ""
    d = np.divide(np.diagonal(counts, axis1=-2, axis2=-1), n_row, out=np.zeros_like(n_row), where=n_row > 0)
    mean_pull = float((pull * n_row).sum() / total_n)
    se = float(np.sqrt((n_row * d * (1 - d)).sum()) / total_n)
    if abs(mean_pull) <= max(PRIOR_PULL_FLOOR, se):
        return ""
    k = int(counts.shape[-1])
    total = prior.diagonal + (k - 1) * prior.off_diagonal
    return (f"{func}: the prior's pseudo-counts ({total:g} per confusion row: {prior.diagonal:g} on the diagonal, "
            f"{prior.off_diagonal:g} on each of the {k - 1} other classes) are large against the labels per row "
            f"(median {np.median(n_row[n_row > 0]):.0f}): they shift the posterior mean of the diagonal entries by "
            f"{mean_pull:+.3f} on average ({abs(mean_pull) / max(se, 1e-12):.1f} standard errors; worst row "
            f"{pull.flat[np.argmax(np.abs(pull))]:+.3f}) towards the prior's mean diagonal "
            f"{prior.diagonal / total:.2f}, and the NC-ECE and the channels with them. "
            f"Use the EM route, more labels, or a prior with fewer off-diagonal pseudo-counts, e.g. "
            f"MulticlassPrior(off_diagonal={1 / max(k - 1, 1):.3g}) (1 / (K - 1): slower to sample, "
            f"docs/multiclass.md).")
