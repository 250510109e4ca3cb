"""The K-class calibration job in one call: :func:`evaluate_multiclass` -> :class:`MulticlassEvaluation`.

``evaluate_multiclass(data)`` estimates every annotator's K x K confusion matrix, the top-label NC-ECE (the
headline) and the class-wise NC-ECE with intervals, the corrected top-label reliability table, and the naive
ECEs against the majority vote, each annotator and the vote distribution (DESIGN §8). ``noisycal_bayes.evaluate``
dispatches here when its data is a :class:`~noisycal_bayes.data.MulticlassAnnotationSet`, and so does the
command line when the labels file has more than two classes.

Two routes, the same numbers:

=========  =============================================================  ===================================
method     confusion matrices                                             intervals
=========  =============================================================  ===================================
``em``     ``fit_em_multiclass`` (MLE, grouped model)                     item bootstrap with the EM refitted
                                                                          per replicate
                                                                          (``bootstrap_multiclass_nc_ece``),
                                                                          the refits propagated by
                                                                          ``posterior_top_label_nc_ece`` /
                                                                          ``posterior_classwise_nc_ece``
                                                                          (class-wise: joint draws)
``nuts``   ``fit_nuts_multiclass`` (posterior; point = posterior mean)    ``posterior_top_label_nc_ece`` /
                                                                          ``posterior_classwise_nc_ece``
=========  =============================================================  ===================================

On both routes ``nc_ece.value`` is the top-label NC-ECE at the point confusion matrices
(:func:`~noisycal_bayes.reference.multiclass.top_label_nc_ece`), and confusion intervals are equal-tailed
quantiles of the draws (posterior draws or bootstrap refits).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import one_line as _one_line
from .engines import _nc_ece_summary, collect_warnings
from .result import NCECESummary

__all__ = ["MULTICLASS_METHODS", "ClasswiseSummary", "MulticlassEvaluation", "evaluate_multiclass",
           "run_multiclass_checks"]

#: Channel engines of :func:`evaluate_multiclass`.
MULTICLASS_METHODS = ("em", "nuts")
#: Weight rules of the K-class corrected targets.
_WEIGHTS = ("iv", "equal")
#: Random EM starts of the full-sample fit and of every bootstrap refit (besides the majority-vote start): one
#: number for both, so that the compiled EM is reused by the refits.
N_STARTS = 1
#: Bootstrap refits (EM) or posterior draws (NUTS) of the predictive check (199: with alpha = 0.05 the bootstrap
#: p-value (1 + #) / 200 warns at exactly 5% under the model).
N_CHECK_REPLICATES = 199
#: The check runs only when the (group x observed-annotators) families have at most this many patterns K^m in all.
MAX_CHECK_CELLS = 200_000
#: p-value at or below which a check warns.
CHECK_ALPHA = 0.05


@dataclass(frozen=True)
class _Settings:
    """The validated options of one :func:`evaluate_multiclass` call."""

    method: str
    bins: int
    n_quantiles: int
    weights: str
    level: float
    seed: int
    n_boot: int
    n_chains: int
    n_warmup: int
    n_draws: int
    progress_bar: bool
    checks: bool
    prior: object = None


@dataclass(frozen=True)
class ClasswiseSummary:
    """Class-wise NC-ECE: the mean over classes with its interval, and each class's.

    Attributes
    ----------
    value : float
        Mean over classes of the class-wise NC-ECE at the point confusion matrices.
    lower, upper : float or None
        The interval to read (``[0, upper_bound]`` when the one-sided reading applies); None without one.
    upper_bound : float or None
        One-sided ``level`` upper bound.
    level : float
    target : str
    interval_method : str
        How the interval was made (with the calibrated level of the draws' quantiles when it widened it).
    per_class : DataFrame
        ``class, value, lower, upper`` (one row per class, in class index order; bounds NaN without interval).
    debiased : float or None
        The debiased estimate of the mean over classes, the centre of its interval; None without one.
    interval_to_read : {"two_sided", "upper_one_sided"} or None
        Which interval ``lower, upper`` is (``upper_one_sided``: ``[0, upper_bound]``); None without one.
    """

    value: float
    lower: float | None
    upper: float | None
    upper_bound: float | None
    level: float
    target: str
    interval_method: str
    per_class: pd.DataFrame = field(repr=False)
    debiased: float | None = None
    interval_to_read: str | None = None

    @property
    def interval(self) -> tuple:
        return (self.lower, self.upper)


@dataclass(frozen=True)
class MulticlassEvaluation:
    """What one K-class calibration evaluation found, and how (returned by :func:`evaluate_multiclass`).

    Attributes
    ----------
    method : {"em", "nuts"}
    method_detail : str
        One line saying how the confusion matrices and the intervals were obtained.
    n_items, n_annotators, n_classes : int
    classes : tuple
        Class names; index ``k`` <-> ``classes[k]``.
    annotator_ids : tuple
    confusion : ndarray of shape (n_annotators, K, K)
        Point estimate (EM, or posterior mean): ``confusion[j, y, a] = P(A_j = a | Y = y)``.
    confusion_lower, confusion_upper : ndarray of shape (n_annotators, K, K) or None
        Equal-tailed ``level`` quantiles of the draws (posterior draws or bootstrap refits); None without draws.
    prevalence : ndarray of shape (n_groups, K)
        Clean-class frequencies per score group (EM estimate or posterior mean).
    nc_ece : NCECESummary
        Top-label NC-ECE (the headline): ``value``, ``lower``, ``upper``, ``upper_bound``, ``level``, ``target``...
    classwise_nc_ece : ClasswiseSummary
    reliability : DataFrame
        Per confidence bin: ``bin, lower, upper, count, mean_confidence, corrected_accuracy, residual,
        band_lower, band_upper`` (band NaN without draws).
    naive : DataFrame
        ``target, top_label_ece, classwise_ece, n_items``: majority vote, each annotator, vote distribution (and
        ``clean labels (oracle)`` when ``clean_labels`` were given).
    naive_curves : dict
        ``{name: accuracy per confidence bin}`` for the reliability figure (majority vote, vote distribution,
        oracle).
    usable : ndarray of shape (n_annotators,), bool
        Annotators whose confusion matrix is invertible enough to correct their labels (others weigh 0).
    warnings : tuple of str
    diagnostics : dict
        NUTS: ``max_rhat, min_ess_bulk, n_divergent, frac_max_treedepth``...; EM: ``converged, n_iter,
        log_likelihood`` and the bootstrap's ``n_failed``.
    checks : tuple of dict
        ``{name, status ("pass" | "warn" | "not_testable"), statistic, p_value, detail}``.
    draws : ndarray or None
        Top-label NC-ECE draws (bootstrap replicates or posterior draws).
    level, bins, weights, seed, n_groups : the settings used
    fit : MulticlassEMFit or MulticlassPosterior
    data : MulticlassAnnotationSet
    clean_labels : ndarray of shape (n_items,) or None
    """

    method: str
    method_detail: str
    n_items: int
    n_annotators: int
    n_classes: int
    classes: tuple
    annotator_ids: tuple
    confusion: np.ndarray
    confusion_lower: np.ndarray | None
    confusion_upper: np.ndarray | None
    prevalence: np.ndarray
    nc_ece: NCECESummary
    classwise_nc_ece: ClasswiseSummary
    reliability: pd.DataFrame = field(repr=False)
    naive: pd.DataFrame = field(repr=False)
    naive_curves: dict = field(default_factory=dict, repr=False)
    usable: np.ndarray = field(default=None, repr=False)
    warnings: tuple = ()
    diagnostics: dict = field(default_factory=dict)
    checks: tuple = ()
    draws: np.ndarray | None = field(default=None, repr=False)
    level: float = 0.9
    bins: int = 15
    weights: str = "iv"
    seed: int = 0
    n_groups: int = 1
    fit: object = field(default=None, repr=False, compare=False)
    data: object = field(default=None, repr=False, compare=False)
    clean_labels: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def warned_checks(self) -> list:
        """Names of the checks that warned."""
        return [c["name"] for c in self.checks if c.get("status") == "warn"]

    def summary(self, *, title: str | None = None) -> str:
        """The plain-text summary the command line prints."""
        from ..report.multiclass import format_multiclass_summary

        return format_multiclass_summary(self, title=title)

    def to_dict(self) -> dict:
        """The JSON object (strict JSON types; NaN as None); keys in ``docs/cli.md`` and ``docs/multiclass.md``."""
        from ..report.multiclass import multiclass_to_dict

        return multiclass_to_dict(self)

    def to_json(self) -> str:
        """The JSON text ``noisycal-bayes evaluate --json`` writes for K-class data."""
        from ..report import json_text

        return json_text(self.to_dict())

    def write_report(self, out_dir, *, title: str = "Calibration report (K classes)", source: str | None = None):
        """Write the report folder (``report.html``, ``summary.md``, ``results.json``,
        ``top_label_reliability.png``, ``confusion_matrices.png``); returns the paths
        (:func:`noisycal_bayes.report.write_multiclass_report`)."""
        from ..report.multiclass import write_multiclass_report

        return write_multiclass_report(out_dir, self, title=title, source=source)

    def _repr_html_(self) -> str:
        from ..report.multiclass import multiclass_html

        return multiclass_html(self)


# ============================================================================================ validation
def _settings(data, **kw) -> _Settings:
    from .._validation import check_level, check_positive_int
    from ..data import MulticlassAnnotationSet

    if not isinstance(data, MulticlassAnnotationSet):
        raise ValueError(f"evaluate_multiclass: `data` must be a MulticlassAnnotationSet; got {type(data).__name__}.")
    if kw["method"] not in MULTICLASS_METHODS:
        raise ValueError(f"evaluate_multiclass: unknown method {kw['method']!r}; choose from "
                         f"{list(MULTICLASS_METHODS)}.")
    if kw["weights"] not in _WEIGHTS:
        raise ValueError(f"evaluate_multiclass: `weights` must be one of {list(_WEIGHTS)} for K classes; got "
                         f"{kw['weights']!r}.")
    groups = kw.pop("groups")
    if groups is None:
        kw["n_quantiles"] = 2
    elif isinstance(groups, (int, np.integer)) and not isinstance(groups, bool) and groups >= 1:
        kw["n_quantiles"] = int(groups)
    else:
        raise ValueError(f"evaluate_multiclass: `groups` must be None (2 confidence quantiles per predicted class) or "
                         f"a positive int (that many quantiles); got {groups!r}.")
    for name in ("bins", "n_chains", "n_draws"):
        kw[name] = check_positive_int(kw[name], name=name)
    for name in ("n_boot", "n_warmup", "seed"):
        kw[name] = check_positive_int(kw[name], name=name, minimum=0)
    kw["level"] = check_level(kw["level"])
    if kw["prior"] is not None:
        from ..models.multiclass import MulticlassPrior

        if kw["method"] != "nuts":
            raise ValueError("evaluate_multiclass: `prior` is used by method='nuts' only (the EM route fits the "
                             "maximum-likelihood channels and refits them per bootstrap replicate); got "
                             f"method={kw['method']!r} with a prior.")
        if not isinstance(kw["prior"], MulticlassPrior):
            raise ValueError(f"evaluate_multiclass: `prior` must be None or a MulticlassPrior; got "
                             f"{type(kw['prior']).__name__}.")
    return _Settings(**kw)


def _check_clean_labels(clean_labels, data):
    if clean_labels is None:
        return None
    y = np.asarray(clean_labels)
    if y.shape != (data.n_items,):
        raise ValueError(f"`clean_labels` must have shape ({data.n_items},), one class index per item; got {y.shape}.")
    if not np.issubdtype(y.dtype, np.integer):
        if not (np.issubdtype(y.dtype, np.floating) and np.all(np.isfinite(y)) and np.all(y == np.round(y))):
            raise ValueError("`clean_labels` must be class indices 0..K-1 (integers); map class names with "
                             "`data.classes` first.")
    y = y.astype(np.int64)
    bad = np.flatnonzero((y < 0) | (y >= data.n_classes))
    if bad.size:
        raise ValueError(f"`clean_labels` must be class indices in 0..{data.n_classes - 1}; got {y[bad[:5]].tolist()} "
                         f"at items {bad[:5].tolist()}.")
    return y


# ============================================================================================ engines
class _Replicate:
    """The duck-typed data ``fit_em_multiclass`` reads, for one bootstrap replicate."""

    def __init__(self, responses, n_items, n_annotators, n_classes, probs):
        self.responses, self.n_items, self.n_annotators = responses, n_items, n_annotators
        self.n_classes, self.probs, self.gold, self.classes = n_classes, probs, None, tuple(range(n_classes))


def _intervals(draws: np.ndarray, level: float):
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return lo, hi


def _engine_em(data, s: _Settings, groups):
    """EM on the full sample; item bootstrap with the EM refitted per replicate, the refits propagated."""
    from ..inference import fit_em_multiclass, multiclass_em_estimator
    from ..propagate.multiclass import posterior_classwise_nc_ece, posterior_top_label_nc_ece
    from ..reference.multiclass import bootstrap_multiclass_nc_ece, classwise_nc_ece, top_label_nc_ece

    fit = fit_em_multiclass(data, model="grouped", groups=groups, n_starts=N_STARTS, seed=s.seed)
    probs, resp = data.probs, data.responses
    usable = np.asarray(fit.usable_annotators(), dtype=bool)
    top = top_label_nc_ece(probs, resp, fit.confusion, bins=s.bins, weights=s.weights)
    cw = classwise_nc_ece(probs, resp, fit.confusion, bins=s.bins, weights=s.weights)
    detail = f"EM (grouped model, {fit.n_groups} score groups, {N_STARTS + 1} starts)"
    out = dict(fit=fit, confusion=np.asarray(fit.confusion), prevalence=np.asarray(fit.prevalence), usable=usable,
               top=top, cw=cw, lower=None, upper=None, top_iv=None, cw_iv=None, band=None, draws=None, notes=[],
               diagnostics={"converged": bool(fit.converged), "n_iter": int(fit.n_iter),
                            "log_likelihood": float(fit.log_likelihood)})
    if s.n_boot == 0:
        out["notes"].append("no interval: n_boot = 0 (--n-boot 0).")
        out["detail"] = detail
        return out
    refits, counts = [], []
    # Replicates are refitted from the full-sample fit (warm start), with their items' gold labels; their groups are
    # the same recipe (predicted class x confidence quantile) applied to the replicate's items.
    refit = multiclass_em_estimator(model="grouped", n_quantiles=s.n_quantiles, n_starts=N_STARTS, seed=s.seed)
    # The bootstrap draws its replicates' rows from default_rng(seed), one `integers(0, n, n)` per replicate; the
    # same stream here, matched on the replicate's probabilities (a failed refit skips one), gives each refit's item
    # multiplicities for the class-wise joint draws.
    n, probs64 = int(data.n_items), np.asarray(probs, dtype=np.float64)
    rows_stream = np.random.default_rng(s.seed)

    def estimator(r, n_rep, p, *, init=None, gold=None):
        if init is None:  # the bootstrap's full-sample call: the fit above (no second full fit)
            return np.asarray(fit.confusion), np.asarray(fit.prevalence)
        conf, prev = refit(r, n_rep, p, init=init, gold=gold)
        for _ in range(s.n_boot):
            rows = rows_stream.integers(0, n, size=n)
            if np.array_equal(probs64[rows], p):
                break
        else:  # never: the stream is the bootstrap's own
            raise RuntimeError("evaluate_multiclass: could not match a bootstrap replicate to its rows; please report.")
        refits.append(np.asarray(conf))
        mult = np.bincount(rows, minlength=n)
        counts.append(mult.astype(np.uint16) if mult.max() <= np.iinfo(np.uint16).max else mult)  # small ints
        return conf, prev

    boot = bootstrap_multiclass_nc_ece(probs, resp, estimator=estimator, n_boot=s.n_boot, level=s.level, bins=s.bins,
                                       weights=s.weights, seed=s.seed, progress_bar=s.progress_bar, gold=data.gold)
    out["diagnostics"]["n_boot_failed"] = int(boot.top_label.n_failed)
    if len(refits) < 2:
        out["notes"].append(f"no interval: {len(refits)} of {s.n_boot} bootstrap refits succeeded.")
        out["detail"] = detail
        return out
    reps = np.stack(refits)
    out["lower"], out["upper"] = _intervals(reps, s.level)
    # The intervals: the refitted confusions propagated as the binary EM route propagates its bootstrap replicates
    # (debiased, bias-corrected bin centres), as joint draws (each refit with its own replicate's item
    # multiplicities) read at the calibrated level, top-label and class-wise mean; per class: fresh Bayesian
    # bootstrap weights. Measured in benchmarks/coverage_multiclass.py (--sweep, --route cli-em; docs/coverage.md).
    mult = np.stack(counts)
    # The refits scatter around the full-sample fit: the bias correction is centred there (point_confusion).
    top_iv = posterior_top_label_nc_ece(probs, resp, reps, bins=s.bins, weights=s.weights, level=s.level,
                                        seed=s.seed, usable=usable, item_weights=mult, calibrate=True,
                                        point_confusion=out["confusion"])
    cw_iv = posterior_classwise_nc_ece(probs, resp, reps, bins=s.bins, weights=s.weights, level=s.level,
                                       seed=s.seed, usable=usable, item_weights=mult, point_confusion=out["confusion"])
    refits_text = f"the EM refitted on {reps.shape[0]} item-bootstrap replicates"
    out.update(varying_top=f"{refits_text}, each with its replicate's items (joint draws)",
               varying_cw=f"{refits_text}, each with its replicate's items (joint draws; per class: fresh Bayesian "
                          "bootstrap weights)")
    out.update(top_iv=top_iv, cw_iv=cw_iv, band=top_iv.table,
               draws=np.asarray(top_iv.debiased_draws if top_iv.interval_method == "debiased" else top_iv.draws))
    out["detail"] = (f"{detail}; {100 * s.level:.0f}% intervals: {reps.shape[0]} item-bootstrap replicates with the "
                     "EM refitted on each, propagated to the NC-ECEs")
    return out


def _engine_nuts(data, s: _Settings, groups):
    """NUTS posterior of the confusion matrices, propagated to both NC-ECEs."""
    from ..inference import fit_nuts_multiclass
    from ..propagate.multiclass import posterior_classwise_nc_ece, posterior_top_label_nc_ece
    from ..propagate.nc_ece import USABLE_LEVEL
    from ..reference.multiclass import classwise_nc_ece, top_label_nc_ece, usable_from_draws

    post = fit_nuts_multiclass(data, model="grouped", groups=groups, n_chains=s.n_chains, n_warmup=s.n_warmup,
                               n_samples=s.n_draws, seed=s.seed, prior=s.prior, progress_bar=s.progress_bar)
    draws = np.asarray(post.confusion)
    usable = usable_from_draws(draws, level=USABLE_LEVEL)
    probs, resp = data.probs, data.responses
    point = draws.mean(axis=0)
    top_pt = top_label_nc_ece(probs, resp, point, bins=s.bins, weights=s.weights)
    cw_pt = classwise_nc_ece(probs, resp, point, bins=s.bins, weights=s.weights)
    top = posterior_top_label_nc_ece(probs, resp, draws, bins=s.bins, weights=s.weights, level=s.level, seed=s.seed,
                                     usable=usable)
    cw = posterior_classwise_nc_ece(probs, resp, draws, bins=s.bins, weights=s.weights, level=s.level, seed=s.seed,
                                    usable=usable)
    lower, upper = _intervals(draws, s.level)
    d = post.diagnostics
    detail = (f"NUTS (grouped model, {int(np.asarray(post.prevalence).shape[1])} score groups, {post.n_chains} chains "
              f"x {post.n_draws} draws); {100 * s.level:.0f}% posterior intervals")
    return dict(fit=post, confusion=point, prevalence=np.asarray(post.prevalence).mean(axis=0), usable=usable,
                top=top_pt, cw=cw_pt, lower=lower, upper=upper, top_iv=top, cw_iv=cw, band=top.table,
                draws=np.asarray(top.debiased_draws if top.interval_method == "debiased" else top.draws), notes=[],
                detail=detail, diagnostics={k: d.get(k) for k in ("max_rhat", "min_ess_bulk", "min_ess_tail",
                                                                  "n_divergent", "frac_max_treedepth")})


# ============================================================================================ pieces
def _top_summary(res, s: _Settings):
    """NCECESummary of the top-label NC-ECE and its notes."""
    value = float(res["top"].value)
    iv = res["top_iv"]
    if iv is None:
        return NCECESummary(value, None, None, None, None, s.level, "none: no interval", "none"), []
    how = _interval_how(iv, res.get("varying_top", iv.uncertainty))
    summary, notes = _nc_ece_summary(value, iv, s, None, how)
    return summary, notes


def _classwise_summary(res, s: _Settings, classes) -> ClasswiseSummary:
    cw, iv = res["cw"], res["cw_iv"]
    per = pd.DataFrame({"class": list(classes), "value": np.asarray(cw.per_class, dtype=np.float64),
                        "lower": np.nan, "upper": np.nan})
    if iv is None:
        return ClasswiseSummary(float(cw.value), None, None, None, s.level, "none: no interval", "none", per)
    t = iv.per_class_table
    one = t["interval_to_read"].to_numpy() == "upper_one_sided"
    per["lower"] = np.where(one, 0.0, t["lower"].to_numpy())
    per["upper"] = np.where(one, t["upper_one_sided"].to_numpy(), t["upper"].to_numpy())
    lo, hi = iv.reported_interval
    return ClasswiseSummary(float(cw.value), float(lo), float(hi), float(iv.upper_one_sided), s.level, iv.target,
                            _interval_how(iv, res.get("varying_cw", iv.uncertainty)), per,
                            debiased=float(iv.debiased), interval_to_read=iv.interval_to_read)


def _interval_how(iv, varying: str) -> str:
    """The interval's method line: how it was read (with the calibrated level when that widened the interval to
    read) and what varied across draws."""
    from ..propagate.result import _read_at

    return f"{iv.interval_method} equal-tailed interval{_read_at(iv)}; varying: {varying}"


def _reliability(res) -> pd.DataFrame:
    t = res["top"].table
    table = pd.DataFrame({"bin": t["bin"].to_numpy(), "lower": t["lower"].to_numpy(), "upper": t["upper"].to_numpy(),
                          "count": t["count"].to_numpy(), "mean_confidence": t["mean_score"].to_numpy(),
                          "corrected_accuracy": t["corrected_frequency"].to_numpy(),
                          "residual": t["residual"].to_numpy(), "band_lower": np.nan, "band_upper": np.nan})
    band = res["band"]
    if band is not None and len(band) == len(table):
        table["band_lower"] = band["frequency_lower"].to_numpy()
        table["band_upper"] = band["frequency_upper"].to_numpy()
    return table


def _naive(data, s: _Settings, clean_labels):
    """Naive ECE table and per-bin accuracies of the naive targets (for the figure)."""
    from ..core import top_label_ece
    from ..reference.multiclass import naive_multiclass_ece

    probs, k = data.probs, data.n_classes
    table = naive_multiclass_ece(probs, data.responses, bins=s.bins, annotator_ids=list(data.annotator_ids))
    votes = np.asarray(data.vote_distribution(), dtype=np.float64)
    labelled = votes.sum(axis=1) > 0
    eye = np.eye(k)
    mv = np.where(labelled[:, None], eye[np.argmax(votes, axis=1)], np.nan)  # ties to the lowest class index
    curves = {"majority vote": top_label_ece(probs, mv, bins=s.bins).table.mean_target,
              "vote distribution": top_label_ece(probs, np.where(labelled[:, None], votes, np.nan),
                                                 bins=s.bins).table.mean_target}
    if clean_labels is not None:
        from ..core import classwise_ece

        oracle = eye[clean_labels]
        table = pd.concat([table, pd.DataFrame([{
            "target": "clean labels (oracle)", "top_label_ece": top_label_ece(probs, oracle, bins=s.bins).value,
            "classwise_ece": classwise_ece(probs, oracle, bins=s.bins).value, "n_items": int(data.n_items)}])],
            ignore_index=True)
        curves["clean labels (oracle)"] = top_label_ece(probs, oracle, bins=s.bins).table.mean_target
    return table, {name: np.asarray(v, dtype=np.float64) for name, v in curves.items()}


def _check_row(status, detail, statistic=None, p_value=None, name="pattern_counts"):
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


def run_multiclass_checks(data, res, s: _Settings) -> tuple:
    """Predictive check of the K-class channel model on (score group x annotators who labelled x response pattern)
    counts; one row ``{name, status, statistic, p_value, detail}``.

    The discrepancy is Pearson's ``X^2 = sum (O - E)^2 / E`` over *pooled cells*: within each (group, set of
    annotators) family the cells whose expected count at the fit is below
    :data:`~noisycal_bayes.diagnostics.checks.MIN_EXPECTED` are merged, with the next smallest ones until the merged
    cell reaches it (the rule of the binary checks, :mod:`noisycal_bayes.diagnostics.checks`; a family of fewer
    items becomes one cell and carries no information); the same pooling serves every replicate. Unpooled, cells
    with a near-zero expected count dominate ``X^2`` and make it a statistic of rare patterns that a fit on the
    boundary never replicates. EM: a parametric bootstrap: :data:`N_CHECK_REPLICATES` data sets of family pattern
    counts drawn from the fit (multinomial, family sizes kept), each refitted by EM warm-started at the fit (no
    random starts: the standard parametric-bootstrap refit, on the replicate's distinct cells weighted by their
    counts) and compared with its own refit; p-value ``(1 + #{T_rep >= T_obs}) / (R + 1)``, warning when ``p <=``
    :data:`CHECK_ALPHA` (calibrated: it warns at that rate under the model). NUTS: a posterior predictive check over
    as many posterior draws, observed and replicated counts compared with the same draw's expectation (Gelman, Meng
    & Stern 1996; conservative), pooled by the draws' mean expected counts. ``not_testable`` with repeated or gold
    labels, more than :data:`MAX_CHECK_CELLS` cells, no more free cell probabilities than parameters, or no
    degrees of freedom left after pooling (``sum_f (pooled cells_f - 1) <= parameters``; a sparse crowd, where
    nearly every item has its own set of annotators).
    """
    from ..diagnostics.checks import MIN_EXPECTED, _pool, _x2

    item, ann, lab = (np.asarray(x, dtype=np.int64) for x in data.responses)
    J, K = data.n_annotators, data.n_classes
    key = item * J + ann
    if np.unique(key).size != key.size:
        return (_check_row("not_testable", "repeated labels: the check's response patterns hold one label per "
                           "(item, annotator)."),)
    gold = getattr(data, "gold", None)
    if gold is not None and (np.asarray(gold) >= 0).any():
        return (_check_row("not_testable", "gold labels: the check compares annotator label patterns of items "
                           "whose clean label is unknown; gold items enter the model differently."),)
    fit = res["fit"]
    groups = np.asarray(fit.groups, dtype=np.int64)
    fam = _Families(item, ann, lab, data.n_items, J, K, groups)
    n_groups = int(np.unique(groups).size)  # groups with items: an empty group's prevalence is no parameter
    n_params = n_groups * (K - 1) + J * K * (K - 1)
    if fam.n_cells > MAX_CHECK_CELLS:
        n_cells = str(fam.n_cells) if fam.n_cells < 10 ** 9 else f"about 10^{len(str(fam.n_cells)) - 1}"
        return (_check_row("not_testable", f"{n_cells} (group x pattern) cells exceed {MAX_CHECK_CELLS}: too many "
                           "annotators per item for a pattern check."),)
    if fam.n_free <= n_params:
        return (_check_row("not_testable", f"{fam.n_free} free cell probabilities for {n_params} parameters: the "
                           "design fits any counts exactly, so nothing can be tested."),)
    rng = np.random.default_rng(s.seed)
    observed = np.concatenate(fam.counts(fam.dense))
    n_fam = len(fam.members)
    stratum = np.repeat(np.arange(n_fam), [K ** js.size for js in fam.annotators])
    size = np.array([m.size for m in fam.members])
    conf, prev = np.asarray(fit.confusion), np.asarray(fit.prevalence)
    nuts = s.method != "em"
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
        return (_check_row("not_testable", f"after pooling cells with expected count < {MIN_EXPECTED:g}, no degrees "
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
        # responses), in the buckets the sparse EM compiles for (inference.multiclass_em._bucket).
        from ..inference.multiclass_em import _bucket

        occupied = 1.0 - (1.0 - np.minimum(expected / size[stratum], 1.0)) ** size[stratum]
        per_cell = np.bincount(cells[0], minlength=fam.n_cells)
        shape = (_bucket(int(1.1 * occupied.sum()) + 9) - 1, _bucket(int(1.1 * occupied @ per_cell) + 8 * J))
        t_rep, failed = [], 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the refits' own warnings are not the user's
            for _ in range(N_CHECK_REPLICATES):
                rep = draw(expected)
                try:
                    c_r, p_r = _refit_cells(rep, cells, cell_group, J, K, (conf, prev), s.seed, shape)
                except (ValueError, RuntimeError):
                    failed += 1
                    continue
                t_rep.append(float(_x2(rep, _expected(fam, c_r, p_r), pooled, n_pooled)))
        if len(t_rep) < 0.9 * N_CHECK_REPLICATES:
            return (_check_row("not_testable", f"{failed} of {N_CHECK_REPLICATES} bootstrap refits failed."),)
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
    status = "warn" if p <= CHECK_ALPHA else "pass"
    detail = (f"Pearson X^2 on {n_pooled} pooled cells of {fam.n_cells} (group x annotators x pattern) cells "
              f"(expected >= {MIN_EXPECTED:g}), {df} df ({how}); observed discrepancy {stat:.1f} vs replicated "
              f"{ref:.1f} on average; warns at p <= {CHECK_ALPHA}")
    return (_check_row(status, detail, float(stat), p),)


# ============================================================================================ the call
def evaluate_multiclass(data, *, method: str = "em", bins: int = 15, groups=None, weights: str = "iv",
                        level: float = 0.9, seed: int = 0, n_boot: int = 200, n_chains: int = 2, n_warmup: int = 500,
                        n_draws: int = 500, prior=None, clean_labels=None, checks: bool = True,
                        progress_bar: bool = False) -> MulticlassEvaluation:
    """K x K confusion matrices with intervals, top-label and class-wise NC-ECE with intervals, naive ECEs.

    Parameters
    ----------
    data : MulticlassAnnotationSet with probs
        Labels (item, annotator, class index) and the classifier's class probabilities of shape (n_items, K).
    method : {"em", "nuts"}, default "em"
        ``"em"``: :func:`~noisycal_bayes.inference.fit_em_multiclass` and an item bootstrap with the EM refitted
        per replicate (``n_boot`` replicates). ``"nuts"``: :func:`~noisycal_bayes.inference.fit_nuts_multiclass`
        and the posterior of both NC-ECEs (:mod:`noisycal_bayes.propagate.multiclass`).
    bins : int, default 15
        Equal-width bins on the confidence (top-label) and on each class's probability (class-wise).
    groups : None or int, default None
        Score groups of the grouped model: predicted class x ``groups`` confidence quantiles
        (:func:`~noisycal_bayes.core.score_groups`); None means 2.
    weights : {"iv", "equal"}, default "iv"
        Per-coordinate annotator weights of the corrected targets.
    level : float, default 0.9
        Level of every interval.
    seed : int, default 0
        Seeds EM starts, bootstrap resampling, chains and the predictive check.
    n_boot : int, default 200
        Bootstrap replicates (EM route); 0 gives no interval (said in ``warnings``).
    n_chains, n_warmup, n_draws : int, default 2, 500, 500
        NUTS settings.
    prior : MulticlassPrior or None
        NUTS route only: the model's prior (None: the default, Dirichlet rows with 2 on the diagonal and 1
        elsewhere). With few labels per confusion row at large K the default's pseudo-counts pull the posterior
        towards uniform rows and bias the NC-ECE; the fit says so (:class:`~noisycal_bayes.warnings.PriorWarning`)
        and docs/multiclass.md gives the measured alternative ``MulticlassPrior(off_diagonal=1 / (K - 1))``.
    clean_labels : int array of shape (n_items,), optional
        True class indices (simulations): adds the oracle ECEs to the naive table.
    checks : bool, default True
        Run the predictive check of the channel model (:func:`run_multiclass_checks`; EM: 199 refits).
    progress_bar : bool, default False

    Returns
    -------
    MulticlassEvaluation
        ``.summary()``, ``.to_json()``, ``.write_report(dir)``.

    Raises
    ------
    ValueError
        Data that is not a MulticlassAnnotationSet or has no probs; unknown method or weights; bad counts, level,
        groups or ``clean_labels``; a design that cannot identify K x K confusion matrices
        (:func:`~noisycal_bayes.data.check_multiclass_design`: one annotator, no item labelled twice, ...).

    Notes
    -----
    The corrected clean-label vector of a response ``a`` of annotator ``j`` is ``C_j^{-T} e_a`` (row ``a`` of
    ``C_j^{-1}``), unbiased for the one-hot clean label; top-label NC-ECE bins the confidence ``max_k p_ik`` and
    compares it with the predicted class's coordinate of the combined corrected vector (DESIGN §8). Warnings
    raised while fitting are recorded in ``warnings`` rather than emitted.

    Examples
    --------
    >>> from noisycal_bayes.data import MulticlassAnnotationSet
    >>> from noisycal_bayes.simulate import simulate_multiclass
    >>> sim = simulate_multiclass(300, 3, 3, seed=1)
    >>> data = MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=3, probs=sim.probs)
    >>> ev = evaluate_multiclass(data, n_boot=0, checks=False)
    >>> ev.n_classes, ev.nc_ece.lower is None
    (3, True)
    """
    from ..core import score_groups
    from ..data import check_multiclass_design

    s = _settings(data, method=method, bins=bins, groups=groups, weights=weights, level=level, seed=seed,
                  n_boot=n_boot, n_chains=n_chains, n_warmup=n_warmup, n_draws=n_draws,
                  progress_bar=bool(progress_bar), checks=bool(checks), prior=prior)
    data.require_probs()
    clean_labels = _check_clean_labels(clean_labels, data)
    group_of = score_groups(data.probs, n_quantiles=s.n_quantiles)
    n_nonempty = int(np.unique(group_of).size)
    with warnings.catch_warnings(record=True):  # its warnings become the error below
        warnings.simplefilter("always")
        problems = check_multiclass_design(data, "grouped", n_groups=n_nonempty, func="evaluate_multiclass")
    if problems:
        raise ValueError(" ".join(problems))
    caught: list = []
    with collect_warnings(caught):
        res = (_engine_em if s.method == "em" else _engine_nuts)(data, s, group_of)
        naive, curves = _naive(data, s, clean_labels)
        top, notes = _top_summary(res, s)
        cw = _classwise_summary(res, s, data.classes)
        try:
            rows = run_multiclass_checks(data, res, s) if s.checks else ()
        except (ValueError, np.linalg.LinAlgError) as exc:
            rows = (_check_row("not_testable", f"the check could not run: {_one_line(exc)}"),)
    fit = res["fit"]
    return MulticlassEvaluation(
        method=s.method, method_detail=res["detail"], n_items=int(data.n_items), n_annotators=int(data.n_annotators),
        n_classes=int(data.n_classes), classes=tuple(data.classes), annotator_ids=tuple(data.annotator_ids),
        confusion=np.asarray(res["confusion"]), confusion_lower=res["lower"], confusion_upper=res["upper"],
        prevalence=np.asarray(res["prevalence"]), nc_ece=top, classwise_nc_ece=cw, reliability=_reliability(res),
        naive=naive, naive_curves=curves, usable=np.asarray(res["usable"], dtype=bool),
        warnings=tuple(caught + list(res["notes"]) + notes), diagnostics=res["diagnostics"], checks=tuple(rows),
        draws=res["draws"], level=s.level, bins=s.bins, weights=s.weights, seed=s.seed,
        n_groups=int(np.asarray(fit.prevalence).shape[-2]), fit=fit, data=data, clean_labels=clean_labels)
