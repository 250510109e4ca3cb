"""Tests for noisycal_bayes/inference/nuts.py and result.py: the NUTS front door and the FitResult it returns.

Statistical checks of the posterior (recovery, coverage, SBC, known labels, real data) are in
tests/statistical/; here: structure, bookkeeping, consistency between views, reuse of the compiled
sampler, error paths. All fits share one compiled program (grouped model, 3 annotators, 5 groups,
200 warm-up steps): compilation dominates the cost of these tests.
"""
import warnings

import arviz as az
import jax
import numpy as np
import pytest

from noisycal_bayes.core import ds_loglik, x64
from noisycal_bayes.data import AnnotationSet
from noisycal_bayes.inference import FitResult, fit_nuts
from noisycal_bayes.inference import _sampler, nuts
from noisycal_bayes.simulate import simulate_annotations
from noisycal_bayes.warnings import ConvergenceWarning, IdentifiabilityWarning
from noisycal_bayes.data import Binning

SIM = simulate_annotations(1200, fpr=[0.1, 0.2, 0.05], tpr=[0.9, 0.75, 0.7], missing=0.1, seed=21)
KW = dict(groups=Binning.equal_mass(5), n_warmup=200, n_draws=150, progress_bar=False)


@pytest.fixture(scope="module")
def fit():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit_nuts(SIM.data, n_chains=3, seed=1, **KW)


def test_draws_have_named_dims_and_orientation(fit):
    assert isinstance(fit, FitResult) and fit.method == "nuts" and fit.model == "grouped"
    assert fit.draws["fpr"].shape == (3, 150, 3) and fit.draws["prevalence"].shape == (3, 150, 5)
    assert fit.dims["prevalence"] == ("group",) and fit.dims["gap"] == ("annotator",)
    assert fit.coords["annotator"] == [0, 1, 2] and fit.coords["group"] == list(range(5))
    assert (fit.draws["gap"] > 0).all()
    np.testing.assert_allclose(fit.draws["tpr"], fit.draws["fpr"] + fit.draws["gap"], rtol=1e-12)
    np.testing.assert_allclose(fit.draws["gap"], (1 - fit.draws["fpr"]) * fit.draws["u"], rtol=1e-12)


def test_channel_is_the_posterior_mean_and_point_is_the_em_start(fit):
    np.testing.assert_allclose(fit.channel.fpr, fit.draws["fpr"].mean(axis=(0, 1)))
    np.testing.assert_allclose(fit.prevalence, fit.draws["prevalence"].mean(axis=(0, 1)))
    assert fit.settings["start"] == "em" and set(fit.point) >= {"fpr", "tpr", "prevalence"}


def test_diagnostics_and_summary_agree_with_arviz(fit):
    table = fit.diagnostics
    assert len(table) == 3 * 4 + 5 and set(table.columns) >= {"r_hat", "ess_bulk", "ess_tail"}
    idata = fit.to_arviz()
    ess = az.ess(idata, var_names=["fpr"], method="bulk")["fpr"].values
    np.testing.assert_allclose(fit.ess_bulk["fpr"], ess, rtol=1e-10)
    rhat = az.rhat(idata, var_names=["prevalence"])["prevalence"].values
    np.testing.assert_allclose(fit.rhat["prevalence"], rhat, rtol=1e-10)
    summary = fit.summary(level=0.8)
    with pytest.warns(DeprecationWarning, match="level"):
        assert fit.summary(prob=0.8).equals(summary)  # the deprecated name of `level`
    assert list(summary.columns) == ["mean", "sd", "lower", "upper", "r_hat", "ess_bulk", "ess_tail"]
    x = fit.draws["tpr"][:, :, 2].ravel()
    np.testing.assert_allclose(summary.loc["tpr[2]", ["mean", "lower", "upper"]].to_numpy(dtype=float),
                               [x.mean(), *np.quantile(x, [0.1, 0.9])])
    assert fit.n_divergent == int(fit.sample_stats["diverging"].sum())
    with pytest.raises(ValueError, match="level"):
        fit.summary(level=1.0)


def test_arviz_groups_and_pointwise_loglik(fit):
    idata = fit.to_arviz()
    for group in ("posterior", "sample_stats", "observed_data", "log_likelihood"):
        assert group in idata  # `in` works for InferenceData (0.23) and DataTree (1.x)
    assert idata.posterior["prevalence"].dims == ("chain", "draw", "group")
    assert idata.sample_stats["diverging"].shape == (3, 150)
    np.testing.assert_array_equal(idata.observed_data["labels"].values, SIM.data.labels)
    ll = idata.log_likelihood["labels"].values
    assert ll.shape == (3, 150, SIM.data.n_items)
    # Per-item values expanded from compressed rows sum to the count-weighted total of core.ds_loglik.
    c, d = 1, 77
    with x64():
        total = float(ds_loglik(fit.inputs.patterns, fit.inputs.row_group, fit.inputs.counts, fit.draws["fpr"][c, d],
                                fit.draws["tpr"][c, d], fit.draws["prevalence"][c, d]))
    np.testing.assert_allclose(ll[c, d].sum(), total, rtol=1e-12)
    loo = az.loo(idata)
    # ArviZ 0.23 names the estimate `elpd_loo`, ArviZ 1.x (arviz-stats) `elpd`.
    assert np.isfinite(loo.elpd_loo if hasattr(loo, "elpd_loo") else loo.elpd)
    assert "log_likelihood" not in fit.to_arviz(log_likelihood=False)


def test_same_seed_same_draws_and_one_compiled_program(fit):
    n_programs = len(_sampler._PROGRAMS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        again = fit_nuts(SIM.data, n_chains=3, seed=1, **KW)
        other = simulate_annotations(900, fpr=[0.2, 0.1, 0.1], tpr=[0.8, 0.9, 0.6], seed=3)
        fit_nuts(other.data, n_chains=2, seed=2, **KW)  # another data set and chain count, same shapes
    np.testing.assert_array_equal(again.draws["fpr"], fit.draws["fpr"])
    assert len(_sampler._PROGRAMS) == n_programs


def test_group_assignment_is_reusable(fit):
    g = fit.groups
    assert g.dim == "group" and g.n_groups == 5 and g.edges.shape == (6,)
    np.testing.assert_array_equal(g.assign(SIM.data.scores), g.index)
    np.testing.assert_array_equal(fit.inputs.patterns[fit.inputs.inverse], SIM.data.labels)


def test_identifiability_is_checked_before_sampling(monkeypatch):
    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(nuts, "get_program", stop)  # stop right before compiling
    two = simulate_annotations(300, fpr=[0.1, 0.2], tpr=[0.9, 0.8], seed=4)
    with pytest.warns(IdentifiabilityWarning, match="continuum"), pytest.raises(Stop):
        fit_nuts(two.data, model="dawid_skene", progress_bar=False)


@pytest.mark.parametrize("kwargs, match", [
    ({"n_chains": 0}, "n_chains"),
    ({"n_draws": 0}, "n_draws"),
    ({"precision": "float16"}, "precision"),
    ({"target_accept": 1.0}, "target_accept"),
    ({"chain_method": "threads"}, "chain_method"),
    ({"prior": {"fpr": (1, 2)}}, "Prior"),
    ({"model": "platt", "compress": False}, "compress"),
    ({"model": "hierarchical"}, "must be one of"),
    ({"seed": -1}, "seed"),
    ({"seed": 1.5}, "seed"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_nuts(SIM.data, progress_bar=False, **kwargs)


def test_chain_keys_are_distinct_and_do_not_depend_on_the_number_of_chains():
    from noisycal_bayes.inference._sampler import chain_keys

    keys = chain_keys(7, 5)
    assert keys.shape == (5, 2) and keys.dtype == np.uint32
    assert len({tuple(k) for k in keys}) == 5
    np.testing.assert_array_equal(chain_keys(7, 3), keys[:3])  # adding chains leaves the others unchanged
    assert not np.array_equal(chain_keys(8, 5), keys)


@pytest.mark.skipif(jax.local_device_count() >= 2, reason="this process has several devices for parallel chains")
def test_parallel_chains_need_devices():
    with pytest.raises(ValueError, match="set_host_device_count"):
        fit_nuts(SIM.data, n_chains=4, chain_method="parallel", progress_bar=False)


def test_one_annotator_is_an_error():
    one = AnnotationSet.from_wide(np.array([[0], [1], [1]]), np.array([0.1, 0.5, 0.9]))
    with pytest.raises(ValueError, match="single annotator"):
        fit_nuts(one, progress_bar=False)


def test_clean_label_probability_per_item(fit):
    p = fit.clean_label_probability()
    assert p.shape == (3, 150, SIM.data.n_items) and np.all((p >= 0) & (p <= 1))
    # At one draw, Bayes' rule item by item on the dense labels (no compression) gives the same numbers.
    c, d = 2, 10
    fpr, tpr = fit.draws["fpr"][c, d], fit.draws["tpr"][c, d]
    pi = fit.draws["prevalence"][c, d][fit.groups.index]
    lab = SIM.data.labels
    obs, pos = lab >= 0, lab == 1
    like1 = np.prod(np.where(obs, np.where(pos, tpr, 1 - tpr), 1.0), axis=1) * pi
    like0 = np.prod(np.where(obs, np.where(pos, fpr, 1 - fpr), 1.0), axis=1) * (1 - pi)
    np.testing.assert_allclose(p[c, d], like1 / (like0 + like1), rtol=1e-10)


@pytest.mark.slow  # 17 s wall (a second interpreter that compiles two samplers); make test-all runs it
def test_parallel_chains_in_rounds_equal_sequential_chains():
    # A script (or the command line) can give JAX several CPU devices before JAX starts; fit_nuts then runs
    # one chain per device, in rounds (3 chains on 2 devices: 2, then 1 padded with a copy that is dropped).
    # Each chain gets the same key and start as in sequential mode, so it follows the same trajectory: the
    # same number of leapfrog steps at every iteration and identical draws (the round logic does not depend on the
    # likelihood, so compressed counts stand for item-level inputs too).
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import numpyro
        numpyro.set_host_device_count(2)
        import warnings
        import numpy as np
        from noisycal_bayes.data import Binning
        from noisycal_bayes.inference import fit_nuts
        from noisycal_bayes.simulate import simulate_annotations
        sim = simulate_annotations(500, fpr=[0.1, 0.2, 0.05], tpr=[0.9, 0.75, 0.7], seed=0)
        warnings.simplefilter("ignore")
        kw = dict(groups=Binning.equal_mass(3), n_chains=3, n_warmup=50, n_draws=50, progress_bar=False)
        par = fit_nuts(sim.data, **kw)
        seq = fit_nuts(sim.data, chain_method="sequential", **kw)
        assert par.settings["chain_method"] == "parallel", par.settings
        assert par.draws["fpr"].shape == (3, 50, 3) and (par.draws["gap"] > 0).all()
        for k in ("fpr", "tpr", "prevalence"):
            np.testing.assert_array_equal(par.draws[k], seq.draws[k])
        np.testing.assert_array_equal(par.sample_stats["n_steps"], seq.sample_stats["n_steps"])
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("kwargs", [{"compress": False}, {"precision": "float32"}, {"chain_method": "vectorized"}])
def test_other_likelihood_layouts_give_the_same_posterior(fit, kwargs):
    # Per-item likelihood, float32 and vectorised chains sample the same posterior: the means agree within Monte
    # Carlo error, se = sqrt(sd^2 / ESS_a + sd^2 / ESS_b); z = 4.4 for a false-alarm rate of 1e-5 per scalar
    # (17 scalars, 3 layouts: about 5e-4 in all).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        other = fit_nuts(SIM.data, n_chains=3, seed=7, **KW, **kwargs)
    for name in ("fpr", "tpr", "prevalence"):
        a, b = fit.draws[name], other.draws[name]
        sd = a.reshape(-1, a.shape[-1]).std(0)
        se = sd * np.sqrt(1 / fit.ess_bulk[name] + 1 / other.ess_bulk[name])
        assert np.all(np.abs(a.mean((0, 1)) - b.mean((0, 1))) < 4.4 * se)


def _cached_fits(tmp_path, *, degraded):
    """Fits with a compilation cache in tmp_path: saved and reused; with degraded=True also a partly saved cache
    and a blocked folder."""
    from noisycal_bayes.inference._sampler import _PROGRAMS, clear_programs

    old = jax.config.jax_compilation_cache_dir
    kw = dict(groups=Binning.equal_mass(3), n_chains=2, n_warmup=50, n_draws=50, progress_bar=False, seed=3)
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "noisycal_programs").write_text("a file where the folder should be")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            jax.config.update("jax_compilation_cache_dir", str(tmp_path / "cache"))
            clear_programs()
            first = fit_nuts(SIM.data, **kw)
            # The sampler's two programs (the EM start's program may already be in memory from an earlier test).
            saved = [path for prog in _PROGRAMS.values() for path in (prog._init.path, prog._advance.path)]
            assert len(saved) == 2 and all(p.parent == tmp_path / "cache" / "noisycal_programs" and p.exists()
                                           for p in saved)
            stamps = [p.stat().st_mtime_ns for p in saved]
            clear_programs()
            again = fit_nuts(SIM.data, **kw)
            assert [p.stat().st_mtime_ns for p in saved] == stamps  # loaded, not rewritten
            np.testing.assert_array_equal(again.draws["fpr"], first.draws["fpr"])
            if not degraded:
                return
            # `init` saved without `advance` (another process still writing it; an interrupted run): advance
            # is traced in a process that never traced init, which NumPyro's shared closure must not notice.
            (advance,) = [prog._advance.path for prog in _PROGRAMS.values()]
            advance.unlink()
            clear_programs()
            partial_cache = fit_nuts(SIM.data, **kw)
            assert advance.exists()
            np.testing.assert_array_equal(partial_cache.draws["fpr"], first.draws["fpr"])
            jax.config.update("jax_compilation_cache_dir", str(blocked))
            clear_programs()
            with pytest.warns(RuntimeWarning, match="could not save the compiled (init|advance) program"):
                other = fit_nuts(SIM.data, **kw)
            np.testing.assert_array_equal(other.draws["fpr"], first.draws["fpr"])
    finally:
        jax.config.update("jax_compilation_cache_dir", old)
        clear_programs()


@pytest.mark.slow  # two cold compilations into a fresh cache by design (~14 s CPU); make test-all runs it
def test_sampler_is_saved_in_the_compilation_cache_and_reused(tmp_path):
    # With a compilation cache directory, the sampler's two programs are exported there; a rebuilt program
    # (as in a new process) loads them instead of rewriting them and gives the same draws.
    _cached_fits(tmp_path, degraded=False)


@pytest.mark.slow  # two more cold compilations (~15 s CPU); make test-all runs it
def test_sampler_survives_a_partly_saved_cache_and_a_blocked_folder(tmp_path):
    # A cache holding one of the two programs is completed; a cache where the folder cannot be made only warns.
    _cached_fits(tmp_path, degraded=True)


# ------------------------------------------------------------------ partially pooled channels (pooling="partial")
def _sparse_crowd(n_items, n_ann, per_item, seed, adversaries=0, spammers=0):
    """Sparse crowd: logit fpr ~ N(-2, 0.5), logit tpr ~ N(2, 0.5); the first annotators spammers / adversaries."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    fpr = 1 / (1 + np.exp(-rng.normal(-2, 0.5, n_ann)))
    tpr = 1 / (1 + np.exp(-rng.normal(2, 0.5, n_ann)))
    fpr[:spammers] = tpr[:spammers] = 0.5
    fpr[spammers:spammers + adversaries], tpr[spammers:spammers + adversaries] = 0.85, 0.15
    y = (rng.random(n_items) < 0.4).astype(int)
    item = np.repeat(np.arange(n_items), per_item)
    ann = np.concatenate([rng.choice(n_ann, per_item, replace=False) for _ in range(n_items)])
    lab = (rng.random(item.size) < np.where(y[item] == 1, tpr[ann], fpr[ann])).astype(int)
    data = AnnotationSet.from_crowdkit(pd.DataFrame({"task": item, "worker": ann, "label": lab}))
    order = np.asarray(data.annotator_ids).astype(int)
    return data, fpr[order], tpr[order], y


POOLED_KW = dict(model="dawid_skene", pooling="partial", n_warmup=100, n_draws=100, progress_bar=False)


@pytest.fixture(scope="module")
def pooled_fit():
    data, _, _, _ = _sparse_crowd(60, 8, 3, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return data, fit_nuts(data, n_chains=2, seed=0, **POOLED_KW)


def test_pooled_fit_structure(pooled_fit):
    data, fit = pooled_fit
    assert fit.model == "dawid_skene" and fit.settings["pooling"] == "partial"
    assert fit.settings["likelihood"] == "sparse responses" and fit.settings["dense_mass"] is False
    assert fit.draws["fpr"].shape == (2, 100, 8) and fit.draws["prevalence"].shape == (2, 100)
    np.testing.assert_allclose(fit.draws["gap"], fit.draws["tpr"] - fit.draws["fpr"], rtol=1e-12, atol=1e-15)
    pop = fit.details["population_draws"]
    assert (pop["mean_gap"] > 0).all()  # the crowd-level orientation holds in every draw
    np.testing.assert_allclose(pop["median_fpr"], 1 / (1 + np.exp(-pop["mu_fpr"])), rtol=1e-12)
    summary = fit.details["population"]
    assert 0 < summary["fpr"]["range"][0] < summary["fpr"]["median"] < summary["fpr"]["range"][1] < 1
    assert {"mu_fpr", "mean_gap", "sigma_fpr", "sigma_tpr"} <= set(fit.diagnostics["name"])
    # Downstream views use the non-pooled inputs with the pooled draws: the per-item log-likelihood equals the
    # sparse one of the pooled model (no gold labels here).
    from noisycal_bayes.core.sparse import sparse_item_loglik

    ll = fit.log_likelihood()
    with x64():
        direct = sparse_item_loglik(data.responses, np.zeros(data.n_items, np.int32), fit.draws["fpr"][1, 7],
                                    fit.draws["tpr"][1, 7], np.atleast_1d(fit.draws["prevalence"][1, 7]))
    np.testing.assert_allclose(ll[1, 7], np.asarray(direct), rtol=1e-9)


def test_pooled_same_seed_same_draws(pooled_fit):
    data, fit = pooled_fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        again = fit_nuts(data, n_chains=2, seed=0, **POOLED_KW)
    np.testing.assert_array_equal(again.draws["fpr"], fit.draws["fpr"])


@pytest.mark.parametrize("kwargs, match", [(dict(pooling="full"), "`pooling` must be one of"),
                                           (dict(pooling=None), "`pooling` must be one of")])
def test_pooled_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_nuts(SIM.data, **kwargs)


def test_low_noise_start_is_finite_for_every_chain():
    """Issue 16 item 6: near-perfect annotators (fpr 0.002, tpr 0.99) and score groups with prevalence near 0
    or 1. The EM start has rates at 0 or 1 (e.g. a prevalence of 1e-18); the NUTS start must still be finite,
    with a finite potential and gradient at the start and at every corner of the per-chain jitter."""
    from numpyro.infer.util import potential_energy, unconstrain_fn

    from noisycal_bayes.inference._common import bound_model, sample_sites
    from noisycal_bayes.models.inputs import prepare_inputs, resolve_assignment

    rng = np.random.default_rng(0)
    n = 120
    scores = np.concatenate([rng.uniform(0, 0.02, n // 2), rng.uniform(0.98, 1, n - n // 2)])
    y = (rng.random(n) < scores).astype(int)
    labels = (rng.random((n, 3)) < np.where(y[:, None] == 1, 0.99, 0.002)).astype(int)
    data = AnnotationSet.from_wide(labels, scores=scores)
    assignment = resolve_assignment(data, "grouped", Binning.equal_mass(4), "test")
    inputs = prepare_inputs(data, "grouped", assignment)
    point, kind = nuts._start_point(data, inputs, "grouped", 0)
    assert kind == "em"
    sites = sample_sites("grouped", point, inputs.n_groups)
    fn = bound_model("grouped", inputs.static_kwargs())
    with x64():
        from noisycal_bayes.models import Prior

        args = tuple(np.asarray(a) for a in inputs.model_args()) + (Prior().params(),)
        z = unconstrain_fn(fn, args, {}, sites)
        # One compiled program for the three shifts (evaluated op by op, it compiled ~150 small programs).
        value_and_grad = jax.jit(jax.value_and_grad(lambda q, a: potential_energy(fn, a, {}, q)))
        for shift in (0.0, -_sampler.INIT_JITTER, _sampler.INIT_JITTER):
            zz = jax.tree.map(lambda v: v + shift, z)
            val, grad = value_and_grad(zz, args)
            assert np.isfinite(float(val))
            assert all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(grad))


@pytest.mark.slow
def test_low_noise_design_samples():
    """The same design sampled: both routes run without divergences in most transitions and keep the
    near-perfect annotators near perfect."""
    rng = np.random.default_rng(1)
    n = 300
    scores = np.concatenate([rng.uniform(0, 0.02, n // 2), rng.uniform(0.98, 1, n - n // 2)])
    y = (rng.random(n) < scores).astype(int)
    labels = (rng.random((n, 3)) < np.where(y[:, None] == 1, 0.99, 0.002)).astype(int)
    data = AnnotationSet.from_wide(labels, scores=scores)
    for pooling in ("none", "partial"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fit = fit_nuts(data, groups=Binning.equal_mass(4), n_chains=2, n_warmup=300, n_draws=300,
                           progress_bar=False, pooling=pooling)
        assert fit.n_divergent <= 6, pooling  # at most 1% of 600 transitions
        assert np.all(fit.draws["fpr"].mean(axis=(0, 1)) < 0.05) and np.all(fit.draws["tpr"].mean(axis=(0, 1)) > 0.9)


@pytest.mark.slow
def test_pooled_recovers_a_sparse_crowd_with_spammers_and_adversaries():
    """40 annotators, 600 items, 5 labels each (75 per annotator); annotators 0-1 spammers, 2 adversary.

    Checks: R-hat <= 1.02 and bulk ESS >= 400 first (the sampler's goal, R-hat <= 1.01, is measured on rte and
    a 150-annotator crowd in benchmarks/bench_crowds_nuts.py; over 165 scalars from 4 x 500 draws the largest
    R-hat of a healthy fit scatters around 1.01, measured 1.011 here); then the 90% intervals of fpr and tpr cover the truth
    for at least 80% of the 80 rates (expected 90%; with 80 nearly independent rates the binomial standard
    error is 3.4%, so 80% is 3 standard errors below), the adversary's gap interval lies below 0, and the
    spammers' posterior-mean gaps stay below 0.5 (good annotators here: about 0.75) with at least one of them
    flagged uninformative. Not tighter: a gap from 75 labels has a standard error near 0.12, and pooling
    shrinks a spammer's gap towards the population's (about 0.7): measured 0.06 and 0.33 for the two spammers,
    the second with a 90% interval excluding 0. Flagging spammers needs more labels per annotator than
    flagging adversaries."""
    data, fpr, tpr, _ = _sparse_crowd(600, 40, 5, seed=11, spammers=2, adversaries=1)
    fit = fit_nuts(data, model="dawid_skene", pooling="partial", n_chains=4, n_warmup=500, n_draws=500,
                   progress_bar=False)
    assert fit.diagnostics["r_hat"].max() <= 1.02 and fit.diagnostics["ess_bulk"].min() >= 400
    assert fit.n_divergent == 0 and fit.details["n_max_depth"] == 0
    lo = {k: np.quantile(fit.draws[k], 0.05, axis=(0, 1)) for k in ("fpr", "tpr")}
    hi = {k: np.quantile(fit.draws[k], 0.95, axis=(0, 1)) for k in ("fpr", "tpr")}
    covered = np.concatenate([(lo["fpr"] <= fpr) & (fpr <= hi["fpr"]), (lo["tpr"] <= tpr) & (tpr <= hi["tpr"])])
    assert covered.mean() >= 0.8
    ids = list(data.annotator_ids)
    assert ids[2] in fit.details["flagged"]["adversarial"]
    assert {ids[0], ids[1]} & set(fit.details["flagged"]["uninformative"])
    assert np.all(fit.draws["gap"].mean(axis=(0, 1))[:2] < 0.5)


@pytest.mark.slow  # three pooled NUTS fits; make test-all
def test_preconditioned_and_plain_pooled_samplers_agree():
    """The preconditioned pooled sampler (fit_nuts' default; models.pooled.posterior_scales) and the plain one
    sample one posterior: every posterior mean of fpr, tpr, prevalence and the population sites agrees within
    z = ndtri(1 - 1e-3 / (2 m)) standard errors of the difference (se^2 = var_a / ess_a + var_b / ess_b, the smaller
    bulk ESS of the two fits; Bonferroni over the m scalars: family-wise false-alarm rate 1e-3). Negative control:
    a fit of another model (population spread prior HalfNormal(0.1) instead of 1.5, which pools the annotators
    hard) fails the same check."""
    from scipy.special import ndtri

    from noisycal_bayes.models import Prior
    from noisycal_bayes.models.inputs import resolve_assignment

    data, _, _, _ = _sparse_crowd(300, 12, 3, seed=5, spammers=1, adversaries=1)
    assignment = resolve_assignment(data, "dawid_skene", None, "test")

    def run(seed, precondition, prior=None):
        opts = nuts._check_settings("dawid_skene", n_chains=2, n_warmup=300, n_draws=500, seed=seed, target_accept=0.8,
                                    max_tree_depth=10, dense_mass=False, chain_method=None, precision="float64",
                                    compress=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return nuts._fit_nuts_pooled(data, "dawid_skene", assignment, prior or Prior(), opts, progress_bar=False,
                                         precondition=precondition)

    a, b = run(1, True), run(2, False)
    c = run(3, True, Prior(population_spread=0.1))

    def values(fit):
        pop = fit.details["population_draws"]
        return {**{k: fit.draws[k] for k in ("fpr", "tpr", "prevalence")},
                **{k: pop[k] for k in ("mu_fpr", "mean_gap", "sigma_fpr", "sigma_tpr")}}

    def max_z(f, g):
        x, y = values(f), values(g)
        ess = min(f.diagnostics["ess_bulk"].min(), g.diagnostics["ess_bulk"].min())  # conservative: the smallest ESS
        z = [np.abs(x[k].mean((0, 1)) - y[k].mean((0, 1))) / np.sqrt((x[k].var((0, 1)) + y[k].var((0, 1))) / ess)
             for k in x]
        return max(float(np.max(t)) for t in z)

    m = 2 * data.n_annotators + 1 + 4
    bound = ndtri(1 - 1e-3 / (2 * m))
    assert max_z(a, b) < bound
    assert max_z(c, b) > bound


def _with_repeats(data, every=4):
    """``data`` with one more label on every ``every``-th response (the same annotator, the same item)."""
    item, ann, lab = (np.asarray(v) for v in data.responses)
    rng = np.random.default_rng(11)
    pick = np.arange(0, item.size, every)
    return AnnotationSet.from_responses(np.r_[item, item[pick]], np.r_[ann, ann[pick]],
                                        np.r_[lab, rng.integers(0, 2, pick.size)], scores=data.scores,
                                        annotator_ids=data.annotator_ids)


@pytest.mark.slow  # a NUTS compile of its own (14 s idle): make test-all; evaluate's NUTS route on repeated labels
# stays in make test (tests/test_crowd_evaluation.py), as does the refusal below
def test_pooled_fit_takes_repeated_labels_as_responses():
    """The pooled likelihood is a segment sum over responses: repeats are factors of their own, and the fit's
    downstream views (per-item log-likelihood, clean-label probabilities) sum over every response too."""
    from noisycal_bayes.core.sparse import sparse_item_loglik
    from noisycal_bayes.core.tables import Responses

    base, _, _, _ = _sparse_crowd(60, 8, 3, seed=3)
    data = _with_repeats(base)
    assert data.has_repeats
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = fit_nuts(data, n_chains=1, seed=0, **POOLED_KW)
    assert fit.inputs.sparse and fit.details["labels"] is None
    assert fit.inputs.item.size == data.n_responses
    ll = fit.log_likelihood()
    s = (0, 7)
    with x64():
        want = sparse_item_loglik(Responses(*(np.asarray(v, np.int32) for v in data.responses)),
                                  np.zeros(data.n_items, np.int32), fit.draws["fpr"][s], fit.draws["tpr"][s],
                                  np.atleast_1d(fit.draws["prevalence"][s]))
    np.testing.assert_allclose(ll[s], np.asarray(want), rtol=1e-10)
    assert fit.clean_label_probability().shape == (1, 100, data.n_items)


def test_unpooled_nuts_refuses_repeated_labels_naming_the_pooled_fit():
    # The non-pooled models compress one label per (item, annotator): a clear error naming the fix.
    base, _, _, _ = _sparse_crowd(60, 8, 3, seed=3)
    data = _with_repeats(base)
    with pytest.raises(ValueError, match=r"fit_nuts \(model='dawid_skene'.* 45 repeated .*pooling='partial'"):
        fit_nuts(data, model="dawid_skene", n_chains=1, n_warmup=10, n_draws=10, progress_bar=False)


def test_fit_nuts_on_class_data_is_fit_nuts_multiclass():
    # One door: fit_nuts(K-class data) is fit_nuts_multiclass with its own defaults, ``n_draws`` as its ``n_samples``.
    from noisycal_bayes.data import MulticlassAnnotationSet
    from noisycal_bayes.inference import MulticlassPosterior, fit_nuts_multiclass
    from noisycal_bayes.simulate import simulate_multiclass

    sim = simulate_multiclass(300, 3, 3, accuracy=0.8, seed=2)
    data = MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=3, probs=sim.probs)
    kw = dict(model="dawid_skene", n_chains=1, n_warmup=50, seed=4, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = fit_nuts(data, n_draws=50, **kw)
        b = fit_nuts_multiclass(data, n_samples=50, **kw)
    assert isinstance(a, MulticlassPosterior) and a.n_draws == 50
    np.testing.assert_array_equal(a.confusion, b.confusion)
    with pytest.raises(ValueError, match=r"\['pooling'\] apply to binary data only.*fit_nuts_multiclass"):
        fit_nuts(data, pooling="partial")
