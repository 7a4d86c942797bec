"""What the shipped tune table (tune/table.py) holds for a suite's cases, decided without a worker: which
would search their blocks, which take them from the table, which choose none (`xlabench tune --check`,
the run's line on a missing table, and run/estimate.py's budget: a case the table holds is not searched)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

from xlabench import impls as catalog
from xlabench import suite as suite_lib
from xlabench.impls import workload_rules
from xlabench.run.case_plan import tuning
from xlabench.tune import table


def untunable(c: Any, platform: str) -> Optional[str]:
    """Why `xlabench tune` passes a case over on ``platform`` (None: it searches it): an impl without a
    block-size search, or a kernel that runs interpreted there (its timings say nothing of a chip). A user
    impl declares its search in its own code: left to its worker."""
    if catalog.is_user(c.impl):
        return None
    if workload_rules.search_space(c.workload, c.backend, c.impl) is None:
        return "no block sizes to search"
    info = catalog.find(c.backend, c.impl, c.workload)
    if info is not None and info.interpreted(platform):
        return f"interpreted on {platform}: tune on the chip it runs on"
    return None


def tune_table_warning(cases: Iterable[suite_lib.Case], platform: str, device_kind: str,
                       asked: Optional[bool]) -> Optional[str]:
    """The run's one line on the shipped tune table (tune/table.py) where some case will tune: the device
    kind has none, or its file is damaged; either way the kernels are searched. None: a table, or no search."""
    searching = any(untunable(c, platform) is None and tuning(c, False, platform, asked)[0] == "search" for c in cases)
    if not searching:
        return None
    return table.for_device(device_kind)[1] or None


@dataclass(frozen=True)
class Held:
    """What a tune table holds for one of a suite's cases: ``status`` held (its bucket) | nearest (another
    bucket of the same shape: used, verified against its time scaled by the batch) | lacks (searched) |
    fixed (the suite sets the blocks) | untuned (no search: ``why``)."""

    case: suite_lib.Case
    status: str
    hit: Optional[table.Hit] = None
    why: str = ""


def case_held(c: suite_lib.Case, shipped: table.Table, platform: str = "tpu") -> Held:
    """What ``shipped`` holds for case ``c`` on ``platform`` (Held's statuses)."""
    from xlabench.workloads import WORKLOADS

    w = WORKLOADS[c.workload]  # its record's tune key: what a table's entry is found by
    key = w.tune_key
    why = untunable(c, platform) or ("" if key is not None else f"{c.workload} is not keyed in tables")
    mode = tuning(c, False, platform, True)[0]
    if why or mode != "search":
        return Held(c, "untuned" if why else mode, why=why)
    try:
        fields = key(w.params(**c.params))
    except ValueError as e:
        return Held(c, "untuned", why=str(e).splitlines()[0])
    hit = shipped.find(c.backend, c.impl, fields)
    return Held(c, "lacks" if hit is None else ("held" if hit.exact else "nearest"), hit)
