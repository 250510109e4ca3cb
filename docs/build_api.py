"""Generate docs/api.md, the API reference, from the public docstrings.

Run ``python docs/build_api.py`` (the test suite runs it with ``check=True``: every public name must have
a docstring, otherwise the build fails — warnings are errors).
"""
from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

#: Modules whose ``__all__`` makes up the public API, in reading order.
MODULES = [
    "noisycal_bayes", "noisycal_bayes.data", "noisycal_bayes.reference", "noisycal_bayes.inference",
    "noisycal_bayes.models", "noisycal_bayes.propagate", "noisycal_bayes.recalibration", "noisycal_bayes.diagnostics",
    "noisycal_bayes.labels", "noisycal_bayes.simulate", "noisycal_bayes.plotting", "noisycal_bayes.warnings",
]


def _entries(module_name: str):
    mod = importlib.import_module(module_name)
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    for name in names:
        obj = getattr(mod, name)
        if inspect.ismodule(obj) or not (inspect.isclass(obj) or callable(obj)):
            continue
        yield name, obj


def build(check: bool = False) -> str:
    """Return the Markdown text; with ``check`` raise ``RuntimeError`` listing public names without docstrings."""
    lines = ["# API reference", "", "Generated from the docstrings by `docs/build_api.py`; do not edit by hand.", ""]
    missing, seen = [], set()
    for module_name in MODULES:
        entries = list(_entries(module_name))
        if not entries:
            continue
        lines += [f"## `{module_name}`", ""]
        for name, obj in entries:
            doc = inspect.getdoc(obj)
            if not doc:
                missing.append(f"{module_name}.{name}")
            key = id(obj)
            if key in seen:
                lines += [f"### `{name}`", "", f"See `{obj.__module__}.{obj.__qualname__}` above.", ""]
                continue
            seen.add(key)
            try:
                sig = str(inspect.signature(obj))
            except (TypeError, ValueError):
                sig = ""
            lines += [f"### `{name}{sig}`", "", doc or "", ""]
    if check and missing:
        raise RuntimeError(f"public names without a docstring: {missing}")
    return "\n".join(lines)


if __name__ == "__main__":
    out = Path(__file__).with_name("api.md")
    out.write_text(build(check="--check" in sys.argv))
    print(f"wrote {out}")
