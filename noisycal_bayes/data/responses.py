"""Sparse labels as (item, annotator, label) triples: NumPy helpers in O(n_responses) (plus one sort when the input
is not in order); repeated labels are kept, each conditionally independent given the clean label. Details:
docs/foundations.md, *noisycal_bayes.data.responses*.
"""
from __future__ import annotations

import numpy as np

# Pickles of AnnotationSet made before Responses moved to core name it here: this import lets them load.
from ..core.tables import Responses  # noqa: F401

__all__ = ["pair_keys", "repeated_runs", "sort_responses"]


def pair_keys(item: np.ndarray, annotator: np.ndarray, n_annotators: int) -> np.ndarray:
    """``item * n_annotators + annotator`` as int64, shape (n_responses,): one integer per (item, annotator) pair.

    Sorting by the key sorts by item, then annotator. Needs ``n_items * n_annotators < 2**63``.
    """
    key = np.asarray(item).astype(np.int64)  # a copy: the in-place steps below never touch the input
    key *= n_annotators
    key += np.asarray(annotator)
    return key


def sort_responses(item: np.ndarray, annotator: np.ndarray, label: np.ndarray, n_annotators: int):
    """Triples sorted by item then annotator, repeats of a pair kept in input order.

    Parameters
    ----------
    item, annotator, label : int arrays of shape (n_responses,)
        Already checked: ``0 <= annotator < n_annotators``, ``item >= 0``.
    n_annotators : int

    Returns
    -------
    key : int64 array of shape (n_responses,)
        Sorted :func:`pair_keys`.
    order : int array of shape (n_responses,) or None
        Positions of the input in sorted order, None when the input was already sorted (nothing moved).
    """
    key = pair_keys(item, annotator, n_annotators)
    n = key.size
    if n < 2 or bool(np.all(key[1:] >= key[:-1])):
        return key, None  # already in order (what simulators and sorted files give): O(n), no copy
    idx_bits = int(n - 1).bit_length()
    if int(key.max()).bit_length() + idx_bits <= 63:
        # Pack the input position into the low bits and sort values, not indices (faster than np.argsort:
        # docs/performance.md, *Implementation choices*); ties (repeated pairs) come out in input order for free.
        packed = key
        packed <<= idx_bits
        packed |= np.arange(n, dtype=np.int64)
        packed.sort()
        order = packed & ((1 << idx_bits) - 1)
        packed >>= idx_bits
        return packed, order
    # Keys too wide to pack: an unstable introsort of the keys, then input order restored within runs of
    # equal keys (repeated pairs), the only places where it can differ from a stable sort.
    order = np.argsort(key)
    key = key[order]
    same = key[1:] == key[:-1]
    if same.any():
        in_run = np.zeros(n, dtype=bool)
        in_run[1:] |= same
        in_run[:-1] |= same
        pos = np.flatnonzero(in_run)
        order[pos] = order[pos][np.lexsort((order[pos], key[pos]))]
    return key, order


def repeated_runs(key: np.ndarray):
    """Repeated pairs of sorted pair keys.

    Parameters
    ----------
    key : int64 array of shape (n_responses,), sorted

    Returns
    -------
    later : bool array of shape (n_responses,)
        True at every response that repeats the (item, annotator) pair of the response before it (so
        ``~later`` keeps the first response of each pair).
    starts : int array of shape (n_repeated,)
        Position of the first response of each pair labelled more than once.
    """
    later = np.zeros(key.size, dtype=bool)
    later[1:] = key[1:] == key[:-1]
    # A run of a repeated pair starts where a response is followed by a repeat but is not one itself.
    starts = np.flatnonzero(~later[:-1] & later[1:]) if key.size > 1 else np.zeros(0, dtype=np.intp)
    return later, starts
