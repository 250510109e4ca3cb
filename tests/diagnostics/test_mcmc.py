"""Tests for noisycal_bayes/diagnostics/mcmc.py: diagnostics table and the warnings it turns into."""
import warnings

import numpy as np
import pytest

from noisycal_bayes.diagnostics import check_mcmc, mcmc_diagnostics
from noisycal_bayes.warnings import ConvergenceWarning


def _table(seed=0, shift=0.0, n_draws=500):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4, n_draws, 2))
    x[0] += shift  # one chain elsewhere: what R-hat exists to detect
    return mcmc_diagnostics({"x": x, "s": rng.normal(size=(4, n_draws))}, {"x": ("annotator",)},
                            {"annotator": ["a", "b"]})


def test_table_rows_and_labels():
    t = _table()
    assert list(t.index) == ["x[a]", "x[b]", "s"]
    assert list(t["name"]) == ["x", "x", "s"] and t.loc["x[b]", "index"] == (1,)
    # Independent normal draws: R-hat near 1, ESS near the number of draws (2000); a loose sanity range.
    assert (t["r_hat"] < 1.01).all() and (t["ess_bulk"] > 1200).all()


def test_healthy_chains_raise_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_mcmc(_table(), n_chains=4, n_divergent=0, n_draws=500) == []


def test_disagreeing_chains_warn_about_rhat():
    with pytest.warns(ConvergenceWarning) as rec:
        check_mcmc(_table(shift=3.0), n_chains=4, n_divergent=0, n_draws=500)
    text = " ".join(str(w.message) for w in rec)
    assert "R-hat above 1.01 for ['x[a]', 'x[b]']" in text and "several modes" in text


def test_divergences_low_ess_and_tree_depth_each_warn_with_advice():
    with pytest.warns(ConvergenceWarning) as rec:
        notes = check_mcmc(_table(n_draws=40), n_chains=4, n_divergent=3, n_draws=40, n_max_depth=5)
    text = " ".join(str(w.message) for w in rec)
    assert len(notes) >= 3  # (R-hat may also exceed 1.01 with 40 draws per chain)
    assert "3 divergent transitions" in text and "target_accept" in text
    assert "effective sample size below 400" in text and "n_draws" in text
    assert "maximum tree depth" in text
