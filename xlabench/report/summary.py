"""The table `xlabench run` prints at the end: the rows that ran (ok, failed, wrong result), and the
skipped ones folded into one line per reason with a count, so a run whose torch_xla environment is
missing shows its real results instead of a screen of 'skipped' rows. No printing here: the CLI prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from rich.table import Table
from rich.text import Text

from xlabench import results

_STYLE = {"ok": "green", "failed": "red", "skipped": "yellow"}
_NOTE_CHARS = 80
_REASON_CHARS = 200
_DETAIL_CHARS = 160
_OPEN, _CLOSE = "([{", ")]}"


def _split(text: str) -> tuple[str, str]:
    """(head, details): split at the first ': ' outside brackets and quotes, so 'torch_xla environment
    missing (make torch-xla-env): /path/python ...' folds on its head, while a colon inside a
    parenthesis, or 'HOST:PORT', does not split."""
    depth, quote = 0, ""
    for i, ch in enumerate(text):
        if ch in "'\"`" and text[i - 1:i].isalnum() and text[i + 1:i + 2].isalnum():
            continue  # an apostrophe (wasn't), not a quote
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(depth - 1, 0)
        elif ch == ":" and depth == 0 and text[i + 1:i + 2] in (" ", ""):
            return text[:i].rstrip(), text[i + 1:].strip()
    return text, ""


def _clean(error: Any) -> str:
    return " ".join(str(error or "").split())


def skip_reason(error: Any) -> str:
    """The folding key of a skip reason: its head, the text before the first top-level ': ' (details
    after it, such as a path, differ between rows skipped for one cause), whitespace collapsed."""
    return _split(_clean(error))[0] or "no reason given"


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


@dataclass(frozen=True)
class SkipGroup:
    """Skipped rows that share a reason: how many, and one full reason as an example of the details."""

    reason: str
    count: int
    example: str

    def line(self) -> str:
        out = f"{self.count} skipped: {_clip(self.reason, _REASON_CHARS)}"
        details = _split(_clean(self.example))[1]
        return out + (f"\n    e.g. {_clip(details, _DETAIL_CHARS)}" if details else "")


@dataclass
class Summary:
    """The summary table (None when every row was skipped) and the folded skip lines."""

    table: Optional[Table]
    skipped: list[SkipGroup]

    def lines(self) -> list[str]:
        return [g.line() for g in self.skipped]


def fold_skipped(rows: Sequence[Mapping[str, Any]]) -> list[SkipGroup]:
    """One group per normalised reason, in order of first appearance; the first row's reason is the example."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("status") == "skipped":
            groups.setdefault(skip_reason(r.get("error")), []).append(r)
    return [SkipGroup(reason, len(g), str(g[0].get("error") or "")) for reason, g in groups.items()]


def _note(r: Mapping[str, Any]) -> str:
    if r.get("correct") is False:
        return "WRONG RESULT"
    if r.get("interpret") and r["status"] == "ok":
        return "interpret"
    return str(r.get("error") or "")[:_NOTE_CHARS]


def build(rows: Sequence[Mapping[str, Any]], params: Sequence[Mapping[str, Any]]) -> Summary:
    """The summary of a run's rows. ``params``: the parameters of every case of the run (their varying
    keys are the table's shape columns, so the columns do not depend on which rows ran)."""
    shown = [r for r in rows if r["status"] != "skipped"]
    skipped = fold_skipped(rows)
    if not shown:
        return Summary(None, skipped)
    cols = [k for k in results.varying(params) if k != "impl"]
    bandwidth = any(r.get("bytes") for r in shown)  # memory-bound workloads: show GB/s and MBU too
    fmt = results.fmt_number
    t = Table(title="summary")
    for col in (["backend", "impl"] + cols + ["status", "median ms", "TFLOP/s", "MFU %"]
                + (["GB/s", "MBU %"] if bandwidth else []) + ["err", "note"]):
        t.add_column(col, overflow="fold")
    for r in shown:
        status = r["status"]
        t.add_row(r["backend"], r["impl"], *[str(r.get(k, "")) for k in cols], Text(status, style=_STYLE[status]),
                  fmt(r.get("median_s"), ".3f", 1e3), fmt(r.get("tflops_per_s"), ".4g"), fmt(r.get("mfu"), ".2f", 100),
                  *([fmt(r.get("gbytes_per_s"), ".4g"), fmt(r.get("mbu"), ".2f", 100)] if bandwidth else []),
                  fmt(r.get("max_abs_err"), ".1e"), _note(r))
    return Summary(t, skipped)
