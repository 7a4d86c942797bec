"""Error messages that point into the YAML: the key path of a problem, with its line where the YAML has it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from xlabench.suite.spec import Measure, MeasureOverride, Profile, SuiteSpec

import yaml



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
