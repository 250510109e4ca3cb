"""The real-data matrix: ``noisycal-bayes evaluate`` with both routes on every set of the shared data folder.

Each (set, route) runs the installed command line in its own process, as a user would, on the files that
:func:`noisycal_bayes.experiments.real_data.write_real_set` writes (crowds get synthetic scores drawn from
gold; that module's docstring says how; sources and licences are in the shared data README). The run fails
(exit 1) when any command exits non-zero, prints an internal error or a traceback, or takes longer than
``--timeout``; the table and ``benchmarks/results/real_data_matrix.json`` record exit code, wall time, the
headline interval and beside it the reference-label ECE: plug-in (``reference_ece``) and on the headline's target
(``reference_ece_debiased`` with its interval ``reference_lower``, ``reference_upper``;
:func:`~noisycal_bayes.experiments.real_data.reference_figures`). Why most crowd intervals still sit below it:
docs/crowds.md, *Synthetic scores for the crowds* (``benchmarks/real_data_reference.py``).

    python benchmarks/real_data_matrix.py                      # every set, both routes, full size (make real-data)
    python benchmarks/real_data_matrix.py --n-items 300        # small sizes
    python benchmarks/real_data_matrix.py --require-data       # CI: a missing shared data folder is a failure

Without the shared data folder (``$NOISYCAL_SHARED_DATA`` or ``../shared/data`` beside the checkout) it says
so and exits 0, unless ``--require-data`` is given (then 1).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from noisycal_bayes.experiments.real_data import (REAL_SETS, REFERENCE_KEYS, SHARED_DATA_ENV, shared_data_dir,
                                                  write_real_set)

HERE = Path(__file__).resolve().parent
ROUTES = ("em", "nuts")
#: NUTS settings of the matrix: two chains of 300 warm-up and 300 draws (the checks and propagation run as
#: by default); the full default (4 x 1000 / 1000) is the user's, the matrix guards the path end to end.
NUTS_ARGS = ["--chains", "2", "--warmup", "300", "--draws", "300"]
#: EM settings of the matrix: 50 bootstrap replicates (default 200). The bootstrap's refits dominate the EM
#: route's time on the large sparse crowds (sp, adult, zencrowd_us), and the matrix guards the path, not the width.
EM_ARGS = ["--n-boot", "50"]


def _headline(payload: dict) -> tuple:
    """(value, lower, upper) of the headline NC-ECE in a result JSON (binary: nc_ece; K: top-label)."""
    for key in ("nc_ece", "top_label_nc_ece"):
        block = payload.get(key)
        if isinstance(block, dict) and "value" in block:
            return block.get("value"), block.get("lower"), block.get("upper")
    return None, None, None


def run_one(name: str, route: str, work: Path, *, n_items, timeout: float, extra: list, exe: str) -> dict:
    info = write_real_set(name, work / name, n_items=n_items)
    out_json = work / f"{name}_{route}.json"
    argv = [exe, "evaluate", *info["args"], "--method", route, "--json", str(out_json), *extra]
    argv += NUTS_ARGS if route == "nuts" else EM_ARGS
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        code, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, err = -1, f"timed out after {timeout:.0f} s\n{(exc.stderr or b'')[-2000:]!r}"
    wall = time.perf_counter() - t0
    row = {k: info[k] for k in ("n_items", "n_classes", "n_annotators", "n_labels", *REFERENCE_KEYS,
                                "reference", "synthetic_scores")}
    row.update(set=name, route=route, exit_code=code, wall_s=round(wall, 2), value=None, lower=None, upper=None)
    bad = code != 0 or "internal error" in err or "Traceback" in err
    if not bad and out_json.is_file():
        payload = json.loads(out_json.read_text())
        row["value"], row["lower"], row["upper"] = _headline(payload)
        checks = payload.get("checks")
        rows_ = checks if isinstance(checks, list) else (checks or {}).get("table", []) if isinstance(checks, dict) else []
        row["checks"] = {r.get("name"): r.get("status") for r in rows_ if isinstance(r, dict)}
    row["ok"] = not bad
    row["stderr_tail"] = "\n".join(err.strip().splitlines()[-6:])
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(REAL_SETS), help="comma-separated set names (default: all)")
    ap.add_argument("--routes", default=",".join(ROUTES))
    ap.add_argument("--n-items", type=int, default=None, help="first N items of each set (default: all)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per command (default 1800)")
    ap.add_argument("--require-data", action="store_true", help="a missing shared data folder is a failure (CI)")
    ap.add_argument("--out", default=str(HERE / "results" / "real_data_matrix.json"))
    ap.add_argument("--exe", default=str(Path(sys.executable).with_name("noisycal-bayes")))
    args = ap.parse_args(argv)
    root = shared_data_dir()
    if root is None:
        print(f"real-data matrix: no shared data folder (set {SHARED_DATA_ENV} or clone beside shared/): "
              + ("FAILED (--require-data)." if args.require_data else "nothing run."))
        return 1 if args.require_data else 0
    sets = [s for s in args.sets.split(",") if s]
    missing = [s for s in sets if not (root / REAL_SETS[s].path).is_file()]
    if missing:
        print(f"real-data matrix: missing from {root}: {missing}")
        if args.require_data:
            return 1
        sets = [s for s in sets if s not in missing]
    rows = []
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name in sets:
            for route in args.routes.split(","):
                row = run_one(name, route, Path(tmp), n_items=args.n_items, timeout=args.timeout, extra=[],
                              exe=args.exe)
                rows.append(row)
                iv = ("" if row["lower"] is None else
                      f"{row['value']:.4f} [{row['lower']:.4f}, {row['upper']:.4f}]")
                print(f"{'ok  ' if row['ok'] else 'FAIL'} {name:17s} {route:4s} {row['wall_s']:7.1f} s  "
                      f"K={row['n_classes']:<2d} n={row['n_items']:<6d} NC-ECE {iv:28s} "
                      f"ref {row['reference_ece']:.4f} (debiased {row['reference_ece_debiased']:.4f})", flush=True)
                if not row["ok"]:
                    print("      " + row["stderr_tail"].replace("\n", "\n      "), flush=True)
    total = time.perf_counter() - t_all
    n_bad = sum(not r["ok"] for r in rows)
    result = dict(n_items=args.n_items, total_wall_s=round(total, 1), n_failed=n_bad, rows=rows,
                  nuts_args=NUTS_ARGS, em_args=EM_ARGS, cpu_count=os.cpu_count())
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"real-data matrix: {len(rows) - n_bad} of {len(rows)} runs ok in {total:.0f} s; results in {args.out}")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
