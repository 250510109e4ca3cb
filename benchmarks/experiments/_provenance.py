"""Which package code a run used, recorded in the results JSON (``"code"``) and shown under each table."""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def code_version() -> str:
    """``"commit <sha>"`` of the checkout, plus a note when ``noisycal_bayes/`` had uncommitted changes.

    Returns ``"unknown (not a git checkout)"`` when git or the repository is unavailable.
    """
    def git(*args):
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()

    try:
        sha = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", "noisycal_bayes")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"commit {sha}" + (" with uncommitted changes in noisycal_bayes/" if dirty else "")
