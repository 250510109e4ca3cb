"""K-class evaluation results for people and machines: text, JSON, HTML and a report folder (issue 18, item 6).

A :class:`~noisycal_bayes.evaluation.MulticlassEvaluation` (what :func:`noisycal_bayes.evaluate` returns for a
:class:`~noisycal_bayes.data.MulticlassAnnotationSet`) is rendered here; its methods call these functions:

- :func:`format_multiclass_summary` — plain text for the terminal (``MulticlassEvaluation.summary()``);
- :func:`multiclass_to_dict` — the ``--json`` schema (``MulticlassEvaluation.to_json()``);
- :func:`multiclass_html` — a compact HTML view for notebooks;
- :func:`write_multiclass_report` — a folder with ``report.html``, ``summary.md``, ``results.json``, the corrected
  top-label reliability diagram (``top_label_reliability.png``) and the confusion matrices
  (``confusion_matrices.png``).

The row builders below feed every renderer, so text, Markdown, HTML and JSON show the same numbers. The
helpers (number formatting, tables, strict JSON, atomic files, the HTML page's sections and style) are those of
:mod:`noisycal_bayes.report` and :mod:`noisycal_bayes.report.page`.
"""
from __future__ import annotations

import html
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from . import (SCHEMA_VERSION, _check_lines, _clean, _html_table, _interval, _md_table, _num, _text_table,
               json_text)

__all__ = ["format_multiclass_summary", "multiclass_html", "multiclass_report_page", "multiclass_to_dict",
           "summary_markdown_multiclass", "write_multiclass_report"]

#: Above this many classes the diagonal table shows only the mean diagonal per annotator in text and Markdown
#: (every entry is in ``results.json``).
MAX_DIAGONAL_COLUMNS = 10


# ------------------------------------------------------------------------------------------ row builders
def _interval_note(summary) -> str:
    iv = _interval(summary.lower, summary.upper)
    if not iv:
        return "no interval"
    pct = f"{100 * summary.level:.0f}%"
    if getattr(summary, "interval_to_read", None) == "upper_one_sided":
        return f"{pct} one-sided interval {iv}: read the upper bound"
    return f"{pct} interval {iv}"


def _point_name(ev) -> str:
    if ev.method == "nuts":
        return "the posterior-mean confusion matrices"
    return "the EM estimate of the confusion matrices"


def _headline(ev):
    """``("Top-label NC-ECE = 0.043", "(at ...); 90% interval [...] (...; target: ...)")``."""
    nc = ev.nc_ece
    rest = f"(noise-corrected top-label ECE at {_point_name(ev)})"
    if nc.debiased is not None:
        rest += f"; debiased estimate {_num(nc.debiased)}"
    if nc.lower is not None:
        rest += f"; {_interval_note(nc)} ({nc.interval_method}; target: {nc.target})"
    return f"Top-label NC-ECE = {_num(nc.value)}", rest


def _classwise_line(ev) -> str:
    """``"Class-wise NC-ECE (mean over classes) = 0.053 (...); debiased estimate 0.051; 90% interval [...] (...)."``"""
    cw = ev.classwise_nc_ece
    text = f"Class-wise NC-ECE (mean over classes) = {_num(cw.value)} (at {_point_name(ev)})"
    if cw.debiased is not None:
        text += f"; debiased estimate {_num(cw.debiased)}"
    if cw.lower is not None:
        text += f"; {_interval_note(cw)} ({cw.interval_method})"
    return text + "."


def _calibration_rows(ev):
    """One row per metric: the two NC-ECEs with intervals, then the naive ECEs."""
    nc, cw = ev.nc_ece, ev.classwise_nc_ece
    rows = [["NC-ECE (noise-corrected)", _num(nc.value), _interval(nc.lower, nc.upper), _num(cw.value),
             _interval(cw.lower, cw.upper), f"at {_point_name(ev)}"]]
    for r in ev.naive.itertuples(index=False):
        name = {"majority_vote": "ECE vs majority vote", "vote_distribution": "SMECE vs vote distribution"}.get(
            r.target, f"ECE vs {r.target}")
        note = "truth, for checking" if "oracle" in str(r.target) else f"{int(r.n_items)} items"
        rows.append([name, _num(float(r.top_label_ece)), "", _num(float(r.classwise_ece)), "", note])
    return ["metric", "top-label", "interval", "class-wise", "interval", "note"], rows


def _per_class_rows(ev):
    rows = []
    for r in ev.classwise_nc_ece.per_class.itertuples(index=False):
        rows.append([str(r[0]), _num(float(r.value)), _interval(r.lower, r.upper) if np.isfinite(r.lower) else ""])
    return ["class", "NC-ECE", "interval"], rows


def _diagonal_rows(ev, *, compact: bool = False):
    """Per annotator: usable, and the diagonal ``P(label = k | Y = k)`` per class with its interval."""
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


def _data_text(ev) -> str:
    return (f"{ev.n_items} items, {ev.n_annotators} annotators, {ev.n_classes} classes "
            f"({', '.join(str(c) for c in ev.classes[:12])}{', ...' if ev.n_classes > 12 else ''}); {ev.bins} "
            f"equal-width confidence bins, {ev.n_groups} score groups, {ev.weights} annotator weights.")


def _diagnostic_text(ev) -> str:
    d = ev.diagnostics or {}
    if ev.method == "nuts":
        return (f"MCMC diagnostics: R-hat max {_num(d.get('max_rhat'))}, bulk ESS min "
                f"{_num(d.get('min_ess_bulk'), 0)}, "
                f"divergences {d.get('n_divergent')}.")
    text = f"EM: converged {d.get('converged')}, {d.get('n_iter')} iterations"
    if d.get("n_boot_failed") is not None:
        text += f"; {d['n_boot_failed']} failed bootstrap replicates"
    return text + "."


# ------------------------------------------------------------------------------------------ renderers
def format_multiclass_summary(ev, *, title: str | None = None) -> str:
    """The plain-text summary of a :class:`~noisycal_bayes.evaluation.MulticlassEvaluation` (what the command
    line prints): header, data line, the top-label NC-ECE headline with its interval, the class-wise NC-ECE per
    class, the naive ECEs, the confusion-matrix diagonals per annotator, warnings and the assumption checks."""
    out = []
    if title:
        out += [title, "=" * len(title)]
    out.append(_data_text(ev))
    lead, rest = _headline(ev)
    out += ["", f"{lead} {rest}."]
    out += ["", "Calibration error (lower is better; naive metrics treat noisy labels as truth)",
            _text_table(*_calibration_rows(ev))]
    out += ["", _classwise_line(ev), "", f"Class-wise NC-ECE per class (mean {_num(ev.classwise_nc_ece.value)})",
            _text_table(*_per_class_rows(ev))]
    out += ["", f"Confusion matrices: P(label = k | clean class = k) per annotator ({ev.method_detail})",
            _text_table(*_diagonal_rows(ev))]
    out += ["", _diagnostic_text(ev)]
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
    out += [_data_text(ev), ""]
    lead, rest = _headline(ev)
    out += [f"**{lead}** {rest}.", ""]
    out += ["## Calibration error", "", _md_table(*_calibration_rows(ev)), "",
            "Naive metrics treat the noisy labels as the truth and are biased; NC-ECE corrects for the annotators' "
            "confusion matrices.", ""]
    out += ["## Class-wise NC-ECE", "", _classwise_line(ev), "", _md_table(*_per_class_rows(ev)), ""]
    out += ["## Confusion matrices", "", ev.method_detail + ".", "", _md_table(*_diagonal_rows(ev)), "",
            _diagnostic_text(ev), ""]
    check_lines = _check_lines(ev)
    if check_lines:
        out += ["## Assumption checks", ""] + [f"- {line.strip()}" for line in check_lines[2:]] + [""]
    if ev.warnings:
        out += ["## Warnings", ""] + [f"- {w}" for w in ev.warnings] + [""]
    if figures:
        out += ["## Figures", ""] + [f"![{name}]({name})\n" for name in figures]
    return "\n".join(out)


def multiclass_html(ev) -> str:
    """A compact HTML view for notebooks (``MulticlassEvaluation._repr_html_``)."""
    esc = html.escape
    lead, rest = _headline(ev)
    out = [f"<div><p><b>Calibration evaluation, K classes</b> ({esc(ev.method_detail)}): {esc(_data_text(ev))}</p>",
           f"<p><b>{esc(lead)}</b> {esc(rest)}.</p>", _html_table(*_calibration_rows(ev)),
           f"<p>{esc(_classwise_line(ev))}</p>", _html_table(*_per_class_rows(ev)), _html_table(*_diagonal_rows(ev))]
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
    level, seed}.
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
    return _clean(out)


def multiclass_report_page(ev, *, figures=None, title: str = "Calibration report (K classes)",
                           source: str | None = None) -> str:
    """The self-contained ``report.html`` of a K-class evaluation: headline, warnings, calibration table,
    class-wise table, assumption checks, confusion diagonals, figures (embedded as data URIs) and settings.
    Built from :mod:`noisycal_bayes.report.page`'s sections and style; every user string is escaped."""
    from .page import _STYLE, _figure, _p, _section

    esc = html.escape
    lead, rest = _headline(ev)
    parts = [f"<h1>{esc(title)}</h1>"]
    if source:
        parts.append(_p(f"Data: {source}"))
    parts.append(_p(_data_text(ev)))
    parts.append(f'<p class="headline"><b>{esc(lead)}</b> {esc(rest)}.</p>')
    if ev.warnings:
        parts.append(_section("warnings", "Warnings and notes",
                              '<ul class="warnings">' + "".join(f"<li>{esc(w)}</li>" for w in ev.warnings) + "</ul>"))
    parts.append(_section("calibration", "Calibration error", _html_table(*_calibration_rows(ev)),
                          _p("Lower is better. The naive metrics treat the noisy labels as the truth and are biased.")))
    parts.append(_section("classwise", "Class-wise NC-ECE", _html_table(*_per_class_rows(ev))))
    check_lines = _check_lines(ev)
    if check_lines:
        parts.append(_section("checks", check_lines[1], *(_p(line.strip()) for line in check_lines[2:])))
    parts.append(_section("confusion", "Confusion matrices", _p(ev.method_detail + "."),
                          _html_table(*_diagonal_rows(ev)), _p(_diagnostic_text(ev))))
    if figures:
        parts.append(_section("figures", "Figures", *(_figure(n, b) for n, b in figures.items())))
    nc = ev.nc_ece
    settings = [["method", ev.method], ["how", ev.method_detail], ["evaluation bins", f"{ev.bins} equal-width"],
                ["score groups", ev.n_groups], ["annotator weights", ev.weights], ["seed", ev.seed],
                ["level", _num(ev.level, 2)], ["interval method", nc.interval_method], ["interval target", nc.target],
                ["results.json schema version", SCHEMA_VERSION]]
    parts.append(_section("settings", "Settings", _html_table(["setting", "value"], settings)))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(parts) + "\n</body>\n</html>\n")


def _figures(ev) -> dict:
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


def write_multiclass_report(out_dir, ev, *, title: str = "Calibration report (K classes)", source: str | None = None,
                            dpi: int = 110) -> list[Path]:
    """Write the report folder of a K-class evaluation: ``top_label_reliability.png`` (corrected top-label reliability
    diagram with bands and the naive curves), ``confusion_matrices.png`` (the confusion matrices as heat maps),
    ``summary.md``, ``results.json`` (:func:`multiclass_to_dict`) and ``report.html``
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

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir}: exists and is not a folder.")
    parent = out_dir.resolve().parent
    if not parent.is_dir():
        raise ValueError(f"{out_dir}: the parent folder {parent} does not exist.")
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=parent))
    try:
        figs = _figures(ev)
        for name, fig in figs.items():
            fig.savefig(tmp / name, dpi=dpi)
            plt.close(fig)
        (tmp / "summary.md").write_text(summary_markdown_multiclass(ev, figures=list(figs), title=title,
                                                                     source=source), encoding="utf-8")
        (tmp / "results.json").write_text(json_text(multiclass_to_dict(ev)), encoding="utf-8")
        page = multiclass_report_page(ev, figures={n: (tmp / n).read_bytes() for n in figs}, title=title,
                                      source=source)
        (tmp / "report.html").write_text(page, encoding="utf-8")
        out_dir.mkdir(exist_ok=True)
        written = []
        for f in sorted(tmp.iterdir()):
            os.replace(f, out_dir / f.name)
            written.append(out_dir / f.name)
        return written
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
