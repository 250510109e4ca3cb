"""``report.html``: one self-contained page with the report's tables and figures (binary and K classes).

The page opens in a browser from the file system: the figures are embedded as base64 ``data:`` URIs, the
style sheet is inline, and there are no scripts, links or fonts to fetch. The tables are those of
``summary.md`` and the notebook view (the same row builders of :mod:`noisycal_bayes.report`, so every
renderer shows the same numbers), plus the run's settings. Every piece of text that comes from the user
(annotator names, file names, titles, figure names, warnings) is escaped with :func:`html.escape`.
"""
from __future__ import annotations

import base64
import html
from pathlib import PurePath

from . import _CAPTIONS
from .rows import (SCHEMA_VERSION, _calibration_rows, _calibration_rows_k, _channel_rows, _check_lines, _comparison_rows,
                   _expansion_lines,
                   _data_text_k, _diagnostic_text_k, _diagonal_rows, _headline, _html_table, _interval_lines, _is_k,
                   _num, _oracle, _per_class_rows, _population_lines, _recal_caption, _recal_rows)

__all__ = ["multiclass_report_page", "report_page"]

#: Image types a browser shows from a data URI; other figure files are named but not embedded.
MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml"}

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 62rem; margin: 2rem auto;
       padding: 0 1rem; color: #1b1b1b; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.92rem; }
th, td { border: 1px solid #d0d0d0; padding: 0.25rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } tbody tr:nth-child(even) { background: #fafafa; }
.headline { font-size: 1.1rem; background: #f4f8fc; border-left: 4px solid #3a6ea5; padding: 0.6rem 0.9rem; }
.warnings li { color: #7a4b00; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9rem; color: #444; max-width: 48rem; }
"""


def _section(key: str, heading: str, *body: str) -> str:
    return f'<section id="{key}">\n<h2>{html.escape(heading)}</h2>\n' + "\n".join(body) + "\n</section>"


def _p(text: str) -> str:
    return f"<p>{html.escape(text)}</p>"


def _figure(name: str, data: bytes) -> str:
    esc = html.escape
    mime = MIME.get(PurePath(name).suffix.lower())
    caption = _CAPTIONS.get(name, "")
    if mime is None:
        return _p(f"{name}: in the report folder (this file type cannot be shown inline).")
    uri = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    text = f"<b>{esc(name)}</b>" + (f": {esc(caption)}" if caption else "")
    return f'<figure><img src="{uri}" alt="{esc(name, quote=True)}"><figcaption>{text}</figcaption></figure>'


def _settings_rows(ev, source):
    nc = ev.nc_ece
    rows = [["data", source or "-"], ["items", ev.n_items], ["annotators", ev.n_annotators],
            ["method", ev.method], ["how", ev.method_detail],
            ["evaluation bins", f"{ev.bins} equal-width"], ["score groups (channel model)", ev.groups],
            ["annotator weights", ev.weights], ["seed", ev.seed], ["level", _num(ev.level, 2)],
            ["interval method", nc.interval_method], ["interval target", nc.target],
            ["interval built around", nc.centre or "-"], ["interval to read", nc.interval_to_read or "-"],
            ["calibration p-value", _num(nc.calibration_p_value)]]
    if ev.draws is not None:
        rows.append(["draws", f"{len(ev.draws)} ({ev.draws_label})"])
    rows.append(["results.json schema version", SCHEMA_VERSION])
    return ["setting", "value"], rows


def report_page(ev, *, figures=None, truth=None, recalibration=None, comparison=None,
                title: str = "Calibration report", source: str | None = None) -> str:
    """The self-contained HTML page written to ``report.html`` by :func:`noisycal_bayes.report.write_report`.

    Sections (each a ``<section id=...>``): ``warnings`` (warnings and notes, when there are any),
    ``calibration`` (the paper's NC-ECE, the debiased estimate, the interval and its named target, the
    naive metrics), ``models`` (the channel models' LOO comparison, weights and NC-ECEs, with an expansion), ``channels`` (per annotator, with intervals when there are draws), ``figures``,
    ``comparison`` (engines side by side), ``recalibration`` (held-out maps), ``diagnostics`` (MCMC) and
    ``settings``.

    Parameters
    ----------
    ev : Evaluation
    figures : dict ``file name -> bytes``, optional
        The image files as written to the report folder (PNG, JPEG or SVG are embedded as data URIs, in
        this order; other types are named only).
    truth : dict, optional
        ``channel``: the true channels, shown beside the estimates (simulations).
    recalibration : list of RecalibrationRow, optional
        Default: ``ev.recalibration``.
    comparison : list of Evaluation, optional
        Evaluations of the same data by other engines, shown side by side.
    title, source : str
        Page heading and data description (escaped).

    Returns
    -------
    str
        A complete HTML5 document (UTF-8) with no external resources and no scripts. A K-class evaluation
        gets :func:`multiclass_report_page` (``figures``, ``title`` and ``source`` passed on).
    """
    if _is_k(ev):
        return multiclass_report_page(ev, figures=figures, title=title, source=source)
    esc = html.escape
    truth_channel, oracle = _oracle(ev, truth)
    recalibration = ev.recalibration if recalibration is None else recalibration
    lead, rest = _headline(ev)
    parts = [f"<h1>{esc(title)}</h1>"]
    if source:
        parts.append(_p(f"Data: {source}"))
    parts.append(_p(f"{ev.n_items} items, {ev.n_annotators} annotators; {ev.method_detail}."))
    parts.append(f'<p class="headline"><b>{esc(lead)}</b> {esc(rest)}.</p>')
    if ev.warnings:
        parts.append(_section("warnings", "Warnings and notes",
                              '<ul class="warnings">' + "".join(f"<li>{esc(w)}</li>" for w in ev.warnings) + "</ul>"))
    notes = [_p(line.strip()) for line in _interval_lines(ev.nc_ece)]
    parts.append(_section(
        "calibration", "Calibration error", _html_table(*_calibration_rows(ev, oracle)), *notes,
        _p("Lower is better. NC-ECE (noise-corrected) is the paper's plug-in estimate; the debiased estimate, "
           "when shown, is the number the interval is built around. The naive metrics treat the noisy labels "
           "as the truth and are biased.")))
    from . import _metric_html

    parts += _metric_html(ev, _section)
    exp_lines = _expansion_lines(ev, _html_table)
    if exp_lines:
        parts.append(_section("models", "Channel models", _p(exp_lines[1]), exp_lines[2],
                              *(_p(line) for line in exp_lines[3:])))
    check_lines = _check_lines(ev)
    if check_lines:
        parts.append(_section("checks", check_lines[1], *(_p(line.strip()) for line in check_lines[2:])))
    parts.append(_section("channels", "Annotator channels", _p(ev.method_detail + "."),
                          *(_p(line) for line in _population_lines(ev)),
                          _html_table(*_channel_rows(ev, truth_channel))))
    if figures:
        parts.append(_section("figures", "Figures", *(_figure(n, b) for n, b in figures.items())))
    if comparison and len(comparison) > 1:
        parts.append(_section("comparison", "Engines side by side", _html_table(*_comparison_rows(comparison, truth))))
    if recalibration:
        parts.append(_section("recalibration", "Recalibration",
                              _p(_recal_caption(ev)),
                              _html_table(*_recal_rows(recalibration))))
    d = ev.diagnostics or {}
    if any(d.get(k) is not None for k in ("rhat_max", "ess_min", "divergences")):
        rows = [["R-hat max", _num(d.get("rhat_max"))], ["ESS min", _num(d.get("ess_min"), 0)],
                ["divergences", "-" if d.get("divergences") is None else d.get("divergences")]]
        parts.append(_section("diagnostics", "MCMC diagnostics", _html_table(["diagnostic", "value"], rows)))
    else:
        parts.append(_section("diagnostics", "MCMC diagnostics", _p("None: the channels were not sampled by MCMC.")))
    parts.append(_section("settings", "Settings", _html_table(*_settings_rows(ev, source))))
    return _document(title, parts)


def _document(title: str, parts) -> str:
    """The HTML5 document around the page's sections: inline style, no external resources, no scripts."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(parts) + "\n</body>\n</html>\n")


def multiclass_report_page(ev, *, figures=None, title: str = "Calibration report (K classes)",
                           source: str | None = None) -> str:
    """The self-contained ``report.html`` of a K-class evaluation: headline, warnings, calibration table,
    class-wise table, assumption checks, confusion diagonals, figures (embedded as data URIs) and settings.
    Built from :mod:`noisycal_bayes.report.page`'s sections and style; every user string is escaped."""
    esc = html.escape
    lead, rest = _headline(ev)
    parts = [f"<h1>{esc(title)}</h1>"]
    if source:
        parts.append(_p(f"Data: {source}"))
    parts.append(_p(_data_text_k(ev)))
    parts.append(f'<p class="headline"><b>{esc(lead)}</b> {esc(rest)}.</p>')
    if ev.warnings:
        parts.append(_section("warnings", "Warnings and notes",
                              '<ul class="warnings">' + "".join(f"<li>{esc(w)}</li>" for w in ev.warnings) + "</ul>"))
    parts.append(_section("calibration", "Calibration error", _html_table(*_calibration_rows_k(ev)),
                          _p("Lower is better. The naive metrics treat the noisy labels as the truth and are biased.")))
    parts.append(_section("classwise", "Class-wise NC-ECE", _html_table(*_per_class_rows(ev))))
    exp_lines = _expansion_lines(ev, _html_table)
    if exp_lines:
        parts.append(_section("models", "Confusion models", _p(exp_lines[1]), exp_lines[2],
                              *(_p(line) for line in exp_lines[3:])))
    from . import _metric_html

    parts += _metric_html(ev, _section)
    check_lines = _check_lines(ev)
    if check_lines:
        parts.append(_section("checks", check_lines[1], *(_p(line.strip()) for line in check_lines[2:])))
    parts.append(_section("confusion", "Confusion matrices", _p(ev.method_detail + "."),
                          *(_p(line) for line in _population_lines(ev)),
                          _html_table(*_diagonal_rows(ev)), _p(_diagnostic_text_k(ev))))
    if figures:
        parts.append(_section("figures", "Figures", *(_figure(n, b) for n, b in figures.items())))
    nc = ev.nc_ece
    settings = [["method", ev.method], ["how", ev.method_detail], ["evaluation bins", f"{ev.bins} equal-width"],
                ["score groups", ev.n_groups], ["annotator weights", ev.weights], ["seed", ev.seed],
                ["level", _num(ev.level, 2)], ["interval method", nc.interval_method], ["interval target", nc.target],
                ["results.json schema version", SCHEMA_VERSION]]
    parts.append(_section("settings", "Settings", _html_table(["setting", "value"], settings)))
    return _document(title, parts)
