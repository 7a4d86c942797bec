"""The tuning store, framework-free: one key type (``TuneKey``) for every place a kernel's blocks come from,
and one lookup (``TuneStore``) that consults them in one declared order (issue 59).

**Layers**, first answer wins (``LAYERS``; each name is the value the row's ``tuned`` column takes):

1. ``fixed``, suite-pinned: the suite's own block parameters, or its ``tuned:`` file's (suite/tuned.py). These
   are applied when the suite is expanded (suite/expand.py), in the parent, before any worker runs: the
   pinned blocks become case parameters (so they are part of the case id), the parent's plan says ``fixed``
   (run/case_plan.tuning) and the worker neither looks anything up nor searches. A tuned file matches on the
   whole case (workload and every parameter but the tuned ones), not on the tuning fields a ``TuneKey``
   holds, and ``tune`` sits below ``suite`` (tests/test_layout.py), so that layer stays where it is: by the
   time a ``TuneStore`` is asked, a pinned case has already been answered.
2. ``cache``: the user's tuning cache (tune/cache.py): one file per ``TuneKey.cache_key()``, versions
   included; a damaged or stale entry does not answer (the case is searched again and the file overwritten).
3. ``table``: the shipped per-chip table (tune/table.py): the file of the key's device kind, the entry of
   ``TuneKey.table_key()`` (the batch bucketed), else the nearest bucket; its blocks must be a candidate
   of the search. The caller checks the entry on this machine (tune/decide.py) before taking it for good.

None answers: ``search`` (tune/search.py), the winner written into the cache. ``off`` (no tuning) and an
empty column (no blocks) are no layer's."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from xlabench.tune import table
from xlabench.tune.cache import ENTRY_VERSION, Lookup, TuneCache, cache_key, in_space, store_measured
from xlabench.tune.space import Blocks

FIXED, CACHE, TABLE, SEARCH = "fixed", "cache", "table", "search"
LAYERS = (FIXED, CACHE, TABLE)  # suite-pinned > user cache > shipped table
STORE_LAYERS = LAYERS[1:]  # what a TuneStore consults (FIXED is applied at the suite's expansion)


@dataclass(frozen=True)
class TuneKey:
    """What a winner is found by: the chip (device kind), the backend and impl, the case's tuning fields
    (the workload record's tune_key: the case without its blocks) and the versions the cache keys a winner by
    (the table's entries are used under any)."""

    device_kind: str
    backend: str
    impl: str
    case: tuple[tuple[str, Any], ...]  # the tuning fields, sorted by name
    versions: tuple[tuple[str, str], ...] = field(default=())  # jax, jaxlib, runtime ...: sorted by name

    @classmethod
    def of(cls, device_kind: str, backend: str, impl: str, case: Mapping[str, Any],
           versions: Optional[Mapping[str, str]] = None) -> "TuneKey":
        versions = versions or {}
        return cls(str(device_kind), str(backend), str(impl), tuple((k, case[k]) for k in sorted(case)),
                   tuple((k, versions[k]) for k in sorted(versions)))

    @classmethod
    def from_cache_key(cls, key: Mapping[str, Any]) -> "TuneKey":
        """The key whose ``cache_key()`` is ``key`` (tune.cache_key's dict); ValueError for another entry
        version's key (its file is another)."""
        if key.get("version", ENTRY_VERSION) != ENTRY_VERSION:
            raise ValueError(f"a cache key of entry version {key.get('version')!r}, not {ENTRY_VERSION}")
        return cls.of(key["device_kind"], key["backend"], key["impl"], dict(key["case"]), dict(key.get("versions") or {}))

    def fields(self) -> dict[str, Any]:
        """The case's tuning fields."""
        return dict(self.case)

    def cache_key(self) -> dict:
        """The user cache's key (tune.cache_key: its JSON is the cache file's ``key``, its digest the name)."""
        return cache_key(self.device_kind, self.backend, self.impl, self.fields(), dict(self.versions))

    def cache_file(self) -> str:
        """The cache file's name under the cache folder."""
        return TuneCache("/").path(self.cache_key()).name

    def table_key(self, backend: str = "") -> dict[str, Any]:
        """The shipped table's key (TableEntry.key): backend, impl and the bucketed tuning fields; ``backend``:
        another backend whose entry stands in for the same kernel."""
        return {"backend": backend or self.backend, "impl": self.impl, **table.bucket_key(self.fields())}

    def table_file(self) -> str:
        """The shipped table's file name for the key's chip."""
        return table.table_name(self.device_kind)


def as_key(key: "TuneKey | Mapping[str, Any]") -> TuneKey:
    """A TuneKey from itself or from a cache key's dict (what the backends and tests have passed)."""
    return key if isinstance(key, TuneKey) else TuneKey.from_cache_key(key)


@dataclass(frozen=True)
class Found:
    """What the layers said for a key: ``layer`` the one that answered (CACHE | TABLE; "" none: search),
    ``cached`` the cache's lookup (hit | miss | damaged | stale), ``hit`` the table's entry for the key when
    it has one (answering or not) and ``why`` not, when it does not."""

    layer: str
    cached: Lookup = Lookup("miss")
    hit: Optional[table.Hit] = None
    why: str = ""

    @property
    def blocks(self) -> dict[str, int]:
        """The answering layer's blocks (empty when none answered)."""
        if self.layer == CACHE and self.cached.entry is not None:
            return {str(k): int(v) for k, v in dict(self.cached.entry["blocks"]).items()}
        if self.layer == TABLE and self.hit is not None:
            return dict(self.hit.entry.blocks)
        return {}


Layer = Callable[[TuneKey, str, Optional[Sequence[Blocks]], Found], Found]


class TuneStore:
    """The user cache (in ``cache``: a folder or a TuneCache) and the shipped table, consulted in
    ``order`` (STORE_LAYERS). ``table_backends``: backends whose table entry for the same kernel stands in
    where the key's backend has none (the same Pallas kernel called from another framework)."""

    def __init__(self, cache: "TuneCache | Path | str", table_backends: Sequence[str] = (),
                 order: Sequence[str] = STORE_LAYERS):
        self.cache = cache if isinstance(cache, TuneCache) else TuneCache(cache)
        self.table_backends = tuple(table_backends)
        layers: dict[str, Layer] = {CACHE: self._from_cache, TABLE: self._from_table}
        self.order = tuple(order)
        self._layers = [layers[name] for name in self.order]

    def lookup(self, key: TuneKey, space: str, candidates: Optional[Sequence[Blocks]]) -> Found:
        """The first layer's answer for ``key`` under the search's ``candidates`` (their fingerprint
        ``space``): a cache entry of that space whose winner is a candidate; the table's entry whose blocks
        are a candidate (``candidates`` None: the kernel has no search, and the table does not answer)."""
        found = Found("")
        for layer in self._layers:
            found = layer(key, space, candidates, found)
            if found.layer:
                break
        return found

    def _from_cache(self, key: TuneKey, space: str, candidates: Optional[Sequence[Blocks]], found: Found) -> Found:
        cached = self.cache.load(key.cache_key(), space, candidates or ())
        return replace(found, cached=cached, layer=CACHE if cached.status == "hit" else "")

    def _from_table(self, key: TuneKey, space: str, candidates: Optional[Sequence[Blocks]], found: Found) -> Found:
        if candidates is None:
            return found
        hit = self.table_entry(key)
        if hit is None:
            return found
        if not in_space(hit.entry.blocks, candidates):
            return replace(found, hit=hit, why="its blocks are not a candidate of this kernel's search")
        return replace(found, hit=hit, layer=TABLE)

    def table_entry(self, key: TuneKey) -> Optional[table.Hit]:
        """The shipped table's entry for ``key`` (its backend's, else a ``table_backends`` one's); None when the
        chip has no table (or a damaged one: the run warned once) or the table no entry for the case."""
        shipped, _ = table.for_device(key.device_kind)
        if shipped is None:
            return None
        for backend in (key.backend, *self.table_backends):
            hit = shipped.find(backend, key.impl, key.fields())
            if hit is not None:
                return hit
        return None

    def latest(self, key: TuneKey) -> Found:
        """The answer without a search's candidates or versions (a compile-only run: no chip to check an
        entry on): the newest cache entry of the key under any versions, else the table's entry."""
        entry = self.cache.latest(key.cache_key())
        if entry is not None:
            return Found(CACHE, Lookup("hit", entry))
        hit = self.table_entry(key)
        return Found(TABLE, hit=hit) if hit is not None else Found("")

    def winner(self, key: TuneKey) -> Optional[dict[str, int]]:
        """The cache's winner for ``key`` under any candidate space (a related case's, to seed a search)."""
        return self.cache.winner(key.cache_key())

    def store(self, key: TuneKey, space: str, outcome: Any, source: str = "") -> Path:
        """Write a winner into the cache (the only layer a run writes)."""
        return self.cache.store(key.cache_key(), space, outcome, source)

    def store_measured(self, key: TuneKey, candidates: Sequence[Blocks], **measured: Any) -> dict[str, int]:
        """Write a configuration measured outside a search (``xlabench best``'s pick) as the key's winner
        (tune.cache.store_measured); the blocks the cache now holds for it."""
        return store_measured(self.cache, key.cache_key(), candidates, **measured)
