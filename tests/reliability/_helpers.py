"""Shared helpers of the reliability tests (tests/reliability/)."""
from __future__ import annotations

import contextlib
import io
import os
import signal
from pathlib import Path

from hypothesis import HealthCheck, settings

#: Every property test runs a fixed, modest number of examples: derandomised (the same examples on every
#: run, like a fixed seed), no example database (failing examples are not stored), no deadline (the
#: first example of a JAX-backed test includes compilation).
def property_settings(max_examples: int):
    return settings(max_examples=max_examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


class Hang(Exception):
    """Raised by :func:`time_limit` when a call takes longer than allowed."""


@contextlib.contextmanager
def time_limit(seconds: int):
    """Fail (``Hang``) instead of hanging: SIGALRM after ``seconds`` (main thread, POSIX only)."""
    if not hasattr(signal, "SIGALRM"):  # pragma: no cover - not on this platform
        yield
        return

    def handler(signum, frame):
        raise Hang(f"call did not return within {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_cli(argv, *, seconds: int = 120):
    """Run ``noisycal_bayes.cli.main(argv)`` in-process; returns ``(exit code, stdout, stderr)``.

    Any exception escaping ``main`` is a bug (the contract is an exit code), so it propagates.
    """
    from noisycal_bayes.cli import main

    out, err = io.StringIO(), io.StringIO()
    with time_limit(seconds), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def assert_one_line_error(err: str, *, piece: str | None = None) -> None:
    """stderr holds exactly one non-empty line ``error: ...`` (and no traceback)."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one error line, got {len(lines)}:\n{err}"
    assert lines[0].startswith("error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    if piece is not None:
        assert piece in lines[0], f"{piece!r} not in {lines[0]!r}"


def tree(folder) -> dict:
    """Every file and folder below ``folder`` (relative path -> size in bytes, or None for a folder)."""
    folder = Path(folder)
    out = {}
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            out[str((Path(root) / d).relative_to(folder))] = None
        for f in files:
            p = Path(root) / f
            out[str(p.relative_to(folder))] = p.stat().st_size
    return out
