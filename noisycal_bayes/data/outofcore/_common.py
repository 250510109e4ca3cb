"""Helpers shared by the out-of-core sources: pattern keys ``bin * 3**J + code``, score edges, validation."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..._validation import _preview
from ..binning import Binning

#: Largest number of annotators: keys ``bin * 3**J + code`` must fit in int64.
MAX_ANNOTATORS = 30
_LAYOUTS = ("long", "wide")

#: The K-class answer of the out-of-core path, which is binary: completes "for K classes use ...".
NO_K_CLASS = ("load_multiclass and fit_em_multiclass: K-class out-of-core statistics are not available, and the "
              "responses load as a sparse in-memory MulticlassAnnotationSet (about 10 bytes per response)")


# ---------------------------------------------------------------------------------------------- helpers
def _readonly(a):
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


def _sorted_ids(ids) -> list:
    """Distinct ids sorted like :meth:`AnnotationSet.from_long` (``pd.factorize(sort=True)``), else as given."""
    ids = list(dict.fromkeys(ids))
    try:
        _, uniq = pd.factorize(pd.Series(ids, dtype=object), sort=True)
    except TypeError:
        return ids
    return [v.item() if isinstance(v, np.generic) else v for v in uniq]


def _keys(patterns: np.ndarray, group: np.ndarray, n_annotators: int) -> np.ndarray:
    key = np.asarray(group, dtype=np.int64) * 3 ** n_annotators
    for col in range(n_annotators):
        key = key + (patterns[:, col].astype(np.int64) + 1) * 3 ** (n_annotators - 1 - col)
    return key


def _decode(keys: np.ndarray, n_annotators: int):
    base = 3 ** n_annotators
    rest = keys % base
    patterns = np.empty((keys.size, n_annotators), dtype=np.int8)
    for col in range(n_annotators - 1, -1, -1):
        patterns[:, col] = rest % 3 - 1
        rest //= 3
    return patterns, (keys // base).astype(np.int32)


def _count_keys(keys: np.ndarray, weights=None, moments=None):
    """Distinct keys in increasing order, their summed counts and (optionally) summed moments.

    ``moments`` (n_moments, n_keys) holds per-key values (e.g. score and squared score) summed per distinct
    key like the counts; the third result is None without them.
    """
    uniq, inv = np.unique(np.asarray(keys, dtype=np.int64), return_inverse=True)
    inv = inv.reshape(-1)
    counts = np.bincount(inv, weights=weights, minlength=uniq.size).astype(np.float64)
    sums = None if moments is None else np.stack([np.bincount(inv, weights=m, minlength=uniq.size) for m in moments])
    return uniq, counts, sums


def _resolve_edges(bins, score, item_scores=None):
    """Fixed score edges (or None without scores) from ``bins``: a Binning, an edges array, or None.

    Equal-mass bins need every item's score: ``item_scores()`` returns them (one per item, any order), read
    in a first pass by the readers that can read their source twice; without it they are refused.
    """
    if bins is None:
        return None
    if isinstance(bins, Binning):
        if bins.kind == "equal_mass":
            if score is None:
                raise ValueError("`bins` were given but `score=None`: score bins need a score column.")
            if item_scores is None:
                raise ValueError(
                    "equal-mass bins need the quantiles of all items' scores, which one pass over an iterable of "
                    "chunks cannot give: use read_stats_csv, read_stats_parquet or stats_from_dask (they read the "
                    "scores first, one per item), or pass fixed edges (Binning.from_edges(edges) or "
                    "Binning.equal_width(n)).")
            return np.asarray(bins.edges_for(item_scores()), dtype=np.float64)
        edges = bins.edges_for(None)
    elif isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        raise ValueError(f"`bins` must be a Binning or an array of edges; got the int {bins}. An int means "
                         f"equal-mass groups in the fitters: pass Binning.equal_mass({bins}) (read_stats_csv, "
                         f"read_stats_parquet, stats_from_dask), Binning.equal_width({bins}) or "
                         "Binning.from_edges(edges).")
    else:
        edges = Binning.from_edges(bins).edges_for(None)
    if score is None:
        raise ValueError("`bins` were given but `score=None`: score bins need a score column.")
    return np.asarray(edges, dtype=np.float64)


def _is_equal_mass(bins) -> bool:
    return isinstance(bins, Binning) and bins.kind == "equal_mass"


def _item_scores(chunks, *, layout: str, item: str, score: str) -> np.ndarray:
    """One score per item from chunks holding ``item`` and ``score``: every row (wide), or the first row of
    each run of an item (long rows sorted by item; the pass that follows checks the order and that an item's
    rows agree on its score). Holds 8 bytes per item."""
    out, last = [], None
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        z = pd.to_numeric(chunk[score], errors="coerce").to_numpy(dtype=np.float64)
        if layout == "long":
            ids = chunk[item].to_numpy()
            first = np.ones(ids.size, dtype=bool)
            first[1:] = ids[1:] != ids[:-1]
            first[0] = last is None or ids[0] != last
            last = ids[-1]
            z = z[first]
        out.append(z)
    if not out:
        raise ValueError("no data: no rows to compute equal-mass bins from.")
    return np.concatenate(out)


def _check_layout(layout):
    if layout not in _LAYOUTS:
        raise ValueError(f"`layout` must be 'long' or 'wide'; got {layout!r}.")


def _check_columns(frame_columns, needed, where="the data"):
    missing = [c for c in needed if c not in frame_columns]
    if missing:
        raise ValueError(f"{where} is missing column(s) {missing}; it has {list(frame_columns)}. Pass item=, "
                         "annotator=, label=, score= (or annotators=) to name your columns.")


def _check_scores_frame(z: np.ndarray, ids) -> None:
    bad = ~np.isfinite(z) | (z < 0) | (z > 1)
    if bad.any():
        raise ValueError(f"scores must be finite numbers in [0, 1]; got {_preview(z[bad][:8])} at items "
                         f"{_preview(np.asarray(ids)[bad])}. Pass probabilities, not logits or percentages.")


def _label_values(series: pd.Series, *, allow_missing: bool, where) -> np.ndarray:
    """Labels as int8 (-1 = missing when allowed); errors name the offending entries."""
    raw = series.to_numpy()
    num = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    missing = pd.isna(raw) if raw.dtype == object else np.isnan(num) & pd.isna(series).to_numpy()
    ok = (num == 0) | (num == 1) | (allow_missing & ((num == -1) | missing))
    if not ok.all():
        bad = ~ok
        raise ValueError(f"labels must be 0 or 1{' (or missing)' if allow_missing else ''}; got "
                         f"{_preview(pd.unique(raw[bad])[:5])} at {where(bad)}. Map your classes to 0/1 first: "
                         f"SufficientStats are defined for two classes. For K classes use {NO_K_CLASS}.")
    out = np.where(np.isnan(num), -1, num).astype(np.int8)
    return out
