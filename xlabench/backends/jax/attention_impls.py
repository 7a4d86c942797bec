"""JAX attention kernels' code, named by their kernel records (impls/kernels/: ``code``, ``layout``). Every
kernel takes q, k, v ([B,Sq,Hq,D], [B,Sk,Hkv,D]) in its record's layout and a case's AttnConfig.

The attention benchmark hands a kernel its native layout outside the timed region; the model (train
workload) calls ``attend``, which transposes as needed.
"""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp

from xlabench import impls as catalog
from xlabench.backends import user_impl
from xlabench.impls import AttentionImplRecord, no_rule
from xlabench.workloads.attention import REF_MAX_SCORE_BYTES, reference_chunk
from xlabench.workloads.attention import AttnConfig, default_scale  # noqa: F401 (re-exported for models)
from xlabench.impls.kernels.flash import FlashConfig
from xlabench.impls.kernels.pallas_gpu import PallasGpuConfig
from xlabench.impls.kernels.splash import SplashConfig


skip_reason = user_impl.skip_reason  # the contract's one skip check (re-exported for the case runners)


def _mask(sq: int, sk: int, causal: bool):
    if not causal:
        return None
    return jnp.arange(sk)[None, :] <= jnp.arange(sq)[:, None]


def naive(q, k, v, cfg: AttnConfig):
    """softmax(QK^T * scale) V with plain jnp ops; GQA by grouping query heads (no K/V copy)."""
    b, sq, hq, d = q.shape
    hkv, sk = k.shape[2], k.shape[1]
    g = hq // hkv
    qg = q.reshape(b, sq, hkv, g, d)
    logits = jnp.einsum("bqhgd,bkhd->bhgqk", qg, k, preferred_element_type=jnp.float32) * cfg.sm_scale
    mask = _mask(sq, sk, cfg.causal)
    if mask is not None:
        logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    out = jnp.einsum("bhgqk,bkhd->bqhgd", probs, v, preferred_element_type=jnp.float32)
    return out.reshape(b, sq, hq, d).astype(q.dtype)


def xla_sdpa(q, k, v, cfg: AttnConfig):
    return jax.nn.dot_product_attention(q, k, v, scale=cfg.sm_scale, is_causal=cfg.causal,
                                        implementation="xla")


def cudnn(q, k, v, cfg: AttnConfig):
    return jax.nn.dot_product_attention(q, k, v, scale=cfg.sm_scale, is_causal=cfg.causal,
                                        implementation="cudnn")


def tpu_interpret(cfg: AttnConfig):
    """Generic Pallas interpreter for TPU kernels on CPU (fast; works under shard_map)."""
    if not cfg.interpret:
        return contextlib.nullcontext()
    from jax.experimental.pallas import tpu as pltpu
    return pltpu.force_tpu_interpret_mode(True)


def flash(q, k, v, cfg: AttnConfig):
    """Pallas TPU flash attention, [B, H, S, D]."""
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    c = FlashConfig.of(cfg, q.shape[2], k.shape[2])
    sizes = fa.BlockSizes(
        block_q=c.block_q, block_k_major=c.block_k, block_k=c.block_k, block_b=1,
        block_q_major_dkv=c.block_q_bwd, block_k_major_dkv=c.block_k_bwd, block_k_dkv=c.block_k_bwd,
        block_q_dkv=c.block_q_bwd, block_k_major_dq=c.block_k_bwd, block_k_dq=c.block_k_bwd, block_q_dq=c.block_q_bwd)
    with tpu_interpret(cfg):
        return fa.flash_attention(q, k, v, causal=cfg.causal, sm_scale=cfg.sm_scale, block_sizes=sizes)


def splash(q, k, v, cfg: AttnConfig):
    """Pallas TPU splash attention, [B, H, S, D]; GQA as an MQA kernel vmapped over KV heads."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk_lib
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    c = SplashConfig.of(cfg, sq, skv)
    fused = bool(c.fused_bwd)  # one backward kernel for dq, dk and dv
    sizes = sk_lib.BlockSizes(block_q=c.block_q, block_kv=c.block_k, block_kv_compute=c.block_kv_compute,
                              block_q_dkv=c.block_q_bwd, block_kv_dkv=c.block_k_bwd, block_kv_dkv_compute=c.block_k_bwd,
                              block_q_dq=None if fused else c.block_q_bwd, block_kv_dq=None if fused else c.block_k_bwd,
                              use_fused_bwd_kernel=fused)
    heads = hq if hkv == hq else hq // hkv
    one = mask_lib.CausalMask((sq, skv)) if cfg.causal else mask_lib.FullMask((sq, skv))
    mask = mask_lib.MultiHeadMask([one] * heads)
    q = q * jnp.asarray(cfg.sm_scale, q.dtype)  # splash takes pre-scaled queries
    with tpu_interpret(cfg):
        if hkv == hq:
            kernel = sk_lib.make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1,
                                            interpret=cfg.interpret)
            return jax.vmap(kernel)(q, k, v)
        kernel = sk_lib.make_splash_mqa(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1,
                                        interpret=cfg.interpret)
        qg = q.reshape(b, hkv, hq // hkv, sq, d)
        out = jax.vmap(jax.vmap(kernel))(qg, k, v)
        return out.reshape(b, hq, sq, d)


def pallas_gpu(q, k, v, cfg: AttnConfig):
    """Pallas Triton flash attention (GPU), [B, S, H, D]."""
    from jax.experimental.pallas.ops.gpu import attention as ga

    c = PallasGpuConfig.of(cfg, q.shape[1], k.shape[1])
    bq, bk = c.block_q, c.block_k
    sizes = ga.BlockSizes(block_q=bq, block_k=bk, block_q_dkv=min(32, bq), block_kv_dkv=min(32, bk),
                          block_q_dq=min(32, bq), block_kv_dq=min(32, bk))
    return ga.mha(q, k, v, None, sm_scale=cfg.sm_scale, causal=cfg.causal, block_sizes=sizes,
                  interpret=cfg.interpret)


def get(name: str) -> AttentionImplRecord:
    """A built-in as its kernel record declares it (impls/kernels/: its code here, its layout and rules), or a
    user impl (import path / entry point), imported now."""
    if catalog.is_user(name):
        return user(name)
    return catalog.attention_record("jax", name, "JAX attention")


@functools.lru_cache(maxsize=None)
def user(name: str) -> AttentionImplRecord:
    """A user impl as a record of the same contract: fn(q, k, v, cfg) and its optional attributes
    (docs/kernels.md). Raises user_impl.ImplLoadError naming the path and what is wrong."""
    path, obj = user_impl.load(name)
    fn = user_impl.check_callable(path, obj, ("q", "k", "v", "cfg"))
    return AttentionImplRecord(name, fn=fn, unsupported=no_rule, **user_impl.attention_parts(path, obj))


def to_layout(x, layout: str):
    """[B, S, H, D] -> the impl's layout (and back: the transpose is its own inverse)."""
    return x if layout == "bshd" else jnp.swapaxes(x, 1, 2)


def attend(q, k, v, impl: str, cfg: AttnConfig):
    """Attention for models: [B,S,H,D] in and out, whatever layout the impl wants inside."""
    im = get(impl)
    out = im.fn(to_layout(q, im.layout), to_layout(k, im.layout), to_layout(v, im.layout), cfg)
    return to_layout(out, im.layout)


def reference(q, k, v, causal: bool, sm_scale: float, q_offset=0):
    """float32 attention at HIGHEST matmul precision; q_offset places a query chunk in the sequence."""
    q, k, v = (x.astype(jnp.float32) for x in (q, k, v))
    b, sq, hq, d = q.shape
    hkv, sk = k.shape[2], k.shape[1]
    qg = q.reshape(b, sq, hkv, hq // hkv, d)
    hi = jax.lax.Precision.HIGHEST
    logits = jnp.einsum("bqhgd,bkhd->bhgqk", qg, k, precision=hi) * sm_scale
    if causal:
        rows = jnp.arange(sq)[:, None] + q_offset
        logits = jnp.where(jnp.arange(sk)[None, :] <= rows, logits, -jnp.inf)
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.einsum("bhgqk,bkhd->bqhgd", probs, v, precision=hi).reshape(b, sq, hq, d)


def reference_outputs(q, k, v, do, causal: bool, sm_scale: float, max_score_bytes: int = REF_MAX_SCORE_BYTES):
    """Reference out (and dq, dk, dv when do is given) in float32, chunked over queries so the score
    matrix never exceeds ``max_score_bytes`` (workloads.attention.reference_chunk: the chunking rule every
    backend shares; numpy_reference is the math). One compiled program per shape: the chunks are a loop
    inside it (on the v5e, slicing them eagerly compiled a program per chunk and the reference took
    4.5-9.3 s a case)."""
    b, sq, hq, _ = q.shape
    rows = reference_chunk(b, hq, sq, k.shape[1], do is not None, max_score_bytes)
    chunk = max(c for c in range(1, rows + 1) if sq % c == 0)  # a divisor of S: every chunk one shape
    return tuple(_reference_loop(q, k, v, do, causal=causal, sm_scale=sm_scale, chunk=chunk))


@functools.partial(jax.jit, static_argnames=("causal", "sm_scale", "chunk"))
def _reference_loop(q, k, v, do, *, causal: bool, sm_scale: float, chunk: int):
    q, k, v = (x.astype(jnp.float32) for x in (q, k, v))
    steps = q.shape[1] // chunk
    take = lambda x, i: jax.lax.dynamic_slice_in_dim(x, i * chunk, chunk, axis=1)  # noqa: E731
    put = lambda acc, x, i: jax.lax.dynamic_update_slice_in_dim(acc, x, i * chunk, axis=1)  # noqa: E731
    if do is None:
        def fwd(i, out):
            return put(out, reference(take(q, i), k, v, causal, sm_scale, i * chunk), i)

        return [jax.lax.fori_loop(0, steps, fwd, jnp.zeros_like(q))]
    do = do.astype(jnp.float32)

    def fwd_bwd(i, acc):
        out, dq, dk, dv = acc
        o, vjp = jax.vjp(lambda qc, kk, vv: reference(qc, kk, vv, causal, sm_scale, i * chunk), take(q, i), k, v)
        dqc, dkc, dvc = vjp(take(do, i))
        return put(out, o, i), put(dq, dqc, i), dk + dkc, dv + dvc

    return list(jax.lax.fori_loop(0, steps, fwd_bwd, (jnp.zeros_like(q), jnp.zeros_like(q), jnp.zeros_like(k),
                                                       jnp.zeros_like(v))))
