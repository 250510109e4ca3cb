"""fit_em(model="score_dependent") (issue 36 part 3): EM for the score-dependent channel model.

Independent checks: the mode equals fit_map(model="score_dependent")'s (L-BFGS on NumPyro's potential, another
optimiser on another implementation of the density), and the EM's log posterior equals NumPyro's log density at
fit_map's mode; the M-step's analytic gradient and Hessian equal finite differences; the log posterior never
decreases; one score group is the grouped model's likelihood; every consumer reads the fit's group channels.
"""
import warnings

import numpy as np
import pytest

from noisycal_bayes import Binning
from noisycal_bayes.inference import fit_em, fit_map
from noisycal_bayes.inference import score_em
from noisycal_bayes.inference.alternatives import _table
from noisycal_bayes.models import DEFAULT_PRIOR
from noisycal_bayes.propagate import posterior_nc_ece
from noisycal_bayes.propagate.group_channels import posterior_nc_ece_group_channels
from noisycal_bayes.warnings import ConvergenceWarning
from tests.test_expansion import _grouped_noise
from tests.test_registered_models import _numpy_clean_posterior, _numpy_corrected

GROUPS = Binning.equal_mass(3)


@pytest.fixture(scope="module")
def data():
    """Score-dependent noise (the model's own form), 1500 items, 3 annotators."""
    return _grouped_noise(1500, seed=4)


@pytest.fixture(scope="module")
def pair(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        em = fit_em(data, model="score_dependent", groups=GROUPS, n_starts=3, tol=1e-10)
        mp = fit_map(data, model="score_dependent", groups=GROUPS, seed=0)
    return em, mp


def _theta(point):
    """The unconstrained coordinates of a point of either fit: (channel block, logit prevalences)."""
    G, J = np.shape(point["fpr_group"])
    lay = score_em._Layout(G, J)
    logit = lambda p: np.log(p) - np.log1p(-p)  # noqa: E731
    v = np.zeros(lay.size)
    v[lay.a], v[lay.b] = logit(point["fpr_centre"]), logit(point["u_centre"])
    v[lay.sf], v[lay.su] = np.log(point["tau_fpr"]), np.log(point["tau_u"])
    v[lay.e], v[lay.h] = point["e_fpr"], point["e_u"]
    return lay, v, logit(point["prevalence"])


def _objective(data, point):
    lay, v, z = _theta(point)
    _, inp = _table(data, GROUPS, "test")
    rows = score_em._Rows(inp.patterns, inp.row_group, inp.counts, lay.G)
    return score_em.log_posterior_score_dependent(rows, lay, v, z, DEFAULT_PRIOR, 0.5)[0]


def test_mode_equals_fit_map_and_objective_equals_numpyro_density(data, pair):
    em, mp = pair
    assert (em.model, em.method, em.converged) == ("score_dependent", "em", True)
    assert set(em.point) == set(mp.point)
    # NumPyro's log density (fit_map's L-BFGS objective) at fit_map's mode, recomputed by the EM's own NumPy code.
    assert _objective(data, mp.point) == pytest.approx(mp.details["alternative"]["log_density"], rel=1e-12)
    # The EM reaches that mode: its objective is not below fit_map's (L-BFGS stops at gtol 1e-7), and no higher
    # than rounding plus L-BFGS's shortfall; the channels agree to the optimisers' tolerance.
    obj_em, obj_map = em.details["objective"], mp.details["alternative"]["log_density"]
    assert obj_em == pytest.approx(_objective(data, em.point), rel=1e-12)
    assert -1e-8 <= obj_em - obj_map <= 1e-5
    for k in ("fpr_group", "tpr_group", "prevalence", "fpr", "tpr"):
        np.testing.assert_allclose(em.point[k], mp.point[k], atol=2e-4, err_msg=k)
    for k in ("tau_fpr", "tau_u"):
        assert em.point[k] == pytest.approx(mp.point[k], rel=2e-3)
    np.testing.assert_array_equal(em.groups.index, mp.groups.index)
    # Negative control: the shared-channel fit is another point, far below in the objective and off in the channels.
    shared = fit_em(data, groups=GROUPS, n_starts=3)
    assert np.max(np.abs(em.point["fpr_group"] - shared.channel.fpr[None])) > 0.05


def test_log_posterior_never_decreases(pair):
    em, _ = pair
    trace = em.details["loglik_trace"]
    assert trace.size == em.n_iter + 1 > 3
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
    assert trace[-1] > trace[0] + 1.0  # the iterations did move it (not a fixed start)


def test_m_step_derivatives_equal_finite_differences():
    """The analytic gradient and Hessian of the channel block against central differences of its value."""
    rng = np.random.default_rng(0)
    lay = score_em._Layout(3, 2)
    v = rng.normal(scale=0.7, size=lay.size)
    v[lay.sf], v[lay.su] = -0.5, 0.2
    stats = tuple(rng.uniform(5, 50, size=(3, 2)) for _ in range(4))
    val, grad, hess = score_em._channel_block(lay, v, stats, DEFAULT_PRIOR, 0.5)
    eps = 1e-5
    num_g, num_h = np.zeros(lay.size), np.zeros((lay.size, lay.size))
    for i in range(lay.size):
        d = np.zeros(lay.size)
        d[i] = eps
        up, dn = (score_em._channel_block(lay, v + s * d, stats, DEFAULT_PRIOR, 0.5) for s in (1, -1))
        num_g[i] = (up[0] - dn[0]) / (2 * eps)
        num_h[:, i] = (up[1] - dn[1]) / (2 * eps)
    np.testing.assert_allclose(grad, num_g, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(hess, num_h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(hess, hess.T, atol=1e-12)


def test_one_group_is_the_grouped_model():
    """With one score group the rows' likelihood and E-step are the grouped model's at the same channel (exact), and
    the fitted channel is the grouped model's maximum-likelihood channel up to the prior's O(1 / n) pull."""
    from noisycal_bayes.core import ds_loglik, x64

    sim = _grouped_noise(4000, seed=2, strength=0.0)
    one = np.zeros(sim.n_items, int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rich = fit_em(sim, model="score_dependent", groups=one, n_starts=3)
        flat = fit_em(sim, groups=one, n_starts=3)
    assert rich.n_groups == 1 and rich.converged
    _, inp = _table(sim, one, "test")
    rows = score_em._Rows(inp.patterns, inp.row_group, inp.counts, 1)
    f, t, p = flat.channel.fpr, flat.channel.tpr, np.asarray(flat.prevalence)
    ll, _ = rows.e_step(f[None], t[None], p)
    with x64():
        ref = float(ds_loglik(np.asarray(inp.patterns), np.asarray(inp.row_group), np.asarray(inp.counts), f, t, p))
    assert ll == pytest.approx(ref, rel=1e-12) == pytest.approx(flat.loglik, rel=1e-12)
    # The prior's pull on 4000 items: measured 3e-4 (fpr), 6e-4 (tpr), 1.4e-4 (prevalence).
    np.testing.assert_allclose(rich.point["fpr_group"][0], flat.channel.fpr, atol=2e-3)
    np.testing.assert_allclose(rich.point["tpr_group"][0], flat.channel.tpr, atol=2e-3)
    np.testing.assert_allclose(rich.point["prevalence"], flat.prevalence, atol=2e-3)


def test_consumers_read_the_em_fits_group_channels(data, pair):
    """posterior_nc_ece, the clean-label posterior, log-likelihood and corrected labels of the EM fit are those of its
    group channels (independent NumPy computations, as for the registered MAP fit)."""
    from noisycal_bayes.reference.recalibration import corrected_item_labels

    em, _ = pair
    f, t = em.group_channels
    assert f.shape == (1, em.n_groups, data.n_annotators)
    g = np.asarray(em.groups.index)
    res = posterior_nc_ece(data, em, n_draws=50, seed=2)
    ref = posterior_nc_ece_group_channels(data, g, np.repeat(f, 50, 0), np.repeat(t, 50, 0), seed=2,
                                          model="score_dependent")
    np.testing.assert_array_equal(res.draws, ref.draws)
    p, ll = _numpy_clean_posterior(data.labels, g, f[0], t[0], em.point["prevalence"])
    np.testing.assert_allclose(em.clean_label_probability(data), p, rtol=0, atol=1e-12)
    np.testing.assert_allclose(em.log_likelihood(), ll, rtol=0, atol=1e-9)
    assert em.loglik == pytest.approx(ll.sum(), rel=1e-10)
    np.testing.assert_allclose(corrected_item_labels(data, em, weights="equal").values,
                               _numpy_corrected(data.labels, g, f[0], t[0], np.ones(3)), rtol=0, atol=1e-12)


def test_convergence_contract_and_errors(data):
    with pytest.warns(ConvergenceWarning, match="stopped after 2 iterations"):
        short = fit_em(data, model="score_dependent", groups=GROUPS, n_starts=3, max_iter=2)
    assert not short.converged and short.n_iter == 2 and np.isfinite(short.point["fpr_group"]).all()
    assert any("stopped after 2 iterations" in w for w in short.warnings)
    from noisycal_bayes.inference.bootstrap import bootstrap_em

    with pytest.raises(ValueError, match="refits of the score-dependent model are not implemented"):
        bootstrap_em(data, short)
    with pytest.raises(ValueError, match="model='correlated' has no EM.*fit_map.*fit_nuts"):
        fit_em(data, model="correlated")
    with pytest.raises(ValueError, match="path='sparse', accelerate='auto'"):
        fit_em(data, model="score_dependent", path="sparse")
    with pytest.raises(ValueError, match="`scale` must be a positive number"):
        score_em.fit_em_score_dependent(data, scale=0.0)
    with pytest.raises(ValueError, match="at least two annotators"):
        fit_em(_one_annotator(data), model="score_dependent")
    from noisycal_bayes.data import AnnotationSet

    gold = np.full(data.n_items, -1)
    gold[:7] = 1
    with pytest.raises(ValueError, match="these data have 7 gold labels"):
        fit_em(AnnotationSet.from_wide(data.labels, data.scores, gold=gold), model="score_dependent")


def _one_annotator(data):
    from noisycal_bayes.data import AnnotationSet

    return AnnotationSet.from_wide(data.labels[:, :1], data.scores)
