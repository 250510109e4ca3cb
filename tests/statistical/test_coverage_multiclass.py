"""Coverage of the centred debiased interval of the K-class class-wise NC-ECE (propagate/nc_ece.py).

The class-wise mean over K = 10 classes sums 150 bin terms. The simulated debiased draws sit above the debiased
estimate by the sum over bins of ``E debias_abs(|m_b + noise|) - m_b`` (positive wherever ``m_b`` is small against
its sd), an offset that grows with the number of bins faster than the draws' spread; the estimate itself is close
to unbiased (benchmarks/coverage_multiclass.py: bias +0.0000 +- 0.0003, sd 0.0023, at K = 10 and 3 annotators).
The interval is therefore centred on the estimate (``_centred``). Its level is calibrated (``calibrate=True``,
``_calibrated_level``; widens only): the coverage part below then passes more easily, and the negative control
still fails on the centre criterion, which the level does not touch (both measured after the change).

Joint draws (``item_weights=``, end of the file, slow): with EM refits on Bayesian-bootstrap weights, the class-wise
draws that reuse each refit's own weights are narrower than those with fresh weights (K = 3); the negative control
pairs each refit with another refit's weights and must not be.

Design (isolates the interval definition): the confusion matrices are known (the true ones, passed as a point
estimate), so the only uncertainty is the evaluation sample's (the items' Bayesian bootstrap) and the target is
the population binned class-wise ECE of the simulator (``population_target`` of the study, from 500,000 fresh
outputs: Monte Carlo error ~2e-4, a tenth of the intervals' half-width). K = 10, 3 annotators, 2,000 items,
over-confident classifier, 200 bootstrap draws, 40 data sets.

Test (slow), two parts, both must pass:
- covered ~ Binomial(40, 0.9) under correct coverage; accept >= 31 (P(X <= 30) = 0.016);
- centre: ``z_r = (target - mean of the interval's draws) / sd of the draws`` is about N(0, 1) when the draws
  describe the estimator's sampling distribution; accept ``|mean z| < 3 / sqrt(40) = 0.47`` (false alarm 0.003).
Negative control (must FAIL): the uncentred interval (``_centred`` replaced by the identity, the binary route's
definition) on the same data sets. Its draws sit ~0.8 sd above the estimate (offset 0.0019, sd 0.0023), so its
mean z is about -0.8 (P(|mean z| < 0.47) ~ 0.02) and its coverage about 0.79.
"""
import functools
import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest

import noisycal_bayes.propagate.nc_ece as pm

pytestmark = pytest.mark.statistical

N_SETS, K, J, N_ITEMS, N_DRAWS = 40, 10, 3, 2000, 200
MIN_COVERED = 31


def _study():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "coverage_multiclass.py"
    spec = importlib.util.spec_from_file_location("coverage_multiclass", path)
    cm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cm)
    return cm


def _passes():
    """Both criteria of the module docstring on the N_SETS data sets."""
    cm = _study()
    target = cm.population_target(K, "overconfident", size=500_000)[1]
    hits, z = [], []
    for r in range(N_SETS):
        rng = np.random.default_rng(4242 + r)
        p, y, labels, conf = cm.simulate(rng, N_ITEMS, K, J, "overconfident")
        resp = (np.repeat(np.arange(N_ITEMS), J), np.tile(np.arange(J), N_ITEMS), labels.reshape(-1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = pm.posterior_classwise_nc_ece(p, resp, conf, n_draws=N_DRAWS, seed=r)
        lo, hi = res.reported_interval
        hits.append(lo <= target <= hi)
        z.append((target - res.debiased_draws.mean()) / res.debiased_draws.std())
    covered, mean_z = int(np.sum(hits)), float(np.mean(z))
    return covered >= MIN_COVERED and abs(mean_z) < 3 / np.sqrt(N_SETS), (covered, mean_z)


@pytest.mark.slow
def test_classwise_mean_interval_covers_at_k10():
    ok, detail = _passes()
    assert ok, detail


@pytest.mark.slow
def test_negative_control_uncentred_interval_misses(monkeypatch):
    monkeypatch.setattr(pm, "_centred", lambda debiased, estimate, interval: debiased)
    ok, detail = _passes()
    assert not ok, detail


# ----------------------------------------------------------------------------- bias correction with confusion draws
# The debiased estimate with confusion draws (the study's EM route: Bayesian-bootstrap refits of a Dawid-Skene EM
# on the noisy labels) centres each bin on 2 e_b(C_0) - mean_s e_sb (``bias_correct=True``, propagate/
# multiclass.py ``_bias_corrected``), C_0 the full-sample fit the refits start from (``point_confusion``, as
# evaluate_multiclass(method="em") passes it). Without the correction the estimate was biased low for an
# under-confident classifier (K = 3, 3 annotators: -0.0039 +- 0.0011 top-label, -0.0033 +- 0.0008 class-wise, 77
# data sets), the inverse of an estimated confusion matrix entering the bin means twice (the fit, then the draws
# around it).
#
# Design: the study's setting K = 3, 3 annotators, under-confident, 2,000 items, 100 EM refits, its seeds
# (``run_one``'s: 50,000 + 3,300 + r) for r < 80; target the population binned ECE (500,000 fresh outputs, Monte
# Carlo error ~2e-4). Test: per kind (top-label, class-wise mean) the mean error over the 80 data sets, in units
# of its standard error (sample sd / sqrt(80)), must satisfy |z| < 3 (false alarm 0.003 per kind for an
# unbiased estimator). Measured on these data sets (2026-12-02): centred on the fit z = +1.0 and -0.6; on the
# refits' mean C_bar (the default without point_confusion) -1.0 and -1.8. Negative control (must FAIL): the
# uncorrected centre (``bias_correct=False``) on the same data sets, measured z = -3.8 and -4.6.
N_BIAS_SETS = 80


@functools.lru_cache(maxsize=None)
def _bias_errors():
    cm = _study()
    targets = cm.population_target(3, "underconfident", size=500_000)
    err = {"fit": [], "mean": [], "none": []}
    for r in range(N_BIAS_SETS):
        seed = 1000 * 3 + 100 * 3 + r + 50_000
        rng = np.random.default_rng(seed)
        n = 2000
        p, y, labels, _ = cm.simulate(rng, n, 3, 3, "underconfident")
        fit_c, fit_p = cm.em_multiclass(labels, 3, np.ones((1, n)))
        g = rng.standard_exponential((100, n))
        g *= n / g.sum(axis=1, keepdims=True)
        draws, _ = cm.em_multiclass(labels, 3, g, init=(fit_c[0], fit_p[0]))
        resp = (np.repeat(np.arange(n), 3), np.tile(np.arange(3), n), labels.reshape(-1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # Centred on the full-sample fit (the EM route), on the refits' mean, or not corrected.
            for key, kw in (("fit", dict(point_confusion=fit_c[0])), ("mean", {}), ("none", dict(bias_correct=False))):
                top = pm.posterior_top_label_nc_ece(p, resp, draws, seed=seed, **kw)
                cw = pm.posterior_classwise_nc_ece(p, resp, draws, seed=seed, **kw)
                err[key].append((top.debiased - targets[0], cw.debiased - targets[1]))
    return {key: np.array(v) for key, v in err.items()}


def _unbiased(errors):
    z = errors.mean(axis=0) / (errors.std(axis=0, ddof=1) / np.sqrt(errors.shape[0]))
    return bool(np.all(np.abs(z) < 3)), z


@pytest.mark.slow
def test_debiased_estimate_with_em_draws_is_unbiased_for_underconfident_k3():
    ok, z = _unbiased(_bias_errors()["fit"])
    assert ok, z


@pytest.mark.slow
def test_negative_control_uncorrected_centre_is_biased():
    ok, z = _unbiased(_bias_errors()["none"])
    assert not ok, z


# ----------------------------------------------------------------------------- joint draws (item_weights)
def _joint_sd_ratio(shift: int) -> float:
    """Mean over 4 data sets of log(sd of the joint class-wise draws / sd of the independent ones).

    K = 3, 3 annotators, under-confident, 1,000 items, 100 EM refits on Bayesian-bootstrap weights ``g`` (the
    study's EM). ``shift`` pairs refit ``s`` with the weights of refit ``s + shift`` (0: its own; the negative
    control uses 1, weights unrelated to the refit).
    """
    cm = _study()
    out = []
    for r in range(4):
        rng = np.random.default_rng(900 + r)
        n, k, j = 1000, 3, 3
        p, y, labels, conf = cm.simulate(rng, n, k, j, "underconfident")
        g = rng.standard_exponential((100, n))
        g *= n / g.sum(axis=1, keepdims=True)
        fit_c, fit_p = cm.em_multiclass(labels, k, np.ones((1, n)))
        draws, _ = cm.em_multiclass(labels, k, g, init=(fit_c[0], fit_p[0]))
        resp = (np.repeat(np.arange(n), j), np.tile(np.arange(j), n), labels.reshape(-1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            joint = pm.posterior_classwise_nc_ece(p, resp, draws, item_weights=np.roll(g, -shift, axis=0))
            fresh = pm.posterior_classwise_nc_ece(p, resp, draws, seed=r)
        out.append(np.log(joint.debiased_draws.std() / fresh.debiased_draws.std()))
    return float(np.mean(out))


# Criterion: mean log ratio < log 0.9. The study measured joint / independent sd ratios of 0.58-1.00 (median 0.76)
# over 100 data sets of K = 3, 3 annotators, under-confident (the fit's error and the items' sampling error are
# negatively correlated; docs/coverage.md). Under no joint effect (the control), the log ratio of two sds from
# 100 draws each has sd about sqrt(2 / (2 * 99)) = 0.10 per data set, 0.05 over 4, so log 0.9 = -0.105 is 2 sd
# below the control's 0 (false pass ~0.02); the joint value, log 0.76 = -0.27 expected, spreads over data sets by
# about 0.13 (0.065 over 4), so it passes at 2.5 sd. Measured: -0.23 (ratio 0.79) joint, -0.04 (0.96) control.
@pytest.mark.slow
def test_joint_draws_are_narrower_than_independent_ones_at_k3():
    assert _joint_sd_ratio(0) < np.log(0.9)


@pytest.mark.slow
def test_negative_control_weights_of_other_refits_are_not_narrower():
    assert not _joint_sd_ratio(1) < np.log(0.9)


def test_study_seeds_are_the_first_studys_and_never_shared_between_settings():
    cm = _study()
    settings = [(k, j, c) for k in (3, 10) for j in (3, 5) for c in ("overconfident", "underconfident")]
    # Data sets 0-99 keep the first study's seeds (its cached EM draws and results stay valid) ...
    for k, j, c in settings:
        old = [1000 * k + 100 * j + r + (0 if c == "overconfident" else 50_000) for r in range(100)]
        assert [cm.data_seed(k, j, c, r) for r in range(100)] == old
    # ... data sets 100-199 are the earlier fresh replication (--seed-offset 1000000) ...
    assert cm.data_seed(10, 5, "overconfident", 100) == 1_010_500
    # ... and no seed is used twice across settings and data sets (the earlier formula reused them from r = 200).
    seeds = [cm.data_seed(k, j, c, r) for k, j, c in settings for r in range(1000)]
    assert len(set(seeds)) == len(seeds)
    old_formula = [1000 * k + 100 * j + r for k, j, c in settings if c == "overconfident" for r in range(1000)]
    assert len(set(old_formula)) < len(old_formula)  # negative control: the old seeds collide


def _sweep_file(path, seeds, config=None, k=10, covered=True):
    """A --sweep results file with one setting (K = k, 3 annotators, over-confident) and the given data sets."""
    import json

    level = {"level": 0.9, "covered": covered, "width": 0.01}
    kind = {"err": 0.001, "sd": 0.002, "nominal": level, "calibrated": level, "two_sided": level}
    rows = [{"seed": s, "top_label": kind, "classwise": kind} for s in seeds]
    summary = {"K": k, "J": 3, "curve": "overconfident", "n_datasets": len(rows)}
    body = {"settings": [{"summary": summary, "rows": rows}]}
    if config is not None:
        body["config"] = config
    path.write_text(json.dumps(body))
    return path


def test_merge_joins_blocks_keeps_stated_configs_and_refuses_conflicts(tmp_path):
    import json

    cm = _study()
    cfg = {"n_items": 2000, "n_boot": 100, "em_tol": 1e-3, "bins": 15, "level": 0.9}
    # A joined file from an earlier merge states no value (all None), the new block states its own.
    old = _sweep_file(tmp_path / "old.json", range(5), config={k: None for k in cfg})
    new = _sweep_file(tmp_path / "new.json", range(5, 8), config=cfg, covered=False)
    out = tmp_path / "out.json"
    res = cm.merge([old, new], out)
    (st,) = res["settings"]
    assert [r["seed"] for r in st["rows"]] == list(range(8))
    assert st["summary"]["n_datasets"] == 8
    assert st["summary"]["top_label"]["calibrated"] == pytest.approx(5 / 8)  # recomputed over both blocks
    assert {k: res["config"][k] for k in cfg} == cfg
    assert json.loads(out.read_text())["config"]["merged_from"] == ["old.json", "new.json"]
    # Negative controls: another stated config, and a data set in two files.
    other = _sweep_file(tmp_path / "other.json", range(8, 10), config={**cfg, "em_tol": 1e-6})
    with pytest.raises(SystemExit, match="another config"):
        cm.merge([old, new, other], tmp_path / "x.json")
    twice = _sweep_file(tmp_path / "twice.json", range(7, 9), config=cfg)
    with pytest.raises(SystemExit, match="more than one file"):
        cm.merge([old, new, twice], tmp_path / "y.json")
