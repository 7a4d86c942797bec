"""What every chart kind is built from: colours, hatches and markers per impl and mode, the Chart result, panels, log2 axes, series and facets of result rows, and the generic line chart. Names with a leading underscore are for the chart modules of this package only."""

from __future__ import annotations

import itertools
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

from xlabench.report import chartdata as cd


# --------------------------------------------------------------------------------------------- styles


@dataclass(frozen=True)
class Style:
    colour: str
    linestyle: Any = "-"
    hatch: str = ""


# The one mapping of colours (and line styles, hatches) to impls and sharding modes, so a name looks
# the same in every chart. Impls colour lines in kernel charts; modes colour them in train charts,
# where the impl is the line style (and the bar hatch).
STYLES: dict[str, Style] = {
    "naive": Style("#555555", (0, (2, 1.5)), ""),
    "xla_sdpa": Style("#8c564b", (0, (4, 1.5, 1, 1.5)), ".."),
    "flash": Style("#1f77b4", "-", "//"),
    "splash": Style("#ff7f0e", (0, (6, 2)), "\\\\"),
    "pallas_gpu": Style("#2ca02c", (0, (1, 1)), "xx"),
    "cudnn": Style("#9467bd", (0, (3, 1, 1, 1, 1, 1)), "++"),
    "paged": Style("#d62728", "-", "//"),
    "ragged_paged": Style("#e377c2", (0, (6, 2)), "\\\\"),
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
    """The style of an impl or sharding mode; a name not in STYLES gets one fixed by its hash."""
    s = STYLES.get(str(name))
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

    def save(self, stem: Path, formats: Sequence[str]) -> list[Path]:
        stem.parent.mkdir(parents=True, exist_ok=True)
        out = []
        for fmt in formats:
            path = stem.with_name(f"{stem.name}.{fmt}")
            self.figure.savefig(path, format=fmt, dpi=150)
            out.append(path)
        return out


def _panels(n: int, ncols: int, width: float = 3.9, height: float = 3.0) -> tuple[Figure, list[Axes]]:
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    if ncols == 1:  # a lone panel (the README's main chart) gets room for its x axis
        width = max(width, 5.6)
    fig = Figure(figsize=(width * ncols + 1.8, height * nrows + 1.2), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def wrap_title(fig: Figure, title: str) -> str:
    """A title whose long lines (a compile target's topology) are wrapped to the figure's width."""
    width = int(fig.get_figwidth() * 9)  # characters of an 11 pt title per inch, about
    return "\n".join(textwrap.fill(line, width) for line in title.split("\n"))


def _finish(chart: Chart, rows: pd.DataFrame, what: str, gaps: int = 0,
            gap_reason: str = "failed, skipped or wrong") -> Chart:
    """Title, one legend for the figure, and a footnote for gaps and other notes."""
    fig = chart.figure
    fig.suptitle(wrap_title(fig, cd.title(rows, what)), fontsize=11)
    handles: dict[str, Artist] = {str(h.get_label()): h for h in chart.proxies}
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if not lab.startswith("_"):
                handles.setdefault(lab, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside right center", fontsize=9,
                   frameon=False)
    if gaps:
        chart.notes.insert(0, f"{gaps} point(s) {gap_reason}: left as gaps (see xlabench report)")
    if chart.notes:
        fig.supxlabel("\n".join(chart.notes), fontsize=8, color="#444444")
    return chart


def _log2_x(ax: Axes, xs: Sequence[float], labels: Optional[dict[float, str]] = None) -> None:
    """Powers-of-two axes (batch, sequence, context) on a log2 scale, ticked at every case's x.

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
    # Neighbours closer than ~12% on a log axis (128 and 136) or 6% of a linear one would print over each
    # other: slant them, as the long spec strings always are.
    log = ax.get_xscale() == "log"
    crowded = len(xs) > 1 and any((b / a < 1.12) if log else (b - a < 0.06 * (xs[-1] - xs[0]))
                                  for a, b in itertools.pairwise(xs))
    if labels or crowded:
        ax.set_xticklabels([(labels or {}).get(x, cd.fmt_value("", x)) for x in xs], rotation=90 if crowded else 30,
                           ha="center" if crowded else "right", fontsize=8)
    else:
        ax.set_xticklabels([cd.fmt_value("", x) for x in xs])


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
                      str(real[c])) for c in cols)

    return sorted(groups, key=rank)


def _series_label(values: dict[str, Any], first: Sequence[str], s: pd.DataFrame) -> str:
    """'fsdp · flash (interpret)': the series' values, its interpret flag, and a warning when empty."""
    lab = cd.label(list(values), list(values.values()), named=[c for c in values if c not in first])
    if cd.interpreted(s):
        lab += " (interpret)"
    if not cd.usable(s).any():
        lab += " (no usable point)"
    return lab


def _facets(rows: pd.DataFrame, keys: Sequence[str], orders: dict[str, Sequence[Any]],
            named: Sequence[str] = ()) -> list[tuple[str, pd.DataFrame]]:
    """(panel title, rows) per combination of the panel keys; `named` keys show as name=value."""
    return [(cd.label(keys, [values[k] for k in keys], named=named), p)
            for values, p in _series(rows, keys, [], orders)]


def _drop_empty(facets: list[tuple[str, pd.DataFrame]], usable: pd.Series) -> tuple[list[tuple[str, pd.DataFrame]], int]:
    """Panels with at least one usable point, and how many rows the dropped panels held (for the
    footnote): a backend whose rows were all skipped (say, no torch_xla environment) gets no empty panel."""
    kept = [(t, p) for t, p in facets if usable[p.index].any()]
    if not kept:
        return facets, 0
    return kept, sum(len(p) for t, p in facets if not usable[p.index].any())


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


def _line_chart(kind: str, rows: pd.DataFrame, *, x: str, y: pd.Series, panel_keys: Sequence[str],
                named_panels: Sequence[str] = (),
                first: Sequence[str], colour_by: str, dash_by: Optional[str], ncols: int,
                xlabel: str, ylabel: str, what: str, x_values: Optional[pd.Series] = None,
                util: Optional[tuple[str, str, str]] = None, hline: Optional[tuple[float, str, str]] = None,
                x_labels: Optional[dict[float, str]] = None, gap_reason: str = "failed, skipped or wrong") -> Chart:
    """The shared shape of the line charts: facets, one line per series, NaN gaps, markers, styles.

    x_values overrides the plotted x (paged specs placed by their mean length); y holds the figure
    per row with NaN where the row is not usable.
    """
    orders = {"impl": cd.impl_order(rows["impl"]), "sharding": cd.sort_order(rows["sharding"], cd.SHARDING_ORDER),
              "mode": cd.sort_order(rows["mode"], cd.MODE_ORDER), "causal": [True, False]}
    xs_all = pd.to_numeric(x_values if x_values is not None else rows[x], errors="coerce")
    extras = cd.split_keys(rows, x, list(panel_keys) + list(first))
    facets, gaps = _drop_empty(_facets(rows, panel_keys, orders, named_panels), y.notna())
    fig, axes = _panels(len(facets), ncols)
    chart = Chart(kind, fig)
    for ax, (ptitle, p) in zip(axes, facets):
        for i, (values, s) in enumerate(_series(p, first, extras, orders)):
            s = s.assign(_x=xs_all[s.index]).sort_values("_x")
            ys = y[s.index].to_numpy(dtype=float)
            gaps += int(np.isnan(ys).sum())
            lab = _series_label(values, first, s)
            marker = MARKERS[i % len(MARKERS)] if extras else "o"
            (line,) = ax.plot(s["_x"].to_numpy(dtype=float), ys, label=lab, marker=marker, markersize=5,
                              linewidth=1.6, color=style(values[colour_by]).colour,
                              linestyle=style(values[dash_by]).linestyle if dash_by else "-")
            chart.artists[(ptitle, lab)] = line
        _log2_x(ax, xs_all[p.index], x_labels)
        ax.set_ylim(bottom=0)
        if hline:
            ax.axhline(hline[0], color=style(hline[1]).colour, linewidth=1, linestyle=":", label=hline[2])
        if util:
            _utilisation_axis(ax, p, *util)
        ax.set_title(ptitle, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    return _finish(chart, rows, what, gaps, gap_reason)
