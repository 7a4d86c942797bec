"""The train model's parameters as plain data, shared by every backend: each parameter's shape,
logical axes and initialiser (``layout``), the initialiser's scale, and the logical-axis -> mesh-axis
rules of each sharding mode. Framework-free: the JAX backend builds arrays and NamedShardings from
these, the torch_xla backend nn.Parameters and mark_sharding specs, so both train the same model and
shard it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional

from xlabench.workloads.model_presets import ModelConfig

# Logical axes of parameter dimensions; RULES maps them to mesh axes per sharding mode.
VOCAB, EMBED, HEADS, MLP = "vocab", "embed", "heads", "mlp"
INIT_STD = 0.02  # GPT-2 / LLaMA initialiser; residual output projections are scaled by 1/sqrt(2L)

# The batch dimension is split over data x fsdp (train.MESH_AXES) in every sharding mode.
BATCH_AXES = ("data", "fsdp")
# Logical axis -> mesh axis, per sharding mode (auto: XLA chooses, nothing marked).
RULES: dict[str, dict[str, str]] = {
    "dp": {},
    "fsdp": {EMBED: "fsdp"},
    "tp": {HEADS: "tensor", MLP: "tensor", VOCAB: "tensor"},
    "2d": {EMBED: "fsdp", HEADS: "tensor", MLP: "tensor", VOCAB: "tensor"},
}


@dataclass(frozen=True)
class ParamSpec:
    shape: tuple[int, ...]
    axes: tuple[Optional[str], ...]  # logical axis per dimension (None: never sharded)
    init: str  # normal | residual | zeros | ones


def is_spec(x: Any) -> bool:
    return isinstance(x, ParamSpec)


def _norm_layout(cfg: ModelConfig) -> dict[str, ParamSpec]:
    d = cfg.d_model
    out = {"scale": ParamSpec((d,), (None,), "ones")}
    if cfg.arch == "gpt2":
        out["bias"] = ParamSpec((d,), (None,), "zeros")
    return out


def _layer_layout(cfg: ModelConfig) -> dict[str, Any]:
    d, hq, hkv, dh, f = cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.d_ff
    lay: dict[str, Any] = {
        "attn_norm": _norm_layout(cfg),
        "wq": ParamSpec((d, hq, dh), (EMBED, HEADS, None), "normal"),
        "wk": ParamSpec((d, hkv, dh), (EMBED, HEADS, None), "normal"),
        "wv": ParamSpec((d, hkv, dh), (EMBED, HEADS, None), "normal"),
        "wo": ParamSpec((hq, dh, d), (HEADS, None, EMBED), "residual"),
        "mlp_norm": _norm_layout(cfg),
    }
    if cfg.glu:
        lay["w_gate"] = ParamSpec((d, f), (EMBED, MLP), "normal")
        lay["w_up"] = ParamSpec((d, f), (EMBED, MLP), "normal")
        lay["w_down"] = ParamSpec((f, d), (MLP, EMBED), "residual")
    else:
        lay["w_in"] = ParamSpec((d, f), (EMBED, MLP), "normal")
        lay["w_out"] = ParamSpec((f, d), (MLP, EMBED), "residual")
    if cfg.biases:
        lay.update(bq=ParamSpec((hq, dh), (HEADS, None), "zeros"),
                   bk=ParamSpec((hkv, dh), (HEADS, None), "zeros"),
                   bv=ParamSpec((hkv, dh), (HEADS, None), "zeros"),
                   bo=ParamSpec((d,), (None,), "zeros"),
                   b_in=ParamSpec((f,), (MLP,), "zeros"),
                   b_out=ParamSpec((d,), (None,), "zeros"))
    return lay


def _stacked(node: Any, n: int) -> Any:
    """Every spec of ``node`` (a dict tree) for n layers stacked on a new leading axis, which is never
    sharded (every device holds its shard of every layer, as in the per-layer layout)."""
    if is_spec(node):
        return ParamSpec((n, *node.shape), (None, *node.axes), node.init)
    return {k: _stacked(v, n) for k, v in node.items()}


def layout(cfg: ModelConfig, scan: bool = False) -> dict[str, Any]:
    """Every parameter's shape, logical axes and initialiser (embedding tables use the padded vocab).

    ``layers``: a list of per-layer dicts, or (``scan``) one dict of [num_layers, ...] specs.
    """
    v, d = cfg.padded_vocab, cfg.d_model
    layers: Any = [_layer_layout(cfg) for _ in range(cfg.num_layers)]
    if scan:
        layers = _stacked(layers[0], cfg.num_layers)
    lay: dict[str, Any] = {
        "embed": ParamSpec((v, d), (VOCAB, EMBED), "normal"),
        "layers": layers,
        "final_norm": _norm_layout(cfg),
    }
    if cfg.arch == "gpt2":
        lay["pos"] = ParamSpec((cfg.max_seq_len, d), (None, EMBED), "normal")
    if not cfg.tied_embeddings:
        lay["unembed"] = ParamSpec((d, v), (EMBED, VOCAB), "normal")
    return lay


def flat_layout(cfg: ModelConfig) -> Iterator[tuple[str, ParamSpec]]:
    """(dotted name, spec) of every parameter of the per-layer layout, in layout order: 'embed',
    'layers.0.wq', ..."""
    def walk(prefix: str, node: Any) -> Iterator[tuple[str, ParamSpec]]:
        if isinstance(node, ParamSpec):
            yield prefix, node
        elif isinstance(node, dict):
            for k, v in node.items():
                yield from walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            for i, v in enumerate(node):
                yield from walk(f"{prefix}.{i}", v)
    yield from walk("", layout(cfg))


def mesh_axis(mode: str, logical: Optional[str]) -> Optional[str]:
    """The mesh axis a logical axis is split over in sharding ``mode`` (None: not split)."""
    return RULES[mode].get(logical) if logical else None
