"""Coverage of 90% intervals of each annotator's confusion entries (K classes) on crowds with spammers and adversaries.

Goal (issue 34): the intervals of each annotator's K x K confusion entries cover at the nominal rate, by annotator
kind, as binary's do (docs/crowds.md, *recovery*). The population of the partially pooled EM
(:func:`~noisycal_bayes.inference.population.fit_em_population`) is compared under its options:

- ``soft``: the default (Dirichlet-multinomial type-II ML on the expected counts);
- ``sampled``: ``objective="sampled_labels"`` (the population fitted to clean-label draws from the posteriors);
- ``sampled_spread``: the same with per-annotator concentrations ``lambda_j`` (``spread=1.5``);
- ``mixture``: ``objective="sampled_labels"`` with a mixture population of three annotator types (``components=3``:
  typical / spammer / adversary, learned);
- ``mixture_soft``: the mixture on the expected counts (``components=3``, default objective).

Crowd (the design of docs/coverage.md, *Second goal*): K classes, ``--annotators`` annotators, ``--items`` items,
3 distinct annotators per item (about 12 labels per annotator at the defaults); 85% honest annotators with accuracy
U(0.5, 0.9), 10% spammers with accuracy 1/K, 5% adversaries with accuracy 0.05, the rest of every row a flat
Dirichlet split (:func:`~noisycal_bayes.simulate.random_confusion`).

Two sources of intervals per fit (equal-tailed 90%):

- ``conditional``: 400 draws of every row from its conditional posterior ``Dirichlet(n_jy + lambda_j alpha_y)`` at
  the fit (``n`` the expected counts, ``alpha`` the fitted population): one fit per crowd; with a mixture
  population, each draw first takes annotator ``j``'s type ``z ~ type_probability[j]`` (shared by its K rows), then
  the rows from ``Dirichlet(n_jy + mixture_alpha[z, y])``;
- ``joint`` (``--joint``): the same, but each draw first takes every item's clean label from its posterior ``T``
  and uses that draw's hard counts (with a mixture, the type from the responsibilities those counts give at the
  fitted components): the conditional draws hold ``n`` at the expected counts and so leave out the clean labels'
  uncertainty;
- ``gibbs`` (``--gibbs``): a Gibbs sampler of each annotator's clean labels, type and rows with every other
  annotator held at the fit (the item's posterior without the annotator's own label: :func:`gibbs_interval`);
- ``refits`` (the first ``--refit-crowds`` crowds): ``--n-refits`` item-bootstrap refits (item multiplicities as
  weights, warm-started at the fit, the population refitted with the same options: what
  ``multiclass_em_estimator(model="pooled", population_options=...)`` does on each replicate).

``--oracle-labels``: every item's true clean label is given to the fit as a gold label (``T`` one-hot at the
truth), so the intervals lose only what the population and the annotators' few labels lose, not what the clean
labels' uncertainty adds (a clean experiment on the mechanism; docs/crowds.md, *A mixture population*).

Coverage by kind with its clustered standard error (spread of the per-crowd coverages / sqrt(crowds)) and the
binomial standard error of that many entries. Usage::

    PYTHONPATH=$PWD python benchmarks/coverage_confusion_crowds.py --crowds 20 --refit-crowds 4 --out FILE

Results: ``benchmarks/results/coverage_confusion_crowds.json``; docs/crowds.md, *Outlying annotators* and *A mixture
population*.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import machine  # noqa: E402

CONFIGS = {"soft": {}, "sampled": {"objective": "sampled_labels", "n_draws": 8},
           "sampled_spread": {"objective": "sampled_labels", "n_draws": 8, "spread": 1.5},
           "mixture": {"objective": "sampled_labels", "n_draws": 8, "components": 3},
           "mixture_soft": {"components": 3}}
KINDS = ("honest", "spammer", "adversary")


def crowd(seed, k, n_annotators, n_items, per_item=3, spammers=0.10, adversaries=0.05, oracle=False):
    """The crowd (module docstring): ``(data, sim, true confusion (J, K, K), kind (J,))`` of the annotators present;
    ``oracle``: the true clean labels given as gold labels."""
    from noisycal_bayes import MulticlassAnnotationSet
    from noisycal_bayes.simulate import random_confusion, simulate_multiclass

    rng = np.random.default_rng(seed)
    kind = np.array(["honest"] * n_annotators, dtype=object)
    ns, na = int(round(spammers * n_annotators)), int(round(adversaries * n_annotators))
    perm = rng.permutation(n_annotators)
    kind[perm[:ns]], kind[perm[ns:ns + na]] = "spammer", "adversary"
    acc = rng.uniform(0.5, 0.9, size=n_annotators)
    acc[kind == "spammer"], acc[kind == "adversary"] = 1.0 / k, 0.05
    conf = random_confusion(n_annotators, k, accuracy=acc, seed=rng)
    sim = simulate_multiclass(n_items, n_annotators, k, confusion=conf, labels_per_item=per_item, seed=rng)
    present, ann = np.unique(sim.annotator, return_inverse=True)
    data = MulticlassAnnotationSet.from_responses(sim.item, ann, sim.label, n_items=n_items, n_annotators=present.size,
                                                  n_classes=k, probs=sim.probs, gold=sim.y if oracle else None)
    return data, sim, conf[present], kind[present].astype(str)


def conditional_interval(fit, data, rng, n_draws=400, labels=False):
    """Equal-tailed 90% intervals (lo, hi), each (J, K, K), from ``n_draws`` draws of every annotator's rows at the
    fit (module docstring); ``labels``: each draw first takes every item's clean label from its posterior and uses
    those hard counts (and, with a mixture, the type responsibilities they give) instead of the expected counts."""
    from noisycal_bayes.core import x64
    from noisycal_bayes.core.population import expected_counts
    from noisycal_bayes.inference.population import _type_log_joint
    from noisycal_bayes.models.inputs import class_arrays

    x = class_arrays(data, "coverage_confusion_crowds")
    T = fit.clean_label_probability(data)
    J, K = x.n_annotators, T.shape[1]
    if labels:   # clean labels Y ~ T per draw, the hard counts of each draw
        y = np.minimum((rng.random((n_draws, T.shape[0], 1)) > np.cumsum(T, axis=1)[None]).sum(axis=2), K - 1)
        n = np.zeros((n_draws, J, K, K))
        np.add.at(n, (np.arange(n_draws)[:, None], x.annotator[None], y[:, x.item], x.label[None]), 1.0)
    else:
        n = np.broadcast_to(expected_counts(x.item, x.annotator, x.label, T, J), (n_draws, J, K, K))
    if fit.mixture_alpha is not None:   # the type first (one per annotator and draw), then the rows given the type
        r = np.broadcast_to(fit.type_probability, (n_draws,) + fit.type_probability.shape)
        if labels:
            with x64():
                lj = np.asarray(_type_log_joint(n, fit.mixture_alpha, np.log(fit.mixture_weight)))
            r = np.exp(lj - lj.max(axis=2, keepdims=True))
            r = r / r.sum(axis=2, keepdims=True)
        u = rng.random((n_draws, J, 1))
        z = np.minimum((u > np.cumsum(r, axis=2)).sum(axis=2), fit.mixture_alpha.shape[0] - 1)
        post = n + fit.mixture_alpha[z]                                            # (draws, J, K, K)
    else:
        lam = np.ones(x.n_annotators) if fit.annotator_scale is None else fit.annotator_scale
        post = n + lam[:, None, None] * fit.prior[0][None]
    g = rng.gamma(post)
    return np.quantile(g / g.sum(axis=3, keepdims=True), [0.05, 0.95], axis=0)


def gibbs_interval(fit, data, rng, n_draws=400, burn=100):
    """Equal-tailed 90% intervals (lo, hi), each (J, K, K), from a Gibbs sampler of each annotator's rows with every
    other annotator held at the fit: response ``r`` of annotator ``j`` on item ``i`` has the cavity posterior
    ``T_i(y) / C_fit[j, y, a_r]`` (the item's posterior without ``j``'s own label); a sweep draws its clean label
    ``Y_r ∝ cavity(y) C[j, y, a_r]`` at the current rows, the type ``z_j`` from the Dirichlet-multinomial marginal of
    the hard counts (collapsed over the rows), then the rows from ``Dirichlet(n_jy + alpha_{z, y})`` (single
    population: ``lambda_j alpha_y``). Unlike the conditional draws, the annotator's own label no longer votes for
    the clean label it is compared with."""
    from noisycal_bayes.core import x64
    from noisycal_bayes.inference.population import _type_log_joint
    from noisycal_bayes.models.inputs import class_arrays

    x = class_arrays(data, "coverage_confusion_crowds")
    T = fit.clean_label_probability(data)
    J, K = x.n_annotators, T.shape[1]
    if fit.mixture_alpha is not None:
        alpha, logw = fit.mixture_alpha[None], np.log(fit.mixture_weight)                 # (1, M, K, K)
    else:
        lam = np.ones(J) if fit.annotator_scale is None else fit.annotator_scale
        alpha, logw = (lam[:, None, None] * fit.prior[0][None])[:, None], np.zeros(1)       # (J, 1, K, K)
    alpha = np.broadcast_to(alpha, (J,) + alpha.shape[1:])
    a, i, lab = x.annotator, x.item, x.label
    cav = np.log(np.clip(T[i], 1e-300, None)) - np.log(fit.confusion[a, :, lab])             # (R, K)
    C = np.array(fit.confusion)
    out = []
    for sweep in range(burn + n_draws):
        lp = cav + np.log(C[a, :, lab])
        p = np.exp(lp - lp.max(axis=1, keepdims=True))
        y = np.minimum((rng.random((p.shape[0], 1)) * p.sum(axis=1, keepdims=True) > np.cumsum(p, axis=1)).sum(1),
                       K - 1)
        n = np.zeros((J, K, K))
        np.add.at(n, (a, y, lab), 1.0)
        with x64():
            lj = np.asarray(_type_log_joint(n, alpha, logw))                                     # (J, M)
        r = np.exp(lj - lj.max(axis=1, keepdims=True))
        z = np.minimum((rng.random((J, 1)) * r.sum(axis=1, keepdims=True) > np.cumsum(r, axis=1)).sum(1),
                       alpha.shape[1] - 1)
        g = rng.gamma(n + alpha[np.arange(J), z])
        C = g / g.sum(axis=2, keepdims=True)
        if sweep >= burn:
            out.append(C)
    return np.quantile(np.asarray(out), [0.05, 0.95], axis=0)


def refit_interval(fit, data, opts, rng, n_refits):
    from noisycal_bayes.inference.population import fit_em_population

    n = data.n_items
    reps = []
    for _ in range(n_refits):
        w = np.bincount(rng.integers(0, n, n), minlength=n).astype(np.float64)
        reps.append(fit_em_population(data, weights=w, init=fit, **opts).confusion)
    return np.quantile(np.asarray(reps), [0.05, 0.95], axis=0)


def one(seed, args, refits):
    from noisycal_bayes.inference.population import fit_em_population

    data, sim, conf, kind = crowd(seed, args.k, args.annotators, args.items, oracle=args.oracle_labels)
    rows = []
    for name, opts in CONFIGS.items():
        if args.configs and name not in args.configs:
            continue
        t = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_em_population(data, **opts)
            acc = float(np.mean(fit.clean_label_probability(data).argmax(axis=1) == sim.y))
            cpu_fit = time.process_time() - t
            sources = {"conditional": conditional_interval(fit, data, np.random.default_rng(seed))}
            if args.joint:
                sources["joint"] = conditional_interval(fit, data, np.random.default_rng(seed), labels=True)
            if args.gibbs:
                sources["gibbs"] = gibbs_interval(fit, data, np.random.default_rng(seed))
            if refits:
                sources["refits"] = refit_interval(fit, data, opts, np.random.default_rng(10_000 + seed), args.n_refits)
        for src, (lo, hi) in sources.items():
            cov = (lo <= conf) & (conf <= hi)
            src += "_oracle_labels" if args.oracle_labels else ""
            rows.append({"seed": seed, "config": name, "source": src, "accuracy": acc, "cpu_fit_s": cpu_fit,
                         "cpu_s": time.process_time() - t, "n_iter": int(fit.n_iter), "converged": bool(fit.converged),
                         "concentration": np.round(fit.prior[0].sum(axis=1), 2).tolist(),
                         "width": float(np.mean(hi - lo)), "coverage": float(cov.mean()),
                         **{f"coverage_{k}": float(cov[kind == k].mean()) for k in KINDS},
                         **{f"n_{k}": int(cov[kind == k].size) for k in KINDS},
                         **({"scale_median": {k: float(np.median(fit.annotator_scale[kind == k])) for k in KINDS}}
                            if fit.annotator_scale is not None else {}),
                         **({"type_weight": np.round(fit.mixture_weight, 3).tolist(),
                             "type_mean": {k: np.round(fit.type_probability[kind == k].mean(axis=0), 3).tolist()
                                           for k in KINDS}} if fit.mixture_alpha is not None else {})})
            print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in rows[-1].items()}),
                  flush=True)
    return rows


def summarise(rows):
    out = []
    for key in sorted({(r["config"], r["source"]) for r in rows}):
        got = [r for r in rows if (r["config"], r["source"]) == key]
        s = {"config": key[0], "source": key[1], "n_crowds": len(got),
             "accuracy": float(np.mean([r["accuracy"] for r in got])),
             "width": float(np.mean([r["width"] for r in got]))}
        for k in ("",) + tuple(f"_{k}" for k in KINDS):
            v = np.array([r[f"coverage{k}"] for r in got])
            m = int(sum(r[f"n{k}"] for r in got)) if k else int(sum(sum(r[f"n_{q}"] for q in KINDS) for r in got))
            s[f"coverage{k}"] = float(v.mean())
            s[f"se{k}"] = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else None
            s[f"se_binomial{k}"] = float(np.sqrt(0.09 / m))
        out.append(s)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crowds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--refit-crowds", type=int, default=4)
    ap.add_argument("--n-refits", type=int, default=20)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--annotators", type=int, default=500)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--configs", nargs="+")
    ap.add_argument("--max-minutes", type=float)
    ap.add_argument("--oracle-labels", action="store_true")
    ap.add_argument("--joint", action="store_true")
    ap.add_argument("--gibbs", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "coverage_confusion_crowds.json"))
    args = ap.parse_args(argv)
    t0, rows = time.perf_counter(), []
    for i in range(args.crowds):
        if args.max_minutes and i >= 2 and time.perf_counter() - t0 > 60 * args.max_minutes:
            break
        seed = args.first_seed + i
        rows += one(seed, args, refits=i < args.refit_crowds)
        Path(args.out).write_text(json.dumps({"benchmark": "coverage_confusion_crowds", "machine": machine(),
                                              "settings": vars(args), "configs": CONFIGS,
                                              "summary": summarise(rows), "rows": rows}, indent=1) + "\n")
    print(json.dumps(summarise(rows), indent=1))


if __name__ == "__main__":
    main()
