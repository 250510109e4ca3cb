"""Row builders of the report: the numbers every renderer of :mod:`noisycal_bayes.report` shows (text, Markdown,
HTML, the self-contained page), written once so that every renderer shows the same numbers, binary and K classes;
and the annotator table of a crowd (:func:`annotator_table`, ``annotators.csv``)."""
from __future__ import annotations

import html
import math

import numpy as np

from ..models.em_result import SPARSE_MIN_ANNOTATORS

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
    exp = getattr(ev, "expansion", None)
    if exp is not None and exp.headline != "shared":
        plug_in = f"weighted plug-in estimates of the stacked channel models ({exp.headline}; see Channel models)"
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


def label_weights(expansion) -> dict:
    """The channel models the held-out comparison's corrected labels come from, with their weights: the model
    expansion's stacking weights (:class:`~noisycal_bayes.evaluation.expansion.ModelExpansion`) restricted to the
    models with weight, or ``{"shared": 1.0}`` without an expansion."""
    if expansion is None:
        return {"shared": 1.0}
    return {m: float(w) for m, w in expansion.weights.items() if w > 0}


def describe_labels(weights: dict) -> str:
    """The corrected labels' channel model, as the recalibration table's ``fitted to`` says it.

    >>> describe_labels({"shared": 1.0}), describe_labels({"score_dependent": 1.0})
    ('noisy labels, corrected', 'noisy labels, corrected (score-dependent channels)')
    >>> describe_labels({"shared": 0.25, "score_dependent": 0.75})
    'noisy labels, corrected (stacked channels: shared 0.25, score_dependent 0.75)'
    """
    if set(weights) == {"shared"}:
        return "noisy labels, corrected"
    if len(weights) == 1:
        return f"noisy labels, corrected ({next(iter(weights)).replace('_', '-')} channels)"
    return "noisy labels, corrected (stacked channels: " + ", ".join(f"{m} {w:.2f}" for m, w in weights.items()) + ")"


def _recal_note(ev) -> str:
    """After a model expansion that moved the headline, the sentence saying which channel models the recalibration
    section's corrected labels (fitted and judged) came from; "" otherwise."""
    weights = label_weights(getattr(ev, "expansion", None))
    if set(weights) == {"shared"}:
        return ""
    parts = ", ".join(f"{m} {w:.2f}" for m, w in weights.items())
    return (f"The corrected labels, of the fitted maps and of the held-out NC-ECE, follow the headline's channel models "
            f"({parts}; the score-dependent model's MAP on the fitting half).")


def _recal_caption(ev) -> str:
    """The recalibration section's caption (markdown and HTML): how the maps were compared, and :func:`_recal_note`."""
    return " ".join(x for x in ("Maps fitted on one half of the items and judged on the other half.", _recal_note(ev)) if x)


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


def _expansion_rows(ev):
    """The model-expansion table (``ev.expansion``, :mod:`noisycal_bayes.evaluation.expansion`): one row per
    channel model with its LOO comparison, stacking weight and NC-ECE; None without an expansion."""
    exp = getattr(ev, "expansion", None)
    if exp is None:
        return None
    rows = []
    for r in exp.table.to_dict(orient="records"):
        diff = "-" if r["model"] == "shared" else f"{r['elpd_diff']:+.1f} ({r['se_diff']:.1f})"
        rows.append([r["model"], r["fit"], f"{r['elpd_loo']:.1f}", diff, _num(r["pareto_k_max"], 2),
                     f"{r['weight']:.3f}", _num(r["nc_ece"]), _interval(r["lower"], r["upper"]), r["extra"] or ""])
    return ["model", "fit", "elpd_loo", "elpd_diff (se)", "Pareto k max", "weight", "NC-ECE", "interval",
            "between-group scales"], rows


def _expansion_lines(ev, table=None) -> list:
    """The "Channel models" section: which model the headline follows, the rule, and the table (``table``
    renders it: text by default)."""
    exp = getattr(ev, "expansion", None)
    if exp is None:
        return []
    table = _text_table if table is None else table
    pct = f"{100 * ev.level:.0f}%"
    out = ["", f"Channel models compared by {exp.score} (docs/model_checks.md): headline from {exp.headline!r}; "
               f"{exp.rule}.", table(*_expansion_rows(ev))]
    sh = getattr(ev, "nc_ece_shared", None)
    if sh is not None and exp.headline != "shared" and sh.lower is not None:
        out.append(f"Shared-channel model alone: NC-ECE {_num(sh.value)}, {pct} interval "
                   f"{_interval(sh.lower, sh.upper)}.")
    return out


def _headline(ev):
    """``("NC-ECE = 0.043", "(paper's plug-in estimate, ...); debiased estimate ...; interval ...")``; K classes:
    ``("Top-label NC-ECE = 0.043", "(noise-corrected top-label ECE at ...); ...")``."""
    nc = ev.nc_ece
    exp = getattr(ev, "expansion", None)
    stacked = exp is not None and exp.headline != "shared"
    if _is_k(ev):
        if stacked:
            parts = ", ".join(f"{m} {w:.2f}" for m, w in exp.weights.items() if w > 0)
            return (f"Top-label NC-ECE = {_num(nc.value)}", f"(confusion models stacked by {exp.score}: {parts}; the "
                    f"shared model alone gives {_num(ev.nc_ece_shared.value)})" + _estimate_tail(nc, around=False))
        return (f"Top-label NC-ECE = {_num(nc.value)}", f"(noise-corrected top-label ECE at {_point_name(ev)})"
                + _estimate_tail(nc, around=False))
    if stacked:
        parts = ", ".join(f"{m} {w:.2f}" for m, w in exp.weights.items() if w > 0)
        return (f"NC-ECE = {_num(nc.value)}", f"(channel models stacked by {exp.score}: {parts}; the shared model "
                f"alone gives {_num(ev.nc_ece_shared.value)})" + _estimate_tail(nc))
    return f"NC-ECE = {_num(nc.value)}", f"(paper's plug-in estimate, at {_point_name(ev)})" + _estimate_tail(nc)



def _html_table(header, rows) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


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


# ------------------------------------------------------------------------------------------ clean-label metrics
#: K classes: the text / HTML tables show the summary metrics; the per-class rows are in the JSON.
_METRIC_TABLE_MAX_ROWS = 12


def _metric_rows(ev):
    """Header and rows of the clean-label metrics table (``ev.metrics``, a CleanMetrics): metric, estimate,
    interval, corrected-label and majority-vote values; None when there are no metrics."""
    m = getattr(ev, "metrics", None)
    if m is None:
        return None
    t = m.table
    if m.kind == "multiclass":
        t = t[~t["metric"].str.contains(r"\[", regex=True)]
    pct = f"{100 * m.level:.0f}% interval"
    rows = [[r.metric + ("" if r.higher_is_better else " (lower is better)"), _num(r.estimate),
             _interval(r.lower, r.upper), _num(r.corrected_label), _num(r.majority_vote)]
            for r in t.head(_METRIC_TABLE_MAX_ROWS).itertuples(index=False)]
    return ["metric", "estimate", pct, "corrected labels", "majority vote"], rows


def _metric_lines(ev) -> list:
    """The lines around the metrics table: what was estimated, for which target, from what; and its notes."""
    m = getattr(ev, "metrics", None)
    note = getattr(ev, "metrics_note", None)
    if m is None:
        return [note] if note else []
    at = f" at threshold {_num(next(iter(m.threshold.values())), 3)}" if m.kind == "binary" else " (argmax)"
    lines = [f"Clean-label metrics{at}: posterior estimates on the clean labels of the {m.fit_model} {m.fit_method} "
             f"fit ({m.n_groups} score groups); intervals over {m.n_replicates} replicates (parameters: "
             f"{m.parameter_uncertainty}; latent clean labels; item weights) for the {m.target}. The corrected-label "
             "column is unbiased for the metrics linear in the label (accuracy, Brier, log loss) whatever the "
             "groups; the majority-vote column is the naive metric."]
    if m.kind == "multiclass":
        lines.append("Per-class recall, precision, F1 and AUC: results.json (clean_metrics).")
    return lines + [f"Note: {n}" for n in m.notes]


def _metrics_dict(ev):
    """The ``clean_metrics`` JSON object, or None."""
    m = getattr(ev, "metrics", None)
    if m is None:
        note = getattr(ev, "metrics_note", None)
        return None if note is None else {"note": note}
    return {"target": m.target, "level": m.level, "threshold": next(iter(m.threshold.values())),
            "n_replicates": m.n_replicates, "fit_model": m.fit_model, "fit_method": m.fit_method,
            "n_groups": m.n_groups, "parameter_uncertainty": m.parameter_uncertainty, "notes": list(m.notes),
            "metrics": m.table.drop(columns=["model"]).to_dict(orient="records")}


# ------------------------------------------------------------------------------------------ labelling plan
#: Rows of the plan shown in the summary and the report (the whole plan: plan.csv and the JSON).
_PLAN_TABLE_ROWS = 10


def _plan_rows(ev):
    """Header and the top rows of the labelling plan (``ev.plan``, a LabelPlan): rank, item, annotator, expected
    variance reduction and the width expected after the actions up to that row; None without a plan."""
    p = getattr(ev, "plan", None)
    if p is None:
        return None
    rows = [[str(r.rank), str(r.item), "" if r.annotator is None or r.annotator != r.annotator else str(r.annotator),
             r.action, f"{r.gain:.3g}", _num(r.width_after)] for r in p.table.head(_PLAN_TABLE_ROWS).itertuples(index=False)]
    return ["rank", "item", "annotator", "action", "expected gain", f"{100 * p.level:.0f}% width after"], rows


def _plan_lines(ev) -> list:
    """The lines under the plan table: budget, target, expected narrowing, where the whole plan is; its warnings."""
    p = getattr(ev, "plan", None)
    note = getattr(ev, "plan_note", None)
    if p is None:
        return [note] if note else []
    what = "extra labels" if p.kind == "label" else "gold checks"
    shown = min(len(p.table), _PLAN_TABLE_ROWS)
    return [f"Labelling plan: the {p.budget} {what} expected to narrow the {p.target} interval most ({p.fit_method} "
            f"fit; best first, the top {shown} shown, all in plan.csv). Expected {100 * p.level:.0f}% width "
            f"{_num(p.width_before)} now, {_num(p.width_after)} after the plan (sample target, normal approximation; "
            f"reducible variance {p.variance_label:.3g} from the clean labels + {p.variance_channel:.3g} from the "
            "channels). Measure the actual interval after relabelling with evaluate; docs/planning.md."] + \
        [f"Note: {w}" for w in p.warnings]


def _plan_dict(ev):
    """The ``label_plan`` JSON object, or None."""
    p = getattr(ev, "plan", None)
    if p is None:
        note = getattr(ev, "plan_note", None)
        return None if note is None else {"note": note}
    return {"target": p.target, "kind": p.kind, "budget": p.budget, "value": p.value,
            "variance_label": p.variance_label, "variance_channel": p.variance_channel,
            "width_before": p.width_before, "width_after": p.width_after, "level": p.level,
            "fit_method": p.fit_method, "warnings": list(p.warnings), "actions": p.table.to_dict(orient="records")}
