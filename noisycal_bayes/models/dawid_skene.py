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

**K classes** (Dawid & Skene 1979; DESIGN §8 "K classes"). Annotator ``j``'s channel is a row-stochastic confusion
matrix ``C[j, y, a] = P(A_j = a | Y = y)``, the clean label of item ``i`` has prior ``prevalence[g(i)]`` and is
summed out, ``log p(A_i) = logsumexp_y [log pi_{g(i), y} + sum_{r: i_r = i} log C[j_r, y, a_r]]``
(:func:`~noisycal_bayes.core.likelihood.class_log_joint`); a gold item contributes the term of its label.
:func:`dawid_skene_multiclass` has one prevalence, :func:`grouped_multiclass` one per score group; confusion rows
are Dirichlet (:class:`~noisycal_bayes.models.priors.MulticlassPrior`). The labelling is fixed by diagonal
dominance of the crowd's average confusion (:func:`~noisycal_bayes.core.starts.diagonally_dominant`), enforced by
the prior, the starts and a check of every draw rather than by the parametrisation. Why, and the two input
forms (:class:`~noisycal_bayes.core.tables.PatternTable`, :class:`~noisycal_bayes.core.tables.SparseTable`):
docs/methods.md. The pooled model is :func:`~noisycal_bayes.models.pooled.pooled_multiclass`; the NUTS
coordinates are in :mod:`noisycal_bayes.models.log_ratio`.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from ..core.likelihood import ds_loglik_rows, grid_loglik, multiclass_loglik_rows, tiny_log
from ..core.tables import PatternTable
from ..data.compress import all_patterns
from .priors import DEFAULT_MULTICLASS_PRIOR, DEFAULT_PRIOR, Prior


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


# ------------------------------------------------------------------------------------------------ K classes
def dirichlet_alpha(prior, n_classes: int):
    """Dirichlet concentrations of the confusion rows, (K, K): ``diagonal`` on the diagonal, ``off_diagonal`` off it."""
    eye = jnp.eye(n_classes)
    return prior.off_diagonal + (prior.diagonal - prior.off_diagonal) * eye


def add_class_likelihood(table, log_conf, log_prev, record_loglik):
    """The factor ``responses`` of a K-class model: the row log-likelihoods times the row counts, summed
    (a deterministic site ``log_likelihood`` per row too when ``record_loglik``)."""
    rows = multiclass_loglik_rows(table, log_conf, log_prev)
    if record_loglik:
        numpyro.deterministic("log_likelihood", rows)
    if isinstance(table, PatternTable):
        # Padding rows have count 0; where(...) keeps a -inf there (impossible padded gold row) from giving NaN.
        total = jnp.sum(jnp.where(table.counts > 0, table.counts * rows, 0.0))
    else:
        total = jnp.sum(rows)
    numpyro.factor("responses", total)


def _dirichlet_channels(n_annotators: int, n_classes: int, prior):
    alpha = dirichlet_alpha(prior, n_classes)
    return numpyro.sample("confusion", dist.Dirichlet(alpha).expand([n_annotators, n_classes]).to_event(2))


def group_prevalence(n_groups: int, n_classes: int, prior):
    """The site ``prevalence`` (G, K): one ``Dirichlet(prior.prevalence * 1_K)`` point per group."""
    conc = jnp.full(n_classes, 1.0) * prior.prevalence
    return numpyro.sample("prevalence", dist.Dirichlet(conc).expand([n_groups]).to_event(1))


def dawid_skene_multiclass(table, *, n_annotators: int, n_classes: int, n_groups: int = 1,
                           prior=DEFAULT_MULTICLASS_PRIOR, record_loglik: bool = False):
    """K-class Dawid-Skene with one class prevalence: ``Y_i ~ Categorical(prevalence)``.

    Parameters
    ----------
    table : PatternTable or SparseTable
        The data (module docstring); its groups are ignored (every row uses the one prevalence).
    n_annotators, n_classes : int
        Static sizes J and K.
    n_groups : int, default 1
        Must be 1 (accepted so that every model takes the same keywords).
    prior : MulticlassPrior or MulticlassPriorParams
    record_loglik : bool
        Add a deterministic site ``log_likelihood`` per row (per item for a SparseTable).

    Sites: ``confusion`` (J, K, K), ``prevalence`` (K,).
    """
    if n_groups != 1:
        raise ValueError(f"the marginal model has one prevalence; got n_groups={n_groups}.")
    confusion = _dirichlet_channels(n_annotators, n_classes, prior)
    prevalence = numpyro.sample("prevalence", dist.Dirichlet(jnp.full(n_classes, 1.0) * prior.prevalence))
    if isinstance(table, PatternTable):
        table = table._replace(group=jnp.zeros_like(table.group))
    else:
        table = table._replace(item_group=jnp.zeros_like(table.item_group))
    add_class_likelihood(table, tiny_log(confusion), tiny_log(prevalence[None]), record_loglik)


def grouped_multiclass(table, *, n_annotators: int, n_classes: int, n_groups: int,
                       prior=DEFAULT_MULTICLASS_PRIOR, record_loglik: bool = False):
    """K-class Dawid-Skene with a class prevalence per score group: ``Y_i ~ Categorical(prevalence[g(i)])``.

    Same arguments as :func:`dawid_skene_multiclass`; the table's groups lie in ``0..n_groups-1``.
    Sites: ``confusion`` (J, K, K), ``prevalence`` (G, K).
    """
    confusion = _dirichlet_channels(n_annotators, n_classes, prior)
    prevalence = group_prevalence(n_groups, n_classes, prior)
    add_class_likelihood(table, tiny_log(confusion), tiny_log(prevalence), record_loglik)
