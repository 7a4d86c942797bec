"""The options of a run, once: which cases (profile, impls, backends, ``-k KEY=VALUE``, shard), how to
measure them (timeout, repeats, timer, peak) and where the rows go. ``run``, ``gate``, ``compile`` and
``list`` build one frozen RunOptions from the same click decorator (xlabench/cli/click_options.py); run_suite,
the worker pool and the resume hint read it whole, so an option is declared, checked and named once.

The range of every numeric option is here (LIMITS): the CLI turns it into click ranges (exit 2 before
anything starts), and RunOptions checks it again for callers that build one by hand.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Annotated, Any, Iterable, Optional, Sequence

from pydantic import Field, TypeAdapter, ValidationError

from xlabench.impls import BACKENDS
from xlabench.results import COMPILE_SUFFIX
from xlabench.suite.expand import same_text as _same
from xlabench.protocol.timers import TIMERS


class OptionError(ValueError):
    """An option's value is out of range or malformed: the message names the option (exit 2)."""


@dataclass(frozen=True)
class Limit:
    """A numeric option's range: ``low`` (exclusive when ``open_low``), optional ``high``; checked by a
    pydantic constrained type (an integer option refuses 1.5, every option NaN and inf)."""

    flag: str
    low: float
    open_low: bool = False
    high: Optional[float] = None
    integer: bool = False

    @functools.cached_property
    def _type(self) -> TypeAdapter:
        bounds: dict[str, Any] = {"gt" if self.open_low else "ge": self.low, "le": self.high}
        return TypeAdapter(Annotated[int if self.integer else float, Field(allow_inf_nan=False, **bounds)])

    def check(self, value: Optional[float]) -> None:
        if value is None:
            return
        try:
            self._type.validate_python(value)
        except ValidationError:
            shown = f"{value:g}" if isinstance(value, (int, float)) else repr(value)
            raise OptionError(f"{self.flag} {shown}: expected {self.describe()}") from None

    def describe(self) -> str:
        low = f"> {self.low:g}" if self.open_low else f">= {self.low:g}"
        kind = "an integer" if self.integer else "a number"
        return f"{kind} {low}" + (f" and <= {self.high:g}" if self.high is not None else "")


@dataclass(frozen=True)
class Flag:
    """How a RunOptions field is given on the command line, declared once beside the field (its type and
    default): flag(s), help, metavar, the kind of value (the CLI maps it to a click type), its range, and
    whether a --resume must repeat it. The click options, LIMITS and RESUME_FLAGS are derived from these."""

    flags: tuple[str, ...]
    help: str
    metavar: Optional[str] = None
    kind: str = "text"  # text | number | path_dir | path_file | choice | multiple | flag | onoff | where | shard
    choices: tuple[str, ...] = ()
    low: Optional[float] = None  # kind number: the range (Limit)
    open_low: bool = False
    high: Optional[float] = None
    integer: bool = False
    resume: bool = False  # choosing or measuring the cases: a resume repeats it
    show_default: bool = False
    per_command: tuple[tuple[str, str], ...] = ()  # (command, its help) where a command does otherwise

    def help_for(self, command: Optional[str]) -> str:
        """The help as ``command`` prints it: what the option does in that command, not in another."""
        return dict(self.per_command).get(command or "", self.help)

    @property
    def name(self) -> str:
        """The flag a user types ('--tune' of '--tune/--no-tune', '--jobs' of '--jobs'/'-j')."""
        return max(self.flags, key=len).split("/")[0]

    @property
    def limit(self) -> Optional[Limit]:
        return None if self.low is None else Limit(self.name, self.low, self.open_low, self.high, self.integer)


def option(default: Any, *flags: str, help: str, **kw: Any) -> Any:
    """A RunOptions field with its command-line declaration (Flag) as metadata."""
    kind = kw.pop("kind", "number" if "low" in kw else "text")
    return dataclasses.field(default=default, metadata={"flag": Flag(tuple(flags), help, kind=kind, **kw)})

PROFILE_HELP = "Profile to use (default: picked from the detected platform; 'base' for none)."

# Selector keys that are not workload parameters.
CASE_KEYS = ("backend", "impl")


def parse_where(items: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``-k KEY=VALUE`` items -> ((key, value), ...); OptionError for an item without '='."""
    out = []
    for item in items:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise OptionError(f"-k {item!r}: expected KEY=VALUE, e.g. -k seq_len=512 -k impl=flash")
        out.append((key.strip(), value.strip()))
    return tuple(out)


@dataclass(frozen=True)
class RunOptions:
    """Everything `run` (and the gate's runs, `compile`, `list`) is told besides the suite; checked once
    when built."""

    profile: Optional[str] = option(
        None, "--profile", help=PROFILE_HELP,
        per_command=(("compile", "Suite profile to compile (default: the one named after the target, e.g. gpt2's "
                                 "v4-8, else after its platform, 'tpu' or 'gpu'; else 'base', fitted to the target's "
                                 "devices)."),
                     ("gate", "Suite profile (default: the baseline's, else from the platform).")))
    out_dir: str = option("results", "--out", kind="path_dir", show_default=True,
                          help="Results folder: rows go to OUT/<suite>/<run-id>.csv.",
                          per_command=(("compile", f"Results folder: rows go to OUT/<suite>/<run-id>{COMPILE_SUFFIX}."),))
    resume_csv: Optional[str] = option(
        None, "--resume", kind="path_file",
        help="Continue RUN.csv: skip cases that already have a row (any status).",
        per_command=(("compile", f"Continue RUN{COMPILE_SUFFIX}: skip cases that already have a row (any status)."),))
    timeout_s: Optional[float] = option(None, "--timeout", metavar="SECONDS", low=0, open_low=True, resume=True,
                                        help="Per-case limit in seconds (overrides the suite's measure.timeout_s).")
    peak_tflops: Optional[float] = option(None, "--peak-tflops", metavar="TFLOPS", low=0, open_low=True, resume=True,
                                          help="Per-device peak TFLOP/s for MFU (overrides the table).")
    only_impls: tuple[str, ...] = option((), "--impl", kind="multiple", metavar="IMPL", resume=True,
                                         help="Only these impls (repeatable).")
    backends: tuple[str, ...] = option((), "--backend", kind="choice", choices=BACKENDS, resume=True,
                                       help="Only these backends (repeatable).")
    where: tuple[tuple[str, str], ...] = option(  # same key OR, different keys AND
        (), "-k", kind="where", metavar="KEY=VALUE", resume=True,
        help="Only cases whose KEY (a parameter, impl or backend) is VALUE; repeatable: the same key again "
             "widens (OR), another key narrows (AND), e.g. -k seq_len=512 -k impl=flash.")
    repeats: Optional[int] = option(None, "--repeats", metavar="N", low=1, integer=True, resume=True,
                                    help="Independent runs of each case, taken in passes over the suite and pooled "
                                         "into its row (overrides measure.repeats; see docs/gate.md).")
    timer: Optional[str] = option(None, "--timer", kind="choice", choices=TIMERS, resume=True,
                                  help="wallclock | trace: also per-iteration device seconds from a profiler trace, a "
                                       "separate pass, and on TPU/GPU the headline (overrides measure.timer; "
                                       "default: trace on TPU/GPU, wallclock on CPU; JAX only).")
    shard_spec: Optional[str] = option(None, "--shard", kind="shard", metavar="I/N", resume=True,
                                       help="Only shard I of N (0-based): a deterministic, cost-balanced split for "
                                            "fanning a suite out over machines; combine with `xlabench merge`.")
    python_torch_xla: Optional[str] = option(
        None, "--python-torch-xla", kind="path_file", resume=True,
        help="Python of the torch_xla environment (default: $XLABENCH_TORCH_XLA_PYTHON, else "
             ".venv-torch-xla/bin/python; create it with `make torch-xla-env`).")
    trace_dir: Optional[str] = option(
        None, "--trace", kind="path_dir", resume=True,
        help="Keep each case's profile in DIR/<case_id>/ (.xplane.pb for xprof / TensorBoard, "
             "perfetto_trace.json.gz for ui.perfetto.dev), listed in the run's meta JSON and linked by "
             "`xlabench report`; implies --timer trace (JAX).")
    explain: bool = option(
        False, "--explain", kind="flag",
        help="Keep what `xlabench explain` reads, per case, in <run-id>.explain/<case_id>/ beside the CSV: the "
             "profile and the executable's optimized HLO text (the profile in --trace DIR if given; implies "
             "--timer trace, JAX).",
        per_command=(("compile", "Keep what `xlabench explain` reads, per case, in <run-id>.explain/<case_id>/ "
                                 "beside the CSV: the optimized HLO text (each case compiled afresh, not read "
                                 "from the compilation cache)."),))
    coordinator: Optional[str] = option(
        None, "--coordinator", metavar="HOST:PORT",
        help="Multi-host run: address of process 0's coordinator (with --num-processes, --process-id). "
             "Without these, a SLURM or multi-host TPU launch is detected from the environment.")
    num_processes: Optional[int] = option(None, "--num-processes", metavar="N", low=1, integer=True,
                                          help="Multi-host run: number of processes.")
    process_id: Optional[int] = option(None, "--process-id", metavar="I", low=0, integer=True,
                                       help="Multi-host run: this process's index (0 writes the CSV).")
    local_devices: Optional[int] = option(None, "--local-devices", metavar="N", low=1, integer=True, resume=True,
                                          help="Virtual CPU devices per process (CPU only; default: the case's "
                                               "device count).")
    init_timeout: int = option(120, "--init-timeout", metavar="SECONDS", low=1, integer=True, show_default=True,
                               help="Seconds to wait for all processes to join a multi-host run.")
    dry_run: bool = option(False, "--dry-run", kind="flag",
                           help="Print what would run and what would be skipped and why, and the run's time on "
                                "the chip its profile is for, estimated from the runs under docs/data/; run nothing.")
    only_case_ids: Optional[tuple[str, ...]] = None  # the gate's re-run of flagged cases
    run_id: Optional[str] = None
    cache_dir: Optional[str] = option(
        None, "--cache-dir", kind="path_dir", metavar="DIR", resume=True,
        help="Persistent compilation cache: a program compiled once is loaded from DIR the next time "
             "(rows say compile_cached): JAX's compiled executables. Default: $XLABENCH_CACHE_DIR/compile, else "
             "~/.cache/xlabench/compile.",
        per_command=(("compile", "Persistent compilation cache: a program compiled once is not compiled again "
                                 "(rows say compile_cached): its figures (memory, FLOPs) are read from "
                                 "DIR. Default: $XLABENCH_CACHE_DIR/compile, else ~/.cache/xlabench/compile."),))
    no_cache: bool = option(False, "--no-cache", kind="flag", resume=True,
                            help="Compile every case afresh: no persistent compilation cache.")
    jobs: Optional[int] = option(
        None, "--jobs", "-j", metavar="N", low=1, integer=True,
        help="Cases at once, each in a worker process of its own: default 1, CPU runs only (the cases then "
             "share the host's cores, and their rows say so); timed runs on an accelerator run one at a time, so "
             "--jobs > 1 is refused there.",
        per_command=(("compile", "Cases compiled at once, each in a worker process of its own (default: from the "
                                 "host's cores and free memory)."),))
    tune: Optional[bool] = option(
        None, "--tune/--no-tune", kind="onoff", resume=True,
        help="Search each Pallas kernel's block sizes first (where the suite does not fix them), compiled in "
             "parallel and timed on the device clock; winners are kept in the tuning cache "
             "($XLABENCH_CACHE_DIR/tune) and reused. Default: on for TPU and GPU, off on CPU (interpreted "
             "kernels: their timings say nothing of a chip). --no-tune runs the kernels' defaults (128 x 128).")
    tune_only: bool = False  # `xlabench tune`: the search and one timed call per case, to fill the tuning cache

    def __post_init__(self) -> None:
        for name, limit in LIMITS.items():
            limit.check(getattr(self, name))
        if self.timer is not None and self.timer not in TIMERS:
            raise OptionError(f"--timer {self.timer!r}: expected one of {', '.join(TIMERS)}")
        for name, given in (("--trace", self.trace_dir is not None), ("--explain", self.explain)):
            if given and self.timer not in (None, "trace"):
                raise OptionError(f"{name} keeps the trace timer's profiles: it needs --timer trace, not {self.timer}")
            if given:
                object.__setattr__(self, "timer", "trace")
        parse_where(f"{k}={v}" for k, v in self.where)
        if self.no_cache and self.cache_dir is not None:
            raise OptionError("--no-cache and --cache-dir: give one of them, not both")

    def replace(self, **changes: Any) -> "RunOptions":
        return dataclasses.replace(self, **changes)

    @property
    def multihost(self) -> bool:
        return any(v is not None for v in (self.coordinator, self.num_processes, self.process_id))


# The options that choose or measure the cases: a resume must repeat them (the profile is in the meta).
FLAGS: dict[str, Flag] = {f.name: f.metadata["flag"] for f in dataclasses.fields(RunOptions) if "flag" in f.metadata}
# field -> range (from the fields' declarations): RunOptions checks them, the CLI turns them into click ranges.
LIMITS: dict[str, Limit] = {name: flag.limit for name, flag in FLAGS.items() if flag.limit is not None}
RESUME_FLAGS = {name: flag.name for name, flag in FLAGS.items() if flag.resume}


def resume_words(opts: RunOptions) -> list[str]:
    """The flags that repeat ``opts``' case choice and measurement (for the resume hint)."""
    words: list[str] = []
    for key, flag in RESUME_FLAGS.items():
        value = getattr(opts, key)
        if key == "where":
            value = [f"{k}={v}" for k, v in value]
        if isinstance(value, bool):  # an on/off flag as given; a plain flag (--no-cache) where it was given
            words += [flag] if value else [flag.replace("--", "--no-", 1)] if FLAGS[key].kind == "onoff" else []
            continue
        for v in (value if isinstance(value, (tuple, list)) else [value]):
            if v is not None:
                words += [flag, f"{v:g}" if isinstance(v, float) else str(v)]
    return words


class Filter:
    """The case filters of RunOptions applied to a list of cases, each checked against what the cases hold
    (an --impl, --backend or -k value no case has is an OptionError naming what there is)."""

    def __init__(self, opts: RunOptions):
        self.opts = opts

    def apply(self, cases: Sequence[Any]) -> list[Any]:
        cases = list(cases)
        for flag, attr, wanted in (("--impl", "impl", self.opts.only_impls),
                                   ("--backend", "backend", self.opts.backends)):
            if wanted:
                have = {getattr(c, attr) for c in cases}
                unknown = set(wanted) - have
                if unknown:
                    raise OptionError(f"{flag} {', '.join(sorted(unknown))}: not in this suite ({attr}s: "
                                      f"{', '.join(sorted(have)) or 'none'})")
                cases = [c for c in cases if getattr(c, attr) in wanted]
        return self._where(cases)

    def _where(self, cases: list[Any]) -> list[Any]:
        if not self.opts.where:
            return cases
        keys = list(dict.fromkeys([*CASE_KEYS, *(k for c in cases for k in c.params)]))
        by_key: dict[str, list[str]] = {}
        for key, value in self.opts.where:
            if key not in keys:
                raise OptionError(f"-k {key}={value}: unknown key {key!r}; valid keys: {', '.join(keys)}")
            by_key.setdefault(key, []).append(value)

        def get(c: Any, key: str) -> Any:
            return getattr(c, key) if key in CASE_KEYS else c.params.get(key)

        for key, values in by_key.items():
            have = list(dict.fromkeys(str(get(c, key)) for c in cases))
            missing = [v for v in values if not any(_same(get(c, key), v) for c in cases)]
            if missing:
                raise OptionError(f"-k {key}={missing[0]}: no case has it ({key}: {', '.join(have)})")
            cases = [c for c in cases if any(_same(get(c, key), v) for v in values)]
        return cases
