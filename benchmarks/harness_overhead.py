"""Harness overhead: xlabench's per-iteration median vs a hand-written block_until_ready loop, and the
trace timer's device median (measure.timer: trace) vs both.

Same process, same compiled function, rounds interleaved so drift hits all alike. Prints the ratio of
medians (goal <= 1.02) and the trace timer's device median beside them (device <= host: the host's
dispatch is outside the device span). A benchmark, not a test: run it on a quiet machine.

    python benchmarks/harness_overhead.py [--seq 512] [--iters 50] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

from xlabench.backends.jax import attention_impls as impls
from xlabench.backends.jax import trace_timer
from xlabench.backends.jax.common import compile_timed, measure
from xlabench.measure.timing import TimingPlan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    shape = (1, a.seq, 4, 64)
    q, k, v = (jax.random.normal(jax.random.PRNGKey(i), shape, jnp.float32) for i in range(3))
    cfg = impls.AttnConfig(causal=True, sm_scale=0.125)
    compiled, _, _ = compile_timed(lambda q, k, v: impls.naive(q, k, v, cfg), (q, k, v))
    plan = TimingPlan(warmup=3, iters=a.iters)

    def hand_loop() -> float:
        for _ in range(3):
            compiled(q, k, v).block_until_ready()
        ts = []
        for _ in range(a.iters):
            t0 = time.perf_counter()
            compiled(q, k, v).block_until_ready()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)

    module = trace_timer.module_name(compiled)

    def traced() -> float:
        secs = trace_timer.profiled_seconds(lambda: compiled(q, k, v), jax.block_until_ready, a.iters, module)
        return statistics.median(secs)

    ours, hand, device = [], [], []
    for _ in range(a.rounds):
        ours.append(measure(compiled, (q, k, v), plan)[0]["median_s"])
        hand.append(hand_loop())
        device.append(traced())
    ratios = [o / h for o, h in zip(ours, hand)]
    print(f"naive attention fwd S={a.seq} H=4 D=64 f32, {a.iters} iters x {a.rounds} rounds")
    print(f"xlabench median {statistics.median(ours) * 1e3:.4f} ms, hand loop {statistics.median(hand) * 1e3:.4f} ms")
    print(f"ratio of medians: {statistics.median(ours) / statistics.median(hand):.4f} "
          f"(per round: {', '.join(f'{r:.3f}' for r in ratios)})")
    d = statistics.median(device)
    print(f"trace timer device median {d * 1e3:.4f} ms: hand loop / device {statistics.median(hand) / d:.4f}, "
          f"xlabench / device (host_overhead) {statistics.median(ours) / d:.4f} "
          f"(per round: {', '.join(f'{o / x:.3f}' for o, x in zip(ours, device))})")


if __name__ == "__main__":
    main()
