"""torch_tpu attention kernels, named by their kernel records (impls/kernels/: ``code``, ``layout``). Each is a
TorchAttention: bound to a case's AttnConfig and shape, a function of q, k, v in its layout (``bshd``:
[B, S, H, D]; ``bhsd``: [B, H, S, D]) on the ``tpu`` device, returning the output in the same layout.

- ``naive``: the attention math in torch ops (torch_shared.attention), compiled by ``torch.compile``;
- ``sdpa``: ``F.scaled_dot_product_attention`` compiled, TorchTPU's own lowering of it;
- ``splash``: ``torch.tpu.ops.splash_sdpa`` (JAX's splash kernel, forward and backward) at the case's blocks;
- ``flash``: the JAX backend's Pallas flash kernel through ``torch.tpu.pallas.jax_op``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

from xlabench.backends.torch_shared.attention import grouped_attention
from xlabench.backends.torch_tpu import jax_ops
from xlabench.impls import kernels
from xlabench.impls.kernels import flash as flash_kernel
from xlabench.impls.kernels.splash import SplashConfig
from xlabench.workloads.attention import AttnConfig


Fn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class TorchAttention:
    """A torch_tpu attention kernel. ``bind(cfg, sq, sk)`` is the kernel at one config and shape as a function
    of (q, k, v): torch ops and the kernel's call only, everything it derives from the config and the shapes
    resolved in ``bind``, so a caller that compiles around it (the train step's model) traces tensor ops
    alone (splash's blocks, resolved inside the trace from a dataclass, broke the graph at every layer, and
    the loop's graph break left the model's forward to eager on the v5e). ``standalone`` is the same function
    for a caller that runs the kernel alone (an attention case): compiled by torch.compile per config and
    shape where ``compiled`` (the kernels written in torch ops), as bound where it is one call already."""

    bind: Callable[[AttnConfig, int, int], Fn]
    compiled: bool = False

    def standalone(self, cfg: AttnConfig, sq: int, sk: int) -> Fn:
        return _compiled(self, cfg, sq, sk) if self.compiled else self.bind(cfg, sq, sk)


@functools.lru_cache(maxsize=None)
def _compiled(kernel: TorchAttention, cfg: AttnConfig, sq: int, sk: int) -> Fn:
    """One compiled function per kernel, config and shape (torch.compile caches its graphs on it)."""
    return torch.compile(kernel.bind(cfg, sq, sk))


def _naive(cfg: AttnConfig, sq: int, sk: int) -> Fn:
    return lambda q, k, v: grouped_attention(q, k, v, cfg.causal, cfg.sm_scale)


def _sdpa(cfg: AttnConfig, sq: int, sk: int) -> Fn:
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=cfg.causal, scale=cfg.sm_scale,
                                                          enable_gqa=q.shape[1] != k.shape[1])


def splash_blocks(cfg: AttnConfig, sq: int, sk: int) -> dict[str, Any]:
    """splash_sdpa's block arguments from the case's splash config (SplashConfig: its defaults where the case
    and the tuner set none): forward blocks, and the backward ones for both of its backward kernels."""
    c = SplashConfig.of(cfg, sq, sk)
    return dict(block_q=c.block_q, block_kv=c.block_k, block_kv_compute=c.block_kv_compute,
                block_q_dkv=c.block_q_bwd, block_kv_dkv=c.block_k_bwd, block_kv_dkv_compute=c.block_k_bwd,
                block_q_dq=c.block_q_bwd, block_kv_dq=c.block_k_bwd, use_fused_bwd_kernel=bool(c.fused_bwd))


def _splash(cfg: AttnConfig, sq: int, sk: int) -> Fn:
    blocks = splash_blocks(cfg, sq, sk)
    return lambda q, k, v: torch.tpu.ops.splash_sdpa(q, k, v, scale=cfg.sm_scale, is_causal=cfg.causal,
                                                     enable_gqa=q.shape[1] != k.shape[1], **blocks)


def _flash(cfg: AttnConfig, sq: int, sk: int) -> Fn:
    return jax_ops.attention(kernels.kernel("jax", flash_kernel.NAME, paged_family=False).code, cfg)


# [B, S, H, D]: softmax(QK^T) V in torch ops, float32 logits, compiled
naive = TorchAttention(_naive, compiled=True)
# [B, H, S, D]: F.scaled_dot_product_attention, compiled (GQA by enable_gqa)
sdpa = TorchAttention(_sdpa, compiled=True)
# [B, H, S, D]: torch.tpu.ops.splash_sdpa (GQA: it repeats the K/V heads to the query heads)
splash = TorchAttention(_splash)
# [B, H, S, D]: the JAX backend's Pallas TPU flash kernel through jax_op (its backward: jax.vjp of it)
flash = TorchAttention(_flash)
