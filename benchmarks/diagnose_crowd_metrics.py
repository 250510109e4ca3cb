"""Why the sparse crowd's clean-label metrics were biased (issue 37): the same data sets' metrics on three sets of
channel draws, side by side.

Data: the ``k3_crowd`` cell of ``coverage_metrics.py`` (K = 3, 200 annotators, 3 labels per item, 2,000 items,
accuracies U(0.5, 0.9): ``coverage_crowds_multiclass.crowd_data``), seeds 1000, 1001, ... Per data set,
``evaluate_multiclass(data, method="em", n_boot=50, checks=False)`` is run once, with its two refit estimators spied
on, and ``multiclass_metrics`` (300 replicates) is run on:

* ``free``: the 50 refits whose population is refitted too, each with its item multiplicities (estimate and
  replicates: the rule until 2026-12-05);
* ``kept``: the 50 refits that keep the full fit's population (the NC-ECE's draws), likewise;
* ``centred``: the route's own metrics since 2026-12-05: the full fit's estimates, the ``free`` replicates moved to
  them (``multiclass_metrics(centre=)``);
* ``full``: the full-sample fit alone (one draw: fresh Exp(1) item weights and label draws, no channel uncertainty);
* ``true``: the generator's own confusions, one draw as ``full`` (the prevalence re-estimated as always): what is
  left of a bias with the channels known.

Per metric and variant: the estimate, interval, corrected-label value, the replicates' mean and sd, and the metric of
the data set's own clean labels (``sample``). The summary compares the estimates' bias (against the population target
of ``coverage_metrics.population`` and against each set's sample value, whose difference removes the items' sampling
noise) and the replicates' sd with the sd of the estimate across data sets (independent draws: the truth an interval
width is compared with).

``--rules`` (issue 37, after the shipped rule's 200 data sets covered 0.85-0.97): interval rules side by side on the
same data sets (seeds 1200, ...: those of ``coverage_metrics.py --cells k3_crowd --seed0 1200``). Per data set the
route is run once (``n_boot=50``) and five sets of 300 metric replicates are made on its 50 item resamples (the
same multiplicities ``refit_counts`` for all five, so that the sets differ only in their channels):

* ``free``: the route's own replicates (refits that refit the population), as shipped (moved to the full fit's
  estimate);
* ``kept``: the refits that keep the full fit's population (the NC-ECE's draws);
* ``twolevel``: a two-stage bootstrap (Davison & Hinkley 1997, section 3.8): the population ``alpha`` re-estimated
  on resampled *annotators* (multiplicities ``v ~ Multinomial(J, 1/J)``: the Dirichlet-multinomial type-II fit of
  :func:`~noisycal_bayes.core.population.fit_dirichlet_multinomial`, hyperprior power 2.5 as the fit's, on the
  full fit's expected counts ``n[j, y, :]`` of the drawn annotators), then every annotator's rows refitted on the
  resampled *items* with that population fixed (``fit_em_population(weights=multiplicities, population=alpha_s)``).
  The population's units are the annotators; resampling items under it duplicates labels, which the
  Dirichlet-multinomial reads as over-dispersion (the ``free`` refits' lower concentration);
* ``pigeonhole``: annotators resampled in the data as well (Owen 2007, the pigeonhole bootstrap of a crossed
  design: each drawn annotator's labels once per draw, as clones; items with their multiplicities), the population
  of the drawn annotators (as ``twolevel``) fixed, each draw's 6 replicates the metrics of its own resampled
  responses. The annotators' own randomness (which crowd labelled the items) is a crossed random effect that item
  resampling holds fixed;
* ``meanfree``: as ``twolevel``, but the population's mean rows ``m_y`` are refitted on the item resample too, its
  concentrations held at the annotator draw's (:func:`refit_mean_free`): the full fit's estimator with every
  parameter but the concentration (the one that duplicated items bias) refitted on the items.

Each set's replicates ``d`` give the intervals of ``RULE_NAMES`` (:func:`rule_intervals`); per metric the data set's
estimate (the route's), its sample value and each (set, rule)'s interval are stored, with, per refit, the
population concentrations ``s_y`` (full fit, ``free`` refits, ``twolevel`` draws) and a few metrics' per-refit
replicate means (the diagnosis of the ``free`` refits' spread and skew). Output:
``benchmarks/results/coverage_metrics_crowd_rules.json`` (rows, resumable: a set added later is computed for the
stored rows; summary per set, rule and metric, aggregates per set and rule, diagnosis). Measured: docs/metrics.md,
*The crowd's replicates: too wide and skewed, and 35 rules side by side*.

Usage::

    python benchmarks/diagnose_crowd_metrics.py --reps 12      # resumable: rows in the output file
    python benchmarks/diagnose_crowd_metrics.py --rules --reps 80 --max-minutes 60
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import RESULTS, machine  # noqa: E402

import coverage_metrics as cm  # noqa: E402

OUT = RESULTS / "coverage_metrics_crowd_diagnosis.json"
VARIANTS = ("free", "kept", "centred", "full", "true")
FIELDS = ("estimate", "lower", "upper", "corrected_label", "posterior")


def route_captured(data, seed, n_boot, patch):
    """``evaluate_multiclass``'s EM route on ``data`` with its engine's result dict captured (the refits, their item
    multiplicities, the fit), and ``patch = (module, name, replacement)`` in place for the call only."""
    import noisycal_bayes as nb
    import noisycal_bayes.evaluation.metrics as em

    module, name, replacement = patch
    cap, shipped, original = {}, em.multiclass_metrics_of, getattr(module, name)
    setattr(module, name, replacement)
    em.multiclass_metrics_of = lambda d, s, res: (cap.setdefault("res", res), shipped(d, s, res))[1]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ev = nb.evaluate_multiclass(data, method="em", n_boot=n_boot, checks=False, seed=seed)
    finally:
        setattr(module, name, original)
        em.multiclass_metrics_of = shipped
    return ev, cap["res"]


def one(seed, n=2000):
    import noisycal_bayes.inference as inference
    from noisycal_bayes.labels.metrics import ClassPosterior, MetricKernel, multiclass_metrics
    from noisycal_bayes.models.inputs import class_arrays

    from coverage_crowds_multiclass import crowd_data

    c = cm.CELLS["k3_crowd"]
    data, sim, _ = crowd_data(c["n_classes"], c["n_annotators"], n, c["labels_per_item"], seed)   # cm.simulate's
    y = np.asarray(sim.y, dtype=np.int64)
    true_conf = np.asarray(sim.confusion)[np.unique(sim.annotator)]     # data's annotators: those drawn at all
    t0 = time.process_time()
    refits, original = {"free": [], "kept": []}, inference.multiclass_em_estimator

    def spy(**kw):
        est, kind = original(**kw), "kept" if kw.get("population") is not None else "free"

        def run(*a, **k):
            out = est(*a, **k)
            if k.get("init") is not None:
                refits[kind].append(np.asarray(out[0]))
            return out
        return run

    ev, res = route_captured(data, seed, 50, (inference, "multiclass_em_estimator", spy))
    fit = res["fit"]
    x = class_arrays(data, "diagnose")
    resp, g, probs = (x.item, x.annotator, x.label, x.gold), np.asarray(fit.groups), {"model": np.asarray(data.probs)}
    prev = np.asarray(fit.prevalence)[None]
    variants = {"centred": ev.metrics}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in ("free", "kept"):
            post = ClassPosterior(resp, data.n_items, g, np.stack(refits[kind]), prev)
            variants[kind] = multiclass_metrics(data, probs, post, n_replicates=300, seed=seed,
                                                item_weights=res["refit_counts"])
        variants["full"] = multiclass_metrics(data, probs, ClassPosterior(resp, data.n_items, g,
                                                                          np.asarray(fit.confusion)[None], prev),
                                              n_replicates=300, seed=seed)
        variants["true"] = multiclass_metrics(data, probs, ClassPosterior(resp, data.n_items, g, true_conf[None], prev),
                                              n_replicates=300, seed=seed)
    sample = {m: float(v[0]) for m, v in MetricKernel(probs=np.asarray(data.probs)).values(y).items()}
    out = {}
    for name in VARIANTS:
        r = variants[name]
        t = r.table.set_index("metric")
        for m in t.index:
            d = r.draws["model"][m]
            out.setdefault(m, {"sample": sample[m]})[name] = ([float(t.loc[m, c]) for c in FIELDS]
                                                              + [float(np.mean(d)), float(np.std(d))])
    return {"seed": seed, "cpu_s": time.process_time() - t0, "metrics": out}


def summarise(rows, truth):
    out = []
    for m in rows[0]["metrics"]:
        samp = np.array([r["metrics"][m]["sample"] for r in rows])
        for v in VARIANTS:
            est, lo, hi, corr, _, rmean, rsd = np.array([r["metrics"][m][v] for r in rows]).T
            k = est.size
            out.append({"metric": m, "variant": v, "n_sets": k, "target": truth[m],
                        "bias": est.mean() - truth[m], "bias_se": est.std(ddof=1) / np.sqrt(k),
                        "bias_vs_sample": np.mean(est - samp), "bias_vs_sample_se": np.std(est - samp, ddof=1) / np.sqrt(k),
                        "bias_corrected_label": corr.mean() - truth[m], "sd_estimate": est.std(ddof=1),
                        "replicate_sd": rsd.mean(), "sd_ratio": rsd.mean() / est.std(ddof=1),
                        "replicate_mean_minus_estimate": np.mean(rmean - est),
                        "coverage": np.mean((lo <= truth[m]) & (truth[m] <= hi))})
    return out


RULES_OUT = RESULTS / "coverage_metrics_crowd_rules.json"
RULE_SETS = ("free", "kept", "twolevel", "pigeonhole", "meanfree")
#: Interval rules on replicates ``d`` of a metric with estimate ``est`` (level 0.9, ``z = 1.645``):
#: ``raw`` the percentile interval of ``d``; ``mean`` of ``d`` moved to mean ``est`` (the shipped rule on ``free``);
#: ``median`` moved to median ``est``; ``basic`` the reflected interval of the mean-moved ``d`` (``2 est - q``);
#: ``normal`` ``est -+ z sd(d)``; ``bc`` Efron's bias-corrected percentile interval of the mean-moved ``d``
#: (``z0 = Phi^-1(P(d' < est))``, quantiles ``Phi(2 z0 -+ z)``), ``bc_raw`` the same on ``d`` itself.
RULE_NAMES = ("raw", "mean", "median", "basic", "normal", "bc", "bc_raw")
PER_DRAW = ("accuracy", "macro_f1", "recall[2]", "precision[0]", "precision[1]", "auc", "log_loss")


def rule_intervals(d, est, level=0.9):
    """``{rule: (lower, upper)}`` of ``RULE_NAMES`` from replicates ``d`` (R,) and the estimate ``est``."""
    from scipy.stats import norm

    d = np.asarray(d, dtype=np.float64)
    d = d[np.isfinite(d)]
    a = (1 - level) / 2
    z = norm.ppf(1 - a)
    mean, med, sd = d.mean(), np.median(d), d.std(ddof=1)
    dm = d + (est - mean)
    q = lambda x, p: np.quantile(x, p)   # noqa: E731

    def bc(x):
        z0 = norm.ppf(np.clip(np.mean(x < est) + 0.5 * np.mean(x == est), 1 / x.size, 1 - 1 / x.size))
        return q(x, norm.cdf(2 * z0 - z)), q(x, norm.cdf(2 * z0 + z))

    return {"raw": (q(d, a), q(d, 1 - a)), "mean": (q(dm, a), q(dm, 1 - a)),
            "median": (q(d, a) + est - med, q(d, 1 - a) + est - med),
            "basic": (2 * est - q(dm, 1 - a), 2 * est - q(dm, a)), "normal": (est - z * sd, est + z * sd),
            "bc": bc(dm), "bc_raw": bc(d)}


def population_of(counts, alpha, v, power=2.5):
    """The population ``alpha`` (K, K) refitted on annotators drawn with multiplicities ``v`` (J,): per class ``y``
    the Dirichlet-multinomial type-II MAP on the rows ``counts[j, y, :]`` repeated ``v_j`` times (warm start
    ``alpha[y]``)."""
    from noisycal_bayes.core.population import fit_dirichlet_multinomial

    out = []
    for y in range(counts.shape[1]):
        m, s = fit_dirichlet_multinomial(np.repeat(counts[:, y, :], v, axis=0), init=alpha[y], power=power)
        out.append(s * m)
    return np.stack(out)


def mean_m_step(counts, s, alpha, iters=200, tol=1e-10):
    """Population rows ``alpha_y = s_y m_y`` with the concentrations ``s`` (K,) fixed and the means ``m_y`` by
    type-II maximum likelihood of the Dirichlet-multinomial on ``counts[:, y, :]`` (Minka's fixed point for
    ``alpha``, rescaled to total ``s_y`` after each step)."""
    from scipy.special import digamma

    out = []
    for y in range(counts.shape[1]):
        n = counts[:, y, :]
        n = n[n.sum(axis=1) > 0]
        N = n.sum(axis=1)
        a = s[y] * alpha[y] / alpha[y].sum()
        for _ in range(iters):
            a0 = a.sum()
            new = a * np.sum(digamma(n + a) - digamma(a), axis=0) / np.sum(digamma(N + a0) - digamma(a0))
            new *= s[y] / new.sum()
            done = np.max(np.abs(new - a) / a) < tol
            a = new
            if done:
                break
        out.append(a)
    return np.stack(out)


def refit_mean_free(data, x, weights, init, alpha, s, outer=30, tol=1e-6):
    """A pooled refit on item weights ``weights`` whose population means are refitted with the concentrations ``s``
    held: rows by :func:`~noisycal_bayes.inference.population.fit_em_population` under a fixed population, then
    :func:`mean_m_step` on its expected counts, until the population moves by less than ``tol`` (relative).
    Returns the confusion (J, K, K) and the population."""
    from noisycal_bayes.core.population import expected_counts
    from noisycal_bayes.inference.population import _posterior, fit_em_population

    conf, prev = init
    a = alpha
    for _ in range(outer):
        f = fit_em_population(data, weights=weights, init=(conf, prev), population=a, tol=1e-8)
        conf, prev = np.asarray(f.confusion), np.asarray(f.prevalence)
        T, _ = _posterior(x, conf, prev.reshape(-1)[-conf.shape[-1]:], np.zeros(x.n_items, np.int64))
        new = mean_m_step(expected_counts(x.item, x.annotator, x.label, T, conf.shape[0], weights), s, a)
        done = np.max(np.abs(new - a) / a) < tol
        a = new
        if done:
            break
    return conf, a


def rules_one(seed, n=2000, n_boot=50, sets=None):
    """One data set of ``--rules``: the route once, then the replicate sets ``sets`` (default ``RULE_SETS``; ``free``
    always) and their rules' intervals."""
    sets = RULE_SETS if sets is None else ("free",) + tuple(sets)
    import noisycal_bayes.inference.bootstrap as ib
    from noisycal_bayes.core.population import expected_counts
    from noisycal_bayes.inference.population import fit_em_population
    from noisycal_bayes.labels.metrics import ClassPosterior, MetricKernel, multiclass_metrics
    from noisycal_bayes.models.inputs import class_arrays
    from noisycal_bayes.propagate.draws import thin_index

    from coverage_crowds_multiclass import crowd_data

    c = cm.CELLS["k3_crowd"]
    data, sim, _ = crowd_data(c["n_classes"], c["n_annotators"], n, c["labels_per_item"], seed)   # cm.simulate's
    y = np.asarray(sim.y, dtype=np.int64)
    t0 = time.process_time()
    pops, fit_k = [], ib.fit_em_multiclass

    def spy(*a, **k):   # the free refits' populations (the kept refits call fit_em_population directly)
        f = fit_k(*a, **k)
        if k.get("init") is not None and k.get("model") == "pooled":
            pops.append(np.asarray(f.prior[0]))
        return f

    ev, res = route_captured(data, seed, n_boot, (ib, "fit_em_multiclass", spy))
    t_route = time.process_time() - t0
    fit, mult = res["fit"], np.asarray(res["refit_counts"], dtype=np.float64)
    n_s = mult.shape[0]
    x = class_arrays(data, "diagnose")
    resp, g = (x.item, x.annotator, x.label, x.gold), np.asarray(fit.groups)
    prev = np.asarray(fit.prevalence)[None]
    conf0, alpha = np.asarray(fit.confusion), np.asarray(fit.prior[0])
    J = conf0.shape[0]
    counts = expected_counts(x.item, x.annotator, x.label, ClassPosterior(resp, n, g, conf0[None], prev)(0), J)
    rng = np.random.default_rng(10 ** 6 + seed)
    two_pop = [population_of(counts, alpha, rng.multinomial(J, np.full(J, 1.0 / J))) for _ in range(n_s)]
    two, mfree, mfree_pop = [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in range(n_s):
            init = (conf0, np.asarray(fit.prevalence))
            if "twolevel" in sets:
                two.append(np.asarray(fit_em_population(data, weights=mult[s], init=init, population=two_pop[s],
                                                        tol=1e-8).confusion))
            if "meanfree" in sets:   # the population's means refitted on the items, its concentrations the draw's
                conf_s, a_s = refit_mean_free(data, x, mult[s], init, alpha, two_pop[s].sum(axis=1))
                mfree.append(conf_s)
                mfree_pop.append(a_s)
    probs = {"model": np.asarray(data.probs)}
    # Pigeonhole: annotators resampled in the data too (each drawn annotator's labels once per draw, as clones), the
    # population of the same drawn annotators fixed, the items with their multiplicities; each draw's replicates are
    # the metrics on its own resampled responses (6 label draws per refit, 300 in all).
    from noisycal_bayes.core.tables import Responses
    from noisycal_bayes.models.inputs import ClassData

    rng = np.random.default_rng(2 * 10 ** 6 + seed)
    per = 300 // n_s
    pig, pig_pop = {}, []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in range(n_s if "pigeonhole" in sets else 0):
            v = rng.multinomial(J, np.full(J, 1.0 / J))
            a_s = population_of(counts, alpha, v)
            clone_of = np.repeat(np.arange(J), v)                       # clone c is annotator clone_of[c]
            first = np.concatenate([[0], np.cumsum(v)[:-1]])
            rep = v[x.annotator]
            r_idx = np.repeat(np.arange(x.item.size), rep)
            k_in = np.arange(r_idx.size) - np.repeat(np.cumsum(rep) - rep, rep)
            item_s, ann_s, lab_s = x.item[r_idx], first[x.annotator[r_idx]] + k_in, x.label[r_idx]
            d_s = ClassData(Responses(item_s, ann_s, lab_s), n, J, x.n_classes, np.asarray(data.probs), x.gold)
            f = fit_em_population(d_s, weights=mult[s], init=(conf0[clone_of], np.asarray(fit.prevalence)),
                                  population=a_s, tol=1e-8)
            post_s = ClassPosterior((item_s, ann_s, lab_s, x.gold), n, g, np.asarray(f.confusion)[None], prev)
            r = multiclass_metrics(data, probs, post_s, n_replicates=per, seed=seed + s,
                                   item_weights=mult[s][None]).draws["model"]
            for m, d in r.items():
                pig.setdefault(m, []).append(np.asarray(d))
            pig_pop.append(a_s)
    draws = {"free": ev.metrics.draws["model"], "pigeonhole": {m: np.concatenate(d) for m, d in pig.items()}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, conf in (("kept", res["confusion_draws"]), ("twolevel", two), ("meanfree", mfree)):
            if name not in sets:
                continue
            conf = np.stack(conf) if isinstance(conf, list) else np.asarray(conf)
            draws[name] = multiclass_metrics(data, probs, ClassPosterior(resp, n, g, conf, prev), n_replicates=300,
                                             seed=seed, item_weights=mult).draws["model"]
    sample = {m: float(v[0]) for m, v in MetricKernel(probs=np.asarray(data.probs)).values(y).items()}
    t = ev.metrics.table.set_index("metric")
    which = thin_index(n_s, 300)   # replicate r's draw (multiclass_metrics' rule)
    out = {}
    for m in t.index:
        est = float(t.loc[m, "estimate"])
        row = {"estimate": est, "shipped": [float(t.loc[m, "lower"]), float(t.loc[m, "upper"])],
               "corrected_label": float(t.loc[m, "corrected_label"]), "sample": sample[m]}
        for name in sets:
            d = np.asarray(draws[name][m], dtype=np.float64)
            row[name] = {"mean": float(np.nanmean(d)), "sd": float(np.nanstd(d, ddof=1)),
                         "q": [float(v) for v in np.nanquantile(d, [0.05, 0.5, 0.95])],
                         "rules": {k: [float(a), float(b)] for k, (a, b) in rule_intervals(d, est).items()}}
            if m in PER_DRAW and name == "free":   # the diagnosis of the free refits' spread (rules_diagnosis)
                row[name]["per_draw_mean"] = [float(np.nanmean(d[which == s])) for s in range(n_s)]
        out[m] = row
    conc = {"full": alpha.sum(axis=1).tolist(), "free": [p.sum(axis=1).tolist() for p in pops],
            "twolevel": [p.sum(axis=1).tolist() for p in two_pop],
            "pigeonhole": [p.sum(axis=1).tolist() for p in pig_pop],
            "full_mean_diag": np.diag(alpha / alpha.sum(axis=1, keepdims=True)).tolist(),
            "free_mean_diag": [np.diag(p / p.sum(axis=1, keepdims=True)).tolist() for p in pops],
            "twolevel_mean_diag": [np.diag(p / p.sum(axis=1, keepdims=True)).tolist() for p in two_pop],
            "meanfree_mean_diag": [np.diag(p / p.sum(axis=1, keepdims=True)).tolist() for p in mfree_pop],
            "one_step_check": float(np.max(np.abs(population_of(counts, alpha, np.ones(J, np.int64)) - alpha)
                                           / alpha))}
    return {"seed": seed, "cpu_s": time.process_time() - t0, "cpu_route_s": t_route, "population": conc,
            "metrics": out}


def rules_summary(rows, truth):
    """Per (set, rule, metric): coverage of the population target, mean width, mean (midpoint - estimate) and the
    estimate's bias, in units of the estimate's sd across data sets where useful."""
    out = []
    for m in rows[0]["metrics"]:
        est = np.array([r["metrics"][m]["estimate"] for r in rows])
        sd = est.std(ddof=1)
        k = est.size
        for name in RULE_SETS:
            for rule in RULE_NAMES:
                lo, hi = np.array([r["metrics"][m][name]["rules"][rule] for r in rows]).T
                out.append({"metric": m, "set": name, "rule": rule, "n_sets": k,
                            "coverage": float(np.mean((lo <= truth[m]) & (truth[m] <= hi))),
                            "width": float(np.mean(hi - lo)), "half_width_over_1645sd": float(np.mean(hi - lo) / 2 /
                                                                                                1.645 / sd),
                            "mid_minus_est_over_sd": float(np.mean((lo + hi) / 2 - est) / sd),
                            "miss_low": float(np.mean(truth[m] < lo)), "miss_high": float(np.mean(truth[m] > hi)),
                            "replicate_sd_over_sd": float(np.mean([r["metrics"][m][name]["sd"] for r in rows]) / sd),
                            "replicate_mean_minus_est": float(np.mean([r["metrics"][m][name]["mean"] - r["metrics"][m][
                                "estimate"] for r in rows])),
                            "bias_over_sd": float((est.mean() - truth[m]) / sd), "bias": float(est.mean() - truth[m]),
                            "bias_se": float(sd / np.sqrt(k))})
    return out


def rules_aggregate(summary, n_sets):
    """Per (set, rule): coverage range and median over the metrics, how many lie within 2 binomial SE of 0.90, the
    mean |coverage - 0.90|, and against the shipped rule (``free``, ``mean``) how many metrics are closer to 0.90 /
    as close / farther."""
    tab = pd.DataFrame(summary)
    se = np.sqrt(0.09 / n_sets)
    ship = tab[(tab["set"] == "free") & (tab["rule"] == "mean")].set_index("metric")["coverage"]
    out = []
    for (name, rule), t in tab.groupby(["set", "rule"], sort=False):
        gap = (t.set_index("metric")["coverage"] - 0.9).abs()
        ref = (ship - 0.9).abs()[gap.index]
        out.append({"set": name, "rule": rule, "min": t["coverage"].min(), "median": t["coverage"].median(),
                    "max": t["coverage"].max(), "within_2se": int((gap <= 2 * se + 1e-12).sum()),
                    "mean_abs_gap": gap.mean(), "closer_than_shipped": int((gap < ref - 1e-12).sum()),
                    "farther_than_shipped": int((gap > ref + 1e-12).sum()),
                    "median_half_width_over_1645sd": t["half_width_over_1645sd"].median(),
                    "median_abs_mid_minus_est_over_sd": t["mid_minus_est_over_sd"].abs().median()})
    return out


def rules_diagnosis(rows):
    """Why the ``free`` replicates are wide and skewed: the refits' population concentrations against the full fit's
    and the annotator-resampled ones (medians over data sets of each set's median), the per-refit correlation of
    ``log s`` (summed over classes) with the refit's replicate mean (median over data sets), and per metric the
    replicates' Bowley skewness ``(q95 + q05 - 2 q50) / (q95 - q05)`` (mean over data sets) per set, with the
    estimate's sd across data sets split into the items' part (the sample metric's sd) and the rest."""
    pop = {k: np.median([np.median(np.atleast_2d(r["population"][k]), axis=0) for r in rows], axis=0).tolist()
           for k in ("full", "free", "twolevel")}
    corr = {}
    for m in PER_DRAW:
        cs = [np.corrcoef(np.log(np.sum(r["population"]["free"], axis=1)), r["metrics"][m]["free"]["per_draw_mean"])[0, 1]
              for r in rows if len(r["population"]["free"]) == len(r["metrics"][m]["free"]["per_draw_mean"])]
        corr[m] = float(np.median(cs))
    per = []
    for m in rows[0]["metrics"]:
        est = np.array([r["metrics"][m]["estimate"] for r in rows])
        samp = np.array([r["metrics"][m]["sample"] for r in rows])
        o = {"metric": m, "sd_estimate": est.std(ddof=1), "sd_sample": samp.std(ddof=1),
             "sd_estimate_minus_sample": (est - samp).std(ddof=1)}
        for name in RULE_SETS:
            q = np.array([r["metrics"][m][name]["q"] for r in rows])
            o["bowley_" + name] = float(np.mean((q[:, 2] + q[:, 0] - 2 * q[:, 1]) / (q[:, 2] - q[:, 0])))
        per.append(o)
    return {"concentration_median": pop, "corr_log_concentration_vs_refit_mean": corr, "per_metric": per}


def _rounded(x, digits=6):
    """``x`` with every float rounded to ``digits`` significant digits (the rows file stays a few MB)."""
    if isinstance(x, dict):
        return {k: _rounded(v, digits) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_rounded(v, digits) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(f"{float(x):.{digits}g}")
    return x


def rules_main(args):
    path = Path(args.out if args.out != str(OUT) else RULES_OUT)
    body = json.loads(path.read_text()) if path.exists() else {"rows": {}}
    body["benchmark"], body["machine"] = "diagnose_crowd_metrics --rules", machine()
    truth = body.setdefault("truth", cm.population("k3_crowd"))
    t0 = time.time()
    for seed in range(1200, 1200 + args.reps):
        if args.max_minutes is not None and time.time() - t0 > 60 * args.max_minutes:
            break
        row = body["rows"].get(str(seed))
        if row is None:
            body["rows"][str(seed)] = rules_one(seed)
        elif any(name not in row["metrics"]["accuracy"] for name in RULE_SETS):   # a set added since: its part
            new = rules_one(seed, sets=[nm for nm in RULE_SETS if nm not in row["metrics"]["accuracy"]])
            for m, v in new["metrics"].items():
                row["metrics"][m].update({k: x for k, x in v.items() if k not in row["metrics"][m]})
            row["population"].update({k: x for k, x in new["population"].items() if k not in row["population"]})
            row["cpu_s_added"] = new["cpu_s"]
        else:
            continue
        path.write_text(json.dumps(_rounded(body)) + "\n")
        r = body["rows"][str(seed)]
        print(f"seed {seed}: {r.get('cpu_s_added', r['cpu_s']):.0f} s CPU (route {r['cpu_route_s']:.0f})", flush=True)
    rows = [r for r in body["rows"].values() if all(nm in r["metrics"]["accuracy"] for nm in RULE_SETS)]
    body["summary"] = rules_summary(rows, truth)
    body["aggregate"] = rules_aggregate(body["summary"], len(rows))
    body["diagnosis"] = rules_diagnosis(rows)
    path.write_text(json.dumps(_rounded(body)) + "\n")
    tab = pd.DataFrame(body["summary"])
    print(f"{len(rows)} data sets")
    for name in RULE_SETS:
        print(tab[tab["set"] == name].pivot_table(index="metric", columns="rule", values="coverage",
                                                  sort=False).round(3).add_prefix(name + ":").to_string())
    print(pd.DataFrame(body["aggregate"]).round(3).to_string())
    print(pd.DataFrame(body["diagnosis"]["per_metric"]).round(3).to_string())
    print({k: np.round(v, 1).tolist() for k, v in body["diagnosis"]["concentration_median"].items()},
          {k: round(v, 2) for k, v in body["diagnosis"]["corr_log_concentration_vs_refit_mean"].items()})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--rules", action="store_true", help="interval rules side by side (seeds 1200-; module notes)")
    ap.add_argument("--max-minutes", type=float, default=None)
    args = ap.parse_args(argv)
    if args.rules:
        return rules_main(args)
    path = Path(args.out)
    body = json.loads(path.read_text()) if path.exists() else {"rows": {}}
    body["benchmark"], body["machine"] = "diagnose_crowd_metrics", machine()
    truth = body.setdefault("truth", cm.population("k3_crowd"))
    for seed in range(1000, 1000 + args.reps):
        if str(seed) not in body["rows"]:
            body["rows"][str(seed)] = one(seed)
            path.write_text(json.dumps(body, default=float) + "\n")
            print(f"seed {seed}: {body['rows'][str(seed)]['cpu_s']:.0f} s CPU", flush=True)
    body["summary"] = summarise(list(body["rows"].values()), truth)
    path.write_text(json.dumps(body, indent=1, default=float) + "\n")
    show = ["accuracy", "balanced_accuracy", "macro_f1", "recall[0]", "f1[2]", "auc", "brier", "log_loss"]
    print(pd.DataFrame([s for s in body["summary"] if s["metric"] in show]).round(4).to_string())


if __name__ == "__main__":
    main()
