"""Coverage of the 90% intervals of the K-class top-label and class-wise NC-ECE (issue 18, Goals: coverage).

Settings: K = 3 and 10 classes x over- / under-confident classifier x 3 and 5 annotators (every annotator labels
every item). Per data set:

* simulation: classifier logits ``l_i = a e_{c_i} + N(0, I)`` (``c_i`` uniform), probabilities ``p_i =
  softmax(l_i)``; clean labels ``Y_i ~ softmax(beta l_i) = q(p_i)`` with ``beta = 0.6`` (over-confident: the
  truth is flatter than ``p``) or ``beta = 1.6`` (under-confident); confusion matrices with diagonal
  ``U(0.6, 0.85)`` and the rest of each row ``Dirichlet(1)``; labels ``A_ij ~ C_j[Y_i]``.
* confusion draws: NOT from the true labels. A local NumPy Dawid-Skene EM (one prevalence, K x K confusion per
  annotator, a Dirichlet(1.01) smoothing of the counts) is fitted to the labels, then refitted on 100
  Bayesian-bootstrap reweightings of the items (``Exp(1)`` weights; Newton & Raftery's weighted-likelihood
  bootstrap, warm-started at the fit): the multiclass analogue of the binary CLI's EM route (``fit_em`` ->
  ``bootstrap_em`` -> ``posterior_nc_ece``), see docs/coverage.md.
* ``posterior_top_label_nc_ece`` / ``posterior_classwise_nc_ece`` (plug-in, bias-corrected bin centres, Bayesian
  bootstrap of the items, debiased interval at the calibrated level for the class-wise mean, 15 equal-width bins,
  IV weights, prevalence estimated from the data). Class-wise: *joint draws* (``item_weights=g``, draw ``s``
  sums the items with the weights ``g_s`` of its own EM refit; ``--independent`` for fresh weights, the route
  before). Top-label: joint draws at the calibrated level too since 2026-12-02 (the shipped EM route; on the study
  they were measured with ``--sweep``); the study's main results file holds the earlier top-label route (fresh
  item weights, nominal level) for its data sets, docs/coverage.md.

Target (``MC_TARGETS``): the population binned ECE on the fixed partition, computed for each (K, curve) from
2,000,000 fresh classifier outputs with ``E[1[Y = k] | p] = q_k(p)`` in place of the labels (Monte Carlo error
~1e-4, far below the intervals' widths). An interval covers when the reported interval (two-sided, or
``[0, upper_one_sided]`` when ``interval_to_read`` says so) contains the target; the two-sided coverage is
recorded too.

Usage::

    python benchmarks/coverage_multiclass.py                 # the full study (26 min on 2 busy shared cores)
    python benchmarks/coverage_multiclass.py --reps 5 --n-items 1000 --out /tmp/x.json   # a quick look
    # settings in separate processes, then one file and the docs table (docs/coverage.md, K-class section):
    python benchmarks/coverage_multiclass.py --classes 10 --curves overconfident --reps-large 100 --out /tmp/a.json
    python benchmarks/coverage_multiclass.py --merge /tmp/a.json /tmp/b.json --out benchmarks/results/coverage_multiclass.json
    # ... --previous OLD.json keeps OLD's per-setting summaries for the before -> after table
    python benchmarks/coverage_multiclass.py --render benchmarks/results/coverage_multiclass.json
    # --sweep: the variants table (joint draws at three levels; --independent for fresh item weights)
    # --cache DIR keeps each data set's EM draws (about 40 kB at K = 10): a rerun after a change of the interval
    # then costs the propagation only (the same numbers as without the cache: the draws are saved as computed)
    # a confirmatory replication on data sets no choice has seen (docs/coverage.md, fifth session of 2026-12-02;
    # about 25 min on 2 cores per block, one process per annotator count):
    python benchmarks/coverage_multiclass.py --sweep --classes 10 3 --annotators 3 --reps 300 --reps-large 300 \\
        --seed-offset 10000000 --cache /tmp/fresh --out /tmp/fresh_3.json   # and --annotators 5; --seed-offset 20000000
    python benchmarks/coverage_multiclass.py --merge /tmp/fresh_3.json /tmp/fresh_5.json ... \\
        --out benchmarks/results/coverage_multiclass_fresh_replication.json

Writes ``benchmarks/results/coverage_multiclass.json`` (every data set and the summary per setting).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from noisycal_bayes.propagate import posterior_classwise_nc_ece, posterior_top_label_nc_ece  # noqa: E402

BETA = {"overconfident": 0.6, "underconfident": 1.6}
SIGNAL = {3: 2.0, 10: 3.0}  # logit boost of the item's class, so that top-1 accuracy is moderate for both K
BINS = 15
LEVEL = 0.9


def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)  # shift: exp never overflows
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def draw_outputs(rng, n, k, beta):
    """Classifier probabilities ``p`` (n, K) and the clean-label probabilities ``q(p)`` (n, K)."""
    c = rng.integers(0, k, n)
    logits = rng.standard_normal((n, k))
    logits[np.arange(n), c] += SIGNAL[k]
    return softmax(logits), softmax(beta * logits)


def random_confusion(rng, j, k):
    acc = rng.uniform(0.6, 0.85, size=j)
    conf = np.empty((j, k, k))
    for a in range(j):
        for y in range(k):
            off = rng.dirichlet(np.ones(k - 1)) * (1 - acc[a])
            conf[a, y] = np.insert(off, y, acc[a])
    return conf


def simulate(rng, n, k, j, curve):
    p, q = draw_outputs(rng, n, k, BETA[curve])
    y = (rng.random((n, 1)) > np.cumsum(q, axis=1)).sum(axis=1)  # inverse-CDF categorical draw
    conf = random_confusion(rng, j, k)
    u = rng.random((n, j))
    cdf = np.cumsum(conf[np.arange(j)[None, :], y[:, None]], axis=2)  # (n, J, K)
    labels = (u[:, :, None] > cdf).sum(axis=2)
    return p, y, labels, conf


def population_target(k, curve, bins=BINS, size=2_000_000, seed=12345):
    """Top-label and class-wise population binned ECEs (per class too) from ``size`` fresh outputs."""
    rng = np.random.default_rng(seed)
    edges = np.arange(bins + 1) / bins
    tops, per = np.zeros(bins), np.zeros((2, k, bins))
    cnt_top, cnt_cls = np.zeros(bins), np.zeros((k, bins))
    for _ in range(size // 250_000):
        p, q = draw_outputs(rng, 250_000, k, BETA[curve])
        conf = p.max(axis=1)
        yhat = p.argmax(axis=1)
        b = np.searchsorted(edges[1:-1], conf, side="right")
        tops += np.bincount(b, weights=q[np.arange(p.shape[0]), yhat] - conf, minlength=bins)
        cnt_top += np.bincount(b, minlength=bins)
        for c in range(k):
            bc = np.searchsorted(edges[1:-1], p[:, c], side="right")
            per[0, c] += np.bincount(bc, weights=q[:, c] - p[:, c], minlength=bins)
            cnt_cls[c] += np.bincount(bc, minlength=bins)
    top = float(np.abs(tops).sum() / cnt_top.sum())
    cls = np.abs(per[0]).sum(axis=1) / cnt_cls.sum(axis=1)
    return top, float(cls.mean()), cls


def em_multiclass(labels, k, weights, init=None, n_iter=300, tol=1e-3, alpha=0.01, cell_prior=None):
    """Dawid-Skene EM with item weights, vectorised over replicates, on distinct response patterns.

    labels : (n, J) ints in 0..K-1 (every annotator labels every item); weights : (R, n) item weights.
    Items with the same labels share one row (their weights summed), so a replicate costs O(patterns x K x J)
    per iteration. Stops when no confusion entry moves by more than ``tol`` (well below the bootstrap spread
    of the entries, 2e-2 to 5e-2 here). Returns confusion (R, J, K, K) and prevalence (R, K). ``alpha``
    pseudo-counts keep every cell positive (a zero cell would give log 0). ``cell_prior`` (R, J, K, K), optional:
    per-replicate pseudo-counts of the confusion cells in place of ``alpha`` (the posterior bootstrap's random
    prior, ``--prior-boot``).
    """
    n, j = labels.shape
    pats, inv = np.unique(labels, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    n_pat = pats.shape[0]
    w = np.zeros((weights.shape[0], n_pat))
    for row in range(weights.shape[0]):
        w[row] = np.bincount(inv, weights=weights[row], minlength=n_pat)
    r = w.shape[0]
    onehot = np.eye(k)[pats]  # (P, J, K)
    # contiguous (P, K) blocks: a strided operand makes matmul skip BLAS (measured 50x slower)
    blocks = [np.ascontiguousarray(onehot[:, a, :]) for a in range(j)]
    conf = prev = None
    if init is None:
        post = np.broadcast_to(onehot.mean(axis=1), (r, n_pat, k))  # soft majority vote starts with an M-step
    else:
        conf, prev = np.broadcast_to(init[0], (r, j, k, k)).copy(), np.broadcast_to(init[1], (r, k)).copy()
    for _ in range(n_iter):
        if conf is not None:
            logc = np.log(conf)
            ll = np.log(prev)[:, None, :] + sum(logc[:, a][:, :, pats[:, a]].transpose(0, 2, 1) for a in range(j))
            post = softmax(ll, axis=2)  # (R, P, K)
        wp = w[:, :, None] * post
        new_prev = wp.sum(axis=1) + alpha
        new_prev /= new_prev.sum(axis=1, keepdims=True)
        # counts[r, a, y, l] = sum_p w_rp post_rpy 1[A_pa = l]: one matmul per annotator
        wp_t = wp.transpose(0, 2, 1).reshape(r * k, n_pat)
        new_conf = np.stack([(wp_t @ blocks[a]).reshape(r, k, k) for a in range(j)], axis=1) + (
            alpha if cell_prior is None else cell_prior)
        new_conf /= new_conf.sum(axis=3, keepdims=True)
        done = conf is not None and np.abs(new_conf - conf).max() < tol
        conf, prev = new_conf, new_prev
        if done:
            break
    return conf, prev


def _data(seed, k, j, curve, n_items, n_boot, em_tol=1e-3, cache=None, prior_boot=0.0):
    """One data set: probabilities, responses, refit weights ``g`` (n_boot, n_items), EM fit and refits."""
    rng = np.random.default_rng(seed)
    p, y, labels, conf_true = simulate(rng, n_items, k, j, curve)
    # The refits' item weights come next from the same generator (the EM draws nothing), so a cached run
    # reproduces them exactly.
    g = rng.standard_exponential((n_boot, n_items))
    g *= n_items / g.sum(axis=1, keepdims=True)
    # The EM refits do not depend on the interval's estimator: cached per (seed, setting) to rerun only the latter.
    tag = "" if not prior_boot else f"_pb{prior_boot:g}"
    path = None if cache is None else Path(cache) / f"draws_{seed}_{k}_{j}_{curve}_{n_items}_{n_boot}_{em_tol:g}{tag}.npz"
    if path is not None and path.exists():
        fit_c, draws = np.load(path)["fit"], np.load(path)["draws"]
    else:
        fit_c, fit_p = em_multiclass(labels, k, np.ones((1, n_items)))
        # --prior-boot a: the posterior bootstrap (Lyddon, Walker & Holmes 2018; Fong, Lyddon & Holmes 2019): each
        # refit also weights the Dirichlet(a) rows' pseudo-counts at random (a Exp(1) per cell, from a generator of
        # its own so that g is unchanged), so that a cell with no labels still varies across refits.
        prior = None if not prior_boot else prior_boot * np.random.default_rng([seed, 1]).standard_exponential(
            (n_boot, j, k, k))
        draws, _ = em_multiclass(labels, k, g, init=(fit_c[0], fit_p[0]), tol=em_tol, cell_prior=prior)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, fit=fit_c, draws=draws)
    resp = (np.repeat(np.arange(n_items), j), np.tile(np.arange(j), n_items), labels.reshape(-1))
    return p, resp, g, fit_c, draws, conf_true


def data_seed(k, j, curve, r, offset=0):
    """Seed of data set ``r`` of a setting. Data sets 0-99 keep the first study's seeds ``1000 K + 100 J + r`` (+50,000
    under-confident); every further block of 100 adds 1,000,000 (data sets 100-199 are the earlier fresh
    replication's ``--seed-offset 1000000``). No two settings share a seed: a shared seed would give two settings
    the same classifier outputs and clean labels (``simulate`` draws them first), so their coverages would be
    correlated."""
    return 1000 * k + 100 * j + r % 100 + 1_000_000 * (r // 100) + (0 if curve == "overconfident" else 50_000) + offset


def run_one(seed, k, j, curve, n_items, n_boot, targets, em_tol=1e-3, cache=None, joint=True, prior_boot=0.0):
    p, resp, g, fit_c, draws, conf_true = _data(seed, k, j, curve, n_items, n_boot, em_tol, cache, prior_boot)
    out = {"seed": seed, "max_abs_confusion_error": float(np.abs(fit_c[0] - conf_true).max())}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # As evaluate_multiclass(method="em"): the refits' bias correction centred on the full-data fit.
        top = posterior_top_label_nc_ece(p, resp, draws, bins=BINS, level=LEVEL, seed=seed,
                                         item_weights=g if joint else None, calibrate=joint, point_confusion=fit_c[0])
        # Joint draws for the class-wise NC-ECE: draw s sums the items with the weights g_s of its own refit.
        cw = posterior_classwise_nc_ece(p, resp, draws, bins=BINS, level=LEVEL, seed=seed,
                                        item_weights=g if joint else None, point_confusion=fit_c[0])
    for name, res, truth in (("top_label", top, targets[0]), ("classwise", cw, targets[1])):
        lo, hi = res.reported_interval
        out[name] = {"value": res.value, "debiased": res.debiased, "lower": res.lower, "upper": res.upper,
                     "upper_one_sided": res.upper_one_sided, "interval_to_read": res.interval_to_read,
                     "covered": bool(lo <= truth <= hi), "covered_two_sided": bool(res.lower <= truth <= res.upper),
                     "width": hi - lo, "error_debiased": res.debiased - truth, "error_value": res.value - truth,
                     "sd_debiased_draws": float(np.std(res.debiased_draws))}
    per_cov = [bool(r.reported_interval[0] <= t <= r.reported_interval[1]) for r, t in zip(cw.per_class, targets[2])]
    out["classwise_per_class_coverage"] = float(np.mean(per_cov))
    return out


def run_cli_em(seed, k, j, curve, n_items, n_boot, targets, *_, **__):
    """The command line's default route, measured as a user gets it: ``evaluate_multiclass(method="em")`` (grouped
    EM, ``n_boot`` item-bootstrap replicates with the EM refitted on each, the intervals it reports) on the same
    data set as :func:`run_one` (same seed, so the same classifier outputs, clean and noisy labels)."""
    from noisycal_bayes import MulticlassAnnotationSet
    from noisycal_bayes.evaluation import evaluate_multiclass

    rng = np.random.default_rng(seed)
    p, y, labels, conf_true = simulate(rng, n_items, k, j, curve)
    data = MulticlassAnnotationSet.from_responses(np.repeat(np.arange(n_items), j), np.tile(np.arange(j), n_items),
                                                  labels.reshape(-1), probs=p, n_classes=k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = evaluate_multiclass(data, n_boot=n_boot, seed=seed, checks=False)
    out = {"seed": seed, "max_abs_confusion_error": float(np.abs(ev.confusion - conf_true).max())}
    for name, res, truth in (("top_label", ev.nc_ece, targets[0]), ("classwise", ev.classwise_nc_ece, targets[1])):
        out[name] = {"value": res.value, "lower": res.lower, "upper": res.upper, "upper_bound": res.upper_bound,
                     "covered": bool(res.lower <= truth <= res.upper), "width": res.upper - res.lower,
                     "error_value": res.value - truth, "interval_method": res.interval_method}
    pc = ev.classwise_nc_ece.per_class
    out["classwise_per_class_coverage"] = float(np.mean((pc["lower"].to_numpy() <= targets[2])
                                                        & (targets[2] <= pc["upper"].to_numpy())))
    return out


def width_check(k, j, curve, first, last, n_items=2000, kind="top_label"):
    """The items' bootstrap alone, at the TRUE confusion matrices (no EM), on data sets ``first..last-1``: the sd of
    the estimate over data sets against the mean sd of its draws (1 when the bootstrap has the right width), the
    mean standardised error, and the coverage of the interval as shipped (class-wise: the mean over classes at its
    calibrated level), with the noisy labels and with the clean labels as one perfect annotator. ``kind``:
    ``"top_label"`` or ``"classwise"``. Printed; a check of the width diagnostic, not of the study's interval
    (docs/coverage.md, K-class section)."""
    func = posterior_top_label_nc_ece if kind == "top_label" else posterior_classwise_nc_ece
    target = population_target(k, curve)[0 if kind == "top_label" else 1]
    rows = []
    for r in range(first, last):
        seed = data_seed(k, j, curve, r)
        p, y, labels, conf_true = simulate(np.random.default_rng(seed), n_items, k, j, curve)
        resp = (np.repeat(np.arange(n_items), j), np.tile(np.arange(j), n_items), labels.reshape(-1))
        clean = (np.arange(n_items), np.zeros(n_items, int), y)
        row = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for res in (func(p, resp, conf_true[None], bins=BINS, seed=seed),
                        func(p, clean, np.eye(k)[None, None], bins=BINS, seed=seed)):
                lo, hi = res.reported_interval
                row += [res.debiased, np.std(res.debiased_draws), lo <= target <= hi]
        rows.append(row)
    x = np.array(rows, dtype=float)
    parts = []
    for name, o in (("noisy labels at the true C", 0), ("clean labels", 3)):
        z = (x[:, o] - target) / x[:, o + 1]
        parts.append(f"{name} {x[:, o].std(ddof=1) / x[:, o + 1].mean():.2f} (bias {x[:, o].mean() - target:+.4f}, "
                     f"z mean {z.mean():+.2f}, coverage {x[:, o + 2].mean():.3f})")
    text = (f"{kind} K={k} J={j} {curve} data sets {first}-{last - 1}: estimator sd / draws' mean sd, "
            + "; ".join(parts))
    print(text, flush=True)
    return text


def block_check(k, j, curve, first, last, n_items=2000, plain_seeds=False):
    """The top-label interval with the CLEAN labels as one perfect annotator (no noise, no EM: the items'
    Bayesian bootstrap alone, fresh weights, nominal level) on data sets ``first..last-1``: coverage per block of
    100 data sets, overall, and the chi-square test of equal coverage across the blocks. ``plain_seeds``: seeds
    ``7,000,000 + r`` instead of the study's (``data_seed``). Printed (docs/coverage.md, K-class section)."""
    from scipy import stats

    target = population_target(k, curve)[0]
    hits = []
    for r in range(first, last):
        seed = 7_000_000 + r if plain_seeds else data_seed(k, j, curve, r)
        p, y, _, _ = simulate(np.random.default_rng(seed), n_items, k, j, curve)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = posterior_top_label_nc_ece(p, (np.arange(n_items), np.zeros(n_items, int), y), np.eye(k)[None, None],
                                             bins=BINS, seed=seed)
        lo, hi = res.reported_interval
        hits.append(lo <= target <= hi)
    hits = np.array(hits)
    blocks = [hits[a:a + 100] for a in range(0, hits.size, 100)]
    covered = np.array([b.sum() for b in blocks])
    sizes = np.array([b.size for b in blocks])
    p_value = stats.chi2_contingency(np.c_[covered, sizes - covered])[1] if len(blocks) > 1 else float("nan")
    cov = hits.mean()
    seeds = "seeds 7000000+r" if plain_seeds else f"study seeds of J={j}"
    per = " ".join(f"{c / n:.2f}" for c, n in zip(covered, sizes))
    text = (f"top_label clean labels K={k} {curve} {seeds} data sets {first}-{last - 1}: coverage {cov:.4f} "
            f"(se {np.sqrt(cov * (1 - cov) / hits.size):.4f}); per 100: {per}; equal across blocks: p = {p_value:.3f}")
    print(text, flush=True)
    return text


def entry_check(k, j, curve, first, last, n_items=2000, n_boot=100, em_tol=1e-3, cache=None, prior_boot=0.0):
    """Coverage of the TRUE confusion entries by the 90% equal-tailed intervals of the EM refits, by the entry's
    size: the bootstrap's known failure on sparse multinomial cells (a cell with few or no labels barely varies
    across resamples, and the MLE sits at the boundary 0). Printed, one line per size class."""
    true, hit = [], []
    for r in range(first, last):
        _, _, _, _, draws, conf_true = _data(data_seed(k, j, curve, r), k, j, curve, n_items, n_boot, em_tol, cache,
                                             prior_boot)
        lo, hi = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
        true.append(conf_true.ravel())
        hit.append(((lo <= conf_true) & (conf_true <= hi)).ravel())
    true, hit = np.concatenate(true), np.concatenate(hit)
    lines = []
    for a, b in ((0, 0.005), (0.005, 0.02), (0.02, 0.05), (0.05, 0.5), (0.5, 1.0)):
        m = (true >= a) & (true < b)
        lines.append(f"K={k} J={j} {curve} data sets {first}-{last - 1}: true entry in [{a}, {b}): share {m.mean():.3f},"
                     f" 90% refit-interval coverage {hit[m].mean():.3f}")
    print("\n".join(lines), flush=True)
    return lines


def _level_two_sided(draws, estimate, level=LEVEL, grid=401, lowest=0.5):
    """The calibrated level of ``propagate.intervals.calibrated_level``, searched on [``lowest``, 1] instead
    of [``level``, 1] (allowed below ``level``)."""
    dev = draws - draws.mean()
    a = np.linspace(lowest, 1.0, grid)
    shifted = dev[:, None] + (draws.mean() - estimate)
    cover = ((shifted + np.quantile(dev, (1 - a) / 2)[None] <= 0) &
             (shifted + np.quantile(dev, (1 + a) / 2)[None] >= 0)).mean(axis=0)
    ok = np.flatnonzero(cover >= level - 1e-12)
    return float(a[ok[0]]) if ok.size else 1.0


def sweep_one(seed, k, j, curve, n_items, n_boot, targets, em_tol=1e-3, cache=None, joint=True, prior_boot=0.0):
    """Joint (or independent) draws for both kinds, read at three levels from one pass: nominal, calibrated
    (``calibrated_level``, at least ``level``) and calibrated two-sided (:func:`_level_two_sided`). Per kind:
    error of the debiased estimate, sd of the centred draws, and per level the level, cover flag and width."""
    import noisycal_bayes.propagate.intervals as iv
    import noisycal_bayes.propagate.nc_ece as pm
    from noisycal_bayes.propagate.result import _summarise

    p, resp, g, fit_c, draws, conf_true = _data(seed, k, j, curve, n_items, n_boot, em_tol, cache, prior_boot)
    row = {"seed": seed}
    for kind, truth in (("top_label", targets[0]), ("classwise", targets[1])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            count, score, freq, point, _, meta, _ = pm._run(
                "sweep", kind, p, resp, draws, None, bins=BINS, weights="iv", level=LEVEL, seed=seed,
                interval="debiased", bootstrap=True, n_draws=None, usable=None, max_condition=pm.MAX_CONDITION,
                item_weights=g if joint else None, point_confusion=fit_c[0])
        read = iv.read_interval(count, score, freq, level=LEVEL, interval="debiased", point=point,
                                bias_correct=meta["bias_correct"], centre=True)
        centred, est, p_value = read["debiased_draws"], read["debiased"], read["calibration_p_value"]
        raw = _summarise(count, score, iv.bias_corrected(count, score, freq, point) if meta["bias_correct"]
                         else freq)[1]
        d = {"err": est - truth, "sd": float(centred.std())}
        for name, a in (("nominal", LEVEL), ("calibrated", iv.calibrated_level(raw, est, LEVEL)),
                        ("two_sided", _level_two_sided(raw, est))):
            lo, hi, one = iv.quantiles(centred, LEVEL, a)
            if p_value > 1 - LEVEL:  # the one-sided reading, as interval_to_read
                lo, hi = 0.0, one
            d[name] = {"level": a, "covered": bool(lo <= truth <= hi), "width": float(hi - lo)}
        row[kind] = d
    return row


def sweep_summary(rows):
    """Coverage per kind and level, z sd and the mean calibrated level (the variants table of docs/coverage.md)."""
    out = {}
    for kind in ("top_label", "classwise"):
        z = np.array([r[kind]["err"] / r[kind]["sd"] for r in rows])
        out[kind] = {v: float(np.mean([r[kind][v]["covered"] for r in rows]))
                     for v in ("nominal", "calibrated", "two_sided")}
        out[kind].update(z_sd=float(z.std(ddof=1)), mean_level=float(np.mean([r[kind]["calibrated"]["level"]
                                                                             for r in rows])))
    return out


def summarise(rows, targets):
    s = {"n_datasets": len(rows), "target_top_label": targets[0], "target_classwise": targets[1]}
    for name in ("top_label", "classwise"):
        cov = np.array([r[name]["covered"] for r in rows])
        s[name] = {"coverage": float(cov.mean()), "binomial_se": float(np.sqrt(0.9 * 0.1 / len(rows))),
                   "mean_width": float(np.mean([r[name]["width"] for r in rows])),
                   "bias_value": float(np.mean([r[name]["error_value"] for r in rows]))}
        if "error_debiased" in rows[0][name]:  # the propagation route (run_one); the CLI route has no debiased value
            s[name].update(
                coverage_two_sided=float(np.mean([r[name]["covered_two_sided"] for r in rows])),
                bias_debiased=float(np.mean([r[name]["error_debiased"] for r in rows])),
                rmse_debiased=float(np.sqrt(np.mean([r[name]["error_debiased"] ** 2 for r in rows]))),
                share_one_sided=float(np.mean([r[name]["interval_to_read"] != "two_sided" for r in rows])))
    s["classwise_per_class_coverage"] = float(np.mean([r["classwise_per_class_coverage"] for r in rows]))
    return s


def merge(paths, out, previous=None):
    """One results file from several runs (settings in the order given; configs must agree but for reps).

    ``previous``: an earlier results file whose per-setting summaries are kept (``previous_summaries``, with its
    ``config``) so the docs table can show before / after.
    """
    parts = [json.loads(Path(p).read_text()) for p in paths]
    keep = ("n_items", "n_boot", "em_tol", "bins", "level", "weights", "interval", "draws", "classwise_item_weights",
            "bias_correction_centre", "quantile_rule")
    # Each setting compared with the first file that states it (a file without a config, such as the first joined
    # --sweep file, states none; a merged file keeps the values its parts stated).
    config = {k: next((part["config"][k] for part in parts if part.get("config", {}).get(k) is not None), None)
              for k in keep}
    for p, part in zip(paths, parts):
        if any(part.get("config", {}).get(k) not in (None, config[k]) for k in keep):
            raise SystemExit(f"merge: {p} has another config than the files before it")
    # The same setting in several files (blocks of data sets, --first-rep): rows concatenated, summary recomputed.
    by_key: dict = {}
    for part in parts:
        for st in part["settings"]:
            key = _order(st)
            if key in by_key:
                old = by_key[key]
                seeds = {r["seed"] for r in old["rows"]}
                if seeds & {r["seed"] for r in st["rows"]}:
                    raise SystemExit(f"merge: setting {key} has data sets (seeds) in more than one file")
                rows = old["rows"] + st["rows"]
                o = old["summary"]
                if "nominal" in rows[0]["top_label"]:  # --sweep files: the variants' summary
                    summ = sweep_summary(rows)
                else:
                    summ = summarise(rows, (o["target_top_label"], o["target_classwise"]))
                summ.update(K=o["K"], J=o["J"], curve=o["curve"], n_datasets=len(rows),
                            seconds=round(o.get("seconds", 0) + st["summary"].get("seconds", 0), 1))
                by_key[key] = {"summary": summ, "rows": rows}
            else:
                by_key[key] = st
    res = {"settings": [by_key[k] for k in sorted(by_key)],
           "config": {**config, "merged_from": [Path(p).name for p in paths]},
           "seconds": round(sum(part.get("seconds", 0) for part in parts), 1)}
    if previous:
        prev = json.loads(Path(previous).read_text())
        res["previous_summaries"] = [{**st["summary"], **_diagnostics(st["rows"])} for st in prev["settings"]]
        res["previous_config"] = prev["config"]
    Path(out).write_text(json.dumps(res, indent=1))
    return res


def _order(s):
    s = s.get("summary", s)
    return s["K"], s["curve"] != "overconfident", s["J"]


def _diagnostics(rows):
    """Per kind: bias of the debiased estimate +- its se, and the sd of the standardised error (estimate -
    target) / sd of the interval's draws (1 when the draws describe the estimator's spread)."""
    out = {}
    for name in ("top_label", "classwise"):
        err = np.array([r[name]["error_debiased"] for r in rows])
        z = err / np.array([r[name]["sd_debiased_draws"] for r in rows])
        out[f"{name}_diag"] = {"bias": float(err.mean()), "bias_se": float(err.std(ddof=1) / np.sqrt(err.size)),
                               "z_mean": float(z.mean()), "z_sd": float(z.std(ddof=1))}
    return out


def render(path):
    """The markdown table of docs/coverage.md's K-class section; cells outside 0.90 +- 2 binomial se in bold.

    With ``previous_summaries`` in the file (``--merge ... --previous``), each coverage cell reads
    ``before -> after`` and the data-set counts ``before / after``; a second table gives the diagnostics
    (bias of the debiased estimate +- se, sd of the standardised error) of the new run.
    """
    res = json.loads(Path(path).read_text())
    prev = {(s["K"], s["J"], s["curve"]): s for s in res.get("previous_summaries", [])}

    def cell(c, n):
        # The goal's band: 0.90 within two binomial standard errors; bold outside it (below or above).
        se = np.sqrt(LEVEL * (1 - LEVEL) / n)
        return f"**{c:.2f}**" if abs(c - LEVEL) > 2 * se else f"{c:.2f}"

    head = "| K | annotators | classifier | data sets | binomial se | top-label | class-wise (mean over classes) | " \
           "class-wise, per class (pooled) |"
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    diag = ["| K | annotators | classifier | top-label bias | top-label z sd | class-wise bias | class-wise z sd |",
            "|---|---|---|---|---|---|---|"]
    for st in res["settings"]:
        s = st["summary"]
        n = s["n_datasets"]
        p = prev.get((s["K"], s["J"], s["curve"]))
        curve = "over-confident" if s["curve"] == "overconfident" else "under-confident"
        cov = [cell(s[k]["coverage"], n) for k in ("top_label", "classwise")]
        cov.append(f"{s['classwise_per_class_coverage']:.2f}")
        count, se = f"{n}", f"{np.sqrt(LEVEL * (1 - LEVEL) / n):.3f}"
        if p:
            m = p["n_datasets"]
            cov = [f"{cell(p[k]['coverage'], m)} → {c}" for k, c in zip(("top_label", "classwise"), cov)] + \
                  [f"{p['classwise_per_class_coverage']:.2f} → {cov[2]}"]
            count = f"{m} / {n}"
            se = f"{np.sqrt(LEVEL * (1 - LEVEL) / m):.3f} / {se}"
        lines.append(f"| {s['K']} | {s['J']} | {curve} | {count} | {se} | " + " | ".join(cov) + " |")
        d = _diagnostics(st["rows"])

        def fmt(x, k):
            x = x[k + "_diag"]
            return f"{x['bias']:+.4f} ± {x['bias_se']:.4f}", f"{x['z_sd']:.2f}"
        cells = []
        for k in ("top_label", "classwise"):
            b, z = fmt(d, k)
            if p and k + "_diag" in p:
                b0, z0 = fmt(p, k)
                b, z = f"{b0} → {b}", f"{z0} → {z}"
            cells += [b, z]
        diag.append(f"| {s['K']} | {s['J']} | {curve} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n\n" + "\n".join(diag)
    print(text)
    return text


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=100, help="data sets per setting with K < 10")
    ap.add_argument("--reps-large", type=int, default=40, help="data sets per setting with K >= 10 (slower)")
    ap.add_argument("--first-rep", type=int, default=0,
                    help="first data set index (with --reps / --reps-large as the end): extend a study in blocks")
    ap.add_argument("--n-items", type=int, default=2000)
    ap.add_argument("--n-boot", type=int, default=100)
    ap.add_argument("--classes", type=int, nargs="+", default=[3, 10])
    ap.add_argument("--annotators", type=int, nargs="+", default=[3, 5])
    ap.add_argument("--curves", nargs="+", default=["overconfident", "underconfident"])
    ap.add_argument("--em-tol", type=float, default=1e-3, help="stopping tolerance of the bootstrap EM refits")
    ap.add_argument("--seed-offset", type=int, default=0,
                    help="added to every data set's seed (fresh data sets for a replication; 0 = the study's)")
    ap.add_argument("--independent", action="store_true",
                    help="fresh item weights per draw, nominal top-label level (the routes before joint draws)")
    ap.add_argument("--sweep", action="store_true",
                    help="instead of the study: both kinds with joint draws (or --independent) at the nominal, "
                         "calibrated and two-sided calibrated levels (the variants table of docs/coverage.md)")
    ap.add_argument("--route", choices=["propagation", "cli-em"], default="propagation",
                    help="propagation: the propagation functions fed with EM refits (the study); cli-em: "
                         "evaluate_multiclass(method='em') as the command line runs it (--n-boot replicates)")
    ap.add_argument("--prior-boot", type=float, default=0.0,
                    help="refits with random Dirichlet pseudo-counts a*Exp(1) per confusion cell (posterior bootstrap; "
                         "0 = the study's refits)")
    ap.add_argument("--cache", help="directory caching each data set's EM draws (reruns then skip the EM refits)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "coverage_multiclass.json"))
    ap.add_argument("--merge", nargs="+", help="merge these results files into --out (no simulation)")
    ap.add_argument("--previous", help="with --merge: an earlier results file whose summaries are kept (before/after)")
    ap.add_argument("--width-check", action="store_true",
                    help="print width_check for each setting on data sets --first-rep..--reps (no EM, no file)")
    ap.add_argument("--block-check", action="store_true",
                    help="print block_check (clean labels, top-label, coverage per 100 data sets) for each setting")
    ap.add_argument("--plain-seeds", action="store_true", help="with --block-check: seeds 7,000,000 + r")
    ap.add_argument("--width-kind", choices=["top_label", "classwise"], default="top_label",
                    help="with --width-check: the top-label NC-ECE or the class-wise mean")
    ap.add_argument("--entry-check", action="store_true",
                    help="print entry_check (coverage of the true confusion entries by the refits) per setting")
    ap.add_argument("--render", help="print the docs table of this results file (no simulation)")
    args = ap.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out, args.previous)
    if args.render:
        return render(args.render)
    if args.entry_check:
        return [entry_check(k, j, c, args.first_rep, args.reps if k < 10 else args.reps_large, args.n_items,
                            args.n_boot, args.em_tol, args.cache, args.prior_boot)
                for k in args.classes for c in args.curves for j in args.annotators]
    if args.block_check:
        return [block_check(k, j, c, args.first_rep, args.reps if k < 10 else args.reps_large, args.n_items,
                            args.plain_seeds)
                for k in args.classes for c in args.curves for j in args.annotators]
    if args.width_check:
        return [width_check(k, j, c, args.first_rep, args.reps if k < 10 else args.reps_large, args.n_items,
                            args.width_kind)
                for k in args.classes for c in args.curves for j in args.annotators]
    t_start = time.time()
    results = {"settings": [], "config": {"reps": args.reps, "reps_large": args.reps_large, "n_items": args.n_items,
                                          "n_boot": args.n_boot, "em_tol": args.em_tol, "seed_offset": args.seed_offset,
                                          "first_rep": args.first_rep, "route": args.route,
                                          "prior_boot": args.prior_boot,
                                          "bins": BINS, "level": LEVEL, "weights": "iv", "interval": "debiased",
                                          "classwise_item_weights": "independent" if args.independent else "joint",
                                          # since 2026-12-02 (4th session): point_confusion = the full-data EM fit
                                          "bias_correction_centre": "full-data EM fit",
                                          "quantile_rule": "weibull: p (B + 1) (noisycal_bayes.propagate.result."
                                                           "draw_quantiles)",
                                          "draws": "Bayesian-bootstrap EM refits (local NumPy Dawid-Skene EM)"}}
    for k in args.classes:
        for curve in args.curves:
            targets = population_target(k, curve)
            for j in args.annotators:
                t0 = time.time()
                one = sweep_one if args.sweep else (run_cli_em if args.route == "cli-em" else run_one)
                rows = [one(data_seed(k, j, curve, r, args.seed_offset), k, j, curve, args.n_items, args.n_boot,
                            targets, args.em_tol, args.cache, not args.independent, prior_boot=args.prior_boot)
                        for r in range(args.first_rep, args.reps if k < 10 else args.reps_large)]
                if args.sweep:
                    summ = sweep_summary(rows)
                    summ.update(K=k, J=j, curve=curve, seconds=round(time.time() - t0, 1))
                    results["settings"].append({"summary": summ, "rows": rows})
                    print(f"K={k:2d} J={j} {curve:15s} " + "  ".join(
                        f"{kind}: " + " ".join(f"{v} {summ[kind][v]:.2f}" for v in ("nominal", "calibrated",
                                                                                    "two_sided", "z_sd"))
                        + f" level {summ[kind]['mean_level']:.3f}" for kind in ("top_label", "classwise"))
                        + f"  [{summ['seconds']} s]", flush=True)
                    continue
                summ = summarise(rows, targets)
                summ.update(K=k, J=j, curve=curve, seconds=round(time.time() - t0, 1))
                results["settings"].append({"summary": summ, "rows": rows})
                print(f"K={k:2d} J={j} {curve:15s} top-label {summ['top_label']['coverage']:.2f} "
                      f"(two-sided {summ['top_label'].get('coverage_two_sided', float('nan')):.2f}, width "
                      f"{summ['top_label']['mean_width']:.4f}, truth {targets[0]:.4f})  class-wise "
                      f"{summ['classwise']['coverage']:.2f} (two-sided {summ['classwise'].get('coverage_two_sided', float('nan')):.2f},"
                      f" truth {targets[1]:.4f})  per class {summ['classwise_per_class_coverage']:.2f}  "
                      f"[{summ['seconds']} s]", flush=True)
    results["seconds"] = round(time.time() - t_start, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
