"""A compiled NUTS program that is built once per model shape and reused for every data set of that shape.

NumPyro's ``MCMC.run`` re-traces and re-compiles its sampling loop on every call (about 3 s on this
machine even for identical shapes, ENVIRONMENT.md), because the loop body is a fresh closure each
time. Here the NUTS kernel (NumPyro's functional ``hmc(potential_fn_gen=..., algo="NUTS")``) is
wrapped in two compiled functions whose data arguments are traced (the same idea as
``MCMC(jit_model_args=True)``):

- ``init(keys, sites, args)`` -> one NUTS state per chain, from a constrained start jittered per chain;
- ``advance(states, args)`` -> the states after ``chunk`` transitions and what they visited (constrained).

Both are kept in a module-level cache keyed by everything static (model, sizes, chain layout,
precision), so a second fit with the same padded shapes costs only sampling time. Python calls
``advance`` repeatedly, which also drives the progress bar without host callbacks.

With JAX's persistent compilation cache on, each function is also saved across processes
(:class:`~._saved.SavedProgram`, ``jax.export``), so a new process neither re-traces NumPyro's NUTS nor recompiles it.
"""
from __future__ import annotations

import math
import threading
import warnings
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.hmc import hmc
from numpyro.infer.util import constrain_fn, potential_energy, unconstrain_fn

from ._saved import SUFFIX, SavedProgram, saved_programs_dir

CHAIN_METHODS = ("parallel", "sequential", "vectorized")
#: Half-width of the uniform jitter added to the start of each chain in unconstrained coordinates, so that
#: chains start apart and R-hat can reveal several modes.
INIT_JITTER = 0.5

# Programs by static configuration. Each holds two compiled functions of a few MB at most; a process
# that fits many different shapes can clear it with `clear_sampler_cache()`.
_PROGRAMS: dict = {}


class Collected(NamedTuple):
    sites: dict  # constrained sample-site values
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


def chain_keys(seed: int, n_chains: int) -> np.ndarray:
    """One raw JAX PRNG key (uint32 pair) per chain, from NumPy's ``SeedSequence(seed)``.

    Computed in NumPy so that no JAX program compiles for it; chain ``c``'s key depends on ``(seed, c)`` only
    (``generate_state`` is prefix-stable), so adding chains leaves the others' draws unchanged.
    """
    return np.random.SeedSequence(seed).generate_state(2 * n_chains, dtype=np.uint32).reshape(n_chains, 2)


def parallel_width(n_chains: int) -> int:
    """Devices used by ``chain_method="parallel"``: one per chain, at most the number of devices."""
    return max(1, min(n_chains, jax.local_device_count()))


class NutsProgram:
    """Compiled NUTS for one model function (static sizes bound; data and prior are traced arguments).

    ``sequential`` compiles the single-chain functions and loops over chains in Python, so one program
    serves any number of chains; ``vectorized`` batches the chains with ``vmap``; ``parallel`` runs one chain
    on each of ``width`` devices at once (``jit`` of ``shard_map``, pmap's semantics), in rounds when there
    are more chains than devices; unused slots of the last round are filled with a copy of its last chain,
    which is then dropped. (Vectorising several chains per device was measured slower once small loops are
    compiled whole, :func:`noisycal_bayes.inference.configure_jax`: 1.42 s vs 0.80 s for 4 chains on 2
    devices.) Starts and draws are constrained sample-site values: the maps to and from the sampler's
    unconstrained coordinates are compiled inside ``init`` and ``advance`` (no extra program to load or
    compile in a new process).
    """

    def __init__(self, model_fn, *, n_warmup: int, chunk: int, chain_method: str, target_accept: float,
                 max_tree_depth: int, dense_mass: bool = True, width: int = 1, key=()):
        self.model_fn = model_fn
        self.n_warmup = n_warmup
        self.chain_method = chain_method
        self.chunk = chunk
        self.width = width

        def potential_fn_gen(*args):
            return partial(potential_energy, model_fn, args, {})

        init_kernel, sample_kernel = hmc(potential_fn_gen=potential_fn_gen, algo="NUTS")

        def init_from(key, z0, args):
            return init_kernel(z0, n_warmup, target_accept_prob=target_accept, max_tree_depth=max_tree_depth,
                               dense_mass=dense_mass, model_args=args, rng_key=key)

        def init_one(key, sites, args):
            """One chain's NUTS state from its key and the constrained start ``sites`` (shared by all chains):
            the start in unconstrained coordinates plus uniform jitter, so that chains start apart."""
            key_jitter, key_mcmc = jax.random.split(key)
            leaves, treedef = jax.tree.flatten(unconstrain_fn(model_fn, args, {}, sites))
            z0 = [leaf + jax.random.uniform(k, leaf.shape, leaf.dtype, -INIT_JITTER, INIT_JITTER)
                  for leaf, k in zip(leaves, jax.random.split(key_jitter, len(leaves)))]
            return init_from(key_mcmc, jax.tree.unflatten(treedef, z0), args)

        def shape_of(x):
            return jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x))

        def advance_one(state, args):
            # NumPyro's sample_kernel reads settings (tree depth, warm-up length) that init_kernel stores in
            # their shared closure. When `init` was loaded from disk instead of traced in this process (a
            # saved `init` without its `advance`: another process still writing it, an interrupted run),
            # trace init abstractly first; eval_shape adds no operation to this program.
            jax.eval_shape(init_from, *jax.tree.map(shape_of, (state.rng_key, state.z, args)))

            def body(s, _):
                s = sample_kernel(s, model_args=args)
                # Draws leave in constrained coordinates (the model's own support transforms): no separate
                # program to compile for the conversion.
                return s, Collected(constrain_fn(model_fn, args, {}, s.z), s.diverging, s.num_steps,
                                    s.accept_prob, s.energy, s.potential_energy, s.adapt_state.step_size,
                                    jnp.floor(jnp.log2(jnp.maximum(s.num_steps, 1))).astype(jnp.int32) + 1)

            return jax.lax.scan(body, state, None, length=chunk)

        if chain_method == "vectorized":
            init_one, advance_one = jax.vmap(init_one, in_axes=(0, None, None)), jax.vmap(advance_one, in_axes=(0, None))
        if chain_method == "parallel":  # one chain on each of `width` devices
            self._devices = jax.local_devices()[:width]
            # Every argument has a leading device axis: the data and the start are replicated onto the devices
            # once per fit (`run`), not copied again at every call.
            stage, strip = partial(_per_device, mesh=_mesh(self._devices)), 1
        else:
            stage, strip = _jit, 0
        self._init = SavedProgram(init_one, stage, strip, name=("init",) + tuple(map(repr, key)))
        self._advance = SavedProgram(advance_one, stage, strip, name=("advance",) + tuple(map(repr, key)))

    def run(self, keys, sites, args, *, n_draws: int, progress_bar: bool = False, desc: str = "NUTS"):
        """Run warm-up and sampling from one key per chain (:func:`chain_keys`) and the constrained start
        ``sites`` (sample-site values shared by all chains, jittered per chain in unconstrained coordinates).

        Returns ``(draws, stats)``: constrained sample-site draws and sampler statistics, leading dims
        (chain, draw).
        """
        if n_draws % self.chunk:
            raise ValueError(f"n_draws={n_draws} is not a multiple of the compiled chunk {self.chunk}.")
        # Indexing and reshaping happen in NumPy: on device arrays each would compile a small program.
        keys, sites = np.asarray(keys), jax.tree.map(np.asarray, sites)
        n_chains = keys.shape[0]
        n_total = self.n_warmup + n_draws
        n_chunks = n_total // self.chunk
        bar = None
        if progress_bar:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_total * n_chains, desc=f"{desc} warmup", leave=True)
        if self.chain_method == "sequential":
            per_chain = []
            for c in range(n_chains):
                state = self._start(keys[c], sites, args)
                per_chain.append(self._loop(state, args, n_chunks, bar, desc, stride=1))
            got = jax.tree.map(lambda *xs: np.stack(xs), *per_chain)
        elif self.chain_method == "parallel":
            args, sites = _replicate((args, sites), self._devices)
            slots = self.width
            rounds = []
            for first in range(0, n_chains, slots):
                n_real = min(slots, n_chains - first)
                idx = np.minimum(np.arange(first, first + slots), n_chains - 1)
                states = self._start(keys[idx], sites, args)
                got = self._loop(states, args, n_chunks, bar, desc, stride=n_real, axis=1)
                rounds.append(jax.tree.map(lambda x: x[:n_real], got))
            got = jax.tree.map(lambda *xs: np.concatenate(xs, axis=0), *rounds)
        else:
            states = self._start(keys, sites, args)
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
        return got.sites, stats

    def _start(self, keys, sites, args):
        """``init(keys, sites, args)``; on the first call, ``advance`` compiles meanwhile in another thread.

        Both are traced here, one after the other (NumPyro's effect handlers live on a global stack, so
        tracing must stay on one thread); only XLA's compilation, which releases the GIL, runs in the
        background. On two or more cores the two compilations overlap (measured: first fit 14.9 s -> 13.6 s).
        """
        if self._advance.compiled:
            return self._init(keys, sites, args)
        states = self._init.out_info(keys, sites, args)
        if self.chain_method == "parallel":  # as `init` returns them: split over the devices along the leading axis
            sharding = _device_sharding(self._devices)
            states = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), states)
        lowered = self._advance.lower(states, args)
        worker = threading.Thread(target=self._advance.compile_ahead, args=(lowered,), daemon=True)
        worker.start()
        try:
            return self._init(keys, sites, args)
        finally:
            worker.join()

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


def clear_programs(*, files: bool = False) -> None:
    """Forget every compiled NUTS program of this process; with ``files``, also delete the saved ones."""
    _PROGRAMS.clear()
    folder = saved_programs_dir()
    if files and folder is not None and folder.is_dir():
        for path in folder.glob(f"*{SUFFIX}"):
            path.unlink(missing_ok=True)


#: XLA options of the sampler's programs: LLVM's expensive passes cost a third of the compile time and gain
#: nothing measurable in a NUTS loop made of many small operations (measured: compile 32 s -> 24 s, sampling
#: 1.49 s -> 1.37 s per fit, docs/performance.md).
COMPILER_OPTIONS = {"xla_llvm_disable_expensive_passes": True}


def _jit(fn):
    # keep_unused: the grid layout never reads the pattern table, and a program saved by jax.export must
    # take every argument it is called with.
    return jax.jit(fn, keep_unused=True, compiler_options=COMPILER_OPTIONS)


def _mesh(devices):
    return jax.sharding.Mesh(np.array(devices), ("device",))


def _per_device(fn, *, mesh):
    """``fn`` run on each device of ``mesh`` on its slice of every argument's leading axis (``pmap``'s
    semantics, written as ``jit(shard_map)`` so that the compiler options apply)."""
    spec = jax.sharding.PartitionSpec("device")

    def block(*args):
        out = fn(*jax.tree.map(lambda x: x[0], args))
        return jax.tree.map(lambda x: x[None], out)

    return _jit(jax.shard_map(block, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))


def _device_sharding(devices):
    """Arrays split over ``devices`` along their leading axis (one slice per device)."""
    return jax.sharding.NamedSharding(_mesh(devices), jax.sharding.PartitionSpec("device"))


def _replicate(tree, devices):
    """Each array of ``tree`` stacked ``len(devices)`` times and placed one copy per device (the input
    layout ``pmap`` expects for ``in_axes=0``, so repeated calls do not copy the data again)."""
    sharding = _device_sharding(devices)
    return jax.tree.map(lambda x: jax.device_put(np.broadcast_to(np.asarray(x), (len(devices),) + np.shape(x)),
                                                 sharding), tree)


def get_program(key, build):
    """The cached program for static configuration ``key`` (built by ``build()`` on first use)."""
    prog = _PROGRAMS.get(key)
    if prog is None:
        prog = build()
        _PROGRAMS[key] = prog
    return prog


def clear_sampler_cache() -> None:
    """Deprecated: use :func:`noisycal_bayes.inference.clear_cache` (which clears the EM programs too)."""
    warnings.warn("clear_sampler_cache() is deprecated; use noisycal_bayes.inference.clear_cache(), which clears "
                  "every saved program (NUTS and EM).", DeprecationWarning, stacklevel=2)
    _PROGRAMS.clear()
