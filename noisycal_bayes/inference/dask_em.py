"""EM on sparse responses held in a Dask dataframe: :func:`fit_em_dask` (needs the ``dask`` extra).

For crowds too large for one machine's memory. The data are partitioned by item (every response of an item in
one partition) and each partition is read once into arrays kept in the workers' memory (``persist``). An
iteration is one round: each partition runs the E-step on its items (:func:`noisycal_bayes.core.sparse.sparse_e_step`)
and returns its log-likelihood and the M-step's sums (per annotator ``sum w T A``, ``sum w T``, ``sum w (1 - T) A``,
``sum w (1 - T)``; per group ``sum T`` and the item count), a few kilobytes; the driver adds them and takes the
M-step. So the driver never holds the responses, and the result equals the in-memory sparse EM from the same
start, iterate by iterate (up to the order of floating-point sums).

K classes (``classes=``): the same rounds with the K-class steps (:func:`~noisycal_bayes.core.sparse.sparse_multiclass_e_step`
per partition; its sums are the expected counts ``N[j, y, a]`` (J, K, K) and per group ``sum T[:, y]`` (G, K)); the loop
and stopping rule of :func:`~noisycal_bayes.inference.fit_em_multiclass` from its vote start (``n_starts=0``,
plain EM), and the latent classes relabelled by rule K3 of :mod:`noisycal_bayes.core.starts`.
"""
from __future__ import annotations

import time

import jax
import numpy as np
import pandas as pd

from ..core import x64
from ..core.em import log_prior
from ..core.sparse import _normalise_rows, rate_or_half, sparse_e_step, sparse_multiclass_e_step
from ..core.starts import normalised_rows, orient_classes
from ..core.calibration import bin_index
from ..data.binning import Binning
from ..data.classes import _check_classes
from ..data.outofcore import group_labels, label_indices
from ..core.tables import Responses
from ..models.priors import dirichlet_prior_counts, em_prior_counts

__all__ = ["fit_em_dask", "m_step_from_sums"]

# Compiled once per partition shape (in each worker), then every round reuses it.
_e_step = jax.jit(sparse_e_step)
_class_e_step = jax.jit(sparse_multiclass_e_step)


def m_step_from_sums(sums: np.ndarray, group_sums: np.ndarray, prior=None):
    """``(fpr, tpr, prevalence)`` from the reduced sums of :func:`fit_em_dask`.

    ``sums`` (4, J): per annotator ``sum T A``, ``sum T``, ``sum (1 - T) A``, ``sum (1 - T)`` over its responses;
    ``group_sums`` (2, G): per group ``sum T`` and the number of items. ``prior`` as in
    :func:`noisycal_bayes.core.sparse.sparse_m_step` (the same formulas).
    """
    (af, bf), (at, bt), (ap, bp) = ((1.0, 1.0),) * 3 if prior is None else prior
    with x64():  # the driver's sums are float64: keep them so (JAX would round to float32)
        tpr = rate_or_half(sums[0] + at - 1, sums[1] + at + bt - 2)
        fpr = rate_or_half(sums[2] + af - 1, sums[3] + af + bf - 2)
        prev = rate_or_half(group_sums[0] + ap - 1, group_sums[1] + ap + bp - 2)
        return tuple(np.asarray(v, dtype=np.float64) for v in (fpr, tpr, prev))


def _partition_arrays(frame: pd.DataFrame, *, item, annotator, label, score, gold, ann_index, edges, classes=None,
                      group=None):
    """The responses of one partition as local arrays (items numbered from 0 within the partition)."""
    if len(frame) == 0:
        return None
    codes, uniques = pd.factorize(frame[item], sort=False)
    ann = frame[annotator].map(ann_index)
    if ann.isna().any():
        unknown = pd.unique(frame[annotator][ann.isna()])[:5]
        raise ValueError(f"annotators {list(unknown)} are not in `annotators`.")
    if classes is not None:
        return _class_partition_arrays(frame, codes, len(uniques), ann.to_numpy(dtype=np.int32), item=item,
                                       label=label, gold=gold, classes=classes, group=group)
    lab = pd.to_numeric(frame[label], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isin(lab, (0.0, 1.0))
    if bad.any():
        raise ValueError(f"`{label}` must be 0 or 1; got {list(pd.unique(frame[label][bad])[:5])} for items "
                         f"{list(pd.unique(frame[item][bad])[:5])}. For K classes pass `classes=` (the class "
                         "names in index order).")
    n_local = len(uniques)
    out = {"item": codes.astype(np.int32), "annotator": ann.to_numpy(dtype=np.int32), "label": lab.astype(np.int8),
           "n_items": n_local, "group": np.zeros(n_local, np.int32), "gold": None,
           "vote": np.bincount(codes, weights=lab, minlength=n_local) / np.bincount(codes, minlength=n_local)}
    if edges is not None:
        z = pd.to_numeric(frame[score], errors="coerce").to_numpy(dtype=np.float64)
        first = np.full(n_local, np.nan)
        first[codes[::-1]] = z[::-1]
        if np.any(np.abs(z - first[codes]) > 0) or np.isnan(z).any():
            raise ValueError(f"every response of an item must carry the same finite score in `{score}`; not so for "
                             f"items {list(pd.unique(frame[item][np.isnan(z) | (z != first[codes])])[:5])}.")
        out["group"] = bin_index(first, edges).astype(np.int32)
    if gold is not None:
        g = pd.to_numeric(frame[gold], errors="coerce").to_numpy(dtype=np.float64)
        g = np.where(np.isnan(g), -1.0, g)
        if not np.isin(g, (-1.0, 0.0, 1.0)).all():
            raise ValueError(f"`{gold}` must be 0, 1 or missing; got {list(pd.unique(frame[gold][~np.isin(g, (-1, 0, 1))])[:5])}.")
        per_item = np.full(n_local, -1.0)
        per_item[codes] = g  # gold is one value per item: a conflict is an error
        if np.any(g != per_item[codes]):
            raise ValueError(f"items with conflicting `{gold}` values: "
                             f"{list(pd.unique(frame[item][g != per_item[codes]])[:5])}.")
        out["gold"] = per_item.astype(np.int8)
    return out


def _one_per_item(values: np.ndarray, codes: np.ndarray, n_local: int, frame, item: str, what: str) -> np.ndarray:
    """The value every row of an item carries (``values`` per row, -1 allowed as a value); conflicts name the items."""
    per_item = np.full(n_local, -1, np.int64)
    per_item[codes[::-1]] = values[::-1]
    bad = values != per_item[codes]
    if bad.any():
        raise ValueError(f"every row of an item must carry the same {what}; not so for items "
                         f"{list(pd.unique(frame[item][bad])[:5])}.")
    return per_item


def _class_partition_arrays(frame, codes, n_local: int, ann: np.ndarray, *, item, label, gold, classes, group):
    """K-class arrays of one partition: class indices of the labels, each item's group label and gold class index
    (-1 unknown), and the items' vote distributions (the start's posterior; gold items one-hot)."""
    items = frame[item].to_numpy()
    lab = label_indices(frame[label], classes, allow_missing=False,
                  where=lambda bad: f"items {list(pd.unique(items[bad])[:5])}").astype(np.int32)
    K = len(classes)
    grp = np.zeros(n_local, np.int32)
    if group is not None:
        grp = _one_per_item(group_labels(frame[group], items, group), codes, n_local, frame, item,
                            f"group in `{group}`").astype(np.int32)
    gold_item = None
    if gold is not None:
        g = label_indices(frame[gold], classes, allow_missing=True,
                    where=lambda bad: f"items {list(pd.unique(items[bad])[:5])} (`{gold}`)")
        gold_item = _one_per_item(g.astype(np.int64), codes, n_local, frame, item,
                                  f"gold label in `{gold}`").astype(np.int32)
    votes = np.zeros((n_local, K))
    np.add.at(votes, (codes, lab), 1.0)
    vote = votes / votes.sum(axis=1, keepdims=True)
    if gold_item is not None:
        known = gold_item >= 0
        vote[known] = np.eye(K)[gold_item[known]]
    return {"item": codes.astype(np.int32), "annotator": ann, "label": lab, "n_items": n_local, "group": grp,
            "gold": gold_item, "vote": vote}


def _class_partition_round(arrs, theta, n_annotators: int, n_classes: int, n_groups: int):
    """``(loglik, counts (J, K, K), group_sums (G, K))`` of one K-class partition at ``theta = (C, pi)``: the E-step
    and the M-step's sums ``N[j, y, a] = sum_{responses (i, j, a)} T[i, y]``, ``sum_{i in g} T[i, y]``;
    ``theta=None`` uses the vote distributions as ``T`` (the start)."""
    J, K, G = n_annotators, n_classes, n_groups
    if arrs is None:
        return 0.0, np.zeros((J, K, K)), np.zeros((G, K))
    item, ann, lab = arrs["item"], arrs["annotator"], arrs["label"]
    if theta is None:
        ll, t = 0.0, arrs["vote"]
    else:
        with x64():
            ll, t = _class_e_step(Responses(item, ann, lab), arrs["group"], theta[0], theta[1], gold=arrs["gold"])
        ll, t = float(ll), np.asarray(t)
    key = ann.astype(np.int64) * K + lab
    counts = np.stack([np.bincount(key, t[item, y], J * K) for y in range(K)], axis=1)      # (j a, y)
    counts = np.swapaxes(counts.reshape(J, K, K), 1, 2)                                      # (j, y, a)
    groups = np.stack([np.bincount(arrs["group"], t[:, y], G) for y in range(K)], axis=1)   # (g, y)
    return ll, counts, groups


def _partition_round(arrs, theta, n_annotators: int, n_groups: int):
    """``(loglik, sums (4, J), group_sums (2, G))`` of one partition; ``theta=None`` uses the vote fraction as T."""
    if arrs is None:
        return 0.0, np.zeros((4, n_annotators)), np.zeros((2, n_groups))
    item, ann, lab = arrs["item"], arrs["annotator"], arrs["label"].astype(np.float64)
    if theta is None:
        ll, t = 0.0, arrs["vote"]
        if arrs["gold"] is not None:
            t = np.where(arrs["gold"] >= 0, arrs["gold"], t)
    else:
        fpr, tpr, prev = theta
        with x64():
            ll, t = _e_step(Responses(item, ann, arrs["label"]), arrs["group"], fpr, tpr, prev, gold=arrs["gold"])
        ll, t = float(ll), np.asarray(t)
    w1 = t[item]
    w0 = 1.0 - w1
    sums = np.stack([np.bincount(ann, w1 * lab, n_annotators), np.bincount(ann, w1, n_annotators),
                     np.bincount(ann, w0 * lab, n_annotators), np.bincount(ann, w0, n_annotators)])
    groups = np.stack([np.bincount(arrs["group"], t, n_groups),
                       np.bincount(arrs["group"], minlength=n_groups).astype(np.float64)])
    return ll, sums, groups


def _sorted_unique(values) -> list:
    values = list(values)
    try:
        return sorted(values)
    except TypeError:
        return values


def fit_em_dask(ddf, *, item: str = "item", annotator: str = "annotator", label: str = "label", score: str | None = None,
                gold: str | None = None, groups=None, prior=None, max_iter: int = 1000, tol: float = 1e-8,
                partitioned_by_item: bool = False, annotators=None, classes=None, group: str | None = None) -> dict:
    """EM for the (grouped) Dawid-Skene model on a Dask dataframe of responses, one round per iteration.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        Long layout, one row per response: ``item``, ``annotator``, ``label`` (0/1), optionally ``score``
        (the same for every row of an item) and ``gold`` (an item's known clean label, missing where unknown).
        Repeated (item, annotator) responses are kept, each a conditionally independent response.
    groups : Binning or None, default None
        None: one prevalence (Dawid-Skene). A :class:`~noisycal_bayes.Binning` (fixed edges, equal width or equal
        mass; equal mass costs one pass bringing one score per item to the driver): one prevalence per score
        group (the grouped model; needs ``score``).
    prior : None or Prior
        As in :func:`~noisycal_bayes.fit_em` (MAP by Beta pseudo-counts).
    max_iter, tol : int, float
        The EM rule of :func:`~noisycal_bayes.fit_em`: stop when the parameters and the objective both move by
        at most ``tol``.
    partitioned_by_item : bool, default False
        The partitions already hold every response of their items (e.g. data written per item range): skips
        the shuffle. Checked: the partitions' item counts must add up to the number of distinct items.
    annotators : sequence, optional
        The annotator ids (skips one pass to collect them).
    classes : sequence, optional
        K classes: the class names in index order (``label`` and ``gold`` hold class names, as in
        ``MulticlassAnnotationSet.from_long``). The fit is then
        :func:`~noisycal_bayes.inference.fit_em_multiclass`'s from its vote start alone (``n_starts=0``, plain EM,
        ``path="sparse"``); ``prior`` is its Dirichlet ``prior``; ``score`` and ``groups`` are not used.
    group : str, optional
        K classes: the column of each item's group label (an int >= 0, the same on every row of an item; the
        ``groups=`` of the in-memory fit; ``n_groups = max + 1``). None: one group.

    Returns
    -------
    dict
        ``fpr``, ``tpr`` (J,), ``prevalence`` (G,), ``annotator_ids``, ``edges`` (or None), ``loglik``,
        ``objective``, ``n_iter``, ``converged``, ``trace`` (objective per iteration), ``n_items``,
        ``n_responses``, ``n_partitions``, ``label_exchanged`` and ``seconds``. K classes: ``confusion``
        (J, K, K), ``prevalence`` (G, K), ``classes``, ``n_groups`` and ``label_permutation`` (rule K3, or None)
        in place of ``fpr``, ``tpr``, ``edges`` and ``label_exchanged``.

    Notes
    -----
    One start, from the vote fraction of each item (the classic Dawid-Skene start: crowd-kit's too), not the
    random multi-start of :func:`~noisycal_bayes.fit_em`: every extra start costs full passes over the data.
    Orientation at the crowd's level: if the label-count-weighted mean gap comes out negative, the labels are
    exchanged (``Y <-> 1 - Y``: ``fpr, tpr, pi -> tpr, fpr, 1 - pi``), which leaves the likelihood unchanged; single
    annotators keep gaps of any sign. Use it when the responses do not fit in memory (the in-memory sparse EM is
    faster whenever they do); on a distributed cluster call it with a ``distributed.Client`` active.
    """
    import dask

    started = time.perf_counter()
    if classes is not None:
        classes = _check_classes(classes)
        if score is not None or groups is not None:
            raise ValueError("fit_em_dask: K classes (`classes=`) take their groups from a `group` column (a label per "
                             "item); `score` and `groups` are for binary data.")
        prior_counts = dirichlet_prior_counts(prior, len(classes), "fit_em_dask")
    elif group is not None:
        raise ValueError("fit_em_dask: `group` (a group label column) is for K classes (`classes=`); binary score "
                         "groups are `groups=` on `score`.")
    else:
        prior_counts = em_prior_counts(prior)
    need = [item, annotator, label] + [c for c in (score, gold, group) if c is not None]
    missing = [c for c in need if c not in ddf.columns]
    if missing:
        raise ValueError(f"the dataframe is missing column(s) {missing}; it has {list(ddf.columns)}.")
    if groups is not None and score is None:
        raise ValueError("score groups need a score column: pass `score=`.")
    if groups is not None and not isinstance(groups, Binning):
        raise ValueError(f"`groups` must be None or a Binning (e.g. Binning.equal_mass(5)); got {groups!r}.")
    ddf = ddf[need]
    ann_ids = _sorted_unique(ddf[annotator].dropna().unique().compute().tolist()) if annotators is None else list(annotators)
    ann_index = {a: k for k, a in enumerate(ann_ids)}
    edges = None
    if groups is not None:
        item_scores = None
        if groups.kind == "equal_mass":
            item_scores = pd.to_numeric(ddf[[item, score]].drop_duplicates(subset=[item])[score].compute(),
                                        errors="coerce").to_numpy(dtype=np.float64)
        edges = np.asarray(groups.edges_for(item_scores), dtype=np.float64)
    if not partitioned_by_item:
        ddf = ddf.shuffle(on=item)
    parts = [dask.delayed(_partition_arrays)(p, item=item, annotator=annotator, label=label, score=score, gold=gold,
                                             ann_index=ann_index, edges=edges, classes=classes, group=group)
             for p in ddf.to_delayed()]
    parts = dask.persist(*parts)
    n_items = sum(dask.compute(*[dask.delayed(lambda a: 0 if a is None else a["n_items"])(p) for p in parts]))
    if partitioned_by_item:
        distinct = int(ddf[item].nunique().compute())
        if distinct != n_items:
            raise ValueError(f"`partitioned_by_item=True` but items are split across partitions ({n_items} "
                             f"partition-items for {distinct} distinct items): drop the flag to shuffle by item.")
    n_ann = len(ann_ids)
    if classes is not None:
        n_groups = 1 if group is None else 1 + max(dask.compute(*[dask.delayed(
            lambda a: -1 if a is None else int(a["group"].max()))(p) for p in parts]))
        out = _class_loop(parts, prior_counts, n_ann, len(classes), n_groups, max_iter=max_iter, tol=tol)
        out.update(annotator_ids=ann_ids, classes=classes, n_groups=n_groups, n_items=int(n_items),
                   n_partitions=len(parts), seconds=time.perf_counter() - started)
        return out
    n_groups = 1 if edges is None else len(edges) - 1

    def one_round(theta):
        out = dask.compute(*[dask.delayed(_partition_round)(p, theta, n_ann, n_groups) for p in parts])
        return (sum(o[0] for o in out), sum(o[1] for o in out), sum(o[2] for o in out))

    _, sums, gsums = one_round(None)
    n_responses = int(round(sums[1].sum() + sums[3].sum()))
    theta = m_step_from_sums(sums, gsums, prior_counts)
    objective, trace, converged, n_iter = -np.inf, [], False, 0
    for n_iter in range(1, max_iter + 1):
        ll, sums, gsums = one_round(theta)
        obj = ll + float(log_prior(theta, prior_counts))
        new = m_step_from_sums(sums, gsums, prior_counts)
        trace.append(obj)
        step = max(np.max(np.abs(a - b)) for a, b in zip(new, theta))
        done = step <= tol and abs(obj - objective) <= tol * (1.0 + abs(obj))
        theta, objective = new, obj
        if not np.all([np.isfinite(v).all() for v in theta]):
            break
        if done:
            converged = True
            break
    loglik, _, _ = one_round(theta)
    fpr, tpr, prev = theta
    n_labels = sums[1] + sums[3]
    exchanged = bool(np.sum(n_labels * (tpr - fpr)) < 0)
    if exchanged:
        fpr, tpr, prev = tpr, fpr, 1 - prev
    return {"fpr": fpr, "tpr": tpr, "prevalence": prev, "annotator_ids": ann_ids, "edges": edges,
            "loglik": float(loglik), "objective": float(loglik + float(log_prior(theta, prior_counts))),
            "n_iter": n_iter, "converged": converged, "trace": np.asarray(trace), "n_items": int(n_items),
            "n_responses": n_responses, "n_partitions": len(parts), "label_exchanged": exchanged,
            "seconds": time.perf_counter() - started}


def _class_loop(parts, prior_counts, J: int, K: int, G: int, *, max_iter: int, tol: float) -> dict:
    """The K-class EM over persisted partitions: :func:`~noisycal_bayes.inference._em_loop.em_loop`'s plain steps
    and stopping rule on ``theta = [C.ravel(), pi.ravel()]``, one round (E-step and M-step sums) per iteration."""
    import dask

    conf_pc, prev_pc = prior_counts

    def one_round(theta):
        out = dask.compute(*[dask.delayed(_class_partition_round)(p, theta, J, K, G) for p in parts])
        return sum(o[0] for o in out), sum(o[1] for o in out), sum(o[2] for o in out)

    def log_prior_of(C, pi):  # the clipped Dirichlet log-kernels of the in-memory loop
        return float(np.sum(conf_pc * np.log(np.clip(C, 1e-12, 1.0))) + np.sum(prev_pc * np.log(np.clip(pi, 1e-12, 1.0))))

    def m_step(counts, gsums):
        with x64():
            return (np.asarray(_normalise_rows(counts + conf_pc), np.float64),
                    np.asarray(_normalise_rows(gsums + prev_pc), np.float64))

    _, counts, gsums = one_round(None)
    n_labels = np.rint(counts.sum(axis=(1, 2)))  # responses per annotator (the vote fractions sum to them)
    n_responses = int(round(n_labels.sum()))
    theta = (normalised_rows(counts + conf_pc), normalised_rows(gsums + prev_pc))  # the vote start (rule K1)
    ll, counts, gsums = one_round(theta)
    objective = ll + log_prior_of(*theta)
    trace, converged, n_iter = [objective], False, 0
    for n_iter in range(1, max_iter + 1):
        new = m_step(counts, gsums)
        ll, counts, gsums = one_round(new)
        obj = ll + log_prior_of(*new)
        step = max(np.max(np.abs(a - b)) for a, b in zip(new, theta))
        small = step <= tol and abs(obj - objective) <= tol * (1.0 + abs(obj))
        theta, objective = new, obj
        trace.append(obj)
        if not (np.isfinite(obj) and all(np.isfinite(v).all() for v in theta)):
            break
        if small:
            converged = True
            break
    C, pi, perm, oriented = orient_classes(theta[0], theta[1], n_labels)
    return {"confusion": C, "prevalence": pi, "loglik": float(objective - log_prior_of(*theta)),
            "objective": float(objective), "n_iter": n_iter, "converged": bool(converged and oriented),
            "trace": np.asarray(trace), "n_responses": n_responses, "n_labels": n_labels,
            "label_permutation": perm}
