"""A hand-written Pallas attention: one program per (batch, head, query block), online softmax over
key blocks. Simple and correct, deliberately not tuned (no pipelining of K/V, no causal block skipping
beyond the loop bound). Runs in the Pallas interpreter on CPU (``cfg.interpret``) and compiles for TPU
through Mosaic.

The xlabench contract (docs/kernels.md): ``fn(q, k, v, cfg) -> out`` plus optional attributes; this
module does not import xlabench, ``cfg`` is read for ``causal``, ``sm_scale``, ``block_q``, ``block_k``
and ``interpret`` only.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

DEFAULT_BLOCK = 128
NEG_INF = -1e30  # finite: a fully masked row never makes exp(-inf - -inf) = nan


def _blocks(cfg, sq: int, sk: int) -> tuple[int, int]:
    return min(cfg.block_q or DEFAULT_BLOCK, sq), min(cfg.block_k or DEFAULT_BLOCK, sk)


def _kernel(q_ref, k_ref, v_ref, o_ref, *, sm_scale: float, causal: bool, block_q: int, block_k: int,
            kv_len: int):
    """One query block against every (visible) key block; q_ref [bq, D], k_ref/v_ref [Sk, D]."""
    qi = pl.program_id(2)
    q = q_ref[...].astype(jnp.float32) * sm_scale
    d = q.shape[-1]

    def body(j, carry):
        m, denom, acc = carry
        start = pl.multiple_of(j * block_k, block_k)
        k = k_ref[pl.ds(start, block_k), :].astype(jnp.float32)
        v = v_ref[pl.ds(start, block_k), :].astype(jnp.float32)
        s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
        if causal:
            rows = qi * block_q + jax.lax.broadcasted_iota(jnp.int32, (block_q, block_k), 0)
            cols = start + jax.lax.broadcasted_iota(jnp.int32, (block_q, block_k), 1)
            s = jnp.where(cols <= rows, s, NEG_INF)
        m_new = jnp.maximum(m, s.max(axis=-1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m - m_new)
        denom_new = alpha * denom + p.sum(axis=-1, keepdims=True)
        acc_new = alpha * acc + jnp.dot(p, v, preferred_element_type=jnp.float32)
        return m_new, denom_new, acc_new

    n_blocks = kv_len // block_k
    if causal:  # key blocks wholly after this query block are all masked: stop before them
        n_blocks = jnp.minimum(n_blocks, ((qi + 1) * block_q + block_k - 1) // block_k)
    init = (jnp.full((block_q, 1), NEG_INF, jnp.float32), jnp.zeros((block_q, 1), jnp.float32),
            jnp.zeros((block_q, d), jnp.float32))
    _, denom, acc = jax.lax.fori_loop(0, n_blocks, body, init)
    o_ref[...] = (acc / denom).astype(o_ref.dtype)


def _forward(q, k, v, *, sm_scale: float, causal: bool, block_q: int, block_k: int, interpret: bool):
    """q [B, Hq, Sq, D], k/v [B, Hkv, Sk, D] -> [B, Hq, Sq, D]."""
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    group = hq // hkv
    kernel = functools.partial(_kernel, sm_scale=sm_scale, causal=causal, block_q=block_q, block_k=block_k,
                               kv_len=sk)
    return pl.pallas_call(
        kernel,
        grid=(b, hq, sq // block_q),
        in_specs=[
            pl.BlockSpec((pl.squeezed, pl.squeezed, block_q, d), lambda bi, h, i: (bi, h, i, 0)),
            pl.BlockSpec((pl.squeezed, pl.squeezed, sk, d), lambda bi, h, i: (bi, h // group, 0, 0)),
            pl.BlockSpec((pl.squeezed, pl.squeezed, sk, d), lambda bi, h, i: (bi, h // group, 0, 0)),
        ],
        out_specs=pl.BlockSpec((pl.squeezed, pl.squeezed, block_q, d), lambda bi, h, i: (bi, h, i, 0)),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        interpret=interpret,
    )(q, k, v)


def _plain(q, k, v, sm_scale: float, causal: bool):
    """The same attention in plain jnp ([B, H, S, D], float32 math): differentiated for the backward."""
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    qg = q.astype(jnp.float32).reshape(b, hkv, hq // hkv, sq, d)
    s = jnp.einsum("bhgqd,bhkd->bhgqk", qg, k.astype(jnp.float32)) * sm_scale
    if causal:
        s = jnp.where(jnp.arange(sk)[None, :] <= jnp.arange(sq)[:, None], s, NEG_INF)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bhgqk,bhkd->bhgqd", p, v.astype(jnp.float32)).reshape(b, hq, sq, d).astype(q.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6, 7))
def _attention(q, k, v, sm_scale, causal, block_q, block_k, interpret):
    return _forward(q, k, v, sm_scale=sm_scale, causal=causal, block_q=block_q, block_k=block_k,
                    interpret=interpret)


def _attention_fwd(q, k, v, sm_scale, causal, block_q, block_k, interpret):
    return _attention(q, k, v, sm_scale, causal, block_q, block_k, interpret), (q, k, v)


def _attention_bwd(sm_scale, causal, block_q, block_k, interpret, res, do):
    # Untuned on purpose: the backward recomputes plain attention and differentiates it (XLA, not Pallas).
    q, k, v = res
    _, vjp = jax.vjp(lambda q, k, v: _plain(q, k, v, sm_scale, causal), q, k, v)
    return vjp(do)


_attention.defvjp(_attention_fwd, _attention_bwd)


def blocked_attention(q, k, v, cfg):
    """softmax(q k^T * cfg.sm_scale) v, causal if cfg.causal; q [B, Hq, Sq, D], k/v [B, Hkv, Sk, D]."""
    bq, bk = _blocks(cfg, q.shape[2], k.shape[2])
    return _attention(q, k, v, float(cfg.sm_scale), bool(cfg.causal), bq, bk, bool(cfg.interpret))


def _unsupported(params, platform: str):
    """Why a case cannot run (xlabench skips the row with this): written for TPU (Mosaic) and the CPU
    interpreter, not tried on GPU; the blocks must tile both sequences."""
    if platform == "gpu":
        return "my_kernel is written for TPU (Mosaic) and the CPU interpreter; not tried on GPU"
    bq = min(params.block_q or DEFAULT_BLOCK, params.seq_len)
    bk = min(params.block_k or DEFAULT_BLOCK, params.kv_seq_len or params.seq_len)
    if params.seq_len % bq or (params.kv_seq_len or params.seq_len) % bk:
        return f"my_kernel needs seq_len % block_q == 0 and kv_seq_len % block_k == 0 (got {bq}, {bk})"
    return None


# The optional parts of the contract, as attributes of the function.
blocked_attention.layout = "bhsd"  # q, k, v and the output are [B, H, S, D]
blocked_attention.block_params = ("block_q", "block_k")  # a suite's block_q/block_k sweep reaches it
blocked_attention.unsupported = _unsupported
blocked_attention.framework = "jax"  # on torch_xla: spliced into the graph by call_jax
