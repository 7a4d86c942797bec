"""The line charts' shared shape: facets, a line per series told apart by colour, line style and marker,
the p10-p90 spread as a band, a log2 y axis for ratios, and a legend that is a key per encoding (not an
entry per combination of keys), so 18 series per panel still read with a dozen legend entries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from xlabench.report import chartdata as cd
from xlabench.report.chart_parts import (
    MARKERS, Chart, _drop_empty, _facets, unusable_note, _finish, _log2_x, _panels, _series, _series_label, _utilisation_axis, style,
)


DASHES: tuple[Any, ...] = ("-", (0, (5, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2)))
SPREAD_LABEL = "p10-p90 of the iterations"


@dataclass
class Encoding:
    """How a line chart tells series apart: colour by one key, line style by another (its own style table,
    or in order of the values), marker by a third; keys left over are named in the series' label."""

    colour_by: str
    dash_by: Optional[str]
    marker_by: Optional[str]
    named: list[str]
    values: dict[str, list[Any]]  # the values of the dash and marker keys, in series order
    dash_levels: list[Any] = field(default_factory=list)  # the dash key's values, in series order
    colour_levels: list[Any] = field(default_factory=list)  # the colour key's (its own marker when no dash key)
    hollow_by: Optional[str] = None  # a key whose values after the first draw hollow markers (a lone point's dash)

    def face(self, values: dict[str, Any], colour: Any) -> Any:
        """The marker's fill: hollow (white) for the hollow key's values after the first."""
        if self.hollow_by is None or self.hollow_by not in values:
            return colour
        return colour if cd.position(self.dash_levels, values[self.hollow_by]) == 0 else "white"

    def dash(self, values: dict[str, Any]) -> Any:
        if self.dash_by is None:
            return style(values[self.colour_by]).linestyle
        if self.dash_by in self.values:
            return DASHES[cd.position(self.values[self.dash_by], values[self.dash_by]) % len(DASHES)]
        return style(values[self.dash_by]).linestyle

    def marker(self, values: dict[str, Any]) -> str:
        """The marker key's, else the dash key's (a lone point draws no line: its marker tells it apart)."""
        if self.marker_by is not None:
            return MARKERS[cd.position(self.values[self.marker_by], values[self.marker_by]) % len(MARKERS)]
        if self.dash_by is not None and self.dash_by in values and self.dash_levels:
            return MARKERS[cd.position(self.dash_levels, values[self.dash_by]) % len(MARKERS)]
        if self.dash_by is None and self.colour_by in values and len(self.colour_levels) > 1:
            return MARKERS[cd.position(self.colour_levels, values[self.colour_by]) % len(MARKERS)]
        return "o"


def _encoding(series: list[tuple[dict[str, Any], pd.DataFrame]], colour_by: str, dash_by: Optional[str],
              extras: Sequence[str]) -> Encoding:
    """Line style for the first split key when the colour key has its own dash (a kernel chart), marker
    for the next; the rest named in labels."""
    free = list(extras)
    dash = dash_by if dash_by and dash_by != colour_by else (free.pop(0) if free else None)
    marker = free.pop(0) if free else None
    values = {k: cd.levels(v[k] for v, _ in series) for k in (dash, marker) if k is not None and k in extras}
    dash_levels = cd.levels(v[dash] for v, _ in series) if dash is not None else []
    if dash is not None and dash not in values and len({style(v).linestyle for v in dash_levels}) < len(dash_levels):
        values[dash] = dash_levels  # values with no line style of their own (frameworks): a dash each, in order
    return Encoding(colour_by, dash, marker, free, values, dash_levels, cd.levels(v[colour_by] for v, _ in series))


def _key(enc: Encoding, series: list[tuple[dict[str, Any], pd.DataFrame]], band: bool) -> list[Artist]:
    """The legend as a key: a colour per value of the colour key, a line style and a marker per value of
    the others (grey), and the band; every series is a combination of them."""
    out: list[Artist] = []

    def entry(column: str, value: Any, named: bool = False) -> str:
        rows = pd.concat([s for v, s in series if str(v[column]) == str(value)])  # NaN == NaN as text
        lab = cd.label([column], [value], named=[column] if named else [])
        if column == "impl" and cd.interpreted(rows):  # the kernel is what runs interpreted
            lab += " (interpret)"
        return lab

    def drawn(column: str, value: Any) -> bool:  # a value with no usable point is named in the footer
        rows = pd.concat([s for v, s in series if str(v[column]) == str(value)])
        return bool((cd.usable(rows) | (rows["status"] == "compiled")).any())

    for value in cd.levels(v[enc.colour_by] for v, _ in series):
        dash = style(value).linestyle if enc.dash_by is None else "-"
        if drawn(enc.colour_by, value):
            own = enc.marker({enc.colour_by: value}) if enc.dash_by is None and not enc.marker_by else None
            out.append(Line2D([], [], color=style(value).colour, linestyle=dash, linewidth=2, marker=own,
                              markersize=5, label=entry(enc.colour_by, value)))
    if enc.dash_by and enc.dash_by != enc.colour_by:
        for value in cd.levels(v[enc.dash_by] for v, _ in series):
            if drawn(enc.dash_by, value):
                hollow = enc.hollow_by == enc.dash_by
                marker = "o" if hollow else None if enc.marker_by else enc.marker({enc.dash_by: value})
                out.append(Line2D([], [], color="#555555", linestyle=enc.dash({enc.dash_by: value}),
                                  marker=marker, markersize=5, linewidth=1.6,
                                  markerfacecolor=enc.face({enc.dash_by: value}, "#555555") if hollow else None,
                                  label=entry(enc.dash_by, value, named=enc.dash_by in enc.values)))
    if enc.marker_by:
        for value in enc.values[enc.marker_by]:
            out.append(Line2D([], [], color="#555555", linestyle="none", marker=enc.marker({enc.marker_by: value}),
                              label=cd.label([enc.marker_by], [value], named=[enc.marker_by])))
    if band:
        out.append(Patch(facecolor="#555555", alpha=0.13, label=SPREAD_LABEL))
    return out


def spread_band(rows: pd.DataFrame, y: pd.Series) -> tuple[pd.Series, pd.Series]:
    """(low, high) of a figure inversely proportional to the time (a rate, a speedup): the figure at the
    p90 and at the p10 time, y * median / p90 and y * median / p10; NaN where the quantiles are missing."""
    med = rows["median_s"]
    return (y * med / rows["p90_s"],
            y * med / rows["p10_s"])


def _draw_band(ax: Axes, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, colour: str) -> Optional[Artist]:
    """The p10-p90 spread: a band along runs of two or more points, an error bar on a lone point."""
    ok = np.isfinite(lo) & np.isfinite(hi)
    if not ok.any():
        return None
    art = ax.fill_between(x, lo, hi, where=ok, color=colour, alpha=0.13, linewidth=0, interpolate=False)
    alone = ok & ~(np.r_[False, ok[:-1]] | np.r_[ok[1:], False])
    if alone.any():
        mid = (lo[alone] + hi[alone]) / 2
        ax.errorbar(x[alone], mid, yerr=[mid - lo[alone], hi[alone] - mid], fmt="none", ecolor=colour,
                    elinewidth=1, capsize=3, alpha=0.7)
    return art


def _log_y(ax: Axes, ys: Sequence[float], keep: float) -> None:
    """A log2 y axis whose limits hold every point and the reference value `keep` (the 1x line)."""
    ys = [float(v) for v in ys if np.isfinite(v) and v > 0] + [keep]
    ax.set_yscale("log", base=2)
    ax.set_ylim(min(ys) / 1.3, max(ys) * 1.3)
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:g}×" if v >= 1 else f"1/{1 / v:g}×")  # a FuncFormatter


def _panel_axes(ax: Axes, p: pd.DataFrame, shown: Sequence[float], log_y: bool,
                hline: Optional[tuple[float, str, str]], util: Optional[tuple[str, str, str]]) -> None:
    """A line panel's y limits (log2, or from 0 with room above the highest point), its reference line
    (``hline``: value, style key, label) and its utilisation axis (``util``)."""
    if log_y and hline:
        _log_y(ax, shown, hline[0])
    else:  # room above the highest point (a marker at the frame's edge is cut in half)
        top = max([v for v in shown if np.isfinite(v)] + ([hline[0]] if hline else []), default=0.0)
        ax.set_ylim(bottom=0, top=top * 1.08 if top > 0 else None)
    if hline:
        ref = ax.axhline(hline[0], color=style(hline[1]).colour, linewidth=1.2, linestyle=":", label=hline[2])
        ref._xlabench_reference = True  # type: ignore[attr-defined]  # in the legend beside the key
    if util:
        _utilisation_axis(ax, p, *util)


def _line_chart(kind: str, rows: pd.DataFrame, *, x: str, y: pd.Series, panel_keys: Sequence[str],
                named_panels: Sequence[str] = (),
                first: Sequence[str], colour_by: str, dash_by: Optional[str], ncols: int,
                xlabel: str, ylabel: str, what: str, x_values: Optional[pd.Series] = None,
                util: Optional[tuple[str, str, str]] = None, hline: Optional[tuple[float, str, str]] = None,
                x_labels: Optional[dict[float, str]] = None, gap_reason: str = "failed, skipped or wrong",
                spread: bool = True, log_y: bool = False, hollow_by: Optional[str] = None) -> Chart:
    """The shared shape of the line charts: facets, one line per series, NaN gaps, markers, styles, the
    p10-p90 spread as a band (y must then be a rate: inversely proportional to the time), a key legend.

    x_values overrides the plotted x (paged specs placed by their mean length); y holds the figure
    per row with NaN where the row is not usable.
    """
    orders = {"impl": cd.impl_order(rows["impl"]), "sharding": cd.sort_order(rows["sharding"], cd.SHARDING_ORDER),
              "mode": cd.sort_order(rows["mode"], cd.MODE_ORDER), "causal": [True, False]}
    xs_all = pd.to_numeric(x_values if x_values is not None else rows[x], errors="coerce")
    extras = cd.split_keys(rows, x, list(panel_keys) + list(first))
    facets, dropped = _drop_empty(_facets(rows, panel_keys, orders, named_panels), y.notna())
    fig, axes = _panels(len(facets), ncols)
    chart = Chart(kind, fig)
    gaps = 0
    empty: dict[str, list[tuple[str, pd.DataFrame]]] = {}  # colour value: its series with no usable point
    enc = _encoding(_series(rows, first, extras, orders), colour_by, dash_by, extras)
    enc.hollow_by = hollow_by if hollow_by == enc.dash_by else None
    lo_all, hi_all = spread_band(rows, y) if spread else (y * np.nan, y * np.nan)
    banded = False
    for ax, (ptitle, p) in zip(axes, facets):
        shown: list[float] = []
        for values, s in _series(p, first, extras, orders):
            s = s.assign(_x=xs_all[s.index]).sort_values("_x")
            ys = y[s.index].to_numpy(dtype=float)
            xv = s["_x"].to_numpy(dtype=float)
            lab = _series_label(values, first, s)
            if np.isnan(ys).all():  # nothing to draw: named in the footer, not in the legend or the gaps
                empty.setdefault(str(values[colour_by]), []).append((lab, s))
                continue
            gaps += int(np.isnan(ys).sum())
            colour = style(values[colour_by]).colour
            (line,) = ax.plot(xv, ys, label=lab, marker=enc.marker(values), markersize=5, linewidth=1.6,
                              color=colour, linestyle=enc.dash(values), markerfacecolor=enc.face(values, colour))
            chart.artists[(ptitle, lab)] = line
            lo, hi = lo_all[s.index].to_numpy(dtype=float), hi_all[s.index].to_numpy(dtype=float)
            banded |= _draw_band(ax, xv, lo, hi, colour) is not None
            shown += [*ys, *lo, *hi]
        _log2_x(ax, xs_all[p.index], x_labels)
        _panel_axes(ax, p, shown, log_y, hline, util)
        ax.set_title(ptitle, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    drawn_values = {str(v[colour_by]) for v, s in _series(rows, first, extras, orders) if y[s.index].notna().any()}
    for value, parts in empty.items():  # one note per colour: 'auto', 'flash (8 of its series)'
        name = value if value not in drawn_values else f"{value} ({len(parts)} of its series)"
        chart.notes.append(unusable_note(name, pd.concat([s for _, s in parts])))
    chart.notes += dropped
    if extras or enc.dash_by not in (None, colour_by):  # several keys: a legend per key, not per combination
        chart.key = _key(enc, _series(rows, first, extras, orders), banded)
    elif banded:
        chart.proxies.append(Patch(facecolor="#555555", alpha=0.13, label=SPREAD_LABEL))
    return _finish(chart, rows, what, gaps, gap_reason)
