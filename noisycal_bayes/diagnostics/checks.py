"""Predictive model checks of a fitted grouped channel model: does the data look like the model's replicates?

In score group ``g`` the grouped Dawid-Skene model (DESIGN.md §4, §8) gives a response pattern the probability
``P(A = a | g) = (1 - pi_g) prod_j a_j^A_j (1 - a_j)^(1 - A_j) + pi_g prod_j b_j^A_j (1 - b_j)^(1 - A_j)`` over
the annotators who answered (:func:`noisycal_bayes.core.ds_loglik_rows`). Within a *stratum* (group, set of
observed annotators) the pattern counts are multinomial. EM / MAP fits are checked by a parametric bootstrap with
EM refitted on each replicate; NUTS fits by posterior predictive checks with realised discrepancies (Gelman, Meng
and Stern, *Statistica Sinica* 6, 1996). The checks: Pearson's ``X^2`` over pooled cells (cells with fitted
expected count below ``min_expected`` merged within their stratum), pairwise, per-group and per-annotator
agreement (largest binomial ``|z|`` of observed minus model-implied rates), and two targeted checks of the
assumptions behind every NC-ECE (DESIGN.md §2): ``score_dependent_noise`` (a score trend in an annotator's
residuals) and ``annotator_dependence`` (pooled excess agreement, one-sided). Designs whose cells cannot be
tabulated get the same agreement and targeted statistics from the responses (NUTS fits). A design with no degrees
of freedom (``G (2^J - 1) <= G + 2J``) makes every check ``not_testable``, never ``pass``.

Statistics, pooling rule, p-values and the response-level checks: docs/model_checks.md.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import binary_only
from ._statistics import (ALPHA, MAX_CELLS, MIN_EXPECTED, ONE_GROUP, _CellsUnavailable, _agreement_design,
                          _agreement_row, _agreement_rows, _agreement_stats, _agreement_table, _assumption_checks,
                          _bootstrap, _cell_probs, _dependence_row, _excess_z, _indicator, _params, _pool,
                          _response_pairs, _strata, _trend_row, _trend_z, _untestable_row, _x2)
# The K-class check of an evaluation, named here (its import path) and written in _families.py.
from ._families import N_CHECK_REPLICATES, _Families, check_row, run_multiclass_checks  # noqa: F401

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
        ``"responses"`` when the design has no cell tables (docs/model_checks.md: response-level checks; then
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
    binary_only(fit, "model_checks", "evaluate_multiclass (which runs the K-class model checks)", name="fit")
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
        Cells with a smaller fitted expected count are pooled (docs/model_checks.md, pooling rule).
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
    The statistics, the pooling rule, the replicates and the p-values are described in docs/model_checks.md. The
    degrees of freedom of the design are ``sum_s (2^|O_s| - 1) - n_params`` over the observed (group,
    observed-annotators) strata, with ``n_params = n_groups + 2 J``; for complete data ``G (2^J - 1) - (G + 2J)``
    (DESIGN.md §8). When that is ``<= 0``, or pooling leaves no degrees of freedom, every check is
    ``not_testable``. Designs without cell
    tables get the response-level checks (docs/model_checks.md) for NUTS fits, and ``not_testable`` rows with the
    reason for EM / MAP fits.

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

    # Replicated cell counts, stratum sizes kept (the conditional multinomial within a stratum).
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
        rows = _untestable_rows(n_groups, reason)
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


def _untestable_rows(n_groups, reason):
    """Every check's row ``not_testable`` with ``reason`` (``pairwise_agreement_by_group`` only with groups)."""
    return [_untestable_row(n, reason) for n in CHECK_NAMES if n != "pairwise_agreement_by_group" or n_groups > 1]


def _untestable(fit, reason, *, n_replicates, alpha, min_expected, settings, rows=None):
    """A :class:`ModelChecks` whose table holds ``rows`` (default: every check ``not_testable`` with ``reason``),
    without cell residuals."""
    if rows is None:
        rows = _untestable_rows(fit.inputs.n_groups, reason)
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


def _response_checks(data, fit, why, *, n_replicates, seed, alpha, min_expected):
    """The response-level checks (docs/model_checks.md), for designs whose cells cannot be tabulated (``why``)."""
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
    rows = [_untestable_row("posterior_predictive", f"{why}; the cell-count X^2 needs response patterns that repeat "
                            "(the agreement checks below compare responses instead)")]
    specs = [("pairwise_agreement", diffs[0], lab_pair, f"no pair of annotators co-labelled {MIN_PAIR_ITEMS} items"),
             ("pairwise_agreement_by_group", diffs[1], lab_gpair,
              f"no pair of annotators co-labelled {MIN_PAIR_ITEMS} items{n_gp}"),
             ("annotator_agreement", diffs[2], [f"{i} with the others" for i in ids], "no co-labelled items")]
    for name, diff, labels, empty in specs:
        if name == "pairwise_agreement_by_group" and n_groups == 1:
            continue
        rows.append(_agreement_row(name, diff, labels, alpha) if len(labels) else _untestable_row(name, empty))
    if n_groups > 1:
        rows.append(_trend_row(np.concatenate(stats["trend_o"]), np.concatenate(stats["trend_r"]), n_groups, ids,
                               alpha))
    else:
        rows.append(_untestable_row("score_dependent_noise", ONE_GROUP))
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
