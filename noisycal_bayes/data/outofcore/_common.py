"""Helpers shared by the out-of-core sources: pattern keys ``group * (K + 1)**J + code``, score edges, validation."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..._validation import _preview, check_choice
from ...core.calibration import score_groups
from ..binning import Binning
from ..classes import MISSING, _check_classes, _class_name, _encode
from ..compress import pattern_keys
from .._inputs import _readonly  # noqa: F401 (stats imports it from here)

#: Largest number of annotators of binary statistics: keys ``bin * 3**J + code`` must fit in int64. K-class
#: statistics are bounded by their key space instead (:func:`_check_key_space`).
MAX_ANNOTATORS = 30
#: Largest key space ``n_groups * (K + 1)**J`` of K-class statistics (int64 keys with room to add).
MAX_KEY_SPACE = 2 ** 62
_LAYOUTS = ("long", "wide")


def _base(classes) -> int:
    """The key base ``K + 1`` (digit 0 = missing, ``k + 1`` = class ``k``): 3 for binary statistics (``classes=None``)."""
    return 3 if classes is None else len(classes) + 1


def _check_key_space(n_annotators: int, classes, n_groups: int = 1) -> None:
    """K-class statistics: ``n_groups * (K + 1)**J`` keys must fit in int64 (Python ints: exact)."""
    if classes is not None and max(int(n_groups), 1) * _base(classes) ** int(n_annotators) > MAX_KEY_SPACE:
        raise ValueError(f"K-class statistics of {n_annotators} annotators, {len(classes)} classes and {n_groups} "
                         f"groups need n_groups * (K + 1)**J = {n_groups} * {_base(classes)}**{n_annotators} pattern "
                         "keys, more than int64 holds (2**62): such crowds do not compress into patterns. Load the "
                         "responses as a MulticlassAnnotationSet and fit them in memory (fit_em, sparse path).")


# ---------------------------------------------------------------------------------------------- helpers
def _sorted_ids(ids) -> list:
    """Distinct ids sorted like :meth:`AnnotationSet.from_long` (``pd.factorize(sort=True)``), else as given."""
    ids = list(dict.fromkeys(ids))
    try:
        _, uniq = pd.factorize(pd.Series(ids, dtype=object), sort=True)
    except TypeError:
        return ids
    return [v.item() if isinstance(v, np.generic) else v for v in uniq]


def _decode(keys: np.ndarray, n_annotators: int, base: int = 3):
    """``(patterns (n, J), group (n,))`` of keys ``group * base**J + code`` (:func:`pattern_keys` inverted);
    patterns int8 for binary statistics (``base=3``), int16 for K classes."""
    width = base ** n_annotators
    rest = keys % width
    patterns = np.empty((keys.size, n_annotators), dtype=np.int8 if base == 3 else np.int16)
    for col in range(n_annotators - 1, -1, -1):
        patterns[:, col] = rest % base - 1
        rest //= base
    return patterns, (keys // width).astype(np.int32)


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


def class_groups(groups, probs, n_items: int, n_classes: int, where: str):
    """``(group (n_items,), n_groups)`` of K-class items: ``groups`` validated (an int >= 0 per item, ``n_groups =
    max + 1``), or by default the K-class fit's groups: :func:`~noisycal_bayes.core.score_groups` of ``probs``
    (``n_groups = 2 K``), one group without ``probs``. The one rule of the K-class fits
    (``models.inputs.resolve_class_groups``) and of K-class statistics; ``where`` names the caller in errors."""
    if groups is None:
        if probs is None:
            return np.zeros(n_items, np.int64), 1
        return np.asarray(score_groups(np.asarray(probs)), np.int64), 2 * n_classes
    g = np.asarray(groups)
    if g.shape != (n_items,) or not np.issubdtype(g.dtype, np.integer):
        raise ValueError(f"{where}: `groups` must be None or an int array of shape ({n_items},) (a score group per "
                         f"item); got {g.dtype} of shape {g.shape}.")
    if (g < 0).any():
        raise ValueError(f"{where}: `groups` must be >= 0; got {_preview(g[g < 0])} at items "
                         f"{_preview(np.flatnonzero(g < 0))}.")
    return g.astype(np.int64), int(g.max()) + 1 if g.size else 1


def group_labels(series: pd.Series, ids, column: str) -> np.ndarray:
    """A K-class group column as int64: whole numbers >= 0 (errors name the items)."""
    num = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(num) | (num < 0) | (num != np.round(num))
    if bad.any():
        raise ValueError(f"the group column `{column}` must hold whole numbers >= 0 (a group label per item); got "
                         f"{_preview(pd.unique(series.to_numpy()[bad])[:5])} at items {_preview(np.asarray(ids)[bad])}.")
    return num.astype(np.int64)


def _resolve_classes(classes, bins, group):
    """``classes=`` of a source checked (None: binary statistics); K classes take a ``group`` column, not ``bins``."""
    if classes is None:
        if group is not None:
            raise ValueError("`group` (a group label column) is for K-class statistics (`classes=`); binary statistics "
                             "are counted per score bin (`bins=` and `score=`).")
        return None
    if bins is not None:
        raise ValueError("K-class statistics (`classes=`) are counted per group label (`group=`, a column with an int "
                         "per item), not per score bin: drop `bins`.")
    return _check_classes(classes)


def _check_layout(layout):
    check_choice(layout, _LAYOUTS, name="layout")


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
                         f"{_preview(pd.unique(raw[bad])[:5])} at {where(bad)}. For K classes pass `classes=` (the "
                         "class names in index order): the statistics then count K-class patterns.")
    out = np.where(np.isnan(num), -1, num).astype(np.int8)
    return out


def label_indices(series: pd.Series, classes, *, allow_missing: bool, where) -> np.ndarray:
    """Labels as class indices: 0/1 as int8 for binary statistics (``classes=None``), else the index of each class
    name in ``classes`` as int16 (:func:`~noisycal_bayes.data.classes._encode`); -1 = missing when allowed (NaN,
    None, empty or -1, as in ``MulticlassAnnotationSet.from_wide``). Errors name the offending entries."""
    if classes is None:
        return _label_values(series, allow_missing=allow_missing, where=where)
    if all(isinstance(c, int) for c in classes) and pd.api.types.is_string_dtype(series.dtype):
        # Integer classes read back as text (Dask turns object columns into strings): "3" is the class 3.
        num = pd.to_numeric(series, errors="coerce")
        series = series.astype(object).where(num.isna(), num)
    raw = series.to_numpy(dtype=object)
    codes, uniques = pd.factorize(series)
    missing = codes < 0
    if allow_missing:  # -1 and blank strings mark a missing label too
        blank = np.asarray([_class_name(u) == MISSING or (isinstance(u, str) and not u.strip()) for u in uniques]
                           + [False], dtype=bool)
        missing = missing | blank[codes]
    elif missing.any():
        raise ValueError(f"labels must be class names of {_preview(list(classes))}; got missing labels at "
                         f"{where(missing)}.")
    out = np.full(raw.size, MISSING, np.int16)
    seen = np.flatnonzero(~missing)

    def at(mask):
        full = np.zeros(raw.size, bool)
        full[seen[mask]] = True
        return f"at {where(full)}"

    if seen.size:
        out[seen] = _encode(raw[seen], classes, what="`label`", where=at)[0]
    return out
