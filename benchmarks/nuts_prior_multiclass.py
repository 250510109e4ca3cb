"""K-class NUTS on small data sets: the default prior's pull and the 1 / (K - 1) prior (docs/multiclass.md).

On data sets of ``coverage_multiclass.py`` (same ``simulate`` and ``data_seed``; default K = 10, 5 annotators,
under-confident, 2,000 items, about 200 labels per confusion row) fits ``fit_nuts_multiclass`` (grouped model,
2 chains x 300 warm-up + 300 draws) with a given ``MulticlassPrior`` and propagates the draws to both NC-ECEs
(``posterior_top_label_nc_ece`` / ``posterior_classwise_nc_ece``, the NUTS route of ``evaluate_multiclass``).
Per data set: the 90% intervals against the population targets, the shift of the mean diagonal against the true
confusion matrices, the largest R-hat and the wall time. Results go to ``--out`` (JSON lines, one per data set).

    python benchmarks/nuts_prior_multiclass.py --off-diagonal 1 --reps 6          # the default prior
    python benchmarks/nuts_prior_multiclass.py --off-diagonal 0.1111111 --reps 18 # 1 / (K - 1)
    # the NUTS route's coverage in every cell of the study (docs/coverage.md, K-class, fifth session):
    python benchmarks/nuts_prior_multiclass.py --off-diagonal 1 --reps 100 --classes 3 --annotators 3 --curve overconfident
"""
import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import coverage_multiclass as cm  # noqa: E402
from noisycal_bayes import MulticlassAnnotationSet  # noqa: E402
from noisycal_bayes.inference import fit_nuts_multiclass  # noqa: E402
from noisycal_bayes.models import MulticlassPrior  # noqa: E402
from noisycal_bayes.propagate import posterior_classwise_nc_ece, posterior_top_label_nc_ece  # noqa: E402
from noisycal_bayes.propagate.nc_ece import USABLE_LEVEL  # noqa: E402
from noisycal_bayes.reference.calibration import usable_from_draws  # noqa: E402


def one(r, k, j, curve, n_items, prior, targets):
    seed = cm.data_seed(k, j, curve, r)
    p, _, labels, conf = cm.simulate(np.random.default_rng(seed), n_items, k, j, curve)
    data = MulticlassAnnotationSet.from_responses(np.repeat(np.arange(n_items), j), np.tile(np.arange(j), n_items),
                                                  labels.reshape(-1), probs=p, n_classes=k)
    t = time.time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = fit_nuts_multiclass(data, model="grouped", n_chains=2, n_warmup=300, n_samples=300, seed=r,
                                   prior=prior)
        draws = np.asarray(post.confusion)
        usable = usable_from_draws(draws, level=USABLE_LEVEL)
        top = posterior_top_label_nc_ece(p, data.responses, draws, level=0.9, seed=r, usable=usable)
        cw = posterior_classwise_nc_ece(p, data.responses, draws, level=0.9, seed=r, usable=usable)
    out = {"rep": r, "seed": seed, "seconds": time.time() - t, "max_rhat": post.diagnostics.get("max_rhat"),
           "n_divergent": post.diagnostics.get("n_divergent"),
           "prior_warning": any(w.category.__name__ == "PriorWarning" for w in caught),
           "mean_diagonal_shift": float(np.mean(np.diagonal(draws.mean(axis=0), axis1=-2, axis2=-1))
                                        - np.mean(np.diagonal(conf, axis1=-2, axis2=-1)))}
    for name, res, truth in (("top_label", top, targets[0]), ("classwise", cw, targets[1])):
        lo, hi = res.reported_interval  # what a user reads (one-sided near 0)
        out[name] = {"target": truth, "debiased": res.debiased, "lower": res.lower, "upper": res.upper,
                     "covered": bool(res.lower <= truth <= res.upper), "covered_reported": bool(lo <= truth <= hi),
                     "sd_debiased_draws": float(np.std(res.debiased_draws))}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--off-diagonal", type=float, required=True, help="MulticlassPrior(off_diagonal=...)")
    ap.add_argument("--diagonal", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--first-rep", type=int, default=0)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--annotators", type=int, default=5)
    ap.add_argument("--curve", default="underconfident")
    ap.add_argument("--n-items", type=int, default=2000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    prior = MulticlassPrior(diagonal=args.diagonal, off_diagonal=args.off_diagonal)
    targets = cm.population_target(args.classes, args.curve)[:2]
    out = Path(args.out or ROOT / "benchmarks" / "results" /
               f"nuts_prior_multiclass_K{args.classes}_J{args.annotators}_{args.curve}_off{args.off_diagonal:.4g}.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with out.open("a") as f:
        for r in range(args.first_rep, args.reps):
            row = one(r, args.classes, args.annotators, args.curve, args.n_items, prior, targets)
            rows.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(f"rep {r}: top {row['top_label']['debiased']:.4f} [{row['top_label']['lower']:.4f}, "
                  f"{row['top_label']['upper']:.4f}] target {targets[0]:.4f} covered {row['top_label']['covered']}; "
                  f"class-wise covered {row['classwise']['covered']}; diagonal shift {row['mean_diagonal_shift']:+.4f}; "
                  f"R-hat {row['max_rhat']:.3f}; PriorWarning {row['prior_warning']}; {row['seconds']:.0f} s", flush=True)
    err = np.array([r["top_label"]["debiased"] - r["top_label"]["target"] for r in rows])
    print(f"{len(rows)} data sets: top-label covered {sum(r['top_label']['covered'] for r in rows)}, class-wise "
          f"{sum(r['classwise']['covered'] for r in rows)}; top-label error {err.mean():+.4f} +- "
          f"{err.std(ddof=1) / np.sqrt(len(err)) if len(err) > 1 else float('nan'):.4f}; results in {out}")


if __name__ == "__main__":
    main()
