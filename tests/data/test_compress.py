"""Tests for noisycal_bayes/data/compress.py: (group, response pattern) counts."""
import numpy as np
import pytest

from noisycal_bayes.data import all_patterns, compress_patterns, grid_patterns, pad_patterns, padded_size


def _random_labels(rng, n, j, p_missing=0.3):
    labels = rng.integers(0, 2, size=(n, j)).astype(np.int8)
    labels[rng.random((n, j)) < p_missing] = -1
    return labels


@pytest.mark.parametrize("j", [1, 3, 8, 34, 40])  # 34..36: no group code; > 36: row-wise unique
def test_counts_sum_to_n_and_inverse_reconstructs_rows(j):
    rng = np.random.default_rng(j)
    n = 500
    labels = _random_labels(rng, n, j)
    group = rng.integers(0, 4, size=n)
    pc = compress_patterns(labels, group, 4)
    assert pc.counts.sum() == n
    assert pc.n_groups == 4
    np.testing.assert_array_equal(pc.patterns[pc.inverse], labels)
    np.testing.assert_array_equal(pc.group[pc.inverse], group)
    # Rows are distinct (group, pattern) pairs, and each count is the number of items mapped to it.
    keys = {(int(g), tuple(p)) for g, p in zip(pc.group, pc.patterns.tolist())}
    assert len(keys) == pc.patterns.shape[0]
    np.testing.assert_array_equal(pc.counts, np.bincount(pc.inverse, minlength=pc.patterns.shape[0]))


def test_matches_a_dictionary_count():
    # Independent route: count (group, pattern) tuples with a dict.
    rng = np.random.default_rng(11)
    labels = _random_labels(rng, 300, 4, 0.4)
    group = rng.integers(0, 3, size=300)
    expected = {}
    for g, row in zip(group, labels.tolist()):
        expected[(int(g), tuple(row))] = expected.get((int(g), tuple(row)), 0) + 1
    pc = compress_patterns(labels, group, 3)
    got = {(int(g), tuple(p)): c for g, p, c in zip(pc.group, pc.patterns.tolist(), pc.counts)}
    assert got == expected


def test_default_single_group_and_inferred_group_count():
    labels = np.array([[1, 0], [1, 0], [0, -1], [1, 0]])
    pc = compress_patterns(labels)
    assert pc.n_groups == 1
    assert sorted(zip(pc.counts.tolist(), map(tuple, pc.patterns.tolist()))) == [(1.0, (0, -1)), (3.0, (1, 0))]
    pc = compress_patterns(labels, np.array([0, 2, 2, 0]))
    assert pc.n_groups == 3
    assert pc.counts.sum() == 4


def test_input_untouched():
    labels = np.array([[1, 0], [0, -1]], dtype=np.int8)
    copy = labels.copy()
    compress_patterns(labels)
    np.testing.assert_array_equal(labels, copy)


def test_pad_patterns_adds_zero_count_missing_rows():
    rng = np.random.default_rng(5)
    pc = compress_patterns(_random_labels(rng, 50, 3), rng.integers(0, 2, 50), 2)
    p = pc.patterns.shape[0]
    padded = pad_patterns(pc, p + 7)
    assert padded.patterns.shape == (p + 7, 3)
    np.testing.assert_array_equal(padded.patterns[:p], pc.patterns)
    assert np.all(padded.patterns[p:] == -1)
    np.testing.assert_array_equal(padded.counts[p:], 0)
    assert padded.counts.sum() == 50
    assert padded.group[p:].min() >= 0 and padded.group[p:].max() < pc.n_groups
    np.testing.assert_array_equal(padded.inverse, pc.inverse)
    with pytest.raises(ValueError, match=f"cannot pad {p} patterns down to {p - 1}"):
        pad_patterns(pc, p - 1)


def test_padded_size():
    # Small designs: every possible (group, pattern) row.
    assert padded_size(5, 2, 3) == 2 * 27
    assert padded_size(10, 1, 7) == 3 ** 7
    # Large designs: next power of two at or above the number of patterns.
    assert padded_size(5000, 1, 8) == 8192
    assert padded_size(4096, 1, 20) == 4096
    assert padded_size(4097, 1, 20) == 8192
    for n_patterns in (1, 3, 100, 1000):
        size = padded_size(n_patterns, 3, 9)
        assert size >= n_patterns


def test_all_patterns_is_itertools_product_order():
    import itertools

    for j in (1, 2, 4):
        expected = np.array(list(itertools.product([-1, 0, 1], repeat=j)), dtype=np.int8)
        np.testing.assert_array_equal(all_patterns(j), expected)


def test_grid_patterns_keeps_every_item_on_its_own_pattern_and_group():
    rng = np.random.default_rng(5)
    labels = _random_labels(rng, 400, 3)
    group = rng.integers(0, 4, size=400)
    pc = pad_patterns(compress_patterns(labels, group, 4), 108)
    grid = grid_patterns(pc)
    assert grid.patterns.shape == (4 * 27, 3)
    np.testing.assert_array_equal(grid.patterns[grid.inverse], labels)
    np.testing.assert_array_equal(grid.group[grid.inverse], group)
    np.testing.assert_array_equal(grid.counts, np.bincount(grid.inverse, minlength=108))
    # Row g * 27 + k is pattern k of all_patterns in group g.
    np.testing.assert_array_equal(grid.patterns, np.tile(all_patterns(3), (4, 1)))
    np.testing.assert_array_equal(grid.group, np.repeat(np.arange(4), 27))


def test_pattern_keys_order_rows_like_compress_and_all_patterns():
    # One key for every (group, pattern) row: the row order of compress_patterns and of all_patterns.
    from noisycal_bayes.data.compress import pattern_keys

    np.testing.assert_array_equal(pattern_keys(all_patterns(3)), np.arange(27))
    rng = np.random.default_rng(2)
    labels = _random_labels(rng, 500, 4)
    group = rng.integers(0, 3, 500)
    pc = compress_patterns(labels, group, 3)
    keys = pattern_keys(pc.patterns, pc.group)
    assert np.all(np.diff(keys) > 0)  # distinct and increasing
    np.testing.assert_array_equal(keys // 3**4, pc.group)
    np.testing.assert_array_equal(pattern_keys(labels, group)[np.argsort(pc.inverse, kind="stable")],
                                  np.repeat(keys, pc.counts.astype(int)))
