"""Record (or check) the golden corpus: today's outputs of the public entry points on fixed data and seeds.

``python tests/golden/make_goldens.py`` rewrites ``tests/golden/goldens.json``; ``--check`` recomputes every
entry, compares it with the file and prints every difference (exit code 1 if any); ``--only NAME`` (repeatable)
restricts either mode to some entries. ``tests/golden/test_goldens.py`` runs the same comparison, one test per
entry. Why the corpus exists and when it may be regenerated: ``tests/golden/README.md``.

Entries are named ``<data set>/<entry point>``. The data sets (all built here from fixed seeds):

- ``demo``: the bundled demo (``load_demo()``; 4,000 items, 3 annotators, scores).
- ``ideal``: ``simulate_annotations(2000, fpr=(0.1, 0.2, 0.15), tpr=(0.9, 0.8, 0.85), curve="overconfident",
  seed=1)``.
- ``crowd``: ``simulate_crowd(400, 20, labels_per_item=4, spammers=0.1, adversaries=0.1, curve="overconfident",
  seed=3)`` (sparse path; spammers and adversaries flagged).
- ``gold``: the demo with the clean label of every 20th item given as gold (200 of 4,000).
- ``repeated``: 300 simulated items, 3 annotators, long format, with 40 (item, annotator) pairs labelled twice
  (``AnnotationSet.from_long(..., repeated="keep")``).
- ``chunks``: the ``ideal`` set written wide and read back in four chunks by ``stats_from_chunks`` (five
  equal-width score bins), then ``fit_em``.
- ``k3``: ``simulate_multiclass(1500, 4, 3, seed=0)``; ``k10``: ``simulate_multiclass(2000, 5, 10, seed=0)``.
- ``cifar10n_vehicle`` (binary) and ``cifar10n_10class``: the first 2,000 rows of the shared CIFAR-10N files
  (``experiments.real_data.shared_data_path``). Absent files: the entries are not computed; ``--check`` and the
  test say they were skipped.

Everything is float64 (the package computes in float64 under its own x64 context). Arrays are stored as (nested)
lists, floats by ``repr`` (which round-trips float64), strings as strings, data frames as
``{"columns", "index", "data"}``.

Left out, and why:

- Wall-time fields: none of the recorded results carries one today (checked); a key named like ``*time*``,
  ``*seconds*`` or ``elapsed`` is dropped by :func:`plain` should one appear.
- The command line's standard output and standard error: they name the temporary files (``Results written to
  /tmp/...``); the JSON it writes is recorded, with the exit code. The JSON names no input path today.
- Python warnings emitted while computing (their text can carry file paths and line numbers); the results'
  own ``warnings`` fields (messages the library stores) are recorded.
- ``FitResult.inputs``, ``FitResult.groups`` and ``FitResult.details`` beyond the named fields below: they are the
  arrays the fit was given (the data), not its result; ``loglik_trace`` and ``start_logliks`` are recorded.
- ``ModelChecks``: recorded in full (table, residuals, agreement, replicated statistics).
- Non-deterministic values: none found. The generator was run twice in separate processes and the two files
  compared with ``--check``: every value agreed exactly (0 differences at rtol = atol = 0), including the NUTS
  draws. The comparison tolerance (``RTOL``, ``ATOL``) only absorbs summation-order noise across machines.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
import warnings
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDENS = HERE / "goldens.json"
#: Floats agree when ``|a - b| <= ATOL + RTOL * |b|`` (numpy.isclose); integers, booleans and strings exactly.
#: Binary results are bit-identical for the same seed on one machine (checked, module notes); the tolerance is
#: only for summation-order noise (another BLAS, another XLA version's fusion).
RTOL, ATOL = 1e-9, 1e-12
#: Keys dropped wherever they appear (wall time would never reproduce).
DROP_KEY_PARTS = ("time", "seconds", "elapsed")
#: Shared CIFAR-10N rows used (the files have 50,000).
CIFAR_ROWS = 2000


def _setup_like_the_test_suite() -> None:
    """Apply ``tests/conftest.py`` (XLA flags, ``configure_jax``, the persistent compilation cache) when run as a
    script, so the script and the pytest run compute under the same settings (conftest documents that its XLA
    flags leave every value unchanged; the corpus checks that too)."""
    import runpy

    runpy.run_path(str(HERE.parent / "conftest.py"))


# ============================================================================================ conversion
def plain(x):
    """JSON-able copy of a result: dicts, lists, floats, ints, bools, strings and None."""
    import numpy as np
    import pandas as pd

    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x)
    if isinstance(x, pd.DataFrame):
        return {"columns": [str(c) for c in x.columns], "index": plain(x.index.to_numpy()),
                "data": {str(c): plain(x[c].to_numpy()) for c in x.columns}}
    if isinstance(x, pd.Series):
        return {"index": plain(x.index.to_numpy()), "values": plain(x.to_numpy())}
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return [plain(v) for v in x.tolist()]
        if x.dtype.kind in "fc":
            return np.asarray(x, dtype=np.float64).tolist()
        return x.tolist()
    if hasattr(x, "__array__") and not isinstance(x, (list, tuple, dict)):  # JAX arrays
        return plain(np.asarray(x))
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items() if not _dropped(k)}
    if isinstance(x, tuple) and hasattr(x, "_asdict"):
        return plain(x._asdict())
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if dataclasses.is_dataclass(x):
        return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x) if not _dropped(f.name)}
    raise TypeError(f"no golden conversion for {type(x).__name__}; add one to plain().")


def _dropped(key) -> bool:
    key = str(key).lower()
    return any(part in key for part in DROP_KEY_PARTS)


def compare(got, want, path: str = "", out=None) -> list:
    """Every difference between ``got`` and ``want`` as ``"path: message"`` lines (empty: they agree)."""
    out = [] if out is None else out
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got)):
            if k not in got:
                out.append(f"{path}/{k}: missing now (golden has it)")
            elif k not in want:
                out.append(f"{path}/{k}: new key (not in the golden)")
            else:
                compare(got[k], want[k], f"{path}/{k}", out)
    elif isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            out.append(f"{path}: length {len(got)}, golden {len(want)}")
        else:
            for i, (g, w) in enumerate(zip(got, want)):
                compare(g, w, f"{path}[{i}]", out)
    elif isinstance(want, bool) or isinstance(got, bool) or isinstance(want, str) or isinstance(got, str) \
            or want is None or got is None:
        if type(got) is not type(want) or got != want:
            out.append(f"{path}: {got!r}, golden {want!r}")
    elif isinstance(want, int) and isinstance(got, int):
        if got != want:
            out.append(f"{path}: {got!r}, golden {want!r}")
    elif isinstance(want, (int, float)) and isinstance(got, (int, float)):
        if isinstance(want, int) != isinstance(got, int):
            out.append(f"{path}: {type(got).__name__} {got!r}, golden {type(want).__name__} {want!r}")
        elif not _close(got, want):
            out.append(f"{path}: {got!r}, golden {want!r} (difference {got - want:.3g})")
    else:
        out.append(f"{path}: {type(got).__name__} {got!r:.80}, golden {type(want).__name__} {want!r:.80}")
    return out


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= ATOL + RTOL * abs(b)


# ============================================================================================ data sets
def _nb():
    import noisycal_bayes

    return noisycal_bayes


@cache
def demo():
    return _nb().load_demo()[0]


@cache
def demo_truth():
    return _nb().load_demo()[1]


@cache
def ideal():
    return _nb().simulate_annotations(2000, fpr=(0.1, 0.2, 0.15), tpr=(0.9, 0.8, 0.85), curve="overconfident",
                                      seed=1)


@cache
def crowd():
    from noisycal_bayes.simulate import simulate_crowd

    return simulate_crowd(400, 20, labels_per_item=4, spammers=0.1, adversaries=0.1, curve="overconfident", seed=3)


@cache
def gold():
    import numpy as np

    d = demo()
    g = np.full(d.n_items, -1, dtype=np.int8)
    g[::20] = np.asarray(demo_truth()["clean_labels"])[::20]
    return _nb().AnnotationSet(d.labels, d.scores, d.item_ids, d.annotator_ids, gold=g)


@cache
def repeated():
    import numpy as np
    import pandas as pd

    sim = _nb().simulate_annotations(300, fpr=(0.1, 0.25, 0.15), tpr=(0.85, 0.75, 0.9), seed=2)
    long = sim.data.to_long()
    rng = np.random.default_rng(2)
    again = long.iloc[np.sort(rng.choice(len(long), size=40, replace=False))].copy()
    # A second, conditionally independent label of the same pair: drawn from that annotator's channel.
    y = np.asarray(sim.clean_labels)[again["item"].map({v: i for i, v in enumerate(sim.data.item_ids)})]
    j = again["annotator"].map({v: i for i, v in enumerate(sim.data.annotator_ids)}).to_numpy()
    p = np.where(y == 1, np.asarray(sim.channel.tpr)[j], np.asarray(sim.channel.fpr)[j])
    again["label"] = (rng.random(len(again)) < p).astype(int)
    frame = pd.concat([long, again]).sort_values(["item", "annotator"], kind="stable").reset_index(drop=True)
    scores = pd.Series(np.asarray(sim.data.scores), index=sim.data.item_ids)
    return _nb().AnnotationSet.from_long(frame[["item", "annotator", "label"]], scores, repeated="keep")


@cache
def chunk_stats():
    import numpy as np
    import pandas as pd

    d = ideal().data
    wide = pd.DataFrame(np.where(d.labels < 0, np.nan, d.labels), columns=[str(a) for a in d.annotator_ids])
    wide.insert(0, "item", d.item_ids)
    wide["score"] = d.scores
    chunks = [wide.iloc[i:i + 500] for i in range(0, len(wide), 500)]
    return _nb().stats_from_chunks(chunks, bins=_nb().Binning.equal_width(5))


def _k_set(sim, k):
    return _nb().MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=k,
                                                        probs=sim.probs)


@cache
def k3():
    return _k_set(_nb().simulate_multiclass(1500, 4, 3, seed=0), 3)


@cache
def k10():
    return _k_set(_nb().simulate_multiclass(2000, 5, 10, seed=0), 10)


def _cifar_frame(name):
    import pandas as pd
    from noisycal_bayes.experiments.real_data import shared_data_path

    path = shared_data_path(name)
    return None if path is None else pd.read_csv(path, nrows=CIFAR_ROWS)


@cache
def cifar_binary():
    frame = _cifar_frame("cifar10n_vehicle.csv")
    if frame is None:
        return None
    cols = ["ann1", "ann2", "ann3"]
    return _nb().AnnotationSet.from_wide(frame.set_index("item")[cols], frame.set_index("item")["score"])


@cache
def cifar_classes():
    frame = _cifar_frame("cifar10n_10class.csv")
    if frame is None:
        return None
    probs = frame[[f"p{k}" for k in range(10)]].to_numpy("float64")
    # Rounded to 5 decimals in the file: renormalised rows, as the loaders would be given them.
    probs = probs / probs.sum(axis=1, keepdims=True)
    return _nb().MulticlassAnnotationSet.from_wide(frame.set_index("item")[["ann1", "ann2", "ann3"]], probs,
                                                   classes=list(range(10)))


#: Data set name -> its builder; a builder returning None means the data is absent (entries skipped).
DATASETS = {"demo": lambda: demo(), "ideal": lambda: ideal().data, "crowd": lambda: crowd().data,
            "gold": gold, "repeated": repeated, "chunks": chunk_stats, "k3": k3, "k10": k10, "cifar10n_vehicle": cifar_binary, "cifar10n_10class": cifar_classes}


# ============================================================================================ fits shared by entries
@cache
def em(name):
    # SufficientStats carry their score bins: the groups are those (groups=None).
    return _nb().fit_em(DATASETS[name](), seed=0, **({"groups": None} if name == "chunks" else {}))


@cache
def nuts(name):
    return _nb().fit_nuts(DATASETS[name](), n_chains=1, n_warmup=100, n_draws=100, seed=0, progress_bar=False)


@cache
def boot(name):
    from noisycal_bayes.inference import bootstrap_em

    return bootstrap_em(DATASETS[name](), em(name), n_boot=20, seed=0)


@cache
def em_k(name):
    return _nb().fit_em_multiclass(DATASETS[name](), seed=0)


# ============================================================================================ what is recorded
_FIT_FIELDS = ("model", "method", "converged", "identified", "reason", "loglik", "n_iter", "n_divergent",
               "failed_starts", "warnings", "settings", "annotator_ids")


def fit_record(fit, *, draws: bool = False) -> dict:
    """The named fields of a FitResult: channels, prevalence, log-likelihood, iterations, convergence."""
    rec = {k: getattr(fit, k) for k in _FIT_FIELDS}
    rec.update(fpr=fit.fpr, tpr=fit.tpr, prevalence=fit.prevalence, point=fit.point,
               n_groups=fit.n_groups, group_sizes=fit.group_sizes, loglik_trace=fit.loglik_trace,
               start_logliks=fit.start_logliks, selected_start=fit.selected_start)
    if fit.draws is not None:
        rec["posterior_mean"] = {k: v.mean(axis=(0, 1)) for k, v in fit.draws.items()}
        rec["n_chains"], rec["n_draws"] = fit.n_chains, fit.n_draws
        if fit.diagnostics is not None:
            rec["diagnostics"] = fit.diagnostics
        if draws:
            rec["draws"] = fit.draws
    return rec


#: Fields a K-class fit inherits from FitResult and leaves at their defaults (``loglik`` repeats ``log_likelihood``):
#: not part of the K-class record.
_INHERITED = {"method", "channel", "point", "inputs", "annotator_ids", "draws", "sample_stats", "diagnostics",
              "n_divergent", "identified", "reason", "loglik", "failed_starts", "settings", "details"}


def _em_k_record(fit) -> dict:
    return {f.name: getattr(fit, f.name) for f in dataclasses.fields(fit) if f.name not in _INHERITED | {"groups"}}


def _cli_json(argv_tail) -> dict:
    from noisycal_bayes.cli import main
    from noisycal_bayes.data.loaders import demo_paths

    paths = demo_paths()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            code = main(["evaluate", paths["annotations"], "--scores", paths["scores"], *argv_tail,
                         "--json", out])
        if code != 0:
            raise RuntimeError(f"noisycal-bayes evaluate exited {code}: {err.getvalue()}")
        return {"exit_code": code, "json": json.loads(out.read_text())}


def _arviz_names(fit) -> dict:
    idata = fit.to_arviz()
    groups = idata.groups() if hasattr(idata, "groups") and callable(idata.groups) else list(idata.children)
    out = {}
    for g in groups:
        ds = idata[g] if not hasattr(idata, "children") else idata[g].to_dataset()
        out[g.strip("/")] = {"variables": {v: list(ds[v].dims) for v in sorted(ds.data_vars)},
                             "dims": {d: int(n) for d, n in sorted(ds.sizes.items())}}
    return out


@cache
def _entries() -> dict:
    """Entry name -> (data set, function returning the record)."""
    nb = _nb()
    from noisycal_bayes import diagnostics, inference, propagate

    e = {}
    # --- binary: every data set gets an EM fit
    for ds in ("demo", "ideal", "crowd", "gold", "repeated", "chunks", "cifar10n_vehicle"):
        e[f"{ds}/fit_em"] = (ds, lambda ds=ds: fit_record(em(ds)))
    # --- the demo: every binary entry point
    e["demo/fit_map"] = ("demo", lambda: fit_record(nb.fit_map(demo(), seed=0)))
    e["demo/fit_nuts"] = ("demo", lambda: fit_record(nuts("demo")))
    e["demo/fit_nuts.to_arviz"] = ("demo", lambda: _arviz_names(nuts("demo")))
    e["demo/bootstrap_em"] = ("demo", lambda: fit_record(boot("demo"), draws=True))
    e["demo/posterior_nc_ece.em"] = ("demo", lambda: propagate.posterior_nc_ece(demo(), boot("demo"), seed=0))
    e["demo/posterior_nc_ece.nuts"] = ("demo", lambda: propagate.posterior_nc_ece(demo(), nuts("demo"), seed=0))
    e["demo/temperature_scaling"] = ("demo", lambda: _temperature(demo(), em("demo")))
    e["demo/label_issues"] = ("demo", lambda: nb.label_issues(demo(), em("demo"), seed=0, n_draws=200))
    e["demo/label_issues.nuts"] = ("demo", lambda: nb.label_issues(demo(), nuts("demo"), seed=0))
    e["demo/corrected_accuracy"] = ("demo", lambda: nb.corrected_accuracy(demo(), None, seed=0,
                                                                          n_replicates=200, n_draws=200))
    e["demo/model_checks"] = ("demo", lambda: diagnostics.model_checks(demo(), em("demo"), n_replicates=19,
                                                                       seed=0))
    e["demo/evaluate.em"] = ("demo", lambda: nb.evaluate(demo(), method="em", seed=0, n_boot=50).to_dict())
    e["demo/evaluate.nuts"] = ("demo", lambda: nb.evaluate(demo(), method="nuts", seed=0, n_chains=1,
                                                           n_warmup=100, n_draws=100).to_dict())
    e["demo/cli_evaluate_json"] = ("demo", lambda: _cli_json(["--method", "em", "--n-boot", 50]))
    # --- the other binary sets: NC-ECE at the EM channels and the EM evaluation
    for ds in ("demo", "ideal", "crowd", "gold", "repeated", "cifar10n_vehicle"):
        e[f"{ds}/nc_ece"] = (ds, lambda ds=ds: nb.nc_ece(DATASETS[ds](), em(ds).channel))
    for ds in ("ideal", "crowd", "gold", "repeated", "cifar10n_vehicle"):
        e[f"{ds}/evaluate.em"] = (ds, lambda ds=ds: nb.evaluate(DATASETS[ds](), method="em", seed=0,
                                                                n_boot=50).to_dict())
    e["crowd/label_issues"] = ("crowd", lambda: nb.label_issues(crowd().data, em("crowd"), seed=0, n_draws=200))
    e["chunks/stats_from_chunks"] = ("chunks", lambda: chunk_stats())
    e["chunks/posterior_nc_ece"] = ("chunks", lambda: propagate.posterior_nc_ece(chunk_stats(), em("chunks"),
                                                                                  seed=0))
    # --- K classes
    for ds in ("k3", "k10", "cifar10n_10class"):
        checks = ds == "k3"  # the K-class predictive checks: 150 s CPU on CIFAR-10N's 2,000 rows; k3 keeps them
        e[f"{ds}/fit_em_multiclass"] = (ds, lambda ds=ds: _em_k_record(em_k(ds)))
        e[f"{ds}/evaluate_multiclass.em"] = (ds, lambda ds=ds, checks=checks: nb.evaluate_multiclass(
            DATASETS[ds](), method="em", seed=0, n_boot=30, checks=checks).to_dict())
    # evaluate() on K-class data hands over to evaluate_multiclass: recorded once, on k3 (with the checks).
    e["k3/evaluate.em"] = ("k3", lambda: nb.evaluate(k3(), method="em", seed=0, n_boot=30).to_dict())
    return e


def _temperature(data, fit) -> dict:
    ts = _nb().TemperatureScaling().fit(data.scores, data, channel=fit.channel)
    return {"temperature_": ts.temperature_, "loss_": ts.loss_, "on_boundary_": ts.on_boundary_,
            "fit_kind_": ts.fit_kind_, "weights_": ts.weights_, "n_items_": ts.n_items_, "to_dict": ts.to_dict(),
            "predict": ts.predict(data.scores[:50])}


def entry_names() -> list:
    return list(_entries())


def data_set_of(name: str) -> str:
    return _entries()[name][0]


def available(name: str) -> bool:
    """Whether the data set of entry ``name`` is present (the CIFAR-10N files may be absent)."""
    ds = _entries()[name][0]
    return DATASETS[ds]() is not None


def compute(name: str):
    """The JSON-able record of entry ``name`` (warnings raised while computing are silenced, not recorded).

    An entry point that raises ``ValueError`` today is recorded as ``{"raises": type, "message": text}``: that
    behaviour is part of the corpus too (a change of it shows as a difference).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            record = _entries()[name][1]()
        except ValueError as exc:
            record = {"raises": type(exc).__name__, "message": str(exc)}
        return json.loads(json.dumps(plain(record)))


def load_goldens(path=GOLDENS) -> dict:
    return json.loads(Path(path).read_text())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with goldens.json instead of writing it")
    parser.add_argument("--only", action="append", metavar="NAME", help="only this entry (repeatable)")
    parser.add_argument("--file", default=str(GOLDENS), help="the corpus file (default: %(default)s)")
    args = parser.parse_args(argv)
    names = args.only or entry_names()
    old = load_goldens(args.file) if Path(args.file).exists() else {"entries": {}}
    start, cpu = time.perf_counter(), time.process_time()
    n_diff = 0
    new = {}
    for name in names:
        t0, c0 = time.perf_counter(), time.process_time()
        if not available(name):
            print(f"SKIP {name}: data set {_entries()[name][0]!r} is absent", flush=True)
            if name in old["entries"]:
                new[name] = old["entries"][name]  # kept as recorded where the data was present
            continue
        got = compute(name)
        new[name] = got
        took = f"{time.perf_counter() - t0:.1f} s wall, {time.process_time() - c0:.1f} s CPU"
        if args.check:
            if name not in old["entries"]:
                print(f"DIFF {name}: not in the golden file", flush=True)
                n_diff += 1
                continue
            diffs = compare(got, old["entries"][name])
            n_diff += len(diffs)
            print(f"{'ok  ' if not diffs else 'DIFF'} {name} ({took})", flush=True)
            for line in diffs:
                print(f"     {line}")
        else:
            print(f"rec  {name} ({took})", flush=True)
    total = f"{time.perf_counter() - start:.1f} s wall, {time.process_time() - cpu:.1f} s CPU"
    if args.check:
        print(f"{n_diff} difference(s); {total}")
        return 1 if n_diff else 0
    entries = dict(old["entries"]) if args.only else {}
    entries.update(new)
    body = {"about": "Golden outputs of noisycal_bayes' public entry points; see tests/golden/README.md. "
                     "Written by tests/golden/make_goldens.py.",
            "rtol": RTOL, "atol": ATOL, "entries": {k: entries[k] for k in entry_names() if k in entries}}
    Path(args.file).write_text(json.dumps(body, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {len(body['entries'])} entries to {args.file}; {total}")
    return 0


if __name__ == "__main__":
    _setup_like_the_test_suite()
    sys.path.insert(0, str(HERE.parent.parent))
    sys.exit(main())
