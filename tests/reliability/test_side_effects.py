"""No side effects: inputs are never modified, nothing is written unless asked, no network access.

Every public entry point is called on caller-owned, writable objects; each object is compared with a deep
copy afterwards. File-system checks run in an empty working folder and list everything in it afterwards.
Network checks replace the socket layer with one that records and refuses every attempt.
"""
from __future__ import annotations

import copy
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes import AnnotationSet, Channel, ece, nc_ece, simulate_annotations, smece

from ._helpers import run_cli, tree
from noisycal_bayes.data import Binning

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(300, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], curve="overconfident", missing=0.1,
                                seed=17)


def assert_unchanged(obj, snapshot, name, *, caller_owned=True):
    if isinstance(obj, pd.DataFrame):
        pd.testing.assert_frame_equal(obj, snapshot, check_exact=True, obj=name)
    elif isinstance(obj, pd.Series):
        pd.testing.assert_series_equal(obj, snapshot, check_exact=True, obj=name)
    elif isinstance(obj, np.ndarray):
        assert obj.flags.writeable or not caller_owned, f"{name}: the caller's array was made read-only"
        np.testing.assert_array_equal(obj, snapshot, err_msg=name)
        assert obj.dtype == snapshot.dtype, name
    elif isinstance(obj, dict):
        assert obj.keys() == snapshot.keys(), name
        for k in obj:
            assert_unchanged(obj[k], snapshot[k], f"{name}[{k!r}]", caller_owned=caller_owned)
    else:
        assert obj == snapshot, name


class Watch:
    """Deep copies of caller objects, checked on exit."""

    def __init__(self, **objects):
        self.objects = objects
        self.copies = {k: copy.deepcopy(v) for k, v in objects.items()}

    def check(self):
        for k, v in self.objects.items():
            assert_unchanged(v, self.copies[k], k)


# ---------------------------------------------------------------------------------------------- inputs never modified
def test_constructors_and_metrics_leave_their_inputs_alone(sim):
    long = sim.data.to_long()
    long["annotator"] = long["annotator"].map({0: "a", 1: "b", 2: "c"})
    long = long.sample(frac=1.0, random_state=0)  # a non-trivial index
    scores = pd.Series(sim.data.scores.copy(), index=pd.Index(sim.data.item_ids, dtype=object))
    wide = pd.DataFrame(np.where(sim.data.labels < 0, np.nan, sim.data.labels), columns=["a", "b", "c"])
    nullable = wide.astype("Int64")
    labels = sim.data.labels.copy()
    z = sim.data.scores.copy()
    y = sim.clean_labels.copy()
    q = sim.data.vote_fraction().copy()
    fpr, tpr = np.array([0.1, 0.2, 0.15]), np.array([0.9, 0.8, 0.85])
    w = np.array([1.0, 2.0, 3.0])
    edges = np.array([0.0, 0.25, 0.5, 1.0])
    watch = Watch(long=long, scores=scores, wide=wide, nullable=nullable, labels=labels, z=z, y=y, q=q, fpr=fpr,
                  tpr=tpr, w=w, edges=edges)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        AnnotationSet.from_long(long, scores)
        AnnotationSet.from_long(long.drop(columns="score"), scores.reset_index().set_axis(["item", "score"], axis=1))
        AnnotationSet.from_wide(wide, z)
        AnnotationSet.from_wide(nullable, z)
        data = AnnotationSet.from_wide(labels, z)
        ch = Channel(fpr, tpr)
        for weights in ("iv", "equal", w):
            nc_ece(data, ch, weights=weights)
        nc_ece(data, ch, edges=edges)
        ece(z, y)
        smece(z, q)
        data.with_scores(z)
        data.subset(np.arange(10))
    watch.check()


def test_fits_and_downstream_functions_leave_their_inputs_alone(sim):
    from noisycal_bayes.data import compress_patterns, resolve_groups
    from noisycal_bayes.inference import fit_em
    from noisycal_bayes.labels import item_posteriors, label_issues
    from noisycal_bayes.propagate import posterior_nc_ece
    from noisycal_bayes.recalibration import PlattScaling, ProjectedHistogram, TemperatureScaling
    from noisycal_bayes.reference import bootstrap_nc_ece, fit_gmm
    from noisycal_bayes.reference import fit_em as reference_fit_em

    data = sim.data
    z = data.scores.copy()
    groups = resolve_groups(z, Binning.equal_mass(4), data.n_items)[0].astype(np.int64)
    labels = data.labels.copy()
    starts = tuple(np.array(a) for a in ([[0.2, 0.2, 0.2]], [[0.8, 0.8, 0.8]], [[0.3, 0.4, 0.5, 0.6]]))
    y_vote = data.majority_vote().astype(np.float64)
    watch = Watch(z=z, groups=groups, labels=labels, starts=dict(enumerate(starts)), y_vote=y_vote)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = reference_fit_em(data, groups=groups, starts=starts)
        fit = fit_em(data, groups=groups, starts=starts)
        fit_gmm(data, groups, n_starts=1)
        point = copy.deepcopy(fit.point)
        bootstrap_nc_ece(data, estimator=lambda d: ref.channel, n_boot=5, seed=0)
        posterior_nc_ece(data, fit, n_draws=20)
        item_posteriors(data, fit)
        label_issues(data, fit)
        compress_patterns(labels, groups, 4)
        for cls in (TemperatureScaling, PlattScaling, ProjectedHistogram):
            m = cls().fit(z, data, channel=ref.channel)
            m.predict(z)
            cls().fit(z, y_vote)
    watch.check()
    assert_unchanged(fit.point, point, "fit.point", caller_owned=False)


def test_posterior_draws_are_not_modified_downstream(tiny_bad_nuts):
    from noisycal_bayes.labels import item_posteriors
    from noisycal_bayes.propagate import posterior_nc_ece

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = tiny_bad_nuts(0)
        draws = copy.deepcopy(fit.draws)
        data = AnnotationSet(fit.details["labels"], fit.details["scores"],
                             np.arange(fit.details["labels"].shape[0]).astype(object), np.arange(3).astype(object))
        posterior_nc_ece(data, fit, n_draws=20)
        item_posteriors(data, fit)
        fit.summary()
    assert_unchanged(fit.draws, draws, "fit.draws", caller_owned=False)


def test_loaders_and_the_command_line_leave_input_files_alone(sim, tmp_path):
    long = sim.data.to_long()
    long[["item", "annotator", "label"]].to_csv(tmp_path / "ann.csv", index=False)
    long.drop_duplicates("item")[["item", "score"]].to_csv(tmp_path / "scores.csv", index=False)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tmp_path / "ann.csv", tmp_path / "scores.csv")}
    code, out, err = run_cli(["evaluate", tmp_path / "ann.csv", "--scores", tmp_path / "scores.csv", "--method", "em",
                              "--groups", 4, "--n-boot", 3])
    assert code == 0, err
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before} == before


# ---------------------------------------------------------------------------------------------- nothing written unless asked
def test_nothing_is_written_unless_asked(sim, tmp_path, monkeypatch):
    from noisycal_bayes.inference import fit_em
    from noisycal_bayes.labels import label_issues
    from noisycal_bayes.propagate import posterior_nc_ece
    from noisycal_bayes.reference import bootstrap_nc_ece

    inputs = tmp_path / "inputs"
    inputs.mkdir()
    long = sim.data.to_long()
    long[["item", "annotator", "label"]].to_csv(inputs / "ann.csv", index=False)
    long.drop_duplicates("item")[["item", "score"]].to_csv(inputs / "scores.csv", index=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = sim.data
        fit = fit_em(data, groups=Binning.equal_mass(4))
        nc_ece(data, fit.channel)
        bootstrap_nc_ece(data, estimator=lambda d: fit.channel, n_boot=3)
        posterior_nc_ece(data, fit, n_draws=20)
        label_issues(data, fit)
        fit.summary()
    for argv in (["evaluate", inputs / "ann.csv", "--scores", inputs / "scores.csv", "--method", "em", "--groups", 4,
                  "--n-boot", 3],
                 ["evaluate", inputs / "ann.csv", "--scores", inputs / "scores.csv", "--method", "em", "--bins", 0]):
        run_cli(argv)
    assert tree(work) == {}, "written without being asked"
    assert sorted(tree(inputs)) == ["ann.csv", "scores.csv"]
    # Asked for: exactly the requested files, in the requested places.
    code, out, err = run_cli(["recalibrate", inputs / "ann.csv", "--scores", inputs / "scores.csv", "--map",
                              "temperature", "--groups", 4, "--save", "map.json"])
    assert code == 0, err
    code, out, err = run_cli(["apply", "map.json", inputs / "scores.csv"])  # to standard output
    assert code == 0, err
    assert sorted(tree(work)) == ["map.json"]


def _console(args, *, home: Path, env_extra: dict):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_", "NOISYCAL_"))}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), MPLCONFIGDIR=str(home / "mpl"), **env_extra)
    return subprocess.run([sys.executable, "-m", "noisycal_bayes.cli", *args], cwd=home, env=env,
                          capture_output=True, text=True, timeout=120)


def test_console_script_writes_nothing_with_the_cache_opted_out(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    proc = _console(["--version"], home=home, env_extra={"NOISYCAL_JAX_CACHE": ""})
    assert proc.returncode == 0, proc.stderr
    assert not [p for p in tree(home) if not p.startswith("mpl")], tree(home)


def test_console_script_writes_only_its_documented_cache_and_opts_out(tmp_path):
    # The console entry point keeps JAX's compilation cache in ~/.cache/noisycal_bayes/jax by default
    # (issue 6: "enabled by the package, documented, opt-out"); that cache is the only thing it may write
    # unasked (the opt-out is tested above).
    home = tmp_path / "home"
    home.mkdir()
    proc = _console(["--version"], home=home, env_extra={})
    assert proc.returncode == 0, proc.stderr
    written = [p for p in tree(home) if not p.startswith("mpl")]
    assert all(p == ".cache" or p.startswith(".cache/noisycal_bayes") for p in written), written


# ---------------------------------------------------------------------------------------------- no network
@pytest.fixture
def no_network(monkeypatch):
    """Refuse (and record) every attempt to resolve a name or open a connection."""
    attempts = []

    def refuse(what):
        def _refuse(*args, **kwargs):
            attempts.append((what, args[1:] if what.startswith("socket.") else args))
            raise OSError(f"network access attempted: {what}{args[1:] if what.startswith('socket.') else args}")
        return _refuse

    monkeypatch.setattr(socket.socket, "connect", refuse("socket.connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("socket.connect_ex"))
    monkeypatch.setattr(socket.socket, "sendto", refuse("socket.sendto"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(socket, "gethostbyname", refuse("gethostbyname"))
    return attempts


def test_no_network_access_during_fits_and_the_command_line(sim, tmp_path, no_network, tiny_bad_nuts):
    from noisycal_bayes.inference import fit_em
    from noisycal_bayes.propagate import posterior_nc_ece
    from noisycal_bayes.reference import bootstrap_nc_ece

    # The guard works: a connection attempt is refused and recorded.
    with pytest.raises(OSError, match="network access attempted"):
        socket.create_connection(("example.org", 80))
    no_network.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_em(sim.data, groups=Binning.equal_mass(4))
        bootstrap_nc_ece(sim.data, estimator=lambda d: fit.channel, n_boot=3)
        posterior_nc_ece(sim.data, fit, n_draws=20)
        tiny_bad_nuts(0).to_arviz()
    long = sim.data.to_long()
    long[["item", "annotator", "label"]].to_csv(tmp_path / "ann.csv", index=False)
    long.drop_duplicates("item")[["item", "score"]].to_csv(tmp_path / "scores.csv", index=False)
    code, out, err = run_cli(["evaluate", tmp_path / "ann.csv", "--scores", tmp_path / "scores.csv", "--method", "em",
                              "--groups", 4, "--n-boot", 3, "--out", tmp_path / "report", "--json", tmp_path / "r.json"])
    assert code == 0, err
    assert no_network == []
