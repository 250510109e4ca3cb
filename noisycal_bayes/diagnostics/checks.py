"""Predictive model checks of a fitted grouped channel model: does the data look like the model's replicates?

The grouped Dawid-Skene model (DESIGN.md §4, §8) says that, in score group ``g``, an item's responses follow

``P(A = a | g) = (1 - pi_g) prod_j a_j^A_j (1 - a_j)^(1 - A_j) + pi_g prod_j b_j^A_j (1 - b_j)^(1 - A_j)``

over the annotators who answered (:func:`noisycal_bayes.core.ds_loglik_rows`). Responses are missing at
random, so the checks condition on each item's group and on which annotators answered it: within a *stratum*
(group ``g``, set ``O`` of observed annotators) of ``n_s`` items the counts of the ``2^|O|`` label patterns are
multinomial with these probabilities. The checks compare the observed counts with counts replicated from the
fitted model:

* EM / MAP fits: a parametric bootstrap. Replicates are drawn from the point estimate with every stratum's
  size kept, and EM is refitted on each replicate (warm-started at the estimate), so that the p-value
  accounts for the estimation of the ``G + 2J`` parameters.
* NUTS fits: posterior predictive checks with realised discrepancies (Gelman, Meng and Stern, *Statistica
  Sinica* 6, 1996): one replicate per posterior draw, and the discrepancy of the observed and of the
  replicated counts both evaluated at that draw. Posterior predictive p-values are conservative (Meng,
  *Ann. Statist.* 22, 1994): they warn at most at the stated rate, often less.

The summary check ``posterior_predictive`` is Pearson's ``X^2 = sum (O - E)^2 / E`` over *pooled cells*: in
each stratum the cells with expected count below ``min_expected`` (fitted expected counts of the observed
data) are merged into one cell, together with the next smallest cells until that merged cell reaches
``min_expected`` (a stratum whose items are fewer than that becomes one cell and carries no information).
The same pooling serves every replicate. The nominal degrees of freedom are ``sum_s (K_s - 1) - (G + 2J)``
with ``K_s`` pooled cells in stratum ``s``; the chi-square p-value on them is given in ``detail`` for
reference, and the reported p-value is the bootstrap / posterior predictive one.

Agreement checks: the fraction of items on which two annotators agree (among items both labelled), per pair
over all items and per score group, and each annotator's agreement with the others (pooled over partners).
Each is compared as the difference between the observed rate and the rate the model implies at the fit (at the
draw, for NUTS), and each replicate gives the same difference at its own refit (draw), so that estimation is
accounted for as in the summary check. Differences are standardised binomially, ``z = d / sqrt(m (1 - m) / n)``
with ``m`` the model-implied rate and ``n`` the co-labelled items, each data set by its own fit; the check's
statistic is the largest ``|z|`` (mean over draws for NUTS), and its p-value compares it with the same maximum
over the replicates (so it accounts for the number of pairs and groups).

Targeted checks of the two assumptions behind every NC-ECE (DESIGN.md §2), calibrated by the same replicates:

* ``score_dependent_noise`` (channels that vary with the score): per annotator ``j`` and score group ``g``
  the count residual ``d_gj = O_gj - E_gj`` of positive responses (observed minus fitted), and the trend
  contrast ``z_j = sum_g c_g d_gj / sqrt(sum_g c_g^2 n_gj m_gj (1 - m_gj))`` with ``c_g = g - (G - 1) / 2``
  (groups are ordered by score), ``n_gj`` responses and ``m_gj`` the fitted positive rate. A shared channel
  leaves no trend in any annotator's residuals, whatever the prevalences; a false-positive rate rising with
  the score does (one annotator's drift cannot be absorbed by the prevalences, which all annotators share).
  The statistic is ``max_j |z_j|``; it needs at least two score groups.
* ``annotator_dependence`` (errors that coincide more often than independence allows): the pooled excess
  agreement ``S = sum_{g, pairs} (A_gp - E[A_gp]) / sqrt(sum n_gp m_gp (1 - m_gp))`` over pairs of annotators
  and score groups, with ``A_gp`` the number of items on which the pair agrees, one-sided (shared errors raise
  agreement). Under conditional independence the within-group agreement of a pair follows from the channels
  and ``pi_g``; a common item difficulty adds agreement in every group that the shared channels can only
  partly absorb. What three annotators can and cannot reveal is in docs/model_checks.md.

Response-level checks, for designs whose cells cannot be tabulated (EM's sparse path for crowds, more
annotators than 64-bit cell keys hold, more than :data:`MAX_CELLS` cells): the same agreement and targeted
statistics, computed from the responses ``(i, j, A)`` and the co-labelled pairs of responses (two annotators on
one item) instead of cell counts. At a parameter value the model-implied agreement of annotators ``a, b`` on item
``i`` is ``(1 - q_i) (f_a f_b + (1 - f_a)(1 - f_b)) + q_i (t_a t_b + (1 - t_a)(1 - t_b))`` with ``q_i = pi_{g_i}``
(or the gold label, an observed latent label) and the expected positive responses are ``(1 - q_i) f_j + q_i t_j``.
Pairs enter ``pairwise_agreement`` (``_by_group``) when they co-labelled at least :data:`MIN_PAIR_ITEMS` items
(in the group); ``annotator_agreement``, ``score_dependent_noise`` and ``annotator_dependence`` use every
response. The replicates are posterior predictive (NUTS fits, including partially pooled ones): at each draw new
clean labels ``Y_i ~ Bernoulli(q_i)`` and new responses for the observed (item, annotator) slots, with realised
discrepancies as above. ``posterior_predictive`` (the cell-count X^2) is ``not_testable`` there, and so is every
check of an EM / MAP fit on such a design: its parametric bootstrap refits EM on the cell counts of each
replicate.

A design with no degrees of freedom (DESIGN.md §8: ``G (2^J - 1) <= G + 2J`` free cell probabilities, for
example one group and three annotators) reproduces every cell exactly, whatever the data: every check is
then ``not_testable``, never ``pass``.
"""
from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from .._progress import progress
from .._validation import binary_only

#: Default rate at which each check warns when the model is right (its p-value is at most ``alpha``).
ALPHA = 0.05
#: Cells with a smaller fitted expected count are pooled (Cochran's rule for Pearson's X^2).
MIN_EXPECTED = 5.0
#: Largest number of (stratum, pattern) cells (2^J patterns per stratum).
MAX_CELLS = 200_000
# Bootstrap refits per batched EM call (a fixed size: one compiled program per design).
_REFIT_CHUNK = 100
#: Fewest co-labelled items of a pair of annotators (in a score group) entered in the response-level pairwise
#: checks: rarer pairs add entries whose binomial z is all but discrete, and no power.
MIN_PAIR_ITEMS = 10
#: Largest number of co-labelled pairs of responses the response-level checks hold.
MAX_RESPONSE_PAIRS = 2_000_000
# Replicated responses (or pairs of them) held at once (draws x responses).
_RESPONSE_CHUNK = 5_000_000
#: Check names in the table, in order.
CHECK_NAMES = ("posterior_predictive", "pairwise_agreement", "pairwise_agreement_by_group", "annotator_agreement",
               "score_dependent_noise", "annotator_dependence")

__all__ = ["ALPHA", "CHECK_NAMES", "MIN_EXPECTED", "ModelChecks", "model_checks", "run_multiclass_checks"]


@dataclass(frozen=True, eq=False)
class ModelChecks:
    """Predictive checks of a fitted channel model (:func:`model_checks`).

    Attributes
    ----------
    table : DataFrame
        One row per check: ``name`` (:data:`CHECK_NAMES`; ``pairwise_agreement_by_group`` only with more than
        one group), ``status`` (``"pass"``, ``"warn"`` when ``p_value <= alpha``, or ``"not_testable"``),
        ``statistic``, ``p_value``, ``detail``.
    residuals : DataFrame
        One row per (group, response pattern) cell of the observed strata: ``group``, ``pattern`` (a string,
        one character per annotator: ``0``, ``1`` or ``-`` for missing), ``stratum``, ``pooled_cell``,
        ``observed``, ``expected`` (fitted; posterior mean for NUTS), ``pearson`` =
        ``(observed - expected) / sqrt(expected)`` and ``standardized`` = ``(observed - mean of the
        replicates) / their standard deviation`` (NaN where the replicates do not vary or there are none).
    agreement : DataFrame
        ``kind`` (``"pair"`` or ``"annotator"``), ``annotator``, ``other`` (the partner, or ``"others"``),
        ``group`` (-1 for all groups), ``n_items`` co-labelled (pairs of responses for ``"annotator"``),
        ``observed`` agreement rate, ``expected`` (model-implied at the fit; posterior mean of the draws used),
        ``difference_sd`` (standard deviation of the replicates' observed-minus-fitted rate), ``z`` and a
        two-sided ``p_value`` per entry (not corrected for multiplicity; the table's rows are).
    statistic : float
        Pearson ``X^2`` of the observed counts (NaN when not testable).
    p_value : float
        Its bootstrap / posterior predictive p-value.
    df : int
        Nominal degrees of freedom after pooling (``<= 0``: not testable; 0 for the response-level checks, which
        compute no cell-count X^2).
    replicated : ndarray of shape (n_ok,)
        ``X^2`` of each successful replicate (at its refit, or at its draw for NUTS).
    observed_discrepancy : ndarray of shape (n_ok,)
        NUTS: ``X^2`` of the observed counts at each draw used; EM / MAP: ``statistic`` repeated.
    method : str
        ``"bootstrap"`` (EM / MAP fits) or ``"posterior_predictive"`` (NUTS).
    model : str
    n_replicates, n_failed : int
        Replicates asked for (for NUTS: draws used) and refits that failed (left out of the p-values).
    alpha, min_expected : float
    status : str
        ``"warn"`` if any check warned, else ``"pass"``, or ``"not_testable"``. Each check warns at the rate
        ``alpha`` on a well-specified model; this overall status therefore warns more often (at most
        ``len(table) * alpha``).
    reason : str
        Why not testable ('' otherwise).
    settings : dict
        ``seed``, ``fit_method`` and ``n_draws_used`` (NUTS: posterior draws used; 0 otherwise); ``design`` is
        ``"responses"`` when the design has no cell tables (module docstring: response-level checks; then
        ``residuals`` is empty and ``agreement`` lists the pairs with at least :data:`MIN_PAIR_ITEMS` co-labelled
        items and the annotators with any).
    """

    table: pd.DataFrame
    residuals: pd.DataFrame
    agreement: pd.DataFrame
    statistic: float
    p_value: float
    df: int
    replicated: np.ndarray
    observed_discrepancy: np.ndarray
    method: str
    model: str
    n_replicates: int
    n_failed: int
    alpha: float
    min_expected: float
    status: str
    reason: str = ""
    settings: dict = field(default_factory=dict)

    @property
    def warned(self) -> bool:
        """True when any check warned."""
        return self.status == "warn"

    def residual_matrix(self, value: str = "standardized") -> pd.DataFrame:
        """Residuals as a (group x pattern) table (NaN where a pattern was not possible in a group).

        Parameters
        ----------
        value : {"standardized", "pearson"}
        """
        if value not in ("standardized", "pearson"):
            raise ValueError(f"`value` must be 'standardized' or 'pearson'; got {value!r}.")
        res = self.residuals
        # Several strata of one group (missing responses) share no pattern, so (group, pattern) is unique.
        return res.pivot(index="group", columns="pattern", values=value)

    def plot(self, ax=None, *, value: str = "standardized", title: str | None = None):
        """Heat map of the residuals per (score group, response pattern) cell.

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Draw into it; otherwise a new ``Figure`` (never registered with pyplot).
        value : {"standardized", "pearson"}
        title : str, optional

        Returns
        -------
        matplotlib.figure.Figure
        """
        mat = self.residual_matrix(value)
        try:
            from matplotlib.figure import Figure
        except ImportError:  # pragma: no cover - depends on the environment
            raise ImportError("plotting needs matplotlib: pip install 'noisycal_bayes[plot]'") from None
        if ax is None:
            fig = Figure(figsize=(max(4.5, 0.45 * mat.shape[1] + 2.0), max(3.0, 0.35 * mat.shape[0] + 1.8)),
                         layout="constrained")
            ax = fig.add_subplot()
        else:
            fig = ax.figure
        vals = mat.to_numpy(dtype=np.float64)
        finite = np.abs(vals[np.isfinite(vals)])
        lim = max(3.0, float(finite.max()) if finite.size else 3.0)
        image = ax.imshow(np.ma.masked_invalid(vals), cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto",
                          interpolation="nearest")
        ax.set_xticks(np.arange(mat.shape[1]), labels=list(mat.columns), rotation=90, fontsize=8)
        ax.set_yticks(np.arange(mat.shape[0]), labels=[str(g) for g in mat.index], fontsize=8)
        ax.set_xlabel("response pattern (annotators in order; - = missing)")
        ax.set_ylabel("score group")
        fig.colorbar(image, ax=ax, label=f"{value} residual")
        if title is None:
            row = self.table.iloc[0]
            title = (f"{self.method}: X^2 = {row['statistic']:.1f}, p = {row['p_value']:.3g}" if row["status"]
                     != "not_testable" else "not testable: " + self.reason)
        ax.set_title(title, fontsize=9)
        return fig


# ------------------------------------------------------------------ cells
class _CellsUnavailable(ValueError):
    """The (group, pattern) cell tables cannot be built for this design (the message says why); the checks then
    compare responses instead (:func:`_response_checks`)."""


def _strata(inputs):
    """Observed (group, mask) strata and every cell of each: patterns, group, stratum, observed counts.

    Raises :class:`_CellsUnavailable` for sparse inputs (no patterns), for more annotators than the cell keys
    hold (``n_groups * 3^J`` must fit int64: :func:`~noisycal_bayes.data.compress.pattern_keys`; the stratum
    keys ``n_groups * 2^J`` are smaller) and for more than :data:`MAX_CELLS` cells.
    """
    j = inputs.n_annotators
    if getattr(inputs, "sparse", False) or inputs.patterns is None:
        raise _CellsUnavailable(f"the fit used the sparse-response path ({j} annotators, items labelled by different "
                                "subsets): nearly every item has its own response pattern")
    if max(int(inputs.n_groups), 1) * 3 ** j >= 2 ** 63:
        raise _CellsUnavailable(f"{j} annotators: the (score group, response pattern) cells cannot be keyed by 64-bit "
                                "integers (at most 39 annotators with one group)")
    patterns = np.asarray(inputs.patterns, dtype=np.int8)
    group = np.asarray(inputs.row_group, dtype=np.int64)
    counts = np.asarray(inputs.counts, dtype=np.float64)
    keep = (counts > 0) & np.any(patterns >= 0, axis=1)  # rows without any response carry no information
    patterns, group, counts = patterns[keep], group[keep], counts[keep]
    mask = patterns >= 0
    mask_code = mask.astype(np.int64) @ (1 << np.arange(j - 1, -1, -1, dtype=np.int64))
    key = group * (1 << j) + mask_code
    strata, row_stratum = np.unique(key, return_inverse=True)
    s_group, s_mask = strata >> j, strata & ((1 << j) - 1)
    n_obs = np.array([bin(int(m)).count("1") for m in s_mask], dtype=np.int64)
    n_cells = int(np.sum(2 ** n_obs))
    if n_cells > MAX_CELLS:
        raise _CellsUnavailable(f"the observed strata have {n_cells} (group, pattern) cells (> {MAX_CELLS}): too many "
                                "annotators per item for cell counts")
    cell_pat, cell_group, cell_stratum = [], [], []
    for s, (g, m, k) in enumerate(zip(s_group, s_mask, n_obs)):
        cols = [c for c in range(j) if (int(m) >> (j - 1 - c)) & 1]
        bits = (np.arange(2 ** k)[:, None] >> np.arange(k - 1, -1, -1)) & 1
        pat = np.full((2 ** k, j), -1, np.int8)
        pat[:, cols] = bits
        cell_pat.append(pat)
        cell_group.append(np.full(2 ** k, g))
        cell_stratum.append(np.full(2 ** k, s))
    cell_pat = np.concatenate(cell_pat)
    cell_group = np.concatenate(cell_group).astype(np.int32)
    cell_stratum = np.concatenate(cell_stratum)
    # Observed count of each cell: match rows to cells by their (group, pattern) key.
    from ..data.compress import pattern_keys

    cell_key = pattern_keys(cell_pat, cell_group, j)
    order = np.argsort(cell_key)
    pos = order[np.searchsorted(cell_key, pattern_keys(patterns, group, j), sorter=order)]
    observed = np.bincount(pos, weights=counts, minlength=cell_key.size)
    n_stratum = np.bincount(row_stratum, weights=counts, minlength=strata.size)
    return cell_pat, cell_group, cell_stratum, observed, n_stratum, n_obs


def _cell_probs(cell_pat, cell_group, fpr, tpr, prevalence):
    """``P(pattern | group)`` of every cell for each parameter row: (S, n_cells) from (S, J), (S, J), (S, G)."""
    import jax

    from ..core import ds_loglik_rows, x64
    from ..data import padded_size

    n_cells, j = cell_pat.shape
    # Padded to a size fixed by the design (rows of missing responses, dropped after), so that JAX compiles
    # its operations once per design instead of once per set of observed strata.
    extra = max(padded_size(n_cells, int(np.shape(prevalence)[1]), j) - n_cells, 0)
    pat = np.concatenate([cell_pat, np.full((extra, j), -1, np.int8)]).astype(np.int32)
    grp = np.concatenate([cell_group, np.zeros(extra, np.int32)])
    with x64():
        fn = jax.vmap(lambda f, t, p: ds_loglik_rows(pat, grp, f, t, p))
        out = np.asarray(fn(np.asarray(fpr, np.float64), np.asarray(tpr, np.float64),
                            np.asarray(prevalence, np.float64)))
    return np.exp(out[:, :n_cells])


def _pool(expected, cell_stratum, n_strata, min_expected):
    """Pooled-cell index of each cell (the rule of the module docstring) and the number of pooled cells."""
    pooled = np.empty(expected.size, np.int64)
    next_id = 0
    for s in range(n_strata):
        idx = np.flatnonzero(cell_stratum == s)
        idx = idx[np.argsort(expected[idx], kind="stable")]
        e = expected[idx]
        small = int(np.sum(e < min_expected))
        if small:
            # Merge the small cells, then the next smallest ones until the merged cell reaches min_expected.
            take = small
            while take < idx.size and e[:take].sum() < min_expected:
                take += 1
            pooled[idx[:take]] = next_id
            pooled[idx[take:]] = next_id + 1 + np.arange(idx.size - take)
            next_id += 1 + idx.size - take
        else:
            pooled[idx] = next_id + np.arange(idx.size)
            next_id += idx.size
    return pooled, next_id


def _x2(observed, expected, pooled, n_pooled):
    """Pearson X^2 over pooled cells; ``observed``, ``expected`` of shape (..., n_cells)."""
    o = np.stack([np.bincount(pooled, weights=row, minlength=n_pooled) for row in observed.reshape(-1, pooled.size)])
    e = np.stack([np.bincount(pooled, weights=row, minlength=n_pooled) for row in expected.reshape(-1, pooled.size)])
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(e > 0, (o - e) ** 2 / e, 0.0)
    return terms.sum(axis=1).reshape(observed.shape[:-1])


# ------------------------------------------------------------------ agreement
def _agreement_design(cell_pat, cell_group, n_groups):
    """Indicator matrices: pairs and each annotator with the others, overall and per group."""
    j = cell_pat.shape[1]
    pairs = list(combinations(range(j), 2))
    both = np.stack([(cell_pat[:, a] >= 0) & (cell_pat[:, b] >= 0) for a, b in pairs], 1).astype(np.float64)
    agree = np.stack([(cell_pat[:, a] >= 0) & (cell_pat[:, a] == cell_pat[:, b]) for a, b in pairs], 1)
    agree = agree.astype(np.float64)
    # Annotator j with the others: sums over the pairs that contain j.
    member = np.array([[a == k or b == k for a, b in pairs] for k in range(j)], dtype=np.float64).T  # (P, J)
    onehot = np.eye(n_groups)[cell_group]  # (n_cells, G)
    return pairs, both, agree, member, onehot


def _agreement_stats(counts, design):
    """Agreement values of count vectors (B, n_cells): pairs overall (B, P), pairs per group (B, G, P),
    annotators (B, J), and the numbers of co-labelled items (same shapes)."""
    _, both, agree, member, onehot = design
    n_pair, a_pair = counts @ both, counts @ agree
    n_grp = np.einsum("bc,cg,cp->bgp", counts, onehot, both)
    a_grp = np.einsum("bc,cg,cp->bgp", counts, onehot, agree)
    n_ann, a_ann = n_pair @ member, a_pair @ member
    with np.errstate(divide="ignore", invalid="ignore"):
        return (a_pair / n_pair, a_grp / n_grp, a_ann / n_ann), (n_pair, n_grp, n_ann)


def _max_z(d_obs, d_rep, m_obs, m_rep, n):
    """Largest binomially standardised difference ``|d| / sqrt(m (1 - m) / n)`` of the observed (B, K) and of
    each replicate (B, K), with ``m`` the model-implied rate of each (B, K) and ``n`` (K,) the co-labelled
    counts (the same for every replicate); also the entry where the observed one is largest.

    Each data set is standardised by its own fitted rates, never by the spread of the replicates, so the
    observed and the replicated maxima are computed alike (standardising by the replicates' own spread shrinks
    their z and made these checks warn at twice the stated rate with 19 replicates).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        z_obs = np.abs(d_obs) / np.sqrt(m_obs * (1 - m_obs) / n)
        z_rep = np.abs(d_rep) / np.sqrt(m_rep * (1 - m_rep) / n)
    ok = np.all(np.isfinite(z_obs), axis=0) & (n > 0)
    if not np.any(ok):
        return None
    z_rep = np.where(np.isfinite(z_rep[:, ok]), z_rep[:, ok], 0.0)
    worst = int(np.flatnonzero(ok)[np.argmax(z_obs[:, ok].mean(axis=0))])
    return z_obs[:, ok].max(axis=1), z_rep.max(axis=1), worst


# ------------------------------------------------------------------ validation
def _check_iv(data, fit, n_replicates, seed, alpha, min_expected):
    from ..data import AnnotationSet
    from ..data.outofcore import SufficientStats
    from ..models.em_result import EM_MODELS
    from ..models.result import FitResult
    from ..models.inputs import prepare_inputs

    if not isinstance(fit, FitResult):
        raise ValueError(f"model_checks: `fit` must be a FitResult of fit_em, fit_map or fit_nuts; got "
                         f"{type(fit).__name__}.")
    if fit.model not in EM_MODELS:
        raise ValueError(f"model_checks: model={fit.model!r} is not supported; the checks need one of "
                         f"{list(EM_MODELS)} (closed-form EM refits on the (group, pattern) counts).")
    if fit.channel is None:
        raise ValueError(f"model_checks: this fit has no estimate ({fit.reason or 'every EM start failed'}).")
    if fit.method == "nuts" and fit.draws is None:
        raise ValueError("model_checks: a NUTS fit without draws.")
    if isinstance(n_replicates, bool) or not isinstance(n_replicates, (int, np.integer)) or n_replicates < 19:
        raise ValueError(f"model_checks: `n_replicates` must be an int >= 19 (so that a p-value can reach 0.05); got "
                         f"{n_replicates!r}.")
    if not (isinstance(alpha, (float, int)) and 0 < float(alpha) < 1):
        raise ValueError(f"model_checks: `alpha` must be in (0, 1); got {alpha!r}.")
    if not (isinstance(min_expected, (float, int)) and float(min_expected) >= 0):
        raise ValueError(f"model_checks: `min_expected` must be a number >= 0; got {min_expected!r}.")
    if not isinstance(data, (AnnotationSet, SufficientStats)) or getattr(data, "kind", "binary") != "binary":
        raise ValueError(f"model_checks: `data` must be the AnnotationSet (or SufficientStats) the model was fitted "
                         f"to; got {type(data).__name__}.")
    inp = fit.inputs
    if data.n_items != inp.n_items or data.n_annotators != inp.n_annotators:
        raise ValueError(f"model_checks: `data` has {data.n_items} items and {data.n_annotators} annotators, the fit "
                         f"{inp.n_items} and {inp.n_annotators}: pass the data the model was fitted to.")
    if getattr(inp, "sparse", False):
        # EM's sparse path keeps the responses themselves: the same triples as the fit's.
        same = isinstance(data, AnnotationSet) and all(
            np.array_equal(np.asarray(a), np.asarray(b))
            for a, b in zip(data.responses, (inp.item, inp.annotator, inp.label)))
        if not same:
            raise ValueError("model_checks: the responses of `data` differ from those the model was fitted to: pass "
                             "the data of the fit.")
        return int(n_replicates), float(alpha), float(min_expected)
    # The same (group, pattern) counts as the fit's: the checks are about the data the estimate came from.
    mine = prepare_inputs(data, fit.model, fit.groups)
    if mine.counts.shape != inp.counts.shape or not np.array_equal(mine.counts, inp.counts):
        raise ValueError("model_checks: the (score group, response pattern) counts of `data` differ from those the "
                         "model was fitted to: pass the data of the fit.")
    return int(n_replicates), float(alpha), float(min_expected)


def _params(fit):
    """(fpr (S, J), tpr (S, J), prevalence (S, G)) of the point estimate (S = 1) or of every draw."""
    g = fit.inputs.n_groups
    if fit.method == "nuts":
        d = fit.draws
        s = d["fpr"].shape[0] * d["fpr"].shape[1]
        return (d["fpr"].reshape(s, -1), d["tpr"].reshape(s, -1), np.asarray(d["prevalence"]).reshape(s, g))
    p = fit.point
    return (np.asarray(p["fpr"])[None], np.asarray(p["tpr"])[None], np.asarray(p["prevalence"]).reshape(1, g))


# ------------------------------------------------------------------ the function
def model_checks(data, fit, *, n_replicates: int = 200, seed: int = 0, alpha: float = ALPHA,
                 min_expected: float = MIN_EXPECTED, progress_bar: bool = False) -> ModelChecks:
    """Predictive checks of a fitted grouped channel model: cell counts, pairwise and per-annotator agreement.

    Parameters
    ----------
    data : AnnotationSet or SufficientStats
        The data ``fit`` was fitted to (its (group, pattern) counts are checked to be the fit's).
    fit : FitResult
        From :func:`~noisycal_bayes.fit_em`, :func:`~noisycal_bayes.fit_map` or
        :func:`~noisycal_bayes.fit_nuts`, model ``"grouped"``, ``"histogram"`` or ``"dawid_skene"``.
    n_replicates : int, default 200
        EM / MAP: bootstrap replicates, each refitted by EM. NUTS: posterior draws used (evenly spaced over
        the chains; all of them when there are fewer). At least 19. With ``(n_replicates + 1) * alpha`` a
        whole number the checks warn at exactly the rate ``alpha`` for exchangeable replicates (e.g. 199, 99).
    seed : int, default 0
        Seed of the replicates.
    alpha : float, default 0.05
        A check warns when its p-value is at most ``alpha``.
    min_expected : float, default 5
        Cells with a smaller fitted expected count are pooled (module docstring).
    progress_bar : bool, default False
        EM / MAP: a bar over the bootstrap refits, shown only when stderr is a terminal; the result is the same
        either way. (NUTS replicates are drawn in one vectorised step and need none.)

    Returns
    -------
    ModelChecks
        ``table`` (one row per check), ``residuals`` per cell, ``agreement`` per pair / annotator and group,
        ``plot()``.

    Raises
    ------
    ValueError
        ``fit`` not a FitResult of a supported model, without an estimate, or not fitted to ``data``;
        ``n_replicates`` below 19; ``alpha`` outside (0, 1); a negative ``min_expected``.

    Notes
    -----
    The statistics, the pooling rule, the replicates and the p-values are described in
    :mod:`noisycal_bayes.diagnostics.checks`. The degrees of freedom of the design are
    ``sum_s (2^|O_s| - 1) - n_params`` over the observed (group, observed-annotators) strata, with
    ``n_params = n_groups + 2 J``; for complete data ``G (2^J - 1) - (G + 2J)`` (DESIGN.md §8). When that is
    ``<= 0``, or pooling leaves no degrees of freedom, every check is ``not_testable``. Designs without cell
    tables (EM's sparse path, more annotators than 64-bit cell keys hold, more than :data:`MAX_CELLS` cells) get
    the response-level checks of the module docstring for NUTS fits and ``not_testable`` rows with the reason for
    EM / MAP fits.

    Examples
    --------
    >>> from noisycal_bayes import Binning, fit_em
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=0)
    >>> fit = fit_em(sim.data, groups=Binning.equal_mass(3), n_starts=3)
    >>> checks = model_checks(sim.data, fit, n_replicates=19)
    >>> checks.table["name"].tolist()[:4]
    ['posterior_predictive', 'pairwise_agreement', 'pairwise_agreement_by_group', 'annotator_agreement']
    >>> checks.table["name"].tolist()[4:]
    ['score_dependent_noise', 'annotator_dependence']
    >>> one = model_checks(sim.data, fit_em(sim.data, model="dawid_skene", n_starts=3), n_replicates=19)
    >>> one.status, one.df
    ('not_testable', 0)
    """
    binary_only(data, "model_checks", "evaluate_multiclass (which runs the K-class model checks)")
    n_replicates, alpha, min_expected = _check_iv(data, fit, n_replicates, seed, alpha, min_expected)
    inp = fit.inputs
    j, n_groups = inp.n_annotators, inp.n_groups
    try:
        cell_pat, cell_group, cell_stratum, observed, n_stratum, n_obs = _strata(inp)
    except _CellsUnavailable as why:
        return _response_checks(data, fit, str(why), n_replicates=n_replicates, seed=seed, alpha=alpha,
                                min_expected=min_expected)
    n_strata = n_stratum.size
    n_params = n_groups + 2 * j
    design_df = int(np.sum(2 ** n_obs - 1)) - n_params
    design = _agreement_design(cell_pat, cell_group, n_groups)
    rng = np.random.default_rng(seed)
    fpr, tpr, prev = _params(fit)
    nuts = fit.method == "nuts"
    if nuts:
        total = fpr.shape[0]
        use = np.unique(np.linspace(0, total - 1, min(n_replicates, total)).round().astype(np.int64))
        fpr, tpr, prev = fpr[use], tpr[use], prev[use]
    probs = _cell_probs(cell_pat, cell_group, fpr, tpr, prev)  # (S, n_cells)
    expected_draws = probs * n_stratum[cell_stratum]
    expected = expected_draws.mean(axis=0)
    pooled, n_pooled = _pool(expected, cell_stratum, n_strata, min_expected)
    pooled_per_stratum = np.array([np.unique(pooled[cell_stratum == s]).size for s in range(n_strata)])
    df = int(np.sum(pooled_per_stratum - 1)) - n_params
    settings = {"seed": seed, "fit_method": fit.method, "n_draws_used": int(fpr.shape[0]) if nuts else 0}

    reason = ""
    if design_df <= 0:
        reason = (f"the design leaves no degrees of freedom: {int(np.sum(2 ** n_obs - 1))} free cell probabilities "
                  f"for {n_params} parameters ({n_groups} group(s), {j} annotators); the model reproduces any data "
                  "exactly. Use more score groups or more annotators to test it.")
    elif df <= 0:
        reason = (f"after pooling cells with expected count < {min_expected:g}, no degrees of freedom are left "
                  f"({n_pooled} pooled cells in {n_strata} strata for {n_params} parameters): too few items.")

    # Replicated cell counts, stratum sizes kept (the conditional multinomial of the module docstring).
    width = int(2 ** n_obs.max())
    slot = np.concatenate([np.arange(2 ** k) for k in n_obs])

    def draw(p):
        table = np.zeros((n_strata, width))
        table[cell_stratum, slot] = p
        table /= table.sum(axis=1, keepdims=True)  # rounding: each stratum's 2^k probabilities sum to 1
        rep = rng.multinomial(n_stratum.astype(np.int64), table)
        return rep[cell_stratum, slot].astype(np.float64)

    n_failed = 0
    if reason:
        replicated = observed_disc = np.zeros(0)
        reps = exp_rep = exp_obs = np.zeros((0, observed.size))
    elif nuts:
        # Realised discrepancies: observed and replicated counts both against the expected counts of the draw.
        reps = np.stack([draw(p) for p in probs])
        exp_rep = exp_obs = expected_draws
        replicated = _x2(reps, expected_draws, pooled, n_pooled)
        observed_disc = _x2(np.broadcast_to(observed, reps.shape), expected_draws, pooled, n_pooled)
    else:
        reps, refits = _bootstrap(fit, draw, probs[0], cell_pat, cell_group, n_replicates,
                                   progress_bar=progress_bar)
        ok = np.array([r is not None for r in refits])
        n_failed = int(np.sum(~ok))
        reps = reps[ok]
        if reps.shape[0] == 0:
            raise ValueError("model_checks: every bootstrap refit failed; the estimate may sit on the boundary.")
        rf = [r for r in refits if r is not None]
        p_rep = _cell_probs(cell_pat, cell_group, np.stack([r[0] for r in rf]), np.stack([r[1] for r in rf]),
                            np.stack([r[2] for r in rf]))
        # Each replicate against its own refit: the p-value accounts for the estimation of the parameters.
        exp_rep, exp_obs = p_rep * n_stratum[cell_stratum], expected[None]
        replicated = _x2(reps, exp_rep, pooled, n_pooled)
        observed_disc = np.full(replicated.size, float(_x2(observed[None], expected[None], pooled, n_pooled)[0]))

    # ---- table
    rows = []
    if reason:
        statistic = p_value = float("nan")
        names = [n for n in CHECK_NAMES if n != "pairwise_agreement_by_group" or n_groups > 1]
        rows = [dict(name=n, status="not_testable", statistic=np.nan, p_value=np.nan, detail=reason) for n in names]
    else:
        statistic = float(np.mean(observed_disc))
        p_value = float((1 + np.sum(replicated >= observed_disc)) / (1 + replicated.size))
        from scipy.stats import chi2

        label = "bootstrap (EM refitted on each replicate)" if not nuts else "posterior predictive (realised)"
        rows.append(dict(name="posterior_predictive", status="warn" if p_value <= alpha else "pass",
                         statistic=statistic, p_value=p_value,
                         detail=(f"Pearson X^2 on {n_pooled} pooled cells of {observed.size} (expected >= "
                                 f"{min_expected:g}), {df} df (chi-square p = {chi2.sf(statistic, df):.3g}); "
                                 f"{label} p from {replicated.size} replicates"
                                 + (f", {n_failed} failed refits left out" if n_failed else ""))))
    # Agreement: observed minus model-implied rates (at the estimate / draw), against the same difference for
    # each replicate (at its refit / draw); a replicate without refit would make these checks conservative.
    obs_stats, obs_n = _agreement_stats(observed[None], design)
    fit_stats = _agreement_stats(expected[None], design)[0]
    diffs = None
    if not reason:
        model_obs = _agreement_stats(exp_obs, design)[0]
        rep_stats = _agreement_stats(reps, design)[0]
        model_rep = _agreement_stats(exp_rep, design)[0]
        b = reps.shape[0]
        diffs = [(np.broadcast_to(o - m, (b,) + o.shape[1:]).reshape(b, -1), (r - mr).reshape(b, -1),
                  np.broadcast_to(m, (b,) + m.shape[1:]).reshape(b, -1), mr.reshape(b, -1), nn.reshape(-1))
                 for o, m, r, mr, nn in zip(obs_stats, model_obs, rep_stats, model_rep, obs_n)]
    agreement = _agreement_table(fit, design, obs_stats, obs_n, fit_stats, diffs, n_groups)
    if not reason:
        pairs = design[0]
        ids = list(fit.annotator_ids) or list(range(j))
        labels_pair = [f"{ids[a]}-{ids[b]}" for a, b in pairs]
        specs = [("pairwise_agreement", diffs[0], labels_pair),
                 ("pairwise_agreement_by_group", diffs[1],
                  [f"{p} in group {g}" for g in range(n_groups) for p in labels_pair]),
                 ("annotator_agreement", diffs[2], [f"{i} with the others" for i in ids])]
        for name, diff, lab in specs:
            if name == "pairwise_agreement_by_group" and n_groups == 1:
                continue
            rows.append(_agreement_row(name, diff, lab, alpha))
    if not reason:
        rows += _assumption_checks(cell_pat, cell_group, n_groups, observed, reps, exp_obs, exp_rep, design, alpha,
                                   list(fit.annotator_ids) or list(range(j)))
    table = pd.DataFrame(rows, columns=["name", "status", "statistic", "p_value", "detail"])

    # ---- residuals
    with np.errstate(divide="ignore", invalid="ignore"):
        pearson = np.where(expected > 0, (observed - expected) / np.sqrt(expected), np.nan)
        if reps.shape[0] > 1:
            sd = reps.std(axis=0, ddof=1)
            standardized = np.where(sd > 0, (observed - reps.mean(axis=0)) / sd, np.nan)
        else:
            standardized = np.full(observed.size, np.nan)
    pattern = ["".join("-" if v < 0 else str(int(v)) for v in row) for row in cell_pat]
    residuals = pd.DataFrame({"group": cell_group.astype(np.int64), "pattern": pattern, "stratum": cell_stratum,
                              "pooled_cell": pooled, "observed": observed, "expected": expected,
                              "pearson": pearson, "standardized": standardized})
    status = "not_testable" if reason else ("warn" if (table["status"] == "warn").any() else "pass")
    for arr in (replicated, observed_disc):
        arr.setflags(write=False)
    return ModelChecks(table=table, residuals=residuals, agreement=agreement, statistic=statistic, p_value=p_value,
                       df=df if not reason else min(df, design_df), replicated=replicated,
                       observed_discrepancy=observed_disc, method="posterior_predictive" if nuts else "bootstrap",
                       model=fit.model, n_replicates=n_replicates, n_failed=n_failed, alpha=alpha,
                       min_expected=min_expected, status=status, reason=reason, settings=settings)


def _agreement_row(name, diff, labels, alpha):
    """Table row of one agreement check: the largest ``|z|`` (:func:`_max_z`) against the replicates' maxima.

    ``diff = (d_obs, d_rep, m_obs, m_rep, n)`` as :func:`_max_z` takes them; ``labels`` names each entry.
    """
    d_obs, d_rep, m_obs, m_rep, n_co = diff
    mz = _max_z(d_obs, d_rep, m_obs, m_rep, n_co)
    if mz is None:
        return dict(name=name, status="not_testable", statistic=np.nan, p_value=np.nan,
                    detail="no co-labelled items, or the replicates do not vary")
    z_obs, z_rep, worst = mz
    p = float((1 + np.sum(z_rep >= z_obs)) / (1 + z_rep.size))
    return dict(name=name, status="warn" if p <= alpha else "pass", statistic=float(np.mean(z_obs)), p_value=p,
                detail=(f"largest |z| of {len(labels) - int(np.sum(np.isnan(d_obs[0])))} "
                        f"agreement rates (observed minus fitted): {labels[worst]}"))


def _untestable(fit, reason, *, n_replicates, alpha, min_expected, settings, rows=None):
    """A :class:`ModelChecks` whose table holds ``rows`` (default: every check ``not_testable`` with ``reason``),
    without cell residuals."""
    n_groups = fit.inputs.n_groups
    names = [n for n in CHECK_NAMES if n != "pairwise_agreement_by_group" or n_groups > 1]
    if rows is None:
        rows = [dict(name=n, status="not_testable", statistic=np.nan, p_value=np.nan, detail=reason) for n in names]
    table = pd.DataFrame(rows, columns=["name", "status", "statistic", "p_value", "detail"])
    residuals = pd.DataFrame({c: pd.Series(dtype=t) for c, t in (
        ("group", np.int64), ("pattern", object), ("stratum", np.int64), ("pooled_cell", np.int64),
        ("observed", np.float64), ("expected", np.float64), ("pearson", np.float64), ("standardized", np.float64))})
    statuses = table["status"]
    status = ("not_testable" if (statuses == "not_testable").all() else
              "warn" if (statuses == "warn").any() else "pass")
    empty = np.zeros(0)
    empty.setflags(write=False)
    return ModelChecks(table=table, residuals=residuals, agreement=pd.DataFrame(
        columns=["kind", "annotator", "other", "group", "n_items", "observed", "expected", "difference_sd", "z",
                 "p_value"]), statistic=float("nan"), p_value=float("nan"), df=0, replicated=empty,
        observed_discrepancy=empty, method="posterior_predictive" if fit.method == "nuts" else "bootstrap",
        model=fit.model, n_replicates=n_replicates, n_failed=0, alpha=alpha, min_expected=min_expected,
        status=status, reason=reason if status == "not_testable" else "", settings=settings)


def _response_pairs(item, annotator):
    """Co-labelled pairs of responses ``(r1, r2)``: two responses to one item by different annotators, with
    ``annotator[r1] < annotator[r2]``; ``item`` sorted (the storage order of ``AnnotationSet.responses``)."""
    starts = np.flatnonzero(np.r_[True, item[1:] != item[:-1]])
    sizes = np.diff(np.r_[starts, item.size])
    r1, r2 = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for k in np.unique(sizes[sizes > 1]):
        lo, hi = np.triu_indices(int(k), 1)
        base = starts[sizes == k][:, None]
        r1.append((base + lo[None]).reshape(-1))
        r2.append((base + hi[None]).reshape(-1))
    r1, r2 = np.concatenate(r1), np.concatenate(r2)
    keep = annotator[r1] != annotator[r2]  # repeated labels of one annotator are not agreement between two
    r1, r2 = r1[keep], r2[keep]
    swap = annotator[r1] > annotator[r2]
    return np.where(swap, r2, r1), np.where(swap, r1, r2)


def _indicator(index, n_cols):
    """Sparse (n_rows, n_cols) 0/1 matrix with a one in column ``index[r]`` of row ``r`` (``-1``: no column)."""
    from scipy import sparse

    rows = np.flatnonzero(index >= 0)
    return sparse.csr_matrix((np.ones(rows.size), (rows, index[rows])), shape=(index.size, n_cols))


def _response_checks(data, fit, why, *, n_replicates, seed, alpha, min_expected):
    """The response-level checks of the module docstring, for designs whose cells cannot be tabulated (``why``)."""
    from ..data import AnnotationSet

    inp = fit.inputs
    j, n_groups = inp.n_annotators, inp.n_groups
    nuts = fit.method == "nuts"
    settings = {"seed": seed, "fit_method": fit.method, "n_draws_used": 0, "design": "responses"}
    common = dict(n_replicates=n_replicates, alpha=alpha, min_expected=min_expected, settings=settings)
    if not nuts:
        return _untestable(fit, f"{why}. The cell-count checks need response patterns that repeat, and the "
                           "response-level checks need posterior predictive replicates: the parametric bootstrap of "
                           f"a {fit.method.upper()} fit refits EM on the cell counts of each replicate. Check a "
                           "fit_nuts fit (evaluate(method='nuts'); pooling='partial' for crowds).", **common)
    if not isinstance(data, AnnotationSet):
        return _untestable(fit, f"{why}; the response-level checks need the responses: pass the AnnotationSet "
                           "(SufficientStats keep only pattern counts).", **common)
    item, ann, lab = (np.asarray(a, np.int64) for a in data.responses)
    r1, r2 = _response_pairs(item, ann)
    if r1.size > MAX_RESPONSE_PAIRS:
        return _untestable(fit, f"{why}; the items have {r1.size} co-labelled pairs of responses (> "
                           f"{MAX_RESPONSE_PAIRS}): too many labels per item for the response-level checks.", **common)
    ids = list(fit.annotator_ids) or list(range(j))
    item_group = np.asarray(fit.groups.index, np.int64)
    gold = np.full(inp.n_items, -1) if inp.gold is None else np.asarray(inp.gold, np.int64)
    pa, pb = ann[r1], ann[r2]
    pg = item_group[item[r1]]
    # Cells of the statistics: pairs of annotators (overall, per group), annotators, (group, annotator) slots.
    pair_key = pa * j + pb
    u_pair, pair_of = np.unique(pair_key, return_inverse=True)
    u_gpair, gpair_of = np.unique(pg * (j * j) + pair_key, return_inverse=True)
    n_pair = np.bincount(pair_of, minlength=u_pair.size).astype(np.float64)
    n_gpair = np.bincount(gpair_of, minlength=u_gpair.size).astype(np.float64)
    big_pair = np.flatnonzero(n_pair >= MIN_PAIR_ITEMS)
    big_gpair = np.flatnonzero(n_gpair >= MIN_PAIR_ITEMS)
    col_pair = np.full(u_pair.size, -1)
    col_pair[big_pair] = np.arange(big_pair.size)
    col_gpair = np.full(u_gpair.size, -1)
    col_gpair[big_gpair] = np.arange(big_gpair.size)
    m_pair, m_gpair = _indicator(col_pair[pair_of], big_pair.size), _indicator(col_gpair[gpair_of], big_gpair.size)
    m_all = _indicator(gpair_of, u_gpair.size)
    # Annotator with the others: every co-labelled pair of responses counts for both of its annotators.
    m_ann = _indicator(pa, j) + _indicator(pb, j)
    m_slot = _indicator(item_group[item] * j + ann, n_groups * j)
    n_ann = np.asarray(m_ann.sum(axis=0)).reshape(-1)
    n_slot = np.asarray(m_slot.sum(axis=0)).reshape(-1).reshape(n_groups, j)
    agree_obs = (lab[r1] == lab[r2]).astype(np.float64)

    fpr, tpr, prev = _params(fit)
    total = fpr.shape[0]
    use = np.unique(np.linspace(0, total - 1, min(n_replicates, total)).round().astype(np.int64))
    fpr, tpr, prev = fpr[use], tpr[use], prev[use]
    settings["n_draws_used"] = int(use.size)
    rng = np.random.default_rng(seed)
    stats = {k: [] for k in ("pair", "gpair", "ann", "trend_o", "trend_r", "dep_o", "dep_r", "model")}
    c = np.arange(n_groups, dtype=np.float64) - (n_groups - 1) / 2.0
    chunk = max(1, _RESPONSE_CHUNK // max(r1.size + item.size, 1))
    for start in range(0, use.size, chunk):
        f, t, pv = fpr[start:start + chunk], tpr[start:start + chunk], prev[start:start + chunk]
        q = np.where(gold[None] >= 0, gold[None].astype(np.float64), pv[:, item_group])  # P(Y_i = 1), (S, n_items)
        qi = q[:, item[r1]]
        m_p = ((1 - qi) * (f[:, pa] * f[:, pb] + (1 - f[:, pa]) * (1 - f[:, pb]))
               + qi * (t[:, pa] * t[:, pb] + (1 - t[:, pa]) * (1 - t[:, pb])))
        e_r = (1 - q[:, item]) * f[:, ann] + q[:, item] * t[:, ann]
        # Posterior predictive replicate at each draw: new clean labels (gold kept), new responses in the same slots.
        y = rng.random(q.shape) < q
        a_rep = (rng.random(e_r.shape) < np.where(y[:, item], t[:, ann], f[:, ann])).astype(np.float64)
        agree_rep = (a_rep[:, r1] == a_rep[:, r2]).astype(np.float64)
        for key, ind, n in (("pair", m_pair, n_pair[big_pair]), ("gpair", m_gpair, n_gpair[big_gpair]),
                            ("ann", m_ann, n_ann)):
            with np.errstate(divide="ignore", invalid="ignore"):
                mod = (m_p @ ind) / n
                stats[key].append(((agree_obs @ ind) / n - mod, (agree_rep @ ind) / n - mod, mod))
        if n_groups > 1:
            e_slot = (e_r @ m_slot).reshape(-1, n_groups, j)
            with np.errstate(divide="ignore", invalid="ignore"):
                m_slot_rate = np.nan_to_num(e_slot / n_slot[None])
            o_slot = (lab.astype(np.float64) @ m_slot).reshape(1, n_groups, j)
            stats["trend_o"].append(_trend_z(o_slot - e_slot, m_slot_rate, n_slot, c))
            stats["trend_r"].append(_trend_z((a_rep @ m_slot).reshape(-1, n_groups, j) - e_slot, m_slot_rate,
                                             n_slot, c))
        e_all = m_p @ m_all
        stats["dep_o"].append(_excess_z(np.broadcast_to(agree_obs @ m_all, e_all.shape), e_all, n_gpair))
        stats["dep_r"].append(_excess_z(agree_rep @ m_all, e_all, n_gpair))

    def pair_label(k):
        return f"{ids[k // j]}-{ids[k % j]}"

    lab_pair = [pair_label(int(k)) for k in u_pair[big_pair]]
    lab_gpair = [f"{pair_label(int(k % (j * j)))} in group {int(k // (j * j))}" for k in u_gpair[big_gpair]]
    diffs, obs_stats, fit_stats, obs_n = [], [], [], []
    for key, n in (("pair", n_pair[big_pair]), ("gpair", n_gpair[big_gpair]), ("ann", n_ann)):
        d_obs, d_rep, mod = (np.concatenate(x) for x in zip(*stats[key]))
        diffs.append((d_obs, d_rep, mod, mod, n))
        obs_stats.append((d_obs + mod)[:1])
        fit_stats.append(mod.mean(axis=0, keepdims=True))
        obs_n.append(n[None])
    n_gp = " in a score group" if n_groups > 1 else ""
    rows = [dict(name="posterior_predictive", status="not_testable", statistic=np.nan, p_value=np.nan,
                 detail=f"{why}; the cell-count X^2 needs response patterns that repeat (the agreement checks "
                        "below compare responses instead)")]
    specs = [("pairwise_agreement", diffs[0], lab_pair, f"no pair of annotators co-labelled {MIN_PAIR_ITEMS} items"),
             ("pairwise_agreement_by_group", diffs[1], lab_gpair,
              f"no pair of annotators co-labelled {MIN_PAIR_ITEMS} items{n_gp}"),
             ("annotator_agreement", diffs[2], [f"{i} with the others" for i in ids], "no co-labelled items")]
    for name, diff, labels, empty in specs:
        if name == "pairwise_agreement_by_group" and n_groups == 1:
            continue
        rows.append(_agreement_row(name, diff, labels, alpha) if len(labels) else
                    dict(name=name, status="not_testable", statistic=np.nan, p_value=np.nan, detail=empty))
    if n_groups > 1:
        rows.append(_trend_row(np.concatenate(stats["trend_o"]), np.concatenate(stats["trend_r"]), n_groups, ids,
                               alpha))
    else:
        rows.append(dict(name="score_dependent_noise", status="not_testable", statistic=np.nan, p_value=np.nan,
                         detail="one score group: channels cannot be compared across scores (fit with score groups)"))
    rows.append(_dependence_row(np.concatenate(stats["dep_o"]), np.concatenate(stats["dep_r"]), float(r1.size),
                                u_pair.size, n_groups, alpha))
    for row in rows[1:]:
        if row["status"] != "not_testable":
            row["detail"] += f"; response-level, posterior predictive (realised) p from {use.size} draws"
    checks = _untestable(fit, why, rows=rows, **common)
    entries = ([("pair", ids[k // j], ids[k % j], -1, 0, c) for c, k in enumerate(u_pair[big_pair])]
               + [("pair", ids[(k % (j * j)) // j], ids[k % j], int(k // (j * j)), 1, c)
                  for c, k in enumerate(u_gpair[big_gpair])]
               + [("annotator", ids[k], "others", -1, 2, k) for k in range(j) if n_ann[k] > 0])
    agreement = _agreement_rows(entries, obs_stats, obs_n, fit_stats, diffs)
    return dataclasses.replace(checks, agreement=agreement) if len(agreement) else checks


def _trend_z(d, m, n, c):
    """Trend contrast of count residuals per annotator: ``sum_g c_g d_gj / sqrt(sum_g c_g^2 n_gj m_gj (1 - m_gj))``.

    ``d`` (B, G, J) count residuals, ``m`` (B, G, J) fitted rates, ``n`` (G, J) responses, ``c`` (G,) -> (B, J).
    """
    var = np.where(n[None] > 0, (c[None, :, None] ** 2) * n[None] * m * (1 - m), 0.0)
    num = np.where(n[None] > 0, c[None, :, None] * d, 0.0).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / np.sqrt(var.sum(axis=1))


def _assumption_checks(cell_pat, cell_group, n_groups, observed, reps, exp_obs, exp_rep, design, alpha, ids):
    """Rows of the ``score_dependent_noise`` and ``annotator_dependence`` checks (module docstring).

    Each data set (observed, and every replicate) is compared with its own fitted expected counts
    (``exp_obs``: (1 or B, n_cells), ``exp_rep``: (B, n_cells)), as the agreement checks are.
    """
    rows = []
    b = reps.shape[0]
    onehot = design[4]
    pos = (cell_pat == 1).astype(np.float64)
    obs = (cell_pat >= 0).astype(np.float64)
    exp_obs = np.broadcast_to(exp_obs, (b, exp_obs.shape[-1]))

    def per_group(counts, ind):
        return np.einsum("bc,cg,cj->bgj", counts, onehot, ind)

    # ---- score-dependent noise: a trend over the score groups in each annotator's positive-response residual.
    if n_groups < 2:
        rows.append(dict(name="score_dependent_noise", status="not_testable", statistic=np.nan, p_value=np.nan,
                         detail="one score group: channels cannot be compared across scores (fit with score groups)"))
    else:
        n_gj = per_group(observed[None], obs)[0]
        c = np.arange(n_groups, dtype=np.float64) - (n_groups - 1) / 2.0
        with np.errstate(divide="ignore", invalid="ignore"):
            m_obs = per_group(exp_obs, pos) / n_gj[None]
            m_rep = per_group(exp_rep, pos) / n_gj[None]
        m_obs, m_rep = np.nan_to_num(m_obs), np.nan_to_num(m_rep)
        z_obs = _trend_z(per_group(np.broadcast_to(observed, exp_obs.shape), pos) - per_group(exp_obs, pos), m_obs,
                         n_gj, c)
        z_rep = _trend_z(per_group(reps, pos) - per_group(exp_rep, pos), m_rep, n_gj, c)
        rows.append(_trend_row(z_obs, z_rep, n_groups, ids, alpha))
    # ---- annotator dependence: pooled excess agreement over pairs and score groups, one-sided.
    pairs, both, agree = design[0], design[1], design[2]
    if not pairs:
        rows.append(dict(name="annotator_dependence", status="not_testable", statistic=np.nan, p_value=np.nan,
                         detail="fewer than two annotators"))
        return rows
    n_gp = per_group(observed[None], both)[0]

    s_obs = _excess_z(per_group(np.broadcast_to(observed, exp_obs.shape), agree), per_group(exp_obs, agree), n_gp)
    s_rep = _excess_z(per_group(reps, agree), per_group(exp_rep, agree), n_gp)
    rows.append(_dependence_row(s_obs, s_rep, float(n_gp.sum()), len(pairs), n_groups, alpha))
    return rows


def _trend_row(z_obs, z_rep, n_groups, ids, alpha):
    """Table row of ``score_dependent_noise`` from the trend contrasts (:func:`_trend_z`) of the observed data
    ``z_obs`` (B or 1, J) and of the replicates ``z_rep`` (B, J)."""
    ok = np.all(np.isfinite(z_obs), axis=0)
    if not np.any(ok):
        return dict(name="score_dependent_noise", status="not_testable", statistic=np.nan, p_value=np.nan,
                    detail="no annotator has responses in two score groups")
    t_obs = np.abs(z_obs[:, ok]).max(axis=1)
    t_rep = np.nan_to_num(np.abs(z_rep[:, ok])).max(axis=1)
    p = float((1 + np.sum(t_rep >= t_obs)) / (1 + z_rep.shape[0]))
    worst = int(np.flatnonzero(ok)[np.argmax(np.abs(z_obs[:, ok]).mean(axis=0))])
    zw = float(z_obs[:, worst].mean())
    return dict(name="score_dependent_noise", status="warn" if p <= alpha else "pass",
                statistic=float(t_obs.mean()), p_value=p,
                detail=(f"largest |z| of the score trend in {int(ok.sum())} annotators' positive-response "
                        f"residuals over {n_groups} score groups: {ids[worst]} (z = {zw:+.2f}; > 0: "
                        "more positives than the shared channel predicts at high scores)"))


def _excess_z(a, e, n):
    """Pooled excess agreement ``S = sum (a - e) / sqrt(sum n m (1 - m))``, ``m = e / n``, per data set.

    ``a`` observed and ``e`` expected agreements of shape (B, ...cells), ``n`` co-labelled pairs of responses of
    shape (...cells,) -> (B,); the cells are (score group, pair of annotators).
    """
    axes = tuple(range(1, a.ndim))
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(n[None] > 0, e / n[None], 0.0)
    var = (n[None] * m * (1 - m)).sum(axis=axes)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (a - e).sum(axis=axes) / np.sqrt(var)


def _dependence_row(s_obs, s_rep, n_co, n_pairs, n_groups, alpha):
    """Table row of ``annotator_dependence`` from :func:`_excess_z` of the observed data and of each replicate,
    one-sided; ``n_co`` co-labelled pairs of responses over ``n_pairs`` pairs of annotators."""
    if not np.all(np.isfinite(s_obs)) or n_co == 0:
        return dict(name="annotator_dependence", status="not_testable", statistic=np.nan, p_value=np.nan,
                    detail="no co-labelled items")
    p = float((1 + np.sum(np.nan_to_num(s_rep, nan=-np.inf) >= s_obs)) / (1 + s_rep.shape[0]))
    return dict(name="annotator_dependence", status="warn" if p <= alpha else "pass",
                statistic=float(s_obs.mean()), p_value=p,
                detail=(f"pooled excess agreement z over {n_pairs} pairs x {n_groups} score groups "
                        f"({int(n_co)} co-labelled pairs of responses), one-sided: errors that coincide "
                        "more often than conditional independence allows raise it"))


def _bootstrap(fit, draw, p_hat, cell_pat, cell_group, n_replicates, *, progress_bar=False):
    """Parametric bootstrap: replicate counts from the estimate and an EM refit of each (warm-started there).

    Returns ``(reps (B, n_cells), refits)`` with ``refits[b] = (fpr, tpr, prevalence)`` or None if it failed.
    """
    from ..models.priors import em_prior_counts

    try:
        prior_counts = em_prior_counts(fit.prior) if fit.method == "map" else None
    except ValueError as err:
        raise ValueError(f"model_checks: the bootstrap refits this MAP fit by closed-form MAP-EM, which its prior does "
                         f"not allow ({err}). Check a maximum-likelihood fit_em fit, or a fit_nuts fit (posterior "
                         "predictive).") from None
    from ..data import padded_size

    s = fit.settings
    n_cells, j = cell_pat.shape
    # Zero-count rows (all responses missing) pad the table to a size fixed by the design, so that one compiled
    # EM serves every data set of that design whichever strata it has.
    extra = padded_size(n_cells, fit.inputs.n_groups, j) - n_cells
    patterns = np.concatenate([cell_pat, np.full((max(extra, 0), j), -1, np.int8)])
    group = np.concatenate([cell_group, np.zeros(max(extra, 0), np.int32)])
    reps = np.stack([draw(p_hat) for _ in range(n_replicates)])
    # All refits at once: the EM loop of fit_em (same E- and M-steps, objective and stopping rule), mapped over
    # the replicates' count vectors (inference.bootstrap's batched program; one call per chunk of replicates
    # instead of one per replicate, which cost 4-5 ms each and dominated the checks at 1e5 items).
    from ..core import x64
    from ..core.starts import CONVERGED, orient
    from ..inference.bootstrap import _batch_program, _warm_start

    batch = _batch_program(j, fit.inputs.n_groups, prior_counts, int(s.get("max_iter", 1000)))
    theta0 = _warm_start(fit)[0]
    size = min(_REFIT_CHUNK, n_replicates)
    thetas, statuses = [], []
    for start in progress(range(0, n_replicates, size), enabled=progress_bar, desc="model checks (bootstrap refits)"):
        chunk = np.zeros((size, patterns.shape[0]))
        m = min(size, n_replicates - start)
        chunk[:m, :n_cells] = reps[start:start + m]
        chunk[m:] = chunk[0]  # padding of the last chunk (one compiled shape; discarded)
        with x64():
            theta, _, status = (np.asarray(v) for v in batch(theta0, patterns.astype(np.int32),
                                                             group.astype(np.int32), chunk,
                                                             np.float64(s.get("tol", 1e-8))))
        thetas.append(theta[:m])
        statuses.append(status[:m])
    theta, status = np.concatenate(thetas), np.concatenate(statuses)
    refits = []
    for b in range(n_replicates):
        # fit_em's screening with min_gap = 0: a converged run, oriented (label exchange), every gap > 0.
        if status[b] != CONVERGED or not np.all(np.isfinite(theta[b])):
            refits.append(None)
            continue
        f, t, p, _ = orient(theta[b, :j], theta[b, j:2 * j], theta[b, 2 * j:])
        refits.append(None if np.any(np.asarray(t) - np.asarray(f) <= 0) else
                      (np.asarray(f), np.asarray(t), np.asarray(p)))
    return reps, refits


def _agreement_table(fit, design, obs_stats, obs_n, fit_stats, diffs, n_groups):
    """Per-entry agreement table (see :class:`ModelChecks`)."""
    pairs = design[0]
    j = fit.inputs.n_annotators
    ids = list(fit.annotator_ids) or list(range(j))
    n_pairs = len(pairs)
    entries = []  # (kind, annotator, other, group, which statistic, flat index)
    for p, (a, b) in enumerate(pairs):
        entries.append(("pair", ids[a], ids[b], -1, 0, p))
        entries += [("pair", ids[a], ids[b], g, 1, g * n_pairs + p) for g in range(n_groups)]
    entries += [("annotator", ids[k], "others", -1, 2, k) for k in range(j)]
    return _agreement_rows(entries, obs_stats, obs_n, fit_stats, diffs)


def _agreement_rows(entries, obs_stats, obs_n, fit_stats, diffs):
    """The agreement table (see :class:`ModelChecks`) of ``entries`` ``(kind, annotator, other, group, which,
    index)``: entry ``index`` of statistic ``which`` (0 pairs, 1 pairs per group, 2 annotators) of the arrays."""
    rows = []
    for kind, a, b, g, which, k in entries:
        obs, n = obs_stats[which][0].reshape(-1)[k], obs_n[which][0].reshape(-1)[k]
        fitted = fit_stats[which][0].reshape(-1)[k]
        sd = z = p = np.nan
        if diffs is not None and np.isfinite(obs):
            d_obs, d_rep = diffs[which][0][:, k], diffs[which][1][:, k]
            keep = np.isfinite(d_rep)
            d_obs, d_rep = d_obs[keep], d_rep[keep]
            if d_rep.size > 1:
                sd = float(d_rep.std(ddof=1))
                z = float((d_obs.mean() - d_rep.mean()) / sd) if sd > 0 else np.nan
                up = (1 + np.sum(d_rep >= d_obs)) / (1 + d_rep.size)
                down = (1 + np.sum(d_rep <= d_obs)) / (1 + d_rep.size)
                p = float(min(1.0, 2 * min(up, down)))
        rows.append(dict(kind=kind, annotator=a, other=b, group=g, n_items=float(n), observed=float(obs),
                         expected=float(fitted), difference_sd=sd, z=z, p_value=p))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ K classes
#: Bootstrap refits (EM) or posterior draws (NUTS) of the checks an evaluation runs (199: with alpha = 0.05 the
#: bootstrap p-value (1 + #) / 200 warns at exactly 5% under the model).
N_CHECK_REPLICATES = 199


def check_row(status, detail, statistic=None, p_value=None, name="pattern_counts") -> dict:
    """One JSON-ready row of the checks an evaluation reports: ``{name, status, statistic, p_value, detail}``."""
    return {"name": name, "status": status, "statistic": statistic, "p_value": p_value, "detail": detail}


class _Families:
    """Items split into families (score group x set of annotators who labelled); per family its items, the labels of
    those annotators as base-K pattern codes and the observed pattern counts (K^m cells, m annotators)."""

    def __init__(self, item, ann, lab, n_items, n_annotators, n_classes, groups):
        J, K = n_annotators, n_classes
        dense = np.full((n_items, J), -1, dtype=np.int64)
        dense[item, ann] = lab
        mask = dense >= 0
        # Families as the distinct rows of (group, mask of annotators J-1 .. 0): the order of the integer key
        # group * 2^J + sum_j mask_j 2^j, without the integer (it overflows int64 for J >= 63 annotators).
        fams, fam_of = np.unique(np.column_stack([groups, mask[:, ::-1]]), axis=0, return_inverse=True)
        fam_of = fam_of.reshape(-1)
        self.members, self.group, self.annotators, self.weights = [], [], [], []
        for f in range(len(fams)):
            rows = np.flatnonzero(fam_of == f)
            js = np.flatnonzero(mask[rows[0]])
            self.members.append(rows)
            self.group.append(int(groups[rows[0]]))
            self.annotators.append(js)
            self.weights.append(K ** np.arange(js.size))
        self.dense, self.K = dense, K
        # Python ints: K^m is exact for a family of any size m (int64 wraps from K^m >= 2^63).
        self.n_cells = sum(int(K) ** int(js.size) for js in self.annotators)
        self.n_free = sum(int(K) ** int(js.size) - 1 for js in self.annotators)

    def counts(self, dense) -> list:
        """Observed pattern counts per family from a dense (n_items, J) label table."""
        return [np.bincount(dense[np.ix_(rows, js)] @ w, minlength=self.K ** js.size).astype(np.float64)
                for rows, js, w in zip(self.members, self.annotators, self.weights)]

    def probs(self, f, confusion, prevalence):
        """``P(pattern)`` of family ``f`` for every pattern (base-K codes, first annotator least significant)."""
        K = self.K
        lik = np.ones((K, 1))
        for j in self.annotators[f][::-1]:
            # Outer product over the family's annotators: P(a_1..a_m | Y = y) for every pattern, per y.
            lik = (lik[:, :, None] * confusion[j][:, None, :]).reshape(K, -1)
        prob = prevalence[self.group[f]] @ lik
        return prob / prob.sum()


def _expected(fam: _Families, confusion, prevalence) -> np.ndarray:
    """Expected counts ``n_f P(pattern | group_f)`` of every family's cells, flat in family order."""
    return np.concatenate([fam.members[f].size * fam.probs(f, confusion, prevalence) for f in range(len(fam.members))])


def _cell_responses(fam: _Families):
    """``(cell, annotator, label)`` of every cell's responses (flat cells in family order: the base-K digits of the
    cell's code, first annotator least significant) and each cell's group."""
    cell, ann, lab, group, offset = [], [], [], [], 0
    for js, w, g in zip(fam.annotators, fam.weights, fam.group):
        codes = np.arange(fam.K ** js.size)
        cell.append(np.repeat(offset + codes, js.size))
        ann.append(np.tile(js, codes.size))
        lab.append(((codes[:, None] // w[None, :]) % fam.K).reshape(-1))
        group.append(np.full(codes.size, g))
        offset += codes.size
    return tuple(np.concatenate(v).astype(np.int64) for v in (cell, ann, lab)), np.concatenate(group)


class _Replicate:
    """The duck-typed data ``fit_em_multiclass`` reads, for one bootstrap replicate."""

    def __init__(self, responses, n_items, n_annotators, n_classes, probs):
        self.responses, self.n_items, self.n_annotators = responses, n_items, n_annotators
        self.n_classes, self.probs, self.gold, self.classes = n_classes, probs, None, tuple(range(n_classes))


def _refit_cells(counts, cells, cell_group, n_annotators, n_classes, init, seed, shape):
    """EM refitted to one replicate's cell counts from ``init`` alone: the cells with a positive count as items,
    their counts as weights (the full data's likelihood at the cost of its distinct rows); ``(confusion,
    prevalence)``. ``shape = (n_items, n_responses)`` pads the items and responses with weight-0 ones to one size
    for every replicate of the design (one compiled EM), unless the replicate needs more."""
    from ..inference import fit_em_multiclass

    cell, ann, lab = cells
    keep = counts > 0
    index = np.cumsum(keep) - 1
    sel = keep[cell]
    item, ann, lab = index[cell[sel]], ann[sel], lab[sel]
    n, m = int(keep.sum()), int(sel.sum())
    group, weight = cell_group[keep], counts[keep]
    if n < shape[0] and m <= shape[1]:
        # Weight-0 items (no likelihood, no M-step counts), the padded responses on the last of them.
        item = np.concatenate([item, np.full(shape[1] - m, shape[0] - 1)])
        ann, lab = (np.concatenate([v, np.zeros(shape[1] - m, np.int64)]) for v in (ann, lab))
        group, weight = np.concatenate([group, np.zeros(shape[0] - n, np.int64)]), np.r_[weight, np.zeros(shape[0] - n)]
        n = shape[0]
    n_groups = int(group.max()) + 1
    rep = _Replicate((item, ann, lab), n, n_annotators, n_classes, None)
    fit = fit_em_multiclass(rep, model="grouped", groups=group.astype(np.int32), weights=weight,
                            init=(init[0], init[1][:n_groups]), n_starts=0, seed=seed, path="sparse")
    return np.asarray(fit.confusion), np.asarray(fit.prevalence)


def run_multiclass_checks(data, fit, *, method: str = "em", seed: int = 0) -> tuple:
    """Predictive check of the K-class channel model on (score group x annotators who labelled x response pattern)
    counts; one row ``{name, status, statistic, p_value, detail}``.

    The discrepancy is Pearson's ``X^2 = sum (O - E)^2 / E`` over *pooled cells*: within each (group, set of
    annotators) family the cells whose expected count at the fit is below
    :data:`MIN_EXPECTED` are merged, with the next smallest ones until the merged cell reaches it (:func:`_pool`,
    the rule of the binary checks; a family of fewer items becomes one cell and carries no information); the same pooling serves every replicate. Unpooled, cells
    with a near-zero expected count dominate ``X^2`` and make it a statistic of rare patterns that a fit on the
    boundary never replicates. EM: a parametric bootstrap: :data:`N_CHECK_REPLICATES` data sets of family pattern
    counts drawn from the fit (multinomial, family sizes kept), each refitted by EM warm-started at the fit (no
    random starts: the standard parametric-bootstrap refit, on the replicate's distinct cells weighted by their
    counts) and compared with its own refit; p-value ``(1 + #{T_rep >= T_obs}) / (R + 1)``, warning when ``p <=``
    :data:`ALPHA` (calibrated: it warns at that rate under the model). NUTS: a posterior predictive check over
    as many posterior draws, observed and replicated counts compared with the same draw's expectation (Gelman, Meng
    & Stern 1996; conservative), pooled by the draws' mean expected counts. ``not_testable`` with repeated or gold
    labels, more than :data:`MAX_CELLS` cells, no more free cell probabilities than parameters, or no
    degrees of freedom left after pooling (``sum_f (pooled cells_f - 1) <= parameters``; a sparse crowd, where
    nearly every item has its own set of annotators).

    Parameters
    ----------
    data : MulticlassAnnotationSet
    fit : MulticlassEMFit or MulticlassPosterior
        The grouped model's fit: ``confusion`` (J, K, K) and ``prevalence`` (G, K), or their draws (S, ...).
    method : {"em", "nuts"}, default "em"
        ``"em"``: parametric bootstrap with EM refits; ``"nuts"``: posterior predictive over the draws.
    seed : int, default 0

    Returns
    -------
    tuple of dict
        One :func:`check_row` named ``pattern_counts``.
    """
    item, ann, lab = (np.asarray(x, dtype=np.int64) for x in data.responses)
    J, K = data.n_annotators, data.n_classes
    key = item * J + ann
    if np.unique(key).size != key.size:
        return (check_row("not_testable", "repeated labels: the check's response patterns hold one label per "
                          "(item, annotator)."),)
    gold = getattr(data, "gold", None)
    if gold is not None and (np.asarray(gold) >= 0).any():
        return (check_row("not_testable", "gold labels: the check compares annotator label patterns of items "
                          "whose clean label is unknown; gold items enter the model differently."),)
    groups = np.asarray(fit.groups, dtype=np.int64)
    fam = _Families(item, ann, lab, data.n_items, J, K, groups)
    n_groups = int(np.unique(groups).size)  # groups with items: an empty group's prevalence is no parameter
    n_params = n_groups * (K - 1) + J * K * (K - 1)
    if fam.n_cells > MAX_CELLS:
        n_cells = str(fam.n_cells) if fam.n_cells < 10 ** 9 else f"about 10^{len(str(fam.n_cells)) - 1}"
        return (check_row("not_testable", f"{n_cells} (group x pattern) cells exceed {MAX_CELLS}: too many "
                          "annotators per item for a pattern check."),)
    if fam.n_free <= n_params:
        return (check_row("not_testable", f"{fam.n_free} free cell probabilities for {n_params} parameters: the "
                          "design fits any counts exactly, so nothing can be tested."),)
    rng = np.random.default_rng(seed)
    observed = np.concatenate(fam.counts(fam.dense))
    n_fam = len(fam.members)
    stratum = np.repeat(np.arange(n_fam), [K ** js.size for js in fam.annotators])
    size = np.array([m.size for m in fam.members])
    conf, prev = np.asarray(fit.confusion), np.asarray(fit.prevalence)
    nuts = method != "em"
    if nuts:
        S = conf.shape[0]
        pick = rng.choice(S, size=min(N_CHECK_REPLICATES, S), replace=S < N_CHECK_REPLICATES)
        expected_draws = np.stack([_expected(fam, conf[d], prev[d]) for d in pick])
        expected = expected_draws.mean(axis=0)
    else:
        expected = _expected(fam, conf, prev)
    pooled, n_pooled = _pool(expected, stratum, n_fam, MIN_EXPECTED)
    df = int(sum(np.unique(pooled[stratum == f]).size - 1 for f in range(n_fam))) - n_params
    if df <= 0:
        return (check_row("not_testable", f"after pooling cells with expected count < {MIN_EXPECTED:g}, no degrees "
                          f"of freedom are left ({n_pooled} pooled cells in {n_fam} (group x annotators) families "
                          f"for {n_params} parameters): too few items per family, as in a sparse crowd where "
                          "nearly every item has its own annotators."),)
    slot = np.concatenate([np.arange(K ** js.size) for js in fam.annotators])
    width = int(K ** max(js.size for js in fam.annotators))

    def draw(e):
        """Replicated cell counts: per family multinomial(n_f, E / n_f) (the family sizes kept)."""
        table = np.zeros((n_fam, width))
        table[stratum, slot] = e
        table /= table.sum(axis=1, keepdims=True)  # rounding: each family's probabilities sum to 1
        return rng.multinomial(size, table)[stratum, slot].astype(np.float64)

    if not nuts:
        t_obs = float(_x2(observed, expected, pooled, n_pooled))
        cells, cell_group = _cell_responses(fam)
        # One padded size for every replicate: 10% above the expected number of occupied cells (and of their
        # responses), in the buckets the sparse EM compiles for (data.compress.bucket_size).
        from ..data.compress import bucket_size as _bucket

        occupied = 1.0 - (1.0 - np.minimum(expected / size[stratum], 1.0)) ** size[stratum]
        per_cell = np.bincount(cells[0], minlength=fam.n_cells)
        shape = (_bucket(int(1.1 * occupied.sum()) + 9) - 1, _bucket(int(1.1 * occupied @ per_cell) + 8 * J))
        t_rep, failed = [], 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the refits' own warnings are not the user's
            for _ in range(N_CHECK_REPLICATES):
                rep = draw(expected)
                try:
                    c_r, p_r = _refit_cells(rep, cells, cell_group, J, K, (conf, prev), seed, shape)
                except (ValueError, RuntimeError):
                    failed += 1
                    continue
                t_rep.append(float(_x2(rep, _expected(fam, c_r, p_r), pooled, n_pooled)))
        if len(t_rep) < 0.9 * N_CHECK_REPLICATES:
            return (check_row("not_testable", f"{failed} of {N_CHECK_REPLICATES} bootstrap refits failed."),)
        t_rep = np.asarray(t_rep)
        p = float((1 + np.sum(t_rep >= t_obs)) / (t_rep.size + 1))
        how = f"parametric bootstrap, {t_rep.size} data sets simulated from the EM fit and refitted"
        stat, ref = t_obs, float(t_rep.mean())
    else:
        reps = np.stack([draw(e) for e in expected_draws])
        t_obs = _x2(np.broadcast_to(observed, reps.shape), expected_draws, pooled, n_pooled)
        t_rep = _x2(reps, expected_draws, pooled, n_pooled)
        p = float(np.mean(t_rep >= t_obs))
        how = f"posterior predictive, {pick.size} posterior draws"
        stat, ref = float(t_obs.mean()), float(t_rep.mean())
    status = "warn" if p <= ALPHA else "pass"
    detail = (f"Pearson X^2 on {n_pooled} pooled cells of {fam.n_cells} (group x annotators x pattern) cells "
              f"(expected >= {MIN_EXPECTED:g}), {df} df ({how}); observed discrepancy {stat:.1f} vs replicated "
              f"{ref:.1f} on average; warns at p <= {ALPHA}")
    return (check_row(status, detail, float(stat), p),)
