"""Compiled programs saved across processes: their key, their file format, and the loader that never runs code.

A :class:`SavedProgram` stages a function (``jax.jit``, or ``jit`` of ``shard_map`` per device) and, when JAX's
persistent compilation cache is on, saves its ``jax.export`` form next to that cache, so that a new process
neither traces it again (NumPyro's NUTS, the EM loop) nor compiles it. Used by the NUTS sampler
(:mod:`._sampler`) and the EM (:mod:`.em`).

- *Key*: the static configuration, argument shapes and dtypes, the JAX / NumPyro versions, and every package
  source the function depends on, found by :func:`traced_sources` from the modules of the function and of the
  functions it closes over, and transitively from their import statements (no hand-kept list).
- *File* (``<cache>/noisycal_programs/<key>.ncprog``, folder 0o700, file 0o600): ``MAGIC``, the key digest,
  a JSON description of the output tree, then the ``jax.export`` flatbuffer. Loading parses data only (no
  pickle); a file with another header is refused with a :class:`RefusedProgramWarning` (once per folder),
  rebuilt and replaced.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
import warnings
from functools import lru_cache, partial
from pathlib import Path
from typing import NamedTuple

import jax
import jax.export
import numpy as np

_PACKAGE = __name__.split(".")[0]
_ROOT = Path(__file__).resolve().parent.parent  # the package folder


def _read_source(path: Path) -> bytes:
    """The bytes of one source file (a function of its own so that a test can stand in for an edit)."""
    return path.read_bytes()


@lru_cache(maxsize=None)
def _module_file(module: str) -> Path | None:
    """The source file of a package module (``pkg/__init__.py`` for a package), or None if not ours."""
    parts = module.split(".")
    if parts[0] != _PACKAGE:
        return None
    base = _ROOT.joinpath(*parts[1:])
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


_FROM_IMPORT = re.compile(rb"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)", re.M)
_IMPORT = re.compile(rb"^[ \t]*import[ \t]+([^\n#]+)", re.M)


def _imported_modules(module: str, source: bytes) -> set:
    """Package modules that ``module``'s source imports (anywhere in it, lazily inside functions too), read
    from its import statements (a regular expression over the text, far cheaper than a syntax tree, and
    never executed): ``import a.b``, ``from .x import y`` (``y`` too when it is a module). A module named in
    a docstring may be counted too, which only widens the key."""
    is_pkg = _module_file(module).name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]
    found = set()
    for m in _IMPORT.finditer(source):
        found.update(part.split()[0] for part in m.group(1).decode().split(",") if part.strip())
    for m in _FROM_IMPORT.finditer(source):
        where = m.group(1).decode()
        level = len(where) - len(where.lstrip("."))
        if level:
            base = package.split(".")
            base = base[:len(base) - (level - 1)]
            target = ".".join(base + ([where[level:]] if where[level:] else []))
        else:
            target = where
        found.add(target)
        names = m.group(2).decode().strip("()").replace("\\", " ").split(",")
        found.update(f"{target}.{n.split()[0]}" for n in names if n.split())
    # Every enclosing package's __init__ runs on import too.
    found |= {".".join(m.split(".")[:k]) for m in list(found) for k in range(1, m.count(".") + 1)}
    return {m for m in found if _module_file(m) is not None}


def _root_modules(fn) -> set:
    """Modules of ``fn`` and of every function it closes over or is partially applied to (recursively)."""
    seen, todo, modules = set(), [fn], set()
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, partial):
            todo += [obj.func, *obj.args, *obj.keywords.values()]
            continue
        if callable(obj) and getattr(obj, "__module__", None):
            modules.add(obj.__module__)
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                todo.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        todo += [v for v in (getattr(obj, "__defaults__", None) or ()) if callable(v)]
    return {m for m in modules if _module_file(m) is not None}


def traced_sources(fn) -> dict:
    """``{relative path: bytes}`` of every package source a saved program of ``fn`` depends on.

    Found automatically: the modules defining ``fn`` and the functions it closes over (e.g. the NumPyro
    model inside the NUTS kernel), then, transitively, every package module their code imports (read from
    the source, not executed), each package's ``__init__.py`` included. Editing any of them changes the key.
    """
    todo, done = list(_root_modules(fn)), {}
    while todo:
        module = todo.pop()
        path = _module_file(module)
        rel = path.relative_to(_ROOT).as_posix()
        if rel in done:
            continue
        done[rel] = _read_source(path)
        todo += sorted(_imported_modules(module, done[rel]))
    return dict(sorted(done.items()))


_SOURCES_MEMO: dict = {}  # root modules -> traced_sources, read once per process


def _sources_for(fn) -> dict:
    roots = frozenset(_root_modules(fn))
    if roots not in _SOURCES_MEMO:
        _SOURCES_MEMO[roots] = traced_sources(fn)
    return _SOURCES_MEMO[roots]


def saved_programs_dir() -> Path | None:
    """Where saved programs go: ``<JAX compilation cache>/noisycal_programs``, or None when the cache is off.

    Saving needs JAX's ``jax.export`` serialisation (the ``flatbuffers`` package); without it, None.
    """
    cache = jax.config.jax_compilation_cache_dir
    if not cache:
        return None
    if importlib.util.find_spec("flatbuffers") is None:  # needed by Exported.serialize
        return None
    return Path(cache) / "noisycal_programs"


def _digest(name, in_tree, avals, sources: dict) -> str:
    import numpyro

    h = hashlib.sha256()
    for part in (name, str(in_tree), [(a.shape, str(a.dtype)) for a in avals], jax.__version__,
                 jax.lib.__version__ if hasattr(jax.lib, "__version__") else "", numpyro.__version__):
        h.update(repr(part).encode())
    for rel, text in sources.items():
        h.update(rel.encode() + b"\0" + hashlib.sha256(text).digest())
    return h.hexdigest()[:32]


# ------------------------------------------------------------------------------------ the saved-program file
# Layout: MAGIC, the key digest (32 hex characters) and a newline; the length of the JSON tree description
# (8 bytes, big-endian) and that JSON; then the serialised jax.export program (a flatbuffer). Nothing in it is
# executed on load: the JSON is data and names only NamedTuple classes from modules already imported, and
# jax.export.deserialize reads a flatbuffer. (The former pickle files, `*.pkl`, are never read.)
MAGIC = b"NOISYCAL-PROGRAM-1\n"
SUFFIX = ".ncprog"
_WARNED: set = set()  # folders already warned about a refused file (warn once per folder)


class RefusedProgramWarning(RuntimeWarning):
    """A saved program file did not match its key or format and was ignored (the program is rebuilt)."""


def _describe(tree):
    """A JSON description of a pytree's structure (dicts, lists, tuples, NamedTuples, None, leaves)."""
    if tree is None:
        return {"none": None}
    if isinstance(tree, dict):
        keys = sorted(tree)
        if not all(isinstance(k, str) for k in keys):
            raise TypeError("only string dict keys are described")
        return {"dict": [[k, _describe(tree[k])] for k in keys]}
    if isinstance(tree, tuple) and hasattr(type(tree), "_fields"):
        cls = type(tree)
        return {"namedtuple": [cls.__module__, cls.__qualname__], "children": [_describe(c) for c in tree]}
    if isinstance(tree, (list, tuple)):
        return {type(tree).__name__: [_describe(c) for c in tree]}
    if jax.tree_util.all_leaves([tree]):
        return {"leaf": None}
    raise TypeError(f"cannot describe a pytree node of type {type(tree).__name__}")


def _skeleton(desc):
    """The structure described by :func:`_describe`, with ``0`` at the leaves (data only: no import, no call
    other than the constructor of a NamedTuple class that is already imported)."""
    kinds = [k for k in desc if k != "children"] if isinstance(desc, dict) else []
    if len(kinds) != 1:
        raise ValueError("malformed tree description")
    kind, value = kinds[0], desc[kinds[0]]
    if kind == "none":
        return None
    if kind == "leaf":
        return 0
    if kind == "dict":
        return {str(k): _skeleton(v) for k, v in value}
    if kind in ("list", "tuple"):
        items = [_skeleton(v) for v in value]
        return items if kind == "list" else tuple(items)
    module, qualname = value
    cls = sys.modules.get(str(module))
    for part in str(qualname).split("."):
        cls = getattr(cls, part, None)
    if kind != "namedtuple" or not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
        raise ValueError(f"unknown tree node {kind!r} {value!r}")
    return cls(*[_skeleton(v) for v in desc["children"]])


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, readable by the user only (folder 0o700, file 0o600)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.parent.stat().st_uid == os.getuid() and path.parent.stat().st_mode & 0o077:
        os.chmod(path.parent, 0o700)  # a folder made by an older version (or the umask) is made private too
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)  # atomic: a concurrent process sees the whole file or none


def _encode(digest: str, exported, out_tree_desc) -> bytes:
    tree = json.dumps(out_tree_desc, separators=(",", ":")).encode()
    return MAGIC + digest.encode() + b"\n" + len(tree).to_bytes(8, "big") + tree + bytes(exported.serialize())


def _refuse(path: Path, why: str) -> None:
    if path.parent not in _WARNED:
        _WARNED.add(path.parent)
        warnings.warn(f"ignored the saved program {path} ({why}); it is rebuilt and replaced. Saved programs are "
                      "checked against their key and never unpickled.", RefusedProgramWarning, stacklevel=4)


class _Staged(NamedTuple):
    """A staged function: ``call(*args)``, ``lower(*args)`` -> Lowered, ``out_info(*args)`` -> output shapes,
    ``from_compiled(compiled)`` -> a function like ``call`` that runs that executable."""
    call: object
    lower: object
    out_info: object
    from_compiled: object


class SavedProgram:
    """A function staged by ``stage`` (``jax.jit``, or ``jit`` of ``shard_map`` per device), saved across processes.

    Without a compilation cache directory this is just ``stage(fn)``. With one (see
    :func:`saved_programs_dir`), the first call traces ``fn`` once with ``jax.export`` and saves the result
    next to JAX's cache, keyed by the static configuration, the argument shapes and dtypes, the versions of
    JAX and NumPyro, and the package's traced sources. A later process loads it instead of tracing it again
    (NumPyro's NUTS, the EM loop), and JAX's persistent cache then supplies the compiled program: together they
    remove nearly all of the first fit's compile overhead. ``strip`` leading axes of each argument are mapped by ``stage``.
    """

    def __init__(self, fn, stage, strip: int, name: tuple):
        self.fn, self.stage, self.strip, self.name = fn, stage, strip, name
        self._call = None
        self.path = None  # the saved file, once built with a cache directory
        self._ahead = None  # an executable compiled ahead of the first call (compile_ahead)
        self.compiled = False  # True once a call has run the program

    def __call__(self, *args):
        staged = self._ensure(args)
        if self._ahead is not None:
            try:
                out = self._ahead(*args)
                self.compiled = True
                return out
            except (TypeError, ValueError):  # arguments unlike those compiled ahead: JAX's usual path instead
                self._ahead = None
        out = staged.call(*args)
        self.compiled = True
        return out

    def lower(self, *args):
        """``jax.stages.Lowered`` for ``args`` (arrays or ``jax.ShapeDtypeStruct``)."""
        return self._ensure(args).lower(*args)

    def compile_ahead(self, lowered) -> None:
        """Compile ``lowered`` (from :meth:`lower`) and serve later calls with it. XLA compiles without the GIL,
        so this can run in another thread; tracing (``lower``) must not, as NumPyro's handler stack is global."""
        try:
            self._ahead = self._call.from_compiled(lowered.compile())
        except Exception:  # noqa: BLE001 - only an optimisation: the first call compiles (and reports) as usual
            self._ahead = None

    def out_info(self, *args):
        """The outputs' shapes and dtypes for ``args`` (a tree of ``jax.ShapeDtypeStruct``), without compiling."""
        return self._ensure(args).out_info(*args)

    def _ensure(self, args):
        if self._call is None:
            self._call = self._build(args)
        return self._call

    def _build(self, args):
        folder = saved_programs_dir()
        if folder is None:
            staged = self.stage(self.fn)
            return _Staged(staged, staged.lower, lambda *a: staged.lower(*a).out_info, lambda compiled: compiled)
        leaves, in_tree = jax.tree.flatten(args)
        avals = [jax.ShapeDtypeStruct(np.shape(x)[self.strip:], x.dtype) for x in leaves]
        digest = _digest(self.name, in_tree, avals, _sources_for(self.fn))
        path = self.path = folder / f"{digest}{SUFFIX}"
        loaded = _load(path, digest)
        exported, out_tree = loaded if loaded is not None else self._export(path, digest, in_tree, avals)
        flat_call = self.stage(exported.call)

        def call(*a):
            return jax.tree.unflatten(out_tree, flat_call(*jax.tree.leaves(a)))

        def lower(*a):
            return flat_call.lower(*jax.tree.leaves(a))

        def from_compiled(compiled):
            return lambda *a: jax.tree.unflatten(out_tree, compiled(*jax.tree.leaves(a)))

        return _Staged(call, lower, lambda *a: jax.tree.unflatten(out_tree, lower(*a).out_info), from_compiled)

    def _export(self, path, digest, in_tree, avals):
        box = {}

        def flat(*xs):
            out = self.fn(*jax.tree.unflatten(in_tree, xs))
            leaves, box["out_tree"] = jax.tree.flatten(out)
            try:
                desc = _describe(out)
                box["desc"] = desc if jax.tree.structure(_skeleton(desc)) == box["out_tree"] else None
            except (TypeError, ValueError):
                box["desc"] = None
            return leaves

        exported = jax.export.export(jax.jit(flat, keep_unused=True))(*avals)
        if box["desc"] is None:  # an output this file format cannot describe: run it, do not save it
            return exported, box["out_tree"]
        try:
            _write_private(path, _encode(digest, exported, box["desc"]))
        except OSError as err:
            # Not fatal: this process runs the exported program anyway; only the next process traces again.
            warnings.warn(f"could not save the compiled {self.name[0]} program to {path.parent} ({err}); a new "
                          "process will trace it again. Point the compilation cache at a writable directory to keep "
                          "it.", RuntimeWarning, stacklevel=2)
        return exported, box["out_tree"]


def _load(path: Path, digest: str):
    """``(Exported, out_tree)`` saved at ``path`` for key ``digest``, or None (absent, or refused: it is then
    rebuilt and replaced). Nothing in the file is executed (see the layout above ``MAGIC``)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = MAGIC + digest.encode() + b"\n"
    if not data.startswith(head):
        _refuse(path, "not a saved program of this key" if data.startswith(MAGIC) else "unknown format")
        return None
    try:
        n = int.from_bytes(data[len(head):len(head) + 8], "big")
        start = len(head) + 8
        out_tree = jax.tree.structure(_skeleton(json.loads(data[start:start + n].decode())))
        return jax.export.deserialize(bytearray(data[start + n:])), out_tree
    except Exception as err:  # noqa: BLE001 - a corrupt or incompatible file is replaced, never trusted
        _refuse(path, f"unreadable: {type(err).__name__}")
        return None


