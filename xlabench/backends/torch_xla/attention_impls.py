"""torch_xla attention kernels' code, named by their kernel records (impls/kernels/: ``code``, ``layout``,
``sharded``). Inputs q [B,Sq,Hq,D], k/v [B,Sk,Hkv,D] as in JAX, in the record's layout.

On TPU, ``flash`` and ``splash`` are torch_xla's own Pallas wrappers. On CPU, torch_xla's custom_kernel
ops would emit a TPU custom call (forcing that lowering aborts the process), so ``flash`` runs the
very JAX kernel the JAX backend uses, in the generic Pallas interpreter, inside the torch_xla graph
(``call_jax``); ``splash`` runs torch_xla's own splash wrapper (itself a ``call_jax`` of the JAX
kernel) under the same interpreter. Rows of both say interpret=true.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F

from xlabench import impls as catalog
from xlabench.backends import user_impl
from xlabench.backends.torch_shared.attention import grouped_attention, to_layout  # noqa: F401 (the cases use them)
from xlabench.backends.torch_xla import jax_kernels
from xlabench.impls import AttentionImplRecord, no_rule
from xlabench.impls.configs import kernel_blocks as _blocks
from xlabench.impls.kernels import flash as flash_kernel
from xlabench.workloads.attention import AttnConfig, default_scale  # noqa: F401 (re-exported for models)
from xlabench.workloads.model_layout import BATCH_AXES, HEADS, mesh_axis


@dataclass(frozen=True)
class TorchAttentionImpl(AttentionImplRecord):
    """A torch_xla attention impl: the shared record, and the framework its function is written in
    (a user impl may be a JAX function, run through call_jax)."""

    framework: str = "torch"


def naive(q, k, v, cfg: AttnConfig):
    """Plain torch ops on the XLA device; XLA fuses them."""
    return grouped_attention(q, k, v, cfg.causal, cfg.sm_scale)


def sdpa(q, k, v, cfg: AttnConfig):
    """F.scaled_dot_product_attention, [B, H, S, D]; its is_causal mask is top-left aligned too."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=cfg.causal, scale=cfg.sm_scale,
                                          enable_gqa=q.shape[1] != k.shape[1])


# ------------------------------------------------------------------------------------------------ flash


@contextlib.contextmanager
def _flash_block_sizes(cfg: AttnConfig, sq: int, sk: int) -> Iterator[None]:
    """torch_xla's flash_attention takes no block sizes: it reads FlashAttention.DEFAULT_BLOCK_SIZES
    (clipped to the sequence) when it traces. A case's block_q/block_k are set there for its duration."""
    from torch_xla.experimental.custom_kernel import FlashAttention

    saved = dict(FlashAttention.DEFAULT_BLOCK_SIZES)
    bq, bk = _blocks(cfg, sq, sk)
    if cfg.block_q:
        FlashAttention.DEFAULT_BLOCK_SIZES.update(block_q=bq, block_q_major_dkv=bq, block_q_dkv=bq, block_q_dq=bq)
    if cfg.block_k:
        FlashAttention.DEFAULT_BLOCK_SIZES.update(block_k_major=bk, block_k=bk, block_k_major_dkv=bk,
                                                  block_k_dkv=bk, block_k_dq=bk, block_k_major_dq=bk)
    try:
        yield
    finally:
        FlashAttention.DEFAULT_BLOCK_SIZES.clear()
        FlashAttention.DEFAULT_BLOCK_SIZES.update(saved)


def flash(q, k, v, cfg: AttnConfig):
    """[B, H, S, D]. TPU: custom_kernel.flash_attention (a TPU custom call); CPU: the JAX kernel, interpreted."""
    if cfg.interpret:
        return jax_kernels.apply(flash_kernel.NAME, q, k, v, cfg)
    from torch_xla.experimental.custom_kernel import flash_attention

    with _flash_block_sizes(cfg, q.shape[2], k.shape[2]):
        return flash_attention(q, k, v, causal=cfg.causal, sm_scale=cfg.sm_scale)


def flash_spmd(acfg: AttnConfig, p: Any, mesh: Any, repeat: int, platform: str) -> Callable:
    """flash in the train step (its record's ``sharded``): custom_kernel.flash_attention under SPMD runs per
    shard (batch over data x fsdp, heads over tensor) given the partition spec and the mesh; [B,S,H,D] in and
    out, K/V heads repeated ``repeat`` times (no GQA). TPU only."""
    if platform != "tpu":
        from xlabench.protocol.worker_messages import CaseSkipped

        raise CaseSkipped("torch_xla flash in the train step runs on TPU only (custom_kernel.flash_attention "
                          "with partition_spec/mesh); on CPU the interpreted kernel is not wired into SPMD yet")
    from torch_xla.experimental.custom_kernel import flash_attention

    heads = mesh_axis(p.sharding, HEADS) if p.sharding != "auto" else None
    spec = (BATCH_AXES, heads, None, None)

    def attend(q, k, v):
        if repeat > 1:
            k, v = k.repeat_interleave(repeat, dim=2), v.repeat_interleave(repeat, dim=2)
        out = flash_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True,
                              sm_scale=acfg.sm_scale, partition_spec=spec, mesh=mesh)
        return out.transpose(1, 2)

    return attend


# ----------------------------------------------------------------------------------------------- splash


def splash(q, k, v, cfg: AttnConfig):
    """torch_xla.experimental.splash_attention, [B, H, S, D] (MHA: GQA K/V heads are repeated first).

    The wrapper shards over a ("data", "fsdp") mesh with shard_map; one case runs on one device, so
    the mesh is 1 x 1. It takes no softmax scale: queries are pre-scaled (as JAX splash expects)."""
    from torch_xla.experimental.splash_attention import SplashAttentionConfig, splash_attention

    hq, hkv = q.shape[1], k.shape[1]
    if hkv != hq:
        k, v = (x.repeat_interleave(hq // hkv, dim=1) for x in (k, v))
    sq, sk = q.shape[2], k.shape[2]
    bq, bk = _blocks(cfg, sq, sk)
    config = SplashAttentionConfig(
        mesh=str(_single_device_mesh()), qkv_partition_spec=(("data", "fsdp"), None, None, None),
        segment_ids_partition_spec=(("data", "fsdp"), None),
        sa_block_q=bq, sa_block_kv=bk, sa_block_kv_compute=bk, sa_block_q_dkv=bq, sa_block_kv_dkv=bk,
        sa_block_kv_dkv_compute=bk, sa_block_q_dq=bq, sa_block_kv_dq=bk)
    return splash_attention(q * cfg.sm_scale, k, v, config.to_json(), causal=cfg.causal)


@functools.lru_cache(maxsize=1)
def _single_device_mesh():
    import numpy as np
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr

    if xr.global_runtime_device_count() != 1:  # a torch_xla mesh must list every device of the process
        from xlabench.protocol.worker_messages import CaseSkipped

        raise CaseSkipped("torch_xla splash_attention needs a mesh of every device; an attention case runs on "
                          "one device, so splash needs devices: 1")
    return xs.Mesh(np.array([0]), (1, 1), ("data", "fsdp"))


FRAMEWORKS = ("torch", "jax")


def get(name: str) -> TorchAttentionImpl:
    """A built-in as its kernel record declares it (impls/kernels/: its code here, its layout and rules), or a
    user impl (import path / entry point), imported now."""
    if catalog.is_user(name):
        return user(name)
    return catalog.attention_record("torch_xla", name, "torch_xla attention", TorchAttentionImpl)


@functools.lru_cache(maxsize=None)
def user(name: str) -> TorchAttentionImpl:
    """A user impl on torch_xla tensors: fn(q, k, v, cfg), a ``torch.autograd.Function`` (called as
    ``Fn.apply(q, k, v, cfg)``), or with ``framework = "jax"`` a JAX function that ``call_jax`` splices
    into the graph (differentiated by jax.vjp). Optional attributes as for JAX (docs/kernels.md)."""
    path, obj = user_impl.load(name)
    framework = getattr(obj, "framework", "torch")
    if framework not in FRAMEWORKS:
        raise user_impl.ImplLoadError(f"impl {path!r}: framework {framework!r} is not one of {', '.join(FRAMEWORKS)}")
    if isinstance(obj, type) and issubclass(obj, torch.autograd.Function):
        user_impl.check_callable(path, obj.forward, ("ctx", "q", "k", "v", "cfg"), "its forward")
        fn = functools.partial(_apply_function, obj)
    elif framework == "jax":
        user_impl.check_callable(path, obj, ("q", "k", "v", "cfg"))
        fn = functools.partial(_apply_jax, name)
    else:
        fn = user_impl.check_callable(path, obj, ("q", "k", "v", "cfg"))
    parts = user_impl.attention_parts(path, obj)
    parts["note"] += " (JAX, through call_jax)" if framework == "jax" else ""
    return TorchAttentionImpl(name, fn=fn, unsupported=no_rule, framework=framework, **parts)


def _apply_function(fn_cls: type, q, k, v, cfg: AttnConfig):
    return fn_cls.apply(q, k, v, cfg)


def _apply_jax(name: str, q, k, v, cfg: AttnConfig):
    return jax_kernels.apply(name, q, k, v, cfg)
