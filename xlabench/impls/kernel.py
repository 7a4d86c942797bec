"""What a kernel module declares (xlabench/impls/kernels/, one module per kernel): its catalogue entries
(ImplInfo, one per backend and workload family it serves) and, where it has them, its skip rule, the
block parameters it takes, its typed config (a tune.space.KernelConfig), its search space, where its code
is (``code``, "module:function", imported by the worker through ``resolve``), its layout, how the train
step runs it and its chart style, together in one Kernel record. Framework-free: the parent plans and
predicts skips from these without a framework, and a code reference is a string until a worker resolves it."""

from __future__ import annotations

import importlib
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


# kv_round(platform) -> the dtype the kernel rounds K/V to there (the reference rounds them too), or None
KvRound = Callable[[str], Optional[str]]


def no_kv_round(platform: str) -> Optional[str]:
    return None


def kv_round_to(dtype: str) -> KvRound:
    """The kernel rounds K/V to ``dtype`` on every platform."""
    return lambda platform: dtype


@dataclass(frozen=True)
class Style:
    """How a kernel's name is drawn in every chart: its colour, line style and bar hatch."""

    colour: str
    linestyle: Any = "-"
    hatch: str = ""


def resolve(code: str) -> Any:
    """The object a ``module:function`` reference names (a kernel record's code), its module imported now."""
    module, _, attr = code.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Kernel:
    """One kernel of one backend for one workload family, as its module declares it."""

    info: ImplInfo  # the catalogue entry
    unsupported: Callable[..., Optional[str]] = no_rule  # an AttentionRule, or a PagedRule for a paged kernel
    block_params: tuple[str, ...] = ()  # the case's block parameters it takes (attention: workloads.attention.BLOCK_PARAMS)
    config: Optional[type] = None  # its typed config (tune.space.KernelConfig): fields, defaults, constraints
    tune_space: Optional[Callable[[Any], list]] = None  # params -> its block-size search (tune.Stage list)
    interpreter_fails: str = ""  # set: the CPU interpreter fails on it, an interpreted row is this skip
    # Where its framework code is, "module:function": the worker imports it (``resolve``). Attention:
    # fn(q, k, v, cfg) in ``layout``; paged: fn(*prepared, cfg) -> [B, nq, Hq, D].
    code: str = ""
    layout: str = "bshd"  # the layout its code takes and returns (attention): "bshd" [B,S,H,D] or "bhsd"
    note: str = ""  # goes into its rows' notes (when it changes the case, e.g. repeats GQA heads)
    # Paged: "module:function" laying the shared inputs out as its code takes them, outside the timing
    # (prepare(q, k_pages, v_pages, lengths, table, cfg) -> args); "": the shared inputs as they are.
    prepare: str = ""
    kv_round: KvRound = no_kv_round  # paged: the dtype it rounds K/V to on a platform (the reference does too)
    cpu_note: str = ""  # what its CPU rows ran, when that is not the kernel (torch_xla's reference paths)
    # A further rule only its worker can apply (it imports the kernel): "module:function", a PagedRule.
    worker_rule: str = ""
    # The train step: whether it calls this kernel at all, and per shard (XLA cannot partition a Pallas
    # custom call: JAX runs it under shard_map; torch_xla builds it from ``sharded``).
    trains: bool = True
    per_shard: bool = False
    sharded: str = ""  # torch_xla: "module:function", fn(acfg, params, mesh, repeat, platform) -> attend(q, k, v)
    style: Optional[Style] = None  # how its name is drawn in charts (one per name: the module's records share it)

    @property
    def key(self) -> tuple[str, str]:
        return self.info.backend, self.info.name

    @property
    def paged(self) -> bool:
        return self.info.workloads == PAGED
