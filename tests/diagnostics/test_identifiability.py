"""Tests for noisycal_bayes/data/design.py (the design checks; re-exported by noisycal_bayes.diagnostics)."""
import warnings

import numpy as np
import pytest

from noisycal_bayes.data import AnnotationSet
from noisycal_bayes.data.design import MIN_PREVALENCE_SPREAD, check_design, check_prevalence_spread
from noisycal_bayes.warnings import IdentifiabilityWarning


def _data(j):
    rng = np.random.default_rng(0)
    return AnnotationSet.from_wide(rng.integers(0, 2, (20, j)), rng.random(20))


def test_one_annotator_is_an_error_naming_it():
    with pytest.raises(ValueError, match="single annotator \\(\\[0\\]\\)"):
        check_design(_data(1), "grouped")


def test_two_annotators_marginal_warns_grouped_does_not():
    with pytest.warns(IdentifiabilityWarning, match="§D.1"):
        notes = check_design(_data(2), "dawid_skene")
    assert len(notes) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_design(_data(2), "grouped") == []
        assert check_design(_data(3), "dawid_skene") == []


def test_prevalence_spread_warns_only_for_two_annotators_with_groups():
    flat = np.array([0.40, 0.41, 0.42])
    assert flat.max() - flat.min() < MIN_PREVALENCE_SPREAD
    with pytest.warns(IdentifiabilityWarning, match="barely differ"):
        check_prevalence_spread(flat, 2, "grouped")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_prevalence_spread(flat, 3, "grouped") == []      # third moments identify J >= 3
        assert check_prevalence_spread(flat, 2, "platt") == []
        assert check_prevalence_spread(np.array([0.2, 0.6]), 2, "histogram") == []


def test_diagnostics_keeps_the_public_names():
    import noisycal_bayes.data.design as design
    import noisycal_bayes.diagnostics as diagnostics

    for name in ("MIN_PREVALENCE_SPREAD", "check_design", "check_prevalence_spread"):
        assert getattr(diagnostics, name) is getattr(design, name)
