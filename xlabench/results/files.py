"""A run's files: one row per case appended and flushed as it ends, every timed sample beside it, the run's metadata; reading them back whole or refusing them."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile

from pathlib import Path
from typing import Any, Iterable, Mapping

try:
    import fcntl
except ImportError:  # not POSIX: no lock (a concurrent resume is then the user's to avoid)
    fcntl = None  # type: ignore[assignment]

from xlabench.results.schema import (
    COLUMN_NAMES, COMPILE_STATUSES, DTYPE_OF, SAMPLE_COLUMNS, SCHEMA_VERSION, STATUSES, TUNED_PREFIX, UNIT_OF,
)
from xlabench.workloads import TUNED_PARAMS

# Version 1 files (before the device clock became the headline) read as rows timed on the wall clock;
# version 2 files wrote the tuner's blocks over the case's own (read as version 3: tuned_* columns).
READABLE_VERSIONS = (1, 2, SCHEMA_VERSION)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return repr(value)
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)
    return str(value)


def samples_note(path: Path) -> str:
    """Why a ``.samples.csv`` given as a run is passed over (a glob of a results folder picks them up)."""
    return f"skipped {path}: a samples file (read with its run {Path(path).name[:-len(SAMPLES_SUFFIX)]}.csv)"


def passed_over(path: Path, compiles: bool = True) -> str | None:
    """Why a file that a glob of a results folder picks up beside a run's CSV is not read as a run (a note
    for the user), or None for a file to read: a samples file, a run's meta or log, and (``compiles``
    False: a command of timed runs) a `xlabench compile` file."""
    name = Path(path).name
    if name.endswith(SAMPLES_SUFFIX):
        return samples_note(Path(path))
    if name.endswith((".meta.json", ".log")):
        return f"skipped {path}: a run's {'meta' if name.endswith('.json') else 'log'} file (read with its CSV)"
    if name.endswith(COMPILE_SUFFIX) and not compiles:
        return f"skipped {path}: `xlabench compile` rows, not a timed run"
    return None


class OutputPathError(ValueError):
    """An output folder that cannot be made: a file in its way, no permission (one line for the user)."""


def make_dir(folder: Path, option: str, holds: str) -> Path:
    """Create ``folder`` (and its parents) for the output an ``option`` names, or raise OutputPathError with
    one line: the option, the file in the way or the OS's reason, and what goes there (``holds``)."""
    folder = Path(folder)
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise OutputPathError(f"{option}: {existing} is not a folder ({holds})")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputPathError(f"{option}: cannot create {folder}: {e.strerror} ({holds})") from None
    try:  # a folder that exists but takes no file (permissions, a read-only file system): found now
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise OutputPathError(f"{option}: cannot write in {folder}: {e.strerror} ({holds})") from None
    return folder


SAMPLES_SUFFIX = ".samples.csv"  # every iteration's seconds, beside each run's CSV
COMPILE_SUFFIX = ".compile.csv"  # `xlabench compile`'s rows, beside the runs of the same suite


class RunFiles:
    """Paths of one run's files."""

    def __init__(self, csv_path: Path):
        self.csv = Path(csv_path)
        stem = self.csv.name[: -len(".csv")] if self.csv.name.endswith(".csv") else self.csv.name
        self.samples = self.csv.with_name(stem + SAMPLES_SUFFIX)
        self.meta = self.csv.with_name(stem + ".meta.json")
        self.log = self.csv.with_name(stem + ".log")
        self._lock: Any = None

    def hold(self) -> None:
        """Take the run's lock (an exclusive flock on its CSV) until release() or this process ends, or raise
        ResultsFileError at once when another run holds it: two runs appending to one file at once each
        run the cases missing from it, and write them twice."""
        if self._lock is not None or fcntl is None:
            return
        f = open(self.csv, "rb")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            raise ResultsFileError(f"{self.csv}: another run is appending to it now (a --resume of the same "
                                   "file?); resume it once that run has ended") from None
        self._lock = f

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


class RowWriter:
    """Appends rows (and their samples) and flushes after each, so a killed run loses nothing."""

    def __init__(self, files: RunFiles):
        self.files = files
        files.csv.parent.mkdir(parents=True, exist_ok=True)
        new = not files.csv.exists() or files.csv.stat().st_size == 0
        if not new and check_header(files.csv) != COLUMN_NAMES:
            raise ResultsFileError(f"{files.csv}: its columns differ from this xlabench's schema (written by "
                                   "another version): start a new run instead of appending to it")
        self._csv = open(files.csv, "a", newline="", encoding="utf-8")
        self._rows = csv.DictWriter(self._csv, fieldnames=COLUMN_NAMES, extrasaction="raise")
        if new:
            self._rows.writeheader()
        new_s = not files.samples.exists() or files.samples.stat().st_size == 0
        self._samples_f = open(files.samples, "a", newline="", encoding="utf-8")
        self._samples = csv.writer(self._samples_f)
        if new_s:
            self._samples.writerow(SAMPLE_COLUMNS)
        self._flush()

    def _flush(self) -> None:
        for f in (self._csv, self._samples_f):
            f.flush()
            os.fsync(f.fileno())

    def write(self, row: Mapping[str, Any], samples: Iterable[float] = ()) -> None:
        unknown = set(row) - set(COLUMN_NAMES)
        if unknown:
            raise ValueError(f"row has columns not in the schema: {sorted(unknown)}")
        # Samples first: a row in the CSV always has its samples on disk.
        for i, s in enumerate(samples):
            self._samples.writerow([row["run_id"], row["case_id"], i, repr(float(s))])
        self._rows.writerow({k: _cell(row.get(k)) for k in COLUMN_NAMES})
        self._flush()

    def close(self) -> None:
        self._csv.close()
        self._samples_f.close()
        self.files.release()

    def __enter__(self) -> "RowWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NullWriter:
    """Stands in for RowWriter on processes that must not write (multi-host: only process 0 writes)."""

    def write(self, row: Mapping[str, Any], samples: Iterable[float] = ()) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> "NullWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class ResultsFileError(Exception):
    """A file is not a readable xlabench results CSV (message names the file and what is wrong)."""


class NotUtf8(ValueError):
    """A file's bytes that are not UTF-8: where the first bad byte is (1-based line and column) and the text
    with bad bytes replaced (to name what stands there)."""

    def __init__(self, data: bytes, start: int):
        self.byte, self.line = data[start], data.count(b"\n", 0, start) + 1
        self.column = start - (data.rfind(b"\n", 0, start) + 1) + 1
        self.text = data.decode("utf-8", errors="replace")
        super().__init__(f"line {self.line}, column {self.column}: not UTF-8 (byte 0x{self.byte:02x})")


def read_utf8(path: Path) -> str:
    """The file as UTF-8 text: OSError where it cannot be read, NotUtf8 where it is not UTF-8 (results
    files here, suites in xlabench/suite: each says it in its own error). A byte-order mark (Excel's 'CSV
    UTF-8') is not part of the text."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise NotUtf8(data, e.start) from None


def read_text(path: Path) -> str:
    """A results file's text; ResultsFileError when it is missing, unreadable or not UTF-8 (its line and byte)."""
    path = Path(path)
    if not path.exists():
        raise ResultsFileError(f"{path}: no such file")
    try:
        return read_utf8(path)
    except OSError as e:
        raise ResultsFileError(f"{path}: cannot read: {e.strerror or e}") from None
    except NotUtf8 as e:
        raise ResultsFileError(f"{path}:{e.line}: not UTF-8 text (byte 0x{e.byte:02x}); xlabench writes "
                               "UTF-8: save the file as UTF-8") from None


def check_header(path: Path, text: str | None = None) -> list[str]:
    """Return the header of an xlabench CSV (of ``text``, its contents, where read already), or raise
    ResultsFileError saying why it is not one."""
    path = Path(path)
    text = read_text(path) if text is None else text
    first = text.split("\n", 1)[0]
    if not first.strip():
        raise ResultsFileError(f"{path}: empty file, not an xlabench results CSV")
    header = next(csv.reader(io.StringIO(first)))
    missing = {"schema_version", "case_id", "status"} - set(header)
    if missing:
        raise ResultsFileError(
            f"{path}: not an xlabench results CSV (no column(s) {', '.join(sorted(missing))})")
    return header


def check_records(path: Path, text: str, what: str, cut_last: bool = False) -> str:
    """``text`` (a CSV file's) with every record of the header's field count, or ResultsFileError naming
    the line: xlabench writes whole lines and syncs them, so anything else was cut off while writing or
    edited. ``cut_last``: a last line cut off by a kill mid-write is dropped instead (what --resume reads)."""
    if text and not text.endswith("\n"):
        if not cut_last:
            raise ResultsFileError(f"{path}: {what} is truncated: its last line is incomplete (cut off while "
                                   "writing? `--resume` the run to finish it)")
        text = text[: text.rfind("\n") + 1]
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header:
        raise ResultsFileError(f"{path}: empty {what}")
    for rec in reader:
        if rec and len(rec) != len(header):
            state = "truncated (cut off while writing?)" if len(rec) < len(header) else "malformed"
            raise ResultsFileError(f"{path}:{reader.line_num}: {what} is {state}: "
                                   f"{len(rec)} of {len(header)} fields")
    return text


_EXPECTED = {"int": "an integer", "float": "a number", "bool": "true or false"}


def _typed(path: Path, df: Any) -> Any:
    """``df`` (every cell read as text) with each column as its schema dtype (results.schema: text as
    written, int and float as numbers, bool as True / False; an empty cell is missing), or ResultsFileError
    naming the line, the column and the dtype of the first cell that is not one.

    The checks run on numpy arrays, the presence of every cell taken once: per column pandas operations
    made this 10x the time of reading the CSV (41 committed run files: 3.7 s against 0.37 s; now 1.26 s in all)."""
    import numpy as np
    import pandas as pd

    values = df.to_numpy(dtype=object, na_value=None)
    present = ~pd.isna(values)
    out: dict[str, Any] = {}
    for j, col in enumerate(df.columns):
        kind, cells, here = DTYPE_OF.get(col, "text"), values[:, j], present[:, j]
        if kind == "text":
            out[col] = df[col]
            continue
        if not here.any():  # an empty column: missing throughout
            out[col] = np.full(len(here), np.nan)
            continue
        if kind == "bool":
            typed = df[col].str.strip().str.lower().map({"true": True, "false": False})
            wrong = here & typed.isna().to_numpy()
        else:
            typed = np.asarray(pd.to_numeric(cells, errors="coerce"))  # int64 where every cell is an integer
            missing = pd.isna(typed)
            wrong = here & missing
            if kind == "int":
                with np.errstate(invalid="ignore"):  # inf: not an integer, said below
                    wrong |= ~missing & (np.mod(typed, 1, where=~missing, out=np.zeros_like(typed)) != 0)
        if wrong.any():
            i = int(np.argmax(wrong))
            unit = f" ({UNIT_OF[col]})" if UNIT_OF.get(col) else ""
            raise ResultsFileError(f"{path}:{i + 2}: {col} {cells[i]!r} is not {_EXPECTED[kind]}{unit}")
        out[col] = typed.astype("int64") if kind == "int" and here.all() else typed
    return pd.DataFrame(out, index=df.index)


def _check_cells(path: Path, df: Any) -> None:
    """Every row has a known status and each case has one row (two runs appending to one file at once wrote
    a case twice): ResultsFileError naming the line."""
    bad = df[~df["status"].isin(STATUSES + COMPILE_STATUSES)]
    if len(bad):
        raise ResultsFileError(f"{path}:{int(bad.index[0]) + 2}: status {bad['status'].iloc[0]!r} is not one of "
                               f"{', '.join(STATUSES)} (compile: {', '.join(COMPILE_STATUSES)})")
    dup = df["case_id"][df["case_id"].duplicated()]
    if len(dup):
        raise ResultsFileError(f"{path}:{int(dup.index[0]) + 2}: case {dup.iloc[0]} has more than one row (two "
                               "runs appended to this file at once?); keep one row per case")


def _tuned_apart(df: Any) -> Any:
    """A version-2 file's rows as version 3 writes them: where the tuner chose the blocks (tuned search,
    cache or off: the suite set none), the blocks it ran at move from the case's columns (block_q ...) to
    the tuned_* ones, and the case's own are empty, as the suite left them."""
    import numpy as np

    v2 = (df["schema_version"] == 2) & df["tuned"].isin(["search", "cache", "off"]) if "tuned" in df else None
    out = df.copy()
    for name in dict.fromkeys(n for names in TUNED_PARAMS.values() for n in names):
        if TUNED_PREFIX + name not in out:
            out[TUNED_PREFIX + name] = np.nan
        if v2 is not None and name in out and v2.any():
            out[name] = out[name].astype("float64")  # room for the emptied cells
            out.loc[v2, TUNED_PREFIX + name] = out.loc[v2, name]
            out.loc[v2, name] = np.nan
    return out


def read_rows(path: Path, cut_last: bool = False):
    """Load one results CSV as a DataFrame of typed columns (each column's schema dtype), checking it is a
    whole xlabench CSV of a version this xlabench reads (check_records, _typed, _check_cells); an older
    version's rows read as this version's. ``cut_last``: a final line cut off by a kill mid-write is
    dropped (every complete row is kept: what --resume reads)."""
    import pandas as pd

    path = Path(path)
    text = read_text(path)
    header = check_header(path, text)
    text = check_records(path, text, "results CSV", cut_last)
    extra = [c for c in header if c not in COLUMN_NAMES]
    if extra:
        raise ResultsFileError(f"{path}: unknown column(s) {extra} for schema version {SCHEMA_VERSION}")
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=True)
    except Exception as e:  # pandas raises several types for malformed files
        raise ResultsFileError(f"{path}: cannot parse as CSV: {e}") from None
    df = _typed(path, df)
    versions = set(df["schema_version"].dropna().astype(int))
    if versions and not versions <= set(READABLE_VERSIONS):
        raise ResultsFileError(f"{path}: schema version {sorted(versions)} but this xlabench reads versions "
                               f"{', '.join(map(str, READABLE_VERSIONS))}")
    _check_cells(path, df)
    df = _tuned_apart(df)
    # version 1 timed every row on the wall clock (its files have no clock column)
    clock = df["clock"].astype(object) if "clock" in df else pd.Series(None, index=df.index, dtype=object)
    # .copy(): one block per dtype (the python parser's ~150 columns come as fragments, and pandas warned on
    # every assign, on the user's terminal)
    return df.copy().assign(clock=clock.where(clock.notna() | (df["status"] != "ok"), "wall"))


def update_rows(path: Path, cells: Mapping[str, Mapping[str, Any]]) -> None:
    """Set columns of some rows of a results CSV in place (``cells``: case_id -> column -> value), every
    other cell kept as written; the file is rewritten whole (a temporary file, then renamed) with this
    schema's header (a column an older file lacks is empty)."""
    path = Path(path)
    check_header(path)
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for k, v in cells.get(row.get("case_id") or "", {}).items():
            if k not in COLUMN_NAMES:
                raise ValueError(f"column {k!r} is not in the schema")
            row[k] = _cell(v)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMN_NAMES, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: row.get(k) or "" for k in COLUMN_NAMES})
    os.replace(tmp, path)


def read_samples(csv_path: Path):
    """The per-iteration samples beside a results CSV, as a DataFrame (empty if the file is absent)."""
    import pandas as pd

    p = RunFiles(csv_path).samples
    if not p.exists():
        return pd.DataFrame(columns=SAMPLE_COLUMNS)
    return pd.read_csv(io.StringIO(read_text(p)), dtype={"case_id": str, "run_id": str})


def read_prior(csv_path: Path, hold: bool = True) -> tuple[RunFiles, Any, set[str], str]:
    """A run to resume (``run --resume``, ``compile --resume``): its files (``hold``: holding the run's lock,
    so that a second resume of it at once is refused: RunFiles.hold), its rows, the case ids that already
    have a row (any status: what a resume skips) and its run id. Raises ResultsFileError."""
    files = RunFiles(Path(csv_path))
    read_text(files.csv)  # missing, unreadable or not UTF-8: said before anything is locked
    read_meta(files)  # a damaged meta too: the resume reads its profile and host peaks
    if hold:
        files.hold()
    try:
        prior = read_rows(files.csv, cut_last=True)
        timed = int((prior["status"] == "ok").sum())
        if timed and not files.samples.exists():  # a resume would write a header-only one: compare fails later
            raise ResultsFileError(f"{files.samples}: no such file: the samples of the {timed} ok row(s) of "
                                   f"{files.csv.name} (put it back beside the CSV, or start a new run)")
    except ResultsFileError:
        files.release()
        raise
    run_id = str(prior["run_id"].iloc[0]) if len(prior) else files.csv.name.split(".")[0]
    return files, prior, set(prior["case_id"].astype(str)), run_id


def software() -> dict[str, Any]:
    """The versions every meta file records beside the workers' framework versions: xlabench, Python,
    and libtpu where it is installed (None elsewhere), read from the package metadata, not imported."""
    import platform
    from importlib import metadata

    from xlabench import __version__

    try:
        libtpu: Any = metadata.version("libtpu")
    except metadata.PackageNotFoundError:
        libtpu = None
    return {"xlabench_version": __version__, "python_version": platform.python_version(), "libtpu_version": libtpu}


# The meta's keys whose values are JSON objects (read with .get by report, explain, audit, run --resume)
META_OBJECTS = ("env", "suite_spec", "traces", "interrupted", "phase_s")


def read_meta(run: RunFiles | Path | str) -> dict[str, Any]:
    """The meta JSON of a run (its RunFiles or CSV path): the one reader of ``<run>.meta.json``. {} where
    there is none (a run copied without it); ResultsFileError, one line naming the file and what is wrong,
    where it cannot be read, is not JSON, or is not an object (or one of META_OBJECTS is not). A byte-order
    mark is not part of the text."""
    path = (run if isinstance(run, RunFiles) else RunFiles(Path(run))).meta
    if not path.exists():
        return {}
    text = read_text(path)
    why = "move it away to read the run without it, or put back the file the run wrote"
    try:
        meta = json.loads(text)
    except ValueError as e:
        raise ResultsFileError(f"{path}: not a readable meta JSON file (not JSON: {e}); {why}") from None
    kind = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
    if not isinstance(meta, dict):
        raise ResultsFileError(f"{path}: not a readable meta JSON file (a JSON {kind.get(type(meta), 'null')}, "
                               f"not an object); {why}")
    for key in META_OBJECTS:
        if meta.get(key) is not None and not isinstance(meta[key], dict):
            raise ResultsFileError(f"{path}: not a readable meta JSON file (\"{key}\" is a JSON "
                                   f"{kind.get(type(meta[key]), 'value')}, not an object); {why}")
    return meta


def write_meta(files: RunFiles, meta: Mapping[str, Any]) -> None:
    tmp = files.meta.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({**meta, **software()}, indent=2, default=str) + "\n")
    tmp.replace(files.meta)


def phase_fields(phase_s: Mapping[str, float] | None) -> dict[str, Any]:
    """The meta's ``phase_s`` (seconds per phase, to the tenth, summed over a run's rows), or nothing where
    the workers reported none."""
    return {"phase_s": {name: round(float(s), 1) for name, s in phase_s.items()}} if phase_s else {}


def finish_meta(files: RunFiles, meta: dict[str, Any], rows: Iterable[Mapping[str, Any]],
                phase_s: Mapping[str, float] | None = None) -> None:
    """Write the run's end into its meta: the end time, the device counts its rows ran on (the env's
    device_count becomes the largest; what the probe worker saw stays as probe_device_count), and
    ``phase_s``: the workers' seconds per phase summed over the run's rows (a case's phases are not CSV
    columns: see schema.py), so that where a run's time went is read from its meta."""
    import time

    meta.update(phase_fields(phase_s))

    counts = sorted({int(r["device_count"]) for r in rows if r.get("device_count") not in (None, "")})
    meta["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if counts:
        env = meta.setdefault("env", {})
        env.setdefault("probe_device_count", env.get("device_count"))
        env["device_count"] = counts[-1]
        meta["device_counts"] = counts
    write_meta(files, meta)
