"""Generate docs/api.md, the API reference, from the public docstrings.

Run ``python docs/build_api.py`` (the test suite runs it with ``check=True``: every public name must have
a docstring, otherwise the build fails — warnings are errors; ``check_members=True``, or ``--check-members``
on the command line, requires one of every public method and property of a public class as well). Each class is followed by its public methods and properties (its own and those inherited from
the package's classes, not from Python's or a dependency's), with their signatures and the first line of
their docstrings. ``python docs/build_api.py OUT.md`` writes elsewhere (e.g. to check the build without
touching docs/api.md).
"""
from __future__ import annotations

import functools
import importlib
import inspect
import sys
from pathlib import Path

#: Modules whose ``__all__`` makes up the public API, in reading order.
MODULES = [
    "noisycal_bayes", "noisycal_bayes.data", "noisycal_bayes.core", "noisycal_bayes.reference", "noisycal_bayes.inference",
    "noisycal_bayes.models", "noisycal_bayes.propagate", "noisycal_bayes.recalibration", "noisycal_bayes.diagnostics",
    "noisycal_bayes.labels", "noisycal_bayes.evaluation", "noisycal_bayes.simulate", "noisycal_bayes.plotting", "noisycal_bayes.warnings",
]


def _entries(module_name: str):
    mod = importlib.import_module(module_name)
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    for name in names:
        obj = getattr(mod, name)
        if inspect.ismodule(obj) or not (inspect.isclass(obj) or callable(obj)):
            continue
        yield name, obj


def _signature(obj, *, drop_first: bool = False) -> str:
    """``(a, *, b=1)`` of a callable ("" when Python cannot tell); ``drop_first`` drops ``self`` / ``cls``."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""
    if drop_first:
        params = list(sig.parameters.values())[1:]
        sig = sig.replace(parameters=params)
    return str(sig)


def _members(cls):
    """``(name, kind, signature, docstring)`` of the public methods and properties of ``cls``, in definition
    order, from ``cls`` and its bases defined in this package (the first definition along the MRO wins)."""
    seen, out = set(), []
    for klass in inspect.getmro(cls):
        if not getattr(klass, "__module__", "").startswith("noisycal_bayes"):
            continue
        for name, raw in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            if isinstance(raw, (property, functools.cached_property)):
                func, kind, sig = raw.fget if isinstance(raw, property) else raw.func, "property", ""
            elif isinstance(raw, staticmethod):
                func, kind = raw.__func__, "static method"
                sig = _signature(func)
            elif isinstance(raw, classmethod):
                func, kind = raw.__func__, "class method"
                sig = _signature(func, drop_first=True)
            elif inspect.isfunction(raw):
                func, kind = raw, "method"
                sig = _signature(func, drop_first=True)
            else:  # fields, constants, nested classes: described in the class docstring
                continue
            seen.add(name)
            out.append((name, kind, sig, inspect.getdoc(func) or ""))
    return out


def _class_lines(qualname: str, cls, missing: list) -> list:
    """Markdown bullets for the members of ``cls``; members without a docstring go to ``missing``."""
    members = _members(cls)
    if not members:
        return []
    lines = ["Methods and properties:", ""]
    for name, kind, sig, doc in members:
        if not doc:
            missing.append(f"{qualname}.{name}")
        first = doc.strip().splitlines()[0] if doc.strip() else ""
        label = f"`.{name}`" if kind == "property" else f"`.{name}{sig}`"
        tag = "" if kind == "method" else f" ({kind})"
        lines.append(f"- {label}{tag} — {first}" if first else f"- {label}{tag}")
    return lines + [""]


def build(check: bool = False, check_members: bool = False) -> str:
    """Return the Markdown text.

    With ``check``, raise ``RuntimeError`` listing the public names without docstrings; with ``check_members``,
    the public methods and properties of public classes without docstrings as well.
    """
    lines = ["# API reference", "", "Generated from the docstrings by `docs/build_api.py`; do not edit by hand.", ""]
    missing, missing_members, seen = [], [], set()
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
            if inspect.isclass(obj):
                lines += _class_lines(f"{module_name}.{name}", obj, missing_members)
    if check and missing:
        raise RuntimeError(f"public names without a docstring: {missing}")
    if check_members and missing_members:
        raise RuntimeError(f"public methods / properties without a docstring: {missing_members}")
    return "\n".join(lines)


if __name__ == "__main__":
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = Path(paths[0]) if paths else Path(__file__).with_name("api.md")
    out.write_text(build(check="--check" in sys.argv, check_members="--check-members" in sys.argv))
    print(f"wrote {out}")
