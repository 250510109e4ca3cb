"""Calibration and power of the K-class pattern check (``run_multiclass_checks``, EM route, 199 replicates).

Designs (``CASES``): ``dense_k3_j3`` (1000 items, K = 3, three annotators on every item), ``partial_j4`` (2000
items, four annotators, three per item), ``crowd_150`` (200 items, 150 annotators, five per item: 3-10 labels
each), ``partial_j8`` (2000 items, eight annotators, three per item), all simulated from the model;
``score_dependent`` (1500 items, annotator 0's accuracy falls from 0.9 to 0.4 with the confidence rank: must warn).
Per data set: the EM fit of ``evaluate_multiclass`` and its check; prints the fraction of ``p <= 0.05``.

Run: ``python benchmarks/checks_calibration_multiclass.py dense_k3_j3 100 [out.json]`` (docs/model_checks.md).
"""
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
from noisycal_bayes.core import score_groups
from noisycal_bayes.data import MulticlassAnnotationSet
from noisycal_bayes.diagnostics.checks import run_multiclass_checks
from noisycal_bayes.evaluation.engines import N_STARTS_K
from noisycal_bayes.inference import fit_em_multiclass
from noisycal_bayes.simulate import simulate_multiclass


def data_of(sim):
    ann = np.unique(np.asarray(sim.annotator), return_inverse=True)[1].reshape(-1)  # drop annotators without labels
    return MulticlassAnnotationSet.from_responses(sim.item, ann, sim.label, n_classes=sim.probs.shape[1],
                                                  probs=sim.probs)


def score_dependent(n, seed):
    """Annotator 0's accuracy falls from 0.9 to 0.4 with the classifier's confidence rank (others 0.8)."""
    sim = simulate_multiclass(n, 3, 3, accuracy=0.8, seed=seed)
    rng = np.random.default_rng(seed + 7)
    conf = sim.probs.max(axis=1)
    rank = np.argsort(np.argsort(conf)) / (n - 1)
    lab = np.asarray(sim.label).copy()
    sel = np.flatnonzero(np.asarray(sim.annotator) == 0)
    it = np.asarray(sim.item)[sel]
    acc = 0.4 + 0.5 * rank[it]
    y = np.asarray(sim.y)[it]
    right = rng.random(sel.size) < acc
    other = (y + rng.integers(1, 3, sel.size)) % 3
    lab[sel] = np.where(right, y, other)
    return MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, lab, n_classes=3, probs=sim.probs)


CASES = {
    "dense_k3_j3": lambda s: data_of(simulate_multiclass(1000, 3, 3, accuracy=0.8, seed=s)),
    "crowd_150": lambda s: data_of(simulate_multiclass(200, 150, 3, labels_per_item=5, seed=s)),
    "partial_j8": lambda s: data_of(simulate_multiclass(2000, 8, 3, labels_per_item=3, seed=s)),
    "partial_j4": lambda s: data_of(simulate_multiclass(2000, 4, 3, labels_per_item=3, seed=s)),
    "score_dependent": lambda s: score_dependent(1500, s),
}

case, n_sets, out = sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None
rows = []
t0 = time.perf_counter()
for r in range(n_sets):
    data = CASES[case](1000 + r)
    g = score_groups(data.probs, n_quantiles=2)
    fit = fit_em_multiclass(data, model="grouped", groups=g, n_starts=N_STARTS_K, seed=r)
    t = time.perf_counter()
    (row,) = run_multiclass_checks(data, fit, method="em", seed=r)
    rows.append(dict(seed=1000 + r, status=row["status"], p=row["p_value"], stat=row["statistic"],
                     secs=time.perf_counter() - t, detail=row["detail"]))
    print(r, row["status"], row["p_value"], round(time.perf_counter() - t, 2), flush=True)
ps = np.array([x["p"] for x in rows if x["p"] is not None])
summary = dict(case=case, n_sets=n_sets, n_testable=int(ps.size), frac_warn=float(np.mean(ps <= 0.05)) if ps.size else None,
               n_warn=int(np.sum(ps <= 0.05)), mean_p=float(ps.mean()) if ps.size else None,
               median_secs=float(np.median([x["secs"] for x in rows])), total_secs=time.perf_counter() - t0)
print(summary)
if out:
    with open(out, "w") as fh:
        json.dump(dict(summary=summary, rows=rows), fh, indent=1)
