"""The accelerated sparse EM (SQUAREM, Varadhan & Roland 2008) and the sparse path's default start.

The accelerated loop must stop at the plain loop's fixed point. Both apply one stopping rule (parameters and
objective move by at most ``tol`` in one plain EM step), so each stops within ``tol r / (1 - r)`` of the fixed
point, ``r`` the EM rate; at tol = 1e-9 and r <= 0.99 that is <= 1e-7, so both agree to 1e-6 with a wide margin.
The plain loop is the reference EM (NumPy, an independent implementation of the same rules; nothing to compile) in
the default run, and fit_em's own plain sparse loop in the slow run. Negative control: the same comparison against
a fit stopped far too early (tol = 1e-3) fails, so the check can fail.
"""
import warnings

import numpy as np
import pytest

from noisycal_bayes import fit_em
from noisycal_bayes.simulate import simulate_crowd, simulate_annotations
from noisycal_bayes.warnings import SmallGapWarning


def _quiet(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallGapWarning)
        return fit_em(CROWD.data, model="dawid_skene", path="sparse", **kw)


CROWD = simulate_crowd(200, 20, labels_per_item=4, activity="heavy", spammers=0.05, adversaries=0.1, seed=3)


def _close(a, b, atol):
    for name in ("fpr", "tpr", "prevalence"):
        np.testing.assert_allclose(np.asarray(a.point[name]), np.asarray(b.point[name]), atol=atol, rtol=0)


#: One max_iter for every fit here: it is part of the compiled program's key, so the fits share two programs.
MAX_ITER = 3000


@pytest.fixture(scope="module")
def pair():
    from noisycal_bayes.reference import fit_em as reference_fit_em

    kw = dict(tol=1e-9, max_iter=MAX_ITER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallGapWarning)
        plain = reference_fit_em(CROWD.data, model="dawid_skene", starts="vote", orientation="crowd", **kw)
    return _quiet(accelerate=True, **kw), plain


def test_accelerated_fit_is_the_plain_fixed_point(pair):
    fast, plain = pair
    assert fast.converged and plain.converged
    assert fast.settings["accelerate"] and fast.details["orientation"] == "crowd"
    _close(fast, plain, 1e-6)
    assert fast.loglik == pytest.approx(plain.loglik, abs=1e-6)
    # Fewer EM steps (three per cycle) than the plain loop.
    assert 3 * fast.n_iter < plain.n_iter
    # The safeguard: the objective never decreases from cycle to cycle (rounding: 1e-9 relative).
    trace = fast.loglik_trace
    assert trace.size == fast.n_iter + 1
    assert np.all(np.diff(trace) >= -1e-9 * abs(trace[-1]))
    # Negative control: a fit stopped at tol = 1e-3 (same compiled program) is not the fixed point to 1e-6.
    early = _quiet(accelerate=True, tol=1e-3, max_iter=MAX_ITER)
    with pytest.raises(AssertionError):
        _close(early, plain, 1e-6)


def test_sparse_path_default_is_the_vote_start(pair):
    # (n_starts given: random starts on the sparse path too, tests/inference/test_crowd_em.py, sparse = patterns.)
    fast = pair[0]
    assert fast.settings["starts"] == "vote" and fast.details["start_logliks"].size == 1
    from noisycal_bayes.inference.em import ACCELERATE_MIN_RESPONSES, resolve_accelerate

    assert not resolve_accelerate("auto", fast.inputs)  # fewer responses than the threshold
    assert CROWD.data.n_responses < ACCELERATE_MIN_RESPONSES


@pytest.mark.slow
def test_accelerated_fit_is_fit_ems_own_plain_fixed_point(pair):
    plain = _quiet(accelerate=False, tol=1e-9, max_iter=MAX_ITER)
    assert plain.converged and not plain.settings["accelerate"]
    _close(pair[0], plain, 1e-6)
    assert 3 * pair[0].n_iter < plain.n_iter


def test_default_starts_by_path():
    # fit_em applies resolve_starts (the pair above: sparse -> one vote start). The pattern path's default, 10 random
    # starts, is tested against the reference EM's defaults (tests/inference/test_em.py).
    from noisycal_bayes.inference.em import resolve_starts

    assert resolve_starts(None, None, True) == "vote"
    assert resolve_starts(None, 4, True) == "random" and resolve_starts(None, None, False) == "random"
    assert resolve_starts("vote", 4, False) == "vote" and resolve_starts("random", None, True) == "random"
    given = (np.zeros((1, 2)), np.ones((1, 2)), np.full((1, 1), 0.5))
    assert resolve_starts(given, None, True) is given


@pytest.mark.parametrize("kwargs, match", [
    ({"accelerate": "yes"}, "`accelerate` must be 'auto', True or False"),
    ({"accelerate": 1}, "`accelerate` must be 'auto', True or False"),
    ({"accelerate": True, "path": "patterns"}, "needs the sparse path"),
])
def test_bad_accelerate(kwargs, match):
    sim = simulate_annotations(100, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=0)
    with pytest.raises(ValueError, match=match):
        fit_em(sim.data, model="dawid_skene", **kwargs)


@pytest.mark.slow
def test_accelerated_map_with_gold_is_the_plain_fixed_point():
    """MAP (Beta pseudo-counts) with gold labels on a tenth of the items, from the vote start."""
    from noisycal_bayes import AnnotationSet
    from noisycal_bayes.models import Prior

    rng = np.random.default_rng(0)
    gold = np.where(rng.random(CROWD.data.n_items) < 0.1, CROWD.clean_labels, -1)
    item, ann, lab = (np.asarray(v) for v in CROWD.data.responses)
    data = AnnotationSet.from_responses(item, ann, lab, gold=gold)
    kw = dict(model="dawid_skene", prior=Prior(fpr=(2.0, 5.0), u=(1.0, 1.0), prevalence=(2.0, 2.0)), tol=1e-10,
              max_iter=3000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallGapWarning)
        fast, plain = fit_em(data, accelerate=True, **kw), fit_em(data, accelerate=False, **kw)
    assert fast.converged and plain.converged and fast.details["path"] == "sparse"
    _close(fast, plain, 1e-6)


def test_soft_counts_by_hand_with_repeated_labels():
    """soft_counts on the sparse path (per-code gathers, label-count identities, pair sums when there are repeats)
    against a loop over items and annotators written from its docstring. NumPy only: nothing to compile."""
    from noisycal_bayes import AnnotationSet
    from noisycal_bayes.models.em_result import soft_counts
    from noisycal_bayes.models.inputs import resolve_assignment, sparse_inputs

    item = np.array([0, 0, 0, 1, 1, 2, 2, 2, 3])
    ann = np.array([0, 0, 1, 0, 2, 1, 2, 2, 1])   # (0, 0) and (2, 2) are repeated pairs
    lab = np.array([1, 1, 0, 0, 1, 1, 0, 1, 1])
    data = AnnotationSet.from_responses(item, ann, lab)
    inp = sparse_inputs(data, "dawid_skene", resolve_assignment(data, "dawid_skene", None, "test"))
    f, t, p = np.array([0.1, 0.3, 0.2]), np.array([0.8, 0.7, 0.9]), np.array([0.4])
    got = soft_counts(inp, f, t, p)
    want, pairs = np.zeros((6, 3)), []
    for i in range(4):
        r = item == i
        l1 = np.prod(np.where(lab[r] == 1, t[ann[r]], 1 - t[ann[r]]))
        l0 = np.prod(np.where(lab[r] == 1, f[ann[r]], 1 - f[ann[r]]))
        T = p[0] * l1 / (p[0] * l1 + (1 - p[0]) * l0)
        for j in np.unique(ann[r]):
            a = lab[r][ann[r] == j]
            want[:4, j] += [(1 - T) * a.sum(), (1 - T) * a.size, T * a.sum(), T * a.size]
            u0 = np.sum(a / f[j] - (1 - a) / (1 - f[j]))   # one score per (item, annotator) pair
            u1 = np.sum(a / t[j] - (1 - a) / (1 - t[j]))
            want[4:, j] += [T * (1 - T) * u0**2, T * (1 - T) * u1**2]
            # The cavity: P(Y_i = 1) from the other annotators' labels of item i only (all of j's repeats removed).
            o = r & (ann != j)
            c1 = np.prod(np.where(lab[o] == 1, t[ann[o]], 1 - t[ann[o]]))
            c0 = np.prod(np.where(lab[o] == 1, f[ann[o]], 1 - f[ann[o]]))
            pairs.append((j, a.sum(), a.size - a.sum(), p[0] * c1 / (p[0] * c1 + (1 - p[0]) * c0), 1.0))
    np.testing.assert_allclose(np.stack(got[:6]), want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.stack(got[6], axis=1), np.array(pairs, float), rtol=1e-12, atol=1e-14)
    # Only some annotators' pairs (soft_counts keeps those under GRID_LABELS): the same rows, the others dropped.
    from noisycal_bayes.models.em_result import cavity_pairs

    some = cavity_pairs(inp, f, t, p, annotators=np.array([True, False, True]))
    want_some = np.array([r for r in pairs if r[0] != 1], float)
    np.testing.assert_allclose(np.stack(some, axis=1), want_some, rtol=1e-12, atol=1e-14)
    assert cavity_pairs(inp, f, t, p, annotators=np.zeros(3, bool)).q.size == 0


def test_sparse_k_class_em_converges_on_a_cf_shaped_crowd_within_budget():
    # A crowd shaped like crowds/cf (K = 5, many annotators with few labels each: 200 annotators, 6 labels per
    # item, 9 labels per annotator on average): the sparse path's K-class EM (plain for PLAIN_STEPS iterations, then
    # SQUAREM cycles) stops by the reference rule on every start, and the selected start within 150 iterations
    # (seeds 0-2 take 92, 16 and 102); more would mean the acceleration or the stopping rule regressed.
    from noisycal_bayes import fit_em_multiclass
    from noisycal_bayes.simulate import simulate_multiclass
    from noisycal_bayes.warnings import ConvergenceWarning

    sim = simulate_multiclass(300, 200, 5, accuracy=0.7, labels_per_item=6, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallGapWarning)   # annotators with 9 labels: near-singular rows expected
        warnings.simplefilter("error", ConvergenceWarning)
        fit = fit_em_multiclass(sim, model="dawid_skene")
    assert fit.path == "sparse" and fit.converged and fit.n_iter <= 150
