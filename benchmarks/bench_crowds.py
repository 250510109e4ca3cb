"""Real and simulated crowds, the goals of issue 16 side by side in one run (replaces the former bench_crowd_em.py,
bench_crowds_nuts.py and crowd_flags_study.py).

Usage (crowd-kit is a comparison only, never a dependency)::

    PYTHONPATH=$PWD:/tmp/ckx python benchmarks/bench_crowds.py [--quick] [--only gold rte scale nuts_scale recovery]
    python benchmarks/bench_crowds.py --only recovery_nuts --n-sims 80 [--max-minutes 40] \
        --out /tmp/recovery_nuts.json     (not in the default run: ~20 s per crowd; its rows are then merged into
        benchmarks/results/bench_crowds.json, replacing the section's earlier rows)

Sections (rows of ``benchmarks/results/bench_crowds.json``; ``goals`` lists every goal with its measured value and
pass / fail; docs/performance.md renders them, ``benchmarks/render_performance.py``):

``gold``
    ``crowd_gold/{bluebirds,rte,temp}.csv`` of the shared data folder (bluebirds: Welinder et al. 2010; rte, temp: Snow
    et al. 2008). Clean-label accuracy against the gold column for ``ours_default`` = ``fit_em(data,
    model="dawid_skene")`` with every default (``path="auto"``: the sparse path here, whose default start is the
    vote start: one start from the items' vote fractions, the standard Dawid-Skene initialisation and crowd-kit's;
    ``tol=1e-8``, ``max_iter=1000``, ``orientation="auto"``, ``accelerate="auto"``: plain EM at these sizes),
    ``ours_random10`` = the same with ``n_starts=10`` (ten random starts, the default before this change),
    ``majority_vote`` and crowd-kit's ``DawidSkene(n_iter=1000, tol=-inf)`` (exactly 1000 iterations: converged;
    its default ``n_iter=100, tol=1e-5`` is a row too). Times: ``first_call_s`` (first call in the process: tracing and
    compilation, no persistent cache) and ``median_s`` over ``--reps`` later calls (the whole call on a built
    AnnotationSet; crowd-kit's ``fit_predict`` on its DataFrame). Goals: accuracy >= crowd-kit converged - 0.005
    and median time <= crowd-kit converged / 5, on each set.
``rte``
    ``fit_nuts(data, model="dawid_skene", pooling="partial", n_chains=4, n_warmup=300, n_draws=1000)`` after
    ``configure_jax()`` (chains two at a time on 2 cores): ``first_s`` includes tracing and compilation (no
    persistent cache), ``warm_s`` is a second fit with the compiled sampler reused (another seed). Diagnostics over
    fpr, tpr, gap, u, prevalence and the population: max R-hat, min bulk / tail ESS, divergences, transitions at
    the maximum tree depth. Goals: first <= 30 s, warm <= 10 s, R-hat <= 1.01, bulk ESS >= 400, no saturated depth.
    (1000 draws, was 700: the largest R-hat of ~1,300 statistics then scattered around 1.01, measured 1.0088-1.0106
    over three seeds, and 1.0049-1.0058 with 1000. The extra draws are paid for by the preconditioned sites of
    ``models.pooled.posterior_scales``, which cut the warm-up's cost about 3x: its first 100 iterations, with an
    identity mass matrix, used to take ~200 leapfrog steps each.)
``scale``
    A crowd of 1,000,000 items x 10 distinct annotators out of 10,000 (5% spammers, 2% adversaries; the design of
    ``simulate_crowd``, drawn by :func:`fast_crowd` in O(n responses)): 10 million labels.
    In a child process (so that the memory figure is this fit's alone): the responses are loaded from a
    ``.npz`` and the AnnotationSet built (``from_responses``); then the resident set's high-water mark is reset
    (``/proc/self/clear_refs``) and ``fit_em(data, model="dawid_skene")`` run once (defaults: sparse EM from the
    vote start, SQUAREM-accelerated since there are >= 100,000 responses; the time includes compilation). Peak memory above the input = ``VmHWM`` during the fits - ``VmRSS`` before them (it
    includes JAX's buffers and compiled code). Goals: converged, fit <= 20 s, peak <= 2 GB above the input.
    Side by side at 1 million labels (100,000 items, 10,000 annotators): ours (defaults, accelerated), ours with
    ``accelerate=False`` (plain EM; ``max_abs_diff_vs_accelerated`` the largest difference of any fpr, tpr or
    prevalence between the two fits: the fixed point must not move) and crowd-kit's DawidSkene (defaults:
    ``n_iter=100``). ``n_iter`` counts SQUAREM cycles (three EM steps each) for the accelerated fit, EM steps
    otherwise. Outside reference, quoted, not run: spark-crowd's Dawid-Skene, 111 s for 10
    million labels on one machine (Rodrigo, Aledo & Gamez 2019, "spark-crowd"; the figure issue 16 quotes).
``nuts_scale``
    Pooled NUTS on ``fast_crowd(20_000, 1_000, 5)`` (100,000 labels, 1,000 annotators),
    same sampler settings as ``rte``. Goal: <= 5 minutes, with the diagnostics.
``crowds``
    The five public sparse crowds with gold of ``crowds/`` (zencrowd_us and sp: two classes; cf: 5, ms: 10,
    adult: 4; README there), read with ``load_multiclass`` (gold kept aside). Accuracy of the clean-label posterior
    against gold (adult: its 333 gold items) and wall time, side by side: ``ours_dawid_skene`` = ``fit_em(data,
    model="dawid_skene")`` (two classes: on ``data.to_binary()``), ``ours_pooled`` = ``fit_em(data,
    model="pooled")`` (K > 2: what ``evaluate``'s EM route fits on a crowd), crowd-kit's ``DawidSkene`` with its
    defaults, with exactly 100 iterations (``tol=-inf``: its stopping rule asks the evidence bound to rise, which
    it does not on these crowds once a confusion cell reaches 0, so the defaults stop after 2-34 iterations) and
    with 1000 (the converged reference), and majority vote. ``first_call_s`` is the first call in the process
    (compilation or a saved program), ``median_s`` over ``--reps`` later calls (crowd-kit at 1000 iterations:
    one call). ``*_cpu_s`` the same calls' process CPU time (``time.process_time``; the machine is shared, so wall
    times carry the other processes' load), ``crowdkit_100_over_ours(_cpu)`` the ratios of the medians.
    ``ours_pooled_squarem`` (K > 2, an option, no goal): the pooled fit with ``accelerate="auto"``'s rule applied at
    any size (100 plain iterations, then SQUAREM cycles; the default keeps today's crowds plain,
    ``population.ACCELERATE_MIN_RESPONSES``), ``max_abs_diff_vs_plain`` its largest posterior difference from
    ``ours_pooled``. ``--no-converged`` leaves out crowd-kit at 1000 iterations (timing only). Goals (issue "Real
    crowds of any K"): accuracy >= crowd-kit at 1000 iterations - 0.005 and median time <= crowd-kit at 100
    iterations / 5.
``recovery``
    ``--n-sims`` crowds ``simulate_crowd(2000, 100, labels_per_item=6, activity="heavy", spammers=0.05,
    adversaries=0.02, seed=s)``, ``fit_em(..., starts="vote", max_iter=5000)``: coverage of the 90% intervals of
    every annotator's fpr and tpr (``fit.annotators``), goal within 2.58 standard errors of 0.90 (a two-sided 1%
    test of the nominal rate). The intervals of one crowd share its clean-label posterior and are not independent,
    so the standard error is the clustered one: the spread of the per-crowd coverages over sqrt(number of crowds)
    (``se``); ``se_binomial`` = ``sqrt(0.9 * 0.1 / n)`` treats the n intervals as independent and is the smaller
    (optimistic) of the two here. Rows ``coverage_by_labels`` split the coverage by the annotator's number of labels
    (quartiles): the heavy-tailed activity gives many annotators 1-20 labels and a few over 100, and the two ends
    behave differently (few labels: the discrete Jeffreys interval over-covers; many labels: the interval, which
    leaves out the covariance with the other annotators' channels, under-covers). The flags' precision and
    recall ("adversarial" for adversaries, "uninformative" for spammers).
``recovery_nuts``
    The same crowds (same call, seeds ``0..n_sims-1``), each fitted by the pooled (hierarchical) NUTS model,
    ``fit_nuts(data, model="dawid_skene", pooling="partial", seed=s)`` with the sampler settings of ``rte``: the
    equal-tailed 90% intervals of every annotator's fpr and tpr (5% and 95% quantiles of ``fit.draws``), which carry
    the population prior, its uncertainty and the exact likelihood (no soft counts). The fit's annotators are
    matched to the simulation's by id (``fit.annotator_ids``; ``simulate_crowd``'s ids are its annotator indices,
    checked). Flags by the library's rule for NUTS fits (``fit.details["flagged"]``,
    ``inference._common.flag_annotators``: the gap's 90% interval contains 0 -> "uninformative", lies below 0 ->
    "adversarial"). Beside it, in the same run and on the same crowds, the EM route of ``recovery`` (``route`` =
    ``"em"``). Rows per route: ``coverage_90`` (clustered se as in ``recovery``), ``coverage_by_labels`` in the
    fixed bins 1-16, 17-47, 48-128, 129+ labels (the EM route's quartile edges on 80 crowds; clustered se of a
    ratio estimator, ``se``, and the binomial one), ``coverage_active`` (>= 50 labels), ``coverage_by_kind`` (also
    by fpr / tpr) and the flags' precision / recall; ``diagnostics`` over the NUTS fits (first and median wall,
    largest R-hat, the fraction of fits with R-hat > 1.01, smallest bulk ESS, divergences, transitions at the
    maximum tree depth) and one ``fit`` row per crowd. Goals: the ``recovery`` goals for the NUTS intervals, and
    no fit with R-hat > 1.01. ``--max-minutes`` stops starting new crowds after that time (the crowds done are
    the sample).

The machine is shared (2 cores; load average at start and end in the JSON): times measured under load are upper
bounds of what an idle machine gives.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import machine, median, print_table, write_json  # noqa: E402

from noisycal_bayes.experiments.real_data import SHARED_DATA_HINT, shared_data_path  # noqa: E402

DATA = shared_data_path("crowd_gold")
SETS = ("bluebirds", "rte", "temp")
NUTS = dict(n_chains=4, n_warmup=300, n_draws=1000)
SPARK_CROWD = {"labels": 10_000_000, "seconds": 111.0,
               "source": "spark-crowd (Rodrigo, Aledo & Gamez 2019), Dawid-Skene on one machine, the figure quoted by "
                         "issue 16"}


def _quiet():
    w = warnings.catch_warnings()
    w.__enter__()
    warnings.simplefilter("ignore")  # flag / small-gap warnings are expected on crowds
    return w


def load_gold(name):
    from noisycal_bayes import AnnotationSet

    if DATA is None:
        raise SystemExit(f"crowd_gold not found: {SHARED_DATA_HINT}.")
    df = pd.read_csv(DATA / f"{name}.csv")
    data = AnnotationSet.from_long(df.rename(columns={"worker": "annotator"})[["item", "annotator", "label"]])
    gold = df.groupby("item")["gold"].first().reindex(data.item_ids).to_numpy()
    return df, data, gold


def time_ours(data, reps, **kw):
    from noisycal_bayes import fit_em

    w = _quiet()
    t = time.perf_counter()
    fit = fit_em(data, model="dawid_skene", **kw)
    first = time.perf_counter() - t
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fit = fit_em(data, model="dawid_skene", **kw)
        times.append(time.perf_counter() - t)
    w.__exit__(None, None, None)
    return fit, first, median(times)


def time_crowdkit(frame, reps, cpu=None, **kw):
    """crowd-kit's ``DawidSkene(**kw).fit_predict(frame)`` ``reps`` times: ``(labels, median wall s, iterations)``;
    ``cpu`` (a list), when given, receives the median process CPU time (``time.process_time``)."""
    from crowdkit.aggregation import DawidSkene

    w = _quiet()
    times, cpus = [], []
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        model = DawidSkene(**kw)
        labels = model.fit_predict(frame)
        times.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    w.__exit__(None, None, None)
    if cpu is not None:
        cpu.append(median(cpus))
    return labels, median(times), len(getattr(model, "loss_history_", []) or [])


def section_gold(reps):
    rows, goals = [], []
    for name in SETS:
        df, data, gold = load_gold(name)
        base = {"section": "gold", "data": name, "n_items": data.n_items, "n_annotators": data.n_annotators,
                "n_responses": data.n_responses}
        frame = df.rename(columns={"item": "task"})[["task", "worker", "label"]]
        gold_by_item = df.groupby("item")["gold"].first()
        ck = {}
        # tol=-inf: exactly 1000 iterations (crowd-kit's stopping rule asks its evidence bound to rise and stops
        # bluebirds after 2 iterations at any tol; section ``crowds``).
        for stage, kw, n_rep in (("crowdkit_default", {}, reps), ("crowdkit_converged", {"n_iter": 1000, "tol": -np.inf}, 1)):
            labels, med, n_iter = time_crowdkit(frame, n_rep, **kw)
            acc = float(np.mean(labels.to_numpy() == gold_by_item.reindex(labels.index).to_numpy()))
            ck[stage] = {**base, "stage": stage, "median_s": med, "accuracy": acc, "n_iter": n_iter,
                         "settings": str(kw or "defaults")}
        conv = ck["crowdkit_converged"]
        for stage, kw in (("ours_default", {}), ("ours_random10", {"n_starts": 10})):
            fit, first, med = time_ours(data, reps, **kw)
            acc = float(np.mean((fit.clean_label_probability() > 0.5) == gold))
            flags = fit.annotators["flag"].value_counts().to_dict()
            row = {**base, "stage": stage, "first_call_s": first, "median_s": med, "accuracy": acc,
                   "settings": "fit_em defaults (sparse path: vote start)" if not kw else "n_starts=10 (random starts)",
                   "starts": fit.settings.get("starts"), "accelerated": bool(fit.settings.get("accelerate")),
                   "path": fit.details["path"], "orientation": fit.details["orientation"], "n_iter": fit.n_iter,
                   "n_uninformative": int(flags.get("uninformative", 0)),
                   "n_adversarial": int(flags.get("adversarial", 0)),
                   "accuracy_minus_crowdkit": acc - conv["accuracy"], "crowdkit_over_ours": conv["median_s"] / med}
            rows.append(row)
            if stage != "ours_default":
                continue  # the goals are the defaults'; ten random starts are a row for comparison
            goals.append(_goal("gold", f"{name} {stage}: accuracy >= crowd-kit converged - 0.005", acc,
                               conv["accuracy"] - 0.005, ">="))
            goals.append(_goal("gold", f"{name} {stage}: EM time <= crowd-kit converged / 5 (s)", med,
                               conv["median_s"] / 5, "<="))
        rows += [ck["crowdkit_default"], conv,
                 {**base, "stage": "majority_vote", "accuracy": float(np.mean(data.majority_vote() == gold))}]
    return rows, goals


#: The public sparse crowds with gold of ``crowds/`` (README there): name -> number of classes.
CROWDS = {"zencrowd_us": 2, "sp": 2, "cf": 5, "ms": 10, "adult": 4}


def _pooled_squarem_rule(fit_em):
    """``fit_em`` with :func:`~noisycal_bayes.inference.population.fit_em_population`'s ``accelerate="auto"`` rule
    applied at any size (100 plain iterations, then SQUAREM cycles): the option row ``ours_pooled_squarem``."""
    from noisycal_bayes.inference import population

    def fit(data, **kw):
        saved = population.ACCELERATE_MIN_RESPONSES
        population.ACCELERATE_MIN_RESPONSES = 0
        try:
            return fit_em(data, **kw)
        finally:
            population.ACCELERATE_MIN_RESPONSES = saved
    return fit


def section_crowds(reps, converged=True):
    """``crowds/*.csv``, any K, side by side with crowd-kit: accuracy against gold and wall time (module docstring).
    ``converged=False`` leaves out crowd-kit's 1000-iteration reference (and the accuracy goals that need it)."""
    from noisycal_bayes import fit_em, load_multiclass

    rows, goals = [], []
    for name, k in CROWDS.items():
        path = shared_data_path(f"crowds/{name}.csv")
        if path is None:
            raise SystemExit(f"crowds/{name}.csv not found: {SHARED_DATA_HINT}.")
        df = pd.read_csv(path)
        data = load_multiclass(str(path))
        classes = np.asarray(data.classes)
        gold_by_item = df.groupby("item")["gold"].first()
        gold = gold_by_item.reindex(list(data.item_ids)).to_numpy()
        known = gold >= 0  # -1: no gold label (adult: 333 gold items)
        base = {"section": "crowds", "data": name, "n_classes": k, "n_items": int(data.n_items),
                "n_annotators": int(data.n_annotators), "n_responses": int(np.asarray(data.responses[0]).size),
                "n_gold": int(known.sum())}
        frame = df.rename(columns={"item": "task", "annotator": "worker"})[["task", "worker", "label"]]
        ck = {}
        # crowd-kit stops when its evidence bound fails to rise by `tol`; on these crowds the bound is not monotone
        # (cells of the confusion estimates reach 0) and its defaults stop after 2-34 iterations. tol=-inf runs
        # exactly n_iter iterations: 100 is the goal's yardstick, 1000 the converged reference.
        for stage, kw, n_rep in (("crowdkit_default", {}, reps),
                                 ("crowdkit_100", {"n_iter": 100, "tol": -np.inf}, reps),
                                 ("crowdkit_converged", {"n_iter": 1000, "tol": -np.inf}, 1))[:3 if converged else 2]:
            cpu = []
            labels, med, n_iter = time_crowdkit(frame, n_rep, cpu=cpu, **kw)
            g = gold_by_item.reindex(labels.index)
            ok = (g >= 0).to_numpy()
            acc = float(np.mean(labels.to_numpy()[ok] == g.to_numpy()[ok]))
            ck[stage] = {**base, "stage": stage, "median_s": med, "median_cpu_s": cpu[0], "accuracy": acc,
                         "n_iter": n_iter, "settings": str(kw or "defaults (n_iter=100, tol=1e-5)"), "reps": n_rep}
        rows += list(ck.values())
        stages = [("ours_dawid_skene", {"model": "dawid_skene"}, fit_em)]
        if k > 2:  # evaluate's EM route on K-class crowds: the pooled Dawid-Skene; and its SQUAREM rule (an option)
            stages += [("ours_pooled", {"model": "pooled"}, fit_em),
                       ("ours_pooled_squarem", {"model": "pooled"}, _pooled_squarem_rule(fit_em))]
        plain_T = None
        for stage, kw, fitter in stages:
            w = _quiet()
            times, cpus = [], []
            try:
                for _ in range(1 + reps):
                    t, c = time.perf_counter(), time.process_time()
                    fit = fitter(data if k > 2 else data.to_binary(), **kw)
                    times.append(time.perf_counter() - t)
                    cpus.append(time.process_time() - c)
            except (TypeError, ValueError) as err:  # an option this route does not take: say so in the row
                w.__exit__(None, None, None)
                rows.append({**base, "stage": stage, "error": str(err)[:200]})
                continue
            w.__exit__(None, None, None)
            if k > 2:
                pred = classes[np.argmax(fit.clean_label_probability(data), axis=1)]
            else:
                pred = classes[(np.asarray(fit.clean_label_probability()) > 0.5).astype(int)]
            acc = float(np.mean(pred[known].astype(np.int64) == gold[known].astype(np.int64)))
            conv = ck.get("crowdkit_converged")
            row = {**base, "stage": stage, "settings": str(kw) + (" accelerate='auto' rule at any size"
                                                                  if stage == "ours_pooled_squarem" else ""),
                   "first_call_s": times[0], "first_call_cpu_s": cpus[0],
                   "median_s": median(times[1:]), "median_cpu_s": median(cpus[1:]), "accuracy": acc,
                   "converged": bool(fit.converged),
                   "n_iter": int(fit.n_iter), "starts": (fit.settings or {}).get("starts"),
                   "n_start_runs": int(np.size(fit.start_logliks)), "selected_start": int(fit.selected_start),
                   "orientation": (fit.details or {}).get("orientation"),
                   "crowdkit_100_over_ours": ck["crowdkit_100"]["median_s"] / median(times[1:]),
                   "crowdkit_100_over_ours_cpu": ck["crowdkit_100"]["median_cpu_s"] / median(cpus[1:]),
                   "accuracy_minus_crowdkit_converged": None if conv is None else acc - conv["accuracy"]}
            if k > 2:   # the SQUAREM rule's distance to the plain fit's posteriors (the same fixed point?)
                T = np.asarray(fit.clean_label_probability(data))
                if stage == "ours_pooled":
                    plain_T = T
                elif stage == "ours_pooled_squarem" and plain_T is not None:
                    row["max_abs_diff_vs_plain"] = float(np.max(np.abs(T - plain_T)))
            rows.append(row)
            if stage == "ours_pooled_squarem":
                continue   # an option: no goal
            if stage == "ours_dawid_skene" and conv is not None:
                goals.append(_goal("crowds", f"{name} {stage}: accuracy >= crowd-kit converged - 0.005", acc,
                                   conv["accuracy"] - 0.005, ">="))
            if stage == "ours_dawid_skene" or k > 2:   # the EM route's fit: the pooled model on K-class crowds
                goals.append(_goal("crowds", f"{name} {stage}: EM time <= crowd-kit 100 iterations / 5 (s)",
                                   row["median_s"], ck["crowdkit_100"]["median_s"] / 5, "<="))
        votes = data.majority_vote()
        rows.append({**base, "stage": "majority_vote",
                     "accuracy": float(np.mean(classes[votes][known].astype(np.int64) == gold[known].astype(np.int64)))})
    return rows, goals


def _goal(section, goal, measured, target, op):
    ok = bool(measured <= target) if op == "<=" else bool(measured >= target)
    return {"section": section, "stage": "goal", "goal": goal, "measured": float(measured), "target": float(target),
            "op": op, "pass": ok}


def _nuts_row(fit, wall):
    tab, st = fit.diagnostics, fit.sample_stats
    return {"wall_s": wall, "r_hat_max": float(tab["r_hat"].max()), "r_hat_worst": str(tab["r_hat"].idxmax()),
            "ess_bulk_min": float(tab["ess_bulk"].min()), "ess_tail_min": float(tab["ess_tail"].min()),
            "n_divergent": int(fit.n_divergent), "n_max_depth": int(fit.details["n_max_depth"]),
            "tree_depth_mean": float(np.mean(st["tree_depth"])), "tree_depth_max": int(np.max(st["tree_depth"])),
            "leapfrog_per_draw": float(np.mean(st["n_steps"])), "step_size_mean": float(np.mean(st["step_size"]))}


def run_nuts(data, seed, settings):
    from noisycal_bayes.inference import fit_nuts

    w = _quiet()
    t, cpu = time.perf_counter(), time.process_time()
    fit = fit_nuts(data, model="dawid_skene", pooling="partial", seed=seed, progress_bar=False, **settings)
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    w.__exit__(None, None, None)
    # CPU seconds of this process (all threads): on a shared machine, wall / cpu shows the share it got.
    return fit, dict(_nuts_row(fit, wall), cpu_s=cpu, load_avg_1min=os.getloadavg()[0])


def _nuts_goals(section, label, rows, limit_first, limit_warm=None):
    goals = [_goal(section, f"{label}: wall incl. compilation (s)", rows[0]["wall_s"], limit_first, "<=")]
    if limit_warm is not None:
        goals.append(_goal(section, f"{label}: wall, compiled sampler reused (s)", rows[1]["wall_s"], limit_warm, "<="))
    for r in rows:
        goals += [_goal(section, f"{label} ({r['stage']}): max R-hat", r["r_hat_max"], 1.01, "<="),
                  _goal(section, f"{label} ({r['stage']}): min bulk ESS", r["ess_bulk_min"], 400, ">="),
                  _goal(section, f"{label} ({r['stage']}): transitions at max tree depth", r["n_max_depth"], 0, "<=")]
    return goals


def section_rte(settings):
    _, data, gold = load_gold("rte")
    rows = []
    for rep, stage in enumerate(("first", "warm")):
        fit, row = run_nuts(data, rep, settings)
        post = fit.clean_label_probability().mean(axis=(0, 1))
        rows.append({"section": "rte", "data": "rte", "stage": stage, "n_items": data.n_items,
                     "n_annotators": data.n_annotators, "n_responses": data.n_responses, **row,
                     "accuracy": float(np.mean((post > 0.5) == gold)), "settings": str(settings),
                     "population_fpr_median": fit.details["population"]["fpr"]["median"],
                     "population_tpr_median": fit.details["population"]["tpr"]["median"],
                     "n_flagged": sum(len(v) for k, v in fit.details["flagged"].items() if k != "level")})
        print(rows[-1], flush=True)
    return rows, _nuts_goals("rte", "pooled NUTS on rte", rows, 30.0, 10.0)


def fast_crowd(n_items, n_annotators, per_item, *, spammers=0.05, adversaries=0.02, prevalence=0.5, seed=0):
    """``simulate_crowd``'s design (honest fpr ~ U(0.05, 0.3), tpr ~ U(0.7, 0.95); spammers fpr = tpr ~ U(0.2, 0.8);
    adversaries with fpr and tpr exchanged; uniform activity, ``per_item`` distinct annotators per item) in O(n
    responses): ``simulate_crowd`` draws a Gumbel key for every (item, annotator) cell and builds the dense
    items x annotators matrix, 10 GB at 1 million items x 10,000 annotators. Returns responses sorted by item
    then annotator, the truth and each annotator's kind."""
    rng = np.random.default_rng(seed)
    fpr, tpr = rng.uniform(0.05, 0.3, n_annotators), rng.uniform(0.7, 0.95, n_annotators)
    kind = np.full(n_annotators, "honest", dtype=object)
    n_spam, n_adv = int(round(spammers * n_annotators)), int(round(adversaries * n_annotators))
    order = rng.permutation(n_annotators)
    spam, adv = order[:n_spam], order[n_spam:n_spam + n_adv]
    kind[spam], kind[adv] = "spammer", "adversary"
    rate = rng.uniform(0.2, 0.8, n_spam)
    fpr[spam], tpr[spam] = rate, rate
    fpr[adv], tpr[adv] = tpr[adv].copy(), fpr[adv].copy()
    y = (rng.random(n_items) < prevalence).astype(np.int8)
    # per_item distinct annotators per item: draw, then redraw the rows with a repeat (rare when J >> per_item).
    who = rng.integers(0, n_annotators, (n_items, per_item), dtype=np.int32)
    while True:
        who.sort(axis=1)
        dup = np.flatnonzero((who[:, 1:] == who[:, :-1]).any(axis=1))
        if dup.size == 0:
            break
        who[dup] = rng.integers(0, n_annotators, (dup.size, per_item), dtype=np.int32)
    missing = np.flatnonzero(np.bincount(who.ravel(), minlength=n_annotators) == 0)
    if missing.size:  # every annotator needs a label: give each unused one the last slot of a random item
        rows = rng.choice(n_items, missing.size, replace=False)
        who[rows, -1] = missing
        who[rows] = np.sort(who[rows], axis=1)
    item = np.repeat(np.arange(n_items, dtype=np.int32), per_item)
    ann = who.ravel()
    label = (rng.random(item.size) < np.where(y[item] == 1, tpr[ann], fpr[ann])).astype(np.int8)
    return item, ann, label, y, fpr, tpr, kind.astype(str)


def _sim_to_npz(path, n_items, n_annotators, per_item, seed=0):
    item, ann, lab, y, fpr, tpr, kind = fast_crowd(n_items, n_annotators, per_item, seed=seed)
    np.savez(path, item=item, annotator=ann, label=lab, kind=kind, fpr=fpr, tpr=tpr, y=y)


def _status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024  # kB
    return 0


def child_scale(path, out):
    """In a fresh process: load responses, build the set, reset the high-water mark, fit once; JSON to ``out``."""
    from noisycal_bayes import AnnotationSet, fit_em

    z = np.load(path)
    data = AnnotationSet.from_responses(z["item"], z["annotator"], z["label"])
    y = z["y"]
    del z
    rss_input = _status("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # reset VmHWM to the current RSS (Linux >= 4.0)
        reset = True
    except OSError:
        reset = False
    res = {"n_items": data.n_items, "n_annotators": data.n_annotators, "n_responses": data.n_responses,
           "rss_input_bytes": rss_input, "hwm_reset": reset}
    w = _quiet()
    t = time.perf_counter()
    fit = fit_em(data, model="dawid_skene")
    res["first_s"] = time.perf_counter() - t  # one call, compilation included (a second would double the run)
    w.__exit__(None, None, None)
    res["peak_above_input_bytes"] = _status("VmHWM") - rss_input
    res.update(converged=bool(fit.converged), n_iter=int(fit.n_iter), path=fit.details["path"],
               starts=fit.settings["starts"], accelerated=bool(fit.settings["accelerate"]),
               accuracy=float(np.mean((fit.clean_label_probability() > 0.5) == y)))
    Path(out).write_text(json.dumps(res))


def section_scale(quick):
    from noisycal_bayes import AnnotationSet

    rows, goals = [], []
    big = (100_000, 1_000, 10) if quick else (1_000_000, 10_000, 10)
    small = (10_000, 1_000, 10) if quick else (100_000, 10_000, 10)
    with tempfile.TemporaryDirectory() as tmp:
        npz, out = os.path.join(tmp, "crowd.npz"), os.path.join(tmp, "res.json")
        _sim_to_npz(npz, *big)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parent.parent)]
                                                           + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
        subprocess.run([sys.executable, __file__, "--child-scale", npz, out], check=True, env=env)
        res = json.loads(Path(out).read_text())
        rows.append({"section": "scale", "stage": "ours_sparse_em_default", "data": "simulated", **res,
                     "peak_above_input_gb": res["peak_above_input_bytes"] / 1e9, "memory_method":
                     "child process; /proc/self/status VmHWM after resetting it (clear_refs 5) minus VmRSS before the "
                     "fits: NumPy, JAX buffers and compiled code included"})
        label = f"EM on {res['n_responses']:,} labels"
        goals += [_goal("scale", f"{label}: converged (1 = yes)", float(res["converged"]), 1, ">="),
                  _goal("scale", f"{label}: wall incl. compilation (s)", res["first_s"], 20.0, "<="),
                  _goal("scale", f"{label}: peak memory above the input (GB)", res["peak_above_input_bytes"] / 1e9,
                        2.0, "<=")]
        # Side by side with crowd-kit at 1 million labels (in this process).
        _sim_to_npz(npz, *small, seed=1)
        z = np.load(npz)
        data = AnnotationSet.from_responses(z["item"], z["annotator"], z["label"])
        fit, first, med = time_ours(data, 2)
        plain, plain_first, plain_med = time_ours(data, 1, accelerate=False)
        y = z["y"]
        acc = float(np.mean((fit.clean_label_probability() > 0.5) == y))
        diff = max(float(np.max(np.abs(np.atleast_1d(fit.point[k]) - np.atleast_1d(plain.point[k]))))
                   for k in ("fpr", "tpr", "prevalence"))
        frame = pd.DataFrame({"task": z["item"], "worker": z["annotator"], "label": z["label"]})
        labels, ck_s, ck_iter = time_crowdkit(frame, 1)
        ck_acc = float(np.mean(labels.to_numpy() == y[labels.index.to_numpy()]))
        base = {"section": "scale", "data": "simulated", "n_items": data.n_items, "n_annotators": data.n_annotators,
                "n_responses": data.n_responses}
        rows += [{**base, "stage": "ours_sparse_em_default", "first_call_s": first, "median_s": med, "accuracy": acc,
                  "n_iter": int(fit.n_iter), "accelerated": bool(fit.settings["accelerate"])},
                 {**base, "stage": "ours_sparse_em_plain", "first_call_s": plain_first, "median_s": plain_med,
                  "accuracy": float(np.mean((plain.clean_label_probability() > 0.5) == y)),
                  "n_iter": int(plain.n_iter), "accelerated": False, "max_abs_diff_vs_accelerated": diff},
                 {**base, "stage": "crowdkit_default", "median_s": ck_s, "accuracy": ck_acc, "n_iter": ck_iter},
                 {"section": "scale", "stage": "spark_crowd_published", "n_responses": SPARK_CROWD["labels"],
                  "median_s": SPARK_CROWD["seconds"], "source": SPARK_CROWD["source"], "measured_here": False}]
    return rows, goals


def section_nuts_scale(quick, settings):
    from noisycal_bayes import AnnotationSet

    n_items, n_ann = (2_000, 100) if quick else (20_000, 1_000)
    item, ann, lab, _, fpr, tpr, _ = fast_crowd(n_items, n_ann, 5, seed=2)
    data = AnnotationSet.from_responses(item, ann, lab)
    fit, row = run_nuts(data, 0, settings)
    lo, hi = (np.quantile(fit.draws[k], [0.05, 0.95], axis=(0, 1)) for k in ("fpr", "tpr"))
    cover = float(np.mean(np.concatenate([(lo[0] <= fpr) & (fpr <= lo[1]), (hi[0] <= tpr) & (tpr <= hi[1])])))
    row = {"section": "nuts_scale", "data": "simulated", "stage": "first", "n_items": data.n_items,
           "n_annotators": data.n_annotators, "n_responses": data.n_responses, **row,
           "coverage_90_fpr_tpr": cover, "settings": str(settings)}
    print(row, flush=True)
    goals = _nuts_goals("nuts_scale", f"pooled NUTS, {row['n_responses']:,} labels", [row], 300.0)
    return [row], goals


def _population_intervals(fit, level=0.9):
    """The road not taken, measured beside ours: intervals of each annotator's fpr and tpr from a population
    (empirical-Bayes) Beta prior fitted to the crowd's scaled soft counts by beta-binomial marginal likelihood,
    ``Beta(rho s + a, rho (n - s) + b)``, instead of Jeffreys' ``Beta(1/2, 1/2)`` (models/em_result.py
    annotator_table). Returns {"fpr": (lower, upper), "tpr": (lower, upper)}."""
    from scipy import optimize, special

    from noisycal_bayes.inference.em import soft_counts

    s0, n0, s1, n1, m0, m1 = soft_counts(fit.inputs, fit.point["fpr"], fit.point["tpr"], fit.point["prevalence"])[:6]
    out = {}
    for name, s, n, m in (("fpr", s0, n0, m0), ("tpr", s1, n1, m1)):
        p = np.clip(fit.point[name], 1e-9, 1 - 1e-9)
        complete = s / p**2 + np.maximum(n - s, 0.0) / (1 - p) ** 2
        rho = np.clip(np.where(complete > 0, 1.0 - m / np.where(complete > 0, complete, 1.0), 1.0), 0.01, 1.0)
        x, y = rho * s, rho * np.maximum(n - s, 0.0)

        def nll(t):
            a, b = np.exp(t)
            return -np.sum(special.betaln(x + a, y + b) - special.betaln(a, b))

        a, b = np.exp(optimize.minimize(nll, [0.0, 0.0], method="Nelder-Mead").x)
        q = (1 - level) / 2
        out[name] = (special.betaincinv(x + a, y + b, q), special.betaincinv(x + a, y + b, 1 - q))
    return out


#: Label count from which the recovery section also judges coverage alone (see section_recovery).
ACTIVE_LABELS = 50


def section_recovery(n_sims):
    from noisycal_bayes import fit_em
    from noisycal_bayes.simulate import simulate_crowd

    cover, kinds, flags, n_labels, per_set, n_failed = [], [], [], [], [], 0
    cover_pop, per_set_active, cover_oracle, per_set_oracle = [], [], [], []
    w = _quiet()
    for s in range(n_sims):
        sim = simulate_crowd(2000, 100, labels_per_item=6, activity="heavy", spammers=0.05, adversaries=0.02, seed=s)
        fit = fit_em(sim.data, model="dawid_skene", starts="vote", max_iter=5000)
        t = fit.annotators
        if t is None:
            n_failed += 1
            continue
        here = []
        pop = _population_intervals(fit)
        oracle = _oracle_table(sim, t)
        for name, truth in (("fpr", sim.fpr), ("tpr", sim.tpr)):
            here.append(((t[f"{name}_lower"] <= truth) & (truth <= t[f"{name}_upper"])).to_numpy())
            cover_pop.append((pop[name][0] <= truth) & (truth <= pop[name][1]))
            cover_oracle.append(((oracle[f"{name}_lower"] <= truth) & (truth <= oracle[f"{name}_upper"])).to_numpy())
            n_labels.append(t["n_labels"].to_numpy())
        cover += here
        per_set.append(float(np.mean(np.concatenate(here))))
        per_set_oracle.append(float(np.mean(np.concatenate(cover_oracle[-2:]))))
        active = np.concatenate([t["n_labels"].to_numpy()] * 2) >= ACTIVE_LABELS
        per_set_active.append((float(np.sum(np.concatenate(here)[active])), int(active.sum())))
        kinds.append(sim.kind)
        flags.append(t["flag"].to_numpy())
    w.__exit__(None, None, None)
    cover, kinds, flags = np.concatenate(cover), np.concatenate(kinds), np.concatenate(flags)
    cover_pop, cover_oracle = np.concatenate(cover_pop), np.concatenate(cover_oracle)
    n_labels = np.concatenate(n_labels)
    n = cover.size
    # Clustered standard error: intervals of one crowd are dependent (one clean-label posterior); the crowds are
    # independent and equal in size, so the mean coverage's se is the spread of the per-crowd means / sqrt(crowds).
    per_set = np.asarray(per_set)
    se = float(per_set.std(ddof=1) / np.sqrt(per_set.size))
    se_binomial = float(np.sqrt(0.9 * 0.1 / n))
    rows = [{"section": "recovery", "stage": "coverage_90", "n_sims": n_sims, "n_failed": n_failed,
             "n_intervals": n, "coverage": float(cover.mean()), "se": se, "se_binomial": se_binomial,
             "z_vs_nominal": float((cover.mean() - 0.9) / se)}]
    edges = np.unique(np.quantile(n_labels, [0, 0.25, 0.5, 0.75, 1.0]))
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (n_labels >= lo) & ((n_labels < hi) if hi < edges[-1] else (n_labels <= hi))
        c = cover[inside]
        rows.append({"section": "recovery", "stage": "coverage_by_labels", "n_labels_from": int(lo),
                     "n_labels_to": int(hi), "n_intervals": int(c.size), "coverage": float(c.mean()),
                     "coverage_oracle": float(cover_oracle[inside].mean()),
                     "se_binomial": float(np.sqrt(0.09 / max(c.size, 1)))})
    # Each interval's annotator kind (fpr and tpr intervals of a crowd are stacked: kinds repeat twice per crowd).
    kind_of = np.concatenate([np.concatenate([k, k]) for k in np.split(kinds, len(per_set))])
    for what, c in (("ours_jeffreys", cover), ("population_prior", cover_pop), ("oracle_true_labels", cover_oracle)):
        rows.append({"section": "recovery", "stage": "coverage_by_kind", "intervals": what,
                     "coverage": float(c.mean()),
                     **{f"coverage_{k}": float(c[kind_of == k].mean()) for k in ("honest", "spammer", "adversary")},
                     **{f"n_{k}": int(np.sum(kind_of == k)) for k in ("honest", "spammer", "adversary")}})
    # Annotators with enough labels for a binomial interval to reach its nominal level (below, discrete counts make
    # any such interval conservative: docs/crowds.md). Ratio estimator over crowds, clustered se.
    hits, sizes = (np.asarray(v, np.float64) for v in zip(*per_set_active))
    c_act = hits.sum() / sizes.sum()
    se_act = float(np.sqrt(np.sum((hits - c_act * sizes) ** 2) / (len(sizes) * (len(sizes) - 1))) / sizes.mean())
    rows.append({"section": "recovery", "stage": "coverage_active", "min_labels": ACTIVE_LABELS,
                 "n_intervals": int(sizes.sum()), "coverage": float(c_act), "se": se_act})
    goals = [_goal("recovery", f"annotators with >= {ACTIVE_LABELS} labels: 90% interval coverage within 2.58 se of "
                               f"0.90 ({int(sizes.sum())} intervals)", abs(float(c_act) - 0.9), 2.58 * se_act, "<=")]
    goals += [_goal("recovery", f"90% intervals of fpr and tpr: coverage >= 0.90 - 2.58 se ({n} intervals, "
                               f"{per_set.size} crowds, clustered se)", float(cover.mean()), 0.9 - 2.58 * se, ">="),
             _goal("recovery", f"90% intervals of fpr and tpr: coverage <= 0.90 + 2.58 se ({n} intervals, "
                               f"{per_set.size} crowds, clustered se)", float(cover.mean()), 0.9 + 2.58 * se, "<=")]
    # Against the oracle (Jeffreys intervals from the true labels, same crowds): the paired per-crowd difference,
    # clustered se. Below 17 labels no interval of this kind reaches 0.90 (discrete counts), the oracle included.
    diff = per_set - np.asarray(per_set_oracle)
    se_diff = float(diff.std(ddof=1) / np.sqrt(diff.size))
    rows.append({"section": "recovery", "stage": "coverage_vs_oracle", "coverage": float(cover.mean()),
                 "coverage_oracle": float(cover_oracle.mean()), "difference": float(diff.mean()), "se": se_diff})
    goals.append(_goal("recovery", "90% intervals of fpr and tpr: coverage within 2.58 se of the oracle's (Jeffreys "
                                   "from the true labels; paired by crowd)", abs(float(diff.mean())), 2.58 * se_diff,
                       "<="))
    for kind, flag in (("adversary", "adversarial"), ("spammer", "uninformative")):
        tp = int(np.sum((kinds == kind) & (flags == flag)))
        n_true, n_flag = int(np.sum(kinds == kind)), int(np.sum(flags == flag))
        rows.append({"section": "recovery", "stage": f"flag_{flag}", "subset": kind, "n_true": n_true,
                     "n_flagged": n_flag, "recall": tp / max(n_true, 1), "precision": tp / max(n_flag, 1)})
    return rows, goals


def _oracle_table(sim, table):
    """The reference no interval from noisy labels can beat: each annotator's Jeffreys intervals from its counts
    against the TRUE clean labels (``annotator_table`` with hard counts: no label uncertainty, no Louis scaling, no
    grid), rows in ``table``'s annotator order."""
    from noisycal_bayes.models.em_result import annotator_table

    r = sim.responses
    item_pos = {v: k for k, v in enumerate(sim.data.item_ids)}
    ann_pos = {v: k for k, v in enumerate(table["annotator"])}
    item = np.array([item_pos[v] for v in r.iloc[:, 0]])
    ann = np.array([ann_pos[v] for v in r.iloc[:, 1]])
    lab = r.iloc[:, 2].to_numpy()
    y = np.asarray(sim.clean_labels)[item]
    j = len(table)
    n0 = np.bincount(ann, weights=y == 0, minlength=j)
    s0 = np.bincount(ann, weights=(y == 0) & (lab == 1), minlength=j)
    n1 = np.bincount(ann, weights=y == 1, minlength=j)
    s1 = np.bincount(ann, weights=(y == 1) & (lab == 1), minlength=j)
    with np.errstate(divide="ignore", invalid="ignore"):
        return annotator_table(table["annotator"], s0 / np.maximum(n0, 1), s1 / np.maximum(n1, 1), (s0, n0, s1, n1),
                               n0 + n1)


#: Fixed label-count bins of the recovery rows (the quartile edges of the EM route on its 80 crowds: 1-16, 17-47,
#: 48-128, 129+), so that both routes and every run are split the same way.
LABEL_BINS = (1, 17, 48, 129)
#: The annotator kinds of ``simulate_crowd`` and the flag that should find each.
KIND_FLAGS = (("adversary", "adversarial"), ("spammer", "uninformative"))


def _ratio_se(hits, sizes):
    """Clustered standard error of a pooled proportion ``sum hits / sum sizes`` over independent crowds (ratio
    estimator; crowds of unequal size in a subset, e.g. the annotators of one label bin)."""
    hits, sizes = np.asarray(hits, np.float64), np.asarray(sizes, np.float64)
    keep = sizes > 0
    if keep.sum() < 2:
        return float("nan")
    hits, sizes = hits[keep], sizes[keep]
    c = hits.sum() / sizes.sum()
    # Linearisation: var(sum h / sum n) ~ sum (h_k - c n_k)^2 / (K (K - 1) nbar^2).
    return float(np.sqrt(np.sum((hits - c * sizes) ** 2) / (len(sizes) * (len(sizes) - 1))) / sizes.mean())


def _recovery_rows(route, label, crowds, *, n_sims, extra=None):
    """Coverage rows (overall, by label bin, active annotators, by kind) and flag rows of one route.

    ``crowds``: one dict per crowd with ``cover`` (bool, (2 n_annotators,): fpr intervals then tpr intervals),
    ``n_labels`` (n_annotators,), ``kind`` (n_annotators,) and ``flag`` (n_annotators,), in the simulation's
    annotator order. Returns (rows, summary) with summary = {"coverage", "se", "active", "se_active"}.
    """
    sec = "recovery_nuts"
    per_set = np.array([c["cover"].mean() for c in crowds])
    cover = np.concatenate([c["cover"] for c in crowds])
    n = cover.size
    # Clustered standard error: intervals of one crowd share its posterior; crowds are independent and of equal
    # size (2 x 100 intervals), so the se of the mean coverage is the spread of the per-crowd means / sqrt(crowds).
    se = float(per_set.std(ddof=1) / np.sqrt(per_set.size)) if per_set.size > 1 else float("nan")
    rows = [{"section": sec, "route": route, "stage": "coverage_90", "intervals": label, "n_sims": n_sims,
             "n_crowds": len(crowds), "n_intervals": n, "coverage": float(cover.mean()), "se": se,
             "se_binomial": float(np.sqrt(0.9 * 0.1 / n)), "z_vs_nominal": float((cover.mean() - 0.9) / se),
             **(extra or {})}]
    edges = list(LABEL_BINS) + [np.inf]
    for lo, hi in zip(edges[:-1], edges[1:]):
        hits, sizes = [], []
        for c in crowds:
            inside = np.tile((c["n_labels"] >= lo) & (c["n_labels"] < hi), 2)
            hits.append(c["cover"][inside].sum())
            sizes.append(inside.sum())
        m = int(np.sum(sizes))
        rows.append({"section": sec, "route": route, "stage": "coverage_by_labels", "intervals": label,
                     "n_labels_from": int(lo), "n_labels_to": None if hi == np.inf else int(hi - 1),
                     "n_intervals": m, "coverage": float(np.sum(hits) / max(m, 1)), "se": _ratio_se(hits, sizes),
                     "se_binomial": float(np.sqrt(0.09 / max(m, 1)))})
    hits = [c["cover"][np.tile(c["n_labels"] >= ACTIVE_LABELS, 2)].sum() for c in crowds]
    sizes = [2 * int(np.sum(c["n_labels"] >= ACTIVE_LABELS)) for c in crowds]
    c_act, se_act = float(np.sum(hits) / np.sum(sizes)), _ratio_se(hits, sizes)
    rows.append({"section": sec, "route": route, "stage": "coverage_active", "intervals": label,
                 "min_labels": ACTIVE_LABELS, "n_intervals": int(np.sum(sizes)), "coverage": c_act, "se": se_act})
    kind_of = np.concatenate([np.tile(c["kind"], 2) for c in crowds])
    rate_of = np.concatenate([np.repeat(["fpr", "tpr"], c["kind"].size) for c in crowds])
    rows.append({"section": sec, "route": route, "stage": "coverage_by_kind", "intervals": label,
                 "coverage": float(cover.mean()),
                 **{f"coverage_{k}": float(cover[kind_of == k].mean()) for k in ("honest", "spammer", "adversary")},
                 **{f"n_{k}": int(np.sum(kind_of == k)) for k in ("honest", "spammer", "adversary")},
                 **{f"coverage_{r}": float(cover[rate_of == r].mean()) for r in ("fpr", "tpr")}})
    kinds = np.concatenate([c["kind"] for c in crowds])
    flags = np.concatenate([c["flag"] for c in crowds])
    for kind, flag in KIND_FLAGS:
        tp = int(np.sum((kinds == kind) & (flags == flag)))
        n_true, n_flag = int(np.sum(kinds == kind)), int(np.sum(flags == flag))
        rows.append({"section": sec, "route": route, "stage": f"flag_{flag}", "intervals": label, "subset": kind,
                     "n_true": n_true, "n_flagged": n_flag, "recall": tp / max(n_true, 1),
                     "precision": tp / max(n_flag, 1)})
    return rows, {"coverage": float(cover.mean()), "se": se, "n": n, "active": c_act, "se_active": se_act,
                  "n_active": int(np.sum(sizes))}


def section_recovery_nuts(n_sims, settings, max_minutes=None):
    """The pooled NUTS posterior on section_recovery's crowds (same simulation call and seeds), with the EM route's
    Jeffreys intervals on the same crowds beside it (module docstring)."""
    from noisycal_bayes import fit_em
    from noisycal_bayes.simulate import simulate_crowd

    t0 = time.perf_counter()
    nuts, em, fits = [], [], []
    for s in range(n_sims):
        if max_minutes is not None and s >= 2 and time.perf_counter() - t0 > 60 * max_minutes:
            break  # time budget spent: the crowds measured so far are the sample (seeds 0..s-1)
        sim = simulate_crowd(2000, 100, labels_per_item=6, activity="heavy", spammers=0.05, adversaries=0.02, seed=s)
        sim_ids = np.asarray(sim.data.annotator_ids)
        # The simulation's arrays (fpr, tpr, kind) are indexed by the integer annotator it drew; the AnnotationSet
        # keeps those integers as ids: check it, then map every fit's annotators to the truth by id.
        assert np.array_equal(sim_ids, np.arange(sim.fpr.size)), "simulate_crowd's annotator ids are not 0..n-1"
        n_labels = np.bincount(sim.responses["annotator"].to_numpy(), minlength=sim.fpr.size)
        w = _quiet()
        t = time.perf_counter()
        fit = fit_em(sim.data, model="dawid_skene", starts="vote", max_iter=5000)
        em_wall = time.perf_counter() - t
        w.__exit__(None, None, None)
        tab = fit.annotators
        if tab is not None:
            j = np.asarray(tab["annotator"].to_numpy(), dtype=np.int64)
            assert np.array_equal(tab["n_labels"].to_numpy(), n_labels[j]), "EM table's annotators not matched by id"
            em.append({"cover": np.concatenate([((tab[f"{k}_lower"] <= truth[j]) & (truth[j] <= tab[f"{k}_upper"]))
                                                .to_numpy() for k, truth in (("fpr", sim.fpr), ("tpr", sim.tpr))]),
                       "n_labels": n_labels[j], "kind": sim.kind[j], "flag": tab["flag"].to_numpy().astype(str)})
        fit, row = run_nuts(sim.data, s, settings)
        j = np.asarray(fit.annotator_ids, dtype=np.int64)  # the fit's annotator order, as simulation indices
        lo, hi = (np.quantile(fit.draws[k].reshape(-1, j.size), [0.05, 0.95], axis=0) for k in ("fpr", "tpr"))
        flag = np.full(j.size, "ok", dtype=object)
        pos = {a: i for i, a in enumerate(fit.annotator_ids)}
        for name in ("uninformative", "adversarial"):  # the library's rule for NUTS fits (flag_annotators)
            flag[[pos[a] for a in fit.details["flagged"][name]]] = name
        nuts.append({"cover": np.concatenate([(lo[0] <= sim.fpr[j]) & (sim.fpr[j] <= lo[1]),
                                              (hi[0] <= sim.tpr[j]) & (sim.tpr[j] <= hi[1])]),
                     "n_labels": n_labels[j], "kind": sim.kind[j], "flag": flag.astype(str)})
        fits.append({"section": "recovery_nuts", "stage": "fit", "seed": s, **row, "em_wall_s": em_wall,
                     "em_failed": tab is None, "coverage_nuts": float(nuts[-1]["cover"].mean()),
                     "coverage_em": float(em[-1]["cover"].mean()) if tab is not None else None})
        print({k: fits[-1][k] for k in ("seed", "wall_s", "r_hat_max", "ess_bulk_min", "n_divergent", "n_max_depth",
                                        "coverage_nuts", "coverage_em")}, flush=True)
    walls = np.array([f["wall_s"] for f in fits])
    r_hat = np.array([f["r_hat_max"] for f in fits])
    diag = {"section": "recovery_nuts", "route": "nuts", "stage": "diagnostics", "settings": str(settings),
            "n_fits": len(fits), "wall_first_s": float(walls[0]),
            "wall_median_s": float(np.median(walls[1:] if walls.size > 1 else walls)),
            "wall_max_s": float(walls.max()), "cpu_median_s": float(np.median([f["cpu_s"] for f in fits])),
            "r_hat_max": float(r_hat.max()), "frac_r_hat_above_1_01": float(np.mean(r_hat > 1.01)),
            "ess_bulk_min": float(min(f["ess_bulk_min"] for f in fits)),
            "n_divergent": int(sum(f["n_divergent"] for f in fits)),
            "n_fits_divergent": int(sum(f["n_divergent"] > 0 for f in fits)),
            "n_max_depth": int(sum(f["n_max_depth"] for f in fits)),
            "em_failed": int(sum(f["em_failed"] for f in fits)), "max_minutes": max_minutes}
    rows_n, sn = _recovery_rows("nuts", "pooled NUTS equal-tailed 90% (draws' 5% and 95% quantiles)", nuts,
                                n_sims=len(fits))
    rows_e, se_ = _recovery_rows("em", "EM Jeffreys 90% (fit.annotators)", em, n_sims=len(fits),
                                 extra={"n_failed": len(fits) - len(em)})
    rows = rows_n + rows_e + [diag] + fits
    n, k = sn["n"], len(fits)
    goals = [_goal("recovery_nuts", f"annotators with >= {ACTIVE_LABELS} labels: 90% interval coverage within 2.58 se "
                                    f"of 0.90 ({sn['n_active']} intervals) (pooled NUTS)",
                   abs(sn["active"] - 0.9), 2.58 * sn["se_active"], "<="),
             _goal("recovery_nuts", f"90% intervals of fpr and tpr: coverage >= 0.90 - 2.58 se ({n} intervals, "
                                    f"{k} crowds, clustered se) (pooled NUTS)", sn["coverage"], 0.9 - 2.58 * sn["se"],
                   ">="),
             _goal("recovery_nuts", f"90% intervals of fpr and tpr: coverage <= 0.90 + 2.58 se ({n} intervals, "
                                    f"{k} crowds, clustered se) (pooled NUTS)", sn["coverage"], 0.9 + 2.58 * sn["se"],
                   "<="),
             _goal("recovery_nuts", f"pooled NUTS fits with max R-hat > 1.01 ({k} fits): fraction",
                   diag["frac_r_hat_above_1_01"], 0.0, "<=")]
    return rows, goals


def combine(paths, out=None):
    """One results file from several runs (e.g. a run of the sections left after an interrupted one): rows
    concatenated in order, a section measured by a later run replacing the earlier runs' rows of it (e.g. the
    results file and a new ``--only crowds`` run); ``settings["runs"]`` keeps each run's sections, machine (load)
    and settings."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    first = runs[0]
    def sections(r):  # the sections a run measured (an interrupted run lists more in its settings)
        return list(dict.fromkeys(row["section"] for row in r["rows"]))

    # A section measured again by a later run replaces the earlier rows (and the earlier run's listing of it).
    for i, r in enumerate(runs):
        later = {x for q in runs[i + 1:] for x in sections(q)}
        r["rows"] = [row for row in r["rows"] if row["section"] not in later]
        for part in r["settings"].get("runs") or []:
            part["only"] = [x for x in part.get("only") or [] if x not in later]
        if r["settings"].get("runs"):
            r["settings"]["runs"] = [part for part in r["settings"]["runs"] if part["only"]]

    def parts(r):  # a combined file keeps the runs it was made of
        return (r["settings"].get("runs")
                or [{"only": sections(r), "machine": r["machine"], "settings": r["settings"]}])

    settings = dict(first["settings"], only=[x for r in runs for x in sections(r)],
                    spark_crowd=SPARK_CROWD, runs=[p for r in runs for p in parts(r)])
    machine_info = dict(first["machine"], load_avg_end=runs[-1]["machine"].get("load_avg_end"),
                        finished_utc=runs[-1]["machine"].get("finished_utc"))
    rows = [row for r in runs for row in r["rows"] if row.get("stage") != "goal"]
    rows += [row for r in runs for row in r["rows"] if row.get("stage") == "goal"]
    path = Path(out) if out else Path(__file__).resolve().parent / "results" / "bench_crowds.json"
    path.write_text(json.dumps({"benchmark": "bench_crowds", "machine": machine_info, "settings": settings,
                                "rows": rows}, indent=1, default=str) + "\n")
    print(f"wrote {path}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (development)")
    ap.add_argument("--only", nargs="+", default=["gold", "crowds", "rte", "scale", "nuts_scale", "recovery"])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--n-sims", type=int, default=20)
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="recovery_nuts: start no new crowd after this many minutes (the crowds done are the sample)")
    ap.add_argument("--no-converged", action="store_true",
                    help="crowds: leave out crowd-kit's converged reference (1000 iterations; ~3 of the section's "
                         "minutes) and the accuracy goals that need it, when only timing")
    ap.add_argument("--out", default=None)
    ap.add_argument("--combine", nargs="+", metavar="JSON",
                    help="write the rows of these result files (runs of different sections) as one results file, "
                         "keeping each run's machine and settings")
    ap.add_argument("--child-scale", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_scale:
        return child_scale(*args.child_scale)
    if args.combine:
        return combine(args.combine, args.out)
    from noisycal_bayes.inference import configure_jax

    configure_jax()
    info = machine()
    settings = dict(NUTS, n_warmup=100, n_draws=200) if args.quick else dict(NUTS)
    rows, goals = [], []
    for name in args.only:
        t = time.perf_counter()
        if name == "gold":
            r, g = section_gold(2 if args.quick else args.reps)
        elif name == "crowds":
            r, g = section_crowds(2 if args.quick else args.reps, converged=not args.no_converged)
        elif name == "rte":
            r, g = section_rte(settings)
        elif name == "scale":
            r, g = section_scale(args.quick)
        elif name == "nuts_scale":
            r, g = section_nuts_scale(args.quick, settings)
        elif name == "recovery_nuts":
            r, g = section_recovery_nuts(2 if args.quick else args.n_sims, settings, args.max_minutes)
        else:
            r, g = section_recovery(2 if args.quick else args.n_sims)
        print(f"-- {name}: {time.perf_counter() - t:.0f} s", flush=True)
        rows += r
        goals += g
        # Written after every section, so that a long run keeps what it has measured.
        write_json("bench_crowds", info, {"quick": args.quick, "only": args.only, "reps": args.reps,
                                          "no_converged": args.no_converged,
                                          "n_sims": args.n_sims, "max_minutes": args.max_minutes, "nuts": settings, "spark_crowd": SPARK_CROWD},
                   rows + goals, args.out)
    print_table(goals, ["section", "goal", "measured", "target", "pass"])


if __name__ == "__main__":
    main()
