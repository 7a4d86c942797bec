"""Which blocks a case runs at, framework-free: the first layer of the tuning store (tune/store.py: the user's
tuning cache, else the shipped table's entry; a suite-pinned case was answered before, at the suite's expansion)
that answers, else a search (tune.search), each winner stored in the cache. A backend supplies what compiles and times a
candidate (tune.search's CompileMany and TimeMany).

A table entry is checked once, on this machine. Where the case's row times the kernel alone (an attention
or paged case: ``row_check``), the row runs at the entry's blocks untimed beforehand and its own timing is the
check (``RowCheck.settle``): within CHECK_TOL of the entry's record (scaled by the batch) the row keeps it,
``default_s`` and ``tune_best_s`` being the record's (``tune_check`` ROW_OK); off it, the case is searched and
the row timed again at the winner. Elsewhere (a train step's attention, whose step timing is not the
kernel's) the entry and the default are re-timed side by side first (search.verify), as before."""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from xlabench.tune import table
from xlabench.tune.cache import Lookup, space_fingerprint
from xlabench.tune.search import (CHECK_TOL, CompileMany, NoCandidate, Stage, TimeMany, TuneOutcome, checked_search,
                                  verify)
from xlabench.tune.space import near
from xlabench.tune.store import CACHE, SEARCH, TABLE, TuneKey, TuneStore, as_key
from xlabench.units import to_ms

# tune_check of a table entry the row's own timing held within CHECK_TOL of its record: default_s and
# tune_best_s are the record's (scaled by the batch), not timed here
ROW_OK = "row ok (recorded figures)"


# settle(the row's median seconds per clock: row_times) -> (the config to run at, the row's tuning columns, its
# note, whether to time the row again): a backend's check of a table entry by the row's timing (RowCheck)
Settle = Callable[[Mapping[str, float]], tuple[Any, dict[str, Any], str, bool]]


class Unsearchable(Exception):
    """No candidate of the search compiled and ran (the message says why): the case is skipped."""


@dataclass(frozen=True)
class Tuned:
    """What tuning decided for a case: the blocks to run at (empty: the case's own), the row's columns and
    a note; ``check``: a table entry taken untimed, which the row's own timing checks (RowCheck.settle)."""

    blocks: dict[str, int]
    fields: dict[str, Any]
    note: str = ""
    check: Optional["RowCheck"] = None


def row_times(wall: Sequence[float], device: Any = ()) -> dict[str, float]:
    """The row's median seconds per clock it has ({'wall': s, 'device': s}): ``device`` the device clock's
    per-call seconds (a tuple; a string or nothing where the trace gave none)."""
    def median(xs: Sequence[float]) -> float:
        s = sorted(float(x) for x in xs)
        return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2

    out = {"wall": median(wall)} if len(wall) else {}
    if isinstance(device, (tuple, list)) and device:
        out["device"] = median(device)
    return out


@dataclass(frozen=True)
class _Decision:
    """One case's decision in progress: the search's stages (seeded), its key, the backend's compile and
    clock, the store and the candidate space's fingerprint, when it started and what the cache said."""

    stages: list[Stage]
    key: TuneKey
    compile_many: CompileMany
    time_many: TimeMany
    store: TuneStore
    space: str
    started: float
    found: Lookup

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def searched(self, table_note: str = "") -> Tuned:
        """The search's winner (stored in the cache); Unsearchable when no candidate runs."""
        try:
            out = checked_search(self.stages, self.compile_many, self.time_many,
                                 log=lambda line: print(f"tune {self.key.impl}: {line}", file=sys.stderr, flush=True))
        except NoCandidate as e:
            raise Unsearchable(f"tuning: {e}") from None
        self.store.store(self.key, self.space, out)
        found = self.found
        note = f"tune cache: {found.status} entry tuned again ({found.why})" if found.status in ("damaged", "stale") else ""
        checked = "" if out.check in ("ok", "searched twice") else f"tuning: {out.check}"
        return Tuned(dict(out.blocks), {"tuned": SEARCH, "tune_s": self.elapsed(), "tune_tried": out.tried,
                                        "tune_dropped": out.dropped_text(), "default_s": out.default_s,
                                        "tune_best_s": out.best_s, "tune_clock": out.clock, "tune_check": out.check},
                     "; ".join(n for n in (note, table_note, checked) if n))

    def verified(self, hit: table.Hit, why_here: str = "") -> tuple[Optional[Tuned], str]:
        """The entry re-timed here with the default (search.verify): (its Tuned, stored in the cache, "") when it
        holds, else (None, why not)."""
        out, why = verify(self.stages, hit.entry.blocks, hit.entry.best_s * hit.scale, self.compile_many,
                          self.time_many)
        if out is None:
            return None, why
        self.store.store(self.key, self.space, out, source=f"tune table {hit.note()}")
        return Tuned(dict(out.blocks), {
            "tuned": TABLE, "tune_s": self.elapsed(), "tune_tried": 0, "default_s": out.default_s,
            "tune_best_s": out.best_s, "tune_clock": out.clock, "tune_check": out.check},
            f"tune table {hit.note()}: verified here at {_ms(out.best_s)} (recorded {_ms(hit.entry.best_s * hit.scale)}), "
            f"default {_ms(out.default_s)}{why_here}"), ""

    def recorded(self, hit: table.Hit, check: str = "") -> TuneOutcome:
        """The entry's record at the case's batch, as an outcome (nothing timed here)."""
        e, scale = hit.entry, hit.scale
        return TuneOutcome(blocks=dict(e.blocks), best_s=e.best_s * scale,
                           default_s=None if e.default_s is None else e.default_s * scale, tried=0, timed=0,
                           dropped={}, tune_s=self.elapsed(), clock=e.clock, check=check)


@dataclass(frozen=True)
class RowCheck:
    """A table entry the row runs at without a timing of its own beforehand: the row's timing checks it."""

    decision: _Decision
    hit: table.Hit
    decided_s: float = 0.0  # the decision's seconds before the row ran (tune_s counts them, not the row's)
    tol: float = CHECK_TOL

    def settle(self, row_s: Mapping[str, float]) -> tuple[Tuned, bool]:
        """(the row's tuning, whether the row must be timed again) from the row's median seconds per clock
        (``row_times``): on the record's clock within ``tol`` of the record, the entry stays and goes to the
        user's cache; off it, the search's winner (time the row again at it); where the row has no time on
        the record's clock, the entry re-timed here as before (search.verify), searched if it fails."""
        d = dataclasses.replace(self.decision, started=time.perf_counter() - self.decided_s)
        hit, clock = self.hit, self.hit.entry.clock
        rec = d.recorded(hit)
        t = row_s.get(clock)
        if t is None:
            got, why = d.verified(hit, f" (the row has no {clock}-clock time to check it by)")
            return (got, False) if got is not None else self._searched(d, why)
        if abs(t / rec.best_s - 1) > self.tol:
            return self._searched(d, f"the row timed it at {_ms(t)} on the {clock} clock, more than {self.tol:.0%} off "
                                  f"its record {_ms(rec.best_s)}")
        d.store.store(d.key, d.space, dataclasses.replace(rec, check=ROW_OK),
                      source=f"tune table {hit.note()}, checked by a row's timing")
        scaled = "" if hit.exact else ", scaled by the batch"
        return _from_record(rec, hit, ROW_OK, f"checked by the row's timing: {_ms(t)} on the {clock} clock against "
                                              f"its record {_ms(rec.best_s)}; default_s and tune_best_s are the "
                                              f"record's{scaled}", d.elapsed()), False

    def _searched(self, d: _Decision, why: str) -> tuple[Tuned, bool]:
        hit = self.hit
        try:
            out = d.searched(f"tune table {hit.note()} not used ({why}): searched; the row timed again at the "
                             "search's winner")
        except Unsearchable as e:
            rec = d.recorded(hit)
            return _from_record(rec, hit, "", f"{why}, but no candidate of the search runs ({e}): the row keeps "
                                              "the entry's blocks", d.elapsed()), False
        return out, True


def _from_record(rec: TuneOutcome, hit: table.Hit, check: str, note: str, tune_s: float,
                 pending: Optional[RowCheck] = None) -> Tuned:
    """The row's tuning at a table entry's blocks and recorded figures."""
    return Tuned(dict(rec.blocks), {"tuned": TABLE, "tune_s": tune_s, "tune_tried": 0, "default_s": rec.default_s,
                                    "tune_best_s": rec.best_s, "tune_clock": rec.clock, "tune_check": check},
                 f"tune table {hit.note()}: {note}", pending)


def tuned_blocks(stages: list[Stage], key: "TuneKey | Mapping[str, Any]", compile_many: CompileMany,
                 time_many: TimeMany, tune_dir: str, hints: Sequence["TuneKey | Mapping[str, Any]"] = (),
                 table_backends: Sequence[str] = (), row_check: bool = False) -> Tuned:
    """The winner of ``stages`` for the case ``key`` names (a TuneKey, or the cache key's dict): the tuning
    store's first answer (tune/store.py: the user's cache, else the shipped table's entry, checked by the row's
    timing where ``row_check``, else verified here first: the module's doc), else searched; a table's or a
    search's winner is stored in the cache.
    ``hints``: the keys of related cases (a fwd_bwd case's fwd one); the first cached winner among them
    seeds the first stage's descent in place of its own seeds (space.near: it and its smaller neighbours).
    ``compile_many``/``time_many``: the backend's (tune.search's contract); ``table_backends``: backends whose
    table entry for the same kernel may stand in where the key's backend has none (the same Pallas kernel
    called from another framework)."""
    started = time.perf_counter()
    key, store = as_key(key), TuneStore(tune_dir, table_backends)
    stages = _seeded(stages, store, hints)
    candidates = [c for st in stages for c in st.candidates]
    space = space_fingerprint(candidates)
    found = store.lookup(key, space, candidates if stages else None)
    if found.layer == CACHE:
        e = found.cached.entry
        return Tuned(found.blocks, {"tuned": CACHE, "tune_s": time.perf_counter() - started, "tune_tried": 0,
                                    "default_s": e["default_s"], "tune_best_s": e["best_s"], "tune_clock": e["clock"],
                                    "tune_check": e.get("check", "")},
                     f"tune cache: verified from the {e['source']}" if e.get("source") else "")
    d = _Decision(stages, key, compile_many, time_many, store, space, started, found.cached)
    hit, why = found.hit, found.why
    if found.layer == TABLE:
        if row_check:
            rec = d.recorded(hit)
            return _from_record(rec, hit, "", f"its record {_ms(rec.best_s)} (default {_ms(rec.default_s)}), "
                                              "checked by the row's timing", d.elapsed(), RowCheck(d, hit, d.elapsed()))
        got, why = d.verified(hit)
        if got is not None:
            return got
    return d.searched(f"tune table {hit.note()} not used ({why}): searched" if hit is not None else "")


def _seeded(stages: list[Stage], store: TuneStore, hints: Sequence["TuneKey | Mapping[str, Any]"]) -> list[Stage]:
    """``stages`` with the first stage seeded from the first hint the cache holds a winner for (none: as given)."""
    for hint in hints:
        seeds = near(store.winner(as_key(hint)) or {}, stages[0].candidates) if stages and stages[0].seeds else ()
        if seeds:
            return [dataclasses.replace(stages[0], seeds=seeds), *stages[1:]]
    return stages


def _ms(s: Optional[float]) -> str:
    return "-" if s is None else f"{to_ms(s):.4g} ms"
