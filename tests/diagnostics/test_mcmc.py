"""Tests for noisycal_bayes/inference/mcmc.py (re-exported by noisycal_bayes.diagnostics): diagnostics table and
the warnings it turns into."""
import warnings

import numpy as np
import pytest

from noisycal_bayes.inference.mcmc import check_mcmc, mcmc_diagnostics
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


# --- Agreement with ArviZ ------------------------------------------------------------------------------------
# mcmc_diagnostics computes R-hat and ESS with its own vectorised NumPy port of ArviZ's algorithms; these tests
# compare it with ArviZ's public functions on the same draws. The two differ only by floating-point rounding
# (FFT batching, summation order, Numba's one-pass variance), far below rtol = 1e-10.
RTOL = 1e-10
TAIL_PROB = (0.05, 0.95)  # ArviZ 0.x's default for method="tail"; ArviZ 1.x's default comes from rcParams


def _arviz_major():
    import arviz as az

    return int(az.__version__.split(".")[0])


def _arviz_table(x):
    """ArviZ's rank R-hat, bulk ESS and tail ESS of each scalar of ``x`` (n_chains, n_draws, k)."""
    import arviz as az
    import xarray as xr

    ds = xr.Dataset({"v": (("chain", "draw", "k"), x)})
    out = (az.rhat(ds), az.ess(ds, method="bulk"), az.ess(ds, method="tail", prob=TAIL_PROB))
    return [np.asarray(o["v"].values, dtype=float) for o in out]


def _our_table(x):
    t = mcmc_diagnostics({"v": x})
    return [t[c].to_numpy(dtype=float) for c in ("r_hat", "ess_bulk", "ess_tail")]


def _ar1(rng, shape, phi):
    """Stationary AR(1) draws along axis 1: x_t = phi x_{t-1} + e_t."""
    e = rng.normal(size=shape)
    x = np.empty(shape)
    x[:, 0] = e[:, 0] / np.sqrt(1 - phi ** 2)
    for t in range(1, shape[1]):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    return x


def _case(name, k, rng):
    if name == "iid":
        return rng.normal(size=(4, 1000, k))
    if name == "ar1":  # strongly autocorrelated: ESS far below the 4000 draws
        return _ar1(rng, (4, 1000, k), 0.95)
    if name == "shifted_chains":  # chain means 0, 1, 2, 3 standard deviations apart: R-hat well above 1.1
        return rng.normal(size=(4, 500, k)) + np.arange(4.0)[:, None, None]
    if name == "antithetic":  # negatively autocorrelated: ESS above the number of draws
        return _ar1(rng, (4, 1000, k), -0.6)
    if name == "ties":  # discrete values: many tied ranks, ties at the quantiles and at the median
        return rng.integers(0, 4, size=(4, 400, k)).astype(float)
    if name == "binary":  # two values: the folded draws are constant (tail R-hat nan, bulk R-hat kept)
        return rng.integers(0, 2, size=(4, 400, k)).astype(float)
    if name == "constant_scalar":  # the last scalar constant, the others normal
        x = rng.normal(size=(4, 300, k))
        x[:, :, -1] = 2.5
        return x
    if name == "one_chain_odd":  # a single chain (R-hat undefined) and an odd draw count (middle draw dropped)
        return rng.normal(size=(1, 333, k))
    if name == "odd_draws":
        return _ar1(rng, (3, 101, k), 0.5)
    if name == "four_draws":  # the fewest draws ArviZ accepts: split chains of 2 draws
        return rng.normal(size=(2, 4, k))
    if name == "three_draws":  # too few: everything nan
        return rng.normal(size=(2, 3, k))
    if name == "nan_and_inf":  # a nan makes a scalar's diagnostics nan; an inf is just the largest value
        x = rng.normal(size=(4, 200, k))
        x[1, 7, 0] = np.nan
        x[2, 9, -1] = np.inf
        return x
    raise ValueError(name)


CASES = ["iid", "ar1", "shifted_chains", "antithetic", "ties", "binary", "constant_scalar", "one_chain_odd",
         "odd_draws", "four_draws", "three_draws", "nan_and_inf"]


@pytest.mark.parametrize("k", [1, 22])
@pytest.mark.parametrize("case", CASES)
def test_rhat_and_ess_match_arviz(case, k):
    x = _case(case, k, np.random.default_rng(CASES.index(case) + 100 * k))
    ours, ref = _our_table(x), _arviz_table(x)
    for col, a, b in zip(("r_hat", "ess_bulk", "ess_tail"), ours, ref):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=0, err_msg=f"{case}, k={k}: {col}")
    r_hat, ess_bulk, ess_tail = ours
    n_total = x.shape[0] * x.shape[1]
    # Each case exercises what it says it does (so a degenerate generator cannot make the test vacuous).
    if case == "iid":
        assert (r_hat < 1.01).all() and (ess_bulk > 0.5 * n_total).all()
    if case == "ar1":
        assert (ess_bulk < 0.1 * n_total).all() and (ess_tail < 0.1 * n_total).all()
    if case == "shifted_chains":
        assert (r_hat > 1.1).all()
    if case == "antithetic":
        assert (ess_bulk > n_total).all()
    if case == "constant_scalar":  # ArviZ: R-hat nan (0/0), ESS = number of split draws
        assert np.isnan(r_hat[-1]) and ess_bulk[-1] == n_total and ess_tail[-1] == n_total
    if case == "one_chain_odd":
        assert np.isnan(r_hat).all() and np.isfinite(ess_bulk).all()
    if case == "three_draws":
        assert np.isnan(np.concatenate(ours)).all()
    if case == "nan_and_inf":
        assert np.isnan([r_hat[0], ess_bulk[0], ess_tail[0]]).all()
        assert k == 1 or np.isfinite(ess_bulk[-1])  # with k = 1 the nan and the inf are in the same scalar


def test_chains_constant_at_different_values_match_arviz_numpy_path():
    """Every chain constant, at different values: the within-chain variance is 0, so R-hat = inf.

    ArviZ 0.x with Numba computes variances in one pass (E x^2 - (E x)^2), which leaves rounding noise of
    either sign instead of 0 here (it returns nan); its NumPy path gives inf, the value compared with.
    """
    import arviz as az

    x = np.repeat(np.arange(4.0)[:, None, None], 50, axis=1).repeat(3, axis=2)
    numba = getattr(az, "Numba", None)
    was_on = bool(numba and numba.numba_flag)
    if was_on:
        numba.disable_numba()
    try:
        ref = _arviz_table(x)
    finally:
        if was_on:
            numba.enable_numba()
    ours = _our_table(x)
    assert np.isinf(ours[0]).all()
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=0)


def test_table_matches_arviz_for_several_variables():
    """A NUTS-like draws dict (22 scalars in 5 variables, with dims and coords): the same rows, in the same
    order, as ArviZ's functions on the equivalent Dataset."""
    import arviz as az
    import xarray as xr

    rng = np.random.default_rng(7)
    draws = {"fpr": _ar1(rng, (4, 1000, 8), 0.7), "tpr": _ar1(rng, (4, 1000, 2, 4), 0.3),
             "prevalence": rng.normal(size=(4, 1000, 4)), "sigma": _ar1(rng, (4, 1000), 0.9),
             "mu": rng.normal(size=(4, 1000))}
    dims = {"fpr": ("annotator",), "tpr": ("group", "bin")}
    coords = {"annotator": [f"a{j}" for j in range(8)], "group": ["g0", "g1"]}
    table = mcmc_diagnostics(draws, dims, coords)
    assert len(table) == 22 and list(table.columns) == ["name", "index", "r_hat", "ess_bulk", "ess_tail"]
    assert list(table.index[:2]) == ["fpr[a0]", "fpr[a1]"] and table.index[8] == "tpr[g0, 0]"
    assert table.loc["tpr[g1, 3]", "index"] == (1, 3) and list(table.index[-2:]) == ["sigma", "mu"]
    ds = xr.Dataset({name: (("chain", "draw") + tuple(f"{name}_{a}" for a in range(arr.ndim - 2)), arr)
                     for name, arr in draws.items()})
    ref = {"r_hat": az.rhat(ds), "ess_bulk": az.ess(ds, method="bulk"),
           "ess_tail": az.ess(ds, method="tail", prob=TAIL_PROB)}
    for col, res in ref.items():
        expected = np.concatenate([np.atleast_1d(np.asarray(res[name].values, dtype=float)).ravel()
                                   for name in draws])
        np.testing.assert_allclose(table[col].to_numpy(dtype=float), expected, rtol=RTOL, atol=0, err_msg=col)


@pytest.mark.skipif(_arviz_major() >= 1, reason="reference is ArviZ 0.x, which folds float32 draws in float32 "
                                                  "(ArviZ 1.x differs at ~1e-7 relative)")
def test_float32_draws_match_arviz():
    """float32 draws (JAX without x64) keep their precision for folding (|x - median|), as in ArviZ, so ties
    after rounding are the same; mixed with a float64 variable in one call."""
    rng = np.random.default_rng(3)
    x32 = _ar1(rng, (4, 500, 6), 0.5).astype(np.float32)
    x64 = rng.normal(size=(4, 500, 2))
    table = mcmc_diagnostics({"a": x32, "b": x64})
    for name, x in (("a", x32), ("b", x64)):
        ref = _arviz_table(x)
        rows = table[table["name"] == name]
        for col, b in zip(("r_hat", "ess_bulk", "ess_tail"), ref):
            np.testing.assert_allclose(rows[col].to_numpy(dtype=float), b, rtol=RTOL, atol=0, err_msg=col)


def test_draws_without_chain_and_draw_axes_are_rejected():
    with pytest.raises(ValueError, match=r"`draws\['x'\]` must have shape \(n_chains, n_draws, ...\)"):
        mcmc_diagnostics({"x": np.zeros(100)})


def test_diagnostics_keeps_the_public_names():
    import noisycal_bayes.diagnostics as diagnostics

    assert diagnostics.check_mcmc is check_mcmc and diagnostics.mcmc_diagnostics is mcmc_diagnostics
