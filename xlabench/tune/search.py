"""The staged search, framework-free: compile every candidate of a stage (the backend compiles them in
parallel), drop those that do not compile, counting each reason, time the survivors with few iterations,
keep the fastest share, time those again with more, keep the winner; the next stage (e.g. the backward
pass's blocks) searches with the earlier winners fixed. The default candidate is carried to the last
round, so the outcome says what tuning bought (``default_s``).

What compiles and times a candidate is passed in (``compile_many``, ``time_many``): tests drive the search
on a fake device clock, the JAX backend on the chip's (backends/jax/tune_case.py)."""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from xlabench.tune.space import Blocks, blocks_text, frozen

# Iterations per candidate in the first (all survivors) and the last (the fastest share) round.
ROUNDS = (3, 10)
KEEP = 1 / 3  # share of the first round's survivors timed again
MIN_KEEP = 3


class Dropped(Exception):
    """A candidate that cannot run: ``kind`` is the counted reason (constraint, vmem, oom, compile, run)."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail


class NoCandidate(Exception):
    """Every candidate of a stage was dropped (the message counts the reasons)."""


@dataclass(frozen=True)
class Stage:
    """One stage of a search: the program its candidates compile (a tag the backend knows, e.g. fwd or
    fwd_bwd), the candidates (each adds its keys to the earlier stages' winners) and this stage's default."""

    program: str
    candidates: tuple[Blocks, ...]
    default: Blocks = field(default_factory=dict)


@dataclass(frozen=True)
class TuneOutcome:
    """What a search found: the winner, its time and the default's on the same clock, what it cost."""

    blocks: Mapping[str, int]
    best_s: float
    default_s: Optional[float]
    tried: int  # candidates compiled or pruned, over every stage
    timed: int  # candidate timings taken (first and last rounds)
    dropped: Mapping[str, int]  # reason -> candidates
    tune_s: float
    clock: str  # device | wall: which clock time_many read

    def dropped_text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(self.dropped.items()))


CompileMany = Callable[[str, list[dict[str, int]]], list[Any]]  # a handle, or a Dropped, per candidate
TimeMany = Callable[[list[Any], int], tuple[list[float], str]]  # median seconds per handle, and the clock


def search(stages: Sequence[Stage], compile_many: CompileMany, time_many: TimeMany, *, rounds: tuple[int, int] = ROUNDS,
           keep: float = KEEP, min_keep: int = MIN_KEEP, fixed: Blocks | None = None,
           now: Callable[[], float] = time.perf_counter, log: Callable[[str], None] = lambda s: None) -> TuneOutcome:
    """Search ``stages`` in order; ``fixed``: blocks known before the first stage (an earlier search's)."""
    if not stages:
        raise ValueError("search: no stages")
    started = now()
    chosen: dict[str, int] = dict(fixed or {})
    full_default: dict[str, int] = {}
    for st in stages:
        full_default.update(st.default)
    dropped: Counter[str] = Counter()
    tried = timed = 0
    best_s: float = math.inf
    default_s: Optional[float] = None
    clock = "wall"
    for i, st in enumerate(stages):
        last = i == len(stages) - 1
        cands = list(dict.fromkeys(frozen({**chosen, **c}) for c in st.candidates))
        default_key = frozen({**chosen, **full_default}) if last and full_default else None
        if default_key is not None and default_key not in cands:
            cands.append(default_key)
        handles = compile_many(st.program, [dict(c) for c in cands])
        tried += len(cands)
        alive: list[tuple[tuple, Any]] = []
        for c, h in zip(cands, handles):
            if isinstance(h, Dropped):
                dropped[h.kind] += 1
            else:
                alive.append((c, h))
        log(f"stage {st.program}: {len(alive)} of {len(cands)} candidates compiled")
        if not alive:
            raise NoCandidate(f"stage {st.program}: none of {len(cands)} candidates runs "
                              f"({' '.join(f'{k}={v}' for k, v in sorted(dropped.items()))})")
        first, clock = _timed(alive, rounds[0], time_many, dropped) if len(alive) > min_keep else (alive, clock)
        timed += len(alive) if len(alive) > min_keep else 0
        n_keep = max(min_keep, math.ceil(keep * len(first)))
        finalists = [c for c, _ in first[:n_keep]]
        if default_key is not None and default_key not in finalists and any(c == default_key for c, _ in first):
            finalists.append(default_key)
        final_in = [(c, h) for c, h in alive if c in finalists]
        final, clock = _timed(final_in, rounds[1], time_many, dropped, keep_times=True)
        timed += len(final_in)
        if not final:
            raise NoCandidate(f"stage {st.program}: every finalist failed to run")
        (winner, best_s) = final[0]
        chosen = dict(winner)
        if default_key is not None:
            default_s = next((t for c, t in final if c == default_key), None)
        log(f"stage {st.program}: {blocks_text(chosen)} {best_s * 1e3:.4g} ms")
    return TuneOutcome(blocks=chosen, best_s=best_s, default_s=default_s, tried=tried, timed=timed,
                       dropped=dict(dropped), tune_s=now() - started, clock=clock)


def _timed(alive: list[tuple[tuple, Any]], iters: int, time_many: TimeMany, dropped: Counter,
           keep_times: bool = False) -> tuple[list, str]:
    """The candidates sorted by their median time (a failed run is dropped as 'run'); with ``keep_times``
    (candidate, seconds) pairs, else (candidate, handle) pairs."""
    seconds, clock = time_many([h for _, h in alive], iters)
    ranked = []
    for (c, h), t in zip(alive, seconds):
        if t is None or not math.isfinite(t) or t <= 0:
            dropped["run"] += 1
            continue
        ranked.append((t, c, h))
    ranked.sort(key=lambda x: (x[0], x[1]))
    return ([(c, t) for t, c, _ in ranked] if keep_times else [(c, h) for _, c, h in ranked]), clock
