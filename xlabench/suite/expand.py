"""A profile applied to a suite and its matrix expanded into cases, counted first so a runaway matrix is refused before it is built."""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from pydantic import ValidationError

from xlabench import impls as catalog
from xlabench import results
from xlabench.impls import attention_rules
from xlabench.workloads.attention import BLOCK_PARAMS
from xlabench.workloads import PARAMS as WORKLOAD_PARAMS
from xlabench.workloads import WORKLOADS
from xlabench.workloads import model_presets as presets
from xlabench.workloads.train import MODE_AXES
from xlabench.suite import slice_fit, tuned
from xlabench.suite.yaml_errors import _pydantic_message, _where
from xlabench.suite.spec import Case, Impls, MAX_CASES, Measure, SuiteError, SuiteSpec, matrix_keys


@dataclass(frozen=True)
class Suite:
    """A loaded, validated suite file; expands to its cases per profile (``cases``)."""

    path: Path
    spec: SuiteSpec
    tuned: tuple[Any, ...] = ()  # suite.tuned.TunedConfig entries of the spec's `tuned:` file

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

    def cases(self, profile: str = "", slice: Optional[slice_fit.Slice] = None) -> list[Case]:
        """The profile's cases, fitted to ``slice`` when given (suite/slice_fit.py)."""
        return expand(self, profile, slice=slice)

    def with_user_impls(self, paths: Sequence[str]) -> "Suite":
        """The suite with import paths (``--impl package.module:fn``) added to every impl list of a backend
        that takes user impls, so they run beside the suite's own (checked for syntax only)."""
        for path in paths:
            problem = catalog.path_problem(path)
            if problem:
                raise SuiteError(f"--impl {path}: {problem}")
            if self.spec.workload not in catalog.USER_WORKLOADS:
                raise SuiteError(f"--impl {path}: workload {self.spec.workload!r} takes built-in impls only "
                                 f"(user impls: {', '.join(catalog.USER_WORKLOADS)})")

        def add(impls: Optional[Impls]) -> Optional[Impls]:
            if impls is None:
                return None
            if isinstance(impls, dict):
                return {b: v + [p for p in paths if p not in v] if b in catalog.USER_BACKENDS else v
                        for b, v in impls.items()}
            return impls + [p for p in paths if p not in impls]

        profiles = {n: p.model_copy(update={"impls": add(p.impls)}) for n, p in self.spec.profiles.items()}
        spec = self.spec.model_copy(update={"impls": add(self.spec.impls), "profiles": profiles})
        return Suite(self.path, spec, self.tuned)


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
            alike = set(slice_fit.LADDER_KEYS) if key in slice_fit.LADDER_KEYS else {key}
            matrix = {k: v for k, v in matrix.items() if not alike & set(matrix_keys(k))}
            params = {k: v for k, v in params.items() if k == key or k not in alike}
            params[key] = value
        for key, values in p.matrix.items():
            names = set(matrix_keys(key))
            if names & set(slice_fit.LADDER_KEYS):  # a batch ladder replaces the other kind of ladder
                names |= set(slice_fit.LADDER_KEYS)
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


def _case_loc(spec: SuiteSpec, profile: str, swept_keys: list[str], errors: list[Any],
              fields: list[str]) -> tuple[str, ...]:
    """Where an invalid case's bad value is set: the matrix key sweeping a parameter the error names, else
    the params entry (the profile's before the base's) that sets one; the matrix or params as a whole when
    the error names none. The parameters an error names: its location, and those its message mentions (a
    check across fields, "num_heads (4) must be divisible by num_kv_heads (3)", the last named first)."""
    named = [str(err["loc"][0]) for err in errors if err["loc"]]
    for err in errors:  # the last one a message names first: "A must be divisible by B" blames B
        found = [(m.start(), f) for f in fields for m in [re.search(rf"\b{f}\b", err["msg"])] if m]
        named += [f for _, f in sorted(found, reverse=True)]
    prof = spec.profiles[profile] if profile else None
    sections = [(("profiles", profile), prof)] if prof else []
    sections.append(((), spec))
    for field in named:
        for prefix, sec in sections:
            for key in sec.matrix:
                if field in matrix_keys(key) and key in swept_keys:
                    return (*prefix, "matrix", key)
    for prefix, sec in sections:
        for field in named:
            if field in sec.params:
                return (*prefix, "params", field)
    if swept_keys:
        return ("profiles", profile, "matrix") if prof and prof.matrix else ("matrix",)
    return ("profiles", profile, "params") if prof and prof.params else ("params",)


def _check_on_a_backend(suite: Suite, profile: str, names: Sequence[str], backends: Sequence[str], root: Any) -> None:
    """Each built-in impl of a list shared by the backends exists on at least one of them (else every row of
    it would be a skipped row: ``impls: [sdpa]`` with ``backends: [jax]``)."""
    workload = suite.spec.workload
    for i, name in enumerate(names):
        if catalog.is_user(name) or any(name in catalog.names_for(workload, b) for b in backends):
            continue
        has = [b for b in catalog.BACKENDS if name in catalog.names_for(workload, b)]
        prof = profile and suite.spec.profiles[profile]
        loc = ("profiles", profile, "impls", i) if prof and prof.impls is not None else ("impls", i)
        where = _where(suite.path, root, loc) if root is not None else str(suite.path)
        raise SuiteError(f"{where}: impl {name!r} is a {', '.join(has)} impl, and the suite's backends are "
                         f"{', '.join(backends)}; add its backend to backends or list impls per backend")


def _fit_train(suite: Suite, profile: str, params: dict, matrix: dict, impls_of: dict[str, list[str]],
               slice: Optional[slice_fit.Slice], root: Any) -> tuple[dict, str, bool]:
    """A train study fitted to ``slice`` (suite/slice_fit.py): (params, the cases' note, unroll_best)."""
    params = dict(params)
    if slice is not None and not slice_fit.devices_pinned(params, matrix):
        params["devices"] = slice.devices
    unroll = False
    if params.get("scan_layers") is None and not any("scan_layers" in matrix_keys(k) for k in matrix) \
            and slice_fit.is_ladder(matrix):
        params["scan_layers"], unroll = True, True
    models = params.get("model")
    if not isinstance(models, list):
        return params, "", unroll
    loc = ("profiles", profile, "params", "model") if profile and "model" in suite.spec.profiles[profile].params \
        else ("params", "model")
    where = _where(suite.path, root, loc) if root is not None else f"{suite.path}: {'.'.join(loc)}"
    if not models or not all(isinstance(m, str) for m in models):
        raise SuiteError(f"{where}: a list of model presets to fit, largest first, got {models!r}")
    for m in models:
        try:
            presets.preset(m)
        except ValueError as e:
            raise SuiteError(f"{where}: {e}") from None
    if slice is None or slice.fit is None:
        params["model"] = slice_fit.by_size(models)[0]
        return params, f"model {params['model']}: the largest of {', '.join(models)} (planned without a fit)", unroll
    at, text = slice_fit.fit_batch(params, matrix)
    first = {k: v[0] for k, v in matrix.items() if len(matrix_keys(k)) == 1}
    probe = {**params, **first, **at}
    backend = "jax" if "jax" in impls_of else next(iter(impls_of))
    impls = [i for i in impls_of[backend] if not catalog.is_user(i)]
    probes = slice.fit([{**probe, "model": m} for m in slice_fit.by_size(models)], impls)
    params["model"], note = slice_fit.choose_model(models, probes, text)
    return params, note, unroll


def _one_program_each(cases: list[Case]) -> list[Case]:
    """Train cases that are one program on this slice (slice_fit.program_key) run once: the first listed,
    its note naming the others."""
    kept: dict[Any, int] = {}
    dropped: dict[int, list[str]] = {}
    for i, c in enumerate(cases):
        key = (c.backend, c.impl, slice_fit.program_key(c.params, MODE_AXES))
        if key in kept:
            dropped.setdefault(kept[key], []).append(str(c.params.get("sharding")))
        else:
            kept[key] = i
    out = []
    for i in sorted(kept.values()):
        c = cases[i]
        if i in dropped:
            same = slice_fit.same_program_note(str(c.params.get("sharding")), dropped[i], c.devices,
                                               str(c.params.get("mesh")))
            c = dataclasses.replace(c, note="; ".join(filter(None, [c.note, same])))
        out.append(dataclasses.replace(c, index=len(out)))
    return out


def expand(suite: Suite, profile: str = "", root: Any = None, slice: Optional[slice_fit.Slice] = None) -> list[Case]:
    """The cartesian product of the matrix, for every backend and impl, validated case by case; a train
    study fitted to ``slice`` (suite/slice_fit.py), its duplicate programs run once."""
    spec = suite.spec
    backends, impl_names, params, matrix, measure, peak = _apply_profile(spec, profile)
    impls_of: dict[str, list[str]] = {}
    for backend in backends:
        if isinstance(impl_names, dict) and backend not in impl_names:
            loc = ("profiles", profile, "impls") if profile and spec.profiles[profile].impls is not None else ("impls",)
            raise SuiteError(f"{_where(suite.path, root, loc) if root is not None else suite.path}: no impl list for "
                             f"backend {backend!r} (backends: {', '.join(backends)}); add '{backend}: [...]'")
        impls_of[backend] = impl_names[backend] if isinstance(impl_names, dict) else list(impl_names)
    if not isinstance(impl_names, dict):
        _check_on_a_backend(suite, profile, impl_names, backends, root)
    _check_count(suite, profile, matrix, sum(len(v) for v in impls_of.values()), root)
    note, unroll = "", False
    if WORKLOADS[spec.workload].fits_slice:
        params, note, unroll = _fit_train(suite, profile, params, matrix, impls_of, slice, root)
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
            loc = _case_loc(spec, profile, keys, e.errors(), list(model.model_fields))
            raise SuiteError(f"{_where(suite.path, root, loc) if root is not None else suite.path}: "
                             f"invalid case in {prof} ({shown or 'fixed params'}): {msgs}") from None
        resolved_params = resolved.model_dump()
        for backend in backends:
            for impl in impls_of[backend]:
                case_params = _untaken_blocks_cleared(spec.workload, backend, impl,
                                                      tuned.apply(suite.tuned, spec.workload, backend, impl, resolved_params))
                cid = results.case_id(spec.workload, backend, impl, case_params)
                if cid in seen:
                    continue
                seen.add(cid)
                cases.append(Case(len(cases), spec.name, profile, spec.workload, backend, impl,
                                  case_params, measure, peak, cid, note, unroll))
    return _one_program_each(cases) if WORKLOADS[spec.workload].sharded else cases


def _untaken_blocks_cleared(workload: str, backend: str, impl: str, params: dict[str, Any]) -> dict[str, Any]:
    """A built-in attention impl's case without the block sizes it does not take (its worker clears them:
    attention_rules.for_impl): naive runs once per shape of a block_q x block_k sweep, not once per block
    (issue 50 item 11); a workload whose record does not drop them keeps them. A user impl declares its
    blocks in its own code, which only its worker imports."""
    if not WORKLOADS[workload].drops_untaken_blocks or catalog.is_user(impl):
        return params
    taken = attention_rules.rule(backend, impl).get("block_params", ())
    return {k: None if k in BLOCK_PARAMS and k not in taken else v for k, v in params.items()}


def same_text(have: Any, want: str) -> bool:
    """A case's parameter equals the text a user typed (512 == '512', True == 'true', None == 'null')."""
    if isinstance(have, bool) or have is None:
        return str(have).lower() == want.lower() or (have is None and want.lower() in ("none", "null", "~"))
    if isinstance(have, (int, float)):
        try:
            return float(want) == float(have)
        except ValueError:
            return False
    return str(have) == want
