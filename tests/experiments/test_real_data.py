"""The real-data matrix at small sizes: ``noisycal-bayes evaluate``, both routes, on every shared data set.

Data: the shared data folder (its README gives sources and licences: CIFAR-10N, Wei et al. ICLR 2022, CC BY-NC
4.0, scores from cgnorthcutt/confidentlearning-reproduce, MIT; crowd_gold: Welinder et al. 2010, Snow et al.
2008; crowds: orchidproject/active-crowd-toolkit and ipeirotis/Get-Another-Label, Apache-2.0). The first
``N_ITEMS`` items of each set, crowds with synthetic scores drawn from gold
(:mod:`noisycal_bayes.experiments.real_data`). The full-size matrix is ``make real-data``
(``benchmarks/real_data_matrix.py``), run by CI.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes.cli import main
from noisycal_bayes.experiments.real_data import (REAL_SETS, SEPARATION, SHARED_DATA_ENV, SHARED_DATA_HINT,
                                                  _synthetic_probs, shared_data_dir, shared_data_path,
                                                  write_real_set)

N_ITEMS = 80
ROOT = shared_data_dir()
needs_data = pytest.mark.skipif(ROOT is None, reason=f"shared data folder not found: {SHARED_DATA_HINT}")


def test_shared_data_dir_follows_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path))
    assert shared_data_dir() == tmp_path
    assert shared_data_path("crowd_gold/rte.csv") is None  # the folder exists, the file does not
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="NOISYCAL_SHARED_DATA names .*absent"):
        shared_data_dir()
    with pytest.raises(KeyError, match="unknown real set 'nope'"):
        write_real_set("nope", tmp_path)


def test_synthetic_scores_follow_their_formula():
    # l_k = SEPARATION 1[k = y] + N(0, 1): the gold class's mean logit advantage over another class is
    # SEPARATION, estimated from 20,000 items within 4 standard errors (sd of a difference of two N(0, 1): sqrt 2).
    y = np.arange(20_000) % 3
    p = _synthetic_probs(y, 3, "test")
    logp = np.log(p)
    other = (y + 1) % 3
    adv = logp[np.arange(y.size), y] - logp[np.arange(y.size), other]
    assert abs(adv.mean() - SEPARATION) < 4 * np.sqrt(2 / y.size)
    np.testing.assert_array_equal(p, _synthetic_probs(y, 3, "test"))  # seeded by the name: reproducible


@needs_data
def test_write_real_set_keeps_every_label(tmp_path):
    info = write_real_set("zencrowd_us", tmp_path, n_items=N_ITEMS)
    src = pd.read_csv(ROOT / REAL_SETS["zencrowd_us"].path)
    keep = pd.unique(src["item"])[:N_ITEMS]
    written = pd.read_csv(info["args"][0])
    assert len(written) == src["item"].isin(keep).sum() == info["n_labels"]  # repeated rows kept
    assert info["n_items"] == N_ITEMS and info["synthetic_scores"]


#: The NUTS route of `make test` runs on one set of each dense design and on a binary crowd with repeated labels;
#: the others' NUTS runs are marked slow (`make test-all`), and CI's `make real-data` runs both routes on every set
#: at full size. The K-class sparse crowds' NUTS route (IBCC: 80 s on cf even at this size) is covered in
#: `make test` by tests/inference/test_ibcc_nuts.py and tests/test_evaluate_multiclass.py on small crowds.
NUTS_IN_MAKE_TEST = ("cifar10n_vehicle", "cifar10n_10class", "zencrowd_us")
#: EM runs left to `make test-all` (the K-class crowds' EM route runs in `make test` on ms and adult): 22 s.
EM_SLOW = ("cf",)
CASES = [pytest.param(name, route, marks=[pytest.mark.slow] if (route == "nuts" and name not in NUTS_IN_MAKE_TEST)
                      or (route == "em" and name in EM_SLOW) else [])
         for name in REAL_SETS for route in ("em", "nuts")]


@needs_data
@pytest.mark.parametrize("name, route", CASES)
def test_evaluate_runs_on_every_real_set(name, route, tmp_path, capsys):
    info = write_real_set(name, tmp_path, n_items=N_ITEMS)
    out = tmp_path / "out.json"
    # The NUTS route without its predictive checks here (they cost most of its time at this size, on a cold
    # compilation cache most of all); `make real-data` runs every check at full size in CI, and the EM route's
    # checks run here.
    small = ["--n-boot", "10"] if route == "em" else ["--chains", "1", "--warmup", "60", "--draws", "60",
                                                       "--no-checks"]
    code = main(["evaluate", *info["args"], "--method", route, "--json", str(out), *small])
    err = capsys.readouterr().err
    assert code == 0, err
    payload = json.loads(out.read_text())
    block = payload.get("nc_ece") or payload.get("top_label_nc_ece")
    assert block is not None and np.isfinite(block["value"]), payload.keys()
