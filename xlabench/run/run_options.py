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

from xlabench.measure.timers import TIMERS


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


# field -> range: the one place a numeric run option's limits are written.
LIMITS: dict[str, Limit] = {
    "timeout_s": Limit("--timeout", 0, open_low=True),
    "peak_tflops": Limit("--peak-tflops", 0, open_low=True),
    "repeats": Limit("--repeats", 1, integer=True),
    "num_processes": Limit("--num-processes", 1, integer=True),
    "process_id": Limit("--process-id", 0, integer=True),
    "local_devices": Limit("--local-devices", 1, integer=True),
    "init_timeout": Limit("--init-timeout", 1, integer=True),
    "jobs": Limit("--jobs", 1, integer=True),
}

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


def _same(have: Any, want: str) -> bool:
    """A case's parameter equals the text a user typed (512 == '512', True == 'true', None == 'null')."""
    if isinstance(have, bool) or have is None:
        return str(have).lower() == want.lower() or (have is None and want.lower() in ("none", "null", "~"))
    if isinstance(have, (int, float)):
        try:
            return float(want) == float(have)
        except ValueError:
            return False
    return str(have) == want


@dataclass(frozen=True)
class RunOptions:
    """Everything `run` (and the gate's runs, `compile`, `list`) is told besides the suite; checked once
    when built."""

    profile: Optional[str] = None
    out_dir: str = "results"
    resume_csv: Optional[str] = None
    timeout_s: Optional[float] = None
    peak_tflops: Optional[float] = None
    only_impls: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    where: tuple[tuple[str, str], ...] = ()  # -k KEY=VALUE: same key OR, different keys AND
    repeats: Optional[int] = None
    timer: Optional[str] = None
    shard_spec: Optional[str] = None
    python_torch_xla: Optional[str] = None
    trace_dir: Optional[str] = None
    coordinator: Optional[str] = None
    num_processes: Optional[int] = None
    process_id: Optional[int] = None
    local_devices: Optional[int] = None
    init_timeout: int = 120
    dry_run: bool = False
    only_case_ids: Optional[tuple[str, ...]] = None  # the gate's re-run of flagged cases
    run_id: Optional[str] = None
    cache_dir: Optional[str] = None  # the compilation cache (default: $XLABENCH_CACHE_DIR/compile)
    no_cache: bool = False
    jobs: Optional[int] = None  # cases at once, each in its own worker (default: from the host's cores and memory)
    tune: Optional[bool] = None  # search block sizes first (None: on for TPU/GPU, off on CPU: measure.plan.default_tune)
    tune_only: bool = False  # `xlabench tune`: the search and one timed call per case, to fill the tuning cache

    def __post_init__(self) -> None:
        for name, limit in LIMITS.items():
            limit.check(getattr(self, name))
        if self.timer is not None and self.timer not in TIMERS:
            raise OptionError(f"--timer {self.timer!r}: expected one of {', '.join(TIMERS)}")
        if self.trace_dir is not None and self.timer not in (None, "trace"):
            raise OptionError(f"--trace keeps the trace timer's profiles: it needs --timer trace, not {self.timer}")
        if self.trace_dir is not None:
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
RESUME_FLAGS = {"only_impls": "--impl", "backends": "--backend", "where": "-k", "shard_spec": "--shard",
                "repeats": "--repeats", "timer": "--timer", "timeout_s": "--timeout", "peak_tflops": "--peak-tflops",
                "local_devices": "--local-devices", "python_torch_xla": "--python-torch-xla", "trace_dir": "--trace",
                "tune": "--tune"}


def resume_words(opts: RunOptions) -> list[str]:
    """The flags that repeat ``opts``' case choice and measurement (for the resume hint)."""
    words: list[str] = []
    for key, flag in RESUME_FLAGS.items():
        value = getattr(opts, key)
        if key == "where":
            value = [f"{k}={v}" for k, v in value]
        if isinstance(value, bool):  # an on/off flag
            words += [flag if value else flag.replace("--", "--no-", 1)]
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
