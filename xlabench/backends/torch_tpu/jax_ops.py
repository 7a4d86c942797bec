"""JAX functions as torch operators on the TPU (``torch.tpu.pallas.jax_op``): a JAX Pallas kernel of the JAX
backend called from PyTorch, differentiable through a second operator made of ``jax.vjp`` of the same kernel.

jax_op registers a ``torch.library`` custom op from a JAX function whose every argument is annotated (an
array: ``jax.Array``; anything else is static). A case's kernel is a closure over its config, so each
(kernel, config) gets an operator of its own, named ``xlabench::<kernel>_<serial>``, made once per process.
"""

from __future__ import annotations

import functools
import inspect
import itertools
from typing import Any, Callable

import jax
import torch

from xlabench.impls.kernel import resolve

_SERIAL = itertools.count()


def _typed(fn: Callable[..., Any], arity: int, outputs: int) -> Callable[..., Any]:
    """``fn`` with a signature of ``arity`` array arguments returning an array (or a tuple of ``outputs``),
    which is what jax_op reads to build the operator's schema."""
    def f(*args: Any) -> Any:
        return fn(*args)

    params = [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=jax.Array)
              for i in range(arity)]
    ret = jax.Array if outputs == 1 else tuple.__class_getitem__((jax.Array,) * outputs)
    f.__signature__ = inspect.Signature(params, return_annotation=ret)  # type: ignore[attr-defined]
    return f


def operator(name: str, fn: Callable[..., Any], arity: int, outputs: int = 1) -> Callable[..., Any]:
    """A torch operator (``torch.tpu.pallas.jax_op``) running JAX's ``fn`` on ``arity`` tensors."""
    return torch.tpu.pallas.jax_op(f"xlabench::{name}_{next(_SERIAL)}", _typed(fn, arity, outputs))


@functools.lru_cache(maxsize=None)
def attention(code: str, cfg: Any) -> Callable[..., torch.Tensor]:
    """A JAX attention kernel (``code``: fn(q, k, v, cfg)) as a differentiable torch function of (q, k, v)."""
    kernel = resolve(code)
    name = code.rsplit(":", 1)[-1]

    def fwd(q, k, v):
        return kernel(q, k, v, cfg)

    def bwd(q, k, v, do):
        _, vjp = jax.vjp(fwd, q, k, v)
        return vjp(do)

    fwd_op, bwd_op = operator(name, fwd, 3), operator(f"{name}_bwd", bwd, 4, 3)

    class Kernel(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            ctx.save_for_backward(q, k, v)
            return fwd_op(q, k, v)

        @staticmethod
        def backward(ctx, do):
            q, k, v = ctx.saved_tensors
            return tuple(bwd_op(q, k, v, do.contiguous()))

    return lambda q, k, v: Kernel.apply(q.contiguous(), k.contiguous(), v.contiguous())


@functools.lru_cache(maxsize=None)
def forward(code: str, cfg: Any, arity: int) -> Callable[..., torch.Tensor]:
    """A JAX kernel (``code``: fn(*arrays, cfg)) as a torch function of its ``arity`` tensors, forward only."""
    kernel = resolve(code)
    return operator(code.rsplit(":", 1)[-1], lambda *args: kernel(*args, cfg), arity)
