"""``evaluate(K-class data)`` and ``evaluate_multiclass(data)`` give one answer (noisycal_bayes/evaluation/__init__.py:
``evaluate`` passes on only the options the caller set; docs/multiclass.md)."""
import json

import pytest

from noisycal_bayes.data import MulticlassAnnotationSet
from noisycal_bayes.evaluation import MulticlassEvaluation, evaluate, evaluate_multiclass
from noisycal_bayes.simulate import simulate_multiclass


@pytest.fixture(scope="module")
def data():
    sim = simulate_multiclass(300, 3, 3, seed=1)
    return MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=3, probs=sim.probs)


def test_both_doors_give_the_same_result_with_evaluate_multiclass_defaults(data):
    a = evaluate(data, n_boot=0, checks=False)
    b = evaluate_multiclass(data, n_boot=0, checks=False)
    assert isinstance(a, MulticlassEvaluation)
    assert (a.method, a.bins) == ("em", 15)  # evaluate_multiclass's defaults, not evaluate's binary ones
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())


def test_options_the_caller_sets_are_passed_on(data):
    ev = evaluate(data, method="em", bins=7, n_boot=0, checks=False)
    assert ev.bins == 7 and len(ev.reliability) == 7


def test_binary_options_and_unknown_names_are_errors_for_k_classes(data):
    with pytest.raises(ValueError, match="apply to binary data only"):
        evaluate(data, groups=5)
    with pytest.raises(ValueError, match="apply to binary data only"):
        evaluate(data, n_starts=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_bins'"):
        evaluate(data, n_bins=5)
