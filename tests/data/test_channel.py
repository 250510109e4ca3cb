"""Tests for noisycal_bayes/data/channel.py: the Channel container."""
import numpy as np
import pytest

from noisycal_bayes import Channel


def test_gap_is_tpr_minus_fpr():
    ch = Channel([0.1, 0.25, 0.0], [0.9, 0.5, 1.0])
    np.testing.assert_allclose(ch.gap, [0.8, 0.25, 1.0])
    assert ch.n_annotators == 3
    assert ch.annotator_ids == (0, 1, 2)


def test_scalar_rates_give_one_annotator():
    ch = Channel(0.2, 0.7)
    assert ch.n_annotators == 1
    np.testing.assert_allclose(ch.gap, [0.5])


def test_identity():
    ch = Channel.identity(4)
    np.testing.assert_array_equal(ch.fpr, np.zeros(4))
    np.testing.assert_array_equal(ch.tpr, np.ones(4))
    np.testing.assert_array_equal(ch.gap, np.ones(4))


def test_flipped_exchanges_labels_and_keeps_orientation():
    # Y' = 1 - Y, A' = 1 - A: P(A'=1 | Y'=0) = P(A=0 | Y=1) = 1 - tpr and P(A'=1 | Y'=1) = 1 - fpr.
    ch = Channel([0.1, 0.3], [0.8, 0.6], annotator_ids=["x", "y"])
    f = ch.flipped()
    np.testing.assert_allclose(f.fpr, [0.2, 0.4])
    np.testing.assert_allclose(f.tpr, [0.9, 0.7])
    np.testing.assert_allclose(f.gap, ch.gap)
    assert f.annotator_ids == ("x", "y")
    back = f.flipped()
    np.testing.assert_allclose(back.fpr, ch.fpr)
    np.testing.assert_allclose(back.tpr, ch.tpr)


def test_to_frame():
    frame = Channel([0.1, 0.2], [0.9, 0.7], annotator_ids=["a", "b"]).to_frame()
    assert list(frame.columns) == ["annotator", "fpr", "tpr", "gap"]
    assert frame["annotator"].tolist() == ["a", "b"]
    np.testing.assert_allclose(frame["gap"], [0.8, 0.5])


@pytest.mark.parametrize("fpr,tpr,bad", [
    ([0.1, 0.6, 0.2], [0.9, 0.4, 0.8], r"\[1\]"),          # tpr < fpr: the opposite class
    ([0.1, 0.5, 0.3], [0.9, 0.5, 0.3], r"\[1, 2\]"),       # tpr == fpr: no information
])
def test_refuses_tpr_not_above_fpr_and_names_annotators(fpr, tpr, bad):
    with pytest.raises(ValueError, match=r"requires tpr > fpr \(gap > 0\); annotators " + bad + " have tpr <= fpr"):
        Channel(fpr, tpr)


@pytest.mark.parametrize("fpr,tpr,pattern", [
    ([0.1, -0.1], [0.9, 0.8], r"`fpr` must lie in \[0, 1\]; got \[-0\.1\] for annotators \[1\]"),
    ([0.1, 0.2], [1.2, 0.8], r"`tpr` must lie in \[0, 1\]; got \[1\.2\] for annotators \[0\]"),
    ([np.nan, 0.2], [0.9, 0.8], r"`fpr` must lie in \[0, 1\]; got \[nan\] for annotators \[0\]"),
    ([0.1, 0.2], [0.9, np.inf], r"`tpr` must lie in \[0, 1\]; got \[inf\] for annotators \[1\]"),
])
def test_rates_outside_unit_interval(fpr, tpr, pattern):
    with pytest.raises(ValueError, match=pattern):
        Channel(fpr, tpr)


def test_shape_and_id_mismatches():
    with pytest.raises(ValueError, match=r"1-d of equal length; got shapes \(2,\) and \(3,\)"):
        Channel([0.1, 0.2], [0.9, 0.8, 0.7])
    with pytest.raises(ValueError, match="`annotator_ids` has 1 names for 2 annotators"):
        Channel([0.1, 0.2], [0.9, 0.8], annotator_ids=["a"])


def test_caller_arrays_untouched_and_channel_read_only():
    fpr, tpr = np.array([0.1, 0.2]), np.array([0.9, 0.8])
    ch = Channel(fpr, tpr)
    fpr[0] = 0.5
    assert ch.fpr[0] == 0.1
    assert fpr.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        ch.tpr[0] = 0.3
    with pytest.raises(AttributeError):
        ch.fpr = np.zeros(2)


def test_channel_crowd_orientation_and_flipped():
    with pytest.raises(ValueError, match="orientation='crowd'"):
        Channel([0.1, 0.7], [0.9, 0.2])
    ch = Channel([0.1, 0.7], [0.9, 0.2], orientation="crowd")
    np.testing.assert_allclose(ch.gap, [0.8, -0.5])
    np.testing.assert_allclose(ch.flipped().gap, ch.gap)  # renaming both classes keeps every gap
    np.testing.assert_allclose(ch.exchanged().gap, -ch.gap)  # the mirror solution: Y <-> 1 - Y only
    assert ch.flipped().orientation == "crowd" and "orientation='crowd'" in repr(ch)
    with pytest.raises(ValueError, match="`orientation` must be"):
        Channel([0.1], [0.9], orientation="any")
