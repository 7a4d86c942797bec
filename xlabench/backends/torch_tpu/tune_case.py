"""Tuning a torch_tpu case's kernel blocks on the chip (tune.decide does the deciding): a candidate is a
synced call, made once to compile it; its time is the median device clock of synced calls (TorchTPU's
profiler), as the table's entries were recorded. A kernel that is
the JAX backend's (splash_sdpa, flash through jax_op) starts from the shipped table's JAX entry for the case,
verified here, where the table holds none of its own."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch

from xlabench.backends.torch_tpu.common import profiled_seconds, surface
from xlabench.backends.torch_tpu import env
from xlabench.protocol.worker_messages import CaseSkipped
from xlabench.stats.summary import median
from xlabench.tune import decide as decide_mod
from xlabench.tune.search import drop_kind, Dropped, Stage
from xlabench.tune.store import TuneKey

# Build(program, blocks) -> the call of one iteration at those blocks; raises Dropped to prune.
Build = Callable[[str, dict[str, int]], Callable[[], Any]]
TABLE_BACKENDS = ("jax",)  # the same Pallas kernels, tuned from JAX: their entries stand in for torch_tpu's


@dataclass
class Handle:
    call: Callable[[], Any]


def compile_many(build: Build, program: str, candidates: list[dict[str, int]]) -> list[Any]:
    """A Handle or a Dropped per candidate: each built and called once (TorchTPU compiles on the first call)."""
    out: list[Any] = []
    for blocks in candidates:
        try:
            call = build(program, blocks)
            surface(call())
            env.sync()
            out.append(Handle(call))
        except Dropped as d:
            out.append(d)
        except Exception as e:  # noqa: BLE001 (a candidate that does not compile is dropped, counted)
            out.append(Dropped(drop_kind(e), str(e)[:200]))
            print(f"tune {program}: {blocks} dropped: {type(e).__name__}: {str(e)[:400]}", file=sys.stderr, flush=True)
    return out


def time_many(handles: list[Handle], iters: int) -> tuple[list[float], str]:
    """The median device seconds of ``iters`` synced calls of each handle, from a profiler trace each (the
    clock the table's entries were recorded on); the wall clock of synced calls for every handle where any
    trace gives none. A handle whose calls fail gives inf."""
    device: list[float] = []
    for h in handles:
        try:
            got = profiled_seconds(h.call, iters)
        except Exception:  # noqa: BLE001 (a candidate that fails to run is dropped, counted as 'run')
            got = (float("inf"),)
        if isinstance(got, str):
            break
        device.append(median(got))
    else:
        return device, "device"
    return [_wall(h, iters) for h in handles], "wall"


def _wall(h: Handle, iters: int) -> float:
    try:
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            h.call()
            env.sync()
            samples.append(time.perf_counter() - t0)
        return median(samples)
    except Exception:  # noqa: BLE001
        return float("inf")


def versions() -> dict[str, str]:
    return {"torch": torch.__version__, "torch_tpu": env.version("torch-tpu"), "jax": env.version("jax"),
            "runtime": env.version("libtpu")}


def decide(plan: Any, space: Optional[Callable[[], list[Stage]]], impl: str, key_fields: dict[str, Any],
           build: Build, hints: Sequence[dict[str, Any]] = (), row_check: bool = False) -> decide_mod.Tuned:
    """As the JAX backend's: nothing to tune, the plan's ``fixed`` / ``off``, or the winner for this chip,
    kernel and case from the cache, the table (its own entry, else JAX's; checked by the row's own timing
    where ``row_check``: the Tuned's ``check``) or a search now."""
    if space is None:
        return decide_mod.Tuned({}, {})
    if plan.tune != "search":
        return decide_mod.Tuned({}, {"tuned": plan.tune}, plan.tune_note)
    if not plan.tune_dir:
        raise ValueError("a tuning search needs the plan's tune_dir (the parent names the cache folder)")
    kind, ver = env.device_kind(), versions()
    key = TuneKey.of(kind, "torch_tpu", impl, key_fields, ver)
    try:
        return decide_mod.tuned_blocks(space(), key, lambda program, cands: compile_many(build, program, cands),
                                       time_many, plan.tune_dir,
                                       [TuneKey.of(kind, "torch_tpu", impl, h, ver) for h in hints], TABLE_BACKENDS,
                                       row_check=row_check)
    except decide_mod.Unsearchable as e:
        raise CaseSkipped(str(e)) from None
