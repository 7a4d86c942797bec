"""Issue 49 probe: the trace events the tuner reads for the paged kernels on a TPU.

The ragged paged search failed on the v5e with PooledTrace ("the trace holds 6 executions of
jit_xlabench_tune_fwd_8, called 3 times"). This prints, for one paged and one ragged-paged candidate
(batch 16, context 1024, page size 64) compiled as the tuner compiles them and called 3 times in one
trace, every event of the device planes' "XLA Modules" lines with its stats, and what
trace_timer.device_seconds makes of them. Run from the repo root on the TPU host:
    python3 benchmarks/tpu/probe_trace_events.py
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xlabench.backends.jax import paged_impls as impls
from xlabench.backends.jax import trace_timer, tune_case
from xlabench.workloads.paged import PagedParams, cached_inputs


def _case(impl: str) -> tuple:
    """The impl, its config and its device inputs at batch 16, context 1024, page size 64."""
    p = PagedParams(batch=16, context_lens="1024", num_heads=32, num_kv_heads=8, head_dim=128, page_size=64)
    im = impls.get(impl)
    dev = jax.local_devices()[0]
    cfg = p.paged_config(False, "tpu")
    host = cached_inputs(p)
    shared = [jax.device_put(jnp.asarray(host[n], jnp.bfloat16), dev) for n in ("q", "k_pages", "v_pages")]
    shared += [jax.device_put(jnp.asarray(host[n]), dev) for n in ("lengths", "page_table")]
    return im, cfg, im.prepare(*shared, cfg)


def probe(impl: str, blocks: dict[str, int]) -> None:
    im, cfg, args = _case(impl)
    c = cfg.with_blocks(blocks)
    [h] = tune_case.compile_many(lambda program, b: ((lambda *a: im.fn(*a, c)), args), "fwd", [blocks])
    print(f"== {impl} {blocks}: module {getattr(h, 'module', h)}")
    if not isinstance(h, tune_case.Handle):
        return
    jax.block_until_ready(h.call())

    def run() -> None:
        for _ in range(3):
            jax.block_until_ready(h.call())

    planes = trace_timer.profiled_planes(run)
    for plane in planes:
        for line in plane.lines:
            if plane.name.startswith("/device:") and line.name in ("XLA Modules", "Steps", "XLA TraceMe"):
                for e in line.events:
                    print(f"  {plane.name} | {line.name} | {e.name} start={e.start_ns:.0f} dur={e.duration_ns:.0f}"
                          f" stats={dict(e.stats)}")
    try:
        print("  device_seconds:", trace_timer.device_seconds(planes, h.module))
    except Exception as e:  # noqa: BLE001 (a probe: print whatever happens)
        print("  device_seconds failed:", type(e).__name__, e)
    try:
        print("  time_many:", tune_case.time_many([h], 3))
    except Exception as e:  # noqa: BLE001
        print("  time_many failed:", type(e).__name__, e)


def names() -> None:
    """The module names of a ragged search's candidates compiled as one batch (do two share one?)."""
    im, cfg, args = _case("ragged_paged")
    cands = [{"pages_per_compute_block": b, "queries_per_block": q} for b in (4, 8, 16) for q in (8, 16, 32)]

    def build(program: str, b: dict[str, int]):
        c = cfg.with_blocks(b)
        return (lambda *a: im.fn(*a, c)), args

    hs = tune_case.compile_many(build, "fwd", cands)
    for b, h in zip(cands, hs):
        print(f"  {b}: {getattr(h, 'module', h)}")
    good = [h for h in hs if isinstance(h, tune_case.Handle)]
    try:
        print("  time_many:", tune_case.time_many(good, 3))
    except Exception as e:  # noqa: BLE001
        print("  time_many failed:", type(e).__name__, e)


if __name__ == "__main__":
    probe("paged", {"pages_per_compute_block": 16})
    probe("ragged_paged", {"pages_per_compute_block": 8, "queries_per_block": 8})
    probe("ragged_paged", {"pages_per_compute_block": 16, "queries_per_block": 16})
    names()
