"""Coverage of ``evaluate``'s model expansion (issue 36; binary and K classes, EM and NUTS routes) over data sets.

Two questions of issue 36's goals, answered on repeated data sets with known truth:

* **Well specified** (shared channels simulated; the coverage study's settings ``overconfident``,
  ``underconfident``, ``five_annotators`` of ``benchmarks/coverage_study.py``, 2,000 items): with the expansion
  forced on (``expand=True``, the stricter test: ``"auto"`` fits the richer model only when a check warned), how
  often does the shared model keep >= 0.9 of the weight, and is the headline's coverage of the population binned ECE
  unchanged against ``expand=False``?
* **Score-dependent noise** (channels constant within each of the 5 equal-mass score groups, ``fpr`` 0.02 -> 0.28
  and ``fnr`` 0.30 -> 0.04 around their means, scaled by ``strength``; calibration curve ``m(z) = z^1.5``, uniform
  scores, population ECE 0.100 on 10 equal-width bins; 5,000 items, 3 annotators; the generator of
  ``tests/test_expansion.py``, imported from there): with evaluate's defaults (``expand="auto"``, checks on), how often does the
  headline interval cover 0.100, against the shared model's interval on the same data?

* **K classes, well specified** (``k3_overconfident``, ``k3_underconfident``, ``k10_overconfident``: the
  simulation of ``benchmarks/coverage_multiclass.py``, one confusion matrix per annotator, 3 annotators, 2,000
  items): ``evaluate_multiclass(data, method="em", expand=True, checks=False)`` (the richer model: a confusion
  matrix per confidence stratum); the top-label headline against the top-label population ECE (15 bins).

Route: ``evaluate(data, method="em")`` (grouped EM, 5 equal-mass groups, Bayesian-bootstrap refits; the richer model
by MAP and Laplace draws), one process, so compilation is paid once. Every replicate is written to
``benchmarks/results/coverage_expansion.json`` with the summary (coverage with its binomial standard error, the
fraction of data sets whose shared weight is >= 0.9, mean width).

Run: ``PYTHONPATH=. python benchmarks/coverage_expansion.py [--reps 100] [--settings NAME ...] [--method nuts]``
(``--method nuts``: the NUTS route with evaluate's defaults, rows named ``SETTING@nuts``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from coverage_study import population_ece, setting_kwargs  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_expansion import _grouped_noise as grouped_noise  # noqa: E402  (the slow test's generator, one copy)

from noisycal_bayes import evaluate  # noqa: E402
from noisycal_bayes.simulate import simulate_annotations  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "coverage_expansion.json"
WELL_SPECIFIED = ("overconfident", "underconfident", "five_annotators")
#: K-class well-specified settings: ``coverage_multiclass.py``'s simulation (one confusion matrix per annotator,
#: every annotator labels every item, 2,000 items, 3 annotators) and its top-label population target (15 bins).
MULTICLASS = {"k3_overconfident": (3, "overconfident"), "k3_underconfident": (3, "underconfident"),
              "k10_overconfident": (10, "overconfident")}
N_MULTICLASS = 2000
STRENGTHS = {"score_dependent_0.5": 0.5, "score_dependent_1.0": 1.0}
#: Population binned ECE of m(z) = z^1.5 with uniform scores on 10 equal-width bins (the curve is below the
#: diagonal on every bin, so it is the integral of z - z^1.5 = 1/2 - 2/5).
SCORE_DEPENDENT_ECE = 0.1
N_SCORE_DEPENDENT = 5000


_TARGETS: dict = {}


def _multiclass_target(k: int, curve: str) -> float:
    """Top-label population ECE of ``coverage_multiclass.py`` (2,000,000 fresh outputs, computed once per setting)."""
    if (k, curve) not in _TARGETS:
        from coverage_multiclass import population_target

        _TARGETS[k, curve] = population_target(k, curve)[0]
    return _TARGETS[k, curve]


def _interval(s) -> dict:
    return {"value": float(s.value), "lower": float(s.lower), "upper": float(s.upper)}


def run_rep(setting: str, rep: int, method: str = "em") -> dict:
    if setting in WELL_SPECIFIED:
        kw = setting_kwargs(setting)
        seed = 36_000 + 1000 * WELL_SPECIFIED.index(setting) + rep
        sim = simulate_annotations(kw["n_items"], fpr=kw["fpr"], tpr=kw["tpr"], curve=kw["curve"],
                                   score_beta=kw["score_beta"], missing=kw["missing"], seed=seed)
        data, truth = sim.data, population_ece(kw["curve"], kw["score_beta"])
        opts = dict(expand=True, checks=False)
    elif setting in MULTICLASS:
        from coverage_multiclass import population_target, simulate

        from noisycal_bayes import MulticlassAnnotationSet

        k, curve = MULTICLASS[setting]
        seed = 38_000 + 1000 * list(MULTICLASS).index(setting) + rep
        p, _, labels, _ = simulate(np.random.default_rng(seed), N_MULTICLASS, k, 3, curve)
        data = MulticlassAnnotationSet.from_responses(np.repeat(np.arange(N_MULTICLASS), 3),
                                                      np.tile(np.arange(3), N_MULTICLASS), labels.reshape(-1),
                                                      probs=p, n_classes=k)
        truth = _multiclass_target(k, curve)
        opts = dict(expand=True, checks=False, metrics=False)
    else:
        seed = 37_000 + 1000 * list(STRENGTHS).index(setting) + rep
        data, truth = grouped_noise(N_SCORE_DEPENDENT, seed, STRENGTHS[setting]), SCORE_DEPENDENT_ECE
        opts = {}
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if setting in MULTICLASS:
            from noisycal_bayes.evaluation import evaluate_multiclass

            ev = evaluate_multiclass(data, method=method, seed=rep, **opts)
        else:
            ev = evaluate(data, method=method, seed=rep, **opts)
    row = {"setting": setting if method == "em" else f"{setting}@{method}", "method": method, "rep": rep, "seed": seed, "truth": truth, "seconds": time.perf_counter() - t,
           "headline_model": ev.headline_model, "headline": _interval(ev.nc_ece),
           "shared": _interval(ev.nc_ece_shared if ev.nc_ece_shared is not None else ev.nc_ece)}
    exp = ev.expansion
    row["expanded"] = exp is not None
    row["weights"] = dict(exp.weights) if exp is not None else {"shared": 1.0}
    if exp is not None:
        table = exp.table.set_index("model")
        richer = [m for m in table.index if m != "shared"]
        if richer and "elpd_diff" in table.columns:
            row["elpd_diff"] = float(table.loc[richer[0], "elpd_diff"])
            row["se_diff"] = float(table.loc[richer[0], "se_diff"])
    for key in ("headline", "shared"):
        iv = row[key]
        row[key]["covered"] = bool(iv["lower"] <= truth <= iv["upper"])
    return row


def summarise(rows: list) -> list:
    out = []
    for setting in dict.fromkeys(r["setting"] for r in rows):
        rs = [r for r in rows if r["setting"] == setting]
        n = len(rs)
        line = {"setting": setting, "n": n, "truth": rs[0]["truth"],
                "weight_shared_ge_0.9": float(np.mean([r["weights"].get("shared", 1.0) >= 0.9 for r in rs])),
                "expanded": float(np.mean([r["expanded"] for r in rs])),
                "median_seconds": float(np.median([r["seconds"] for r in rs]))}
        for key in ("headline", "shared"):
            c = float(np.mean([r[key]["covered"] for r in rs]))
            line[f"coverage_{key}"] = c
            line[f"coverage_{key}_se"] = float(np.sqrt(max(c * (1 - c), 0.9 * 0.1) / n))
            line[f"mean_width_{key}"] = float(np.mean([r[key]["upper"] - r[key]["lower"] for r in rs]))
            line[f"mean_{key}"] = float(np.mean([r[key]["value"] for r in rs]))
        out.append(line)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--settings", nargs="*", default=list(WELL_SPECIFIED) + list(STRENGTHS) + list(MULTICLASS))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--method", choices=("em", "nuts"), default="em",
                    help="the route (rows of the NUTS route are named SETTING@nuts)")
    args = ap.parse_args(argv)
    rows = []
    if args.out.exists():  # resume: keep the replicates already run for other settings or reps
        rows = [r for r in json.loads(args.out.read_text())["rows"]]
    done = {(r["setting"], r["rep"]) for r in rows}
    t0 = time.perf_counter()
    for setting in (s if args.method == "em" else f"{s}@{args.method}" for s in args.settings):
        for rep in range(args.reps):
            if (setting, rep) in done:
                continue
            rows.append(run_rep(setting.split("@")[0], rep, args.method))
            r = rows[-1]
            print(f"{setting} {rep}: {r['headline_model']} w_shared={r['weights'].get('shared', 1.0):.2f} "
                  f"headline [{r['headline']['lower']:.4f}, {r['headline']['upper']:.4f}] "
                  f"shared [{r['shared']['lower']:.4f}, {r['shared']['upper']:.4f}] truth {r['truth']:.4f} "
                  f"{r['seconds']:.1f}s", flush=True)
            if rep % 10 == 9:
                _write(args.out, rows, t0)
    _write(args.out, rows, t0)
    for line in summarise(rows):
        print(json.dumps(line))


def _write(path: Path, rows: list, t0: float) -> None:
    path.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "seconds": time.perf_counter() - t0,
                                "load_avg_1min": os.getloadavg()[0], "summary": summarise(rows), "rows": rows},
                               indent=1))


if __name__ == "__main__":
    main()
