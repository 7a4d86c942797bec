"""torch_tpu backend (TorchTPU, PyTorch's TPU device after torch_xla): probe the environment and run cases.
Imported only inside a torch_tpu worker, whose interpreter is the torch_tpu environment's (run/envs.py).

torch_tpu registers the device ``tpu`` when torch loads it; it owns the chip. JAX is imported in this
process only to trace Pallas kernels (``torch.tpu.pallas.jax_op``, splash_sdpa): the worker pins JAX to
its CPU platform (run/envs.py), so JAX never opens the TPU that torch_tpu holds.
"""

from __future__ import annotations

import torch  # noqa: F401
import torch_tpu  # noqa: F401  (registers the 'tpu' device and torch.tpu)

from xlabench.backends.runners import runner_table
from xlabench.backends.torch_tpu.env import probe

runner_for = runner_table(__name__, "runner")

__all__ = ["probe", "runner_for"]
