"""JAX Pallas kernels inside a torch_xla graph (CPU): ``call_jax`` forward, ``jax.vjp`` backward.

torch_xla's own custom_kernel ops lower to a TPU custom call, which the CPU client cannot run. The same
JAX kernel traced in the generic Pallas interpreter is plain HLO, and ``torch_xla.core.xla_builder
.call_jax`` splices that HLO into the lazy graph. A ``torch.autograd.Function`` gives it a backward: a
second ``call_jax`` of ``jax.vjp`` of the same kernel (which recomputes the forward residuals; on TPU
the real torch_xla kernel keeps them).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable

import torch


def interpret_all_kernels() -> None:
    """Trace every Pallas TPU kernel of this process in JAX's generic interpreter, in every thread.

    A context manager (``force_tpu_interpret_mode``) is thread-local, but torch's autograd engine runs
    an XLA tensor's backward on its own thread, where torch_xla traces the backward kernels: so the
    mode is set process-wide. Right for a CPU worker, where no Pallas TPU kernel can run otherwise.
    """
    from jax.experimental.pallas import tpu as pltpu

    if hasattr(pltpu, "set_tpu_interpret_mode"):  # jax >= 0.8
        pltpu.set_tpu_interpret_mode(True)
    else:  # jax 0.7.1 (torch_xla 2.9's pin): the same global setting, through the config state
        from jax._src import config

        config.pallas_tpu_interpret_mode_context_manager.set_global(True)


ATTENTION = "xlabench.backends.jax.attention_impls"
PAGED = "xlabench.backends.jax.paged_impls"


@functools.lru_cache(maxsize=None)
def _jax_fns(registry: str, impl: str, cfg: Any) -> tuple[Callable, Callable]:
    """(forward, backward) JAX functions of one JAX-backend impl (``registry``: its module) and config,
    created once per triple: call_jax caches the traced HLO by function identity, so a new closure per
    call would retrace. backward(*inputs, cotangent) -> the inputs' cotangents."""
    import jax

    kernel = importlib.import_module(registry).get(impl).fn

    def fwd(*args):
        return kernel(*args, cfg)

    def bwd(*args):
        _, vjp = jax.vjp(lambda *a: kernel(*a, cfg), *args[:-1])
        return vjp(args[-1])

    return fwd, bwd


class _JaxKernel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, impl: str, cfg: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        from torch_xla.core.xla_builder import call_jax

        ctx.impl, ctx.cfg = impl, cfg
        ctx.save_for_backward(q, k, v)
        return call_jax(_jax_fns(ATTENTION, impl, cfg)[0], (q, k, v))

    @staticmethod
    def backward(ctx, do: torch.Tensor):
        from torch_xla.core.xla_builder import call_jax

        q, k, v = ctx.saved_tensors
        dq, dk, dv = call_jax(_jax_fns(ATTENTION, ctx.impl, ctx.cfg)[1], (q, k, v, do.contiguous()))
        return None, None, dq, dk, dv


def apply(impl: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cfg: Any) -> torch.Tensor:
    """The JAX backend's attention ``impl`` (its layout, its config) on torch_xla tensors, differentiable."""
    return _JaxKernel.apply(impl, cfg, q.contiguous(), k.contiguous(), v.contiguous())


def forward(registry: str, impl: str, cfg: Any, *args: torch.Tensor) -> torch.Tensor:
    """The JAX backend's ``impl`` of ``registry`` on torch_xla tensors, forward only."""
    from torch_xla.core.xla_builder import call_jax

    return call_jax(_jax_fns(registry, impl, cfg)[0], tuple(a.contiguous() for a in args))
