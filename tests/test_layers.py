"""The package's layers import only downward (issue 15, item 3; DESIGN.md §5; STYLE.md "What to avoid").

Every module of ``noisycal_bayes`` is parsed with :mod:`ast` (nothing is imported or executed), and every import
it makes is checked against the layer map below: at module level, inside functions (a lazy import is still a
dependency), under ``if TYPE_CHECKING``, and ``importlib.import_module("...")`` calls with a literal name. A
module may import its own package, any lower layer, and nothing else: not a higher layer, and not another
package of its own layer (``inference`` and ``reference`` never import each other; ``recalibration``,
``labels`` and ``diagnostics`` never import each other), nor another package's private module (``propagate._draws``
from ``diagnostics``; ``_validation`` is the shared bottom layer, public to all). The test fails listing every
offending file, line and import, so one run shows all the work left.

The package root (``noisycal_bayes/__init__.py``) is the public facade: it may import anything, and only the
top layer may import it (``from . import __version__`` in the command line).

``core`` (formulas on arrays, and the array containers they read: ``core/tables.py``) is the lowest layer above
``_validation`` / ``warnings`` / ``_progress``, below ``data`` and ``simulate`` (DESIGN §5): the data layer builds
core's containers, never the other way round.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "noisycal_bayes"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

# Lowest first. Names in one tuple share a layer and must not import each other.
LAYERS = (
    ("_validation", "warnings", "_progress"),
    ("core",),                      # pure arrays: imports nothing of the package but the bottom layer
    ("data",),
    ("simulate",),
    ("models",),
    ("inference", "reference"),
    ("propagate",),
    ("recalibration", "labels", "diagnostics"),
    ("plotting",),
    ("report",),                    # renders an Evaluation it is handed; never imports evaluation
    ("evaluation", "evaluate"),
    ("cli", "experiments"),
)
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}
TOP = len(LAYERS) - 1


def unit_of(module):
    """The layer unit of a dotted module name inside the package (``None`` for the facade or outside it).

    >>> unit_of("noisycal_bayes.propagate._draws"), unit_of("noisycal_bayes"), unit_of("numpy")
    ('propagate', None, None)
    """
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) == 1:
        return None
    return parts[1]


def module_name(path):
    """Dotted name of a file of the package: ``noisycal_bayes/labels/issues.py`` -> ``noisycal_bayes.labels.issues``."""
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def resolve(importer, is_package, level, target):
    """Absolute name of ``from <'.' * level><target> import ...`` written in module ``importer``."""
    if level == 0:
        return target or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports_of(path):
    """``(line, imported module, source text)`` for every import written in one file of the package."""
    name = module_name(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, f"import {alias.name}") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = resolve(name, is_package, node.level, node.module)
            text = f"from {'.' * node.level}{node.module or ''} import {', '.join(a.name for a in node.names)}"
            if base == PACKAGE:
                # ``from .. import labels`` imports a subpackage; ``from . import __version__`` the facade.
                for alias in node.names:
                    sub = f"{PACKAGE}.{alias.name}"
                    target = sub if (ROOT / alias.name).is_dir() or (ROOT / f"{alias.name}.py").exists() else PACKAGE
                    found.append((node.lineno, target, text))
            else:
                found.append((node.lineno, base, text))
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                target = arg.value
                if target.startswith("."):
                    dots = len(target) - len(target.lstrip("."))
                    target = resolve(name, is_package, dots, target.lstrip(".") or None)
                found.append((node.lineno, target, f"import_module({arg.value!r})"))
    return found


def _is_import_module(func):
    return (isinstance(func, ast.Name) and func.id == "import_module") or (
        isinstance(func, ast.Attribute) and func.attr == "import_module")


def violation(importer, imported):
    """Why ``importer`` may not import ``imported`` (empty string when it may)."""
    if importer == PACKAGE:
        return ""                                 # the facade re-exports everything
    src, dst = unit_of(importer), unit_of(imported)
    if imported.split(".")[0] != PACKAGE or src == dst:
        return ""                                 # third-party, standard library or its own package
    if src not in LEVEL:
        return f"{src!r} is missing from the layer map in tests/test_layers.py"
    if dst is None:
        return "" if LEVEL[src] == TOP else "imports the package facade (only the top layer may)"
    if dst not in LEVEL:
        return f"{dst!r} is missing from the layer map in tests/test_layers.py"
    if LEVEL[dst] > LEVEL[src]:
        return f"layer {src!r} (level {LEVEL[src]}) imports the higher layer {dst!r} (level {LEVEL[dst]})"
    if LEVEL[dst] == LEVEL[src]:
        return f"{src!r} imports {dst!r} of the same layer"
    private = [part for part in imported.split(".")[2:] if part.startswith("_")]
    if private:
        return f"imports the private module {imported!r} of another package (make it public or move it)"
    return ""


def violations(units=None):
    """Every forbidden import in the package (or in the given top-level units only), as readable lines."""
    lines = []
    for path in sorted(ROOT.rglob("*.py")):
        importer = module_name(path)
        if units is not None and unit_of(importer) not in units:
            continue
        for line, imported, text in imports_of(path):
            why = violation(importer, imported)
            if why:
                lines.append(f"{path.relative_to(ROOT.parent)}:{line}: `{text}` -- {why}")
    return lines


def test_every_unit_is_in_the_layer_map():
    units = {p.stem for p in ROOT.iterdir() if (p.suffix == ".py" or (p / "__init__.py").exists())}
    units.discard("__init__")
    missing = sorted(units - set(LEVEL))
    assert not missing, f"add {missing} to LAYERS in tests/test_layers.py"


def test_imports_point_downward():
    found = violations()
    print("\n".join(found) or "no layer violations")
    assert not found, f"{len(found)} imports break the layering:\n" + "\n".join(found)


# The checker itself must be able to fail: each of these is a violation it has to report.
@pytest.mark.parametrize(("importer", "imported"), [
    ("noisycal_bayes.diagnostics.gaps", "noisycal_bayes.labels"),          # same layer
    ("noisycal_bayes.inference.em", "noisycal_bayes.reference.em"),        # same layer
    ("noisycal_bayes.inference.em", "noisycal_bayes.diagnostics"),         # upward
    ("noisycal_bayes.core.weights", "noisycal_bayes"),                     # the facade
    ("noisycal_bayes._validation", "noisycal_bayes.core.weights"),         # upward from the bottom
    ("noisycal_bayes.core.sparse", "noisycal_bayes.data.responses"),       # core is below data (DESIGN §5)
    ("noisycal_bayes.core.calibration", "noisycal_bayes.simulate"),        # and below simulate
    ("noisycal_bayes.diagnostics.gaps", "noisycal_bayes.propagate._draws"),  # another package's private module
])
def test_checker_reports_forbidden_imports(importer, imported):
    assert violation(importer, imported)


@pytest.mark.parametrize(("importer", "imported"), [
    ("noisycal_bayes.diagnostics.gaps", "noisycal_bayes.propagate.draws"),
    ("noisycal_bayes.propagate.nc_ece", "noisycal_bayes.propagate._sums"),
    ("noisycal_bayes.cli", "noisycal_bayes"),
    ("noisycal_bayes", "noisycal_bayes.cli"),
    ("noisycal_bayes.core.calibration", "numpy"),
    ("noisycal_bayes.data.annotations", "noisycal_bayes.core.tables"),
    ("noisycal_bayes.core.weights", "noisycal_bayes._validation"),
])
def test_checker_allows_downward_imports(importer, imported):
    assert not violation(importer, imported)


def test_checker_reads_lazy_and_relative_imports(tmp_path, monkeypatch):
    source = (
        "import importlib\n"
        "def f():\n"
        "    from ..propagate import _draws\n"
        "    return importlib.import_module('noisycal_bayes.labels')\n"
    )
    fake_root = tmp_path / PACKAGE
    (fake_root / "diagnostics").mkdir(parents=True)
    path = fake_root / "diagnostics" / "gaps.py"
    path.write_text(source)
    monkeypatch.setitem(globals(), "ROOT", fake_root)
    found = imports_of(path)
    assert [(line, target) for line, target, _ in found] == [
        (1, "importlib"), (3, "noisycal_bayes.propagate"), (4, "noisycal_bayes.labels")]
