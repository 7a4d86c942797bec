"""How a suspect row is shown wherever its figures are (the run's summary, `report`, `plot`): a marker
beside the row and a numbered footnote with the reason its `suspect` column gives."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Optional

MARK = "suspect"
INTRO = "suspect: the row breaks an invariant (docs/audit.md); its numbers are kept as measured"


def suspect(row: Mapping[str, Any]) -> Optional[str]:
    """The reasons of a suspect row (its `suspect` cell), or None for a clean one (empty, NaN, absent)."""
    cell = row.get("suspect")
    return cell.strip() if isinstance(cell, str) and cell.strip() else None


def numbered(rows: Iterable[Mapping[str, Any]]) -> list[Optional[int]]:
    """Each row's footnote number (1, 2, ... in row order among the suspect ones), None for a clean row."""
    out, n = [], 0
    for r in rows:
        if suspect(r):
            n += 1
            out.append(n)
        else:
            out.append(None)
    return out


def marker(n: Optional[int]) -> str:
    return f"{MARK} [{n}]" if n else ""


def footnotes(rows: Iterable[Mapping[str, Any]], label: Callable[[Mapping[str, Any]], str]) -> list[str]:
    """'[n] label: reasons' per suspect row, in row order (empty when none is suspect); ``label`` names
    the row's case the way its table or chart does."""
    rows = list(rows)
    return [f"[{n}] {label(r)}: {suspect(r)}" for r, n in zip(rows, numbered(rows)) if n]


def rule_counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many suspect rows break each rule (the name before ':' in each of a row's reasons), most first."""
    counts: dict[str, int] = {}
    for r in rows:
        text = suspect(r)
        for reason in text.split("; ") if text else ():
            rule = reason.split(":", 1)[0].strip()
            counts[rule] = counts.get(rule, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
