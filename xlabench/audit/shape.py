"""Whether a speedup's baseline row is the same case shape as the row it is divided into: every case
column equal (and the device), except the impl, the kernel's block columns and the measurements."""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

from xlabench.results.schema import CASE_COLUMN_NAMES, KERNEL_OPTIONS

# Columns a kernel and its baseline may differ in: which kernel, and its options (blocks, megacore mode).
FREE = frozenset({"impl", "blocks", *KERNEL_OPTIONS})
SHAPE_COLUMNS: tuple[str, ...] = tuple(c for c in [*CASE_COLUMN_NAMES, "platform", "device_kind"] if c not in FREE)


def _empty(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v == ""


def same_value(a: Any, b: Any) -> bool:
    """Two cells hold the same value: both empty, equal numbers (4096 vs 4096.0), or equal text (False vs 'false')."""
    if _empty(a) or _empty(b):
        return _empty(a) and _empty(b)
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a).lower() == str(b).lower()


def shape_difference(row: Mapping[str, Any], baseline: Mapping[str, Any]) -> Optional[str]:
    """None when ``baseline`` has ``row``'s shape, else the first column that differs, with both values
    ('seq_len 4096 vs 2048'): a speedup over it would compare different work."""
    for col in SHAPE_COLUMNS:
        a, b = row.get(col), baseline.get(col)
        if not same_value(a, b):
            return f"{col} {'' if _empty(a) else a} vs {'' if _empty(b) else b}".replace("  ", " ")
    return None
