"""The command line's default route (``evaluate`` without ``--method``: NUTS) at small size, not marked slow.

One simulated data set with known truth (800 items, 3 annotators, an over-confident model, 10% missing
responses) goes through ``main(["evaluate", ...])`` with 2 chains x 200 warm-up + 300 draws (150
draws per chain gave ESS 37-50, too few to read a 90% interval from). The test reads
the JSON and checks values, not only the exit code:

- the sampler's diagnostics first (R-hat, ESS), as every posterior moment is read after them;
- each channel (posterior mean) lies within ``Z`` posterior standard deviations of the simulated truth, the sd
  read from the 90% equal-tailed interval (``sd = (upper - lower) / (2 * 1.645)`` for a normal posterior);
- the NC-ECE point lies in its interval, and within ``Z`` interval-derived sds of the population binned ECE
  the route states as its target (``propagate.TARGETS["plugin"]``), computed by quadrature;
- the naive metrics equal independent recomputations (``ece`` on the majority vote, per annotator).

False-alarm rate: 1e-3 for the whole test, two-sided, Bonferroni over the 9 channel values and the NC-ECE:
``Z = Phi^{-1}(1 - 1e-3 / 20) = 3.89``. The seed is fixed, so the test is deterministic; the rate says how
unlucky a seed must be to fail a correct implementation.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from noisycal_bayes import ece, simulate_annotations
from noisycal_bayes.cli import bayes_available, build_parser, main
from noisycal_bayes.simulate import CURVES

# Channels away from 0 and 1, so that the posterior is near normal and its 90% width gives its sd. (A first
# version used tpr[0] = 0.9 with 800 items: the sample's tpr was 0.94 and both EM (0.995) and the posterior
# (mean 0.98, 90% interval ~[0.95, 1.0]) hugged the bound, where a width-derived sd says little.)
FPR, TPR = np.array([0.15, 0.2, 0.25]), np.array([0.85, 0.8, 0.75])
N_ITEMS, BINS, LEVEL = 800, 10, 0.9
Z = stats.norm.isf(1e-3 / 20)
SD_PER_WIDTH = 1 / (2 * stats.norm.isf((1 - LEVEL) / 2))  # sd of a normal posterior per unit of 90% width


def population_ece(curve: str, n_bins: int) -> float:
    """``sum_k |int_{B_k} (m(z) - z) dz|`` for Z ~ U(0, 1) (the simulation's default Beta(1, 1) scores)."""
    m = CURVES[curve]
    return sum(abs(integrate.quad(lambda z: float(m(np.array([z]))[0]) - z, k / n_bins, (k + 1) / n_bins)[0])
               for k in range(n_bins))


@pytest.fixture(scope="module")
def nuts_run(tmp_path_factory):
    if not bayes_available():
        pytest.skip("the Bayesian layer is not installed")
    folder = tmp_path_factory.mktemp("cli_nuts")
    sim = simulate_annotations(N_ITEMS, fpr=FPR, tpr=TPR, curve="overconfident", missing=0.1, seed=21)
    long = sim.data.to_long()
    long[["item", "annotator", "label"]].to_csv(folder / "ann.csv", index=False)
    pd.DataFrame({"item": sim.data.item_ids, "score": sim.data.scores}).to_csv(folder / "scores.csv", index=False)
    js = folder / "res.json"
    # No --method: the default route. Options are the parser's real names (checked in the test below).
    code = main([str(a) for a in ("evaluate", folder / "ann.csv", "--scores", folder / "scores.csv",
                                  "--chains", 2, "--warmup", 200, "--draws", 300, "--bins", BINS, "--json", js)])
    return sim, code, json.loads(js.read_text()) if js.exists() else None


def test_the_options_exist_and_no_method_is_given():
    # The run above passes no --method: the parser's default (today "auto" = NUTS when the Bayesian layer is
    # installed); the JSON's nc_ece.method, checked below, is what the default resolved to.
    args = build_parser().parse_args(["evaluate", "a.csv", "--chains", "2", "--warmup", "150", "--draws", "150"])
    assert args.method in ("auto", "nuts")
    assert (args.chains, args.warmup, args.draws) == (2, 150, 150)


def test_default_route_diagnostics_and_channels_near_the_truth(nuts_run):
    sim, code, res = nuts_run
    assert code == 0 and res is not None
    assert res["nc_ece"]["method"] == "nuts" and res["nc_ece"]["level"] == LEVEL
    d = res["diagnostics"]
    # Diagnostics before moments. 2 x 300 draws of a well-identified 3-annotator model: no divergence, chains
    # agreeing (R-hat < 1.05) and ESS >= 100. With ESS >= 100 the interval-derived sd has a Monte Carlo
    # relative error of about 1/sqrt(2 * 100) = 7%, which Z = 3.89 absorbs (an sd underestimated by 2 such
    # errors still leaves z = 3.4, a false alarm below 1e-3 per value).
    assert 1 - 1e-6 <= d["rhat_max"] < 1.05 and d["ess_min"] >= 100 and d["divergences"] == 0
    for j, c in enumerate(res["channels"]):
        for q, truth in (("fpr", FPR[j]), ("tpr", TPR[j]), ("gap", TPR[j] - FPR[j])):
            point, lo, hi = c[q], c[f"{q}_lower"], c[f"{q}_upper"]
            assert all(math.isfinite(v) for v in (point, lo, hi)), c
            assert lo < point < hi, (q, c)
            sd = (hi - lo) * SD_PER_WIDTH
            assert 0 < sd < 0.1, (q, c)  # 800 items: a posterior, not the prior
            assert abs(point - truth) < Z * sd, (q, j, point, truth, sd)


def test_default_route_nc_ece_fields_and_value(nuts_run):
    sim, code, res = nuts_run
    assert code == 0
    nc = res["nc_ece"]
    assert {"value", "lower", "upper", "upper_bound", "level", "target", "method", "interval_method"} <= set(nc)
    from noisycal_bayes.propagate import DEFAULT_METHOD, TARGETS

    assert nc["target"] == TARGETS[DEFAULT_METHOD]
    for key in ("value", "lower", "upper", "upper_bound"):
        assert math.isfinite(nc[key]), (key, nc)
    assert 0 <= nc["lower"] <= nc["value"] <= nc["upper"]
    # The over-confident curve sigmoid(0.5 logit z) is far from calibrated (population ECE ~0.1): the interval
    # is two-sided, and its width gives the sd of the estimate around the stated target.
    truth = population_ece("overconfident", BINS)
    assert nc["lower"] > 0
    sd = (nc["upper"] - nc["lower"]) * SD_PER_WIDTH
    assert abs(nc["value"] - truth) < Z * sd, (nc, truth, sd)
    # Reliability rows: one per bin, counts summing to the items, bands ordered.
    rel = res["reliability"]
    assert len(rel) == BINS and sum(r["count"] for r in rel) == N_ITEMS
    assert all(r["band_lower"] <= r["band_upper"] for r in rel if r["count"] > 0)


def test_default_route_naive_metrics_are_independent_recomputations(nuts_run):
    sim, code, res = nuts_run
    assert code == 0
    data = sim.data
    maj = data.majority_vote(ties="positive" if res["naive"]["majority_ties_counted_as"] == 1 else "negative")
    assert res["naive"]["ece_majority"] == pytest.approx(ece(data.scores, maj, bins=BINS), rel=1e-12)
    for j, name in enumerate(data.annotator_ids):
        obs = data.observed[:, j]
        want = ece(data.scores[obs], data.labels[obs, j], bins=BINS)
        assert res["naive"]["ece_per_annotator"][str(name)] == pytest.approx(want, rel=1e-12)
    assert res["n_items"] == N_ITEMS and res["n_annotators"] == 3
