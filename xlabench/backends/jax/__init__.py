"""JAX backend: probe the environment and run cases. Imported only inside a worker process."""

from __future__ import annotations

from xlabench.backends.jax import jax_compile_cache
from xlabench.backends.jax.aot import keep_hlo_in, take_compile_cached
from xlabench.backends.jax.env import init_distributed_from_env, probe
from xlabench.backends.runners import runner_table

init_distributed_from_env()  # first thing in a worker: a multi-process run joins its peers here
jax_compile_cache.configure()  # before any compile: JAX decides once per process whether its cache is used


runner_for = runner_table(__name__, "runner")


def fit_models(*args: object, **kwargs: object) -> list:
    """The worker's op fit (backends/jax/fit.py), imported when asked: it needs the train step (optax),
    which a torch_xla worker that borrows JAX kernels has no use for (nor optax in its environment)."""
    from xlabench.backends.jax.fit import fit_models as fit

    return fit(*args, **kwargs)


# `xlabench compile`: the same workloads compiled for a target (TPU topology, CUDA lowering), not run.
compiler_for = runner_table(__name__, "compiler")

__all__ = ["compiler_for", "fit_models", "keep_hlo_in", "probe", "runner_for", "take_compile_cached"]
