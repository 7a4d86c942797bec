"""The tuning cache: one JSON file per key under the cache folder ($XLABENCH_CACHE_DIR/tune, default
~/.cache/xlabench/tune). The key is what a winner depends on: device kind, backend, impl, the case's
shape, dtype, causal and mode, and the jax / jaxlib / libtpu versions. A file that cannot be read or does
not hold its key is ``damaged``; one whose candidate space has changed since (a new kernel version
declares other candidates) or whose winner is no longer a candidate is ``stale``: both are tuned again
and overwritten."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from xlabench import cache
from xlabench.tune.search import TuneOutcome
from xlabench.tune.space import Blocks, frozen

SUBDIR = "tune"
# 2: the descent (version 1's fwd_bwd entries came from a search that fixed the forward blocks from the
# fwd case, and could be the 128 x 128 fallback)
# 3: candidate names unique across a search and the winner re-timed (version 2's winners could come from
# timings pooled over candidates that shared a module name: issue 40)
ENTRY_VERSION = 3
_FIELDS = ("key", "space", "blocks", "best_s", "default_s", "tried", "dropped", "tune_s", "clock")


def default_dir() -> Path:
    return cache.folder(SUBDIR)


def cache_key(device_kind: str, backend: str, impl: str, case: Mapping[str, Any], versions: Mapping[str, str]) -> dict:
    """The key of a case's winner (``case``: the parameters the blocks depend on, without the blocks)."""
    return {"version": ENTRY_VERSION, "device_kind": device_kind, "backend": backend, "impl": impl,
            "case": {k: case[k] for k in sorted(case)}, "versions": {k: versions[k] for k in sorted(versions)}}


def space_fingerprint(candidates: Sequence[Blocks]) -> str:
    """A digest of a candidate space: an entry found under another space is stale."""
    blob = json.dumps(sorted(frozen(c) for c in candidates))
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def in_space(blocks: Blocks, candidates: Sequence[Blocks]) -> bool:
    """Whether a recorded winner is still one of ``candidates`` (none: any is): a search's winner holds a
    candidate of each stage; a sweep's (`xlabench best`) holds the fields the suite swept, the kernel's
    defaults for the rest: a part of one candidate."""
    known = [set(frozen(c)) for c in candidates]
    won = set(frozen(blocks))
    return not known or any(c <= won or won <= c for c in known)


def _name(key: Mapping[str, Any]) -> str:
    return hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20] + ".json"


@dataclass(frozen=True)
class Lookup:
    """What the cache holds for a key: ``status`` hit | miss | damaged | stale, the entry on a hit."""

    status: str
    entry: Optional[dict] = None
    why: str = ""


class TuneCache:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    def path(self, key: Mapping[str, Any]) -> Path:
        return self.root / _name(key)

    def _read(self, key: Mapping[str, Any]) -> tuple[dict, dict[str, int]]:
        """(the entry, its blocks) for ``key``; OSError or ValueError (TypeError, AttributeError) when the
        file is missing or damaged."""
        entry = cache.read_json(self.path(key))
        if not isinstance(entry, dict) or any(f not in entry for f in _FIELDS):
            raise ValueError("fields missing")
        if entry["key"] != json.loads(json.dumps(key, default=str)):
            raise ValueError("the file holds another key")
        return entry, {str(k): int(v) for k, v in dict(entry["blocks"]).items()}

    def load(self, key: Mapping[str, Any], space: str, candidates: Sequence[Blocks]) -> Lookup:
        p = self.path(key)
        if not p.exists():
            return Lookup("miss")
        try:
            entry, blocks = self._read(key)
        except (OSError, ValueError, TypeError, AttributeError) as e:
            return Lookup("damaged", why=f"{p}: {e}")
        if entry["space"] != space:
            return Lookup("stale", why=f"{p}: tuned over another candidate space")
        if not in_space(blocks, candidates):
            return Lookup("stale", why=f"{p}: its winner is no longer a candidate")
        return Lookup("hit", {**entry, "blocks": blocks})

    def latest(self, key: Mapping[str, Any]) -> Optional[dict]:
        """The newest intact entry whose key is ``key`` but for its versions (jax, jaxlib, the runtime):
        what a compile-only run, which has no device to tune on, compiles a kernel at (a winner tuned on
        the chip with its own libtpu, brought along in the cache folder). None when there is none."""
        want = json.loads(json.dumps({k: v for k, v in key.items() if k != "versions"}, default=str))
        found = []
        for path in self.root.glob("*.json") if self.root.is_dir() else ():
            try:
                entry = cache.read_json(path)
                if {k: v for k, v in dict(entry["key"]).items() if k != "versions"} == want:
                    found.append(entry)
            except (OSError, ValueError, TypeError, AttributeError, KeyError):
                continue
        return max(found, key=lambda e: str(e.get("created", ""))) if found else None

    def winner(self, key: Mapping[str, Any]) -> Optional[dict[str, int]]:
        """The blocks an intact entry holds for ``key``, whatever space it was tuned over (a related case's
        winner, to start a search from: tune_case.tuned_blocks' hints); None when there is none."""
        try:
            return self._read(key)[1]
        except (OSError, ValueError, TypeError, AttributeError):
            return None

    def store(self, key: Mapping[str, Any], space: str, outcome: Any, source: str = "") -> Path:
        """Write ``outcome`` (a TuneOutcome) for ``key``, atomically (a crash leaves the old file or none);
        ``source``: where the winner came from when not a search here (a shipped table's entry, verified)."""
        entry = {"key": key, "space": space, "blocks": dict(outcome.blocks), "best_s": outcome.best_s,
                 "default_s": outcome.default_s, "tried": outcome.tried, "dropped": dict(outcome.dropped),
                 "tune_s": outcome.tune_s, "clock": outcome.clock, "check": getattr(outcome, "check", ""),
                 "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **({"source": source} if source else {})}
        return cache.write_json(self.path(key), entry, indent=1, sort_keys=True, default=str)


def store_measured(tc: TuneCache, key: Mapping[str, Any], candidates: Sequence[Blocks], blocks: Blocks, best_s: float,
                   default_s: Optional[float], configurations: int, clock: str, check: str) -> dict[str, int]:
    """Write a configuration measured outside a search (``xlabench best``'s pick over a sweep) as ``key``'s
    winner, under the fingerprint of ``candidates``; returns the blocks the cache now holds for it (what a
    later ``run --tune`` reads)."""
    space = space_fingerprint(candidates)
    tc.store(key, space, TuneOutcome(dict(blocks), best_s, default_s, configurations, 0, {}, 0.0, clock, check))
    found = tc.load(key, space, [])
    return dict(found.entry["blocks"]) if found.entry else {}
