"""The text table of a breakdown, at most 80 columns wide: one line per category (time per step, share of
the step, achieved rate against its roof), its top ops by time beneath it, then idle and the notes."""

from __future__ import annotations

import textwrap

from xlabench.explain.breakdown import Breakdown, Category
from xlabench.units import GIGA, TERA, to_ms

WIDTH = 80


def _rate(c: Category) -> str:
    if c.roof == "FLOP/s":
        return f"{c.flops_per_s / TERA:.3g} TFLOP/s" if c.flops_per_s else "-"
    if c.bytes_per_s:
        return f"{c.bytes_per_s / GIGA:.3g} GB/s"
    return "-"


def _ms(s: float) -> str:
    ms = to_ms(s)
    return f"{ms:.3f}" if ms >= 0.001 or ms == 0 else "<0.001"


def _fit(text: str) -> str:
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


def text(b: Breakdown, label: str) -> str:
    """The breakdown as lines of at most WIDTH characters, under its case's ``label`` (wrapped, whole:
    runfile.Explained.labels names each row by what tells it apart from the others)."""
    est = "estimated " if b.estimate else ""
    lines = [*textwrap.wrap(f"case {b.case_id}: {label}", WIDTH, subsequent_indent="  ", break_long_words=False,
                            break_on_hyphens=False),
             *textwrap.wrap(("ESTIMATE, not measured: " if b.estimate else "") + f"source: {b.source}", WIDTH),
             _fit(f"{est}device time {_ms(b.step_s)} ms per step; categories sum to {_ms(b.sum_s)} ms "
                  f"({b.coverage:.1%})")]
    unit, rate = ("est ms", "est. rate") if b.estimate else ("ms", "achieved")
    lines.append(f"{'category':<36} {unit + '/step':>11} {'share':>6} {rate:>14} {'of roof':>9}")
    for c in b.categories:
        if not c.seconds and not c.top:
            continue
        roof = f"{c.roof_frac:.1%}" if c.roof_frac is not None else "-"
        lines.append(f"{c.label[:36]:<36} {_ms(c.seconds):>11} {c.share:>6.1%} {_rate(c):>14} {roof:>9}")
        for t in c.top:
            lines.append(_fit(f"    {_ms(t.seconds):>9} ms  {t.calls:g}x  {t.name}"))
    idle = b.idle_s
    if idle is not None and b.wall_s:
        lines.append(f"{'idle (wall time less device time)':<36} {_ms(idle):>11} {idle / b.wall_s:>6.1%}  of the "
                     f"wall {_ms(b.wall_s)} ms")
    elif b.estimate:
        lines.append("idle: not estimated (no trace)")
    else:
        lines.append("idle: the row has no wall time per step")
    for note in b.notes:
        lines += textwrap.wrap(note, WIDTH, initial_indent="note: ", subsequent_indent="      ")
    return "\n".join(lines)

