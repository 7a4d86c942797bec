"""Which results files `plot`, `report` and `best` read, from the paths a user gives.

A file is taken as given, except the ``.samples.csv`` beside every run (read with its run, never as
one) and, where a command reads runs only, ``.compile.csv`` files: the natural glob
``results/x/*.csv`` then works. A folder means, per folder below it, its newest run that has a
usable row (ok; for a compile: compiled, oom or lowered) and its newest such compile: a newer run in
which every case failed is passed over, with a note saying so, and so is a newer run cut short (its meta
planned more cases than it holds: results.run_progress) while a complete one is there. Each choice is a note, so the user
sees which run a command took. Framework-free, no pandas (only the CSV module).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from xlabench import results
from xlabench.protocol import status as st

SAMPLES_SUFFIX, COMPILE_SUFFIX = results.SAMPLES_SUFFIX, results.COMPILE_SUFFIX
USABLE = {False: (st.OK,), True: (st.COMPILED, st.OOM, st.LOWERED)}  # is a compile file -> usable statuses


@dataclass
class Inputs:
    """The files to read and what the user should be told about how they were picked."""

    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _is_compile(p: Path) -> bool:
    return p.name.endswith(COMPILE_SUFFIX)


def usable_rows(path: Path) -> int:
    """How many rows of a results CSV are usable (see USABLE); 0 for a file that is not one."""
    want = USABLE[_is_compile(path)]
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            return sum(1 for row in csv.DictReader(f) if row.get("status") in want)
    except (OSError, csv.Error, UnicodeDecodeError):
        return 0


def newest_usable(root: Path, compiles: bool = True) -> Inputs:
    """Per folder under ``root``: the newest run (by name: run ids start with their UTC start time) with
    a usable row, and the newest such compile (when ``compiles``)."""
    out = Inputs()
    by_folder: dict[tuple[Path, bool], list[Path]] = {}
    for p in sorted(Path(root).rglob("*.csv")):
        if p.name.endswith(SAMPLES_SUFFIX) or (_is_compile(p) and not compiles):
            continue
        try:
            results.check_header(p)
        except results.ResultsFileError as e:
            out.notes.append(f"skipped {e}")
            continue
        by_folder.setdefault((p.parent, _is_compile(p)), []).append(p)
    for (_folder, _), paths in sorted(by_folder.items()):
        usable = [p for p in reversed(paths) if usable_rows(p)]
        if not usable:
            out.notes.append(f"skipped {paths[-1].parent}: no run there has an ok row")
            continue
        cut = {p: results.incomplete_note(p) for p in usable}
        whole = [p for p in usable if not cut[p]]
        took = whole[0] if whole else usable[0]  # the newest complete one; else the newest there is
        passed = [p.name for p in reversed(paths) if p > took and p not in cut]
        newer_cut = [cut[p] for p in usable if p > took and cut[p]]
        kind = "compile" if _is_compile(took) else "run"
        out.files.append(took)
        out.notes.append(f"took {took} (the newest {'complete ' if whole else ''}{kind} with a usable row"
                         + (f"; passed over {', '.join(passed)}: no ok row" if passed else "")
                         + (f"; passed over {'; '.join(newer_cut)}" if newer_cut else "") + ")")
        if cut[took]:
            out.notes.append(f"{cut[took]} (no complete one there)")
    return out


def incomplete_notes(files: Iterable[Path]) -> list[str]:
    """A note for each file given whose run was cut short: '9 of 40 cases (interrupted by SIGINT)'."""
    return [n for n in map(results.incomplete_note, files) if n]


def collect(paths: Iterable[str | Path], compiles: bool = True) -> Inputs:
    """The files a command reads for ``paths`` (files or folders; see the module docstring)."""
    out = Inputs()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = newest_usable(p, compiles)
            out.files += found.files
            out.notes += found.notes
        elif p.name.endswith(SAMPLES_SUFFIX):
            out.notes.append(results.samples_note(p))
        elif _is_compile(p) and not compiles:
            out.notes.append(f"skipped {p}: an `xlabench compile` file (this command reads runs)")
        else:
            out.files.append(p)
            out.notes += incomplete_notes([p])
    out.files = list(dict.fromkeys(out.files))
    return out
