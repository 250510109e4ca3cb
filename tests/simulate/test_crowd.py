"""Tests for noisycal_bayes/simulate/crowd.py: simulate_crowd."""
import numpy as np
import pytest

from noisycal_bayes.simulate import simulate_crowd


def test_design_and_truth():
    sim = simulate_crowd(3000, 50, labels_per_item=4, spammers=0.1, adversaries=0.04, repeat_rate=0.05,
                         activity="heavy", curve="calibrated", seed=1)
    data, resp = sim.data, sim.responses
    assert data.n_items == 3000 and data.n_annotators == 50 and data.scores is not None
    assert (sim.kind == "spammer").sum() == 5 and (sim.kind == "adversary").sum() == 2
    np.testing.assert_allclose(sim.gap[sim.kind == "spammer"], 0.0)
    assert np.all(sim.gap[sim.kind == "adversary"] < 0) and np.all(sim.gap[sim.kind == "honest"] > 0)
    # Every item has 4 distinct annotators; repeats (about 5% of 12,000 responses: sd ~24) are kept, in `data` as in
    # `responses`, and `data` holds exactly the responses.
    assert np.all(resp.drop_duplicates(["item", "annotator"]).groupby("item").size().to_numpy() == 4)
    n_rep = len(resp) - 12000
    assert abs(n_rep - 600) < 4 * np.sqrt(12000 * 0.05 * 0.95)
    assert resp.duplicated(["item", "annotator"]).sum() == n_rep
    item, ann, lab = data.responses
    np.testing.assert_array_equal(np.c_[item, ann, lab], resp[["item", "annotator", "label"]].to_numpy())
    assert data.summary()["repeated_responses"] == n_rep
    # Heavy-tailed activity: the busiest annotator labels far more than the average (uniform: ~240 each).
    counts = np.bincount(resp["annotator"], minlength=50)
    assert counts.max() > 3 * counts.mean()


def test_labels_follow_the_channels():
    """Each annotator's empirical rates against the clean labels: within 4 binomial sd of the truth."""
    sim = simulate_crowd(4000, 10, labels_per_item=5, spammers=0.2, adversaries=0.1, seed=2)
    lab, y = sim.data.labels, sim.clean_labels
    for j in range(10):
        for cls, rate in ((1, sim.tpr[j]), (0, sim.fpr[j])):
            a = lab[(y == cls) & (lab[:, j] >= 0), j]
            assert abs(a.mean() - rate) < 4 * np.sqrt(rate * (1 - rate) / a.size) + 1e-9


@pytest.mark.parametrize("kwargs, match", [
    ({"labels_per_item": 11}, "cannot exceed"),
    ({"spammers": 0.7, "adversaries": 0.4}, "at most 1"),
    ({"repeat_rate": 1.5}, "repeat_rate"),
    ({"activity": "zipf"}, "activity"),
    ({"curve": "nope"}, "curve"),
    ({"fpr_range": (0.5, 0.1)}, "fpr_range"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate_crowd(100, 10, **kwargs)


def test_every_annotator_labels_something_under_heavy_activity():
    sim = simulate_crowd(300, 200, labels_per_item=2, activity="heavy", seed=3)
    assert np.all((sim.data.labels >= 0).sum(0) >= 1)
    assert np.all((sim.data.labels >= 0).sum(1) == 2)
