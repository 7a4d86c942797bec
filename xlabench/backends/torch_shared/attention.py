"""Attention written with plain torch ops, for every torch backend: the naive kernel, the float32 reference
and the layout change. [B, S, H, D] unless said otherwise."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from xlabench.workloads.attention import REF_MAX_SCORE_BYTES, chunked_reference


def grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float,
                      q_offset: int = 0) -> torch.Tensor:
    """softmax(QK^T * scale) V, [B,S,H,D]; GQA by grouping query heads (no K/V copy); float32 logits.

    Causal is top-left aligned: query i (counted from ``q_offset``) sees keys 0..i.
    """
    b, sq, hq, d = q.shape
    hkv, sk = k.shape[2], k.shape[1]
    qg = q.reshape(b, sq, hkv, hq // hkv, d)
    logits = torch.einsum("bqhgd,bkhd->bhgqk", qg, k).float() * sm_scale
    if causal:
        rows = torch.arange(sq, device=q.device)[:, None] + q_offset
        visible = torch.arange(sk, device=q.device)[None, :] <= rows
        logits = logits.masked_fill(~visible, float("-inf"))
    probs = torch.softmax(logits, dim=-1).to(v.dtype)
    out = torch.einsum("bhgqk,bkhd->bqhgd", probs, v)
    return out.reshape(b, sq, hq, d).to(q.dtype)


def to_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """[B, S, H, D] -> the impl's layout (and back: the transpose is its own inverse)."""
    return x if layout == "bshd" else x.transpose(1, 2)


def paged_naive(q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor, lengths: torch.Tensor,
                table: torch.Tensor, sm_scale: float) -> torch.Tensor:
    """Gather every sequence's page-table row into dense K/V (the whole table width), mask by length
    (and causally among the new tokens), plain torch attention in float32 logits.

    q [B, nq, Hq, D]; k/v pages [Hkv, total_pages, page_size, D]; lengths i32[B]; table i32[B, pages]."""
    b, nq, hq, d = q.shape
    hkv, _, page, _ = k_pages.shape
    span = table.shape[1] * page

    def dense(pages):  # [Hkv, T, P, D] -> [B, Hkv, pages_per_sequence * P, D]
        return pages[:, table].transpose(0, 1).reshape(b, hkv, span, d)

    k, v = dense(k_pages), dense(v_pages)
    qg = q.reshape(b, nq, hkv, hq // hkv, d)
    logits = torch.einsum("bqhgd,bhkd->bhgqk", qg, k).float() * sm_scale
    last = lengths[:, None] - nq + torch.arange(nq, device=q.device)[None, :]  # [B, nq]: last key seen
    visible = torch.arange(span, device=q.device)[None, None, :] <= last[:, :, None]  # [B, nq, S]
    logits = logits.masked_fill(~visible[:, None, None], float("-inf"))
    probs = torch.softmax(logits, dim=-1).to(v.dtype)
    out = torch.einsum("bhgqk,bhkd->bqhgd", probs, v)
    return out.reshape(b, nq, hq, d).to(q.dtype)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", dtype=torch.float32).numpy()


def reference_outputs(host: dict[str, np.ndarray], p: Any, sm_scale: float, device: torch.device,
                      max_score_bytes: int = REF_MAX_SCORE_BYTES) -> list[np.ndarray]:
    """float32 out (and dq, dk, dv for fwd_bwd) of case ``p`` (AttentionParams) from the numpy inputs on
    ``device``, chunked over queries (workloads.attention.chunked_reference); each chunk's outputs come back
    to the host at once. The caller sets the device's float32 matmul precision around it."""
    q, k, v = (torch.from_numpy(host[n]).to(device) for n in ("q", "k", "v"))
    do = torch.from_numpy(host["do"]).to(device) if "do" in host else None
    k.requires_grad_(do is not None)
    v.requires_grad_(do is not None)

    def fwd(qc: torch.Tensor, start: int) -> np.ndarray:
        return to_numpy(grouped_attention(qc, k, v, p.causal, sm_scale, q_offset=start))

    def fwd_bwd(qc: torch.Tensor, doc: torch.Tensor, start: int) -> tuple:
        qc = qc.detach().requires_grad_(True)
        o = grouped_attention(qc, k, v, p.causal, sm_scale, q_offset=start)
        dq, dkc, dvc = torch.autograd.grad(o, (qc, k, v), doc)
        return to_numpy(o), to_numpy(dq), dkc, dvc  # dk, dv: summed on the device over chunks

    res = chunked_reference(q, k, do, fwd, fwd_bwd, lambda xs: np.concatenate(xs, axis=1), max_score_bytes)
    return res[:2] + [to_numpy(g) for g in res[2:]]
