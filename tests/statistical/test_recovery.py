"""Posterior recovery, frequentist coverage, and the known-label closed form for the NumPyro channel models.

1. Recovery: with n items the posterior is approximately normal around the MLE, and the truth minus the
   posterior mean is approximately N(0, sd^2) (Bernstein-von Mises), plus Monte Carlo error sd / sqrt(ESS).
   Assert ``|mean - truth| < z sd sqrt(1 + 1 / ESS)`` for every scalar, after checking R-hat and ESS.
   False-alarm rate 1e-3 per model, split (Bonferroni) over its K scalars: z = Phi^-1(1 - 1e-3 / (2 K)).
2. Coverage: across R data sets with a fixed truth, each 90% equal-tailed interval covers its parameter
   a Binomial(R, 0.9) number of times (approximately, by the same normal approximation). Per parameter,
   the count must lie in the central 1 - 1e-3 / K region of that binomial.
3. Known labels: with the clean labels observed, the channel posterior is a product of Beta
   distributions in closed form (conjugacy); the sampled posterior must match it (KS test on thinned
   draws), and must NOT match the closed form that forgets the Jacobian of tpr = fpr + (1 - fpr) u
   (negative control).
"""
import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from noisycal_bayes.core import x64
from noisycal_bayes.data import AnnotationSet
from noisycal_bayes.inference import fit_nuts
from noisycal_bayes.inference._sampler import NutsProgram, chain_keys
from noisycal_bayes.models import Prior, oriented_channels, responses
from noisycal_bayes.simulate import simulate_annotations

pytestmark = pytest.mark.statistical

FAMILY_ALPHA = 1e-3
FPR = np.array([0.1, 0.2, 0.15])
TPR = np.array([0.85, 0.75, 0.8])
PREV = np.array([0.1, 0.3, 0.5, 0.7, 0.9])


def _z(k):
    return stats.norm.isf(FAMILY_ALPHA / (2 * k))


def _grouped_data(rng, n, prev=PREV):
    g = np.repeat(np.arange(prev.size), n // prev.size)
    y = rng.random(g.size) < prev[g]
    labels = (rng.random((g.size, FPR.size)) < np.where(y[:, None], TPR, FPR)).astype(np.int8)
    return AnnotationSet.from_wide(labels), g


def _fit(data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_nuts(data, n_warmup=200, progress_bar=False, **kw)


def _assert_recovered(fit, truth):
    k = sum(np.size(v) for v in truth.values())
    z = _z(k)
    # Diagnostics before moments: gross non-convergence would make the check meaningless.
    assert fit.diagnostics["r_hat"].max() < 1.05 and fit.diagnostics["ess_bulk"].min() > 100
    for name, value in truth.items():
        d = fit.draws[name].reshape((-1,) + fit.draws[name].shape[2:])
        se = d.std(axis=0) * np.sqrt(1 + 1 / fit.ess_bulk[name])
        err = np.abs(d.mean(axis=0) - value)
        assert np.all(err < z * se), f"{name}: |mean - truth| = {err} vs {z:.2f} x {se}"


def test_grouped_recovery():
    data, g = _grouped_data(np.random.default_rng(1), 3000)
    fit = _fit(data, groups=g, n_chains=4, n_draws=250, seed=1)
    _assert_recovered(fit, {"fpr": FPR, "tpr": TPR, "prevalence": PREV})


@pytest.mark.slow  # 9 s CPU (a coverage study; docs/coverage.md has the full one); make test-all runs it
def test_grouped_interval_coverage_across_data_sets():
    r, n = 40, 600
    rng = np.random.default_rng(2)
    truth = np.concatenate([FPR, TPR, PREV])
    covered = np.zeros(truth.size, int)
    for i in range(r):
        data, g = _grouped_data(rng, n)
        fit = _fit(data, groups=g, n_chains=2, n_draws=100, seed=i)
        d = np.concatenate([fit.draws[k].reshape(-1, fit.draws[k].shape[-1]) for k in ("fpr", "tpr", "prevalence")], 1)
        lo, hi = np.quantile(d, [0.05, 0.95], axis=0)
        covered += (lo <= truth) & (truth <= hi)
    a = FAMILY_ALPHA / truth.size
    lo_ok, hi_ok = stats.binom.ppf(a / 2, r, 0.9), stats.binom.isf(a / 2, r, 0.9)
    assert np.all((covered >= lo_ok) & (covered <= hi_ok)), f"coverage counts {covered} of {r}, allowed [{lo_ok}, {hi_ok}]"


@pytest.mark.slow  # 20 s CPU cold (a NUTS compile); Platt fits are checked cheaply in tests/models/test_curves.py and tests/inference/test_map.py; make test-all runs it
def test_platt_recovery():
    # The "overconfident" curve is exactly sigmoid(0.5 logit z): slope 0.5, intercept 0.
    sim = simulate_annotations(1500, fpr=FPR, tpr=TPR, curve="overconfident", seed=3)
    fit = _fit(sim.data, model="platt", n_chains=4, n_draws=200, seed=3)
    _assert_recovered(fit, {"fpr": FPR, "tpr": TPR, "slope": 0.5, "intercept": 0.0})


@pytest.mark.slow  # 19 s CPU cold (a NUTS compile); the monotone MAP is checked against EM in tests/inference/test_map.py; make test-all runs it
def test_monotone_recovery():
    data, g = _grouped_data(np.random.default_rng(4), 2000)
    fit = _fit(data, model="monotone", groups=g, n_chains=2, n_draws=200, seed=4)
    assert np.all(np.diff(fit.draws["prevalence"], axis=-1) > 0)
    _assert_recovered(fit, {"fpr": FPR, "tpr": TPR, "prevalence": PREV})


# ------------------------------------------------------------------------------------------ known labels
# fpr ~ Beta(2, 12) and u ~ Beta(1, 10) are, in (fpr, tpr) coordinates, Beta(2, 2) on fpr and Beta(1, 10) on
# tpr: the coupling through u shifts the fpr prior by 10 pseudo-counts, which the negative control ignores.
KNOWN_PRIOR = Prior(fpr=(2.0, 12.0), u=(1.0, 10.0))


def _known_label_model(labels, y, prior, *, n_annotators):
    """The package's oriented channels and likelihood with P(Y_i = 1) = y_i in {0, 1}: the label is observed.

    core's likelihood clips log(0) to log(1e-12); the other class then contributes a relative weight of at
    most 1e-12 * (tpr / fpr)^3 < 1e-9 per item, far below the Monte Carlo resolution of this test.
    """
    fpr, tpr = oriented_channels(n_annotators, prior)
    responses(labels, jnp.arange(labels.shape[0]), y, fpr, tpr)  # one "group" per item, with P(Y = 1) = y_i


def test_known_labels_give_the_closed_form_beta_posterior():
    rng = np.random.default_rng(5)
    n = 100
    y = rng.random(n) < 0.5
    labels = (rng.random((n, 3)) < np.where(y[:, None], TPR, FPR)).astype(np.int8)
    # Conjugacy in (fpr, tpr) coordinates: the prior is Beta pseudo-counts there (Prior.em_pseudo_counts),
    # fpr_j | data ~ Beta(af + k0, bf + n0 - k0), tpr_j | data ~ Beta(at + k1, bt + n1 - k1), restricted to
    # tpr > fpr. The restriction moves each CDF by at most P(tpr <= fpr), checked below to be < 1e-3, far below
    # the resolution of a KS test on 400 draws (~1 / sqrt(400) = 0.05).
    (af, bf), (at, bt), _ = KNOWN_PRIOR.em_pseudo_counts()
    k0, n0 = labels[~y].sum(0), (~y).sum()
    k1, n1 = labels[y].sum(0), y.sum()
    post_fpr = [stats.beta(af + k0[j], bf + n0 - k0[j]) for j in range(3)]
    post_tpr = [stats.beta(at + k1[j], bt + n1 - k1[j]) for j in range(3)]
    for f, t in zip(post_fpr, post_tpr):
        mass = integrate.quad(lambda x: f.pdf(x) * t.cdf(x), 0, 1, points=[f.mean()])[0]
        assert mass < 1e-3  # P(tpr <= fpr) under the unrestricted closed form
    # Wrong closed form (negative control): the Beta(2, 12) prior on fpr read directly, forgetting that the prior on
    # u and the Jacobian 1 / (1 - fpr) of u -> tpr change the fpr prior. Its KS distance to the right posterior is
    # about 0.23-0.27 here (computed from the two CDFs), so with 400 draws its p-value is about 1e-19.
    wrong_fpr = [stats.beta(2 + k0[j], 12 + n0 - k0[j]) for j in range(3)]

    n_chains, n_draws = 4, 500
    with x64():
        model = partial(_known_label_model, n_annotators=3)
        args = (jnp.asarray(labels, dtype=jnp.int32), jnp.asarray(y, dtype=jnp.float64),
                jax.tree.map(jnp.asarray, KNOWN_PRIOR.params()))
        program = NutsProgram(model, n_warmup=200, chunk=50, chain_method="sequential", target_accept=0.8,
                              max_tree_depth=10)
        start = {"fpr": np.full(3, 0.2), "u": np.full(3, 0.7)}
        sites, stats_ = program.run(chain_keys(5, n_chains), start, args, n_draws=n_draws)
        sites = {k: np.asarray(v).reshape((-1,) + v.shape[2:]) for k, v in sites.items()}
    fpr = sites["fpr"]
    tpr = fpr + (1 - fpr) * sites["u"]
    assert stats_["diverging"].sum() == 0
    # KS on draws thinned by 5 (2000 -> 400 nearly independent draws; NUTS autocorrelation here is short):
    # false-alarm rate 1e-3 over 6 tests -> each p-value must exceed 1e-3 / 6.
    thin = slice(None, None, 5)
    for j in range(3):
        for draws, exact in ((fpr[thin, j], post_fpr[j]), (tpr[thin, j], post_tpr[j])):
            assert stats.kstest(draws, exact.cdf).pvalue > FAMILY_ALPHA / 6
        # The negative control must fail.
        assert stats.kstest(fpr[thin, j], wrong_fpr[j].cdf).pvalue < FAMILY_ALPHA / 6


# ------------------------------------------------------------------ EM on crowds: per-annotator intervals
@pytest.mark.slow
def test_crowd_em_intervals_off_the_boundary_cover_at_the_nominal_rate():
    """fit_em's 90% intervals of every annotator's fpr and tpr (fit.annotators) on simulated crowds with spammers and
    adversaries, for rates estimated inside (0, 1).

    Rates estimated on the boundary (a few-label annotator with no false positive, say) are left out: their discrete
    counts make the interval conservative (measured 0.977, docs/crowds.md "Recovery"), which no interval of this kind
    avoids. The rest cover 0.902 (40 crowds, benchmark study). Tolerance: the intervals of one crowd share its
    clean-label posterior, so the se of the mean coverage is the clustered one, sd of the per-crowd coverages /
    sqrt(R); two-sided false-alarm 1e-3: |mean - 0.90| <= 3.29 se. Negative control: the 80% intervals from the
    same counts, checked against 0.90, must fail. And the correction for the unknown clean labels matters (the
    exact conditional posterior below 50 labels, Louis' (1982) missing-information scaling above): without it (soft
    counts taken as complete data) coverage drops, per crowd, by more than 3.29 paired standard errors.
    """
    from noisycal_bayes import fit_em
    from noisycal_bayes.models.em_result import soft_counts
    from noisycal_bayes.models.em_result import annotator_table
    from noisycal_bayes.simulate import simulate_crowd

    r, z = 30, stats.norm.isf(FAMILY_ALPHA / 2)
    per, per_naive, per_80 = [], [], []
    for s in range(100, 100 + r):
        sim = simulate_crowd(2000, 100, labels_per_item=6, activity="heavy", spammers=0.05, adversaries=0.02, seed=s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = fit_em(sim.data, model="dawid_skene", starts="vote", max_iter=5000)
        f, t, p = fit.channel.fpr, fit.channel.tpr, fit.prevalence
        counts = soft_counts(fit.inputs, f, t, p)
        n_labels = fit.annotators["n_labels"].to_numpy()
        naive = annotator_table(fit.annotator_ids, f, t, counts[:4], n_labels)
        at_80 = annotator_table(fit.annotator_ids, f, t, counts, n_labels, level=0.8)
        for table, out in ((fit.annotators, per), (naive, per_naive), (at_80, per_80)):
            hits = []
            for name, est, truth in (("fpr", f, sim.fpr), ("tpr", t, sim.tpr)):
                inside = (est > 1e-6) & (est < 1 - 1e-6)
                lo, hi = table[f"{name}_lower"].to_numpy(), table[f"{name}_upper"].to_numpy()
                hits.append(((lo <= truth) & (truth <= hi))[inside])
            out.append(np.mean(np.concatenate(hits)))
    for values, ok in ((np.array(per), True), (np.array(per_80), False)):
        mean, se = values.mean(), values.std(ddof=1) / np.sqrt(r)
        assert (abs(mean - 0.9) <= z * se) == ok, f"coverage {mean:.4f}, clustered se {se:.4f}, control={not ok}"
    drop = np.array(per) - np.array(per_naive)
    assert drop.mean() > z * drop.std(ddof=1) / np.sqrt(r), f"label correction: coverage change {drop.mean():.4f}"
