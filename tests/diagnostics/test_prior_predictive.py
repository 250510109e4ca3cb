"""Tests for the prior predictive check (noisycal_bayes/diagnostics/prior_predictive.py: prior_predictive_check) and its plot."""
import numpy as np
import pytest

from noisycal_bayes.data import AnnotationSet
from noisycal_bayes.diagnostics import PriorPredictiveCheck, prior_predictive_check
from noisycal_bayes.diagnostics.prior_predictive import PRIOR_PREDICTIVE_MODELS, _pp_responses
from noisycal_bayes.models import DEFAULT_PRIOR, Prior
from noisycal_bayes.simulate import simulate_annotations

SIM = simulate_annotations(400, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], missing=0.2, seed=0)


@pytest.mark.parametrize("model", PRIOR_PREDICTIVE_MODELS)
def test_a_prior_that_covers_the_data_passes_and_the_table_is_consistent(model):
    # A prior of informative annotators (gap mostly > 0.3) covers these annotators (gaps 0.5 to 0.8). The flat
    # default prior puts agreement as high as this pair's in the upper 2% tail: it may warn here, and should.
    out = prior_predictive_check(SIM.data, model=model, prior=Prior(fpr=(2.0, 8.0), u=(4.0, 2.0)), n_draws=99,
                                 seed=1)
    assert isinstance(out, PriorPredictiveCheck) and out.status == "pass"
    assert set(out.flagged["statistic"]) <= {"pattern_count"}
    t = out.table
    assert np.all((t["lower"] <= t["upper"]) & (t["prior_min"] <= t["lower"]) & (t["upper"] <= t["prior_max"]))
    # Observed rates recomputed directly from the labels (missing responses ignored).
    lab = SIM.data.labels
    rates = t[t["statistic"] == "positive_rate"].set_index("annotators")["observed"]
    assert rates["all"] == pytest.approx((lab == 1).sum() / (lab >= 0).sum())
    assert rates["1"] == pytest.approx((lab[:, 1] == 1).sum() / (lab[:, 1] >= 0).sum())
    # Replicates keep the data's missing responses: the cells of each group hold every item of the group, in
    # the data and (on average) in the replicates, which can only produce the data's observed-annotator sets.
    cells = t[t["statistic"] == "pattern_count"]
    assert cells["observed"].sum() == SIM.data.n_items
    assert cells["prior_mean"].sum() <= SIM.data.n_items + 1e-9
    if model == "dawid_skene":
        assert set(cells["group"]) == {0}


def test_a_prior_that_cannot_produce_the_data_is_flagged():
    # fpr ~ Beta(50, 1): every false-positive rate near 1 and tpr above it, so nearly all responses are positive;
    # the data have about 50% positives: every positive rate lies below the range of the draws.
    out = prior_predictive_check(SIM.data, prior=Prior(fpr=(50.0, 1.0)), n_draws=99)
    assert out.status == "warn"
    rates = out.table[out.table["statistic"] == "positive_rate"]
    assert np.all(rates["status"] == "outside") and np.all(rates["observed"] < rates["prior_min"])
    assert np.allclose(rates["p_value"], 2 / 100)  # the smallest two-sided p of 99 draws
    # Agreement: near-certain positives agree almost always, the data's annotators far less.
    agree = out.table[out.table["statistic"] == "agreement"]
    assert np.all(agree["status"] == "outside")


@pytest.mark.slow
def test_data_drawn_from_the_prior_predictive_land_inside_at_the_stated_rate():
    # Data drawn from the prior predictive itself are exchangeable with the replicates, so the overall positive
    # rate falls outside the central 90% interval of 39 replicates with probability about 0.1 (the interval's
    # ends interpolate between order statistics): in 30 data sets the count is Binomial(30, 0.1), mean 3, and we
    # accept up to its 1 - 1e-3 quantile. Can fail: a simulator that differs from the replicates' puts most out.
    from scipy import stats

    rng = np.random.default_rng(5)
    group = np.repeat(np.arange(3), 100)
    outside = 0
    for r in range(30):
        labels = _pp_responses("grouped", rng, DEFAULT_PRIOR, group, 3, 3)
        data = AnnotationSet.from_wide(labels, (group + 0.5) / 3)
        t = prior_predictive_check(data, groups=group, n_draws=39, seed=r).table
        outside += int(t.loc[0, "status"] != "inside")
    assert outside <= stats.binom.ppf(1 - 1e-3, 30, 0.1), outside


def test_errors_name_the_offending_input():
    with pytest.raises(ValueError, match="`model` must be one of"):
        prior_predictive_check(SIM.data, model="platt")
    with pytest.raises(ValueError, match="`n_draws` must be at least 19"):
        prior_predictive_check(SIM.data, n_draws=10)
    with pytest.raises(ValueError, match="must be an AnnotationSet"):
        prior_predictive_check(SIM.data.labels)
    with pytest.raises(ValueError, match="`level` must lie strictly between 0 and 1"):
        prior_predictive_check(SIM.data, level=1.5)
    full = simulate_annotations(50, fpr=[0.1, 0.2], tpr=[0.9, 0.8], seed=0).data
    one = AnnotationSet.from_wide(full.labels[:, :1], full.scores)
    with pytest.raises(ValueError, match="at least two annotators"):
        prior_predictive_check(one)


def test_plot_draws_the_intervals():
    pytest.importorskip("matplotlib")
    from noisycal_bayes.plotting import plot_prior_predictive

    out = prior_predictive_check(SIM.data, n_draws=19)
    fig = plot_prior_predictive(out)
    assert len(fig.axes) == 1 and len(fig.axes[0].get_yticks()) == 1 + 3 + 3
    with pytest.raises(ValueError, match="prior_predictive_check"):
        plot_prior_predictive(SIM.data)
    with pytest.raises(ValueError, match="`statistics` must be"):
        out.plot(statistics=("nope",))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["grouped", "score_dependent", "correlated"])
def test_numpy_replicates_match_the_numpyro_prior_predictive(model):
    # The NumPy transcription against the model function's labels=None branch (numpyro Predictive): the mean
    # overall positive rate and pair agreement over 400 draws each agree within 4 standard errors of the
    # difference (the per-draw values have sd about 0.15-0.25).
    import jax
    from numpyro.infer import Predictive

    from noisycal_bayes.diagnostics.prior_predictive import _pp_model, _pp_statistics

    group = np.repeat(np.arange(2, dtype=np.int32), 150)
    obs = np.ones((300, 3), bool)
    pairs = [(0, 1), (0, 2), (1, 2)]
    pred = Predictive(_pp_model(model), num_samples=400, return_sites=["labels"])
    jx = np.asarray(pred(jax.random.PRNGKey(0), None, group, None, n_annotators=3, n_groups=2,
                         prior=DEFAULT_PRIOR)["labels"], np.int8)
    rng = np.random.default_rng(0)
    npy = np.stack([_pp_responses(model, rng, DEFAULT_PRIOR, group, 3, 2) for _ in range(400)])
    for k in (0, 1):
        a = _pp_statistics(jx, obs, group, 2, pairs)[k][:, 0]
        b = _pp_statistics(npy, obs, group, 2, pairs)[k][:, 0]
        se = np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
        assert abs(a.mean() - b.mean()) < 4 * se, (model, k, a.mean(), b.mean(), se)
