"""Renamed keywords and attributes of noisycal_bayes.labels (issue 15, item 7): ``prob`` -> ``level``,
``max_draws`` -> ``n_draws``. The old names still work, give the same numbers, and warn."""
import numpy as np
import pytest

from noisycal_bayes.labels import annotation_posteriors, corrected_accuracy, item_posteriors
from noisycal_bayes.simulate import simulate_annotations
from noisycal_bayes.inference.em import fit_em


@pytest.fixture(scope="module")
def small():
    sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], seed=3)
    return sim, fit_em(sim.data, model="dawid_skene", n_starts=2)


def test_old_keywords_warn_and_mean_the_same(small):
    sim, fit = small
    new = item_posteriors(sim.data, fit, level=0.8, n_draws=5)
    with pytest.warns(DeprecationWarning, match="`prob` is deprecated.*use `level`"):
        old = item_posteriors(sim.data, fit, prob=0.8, n_draws=5)
    with pytest.warns(DeprecationWarning, match="`max_draws` is deprecated.*use `n_draws`"):
        annotation_posteriors(sim.data, fit, max_draws=5)
    np.testing.assert_array_equal(old["p_positive"], new["p_positive"])
    assert old.attrs["level"] == new.attrs["level"] == 0.8


def test_old_keyword_errors_name_what_the_caller_wrote(small):
    sim, fit = small
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="`prob` must lie strictly between"):
        item_posteriors(sim.data, fit, prob=1.5)
    with pytest.raises(TypeError, match="got both `prob` .* and `level`"):
        item_posteriors(sim.data, fit, prob=0.8, level=0.7)

