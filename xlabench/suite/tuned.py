"""Tuned kernel configurations: the YAML `xlabench best` writes and a suite's ``tuned:`` key applies.

A file holds, per workload, backend, impl and shape (every other case parameter), the fastest correct
values of the workload's tuned parameters (workloads.TUNED_PARAMS). A suite case that matches an
entry and leaves those parameters unset takes them, so a sweep done once serves later suites.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import yaml

from xlabench.workloads import PARAMS as WORKLOAD_PARAMS
from xlabench.workloads import TUNED_PARAMS

HEADER = ("# Fastest correct kernel configuration per impl and shape, written by `xlabench best`.\n"
          "# A suite with `tuned: <this file>` gives a case of the same workload, backend, impl and shape\n"
          "# whose tuned parameters are unset these values.\n")


class TunedFileError(ValueError):
    """A tuned file that cannot be used; the message names the file and the entry."""


def value(v: Any) -> Any:
    """A case parameter as one comparable, YAML-friendly value: CSV text ('4', '4.0', 'true') and native
    values alike (4, 4.0, True) become int / float / bool / str; empty cells become None."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return int(v) if float(v).is_integer() else float(v)
    text = str(v).strip()
    if text == "":
        return None
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        f = float(text)
    except ValueError:
        return text
    return int(f) if f.is_integer() else f


@dataclass(frozen=True)
class TunedConfig:
    workload: str
    backend: str
    impl: str
    shape: Mapping[str, Any]  # every case parameter but the tuned ones (None ones left out)
    params: Mapping[str, Any]  # the tuned parameters' best values
    median_s: Optional[float] = None
    speedup_vs_default: Optional[float] = None

    def matches(self, workload: str, backend: str, impl: str, case_params: Mapping[str, Any]) -> bool:
        """Same workload, backend, impl and shape, and the case leaves every tuned parameter unset."""
        if (workload, backend, impl) != (self.workload, self.backend, self.impl):
            return False
        if any(case_params.get(k) is not None for k in self.params):
            return False
        return all(value(case_params.get(k)) == v for k, v in self.shape.items())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": self.backend, "impl": self.impl, "shape": dict(self.shape),
                               "params": dict(self.params)}
        if self.median_s is not None:
            out["median_s"] = float(self.median_s)
        if self.speedup_vs_default is not None:
            out["speedup_vs_default"] = round(float(self.speedup_vs_default), 4)
        return out


def dump(configs: Sequence[TunedConfig]) -> str:
    """The YAML text of a tuned file (one workload per file)."""
    workloads = sorted({c.workload for c in configs})
    if len(workloads) != 1:
        raise ValueError(f"a tuned file holds one workload, got {workloads}")
    body = {"workload": workloads[0], "tuned": list(TUNED_PARAMS[workloads[0]]),
            "configs": [c.to_dict() for c in configs]}
    return HEADER + yaml.safe_dump(body, sort_keys=False)


def load(path: Path, workload: str) -> tuple[TunedConfig, ...]:
    """A tuned file for a suite of ``workload``; TunedFileError names what is wrong."""
    if not path.exists():
        raise TunedFileError(f"{path}: no such file (write one with `xlabench best RUN.csv -o {path.name}`)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise TunedFileError(f"{path}: not a YAML file: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("configs"), list):
        raise TunedFileError(f"{path}: expected a mapping with workload, tuned and configs (from `xlabench best`)")
    if data.get("workload") != workload:
        raise TunedFileError(f"{path}: tuned for workload {data.get('workload')!r}, the suite's is {workload!r}")
    tuned = set(TUNED_PARAMS.get(workload, ()))
    fields = set(WORKLOAD_PARAMS[workload].model_fields)
    out = []
    for i, entry in enumerate(data["configs"]):
        where = f"{path}: configs[{i}]"
        if not isinstance(entry, dict) or not {"backend", "impl", "shape", "params"} <= set(entry):
            raise TunedFileError(f"{where}: expected backend, impl, shape and params")
        params, shape = entry["params"], entry["shape"]
        if not isinstance(params, dict) or not isinstance(shape, dict):
            raise TunedFileError(f"{where}: shape and params must be mappings")
        if not set(params) <= tuned or not params:
            raise TunedFileError(f"{where}: params {sorted(params)}: only {sorted(tuned)} are tuned for {workload}")
        unknown = set(shape) - fields
        if unknown:
            raise TunedFileError(f"{where}: shape has unknown {workload} parameter(s) {sorted(unknown)}")
        out.append(TunedConfig(workload, str(entry["backend"]), str(entry["impl"]),
                               {k: value(v) for k, v in shape.items()}, {k: value(v) for k, v in params.items()},
                               entry.get("median_s"), entry.get("speedup_vs_default")))
    return tuple(out)


def apply(configs: Sequence[TunedConfig], workload: str, backend: str, impl: str,
          case_params: Mapping[str, Any]) -> dict[str, Any]:
    """The case's parameters with the first matching entry's tuned values (unchanged if none matches)."""
    for c in configs:
        if c.matches(workload, backend, impl, case_params):
            return {**case_params, **c.params}
    return dict(case_params)
