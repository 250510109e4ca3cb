"""K-class Dawid-Skene channel models as plain NumPyro functions (DESIGN §8 "K classes"; issue 18).

Channel of annotator ``j``: a row-stochastic K x K confusion matrix, ``C[j, y, a] = P(A_j = a | Y = y)``.
The clean label ``Y_i`` of item ``i`` in score group ``g(i)`` has prior ``prevalence[g(i)]`` (a point of the
K-simplex) and is summed out in log space:

.. math::

    \\log p(A_i) = \\operatorname{logsumexp}_y \\Big[\\log \\pi_{g(i), y}
        + \\sum_{r: i_r = i} \\log C_{j_r, y, a_r}\\Big],

and an item with a known clean label (``gold_i = y``, an observed latent label) contributes the single term
``log pi_{g, y} + sum_r log C[j_r, y, a_r]``. Missing responses drop out; a repeated response of one
annotator is one more conditionally independent factor.

Models (sites in brackets):

==========================  =====================================================================
``dawid_skene_multiclass``  one prevalence (``prevalence`` (K,)); ``confusion`` (J, K, K), Dirichlet rows
``grouped_multiclass``      one prevalence per score group (``prevalence`` (G, K)); same channels
``pooled_multiclass``       channels drawn around a population (non-centred, below); prevalence per group
==========================  =====================================================================

Priors (:class:`MulticlassPrior`): row ``y`` of ``C_j`` is ``Dirichlet(alpha_y)`` with ``alpha_{y,y} =
diagonal`` and ``alpha_{y,a} = off_diagonal`` (a ≠ y), so the prior favours the diagonal; prevalences are
``Dirichlet(prevalence * 1_K)``. The pooled variant writes each row in log-odds against its diagonal entry,
``eta_{j,y,a} = log(C[j,y,a] / C[j,y,y]) = mu_{y,a} + sigma z_{j,y,a}`` (a ≠ y; ``eta_{j,y,y} = 0``, which
removes the softmax's shift redundancy) with ``mu_{y,a} ~ Normal(population_loc, population_scale)``,
``sigma ~ HalfNormal(population_spread)``, ``z ~ Normal(0, 1)``; ``C[j, y] = softmax(eta_{j,y})``. The
population's typical confusion is ``softmax([0 at y, mu_y])`` (deterministic site ``population_confusion``).

**Orientation (label switching).** The likelihood is invariant under a relabelling of the clean classes
(permute the rows of every ``C_j`` and the prevalence entries together). The labelling is fixed by diagonal
dominance of the crowd's average confusion matrix, ``mean_j C[j, y, y] > mean_j C[j, y, a]`` for all ``a ≠ y``
(each class is the one the crowd names most often when it is the truth). It is enforced by the Dirichlet
prior's pull towards the diagonal, by starting every chain at a diagonal-dominant MAP-EM point, and by a
post-hoc check of every draw (:func:`diagonally_dominant`, a warning naming the fraction of violating
draws); it is not a hard constraint of the parametrisation: when the crowd is better than chance the
relabelled modes are separated by regions of negligible posterior mass, so chains started in the
dominant mode stay there, whereas a hard constraint on the average of J matrices would couple every
annotator's rows and put a boundary inside the sampler's space (NUTS degrades at such walls).

**Sampler coordinates.** :func:`grouped_multiclass_log_ratio` is :func:`grouped_multiclass` written in scaled
additive log-ratio coordinates (each row's log-odds against a reference entry, ``loc + scale * u``, with the
Dirichlet densities carried over by their Jacobians): the same prior and posterior on ``C`` and ``pi``, in
coordinates where the posterior is close to standard normal (:func:`log_ratio_scaling`). ``fit_nuts_multiclass``
samples it by default.

**Two input forms** (:class:`PatternTable`, :class:`SparseTable`): compressed ``(group, gold, response
pattern)`` rows with counts, patterns in ``{-1, 0, ..., K-1}^J`` (at most ``G (K+1)^J (K+1)`` distinct rows,
so a gradient costs ``O(n_rows J K)`` whatever the number of items; zero-count padding rows drop out); or the
``(item, annotator, label)`` triples sorted by item, with segment sums over items (``O(n_responses K)``, no
items x annotators array), for many annotators.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from ..core.tables import PatternTable, SparseTable

__all__ = ["MULTICLASS_MODELS", "MulticlassPrior", "MulticlassPriorParams", "class_log_joint", "compress_multiclass",
           "dawid_skene_multiclass", "diagonally_dominant", "grouped_multiclass", "grouped_multiclass_log_ratio",
           "LogRatioScaling", "log_ratio_coordinates", "log_ratio_point", "log_ratio_scaling", "multiclass_loglik_rows", "pooled_multiclass",
           "population_confusion", "sparse_table"]

# Probabilities of exactly 0 (an empty row entry at a boundary draw) would give log 0 = -inf and NaN gradients;
# the clip changes no likelihood value measurably.
_TINY = 1e-300


# ------------------------------------------------------------------------------------------------ priors
class MulticlassPriorParams(NamedTuple):
    """The numbers of a :class:`MulticlassPrior` as a pytree (traced inputs of a compiled sampler)."""

    diagonal: object
    off_diagonal: object
    prevalence: object
    population_loc: object
    population_scale: object
    population_spread: object


def _positive(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"`{name}` must be a finite number > 0; got {value!r}.")
    return v


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


def _alpha(prior, n_classes: int):
    eye = jnp.eye(n_classes)
    return prior.off_diagonal + (prior.diagonal - prior.off_diagonal) * eye


# ------------------------------------------------------------------------------------------------ inputs
def sparse_table(item, annotator, label, item_group, gold=None) -> SparseTable:
    """A :class:`SparseTable` from NumPy arrays (sorted by item if they are not; ``gold=None``: all unknown)."""
    item = np.asarray(item, np.int32)
    order = np.argsort(item, kind="stable") if item.size > 1 and np.any(np.diff(item) < 0) else slice(None)
    item_group = np.asarray(item_group, np.int32)
    gold = np.full(item_group.shape[0], -1, np.int32) if gold is None else np.asarray(gold, np.int32)
    return SparseTable(item[order], np.asarray(annotator, np.int32)[order], np.asarray(label, np.int32)[order],
                       item_group, gold)


def compress_multiclass(item, annotator, label, item_group, gold, *, n_items: int, n_annotators: int,
                        n_classes: int, pad_to: int | None = None):
    """``(PatternTable, inverse)``: distinct ``(group, gold, pattern)`` rows with counts; ``inverse`` (n_items,).

    One response per (item, annotator) pair is required (a dense pattern); the caller uses the sparse form
    otherwise. Rows are padded with zero-count rows up to ``pad_to`` (so that data sets of one design share a
    compiled sampler). ``inverse[i]`` is the row of item ``i``.
    """
    k1 = n_classes + 1
    dense = np.full((n_items, n_annotators), -1, np.int64)
    dense[np.asarray(item), np.asarray(annotator)] = np.asarray(label)
    gold = np.full(n_items, -1, np.int64) if gold is None else np.asarray(gold, np.int64)
    # One int64 key per item: group, then gold + 1, then each response + 1, in base K + 1 (the caller checks
    # that G (K+1)^(J+1) fits in int64).
    key = np.asarray(item_group, np.int64) * k1 + (gold + 1)
    for j in range(n_annotators):
        key = key * k1 + (dense[:, j] + 1)
    uniq, first, inverse, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    n_rows = uniq.size
    size = n_rows if pad_to is None else max(int(pad_to), n_rows)
    patterns = np.zeros((size, n_annotators), np.int32)
    patterns[:n_rows] = dense[first]
    group = np.zeros(size, np.int32)
    group[:n_rows] = np.asarray(item_group)[first]
    gold_rows = np.full(size, -1, np.int32)
    gold_rows[:n_rows] = gold[first]
    cnt = np.zeros(size, np.float64)
    cnt[:n_rows] = counts
    return PatternTable(patterns, group, gold_rows, cnt), inverse.reshape(-1).astype(np.int64)


# ------------------------------------------------------------------------------------------------ likelihood
def class_log_joint(table, log_confusion, log_prevalence):
    """``log P(Y = y, A_row)`` per row (pattern or item) and class, shape (n_rows, K); ``-inf`` off a gold label.

    Parameters
    ----------
    table : PatternTable or SparseTable
    log_confusion : array of shape (J, K, K)
        ``log C[j, y, a]``.
    log_prevalence : array of shape (G, K)

    Notes
    -----
    Patterns: ``sum_j log C[j, y, a_j]`` is one product of the one-hot responses (R, J K) with the stacked
    ``log C[j, y, a]`` (J K, K) (missing responses are all-zero rows of the one-hot, so they drop out).
    Responses: ``log C[j_r, :, a_r]`` (n_responses, K) summed over each item's run of responses (sorted:
    ``indices_are_sorted=True``).
    """
    n_ann, k, _ = log_confusion.shape
    if isinstance(table, PatternTable):
        # One gather of log C[j, :, a_j] per annotator (a_j = -1, missing, adds 0), not a one-hot matrix product
        # (the same numbers, slower inside the NUTS loop: docs/performance.md, K-class NUTS section).
        ll = 0.0
        for j in range(n_ann):
            a = table.patterns[:, j]
            ll = ll + jnp.where((a >= 0)[:, None], log_confusion[j].T[jnp.maximum(a, 0)], 0.0)
        group, gold = table.group, table.gold
    else:
        per_response = log_confusion[table.annotator, :, table.label]  # (n_responses, K)
        ll = jax.ops.segment_sum(per_response, table.item, num_segments=table.item_group.shape[0],
                                 indices_are_sorted=True)
        group, gold = table.item_group, table.gold
    joint = ll + log_prevalence[group]
    # A gold item: only its known class has positive probability (observed latent label).
    keep = (gold[:, None] < 0) | (gold[:, None] == jnp.arange(k))
    return jnp.where(keep, joint, -jnp.inf)


def multiclass_loglik_rows(table, log_confusion, log_prevalence):
    """``log P(A_row)`` (``log P(Y = gold, A_row)`` for gold rows) per row, shape (n_rows,) (not times counts)."""
    return jax.nn.logsumexp(class_log_joint(table, log_confusion, log_prevalence), axis=-1)


def _log(p):
    p = jnp.asarray(p)
    # The floor in p's own type: 1e-300 would round to 0 in float32 (log 0 = -inf).
    tiny = _TINY if p.dtype == jnp.float64 else float(jnp.finfo(p.dtype).tiny)
    return jnp.log(jnp.clip(p, tiny, 1.0))


def _add_likelihood(table, log_conf, log_prev, record_loglik):
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
    alpha = _alpha(prior, n_classes)
    return numpyro.sample("confusion", dist.Dirichlet(alpha).expand([n_annotators, n_classes]).to_event(2))


def _group_prevalence(n_groups: int, n_classes: int, prior):
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
    _add_likelihood(table, _log(confusion), _log(prevalence[None]), record_loglik)


def grouped_multiclass(table, *, n_annotators: int, n_classes: int, n_groups: int,
                       prior=DEFAULT_MULTICLASS_PRIOR, record_loglik: bool = False):
    """K-class Dawid-Skene with a class prevalence per score group: ``Y_i ~ Categorical(prevalence[g(i)])``.

    Same arguments as :func:`dawid_skene_multiclass`; the table's groups lie in ``0..n_groups-1``.
    Sites: ``confusion`` (J, K, K), ``prevalence`` (G, K).
    """
    confusion = _dirichlet_channels(n_annotators, n_classes, prior)
    prevalence = _group_prevalence(n_groups, n_classes, prior)
    _add_likelihood(table, _log(confusion), _log(prevalence), record_loglik)


def _insert_diagonal_zero(off, n_classes: int):
    """(..., K, K-1) log-odds against the diagonal -> (..., K, K) with 0 on the diagonal."""
    k = n_classes
    ext = jnp.concatenate([off, jnp.zeros(off.shape[:-1] + (1,), off.dtype)], axis=-1)
    # Column a of row y reads entry a (a < y), a - 1 (a > y) of the off-diagonal list, or the appended 0 (a == y).
    a, y = np.arange(k)[None, :], np.arange(k)[:, None]
    index = np.where(a == y, k - 1, np.where(a < y, a, a - 1))
    return jnp.take_along_axis(ext, jnp.broadcast_to(index, off.shape[:-2] + (k, k)), axis=-1)


def population_confusion(mu):
    """The population's typical confusion ``softmax([0 at y, mu_y])`` per row, from ``mu`` (..., K, K-1)."""
    k = mu.shape[-2]
    return jax.nn.softmax(_insert_diagonal_zero(jnp.asarray(mu), k), axis=-1)


def pooled_multiclass(table, *, n_annotators: int, n_classes: int, n_groups: int = 1,
                      prior=DEFAULT_MULTICLASS_PRIOR, record_loglik: bool = False):
    """K-class Dawid-Skene with partially pooled confusion matrices (many annotators, few labels each).

    ``log(C[j,y,a] / C[j,y,y]) = mu_{y,a} + sigma z_{j,y,a}`` (non-centred; module docstring), prevalence per
    group as :func:`grouped_multiclass` (``n_groups = 1``: one prevalence).

    Sites: ``mu`` (K, K-1), ``sigma`` (), ``z`` (J, K, K-1), ``prevalence`` (G, K); deterministic
    ``confusion`` (J, K, K) and ``population_confusion`` (K, K).
    """
    k = n_classes
    mu = numpyro.sample("mu", dist.Normal(prior.population_loc, prior.population_scale).expand([k, k - 1]).to_event(2))
    sigma = numpyro.sample("sigma", dist.HalfNormal(prior.population_spread))
    z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([n_annotators, k, k - 1]).to_event(3))
    eta = _insert_diagonal_zero(mu + sigma * z, k)
    # log-softmax directly: the log confusion without an exp / log round trip.
    log_conf = jax.nn.log_softmax(eta, axis=-1)
    numpyro.deterministic("confusion", jnp.exp(log_conf))
    numpyro.deterministic("population_confusion", population_confusion(mu))
    prevalence = _group_prevalence(n_groups, k, prior)
    _add_likelihood(table, log_conf, _log(prevalence), record_loglik)


# ------------------------------------------------------------------------------------------------ log-ratio form
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


def log_ratio_scaling(confusion_counts, prevalence_counts, prior=DEFAULT_MULTICLASS_PRIOR) -> LogRatioScaling:
    """The scaling that makes each coordinate's approximate posterior standard normal.

    Parameters
    ----------
    confusion_counts : array of shape (J, K, K)
        Expected counts ``sum_r [j_r = j, a_r = a] P(Y_{i_r} = y | A)`` at some point (an E-step).
    prevalence_counts : array of shape (G, K)
        Expected clean-label counts per group at the same point.
    prior : MulticlassPrior

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
    a_conf = np.maximum(n_conf, 0.0) + (prior.pseudo_counts(k) + 1.0)
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
    k = np.shape(u)[-2]
    eta = scaling.conf_loc + scaling.conf_scale * u
    # Off-diagonal log-odds plus a 0 on the diagonal, then log-softmax (shift-invariant, no exp/log round trip).
    log_c = _log_softmax(xp, _insert_diagonal_zero(eta, k) if xp is jnp else _insert_zero_np(eta))
    xi = scaling.prev_loc + scaling.prev_scale * v
    ext = xp.concatenate([xi, xp.zeros(xi.shape[:-1] + (1,), xi.dtype)], axis=-1)
    index = xp.broadcast_to(scaling.prev_index, ext.shape)
    return log_c, _log_softmax(xp, xp.take_along_axis(ext, index, axis=-1))


def _log_softmax(xp, x):
    if xp is jnp:
        return jax.nn.log_softmax(x, axis=-1)
    m = x.max(axis=-1, keepdims=True)  # shift by the row maximum: exp never overflows
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def _insert_zero_np(off):
    k = off.shape[-2]
    a, y = np.arange(k)[None, :], np.arange(k)[:, None]
    index = np.where(a == y, k - 1, np.where(a < y, a, a - 1))
    ext = np.concatenate([off, np.zeros(off.shape[:-1] + (1,))], axis=-1)
    return np.take_along_axis(ext, np.broadcast_to(index, off.shape[:-2] + (k, k)), axis=-1)


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
    alpha = jnp.broadcast_to(_alpha(prior, k), (n_annotators, k, k))
    numpyro.factor("confusion_prior", _dirichlet_log_ratio_density(log_conf, alpha, scaling.conf_scale))
    beta = jnp.full((n_groups, k), 1.0) * prior.prevalence
    numpyro.factor("prevalence_prior", _dirichlet_log_ratio_density(log_prev, beta, scaling.prev_scale))
    _add_likelihood(table, log_conf, log_prev, record_loglik)


#: Model functions by the name used in ``model=`` of ``fit_nuts_multiclass``.
MULTICLASS_MODELS = {"dawid_skene": dawid_skene_multiclass, "grouped": grouped_multiclass,
                     "pooled": pooled_multiclass}


def diagonally_dominant(confusion) -> np.ndarray:
    """Whether the annotators' average confusion is diagonally dominant, per draw.

    Parameters
    ----------
    confusion : array of shape (..., J, K, K)

    Returns
    -------
    ndarray of bool, shape (...)
        ``mean_j C[j, y, y] > mean_j C[j, y, a]`` for every row ``y`` and every ``a != y`` (the orientation
        constraint of the module docstring).

    Examples
    --------
    >>> c = np.array([[[0.8, 0.2], [0.3, 0.7]]])
    >>> bool(diagonally_dominant(c)), bool(diagonally_dominant(c[:, ::-1]))
    (True, False)
    """
    avg = np.asarray(confusion, np.float64).mean(axis=-3)
    k = avg.shape[-1]
    diag = np.diagonal(avg, axis1=-2, axis2=-1)
    off = np.where(np.eye(k, dtype=bool), -np.inf, avg)
    return np.all(diag > off.max(axis=-1), axis=-1)
