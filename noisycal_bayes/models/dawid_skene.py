"""Dawid-Skene channel models as plain NumPyro functions (DESIGN §4, paper §4 and Appendix F.1).

Every model samples oriented channels (``fpr``, ``u``; ``tpr = fpr + (1 - fpr) u``), a clean-label
probability per row, and adds the marginal log-likelihood of the responses with the latent clean
label summed out analytically (``logaddexp`` in :func:`noisycal_bayes.core.ds_loglik_rows`).

Rows are either compressed ``(group, response pattern)`` rows with ``counts`` (the likelihood costs
``O(n_patterns J)``, independent of the number of items; padding rows have count 0 and drop out)
or single items (``counts=None``). A compressed table that lists every (group, pattern) cell in a fixed
order (``grid=True``, :func:`noisycal_bayes.data.grid_patterns`) is evaluated without per-row gathers. Missing responses (-1) drop out of the likelihood.

With ``labels=None`` a model samples the prior predictive: clean labels ``y`` and complete
responses ``labels`` for the rows given by ``group``.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from ..core.likelihood import ds_loglik_rows, grid_loglik
from ..data.compress import all_patterns
from .priors import DEFAULT_PRIOR, Prior


def oriented_channels(n_annotators: int, prior: Prior):
    """Sample ``fpr`` and ``u`` (sites) and expose ``tpr`` and ``gap`` (deterministic sites).

    Returns ``(fpr, tpr)``, each of shape (n_annotators,).
    """
    with numpyro.plate("annotator", n_annotators):
        fpr = numpyro.sample("fpr", dist.Beta(*prior.fpr))
        u = numpyro.sample("u", dist.Beta(*prior.u))
    # gap = (1 - fpr) u > 0 in every draw: the orientation constraint is built into the parametrisation.
    gap = numpyro.deterministic("gap", (1 - fpr) * u)
    tpr = numpyro.deterministic("tpr", fpr + gap)
    return fpr, tpr


def responses(labels, group, probability, fpr, tpr, counts=None, *, grid: bool = False,
              record_loglik: bool = False):
    """Likelihood of observed responses, or prior-predictive responses when ``labels`` is None.

    ``probability`` is ``P(Y = 1)`` per group, shape (n_groups,); ``group`` (n_rows,) gives each row's group.
    With ``grid=True`` the rows are a grid table (:func:`noisycal_bayes.data.grid_patterns`: row
    ``g * 3**J + k`` holds pattern ``k`` of :func:`noisycal_bayes.data.all_patterns` in group ``g``), so the
    likelihood is evaluated per (group, pattern) cell without gathering by row (same values, faster).
    """
    if labels is None:
        with numpyro.plate("row", group.shape[0]):
            y = numpyro.sample("y", dist.Bernoulli(probs=probability[group]))
            rate = jnp.where(y[:, None] == 1, tpr, fpr)
            return numpyro.sample("labels", dist.Bernoulli(probs=rate).to_event(1))
    if grid:
        n_cells = probability.shape[0] * 3 ** fpr.shape[-1]
        if labels.shape[0] != n_cells:
            raise ValueError(f"grid=True needs the grid table of {n_cells} rows (n_groups * 3**n_annotators); "
                             f"got {labels.shape[0]} rows. Build it with noisycal_bayes.data.grid_patterns.")
        rows = grid_loglik(all_patterns(fpr.shape[-1]), fpr, tpr, probability).reshape(-1)
    else:
        rows = ds_loglik_rows(labels, group, fpr, tpr, probability)
    if record_loglik:
        numpyro.deterministic("log_likelihood", rows)
    total = jnp.sum(rows) if counts is None else jnp.sum(counts * rows)
    numpyro.factor("responses", total)
    return None


def grouped_dawid_skene(labels=None, group=None, counts=None, *, n_annotators: int, n_groups: int,
                        prior: Prior = DEFAULT_PRIOR, grid: bool = False, record_loglik: bool = False):
    """The paper's shared-channel model: ``Y_i ~ Bernoulli(prevalence[g(i)])``, channels shared by all groups.

    Parameters
    ----------
    labels : int array of shape (n_rows, n_annotators) or None
        Response patterns (0/1, -1 = missing). None samples the prior predictive.
    group : int array of shape (n_rows,)
        Group of each row, in ``0..n_groups-1``.
    counts : float array of shape (n_rows,) or None
        Number of items with each (group, pattern) row; None means one item per row.
    n_annotators, n_groups : int
        Static sizes.
    prior : Prior
    grid : bool, default False
        The rows are a grid table (:func:`noisycal_bayes.data.grid_patterns`, ``n_groups * 3**J`` rows):
        the same likelihood, evaluated per (group, pattern) cell, about 3x faster per NUTS gradient.
    record_loglik : bool
        Add a deterministic site ``log_likelihood`` of shape (n_rows,) (per row, not weighted by counts).

    Notes
    -----
    ``log p = sum_r c_r log[(1 - pi_g) prod_j P(A_rj | Y=0) + pi_g prod_j P(A_rj | Y=1)]`` with
    ``P(A = 1 | Y = 0) = fpr``, ``P(A = 1 | Y = 1) = tpr`` (paper Appendix F.1.2).
    """
    fpr, tpr = oriented_channels(n_annotators, prior)
    with numpyro.plate("group", n_groups):
        prevalence = numpyro.sample("prevalence", dist.Beta(*prior.prevalence))
    return responses(labels, group, prevalence, fpr, tpr, counts, grid=grid, record_loglik=record_loglik)


def dawid_skene(labels=None, group=None, counts=None, *, n_annotators: int, n_groups: int = 1,
                prior: Prior = DEFAULT_PRIOR, grid: bool = False, record_loglik: bool = False):
    """Marginal Dawid-Skene model: ``Y_i ~ Bernoulli(prevalence)`` with one scalar prevalence.

    Same arguments as :func:`grouped_dawid_skene`; ``group`` only fixes the number of rows for the prior
    predictive (its values are ignored) and ``n_groups`` must be 1. With two annotators this model is not
    identified (paper Appendix D.1): keep it as a labelled control.
    """
    if n_groups != 1:
        raise ValueError(f"the marginal model has one prevalence; got n_groups={n_groups}.")
    fpr, tpr = oriented_channels(n_annotators, prior)
    prevalence = numpyro.sample("prevalence", dist.Beta(*prior.prevalence))
    n_rows = (labels if labels is not None else group).shape[0]
    return responses(labels, jnp.zeros(n_rows, jnp.int32), prevalence[None], fpr, tpr, counts, grid=grid,
                     record_loglik=record_loglik)
