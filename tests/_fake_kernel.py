"""A test's fake attention kernel, declared as a built-in kernel's module in xlabench/impls/kernels/ is
(its catalogue entry, typed config, skip rule, search space and where its code lives), to show that one
module and one ``kernels.register`` line add a kernel (tests/test_fake_kernel.py). Its code is the JAX
naive attention; it takes float32 only, and searches block_q x block_k over 32 and 64."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from xlabench.impls.kernel import ATTENTION, ImplInfo, Kernel
from xlabench.impls.configs import KernelBlocks, block_stages
from xlabench.workloads.attention import BLOCK_PARAMS, AttentionParams

SIZES = (32, 64)


@dataclass(frozen=True)
class FakeConfig(KernelBlocks):
    """block_q x block_k, each 32 or 64 (default 128, clipped to the sequence: KernelBlocks')."""


def fake_rule(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    return None if dtype == "float32" else f"fake takes float32 inputs only (got {dtype})"


def fake_space(p: AttentionParams) -> list:
    return block_stages(p, FakeConfig, [dict(zip(BLOCK_PARAMS, (q, k))) for q in SIZES for k in SIZES])


def attention(q, k, v, cfg):
    """The kernel's code (a worker imports it): JAX's naive attention, whatever the blocks."""
    from xlabench.backends.jax.attention_impls import naive

    return naive(q, k, v, cfg)


KERNELS = (Kernel(ImplInfo("fake", "jax", ATTENTION, ("cpu",), (), "a test's fake kernel (naive attention)"),
                  fake_rule, BLOCK_PARAMS, FakeConfig, fake_space, code=f"{__name__}:attention"),)
