"""What every chart kind is built from: colours, hatches and markers per impl and mode, the Chart result, panels that fill their grid, two-line titles, the footer, the legend, log2 axes with level tick labels, series and facets of result rows. Names with a leading underscore are for the chart modules of this package only."""

from __future__ import annotations

import textwrap

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from xlabench.audit import marks
from xlabench.impls import kernels
from xlabench.impls.kernel import Style
from xlabench.report import chartdata as cd
from xlabench.results.display import clock_note


# --------------------------------------------------------------------------------------------- styles


# A name looks the same in every chart: an impl as its kernel record's ``style`` says (impls/kernels/,
# collected in kernels.STYLES), a sharding mode as MODE_STYLES says. Impls colour lines in kernel charts;
# modes colour them in train charts, where the impl is the line style (and the bar hatch).
MODE_STYLES: dict[str, Style] = {
    "dp": Style("#2ca02c"),
    "fsdp": Style("#1f77b4"),
    "tp": Style("#ff7f0e"),
    "2d": Style("#9467bd"),
    "auto": Style("#7f7f7f"),
}
_SPARE_COLOURS = ("#17becf", "#bcbd22", "#8c6d31", "#393b79", "#ad494a", "#637939", "#7b4173")
_SPARE_LINES: tuple[Any, ...] = ("-", (0, (5, 2)), (0, (1, 1)), (0, (4, 1, 1, 1)))
_SPARE_HATCHES = ("//", "\\\\", "..", "xx", "--")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def style(name: Any) -> Style:
    """The style of an impl (its kernel record's) or sharding mode; any other name gets one fixed by its hash."""
    s = kernels.STYLES.get(str(name)) or MODE_STYLES.get(str(name))
    if s is not None:
        return s
    h = int(hashlib.sha1(str(name).encode()).hexdigest(), 16)
    return Style(_SPARE_COLOURS[h % len(_SPARE_COLOURS)], _SPARE_LINES[h % len(_SPARE_LINES)],
                 _SPARE_HATCHES[h % len(_SPARE_HATCHES)])


# ---------------------------------------------------------------------------------------------- chart


class NoData(ValueError):
    """The rows hold nothing this chart kind can draw (the message says what is missing)."""


@dataclass
class Chart:
    kind: str
    figure: Figure
    # (panel title, series label) -> the Line2D or BarContainer drawn for it
    artists: dict[tuple[str, str], Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    proxies: list[Artist] = field(default_factory=list)  # legend entries not drawn in any panel
    # A legend of its own (a key per encoding: colours, line styles, markers) instead of one entry per
    # drawn series; the proxies and the reference lines follow it.
    key: list[Artist] = field(default_factory=list)

    def save(self, stem: Path, formats: Sequence[str]) -> list[Path]:
        stem.parent.mkdir(parents=True, exist_ok=True)
        out = []
        for fmt in formats:
            path = stem.with_name(f"{stem.name}.{fmt}")
            self.figure.savefig(path, format=fmt, dpi=150)
            if _stagger_ticks(self.figure, laid_out=True):  # the first look was wrong: rare, saved again
                self.figure.savefig(path, format=fmt, dpi=150)
            out.append(path)
        return out


def grid(n: int, ncols: int) -> tuple[int, int]:
    """(rows, columns) for n panels: `ncols` wide when that fills every slot, else the nearest width
    (one more or fewer) that does; else `ncols`, the last slots left to the legend."""
    if n <= ncols:
        return 1, max(n, 1)
    for c in (ncols, ncols + 1, ncols - 1):
        if c >= 2 and n % c == 0:
            return n // c, c
    return -(-n // ncols), ncols


def _panels(n: int, ncols: int, width: float = 3.9, height: float = 3.0) -> tuple[Figure, list[Axes]]:
    nrows, ncols = grid(n, ncols)
    if ncols == 1:  # a lone panel (the README's main chart) gets room for its x axis
        width = max(width, 5.6)
    fig = Figure(figsize=(width * ncols + 0.8, height * nrows + 1.6), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_axis_off()
    fig._xlabench_spare = axes[n:]  # type: ignore[attr-defined]  # _finish gives them the legend
    return fig, axes[:n]


def wrap_title(fig: Figure, title: str, lines: int = 2) -> str:
    """A title of at most `lines` lines, each wrapped to the figure's width (and cut with … beyond)."""
    width = int(fig.get_figwidth() * 11)  # characters of an 11 pt title per inch, about
    out = [w for line in title.split("\n") for w in textwrap.wrap(line, width)]
    if len(out) > lines:
        out = out[:lines - 1] + [textwrap.shorten(" ".join(out[lines - 1:]), width, placeholder=" …")]
    return "\n".join(out)


def _footer(fig: Figure, text: str) -> str:
    width = int(fig.get_figwidth() * 16)  # characters of an 8 pt footer per inch, about
    return "\n".join(w for line in text.split("\n") for w in textwrap.wrap(line, width))


def add_note(chart: Chart, text: str) -> None:
    """A note drawn after _finish: first line of the footer, above what was there."""
    chart.notes.append(text)
    fig = chart.figure
    old = fig._supxlabel.get_text() if fig._supxlabel is not None else ""
    fig.supxlabel(_footer(fig, "\n".join(filter(None, [text, old]))), fontsize=8, color="#444444")


def _finish(chart: Chart, rows: pd.DataFrame, what: str, gaps: int = 0,
            gap_reason: str = "failed, skipped or wrong", title: Optional[str] = None) -> Chart:
    """A title of two lines at most, one legend for the figure (in an empty grid slot, else on the right,
    outside the panels), a footer with the gaps, other notes and the versions, and x tick labels that
    do not collide."""
    fig = chart.figure
    fig.suptitle(wrap_title(fig, title or cd.title(rows, what)), fontsize=11)
    handles: dict[str, Artist] = {str(h.get_label()): h for h in chart.key}
    handles.update({str(h.get_label()): h for h in chart.proxies})
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if not lab.startswith("_") and (not chart.key or getattr(h, "_xlabench_reference", False)):
                handles.setdefault(lab, h)
    spare = getattr(fig, "_xlabench_spare", [])
    if handles and spare:
        spare[0].legend(list(handles.values()), list(handles), loc="center", fontsize=9, frameon=False)
    elif handles:
        fig.legend(list(handles.values()), list(handles), loc="outside right center", fontsize=9, frameon=False)
    if gaps:
        chart.notes.insert(0, f"{gaps} point(s) {gap_reason}: left as gaps (see xlabench report)")
    chart.notes += suspect_notes(rows)
    versions = cd.versions(rows)
    clock = clock_note(rows.to_dict("records"))
    footer = chart.notes + ([clock] if clock else []) + ([versions] if versions else [])
    if footer:
        fig.supxlabel(_footer(fig, "\n".join(footer)), fontsize=8, color="#444444")
    _stagger_ticks(fig)
    return chart


def suspect_notes(rows: pd.DataFrame) -> list[str]:
    """The footer's line for the chart's suspect rows (drawn as measured): how many points break which
    invariant, and where the reasons are; a chart has no room for every row's (the quick start's CPU run,
    against a peak measured under load, had 8 rows of 4-line reasons covering the plot)."""
    records = rows.to_dict("records")
    n = sum(bool(marks.suspect(r)) for r in records)
    if "suspect" not in rows or not n:
        return []
    rules = ", ".join(f"{rule} x{k}" for rule, k in marks.rule_counts(records).items())
    return [f"{n} of {len(records)} point(s) suspect ({rules}): their numbers are drawn as measured; "
            "`xlabench audit` and `xlabench report` give the reasons (docs/audit.md)"]


# Measuring x tick labels takes a draw of the whole laid-out figure, a third of a chart's time. A first look,
# before the layout, skips it where no two neighbours could touch: labels LABEL_EM wide per character (DejaVu
# Sans digits are 0.64 em) on a panel narrowed to LAYOUT_NARROWS_TO of its width before the layout (the
# constrained layout's labels, twin axes and outside legend left 0.465 at the least in the charts the tests
# draw). A saved chart is measured on its own layout all the same (Chart.save).
LAYOUT_NARROWS_TO = 0.35
LABEL_EM = 0.75
_LABEL_PAD_PX = 3


def _labelled_ticks(ax: Axes) -> list[Any]:
    return sorted((t for t in ax.xaxis.get_major_ticks() if t.label1.get_visible() and t.label1.get_text()),
                  key=lambda t: t.get_loc())


def _may_touch(fig: Figure) -> bool:
    """Whether any two neighbouring x tick labels could touch once the figure is laid out (the first look)."""
    px_per_pt = fig.dpi / 72
    for ax in fig.axes:
        if not ax.axison:
            continue
        ax.xaxis.get_majorticklabels()  # the labels' texts, as a draw sets them
        ticks = _labelled_ticks(ax)
        width = ax.get_position().width * fig.get_figwidth() * fig.dpi * LAYOUT_NARROWS_TO
        to_panel = ax.transScale + ax.transLimits  # data -> panel fraction, before any layout
        xs = [float(to_panel.transform((t.get_loc(), 0.0))[0]) * width for t in ticks]
        half = [len(t.label1.get_text()) * t.label1.get_size() * px_per_pt * LABEL_EM / 2 + _LABEL_PAD_PX
                for t in ticks]
        if any(xs[k + 1] - xs[k] < half[k] + half[k + 1] for k in range(len(ticks) - 1)):
            return True
    return False


def _stagger_ticks(fig: Figure, laid_out: bool = False) -> bool:
    """x tick labels that would touch their neighbour (128 and 136 on one log axis) drop one line lower
    (or two); one that would touch on every line is left out (its tick stays). Measured on the laid-out
    figure: drawn here when the first look says two may touch, or ``laid_out`` (just saved) when it said
    none could. Returns whether any label moved or was left out."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if laid_out:
        if getattr(fig, "_xlabench_ticks_measured", False):
            return False
    elif not _may_touch(fig):
        return False
    fig._xlabench_ticks_measured = True  # type: ignore[attr-defined]
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    if not laid_out:
        fig.draw_without_rendering()
    renderer = canvas.get_renderer()
    moved = False
    for ax in fig.axes:
        if not ax.axison:
            continue
        last: dict[int, Any] = {}
        for tick in _labelled_ticks(ax):
            box = tick.label1.get_window_extent(renderer).padded(_LABEL_PAD_PX)
            for level in (0, 1, 2):
                prev = last.get(level)
                if prev is None or prev.x1 <= box.x0:
                    if level:
                        tick.set_pad(tick.get_pad() + level * tick.label1.get_size() * 1.25)
                        moved = True
                    last[level] = box
                    break
            else:
                tick.label1.set_visible(False)
                moved = True
    return moved


def _log2_x(ax: Axes, xs: Sequence[float], labels: Optional[dict[float, str]] = None) -> None:
    """Powers-of-two axes (batch, sequence, context) on a log2 scale, ticked at every case's x, labels
    level (neighbours that would touch are staggered by _finish).

    The limits cover failed and skipped cases too, so their gaps show as gaps at the ends.
    """
    xs = sorted({float(x) for x in xs if np.isfinite(x)})
    if not xs:
        return
    if xs[0] > 0 and xs[-1] / xs[0] >= 4:
        ax.set_xscale("log", base=2)
        ax.set_xlim(xs[0] / 1.25, xs[-1] * 1.25)
    elif len(xs) > 1:
        pad = (xs[-1] - xs[0]) * 0.08
        ax.set_xlim(xs[0] - pad, xs[-1] + pad)
    ax.xaxis.set_major_locator(FixedLocator(xs))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([(labels or {}).get(x, cd.fmt_value("", x)) for x in xs], fontsize=8 if labels else None)


def _utilisation_axis(ax: Axes, rows: pd.DataFrame, rate: str, util: str, name: str) -> None:
    """A right-hand % axis (MFU or MBU) when one factor turns the rate into it for every usable row.

    The factor (1 / (devices x peak)) comes from the rows themselves, so the axis shows exactly what
    the CSV says; with several peaks in one panel there is no single factor and no axis.
    """
    ratio = (cd.metric(rows, util) / cd.metric(rows, rate)).dropna()
    ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
    if ratio.empty or (ratio.max() - ratio.min()) > 1e-6 * ratio.max():
        return
    f = float(ratio.median()) * 100
    sec = ax.secondary_yaxis("right", functions=(lambda v: v * f, lambda v: v / f))
    sec.set_ylabel(f"{name} (%)")


def _series(rows: pd.DataFrame, first: Sequence[str], extras: Sequence[str],
            orders: dict[str, Sequence[Any]]) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """Rows split into series by `first` + `extras` columns, in canonical order of the `first` ones."""
    cols = list(first) + list(extras)
    groups = []
    for vals, s in rows.groupby([cd.text(rows[c]) for c in cols], sort=False):
        real = {c: s[c].iloc[0] for c in cols}
        groups.append((real, s))

    def rank(item: tuple[dict[str, Any], pd.DataFrame]) -> tuple:
        real = item[0]
        return tuple((list(orders.get(c, [])).index(real[c]) if real[c] in orders.get(c, []) else 99,
                      *_natural(real[c])) for c in cols)

    return sorted(groups, key=rank)


def _natural(value: Any) -> tuple[int, float, str]:
    """A sort key that puts numbers in numeric order (1, 4, 16, not 1, 16, 4), before text."""
    try:
        return 0, float(value), ""
    except (TypeError, ValueError):
        return 1, 0.0, str(value)


def _series_label(values: dict[str, Any], first: Sequence[str], s: pd.DataFrame) -> str:
    """'fsdp · flash (interpret)': the series' values, its interpret flag, and a warning when empty."""
    lab = cd.label(list(values), list(values.values()), named=[c for c in values if c not in first])
    if cd.interpreted(s):
        lab += " (interpret)"
    if not (cd.usable(s) | (s["status"] == "compiled")).any():  # compile rows: compiled is usable
        lab += " (no usable point)"
    return lab


def _facets(rows: pd.DataFrame, keys: Sequence[str], orders: dict[str, Sequence[Any]],
            named: Sequence[str] = ()) -> list[tuple[str, pd.DataFrame]]:
    """(panel title, rows) per combination of the panel keys; `named` keys show as name=value."""
    return [(cd.label(keys, [values[k] for k in keys], named=named), p)
            for values, p in _series(rows, keys, [], orders)]


def _drop_empty(facets: list[tuple[str, pd.DataFrame]], usable: pd.Series) -> tuple[list[tuple[str, pd.DataFrame]], list[str]]:
    """Panels with at least one usable point, and a footer note per dropped panel: a backend whose rows
    were all skipped (say, no torch_xla environment) gets no empty panel, and its rows are no gap of
    the panels drawn."""
    kept = [(t, p) for t, p in facets if usable[p.index].any()]
    if not kept:
        return facets, []
    def name(title: str) -> str:  # skipped rows planned by the parent have no device kind: no '-' part
        return " · ".join(w for w in title.split(" · ") if w not in ("-", "nan")) or "the rest"

    return kept, [f"not drawn: {name(t)}, none of its {len(p)} row(s) usable ({_statuses(p)})"
                  for t, p in facets if not usable[p.index].any()]


def _statuses(rows: pd.DataFrame) -> str:
    """'18 skipped', '2 failed, 1 ok': the rows' statuses, most first."""
    return ", ".join(f"{n} {s}" for s, n in rows["status"].astype(str).value_counts().items())


def unusable_note(name: str, rows: pd.DataFrame) -> str:
    """'auto: no usable point (6 skipped: JAX has no public ...)': a series drawn as nothing, named in the
    footer rather than in the legend."""
    errors = [e for e in rows["error"] if isinstance(e, str) and e] if "error" in rows else []
    why = f": {textwrap.shorten(errors[0], 80, placeholder=' …')}" if errors else ""
    return f"{name}: no usable point ({_statuses(rows)}{why})"


def peak_note(rows: pd.DataFrame) -> Optional[str]:
    """'MFU against 0.0295 TFLOP/s per device (cpu: measured on this host: float32 matmul ...)': the peak
    each device kind's MFU is a fraction of, and where it comes from."""
    ok = rows[cd.usable(rows)]
    if "peak_tflops" not in ok or ok.empty:
        return None
    parts = []
    for kind, g in ok.groupby(cd.text(ok["device_kind"]), sort=False):
        peak = g["peak_tflops"].median()
        source = str(g["peak_source"].iloc[0]) if "peak_source" in g and pd.notna(g["peak_source"].iloc[0]) else ""
        if pd.notna(peak):
            parts.append(f"{peak:.3g} TFLOP/s per {kind} device"
                         + (f" ({textwrap.shorten(source, 90, placeholder=' …')})" if source else ""))
    return "MFU against " + "; ".join(parts) if parts else None


def _rows(df: pd.DataFrame, workload: str, need: Sequence[str]) -> pd.DataFrame:
    """The rows of a workload, or NoData when there are none or a column the chart needs is empty."""
    rows = df[df["workload"] == workload].reset_index(drop=True)  # unique index: y series align by it
    rows = cd.run_rows(rows).reset_index(drop=True)  # compile rows have no timings: never MFU or step time
    if rows.empty:
        raise NoData(f"no {workload} rows")
    for c in need:
        if pd.to_numeric(rows[c], errors="coerce").isna().all():
            raise NoData(f"{workload} rows have no {c} values")
    return rows
