"""Tuning a JAX case's kernel block sizes on the device it runs on (xlabench/tune does the search).

- Compile: every candidate is traced and lowered here, one after another (tracing holds the GIL), then
  compiled on a thread pool as wide as the host's cores (XLA and Mosaic release the GIL). A candidate the
  kernel's own rule refuses is dropped as ``constraint`` before it is traced; a compile error is ``vmem``
  when Mosaic ran out of scoped VMEM, ``oom`` when the program does not fit in device memory, else
  ``compile``.
- Time: one profiler trace per round around every survivor's calls, each executable's device seconds read
  from it by its HLO module name (trace_timer). Every candidate compiled in a process gets a name of its
  own (``xlabench_tune_<program>_<serial>``, the serial never restarts): a round times candidates compiled
  in different descent steps, and a trace holding one name twice would pool their calls (issue 40: a
  38.4 ms candidate timed at 3.7 ms and won). ``time_many`` refuses a trace that holds more executions of
  a module than it made (``PooledTrace``). Where the trace has none (the profiler is busy, an old
  runtime) the round falls back to the wall clock of synced calls, and the outcome says ``clock=wall``.
"""

from __future__ import annotations

import collections
import itertools
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import jax

from xlabench.backends.jax import trace_timer
from xlabench.backends.jax.common import check_fits
from xlabench.protocol.worker_messages import CaseSkipped
from xlabench.stats.summary import median
from xlabench.tune import decide as decide_mod
from xlabench.tune.search import drop_kind, Dropped, Stage
from xlabench.tune.store import TuneKey

# Build(program, blocks) -> (the function of one iteration, its arguments); raises Dropped to prune.
Build = Callable[[str, dict[str, int]], tuple[Callable, Sequence[Any]]]


@dataclass
class Handle:
    """A compiled candidate: the executable, its arguments, its HLO module name (what the trace carries)."""

    compiled: Any
    args: Sequence[Any]
    module: str

    def call(self) -> Any:
        return self.compiled(*self.args)


def versions() -> dict[str, str]:
    """What a tuned winner depends on besides the case: jax, jaxlib and the runtime (libtpu's version and
    build on a TPU: the client's platform_version)."""
    import jaxlib

    client = getattr(jax.devices()[0], "client", None)
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
            "runtime": str(getattr(client, "platform_version", "") or "")}


class PooledTrace(RuntimeError):
    """A trace holds more executions of one module than its handle was called: two executables share a
    name, and their timings would be pooled."""


_SERIAL = itertools.count()  # the candidate names' serial, unique across every search of the process


def _named(fn: Callable, name: str) -> Callable:
    def f(*args: Any) -> Any:
        return fn(*args)

    f.__name__ = f.__qualname__ = name  # the HLO module's name (jit_<name>): unique in the process
    return f


def compile_many(build: Build, program: str, candidates: list[dict[str, int]], jobs: Optional[int] = None) -> list[Any]:
    """A Handle or a Dropped per candidate, in order."""
    lowered: list[Any] = []
    for blocks in candidates:
        try:
            fn, args = build(program, blocks)
            lowered.append((jax.jit(_named(fn, f"xlabench_tune_{program}_{next(_SERIAL)}")).lower(*args), args))
        except Dropped as d:
            lowered.append(d)
        except Exception as e:  # noqa: BLE001 (a kernel's trace-time check: the candidate is dropped, counted)
            lowered.append(Dropped(drop_kind(e), str(e)[:200]))

    def finish(item: Any) -> Any:
        if isinstance(item, Dropped):
            return item
        low, args = item
        try:
            compiled = low.compile()
            check_fits(compiled, jax.devices()[0])
        except CaseSkipped as e:
            return Dropped("oom", str(e)[:200])
        except Exception as e:  # noqa: BLE001
            return Dropped(drop_kind(e), str(e)[:200])
        return Handle(compiled, args, trace_timer.module_name(compiled))

    with ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1)) as pool:
        return list(pool.map(finish, lowered))


def time_many(handles: list[Handle], iters: int) -> tuple[list[float], str]:
    """The median device seconds of ``iters`` synced calls of each handle, from one profiler trace (after
    one untimed call each); the wall clock where the trace has none. A call that fails gives inf."""
    ok: list[bool] = []
    for h in handles:
        try:
            jax.block_until_ready(h.call())
            ok.append(True)
        except Exception:  # noqa: BLE001 (a candidate that fails to run is dropped, counted as 'run')
            ok.append(False)

    def run() -> None:
        for h, good in zip(handles, ok):
            if good:
                for _ in range(iters):
                    jax.block_until_ready(h.call())

    shared = {m for m, n in collections.Counter(h.module for h in handles).items() if n > 1}
    try:
        planes = trace_timer.profiled_planes(run)
        out = []
        for h, good in zip(handles, ok):
            if not good:
                out.append(float("inf"))
                continue
            if h.module in shared:
                raise PooledTrace(f"two candidates share the module name {h.module}: their timings would be pooled")
            seconds = trace_timer.device_seconds(planes, h.module, iters)
            if len(seconds) > iters:
                raise PooledTrace(f"the trace holds {len(seconds)} executions of {h.module}, called {iters} times")
            out.append(median(seconds))
        return out, "device"
    except trace_timer.TraceTimerError:
        pass
    out = []
    for h, good in zip(handles, ok):
        if not good:
            out.append(float("inf"))
            continue
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            jax.block_until_ready(h.call())
            samples.append(time.perf_counter() - t0)
        out.append(median(samples))
    return out, "wall"


Tuned = decide_mod.Tuned


def tuned_blocks(stages: list[Stage], key: TuneKey | dict, build: Build, tune_dir: str,
                 hints: Sequence[TuneKey | dict] = (), row_check: bool = False) -> Tuned:
    """tune.decide.tuned_blocks on this backend's compile_many and time_many (read when called); no candidate
    that compiles and runs is a skipped case. ``row_check``: a table entry is checked by the row's timing."""
    try:
        return decide_mod.tuned_blocks(stages, key, lambda program, cands: compile_many(build, program, cands),
                                       lambda handles, iters: time_many(handles, iters), tune_dir, hints,
                                       row_check=row_check)
    except decide_mod.Unsearchable as e:
        raise CaseSkipped(str(e)) from None


def decide(plan: Any, space: Optional[Callable[[], list[Stage]]], impl: str, key_fields: dict[str, Any],
           build: Build, hints: Sequence[dict[str, Any]] = (), row_check: bool = False) -> Tuned:
    """Every workload's tuning, as the parent's plan decided it (run/case_plan.py: ``plan.tune``): not
    tunable (no space: no columns); ``fixed`` (the suite sets the blocks); ``off`` (with the plan's note:
    an interpreted kernel, --no-tune, CPU by default); ``search``: the winner for this device, impl and case
    (``key_fields``), from the cache in ``plan.tune_dir``, the shipped table (checked by the row's own timing
    where ``row_check``: the Tuned's ``check``) or searched now with ``build`` (starting from a related case's
    cached winner, ``hints``: key fields)."""
    if space is None:
        return Tuned({}, {})
    if plan.tune != "search":
        return Tuned({}, {"tuned": plan.tune}, plan.tune_note)
    if not plan.tune_dir:
        raise ValueError("a tuning search needs the plan's tune_dir (the parent names the cache folder)")
    kind, ver = jax.devices()[0].device_kind, versions()
    key = TuneKey.of(kind, "jax", impl, key_fields, ver)
    return tuned_blocks(space(), key, build, plan.tune_dir, [TuneKey.of(kind, "jax", impl, h, ver) for h in hints],
                        row_check)
