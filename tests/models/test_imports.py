"""The layers this helper's refactor relies on (issue 15, item 1): FitResult and the EM rules sit low enough
that neither fitting layer imports the other, and neither imports ``diagnostics`` (which sits above them).

Imports are read from the sources (the reader of ``inference/_saved.py``, which also keys saved programs), so
lazy imports inside functions count too.
"""
from pathlib import Path

import pytest

import noisycal_bayes
from noisycal_bayes.inference._saved import _imported_modules

ROOT = Path(noisycal_bayes.__file__).parent


def _imports(package: str) -> dict:
    out = {}
    for path in sorted((ROOT / package).glob("*.py")):
        module = f"noisycal_bayes.{package}" + ("" if path.name == "__init__.py" else f".{path.stem}")
        out[path.name] = _imported_modules(module, path.read_bytes())
    return out


@pytest.mark.parametrize("package, forbidden", [
    ("core", ("models", "inference", "reference", "diagnostics", "data.design")),
    ("models", ("inference", "reference", "diagnostics")),
    ("inference", ("reference", "diagnostics", "propagate")),
    ("reference", ("inference", "diagnostics", "propagate")),
])
def test_no_upward_or_sideways_import(package, forbidden):
    bad = {name: sorted(m for m in mods if any(m == f"noisycal_bayes.{f}" or m.startswith(f"noisycal_bayes.{f}.")
                                                 for f in forbidden))
           for name, mods in _imports(package).items()}
    assert not {k: v for k, v in bad.items() if v}


def test_the_reader_sees_lazy_imports():
    # A control: the reader must find an import written inside a function (reference/_estimated.py imports
    # .em lazily), or the test above could pass vacuously.
    assert "noisycal_bayes.reference.em" in _imports("reference")["_estimated.py"]
