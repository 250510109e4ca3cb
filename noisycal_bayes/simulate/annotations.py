"""Simulated scores, clean labels and noisy annotations with known truth."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_positive_int
from ..data import AnnotationSet, Channel


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
