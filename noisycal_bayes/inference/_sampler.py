"""A compiled NUTS program that is built once per model shape and reused for every data set of that shape.

NumPyro's ``MCMC.run`` re-traces and re-compiles its sampling loop on every call (about 3 s on this
machine even for identical shapes, ENVIRONMENT.md), because the loop body is a fresh closure each
time. Here the NUTS kernel (NumPyro's functional ``hmc(potential_fn_gen=..., algo="NUTS")``) is
wrapped in two ``jax.jit`` functions whose data arguments are traced (the same idea as
``MCMC(jit_model_args=True)``):

- ``init(keys, z0, args)`` -> one NUTS state per chain;
- ``advance(states, args)`` -> the states after ``chunk`` transitions and what they visited.

Both are kept in a module-level cache keyed by everything static (model, sizes, chain layout,
precision), so a second fit with the same padded shapes costs only sampling time. Python calls
``advance`` repeatedly, which also drives the progress bar without host callbacks.
"""
from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.hmc import hmc
from numpyro.infer.util import potential_energy

CHAIN_METHODS = ("parallel", "sequential", "vectorized")

# Programs by static configuration. Each holds two compiled functions of a few MB at most; a process
# that fits many different shapes can clear it with `clear_sampler_cache()`.
_PROGRAMS: dict = {}


class Collected(NamedTuple):
    z: dict
    diverging: jax.Array
    num_steps: jax.Array
    accept_prob: jax.Array
    energy: jax.Array
    potential_energy: jax.Array
    step_size: jax.Array
    tree_depth: jax.Array


def chunk_size(n_warmup: int, n_draws: int, target: int = 50) -> int:
    """Largest divisor of gcd(n_warmup, n_draws) not above ``target``: chunks never straddle warm-up/sampling."""
    g = math.gcd(n_warmup, n_draws) if n_warmup > 0 else n_draws
    best = 1
    for d in range(1, min(g, target) + 1):
        if g % d == 0:
            best = d
    return best


def choose_chain_method(n_chains: int, requested: str | None = None) -> str:
    """``parallel`` when JAX has two or more devices (e.g. after ``numpyro.set_host_device_count``; chains
    then run ``n_devices`` at a time), else ``sequential`` (measured faster than ``vectorized`` here, where a
    batched while-loop waits for the longest trajectory of all chains at every iteration)."""
    if requested is not None:
        if requested not in CHAIN_METHODS:
            raise ValueError(f"`chain_method` must be one of {CHAIN_METHODS} or None; got {requested!r}.")
        if requested == "parallel" and n_chains > 1 and jax.local_device_count() < 2:
            raise ValueError(
                f"chain_method='parallel' needs several JAX devices; this process has {jax.local_device_count()}. "
                f"Call numpyro.set_host_device_count({min(n_chains, 8)}) before JAX starts, or use "
                "chain_method='vectorized' / 'sequential'."
            )
        return requested
    if n_chains > 1 and jax.local_device_count() >= 2:
        return "parallel"
    return "sequential"


def parallel_width(n_chains: int) -> int:
    """Chains run at once by ``chain_method="parallel"``: one per device, at most ``n_chains``."""
    return max(1, min(n_chains, jax.local_device_count()))


class NutsProgram:
    """Compiled NUTS for one model function (static sizes bound; data and prior are traced arguments).

    ``sequential`` compiles the single-chain functions and loops over chains in Python, so one program
    serves any number of chains; ``vectorized`` batches the chains with ``vmap``; ``parallel`` maps
    ``width`` chains at a time over as many devices with ``pmap`` (more chains than devices run in
    rounds; a short last round is padded with a copy of its last chain, which is then dropped).
    """

    def __init__(self, model_fn, *, n_warmup: int, chunk: int, chain_method: str, target_accept: float,
                 max_tree_depth: int, dense_mass: bool = True, width: int = 1):
        self.model_fn = model_fn
        self.n_warmup = n_warmup
        self.chain_method = chain_method
        self.chunk = chunk
        self.width = width

        def potential_fn_gen(*args):
            return partial(potential_energy, model_fn, args, {})

        init_kernel, sample_kernel = hmc(potential_fn_gen=potential_fn_gen, algo="NUTS")

        def init_one(key, z0, args):
            return init_kernel(z0, n_warmup, target_accept_prob=target_accept, max_tree_depth=max_tree_depth,
                               dense_mass=dense_mass, model_args=args, rng_key=key)

        def advance_one(state, args):
            def body(s, _):
                s = sample_kernel(s, model_args=args)
                return s, Collected(s.z, s.diverging, s.num_steps, s.accept_prob, s.energy, s.potential_energy,
                                    s.adapt_state.step_size,
                                    jnp.floor(jnp.log2(jnp.maximum(s.num_steps, 1))).astype(jnp.int32) + 1)

            return jax.lax.scan(body, state, None, length=chunk)

        if chain_method == "vectorized":
            self._init = jax.jit(jax.vmap(init_one, in_axes=(0, 0, None)))
            self._advance = jax.jit(jax.vmap(advance_one, in_axes=(0, None)))
        elif chain_method == "sequential":
            self._init = jax.jit(init_one)
            self._advance = jax.jit(advance_one)
        else:  # parallel: one chain per device, `width` devices
            self._devices = jax.local_devices()[:width]
            # The data arguments are replicated onto the devices once per fit (`run`), not at every call.
            self._init = jax.pmap(init_one, in_axes=(0, 0, 0), devices=self._devices)
            self._advance = jax.pmap(advance_one, in_axes=(0, 0), devices=self._devices)

    def run(self, key, z0, args, *, n_chains: int, n_draws: int, progress_bar: bool = False, desc: str = "NUTS"):
        """Run warm-up and sampling from unconstrained starts ``z0`` (leading dim n_chains).

        Returns ``(z, stats)``: unconstrained draws and sampler statistics, leading dims (chain, draw).
        """
        if n_draws % self.chunk:
            raise ValueError(f"n_draws={n_draws} is not a multiple of the compiled chunk {self.chunk}.")
        keys = jax.random.split(key, n_chains)
        n_total = self.n_warmup + n_draws
        n_chunks = n_total // self.chunk
        bar = None
        if progress_bar:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_total * n_chains, desc=f"{desc} warmup", leave=True)
        if self.chain_method == "sequential":
            per_chain = []
            for c in range(n_chains):
                state = self._init(keys[c], jax.tree.map(lambda x: x[c], z0), args)
                per_chain.append(self._loop(state, args, n_chunks, bar, desc, stride=1))
            got = jax.tree.map(lambda *xs: np.stack(xs), *per_chain)
        elif self.chain_method == "parallel":
            args = _replicate(args, self._devices)
            rounds = []
            for first in range(0, n_chains, self.width):
                n_real = min(self.width, n_chains - first)
                idx = np.minimum(np.arange(first, first + self.width), n_chains - 1)
                states = self._init(keys[idx], jax.tree.map(lambda x: x[idx], z0), args)
                got = self._loop(states, args, n_chunks, bar, desc, stride=n_real, axis=1)
                rounds.append(jax.tree.map(lambda x: x[:n_real], got))
            got = jax.tree.map(lambda *xs: np.concatenate(xs, axis=0), *rounds)
        else:
            states = self._init(keys, z0, args)
            got = self._loop(states, args, n_chunks, bar, desc, stride=n_chains, axis=1)
        if bar is not None:
            bar.close()
        stats = {
            "diverging": np.asarray(got.diverging),
            "n_steps": np.asarray(got.num_steps),
            "acceptance_rate": np.asarray(got.accept_prob),
            "energy": np.asarray(got.energy),
            "lp": -np.asarray(got.potential_energy),
            "step_size": np.asarray(got.step_size),
            "tree_depth": np.asarray(got.tree_depth),
        }
        return got.z, stats

    def _loop(self, states, args, n_chunks, bar, desc, stride, axis=0):
        kept = []
        for c in range(n_chunks):
            states, got = self._advance(states, args)
            if (c + 1) * self.chunk > self.n_warmup:
                # To NumPy at once: concatenating device arrays would compile a concatenation per shape.
                kept.append(jax.tree.map(np.asarray, got))
            if bar is not None:
                if (c + 1) * self.chunk == self.n_warmup:
                    bar.set_description(f"{desc} sample")
                bar.update(self.chunk * stride)
        return jax.tree.map(lambda *xs: np.concatenate(xs, axis=axis), *kept)


def _replicate(tree, devices):
    """Each array of ``tree`` stacked ``len(devices)`` times and placed one copy per device (the input
    layout ``pmap`` expects for ``in_axes=0``, so repeated calls do not copy the data again)."""
    sharding = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(devices), ("device",)),
                                          jax.sharding.PartitionSpec("device"))
    return jax.tree.map(lambda x: jax.device_put(jnp.broadcast_to(x, (len(devices),) + jnp.shape(x)), sharding), tree)


def get_program(key, build):
    """The cached program for static configuration ``key`` (built by ``build()`` on first use)."""
    prog = _PROGRAMS.get(key)
    if prog is None:
        prog = build()
        _PROGRAMS[key] = prog
    return prog


def clear_sampler_cache() -> None:
    """Forget every compiled NUTS program (they are rebuilt on the next fit)."""
    _PROGRAMS.clear()
