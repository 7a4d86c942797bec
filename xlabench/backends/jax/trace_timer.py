"""The `trace` timer: per-iteration device seconds of a compiled executable, read from a JAX profiler trace.

How the profiler's events are laid out (CPU, TPU, GPU), what the CPU figure is worth and why it is a separate
profiled pass: docs/trace_timer.md.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import tempfile
from typing import Any, Callable, Iterable

import jax

from xlabench.explain.kept import HLO_SUFFIX
from xlabench.units import ns_to_s


class TraceTimerError(Exception):
    """The trace gave no device times for the executable (the message says why)."""


def module_name(compiled: Any) -> str:
    """The HLO module name of a compiled JAX executable (``jit_<function name>``): what its trace events carry."""
    return compiled.runtime_executable().hlo_modules()[0].name


def keep_hlo(compiled: Any, keep_dir: str) -> str:
    """Write the executable's optimized HLO text beside its kept trace, as ``<module>.hlo.txt`` (what
    `xlabench explain` reads the trace's op names against); its path."""
    return keep_hlo_text(compiled.as_text(), keep_dir)


def keep_hlo_text(text: str, keep_dir: str) -> str:
    """``text`` (an optimized HLO module) as ``keep_dir/<module>.hlo.txt``, the module's name from its
    first line; the path."""
    m = re.match(r"HloModule\s+([\w.\-]+)", text)
    os.makedirs(keep_dir, exist_ok=True)
    path = os.path.join(keep_dir, (m.group(1) if m else "module") + HLO_SUFFIX)
    with open(path, "w") as f:
        f.write(text)
    return path


def profiled_seconds(call: Callable[[], Any], sync: Callable[[Any], Any], iters: int, module: str,
                     keep_dir: str | None = None, pipelined: bool = False) -> list[float]:
    """Run ``call`` + ``sync`` ``iters`` times under the JAX profiler; the device seconds of each execution
    of ``module`` found in the trace, in execution order. Raises TraceTimerError if there are none.

    ``pipelined``: each call is dispatched before the previous one is synced (at most two in flight, so
    at most two outputs are alive): the device runs them back to back and the pass costs the device's
    time, as a loop that never waits on each call; each execution's device seconds are its own either way.

    ``keep_dir`` (``xlabench run --trace DIR``): write the trace there, to keep: the ``.xplane.pb`` that
    xprof and TensorBoard open and a ``perfetto_trace.json.gz`` for ui.perfetto.dev."""
    def run() -> None:
        if not pipelined:
            for _ in range(iters):
                sync(call())
            return
        prev = None
        for _ in range(iters):
            out = call()
            if prev is not None:
                sync(prev)
            prev = out
        sync(prev)

    return device_seconds(profiled_planes(run, keep_dir), module, iters)


def profiled_planes(run: Callable[[], None], keep_dir: str | None = None) -> list[Any]:
    """The planes of a JAX profiler trace taken around ``run()`` (one session: the tuner times every
    candidate of a round in one). Raises TraceTimerError when the profiler does not run or writes nothing."""
    opts = jax.profiler.ProfileOptions()
    opts.python_tracer_level = 0
    opts.host_tracer_level = 1
    if keep_dir:
        os.makedirs(keep_dir, exist_ok=True)
    with (contextlib.nullcontext(keep_dir) if keep_dir else tempfile.TemporaryDirectory(prefix="xlabench-trace-")) as tmp:
        try:
            with jax.profiler.trace(tmp, create_perfetto_trace=bool(keep_dir), profiler_options=opts):
                run()
        except RuntimeError as e:  # e.g. another profiler session is active in this process
            raise TraceTimerError(f"the profiler did not run: {e}") from None
        files = glob.glob(os.path.join(tmp, "**", "*.xplane.pb"), recursive=True)
        if not files:
            raise TraceTimerError("the profiler wrote no .xplane.pb")
        return list(jax.profiler.ProfileData.from_file(max(files, key=os.path.getmtime)).planes)


def load_planes(path: str) -> list[Any]:
    """The planes of a kept ``.xplane.pb`` (`xlabench explain` reads them)."""
    return list(jax.profiler.ProfileData.from_file(str(path)).planes)


def _executions(events: list[Any]) -> list[tuple[float, float]]:
    """(start, end) of each execution in start order: the events sharing a ``run_id`` are one, else each
    event is one."""
    spans: dict[Any, list[float]] = {}
    for i, e in enumerate(events):
        span = spans.setdefault(_stats(e).get("run_id", ("event", i)), [float("inf"), float("-inf")])
        span[0] = min(span[0], e.start_ns)
        span[1] = max(span[1], e.start_ns + e.duration_ns)
    return sorted((a, b) for a, b in spans.values())


def _per_call(spans: list[tuple[float, float]], calls: int | None) -> list[tuple[float, float]]:
    """``spans`` as ``calls`` executions where they hold an exact multiple of them (k consecutive each)."""
    if not calls or len(spans) <= calls or len(spans) % calls:
        return spans
    k = len(spans) // calls
    return [(spans[i][0], max(end for _, end in spans[i:i + k])) for i in range(0, len(spans), k)]


def _stats(event: Any) -> dict[str, Any]:
    return dict(event.stats)


def device_seconds(planes: Iterable[Any], module: str, calls: int | None = None) -> list[float]:
    """Per-execution device seconds of ``module`` in a trace's planes (ProfileData.planes), in start order.

    Device planes (``/device:*``): the ``XLA Modules`` events of the module, per device; events that carry
    one ``run_id`` are one execution (their span), and where the caller made ``calls`` synced calls and the
    line holds k times as many events, each call's k consecutive events are one execution (a program the
    runtime runs in parts); an iteration is the longest device. Else the op events carrying
    ``hlo_module == module``, grouped by ``run_id``, each group's span (this is the CPU path)."""
    planes = list(planes)
    per_device: list[list[tuple[float, float]]] = []
    for plane in planes:
        if not plane.name.startswith("/device:"):
            continue
        for line in plane.lines:
            if line.name != "XLA Modules":
                continue
            runs = [e for e in line.events
                    if e.name == module or e.name.startswith(module + "(") or _stats(e).get("hlo_module") == module]
            if runs:
                per_device.append(_per_call(_executions(runs), calls))
    if per_device:
        n = min(len(d) for d in per_device)
        return [ns_to_s(max(d[i][1] - d[i][0] for d in per_device)) for i in range(n)]
    ops = [e for plane in planes for line in plane.lines for e in line.events
           if (st := _stats(e)).get("hlo_module") == module and "run_id" in st]
    if not ops:
        names = sorted(p.name for p in planes)
        raise TraceTimerError(f"no profiler events of the executable {module} (planes: {', '.join(names)})")
    return [ns_to_s(end - start) for start, end in _executions(ops)]
