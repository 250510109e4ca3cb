"""Progress bars for the package's long loops: shown only when asked for (``progress_bar=True``) and writing to a
terminal; a bar never changes a computed value. Details: docs/foundations.md, *noisycal_bayes._progress*.
"""
from __future__ import annotations

import sys


def _is_terminal(stream) -> bool:
    """Whether ``stream`` is an interactive terminal (False for files, pipes and closed streams)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (ValueError, OSError):  # a closed or detached stream
        return False


def progress(iterable, *, enabled: bool, desc: str, total: int | None = None, file=None):
    """``iterable`` wrapped in a tqdm bar when ``enabled`` and ``file`` is a terminal; else ``iterable`` itself.

    Parameters
    ----------
    iterable : iterable
        The loop's items; yielded unchanged, in order.
    enabled : bool
        The caller's ``progress_bar`` option.
    desc : str
        Label of the bar (what is being counted, e.g. ``"bootstrap NC-ECE"``).
    total : int, optional
        Number of items, for iterables without ``len`` (generators).
    file : text stream, optional
        Where the bar is written; default ``sys.stderr`` (read at call time, so redirections apply).

    Returns
    -------
    iterable
        ``iterable`` itself when the bar is off, else a ``tqdm`` object over it.

    Examples
    --------
    >>> import io
    >>> items = range(3)
    >>> progress(items, enabled=False, desc="x") is items
    True
    >>> progress(items, enabled=True, desc="x", file=io.StringIO()) is items  # not a terminal: no bar
    True
    """
    stream = sys.stderr if file is None else file
    if not enabled or not _is_terminal(stream):
        return iterable
    from tqdm import tqdm  # the terminal bar (tqdm.auto would pick a notebook widget, which ignores ``file``)

    return tqdm(iterable, desc=desc, total=total, file=stream, leave=False, dynamic_ncols=True)
