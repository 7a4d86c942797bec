"""pallas_gpu: Pallas Triton flash attention (GPU). MHA only; searched over Triton's smaller tiles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from xlabench.impls.kernel import ATTENTION, ImplInfo, Kernel, Style
from xlabench.tune.space import pow2_tiles
from xlabench.impls.configs import KernelBlocks, block_stages, block_unsupported
from xlabench.workloads.attention import BLOCK_PARAMS, AttentionParams


@dataclass(frozen=True)
class PallasGpuConfig(KernelBlocks):
    """Pallas Triton (GPU) mha: block_q x block_k forward (its backward blocks are min(32, each), untuned)."""


def pallas_gpu(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    if hq != hkv:
        return "Pallas GPU mha needs num_kv_heads == num_heads (no GQA/MQA)"
    return block_unsupported("pallas_gpu", sq, sk, cfg)


def pallas_gpu_space(p: AttentionParams) -> list:
    """Triton's tiles are smaller: block_q x block_k over the powers of two 32..256 that tile S."""
    return block_stages(p, PallasGpuConfig, [dict(zip(BLOCK_PARAMS, (bq, bk))) for bq in pow2_tiles(p.seq_len, 32, 256)
                                             for bk in pow2_tiles(p.kv_len, 32, 256)])


KERNELS = (Kernel(ImplInfo("pallas_gpu", "jax", ATTENTION, ("gpu",), ("cpu",),
                           "Pallas Triton flash attention (jax.experimental.pallas.ops.gpu.attention.mha)"),
                  pallas_gpu, BLOCK_PARAMS, PallasGpuConfig, pallas_gpu_space, code="xlabench.backends.jax.attention_impls:pallas_gpu",
                  per_shard=True, style=Style("#2ca02c", (0, (1, 1)), "xx")),)
