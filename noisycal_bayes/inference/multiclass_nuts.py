"""K-class channel models fitted by MAP-EM and by NUTS (issue 18 item 2; models in :mod:`noisycal_bayes.models.multiclass`).

``fit_map_multiclass`` finds the posterior mode of the Dawid-Skene / grouped K-class model by EM with the
Dirichlet prior's pseudo-counts: :func:`~noisycal_bayes.inference.fit_em_multiclass` with ``prior=`` the model
prior's concentrations, from the majority-vote start. ``fit_nuts_multiclass`` samples the posterior with the project's compiled
NUTS driver (:mod:`noisycal_bayes.inference._sampler`), started at that mode, and returns a
:class:`MulticlassPosterior` with diagnostics (R-hat, bulk ESS, tree depth, divergences) and an ArviZ
conversion.

The data are duck-typed: any object with ``responses`` (item, annotator, label triples, labels in
``0..K-1``), ``n_items``, ``n_annotators``, ``n_classes``, ``probs`` ((n, K) or None), ``gold`` ((n,) with -1
unknown, or None) and ``classes`` (:class:`noisycal_bayes.data.MulticlassAnnotationSet` is the intended one).

Likelihood path (``path=``): ``"patterns"`` compresses the items into distinct (group, gold, response
pattern) rows with counts (``G (K+1)^J`` possible patterns; a NUTS gradient then costs the same for 1e3 or
1e6 items), ``"sparse"`` sums the responses per item (segment sums; for many annotators), ``"auto"`` takes
patterns when every (item, annotator) pair has at most one response, ``J <= 8`` and the distinct rows are
at most half the items, else sparse.
"""
from __future__ import annotations

import contextlib
import dataclasses
import warnings
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_positive_int
from ..core import x64
from ..core.tables import PatternTable, SparseTable
from ..core.likelihood import class_log_joint, multiclass_loglik_rows
from ..core.starts import diagonally_dominant
from ..data.compress import compress_multiclass
from ..models import MULTICLASS_MODELS
from ..models.log_ratio import LogRatioScaling, grouped_multiclass_log_ratio, log_ratio_point, log_ratio_scaling
from ..models.priors import DEFAULT_MULTICLASS_PRIOR, MulticlassPrior, MulticlassPriorParams
from ..models.result import MAX_LOGLIK_VALUES, _arviz_major
from ..warnings import ConvergenceWarning, IdentifiabilityWarning, PriorWarning
from ._sampler import NutsProgram, chain_keys, choose_chain_method, chunk_size, get_program, parallel_width
from .mcmc import check_mcmc, mcmc_diagnostics
from .em import fit_em_multiclass

__all__ = ["MulticlassMAPFit", "MulticlassPosterior", "fit_map_multiclass", "fit_nuts_multiclass"]

MULTICLASS_MODEL_NAMES = tuple(MULTICLASS_MODELS)
PATHS = ("auto", "patterns", "sparse")
PRECISIONS = ("auto", "float32", "float64")
PARAMETRISATIONS = ("log_ratio", "simplex")
_REQUIRED = ("responses", "n_items", "n_annotators", "n_classes", "probs", "gold", "classes")
# Starting values are kept this far inside the simplex: on its boundary the sampler's unconstrained
# (stick-breaking) coordinates are infinite.
_START_FLOOR = 1e-3
# Patterns path only for few annotators: (K+1)^J keys and the one-hot (rows, J K) stay small.
_MAX_PATTERN_ANNOTATORS = 8


# ------------------------------------------------------------------------------------------------ validation
def _check_data(data, func: str):
    """``(item, annotator, label, gold)`` as int arrays, validated against the duck-typed data's sizes."""
    missing = [a for a in _REQUIRED if not hasattr(data, a)]
    if missing:
        raise ValueError(f"{func}: `data` must be a MulticlassAnnotationSet (or an object with {list(_REQUIRED)}); "
                         f"{type(data).__name__} has no {missing}.")
    n, n_ann, k = int(data.n_items), int(data.n_annotators), int(data.n_classes)
    if k < 2:
        raise ValueError(f"{func}: `n_classes` must be at least 2; got {k}.")
    if n < 1 or n_ann < 1:
        raise ValueError(f"{func}: the data hold {n} items and {n_ann} annotators; need at least one of each.")
    item, ann, lab = (np.asarray(a) for a in data.responses)
    if item.size == 0:
        raise ValueError(f"{func}: the data hold no responses.")
    bad = np.flatnonzero((lab < 0) | (lab >= k))
    if bad.size:
        raise ValueError(f"{func}: labels must lie in 0..{k - 1}; got {lab[bad[:5]].tolist()} at responses "
                         f"{bad[:5].tolist()}.")
    if item.min() < 0 or item.max() >= n or ann.min() < 0 or ann.max() >= n_ann:
        raise ValueError(f"{func}: response indices out of range (items 0..{n - 1}, annotators 0..{n_ann - 1}).")
    gold = data.gold
    if gold is None:
        gold = np.full(n, -1, np.int32)
    gold = np.asarray(gold)
    if gold.shape != (n,):
        raise ValueError(f"{func}: `gold` must have shape ({n},); got {gold.shape}.")
    bad = np.flatnonzero((gold < -1) | (gold >= k))
    if bad.size:
        raise ValueError(f"{func}: gold labels must be -1 (unknown) or in 0..{k - 1}; got {gold[bad[:5]].tolist()} "
                         f"at items {bad[:5].tolist()}.")
    return item.astype(np.int32), ann.astype(np.int32), lab.astype(np.int32), gold.astype(np.int32)


def _check_model(model, func: str) -> str:
    if model not in MULTICLASS_MODEL_NAMES:
        raise ValueError(f"{func}: `model` must be one of {list(MULTICLASS_MODEL_NAMES)}; got {model!r}.")
    return model


def _check_prior(prior, func: str) -> MulticlassPrior:
    if prior is None:
        return DEFAULT_MULTICLASS_PRIOR
    if not isinstance(prior, MulticlassPrior):
        raise ValueError(f"{func}: `prior` must be None or a MulticlassPrior; got {type(prior).__name__}.")
    return prior


def _resolve_groups(data, model: str, groups, func: str):
    """``(index (n,) int32, n_groups)``: one group for the marginal model; else ``groups`` or the score groups."""
    n = int(data.n_items)
    if model == "dawid_skene":
        return np.zeros(n, np.int32), 1
    if groups is None:
        if data.probs is None:
            return np.zeros(n, np.int32), 1
        try:
            from ..core import score_groups
        except ImportError:  # the core helper of issue 18 is not installed in this tree
            raise ValueError(f"{func}: pass `groups` (an int group per item); the default score groups need "
                             "noisycal_bayes.core.score_groups.") from None
        index = np.asarray(score_groups(np.asarray(data.probs)), np.int64)
        return index.astype(np.int32), int(index.max()) + 1
    index = np.asarray(groups)
    if index.shape != (n,) or not np.issubdtype(index.dtype, np.integer):
        raise ValueError(f"{func}: `groups` must be an int array of shape ({n},) (a score group per item); got "
                         f"{index.dtype} of shape {index.shape}.")
    bad = np.flatnonzero(index < 0)
    if bad.size:
        raise ValueError(f"{func}: `groups` must be >= 0; got {index[bad[:5]].tolist()} at items {bad[:5].tolist()}.")
    return index.astype(np.int32), int(index.max()) + 1


def _has_repeats(item, ann, n_ann) -> bool:
    key = item.astype(np.int64) * n_ann + ann
    return bool(np.unique(key).size < key.size)


def _build_tables(item, ann, lab, gold, index, *, n_groups, n_items, n_annotators, n_classes, path, func):
    """``(table for the likelihood, sparse table, path used)``."""
    sparse = SparseTable(*_sorted_responses(item, ann, lab), index, gold)
    feasible = _patterns_feasible(item, ann, path=path, func=func, n_groups=n_groups, n_annotators=n_annotators,
                                  n_classes=n_classes)
    if path == "sparse" or (path == "auto" and not feasible):
        return sparse, sparse, "sparse"
    table, _ = compress_multiclass(item, ann, lab, index, gold, n_items=n_items, n_annotators=n_annotators,
                                   n_classes=n_classes)
    n_rows = int(np.count_nonzero(table.counts))
    if path == "auto" and n_rows > n_items / 2:
        return sparse, sparse, "sparse"  # compression does not pay
    # Padded to a power of two: data sets of one design (e.g. SBC replicates) share one compiled sampler.
    size = max(16, 1 << (n_rows - 1).bit_length())
    table, _ = compress_multiclass(item, ann, lab, index, gold, n_items=n_items, n_annotators=n_annotators,
                                   n_classes=n_classes, pad_to=size)
    return table, sparse, "patterns"


def _patterns_feasible(item, ann, *, path, func, n_groups, n_annotators, n_classes) -> bool:
    """Whether the responses fit the pattern path; ValueError for an unknown ``path`` or ``"patterns"`` when they
    do not."""
    if path not in PATHS:
        raise ValueError(f"{func}: `path` must be one of {list(PATHS)}; got {path!r}.")
    # Python ints: exact at any number of annotators (a float (K + 1)^(J + 1) overflows for a crowd).
    fits_key = n_groups * (n_classes + 1) ** (n_annotators + 1) < 2 ** 62
    feasible = (fits_key and n_annotators <= _MAX_PATTERN_ANNOTATORS and not _has_repeats(item, ann, n_annotators))
    if path == "patterns" and not feasible:
        raise ValueError(f"{func}: path='patterns' needs one response per (item, annotator) pair and at most "
                         f"{_MAX_PATTERN_ANNOTATORS} annotators; use path='sparse' (or 'auto').")
    return feasible


def _sorted_responses(item, ann, lab):
    if item.size > 1 and np.any(np.diff(item) < 0):
        order = np.argsort(item, kind="stable")
        return item[order], ann[order], lab[order]
    return item, ann, lab


def _table_args(table):
    return tuple(np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a, np.int32)
                 for a in table)


# ------------------------------------------------------------------------------------------------ MAP-EM
@dataclass(frozen=True, eq=False)
class MulticlassMAPFit:
    """Posterior mode of a K-class channel model (``fit_map_multiclass``); the attribute names of
    ``MulticlassEMFit``.

    Attributes
    ----------
    confusion : ndarray of shape (n_annotators, K, K)
        ``confusion[j, y, a] = P(A_j = a | Y = y)``.
    prevalence : ndarray of shape (n_groups, K)
    groups : ndarray of shape (n_items,), int32
    n_groups : int
    log_likelihood : float
        ``log p(A | theta)`` at the mode (gold items: ``log p(Y = gold, A)``).
    log_posterior : float
        ``log p(A | theta) + log p(theta)`` in simplex coordinates (up to the Dirichlet normalisers).
    n_iter : int
    converged : bool
        The EM stopping rule was met within ``max_iter``.
    path : {"patterns", "sparse"}
        The path the EM ran on (:func:`~noisycal_bayes.inference.fit_em_multiclass`'s ``path``).
    model : str
    classes : tuple
    warnings : tuple of str
    """

    confusion: np.ndarray
    prevalence: np.ndarray
    groups: np.ndarray
    n_groups: int
    log_likelihood: float
    log_posterior: float
    n_iter: int
    converged: bool
    path: str
    model: str
    classes: tuple
    warnings: tuple = ()

    def clean_label_probability(self, data) -> np.ndarray:
        """``P(Y_i = y | A_i)`` at the mode, shape (n_items, K); gold items are one-hot."""
        item, ann, lab, gold = _check_data(data, "clean_label_probability")
        table = SparseTable(*_sorted_responses(item, ann, lab), self.groups, gold)
        with x64():
            lj = class_log_joint(table, jnp.log(jnp.asarray(self.confusion)), jnp.log(jnp.asarray(self.prevalence)))
            return np.asarray(jax.nn.softmax(lj, axis=-1))


def _log_kernels(confusion, prevalence, conf_pc, prev_pc) -> float:
    """``sum (alpha - 1) log C + sum (beta - 1) log pi``: the Dirichlet log kernels in simplex coordinates."""
    log_c = np.log(np.clip(np.asarray(confusion, np.float64), 1e-300, 1.0))
    log_p = np.log(np.clip(np.asarray(prevalence, np.float64), 1e-300, 1.0))
    # 0 * log 0 = 0: a zero pseudo-count contributes nothing even where the estimate is 0.
    return float(np.sum(np.where(conf_pc > 0, conf_pc * log_c, 0.0)) + np.sum(np.where(prev_pc > 0, prev_pc * log_p,
                                                                                      0.0)))


def _orientation_note(confusion, func: str, what: str) -> str | None:
    ok = diagonally_dominant(confusion)
    frac_bad = float(1.0 - np.mean(ok))
    if frac_bad == 0.0:
        return None
    msg = (f"{func}: the annotators' average confusion matrix is not diagonally dominant in {frac_bad:.1%} of the "
           f"{what}: the class labelling (orientation) is not fixed there, or the crowd confuses some class with "
           "another more often than it names it. Check the fit's confusion matrices; add gold items or annotators.")
    return msg


def fit_map_multiclass(data, *, model: str = "grouped", groups=None, prior=None, path: str = "auto",
                       max_iter: int = 5000, tol: float = 1e-8) -> MulticlassMAPFit:
    """Posterior mode of the K-class Dawid-Skene model (``"dawid_skene"``) or its grouped version, by MAP-EM.

    Parameters
    ----------
    data : MulticlassAnnotationSet
        Or any object with ``responses``, ``n_items``, ``n_annotators``, ``n_classes``, ``probs``, ``gold``,
        ``classes`` (module docstring).
    model : {"grouped", "dawid_skene"}, default "grouped"
        (The pooled model has no useful mode in its own coordinates; sample it with
        :func:`fit_nuts_multiclass`.)
    groups : int array of shape (n_items,) or None
        Score group of each item (``G = max + 1`` groups, empty ones allowed). None: the score groups of
        ``noisycal_bayes.core.score_groups(data.probs)`` (predicted class x top-probability
        quantile), or one group without ``probs``. Ignored by ``"dawid_skene"``.
    prior : MulticlassPrior or None
        None: :class:`~noisycal_bayes.models.multiclass.MulticlassPrior` defaults. Its concentrations must be
        >= 1 (an interior mode, closed-form M-step).
    path : {"auto", "patterns", "sparse"}
        Compressed (group x pattern) counts or responses (:func:`~noisycal_bayes.inference.fit_em_multiclass`;
        ``"auto"`` chooses as it does). ``"patterns"`` with gold labels runs on responses, where gold items enter
        as observed clean labels. The same mode either way, to rounding.
    max_iter : int, default 5000
    tol : float, default 1e-8
        Converged when no probability changes by more than ``tol`` in an iteration and the log posterior by at
        most ``tol (1 + |objective|)`` (fit_em_multiclass's rule 2).

    Returns
    -------
    MulticlassMAPFit

    Raises
    ------
    ValueError
        Bad data, model, groups, path or prior (a concentration below 1), or model="pooled"; fewer than two
        annotators, or an annotator without labels (fit_em_multiclass's checks).

    Warns
    -----
    ConvergenceWarning
        ``max_iter`` reached.
    IdentifiabilityWarning
        The mode's average confusion is not diagonally dominant (orientation, see
        :mod:`noisycal_bayes.models.multiclass`); two annotators and one group (not identified).
    SmallGapWarning
        Annotators with a near-singular fitted confusion matrix.

    Notes
    -----
    Maximises ``log p(A | C, pi) + sum (alpha - 1) log C + (beta - 1) log pi`` over the simplices; EM
    (Dawid & Skene 1979) with the Dirichlet pseudo-counts added to the expected counts in the M-step:
    ``C[j, y, a] = (sum_r [j_r = j, a_r = a] T_{i_r y} + alpha_{ya} - 1) / (row total)``,
    ``pi[g, y] = (sum_{i in g} T_iy + beta - 1) / (group total)``. This is
    ``fit_em_multiclass(data, model=model, groups=groups, prior=(alpha, beta), n_starts=0)``: the iterations start
    from the vote share of each item (majority-vote-like, which leads to the diagonal-dominant mode), and a mode
    whose crowd-average confusion is not diagonally dominant is relabelled when a relabelling makes it so
    (fit_em_multiclass's rule 3). K = 2 gives the binary Dawid-Skene EM.
    """
    func = "fit_map_multiclass"
    model = _check_model(model, func)
    if model == "pooled":
        raise ValueError(f"{func}: the pooled model has no useful posterior mode in its own coordinates (its density "
                         "grows without bound as the spread goes to 0); use fit_nuts_multiclass(model='pooled'), or "
                         "model='grouped' for a point fit.")
    prior = _check_prior(prior, func)
    if min(prior.diagonal, prior.off_diagonal, prior.prevalence) < 1:
        raise ValueError(f"{func}: MAP-EM needs Dirichlet concentrations >= 1 (an interior mode); got diagonal="
                         f"{prior.diagonal}, off_diagonal={prior.off_diagonal}, prevalence={prior.prevalence}.")
    max_iter = check_positive_int(max_iter, name="max_iter")
    item, ann, lab, gold = _check_data(data, func)
    index, n_groups = _resolve_groups(data, model, groups, func)
    sizes = dict(n_annotators=int(data.n_annotators), n_classes=int(data.n_classes), n_groups=n_groups)
    _patterns_feasible(item, ann, path=path, func=func, **sizes)
    return _map_fit(data, None, path, index, model, prior, sizes, max_iter=max_iter, tol=float(tol), func=func)


def _map_fit(data, table, used, index, model, prior, sizes, *, max_iter, tol, func, stacklevel=3, engine="jax"):
    """The MAP-EM fit as a :class:`MulticlassMAPFit`.

    ``engine="jax"``: :func:`~noisycal_bayes.inference.fit_em_multiclass` with the prior's concentrations, from the
    vote start alone (``n_starts=0``); ``used`` is the path asked for (``"auto"``, ``"patterns"`` or ``"sparse"``;
    ``"patterns"`` runs on responses when there are gold labels, which fit_em_multiclass's pattern counts do not
    hold) and ``table`` is not read. ``engine="numpy"``: :func:`_np_map_em` on the compressed ``table`` (the NUTS
    start: the same iterations with no JAX loop to compile).
    """
    k = sizes["n_classes"]
    conf_pc, prev_pc = np.asarray(prior.pseudo_counts(k), np.float64), prior.prevalence - 1.0
    if engine == "numpy":
        conf, prev, ll, _, it, ok = _np_map_em(table, prior, max_iter=max_iter, tol=tol, **sizes)
        notes = [] if ok else [(ConvergenceWarning, f"{func}: EM stopped after {max_iter} iterations with "
                                                    f"probabilities still moving by more than {tol}; raise `max_iter`.")]
    else:
        gold = getattr(data, "gold", None)
        has_gold = gold is not None and bool(np.any(np.asarray(gold) >= 0))
        path = "sparse" if used == "patterns" and has_gold else used
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                fit = fit_em_multiclass(data, model=model, groups=index if model == "grouped" else None, n_starts=0,
                                        max_iter=max_iter, tol=tol, prior=(conf_pc + 1.0, prior.prevalence),
                                        path=path)
            except ValueError as exc:  # its data checks, in this function's name
                raise ValueError(str(exc).replace("fit_em_multiclass:", f"{func}:", 1)) from None
        notes = [(w.category, str(w.message).replace("fit_em_multiclass:", f"{func}:", 1)) for w in caught]
        conf, prev, ll, it, used = fit.confusion, fit.prevalence, fit.log_likelihood, fit.n_iter, fit.path
        ok = not any(issubclass(cls, ConvergenceWarning) for cls, _ in notes)
    orient = _orientation_note(conf[None], func, "mode")
    if orient:
        notes.append((IdentifiabilityWarning, orient))
    for cls, text in notes:
        warnings.warn(text, cls, stacklevel=stacklevel)
    return MulticlassMAPFit(confusion=conf, prevalence=prev, groups=index, n_groups=sizes["n_groups"],
                            log_likelihood=float(ll), log_posterior=float(ll) + _log_kernels(conf, prev, conf_pc,
                                                                                              prev_pc),
                            n_iter=int(it), converged=bool(ok), path=used, model=model,
                            classes=tuple(data.classes), warnings=tuple(text for _, text in notes))


# ------------------------------------------------------------------------------------------------ NUTS
@dataclass(frozen=True, eq=False)
class MulticlassPosterior:
    """Posterior draws of a K-class channel model (``fit_nuts_multiclass``).

    Attributes
    ----------
    confusion : ndarray of shape (n_draws_total, n_annotators, K, K)
        Draws of ``C[j, y, a]``, chains flattened (chain-major: draw ``c * n_draws + d``).
    prevalence : ndarray of shape (n_draws_total, n_groups, K)
    groups : ndarray of shape (n_items,), int32
    diagnostics : dict
        ``max_rhat``, ``min_ess_bulk``, ``frac_max_treedepth``, ``n_divergent``, ``frac_not_dominant``
        (draws whose average confusion is not diagonally dominant).
    classes : tuple
    model : str
    n_chains, n_draws : int
    population_confusion : ndarray of shape (n_draws_total, K, K) or None
        Pooled model: the population's typical confusion ``softmax([0, mu_y])`` per row.
    sample_stats : dict of name -> ndarray (n_chains, n_draws)
    diagnostics_table : DataFrame
        R-hat and bulk/tail ESS per scalar (:func:`~noisycal_bayes.inference.mcmc_diagnostics`).
    start : MulticlassMAPFit or None
        The MAP-EM fit the chains started from (None when ``init`` gave the start).
    settings : dict
    warnings : tuple of str
    """

    confusion: np.ndarray
    prevalence: np.ndarray
    groups: np.ndarray
    diagnostics: dict
    classes: tuple
    model: str
    n_chains: int
    n_draws: int
    population_confusion: np.ndarray | None = None
    sample_stats: dict = field(default_factory=dict)
    diagnostics_table: object = None
    start: MulticlassMAPFit | None = None
    settings: dict = field(default_factory=dict)
    warnings: tuple = ()
    annotator_ids: tuple | None = None
    table: SparseTable | None = None
    extra_draws: dict = field(default_factory=dict)

    def _chain_draw(self, x):
        return np.asarray(x).reshape((self.n_chains, self.n_draws) + np.shape(x)[1:])

    def clean_label_probability(self, data, *, max_draws: int | None = None) -> np.ndarray:
        """Posterior mean of ``P(Y_i = y | A_i, theta)``, shape (n_items, K); gold items are one-hot.

        Parameters
        ----------
        data : MulticlassAnnotationSet
            The fitted data (or data on the same annotators, classes and groups).
        max_draws : int or None
            Average over at most this many evenly thinned draws (None: all).
        """
        item, ann, lab, gold = _check_data(data, "clean_label_probability")
        groups = self.groups
        if groups.shape[0] != int(data.n_items):
            raise ValueError(f"clean_label_probability: the fit has groups for {groups.shape[0]} items; `data` has "
                             f"{data.n_items}.")
        table = SparseTable(*_sorted_responses(item, ann, lab), groups, gold)
        conf, prev = self.confusion, self.prevalence
        if max_draws is not None:
            pick = np.unique(np.linspace(0, conf.shape[0] - 1, check_positive_int(max_draws, name="max_draws")).astype(int))
            conf, prev = conf[pick], prev[pick]
        with x64():
            mean = _posterior_mean_probs(_table_args(table), np.log(np.clip(conf, 1e-300, 1)),
                                         np.log(np.clip(prev, 1e-300, 1)))
        return np.asarray(mean)

    def log_likelihood(self) -> np.ndarray:
        """Per-item log-likelihood of every draw, shape (n_chains, n_draws, n_items)."""
        with x64():
            ll = _per_item_loglik(_table_args(self.table), np.log(np.clip(self.confusion, 1e-300, 1)),
                                  np.log(np.clip(self.prevalence, 1e-300, 1)))
        return self._chain_draw(np.asarray(ll))

    def to_arviz(self, *, log_likelihood="auto"):
        """Convert to ArviZ: ``InferenceData`` with ArviZ 0.x, an ``xarray.DataTree`` with ArviZ >= 1.

        Groups: ``posterior`` (``confusion`` (chain, draw, annotator, true_class, label_class), ``prevalence``
        (chain, draw, group, true_class); pooled: ``population_confusion`` (chain, draw, true_class,
        label_class), ``sigma``), ``sample_stats``, ``observed_data`` (``response_item``, ``response_annotator``,
        ``labels`` per response, ``group`` and ``gold`` per item) and ``log_likelihood`` (``labels`` (chain, draw, item)) unless
        it would hold more than 5e7 values (``log_likelihood="auto"``) or ``log_likelihood=False``.
        """
        import xarray as xr

        k = self.confusion.shape[-1]
        chain, draw = np.arange(self.n_chains), np.arange(self.n_draws)
        ann = list(self.annotator_ids) if self.annotator_ids is not None else list(range(self.confusion.shape[1]))
        classes = list(self.classes) if len(self.classes) == k else list(range(k))
        base = {"chain": chain, "draw": draw}
        post = {"confusion": (("chain", "draw", "annotator", "true_class", "label_class"), self._chain_draw(self.confusion)),
                "prevalence": (("chain", "draw", "group", "true_class"), self._chain_draw(self.prevalence))}
        if self.population_confusion is not None:
            post["population_confusion"] = (("chain", "draw", "true_class", "label_class"),
                                            self._chain_draw(self.population_confusion))
        for name, value in self.extra_draws.items():
            post[name] = (("chain", "draw"), self._chain_draw(value))
        groups = {"posterior": xr.Dataset(post, coords={**base, "annotator": ann, "true_class": classes,
                                                        "label_class": classes,
                                                        "group": np.arange(self.prevalence.shape[1])}),
                  "sample_stats": xr.Dataset({k_: (("chain", "draw"), v) for k_, v in self.sample_stats.items()},
                                             coords=base)}
        t = self.table
        n_items = int(np.asarray(t.item_group).shape[0])
        groups["observed_data"] = xr.Dataset(
            {"response_item": (("response",), np.asarray(t.item)),
             "response_annotator": (("response",), np.asarray(t.annotator)),
             "labels": (("response",), np.asarray(t.label)), "group": (("item",), np.asarray(t.item_group)),
             "gold": (("item",), np.asarray(t.gold))}, coords={"item": np.arange(n_items)})
        n_values = self.n_chains * self.n_draws * n_items
        include = log_likelihood is True or (log_likelihood == "auto" and n_values <= MAX_LOGLIK_VALUES)
        if include:
            groups["log_likelihood"] = xr.Dataset({"labels": (("chain", "draw", "item"), self.log_likelihood())},
                                                  coords={**base, "item": np.arange(n_items)})
        elif log_likelihood == "auto":
            warnings.warn(f"to_arviz: the per-item log-likelihood would hold {n_values:.3g} values (> "
                          f"{MAX_LOGLIK_VALUES:.0e}); it was left out. Pass log_likelihood=True to build it anyway.",
                          UserWarning, stacklevel=2)
        attrs = {"created_by": "noisycal_bayes", "inference_library": "numpyro", "model": self.model,
                 "method": "nuts", "n_classes": k}
        for ds in groups.values():
            ds.attrs.update(attrs)
        if _arviz_major() >= 1:
            return xr.DataTree.from_dict(groups)
        import arviz as az

        return az.InferenceData(**groups)


@jax.jit
def _posterior_mean_probs(args, log_conf, log_prev):
    table = SparseTable(*args)

    def add(acc, theta):
        return acc + jax.nn.softmax(class_log_joint(table, *theta), axis=-1), None

    init = jnp.zeros((table.item_group.shape[0], log_conf.shape[-1]), log_conf.dtype)
    total, _ = jax.lax.scan(add, init, (log_conf, log_prev))
    return total / log_conf.shape[0]


@jax.jit
def _per_item_loglik(args, log_conf, log_prev):
    table = SparseTable(*args)
    return jax.lax.map(lambda theta: multiclass_loglik_rows(table, *theta), (log_conf, log_prev))


def _responses_of(table):
    """``(row, annotator, label)`` of every response (rows of a PatternTable or items of a SparseTable)."""
    if isinstance(table, PatternTable):
        pat = np.asarray(table.patterns)
        n_rows, n_ann = pat.shape
        row, ann, lab = np.repeat(np.arange(n_rows), n_ann), np.tile(np.arange(n_ann), n_rows), pat.reshape(-1)
        keep = lab >= 0
        return row[keep], ann[keep], lab[keep]
    return tuple(np.asarray(a) for a in (table.item, table.annotator, table.label))


def _np_posterior(table, responses, log_c, log_p):
    """``(P(Y = y | A_row) (n_rows, K), log P(A_row) (n_rows,))`` in NumPy float64; gold rows one-hot."""
    row, ann, lab = responses
    group = np.asarray(table.group if isinstance(table, PatternTable) else table.item_group)
    gold = np.asarray(table.gold)
    k = log_c.shape[-1]
    per = log_c[ann, :, lab]                                               # (n_responses, K)
    ll = log_p[group] + np.stack([np.bincount(row, per[:, y], minlength=group.shape[0]) for y in range(k)], 1)
    ll = np.where((gold[:, None] < 0) | (gold[:, None] == np.arange(k)), ll, -np.inf)
    top = ll.max(axis=1, keepdims=True)
    post = np.exp(ll - top)                                                # shift by the row maximum before exp
    total = post.sum(axis=1, keepdims=True)
    return post / total, (top + np.log(total))[:, 0]


def _np_counts(table, responses, post, n_annotators, n_groups):
    """Expected counts ``(confusion [j, y, a] (J, K, K), prevalence (G, K))`` from a row posterior (times row counts)."""
    row, ann, lab = responses
    k = post.shape[1]
    if isinstance(table, PatternTable):
        post, group = np.asarray(table.counts, np.float64)[:, None] * post, np.asarray(table.group)
    else:
        group = np.asarray(table.item_group)
    cell = ann * k + lab
    conf = np.stack([np.bincount(cell, post[row, y], minlength=n_annotators * k) for y in range(k)], 1)
    prev = np.stack([np.bincount(group, post[:, y], minlength=n_groups) for y in range(k)], 1)
    return conf.reshape(n_annotators, k, k).transpose(0, 2, 1), prev          # [j, a, y] -> [j, y, a]


# When the prior's pull on the diagonal is worth a warning: the label-weighted mean shift of the posterior-mean
# diagonal exceeds both this floor (the NC-ECE moves by about as much or more, since the corrected targets invert
# the confusion matrices; below it the shift is small against any interval we report) and one standard error of
# that mean diagonal (the bias then matters against the channels' own uncertainty). Measured: docs/coverage.md
# ("The PriorWarning threshold").
PRIOR_PULL_FLOOR = 0.005


def _prior_pull_note(prior: MulticlassPrior, counts, func: str) -> str:
    """A warning text when the Dirichlet rows' pseudo-counts pull the diagonal too far (else ``""``).

    ``counts`` (J, K, K): expected label counts at the MAP start. With ``n_y`` a row's labels, ``d_y`` its
    diagonal proportion and ``s_y`` the shift of its posterior-mean diagonal entry
    (:meth:`~noisycal_bayes.models.multiclass.MulticlassPrior.diagonal_pull`), the mean shift is
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


def _expected_counts(table, confusion, prevalence, n_groups):
    """One E-step in NumPy (float64): ``(confusion counts (J, K, K) [j, y, a], prevalence counts (G, K))``.

    ``P(Y = y | A_row)`` at the point, weighted by the row counts (patterns) and summed per (annotator, class,
    label) and per (group, class); gold rows are one-hot. NumPy: no JAX program to compile for one pass.
    """
    log_c = np.log(np.clip(np.asarray(confusion, np.float64), 1e-300, 1.0))
    log_p = np.log(np.clip(np.asarray(prevalence, np.float64), 1e-300, 1.0)).reshape(n_groups, -1)
    responses = _responses_of(table)
    post, _ = _np_posterior(table, responses, log_c, log_p)
    return _np_counts(table, responses, post, log_c.shape[0], n_groups)


def _np_map_em(table, prior, *, n_annotators, n_classes, n_groups, max_iter, tol):
    """MAP-EM in NumPy on a compressed table, the start of :func:`fit_nuts_multiclass` (a few thousand rows: cheap
    NumPy iterations instead of compiling a first :func:`~noisycal_bayes.inference.fit_em_multiclass` program).
    The updates of fit_em_multiclass (vote-share start, M-step with the prior's pseudo-counts); it stops when no
    probability moves by more than ``tol``. Returns ``(confusion, prevalence, log_likelihood, log_posterior, n_iter,
    converged)``."""
    k = n_classes
    responses = _responses_of(table)
    conf_pc, prev_pc = prior.pseudo_counts(k), prior.prevalence - 1.0
    row, ann, lab = responses
    n_rows = np.asarray(table.gold).shape[0]
    votes = np.stack([np.bincount(row, lab == y, minlength=n_rows) for y in range(k)], 1).astype(np.float64)
    tot = votes.sum(1, keepdims=True)
    post = np.where(tot > 0, votes / np.where(tot > 0, tot, 1.0), 1.0 / k)
    gold = np.asarray(table.gold)
    post = np.where(gold[:, None] >= 0, np.eye(k)[np.maximum(gold, 0)], post)

    def m_step(post):
        n_conf, n_prev = _np_counts(table, responses, post, n_annotators, n_groups)
        counts, m = n_conf + conf_pc, n_prev + prev_pc
        t, tg = counts.sum(-1, keepdims=True), m.sum(-1, keepdims=True)
        # Rows or groups without data (and zero pseudo-counts): uniform instead of 0 / 0, as the JAX M-step.
        return (np.where(t > 0, counts / np.where(t > 0, t, 1.0), 1.0 / k),
                np.where(tg > 0, m / np.where(tg > 0, tg, 1.0), 1.0 / k))

    def logs(conf, prev):
        return np.log(np.clip(conf, 1e-300, 1.0)), np.log(np.clip(prev, 1e-300, 1.0))

    conf, prev = m_step(post)
    it, change = 0, np.inf
    while it < max_iter and change > tol:
        new_conf, new_prev = m_step(_np_posterior(table, responses, *logs(conf, prev))[0])
        change = max(np.abs(new_conf - conf).max(), np.abs(new_prev - prev).max())
        conf, prev, it = new_conf, new_prev, it + 1
    rows = _np_posterior(table, responses, *logs(conf, prev))[1]
    weight = np.asarray(table.counts, np.float64)
    ll = float(np.sum(np.where(weight > 0, weight * rows, 0.0)))
    return conf, prev, ll, ll + _log_kernels(conf, prev, conf_pc, prev_pc), it, bool(change <= tol)


def _bound_log_ratio(table_type, static: dict):
    """The log-ratio model with sizes bound; positional args = the table's arrays, the scaling, the prior."""
    def bound(*args):
        *arrays, scaling, prior = args
        return grouped_multiclass_log_ratio(table_type(*arrays), scaling, prior=prior, **static)

    bound.__name__ = "grouped_multiclass_log_ratio_bound"
    return bound


def _bound(model: str, table_type, static: dict):
    """The model function with sizes bound; positional args = the table's arrays, then the prior params."""
    fn = MULTICLASS_MODELS[model]

    def bound(*args):
        *arrays, prior = args
        return fn(table_type(*arrays), prior=prior, **static)

    bound.__name__ = f"{model}_multiclass_bound"
    return bound


def _start_sites(model, confusion, prevalence, n_groups):
    """Constrained sample-site values at a point, kept ``_START_FLOOR`` inside the simplices."""
    k = confusion.shape[-1]
    conf = (np.asarray(confusion, np.float64) + _START_FLOOR) / (1 + k * _START_FLOOR)
    prev = (np.asarray(prevalence, np.float64).reshape(n_groups, k) + _START_FLOOR) / (1 + k * _START_FLOOR)
    if model == "dawid_skene":
        return {"confusion": conf, "prevalence": prev[0]}
    if model == "grouped":
        return {"confusion": conf, "prevalence": prev}
    # Pooled: log-odds against the diagonal, their mean over annotators, spread and standardised offsets.
    log_c = np.log(conf)
    eta = log_c - np.diagonal(log_c, axis1=-2, axis2=-1)[..., None]
    off = ~np.eye(k, dtype=bool)
    eta = eta[:, off].reshape(conf.shape[0], k, k - 1)
    mu = eta.mean(axis=0)
    sigma = max(float(np.std(eta - mu)), 0.2)
    return {"mu": mu, "sigma": np.float64(sigma), "z": np.clip((eta - mu) / sigma, -3, 3), "prevalence": prev}


_NOT_DOMINANT = ("{func}: the start's average confusion matrix is not diagonally dominant, so the class labelling is "
                 "not fixed (models/multiclass.py, orientation). Pass an `init` whose average confusion has the "
                 "largest entry of each row on the diagonal, or add gold items.")


def _start_from_init(init, table, prior, sizes, func):
    """``(confusion, prevalence)`` from ``init``: an object with ``confusion`` (and ``prevalence``) or an array."""
    j, k, g = sizes["n_annotators"], sizes["n_classes"], sizes["n_groups"]
    conf = np.asarray(getattr(init, "confusion", init), np.float64)
    if conf.shape != (j, k, k) or not np.all(np.isfinite(conf)) or np.any(conf < 0):
        raise ValueError(f"{func}: `init` must be a confusion array of shape ({j}, {k}, {k}) (or a fit with "
                         f"`confusion`); got shape {conf.shape}.")
    conf = conf / conf.sum(-1, keepdims=True)
    if not diagonally_dominant(conf[None])[0]:
        raise ValueError(_NOT_DOMINANT.format(func=func))
    prev = getattr(init, "prevalence", None)
    if prev is not None and np.shape(prev) == (g, k):
        return conf, np.asarray(prev, np.float64)
    # Prevalence from one E-step at the given channels (uniform prevalence), plus the prior's pseudo-counts.
    _, m = _expected_counts(table, conf, np.full((g, k), 1.0 / k), g)
    m = m + (prior.prevalence - 1.0)
    tot = m.sum(-1, keepdims=True)
    return conf, np.where(tot > 0, m / np.where(tot > 0, tot, 1.0), 1.0 / k)  # an empty group: uniform


def fit_nuts_multiclass(data, *, model: str = "grouped", groups=None, n_chains: int = 2, n_warmup: int = 500,
                        n_samples: int = 500, seed: int = 0, init=None, prior=None, path: str = "auto",
                        target_accept: float = 0.8, max_tree_depth: int = 10, dense_mass: bool = False,
                        chain_method: str | None = None, precision: str = "auto",
                        parametrisation: str = "log_ratio", progress_bar: bool = False) -> MulticlassPosterior:
    """Posterior draws of a K-class channel model by NumPyro's NUTS.

    Parameters
    ----------
    data : MulticlassAnnotationSet
        Or any object with ``responses``, ``n_items``, ``n_annotators``, ``n_classes``, ``probs``, ``gold``,
        ``classes``. Gold labels (``gold >= 0``) enter as observed clean labels.
    model : {"grouped", "dawid_skene", "pooled"}, default "grouped"
        :mod:`noisycal_bayes.models.multiclass`: Dirichlet confusion rows with a prevalence per score group,
        one prevalence, or confusion matrices pooled around a population (for many annotators; prevalence
        per group).
    groups : int array of shape (n_items,) or None
        As in :func:`fit_map_multiclass`; ignored by ``"dawid_skene"``.
    n_chains, n_warmup, n_samples : int, defaults 2, 500, 500
        Warm-up from the MAP start is short in the log-ratio coordinates, so few warm-up steps serve; R-hat on
        CIFAR-10N's shape: docs/performance.md ("K classes: NUTS on the CIFAR-10N shape").
    seed : int, default 0
        One JAX key per chain through ``numpy.random.SeedSequence(seed)``.
    init : None, ndarray of shape (J, K, K), or a fit with ``confusion`` (and ``prevalence`` (G, K))
        Where the chains start (e.g. an EM fit). None: the MAP-EM fit of :func:`fit_map_multiclass` for the
        grouped model (marginal model: of itself), to ``tol=1e-6``; on compressed rows its iterations run in
        NumPy (the same updates; no JAX loop to compile). It must be diagonally dominant on average (orientation).
    prior : MulticlassPrior or None
    path : {"auto", "patterns", "sparse"}
        Likelihood on compressed pattern counts or on responses (module docstring).
    target_accept : float, default 0.8
    max_tree_depth : int, default 10
    dense_mass : bool, default False
        Diagonal mass matrix by default: a K = 10 model has hundreds of parameters, too many for a dense
        matrix to be learnt in a normal warm-up.
    chain_method : {None, "parallel", "sequential", "vectorized"}
        None: parallel when JAX has two or more devices (:func:`~noisycal_bayes.inference.configure_jax`).
    precision : {"auto", "float32", "float64"}, default "auto"
        Floating-point type of the sampler. ``"auto"``: float32 on the compressed pattern path (a sum over a
        few thousand rows with counts, where float32 is precise enough and faster per leapfrog step), float64 on
        the sparse path (a sum over every item, which loses precision in float32 at large n). The MAP-EM start
        is always computed in float64. Speed: docs/performance.md ("K classes: NUTS on the CIFAR-10N shape").
    parametrisation : {"log_ratio", "simplex"}, default "log_ratio"
        Coordinates of the sampler for the ``"grouped"`` and ``"dawid_skene"`` models (the model, its prior and
        posterior are the same either way). ``"log_ratio"``: each confusion row's log-odds against its diagonal
        and each group's log-odds against its largest class, shifted and scaled so that the conjugate
        Dirichlet posterior given the start's expected counts is standard normal
        (:func:`~noisycal_bayes.models.multiclass.grouped_multiclass_log_ratio`): no stick-breaking transforms
        or Dirichlet terms to evaluate per gradient, and the chains start near the bulk on a near-unit scale,
        so they need no long warm-up (cost per gradient: docs/performance.md, "K classes: NUTS on the CIFAR-10N
        shape"). ``"simplex"``: NumPyro's
        stick-breaking coordinates of the Dirichlet sites
        (:func:`~noisycal_bayes.models.multiclass.grouped_multiclass`), the earlier default. The pooled
        model has its own log-odds coordinates and ignores this.
    progress_bar : bool, default False

    Returns
    -------
    MulticlassPosterior

    Raises
    ------
    ValueError
        Bad data, model, groups, prior, path, init or sampler settings; an ``init`` whose average confusion is
        not diagonally dominant.

    Warns
    -----
    ConvergenceWarning
        Divergences, R-hat above 1.01, low ESS, saturated tree depth (:func:`~noisycal_bayes.inference.check_mcmc`).
    IdentifiabilityWarning
        Some draws' average confusion is not diagonally dominant (label switching or a crowd that confuses
        classes systematically).

    Notes
    -----
    The orientation constraint and the models are documented in :mod:`noisycal_bayes.models.multiclass`.
    ``"simplex"`` and the pooled model: chains start at the MAP-EM point plus uniform jitter of +-0.5 in
    unconstrained coordinates. ``"log_ratio"``: at the mean of the Dirichlet approximation given the expected
    counts at the MAP-EM point (u = 0) plus the same jitter, i.e. +-0.5 approximate posterior standard
    deviations.

    Examples
    --------
    >>> fit = fit_nuts_multiclass(data, groups=groups)  # doctest: +SKIP
    >>> fit.confusion.shape  # doctest: +SKIP
    (1000, 3, 10, 10)
    """
    func = "fit_nuts_multiclass"
    model = _check_model(model, func)
    prior = _check_prior(prior, func)
    n_chains = check_positive_int(n_chains, name="n_chains")
    n_warmup = check_positive_int(n_warmup, name="n_warmup", minimum=0)
    n_samples = check_positive_int(n_samples, name="n_samples")
    seed = check_positive_int(seed, name="seed", minimum=0)
    max_tree_depth = check_positive_int(max_tree_depth, name="max_tree_depth")
    target_accept = float(target_accept)
    if not 0 < target_accept < 1:
        raise ValueError(f"{func}: `target_accept` must lie strictly between 0 and 1; got {target_accept}.")
    chain_method = choose_chain_method(n_chains, chain_method)
    if precision not in PRECISIONS:
        raise ValueError(f"{func}: `precision` must be one of {list(PRECISIONS)}; got {precision!r}.")
    if parametrisation not in PARAMETRISATIONS:
        raise ValueError(f"{func}: `parametrisation` must be one of {list(PARAMETRISATIONS)}; got "
                         f"{parametrisation!r}.")
    item, ann, lab, gold = _check_data(data, func)
    index, n_groups = _resolve_groups(data, model, groups, func)
    sizes = dict(n_annotators=int(data.n_annotators), n_classes=int(data.n_classes), n_groups=n_groups)
    table, sparse, used = _build_tables(item, ann, lab, gold, index, n_items=int(data.n_items), path=path,
                                        func=func, **sizes)
    notes = []
    start_fit = None
    if init is None:
        map_prior = prior if min(prior.diagonal, prior.off_diagonal, prior.prevalence) >= 1 else DEFAULT_MULTICLASS_PRIOR
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # Compressed rows: EM in NumPy (no JAX loop to compile for a start; same iterations as fit_map_multiclass).
            start_fit = _map_fit(data, table, used, index, "dawid_skene" if model == "dawid_skene" else "grouped",
                                 map_prior, sizes, max_iter=5000, tol=1e-6, func=func,
                                 engine="numpy" if used == "patterns" else "jax")
        conf0, prev0 = start_fit.confusion, start_fit.prevalence
    else:
        conf0, prev0 = _start_from_init(init, table, prior, sizes, func)
    if not diagonally_dominant(conf0[None])[0]:
        raise ValueError(_NOT_DOMINANT.format(func=func))
    log_ratio = parametrisation == "log_ratio" and model != "pooled"
    scaling = None
    counts = _expected_counts(table, conf0, prev0, n_groups) if model != "pooled" else None
    if counts is not None:
        pull = _prior_pull_note(prior, counts[0], func)
        if pull:
            notes.append(pull)
            warnings.warn(pull, PriorWarning, stacklevel=2)
    if log_ratio:
        scaling = log_ratio_scaling(*counts, prior)
        sites = {"confusion_u": np.zeros(scaling.conf_scale.shape), "prevalence_u": np.zeros(scaling.prev_scale.shape)}
    else:
        sites = _start_sites(model, conf0, prev0, n_groups)

    chunk = chunk_size(n_warmup, n_samples)
    width = parallel_width(n_chains) if chain_method == "parallel" else 1
    layout = {"sequential": None, "parallel": width}.get(chain_method, n_chains)
    if precision == "auto":
        precision = "float32" if used == "patterns" else "float64"
    dtype = np.float64 if precision == "float64" else np.float32
    # NumPy arrays of the sampler's float type in: no eager JAX conversion (each would compile a program).
    args = tuple(a.astype(dtype) if a.dtype.kind == "f" else a for a in _table_args(table))
    if log_ratio:
        args += (LogRatioScaling(*(np.asarray(a, dtype) if a.dtype.kind == "f" else a for a in scaling)),)
    sites = {k_: np.asarray(v, dtype) for k_, v in sites.items()}
    static = dict(sizes) if model != "dawid_skene" else dict(sizes, n_groups=1)
    key = ("nuts-multiclass", "grouped-log-ratio" if log_ratio else model, type(table).__name__,
           tuple(sorted(static.items())), tuple(np.shape(a) for a in args[:len(table)]), layout, n_warmup, chunk,
           chain_method, target_accept, max_tree_depth, bool(dense_mass), precision)
    model_fn = _bound_log_ratio(type(table), static) if log_ratio else _bound(model, type(table), static)

    def build():
        return NutsProgram(model_fn, n_warmup=n_warmup, chunk=chunk,
                           chain_method=chain_method, target_accept=target_accept, max_tree_depth=max_tree_depth,
                           dense_mass=bool(dense_mass), width=width, key=key)

    with (x64() if precision == "float64" else contextlib.nullcontext()):
        program = get_program(key, build)
        prior_params = MulticlassPriorParams(*(dtype(v) for v in prior.params()))
        got, stats = program.run(chain_keys(seed, n_chains), sites, args + (prior_params,), n_draws=n_samples,
                                 progress_bar=progress_bar, desc=f"NUTS multiclass {model}")
    got = {k_: np.asarray(v, np.float64) for k_, v in got.items()}
    k = sizes["n_classes"]
    extra, pop = {}, None
    if model == "pooled":
        eta = np.asarray(_insert_zero(got["mu"][:, :, None] + got["sigma"][:, :, None, None, None] * got["z"]))
        conf = _softmax(eta)
        pop = _softmax(np.asarray(_insert_zero(got["mu"])))
        extra["sigma"] = got["sigma"].reshape(-1)
    elif log_ratio:
        # Back to the simplex in float64 (the same map as the model's, on the float32 draws).
        log_c, log_p = log_ratio_point(jax.tree.map(np.asarray, scaling), got["confusion_u"], got["prevalence_u"])
        conf, got["prevalence"] = np.exp(log_c), np.exp(log_p)
    else:
        conf = got["confusion"]
    prev = got["prevalence"].reshape(n_chains, n_samples, -1, k)

    draws = {"confusion": conf, "prevalence": prev}
    dims = {"confusion": ("annotator", "true_class", "label_class"), "prevalence": ("group", "true_class")}
    if pop is not None:
        draws.update(population_confusion=pop, sigma=got["sigma"])
        dims.update(population_confusion=("true_class", "label_class"), sigma=())
    table_diag = mcmc_diagnostics(draws, dims)
    n_divergent = int(stats["diverging"].sum())
    # A trajectory of depth d has 2**d - 1 leapfrog steps: that count at the cap means the doubling was stopped by it.
    at_max = stats["n_steps"] >= 2 ** max_tree_depth - 1
    notes += check_mcmc(table_diag, n_chains=n_chains, n_divergent=n_divergent, n_draws=n_samples,
                        n_max_depth=int(at_max.sum()), max_tree_depth=max_tree_depth, func=func)
    flat_conf = conf.reshape((-1,) + conf.shape[2:])
    dominant = diagonally_dominant(flat_conf)
    orient = _orientation_note(flat_conf, func, "posterior draws")
    if orient:
        notes.append(orient)
        warnings.warn(orient, IdentifiabilityWarning, stacklevel=2)
    diagnostics = {"max_rhat": float(np.nanmax(table_diag["r_hat"])) if n_chains > 1 else float("nan"),
                   "min_ess_bulk": float(np.nanmin(table_diag["ess_bulk"])),
                   "min_ess_tail": float(np.nanmin(table_diag["ess_tail"])),
                   "frac_max_treedepth": float(at_max.mean()), "n_divergent": n_divergent,
                   "frac_not_dominant": float(1.0 - dominant.mean()),
                   "mean_tree_depth": float(np.mean(stats["tree_depth"]))}
    ids = getattr(data, "annotator_ids", None)
    return MulticlassPosterior(
        confusion=flat_conf, prevalence=prev.reshape((-1,) + prev.shape[2:]), groups=index, diagnostics=diagnostics,
        classes=tuple(data.classes), model=model, n_chains=n_chains, n_draws=n_samples,
        population_confusion=None if pop is None else pop.reshape((-1, k, k)), sample_stats=stats,
        diagnostics_table=table_diag, start=start_fit,
        settings=dict(n_chains=n_chains, n_warmup=n_warmup, n_samples=n_samples, seed=seed, path=used,
                      chain_method=chain_method, target_accept=target_accept, max_tree_depth=max_tree_depth,
                      dense_mass=bool(dense_mass), precision=precision, start="map-em" if init is None else "init",
                      parametrisation="log_ratio" if log_ratio else ("log_odds" if model == "pooled" else "simplex"),
                      n_rows=int(np.count_nonzero(table.counts)) if used == "patterns" else int(data.n_items)),
        warnings=tuple(notes), annotator_ids=None if ids is None else tuple(ids), table=sparse, extra_draws=extra)


def _insert_zero(off):
    """(..., K, K-1) log-odds against the diagonal -> (..., K, K) with 0 on the diagonal (NumPy)."""
    k = off.shape[-2]
    a, y = np.arange(k)[None, :], np.arange(k)[:, None]
    index = np.where(a == y, k - 1, np.where(a < y, a, a - 1))
    ext = np.concatenate([off, np.zeros(off.shape[:-1] + (1,))], axis=-1)
    return np.take_along_axis(ext, np.broadcast_to(index, off.shape[:-2] + (k, k)), axis=-1)


def _softmax(x):
    x = x - x.max(axis=-1, keepdims=True)  # shift by the row maximum: exp never overflows
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)
