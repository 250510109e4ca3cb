"""Performance gates: the key cases of the benchmarks in one process, compared with a stored baseline at +-10%.

Usage::

    python benchmarks/gates.py                     # run, write benchmarks/results/gates.json, compare
    python benchmarks/gates.py --record-baseline   # run and store benchmarks/results/gates_baseline.json
    python benchmarks/gates.py --only em_binary_1e6 nuts_binary_1e4
    make gates

The cases, each the headline case of one benchmark script:

- ``em_binary_1e6`` (bench_em.py): ``fit_em(data, model="grouped", groups=Binning.equal_mass(5), n_starts=10,
  tol=1e-6)`` on 1e6 items x 3 annotators;
- ``nuts_binary_1e4`` (bench_nuts.py): compressed ``fit_nuts`` at 1e4 items, 10 equal-mass groups, 4 x 1000 / 1000;
- ``propagation_1e6`` / ``propagation_1e6_bootstrap`` (bench_propagation.py): ``posterior_nc_ece`` over 4,000
  draws at 1e6 items x 3, 10 bins, ``bootstrap=False`` / ``True``;
- ``em_multiclass_1e6_k10`` (bench_multiclass_em.py): ``fit_em_multiclass(model="dawid_skene", n_starts=4,
  tol=1e-6)`` on 1e6 items x 3 annotators x 10 classes;
- ``dask_stats_2e5`` (bench_dask.py): ``stats_from_dask`` on a long Dask frame of 2e5 items x 3 (threaded
  scheduler in this process, 4 partitions; the cluster start-up and the 1e7-scale data of the full benchmark
  are left out, to keep the run short);
- ``memory_compress_1e7`` (memory_1e7.py): peak traced memory above the inputs of ``compress_patterns`` on 1e7
  items x 3 (megabytes; deterministic, so gated directly).

How a time is gated, on a shared, noisy machine. Each case is called once untimed (compilation, caches), then
``--reps`` rounds each time a fixed reference computation (a NumPy sort and a jitted JAX reduction, no package
code) and then the case, back to back. The gated figure is the **ratio of the case's median to the reference's
median** over those rounds: load from other processes slows both, so the ratio moves much less than the wall
time. A case fails when its ratio exceeds the baseline's by more than 10%; a ratio more than 10% below says the
baseline should be recorded again (not a failure). Wall-time medians are written beside the ratios, for reading
only. The exit status is 1 when any case fails. See docs/performance.md ("Performance gates").
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import RESULTS, machine, median  # noqa: E402

TOLERANCE = 0.10
FPR, TPR = [0.1, 0.2, 0.15], [0.85, 0.75, 0.8]
OUT = RESULTS / "gates.json"
BASELINE = RESULTS / "gates_baseline.json"


# ----------------------------------------------------------------------------------------------- the reference
def _reference():
    """A fixed computation with no package code: NumPy sort of 2e6 floats and a jitted JAX logsumexp."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    x = rng.random(2_000_000)
    a = jnp.asarray(rng.random((1_000_000, 3)))
    w = jnp.asarray(rng.random((3, 8)))
    f = jax.jit(lambda a, w: jax.nn.logsumexp(jnp.log(a @ w + 1e-3), axis=1).sum())

    def run():
        np.sort(x)
        f(a, w).block_until_ready()

    return run


# ----------------------------------------------------------------------------------------------- the cases
def _quiet(fn):
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()

    return run


def case_em_binary_1e6():
    from noisycal_bayes import Binning, fit_em
    from noisycal_bayes.simulate import simulate_annotations

    data = simulate_annotations(1_000_000, fpr=FPR, tpr=TPR, curve="calibrated", seed=1_000_003).data
    return _quiet(lambda: fit_em(data, model="grouped", groups=Binning.equal_mass(5), n_starts=10, tol=1e-6,
                                 max_iter=1000))


def case_nuts_binary_1e4():
    from noisycal_bayes import Binning, fit_nuts
    from noisycal_bayes.simulate import simulate_annotations

    data = simulate_annotations(10_000, fpr=FPR, tpr=TPR, curve="calibrated", seed=10_000).data
    return _quiet(lambda: fit_nuts(data, groups=Binning.equal_mass(10), n_chains=4, n_warmup=1000, n_draws=1000,
                                   seed=1, progress_bar=False))


def _propagation(bootstrap: bool):
    def make():
        from noisycal_bayes import Binning, fit_nuts, posterior_nc_ece
        from noisycal_bayes.simulate import simulate_annotations

        data = simulate_annotations(1_000_000, fpr=FPR, tpr=TPR, curve="overconfident", seed=1_000_000).data
        fit = _quiet(lambda: fit_nuts(data, model="grouped", groups=Binning.equal_mass(10), n_chains=4,
                                      n_warmup=1000, n_draws=1000, progress_bar=False, seed=1))()
        return _quiet(lambda: posterior_nc_ece(data, fit, bins=10, method="plugin", bootstrap=bootstrap))

    return make


def case_em_multiclass_1e6_k10():
    from noisycal_bayes.inference import fit_em_multiclass
    from noisycal_bayes.simulate import simulate_multiclass

    sim = simulate_multiclass(1_000_000, 3, 10, accuracy=0.8, curve="overconfident", seed=1_000_013)
    return _quiet(lambda: fit_em_multiclass(sim, model="dawid_skene", n_starts=4, tol=1e-6, max_iter=1000))


def case_dask_stats_2e5():
    import dask.dataframe as dd

    from noisycal_bayes import Binning
    from noisycal_bayes.data import stats_from_dask
    from noisycal_bayes.simulate import simulate_annotations

    data = simulate_annotations(200_000, fpr=FPR, tpr=TPR, curve="calibrated", seed=7).data
    ddf = dd.from_pandas(data.to_long(), npartitions=4)
    bins = Binning.from_edges(np.arange(11) / 10)
    return _quiet(lambda: stats_from_dask(ddf, bins=bins))


CASES = {
    "em_binary_1e6": case_em_binary_1e6,
    "nuts_binary_1e4": case_nuts_binary_1e4,
    "propagation_1e6": _propagation(False),
    "propagation_1e6_bootstrap": _propagation(True),
    "em_multiclass_1e6_k10": case_em_multiclass_1e6_k10,
    "dask_stats_2e5": case_dask_stats_2e5,
}
MEMORY_CASES = ("memory_compress_1e7",)


def time_case(make, reference, reps: int) -> dict:
    """First call, then ``reps`` rounds of (reference, case); medians and their ratio."""
    call = make()
    t0 = time.perf_counter()
    call()
    first = time.perf_counter() - t0
    ref_t, case_t = [], []
    for _ in range(reps):
        gc.collect()
        t0 = time.perf_counter()
        reference()
        ref_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        call()
        case_t.append(time.perf_counter() - t0)
    return {"first_call_s": first, "median_s": median(case_t), "reference_median_s": median(ref_t),
            "ratio": median(case_t) / median(ref_t), "times_s": case_t, "reference_times_s": ref_t, "reps": reps}


def memory_compress_1e7() -> dict:
    """Peak traced MB above the inputs of ``compress_patterns`` on 1e7 items x 3 (memory_1e7.py's data)."""
    from memory_1e7 import make_data

    from noisycal_bayes.data.compress import compress_patterns

    labels, _ = make_data(10_000_000, 3)
    group = np.zeros(labels.shape[0], dtype=np.int32)
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    t0 = time.perf_counter()
    compress_patterns(labels, group, 1)
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"peak_extra_mb": (peak - base) / 2**20, "seconds": seconds}


def _package_commit() -> str | None:
    """Short commit of the checkout that ``noisycal_bayes`` is imported from."""
    import subprocess

    import noisycal_bayes

    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(noisycal_bayes.__file__).resolve().parent).stdout.strip() or None
    except Exception:  # noqa: BLE001 - not a git checkout
        return None


# ----------------------------------------------------------------------------------------------- comparison
def compare(now: dict, base: dict, tolerance: float = TOLERANCE) -> list[dict]:
    """One row per case present in both: the gated figure now and in the baseline, their ratio, the verdict."""
    rows = []
    for name, cur in now["cases"].items():
        old = base.get("cases", {}).get(name)
        if old is None:
            rows.append({"case": name, "verdict": "no baseline"})
            continue
        key = "peak_extra_mb" if "peak_extra_mb" in cur else "ratio"
        change = cur[key] / old[key]
        verdict = "FAIL" if change > 1 + tolerance else "faster: record the baseline again" \
            if change < 1 - tolerance else "ok"
        rows.append({"case": name, "figure": key, "now": cur[key], "baseline": old[key], "change": change,
                     "verdict": verdict})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=9, help="rounds of (reference, case) per case")
    ap.add_argument("--only", nargs="+", choices=list(CASES) + list(MEMORY_CASES), default=None)
    ap.add_argument("--record-baseline", action="store_true", help=f"write {BASELINE.name} instead of comparing")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    names = args.only or list(CASES) + list(MEMORY_CASES)
    info = machine()
    info["git_commit"] = _package_commit()  # of the code measured (PYTHONPATH may point at another checkout)
    reference = _reference()
    reference()
    t_start = time.perf_counter()
    cases = {}
    for name in names:
        t0 = time.perf_counter()
        cases[name] = memory_compress_1e7() if name in MEMORY_CASES else time_case(CASES[name], reference, args.reps)
        shown = {k: round(v, 4) for k, v in cases[name].items() if isinstance(v, float)}
        print(f"{name:<28s} {shown}  ({time.perf_counter() - t0:.0f} s)", flush=True)
        gc.collect()
    info["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result = {"benchmark": "gates", "machine": info, "tolerance": TOLERANCE, "reps": args.reps,
              "total_s": time.perf_counter() - t_start, "cases": cases}
    out = Path(args.out) if args.out else BASELINE if args.record_baseline else OUT
    if not args.record_baseline and BASELINE.exists():
        result["comparison"] = compare(result, json.loads(BASELINE.read_text()))
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out} ({result['total_s']:.0f} s)")
    failed = False
    for row in result.get("comparison", []):
        if "change" in row:
            print(f"  {row['case']:<28s} {row['figure']:<14s} now {row['now']:.4g}  baseline {row['baseline']:.4g}  "
                  f"x{row['change']:.3f}  {row['verdict']}")
        else:
            print(f"  {row['case']:<28s} {row['verdict']}")
        failed |= row["verdict"] == "FAIL"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
