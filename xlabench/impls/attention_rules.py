"""The built-in attention kernels' rules: why one cannot run a case (a skipped row), the block parameters
it takes, and for each tuned kernel (flash, splash, pallas_gpu) its typed config and search space, side by
side. Framework-free, so the worker (through each backend's registry) and `run --dry-run` (in the parent,
without a framework) decide a case's skip by the same code.

A rule is ``unsupported(batch, seq_len, kv_len, num_heads, kv_heads, dtype, cfg, platform)`` (impls.AttentionRule).

A kernel's config (a tune.space.KernelConfig, tokamax-style) declares the block fields the kernel takes:
their names are the ones the tuner, the tuning cache and the results' ``tuned_*`` and ``blocks`` columns
use (block_q and block_k are tune.space.BLOCK_PARAMS, the backward ones derive from them), their defaults
come from the case (``with_defaults``), and its search space builds its candidates through it
(``candidate``: a name it does not have is refused). The JAX kernel reads ``Config.of(cfg, sq, sk)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from xlabench import impls as catalog
from xlabench.tune.space import BACKWARD, BLOCK_PARAMS, pow2_tiles
from xlabench.workloads.attention import (BWD_BLOCK_PARAMS, AttentionParams, BackwardBlocks, KernelBlocks,
                                          block_stages, block_unsupported, tile_candidates)


@dataclass(frozen=True)
class FlashConfig(BackwardBlocks):
    """Pallas TPU flash_attention: block_q x block_k forward; block_q_bwd x block_k_bwd for its dkv and dq
    kernels (default the forward ones)."""


@dataclass(frozen=True)
class SplashConfig(BackwardBlocks):
    """Pallas TPU splash attention: flash's blocks, and ``block_kv_compute`` (the key/value block each
    step computes on, dividing block_k; default block_k) and ``fused_bwd`` (1: one backward kernel for dq,
    dk and dv, which computes the scores and probabilities once instead of in both the dq and the dkv
    kernel; 0, the kernel's default: two)."""

    block_kv_compute: Optional[int] = None
    fused_bwd: int = field(default=0, metadata={"stage": BACKWARD})

    def with_defaults(self, sq: int, sk: int) -> "SplashConfig":
        c = super().with_defaults(sq, sk)
        return c if c.block_kv_compute is not None else dataclasses.replace(c, block_kv_compute=c.block_k)


@dataclass(frozen=True)
class PallasGpuConfig(KernelBlocks):
    """Pallas Triton (GPU) mha: block_q x block_k forward (its backward blocks are min(32, each), untuned)."""


def cudnn(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    if dtype not in ("bfloat16", "float16"):
        return f"cuDNN fused attention needs bfloat16/float16 inputs, got {dtype}"
    return None


def jax_flash(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    if hq != hkv:
        return ("Pallas TPU flash_attention needs num_kv_heads == num_heads (no GQA/MQA); "
                "splash supports GQA")
    bk = FlashConfig.of(cfg, sq, sk).block_k
    if bk % 128:
        return f"Pallas TPU flash_attention needs block_k to be a multiple of 128 (got {bk})"
    return block_unsupported("flash", sq, sk, cfg)


def jax_splash(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    c = SplashConfig.of(cfg, sq, sk)
    if c.block_k % c.block_kv_compute:
        return f"splash needs block_kv_compute to divide block_k (got {c.block_kv_compute} for {c.block_k})"
    return block_unsupported("splash", sq, sk, cfg)


def pallas_gpu(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    if hq != hkv:
        return "Pallas GPU mha needs num_kv_heads == num_heads (no GQA/MQA)"
    return block_unsupported("pallas_gpu", sq, sk, cfg)


# Each kernel's block-size search (xlabench/tune), beside its rule: params -> the stages to search.

def flash_space(p: AttentionParams) -> list:
    """block_q x block_k over the powers of two 128..min(S, 2048) that tile S; for fwd_bwd then the
    backward blocks (dkv and dq kernels) over the same, the forward ones fixed."""
    return block_stages(p, FlashConfig, tile_candidates(p.seq_len, p.kv_len),
                        tile_candidates(p.seq_len, p.kv_len, BWD_BLOCK_PARAMS))


SPLASH_COMPUTE_SPLITS = 3  # block_kv_compute: block_kv, /2, /4 (at least 128)


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


def pallas_gpu_space(p: AttentionParams) -> list:
    """Triton's tiles are smaller: block_q x block_k over the powers of two 32..256 that tile S."""
    return block_stages(p, PallasGpuConfig, [dict(zip(BLOCK_PARAMS, (bq, bk))) for bq in pow2_tiles(p.seq_len, 32, 256)
                                             for bk in pow2_tiles(p.kv_len, 32, 256)])


def torch_xla_flash(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    if cfg.interpret:  # the JAX kernel with the case's block sizes: the JAX backend's limits
        return jax_flash(b, sq, sk, hq, hkv, dtype, cfg, "cpu")
    # torch_xla pads K/V to its own block size; the kernel still has no GQA (the same rule as in JAX)
    return jax_flash(b, sq, sk, hq, hkv, dtype, cfg, "tpu") if hq != hkv else None


def torch_xla_splash(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    if sq != sk:
        return (f"torch_xla splash_attention builds its mask as (seq_len, seq_len): it needs "
                f"kv_seq_len == seq_len (got {sk} != {sq})")
    return block_unsupported("splash", sq, sk, cfg)


# (backend, impl) -> the registry record's rule, block parameters and search; an impl not here runs
# everything. torch_xla's kernels are not tuned (its flash reads class-level block sizes at trace time).
RULES: dict[tuple[str, str], dict[str, Any]] = {
    ("jax", "flash"): dict(unsupported=jax_flash, block_params=BLOCK_PARAMS, tune_space=flash_space),
    ("jax", "splash"): dict(unsupported=jax_splash, block_params=BLOCK_PARAMS, tune_space=splash_space),
    ("jax", "pallas_gpu"): dict(unsupported=pallas_gpu, block_params=BLOCK_PARAMS, tune_space=pallas_gpu_space),
    ("jax", "cudnn"): dict(unsupported=cudnn),
    ("torch_xla", "flash"): dict(unsupported=torch_xla_flash, block_params=BLOCK_PARAMS),
    ("torch_xla", "splash"): dict(unsupported=torch_xla_splash, block_params=BLOCK_PARAMS),
}


def rule(backend: str, impl: str) -> dict[str, Any]:
    """The registry record's ``unsupported`` and ``block_params`` of a built-in (keyword arguments)."""
    return RULES.get((backend, impl), dict(unsupported=catalog.no_rule))


def predict_skip(backend: str, impl: str, params: dict[str, Any], platform: str) -> Optional[str]:
    """Why a built-in attention impl will skip this attention case on ``platform``, decided as its worker
    decides it (for_impl and skip_reason on the case's config); None for a user impl (its rule
    is its own code, which only the worker imports)."""
    info = catalog.find(backend, impl, "attention")
    if info is None or catalog.is_user(impl):
        return None
    im = catalog.AttentionImplRecord(impl, "", None, **rule(backend, impl))
    p = AttentionParams(**params)
    cfg, _ = for_impl(im, p.attn_config(info.interpreted(platform)))
    return skip_reason(im, p, cfg, platform)


def skip_reason(im: catalog.AttentionImplRecord, p: Any, cfg: Any, platform: str) -> Optional[str]:
    """Why attention impl ``im`` (a built-in or a user impl, any backend) cannot run case ``p``
    (AttentionParams) here (its rule), or None."""
    if im.params_rule is not None:
        return im.params_rule(p, platform)
    return im.unsupported(p.batch, p.seq_len, p.kv_len, p.num_heads, p.kv_heads, p.dtype, cfg, platform)


def for_impl(im: catalog.AttentionImplRecord, cfg: Any) -> tuple[Any, str]:
    """(``cfg`` with the block sizes ``im`` does not take cleared, the row's note saying so or ''): an impl
    sees only the block parameters it declares, and a sweep of the others runs it with its defaults."""
    ignored = [b for b in BLOCK_PARAMS if getattr(cfg, b) is not None and b not in im.block_params]
    if not ignored:
        return cfg, ""
    return dataclasses.replace(cfg, **{b: None for b in ignored}), f"{' and '.join(ignored)} not taken by {im.name}"
