"""Binary-only features refuse K-class input with one message that names the K-class alternative.

Every public function, class and method that reads binary labels or scores P(Y = 1) (the paper's closed forms,
moments and GMM, the reference EM, the calibration-curve models, gap diagnostics, the binary recalibration maps,
``label_issues`` / ``corrected_accuracy`` / naive baselines, the NC-ECE of ``SufficientStats``, the ``gap`` weight
rules, ...)
raises one ``ValueError`` "<name> is defined for two classes ...; ... For K classes use <alternative>." on a
:class:`MulticlassAnnotationSet` (whatever its number of classes: with two, the message points to
``to_binary()``) and on class-probability matrices of shape (n_items, K) where it takes scores. The table of
``docs/multiclass.md`` ("Binary-only features") lists the same rows. The negative controls run the named
alternatives on the same data: they must accept it, or the message would send users to a dead end.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import noisycal_bayes as nb
from noisycal_bayes import MulticlassAnnotationSet, diagnostics, inference, plotting, recalibration, reference
from noisycal_bayes.core import classwise_ece, top_label_ece, usable_confusions
from noisycal_bayes.data import SufficientStats
from noisycal_bayes.labels import corrected_accuracy_multiclass, multiclass_label_issues
from noisycal_bayes.simulate import simulate_annotations, simulate_multiclass

DEFINED = "is defined for two classes"


def _multiclass(n_classes: int) -> MulticlassAnnotationSet:
    sim = simulate_multiclass(300, 3, n_classes, seed=0)
    return MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=n_classes,
                                                  probs=sim.probs)


@pytest.fixture(scope="module")
def binary():
    """A binary set and its EM fit: the fit (or its channel) is what a misrouted K-class call would pair it with."""
    sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.15], tpr=[0.8, 0.85, 0.9], seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sim.data, nb.fit_em(sim.data, n_starts=2)


@pytest.fixture(scope="module", params=[3, 2], ids=["K=3", "K=2"])
def k_data(request):
    return _multiclass(request.param)


# (call(K-class set, its probs, binary set, binary fit), name in the message, K-class alternative or None).
# Data-taking entries receive the MulticlassAnnotationSet; score-taking entries its probability matrix.
ENTRIES = [
    (lambda k, p, b, f: nb.nc_ece(k, f.channel), "nc_ece", "top_label_nc_ece or classwise_nc_ece"),
    (lambda k, p, b, f: nb.ece(p, k.majority_vote()), "ece", "top_label_ece or classwise_ece"),
    (lambda k, p, b, f: nb.smece(p, p), "smece", "classwise_ece"),
    (lambda k, p, b, f: nb.TemperatureScaling().fit(p, k), "TemperatureScaling.fit", "MulticlassTemperatureScaling"),
    (lambda k, p, b, f: nb.TemperatureScaling().fit(p[:, 1], k, channel=f.channel), "TemperatureScaling.fit",
     "MulticlassTemperatureScaling"),
    (lambda k, p, b, f: nb.PlattScaling().fit(p, b, channel=f.channel), "PlattScaling.fit",
     "VectorScaling or MulticlassTemperatureScaling"),
    (lambda k, p, b, f: nb.PlattScaling().fit(p[:, 1], k, channel=f.channel), "PlattScaling.fit",
     "VectorScaling or MulticlassTemperatureScaling"),
    (lambda k, p, b, f: nb.ProjectedHistogram().fit(p, k), "ProjectedHistogram.fit", "TopLabelHistogram"),
    (lambda k, p, b, f: nb.label_issues(k), "label_issues", "multiclass_label_issues"),
    (lambda k, p, b, f: nb.item_posteriors(k, f), "item_posteriors",
     "fit_em_multiclass(data).clean_label_probability(data)"),
    (lambda k, p, b, f: nb.annotation_posteriors(k, f), "annotation_posteriors",
     "fit_em_multiclass(data).clean_label_probability(data)"),
    (lambda k, p, b, f: nb.corrected_accuracy(k), "corrected_accuracy", "corrected_accuracy_multiclass"),
    (lambda k, p, b, f: nb.compare_models(k, {"a": p}), "compare_models", "corrected_accuracy_multiclass"),
    (lambda k, p, b, f: nb.posterior_nc_ece(k, f), "posterior_nc_ece",
     "posterior_top_label_nc_ece or posterior_classwise_nc_ece"),
    (lambda k, p, b, f: nb.posterior_reliability(k, f), "posterior_reliability", "posterior_top_label_nc_ece"),
    # K-class SufficientStats exist (fit_em fits them); the binary NC-ECE of statistics refuses them like the set.
    (lambda k, p, b, f: nb.posterior_nc_ece(SufficientStats.from_annotations(k), f), "posterior_nc_ece",
     "posterior_top_label_nc_ece or posterior_classwise_nc_ece"),
    (lambda k, p, b, f: reference.bootstrap_nc_ece(k), "bootstrap_nc_ece",
     "bootstrap_top_label_nc_ece or bootstrap_classwise_nc_ece"),
    (lambda k, p, b, f: reference.closed_form_two_groups(k, np.arange(k.n_items) % 2), "closed_form_two_groups",
     "fit_em_multiclass"),
    (lambda k, p, b, f: reference.fit_em(k), "reference.fit_em", "fit_em_multiclass"),
    (lambda k, p, b, f: reference.fit_gmm(k, np.arange(k.n_items) % 3), "fit_gmm", "fit_em_multiclass"),
    (lambda k, p, b, f: reference.moments_three(k), "moments_three", "fit_em_multiclass"),
    (lambda k, p, b, f: reference.fit_temperature(p, p), "fit_temperature", "MulticlassTemperatureScaling"),
    (lambda k, p, b, f: reference.fit_platt(p, p), "fit_platt", "VectorScaling or MulticlassTemperatureScaling"),
    (lambda k, p, b, f: reference.fit_projected_histogram(p, p), "fit_projected_histogram", "TopLabelHistogram"),
    (lambda k, p, b, f: reference.naive_calibration(k), "naive_calibration", "naive_multiclass_ece"),
    (lambda k, p, b, f: reference.nc_ece_split(k), "nc_ece_split", "top_label_nc_ece or classwise_nc_ece"),
    (lambda k, p, b, f: reference.nc_ece_reuse(k, bins=10), "nc_ece_reuse", "top_label_nc_ece or classwise_nc_ece"),
    (lambda k, p, b, f: reference.nc_ece_cross_fit(k), "nc_ece_cross_fit", "top_label_nc_ece or classwise_nc_ece"),
    (lambda k, p, b, f: recalibration.PosteriorHistogram().fit(k, f), "PosteriorHistogram.fit",
     "PosteriorTopLabelHistogram"),
    (lambda k, p, b, f: recalibration.PosteriorPlatt().fit(k, f), "PosteriorPlatt.fit",
     "PosteriorMulticlassTemperature"),
    (lambda k, p, b, f: recalibration.PosteriorTemperature().fit(k, f), "PosteriorTemperature.fit",
     "PosteriorMulticlassTemperature"),
    (lambda k, p, b, f: diagnostics.gap_diagnostics(k, f), "gap_diagnostics", "usable_confusions"),
    (lambda k, p, b, f: diagnostics.gap_profile(k, f), "gap_profile", "usable_confusions"),
    (lambda k, p, b, f: diagnostics.gap_sensitivity(k, f), "gap_sensitivity", "usable_confusions"),
    (lambda k, p, b, f: diagnostics.model_checks(k, f), "model_checks", "evaluate_multiclass"),
    (lambda k, p, b, f: diagnostics.prior_predictive_check(k), "prior_predictive_check", None),
    (lambda k, p, b, f: inference.bootstrap_em(k, f), "bootstrap_em", "bootstrap_multiclass_nc_ece"),
    (lambda k, p, b, f: plotting.reliability_table(p, k.majority_vote(), np.linspace(0, 1, 11)),
     "reliability_table", "top_label_ece"),
    (lambda k, p, b, f: plotting.reliability_diagram(nb.nc_ece(b, f.channel), data=k), "reliability_diagram",
     "plot_top_label_reliability"),
    (lambda k, p, b, f: plotting.NoisyCalibrationDisplay.from_predictions(p, b, f),
     "NoisyCalibrationDisplay.from_predictions", "plot_top_label_reliability"),
]
IDS = [f"{i:02d}-{name}" for i, (_, name, _) in enumerate(ENTRIES)]


def _check_message(message: str, name: str, alternative, n_classes: int) -> None:
    assert message.startswith(f"{name} {DEFINED}"), message
    if alternative is None:
        assert "It has no K-class counterpart." in message, message
    else:
        assert f"For K classes use {alternative}" in message, message
    # Two classes: refused too (which class is positive is the caller's choice), with the binary view spelled out.
    two = "`data.to_binary()`" in message or "`probs[:, 1]`" in message
    assert two == (n_classes == 2), message


@pytest.mark.parametrize("call, name, alternative", ENTRIES, ids=IDS)
def test_binary_only_entry_names_its_k_class_alternative(call, name, alternative, k_data, binary):
    b, fit = binary
    with pytest.raises(ValueError) as info:
        call(k_data, k_data.probs, b, fit)
    _check_message(str(info.value), name, alternative, k_data.n_classes)


@pytest.mark.parametrize("fit", [nb.fit_em, nb.fit_map, nb.fit_nuts])
@pytest.mark.parametrize("model", ["histogram", "monotone", "platt"])
def test_calibration_curve_models_are_binary(fit, model):
    # K > 2: the fit's one door refuses the calibration-curve models before handing over to the K-class fit.
    with pytest.raises(ValueError) as info:
        fit(_multiclass(3), model=model)
    name = fit.__name__
    _check_message(str(info.value), f"{name}(model={model!r})", f"{name}_multiclass with model 'grouped'", 3)


@pytest.mark.parametrize("fit", [nb.fit_em, nb.fit_map, nb.fit_nuts])
def test_binary_fits_refuse_a_two_class_multiclass_set(fit):
    # K = 2: the one door keeps the binary fit (two classes), which asks for the binary view or the K-class fit.
    with pytest.raises(ValueError) as info:
        fit(_multiclass(2))
    _check_message(str(info.value), fit.__name__, f"{fit.__name__}_multiclass", 2)


@pytest.mark.parametrize("rule", ["gap", "squared_gap"])
def test_gap_weight_rules_are_binary(rule, k_data):
    fit = nb.fit_em_multiclass(k_data, n_starts=1)
    with pytest.raises(ValueError, match=rf"weights='{rule}' {DEFINED}.*For K classes use weights='iv' or 'equal'"):
        nb.top_label_nc_ece(k_data.probs, k_data.responses, fit.confusion, weights=rule)


def test_out_of_core_statistics_name_the_k_class_route():
    # Binary statistics (no `classes`) refuse K-class labels naming the K-class route, which accepts them.
    data = _multiclass(3)
    long = data.to_long()
    with pytest.raises(ValueError, match=r"labels must be 0 or 1; .* For K classes pass `classes=`"):
        nb.stats_from_chunks([long], layout="long", score=None)
    stats = nb.stats_from_chunks([long], layout="long", classes=data.classes)
    assert stats.n_classes == 3 and stats.n_items == data.n_items


def test_binary_data_still_pass(binary):
    # The check passes binary input unchanged: the same calls on the binary set run.
    data, fit = binary
    assert np.isfinite(nb.nc_ece(data, fit.channel).value)
    assert nb.TemperatureScaling().fit(data.scores, data, channel=fit.channel).predict(data.scores).shape == \
        (data.n_items,)
    assert len(nb.label_issues(data, fit)) == data.n_items


# ------------------------------------------------------------------ negative controls: the alternatives accept it
@pytest.fixture(scope="module")
def k_fit(k_data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nb.fit_em_multiclass(k_data, n_starts=2)


def test_k_class_alternatives_accept_the_same_data(k_data, k_fit):
    p, resp, conf = k_data.probs, k_data.responses, k_fit.confusion
    clean = k_fit.clean_label_probability(k_data)
    onehot = np.eye(k_data.n_classes)[k_data.majority_vote()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isfinite(nb.top_label_nc_ece(p, resp, conf).value)
        assert np.isfinite(nb.classwise_nc_ece(p, resp, conf).value)
        assert np.isfinite(top_label_ece(p, onehot).value) and np.isfinite(classwise_ece(p, clean).value)
        for recal in (recalibration.MulticlassTemperatureScaling(), recalibration.VectorScaling(),
                      recalibration.TopLabelHistogram()):
            assert recal.fit(p, clean).predict_proba(p).shape == p.shape
        for recal in (recalibration.PosteriorMulticlassTemperature(), recalibration.PosteriorTopLabelHistogram()):
            assert recal.fit(p, resp, conf[None]).predict_proba(p).shape == p.shape
        assert len(multiclass_label_issues(k_data, clean)) == k_data.n_items
        assert 0 <= corrected_accuracy_multiclass(p, clean, n_replicates=20).accuracy <= 1
        assert np.isfinite(nb.posterior_top_label_nc_ece(p, resp, conf[None]).value)
        assert np.isfinite(nb.posterior_classwise_nc_ece(p, resp, conf[None]).value)
        assert np.isfinite(reference.bootstrap_top_label_nc_ece(
            p, resp, n_boot=3, estimator=inference.multiclass_em_estimator(n_starts=1)).value)
        assert len(reference.naive_multiclass_ece(p, resp)) > 0
        assert np.asarray(usable_confusions(conf)).shape[0] == k_data.n_annotators
        assert nb.evaluate_multiclass(k_data, n_boot=3, checks=True).kind == "multiclass"


# A K-class fit is a FitResult too (one result type for every K), so a binary consumer given binary data and a
# K-class fit must refuse the fit by name, not fail later on its missing (fpr, tpr) channel.
FIT_ENTRIES = [
    (lambda b, kf: inference.bootstrap_em(b, kf, n_boot=2), "bootstrap_em", "bootstrap_multiclass_nc_ece"),
    (lambda b, kf: nb.posterior_nc_ece(b, kf), "posterior_nc_ece", "docs/multiclass.md"),
    (lambda b, kf: diagnostics.model_checks(b, kf), "model_checks", "evaluate_multiclass"),
    (lambda b, kf: diagnostics.gap_profile(b, kf), "gap_profile", "usable_confusions"),
    (lambda b, kf: nb.labels.label_issues(b, kf), "label_issues", "clean_label_probability"),
]


@pytest.mark.parametrize("call, name, instead", FIT_ENTRIES, ids=[e[1] for e in FIT_ENTRIES])
def test_k_class_fit_given_to_a_binary_consumer_is_refused_by_name(binary, call, name, instead):
    data, _ = binary
    k_fit = nb.fit_em(_multiclass(3), model="dawid_skene")
    assert isinstance(k_fit, nb.FitResult)
    with pytest.raises(ValueError, match=DEFINED) as err:
        call(data, k_fit)
    text = str(err.value)
    assert name in text and "K-class data with 3 classes" in text and instead in text, text


def test_binary_fit_passes_the_fit_check(binary):
    # Negative control: the same check lets the binary fit through (the call runs to its result).
    data, fit = binary
    assert np.isfinite(nb.posterior_nc_ece(data, fit, n_draws=20).value)
