"""The run options as click options, declared once: ``run``, ``gate``, ``compile`` and ``list`` take the
ones they need from ``run_options(...)`` and receive one frozen RunOptions (``run_opts``), so the same
flag has the same name, type, range and help everywhere. Ranges come from xlabench.run.run_options.LIMITS:
a bad value is exit 2 before anything starts."""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import click

from xlabench.impls import BACKENDS
from xlabench.measure.timers import TIMERS
from xlabench.run.run_options import LIMITS, OptionError, RunOptions, parse_where

PROFILE_HELP = "Profile to use (default: picked from the detected platform; 'base' for none)."


def _range(name: str) -> click.ParamType:
    limit = LIMITS[name]
    kind = click.IntRange if limit.integer else click.FloatRange
    return kind(min=limit.low, max=limit.high, min_open=limit.open_low)


def _where(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    try:
        return parse_where(value)
    except OptionError as e:
        raise click.BadParameter(str(e), ctx, param) from None


def _shard(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
    from xlabench.run.shard import parse_shard

    if value is not None:
        try:
            parse_shard(value)
        except ValueError as e:
            raise click.BadParameter(str(e), ctx, param) from None
    return value


# RunOptions field -> its click option (name, declaration and help written once).
OPTIONS: dict[str, Callable[[], Callable]] = {
    "profile": lambda: click.option("--profile", default=None, help=PROFILE_HELP),
    "out_dir": lambda: click.option("--out", "out_dir", default="results", show_default=True,
                                    type=click.Path(file_okay=False),
                                    help="Results folder: rows go to OUT/<suite>/<run-id>.csv."),
    "resume_csv": lambda: click.option("--resume", "resume_csv", default=None, type=click.Path(dir_okay=False),
                                       help="Continue RUN.csv: skip cases that already have a row (any status)."),
    "timeout_s": lambda: click.option("--timeout", "timeout_s", default=None, type=_range("timeout_s"),
                                      metavar="SECONDS",
                                      help="Per-case limit in seconds (overrides the suite's measure.timeout_s)."),
    "peak_tflops": lambda: click.option("--peak-tflops", default=None, type=_range("peak_tflops"), metavar="TFLOPS",
                                        help="Per-device peak TFLOP/s for MFU (overrides the table)."),
    "only_impls": lambda: click.option("--impl", "only_impls", multiple=True, metavar="IMPL",
                                       help="Only these impls (repeatable)."),
    "backends": lambda: click.option("--backend", "backends", multiple=True, type=click.Choice(BACKENDS),
                                     help="Only these backends (repeatable)."),
    "where": lambda: click.option("-k", "where", multiple=True, metavar="KEY=VALUE", callback=_where,
                                  help="Only cases whose KEY (a parameter, impl or backend) is VALUE; repeatable: "
                                       "the same key again widens (OR), another key narrows (AND), e.g. "
                                       "-k seq_len=512 -k impl=flash."),
    "repeats": lambda: click.option("--repeats", type=_range("repeats"), default=None, metavar="N",
                                    help="Independent runs of each case, taken in passes over the suite and "
                                         "pooled into its row (overrides measure.repeats; see docs/gate.md)."),
    "timer": lambda: click.option("--timer", type=click.Choice(TIMERS), default=None,
                                  help="wallclock | trace: also per-iteration device seconds from a profiler trace, a "
                                       "separate pass (overrides measure.timer; default: trace on TPU/GPU, "
                                       "wallclock on CPU; JAX only; the gate's --metric device_median_s needs trace)."),
    "shard_spec": lambda: click.option("--shard", "shard_spec", default=None, metavar="I/N", callback=_shard,
                                       help="Only shard I of N (0-based): a deterministic, cost-balanced split for "
                                            "fanning a suite out over machines; combine with `xlabench merge`."),
    "python_torch_xla": lambda: click.option(
        "--python-torch-xla", "python_torch_xla", default=None, type=click.Path(dir_okay=False),
        help="Python of the torch_xla environment (default: $XLABENCH_TORCH_XLA_PYTHON, else "
             ".venv-torch-xla/bin/python; create it with `make torch-xla-env`)."),
    "trace_dir": lambda: click.option(
        "--trace", "trace_dir", default=None, type=click.Path(file_okay=False),
        help="Keep each case's profile in DIR/<case_id>/ (.xplane.pb for xprof / TensorBoard, "
             "perfetto_trace.json.gz for ui.perfetto.dev), listed in the run's meta JSON and linked by "
             "`xlabench report`; implies --timer trace (JAX)."),
    "coordinator": lambda: click.option(
        "--coordinator", default=None, metavar="HOST:PORT",
        help="Multi-host run: address of process 0's coordinator (with --num-processes, --process-id). "
             "Without these, a SLURM or multi-host TPU launch is detected from the environment."),
    "num_processes": lambda: click.option("--num-processes", type=_range("num_processes"), default=None, metavar="N",
                                          help="Multi-host run: number of processes."),
    "process_id": lambda: click.option("--process-id", type=_range("process_id"), default=None, metavar="I",
                                       help="Multi-host run: this process's index (0 writes the CSV)."),
    "local_devices": lambda: click.option("--local-devices", type=_range("local_devices"), default=None, metavar="N",
                                          help="Virtual CPU devices per process (CPU only; default: the case's "
                                               "device count)."),
    "init_timeout": lambda: click.option("--init-timeout", type=_range("init_timeout"), default=120, metavar="SECONDS",
                                         show_default=True,
                                         help="Seconds to wait for all processes to join a multi-host run."),
    "cache_dir": lambda: click.option(
        "--cache-dir", default=None, type=click.Path(file_okay=False), metavar="DIR",
        help="Persistent compilation cache: a program compiled once is loaded from DIR the next time "
             "(rows say compile_cached): JAX's executables for run and gate, the compiled figures for "
             "compile. Default: $XLABENCH_CACHE_DIR/compile, else ~/.cache/xlabench/compile."),
    "no_cache": lambda: click.option("--no-cache", is_flag=True,
                                     help="Compile every case afresh: no persistent compilation cache."),
    "jobs": lambda: click.option(
        "--jobs", "-j", "jobs", type=_range("jobs"), default=None, metavar="N",
        help="Cases at once, each in a worker process of its own. compile: default from the host's cores "
             "and free memory. run: default 1, CPU runs only (the cases then share the host's cores, and their "
             "rows say so); timed runs on an accelerator run one at a time, so --jobs > 1 is refused there."),
    "tune": lambda: click.option(
        "--tune/--no-tune", "tune", default=None,
        help="Search each Pallas kernel's block sizes first (where the suite does not fix them), compiled in "
             "parallel and timed on the device clock; winners are kept in the tuning cache "
             "($XLABENCH_CACHE_DIR/tune) and reused. Default: on for TPU and GPU, off on CPU (interpreted "
             "kernels: their timings say nothing of a chip). --no-tune runs the kernels' defaults (128 x 128)."),
    "dry_run": lambda: click.option("--dry-run", is_flag=True,
                                    help="Print what would run and what would be skipped and why; run nothing."),
}

# The options of `run` and the gate's runs that pick and measure cases (issue 21: declared once).
CASE_OPTIONS = ("profile", "only_impls", "backends", "where")
MEASURE_OPTIONS = ("out_dir", "timeout_s", "peak_tflops", "repeats", "timer", "tune")


def run_options(*names: str, profile_help: Optional[str] = None) -> Callable[[Callable], Callable]:
    """Add the named RunOptions fields as click options; the command receives them as one RunOptions,
    ``run_opts`` (a RunOptions check that fails is exit 2)."""
    unknown = set(names) - set(OPTIONS)
    if unknown:
        raise ValueError(f"no run option {sorted(unknown)}")

    def decorate(f: Callable) -> Callable:
        @functools.wraps(f)
        def command(*args: Any, **kw: Any) -> Any:
            from xlabench.cli.common import BadInput

            given = {n: kw.pop(n) for n in names}
            try:
                kw["run_opts"] = RunOptions(**given)
            except OptionError as e:
                raise BadInput(str(e)) from None
            return f(*args, **kw)

        for name in reversed(names):
            opt = OPTIONS[name]()
            if name == "profile" and profile_help:
                opt = click.option("--profile", default=None, help=profile_help)
            command = opt(command)
        return command

    return decorate
