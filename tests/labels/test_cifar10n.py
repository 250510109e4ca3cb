"""Real data: label errors and corrected accuracy on CIFAR-10N "vehicle vs animal" (docs/label_errors.md §5).

Labels: CIFAR-10N (Wei et al., ICLR 2022; UCSC-REAL/cifar-10-100n, CC BY-NC 4.0). Scores: cross-validated
ResNet-50 probabilities from cgnorthcutt/confidentlearning-reproduce (MIT). ``y_ref`` (the original
CIFAR-10 label) is used only to score the results. Skipped only when the file is absent.
"""
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from noisycal_bayes import AnnotationSet
from noisycal_bayes.experiments.real_data import SHARED_DATA_HINT, shared_data_path
from noisycal_bayes.labels import corrected_accuracy, default_issue_fit, label_issues
from noisycal_bayes.reference.confident_learning import confident_learning

DATA = shared_data_path("cifar10n_vehicle.csv")
pytestmark = pytest.mark.skipif(DATA is None, reason=f"cifar10n_vehicle.csv not found: {SHARED_DATA_HINT}")


@pytest.fixture(scope="module")
def cifar():
    frame = pd.read_csv(DATA)
    data = AnnotationSet.from_wide(frame[["ann1", "ann2", "ann3"]].to_numpy(), frame["score"].clip(0, 1).to_numpy(),
                                   annotators=["ann1", "ann2", "ann3"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = default_issue_fit(data)
    return data, frame["y_ref"].to_numpy(), fit


def _top(score, k, rng):
    order = np.lexsort((rng.random(score.size), -score))      # ties at the cut in random order
    m = np.zeros(score.size, dtype=bool)
    m[order[:k]] = True
    return m


def test_posterior_ranking_beats_confident_learning_and_majority_disagreement(cifar):
    data, y, fit = cifar
    maj = data.majority_vote()
    wrong = maj != y
    k = int(wrong.sum())
    rng = np.random.default_rng(0)
    iss = label_issues(data, fit)
    ours = np.zeros(data.n_items, dtype=bool)
    ours[iss["item"].to_numpy()[:k].astype(int)] = True
    cl = _top(1 - confident_learning(maj, data.scores).label_quality, k, rng)
    vf = data.vote_fraction()
    dis = _top(np.minimum(vf, 1 - vf), k, rng)
    # Paired (McNemar-type) z of the precision difference; one-sided false alarm 1e-3 for each of the two
    # claims (Bonferroni): z = 3.29.
    z = stats.norm.ppf(1 - 1e-3 / 2)
    for other in (cl, dis):
        ab, ba = ours & ~other, other & ~ours
        p_ab, p_ba = wrong[ab].mean(), wrong[ba].mean()
        d = wrong[ab].sum() - wrong[ba].sum()
        var = ab.sum() * p_ab * (1 - p_ab) + ba.sum() * p_ba * (1 - p_ba)
        assert d / np.sqrt(var) > z


def test_corrected_accuracy_matches_the_reference_labels(cifar):
    data, y, _ = cifar
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = corrected_accuracy(data, threshold=0.5, n_replicates=200, seed=0)
    truth = float(np.mean((data.scores >= 0.5) == y))
    # The 90% interval's half-width / 1.645 is the posterior sd; allow z = 3.29 of it (false alarm 1e-3
    # if the estimate were exactly calibrated for y_ref, which itself carries a few label errors).
    sd = (res.upper - res.lower) / (2 * stats.norm.ppf(0.95))
    z = stats.norm.ppf(1 - 1e-3 / 2)
    assert abs(res.accuracy - truth) < z * sd
    # Negative controls: the accuracy against the majority vote and against single annotators fail it.
    assert abs(res.majority_accuracy - truth) > z * sd
    assert abs(res.annotator_accuracy - truth) > z * sd
