"""The invariants of one row: each rule takes the row (a dict: from the run as it is built, or read back
from a CSV, NaN or None where empty) and the host facts it needs, and returns the reason the row breaks
it, or None. Pure arithmetic: no file, no framework.

A rule only judges what the row has: a row without an MFU is not checked for one, a skipped row for
nothing. The tolerances are declared here once and stated in docs/audit.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from xlabench.cells import number
from xlabench import roofline
from xlabench.hardware import interconnect, lookup
from xlabench.protocol.status import OK
from xlabench.units import GIB, GIGA, MEGA, TERA, to_ms

TUNE_TOLERANCE = 0.15  # a tuned row's median vs its search's best, its default_s vs the default blocks' own row
ROOFLINE_TOLERANCE = roofline.FRAC_SLACK - 1  # a CPU row may beat its floor by this much (measured host peaks)
DERIVED_REL = 1e-6  # a derived column vs its recomputation from the row's inputs (the CSV keeps repr digits)

# The rule names: what the `suspect` column, `xlabench audit` and the exceptions file call them.
MFU_RANGE, MBU_RANGE, ROOFLINE, ROOFLINE_COLUMNS, DERIVED, TUNE_BEST, TUNE_CHECK, DEFAULT_S, EXPLAIN_ROOF = (
    "mfu_range", "mbu_range", "roofline", "roofline_columns", "derived", "tune_best", "tune_check", "default_s",
    "explain_roof")
PEAK_MEMORY = "peak_memory"
EXPLAIN_CPU_SLACK = 0.05  # a CPU row's explain rate may exceed the host's measured peak by this much
CACHE_RESIDENT = "cache-resident"


@dataclass(frozen=True)
class Host:
    """What the audit of a row needs to know of the host that ran it (recorded in the run's meta)."""

    llc_bytes: Optional[int] = None  # the last-level cache of a CPU host (None: not recorded)


def num(row: Mapping[str, Any], key: str) -> Optional[float]:
    """A finite number from a row cell, else None (empty, NaN, text)."""
    return number(row.get(key))


def wrong_result(row: Mapping[str, Any]) -> bool:
    """A row whose result is wrong (correct false): its time is kept, but its figures are not the work's, so
    no rule judges them as physics (issue 61 item 7: a wrong kernel's roofline_frac 2.166)."""
    return str(row.get("correct")).lower() == "false"


def _ok(row: Mapping[str, Any]) -> bool:
    return str(row.get("status", "")) == OK and bool(num(row, "median_s")) and not wrong_result(row)


def _devices(row: Mapping[str, Any]) -> int:
    return max(int(num(row, "devices") or 1), 1)


def _g(x: float) -> str:
    return f"{x:.4g}"


def cache_resident(row: Mapping[str, Any], host: Host) -> Optional[str]:
    """Why a CPU row's memory traffic may beat the host's stream bandwidth: its bytes (all virtual devices
    share one cache) fit in the last-level cache. None on other platforms, or when they do not fit."""
    nbytes = num(row, "bytes") or num(row, "io_bytes")
    if str(row.get("platform", "")) != "cpu" or not nbytes or not host.llc_bytes:
        return None
    if nbytes > host.llc_bytes:
        return None
    return f"{CACHE_RESIDENT}: {_g(nbytes / MEGA)} MB fit in the host's {_g(host.llc_bytes / MEGA)} MB last-level cache"


def mfu_range(row: Mapping[str, Any], host: Host = Host()) -> Optional[str]:
    """0 < mfu <= 1 against the row's peak."""
    mfu = num(row, "mfu")
    if not _ok(row) or mfu is None or 0 < mfu <= 1:
        return None
    return (f"mfu {_g(mfu)} outside (0, 1]: {_g(num(row, 'tflops_per_s') or 0)} TFLOP/s on {_devices(row)} "
            f"device(s) of peak {_g(num(row, 'peak_tflops') or 0)} TFLOP/s ({row.get('peak_source') or 'no source'})")


def mbu_range(row: Mapping[str, Any], host: Host = Host()) -> Optional[str]:
    """0 < mbu <= 1 against the row's peak bandwidth; a CPU row whose bytes fit in the last-level cache may
    exceed 1 (cache_resident), and one whose host's cache size is not recorded is judged as any other."""
    mbu = num(row, "mbu")
    if not _ok(row) or mbu is None or 0 < mbu <= 1 or (mbu > 1 and cache_resident(row, host)):
        return None
    unknown = ("; the host's last-level cache is not recorded (a cache-resident row cannot be told)"
               if str(row.get("platform", "")) == "cpu" and not host.llc_bytes else "")
    return (f"mbu {_g(mbu)} outside (0, 1]: {_g(num(row, 'gbytes_per_s') or 0)} GB/s on {_devices(row)} device(s) "
            f"of peak {_g(num(row, 'peak_gbytes_per_s') or 0)} GB/s{unknown}")


def peak_memory(row: Mapping[str, Any], host: Host = Host()) -> Optional[str]:
    """An ok row's peak device memory (per device) at most its chip's datasheet HBM (hardware's table; a
    device not in it, or a CPU, is not judged)."""
    peak, chip = num(row, "peak_memory_bytes"), lookup(str(row.get("device_kind", "")))
    if not _ok(row) or peak is None or chip is None or not chip.hbm_gib or peak <= chip.hbm_gib * GIB:
        return None
    return (f"peak_memory_bytes {peak / GIGA:.2f} GB per device is more than a {chip.name}'s {_g(chip.hbm_gib)} GiB "
            f"of HBM ({str(row.get('notes', '')).split('peak memory: ')[-1].split(';')[0] or 'no source'})")


def _roof(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row's roofline recomputed from its inputs (counts, peaks, case columns) by this xlabench, on the
    topology its builder used: a compile row's ``topology`` column is the target's name and then its
    options ('v4:2x2x1 (chip_config_name=megacore)'); a run row has none."""
    topology = str(row.get("topology") or "").split(" ")[0] or None
    ici = interconnect(str(row.get("device_kind") or ""), topology, num(row, "peak_gbytes_per_s")).gbytes_per_s
    return roofline.roofline(row, ici)


def roofline_ceiling(row: Mapping[str, Any], host: Host = Host()) -> Optional[str]:
    """The measured time is at least the roofline floor (xlabench/roofline.py, recomputed from the full row:
    its counts, peaks and case columns), exact on an accelerator up to the timer's measured noise
    (roofline.allowance, stated); a CPU row within ROOFLINE_TOLERANCE (measured peaks), and not suspect when
    its floor is its memory traffic and its bytes fit in the last-level cache (cache-resident). A memory
    floor of XLA's bytes that the row beats gives way to the bytes it must move where they are known
    (roofline.roofline), so a row is suspect only when it beats the floor of the work it must do."""
    if not _ok(row):
        return None
    roof = _roof(row)
    frac = roof.get("roofline_frac")
    slack, what = roofline.allowance(row)
    if frac is None or frac <= 1 + slack:
        return None
    if roof.get("bound_by") == roofline.MEMORY and cache_resident(row, host):
        return None
    floor = max(roof["bound_s"], roof.get("collective_s") or 0)
    return (f"roofline_frac {frac:.3f} > {1 + slack:.3f} ({what}): measured {_g(to_ms(num(row, 'median_s')))} ms "
            f"under the {roof['bound_by']}-bound floor {_g(to_ms(floor))} ms ({roof['roofline_source']})")


ROOFLINE_NUMBERS = ("arith_intensity", "bound_s", "collective_s", "roofline_frac", "mfu_ceiling")


def roofline_columns(row: Mapping[str, Any], host: Host = Host()) -> Optional[str]:
    """The stored roofline columns equal the audit's own recomputation from the row's inputs: a row whose
    builder computed its roofline from less than the full row (issue 50: flash causal stored at 1.049 where
    the causal rule gives 0.52) says so. A file without roofline columns (an old schema) is not judged."""
    if not _ok(row) or num(row, "bound_s") is None:
        return None
    roof = _roof(row)
    wrong = []
    for col in ROOFLINE_NUMBERS:
        got, want = num(row, col), roof.get(col)
        if got is None and want is None:
            continue
        if got is None or want is None or not math.isclose(got, want, rel_tol=DERIVED_REL, abs_tol=1e-300):
            wrong.append(f"{col} {'empty' if got is None else _g(got)} but the roofline of the row gives "
                         f"{'none' if want is None else _g(want)}")
    stored = row.get("bound_by")
    if isinstance(stored, str) and stored != roof.get("bound_by"):
        wrong.append(f"bound_by {stored} but the roofline of the row gives {roof.get('bound_by')}")
    return ", ".join(wrong) or None


def _derivations(row: Mapping[str, Any]) -> list[tuple[str, Optional[float], str]]:
    """(column, its value recomputed from the row's inputs, the formula) for each derived column."""
    median, dev = num(row, "median_s"), _devices(row)
    flops, nbytes, palm = num(row, "flops"), num(row, "bytes"), num(row, "flops_palm")
    peak_tf, peak_gb = num(row, "peak_tflops"), num(row, "peak_gbytes_per_s")
    tps, dmed, wmed = num(row, "tokens_per_s"), num(row, "device_median_s"), num(row, "wall_median_s")
    mean, stdev = num(row, "mean_s"), num(row, "stdev_s")
    out: list[tuple[str, Optional[float], str]] = []
    if median and flops:
        out.append(("tflops_per_s", flops / median / TERA, "flops / median_s"))
        if peak_tf:
            out.append(("mfu", flops / (median * dev * peak_tf * TERA), "flops / (median_s x devices x peak)"))
    if median and palm and peak_tf:
        out.append(("mfu_palm", palm / (median * dev * peak_tf * TERA), "flops_palm / (median_s x devices x peak)"))
    if median and nbytes:
        out.append(("gbytes_per_s", nbytes / median / GIGA, "bytes / median_s"))
        if peak_gb:
            out.append(("mbu", nbytes / median / GIGA / (dev * peak_gb), "bytes / median_s / (devices x peak GB/s)"))
    if tps and num(row, "tokens_per_s_per_device") is not None:
        out.append(("tokens_per_s_per_device", tps / dev, "tokens_per_s / devices"))
    if dmed and num(row, "host_overhead") is not None:
        out.append(("host_overhead", (wmed or median or 0) / dmed, "wall_median_s / device_median_s"))
    if mean and stdev is not None:
        out.append(("cv", stdev / mean, "stdev_s / mean_s"))
    if str(row.get("clock", "")) == "device" and dmed:
        out.append(("median_s", dmed, "device_median_s (clock device)"))
    return out


def derived(row: Mapping[str, Any], host: Host = Host()) -> Optional[str]:
    """Every derived column equals its recomputation from the row's inputs (the headline median_s, the
    counts, the peak, the devices): mfu = flops / (median_s x devices x peak), and so on."""
    if not _ok(row):
        return None
    wrong = []
    for col, want, formula in _derivations(row):
        got = num(row, col)
        if got is None or want is None or math.isclose(got, want, rel_tol=DERIVED_REL, abs_tol=1e-300):
            continue
        wrong.append(f"{col} {_g(got)} but {formula} = {_g(want)}")
    return ", ".join(wrong) or None


def _on_clock(row: Mapping[str, Any], clock: str) -> Optional[float]:
    """The row's median on ``clock`` (device | wall): the headline where the row's clock is that one."""
    if str(row.get("clock", "")) == clock:
        return num(row, "median_s")
    return num(row, "device_median_s" if clock == "device" else "wall_median_s")


def tune_best(row: Mapping[str, Any], host: Host = Host()) -> Optional[str]:
    """A tuned row's median, on its search's clock (tune_clock), within TUNE_TOLERANCE of the search's best
    (tune_best_s): the row times the blocks the search says it timed."""
    best, clock = num(row, "tune_best_s"), str(row.get("tune_clock") or "")
    if not _ok(row) or not best or clock not in ("device", "wall"):
        return None
    median = _on_clock(row, clock)
    if median is None or abs(median / best - 1) <= TUNE_TOLERANCE:
        return None
    return (f"median {_g(to_ms(median))} ms ({clock} clock) is {median / best:.2f}x its search's best "
            f"tune_best_s {_g(to_ms(best))} ms (tolerance {TUNE_TOLERANCE:.0%})")


def tune_check(row: Mapping[str, Any], host: Host = Host()) -> Optional[str]:
    """The tuner's own check (tune_check): its winner and the default re-timed side by side after the
    search disagreed with the search twice, so the row keeps the faster of the two re-timed."""
    check = row.get("tune_check")
    if not _ok(row) or not isinstance(check, str) or not check.startswith("disagrees"):
        return None
    return check


def default_s(row: Mapping[str, Any], untuned: Mapping[str, Any]) -> Optional[str]:
    """A tuned row's default_s within TUNE_TOLERANCE of the default blocks' own time: ``untuned``, a row of
    the same case run at the kernel's default blocks (tuned off), on the search's clock."""
    dflt, clock = num(row, "default_s"), str(row.get("tune_clock") or "")
    if not _ok(row) or not _ok(untuned) or not dflt or clock not in ("device", "wall"):
        return None
    own = _on_clock(untuned, clock)
    if own is None or abs(dflt / own - 1) <= TUNE_TOLERANCE:
        return None
    return (f"default_s {_g(to_ms(dflt))} ms but the default blocks' own row (run {untuned.get('run_id')}) "
            f"takes {_g(to_ms(own))} ms on the {clock} clock: {dflt / own:.2f}x (tolerance {TUNE_TOLERANCE:.0%})")


# The rules one row is checked against on its own (where it is built, and by `xlabench audit`).
ROW_RULES: dict[str, Callable[[Mapping[str, Any], Host], Optional[str]]] = {
    MFU_RANGE: mfu_range, MBU_RANGE: mbu_range, ROOFLINE: roofline_ceiling, ROOFLINE_COLUMNS: roofline_columns,
    DERIVED: derived, TUNE_BEST: tune_best,
    TUNE_CHECK: tune_check, PEAK_MEMORY: peak_memory,
}


def explain_roof(row: Mapping[str, Any], explained: Mapping[str, Any], host: Host = Host()) -> Optional[str]:
    """Every achieved rate of the row's explain breakdown (``explained``: its entry in RUN.explain.json) is at
    most its roof: on an accelerator exactly (the op times are the trace's, the peaks the datasheet's), on a
    CPU within EXPLAIN_CPU_SLACK, or above it on a cache-resident row (marked as such)."""
    cpu = str(row.get("platform", "")) == "cpu"
    if cpu and cache_resident(row, host):
        return None
    limit = 1 + (EXPLAIN_CPU_SLACK if cpu else 0.0)
    over = []
    for c in explained.get("categories") or []:
        frac = number(c.get("roof_frac")) if isinstance(c, Mapping) else None
        if frac is not None and frac > limit:
            over.append(f"{c.get('key')} at {frac:.0%} of its {c.get('roof') or 'roof'}")
    return (f"explain prints rates above their roof ({', '.join(over)}; limit {limit:.2f}): the FLOPs or bytes "
            "counted are not what reached the roof") if over else None


def check_row(row: Mapping[str, Any], host: Host = Host()) -> dict[str, str]:
    """rule -> reason, for every rule of ROW_RULES the row breaks (empty: clean)."""
    return {name: why for name, rule in ROW_RULES.items() if (why := rule(row, host))}


def suspect_text(broken: Mapping[str, str]) -> Optional[str]:
    """The `suspect` cell: 'rule: reason' joined by '; ' (None when clean)."""
    return "; ".join(f"{name}: {why}" for name, why in broken.items()) or None
