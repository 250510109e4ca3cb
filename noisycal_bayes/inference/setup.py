"""Process-wide JAX set-up for fast fits: call :func:`configure_jax` first thing, before any JAX computation.

Three settings make NUTS fast on CPU, and each belongs to the whole process, so the library never applies
them by itself (the command line does, as its first step):

- **Devices.** One XLA host device per core (what ``numpyro.set_host_device_count`` does), so that
  ``fit_nuts`` runs chains in parallel, one per device.
- **Small loops compiled whole.** XLA's CPU runtime runs each operation of a loop body as a separate task
  with a fixed dispatch cost; loops that touch little memory are instead compiled into one function
  (``SmallWhileLoopHoistingPass``), but only below 1 KiB by default. NumPyro's NUTS tree building is such a
  loop, a few kilobytes of state around a gradient on the compressed table, so the default leaves most of a
  NUTS step to dispatch. Raising the threshold to :data:`SMALL_LOOP_BYTES` measured (docs/performance.md):
  a compressed fit (4 chains x 2000 iterations, 1e4 items, 2 devices) 1.3 s -> 0.8 s, the same draws; an
  item-level fit unchanged. It is an XLA compiler flag, so it can only be set before JAX starts.
- **Compilation cache** (optional): JAX's persistent cache, which also keeps saved NUTS samplers
  (:func:`noisycal_bayes.inference.enable_compilation_cache`).
"""
from __future__ import annotations

import os
import sys
import warnings

#: Loops reading and writing fewer bytes than this (XLA's cost estimate) are compiled as one function.
SMALL_LOOP_BYTES = 100_000_000
_SMALL_LOOP_FLAG = f"--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold={SMALL_LOOP_BYTES}"
_DEVICE_FLAG = "--xla_force_host_platform_device_count"


def jax_started() -> bool:
    """True once JAX has initialised a backend (its XLA flags are then fixed for the life of the process)."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # noqa: BLE001 - private API: if it moved, assume the worst (flags may be too late)
        return True


def configure_jax(*, n_devices: int | str | None = "auto", small_loops: bool = True,
                  cache_dir: str | os.PathLike | None = None) -> dict:
    """Set up JAX for fast fits; call it before any JAX computation (first cell of a notebook).

    Parameters
    ----------
    n_devices : int, "auto" or None, default "auto"
        XLA CPU devices (one chain runs on each at a time): ``"auto"`` = one per core, at most 8; None
        leaves the device count as it is.
    small_loops : bool, default True
        Compile loops that touch less than :data:`SMALL_LOOP_BYTES` as one function (see the module notes;
        NUTS on compressed counts 1.6x faster here). Skipped when ``XLA_FLAGS`` already sets
        ``--xla_backend_extra_options`` (yours are kept).
    cache_dir : path, optional
        Turn on JAX's persistent compilation cache there (:func:`enable_compilation_cache`).

    Returns
    -------
    dict
        What was applied: ``{"n_devices": int | None, "small_loops": bool, "cache_dir": str | None}``.

    Warns
    -----
    RuntimeWarning
        JAX has already started with other flags, so the device count and the loop setting cannot change any
        more (they are left as they are; the cache is still turned on). Restart the kernel and call this
        first. A repeated call asking for the flags already in effect is silent.

    Notes
    -----
    Both flags go into the ``XLA_FLAGS`` environment variable, which XLA reads once, when JAX first
    initialises a backend; they apply to every JAX program of the process, not only to this package's.
    Neither changes any computed value (draws are identical), only how the compiled code is scheduled.
    """
    if n_devices == "auto":
        n_devices = max(1, min(os.cpu_count() or 1, 8))
    elif n_devices is not None:
        if isinstance(n_devices, bool) or not isinstance(n_devices, int) or n_devices < 1:
            raise ValueError(f"`n_devices` must be 'auto', None or a positive int; got {n_devices!r}.")
    applied = {"n_devices": None, "small_loops": False, "cache_dir": None}
    current = os.environ.get("XLA_FLAGS", "").split()
    flags = list(current)
    if n_devices is not None:
        flags = [f for f in flags if not f.startswith(_DEVICE_FLAG)] + [f"{_DEVICE_FLAG}={n_devices}"]
    if small_loops and not any(f.startswith("--xla_backend_extra_options") for f in flags):
        flags.append(_SMALL_LOOP_FLAG)
    if sorted(flags) != sorted(current) and jax_started():
        warnings.warn("configure_jax: JAX has already started, so its device count and compiler flags are fixed "
                      "for this process; they were left unchanged. Call configure_jax() before any JAX "
                      "computation (e.g. in the first cell, after a kernel restart).", RuntimeWarning, stacklevel=2)
    else:  # not started yet, or already set up this way (e.g. a second notebook in the same kernel)
        os.environ["XLA_FLAGS"] = " ".join(flags)
        applied["n_devices"] = n_devices
        applied["small_loops"] = small_loops and _SMALL_LOOP_FLAG in flags
    if cache_dir is not None:
        enable_compilation_cache(str(cache_dir), min_compile_time_secs=0.5)
        applied["cache_dir"] = str(cache_dir)
    return applied


def enable_compilation_cache(directory: str, *, min_compile_time_secs: float = 1.0) -> None:
    """Opt in to JAX's persistent compilation cache (it writes compiled programs to ``directory``).

    A repeated script then skips most of its compilation (measured here: a 6-fit script from 60 s to 19 s).
    Equivalent to setting ``JAX_COMPILATION_CACHE_DIR``; affects the whole process.
    """
    import jax  # here, not at import: configure_jax must run before JAX starts

    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
