"""The typed messages between the parent and a worker, and how each crosses the pipe.

Requests (``RunRequest``, ``CompileRequest``) are built once from a suite ``Case``; replies carry a
``CaseResult`` or a ``CompileResult``. Each is serialised field by field under a type and version tag,
so that a field one side does not know, or one it needs and did not get, is an error naming it (a
parent and a worker of different versions fail loudly, never by dropping a column).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Protocol, TypeVar

from pydantic import ConfigDict, TypeAdapter, ValidationError

from xlabench.protocol.target import TargetSpec
from xlabench.protocol.timing_plan import TimingPlan
from xlabench.protocol.status import COMPILE_RESULTS

PROTOCOL_VERSION = 4  # 2: a CaseResult carries samples only (the parent summarises: run/rows.py); 3: a
# CompileRequest carries the case plan (interpret, the timing plan); 4: a CaseResult carries its phase seconds


class CaseSkipped(Exception):
    """Raised by a backend when an impl cannot run a case (the message is the reason in the row)."""


class ProtocolError(ValueError):
    """A message that does not match its type: wrong tag or version, an unknown or a missing field."""


T = TypeVar("T")


def _encode(obj: Any, **nested: Any) -> dict[str, Any]:
    """``obj``'s fields by name, under its type and the protocol version (tuples become lists)."""
    body = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    body.update(nested)
    return {"type": type(obj).__name__, "version": PROTOCOL_VERSION,
            **{k: list(v) if isinstance(v, tuple) else v for k, v in body.items()}}


# Every message type refuses a field it does not know (pydantic's extra="forbid"), TimingPlan too.
FORBID_EXTRA = ConfigDict(extra="forbid")


@functools.lru_cache(maxsize=None)
def _adapter(cls: type) -> TypeAdapter:
    return TypeAdapter(cls)


def _decode(cls: type[T], msg: Mapping[str, Any], **given: Any) -> T:
    """``cls`` from ``msg``, checked by pydantic: the type tag and protocol version, every field it needs,
    none it does not know, each of its type (``given``: fields already decoded, e.g. by their own
    from_message). A mismatch is a ProtocolError naming the field."""
    name = cls.__name__
    if not isinstance(msg, Mapping):
        raise ProtocolError(f"{name}: expected a JSON object, got {type(msg).__name__}")
    if msg.get("type") != name:
        raise ProtocolError(f"{name}: the message is a {msg.get('type')!r}")
    if msg.get("version") != PROTOCOL_VERSION:
        raise ProtocolError(f"{name}: protocol version {msg.get('version')!r}, this side speaks {PROTOCOL_VERSION} "
                            "(the parent and the worker run different xlabench versions)")
    body = {k: v for k, v in msg.items() if k not in ("type", "version")}
    try:
        return _adapter(cls).validate_python({**body, **given})
    except ValidationError as e:
        raise ProtocolError(_says(name, e)) from None


def _says(name: str, e: ValidationError) -> str:
    """One line for a message pydantic refused: the unknown fields, else the missing ones, else the first
    field of a wrong type (nested fields dotted: plan.iters)."""
    errors = e.errors()

    def where(err: Any) -> str:
        return ".".join(str(p) for p in err["loc"])

    for kinds, what in ((("extra_forbidden", "unexpected_keyword_argument"), "unknown"),
                        (("missing", "missing_argument"), "missing")):
        found = sorted(where(x) for x in errors if x["type"] in kinds)
        if found:
            return f"{name}: {what} field(s) {', '.join(found)}"
    first = errors[0]
    return f"{name}: field {where(first)}: {first['msg']} (got {first.get('input')!r})"


class CaseLike(Protocol):
    """What a request reads of a suite Case (xlabench/suite/expand.py), without importing the suite."""

    case_id: str
    workload: str
    backend: str
    impl: str
    params: dict[str, Any]


@dataclass(frozen=True)
class _CaseRequest:
    """What every request says of its case (its fields come first, in this order)."""

    __pydantic_config__ = FORBID_EXTRA

    case_id: str
    workload: str
    backend: str
    impl: str
    params: Mapping[str, Any]


def _case_fields(case: CaseLike) -> tuple[Any, ...]:
    """_CaseRequest's fields of a case, in their order (every request's first arguments)."""
    return tuple(dict(case.params) if f.name == "params" else getattr(case, f.name)
                 for f in dataclasses.fields(_CaseRequest))


def _plan_given(msg: Mapping[str, Any]) -> dict[str, Any]:
    """A request's timing plan, decoded (for _decode's ``given``), where the message has one."""
    plan = msg.get("plan") if isinstance(msg, Mapping) else None
    return {"plan": _decode(TimingPlan, plan)} if plan is not None else {}


@dataclass(frozen=True)
class RunRequest(_CaseRequest):
    """Run one case (op ``run``): what the worker needs, the timing plan included."""

    interpret: bool
    platform: str
    plan: TimingPlan

    @classmethod
    def from_case(cls, case: CaseLike, plan: TimingPlan, *, interpret: bool, platform: str) -> "RunRequest":
        return cls(*_case_fields(case), bool(interpret), platform, plan)

    def to_message(self) -> dict[str, Any]:
        return {"op": "run", **_encode(self, plan=_encode(self.plan))}

    @classmethod
    def from_message(cls, msg: Mapping[str, Any]) -> "RunRequest":
        return _decode(cls, {k: v for k, v in msg.items() if k != "op"}, **_plan_given(msg))


@dataclass(frozen=True)
class CompileRequest(_CaseRequest):
    """Compile one case for a target this host does not have (op ``compile``)."""

    target: TargetSpec
    interpret: bool  # the case plan's (run/case_plan.py): never on a TPU or GPU target
    plan: TimingPlan  # the case plan's timing plan: its tuning mode and folder (the blocks a run would use)
    keep_dir: Optional[str] = None  # `compile --explain`: write the optimized HLO text here

    @classmethod
    def from_case(cls, case: CaseLike, target: TargetSpec, plan: TimingPlan, *, interpret: bool,
                  keep_dir: Optional[str] = None) -> "CompileRequest":
        return cls(*_case_fields(case), target, bool(interpret), plan, keep_dir)

    def to_message(self) -> dict[str, Any]:
        return {"op": "compile", **_encode(self, target=self.target.to_message(), plan=_encode(self.plan))}

    @classmethod
    def from_message(cls, msg: Mapping[str, Any]) -> "CompileRequest":
        target = msg.get("target") if isinstance(msg, Mapping) else None
        given = {"target": TargetSpec.from_message(target)} if isinstance(target, Mapping) else {}
        return _decode(cls, {k: v for k, v in msg.items() if k != "op"}, **given, **_plan_given(msg))


@dataclass(frozen=True)
class CaseResult:
    """The reply of every case runner (any backend, any workload): what the worker measured, and nothing
    derived from it.

    Workers report their samples (wall clock, and the device clock's where it ran) and counts per
    iteration (``metrics``: flops, bytes ...; ``tokens_per_step``); every statistic (median, p10 ...) and
    rate (TFLOP/s, GB/s, tokens/s) is computed once in the parent, from the samples of every repeat
    (run/rows.py).
    """

    __pydantic_config__ = FORBID_EXTRA

    samples: tuple[float, ...]  # per-iteration wall-clock seconds, every one kept
    warmup: Optional[int] = None
    compile_s: Optional[float] = None
    lower_s: Optional[float] = None
    compile_cached: Optional[bool] = None  # the executable came from the persistent compilation cache
    peak_memory_bytes: Optional[int] = None
    max_abs_err: Optional[float] = None
    err_tol: Optional[float] = None
    correct: Optional[bool] = None  # max_abs_err <= err_tol (kept, not recomputed: pooling ANDs it)
    notes: Optional[str] = None
    # Other row columns measured or counted in the worker, in row order (flops, kernel_flops, bytes,
    # flops_palm, params_count, losses ...). Never a rate per median_s.
    metrics: Mapping[str, Any] = field(default_factory=dict)
    tokens_per_step: Optional[float] = None  # tokens one iteration processes (not a column: the parent's tokens_per_s)
    tokens_global: bool = False  # tokens_per_step is a global batch over the case's devices: tokens_per_s_per_device too
    timer: Optional[str] = None  # wallclock | trace: how the row was timed (samples are wallclock either way)
    device_samples: tuple[float, ...] = ()  # trace timer: per-iteration device seconds of a separate profiled pass
    # Where the case's time went in the worker, phase by phase (measure/phases.py: inputs, tune, compile,
    # timing, reference ...; ``other``: the worker's time in the case that no phase named). Not a CSV
    # column: the run's meta sums it per phase (``phase_s``), and run/estimate.py budgets runs from it.
    phase_s: Mapping[str, float] = field(default_factory=dict)

    @property
    def fields(self) -> dict[str, Any]:
        """The row columns the worker measured (no statistic, no rate), in the order rows have them."""
        out: dict[str, Any] = {} if self.timer is None else {"timer": self.timer}
        for name in ("lower_s", "compile_s", "compile_cached", "warmup"):
            out[name] = getattr(self, name)
        out.update(self.metrics)
        for name in ("peak_memory_bytes", "max_abs_err", "err_tol", "correct", "notes"):
            out[name] = getattr(self, name)
        return out

    def replace(self, **changes: Any) -> "CaseResult":
        return dataclasses.replace(self, **changes)

    def to_message(self) -> dict[str, Any]:
        return _encode(self)

    @classmethod
    def from_message(cls, msg: Mapping[str, Any]) -> "CaseResult":
        return _decode(cls, msg)


@dataclass(frozen=True)
class CompileResult:
    """The reply of a compile-only case: compiled / lowered (CUDA) / oom, and XLA's figures as row columns."""

    __pydantic_config__ = FORBID_EXTRA

    status: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    error: Optional[str] = None

    def __post_init__(self) -> None:
        if self.status not in COMPILE_RESULTS:
            raise ProtocolError(f"CompileResult: status {self.status!r} is not one of {', '.join(COMPILE_RESULTS)}")

    def with_fields(self, **more: Any) -> "CompileResult":
        return dataclasses.replace(self, fields={**self.fields, **more})

    def to_message(self) -> dict[str, Any]:
        return _encode(self)

    @classmethod
    def from_message(cls, msg: Mapping[str, Any]) -> "CompileResult":
        return _decode(cls, msg)
