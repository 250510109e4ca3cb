"""Simulated crowds: many annotators, few labels per item, spammers, adversaries and repeated labels.

The truth is returned with the data so that estimates can be checked against it: each annotator's ``fpr``,
``tpr`` and kind, and each item's clean label.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validation import check_choice, check_positive_int, check_probability
from ..data import AnnotationSet
from .annotations import CURVES

# Items per chunk of the Gumbel top-k draw of annotators (bounds the (chunk, n_annotators) key array).
_CHUNK_CELLS = 4_000_000


@dataclass(frozen=True)
class CrowdSimulation:
    """A simulated crowd and its truth.

    Attributes
    ----------
    data : AnnotationSet
        Every response, repeats included, held as sparse triples, and the scores when a curve was given.
    responses : DataFrame with columns ``item, annotator, label``
        Every response, repeats included (sorted by item, then annotator).
    fpr, tpr : ndarray of shape (n_annotators,)
        True rates; ``gap = tpr - fpr`` is 0 for spammers and negative for adversaries.
    kind : ndarray of shape (n_annotators,), str
        ``"honest"``, ``"spammer"`` or ``"adversary"``.
    clean_labels : ndarray of shape (n_items,), int8
    true_probability : ndarray of shape (n_items,)
        ``P(Y_i = 1)``: ``m(z_i)`` with a curve, else the prevalence.
    """

    data: AnnotationSet
    responses: pd.DataFrame
    fpr: np.ndarray
    tpr: np.ndarray
    kind: np.ndarray
    clean_labels: np.ndarray
    true_probability: np.ndarray

    @property
    def gap(self) -> np.ndarray:
        """True gaps ``tpr - fpr``, shape (n_annotators,)."""
        return self.tpr - self.fpr


def _check_range(r, name):
    lo, hi = (float(v) for v in r)
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"`{name}` must be (low, high) with 0 <= low <= high <= 1; got {r!r}.")
    return lo, hi


def simulate_crowd(n_items: int, n_annotators: int, *, labels_per_item: int = 5, activity: str = "uniform",
                   spammers: float = 0.0, adversaries: float = 0.0, repeat_rate: float = 0.0,
                   fpr_range=(0.05, 0.3), tpr_range=(0.7, 0.95), prevalence: float = 0.5, curve=None,
                   score_beta=(1.0, 1.0), seed=0) -> CrowdSimulation:
    """Simulate a crowd: each item labelled by a few annotators drawn at random, some of them spammers or adversaries.

    Parameters
    ----------
    n_items, n_annotators : int
    labels_per_item : int, default 5
        Distinct annotators per item (at most ``n_annotators``).
    activity : {"uniform", "heavy"}, default "uniform"
        How annotators are drawn for an item: with equal probability, or with probability proportional to a
        heavy-tailed activity ``exp(N(0, 1.5^2))`` per annotator (a few very active workers, many occasional
        ones, as on crowdsourcing platforms). Every annotator labels at least one item (an annotator never
        drawn takes over one slot of the busiest one).
    spammers, adversaries : float in [0, 1]
        Fractions of annotators (rounded to counts, assigned at random) who are spammers (``fpr = tpr ~
        U(0.2, 0.8)``: gap 0, labels independent of the truth) or adversaries (an honest channel with ``fpr`` and
        ``tpr`` exchanged: gap < 0).
    repeat_rate : float in [0, 1], default 0
        Probability that a response is given a second time by the same annotator (a new, conditionally
        independent label). Repeats are in ``data`` and ``responses`` alike (``AnnotationSet`` keeps repeated
        labels; ``data.summary()`` counts them).
    fpr_range, tpr_range : (low, high)
        Honest annotators' ``fpr ~ U(fpr_range)``, ``tpr ~ U(tpr_range)``.
    prevalence : float, default 0.5
        ``P(Y = 1)`` when no ``curve`` is given.
    curve : name in ``CURVES``, callable or None
        With a curve: scores ``Z ~ Beta(score_beta)`` and ``Y ~ Bernoulli(m(Z))``; ``data`` carries the scores.
    score_beta : (a, b)
    seed : int or numpy Generator

    Returns
    -------
    CrowdSimulation

    Raises
    ------
    ValueError
        Non-positive sizes, ``labels_per_item > n_annotators``, fractions outside [0, 1] or summing above 1,
        an unknown ``activity`` or ``curve``.

    Examples
    --------
    >>> sim = simulate_crowd(200, 30, labels_per_item=4, spammers=0.1, adversaries=0.05, seed=0)
    >>> sim.data.n_responses, int((sim.kind == "spammer").sum()), int((sim.kind == "adversary").sum())
    (800, 3, 2)
    >>> bool(np.all(sim.gap[sim.kind == "adversary"] < 0))
    True
    """
    n_items = check_positive_int(n_items, name="n_items")
    n_annotators = check_positive_int(n_annotators, name="n_annotators")
    k = check_positive_int(labels_per_item, name="labels_per_item")
    if k > n_annotators:
        raise ValueError(f"`labels_per_item` ({k}) cannot exceed `n_annotators` ({n_annotators}): each item is labelled "
                         "by distinct annotators.")
    spammers = check_probability(spammers, name="spammers")
    adversaries = check_probability(adversaries, name="adversaries")
    if spammers + adversaries > 1:
        raise ValueError(f"`spammers` + `adversaries` must be at most 1; got {spammers + adversaries}.")
    repeat_rate = check_probability(repeat_rate, name="repeat_rate")
    prevalence = check_probability(prevalence, name="prevalence")
    fpr_range, tpr_range = _check_range(fpr_range, "fpr_range"), _check_range(tpr_range, "tpr_range")
    check_choice(activity, ("uniform", "heavy"), name="activity")
    if isinstance(curve, str) and curve not in CURVES:
        raise ValueError(f"`curve` must be one of {sorted(CURVES)}, a callable m(z) or None; got {curve!r}.")
    rng = np.random.default_rng(seed)

    # Annotators: honest channels, then spammers and adversaries at random positions.
    fpr = rng.uniform(*fpr_range, size=n_annotators)
    tpr = rng.uniform(*tpr_range, size=n_annotators)
    kind = np.full(n_annotators, "honest", dtype=object)
    n_spam, n_adv = int(round(spammers * n_annotators)), int(round(adversaries * n_annotators))
    order = rng.permutation(n_annotators)
    spam, adv = order[:n_spam], order[n_spam:n_spam + n_adv]
    kind[spam], kind[adv] = "spammer", "adversary"
    rate = rng.uniform(0.2, 0.8, size=n_spam)
    fpr[spam], tpr[spam] = rate, rate
    fpr[adv], tpr[adv] = tpr[adv].copy(), fpr[adv].copy()

    # Clean labels (and scores).
    if curve is None:
        z = None
        p = np.full(n_items, prevalence)
    else:
        m = CURVES[curve] if isinstance(curve, str) else curve
        z = rng.beta(*score_beta, size=n_items)
        p = np.clip(np.asarray(m(z), dtype=np.float64), 0.0, 1.0)
    y = (rng.random(n_items) < p).astype(np.int8)

    # Annotators per item: k distinct ones, by Gumbel top-k on log-activity (= sampling without replacement
    # proportionally to activity), in chunks of items to bound memory.
    log_w = np.zeros(n_annotators) if activity == "uniform" else rng.normal(0.0, 1.5, size=n_annotators)
    chunk = max(1, _CHUNK_CELLS // n_annotators)
    who = np.empty((n_items, k), dtype=np.int64)
    for start in range(0, n_items, chunk):
        keys = log_w + rng.gumbel(size=(min(chunk, n_items - start), n_annotators))
        who[start:start + keys.shape[0]] = np.argpartition(-keys, k - 1, axis=1)[:, :k]
    # An AnnotationSet has no empty columns: an annotator never drawn (possible with heavy-tailed activity) takes
    # over one slot of the busiest annotator on an item that annotator labelled.
    counts = np.bincount(who.ravel(), minlength=n_annotators)
    for j in np.flatnonzero(counts == 0):
        busiest = int(np.argmax(counts))
        rows, cols = np.nonzero(who == busiest)
        pick = rng.integers(rows.size)
        who[rows[pick], cols[pick]] = j
        counts[busiest] -= 1
        counts[j] += 1
    item = np.repeat(np.arange(n_items), k)
    ann = who.ravel()
    if repeat_rate > 0:
        again = rng.random(item.size) < repeat_rate
        item, ann = np.concatenate([item, item[again]]), np.concatenate([ann, ann[again]])
    order = np.lexsort((ann, item))
    item, ann = item[order], ann[order]
    label = (rng.random(item.size) < np.where(y[item] == 1, tpr[ann], fpr[ann])).astype(np.int8)
    responses = pd.DataFrame({"item": item, "annotator": ann, "label": label})

    # Straight from the triples (sorted by item, then annotator): no dense items x annotators matrix, so a crowd of
    # a million items and ten thousand annotators costs memory in proportion to its responses.
    data = AnnotationSet.from_responses(item, ann, label, n_items=n_items, n_annotators=n_annotators, scores=z)
    return CrowdSimulation(data, responses, fpr, tpr, kind.astype(str), y, p)
