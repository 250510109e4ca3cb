"""The golden corpus: today's outputs of the public entry points, one test per entry of goldens.json.

Each test recomputes one entry (``tests/golden/make_goldens.py`` says how, on which data and seeds) and compares it
with the recorded value: integers, booleans and strings exactly, floats to ``rtol=1e-9, atol=1e-12``. The
results are bit-identical for the same seed on one machine (checked when the corpus was made); the tolerance only
absorbs summation-order noise. A difference is a changed result: see tests/golden/README.md before regenerating.
"""
import copy

import pytest

from . import make_goldens as mg

GOLDENS = mg.load_goldens()
NAMES = mg.entry_names()


def test_every_entry_is_recorded():
    # A new entry (or a renamed one) needs `python tests/golden/make_goldens.py --only NAME`.
    assert sorted(GOLDENS["entries"]) == sorted(NAMES)


def test_the_file_states_the_tolerances_the_test_uses():
    assert (GOLDENS["rtol"], GOLDENS["atol"]) == (mg.RTOL, mg.ATOL) == (1e-9, 1e-12)


def test_compare_flags_every_kind_of_change():
    # The comparison must be able to fail: each perturbation of a recorded entry is reported, and only it.
    want = GOLDENS["entries"]["demo/fit_em"]
    assert mg.compare(copy.deepcopy(want), want) == []
    cases = {
        "loglik": lambda r: r.__setitem__("loglik", r["loglik"] * (1 + 1e-8)),   # above rtol
        "n_iter": lambda r: r.__setitem__("n_iter", r["n_iter"] + 1),            # integers exact
        "model": lambda r: r.__setitem__("model", "dawid_skene"),                # strings exact
        "converged": lambda r: r.__setitem__("converged", not r["converged"]),   # booleans exact
        "fpr": lambda r: r["fpr"].pop(),                                         # lengths
        "tpr": lambda r: r.pop("tpr"),                                           # keys
    }
    for key, change in cases.items():
        got = copy.deepcopy(want)
        change(got)
        diffs = mg.compare(got, want)
        assert len(diffs) == 1 and diffs[0].startswith(f"/{key}"), (key, diffs)
    # Below the tolerance: summation-order noise passes.
    got = copy.deepcopy(want)
    got["loglik"] = want["loglik"] * (1 + 1e-11)
    assert mg.compare(got, want) == []


@pytest.mark.slow  # about two minutes of CPU in all: `make golden` (run by CI) runs them, `make test` does not
@pytest.mark.parametrize("name", NAMES)
def test_golden(name):
    if not mg.available(name):
        pytest.skip(f"{name}: its data set {mg.data_set_of(name)!r} is absent (shared data folder: "
                    "NOISYCAL_SHARED_DATA or ../shared/data); not compared")
    diffs = mg.compare(mg.compute(name), GOLDENS["entries"][name])
    shown = "\n".join(diffs[:40]) + (f"\n... and {len(diffs) - 40} more" if len(diffs) > 40 else "")
    assert not diffs, (f"{name}: {len(diffs)} difference(s) from tests/golden/goldens.json (a changed result; "
                       f"see tests/golden/README.md before regenerating):\n{shown}")
