"""Tiny run of the semi-synthetic tabular experiment (paper §6.2, Table 2; noisycal_bayes/experiments/tabular.py).

False-alarm budget: the two statistical checks are one-sided z tests at 1e-3 (z = 3.09) on seed-level
paired differences; seeds are fixed, so a run is deterministic.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sklearn")

from noisycal_bayes.experiments.tabular import (DATASETS, REGIMES, load_tabular, simulate_channels,  # noqa: E402
                                                summarise_tabular, tabular_recalibration)

Z = 3.09


def test_bundled_datasets_binarised_as_documented():
    # Class counts from the scikit-learn data set descriptions: breast cancer 357 benign / 212 malignant;
    # wine 59 / 71 / 48 per cultivar; digits 1797 images, 0-4 = 901 (178+182+177+183+181); diabetes
    # 442 targets split at the median (ties at the median go to class 0).
    counts = {name: load_tabular(name)[1] for name in DATASETS}
    assert counts["breast_cancer"].sum() == 357 and counts["breast_cancer"].size == 569
    assert counts["wine"].sum() == 71 and counts["wine"].size == 178
    assert counts["digits"].size == 1797 and counts["digits"].sum() == 1797 - 901
    assert counts["diabetes"].size == 442 and 210 <= counts["diabetes"].sum() <= 221
    with pytest.raises(ValueError, match="unknown data set 'adult'"):
        load_tabular("adult")


def test_simulated_channels_stay_in_their_regime():
    rng = np.random.default_rng(0)
    for regime, ((f_lo, f_hi), (n_lo, n_hi)) in REGIMES.items():
        fpr, tpr = simulate_channels(7, regime, rng)
        assert np.all((fpr >= f_lo) & (fpr <= f_hi)) and np.all((1 - tpr >= n_lo) & (1 - tpr <= n_hi))
    with pytest.raises(ValueError, match="unknown noise regime 'extreme'"):
        simulate_channels(3, "extreme", rng)


def test_missing_sklearn_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)  # `import sklearn` now raises ImportError
    with pytest.raises(ImportError, match=r"pip install noisycal_bayes\[experiments\]"):
        load_tabular("wine")


def test_summary_seed_means_and_paired_difference_by_hand():
    # Two seeds x two cells; one failed cell is dropped for every method. Seed means by hand:
    # base: seed 0 (0.2 + 0.4)/2 = 0.3, seed 1 0.5 (its other cell failed); platt/corrected 0.1 and 0.2.
    rows = []
    for seed, cell, base, corr, fail in [(0, "a", 0.2, 0.1, ""), (0, "b", 0.4, 0.1, ""),
                                         (1, "a", 0.5, 0.2, ""), (1, "b", 0.9, np.nan, "no start")]:
        key = dict(dataset="d", seed=seed, predictor=cell, n_annotators=3, regime="low")
        rows += [dict(key, map="base", fit="none", ece=base, failure=""),
                 dict(key, map="platt", fit="corrected", ece=corr, failure=fail)]
    t = summarise_tabular(pd.DataFrame(rows)).set_index(["dataset", "map", "fit"])
    assert t.loc[("d", "base", "none"), "ece"] == pytest.approx(0.4)
    r = t.loc[("d", "platt", "corrected")]
    assert r["ece"] == pytest.approx(0.15) and r["ece_sd"] == pytest.approx(np.std([0.1, 0.2], ddof=1))
    assert r["diff_vs_base"] == pytest.approx(((0.1 - 0.3) + (0.2 - 0.5)) / 2)
    assert r["diff_se"] == pytest.approx(np.std([-0.2, -0.3], ddof=1) / np.sqrt(2))
    assert r["n_failed"] == 1 and r["n_cells_total"] == 4 and r["n_cells"] == 3 and bool(r["reduces"])


def test_tabular_corrected_platt_and_histogram_reduce_ece():
    # §6.2 / Table 2: corrected Platt and histogram recalibration reduce mean ECE against the clean test
    # labels versus the base predictor. Tiny: digits, Gaussian naive Bayes (an over-confident family),
    # three annotators in the "moderate" regime, four seeds; paired seed-level differences.
    rows = tabular_recalibration(datasets=("digits",), predictors=("naive_bayes",), n_annotators=(3,),
                                 regimes=("moderate",), n_seeds=4, maps=("platt", "histogram"), n_starts=2)
    assert rows["failure"].eq("").all()
    assert set(rows["fit"]) == {"none", "corrected", "naive", "oracle"}
    t = summarise_tabular(rows).set_index(["dataset", "map", "fit"])
    for kind in ("platt", "histogram"):
        r = t.loc[("digits", kind, "corrected")]
        assert r["diff_vs_base"] < -Z * r["diff_se"], (kind, r.to_dict())


def _assert_subset_cells_equal(**big_grid):
    small = tabular_recalibration(datasets=("wine",), predictors=("decision_tree",), n_annotators=(5,),
                                  regimes=("high",), seeds=[1], n_starts=2)
    big = tabular_recalibration(**big_grid, seeds=[1], n_starts=2)
    keys = ["dataset", "seed", "predictor", "n_annotators", "regime", "map", "fit"]
    m = small.merge(big, on=keys, suffixes=("_small", "_big"))
    assert len(m) == len(small) == 10
    np.testing.assert_array_equal(m["ece_small"].to_numpy(), m["ece_big"].to_numpy())


def test_subset_run_reproduces_the_cells_of_a_larger_run_over_predictors_and_regimes():
    # Seeds are keyed by each predictor's / regime's place in the module constants, not by its position in the
    # arguments, so a subset run gives exactly the same cells as a larger run. Cheap: every cell has the data
    # shapes of the subset's cell (same data set and J), so the compiled programs are reused; the slow test
    # below shifts the data set and J too.
    _assert_subset_cells_equal(datasets=("wine",), predictors=("naive_bayes", "decision_tree"), n_annotators=(5,),
                               regimes=("asymmetric", "high"))


@pytest.mark.slow
def test_subset_run_reproduces_the_cells_of_a_larger_run():
    # As above for all four keys: data set, predictor, J and regime each sit at another argument position.
    _assert_subset_cells_equal(datasets=("diabetes", "wine"), predictors=("naive_bayes", "decision_tree"),
                               n_annotators=(3, 5), regimes=("asymmetric", "high"))
