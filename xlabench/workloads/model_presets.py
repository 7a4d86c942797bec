"""Decoder-only transformer shapes: the named presets and the parameter count. Framework-free.

One config describes both architectures the train workload runs:

* ``gpt2``:  learned positions, LayerNorm (scale + bias), GELU MLP, biases on every linear layer,
  output projection tied to the token embedding.
* ``llama``: RoPE, RMSNorm (scale only), SwiGLU MLP (gate, up, down), no biases, grouped-query
  attention (``num_kv_heads`` <= ``num_heads``), untied output projection.

The backends build their models from this config, and ``xlabench.flops`` counts FLOPs from it, so a
preset is the one place a model's shape is written down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

Arch = Literal["gpt2", "llama"]
ARCHS: tuple[str, ...] = ("gpt2", "llama")

# Embedding tables are padded to a multiple of this many rows so the vocabulary dimension splits
# evenly over any tensor-parallel degree used here (Megatron and nanoGPT pad the same way). The pad
# rows are compute the step does but the model does not need: FLOP counts use the true vocabulary.
VOCAB_PAD = 128


@dataclass(frozen=True)
class ModelConfig:
    arch: Arch
    vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    d_ff: int
    max_seq_len: int  # gpt2: rows of the learned position table; llama: the longest sequence allowed
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def tied_embeddings(self) -> bool:
        return self.arch == "gpt2"

    @property
    def glu(self) -> bool:
        """SwiGLU MLP: two input projections (gate and up) instead of one."""
        return self.arch == "llama"

    @property
    def biases(self) -> bool:
        return self.arch == "gpt2"

    @property
    def padded_vocab(self) -> int:
        return math.ceil(self.vocab_size / VOCAB_PAD) * VOCAB_PAD

    def replace(self, **changes: object) -> "ModelConfig":
        return replace(self, **changes)


def param_counts(cfg: ModelConfig, vocab: int | None = None) -> dict[str, int]:
    """Parameters by group, as the published checkpoints count them (true vocabulary by default).

    ``embedding``: token table (also the output projection when tied); ``position``: learned position
    table (gpt2); ``unembedding``: separate output projection (llama); ``layers``: all decoder layers;
    ``final_norm``: the last norm.
    """
    v = cfg.vocab_size if vocab is None else vocab
    d, hq, hkv, dh, f = cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.d_ff
    norm = 2 * d if cfg.arch == "gpt2" else d  # LayerNorm scale+bias vs RMSNorm scale
    attn = d * (hq + 2 * hkv) * dh + hq * dh * d
    mlp = (3 if cfg.glu else 2) * d * f
    if cfg.biases:
        attn += (hq + 2 * hkv) * dh + d
        mlp += f + d
    return {
        "embedding": v * d,
        "position": cfg.max_seq_len * d if cfg.arch == "gpt2" else 0,
        "unembedding": 0 if cfg.tied_embeddings else d * v,
        "layers": cfg.num_layers * (attn + mlp + 2 * norm),
        "final_norm": norm,
    }


def param_count(cfg: ModelConfig, vocab: int | None = None) -> int:
    """Total parameters N (true vocabulary unless ``vocab`` is given, e.g. ``cfg.padded_vocab``)."""
    return sum(param_counts(cfg, vocab).values())


def matmul_param_count(cfg: ModelConfig) -> int:
    """Parameters that take part in a matmul per token: the N of PaLM's ``6N`` (see flops.py).

    Excludes the position table and, when untied, the input embedding (both are table lookups,
    no FLOPs); a tied embedding counts once, as the output projection.
    """
    c = param_counts(cfg)
    return c["layers"] + c["final_norm"] + (c["embedding"] if cfg.tied_embeddings else c["unembedding"])


def _gpt2(vocab: int, d: int, layers: int, heads: int, max_seq: int = 1024) -> ModelConfig:
    return ModelConfig("gpt2", vocab, d, layers, heads, heads, d // heads, 4 * d, max_seq)


def _llama(vocab: int, d: int, layers: int, heads: int, kv_heads: int, d_ff: int, max_seq: int,
           theta: float = 10000.0) -> ModelConfig:
    return ModelConfig("llama", vocab, d, layers, heads, kv_heads, d // heads, d_ff, max_seq, theta)


# Sources: GPT-2 small: OpenAI gpt-2 hparams (n_vocab 50257, n_ctx 1024, n_embd 768, n_head 12,
# n_layer 12); GPT-2 medium: the same with n_embd 1024, n_head 16, n_layer 24 (HF gpt2-medium); LLaMA 2 7B: Touvron et al. 2023 / HF config (4096, 32 layers, 32 heads, ffn 11008,
# vocab 32000); LLaMA 3 8B: Meta HF config (4096, 32 layers, 32 heads, 8 KV heads, ffn 14336,
# vocab 128256, rope_theta 500000). The 2B models are xlabench's own shapes at the size of the
# PyTorch/XLA TPU v4-8 study (it names the sizes, not every dimension): GPT-2 widened to 2560 x 24
# layers, and LLaMA 2 at 2560 x 24 layers with LLaMA's ffn rule (8/3 d rounded up to 256). GPT-2 large
# and XL: the same hparams with n_embd 1280, n_head 20, n_layer 36 and 1600, 25, 48 (HF gpt2-large, gpt2-xl).
# llama-1b, the LLaMA shape that trains on one 16 GiB chip (v5e): Llama 3.2 1B's width, depth and GQA (Meta
# HF config: hidden 2048, 16 layers, 8 KV heads) with 16 query heads of 128 (LLaMA 2 7B's head width, the
# v5e MXU's 128; Llama 3.2 1B has 32 of 64), LLaMA 2's ffn rule (8/3 d rounded up to 256: 5632) and its
# 32000-token vocabulary (the seed study's LLaMA 2): 0.89B parameters.
PRESETS: dict[str, ModelConfig] = {
    "gpt2-124m": _gpt2(50257, 768, 12, 12),
    "gpt2-355m": _gpt2(50257, 1024, 24, 16),
    "gpt2-774m": _gpt2(50257, 1280, 36, 20),
    "gpt2-1.5b": _gpt2(50257, 1600, 48, 25),
    "gpt2-2b": _gpt2(50257, 2560, 24, 20),
    "llama-1b": _llama(32000, 2048, 16, 16, 8, 5632, 4096),
    "llama2-2b": _llama(32000, 2560, 24, 20, 20, 6912, 4096),
    "llama2-7b": _llama(32000, 4096, 32, 32, 32, 11008, 4096),
    "llama3-8b": _llama(128256, 4096, 32, 32, 8, 14336, 8192, theta=500000.0),
    # CPU presets: a few layers of each architecture, small enough to train in seconds on 2 cores
    # and divisible enough for every sharding mode on 8 virtual devices.
    "gpt2-tiny": _gpt2(512, 128, 2, 4, max_seq=256),
    "llama-tiny": _llama(512, 128, 2, 4, 2, 384, 256),
}


def preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown model preset {name!r}; expected one of: {', '.join(PRESETS)} "
                         f"(or 'custom' with arch and every dimension)") from None
