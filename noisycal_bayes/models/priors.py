"""Priors of the Bayesian channel models, as one frozen, documented object.

Parametrisation with a hard orientation constraint (DESIGN §4): ``fpr_j ~ Beta(fpr)``,
``u_j ~ Beta(u)``, ``tpr_j = fpr_j + (1 - fpr_j) u_j``, so ``gap_j = (1 - fpr_j) u_j > 0`` in every
draw and the posterior cannot switch labels.
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
    **Why these defaults.** ``fpr ~ Beta(1, 2)`` with ``u ~ Beta(1, 1)`` is exactly the uniform
    distribution over the oriented triangle ``0 < fpr < tpr < 1`` (the density of ``(fpr, u)`` is
    ``2 (1 - fpr)``, and ``d tpr / d u = 1 - fpr``), and uniform prevalences: every oriented channel
    is a priori equally plausible. In ``(fpr, tpr, prevalence)`` coordinates this prior is flat, so
    the posterior mode equals the maximum-likelihood (EM) estimate and ``fit_em`` / ``fit_map``
    agree with the frequentist reference. The prior is proper, so it also serves the prior
    predictive and simulation-based calibration. It is weakly informative in the sense that it
    only encodes the orientation constraint: it adds no pseudo-observations (the MAP is the MLE).

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
            value = getattr(self, name)
            try:
                scale = float(value)
            except (TypeError, ValueError):
                scale = float("nan")
            if not (np.isfinite(scale) and scale > 0):
                raise ValueError(f"`{name}` must be a finite Half-Normal scale > 0; got {value!r}.")
            object.__setattr__(self, name, scale)

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
