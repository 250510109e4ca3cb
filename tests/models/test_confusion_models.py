"""K-class channel models (models/dawid_skene.py, pooled.py, log_ratio.py; core/likelihood.py): independent routes to the likelihood agree,
K = 2 equals the binary model, relabelling permutes, gold labels are observed latent labels."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density

from noisycal_bayes.core import x64
from noisycal_bayes.core.tables import PatternTable, SparseTable
from noisycal_bayes.models import Prior, grouped_dawid_skene
from noisycal_bayes.core.likelihood import class_log_joint, multiclass_loglik_rows
from noisycal_bayes.core.starts import diagonally_dominant
from noisycal_bayes.data.compress import compress_multiclass, sparse_table
from noisycal_bayes.models.dawid_skene import dawid_skene_multiclass, grouped_multiclass
from noisycal_bayes.models.log_ratio import LogRatioScaling, grouped_multiclass_log_ratio, log_ratio_coordinates, log_ratio_point, log_ratio_scaling
from noisycal_bayes.models.pooled import pooled_multiclass, population_confusion
from noisycal_bayes.models.priors import MulticlassPrior


# One compiled program per function (eager JAX would compile every small operation separately).
_loglik = jax.jit(multiclass_loglik_rows)
_joint = jax.jit(class_log_joint)


def _density(model, table, static, sites):
    return float(jax.jit(lambda t, s: log_density(model, (t,), static, s)[0])(table, sites))


def _simulate(rng, n, n_ann, k, n_groups, *, missing=0.2, gold=0.1):
    """Responses of a random diagonal-heavy crowd, some missing, some gold items; NumPy only."""
    alpha = 1.0 + 6.0 * np.eye(k)
    conf = np.stack([[rng.dirichlet(alpha[y]) for y in range(k)] for _ in range(n_ann)])
    prev = rng.dirichlet(np.full(k, 2.0), size=n_groups)
    group = rng.integers(0, n_groups, n)
    y = np.array([rng.choice(k, p=prev[g]) for g in group])
    item, ann, lab = [], [], []
    for i in range(n):
        for j in range(n_ann):
            if rng.random() >= missing:
                item.append(i), ann.append(j), lab.append(rng.choice(k, p=conf[j, y[i]]))
    gold_arr = np.where(rng.random(n) < gold, y, -1)
    return np.array(item), np.array(ann), np.array(lab), group, gold_arr, conf, prev


def _loop_loglik(item, ann, lab, group, gold, conf, prev):
    """log P(A_i) (log P(Y = gold, A_i) for gold items) item by item, with plain Python sums."""
    n, k = group.size, conf.shape[-1]
    out = np.empty(n)
    for i in range(n):
        terms = []
        for y in range(k):
            if gold[i] >= 0 and y != gold[i]:
                continue
            t = np.log(prev[group[i], y])
            for r in np.flatnonzero(item == i):
                t += np.log(conf[ann[r], y, lab[r]])
            terms.append(t)
        m = max(terms)
        out[i] = m + np.log(sum(np.exp(t - m) for t in terms))
    return out


@pytest.fixture(scope="module")
def crowd():
    rng = np.random.default_rng(18)
    return _simulate(rng, 120, 3, 4, 3)


def test_compressed_equals_sparse_equals_loop(crowd):
    item, ann, lab, group, gold, conf, prev = crowd
    n, k = group.size, conf.shape[-1]
    loop = _loop_loglik(item, ann, lab, group, gold, conf, prev)
    table, inverse = compress_multiclass(item, ann, lab, group, gold, n_items=n, n_annotators=3, n_classes=k,
                                         pad_to=128)
    assert table.counts.sum() == n and table.patterns.shape[0] == 128
    with x64():
        lc, lp = jnp.log(conf), jnp.log(prev)
        sparse = np.asarray(_loglik(sparse_table(item, ann, lab, group, gold), lc, lp))
        rows = np.asarray(_loglik(PatternTable(*map(jnp.asarray, table)), lc, lp))
    np.testing.assert_allclose(sparse, loop, rtol=0, atol=1e-10)
    np.testing.assert_allclose(rows[inverse], loop, rtol=0, atol=1e-10)
    # Weighted by counts, the compressed total is the sum over items (padding rows count 0).
    used = table.counts > 0
    assert abs(np.sum(table.counts[used] * rows[used]) - loop.sum()) < 1e-9


def test_sparse_table_sorts_unsorted_responses(crowd):
    item, ann, lab, group, gold, conf, prev = crowd
    perm = np.random.default_rng(1).permutation(item.size)
    with x64():
        a = _loglik(sparse_table(item, ann, lab, group, gold), jnp.log(conf), jnp.log(prev))
        b = _loglik(sparse_table(item[perm], ann[perm], lab[perm], group, gold), jnp.log(conf),
                                   jnp.log(prev))
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-12)


def test_gold_items_are_observed_labels(crowd):
    """Summing P(Y = y, A) over the K possible gold labels gives P(A): gold fixes the latent label, nothing more."""
    item, ann, lab, group, _, conf, prev = crowd
    n, k = group.size, conf.shape[-1]
    none = np.full(n, -1)
    with x64():
        lc, lp = jnp.log(conf), jnp.log(prev)
        free = np.asarray(_loglik(sparse_table(item, ann, lab, group, none), lc, lp))
        per_class = np.stack([np.asarray(_loglik(sparse_table(item, ann, lab, group, np.full(n, y)),
                                                                lc, lp)) for y in range(k)])
        joint = np.asarray(_joint(sparse_table(item, ann, lab, group, none), lc, lp))
    np.testing.assert_allclose(np.logaddexp.reduce(per_class, axis=0), free, rtol=0, atol=1e-10)
    np.testing.assert_allclose(per_class.T, joint, rtol=0, atol=1e-10)
    assert not np.allclose(per_class[0], free)  # a gold label changes the likelihood


def test_relabelling_classes_permutes():
    """Relabel with sigma (labels, gold, and C[j, sigma y, sigma a] = C[j, y, a]): every item's likelihood is unchanged."""
    rng = np.random.default_rng(3)
    item, ann, lab, group, gold, conf, prev = _simulate(rng, 80, 3, 4, 2)
    sigma = np.array([2, 0, 3, 1])
    conf_p = np.empty_like(conf)
    conf_p[:, sigma[:, None], sigma[None, :]] = conf
    prev_p = np.empty_like(prev)
    prev_p[:, sigma] = prev
    gold_p = np.where(gold >= 0, sigma[np.maximum(gold, 0)], -1)
    with x64():
        a = _loglik(sparse_table(item, ann, lab, group, gold), jnp.log(conf), jnp.log(prev))
        b = _loglik(sparse_table(item, ann, sigma[lab], group, gold_p), jnp.log(conf_p), jnp.log(prev_p))
        ja = _joint(sparse_table(item, ann, lab, group, gold), jnp.log(conf), jnp.log(prev))
        jb = _joint(sparse_table(item, ann, sigma[lab], group, gold_p), jnp.log(conf_p), jnp.log(prev_p))
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(jb)[:, sigma], np.asarray(ja), rtol=0, atol=1e-12)


@pytest.mark.slow  # compiles a K-class program (~10-40 s on 2 loaded cores); make test-all
def test_dawid_skene_ignores_groups_and_pooled_confusion_is_softmax(crowd):
    item, ann, lab, group, gold, conf, prev = crowd
    k = conf.shape[-1]
    table = sparse_table(item, ann, lab, group, gold)
    one = sparse_table(item, ann, lab, np.zeros_like(group), gold)
    prior = MulticlassPrior().params()
    with x64():
        a = _density(dawid_skene_multiclass, table, dict(n_annotators=3, n_classes=k, prior=prior),
                     {"confusion": jnp.asarray(conf), "prevalence": jnp.asarray(prev[0])})
        b = _density(grouped_multiclass, one, dict(n_annotators=3, n_classes=k, n_groups=1, prior=prior),
                     {"confusion": jnp.asarray(conf), "prevalence": jnp.asarray(prev[:1])})
        assert abs(a - b) < 1e-10
        rng = np.random.default_rng(0)
        mu, z = rng.normal(-2, 1, (k, k - 1)), rng.normal(size=(3, k, k - 1))
        from numpyro.handlers import substitute, trace

        def pooled_trace(t, sites):
            tr = trace(substitute(pooled_multiclass, sites)).get_trace(t, n_annotators=3, n_classes=k,
                                                                       n_groups=prev.shape[0], prior=prior)
            return tr["confusion"]["value"], tr["responses"]["fn"].log_factor

        c, factor = jax.jit(pooled_trace)(table, {"mu": mu, "sigma": 0.7, "z": z, "prevalence": prev})
        c = np.asarray(c)
        pop = np.asarray(jax.jit(population_confusion)(jnp.asarray(mu)))
        total = float(jnp.sum(_loglik(table, jnp.log(jnp.asarray(c)), jnp.log(jnp.asarray(prev)))))
        assert abs(float(factor) - total) < 1e-9
    # Row y of C_j: log(C[j, y, a] / C[j, y, y]) equals mu + sigma z at the off-diagonal positions.
    off = ~np.eye(k, dtype=bool)
    log_odds = np.log(c) - np.log(np.diagonal(c, axis1=1, axis2=2))[..., None]
    np.testing.assert_allclose(log_odds[:, off].reshape(3, k, k - 1), mu + 0.7 * z, atol=1e-12)
    np.testing.assert_allclose(np.diagonal(pop), 1 / (1 + np.exp(mu).sum(-1)), atol=1e-12)
    np.testing.assert_allclose(c.sum(-1), 1.0, atol=1e-12)


def test_diagonally_dominant_and_prior_errors():
    c = np.array([[[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]] * 2)
    assert diagonally_dominant(c)
    swapped = c[:, [1, 0, 2]]  # rows 0 and 1 exchanged: class labels switched
    assert not diagonally_dominant(swapped)
    assert diagonally_dominant(np.stack([c, swapped])).tolist() == [True, False]
    with pytest.raises(ValueError, match="`diagonal` must be a finite number > 0"):
        MulticlassPrior(diagonal=0)
    with pytest.raises(ValueError, match="`population_loc` must be finite"):
        MulticlassPrior(population_loc=float("inf"))
    with pytest.raises(ValueError, match="one prevalence"):
        log_density(dawid_skene_multiclass, (SparseTable(*[jnp.zeros(1, jnp.int32)] * 5),),
                    dict(n_annotators=1, n_classes=2, n_groups=2, prior=MulticlassPrior().params()), {})


def _random_scaling(rng, n_ann, k, n_groups):
    ref = rng.integers(0, k, n_groups)
    cls = np.arange(k)[None, :]
    index = np.where(cls == ref[:, None], k - 1, np.where(cls < ref[:, None], cls, cls - 1)).astype(np.int32)
    return LogRatioScaling(rng.normal(-1, 1, (n_ann, k, k - 1)), rng.uniform(0.2, 2, (n_ann, k, k - 1)),
                           rng.normal(0, 1, (n_groups, k - 1)), rng.uniform(0.2, 2, (n_groups, k - 1)), index)


def test_log_ratio_model_is_the_simplex_model_by_change_of_variables(crowd):
    """The NUTS parametrisation is the same model: its log density at (u, v) (NumPyro) equals the Dirichlet log
    densities at (C(u), pi(v)) (scipy) plus the likelihood (Python loop) plus log |det| of the map from each row's
    K - 1 coordinates to its K - 1 entries other than the reference, that Jacobian by central differences (an
    independent route to the analytic prod_k p_k of the model's docstring; error O(h^2) ~ 1e-12)."""
    from scipy.stats import dirichlet

    item, ann, lab, group, gold, conf, prev = crowd
    k, n_groups = conf.shape[-1], prev.shape[0]
    rng = np.random.default_rng(2)
    scaling = _random_scaling(rng, 3, k, n_groups)
    u, v = rng.normal(size=(3, k, k - 1)), rng.normal(size=(n_groups, k - 1))
    mp = MulticlassPrior(diagonal=3.0, off_diagonal=1.5, prevalence=2.0)
    static = dict(n_annotators=3, n_classes=k, n_groups=n_groups, prior=mp.params())
    with x64():
        new = float(jax.jit(lambda t, sc, x: log_density(grouped_multiclass_log_ratio, (t, sc), static, x)[0])(
            *jax.tree.map(jnp.asarray, (sparse_table(item, ann, lab, group, gold), scaling)),
            {"confusion_u": u, "prevalence_u": v}))
    log_c, log_p = log_ratio_point(scaling, u, v)                              # NumPy route of the same map
    c, p = np.exp(log_c), np.exp(log_p)
    alpha = mp.pseudo_counts(k) + 1.0
    old = sum(dirichlet.logpdf(c[j, y], alpha[y]) for j in range(3) for y in range(k))
    old += sum(dirichlet.logpdf(p[g], np.full(k, mp.prevalence)) for g in range(n_groups))
    old += _loop_loglik(item, ann, lab, group, gold, c, p).sum()
    h, logdet = 1e-6, 0.0
    free_prev = scaling.prev_index < k - 1                                   # a group's entries other than its reference
    for j, y in np.ndindex(3, k):
        jac = np.empty((k - 1, k - 1))
        for i in range(k - 1):
            up, dn = u.copy(), u.copy()
            up[j, y, i] += h
            dn[j, y, i] -= h
            diff = np.exp(log_ratio_point(scaling, up, v)[0][j, y]) - np.exp(log_ratio_point(scaling, dn, v)[0][j, y])
            jac[:, i] = (diff / (2 * h))[np.arange(k) != y]
        logdet += np.linalg.slogdet(jac)[1]
    for g in range(n_groups):
        jac = np.empty((k - 1, k - 1))
        for i in range(k - 1):
            up, dn = v.copy(), v.copy()
            up[g, i] += h
            dn[g, i] -= h
            diff = np.exp(log_ratio_point(scaling, u, up)[1][g]) - np.exp(log_ratio_point(scaling, u, dn)[1][g])
            jac[:, i] = (diff / (2 * h))[free_prev[g]]
        logdet += np.linalg.slogdet(jac)[1]
    assert abs(new - (old + logdet)) < 1e-6
    assert abs(new - old) > 1.0  # the Jacobian matters (the check would see a missing term)
    # Round trip: the coordinates of the point are (u, v).
    u2, v2 = log_ratio_coordinates(scaling, c, p)
    np.testing.assert_allclose(u2, u, atol=1e-9)
    np.testing.assert_allclose(v2, v, atol=1e-9)


def test_log_ratio_scaling_standardises_the_conjugate_posterior():
    """Rows drawn from Dirichlet(counts + alpha), the conjugate posterior given the counts, have standardised
    coordinates with mean 0 and variance 1 (exact moments of log-ratios of a Dirichlet). n = 4000 draws per
    coordinate: se of the mean 1/sqrt(n), of the variance sqrt(2/n) (plus kurtosis: 4 se covers it); over 2 x 3 x 2
    + 2 x 2 coordinates a 5-se bound keeps the false-alarm rate below 1e-4. Negative control: the scaling from
    counts four times too large gives variances near 4 (scales halved), which fails."""
    rng = np.random.default_rng(7)
    k, n = 3, 4000
    counts = rng.uniform(0, 60, (2, k, k)) + 40 * np.eye(k)
    prev_counts = rng.uniform(0, 50, (2, k))
    prior = MulticlassPrior()
    alpha = prior.pseudo_counts(k) + 1.0
    conf = np.stack([np.stack([rng.dirichlet(counts[j, y] + alpha[y], n) for y in range(k)], 1) for j in range(2)], 1)
    prev = np.stack([rng.dirichlet(prev_counts[g] + prior.prevalence, n) for g in range(2)], 1)

    def standardised(scaling):
        u, v = log_ratio_coordinates(scaling, conf, prev)
        return np.concatenate([u.reshape(n, -1), v.reshape(n, -1)], axis=1)

    x = standardised(log_ratio_scaling(counts, prev_counts, prior))
    assert np.all(np.abs(x.mean(0)) < 5 / np.sqrt(n)) and np.all(np.abs(x.var(0) - 1) < 5 * np.sqrt(2 / n))
    bad = standardised(log_ratio_scaling(4 * counts, 4 * prev_counts, prior))
    assert not np.all(np.abs(bad.var(0) - 1) < 5 * np.sqrt(2 / n))
