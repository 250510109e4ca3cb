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

The five renderers of one result (text, Markdown, HTML, JSON, report folder) share the row builders of
``report/rows.py``, so every renderer shows the same numbers; the self-contained HTML page of both kinds is in
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

from .rows import (SCHEMA_VERSION, _calibration_rows,
                   _calibration_rows_k, _channel_rows, _check_lines, _classwise_line, _comparison_rows, _data_text_k,
                   _expansion_lines,
                   _diagnostic_text_k, _diagonal_rows, _headline, _html_table, _interval_lines, _is_crowd, _is_k,
                   _md_table, _metric_lines, _metric_rows, _metrics_dict, _num, _oracle, _per_class_rows, _plan_dict,
                   _plan_lines, _plan_rows, _population_lines, _recal_caption, _recal_note, _recal_rows, _text_table,
                   annotator_table, describe_labels, label_weights, typical_confusion)

__all__ = ["atomic_write_text", "evaluation_html", "evaluation_to_dict", "format_multiclass_summary", "format_summary",
           "json_text", "multiclass_html", "multiclass_report_page", "multiclass_to_dict", "summary_markdown",
           "summary_markdown_multiclass", "write_json", "write_multiclass_report", "write_report"]

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
    out += _interval_lines(ev.nc_ece) + _expansion_lines(ev) + _check_lines(ev)
    out += _metric_text(ev)
    d = ev.diagnostics or {}
    if any(d.get(k) is not None for k in ("rhat_max", "ess_min", "divergences")):
        out += ["", f"MCMC diagnostics: R-hat max {_num(d.get('rhat_max'))}, ESS min "
                    f"{_num(d.get('ess_min'), 0)}, divergences {d.get('divergences')}"]
    if comparison and len(comparison) > 1:
        out += ["", "Engines side by side (same data)", _text_table(*_comparison_rows(comparison, truth))]
    if recalibration:
        out += ["", "Recalibration (fitted on one half of the items, judged on the other half)",
                _text_table(*_recal_rows(recalibration))]
        out += [_recal_note(ev)] if _recal_note(ev) else []
    if ev.warnings:
        out += ["", "Warnings:"] + [f"  - {w}" for w in ev.warnings]
    return "\n".join(out)


_PLAN_HEADING = "Where the next labels help most"


def _metric_text(ev) -> list:
    """The plain-text clean-label metrics block, then the labelling plan's (each empty when absent)."""
    return _text_block(_metric_rows(ev), _metric_lines(ev), "Clean-label metrics (noise-corrected; majority vote = "
                       "naive)") + _text_block(_plan_rows(ev), _plan_lines(ev), _PLAN_HEADING)


def _text_block(table, lines, heading) -> list:
    if table is None:
        return ["", *lines] if lines else []
    return ["", heading, _text_table(*table)] + [f"  {line}" for line in lines]


def _metric_md(ev) -> list:
    """The Markdown "Clean-label metrics" section, then the labelling plan's (each empty when absent)."""
    return (_md_block(_metric_rows(ev), _metric_lines(ev), "Clean-label metrics")
            + _md_block(_plan_rows(ev), _plan_lines(ev), _PLAN_HEADING))


def _md_block(table, lines, heading) -> list:
    if table is None and not lines:
        return []
    return [f"## {heading}", ""] + ([] if table is None else [_md_table(*table), ""]) + [line + "\n" for line in lines]


def _metric_html(ev, wrap) -> list:
    """The HTML metrics section and the labelling plan's (``wrap(key, heading, *body)``), 0 to 2 parts."""
    parts = []
    for key, heading, table, lines in (("metrics", "Clean-label metrics", _metric_rows(ev), _metric_lines(ev)),
                                       ("plan", _PLAN_HEADING, _plan_rows(ev), _plan_lines(ev))):
        if table is None and not lines:
            continue
        body = ([] if table is None else [_html_table(*table)]) + [f"<p>{html.escape(line)}</p>" for line in lines]
        parts.append(wrap(key, heading, *body))
    return parts


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
    out += _metric_md(ev)
    exp_lines = _expansion_lines(ev, _md_table)
    if exp_lines:
        out += ["## Channel models", ""] + [line + "\n" for line in exp_lines[1:]]
    out += ["## Annotator channels", "", ev.method_detail + ".", ""] + [line + "\n" for line in _population_lines(ev)]
    out += [_md_table(*_channel_rows(ev, truth_channel)), ""]
    if comparison and len(comparison) > 1:
        out += ["## Engines side by side", "", _md_table(*_comparison_rows(comparison, truth)), ""]
    if recalibration:
        out += ["## Recalibration", "", _recal_caption(ev), "",
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
    exp_lines = _expansion_lines(ev, _html_table)
    if exp_lines:
        out += ["<p><b>Channel models</b></p>", f"<p>{esc(exp_lines[1])}</p>", exp_lines[2]]
        out += [f"<p>{esc(line)}</p>" for line in exp_lines[3:]]
    out += ["<p><b>Annotator channels</b></p>"] + [f"<p>{html.escape(line)}</p>" for line in _population_lines(ev)]
    out += [_html_table(*_channel_rows(ev))]
    d = ev.diagnostics or {}
    if any(d.get(k) is not None for k in ("rhat_max", "ess_min", "divergences")):
        out.append(f"<p>MCMC diagnostics: R-hat max {_num(d.get('rhat_max'))}, ESS min {_num(d.get('ess_min'), 0)}, "
                   f"divergences {d.get('divergences')}.</p>")
    if ev.recalibration:
        out += ["<p><b>Recalibration</b> (held-out half)</p>", _html_table(*_recal_rows(ev.recalibration))]
        out += [f"<p>{esc(_recal_note(ev))}</p>"] if _recal_note(ev) else []
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
    object per assumption check: name, status "pass" | "warn" | "not_testable", statistic, p_value, detail);
    with a model expansion (``evaluate(expand=True)``) also ``headline_model`` (the channel model behind
    ``nc_ece``: "shared", "score_dependent" or "stacking"), ``model_expansion`` {score, rule, headline_model,
    weights, seconds, notes, models (one object per model: model, fit, elpd_loo, se, elpd_diff, se_diff,
    pareto_k_max, weight, nc_ece, debiased, lower, upper, extra)} and ``nc_ece_shared`` (the shared model's
    value, debiased, lower, upper, upper_bound, interval_to_read); ``n_items``;
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
    _expansion_keys(ev, out)
    if ev.recalibration is not None:
        out["recalibration"] = [r.__dict__ for r in ev.recalibration]
        if getattr(ev, "expansion", None) is not None:  # schema 2, additive: the corrected labels' channel models
            w = label_weights(ev.expansion)
            out["recalibration_labels"] = {"model": ev.expansion.headline, "weights": w,
                                           "fitted_to": describe_labels(w)}
    if _metrics_dict(ev) is not None:  # schema 2, additive
        out["clean_metrics"] = _metrics_dict(ev)
    if _plan_dict(ev) is not None:  # additive
        out["label_plan"] = _plan_dict(ev)
    return _clean(out)


def _expansion_keys(ev, out: dict) -> None:
    """With a model expansion, the additive keys of both kinds' JSON: ``headline_model``, ``model_expansion`` and
    ``nc_ece_shared``."""
    if getattr(ev, "expansion", None) is not None:
        out["headline_model"] = ev.expansion.headline
        out["model_expansion"] = ev.expansion.to_dict()
        sh = ev.nc_ece_shared
        out["nc_ece_shared"] = {"value": sh.value, "debiased": sh.debiased, "lower": sh.lower, "upper": sh.upper,
                                "upper_bound": sh.upper_bound, "interval_to_read": sh.interval_to_read}


# ------------------------------------------------------------------------------------------ K classes
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
    out += _expansion_lines(ev)
    out += ["", f"Confusion matrices: P(label = k | clean class = k) per annotator ({ev.method_detail})"]
    out += _population_lines(ev) + [_text_table(*_diagonal_rows(ev))]
    out += ["", _diagnostic_text_k(ev)]
    out += _check_lines(ev)
    out += _metric_text(ev)
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
    exp_lines = _expansion_lines(ev, _md_table)
    if exp_lines:
        out += ["## Confusion models", ""] + [line + "\n" for line in exp_lines[1:]]
    out += _metric_md(ev)
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
           f"<p>{esc(_classwise_line(ev))}</p>", _html_table(*_per_class_rows(ev))]
    exp_lines = _expansion_lines(ev, _html_table)
    if exp_lines:
        out += ["<p><b>Confusion models</b></p>", f"<p>{esc(exp_lines[1])}</p>", exp_lines[2]]
        out += [f"<p>{esc(line)}</p>" for line in exp_lines[3:]]
    out += [*(f"<p>{esc(line)}</p>" for line in _population_lines(ev)), _html_table(*_diagonal_rows(ev))]
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
    level, seed}; for a crowd (more than ``rows.CROWD_TABLE_LIMIT`` annotators) ``crowd`` {typical_confusion (K x K,
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
    _expansion_keys(ev, out)
    if _metrics_dict(ev) is not None:  # additive
        out["clean_metrics"] = _metrics_dict(ev)
    if _plan_dict(ev) is not None:  # additive
        out["label_plan"] = _plan_dict(ev)
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
        if getattr(ev, "plan", None) is not None:
            ev.plan.to_csv(tmp / "plan.csv")
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
        if getattr(ev, "plan", None) is not None:
            ev.plan.to_csv(tmp / "plan.csv")
        page = multiclass_report_page(ev, figures={n: (tmp / n).read_bytes() for n in figs}, title=title,
                                      source=source)
        (tmp / "report.html").write_text(page, encoding="utf-8")

    return _write_folder(out_dir, render)


from .page import multiclass_report_page  # noqa: E402  (the page reads _CAPTIONS above)
