"""Cost of the clean-label metrics inside ``evaluate`` (issue 37 goal: all metrics together add at most 20% to
``evaluate``'s wall time at 1e5 items).

Per configuration and repeat (alternating, in one process, after one warm-up run of each that compiles the JAX
kernels): ``evaluate(data, metrics=False)`` and ``evaluate(data, metrics=True)``; the row reports both medians of the
wall time and the ratio of the medians, and the same for the process's CPU time (``time.process_time``, every
thread: on a shared machine the wall time also holds the waits for a core). Binary and sp also time a third
alternative, ``*_serial``: the metrics' replicates in ``evaluate``'s own thread instead of a worker thread beside
its fit (the layout before 2026-12-05). Binary: ``simulate_annotations`` (3
annotators, overconfident scores), the CLI's EM route (``method="em"``, 200 bootstrap replicates, checks on).
K = 3: ``simulate_multiclass`` (3 annotators), ``evaluate_multiclass`` (EM, 200 item-bootstrap refits, checks on).
``sp`` (``--kinds sp``; needs the shared data folder): the sp sentiment crowd (4999 items, 203 annotators, gold;
synthetic scores, :func:`noisycal_bayes.experiments.real_data.write_real_set`), ``evaluate`` on the EM route with its
defaults (200 bootstrap refits on the sparse path); ``--sizes`` does not apply. ``alone`` (``--kinds alone``): the
binary data set's ``clean_metrics`` by itself as ``evaluate`` calls it (300 replicates), after one warm-up; the
``*_without_metrics`` columns are then empty (a steadier number than a difference of two ``evaluate`` times when
comparing two versions of the metrics).

Usage::

    python benchmarks/bench_metrics.py                 # 1e5 items, 3 repeats
    python benchmarks/bench_metrics.py --sizes 1e4 --repeats 1
    python benchmarks/bench_metrics.py --kinds sp --repeats 2
    python benchmarks/bench_metrics.py --kinds alone --repeats 9
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import machine, median, print_table, sizes_arg, timed, write_json  # noqa: E402

import noisycal_bayes as nb  # noqa: E402
from noisycal_bayes.simulate import simulate_annotations, simulate_multiclass  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", default=["1e5"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kinds", nargs="*", default=["binary", "k3"])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    info = machine()
    rows = []
    for n in sizes_arg(args.sizes):
        for kind in args.kinds:
            if kind == "sp" and n != sizes_arg(args.sizes)[0]:
                continue
            if kind == "sp":
                data = _sp()
                n = data.n_items
                run = lambda m: nb.evaluate(data, method="em", metrics=m)  # noqa: E731
            elif kind == "binary":
                data = simulate_annotations(n, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], curve="overconfident",
                                            seed=0).data
                run = lambda m: nb.evaluate(data, method="em", n_boot=200, metrics=m)  # noqa: E731
            elif kind == "alone":
                row = _alone(n, args.repeats)
                rows.append(row)
                print_table([row], list(row))
                continue
            else:
                data = simulate_multiclass(n, 3, 3, seed=0).data
                run = lambda m: nb.evaluate_multiclass(data, method="em", n_boot=200, metrics=m)  # noqa: E731
            # Binary: also with the metrics' replicates in the caller's thread ("serial"), as before 2026-12-05.
            modes = (False, True, "serial") if kind in ("binary", "sp") else (False, True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run(False), run(True)  # warm-up: compile
                wall = {m: [] for m in modes}
                cpu = {m: [] for m in modes}
                for _ in range(args.repeats):
                    for m in modes:
                        c0 = time.process_time()
                        with _serial(m == "serial"):
                            wall[m].append(timed(run, bool(m))[1])
                        cpu[m].append(time.process_time() - c0)
            on, off = median(wall[True]), median(wall[False])
            row = {"stage": f"evaluate {kind}", "n_items": n, "n_annotators": data.n_annotators,
                   "median_s": on, "median_s_without_metrics": off, "ratio": on / off, "added_fraction": on / off - 1,
                   "cpu_s": median(cpu[True]), "cpu_s_without_metrics": median(cpu[False]),
                   "cpu_added_fraction": median(cpu[True]) / median(cpu[False]) - 1, "repeats": args.repeats}
            if "serial" in modes:
                row.update(median_s_serial=median(wall["serial"]),
                           added_fraction_serial=median(wall["serial"]) / off - 1)
            rows.append(row)
            print_table([row], list(row))
    write_json("bench_metrics", info, {"sizes": args.sizes, "repeats": args.repeats}, rows, args.out)


@contextlib.contextmanager
def _serial(on: bool):
    """Inside: ``evaluate`` runs the binary metrics' replicates in its own thread (no worker thread)."""
    import noisycal_bayes.evaluation.metrics as em

    start = em.start_binary_metrics
    if on:
        em.start_binary_metrics = lambda *a, **k: start(*a, **k, thread=False)
    try:
        yield
    finally:
        em.start_binary_metrics = start


def _alone(n, repeats):
    """``clean_metrics`` alone on the binary data set, as ``evaluate`` calls it: medians of wall and CPU seconds."""
    from noisycal_bayes.evaluation.metrics import N_METRIC_REPLICATES
    from noisycal_bayes.labels import clean_metrics

    data = simulate_annotations(n, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], curve="overconfident", seed=0).data
    run = lambda: clean_metrics(data, threshold=0.5, level=0.9, seed=0, n_replicates=N_METRIC_REPLICATES)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run()  # warm-up: compile
        wall, cpu = [], []
        for _ in range(repeats):
            c0 = time.process_time()
            wall.append(timed(run)[1])
            cpu.append(time.process_time() - c0)
    return {"stage": "clean_metrics binary alone", "n_items": n, "n_annotators": data.n_annotators,
            "median_s": median(wall), "cpu_s": median(cpu), "repeats": repeats}


def _sp():
    """The sp crowd as ``noisycal-bayes evaluate`` loads it (synthetic scores from gold)."""
    from noisycal_bayes.cli import _load, build_parser
    from noisycal_bayes.experiments.real_data import write_real_set

    info = write_real_set("sp", Path(tempfile.mkdtemp(prefix="bench_metrics_sp.")))
    return _load(build_parser().parse_args(["evaluate", *info["args"]]), [])


if __name__ == "__main__":
    main()
