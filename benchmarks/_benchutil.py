"""Shared helpers of the benchmark scripts: machine description, medians, tables, JSON output.

Every ``bench_*.py`` writes ``{"benchmark": name, "machine": {...}, "settings": {...}, "rows": [...]}`` where each
row is one flat dict (one configuration) with at least ``stage``, ``n_items``, ``n_annotators`` and ``median_s``.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _version(mod: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(mod)
    except Exception:  # noqa: BLE001 - not installed
        return None


def machine(start: bool = True) -> dict:
    """Python, library versions, platform, cores and load average (call again at the end: ``finish``)."""
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                   platform.processor())
    except OSError:
        cpu = platform.processor()
    return {
        "python": platform.python_version(),
        "jax": _version("jax"),
        "jaxlib": _version("jaxlib"),
        "numpy": _version("numpy"),
        "numpyro": _version("numpyro"),
        "pandas": _version("pandas"),
        "crowd_kit": _version("crowd-kit"),
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_avg_start": list(os.getloadavg()),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git_commit": _git_commit(),
    }


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent, timeout=10).stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def median(xs) -> float:
    return float(statistics.median(xs))


def timed(fn, *args, **kwargs):
    """``(result, seconds)`` of one call (perf_counter wall time)."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def sizes_arg(values) -> list[int]:
    return [int(float(v)) for v in values]


def print_table(rows: list[dict], cols: list[str]) -> None:
    """Fixed-width table of ``cols`` (missing keys print as blanks; floats with 4 significant digits)."""
    def fmt(v):
        if v is None:
            return ""
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    cells = [[fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(cols)]
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths)))
    sys.stdout.flush()


def write_json(name: str, machine_info: dict, settings: dict, rows: list[dict], out: str | None = None) -> Path:
    machine_info = dict(machine_info)
    machine_info["load_avg_end"] = list(os.getloadavg())
    machine_info["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    path = Path(out) if out else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "machine": machine_info, "settings": settings, "rows": rows}
    path.write_text(json.dumps(payload, indent=1, default=_default) + "\n")
    print(f"wrote {path}")
    return path


def _default(o):
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
