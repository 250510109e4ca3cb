"""Progress bars for the package's long loops (issue 19, item 5): one helper, shared by every layer.

A bar is shown only when the caller asks for it (``progress_bar=True``; the library default is quiet) *and*
the stream it would write to is a terminal, so logs, CI output and captured pipes stay clean. The wrapped
iterable yields exactly the same items in the same order whether the bar is shown or not: a bar never
changes a computed value.
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
