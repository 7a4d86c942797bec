"""A run as the gate reads it: rows and their per-iteration samples, checked whole (header, schema version, truncation, samples that match their rows) before anything is compared."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xlabench import results
from xlabench.results import ResultsFileError
from xlabench.gate.config import num
from xlabench.protocol.status import OK


@dataclass
class RunData:
    """One results CSV and its samples, checked fit for comparison."""

    path: Path
    rows: Any      # pandas.DataFrame, one row per case
    samples: Any   # pandas.DataFrame, results.SAMPLE_COLUMNS

    def samples_of(self, row: dict[str, Any]) -> np.ndarray:
        s = self.samples
        sel = (s["case_id"] == row["case_id"]) & (s["run_id"] == str(row["run_id"]))
        return s.loc[sel].sort_values("iteration")["seconds"].to_numpy(dtype=float)


# Columns the gate reads. Others may be absent (a file written before a column was added reads as
# empty there); a column unknown to this schema is refused by results.read_rows.
_REQUIRED = ["schema_version", "run_id", "suite", "profile", "case_id", "workload", "backend", "impl",
             "device_kind", "framework_version", "status", "error", "n", "median_s", "correct"]


def load_run(path: str | Path) -> RunData:
    """Read a results CSV and the samples beside it, refusing anything that is not a whole xlabench run.

    Raises ResultsFileError naming the file and the problem (the CLI turns it into exit code 2).
    """
    import pandas as pd

    path = Path(path)
    header = results.check_header(path)
    missing = [c for c in _REQUIRED if c not in header]
    if missing:
        raise ResultsFileError(f"{path}: schema mismatch: no column(s) {', '.join(missing)} "
                               f"(this xlabench writes schema version {results.SCHEMA_VERSION})")
    rows = results.read_rows(path)  # whole records, known statuses, numeric timings, a row per case
    if rows.empty:
        raise ResultsFileError(f"{path}: no result rows (header only)")
    bad = rows[~rows["status"].isin(results.STATUSES)]
    if len(bad):
        raise ResultsFileError(f"{path}:{int(bad.index[0]) + 2}: status {bad['status'].iloc[0]!r} "
                               f"is not one of {', '.join(results.STATUSES)} (a compile's rows are not timed)")
    spath = results.RunFiles(path).samples
    if (rows["status"] == OK).any() and not spath.exists():
        raise ResultsFileError(f"{spath}: no such file: the gate needs the raw samples written beside "
                               f"{path.name} (keep or commit both files)")
    if spath.exists():
        results.check_records(spath, results.read_text(spath), "samples file")
    samples = results.read_samples(path)
    if list(samples.columns) != results.SAMPLE_COLUMNS:
        raise ResultsFileError(f"{spath}: columns {list(samples.columns)}, expected {results.SAMPLE_COLUMNS}")
    samples["seconds"] = pd.to_numeric(samples["seconds"], errors="coerce")
    bad_s = samples[~np.isfinite(samples["seconds"]) | (samples["seconds"] <= 0)]
    if len(bad_s):
        raise ResultsFileError(f"{spath}: line {int(bad_s.index[0]) + 2}: seconds must be a positive number")
    samples["case_id"] = samples["case_id"].astype(str)
    samples["run_id"] = samples["run_id"].astype(str)
    run = RunData(path, rows, samples)
    counts = samples.groupby(["run_id", "case_id"]).size().to_dict()  # once, not a scan per row (1000s of cases)
    for row in rows[rows["status"] == OK].to_dict("records"):
        got, want = counts.get((str(row["run_id"]), str(row["case_id"])), 0), num(row.get("n"))
        if want is not None and got != want:
            raise ResultsFileError(f"{spath}: case {row['case_id']} has {got} samples but its row says "
                                   f"n={int(want)} (truncated or from another run?)")
    return run
