"""Suite YAML -> validated Suite (pydantic) -> profile applied -> matrix expanded -> list[Case].

Every error names the file, the key path (with its line where the YAML has it) and what was expected,
and is raised as SuiteError, which the CLI turns into exit code 2 without a traceback.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from xlabench import impls as catalog
from xlabench import results
from xlabench.workloads import PARAMS as WORKLOAD_PARAMS

# A suite (or one profile) expanding to more cases than this is refused before anything is expanded:
# the count is the product of the matrix's axis lengths times the backend/impl pairs.
MAX_CASES = 100_000


class SuiteError(Exception):
    """A suite file is unreadable or invalid. The message is complete and user-facing."""


# One list for every backend (a pair whose impl the backend lacks becomes a skipped row), or one list
# per backend: {jax: [naive, flash], torch_xla: [naive, sdpa, flash]} (impl names differ by framework).
Impls = Union[list[str], dict[str, list[str]]]


class Measure(BaseModel):
    """How a case is timed."""

    model_config = ConfigDict(extra="forbid")
    warmup: int = Field(2, ge=0, description="untimed iterations after compilation")
    iters: int = Field(10, ge=1, description="minimum timed iterations")
    min_time_s: float = Field(0.0, ge=0, description="keep timing until this many seconds have passed")
    max_iters: int = Field(1000, ge=1, description="cap on timed iterations when min_time_s is set")
    repeats: int = Field(1, ge=1, description="independent runs of each case (fresh inputs, compile and warm-up "
                                              "each), taken in passes over the suite and pooled into its row: "
                                              "averages out run-to-run drift")
    timeout_s: float = Field(600.0, gt=0, description="per-case limit (compile + run) before the worker is killed")


class MeasureOverride(BaseModel):
    model_config = ConfigDict(extra="forbid")
    warmup: Optional[int] = Field(None, ge=0)
    iters: Optional[int] = Field(None, ge=1)
    min_time_s: Optional[float] = Field(None, ge=0)
    max_iters: Optional[int] = Field(None, ge=1)
    repeats: Optional[int] = Field(None, ge=1)
    timeout_s: Optional[float] = Field(None, gt=0)


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

    @property
    def devices(self) -> int:
        return int(self.params.get("devices", 1))

    def label(self) -> str:
        keys = [k for k in self.params if k not in ("devices",)]
        shown = " ".join(f"{k}={self.params[k]}" for k in keys if self.params[k] is not None)
        return f"{self.backend}/{self.impl} {shown}"


@dataclass(frozen=True)
class Suite:
    path: Path
    spec: SuiteSpec

    @property
    def name(self) -> str:
        return self.spec.name

    def profile_names(self) -> list[str]:
        return list(self.spec.profiles)

    def pick_profile(self, platform: Optional[str], requested: Optional[str] = None) -> str:
        """``requested`` if given (must exist), else the profile named after the platform, else ''."""
        if requested is not None:
            if requested in ("", "base"):
                return ""
            if requested not in self.spec.profiles:
                avail = ", ".join(self.spec.profiles) or "none"
                raise SuiteError(f"{self.path}: no profile {requested!r} (profiles: {avail}; 'base' = no profile)")
            return requested
        return platform if platform in self.spec.profiles else ""

    def cases(self, profile: str = "") -> list[Case]:
        return expand(self, profile)


# ---------------------------------------------------------------------------------------------------
# Loading and error messages


def _line_of(node: Any, path: tuple[Any, ...]) -> Optional[int]:
    """1-based line of the YAML node at ``path`` (keys / list indices), or of its nearest parent."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in path:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if k.value == str(key):
                    node, line = v, k.start_mark.line + 1
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _where(path: Path, root: Any, loc: tuple[Any, ...]) -> str:
    line = _line_of(root, loc)
    dotted = ".".join(str(x) for x in loc) or "(top level)"
    return f"{path}:{line}: {dotted}" if line else f"{path}: {dotted}"


def _pydantic_message(err: dict[str, Any], model_fields: list[str]) -> str:
    if err["type"] == "extra_forbidden":
        return f"unknown key (expected one of: {', '.join(model_fields)})"
    if err["type"] == "missing":
        return "required key is missing"
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    got = err.get("input")
    if err["type"] not in ("value_error",) and not isinstance(got, (dict, list)):
        msg += f" (got {got!r})"
    return msg


def _fields_for(loc: tuple[Any, ...]) -> list[str]:
    if loc and loc[0] == "profiles" and len(loc) >= 3:
        return list(Profile.model_fields) if len(loc) == 3 else list(MeasureOverride.model_fields)
    if loc and loc[0] == "measure":
        return list(Measure.model_fields)
    return list(SuiteSpec.model_fields)


def load(path: str | Path) -> Suite:
    """Read, parse and validate a suite file, including every case of every profile."""
    path = Path(path)
    if not path.exists():
        raise SuiteError(f"{path}: no such file")
    text = _read_text(path)
    try:
        root = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise SuiteError(f"{where}: YAML syntax error: {problem}") from None
    if not isinstance(data, dict):
        raise SuiteError(f"{path}: expected a mapping of suite keys at the top level, got {type(data).__name__}")
    try:
        spec = SuiteSpec.model_validate(data)
    except ValidationError as e:
        lines = [f"{_where(path, root, tuple(err['loc']))}: {_pydantic_message(err, _fields_for(tuple(err['loc'])))}"
                 for err in e.errors()]
        raise SuiteError("\n".join(lines)) from None
    suite = Suite(path, spec)
    _check_names(suite, root)
    for name in [""] + list(spec.profiles):  # every profile must expand cleanly, not only the one picked
        expand(suite, name, root=root)
    return suite


def _read_text(path: Path) -> str:
    """The file as UTF-8 text; a SuiteError naming the line, column and key of the first bad byte."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SuiteError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        key = _key_at_line(data.decode("utf-8", errors="replace"), line)
        raise SuiteError(f"{path}:{line}:{column}: {key or '(top level)'}: not UTF-8 text (byte "
                         f"0x{data[e.start]:02x}); save the file as UTF-8") from None


def _key_at_line(text: str, line: int) -> str:
    """The dotted key path of the deepest YAML node that spans ``line`` (1-based), or '' if none."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return ""
    path: list[str] = []
    while node is not None:
        children = node.value if isinstance(node, yaml.MappingNode) else (
            [(None, v) for v in node.value] if isinstance(node, yaml.SequenceNode) else [])
        for i, (k, v) in enumerate(children):
            first = (k or v).start_mark.line + 1
            if first <= line <= v.end_mark.line + (v.end_mark.column > 0):
                path.append(str(k.value) if k is not None else str(i))
                node = v
                break
        else:
            break
    return ".".join(path)


def _impl_lists(impls: Impls) -> list[tuple[tuple[Any, ...], Optional[str], list[str]]]:
    """(key path suffix, backend or None for 'any', names) for each list in an impls entry."""
    if isinstance(impls, dict):
        return [((b,), b, names) for b, names in impls.items()]
    return [((), None, impls)]


def _check_names(suite: Suite, root: Any) -> None:
    spec = suite.spec
    param_fields = list(WORKLOAD_PARAMS[spec.workload].model_fields)
    sections = [((), spec.params, spec.matrix)] + [
        (("profiles", n), p.params, p.matrix) for n, p in spec.profiles.items()]
    for prefix, params, matrix in sections:
        swept: dict[str, str] = {}
        for key in list(params) + list(matrix):
            section = "params" if key in params else "matrix"
            for name in ([key] if section == "params" else matrix_keys(key)):
                if name not in param_fields:
                    raise SuiteError(
                        f"{_where(suite.path, root, prefix + (section, key))}: unknown parameter {name!r} for "
                        f"workload {spec.workload!r} (expected one of: {', '.join(param_fields)})")
                if name in swept:
                    raise SuiteError(f"{_where(suite.path, root, prefix + (section, key))}: {name!r} is set "
                                     f"twice (also in {swept[name]}); keep one")
                swept[name] = f"{section}.{key}"
    impl_entries: list[tuple[tuple[Any, ...], Impls]] = [(("impls",), spec.impls)]
    for n, p in spec.profiles.items():
        if p.impls is not None:
            impl_entries.append((("profiles", n, "impls"), p.impls))
        if p.backends is not None:
            try:
                _check_backends(p.backends)
            except ValueError as e:
                raise SuiteError(f"{_where(suite.path, root, ('profiles', n, 'backends'))}: {e}") from None
    for loc, entry in impl_entries:
        for suffix, backend, names in _impl_lists(entry):
            if backend is not None and backend not in catalog.BACKENDS:
                raise SuiteError(f"{_where(suite.path, root, loc + suffix)}: unknown backend {backend!r} "
                                 f"(expected one of: {', '.join(catalog.BACKENDS)})")
            valid = catalog.names_for(spec.workload, backend)
            if not names:
                raise SuiteError(f"{_where(suite.path, root, loc + suffix)}: empty list; expected impls from: "
                                 f"{', '.join(valid)}")
            for i, name in enumerate(names):
                if name not in valid:
                    on = f" on backend {backend!r}" if backend else ""
                    raise SuiteError(f"{_where(suite.path, root, loc + suffix + (i,))}: unknown impl {name!r} for "
                                     f"workload {spec.workload!r}{on} (expected one of: {', '.join(valid)})")


def _apply_profile(spec: SuiteSpec, profile: str) -> tuple[list[str], Impls, dict, dict, Measure, Optional[float]]:
    backends, impl_names = list(spec.backends), spec.impls
    params, matrix = dict(spec.params), dict(spec.matrix)
    measure, peak = spec.measure, spec.peak_tflops
    if profile:
        p = spec.profiles[profile]
        backends = p.backends if p.backends is not None else backends
        impl_names = p.impls if p.impls is not None else impl_names
        # A profile's fixed value replaces a base sweep of that parameter, and vice versa.
        for key, value in p.params.items():
            matrix = {k: v for k, v in matrix.items() if key not in matrix_keys(k)}
            params[key] = value
        for key, values in p.matrix.items():
            names = set(matrix_keys(key))
            matrix = {k: v for k, v in matrix.items() if not names & set(matrix_keys(k))}
            params = {k: v for k, v in params.items() if k not in names}
            matrix[key] = values
        measure = measure.model_copy(update=p.measure.model_dump(exclude_none=True))
        peak = p.peak_tflops if p.peak_tflops is not None else peak
    return backends, impl_names, params, matrix, measure, peak


def count_cases(matrix: dict[str, list[Any]], pairs: int) -> int:
    """Cases a matrix expands to (before duplicates are dropped), from its axis lengths alone: a zipped
    key ("seq_len,batch") is one axis. ``pairs``: the backend/impl pairs each combination runs on."""
    return math.prod(len(v) for v in matrix.values()) * pairs


def _check_count(suite: Suite, profile: str, matrix: dict[str, list[Any]], pairs: int, root: Any) -> None:
    n = count_cases(matrix, pairs)
    if n <= MAX_CASES:
        return
    spec = suite.spec
    loc = ("profiles", profile, "matrix") if profile and spec.profiles[profile].matrix else ("matrix",)
    where = _where(suite.path, root, loc) if root is not None else f"{suite.path}: {'.'.join(loc)}"
    prof = f"profile {profile!r}" if profile else "base suite"
    axes = " x ".join(f"{len(v)} {k}" for k, v in matrix.items())
    raise SuiteError(f"{where}: {prof} expands to {n:,} cases ({axes} x {pairs} backend/impl pairs), over the "
                     f"limit of {MAX_CASES:,}; sweep fewer values or split the suite")


def expand(suite: Suite, profile: str = "", root: Any = None) -> list[Case]:
    """The cartesian product of the matrix, for every backend and impl, validated case by case."""
    spec = suite.spec
    backends, impl_names, params, matrix, measure, peak = _apply_profile(spec, profile)
    impls_of: dict[str, list[str]] = {}
    for backend in backends:
        if isinstance(impl_names, dict) and backend not in impl_names:
            loc = ("profiles", profile, "impls") if profile and spec.profiles[profile].impls is not None else ("impls",)
            raise SuiteError(f"{_where(suite.path, root, loc) if root is not None else suite.path}: no impl list for "
                             f"backend {backend!r} (backends: {', '.join(backends)}); add '{backend}: [...]'")
        impls_of[backend] = impl_names[backend] if isinstance(impl_names, dict) else list(impl_names)
    _check_count(suite, profile, matrix, sum(len(v) for v in impls_of.values()), root)
    model = WORKLOAD_PARAMS[spec.workload]
    keys = list(matrix)
    cases: list[Case] = []
    seen: set[str] = set()
    for combo in itertools.product(*(matrix[k] for k in keys)):
        values = dict(params)
        for key, value in zip(keys, combo):
            names = matrix_keys(key)
            values.update(zip(names, value) if len(names) > 1 else [(key, value)])
        try:
            resolved = model(**values)
            if hasattr(resolved, "resolved"):
                resolved = resolved.resolved()
        except ValidationError as e:
            prof = f"profile {profile!r}" if profile else "base suite"
            shown = ", ".join(f"{k}={v}" for k, v in zip(keys, combo))
            msgs = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'case'}: {_pydantic_message(err, list(model.model_fields))}"
                             for err in e.errors())
            loc = ("profiles", profile, "matrix") if profile else ("matrix",)
            raise SuiteError(f"{_where(suite.path, root, loc) if root is not None else suite.path}: "
                             f"invalid case in {prof} ({shown or 'fixed params'}): {msgs}") from None
        case_params = resolved.model_dump()
        for backend in backends:
            for impl in impls_of[backend]:
                cid = results.case_id(spec.workload, backend, impl, case_params)
                if cid in seen:
                    continue
                seen.add(cid)
                cases.append(Case(len(cases), spec.name, profile, spec.workload, backend, impl,
                                  case_params, measure, peak, cid))
    return cases
