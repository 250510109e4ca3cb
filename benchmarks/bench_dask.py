"""Sufficient statistics beyond one machine's memory: a local Dask cluster on a generated Parquet data set.

1. Generate a long-format Parquet data set (default 1.75e7 items x 3 annotators, 3% of responses missing,
   about 5.1e7 responses) chunk by chunk into ``--workdir`` (never in the repository): one file per (item
   chunk, annotator), so the responses of an item sit in three different files / partitions and the
   ``groupby(item)`` really has to shuffle. A second copy, one file per item chunk with rows sorted by
   item, feeds the single-process chunked reader.
2. ``stats_from_dask`` on a ``distributed.LocalCluster`` (2 worker processes, 1 thread each, a memory
   limit per worker): time, and the driver's peak memory (resident set size sampled every 50 ms, and
   ``ru_maxrss``) which must stay bounded (it never holds the data).
   Then ``read_stats_parquet`` (pyarrow batches, one process) on the sorted copy: time, the same peak
   memory measure, and equality with the Dask statistics.
3. On a subset (the first item chunk, 1e6 items by default): the merged Dask statistics equal the in-memory
   ones (``AnnotationSet.from_long`` + ``compress_patterns``) exactly, and ``fit_em`` from either gives the
   same estimate (identical model inputs).
4. ``fit_em`` on the full statistics (its time does not grow with the number of items) against the truth.

Writes ``benchmarks/results/bench_dask.json`` (``machine`` and flat ``rows``). Run the timing run as
``flock /tmp/bench.lock .venv/bin/python benchmarks/bench_dask.py``; ``--n-items 200000`` for a quick try.
The generated data are deleted at the end unless ``--keep``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FPR = np.array([0.10, 0.20, 0.15])
TPR = np.array([0.90, 0.80, 0.70])
EDGES = np.linspace(0.0, 1.0, 11)  # 10 equal-width score bins


def _version(mod):
    try:
        from importlib.metadata import version

        return version(mod)
    except Exception:  # noqa: BLE001
        return None


def machine() -> dict:
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    return {"python": platform.python_version(), "numpy": _version("numpy"), "pandas": _version("pandas"),
            "jax": _version("jax"), "dask": _version("dask"), "distributed": _version("distributed"),
            "pyarrow": _version("pyarrow"), "platform": platform.platform(), "cpu": cpu, "cores": os.cpu_count(),
            "memory_gb": round(psutil.virtual_memory().total / 2 ** 30, 1), "load_avg_start": list(os.getloadavg()),
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def generate(workdir: Path, n_items: int, chunk: int, missing: float, seed: int) -> dict:
    """Write the long-format data set, one file per (item chunk, annotator); return sizes."""
    data_dir, sorted_dir = workdir / "responses", workdir / "responses_sorted"
    for d in (data_dir, sorted_dir):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
    n_resp = 0
    for k, start in enumerate(range(0, n_items, chunk)):
        rng = np.random.default_rng([seed, k])
        m = min(chunk, n_items - start)
        item = np.arange(start, start + m, dtype=np.int64)
        score = rng.beta(2.0, 2.0, m)
        y = rng.random(m) < score ** 1.5  # a miscalibrated classifier: P(Y=1 | s) = s**1.5
        obs = rng.random((m, 3)) >= missing
        obs[~obs.any(axis=1), 0] = True  # every item keeps at least one label
        p1 = np.where(y[:, None], TPR[None, :], FPR[None, :])
        lab = (rng.random((m, 3)) < p1).astype(np.int8)
        # The same responses sorted by item, one file per chunk (for the chunked pyarrow reader).
        ii, jj = np.nonzero(obs)
        pq.write_table(pa.table({"item": item[ii], "annotator": jj.astype(np.int64), "label": lab[ii, jj],
                                 "score": score[ii]}), sorted_dir / f"part-{k:05d}.parquet", row_group_size=1 << 18)
        for j in range(3):
            keep = obs[:, j]
            table = pa.table({"item": item[keep], "annotator": np.full(int(keep.sum()), j, np.int64),
                              "label": lab[keep, j], "score": score[keep]})
            pq.write_table(table, data_dir / f"part-{k:05d}-{j}.parquet", row_group_size=1 << 18)
            n_resp += int(keep.sum())
    size = sum(f.stat().st_size for f in data_dir.iterdir())
    return {"dir": data_dir, "sorted_dir": sorted_dir, "n_responses": n_resp, "bytes": size, "n_chunks": k + 1,
            "sorted_bytes": sum(f.stat().st_size for f in sorted_dir.iterdir())}


class PeakRSS:
    """Peak resident set size of this process, sampled in a thread (MB)."""

    def __init__(self, interval=0.05):
        self.interval, self.peak, self._stop = interval, 0, threading.Event()
        self.proc = psutil.Process()

    def __enter__(self):
        self.base = self.proc.memory_info().rss
        self.peak = self.base
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)
        return False

    @property
    def peak_mb(self):
        return self.peak / 2 ** 20

    @property
    def base_mb(self):
        return self.base / 2 ** 20


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-items", type=int, default=17_500_000)
    ap.add_argument("--chunk", type=int, default=1_000_000, help="items per generated chunk (and the subset size)")
    ap.add_argument("--missing", type=float, default=0.03)
    ap.add_argument("--workdir", default="/tmp/noisycal_bench_dask")
    ap.add_argument("--worker-memory", default="4GB")
    ap.add_argument("--keep", action="store_true", help="keep the generated data")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_dask.json"))
    args = ap.parse_args(argv)

    import logging

    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from noisycal_bayes import AnnotationSet, Binning, fit_em
    from noisycal_bayes.data import SufficientStats, read_stats_parquet, stats_from_dask

    for name in ("distributed.shuffle", "distributed.nanny", "distributed.worker"):
        logging.getLogger(name).setLevel(logging.ERROR)  # P2P shuffle start/stop notices are not problems
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    free_gb = shutil.disk_usage(workdir).free / 2 ** 30
    info = machine()
    rows = []
    bins = Binning.from_edges(EDGES)

    t0 = time.perf_counter()
    gen = generate(workdir, args.n_items, args.chunk, args.missing, seed=0)
    t_gen = time.perf_counter() - t0
    print(f"generated {gen['n_responses']:.3e} responses of {args.n_items:.3e} items in {t_gen:.1f} s "
          f"({gen['bytes'] / 2 ** 20:.0f} MB Parquet, {gen['n_chunks'] * 3} files; {free_gb:.0f} GB were free)")
    rows.append({"stage": "generate_parquet", "n_responses": gen["n_responses"], "n_items": args.n_items,
                 "seconds": t_gen, "driver_peak_mb": None, "parquet_mb": gen["bytes"] / 2 ** 20,
                 "n_files": gen["n_chunks"] * 3})

    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=args.worker_memory,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            files = sorted(str(p) for p in gen["dir"].glob("*.parquet"))
            # Full data: the driver only builds the task graph and receives the small per-partition tables.
            ru0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            with PeakRSS() as mem:
                t0 = time.perf_counter()
                ddf = dd.read_parquet(files)
                stats = stats_from_dask(ddf, bins=bins)
                t_full = time.perf_counter() - t0
            ru1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            workers_mb = sum(v for v in client.run(lambda: psutil.Process().memory_info().rss).values()) / 2 ** 20
            assert stats.n_responses == gen["n_responses"] and stats.n_items == args.n_items, stats
            print(f"stats_from_dask, full data: {t_full:.1f} s, {stats.n_responses / t_full:.3g} responses/s; driver "
                  f"RSS {mem.base_mb:.0f} -> peak {mem.peak_mb:.0f} MB (ru_maxrss {ru0:.0f} -> {ru1:.0f} MB); "
                  f"{stats}")
            rows.append({"stage": "stats_from_dask_full", "n_responses": stats.n_responses, "n_items": stats.n_items,
                         "seconds": t_full, "driver_peak_mb": mem.peak_mb, "driver_base_mb": mem.base_mb,
                         "driver_ru_maxrss_mb": ru1, "n_partitions": ddf.npartitions, "n_patterns": stats.n_patterns,
                         "workers": 2, "worker_memory_limit": args.worker_memory,
                         "workers_rss_after_mb": workers_mb,
                         "data_in_memory_mb": stats.n_responses * (8 + 8 + 1 + 8) / 2 ** 20})

            # Subset: the first item chunk, through Dask and in memory.
            sub_files = [f for f in files if Path(f).name.startswith("part-00000-")]
            t0 = time.perf_counter()
            sub = stats_from_dask(dd.read_parquet(sub_files), bins=bins)
            t_sub = time.perf_counter() - t0
        # The same data through the single-process chunked reader (pyarrow batches, rows sorted by item).
        with PeakRSS() as mem2:
            t0 = time.perf_counter()
            stats_pa = read_stats_parquet(gen["sorted_dir"], layout="long", bins=bins)
            t_pa = time.perf_counter() - t0
        same = stats_pa.same_as(stats)
        print(f"read_stats_parquet (one process, batches of 2**18 rows): {t_pa:.1f} s; driver RSS {mem2.base_mb:.0f} "
              f"-> peak {mem2.peak_mb:.0f} MB; identical to the Dask statistics: {same}")
        assert same
        rows.append({"stage": "read_stats_parquet_full", "n_responses": stats_pa.n_responses,
                     "n_items": stats_pa.n_items, "seconds": t_pa, "driver_peak_mb": mem2.peak_mb,
                     "driver_base_mb": mem2.base_mb, "batch_size": 1 << 18, "equal_to_dask": same,
                     "parquet_mb": gen["sorted_bytes"] / 2 ** 20})

        # Subset in memory.
        t0 = time.perf_counter()
        frame = pd.concat([pd.read_parquet(f) for f in sub_files], ignore_index=True)
        data = AnnotationSet.from_long(frame)
        ref = SufficientStats.from_annotations(data, bins)
        t_mem = time.perf_counter() - t0
        equal = sub.same_as(ref)
        print(f"subset of {ref.n_items:.2e} items: Dask {t_sub:.1f} s, in memory {t_mem:.1f} s (ratio Dask / in memory "
              f"{t_sub / t_mem:.2f}); identical: {equal}")
        assert equal
        rows.append({"stage": "stats_from_dask_subset", "n_responses": sub.n_responses, "n_items": sub.n_items,
                     "seconds": t_sub, "driver_peak_mb": None, "equal_to_in_memory": equal})
        rows.append({"stage": "in_memory_subset", "n_responses": ref.n_responses, "n_items": ref.n_items,
                     "seconds": t_mem, "driver_peak_mb": None, "equal_to_in_memory": True})

        fit_mem = fit_em(data, model="grouped", groups=bins, n_starts=10)
        fit_sub = fit_em(sub, model="grouped", groups=None, n_starts=10)
        diff = max(np.max(np.abs(fit_mem.channel.fpr - fit_sub.channel.fpr)),
                   np.max(np.abs(fit_mem.channel.tpr - fit_sub.channel.tpr)),
                   np.max(np.abs(fit_mem.prevalence - fit_sub.prevalence)))
        same_inputs = (np.array_equal(fit_mem.inputs.patterns, fit_sub.inputs.patterns)
                       and np.array_equal(fit_mem.inputs.counts, fit_sub.inputs.counts))
        print(f"fit_em on the subset: in memory vs from Dask statistics, max |difference| = {diff:.1e} "
              f"(identical inputs: {same_inputs})")
        rows.append({"stage": "fit_em_subset_compare", "n_responses": sub.n_responses, "n_items": sub.n_items,
                     "seconds": None, "driver_peak_mb": None, "max_abs_param_diff": float(diff),
                     "identical_inputs": bool(same_inputs), "loglik_in_memory": fit_mem.loglik,
                     "loglik_from_stats": fit_sub.loglik})
        del frame, data

        fit_em(stats, model="grouped", groups=None, n_starts=10)  # compile for this shape
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            fit = fit_em(stats, model="grouped", groups=None, n_starts=10)
            times.append(time.perf_counter() - t0)
        err = max(np.max(np.abs(fit.channel.fpr - FPR)), np.max(np.abs(fit.channel.tpr - TPR)))
        print(f"fit_em on the full statistics: median {np.median(times) * 1e3:.1f} ms over 5 repeats (after "
              f"compilation); max |error| of fpr/tpr vs truth {err:.4f}")
        rows.append({"stage": "fit_em_full_stats", "n_responses": stats.n_responses, "n_items": stats.n_items,
                     "seconds": float(np.median(times)), "driver_peak_mb": None, "repeats": 5,
                     "max_abs_error_vs_truth": float(err), "fpr": fit.channel.fpr.tolist(),
                     "tpr": fit.channel.tpr.tolist()})
    finally:
        if not args.keep:
            shutil.rmtree(gen["dir"], ignore_errors=True)
            shutil.rmtree(gen["sorted_dir"], ignore_errors=True)

    info["load_avg_end"] = list(os.getloadavg())
    out = {"benchmark": "dask", "machine": info,
           "settings": {"n_items": args.n_items, "n_annotators": 3, "missing": args.missing, "chunk": args.chunk,
                        "bins": EDGES.tolist(), "fpr": FPR.tolist(), "tpr": TPR.tolist(),
                        "cluster": f"LocalCluster(n_workers=2, threads_per_worker=1, memory_limit={args.worker_memory})"},
           "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2, default=float) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
