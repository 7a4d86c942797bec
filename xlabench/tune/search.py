"""The staged search, framework-free: compile a stage's candidates (the backend compiles each batch in
parallel), drop those that do not compile, counting each reason, time the survivors with few iterations,
keep the fastest share, time those again with more, keep the winner; the next stage (e.g. the backward
pass's blocks) searches with the earlier winners fixed. The default candidate is carried to the last
round, so the outcome says what tuning bought (``default_s``).

A stage compiles every candidate (the grid), or, when it names seeds, descends from them: compiling is
what a search costs (on the v5e, 15 s per case for grids of 25-60 candidates, lowering one at a time), so
a descent compiles the seeds and then only the neighbours of the fastest so far (one block one size up or
down) until none is faster.

What compiles and times a candidate is passed in (``compile_many``, ``time_many``): tests drive the search
on a fake device clock, the JAX backend on the chip's (backends/jax/tune_case.py)."""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Optional, Sequence

from xlabench.tune.space import Blocks, Candidate, blocks_text, frozen, near
from xlabench.units import to_ms

# Iterations per candidate in the first (all survivors) and the last (the fastest share) round.
ROUNDS = (3, 10)
# How far the winner's and the default's times, taken again side by side in a fresh trace after the search,
# may differ from the search's own before it is searched once more (checked_search)
CHECK_TOL = 0.15
KEEP = 1 / 3  # share of the first round's survivors timed again
MIN_KEEP = 3


class Dropped(Exception):
    """A candidate that cannot run: ``kind`` is the counted reason (constraint, vmem, oom, compile, run)."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail


def drop_kind(e: BaseException) -> str:
    """A failed candidate's kind from its error's text, any backend: ``vmem`` (Mosaic's scoped VMEM), ``oom``
    (the device's memory), else ``compile``."""
    text = str(e).lower()
    if "vmem" in text or "scoped memory" in text:
        return "vmem"
    if "resource_exhausted" in text or "out of memory" in text or "does not fit" in text:
        return "oom"
    return "compile"


class NoCandidate(Exception):
    """Every candidate of a stage was dropped (the message counts the reasons)."""


@dataclass(frozen=True)
class Stage:
    """One stage of a search: the program its candidates compile (a tag the backend knows, e.g. fwd or
    fwd_bwd), the candidates (each adds its keys to the earlier stages' winners) and this stage's default."""

    program: str
    candidates: tuple[Candidate, ...]  # hashable (a dict given is made one)
    default: Blocks = field(default_factory=dict)
    # Where a descent starts (e.g. the square blocks); empty: every candidate is compiled and timed (the grid)
    seeds: tuple[Candidate, ...] = ()
    # This stage's field -> an earlier stage's: the descent starts at the earlier winner's sizes (and each
    # one size smaller: space.near) where they are candidates, else at ``seeds`` (the backward blocks
    # start at the forward ones)
    follow: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:  # every candidate and seed hashable (a kernel's space may list plain dicts)
        object.__setattr__(self, "candidates", tuple(Candidate.of(c) for c in self.candidates))
        object.__setattr__(self, "seeds", tuple(Candidate.of(c) for c in self.seeds))


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
    # the winner and the default timed again after the search (checked_search): ok | searched twice | disagrees: ...
    check: str = ""

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
    run = _Run(compile_many, time_many)
    best_s: float = math.inf
    default_s: Optional[float] = None
    for i, st in enumerate(stages):
        last = i == len(stages) - 1
        cands = list(dict.fromkeys(frozen({**chosen, **c}) for c in st.candidates))
        default_key = frozen({**chosen, **full_default}) if last and full_default else None
        if default_key is not None and default_key not in cands:
            cands.append(default_key)
        winner, best_s, default_s = _stage(st, cands, default_key, chosen, run, rounds, keep, min_keep, log)
        chosen = dict(winner)
        log(f"stage {st.program}: {blocks_text(chosen)} {to_ms(best_s):.4g} ms")
    return TuneOutcome(blocks=chosen, best_s=best_s, default_s=default_s, tried=run.tried, timed=run.timed,
                       dropped=dict(run.dropped), tune_s=now() - started, clock=run.clock)


@dataclass
class _Run:
    """What a search has compiled and timed so far, and what it dropped (every stage adds to it)."""

    compile_many: CompileMany
    time_many: TimeMany
    dropped: Counter = field(default_factory=Counter)
    tried: int = 0
    timed: int = 0
    clock: str = "wall"

    def compile(self, program: str, keys: list[tuple], handles: dict[tuple, Any], seen: set[tuple]) -> list[tuple]:
        """Compile the ``keys`` not ``seen`` yet; the ones that compiled (their handles into ``handles``)."""
        keys = [k for k in dict.fromkeys(keys) if k not in seen]
        seen.update(keys)
        if not keys:
            return []
        self.tried += len(keys)
        alive = []
        for k, h in zip(keys, self.compile_many(program, [dict(k) for k in keys])):
            if isinstance(h, Dropped):
                self.dropped[h.kind] += 1
            else:
                handles[k] = h
                alive.append(k)
        return alive

    def time(self, keys: list[tuple], iters: int, handles: dict[tuple, Any], into: dict[tuple, float]) -> None:
        """Median seconds of each key into ``into``; one that fails to run is dropped ('run') and forgotten."""
        if not keys:
            return
        seconds, self.clock = self.time_many([handles[k] for k in keys], iters)
        self.timed += len(keys)
        for k, t in zip(keys, seconds):
            if t is None or not math.isfinite(t) or t <= 0:
                self.dropped["run"] += 1
                handles.pop(k, None)
                into.pop(k, None)
            else:
                into[k] = t


def _fastest(times: Mapping[tuple, float]) -> list[tuple]:
    return sorted(times, key=lambda k: (times[k], k))


def neighbours(key: tuple, cands: Sequence[tuple], names: Sequence[str]) -> list[tuple]:
    """The candidates one step away from ``key``: one of ``names`` moved to the next smaller or larger size
    that the candidates hold for it, every other field the same."""
    have = set(cands)
    values = {n: sorted({dict(c)[n] for c in cands if n in dict(c)}) for n in names}
    d, out = dict(key), []
    for n in names:
        vs = values[n]
        if n not in d or d[n] not in vs:
            continue
        i = vs.index(d[n])
        for j in (i - 1, i + 1):
            if 0 <= j < len(vs) and frozen({**d, n: vs[j]}) in have:
                out.append(frozen({**d, n: vs[j]}))
    return out


def _stage(st: Stage, cands: list[tuple], default_key: Optional[tuple], chosen: Blocks, run: _Run, rounds: tuple[int, int],
           keep: float, min_keep: int, log: Callable[[str], None]) -> tuple[tuple, float, Optional[float]]:
    """(winner, its seconds, the default's seconds or None) of one stage.

    Without seeds every candidate is compiled (the grid). With seeds (``Stage.seeds``) the stage descends:
    the seeds (and the default) are compiled and timed, then the untried neighbours of the fastest so far
    (``neighbours``: one field one size up or down), until the fastest has no untried neighbour or none of
    them is faster. Either way the fastest share is timed again with more iterations, the default with it."""
    handles: dict[tuple, Any] = {}
    seen: set[tuple] = set()
    first: dict[tuple, float] = {}
    extra = [default_key] if default_key is not None else []
    # a followed stage starts at the earlier winner's sizes, its other fields at this stage's default
    start = near({**st.default, **{dst: chosen[src] for dst, src in st.follow.items() if src in chosen}},
                 st.candidates) if st.follow else ()
    have = set(cands)
    seeds = [s for s in dict.fromkeys(frozen({**chosen, **s}) for s in (start or st.seeds)) if s in have]
    if seeds:
        alive = run.compile(st.program, seeds + extra, handles, seen)
        if not any(k in handles for k in seeds):  # every seed dropped: the grid after all
            alive += run.compile(st.program, cands, handles, seen)
        run.time(alive, rounds[0], handles, first)
        names = sorted({n for c in st.candidates for n in c})
        while first:
            best = _fastest(first)[0]
            fresh = run.compile(st.program, neighbours(best, cands, names), handles, seen)
            run.time(fresh, rounds[0], handles, first)
            if not fresh or _fastest(first)[0] == best:
                break
        log(f"stage {st.program}: descended over {len(seen)} of {len(cands)} candidates")
        finalists_from = _fastest(first)
    else:
        alive = run.compile(st.program, cands, handles, seen)
        log(f"stage {st.program}: {len(alive)} of {len(cands)} candidates compiled")
        if len(alive) > min_keep:
            run.time(alive, rounds[0], handles, first)
            finalists_from = _fastest(first)
        else:
            finalists_from = alive
    if not handles:
        raise NoCandidate(f"stage {st.program}: none of {len(seen)} candidates runs "
                          f"({' '.join(f'{k}={v}' for k, v in sorted(run.dropped.items()))})")
    finalists = finalists_from[:max(min_keep, math.ceil(keep * len(finalists_from)))]
    if default_key is not None and default_key in handles and default_key not in finalists:
        finalists.append(default_key)
    final: dict[tuple, float] = {}
    run.time([k for k in finalists if k in handles], rounds[1], handles, final)
    if not final:
        raise NoCandidate(f"stage {st.program}: every finalist failed to run")
    winner = _fastest(final)[0]
    return winner, final[winner], (final.get(default_key) if default_key is not None else None)


def checked_search(stages: Sequence[Stage], compile_many: CompileMany, time_many: TimeMany, *,
                   tol: float = CHECK_TOL, rounds: tuple[int, int] = ROUNDS, fixed: Blocks | None = None,
                   now: Callable[[], float] = time.perf_counter, log: Callable[[str], None] = lambda s: None,
                   **kw: Any) -> TuneOutcome:
    """``search``, then its winner and the default compiled again under names of their own and timed side
    by side in a fresh trace (``rounds[1]`` calls each). Where either differs from the search's figure by
    more than ``tol``, search once more; where they still differ, keep the faster of the two re-timed
    configurations, with the re-timed seconds, and say so in ``check`` (the row shows it)."""
    started = now()
    program = stages[-1].program
    default: dict[str, int] = dict(fixed or {})
    for st in stages:
        default.update(st.default)
    tried = timed = 0
    for attempt in (1, 2):
        out = search(stages, compile_many, time_many, rounds=rounds, fixed=fixed, now=now, log=log, **kw)
        tried, timed = tried + out.tried, timed + out.timed
        again = _retime(program, dict(out.blocks), default if len(default) > len(fixed or {}) else None,
                        compile_many, time_many, rounds[1])
        off = _disagreement(out, again, tol)
        log(f"check: winner {_ms(again.get('winner'))} (search {_ms(out.best_s)}), default "
            f"{_ms(again.get('default'))} (search {_ms(out.default_s)}){': ' + off if off else ''}")
        common = dict(tried=tried, timed=timed + len(again), tune_s=now() - started)
        if not off:
            return replace(out, check="ok" if attempt == 1 else "searched twice", **common)
    faster = "winner" if again.get("default") is None or again.get("winner", math.inf) <= again["default"] else "default"
    blocks = dict(out.blocks) if faster == "winner" else default
    return replace(out, blocks=blocks, best_s=again[faster], default_s=again.get("default"),
                   check=f"disagrees after two searches ({off}): kept the {faster}'s blocks, re-timed", **common)


def _ms(s: Optional[float]) -> str:
    return "-" if s is None else f"{to_ms(s):.4g} ms"


def _retime(program: str, winner: dict[str, int], default: Optional[dict[str, int]], compile_many: CompileMany,
            time_many: TimeMany, iters: int, clock: Optional[list[str]] = None) -> dict[str, float]:
    """{'winner': s, 'default': s}: each compiled afresh and timed in one trace (one that fails is left out);
    ``clock`` receives the clock they were timed on."""
    named = {"winner": winner, **({"default": default} if default is not None and default != winner else {})}
    handles = compile_many(program, list(named.values()))
    alive = [(n, h) for n, h in zip(named, handles) if not isinstance(h, Dropped)]
    if not alive:
        return {}
    seconds, on = time_many([h for _, h in alive], iters)
    if clock is not None:
        clock.append(on)
    out = {n: t for (n, _), t in zip(alive, seconds) if t is not None and math.isfinite(t) and t > 0}
    if default is not None and default == winner and "winner" in out:
        out["default"] = out["winner"]
    return out


def verify(stages: Sequence[Stage], blocks: Mapping[str, int], recorded_s: float, compile_many: CompileMany,
           time_many: TimeMany, *, tol: float = CHECK_TOL, iters: int = ROUNDS[1], fixed: Blocks | None = None,
           now: Callable[[], float] = time.perf_counter) -> tuple[Optional[TuneOutcome], str]:
    """A recorded winner (a shipped table's entry) checked on this machine as checked_search checks its own:
    ``blocks`` and the stages' default compiled afresh and timed side by side (``iters`` calls each).
    (the outcome at the re-timed figures, "") when the winner ran within ``tol`` of ``recorded_s`` and no
    slower than the default; else (None, why not), and the caller searches."""
    started = now()
    default: dict[str, int] = dict(fixed or {})
    for st in stages:
        default.update(st.default)
    clock: list[str] = []
    winner = {**dict(fixed or {}), **dict(blocks)}
    again = _retime(stages[-1].program, winner, default if len(default) > len(fixed or {}) else None,
                    compile_many, time_many, iters, clock)
    t, d = again.get("winner"), again.get("default")
    why = []
    if t is None:
        why.append("its blocks did not compile or run here")
    elif abs(t / recorded_s - 1) > tol:
        why.append(f"re-timed at {_ms(t)}, more than {tol:.0%} off its recorded {_ms(recorded_s)}")
    if t is not None and d is not None and t > d:
        why.append(f"slower than the default blocks ({_ms(t)} against {_ms(d)})")
    if why:
        return None, "; ".join(why)
    assert t is not None
    return TuneOutcome(blocks=winner, best_s=t, default_s=d, tried=0, timed=len(again), dropped={},
                       tune_s=now() - started, clock=clock[0] if clock else "wall", check="ok"), ""


def _disagreement(out: TuneOutcome, again: Mapping[str, float], tol: float) -> str:
    """Why the re-timed figures do not confirm the search's (empty: they do)."""
    why = []
    for name, searched in (("winner", out.best_s), ("default", out.default_s)):
        if searched is None:
            continue
        t = again.get(name)
        if t is None:
            why.append(f"the {name} did not run again")
        elif abs(t / searched - 1) > tol:
            why.append(f"the {name} took {_ms(t)} against the search's {_ms(searched)}")
    return "; ".join(why)
