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
