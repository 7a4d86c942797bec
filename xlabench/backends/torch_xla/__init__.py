"""torch_xla backend: probe the environment and run cases. Imported only inside a torch_xla worker.

torch_xla is imported (and its runtime initialised) before anything imports JAX: torch_xla must own
the device first, or a later torch_xla operation can hang (pytorch/xla#8793; torch_xla's own
``jax_import_guard`` does the same). JAX is used inside this process only to trace Pallas kernels.
"""

from __future__ import annotations

import os  # noqa: I001

import torch_xla  # noqa: F401  (first, see above)
import torch_xla.runtime as xr

from xlabench.envs import TORCH_XLA_SPMD_VAR

# SPMD is process-global and cannot be undone: the runner starts a worker per mode (envs.worker_variant).
if os.environ.get(TORCH_XLA_SPMD_VAR):
    xr.use_spmd(auto=os.environ[TORCH_XLA_SPMD_VAR] == "spmd-auto")
torch_xla._XLAC._init_computation_client()

from typing import Any, Callable  # noqa: E402

from xlabench.backends.torch_xla.env import probe  # noqa: E402


def runner_for(workload: str) -> Callable[..., dict[str, Any]]:
    """The function that runs one case of ``workload`` and returns row fields plus samples."""
    if workload == "attention":
        from xlabench.backends.torch_xla.attention_case import run_attention_case
        return run_attention_case
    if workload == "paged_attention":
        from xlabench.backends.torch_xla.paged_case import run_paged_case
        return run_paged_case
    if workload == "train":
        from xlabench.backends.torch_xla.train_case import run_train_case
        return run_train_case
    raise ValueError(f"the torch_xla backend has no workload {workload!r}")


__all__ = ["probe", "runner_for"]
