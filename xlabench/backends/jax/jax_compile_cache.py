"""JAX's persistent compilation cache in a worker, and whether a compile was served from it.

The parent names the folder in COMPILE_CACHE_VAR (xlabench/run/compile_cache_dir.py); both thresholds are 0
so that every program is cached, the small ones of tests and CPU suites too. A hit is what JAX itself
reports: its '/jax/compilation_cache/cache_hits' event (jax/_src/compiler.py), counted here. A corrupt
entry is JAX's to handle: it warns, compiles afresh and overwrites the entry.
"""

from __future__ import annotations

import os
from typing import Optional

import jax
from jax import monitoring

from xlabench.protocol.worker_env import COMPILE_CACHE_VAR

HIT_EVENT = "/jax/compilation_cache/cache_hits"
_hits = 0
_configured: Optional[bool] = None


def _on_event(event: str, **kwargs: object) -> None:
    global _hits
    if event == HIT_EVENT:
        _hits += 1


def configure() -> bool:
    """Turn the cache on if the parent asked for one (once per worker); whether it is on."""
    global _configured
    if _configured is None:
        folder = os.environ.get(COMPILE_CACHE_VAR)
        if folder:
            jax.config.update("jax_compilation_cache_dir", folder)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
            monitoring.register_event_listener(_on_event)
        _configured = bool(folder)
    return _configured


def hits() -> int:
    """Cache hits so far in this worker."""
    return _hits
