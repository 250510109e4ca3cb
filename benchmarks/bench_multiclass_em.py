"""K-class EM speed and accuracy: ``fit_em_multiclass`` vs crowd-kit's converged ``DawidSkene``, and CIFAR-10N.

Usage::

    PYTHONPATH=$PWD:/tmp/ckx python benchmarks/bench_multiclass_em.py [--sizes 1e5] [--large 1e6] [--classes 10]
        [--annotators 3] [--seeds 5] [--reps 3] [--tol 1e-6] [--cifar PATH] [--out FILE] [--quick]

Data: ``noisycal_bayes.simulate.simulate_multiclass(n, J, K, accuracy=0.8, curve="overconfident", seed=n + J + r)``
(random diagonal-dominant confusions with diagonal 0.8, every annotator labels every item), ``r = 0..seeds-1`` at
the sizes compared with crowd-kit (a new truth and new data per seed), ``r = 0`` at the large sizes.

Configurations, side by side in one process:

- ``em_marginal`` (``model="dawid_skene"``) and ``em_grouped`` (``model="grouped"``, the default groups: predicted
  class x 2 confidence quantiles, G = 2 K): ``fit_em_multiclass(sim, n_starts=4, tol=TOL)`` (the majority-vote start
  plus 4 random starts, all run at once). The wall time covers the whole call (groups, compression to
  (group x pattern) counts, the EM, orientation, selection, the log-likelihood). The first call of each shape
  compiles (``first_call_s``, reported apart); ``median_s`` is the median of ``--reps`` later calls.
- ``crowdkit_ds``: ``crowdkit.aggregation.DawidSkene`` (one start from majority vote) on the long frame
  ``(task, worker, label)`` (building it is not timed), run to the SAME convergence rule as ours: crowd-kit's own
  E-step, M-step and ELBO in the loop of ``DawidSkene.fit`` with only the stopping test replaced by
  ``max |theta_t - theta_{t-1}| <= tol`` over its confusion matrices and priors (``bench_em.py``'s
  ``DawidSkeneParamTol``; ``n_iter = 1000``). Ours stops when the parameters change by at most ``tol`` and the
  log-likelihood by at most ``tol (1 + |l|)``.

Errors: ``max_abs_err`` = max over annotators and cells of ``|C_hat[j, y, a] - C[j, y, a]|`` against the simulated
confusions (crowd-kit: ``C[j, y, a] = errors_.loc[(j, a), y]``); ``mean_abs_err`` the mean and ``rms_err`` the root
mean square over the J K^2 cells (seed 0). The largest of J K^2 = 300 entry errors is a noisy statistic (it follows
whichever entry of which seed happens to be worst), so the errors are compared over ``--seeds`` seeds:
``max_abs_err_mean`` / ``rms_err_mean`` are the means over seeds with their standard errors (``*_se`` = sd over seeds
/ sqrt(seeds)), and ``*_minus_crowdkit_mean`` / ``*_se`` the mean and standard error of the paired per-seed
difference ours - crowd-kit (same data; the paired difference is the sharp comparison). The accuracy goal counts as
met when neither paired difference is above 2 of its standard errors (ours not detectably worse); the table shows
whether ours is lower. ``tol_check_max_diff`` (seed 0): the largest change of the confusion entries when our fit is
run again to ``tol = 1e-10``, i.e. how far the reported fit is from the converged EM fixed point.

``oracle_clean_labels``: the complete-data estimate from the simulated clean labels (counts of each annotator's
labels per clean class), on the same seeds: the sampling-noise floor of the errors (no fit, no timing).

Timing: our medians are of ``--reps`` calls on seed 0; crowd-kit's median is over its one run per seed.

CIFAR-10N (``--cifar``, default the shared data folder's ``cifar10n_10class.csv``): the three labels ``ann1..ann3`` as three
annotators and ``p0..p9`` as the classifier's probabilities, fitted once per model (compilation included and
excluded); ``y_ref`` only for evaluation: accuracy of ``argmax clean_label_probability`` and of majority vote (ties to
the lowest class index) against ``y_ref``, and the fitted diagonals.

Goals (issue 18): >= 20x crowd-kit at K = 10, 1e5 items x 3 annotators with equal or lower error; 1e6 items <= 2 s.
Results: ``benchmarks/results/bench_multiclass_em.json``.
"""
from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import machine, median, print_table, sizes_arg, timed, write_json  # noqa: E402

from noisycal_bayes.experiments.real_data import shared_data_path  # noqa: E402

N_STARTS = 4
MAX_ITER = 1000
ACCURACY = 0.8


def simulate(n, j, k, r=0):
    from noisycal_bayes.simulate import simulate_multiclass

    return simulate_multiclass(n, j, k, accuracy=ACCURACY, curve="overconfident", seed=n + j + r)


def errors(c_hat, c):
    """``(max, mean, RMS)`` of the absolute errors of the confusion entries."""
    d = np.abs(np.asarray(c_hat) - c)
    return float(d.max()), float(d.mean()), float(np.sqrt(np.mean(d**2)))


def mean_se(values):
    """Mean over seeds and its standard error (sd / sqrt(seeds); NaN for one seed)."""
    v = np.asarray(values, dtype=np.float64)
    se = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
    return float(v.mean()), se


def run_ours(model, sim, *, tol, reps):
    from noisycal_bayes.inference import fit_em_multiclass

    kw = dict(model=model, n_starts=N_STARTS, tol=tol, max_iter=MAX_ITER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, first = timed(fit_em_multiclass, sim, **kw)
        times = []
        for _ in range(reps):
            gc.collect()
            fit, t = timed(fit_em_multiclass, sim, **kw)
            times.append(t)
        tight = fit_em_multiclass(sim, **dict(kw, tol=1e-10, max_iter=20 * MAX_ITER))
    mx, mn, rms = errors(fit.confusion, sim.confusion)
    return {"median_s": median(times), "times_s": times, "reps": reps, "first_call_s": first, "n_iter": fit.n_iter,
            "converged": fit.converged, "max_abs_err": mx, "mean_abs_err": mn, "rms_err": rms,
            "tol_check_max_diff": float(np.abs(tight.confusion - fit.confusion).max()), "loglik": fit.log_likelihood,
            "path": fit.path, "n_groups": fit.n_groups, "n_starts": N_STARTS + 1, "tol": tol,
            "criterion": "max|d theta| <= tol and |d loglik| <= tol (1 + |loglik|)"}


def ours_errors(model, sim, *, tol):
    """``(max, mean, RMS)`` error of one untimed fit (the seeds after the first)."""
    from noisycal_bayes.inference import fit_em_multiclass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_em_multiclass(sim, model=model, n_starts=N_STARTS, tol=tol, max_iter=MAX_ITER)
    return errors(fit.confusion, sim.confusion)


def long_frame(sim):
    import pandas as pd

    return pd.DataFrame({"task": sim.item.astype(np.int64), "worker": sim.annotator.astype(np.int64),
                         "label": sim.label.astype(np.int64)})


def crowdkit_confusion(ds, j, k):
    e = ds.errors_
    return np.array([[[e.loc[(w, a), y] if (w, a) in e.index and y in e.columns else 0.0 for a in range(k)]
                      for y in range(k)] for w in range(j)])


def run_crowdkit(df, sim, *, tol, reps):
    from bench_em import _crowdkit_class

    _, DawidSkeneParamTol = _crowdkit_class()
    times, ds = [], None
    for _ in range(reps):
        gc.collect()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds, t = timed(DawidSkeneParamTol(n_iter=MAX_ITER, tol=tol).fit, df)
        times.append(t)
    j, k = sim.confusion.shape[0], sim.confusion.shape[1]
    mx, mn, rms = errors(crowdkit_confusion(ds, j, k), sim.confusion)
    return {"median_s": median(times), "times_s": times, "reps": reps, "n_iter": len(ds.loss_history_),
            "converged": bool(ds.converged_), "max_abs_err": mx, "mean_abs_err": mn, "rms_err": rms, "tol": tol,
            "n_starts": 1, "criterion": "max|d theta| <= tol (confusion matrices + priors)"}


def oracle_errors(sim):
    """Errors of the complete-data estimate ``C_hat[j, y, a] = #(j labels a on items of clean class y) / #(j, y)``
    from the simulated clean labels: the sampling-noise floor no estimator from the labels alone can beat."""
    J, K = sim.confusion.shape[0], sim.confusion.shape[1]
    cnt = np.zeros((J, K, K))
    np.add.at(cnt, (sim.annotator, sim.y[sim.item], sim.label), 1.0)
    return errors(cnt / np.maximum(cnt.sum(axis=-1, keepdims=True), 1.0), sim.confusion)


def seed_summary(rows_by_seed: dict, ck_by_seed: list | None = None) -> dict:
    """Means over seeds of the max and RMS errors with standard errors; paired differences against crowd-kit."""
    out = {"seeds": len(rows_by_seed["max"])}
    for name in ("max", "rms"):
        key = "max_abs_err" if name == "max" else "rms_err"
        vals = np.asarray(rows_by_seed[name])
        out[f"{key}_by_seed"] = vals.tolist()
        out[f"{key}_mean"], out[f"{key}_se"] = mean_se(vals)
        if ck_by_seed is not None:
            diff = vals - np.asarray(ck_by_seed[name])
            out[f"{key}_minus_crowdkit_mean"], out[f"{key}_minus_crowdkit_se"] = mean_se(diff)
            # Counted apart from equal: fits within 1e-6 of each other (the tolerance's reach) are the same fit.
            out[f"{key}_vs_crowdkit_lower_equal_higher"] = [int(np.sum(diff < -1e-6)), int(np.sum(np.abs(diff) <= 1e-6)),
                                                          int(np.sum(diff > 1e-6))]
    return out


def run_cifar(path):
    import pandas as pd

    from noisycal_bayes.inference import fit_em_multiclass

    d = pd.read_csv(path)
    labels = d[["ann1", "ann2", "ann3"]].to_numpy()
    probs = d[[f"p{k}" for k in range(10)]].to_numpy(dtype=np.float64)
    probs = probs / probs.sum(axis=1, keepdims=True)  # stored with 5 decimals: rows sum to 1 within 3e-5
    n, J = labels.shape
    item = np.repeat(np.arange(n), J)
    data = SimpleNamespace(responses=(item, np.tile(np.arange(J), n), labels.ravel()), n_items=n, n_annotators=J,
                           n_classes=10, probs=probs, gold=None, classes=tuple(range(10)))
    y_ref = d["y_ref"].to_numpy()
    votes = np.zeros((n, 10))
    np.add.at(votes, (item, labels.ravel()), 1)
    mv = votes.argmax(axis=1)  # ties to the lowest class index
    rows = []
    for model in ("dawid_skene", "grouped"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit, first = timed(fit_em_multiclass, data, model=model, n_starts=N_STARTS)
            fit, t = timed(fit_em_multiclass, data, model=model, n_starts=N_STARTS)
        clean = fit.clean_label_probability(data).argmax(axis=1)
        rows.append({"stage": f"cifar10n_{model}", "n_items": n, "n_annotators": J, "n_classes": 10,
                     "median_s": t, "first_call_s": first, "reps": 1, "n_iter": fit.n_iter, "converged": fit.converged,
                     "path": fit.path, "n_groups": fit.n_groups, "loglik": fit.log_likelihood,
                     "diag_accuracy": np.round(np.diagonal(fit.confusion, axis1=1, axis2=2), 4).tolist(),
                     "mean_diag_accuracy": np.round(np.diagonal(fit.confusion, axis1=1, axis2=2).mean(1), 4).tolist(),
                     "clean_label_accuracy_em": float(np.mean(clean == y_ref)),
                     "clean_label_accuracy_majority_vote": float(np.mean(mv == y_ref)),
                     "annotator_accuracy_vs_ref": [float(np.mean(labels[:, j] == y_ref)) for j in range(J)],
                     "classifier_accuracy_vs_ref": float(np.mean(probs.argmax(1) == y_ref))})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", default=["1e5"], help="sizes compared with crowd-kit")
    ap.add_argument("--large", nargs="*", default=["1e6"], help="sizes run with ours only")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--annotators", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=5, help="simulations (truth and data) compared with crowd-kit")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--cifar", default=str(shared_data_path("cifar10n_10class.csv") or "cifar10n_10class.csv"))
    ap.add_argument("--no-cifar", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="tiny smoke run (1e4, large 1e5, no CIFAR) to a scratch file")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    if args.quick:
        args.sizes, args.large, args.reps, args.no_cifar, args.seeds = ["1e4"], ["1e5"], 1, True, 2
        args.out = args.out or "/tmp/bench_multiclass_em_quick.json"
    info = machine()
    print(f"python {info['python']}, jax {info['jax']}, crowd-kit {info['crowd_kit']}, {info['cores']} cores, "
          f"load {info['load_avg_start']}")
    J, K = args.annotators, args.classes
    rows = []
    cols = ["stage", "n_items", "n_groups", "median_s", "first_call_s", "n_iter", "converged", "max_abs_err",
            "rms_err", "tol_check_max_diff", "seeds", "max_abs_err_mean", "max_abs_err_se", "rms_err_mean",
            "rms_err_se", "max_abs_err_minus_crowdkit_mean", "max_abs_err_minus_crowdkit_se",
            "rms_err_minus_crowdkit_mean", "rms_err_minus_crowdkit_se", "ratio_crowdkit_over_ours", "reps"]
    models = ("dawid_skene", "grouped")
    for n in sizes_arg(args.sizes) + sizes_arg(args.large):
        sim = simulate(n, J, K)
        base = {"n_items": n, "n_annotators": J, "n_classes": K, "n_responses": int(sim.item.size)}
        block = [{"stage": f"em_{'marginal' if m == 'dawid_skene' else 'grouped'}", **base,
                  **run_ours(m, sim, tol=args.tol, reps=args.reps)} for m in models]
        if n in sizes_arg(args.sizes):
            ours = {m: {"max": [r["max_abs_err"]], "rms": [r["rms_err"]]} for m, r in zip(models, block)}
            ck_err, ck_times, ck, orc = {"max": [], "rms": []}, [], None, {"max": [], "rms": []}
            for seed in range(args.seeds):
                if seed:
                    sim = simulate(n, J, K, seed)
                    for m in models:
                        mx, _, rms = ours_errors(m, sim, tol=args.tol)
                        ours[m]["max"].append(mx)
                        ours[m]["rms"].append(rms)
                mx, _, rms = oracle_errors(sim)
                orc["max"].append(mx)
                orc["rms"].append(rms)
                print(f"   crowd-kit at n={n:.0e}, seed {seed} ...", flush=True)
                got = run_crowdkit(long_frame(sim), sim, tol=args.tol, reps=1)
                ck = ck or got  # seed 0's run gives the row's single-seed fields
                ck_err["max"].append(got["max_abs_err"])
                ck_err["rms"].append(got["rms_err"])
                ck_times += got["times_s"]
            ck = {"stage": "crowdkit_ds", **base, "n_groups": 1,
                  **dict(ck, median_s=median(ck_times), times_s=ck_times, reps=len(ck_times)), **seed_summary(ck_err)}
            for m, r in zip(models, block):
                r.update(seed_summary(ours[m], ck_err))
                r["ratio_crowdkit_over_ours"] = ck["median_s"] / r["median_s"]
                r["crowdkit_max_abs_err"] = ck["max_abs_err"]
                r["crowdkit_mean_abs_err"] = ck["mean_abs_err"]
                r["crowdkit_max_abs_err_mean"] = ck["max_abs_err_mean"]
                r["crowdkit_rms_err_mean"] = ck["rms_err_mean"]
            block.append(ck)
            block.append({"stage": "oracle_clean_labels", **base, "max_abs_err": orc["max"][0],
                          "rms_err": orc["rms"][0], **seed_summary(orc, ck_err)})
        rows += block
        print_table(block, cols)
        del sim
        gc.collect()
    if not args.no_cifar and Path(args.cifar).exists():
        crow = run_cifar(args.cifar)
        rows += crow
        print_table(crow, ["stage", "median_s", "first_call_s", "n_iter", "clean_label_accuracy_em",
                           "clean_label_accuracy_majority_vote", "mean_diag_accuracy"])
    goals = _goals(rows)
    print("\nGoals:")
    for g in goals:
        print(f"  {g['goal']}: {g['value']} -> {'met' if g['met'] else 'NOT met'}")
    total_s = time.perf_counter() - t_start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\ntotal {total_s:.0f} s, peak resident memory {peak_mb:.0f} MB")
    settings = {"n_starts": N_STARTS + 1, "max_iter": MAX_ITER, "tol": args.tol, "reps": args.reps,
                "seeds": args.seeds, "accuracy": ACCURACY, "total_s": total_s, "peak_rss_mb": peak_mb,
                "simulation": "simulate_multiclass(n, J, K, accuracy=0.8, curve='overconfident', seed=n + J + r), "
                              f"r = 0..{args.seeds - 1} at the crowd-kit sizes, r = 0 at the large sizes",
                "goals": goals, "notes": _notes(rows)}
    write_json("bench_multiclass_em", info, settings, rows, args.out)


def _not_worse(r, key):
    """The paired difference ours - crowd-kit is not above 2 standard errors (1e-9: identical fits have se 0)."""
    return r[f"{key}_minus_crowdkit_mean"] <= 2 * np.nan_to_num(r[f"{key}_minus_crowdkit_se"]) + 1e-9


def _goals(rows):
    out = []
    for r in rows:
        if r["stage"].startswith("em_") and "ratio_crowdkit_over_ours" in r and r["n_items"] == 100_000:
            s = r["seeds"]
            out.append({"goal": f">= 20x crowd-kit at 1e5, K={r['n_classes']}, {r['stage']}, error vs truth over {s} "
                                "seeds not above crowd-kit's (paired difference of the max and of the RMS entry error "
                                "<= 2 se)",
                        "value": f"{r['ratio_crowdkit_over_ours']:.0f}x; max err {r['max_abs_err_mean']:.4f} ± "
                                 f"{r['max_abs_err_se']:.4f} vs {r['crowdkit_max_abs_err_mean']:.4f} (diff "
                                 f"{r['max_abs_err_minus_crowdkit_mean']:+.4f} ± {r['max_abs_err_minus_crowdkit_se']:.4f}); "
                                 f"RMS {r['rms_err_mean']:.5f} ± {r['rms_err_se']:.5f} vs "
                                 f"{r['crowdkit_rms_err_mean']:.5f} (diff {r['rms_err_minus_crowdkit_mean']:+.5f} ± "
                                 f"{r['rms_err_minus_crowdkit_se']:.5f})",
                        "met": bool(r["ratio_crowdkit_over_ours"] >= 20 and _not_worse(r, "max_abs_err")
                                    and _not_worse(r, "rms_err"))})
        if r["stage"].startswith("em_") and r["n_items"] == 1_000_000:
            out.append({"goal": f"<= 2 s at 1e6, K={r['n_classes']}, {r['stage']} (after compilation)",
                        "value": f"{r['median_s']:.2f} s", "met": bool(r["median_s"] <= 2.0)})
    return out


def _leh(r, key):
    lo, eq, hi = r[f"{key}_vs_crowdkit_lower_equal_higher"]
    return f"lower on {lo}, equal within 1e-6 on {eq}, higher on {hi} of {r['seeds']} seeds"


def _notes(rows):
    """One line per compared configuration: the errors over seeds, side by side (also in the goals table)."""
    out = []
    ck = {r["n_items"]: r for r in rows if r["stage"] == "crowdkit_ds"}
    for r in rows:
        if "max_abs_err_minus_crowdkit_mean" in r:
            c = ck[r["n_items"]]
            line = (f"{r['stage']} at {r['n_items']:.0e} over {r['seeds']} seeds: max entry error "
                    f"{r['max_abs_err_mean']:.4f} ± {r['max_abs_err_se']:.4f} (crowd-kit {c['max_abs_err_mean']:.4f}; "
                    f"{_leh(r, 'max_abs_err')}), RMS entry error {r['rms_err_mean']:.5f} ± {r['rms_err_se']:.5f} "
                    f"(crowd-kit {c['rms_err_mean']:.5f}; {_leh(r, 'rms_err')})")
            if "tol_check_max_diff" in r:
                line += f"; a refit to tol 1e-10 moves the seed-0 fit by {r['tol_check_max_diff']:.1e}"
            out.append(line + ".")
    return out


if __name__ == "__main__":
    main()
