"""Model expansion inside :func:`noisycal_bayes.evaluate` (binary data): the headline follows the evidence.

The paper's shared channels (every annotator's ``fpr_j, tpr_j`` the same at every score) are one model of the
labels. Beside it :func:`expand_models` fits the score-dependent channel model (channels per score group,
partially pooled toward the shared channel; :mod:`noisycal_bayes.models.score_noise`) on the same compressed
``(score group, response pattern)`` rows, compares the two by their leave-one-out predictive density and
combines their NC-ECE posteriors by stacking.

**Score: PSIS-LOO** (Vehtari, Gelman and Gabry, *Statistics and Computing* 27, 2017), the expected log
predictive density of a new item's labels estimated by Pareto-smoothed importance sampling, on the compressed
rows (:func:`~noisycal_bayes.diagnostics.alternatives.row_loo`). Why it: the log score is proper, so a model
is not rewarded for a predictive distribution it does not hold; leave-one-out (unlike the in-sample
likelihood) charges the richer model for its extra parameters; PSIS makes it cost one pass over the draws the
fits already have, and its Pareto ``k`` says when the estimate is unreliable (reported per model). Draws per
route: NUTS, the posterior draws (the richer model with :data:`RICH_NUTS`); EM, the shared model's
Bayesian-bootstrap replicates (the weighted likelihood bootstrap, Newton and Raftery 1994, an approximate
posterior) and the richer model's Laplace draws at its MAP (``fit_alternative(method="laplace")``): the EM
route pays for one optimisation, no NUTS.

**Combination: stacking of predictive distributions** (Yao, Vehtari, Simpson and Gelman, *Bayesian Analysis*
13, 2018) over the models that pass an entry rule: the richer model enters when its ``elpd_loo`` exceeds the
shared model's by more than :data:`ENTRY_SE` standard errors of the difference; otherwise the shared model
takes weight 1. Why a rule: the richer model nests the shared one (``tau -> 0``), so on data the shared model
explains their predictive distributions nearly coincide and the stacking weights are not determined by the
data (any split scores the same); the rule then keeps today's answer, at no cost in predictive accuracy. The
weights are :func:`~noisycal_bayes.diagnostics.alternatives.stacking_weights` of the rows' LOO densities.

**Headline.** Each model's NC-ECE posterior is the plug-in propagation with the debiased interval
(:func:`~noisycal_bayes.propagate.posterior_nc_ece` for shared channels,
:func:`~noisycal_bayes.propagate.group_channels.posterior_nc_ece_group_channels` for channels per group; the
same Bayesian bootstrap of the items and the same interval reading). The headline is the stacked mixture: its
draws are ``round(w_k M)`` evenly spaced debiased draws of model ``k`` (``M`` the shared model's number), its
interval their equal-tailed quantiles, its value and debiased estimate the weighted means. With weight 1 on
the shared model the headline *is* today's summary. Measurements: docs/model_checks.md, docs/performance.md.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["ENTRY_SE", "K_STRATA", "ModelExpansion", "RICH_NUTS", "confidence_strata", "expand_models", "expand_models_k",
           "mixture_summary", "stratified_annotators", "wants_expansion"]

#: The richer model enters the stack when ``elpd_diff > ENTRY_SE * se_diff`` against the shared model.
ENTRY_SE = 2.0
#: NUTS settings of the score-dependent fit (each capped by the caller's): 2 chains x (500 + 500) took 17 s on
#: CIFAR-10N vehicle where 4 x (1000 + 1000) took 70 s (compilation included; docs/performance.md), and gave
#: R-hat 1.02 and bulk ESS >= 250 for 40 + 14 parameters.
RICH_NUTS = {"n_chains": 2, "n_warmup": 500, "n_draws": 500}
#: Laplace draws of the score-dependent model on the EM route (at least; ``n_boot`` when larger).
N_LAPLACE = 200


def wants_expansion(expand, checks_rows) -> bool:
    """Whether :func:`noisycal_bayes.evaluate` expands: ``True`` / ``False`` as given; ``"auto"`` (the default)
    when a predictive check of the shared-channel model warned (:func:`noisycal_bayes.diagnostics.model_checks`,
    run by default). Why ``"auto"``: on data the shared model explains the expansion would keep its headline
    anyway (the entry rule) at 2-4 times the wall time (docs/performance.md); the checks, which cost about a
    second, say when the richer model may matter. With ``checks=False``, ``"auto"`` does not expand.

    Examples
    --------
    >>> wants_expansion("auto", [{"name": "score_dependent_noise", "status": "warn"}])
    True
    >>> wants_expansion("auto", [{"name": "posterior_predictive", "status": "pass"}]), wants_expansion(True, [])
    (False, True)
    """
    if expand in (True, False):
        return bool(expand)
    return any(c.get("status") == "warn" for c in checks_rows)


@dataclass(frozen=True)
class ModelExpansion:
    """What :func:`expand_models` found: the models, their LOO comparison, the weights and each NC-ECE.

    Attributes
    ----------
    table : DataFrame, one row per model
        ``model``, ``fit`` (how it was fitted), ``elpd_loo``, ``se``, ``elpd_diff`` and ``se_diff`` (against
        ``"shared"``; > 0: the data prefer the model), ``pareto_k_max``, ``weight``, ``nc_ece`` (at the point
        channels), ``debiased``, ``lower``, ``upper`` (the interval to read at ``level``), ``extra`` (the
        between-group scales ``tau_fpr``, ``tau_u``).
    weights : dict
        Stacking weight by model name (sums to 1).
    headline : str
        The model behind the headline: ``"shared"``, ``"score_dependent"`` or ``"stacking"`` (a mixture).
    rule : str
        The entry rule and its outcome, one line.
    score : str
        The comparison score (``"PSIS-LOO"``).
    posteriors : dict
        :class:`~noisycal_bayes.propagate.PosteriorNCECE` by model name.
    draws : ndarray
        The headline's (mixture) debiased NC-ECE draws.
    seconds : float
        Wall time of the expansion (the richer fit, LOO, propagation).
    notes : tuple of str
    """

    table: pd.DataFrame = field(repr=False)
    weights: dict
    headline: str
    rule: str
    score: str = "PSIS-LOO"
    posteriors: dict = field(default_factory=dict, repr=False)
    draws: np.ndarray | None = field(default=None, repr=False)
    seconds: float = 0.0
    notes: tuple = ()

    def to_dict(self) -> dict:
        """JSON-ready: ``score, rule, headline_model, weights, seconds, notes, models`` (the table's rows)."""
        rows = []
        for r in self.table.to_dict(orient="records"):
            rows.append({k: (None if isinstance(v, float) and not np.isfinite(v) else
                             (float(v) if isinstance(v, (np.floating, float)) else v)) for k, v in r.items()})
        return {"score": self.score, "rule": self.rule, "headline_model": self.headline,
                "weights": {k: float(v) for k, v in self.weights.items()}, "seconds": float(self.seconds),
                "notes": list(self.notes), "models": rows}


def _reported(post) -> tuple:
    """The interval to read of a PosteriorNCECE: ``(lower, upper)``."""
    if post.interval_to_read == "upper_one_sided":
        return 0.0, float(post.upper_one_sided)
    return float(post.lower), float(post.upper)


def _even(n_source: int, k: int) -> np.ndarray:
    """``k`` evenly spaced indices into ``n_source`` draws (cycling when ``k > n_source``)."""
    if k <= n_source:
        return np.unique(np.linspace(0, n_source - 1, k).round().astype(int)) if k < n_source else np.arange(k)
    return np.arange(k) % n_source


def mixture_summary(posteriors: dict, weights: dict, level: float) -> dict:
    """The stacked headline from each model's :class:`~noisycal_bayes.propagate.PosteriorNCECE` (module docstring).

    Returns a dict with ``value``, ``debiased``, ``lower``, ``upper`` (interval to read), ``upper_one_sided``,
    ``interval_to_read``, ``calibration_p_value`` and ``draws``. With all weight on one model these are that
    model's own numbers.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> import numpy as np
    >>> a = NS(value=0.01, debiased=0.01, debiased_draws=np.linspace(0.008, 0.012, 101), calibration_p_value=0.0,
    ...        interval_to_read="two_sided", lower=0.0082, upper=0.0118, upper_one_sided=0.0116)
    >>> b = NS(value=0.02, debiased=0.02, debiased_draws=np.linspace(0.018, 0.022, 101), calibration_p_value=0.0,
    ...        interval_to_read="two_sided", lower=0.0182, upper=0.0218, upper_one_sided=0.0216)
    >>> m = mixture_summary({"a": a, "b": b}, {"a": 0.5, "b": 0.5}, 0.9)
    >>> round(m["value"], 3), m["draws"].size, m["lower"] < 0.012 < 0.018 < m["upper"]
    (0.015, 101, True)
    """
    names = [m for m in posteriors if weights.get(m, 0.0) > 0]
    w = np.array([weights[m] for m in names], np.float64)
    w = w / w.sum()
    if len(names) == 1:
        p = posteriors[names[0]]
        lo, hi = _reported(p)
        return dict(value=float(p.value), debiased=float(p.debiased), lower=lo, upper=hi,
                    upper_one_sided=float(p.upper_one_sided), interval_to_read=p.interval_to_read,
                    calibration_p_value=float(p.calibration_p_value), draws=np.asarray(p.debiased_draws))
    n_out = int(np.asarray(posteriors[next(iter(posteriors))].debiased_draws).size)
    counts = np.floor(w * n_out).astype(int)
    counts[np.argsort(-(w * n_out - counts))[: n_out - counts.sum()]] += 1  # largest remainders
    parts = [np.asarray(posteriors[m].debiased_draws)[_even(np.asarray(posteriors[m].debiased_draws).size, k)]
             for m, k in zip(names, counts) if k > 0]
    draws = np.concatenate(parts)
    lo, hi, one = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2, level])
    two_sided = sum(wk for m, wk in zip(names, w) if posteriors[m].interval_to_read == "two_sided") >= 0.5
    read = "two_sided" if two_sided else "upper_one_sided"
    return dict(value=float(sum(wk * posteriors[m].value for m, wk in zip(names, w))),
                debiased=float(sum(wk * posteriors[m].debiased for m, wk in zip(names, w))),
                lower=float(lo) if two_sided else 0.0, upper=float(hi) if two_sided else float(one),
                upper_one_sided=float(one), interval_to_read=read,
                calibration_p_value=float(sum(wk * posteriors[m].calibration_p_value for m, wk in zip(names, w))),
                draws=draws)


def _entry_rule(loo: dict, counts, entry_se: float) -> tuple[dict, str]:
    """The entry rule and the weights: ``score_dependent`` enters when its ``elpd_diff`` against ``shared`` exceeds
    ``entry_se`` standard errors, and then the stacking weights of the two; else weight 1 on ``shared``. ``loo``:
    :func:`row_loo` per model name; ``counts``: items per row. Returns ``(weights, rule)``."""
    from ..diagnostics.alternatives import _weighted_total, stacking_weights

    diff, se_diff = _weighted_total(loo["score_dependent"][0] - loo["shared"][0], counts)
    if diff > entry_se * se_diff:
        w = stacking_weights(np.stack([loo["shared"][0], loo["score_dependent"][0]], axis=1), counts)
        return ({"shared": float(w[0]), "score_dependent": float(w[1])},
                f"score_dependent enters: elpd_diff {diff:+.1f} > {entry_se:g} x se {se_diff:.1f}; stacking weights "
                "of the two")
    return ({"shared": 1.0, "score_dependent": 0.0},
            f"shared kept: elpd_diff of score_dependent {diff:+.1f} <= {entry_se:g} x se {se_diff:.1f} (the data do "
            "not prefer the richer model)")


def expand_models(data, s, res, *, entry_se: float = ENTRY_SE) -> ModelExpansion | None:
    """Fit the score-dependent channel model beside the engine's shared one, compare by PSIS-LOO, stack.

    Parameters
    ----------
    data : AnnotationSet with scores
    s : Settings
        The :func:`~noisycal_bayes.evaluate` options (``method``, ``groups``, ``bins``, ``weights``, ``level``,
        ``seed``, NUTS settings, ``n_boot``).
    res : EngineResult
        The shared model's fit and draws (``res.draws_fit``) and its NC-ECE posterior (``res.post``).
    entry_se : float, default :data:`ENTRY_SE`

    Returns
    -------
    ModelExpansion, or None when the shared model has no draws (``n_boot=0``) or no grouped fit, and (with a
    warning) on a crowd's partially pooled fit or data with gold or repeated (item, annotator) labels.
    """
    from ..data import Binning
    from ..diagnostics.alternatives import _weighted_total, fit_alternative, row_loo, shared_fit_from_draws
    from ..propagate import usable_annotators_of
    from ..propagate.group_channels import posterior_nc_ece_group_channels

    if res.post is None or res.draws_fit is None or res.draws_fit.draws is None or res.fit.model != "grouped":
        return None
    crowd = (res.fit.settings or {}).get("pooling") == "partial"
    n_gold = 0 if data.gold is None else int((np.asarray(data.gold) >= 0).sum())
    if crowd or n_gold or getattr(data, "has_repeats", False):
        # The score-dependent model is written on (group, pattern) rows: one label per (item, annotator), no gold
        # label and channels shared by every item of a group. A crowd's partially pooled fit has no such
        # counterpart; gold labels would be dropped from the richer fit (inference.alternatives.check_row_data).
        import warnings

        why = ("the shared model here is the crowd's partially pooled fit" if crowd else
               f"these data have {n_gold} gold labels" if n_gold else
               "these data have repeated (item, annotator) labels")
        warnings.warn(f"evaluate: model expansion skipped: {why}, and the score-dependent channel model reads one "
                      "label per (item, annotator) pair with unpooled channels; the headline is the shared model's. "
                      "Pass expand=False to silence this.", UserWarning, stacklevel=3)
        return None
    t0 = time.perf_counter()
    nuts = s.method == "nuts"
    shared = shared_fit_from_draws(data, res.draws_fit.draws, groups=s.groups, method=s.method)
    if not np.array_equal(shared.group_index, np.asarray(res.fit.groups.index)):
        return None  # never with the engines' grouped fits: the same resolve_assignment
    if nuts:
        kw = {k: min(v, getattr(s, k)) for k, v in RICH_NUTS.items()}
        rich = fit_alternative(data, "score_dependent", groups=s.groups, method="nuts", seed=s.seed, init=res.fit,
                               **kw)
        how = f"NUTS {kw['n_chains']} x {kw['n_draws']} draws ({kw['n_warmup']} warm-up)"
        if rich.diagnostics.get("rhat_max", 1.0) > 1.05 or rich.diagnostics.get("divergences", 0) > 0:
            import warnings

            from ..warnings import ConvergenceWarning

            warnings.warn(f"the score-dependent model's NUTS fit: R-hat {rich.diagnostics['rhat_max']:.3f}, "
                          f"{rich.diagnostics['divergences']} divergences; its LOO and NC-ECE are approximate.",
                          ConvergenceWarning, stacklevel=3)
    else:
        n_draws = max(N_LAPLACE, s.n_boot)
        rich = fit_alternative(data, "score_dependent", groups=s.groups, method="laplace", n_draws=n_draws,
                               seed=s.seed, init=res.fit)
        how = f"MAP + {n_draws} Laplace draws"
    shared_how = (f"NUTS {res.draws_fit.n_chains} x {res.draws_fit.n_draws} draws" if nuts
                  else f"EM + {shared.loglik_rows.shape[1]} Bayesian-bootstrap refits")
    loo = {"shared": row_loo(shared.loglik_rows), "score_dependent": row_loo(rich.loglik_rows)}
    counts = shared.counts
    weights, rule = _entry_rule(loo, counts, entry_se)
    bins = Binning.equal_width(s.bins)
    usable = usable_annotators_of(res.fit)
    point = (rich.fpr_group.mean(axis=0), rich.tpr_group.mean(axis=0))
    posts = {"shared": res.post,
             "score_dependent": posterior_nc_ece_group_channels(
                 data, rich.group_index, rich.fpr_group, rich.tpr_group, point=point, bins=bins, weights=s.weights,
                 level=s.level, seed=s.seed, usable=usable,
                 source=("channel posterior" if nuts else "Laplace draws of the channels") + " per score group")}
    rows = []
    for m, (fit, fit_how) in {"shared": (shared, shared_how), "score_dependent": (rich, how)}.items():
        elpd, k = loo[m]
        total, se = _weighted_total(elpd, counts)
        d, sd = _weighted_total(elpd - loo["shared"][0], counts)
        lo, hi = _reported(posts[m])
        extra = "" if m == "shared" else ", ".join(f"{e} = {float(np.mean(fit.draws[e])):.3f}"
                                                   for e in ("tau_fpr", "tau_u"))
        rows.append({"model": m, "fit": fit_how, "elpd_loo": total, "se": se, "elpd_diff": d, "se_diff": sd,
                     "pareto_k_max": float(np.max(k)), "weight": weights[m], "nc_ece": float(posts[m].value),
                     "debiased": float(posts[m].debiased), "lower": lo, "upper": hi, "extra": extra})
    notes = []
    bad_k = [r["model"] for r in rows if r["pareto_k_max"] > 0.7]
    if bad_k:
        notes.append(f"model expansion: Pareto k > 0.7 for {bad_k}: their PSIS-LOO is unreliable (a few rows carry "
                     "much of the posterior); read the weights with care.")
    if weights["shared"] >= 1.0 - 1e-12:
        headline = "shared"
    elif weights["score_dependent"] >= 1.0 - 1e-12:
        headline = "score_dependent"
    else:
        headline = "stacking"
    mix = mixture_summary(posts, weights, s.level)
    return ModelExpansion(pd.DataFrame(rows), weights, headline, rule, "PSIS-LOO", posts, mix["draws"],
                          time.perf_counter() - t0, tuple(notes))


# ============================================================================================ K classes
#: Confidence strata of the K-class score-dependent model: equal-mass quantiles of the confidence ``max_k p_ik``.
K_STRATA = 2


def confidence_strata(probs, n_strata: int = K_STRATA) -> np.ndarray:
    """Stratum ``0 .. n_strata - 1`` of every item: equal-mass quantiles of the confidence ``max_k p_ik``.

    >>> confidence_strata(np.array([[0.9, 0.1], [0.6, 0.4], [0.7, 0.3], [0.55, 0.45]]), 2).tolist()
    [1, 0, 1, 0]
    """
    conf = np.asarray(probs, dtype=np.float64).max(axis=1)
    cuts = np.quantile(conf, np.linspace(0.0, 1.0, n_strata + 1)[1:-1])
    return np.searchsorted(cuts, conf, side="right").astype(np.int64)


def stratified_annotators(data, stratum: np.ndarray):
    """The K-class score-dependent channel model written as the shared one on other annotators: annotator ``j``'s
    labels on the items of confidence stratum ``s`` become those of annotator ``(j, s)``, with its own confusion
    matrix ``C_{j,s}``. Any fit, bootstrap or propagation of the shared model then fits
    ``P(A_j = a | Y = y, stratum s) = C_{j,s}[y, a]``. Pairs ``(j, s)`` without a label are left out.

    Returns the new :class:`~noisycal_bayes.data.MulticlassAnnotationSet` (same items, probs, classes and gold;
    annotators named ``"<id>|c<s + 1>"``) and, per new annotator, its ``(annotator, stratum)``."""
    from ..data import MulticlassAnnotationSet

    r = data.responses
    item, ann, lab = np.asarray(r.item), np.asarray(r.annotator), np.asarray(r.label)
    n_strata = int(stratum.max()) + 1
    virtual = ann * n_strata + stratum[item]
    used, code = np.unique(virtual, return_inverse=True)
    ids = [f"{data.annotator_ids[v // n_strata]}|c{v % n_strata + 1}" for v in used]
    gold = None if data.gold is None else np.asarray(data.gold)
    out = MulticlassAnnotationSet.from_responses(item, code, lab, n_items=data.n_items, n_classes=data.n_classes,
                                                 classes=data.classes, probs=data.probs, item_ids=data.item_ids,
                                                 annotator_ids=ids, gold=gold)
    return out, np.stack([used // n_strata, used % n_strata], axis=1)


def _k_rows(data, groups: np.ndarray, stratum: np.ndarray):
    """Compressed rows of K-class data for the predictive comparison: items with the same score group, confidence
    stratum and set of (annotator, label) responses share a row. Returns ``(first item of each row, counts, row of
    each response of those items: (row, annotator, label))``."""
    r = data.responses
    order = np.lexsort((np.asarray(r.label), np.asarray(r.annotator), np.asarray(r.item)))
    item, ann, lab = np.asarray(r.item)[order], np.asarray(r.annotator)[order], np.asarray(r.label)[order]
    code = ann.astype(np.int64) * int(data.n_classes) + lab
    starts = np.flatnonzero(np.r_[True, item[1:] != item[:-1]])
    keys = [tuple(c) for c in np.split(code, starts[1:])]
    frame = pd.DataFrame({"g": groups[item[starts]], "s": stratum[item[starts]], "k": keys})
    row_of_item = np.full(int(data.n_items), -1)
    row_ids = pd.factorize(pd.Series(list(zip(frame.g, frame.s, frame.k))))[0]
    row_of_item[item[starts]] = row_ids
    n_rows = int(row_ids.max()) + 1
    counts = np.bincount(row_ids, minlength=n_rows).astype(np.float64)
    first = np.full(n_rows, -1)
    first[row_ids[::-1]] = item[starts][::-1]
    keep = np.isin(item, first)
    return first, counts, (row_of_item[item[keep]], ann[keep], lab[keep])


def _k_row_loglik(rows, groups_of_rows, stratum_of_rows, confusion, prevalence, annotator_map=None,
                  chunk: int = 25) -> np.ndarray:
    """Per-row log-likelihood of one item's labels at every draw: ``log sum_y pi_d[g, y] prod_j C_d[j', y, a_j]``.

    ``confusion`` (D, J', K, K) and ``prevalence`` (D, G, K) or (G, K) (the same at every draw); ``annotator_map``
    (n_annotators, n_strata) maps an annotator and a stratum to its row of ``confusion`` (None: itself).
    Returns (D, R)."""
    from scipy.special import logsumexp

    row, ann, lab = rows
    col = ann if annotator_map is None else annotator_map[ann, stratum_of_rows[row]]
    n_rows = groups_of_rows.size
    logc = np.log(np.clip(confusion, 1e-300, None))
    logp = np.log(np.clip(prevalence, 1e-300, None))
    out = []
    for d0 in range(0, confusion.shape[0], chunk):
        lc = logc[d0:d0 + chunk]                                   # (d, J', K, K)
        ll = np.zeros((lc.shape[0], n_rows, lc.shape[2]))
        np.add.at(ll, (slice(None), row), np.moveaxis(lc[:, col, :, lab], 0, 1))  # lc[:, j, :, a] per response
        lp = logp[d0:d0 + chunk] if logp.ndim == 3 else logp[None]
        out.append(logsumexp(ll + lp[:, groups_of_rows, :], axis=2))
    return np.concatenate(out, axis=0)


def expand_models_k(data, s, res: dict, groups, engine, *, n_strata: int = K_STRATA,
                    entry_se: float = ENTRY_SE) -> ModelExpansion | None:
    """K classes: the confusion matrices per confidence stratum beside the shared ones, compared and stacked.

    The score-dependent model gives every annotator one confusion matrix per confidence stratum (``n_strata``
    equal-mass quantiles of ``max_k p_ik``; :func:`stratified_annotators`), fitted, bootstrapped (EM) or sampled
    (NUTS) and propagated by the same ``engine`` as the shared model; each model's top-label NC-ECE posterior is
    the engine's. Score: PSIS-LOO of each item's labels given its score group (:func:`row_loo` on compressed rows,
    the draws being the engine's: bootstrap refits of the confusion matrices at the fit's prevalence for EM, the
    posterior for NUTS), the same entry rule and stacking as binary (:func:`expand_models`). The class-wise NC-ECE
    stays the shared model's.

    Parameters
    ----------
    data : MulticlassAnnotationSet with probs
    s : Settings
    res : dict
        The shared model's engine result (``fit``, ``top``, ``top_iv``, ``confusion_draws``, ``prevalence_draws``).
    groups : int array of shape (n_items,) or None
        The score groups of the shared model; None (a crowd's pooled fit): no expansion, with a warning.
    engine : callable
        ``engine(data, s, groups, path=...) -> dict``, the K-class engine that made ``res``.

    Returns
    -------
    ModelExpansion or None
        None without draws (``n_boot=0``), on a pooled crowd (warned), or when a stratum leaves an annotator's
        confusion matrix unusable (warned: the data are too thin to split).
    """
    import warnings

    from ..diagnostics.alternatives import _weighted_total, row_loo

    if res.get("top_iv") is None or res.get("confusion_draws") is None:
        return None
    if groups is None:
        warnings.warn("evaluate: model expansion skipped: the shared model here is the crowd's partially pooled fit, "
                      "which has no score-dependent counterpart yet; the headline is the shared model's. Pass "
                      "expand=False to silence this.", UserWarning, stacklevel=3)
        return None
    t0 = time.perf_counter()
    stratum = confidence_strata(data.probs, n_strata)
    virt, pairs = stratified_annotators(data, stratum)
    rich = engine(virt, s, groups, path="patterns")
    if rich.get("top_iv") is None or not np.all(rich["usable"]):
        warnings.warn(f"evaluate: model expansion skipped: with {n_strata} confidence strata some annotator's "
                      "confusion matrix is not usable (too few labels per stratum); the headline is the shared "
                      "model's.", UserWarning, stacklevel=3)
        return None
    first, counts, rows = _k_rows(data, np.asarray(groups), stratum)
    g_rows, s_rows = np.asarray(groups)[first], stratum[first]
    amap = np.full((int(data.n_annotators), n_strata), 0)
    amap[pairs[:, 0], pairs[:, 1]] = np.arange(pairs.shape[0])
    ll = {m: _k_row_loglik(rows, g_rows, s_rows, r["confusion_draws"], r["prevalence_draws"],
                           None if m == "shared" else amap)
          for m, r in (("shared", res), ("score_dependent", rich))}
    loo = {m: row_loo(v[None]) for m, v in ll.items()}
    weights, rule = _entry_rule(loo, counts, entry_se)
    posts = {"shared": res["top_iv"], "score_dependent": rich["top_iv"]}
    how = {"shared": res["detail"].split(";")[0], "score_dependent": rich["detail"].split(";")[0]}
    rows_out = []
    for m in ("shared", "score_dependent"):
        elpd, k = loo[m]
        total, se = _weighted_total(elpd, counts)
        d, sd = _weighted_total(elpd - loo["shared"][0], counts)
        lo, hi = _reported(posts[m])
        rows_out.append({"model": m, "fit": how[m], "elpd_loo": total, "se": se, "elpd_diff": d, "se_diff": sd,
                         "pareto_k_max": float(np.max(k)), "weight": weights[m],
                         "nc_ece": float((res if m == "shared" else rich)["top"].value),
                         "debiased": float(posts[m].debiased), "lower": lo, "upper": hi,
                         "extra": "" if m == "shared" else f"confusion per confidence stratum ({n_strata} strata)"})
    notes = []
    if any(r["pareto_k_max"] > 0.7 for r in rows_out):
        notes.append("model expansion: Pareto k > 0.7: the PSIS-LOO comparison is approximate (a few rows carry much "
                     "of the draws' weight); read the weights with care.")
    headline = ("shared" if weights["shared"] >= 1.0 - 1e-12 else
                "score_dependent" if weights["score_dependent"] >= 1.0 - 1e-12 else "stacking")
    mix = mixture_summary(posts, weights, s.level)
    return ModelExpansion(pd.DataFrame(rows_out), weights, headline, rule, "PSIS-LOO", posts, mix["draws"],
                          time.perf_counter() - t0, tuple(notes))
