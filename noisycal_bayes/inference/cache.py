"""One switch for every compiled program this package keeps: :func:`clear_cache`."""
from __future__ import annotations

from . import _em_loop, _sampler


def clear_cache(*, files: bool = False) -> None:
    """Forget every compiled program of this process: the NUTS samplers and the EM loops.

    Parameters
    ----------
    files : bool, default False
        Also delete the programs saved across processes (``<JAX compilation cache>/noisycal_programs/*.ncprog``;
        JAX's own compilation cache is left alone).

    Notes
    -----
    Programs are rebuilt on the next fit (from the saved files when they are kept). A saved program's key
    covers the package sources it depends on, so editing the package never needs this; it frees memory in a
    process that fits many shapes, or a disk folder.

    Examples
    --------
    >>> from noisycal_bayes.inference import clear_cache
    >>> clear_cache()  # doctest: +SKIP
    """
    _sampler.clear_programs(files=files)
    _em_loop._EM_PROGRAMS.clear()
