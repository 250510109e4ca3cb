"""NUTS for the K-class grouped Dawid-Skene model on CIFAR-10N (issue 18, goal: K = 10, 50,000 items x 3
annotators in <= 60 s wall including compilation on 2 cores, R-hat <= 1.01).

Usage::

    python benchmarks/bench_multiclass_nuts.py [--n-warmup 300] [--n-samples 1500] [--chains 2]
                                               [--paths auto] [--compare simplex] [--out FILE]

Data: ``../shared/data/cifar10n_10class.csv`` (CIFAR-10N, Wei et al. ICLR 2022): labels ``ann1..ann3`` (10 classes),
classifier probabilities ``p0..p9``. Score groups: predicted class x 2 top-probability quantiles within that class
(the median split; G = 20). ``y_ref`` is never used for fitting; it only scores the clean-label posterior
(accuracy of its argmax, beside majority vote).

Fit: ``fit_nuts_multiclass(data, model="grouped", groups, n_chains, n_warmup, n_samples)`` (default
``parametrisation="log_ratio"``) after ``configure_jax()`` (one device per core: the chains run in parallel), without
a persistent compilation cache. Each path is fitted twice in one process: ``first`` (traces and compiles; the MAP-EM
start included) and ``warm`` (the compiled sampler reused, another seed). Reported: wall and CPU time (the process's
user + system time: on a machine shared with other jobs the wall time is inflated, the CPU time much less) and their
split into pieces, timed by wrapping the fit's internal steps (no change to what runs): ``prep_s`` (validation,
compression, start scaling, draws to the simplex), ``start_s`` (MAP-EM), ``compile_init_s`` (tracing and compiling
the sampler and the chains' initial states), ``warmup_s``, ``sampling_s``, ``diagnostics_s`` (R-hat, ESS,
orientation), ``to_arviz_s`` (separate call); ``ms_per_leapfrog`` (sampling wall time over the longest chain's
leapfrog steps) and ``cpu_ms_per_step`` (sampling CPU time over all chains' steps). Also max R-hat and min bulk /
tail ESS over every confusion entry and prevalence, divergences, tree depth, the compressed (group, pattern) rows,
and the fraction of draws whose average confusion is not diagonally dominant.

``--compare simplex`` also fits the same model in NumPyro's stick-breaking coordinates (the earlier sampler) with the
same settings and checks that both sample one posterior: for every confusion entry and prevalence,
``z = (mean_a - mean_b) / sqrt(var_a / ess_a + var_b / ess_b)`` (bulk ESS per scalar); the largest ``|z|`` is
reported beside the Bonferroni bound ``ndtri(1 - 0.001 / (2 m))`` over the ``m`` scalars (family-wise false-alarm
rate 1e-3). Results: ``benchmarks/results/bench_multiclass_nuts.json`` (format of ``_benchutil``).
"""
from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent.parent / "shared" / "data" / "cifar10n_10class.csv"


class Crowd(NamedTuple):
    """The attributes fit_nuts_multiclass reads (a MulticlassAnnotationSet stand-in)."""

    responses: tuple
    n_items: int
    n_annotators: int
    n_classes: int
    probs: object
    gold: object
    classes: tuple


def load(path=DATA):
    """``(data, groups, y_ref)`` from the CIFAR-10N file (module docstring)."""
    import numpy as np
    import pandas as pd

    df = pd.read_csv(path)
    labels = df[["ann1", "ann2", "ann3"]].to_numpy().astype(np.int32)
    probs = df[[f"p{k}" for k in range(10)]].to_numpy()
    n, j = labels.shape
    item, ann = np.repeat(np.arange(n, dtype=np.int32), j), np.tile(np.arange(j, dtype=np.int32), n)
    data = Crowd((item, ann, labels.ravel()), n, j, 10, probs, None, tuple(range(10)))
    yhat, top = probs.argmax(axis=1), probs.max(axis=1)
    upper = np.zeros(n, np.int32)
    for k in range(10):
        members = yhat == k
        if members.any():
            upper[members] = top[members] > np.median(top[members])
    return data, (yhat * 2 + upper).astype(np.int32), df["y_ref"].to_numpy(), labels


class Timer:
    """Wall and CPU seconds of the fit's internal steps, by wrapping them for the duration of one fit."""

    def __init__(self):
        self.pieces = {}
        self.steps = None

    @staticmethod
    def clock():
        import resource

        r = resource.getrusage(resource.RUSAGE_SELF)
        return time.perf_counter(), r.ru_utime + r.ru_stime

    def add(self, name, t0):
        w, c = self.clock()
        pw, pc = self.pieces.get(name, (0.0, 0.0))
        self.pieces[name] = (pw + w - t0[0], pc + c - t0[1])

    def __enter__(self):
        import jax
        import numpy as np

        import noisycal_bayes.inference._sampler as sampler
        import noisycal_bayes.inference.nuts as mc

        self._saved = [(mc, "_map_fit", mc._map_fit), (mc, "mcmc_diagnostics", mc.mcmc_diagnostics),
                       (sampler.NutsProgram, "_start", sampler.NutsProgram._start),
                       (sampler.NutsProgram, "_loop", sampler.NutsProgram._loop)]
        timer = self

        def wrap(name, fn):
            def inner(*a, **k):
                t0 = timer.clock()
                try:
                    return fn(*a, **k)
                finally:
                    timer.add(name, t0)
            return inner

        def loop(prog, states, args, n_chunks, bar, desc, stride, axis=0):
            kept, steps = [], []
            for c in range(n_chunks):
                t0 = timer.clock()
                states, got = prog._advance(states, args)
                got = jax.tree.map(np.asarray, got)  # waits for the chunk (asynchronous dispatch)
                warm = (c + 1) * prog.chunk <= prog.n_warmup
                timer.add("warmup" if warm else "sampling", t0)
                if not warm:
                    kept.append(got)
                    steps.append(got.num_steps)
            timer.steps = np.concatenate(steps, axis=axis).reshape(-1, prog.chunk * len(steps)) if axis else \
                np.concatenate(steps)[None]
            return jax.tree.map(lambda *xs: np.concatenate(xs, axis=axis), *kept)

        mc._map_fit = wrap("start", mc._map_fit)
        mc.mcmc_diagnostics = wrap("diagnostics", mc.mcmc_diagnostics)
        sampler.NutsProgram._start = wrap("compile_init", sampler.NutsProgram._start)
        sampler.NutsProgram._loop = loop
        return self

    def __exit__(self, *exc):
        for owner, name, fn in self._saved:
            setattr(owner, name, fn)


def one_fit(data, groups, *, path, seed, args, parametrisation="log_ratio"):
    import numpy as np

    from noisycal_bayes.inference import fit_nuts_multiclass

    with warnings.catch_warnings(record=True) as caught, Timer() as timer:
        warnings.simplefilter("always")
        t0 = timer.clock()
        fit = fit_nuts_multiclass(data, model="grouped", groups=groups, n_chains=args.chains, n_warmup=args.n_warmup,
                                  n_samples=args.n_samples, seed=seed, path=path, parametrisation=parametrisation)
        timer.add("total", t0)
    t0 = timer.clock()
    fit.to_arviz()
    timer.add("to_arviz", t0)
    p = timer.pieces
    wall, cpu = p["total"]
    d = fit.diagnostics
    n_steps = timer.steps.sum(axis=1)
    # Where the fit's own Python time went: everything not inside the timed steps.
    prep = wall - sum(p.get(k, (0, 0))[0] for k in ("start", "compile_init", "warmup", "sampling", "diagnostics"))
    row = {"parametrisation": fit.settings["parametrisation"], "path": fit.settings["path"],
           "chain_method": fit.settings["chain_method"], "median_s": round(wall, 2), "wall_s": round(wall, 2),
           "cpu_s": round(cpu, 2), "prep_s": round(prep, 2),
           **{f"{k}_s": round(p.get(k, (0.0, 0.0))[0], 2) for k in ("start", "compile_init", "warmup", "sampling",
                                                                    "diagnostics", "to_arviz")},
           **{f"{k}_cpu_s": round(p.get(k, (0.0, 0.0))[1], 2) for k in ("compile_init", "warmup", "sampling")},
           "ms_per_leapfrog": round(1000 * p["sampling"][0] / n_steps.max(), 3),
           "cpu_ms_per_step": round(1000 * p["sampling"][1] / n_steps.sum(), 3),
           "r_hat_max": d["max_rhat"], "ess_bulk_min": d["min_ess_bulk"],
           "ess_tail_min": d["min_ess_tail"], "n_divergent": d["n_divergent"],
           "frac_max_treedepth": d["frac_max_treedepth"], "tree_depth_mean": d["mean_tree_depth"],
           "step_size_mean": float(np.mean(fit.sample_stats["step_size"])),
           "frac_not_dominant": d["frac_not_dominant"], "n_rows": fit.settings["n_rows"],
           "warnings": [str(w.message)[:160] for w in caught]}
    return fit, row


def compare(a, b) -> dict:
    """Largest |z| of the posterior-mean differences of two fits of one model (module docstring)."""
    import numpy as np
    from scipy.special import ndtri

    z = []
    for name in ("confusion", "prevalence"):
        x, y = getattr(a, name), getattr(b, name)
        ess = []
        for f in (a, b):
            tab = f.diagnostics_table[f.diagnostics_table["name"] == name]
            e = np.full(x.shape[1:], np.nan)
            for idx, value in zip(tab["index"], tab["ess_bulk"]):
                e[tuple(idx)] = value
            ess.append(e)
        se = np.sqrt(x.var(0) / ess[0] + y.var(0) / ess[1])
        z.append(((x.mean(0) - y.mean(0)) / se).ravel())
    z = np.concatenate(z)
    return {"compare_max_abs_z": float(np.abs(z).max()), "compare_bound_z": float(ndtri(1 - 0.001 / (2 * z.size))),
            "compare_n_scalars": int(z.size), "compare_max_abs_diff": float(max(
                np.abs(a.confusion.mean(0) - b.confusion.mean(0)).max(),
                np.abs(a.prevalence.mean(0) - b.prevalence.mean(0)).max()))}


def main(argv=None):
    import numpy as np

    from _benchutil import machine, print_table, write_json
    from noisycal_bayes.inference import configure_jax

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-warmup", type=int, default=300)
    p.add_argument("--n-samples", type=int, default=1500)
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--paths", nargs="+", default=["auto"], choices=["auto", "patterns", "sparse"])
    p.add_argument("--compare", default=None, choices=["simplex"],
                   help="also fit in the earlier stick-breaking coordinates and compare posterior means")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    configure_jax()
    info = machine()
    t = time.perf_counter()
    data, groups, y_ref, labels = load()
    load_s = time.perf_counter() - t
    rows = []
    for path in args.paths:
        for rep, stage in enumerate(("first (compiles)", "warm (compiled sampler reused)")):
            fit, row = one_fit(data, groups, path=path, seed=rep, args=args)
            row.update(stage=stage, n_items=data.n_items, n_annotators=data.n_annotators, n_classes=data.n_classes,
                       n_groups=int(groups.max()) + 1)
            rows.append(row)
            print({k: v for k, v in row.items() if k != "warnings"}, flush=True)
        post = fit.clean_label_probability(data, max_draws=100)
        votes = np.stack([(labels == k).sum(1) for k in range(10)], axis=1)
        majority = votes.argmax(axis=1)  # ties to the lowest class index
        rows[-1].update(accuracy_posterior_vs_ref=float(np.mean(post.argmax(1) == y_ref)),
                        accuracy_majority_vs_ref=float(np.mean(majority == y_ref)),
                        mean_diagonal=float(np.mean(np.diagonal(fit.confusion.mean(0), axis1=1, axis2=2))))
        if args.compare:
            other, row = one_fit(data, groups, path=path, seed=1, args=args, parametrisation=args.compare)
            row.update(stage=f"{args.compare} coordinates (first; compiles)", n_items=data.n_items,
                       n_annotators=data.n_annotators, n_classes=data.n_classes, n_groups=int(groups.max()) + 1,
                       **compare(fit, other))
            rows.append(row)
            print({k: v for k, v in row.items() if k != "warnings"}, flush=True)
    first = rows[0]
    goals = [{"goal": "first fit (compilation included) <= 60 s wall on 2 cores", "value": first["wall_s"],
              "met": bool(first["wall_s"] <= 60)},
             {"goal": "max R-hat <= 1.01 (first fit)", "value": first["r_hat_max"], "met": bool(first["r_hat_max"] <= 1.01)}]
    print_table(rows, ["stage", "parametrisation", "wall_s", "cpu_s", "compile_init_s", "warmup_s", "sampling_s",
                       "r_hat_max", "ess_bulk_min", "tree_depth_mean", "compare_max_abs_z"])
    settings = dict(vars(args), data=str(DATA.name), load_s=round(load_s, 2), model="grouped",
                    groups="predicted class x 2 top-probability quantiles (median split)",
                    goal="wall <= 60 s including compilation on 2 cores; R-hat <= 1.01", goals=goals)
    write_json("bench_multiclass_nuts", info, settings, rows, args.out)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(HERE))
    main()
