"""torch_xla paged-attention kernels' code, named by their kernel records (impls/kernels/: ``code``,
``prepare``; shared inputs and layout as the JAX ones).

Every kernel takes q [B, nq, Hq, D]; k/v pages [Hkv, total_pages, page_size, D]; lengths i32[B]; page
table i32[B, pages_per_sequence]; rearranges them in ``prepare`` (outside the timed region) and
returns [B, nq, Hq, D].

On TPU ``paged``, ``multi_queries_paged`` and ``ragged_paged`` are torch_xla's custom_kernel ops (TPU
custom calls). On CPU: ``paged`` is the JAX backend's Pallas kernel, interpreted, through ``call_jax``;
``multi_queries_paged`` and ``ragged_paged`` are torch_xla's ``use_kernel=False`` reference paths (plain
torch ops, one sequence at a time): their Pallas kernels do not run in JAX's CPU interpreter, and the
rows say so.
"""

from __future__ import annotations

import torch

from xlabench.backends.torch_shared.attention import paged_naive
from xlabench.backends.torch_xla import jax_kernels
from xlabench import impls as catalog
from xlabench.impls import PagedImplRecord
from xlabench.impls.kernels import paged as paged_kernel
from xlabench.workloads.paged import PagedConfig


def _scaled(q: torch.Tensor, cfg: PagedConfig) -> torch.Tensor:
    """The paged kernels take pre-scaled queries (q.k without a softmax scale)."""
    return (q.float() * cfg.sm_scale).to(q.dtype)


# ------------------------------------------------------------------------------------------- naive


def naive(q, k_pages, v_pages, lengths, table, cfg: PagedConfig):
    """Plain torch on the XLA device (torch_shared.attention.paged_naive); XLA fuses it."""
    return paged_naive(q, k_pages, v_pages, lengths, table, cfg.sm_scale)


# ------------------------------------------------------------------------------------------- paged


def paged(q, k_pages, v_pages, lengths, table, cfg: PagedConfig):
    """TPU: custom_kernel.paged_attention; CPU: the JAX backend's Pallas paged kernel, interpreted."""
    if cfg.interpret:
        return jax_kernels.forward(jax_kernels.PAGED, paged_kernel.NAME, cfg, q, k_pages, v_pages, lengths, table)
    from torch_xla.experimental.custom_kernel import paged_attention

    out = paged_attention(_scaled(q[:, 0], cfg), k_pages, v_pages, lengths, table,
                          pages_per_compute_block=cfg.pages_per_compute_block, megacore_mode=cfg.megacore_mode)
    return out[:, None]


# ----------------------------------------------------------------------------- multi-queries paged


def multi_queries_paged(q, k_pages, v_pages, lengths, table, effective_q_lens, cfg: PagedConfig):
    """custom_kernel.multi_queries_paged_attention: q [B, nq, Hq, D], the new tokens causal among
    themselves (effective_q_lens = nq). CPU: its use_kernel=False reference path."""
    from torch_xla.experimental.custom_kernel import multi_queries_paged_attention

    return multi_queries_paged_attention(
        _scaled(q, cfg), k_pages, v_pages, lengths, table, effective_q_lens,
        num_kv_pages_per_compute_block=cfg.pages_per_compute_block, num_queries_per_compute_block=q.shape[1],
        use_kernel=cfg.platform == "tpu")


def mq_prepare(q, k_pages, v_pages, lengths, table, cfg: PagedConfig) -> tuple:
    effective = torch.full((q.shape[0],), q.shape[1], dtype=torch.int32, device=q.device)
    return q, k_pages, v_pages, lengths, table, effective


# ------------------------------------------------------------------------------------ ragged paged


def ragged_prepare(q, k_pages, v_pages, lengths, table, cfg: PagedConfig) -> tuple:
    """q -> [B*nq, Hq, D]; K/V -> one cache [T, P, 2*Hkv, D] with K heads at even, V at odd slots."""
    b, nq, hq, d = q.shape
    kv = torch.stack([k_pages, v_pages], dim=1)  # [Hkv, 2, T, P, D]
    hkv, _, t, page, _ = kv.shape
    kv = kv.permute(2, 3, 0, 1, 4).reshape(t, page, 2 * hkv, d).contiguous()
    cu_q_lens = (torch.arange(b + 1, dtype=torch.int32) * nq).to(q.device)
    num_seqs = torch.tensor([b], dtype=torch.int32).to(q.device)
    return q.reshape(b * nq, hq, d), kv, lengths, table, cu_q_lens, num_seqs


def ragged_paged(q, kv, lengths, table, cu_q_lens, num_seqs, cfg: PagedConfig):
    """custom_kernel.ragged_paged_attention (its tuned query blocks); CPU: its use_kernel=False path."""
    from torch_xla.experimental.custom_kernel import ragged_paged_attention

    b = table.shape[0]
    kernel = cfg.platform == "tpu"
    out = ragged_paged_attention(q, kv, lengths, table, cu_q_lens, num_seqs, sm_scale=cfg.sm_scale,
                                 use_kernel=kernel,
                                 num_kv_pages_per_block=cfg.pages_per_compute_block if kernel else None)
    return out.reshape(b, q.shape[0] // b, q.shape[1], q.shape[2])


def get(name: str) -> PagedImplRecord:
    """A paged kernel as its record declares it (impls/kernels/), its code imported now."""
    return catalog.paged_record("torch_xla", name, "torch_xla paged-attention")
