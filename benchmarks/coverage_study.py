"""Coverage study: do the 90% intervals of posterior_nc_ece cover their stated targets about 90% of the time?

Repeated simulated data sets with known truth (``noisycal_bayes.simulate``), across the settings of
issue 4: calibrated / over-confident / under-confident models, imbalanced prevalence, two, three and
five annotators, missing responses, and small channel gaps (0.3 and 0.15). For every data set:

* one NUTS fit of the histogram model on the evaluation bins (``groups = Binning.equal_width(10)``),
  propagated three ways (``posterior_nc_ece`` methods ``plugin``, ``model``, ``latent``);
* one EM fit of the same model, propagated with the channels treated as known (``plugin`` with a point
  estimate: Bayesian bootstrap only; ``latent`` with a point estimate: label draws only);
* the frequentist reference: ``reference.variants.bootstrap_nc_ece`` (percentile bootstrap over items,
  channels re-estimated by the reference EM in every replicate), on the first ``--ref-reps`` data sets;
* the command line's EM route (what ``evaluate(method="em")`` computes): ``fit_em`` (grouped model, 5
  equal-mass score groups, 10 starts) -> ``bootstrap_em`` (200 Bayesian-bootstrap replicates with EM
  refits) -> ``posterior_nc_ece`` (plug-in, debiased), on the first ``--em-reps`` data sets. It can be run
  alone (``--em-route-only``) and merged into a saved run: the same seeds give the same data sets.

Each interval is scored against the target its method states (``propagate.TARGETS``):
population binned ECE (plug-in, channels-known plug-in, reference bootstrap), conditional binned
ECE (model), sample oracle ECE (latent). The population value is computed by numerical integration
over the score density; the other two from the simulation's ``true_probability`` / ``clean_labels``.

Usage::

    python benchmarks/coverage_study.py                    # the full study (docs/coverage.md)
    python benchmarks/coverage_study.py --reps 5 --settings calibrated overconfident --no-docs
    python benchmarks/coverage_study.py --em-route-only --em-reps 80   # add the EM route to the saved run

Writes ``benchmarks/results/coverage_study.json`` (every replicate and the summary) and replaces the
table between the markers in ``docs/coverage.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

# Two chains in parallel on two cores; must run before JAX starts.
if __name__ == "__main__":
    import numpyro

    numpyro.set_host_device_count(2)

import jax  # noqa: E402
import numpy as np  # noqa: E402
from scipy import integrate, stats  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from noisycal_bayes._progress import progress  # noqa: E402
from noisycal_bayes.data import Binning  # noqa: E402
from noisycal_bayes.inference.bootstrap import bootstrap_em  # noqa: E402
from noisycal_bayes.inference.em import fit_em  # noqa: E402
from noisycal_bayes.inference.nuts import fit_nuts  # noqa: E402
from noisycal_bayes.propagate import posterior_nc_ece  # noqa: E402
from noisycal_bayes.propagate.result import draw_quantiles  # noqa: E402
from noisycal_bayes.reference.em import fit_em as reference_em  # noqa: E402
from noisycal_bayes.reference.variants import bootstrap_nc_ece  # noqa: E402
from noisycal_bayes.simulate import CURVES, simulate_annotations  # noqa: E402

LEVEL = 0.9
N_BINS = 10
BASE = dict(n_items=2000, fpr=(0.10, 0.20, 0.15), tpr=(0.85, 0.80, 0.90), curve="overconfident",
            score_beta=(1.0, 1.0), missing=0.0)
SETTINGS = {
    "calibrated": dict(curve="calibrated"),
    "overconfident": dict(),
    "underconfident": dict(curve="underconfident"),
    "imbalanced": dict(score_beta=(1.0, 5.0)),
    "two_annotators": dict(fpr=(0.10, 0.20), tpr=(0.85, 0.80)),
    "five_annotators": dict(fpr=(0.10, 0.20, 0.15, 0.25, 0.10), tpr=(0.85, 0.80, 0.90, 0.75, 0.70)),
    "missing_40pct": dict(missing=0.4),
    "gap_0.3": dict(fpr=(0.35, 0.35, 0.35), tpr=(0.65, 0.65, 0.65)),
    "gap_0.15": dict(fpr=(0.425, 0.425, 0.425), tpr=(0.575, 0.575, 0.575)),
    # Not in the list: the regime between "calibrated" and "clearly miscalibrated", where several
    # bins have residuals comparable to their noise (the hardest case for intervals of sums of |.|).
    "slightly_overconfident": dict(curve="slightly_overconfident"),
}
NUTS = dict(n_chains=2, n_warmup=400, n_draws=400)
REF_BOOT = 100
REF_STARTS = 3
#: The EM route of the command line (``evaluate(method="em")``): grouped EM, then the Bayesian bootstrap.
EM_ROUTE = dict(groups=Binning.equal_mass(5), n_starts=10, n_boot=200)

# Which truth each method's interval is for (its `target`).
METHOD_TARGET = {
    "plugin": "population", "model": "conditional", "latent": "sample_oracle",
    "plugin_channels_known": "population", "latent_channels_known": "sample_oracle",
    "reference_bootstrap": "population", "em_route": "population",
}


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _logit(z):
    z = np.clip(z, 1e-12, 1 - 1e-12)
    return np.log(z) - np.log1p(-z)


#: Curves used here beyond ``simulate.CURVES``.
EXTRA_CURVES = {"slightly_overconfident": lambda z: _sigmoid(0.8 * _logit(z))}


def curve_fn(name):
    return EXTRA_CURVES[name] if name in EXTRA_CURVES else CURVES[name]


def setting_kwargs(name: str) -> dict:
    kw = dict(BASE)
    kw.update(SETTINGS[name])
    return kw


def population_ece(curve: str, score_beta, n_bins: int = N_BINS) -> float:
    """``sum_k |int_{B_k} (m(z) - z) f(z) dz|`` for Z ~ Beta(score_beta), equal-width bins (numerical)."""
    m = curve_fn(curve)
    dens = stats.beta(*score_beta).pdf
    total = 0.0
    for k in range(n_bins):
        lo, hi = k / n_bins, (k + 1) / n_bins
        val, _ = integrate.quad(lambda z: (float(m(np.array([z]))[0]) - z) * dens(z), lo, hi, limit=200)
        total += abs(val)
    return float(total)


def binned(values, scores, n_bins: int = N_BINS) -> float:
    """``sum_k |sum_{i in B_k} values_i| / n`` on equal-width bins."""
    idx = Binning.equal_width(n_bins).assign(scores)
    return float(np.abs(np.bincount(idx, weights=values, minlength=n_bins)).sum() / scores.size)


def _score(point, lower, upper, one, read, truth, p_value=float("nan")):
    lo, hi = (lower, upper) if read == "two_sided" else (0.0, one)
    return dict(point=point, lower=lower, upper=upper, upper_one_sided=one, read=read, p_value=p_value, truth=truth,
                covered_two_sided=bool(lower <= truth <= upper), covered_one_sided=bool(truth <= one),
                covered_reported=bool(lo <= truth <= hi), width_two_sided=upper - lower, width_reported=hi - lo)


def _records(res, truth) -> dict:
    """Both interval constructions of one PosteriorNCECE, scored against ``truth``."""
    lv = res.level
    out = {}
    for kind, draws, point in (("debiased", res.debiased_draws, res.debiased), ("posterior", res.draws, res.median)):
        # The library's quantile rule for intervals read off draws (p (B + 1); since 2026-12-02, fourth session).
        lo, hi, one = draw_quantiles(draws, [(1 - lv) / 2, (1 + lv) / 2, lv])
        out[kind] = _score(point, lo, hi, one, res.interval_to_read, truth, res.calibration_p_value)
    return out


def simulate_rep(name: str, rep: int):
    """The data set of replicate ``rep`` of setting ``name`` (fixed seed) and its three truths."""
    kw = setting_kwargs(name)
    seed = 1000 * (list(SETTINGS).index(name) + 1) + rep
    sim = simulate_annotations(kw["n_items"], fpr=kw["fpr"], tpr=kw["tpr"], curve=curve_fn(kw["curve"]),
                               score_beta=kw["score_beta"], missing=kw["missing"], seed=seed)
    z = sim.data.scores
    truths = {"sample_oracle": binned(sim.clean_labels - z, z), "conditional": binned(sim.true_probability - z, z),
              "population": POPULATION[name]}
    return seed, sim.data, truths


def em_route(data, truths, seed: int) -> tuple:
    """The command line's EM route on one data set: ``(records by method key, notes, warnings, seconds)``."""
    methods, notes, t0 = {}, [], time.time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        em = fit_em(data, model="grouped", groups=EM_ROUTE["groups"], n_starts=EM_ROUTE["n_starts"], seed=seed)
        if em.channel is None:
            notes.append("EM route: EM failed: " + em.reason)
        else:
            try:
                boot = bootstrap_em(data, em, n_boot=EM_ROUTE["n_boot"], seed=seed)
            except ValueError as exc:
                notes.append(f"EM route: bootstrap failed: {exc}")
            else:
                res = posterior_nc_ece(data, boot, bins=Binning.equal_width(N_BINS), weights="iv", level=LEVEL,
                                       seed=seed)
                for kind, rec in _records(res, truths[METHOD_TARGET["em_route"]]).items():
                    rec["n_failed_replicates"] = boot.details["n_failed"]
                    methods[f"em_route/{kind}"] = rec
    return methods, notes, sorted({w.category.__name__ for w in caught}), time.time() - t0


def run_rep(name: str, rep: int, *, with_reference: bool, with_em_route: bool = True) -> dict:
    seed, data, truths = simulate_rep(name, rep)
    bins = Binning.equal_width(N_BINS)
    out = {"setting": name, "rep": rep, "seed": seed, "truth": truths, "methods": {}, "notes": []}
    t0 = time.time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_nuts(data, model="histogram", groups=bins, seed=seed, progress_bar=False, **NUTS)
        out["nuts_seconds"] = time.time() - t0
        out["n_divergent"] = fit.n_divergent
        out["nuts_converged"] = bool(fit.converged)
        for method in ("plugin", "model", "latent"):
            res = posterior_nc_ece(data, fit, bins=N_BINS, method=method, seed=seed)
            for kind, rec in _records(res, truths[METHOD_TARGET[method]]).items():
                out["methods"][f"{method}/{kind}"] = rec
        em = fit_em(data, model="histogram", groups=bins, n_starts=5, seed=seed)
        if em.channel is not None:
            for method in ("plugin", "latent"):
                res = posterior_nc_ece(data, em, bins=N_BINS, method=method, seed=seed)
                key = f"{method}_channels_known"
                for kind, rec in _records(res, truths[METHOD_TARGET[key]]).items():
                    out["methods"][f"{key}/{kind}"] = rec
        else:
            out["notes"].append("EM failed: " + em.reason)
        if with_reference:
            t1 = time.time()
            try:
                ref = bootstrap_nc_ece(data, estimator=lambda d: reference_em(d, groups=bins, n_starts=REF_STARTS),
                                       n_boot=REF_BOOT, level=LEVEL, bins=N_BINS, seed=seed)
                truth = truths["population"]
                reps_ = ref.replicates
                v = ref.value
                q_lo, q_hi, q_one, q_low1 = np.quantile(reps_, [(1 - LEVEL) / 2, (1 + LEVEL) / 2, LEVEL, 1 - LEVEL])
                out["methods"]["reference_bootstrap/percentile"] = _score(v, q_lo, q_hi, q_one, "two_sided", truth)
                out["methods"]["reference_bootstrap/basic"] = _score(
                    v, max(2 * v - q_hi, 0.0), max(2 * v - q_lo, 0.0), max(2 * v - q_low1, 0.0), "two_sided", truth)
                out["reference_failed"] = ref.n_failed
            except ValueError as exc:
                out["notes"].append(f"reference bootstrap failed: {exc}")
            out["reference_seconds"] = time.time() - t1
    out["warnings"] = sorted({w.category.__name__ for w in caught})
    if with_em_route:
        add_em_route(out, data)
    out["seconds"] = time.time() - t0
    return out


def add_em_route(record: dict, data) -> None:
    """Run the EM route on ``record``'s data set and store its results in ``record`` (replacing old ones)."""
    methods, notes, warns, seconds = em_route(data, record["truth"], record["seed"])
    record["methods"] = {k: v for k, v in record["methods"].items() if not k.startswith("em_route/")}
    record["methods"].update(methods)
    record["notes"] = [n for n in record["notes"] if not n.startswith("EM route:")] + notes
    record["em_route_warnings"], record["em_route_seconds"] = warns, seconds


def summarise(records: list) -> list:
    """Per (setting, method): coverage (two-sided, one-sided, reported) with binomial SE, width, bias, RMSE."""
    rows = []
    for name in dict.fromkeys(r["setting"] for r in records):
        recs = [r for r in records if r["setting"] == name]
        methods = dict.fromkeys(m for r in recs for m in r["methods"])
        for m in methods:
            got = [r["methods"][m] for r in recs if m in r["methods"]]
            n = len(got)
            err = np.array([g["point"] - g["truth"] for g in got])
            row = {"setting": name, "method": m, "target": METHOD_TARGET[m.split("/")[0]], "n": n,
                   "truth_mean": float(np.mean([g["truth"] for g in got])),
                   "bias": float(err.mean()), "rmse": float(np.sqrt(np.mean(err ** 2))),
                   "width_two_sided": float(np.mean([g["width_two_sided"] for g in got])),
                   "width_reported": float(np.mean([g["width_reported"] for g in got])),
                   "share_one_sided": float(np.mean([g["read"] == "upper_one_sided" for g in got]))}
            for kind in ("two_sided", "one_sided", "reported"):
                p = float(np.mean([g[f"covered_{kind}"] for g in got]))
                row[f"coverage_{kind}"] = p
            # Binomial standard error at the nominal level (what a correct interval would show).
            row["se_nominal"] = float(np.sqrt(LEVEL * (1 - LEVEL) / n)) if n else float("nan")
            rows.append(row)
    return rows


LABELS = {"plugin": "plug-in (NUTS + BB)", "model": "model (histogram)", "latent": "latent (NUTS)",
          "plugin_channels_known": "plug-in, channels known (EM + BB)",
          "latent_channels_known": "latent, channels known (EM)", "reference_bootstrap": "reference bootstrap",
          "em_route": "EM route (CLI default: EM + Bayesian bootstrap + BB)"}


def markdown_table(rows: list) -> str:
    head = ("| setting | method | target | n | coverage reported | two-sided | one-sided | "
            "share one-sided | width | bias | RMSE |\n|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        z = (r["coverage_reported"] - LEVEL) / r["se_nominal"] if r["n"] else float("nan")
        flag = " **low**" if z < -2 else ""
        base, kind = r["method"].split("/")
        lines.append(
            f"| {r['setting']} | {LABELS[base]}, {kind} | {r['target'].replace('_', ' ')} | {r['n']} | "
            f"{r['coverage_reported']:.2f}{flag} | {r['coverage_two_sided']:.2f} | {r['coverage_one_sided']:.2f} | "
            f"{r['share_one_sided']:.2f} | {r['width_reported']:.4f} | {r['bias']:+.4f} | {r['rmse']:.4f} |")
    return "\n".join(lines)


COMPACT = ["plugin/debiased", "em_route/debiased", "model/debiased", "latent/debiased", "plugin_channels_known/debiased",
           "latent_channels_known/debiased", "reference_bootstrap/percentile", "reference_bootstrap/basic"]
COMPACT_HEAD = ["plug-in (default)", "EM route (CLI default)", "model", "latent", "plug-in, channels known", "latent, channels known",
                "reference, percentile", "reference, basic"]


def compact_table(rows: list) -> str:
    """Coverage of the reported interval (mean width) per setting and method, debiased variants."""
    lines = ["| setting | " + " | ".join(COMPACT_HEAD) + " |", "|---" * (len(COMPACT) + 1) + "|"]
    for name in dict.fromkeys(r["setting"] for r in rows):
        n_max = max(x["n"] for x in rows if x["setting"] == name)
        cells = []
        for m in COMPACT:
            r = next((x for x in rows if x["setting"] == name and x["method"] == m), None)
            if r is None or r["n"] == 0:
                cells.append("no fit")
                continue
            z = (r["coverage_reported"] - LEVEL) / r["se_nominal"]
            flag = " **low**" if z < -2 else ""
            n = "" if r["n"] == n_max else f", n={r['n']}"
            cells.append(f"{r['coverage_reported']:.2f}{flag} ({r['width_reported']:.3f}{n})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def docs_block(summary: list, meta: dict) -> str:
    reps, ref_reps, total = meta["reps"], meta["ref_reps"], meta["seconds"]
    note = (f"Generated by `benchmarks/coverage_study.py` in {total / 60:.0f} min on {meta['cpu_count']} cores: "
            f"{reps} data sets per setting ({ref_reps} for the reference bootstrap), nominal level "
            f"{LEVEL:.0%}; a correct interval shows coverage within about 2 x sqrt(0.09 / n) of 0.90 "
            f"(+-{2 * np.sqrt(0.09 / reps):.2f} at n = {reps}, +-{2 * np.sqrt(0.09 / max(ref_reps, 1)):.2f} "
            f"at n = {ref_reps}). **low** marks coverage more than 2 binomial standard errors below 0.90.")
    em = meta.get("em_route")
    if em:
        note += (f" The EM route column was added by a separate run (`--em-route-only`, {em['seconds'] / 60:.0f} min, "
                 f"{em['reps']} data sets per setting, the same data sets as the first {em['reps']} of the others).")
    return (f"{note}\n\n**Coverage of the reported 90% interval (mean width in brackets)**, debiased intervals; "
            f"n = {reps} data sets unless stated (fewer where EM did not converge):\n\n{compact_table(summary)}\n\n"
            "<details><summary>Full table: both interval constructions, two-sided and one-sided coverage, share of "
            "one-sided readings, bias and RMSE of the point estimate</summary>\n\n"
            f"{markdown_table(summary)}\n\n</details>")


START, END = "<!-- coverage-table:start -->", "<!-- coverage-table:end -->"


def write_docs(path: Path, block_text: str) -> None:
    block = f"{START}\n{block_text}\n{END}"
    text = path.read_text() if path.exists() else f"# Coverage study\n\n{START}\n{END}\n"
    if START not in text:
        text += f"\n{START}\n{END}\n"
    pre, rest = text.split(START, 1)
    _, post = rest.split(END, 1)
    path.write_text(pre + block + post)


POPULATION: dict = {}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=80)
    ap.add_argument("--ref-reps", type=int, default=20, help="data sets per setting that also get the reference bootstrap")
    ap.add_argument("--settings", nargs="*", default=list(SETTINGS))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "coverage_study.json"))
    ap.add_argument("--docs", default=str(ROOT / "docs" / "coverage.md"))
    ap.add_argument("--no-docs", action="store_true")
    ap.add_argument("--from-json", default=None, help="rewrite the docs table from a saved run (no simulation)")
    ap.add_argument("--em-reps", type=int, default=80, help="data sets per setting that also get the EM route")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar (shown only when stderr is a terminal)")
    ap.add_argument("--em-route-only", action="store_true",
                    help="run only the EM route on the first --em-reps data sets of each setting and merge it into "
                         "the saved run at --out (the other columns are not rerun)")
    args = ap.parse_args(argv)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        write_docs(Path(args.docs), docs_block(summarise(saved["records"]), saved["meta"]))
        print(f"updated {args.docs} from {args.from_json}")
        return
    jax.config.update("jax_compilation_cache_dir", os.environ.get("JAX_COMPILATION_CACHE_DIR", "/tmp/noisycal_jax_cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    for name in args.settings:
        kw = setting_kwargs(name)
        POPULATION[name] = population_ece(kw["curve"], kw["score_beta"])
    if args.em_route_only:
        merge_em_route(args)
        return
    records, t_start = [], time.time()
    for name in args.settings:
        t_set = time.time()
        for rep in progress(range(args.reps), enabled=not args.no_progress, desc=f"coverage {name}"):
            records.append(run_rep(name, rep, with_reference=rep < args.ref_reps, with_em_route=rep < args.em_reps))
        print(f"{name}: {args.reps} reps in {time.time() - t_set:.0f} s", flush=True)
        summary = summarise(records)
        for r in summary:
            if r["setting"] == name:
                print(f"   {r['method']:36s} cov {r['coverage_reported']:.2f} (two {r['coverage_two_sided']:.2f}, "
                      f"one {r['coverage_one_sided']:.2f})  width {r['width_reported']:.4f}  bias {r['bias']:+.4f}",
                      flush=True)
    total = time.time() - t_start
    summary = summarise(records)
    meta = dict(level=LEVEL, n_bins=N_BINS, base=BASE, settings=SETTINGS, nuts=NUTS, reference_boot=REF_BOOT,
                reference_starts=REF_STARTS, reps=args.reps, ref_reps=args.ref_reps, seconds=total,
                em_route=dict(EM_ROUTE, reps=min(args.em_reps, args.reps), seconds=sum(
                    r.get("em_route_seconds", 0.0) for r in records)),
                population_ece=POPULATION, jax=jax.__version__, cpu_count=os.cpu_count())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "summary": summary, "records": records}, separators=(",", ":"),
                              default=float))
    print(f"wrote {out} ({total:.0f} s)")
    if not args.no_docs:
        write_docs(Path(args.docs), docs_block(summary, meta))
        print(f"updated {args.docs}")


def merge_em_route(args) -> None:
    """``--em-route-only``: add the EM route to the saved run, in rounds of 20 data sets over every setting.

    The JSON (and the docs table, unless ``--no-docs``) is rewritten after each (round, setting), so an
    interrupted run leaves a consistent file whose EM column has the data sets done so far.
    """
    out = Path(args.out)
    saved = json.loads(out.read_text())
    records = saved["records"]
    index = {(r["setting"], r["rep"]): r for r in records}
    meta = saved["meta"]
    seconds, done = 0.0, 0
    for start in range(0, args.em_reps, 20):
        for name in args.settings:
            t_set = time.time()
            reps = [rep for rep in range(start, min(start + 20, args.em_reps)) if (name, rep) in index]
            for rep in reps:
                record = index[(name, rep)]
                _, data, truths = simulate_rep(name, rep)
                if not np.allclose([truths[k] for k in ("sample_oracle", "conditional")],
                                   [record["truth"][k] for k in ("sample_oracle", "conditional")], rtol=0, atol=1e-12):
                    raise RuntimeError(f"{name} rep {rep}: the simulated data set differs from the saved one.")
                add_em_route(record, data)
            seconds += time.time() - t_set
            done = max(done, reps[-1] + 1 if reps else done)
            # The groups as their constructor's text: a Binning is not JSON (the earlier run stored the count, 5).
            meta["em_route"] = dict(EM_ROUTE, groups=repr(EM_ROUTE["groups"]), reps=done, seconds=seconds)
            out.write_text(json.dumps(saved, separators=(",", ":"), default=float))
            got = [r["methods"]["em_route/debiased"] for r in records if r["setting"] == name
                   and "em_route/debiased" in r["methods"]]
            cov = np.mean([g["covered_reported"] for g in got]) if got else float("nan")
            print(f"{name}: reps {start}-{start + len(reps) - 1} in {time.time() - t_set:.0f} s; EM route coverage "
                  f"{cov:.2f} over {len(got)}", flush=True)
    saved["summary"] = summarise(records)
    out.write_text(json.dumps(saved, separators=(",", ":"), default=float))
    print(f"wrote {out} ({seconds:.0f} s for the EM route)")
    if not args.no_docs:
        write_docs(Path(args.docs), docs_block(saved["summary"], meta))
        print(f"updated {args.docs}")


if __name__ == "__main__":
    main()
