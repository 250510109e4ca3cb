"""Tiny runs of the paper's experiments (noisycal_bayes/experiments): each runs, and its qualitative
conclusion holds with a tolerance derived from its own Monte Carlo / bootstrap standard error.

False-alarm budget: every comparison below is a one-sided z test at 1e-3 (z = 3.09), so the five
statistical checks together false-alarm with probability below 0.5% even if they were independent. The
seeds are fixed, so a run is deterministic; the budget says how often a correct implementation would
have failed at a random seed.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from noisycal_bayes.experiments import (cifar10n_table, gaussian_recalibration, simulate_gaussian, summarise_gaussian,
                                        summarise_toy, toy_ece)
from noisycal_bayes.experiments._common import population_binned_ece
from noisycal_bayes.experiments.cifar10n import ENV_VAR, cifar10n_path
from noisycal_bayes.experiments.real_data import shared_data_path
from noisycal_bayes.simulate import CURVES

Z = 3.09  # one-sided normal quantile at 1e-3
# The real data set is not bundled: NOISYCAL_CIFAR10N names it, else the shared data folder's copy.
CIFAR10N = Path(os.environ.get(ENV_VAR) or shared_data_path("cifar10n_vehicle.csv") or "cifar10n_vehicle.csv")


def test_population_binned_ece_reference_values():
    # By hand for Z ~ U(0, 1): calibrated -> 0; m(z) = z + 0.1 is clipped only on [0.9, 1], where
    # E[min(z + .1, 1) - z | bin] = E[1 - z] = 0.05, so ECE = 0.9 * 0.1 + 0.1 * 0.05 = 0.095.
    assert population_binned_ece(CURVES["calibrated"]) == pytest.approx(0.0, abs=1e-12)
    assert population_binned_ece(CURVES["shifted"]) == pytest.approx(0.095, abs=1e-9)


def test_toy_error_falls_with_sample_size():
    # Paper §6.1 / Figure 1: NC-ECE error falls with N. Known channels (no EM), so 40 reps are cheap.
    rows = toy_ece(conditions=("shifted",), sizes=(250, 8000), n_reps=40, estimators=("known",), seed=1)
    s = summarise_toy(rows).set_index("n_items")
    diff = s.loc[250, "mae_x100"] - s.loc[8000, "mae_x100"]
    se = np.hypot(s.loc[250, "mae_se_x100"], s.loc[8000, "mae_se_x100"])
    assert diff > Z * se, (diff, se)
    assert np.allclose(rows["target"], 0.095, atol=1e-9)


def test_toy_estimated_channels_close_to_supplied_and_all_variants_run():
    # Paper §6.1: estimated channels perform close to supplied ones. Paired per repetition, the mean
    # difference of absolute errors (reuse - known) must lie within Z standard errors of 0 plus a margin of
    # 1.0 (x100) that the paper's "close" allows (channel-estimation error is real, not zero).
    rows = toy_ece(conditions=("calibrated",), sizes=(2000,), n_reps=6, n_starts=2, seed=2)
    assert set(rows["estimator"]) == {"known", "independent", "reuse", "cross_fit"}
    assert rows["failure"].eq("").all() and np.isfinite(rows["estimate"]).all()
    wide = rows.pivot(index="rep", columns="estimator", values="abs_error") * 100
    d = wide["reuse"] - wide["known"]
    assert abs(d.mean()) <= 1.0 + Z * d.std(ddof=1) / np.sqrt(d.size), d.describe()


def test_gaussian_corrected_beats_naive_and_tracks_oracle():
    # Appendix G.2 / Table 5: corrected fits approach the oracle, naive (soft-vote) fits are worse in L1(m).
    rows = gaussian_recalibration(sizes=(3000,), n_reps=4, maps=("temperature", "platt"), seed=3)
    wide = rows.pivot_table(index="rep", columns=["map", "fit"], values="l1")
    for kind in ("temperature", "platt"):
        d = wide[(kind, "naive")] - wide[(kind, "corrected")]
        assert d.mean() > Z * d.std(ddof=1) / np.sqrt(d.size), (kind, d.tolist())
    t = summarise_gaussian(rows)
    assert set(t["fit"]) == {"none", "corrected", "naive", "oracle"}


def test_simulate_gaussian_curve_matches_labels():
    # m(Z) is P(Y = 1 | Z): the mean of Y - m(Z) is 0 within Z standard errors (sd <= 0.5 / sqrt(n)).
    data, y, m = simulate_gaussian(20000, seed=4)
    assert abs(np.mean(y - m)) < Z * 0.5 / np.sqrt(y.size)
    # the annotators' channel: P(A_1 = 1 | Y = 0) = 0.10 within Z binomial SE
    a0 = data.labels[y == 0, 0]
    assert abs(a0.mean() - 0.10) < Z * np.sqrt(0.09 / a0.size)


def test_cifar10n_path_names_argument_and_variable_when_missing(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("NOISYCAL_SHARED_DATA", str(tmp_path))  # a shared folder without the file
    with pytest.raises(FileNotFoundError, match="pass `path=` or set the environment variable NOISYCAL_CIFAR10N"):
        cifar10n_path()
    missing = tmp_path / "absent.csv"
    monkeypatch.setenv(ENV_VAR, str(missing))
    with pytest.raises(FileNotFoundError, match=r"absent\.csv.*from the environment variable NOISYCAL_CIFAR10N"):
        cifar10n_path()
    with pytest.raises(FileNotFoundError, match=r"from the `path` argument.*NOISYCAL_CIFAR10N"):
        cifar10n_path(missing)
    present = tmp_path / "cifar10n_vehicle.csv"
    present.write_text("item\n")
    assert cifar10n_path(present) == present  # the argument wins over the variable
    monkeypatch.setenv(ENV_VAR, str(present))
    assert cifar10n_path() == present


@pytest.mark.skipif(not CIFAR10N.is_file(), reason=f"{CIFAR10N} not present (set {ENV_VAR})")
def test_cifar10n_table3_directions():
    # §6.3 / Table 3 on a 8,000-item random subset (4,000 evaluated); point maps only (no NUTS here).
    t = cifar10n_table(path=CIFAR10N, n_items=8000, maps=("platt",), bayes=False, n_boot=400, seed=0).set_index(["method", "fit"])
    base, naive, corr = t.loc[("base", "none")], t.loc[("platt", "naive")], t.loc[("platt", "corrected")]

    def se(row, col):  # Bayesian-bootstrap 90% interval width -> standard error
        return (row[f"{col}_upper"] - row[f"{col}_lower"]) / (2 * 1.645)

    def lower(a, b, col):  # a's ECE below b's by more than Z SE (unpaired SEs: conservative)
        return b[col + "_ece"] - a[col + "_ece"] > Z * np.hypot(se(a, col), se(b, col))

    assert lower(naive, base, "softvote")    # naive recalibration lowers the soft-vote ECE...
    assert lower(base, naive, "oracle")      # ...but raises the reference-label ECE
    assert lower(corr, naive, "oracle")      # correction reverses both changes
    assert lower(naive, corr, "softvote")
    for row in (base, naive, corr):          # NC-ECE tracks the oracle ECE better than the soft vote does
        assert abs(row["nc_ece"] - row["oracle_ece"]) < abs(row["softvote_ece"] - row["oracle_ece"])
