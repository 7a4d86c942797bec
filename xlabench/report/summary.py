"""The table `xlabench run` prints at the end: the rows that ran (ok, failed, wrong result), and the
skipped ones folded into one line per reason with a count, so a run whose torch_xla environment is
missing shows its real results instead of a screen of 'skipped' rows. No printing here: the CLI prints.

The table fits the console (80 columns included) with no cell wrapped: parameters every row shares go
to one 'fixed:' line above it, long names get short headers, numbers three digits, and when it is
still too wide the least needed columns give way (the caption says which) and the note is clipped. A
failed row's note names its error ('failed E1'); each distinct error is printed once, whole, under the
table, wrapped to the console.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from xlabench.cells import clip, number
from xlabench import impls as catalog
from xlabench.audit import marks
from xlabench import results
from xlabench.protocol import status as st
from xlabench.results.display import clock_note
from xlabench.units import MS_PER_S

_STYLE = {st.OK: "green", st.FAILED: "red", st.SKIPPED: "yellow"}
ERROR_MARK = "E"
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


@dataclass(frozen=True)
class SkipGroup:
    """Skipped rows that share a reason: how many, and one full reason as an example of the details."""

    reason: str
    count: int
    example: str

    def line(self) -> str:
        out = f"{self.count} skipped: {clip(self.reason, _REASON_CHARS)}"
        details = _split(_clean(self.example))[1]
        return out + (f"\n    e.g. {clip(details, _DETAIL_CHARS)}" if details else "")


@dataclass(frozen=True)
class Column:
    """One column of the summary: its header, a cell per shown row, and how it gives way when the console
    is narrow (drop: left out, in order of the number, lowest first; the note is clipped instead)."""

    header: str
    cells: list[Text]
    drop: int = 0  # 0: always shown
    justify: str = "left"


# Short names for long parameters: a cell is a few characters, its header should be too (and a header
# longer than its cells goes on two lines, split at '_'). The fixed line above the table keeps the full names.
SHORT = {"num_kv_heads": "kv_heads", "context_lens": "context", "pages_per_compute_block": "pages_per_block",
         "megacore_mode": "megacore"}
# Parameters that follow another one: shown only when they do not (a sharding mode fixes its mesh).
FOLLOWS = {"mesh": ("sharding",), "pages_per_compute_block": ("page_size",),
           "max_context": ("context_lens", "page_size"), "total_pages": ("batch", "context_lens", "page_size")}
INTERPRET_MARK = "*"
INTERPRET_NOTE = f"{INTERPRET_MARK} interpreted kernel (CPU): a pipeline check, not kernel speed"
SPREAD_NOTE = "ms: median per iteration; spread: (p90 - p10) / median"
_NOTE_MIN = 12


def _value(v: Any) -> str:
    """A parameter as a short cell: True -> 'yes', 64.0 -> '64', 'uniform:4..512' -> 'u:4..512'."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    s = "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
    return s.replace("uniform:", "u:")


def _num(v: Any, scale: float = 1.0) -> str:
    """Three significant digits without trailing noise: 0.0123, 1.23, 12.3, 123, 1234."""
    f = number(v)
    if f is None:
        return ""
    f *= scale
    a = abs(f)
    return f"{f:.0f}" if a >= 100 else f"{f:.1f}" if a >= 10 else f"{f:.2f}" if a >= 1 else f"{f:.3g}"


def _err(v: Any) -> str:
    """'1e-06' -> '1e-6': a max abs error in five characters."""
    s = results.fmt_number(v, ".0e")
    if s and float(s) == 0:
        return "0"
    return s.replace("e-0", "e-").replace("e+0", "e+") if s else s


def spread(r: Mapping[str, Any]) -> str:
    """The p10-p90 spread relative to the median, in %: how far apart the iterations were."""
    try:
        lo, hi, med = float(r.get("p10_s")), float(r.get("p90_s")), float(r.get("median_s"))
    except (TypeError, ValueError):
        return ""
    if any(math.isnan(x) for x in (lo, hi, med)) or med <= 0:
        return ""
    return f"{100 * (hi - lo) / med:.0f}%"


def _same(a: Any, b: Any) -> bool:
    return _value(a) == _value(b)


def _shape_keys(shown: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> tuple[list[str], list[str]]:
    """(columns, fixed): the keys that vary among the shown rows, and 'key=value' for those that do not.

    kv_seq_len equal to seq_len in every row is 'kv_seq_len=seq_len'; a parameter that follows another
    shown one (a sharding mode's mesh) is no column either.
    """
    cols, fixed = [], []
    for k in keys:
        values = {_value(r.get(k)) for r in shown}
        if len(values) <= 1:
            if values - {""}:
                fixed.append(f"{k}={values.pop()}")
        elif k == "kv_seq_len" and all(_same(r.get(k), r.get("seq_len")) for r in shown):
            fixed.append("kv_seq_len=seq_len")
        else:
            cols.append(k)
    for k, leads in FOLLOWS.items():
        if k in cols:
            lead = [c for c in leads if c in cols]
            pairs = {(tuple(_value(r.get(c)) for c in lead), _value(r.get(k))) for r in shown}
            if len(pairs) == len({p[0] for p in pairs}):
                cols.remove(k)
    return cols, fixed


def _note(r: Mapping[str, Any], suspect: Optional[int] = None, errors: Optional[dict[str, int]] = None) -> Text:
    """What a row needs said: a failure and its error's number (``errors``: each distinct error's, the
    error whole under the table), a wrong result, a suspect figure (its footnote's number: the reason is
    under the table)."""
    if r["status"] != st.OK:
        error = _clean(r.get("error"))
        n = (errors or {}).get(error)
        return Text(f"{r['status']}" + (f" {ERROR_MARK}{n}" if n else ""), style=_STYLE[r["status"]])
    wrong = Text("WRONG RESULT", style="bold red") if r.get("correct") is False else Text("")
    if suspect:
        return Text.assemble(wrong, "; " if wrong.plain else "", (marks.marker(suspect), "bold yellow"))
    return wrong


def wrong_note(r: Mapping[str, Any]) -> Optional[str]:
    """What was wrong with a wrong row's output, as its worker said it in the notes ('wrong output: out has
    shape …, expected shape …'), or None (its values were wrong: its error against the tolerance says it)."""
    notes = r.get("notes")
    said = [n.strip() for n in (notes.split(";") if isinstance(notes, str) else ())
            if n.strip().startswith("wrong output")]
    return said[0] if said else None


def interpreted(r: Mapping[str, Any]) -> bool:
    """Whether a row's kernel ran in the CPU interpreter. A user impl's row said interpret on CPU before its
    worker imported it (rows written before issue 50): one that failed (to import, say) or was skipped ran nothing."""
    said = bool(r.get("interpret")) and str(r.get("interpret")).lower() not in ("false", "nan")
    return said and not (r.get("status") in (st.FAILED, st.SKIPPED) and catalog.is_user(str(r.get("impl"))))


def _impl(r: Mapping[str, Any]) -> Text:
    """'flash*': the impl, * when its kernel ran in the CPU interpreter (interpreted)."""
    return Text(f"{r.get('impl')}" + (INTERPRET_MARK if interpreted(r) else ""))


def _header(name: str, cells: Sequence[Text]) -> str:
    """A header no wider than its cells where it can be: 'global_batch' over 3-digit cells is 'global\nbatch'."""
    widest = max((len(c.plain) for c in cells), default=0)
    if len(name) <= max(widest, 4) or "_" not in name:
        return name
    cuts = [i for i, ch in enumerate(name) if ch == "_"]
    cut = min(cuts, key=lambda i: max(i, len(name) - i - 1))
    return name[:cut] + "\n" + name[cut + 1:]


@dataclass
class Summary:
    """The summary of a run: its columns (None when every row was skipped), the parameters every shown
    row shares (the fixed line above the table), and the folded skip lines. Renders to fit the console:
    print the Summary itself, not its table."""

    columns: Optional[list[Column]]
    fixed: list[str]
    skipped: list[SkipGroup]
    notes: list[str]
    sections: dict[int, str] = field(default_factory=dict)  # first row of each backend -> its name
    errors: dict[str, int] = field(default_factory=dict)  # each distinct error of a failed row -> its number

    def lines(self) -> list[str]:
        return [g.line() for g in self.skipped]

    def fixed_line(self) -> str:
        return "fixed: " + " ".join(self.fixed) if self.fixed else ""

    @property
    def table(self) -> Optional[Table]:
        """Every column, uncut (for a wide console or a test)."""
        return None if self.columns is None else _table(self.columns, None, self.notes, self.sections)

    def table_for(self, width: int) -> Optional[Table]:
        """The table at most `width` characters wide with no cell wrapped: columns given up lowest drop
        first, the note clipped with an ellipsis; the caption names what was left out."""
        if self.columns is None:
            return None
        cols = list(self.columns)
        while _width(_table(cols, width, [], self.sections)) > width and any(c.drop for c in cols):
            cols.remove(min((c for c in cols if c.drop), key=lambda c: c.drop))
        gone = [c.header.replace("\n", "_") for c in self.columns if not any(c is k for k in cols)]
        notes = self.notes + ([f"not shown at {width} columns: {', '.join(gone)} (see the CSV)"] if gone else [])
        return _table(cols, width, notes, self.sections)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.fixed:
            yield Text(self.fixed_line())
        t = self.table_for(options.max_width)
        if t is not None:
            yield t
        if self.errors:
            yield error_list(self.errors)


def error_list(errors: Mapping[str, int]) -> Table:
    """'E1 error' per distinct error, whole: the error wraps at the console's width under its number (a word
    longer than the line folds), never cut."""
    t = Table.grid(padding=(0, 1))
    t.add_column(no_wrap=True, style=_STYLE[st.FAILED])
    t.add_column(overflow="fold")
    for error, n in errors.items():
        t.add_row(f"{ERROR_MARK}{n}", error)
    return t


_MEASURE = Console(width=100_000, file=io.StringIO())


def _width(t: Table) -> int:
    """The width the table takes when nothing constrains it (its widest rendered line)."""
    lines = _MEASURE.render_lines(t, _MEASURE.options, pad=False)
    return max((sum(seg.cell_length for seg in line) for line in lines), default=0)


def _bare(cols: Sequence[Column]) -> Table:
    """Columns one space apart, a header underline and nothing else: the width goes to the cells."""
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=0, title="summary",
              caption_justify="left")
    for c in cols:
        t.add_column(c.header, justify=c.justify, no_wrap=True, overflow="ellipsis")  # type: ignore[arg-type]
    return t


def _table(cols: Sequence[Column], width: Optional[int], notes: Sequence[str],
           sections: Optional[dict[int, str]] = None) -> Table:
    """A table of these columns, a bold backend line above each backend's rows (`sections`); with a
    width, the note (last) is clipped to what the others leave."""
    sections = sections or {}
    t = _bare(cols)
    rows = len(cols[0].cells) if cols else 0
    if width is not None and cols and cols[-1].header == "note":
        others = _bare(cols[:-1])
        for i in range(rows):
            others.add_row(*[c.cells[i] for c in cols[:-1]])
        t.columns[-1].max_width = max(width - _width(others) - 1, _NOTE_MIN)
    for i in range(rows):
        if i in sections:
            if i:
                t.add_section()
            t.add_row(Text(sections[i] + ":", style="bold"), *[""] * (len(cols) - 1))
        t.add_row(*[c.cells[i] for c in cols])
    if notes:
        t.caption = Text("\n".join(notes), style="dim")
    return t


def fold_skipped(rows: Sequence[Mapping[str, Any]]) -> list[SkipGroup]:
    """One group per normalised reason, in order of first appearance; the first row's reason is the example."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("status") == st.SKIPPED:
            groups.setdefault(skip_reason(r.get("error")), []).append(r)
    return [SkipGroup(reason, len(g), str(g[0].get("error") or "")) for reason, g in groups.items()]


def build(rows: Sequence[Mapping[str, Any]], params: Sequence[Mapping[str, Any]]) -> Summary:
    """The summary of a run's rows. ``params``: the parameters of every case of the run (which keys are
    parameters; the columns are those that vary among the rows shown, the rest is the fixed line)."""
    shown = [r for r in rows if r["status"] != st.SKIPPED]
    skipped = fold_skipped(rows)
    if not shown:
        return Summary(None, [], skipped, [])
    backends = list(dict.fromkeys(str(r.get("backend")) for r in shown))
    shown.sort(key=lambda r: backends.index(str(r.get("backend"))))  # stable: each backend's rows in run order
    keys = list(dict.fromkeys(["backend", "impl", *(k for p in params for k in p)]))
    shape, fixed = _shape_keys(shown, keys)
    shape = [k for k in shape if k not in ("backend", "impl")]
    bandwidth = any(r.get("bytes") for r in shown)  # memory-bound workloads: GB/s and MBU first
    impl = [_impl(r) for r in shown]
    cols = [Column("impl", impl)]
    for k in shape:
        cells = [Text(_value(r.get(k))) for r in shown]
        cols.append(Column(_header(SHORT.get(k, k), cells), cells))
    metrics: list[tuple[str, Callable[[Mapping[str, Any]], str], int]] = [
        ("ms", lambda r: _num(r.get("median_s"), MS_PER_S), 0), ("spread", spread, 0)]
    flops = [("TFLOP/s", lambda r: _num(r.get("tflops_per_s")), 1 if bandwidth else 0),
             ("MFU %", lambda r: _num(r.get("mfu"), 100), 1 if bandwidth else 0)]
    if bandwidth:
        metrics += [("GB/s", lambda r: _num(r.get("gbytes_per_s")), 0), ("MBU %", lambda r: _num(r.get("mbu"), 100), 0)]
    metrics += flops + [("err", lambda r: _err(r.get("max_abs_err")), 2)]
    for header, cell, drop in metrics:
        texts = [Text(cell(r)) for r in shown]
        if any(t.plain for t in texts):
            cols.append(Column(header, texts, drop, "right"))
    suspects = marks.numbered(shown)
    errors: dict[str, int] = {}
    for r in shown:
        if r["status"] == st.FAILED and _clean(r.get("error")):
            errors.setdefault(_clean(r.get("error")), len(errors) + 1)
    note = [_note(r, n, errors) for r, n in zip(shown, suspects)]
    if any(n.plain for n in note):
        cols.append(Column("note", note))
    clock = clock_note(shown)
    notes = ([SPREAD_NOTE + (f"; {clock}" if clock else "")] if any(c.header == "spread" for c in cols) else []) + \
        ([INTERPRET_NOTE] if any(t.plain.endswith(INTERPRET_MARK) for t in impl) else [])
    if any(suspects):
        notes += [marks.INTRO] + marks.footnotes(
            shown, lambda r: " ".join([str(r.get("impl")), *(f"{k}={_value(r.get(k))}" for k in shape)]))
    sections = {} if len(backends) < 2 else {
        next(i for i, r in enumerate(shown) if str(r.get("backend")) == b): b for b in backends}
    return Summary(cols, fixed, skipped, notes, sections, errors)
