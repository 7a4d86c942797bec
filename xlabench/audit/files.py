"""The audit of run files (`xlabench audit FILE|DIR...`): every row of every run file against the row rules
(invariants.ROW_RULES), a tuned row's default_s against an untuned row of the same case in the files audited,
and the listed exceptions (exceptions.py). Reads any run file, old schema too; the host facts (the CPU's
last-level cache) come from each run's meta.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from xlabench import results
from xlabench.audit import exceptions as excepted
from xlabench.audit.invariants import (
    DEFAULT_S, EXPLAIN_ROOF, ROW_RULES, Host, cache_resident, check_row, default_s, explain_roof, num, wrong_result,
)
from xlabench.protocol.status import OK


class AuditInputError(Exception):
    """A path that is not an auditable run file (one line naming it and what is wrong; exit 2)."""


@dataclass(frozen=True)
class Finding:
    path: Path
    case_id: str
    case: str  # the case in words: backend/impl and its main parameters
    rule: str
    reason: str
    exception: Optional[str] = None  # the listed exception's reason, when the finding is a known one


@dataclass
class Audit:
    files: list[Path] = field(default_factory=list)
    rows: int = 0  # ok rows checked
    findings: list[Finding] = field(default_factory=list)
    cache_resident: int = 0  # CPU rows whose bytes fit in the host's last-level cache
    wrong: int = 0  # ok rows with a wrong result: their figures are not the work's, so not audited
    unused: list[str] = field(default_factory=list)  # listed exceptions that matched no finding

    @property
    def broken(self) -> list[Finding]:
        return [f for f in self.findings if f.exception is None]


_LABEL_KEYS = ("seq_len", "batch", "causal", "mode", "context_lens", "page_size", "model", "global_batch", "sharding")


def case_label(row: dict[str, Any]) -> str:
    parts = [f"{row.get('backend')}/{row.get('impl')}"]
    for k in _LABEL_KEYS:
        v = row.get(k)
        if v is None or (isinstance(v, float) and v != v) or v == "":
            continue
        parts.append(f"{k}={int(v) if isinstance(v, float) and v.is_integer() else v}")
    return " ".join(parts)


def run_files(paths: Iterable[str | Path]) -> list[Path]:
    """The run files a list of files and folders names (a folder: every results CSV under it, samples
    files aside), in order; AuditInputError for a path that does not exist or a folder without one."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise AuditInputError(f"{p}: no such file or folder")
        if p.is_dir():
            found = sorted(f for f in p.rglob("*.csv") if not f.name.endswith(results.SAMPLES_SUFFIX))
            if not found:
                raise AuditInputError(f"{p}: no run file (*.csv) under this folder")
            out += found
        else:
            out.append(p)
    return list(dict.fromkeys(out))


def read_run(path: Path) -> list[dict[str, Any]]:
    """A run file's rows as dicts (AuditInputError: not a run file, unreadable, not UTF-8)."""
    try:
        return results.read_rows(path).to_dict("records")
    except results.ResultsFileError as e:
        raise AuditInputError(str(e)) from None
    except UnicodeDecodeError:
        raise AuditInputError(f"{path}: not a UTF-8 text file, not an xlabench results CSV") from None
    except OSError as e:
        raise AuditInputError(f"{path}: cannot read: {e.strerror or e}") from None


def host_of(path: Path) -> Host:
    """The host facts a run recorded in its meta (env.llc_bytes); none when there is no readable meta."""
    env = results.read_meta(path).get("env") or {}
    llc = env.get("llc_bytes")
    return Host(llc_bytes=int(llc) if isinstance(llc, (int, float)) and llc > 0 else None)


EXPLAIN_SUFFIX = ".explain.json"  # `xlabench explain RUN.csv` writes RUN.explain.json beside it


def explained(path: Path) -> dict[str, Any]:
    """The run's explain breakdowns by case id (RUN.explain.json beside the CSV); empty when there is none.
    AuditInputError when the file is there but is not JSON of that form."""
    stem = path.name[: -len(".compile.csv")] + ".compile" if path.name.endswith(".compile.csv") else path.name[:-4]
    p = path.with_name(stem + EXPLAIN_SUFFIX)
    if not p.exists():
        return {}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise AuditInputError(f"{p}: not an explain JSON ({e})") from None
    if not isinstance(data, dict):
        raise AuditInputError(f"{p}: not an explain JSON (no case ids at its top)")
    return data


def _stored(row: dict[str, Any]) -> dict[str, str]:
    """The reasons the row's own `suspect` cell gives for rules the audit does not recompute (the tuner's)."""
    cell = row.get("suspect")
    if not isinstance(cell, str) or not cell.strip():
        return {}
    out = {}
    for part in cell.split("; "):
        rule, _, why = part.partition(": ")
        if rule and rule not in ROW_RULES and rule not in (DEFAULT_S, EXPLAIN_ROOF):
            out[rule] = why
    return out


def _untuned(runs: dict[Path, list[dict[str, Any]]]) -> dict[tuple[str, str], list[tuple[Path, dict[str, Any]]]]:
    """(case_id, device_kind) -> the ok rows run at the kernel's default blocks (tuned off), with their file."""
    out: dict[tuple[str, str], list[tuple[Path, dict[str, Any]]]] = {}
    for path, rows in runs.items():
        for r in rows:
            if str(r.get("tuned")) == "off" and str(r.get("status")) == OK:
                out.setdefault((str(r["case_id"]), str(r.get("device_kind"))), []).append((path, r))
    return out


def _nearest(path: Path, row: dict[str, Any], candidates: list[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """The untuned row to judge a default_s by: the same run's, else the one in the nearest folder."""
    same = [r for p, r in candidates if str(r.get("run_id")) == str(row.get("run_id"))]
    if same:
        return same[0]

    def shared(p: Path) -> int:
        return sum(1 for a, b in zip(path.resolve().parts, p.resolve().parts) if a == b)
    return max(candidates, key=lambda c: shared(c[0]))[1]


def audit(paths: Iterable[str | Path], exceptions_file: Optional[Path] = None) -> Audit:
    """Audit every run file ``paths`` name, against the exceptions listed beside them (each file's nearest
    audit-exceptions.yaml, in its folder or above) or in ``exceptions_file``."""
    files = run_files(paths)
    runs = {p: read_run(p) for p in files}
    untuned = _untuned(runs)
    lists = excepted.Lists(exceptions_file)
    try:
        for p in files:
            lists.entries(p)  # every list read (and checked) before any row
    except excepted.ExceptionsFileError as e:
        raise AuditInputError(str(e)) from None
    out = Audit(files=files)
    for path, rows in runs.items():
        host = host_of(path)
        breakdowns = explained(path)
        for row in rows:
            if str(row.get("status")) != OK:
                continue
            if wrong_result(row):
                out.wrong += 1
                continue
            out.rows += 1
            out.cache_resident += bool(cache_resident(row, host))
            broken = {**check_row(row, host), **_stored(row)}
            case = breakdowns.get(str(row.get("case_id")))
            if isinstance(case, dict) and (why := explain_roof(row, case, host)):
                broken[EXPLAIN_ROOF] = why
            same = untuned.get((str(row.get("case_id")), str(row.get("device_kind"))))
            if same and num(row, "default_s"):
                if why := default_s(row, _nearest(path, row, same)):
                    broken[DEFAULT_S] = why
            for rule, why in broken.items():
                out.findings.append(Finding(path, str(row.get("case_id")), case_label(row), rule, why,
                                            lists.reason(path, row, rule)))
    out.unused = lists.unused()
    return out
