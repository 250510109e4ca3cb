"""The cell tables and statistics of :func:`~noisycal_bayes.diagnostics.model_checks` (the formulas are in
docs/model_checks.md): strata and pattern cells, expected counts, pooling and
Pearson's X^2, the agreement rates and their largest standardised difference, the targeted statistics
(score-dependent noise, annotator dependence) and their rows, and the parametric bootstrap of EM refits.
"""
from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from .._progress import progress

#: Default rate at which each check warns when the model is right (its p-value is at most ``alpha``).
ALPHA = 0.05
#: Cells with a smaller fitted expected count are pooled (Cochran's rule for Pearson's X^2).
MIN_EXPECTED = 5.0
#: Largest number of (stratum, pattern) cells (2^J patterns per stratum).
MAX_CELLS = 200_000
# Bootstrap refits per batched EM call (a fixed size: one compiled program per design).
_REFIT_CHUNK = 100

# ------------------------------------------------------------------ cells
class _CellsUnavailable(ValueError):
    """The (group, pattern) cell tables cannot be built for this design (the message says why); the checks then
    compare responses instead (:func:`_response_checks`)."""


def _strata(inputs):
    """Observed (group, mask) strata and every cell of each: patterns, group, stratum, observed counts.

    Raises :class:`_CellsUnavailable` for sparse inputs (no patterns), for more annotators than the cell keys
    hold (``n_groups * 3^J`` must fit int64: :func:`~noisycal_bayes.data.compress.pattern_keys`; the stratum
    keys ``n_groups * 2^J`` are smaller) and for more than :data:`MAX_CELLS` cells.
    """
    j = inputs.n_annotators
    if getattr(inputs, "sparse", False) or inputs.patterns is None:
        raise _CellsUnavailable(f"the fit used the sparse-response path ({j} annotators, items labelled by different "
                                "subsets): nearly every item has its own response pattern")
    if max(int(inputs.n_groups), 1) * 3 ** j >= 2 ** 63:
        raise _CellsUnavailable(f"{j} annotators: the (score group, response pattern) cells cannot be keyed by 64-bit "
                                "integers (at most 39 annotators with one group)")
    patterns = np.asarray(inputs.patterns, dtype=np.int8)
    group = np.asarray(inputs.row_group, dtype=np.int64)
    counts = np.asarray(inputs.counts, dtype=np.float64)
    keep = (counts > 0) & np.any(patterns >= 0, axis=1)  # rows without any response carry no information
    patterns, group, counts = patterns[keep], group[keep], counts[keep]
    mask = patterns >= 0
    mask_code = mask.astype(np.int64) @ (1 << np.arange(j - 1, -1, -1, dtype=np.int64))
    key = group * (1 << j) + mask_code
    strata, row_stratum = np.unique(key, return_inverse=True)
    s_group, s_mask = strata >> j, strata & ((1 << j) - 1)
    n_obs = np.array([bin(int(m)).count("1") for m in s_mask], dtype=np.int64)
    n_cells = int(np.sum(2 ** n_obs))
    if n_cells > MAX_CELLS:
        raise _CellsUnavailable(f"the observed strata have {n_cells} (group, pattern) cells (> {MAX_CELLS}): too many "
                                "annotators per item for cell counts")
    cell_pat, cell_group, cell_stratum = [], [], []
    for s, (g, m, k) in enumerate(zip(s_group, s_mask, n_obs)):
        cols = [c for c in range(j) if (int(m) >> (j - 1 - c)) & 1]
        bits = (np.arange(2 ** k)[:, None] >> np.arange(k - 1, -1, -1)) & 1
        pat = np.full((2 ** k, j), -1, np.int8)
        pat[:, cols] = bits
        cell_pat.append(pat)
        cell_group.append(np.full(2 ** k, g))
        cell_stratum.append(np.full(2 ** k, s))
    cell_pat = np.concatenate(cell_pat)
    cell_group = np.concatenate(cell_group).astype(np.int32)
    cell_stratum = np.concatenate(cell_stratum)
    # Observed count of each cell: match rows to cells by their (group, pattern) key.
    from ..data.compress import pattern_keys

    cell_key = pattern_keys(cell_pat, cell_group, j)
    order = np.argsort(cell_key)
    pos = order[np.searchsorted(cell_key, pattern_keys(patterns, group, j), sorter=order)]
    observed = np.bincount(pos, weights=counts, minlength=cell_key.size)
    n_stratum = np.bincount(row_stratum, weights=counts, minlength=strata.size)
    return cell_pat, cell_group, cell_stratum, observed, n_stratum, n_obs


def _cell_probs(cell_pat, cell_group, fpr, tpr, prevalence):
    """``P(pattern | group)`` of every cell for each parameter row: (S, n_cells) from (S, J), (S, J), (S, G)."""
    import jax

    from ..core import ds_loglik_rows, x64
    from ..data import padded_size

    n_cells, j = cell_pat.shape
    # Padded to a size fixed by the design (rows of missing responses, dropped after), so that JAX compiles
    # its operations once per design instead of once per set of observed strata.
    extra = max(padded_size(n_cells, int(np.shape(prevalence)[1]), j) - n_cells, 0)
    pat = np.concatenate([cell_pat, np.full((extra, j), -1, np.int8)]).astype(np.int32)
    grp = np.concatenate([cell_group, np.zeros(extra, np.int32)])
    with x64():
        fn = jax.vmap(lambda f, t, p: ds_loglik_rows(pat, grp, f, t, p))
        out = np.asarray(fn(np.asarray(fpr, np.float64), np.asarray(tpr, np.float64),
                            np.asarray(prevalence, np.float64)))
    return np.exp(out[:, :n_cells])


def _pool(expected, cell_stratum, n_strata, min_expected):
    """Pooled-cell index of each cell (the pooling rule of docs/model_checks.md) and the number of pooled cells."""
    pooled = np.empty(expected.size, np.int64)
    next_id = 0
    for s in range(n_strata):
        idx = np.flatnonzero(cell_stratum == s)
        idx = idx[np.argsort(expected[idx], kind="stable")]
        e = expected[idx]
        small = int(np.sum(e < min_expected))
        if small:
            # Merge the small cells, then the next smallest ones until the merged cell reaches min_expected.
            take = small
            while take < idx.size and e[:take].sum() < min_expected:
                take += 1
            pooled[idx[:take]] = next_id
            pooled[idx[take:]] = next_id + 1 + np.arange(idx.size - take)
            next_id += 1 + idx.size - take
        else:
            pooled[idx] = next_id + np.arange(idx.size)
            next_id += idx.size
    return pooled, next_id


def _x2(observed, expected, pooled, n_pooled):
    """Pearson X^2 over pooled cells; ``observed``, ``expected`` of shape (..., n_cells)."""
    o = np.stack([np.bincount(pooled, weights=row, minlength=n_pooled) for row in observed.reshape(-1, pooled.size)])
    e = np.stack([np.bincount(pooled, weights=row, minlength=n_pooled) for row in expected.reshape(-1, pooled.size)])
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(e > 0, (o - e) ** 2 / e, 0.0)
    return terms.sum(axis=1).reshape(observed.shape[:-1])


# ------------------------------------------------------------------ agreement
def _agreement_design(cell_pat, cell_group, n_groups):
    """Indicator matrices: pairs and each annotator with the others, overall and per group."""
    j = cell_pat.shape[1]
    pairs = list(combinations(range(j), 2))
    both = np.stack([(cell_pat[:, a] >= 0) & (cell_pat[:, b] >= 0) for a, b in pairs], 1).astype(np.float64)
    agree = np.stack([(cell_pat[:, a] >= 0) & (cell_pat[:, a] == cell_pat[:, b]) for a, b in pairs], 1)
    agree = agree.astype(np.float64)
    # Annotator j with the others: sums over the pairs that contain j.
    member = np.array([[a == k or b == k for a, b in pairs] for k in range(j)], dtype=np.float64).T  # (P, J)
    onehot = np.eye(n_groups)[cell_group]  # (n_cells, G)
    return pairs, both, agree, member, onehot


def _agreement_stats(counts, design):
    """Agreement values of count vectors (B, n_cells): pairs overall (B, P), pairs per group (B, G, P),
    annotators (B, J), and the numbers of co-labelled items (same shapes)."""
    _, both, agree, member, onehot = design
    n_pair, a_pair = counts @ both, counts @ agree
    n_grp = np.einsum("bc,cg,cp->bgp", counts, onehot, both)
    a_grp = np.einsum("bc,cg,cp->bgp", counts, onehot, agree)
    n_ann, a_ann = n_pair @ member, a_pair @ member
    with np.errstate(divide="ignore", invalid="ignore"):
        return (a_pair / n_pair, a_grp / n_grp, a_ann / n_ann), (n_pair, n_grp, n_ann)


def _max_z(d_obs, d_rep, m_obs, m_rep, n):
    """Largest binomially standardised difference ``|d| / sqrt(m (1 - m) / n)`` of the observed (B, K) and of
    each replicate (B, K), with ``m`` the model-implied rate of each (B, K) and ``n`` (K,) the co-labelled
    counts (the same for every replicate); also the entry where the observed one is largest.

    Each data set is standardised by its own fitted rates, never by the spread of the replicates, so the
    observed and the replicated maxima are computed alike (standardising by the replicates' own spread shrinks
    their z and made these checks warn at twice the stated rate with 19 replicates).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        z_obs = np.abs(d_obs) / np.sqrt(m_obs * (1 - m_obs) / n)
        z_rep = np.abs(d_rep) / np.sqrt(m_rep * (1 - m_rep) / n)
    ok = np.all(np.isfinite(z_obs), axis=0) & (n > 0)
    if not np.any(ok):
        return None
    z_rep = np.where(np.isfinite(z_rep[:, ok]), z_rep[:, ok], 0.0)
    worst = int(np.flatnonzero(ok)[np.argmax(z_obs[:, ok].mean(axis=0))])
    return z_obs[:, ok].max(axis=1), z_rep.max(axis=1), worst


def _params(fit):
    """(fpr (S, J), tpr (S, J), prevalence (S, G)) of the point estimate (S = 1) or of every draw."""
    g = fit.inputs.n_groups
    if fit.method == "nuts":
        d = fit.draws
        s = d["fpr"].shape[0] * d["fpr"].shape[1]
        return (d["fpr"].reshape(s, -1), d["tpr"].reshape(s, -1), np.asarray(d["prevalence"]).reshape(s, g))
    p = fit.point
    return (np.asarray(p["fpr"])[None], np.asarray(p["tpr"])[None], np.asarray(p["prevalence"]).reshape(1, g))


#: ``detail`` of the ``score_dependent_noise`` row of a fit with one score group.
ONE_GROUP = "one score group: channels cannot be compared across scores (fit with score groups)"


def _untestable_row(name, detail):
    """The table row of a check that cannot be run here, ``detail`` saying why."""
    return dict(name=name, status="not_testable", statistic=np.nan, p_value=np.nan, detail=detail)


def _agreement_row(name, diff, labels, alpha):
    """Table row of one agreement check: the largest ``|z|`` (:func:`_max_z`) against the replicates' maxima.

    ``diff = (d_obs, d_rep, m_obs, m_rep, n)`` as :func:`_max_z` takes them; ``labels`` names each entry.
    """
    d_obs, d_rep, m_obs, m_rep, n_co = diff
    mz = _max_z(d_obs, d_rep, m_obs, m_rep, n_co)
    if mz is None:
        return _untestable_row(name, "no co-labelled items, or the replicates do not vary")
    z_obs, z_rep, worst = mz
    p = float((1 + np.sum(z_rep >= z_obs)) / (1 + z_rep.size))
    return dict(name=name, status="warn" if p <= alpha else "pass", statistic=float(np.mean(z_obs)), p_value=p,
                detail=(f"largest |z| of {len(labels) - int(np.sum(np.isnan(d_obs[0])))} "
                        f"agreement rates (observed minus fitted): {labels[worst]}"))


def _trend_z(d, m, n, c):
    """Trend contrast of count residuals per annotator: ``sum_g c_g d_gj / sqrt(sum_g c_g^2 n_gj m_gj (1 - m_gj))``.

    ``d`` (B, G, J) count residuals, ``m`` (B, G, J) fitted rates, ``n`` (G, J) responses, ``c`` (G,) -> (B, J).
    """
    var = np.where(n[None] > 0, (c[None, :, None] ** 2) * n[None] * m * (1 - m), 0.0)
    num = np.where(n[None] > 0, c[None, :, None] * d, 0.0).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / np.sqrt(var.sum(axis=1))


def _assumption_checks(cell_pat, cell_group, n_groups, observed, reps, exp_obs, exp_rep, design, alpha, ids):
    """Rows of the ``score_dependent_noise`` and ``annotator_dependence`` checks (docs/model_checks.md).

    Each data set (observed, and every replicate) is compared with its own fitted expected counts
    (``exp_obs``: (1 or B, n_cells), ``exp_rep``: (B, n_cells)), as the agreement checks are.
    """
    rows = []
    b = reps.shape[0]
    onehot = design[4]
    pos = (cell_pat == 1).astype(np.float64)
    obs = (cell_pat >= 0).astype(np.float64)
    exp_obs = np.broadcast_to(exp_obs, (b, exp_obs.shape[-1]))

    def per_group(counts, ind):
        return np.einsum("bc,cg,cj->bgj", counts, onehot, ind)

    # ---- score-dependent noise: a trend over the score groups in each annotator's positive-response residual.
    if n_groups < 2:
        rows.append(_untestable_row("score_dependent_noise", ONE_GROUP))
    else:
        n_gj = per_group(observed[None], obs)[0]
        c = np.arange(n_groups, dtype=np.float64) - (n_groups - 1) / 2.0
        with np.errstate(divide="ignore", invalid="ignore"):
            m_obs = per_group(exp_obs, pos) / n_gj[None]
            m_rep = per_group(exp_rep, pos) / n_gj[None]
        m_obs, m_rep = np.nan_to_num(m_obs), np.nan_to_num(m_rep)
        z_obs = _trend_z(per_group(np.broadcast_to(observed, exp_obs.shape), pos) - per_group(exp_obs, pos), m_obs,
                         n_gj, c)
        z_rep = _trend_z(per_group(reps, pos) - per_group(exp_rep, pos), m_rep, n_gj, c)
        rows.append(_trend_row(z_obs, z_rep, n_groups, ids, alpha))
    # ---- annotator dependence: pooled excess agreement over pairs and score groups, one-sided.
    pairs, both, agree = design[0], design[1], design[2]
    if not pairs:
        rows.append(_untestable_row("annotator_dependence", "fewer than two annotators"))
        return rows
    n_gp = per_group(observed[None], both)[0]

    s_obs = _excess_z(per_group(np.broadcast_to(observed, exp_obs.shape), agree), per_group(exp_obs, agree), n_gp)
    s_rep = _excess_z(per_group(reps, agree), per_group(exp_rep, agree), n_gp)
    rows.append(_dependence_row(s_obs, s_rep, float(n_gp.sum()), len(pairs), n_groups, alpha))
    return rows


def _trend_row(z_obs, z_rep, n_groups, ids, alpha):
    """Table row of ``score_dependent_noise`` from the trend contrasts (:func:`_trend_z`) of the observed data
    ``z_obs`` (B or 1, J) and of the replicates ``z_rep`` (B, J)."""
    ok = np.all(np.isfinite(z_obs), axis=0)
    if not np.any(ok):
        return _untestable_row("score_dependent_noise", "no annotator has responses in two score groups")
    t_obs = np.abs(z_obs[:, ok]).max(axis=1)
    t_rep = np.nan_to_num(np.abs(z_rep[:, ok])).max(axis=1)
    p = float((1 + np.sum(t_rep >= t_obs)) / (1 + z_rep.shape[0]))
    worst = int(np.flatnonzero(ok)[np.argmax(np.abs(z_obs[:, ok]).mean(axis=0))])
    zw = float(z_obs[:, worst].mean())
    return dict(name="score_dependent_noise", status="warn" if p <= alpha else "pass",
                statistic=float(t_obs.mean()), p_value=p,
                detail=(f"largest |z| of the score trend in {int(ok.sum())} annotators' positive-response "
                        f"residuals over {n_groups} score groups: {ids[worst]} (z = {zw:+.2f}; > 0: "
                        "more positives than the shared channel predicts at high scores)"))


def _excess_z(a, e, n):
    """Pooled excess agreement ``S = sum (a - e) / sqrt(sum n m (1 - m))``, ``m = e / n``, per data set.

    ``a`` observed and ``e`` expected agreements of shape (B, ...cells), ``n`` co-labelled pairs of responses of
    shape (...cells,) -> (B,); the cells are (score group, pair of annotators).
    """
    axes = tuple(range(1, a.ndim))
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(n[None] > 0, e / n[None], 0.0)
    var = (n[None] * m * (1 - m)).sum(axis=axes)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (a - e).sum(axis=axes) / np.sqrt(var)


def _dependence_row(s_obs, s_rep, n_co, n_pairs, n_groups, alpha):
    """Table row of ``annotator_dependence`` from :func:`_excess_z` of the observed data and of each replicate,
    one-sided; ``n_co`` co-labelled pairs of responses over ``n_pairs`` pairs of annotators."""
    if not np.all(np.isfinite(s_obs)) or n_co == 0:
        return _untestable_row("annotator_dependence", "no co-labelled items")
    p = float((1 + np.sum(np.nan_to_num(s_rep, nan=-np.inf) >= s_obs)) / (1 + s_rep.shape[0]))
    return dict(name="annotator_dependence", status="warn" if p <= alpha else "pass",
                statistic=float(s_obs.mean()), p_value=p,
                detail=(f"pooled excess agreement z over {n_pairs} pairs x {n_groups} score groups "
                        f"({int(n_co)} co-labelled pairs of responses), one-sided: errors that coincide "
                        "more often than conditional independence allows raise it"))


def _bootstrap(fit, draw, p_hat, cell_pat, cell_group, n_replicates, *, progress_bar=False):
    """Parametric bootstrap: replicate counts from the estimate and an EM refit of each (warm-started there).

    Returns ``(reps (B, n_cells), refits)`` with ``refits[b] = (fpr, tpr, prevalence)`` or None if it failed.
    """
    from ..models.priors import em_prior_counts

    try:
        prior_counts = em_prior_counts(fit.prior) if fit.method == "map" else None
    except ValueError as err:
        raise ValueError(f"model_checks: the bootstrap refits this MAP fit by closed-form MAP-EM, which its prior does "
                         f"not allow ({err}). Check a maximum-likelihood fit_em fit, or a fit_nuts fit (posterior "
                         "predictive).") from None
    from ..data import padded_size

    s = fit.settings
    n_cells, j = cell_pat.shape
    # Zero-count rows (all responses missing) pad the table to a size fixed by the design, so that one compiled
    # EM serves every data set of that design whichever strata it has.
    extra = padded_size(n_cells, fit.inputs.n_groups, j) - n_cells
    patterns = np.concatenate([cell_pat, np.full((max(extra, 0), j), -1, np.int8)])
    group = np.concatenate([cell_group, np.zeros(max(extra, 0), np.int32)])
    reps = np.stack([draw(p_hat) for _ in range(n_replicates)])
    # All refits at once: the EM loop of fit_em (same E- and M-steps, objective and stopping rule), mapped over
    # the replicates' count vectors (inference.bootstrap's batched program; one call per chunk of replicates
    # instead of one per replicate: docs/performance.md, *Implementation choices*).
    from ..core import x64
    from ..core.starts import CONVERGED, orient
    from ..inference.bootstrap import _batch_program, _warm_start

    batch = _batch_program(j, fit.inputs.n_groups, prior_counts, int(s.get("max_iter", 1000)))
    theta0 = _warm_start(fit)[0]
    size = min(_REFIT_CHUNK, n_replicates)
    thetas, statuses = [], []
    for start in progress(range(0, n_replicates, size), enabled=progress_bar, desc="model checks (bootstrap refits)"):
        chunk = np.zeros((size, patterns.shape[0]))
        m = min(size, n_replicates - start)
        chunk[:m, :n_cells] = reps[start:start + m]
        chunk[m:] = chunk[0]  # padding of the last chunk (one compiled shape; discarded)
        with x64():
            theta, _, status = (np.asarray(v) for v in batch(theta0, patterns.astype(np.int32),
                                                             group.astype(np.int32), chunk,
                                                             np.float64(s.get("tol", 1e-8))))
        thetas.append(theta[:m])
        statuses.append(status[:m])
    theta, status = np.concatenate(thetas), np.concatenate(statuses)
    refits = []
    for b in range(n_replicates):
        # fit_em's screening with min_gap = 0: a converged run, oriented (label exchange), every gap > 0.
        if status[b] != CONVERGED or not np.all(np.isfinite(theta[b])):
            refits.append(None)
            continue
        f, t, p, _ = orient(theta[b, :j], theta[b, j:2 * j], theta[b, 2 * j:])
        refits.append(None if np.any(np.asarray(t) - np.asarray(f) <= 0) else
                      (np.asarray(f), np.asarray(t), np.asarray(p)))
    return reps, refits


def _agreement_table(fit, design, obs_stats, obs_n, fit_stats, diffs, n_groups):
    """Per-entry agreement table (see :class:`ModelChecks`)."""
    pairs = design[0]
    j = fit.inputs.n_annotators
    ids = list(fit.annotator_ids) or list(range(j))
    n_pairs = len(pairs)
    entries = []  # (kind, annotator, other, group, which statistic, flat index)
    for p, (a, b) in enumerate(pairs):
        entries.append(("pair", ids[a], ids[b], -1, 0, p))
        entries += [("pair", ids[a], ids[b], g, 1, g * n_pairs + p) for g in range(n_groups)]
    entries += [("annotator", ids[k], "others", -1, 2, k) for k in range(j)]
    return _agreement_rows(entries, obs_stats, obs_n, fit_stats, diffs)


def _agreement_rows(entries, obs_stats, obs_n, fit_stats, diffs):
    """The agreement table (see :class:`ModelChecks`) of ``entries`` ``(kind, annotator, other, group, which,
    index)``: entry ``index`` of statistic ``which`` (0 pairs, 1 pairs per group, 2 annotators) of the arrays."""
    rows = []
    for kind, a, b, g, which, k in entries:
        obs, n = obs_stats[which][0].reshape(-1)[k], obs_n[which][0].reshape(-1)[k]
        fitted = fit_stats[which][0].reshape(-1)[k]
        sd = z = p = np.nan
        if diffs is not None and np.isfinite(obs):
            d_obs, d_rep = diffs[which][0][:, k], diffs[which][1][:, k]
            keep = np.isfinite(d_rep)
            d_obs, d_rep = d_obs[keep], d_rep[keep]
            if d_rep.size > 1:
                sd = float(d_rep.std(ddof=1))
                z = float((d_obs.mean() - d_rep.mean()) / sd) if sd > 0 else np.nan
                up = (1 + np.sum(d_rep >= d_obs)) / (1 + d_rep.size)
                down = (1 + np.sum(d_rep <= d_obs)) / (1 + d_rep.size)
                p = float(min(1.0, 2 * min(up, down)))
        rows.append(dict(kind=kind, annotator=a, other=b, group=g, n_items=float(n), observed=float(obs),
                         expected=float(fitted), difference_sd=sd, z=z, p_value=p))
    return pd.DataFrame(rows)


def _response_pairs(item, annotator):
    """Co-labelled pairs of responses ``(r1, r2)``: two responses to one item by different annotators, with
    ``annotator[r1] < annotator[r2]``; ``item`` sorted (the storage order of ``AnnotationSet.responses``)."""
    starts = np.flatnonzero(np.r_[True, item[1:] != item[:-1]])
    sizes = np.diff(np.r_[starts, item.size])
    r1, r2 = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for k in np.unique(sizes[sizes > 1]):
        lo, hi = np.triu_indices(int(k), 1)
        base = starts[sizes == k][:, None]
        r1.append((base + lo[None]).reshape(-1))
        r2.append((base + hi[None]).reshape(-1))
    r1, r2 = np.concatenate(r1), np.concatenate(r2)
    keep = annotator[r1] != annotator[r2]  # repeated labels of one annotator are not agreement between two
    r1, r2 = r1[keep], r2[keep]
    swap = annotator[r1] > annotator[r2]
    return np.where(swap, r2, r1), np.where(swap, r1, r2)


def _indicator(index, n_cols):
    """Sparse (n_rows, n_cols) 0/1 matrix with a one in column ``index[r]`` of row ``r`` (``-1``: no column)."""
    from scipy import sparse

    rows = np.flatnonzero(index >= 0)
    return sparse.csr_matrix((np.ones(rows.size), (rows, index[rows])), shape=(index.size, n_cols))
