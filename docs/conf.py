"""Sphinx configuration of the documentation site (``make docs``).

The source directory is the repository root, restricted by ``include_patterns`` to ``README.md``, the pages in
``docs/`` and the notebooks in ``notebooks/``: the pages keep the relative links they have on GitHub
(``../notebooks/01_cifar10n_posterior.ipynb``, ``../README.md``) and Sphinx resolves the same links. Build with::

    python -m sphinx -W --keep-going -b html -c docs . docs/_build/html

The notebooks (and the executable pages, e.g. ``docs/arviz_plots.md``) are executed at build by myst-nb at the
notebooks' small size (``NOISYCAL_NB_SMALL=1``, the size the test suite runs them at; ``NOISYCAL_NB_SMALL=0``
builds them at full size). Results are kept in myst-nb's cache (``docs/_build/.jupyter_cache``): a rebuild
executes only the notebooks whose code changed.

The tests execute the same notebooks (tests/test_notebooks.py); the site executes them again rather than
reusing outputs that a test left behind, so the site never shows results of code other than what it builds
from. That costs about 1.5 minutes of a cold build (the whole cold build measured 2 min 25 s to 2 min 31 s
on the 2-core machine while other jobs loaded it, budget 5 minutes); the shared JAX compilation cache
(:func:`_kernel_environment`) cuts the compile part, and myst-nb's cache makes local rebuilds cheap
(``nb_execution_mode = "cache"``; a fresh clone, as in CI, executes everything).

The API reference (``docs/api.md`` and the pages ``docs/api/*.rst`` it lists, written at each build by
:func:`api_pages`, not kept in git) is generated from the docstrings by autodoc, their sections rendered by
numpydoc; the packages are :data:`API_MODULES`, each documented by its ``__all__``.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import re
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: Packages whose ``__all__`` makes up the public API, in reading order (each gets a page). The top-level
#: ``noisycal_bayes`` re-exports names from these; its page links each name to its page here.
API_MODULES = [
    "noisycal_bayes.data", "noisycal_bayes.core", "noisycal_bayes.inference", "noisycal_bayes.models",
    "noisycal_bayes.propagate", "noisycal_bayes.recalibration", "noisycal_bayes.diagnostics", "noisycal_bayes.labels",
    "noisycal_bayes.evaluation", "noisycal_bayes.reference", "noisycal_bayes.simulate", "noisycal_bayes.plotting",
    "noisycal_bayes.report", "noisycal_bayes.warnings",
]
#: Packages left out of the API reference, and why (tests/test_docs.py checks every other package is listed).
API_EXCLUDED = {
    "noisycal_bayes.cli": "the command line, documented in docs/cli.md",
    # Its docstrings do not parse as numpydoc yet (cifar10n_table: descriptions in the type slot, no blank line
    # before "Raises"); the experiments and the code behind each row are described in docs/experiments.md.
    "noisycal_bayes.experiments": "the paper's experiments, described in docs/experiments.md",
}

import noisycal_bayes  # noqa: E402

project = "noisycal_bayes"
author = "noisycal_bayes contributors"
copyright = "2026, noisycal_bayes contributors"
release = version = noisycal_bayes.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "numpydoc",
    "sphinx.ext.mathjax",
]

root_doc = "docs/index"
include_patterns = ["README.md", "docs/*.md", "docs/api/*.rst", "notebooks/*.ipynb"]
exclude_patterns = ["docs/_build", "**/.ipynb_checkpoints", ".venv*"]

# --- MyST and notebooks
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 6  # `cli.md#input-files` style links, as GitHub renders them
nb_execution_mode = "cache"
nb_execution_cache_path = str(ROOT / "docs" / "_build" / ".jupyter_cache")
nb_execution_timeout = 900
nb_execution_raise_on_error = True  # a failing cell fails the build (and names the cell)
nb_execution_show_tb = True
nb_merge_streams = True

# --- API reference
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "none"  # the signatures carry them; the docstrings give types with shapes
autodoc_member_order = "bysource"
autodoc_preserve_defaults = True
autoclass_content = "class"
numpydoc_show_class_members = False  # autodoc's :members: documents them, once
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
suppress_warnings = ["myst.header"]  # pages start at "# Title" and may skip a level inside tables of numbers

API_DIR = ROOT / "docs" / "api"


def _public(module_name: str) -> list:
    """``(name, object)`` of a module's public API: its ``__all__``, or its public classes and functions."""
    import inspect

    mod = importlib.import_module(module_name)
    names = getattr(mod, "__all__", None) or [n for n, o in vars(mod).items() if not n.startswith("_")
                                               and (inspect.isclass(o) or inspect.isfunction(o))
                                               and getattr(o, "__module__", "") == module_name]
    return [(n, getattr(mod, n)) for n in names if not inspect.ismodule(getattr(mod, n))]


def _directive(obj) -> str:
    import inspect

    if inspect.isclass(obj):
        return "autoexception" if issubclass(obj, BaseException) else "autoclass"
    if callable(obj) and (inspect.isfunction(obj) or inspect.isbuiltin(obj) or hasattr(obj, "__wrapped__")):
        return "autofunction"
    return "autodata"


def api_pages() -> dict:
    """``{file name: reST text}`` of the API reference: one page per module of :data:`API_MODULES`, each
    public name documented by autodoc on the page of the first module that exports it, and an index page
    of the top-level ``noisycal_bayes`` names with links to where they are documented."""
    pages, home = {}, {}
    for module_name in API_MODULES:
        title = f"``{module_name}``"
        lines = [title, "=" * len(title), "", f".. automodule:: {module_name}", "   :no-members:", "",
                 f".. currentmodule:: {module_name}", ""]
        for name, obj in _public(module_name):
            if id(obj) in home:  # re-exported from an earlier package: link there, do not document twice
                lines += [f".. rubric:: {name}", "", f"See :py:obj:`{home[id(obj)]}`.", ""]
                continue
            home[id(obj)] = f"{module_name}.{name}"
            kind = _directive(obj)
            lines += [f".. {kind}:: {name}"] + (["   :no-value:"] if kind == "autodata" else []) + [""]
        pages[f"{module_name}.rst"] = "\n".join(lines)
    lines = ["``noisycal_bayes``", "==================", "", ".. automodule:: noisycal_bayes", "   :no-members:", "",
             "``import noisycal_bayes`` gives these names (the JAX-based ones are loaded on first use); each is "
             "documented on the page of the package that defines it.", "", ".. list-table::", "   :header-rows: 1",
             "", "   * - name", "     - documented as"]
    own = []
    for name in noisycal_bayes.__all__:
        obj = getattr(noisycal_bayes, name)
        if isinstance(obj, type(noisycal_bayes)):
            target = (f":py:mod:`{obj.__name__}`" if obj.__name__ in API_MODULES
                      else API_EXCLUDED.get(obj.__name__, "(not documented)"))
        elif id(obj) in home:
            target = f":py:obj:`{home[id(obj)]}`"
        else:  # exported only at the top level (e.g. the loaders): documented on this page, below the table
            own.append((name, obj))
            target = f":py:obj:`noisycal_bayes.{name}`"
        lines += [f"   * - ``noisycal_bayes.{name}``", f"     - {target}"]
    if own:
        lines += ["", "Defined at the top level", "------------------------", "", ".. currentmodule:: noisycal_bayes", ""]
        for name, obj in own:
            kind = _directive(obj)
            lines += [f".. {kind}:: {name}"] + (["   :no-value:"] if kind == "autodata" else []) + [""]
    pages["noisycal_bayes.rst"] = "\n".join(lines) + "\n"
    return pages


@functools.lru_cache(maxsize=None)
def link_targets() -> dict:
    """``{text of inline code: API object}`` for the prose pages: each public name (``fit_nuts``,
    ``noisycal_bayes.fit_nuts``, ``noisycal_bayes.inference.fit_nuts``) and each public method or property of a
    public class (``Binning.equal_mass``), pointing at where the API reference documents it. A short name that
    two different objects share is left out (ambiguous)."""
    import noisycal_bayes

    home, short = {}, {}
    for module_name in API_MODULES:
        for name, obj in _public(module_name):
            home.setdefault(id(obj), (f"{module_name}.{name}", obj))
    for name in noisycal_bayes.__all__:  # names only the top level exports are documented there
        obj = getattr(noisycal_bayes, name)
        if not isinstance(obj, type(noisycal_bayes)):
            home.setdefault(id(obj), (f"noisycal_bayes.{name}", obj))
    out = {}
    for target, obj in home.values():
        name = target.rsplit(".", 1)[1]
        short.setdefault(name, set()).add(target)
        out[target] = target
        out[f"noisycal_bayes.{name}"] = target
        if inspect.isclass(obj):
            for member in vars(obj):
                if not member.startswith("_"):
                    short.setdefault(f"{name}.{member}", set()).add(f"{target}.{member}")
    out.update({k: next(iter(v)) for k, v in short.items() if len(v) == 1})
    for module_name in API_MODULES:
        out[module_name] = module_name
    return out


_CODE_NAME = re.compile(r"^([A-Za-z_][\w.]*)(\(.*\))?$")


def _link_api_names(app, doctree, docname):
    """Link inline code that names a public object (``fit_nuts``, ``fit_nuts(data, ...)``,
    ``Binning.equal_mass(5)``) in the prose pages and notebooks to its entry in the API reference.

    The Markdown stays plain (it reads the same on GitHub); the links exist on the site only. Runs on each
    page's doctree after reading, before references are resolved; unknown names stay plain code.
    """
    from docutils import nodes
    from sphinx.addnodes import pending_xref

    if docname.startswith("docs/api"):
        return
    targets = link_targets()
    for node in list(doctree.findall(nodes.literal)):
        if isinstance(node.parent, (nodes.reference, pending_xref)) or isinstance(node, nodes.literal_block):
            continue
        match = _CODE_NAME.match(node.astext().strip())
        target = targets.get(match.group(1)) if match else None
        if target is None:
            continue
        ref = pending_xref("", refdomain="py", reftype="obj", reftarget=target, refexplicit=True, refwarn=False,
                           refdoc=docname)
        node.replace_self(ref)
        ref += node


def _write_api_pages(app):
    """Write the API pages into docs/api/ (generated, not in git), touching only files whose text changed
    so that an incremental build re-reads only those."""
    API_DIR.mkdir(exist_ok=True)
    pages = api_pages()
    for stale in set(p.name for p in API_DIR.glob("*.rst")) - set(pages):
        (API_DIR / stale).unlink()
    for name, text in pages.items():
        path = API_DIR / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


_FIELD = re.compile(r"^[A-Za-z_]\w* : \S")
_HEADER = re.compile(r"^-{3,}\s*$")


def _headerless_attributes(app, what, name, obj, options, lines):
    """Give an "Attributes" header to a class docstring whose field list follows the summary without one.

    A few result classes (e.g. ``NCECEResult``, ``ModelComparison``) list their fields as ``name : type`` lines
    right after the summary paragraph, without the numpydoc header; reST then reads them as a broken definition
    list. Only a class docstring with no section header at all, whose second paragraph starts with such a line,
    is changed: the header is added and each ``name : text`` becomes ``name`` with ``text`` as its description.
    Runs before numpydoc (priority 400 < 500), in place. Fixing those docstrings makes this a no-op.
    """
    if what not in ("class", "exception") or any(_HEADER.match(line) for line in lines):
        return
    try:
        start = lines.index("") + 1
    except ValueError:
        return
    if start >= len(lines) or not _FIELD.match(lines[start]):
        return
    # The text after " : " there is a description (often with a comma, or a ``literal`` that continues on the
    # next, indented line), not a type: it goes to the description, under the name.
    end = next((k for k in range(start, len(lines)) if not lines[k].strip()), len(lines))
    block = ["Attributes", "----------"]
    for line in lines[start:end]:
        if _FIELD.match(line):
            field, _, rest = line.partition(" : ")
            block += [field, "    " + rest]
        else:
            block.append(line)
    lines[start:end] = block


def _keep_public_methods(app, what, name, obj, skip, options):
    """List every public method and property of a class, with a docstring or not (a bare signature still
    says it exists); undocumented data fields stay out (a class's "Attributes" section describes them)."""
    if what in ("class", "exception") and skip and not name.startswith("_"):
        raw = obj.__func__ if isinstance(obj, (classmethod, staticmethod)) else obj
        if isinstance(obj, property) or inspect.isfunction(raw) or inspect.ismethod(raw):
            return False
    return None


def _kernel_environment():
    """Environment of the notebook kernels (a kernel inherits this process's environment): the notebooks'
    small mode unless asked otherwise, a persistent JAX compilation cache, and no ArviZ 0.23 import-time
    FutureWarning in the rendered output. Set when Sphinx loads this file, not on import (the tests import it).

    The cache is the test suite's (``.pytest_cache/jax``, where tests/test_notebooks.py runs the same
    notebooks at the same size): after ``make test``, as in .ci/run, the build reuses the NUTS programs the
    tests compiled (measured: the ArviZ page executed in 22 s instead of 51 s, the four pages in 91 s
    instead of 117 s, on a loaded 2-core machine); without it the build compiles them itself.
    """
    # The kernels import the package of this tree, as Sphinx does (sys.path above), whatever is installed.
    others = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *others])
    os.environ.setdefault("NOISYCAL_NB_SMALL", "1")
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(ROOT / ".pytest_cache" / "jax"))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend draws the figures into the pages


def setup(app):
    _kernel_environment()
    app.connect("builder-inited", _write_api_pages)
    app.connect("autodoc-process-docstring", _headerless_attributes, priority=400)
    app.connect("autodoc-skip-member", _keep_public_methods)
    app.connect("doctree-read", lambda app, doctree: _link_api_names(app, doctree, app.env.docname))


# --- HTML
html_theme = "pydata_sphinx_theme"
html_title = f"noisycal_bayes {release}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path = []
html_extra_path = ["_root"]  # index.html at the top of the site, forwarding to docs/index.html
