"""The parameter checks every workload makes, in one place: counts that must be positive, and query heads
that must split evenly into key/value head groups (MHA, GQA, MQA)."""

from __future__ import annotations

from typing import Any, Iterable


def at_least_one(params: Any, required: Iterable[str], optional: Iterable[str] = ()) -> None:
    """Raise ValueError naming the first field below 1 (optional fields may be None: the default)."""
    for name in (*required, *optional):
        v = getattr(params, name)
        if v is not None and v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")


def heads_divide(num_heads: int, num_kv_heads: int) -> None:
    """Each key/value head serves a whole group of query heads (so also num_kv_heads <= num_heads)."""
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads ({num_heads}) must be divisible by num_kv_heads ({num_kv_heads})")
