"""Tests for noisycal_bayes/core/starts.py: screening and selection of EM starts (rules 3-5)."""
import numpy as np

from noisycal_bayes.core.starts import (CONVERGED, MAX_ITER, NONFINITE, all_failed_message, select_start,
                                        unconverged_message)

# Two annotators, one group: theta = (fpr_0, fpr_1, tpr_0, tpr_1, prevalence).
GOOD = [0.1, 0.2, 0.9, 0.8, 0.4]
SMALL_GAP = [0.1, 0.5, 0.9, 0.52, 0.4]  # annotator 1's gap 0.02 <= min_gap


def _select(thetas, objectives, statuses, **kw):
    theta = np.array(thetas, np.float64)
    s = theta.shape[0]
    trace = np.zeros((s, 4))
    return select_start(theta, np.array(objectives, np.float64), np.full(s, 3), np.array(statuses), trace,
                        n_annotators=2, min_gap=0.05, max_iter=3, **kw)


def test_converged_tier_first():
    # A converged accepted start wins over an unconverged one with a larger objective.
    out = _select([GOOD, GOOD], [-10.0, -5.0], [CONVERGED, MAX_ITER])
    assert out["selected"] == 0 and out["converged"] and out["no_estimate"] is None


def test_unconverged_tier_when_nothing_converged_is_accepted():
    # The converged start is screened out (small gap): the unconverged accepted start is the estimate.
    out = _select([SMALL_GAP, GOOD, GOOD], [-1.0, -7.0, -6.0], [CONVERGED, MAX_ITER, MAX_ITER])
    assert out["selected"] == 2 and not out["converged"]
    assert (1, "did not converge within max_iter=3 iterations") in out["failed"]
    assert "start 2" in unconverged_message("fit_em", 3, out)
    # Without the second tier (unconverged=False) there is no estimate, as before it existed.
    assert _select([SMALL_GAP, GOOD], [-1.0, -7.0], [CONVERGED, MAX_ITER], unconverged=False)["selected"] is None


def test_no_estimate_reasons_are_distinct():
    nan = [np.nan] * 5
    out = _select([nan, GOOD], [np.nan, -np.inf], [NONFINITE, MAX_ITER])
    assert out["selected"] is None and out["no_estimate"] == "nonfinite"
    assert "no start gave a finite likelihood" in all_failed_message("fit_em", 2, out["failed"], out["no_estimate"])
    out = _select([SMALL_GAP, SMALL_GAP], [-1.0, -2.0], [CONVERGED, MAX_ITER])
    assert out["selected"] is None and out["no_estimate"] == "screened"
    # The unconverged start's reason carries both facts: it stopped at max_iter and broke the screen.
    assert out["failed"][1][1].startswith("did not converge within max_iter=3 iterations; gap <= min_gap")
    text = all_failed_message("fit_em", 2, out["failed"], out["no_estimate"])
    assert "orientation screen" in text and "raise `max_iter`" in text
