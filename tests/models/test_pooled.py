"""The partially pooled channel model (noisycal_bayes/models/pooled.py) and its start and summaries.

Cheap checks only (no sampling): the likelihood against a NumPy loop over items, the orientation
invariance that ``mean_gap > 0`` breaks, prior-predictive shapes, the bounded start on a low-noise design.
Sampling-based checks (recovery, rte, SBC) are in tests/inference/test_nuts.py and tests/statistical.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpyro.handlers import seed, substitute, trace

from noisycal_bayes.core import x64
from noisycal_bayes.data import AnnotationSet
from noisycal_bayes.inference._common import (flag_annotators, pooled_derived, pooled_inputs, pooled_start,
                                              population_summary)
from noisycal_bayes.models import POOLED_KINDS, Prior, pooled_model
from noisycal_bayes.models.inputs import resolve_assignment

from ._jit import jit_trace_values

N_ITEMS, N_ANN = 12, 5


def _responses(seed_=0, repeat=True):
    """Sparse responses of 12 items by 5 annotators, 1-4 labels per item, one repeated (item, annotator) pair."""
    rng = np.random.default_rng(seed_)
    rows = []
    for i in range(N_ITEMS):
        for j in rng.choice(N_ANN, rng.integers(1, 5), replace=False):
            rows.append((i, j, rng.integers(0, 2)))
    if repeat:
        rows.append((3, rows[0][1] if rows[0][0] == 3 else [r for r in rows if r[0] == 3][0][1], 1))
    rows.sort()
    item, ann, lab = (np.array(c, np.int32) for c in zip(*rows))
    return item, ann, lab


def _values(rng, kind, n_groups):
    v = {"mu_fpr": -1.2, "mean_gap": 2.1, "sigma_fpr": 0.7, "sigma_tpr": 1.3,
         "z_fpr": rng.normal(size=N_ANN), "z_tpr": rng.normal(size=N_ANN)}
    if kind == "dawid_skene":
        v["prevalence"] = 0.3
    elif kind in ("grouped", "histogram"):
        v["prevalence"] = rng.uniform(0.1, 0.9, n_groups)
    elif kind == "monotone":
        v["increments"] = rng.dirichlet(np.ones(n_groups + 1))
    else:
        v.update(slope=0.8, intercept=-0.4)
    return {k: np.asarray(x, np.float64) for k, x in v.items()}


def _numpy_loglik(item, ann, lab, fpr, tpr, prob_item, gold):
    """log p(A_i) per item by a plain loop (gold items: log P(Y_i = gold_i, A_i))."""
    out = np.zeros(N_ITEMS)
    for i in range(N_ITEMS):
        r = item == i
        a, f, t = lab[r], fpr[ann[r]], tpr[ann[r]]
        p0 = (1 - prob_item[i]) * np.prod(np.where(a == 1, f, 1 - f))
        p1 = prob_item[i] * np.prod(np.where(a == 1, t, 1 - t))
        out[i] = np.log({-1: p0 + p1, 0: p0, 1: p1}[int(gold[i])])
    return out


@pytest.mark.parametrize("kind", POOLED_KINDS)
def test_likelihood_equals_numpy_loop(kind):
    rng = np.random.default_rng(1)
    item, ann, lab = _responses()
    n_groups = 3
    group = rng.integers(0, n_groups, N_ITEMS).astype(np.int32) if kind != "dawid_skene" else np.zeros(N_ITEMS, np.int32)
    gold = np.full(N_ITEMS, -1, np.int32)
    gold[[2, 7]] = [1, 0]
    logit_score = rng.normal(size=N_ITEMS)
    v = _values(rng, kind, n_groups)
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    fpr = sig(v["mu_fpr"] + v["sigma_fpr"] * v["z_fpr"])
    tpr = sig(v["mu_fpr"] + v["mean_gap"] + v["sigma_tpr"] * v["z_tpr"])
    if kind == "platt":
        prob_item = sig(v["slope"] * logit_score + v["intercept"])
    elif kind == "monotone":
        prob_item = np.cumsum(v["increments"])[:-1][group]
    else:
        prob_item = np.atleast_1d(v["prevalence"])[group]
    expected = _numpy_loglik(item, ann, lab, fpr, tpr, prob_item, gold)
    with x64():
        tr = jit_trace_values(lambda: trace(substitute(pooled_model, v)).get_trace(
            item, ann, lab, group, gold, logit_score, kind=kind, n_items=N_ITEMS, n_annotators=N_ANN,
            n_groups=n_groups, prior=Prior(), record_loglik=True))
        got = tr["log_likelihood"]
        np.testing.assert_allclose(tr["fpr"], fpr, rtol=1e-12)
        np.testing.assert_allclose(tr["gap"], tpr - fpr, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_label_exchange_flips_mean_gap_only():
    """The likelihood is invariant under Y -> 1 - Y, i.e. (fpr, tpr, pi) -> (tpr, fpr, 1 - pi); in the pooled
    parametrisation that is (mu_fpr, mean_gap, z_fpr, z_tpr, sigmas) -> (mu_fpr + mean_gap, -mean_gap, z_tpr,
    z_fpr, swapped sigmas): so the constraint mean_gap > 0 removes exactly the mirror mode."""
    rng = np.random.default_rng(2)
    item, ann, lab = _responses(3, repeat=False)
    v = _values(rng, "dawid_skene", 1)
    w = dict(v, mu_fpr=v["mu_fpr"] + v["mean_gap"], mean_gap=-v["mean_gap"], z_fpr=v["z_tpr"], z_tpr=v["z_fpr"],
             sigma_fpr=v["sigma_tpr"], sigma_tpr=v["sigma_fpr"], prevalence=1 - v["prevalence"])
    args = (item, ann, lab, np.zeros(N_ITEMS, np.int32), np.full(N_ITEMS, -1, np.int32), np.zeros(N_ITEMS))
    kw = dict(kind="dawid_skene", n_items=N_ITEMS, n_annotators=N_ANN, prior=Prior(), record_loglik=True)
    def values():
        """Both log-likelihoods and the prior's support check in one compiled program (eager: one per primitive)."""
        a = trace(substitute(pooled_model, v)).get_trace(*args, **kw)["log_likelihood"]["value"]
        b = trace(substitute(pooled_model, w)).get_trace(*args, **kw)["log_likelihood"]["value"]
        prior_tr = trace(seed(pooled_model, 0)).get_trace(item, ann, None, *args[3:], **dict(kw, record_loglik=False))
        return a, b, prior_tr["mean_gap"]["fn"].support(-1.0)

    with x64():
        import jax

        a, b, mirror_in_support = (np.asarray(x) for x in jax.jit(values)())
    # The prior puts no mass on the mirror: HalfNormal support is mean_gap > 0.
    assert not bool(mirror_in_support)
    np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("kind", ["grouped", "platt"])
def test_prior_predictive_shapes(kind):
    item, ann, _ = _responses()
    # Eager on purpose: both kinds share the compiled Beta/Normal samplers of one shape; under jax.jit each
    # kind would compile its own program including the (costly) Gamma rejection sampler.
    with x64():
        tr = trace(seed(pooled_model, 0)).get_trace(item, ann, None, np.zeros(N_ITEMS, np.int32), None,
                                                    np.zeros(N_ITEMS), kind=kind, n_items=N_ITEMS,
                                                    n_annotators=N_ANN, n_groups=1, prior=Prior())
    assert tr["y"]["value"].shape == (N_ITEMS,)
    assert tr["labels"]["value"].shape == item.shape
    assert tr["fpr"]["value"].shape == tr["tpr"]["value"].shape == (N_ANN,)
    assert set(np.unique(np.asarray(tr["labels"]["value"]))) <= {0, 1}
    assert float(tr["mean_gap"]["value"]) > 0


def test_bad_kind_and_prior_fields():
    item, ann, lab = _responses()
    with pytest.raises(ValueError, match="`kind` must be one of"):
        pooled_model(item, ann, lab, kind="pooled", n_items=N_ITEMS, n_annotators=N_ANN)
    with pytest.raises(ValueError, match="population_gap"):
        Prior(population_gap=0.0)
    with pytest.raises(ValueError, match="population_fpr"):
        Prior(population_fpr=(0.0, -1.0))


def _low_noise_data(n=120, seed_=0):
    """Three near-perfect annotators (fpr 0.002, tpr 0.99) and scores whose groups have prevalence near 0 or 1."""
    rng = np.random.default_rng(seed_)
    scores = np.concatenate([rng.uniform(0, 0.02, n // 2), rng.uniform(0.98, 1, n - n // 2)])
    y = (rng.random(n) < scores).astype(int)
    lab = (rng.random((n, 3)) < np.where(y[:, None] == 1, 0.99, 0.002)).astype(int)
    return AnnotationSet.from_wide(lab, scores=scores)


@pytest.mark.parametrize("kind", ["grouped", "dawid_skene", "monotone", "platt"])
def test_start_is_bounded_on_low_noise_design(kind):
    from noisycal_bayes.data import Binning

    data = _low_noise_data()
    assignment = resolve_assignment(data, kind, Binning.equal_mass(4), "test")
    args, static = pooled_inputs(data, kind, assignment)
    start = pooled_start(args, static)
    assert all(np.all(np.isfinite(v)) for v in start.values())
    draws, _ = pooled_derived(start)
    for name in ("fpr", "tpr"):
        assert np.all((draws[name] > 0.005) & (draws[name] < 0.995)), name
    if "prevalence" in start:
        assert np.all((start["prevalence"] >= 0.02) & (start["prevalence"] <= 0.98))
    assert np.all(draws["gap"] > 0.5)  # near-perfect annotators start clearly oriented


def test_pooled_inputs_use_gold_and_no_dense_labels():
    df = pd.DataFrame({"task": [0, 0, 1, 1, 2], "worker": ["a", "b", "a", "c", "b"], "label": [1, 1, 0, 0, 1]})
    data = AnnotationSet.from_crowdkit(df)
    data = AnnotationSet(data.labels, None, data.item_ids, data.annotator_ids, gold=np.array([1, -1, -1]))
    assignment = resolve_assignment(data, "dawid_skene", None, "test")
    (item, ann, lab, group, gold, *_), static = pooled_inputs(data, "dawid_skene", assignment)
    assert item.shape == (5,) and gold.tolist() == [1, -1, -1]
    assert static == {"kind": "dawid_skene", "n_items": 3, "n_annotators": 3, "n_groups": 1}


def test_population_summary_and_flags():
    rng = np.random.default_rng(0)
    # Draws with mu_fpr = logit(0.1), median tpr = 0.9, spreads 0.5 (tiny posterior noise).
    m = np.log(0.1 / 0.9)
    pop = {"mu_fpr": m + 0.001 * rng.normal(size=(2, 50)), "mean_gap": -2 * m + 0.001 * rng.normal(size=(2, 50)),
           "sigma_fpr": np.full((2, 50), 0.5), "sigma_tpr": np.full((2, 50), 0.5)}
    s = population_summary(pop, level=0.9)
    assert s["fpr"]["median"] == pytest.approx(0.1, abs=1e-3)
    assert s["tpr"]["median"] == pytest.approx(0.9, abs=1e-3)
    lo, hi = s["fpr"]["range"]
    # sigmoid(logit(0.1) -+ 1.6449 * 0.5): the middle 90% of a logit-normal population.
    assert lo == pytest.approx(1 / (1 + np.exp(-(m - 1.6448536 * 0.5))), rel=1e-3)
    assert hi == pytest.approx(1 / (1 + np.exp(-(m + 1.6448536 * 0.5))), rel=1e-3)
    gap = np.stack([rng.normal(0.6, 0.05, 400), rng.normal(0.0, 0.05, 400), rng.normal(-0.4, 0.05, 400)], axis=-1)
    flags = flag_annotators(gap, ["good", "spam", "adv"])
    assert flags["uninformative"] == ["spam"] and flags["adversarial"] == ["adv"]


def test_padded_layout_and_partial_centring_give_the_same_model():
    """The padded per-item sum equals the segment sum (1e-12), and a partial centring c in [0, 1] changes the
    sampled coordinates only: the rates of z_c = c mu + sigma^c z equal those of the non-centred z, and the
    log-likelihood is unchanged. The log density of the site differs by the Jacobian of z -> z_c, sum c log sigma."""
    from noisycal_bayes.core.sparse import padded_codes

    rng = np.random.default_rng(5)
    item, ann, lab = _responses()
    v = _values(rng, "dawid_skene", 1)
    base = (item, ann, lab, np.zeros(N_ITEMS, np.int32), np.full(N_ITEMS, -1, np.int32), np.zeros(N_ITEMS))
    padded = padded_codes(item, 2 * ann + lab, N_ITEMS, 2 * N_ANN)
    assert padded is not None and padded.shape == (N_ITEMS, np.bincount(item).max())
    c = rng.uniform(0, 1, (2, N_ANN))
    mu = {"fpr": v["mu_fpr"], "tpr": v["mu_fpr"] + v["mean_gap"]}
    w = dict(v, **{f"z_{k}": c[i] * mu[k] + v[f"sigma_{k}"] ** c[i] * v[f"z_{k}"]
                   for i, k in enumerate(("fpr", "tpr"))})
    kw = dict(kind="dawid_skene", n_items=N_ITEMS, n_annotators=N_ANN, prior=Prior(), record_loglik=True)

    def values(v, w):
        """Everything compared below, in one compiled program (eager tracing would compile every primitive)."""
        seg = trace(substitute(pooled_model, v)).get_trace(*base, **kw)
        pad = trace(substitute(pooled_model, v)).get_trace(*base, padded, None, None, **kw)
        cen = trace(substitute(pooled_model, w)).get_trace(*base, padded, None, c, **kw)
        out = {f"ll_{n}": t["log_likelihood"]["value"] for n, t in (("seg", seg), ("pad", pad), ("cen", cen))}
        for i, k in enumerate(("fpr", "tpr")):
            out[f"{k}_seg"], out[f"{k}_cen"] = seg[k]["value"], cen[k]["value"]
            out[f"lp_{k}_cen"] = cen[f"z_{k}"]["fn"].log_prob(w[f"z_{k}"])
            out[f"lp_{k}_seg"] = seg[f"z_{k}"]["fn"].log_prob(v[f"z_{k}"])
        return out

    with x64():
        import jax

        got = {k: np.asarray(x) for k, x in jax.jit(values)(v, w).items()}
    np.testing.assert_allclose(got["ll_pad"], got["ll_seg"], rtol=1e-12)
    np.testing.assert_allclose(got["ll_cen"], got["ll_seg"], rtol=1e-12)
    for i, k in enumerate(("fpr", "tpr")):
        np.testing.assert_allclose(got[f"{k}_cen"], got[f"{k}_seg"], rtol=1e-12)
        # log N(z_c; c mu, sigma^c) = log N(z; 0, 1) - c log sigma, per annotator.
        np.testing.assert_allclose(got[f"lp_{k}_cen"], got[f"lp_{k}_seg"] - c[i] * np.log(v[f"sigma_{k}"]), rtol=1e-12)
    # pooled_derived inverts the centring.
    draws_c, _ = pooled_derived({k: np.asarray(x) for k, x in w.items()}, c)
    draws_0, _ = pooled_derived({k: np.asarray(x) for k, x in v.items()})
    np.testing.assert_allclose(draws_c["fpr"], draws_0["fpr"], rtol=1e-12)
    np.testing.assert_allclose(draws_c["tpr"], draws_0["tpr"], rtol=1e-12)


def test_padded_codes_refuses_a_layout_twice_the_responses():
    from noisycal_bayes.core.sparse import padded_codes

    item = np.array([0] * 10 + [1, 2, 3], np.int32)  # one item with 10 labels, three with 1: 4 x 10 > 2 x 13
    assert padded_codes(item, np.zeros(13, np.int32), 4, 2) is None


def _gold_crowd():
    rng = np.random.default_rng(3)
    n, n_ann = 60, 6
    y = rng.random(n) < 0.5
    item = np.repeat(np.arange(n), 3)
    ann = np.concatenate([rng.choice(n_ann, 3, replace=False) for _ in range(n)])
    lab = (rng.random(item.size) < np.where(y[item], 0.85, 0.15)).astype(int)
    gold = np.full(n, -1)
    gold[:10] = y[:10]
    return item, ann, lab, gold


def _check_gold_values(fit, data, gold):
    """clean_label_probability is the gold label on gold items, log_likelihood log P(Y = gold, A) there: both
    against core.sparse's gold route (an independent computation, per response) at the fit's point."""
    from noisycal_bayes.core.sparse import sparse_e_step, sparse_item_loglik
    from noisycal_bayes.core.tables import Responses

    n = data.n_items
    post, ll = fit.clean_label_probability(), fit.log_likelihood()
    np.testing.assert_array_equal(post[:10], gold[:10])
    resp = Responses(*(np.asarray(a, np.int32) for a in data.responses))
    group = np.zeros(n, np.int32)
    with x64():
        prev, gd = np.atleast_1d(fit.point["prevalence"]), np.asarray(gold, np.int32)
        want_ll = np.asarray(sparse_item_loglik(resp, group, fit.point["fpr"], fit.point["tpr"], prev, gold=gd))
        want_t = np.asarray(sparse_e_step(resp, group, fit.point["fpr"], fit.point["tpr"], prev, gold=gd)[1])
    np.testing.assert_allclose(ll, want_ll, rtol=1e-9)
    np.testing.assert_allclose(post, want_t, rtol=1e-9, atol=1e-12)


def test_pattern_inputs_with_gold_use_it_in_loglik_and_clean_labels():
    """FitResult on compressed inputs (what pooled fits keep) with gold attached (``pooled_fit_inputs``): the
    gold items' values follow the gold route. Cheap: a pattern-path EM fit with the gold added to its inputs."""
    import dataclasses
    import warnings

    from noisycal_bayes import fit_em
    from noisycal_bayes.inference._common import pooled_fit_inputs

    item, ann, lab, gold = _gold_crowd()
    data = AnnotationSet.from_responses(item, ann, lab, gold=gold)
    plain = AnnotationSet.from_responses(item, ann, lab)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_em(plain, model="dawid_skene", path="patterns", n_starts=2)
    inputs = pooled_fit_inputs(data, "dawid_skene", fit.groups)
    assert inputs.gold is not None and not inputs.sparse
    _check_gold_values(dataclasses.replace(fit, inputs=inputs), data, gold)
    # Without gold nothing changes (negative control of the check: gold items would then differ).
    assert not np.array_equal(fit.clean_label_probability()[:10], gold[:10])


@pytest.mark.slow
def test_pooled_map_fit_uses_gold_in_loglik_and_clean_labels():
    import warnings

    from noisycal_bayes.inference import fit_map

    item, ann, lab, gold = _gold_crowd()
    data = AnnotationSet.from_responses(item, ann, lab, gold=gold)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_map(data, model="dawid_skene", pooling="partial")
    _check_gold_values(fit, data, gold)


@pytest.mark.parametrize("kind", ["dawid_skene", pytest.param("platt", marks=pytest.mark.slow),
                                  pytest.param("grouped", marks=pytest.mark.slow),
                                  pytest.param("monotone", marks=pytest.mark.slow)])
def test_preconditioned_sites_give_the_same_model(kind):
    """``precond`` is an affine change of the sampler's unconstrained coordinates u = shift + scale v: at any v the
    preconditioned potential equals the plain one at u minus sum(log scale) (the constant log-Jacobian), and the
    model's deterministic sites equal unprecondition_draws of its draws; precondition_start / unprecondition_draws
    invert each other.
    Checked at three random points; "dawid_skene" covers every kind of support (real, positive, unit interval; in
    make test), "platt" its line, "grouped" a prevalence per group, "monotone" its unpreconditioned increments.
    Negative control: the same comparison with the scale left out of the map is not a constant shift."""
    import jax
    from numpyro.infer.util import constrain_fn, potential_energy, unconstrain_fn

    from noisycal_bayes.models.pooled import precondition_start, unprecondition_draws

    rng = np.random.default_rng(7)
    item, ann, lab = _responses()
    n_groups = 3
    group = rng.integers(0, n_groups, N_ITEMS).astype(np.int32)
    if kind == "dawid_skene":
        group[:] = 0
    gold = np.full(N_ITEMS, -1, np.int32)
    gold[4] = 1
    base = (item, ann, lab, group, gold, rng.normal(size=N_ITEMS), None, None, rng.uniform(0, 1, (2, N_ANN)))
    kw = dict(kind=kind, n_items=N_ITEMS, n_annotators=N_ANN, n_groups=n_groups)
    start = _values(rng, kind, n_groups)
    precond = {k: (rng.normal(size=np.shape(v)) * 0.3, rng.uniform(0.05, 2.0, np.shape(v)))
               for k, v in start.items() if k != "increments"}

    def plain():
        return pooled_model(*base, prior=Prior(), **kw)

    def pre():
        return pooled_model(*base, precond, prior=Prior(), **kw)

    def values(v, u):
        """Both potentials and the preconditioned model's sites (vmapped over the points: one small program)."""
        return (potential_energy(pre, (), {}, v), potential_energy(plain, (), {}, u),
                constrain_fn(pre, (), {}, v, return_deterministic=True))

    v0 = precondition_start(start, precond)
    back = unprecondition_draws({k: np.asarray(x) for k, x in v0.items()}, precond)
    for k, x in start.items():
        np.testing.assert_allclose(back[k], x, rtol=1e-12, atol=1e-14)
    with x64():
        # Three points in the preconditioned unconstrained space (v real for "_pre" sites), around the start, each
        # twice: mapped to the plain coordinates u = shift + scale v, and (negative control) with the scale left out.
        z0 = unconstrain_fn(pre, (), {}, v0)
        v = {k: np.tile(np.asarray(x)[None] + rng.normal(size=(3,) + np.shape(x)), (2,) + (1,) * np.ndim(x))
             for k, x in z0.items()}
        u = {}
        for k, x in v.items():
            if k.endswith("_pre"):
                shift, scale = precond[k[:-4]]
                u[k[:-4]] = shift + np.concatenate([scale * x[:3], x[3:]])
            else:
                u[k] = x
        pot_pre, pot_plain, sites = jax.tree.map(np.asarray, jax.jit(jax.vmap(values))(v, u))
    log_jac = sum(np.sum(np.log(s)) for _, s in precond.values())
    np.testing.assert_allclose(pot_pre[:3] - pot_plain[:3], -log_jac, rtol=1e-10, atol=1e-9)
    assert np.ptp(pot_pre[3:] - pot_plain[3:]) > 1e-3  # the wrong map: not a constant shift (negative control)
    # The model's x = T(shift + scale v) is what unprecondition_draws computes from the draws of v.
    mapped = unprecondition_draws({k: x[:3] for k, x in sites.items() if k in v}, precond)
    for k in start:
        np.testing.assert_allclose(sites[k][:3], mapped[k], rtol=1e-12, atol=1e-15)
