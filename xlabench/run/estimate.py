"""How long a run will take on a slice, from the recorded times of earlier runs there: a pure function of the
planned cases and the recorded ones (no files, no framework; run/recorded.py reads the records, the CLI
prints the line).

A recorded case's seconds are what its row took in its run (the gap between its row's timestamp and the
row before it, the first from the meta's start): its worker's phases, the parent's work and the worker's
start alike. A planned case takes the seconds of the same case recorded on the slice (its case id, the
newest run first), else of the nearest recorded case of its workload, backend and impl (the parameters'
log2 distance: batch 16 is nearer 8 than 64), else the median of its workload's recorded cases. Where the
planned case chooses its blocks differently from its record (the shipped table now holds it, or does not),
the recorded choosing time (``tune_s``) is swapped for the recorded median of the new way (a table
entry's check, or a search) of the same workload and impl. A case skipped before a worker costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from xlabench.stats.summary import median

# How a case gets its blocks (the row's ``tuned`` column, reduced): searched now, from the shipped table
# (checked by timing), or no choice made here (cache, fixed, off, an impl without blocks).
SEARCH, TABLE, NONE = "search", "table", "none"
LIMIT_S = 600.0  # issue 60: a shipped suite's default profile is budgeted to 10 minutes on one chip


def tune_way(tuned: Any) -> str:
    """A row's ``tuned`` cell as one of SEARCH, TABLE, NONE."""
    return {"search": SEARCH, "table": TABLE}.get(str(tuned or ""), NONE)


@dataclass(frozen=True)
class CaseKey:
    """A case as the estimate matches it: its id, and its impl's group (workload, backend, impl) and params."""

    case_id: str
    workload: str
    backend: str
    impl: str
    params: Mapping[str, Any]

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.workload, self.backend, self.impl)


@dataclass(frozen=True)
class RecordedCase(CaseKey):
    seconds: float  # wall seconds its row took in its run
    tune_s: float = 0.0  # of which choosing its blocks
    tuned: str = NONE  # SEARCH | TABLE | NONE


@dataclass(frozen=True)
class RecordedRun:
    run_id: str
    suite: str
    slice: str  # e.g. "TPU v5 lite x1"
    day: str  # the date it started, YYYY-MM-DD
    cases: tuple[RecordedCase, ...]


@dataclass(frozen=True)
class PlannedCase(CaseKey):
    runs: bool = True  # False: skipped before a worker (no environment, a rule of the impl)
    tune: Optional[str] = None  # how it will choose its blocks: SEARCH | TABLE (None: as its record did)


@dataclass(frozen=True)
class Estimate:
    seconds: float
    slice: str
    runs: tuple[RecordedRun, ...]  # the records its figures come from
    same: int = 0  # planned cases with a record of their own
    near: int = 0  # ... timed as the nearest recorded case
    guessed: int = 0  # ... timed as their workload's median
    skipped: int = 0  # skipped before a worker: no time
    by_group: dict[tuple[str, str, str], float] = field(default_factory=dict)

    def based_on(self, suite: str) -> str:
        """Which runs: 'from 2026-12-07's run of this suite' (or of another suite, or several)."""
        days = sorted({r.day for r in self.runs})
        own = [r for r in self.runs if r.suite == suite]
        what = "run" if len(self.runs) == 1 else "runs"
        whose = "this suite" if len(own) == len(self.runs) else ("this and other suites" if own else "other suites")
        return f"from {' and '.join(days)}'s {what} of {whose}"

    def text(self, suite: str) -> str:
        """The line a run or a dry run prints: about N min on SLICE, from ...; what of it is guessed."""
        parts = [f"{self.same} case(s) recorded"] if self.same else []
        if self.near:
            parts.append(f"{self.near} timed as the nearest recorded case")
        if self.guessed:
            parts.append(f"{self.guessed} as their workload's median")
        return (f"estimate: about {minutes(self.seconds)} on {self.slice}, {self.based_on(suite)}"
                + (f" ({', '.join(parts)})" if parts else ""))


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds < 600 else f"{seconds / 60:.0f} min"


def _number(v: Any) -> Optional[float]:
    if isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x > 0 else None


def distance(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """How far two cases' parameters are: |log2| of each positive number's ratio, 1 for any other value
    that differs (a key one side lacks counts as differing)."""
    d = 0.0
    for k in set(a) | set(b):
        x, y = _number(a.get(k)), _number(b.get(k))
        if x is not None and y is not None:
            d += abs(math.log2(x / y))
        elif str(a.get(k)).lower() != str(b.get(k)).lower():  # a CSV's true is a case's True
            d += 1.0
    return d


def _tune_medians(runs: Sequence[RecordedRun]) -> dict[tuple[tuple[str, str, str], str], float]:
    """(group, SEARCH | TABLE) -> the recorded median seconds of choosing blocks that way; (None-group,
    way) the median over every group."""
    seen: dict[Any, list[float]] = {}
    for r in runs:
        for c in r.cases:
            if c.tuned in (SEARCH, TABLE):
                seen.setdefault((c.group, c.tuned), []).append(c.tune_s)
                seen.setdefault((None, c.tuned), []).append(c.tune_s)
    return {k: median(v) for k, v in seen.items()}


def _retuned(rec: RecordedCase, want: Optional[str], medians: Mapping[Any, float]) -> float:
    """``rec``'s seconds with its blocks chosen the ``want`` way (SEARCH | TABLE; None: as recorded)."""
    if want is None or want == rec.tuned:
        return rec.seconds
    return max(rec.seconds - rec.tune_s, 0.0) + medians.get((rec.group, want), medians.get((None, want), 0.0))


def _lookup(p: PlannedCase, runs: Sequence[RecordedRun]) -> tuple[Optional[RecordedCase], int, str]:
    """(the recorded case timing ``p``, the index of its run, 'same' | 'near'), or (None, -1, '')."""
    for i, r in enumerate(runs):  # in the order given: this suite's newest first
        for c in r.cases:
            if c.case_id == p.case_id:
                return c, i, "same"
    for i, r in enumerate(runs):
        group = [c for c in r.cases if c.group == p.group]
        if group:
            return min(group, key=lambda c: distance(p.params, c.params)), i, "near"
    return None, -1, ""


def estimate(planned: Sequence[PlannedCase], runs: Sequence[RecordedRun]) -> Optional[Estimate]:
    """The run's seconds on the slice the ``runs`` were recorded on (newest first; run/recorded.py picks
    them); None where none was recorded."""
    if not runs:
        return None
    medians = _tune_medians(runs)
    by_workload: dict[str, list[float]] = {}
    whose: dict[str, set[int]] = {}  # workload -> the runs that recorded it
    for i, r in enumerate(runs):
        for c in r.cases:
            by_workload.setdefault(c.workload, []).append(c.seconds)
            whose.setdefault(c.workload, set()).add(i)
    total, counts, used, by_group = 0.0, {"same": 0, "near": 0, "guessed": 0, "skipped": 0}, set(), {}
    for p in planned:
        if not p.runs:
            counts["skipped"] += 1
            continue
        rec, i, how = _lookup(p, runs)
        if rec is not None:
            s = _retuned(rec, p.tune, medians)
            used.add(i)
        else:
            how, s = "guessed", median(by_workload.get(p.workload) or [0.0])
            used |= whose.get(p.workload, set())
        counts[how] += 1
        total += s
        by_group[p.group] = by_group.get(p.group, 0.0) + s
    return Estimate(total, runs[0].slice, tuple(runs[i] for i in sorted(used)) or (runs[0],), counts["same"], counts["near"],
                    counts["guessed"], counts["skipped"], by_group)


def advice(est: Estimate, alternatives: Mapping[str, Optional[Estimate]], limit_s: float = LIMIT_S) -> Optional[str]:
    """Where ``est`` passes ``limit_s``: the alternatives (a profile or filter's words -> its estimate) that
    come under it, the longest first (the most of the suite), else its slowest workload/backend/impl;
    None under the limit."""
    if est.seconds <= limit_s:
        return None
    under = sorted(((e.seconds, what) for what, e in alternatives.items() if e is not None and e.seconds <= limit_s),
                   reverse=True)
    if under:
        return (f"over {minutes(limit_s)}: " + "; ".join(f"{what} takes about {minutes(s)}" for s, what in under[:2]))
    if est.by_group:
        (w, b, i), s = max(est.by_group.items(), key=lambda kv: kv[1])
        return (f"over {minutes(limit_s)}: no profile of the suite comes under it; {b}/{i} takes about {minutes(s)} "
                f"of it (-k or --impl leaves it out)")
    return f"over {minutes(limit_s)}"
