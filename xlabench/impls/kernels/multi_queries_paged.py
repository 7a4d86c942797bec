"""multi_queries_paged: torch_xla's multi_queries_paged_attention. On CPU its use_kernel=False reference
path (its Pallas kernel does not run in JAX's CPU interpreter), not the kernel."""

from __future__ import annotations

from typing import Optional

from xlabench.impls.kernel import PAGED, ImplInfo, Kernel, Style
from xlabench.workloads.paged import PagedParams, megacore_only_paged

# What torch_xla's CPU rows of a paged kernel ran instead of it.
REFERENCE_PATH = ("CPU: torch_xla's use_kernel=False reference path (plain torch ops per sequence, host "
                  "syncs), not the Pallas kernel: {kernel} does not run in JAX's CPU interpreter")


def torch_multi_queries(p: PagedParams, platform: str, device_kind: Optional[str]) -> Optional[str]:
    if platform == "tpu" and (p.page_size * p.compute_pages) % 128:
        return (f"multi_queries_paged_attention needs page_size * pages_per_compute_block to be a multiple of "
                f"128 (got {p.page_size} * {p.compute_pages})")
    return megacore_only_paged(p)


def bf16_on_tpu(platform: str) -> Optional[str]:
    """The kernel casts K/V to bfloat16 (its CPU reference path does not)."""
    return "bfloat16" if platform == "tpu" else None


KERNELS = (Kernel(ImplInfo("multi_queries_paged", "torch_xla", PAGED, ("cpu", "tpu"), (),
                           "custom_kernel.multi_queries_paged_attention (CPU: its use_kernel=False reference, not "
                           "the kernel)"), torch_multi_queries, code="xlabench.backends.torch_xla.paged_impls:multi_queries_paged",
                  prepare="xlabench.backends.torch_xla.paged_impls:mq_prepare", kv_round=bf16_on_tpu,
                  cpu_note=REFERENCE_PATH.format(kernel="its kernel (program_id outside the interpreter)"),
                  style=Style("#8c6d31", (0, (4, 1.5, 1, 1.5)), "..")),)
