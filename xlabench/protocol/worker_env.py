"""The environment variables the parent sets when it starts a worker: the half of the parent-worker
contract that is fixed at start (the messages are the other half), named once for both sides."""

from __future__ import annotations

# Multi-host runs (xlabench/run/distributed.py sets them; the JAX worker initialises jax.distributed from them).
ENV_COORDINATOR = "XLABENCH_COORDINATOR"
ENV_NUM_PROCESSES = "XLABENCH_NUM_PROCESSES"
ENV_PROCESS_ID = "XLABENCH_PROCESS_ID"
ENV_AUTO = "XLABENCH_DISTRIBUTED_AUTO"
ENV_INIT_TIMEOUT = "XLABENCH_INIT_TIMEOUT_S"
# A torch_xla worker of a sharded variant: spmd (user-annotated) or spmd-auto (xlabench/run/envs.py).
TORCH_XLA_SPMD_VAR = "XLABENCH_TORCH_XLA_SPMD"
# Folders a worker puts on sys.path before it imports a user impl (module:attr): the directory the run
# was started in and the suite file's, os.pathsep-joined (xlabench/backends/user_impl.py reads it).
IMPL_PATH_VAR = "XLABENCH_IMPL_PATH"
# The JAX worker's persistent compilation cache directory (absent: no cache); xlabench/run/compile_cache_dir.py
# chooses it, xlabench/backends/jax/jax_compile_cache.py turns it on.
COMPILE_CACHE_VAR = "XLABENCH_COMPILE_CACHE"
# The same folder for a worker that compiles for a target it does not have (`xlabench compile`): JAX's
# cache stays off there (libtpu's compile-only client cannot load an entry back), and the worker keeps
# the compiled programs' figures instead (xlabench/measure/figure_store.py).
FIGURE_CACHE_VAR = "XLABENCH_FIGURE_CACHE"
