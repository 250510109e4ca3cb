"""Import cost: ``import noisycal_bayes`` in fresh processes, what it pulls in, and the first heavy name.

Usage::

    python benchmarks/bench_import.py [--reps 7] [--top 15] [--out FILE] [--quick]

Each measurement is a NEW interpreter (``sys.executable -c ...``, the same virtual environment), so nothing is
cached in memory; the operating system's file cache is warm after the first run (one untimed warm-up run is
made first). Stages (rows):

- ``python``: ``python -c "pass"`` (the interpreter's own start-up), for reference;
- ``import``: ``import noisycal_bayes`` (the time measured inside the child with ``time.perf_counter``
  around the import, and the child's whole wall time from the parent as ``process_median_s``);
- ``import_fit_em``: ``import noisycal_bayes; noisycal_bayes.fit_em`` (the lazy attribute loads the Bayesian
  layer: jax, numpyro);
- ``import_posterior_nc_ece``: ``noisycal_bayes.posterior_nc_ece`` (the propagation layer).

For ``import`` the child also reports which heavy modules (jax, numpyro, arviz, matplotlib, scipy, pandas,
xarray, sklearn, dask) ended up in ``sys.modules`` and how many modules were loaded. ``python -X importtime``
of ``import noisycal_bayes`` gives the top modules by cumulative time (``importtime_top``, one extra run).
Results: ``benchmarks/results/bench_import.json``; rows have ``n_items = 0`` and ``n_annotators = 0``
(no data involved).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchutil import machine, median, print_table, timed, write_json  # noqa: E402

HEAVY = ["jax", "numpyro", "arviz", "matplotlib", "scipy", "pandas", "xarray", "sklearn", "dask"]
ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import sys, time, json
t0 = time.perf_counter()
{stmt}
t = time.perf_counter() - t0
print(json.dumps({{"s": t, "heavy": [m for m in {heavy!r} if m in sys.modules], "n_modules": len(sys.modules)}}))
"""

STAGES = {
    "python": "pass",
    "import": "import noisycal_bayes",
    "import_fit_em": "import noisycal_bayes; noisycal_bayes.fit_em",
    "import_posterior_nc_ece": "import noisycal_bayes; noisycal_bayes.posterior_nc_ece",
}


def run_child(stmt: str) -> tuple[dict, float]:
    code = CHILD.format(stmt=stmt, heavy=HEAVY)
    proc, wall = timed(subprocess.run, [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def importtime(top: int) -> list[dict]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import noisycal_bayes"], capture_output=True,
                          text=True, cwd=ROOT, check=True)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        parts = line.split("|")
        self_us, cum_us, mod = int(parts[0].split(":")[1]), int(parts[1]), parts[2]
        depth = (len(mod) - len(mod.lstrip())) // 2
        rows.append({"module": mod.strip(), "self_s": self_us / 1e6, "cumulative_s": cum_us / 1e6, "depth": depth})
    total = max((r["cumulative_s"] for r in rows), default=0.0)
    top_rows = sorted(rows, key=lambda r: -r["cumulative_s"])[:top]
    # Top-level packages (the first dotted component) by their outermost cumulative time.
    by_pkg: dict[str, float] = {}
    for r in rows:
        pkg = r["module"].split(".")[0]
        by_pkg[pkg] = max(by_pkg.get(pkg, 0.0), r["cumulative_s"])
    return top_rows, total, sorted(by_pkg.items(), key=lambda kv: -kv[1])[:top]


def goals(rows) -> list[dict]:
    """Issue 6: heavy modules imported lazily where it helps (jax, numpyro, arviz, matplotlib not on import)."""
    out = []
    for r in rows:
        if r["stage"] == "import":
            eager = [m for m in ("jax", "numpyro", "arviz", "matplotlib") if m in r["heavy_modules_loaded"]]
            out.append({"goal": "import noisycal_bayes loads none of jax, numpyro, arviz, matplotlib",
                        "value": f"{r['median_s']:.2f} s; loaded: {', '.join(r['heavy_modules_loaded']) or 'none'}",
                        "met": not eager})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--sizes", nargs="*", default=[], help="ignored (no data); kept for a uniform interface")
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="2 repeats, output to a scratch file")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.out = 2, args.out or "/tmp/bench_import_quick.json"
    info = machine()
    print(f"python {info['python']}, jax {info['jax']}, {info['cores']} cores, load {info['load_avg_start']}")
    for stmt in STAGES.values():  # warm the file cache
        run_child(stmt)
    samples = {k: [] for k in STAGES}
    walls = {k: [] for k in STAGES}
    last = {}
    for _ in range(args.reps):  # interleaved, so that drifting load hits every stage alike
        for stage, stmt in STAGES.items():
            child, wall = run_child(stmt)
            samples[stage].append(child["s"])
            walls[stage].append(wall)
            last[stage] = child
    rows = []
    for stage in STAGES:
        rows.append({"stage": stage, "n_items": 0, "n_annotators": 0, "statement": STAGES[stage],
                     "median_s": median(samples[stage]), "times_s": samples[stage], "reps": args.reps,
                     "process_median_s": median(walls[stage]), "process_times_s": walls[stage],
                     "heavy_modules_loaded": last[stage]["heavy"], "n_modules": last[stage]["n_modules"]})
    base = rows[0]["process_median_s"]
    for r in rows:
        r["process_minus_python_s"] = r["process_median_s"] - base
    top_rows, total, by_pkg = importtime(args.top)
    print_table(rows, ["stage", "median_s", "process_median_s", "process_minus_python_s", "n_modules"])
    for r in rows:
        print(f"  {r['stage']}: heavy modules loaded: {', '.join(r['heavy_modules_loaded']) or '-'}")
    print(f"\n-X importtime (import noisycal_bayes, total {total:.3f} s), top packages by cumulative time:")
    for pkg, s in by_pkg:
        print(f"  {pkg:<24} {s:.3f} s")
    settings = {"goals": goals(rows), "reps": args.reps, "importtime_total_s": total, "importtime_top": top_rows,
                "importtime_by_package": [{"package": p, "cumulative_s": s} for p, s in by_pkg],
                "heavy_checked": HEAVY}
    write_json("bench_import", info, settings, rows, args.out)


if __name__ == "__main__":
    main()
