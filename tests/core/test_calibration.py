"""Tests for noisycal_bayes/core/calibration.py: bin sufficient statistics, ECE / SMECE / NC-ECE."""
import jax
import numpy as np
import pytest

from noisycal_bayes.core import (bin_stats, bin_table, binned_abs_residual, ece_from_labels, nc_ece_from_stats, pad_bin_stats,
                                 x64)
from noisycal_bayes.data import bin_index

N_BINS = 5
EDGES = np.arange(N_BINS + 1) / N_BINS


def _design(seed=0, n=200, j=4, p_missing=0.35):
    rng = np.random.default_rng(seed)
    z = rng.random(n)
    labels = rng.integers(0, 2, size=(n, j))
    labels[rng.random((n, j)) < p_missing] = -1
    labels[np.arange(n), rng.integers(0, j, n)] = rng.integers(0, 2, n)
    fpr = rng.uniform(0.0, 0.3, j)
    gap = rng.uniform(0.3, 0.7, j)
    return labels, z, fpr, gap


def _direct_nc_ece(labels, z, fpr, gap, weights, n_bins=N_BINS):
    """Independent NC-ECE: per-item corrected residuals with per-item renormalised weights.

    ``weights`` is a rule name or an explicit vector. For "iv", mu is the mean over items of the equally
    weighted corrected label and sigma_j^2 follows DESIGN §3 (mu clipped, variance floored).
    """
    n, j = labels.shape

    def ytilde(w):
        out = np.empty(n)
        for i in range(n):
            seen = [k for k in range(j) if labels[i, k] >= 0]
            tot = sum(w[k] for k in seen)
            out[i] = sum(w[k] / tot * (labels[i, k] - fpr[k]) / gap[k] for k in seen)
        return out

    if isinstance(weights, str):
        if weights == "iv":
            mu = min(max(ytilde(np.ones(j)).mean(), 1e-4), 1 - 1e-4)
            b = fpr + gap
            var = np.maximum((mu * b * (1 - b) + (1 - mu) * fpr * (1 - fpr)) / gap ** 2, 1e-8)
            w = 1 / var
        else:
            w = {"equal": np.ones(j), "gap": gap, "squared_gap": gap ** 2}[weights]
    else:
        w = np.asarray(weights, dtype=float)
    w = w / w.sum()
    resid = ytilde(w) - z
    k = np.minimum(np.floor(z * n_bins), n_bins - 1).astype(int)
    total = 0.0
    for b in range(n_bins):
        inside = k == b
        if inside.any():
            total += inside.sum() / n * abs(resid[inside].mean())
    return total


def _stats(labels, z, item_weights=None):
    return bin_stats(labels, z, bin_index(z, EDGES), N_BINS, item_weights)


def test_bin_stats_rows_match_direct_sums():
    labels, z, _, _ = _design(1)
    st = _stats(labels, z)
    idx = bin_index(z, EDGES)
    obs = labels >= 0
    assert st.count.sum() == len(z) and st.n_bins == N_BINS
    seen = set()
    for r in range(st.bin.size):
        members = (idx == st.bin[r]) & np.all(obs == st.mask[r], axis=1)
        seen.add((int(st.bin[r]), tuple(st.mask[r])))
        assert st.count[r] == members.sum() > 0
        np.testing.assert_allclose(st.score_sum[r], z[members].sum())
        np.testing.assert_array_equal(st.label_sum[r], (labels[members] == 1).sum(0))
    assert len(seen) == st.bin.size  # rows are distinct (bin, mask) keys


@pytest.mark.parametrize("weights", ["iv", "equal", "gap", "squared_gap", "explicit"])
@pytest.mark.parametrize("seed", [2, 3])
def test_nc_ece_from_stats_matches_direct_per_item_formula(weights, seed):
    labels, z, fpr, gap = _design(seed)
    w = np.array([0.1, 0.4, 0.2, 0.3]) if weights == "explicit" else weights
    with x64():
        got = float(nc_ece_from_stats(_stats(labels, z), fpr, gap, w))
    np.testing.assert_allclose(got, _direct_nc_ece(labels, z, fpr, gap, w), rtol=1e-10)


def test_bin_table_per_bin_sums():
    labels, z, fpr, gap = _design(4)
    with x64():
        count, score_sum, corr_sum, w = (np.asarray(a) for a in bin_table(_stats(labels, z), fpr, gap, "gap"))
    idx = bin_index(z, EDGES)
    np.testing.assert_array_equal(count, np.bincount(idx, minlength=N_BINS))
    np.testing.assert_allclose(score_sum, np.bincount(idx, weights=z, minlength=N_BINS))
    np.testing.assert_allclose(w, gap / gap.sum())
    obs = labels >= 0
    W = np.where(obs, w, 0) / np.where(obs, w, 0).sum(1, keepdims=True)
    ytilde = (W * np.where(obs, (labels - fpr) / gap, 0)).sum(1)
    np.testing.assert_allclose(corr_sum, np.bincount(idx, weights=ytilde, minlength=N_BINS), rtol=1e-12)


def test_identity_channel_gives_plain_ece():
    # One annotator, fpr 0, gap 1: NC-ECE is the binned ECE of that annotator's labels.
    rng = np.random.default_rng(5)
    z = rng.random(300)
    y = (rng.random(300) < z ** 2).astype(int)
    with x64():
        nc = float(nc_ece_from_stats(_stats(y[:, None], z), np.zeros(1), np.ones(1), "iv"))
        plain = float(ece_from_labels(z, y.astype(float), bin_index(z, EDGES), N_BINS))
    k = np.minimum(np.floor(z * N_BINS), N_BINS - 1).astype(int)
    by_hand = sum((k == b).mean() * abs((y - z)[k == b].mean()) for b in range(N_BINS) if (k == b).any())
    np.testing.assert_allclose(nc, by_hand, rtol=1e-12)
    np.testing.assert_allclose(plain, by_hand, rtol=1e-12)


def test_smece_on_hard_labels_is_ece_and_binned_abs_residual():
    rng = np.random.default_rng(6)
    z = rng.random(100)
    q = rng.random(100)
    idx = bin_index(z, EDGES)
    with x64():
        soft = float(ece_from_labels(z, q, idx, N_BINS))
        core = float(binned_abs_residual(idx, q - z, N_BINS))
        weighted = float(binned_abs_residual(idx, q - z, N_BINS, np.full(100, 3.0)))
    np.testing.assert_allclose(soft, core, rtol=1e-12)
    np.testing.assert_allclose(weighted, core, rtol=1e-12)  # constant weights cancel


def test_item_weights_equal_repeating_items():
    labels, z, fpr, gap = _design(7, n=60)
    reps = np.random.default_rng(8).integers(0, 4, size=60)  # 0 drops an item
    keep = reps > 0
    repeated = np.repeat(np.arange(60), reps)
    with x64():
        for rule in ("iv", "equal"):
            weighted = float(nc_ece_from_stats(_stats(labels[keep], z[keep], reps[keep].astype(float)), fpr, gap, rule))
            expanded = float(nc_ece_from_stats(_stats(labels[repeated], z[repeated]), fpr, gap, rule))
            np.testing.assert_allclose(weighted, expanded, rtol=1e-12)
        idx = bin_index(z, EDGES)
        r = (labels[:, 0] == 1) - z
        np.testing.assert_allclose(float(binned_abs_residual(idx[keep], r[keep], N_BINS, reps[keep].astype(float))),
                                   float(binned_abs_residual(idx[repeated], r[repeated], N_BINS)), rtol=1e-12)


def test_permuting_items_or_annotators_changes_nothing():
    labels, z, fpr, gap = _design(9)
    rng = np.random.default_rng(10)
    pi, pj = rng.permutation(len(z)), rng.permutation(labels.shape[1])
    with x64():
        base = float(nc_ece_from_stats(_stats(labels, z), fpr, gap, "iv"))
        items = float(nc_ece_from_stats(_stats(labels[pi], z[pi]), fpr, gap, "iv"))
        anns = float(nc_ece_from_stats(_stats(labels[:, pj], z), fpr[pj], gap[pj], "iv"))
    np.testing.assert_allclose(items, base, rtol=1e-12)
    np.testing.assert_allclose(anns, base, rtol=1e-12)


def test_jit_equals_no_jit_and_vmap_equals_loop():
    labels, z, _, _ = _design(11)
    st = _stats(labels, z)
    rng = np.random.default_rng(12)
    fpr = rng.uniform(0.0, 0.3, (8, 4))
    gap = rng.uniform(0.3, 0.7, (8, 4))
    with x64():
        f = lambda a, d: nc_ece_from_stats(st, a, d, "iv")  # noqa: E731
        loop = np.array([float(f(a, d)) for a, d in zip(fpr, gap)])
        jitted = np.array([float(jax.jit(f)(a, d)) for a, d in zip(fpr, gap)])
        batched = np.asarray(jax.jit(jax.vmap(f))(fpr, gap))
    direct = np.array([_direct_nc_ece(labels, z, a, d, "iv") for a, d in zip(fpr[:2], gap[:2])])
    np.testing.assert_allclose(loop[:2], direct, rtol=1e-10)
    np.testing.assert_allclose(jitted, loop, rtol=1e-12)
    np.testing.assert_allclose(batched, loop, rtol=1e-12)


def test_vmap_over_bootstrap_item_weights():
    # Bayesian-bootstrap use: one bin_stats per weight draw equals the per-item weighted formula.
    labels, z, fpr, gap = _design(13, n=80, p_missing=0.0)
    rng = np.random.default_rng(14)
    draws = rng.dirichlet(np.ones(80), size=3) * 80
    idx = bin_index(z, EDGES)
    with x64():
        for w in draws:
            got = float(nc_ece_from_stats(_stats(labels, z, w), fpr, gap, "equal"))
            resid = ((labels - fpr) / gap).mean(1) - z  # no missing: equal weights are the plain mean
            sums = np.bincount(idx, weights=w * resid, minlength=N_BINS)
            np.testing.assert_allclose(got, np.abs(sums).sum() / w.sum(), rtol=1e-12)


def test_nc_ece_on_numpy_inputs_is_one_program_per_padded_shape():
    """Called on NumPy statistics, NC-ECE runs one jitted program (not one compile per operation): a second data set
    padded to the same number of rows reuses it, and its value is that of the same computation traced inside an
    outer jit (to rounding: 1e-12)."""
    from noisycal_bayes.core.calibration import _nc_ece

    rng = np.random.default_rng(3)
    values = []
    for n in (300, 500):
        labels = rng.integers(-1, 2, size=(n, 3))
        labels[:, 0] = rng.integers(0, 2, size=n)  # every item labelled at least once
        scores = rng.uniform(size=n)
        stats = pad_bin_stats(bin_stats(labels, scores, bin_index(scores, EDGES), N_BINS), 64)
        fpr, gap = np.array([0.1, 0.2, 0.15]), np.array([0.7, 0.6, 0.5])
        with x64():
            eager = float(nc_ece_from_stats(stats, fpr, gap))
            traced = float(jax.jit(lambda f, g: nc_ece_from_stats(stats, f, g))(fpr, gap))
        values.append(eager)
        np.testing.assert_allclose(eager, traced, rtol=1e-12)
        if n == 300:
            compiled = _nc_ece.jitted._cache_size()
    assert _nc_ece.jitted._cache_size() == compiled
    assert values[0] != values[1]
