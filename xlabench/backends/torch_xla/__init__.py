"""torch_xla backend: probe the environment and run cases. Imported only inside a torch_xla worker.

torch_xla is imported (and its runtime initialised) before anything imports JAX: torch_xla must own
the device first, or a later torch_xla operation can hang (pytorch/xla#8793; torch_xla's own
``jax_import_guard`` does the same). JAX is used inside this process only to trace Pallas kernels.
"""

from __future__ import annotations

import os  # noqa: I001

import torch_xla  # noqa: F401  (first, see above)
import torch_xla.runtime as xr

from xlabench.protocol.worker_env import TORCH_XLA_SPMD_VAR

# SPMD is process-global and cannot be undone: the runner starts a worker per mode (xlabench.run.envs.worker_variant).
if os.environ.get(TORCH_XLA_SPMD_VAR):
    xr.use_spmd(auto=os.environ[TORCH_XLA_SPMD_VAR] == "spmd-auto")
torch_xla._XLAC._init_computation_client()

from xlabench.backends.torch_xla.env import probe  # noqa: E402
from xlabench.backends.runners import runner_table  # noqa: E402


runner_for = runner_table(__name__, "runner")


__all__ = ["probe", "runner_for"]
