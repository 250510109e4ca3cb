"""False-alarm rate and power of the K-class pattern check (``run_multiclass_checks``, EM route;
noisycal_bayes/diagnostics/checks.py).

1. False alarms. On R = 40 well-specified simulations (K = 3, three annotators labelling every item, 1000 items,
   6 score groups) the check (pooled Pearson X^2, parametric bootstrap with warm-started EM refits, B = 19
   replicates) should warn with probability alpha = 0.05: with B = 19 it warns when the observed X^2 exceeds every
   replicate, which has probability 1 / (B + 1) = 0.05 when the observed and replicated statistics are
   exchangeable (asymptotically, for the parametric bootstrap). The warnings are then Binomial(40, 0.05) (mean 2);
   we accept at most its 1 - 1e-3 quantile, 7 (false-failure rate 1e-3). The lower side through the mean p-value:
   p is uniform on {1/20, ..., 20/20}, mean 0.525, sd 0.2884, so the mean of 40 is within 3.29 * 0.2884 / sqrt(40)
   = 0.15 of 0.525 (two-sided 1e-3). Before the cells were pooled the same design warned in 7.5% of 40 data sets
   and a sparse crowd in all of them (docs/model_checks.md).
2. Power (negative control that must warn). Annotator 0's accuracy falls from 0.9 to 0.4 with the classifier's
   confidence rank (score-dependent confusion), 1500 items: the check must warn in at least 4 of 5 simulations;
   measured with B = 199 it warned in every one of 20 (docs/model_checks.md), and with B = 19 the smallest p is
   0.05, reached when the observed X^2 is above every replicate.
"""
import warnings

import numpy as np
import pytest
from scipy import stats

from noisycal_bayes.core import score_groups
from noisycal_bayes.data import MulticlassAnnotationSet
from noisycal_bayes.diagnostics.checks import run_multiclass_checks
from noisycal_bayes.evaluation.engines import N_STARTS_K
from noisycal_bayes.inference import fit_em_multiclass
from noisycal_bayes.simulate import simulate_multiclass

pytestmark = [pytest.mark.statistical, pytest.mark.slow]

N_SETS, B, ALPHA, FALSE_FAILURE = 40, 19, 0.05, 1e-3


def _check(data, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_em_multiclass(data, groups=score_groups(data.probs, n_quantiles=2), n_starts=N_STARTS_K, seed=seed)
    (row,) = run_multiclass_checks(data, fit, method="em", seed=seed)
    return row


def _data(sim, label=None):
    return MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label if label is None else label,
                                                  n_classes=sim.probs.shape[1], probs=sim.probs)


def _score_dependent(n, seed):
    """Annotator 0 right with probability 0.4 + 0.5 rank(confidence), else one of the other classes at random."""
    sim = simulate_multiclass(n, 3, 3, accuracy=0.8, seed=seed)
    rng = np.random.default_rng(seed + 7)
    rank = np.argsort(np.argsort(sim.probs.max(axis=1))) / (n - 1)
    lab = np.asarray(sim.label).copy()
    sel = np.flatnonzero(np.asarray(sim.annotator) == 0)
    y = np.asarray(sim.y)[np.asarray(sim.item)[sel]]
    right = rng.random(sel.size) < 0.4 + 0.5 * rank[np.asarray(sim.item)[sel]]
    lab[sel] = np.where(right, y, (y + rng.integers(1, 3, sel.size)) % 3)
    return _data(sim, lab)


def test_false_alarm_rate(monkeypatch):
    monkeypatch.setattr("noisycal_bayes.diagnostics._families.N_CHECK_REPLICATES", B)
    rows = [_check(_data(simulate_multiclass(1000, 3, 3, accuracy=0.8, seed=2000 + r)), r) for r in range(N_SETS)]
    assert all(r["status"] != "not_testable" for r in rows), [r["detail"] for r in rows]
    p = np.array([r["p_value"] for r in rows])
    assert np.sum(p <= ALPHA) <= stats.binom.ppf(1 - FALSE_FAILURE, N_SETS, ALPHA), p
    assert abs(p.mean() - 0.525) <= stats.norm.isf(FALSE_FAILURE / 2) * 0.2884 / np.sqrt(N_SETS), p


def test_power_against_score_dependent_confusion(monkeypatch):
    monkeypatch.setattr("noisycal_bayes.diagnostics._families.N_CHECK_REPLICATES", B)
    rows = [_check(_score_dependent(1500, 3000 + r), r) for r in range(5)]
    assert sum(r["status"] == "warn" for r in rows) >= 4, [(r["status"], r["p_value"]) for r in rows]
