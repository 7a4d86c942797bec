"""paged_gpu: Pallas Triton paged_attention (GPU): one query token per sequence, no megacore_mode."""

from __future__ import annotations

from typing import Optional

from xlabench.impls.kernel import PAGED, ImplInfo, Kernel, Style
from xlabench.impls.kernels.paged import PagedKernelConfig, one_query_token
from xlabench.workloads.paged import PagedParams, megacore_only_paged


def jax_paged_gpu(p: PagedParams, platform: str, device_kind: Optional[str]) -> Optional[str]:
    return one_query_token("Pallas GPU paged_attention", p) or megacore_only_paged(p)


KERNELS = (Kernel(ImplInfo("paged_gpu", "jax", PAGED, ("gpu",), ("cpu",),
                           "Pallas Triton paged_attention (jax.experimental.pallas.ops.gpu.paged_attention)"),
                  jax_paged_gpu, config=PagedKernelConfig, code="xlabench.backends.jax.paged_impls:paged_gpu",
                  style=Style("#17becf", (0, (1, 1)), "xx")),)
