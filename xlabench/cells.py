"""A row's cell as a number: the one reading of a cell that may be empty. A worker's reply and a typed
results frame (results.read_rows types every column by the schema) hold numbers, None or NaN, never text
that needs parsing; this says which of those is a figure."""

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
