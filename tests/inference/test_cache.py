"""Tests for the saved compiled programs (noisycal_bayes/inference/_sampler.py, inference/cache.py): keys found
from the sources, one clear_cache(), and files that are checked, private and never executed."""
import pickle
import stat
from functools import partial
from pathlib import Path

import jax
import numpy as np
import pytest

from noisycal_bayes import fit_em
from noisycal_bayes.inference import _sampler, clear_cache, clear_sampler_cache
from noisycal_bayes.inference import _saved
from noisycal_bayes.inference import _em_loop as em_module
from noisycal_bayes.inference._common import bound_model
from noisycal_bayes.simulate import simulate_annotations
from noisycal_bayes.data import Binning

SIM = simulate_annotations(1500, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.75, 0.8], seed=12)


def _em_fn():
    return partial(em_module._run_all, n_annotators=3, n_groups=4, prior=None, max_iter=50)


def test_sources_are_found_from_the_imports_not_a_hand_list():
    em_sources = _saved.traced_sources(_em_fn())
    # The model package's __init__ (missed by the former hand list), the EM formulas and the module itself.
    for rel in ("models/__init__.py", "core/em.py", "core/likelihood.py", "inference/em.py", "core/starts.py"):
        assert rel in em_sources
    # A NumPyro model closed over by a sampler function: its module and what it imports are found.
    model = bound_model("grouped", {"n_groups": 2})
    sources = _saved.traced_sources(lambda *a: model(*a))
    assert {"models/dawid_skene.py", "models/priors.py", "models/__init__.py", "core/likelihood.py"} <= set(sources)
    assert "reference/em.py" not in sources and "cli.py" not in sources  # not imported: not in the key


def test_editing_a_model_definition_changes_the_key(monkeypatch):
    avals = [jax.ShapeDtypeStruct((4, 3), np.float64)]
    tree = jax.tree.structure((0,))
    fn = _em_fn()
    before = _saved._digest(("em",), tree, avals, _saved.traced_sources(fn))
    assert _saved._digest(("em",), tree, avals, _saved.traced_sources(fn)) == before  # deterministic
    real = _saved._read_source
    for rel in ("models/dawid_skene.py", "models/__init__.py", "core/em.py"):
        # Stand-in for an edit of that file: the same bytes plus one comment line.
        monkeypatch.setattr(_saved, "_read_source",
                            lambda path, rel=rel: real(path) + (b"\n# edited\n" if path.as_posix().endswith(rel) else b""))
        assert _saved._digest(("em",), tree, avals, _saved.traced_sources(fn)) != before, rel
    monkeypatch.setattr(_saved, "_read_source", real)


@pytest.fixture
def cache_dir(tmp_path):
    old = jax.config.jax_compilation_cache_dir
    kept = dict(em_module._EM_PROGRAMS)
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    em_module._EM_PROGRAMS.clear()
    _saved._WARNED.clear()
    try:
        yield tmp_path
    finally:
        jax.config.update("jax_compilation_cache_dir", old)
        em_module._EM_PROGRAMS.clear()
        em_module._EM_PROGRAMS.update(kept)


class _Plant:
    """Unpickling this creates ``marker`` (what a malicious file in a shared cache folder could do)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_saved_file_is_private_checked_and_a_planted_pickle_is_never_run(cache_dir):
    first = fit_em(SIM.data, groups=Binning.equal_mass(4), n_starts=3)
    (program,) = em_module._EM_PROGRAMS.values()
    path = program.path
    assert path.suffix == _saved.SUFFIX and path.read_bytes().startswith(_saved.MAGIC)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    marker = cache_dir / "marker"
    payload = pickle.dumps(_Plant(marker))
    pickle.loads(payload)  # the payload works: unpickling it creates the marker
    assert marker.exists()
    marker.unlink()
    # Plant it where the saved program is (and where the former format kept it).
    path.write_bytes(payload)
    path.with_suffix(".pkl").write_bytes(payload)
    clear_cache()
    with pytest.warns(_saved.RefusedProgramWarning, match="unknown format"):
        again = fit_em(SIM.data, groups=Binning.equal_mass(4), n_starts=3)
    assert not marker.exists()
    np.testing.assert_array_equal(again.point["fpr"], first.point["fpr"])
    assert path.read_bytes().startswith(_saved.MAGIC)  # rebuilt and replaced


def test_a_file_with_another_key_is_refused(cache_dir):
    first = fit_em(SIM.data, groups=Binning.equal_mass(4), n_starts=3)
    (program,) = em_module._EM_PROGRAMS.values()
    data = program.path.read_bytes()
    head = len(_saved.MAGIC)
    # A well-formed file whose header names another key (e.g. copied from another configuration).
    program.path.write_bytes(data[:head] + b"0" * 32 + data[head + 32:])
    clear_cache()
    with pytest.warns(_saved.RefusedProgramWarning, match="not a saved program of this key"):
        again = fit_em(SIM.data, groups=Binning.equal_mass(4), n_starts=3)
    np.testing.assert_array_equal(again.point["tpr"], first.point["tpr"])


def test_clear_cache_clears_sampler_and_em_programs(cache_dir):
    fit_em(SIM.data, groups=Binning.equal_mass(4), n_starts=3)
    _sampler._PROGRAMS["probe"] = object()
    assert em_module._EM_PROGRAMS
    clear_cache()
    assert not em_module._EM_PROGRAMS and "probe" not in _sampler._PROGRAMS
    fit_em(SIM.data, groups=Binning.equal_mass(4), n_starts=3)
    files = list((cache_dir / "noisycal_programs").glob("*" + _saved.SUFFIX))
    assert files
    clear_cache(files=True)
    assert not any(p.exists() for p in files)
    _sampler._PROGRAMS["probe"] = object()
    with pytest.warns(DeprecationWarning, match="clear_cache"):
        clear_sampler_cache()
    assert "probe" not in _sampler._PROGRAMS
    import noisycal_bayes

    assert noisycal_bayes.clear_cache is clear_cache
