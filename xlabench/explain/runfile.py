"""`xlabench explain RUN.csv`: each chosen row of a run with what explains it (its kept trace and HLO
text, under the meta JSON's ``trace_root``), the breakdowns, and the run's files updated (``explain_*``
columns, a JSON beside the run).

Framework-free: reading a trace's planes is the caller's (``load_planes``: backends/jax/trace_timer.py),
so that a test can hand over fake planes.
"""

from __future__ import annotations

import contextlib
import json
import math
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from xlabench.cells import number
from xlabench import hardware
from xlabench import results
from xlabench.explain import breakdown as bd
from xlabench.explain import trace as trace_lib
from xlabench.explain.kept import HLO_SUFFIX, archive, explain_dir, trace_root
from xlabench.suite.expand import same_text as _same
from xlabench.units import GIGA, TERA
from xlabench.workloads import WORKLOADS

JSON_SUFFIX = ".explain.json"
EXPLAINED = ("ok", "compiled")  # the statuses a row has something to explain in


class ExplainError(ValueError):
    """Bad input: the message is one line naming the file, row or key, and what was expected (exit 2)."""


@dataclass
class Explained:
    csv: Path
    breakdowns: list[bd.Breakdown]
    rows: dict[str, dict[str, Any]]  # case_id -> its row (the table's header line)
    not_explained: list[str] = field(default_factory=list)  # one line per chosen row left out, saying why

    def labels(self) -> dict[str, str]:
        """case_id -> the row named by what tells it apart from the other rows explained (results.case_labels)."""
        return dict(zip(self.rows, results.case_labels(self.rows.values())))


def _value(row: Mapping[str, Any], key: str) -> Any:
    v = row.get(key)
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def _number(row: Mapping[str, Any], key: str) -> float | None:
    return number(row.get(key))


def read_run(csv: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows (as dicts) and the meta JSON of a run or compile CSV; ExplainError when it is not one."""
    try:
        df = results.read_rows(csv)
    except results.ResultsFileError as e:
        raise ExplainError(str(e)) from None
    try:
        meta = results.read_meta(csv)
    except results.ResultsFileError as e:
        raise ExplainError(str(e)) from None
    return df.to_dict("records"), meta


def choose(rows: list[dict[str, Any]], pairs: Iterable[tuple[str, str]], csv: Path) -> list[dict[str, Any]]:
    """The rows ``-k KEY=VALUE`` (``pairs``) leave (the same key again widens, another key narrows)."""
    pairs = tuple(pairs)
    by_key: dict[str, list[str]] = {}
    for k, v in pairs:
        if rows and k not in rows[0]:
            raise ExplainError(f"-k {k}={v}: {csv} has no column {k!r}")
        by_key.setdefault(k, []).append(v)
    chosen = [r for r in rows if all(any(_same(_value(r, k), v) for v in vs) for k, vs in by_key.items())]
    if not chosen:
        raise ExplainError(f"{csv}: no row matches {' '.join(f'-k {k}={v}' for k, v in pairs)}")
    return chosen


def roofs(row: Mapping[str, Any]) -> bd.Roofs:
    """The row's per-device peaks (its own columns, else the peak table by device kind)."""
    tflops, gbps = _number(row, "peak_tflops"), _number(row, "peak_gbytes_per_s")
    if tflops is None or gbps is None:
        peak = hardware.device_peak(str(_value(row, "platform") or ""), str(_value(row, "device_kind") or ""))
        tflops, gbps = tflops or peak.tflops, gbps or peak.gbytes_per_s
    ici = _number(row, "ici_gbytes_per_s")
    return bd.Roofs(tflops * TERA if tflops else None, gbps * GIGA if gbps else None, ici * GIGA if ici else None)


def attention_flops(row: Mapping[str, Any]) -> float | None:
    """The analytic FLOPs of the row's attention per device per step, where its workload's record says
    (workloads/record.py attention_flops): a train step's attention share of its model FLOPs (flops.py's
    convention), an attention row's kernel FLOPs; None for other workloads."""
    w = WORKLOADS.get(str(_value(row, "workload")))
    source = w.attention_flops if w is not None else ""
    devices = max(int(_number(row, "devices") or 1), 1)
    if source == "kernel_flops":
        return _number(row, "kernel_flops")
    if source != "params":
        return None
    params = {k: _value(row, k) for k in w.params.model_fields if _value(row, k) is not None}
    params = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in params.items()}
    try:
        p = w.params(**params)
    except Exception:
        return None
    return p.attention_flops() / devices


def case_files(meta: Mapping[str, Any], case_id: str, csv: Path) -> tuple[list[Path], Path | None]:
    """(the HLO texts, the trace or None) kept for a case: its folder under the run's trace root (kept.py;
    the first repeat's, when several ran). One HLO text per program the step ran: one for a JAX step, its
    compiled graphs' for a torch_tpu step."""
    root = trace_root(meta, csv)
    hint = ("`xlabench compile --explain`" if csv.name.endswith(results.COMPILE_SUFFIX)
            else "`xlabench run --explain` (or --trace DIR)")
    if root is None:
        raise ExplainError(f"{csv}: kept no trace or HLO text (its meta JSON has no trace_root): run it with {hint}")
    folder = root / case_id
    hlos = sorted(folder.rglob("*" + HLO_SUFFIX)) if folder.is_dir() else []
    if not hlos:
        raise ExplainError(f"{csv}: case {case_id} has no HLO text under {folder}: run it with {hint}")
    first = [h for h in hlos if h.parent == hlos[0].parent]
    traces = sorted(hlos[0].parent.rglob("*.xplane.pb"))
    return first, (traces[-1] if traces else None)


def _extract(tar: tarfile.TarFile, dest: Path) -> None:
    """Every member of ``tar`` under ``dest``, none outside it (tarfile's data filter where this Python has
    it; before 3.10.12, plain files and folders with relative paths only)."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    for m in tar.getmembers():
        if m.name.startswith("/") or ".." in Path(m.name).parts or not (m.isfile() or m.isdir()):
            raise tarfile.TarError(f"member {m.name!r} is not a file or folder inside the archive")
    tar.extractall(dest)


@contextlib.contextmanager
def unpacked(meta: Mapping[str, Any], csv: Path) -> Iterator[Mapping[str, Any]]:
    """The meta to find the run's kept files by: as it is where they lie in a folder (trace_root); else,
    where they lie packed beside the CSV (kept.archive: a committed run), that archive unpacked into a
    temporary folder for the while, named as the meta's trace_root."""
    root = trace_root(meta, csv)
    packed = archive(csv)
    if (root is not None and root.is_dir()) or not packed.is_file():
        yield meta
        return
    with tempfile.TemporaryDirectory(prefix="xlabench-explain-") as tmp:
        try:
            with tarfile.open(packed, "r:*") as tar:
                _extract(tar, Path(tmp))
        except (tarfile.TarError, OSError, EOFError) as e:
            raise ExplainError(f"{packed}: not a readable archive of the run's kept files ({e})") from None
        folder = Path(tmp) / explain_dir(csv).name
        if not folder.is_dir():
            raise ExplainError(f"{packed}: holds no {folder.name}/ folder (the run's kept files)")
        yield {**meta, "trace_root": str(folder)}


def why_not(row: Mapping[str, Any]) -> str | None:
    """Why a row has nothing to explain (None: it has)."""
    status = _value(row, "status")
    if status not in EXPLAINED:
        return f"status {status}" + (f" ({str(_value(row, 'error'))[:80]})" if _value(row, "error") else "")
    if _value(row, "backend") not in (None, "jax", "torch_tpu"):
        return f"backend {_value(row, 'backend')}: only JAX and torch_tpu rows keep their trace and HLO text"
    return None


def explain_row(row: Mapping[str, Any], meta: Mapping[str, Any], csv: Path,
                load_planes: Callable[[Path], list[Any]]) -> bd.Breakdown:
    case_id = str(row["case_id"])
    hlo_paths, trace_path = case_files(meta, case_id, csv)
    hlo: str | dict[str, str] = hlo_paths[0].read_text()
    devices = max(int(_number(row, "devices") or 1), 1)
    if _value(row, "status") == "compiled":
        return bd.estimated(case_id, hlo, roofs(row), attention_flops(row), devices)
    if trace_path is None:
        raise ExplainError(f"{csv}: case {case_id} kept its HLO text but no trace (.xplane.pb) under "
                           f"{hlo_paths[0].parent}")
    info = None
    try:
        if len(hlo_paths) == 1:
            times = trace_lib.op_times(load_planes(trace_path), hlo_paths[0].name[: -len(HLO_SUFFIX)])
        else:  # a step of several programs (torch_tpu): each execution matched to its program's HLO text
            hlo = {p.name[: -len(HLO_SUFFIX)]: p.read_text() for p in hlo_paths}
            info = bd.program_info(hlo, devices)  # keyed label/op: each program's op names, and the categories
            programs: dict[str, set[str]] = {label: set() for label in hlo}
            for key in info:
                label, name = key.split("/", 1)
                programs[label].add(name)
            times = trace_lib.program_times(load_planes(trace_path), programs)
    except trace_lib.TraceError as e:
        raise ExplainError(f"{trace_path}: {e}") from None
    wall = _number(row, "wall_median_s") or (_number(row, "median_s") if _value(row, "clock") == "wall" else None)
    return bd.measured(case_id, times, hlo, roofs(row), wall, attention_flops(row),
                       bool(_value(row, "interpret")), devices, str(_value(row, "platform") or ""), info)


def explain_run(csv: Path, where: Iterable[tuple[str, str]], load_planes: Callable[[Path], list[Any]]) -> Explained:
    """Every chosen row of the run that has something to explain, explained; ExplainError when none has."""
    rows, meta = read_run(csv)
    if not rows:
        raise ExplainError(f"{csv}: no rows")
    chosen = choose(rows, where, csv)
    out = Explained(csv, [], {})
    todo = []
    for row in chosen:
        reason = why_not(row)
        if reason:
            out.not_explained.append(f"case {row['case_id']} ({row.get('impl')}): nothing to explain: {reason}")
        else:
            todo.append(row)
    with unpacked(meta, csv) as kept:
        for row in todo:
            out.breakdowns.append(explain_row(row, kept, csv, load_planes))
            out.rows[str(row["case_id"])] = row
    if not out.breakdowns:
        raise ExplainError(f"{csv}: no row to explain: {out.not_explained[0]}" if len(out.not_explained) == 1 else
                           f"{csv}: no row to explain ({len(out.not_explained)} rows: "
                           f"{'; '.join(sorted({r.split(': ', 2)[-1] for r in out.not_explained}))})")
    return out


def columns(b: bd.Breakdown) -> dict[str, Any]:
    """The row's ``explain_*`` columns (results/schema.py EXPLAIN_COLUMNS)."""
    out: dict[str, Any] = {"explain_source": "estimate" if b.estimate else "trace", "explain_step_s": b.step_s,
                           "explain_idle_s": b.idle_s}
    out.update({f"explain_{k}_s": s for k, s in b.seconds().items()})
    return out


def write(done: Explained) -> Path:
    """The explain_* columns into the run's CSV and the breakdowns as ``<run>.explain.json`` beside it; the
    JSON's path."""
    results.update_rows(done.csv, {b.case_id: columns(b) for b in done.breakdowns})
    stem = done.csv.name[: -len(".csv")]
    path = done.csv.with_name(stem + JSON_SUFFIX)
    prior = json.loads(path.read_text()) if path.exists() else {}
    prior.update({b.case_id: bd.to_json(b) for b in done.breakdowns})
    path.write_text(json.dumps(prior, indent=1, sort_keys=True))
    return path

