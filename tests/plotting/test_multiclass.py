"""Tests of the K-class figures (plotting/channels.py, plotting/reliability.py): they build off screen and show what
they are given."""
from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from noisycal_bayes.plotting import plot_confusion_matrices, plot_top_label_reliability

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _confusion(n_annotators, k, seed=0):
    """Row-stochastic, diagonal-dominant matrices (Dirichlet rows plus a diagonal bump), shape (J, K, K)."""
    rng = np.random.default_rng(seed)
    conf = rng.dirichlet(np.ones(k), size=(n_annotators, k)) + 3 * np.eye(k)
    return conf / conf.sum(axis=2, keepdims=True)


def _panels(fig):
    """The heat-map axes (those holding an image), without the colour bar."""
    return [a for a in fig.axes if a.images and a.get_visible() and a.get_label() != "<colorbar>"]


def test_confusion_panels_images_and_annotations():
    conf = _confusion(3, 4)
    fig = plot_confusion_matrices(conf, classes=["a", "b", "c", "d"], annotators=["x", "y", "z"], title="t")
    assert isinstance(fig, Figure)
    panels = _panels(fig)
    assert [a.get_title() for a in panels] == ["x", "y", "z"]
    for j, a in enumerate(panels):
        np.testing.assert_array_equal(a.images[0].get_array(), conf[j])  # each panel shows its own matrix
        texts = [t.get_text() for t in a.texts]
        assert len(texts) == 16 and texts[0] == f"{conf[j, 0, 0]:.2f}"
        assert [t.get_text() for t in a.get_xticklabels()] == ["a", "b", "c", "d"]
    assert fig._suptitle.get_text() == "t"


def test_confusion_truth_in_brackets_and_no_numbers_beyond_ten_classes():
    conf = _confusion(2, 3)
    truth = _confusion(2, 3, seed=1)
    fig = plot_confusion_matrices(conf, truth=truth)
    first = _panels(fig)[0].texts[0].get_text()
    assert first == f"{conf[0, 0, 0]:.2f}\n({truth[0, 0, 0]:.2f})"
    big = plot_confusion_matrices(_confusion(5, 12))  # 12 classes: colours only; 5 panels on two rows
    panels = _panels(big)
    assert len(panels) == 5 and all(not a.texts for a in panels)
    assert [a.get_title() for a in panels] == [f"annotator {j}" for j in range(5)]


def test_confusion_into_given_axes_and_single_matrix():
    fig = Figure()
    axes = fig.subplots(1, 2)
    assert plot_confusion_matrices(_confusion(2, 3), ax=axes) is fig
    assert all(a.images for a in axes)
    one = plot_confusion_matrices(_confusion(1, 3)[0])  # a (K, K) matrix is one annotator
    assert len(_panels(one)) == 1


def test_confusion_bad_input_named():
    with pytest.raises(ValueError, match=r"shape \(n_annotators, K, K\) with K >= 2; got \(2, 3, 4\)"):
        plot_confusion_matrices(np.full((2, 3, 4), 0.25))
    bad = _confusion(2, 3)
    bad[1, 2, 0] = 1.5
    with pytest.raises(ValueError, match=r"\[0, 1\]; not so at \(annotator, true class, label\) \[\(1, 2, 0\)\]"):
        plot_confusion_matrices(bad)
    with pytest.raises(ValueError, match=r"`truth` must have the shape of `confusion` \(2, 3, 3\)"):
        plot_confusion_matrices(_confusion(2, 3), truth=_confusion(3, 3))
    with pytest.raises(ValueError, match=r"`classes` must name the 3 classes"):
        plot_confusion_matrices(_confusion(2, 3), classes=["a", "b"])
    with pytest.raises(ValueError, match=r"`ax` must hold 2 Axes"):
        plot_confusion_matrices(_confusion(2, 3), ax=Figure().subplots(1, 3))


def _bins():
    """Five equal-width bins on [0, 1]; the first is empty (top-label confidences of 3 classes exceed 1/3)."""
    means = np.array([0.1, 0.35, 0.5, 0.72, 0.93])
    freq = np.array([np.nan, 0.3, 0.45, 0.7, 0.96])
    return means, freq, freq - 0.05, freq + 0.05, np.array([0, 12, 40, 90, 400])


def test_top_label_reliability_curves_and_histogram(tmp_path):
    means, freq, lo, hi, counts = _bins()
    naive = {"majority vote": [np.nan, 0.2, 0.35, 0.6, 0.88], "vote distribution": [np.nan, 0.25, 0.4, 0.62, 0.8]}
    fig = plot_top_label_reliability(means, freq, lo, hi, counts, naive=naive, level=0.9)
    main, hist = fig.axes
    labels = main.get_legend_handles_labels()[1]
    assert labels == ["perfect calibration", "naive: majority vote", "naive: vote distribution",
                      "noise-corrected (90% interval)"]
    lines = {line.get_label(): line for line in main.lines}
    # The empty first bin is not drawn: four points per curve, at the non-empty bins' mean confidences.
    np.testing.assert_array_equal(lines["naive: majority vote"].get_xdata(), means[1:])
    np.testing.assert_array_equal(lines["naive: majority vote"].get_ydata(), naive["majority vote"][1:])
    np.testing.assert_array_equal([p.get_height() for p in hist.patches], counts)
    np.testing.assert_allclose([p.get_x() for p in hist.patches], np.linspace(0, 0.8, 5))
    assert main.get_ylabel() == "accuracy of the predicted class"
    assert hist.get_xlabel().startswith("confidence")
    fig.savefig(tmp_path / "r.png", dpi=40)
    assert (tmp_path / "r.png").read_bytes()[:8] == PNG_MAGIC


def test_top_label_reliability_into_axes_without_interval():
    means, freq, _, _, counts = _bins()
    fig = Figure()
    ax = fig.subplots()
    assert plot_top_label_reliability(means, freq, None, None, counts, ax=ax, title="mine") is fig
    assert ax.get_title() == "mine" and ax.get_xlabel().startswith("confidence")
    corrected = [line for line in ax.lines if line.get_label() == "noise-corrected"]
    np.testing.assert_array_equal(corrected[0].get_ydata(), freq[1:])


def test_top_label_reliability_bad_input_named():
    means, freq, lo, hi, counts = _bins()
    with pytest.raises(ValueError, match=r"`counts` must have shape \(5,\)"):
        plot_top_label_reliability(means, freq, lo, hi, counts[:4])
    with pytest.raises(ValueError, match=r"both `lower` and `upper`, or neither"):
        plot_top_label_reliability(means, freq, lo, None, counts)
    with pytest.raises(ValueError, match=r"`edges` must have shape \(6,\)"):
        plot_top_label_reliability(means, freq, lo, hi, counts, edges=[0, 1])
    with pytest.raises(ValueError, match=r"`naive\['mv'\]` must have shape \(5,\)"):
        plot_top_label_reliability(means, freq, lo, hi, counts, naive={"mv": [0.5]})
    with pytest.raises(ValueError, match=r"`lower` and `upper` must have shape \(5,\)"):
        plot_top_label_reliability(means, freq, lo[:2], hi, counts)
