"""Which population do the crowds' own labels support: the learned one, or IBCC's fixed diagonal-heavy prior?

Issue 34 asks the Bayesian crowd route for the published IBCC accuracy (ms 0.790, cf 0.883; crowds README). The
published IBCC (Kim & Ghahramani 2012, as run by yuan-li/truth-inference-at-scale, ``code/ibcc.py``) puts a *fixed*
Dirichlet prior on every confusion row (4 on the diagonal, 1 elsewhere); our pooled model *learns* the population
rows (``fit_em_population``: mean and concentration per true class, empirical Bayes). This script asks the data,
not the gold labels, which of the two to use:

* ``cv_elpd``: 5-fold cross-validated log predictive density of the held-out items' labels (folds over items, seed
  0; each fold fitted with the held-out items at weight 0, so every annotator keeps a row; the held-out item's
  labels scored by ``log sum_y pi_y prod_j C_j[y, l_ij]``). Higher is better; it uses no gold. ``se_diff``: the
  standard error of the difference, paired over items (as for a LOO difference).
* ``accuracy``: the full fit's clean-label posterior argmax against gold (what the fit never sees).

Both populations run through the same EM (``fit_em_population``, ``population=`` for the fixed prior), so the only
difference is the prior on the rows. Run: ``PYTHONPATH=. python benchmarks/crowds_population_cv.py``
-> ``benchmarks/results/crowds_population_cv.json`` (docs/crowds.md, *Learned or fixed population*).
"""
from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import machine, write_json  # noqa: E402
from bench_crowds_bayes import _gold_of  # noqa: E402

import noisycal_bayes as nb  # noqa: E402
from noisycal_bayes.experiments.real_data import SHARED_DATA_HINT, shared_data_path  # noqa: E402
from noisycal_bayes.inference.population import fit_em_population  # noqa: E402

SETS = ("cf", "ms", "adult", "zencrowd_us", "sp")
N_FOLDS = 5


def heldout_loglik(fit, item, ann, lab, n_items, rows):
    """``log p(labels of item i)`` under the fit's confusion and prevalence, for the items in ``rows``."""
    logc = np.log(np.clip(fit.confusion, 1e-300, None))
    ll = np.zeros((n_items, fit.confusion.shape[1]))
    np.add.at(ll, item, logc[ann, :, lab])
    return logsumexp(ll[rows] + np.log(fit.prevalence[0]), axis=1)


def run(name):
    if (path := shared_data_path(f"crowds/{name}.csv")) is None:
        raise SystemExit(f"crowds/{name}.csv not found: {SHARED_DATA_HINT}.")
    data = nb.load_multiclass(str(path))
    gold = _gold_of(path, data.item_ids)
    known = ~pd.isna(gold) & (gold.astype(str) != "-1")
    classes = np.asarray(data.classes)
    K, n = data.n_classes, data.n_items
    item, ann, lab = (np.asarray(v) for v in data.responses)
    fold = np.random.default_rng(0).integers(0, N_FOLDS, n)
    out = {"data": name, "n_classes": int(K), "n_items": int(n), "n_annotators": int(data.n_annotators)}
    per_item = {}
    for pname, pop in (("learned", None), ("ibcc_fixed_4_1", np.eye(K) * 3.0 + 1.0)):
        t0 = time.process_time()
        pointwise = np.zeros(n)
        for f in range(N_FOLDS):
            fit = fit_em_population(data, population=pop, weights=(fold != f).astype(float))
            pointwise[fold == f] = heldout_loglik(fit, item, ann, lab, n, fold == f)
        per_item[pname] = pointwise
        elpd = float(pointwise.sum())
        full = fit_em_population(data, population=pop)
        pred = classes[np.argmax(full.clean_label_probability(data), axis=1)]
        out[pname] = {"cv_elpd": elpd, "accuracy": float(np.mean(pred[known].astype(str) == gold[known].astype(str))),
                      "cpu_s": time.process_time() - t0}
    diff = per_item["learned"] - per_item["ibcc_fixed_4_1"]
    out["cv_elpd_learned_minus_fixed"] = float(diff.sum())
    out["se_diff"] = float(np.sqrt(n * diff.var(ddof=1)))  # paired over items, as LOO's se of a difference
    print(json.dumps({"data": name, "learned": round(out["learned"]["accuracy"], 4),
                      "fixed": round(out["ibcc_fixed_4_1"]["accuracy"], 4),
                      "cv_elpd_learned_minus_fixed": round(out["cv_elpd_learned_minus_fixed"], 1),
                      "se": round(out["se_diff"], 1)}), flush=True)
    return out


def main():
    warnings.simplefilter("ignore")
    info = machine()
    rows = [run(s) for s in SETS]
    write_json("crowds_population_cv", info, {"folds": N_FOLDS, "fold_seed": 0, "fixed_prior": "4 diagonal, 1 off"},
               rows)


if __name__ == "__main__":
    main()
