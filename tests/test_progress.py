"""Progress bars (issue 19, item 5): ``noisycal_bayes/_progress.py`` and the loops that use it.

A bar is written only when asked for *and* the stream is a terminal, and it never changes a result: the same
function run with ``progress_bar=True`` (on a fake terminal, so the bar really runs) and ``progress_bar=False``
returns identical numbers.
"""
from __future__ import annotations

import io
import sys

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes import simulate_annotations
from noisycal_bayes._progress import progress
from noisycal_bayes.diagnostics import gap_sensitivity
from noisycal_bayes.reference import bootstrap_nc_ece, nc_ece_cross_fit


class FakeTerminal(io.StringIO):
    """A text stream that says it is a terminal, so that tqdm draws on it and the test can read the bar."""

    def isatty(self):
        super().isatty()  # raises ValueError once closed, as a real terminal stream does
        return True


class Pipe(io.StringIO):
    """A stream that is explicitly not a terminal (like a log file or a CI pipe)."""

    def isatty(self):
        return False


@pytest.fixture(scope="module")
def sim():
    return simulate_annotations(300, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], curve="overconfident", seed=7)


def test_disabled_returns_the_iterable_and_writes_nothing():
    stream = FakeTerminal()
    items = range(5)
    out = progress(items, enabled=False, desc="x", file=stream)
    assert out is items
    assert list(out) == [0, 1, 2, 3, 4]
    assert stream.getvalue() == ""


@pytest.mark.parametrize("stream", [Pipe(), io.StringIO()], ids=["pipe", "plain StringIO"])
def test_enabled_but_not_a_terminal_writes_nothing(stream):
    items = [3, 1, 2]
    out = progress(items, enabled=True, desc="x", file=stream)
    assert out is items
    assert list(out) == [3, 1, 2]
    assert stream.getvalue() == ""


def test_closed_stream_counts_as_not_a_terminal():
    stream = FakeTerminal()
    stream.close()
    items = (1, 2)
    assert progress(items, enabled=True, desc="x", file=stream) is items


def test_enabled_on_a_terminal_draws_a_bar_and_yields_the_same_items():
    stream = FakeTerminal()
    got = list(progress(iter([5, 6, 7]), enabled=True, desc="my loop", total=3, file=stream))
    assert got == [5, 6, 7]
    text = stream.getvalue()
    assert "my loop" in text and "0/3" in text  # tqdm's first "n/total" line (it redraws at most every 0.1 s)


def test_default_stream_is_stderr_read_at_call_time(monkeypatch):
    fake = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", fake)
    assert list(progress(range(2), enabled=True, desc="late stderr")) == [0, 1]
    assert "late stderr" in fake.getvalue()


def _on_and_off(monkeypatch, func, desc):
    """``func(progress_bar)`` run quietly and with a bar drawn on a fake terminal; returns both results."""
    quiet = func(False)
    fake = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", fake)
    loud = func(True)
    monkeypatch.undo()
    assert desc in fake.getvalue(), "the bar did not run, so the comparison would prove nothing"
    return quiet, loud


def test_bootstrap_nc_ece_is_identical_with_and_without_the_bar(sim, monkeypatch):
    quiet, loud = _on_and_off(monkeypatch, lambda bar: bootstrap_nc_ece(
        sim.data, estimator=lambda d: sim.channel, n_boot=15, seed=2, progress_bar=bar), "bootstrap NC-ECE")
    np.testing.assert_array_equal(quiet.replicates, loud.replicates)
    assert (quiet.value, quiet.interval, quiet.upper_bound) == (loud.value, loud.interval, loud.upper_bound)


def test_cross_fit_is_identical_with_and_without_the_bar(sim, monkeypatch):
    quiet, loud = _on_and_off(monkeypatch, lambda bar: nc_ece_cross_fit(
        sim.data, estimator=lambda d: sim.channel, n_folds=4, seed=5, progress_bar=bar), "cross-fit folds")
    assert quiet.value == loud.value
    pd.testing.assert_frame_equal(quiet.fold_table, loud.fold_table)


def test_gap_sensitivity_is_identical_with_and_without_the_bar(sim, monkeypatch):
    quiet, loud = _on_and_off(monkeypatch, lambda bar: gap_sensitivity(
        sim.data, sim.channel, factors=(0.5, 1.0), n_draws=50, progress_bar=bar), "gap sensitivity")
    pd.testing.assert_frame_equal(quiet.table, loud.table)
