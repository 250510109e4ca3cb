"""The README's Python blocks, executed at small size (not marked slow).

The blocks are parsed from README.md (every fenced ``python`` block, in order, one shared namespace, as a
reader pasting them into one notebook would), so the test follows whatever the README says. Sizes are made
small by rewriting the calls' keyword arguments in the syntax tree: every call to a function named in
``SMALL`` gets those keywords (added when the README leaves the default), and any ``n_boot`` / ``n_warmup``
/ ``n_draws`` / ``n_chains`` keyword elsewhere is capped at the same values. Nothing else is changed.

What is checked, generically over the objects the blocks leave in their namespace:

- every block prints something, and the text shows no ``nan``;
- every fitted channel (an object with a ``channel`` attribute holding a ``Channel``) is finite, inside
  [0, 1], has ``tpr > fpr`` for every annotator, and orders the annotators by gap as the demo's known truth
  does (gaps 0.85, 0.50, 0.60: separated by far more than the estimates' standard errors at 4,000 items);
- every calibration-error result with an interval (``reported_interval`` or ``lower``/``upper``) is finite,
  ordered, contains its point value, and the point lies within ``Z`` interval-derived standard deviations
  (``sd = width / (2 * 1.645)``) of the demo's oracle ECE; ``Z = Phi^{-1}(1 - 1e-3 / 2) = 3.29``, a
  two-sided false alarm of 1e-3 per result (the population target and the oracle differ by sampling noise
  that the bootstrap part of the interval carries);
- every fitted temperature map (an object with ``temperature_``) lands nearer the simulated T = 2 than the
  same map fitted naively to vote fractions (the bias the package removes; as in tests/test_cli.py).
"""
from __future__ import annotations

import ast
import io
import math
import re
import types
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

README = Path(__file__).resolve().parents[1] / "README.md"
#: Small sizes per function name (the name the README calls, whatever module it comes from).
SMALL = {
    "fit_nuts": {"n_chains": 2, "n_warmup": 200, "n_draws": 150},
    "evaluate": {"n_chains": 2, "n_warmup": 200, "n_draws": 150, "n_boot": 30},
    "bootstrap_em": {"n_boot": 30},
}
# 200 warm-up steps and 150 draws (chunks of 50) with the README's 3 annotators and 5 groups: the compiled NUTS
# program of tests/inference/test_nuts.py's and tests/test_evaluate.py's fits (one compilation for all three).
CAPS = {"n_chains": 2, "n_warmup": 200, "n_draws": 150, "n_boot": 30}
Z = stats.norm.isf(1e-3 / 2)
SD_PER_WIDTH = 1 / (2 * stats.norm.isf(0.05))  # 90% intervals


def python_blocks(text: str) -> list[str]:
    """The fenced ```python blocks of a Markdown text, in order."""
    return re.findall(r"^```python[ \t]*\n(.*?)^```", text, flags=re.S | re.M)


class _Shrink(ast.NodeTransformer):
    """Set the SMALL keywords on calls of the named functions; cap size keywords everywhere else."""

    def __init__(self):
        self.calls: list[str] = []

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        wanted = dict(SMALL.get(name, {}))
        if wanted:
            self.calls.append(name)
        for kw in node.keywords:
            if kw.arg in wanted:
                kw.value = ast.Constant(wanted.pop(kw.arg))
            elif kw.arg in CAPS and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, int):
                kw.value = ast.Constant(min(kw.value.value, CAPS[kw.arg]))
        node.keywords += [ast.keyword(arg=k, value=ast.Constant(v)) for k, v in wanted.items()]
        return node


def shrink(source: str) -> tuple[str, list[str]]:
    tree = _Shrink()
    new = ast.fix_missing_locations(tree.visit(ast.parse(source)))
    return ast.unparse(new), tree.calls


def test_shrink_sets_and_adds_the_small_sizes():
    src = "post = nb.fit_nuts(data, groups=5, n_draws=500)\nres = evaluate(data, method='em')\nx = f(n_boot=999)\n"
    new, calls = shrink(src)
    tree = ast.parse(new)
    kws = [{k.arg: k.value.value for k in c.keywords if isinstance(k.value, ast.Constant)}
           for c in ast.walk(tree) if isinstance(c, ast.Call)]
    assert {"groups": 5, "n_draws": 150, "n_chains": 2, "n_warmup": 200} in kws
    assert {"method": "em", **SMALL["evaluate"]} in kws
    assert {"n_boot": 30} in kws
    assert calls == ["fit_nuts", "evaluate"]


@pytest.fixture(scope="module")
def readme_run():
    blocks = python_blocks(README.read_text())
    assert blocks, "README.md has no ```python block"
    namespace: dict = {"__name__": "__readme__"}
    outputs = []
    for k, block in enumerate(blocks):
        source, _ = shrink(block)
        buf = io.StringIO()
        with redirect_stdout(buf):
            exec(compile(source, f"README.md python block {k + 1}", "exec"), namespace)
        outputs.append(buf.getvalue())
    return blocks, namespace, outputs


def test_readme_blocks_run_and_print(readme_run):
    blocks, _, outputs = readme_run
    assert len(outputs) == len(blocks) >= 2  # the quick start and the Bayesian block
    for k, out in enumerate(outputs):
        assert out.strip(), f"block {k + 1} printed nothing"
        assert not re.search(r"\bnan\b", out, flags=re.I), f"block {k + 1} printed a NaN:\n{out}"


def _objects(namespace):
    """The namespace's values, and their ``nc_ece`` / ``channels`` parts (an evaluation result holds them)."""
    out = []
    for name, v in namespace.items():
        if name.startswith("__") or isinstance(v, (type, types.ModuleType, types.FunctionType)):
            continue
        out.append((name, v))
        sub = getattr(v, "nc_ece", None)
        if sub is not None and not callable(sub):
            out.append((f"{name}.nc_ece", sub))
    return out


def test_readme_channels_are_sane_and_ordered_like_the_truth(readme_run):
    from noisycal_bayes import Channel
    from noisycal_bayes.data.loaders import load_demo

    truth = load_demo()[1]["channel"]
    order = np.argsort(truth.gap)
    fits = [(n, v.channel) for n, v in _objects(readme_run[1]) if isinstance(getattr(v, "channel", None), Channel)]
    assert fits, "no fitted channel left by the README blocks"
    for name, ch in fits:
        fpr, tpr = np.asarray(ch.fpr), np.asarray(ch.tpr)
        assert np.all(np.isfinite(fpr)) and np.all(np.isfinite(tpr)), name
        assert np.all((0 <= fpr) & (fpr <= 1) & (0 <= tpr) & (tpr <= 1)), name
        assert np.all(tpr > fpr), name
        np.testing.assert_array_equal(np.argsort(tpr - fpr), order, err_msg=name)


def _interval(v):
    if hasattr(v, "reported_interval"):
        return tuple(v.reported_interval)
    lo, hi = getattr(v, "lower", None), getattr(v, "upper", None)
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return lo, hi
    return None


def _point(v):
    for attr in ("value", "estimate"):
        x = getattr(v, attr, None)
        if isinstance(x, (int, float, np.floating)):
            return float(x)
    return None


def test_readme_calibration_errors_are_sane_and_near_the_oracle(readme_run):
    from noisycal_bayes import ece
    from noisycal_bayes.data.loaders import load_demo

    data, truth = load_demo()
    oracle = ece(data.scores, truth["clean_labels"], bins=10)
    checked = 0
    for name, v in _objects(readme_run[1]):
        iv, point = _interval(v), _point(v)
        if iv is None or point is None or not hasattr(v, "target"):
            continue
        lo, hi = iv
        assert all(math.isfinite(x) for x in (lo, hi, point)), (name, lo, hi, point)
        assert 0 <= lo <= point <= hi <= 1, (name, lo, point, hi)
        sd = (hi - lo) * SD_PER_WIDTH
        assert abs(point - oracle) < Z * sd, (name, point, oracle, sd)
        checked += 1
    assert checked, "no calibration error with an interval left by the README blocks"


def test_readme_temperature_maps_beat_the_naive_fit(readme_run):
    from noisycal_bayes.data.loaders import load_demo
    from noisycal_bayes.recalibration.maps import TemperatureScaling

    data = load_demo()[0]
    naive = TemperatureScaling().fit(data.scores, data.vote_fraction()).temperature_
    for name, v in _objects(readme_run[1]):
        t = getattr(v, "temperature_", None)
        if isinstance(t, (int, float, np.floating)):
            assert abs(t - 2) < abs(naive - 2), (name, t, naive)
