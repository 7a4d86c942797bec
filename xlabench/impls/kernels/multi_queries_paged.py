"""multi_queries_paged: torch_xla's multi_queries_paged_attention. On CPU its use_kernel=False reference
path (its Pallas kernel does not run in JAX's CPU interpreter), not the kernel."""

from __future__ import annotations

from typing import Optional

from xlabench.impls.kernel import PAGED, ImplInfo, Kernel
from xlabench.workloads.paged import PagedParams, megacore_only_paged


def torch_multi_queries(p: PagedParams, platform: str, device_kind: Optional[str]) -> Optional[str]:
    if platform == "tpu" and (p.page_size * p.compute_pages) % 128:
        return (f"multi_queries_paged_attention needs page_size * pages_per_compute_block to be a multiple of "
                f"128 (got {p.page_size} * {p.compute_pages})")
    return megacore_only_paged(p)


KERNELS = (Kernel(ImplInfo("multi_queries_paged", "torch_xla", PAGED, ("cpu", "tpu"), (),
                           "custom_kernel.multi_queries_paged_attention (CPU: its use_kernel=False reference, not "
                           "the kernel)"), torch_multi_queries),)
