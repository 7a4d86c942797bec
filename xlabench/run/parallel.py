"""``--jobs N``: N cases at once, each in a worker process of its own job (its own fault isolation, as
with one job), results handed back in the order they finish so that each row is written at once.

The default number of jobs is what the host can hold: its cores, and its available memory divided by
what one compile job was measured to hold at its peak (JOB_PEAK_BYTES; docs/compile.md). Framework-free.

``in_parallel`` stays on threads and queues rather than concurrent.futures (#36 looked): each job owns a
worker process, started and closed by the job's own thread, and its index names that worker; an
executor runs each submitted item on whichever thread is free, so the same slot bookkeeping, the
finish-in-the-job's-thread rule and the early-stop abort would have to be written around it again.
"""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence, TypeVar

from xlabench.units import GIB, KIB

T = TypeVar("T")
R = TypeVar("R")

# The peak resident memory of one compile worker for the largest shipped programs, measured with
# benchmarks/compile_once.py and the CLI's "peak host memory per job" (jax 0.10.2, libtpu 0.0.42.1): the
# llama-2B train step for v4-8 at global batch 128 under fsdp 1.77 GiB, gpt2-2b at batch 136 under 2d
# 1.69 GiB. Rounded up: a default of N jobs leaves the host N times this.
JOB_PEAK_BYTES = 2 * GIB


def _proc_bytes(path: Path, key: str) -> Optional[int]:
    """A '<key>:  N kB' line of a /proc file (Linux) as bytes, or None where it cannot be read."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) * KIB
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> Optional[int]:
    """The host's MemAvailable, or None."""
    return _proc_bytes(meminfo, "MemAvailable")


def host_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_jobs(cores: Optional[int] = None, available: Optional[int] = None,
                 per_job: int = JOB_PEAK_BYTES) -> int:
    """min(cores, available memory // per-job peak), at least 1."""
    cores = host_cores() if cores is None else cores
    available = available_bytes() if available is None else available
    by_memory = cores if available is None else available // per_job
    return max(1, min(cores, by_memory))


def peak_rss_bytes(pid: int) -> Optional[int]:
    """A live process's peak resident memory (VmHWM), or None."""
    return _proc_bytes(Path(f"/proc/{pid}/status"), "VmHWM")


def _in_order(items: Sequence[T], work: Callable[[int, T], R], started: Callable[[int, T], None],
              finish: Callable[[int], None]) -> Iterator[tuple[T, R]]:
    """in_parallel with one job: everything here, in order."""
    try:
        for item in items:
            started(0, item)
            yield item, work(0, item)
    finally:
        finish(0)


def _job(index: int, todo: "queue.SimpleQueue[T]", done: "queue.SimpleQueue[tuple[T, R] | BaseException | None]",
         stop: threading.Event, work: Callable[[int, T], R], started: Callable[[int, T], None],
         finish: Callable[[int], None]) -> None:
    """One job's thread: items from ``todo`` until it is empty or ``stop`` is set, each (item, result) put
    on ``done``; an exception goes there too (and stops the others); then None, when it has finished."""
    try:
        while not stop.is_set():
            try:
                item = todo.get_nowait()
            except queue.Empty:
                break
            started(index, item)
            done.put((item, work(index, item)))
    except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
        stop.set()
        done.put(e)
    finally:
        try:
            finish(index)
        finally:
            done.put(None)


def in_parallel(items: Sequence[T], jobs: int, work: Callable[[int, T], R],
                started: Callable[[int, T], None] = lambda job, item: None,
                finish: Callable[[int], None] = lambda job: None,
                abort: Callable[[], None] = lambda: None) -> Iterator[tuple[T, R]]:
    """(item, work(job, item)) for every item, in the order they finish; ``jobs`` threads, each its own
    job (``job`` is 0..jobs-1, so a job can own a worker), ``started(job, item)`` as each begins and
    ``finish(job)`` once a job has nothing left (it runs in the job's thread: a worker started there is
    closed by the thread that started it). With one job everything runs here, in order.

    ``work`` must not raise for an item's own failure (that is a row); an exception that escapes it
    stops the other jobs after their current item and is raised here. When the consumer stops early
    (an interrupt), the jobs take no new item, ``abort()`` is called (it kills their workers, so that
    the items in flight end at once) and the jobs are waited for."""
    if jobs <= 1:
        yield from _in_order(items, work, started, finish)
        return
    todo: "queue.SimpleQueue[T]" = queue.SimpleQueue()
    for item in items:
        todo.put(item)
    done: "queue.SimpleQueue[tuple[T, R] | BaseException | None]" = queue.SimpleQueue()
    stop = threading.Event()
    threads = [threading.Thread(target=_job, args=(i, todo, done, stop, work, started, finish),
                                name=f"xlabench-job-{i}", daemon=True)
               for i in range(min(jobs, len(items)))]
    for t in threads:
        t.start()
    running = len(threads)
    try:
        while running:
            got = done.get()
            if got is None:
                running -= 1
            elif isinstance(got, BaseException):
                raise got
            else:
                yield got
    finally:
        stop.set()
        if running:
            abort()
        for t in threads:
            t.join()


__all__ = ["JOB_PEAK_BYTES", "available_bytes", "default_jobs", "host_cores", "in_parallel", "peak_rss_bytes"]
