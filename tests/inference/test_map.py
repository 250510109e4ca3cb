"""Tests for noisycal_bayes/inference/map.py: the optimiser on the NumPyro log density.

Independent routes: the EM fixed point (closed-form M-steps on compressed counts) must equal the mode
found by Newton steps on the NumPyro density; the Platt MAP must equal a SciPy optimisation of a
likelihood and prior written out in NumPy/SciPy.
"""
import numpy as np
import pytest
from scipy import optimize, stats

from noisycal_bayes.core import clipped_logit
from noisycal_bayes.inference import fit_em, fit_map
from noisycal_bayes.models import Prior
from noisycal_bayes.simulate import simulate_annotations
from noisycal_bayes.data import Binning

SIM = simulate_annotations(1500, fpr=[0.1, 0.2, 0.05], tpr=[0.9, 0.75, 0.7], curve="overconfident", missing=0.1,
                           seed=5)
# Newton stops when the max-abs gradient of the per-item objective is below 1e-10 (or no step can improve it);
# with the smallest Hessian eigenvalue here about 1e-2 the parameter error is below ~1e-8. EM with tol=1e-12
# stops within ~1e-10 of its fixed point. 1e-7 covers both with room.
ATOL = 1e-7


def _compare(a, b, atol=ATOL):
    np.testing.assert_allclose(a.channel.fpr, b.channel.fpr, atol=atol, rtol=0)
    np.testing.assert_allclose(a.channel.tpr, b.channel.tpr, atol=atol, rtol=0)
    np.testing.assert_allclose(a.prevalence, b.prevalence, atol=atol, rtol=0)


def test_em_fixed_point_is_the_map_of_the_numpyro_density():
    em = fit_em(SIM.data, groups=Binning.equal_mass(5), tol=1e-12)
    mode = fit_map(SIM.data, groups=Binning.equal_mass(5), init="random", n_starts=4)
    assert mode.converged and mode.method == "map"
    _compare(mode, em)
    np.testing.assert_allclose(mode.loglik, em.loglik, rtol=1e-12)


def test_map_em_equals_map_with_an_informative_prior():
    # Pseudo-count EM maximises the posterior in (fpr, tpr, prevalence) coordinates; fit_map maximises NumPyro's
    # density of (fpr, u, prevalence) corrected by the Jacobian 1 / (1 - fpr). Both must find the same mode.
    prior = Prior(fpr=(2.0, 8.0), u=(1.0, 3.0), prevalence=(3.0, 2.0))
    em = fit_em(SIM.data, groups=Binning.equal_mass(5), prior=prior, tol=1e-12)
    mode = fit_map(SIM.data, groups=Binning.equal_mass(5), prior=prior, init="random", n_starts=4)
    _compare(mode, em)
    # and the prior moved the estimate: the test can fail if the prior were ignored.
    flat = fit_em(SIM.data, groups=Binning.equal_mass(5), tol=1e-12)
    assert np.max(np.abs(flat.channel.fpr - em.channel.fpr)) > 1e-4


def test_monotone_map_equals_em_when_the_order_constraint_is_inactive():
    # The default monotone prior is uniform on 0 < pi_1 < ... < pi_K < 1, i.e. flat in prevalence coordinates, so
    # when the unconstrained MLE is already increasing the monotone MAP is that MLE.
    em = fit_em(SIM.data, groups=Binning.equal_mass(5), tol=1e-12)
    assert np.all(np.diff(em.prevalence) > 0.05)
    mode = fit_map(SIM.data, model="monotone", groups=Binning.equal_mass(5), n_starts=2)
    _compare(mode, em)


def _platt_negative_log_posterior(theta, labels, s, prior):
    """-[sum_i log p(A_i) + log prior] in (fpr, tpr, slope, intercept), written out in NumPy/SciPy."""
    j = labels.shape[1]
    fpr, tpr, slope, intercept = theta[:j], theta[j:2 * j], theta[2 * j], theta[2 * j + 1]
    if np.any(fpr <= 0) or np.any(tpr >= 1) or np.any(tpr <= fpr):
        return np.inf
    m = 1 / (1 + np.exp(-(slope * s + intercept)))
    obs, pos = labels >= 0, labels == 1
    l0 = np.where(obs, np.where(pos, np.log(fpr), np.log1p(-fpr)), 0).sum(1)
    l1 = np.where(obs, np.where(pos, np.log(tpr), np.log1p(-tpr)), 0).sum(1)
    lik = np.logaddexp(np.log1p(-m) + l0, np.log(m) + l1).sum()
    u = (tpr - fpr) / (1 - fpr)
    # density of (fpr, tpr): Beta(fpr) Beta(u) / (1 - fpr)
    lp = (stats.beta(*prior.fpr).logpdf(fpr) + stats.beta(*prior.u).logpdf(u) - np.log1p(-fpr)).sum()
    lp += stats.norm(*prior.slope).logpdf(slope) + stats.norm(*prior.intercept).logpdf(intercept)
    return -(lik + lp)


@pytest.mark.slow  # 9.5 s CPU cold (the Platt MAP program); make test-all runs it
def test_platt_map_equals_an_independent_scipy_optimisation():
    prior = Prior(fpr=(2.0, 5.0), u=(2.0, 1.5))
    mode = fit_map(SIM.data, model="platt", prior=prior, n_starts=2)
    labels, s = SIM.data.labels, np.asarray(clipped_logit(SIM.data.scores))
    x0 = np.r_[np.full(3, 0.2), np.full(3, 0.8), 1.0, 0.0]
    n = SIM.data.n_items

    def per_item(theta):
        return _platt_negative_log_posterior(theta, labels, s, prior) / n

    # SciPy's BFGS with forward-difference gradients (error ~ sqrt(machine eps) ~ 1.5e-8 per item); with Hessian
    # eigenvalues ~1e-2 per item that leaves the parameters within ~1e-6 of the mode.
    with np.errstate(invalid="ignore"):  # finite differences across the boundary of the domain give inf - inf
        res = optimize.minimize(per_item, x0, method="BFGS", options={"gtol": 1e-9})
    ours = np.r_[mode.point["fpr"], mode.point["tpr"], mode.point["slope"], mode.point["intercept"]]
    # Our mode is at least as good as SciPy's (to rounding of the objective) ...
    assert per_item(ours) <= res.fun + 1e-12
    # ... and the same point.
    np.testing.assert_allclose(ours, res.x, atol=1e-5)
    assert 0.3 < mode.point["slope"] < 0.7  # the simulated curve is sigmoid(0.5 logit z)


def test_bad_arguments():
    with pytest.raises(ValueError, match="init"):
        fit_map(SIM.data, init="prior")
    with pytest.raises(ValueError, match="Prior"):
        fit_map(SIM.data, prior=((1, 1), (1, 1), (1, 1)))
    with pytest.raises(ValueError, match="n_starts"):
        fit_map(SIM.data, n_starts=0)


@pytest.mark.slow  # 8-64 s with a cold compilation cache (CI); make test-all runs it
def test_pooled_map_is_a_stationary_point_of_the_potential_found_by_scipy_too():
    """pooling='partial': the Newton mode equals an independent L-BFGS minimisation (SciPy) of NumPyro's
    potential energy from another start (the annotators' z at 0), to the optimisers' tolerance."""
    import jax
    import pandas as pd
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import potential_energy, unconstrain_fn

    from noisycal_bayes.core import x64
    from noisycal_bayes.data import AnnotationSet
    from noisycal_bayes.inference._common import pooled_bound, pooled_inputs, pooled_start

    rng = np.random.default_rng(4)
    n, n_ann = 80, 6
    fpr = np.array([0.1, 0.15, 0.05, 0.2, 0.1, 0.85])  # annotator 5 adversarial
    tpr = np.array([0.9, 0.8, 0.85, 0.7, 0.95, 0.15])
    y = rng.random(n) < 0.4
    item = np.repeat(np.arange(n), 4)
    ann = np.concatenate([rng.choice(n_ann, 4, replace=False) for _ in range(n)])
    lab = (rng.random(item.size) < np.where(y[item], tpr[ann], fpr[ann])).astype(int)
    data = AnnotationSet.from_crowdkit(pd.DataFrame({"task": item, "worker": ann, "label": lab}))
    fit = fit_map(data, model="dawid_skene", pooling="partial")
    assert fit.method == "map" and fit.converged and fit.settings["pooling"] == "partial"
    # An annotator with tpr < fpr: the channel holds it with the crowd orientation (gaps of any sign).
    assert fit.channel is not None and fit.channel.orientation == "crowd" and (fit.channel.gap < 0).any()
    assert fit.point["gap"][5] < 0 and fit.details["flagged"]["adversarial"] == [5]
    assert fit.details["population"]["tpr"]["median"] > fit.details["population"]["fpr"]["median"]

    from noisycal_bayes.models.inputs import resolve_assignment

    args, static = pooled_inputs(data, "dawid_skene", resolve_assignment(data, "dawid_skene", None, "t"))
    fn = pooled_bound(static)
    with x64():
        a = tuple(np.asarray(v) for v in args) + (Prior().params(),)
        start = dict(pooled_start(args, static), z_fpr=np.zeros(n_ann), z_tpr=np.zeros(n_ann))
        flat, unravel = ravel_pytree(unconstrain_fn(fn, a, {}, start))
        vg = jax.jit(jax.value_and_grad(lambda q: potential_energy(fn, a, {}, unravel(q))))
        res = optimize.minimize(lambda q: tuple(np.asarray(v, np.float64) for v in vg(q)), np.asarray(flat),
                                jac=True, method="L-BFGS-B", options={"gtol": 1e-9, "ftol": 1e-15, "maxiter": 5000})
        mode, _ = ravel_pytree(unconstrain_fn(fn, a, {}, {k: np.asarray(v) for k, v in fit.details["sites"].items()}))
    # Both minimise the same smooth function with a positive-definite Hessian at the mode (Newton converged);
    # L-BFGS stops at gradient 1e-9 x (objective scale ~1e2): parameter error well below 1e-4.
    np.testing.assert_allclose(np.asarray(mode), res.x, atol=1e-4)
    assert res.fun <= float(vg(np.asarray(mode))[0]) + 1e-6


@pytest.mark.parametrize("fit_name", ["fit_map", "fit_nuts"])
def test_pooled_fits_need_an_annotation_set_with_two_annotators(fit_name):
    # The shared check of both pooled routes (inference.map.pooled_data_inputs) raises before any compilation.
    from noisycal_bayes import inference
    from noisycal_bayes.data import AnnotationSet, SufficientStats

    fit = getattr(inference, fit_name)
    sim = simulate_annotations(200, fpr=[0.1, 0.2], tpr=[0.9, 0.8], seed=0)
    suff = SufficientStats.from_annotations(sim.data, bins=Binning.equal_width(5))
    with pytest.raises(ValueError, match=f"{fit_name}: pooling='partial' evaluates the likelihood per response"):
        fit(suff, pooling="partial", groups=Binning.equal_width(5))
    one = AnnotationSet.from_wide(sim.data.labels[:, :1], sim.data.scores)
    with pytest.raises(ValueError, match=f"{fit_name}: the pooled model needs at least 2 annotators; got 1"):
        fit(one, pooling="partial", groups=Binning.equal_width(5))


def test_fit_map_on_class_data_is_fit_map_multiclass():
    # One door: fit_map(K-class data) is fit_map_multiclass with its own defaults (MAP-EM, MulticlassPrior()).
    from noisycal_bayes.data import MulticlassAnnotationSet
    from noisycal_bayes.inference import MulticlassMAPFit, fit_map_multiclass
    from noisycal_bayes.simulate import simulate_multiclass

    sim = simulate_multiclass(600, 3, 3, accuracy=0.8, seed=1)
    data = MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=3, probs=sim.probs)
    a, b = fit_map(data, model="dawid_skene"), fit_map_multiclass(data, model="dawid_skene")
    assert isinstance(a, MulticlassMAPFit)
    np.testing.assert_array_equal(a.confusion, b.confusion)
    assert a.log_posterior == b.log_posterior
    with pytest.raises(ValueError, match=r"\['n_starts'\] apply to binary data only.*fit_map_multiclass"):
        fit_map(data, n_starts=3)
