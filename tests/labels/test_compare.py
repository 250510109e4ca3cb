"""Tests for noisycal_bayes/labels/compare.py: posterior comparison of classifiers on clean labels."""
import dataclasses
import re
import warnings

import numpy as np
import pytest

from noisycal_bayes import AnnotationSet, Binning, ece, simulate_annotations
from noisycal_bayes.inference import fit_em
from noisycal_bayes.models.inputs import prepare_inputs
from noisycal_bayes.labels import compare_models, joint_prediction_groups
from noisycal_bayes.warnings import DataWarning

from ._helpers import with_point

FPR, TPR = np.array([0.1, 0.2, 0.15]), np.array([0.8, 0.9, 0.85])


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(700, fpr=FPR, tpr=TPR, score_beta=(0.6, 0.6), seed=31)


@pytest.fixture(scope="module")
def models(sim):
    rng = np.random.default_rng(2)
    return {"A": sim.data.scores, "B": np.clip(sim.data.scores + rng.normal(0, 0.2, 700), 0, 1)}


def test_identical_models_tie_everywhere(sim):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cmp = compare_models(sim.data, {"A": sim.data.scores, "A again": sim.data.scores}, n_replicates=200)
    t = cmp.table.set_index("model")
    assert t.loc["A", "accuracy"] == t.loc["A again", "accuracy"]
    np.testing.assert_allclose(t["p_most_accurate"], [0.5, 0.5])
    np.testing.assert_allclose(t["p_best_calibrated"], [0.5, 0.5])
    np.testing.assert_array_equal(cmp.draws["nc_ece"][:, 0], cmp.draws["nc_ece"][:, 1])
    assert cmp.probability_better("A", "A again") == 0.5
    assert t["conditioned"].all() and cmp.fit_model == "grouped"


def test_identity_channel_nc_ece_is_plain_ece_and_probabilities_are_paired(sim, models):
    # Unanimous labels with an (almost) identity channel: corrected labels are the labels, so the NC-ECE
    # without bootstrap is the plain ECE of each model against them (reference implementation).
    y = sim.clean_labels
    data = AnnotationSet.from_wide(np.repeat(y[:, None], 3, axis=1), sim.data.scores)
    yhat = np.stack([(m >= 0.5) for m in models.values()], axis=1)
    groups = joint_prediction_groups(yhat)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = fit_em(sim.data, model="grouped", groups=groups, n_starts=2)
    ident = with_point(base, fpr=[1e-9] * 3, tpr=[1 - 1e-9] * 3, prevalence=np.full(base.groups.n_groups, 0.5))
    # The fit's groups are integer labels for these items; its inputs must hold the new labels.
    ident = dataclasses.replace(ident, inputs=prepare_inputs(data, "grouped", base.groups))
    cmp = compare_models(data, models, ident, bins=Binning.equal_width(10), n_replicates=20, bootstrap=False)
    t = cmp.table.set_index("model")
    for name, z in models.items():
        assert t.loc[name, "nc_ece"] == pytest.approx(ece(z, y, bins=10), abs=1e-7)
        assert t.loc[name, "accuracy"] == pytest.approx(np.mean((z >= 0.5) == y), abs=1e-7)
        assert t.loc[name, "majority_ece"] == pytest.approx(ece(z, y, bins=10), abs=1e-12)
    assert cmp.probability_better("A", "B") == pytest.approx(t.loc["A", "p_most_accurate"])
    assert cmp.probability_better("A", "B", metric="nc_ece") == pytest.approx(t.loc["A", "p_best_calibrated"])


@pytest.fixture(scope="module")
def own_fit_comparison(sim, models):
    """compare_models with a fit grouped on model A's scores, and the warnings it raised (shared: one EM fit
    and one compiled set of refits serve the two tests that need a ModelComparison of A and B)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own = fit_em(sim.data, model="histogram", groups=Binning.from_edges([0, 0.25, 0.5, 0.75, 1]), n_starts=2)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        cmp = compare_models(sim.data, models, own, n_replicates=50)
    return cmp, rec


def test_fit_grouped_on_one_models_scores_warns_for_the_others(own_fit_comparison):
    cmp, rec = own_fit_comparison
    msgs = [str(w.message) for w in rec if issubclass(w.category, DataWarning)]
    assert any(re.search(r"predictions of \['B'\] are not a function", m) for m in msgs), msgs
    assert cmp.table["conditioned"].tolist() == [True, False]
    assert cmp.draws["accuracy"].shape == (50, 2) and cmp.draws["nc_ece"].shape == (50, 2)
    t = cmp.table
    assert (t["accuracy_lower"] <= t["accuracy_upper"]).all() and np.isclose(t["p_most_accurate"].sum(), 1)


def test_bad_inputs(sim, models, own_fit_comparison):
    with pytest.raises(ValueError, match="`scores` must be a dict of at least two models"):
        compare_models(sim.data, sim.data.scores)
    with pytest.raises(ValueError, match="with 1 entry. For one model use corrected_accuracy"):
        compare_models(sim.data, {"A": sim.data.scores})
    with pytest.raises(ValueError, match=r"`scores\['B'\]` must have shape \(700,\)"):
        compare_models(sim.data, {"A": sim.data.scores, "B": np.full(3, 0.5)})
    with pytest.raises(ValueError, match=r"`scores\['B'\]` must lie in \[0, 1\]"):
        compare_models(sim.data, {"A": sim.data.scores, "B": sim.data.scores * 3})
    with pytest.raises(ValueError, match=r"must name exactly the models \['A', 'B'\]; missing \['B'\]"):
        compare_models(sim.data, models, threshold={"A": 0.5})
    with pytest.raises(ValueError, match="`threshold` must lie in"):
        compare_models(sim.data, models, threshold=-0.1)
    with pytest.raises(ValueError, match="`bins` must be an int"):
        compare_models(sim.data, models, bins="ten")
    with pytest.raises(ValueError, match="`n_replicates` must be an integer"):
        compare_models(sim.data, models, n_replicates=1.5)
    with pytest.raises(ValueError, match="`data` must be an AnnotationSet"):
        compare_models(sim.data.labels, models)
    cmp = own_fit_comparison[0]  # any comparison of A and B serves the method's error paths
    with pytest.raises(ValueError, match="unknown model 'C'"):
        cmp.probability_better("A", "C")
    with pytest.raises(ValueError, match="`metric` must be 'accuracy' or 'nc_ece'"):
        cmp.probability_better("A", "B", metric="ece")
