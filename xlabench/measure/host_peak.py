"""The host's CPU peak (float32 matmul TFLOP/s, streaming copy GB/s): measured once per host as the
best of several tries, cached with its date, and reused by every later run.

Why: CPU has no datasheet peak, and a peak re-measured by every run follows the load of the moment:
on a shared 2-core host it moved 0.073 vs 0.127 TFLOP/s between runs, so MFU moved 1.7x between runs
with the same timings. The best of several tries is the host's capacity (load only ever slows a try
down); cached, it is one yardstick for every run on the host.

The cache is ``$XLABENCH_CACHE_DIR/host_peak.json`` (default ``~/.cache/xlabench``), one entry per
host key (hostname, CPU model, CPU count, framework: what the matmul's speed depends on), each with
its date. An entry older than MAX_AGE_DAYS, an unreadable file or ``XLABENCH_REMEASURE_PEAK=1``
measures afresh and rewrites the entry. Imports nothing of xlabench: the workers call it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

ENV_CACHE_DIR = "XLABENCH_CACHE_DIR"
ENV_REMEASURE = "XLABENCH_REMEASURE_PEAK"
FILE_NAME = "host_peak.json"
MAX_AGE_DAYS = 30  # a host's BLAS, clocks or the framework's CPU code can change: measure again after that
TRIES = 3
PAUSE_S = 0.2  # between tries: a burst of load from another job is less likely to cover all of them


@dataclass(frozen=True)
class HostPeak:
    tflops: float
    gbytes_per_s: float
    measured: str  # UTC date of the measurement, YYYY-MM-DD
    tries: int
    cached: bool  # read from the cache file (False: measured by this process)
    path: str
    note: str = ""  # why it was measured afresh, where the cache could not be used

    @property
    def source(self) -> str:
        """What a row's peak_source says about the CPU peak."""
        how = f"cached in {self.path}" if self.cached else f"measured now, cached in {self.path}"
        return f"best of {self.tries} tries on {self.measured}, {how}" + (f"; {self.note}" if self.note else "")


def cache_root() -> Path:
    """xlabench's per-user cache folder: $XLABENCH_CACHE_DIR, else ~/.cache/xlabench (also the compile cache's)."""
    return Path(os.environ.get(ENV_CACHE_DIR) or str(Path.home() / ".cache" / "xlabench"))


def cache_path() -> Path:
    return cache_root() / FILE_NAME


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_key(framework: str) -> str:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{socket.gethostname()} | {_cpu_model()} | {cpus} cpus | {framework}"


def _read(path: Path) -> tuple[dict, str]:
    """The cache's entries, and a note when the file exists but cannot be used (it is then rewritten)."""
    if not path.exists():
        return {}, ""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return {}, f"the cache was unreadable ({type(e).__name__}) and was rewritten"
    if not isinstance(data, dict) or not isinstance(data.get("hosts"), dict):
        return {}, "the cache was not a host_peak file and was rewritten"
    return data["hosts"], ""


def _entry(entries: dict, key: str, today: dt.date) -> tuple[Optional[dict], str]:
    """The usable entry for this host, or why there is none."""
    e = entries.get(key)
    if e is None:
        return None, ""
    try:
        tflops, gbps, tries = float(e["tflops"]), float(e["gbytes_per_s"]), int(e["tries"])
        day = dt.date.fromisoformat(str(e["measured"]))
    except (KeyError, TypeError, ValueError):
        return None, "this host's cache entry was malformed and was rewritten"
    if not (tflops > 0 and gbps > 0):
        return None, "this host's cache entry was not positive and was rewritten"
    if (today - day).days > MAX_AGE_DAYS or day > today:
        return None, f"the cached peak of {day} was stale (over {MAX_AGE_DAYS} days) and was re-measured"
    return {"tflops": tflops, "gbytes_per_s": gbps, "measured": day.isoformat(), "tries": tries}, ""


def _write(path: Path, entries: dict) -> None:
    """Whole or not at all (two workers may write at once: the last one wins, neither is torn)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".host_peak.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"hosts": entries}, f, indent=2)
    os.replace(tmp, path)


def get(measure_once: Callable[[], tuple[float, float]], framework: str, tries: int = TRIES,
        today: Optional[dt.date] = None) -> HostPeak:
    """The cached peak of this host, else the best of ``tries`` calls of ``measure_once`` (each
    (TFLOP/s, GB/s)), cached. A cache that cannot be written still gives the measured peak."""
    path, key = cache_path(), host_key(framework)
    today = today or dt.datetime.now(dt.timezone.utc).date()
    entries, note = _read(path)
    if os.environ.get(ENV_REMEASURE, "") not in ("", "0"):
        entry, note = None, f"re-measured ({ENV_REMEASURE})"
    else:
        entry, why = _entry(entries, key, today)
        note = note or why
    if entry is not None:
        return HostPeak(entry["tflops"], entry["gbytes_per_s"], entry["measured"], entry["tries"], True, str(path))
    results = []
    for i in range(tries):
        if i:
            time.sleep(PAUSE_S)
        results.append(measure_once())
    tflops, gbps = max(r[0] for r in results), max(r[1] for r in results)
    entries[key] = {"tflops": tflops, "gbytes_per_s": gbps, "measured": today.isoformat(), "tries": tries}
    try:
        _write(path, entries)
    except OSError as e:
        note = "; ".join(filter(None, [note, f"not cached: {e}"]))
    return HostPeak(tflops, gbps, today.isoformat(), tries, False, str(path), note)
