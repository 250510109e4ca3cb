"""Label-error posteriors from the sparse responses (labels/_posterior.py ItemRows): repeated labels, large crowds."""
import warnings

import numpy as np
import pytest

from noisycal_bayes import AnnotationSet, fit_em, label_issues
from noisycal_bayes.labels import annotation_posteriors, corrected_accuracy
from noisycal_bayes.labels._posterior import ItemRows, _item_rows, build_rows, parameter_draws
from noisycal_bayes.simulate import simulate_crowd


@pytest.fixture(scope="module")
def crowd():
    sim = simulate_crowd(300, 12, labels_per_item=3, spammers=0.1, adversaries=0.1, curve="calibrated", seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_em(sim.data, model="grouped")
    return sim, fit


def test_item_rows_equal_the_pattern_rows(crowd):
    """Two routes to P(Y_i = 1 | A_i, theta): segment sums over responses and the compressed patterns' E-step."""
    sim, fit = crowd
    params, _ = parameter_draws(fit, None)
    dense = build_rows(sim.data, fit, "t")
    assert not isinstance(dense, ItemRows)
    sparse = _item_rows(sim.data, fit, "t")
    np.testing.assert_allclose(sparse.positive(params), dense.positive(params)[:, dense.inverse], rtol=0, atol=1e-10)


def test_repeated_labels_against_a_hand_computed_posterior():
    """Item 0: annotator a says 1 twice, b says 0; each repeat is a conditionally independent label."""
    data = AnnotationSet.from_responses([0, 0, 0, 1, 1, 2, 2], [0, 0, 1, 0, 1, 0, 1], [1, 1, 0, 0, 1, 1, 1])
    assert data.has_repeats
    fpr, tpr, pi = np.array([0.1, 0.3]), np.array([0.8, 0.7]), 0.4

    class Fit:  # a point fit of the marginal Dawid-Skene model, as the EM result would carry it
        model, method, draws, annotator_ids = "dawid_skene", "em", None, (0, 1)
        point = {"fpr": fpr, "tpr": tpr, "prevalence": np.array([pi])}
        details = {}

        class groups:
            n_groups, edges, index = 1, None, np.zeros(3, dtype=np.int32)

    table = label_issues(data, Fit(), n_draws=None).set_index("item").sort_index()
    l1 = pi * tpr[0] ** 2 * (1 - tpr[1])
    l0 = (1 - pi) * fpr[0] ** 2 * (1 - fpr[1])
    p0 = l1 / (l0 + l1)
    # Majority of item 0 is 1 (two votes of three), so P(majority wrong) = 1 - P(Y = 1).
    assert table.loc[0, "n_labels"] == 3 and table.loc[0, "n_positive"] == 2
    np.testing.assert_allclose(table.loc[0, "p_majority_wrong"], 1 - p0, rtol=1e-12)
    rows = annotation_posteriors(data, Fit(), n_draws=None)
    assert len(rows) == data.n_responses  # one row per response, both repeats of (0, 0) included


def test_crowd_with_repeats_ranks_issues_and_refuses_replicates_clearly():
    sim = simulate_crowd(300, 12, labels_per_item=3, repeat_rate=0.2, curve="calibrated", seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_em(sim.data, model="grouped")
        table = label_issues(sim.data, fit)
        assert len(table) == sim.data.n_items
        np.testing.assert_array_equal(table.sort_values("item")["n_labels"], sim.data.labels_per_item())
        with pytest.raises(ValueError, match="repeated labels"):
            corrected_accuracy(sim.data, fit, n_replicates=10)
