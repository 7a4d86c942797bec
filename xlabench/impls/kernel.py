"""What a kernel module declares (xlabench/impls/kernels/, one module per kernel): its catalogue entries
(ImplInfo, one per backend and workload family it serves) and, where it has them, its skip rule, the
block parameters it takes, its typed config (a tune.space.KernelConfig) and its search space, together in
one Kernel record. Framework-free: the parent plans and predicts skips from these without a framework."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from xlabench.workloads import family
from xlabench.workloads.record import ATTENTION_KERNELS, PAGED_KERNELS

# The workloads a kernel of each family serves (their records say): an attention kernel serves the attention
# workload and the model's layers.
ATTENTION = family(ATTENTION_KERNELS)
PAGED = family(PAGED_KERNELS)
ALL_PLATFORMS = ("cpu", "gpu", "tpu")
BACKENDS = ("jax", "torch_xla", "torch_tpu")
FAMILIES = (ATTENTION, PAGED)  # the catalogue's order within a backend: attention kernels, then paged ones

# unsupported(batch, seq_len, kv_len, num_heads, kv_heads, dtype, cfg, platform) -> the skip reason, or None
AttentionRule = Callable[[int, int, int, int, int, str, Any, str], Optional[str]]
# unsupported(params, platform, device_kind) -> the skip reason, or None
PagedRule = Callable[[Any, str, str], Optional[str]]


@dataclass(frozen=True)
class ImplInfo:
    name: str
    backend: str
    workloads: tuple[str, ...]
    platforms: tuple[str, ...]  # where it runs natively
    interpret_on: tuple[str, ...]  # where it runs in a Pallas interpreter (pipeline check, not speed)
    doc: str

    def runs_on(self, platform: str) -> bool:
        return platform in self.platforms or platform in self.interpret_on

    def interpreted(self, platform: str) -> bool:
        return platform in self.interpret_on and platform not in self.platforms


def no_rule(*_args: Any) -> Optional[str]:
    """Runs everything (an ``unsupported`` rule that never skips)."""
    return None


@dataclass(frozen=True)
class Kernel:
    """One kernel of one backend for one workload family, as its module declares it."""

    info: ImplInfo  # the catalogue entry
    unsupported: Callable[..., Optional[str]] = no_rule  # an AttentionRule, or a PagedRule for a paged kernel
    block_params: tuple[str, ...] = ()  # the case's block parameters it takes (attention: workloads.attention.BLOCK_PARAMS)
    config: Optional[type] = None  # its typed config (tune.space.KernelConfig): fields, defaults, constraints
    tune_space: Optional[Callable[[Any], list]] = None  # params -> its block-size search (tune.Stage list)
    interpreter_fails: str = ""  # set: the CPU interpreter fails on it, an interpreted row is this skip
    # Where its framework code is, "module:function", for a kernel its backend's registry does not name (one
    # added in its module alone): the worker imports it (backends' ``get``), as a user impl's (docs/kernels.md).
    code: str = ""
    layout: str = "bshd"  # the layout its code takes and returns (attention): "bshd" [B,S,H,D] or "bhsd"

    @property
    def key(self) -> tuple[str, str]:
        return self.info.backend, self.info.name

    @property
    def paged(self) -> bool:
        return self.info.workloads == PAGED
