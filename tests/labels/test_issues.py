"""Tests for noisycal_bayes/labels/issues.py: item / annotation posteriors and the label-issue ranking."""
import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes import AnnotationSet, simulate_annotations
from noisycal_bayes.inference import GroupAssignment, fit_em
from noisycal_bayes.labels import annotation_posteriors, default_issue_fit, item_posteriors, label_issues

from ._helpers import bayes_positive, with_draws, with_point
from noisycal_bayes.data import Binning

FPR, TPR = np.array([0.1, 0.2, 0.15]), np.array([0.8, 0.9, 0.85])
PREV = np.array([0.05, 0.3, 0.5, 0.7, 0.95])


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(600, fpr=FPR, tpr=TPR, score_beta=(0.5, 0.5), missing=0.2, seed=11)


@pytest.fixture(scope="module")
def fit(sim):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_em(sim.data, model="histogram", groups=Binning.equal_mass(5), n_starts=3)


def test_posterior_is_bayes_rule_item_by_item(sim, fit):
    known = with_point(fit, fpr=FPR, tpr=TPR, prevalence=PREV)
    post = item_posteriors(sim.data, known)
    expected = bayes_positive(sim.data.labels, FPR, TPR, PREV[np.asarray(fit.groups.index)])
    np.testing.assert_allclose(post["p_positive"], expected, rtol=1e-10, atol=1e-12)
    maj = sim.data.majority_vote()
    np.testing.assert_allclose(post["p_majority_wrong"], np.where(maj == 1, 1 - expected, expected), atol=1e-12)
    assert post["item"].tolist() == list(sim.data.item_ids)
    # A point fit carries no channel uncertainty: no interval.
    assert post["p_positive_lower"].isna().all() and post.attrs["n_draws_used"] == 0


def test_draws_are_averaged_and_their_quantiles_are_the_interval(sim, fit):
    rng = np.random.default_rng(0)
    shape = (2, 4)
    fpr = np.clip(FPR + rng.normal(0, 0.02, shape + (3,)), 0.01, 0.4)
    tpr = np.clip(TPR + rng.normal(0, 0.02, shape + (3,)), 0.6, 0.99)
    prev = np.clip(PREV + rng.normal(0, 0.05, shape + (5,)), 0.01, 0.99)
    drawn = with_draws(fit, {"fpr": fpr, "tpr": tpr, "prevalence": prev})
    g = np.asarray(fit.groups.index)
    per_draw = np.array([bayes_positive(sim.data.labels, fpr[c, d], tpr[c, d], prev[c, d][g])
                         for c in range(2) for d in range(4)])
    post = item_posteriors(sim.data, drawn, level=0.8)
    np.testing.assert_allclose(post["p_positive"], per_draw.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(post["p_positive_lower"], np.quantile(per_draw, 0.1, axis=0), rtol=1e-10)
    np.testing.assert_allclose(post["p_positive_upper"], np.quantile(per_draw, 0.9, axis=0), rtol=1e-10)
    assert (post["p_majority_wrong_lower"] <= post["p_majority_wrong"] + 1e-12).all()
    assert (post["p_majority_wrong"] <= post["p_majority_wrong_upper"] + 1e-12).all()
    # Thinning keeps evenly spaced draws (propagate.draws.thin_index): 3 of 8 -> flat draws floor(8k/3) = 0, 2, 5.
    thin = item_posteriors(sim.data, drawn, n_draws=3)
    np.testing.assert_allclose(thin["p_positive"], per_draw[[0, 2, 5]].mean(axis=0), rtol=1e-10)
    assert thin.attrs["n_draws_used"] == 3 and thin.attrs["n_draws_fit"] == 8


def test_platt_fit_uses_the_score_as_a_per_item_prior(sim, fit):
    one_group = GroupAssignment(np.zeros(sim.data.n_items, dtype=np.int32), 1, None)
    platt = with_point(fit, fpr=FPR, tpr=TPR, slope=0.7, intercept=-0.2, model="platt", groups=one_group)
    z = sim.data.scores
    prior = 1 / (1 + np.exp(-(0.7 * np.log(z / (1 - z)) - 0.2)))
    post = item_posteriors(sim.data, platt)
    np.testing.assert_allclose(post["p_positive"], bayes_positive(sim.data.labels, FPR, TPR, prior), rtol=1e-9)
    with pytest.raises(ValueError, match="needs classifier scores"):
        item_posteriors(AnnotationSet.from_wide(sim.data.labels), platt)


def test_label_issues_ranks_by_p_majority_wrong(sim, fit):
    iss = label_issues(sim.data, fit)
    for col in ("item", "p_positive", "majority_label", "p_majority_wrong"):
        assert col in iss.columns
    p = iss["p_majority_wrong"].to_numpy()
    assert np.all(np.diff(p) <= 0)
    assert iss["rank"].tolist() == list(range(1, 601))
    np.testing.assert_allclose(iss["expected_errors"], np.cumsum(p))
    assert iss.attrs["expected_total_errors"] == pytest.approx(p.sum())
    # Same values as the unsorted table, only reordered.
    post = item_posteriors(sim.data, fit).set_index("item")
    np.testing.assert_allclose(post.loc[iss["item"], "p_majority_wrong"], p)


def test_ties_follow_the_rule_and_are_marked():
    two = simulate_annotations(400, fpr=[0.1, 0.2], tpr=[0.85, 0.9], score_beta=(0.5, 0.5), seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = fit_em(two.data, model="grouped", groups=Binning.equal_mass(2), n_starts=3)
    pos = item_posteriors(two.data, f, ties="positive")
    neg = item_posteriors(two.data, f, ties="negative")
    split = two.data.labels.sum(axis=1) == 1
    assert split.any() and pos["tie"].to_numpy().tolist() == split.tolist()
    assert (pos["majority_label"][split] == 1).all() and (neg["majority_label"][split] == 0).all()
    np.testing.assert_allclose(pos["p_majority_wrong"][split], 1 - neg["p_majority_wrong"][split])
    np.testing.assert_allclose(pos["p_majority_wrong"][~split], neg["p_majority_wrong"][~split])


def test_annotation_posteriors_judge_each_response_against_the_item_posterior(sim, fit):
    ap = annotation_posteriors(sim.data, fit)
    assert len(ap) == int(sim.data.observed.sum())
    post = item_posteriors(sim.data, fit).set_index("item")["p_positive"]
    p = post.loc[ap["item"]].to_numpy()
    np.testing.assert_allclose(ap["p_wrong"], np.where(ap["label"] == 1, 1 - p, p))
    long = sim.data.to_long()
    assert ap[["item", "annotator", "label"]].astype(str).equals(long[["item", "annotator", "label"]].astype(str))


def test_new_items_use_the_fitted_score_edges(sim, fit):
    idx = np.arange(0, 600, 7)
    full = item_posteriors(sim.data, fit)
    part = item_posteriors(sim.data.subset(idx), fit)
    np.testing.assert_allclose(part["p_positive"], full["p_positive"].to_numpy()[idx], rtol=1e-12)


def test_permuting_items_or_annotators_changes_nothing(sim, fit):
    known = with_point(fit, fpr=FPR, tpr=TPR, prevalence=PREV)
    base = item_posteriors(sim.data, known)["p_positive"].to_numpy()
    perm = np.random.default_rng(1).permutation(600)
    shuffled = sim.data.subset(perm)
    np.testing.assert_allclose(item_posteriors(shuffled, known)["p_positive"], base[perm], rtol=1e-12)
    cols = [2, 0, 1]
    swapped = AnnotationSet(sim.data.labels[:, cols], sim.data.scores, sim.data.item_ids,
                            sim.data.annotator_ids[cols])
    known_sw = dataclasses.replace(with_point(fit, fpr=FPR[cols], tpr=TPR[cols], prevalence=PREV),
                                   annotator_ids=tuple(sim.data.annotator_ids[cols]))
    np.testing.assert_allclose(item_posteriors(swapped, known_sw)["p_positive"], base, rtol=1e-12)


def test_default_fit_is_a_histogram_with_scores_and_marginal_without(sim):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = default_issue_fit(sim.data)
        assert (f.model, f.groups.n_groups) == ("histogram", 6)      # min(20, 600 // 100) bins
        g = default_issue_fit(AnnotationSet.from_wide(sim.data.labels))
        assert g.model == "dawid_skene"
        iss = label_issues(sim.data)
    assert iss.attrs["model"] == "histogram" and iss.attrs["method"] == "em"


def test_bad_inputs(sim, fit):
    with pytest.raises(ValueError, match="`data` must be an AnnotationSet; got DataFrame"):
        label_issues(pd.DataFrame({"a": [1]}), fit)
    with pytest.raises(ValueError, match="`fit` must be a FitResult"):
        label_issues(sim.data, {"fpr": FPR})
    with pytest.raises(ValueError, match="the fit has annotators"):
        item_posteriors(AnnotationSet.from_wide(np.array([[0, 1], [1, 1]]), [0.2, 0.9]), fit)
    with pytest.raises(ValueError, match="`level` must lie strictly between 0 and 1; got 1.5"):
        item_posteriors(sim.data, fit, level=1.5)
    with pytest.raises(ValueError, match="`ties` must be 'positive' or 'negative'"):
        label_issues(sim.data, fit, ties="random")
    with pytest.raises(ValueError, match="`n_draws` must be an integer >= 1; got 0"):
        annotation_posteriors(sim.data, fit, n_draws=0)
    failed = dataclasses.replace(fit, point={}, draws=None, reason="all starts failed")
    with pytest.raises(ValueError, match="this fit has no estimate"):
        label_issues(sim.data, failed)
    labelled = dataclasses.replace(fit, groups=dataclasses.replace(fit.groups, edges=None))
    with pytest.raises(ValueError, match="integer labels for its own 600 items"):
        item_posteriors(sim.data.subset(np.arange(50)), labelled)
    # New items whose score bin held no item when the fit was made (here: only [0.5, 1] was populated).
    f_gap = dataclasses.replace(fit, groups=dataclasses.replace(
        fit.groups, edges=np.array([0.0, 0.5, 1.0]), used=np.array([1], dtype=np.int32), n_groups=1),
        point={**fit.point, "prevalence": np.array([0.9])})
    low = AnnotationSet.from_wide(sim.data.labels[:3], [0.01, 0.7, 0.2], annotators=list(sim.data.annotator_ids))
    with pytest.raises(ValueError, match=r"items \[0, 2\] fall in score bins that held no item"):
        item_posteriors(low, f_gap)


def test_agrees_with_the_fit_results_own_clean_label_probability(sim, fit):
    # Independent route in the inference layer (FitResult.clean_label_probability, per item).
    np.testing.assert_allclose(item_posteriors(sim.data, fit)["p_positive"], fit.clean_label_probability(),
                               rtol=1e-9, atol=1e-12)
    rng = np.random.default_rng(3)
    drawn = with_draws(fit, {"fpr": np.clip(FPR + rng.normal(0, 0.02, (2, 3, 3)), 0.01, 0.4),
                             "tpr": np.clip(TPR + rng.normal(0, 0.02, (2, 3, 3)), 0.6, 0.99),
                             "prevalence": np.clip(PREV + rng.normal(0, 0.05, (2, 3, 5)), 0.01, 0.99)})
    np.testing.assert_allclose(item_posteriors(sim.data, drawn)["p_positive"],
                               drawn.clean_label_probability().mean(axis=(0, 1)), rtol=1e-9, atol=1e-12)
