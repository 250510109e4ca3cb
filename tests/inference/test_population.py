"""Partially pooled Dawid-Skene (inference/population.py, core/population.py): simulated sparse crowds with a
population of confusion rows, the negative control, gold and repeated labels, K = 2, orientation, the
Dirichlet-multinomial fit against scipy.optimize, and cf from the shared data."""
from types import SimpleNamespace
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

import noisycal_bayes as nb
from noisycal_bayes.core.population import (dirichlet_multinomial_loglik, expected_counts,
                                            fit_dirichlet_multinomial, population_m_step)
from noisycal_bayes.inference.population import fit_em_population


def _crowd(K, J, n_items, lo, hi, seed, s=8.0, acc=0.7, gold_frac=0.0, repeat=0.0):
    """Sparse crowd: annotator rows C[j, y] ~ Dirichlet(s m_y), m_y = acc on the diagonal; each annotator labels
    lo..hi random items (repeats: a second label of the same item with probability ``repeat``)."""
    rng = np.random.default_rng(seed)
    m = np.full((K, K), (1 - acc) / (K - 1))
    np.fill_diagonal(m, acc)
    C = np.stack([[rng.dirichlet(s * m[y]) for y in range(K)] for _ in range(J)])
    y_true = rng.integers(0, K, n_items)
    items, anns = [], []
    for j in range(J):
        its = rng.choice(n_items, rng.integers(lo, hi + 1), replace=False)
        its = np.concatenate([its, its[rng.random(its.size) < repeat]])
        items.append(its)
        anns.append(np.full(its.size, j))
    item, ann = np.concatenate(items), np.concatenate(anns)
    u = rng.random(item.size)
    label = (np.cumsum(C[ann, y_true[item]], axis=1) < u[:, None]).sum(axis=1).clip(0, K - 1)
    gold = None
    if gold_frac:
        gold = np.where(rng.random(n_items) < gold_frac, y_true, -1)
    data = SimpleNamespace(responses=(item, ann, label), n_items=n_items, n_annotators=J, n_classes=K,
                           probs=None, gold=gold)
    return data, y_true, m


def _acc(fit, data, y):
    return float(np.mean(np.argmax(fit.clean_label_probability(data), axis=1) == y))


def _quiet(f, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*a, **k)


# K = 3 (8 s on an idle machine) is in make test-all; K = 5 keeps the check in make test (make test was 7:05 on a
# fresh clone, 2026-12-05).
@pytest.mark.parametrize("K,J", [pytest.param(3, 300, marks=pytest.mark.slow), (5, 400)])
def test_pooled_beats_ml_and_recovers_population(K, J):
    data, y, m = _crowd(K, J, 1500, 5, 30, seed=K)
    pooled = _quiet(nb.fit_em_multiclass, data, model="pooled")
    ml = _quiet(nb.fit_em_multiclass, data, model="dawid_skene", n_starts=0)
    a_p, a_m = _acc(pooled, data, y), _acc(ml, data, y)
    se = np.sqrt(a_m * (1 - a_m) / y.size)
    assert a_p >= a_m - 2 * se, (a_p, a_m)
    alpha = pooled.prior[0]
    m_hat = alpha / alpha.sum(axis=1, keepdims=True)
    # SE of a population mean cell: Dirichlet spread of one row over J annotators (s = 8), plus label noise.
    se_m = np.sqrt(m * (1 - m) / (8 + 1) / J + m * (1 - m) / (J * 5))
    assert np.all(np.abs(m_hat - m) < 4 * se_m + 0.01), np.abs(m_hat - m).max()
    assert pooled.model == "pooled" and pooled.confusion.shape == (J, K, K)
    assert np.all(pooled.confusion > 0)


def test_many_labels_pooled_and_ml_agree():
    data, y, _ = _crowd(3, 10, 2000, 1500, 2000, seed=1)
    pooled = _quiet(nb.fit_em_multiclass, data, model="pooled")
    ml = _quiet(nb.fit_em_multiclass, data, model="dawid_skene", n_starts=0)
    assert np.abs(pooled.confusion - ml.confusion).max() < 0.02
    same = np.argmax(pooled.clean_label_probability(data), 1) == np.argmax(ml.clean_label_probability(data), 1)
    assert same.mean() > 0.99


def test_gold_and_repeated_labels():
    data, y, _ = _crowd(3, 200, 800, 3, 10, seed=2, gold_frac=0.2, repeat=0.3)
    fit = _quiet(fit_em_population, data)
    T = fit.clean_label_probability(data)
    g = data.gold >= 0
    assert np.array_equal(np.argmax(T[g], 1), data.gold[g]) and np.allclose(T[g].max(1), 1.0)
    # repeats are extra responses: the expected counts add up to the number of responses (including repeats)
    n = expected_counts(*data.responses, T, data.n_annotators)
    assert np.isclose(n.sum(), data.responses[0].size)
    ml = _quiet(nb.fit_em_multiclass, data, model="dawid_skene", n_starts=0)
    a_p, a_m = _acc(fit, data, y), _acc(ml, data, y)  # about two labels per item: both far from perfect
    assert a_p >= a_m - 2 * np.sqrt(a_m * (1 - a_m) / y.size), (a_p, a_m)


def test_binary_goes_through_the_same_function():
    data, y, _ = _crowd(2, 300, 1000, 5, 20, seed=3, acc=0.75)
    fit = _quiet(nb.fit_em_multiclass, data, model="pooled")
    assert fit.confusion.shape == (300, 2, 2) and fit.converged
    ml = _quiet(nb.fit_em_multiclass, data, model="dawid_skene", n_starts=0)
    a_p, a_m = _acc(fit, data, y), _acc(ml, data, y)
    assert a_p >= a_m - 2 * np.sqrt(a_m * (1 - a_m) / y.size), (a_p, a_m)
    alpha = fit.prior[0]
    assert alpha[1, 1] / alpha[1].sum() > 0.5 > alpha[0, 1] / alpha[0].sum()  # the crowd rule on the population


def test_flipped_start_comes_back_oriented():
    data, y, _ = _crowd(3, 300, 1000, 5, 20, seed=4)
    fit = _quiet(fit_em_population, data)
    perm = np.array([2, 0, 1])
    flipped = SimpleNamespace(confusion=fit.confusion[:, perm, :], prevalence=fit.prevalence[:, perm])
    refit = _quiet(fit_em_population, data, init=flipped)
    assert refit.label_permutation is not None
    alpha = refit.prior[0]
    mbar = alpha / alpha.sum(1, keepdims=True)
    assert np.all(np.argmax(mbar, axis=1) == np.arange(3))
    assert _acc(refit, data, y) == pytest.approx(_acc(fit, data, y), abs=0.01)


def _scipy_dm(counts):
    K = counts.shape[1]
    res = minimize(lambda la: -dirichlet_multinomial_loglik(counts, np.exp(la)), np.zeros(K), method="Nelder-Mead",
                   options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 20000, "maxfev": 20000})
    a = np.exp(res.x)
    return a / a.sum(), a.sum()


def test_dirichlet_multinomial_fit_matches_scipy():
    rng = np.random.default_rng(5)
    alpha = np.array([4.0, 1.0, 0.5])
    p = rng.dirichlet(alpha, size=300)
    counts = np.stack([rng.multinomial(rng.integers(3, 15), q) for q in p]).astype(float)
    counts[:20] *= 0.5  # fractional (expected) counts
    m, s = fit_dirichlet_multinomial(counts, max_iter=5000, tol=1e-12)
    m2, s2 = _scipy_dm(counts)
    assert np.allclose(m, m2, atol=1e-3) and s == pytest.approx(s2, rel=1e-2)
    # the hyperprior lowers the concentration and the fixed point's likelihood is not above the ML one
    m3, s3 = fit_dirichlet_multinomial(counts, max_iter=5000, tol=1e-12, power=2.5)
    assert s3 < s
    assert dirichlet_multinomial_loglik(counts, s3 * m3) <= dirichlet_multinomial_loglik(counts, s * m) + 1e-9


def test_population_m_step_keeps_unlabelled_annotators_at_the_mean():
    counts = np.zeros((2, 2, 2))
    counts[0] = [[3.0, 1.0], [0.0, 2.0]]
    mean = np.array([[0.8, 0.2], [0.3, 0.7]])
    C = population_m_step(counts, mean, np.array([5.0, 10.0]))
    assert np.allclose(C[1], mean)
    assert np.allclose(C[0, 0], (np.array([3.0, 1.0]) + 5 * mean[0]) / 9.0)


def test_cf_real_crowd():
    from noisycal_bayes.experiments.real_data import SHARED_DATA_HINT, shared_data_path

    path = shared_data_path("crowds/cf.csv")
    if path is None:
        pytest.skip(f"crowds/cf.csv not found ({SHARED_DATA_HINT})")
    frame = pd.read_csv(path)
    data = nb.load_multiclass(str(path))
    gold = frame.groupby("item")["gold"].first().reindex(list(data.item_ids)).to_numpy()
    fit = _quiet(nb.fit_em_multiclass, data, model="pooled")
    pred = np.asarray(data.classes)[np.argmax(fit.clean_label_probability(data), 1)]
    acc = float(np.mean(pred.astype(str) == gold.astype(str)))
    assert acc >= 0.873  # IBCC's published 0.883 - 0.01 (crowds README)


def test_pooled_refuses_settings_it_cannot_honour():
    """model='pooled' has one group, one vote start and its own learned prior: setting groups, prior, path or
    n_starts is an error naming them, not a silently ignored option."""
    data, _, _ = _crowd(3, 30, 60, 5, 10, seed=5)
    with pytest.raises(ValueError, match=r"groups, prior cannot be set"):
        nb.fit_em_multiclass(data, model="pooled", groups=np.zeros(60, int), prior=(1.0, 1.0))
    with pytest.raises(ValueError, match=r"n_starts cannot be set"):
        nb.fit_em_multiclass(data, model="pooled", n_starts=10)


def _numpy_pooled_em(sim, weights, *, max_iter=1000, tol=1e-6, prevalence_prior=1.0, power=2.5, dm_steps=20):
    """The pooled EM's iterations written out in NumPy with core.population's functions (the loop the JAX
    while_loop replaced): votes, then [counts, Minka per class, posterior-mean rows, prevalence, E-step]."""
    from noisycal_bayes.core.population import population_m_step
    from noisycal_bayes.inference.population import _posterior, _vote
    from noisycal_bayes.models.inputs import class_arrays

    x = class_arrays(sim, "test")
    J, K, n = x.n_annotators, x.n_classes, x.n_items
    group, w = np.zeros(n, np.int64), weights
    T, alpha = _vote(x), [None] * K
    for it in range(1, max_iter + 1):
        counts = expected_counts(x.item, x.annotator, x.label, T, J, w)
        m, s = np.zeros((K, K)), np.zeros(K)
        for y in range(K):
            m[y], s[y] = fit_dirichlet_multinomial(counts[:, y, :], alpha[y], max_iter=dm_steps, power=power)
            alpha[y] = s[y] * m[y]
        C = population_m_step(counts, m, s)
        pi = w @ T + prevalence_prior
        pi = pi / pi.sum()
        T_new, ll = _posterior(x, C, pi, group)
        delta = np.max(np.abs(T_new - T))
        T = T_new
        if delta < tol:
            break
    return C, pi, it, float(np.sum(w * ll))


def test_jax_pooled_loop_is_the_numpy_loop():
    # Independent routes agree: the compiled loop (coded sparse steps, Minka's fixed point for all classes at once)
    # gives the NumPy loop's iterate count and numbers. Tolerance: both run the same float64 arithmetic in another
    # summation order (rounding ~1e-16 relative per sum); the stopping rule (max posterior change < 1e-6) is far from
    # rounding, so the iterate count is equal and the numbers agree to ~1e-12 (measured 3e-15 on adult).
    from noisycal_bayes.simulate import simulate_multiclass

    sim = simulate_multiclass(400, 30, 3, accuracy=0.7, labels_per_item=4, repeat_rate=0.1, seed=2)
    weights = np.random.default_rng(0).exponential(size=400)
    C, pi, n_iter, loglik = _numpy_pooled_em(sim, weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_em_population(sim, weights=weights)
    assert fit.label_permutation is None and fit.n_iter == n_iter   # no relabelling: the loops' classes compare
    np.testing.assert_allclose(fit.confusion, C, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fit.prevalence[0], pi, rtol=1e-9)
    np.testing.assert_allclose(fit.log_likelihood, loglik, rtol=1e-12)


def test_positive_digamma_matches_scipy():
    # _digamma (the Minka steps' digamma: recurrence to x + 10, asymptotic series) against scipy.special.psi, an
    # independent implementation, from ALPHA_MIN to S_MAX and around psi's root (x0 = 1.4616...). Tolerance: both
    # are accurate to a few units in the last place of the largest term (|psi| or 1/x), so the absolute error is
    # bounded by ~1e-15 (1 + |psi(x)|). Negative control: the series cut after its B_8 term (error ~1 / (132 y^10),
    # 8e-13 at y = 10) fails that tolerance.
    from scipy.special import psi

    import jax.numpy as jnp
    from noisycal_bayes.core import x64
    from noisycal_bayes.inference.population import _digamma

    rng = np.random.default_rng(0)
    x = np.concatenate([10.0 ** rng.uniform(-6, 6, 4000), rng.uniform(0.0, 30.0, 4000) + 1e-9,
                        1.4616321449683622 + np.linspace(-1e-3, 1e-3, 101)])
    with x64():
        got = np.asarray(_digamma(jnp.asarray(x)))
    want = psi(x)
    assert np.all(np.abs(got - want) <= 4e-15 * (1.0 + np.abs(want)))
    y = x + 10.0
    short = np.log(y) - 0.5 / y - (1 / (12 * y ** 2) - 1 / (120 * y ** 4) + 1 / (252 * y ** 6)
                                   - 1 / (240 * y ** 8)) - sum(1.0 / (x + k) for k in range(10))
    assert np.any(np.abs(short - want) > 4e-15 * (1.0 + np.abs(want)))


def test_dm_fit_on_count_cells_is_the_full_fit():
    # _dm_fit on the cells that hold responses (_count_cells) gives the full sums' fixed point: the other cells add
    # exactly 0 (digamma(0 + a) - digamma(a)); only the summation order differs (tolerance 1e-12, rounding). Counts
    # with zero cells (annotators that never gave some labels), an annotator without labels (a row with N = 0), and
    # the padding (a row J) included.
    import jax.numpy as jnp
    from noisycal_bayes.core import x64
    from noisycal_bayes.inference.population import _count_cells, _dm_fit

    data, _, _ = _crowd(4, 40, 200, 1, 5, seed=6)
    item, ann, lab = data.responses
    keep = ann != 3                                            # annotator 3 has no labels
    x = SimpleNamespace(annotator=ann[keep], label=lab[keep], n_annotators=40, n_classes=4)
    cells = _count_cells(x)
    assert cells[0].size > np.unique(ann[keep] * 4 + lab[keep]).size and (cells[0] == 40).any()   # padded
    T = np.random.default_rng(1).dirichlet(np.ones(4), 200)
    n = expected_counts(item[keep], ann[keep], lab[keep], T, 40)
    assert (n == 0).mean() > 0.3
    with x64():
        a = jnp.asarray(np.full((4, 4), 1.0) + 2 * np.eye(4))
        full = _dm_fit(jnp.swapaxes(jnp.asarray(n), 0, 1), a, True, 2.5, steps=50, tol=0.0)
        part = _dm_fit(jnp.swapaxes(jnp.asarray(n), 0, 1), a, True, 2.5, steps=50, tol=0.0,
                       cells=tuple(jnp.asarray(c) for c in cells))
    np.testing.assert_allclose(np.asarray(part[1]), np.asarray(full[1]), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(part[0]), np.asarray(full[0]), rtol=1e-12, atol=1e-15)


def test_fixed_population_is_kept_and_rows_are_its_posterior_means():
    # A fixed population (the EM route's bootstrap refits): the returned population is the one given, and at the
    # fixed point each row is the posterior mean under it, (n + alpha) / (N + s), with the expected counts of the
    # returned posteriors (core.population's NumPy formulas: an independent route). Without it the refit on the
    # same resampled items refits the population too (its concentration moves), which is what the option is for.
    data, _, _ = _crowd(3, 60, 300, 6, 14, seed=4)
    full = _quiet(fit_em_population, data)
    w = np.bincount(np.random.default_rng(1).integers(0, 300, 300), minlength=300).astype(float)
    fixed = _quiet(fit_em_population, data, weights=w, init=full, population=full.prior[0], tol=1e-10)
    np.testing.assert_allclose(fixed.prior[0], full.prior[0], rtol=1e-12)
    item, ann, lab = data.responses
    T = fixed.clean_label_probability(data)
    counts = expected_counts(item, ann, lab, T, 60, item_weight=w)
    alpha = full.prior[0]
    want = population_m_step(counts, alpha / alpha.sum(axis=1, keepdims=True), alpha.sum(axis=1))
    np.testing.assert_allclose(fixed.confusion, want, atol=1e-6)
    free = _quiet(fit_em_population, data, weights=w, init=full)
    assert np.max(np.abs(free.prior[0].sum(axis=1) / alpha.sum(axis=1) - 1)) > 0.05   # negative control
    with pytest.raises(ValueError, match="`population` must be .* shape \\(3, 3\\)"):
        fit_em_population(data, population=np.ones((2, 2)))


# --- Outlying annotators: the population fitted to clean-label draws, per-annotator concentrations (issue 34) ---

def _dm_objective(n, scale, alpha, weight, power):
    """sum_r weight log DirMult(n_r | scale_r alpha) + power-law hyperprior on alpha_0 (scipy.special, NumPy)."""
    from scipy.special import gammaln

    a = scale[:, None] * alpha[None]
    N = n.sum(axis=1)
    rows = gammaln(a.sum(axis=1)) - gammaln(N + a.sum(axis=1)) + np.sum(gammaln(n + a) - gammaln(a), axis=1)
    return np.sum(weight * rows) - power * np.log(alpha.sum())


def test_weighted_scaled_dm_fixed_point_matches_scipy():
    # _dm_fit with per-row factors lambda_r and a row weight 1/M (the stacked label draws) maximises
    # sum_r (1/M) log DirMult(n_r | lambda_r alpha) - power log alpha_0: checked against scipy.optimize on that
    # objective written with scipy.special (an independent route). Tolerance: both optimisers converge to ~1e-8.
    from noisycal_bayes.core import x64
    from noisycal_bayes.inference.population import _dm_fit

    rng = np.random.default_rng(3)
    alpha = np.array([3.0, 1.0, 0.6])
    scale = np.exp(rng.normal(0.0, 0.7, 120))
    n = np.stack([rng.multinomial(rng.integers(2, 12), rng.dirichlet(l * alpha)) for l in scale]).astype(float)
    with x64():
        m, s = _dm_fit(n[None], np.ones((1, 3)), False, 2.5, steps=20000, tol=1e-13, row_weight=0.5,
                       row_scale=scale)
    got = np.asarray(s)[0] * np.asarray(m)[0]
    res = minimize(lambda la: -_dm_objective(n, scale, np.exp(la), 0.5, 2.5), np.zeros(3), method="BFGS",
                   options={"gtol": 1e-10})
    np.testing.assert_allclose(got, np.exp(res.x), rtol=2e-4)


def test_per_annotator_scale_newton_matches_scipy():
    # _scale_fit: the MAP of each log lambda_j under sum_{d, y} (1/M) log DirMult(n[d, j, y] | lambda_j alpha_y)
    # - l_j^2 / (2 spread^2), against scipy's bounded scalar minimiser annotator by annotator.
    from scipy.optimize import minimize_scalar

    import jax.numpy as jnp
    from noisycal_bayes.core import x64
    from noisycal_bayes.inference.population import _scale_fit

    rng = np.random.default_rng(8)
    K, J, M = 3, 6, 2
    alpha = np.array([[4.0, 1.0, 1.0], [1.0, 3.0, 0.5], [0.7, 0.7, 2.0]])
    n = rng.integers(0, 5, size=(M, J, K, K)).astype(float)
    n[:, 0] = 0.0                                      # an annotator without labels: the prior's mode, l = 0
    with x64():
        l = np.asarray(_scale_fit(jnp.asarray(n), jnp.asarray(alpha), jnp.zeros(J), 1.5, row_weight=1.0 / M,
                                  steps=200))
    for j in range(J):
        def neg(lj):
            return -(sum(_dm_objective(n[d, j, y:y + 1], np.array([np.exp(lj)]), alpha[y], 1.0 / M, 0.0)
                         for d in range(M) for y in range(K)) - lj ** 2 / (2 * 1.5 ** 2))
        want = minimize_scalar(neg, bounds=(-8, 8), method="bounded", options={"xatol": 1e-9}).x
        assert l[j] == pytest.approx(want, abs=1e-5), j
    assert l[0] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.slow  # 11 s; the scipy checks of the two M-steps above stay in `make test`
def test_sampled_labels_recovers_the_spread_that_soft_counts_overstate():
    # A crowd drawn from one Dirichlet population (s = 8 per class, 5-14 labels per annotator). Type-II ML on the
    # expected (soft) counts reads the posteriors' smoothing as agreement and overstates s (negative control: > 2x);
    # the population fitted to clean-label draws lands within a factor 2 of the truth. The outlier-free invariance:
    # per-annotator factors stay near 1 (median within [0.6, 1.6]) and the clean labels agree with the single
    # population's on >= 97% of the items.
    data, y, _ = _crowd(3, 150, 600, 5, 14, seed=11, s=8.0)
    soft = _quiet(fit_em_population, data)
    samp = _quiet(fit_em_population, data, objective="sampled_labels", n_draws=8)
    spread = _quiet(fit_em_population, data, objective="sampled_labels", n_draws=8, spread=1.5)
    s_soft, s_samp = soft.prior[0].sum(axis=1), samp.prior[0].sum(axis=1)
    assert np.all(s_soft > 16.0), s_soft
    assert np.all((s_samp > 4.0) & (s_samp < 16.0)), s_samp
    assert 0.6 < np.median(spread.annotator_scale) < 1.6, np.median(spread.annotator_scale)
    agree = np.mean(samp.clean_label_probability(data).argmax(1) == spread.clean_label_probability(data).argmax(1))
    assert agree >= 0.97, agree
    assert soft.annotator_scale is None and samp.annotator_scale is None


def test_bad_population_options_are_refused():
    data, _, _ = _crowd(3, 20, 60, 3, 6, seed=12)
    with pytest.raises(ValueError, match="`objective` must be one of"):
        fit_em_population(data, objective="hard")
    with pytest.raises(ValueError, match="`spread` must be None or a positive number"):
        fit_em_population(data, spread=-1.0)
    with pytest.raises(ValueError, match="exclude each other"):
        fit_em_population(data, spread=1.0, population=np.ones((3, 3)))


@pytest.mark.slow  # 7 s
def test_adversaries_get_small_factors():
    # Negative control for the factors: adversaries (always wrong) among honest annotators get smaller factors than
    # the honest ones (one-sided Mann-Whitney p < 1e-3; seed 12: medians 0.71 and 1.37, i.e. only partly released,
    # docs/crowds.md, *Outlying annotators*).
    from scipy.stats import mannwhitneyu

    data, y, _ = _crowd(3, 150, 600, 8, 16, seed=12, s=20.0, acc=0.75)
    item, ann, lab = data.responses
    adv = np.arange(150) < 15
    rng = np.random.default_rng(0)
    flip = adv[ann]
    lab = lab.copy()
    lab[flip] = (y[item[flip]] + rng.integers(1, 3, flip.sum())) % 3      # always wrong
    data.responses = (item, ann, lab)
    fit = _quiet(fit_em_population, data, objective="sampled_labels", n_draws=8, spread=1.5)
    lam = fit.annotator_scale
    assert mannwhitneyu(lam[adv], lam[~adv], alternative="less").pvalue < 1e-3, (np.median(lam[adv]),
                                                                                np.median(lam[~adv]))


def test_estimator_passes_population_options_to_refits():
    # multiclass_em_estimator(model="pooled", population_options=...) refits with those options: a warm refit on
    # the full data equals fit_em_population with the same options and start; other models refuse the options.
    from noisycal_bayes.inference import multiclass_em_estimator

    data, _, _ = _crowd(3, 40, 200, 6, 14, seed=6)
    opts = {"objective": "sampled_labels", "n_draws": 4, "spread": 1.5}
    full = _quiet(fit_em_population, data, **opts)
    est = multiclass_em_estimator(model="pooled", population_options=opts)
    probs = np.full((200, 3), 1 / 3)
    conf, prev = _quiet(est, data.responses, 200, probs, init=(full.confusion, full.prevalence[0]))
    want = _quiet(fit_em_population, data, init=(full.confusion, full.prevalence[0]), max_iter=1000, tol=1e-8,
                  **opts)
    np.testing.assert_allclose(conf, want.confusion, atol=1e-12)
    plain, _ = _quiet(multiclass_em_estimator(model="pooled"), data.responses, 200, probs,
                      init=(full.confusion, full.prevalence[0]))
    assert np.max(np.abs(plain - conf)) > 1e-3          # negative control: the options change the refit
    with pytest.raises(ValueError, match="population_options"):
        multiclass_em_estimator(model="grouped", population_options=opts)


# --- SQUAREM cycles on the pooled EM (issue 34 part 4) ---

@pytest.mark.slow   # 4-8 s: an option, not the default path (make test's budget)
def test_accelerated_and_plain_reach_one_fixed_point(monkeypatch):
    # The SQUAREM cycles (_em_loop.em_loop on the state (T, log alpha)) and the plain loop iterate one map: at a tight
    # tol both stop within the plain loop's own distance to the fixed point (tol r / (1 - r) for an EM rate r < 1),
    # far below 1e-5, with the same population. "auto" runs the plain loop's first 100 iterations and is the plain
    # fit when that stops by then (identical numbers). Negative control: the plain loop stopped at tol 1e-2 is more
    # than 1e-3 from that point, so the comparison's tolerance can fail.
    data, y, _ = _crowd(3, 120, 400, 4, 12, seed=11, gold_frac=0.05)
    plain = _quiet(fit_em_population, data, tol=1e-10, accelerate=False)
    fast = _quiet(fit_em_population, data, tol=1e-10, accelerate=True)
    assert plain.converged and fast.converged
    T_p, T_f = plain.clean_label_probability(data), fast.clean_label_probability(data)
    assert np.abs(T_p - T_f).max() < 1e-5
    np.testing.assert_allclose(fast.prior[0], plain.prior[0], rtol=1e-4)
    np.testing.assert_allclose(fast.log_likelihood, plain.log_likelihood, rtol=1e-8)
    assert fast.n_iter < plain.n_iter / 2, (fast.n_iter, plain.n_iter)
    import noisycal_bayes.inference.population as population

    monkeypatch.setattr(population, "ACCELERATE_MIN_RESPONSES", 0)   # "auto" on this small crowd: cycles after 100
    after = _quiet(fit_em_population, data, tol=1e-10)
    assert after.converged and 100 < after.n_iter < plain.n_iter, (after.n_iter, plain.n_iter)
    np.testing.assert_array_equal(after.loglik_trace[:100], plain.loglik_trace[:100])   # the plain iterates first
    assert np.abs(after.clean_label_probability(data) - T_p).max() < 1e-5
    early = _quiet(fit_em_population, data, tol=1e-2, accelerate=False)
    assert np.abs(early.clean_label_probability(data) - T_p).max() > 1e-3   # negative control
    quick = _quiet(fit_em_population, data, tol=1e-4)   # "auto", stopped by the plain loop within 100 iterations
    assert quick.n_iter < 100
    same = _quiet(fit_em_population, data, tol=1e-4, accelerate=False)
    np.testing.assert_array_equal(quick.confusion, same.confusion)
    with pytest.raises(ValueError, match="`accelerate=True` cannot be combined with objective='sampled_labels'"):
        fit_em_population(data, objective="sampled_labels", accelerate=True)
    with pytest.raises(ValueError, match="`accelerate` must be 'auto', True or False"):
        fit_em_population(data, accelerate="yes")


@pytest.mark.slow   # 5 fits, 4 compiled programs
def test_accelerated_fixed_population_and_spread():
    # The state carries what the map needs: a fixed population (the bootstrap refits) and the per-annotator factors
    # of `spread` reach the plain loop's fixed point too.
    data, _, _ = _crowd(3, 80, 300, 5, 12, seed=5)
    full = _quiet(fit_em_population, data)
    for kw in ({"population": full.prior[0], "init": full}, {"spread": 1.5}):
        plain = _quiet(fit_em_population, data, tol=1e-10, accelerate=False, **kw)
        fast = _quiet(fit_em_population, data, tol=1e-10, accelerate=True, **kw)
        assert fast.converged
        assert np.abs(plain.clean_label_probability(data) - fast.clean_label_probability(data)).max() < 1e-5, kw
        if "spread" in kw:
            np.testing.assert_allclose(fast.annotator_scale, plain.annotator_scale, rtol=1e-4)


def test_mixture_type_log_joint_matches_scipy_dirichlet_multinomial():
    # _type_log_joint (the mixture population's per-annotator marginal): log w_c + sum_y log DirMult(n_jy | alpha_cy)
    # without the multinomial coefficients, against scipy.stats.dirichlet_multinomial (which includes them) row by
    # row; the responsibilities (softmax over types) are the same with or without the coefficients.
    from scipy.special import gammaln, softmax
    from scipy.stats import dirichlet_multinomial

    from noisycal_bayes.core import x64
    from noisycal_bayes.inference.population import _type_log_joint

    rng = np.random.default_rng(21)
    K, J, M = 3, 5, 3
    alpha = rng.gamma(2.0, 1.0, size=(M, K, K)) + 0.05
    w = np.array([0.7, 0.2, 0.1])
    n = rng.integers(0, 6, size=(J, K, K)).astype(float)
    n[0, 1] = 0.0                                       # a row without labels contributes nothing
    want = np.zeros((J, M))
    for j in range(J):
        for c in range(M):
            want[j, c] = np.log(w[c])
            for y in range(K):
                N = int(n[j, y].sum())
                if N == 0:
                    continue
                coef = gammaln(N + 1) - gammaln(n[j, y] + 1).sum()
                want[j, c] += dirichlet_multinomial.logpmf(n[j, y], alpha[c, y], N) - coef
    with x64():
        got = np.asarray(_type_log_joint(n, alpha, np.log(w)))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    full = want + np.array([[sum(gammaln(n[j, y].sum() + 1) - gammaln(n[j, y] + 1).sum() for y in range(K))]
                            for j in range(J)])
    np.testing.assert_allclose(softmax(got, axis=1), softmax(full, axis=1), rtol=1e-10)


def test_weighted_dm_fixed_point_matches_scipy():
    # _dm_fit with per-row weights (a mixture component's responsibilities) maximises
    # sum_r w_r log DirMult(n_r | alpha) - power log alpha_0: checked against scipy.optimize on that objective.
    from noisycal_bayes.core import x64
    from noisycal_bayes.inference.population import _dm_fit

    rng = np.random.default_rng(5)
    alpha = np.array([3.0, 1.0, 0.6])
    n = np.stack([rng.multinomial(rng.integers(2, 12), rng.dirichlet(alpha)) for _ in range(150)]).astype(float)
    wr = rng.uniform(0.0, 1.0, 150)
    with x64():
        m, s = _dm_fit(n[None], np.ones((1, 3)), True, 2.5, steps=20000, tol=1e-13, row_weight=0.5, row_weights=wr)
    got = np.asarray(s)[0] * np.asarray(m)[0]
    res = minimize(lambda la: -_dm_objective(n, np.ones(150), np.exp(la), 0.5 * wr, 2.5), np.zeros(3),
                   method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(got, np.exp(res.x), rtol=2e-4)


def _adversarial_crowd(seed, n_adv=15, J=150):
    """``_crowd`` (K = 3, honest rows around accuracy 0.75) with the first ``n_adv`` annotators always wrong."""
    data, y, _ = _crowd(3, J, 600, 8, 16, seed=seed, s=20.0, acc=0.75)
    item, ann, lab = data.responses
    adv = np.arange(J) < n_adv
    flip = adv[ann]
    lab = lab.copy()
    lab[flip] = (y[item[flip]] + np.random.default_rng(seed).integers(1, 3, flip.sum())) % 3
    data.responses = (item, ann, lab)
    return data, y, adv


@pytest.mark.slow   # 4-8 s: an option, not the default path (make test's budget)
def test_mixture_recovers_planted_adversaries():
    # 15 always-wrong annotators among 135 honest ones: the mixture population puts them off the typical component
    # (the largest weight; median responsibility < 0.2, honest > 0.9), its weight near the honest share 0.9, and the
    # typical component diagonal-dominant. Negative control: the single population has no types (fields None).
    data, y, adv = _adversarial_crowd(12)
    fit = _quiet(fit_em_population, data, components=3)
    typ = int(np.argmax(fit.mixture_weight))
    p_typ = fit.type_probability[:, typ]
    assert np.median(p_typ[adv]) < 0.2 and np.median(p_typ[~adv]) > 0.9, (np.median(p_typ[adv]),
                                                                          np.median(p_typ[~adv]))
    assert 0.8 < fit.mixture_weight[typ] < 0.97, fit.mixture_weight
    m = fit.mixture_alpha[typ] / fit.mixture_alpha[typ].sum(axis=1, keepdims=True)
    assert np.all(np.argmax(m, axis=1) == np.arange(3)), m
    np.testing.assert_allclose(fit.prior[0], fit.mixture_alpha[typ])
    np.testing.assert_allclose(fit.type_probability.sum(axis=1), 1.0, rtol=1e-12)
    single = _quiet(fit_em_population, data)
    assert single.mixture_alpha is None and single.type_probability is None
    assert _acc(fit, data, y) >= _acc(single, data, y) - 0.01


def test_one_component_is_the_single_population():
    # components=1 is the default path itself (same numbers, no mixture fields); bad values are refused.
    data, _, _ = _crowd(3, 40, 200, 6, 14, seed=6)
    a = _quiet(fit_em_population, data)
    b = _quiet(fit_em_population, data, components=1)
    np.testing.assert_array_equal(a.confusion, b.confusion)
    np.testing.assert_array_equal(a.prior[0], b.prior[0])
    assert a.n_iter == b.n_iter and b.mixture_weight is None
    with pytest.raises(ValueError, match="`components` must be one of"):
        fit_em_population(data, components=4)
    with pytest.raises(ValueError, match="excludes `spread` and a fixed `population`"):
        fit_em_population(data, components=3, spread=1.0)
    with pytest.raises(ValueError, match="excludes `spread` and a fixed `population`"):
        fit_em_population(data, components=2, population=np.ones((3, 3)))
    with pytest.raises(ValueError, match="accelerate=True` cannot be combined with `components`"):
        fit_em_population(data, components=2, accelerate=True)
