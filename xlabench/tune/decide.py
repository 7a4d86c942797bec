"""Which blocks a case runs at, framework-free: the user's tuning cache, else the shipped table's entry verified
on this device, else a search (tune.search), each winner stored in the cache. A backend supplies what
compiles and times a candidate (tune.search's CompileMany and TimeMany)."""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from xlabench.tune import table
from xlabench.tune.cache import TuneCache, in_space, space_fingerprint
from xlabench.tune.search import CompileMany, NoCandidate, Stage, TimeMany, TuneOutcome, checked_search, verify
from xlabench.tune.space import near
from xlabench.units import to_ms


class Unsearchable(Exception):
    """No candidate of the search compiled and ran (the message says why): the case is skipped."""


@dataclass(frozen=True)
class Tuned:
    """What tuning decided for a case: the blocks to run at (empty: the case's own), the row's columns and
    a note."""

    blocks: dict[str, int]
    fields: dict[str, Any]
    note: str = ""


def tuned_blocks(stages: list[Stage], key: dict, compile_many: CompileMany, time_many: TimeMany, tune_dir: str,
                 hints: Sequence[dict] = (), table_backends: Sequence[str] = ()) -> Tuned:
    """The winner of ``stages`` for the case ``key`` names: from the user's cache, else the shipped table's
    entry verified here (``from_table``), else searched; a table's or a search's winner is stored in the cache.
    ``hints``: the keys of related cases (a fwd_bwd case's fwd one); the first cached winner among them
    seeds the first stage's descent in place of its own seeds (space.near: it and its smaller neighbours).
    ``compile_many``/``time_many``: the backend's (tune.search's contract); ``table_backends``: backends whose
    table entry for the same kernel may stand in where the key's backend has none (the same Pallas kernel
    called from another framework)."""
    started = time.perf_counter()
    cache = TuneCache(tune_dir)
    for hint in hints:
        seeds = near(cache.winner(hint) or {}, stages[0].candidates) if stages and stages[0].seeds else ()
        if seeds:
            stages = [dataclasses.replace(stages[0], seeds=seeds), *stages[1:]]
            break
    candidates = [c for st in stages for c in st.candidates]
    space = space_fingerprint(candidates)
    found = cache.load(key, space, candidates)
    if found.status == "hit":
        e = found.entry
        return Tuned(e["blocks"], {"tuned": "cache", "tune_s": time.perf_counter() - started, "tune_tried": 0,
                                   "default_s": e["default_s"], "tune_best_s": e["best_s"], "tune_clock": e["clock"],
                                   "tune_check": e.get("check", "")},
                     f"tune cache: verified from the {e['source']}" if e.get("source") else "")
    shipped, hit, why = from_table(stages, key, compile_many, time_many, candidates, table_backends)
    if shipped is not None and hit is not None:
        cache.store(key, space, shipped, source=f"tune table {hit.note()}")
        return Tuned(dict(shipped.blocks), {
            "tuned": "table", "tune_s": time.perf_counter() - started, "tune_tried": 0, "default_s": shipped.default_s,
            "tune_best_s": shipped.best_s, "tune_clock": shipped.clock, "tune_check": shipped.check},
            f"tune table {hit.note()}: verified here at {_ms(shipped.best_s)} (recorded "
            f"{_ms(hit.entry.best_s * hit.scale)}), default {_ms(shipped.default_s)}")
    table_note = f"tune table {hit.note()} not used ({why}): searched" if hit is not None else ""
    try:
        out = checked_search(stages, compile_many, time_many,
                          log=lambda line: print(f"tune {key['impl']}: {line}", file=sys.stderr, flush=True))
    except NoCandidate as e:
        raise Unsearchable(f"tuning: {e}") from None
    cache.store(key, space, out)
    note = f"tune cache: {found.status} entry tuned again ({found.why})" if found.status in ("damaged", "stale") else ""
    note = "; ".join(filter(None, [note, table_note]))
    return Tuned(dict(out.blocks), {"tuned": "search", "tune_s": time.perf_counter() - started,
                                    "tune_tried": out.tried, "tune_dropped": out.dropped_text(),
                                    "default_s": out.default_s, "tune_best_s": out.best_s, "tune_clock": out.clock,
                                    "tune_check": out.check},
                 "; ".join(n for n in (note, "" if out.check in ("ok", "searched twice") else f"tuning: {out.check}") if n))


def _ms(s: Optional[float]) -> str:
    return "-" if s is None else f"{to_ms(s):.4g} ms"


def from_table(stages: list[Stage], key: dict, compile_many: CompileMany, time_many: TimeMany,
               candidates: Sequence[dict], table_backends: Sequence[str] = ()
               ) -> tuple[Optional[TuneOutcome], Optional[table.Hit], str]:
    """The shipped table's entry for ``key``, verified here (search.verify): (its outcome at the re-timed
    figures, the hit, "") when it holds; (None, the hit, why not) when it does not, and the case is searched;
    (None, None, "") when the device kind has no table (or a damaged one: the run warned once) or the table no
    entry for the case."""
    shipped, _ = table.for_device(str(key["device_kind"]))
    hit = None
    for backend in (str(key["backend"]), *table_backends):
        hit = hit or (shipped.find(backend, str(key["impl"]), dict(key["case"])) if shipped is not None else None)
    if hit is None or not stages:
        return None, None, ""
    if not in_space(hit.entry.blocks, candidates):
        return None, hit, "its blocks are not a candidate of this kernel's search"
    out, why = verify(stages, hit.entry.blocks, hit.entry.best_s * hit.scale, compile_many, time_many)
    return out, hit, why


