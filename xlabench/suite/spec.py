"""What a suite file may say (pydantic models: measure, profiles, matrix, impls) and what it becomes: a Suite and its Cases."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Optional, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from xlabench import impls as catalog
from xlabench.protocol.timing_plan import TimingPlan, default_timer
from xlabench.protocol.timers import Timer
from xlabench.workloads import PARAMS as WORKLOAD_PARAMS


# A suite (or one profile) expanding to more cases than this is refused before anything is expanded:
# the count is the product of the matrix's axis lengths times the backend/impl pairs.
MAX_CASES = 100_000
# A suite's YAML, every alias written out, has at most this many nodes (the shipped suites: < 250); an
# alias bomb (ten levels of ten aliases: 10^10 nodes) is refused before anything walks it.
MAX_YAML_NODES = 100_000


class SuiteError(Exception):
    """A suite file is unreadable or invalid. The message is complete and user-facing."""


# One list for every backend (a pair whose impl the backend lacks becomes a skipped row), or one list
# per backend: {jax: [naive, flash], torch_xla: [naive, sdpa, flash]} (impl names differ by framework).
Impls = Union[list[str], dict[str, list[str]]]


class Measure(BaseModel):
    """How a case is timed: the TimingPlan's keys (its defaults, the one place they are set) and the
    parent's own (repeats, timeout_s)."""

    model_config = ConfigDict(extra="forbid")
    warmup: int = Field(TimingPlan.warmup, ge=0, description="untimed iterations after compilation")
    iters: int = Field(TimingPlan.iters, ge=1, description="minimum timed iterations")
    min_time_s: float = Field(TimingPlan.min_time_s, ge=0,
                              description="keep timing until this many seconds have passed")
    max_iters: int = Field(TimingPlan.max_iters, ge=1, description="cap on timed iterations when min_time_s is set")
    repeats: int = Field(1, ge=1, description="independent runs of each case (fresh inputs, compile and warm-up "
                                              "each), taken in passes over the suite and pooled into its row: "
                                              "averages out run-to-run drift")
    timeout_s: float = Field(600.0, gt=0, description="per-case limit (compile + run) before the worker is killed")
    timer: Optional[Timer] = Field(
        None, description="wallclock | trace (also per-iteration device seconds from a profiler trace, a separate "
                          "pass; JAX only); default: trace on TPU/GPU, wallclock on CPU")

    def timing_plan(self, platform: str, trace_dir: Optional[str] = None) -> TimingPlan:
        """What the worker times one repeat of a case by, on ``platform``."""
        return TimingPlan(warmup=self.warmup, iters=self.iters, min_time_s=self.min_time_s,
                          max_iters=self.max_iters, timer=self.timer or default_timer(platform), trace_dir=trace_dir)


def _overrides(model: type[BaseModel]) -> type[BaseModel]:
    """The same keys with the same limits, each optional (None: keep the base suite's value)."""
    fields: dict[str, Any] = {
        name: (Optional[Annotated[(f.annotation, *f.metadata)]] if f.metadata
               else Optional[f.annotation],
               Field(None, description=f.description))
        for name, f in model.model_fields.items()}
    return create_model(f"{model.__name__}Override", __config__=ConfigDict(extra="forbid"), **fields)


# A profile's `measure:`, merged key by key over the suite's (declared once, in Measure).
MeasureOverride = _overrides(Measure)


class Profile(BaseModel):
    """Overrides for one platform (or any named variant): replaces the keys it sets."""

    model_config = ConfigDict(extra="forbid")
    description: str = ""
    backends: Optional[list[str]] = None
    impls: Optional[Impls] = None
    params: dict[str, Any] = {}
    matrix: dict[str, list[Any]] = {}
    measure: MeasureOverride = MeasureOverride()

    @field_validator("matrix")
    @classmethod
    def _matrix(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        _check_matrix(v)
        return v
    peak_tflops: Optional[float] = Field(None, gt=0)


class Cache(BaseModel):
    """The suite's `cache:` key: where its runs keep the persistent compilation cache."""

    model_config = ConfigDict(extra="forbid")
    dir: Optional[str] = Field(None, description="compilation cache folder (relative to the suite file); "
                                                  "--cache-dir overrides it, --no-cache turns the cache off")


class Published(BaseModel):
    """A measured figure from elsewhere (a paper, a vendor study) that charts place beside the suite's own."""

    model_config = ConfigDict(extra="forbid")
    sharding: str = Field(description="sharding mode the figure was measured with")
    global_batch: int = Field(gt=0)
    mfu: float = Field(gt=0, le=1, description="published MFU, 0..1")
    target: Optional[str] = Field(None, description="slice it was measured on, e.g. v4-8")
    source: str = Field(min_length=1, description="where the figure comes from (title, URL)")


class SuiteSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    workload: str
    backends: list[str] = ["jax"]
    impls: Impls
    params: dict[str, Any] = {}
    matrix: dict[str, list[Any]] = {}
    measure: Measure = Measure()
    peak_tflops: Optional[float] = Field(None, gt=0, description="per-device peak TFLOP/s for MFU")
    profiles: dict[str, Profile] = {}
    cache: Cache = Cache()
    published: list[Published] = Field([], description="published MFU figures drawn beside the mfu_ceiling chart")
    tuned: Optional[str] = Field(None, description="a file from `xlabench best` (relative to the suite file): cases "
                                                    "that leave the tuned kernel parameters unset take its best values")

    @field_validator("workload")
    @classmethod
    def _workload(cls, v: str) -> str:
        if v not in WORKLOAD_PARAMS:
            raise ValueError(f"unknown workload {v!r}; expected one of {sorted(WORKLOAD_PARAMS)}")
        return v

    @field_validator("backends")
    @classmethod
    def _backends(cls, v: list[str]) -> list[str]:
        _check_backends(v)
        return v

    @field_validator("matrix")
    @classmethod
    def _matrix(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        _check_matrix(v)
        return v


def matrix_keys(key: str) -> list[str]:
    """A matrix key is one parameter, or several joined by commas whose values are zipped tuples."""
    return [k.strip() for k in key.split(",")]


def _check_matrix(v: dict[str, list[Any]]) -> None:
    for key, values in v.items():
        if not values:
            raise ValueError(f"matrix.{key} is an empty list; give at least one value")
        names = matrix_keys(key)
        if len(names) > 1:
            for item in values:
                if not isinstance(item, (list, tuple)) or len(item) != len(names):
                    raise ValueError(f"matrix.{key}: each value must be a list of {len(names)} "
                                     f"({', '.join(names)}), got {item!r}")


def _check_backends(v: list[str]) -> None:
    known = sorted({i.backend for i in catalog.CATALOG})
    for b in v:
        if b not in known:
            raise ValueError(f"unknown backend {b!r}; expected one of {known}")
    if not v:
        raise ValueError("backends is empty; give at least one of " + ", ".join(known))


@dataclass(frozen=True)
class Case:
    """One thing to measure: a workload on a backend with an impl and concrete parameters."""

    index: int
    suite: str
    profile: str
    workload: str
    backend: str
    impl: str
    params: dict[str, Any]
    measure: Measure
    peak_tflops: Optional[float]
    case_id: str = field(default="")
    note: str = ""  # what planning decided for it (suite/slice_fit.py): the model chosen, modes run once
    unroll_best: bool = False  # a scanned ladder point: the run times its best point again unrolled

    @property
    def devices(self) -> int:
        return int(self.params.get("devices", 1))

    def label(self, keys: Optional[Sequence[str]] = None) -> str:
        """``backend/impl`` and the parameters (only ``keys``, e.g. those that vary over a run, if given)."""
        keys = [k for k in (self.params if keys is None else keys) if k in self.params and k != "devices"]
        shown = " ".join(f"{k}={self.params[k]}" for k in keys if self.params[k] is not None)
        return f"{self.backend}/{self.impl} {shown}"
