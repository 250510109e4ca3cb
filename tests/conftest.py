"""Suite-wide test configuration.

JAX compilation dominates this suite's time, and both xdist workers compile the same programs. JAX's
persistent compilation cache (measured to work on CPU here, ENVIRONMENT.md) lets the second worker and
later runs reuse them. The cache lives under .pytest_cache/ (git-ignored); the library itself never
enables it unless the user asks.
"""
import os
from pathlib import Path

import jax

from noisycal_bayes.inference import configure_jax

# Compilation, not running, is most of this suite's CPU time: XLA's backend at optimisation level 0 compiles a
# NUTS program about 25% faster (measured on tests/inference/test_nuts.py's fixtures: 40 s -> 30 s CPU, cold
# cache). The level changes how much LLVM optimises the machine code, not the arithmetic (XLA's CPU fast-math is
# off at every level), so the results are the ones users get. NOISYCAL_TEST_XLA_OPT=default keeps XLA's level.
# LLVM's expensive passes off as well: about 8% less compilation CPU again (NUTS 15.2 -> 14.0 s, EM 1.8 -> 1.4 s on
# a cold cache), with the draws and EM estimates identical to the last bit (checked on the same fixtures).
if os.environ.get("NOISYCAL_TEST_XLA_OPT", "0") != "default":
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0",
                                        "--xla_llvm_disable_expensive_passes=true"]).strip()
# As the command line does: small loops compiled whole (NUTS about 1.6x faster); the device count is left alone.
configure_jax(n_devices=None, small_loops=True)
_CACHE = Path(__file__).resolve().parent.parent / ".pytest_cache" / "jax"
_CACHE.mkdir(parents=True, exist_ok=True)
jax.config.update("jax_compilation_cache_dir", str(_CACHE))
# Every program, however quick to compile, is shared between the two xdist workers (3% less CPU than a 0.5 s floor).
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
