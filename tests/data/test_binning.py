"""Tests for noisycal_bayes/data/binning.py: equal-width / equal-mass / explicit bins and score groups."""
import numpy as np
import pytest

from noisycal_bayes import Binning
from noisycal_bayes.data import as_binning, bin_index, resolve_groups


def test_equal_width_edges_are_exact_decimals():
    # k / n is the nearest double to the decimal edge; np.linspace gives 0.30000000000000004 for 3/10.
    edges = Binning.equal_width(10).edges_for()
    assert edges.tolist() == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert Binning.equal_width(4).edges_for([0.2]).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_bin_index_half_open_and_last_bin_includes_one():
    edges = Binning.equal_width(10).edges_for()
    z = np.array([0.0, 0.05, 0.1, 0.3, 0.6, 0.7, 0.999999, 1.0])
    # [e_k, e_{k+1}): a score on an inner edge belongs to the bin to its right; 1.0 to the last bin.
    np.testing.assert_array_equal(bin_index(z, edges), [0, 0, 1, 3, 6, 7, 9, 9])
    np.testing.assert_array_equal(Binning.equal_width(10).assign(z), [0, 0, 1, 3, 6, 7, 9, 9])


def test_bin_index_against_floor_rule_on_random_scores():
    # Independent route: for equal-width bins, bin = min(floor(n z), n - 1) away from the edges.
    rng = np.random.default_rng(0)
    z = rng.random(5000)
    for n in (1, 3, 7, 10, 15):
        expected = np.minimum(np.floor(n * z), n - 1).astype(int)
        np.testing.assert_array_equal(Binning.equal_width(n).assign(z), expected)


def test_equal_width_edges_on_every_multiple_of_one_over_n():
    for n in (3, 7, 10, 20, 25):
        edges = Binning.equal_width(n).edges_for()
        np.testing.assert_array_equal(bin_index(edges, edges), np.minimum(np.arange(n + 1), n - 1))


def test_from_edges():
    b = Binning.from_edges([0, 0.2, 0.5, 1])
    assert b.n_bins == 3 and b.kind == "edges"
    np.testing.assert_array_equal(b.assign([0.0, 0.19, 0.2, 0.5, 0.99, 1.0]), [0, 0, 1, 2, 2, 2])


@pytest.mark.parametrize("edges,pattern", [
    ([0.0, 0.5, 0.9], "must start at 0 and end at 1; got first 0.0 and last 0.9"),
    ([0.1, 0.5, 1.0], "must start at 0 and end at 1; got first 0.1"),
    ([0.0, 0.6, 0.4, 1.0], r"strictly increasing; got \[0\.0, 0\.6, 0\.4, 1\.0\]"),
    ([0.0, 0.5, 0.5, 1.0], "strictly increasing"),
    ([0.0], "at least 2 values"),
    ([0.0, np.nan, 1.0], "strictly increasing|must start at 0"),
])
def test_from_edges_rejects_bad_edges(edges, pattern):
    with pytest.raises(ValueError, match=pattern):
        Binning.from_edges(edges)


def test_equal_mass_bins_hold_equal_counts():
    rng = np.random.default_rng(1)
    z = rng.beta(2, 5, size=1000)
    b = Binning.equal_mass(4)
    counts = np.bincount(b.assign(z), minlength=4)
    # Continuous scores, n divisible by 4: quantile edges split exactly or within one item of a quarter.
    assert counts.sum() == 1000
    assert np.all(np.abs(counts - 250) <= 1)
    edges = b.edges_for(z)
    assert edges[0] == 0.0 and edges[-1] == 1.0 and np.all(np.diff(edges) > 0)


def test_equal_mass_ties_merge_bins_without_empty_bins():
    # 60% of the scores are tied at 0.5: the 2nd and 3rd quintile edges coincide and are merged.
    z = np.r_[np.full(60, 0.5), np.linspace(0.01, 0.3, 20), np.linspace(0.7, 0.99, 20)]
    edges = Binning.equal_mass(5).edges_for(z)
    assert np.all(np.diff(edges) > 0)
    idx = bin_index(z, edges)
    n_bins = edges.size - 1
    assert n_bins < 5
    assert np.all(np.bincount(idx, minlength=n_bins) > 0)
    # Tied scores all land in one bin.
    assert np.unique(idx[z == 0.5]).size == 1


def test_equal_mass_needs_valid_scores():
    with pytest.raises(ValueError, match="need the scores"):
        Binning.equal_mass(3).edges_for()
    with pytest.raises(ValueError, match=r"`scores` must be finite; got NaN or inf at items \[1\]"):
        Binning.equal_mass(3).edges_for([0.1, np.nan, 0.3])


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "10"])
def test_bad_bin_counts(bad):
    with pytest.raises(ValueError):
        Binning.equal_width(bad)
    with pytest.raises(ValueError, match="`bins` must be an int"):
        as_binning(bad if not isinstance(bad, int) or isinstance(bad, bool) else 2.5)


def test_as_binning():
    assert as_binning(5) == Binning.equal_width(5)
    b = Binning.equal_mass(3)
    assert as_binning(b) is b
    with pytest.raises(ValueError, match="`kind` must be one of"):
        Binning("quantile", 3)


def test_resolve_groups_from_int_binning_and_array():
    rng = np.random.default_rng(2)
    z = rng.random(300)
    idx, g = resolve_groups(z, Binning.equal_mass(3), 300)
    assert g == 3 and idx.dtype == np.int32
    np.testing.assert_array_equal(np.bincount(idx), [100, 100, 100])
    # Groups are ordered by score.
    assert z[idx == 0].max() < z[idx == 1].min() < z[idx == 1].max() < z[idx == 2].min()

    idx, g = resolve_groups(z, Binning.from_edges([0, 0.5, 1]), 300)
    np.testing.assert_array_equal(idx, (z >= 0.5).astype(int))

    idx, g = resolve_groups(None, np.array([7, 3, 7, 9]), 4)
    assert g == 3
    np.testing.assert_array_equal(idx, [1, 0, 1, 2])
    idx, g = resolve_groups(None, np.array([1.0, 0.0]), 2)
    np.testing.assert_array_equal(idx, [1, 0])


def test_resolve_groups_drops_empty_score_groups():
    z = np.array([0.1, 0.15, 0.9])
    idx, g = resolve_groups(z, Binning.equal_width(4), 3)
    assert g == 2
    np.testing.assert_array_equal(idx, [0, 0, 1])


def test_resolve_groups_errors():
    with pytest.raises(ValueError, match="score groups need scores"):
        resolve_groups(None, Binning.equal_mass(2), 5)
    with pytest.raises(ValueError, match=r"must have shape \(5,\), one group per item; got \(4,\)"):
        resolve_groups(None, np.zeros(4, int), 5)
    with pytest.raises(ValueError, match="integer group labels"):
        resolve_groups(None, np.array([0.5, 1.0]), 2)


def test_equal_mass_never_empty_on_tie_heavy_scores():
    # Scores on a coarse grid (many ties) for many seeds and bin counts: every bin must hold items,
    # and merging may only reduce the number of bins.
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        z = rng.integers(0, 6, size=n) / 5.0
        n_bins = int(rng.integers(1, 8))
        edges = Binning.equal_mass(n_bins).edges_for(z)
        idx = bin_index(z, edges)
        assert np.all(np.diff(edges) > 0)
        assert np.all(np.bincount(idx, minlength=edges.size - 1) > 0), (z, n_bins, edges)
        assert edges.size - 1 <= n_bins


# ------------------------------------------------------------------ one meaning of an int (issue 15, item 7)
def test_an_int_means_equal_width_for_bins_and_groups_alike():
    import warnings as _w

    from noisycal_bayes.data import DEFAULT_GROUPS, as_binning, resolve_groups
    from noisycal_bayes.warnings import GroupsMeaningWarning

    z = np.random.default_rng(3).beta(1, 5, 400)  # skewed: equal width and equal mass differ here
    assert as_binning(4) == Binning.equal_width(4)
    with pytest.warns(GroupsMeaningWarning, match=r"Binning.equal_mass\(4\)"):
        idx_int, n_int = resolve_groups(z, 4, z.size)
    idx_w, n_w = resolve_groups(z, Binning.equal_width(4), z.size)
    assert n_int == n_w and np.array_equal(idx_int, idx_w)
    with _w.catch_warnings():
        _w.simplefilter("error")  # a Binning never warns
        idx_m, n_m = resolve_groups(z, DEFAULT_GROUPS, z.size)
    assert DEFAULT_GROUPS == Binning.equal_mass(5) and n_m == 5
    assert not np.array_equal(idx_m, idx_w)  # the two rules really differ on these scores


def test_binning_repr_is_the_constructor_call():
    assert repr(Binning.equal_mass(5)) == "Binning.equal_mass(5)"
    assert repr(Binning.equal_width(10)) == "Binning.equal_width(10)"
    assert eval(repr(Binning.from_edges([0, 0.3, 1])), {"Binning": Binning}) == Binning.from_edges([0, 0.3, 1])


def test_fitters_default_to_equal_mass_groups_and_read_an_int_as_equal_width():
    from noisycal_bayes import fit_em
    from noisycal_bayes.simulate import simulate_annotations
    from noisycal_bayes.warnings import GroupsMeaningWarning

    sim = simulate_annotations(1500, fpr=[0.1, 0.2, 0.15], tpr=[0.85, 0.8, 0.9], score_beta=(1.0, 4.0), seed=2)
    default = fit_em(sim.data, n_starts=3)
    assert default.groups.spec == Binning.equal_mass(5)
    with pytest.warns(GroupsMeaningWarning):
        by_int = fit_em(sim.data, groups=5, n_starts=3)
    by_width = fit_em(sim.data, groups=Binning.equal_width(5), n_starts=3)
    np.testing.assert_array_equal(by_int.groups.index, by_width.groups.index)
    np.testing.assert_allclose(by_int.channel.fpr, by_width.channel.fpr, rtol=0, atol=0)
