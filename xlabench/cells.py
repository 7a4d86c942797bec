"""A row's cell as a number: the one reading of a cell that may be empty. A worker's reply and a typed
results frame (results.read_rows types every column by the schema) hold numbers, None or NaN, never text
that needs parsing; this says which of those is a figure. And a text cell cut to a length (clip): between
words, never inside one."""

from __future__ import annotations

import math
from typing import Any, Optional


def number(v: Any) -> Optional[float]:
    """``v`` as a finite float; None where it is empty (None, NaN), infinite, a bool or not a number."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def clip(text: str, n: int) -> str:
    """``text`` in at most ``n`` characters: whole, or cut at the last space that leaves it at least half
    its length (a path or a long word: cut where it must) and marked with '…'."""
    if len(text) <= n:
        return text
    head = text[: n - 1]
    space = head.rfind(" ")
    return (head[:space] if space >= n // 2 else head).rstrip(" ;,:(") + "…"
