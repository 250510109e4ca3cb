"""Sparse labels as (item, annotator, label) triples: the representation of real crowds."""
from __future__ import annotations

from typing import NamedTuple


class Responses(NamedTuple):
    """Sparse labels: one entry per response, sorted by item then annotator.

    Attributes
    ----------
    item : int array of shape (n_responses,)
        Row index ``i_r`` in ``0 .. n_items - 1``.
    annotator : int array of shape (n_responses,)
        Column index ``j_r`` in ``0 .. n_annotators - 1``.
    label : int array of shape (n_responses,)
        ``A_r`` in {0, 1}.
    """

    item: object
    annotator: object
    label: object
