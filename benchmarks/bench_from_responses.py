"""Time and peak memory of ``AnnotationSet.from_responses`` on a simulated crowd (issue 16, item 3).

Usage::

    python benchmarks/bench_from_responses.py [--n-responses 10000000] [--n-items 1000000]
                                              [--n-annotators 10000] [--order sorted|shuffled|both]

Responses: every item gets ``n_responses / n_items`` labels from annotators drawn uniformly at random (so
some items get repeated labels from one annotator), labels Bernoulli(0.5), scores U(0, 1), gold known for
1% of the items. The triples are int32 / int32 / int8, as a simulator would hand them over. Two input
orders: "sorted" (by item then annotator, as simulators and sorted files give them: no sort needed) and
"shuffled" (random order: one sort).

Time: best of two untraced builds. Memory: ``tracemalloc``'s peak above what was allocated before the call
(NumPy's allocations are traced), i.e. the extra memory the build needs on top of its input, and what the
built set holds afterwards (``held_mb``: responses, scores, gold and the object array of item ids). The
dense ``labels`` view is never touched.
"""
from __future__ import annotations

import argparse
import json
import time
import tracemalloc

import numpy as np

from noisycal_bayes.data import AnnotationSet

MB = 2.0 ** 20


def make(n_responses: int, n_items: int, n_annotators: int, *, shuffled: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    per_item = n_responses // n_items
    item = np.repeat(np.arange(n_items, dtype=np.int32), per_item)
    annotator = rng.integers(0, n_annotators, item.size, dtype=np.int32)
    # Every annotator labels something: the first n_annotators responses go to annotators 0, 1, ...
    annotator[:n_annotators] = np.arange(n_annotators, dtype=np.int32)
    label = (rng.random(item.size) < 0.5).astype(np.int8)
    if shuffled:
        perm = rng.permutation(item.size)
        item, annotator, label = item[perm], annotator[perm], label[perm]
    else:
        order = np.lexsort((annotator, item))
        annotator = annotator[order]  # item is already sorted and stays so
    scores = rng.random(n_items)
    gold = np.where(rng.random(n_items) < 0.01, rng.integers(0, 2, n_items), -1).astype(np.int8)
    return item, annotator, label, scores, gold


def run(n_responses, n_items, n_annotators, shuffled, repeat=2):
    item, annotator, label, scores, gold = make(n_responses, n_items, n_annotators, shuffled=shuffled)
    input_mb = (item.nbytes + annotator.nbytes + label.nbytes + scores.nbytes + gold.nbytes) / MB
    build = lambda: AnnotationSet.from_responses(item, annotator, label, n_items=n_items,  # noqa: E731
                                                 n_annotators=n_annotators, scores=scores, gold=gold)
    # Time without tracemalloc: tracing slows the million small allocations of the object array of item ids.
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        data = build()
        times.append(time.perf_counter() - t0)
        del data
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    data = build()
    peak = tracemalloc.get_traced_memory()[1] - base
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    kept = sum(a.nbytes for a in data.responses) / MB
    summary = data.summary()
    return {"order": "shuffled" if shuffled else "sorted", "n_responses": int(item.size), "n_items": n_items,
            "n_annotators": n_annotators, "repeated_pairs": summary["repeated_pairs"],
            "seconds_min": min(times), "seconds": times, "input_mb": round(input_mb, 1),
            "peak_extra_mb": round(peak / MB, 1), "held_mb": round(held / MB, 1), "stored_responses_mb": round(kept, 1)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-responses", type=int, default=10_000_000)
    p.add_argument("--n-items", type=int, default=1_000_000)
    p.add_argument("--n-annotators", type=int, default=10_000)
    p.add_argument("--order", choices=("sorted", "shuffled", "both"), default="both")
    p.add_argument("--out", help="write the results as JSON to this file")
    args = p.parse_args()
    orders = {"sorted": [False], "shuffled": [True], "both": [False, True]}[args.order]
    results = [run(args.n_responses, args.n_items, args.n_annotators, s) for s in orders]
    for r in results:
        print(json.dumps(r))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
