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
from jax.ad_checkpoint import checkpoint_name

# The parameter description (shapes, logical axes, initialisers) is framework-free, shared with torch_xla
# (re-exported here: model.layout, model.VOCAB ...).
from xlabench.workloads.model_layout import (  # noqa: F401
    EMBED, HEADS, INIT_STD, MLP, VOCAB, ParamSpec, is_spec, layout)
from xlabench.workloads.model_presets import ModelConfig


def stack_layers(layers: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-layer parameter dicts -> one dict of arrays stacked on a leading layer axis (the scan layout)."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *layers)


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


# checkpoint_name()s of the layer's attention inputs and output: what the `attention` remat policy keeps.
ATTENTION_NAMES = ("q", "k", "v", "attn_out")


def _mm(eq: str, x: jax.Array, w: jax.Array) -> jax.Array:
    """A weight matmul: inputs in the parameter dtype (bfloat16 on TPU), float32 accumulation, the
    result back in the input dtype (XLA fuses the convert into the matmul: no float32 copy in memory)."""
    return jnp.einsum(eq, x, w, preferred_element_type=jnp.float32).astype(x.dtype)


def _block(p: dict[str, Any], x: jax.Array, cfg: ModelConfig, hooks: Hooks) -> jax.Array:
    s = x.shape[1]
    h = _norm(p["attn_norm"], x, cfg)
    q, k, v = (_mm("bsd,dhk->bshk", h, p[w]) for w in ("wq", "wk", "wv"))
    if cfg.biases:
        q, k, v = q + p["bq"], k + p["bk"], v + p["bv"]
    if cfg.arch == "llama":
        q, k = _rope(q, s, cfg.rope_theta), _rope(k, s, cfg.rope_theta)
    q, k, v = (checkpoint_name(hooks.heads(t), n) for t, n in zip((q, k, v), ATTENTION_NAMES))
    o = checkpoint_name(hooks.heads(hooks.attention(q, k, v)), ATTENTION_NAMES[3])
    attn = _mm("bshk,hkd->bsd", o, p["wo"])
    x = hooks.act(x + (attn + p["bo"] if cfg.biases else attn))
    h = _norm(p["mlp_norm"], x, cfg)
    if cfg.glu:
        u = jax.nn.silu(_mm("bsd,df->bsf", h, p["w_gate"])) * _mm("bsd,df->bsf", h, p["w_up"])
        out = _mm("bsf,fd->bsd", hooks.mlp(u), p["w_down"])
    else:
        u = jax.nn.gelu(_mm("bsd,df->bsf", h, p["w_in"]) + p["b_in"], approximate=True)
        out = _mm("bsf,fd->bsd", hooks.mlp(u), p["w_out"]) + p["b_out"]
    return hooks.act(x + out)


_policies = jax.checkpoint_policies
# The jax.checkpoint policy of each remat name but "none" (the names: workloads/train.py REMAT; what
# each buys: docs/train.md). A policy says which intermediates of a layer the backward pass keeps; the
# rest it recomputes from what it kept. No policy but none keeps naive attention's S x S scores or
# probabilities: they are outputs of batched matmuls and elementwise ops, which only none keeps.
REMAT_POLICIES: dict[str, Optional[Callable]] = {
    "full": None,  # save nothing inside a layer: recompute the whole layer in the backward pass
    "dots": _policies.dots_with_no_batch_dims_saveable,  # keep the weight matmuls' outputs
    "attention": _policies.save_only_these_names(*ATTENTION_NAMES),  # keep q, k, v and the attention output
    "dots_attention": _policies.save_from_both_policies(  # both: recompute only elementwise work and S x S
        _policies.dots_with_no_batch_dims_saveable, _policies.save_only_these_names(*ATTENTION_NAMES)),
}
# remat "none" under scan_layers: the scanned body's residuals are stacked over layers as loop outputs,
# which XLA cannot drop or fuse away as it does in an unrolled step; keeping everything there, naive
# attention's S x S scores and probabilities among it, doubled the step's memory (docs/train.md).
SCAN_NONE_POLICY = "dots_attention"


def _layer_fn(remat: str, scanned: bool) -> Callable:
    """The layer as the step runs it: ``_block``, checkpointed by ``remat``'s policy."""
    name = SCAN_NONE_POLICY if remat == "none" and scanned else remat
    if name == "none":
        return _block
    # Under scan the forward and its recomputation sit in different loops (the forward and the
    # backward scan), so XLA cannot merge them: no CSE barrier needed there (JAX's advice for scan).
    return jax.checkpoint(_block, policy=REMAT_POLICIES[name], static_argnums=(2, 3), prevent_cse=not scanned)


def hidden(params: dict[str, Any], tokens: jax.Array, cfg: ModelConfig, hooks: Hooks,
           remat: str = "none") -> jax.Array:
    """tokens [B, S] int32 -> the final norm's output [B, S, d_model], what the vocabulary projection takes.

    ``remat`` applies per layer: to each unrolled layer, or to the scanned body.
    """
    s = tokens.shape[1]
    x = jnp.take(params["embed"], tokens, axis=0)
    if cfg.arch == "gpt2":
        x = x + params["pos"][:s]
    x = hooks.act(x)
    layers = params["layers"]
    block = _layer_fn(remat, is_stacked(layers))
    if is_stacked(layers):
        x, _ = jax.lax.scan(lambda h, layer: (block(layer, h, cfg, hooks), None), x, layers)
    else:
        for layer in layers:
            x = block(layer, x, cfg, hooks)
    return _norm(params["final_norm"], x, cfg)


def _unembedding(params: dict[str, Any], cfg: ModelConfig) -> jax.Array:
    return params["embed"].T if cfg.tied_embeddings else params["unembed"]


def _project(x: jax.Array, w: jax.Array, cfg: ModelConfig, hooks: Hooks) -> jax.Array:
    """x [B, S, D] -> float32 logits [B, S, padded_vocab] (float32 accumulation; padding columns at -inf)."""
    out = hooks.logits(jnp.einsum("bsd,dv->bsv", x, w, preferred_element_type=jnp.float32))
    if cfg.padded_vocab != cfg.vocab_size:
        out = jnp.where(jnp.arange(cfg.padded_vocab) < cfg.vocab_size, out, -jnp.inf)
    return out


def logits(params: dict[str, Any], tokens: jax.Array, cfg: ModelConfig, hooks: Hooks,
           remat: str = "none") -> jax.Array:
    """tokens [B, S] int32 -> float32 logits [B, S, padded_vocab] (padding columns at -inf)."""
    return _project(hidden(params, tokens, cfg, hooks, remat), _unembedding(params, cfg), cfg, hooks)


def cross_entropy(z: jax.Array, targets: jax.Array) -> jax.Array:
    """Per-token softmax cross-entropy of float32 logits z [..., V] against int targets [...]."""
    return jax.nn.logsumexp(z, axis=-1) - jnp.take_along_axis(z, targets[..., None], axis=-1)[..., 0]


def _chunked(x: jax.Array, targets: jax.Array, chunk: int) -> tuple[jax.Array, jax.Array]:
    """x [B, S, D] and targets [B, S] as ``chunk``-position pieces of every sequence, [n, B, c, D] and
    [n, B, c], the sequence padded to whole chunks (the callers drop the pad positions' losses)."""
    b, s, d = x.shape
    chunk = min(chunk, s)
    n = -(-s // chunk)
    if n * chunk != s:
        x = jnp.pad(x, ((0, 0), (0, n * chunk - s), (0, 0)))
        targets = jnp.pad(targets, ((0, 0), (0, n * chunk - s)))
    return x.reshape(b, n, chunk, d).swapaxes(0, 1), targets.reshape(b, n, chunk).swapaxes(0, 1)


def chunked_cross_entropy(x: jax.Array, w: jax.Array, targets: jax.Array, cfg: ModelConfig, hooks: Hooks,
                          chunk: int) -> jax.Array:
    """Per-token cross-entropy [B, S] of the logits ``x @ w`` (x [B, S, D], w [D, padded_vocab]),
    computed ``chunk`` positions of every sequence at a time: the float32 [B, S, V] logits never exist.

    The same value and gradient as ``cross_entropy(_project(x, w))`` (a custom VJP): the forward keeps
    each token's logsumexp, the backward recomputes one chunk's logits at a time and accumulates the
    weight gradient in float32 across chunks. Chunks split the sequence, never the batch, so they keep
    the batch's sharding.
    """
    b, s, _ = x.shape
    xs, ts = _chunked(x, targets, chunk)
    n, chunk = ts.shape[0], ts.shape[2]

    def fwd(xs: jax.Array, w: jax.Array, ts: jax.Array) -> tuple[jax.Array, tuple]:
        def body(_: None, xt: tuple[jax.Array, jax.Array]) -> tuple[None, tuple[jax.Array, jax.Array]]:
            z = _project(xt[0], w, cfg, hooks)
            lse = jax.nn.logsumexp(z, axis=-1)
            return None, (lse - jnp.take_along_axis(z, xt[1][..., None], axis=-1)[..., 0], lse)

        _, (per_token, lse) = jax.lax.scan(body, None, (xs, ts))
        return per_token, (xs, w, ts, lse)

    def bwd(res: tuple, g: jax.Array) -> tuple[jax.Array, jax.Array, None]:
        xs, w, ts, lse = res

        def body(dw: jax.Array, args: tuple) -> tuple[jax.Array, jax.Array]:
            xc, tc, lc, gc = args
            z = _project(xc, w, cfg, hooks)
            # d loss / d z = softmax(z) - onehot(target), times the token's cotangent
            dz = (jnp.exp(z - lc[..., None]) - jax.nn.one_hot(tc, z.shape[-1], dtype=z.dtype)) * gc[..., None]
            dz = dz.astype(w.dtype)
            dx = jnp.einsum("bcv,dv->bcd", dz, w, preferred_element_type=jnp.float32).astype(xc.dtype)
            return dw + jnp.einsum("bcd,bcv->dv", xc, dz, preferred_element_type=jnp.float32), dx

        dw, dxs = jax.lax.scan(body, jnp.zeros(w.shape, jnp.float32), (xs, ts, lse, g))
        return dxs, dw.astype(w.dtype), None

    per_token = jax.custom_vjp(lambda xs, w, ts: fwd(xs, w, ts)[0])
    per_token.defvjp(fwd, bwd)
    return per_token(xs, w, ts).swapaxes(0, 1).reshape(b, n * chunk)[:, :s]


def mean_cross_entropy(x: jax.Array, w: jax.Array, targets: jax.Array, cfg: ModelConfig, hooks: Hooks,
                       chunk: int) -> tuple[jax.Array, jax.Array]:
    """(the mean per-token cross-entropy, the per-token values [B, S] without gradient) of the logits
    ``x @ w``, ``chunk`` positions of every sequence at a time, as the train step needs them: the gradient
    of the mean is computed in the forward pass, chunk by chunk, from the same logits.

    Why: ``chunked_cross_entropy`` differentiates per-token values (any cotangent), so its backward
    computes every chunk's logits again: one vocabulary projection more per token, 2 x d_model x vocab
    FLOPs that the step's count does not hold (about 10% of a GPT-2 124M step, 5% of 355M). The mean's
    cotangent is one scalar, so the forward can finish the work: softmax - onehot, its product with the
    weight (dx, kept like x) and with x (dw, accumulated in float32), scaled by the scalar in the backward.
    The per-token values go out through stop_gradient: nothing differentiates them, so the result is exact.
    """
    b, s, _ = x.shape
    xs, ts = _chunked(x, targets, chunk)
    n, chunk = ts.shape[0], ts.shape[2]
    valid = jnp.arange(n * chunk).reshape(n, chunk) < s  # [n, c]: pad positions carry no loss
    scale = 1.0 / (b * s)

    def fwd(xs: jax.Array, w: jax.Array) -> tuple[tuple[jax.Array, jax.Array], tuple]:
        def body(dw: jax.Array, args: tuple) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
            xc, tc, vc = args
            z = _project(xc, w, cfg, hooks)
            lse = jax.nn.logsumexp(z, axis=-1)
            per_token = lse - jnp.take_along_axis(z, tc[..., None], axis=-1)[..., 0]
            dz = (jnp.exp(z - lse[..., None]) - jax.nn.one_hot(tc, z.shape[-1], dtype=z.dtype)) \
                * (scale * vc)[None, :, None]
            dz = dz.astype(w.dtype)
            dx = jnp.einsum("bcv,dv->bcd", dz, w, preferred_element_type=jnp.float32).astype(xc.dtype)
            return dw + jnp.einsum("bcd,bcv->dv", xc, dz, preferred_element_type=jnp.float32), (per_token, dx)

        dw, (per_token, dxs) = jax.lax.scan(body, jnp.zeros(w.shape, jnp.float32), (xs, ts, valid))
        per_token = per_token.swapaxes(0, 1).reshape(b, n * chunk)[:, :s]
        return (per_token.mean(), per_token), (dxs, dw.astype(w.dtype))

    def bwd(res: tuple, g: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        dxs, dw = res
        return (g[0] * dxs).astype(dxs.dtype), (g[0] * dw).astype(dw.dtype)

    mean = jax.custom_vjp(lambda xs, w: fwd(xs, w)[0])
    mean.defvjp(fwd, bwd)
    value, per_token = mean(xs, w)
    return value, jax.lax.stop_gradient(per_token)


def loss(params: dict[str, Any], tokens: jax.Array, cfg: ModelConfig, hooks: Hooks,
         remat: str = "none", loss_chunk: int = 0, grad_in_forward: bool = False) -> tuple[jax.Array, jax.Array]:
    """Next-token cross-entropy of tokens [B, S+1]: (mean loss, per-sequence mean loss [B]).

    ``loss_chunk`` > 0: ``chunked_cross_entropy`` over that many positions at a time; 0: the whole
    float32 logits at once (the plain reference). ``grad_in_forward`` (the train step, with loss_chunk):
    ``mean_cross_entropy``, whose forward computes the head's gradient (the per-sequence losses are then
    not differentiable; the mean loss is).
    """
    x = hidden(params, tokens[:, :-1], cfg, hooks, remat)
    w, targets = _unembedding(params, cfg), tokens[:, 1:]
    if loss_chunk and grad_in_forward:
        mean, per_token = mean_cross_entropy(x, w, targets, cfg, hooks, loss_chunk)
        return mean, per_token.mean(-1)
    if loss_chunk:
        per_token = chunked_cross_entropy(x, w, targets, cfg, hooks, loss_chunk)
    else:
        per_token = cross_entropy(_project(x, w, cfg, hooks), targets)
    per_seq = per_token.mean(-1)
    return per_seq.mean(), per_seq
