"""Invariants every row must satisfy, checked where a row is built (its `suspect` column) and again by
`xlabench audit` over any run file, old or new (docs/audit.md).

Modules: ``rules`` (one row's invariants, pure functions over a row dict and the host facts), ``shape``
(whether a speedup's baseline is the same case shape), ``files`` (the audit of run files: each row's rules,
the rules across rows, the host facts from each run's meta), ``exceptions`` (the known exceptions beside
committed data). No framework, no CLI.
"""

from xlabench.audit.rules import (
    CACHE_RESIDENT, DEFAULT_S, DERIVED, MBU_RANGE, MFU_RANGE, ROOFLINE, ROOFLINE_TOLERANCE, ROW_RULES, TUNE_BEST,
    TUNE_CHECK, TUNE_TOLERANCE, Host, cache_resident, check_row, suspect_text,
)
from xlabench.audit.shape import shape_difference

__all__ = [
    "CACHE_RESIDENT", "DEFAULT_S", "DERIVED", "MBU_RANGE", "MFU_RANGE", "ROOFLINE", "ROOFLINE_TOLERANCE", "ROW_RULES",
    "TUNE_BEST", "TUNE_CHECK", "TUNE_TOLERANCE", "Host", "cache_resident", "check_row", "suspect_text", "shape_difference",
]
