"""The docs build: the API reference is generated from the docstrings with missing docstrings as errors,
and the committed docs/api.md is up to date; every relative link in docs/*.md points at a file."""
import importlib.util
import re
import warnings
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _builder():
    spec = importlib.util.spec_from_file_location("build_api", DOCS / "build_api.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_api_reference_builds_with_warnings_as_errors_and_is_current():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text = _builder().build(check=True)
    assert "### `nc_ece(" in text and "### `fit_nuts(" in text
    assert (DOCS / "api.md").read_text() == text, "docs/api.md is stale: run `python docs/build_api.py`"


def test_relative_links_in_docs_resolve():
    broken = []
    for page in DOCS.glob("*.md"):
        prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # links only, not code
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", prose):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.name} -> {target}")
    assert not broken, broken
