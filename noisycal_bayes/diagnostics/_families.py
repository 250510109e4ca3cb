"""The K-class pattern-count check of an evaluation (:func:`run_multiclass_checks`): Pearson's X^2 of the response
patterns of families of annotators within score groups, calibrated by EM bootstrap refits or NUTS posterior
predictive replicates (pooling and X^2 as :func:`~noisycal_bayes.diagnostics.model_checks`).
"""
from __future__ import annotations

import warnings

import numpy as np

from ._statistics import ALPHA, MAX_CELLS, MIN_EXPECTED, _pool, _x2

#: Bootstrap refits (EM) or posterior draws (NUTS) of the checks an evaluation runs (199: with alpha = 0.05 the
#: bootstrap p-value (1 + #) / 200 warns at exactly 5% under the model).
N_CHECK_REPLICATES = 199


def check_row(status, detail, statistic=None, p_value=None, name="pattern_counts") -> dict:
    """One JSON-ready row of the checks an evaluation reports: ``{name, status, statistic, p_value, detail}``."""
    return {"name": name, "status": status, "statistic": statistic, "p_value": p_value, "detail": detail}


class _Families:
    """Items split into families (score group x set of annotators who labelled); per family its items, the labels of
    those annotators as base-K pattern codes and the observed pattern counts (K^m cells, m annotators)."""

    def __init__(self, item, ann, lab, n_items, n_annotators, n_classes, groups):
        J, K = n_annotators, n_classes
        dense = np.full((n_items, J), -1, dtype=np.int64)
        dense[item, ann] = lab
        mask = dense >= 0
        # Families as the distinct rows of (group, mask of annotators J-1 .. 0): the order of the integer key
        # group * 2^J + sum_j mask_j 2^j, without the integer (it overflows int64 for J >= 63 annotators).
        fams, fam_of = np.unique(np.column_stack([groups, mask[:, ::-1]]), axis=0, return_inverse=True)
        fam_of = fam_of.reshape(-1)
        self.members, self.group, self.annotators, self.weights = [], [], [], []
        for f in range(len(fams)):
            rows = np.flatnonzero(fam_of == f)
            js = np.flatnonzero(mask[rows[0]])
            self.members.append(rows)
            self.group.append(int(groups[rows[0]]))
            self.annotators.append(js)
            self.weights.append(K ** np.arange(js.size))
        self.dense, self.K = dense, K
        # Python ints: K^m is exact for a family of any size m (int64 wraps from K^m >= 2^63).
        self.n_cells = sum(int(K) ** int(js.size) for js in self.annotators)
        self.n_free = sum(int(K) ** int(js.size) - 1 for js in self.annotators)

    def counts(self, dense) -> list:
        """Observed pattern counts per family from a dense (n_items, J) label table."""
        return [np.bincount(dense[np.ix_(rows, js)] @ w, minlength=self.K ** js.size).astype(np.float64)
                for rows, js, w in zip(self.members, self.annotators, self.weights)]

    def probs(self, f, confusion, prevalence):
        """``P(pattern)`` of family ``f`` for every pattern (base-K codes, first annotator least significant)."""
        K = self.K
        lik = np.ones((K, 1))
        for j in self.annotators[f][::-1]:
            # Outer product over the family's annotators: P(a_1..a_m | Y = y) for every pattern, per y.
            lik = (lik[:, :, None] * confusion[j][:, None, :]).reshape(K, -1)
        prob = prevalence[self.group[f]] @ lik
        return prob / prob.sum()


def _expected(fam: _Families, confusion, prevalence) -> np.ndarray:
    """Expected counts ``n_f P(pattern | group_f)`` of every family's cells, flat in family order."""
    return np.concatenate([fam.members[f].size * fam.probs(f, confusion, prevalence) for f in range(len(fam.members))])


def _cell_responses(fam: _Families):
    """``(cell, annotator, label)`` of every cell's responses (flat cells in family order: the base-K digits of the
    cell's code, first annotator least significant) and each cell's group."""
    cell, ann, lab, group, offset = [], [], [], [], 0
    for js, w, g in zip(fam.annotators, fam.weights, fam.group):
        codes = np.arange(fam.K ** js.size)
        cell.append(np.repeat(offset + codes, js.size))
        ann.append(np.tile(js, codes.size))
        lab.append(((codes[:, None] // w[None, :]) % fam.K).reshape(-1))
        group.append(np.full(codes.size, g))
        offset += codes.size
    return tuple(np.concatenate(v).astype(np.int64) for v in (cell, ann, lab)), np.concatenate(group)


class _Replicate:
    """The duck-typed data ``fit_em_multiclass`` reads, for one bootstrap replicate."""

    def __init__(self, responses, n_items, n_annotators, n_classes, probs):
        self.responses, self.n_items, self.n_annotators = responses, n_items, n_annotators
        self.n_classes, self.probs, self.gold, self.classes = n_classes, probs, None, tuple(range(n_classes))


def _refit_cells(counts, cells, cell_group, n_annotators, n_classes, init, seed, shape):
    """EM refitted to one replicate's cell counts from ``init`` alone: the cells with a positive count as items,
    their counts as weights (the full data's likelihood at the cost of its distinct rows); ``(confusion,
    prevalence)``. ``shape = (n_items, n_responses)`` pads the items and responses with weight-0 ones to one size
    for every replicate of the design (one compiled EM), unless the replicate needs more."""
    from ..inference import fit_em_multiclass

    cell, ann, lab = cells
    keep = counts > 0
    index = np.cumsum(keep) - 1
    sel = keep[cell]
    item, ann, lab = index[cell[sel]], ann[sel], lab[sel]
    n, m = int(keep.sum()), int(sel.sum())
    group, weight = cell_group[keep], counts[keep]
    if n < shape[0] and m <= shape[1]:
        # Weight-0 items (no likelihood, no M-step counts), the padded responses on the last of them.
        item = np.concatenate([item, np.full(shape[1] - m, shape[0] - 1)])
        ann, lab = (np.concatenate([v, np.zeros(shape[1] - m, np.int64)]) for v in (ann, lab))
        group, weight = np.concatenate([group, np.zeros(shape[0] - n, np.int64)]), np.r_[weight, np.zeros(shape[0] - n)]
        n = shape[0]
    n_groups = int(group.max()) + 1
    rep = _Replicate((item, ann, lab), n, n_annotators, n_classes, None)
    fit = fit_em_multiclass(rep, model="grouped", groups=group.astype(np.int32), weights=weight,
                            init=(init[0], init[1][:n_groups]), n_starts=0, seed=seed, path="sparse")
    return np.asarray(fit.confusion), np.asarray(fit.prevalence)


def run_multiclass_checks(data, fit, *, method: str = "em", seed: int = 0) -> tuple:
    """Predictive check of the K-class channel model on (score group x annotators who labelled x response pattern)
    counts; one row ``{name, status, statistic, p_value, detail}``.

    The discrepancy is Pearson's ``X^2 = sum (O - E)^2 / E`` over cells pooled within each (group, set of
    annotators) family to an expected count of :data:`MIN_EXPECTED` (:func:`_pool`, the rule of the binary checks).
    EM: a parametric bootstrap of :data:`N_CHECK_REPLICATES` replicates (family sizes kept), each refitted by EM
    warm-started at the fit and compared with its own refit; p-value ``(1 + #{T_rep >= T_obs}) / (R + 1)``, warning
    when ``p <=`` :data:`ALPHA`. NUTS: a posterior predictive check over as many draws (Gelman, Meng & Stern 1996;
    conservative). ``not_testable`` with repeated or gold labels, more than :data:`MAX_CELLS` cells, or no degrees
    of freedom left after pooling (e.g. a sparse crowd). Why pooling, and the calibration: docs/model_checks.md.

    Parameters
    ----------
    data : MulticlassAnnotationSet
    fit : MulticlassEMFit or MulticlassPosterior
        The grouped model's fit: ``confusion`` (J, K, K) and ``prevalence`` (G, K), or their draws (S, ...).
    method : {"em", "nuts"}, default "em"
        ``"em"``: parametric bootstrap with EM refits; ``"nuts"``: posterior predictive over the draws.
    seed : int, default 0

    Returns
    -------
    tuple of dict
        One :func:`check_row` named ``pattern_counts``.
    """
    item, ann, lab = (np.asarray(x, dtype=np.int64) for x in data.responses)
    J, K = data.n_annotators, data.n_classes
    key = item * J + ann
    if np.unique(key).size != key.size:
        return (check_row("not_testable", "repeated labels: the check's response patterns hold one label per "
                          "(item, annotator)."),)
    gold = getattr(data, "gold", None)
    if gold is not None and (np.asarray(gold) >= 0).any():
        return (check_row("not_testable", "gold labels: the check compares annotator label patterns of items "
                          "whose clean label is unknown; gold items enter the model differently."),)
    groups = np.asarray(fit.groups, dtype=np.int64)
    fam = _Families(item, ann, lab, data.n_items, J, K, groups)
    n_groups = int(np.unique(groups).size)  # groups with items: an empty group's prevalence is no parameter
    n_params = n_groups * (K - 1) + J * K * (K - 1)
    if fam.n_cells > MAX_CELLS:
        n_cells = str(fam.n_cells) if fam.n_cells < 10 ** 9 else f"about 10^{len(str(fam.n_cells)) - 1}"
        return (check_row("not_testable", f"{n_cells} (group x pattern) cells exceed {MAX_CELLS}: too many "
                          "annotators per item for a pattern check."),)
    if fam.n_free <= n_params:
        return (check_row("not_testable", f"{fam.n_free} free cell probabilities for {n_params} parameters: the "
                          "design fits any counts exactly, so nothing can be tested."),)
    rng = np.random.default_rng(seed)
    observed = np.concatenate(fam.counts(fam.dense))
    n_fam = len(fam.members)
    stratum = np.repeat(np.arange(n_fam), [K ** js.size for js in fam.annotators])
    size = np.array([m.size for m in fam.members])
    conf, prev = np.asarray(fit.confusion), np.asarray(fit.prevalence)
    nuts = method != "em"
    if nuts:
        S = conf.shape[0]
        pick = rng.choice(S, size=min(N_CHECK_REPLICATES, S), replace=S < N_CHECK_REPLICATES)
        expected_draws = np.stack([_expected(fam, conf[d], prev[d]) for d in pick])
        expected = expected_draws.mean(axis=0)
    else:
        expected = _expected(fam, conf, prev)
    pooled, n_pooled = _pool(expected, stratum, n_fam, MIN_EXPECTED)
    df = int(sum(np.unique(pooled[stratum == f]).size - 1 for f in range(n_fam))) - n_params
    if df <= 0:
        return (check_row("not_testable", f"after pooling cells with expected count < {MIN_EXPECTED:g}, no degrees "
                          f"of freedom are left ({n_pooled} pooled cells in {n_fam} (group x annotators) families "
                          f"for {n_params} parameters): too few items per family, as in a sparse crowd where "
                          "nearly every item has its own annotators."),)
    slot = np.concatenate([np.arange(K ** js.size) for js in fam.annotators])
    width = int(K ** max(js.size for js in fam.annotators))

    def draw(e):
        """Replicated cell counts: per family multinomial(n_f, E / n_f) (the family sizes kept)."""
        table = np.zeros((n_fam, width))
        table[stratum, slot] = e
        table /= table.sum(axis=1, keepdims=True)  # rounding: each family's probabilities sum to 1
        return rng.multinomial(size, table)[stratum, slot].astype(np.float64)

    if not nuts:
        t_obs = float(_x2(observed, expected, pooled, n_pooled))
        cells, cell_group = _cell_responses(fam)
        # One padded size for every replicate: 10% above the expected number of occupied cells (and of their
        # responses), in the buckets the sparse EM compiles for (data.compress.bucket_size).
        from ..data.compress import bucket_size as _bucket

        occupied = 1.0 - (1.0 - np.minimum(expected / size[stratum], 1.0)) ** size[stratum]
        per_cell = np.bincount(cells[0], minlength=fam.n_cells)
        shape = (_bucket(int(1.1 * occupied.sum()) + 9) - 1, _bucket(int(1.1 * occupied @ per_cell) + 8 * J))
        t_rep, failed = [], 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the refits' own warnings are not the user's
            for _ in range(N_CHECK_REPLICATES):
                rep = draw(expected)
                try:
                    c_r, p_r = _refit_cells(rep, cells, cell_group, J, K, (conf, prev), seed, shape)
                except (ValueError, RuntimeError):
                    failed += 1
                    continue
                t_rep.append(float(_x2(rep, _expected(fam, c_r, p_r), pooled, n_pooled)))
        if len(t_rep) < 0.9 * N_CHECK_REPLICATES:
            return (check_row("not_testable", f"{failed} of {N_CHECK_REPLICATES} bootstrap refits failed."),)
        t_rep = np.asarray(t_rep)
        p = float((1 + np.sum(t_rep >= t_obs)) / (t_rep.size + 1))
        how = f"parametric bootstrap, {t_rep.size} data sets simulated from the EM fit and refitted"
        stat, ref = t_obs, float(t_rep.mean())
    else:
        reps = np.stack([draw(e) for e in expected_draws])
        t_obs = _x2(np.broadcast_to(observed, reps.shape), expected_draws, pooled, n_pooled)
        t_rep = _x2(reps, expected_draws, pooled, n_pooled)
        p = float(np.mean(t_rep >= t_obs))
        how = f"posterior predictive, {pick.size} posterior draws"
        stat, ref = float(t_obs.mean()), float(t_rep.mean())
    status = "warn" if p <= ALPHA else "pass"
    detail = (f"Pearson X^2 on {n_pooled} pooled cells of {fam.n_cells} (group x annotators x pattern) cells "
              f"(expected >= {MIN_EXPECTED:g}), {df} df ({how}); observed discrepancy {stat:.1f} vs replicated "
              f"{ref:.1f} on average; warns at p <= {ALPHA}")
    return (check_row(status, detail, float(stat), p),)
