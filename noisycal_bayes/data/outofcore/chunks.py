"""One pass over pandas chunks: :func:`stats_from_chunks`, and the CSV and Parquet readers built on it."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..._validation import _preview
from ..binning import Binning
from ._common import _check_columns, _check_layout, _is_equal_mass, _item_scores, _resolve_classes, _resolve_edges
from ._pieces import _long_frame_stats, _wide_frame_stats
from .stats import SufficientStats, _merge_all


def stats_from_chunks(chunks, *, layout: str = "wide", bins=None, item: str = "item", annotator: str = "annotator",
                      label: str = "label", score: str | None = "score", annotators=None, classes=None,
                      group: str | None = None) -> SufficientStats:
    """Sufficient statistics from an iterable of pandas DataFrames, in one pass, holding one chunk at a time.

    Parameters
    ----------
    chunks : iterable of DataFrame
        Pieces of one table, e.g. ``pandas.read_csv(path, chunksize=...)``.
    layout : {"wide", "long"}, default "wide"
        ``"wide"``: one row per item, an ``item`` column, one column per annotator (0, 1; NaN, empty or -1 =
        missing) and optionally ``score``. ``"long"``: one row per response ``item, annotator, label``
        [, ``score``]; the rows must be sorted by item (checked), so that each item's responses are
        consecutive; an item may straddle two chunks.
    bins : Binning (equal-width or explicit edges), array of edges, or None
        Score bins (fixed edges: equal-mass bins need all scores before the counts, which one pass over an
        iterable cannot give; the file readers and :func:`stats_from_dask` accept them). None: one bin,
        scores not read.
    item, annotator, label, score : str
        Column names (``annotator`` and ``label`` for the long layout only).
    annotators : sequence, optional
        Wide layout: the annotator columns (default: every column but ``item``, ``score`` and ``group``).
        Long layout: unused (annotators are collected as they appear; the merged ids are sorted).
    classes : sequence, optional
        K-class statistics: the class names in index order (labels are class names, as in
        ``MulticlassAnnotationSet.from_long``; give the same ``classes`` to every source whose statistics are
        merged). None: binary labels 0/1.
    group : str, optional
        K classes: the column of each item's group label (an int >= 0, the same on every row of an item; the
        ``groups=`` the in-memory fit would take). None: one group. Scores are not read.

    Returns
    -------
    SufficientStats

    Raises
    ------
    ValueError
        Missing columns; labels other than 0/1 (or missing in wide layout), or not among ``classes``;
        scores outside [0, 1] or not finite; an item with several scores (or groups) or no label; groups that
        are not whole numbers >= 0; duplicate (item, annotator) pairs (long) or duplicate items within a chunk
        (wide; across chunks they cannot be seen in one bounded pass); long rows not sorted by item (use
        :func:`stats_from_dask`, which shuffles, or sort the file); ``bins`` with ``classes``.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"item": [1, 2, 3], "a": [1, 0, 0], "b": [1, None, 1], "score": [0.9, 0.2, 0.4]})
    >>> stats = stats_from_chunks([frame.iloc[:2], frame.iloc[2:]], bins=Binning.equal_width(2))
    >>> stats.n_items, stats.counts.tolist()
    (3, [1.0, 1.0, 1.0])

    K classes: class names and a group column.

    >>> long = pd.DataFrame({"item": [1, 1, 2, 2], "annotator": ["a", "b"] * 2, "label": ["cat", "dog", "dog", "dog"],
    ...                      "group": [0, 0, 1, 1]})
    >>> stats = stats_from_chunks([long], layout="long", classes=["cat", "dog", "owl"], group="group")
    >>> stats.patterns.tolist(), stats.group.tolist(), stats.n_groups
    ([[0, 1], [1, 1]], [0, 1], 2)
    """
    _check_layout(layout)
    classes = _resolve_classes(classes, bins, group)
    edges = _resolve_edges(bins, score)
    score_col = score if edges is not None else None
    if layout == "wide":
        return _wide_chunks_stats(chunks, item=item, score=score, score_col=score_col, annotators=annotators,
                                  edges=edges, classes=classes, group=group)
    return _long_chunks_stats(chunks, item=item, annotator=annotator, label=label, score_col=score_col, edges=edges,
                              classes=classes, group=group)


def _wide_chunks_stats(chunks, *, item, score, score_col, annotators, edges, classes, group) -> SufficientStats:
    """Wide layout of :func:`stats_from_chunks`: the annotator columns are fixed by the first chunk."""
    pieces, ann_cols = [], None
    for chunk in chunks:
        if ann_cols is None:
            need = [item] + ([score_col] if score_col else []) + ([group] if group is not None else [])
            _check_columns(chunk.columns, need)
            ann_cols = list(annotators) if annotators is not None else [c for c in chunk.columns
                                                                         if c not in (item, score, group)]
            _check_columns(chunk.columns, ann_cols)
            if not ann_cols:
                raise ValueError(f"wide layout needs one column per annotator besides '{item}'; found "
                                 f"{list(chunk.columns)}.")
        pieces.append(_wide_frame_stats(chunk, item=item, annotators=ann_cols, score=score_col, edges=edges,
                                        classes=classes, group=group))
    if ann_cols is None:
        raise ValueError("no data: the iterable of chunks is empty.")
    return _merge_all(pieces, ann_cols, edges, classes)


def _long_chunks_stats(chunks, *, item, annotator, label, score_col, edges, classes, group) -> SufficientStats:
    """Long layout of :func:`stats_from_chunks`: rows sorted by item; the last item of a chunk is carried
    into the next one, so an item straddling two chunks is counted once."""
    need = [item, annotator, label] + ([score_col] if score_col else []) + ([group] if group is not None else [])
    piece = dict(item=item, annotator=annotator, label=label, score=score_col, edges=edges, classes=classes,
                 group=group)
    pieces, carry, last, seen = [], None, None, False
    for chunk in chunks:
        seen = True
        _check_columns(chunk.columns, need)
        if len(chunk) == 0:
            continue
        ids = chunk[item]
        first = ids.iloc[0]
        if not ids.is_monotonic_increasing or (last is not None and first < last):
            where = (f"item {first!r} follows item {last!r}" if last is not None and first < last else
                     f"items {_preview(_unsorted(ids))}")
            raise ValueError(f"long rows must be sorted by item for a chunked pass ({where} out of order): each item's "
                             "responses must be consecutive. Sort the file by item, or use stats_from_dask, which "
                             "groups responses by item with a shuffle.")
        last = ids.iloc[-1]
        frame = chunk[need] if carry is None else pd.concat([carry, chunk[need]], ignore_index=True)
        tail = frame[item].to_numpy() == last
        carry = frame[tail]
        pieces.append(_long_frame_stats(frame[~tail], **piece))
    if not seen:
        raise ValueError("no data: the iterable of chunks is empty.")
    if carry is not None:
        pieces.append(_long_frame_stats(carry, **piece))
    return _merge_all(pieces, [], edges, classes)


def _unsorted(ids: pd.Series) -> list:
    v = ids.to_numpy()
    k = int(np.flatnonzero(v[1:] < v[:-1])[0])
    return [v[k], v[k + 1]]


def _first_pass_edges(bins, chunks, *, layout, item, score, where) -> Binning:
    """Equal-mass ``bins`` as fixed edges, from a first pass ``chunks()`` over the items' scores."""
    _check_layout(layout)
    try:
        return Binning.from_edges(_resolve_edges(bins, score, lambda: _item_scores(chunks(), layout=layout,
                                                                                  item=item, score=score)))
    except ValueError as exc:
        raise ValueError(f"{where}: equal-mass bins: {exc}") from None


def read_stats_csv(path, *, layout: str = "wide", bins=None, chunksize: int = 1_000_000, item: str = "item",
                   annotator: str = "annotator", label: str = "label", score: str | None = "score", annotators=None,
                   classes=None, group: str | None = None, **read_csv_kwargs) -> SufficientStats:
    """Sufficient statistics of a CSV file read in chunks of ``chunksize`` rows (``pandas.read_csv``).

    Memory is bounded by one chunk; see :func:`stats_from_chunks` for the layouts, ``bins`` and errors
    (long files must be sorted by item). ``bins=Binning.equal_mass(k)`` reads the file twice: first the
    item and score columns, keeping one score per item (8 bytes an item) for exact quantiles (the edges
    ``Binning.equal_mass(k).edges_for(scores)`` of the same items in memory), then the counts. ``classes``
    and ``group``: K-class statistics, as in :func:`stats_from_chunks`. Extra keyword arguments go to
    :func:`pandas.read_csv`.

    Returns
    -------
    SufficientStats
    """
    _resolve_classes(classes, bins, group)

    def read(**kw):
        try:
            return pd.read_csv(path, chunksize=int(chunksize), **{**read_csv_kwargs, **kw})
        except (OSError, pd.errors.EmptyDataError) as exc:
            raise ValueError(f"{path}: cannot read: {exc}") from None

    if _is_equal_mass(bins):
        bins = _first_pass_edges(bins, lambda: read(usecols=[item, score]), layout=layout, item=item, score=score,
                                 where=path)
    reader = read()
    with reader:
        try:
            return stats_from_chunks(reader, layout=layout, bins=bins, item=item, annotator=annotator, label=label,
                                     score=score, annotators=annotators, classes=classes, group=group)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def read_stats_parquet(path, *, layout: str = "wide", bins=None, batch_size: int = 1 << 18, item: str = "item",
                       annotator: str = "annotator", label: str = "label", score: str | None = "score",
                       annotators=None, classes=None, group: str | None = None) -> SufficientStats:
    """Sufficient statistics of a Parquet file or directory, read in record batches with pyarrow.

    The files of ``pyarrow.dataset.dataset(path)`` are read one after the other with
    ``pyarrow.parquet.ParquetFile.iter_batches(batch_size=..., columns=...)``: memory grows with the batch
    size, not with the data (docs/performance.md, *Implementation choices*). See :func:`stats_from_chunks` for the layouts, ``bins`` and errors; long
    data must be sorted by item across the files in path order. Equal-mass bins read the data twice, as in
    :func:`read_stats_csv`. ``classes`` and ``group``: K-class statistics, as in :func:`stats_from_chunks`.

    Returns
    -------
    SufficientStats
    """
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    _resolve_classes(classes, bins, group)
    try:
        dataset = ds.dataset(str(path), format="parquet")
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read as Parquet: {exc}") from None
    names = dataset.schema.names

    def batches(columns):
        for name in dataset.files:
            with pq.ParquetFile(name) as handle:
                for batch in handle.iter_batches(batch_size=int(batch_size), columns=columns):
                    yield batch.to_pandas()

    if _is_equal_mass(bins):
        _check_columns(names, [item, score], where=str(path))
        bins = _first_pass_edges(bins, lambda: batches([item, score]), layout=layout, item=item, score=score,
                                 where=path)
    edges = _resolve_edges(bins, score)
    extra = ([score] if edges is not None else []) + ([group] if group is not None else [])
    if layout == "long":
        columns = [item, annotator, label] + extra
    else:
        ann = list(annotators) if annotators is not None else [c for c in names if c not in (item, score, group)]
        columns = [item] + ann + extra
    _check_columns(names, columns, where=str(path))
    # File by file with ParquetFile.iter_batches: Dataset.to_batches reads ahead across files (docs/performance.md).
    try:
        return stats_from_chunks(batches(columns), layout=layout, bins=bins, item=item, annotator=annotator, label=label,
                                 score=score, annotators=annotators, classes=classes, group=group)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
