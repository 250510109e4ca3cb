"""Determinism: the same seed gives identical results in one process and across processes; different seeds
give different random outputs (but the same point estimates); no global random state is read or changed.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from noisycal_bayes import simulate_annotations

from ._determinism import fingerprint
from ._helpers import run_cli
from noisycal_bayes.data import Binning

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # implied by test_global_random_state_is_neither_read_nor_changed (same results after reseeding)
def test_same_seed_gives_identical_results_in_one_process(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    a, b = fingerprint(tmp_path / "a"), fingerprint(tmp_path / "b")
    assert a == b  # bitwise: floats compared through their exact repr
    assert a["cli_exit"] == 0


@pytest.mark.slow  # 16 s wall (a second interpreter); the in-process check stays in the default run; make test-all runs it
def test_same_seed_gives_identical_results_in_another_process(tmp_path):
    """A fresh interpreter with another hash seed (so set/dict iteration orders of strings differ)."""
    (tmp_path / "here").mkdir(), (tmp_path / "there").mkdir()
    here = fingerprint(tmp_path / "here")
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "12345" if os.environ.get("PYTHONHASHSEED") != "12345" else "54321"
    # Reuse the suite's persistent compilation cache (tests/conftest.py) so the child skips most compiling.
    env["JAX_COMPILATION_CACHE_DIR"] = str(REPO / ".pytest_cache" / "jax")
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.5"
    proc = subprocess.run([sys.executable, "-m", "tests.reliability._determinism", str(tmp_path / "there")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    there = json.loads(proc.stdout.strip().splitlines()[-1])
    assert there == json.loads(json.dumps(here))


@pytest.mark.slow  # 7 s CPU; make test-all runs it
def test_different_seeds_give_different_draws_but_the_same_estimates(tmp_path):
    from noisycal_bayes.inference import em_starts, fit_em
    from noisycal_bayes.propagate import posterior_nc_ece
    from noisycal_bayes.reference import bootstrap_nc_ece

    a, b = (simulate_annotations(300, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], seed=s) for s in (1, 2))
    assert not np.array_equal(a.data.labels, b.data.labels) and not np.array_equal(a.data.scores, b.data.scores)
    data = a.data
    assert not np.array_equal(em_starts(3, 4, 5, seed=1)[0], em_starts(3, 4, 5, seed=2)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = [fit_em(data, groups=Binning.equal_mass(4), n_starts=5, seed=s) for s in (1, 2)]
        # Different starts, same maximum: EM stops within ~1e-8 steps (see test_fuzz_cli for the 1e-6 bound).
        np.testing.assert_allclose(fits[0].channel.fpr, fits[1].channel.fpr, atol=1e-6)
        np.testing.assert_allclose(fits[0].channel.tpr, fits[1].channel.tpr, atol=1e-6)
        boots = [bootstrap_nc_ece(data, estimator=lambda d: a.channel, n_boot=15, seed=s).replicates for s in (1, 2)]
        assert not np.array_equal(*boots)
        posts = [posterior_nc_ece(data, fits[0], seed=s, n_draws=50).draws for s in (1, 2)]
        assert not np.array_equal(*posts)
    long = data.to_long()
    long[["item", "annotator", "label"]].to_csv(tmp_path / "ann.csv", index=False)
    long.drop_duplicates("item")[["item", "score"]].to_csv(tmp_path / "scores.csv", index=False)
    results = []
    for s in (1, 2):
        code, out, err = run_cli(["evaluate", tmp_path / "ann.csv", "--scores", tmp_path / "scores.csv", "--method",
                                  "em", "--groups", 4, "--n-boot", 10, "--seed", s, "--json", tmp_path / f"{s}.json"])
        assert code == 0, err
        results.append(json.loads((tmp_path / f"{s}.json").read_text())["nc_ece"])
    assert abs(results[0]["value"] - results[1]["value"]) < 1e-6  # the estimate does not depend on the seed
    assert (results[0]["lower"], results[0]["upper"]) != (results[1]["lower"], results[1]["upper"])


@pytest.mark.slow  # three NUTS fits (12 s in a fresh-clone CI run); same seed, same draws stays in the default run
# (test_global_random_state_is_neither_read_nor_changed compares two fits); make test-all adds another seed
def test_nuts_draws_depend_only_on_the_seed(tiny_bad_nuts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b, c = tiny_bad_nuts(0), tiny_bad_nuts(0), tiny_bad_nuts(1)
    for name in ("fpr", "tpr", "prevalence"):
        np.testing.assert_array_equal(a.draws[name], b.draws[name])
    assert not np.array_equal(a.draws["fpr"], c.draws["fpr"])


def _global_state():
    import jax

    np_state = np.random.get_state()
    return (np_state[0], np_state[1].copy(), *np_state[2:]), random.getstate(), bool(jax.config.jax_enable_x64)


def _same_state(s, t) -> bool:
    (n1, py1, x1), (n2, py2, x2) = s, t
    return (n1[0] == n2[0] and np.array_equal(n1[1], n2[1]) and n1[2:] == n2[2:] and py1 == py2 and x1 == x2)


def test_global_random_state_is_neither_read_nor_changed(tmp_path, tiny_bad_nuts):
    """Seed the global generators, run everything, check they did not move; reseed differently, same results."""
    from noisycal_bayes import nc_ece
    from noisycal_bayes.labels import label_issues
    from noisycal_bayes.recalibration import TemperatureScaling

    def battery(folder):
        folder.mkdir()
        fp = fingerprint(folder)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nuts = tiny_bad_nuts(0)
            sim = simulate_annotations(200, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], seed=9)
            t = TemperatureScaling().fit(sim.data.scores, sim.data, channel=sim.channel).temperature_
            issues = label_issues(sim.data, seed=3)["p_majority_wrong"].to_numpy()
        return fp, nuts.draws["fpr"], t, issues, nc_ece(sim.data, sim.channel).value

    np.random.seed(123)
    random.seed(123)
    before = _global_state()
    first = battery(tmp_path / "a")
    assert _same_state(before, _global_state()), "numpy's or Python's global random state (or JAX x64) changed"
    np.random.seed(999)
    random.seed(999)
    second = battery(tmp_path / "b")
    assert first[0] == second[0]
    for x, y in zip(first[1:], second[1:]):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("seed_arg", [7, np.int64(7)])
def test_simulator_seeds_are_explicit(seed_arg):
    a = simulate_annotations(50, fpr=[0.1, 0.2], tpr=[0.9, 0.8], seed=seed_arg)
    b = simulate_annotations(50, fpr=[0.1, 0.2], tpr=[0.9, 0.8], seed=np.random.default_rng(7))
    np.testing.assert_array_equal(a.data.labels, b.data.labels)
    np.testing.assert_array_equal(a.data.scores, b.data.scores)
