"""The same decoder-only transformer as the JAX backend's, in plain torch (both torch backends train it: torch_xla
and torch_tpu): GPT-2 or LLaMA from a ModelConfig.

The parameters, their shapes, logical axes and initialisers come from the one description of them,
``xlabench.workloads.model_layout.layout`` (plain data), so both frameworks train the same model and shard
it by the same rules. Values are drawn with torch's generator (not bit-identical to JAX's).

Layers are always the per-layer layout, run by a Python loop: ``scan_layers`` (the JAX step's
jax.lax.scan over stacked weights) changes nothing here, so a case gives the same losses either way.
"""

from __future__ import annotations

import copy
import math
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from xlabench.backends.torch_shared.attention import grouped_attention
from xlabench.backends.torch_shared.loss import mean_loss, per_token_loss, project
from xlabench.workloads.attention import default_scale
from xlabench.workloads.model_layout import INIT_STD, flat_layout
from xlabench.workloads.model_presets import ModelConfig
from xlabench.workloads.train import TrainParams

Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]  # [B,S,H,D] x3 -> [B,S,Hq,D]


class Transformer(nn.Module):
    """Parameters in one flat ParameterDict ('.' -> '/'); forward(tokens) -> per-sequence loss [B]."""

    def __init__(self, cfg: ModelConfig, dtype: torch.dtype, seed: int, attention: Attention):
        super().__init__()
        self.cfg = cfg
        self.attention = attention
        gen = torch.Generator().manual_seed(seed)
        resid_std = INIT_STD / math.sqrt(2 * cfg.num_layers)
        self.specs = dict(flat_layout(cfg))
        params = {}
        for name, spec in self.specs.items():
            if spec.init == "zeros":
                t = torch.zeros(spec.shape)
            elif spec.init == "ones":
                t = torch.ones(spec.shape)
            else:
                std = resid_std if spec.init == "residual" else INIT_STD
                t = torch.randn(spec.shape, generator=gen) * std
            params[name.replace(".", "/")] = nn.Parameter(t.to(dtype))
        self.w = nn.ParameterDict(params)
        # each layer's (name within the layer, key in self.w), listed once: the forward reads them from a list,
        # never by iterating a dict (torch.compile cannot step a dict's key iterator: it broke the graph inside
        # the layer loop, and the whole forward fell back to eager on the v5e)
        self.layer_keys = [tuple((name[len(f"layers.{i}."):], name.replace(".", "/")) for name in self.specs
                                 if name.startswith(f"layers.{i}.")) for i in range(cfg.num_layers)]
        self.final_norm = tuple(n for n in ("final_norm.scale", "final_norm.bias") if n in self.specs)

    def p(self, name: str) -> torch.Tensor:
        return self.w[name.replace(".", "/")]

    def layer_weights(self, i: int) -> dict[str, torch.Tensor]:
        """Layer ``i``'s parameters by their names within a layer ('wq', 'attn_norm.scale', ...)."""
        return {short: self.w[key] for short, key in self.layer_keys[i]}

    def _norm(self, w: dict[str, torch.Tensor], prefix: str, x: torch.Tensor) -> torch.Tensor:
        """LayerNorm (gpt2) or RMSNorm (llama), statistics in float32; its weights ``w[prefix + '.scale']``."""
        xf = x.float()
        if self.cfg.arch == "gpt2":
            xf = xf - xf.mean(-1, keepdim=True)
        y = xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + self.cfg.norm_eps)
        y = y * w[f"{prefix}.scale"].float()
        if self.cfg.arch == "gpt2":
            y = y + w[f"{prefix}.bias"].float()
        return y.to(x.dtype)

    def _rope(self, x: torch.Tensor) -> torch.Tensor:
        """Rotary position embedding, rotate-half convention (HF LLaMA), angles in float32."""
        s, dh = x.shape[1], x.shape[-1]
        inv = 1.0 / (self.cfg.rope_theta ** (torch.arange(0, dh, 2, dtype=torch.float32, device=x.device) / dh))
        ang = torch.arange(s, dtype=torch.float32, device=x.device)[:, None] * inv[None, :]
        cos = torch.cat([torch.cos(ang)] * 2, -1)[None, :, None, :]
        sin = torch.cat([torch.sin(ang)] * 2, -1)[None, :, None, :]
        xf = x.float()
        x1, x2 = xf.chunk(2, dim=-1)
        return (xf * cos + torch.cat([-x2, x1], -1) * sin).to(x.dtype)

    def block(self, i: int) -> Callable[[dict[str, torch.Tensor], torch.Tensor], torch.Tensor]:
        """What runs layer ``i`` on (its weights, x): ``layer`` itself, or the same wrapped for every layer
        (remat: checkpointed; set ``self.block`` to wrap). The layer index never reaches the layer's code:
        torch.compile, where a graph break makes the layer a frame of its own, traces it once for all layers
        (with the index as an argument it compiled it once per layer and hit its recompile limit on the v5e)."""
        return self.layer

    def layer(self, w: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """One transformer layer on its weights ``w`` (layer_weights): the same code for every layer, so a
        compiler that traces it once (torch.compile, a graph break inside it) reuses it for all of them."""
        # ``w[...]`` throughout, never a bound ``w.__getitem__``: where a kernel breaks the graph (splash_sdpa),
        # the resumed frame's guards hold its locals, and a bound method of this call's dict dies with the
        # call, which invalidated the compiled resume for every layer (recompile limit on the v5e)
        cfg = self.cfg
        h = self._norm(w, "attn_norm", x)
        q = torch.einsum("bsd,dhk->bshk", h, w["wq"])
        k = torch.einsum("bsd,dhk->bshk", h, w["wk"])
        v = torch.einsum("bsd,dhk->bshk", h, w["wv"])
        if cfg.biases:
            q, k, v = q + w["bq"], k + w["bk"], v + w["bv"]
        if cfg.arch == "llama":
            q, k = self._rope(q), self._rope(k)
        attn = torch.einsum("bshk,hkd->bsd", self.attention(q, k, v), w["wo"])
        x = x + (attn + w["bo"] if cfg.biases else attn)
        h = self._norm(w, "mlp_norm", x)
        if cfg.glu:
            u = F.silu(torch.einsum("bsd,df->bsf", h, w["w_gate"])) * torch.einsum("bsd,df->bsf", h, w["w_up"])
            return x + torch.einsum("bsf,fd->bsd", u, w["w_down"])
        u = F.gelu(torch.einsum("bsd,df->bsf", h, w["w_in"]) + w["b_in"], approximate="tanh")
        return x + torch.einsum("bsf,fd->bsd", u, w["w_out"]) + w["b_out"]

    def hidden(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """tokens [B, S+1] -> (the final hidden states [B, S, D], the unembedding [D, padded_vocab], the
        targets [B, S] int64)."""
        cfg = self.cfg
        inputs, targets = tokens[:, :-1], tokens[:, 1:].long()
        x = self.p("embed")[inputs.long()]
        if cfg.arch == "gpt2":
            x = x + self.p("pos")[: inputs.shape[1]]
        for i in range(cfg.num_layers):
            x = self.block(i)(self.layer_weights(i), x)
        x = self._norm({n: self.p(n) for n in self.final_norm}, "final_norm", x)
        return x, self.p("embed").t() if cfg.tied_embeddings else self.p("unembed"), targets

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, S+1] -> next-token cross-entropy per sequence [B] (float32), from the whole logits."""
        x, w, targets = self.hidden(tokens)
        return per_token_loss(project(x, w, self.cfg.vocab_size), targets).mean(-1)

    def train_loss(self, tokens: torch.Tensor, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(the mean loss to differentiate, the per-sequence losses [B] without gradient): the train step's,
        ``chunk`` positions at a time with the gradient in the forward (loss.mean_loss; 0: whole logits)."""
        x, w, targets = self.hidden(tokens)
        mean, per_token = mean_loss(x, w, targets, self.cfg.vocab_size, chunk)
        return mean, per_token.mean(-1)


def logical_axes(cfg: ModelConfig) -> dict[str, tuple[Optional[str], ...]]:
    """Parameter name ('/'-joined, as in Transformer.w) -> logical axis per dimension."""
    return {name.replace(".", "/"): spec.axes for name, spec in flat_layout(cfg)}


def reference_losses(model: Transformer, tokens: np.ndarray, device: torch.device) -> np.ndarray:
    """Per-sequence loss at the model's initial parameters in float32 with naive attention, for the given
    sequences, on ``device`` (the caller sets the float32 matmul precision there)."""
    cfg = model.cfg
    ref = copy.deepcopy(model).float().to(device)
    scale = default_scale(cfg.head_dim)
    ref.attention = lambda q, k, v: grouped_attention(q, k, v, True, scale)
    with torch.no_grad():
        return ref(torch.from_numpy(tokens).to(device)).cpu().numpy()


def checkpoint_layers(model: Transformer, checkpoint: Callable[..., torch.Tensor]) -> None:
    """remat 'full': keep only each layer's input; recompute the layer in the backward pass. ``checkpoint``:
    the backend's (torch.utils.checkpoint.checkpoint, torch_xla.utils.checkpoint.checkpoint)."""
    layer = model.layer
    model.block = lambda i: (lambda w, x: checkpoint(layer, w, x, use_reentrant=False))


def unsupported_step(p: TrainParams, backend: str) -> Optional[str]:
    """Why a torch backend's train step does not run case ``p`` (a skip), or None: the largest-batch search
    and the jax.checkpoint policies are the JAX step's."""
    if p.auto_batch:
        return (f"global_batch auto: the largest-batch search compiles the JAX step ({backend} has no "
                f"compile-only memory analysis here); give {backend} an integer batch")
    if p.remat not in ("none", "full"):
        return f"remat {p.remat!r} (a jax.checkpoint policy) has no {backend} counterpart here; use none or full"
    return None
