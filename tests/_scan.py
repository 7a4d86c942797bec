"""Scan xlabench/'s modules for code that belongs in one place (units, statistics): shared by the scan tests."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

PKG = Path(__file__).resolve().parent.parent / "xlabench"


def scan(find: Callable[[str], Iterable[tuple[int, str]]], allowed: set[tuple[str, str]], skip: Callable[[str], bool],
         advice: str) -> tuple[list[str], set[tuple[str, str]]]:
    """(each line ``find`` flags in xlabench/ outside the modules ``skip`` names, as 'path:line: what
    (advice)', unless its (module, stripped line) is in ``allowed``; the allowed entries that matched)."""
    offenders, matched = [], set()
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if skip(rel):
            continue
        text = path.read_text()
        lines = text.splitlines()
        for lineno, what in find(text):
            key = (rel, lines[lineno - 1].strip())
            if key in allowed:
                matched.add(key)
            else:
                offenders.append(f"xlabench/{rel}:{lineno}: {what} ({advice})")
    return offenders, matched
