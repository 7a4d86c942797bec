"""Known exceptions: rows of committed run files that break a rule for a known reason (a wrong figure
measured and kept as evidence). Committed run files are not edited; one file beside them lists them:

    # audit-exceptions.yaml (found in the audited file's folder or any folder above it)
    exceptions:
      - file: tpu-v5e/2026-12-06-c/attention-s4096/attention/*.csv   # a glob, relative to this file's folder
        select: {impl: splash, causal: false, mode: fwd}             # or case_id: dfbf0eb15fc8
        rule: tune_best
        reason: the search timed the 128x128 candidate under a name it shared (issue 40)

Every entry needs file, rule, reason and one of case_id / select (case columns and their values)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from xlabench.audit.shape import same_value

NAME = "audit-exceptions.yaml"
_KEYS = {"file", "case_id", "select", "rule", "reason"}


class ExceptionsFileError(ValueError):
    """An exceptions file that cannot be read or has a malformed entry (one line naming it)."""


@dataclass(frozen=True)
class Entry:
    source: Path
    index: int  # 1-based, in the file
    file: str
    rule: str
    reason: str
    case_id: Optional[str] = None
    select: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, path: Path, row: Mapping[str, Any], rule: str) -> bool:
        if rule != self.rule:
            return False
        try:
            rel = path.resolve().relative_to(self.source.parent.resolve()).as_posix()
        except ValueError:
            return False
        if not fnmatch.fnmatchcase(rel, self.file):
            return False
        if self.case_id is not None and str(row.get("case_id")) != self.case_id:
            return False
        return all(same_value(row.get(k), v) for k, v in self.select.items())

    def __str__(self) -> str:
        which = f"case_id {self.case_id}" if self.case_id else " ".join(f"{k}={v}" for k, v in self.select.items())
        return f"{self.source}: entry {self.index} ({self.file}, {which}, rule {self.rule})"


def load(path: Path) -> list[Entry]:
    """The entries of one exceptions file (ExceptionsFileError naming the file, and the entry, when bad)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ExceptionsFileError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ExceptionsFileError(f"{path}: not a UTF-8 text file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ExceptionsFileError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', None) or e}") from None
    items = (data or {}).get("exceptions") if isinstance(data, dict) or data is None else None
    if not isinstance(items, list):
        raise ExceptionsFileError(f"{path}: expected a mapping with an 'exceptions' list")
    out = []
    for i, item in enumerate(items, 1):
        where = f"{path}: exceptions entry {i}"
        if not isinstance(item, dict):
            raise ExceptionsFileError(f"{where}: expected a mapping with file, rule, reason and case_id or select")
        unknown = set(item) - _KEYS
        missing = [k for k in ("file", "rule", "reason") if not str(item.get(k) or "").strip()]
        if unknown or missing:
            what = f"unknown key(s) {', '.join(sorted(unknown))}" if unknown else f"no {', '.join(missing)}"
            raise ExceptionsFileError(f"{where}: {what} (keys: {', '.join(sorted(_KEYS))})")
        select = item.get("select") or {}
        if not isinstance(select, dict) or (not select and not item.get("case_id")):
            raise ExceptionsFileError(f"{where}: needs case_id or select (a mapping of case columns to values)")
        out.append(Entry(Path(path), i, str(item["file"]), str(item["rule"]), str(item["reason"]),
                         str(item["case_id"]) if item.get("case_id") else None, select))
    return out


class Lists:
    """The exceptions that apply to each audited file: ``explicit`` when given, else the nearest NAME in
    the file's folder or a folder above it. Remembers which entries matched (``unused``)."""

    def __init__(self, explicit: Optional[Path] = None):
        self.explicit = explicit
        self._loaded: dict[Path, list[Entry]] = {}
        self._used: set[tuple[Path, int]] = set()

    def _file_for(self, path: Path) -> Optional[Path]:
        if self.explicit is not None:
            return Path(self.explicit)
        return next((d / NAME for d in Path(path).resolve().parents if (d / NAME).is_file()), None)

    def entries(self, path: Path) -> list[Entry]:
        source = self._file_for(path)
        if source is None:
            return []
        if source not in self._loaded:
            self._loaded[source] = load(source)
        return self._loaded[source]

    def reason(self, path: Path, row: Mapping[str, Any], rule: str) -> Optional[str]:
        for e in self.entries(path):
            if e.matches(path, row, rule):
                self._used.add((e.source, e.index))
                return e.reason
        return None

    def unused(self) -> list[str]:
        return [str(e) for entries in self._loaded.values() for e in entries if (e.source, e.index) not in self._used]
