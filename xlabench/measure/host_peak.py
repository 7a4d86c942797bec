"""The host's CPU peak (float32 matmul TFLOP/s, streaming GB/s): measured once per host as the best of
several tries, cached with its date, and reused by every later run.

Why: CPU has no datasheet peak, and a peak re-measured by every run follows the load of the moment:
on a shared 2-core host it moved 0.073 vs 0.127 TFLOP/s between runs, so MFU moved 1.7x between runs
with the same timings. The best of several tries is the host's capacity (load only ever slows a try
down); cached, it is one yardstick for every run on the host.

The bandwidth is measured as STREAM does it (stream_bandwidth): ``b = a + 1`` over float32 arrays
allocated once (b's buffer donated, so every pass writes the same memory: no allocation or page fault
is timed), at several sizes of at least 4x the last-level cache, the best of several passes per size,
counting one read and one write per element; the host's figure is the sizes' lower median (Bandwidth.figure). Probe 1 (until #40)
timed ``jit(a + 1.0)`` with a fresh 256 MiB output per call: 1.2-2.8 GB/s where numpy streams 8-19.

The cache is ``host_peak.json`` in xlabench's cache folder (xlabench/cache.py), one entry per
host key (hostname, CPU model, CPU count, framework: what the matmul's speed depends on; and the
bandwidth probe's version, so a host measured by an older probe measures again), each with its date
and the host's load when it was measured. An entry older than MAX_AGE_DAYS, an unreadable file or
``XLABENCH_REMEASURE_PEAK=1`` measures afresh and rewrites the entry.

Load only ever lowers a try, so a peak measured while other jobs ran is too low, and every row rated
against it reads too high (the quick start on a quiet host, against a peak cached under a test run's
load, had MFU over 100%). A run that finds the host quieter by LOAD_MARGIN per CPU than the cached
entry's load measures again and keeps the better of the two (the host's capacity is the best it was ever
seen to do); an entry without a load measures again once. Imports nothing of xlabench but the cache: the
workers call it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from xlabench.cache import read_json, root, write_json
from xlabench.measure import last_level_cache
from xlabench.stats.summary import median_low
from xlabench.units import GIB, MIB, gbytes_per_s

ENV_REMEASURE = "XLABENCH_REMEASURE_PEAK"
FILE_NAME = "host_peak.json"
MAX_AGE_DAYS = 30  # a host's BLAS, clocks or the framework's CPU code can change: measure again after that
TRIES = 3
PAUSE_S = 0.2  # between tries: a burst of load from another job is less likely to cover all of them
BANDWIDTH_PROBE = 2  # the bandwidth probe's version (in the host key): 2 = stream_bandwidth
STREAM_LLC_MULTIPLES = (4, 8, 16)  # array sizes as multiples of the last-level cache (STREAM: >= 4x)
STREAM_MAX_BYTES = GIB  # per array (two arrays): a host with a huge cache gets fewer, smaller sizes
STREAM_REPS = 5  # timed passes per size (after one untimed pass: compile, first touch)
DEFAULT_LLC_BYTES = 32 * MIB  # where sysfs does not say
LOAD_MARGIN = 0.5  # per CPU: a cached peak measured at least this much busier than now is measured again,
LOAD_QUIETER = 0.5  # where the host is now at most this fraction as busy (a try's share of the CPU is
                    # about 1 / (1 + load): from 4.0 to 3.5 per CPU a new try would be as poor)


@dataclass(frozen=True)
class Bandwidth:
    """The bandwidth probe's own figures: GB/s per array size (bytes of one array)."""

    sizes: tuple[int, ...]
    gbytes_per_s: tuple[float, ...]

    @property
    def figure(self) -> float:
        """The host's bandwidth: the sizes' lower median. Not their highest: a size partly served from a
        cache (a last-level cache sysfs under-reports, a victim cache beside it) read 49.7 GB/s where the
        larger two read 24.8 and 25.0, and became every CPU row's MBU and roofline peak; nor their lowest, a
        pass slowed by another job. Of two sizes, the lower."""
        return median_low(self.gbytes_per_s)

    @property
    def chosen(self) -> int:
        """The array size that gave the host's figure."""
        return self.sizes[self.gbytes_per_s.index(self.figure)]

    def describe(self) -> str:
        per = ", ".join(f"{n / MIB:g} MiB {g:.1f}" for n, g in zip(self.sizes, self.gbytes_per_s))
        how = "the sizes' lower median" if len(self.sizes) > 1 else "the one size"
        return (f"probe {BANDWIDTH_PROBE}: b = a + 1 into a preallocated, donated float32 b; {per} GB/s; "
                f"chosen {self.figure:.1f} GB/s ({self.chosen / MIB:g} MiB: {how})")

    def to_json(self) -> dict:
        return {"sizes": list(self.sizes), "gbytes_per_s": list(self.gbytes_per_s)}

    @classmethod
    def from_json(cls, d: dict) -> "Bandwidth":
        sizes, rates = tuple(int(n) for n in d["sizes"]), tuple(float(g) for g in d["gbytes_per_s"])
        if not sizes or len(sizes) != len(rates) or not all(g > 0 for g in rates):
            raise ValueError("bandwidth: sizes and positive rates, one per size")
        return cls(sizes, rates)


def llc_bytes(root: Path = last_level_cache.SYSFS) -> int:
    """The host's last-level cache (last_level_cache.llc_bytes), else DEFAULT_LLC_BYTES where no source says."""
    return last_level_cache.llc_bytes(root) or DEFAULT_LLC_BYTES


def stream_sizes(llc: int) -> tuple[int, ...]:
    """Array sizes (bytes, whole MiB) of STREAM_LLC_MULTIPLES x the last-level cache, at most STREAM_MAX_BYTES."""
    return tuple(sorted({min(STREAM_MAX_BYTES, -(-llc * k // MIB) * MIB) for k in STREAM_LLC_MULTIPLES}))


def stream_bandwidth(make_pass: Callable[[int], Callable[[], None]], sizes: Sequence[int], reps: int = STREAM_REPS,
                     clock: Callable[[], float] = time.perf_counter) -> Bandwidth:
    """GB/s per size: ``make_pass(nbytes)`` allocates the arrays once and returns one synced pass over
    them (read nbytes, write nbytes); one untimed pass, then the fastest of ``reps``."""
    rates = []
    for nbytes in sizes:
        one = make_pass(nbytes)
        one()
        best = float("inf")
        for _ in range(reps):
            t0 = clock()
            one()
            best = min(best, clock() - t0)
        del one  # this size's arrays go before the next size's are allocated
        rates.append(gbytes_per_s(2 * nbytes, best))
    return Bandwidth(tuple(sizes), tuple(rates))


@dataclass(frozen=True)
class HostPeak:
    tflops: float
    gbytes_per_s: float
    measured: str  # UTC date of the measurement, YYYY-MM-DD
    tries: int
    cached: bool  # read from the cache file (False: measured by this process)
    path: str
    note: str = ""  # why it was measured afresh, where the cache could not be used
    bandwidth: Optional[Bandwidth] = None  # the bandwidth probe's figures (gbytes_per_s is their figure)
    load: Optional[float] = None  # the host's load per CPU when it was measured (1-minute average)

    @property
    def source(self) -> str:
        """What a row's peak_source says about the CPU peak."""
        how = f"cached in {self.path}" if self.cached else f"measured now, cached in {self.path}"
        at = "" if self.load is None else f" at load {self.load:.2f} per CPU"
        return f"best of {self.tries} tries on {self.measured}{at}, {how}" + (f"; {self.note}" if self.note else "")


def cache_path() -> Path:
    return root() / FILE_NAME


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def load_per_cpu() -> float:
    """The host's 1-minute load average per CPU (0.0 where the OS does not say)."""
    try:
        return os.getloadavg()[0] / _cpus()
    except (OSError, AttributeError):
        return 0.0


def host_key(framework: str) -> str:
    cpus = _cpus()
    return f"{socket.gethostname()} | {_cpu_model()} | {cpus} cpus | {framework} | bandwidth probe {BANDWIDTH_PROBE}"


def _read(path: Path) -> tuple[dict, str]:
    """The cache's entries, and a note when the file exists but cannot be used (it is then rewritten)."""
    if not path.exists():
        return {}, ""
    try:
        data = read_json(path)
    except (OSError, ValueError) as e:
        return {}, f"the cache was unreadable ({type(e).__name__}) and was rewritten"
    if not isinstance(data, dict) or not isinstance(data.get("hosts"), dict):
        return {}, "the cache was not a host_peak file and was rewritten"
    return data["hosts"], ""


Floor = Optional[tuple[float, Bandwidth]]  # figures a new measurement keeps where they are better


def _entry(entries: dict, key: str, today: dt.date, load_now: float) -> tuple[Optional[dict], str, Floor]:
    """The usable entry for this host, or why there is none; and, where the entry is sound but was measured
    busier than now or without a load record, its figures (a new measurement keeps the better of the two)."""
    e = entries.get(key)
    if e is None:
        return None, "", None
    try:
        tflops, tries = float(e["tflops"]), int(e["tries"])
        bandwidth = Bandwidth.from_json(e["bandwidth"])
        day = dt.date.fromisoformat(str(e["measured"]))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None, "this host's cache entry was malformed and was rewritten", None
    if not tflops > 0:
        return None, "this host's cache entry was not positive and was rewritten", None
    if (today - day).days > MAX_AGE_DAYS or day > today:
        return None, f"the cached peak of {day} was stale (over {MAX_AGE_DAYS} days) and was re-measured", None
    load = e.get("load_per_cpu")
    if not isinstance(load, (int, float)):
        return None, "the cached peak had no load record and was re-measured", (tflops, bandwidth)
    if load - load_now >= LOAD_MARGIN and load_now <= LOAD_QUIETER * load:
        return None, (f"the cached peak was measured at load {load:.2f} per CPU, the host is at {load_now:.2f} "
                      f"now: re-measured, the better kept"), (tflops, bandwidth)
    return {"tflops": tflops, "bandwidth": bandwidth, "measured": day.isoformat(), "tries": tries,
            "load": float(load)}, "", None


def _write(path: Path, entries: dict) -> None:
    """Whole or not at all (two workers may write at once: the last one wins, neither is torn)."""
    write_json(path, {"hosts": entries}, indent=2)


def jax_framework(site: Sequence[str] = ()) -> str:
    """The host key's framework: the JAX that measures the peak (the torch_xla worker measures with its
    environment's JAX too), from the packages' metadata, so that a cached peak is read without importing JAX
    (0.77 s of CPU in a torch_xla worker). ``site``: another environment's site-packages folders (the tests
    cache their fixture peak for the torch_xla one), else this one's."""
    from importlib import metadata

    if site:
        version = {d.metadata["Name"]: d.version for d in metadata.distributions(path=list(site))}.get
    else:
        version = metadata.version
    return f"jax {version('jax')} / jaxlib {version('jaxlib')}"


def env_keys(p: HostPeak) -> dict:
    """The worker env's keys of the host's CPU peak (a run rates every CPU row against them), and the
    bandwidth probe's own figures (`xlabench info` shows them)."""
    return {"measured_cpu_tflops": p.tflops, "measured_cpu_gbytes_per_s": p.gbytes_per_s, "cpu_peak_source": p.source,
            "cpu_bandwidth_probe": p.bandwidth.describe() if p.bandwidth else None}


def cache_entry(tflops: float, bw: Bandwidth, day: dt.date, tries: int, load: float) -> dict:
    """One host's entry in the cache file."""
    return {"tflops": tflops, "gbytes_per_s": bw.figure, "bandwidth": bw.to_json(), "measured": day.isoformat(),
            "tries": tries, "load_per_cpu": round(load, 3)}


def get(measure_once: Callable[[], tuple[float, Bandwidth]], framework: str, tries: int = TRIES,
        today: Optional[dt.date] = None, load: Optional[Callable[[], float]] = None) -> HostPeak:
    """The cached peak of this host, else the best of ``tries`` calls of ``measure_once`` (each
    (TFLOP/s, the bandwidth probe's figures); the best matmul and the try with the best bandwidth figure),
    cached with ``load()`` (default: load_per_cpu). Workers started together measure once: the others wait
    and read its figure. A cache that cannot be written still gives the measured peak."""
    path, key = cache_path(), host_key(framework)
    today = today or dt.datetime.now(dt.timezone.utc).date()
    load_now = (load or load_per_cpu)()
    remeasure = os.environ.get(ENV_REMEASURE, "") not in ("", "0")

    def lookup() -> tuple[dict, Optional[HostPeak], str, Floor]:
        entries, note = _read(path)
        if remeasure:
            return entries, None, f"re-measured ({ENV_REMEASURE})", None
        entry, why, floor = _entry(entries, key, today, load_now)
        if entry is None:
            return entries, None, note or why, floor
        bw = entry["bandwidth"]
        return entries, HostPeak(entry["tflops"], bw.figure, entry["measured"], entry["tries"], True, str(path),
                                 bandwidth=bw, load=entry["load"]), "", None

    if not remeasure and (found := lookup()[1]) is not None:
        return found
    # A worker that started beside this one may be measuring: wait for it, then read the cache again. The read,
    # the measurement and the write are one step under the lock, so no worker writes over an entry it did not read.
    with _measuring(path):
        entries, found, note, floor = lookup()
        if found is not None:
            return found
        return _measure(measure_once, tries, path, entries, key, today, load_now, note, floor)


@contextlib.contextmanager
def _measuring(path: Path) -> Iterator[None]:
    """One measurement at a time per cache file (an exclusive lock on a file beside it), so that workers started
    together measure once, on a host the others do not keep busy; without a lock file (an unwritable cache
    folder, no fcntl) each measures."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_name(path.name + ".lock"), "a")
    except (ImportError, OSError):
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _measure(measure_once: Callable[[], tuple[float, Bandwidth]], tries: int, path: Path, entries: dict, key: str,
             today: dt.date, load_now: float, note: str, floor: Floor) -> HostPeak:
    """The best of ``tries`` measurements (``floor``: figures a re-measure keeps where they are better), cached
    under ``key``."""
    results = []
    for i in range(tries):
        if i:
            time.sleep(PAUSE_S)
        results.append(measure_once())
    tflops, bw = max(r[0] for r in results), max((r[1] for r in results), key=lambda b: b.figure)
    if floor is not None:  # a re-measure at a quieter moment: the host's capacity is the best it was seen to do
        tflops, bw = max(tflops, floor[0]), max((bw, floor[1]), key=lambda b: b.figure)
    entries[key] = cache_entry(tflops, bw, today, tries, load_now)
    try:
        _write(path, entries)
    except OSError as e:
        note = "; ".join(filter(None, [note, f"not cached: {e}"]))
    return HostPeak(tflops, bw.figure, today.isoformat(), tries, False, str(path), note, bw, round(load_now, 3))
