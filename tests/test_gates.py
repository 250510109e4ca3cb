"""benchmarks/gates.py: the verdicts of the comparison with the baseline (the timing run itself is `make gates`)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _gates():
    spec = importlib.util.spec_from_file_location("gates", ROOT / "benchmarks" / "gates.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ratio_gated_at_ten_percent_either_way():
    gates = _gates()
    base = {"cases": {"a": {"ratio": 1.0}, "b": {"ratio": 1.0}, "c": {"ratio": 1.0},
                      "m": {"peak_extra_mb": 100.0, "seconds": 1.0}}}
    now = {"cases": {"a": {"ratio": 1.09}, "b": {"ratio": 1.11}, "c": {"ratio": 0.85},
                     "m": {"peak_extra_mb": 120.0, "seconds": 0.1}, "new": {"ratio": 2.0}}}
    verdict = {row["case"]: row["verdict"] for row in gates.compare(now, base)}
    assert verdict == {"a": "ok", "b": "FAIL", "c": "faster: record the baseline again", "m": "FAIL",
                       "new": "no baseline"}


def test_every_case_is_in_the_stored_baseline():
    import json

    gates = _gates()
    baseline = json.loads((ROOT / "benchmarks" / "results" / "gates_baseline.json").read_text())
    assert set(baseline["cases"]) == set(gates.CASES) | set(gates.MEMORY_CASES)
