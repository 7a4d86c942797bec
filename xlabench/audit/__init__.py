"""Invariants every row must satisfy, checked where a row is built (its `suspect` column) and again by
`xlabench audit` over any run file, old or new (docs/audit.md).

Its modules: README.md, Layout. No framework, no CLI.
"""

from xlabench.audit.invariants import (
    CACHE_RESIDENT, DEFAULT_S, DERIVED, EXPLAIN_ROOF, MBU_RANGE, MFU_RANGE, PEAK_MEMORY, ROOFLINE, ROOFLINE_COLUMNS, ROOFLINE_TOLERANCE, ROW_RULES, TUNE_BEST,
    TUNE_CHECK, TUNE_TOLERANCE, Host, cache_resident, check_row, suspect_text,
)
from xlabench.audit.shape import shape_difference

__all__ = [
    "CACHE_RESIDENT", "DEFAULT_S", "DERIVED", "EXPLAIN_ROOF", "MBU_RANGE", "MFU_RANGE", "PEAK_MEMORY", "ROOFLINE", "ROOFLINE_COLUMNS", "ROOFLINE_TOLERANCE", "ROW_RULES",
    "TUNE_BEST", "TUNE_CHECK", "TUNE_TOLERANCE", "Host", "cache_resident", "check_row", "suspect_text", "shape_difference",
]
