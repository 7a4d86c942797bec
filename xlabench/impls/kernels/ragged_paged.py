"""ragged_paged: Pallas TPU ragged_paged_attention (mixed prefill and decode), in JAX (the CPU interpreter
fails on it: a skip there) and torch_xla's (on CPU its use_kernel=False reference). Searched over pages per
compute block x query tokens per block."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from xlabench.impls.kernel import PAGED, ImplInfo, Kernel, Style
from xlabench.impls.kernels.multi_queries_paged import REFERENCE_PATH
from xlabench.impls.kernels.paged import page_blocks
from xlabench.tune.search import Stage
from xlabench.impls.configs import PagedBlocks
from xlabench.workloads.paged import PAGED_BLOCKS, PagedParams, megacore_only_paged

NAME = "ragged_paged"  # what suites, rows and the other modules call it (they import this, never spell it)

# Why jax's ragged_paged rows are skipped on CPU: the interpreter fails on the kernel (the worker tries it,
# and quotes the error after this).
RAGGED_CPU = "ragged_paged_attention does not run in the CPU Pallas interpreter (on TPU it does)"
QUERY_BLOCKS = (8, 16, 32, 64, 128)  # the query tokens per block searched
STYLE = Style("#e377c2", (0, (6, 2)), "\\\\")


@dataclass(frozen=True)
class RaggedPagedConfig(PagedBlocks):
    """Pallas TPU ragged_paged_attention: KV pages per block (pages_per_compute_block) and
    ``queries_per_block``, the query tokens per block (None: the kernel's tuned table on TPU, else at most 32)."""

    queries_per_block: Optional[int] = None


def jax_ragged(p: PagedParams, platform: str, device_kind: Optional[str]) -> Optional[str]:
    reason = megacore_only_paged(p)
    if reason:
        return reason
    if p.head_dim % 128:
        return (f"ragged_paged_attention needs head_dim a multiple of 128 (its softmax scratch is 128 lanes "
                f"wide; got {p.head_dim})")
    return None


def torch_ragged(p: PagedParams, platform: str, device_kind: Optional[str]) -> Optional[str]:
    if platform == "tpu" and p.head_dim % 128:
        return f"ragged_paged_attention needs head_dim a multiple of 128 (got {p.head_dim})"
    return megacore_only_paged(p)


def ragged_space(p: PagedParams) -> list[Stage]:
    tokens = p.batch * p.q_tokens
    queries = [q for q in QUERY_BLOCKS if q <= max(QUERY_BLOCKS[0], tokens)]
    (name,) = PAGED_BLOCKS
    return [Stage("fwd", tuple(RaggedPagedConfig.candidate(**{name: n}, queries_per_block=q) for n in page_blocks(p)
                               for q in queries), RaggedPagedConfig.resolve({}).blocks())]


KERNELS = (
    Kernel(ImplInfo(NAME, "jax", PAGED, ("tpu",), ("cpu",),
                    "Pallas TPU ragged_paged_attention (mixed prefill/decode); on CPU tried in the interpreter, "
                    "fails: skipped"), jax_ragged, config=RaggedPagedConfig, tune_space=ragged_space,
           interpreter_fails=RAGGED_CPU, code="xlabench.backends.jax.paged_impls:ragged_paged", prepare="xlabench.backends.jax.paged_impls:ragged_prepare",
           worker_rule="xlabench.backends.jax.paged_impls:ragged_heads_unsupported", style=STYLE),
    Kernel(ImplInfo(NAME, "torch_xla", PAGED, ("cpu", "tpu"), (),
                    "custom_kernel.ragged_paged_attention (CPU: its use_kernel=False reference, not the kernel)"),
           torch_ragged, code="xlabench.backends.torch_xla.paged_impls:ragged_paged", prepare="xlabench.backends.torch_xla.paged_impls:ragged_prepare",
           cpu_note=REFERENCE_PATH.format(kernel="ragged_paged_attention_v2 (NotImplementedError)"), style=STYLE),
    Kernel(ImplInfo(NAME, "torch_tpu", PAGED, ("tpu",), (),
                    "the JAX Pallas TPU ragged_paged_attention through torch.tpu.pallas.jax_op"),
           jax_ragged, config=RaggedPagedConfig, tune_space=ragged_space, code="xlabench.backends.torch_tpu.paged_impls:ragged_paged",
           style=STYLE),
)
