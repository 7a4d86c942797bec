"""torch_tpu attention kernels, named by their kernel records (impls/kernels/: ``code``, ``layout``). Each
takes q, k, v in its layout (``bshd``: [B, S, H, D]; ``bhsd``: [B, H, S, D]) on the ``tpu`` device and a case's
AttnConfig, and returns the output in the same layout.

- ``naive``: the attention math in torch ops (torch_shared.attention), compiled by ``torch.compile``;
- ``sdpa``: ``F.scaled_dot_product_attention`` compiled, TorchTPU's own lowering of it;
- ``splash``: ``torch.tpu.ops.splash_sdpa`` (JAX's splash kernel, forward and backward) at the case's blocks;
- ``flash``: the JAX backend's Pallas flash kernel through ``torch.tpu.pallas.jax_op``.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F

from xlabench.backends.torch_shared.attention import grouped_attention
from xlabench.backends.torch_tpu import jax_ops
from xlabench.impls import kernels
from xlabench.impls.kernels.splash import SplashConfig
from xlabench.workloads.attention import AttnConfig


@functools.lru_cache(maxsize=None)
def _compiled(kind: str, causal: bool, sm_scale: float, gqa: bool) -> Any:
    """One compiled function per kind and attention setting (torch.compile caches its graphs on it)."""
    if kind == "naive":
        return torch.compile(lambda q, k, v: grouped_attention(q, k, v, causal, sm_scale))
    return torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale,
                                                                        enable_gqa=gqa))


def naive(q, k, v, cfg: AttnConfig):
    """[B, S, H, D]: softmax(QK^T) V in torch ops, float32 logits, compiled."""
    return _compiled("naive", cfg.causal, cfg.sm_scale, False)(q, k, v)


def sdpa(q, k, v, cfg: AttnConfig):
    """[B, H, S, D]: F.scaled_dot_product_attention, compiled (GQA by enable_gqa)."""
    return _compiled("sdpa", cfg.causal, cfg.sm_scale, q.shape[1] != k.shape[1])(q, k, v)


def splash_blocks(cfg: AttnConfig, sq: int, sk: int) -> dict[str, Any]:
    """splash_sdpa's block arguments from the case's splash config (SplashConfig: its defaults where the case
    and the tuner set none): forward blocks, and the backward ones for both of its backward kernels."""
    c = SplashConfig.of(cfg, sq, sk)
    return dict(block_q=c.block_q, block_kv=c.block_k, block_kv_compute=c.block_kv_compute,
                block_q_dkv=c.block_q_bwd, block_kv_dkv=c.block_k_bwd, block_kv_dkv_compute=c.block_k_bwd,
                block_q_dq=c.block_q_bwd, block_kv_dq=c.block_k_bwd, use_fused_bwd_kernel=bool(c.fused_bwd))


def splash(q, k, v, cfg: AttnConfig):
    """[B, H, S, D]: torch.tpu.ops.splash_sdpa (GQA: it repeats the K/V heads to the query heads)."""
    return torch.tpu.ops.splash_sdpa(q, k, v, scale=cfg.sm_scale, is_causal=cfg.causal,
                                     enable_gqa=q.shape[1] != k.shape[1], **splash_blocks(cfg, q.shape[2], k.shape[2]))


def flash(q, k, v, cfg: AttnConfig):
    """[B, H, S, D]: the JAX backend's Pallas TPU flash kernel through jax_op (its backward: jax.vjp of it)."""
    return jax_ops.attention(kernels.kernel("jax", "flash", paged_family=False).code, cfg)(q, k, v)
