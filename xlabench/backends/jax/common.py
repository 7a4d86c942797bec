"""Pieces every JAX workload uses: AOT compile with separate timings, peak memory, sync, errors."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from xlabench.measure import timing as harness
from xlabench.backends.jax.aot import CompileOom, lower_and_compile
from xlabench.backends.jax import trace_timer
from xlabench.protocol.worker_messages import CaseSkipped
from xlabench.measure.timing import TimingPlan, time_calls
from xlabench.units import GIB


def compile_timed(fn: Callable, args: Sequence[Any], **jit_kwargs) -> tuple[Any, float, float]:
    """jax.jit(fn).lower(*args).compile(), timing lowering and compilation separately.

    On an accelerator a program that will not fit is a skipped case with the figures (CaseSkipped), never
    an out-of-memory crash mid-run: XLA refuses it at compile time, or its memory analysis exceeds the
    device's limit."""
    try:
        compiled, lower_s, compile_s = lower_and_compile(fn, args, **jit_kwargs)
    except CompileOom as oom:
        raise CaseSkipped(f"does not fit in device memory: {oom_text(oom.used, oom.capacity, str(oom))}") from None
    check_fits(compiled, jax.devices()[0])
    return compiled, lower_s, compile_s


def runs_pallas(fn: Callable, args: Sequence[Any]) -> bool:
    """Whether ``fn`` on ``args`` runs a Pallas kernel: a pallas_call anywhere in its jaxpr (inside jit, vjp
    and custom-derivative sub-programs too). A user impl of plain jnp ops runs none, interpreted or not."""

    def walk(jaxpr: Any) -> bool:
        jaxpr = getattr(jaxpr, "jaxpr", jaxpr)  # a ClosedJaxpr's open one
        for eqn in getattr(jaxpr, "eqns", ()):
            if eqn.primitive.name == "pallas_call":
                return True
            subs = [v for p in eqn.params.values() for v in (p if isinstance(p, (tuple, list)) else (p,))]
            if any(walk(v) for v in subs if hasattr(v, "eqns") or hasattr(getattr(v, "jaxpr", None), "eqns")):
                return True
        return False

    return walk(jax.make_jaxpr(fn)(*args))


def oom_text(needed: int | None, capacity: int | None, detail: str = "") -> str:
    """'needs 16.50 GiB per device, has 15.75 GiB' (with what XLA said, when given)."""
    gib = lambda b: f"{b / GIB:.2f} GiB"  # noqa: E731
    text = (f"needs {gib(needed)} per device, has {gib(capacity)}" if needed and capacity else
            "more than the device's memory")
    return text + (f" ({detail[:300]})" if detail else "")


def check_fits(compiled: Any, device: Any) -> None:
    """CaseSkipped when the compiled program's per-device memory exceeds what the device can hold.

    Only devices that report a limit (TPU, GPU: ``memory_stats()['bytes_limit']``) are checked."""
    try:
        limit = (device.memory_stats() or {}).get("bytes_limit")
        ma = compiled.memory_analysis()
    except Exception:
        return
    if not limit or ma is None:
        return
    total = ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes - ma.alias_size_in_bytes
    if total > limit:
        raise CaseSkipped(f"does not fit in device memory: {oom_text(total, limit)} "
                          "(XLA memory_analysis: arguments+outputs+temps-aliases)")


def peak_memory(compiled: Any, device: Any) -> tuple[int | None, str]:
    """Peak device bytes of this case's program: XLA's memory_analysis (arguments + outputs + temps).

    The allocator's peak_bytes_in_use is a high-water mark of the whole worker process, which runs many
    cases, so it is only the fallback (and labelled so) where XLA gives no analysis.
    """
    try:
        ma = compiled.memory_analysis()
        total = (ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
                 - ma.alias_size_in_bytes)
        return int(total), "peak memory: XLA memory_analysis (arguments+outputs+temps)"
    except Exception:
        pass
    try:
        stats = device.memory_stats()
    except Exception:
        stats = None
    if stats and "peak_bytes_in_use" in stats:
        return int(stats["peak_bytes_in_use"]), "peak memory: allocator high-water mark of the worker process"
    return None, "peak memory: not reported by this backend"


def kernel_passes(compiled: Any, args: Sequence[Any], plan: TimingPlan) -> tuple[list[float], Any, tuple[float, ...] | str]:
    """A kernel's wall-clock loop, then its device clock's pass (trace_pass): (samples, the last output, the
    device seconds). Where the parent made the device clock the headline (``plan.headline``), the wall loop
    takes ``iters`` calls and the device pass ``min_time_s``, its calls back to back."""
    samples, out = time_calls(lambda: compiled(*args), jax.block_until_ready, harness.passes(plan))
    iters = harness.device_iters(plan, samples)
    traced = trace_pass(compiled, lambda: compiled(*args), plan, iters, pipelined=plan.headline == "device")
    return samples, out, traced


def trace_pass(compiled: Any, call: Callable[[], Any], plan: TimingPlan, iters: int,
               pipelined: bool = False) -> tuple[float, ...] | str:
    """``measure.timer: trace``: ``iters`` more calls under the profiler (after the wallclock loop, see
    backends/jax/trace_timer.py for why a separate pass), synced one by one or ``pipelined`` (back to back),
    their device seconds; or, when the trace has none for this executable, the reason (a string). () with
    the wallclock timer. A kept trace (``plan.trace_dir``) gets the executable's optimized HLO beside it."""
    if not plan.device_timed:
        return ()
    if plan.trace_dir:  # the trace is kept: its executable's HLO goes beside it (xlabench explain)
        trace_timer.keep_hlo(compiled, plan.trace_dir)
    try:
        return tuple(trace_timer.profiled_seconds(call, jax.block_until_ready, iters,
                                                  trace_timer.module_name(compiled), keep_dir=plan.trace_dir,
                                                  pipelined=pipelined))
    except trace_timer.TraceTimerError as e:
        return str(e)


def device_error_parts(out: Any, ref: Any) -> tuple[bool, float, float]:
    """measure.timing.max_normalised_error's parts of one pair (all finite, max|ref|, max|out - ref|), reduced
    on the arrays' device: only three scalars per pair come to the host, not the tensors (on the v5e, copying
    and scanning four 134 MB float32 tensors a case cost 1.5-2 s)."""
    finite, scale, diff = (float(x) for x in np.asarray(_error_parts(out, ref)))
    return bool(finite), scale, diff


@jax.jit
def _error_parts(o: Any, r: Any) -> Any:
    """(all finite, max|r|, max|o - r|) of one output and its reference, in float32."""
    o, r = jnp.asarray(o, jnp.float32), jnp.asarray(r, jnp.float32)
    return jnp.stack([jnp.all(jnp.isfinite(o)).astype(jnp.float32), jnp.max(jnp.abs(r)), jnp.max(jnp.abs(o - r))])
