"""AdamW as one program over the concatenated parameters: the torch train step's optimizer (plain torch, any
device).

torch's own AdamW compiled (``torch.compile(opt.step)``, foreach, capturable) took 76.6 s to compile for GPT-2
124M on a v5e (148 tensors, each its own chain of element-wise ops and its own written-back input), and eager it
doubled the step (432 against 221 ms: one dispatch per op and tensor). Here one update concatenates the
parameters and the gradients, steps flat moments, and returns each parameter's new value as a tensor of its
own, which the parameter then holds (``.data``, no copy): a few ops whatever the number of tensors.

The parameters stay separate buffers: made views of one flat buffer instead, TorchTPU's compile of the model
asked for 35.43 GB of temporaries at GPT-2 124M batch 8 (about the flat buffer once per parameter).

The update is torch.optim.AdamW's (decoupled weight decay on every parameter, bias-corrected moments, eps
outside the square root), computed in float32 and stored in the parameters' dtype (torch keeps its moments in
the parameters' dtype too).
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

import torch

Tensors = list[torch.Tensor]


def adamw_update(params: Tensors, grads: Tensors, m: torch.Tensor, v: torch.Tensor, t: torch.Tensor, lr: float,
                 b1: float, b2: float, eps: float, weight_decay: float
                 ) -> tuple[Tensors, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One AdamW step: (each parameter's new value, the new flat moments m and v, the new step count).
    ``t`` is a 0-d float32 tensor, so that a compiled update is one program for every step."""
    p = torch.cat([x.reshape(-1) for x in params]).float()
    g = torch.cat([x.reshape(-1) for x in grads]).float()
    t = t + 1
    mf = m.float().mul(b1).add(g, alpha=1 - b1)
    vf = v.float().mul(b2).addcmul(g, g, value=1 - b2)
    step = (lr / (1 - torch.pow(b1, t))) * mf / (vf.sqrt() / torch.sqrt(1 - torch.pow(b2, t)) + eps)
    flat = (p * (1 - lr * weight_decay) - step).to(params[0].dtype)
    # each its own tensor (clone), not a view of ``flat``: a parameter that aliases the others costs the model's
    # compile the whole buffer per parameter (above)
    new = [c.reshape(x.shape).clone() for c, x in zip(flat.split([x.numel() for x in params]), params)]
    return new, mf.to(m.dtype), vf.to(v.dtype), t


def xlabench_optimizer(*args: object, **kwargs: object) -> tuple[Tensors, torch.Tensor, torch.Tensor, torch.Tensor]:
    """adamw_update, traced under the name `xlabench explain` counts as the optimizer's: a torch.compile'd
    program's HLO names the Python functions each op was traced in (its stack frames), and an op traced inside
    a function named explain.categories.OPTIMIZER_SCOPE is the optimizer's (the JAX step names a scope)."""
    return adamw_update(*args, **kwargs)


class FlatAdamW:
    """AdamW whose step is one update over every parameter (adamw_update): ``compile`` wraps it
    (``torch.compile`` on a device, None to run it op by op). Every parameter must share one device and
    dtype."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, betas: tuple[float, float], eps: float,
                 weight_decay: float, compile: Optional[Callable[[Callable], Callable]] = None):
        self.params = list(params)
        kinds = {(p.device, p.dtype) for p in self.params}
        if len(kinds) != 1:
            raise ValueError(f"FlatAdamW needs one device and dtype for every parameter, got {sorted(map(str, kinds))}")
        (device, dtype), = kinds
        self.m = torch.zeros(sum(p.numel() for p in self.params), dtype=dtype, device=device)
        self.v = torch.zeros_like(self.m)
        self.t = torch.zeros((), dtype=torch.float32, device=device)
        self.hyper = dict(lr=lr, b1=betas[0], b2=betas[1], eps=eps, weight_decay=weight_decay)
        self._update = compile(xlabench_optimizer) if compile is not None else xlabench_optimizer

    def step(self) -> None:
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        new, self.m, self.v, self.t = self._update([p.detach() for p in self.params], grads, self.m, self.v, self.t,
                                                   **self.hyper)
        with torch.no_grad():
            for p, x in zip(self.params, new):
                p.data = x

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
