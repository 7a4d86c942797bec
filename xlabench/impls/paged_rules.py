"""The built-in paged-attention kernels' rules: why one cannot run a case (a skipped row), and for each
tuned kernel its typed config and search space, side by side (as attention_rules' kernels). Framework-free,
so the worker (each backend's registry) and `run --dry-run` (in the parent, without a framework) decide a
case's skip by the same code. A rule is ``unsupported(params, platform, device_kind)`` (impls.PagedRule);
the parent knows no device kind (None): a rule that needs one leaves the case to its worker.

Left to the worker: the Pallas ragged kernel's own head-tiling check (it imports the kernel)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from xlabench import hardware
from xlabench import impls as catalog
from xlabench.tune.search import Stage
from xlabench.workloads.paged import PAGED_BLOCKS, PagedBlocks, PagedParams, megacore_only_paged

# Why jax's ragged_paged rows are skipped on CPU: the interpreter fails on the kernel (the worker tries it,
# and quotes the error after this).
RAGGED_CPU = "ragged_paged_attention does not run in the CPU Pallas interpreter (on TPU it does)"


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


def jax_ragged(p: PagedParams, platform: str, device_kind: Optional[str]) -> Optional[str]:
    reason = megacore_only_paged(p)
    if reason:
        return reason
    if p.head_dim % 128:
        return (f"ragged_paged_attention needs head_dim a multiple of 128 (its softmax scratch is 128 lanes "
                f"wide; got {p.head_dim})")
    return None


def jax_paged_gpu(p: PagedParams, platform: str, device_kind: Optional[str]) -> Optional[str]:
    return one_query_token("Pallas GPU paged_attention", p) or megacore_only_paged(p)


def torch_multi_queries(p: PagedParams, platform: str, device_kind: Optional[str]) -> Optional[str]:
    if platform == "tpu" and (p.page_size * p.compute_pages) % 128:
        return (f"multi_queries_paged_attention needs page_size * pages_per_compute_block to be a multiple of "
                f"128 (got {p.page_size} * {p.compute_pages})")
    return megacore_only_paged(p)


def torch_ragged(p: PagedParams, platform: str, device_kind: Optional[str]) -> Optional[str]:
    if platform == "tpu" and p.head_dim % 128:
        return f"ragged_paged_attention needs head_dim a multiple of 128 (got {p.head_dim})"
    return megacore_only_paged(p)


# (backend, impl) -> its rule; torch_xla's paged kernel is JAX's (the same kernel through call_jax).
RULES = {
    ("jax", "naive"): megacore_only_paged, ("jax", "paged"): jax_paged, ("jax", "ragged_paged"): jax_ragged,
    ("jax", "paged_gpu"): jax_paged_gpu,
    ("torch_xla", "naive"): megacore_only_paged, ("torch_xla", "paged"): jax_paged,
    ("torch_xla", "multi_queries_paged"): torch_multi_queries, ("torch_xla", "ragged_paged"): torch_ragged,
}


# The tuned kernels' configs (tune.space.KernelConfig: each field a name the tuner, the cache and the
# results' blocks column use) and block-size searches (xlabench/tune): pages per compute block over the
# powers of two that divide the page table (at most MOST_PAGES), and for ragged paged also the query
# tokens per block.
MOST_PAGES = 128
QUERY_BLOCKS = (8, 16, 32, 64, 128)


@dataclass(frozen=True)
class PagedKernelConfig(PagedBlocks):
    """Pallas TPU paged_attention (and the GPU one): pages per compute block."""


@dataclass(frozen=True)
class RaggedPagedConfig(PagedBlocks):
    """Pallas TPU ragged_paged_attention: KV pages per block (pages_per_compute_block) and
    ``queries_per_block``, the query tokens per block (None: the kernel's tuned table on TPU, else at most 32)."""

    queries_per_block: Optional[int] = None


def page_blocks(p: PagedParams) -> list[int]:
    return [n for n in (1 << i for i in range(8)) if n <= MOST_PAGES and p.pages_per_sequence % n == 0]


def paged_space(p: PagedParams) -> list[Stage]:
    (name,) = PAGED_BLOCKS
    return [Stage("fwd", tuple(PagedKernelConfig.candidate(**{name: n}) for n in page_blocks(p)),
                  PagedKernelConfig.resolve({}).blocks())]


def ragged_space(p: PagedParams) -> list[Stage]:
    tokens = p.batch * p.q_tokens
    queries = [q for q in QUERY_BLOCKS if q <= max(QUERY_BLOCKS[0], tokens)]
    (name,) = PAGED_BLOCKS
    return [Stage("fwd", tuple(RaggedPagedConfig.candidate(**{name: n}, queries_per_block=q) for n in page_blocks(p)
                               for q in queries), RaggedPagedConfig.resolve({}).blocks())]


# (backend, impl) -> its block-size search (xlabench/tune), beside its rule: the kernels that have one.
SPACES = {("jax", "paged"): paged_space, ("jax", "ragged_paged"): ragged_space}


def predict_skip(backend: str, impl: str, params: dict[str, Any], platform: str) -> Optional[str]:
    """Why a built-in paged impl will skip this case on ``platform``, by its worker's rule (no device kind
    known here); a kernel the CPU interpreter fails on is a skip there too. None for an unknown impl."""
    rule = RULES.get((backend, impl))
    if rule is None:
        return None
    p = PagedParams(**params)
    reason = rule(p, platform, None)
    info = catalog.find(backend, impl, "paged_attention")
    if reason is None and (backend, impl) == ("jax", "ragged_paged") and info is not None and info.interpreted(platform):
        return RAGGED_CPU
    return reason
