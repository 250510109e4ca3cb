"""Test helpers: evaluate a NumPyro model as ONE compiled program.

Evaluated op by op (outside ``jax.jit``), every new (operation, shape) pair of a model compiles its own
small XLA program (~0.1 s CPU each, 50-150 per model call): most of the default test run's CPU time.
These helpers trace the same handlers under ``jax.jit``, so a call costs one compilation. Everything but
the parameters is closed over, so Python-level arguments (None, sizes, priors, numpy index arrays) stay
concrete exactly as in an eager call.
"""
import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.util import log_density

_VALUE_SITES = ("sample", "deterministic")


def jit_log_density(model, args, kwargs, params):
    """``numpyro.infer.util.log_density(model, args, kwargs, params)[0]`` as a Python float, compiled whole.

    Parameters
    ----------
    model : callable
        NumPyro model.
    args : tuple
        Positional model arguments (closed over, so they stay concrete).
    kwargs : dict
        Keyword model arguments (closed over).
    params : dict of str to array_like
        Values of the latent sites (traced).
    """
    params = {k: jnp.asarray(v) for k, v in params.items()}
    return float(jax.jit(lambda p: log_density(model, args, kwargs, p)[0])(params))


def jit_trace_values(get_trace):
    """Values of the sample and deterministic sites of ``get_trace()``, computed by one compiled program.

    Parameters
    ----------
    get_trace : callable
        No-argument function returning a NumPyro trace (e.g. ``lambda: trace(seed(model, 0)).get_trace(...)``);
        a seed given as an int is turned into a key inside the program, giving the same draws as eagerly.

    Returns
    -------
    dict of str to numpy.ndarray
        Site name -> value.
    """
    def values():
        return {name: site["value"] for name, site in get_trace().items() if site["type"] in _VALUE_SITES}

    return {k: np.asarray(v) for k, v in jax.jit(values)().items()}
