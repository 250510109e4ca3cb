"""The documentation site's sources (the build itself is `make docs`, run by .ci/run, not by the tests).

Cheap checks that do not run Sphinx: every public name has a docstring and a place in the generated API
reference; every package is in the reference or excluded with a reason; every docs page and every notebook
is in a toctree (no orphan pages, which Sphinx would only report at build time); the Sphinx configuration
reads every page; relative links in docs/*.md resolve.
"""
from __future__ import annotations

import fnmatch
import importlib
import importlib.util
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def conf():
    """docs/conf.py as a module (importing it sets no environment variables: that happens in its setup())."""
    spec = importlib.util.spec_from_file_location("docs_conf", DOCS / "conf.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _public_names(conf):
    """``(module, name, object)`` of every name the API reference must document."""
    for module_name in conf.API_MODULES:
        for name, obj in conf._public(module_name):
            yield module_name, name, obj


def test_every_public_callable_has_a_docstring(conf):
    missing = [f"{m}.{n}" for m, n, obj in _public_names(conf)
               if (inspect.isclass(obj) or callable(obj)) and not inspect.getdoc(obj)]
    assert not missing, f"public names without a docstring: {missing}"


def test_api_pages_document_every_public_name_once(conf):
    pages = conf.api_pages()
    assert set(pages) == {f"{m}.rst" for m in conf.API_MODULES} | {"noisycal_bayes.rst"}
    documented = {}
    for module_name in conf.API_MODULES:
        text = pages[f"{module_name}.rst"]
        for name in re.findall(r"^\.\. auto(?:class|function|exception|data):: (\w+)$", text, flags=re.M):
            documented.setdefault(f"{module_name}.{name}", 0)
            documented[f"{module_name}.{name}"] += 1
        linked = re.findall(r"^\.\. rubric:: (\w+)\n\nSee :py:obj:`([\w.]+)`", text, flags=re.M)
        for name, target in linked:  # a re-export points at a name that is documented
            assert target in documented, (module_name, name, target)
    assert all(v == 1 for v in documented.values())
    objects = {}
    for m, n, obj in _public_names(conf):
        objects.setdefault(id(obj), []).append(f"{m}.{n}")
    # Each public object is documented exactly once, under the first package that exports it.
    for names in objects.values():
        assert sum(name in documented for name in names) == 1, names
    assert "noisycal_bayes.inference.fit_nuts" in documented and "noisycal_bayes.core.nc_ece" not in objects


def test_top_level_names_link_to_their_pages(conf):
    import noisycal_bayes

    text = conf.api_pages()["noisycal_bayes.rst"]
    for name in noisycal_bayes.__all__:
        row = re.search(rf"\* - ``noisycal_bayes\.{name}``\n\s+- (.*)", text)
        assert row, name
        assert "(not documented)" not in row.group(1), name


def test_every_package_is_documented_or_excluded_with_a_reason(conf):
    import noisycal_bayes

    packages = {f"noisycal_bayes.{m.name}" for m in pkgutil.iter_modules(noisycal_bayes.__path__)
                if not m.name.startswith("_")}
    assert packages == set(conf.API_MODULES) | set(conf.API_EXCLUDED), \
        f"add to API_MODULES or API_EXCLUDED in docs/conf.py: {packages ^ (set(conf.API_MODULES) | set(conf.API_EXCLUDED))}"
    assert all(reason.strip() for reason in conf.API_EXCLUDED.values())


def test_api_page_lists_every_generated_page(conf):
    entries = _toctree_entries(DOCS / "api.md")
    assert entries == [f"api/{name[:-4]}" for name in conf.api_pages() if name == "noisycal_bayes.rst"] + \
        [f"api/{m}" for m in conf.API_MODULES]


def test_headerless_attribute_lists_get_a_section(conf):
    # The build repairs class docstrings that list fields without an "Attributes" header (see conf.py).
    lines = ["Result.", "", "value : float", "table : DataFrame, one row: ``a, b,", "    c`` (NaN if empty)", "",
             "More text."]
    conf._headerless_attributes(None, "class", "X", None, {}, lines)
    assert lines == ["Result.", "", "Attributes", "----------", "value", "    float", "table",
                     "    DataFrame, one row: ``a, b,", "    c`` (NaN if empty)", "", "More text."]
    proper = ["Result.", "", "Attributes", "----------", "value : float"]
    for what, doc in (("class", proper), ("function", ["f.", "", "x : int"])):
        before = list(doc)
        conf._headerless_attributes(None, what, "X", None, {}, doc)
        assert doc == before  # numpydoc docstrings and functions are left alone


def test_undocumented_public_methods_are_listed_but_not_fields(conf):
    class C:
        def method(self):
            pass

        @property
        def prop(self):
            return 1

        @classmethod
        def make(cls):
            return cls()

    keep = conf._keep_public_methods
    assert keep(None, "class", "method", C.__dict__["method"], True, {}) is False
    assert keep(None, "class", "prop", C.__dict__["prop"], True, {}) is False
    assert keep(None, "class", "make", C.__dict__["make"], True, {}) is False
    assert keep(None, "class", "field", None, True, {}) is None          # an undocumented data field stays out
    assert keep(None, "class", "_private", C.__dict__["method"], True, {}) is None
    assert keep(None, "module", "method", C.__dict__["method"], True, {}) is None


def test_inline_code_link_targets(conf):
    t = conf.link_targets()
    assert t["fit_nuts"] == t["noisycal_bayes.fit_nuts"] == "noisycal_bayes.inference.fit_nuts"
    assert t["Binning.equal_mass"] == "noisycal_bayes.data.Binning.equal_mass"
    assert t["load_demo"] == "noisycal_bayes.load_demo"  # top-level only: documented on the top-level page
    assert t["noisycal_bayes.inference"] == "noisycal_bayes.inference"
    assert "groups" not in t and "to_arviz" not in t  # not a public name; a bare method name is ambiguous
    match = conf._CODE_NAME.match("Binning.equal_width(k)")
    assert match and match.group(1) == "Binning.equal_width"
    assert conf._CODE_NAME.match("a + b") is None


# ------------------------------------------------------------------------------------------------ toctrees

def _toctree_entries(page: Path) -> list:
    """The entries of the ```{toctree} blocks of a MyST page, in order (options and blank lines skipped)."""
    out = []
    for block in re.findall(r"^```\{toctree\}[^\n]*\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M):
        out += [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith(":")]
    return out


def _orphans(docs: Path, sources: list, root_doc: str) -> list:
    """Sources (paths relative to the repository root, without suffix) that no toctree reaches from the root."""
    repo = docs.parent
    seen, todo = set(), [root_doc]
    while todo:
        doc = todo.pop()
        if doc in seen:
            continue
        seen.add(doc)
        page = repo / f"{doc}.md"
        if page.exists():
            for entry in _toctree_entries(page):
                todo.append((Path(doc).parent / entry).as_posix() if not entry.startswith("..")
                            else Path(repo / Path(doc).parent / entry).resolve().relative_to(repo.resolve()).as_posix())
    return sorted(s for s in sources if s not in seen)


def _sources(repo: Path, include_patterns: list) -> list:
    """Documents Sphinx reads: files matching ``include_patterns`` with a source suffix, without the suffix."""
    out = []
    for path in repo.rglob("*"):
        rel = path.relative_to(repo).as_posix()
        if path.suffix in (".md", ".ipynb") and any(fnmatch.fnmatchcase(rel, p) for p in include_patterns):
            out.append(rel[: -len(path.suffix)])
    return sorted(out)


def test_conf_reads_every_page_and_notebook(conf):
    sources = _sources(ROOT, conf.include_patterns)
    expected = ["README"] + [f"docs/{p.stem}" for p in DOCS.glob("*.md")] + \
        [f"notebooks/{p.stem}" for p in (ROOT / "notebooks").glob("*.ipynb")]
    assert sorted(expected) == sources
    assert conf.root_doc == "docs/index"


def test_no_orphan_pages(conf):
    orphans = _orphans(DOCS, _sources(ROOT, conf.include_patterns), conf.root_doc)
    assert not orphans, f"pages in no toctree (add them to a toctree in docs/index.md): {orphans}"


def test_the_orphan_check_can_fail(tmp_path):
    # Negative control: a page in no toctree, and a notebook only linked (not in a toctree), are reported.
    (tmp_path / "docs").mkdir()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\n[nb](../notebooks/b.ipynb)\n\n```{toctree}\n:hidden:\n\n"
                                                "guide\n../README\n```\n")
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n")
    (tmp_path / "docs" / "lost.md").write_text("# Lost\n")
    (tmp_path / "README.md").write_text("# Readme\n")
    (tmp_path / "notebooks" / "b.ipynb").write_text("{}")
    sources = _sources(tmp_path, ["README.md", "docs/*.md", "notebooks/*.ipynb"])
    assert sources == ["README", "docs/guide", "docs/index", "docs/lost", "notebooks/b"]
    assert _orphans(tmp_path / "docs", sources, "docs/index") == ["docs/lost", "notebooks/b"]


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


def test_ci_builds_the_site_after_the_tests():
    run = (ROOT / ".ci" / "run").read_text()
    steps = re.findall(r"^make ([\w-]+)(?: [A-Z_]+=\S+)*$", run, flags=re.M)
    # The tests, the golden corpus and the real-data matrix (a missing shared folder fails there), then the site.
    assert steps == ["test", "golden", "real-data", "docs", "smoke-py312"], steps
    assert "make real-data REQUIRE_DATA=1" in run
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^docs: .*\n\t.*sphinx -W --keep-going .*-c docs \. docs/_build/html$", make, flags=re.M)
    assert "/docs/_build/" in (ROOT / ".gitignore").read_text().splitlines()
