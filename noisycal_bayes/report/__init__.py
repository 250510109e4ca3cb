"""Evaluation results for people and machines: terminal summary, JSON, HTML and a report folder.

An :class:`~noisycal_bayes.evaluation.Evaluation` (what :func:`noisycal_bayes.evaluate` returns: channels,
NC-ECE with its interval, the naive metrics, diagnostics, warnings) is rendered here; its methods call
these functions:

- :func:`format_summary` — plain text for the terminal (``Evaluation.summary()``);
- :func:`evaluation_to_dict` — the machine-readable schema written by ``--json`` (``Evaluation.to_json()``);
- :func:`evaluation_html` — a compact HTML table for notebooks (``Evaluation._repr_html_()``);
- :func:`write_report` — a folder with PNG figures, ``summary.md``, ``results.json`` and ``report.html``
  (``Evaluation.write_report(dir)``); the self-contained page is built by
  :func:`noisycal_bayes.report.page.report_page` from the same row builders.

K-class evaluations (:class:`~noisycal_bayes.evaluation.MulticlassEvaluation`, ``ev.kind == "multiclass"``) go
through the same functions, which hand them to the K-class renderers of this module (``format_multiclass_summary``,
``multiclass_to_dict``, ...; their rows: the two NC-ECEs, per class, the confusion diagonals): the K schema is the
binary one's ``schema_version`` with ``kind: "multiclass"``, ``confusion`` matrices and ``classwise_nc_ece``.

Files are written to a temporary location and renamed into place, so an error never leaves a
half-written report behind.

The five renderers of one result (text, Markdown, HTML, JSON, report folder) share the row builders above
them, so every renderer shows the same numbers; the self-contained HTML page of both kinds is in
``report/page.py``.
"""
from __future__ import annotations

import html
import json
import math
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

from ..models.em_result import SPARSE_MIN_ANNOTATORS

__all__ = ["atomic_write_text", "evaluation_html", "evaluation_to_dict", "format_multiclass_summary", "format_summary",
           "json_text", "multiclass_html", "multiclass_report_page", "multiclass_to_dict", "summary_markdown",
           "summary_markdown_multiclass", "write_json", "write_multiclass_report", "write_report"]

#: 2: ``nc_ece.value`` is the paper's NC-ECE on every route; new ``nc_ece`` keys ``debiased``,
#: ``interval_to_read``, ``calibration_p_value``, ``interval_centre`` (issue 15). 1: before.
SCHEMA_VERSION = 2
#: K classes: above this many classes the diagonal table shows only the mean diagonal per annotator in text and
#: Markdown (every entry is in ``results.json``).
MAX_DIAGONAL_COLUMNS = 10


# ------------------------------------------------------------------------------------------ helpers
def _num(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{digits}f}"


def _interval(lo, hi, digits: int = 3) -> str:
    if lo is None or hi is None:
        return ""
    return f"[{_num(lo, digits)}, {_num(hi, digits)}]"


def _is_number(text: str) -> bool:
    if text in ("", "-"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def _text_table(header, rows) -> str:
    cells = [list(map(str, header))] + [[str(c) for c in r] for r in rows]
    width = [max(len(r[k]) for r in cells) for k in range(len(header))]
    numeric = [all(_is_number(r[k]) for r in cells[1:]) for k in range(len(header))]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  " + "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(r, width, numeric)))
        if n == 0:
            lines.append("  " + "  ".join("-" * w for w in width))
    return "\n".join(line.rstrip() for line in lines)


def _md_table(header, rows) -> str:
    out = ["| " + " | ".join(map(str, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


#: Above this many annotators the tables show the population and the flagged annotators, not every row
#: (the full table is in ``results.json`` and ``annotators.csv``).
CROWD_TABLE_LIMIT = SPARSE_MIN_ANNOTATORS
#: Flagged annotators shown in the text, Markdown and HTML tables of a crowd.
MAX_FLAGGED_ROWS = 20


def _labels_per_annotator(ev, n_annotators: int):
    data = getattr(ev, "data", None)
    return (np.bincount(np.asarray(data.responses.annotator), minlength=n_annotators)
            if data is not None else np.full(n_annotators, np.nan))


def annotator_table(ev):
    """One row per annotator, with its ``flag``; every annotator of a crowd is in this table (``annotators.csv``).

    Binary: ``annotator``, ``n_labels``, ``fpr``, ``tpr``, ``gap``, their interval bounds (``*_lower`` /
    ``*_upper``, NaN when the evaluation has none) and ``flag``: ``"uninformative"`` where the gap's interval
    contains 0 (the annotator gets weight 0 in the corrected labels), ``"adversarial"`` where the gap is negative
    and its interval excludes 0, else ``"ok"``. The intervals are the evaluation's (posterior or bootstrap), and
    the flags those the fit reported (:attr:`FitResult.annotators`, EM) or, without them, read from these
    intervals.

    K classes: ``annotator``, ``n_labels``, ``gap`` = ``(trace(C_j) - 1) / (K - 1)`` (0 for a spammer, whose
    rows are all equal; 1 for a perfect annotator; ``tpr - fpr`` at K = 2) with ``gap_lower`` / ``gap_upper``, its
    approximate 95% interval ``gap -+ 1.96 se``, ``se^2 = sum_y c_y (1 - c_y) / n_jy / (K - 1)^2`` with
    ``n_jy = n_labels_j * prevalence_y`` and ``c_y = (n_jy C_yy + 1/2) / (n_jy + 1)`` (the binomial variance of
    each diagonal entry, with Jeffreys' half count so that entries of 0 or 1 keep a variance; at K = 2 the binary
    ``tpr (1 - tpr) / n_1 + fpr (1 - fpr) / n_0``); ``mean_diagonal``, ``min_diagonal`` and its
    ``min_diagonal_class``, ``condition`` (2-norm condition number of ``C_j``), ``usable`` and ``flag``:
    ``"adversarial"`` where the gap's interval lies below 0 (less often right than a spammer),
    ``"uninformative"`` where it contains 0 (spammer-like), ``"near_singular"`` where the confusion matrix is not
    usable (condition number above the limit: weight 0 in the corrected labels), else ``"ok"``.
    """
    import pandas as pd

    if _is_k(ev):
        from ..core import confusion_condition

        conf = np.asarray(ev.confusion, dtype=np.float64)
        K = conf.shape[1]
        diag = np.diagonal(conf, axis1=1, axis2=2)
        gap = (diag.sum(axis=1) - 1.0) / (K - 1)
        usable = np.asarray(ev.usable, dtype=bool)
        out = pd.DataFrame({"annotator": list(ev.annotator_ids)})
        out["n_labels"] = _labels_per_annotator(ev, len(out))
        prev = np.asarray(ev.prevalence, dtype=np.float64).reshape(-1, K).mean(axis=0)
        n_jy = np.maximum(np.asarray(out["n_labels"], dtype=np.float64)[:, None] * prev[None, :], 1.0)
        c = (diag * n_jy + 0.5) / (n_jy + 1.0)  # Jeffreys: entries of 0 or 1 keep a variance
        se = np.sqrt((c * (1.0 - c) / n_jy).sum(axis=1)) / (K - 1)
        out["gap"] = gap
        out["gap_lower"], out["gap_upper"] = gap - 1.96 * se, gap + 1.96 * se
        out["mean_diagonal"] = diag.mean(axis=1)
        out["min_diagonal"] = diag.min(axis=1)
        out["min_diagonal_class"] = [ev.classes[int(k)] for k in np.argmin(diag, axis=1)]
        out["condition"] = np.asarray(confusion_condition(conf), dtype=np.float64)
        out["usable"] = usable
        lo, hi = out["gap_lower"].to_numpy(), out["gap_upper"].to_numpy()
        out["flag"] = np.where(hi < 0, "adversarial", np.where(lo <= 0, "uninformative",
                                                                np.where(~usable, "near_singular", "ok")))
        return out
    ch = ev.channel
    out = pd.DataFrame({"annotator": list(ch.annotator_ids)})
    out["n_labels"] = _labels_per_annotator(ev, len(out))
    for q in ("fpr", "tpr", "gap"):
        out[q] = np.asarray(getattr(ch, q), dtype=np.float64)
        iv = (ev.channel_intervals or {}).get(q)
        out[f"{q}_lower"] = np.nan if iv is None else np.asarray(iv[0], dtype=np.float64)
        out[f"{q}_upper"] = np.nan if iv is None else np.asarray(iv[1], dtype=np.float64)
    fit = getattr(ev, "fit", None)
    table = None if fit is None else getattr(fit, "annotators", None)
    if table is not None and len(table) == len(out):
        out["flag"] = table["flag"].to_numpy()
    else:
        lo, hi = out["gap_lower"].to_numpy(), out["gap_upper"].to_numpy()
        known = np.isfinite(lo) & np.isfinite(hi)
        flag = np.where(known & (lo <= 0) & (hi >= 0), "uninformative",
                        np.where(known & (hi < 0), "adversarial", "ok"))
        out["flag"] = np.where(~known & (out["gap"].to_numpy() <= 0), "adversarial", flag)
    return out


def _is_crowd(ev) -> bool:
    n = len(ev.annotator_ids) if _is_k(ev) else len(ev.channel.annotator_ids)
    return n > CROWD_TABLE_LIMIT


def typical_confusion(ev) -> np.ndarray:
    """K classes: the crowd's typical confusion matrix, the label-weighted mean ``sum_j n_j C_j / sum_j n_j``
    (``n_j`` the annotator's responses), shape (K, K); rows are clean classes."""
    conf = np.asarray(ev.confusion, dtype=np.float64)
    n = np.asarray(_labels_per_annotator(ev, conf.shape[0]), dtype=np.float64)
    w = n if np.isfinite(n).all() and n.sum() > 0 else np.ones(conf.shape[0])
    return np.einsum("j,jyk->yk", w, conf) / w.sum()


def _population_lines(ev) -> list:
    """Crowds: the population of channels (K classes: of confusion matrices) in a few lines, and where the full
    table is."""
    if not _is_crowd(ev):
        return []
    t = annotator_table(ev)

    def spread(col, name=None):
        v = t[col].to_numpy(dtype=np.float64)
        lo, med, hi = np.quantile(v, [0.05, 0.5, 0.95])
        return f"{name or col} median {med:.3f} (5-95%: {lo:.3f} to {hi:.3f})"

    n_lab = t["n_labels"].to_numpy(dtype=np.float64)
    counts = t["flag"].value_counts()
    if _is_k(ev):
        diag = np.diagonal(typical_confusion(ev))
        shown = ", ".join(f"{c} {d:.2f}" for c, d in zip(ev.classes[:MAX_DIAGONAL_COLUMNS], diag))
        more = ", ..." if len(diag) > MAX_DIAGONAL_COLUMNS else ""
        lines = [f"Population of {len(t)} annotators: {spread('gap', 'gap (trace - 1) / (K - 1)')}; "
                 f"{spread('mean_diagonal', 'mean diagonal')}.",
                 f"Typical confusion matrix (label-weighted mean; results.json `crowd`): diagonal {shown}{more}."]
        flags = (f"Flagged: {int(counts.get('uninformative', 0))} uninformative (gap interval contains 0), "
                 f"{int(counts.get('adversarial', 0))} adversarial (gap interval below 0), "
                 f"{int(counts.get('near_singular', 0))} near singular (condition number above the limit: weight 0 "
                 "in the corrected labels). The table lists them; every annotator is in results.json (`confusion`, "
                 "`crowd`) and annotators.csv.")
    else:
        lines = [f"Population of {len(t)} annotators: {spread('fpr')}; {spread('tpr')}; {spread('gap')}."]
        flags = (f"Flagged: {int(counts.get('uninformative', 0))} uninformative (gap interval contains 0: weight 0 "
                 f"in the corrected labels), {int(counts.get('adversarial', 0))} adversarial (gap < 0: labels used "
                 "with their sign). The table lists them; every annotator is in results.json (`channels`) and "
                 "annotators.csv.")
    if np.isfinite(n_lab).all():
        lines.append(f"Labels per annotator: median {np.median(n_lab):.0f} (min {n_lab.min():.0f}, max "
                     f"{n_lab.max():.0f}).")
    return lines + [flags]


def _channel_rows(ev, truth_channel=None):
    if _is_crowd(ev):
        return _flagged_rows(ev)
    header = ["annotator", "fpr", "tpr", "gap"]
    has_iv = ev.channel_intervals is not None
    if has_iv:
        header = ["annotator", "fpr", "interval", "tpr", "interval", "gap", "interval"]
    if truth_channel is not None:
        header += ["true fpr", "true tpr", "true gap"]
    rows = []
    for j, name in enumerate(ev.channel.annotator_ids):
        row = [str(name)]
        for q in ("fpr", "tpr", "gap"):
            row.append(_num(float(getattr(ev.channel, q)[j])))
            if has_iv:
                iv = ev.channel_intervals.get(q)
                row.append("" if iv is None else _interval(float(iv[0][j]), float(iv[1][j]), 2))
        if truth_channel is not None:
            row += [_num(float(getattr(truth_channel, q)[j])) for q in ("fpr", "tpr", "gap")]
        rows.append(row)
    return header, rows


def _flagged_rows(ev):
    """Crowds: the flagged annotators (most labels first), at most ``MAX_FLAGGED_ROWS``."""
    t = annotator_table(ev)
    flagged = t[t["flag"] != "ok"].sort_values("n_labels", ascending=False, kind="stable")
    if _is_k(ev):
        header = ["annotator", "flag", "labels", "gap", "gap interval", "min diagonal (class)", "condition"]
    else:
        header = ["annotator", "flag", "labels", "fpr", "tpr", "gap", "gap interval"]
    rows = []
    for r in flagged.head(MAX_FLAGGED_ROWS).itertuples(index=False):
        row = [str(r.annotator), r.flag, "" if not np.isfinite(r.n_labels) else f"{int(r.n_labels)}"]
        if _is_k(ev):
            row += [_num(r.gap), _interval(r.gap_lower, r.gap_upper, 2), f"{_num(r.min_diagonal)} ({r.min_diagonal_class})",
                    f"{r.condition:.3g}"]
        else:
            row += [_num(r.fpr), _num(r.tpr), _num(r.gap), _interval(r.gap_lower, r.gap_upper, 2)]
        rows.append(row)
    if len(flagged) > MAX_FLAGGED_ROWS:
        rows.append([f"... {len(flagged) - MAX_FLAGGED_ROWS} more"] + [""] * (len(header) - 1))
    if not rows:
        rows.append(["(none flagged)"] + [""] * (len(header) - 1))
    return header, rows


def _is_k(ev) -> bool:
    return getattr(ev, "kind", "binary") == "multiclass"


def _point_name(ev) -> str:
    what = "confusion matrices" if _is_k(ev) else "channels"
    return f"the posterior-mean {what}" if ev.method == "nuts" else f"the EM estimate of the {what}"


def _interval_note(nc, *, around: bool = True) -> str:
    """Where the interval is, which number it is built around (``around``), and how to read it."""
    iv = _interval(nc.lower, nc.upper)
    if not iv:
        return "no interval"
    pct = f"{100 * nc.level:.0f}%"
    if nc.interval_to_read == "upper_one_sided":
        return f"{pct} one-sided interval {iv}: read the upper bound"
    if not around:
        return f"{pct} interval {iv}"
    centre = "the debiased estimate" if nc.centre == "debiased" else (nc.centre or "the draws")
    return f"{pct} interval {iv}, built around {centre}"


def _estimate_tail(nc, *, around: bool = True, target: bool = True) -> str:
    """``"; debiased estimate 0.041; 90% interval [...] (how; target: ...)"`` (parts without numbers left out)."""
    rest = "" if nc.debiased is None else f"; debiased estimate {_num(nc.debiased)}"
    if nc.lower is not None:
        how = f"{nc.interval_method}; target: {nc.target}" if target else nc.interval_method
        rest += f"; {_interval_note(nc, around=around)} ({how})"
    return rest


def _calibration_rows(ev, oracle_ece=None):
    nc = ev.nc_ece
    plug_in = f"paper's plug-in estimate, at {_point_name(ev)}"
    if nc.debiased is None:
        rows = [["NC-ECE (noise-corrected)", _num(nc.value), f"{plug_in}; {_interval_note(nc)}"]]
    else:
        rows = [["NC-ECE (noise-corrected)", _num(nc.value), plug_in],
                ["NC-ECE, debiased estimate", _num(nc.debiased), _interval_note(nc)]]
    nv = ev.naive
    tie = f"{nv.n_ties} tied items counted as {1 if nv.ties == 'positive' else 0}"
    rows.append(["ECE vs majority vote", _num(nv.majority_vote_ece), tie])
    rows.append(["SMECE vs vote fraction", _num(nv.vote_fraction_smece), ""])
    if _is_crowd(ev) and len(nv.annotator_ece):
        e = nv.annotator_ece["ece"].to_numpy(dtype=np.float64)
        rows.append(["ECE vs single annotators (median)", _num(float(np.median(e))),
                     f"{len(e)} annotators, each on its own items; range {e.min():.3f} to {e.max():.3f} "
                     "(every one in results.json)"])
    else:
        for r in nv.annotator_ece.itertuples(index=False):
            rows.append([f"ECE vs annotator {r.annotator}", _num(float(r.ece)), f"{int(r.n_items)} items"])
    if oracle_ece is not None:
        rows.append(["oracle ECE (clean labels)", _num(oracle_ece), "sample oracle ECE: the truth, for checking"])
    return ["metric", "value", "note"], rows


def _recal_rows(recal):
    header = ["map", "fitted to", "parameters", "NC-ECE (held out)"]
    oracle = any(r.oracle_ece is not None for r in recal)
    if oracle:
        header.append("oracle ECE (held out)")
    rows = []
    for r in recal:
        row = [r.map_name, r.fitted_to, r.params, _num(r.nc_ece)]
        if oracle:
            row.append(_num(r.oracle_ece))
        rows.append(row)
    return header, rows


def _comparison_rows(evs, truth=None):
    """Side-by-side rows (NC-ECE, interval target, gap per annotator) for several evaluations."""
    truth_channel = None if truth is None else truth.get("channel")
    oracle = None if truth is None else getattr(evs[0].naive, "clean_ece", None)
    header = ["quantity"] + [ev.method.upper() for ev in evs] + (["truth"] if truth is not None else [])
    row = ["NC-ECE"] + [f"{_num(ev.nc_ece.value)} {_interval(ev.nc_ece.lower, ev.nc_ece.upper)}".strip()
                        for ev in evs]
    rows = [row + ([f"{_num(oracle)} (oracle ECE)"] if truth is not None else [])]
    rows.append(["NC-ECE debiased"] + [_num(ev.nc_ece.debiased) for ev in evs] + (["-"] if truth is not None else []))
    rows.append(["interval target"] + [ev.nc_ece.target.split(":")[0].split(" (")[0] for ev in evs]
                + (["-"] if truth is not None else []))
    for j, name in enumerate(evs[0].channel.annotator_ids):
        for q in ("fpr", "gap"):
            row = [f"{q} {name}"]
            for ev in evs:
                iv = (ev.channel_intervals or {}).get(q)
                cell = _num(float(getattr(ev.channel, q)[j]))
                if iv is not None:
                    cell += " " + _interval(float(iv[0][j]), float(iv[1][j]), 2)
                row.append(cell)
            if truth is not None:
                row.append(_num(float(getattr(truth_channel, q)[j])) if truth_channel is not None else "-")
            rows.append(row)
    return header, rows


def _oracle(ev, truth):
    """True channel (from ``truth``) and oracle ECE (from the naive metrics, when clean labels were given)."""
    return (None if truth is None else truth.get("channel")), getattr(ev.naive, "clean_ece", None)


def _interval_lines(nc) -> list:
    """The lines under the calibration table: what the interval is, its target and the one-sided bound."""
    if nc.lower is None:
        return []
    around = "the debiased estimate" if nc.centre == "debiased" else (nc.centre or "the draws")
    out = [f"  interval: {nc.interval_method}; built around {around}; target: {nc.target}."]
    if nc.upper_bound is not None:
        out.append(f"  one-sided {100 * nc.level:.0f}% upper bound: {_num(nc.upper_bound)} "
                   "(quote this when NC-ECE is near 0).")
    return out


def _check_lines(ev) -> list:
    """The "Assumption checks" section: one line per predictive check of the channel model, and a warning on
    the NC-ECE when a check warned (the number rests on a model the data question)."""
    checks = getattr(ev, "checks", ())
    if not checks:
        return []
    out = ["", "Assumption checks (predictive checks of the channel model; docs/model_checks.md)"]
    for c in checks:
        p = "" if c.get("p_value") is None else f", p = {c['p_value']:.3f}"
        out.append(f"  {c['name']}: {c['status']}{p}. {c.get('detail') or ''}".rstrip())
    warned = [c["name"] for c in checks if c.get("status") == "warn"]
    if warned:
        out.append(f"  NC-ECE above assumes the channel model; the data question it ({', '.join(warned)} warned): "
                   "read the interval as conditional on the model.")
    return out


def _headline(ev):
    """``("NC-ECE = 0.043", "(paper's plug-in estimate, ...); debiased estimate ...; interval ...")``; K classes:
    ``("Top-label NC-ECE = 0.043", "(noise-corrected top-label ECE at ...); ...")``."""
    nc = ev.nc_ece
    if _is_k(ev):
        return (f"Top-label NC-ECE = {_num(nc.value)}", f"(noise-corrected top-label ECE at {_point_name(ev)})"
                + _estimate_tail(nc, around=False))
    return f"NC-ECE = {_num(nc.value)}", f"(paper's plug-in estimate, at {_point_name(ev)})" + _estimate_tail(nc)


# ------------------------------------------------------------------------------------------ renderers
def format_summary(ev, *, truth=None, recalibration=None, title: str | None = None,
                   comparison=None) -> str:
    """A readable plain-text summary of an :class:`Evaluation` (what the command line prints).

    ``truth`` (optional) is a dict with ``channel`` (true Channel) — shown beside the estimates — and the
    oracle ECE comes from ``ev.naive.clean_ece`` when the naive metrics were computed with clean labels.
    ``recalibration`` is a list of :class:`RecalibrationRow` (default: ``ev.recalibration``);
    ``comparison`` a list of evaluations of the same data by different engines (e.g. EM and NUTS), shown
    side by side. A K-class evaluation gets :func:`format_multiclass_summary` (``title`` only).
    """
    if _is_k(ev):
        return format_multiclass_summary(ev, title=title)
    truth_channel, oracle = _oracle(ev, truth)
    recalibration = ev.recalibration if recalibration is None else recalibration
    out = []
    if title:
        out += [title, "=" * len(title)]
    out.append(f"{ev.n_items} items, {ev.n_annotators} annotators; {ev.bins} equal-width bins, "
               f"{ev.groups} score groups, {ev.weights} annotator weights.")
    out += ["", f"Annotator channels ({ev.method_detail})"] + _population_lines(ev)
    out += [_text_table(*_channel_rows(ev, truth_channel))]
    out += ["", "Calibration error (lower is better; naive metrics treat noisy labels as truth)",
            _text_table(*_calibration_rows(ev, oracle))]
    out += _interval_lines(ev.nc_ece) + _check_lines(ev)
    d = ev.diagnostics or {}
    if any(d.get(k) is not None for k in ("rhat_max", "ess_min", "divergences")):
        out += ["", f"MCMC diagnostics: R-hat max {_num(d.get('rhat_max'))}, ESS min "
                    f"{_num(d.get('ess_min'), 0)}, divergences {d.get('divergences')}"]
    if comparison and len(comparison) > 1:
        out += ["", "Engines side by side (same data)", _text_table(*_comparison_rows(comparison, truth))]
    if recalibration:
        out += ["", "Recalibration (fitted on one half of the items, judged on the other half)",
                _text_table(*_recal_rows(recalibration))]
    if ev.warnings:
        out += ["", "Warnings:"] + [f"  - {w}" for w in ev.warnings]
    return "\n".join(out)


def _md_checks_and_warnings(ev) -> list:
    """The Markdown "Assumption checks" and "Warnings" sections (empty when there are none)."""
    out = []
    check_lines = _check_lines(ev)
    if check_lines:
        out += ["## Assumption checks", ""] + [f"- {line.strip()}" for line in check_lines[2:]] + [""]
    if ev.warnings:
        out += ["## Warnings", ""] + [f"- {w}" for w in ev.warnings] + [""]
    return out


def summary_markdown(ev, *, truth=None, recalibration=None, figures=(), title: str = "Calibration report",
                     source: str | None = None, comparison=None) -> str:
    """The one-page Markdown summary written to ``summary.md`` (figures linked by file name; K classes:
    :func:`summary_markdown_multiclass`)."""
    if _is_k(ev):
        return summary_markdown_multiclass(ev, figures=figures, title=title, source=source)
    truth_channel, oracle = _oracle(ev, truth)
    recalibration = ev.recalibration if recalibration is None else recalibration
    out = [f"# {title}", ""]
    if source:
        out += [f"Data: {source}", ""]
    out += [f"{ev.n_items} items, {ev.n_annotators} annotators; {ev.bins} equal-width evaluation bins, "
            f"{ev.groups} score groups for the channels, {ev.weights} annotator weights, seed {ev.seed}.", ""]
    lead, rest = _headline(ev)
    out += [f"**{lead}** {rest}.", ""]
    out += ["## Calibration error", "", _md_table(*_calibration_rows(ev, oracle)), "",
            "Naive metrics treat the noisy labels as the truth and are biased; NC-ECE corrects for the "
            "annotators' channels.", ""]
    out += ["## Annotator channels", "", ev.method_detail + ".", ""] + [line + "\n" for line in _population_lines(ev)]
    out += [_md_table(*_channel_rows(ev, truth_channel)), ""]
    if comparison and len(comparison) > 1:
        out += ["## Engines side by side", "", _md_table(*_comparison_rows(comparison, truth)), ""]
    if recalibration:
        out += ["## Recalibration", "", "Maps fitted on one half of the items and judged on the other half.", "",
                _md_table(*_recal_rows(recalibration)), ""]
    d = ev.diagnostics or {}
    if any(d.get(k) is not None for k in ("rhat_max", "ess_min", "divergences")):
        out += ["## Diagnostics", "", f"R-hat max {_num(d.get('rhat_max'))}, ESS min {_num(d.get('ess_min'), 0)}, "
                f"divergences {d.get('divergences')}.", ""]
    out += _md_checks_and_warnings(ev)
    if figures:
        out += ["## Figures", ""]
        for name in figures:
            out += [f"![{name}]({name})", ""]
            if name in _CAPTIONS:
                out += [_CAPTIONS[name], ""]
    return "\n".join(out)


def _html_table(header, rows) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def evaluation_html(ev) -> str:
    """A compact HTML view for notebooks: channels with intervals, NC-ECE with interval and target, naive
    metrics, diagnostics and warnings (``Evaluation._repr_html_``; K classes: :func:`multiclass_html`)."""
    if _is_k(ev):
        return multiclass_html(ev)
    esc = html.escape
    nc = ev.nc_ece
    out = [f"<div><p><b>Calibration evaluation</b> ({esc(ev.method_detail)}): {ev.n_items} items, "
           f"{ev.n_annotators} annotators; {ev.bins} equal-width bins, {ev.groups} score groups, "
           f"{esc(ev.weights)} annotator weights.</p>",
           _html_table(*_calibration_rows(ev, getattr(ev.naive, "clean_ece", None)))]
    if nc.lower is not None:
        out.append(f"<p>Interval: {esc(nc.interval_method)}; target: {esc(nc.target)}.</p>")
    out += ["<p><b>Annotator channels</b></p>"] + [f"<p>{html.escape(line)}</p>" for line in _population_lines(ev)]
    out += [_html_table(*_channel_rows(ev))]
    d = ev.diagnostics or {}
    if any(d.get(k) is not None for k in ("rhat_max", "ess_min", "divergences")):
        out.append(f"<p>MCMC diagnostics: R-hat max {_num(d.get('rhat_max'))}, ESS min {_num(d.get('ess_min'), 0)}, "
                   f"divergences {d.get('divergences')}.</p>")
    if ev.recalibration:
        out += ["<p><b>Recalibration</b> (held-out half)</p>", _html_table(*_recal_rows(ev.recalibration))]
    if ev.warnings:
        out.append("<p><b>Warnings</b></p><ul>" + "".join(f"<li>{esc(w)}</li>" for w in ev.warnings) + "</ul>")
    return "\n".join(out) + "</div>"


_CAPTIONS = {
    "reliability.png": "Noise-corrected frequency of the positive class per score bin (with its interval), beside "
                       "what majority vote and vote fractions would show; the diagonal is perfect calibration.",
    "channels.png": "Each annotator's false-positive rate, true-positive rate and gap with intervals. A small gap "
                    "makes the correction noisy.",
    "gap_sensitivity.png": "NC-ECE if every annotator's gap were scaled by the factor on the x axis (1 = as "
                           "estimated), with the other parameters re-fitted (profile likelihood); the shaded "
                           "factors are those the data allow, and their NC-ECE range is the horizontal band. The "
                           "dashed curve holds fpr fixed instead, a direction the data rule out "
                           "(docs/model_checks.md).",
    "checks.png": "Standardized residuals of the channel model's predictive check per (score group, response "
                  "pattern) cell: large values show where the data disagree with the model (docs/model_checks.md).",
    "top_label_reliability.png": "K classes: corrected accuracy of the predicted class per confidence bin (with its "
                                 "interval), beside the accuracy against the majority vote and the vote distribution; "
                                 "the diagonal is perfect top-label calibration.",
    "confusion_matrices.png": "K classes: each annotator's estimated confusion matrix, P(label | clean class); a "
                              "strong diagonal is a reliable annotator.",
    "nc_ece.png": "Distribution of the calibration error (bootstrap replicates or posterior draws) with the "
                  "estimate and its interval.",
}


def _clean(x):
    """JSON-safe: NaN/inf -> None, numpy scalars -> Python."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, np.ndarray):
        return [_clean(v) for v in x.tolist()]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, (np.bool_,)):
        return bool(x)
    return x


def evaluation_to_dict(ev) -> dict:
    """The ``--json`` schema.

    Keys: ``nc_ece`` {value, lower, upper, upper_bound, level, target, method, interval_method};
    ``channels`` (one object per annotator: annotator, fpr, fpr_lower, fpr_upper, tpr, tpr_lower,
    tpr_upper, gap, gap_lower, gap_upper — bounds null when not available — n_labels and flag "ok" |
    "uninformative" | "adversarial", see :func:`annotator_table`); ``flag_counts``; ``prevalence`` (per score
    group); ``naive`` {ece_majority, majority_ties, majority_ties_counted_as, smece_vote_fraction,
    ece_per_annotator (annotator -> ECE)}; ``diagnostics`` {rhat_max, ess_min, divergences, warnings};
    ``reliability`` (one object per bin); ``settings`` {bins, groups, weights, seed}; ``checks`` (one
    object per assumption check: name, status "pass" | "warn" | "not_testable", statistic, p_value, detail); ``n_items``;
    ``n_annotators``; ``schema_version``. NaN is written as null. A K-class evaluation gets
    :func:`multiclass_to_dict` (``kind: "multiclass"``).
    """
    if _is_k(ev):
        return multiclass_to_dict(ev)
    channels = []
    table = annotator_table(ev)
    for j, name in enumerate(ev.channel.annotator_ids):
        row = {"annotator": name}
        for q in ("fpr", "tpr", "gap"):
            row[q] = float(getattr(ev.channel, q)[j])
            iv = (ev.channel_intervals or {}).get(q)
            row[f"{q}_lower"] = None if iv is None else float(iv[0][j])
            row[f"{q}_upper"] = None if iv is None else float(iv[1][j])
        row["flag"] = str(table["flag"].iat[j])
        n_lab = table["n_labels"].iat[j]
        row["n_labels"] = None if not np.isfinite(n_lab) else int(n_lab)
        channels.append(row)
    nv, nc = ev.naive, ev.nc_ece
    d = ev.diagnostics or {}
    out = {
        "schema_version": SCHEMA_VERSION,
        "nc_ece": {"value": nc.value, "debiased": nc.debiased, "lower": nc.lower, "upper": nc.upper,
                   "upper_bound": nc.upper_bound, "level": nc.level, "target": nc.target, "method": ev.method,
                   "interval_method": nc.interval_method, "interval_to_read": nc.interval_to_read,
                   "calibration_p_value": nc.calibration_p_value, "interval_centre": nc.centre},
        "channels": channels,
        "flag_counts": {k: int((table["flag"] == k).sum()) for k in ("ok", "uninformative", "adversarial")},
        "prevalence": ev.prevalence,
        "naive": {"ece_majority": nv.majority_vote_ece, "majority_ties": nv.n_ties,
                  "majority_ties_counted_as": 1 if nv.ties == "positive" else 0,
                  "smece_vote_fraction": nv.vote_fraction_smece,
                  "ece_per_annotator": {str(r.annotator): float(r.ece) for r in nv.annotator_ece.itertuples(index=False)}},
        "diagnostics": {"rhat_max": d.get("rhat_max"), "ess_min": d.get("ess_min"),
                        "divergences": d.get("divergences"), "warnings": list(ev.warnings)},
        "reliability": ev.table.to_dict(orient="records"),
        "settings": {"bins": ev.bins, "groups": ev.groups, "weights": ev.weights, "seed": ev.seed,
                     "method_detail": ev.method_detail},
        "checks": [dict(c) for c in getattr(ev, "checks", ())],
        "n_items": ev.n_items,
        "n_annotators": ev.n_annotators,
    }
    if ev.recalibration is not None:
        out["recalibration"] = [r.__dict__ for r in ev.recalibration]
    return _clean(out)


# ------------------------------------------------------------------------------------------ K classes
def _classwise_line(ev) -> str:
    """``"Class-wise NC-ECE (mean over classes) = 0.053 (...); debiased estimate 0.051; 90% interval [...] (...)."``"""
    cw = ev.classwise_nc_ece
    return (f"Class-wise NC-ECE (mean over classes) = {_num(cw.value)} (at {_point_name(ev)})"
            + _estimate_tail(cw, around=False, target=False) + ".")


def _calibration_rows_k(ev):
    """One row per metric: the two NC-ECEs with intervals, then the naive ECEs."""
    nc, cw = ev.nc_ece, ev.classwise_nc_ece
    rows = [["NC-ECE (noise-corrected)", _num(nc.value), _interval(nc.lower, nc.upper), _num(cw.value),
             _interval(cw.lower, cw.upper), f"at {_point_name(ev)}"]]
    single = ev.naive["target"].astype(str).str.startswith("annotator ")
    crowd = _is_crowd(ev) and bool(single.any())
    for r in ev.naive[~single].itertuples(index=False) if crowd else ev.naive.itertuples(index=False):
        name = {"majority_vote": "ECE vs majority vote", "vote_distribution": "SMECE vs vote distribution"}.get(
            r.target, f"ECE vs {r.target}")
        note = "truth, for checking" if "oracle" in str(r.target) else f"{int(r.n_items)} items"
        rows.append([name, _num(float(r.top_label_ece)), "", _num(float(r.classwise_ece)), "", note])
    if crowd:  # one summary row for the single annotators, as for binary crowds (every one is in results.json)
        t = ev.naive[single]
        e, c = t["top_label_ece"].to_numpy(dtype=np.float64), t["classwise_ece"].to_numpy(dtype=np.float64)
        rows.insert(2, ["ECE vs single annotators (median)", _num(float(np.nanmedian(e))), "",
                        _num(float(np.nanmedian(c))), "", f"{len(t)} annotators, each on its own items; top-label "
                        f"range {np.nanmin(e):.3f} to {np.nanmax(e):.3f} (every one in results.json)"])
    return ["metric", "top-label", "interval", "class-wise", "interval", "note"], rows


def _per_class_rows(ev):
    rows = []
    for r in ev.classwise_nc_ece.per_class.itertuples(index=False):
        rows.append([str(r[0]), _num(float(r.value)), _interval(r.lower, r.upper) if np.isfinite(r.lower) else ""])
    return ["class", "NC-ECE", "interval"], rows


def _diagonal_rows(ev, *, compact: bool = False):
    """Per annotator: usable, and the diagonal ``P(label = k | Y = k)`` per class with its interval; a crowd
    (more than ``CROWD_TABLE_LIMIT`` annotators): its flagged annotators only (:func:`_flagged_rows`)."""
    if _is_crowd(ev):
        return _flagged_rows(ev)
    k = ev.n_classes
    diag = np.diagonal(ev.confusion, axis1=1, axis2=2)
    has = ev.confusion_lower is not None
    lo = np.diagonal(ev.confusion_lower, axis1=1, axis2=2) if has else None
    hi = np.diagonal(ev.confusion_upper, axis1=1, axis2=2) if has else None
    if compact or k > MAX_DIAGONAL_COLUMNS:
        header = ["annotator", "usable", "mean diagonal", "min diagonal (class)"]
        rows = [[str(a), "yes" if ev.usable[j] else "no", _num(float(diag[j].mean())),
                 f"{_num(float(diag[j].min()))} ({ev.classes[int(np.argmin(diag[j]))]})"]
                for j, a in enumerate(ev.annotator_ids)]
        return header, rows
    header = ["annotator", "usable"] + [f"class {c}" for c in ev.classes]
    rows = []
    for j, a in enumerate(ev.annotator_ids):
        row = [str(a), "yes" if ev.usable[j] else "no"]
        for c in range(k):
            cell = _num(float(diag[j, c]))
            if has:
                cell += " " + _interval(float(lo[j, c]), float(hi[j, c]), 2)
            row.append(cell)
        rows.append(row)
    return header, rows


def _data_text_k(ev) -> str:
    return (f"{ev.n_items} items, {ev.n_annotators} annotators, {ev.n_classes} classes "
            f"({', '.join(str(c) for c in ev.classes[:12])}{', ...' if ev.n_classes > 12 else ''}); {ev.bins} "
            f"equal-width confidence bins, {ev.n_groups} score groups, {ev.weights} annotator weights.")


def _diagnostic_text_k(ev) -> str:
    d = ev.diagnostics or {}
    if ev.method == "nuts":
        return (f"MCMC diagnostics: R-hat max {_num(d.get('max_rhat'))}, bulk ESS min "
                f"{_num(d.get('min_ess_bulk'), 0)}, "
                f"divergences {d.get('n_divergent')}.")
    text = f"EM: converged {d.get('converged')}, {d.get('n_iter')} iterations"
    if d.get("n_boot_failed") is not None:
        text += f"; {d['n_boot_failed']} failed bootstrap replicates"
    return text + "."


def format_multiclass_summary(ev, *, title: str | None = None) -> str:
    """The plain-text summary of a :class:`~noisycal_bayes.evaluation.MulticlassEvaluation` (what the command
    line prints): header, data line, the top-label NC-ECE headline with its interval, the class-wise NC-ECE per
    class, the naive ECEs, the confusion-matrix diagonals per annotator, warnings and the assumption checks."""
    out = []
    if title:
        out += [title, "=" * len(title)]
    out.append(_data_text_k(ev))
    lead, rest = _headline(ev)
    out += ["", f"{lead} {rest}."]
    out += ["", "Calibration error (lower is better; naive metrics treat noisy labels as truth)",
            _text_table(*_calibration_rows_k(ev))]
    out += ["", _classwise_line(ev), "", f"Class-wise NC-ECE per class (mean {_num(ev.classwise_nc_ece.value)})",
            _text_table(*_per_class_rows(ev))]
    out += ["", f"Confusion matrices: P(label = k | clean class = k) per annotator ({ev.method_detail})"]
    out += _population_lines(ev) + [_text_table(*_diagonal_rows(ev))]
    out += ["", _diagnostic_text_k(ev)]
    out += _check_lines(ev)
    if ev.warnings:
        out += ["", "Warnings:"] + [f"  - {w}" for w in ev.warnings]
    return "\n".join(out)


def summary_markdown_multiclass(ev, *, figures=(), title: str = "Calibration report (K classes)",
                                source: str | None = None) -> str:
    """The Markdown summary written to ``summary.md`` (figures linked by file name)."""
    out = [f"# {title}", ""]
    if source:
        out += [f"Data: {source}", ""]
    out += [_data_text_k(ev), ""]
    lead, rest = _headline(ev)
    out += [f"**{lead}** {rest}.", ""]
    out += ["## Calibration error", "", _md_table(*_calibration_rows_k(ev)), "",
            "Naive metrics treat the noisy labels as the truth and are biased; NC-ECE corrects for the annotators' "
            "confusion matrices.", ""]
    out += ["## Class-wise NC-ECE", "", _classwise_line(ev), "", _md_table(*_per_class_rows(ev)), ""]
    out += ["## Confusion matrices", "", ev.method_detail + ".", ""] + [line + "\n" for line in _population_lines(ev)]
    out += [_md_table(*_diagonal_rows(ev)), "", _diagnostic_text_k(ev), ""]
    out += _md_checks_and_warnings(ev)
    if figures:
        out += ["## Figures", ""] + [f"![{name}]({name})\n" for name in figures]
    return "\n".join(out)


def multiclass_html(ev) -> str:
    """A compact HTML view for notebooks (``MulticlassEvaluation._repr_html_``)."""
    esc = html.escape
    lead, rest = _headline(ev)
    out = [f"<div><p><b>Calibration evaluation, K classes</b> ({esc(ev.method_detail)}): {esc(_data_text_k(ev))}</p>",
           f"<p><b>{esc(lead)}</b> {esc(rest)}.</p>", _html_table(*_calibration_rows_k(ev)),
           f"<p>{esc(_classwise_line(ev))}</p>", _html_table(*_per_class_rows(ev)),
           *(f"<p>{esc(line)}</p>" for line in _population_lines(ev)), _html_table(*_diagonal_rows(ev))]
    if ev.warnings:
        out.append("<p><b>Warnings</b></p><ul>" + "".join(f"<li>{esc(w)}</li>" for w in ev.warnings) + "</ul>")
    return "\n".join(out) + "</div>"


def multiclass_to_dict(ev) -> dict:
    """The ``--json`` schema of a K-class evaluation (NaN written as null).

    Keys: ``schema_version``; ``kind`` ``"multiclass"``; ``n_items``, ``n_annotators``, ``n_classes``, ``classes``;
    ``nc_ece`` (top-label) {value, lower, upper, upper_bound, level, target, method, interval_method,
    interval_to_read, debiased}; ``classwise_nc_ece`` {value, lower, upper, upper_bound, level, target,
    interval_method, interval_to_read, debiased, per_class: [{class, value, lower, upper}]}; ``confusion`` (one object per annotator:
    annotator, usable, matrix (K x K, rows = clean class), lower, upper (K x K or null)); ``prevalence`` (per
    score group, K each); ``naive`` {top_label: {target -> ECE}, classwise: {target -> ECE}} for
    ``majority_vote``, ``annotator <id>``, ``vote_distribution`` (and ``clean labels (oracle)``);
    ``reliability`` (one object per confidence bin: bin, lower, upper, count, mean_confidence,
    corrected_accuracy, residual, band_lower, band_upper); ``checks`` (name, status, statistic, p_value, detail);
    ``diagnostics`` (the fit's, plus ``warnings``); ``settings`` {method, method_detail, bins, groups, weights,
    level, seed}; for a crowd (more than ``CROWD_TABLE_LIMIT`` annotators) ``crowd`` {typical_confusion (K x K,
    :func:`typical_confusion`), flag_counts, annotators (the rows of :func:`annotator_table`)}.
    """
    nc, cw = ev.nc_ece, ev.classwise_nc_ece
    confusion = []
    for j, a in enumerate(ev.annotator_ids):
        confusion.append({
            "annotator": a, "usable": bool(ev.usable[j]), "matrix": ev.confusion[j],
            "lower": None if ev.confusion_lower is None else ev.confusion_lower[j],
            "upper": None if ev.confusion_upper is None else ev.confusion_upper[j]})
    per_class = [{"class": r[0], "value": float(r.value), "lower": float(r.lower), "upper": float(r.upper)}
                 for r in cw.per_class.itertuples(index=False)]
    out = {
        "schema_version": SCHEMA_VERSION,
        "kind": "multiclass",
        "n_items": ev.n_items, "n_annotators": ev.n_annotators, "n_classes": ev.n_classes,
        "classes": list(ev.classes),
        "nc_ece": {"value": nc.value, "lower": nc.lower, "upper": nc.upper, "upper_bound": nc.upper_bound,
                   "level": nc.level, "target": nc.target, "method": ev.method, "interval_method": nc.interval_method,
                   "interval_to_read": nc.interval_to_read, "debiased": nc.debiased},
        "classwise_nc_ece": {"value": cw.value, "lower": cw.lower, "upper": cw.upper, "upper_bound": cw.upper_bound,
                             "level": cw.level, "target": cw.target, "interval_method": cw.interval_method,
                             "interval_to_read": cw.interval_to_read, "debiased": cw.debiased,
                             "per_class": per_class},
        "confusion": confusion,
        "prevalence": ev.prevalence,
        "naive": {"top_label": {str(r.target): float(r.top_label_ece) for r in ev.naive.itertuples(index=False)},
                  "classwise": {str(r.target): float(r.classwise_ece) for r in ev.naive.itertuples(index=False)}},
        "reliability": ev.reliability.to_dict(orient="records"),
        "checks": [dict(c) for c in ev.checks],
        "diagnostics": dict(ev.diagnostics or {}, warnings=list(ev.warnings)),
        "settings": {"method": ev.method, "method_detail": ev.method_detail, "bins": ev.bins, "groups": ev.n_groups,
                     "weights": ev.weights, "level": ev.level, "seed": ev.seed},
    }
    if _is_crowd(ev):
        t = annotator_table(ev)
        out["crowd"] = {"typical_confusion": typical_confusion(ev),
                        "flag_counts": {k: int(v) for k, v in t["flag"].value_counts().items()},
                        "annotators": t.to_dict(orient="records")}
    return _clean(out)


def _figures_k(ev) -> dict:
    from ..plotting import plot_confusion_matrices, plot_top_label_reliability

    t = ev.reliability
    band = t[["band_lower", "band_upper"]].to_numpy(dtype=np.float64)
    has_band = np.isfinite(band).any()
    figs = {"top_label_reliability.png": plot_top_label_reliability(
        t["mean_confidence"].to_numpy(), t["corrected_accuracy"].to_numpy(), band[:, 0] if has_band else None,
        band[:, 1] if has_band else None, t["count"].to_numpy(), naive=ev.naive_curves,
        edges=np.r_[t["lower"].to_numpy(), t["upper"].to_numpy()[-1:]], level=ev.level if has_band else None,
        title=f"Top-label reliability (NC-ECE {ev.nc_ece.value:.3f})")}
    figs["confusion_matrices.png"] = plot_confusion_matrices(ev.confusion, classes=[str(c) for c in ev.classes],
                                                    annotators=[str(a) for a in ev.annotator_ids],
                                                    title=f"Confusion matrices ({ev.method.upper()})")
    return figs


# ------------------------------------------------------------------------------------------ files
def atomic_write_text(path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file in the same folder and an atomic rename."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ValueError(f"{path}: the folder {folder} does not exist.")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def json_text(payload: dict) -> str:
    """Strict JSON text of ``payload`` (NaN as null, indented), as every file here is written."""
    return json.dumps(_clean(payload), indent=2, allow_nan=False) + "\n"


def write_json(path, payload: dict) -> Path:
    """Write a JSON object atomically (NaN written as null)."""
    return atomic_write_text(path, json_text(payload))


def _figures(ev, data, truth) -> dict:
    from ..data import Binning
    from ..plotting import channel_forest, nc_ece_posterior, reliability_diagram

    figs = {}
    band = ev.table[["band_lower", "band_upper"]].to_numpy(dtype=np.float64)
    has_band = np.isfinite(band).any()
    figs["reliability.png"] = reliability_diagram(
        ev.table, lower=band[:, 0] if has_band else None, upper=band[:, 1] if has_band else None,
        level=ev.level if has_band else None, data=data,
        clean_labels=None if truth is None else truth.get("clean_labels"),
        title=f"Reliability diagram (NC-ECE {ev.nc_ece.value:.3f})")
    figs["channels.png"] = channel_forest(
        ev.channel, intervals=ev.channel_intervals, level=ev.level if ev.channel_intervals else None,
        truth=None if truth is None else truth.get("channel"), title=f"Annotator channels ({ev.method.upper()})")
    if data is not None:
        from ..diagnostics import gap_profile
        from ..plotting import gap_sensitivity

        fit = getattr(ev, "fit", None)
        # The profile needs the grouped model's likelihood: the evaluation's own fit when it has one, else an EM
        # fit on ev.groups equal-mass groups started at the reported channels.
        use = fit if fit is not None and getattr(fit, "model", None) in ("grouped", "histogram", "dawid_skene") \
            else ev.channel
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = gap_profile(data, use, bins=Binning.from_edges(ev.edges), weights=ev.weights,
                                  groups=Binning.equal_mass(max(int(ev.groups), 1)))
            figs["gap_sensitivity.png"] = gap_sensitivity(res)
        except ValueError:  # e.g. a fit whose refit fails: the report goes on without the figure
            pass
    checks = getattr(ev, "model_checks", None)
    if checks is not None and len(checks.residuals):
        figs["checks.png"] = checks.plot(title="Model check: standardized residuals per (score group, pattern) cell")
    if ev.draws is not None and np.size(ev.draws):
        oracle = None if truth is None else getattr(ev.naive, "clean_ece", None)
        nc = ev.nc_ece
        iv = None if nc.lower is None else (nc.lower, nc.upper)
        # The draws are those the interval is read from: mark the number the interval is built around.
        centre = nc.debiased if nc.centre == "debiased" and nc.debiased is not None else nc.value
        figs["nc_ece.png"] = nc_ece_posterior(ev.draws, value=centre, interval=iv, level=ev.level, truth=oracle,
                                              label=ev.draws_label, title=f"NC-ECE ({ev.draws_label})")
    return figs


def write_report(out_dir, ev, *, data=None, truth=None, recalibration=None, extra_figures=None,
                 title: str = "Calibration report", source: str | None = None, comparison=None,
                 dpi: int = 110) -> list[Path]:
    """Write a report folder: figures (PNG), ``summary.md``, ``results.json``, ``annotators.csv`` (every annotator:
    rates, intervals, label count and flag, see :func:`annotator_table`) and ``report.html``.

    Figures: ``reliability.png`` (corrected reliability diagram with bands, naive curves when ``data`` is
    given), ``channels.png`` (channel forest plot), ``gap_sensitivity.png`` (profile likelihood of a common gap
    scale and the NC-ECE range the data allow, with ``data``), ``nc_ece.png`` (NC-ECE draws, when the evaluation has them).
    ``report.html`` is one self-contained page (:func:`noisycal_bayes.report.page.report_page`): the tables
    of ``summary.md``, the run's settings and the figures embedded as data URIs; it needs no server, no
    network and no JavaScript.

    Parameters
    ----------
    out_dir : str or Path
        Created if missing; files of the same names are replaced, other files are left alone.
    ev : Evaluation
    data : AnnotationSet, optional
        Adds the naive curves to the reliability diagram.
    truth : dict, optional
        ``clean_labels`` and ``channel`` (simulations): oracle curve and true channels in the figures.
    recalibration : list of RecalibrationRow, optional
        Default: ``ev.recalibration``.
    comparison : list of Evaluation, optional
        Evaluations of the same data by other engines, summarised side by side (and saved in
        ``results.json`` under ``comparison``).
    extra_figures : dict ``file name -> Figure``, optional
    title, source : str
        Heading and data description for ``summary.md`` and ``report.html``.

    Returns
    -------
    list of Path
        The files written.

    Notes
    -----
    Everything is rendered into a temporary folder first and moved into ``out_dir`` only when all files
    are complete, so a failure leaves no partial report. A K-class evaluation is written by
    :func:`write_multiclass_report` (``title``, ``source`` and ``dpi`` passed on).
    """
    if _is_k(ev):
        return write_multiclass_report(out_dir, ev, title=title, source=source, dpi=dpi)
    recalibration = ev.recalibration if recalibration is None else recalibration

    def render(tmp: Path) -> None:
        figs = _figures(ev, data, truth)
        figs.update(extra_figures or {})
        for name, fig in figs.items():
            fig.savefig(tmp / name, dpi=dpi)
        md = summary_markdown(ev, truth=truth, recalibration=recalibration, figures=list(figs), title=title,
                              source=source, comparison=comparison)
        (tmp / "summary.md").write_text(md, encoding="utf-8")
        payload = evaluation_to_dict(ev)
        if recalibration:
            payload["recalibration"] = [r.__dict__ for r in recalibration]
        if comparison and len(comparison) > 1:
            payload["comparison"] = {c.method: evaluation_to_dict(c) for c in comparison}
        (tmp / "results.json").write_text(json_text(payload), encoding="utf-8")
        annotator_table(ev).to_csv(tmp / "annotators.csv", index=False)
        from .page import report_page

        page = report_page(ev, figures={name: (tmp / name).read_bytes() for name in figs}, truth=truth,
                           recalibration=recalibration, title=title, source=source, comparison=comparison)
        (tmp / "report.html").write_text(page, encoding="utf-8")

    return _write_folder(out_dir, render)


def _write_folder(out_dir, render) -> list[Path]:
    """Run ``render(tmp)`` on a temporary folder next to ``out_dir`` and move its files into ``out_dir`` only
    when every one is complete (a failure leaves no partial report); returns the paths written."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir}: exists and is not a folder.")
    parent = out_dir.resolve().parent
    if not parent.is_dir():
        raise ValueError(f"{out_dir}: the parent folder {parent} does not exist.")
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=parent))
    try:
        render(tmp)
        out_dir.mkdir(exist_ok=True)
        written = []
        for f in sorted(tmp.iterdir()):
            os.replace(f, out_dir / f.name)
            written.append(out_dir / f.name)
        return written
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_multiclass_report(out_dir, ev, *, title: str = "Calibration report (K classes)", source: str | None = None,
                            dpi: int = 110) -> list[Path]:
    """Write the report folder of a K-class evaluation: ``top_label_reliability.png`` (corrected top-label reliability
    diagram with bands and the naive curves), ``confusion_matrices.png`` (the confusion matrices as heat maps),
    ``summary.md``, ``results.json`` (:func:`multiclass_to_dict`), ``annotators.csv`` (:func:`annotator_table`) and
    ``report.html``
    (:func:`multiclass_report_page`).

    Parameters
    ----------
    out_dir : str or Path
        Created if missing; files of the same names are replaced, other files are left alone.
    ev : MulticlassEvaluation
    title, source : str
        Heading and data description.
    dpi : int, default 110

    Returns
    -------
    list of Path

    Notes
    -----
    Everything is rendered into a temporary folder next to ``out_dir`` first and moved in only when every file
    is complete, so a failure leaves no partial report.
    """
    import matplotlib.pyplot as plt

    def render(tmp: Path) -> None:
        figs = _figures_k(ev)
        for name, fig in figs.items():
            fig.savefig(tmp / name, dpi=dpi)
            plt.close(fig)
        (tmp / "summary.md").write_text(summary_markdown_multiclass(ev, figures=list(figs), title=title,
                                                                     source=source), encoding="utf-8")
        (tmp / "results.json").write_text(json_text(multiclass_to_dict(ev)), encoding="utf-8")
        annotator_table(ev).to_csv(tmp / "annotators.csv", index=False)
        page = multiclass_report_page(ev, figures={n: (tmp / n).read_bytes() for n in figs}, title=title,
                                      source=source)
        (tmp / "report.html").write_text(page, encoding="utf-8")

    return _write_folder(out_dir, render)


from .page import multiclass_report_page  # noqa: E402  (the page is built from the row builders above)
