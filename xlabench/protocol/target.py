"""The slice a compile-only case is compiled for, as the parent sends it to the worker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TargetSpec:
    """``xlabench compile --target``: xlabench/hardware.py's Target (name, platform, topology and the
    options ``get_topology_desc`` takes) plus the slice count."""

    name: str
    platform: str  # tpu | gpu
    topology: str
    options: tuple[tuple[str, Any], ...] = ()
    slices: int = 1

    def to_message(self) -> dict[str, Any]:
        return {"name": self.name, "platform": self.platform, "topology": self.topology,
                "options": [list(kv) for kv in self.options], "slices": self.slices}

    @classmethod
    def from_message(cls, msg: dict[str, Any]) -> "TargetSpec":
        opts = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in msg.get("options", []))
        return cls(msg["name"], msg["platform"], msg["topology"], opts, int(msg.get("slices", 1)))
