"""torch_tpu paged-attention kernels, named by their kernel records (``code``). Each is a PagedKernel: its
``prepare`` lays the shared host inputs (q [B, nq, Hq, D]; k/v pages [Hkv, total_pages, page_size, D]; lengths
i32[B]; page table i32[B, pages_per_sequence]) out as the kernel takes them, on the host, outside the timing;
calling it on those tensors (on the ``tpu`` device) and a PagedConfig returns [B, nq, Hq, D].

- ``naive``: the gather-and-mask attention in torch ops (torch_shared.attention.paged_naive), compiled;
- ``paged`` and ``ragged_paged``: the JAX backend's Pallas kernels, their layout made by the JAX backend's own
  ``prepare`` (JAX on the host CPU), the kernel through ``torch.tpu.pallas.jax_op``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch

from xlabench.backends.torch_shared.attention import paged_naive
from xlabench.backends.torch_tpu import jax_ops
from xlabench.impls import kernels
from xlabench.impls.kernel import Kernel
from xlabench.impls.kernels import paged as paged_kernel, ragged_paged as ragged_paged_kernel
from xlabench.workloads.paged import PagedConfig

SHARED = ("q", "k_pages", "v_pages", "lengths", "page_table")


@functools.lru_cache(maxsize=None)
def _compiled_naive(sm_scale: float) -> Any:
    return torch.compile(lambda q, kp, vp, lengths, table: paged_naive(q, kp, vp, lengths, table, sm_scale))


@dataclass(frozen=True)
class TorchPaged:
    """A kernel written in torch: it takes the shared inputs as they are."""

    def prepare(self, host: dict[str, np.ndarray], cfg: PagedConfig) -> tuple[np.ndarray, ...]:
        return tuple(host[n] for n in SHARED)

    def kv_round(self, platform: str) -> Optional[str]:
        return None

    def __call__(self, q, k_pages, v_pages, lengths, table, cfg: PagedConfig) -> torch.Tensor:
        return _compiled_naive(cfg.sm_scale)(q, k_pages, v_pages, lengths, table)


@dataclass(frozen=True)
class JaxPaged:
    """The JAX backend's paged kernel ``name``: its prepare run by JAX on the host, its kernel via jax_op."""

    name: str

    def prepare(self, host: dict[str, np.ndarray], cfg: PagedConfig) -> tuple[np.ndarray, ...]:
        import jax
        import jax.numpy as jnp

        from xlabench.backends.jax import paged_impls

        with jax.default_device(jax.devices("cpu")[0]):
            args = paged_impls.get(self.name).prepare(*(jnp.asarray(host[n]) for n in SHARED), cfg)
        return tuple(np.asarray(a) for a in args)

    def kv_round(self, platform: str) -> Optional[str]:
        """The dtype the JAX kernel rounds K/V to (its record's; the reference rounds them too)."""
        return self.jax().kv_round(platform)

    def jax(self) -> Kernel:
        """The JAX backend's record of the kernel (its code, its K/V rounding)."""
        k = kernels.kernel("jax", self.name, paged_family=True)
        assert k is not None, self.name
        return k

    def __call__(self, *args: Any) -> torch.Tensor:
        *tensors, cfg = args
        return jax_ops.forward(self.jax().code, cfg, len(tensors))(*tensors)


naive = TorchPaged()
paged = JaxPaged(paged_kernel.NAME)
ragged_paged = JaxPaged(ragged_paged_kernel.NAME)
