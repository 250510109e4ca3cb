"""Where the next labels help most: :func:`~noisycal_bayes.labels.plan_labels` against random relabelling and
cleanlab's ActiveLab (``cleanlab.multiannotator.get_active_learning_scores``) at equal budget (issue 37's goal).

For each setting and seed: simulate data with known truth, fit the channels, and spend ``budget`` extra labels
three ways -- the plan's (item, annotator) pairs; random (item, annotator) pairs (without repeats: pairs not yet
labelled); ActiveLab's lowest-scored items, each relabelled by an annotator drawn at random (without repeats: one who
has not labelled it). The new labels are drawn from the TRUE channels given the TRUE clean labels; the channels are
refitted on the enlarged data, and the interval of the sample NC-ECE (binary: the paper's NC-ECE on the scores;
K = 3: top-label) is read from the latent-label posterior: ``Y_i ~ P(Y_i | data)`` (refitted EM channels), 2000
draws, the 90% equal-tailed width; that width holds the clean labels' uncertainty only (EM channels are a point).
Setting ``binary_nuts`` adds the channels' uncertainty: 5 annotators, each label missing with probability 0.5, new
labels fill missing cells (NUTS reads one label per pair), NUTS fits (2 chains x 300 draws) and the latent route of
``posterior_nc_ece`` (clean labels drawn at every channel draw), 90% equal-tailed. Reported per setting: the median
width reduction (before - after) of each strategy, their ratios, and on how many seeds the plan did better.
Goal: plan / random >= 1.5 and plan / ActiveLab >= 1.

    PYTHONPATH=.:DIR python benchmarks/bench_plan.py [--seeds 10] [--settings binary,binary_crowd,k3] [--out JSON]

cleanlab is in the ``bench`` extra (or ``pip install --no-deps --target DIR cleanlab termcolor``, DIR on
PYTHONPATH). Results: docs/planning.md.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import RESULTS, machine  # noqa: E402

from noisycal_bayes.data import AnnotationSet, Binning, MulticlassAnnotationSet  # noqa: E402
from noisycal_bayes.inference import fit_em, fit_nuts  # noqa: E402
from noisycal_bayes.propagate import posterior_nc_ece  # noqa: E402
from noisycal_bayes.labels import plan_labels  # noqa: E402
from noisycal_bayes.simulate import simulate_annotations, simulate_multiclass  # noqa: E402
from noisycal_bayes.simulate.crowd import simulate_crowd  # noqa: E402

LEVEL = 0.9
N_LATENT = 2000
STRATEGY_SEED = {"plan": 1, "random": 2, "activelab": 3}


class World:
    """Responses, scores / probabilities, true labels and true channels (J, K, K) of one simulated data set."""

    def __init__(self, item, ann, lab, y, conf, *, scores=None, probs=None, crowd=False, nuts=False, repeats=True):
        self.item, self.ann, self.lab = (np.asarray(v, np.int64) for v in (item, ann, lab))
        self.y, self.conf, self.scores, self.probs, self.crowd = np.asarray(y), conf, scores, probs, crowd
        self.n, self.n_ann, self.k = y.size, conf.shape[0], conf.shape[1]
        self.nuts, self.repeats = nuts, repeats

    def data(self, extra=None):
        item, ann, lab = self.item, self.ann, self.lab
        if extra is not None:
            item, ann, lab = (np.concatenate([a, b]) for a, b in zip((item, ann, lab), extra))
        if self.probs is None:
            return AnnotationSet.from_responses(item, ann, lab, n_items=self.n, n_annotators=self.n_ann,
                                                scores=self.scores)
        return MulticlassAnnotationSet.from_responses(item, ann, lab, n_items=self.n, n_annotators=self.n_ann,
                                                      n_classes=self.k, probs=self.probs)

    def new_labels(self, item, ann, rng):
        """Labels drawn from the TRUE channels given the TRUE clean labels."""
        p = self.conf[ann, self.y[item]]                                 # (B, K)
        lab = (rng.random(item.size)[:, None] > np.cumsum(p, axis=1)).sum(1)
        return np.asarray(item, np.int64), np.asarray(ann, np.int64), np.minimum(lab, self.k - 1)


def world(setting: str, seed: int) -> World:
    if setting == "binary_nuts":  # NUTS reads one label per pair: new labels fill the missing half of the cells
        fpr, tpr = np.array([0.1, 0.25, 0.2, 0.15, 0.3]), np.array([0.85, 0.7, 0.8, 0.9, 0.75])
        sim = simulate_annotations(600, fpr=fpr, tpr=tpr, curve="overconfident", missing=0.5, seed=seed)
        item, ann, lab = sim.data.responses
        conf = np.stack([np.stack([1 - fpr, fpr], -1), np.stack([1 - tpr, tpr], -1)], axis=1)
        return World(item, ann, lab, sim.clean_labels, conf, scores=np.asarray(sim.data.scores), nuts=True,
                     repeats=False)
    if setting == "binary":
        fpr, tpr = np.array([0.1, 0.25, 0.2]), np.array([0.85, 0.7, 0.8])
        sim = simulate_annotations(600, fpr=fpr, tpr=tpr, curve="overconfident", seed=seed)
        item, ann, lab = sim.data.responses
        conf = np.stack([np.stack([1 - fpr, fpr], -1), np.stack([1 - tpr, tpr], -1)], axis=1)
        return World(item, ann, lab, sim.clean_labels, conf, scores=np.asarray(sim.data.scores))
    if setting == "binary_crowd":
        sim = simulate_crowd(600, 20, labels_per_item=3, curve="overconfident", seed=seed)
        d = sim.data
        item, ann, lab = d.responses
        fpr, tpr = np.asarray(sim.fpr), np.asarray(sim.tpr)
        conf = np.stack([np.stack([1 - fpr, fpr], -1), np.stack([1 - tpr, tpr], -1)], axis=1)
        return World(item, ann, lab, sim.clean_labels, conf, scores=np.asarray(d.scores), crowd=True, repeats=False)
    sim = simulate_multiclass(600, 3, 3, accuracy=0.75, seed=seed)
    return World(sim.item, sim.annotator, sim.label, sim.y, sim.confusion, probs=sim.probs)


def fit_of(w: World, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if w.nuts:
            return fit_nuts(data, model="histogram", groups=Binning.equal_width(10), n_chains=2, n_warmup=300,
                            n_draws=300, progress_bar=False)
        if w.probs is None:
            return fit_em(data, model="dawid_skene" if w.crowd else "histogram",
                          **({} if w.crowd else {"groups": Binning.equal_width(10)}))
        return fit_em(data)


def latent_width(w: World, data, fit, rng) -> float:
    """90% width of the sample NC-ECE under ``Y_i ~ P(Y_i | data)`` (the fit's channels); NUTS fits: the latent route
    of :func:`~noisycal_bayes.posterior_nc_ece` (labels drawn at every channel draw), equal-tailed."""
    if w.nuts:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = posterior_nc_ece(data, fit, method="latent", interval="posterior", bins=10,
                                   seed=int(rng.integers(2**31)))
        return float(res.upper - res.lower)
    q = np.asarray(fit.clean_label_probability(data), np.float64)
    if w.probs is None:
        p = q.reshape(-1, w.n).mean(0)
        conf, hit = np.asarray(w.scores), (rng.random((N_LATENT, w.n)) < p).astype(float)
        edges = np.linspace(0, 1, 11)
    else:
        conf, yhat = w.probs.max(1), w.probs.argmax(1)
        ys = (rng.random((N_LATENT, w.n))[..., None] > np.cumsum(q, 1)[None]).sum(-1)
        hit = (ys == yhat).astype(float)
        edges = np.linspace(0, 1, 16)
    idx = np.clip(np.searchsorted(edges, conf, side="right") - 1, 0, edges.size - 2)
    onehot = np.eye(edges.size - 1)[idx]                                    # (n, bins)
    ece = np.abs((hit - conf) @ onehot).sum(1) / w.n
    lo, hi = np.quantile(ece, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return float(hi - lo)


def labelled_pairs(w: World) -> set:
    return set(zip(w.item.tolist(), w.ann.tolist()))


def random_pairs(w: World, budget, rng):
    taken = set() if w.repeats else labelled_pairs(w)
    out = []
    while len(out) < budget:
        i, j = int(rng.integers(w.n)), int(rng.integers(w.n_ann))
        if (i, j) not in taken:
            out.append((i, j))
            if not w.repeats:
                taken.add((i, j))
    return np.array(out).T


def activelab_pairs(w: World, budget, rng):
    from cleanlab.multiannotator import get_active_learning_scores

    # One label per (item, annotator) cell: cleanlab's format has no repeats (none in these simulations).
    mat = np.full((w.n, w.n_ann), np.nan)
    mat[w.item, w.ann] = w.lab
    pred = np.stack([1 - w.scores, w.scores], 1) if w.probs is None else w.probs
    scores, _ = get_active_learning_scores(mat, pred)
    items, anns = [], []
    for i in np.argsort(scores, kind="stable"):                           # lowest score: relabel first
        free = np.arange(w.n_ann) if w.repeats else np.flatnonzero(np.isnan(mat[i]))
        if free.size:  # without repeats, skip items every annotator labelled already
            items.append(int(i))
            anns.append(int(rng.choice(free)))
        if len(items) == budget:
            break
    return np.array([items, anns])


def plan_pairs(w: World, data, fit, budget):
    plan = plan_labels(data, fit, budget=budget, repeats=w.repeats)
    ids_i = {v: k for k, v in enumerate(data.item_ids)}
    ids_a = {v: k for k, v in enumerate(data.annotator_ids)}
    return np.stack([plan.table["item"].map(ids_i).to_numpy(), plan.table["annotator"].map(ids_a).to_numpy()])


def one(setting: str, seed: int, budget: int) -> dict:
    rng = np.random.default_rng(1000 + seed)
    w = world(setting, seed)
    data = w.data()
    fit = fit_of(w, data)
    before = latent_width(w, data, fit, np.random.default_rng(seed))
    t0 = time.perf_counter()
    chosen = {"plan": plan_pairs(w, data, fit, budget)}
    plan_s = time.perf_counter() - t0
    chosen["random"] = random_pairs(w, budget, rng)
    chosen["activelab"] = activelab_pairs(w, budget, rng)
    row = {"setting": setting, "seed": seed, "budget": budget, "n_items": w.n, "n_annotators": w.n_ann,
           "n_classes": w.k, "width_before": before, "plan_s": plan_s}
    for name, (items, anns) in chosen.items():
        extra = w.new_labels(items, anns, np.random.default_rng([seed, STRATEGY_SEED[name]]))
        d2 = w.data(extra)
        f2 = fit_of(w, d2)
        after = latent_width(w, d2, f2, np.random.default_rng(seed))
        row[f"reduction_{name}"] = before - after
        row[f"distinct_items_{name}"] = int(np.unique(items).size)
    return row


def summarise(rows: list) -> list:
    out = []
    for setting in dict.fromkeys(r["setting"] for r in rows):
        rs = [r for r in rows if r["setting"] == setting]
        med = {k: statistics.median(r[f"reduction_{k}"] for r in rs) for k in ("plan", "random", "activelab")}
        ratio = lambda a, b: a / b if b > 0 else None  # noqa: E731 - None (null): no reduction to compare with
        out.append({"setting": setting, "n_seeds": len(rs), "budget": rs[0]["budget"],
                    "median_width_before": statistics.median(r["width_before"] for r in rs),
                    **{f"median_reduction_{k}": v for k, v in med.items()},
                    "ratio_plan_random": ratio(med["plan"], med["random"]),
                    "ratio_plan_activelab": ratio(med["plan"], med["activelab"]),
                    "seeds_plan_beats_random": sum(r["reduction_plan"] > r["reduction_random"] for r in rs),
                    "seeds_plan_beats_activelab": sum(r["reduction_plan"] > r["reduction_activelab"] for r in rs),
                    "median_plan_s": statistics.median(r["plan_s"] for r in rs)})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--settings", default="binary,binary_crowd,k3")
    ap.add_argument("--out", default=str(RESULTS / "bench_plan.json"))
    args = ap.parse_args(argv)
    start = machine()
    rows = []
    for setting in args.settings.split(","):
        for seed in range(args.seeds):
            rows.append(one(setting, seed, args.budget))
            r = rows[-1]
            print(f"{setting} seed {seed}: before {r['width_before']:.4f}; reduction plan {r['reduction_plan']:.4f} "
                  f"random {r['reduction_random']:.4f} activelab {r['reduction_activelab']:.4f}", flush=True)
    summary = summarise(rows)
    for s in summary:
        print(json.dumps(s))
    out = {"benchmark": "bench_plan", "machine": {**start, "load_avg_end": list(__import__("os").getloadavg())},
           "settings": {"seeds": args.seeds, "budget": args.budget, "level": LEVEL, "n_latent": N_LATENT},
           "summary": summary, "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
