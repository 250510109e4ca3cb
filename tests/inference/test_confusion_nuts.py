"""fit_map_multiclass / fit_nuts_multiclass (noisycal_bayes/inference/map.py, nuts.py).

The data object is a local stand-in for MulticlassAnnotationSet (a NamedTuple with the attributes the fits read),
built from a few lines of NumPy simulation.
"""
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize
from scipy.special import ndtri

from noisycal_bayes.core import x64
from noisycal_bayes.data import AnnotationSet
from noisycal_bayes.inference import fit_em, fit_map_multiclass, fit_nuts_multiclass
from noisycal_bayes.inference import fit_em_multiclass
from noisycal_bayes.core.em import expected_class_counts as _expected_counts
from noisycal_bayes.inference.map import _np_map_em
from noisycal_bayes.models.priors import PRIOR_PULL_FLOOR, prior_pull_note as _prior_pull_note
from noisycal_bayes.core.likelihood import class_log_joint
from noisycal_bayes.data.compress import compress_multiclass, sparse_table
from noisycal_bayes.models.priors import MulticlassPrior
from noisycal_bayes.warnings import ConvergenceWarning, IdentifiabilityWarning, PriorWarning


class Crowd(NamedTuple):
    responses: tuple
    n_items: int
    n_annotators: int
    n_classes: int
    probs: object
    gold: object
    classes: tuple


def simulate(n, n_ann, k, n_groups, *, seed, gold_frac=0.0, missing=0.0, concentration=30.0, accuracy=0.75):
    """``(Crowd, groups, confusion, prevalence)``: diagonal-dominant confusions, a prevalence per group."""
    rng = np.random.default_rng(seed)
    base = np.full((k, k), (1 - accuracy) / (k - 1)) + (accuracy - (1 - accuracy) / (k - 1)) * np.eye(k)
    conf = np.stack([[rng.dirichlet(base[y] * concentration) for y in range(k)] for _ in range(n_ann)])
    prev = rng.dirichlet(np.full(k, 3.0), size=n_groups)
    group = rng.integers(0, n_groups, n)
    y = (rng.random(n)[:, None] > np.cumsum(prev[group], axis=1)).sum(axis=1)
    item, ann = np.repeat(np.arange(n), n_ann), np.tile(np.arange(n_ann), n)
    keep = rng.random(item.size) >= missing
    item, ann = item[keep], ann[keep]
    lab = (rng.random(item.size)[:, None] > np.cumsum(conf[ann, y[item]], axis=1)).sum(axis=1)
    gold = np.where(rng.random(n) < gold_frac, y, -1)
    return Crowd((item, ann, lab), n, n_ann, k, None, gold, tuple(f"c{c}" for c in range(k))), group, conf, prev


# Shared with tests/statistical/test_sbc_multiclass.py (same shapes: one compiled sampler serves both).
N, J, K, G = 400, 3, 3, 2
NUTS = dict(n_chains=2, n_warmup=200, n_samples=200, path="sparse")


@pytest.fixture(scope="module")
def nuts_fit():
    data, group, conf, prev = simulate(N, J, K, G, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # short chains; checked explicitly below
        fit = fit_nuts_multiclass(data, groups=group, seed=3, **NUTS)
    return data, group, conf, prev, fit


@pytest.mark.slow  # compiles a K-class program (~10-40 s on 2 loaded cores); make test-all
def test_nuts_recovers_channels_and_outputs(nuts_fit):
    data, group, conf, prev, fit = nuts_fit
    d = fit.diagnostics
    assert d["max_rhat"] < 1.05 and d["min_ess_bulk"] > 50 and d["n_divergent"] == 0, d
    assert d["frac_not_dominant"] == 0.0 and d["frac_max_treedepth"] == 0.0
    # |posterior mean - truth| ~ posterior sd (Bernstein-von Mises), plus Monte Carlo error sd / sqrt(ESS).
    # False-alarm rate 1e-3 for the family of J K K + G K scalars (Bonferroni): z = ndtri(1 - 1e-3 / (2 m)).
    m = J * K * K + G * K
    z = ndtri(1 - 1e-3 / (2 * m))
    for draws, truth in ((fit.confusion, conf), (fit.prevalence, prev)):
        sd = draws.std(axis=0)
        tol = z * sd * np.sqrt(1 + 1 / d["min_ess_bulk"])
        assert np.all(np.abs(draws.mean(axis=0) - truth) < tol)
    # Outputs (same test: one fixture evaluation per xdist worker is the cost).
    s = NUTS["n_chains"] * NUTS["n_samples"]
    assert fit.confusion.shape == (s, J, K, K) and fit.prevalence.shape == (s, G, K)
    np.testing.assert_allclose(fit.confusion.sum(-1), 1.0, atol=1e-12)
    assert set(fit.diagnostics) >= {"max_rhat", "min_ess_bulk", "frac_max_treedepth", "n_divergent"}
    assert fit.classes == data.classes and fit.settings["path"] == "sparse"
    probs = fit.clean_label_probability(data, max_draws=50)
    assert probs.shape == (N, K)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-12)
    idata = fit.to_arviz()
    post = idata["posterior"]
    assert post["confusion"].dims == ("chain", "draw", "annotator", "true_class", "label_class")
    assert post["prevalence"].dims == ("chain", "draw", "group", "true_class")
    assert list(post["confusion"].coords["true_class"].values) == list(data.classes)
    assert idata["log_likelihood"]["labels"].shape == (2, 200, N)
    assert idata["observed_data"]["labels"].dims == ("response",) and idata["observed_data"]["gold"].dims == ("item",)
    # The log-likelihood summed over items is the model's likelihood at that draw (patterns route, MAP-EM's helper).
    ll = fit.log_likelihood()
    assert np.all(np.isfinite(ll)) and ll.shape == (2, 200, N)


@pytest.mark.slow
def test_pooled_nuts_recovers_a_sparse_crowd():
    """12 annotators, 3 per item (sparse path): the pooled model's confusions are recovered within the tolerance of
    test_nuts_recovers_channels, and its population confusion is diagonally dominant."""
    rng = np.random.default_rng(7)
    n, n_ann, k = 600, 12, 3
    data, group, conf, prev = simulate(n, n_ann, k, 1, seed=7)
    item, ann, lab = data.responses
    keep = np.zeros(item.size, bool)
    for i in range(n):
        keep[i * n_ann + rng.choice(n_ann, 3, replace=False)] = True
    data = data._replace(responses=(item[keep], ann[keep], lab[keep]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = fit_nuts_multiclass(data, model="pooled", groups=group, n_chains=2, n_warmup=300, n_samples=300)
    d = fit.diagnostics
    assert fit.settings["path"] == "sparse" and d["max_rhat"] < 1.05 and d["n_divergent"] == 0, d
    z = ndtri(1 - 1e-3 / (2 * n_ann * k * k))
    sd = fit.confusion.std(axis=0)
    assert np.all(np.abs(fit.confusion.mean(axis=0) - conf) < z * sd * np.sqrt(1 + 1 / d["min_ess_bulk"]))
    pop = fit.population_confusion.mean(axis=0)
    assert np.all(np.diag(pop) > pop.max(axis=1, initial=0, where=~np.eye(k, dtype=bool)))


def _objective(data, group, prior, n_groups):
    """Log posterior of (C, pi) in simplex coordinates (log-likelihood + Dirichlet log kernels), as a function of
    softmax logits; the likelihood from class_log_joint on responses (not the EM code)."""
    item, ann, lab = data.responses
    table = sparse_table(item, ann, lab, group, data.gold)
    pc = prior.pseudo_counts(data.n_classes)
    k, j = data.n_classes, data.n_annotators

    @jax.jit
    def f(x):
        lc = jax.nn.log_softmax(x[: j * k * k].reshape(j, k, k), axis=-1)
        lp = jax.nn.log_softmax(x[j * k * k:].reshape(n_groups, k), axis=-1)
        ll = jnp.sum(jax.nn.logsumexp(class_log_joint(table, lc, lp), axis=-1))
        return -(ll + jnp.sum(pc * lc) + (prior.prevalence - 1) * jnp.sum(lp))

    return f, jax.jit(jax.grad(f))


@pytest.mark.slow
def test_repeated_responses_take_the_sparse_path():
    data, group, _, _ = simulate(60, 3, 3, 2, seed=1)
    item, ann, lab = data.responses
    repeated = data._replace(responses=(np.r_[item, 0], np.r_[ann, 0], np.r_[lab, 0]))
    assert fit_map_multiclass(repeated, groups=group).path == "sparse"  # auto falls back to responses


@pytest.mark.slow  # compiles a K-class program (~10-40 s on 2 loaded cores); make test-all
def test_map_equals_direct_optimum_and_paths_agree():
    data, group, _, _ = simulate(300, 3, 3, 2, seed=5, gold_frac=0.1, missing=0.1)
    prior = MulticlassPrior()
    # EM converges linearly: a tight tolerance, so that its remaining distance to the mode is below the checks'.
    fit = fit_map_multiclass(data, groups=group, tol=1e-12, max_iter=20000)
    assert fit.path == "sparse" and fit.converged  # gold labels enter on the responses
    # Without the gold labels both paths apply and give one mode.
    nogold = data._replace(gold=None)
    patterns = fit_map_multiclass(nogold, groups=group, path="patterns", tol=1e-12, max_iter=20000)
    sparse = fit_map_multiclass(nogold, groups=group, path="sparse", tol=1e-12, max_iter=20000)
    assert patterns.path == "patterns" and sparse.path == "sparse"
    np.testing.assert_allclose(sparse.confusion, patterns.confusion, atol=1e-7)
    with x64():
        f, g = _objective(data, group, prior, 2)
        # Independent route: L-BFGS on softmax logits from a flat start (60% on the diagonal, uniform prevalence).
        x0 = np.concatenate([np.tile(np.log(np.where(np.eye(3, dtype=bool), 0.6, 0.2)), (3, 1, 1)).ravel(),
                             np.zeros(6)])
        res = optimize.minimize(lambda x: float(f(x)), x0, jac=lambda x: np.asarray(g(x)), method="L-BFGS-B",
                                options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 5000})
        at_map = float(f(np.concatenate([np.log(fit.confusion).ravel(), np.log(fit.prevalence).ravel()])))
    assert abs(-at_map - fit.log_posterior) < 1e-8  # the fit reports its own objective
    assert at_map <= res.fun + 1e-9  # EM's point is at least as good as the optimiser's
    conf = np.exp(res.x[:27].reshape(3, 3, 3))
    conf /= conf.sum(-1, keepdims=True)
    np.testing.assert_allclose(fit.confusion, conf, atol=1e-4)


@pytest.mark.slow  # a K = 4 EM compile; the model-level relabelling test runs by default
def test_relabelling_classes_permutes_the_map():
    data, group, _, _ = simulate(300, 3, 4, 2, seed=9, gold_frac=0.05)
    sigma = np.array([3, 1, 0, 2])
    item, ann, lab = data.responses
    gold_p = np.where(data.gold >= 0, sigma[np.maximum(data.gold, 0)], -1)
    permuted = data._replace(responses=(item, ann, sigma[lab]), gold=gold_p)
    a = fit_map_multiclass(data, groups=group)
    b = fit_map_multiclass(permuted, groups=group)
    np.testing.assert_allclose(b.confusion[:, sigma[:, None], sigma[None, :]], a.confusion, atol=1e-8)
    np.testing.assert_allclose(b.prevalence[:, sigma], a.prevalence, atol=1e-8)
    assert abs(a.log_posterior - b.log_posterior) < 1e-7
    pa, pb = a.clean_label_probability(data), b.clean_label_probability(permuted)
    np.testing.assert_allclose(pb[:, sigma], pa, atol=1e-8)
    assert np.all(pa[data.gold >= 0].max(axis=1) == 1.0)  # gold items are one-hot


def test_diagonal_pull_is_the_shift_of_the_dirichlet_posterior_mean():
    """Independent route: scipy's Dirichlet mean of ``alpha_y + N[j, y]`` minus the row's diagonal proportion."""
    from scipy import stats

    rng = np.random.default_rng(0)
    counts = rng.integers(0, 40, (2, 4, 4)).astype(float)
    counts[1, 2] = 0.0  # a row without labels: no shift
    prior = MulticlassPrior(diagonal=3.0, off_diagonal=0.5)
    alpha = prior.pseudo_counts(4) + 1.0
    want = np.zeros((2, 4))
    for j in range(2):
        for y in range(4):
            if counts[j, y].sum() > 0:
                want[j, y] = stats.dirichlet(alpha[y] + counts[j, y]).mean()[y] - counts[j, y, y] / counts[j, y].sum()
    np.testing.assert_allclose(prior.diagonal_pull(counts), want, rtol=0, atol=1e-14)
    assert prior.diagonal_pull(counts)[1, 2] == 0.0


def _counts(n_ann, k, n_row, accuracy):
    """Label counts (J, K, K): ``n_row`` labels per row, ``accuracy`` of them on the diagonal, the rest even."""
    row = np.full((k, k), (1 - accuracy) / (k - 1)) + (accuracy - (1 - accuracy) / (k - 1)) * np.eye(k)
    return np.broadcast_to(n_row * row, (n_ann, k, k)).copy()


def test_prior_pull_warning_when_pseudo_counts_rival_the_labels():
    """K = 10, 5 annotators, 200 labels per row (the study's small data sets): the default prior's 11 pseudo-counts
    shift the mean diagonal by (2 - 0.75 * 11) / 211 = -0.030, about 7 of its standard errors: warned, with the
    remedy. Not warned: 2,000 labels per row (-0.003, under the floor), the 1 / (K - 1) prior (-0.001), K = 3 with
    133 labels per row (-0.007 but 0.6 standard errors), and K = 2 (the binary prior's 3 pseudo-counts)."""
    note = _prior_pull_note(MulticlassPrior(), _counts(5, 10, 200, 0.75), "f")
    assert "11 per confusion row" in note and "-0.030 on average" in note and "off_diagonal=0.111" in note
    se = np.sqrt(50 * 200 * 0.75 * 0.25) / (50 * 200)
    assert f"({abs(2 - 0.75 * 11) / 211 / se:.1f} standard errors" in note
    assert _prior_pull_note(MulticlassPrior(), _counts(5, 10, 2000, 0.75), "f") == ""
    assert _prior_pull_note(MulticlassPrior(off_diagonal=1 / 9), _counts(5, 10, 200, 0.75), "f") == ""
    assert _prior_pull_note(MulticlassPrior(), _counts(3, 3, 133, 0.75), "f") == ""
    assert _prior_pull_note(MulticlassPrior(), _counts(3, 2, 200, 0.8), "f") == ""
    # The floor alone does not decide: a shift above it but within one standard error passes.
    assert abs((2 - 0.75 * 4) / 137) > PRIOR_PULL_FLOOR
    assert _prior_pull_note(MulticlassPrior(), np.zeros((2, 3, 3)), "f") == ""


@pytest.mark.slow  # a K-class NUTS program (the shapes of the module's fixture: compiled once for both)
def test_fit_warns_when_the_prior_pulls_the_diagonal():
    """Through fit_nuts_multiclass: 12 pseudo-counts per row (K = 3) against ~130 labels warn (PriorWarning, also in
    the fit's warnings); the default prior on the same data does not."""
    data, group, _, _ = simulate(N, J, K, G, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.warns(PriorWarning, match="12 per confusion row"):
            fit = fit_nuts_multiclass(data, groups=group, seed=3, prior=MulticlassPrior(off_diagonal=5.0), **NUTS)
        assert any("12 per confusion row" in w for w in fit.warnings)
        warnings.simplefilter("error", PriorWarning)
        fit_nuts_multiclass(data, groups=group, seed=3, **NUTS)


def test_errors():
    data, group, conf, _ = simulate(60, 3, 3, 2, seed=1)
    with pytest.raises(ValueError, match="`model` must be one of"):
        fit_map_multiclass(data, model="platt")
    with pytest.raises(ValueError, match="use fit_nuts_multiclass"):
        fit_map_multiclass(data, model="pooled")
    with pytest.raises(ValueError, match="has no \\['n_classes'"):
        fit_map_multiclass(object.__new__(type("X", (), {"responses": None, "n_items": 1, "n_annotators": 1})))
    item, ann, lab = data.responses
    with pytest.raises(ValueError, match="labels must lie in 0..2; got \\[3\\]"):
        fit_map_multiclass(data._replace(responses=(item, ann, np.where(np.arange(lab.size) == 4, 3, lab))))
    with pytest.raises(ValueError, match="`groups` must be None or an int array of shape \\(60,\\)"):
        fit_map_multiclass(data, groups=group[:10])
    with pytest.raises(ValueError, match="`groups` must be >= 0"):
        fit_map_multiclass(data, groups=group - 1)
    with pytest.raises(ValueError, match="gold labels must be -1"):
        fit_map_multiclass(data._replace(gold=np.full(60, 5)))
    with pytest.raises(ValueError, match="concentrations >= 1"):
        fit_map_multiclass(data, prior=MulticlassPrior(diagonal=0.5))
    with pytest.raises(ValueError, match="`prior` must be None or a MulticlassPrior"):
        fit_map_multiclass(data, prior={"diagonal": 2})
    repeated = data._replace(responses=(np.r_[item, 0], np.r_[ann, 0], np.r_[lab, 0]))
    with pytest.raises(ValueError, match="path='patterns' needs one response per"):
        fit_map_multiclass(repeated, groups=group, path="patterns")
    with pytest.raises(ValueError, match="`path` must be one of"):
        fit_map_multiclass(data, path="dense")
    with pytest.raises(ValueError, match="not diagonally dominant"):
        fit_nuts_multiclass(data, groups=group, init=conf[:, ::-1])  # rows reversed: labels switched
    with pytest.raises(ValueError, match="`init` must be a confusion array of shape \\(3, 3, 3\\)"):
        fit_nuts_multiclass(data, groups=group, init=np.ones((2, 3, 3)))
    with pytest.raises(ValueError, match="`target_accept` must lie strictly between 0 and 1"):
        fit_nuts_multiclass(data, groups=group, target_accept=1.0)
    with pytest.raises(ValueError, match="`precision` must be one of"):
        fit_nuts_multiclass(data, groups=group, precision="float16")
    with pytest.raises(ValueError, match="`parametrisation` must be one of \\['log_ratio', 'simplex'\\]; got 'stick'"):
        fit_nuts_multiclass(data, groups=group, parametrisation="stick")


def test_bad_precision_raises_before_any_sampling():
    data, group, _, _ = simulate(60, 3, 3, 2, seed=1)
    with pytest.raises(ValueError, match="`precision` must be one of \\['auto', 'float32', 'float64'\\]; got 'half'"):
        fit_nuts_multiclass(data, groups=group, precision="half")


@pytest.mark.slow  # two K-class NUTS programs; make test-all
def test_float32_and_float64_samplers_agree():
    """The pattern path's float32 sampler (the default) and the float64 one sample the same posterior.

    Posterior means of every confusion entry and prevalence agree within 5 standard errors of their difference,
    sqrt(mcse_32^2 + mcse_64^2) (MCSE = posterior sd / sqrt(bulk ESS)); 5 sigma over ~30 scalars keeps the
    family-wise false-alarm rate below 1e-4.
    """
    data, group, _, _ = simulate(N, J, K, G, seed=5)
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for prec in ("float32", "float64"):
            fits[prec] = fit_nuts_multiclass(data, groups=group, seed=1, n_chains=2, n_warmup=200, n_samples=200,
                                             path="patterns", precision=prec)
    assert fits["float32"].settings["precision"] == "float32"
    for name in ("confusion", "prevalence"):
        a, b = (getattr(fits[p], name) for p in ("float32", "float64"))
        ess = np.minimum(fits["float32"].diagnostics["min_ess_bulk"], fits["float64"].diagnostics["min_ess_bulk"])
        se = np.sqrt((a.var(0) + b.var(0)) / ess)
        assert np.all(np.abs(a.mean(0) - b.mean(0)) <= 5 * se + 1e-6), name


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::noisycal_bayes.warnings.ConvergenceWarning")  # weakly identified: slow EM
def test_map_warns_when_no_labelling_is_diagonally_dominant():
    """A crowd that names class 0 most often for true classes 0 and 1: no relabelling makes the average confusion
    diagonally dominant (two rows peak in one column), and the fit says so."""
    rng = np.random.default_rng(4)
    m = np.array([[0.8, 0.1, 0.1], [0.55, 0.35, 0.1], [0.05, 0.05, 0.9]])
    n = 3000
    y = rng.integers(0, 3, n)
    item, ann = np.repeat(np.arange(n), 3), np.tile(np.arange(3), n)
    lab = (rng.random(item.size)[:, None] > np.cumsum(m[y[item]], axis=1)).sum(axis=1)
    data = Crowd((item, ann, lab), n, 3, 3, None, None, ("a", "b", "c"))
    with pytest.warns(IdentifiabilityWarning, match="not diagonally dominant"):
        fit = fit_map_multiclass(data, model="dawid_skene")
    assert any("diagonally dominant" in w for w in fit.warnings)


def test_expected_counts_patterns_equal_responses():
    """The E-step that sets the log-ratio scaling: compressed rows and responses give the same counts; the totals
    are the number of responses per annotator and the number of items; a gold item's counts sit on its class."""
    data, group, conf, prev = simulate(200, 3, 4, 2, seed=4, gold_frac=0.1, missing=0.2)
    item, ann, lab = data.responses
    patterns, _ = compress_multiclass(item, ann, lab, group, data.gold, n_items=200, n_annotators=3, n_classes=4,
                                      pad_to=256)
    a = _expected_counts(patterns, conf, prev, 2)
    b = _expected_counts(sparse_table(item, ann, lab, group, data.gold), conf, prev, 2)
    np.testing.assert_allclose(a[0], b[0], atol=1e-10)
    np.testing.assert_allclose(a[1], b[1], atol=1e-10)
    np.testing.assert_allclose(a[0].sum(axis=(1, 2)), np.bincount(ann, minlength=3), atol=1e-10)
    assert abs(a[1].sum() - 200) < 1e-10
    one = np.flatnonzero(data.gold >= 0)[:1]
    keep = np.isin(item, one)
    c, p = _expected_counts(sparse_table(item[keep] * 0, ann[keep], lab[keep], np.zeros(1, int), data.gold[one]),
                            conf, prev[:1], 1)  # that item alone (item index 0)
    assert p[0, data.gold[one[0]]] == 1.0 and p.sum() == 1.0


@pytest.mark.slow  # two K-class NUTS programs; make test-all
def test_log_ratio_and_simplex_samplers_agree():
    """Both parametrisations sample one posterior: every posterior mean of a confusion entry and prevalence agrees
    within z = ndtri(1 - 1e-3 / (2 m)) standard errors of the difference (se^2 = var_a / ess_a + var_b / ess_b,
    bulk ESS; Bonferroni over the m scalars: family-wise false-alarm rate 1e-3). Negative control: a fit of a
    different model (diagonal pseudo-count 40 instead of 2) fails the same check."""
    data, group, _, _ = simulate(N, J, K, G, seed=5)
    kw = dict(groups=group, n_chains=2, n_warmup=300, n_samples=500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = fit_nuts_multiclass(data, seed=1, parametrisation="log_ratio", **kw)
        b = fit_nuts_multiclass(data, seed=2, parametrisation="simplex", **kw)
        c = fit_nuts_multiclass(data, seed=3, parametrisation="log_ratio", prior=MulticlassPrior(diagonal=40.0), **kw)
    assert a.settings["parametrisation"] == "log_ratio" and b.settings["parametrisation"] == "simplex"
    m = J * K * K + G * K
    bound = ndtri(1 - 1e-3 / (2 * m))

    def max_z(f, g):
        z = []
        for name in ("confusion", "prevalence"):
            x, y = getattr(f, name), getattr(g, name)
            ess = min(f.diagnostics["min_ess_bulk"], g.diagnostics["min_ess_bulk"])  # conservative: the smallest ESS
            z.append(np.abs(x.mean(0) - y.mean(0)) / np.sqrt((x.var(0) + y.var(0)) / ess))
        return max(float(np.max(t)) for t in z)

    assert max_z(a, b) < bound
    assert max_z(c, b) > bound


def test_numpy_em_start_equals_fit_map_and_fit_em():
    """fit_nuts_multiclass starts from EM run in NumPy on compressed rows (no JAX loop to compile);
    fit_map_multiclass is fit_em_multiclass with the prior's concentrations on the responses. Same updates, so the
    same mode, log-likelihood and log posterior (gold items, missing responses, an empty group, padding rows).
    Both run to tol 1e-12; EM converges linearly at rate r < 1, so each lies within 1e-12 / (1 - r) of the mode:
    1e-9 allows r up to 0.999."""
    data, group, _, _ = simulate(150, 3, 3, 3, seed=8, gold_frac=0.1, missing=0.2)
    group = np.where(group == 1, 2, group)  # group 1 empty: its prevalence is the prior's mode
    item, ann, lab = data.responses
    table, _ = compress_multiclass(item, ann, lab, group, data.gold, n_items=150, n_annotators=3, n_classes=3,
                                   pad_to=128)
    prior = MulticlassPrior(diagonal=3.0, prevalence=2.0)
    a = _np_map_em(table, prior, n_annotators=3, n_classes=3, n_groups=3, max_iter=20000, tol=1e-12)
    b = fit_map_multiclass(data, groups=group, prior=prior, max_iter=20000, tol=1e-12)
    np.testing.assert_allclose(a[0], b.confusion, atol=1e-9)
    np.testing.assert_allclose(a[1], b.prevalence, atol=1e-9)
    assert abs(a[2] - b.log_likelihood) < 1e-8 and abs(a[3] - b.log_posterior) < 1e-8 and a[5] and b.converged
    np.testing.assert_allclose(a[1][1], 1 / 3, atol=1e-12)
    # The MAP fit is fit_em_multiclass(prior=...) from the vote start; path="patterns" with gold runs on responses.
    c = fit_em_multiclass(data, groups=group, prior=(prior.pseudo_counts(3) + 1, prior.prevalence), n_starts=0,
                          max_iter=20000, tol=1e-12)
    np.testing.assert_array_equal(c.confusion, b.confusion)
    assert b.path == "sparse" and fit_map_multiclass(data, groups=group, prior=prior, path="patterns", max_iter=20000,
                                                                     tol=1e-12).path == "sparse"
    # Negative control: another prior moves the mode by far more than the tolerance.
    d = fit_map_multiclass(data, groups=group, prior=MulticlassPrior(diagonal=30.0), max_iter=20000, tol=1e-12)
    assert np.abs(d.confusion - b.confusion).max() > 1e-3


def test_pattern_path_feasibility_for_a_large_crowd():
    # Regression: (K + 1)^(J + 1) as a float overflowed (OverflowError) for a crowd of hundreds of annotators.
    from noisycal_bayes.models.inputs import patterns_feasible as _patterns_feasible

    item, ann = np.arange(500), np.arange(500)
    assert not _patterns_feasible(item, ann, path="auto", func="f", n_groups=10, n_annotators=500, n_classes=5)
    with pytest.raises(ValueError, match="path='sparse'"):
        _patterns_feasible(item, ann, path="patterns", func="f", n_groups=10, n_annotators=500, n_classes=5)
