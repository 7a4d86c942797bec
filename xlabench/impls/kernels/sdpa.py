"""sdpa: torch's scaled_dot_product_attention on the XLA device. Runs every case."""

from __future__ import annotations

from xlabench.impls.kernel import ATTENTION, ImplInfo, Kernel

KERNELS = (Kernel(ImplInfo("sdpa", "torch_xla", ATTENTION, ("cpu", "tpu"), (),
                           "torch.nn.functional.scaled_dot_product_attention on the XLA device")),)
