"""paged: Pallas TPU paged_attention (one query token per sequence), in JAX and through call_jax in
torch_xla; megacore_mode only on a megacore chip. Searched over pages per compute block."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from xlabench import hardware
from xlabench.impls.kernel import PAGED, ImplInfo, Kernel, Style, kv_round_to
from xlabench.tune.search import Stage
from xlabench.impls.configs import PagedBlocks
from xlabench.workloads.paged import PAGED_BLOCKS, PagedParams

NAME = "paged"  # what suites, rows and the other modules call it (they import this, never spell it)

MOST_PAGES = 128  # the largest pages per compute block searched
STYLE = Style("#d62728", "-", "//")


@dataclass(frozen=True)
class PagedKernelConfig(PagedBlocks):
    """Pallas TPU paged_attention (and the GPU one): pages per compute block."""


def one_query_token(kernel: str, p: PagedParams) -> Optional[str]:
    if p.q_tokens != 1:
        return (f"{kernel} takes one query token per sequence (q [batch, heads, head_dim]); "
                f"q_tokens={p.q_tokens} is the ragged_paged / naive path")
    return None


def jax_paged(p: PagedParams, platform: str, device_kind: Optional[str]) -> Optional[str]:
    reason = one_query_token("Pallas TPU paged_attention", p)
    if reason:
        return reason
    if p.megacore_mode is not None and platform == "tpu" and device_kind is not None:
        chip = hardware.lookup(device_kind)
        if chip is None or not chip.megacore:
            return (f"megacore_mode={p.megacore_mode} needs a megacore chip ({', '.join(hardware.MEGACORE_CHIPS)}); "
                    f"on {device_kind!r} the kernel may hang (its docstring)")
    return None


def page_blocks(p: PagedParams) -> list[int]:
    """The powers of two that divide the page table, at most MOST_PAGES."""
    return [n for n in (1 << i for i in range(8)) if n <= MOST_PAGES and p.pages_per_sequence % n == 0]


def paged_space(p: PagedParams) -> list[Stage]:
    (name,) = PAGED_BLOCKS
    return [Stage("fwd", tuple(PagedKernelConfig.candidate(**{name: n}) for n in page_blocks(p)),
                  PagedKernelConfig.resolve({}).blocks())]


# torch_xla's paged kernel is JAX's (the same kernel through call_jax): the same rule; not tuned there.
KERNELS = (
    Kernel(ImplInfo(NAME, "jax", PAGED, ("tpu",), ("cpu",),
                    "Pallas TPU paged_attention (jax.experimental.pallas.ops.tpu.paged_attention); K/V cast to bf16"),
           jax_paged, config=PagedKernelConfig, tune_space=paged_space, code="xlabench.backends.jax.paged_impls:paged",
           kv_round=kv_round_to("bfloat16"), style=STYLE),
    Kernel(ImplInfo(NAME, "torch_xla", PAGED, ("tpu",), ("cpu",),
                    "custom_kernel.paged_attention (CPU: the JAX Pallas paged kernel via call_jax); K/V cast to bf16"),
           jax_paged, config=PagedKernelConfig, code="xlabench.backends.torch_xla.paged_impls:paged", kv_round=kv_round_to("bfloat16"),
           style=STYLE),
    Kernel(ImplInfo(NAME, "torch_tpu", PAGED, ("tpu",), (),
                    "the JAX Pallas TPU paged_attention through torch.tpu.pallas.jax_op; K/V cast to bf16"),
           jax_paged, config=PagedKernelConfig, tune_space=paged_space, code="xlabench.backends.torch_tpu.paged_impls:paged",
           style=STYLE),
)
