"""JAX paged-attention kernels' code, named by their kernel records (impls/kernels/: ``code``, ``prepare``).

Every kernel takes the shared inputs (q [B, nq, Hq, D]; k/v pages [Hkv, total_pages, page_size, D];
lengths i32[B]; page table i32[B, pages_per_sequence]), rearranged into its native layout by its record's
``prepare`` (outside the timed region), and returns the output as [B, nq, Hq, D].
"""

from __future__ import annotations

import contextlib
import types
from typing import Iterator, Optional

import jax
import jax.numpy as jnp

from xlabench.backends.jax.attention_impls import tpu_interpret
from xlabench import impls as catalog
from xlabench.impls import PagedImplRecord
from xlabench.impls.kernels.paged import PagedKernelConfig
from xlabench.impls.kernels.ragged_paged import RaggedPagedConfig
from xlabench.workloads.paged import PagedConfig, PagedParams


# ------------------------------------------------------------------------------------------- naive


def naive(q, k_pages, v_pages, lengths, table, cfg: PagedConfig):
    """Gather every sequence's page-table row into dense K/V (the whole table width), mask by length
    (and causally among the new tokens), plain jnp attention in float32 logits; XLA fuses the rest."""
    b, nq, hq, d = q.shape
    hkv, _, page, _ = k_pages.shape
    span = table.shape[1] * page

    def dense(pages):  # [Hkv, T, P, D] -> [B, Hkv, pages_per_sequence * P, D]
        return jnp.moveaxis(pages[:, table], 0, 1).reshape(b, hkv, span, d)

    k, v = dense(k_pages), dense(v_pages)
    qg = q.reshape(b, nq, hkv, hq // hkv, d)
    logits = jnp.einsum("bqhgd,bhkd->bhgqk", qg, k, preferred_element_type=jnp.float32) * cfg.sm_scale
    last = lengths[:, None] - nq + jnp.arange(nq)[None, :]  # [B, nq]: last key each query sees
    visible = jnp.arange(span)[None, None, :] <= last[:, :, None]  # [B, nq, S]
    logits = jnp.where(visible[:, None, None], logits, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    out = jnp.einsum("bhgqk,bhkd->bqhgd", probs, v, preferred_element_type=jnp.float32)
    return out.reshape(b, nq, hq, d).astype(q.dtype)


# ------------------------------------------------------------------------------- Pallas TPU paged


def _scaled(q, cfg: PagedConfig):
    """The paged kernels take pre-scaled queries (they compute q.k without a softmax scale)."""
    return (q.astype(jnp.float32) * cfg.sm_scale).astype(q.dtype)


def paged(q, k_pages, v_pages, lengths, table, cfg: PagedConfig):
    from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention

    with tpu_interpret(cfg):
        out = paged_attention(_scaled(q[:, 0], cfg), k_pages, v_pages, lengths, table,
                              pages_per_compute_block=PagedKernelConfig.of(cfg).pages_per_compute_block,
                              megacore_mode=cfg.megacore_mode)
    return out[:, None]


# ------------------------------------------------------------------------ Pallas TPU ragged paged


def ragged_prepare(q, k_pages, v_pages, lengths, table, cfg: PagedConfig) -> tuple:
    """q -> [B*nq, Hq, D]; K/V -> one cache [T, P, 2*Hkv, D] with K heads at even, V at odd slots."""
    from jax.experimental.pallas.ops.tpu import ragged_paged_attention as rpa

    b, nq, hq, d = q.shape
    kv = jnp.stack([k_pages, v_pages], axis=1)  # [Hkv, 2, T, P, D]
    hkv, _, t, page, _ = kv.shape
    kv = jnp.transpose(kv, (2, 3, 0, 1, 4)).reshape(t, page, 2 * hkv, d)
    cu_q_lens = jnp.arange(b + 1, dtype=jnp.int32) * nq
    num_seqs = jnp.array([b], jnp.int32)
    args = (q.reshape(b * nq, hq, d), kv, lengths, table, cu_q_lens, num_seqs)
    if not isinstance(lengths, jax.core.Tracer):  # compile-only runs trace this without data
        rpa.dynamic_validate_inputs(*args, sm_scale=cfg.sm_scale, **_ragged_blocks(args, cfg))
    return args


@contextlib.contextmanager
def _tuned_for(device_kind: Optional[str]) -> Iterator[None]:
    """The kernel's tuned-block table keys on ``jax.devices()[0].device_kind``: a compile-only run (whose
    jax.devices() is this host's CPU) looks it up for the target's chip instead, for the lookup only."""
    if device_kind is None:
        yield
        return
    real = jax.devices
    jax.devices = lambda *args, **kwargs: [types.SimpleNamespace(device_kind=device_kind)]
    try:
        yield
    finally:
        jax.devices = real


def _ragged_blocks(args: tuple, cfg: PagedConfig) -> dict[str, int]:
    """KV pages per block and queries per block from the kernel's config (RaggedPagedConfig:
    the case's or the tuner's); queries per block unset: from the kernel's tuned table on TPU (it needs a
    TPU to look up), else at most 32."""
    from jax.experimental.pallas.ops.tpu import ragged_paged_attention as rpa
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa_kernel

    c = RaggedPagedConfig.of(cfg)
    q, kv, _, table = args[:4]
    tokens = q.shape[0]
    bq = min(tokens, 32)
    if cfg.platform == "tpu":
        hq_blk, hkv2_blk = rpa_kernel.get_min_heads_per_blk(q.shape[1], kv.shape[2], q.dtype, kv.dtype)
        with _tuned_for(cfg.device_kind):
            _, bq = rpa.get_tuned_block_sizes(q.dtype, kv.dtype, hq_blk, hkv2_blk // 2, q.shape[2], kv.shape[1],
                                              tokens, table.shape[1])
    return {"num_kv_pages_per_block": c.pages_per_compute_block, "num_queries_per_block": c.queries_per_block or bq}


def ragged_paged(q, kv, lengths, table, cu_q_lens, num_seqs, cfg: PagedConfig):
    from jax.experimental.pallas.ops.tpu import ragged_paged_attention as rpa

    b, nq = table.shape[0], q.shape[0] // table.shape[0]
    with tpu_interpret(cfg):
        out = rpa.ragged_paged_attention(q, kv, lengths, table, cu_q_lens, num_seqs, sm_scale=cfg.sm_scale,
                                         **_ragged_blocks((q, kv, lengths, table), cfg))
    return out.reshape(b, nq, q.shape[1], q.shape[2])


def ragged_heads_unsupported(p: PagedParams, platform: str, device_kind: str) -> Optional[str]:
    """The kernel's own tiling rule for the combined K/V heads (it needs the kernel: the worker's, after its
    record's rule)."""
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa_kernel

    try:
        rpa_kernel.get_min_heads_per_blk(p.num_heads, 2 * p.kv_heads, jnp.dtype(p.dtype), jnp.dtype(p.dtype))
    except ValueError as e:
        return f"ragged_paged_attention: {e} (2 * num_kv_heads = {2 * p.kv_heads} at {p.dtype})"
    return None


# ------------------------------------------------------------------------------ Pallas GPU paged


def gpu_k_splits(pages_per_sequence: int, pages_per_compute_block: int, most: int = 16) -> int:
    """Partitions of the page table the GPU kernel reduces over (its k_splits, default 16): the largest
    count <= ``most`` that leaves each partition a whole number of compute blocks."""
    blocks = pages_per_sequence // pages_per_compute_block
    return max(k for k in range(1, most + 1) if blocks % k == 0)


def paged_gpu(q, k_pages, v_pages, lengths, table, cfg: PagedConfig):
    from jax.experimental.pallas.ops.gpu import paged_attention as gpa

    pages = PagedKernelConfig.of(cfg).pages_per_compute_block
    splits = gpu_k_splits(table.shape[1], pages)
    out = gpa.paged_attention(_scaled(q[:, 0], cfg), k_pages, v_pages, table, lengths,
                              pages_per_compute_block=pages, k_splits=splits,
                              interpret=cfg.interpret)
    return out[:, None]


def get(name: str) -> PagedImplRecord:
    """A paged kernel as its record declares it (impls/kernels/), its code imported now."""
    return catalog.paged_record("jax", name, "JAX paged-attention")
