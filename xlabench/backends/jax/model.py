"""One decoder-only transformer in plain JAX, GPT-2 or LLaMA flavour from a ModelConfig.

Parameters are a dict pytree. ``layout(cfg)`` (xlabench.workloads.model_layout) is the one description of every parameter (shape,
logical axes, initialiser): ``init_params`` builds the arrays from it and the sharding module maps
its logical axes to mesh axes. The model knows nothing about meshes: the caller passes ``Hooks``
(sharding constraints and the attention call, where the impl registry and shard_map live).

Layers come in two layouts, chosen by ``scan``: a list of per-layer dicts, run by a Python loop (XLA
sees every layer: compile time grows with depth), or one dict of arrays stacked on a leading layer
axis, run by ``jax.lax.scan`` (XLA compiles one layer). Both hold the same values and compute the same
step; ``logits`` tells them apart by the tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

# The parameter description (shapes, logical axes, initialisers) is framework-free, shared with torch_xla
# (re-exported here: model.layout, model.VOCAB ...).
from xlabench.workloads.model_layout import (  # noqa: F401
    EMBED, HEADS, INIT_STD, MLP, VOCAB, ParamSpec, is_spec, layout)
from xlabench.workloads.model_presets import ModelConfig


def stack_layers(layers: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-layer parameter dicts -> one dict of arrays stacked on a leading layer axis (the scan layout)."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *layers)


def unstack_layers(layers: dict[str, Any]) -> list[dict[str, Any]]:
    """The inverse of stack_layers: one dict per layer."""
    n = jax.tree.leaves(layers)[0].shape[0]
    return [jax.tree.map(lambda x, i=i: x[i], layers) for i in range(n)]


def is_stacked(layers: Any) -> bool:
    """Whether ``params['layers']`` is the scan layout (one dict of stacked arrays, not a list)."""
    return isinstance(layers, dict)


def init_params(cfg: ModelConfig, key: jax.Array, dtype: Any, scan: bool = False) -> dict[str, Any]:
    """Parameters from ``key``: one folded key per leaf, so values do not depend on how the init is
    sharded (with jax_threefry_partitionable, the default).

    The keys follow the per-layer layout in either case, and ``scan`` stacks those layers: a scanned
    and an unrolled model of one seed have the same weights.
    """
    params = _init_unrolled(cfg, key, dtype)
    if scan:
        params["layers"] = stack_layers(params["layers"])
    return params


def _init_unrolled(cfg: ModelConfig, key: jax.Array, dtype: Any) -> dict[str, Any]:
    leaves, tree = jax.tree.flatten(layout(cfg), is_leaf=is_spec)
    resid_std = INIT_STD / math.sqrt(2 * cfg.num_layers)

    def make(i: int, spec: ParamSpec) -> jax.Array:
        if spec.init == "zeros":
            return jnp.zeros(spec.shape, dtype)
        if spec.init == "ones":
            return jnp.ones(spec.shape, dtype)
        std = resid_std if spec.init == "residual" else INIT_STD
        return (std * jax.random.normal(jax.random.fold_in(key, i), spec.shape, jnp.float32)).astype(dtype)

    return jax.tree.unflatten(tree, [make(i, s) for i, s in enumerate(leaves)])


@dataclass(frozen=True)
class Hooks:
    """What the model calls out to: sharding constraints on activations, and attention itself."""

    attention: Callable[[jax.Array, jax.Array, jax.Array], jax.Array]  # [B,S,H,D] x3 -> [B,S,Hq,D]
    act: Callable[[jax.Array], jax.Array] = lambda x: x  # [B, S, D]
    heads: Callable[[jax.Array], jax.Array] = lambda x: x  # [B, S, H, D]
    mlp: Callable[[jax.Array], jax.Array] = lambda x: x  # [B, S, F]
    logits: Callable[[jax.Array], jax.Array] = lambda x: x  # [B, S, V]


def _norm(p: dict[str, jax.Array], x: jax.Array, cfg: ModelConfig) -> jax.Array:
    """LayerNorm (gpt2) or RMSNorm (llama), statistics in float32."""
    xf = x.astype(jnp.float32)
    if cfg.arch == "gpt2":
        xf = xf - xf.mean(-1, keepdims=True)
    y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, -1, keepdims=True) + cfg.norm_eps)
    y = y * p["scale"].astype(jnp.float32)
    if "bias" in p:
        y = y + p["bias"].astype(jnp.float32)
    return y.astype(x.dtype)


def _rope(x: jax.Array, seq_len: int, theta: float) -> jax.Array:
    """Rotary position embedding, rotate-half convention (HF LLaMA), angles in float32."""
    dh = x.shape[-1]
    inv = 1.0 / (theta ** (jnp.arange(0, dh, 2, dtype=jnp.float32) / dh))
    ang = jnp.arange(seq_len, dtype=jnp.float32)[:, None] * inv[None, :]
    cos = jnp.concatenate([jnp.cos(ang)] * 2, -1)[None, :, None, :]
    sin = jnp.concatenate([jnp.sin(ang)] * 2, -1)[None, :, None, :]
    xf = x.astype(jnp.float32)
    x1, x2 = jnp.split(xf, 2, axis=-1)
    return (xf * cos + jnp.concatenate([-x2, x1], -1) * sin).astype(x.dtype)


def _block(p: dict[str, Any], x: jax.Array, cfg: ModelConfig, hooks: Hooks) -> jax.Array:
    s = x.shape[1]
    h = _norm(p["attn_norm"], x, cfg)
    q = jnp.einsum("bsd,dhk->bshk", h, p["wq"])
    k = jnp.einsum("bsd,dhk->bshk", h, p["wk"])
    v = jnp.einsum("bsd,dhk->bshk", h, p["wv"])
    if cfg.biases:
        q, k, v = q + p["bq"], k + p["bk"], v + p["bv"]
    if cfg.arch == "llama":
        q, k = _rope(q, s, cfg.rope_theta), _rope(k, s, cfg.rope_theta)
    q, k, v = hooks.heads(q), hooks.heads(k), hooks.heads(v)
    o = hooks.heads(hooks.attention(q, k, v))
    attn = jnp.einsum("bshk,hkd->bsd", o, p["wo"])
    x = hooks.act(x + (attn + p["bo"] if cfg.biases else attn))
    h = _norm(p["mlp_norm"], x, cfg)
    if cfg.glu:
        u = jax.nn.silu(jnp.einsum("bsd,df->bsf", h, p["w_gate"])) * jnp.einsum("bsd,df->bsf", h, p["w_up"])
        out = jnp.einsum("bsf,fd->bsd", hooks.mlp(u), p["w_down"])
    else:
        u = jax.nn.gelu(jnp.einsum("bsd,df->bsf", h, p["w_in"]) + p["b_in"], approximate=True)
        out = jnp.einsum("bsf,fd->bsd", hooks.mlp(u), p["w_out"]) + p["b_out"]
    return hooks.act(x + out)


REMAT_POLICIES: dict[str, Optional[Callable]] = {
    "full": None,  # save nothing inside a layer: recompute the whole layer in the backward pass
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,  # keep weight matmul outputs
}


def logits(params: dict[str, Any], tokens: jax.Array, cfg: ModelConfig, hooks: Hooks,
           remat: str = "none") -> jax.Array:
    """tokens [B, S] int32 -> float32 logits [B, S, padded_vocab] (padding columns at -inf).

    ``remat`` applies per layer: to each unrolled layer, or to the scanned body.
    """
    s = tokens.shape[1]
    x = jnp.take(params["embed"], tokens, axis=0)
    if cfg.arch == "gpt2":
        x = x + params["pos"][:s]
    x = hooks.act(x)
    layers = params["layers"]
    block = _block
    if remat != "none":
        # Under scan the forward and its recomputation sit in different loops (the forward and the
        # backward scan), so XLA cannot merge them: no CSE barrier needed there (JAX's advice for scan).
        block = jax.checkpoint(_block, policy=REMAT_POLICIES[remat], static_argnums=(2, 3),
                               prevent_cse=not is_stacked(layers))
    if is_stacked(layers):
        x, _ = jax.lax.scan(lambda h, layer: (block(layer, h, cfg, hooks), None), x, layers)
    else:
        for layer in layers:
            x = block(layer, x, cfg, hooks)
    x = _norm(params["final_norm"], x, cfg)
    w = params["embed"].T if cfg.tied_embeddings else params["unembed"]
    out = hooks.logits(jnp.einsum("bsd,dv->bsv", x, w, preferred_element_type=jnp.float32))
    if cfg.padded_vocab != cfg.vocab_size:
        out = jnp.where(jnp.arange(cfg.padded_vocab) < cfg.vocab_size, out, -jnp.inf)
    return out


def loss(params: dict[str, Any], tokens: jax.Array, cfg: ModelConfig, hooks: Hooks,
         remat: str = "none") -> tuple[jax.Array, jax.Array]:
    """Next-token cross-entropy of tokens [B, S+1]: (mean loss, per-sequence mean loss [B])."""
    z = logits(params, tokens[:, :-1], cfg, hooks, remat)
    target = jnp.take_along_axis(z, tokens[:, 1:, None], axis=-1)[..., 0]
    per_token = jax.nn.logsumexp(z, axis=-1) - target
    per_seq = per_token.mean(-1)
    return per_seq.mean(), per_seq
