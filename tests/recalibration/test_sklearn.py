"""scikit-learn conventions of the recalibration maps (issue 19): ``get_params(deep)``, ``set_params``,
``clone``, the changed-only ``repr`` and the checks of :mod:`sklearn.utils.estimator_checks` that apply.

scikit-learn is a dev dependency only: the maps implement its parameter protocol themselves
(``noisycal_bayes.recalibration._params.ParamsMixin``), and these tests check it against scikit-learn.

Estimator checks run verbatim (they need only the constructor, ``get_params`` and ``set_params``):
    check_get_params_invariance, check_set_params, check_parameters_default_constructible,
    check_no_attributes_set_in_init, check_estimator_cloneable, check_estimator_repr,
    check_do_not_raise_errors_in_init_or_set_params, check_mixin_order, check_estimator_tags_renamed.
Checks re-implemented here for our ``fit`` signature (scikit-learn's versions call ``fit(X, y)`` with a
2-D ``X``; ours is ``fit(scores, labels_or_annotations, channel=...)`` / ``fit(data, fit_result)``), with the
same assertion: check_estimators_overwrite_params, check_dont_overwrite_parameters,
check_estimators_fit_returns_self, check_fit_idempotent, check_estimators_pickle, check_estimators_unfitted.
Checks that cannot apply, and why:
    * every check that builds ``X`` of shape (n_samples, n_features) and ``y`` (dtypes, NaN/inf, sparse,
      1-sample / 1-feature, ``n_features_in_``, feature names, sample-order / subset invariance on ``X``,
      pipelines, ``fit2d_predict1d``, ``fit_score_takes_y``, ``sample_weight``...): the maps take 1-D scores
      in [0, 1] and an AnnotationSet + Channel (or a fit result), not a feature matrix, and have no
      ``score`` / ``transform`` / ``n_features_in_``;
    * the classifier / regressor / transformer / clusterer / outlier checks: a map is none of these;
    * ``check_valid_tag_types`` and other tag checks: tags come from ``__sklearn_tags__``, which returns a
      ``sklearn.utils.Tags`` instance and so needs scikit-learn at run time;
    * ``check_param_validation``: scikit-learn's ``_parameter_constraints`` machinery; our maps validate
      their parameters in ``fit`` with errors naming the offending value.
"""
import pickle

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils import estimator_checks

from noisycal_bayes import simulate_annotations
from noisycal_bayes.data import Binning
from noisycal_bayes.recalibration import (NotFittedError, PlattScaling, PosteriorHistogram, PosteriorPlatt,
                                          PosteriorTemperature, ProjectedHistogram, TemperatureScaling)
from noisycal_bayes.warnings import BoundaryWarning

from ..propagate._fakes import channel_draws, fake_nuts, fake_platt, histogram_fit

FPR, TPR = [0.1, 0.2, 0.15], [0.85, 0.8, 0.9]
CLASSES = [TemperatureScaling, PlattScaling, ProjectedHistogram, PosteriorHistogram, PosteriorPlatt,
           PosteriorTemperature]
# A non-default value for every parameter (all must differ from the defaults).
NON_DEFAULT = {
    TemperatureScaling: {"bounds": (0.1, 10.0)},
    PlattScaling: {"alpha_bounds": (0.1, 5.0), "beta_bounds": (-2.0, 2.0)},
    ProjectedHistogram: {"bins": Binning.equal_mass(4)},
    PosteriorHistogram: {"n_draws": 7},
    PosteriorPlatt: {"n_draws": 7},
    PosteriorTemperature: {"bounds": (0.1, 10.0), "weights": "equal", "bootstrap": False, "n_draws": 7, "seed": 3},
}
INIT_PARAMS = {cls: sorted(NON_DEFAULT[cls]) for cls in CLASSES}


@pytest.fixture(scope="module")
def fitters():
    """``cls -> (fit(estimator) -> estimator, scores)``: a cheap fit of each map on small simulated data."""
    sim = simulate_annotations(300, fpr=FPR, tpr=TPR, curve="overconfident", seed=5)
    data, z = sim.data, sim.data.scores
    rng = np.random.default_rng(2)
    em = histogram_fit(data, n_bins=4)
    f, t = channel_draws(rng, FPR, TPR, 1, 12)
    prev = np.clip(em.point["prevalence"] + 0.05 * rng.standard_normal((1, 12, em.groups.n_groups)), 0.0, 1.0)
    hist_post = fake_nuts(em, {"fpr": f, "tpr": t, "prevalence": prev})
    platt_post = fake_platt(data, fpr=f, tpr=t, slope=0.5 + 0.1 * rng.standard_normal((1, 12)),
                            intercept=0.1 * rng.standard_normal((1, 12)))
    return {
        TemperatureScaling: (lambda m: m.fit(z, data, channel=sim.channel), z),
        PlattScaling: (lambda m: m.fit(z, data.vote_fraction()), z),
        ProjectedHistogram: (lambda m: m.fit(z, data, channel=sim.channel), z),
        PosteriorHistogram: (lambda m: m.fit(data, hist_post), z),
        PosteriorPlatt: (lambda m: m.fit(data, platt_post), z),
        PosteriorTemperature: (lambda m: m.fit(data, sim.channel), z),
    }


def _public_attrs(est):
    return {k for k in vars(est) if not k.startswith("_")}


# ------------------------------------------------------------------------------------- parameter protocol
@pytest.mark.parametrize("cls", CLASSES)
def test_get_params_lists_the_init_parameters(cls):
    est = cls(**NON_DEFAULT[cls])
    shallow = est.get_params(deep=False)
    assert sorted(shallow) == INIT_PARAMS[cls]
    assert shallow == NON_DEFAULT[cls]
    # No parameter is itself an estimator, so deep adds nothing; the default is deep=True, as in sklearn.
    assert est.get_params(deep=True) == shallow == est.get_params()


@pytest.mark.parametrize("cls", CLASSES)
def test_clone_round_trip_keeps_parameters_and_drops_fitted_state(cls, fitters):
    fit, _ = fitters[cls]
    est = fit(cls(**NON_DEFAULT[cls]))
    copy = clone(est)
    assert type(copy) is cls and copy is not est
    assert copy.get_params(deep=False) == est.get_params(deep=False)
    assert not any(k.endswith("_") for k in vars(copy)), "clone must not carry fitted attributes"
    with pytest.raises(NotFittedError):
        copy.predict([0.3])


@pytest.mark.parametrize("cls", CLASSES)
def test_set_params_returns_self_and_sets_values(cls):
    est = cls()
    assert est.set_params(**NON_DEFAULT[cls]) is est
    assert est.get_params(deep=False) == NON_DEFAULT[cls]
    assert est.set_params() is est


def test_set_params_names_every_unknown_parameter():
    with pytest.raises(ValueError, match=r"\['bound', 'foo'\] for TemperatureScaling.*\['bounds'\]"):
        TemperatureScaling().set_params(bound=(0.1, 1.0), foo=1)
    est = PlattScaling()
    with pytest.raises(ValueError, match="'alpha_bounds' is a tuple, not an estimator"):
        est.set_params(beta_bounds=(-1.0, 1.0), alpha_bounds__low=0.5)
    assert est.get_params() == PlattScaling().get_params(), "a failed set_params must leave the map unchanged"


def test_set_params_reaches_a_nested_estimator():
    """``name__sub`` sets a parameter of a parameter that is itself an estimator (as in scikit-learn)."""

    class Holder(TemperatureScaling):
        def __init__(self, *, inner=None, bounds=(0.05, 20.0)):
            self.inner = inner
            self.bounds = bounds

    outer = Holder(inner=PlattScaling())
    assert outer.get_params(deep=True)["inner__beta_bounds"] == PlattScaling().beta_bounds
    assert "inner__beta_bounds" not in outer.get_params(deep=False)
    assert outer.set_params(inner__beta_bounds=(-1.0, 1.0)) is outer
    assert outer.inner.beta_bounds == (-1.0, 1.0)
    with pytest.raises(ValueError, match=r"\['inner__nope'\]"):
        outer.set_params(inner__nope=1)


def test_repr_shows_only_changed_parameters_and_evaluates_back():
    assert repr(TemperatureScaling()) == "TemperatureScaling()"
    # An equal value of another type (int bounds) is not a change, as in scikit-learn.
    assert repr(TemperatureScaling(bounds=(0.05, 20))) == "TemperatureScaling()"
    assert repr(PlattScaling(beta_bounds=(-2.0, 2.0))) == "PlattScaling(beta_bounds=(-2.0, 2.0))"
    assert repr(PosteriorTemperature(seed=3, weights="equal")) == "PosteriorTemperature(seed=3, weights='equal')"
    ph = ProjectedHistogram(bins=Binning.equal_mass(4))
    back = eval(repr(ph), {"ProjectedHistogram": ProjectedHistogram, "Binning": Binning})  # noqa: S307
    assert repr(back) == repr(ph) == "ProjectedHistogram(bins=Binning.equal_mass(4))"


def test_grid_of_clones_fits_each_setting(fitters):
    """The scikit-learn workflow: clone a template and set each grid point's parameters."""
    fit, z = fitters[TemperatureScaling]
    grid = ParameterGrid({"bounds": [(0.05, 20.0), (0.05, 1.2)]})
    with pytest.warns(BoundaryWarning):  # the second box stops below the optimum
        temps = [fit(clone(TemperatureScaling()).set_params(**p)).temperature_ for p in grid]
    assert temps[0] > 1.2 and temps[1] == pytest.approx(1.2)  # overconfident scores: the oracle T is 2


# ------------------------------------------------------------------------------- sklearn's checks, verbatim
VERBATIM = ["check_get_params_invariance", "check_set_params", "check_parameters_default_constructible",
            "check_no_attributes_set_in_init", "check_estimator_cloneable", "check_estimator_repr",
            "check_do_not_raise_errors_in_init_or_set_params", "check_mixin_order",
            "check_estimator_tags_renamed"]


@pytest.mark.parametrize("check", VERBATIM)
@pytest.mark.parametrize("cls", CLASSES)
def test_sklearn_estimator_check(cls, check):
    getattr(estimator_checks, check)(cls.__name__, cls())


def test_a_broken_estimator_fails_the_checks():
    """The checks can fail: an ``__init__`` that transforms its parameter breaks them."""

    class Broken(TemperatureScaling):
        def __init__(self, *, bounds=(0.05, 20.0)):
            self.bounds = list(bounds)

    with pytest.raises((AssertionError, RuntimeError)):  # RuntimeError: clone's own "modifies parameter" check
        estimator_checks.check_parameters_default_constructible("Broken", Broken())
    with pytest.raises((AssertionError, RuntimeError)):
        estimator_checks.check_estimator_cloneable("Broken", Broken())


# ------------------------------------------------------------- sklearn's fit checks, for our fit signature
@pytest.mark.parametrize("cls", CLASSES)
def test_fit_returns_self_and_does_not_overwrite_parameters(cls, fitters):
    """check_estimators_fit_returns_self + check_estimators_overwrite_params + check_dont_overwrite_parameters."""
    fit, _ = fitters[cls]
    est = cls(**NON_DEFAULT[cls])
    before_hash = {k: joblib.hash(v) for k, v in est.get_params(deep=False).items()}
    before_attrs = _public_attrs(est)
    assert fit(est) is est
    assert {k: joblib.hash(v) for k, v in est.get_params(deep=False).items()} == before_hash
    added = _public_attrs(est) - before_attrs
    assert added and all(k.endswith("_") for k in added), f"fit added public attributes without '_': {added}"


@pytest.mark.parametrize("cls", CLASSES)
def test_fit_is_idempotent_and_pickles(cls, fitters):
    """check_fit_idempotent + check_estimators_pickle + check_estimators_unfitted."""
    fit, z = fitters[cls]
    est = cls(**NON_DEFAULT[cls])
    with pytest.raises(NotFittedError):
        est.predict(z)
    first = fit(est).predict(z)
    np.testing.assert_allclose(fit(est).predict(z), first, rtol=1e-9, atol=1e-12)
    restored = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(restored.predict(z), first)
