"""Prior predictive check: do data sets drawn from a NumPyro model's prior look like the data?

:func:`prior_predictive_check` draws parameters from the prior and responses for the data's observed (item,
annotator) slots, and compares the observed positive-label rates, pairwise agreement rates and (score group,
response pattern) counts with their prior predictive distributions: a rate outside the range of every draw
says the prior rules out data like these (docs/model_checks.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

__all__ = ["PRIOR_PREDICTIVE_MODELS", "PriorPredictiveCheck", "prior_predictive_check"]

#: Models :func:`prior_predictive_check` draws from: the NumPyro models of ``fit_nuts`` with score groups or
#: one prevalence, and the score-dependent and correlated models of :mod:`noisycal_bayes.diagnostics.alternatives`.
PRIOR_PREDICTIVE_MODELS = ("dawid_skene", "grouped", "histogram", "monotone", "score_dependent", "correlated")
# Largest number of replicated responses held in memory at once (draws x items x annotators).
_PP_CHUNK_CELLS = 20_000_000


@dataclass(frozen=True, eq=False)
class PriorPredictiveCheck:
    """Observed statistics against the prior predictive distribution of a NumPyro model
    (:func:`prior_predictive_check`).

    Attributes
    ----------
    table : DataFrame
        One row per statistic: ``statistic`` (``"positive_rate"`` overall and per annotator, ``"agreement"``
        per pair of annotators, ``"pattern_count"`` per (score group, response pattern) cell seen in the data),
        ``group`` (-1 for all groups), ``annotators`` (``"all"``, an annotator id, ``"a-b"``, or the pattern:
        one character per annotator, ``0``, ``1`` or ``-`` for missing), ``observed``, ``prior_mean``,
        ``lower`` and ``upper`` (equal-tailed ``level`` quantiles of the prior predictive), ``prior_min`` and
        ``prior_max`` (range of the draws), ``p_value`` (two-sided tail probability
        ``min(1, 2 min(P(rep <= obs), P(rep >= obs)))`` with ``(1 + count) / (1 + n_draws)``) and ``status``:
        ``"inside"`` the interval, ``"tail"`` (outside the interval, inside the range of the draws) or
        ``"outside"`` the range of every draw.
    model : str
    level : float
    n_draws : int
    status : str
        ``"warn"`` when a positive-label rate or an agreement rate is ``"outside"`` (the prior does not produce
        data like these, at this number of draws), else ``"pass"``. Pattern counts are reported, not used here:
        there are many of them, and some fall outside the range of the draws by chance.
    settings : dict
        ``seed``, ``n_groups``, ``n_items``.
    """

    table: pd.DataFrame
    model: str
    level: float
    n_draws: int
    status: str
    settings: dict = field(default_factory=dict)

    @property
    def flagged(self) -> pd.DataFrame:
        """Rows whose observed value lies outside the range of the prior predictive draws."""
        return self.table[self.table["status"] == "outside"]

    def plot(self, ax=None, *, statistics=("positive_rate", "agreement"), title: str | None = None):
        """Observed statistics (crosses) against their prior predictive intervals (bars) and means (dots).

        Parameters
        ----------
        ax : matplotlib Axes, optional
        statistics : sequence of str, default ("positive_rate", "agreement")
            Kinds of rows drawn (``"pattern_count"`` rows are on very different scales; draw them separately).
        title : str, optional

        Returns
        -------
        matplotlib.figure.Figure
        """
        kinds = ("positive_rate", "agreement", "pattern_count")
        bad = [s for s in statistics if s not in kinds]
        if bad or not statistics:
            raise ValueError(f"`statistics` must be a non-empty sequence of {list(kinds)}; got {list(statistics)}.")
        rows = self.table[self.table["statistic"].isin(list(statistics))]
        try:
            from matplotlib.figure import Figure
        except ImportError:  # pragma: no cover - depends on the environment
            raise ImportError("plotting needs matplotlib: pip install 'noisycal_bayes[plot]'") from None
        if ax is None:
            fig = Figure(figsize=(6.0, max(2.5, 0.28 * len(rows) + 1.2)), layout="constrained")
            ax = fig.add_subplot()
        else:
            fig = ax.figure
        y = np.arange(len(rows))[::-1]
        ax.hlines(y, rows["lower"], rows["upper"], color="0.6", lw=4, label=f"prior predictive {self.level:.0%}")
        ax.plot(rows["prior_mean"], y, "o", color="0.3", ms=4, label="prior predictive mean")
        out = rows["status"].to_numpy() != "inside"
        ax.plot(rows["observed"].to_numpy()[~out], y[~out], "x", color="C0", ms=7, label="observed")
        if out.any():
            ax.plot(rows["observed"].to_numpy()[out], y[out], "x", color="C3", ms=8, mew=2,
                    label="observed, outside the interval")
        labels = [f"{s} {a}" + (f" (group {g})" if g >= 0 else "")
                  for s, a, g in zip(rows["statistic"], rows["annotators"], rows["group"])]
        ax.set_yticks(y, labels=labels, fontsize=8)
        ax.set_xlabel("value")
        ax.legend(fontsize=7, loc="best")
        ax.set_title(title if title is not None else f"prior predictive check ({self.model}): {self.status}",
                     fontsize=9)
        return fig


def _pp_model(model):
    """The NumPyro model function of a :data:`PRIOR_PREDICTIVE_MODELS` name."""
    from ..models import MODELS
    from ..models.correlated import correlated_dawid_skene
    from ..models.score_noise import score_dependent_dawid_skene

    return {**MODELS, "score_dependent": score_dependent_dawid_skene, "correlated": correlated_dawid_skene}[model]


def _pp_parameters(model, rng, prior, n_annotators, n_groups):
    """One prior draw of the rates of ``model``: ``fpr``, ``tpr`` (n_groups, J), ``prevalence`` (n_groups,) and the
    dependence scale ``s`` (0 except for ``"correlated"``), following the model functions' sample sites."""
    from ..models.correlated import DEFAULT_SCALE as DEP_SCALE
    from ..models.score_noise import DEFAULT_SCALE as TAU_SCALE

    fpr, tpr, prev = prior.sample(rng, n_annotators, n_groups)
    if model == "dawid_skene":
        prev = np.full(n_groups, prev[0])
    elif model == "monotone":
        prev = np.cumsum(rng.dirichlet(np.full(n_groups + 1, float(prior.increments))))[:-1]
    f, t, s = np.tile(fpr, (n_groups, 1)), np.tile(tpr, (n_groups, 1)), 0.0
    if model == "score_dependent":
        # logit fpr_gj = logit fpr_j + tau_fpr e_gj, logit u_gj = logit u_j + tau_u f_gj (models/score_noise.py).
        tau_f, tau_u = np.abs(rng.normal(0.0, TAU_SCALE, size=2))
        u = np.clip((tpr - fpr) / (1 - fpr), 1e-9, 1 - 1e-9)
        f = _expit(_logit(np.clip(fpr, 1e-9, 1 - 1e-9)) + tau_f * rng.normal(size=(n_groups, n_annotators)))
        t = f + (1 - f) * _expit(_logit(u) + tau_u * rng.normal(size=(n_groups, n_annotators)))
    elif model == "correlated":
        s = float(abs(rng.normal(0.0, DEP_SCALE)))
    return f, t, prev, s


def _logit(p):
    return np.log(p) - np.log1p(-p)


def _expit(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # tanh form: no overflow for large |x|


def _pp_responses(model, rng, prior, group, n_annotators, n_groups):
    """Complete responses (n_items, J) of one prior predictive draw: ``Y_i ~ Bernoulli(prevalence[g_i])``,
    ``A_ij ~ Bernoulli(rate)`` with the rate of ``Y_i`` (shifted by ``s b_i``, ``b_i ~ N(0, 1)``, for the
    correlated model): the ``labels=None`` branch of the model functions, in NumPy."""
    f, t, prev, s = _pp_parameters(model, rng, prior, n_annotators, n_groups)
    y = rng.random(group.size) < prev[group]
    rate = np.where(y[:, None], t[group], f[group])
    if s > 0:
        rate = _expit(_logit(np.clip(rate, 1e-9, 1 - 1e-9)) + s * rng.normal(size=(group.size, 1)))
    return (rng.random(rate.shape) < rate).astype(np.int8)


def _pp_statistics(labels, obs, group, n_groups, pairs):
    """Statistics of response arrays ``labels`` (S, n, J) (0/1; entries where ``obs`` (n, J) is False ignored):
    positive rates (S, 1 + J), pair agreement (S, P), (group, pattern) counts (S, G * 3^J)."""
    s, n, j = labels.shape
    pos = (labels == 1) & obs[None]
    rates = np.concatenate([pos.sum(axis=(1, 2))[:, None] / obs.sum(), pos.sum(axis=1) / obs.sum(axis=0)], axis=1)
    agree = np.stack([((labels[:, :, a] == labels[:, :, b]) & obs[None, :, a] & obs[None, :, b]).sum(axis=1)
                      / np.sum(obs[:, a] & obs[:, b]) for a, b in pairs], axis=1) if pairs else np.zeros((s, 0))
    # Base-3 code of each pattern (digit 0 = missing, 1 = response 0, 2 = response 1), offset by group and draw.
    digits = np.where(obs[None], labels.astype(np.int64) + 1, 0)
    code = digits @ (3 ** np.arange(j - 1, -1, -1, dtype=np.int64)) + group[None].astype(np.int64) * 3 ** j
    n_cells = n_groups * 3 ** j
    flat = code + np.arange(s, dtype=np.int64)[:, None] * n_cells
    counts = np.bincount(flat.reshape(-1), minlength=s * n_cells).reshape(s, n_cells)
    return rates, agree, counts


def prior_predictive_check(data, *, model: str = "grouped", groups=None, prior=None, n_draws: int = 200,
                           seed: int = 0, level: float = 0.9) -> PriorPredictiveCheck:
    """Prior predictive check of a NumPyro channel model: can its prior produce data like ``data``?

    Draws parameters from the prior and responses from the model (the generative process of the model
    function's ``labels=None`` branch, in NumPy, so that no JAX program is compiled for the data's shape; the
    two are compared in tests/diagnostics/test_prior_predictive.py), for the items of ``data`` in their score groups, with the responses ``data`` lacks removed (missing at
    random: each replicate has the data's pattern of missing responses). Compares the observed positive-label
    rates (overall and per annotator), pairwise agreement rates and (score group, response pattern) counts
    with their prior predictive distributions.

    Parameters
    ----------
    data : AnnotationSet
    model : {"grouped", "dawid_skene", "histogram", "monotone", "score_dependent", "correlated"}, default "grouped"
        :data:`noisycal_bayes.models.MODELS` and the models of :mod:`noisycal_bayes.diagnostics.alternatives`.
    groups : Binning, int or int array of shape (n_items,), optional
        Score groups, as in ``fit_nuts`` (default ``Binning.equal_mass(5)``; ignored by ``"dawid_skene"``).
    prior : Prior, optional
        Default :data:`noisycal_bayes.models.DEFAULT_PRIOR`.
    n_draws : int, default 200
        Prior predictive replicates.
    seed : int, default 0
    level : float, default 0.9
        Central interval of each statistic's prior predictive distribution.

    Returns
    -------
    PriorPredictiveCheck
        ``table`` (one row per statistic), ``status`` (``"warn"`` when an observed positive-label or
        agreement rate lies outside the range of all the draws), ``flagged``, ``plot()``.

    Raises
    ------
    ValueError
        ``data`` not an AnnotationSet, unknown ``model``, fewer than two annotators, ``n_draws`` below 19, a
        bad ``level``; see ``fit_nuts`` for ``groups``.

    Notes
    -----
    Under a prior that fits, each statistic of data drawn from the prior predictive falls outside the range
    of ``n_draws`` replicates with probability ``2 / (n_draws + 1)`` (so ``status`` warns with probability at
    most ``2 K / (n_draws + 1)`` for ``K = 1 + J + J (J - 1) / 2`` summary rates: 7% for three annotators and
    the default 200 draws); a prior that puts no mass near the data
    (for example false-positive rates near 1 for data with few positive labels) puts every draw on one side.
    The prior predictive is about the prior, not the fit: a wide prior passes easily. Check the fitted model
    with :func:`model_checks`.

    Examples
    --------
    >>> from noisycal_bayes.models import Prior
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(500, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=0)
    >>> prior_predictive_check(sim.data, prior=Prior(fpr=(2, 8), u=(4, 2)), n_draws=99).status  # informative
    'pass'
    >>> prior_predictive_check(sim.data, prior=Prior(fpr=(50, 1)), n_draws=99).status  # fpr near 1: all positive
    'warn'
    """
    from .._validation import binary_only, check_level, check_positive_int
    from ..data import AnnotationSet, Binning
    from ..models import DEFAULT_PRIOR
    from ..models.inputs import resolve_assignment
    from ..models.priors import check_prior

    func = "prior_predictive_check"
    binary_only(data, func, None)
    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"{func}: `data` must be an AnnotationSet; got {type(data).__name__}.")
    if model not in PRIOR_PREDICTIVE_MODELS:
        raise ValueError(f"{func}: `model` must be one of {list(PRIOR_PREDICTIVE_MODELS)}; got {model!r}.")
    if data.n_annotators < 2:
        raise ValueError(f"{func}: at least two annotators are needed; got {data.n_annotators}.")
    n_draws = check_positive_int(n_draws, name="n_draws")
    if n_draws < 19:
        raise ValueError(f"{func}: `n_draws` must be at least 19; got {n_draws}.")
    level = check_level(level)
    prior = DEFAULT_PRIOR if prior is None else check_prior(prior)
    groups = Binning.equal_mass(5) if groups is None else groups
    assignment = resolve_assignment(data, "grouped" if model in ("score_dependent", "correlated") else model,
                                    groups, func)
    group = np.asarray(assignment.index, np.int32)
    n_groups = int(assignment.n_groups)
    labels = np.asarray(data.labels)
    obs = labels >= 0
    n, j = labels.shape
    ids = list(data.annotator_ids) or list(range(j))
    pairs = [(a, b) for a, b in combinations(range(j), 2) if np.any(obs[:, a] & obs[:, b])]
    rng = np.random.default_rng(seed)
    chunk = int(max(1, min(n_draws, _PP_CHUNK_CELLS // max(n * j, 1))))
    parts = []
    for start in range(0, n_draws, chunk):
        rep = np.stack([_pp_responses(model, rng, prior, group, j, n_groups)
                        for _ in range(min(chunk, n_draws - start))])
        parts.append(_pp_statistics(rep, obs, group, n_groups, pairs))
    rep_rates, rep_agree, rep_counts = (np.concatenate([p[k] for p in parts]) for k in range(3))
    o_rates, o_agree, o_counts = _pp_statistics(np.where(obs, labels, 0)[None].astype(np.int8), obs, group,
                                                n_groups, pairs)
    # Pattern cells seen in the data (one row each), in (group, pattern code) order.
    seen = np.flatnonzero(o_counts[0] > 0)
    codes = seen % 3 ** j
    digits = (codes[:, None] // 3 ** np.arange(j - 1, -1, -1)) % 3
    patterns = ["".join("-01"[d] for d in row) for row in digits]
    meta = ([("positive_rate", -1, "all")] + [("positive_rate", -1, str(i)) for i in ids]
            + [("agreement", -1, f"{ids[a]}-{ids[b]}") for a, b in pairs]
            + [("pattern_count", int(g), p) for g, p in zip(seen // 3 ** j, patterns)])
    observed = np.concatenate([o_rates[0], o_agree[0], o_counts[0, seen].astype(np.float64)])
    reps = np.concatenate([rep_rates, rep_agree, rep_counts[:, seen].astype(np.float64)], axis=1)
    q = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2], axis=0)
    below = (1 + np.sum(reps <= observed, axis=0)) / (1 + n_draws)
    above = (1 + np.sum(reps >= observed, axis=0)) / (1 + n_draws)
    lo, hi = reps.min(axis=0), reps.max(axis=0)
    status = np.where((observed < lo) | (observed > hi), "outside",
                      np.where((observed < q[0]) | (observed > q[1]), "tail", "inside"))
    table = pd.DataFrame({"statistic": [m[0] for m in meta], "group": [m[1] for m in meta],
                          "annotators": [m[2] for m in meta], "observed": observed, "prior_mean": reps.mean(axis=0),
                          "lower": q[0], "upper": q[1], "prior_min": lo, "prior_max": hi,
                          "p_value": np.minimum(1.0, 2 * np.minimum(below, above)), "status": status})
    summary = table["statistic"].to_numpy() != "pattern_count"
    return PriorPredictiveCheck(table=table, model=model, level=level, n_draws=n_draws,
                                status="warn" if np.any(status[summary] == "outside") else "pass",
                                settings={"seed": seed, "n_groups": n_groups, "n_items": n})
