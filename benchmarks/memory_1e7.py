"""Peak memory of the one pass over 1e7 items, and of everything after it.

Usage::

    python benchmarks/memory_1e7.py [--n-items 10000000] [--n-annotators 3] [--groups 5] [--out FILE.json]

What is measured (``tracemalloc``, which sees NumPy's array allocations; JAX's own device buffers are not
traced, so the JAX steps are also reported as the growth of the process's peak resident set size):

1. ``compress_patterns``: (group, response pattern) counts from the dense (n_items, J) int8 label matrix;
2. ``bin_stats``: the per-(bin, missingness) sums NC-ECE needs;
3. EM on the compressed table only (``core.em_step`` on the padded pattern table), 200 steps in float64;
4. NC-ECE from the bin statistics;
5. the public front door on the same data: building the ``AnnotationSet`` (validated copies, including an
   object array of 1e7 item ids) and ``noisycal_bayes.inference.fit_em(data, groups=Binning.equal_mass(5))``.

Each figure is the peak *extra* memory of that step above what was allocated before it (the inputs), so
it answers "how much memory does this step need on top of the data". The inputs are built in chunks so
that their construction does not dominate the process's peak. Simulated data: 3 annotators with channels
(0.1, 0.9), (0.2, 0.8), (0.15, 0.85), 20% missing responses, scores ~ U(0, 1), calibrated truth.
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import time
import tracemalloc

import numpy as np
from noisycal_bayes.data import Binning

MB = 2.0 ** 20


def rss_peak_mb() -> float:
    # ru_maxrss is in kilobytes on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def make_data(n: int, n_annotators: int, seed: int = 0, chunk: int = 1_000_000):
    """Labels (n, J) int8 with -1 = missing and scores (n,), built chunk by chunk."""
    fpr = np.array([0.1, 0.2, 0.15, 0.12, 0.18][:n_annotators])
    tpr = np.array([0.9, 0.8, 0.85, 0.88, 0.82][:n_annotators])
    rng = np.random.default_rng(seed)
    labels = np.empty((n, n_annotators), dtype=np.int8)
    scores = np.empty(n, dtype=np.float64)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        z = rng.random(m)
        y = rng.random(m) < z
        rate = np.where(y[:, None], tpr, fpr)
        lab = (rng.random((m, n_annotators)) < rate).astype(np.int8)
        lab[rng.random((m, n_annotators)) < 0.2] = -1
        empty = (lab < 0).all(axis=1)
        lab[empty, 0] = y[empty]
        labels[start:start + m] = lab
        scores[start:start + m] = z
    return labels, scores


def measure(label, fn):
    """Run ``fn()``; return its result and (peak extra traced MB, seconds, process RSS peak MB after)."""
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    extra = (peak - base) / MB
    print(f"  {label:<38s} peak extra {extra:9.1f} MB   {seconds:7.2f} s   process RSS peak {rss_peak_mb():8.1f} MB",
          flush=True)
    return out, {"peak_extra_mb": round(extra, 2), "seconds": round(seconds, 3), "rss_peak_mb": round(rss_peak_mb(), 1)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-items", type=int, default=10_000_000)
    parser.add_argument("--n-annotators", type=int, default=3)
    parser.add_argument("--groups", type=int, default=5)
    parser.add_argument("--out", help="also write the figures as JSON to this file")
    parser.add_argument("--no-end-to-end", dest="end_to_end", action="store_false",
                        help="skip the front-door steps (AnnotationSet, inference.fit_em)")
    args = parser.parse_args(argv)

    import jax
    import jax.numpy as jnp

    from noisycal_bayes.core import bin_stats, ds_loglik, em_step, nc_ece_from_stats, pad_bin_stats, x64
    from noisycal_bayes.data import bin_index, compress_patterns, pad_patterns, padded_size, resolve_groups

    n, j = args.n_items, args.n_annotators
    # Item ids as Python objects (what AnnotationSet stores), made before tracing starts: tracemalloc's own
    # bookkeeping for 1e7 small objects would otherwise inflate the resident set by about 1 GB.
    ids = np.arange(n).astype(object) if args.end_to_end else None
    rss_start = rss_peak_mb()
    tracemalloc.start()
    labels, scores = make_data(n, j)
    group, n_groups = resolve_groups(scores, args.groups, n)
    edges = np.arange(11) / 10
    bins = bin_index(scores, edges)
    n_responses = int((labels >= 0).sum())
    inputs_mb = (labels.nbytes + scores.nbytes + group.nbytes + bins.nbytes) / MB
    print(f"{n:,} items x {j} annotators = {n_responses:,} responses; inputs {inputs_mb:.1f} MB "
          f"(labels int8 {labels.nbytes / MB:.1f} MB, scores float64 {scores.nbytes / MB:.1f} MB, "
          f"group/bin int32 {(group.nbytes + bins.nbytes) / MB:.1f} MB); {n_groups} score groups")
    figures = {"n_items": n, "n_annotators": j, "n_responses": n_responses, "n_groups": n_groups,
               "inputs_mb": round(inputs_mb, 2), "python": platform.python_version(), "numpy": np.__version__,
               "jax": jax.__version__, "machine": platform.machine(), "steps": {}}

    pc, figures["steps"]["compress_patterns"] = measure("compress_patterns (one pass)",
                                                        lambda: compress_patterns(labels, group, n_groups))
    compressed_mb = (pc.patterns.nbytes + pc.group.nbytes + pc.counts.nbytes) / MB
    print(f"  -> {pc.counts.size} (group, pattern) rows, {compressed_mb * 1024:.1f} kB "
          f"(plus the per-item inverse index, {pc.inverse.nbytes / MB:.1f} MB, kept only for per-item posteriors)")
    figures["compressed_rows"] = int(pc.counts.size)
    figures["compressed_kb"] = round(compressed_mb * 1024, 2)
    figures["inverse_mb"] = round(pc.inverse.nbytes / MB, 2)

    stats, figures["steps"]["bin_stats"] = measure("bin_stats (one pass, NC-ECE sums)",
                                                   lambda: pad_bin_stats(bin_stats(labels, scores, bins, 10)))
    figures["bin_stats_rows"] = int(stats.count.size)

    padded = pad_patterns(pc, padded_size(pc.counts.size, n_groups, j))
    del pc  # drop the inverse index: everything below needs only the table

    def em():
        with x64():
            pat, grp = jnp.asarray(padded.patterns, jnp.int32), jnp.asarray(padded.group, jnp.int32)
            c = jnp.asarray(padded.counts)
            theta = (jnp.full(j, 0.3), jnp.full(j, 0.7), jnp.full(n_groups, 0.5))
            theta = jax.lax.fori_loop(0, 200, lambda i, s: em_step(pat, grp, c, n_groups, *s), theta)
            return [np.asarray(t) for t in theta], float(ds_loglik(pat, grp, c, *theta))

    rss_before_em = rss_peak_mb()
    (theta, loglik), figures["steps"]["em_200_steps_on_table"] = measure("EM, 200 steps on the table", em)
    figures["steps"]["em_200_steps_on_table"]["rss_growth_mb"] = round(rss_peak_mb() - rss_before_em, 1)
    print(f"  -> fpr {np.round(theta[0], 4).tolist()}, tpr {np.round(theta[1], 4).tolist()}")

    def nc():
        with x64():
            return float(nc_ece_from_stats(stats, theta[0], theta[1] - theta[0]))

    value, figures["steps"]["nc_ece_from_stats"] = measure("NC-ECE from bin statistics", nc)
    print(f"  -> NC-ECE {value:.5f} (calibrated truth: close to 0)")

    if args.end_to_end:
        # The public front door on the same data: AnnotationSet (validated, read-only copies), then fit_em with
        # 5 equal-mass score groups (groups from the scores, compression, EM from 10 starts).
        from noisycal_bayes import AnnotationSet
        from noisycal_bayes.inference import fit_em

        data, figures["steps"]["annotation_set"] = measure(
            "AnnotationSet(labels, scores, ...)", lambda: AnnotationSet(labels, scores, ids, np.arange(j).astype(object)))
        fit, figures["steps"]["fit_em_front_door"] = measure("inference.fit_em(data, groups=Binning.equal_mass(5))",
                                                             lambda: fit_em(data, groups=args.groups))
        print(f"  -> fpr {np.round(fit.channel.fpr, 4).tolist()}, tpr {np.round(fit.channel.tpr, 4).tolist()}")
    tracemalloc.stop()
    figures["rss_peak_mb"] = round(rss_peak_mb(), 1)
    figures["rss_at_start_mb"] = round(rss_start, 1)
    figures["peak_extra_bytes_per_item_compress"] = round(
        figures["steps"]["compress_patterns"]["peak_extra_mb"] * MB / n, 1)
    print(f"process RSS peak {figures['rss_peak_mb']:.1f} MB (at start {rss_start:.1f} MB); compression needs "
          f"{figures['peak_extra_bytes_per_item_compress']:.1f} bytes per item on top of the data")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(figures, fh, indent=2)
    return figures


if __name__ == "__main__":
    main()
