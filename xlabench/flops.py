"""Analytic FLOP and byte counts: the one place for every formula (see README: FLOP conventions).

A multiply-add counts as 2 FLOPs. Softmax, masking and scaling are not counted (as in MaxText and PaLM).
"""

from __future__ import annotations


def causal_visible_keys(seq_len: int, kv_seq_len: int) -> float:
    """Mean number of keys a query sees under a top-left-aligned causal mask (query i sees keys 0..i).

    Exact, diagonal included: for Sq == Sk it is (S + 1) / 2 (MaxText rounds this to S / 2).
    """
    sq, sk = seq_len, kv_seq_len
    # queries 0..min(sq,sk)-1 see i+1 keys; queries beyond sk see all sk keys.
    m = min(sq, sk)
    total = m * (m + 1) / 2 + max(0, sq - sk) * sk
    return total / sq


def effective_kv(seq_len: int, kv_seq_len: int, causal: bool) -> float:
    return causal_visible_keys(seq_len, kv_seq_len) if causal else float(kv_seq_len)


def attention_fwd_flops(batch: int, num_heads: int, seq_len: int, kv_seq_len: int, head_dim: int,
                        causal: bool) -> float:
    """QK^T and PV: 2 matmuls x 2 FLOPs per MAC = 4 * B * Hq * Sq * Sk_eff * D."""
    return 4.0 * batch * num_heads * seq_len * effective_kv(seq_len, kv_seq_len, causal) * head_dim


# Backward as multiples of forward. Model FLOPs: dQ, dK, dV, dP are 4 matmuls = 2x forward.
# Kernel FLOPs: flash kernels also recompute QK^T (one more matmul): 2.5x forward.
BWD_MODEL_FACTOR = 2.0
BWD_KERNEL_FACTOR = 2.5


def attention_model_flops(batch: int, num_heads: int, seq_len: int, kv_seq_len: int, head_dim: int,
                          causal: bool, mode: str) -> float:
    fwd = attention_fwd_flops(batch, num_heads, seq_len, kv_seq_len, head_dim, causal)
    return fwd * (1.0 + BWD_MODEL_FACTOR) if mode == "fwd_bwd" else fwd


def attention_kernel_flops(batch: int, num_heads: int, seq_len: int, kv_seq_len: int, head_dim: int,
                           causal: bool, mode: str) -> float:
    fwd = attention_fwd_flops(batch, num_heads, seq_len, kv_seq_len, head_dim, causal)
    return fwd * (1.0 + BWD_KERNEL_FACTOR) if mode == "fwd_bwd" else fwd


def mfu(flops: float, seconds: float, devices: int, peak_tflops: float) -> float:
    """Model FLOPs utilisation: achieved FLOP/s over the peak of all devices used."""
    return flops / (seconds * devices * peak_tflops * 1e12)
