"""splash: Pallas TPU splash attention (GQA as MQA), in JAX and in torch_xla (MHA, square masks). Searched
over block_q x block_kv x block_kv_compute together, then its backward blocks with and without its fused
backward kernel."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, ClassVar, Optional

from xlabench.impls.kernel import ATTENTION, ImplInfo, Kernel, Style
from xlabench.tune.space import BACKWARD, Divides, Searched
from xlabench.impls.configs import BWD_BLOCK_PARAMS, BackwardBlocks, block_stages, block_unsupported, tile_candidates
from xlabench.workloads.attention import BLOCK_PARAMS, AttentionParams


@dataclass(frozen=True)
class SplashConfig(BackwardBlocks):
    """Pallas TPU splash attention: flash's blocks, and ``block_kv_compute`` (the key/value block each
    step computes on, dividing block_k; default block_k) and ``fused_bwd`` (1: one backward kernel for dq,
    dk and dv, which computes the scores and probabilities once instead of in both the dq and the dkv
    kernel; 0, the kernel's default: two)."""

    kernel_name: ClassVar[str] = "splash"

    block_kv_compute: Annotated[Optional[int], Divides(BLOCK_PARAMS[1])] = None  # divides block_k
    fused_bwd: Annotated[int, Searched(BACKWARD)] = 0

    def with_defaults(self, sq: int, sk: int) -> "SplashConfig":
        c = super().with_defaults(sq, sk)
        return c if c.block_kv_compute is not None else dataclasses.replace(c, block_kv_compute=c.block_k)


def jax_splash(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    return SplashConfig.of(cfg, sq, sk).problem() or block_unsupported("splash", sq, sk, cfg)


def torch_xla_splash(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    if sq != sk:
        return (f"torch_xla splash_attention builds its mask as (seq_len, seq_len): it needs "
                f"kv_seq_len == seq_len (got {sk} != {sq})")
    return block_unsupported("splash", sq, sk, cfg)


def torch_tpu_splash(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    if sq != sk:
        return (f"torch.tpu.ops.splash_sdpa builds its mask from the query length: it needs kv_seq_len == "
                f"seq_len (got {sk} != {sq})")
    return jax_splash(b, sq, sk, hq, hkv, dtype, cfg, platform)


SPLASH_COMPUTE_SPLITS = 3  # block_kv_compute: block_kv, /2, /4 (at least 128)
STYLE = Style("#ff7f0e", (0, (6, 2)), "\\\\")


def splash_space(p: AttentionParams) -> list:
    """block_q x block_kv as flash's, each with block_kv_compute dividing block_kv (block_kv, /2, /4), in one
    descent from the square blocks at block_kv_compute = block_kv: the three interact (on the v5e at S=4096,
    2048 x 1024 was slower than 1024 x 1024 at block_kv_compute 1024 and the fastest at 256, so a search
    of the blocks first and block_kv_compute after stopped at 1024 x 1024, 10% slower); then the backward
    blocks, each with and without splash's fused backward kernel (``fused_bwd``, SplashConfig; 0, the
    kernel's default, is where the descent starts)."""
    kv = BLOCK_PARAMS[1]
    fwd = [SplashConfig.candidate(**c, block_kv_compute=c[kv] >> i) for c in tile_candidates(p.seq_len, p.kv_len)
           for i in range(SPLASH_COMPUTE_SPLITS) if i == 0 or c[kv] >> i >= 128]
    bwd = [SplashConfig.candidate(**c, fused_bwd=f) for c in tile_candidates(p.seq_len, p.kv_len, BWD_BLOCK_PARAMS)
           for f in (0, 1)]
    return block_stages(p, SplashConfig, fwd, bwd)


KERNELS = (
    Kernel(ImplInfo("splash", "jax", ATTENTION, ("tpu",), ("cpu",),
                    "Pallas TPU splash attention (splash_attention_kernel.make_splash_mha/mqa)"),
           jax_splash, BLOCK_PARAMS, SplashConfig, splash_space, code="xlabench.backends.jax.attention_impls:splash", layout="bhsd", per_shard=True,
           style=STYLE),
    Kernel(ImplInfo("splash", "torch_xla", ATTENTION, ("tpu",), ("cpu",),
                    "torch_xla.experimental.splash_attention (CPU: the JAX splash kernel via call_jax)"),
           torch_xla_splash, BLOCK_PARAMS, SplashConfig, code="xlabench.backends.torch_xla.attention_impls:splash", layout="bhsd",
           note="GQA: K/V heads repeated to num_heads (torch_xla splash is MHA-only)", style=STYLE,
           trains=False),  # its own mesh of every device: not in the train step
    Kernel(ImplInfo("splash", "torch_tpu", ATTENTION, ("tpu",), (),
                    "torch.tpu.ops.splash_sdpa: JAX's splash kernel, forward and backward, every block exposed"),
           torch_tpu_splash, BLOCK_PARAMS, SplashConfig, splash_space, code="xlabench.backends.torch_tpu.attention_impls:splash",
           layout="bhsd", style=STYLE,
           note=("splash_sdpa's forward is the kernel's fwd_residuals variant vmapped over the batch: it writes the "
                 "softmax statistics for a backward even when none follows (JAX's splash forward does not); "
                 "GQA: it repeats the K/V heads to the query heads")),
)
