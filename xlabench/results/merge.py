"""Combine the CSVs (and samples) of a suite split across machines into one run's files."""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path
from typing import Sequence

from xlabench import results


class MergeError(Exception):
    """Inputs that cannot be merged (message names the files and the reason)."""


def _text_rows(path: Path) -> list[dict[str, str]]:
    results.read_rows(path)  # schema and version checks, with clear errors
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    return [r for r in rows if r.get("case_id")]  # a row cut off by a kill has no complete fields


def inputs(paths: Sequence[Path]) -> tuple[list[Path], list[str]]:
    """The files of ``paths`` to merge, and a note for each passed over: what a glob of a results folder
    picks up beside the runs (samples, meta, log files) and, among timed runs, `xlabench compile` files."""
    paths = [Path(p) for p in paths]
    compiles = all(p.name.endswith(results.COMPILE_SUFFIX) for p in paths if not results.passed_over(p))
    notes = [n for n in (results.passed_over(p, compiles) for p in paths) if n]
    return [p for p in paths if not results.passed_over(p, compiles)], notes


def merge(paths: Sequence[Path], out: Path) -> int:
    """Concatenate result files of one suite, cell text unchanged; refuse duplicate cases and mixed
    suites. Returns the number of rows written."""
    if not paths:
        raise MergeError("nothing to merge: give result CSVs")
    out = Path(out)
    if out.exists():
        raise MergeError(f"{out} exists; refusing to overwrite")
    rows: list[dict[str, str]] = []
    origin: dict[str, list[str]] = {}
    suites: dict[str, list[str]] = {}
    for p in map(Path, paths):
        for r in _text_rows(p):
            rows.append(r)
            origin.setdefault(r["case_id"], []).append(str(p))
            suites.setdefault(r["suite"], [])
            if str(p) not in suites[r["suite"]]:
                suites[r["suite"]].append(str(p))
    if len(suites) > 1:
        raise MergeError("mixed suites: " + "; ".join(f"{s} in {', '.join(f)}" for s, f in sorted(suites.items())))
    dups = [cid for cid, n in Counter(r["case_id"] for r in rows).items() if n > 1]
    if dups:
        raise MergeError(f"{len(dups)} case(s) appear more than once, e.g. {dups[0]} in "
                         f"{', '.join(origin[dups[0]])}")
    files = results.RunFiles(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=results.COLUMN_NAMES)
        w.writeheader()
        w.writerows({k: r.get(k, "") for k in results.COLUMN_NAMES} for r in rows)
    with open(files.samples, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(results.SAMPLE_COLUMNS)
        for p in map(Path, paths):
            src = results.RunFiles(p).samples
            if src.exists():
                reader = csv.reader(io.StringIO(results.read_text(src), newline=""))
                next(reader, None)
                w.writerows(reader)
    return len(rows)
