"""A local float64 switch (never a library-wide one at import)."""
import jax


def x64():
    """Context manager enabling float64 inside a block: ``with x64(): ...``."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64  # jax < 0.7

    return enable_x64()
