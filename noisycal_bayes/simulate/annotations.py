"""Simulated scores (or class probabilities), clean labels and noisy annotations with known truth.

Two generators: :func:`simulate_annotations` for two classes (scores, a calibration curve, per-annotator
``(fpr, tpr)`` channels) and :func:`simulate_multiclass` for K classes (class probabilities, a classifier
temperature, K x K confusion matrices); both take an explicit seed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .._validation import check_positive_int
from ..data import AnnotationSet, Channel, MulticlassAnnotationSet


def _logit(z):
    z = np.clip(z, 1e-12, 1 - 1e-12)
    return np.log(z) - np.log1p(-z)


def _sigmoid(s):
    return 1.0 / (1.0 + np.exp(-s))


#: Calibration curves ``m(z) = P(Y = 1 | Z = z)`` used across tests, benchmarks and docs.
CURVES = {
    "calibrated": lambda z: z,
    # The model is over-confident: the truth is less extreme than the score.
    "overconfident": lambda z: _sigmoid(0.5 * _logit(z)),
    # The model is under-confident: the truth is more extreme than the score.
    "underconfident": lambda z: _sigmoid(2.0 * _logit(z)),
    # A constant offset in probability, clipped to [0, 1].
    "shifted": lambda z: np.clip(z + 0.1, 0.0, 1.0),
    # A smooth non-monotone departure that averages out over wide bins.
    "nonlinear": lambda z: np.clip(z + 0.1 * np.sin(2 * np.pi * z), 0.0, 1.0),
}


@dataclass(frozen=True)
class Simulation:
    """A simulated evaluation set with its truth.

    data : AnnotationSet (scores and noisy labels)
    clean_labels : (n_items,) int8, the latent ``Y_i``
    true_probability : (n_items,) ``m(Z_i)``
    channel : Channel used to generate the annotations
    """

    data: AnnotationSet
    clean_labels: np.ndarray
    true_probability: np.ndarray
    channel: Channel


def simulate_annotations(n_items: int, *, fpr, tpr, curve="calibrated", score_beta=(1.0, 1.0), missing: float = 0.0,
                         seed=0) -> Simulation:
    """Simulate ``Z ~ Beta(score_beta)``, ``Y ~ Bernoulli(m(Z))`` and ``A_j ~ Bernoulli(fpr_j + gap_j Y)``.

    Parameters
    ----------
    n_items : int
    fpr, tpr : array-like of shape (n_annotators,)
    curve : name in :data:`CURVES` or a callable ``m(z)`` returning probabilities
    score_beta : (a, b) of the score distribution
    missing : float in [0, 1]
        Probability that a response is dropped; where all of an item's responses are dropped one is
        restored at random, so every item keeps a label and the missing rate is ``missing - missing**J / J``.
    seed : int or numpy Generator

    Examples
    --------
    >>> sim = simulate_annotations(100, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=1)
    >>> sim.data.labels.shape
    (100, 3)
    """
    n_items = check_positive_int(n_items, name="n_items")
    missing = float(missing)
    if not 0.0 <= missing <= 1.0:
        raise ValueError(f"`missing` must be a probability in [0, 1]; got {missing}.")
    rng = np.random.default_rng(seed)
    channel = Channel(fpr, tpr)
    if isinstance(curve, str) and curve not in CURVES:
        raise ValueError(f"`curve` must be one of {sorted(CURVES)} or a callable m(z); got {curve!r}.")
    m = CURVES[curve] if isinstance(curve, str) else curve
    z = rng.beta(*score_beta, size=n_items)
    p = np.clip(np.asarray(m(z), dtype=np.float64), 0.0, 1.0)
    y = (rng.random(n_items) < p).astype(np.int8)
    rate = np.where(y[:, None] == 1, channel.tpr, channel.fpr)
    labels = (rng.random((n_items, channel.n_annotators)) < rate).astype(np.int8)
    if missing > 0:
        drop = rng.random(labels.shape) < missing
        keep = rng.integers(0, channel.n_annotators, size=n_items)
        # Restore one random response only where every response was dropped, so that each response is
        # missing with probability ``missing - missing**J / J`` (close to ``missing``), not ``missing (J-1)/J``.
        empty = np.flatnonzero(drop.all(axis=1))
        drop[empty, keep[empty]] = False
        labels[drop] = -1
    data = AnnotationSet(labels, z, np.arange(n_items).astype(object), np.arange(channel.n_annotators).astype(object))
    return Simulation(data, y, p, channel)


# ----------------------------------------------------------------------------- K classes
#: Classifier temperature ``tau`` per curve name: ``p = softmax(z / tau)`` while the truth is ``softmax(z)``.
MULTICLASS_CURVES = {"calibrated": 1.0, "overconfident": 0.5, "underconfident": 2.0}


class MulticlassSimulation(NamedTuple):
    """A simulated K-class evaluation set and its truth.

    item, annotator, label : int32 arrays of shape (n_responses,)
        Responses sorted by item, then annotator (repeats of a pair next to each other).
    probs : float64 array of shape (n_items, K)
        The classifier's class probabilities.
    y : int array of shape (n_items,)
        The clean labels.
    confusion : float64 array of shape (n_annotators, K, K)
        The channels used, ``confusion[j, y, a] = P(A_j = a | Y = y)``.
    clean_probs : float64 array of shape (n_items, K)
        ``P(Y_i = k | probs_i)``, the calibration truth.
    """

    item: np.ndarray
    annotator: np.ndarray
    label: np.ndarray
    probs: np.ndarray
    y: np.ndarray
    confusion: np.ndarray
    clean_probs: np.ndarray

    @property
    def data(self) -> MulticlassAnnotationSet:
        """The simulated responses and class probabilities as a :class:`~noisycal_bayes.data.MulticlassAnnotationSet`
        (every item and annotator of the simulation, classes ``0..K-1``), as :attr:`Simulation.data` for two classes.
        """
        return MulticlassAnnotationSet.from_responses(self.item, self.annotator, self.label,
                                                      n_items=self.probs.shape[0],
                                                      n_annotators=self.confusion.shape[0],
                                                      n_classes=self.probs.shape[1], probs=self.probs)


def _softmax(x):
    x = x - x.max(axis=1, keepdims=True)  # shift out the max: exp never overflows
    e = np.exp(x)
    return e / e.sum(axis=1, keepdims=True)


def random_confusion(n_annotators: int, n_classes: int, *, accuracy=0.8, seed=0) -> np.ndarray:
    """Random diagonal-dominant confusion matrices: ``C_j[y, y] = accuracy_j``, the rest of each row split by a
    flat Dirichlet draw.

    Parameters
    ----------
    n_annotators, n_classes : int
    accuracy : float or array of shape (n_annotators,), default 0.8
        Per-class accuracy of each annotator, in (0, 1].
    seed : int or numpy Generator

    Returns
    -------
    ndarray of shape (n_annotators, n_classes, n_classes)

    Examples
    --------
    >>> C = random_confusion(2, 3, accuracy=[0.9, 0.7], seed=0)
    >>> np.allclose(C.sum(axis=2), 1), np.diag(C[1]).tolist()
    (True, [0.7, 0.7, 0.7])
    """
    J = check_positive_int(n_annotators, name="n_annotators")
    K = check_positive_int(n_classes, name="n_classes", minimum=2)
    acc = np.broadcast_to(np.asarray(accuracy, dtype=np.float64), (J,)) if np.ndim(accuracy) == 0 else \
        np.asarray(accuracy, dtype=np.float64)
    if acc.shape != (J,) or not np.all((acc > 0) & (acc <= 1)):
        raise ValueError(f"`accuracy` must be a number or {J} numbers in (0, 1]; got {accuracy!r}.")
    rng = np.random.default_rng(seed)
    off = rng.dirichlet(np.ones(K - 1), size=(J, K))
    C = np.zeros((J, K, K))
    for y in range(K):
        others = [a for a in range(K) if a != y]
        C[:, y, y] = acc
        C[:, y, others] = (1 - acc)[:, None] * off[:, y]
    return C


def simulate_multiclass(n_items: int, n_annotators: int, n_classes: int, *, confusion=None, accuracy=0.8,
                        labels_per_item=None, repeat_rate: float = 0.0, curve: str = "overconfident",
                        signal: float = 2.5, seed=0) -> MulticlassSimulation:
    """Simulate class probabilities, clean labels and K-class annotations with known truth (Notes).

    Parameters
    ----------
    n_items, n_annotators, n_classes : int
    confusion : array of shape (n_annotators, K, K), optional
        The channels; default :func:`random_confusion` with ``accuracy``.
    accuracy : float or array of shape (n_annotators,), default 0.8
        Diagonal of the default channels.
    labels_per_item : int, optional
        Distinct annotators per item, drawn at random (default: all of them).
    repeat_rate : float in [0, 1), default 0
        Probability that a response is followed by one more from the same annotator on the same item (drawn
        independently given ``Y``; geometric run lengths).
    curve : {"overconfident", "underconfident", "calibrated"}, default "overconfident"
        The classifier's miscalibration (:data:`MULTICLASS_CURVES`).
    signal : float, default 2.5
        Logit boost of the item's class ``c_i``: larger means a more accurate classifier.
    seed : int or numpy Generator

    Returns
    -------
    MulticlassSimulation

    Raises
    ------
    ValueError
        Unknown ``curve``; ``confusion`` of the wrong shape or not row-stochastic; ``labels_per_item`` outside
        ``1..n_annotators``; ``repeat_rate`` outside [0, 1).

    Notes
    -----
    The model is exact, so that every calibration quantity has a known true value:

    - logits ``z_i = signal * e_{c_i} + eps_i`` with ``c_i`` uniform on the classes and ``eps_i ~ N(0, I_K)``;
    - the clean-label probability ``q_i = softmax(z_i)`` and ``Y_i ~ Categorical(q_i)``;
    - the classifier reports ``p_i = softmax(z_i / tau)``: ``tau = 1`` ("calibrated"), ``tau = 0.5``
      ("overconfident": sharper than the truth, so ``P(Y = yhat | p) = q_{i, yhat} < max_k p_ik``) or ``tau = 2``
      ("underconfident"); the same factors as the binary :data:`CURVES`. Because ``q_i = softmax(tau log p_i)``
      is a function of ``p_i``, ``P(Y_i = k | p_i) = q_ik`` exactly (``clean_probs``);
    - annotator ``j`` answers ``A_ij ~ Categorical(C_j[Y_i, :])``.

    Examples
    --------
    >>> sim = simulate_multiclass(1000, 3, 4, seed=0)
    >>> sim.probs.shape, sim.confusion.shape, int(sim.item.size)
    ((1000, 4), (3, 4, 4), 3000)
    >>> sim.data.n_items, sim.data.n_classes  # the responses as a MulticlassAnnotationSet
    (1000, 4)
    >>> conf = sim.probs.max(axis=1)
    >>> bool(sim.clean_probs[np.arange(1000), sim.probs.argmax(axis=1)].mean() < conf.mean())  # overconfident
    True
    """
    n = check_positive_int(n_items, name="n_items")
    J = check_positive_int(n_annotators, name="n_annotators")
    K = check_positive_int(n_classes, name="n_classes", minimum=2)
    if curve not in MULTICLASS_CURVES:
        raise ValueError(f"`curve` must be one of {sorted(MULTICLASS_CURVES)}; got {curve!r}.")
    repeat_rate = float(repeat_rate)
    if not 0.0 <= repeat_rate < 1.0:
        raise ValueError(f"`repeat_rate` must lie in [0, 1); got {repeat_rate}.")
    m = J if labels_per_item is None else int(labels_per_item)
    if not 1 <= m <= J:
        raise ValueError(f"`labels_per_item` must lie in 1..n_annotators={J}; got {labels_per_item!r}.")
    rng = np.random.default_rng(seed)
    key_conf, key_items = rng.spawn(2) if hasattr(rng, "spawn") else (rng, rng)
    if confusion is None:
        C = random_confusion(J, K, accuracy=accuracy, seed=key_conf)
    else:
        C = np.asarray(confusion, dtype=np.float64)
        if C.shape != (J, K, K):
            raise ValueError(f"`confusion` must have shape ({J}, {K}, {K}); got {C.shape}.")
        if np.any(C < 0) or not np.allclose(C.sum(axis=2), 1.0, atol=1e-9):
            raise ValueError("`confusion` rows must be probabilities summing to 1 (C[j, y, a] = P(A_j = a | Y = y)).")
    r = key_items
    c = r.integers(0, K, size=n)
    z = r.standard_normal((n, K))
    z[np.arange(n), c] += signal
    q = _softmax(z)
    probs = _softmax(z / MULTICLASS_CURVES[curve])
    # Inverse-CDF draws, vectorised: Y_i = #{k: u_i > cumsum(q_i)_k}.
    y = np.minimum((r.random(n)[:, None] > np.cumsum(q, axis=1)).sum(axis=1), K - 1)
    if m == J:
        ann = np.tile(np.arange(J), (n, 1))
    else:
        ann = np.sort(np.argsort(r.random((n, J)), axis=1)[:, :m], axis=1)
    item = np.repeat(np.arange(n), m)
    ann = ann.ravel()
    if repeat_rate > 0:
        reps = r.geometric(1.0 - repeat_rate, size=item.size)  # run lengths >= 1, P(one more) = repeat_rate
        item, ann = np.repeat(item, reps), np.repeat(ann, reps)
    # Labels drawn per (annotator, clean class) cell: J x K small categorical draws, no (n_responses, K) array.
    label = np.empty(item.size, np.int64)
    cell = ann.astype(np.int64) * K + y[item]
    order = np.argsort(cell, kind="stable")
    bounds = np.searchsorted(cell[order], np.arange(J * K + 1))
    for c_ in range(J * K):
        idx = order[bounds[c_]:bounds[c_ + 1]]
        if idx.size:
            label[idx] = r.choice(K, size=idx.size, p=C[c_ // K, c_ % K])
    return MulticlassSimulation(item.astype(np.int32), ann.astype(np.int32), label.astype(np.int32), probs,
                                y.astype(np.int64), C, q)
