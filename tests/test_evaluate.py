"""Tests of noisycal_bayes/evaluation.py: ``evaluate()`` and the ``Evaluation`` it returns.

What is checked, and against what:
- ``nc_ece.value`` is the paper's NC-ECE (``noisycal_bayes.nc_ece``) at the point channel, on the EM route
  and on a small NUTS run (independent recomputation from the reported channel);
- the EM route is ``fit_em -> bootstrap_em -> posterior_nc_ece``: its debiased estimate, interval and
  channel intervals equal those of the same three calls made here by hand;
- ``Evaluation.to_json()`` is what ``noisycal-bayes evaluate --json`` writes and ``summary()`` what it
  prints, for the same data and options;
- the one-sided reading (a nearly calibrated model) gives ``[0, upper_bound]`` and the undercoverage note;
- every documented bad input raises ``ValueError`` naming it.
"""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes import AnnotationSet, Binning, Evaluation, evaluate, fit_em, nc_ece, simulate_annotations
from noisycal_bayes.cli import main
from noisycal_bayes.data.loaders import load_annotations_csv

BINS, GROUPS, N_BOOT, SEED = 5, 3, 30, 1


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(400, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.85], curve="overconfident", seed=5)


@pytest.fixture(scope="module")
def ev_em(sim):
    return evaluate(sim.data, method="em", bins=BINS, groups=Binning.equal_mass(GROUPS), n_boot=N_BOOT, seed=SEED,
                    clean_labels=sim.clean_labels)


@pytest.fixture(scope="module")
def ev_nuts(sim):
    # The one NUTS fit of this file: 2 chains x 200 warm-up x 150 draws with 5 groups, the compiled program of
    # tests/inference/test_nuts.py's fit (3 annotators, 5 groups, 200 warm-up steps, chunks of 50): no compilation
    # of its own. The assertions on it hold for any number of groups.
    return evaluate(sim.data, method="nuts", bins=BINS, groups=Binning.equal_mass(5), n_chains=2, n_warmup=200, n_draws=150,
                    seed=SEED)


@pytest.fixture(scope="module")
def cli_run(sim, tmp_path_factory):
    """``noisycal-bayes evaluate --method em --json`` on CSV files of ``sim``: (stdout, JSON, loaded data)."""
    folder = tmp_path_factory.mktemp("cli")
    long = sim.data.to_long()
    long[["item", "annotator", "label"]].to_csv(folder / "ann.csv", index=False)
    pd.DataFrame({"item": sim.data.item_ids, "score": sim.data.scores}).to_csv(folder / "scores.csv", index=False)
    js = folder / "res.json"
    capture = _Capture()
    with capture:
        code = main(["evaluate", str(folder / "ann.csv"), "--scores", str(folder / "scores.csv"), "--method", "em",
                     "--bins", str(BINS), "--groups", str(GROUPS), "--n-boot", str(N_BOOT), "--seed", str(SEED),
                     "--json", str(js)])
    assert code == 0, capture.err
    data = load_annotations_csv(folder / "ann.csv", folder / "scores.csv")
    return capture.out, json.loads(js.read_text()), data, folder / "ann.csv"


class _Capture:
    """Capture stdout/stderr in a module-scoped fixture (``capsys`` is function-scoped)."""

    def __enter__(self):
        import contextlib
        import io

        self._out, self._err = io.StringIO(), io.StringIO()
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(contextlib.redirect_stdout(self._out))
        self._stack.enter_context(contextlib.redirect_stderr(self._err))
        return self

    def __exit__(self, *exc):
        self._stack.close()
        self.out, self.err = self._out.getvalue(), self._err.getvalue()


# ------------------------------------------------------------------------------------------ one meaning per field
def test_em_value_is_the_papers_nc_ece_at_the_em_estimate(ev_em, sim):
    ref = nc_ece(sim.data, ev_em.channel, bins=Binning.equal_width(BINS), weights="iv").value
    assert math.isclose(ev_em.nc_ece.value, ref, rel_tol=1e-12)
    # The point channel is the EM estimate of the top-level fit_em (same data, groups, starts, seed).
    fit = fit_em(sim.data, model="grouped", groups=Binning.equal_mass(GROUPS), n_starts=10, seed=SEED)
    np.testing.assert_allclose(ev_em.channel.fpr, fit.channel.fpr, rtol=1e-12)
    np.testing.assert_allclose(ev_em.channel.tpr, fit.channel.tpr, rtol=1e-12)


def test_nuts_value_is_the_papers_nc_ece_at_the_posterior_mean(ev_nuts, sim):
    ref = nc_ece(sim.data, ev_nuts.channel, bins=Binning.equal_width(BINS), weights="iv").value
    assert math.isclose(ev_nuts.nc_ece.value, ref, rel_tol=1e-12)
    nc = ev_nuts.nc_ece
    assert nc.debiased is not None and nc.debiased >= 0 and nc.centre == "debiased"
    assert 0 <= nc.lower <= nc.upper
    d = ev_nuts.diagnostics
    assert d["rhat_max"] >= 1 - 1e-6 and d["ess_min"] > 0 and isinstance(d["divergences"], int)
    # The posterior mean lies inside the equal-tailed 90% posterior interval of every channel parameter.
    for q in ("fpr", "tpr", "gap"):
        lo, hi = ev_nuts.channel_intervals[q]
        assert np.all(lo <= getattr(ev_nuts.channel, q)) and np.all(getattr(ev_nuts.channel, q) <= hi)
    assert ev_nuts.to_dict()["nc_ece"]["value"] == pytest.approx(ref, rel=1e-12)


def test_em_route_is_fit_em_bootstrap_em_posterior_nc_ece(ev_em, sim):
    """Independent route: the three library calls made by hand give the same interval and channel bands."""
    from noisycal_bayes.inference.bootstrap import bootstrap_em
    from noisycal_bayes.propagate import posterior_nc_ece

    fit = fit_em(sim.data, model="grouped", groups=Binning.equal_mass(GROUPS), n_starts=10, seed=SEED)
    boot = bootstrap_em(sim.data, fit, n_boot=N_BOOT, seed=SEED)
    post = posterior_nc_ece(sim.data, boot, bins=Binning.equal_width(BINS), weights="iv", level=0.9, seed=SEED)
    nc = ev_em.nc_ece
    assert nc.debiased == pytest.approx(post.debiased, rel=1e-12)
    assert nc.value == pytest.approx(post.value, rel=1e-12)  # two routes to the paper's NC-ECE agree
    assert nc.upper_bound == pytest.approx(post.upper_one_sided, rel=1e-12)
    assert nc.target == post.target and nc.interval_to_read == post.interval_to_read
    if post.interval_to_read == "two_sided":
        assert (nc.lower, nc.upper) == pytest.approx((post.lower, post.upper), rel=1e-12)
    lo, hi = np.quantile(boot.draws["gap"].reshape(-1, 3), [0.05, 0.95], axis=0)
    np.testing.assert_allclose(ev_em.channel_intervals["gap"][0], lo, rtol=1e-12)
    np.testing.assert_allclose(ev_em.channel_intervals["gap"][1], hi, rtol=1e-12)
    assert ev_em.diagnostics == {"rhat_max": None, "ess_min": None, "divergences": None}
    assert ev_em.draws.shape == (N_BOOT,)


def test_one_sided_reading_gives_the_undercoverage_note():
    """A calibrated model: the data cannot tell the error from 0, so the interval to read is [0, bound]."""
    sim = simulate_annotations(400, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.85], curve="calibrated", seed=5)
    ev = evaluate(sim.data, method="em", bins=BINS, groups=Binning.equal_mass(GROUPS), n_boot=N_BOOT, seed=SEED)
    nc = ev.nc_ece
    # This seed gives calibration p-value 0.40 > 1 - level (checked once; the assertion below fails otherwise).
    assert nc.interval_to_read == "upper_one_sided" and nc.calibration_p_value > 0.1
    assert nc.lower == 0.0 and nc.upper == nc.upper_bound
    notes = [w for w in ev.warnings if "undercovers near ECE = 0" in w]
    assert len(notes) == 1 and "docs/coverage.md" in notes[0] and "read the upper bound" in notes[0]
    assert "one-sided interval [0.000, " in ev.summary()


def test_no_bootstrap_means_no_interval(sim):
    ev = evaluate(sim.data, method="em", bins=BINS, groups=Binning.equal_mass(GROUPS), n_boot=0)
    nc = ev.nc_ece
    assert (nc.lower, nc.upper, nc.upper_bound, nc.debiased, ev.channel_intervals) == (None,) * 5
    assert "no interval: --n-boot 0." in ev.warnings
    assert np.isnan(ev.table["band_lower"]).all()
    assert math.isclose(nc.value, nc_ece(sim.data, ev.channel, bins=BINS).value, rel_tol=1e-12)


# ------------------------------------------------------------------------------------------ same as the CLI
def test_to_json_is_what_the_cli_writes(cli_run):
    out, written, data, _ = cli_run
    ev = evaluate(data, method="em", bins=BINS, groups=Binning.equal_mass(GROUPS), n_boot=N_BOOT, seed=SEED)
    assert json.loads(ev.to_json()) == written
    assert written["schema_version"] == 2
    assert set(written["nc_ece"]) == {"value", "debiased", "lower", "upper", "upper_bound", "level", "target",
                                      "method", "interval_method", "interval_to_read", "calibration_p_value",
                                      "interval_centre"}
    # The CLI prints the summary.
    assert ev.summary(title=f"noisycal-bayes evaluate {cli_run[3]}") in out


def test_summary_names_each_number(ev_em):
    text = ev_em.summary()
    nc = ev_em.nc_ece
    assert f"NC-ECE (noise-corrected)   {nc.value:.3f}  paper's plug-in estimate" in text
    assert f"NC-ECE, debiased estimate  {nc.debiased:.3f}" in text
    assert "built around the debiased estimate" in text and f"target: {nc.target}" in text


def test_repr_html_contains_the_numbers(ev_em):
    page = ev_em._repr_html_()
    nc = ev_em.nc_ece
    for number in (nc.value, nc.debiased, nc.lower, nc.upper, ev_em.naive.majority_vote_ece,
                   ev_em.naive.vote_fraction_smece, float(ev_em.channel.gap[1])):
        assert f"{number:.3f}" in page
    assert "paper&#x27;s plug-in estimate" in page and "population binned ECE" in page
    assert page.startswith("<div>") and page.endswith("</div>")


def test_write_report_folder(ev_em, tmp_path):
    written = ev_em.write_report(tmp_path / "rep")
    names = sorted(p.name for p in written)
    assert names == ["annotators.csv", "channels.png", "checks.png", "gap_sensitivity.png", "nc_ece.png", "reliability.png", "report.html",
                     "results.json", "summary.md"]
    assert json.loads((tmp_path / "rep" / "results.json").read_text()) == json.loads(ev_em.to_json())
    assert "debiased estimate" in (tmp_path / "rep" / "summary.md").read_text()


def test_recalibration_is_stored_and_rendered(sim):
    ev = evaluate(sim.data, method="em", bins=BINS, groups=Binning.equal_mass(GROUPS), n_boot=0, recalibration=True,
                  clean_labels=sim.clean_labels)
    rows = ev.recalibration
    assert len(rows) == 10 and rows[0].map_name == "none" and rows[0].fitted_to == "-"
    assert "Recalibration (fitted on one half" in ev.summary()
    assert len(ev.to_dict()["recalibration"]) == 10
    assert all(r.oracle_ece is not None for r in rows)


# ------------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("kwargs, match", [
    ({"method": "mcmc"}, "unknown method 'mcmc'"),
    ({"level": 1.5}, "`level` must lie strictly between 0 and 1"),
    ({"bins": 0}, "`bins` must be an integer >= 1"),
    ({"groups": 2.5}, "`groups` must be a Binning"),
    ({"n_boot": -1}, "`n_boot` must be an integer >= 0"),
    ({"seed": -3}, "`seed` must be an integer >= 0"),
    ({"n_chains": 0}, "`n_chains` must be an integer >= 1"),
    ({"weights": "bogus"}, "`weights` must be one of"),
    ({"weights": [0.5, 0.5, 0.0]}, "`weights` must be a rule name"),
])
def test_bad_options(sim, kwargs, match):
    with pytest.raises(ValueError, match=match):
        evaluate(sim.data, **kwargs)


def test_bad_data(sim):
    with pytest.raises(ValueError, match="must be an AnnotationSet"):
        evaluate(sim.data.labels)
    with pytest.raises(ValueError, match="scores"):
        evaluate(sim.data.with_scores(None), method="em")
    with pytest.raises(ValueError, match=r"`clean_labels` must have shape \(400,\)"):
        evaluate(sim.data, method="em", clean_labels=[0, 1])
    with pytest.raises(ValueError, match="`clean_labels` must be 0 or 1"):
        evaluate(sim.data, method="em", clean_labels=np.full(400, 2))


# ------------------------------------------------------------------------------------------ assumption checks
def test_checks_are_those_of_model_checks_on_the_route_s_fit(sim, ev_em, ev_nuts):
    # An independent route: model_checks on the same EM fit and seed gives the rows evaluate() reports.
    from noisycal_bayes.diagnostics import CHECK_NAMES, model_checks
    from noisycal_bayes.evaluation.engines import N_CHECK_REPLICATES

    fit = fit_em(sim.data, model="grouped", groups=Binning.equal_mass(GROUPS), n_starts=10, seed=SEED)
    table = model_checks(sim.data, fit, n_replicates=N_CHECK_REPLICATES, seed=SEED).table
    assert [c["name"] for c in ev_em.checks] == list(table["name"]) == list(CHECK_NAMES)
    for row, c in zip(table.itertuples(index=False), ev_em.checks):
        assert c["status"] == row.status and c["status"] in ("pass", "warn", "not_testable")
        if row.status != "not_testable":
            assert c["p_value"] == pytest.approx(row.p_value, rel=1e-12)
            assert c["statistic"] == pytest.approx(row.statistic, rel=1e-9)
    # Both routes report the same checks, by name, in the JSON and in the text.
    assert [c["name"] for c in ev_nuts.checks] == list(CHECK_NAMES)
    assert json.loads(ev_em.to_json())["checks"] == [dict(c) for c in ev_em.checks]
    text = ev_em.summary()
    assert "Assumption checks" in text and all(f"{name}: " in text for name in CHECK_NAMES)


def test_a_warning_check_is_said_under_the_nc_ece():
    # Score-dependent noise (annotator 0's false-positive rate rises with the score) breaks the channel model;
    # the posterior-predictive check must warn at n = 20,000 (issue 17's power setting) and the text says so.
    rng = np.random.default_rng(11)
    n = 20000
    z = rng.beta(1, 1, n)
    y = rng.random(n) < z
    fpr = np.column_stack([0.02 + 0.3 * z, np.full(n, 0.1), np.full(n, 0.15)])
    tpr = np.array([0.9, 0.8, 0.85])
    labels = np.where(y[:, None], rng.random((n, 3)) < tpr, rng.random((n, 3)) < fpr).astype(int)
    data = AnnotationSet.from_wide(labels, z)
    ev = evaluate(data, method="em", n_boot=0, seed=0)
    assert "posterior_predictive" in ev.warned_checks
    assert "the data question it" in ev.summary()


def test_checks_can_be_turned_off(sim):
    ev = evaluate(sim.data, method="em", bins=BINS, groups=Binning.equal_mass(GROUPS), n_boot=0, checks=False)
    assert ev.checks == () and json.loads(ev.to_json())["checks"] == [] and "Assumption checks" not in ev.summary()


# ------------------------------------------------------------------------------------------ EM without convergence
def test_em_without_convergence_is_carried_as_a_warning(sim, monkeypatch):
    # fit_em's contract: no start converged -> the best start with converged=False and a ConvergenceWarning. The EM
    # route goes on with that estimate and reports the warning (ev.warnings, JSON) instead of failing.
    from functools import partial

    import noisycal_bayes.inference as inference

    monkeypatch.setattr(inference, "fit_em", partial(inference.fit_em, max_iter=3))
    ev = evaluate(sim.data, method="em", bins=BINS, groups=Binning.equal_mass(GROUPS), n_boot=10, seed=SEED,
                  checks=False)
    assert not ev.fit.converged and ev.fit.n_iter == 3
    hits = [w for w in ev.warnings if "ConvergenceWarning" in w and "max_iter=3" in w]
    assert len(hits) == 1 and "converged=False" in hits[0]
    assert hits[0] in json.loads(ev.to_json())["diagnostics"]["warnings"]
    assert np.isfinite(ev.nc_ece.value) and ev.nc_ece.lower is not None


# ------------------------------------------------------------------------------------------ tiny data
@pytest.mark.parametrize("n_boot", [0, 10])
def test_tiny_data_on_the_em_route_is_a_clear_error(n_boot):
    # Three items and two annotators: EM fits, but every gap interval contains 0, so no label is usable; the error
    # names the annotators and the counts (it was numpy's "need at least one array to stack" with n_boot > 0).
    data = AnnotationSet.from_wide(np.array([[1, 1], [0, 0], [1, 0]]), np.array([0.9, 0.2, 0.6]), annotators=["a", "b"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"no annotator's labels are usable: the gap interval of every annotator "
                                             r"\(a, b\) contains 0.*3 items and 6 labels"):
            evaluate(data, method="em", n_boot=n_boot, checks=False)


def test_every_label_the_same_says_so():
    data = AnnotationSet.from_wide(np.ones((50, 3), dtype=int), np.linspace(0.01, 0.99, 50))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="no estimate.*Every label is 1: nothing in them separates the classes"):
            evaluate(data, method="em", n_boot=0, checks=False)
