"""Analytic FLOP and byte counts: the one place for every formula (see README: FLOP conventions).

A multiply-add counts as 2 FLOPs. Softmax, masking and scaling are not counted (as in MaxText and PaLM).
"""

from __future__ import annotations

from typing import Protocol, Sequence

from xlabench.units import TERA


class ModelShape(Protocol):
    """What the train formulas read of a model (workloads.model_presets.ModelConfig has it): flops.py
    stays on the lowest floors, importing nothing of xlabench but its units."""

    @property
    def d_model(self) -> int: ...
    @property
    def num_heads(self) -> int: ...
    @property
    def num_kv_heads(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def d_ff(self) -> int: ...
    @property
    def num_layers(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def glu(self) -> bool: ...


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


def attention_io_bytes(batch: int, num_heads: int, num_kv_heads: int, seq_len: int, kv_seq_len: int,
                       head_dim: int, itemsize: int, mode: str) -> float:
    """HBM bytes an attention that never materialises its logits must move: read Q, K, V, write O
    (fwd_bwd: also read O, dO and the softmax statistics, write dQ, dK, dV). A flash kernel's traffic
    is this (plus K/V re-reads per query block), so its intensity grows with the sequence."""
    q = batch * num_heads * seq_len * head_dim * itemsize
    kv = 2 * batch * num_kv_heads * kv_seq_len * head_dim * itemsize
    fwd = 2 * q + kv  # Q in, O out, K and V in
    return float(fwd if mode != "fwd_bwd" else fwd + 3 * q + 2 * kv + 4 * batch * num_heads * seq_len)


def attention_logits_bytes(batch: int, num_heads: int, seq_len: int, kv_seq_len: int, mode: str,
                           itemsize: int = 4) -> float:
    """Extra HBM bytes of a naive attention that writes its [B, H, Sq, Sk] logits and reads them back
    (float32 softmax): the S x S term that makes its intensity fall with the sequence. fwd_bwd reads the
    probabilities again and writes and reads their gradient."""
    one = batch * num_heads * seq_len * kv_seq_len * itemsize
    return float(2 * one if mode != "fwd_bwd" else 6 * one)


def paged_decode_flops(lengths: Sequence[int], q_tokens: int, num_heads: int, head_dim: int) -> float:
    """QK^T and PV over a paged cache: 4 * Hq * D * (keys seen, summed over the query tokens).

    The q new tokens of a sequence of length L are its last q positions, causal: they see
    L - q + 1, ..., L keys, i.e. q * L - q * (q - 1) / 2 in all (= sum(L_i) for decode, q = 1).
    """
    q = q_tokens
    keys = sum(q * int(n) - q * (q - 1) / 2 for n in lengths)
    return 4.0 * num_heads * head_dim * keys


def paged_decode_bytes(lengths: Sequence[int], page_size: int, num_kv_heads: int, num_heads: int,
                       head_dim: int, itemsize: int, q_tokens: int, pages_per_sequence: int,
                       index_itemsize: int = 4) -> float:
    """Bytes a paged decode step must move: the whole K and V pages that hold each context
    (2 * sum(ceil(L_i / page) * page) * Hkv * D * itemsize), plus q and out (B * q * Hq * D * itemsize
    each), plus the int32 page table (B * pages_per_sequence) and lengths (B).

    The same count for every impl (like model FLOPs), so MBU compares impls: an impl that reads more
    (naive gathers the whole page table width) shows a lower MBU, not a higher byte count.
    """
    batch = len(lengths)
    kv_tokens = sum(-(-int(n) // page_size) * page_size for n in lengths)
    kv = 2 * kv_tokens * num_kv_heads * head_dim * itemsize
    q_and_out = 2 * batch * q_tokens * num_heads * head_dim * itemsize
    table = batch * (pages_per_sequence + 1) * index_itemsize
    return float(kv + q_and_out + table)


# Training step (forward + backward) = 3x forward: the backward pass costs two matmuls per forward
# matmul (gradient of the activations and of the weights).
TRAIN_FACTOR = 3.0


def train_matmul_flops_per_token(cfg: ModelShape) -> float:
    """Forward FLOPs per token of the weight matmuls: QKV, attention output, MLP, unembedding.

    2 FLOPs per weight per token; biases, norms, the embedding lookup and the optimizer are not counted.
    """
    d, hq, hkv, dh, f = cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.d_ff
    qkv = d * (hq + 2 * hkv) * dh
    out = hq * dh * d
    mlp = (3 if cfg.glu else 2) * d * f
    return 2.0 * (cfg.num_layers * (qkv + out + mlp) + d * cfg.vocab_size)


def train_step_flops(cfg: ModelShape, global_batch: int, seq_len: int, causal: bool = True) -> float:
    """Model FLOPs of one training step, all devices (MaxText ``calculate_tflops_training_per_device``
    times the device count): 3 x tokens x (weight matmuls + attention ``4 * S_eff * Hq * D`` per layer).

    ``causal`` uses the exact mean visible keys ``(S + 1) / 2`` (MaxText rounds it to ``S / 2``);
    ``causal=False`` counts the full ``S x S`` score matrix (what an unmasked-then-masked naive kernel
    computes, and PaLM's convention).
    """
    s_eff = effective_kv(seq_len, seq_len, causal)
    attn = 4.0 * s_eff * cfg.num_heads * cfg.head_dim * cfg.num_layers
    return TRAIN_FACTOR * global_batch * seq_len * (train_matmul_flops_per_token(cfg) + attn)


def train_step_flops_palm(cfg: ModelShape, global_batch: int, seq_len: int, matmul_params: int) -> float:
    """PaLM (Chowdhery et al. 2022, appendix B): ``(6N + 12 L H Q T)`` per token, times the tokens.

    N = ``matmul_params``: the parameters that take part in a matmul (the model counts them:
    ``model_presets.matmul_param_count``); the attention term is non-causal (full ``T x T``), so it
    exceeds ``train_step_flops`` by the masked half.
    """
    per_token = 6.0 * matmul_params + 12.0 * cfg.num_layers * cfg.num_heads * cfg.head_dim * seq_len
    return global_batch * seq_len * per_token


def mfu(flops: float, seconds: float, devices: int, peak_tflops: float) -> float:
    """Model FLOPs utilisation: achieved FLOP/s over the peak of all devices used."""
    return flops / (seconds * devices * peak_tflops * TERA)
