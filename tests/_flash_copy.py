"""A new attention kernel as a contributor adds one: a copy of xlabench/impls/kernels/flash.py's JAX kernel
under a new name, its code in this module, and nothing else (tests/test_new_kernel.py registers it with one
``kernels.register`` line). Its record names everything the benchmark reads: the catalogue entry, the skip
rule, the block parameters, typed config and search space, the code and its layout, the per-shard flag of
the train step, and the chart style."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Annotated, ClassVar, Optional

from xlabench.impls.kernel import ATTENTION, ImplInfo, Kernel, Style
from xlabench.tune.space import MultipleOf
from xlabench.impls.configs import BWD_BLOCK_PARAMS, BackwardBlocks, block_stages, block_unsupported, tile_candidates
from xlabench.workloads.attention import BLOCK_PARAMS, AttentionParams

LANES = 128  # the kernel's key block is a whole number of vector lanes
STYLE = Style("#5254a3", (0, (3, 1)), "oo")  # a colour no unknown name is given


@dataclass(frozen=True)
class FlashCopyConfig(BackwardBlocks):
    """Pallas TPU flash_attention: block_q x block_k forward, block_q_bwd x block_k_bwd backward; block_k a
    multiple of LANES."""

    kernel_name: ClassVar[str] = "flash_copy"

    block_k: Annotated[Optional[int], MultipleOf(LANES)] = None


def flash_copy_rule(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    if hq != hkv:
        return "flash_copy needs num_kv_heads == num_heads (no GQA/MQA)"
    return FlashCopyConfig.of(cfg, sq, sk).problem() or block_unsupported("flash_copy", sq, sk, cfg)


def flash_copy_space(p: AttentionParams) -> list:
    return block_stages(p, FlashCopyConfig, tile_candidates(p.seq_len, p.kv_len),
                        tile_candidates(p.seq_len, p.kv_len, BWD_BLOCK_PARAMS))


def flash_copy(q, k, v, cfg):
    """The kernel's code (the worker imports it from the record): Pallas TPU flash attention, [B, H, S, D];
    on CPU in the Pallas interpreter."""
    from jax.experimental.pallas import tpu as pltpu
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    c = FlashCopyConfig.of(cfg, q.shape[2], k.shape[2])
    sizes = fa.BlockSizes(
        block_q=c.block_q, block_k_major=c.block_k, block_k=c.block_k, block_b=1,
        block_q_major_dkv=c.block_q_bwd, block_k_major_dkv=c.block_k_bwd, block_k_dkv=c.block_k_bwd,
        block_q_dkv=c.block_q_bwd, block_k_major_dq=c.block_k_bwd, block_k_dq=c.block_k_bwd, block_q_dq=c.block_q_bwd)
    with pltpu.force_tpu_interpret_mode() if cfg.interpret else contextlib.nullcontext():
        return fa.flash_attention(q, k, v, causal=cfg.causal, sm_scale=cfg.sm_scale, block_sizes=sizes)


KERNELS = (Kernel(ImplInfo("flash_copy", "jax", ATTENTION, ("tpu",), ("cpu",), "a copy of flash (a test's new kernel)"),
                  flash_copy_rule, BLOCK_PARAMS, FlashCopyConfig, flash_copy_space, code=f"{__name__}:flash_copy",
                  layout="bhsd", per_shard=True, style=STYLE),)
