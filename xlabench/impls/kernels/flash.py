"""flash: Pallas TPU flash attention, in JAX and (its own build of it) in torch_xla. MHA only; its key
block a multiple of 128; searched over block_q x block_k, then its backward blocks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Optional

from xlabench.impls.kernel import ATTENTION, ImplInfo, Kernel, Style
from xlabench.tune.space import MultipleOf
from xlabench.impls.configs import BWD_BLOCK_PARAMS, BackwardBlocks, block_stages, block_unsupported, tile_candidates
from xlabench.workloads.attention import BLOCK_PARAMS, AttentionParams

NAME = "flash"  # what suites, rows and the other modules call it (they import this, never spell it)

LANES = 128  # the kernel's key block is a whole number of vector lanes
STYLE = Style("#1f77b4", "-", "//")


@dataclass(frozen=True)
class FlashConfig(BackwardBlocks):
    """Pallas TPU flash_attention: block_q x block_k forward; block_q_bwd x block_k_bwd for its dkv and dq
    kernels (default the forward ones). block_k a multiple of LANES."""

    kernel_name: ClassVar[str] = "Pallas TPU flash_attention"

    block_k: Annotated[Optional[int], MultipleOf(LANES)] = None


def jax_flash(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    if hq != hkv:
        return ("Pallas TPU flash_attention needs num_kv_heads == num_heads (no GQA/MQA); "
                "splash supports GQA")
    return FlashConfig.of(cfg, sq, sk).problem() or block_unsupported("flash", sq, sk, cfg)


def torch_xla_flash(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    if cfg.interpret:  # the JAX kernel with the case's block sizes: the JAX backend's limits
        return jax_flash(b, sq, sk, hq, hkv, dtype, cfg, "cpu")
    # torch_xla pads K/V to its own block size; the kernel still has no GQA (the same rule as in JAX)
    return jax_flash(b, sq, sk, hq, hkv, dtype, cfg, "tpu") if hq != hkv else None


def flash_space(p: AttentionParams) -> list:
    """block_q x block_k over the powers of two 128..min(S, 2048) that tile S; for fwd_bwd then the
    backward blocks (dkv and dq kernels) over the same, the forward ones fixed."""
    return block_stages(p, FlashConfig, tile_candidates(p.seq_len, p.kv_len),
                        tile_candidates(p.seq_len, p.kv_len, BWD_BLOCK_PARAMS))


# torch_xla's flash is not tuned: it reads class-level block sizes at trace time. Its train step runs
# custom_kernel.flash_attention per shard, given the mesh (``sharded``).
KERNELS = (
    Kernel(ImplInfo(NAME, "jax", ATTENTION, ("tpu",), ("cpu",),
                    "Pallas TPU flash attention (jax.experimental.pallas.ops.tpu.flash_attention)"),
           jax_flash, BLOCK_PARAMS, FlashConfig, flash_space, code="xlabench.backends.jax.attention_impls:flash", layout="bhsd", per_shard=True,
           style=STYLE),
    Kernel(ImplInfo(NAME, "torch_xla", ATTENTION, ("tpu",), ("cpu",),
                    "torch_xla.experimental.custom_kernel.flash_attention (CPU: the JAX Pallas kernel via call_jax)"),
           torch_xla_flash, BLOCK_PARAMS, FlashConfig, code="xlabench.backends.torch_xla.attention_impls:flash", layout="bhsd", per_shard=True,
           sharded="xlabench.backends.torch_xla.attention_impls:flash_spmd", style=STYLE),
    Kernel(ImplInfo(NAME, "torch_tpu", ATTENTION, ("tpu",), (),
                    "the JAX Pallas TPU flash kernel through torch.tpu.pallas.jax_op (backward: jax.vjp of it)"),
           jax_flash, BLOCK_PARAMS, FlashConfig, flash_space, code="xlabench.backends.torch_tpu.attention_impls:flash",
           layout="bhsd", style=STYLE),
)
