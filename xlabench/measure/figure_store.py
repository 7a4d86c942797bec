"""xlabench's own cache of compile-only figures: one JSON file per compiled program, by key.

JAX's persistent cache stores executables, and libtpu's compile-only client cannot load one back
(docs/compile.md), so a compile for a TPU nobody here has would be paid again on every run. What a
compile-only row needs of the executable is only figures (memory analysis, XLA's FLOPs, bytes and
collectives), and those are what is kept. The key (the lowered program's fingerprint with the target
and the compiler's versions) is the worker's to compute; this module only stores, framework-free.

An entry that cannot be read (truncated, garbled, another layout) is a miss, never an error: the case
compiles again and the entry is written anew. A store that cannot be written warns and goes on.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

from xlabench.cache import read_json, write_json

LAYOUT = 1  # bump when an entry's layout changes: older entries are then misses
SUBDIR = "compile-only"


def _warn(text: str) -> None:
    print(f"xlabench compile-only cache: {text}", file=sys.stderr, flush=True)


class FigureStore:
    """Entries under ``folder``: ``get(key)`` is the stored dict or None, ``put(key, value)`` writes it
    atomically (a reader never sees half an entry)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> Optional[dict[str, Any]]:
        p = self.path(key)
        try:
            entry = read_json(p)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            _warn(f"entry {p.name} cannot be read ({type(e).__name__}: {e}); compiling again")
            return None
        if not isinstance(entry, dict) or entry.get("layout") != LAYOUT or entry.get("key") != key \
                or not isinstance(entry.get("value"), dict):
            _warn(f"entry {p.name} is not an entry of this xlabench (layout {LAYOUT}); compiling again")
            return None
        return entry["value"]

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            write_json(self.path(key), {"layout": LAYOUT, "key": key, "value": value}, sort_keys=True)
        except OSError as e:
            _warn(f"cannot write {self.path(key)} ({e.strerror or type(e).__name__}); going on uncached")


def from_folder(folder: Optional[str]) -> Optional[FigureStore]:
    """The store under a compilation-cache folder (xlabench/run/compile_cache_dir.py), or None when off."""
    return FigureStore(Path(folder) / SUBDIR) if folder else None


__all__ = ["FigureStore", "LAYOUT", "SUBDIR", "from_folder"]
