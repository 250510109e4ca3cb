"""Tests for noisycal_bayes/reference/baselines.py: the naive ECE / SMECE baselines."""
import numpy as np
import pytest

from noisycal_bayes import AnnotationSet, Binning, ece, simulate_annotations, smece
from noisycal_bayes.reference.baselines import naive_calibration

# Hand-built example (values below computed by hand, bins [0, 0.5) and [0.5, 1]).
#   item  labels (-1 missing)  score  vote  bin
#   0     1  0 -1 -1           0.3    tie   0
#   1     1  1  0 -1           0.7    1     1
#   2     0  0  1  1           0.6    tie   1
#   3     0 -1 -1 -1           0.2    0     0
#   4     1 -1  1  0           0.9    1     1
LABELS = np.array([[1, 0, -1, -1], [1, 1, 0, -1], [0, 0, 1, 1], [0, -1, -1, -1], [1, -1, 1, 0]])
SCORES = np.array([0.3, 0.7, 0.6, 0.2, 0.9])


@pytest.fixture
def hand():
    return AnnotationSet.from_wide(LABELS, SCORES)


def test_majority_vote_ties_are_counted_and_follow_the_rule(hand):
    pos = naive_calibration(hand, bins=2, ties="positive")
    neg = naive_calibration(hand, bins=2, ties="negative")
    assert pos.n_ties == neg.n_ties == 2
    # ties -> 1: votes [1,1,1,0,1]; bin 0: (1-.3)+(0-.2) = .5; bin 1: .3+.4+.1 = .8; ECE = 1.3/5.
    assert pos.majority_vote_ece == pytest.approx(0.26)
    # ties -> 0: votes [0,1,0,0,1]; bin 0: -.3-.2 = -.5; bin 1: .3-.6+.1 = -.2; ECE = .7/5.
    assert neg.majority_vote_ece == pytest.approx(0.14)
    assert "2 ties -> 1" in pos.to_frame()["labels"][0] and "2 ties -> 0" in neg.to_frame()["labels"][0]


def test_vote_fraction_smece_and_single_annotator_ece_by_hand(hand):
    res = naive_calibration(hand, bins=2)
    # fractions [1/2, 2/3, 1/2, 0, 2/3]; bin 0: .2 - .2 = 0; bin 1: -1/30 - .1 - 7/30 = -11/30; SMECE = 11/150.
    assert res.vote_fraction_smece == pytest.approx(11 / 150)
    table = res.annotator_ece.set_index("annotator")
    # Annotator 0 labelled all 5: [1,1,0,0,1]; bin 0: .7-.2 = .5; bin 1: .3-.6+.1 = -.2; ECE = .7/5.
    assert table.loc[0, "n_items"] == 5 and table.loc[0, "ece"] == pytest.approx(0.14)
    # Annotator 2 labelled items 1, 2, 4: [0,1,1], all in bin 1: -.7+.4+.1 = -.2; ECE = .2/3.
    assert table.loc[2, "n_items"] == 3 and table.loc[2, "ece"] == pytest.approx(0.2 / 3)
    # Annotator 3 labelled items 2 and 4: [1, 0]: .4 - .9 = -.5; ECE = .5/2.
    assert table.loc[3, "n_items"] == 2 and table.loc[3, "ece"] == pytest.approx(0.25)
    assert res.clean_ece is None


def test_smece_on_unanimous_votes_equals_majority_vote_ece():
    # When every annotator agrees, vote fractions are 0/1 and SMECE must equal ECE (seeds/002).
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 300)
    labels = np.repeat(y[:, None], 3, axis=1)
    labels[rng.random((300, 3)) < 0.3] = -1
    labels[np.arange(300), rng.integers(0, 3, 300)] = y
    data = AnnotationSet.from_wide(labels, rng.random(300))
    res = naive_calibration(data, bins=Binning.equal_mass(7))
    assert res.n_ties == 0
    assert res.vote_fraction_smece == pytest.approx(res.majority_vote_ece, abs=1e-12)
    assert smece(data.scores, y.astype(float), bins=7) == pytest.approx(ece(data.scores, y, bins=7), abs=1e-12)


def test_one_partition_from_all_scores_is_shared_by_every_row():
    sim = simulate_annotations(400, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], missing=0.5, seed=2)
    binning = Binning.equal_mass(5)
    res = naive_calibration(sim.data, bins=binning, clean_labels=sim.clean_labels)
    z = sim.data.scores
    np.testing.assert_allclose(res.edges, binning.edges_for(z))
    common = Binning.from_edges(res.edges)
    for j in range(3):
        obs = sim.data.labels[:, j] >= 0
        assert res.annotator_ece["ece"][j] == pytest.approx(ece(z[obs], sim.data.labels[obs, j], bins=common))
    assert res.clean_ece == pytest.approx(ece(z, sim.clean_labels, bins=common))
    frame = res.to_frame()
    assert list(frame["metric"]) == ["ECE", "SMECE", "ECE", "ECE", "ECE", "ECE"]
    assert frame["labels"].iloc[-1] == "clean labels (oracle)"


def test_noisy_baselines_are_biased_for_a_calibrated_model():
    # Calibrated scores (m(z) = z) and noisy annotators: E[vote fraction | z] = mean(fpr) + mean(gap) z, so
    # the expected SMECE residual per bin is mean(fpr) - (1 - mean(gap)) zbar_k, whose binned absolute mean
    # over uniform scores is about 0.07 here, while the clean ECE is sampling noise (se about 0.005 at n = 20000).
    sim = simulate_annotations(20000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=5)
    res = naive_calibration(sim.data, clean_labels=sim.clean_labels)
    assert res.clean_ece < 0.03
    assert res.vote_fraction_smece > 0.05
    assert res.vote_fraction_smece > 3 * res.clean_ece


def test_bad_inputs_raise_clear_errors(hand):
    with pytest.raises(ValueError, match="must be an AnnotationSet"):
        naive_calibration(LABELS)
    with pytest.raises(ValueError, match="`ties` must be 'positive' or 'negative'"):
        naive_calibration(hand, ties="random")
    with pytest.raises(ValueError, match="needs classifier scores"):
        naive_calibration(AnnotationSet.from_wide(LABELS))
    with pytest.raises(ValueError, match=r"`clean_labels` must have shape \(5,\)"):
        naive_calibration(hand, clean_labels=[0, 1])
    with pytest.raises(ValueError, match="`clean_labels` must be 0 or 1; got \\[2.0\\] at positions \\[3\\]"):
        naive_calibration(hand, clean_labels=[0, 1, 1, 2, 0])
    with pytest.raises(ValueError, match="`bins` must be an int"):
        naive_calibration(hand, bins=0.5)


def test_repeated_labels_are_votes_and_annotator_responses():
    """With repeated (item, annotator) labels every baseline reads the responses; checked against the triples
    summarised by pandas group-bys (not the package's vote helpers)."""
    import pandas as pd

    rng = np.random.default_rng(7)
    n = 120
    z = rng.uniform(size=n)
    rows = [(i, j, int(rng.random() < z[i])) for i in range(n) for j in range(3) if rng.random() < 0.8 or j == 0]
    rows += [(i, 1, int(rng.random() < z[i])) for i in range(0, n, 4)]  # annotator 1 labels every 4th item twice
    rows += [(i, 0, int(rng.random() < z[i])) for i in range(1, n, 5)] * 2  # annotator 0: three labels on some
    long = pd.DataFrame(rows, columns=["item", "annotator", "label"])
    data = AnnotationSet.from_long(long, pd.Series(z), repeated="keep")
    assert data.has_repeats
    res = naive_calibration(data, bins=Binning.equal_mass(4))
    common = Binning.from_edges(res.edges)
    by_item = long.groupby("item")["label"]
    frac = (by_item.sum() / by_item.count()).reindex(range(n)).to_numpy()
    vote = (frac >= 0.5).astype(int)  # ties -> 1
    assert res.n_ties == int((frac == 0.5).sum())
    assert res.majority_vote_ece == pytest.approx(ece(z, vote, bins=common), abs=1e-12)
    assert res.vote_fraction_smece == pytest.approx(smece(z, frac, bins=common), abs=1e-12)
    table = res.annotator_ece.set_index("annotator")
    for j, part in long.groupby("annotator"):
        # One term per item j labelled, against j's own vote fraction there (0/1 unless j repeated the item).
        own = part.groupby("item")["label"].mean()
        want = smece(z[own.index.to_numpy()], own.to_numpy(), bins=common)
        assert table.loc[j, "ece"] == pytest.approx(want, abs=1e-12)
        assert table.loc[j, "n_items"] == own.size
    assert (long.groupby(["item", "annotator"]).size() > 1).groupby("annotator").any().loc[[0, 1]].all()
