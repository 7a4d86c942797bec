"""A worker's reply, typed: one JSON object per line on the worker's protocol pipe (worker/main.py writes
them, run/workers.py reads them), and the environment a worker's probe reports.

A reply holds one of: ``fatal`` (the worker cannot go on: the parent kills it), ``env`` (ops probe and
target), ``status`` with ``result`` or ``error`` (ops run and compile), ``fit`` or ``error`` (op fit)."""

from __future__ import annotations

import dataclasses
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from xlabench.protocol.worker_messages import ProtocolError


@dataclass(frozen=True)
class Reply:
    fatal: Optional[str] = None
    env: Optional[dict[str, Any]] = None
    status: Optional[str] = None  # a row's status (protocol.status): ok, compiled, oom, lowered, skipped, failed
    result: Optional[dict[str, Any]] = None  # the CaseResult / CompileResult message of a case that ended with one
    error: Optional[str] = None
    fit: Optional[list[dict[str, Any]]] = None  # op fit: the memory probes (suite/slice_fit.Probe's fields)

    def to_message(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_message(cls, msg: Any) -> "Reply":
        """The reply in ``msg``; ProtocolError when it is not a reply (a worker of another xlabench)."""
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(msg, dict) or not set(msg) <= names:
            unknown = sorted(set(msg) - names) if isinstance(msg, dict) else type(msg).__name__
            raise ProtocolError(f"not a worker reply ({unknown})")
        return cls(**msg)


@dataclass
class WorkerEnv(MutableMapping):
    """What a worker's probe found: typed where the parent decides by it (platform, device kind and count,
    processes); every key as the worker sent it (versions, the CPU's measured peaks, a backend's own) for
    the run's meta and rows. A mapping, so the meta writes it whole."""

    fields: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_message(cls, msg: Any) -> "WorkerEnv":
        if not isinstance(msg, dict) or not isinstance(msg.get("platform"), str):
            raise ProtocolError(f"a probe's env names no platform: {str(msg)[:200]}")
        return cls(dict(msg))

    def to_message(self) -> dict[str, Any]:
        return dict(self.fields)

    @property
    def platform(self) -> str:
        return str(self.fields.get("platform", "cpu"))

    @property
    def device_kind(self) -> str:
        return str(self.fields.get("device_kind", ""))

    @property
    def device_count(self) -> int:
        return int(self.fields.get("device_count") or 1)

    @property
    def process_count(self) -> int:
        return int(self.fields.get("process_count") or 1)

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.fields[key] = value

    def __delitem__(self, key: str) -> None:
        del self.fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)
