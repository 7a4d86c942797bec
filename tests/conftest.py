"""Shared fixtures: tiny suites written to tmp_path, a way to run the CLI as a real subprocess, and a
session-end check that no worker process the tests started is left alive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Every process the tests start inherits this (workers included, whatever their parent's fate): the
# session-end check finds them by it even after their parent was killed and they were re-parented.
SESSION_ENV = "XLABENCH_TEST_SESSION"
SESSION_PID = os.getpid()
os.environ[SESSION_ENV] = str(SESSION_PID)
# The host's CPU peak is cached per host (xlabench/measure/host_peak.py): the tests, their CLI runs and
# workers use a cache of their own, never the user's ~/.cache/xlabench (measured once per test session).
# One cache for the session: pytest-xdist's workers inherit the controller's folder (each made its own, so
# every worker measured the peak again, ~13 s of CPU a framework, under CI's load more).
TEST_CACHE_ENV = "XLABENCH_TEST_SESSION_CACHE"
# The session's host peak is a fixture, like a fake clock: each framework's worker measured it once a session
# (~11 s of CPU alone, 25-35 s beside the other pytest worker, whose workers waited on the measurement's lock)
# for rows whose figures no test asserts. The measurement itself is tested on its own cache:
# tests/test_host_peak.py, and `info --remeasure-peak` in a real worker (tests/test_cli.py).
# XLABENCH_TEST_MEASURE_PEAK=1 measures it as a user's first run does.
FIXTURE_PEAK = {"tflops": 1.0, "gbytes_per_s": 100.0}  # above any CPU these tests run on: no row over its roof


def _seed_host_peak(folder: str) -> None:
    """The fixture peak, cached for the JAX of this environment and of the torch_xla one (whose worker
    measures with its own JAX: another host key)."""
    import datetime as dt

    from xlabench.measure import host_peak
    from xlabench.run.envs import Interpreters

    python = Path(Interpreters().python_for("torch_xla"))
    site = [str(p) for p in python.parent.parent.glob("lib/python*/site-packages")]
    frameworks = [host_peak.jax_framework(), *([host_peak.jax_framework(site)] if site else [])]
    bw = host_peak.Bandwidth((64 << 20,), (FIXTURE_PEAK["gbytes_per_s"],))
    entry = host_peak.cache_entry(FIXTURE_PEAK["tflops"], bw, dt.datetime.now(dt.timezone.utc).date(), 3, 0.0)
    host_peak._write(Path(folder, host_peak.FILE_NAME), {host_peak.host_key(f): entry for f in frameworks})


if not (os.environ.get("PYTEST_XDIST_WORKER") and os.path.isdir(os.environ.get(TEST_CACHE_ENV, ""))):
    os.environ[TEST_CACHE_ENV] = tempfile.mkdtemp(prefix="xlabench-test-cache-")
    if os.environ.get("XLABENCH_TEST_MEASURE_PEAK") != "1":
        _seed_host_peak(os.environ[TEST_CACHE_ENV])
os.environ["XLABENCH_CACHE_DIR"] = os.environ[TEST_CACHE_ENV]
os.environ.pop("XLABENCH_REMEASURE_PEAK", None)
# The tests' CPU programs are tiny and compiled once or twice each: XLA's CPU compile (LLVM's optimiser)
# is most of their CPU time, not running them. The tests, their CLI runs and workers (and torch_xla's
# XLA, which reads the same flags) compile without LLVM's optimisation: a scanned-vs-unrolled train test
# pair took 37 s of CPU at the default level, 25 s at 0. And without XLA's CPU fusion emitters (its MLIR
# code generator; the older elemental emitter compiles the same fusions): a tiny GPT-2's remat value_and_grad
# compiled in 1.69 s of CPU with them, 0.54 s without, and `make test-fast` took 219 s, then 168 s. And in one
# piece: XLA splits a module's code generation into parallel parts, which cost more CPU in all (0.70 s there,
# 0.42 s in one), and the tests keep every core busy already. torch_xla's XLA and libtpu accept these flags.
# Users' runs keep XLA's defaults. The tests check behaviour, never speed; XLABENCH_TEST_XLA_OPT=1 keeps XLA's
# defaults (a failure that needs them). docs/ci.md has the figures.
TEST_XLA_FLAGS = ("--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
                  " --xla_cpu_parallel_codegen_split_count=1")
if os.environ.get("XLABENCH_TEST_XLA_OPT") != "1" and TEST_XLA_FLAGS not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()

# A CPU worker's environment as a row records it (the in-process kernel tests build rows with it).
CPU_WORKER_ENV = {"platform": "cpu", "device_kind": "cpu", "device_count": 1, "framework_version": "jax 0 / jaxlib 0",
                  "measured_cpu_tflops": 1.0, "measured_cpu_gbytes_per_s": 10.0}

TINY_SUITE = """
name: tiny
description: two impls, two shapes
workload: attention
backends: [jax]
impls: [naive, xla_sdpa]
params: {num_heads: 2, head_dim: 32, dtype: float32, batch: 1}
matrix:
  seq_len: [64, 128]
measure: {warmup: 1, iters: 3, timeout_s: 120}
"""


TORCH_XLA_OPT_OUT = "XLABENCH_NO_TORCH_XLA"


def require_torch_xla() -> str:
    """The torch_xla environment's python: a test that needs it skips only when the opt-out is set on
    purpose, and fails (saying how to build it) when it is missing, never hiding the gap."""
    from xlabench.run import envs

    if os.environ.get(TORCH_XLA_OPT_OUT) == "1":
        pytest.skip(f"{TORCH_XLA_OPT_OUT}=1: torch_xla tests skipped on purpose")
    interp = envs.Interpreters()
    reason = interp.missing("torch_xla")
    if reason:
        pytest.fail(f"{reason} (or set {TORCH_XLA_OPT_OUT}=1 to skip these tests on purpose)", pytrace=False)
    return interp.python_for("torch_xla")


LIBTPU_OPT_OUT = "XLABENCH_NO_LIBTPU"


def require_libtpu() -> None:
    """libtpu for the compile-for-TPU tests: skipped only when the opt-out is set on purpose, else a
    failure saying how to install it."""
    import importlib.util

    if os.environ.get(LIBTPU_OPT_OUT) == "1":
        pytest.skip(f"{LIBTPU_OPT_OUT}=1: compile-for-TPU tests skipped on purpose")
    if importlib.util.find_spec("libtpu") is None:
        pytest.fail("libtpu is not installed: pip install -e '.[tpu-compile]' (make tpu-compile), "
                    f"or set {LIBTPU_OPT_OUT}=1 to skip these tests on purpose", pytrace=False)


@pytest.fixture
def write_suite(tmp_path: Path):
    """Write a suite YAML (dedented) into tmp_path and return its path."""

    def _write(text: str = TINY_SUITE, name: str = "suite.yaml") -> Path:
        p = tmp_path / name
        p.write_text(textwrap.dedent(text).lstrip())
        return p

    return _write


class NoWorkerPool:
    """A stand-in for run.workers.WorkerPool that starts nothing (for tests that stub what the workers do):
    every pool operation a run or a compile makes is a no-op."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        self.interpreters = kw.get("interpreters") or (a[1] if len(a) > 1 else None)

    def like(self) -> "NoWorkerPool":
        return type(self)()

    def missing(self, backend: str) -> None:
        return None

    def close(self) -> None:
        pass

    def kill_all(self) -> None:
        pass

    def peak_rss_bytes(self) -> None:
        return None


def run_cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m xlabench.cli ...` as a real process (what a user's shell does)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "xlabench", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=str(ROOT))


# ------------------------------------------------------------------------------- processes, by pid


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a killed orphan waits for pid 1 to reap it)."""
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def descendants(pid: int) -> list[int]:
    """Live processes below ``pid`` in the process tree (children, theirs, ...)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None:
            parent[int(entry)] = st[1]
    found, frontier = [], {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier}
        found += sorted(frontier)
    return [p for p in found if alive(p)]


def _is_worker(pid: int) -> bool:
    try:
        return b"xlabench.worker" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


def workers_of(pid: int) -> list[int]:
    """Live ``xlabench.worker`` processes below ``pid`` (found by name once; then watched by pid)."""
    return [p for p in descendants(pid) if _is_worker(p)]


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """The pids still alive after up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def session_workers(session_pid: int = SESSION_PID) -> list[int]:
    """Live ``xlabench.worker`` processes of this test session: started under it, or carrying its marker."""
    ours = f"{SESSION_ENV}={session_pid}".encode()
    below = set(descendants(session_pid))
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or not alive(pid := int(entry)) or not _is_worker(pid):
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:  # another user's process: only its place in the tree can tell
            environ = []
        if pid in below or ours in environ:
            found.append(pid)
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session if a worker it started outlived the tests (each leak would stay behind, holding
    memory, and on an accelerator its devices). Leftovers are then killed."""
    if not Path("/proc/self/stat").exists():
        return
    left = wait_gone(session_workers(), timeout_s=5.0)
    if not left:
        return
    lines = []
    for pid in left:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmd = "?"
        st = _stat(pid)
        lines.append(f"  pid {pid} (parent {st[1] if st else '?'}): {cmd}")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = f"LEAK: {len(left)} xlabench.worker process(es) of this test session still alive (now killed):"
    if reporter is not None:
        reporter.write("\n")
        reporter.write_line(message, red=True, bold=True)
        for line in lines:
            reporter.write_line(line, red=True)
    else:
        print(message, *lines, sep="\n", file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _starts_python(args: object) -> bool:
    """A command that is a Python process (a worker, the CLI as a process, python -c): not git, make, a server."""
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)  # type: ignore[call-overload]
    words = " ".join(str(a) for a in argv[:3]).split()
    return bool(words) and (os.path.basename(words[0]).startswith("python") or "xlabench" in " ".join(words))


# `make test-fast` (-m "not slow") stays fast: a test that starts a Python process (a worker, the CLI as a
# process, python -c, multiprocessing), itself or through a fixture it is the first to need, must be marked
# slow; one that is not fails at teardown, naming the command.
_RUNNING: list[Any] = [None]  # the test whose setup, call or teardown runs now
_STARTED: list[str] = []


def _watch_process_starts() -> None:
    import multiprocessing.process

    popen_init, mp_start = subprocess.Popen.__init__, multiprocessing.process.BaseProcess.start

    def popen(self: subprocess.Popen, args: Any, *a: Any, **kw: Any) -> None:
        if _RUNNING[0] is not None and _starts_python(args):
            _STARTED.append(str(args)[:200])
        popen_init(self, args, *a, **kw)

    def mp(self: Any) -> None:
        if _RUNNING[0] is not None:
            _STARTED.append(f"multiprocessing {self.name}")
        mp_start(self)

    subprocess.Popen.__init__ = popen  # type: ignore[method-assign]
    multiprocessing.process.BaseProcess.start = mp  # type: ignore[method-assign]


_watch_process_starts()


def pytest_sessionstart(session: pytest.Session) -> None:
    """The host calibration's probe process (xlabench/run/calibrate.py: one per process, started on first use)
    starts here, outside every test: else whichever test first runs cases in this process would start it."""
    from xlabench.run import calibrate

    calibrate.host_calib_s(1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any):
    _RUNNING[0] = item
    _STARTED.clear()
    yield
    _RUNNING[0] = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.when == "teardown" and _STARTED and report.passed and not item.get_closest_marker("slow"):
        report.outcome = "failed"
        report.longrepr = (f"this test (or a fixture it is the first to need) starts a Python process ({_STARTED[0]}"
                           f"{' ...' if len(_STARTED) > 1 else ''}): mark it @pytest.mark.slow (make test-fast "
                           "leaves slow tests out)")


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server for the whole session (tests/_postgres.py). Without Debian's binaries the
    tests that need it skip on a developer's machine and fail in CI (CI installs them: .ci/run)."""
    import _postgres

    if _postgres.bin_dir() is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL binaries not found in CI: .ci/run installs the postgresql package")
        pytest.skip("PostgreSQL binaries not installed (apt-get install postgresql)")
    yield from _postgres.server()


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request, tmp_path: Path) -> str:
    """A fresh, empty history store: a SQLite file, or a database of its own on the real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.sqlite'}"
    import _postgres

    server = request.getfixturevalue("postgres_server")
    return _postgres.fresh_database(server, "t_" + format(abs(hash(request.node.nodeid)), "x")[:12])


# The test modules that take longest (measured in a full run here, 2 xdist workers, XLA flags as above),
# scheduled first: `--dist loadfile` hands whole modules to idle workers in collection order, so a long module
# collected last leaves the other worker idle at the end (CI was 902 s against its 900 s limit that way).
# Every module of 7 s or more is listed (2026-12-07, from a full run's durations less this session's cuts),
# so that only short ones are left to even the two workers out at the end.
LONGEST_FIRST = ("test_torch_xla", "test_compile", "test_user_impls", "test_train_batch", "test_history_cli",
                 "test_compile_cache", "test_compile_train", "test_train_sharding", "test_train_step",
                 "test_history_changes", "test_runner", "test_train_model", "test_train_e2e", "test_history_judge",
                 "test_slice_fit", "test_jobs", "test_cli", "test_multihost", "test_gate_e2e", "test_plots_report",
                 "test_plots", "test_history_store", "test_explain_compile", "test_tune", "test_history_bands",
                 "test_trace_timer", "test_attention_impls", "test_best", "test_physical_invariants",
                 "test_passes", "test_roofline", "test_block_sweep", "test_gate_compare", "test_plots_readable",
                 "test_plots_fit", "test_explain_cli", "test_layout", "test_paged_impls", "test_paged_cli",
                 "test_gate_stats", "test_plots_say", "test_startup", "test_newcomer", "test_host_peak",
                 "test_gate_suite")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).stem, len(rank)))  # stable: file order kept
