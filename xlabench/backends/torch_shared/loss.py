"""The train step's cross-entropy, ``chunk`` positions at a time with its gradient in the forward pass: the torch
counterpart of the JAX step's ``mean_cross_entropy`` (backends/jax/model.py), plain torch.

Why: the torch model's whole-logits loss materialises the float32 logits of every token (GPT-2 at batch 8:
8 x 1024 x 50304 x 4 bytes, 1.65 GB) and masks the padded vocabulary over all of them; in TorchTPU's compiled
GPT-2 124M step that ``masked_fill`` alone was 4.03 ms of a 100.8 ms estimate (docs/tpu.md). Here one chunk's
logits exist at a time, and the mean's gradient is finished in the forward: softmax - onehot, its product with
the weight (dx) and with x (dw, accumulated in float32), scaled by the mean's cotangent in the backward. The
per-token values come out without gradient (nothing differentiates them), so the result is exact.
"""

from __future__ import annotations

from typing import Any

import torch


def project(x: torch.Tensor, w: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """x [..., D] @ w [D, V] -> float32 logits, the padded vocabulary's columns (V > vocab_size) at -inf."""
    z = torch.matmul(x, w).float()
    if w.shape[-1] != vocab_size:
        z = z.masked_fill(torch.arange(w.shape[-1], device=z.device) >= vocab_size, float("-inf"))
    return z


def per_token_loss(z: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-token softmax cross-entropy of float32 logits z [..., V] against int targets [...]."""
    return torch.logsumexp(z, dim=-1) - z.gather(-1, targets[..., None])[..., 0]


class MeanCrossEntropy(torch.autograd.Function):
    """(the mean per-token loss, the per-token losses [B, S] without gradient) of ``x @ w``: x [B, S, D],
    w [D, V], int64 targets [B, S], ``chunk`` sequence positions at a time."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, targets: torch.Tensor, chunk: int,
                vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        b, s, d = x.shape
        scale = 1.0 / (b * s)
        dw = torch.zeros(w.shape, dtype=torch.float32, device=w.device)
        losses, dxs = [], []
        for i in range(0, s, chunk):
            xc, tc = x[:, i:i + chunk], targets[:, i:i + chunk]
            z = project(xc, w, vocab_size)
            lse = torch.logsumexp(z, dim=-1)
            losses.append(lse - z.gather(-1, tc[..., None])[..., 0])
            onehot = torch.arange(z.shape[-1], device=z.device) == tc[..., None]
            dz = ((torch.exp(z - lse[..., None]) - onehot.to(z.dtype)) * scale).to(w.dtype)
            dxs.append(torch.matmul(dz, w.t()))
            dw = dw + torch.matmul(xc.reshape(-1, d).t(), dz.reshape(-1, dz.shape[-1])).float()
        per_token = torch.cat(losses, dim=1)
        ctx.save_for_backward(torch.cat(dxs, dim=1), dw.to(w.dtype))
        ctx.mark_non_differentiable(per_token)
        return per_token.mean(), per_token

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor, _: Any) -> tuple[Any, ...]:
        dx, dw = ctx.saved_tensors
        return (g * dx).to(dx.dtype), (g * dw).to(dw.dtype), None, None, None


def mean_loss(x: torch.Tensor, w: torch.Tensor, targets: torch.Tensor, vocab_size: int,
              chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean loss to differentiate, per-token losses [B, S] without gradient); ``chunk`` 0: the whole float32
    logits at once (autograd differentiates them)."""
    if chunk <= 0:
        per_token = per_token_loss(project(x, w, vocab_size), targets)
        return per_token.mean(), per_token.detach()
    return MeanCrossEntropy.apply(x, w, targets, min(chunk, x.shape[1]), vocab_size)
