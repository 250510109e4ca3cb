"""Coverage of the top-label NC-ECE interval of ``evaluate_multiclass`` on simulated sparse K-class crowds.

Goal (issue "Real crowds of any K"): on simulated sparse K-class crowds (K = 3 and 10, 200-500 annotators, 5-30
labels each) the 90% top-label NC-ECE interval covers its target at >= 0.85, with no item left out.

Per data set: :func:`~noisycal_bayes.simulate.simulate_multiclass` with ``n_items`` items, ``labels_per_item``
distinct annotators per item drawn at random out of ``n_annotators`` (so each annotator has about
``n_items * labels_per_item / n_annotators`` labels), each annotator's confusion diagonal drawn from
``U(acc_low, acc_high)`` (the rest of the row uniform: :func:`~noisycal_bayes.simulate.random_confusion`), an
over-confident classifier; then ``evaluate_multiclass(data, method="em", n_boot=..., checks=False, metrics=False)``
with every other default (on a crowd: the partially pooled Dawid-Skene and its item-bootstrap refits with the
population kept at the full fit's, docs/crowds.md; the check and the metrics do not enter the interval).

Target: the one the interval names (``MC_TARGETS["top_label"]``): the population top-label binned ECE on the
fixed partition of 15 equal-width confidence bins, ``sum_b P(conf in B_b) |E[q_yhat - conf | conf in B_b]|``,
computed once per (K, curve) from ``--target-items`` fresh classifier outputs of the same generator with the
clean-label probabilities ``q`` in place of labels (Monte Carlo error about 1e-4). An interval covers when the
reported interval (two-sided, or ``[0, upper]`` when the result reads the one-sided bound) contains the target.
Items left out: items none of whose labels comes from a usable annotator (``result.usable``).

Usage::

    PYTHONPATH=$PWD python benchmarks/coverage_crowds_multiclass.py --reps 40 --out /tmp/cov.json
    PYTHONPATH=$PWD python benchmarks/coverage_crowds_multiclass.py --render benchmarks/results/coverage_crowds_multiclass.json

Writes ``benchmarks/results/coverage_crowds_multiclass.json``: every data set and the summary per setting.
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

#: (K, n_annotators, n_items, labels_per_item): about 30, 12, 6, 30 and 12 labels per annotator.
SETTINGS = [(3, 200, 2000, 3), (3, 500, 2000, 3), (3, 500, 1000, 3), (10, 300, 3000, 3), (10, 500, 2000, 3)]
BINS = 15


def top_label_target(k: int, curve: str, n: int, seed: int = 12345) -> float:
    """Population top-label binned ECE of the generator (module docstring), by Monte Carlo over ``n`` outputs."""
    from noisycal_bayes.simulate import simulate_multiclass

    total, count = np.zeros(BINS), np.zeros(BINS)
    chunk = 200_000
    for c in range(0, n, chunk):
        sim = simulate_multiclass(min(chunk, n - c), 1, k, curve=curve, seed=seed + c)
        conf = sim.probs.max(axis=1)
        yhat = sim.probs.argmax(axis=1)
        resid = sim.clean_probs[np.arange(conf.size), yhat] - conf
        b = np.minimum((conf * BINS).astype(int), BINS - 1)
        total += np.bincount(b, weights=resid, minlength=BINS)
        count += np.bincount(b, minlength=BINS)
    return float(np.sum(np.abs(total)) / n)


def crowd_data(k, n_annotators, n_items, per_item, rep, *, acc_low=0.5, acc_high=0.9, curve="overconfident"):
    """One simulated sparse crowd (module docstring): ``(data, sim, ann)`` with ``sim`` the
    :class:`~noisycal_bayes.simulate.MulticlassSimulation` and ``ann`` each response's annotator index in ``data``
    (an annotator drawn for no item, possible at a few labels each, is not in the data set)."""
    from noisycal_bayes import MulticlassAnnotationSet
    from noisycal_bayes.simulate import random_confusion, simulate_multiclass

    rng = np.random.default_rng(1_000_003 * k + 7919 * n_annotators + rep)
    acc = rng.uniform(acc_low, acc_high, size=n_annotators)
    conf = random_confusion(n_annotators, k, accuracy=acc, seed=rng)
    sim = simulate_multiclass(n_items, n_annotators, k, confusion=conf, labels_per_item=per_item, curve=curve, seed=rng)
    present, ann = np.unique(sim.annotator, return_inverse=True)
    data = MulticlassAnnotationSet.from_responses(sim.item, ann, sim.label, n_items=n_items, n_annotators=present.size,
                                                  n_classes=k, probs=sim.probs)
    return data, sim, ann


def one(k, n_annotators, n_items, per_item, rep, args, target):
    from noisycal_bayes import evaluate_multiclass

    data, sim, ann = crowd_data(k, n_annotators, n_items, per_item, rep, acc_low=args.acc_low, acc_high=args.acc_high,
                                curve=args.curve)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The predictive check and the clean-label metrics do not enter the interval: left out to save time.
        res = evaluate_multiclass(data, method="em", n_boot=args.n_boot, seed=rep, checks=False, metrics=False)
    wall = time.perf_counter() - t
    s = res.nc_ece
    one_sided = s.interval_to_read == "upper_one_sided"
    lo, hi = (0.0, s.upper_bound) if one_sided else (s.lower, s.upper)
    usable = np.asarray(res.usable, dtype=bool)
    labelled_by_usable = np.zeros(n_items, dtype=bool)
    labelled_by_usable[sim.item[usable[ann]]] = True
    labels_each = np.bincount(sim.annotator, minlength=n_annotators)
    return {"k": k, "n_annotators": n_annotators, "n_items": n_items, "labels_per_item": per_item, "rep": rep,
            "value": float(s.value), "debiased": float(s.debiased), "lower": float(lo), "upper": float(hi), "target": target,
            "covers": bool(lo <= target <= hi), "interval_to_read": s.interval_to_read, "width": float(hi - lo), "wall_s": wall,
            "method_detail": res.method_detail, "n_unusable": int((~usable).sum()), "n_annotators_labelling": int(data.n_annotators),
            "n_items_left_out": int((~labelled_by_usable).sum()),
            "labels_per_annotator_median": float(np.median(labels_each)),
            "labels_per_annotator_min": int(labels_each.min()), "labels_per_annotator_max": int(labels_each.max())}


def summarise(rows):
    out = []
    for key in sorted({(r["k"], r["n_annotators"], r["n_items"], r["labels_per_item"]) for r in rows}):
        got = [r for r in rows if (r["k"], r["n_annotators"], r["n_items"], r["labels_per_item"]) == key]
        cov = float(np.mean([r["covers"] for r in got]))
        n = len(got)
        out.append({"k": key[0], "n_annotators": key[1], "n_items": key[2], "labels_per_item": key[3], "n": n,
                    "coverage": cov, "se": float(np.sqrt(cov * (1 - cov) / n)) if n else None,
                    "target": got[0]["target"], "mean_value": float(np.mean([r["value"] for r in got])),
                    "mean_width": float(np.mean([r["width"] for r in got])),
                    "items_left_out_max": int(max(r["n_items_left_out"] for r in got)),
                    "labels_per_annotator_median": float(np.median([r["labels_per_annotator_median"] for r in got])),
                    "wall_median_s": float(np.median([r["wall_s"] for r in got]))})
    return out


def render(path):
    d = json.loads(Path(path).read_text())
    cols = ["k", "n_annotators", "n_items", "labels_per_item", "labels_per_annotator_median", "n", "coverage", "se",
            "target", "mean_value", "mean_width", "items_left_out_max", "wall_median_s"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for s in d["summary"]:
        print("| " + " | ".join(f"{s[c]:.4g}" if isinstance(s[c], float) else str(s[c]) for c in cols) + " |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--n-boot", type=int, default=100)
    ap.add_argument("--curve", default="overconfident")
    ap.add_argument("--acc-low", type=float, default=0.5)
    ap.add_argument("--acc-high", type=float, default=0.9)
    ap.add_argument("--target-items", type=int, default=2_000_000)
    ap.add_argument("--only-k", type=int, nargs="+")
    ap.add_argument("--first-rep", type=int, default=0, help="the first data set's seed (append to an earlier run "
                    "with --first-rep N --merge FILE)")
    ap.add_argument("--merge", default=None, help="an earlier run's JSON whose rows are kept (seeds must not overlap)")
    ap.add_argument("--max-minutes", type=float, default=None, help="start no new data set after this many minutes")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "coverage_crowds_multiclass.json"))
    ap.add_argument("--render")
    args = ap.parse_args(argv)
    if args.render:
        return render(args.render)
    info = machine()
    t0 = time.perf_counter()
    settings = [s for s in SETTINGS if not args.only_k or s[0] in args.only_k]
    earlier = json.loads(Path(args.merge).read_text()) if args.merge else {"rows": [], "settings": {}}
    same = all(earlier["settings"].get(k) == getattr(args, k) for k in ("curve", "target_items")) and args.merge
    known = {int(k): v for k, v in earlier["settings"].get("targets", {}).items()} if same else {}
    targets = {k: known[k] if k in known else top_label_target(k, args.curve, args.target_items)
               for k in sorted({s[0] for s in settings})}   # a merged run's targets are reused (same generator)
    rows = earlier["rows"]
    for rep in range(args.first_rep, args.first_rep + args.reps):  # round-robin over settings, so that a time limit leaves each setting sampled
        for k, j, n, per in settings:
            if args.max_minutes and time.perf_counter() - t0 > 60 * args.max_minutes:
                break
            rows.append(one(k, j, n, per, rep, args, targets[k]))
            print(json.dumps(rows[-1]), flush=True)
        payload = {"benchmark": "coverage_crowds_multiclass", "machine": info,
                   "settings": {k: v for k, v in vars(args).items() if k != "render"} | {"grid": SETTINGS,
                                                                                          "targets": targets},
                   "summary": summarise(rows), "rows": rows}
        Path(args.out).write_text(json.dumps(payload, indent=1, default=str) + "\n")
    print(json.dumps(summarise(rows), indent=1))


if __name__ == "__main__":
    main()
