"""Split a suite's cases across machines: a deterministic, cost-balanced 1/N of the cases per shard.

Balanced by an estimate of each case's cost (not by count): a fixed per-case overhead for worker start
and compilation plus the analytic FLOPs of all its iterations. Greedy longest-first assignment (LPT) over
cases sorted by (cost, case_id) gives the same split on every machine and every run.
"""

from __future__ import annotations

import heapq
import re
from typing import Sequence

from xlabench.suite import Case
from xlabench.workloads import params_model

# Rough CPU/TPU-agnostic constants: what matters is the ratio between cases of one suite.
CASE_OVERHEAD = 1.0  # compile + launch, in "seconds-equivalents"
FLOPS_PER_UNIT = 1e11


def parse_shard(spec: str) -> tuple[int, int]:
    """'I/N' with 0 <= I < N -> (I, N); ValueError with the expected form otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec or "")
    if not m:
        raise ValueError(f"--shard {spec!r}: expected I/N, e.g. 0/3 (shard I of N, counted from 0)")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"--shard {spec!r}: need N >= 1 and 0 <= I < N")
    return i, n


def estimated_cost(case: Case) -> float:
    params = params_model(case.workload)(**case.params)
    try:
        flops = float(params.flops()) if hasattr(params, "flops") else 0.0
    except ValueError:  # train global_batch auto: unknown until the worker has found the batch
        flops = 0.0
    iters = case.measure.warmup + case.measure.iters
    return CASE_OVERHEAD + flops * iters / FLOPS_PER_UNIT


def assign(cases: Sequence[Case], n: int) -> list[int]:
    """Shard index of every case (same order as ``cases``)."""
    order = sorted(range(len(cases)), key=lambda i: (-estimated_cost(cases[i]), cases[i].case_id))
    loads = [(0.0, s) for s in range(n)]
    heapq.heapify(loads)
    out = [0] * len(cases)
    for i in order:
        load, s = heapq.heappop(loads)
        out[i] = s
        heapq.heappush(loads, (load + estimated_cost(cases[i]), s))
    return out


def select(cases: Sequence[Case], index: int, n: int) -> list[Case]:
    """The cases of shard ``index`` of ``n``, in suite order."""
    shards = assign(cases, n)
    return [c for c, s in zip(cases, shards) if s == index]
