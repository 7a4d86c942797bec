"""Where a run keeps what `xlabench explain` reads, declared once: each case's folder under the run's
``trace_root`` (its meta JSON), holding the profile and ``<module>.hlo.txt``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

HLO_SUFFIX = ".hlo.txt"
ARCHIVE_SUFFIX = ".explain.tgz"  # a run committed with its kept files packed: <run-id>.explain/ in a gzip tar


def explain_dir(csv: Path) -> Path:
    """The folder beside a run's CSV that `run --explain` (without --trace) and `compile --explain` fill:
    ``<run-id>.explain/``."""
    return csv.with_name(csv.name.split(".", 1)[0] + ".explain")


def archive(csv: Path) -> Path:
    """Where a run's kept files lie packed, beside its CSV: ``<run-id>.explain.tgz`` (holding ``<run-id>.explain/``)."""
    return csv.with_name(csv.name.split(".", 1)[0] + ARCHIVE_SUFFIX)


def trace_root(meta: Mapping[str, Any], csv: Path) -> Path | None:
    """The folder of the run's kept files: the meta's ``trace_root`` where it exists; else, for a run
    copied from the machine that ran it (a TPU VM), the folder of that name beside the CSV, or the
    ``<run-id>.explain/`` folder there. None: the run kept nothing."""
    root = meta.get("trace_root")
    candidates = ([Path(root), csv.with_name(Path(root).name)] if root else []) + [explain_dir(csv)]
    for folder in candidates:
        if folder.is_dir():
            return folder
    return Path(root) if root else None


DUMPED = ".after_optimizations.txt"  # an XLA dump's optimized HLO text of one program (module_NNNN.<name>...)


def dump_dir(xla_flags: str) -> Path | None:
    """The folder an XLA dump writes to (``--xla_dump_to=DIR`` in XLA_FLAGS), or None."""
    dirs = [f.split("=", 1)[1] for f in xla_flags.split() if f.startswith("--xla_dump_to=")]
    return Path(dirs[-1]) if dirs else None


def keep_dumped(dump: Path | None, case_dir: str | None, since: float) -> list[str]:
    """The programs an XLA dump holds that were compiled since ``since`` (epoch seconds) moved into a case's
    folder as ``module_NNNN.hlo.txt`` (one per program of its step: `xlabench explain` matches each to the
    trace's executions), everything else in the dump removed (the next case starts from an empty one). The
    names kept; none where the run keeps nothing or nothing was dumped."""
    if dump is None or not case_dir or not dump.is_dir():
        return []
    out = Path(case_dir)
    kept = []
    for f in sorted(dump.iterdir()):
        if f.is_file() and f.name.endswith(DUMPED) and f.stat().st_mtime >= since:
            out.mkdir(parents=True, exist_ok=True)
            name = f.name.split(".", 1)[0] + HLO_SUFFIX
            f.replace(out / name)
            kept.append(name)
        elif f.is_file():
            f.unlink()
    return kept
