"""Suite-wide test configuration.

JAX compilation dominates this suite's time, and both xdist workers compile the same programs. JAX's
persistent compilation cache (measured to work on CPU here, ENVIRONMENT.md) lets the second worker and
later runs reuse them. The cache lives under .pytest_cache/ (git-ignored); the library itself never
enables it unless the user asks.
"""
from pathlib import Path

import jax

from noisycal_bayes.inference import configure_jax

# As the command line does: small loops compiled whole (NUTS about 1.6x faster); the device count is left alone.
configure_jax(n_devices=None, small_loops=True)
_CACHE = Path(__file__).resolve().parent.parent / ".pytest_cache" / "jax"
_CACHE.mkdir(parents=True, exist_ok=True)
jax.config.update("jax_compilation_cache_dir", str(_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
