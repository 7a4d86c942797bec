"""Whether a run is whole: its meta records the cases it planned (``cases_planned``) and, when a signal cut it
short, ``interrupted`` (the signal, when, the cases done by then); the rows its CSV holds are what it did.
Read by `report`, `plot`, `compare` and `gate` (issue 50 item 5: an interrupted run of 9 of 40 cases looked
complete). A meta without ``cases_planned`` (a run written before) says nothing either way."""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from xlabench.results.files import RunFiles, read_meta, write_meta


@dataclass(frozen=True)
class RunProgress:
    planned: int
    done: int  # the cases the CSV holds a row for
    interrupted: Optional[str]  # the signal that cut the run short (None: none recorded)
    ended: bool  # the meta says the run ended (a run killed outright, or still running, has no end)
    run_ids: frozenset[str] = frozenset()  # the run ids of the CSV's rows

    @property
    def complete(self) -> bool:
        return self.done >= self.planned

    def text(self) -> str:
        """'9 of 40 cases (interrupted by SIGINT)'."""
        why = (f"interrupted by {self.interrupted}" if self.interrupted else
               "still running, or killed" if not self.ended else "")
        return f"{self.done} of {self.planned} cases" + (f" ({why})" if why and not self.complete else "")


def _ids(path: Path) -> tuple[set[str], frozenset[str]]:
    """(case ids, run ids) of a CSV's rows."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = [(row.get("case_id") or "", row.get("run_id") or "") for row in csv.DictReader(f)]
    except (OSError, csv.Error, UnicodeDecodeError):
        return set(), frozenset()
    return {c for c, _ in rows} - {""}, frozenset(r for _, r in rows) - {""}


def run_progress(csv_path: str | Path) -> Optional[RunProgress]:
    """How far the run of ``csv_path`` got against its plan (None: its meta records no plan, or no usable
    one). ResultsFileError where the meta is damaged (read_meta)."""
    meta = read_meta(csv_path)
    try:
        planned = int(meta["cases_planned"])
    except (ValueError, KeyError, TypeError):
        return None
    cut = meta.get("interrupted") or {}
    cases, run_ids = _ids(Path(csv_path))
    return RunProgress(planned, len(cases), cut.get("signal") if isinstance(cut, dict) else None,
                       bool(meta.get("ended")), run_ids)


def incomplete_note(csv_path: str | Path) -> Optional[str]:
    """'RUN.csv is an incomplete run: 9 of 40 cases (interrupted by SIGINT)', or None for a whole run."""
    p = run_progress(csv_path)
    return None if p is None or p.complete else f"{csv_path} is an incomplete run: {p.text()}"


def record_interruption(files: RunFiles, meta: dict[str, Any], signal_name: str, done: Optional[int]) -> None:
    """Write into the run's meta that ``signal_name`` cut it short after ``done`` cases (a --resume rewrites
    the meta whole, without it)."""
    meta["interrupted"] = {"signal": signal_name, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "cases_done": done}
    write_meta(files, meta)
