"""Chart kinds drawn from result rows: MFU vs global batch, MFU per sharding mode, attention kernels,
paged decode bandwidth.

Each chart is a plain function of a DataFrame (chartdata.load) returning a Chart: the matplotlib
Figure plus the artists it drew, keyed by (panel, series), so tests can check the data drawn.
Figures are made with the object API (no pyplot, no global state): saving renders through Agg.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.patches import Patch
from matplotlib.transforms import Bbox
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


def _finish(chart: Chart, rows: pd.DataFrame, what: str, gaps: int = 0,
            gap_reason: str = "failed, skipped or wrong") -> Chart:
    """Title, one legend for the figure, and a footnote for gaps and other notes."""
    fig = chart.figure
    fig.suptitle(cd.title(rows, what), fontsize=11)
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
    if labels:  # spec strings are long: slant them so neighbours do not overlap
        ax.set_xticklabels([labels.get(x, cd.fmt_value("", x)) for x in xs], rotation=30, ha="right",
                           fontsize=8)
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


# ----------------------------------------------------------------------------------------- chart kinds


def mfu_vs_batch(df: pd.DataFrame) -> Chart:
    """Train rows: MFU (%) vs global batch, a line per sharding mode (colour) and attention impl (dash)."""
    rows = _rows(df, "train", ["global_batch", "mfu"])
    return _line_chart("mfu_batch", rows, x="global_batch", y=cd.metric(rows, "mfu", 100),
                       panel_keys=["backend", "device_kind", "model"], first=["sharding", "impl"],
                       colour_by="sharding", dash_by="impl", ncols=2, xlabel="global batch (sequences)",
                       ylabel="MFU (%)", what="MFU vs global batch")


def attention_tflops(df: pd.DataFrame) -> Chart:
    """Attention rows: TFLOP/s vs sequence length per impl, MFU on the right axis, by mode and causal."""
    rows = _rows(df, "attention", ["seq_len", "tflops_per_s"])
    return _line_chart("attention", rows, x="seq_len", y=cd.metric(rows, "tflops_per_s"),
                       panel_keys=["causal", "mode"], first=["impl"], colour_by="impl", dash_by="impl",
                       ncols=len(cd.distinct(rows["mode"])) or 1, xlabel="sequence length",
                       ylabel="TFLOP/s", what="Attention TFLOP/s vs sequence length",
                       util=("tflops_per_s", "mfu", "MFU"))


def attention_speedup(df: pd.DataFrame) -> Chart:
    """Attention rows: speedup of every impl over naive for the same shape, by mode and causal."""
    rows = _rows(df, "attention", ["seq_len", "median_s"])
    speed = cd.speedup_over_baseline(rows)
    others = rows[rows["impl"] != cd.BASELINE_IMPL]
    if speed.dropna().empty or others.empty:
        raise NoData(f"no attention shape has both a usable {cd.BASELINE_IMPL} row and another impl")
    return _line_chart("speedup", others, x="seq_len", y=speed, panel_keys=["causal", "mode"], first=["impl"],
                       colour_by="impl", dash_by="impl", ncols=len(cd.distinct(rows["mode"])) or 1,
                       xlabel="sequence length", ylabel=f"speedup over {cd.BASELINE_IMPL} (x)",
                       what=f"Attention speedup over {cd.BASELINE_IMPL}",
                       hline=(1.0, cd.BASELINE_IMPL, f"{cd.BASELINE_IMPL} = 1"),
                       gap_reason=f"failed, skipped, wrong or without a usable {cd.BASELINE_IMPL} row")


def paged_bandwidth(df: pd.DataFrame) -> Chart:
    """Paged decode rows: GB/s vs context length per impl, MBU on the right axis, a panel per batch.

    context_lens is a distribution spec; a spec that is not a plain number is placed at its mean
    length and ticked with the spec itself.
    """
    rows = _rows(df, "paged_attention", ["batch", "gbytes_per_s"])
    specs = cd.distinct(rows["context_lens"])
    numeric = pd.to_numeric(rows["context_lens"], errors="coerce")
    plain = bool(numeric.notna().all())
    xs = numeric if plain else rows["context_lens"].map(cd.context_length)
    labels = None if plain else {cd.context_length(s): str(s) for s in specs}
    return _line_chart("paged", rows, x="context_lens", x_values=xs, y=cd.metric(rows, "gbytes_per_s"),
                       panel_keys=["batch"], named_panels=["batch"], first=["impl"], colour_by="impl",
                       dash_by="impl", ncols=2, xlabel="context length (tokens)", ylabel="GB/s",
                       what="Paged decode GB/s vs context length", util=("gbytes_per_s", "mbu", "MBU"),
                       x_labels=labels)


def pick_batch(p: pd.DataFrame, modes: Sequence[Any]) -> float:
    """The largest global batch that every sharding mode has a row for (any status), else the largest."""
    per_mode = [set(p.loc[cd.text(p["sharding"]) == str(m), "global_batch"].astype(float)) for m in modes]
    common = set.intersection(*per_mode) if per_mode else set()
    return max(common) if common else float(p["global_batch"].astype(float).max())


_LABEL_PT = 8  # bar label font size
_LABEL_GAP_PT = 3  # between a label and its bar's top
_LABEL_STEP_PT = 3  # how far a label moves per try when its first places overlap a marker


def _marker_boxes(line: Line2D) -> list[Bbox]:
    """Display boxes of a line's markers, one per finite point (the marker's path, its edge included)."""
    fig = line.get_figure()
    marker = MarkerStyle(line.get_marker())
    ext = marker.get_path().transformed(marker.get_transform()).get_extents()
    scale = line.get_markersize() * fig.dpi / 72
    pad = line.get_markeredgewidth() * fig.dpi / 72 / 2
    boxes = []
    for x, y in line.get_transform().transform(line.get_xydata()):
        if np.isfinite(x) and np.isfinite(y):
            boxes.append(Bbox.from_extents(x + ext.x0 * scale - pad, y + ext.y0 * scale - pad,
                                           x + ext.x1 * scale + pad, y + ext.y1 * scale + pad))
    return boxes


def _label_places(bar_pt: float, room_pt: float) -> list[tuple[float, str, bool]]:
    """(offset from the bar's top in points, va, inside) to try, best first: inside the top of the bar,
    just above it, then further down inside and further up outside, in steps."""
    inside = [-_LABEL_GAP_PT - k * _LABEL_STEP_PT for k in range(int(bar_pt // _LABEL_STEP_PT) + 1)]
    inside = [d for d in inside if -d + _LABEL_PT * 1.4 + _LABEL_GAP_PT <= bar_pt]
    above = [_LABEL_GAP_PT + k * _LABEL_STEP_PT for k in range(int(max(room_pt, 0) // _LABEL_STEP_PT) + 1)]
    first = [(inside[0], "top", True)] if inside else []
    rest = [(d, "top", True) for d in inside[1:]]
    return first + [(d, "bottom", False) for d in above[:1]] + rest + [(d, "bottom", False) for d in above[1:]]


def _place_bar_labels(fig: Figure, panels: list[tuple[Axes, list[tuple[Any, np.ndarray]], list[Line2D]]]) -> None:
    """MFU value labels where they overlap no step-time marker, no other label and stay inside the axes.

    Runs once the figure is complete: a draw settles the constrained layout, so the positions measured
    here are the saved ones (the labels are kept out of the layout, which they therefore cannot move).
    """
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = canvas.get_renderer()
    pt = fig.dpi / 72
    for ax, drawn, markers in panels:
        frame = ax.get_window_extent(renderer)
        taken = [b for m in markers for b in _marker_boxes(m)]
        taken += [t.get_window_extent(renderer) for t in ax.texts]  # the 'skipped' / 'failed' notes
        for bars, vals in drawn:
            for rect, v in zip(bars, vals):
                if not np.isfinite(v):
                    continue
                colour = rect.get_facecolor()
                x = rect.get_x() + rect.get_width() / 2
                top = ax.transData.transform((x, v))[1]
                base = ax.transData.transform((x, 0))[1]
                ann = ax.annotate(f"{v:.1f}%", (x, v), xytext=(0, 0), textcoords="offset points", ha="center",
                                  fontsize=_LABEL_PT, annotation_clip=False)
                ann.set_in_layout(False)
                places = _label_places((top - base) / pt, (frame.y1 - top) / pt - _LABEL_PT * 1.4)
                for place in places:
                    _put_label(ann, *place, colour)
                    box = ann.get_window_extent(renderer).padded(1.5 * pt)
                    if frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1) and \
                            not any(box.overlaps(b) for b in taken):
                        break
                else:  # nowhere clear (a crowded panel): the usual place
                    _put_label(ann, *(places[0] if places else (_LABEL_GAP_PT, "bottom", False)), colour)
                taken.append(ann.get_window_extent(renderer))


def _put_label(ann: Any, dy: float, va: str, inside: bool, bar_colour: Any) -> None:
    """Inside a bar: white bold on a patch of the bar's colour (the impl's hatch does not cross it);
    above it: plain dark text."""
    ann.xyann = (0, dy)
    ann.set_va(va)
    ann.set_color("white" if inside else "black")
    ann.set_fontweight("bold" if inside else "normal")
    ann.set_bbox({"boxstyle": "square,pad=0.1", "facecolor": bar_colour, "edgecolor": "none"} if inside else None)


def sharding_bars(df: pd.DataFrame, global_batch: Optional[float] = None) -> Chart:
    """Train rows at one global batch: MFU bars per sharding mode (hatch per impl), step time on the right."""
    rows = _rows(df, "train", ["global_batch", "mfu"])
    if global_batch is not None and not (rows["global_batch"].astype(float) == float(global_batch)).any():
        have = ", ".join(cd.fmt_value("", b) for b in sorted(set(rows["global_batch"].astype(float))))
        raise NoData(f"no train rows at global batch {cd.fmt_value('', float(global_batch))} (have: {have})")
    orders = {"impl": cd.impl_order(rows["impl"]), "sharding": cd.sort_order(rows["sharding"], cd.SHARDING_ORDER)}
    panel_keys = ["backend", "device_kind", "model"]
    extras = cd.split_keys(rows, "global_batch", panel_keys + ["sharding", "impl"])
    facets, gaps = _drop_empty(_facets(rows, panel_keys, orders), pd.to_numeric(rows["mfu"], errors="coerce").notna())
    fig, axes = _panels(len(facets), 2, width=5.2)
    chart = Chart("sharding", fig)
    batches = []
    panels: list[tuple[Axes, list[tuple[Any, np.ndarray]], list[Line2D]]] = []
    for ax, (ptitle, p) in zip(axes, facets):
        modes = cd.sort_order(p["sharding"], cd.SHARDING_ORDER)
        batch = float(global_batch) if global_batch is not None else pick_batch(p, modes)
        batches.append(batch)
        at = p[p["global_batch"].astype(float) == batch]
        series = _series(at, ["impl"], extras, orders)
        width = 0.8 / max(len(series), 1)
        ax2 = ax.twinx()
        drawn: list[tuple[Any, np.ndarray]] = []
        markers: list[Line2D] = []
        for i, (values, s) in enumerate(series):
            pos = np.arange(len(modes)) + (i - (len(series) - 1) / 2) * width
            by_mode = {str(m): s[cd.text(s["sharding"]) == str(m)] for m in modes}
            mfu = np.array([cd.metric(r, "mfu", 100).max() if len(r) else np.nan for r in by_mode.values()])
            step = np.array([cd.metric(r, "median_s").max() if len(r) else np.nan for r in by_mode.values()])
            lab = _series_label(values, ["impl"], s)
            hatch = style(values["impl"]).hatch if len(series) > 1 else ""
            bars = ax.bar(pos, mfu, width * 0.92, color=[style(m).colour for m in modes], hatch=hatch,
                          edgecolor="white", linewidth=0.5)
            drawn.append((bars, mfu))
            for x, v, r in zip(pos, mfu, by_mode.values()):
                if len(r) and not np.isfinite(v):  # a row that is not usable: say why at the foot
                    gaps += 1
                    status = "wrong" if (r["status"] == "ok").all() else str(r["status"].iloc[0])
                    ax.text(x, 0, f" {status}", rotation=90, ha="center", va="bottom", fontsize=8, color="#aa0000")
            (pts,) = ax2.plot(pos, step, linestyle="none", marker="D", markersize=6, color="black",
                              markerfacecolor="white", label="step time (right axis)")
            markers.append(pts)
            chart.artists[(ptitle, lab)] = bars
            chart.artists[(ptitle, lab + " step time")] = pts
            # Bars are coloured by mode (the tick labels name it): the legend shows the impl's hatch.
            chart.proxies.append(Patch(facecolor="white", edgecolor="#333333", hatch=hatch, label=f"MFU: {lab}"))
        ax.set_xticks(np.arange(len(modes)), [str(m) for m in modes])
        ax.set_xlim(-0.5, len(modes) - 0.5)  # every mode's slot inside the frame: its notes clear of the axes
        top = max((float(np.nanmax(v)) for _, v in drawn if np.isfinite(v).any()), default=1.0) * 1.15
        ax.set_ylim(0, top)  # room above the tallest bar for a label pushed out by a marker
        panels.append((ax, drawn, markers))
        ax2.set_ylim(bottom=0, top=max(ax2.get_ylim()[1] * 1.2, 1e-9))  # diamonds clear of the frame
        ax.set_ylabel("MFU (%)")
        ax2.set_ylabel("step time (s)")
        ax.set_xlabel("sharding mode")
        ax.set_title(f"{ptitle} · global batch {cd.fmt_value('', batch)}", fontsize=10)
    shown = ", ".join(cd.fmt_value("", b) for b in cd.distinct(batches))
    chart = _finish(chart, rows, f"MFU and step time per sharding mode at global batch {shown}", gaps)
    _place_bar_labels(fig, panels)
    return chart


# ---------------------------------------------------------------------------------------- fit (compile)

# A fit chart's panels and labels per workload (the lines: chartdata.FIT_SERIES, coloured as in the
# workload's run charts).
_FIT_LAYOUTS: dict[str, dict[str, Any]] = {
    "train": {"panels": ["backend", "target", "model"], "named": [], "colour_by": "sharding", "dash_by": "impl",
              "xlabel": "global batch (sequences)", "what": "HBM per device vs global batch"},
    "attention": {"panels": ["target", "causal", "mode"], "named": [], "colour_by": "impl", "dash_by": "impl",
                  "xlabel": "sequence length", "what": "HBM per device vs sequence length"},
    "paged_attention": {"panels": ["target", "batch"], "named": ["batch"], "colour_by": "impl", "dash_by": "impl",
                        "xlabel": "context length (tokens)", "what": "HBM per device vs context length"},
}
CAPACITY_COLOUR = "#aa0000"
OOM_LABEL = "oom: memory needed (does not fit)"
CAPACITY_LABEL = "HBM capacity per device"


def _free_corner(ax: Axes, y: float, skip: Sequence[Artist] = (), width: float = 0.5,
                 height: float = 0.1) -> tuple[float, str, str]:
    """Where a label on the horizontal line at data y overlaps the fewest drawn points and line pieces:
    (x in axes fraction, ha, va) for the left or right end, above or below the line."""
    to_axes = ax.transData + ax.transAxes.inverted()
    pts = []
    for line in ax.get_lines():
        if any(line is k for k in skip):
            continue
        xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
        if not len(xy):
            continue
        a = to_axes.transform(xy)
        pts.append(a[np.isfinite(a).all(axis=1)])
        for p, q in itertools.pairwise(a):  # the segments a line draws, sampled
            if np.isfinite(p).all() and np.isfinite(q).all():
                pts.append(p + np.linspace(0, 1, 40)[:, None] * (q - p))
    cloud = np.concatenate(pts) if pts else np.empty((0, 2))
    ya = float(to_axes.transform([[ax.get_xlim()[0], y]])[0][1])
    best = None
    for x, ha in ((0.02, "left"), (0.98, "right")):
        x0, x1 = (x, x + width) if ha == "left" else (x - width, x)
        for va, (y0, y1) in (("bottom", (ya, ya + height)), ("top", (ya - height, ya))):
            if y1 > 1.0 or y0 < 0.0:
                continue
            hits = int(((cloud[:, 0] >= x0) & (cloud[:, 0] <= x1) & (cloud[:, 1] >= y0) & (cloud[:, 1] <= y1)).sum())
            if best is None or hits < best[0]:
                best = (hits, x, ha, va)
    return (best[1], best[2], best[3]) if best else (0.02, "left", "bottom")


def fit_memory(df: pd.DataFrame) -> Chart:
    """Compile rows (`xlabench compile`): per-device memory (GiB) vs global batch, a line per sharding
    mode (colour) and impl (dash), the device's HBM as a dashed line, oom points as an x at what they
    need. Attention and paged compile rows: the same per impl vs sequence or context length."""
    comp = cd.compile_rows(df)
    workload = next((w for w in _FIT_LAYOUTS if (comp["workload"] == w).any()), None)
    if workload is None:
        raise NoData("no compile rows (xlabench compile SUITE --target NAME writes them)")
    rows = comp[comp["workload"] == workload].reset_index(drop=True)
    lay = _FIT_LAYOUTS[workload]
    mem = cd.memory_gib(rows)
    if mem.isna().all():
        raise NoData(f"{workload} compile rows have no compiled or oom case with a memory figure")
    first = cd.FIT_SERIES[workload]
    x_col = cd.FIT_X[workload]
    xs_all = cd.fit_x(rows, workload)
    labels = None
    if workload == "paged_attention" and pd.to_numeric(rows[x_col], errors="coerce").isna().any():
        labels = {cd.context_length(v): str(v) for v in cd.distinct(rows[x_col])}
    orders = {"impl": cd.impl_order(rows["impl"]), "sharding": cd.sort_order(rows["sharding"], cd.SHARDING_ORDER),
              "mode": cd.sort_order(rows["mode"], cd.MODE_ORDER), "causal": [True, False]}
    extras = cd.split_keys(rows, x_col, lay["panels"] + first)
    facets, gaps = _drop_empty(_facets(rows, lay["panels"], orders, lay["named"]), mem.notna())
    ncols = 2 if workload != "attention" else max(len(cd.distinct(rows["mode"])), 1)
    # room for five-digit batches an octave apart (16384, 32768) side by side on the log2 axis
    fig, axes = _panels(len(facets), ncols, width=6.2 if len(facets) == 1 else 4.6)
    chart = Chart("fit", fig)
    any_oom = False
    for ax, (ptitle, p) in zip(axes, facets):
        top = 0.0
        for i, (values, s) in enumerate(_series(p, first, extras, orders)):
            s = s.assign(_x=xs_all[s.index]).sort_values("_x")
            ys = mem[s.index].to_numpy(dtype=float)
            xv = s["_x"].to_numpy(dtype=float)
            gaps += int(np.isnan(ys).sum())
            fits = (s["status"] == "compiled").to_numpy() & np.isfinite(ys)
            oom = (s["status"] == "oom").to_numpy() & np.isfinite(ys)
            lab = cd.label(list(values), list(values.values()), named=[c for c in values if c not in first])
            if not np.isfinite(ys).any():
                lab += " (no memory figure)"
            st = style(values[lay["colour_by"]])
            marker = MARKERS[i % len(MARKERS)] if extras else "o"
            (line,) = ax.plot(xv, ys, label=lab, marker=marker, markersize=5, linewidth=1.6, color=st.colour,
                              linestyle=style(values[lay["dash_by"]]).linestyle, markevery=list(np.flatnonzero(fits)))
            chart.artists[(ptitle, lab)] = line
            if oom.any():
                any_oom = True
                (x_pts,) = ax.plot(xv[oom], ys[oom], linestyle="none", marker="x", markersize=8,
                                   markeredgewidth=2, color=st.colour, label="_oom")
                chart.artists[(ptitle, lab + " oom")] = x_pts
            if np.isfinite(ys).any():
                top = max(top, float(np.nanmax(ys)))
        caps = cd.distinct(cd.capacity_gib(p).dropna())
        top = max([top, *caps]) if caps else top
        px = [float(v) for v in xs_all[p.index] if np.isfinite(v)]
        if labels is None and px and max(px) >= 10000:  # five-digit batches an octave apart: slanted ticks
            _log2_x(ax, px, {v: cd.fmt_value("", v) for v in px})
        else:
            _log2_x(ax, px, labels)
        low = float(np.nanmin(mem[p.index])) if mem[p.index].notna().any() else 0.0
        if caps and top > 4 * max(caps) and low > 0:  # an oom that needs many times the HBM: log2 GiB
            ax.set_yscale("log", base=2)
            ax.set_ylim(min(low, *caps) / 1.6, top * 1.6)
            ax.yaxis.set_major_formatter(lambda v, _: f"{v:g}")  # a callable: a FuncFormatter
        else:
            ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
        cap_lines = [ax.axhline(c, color=CAPACITY_COLOUR, linewidth=1.2, linestyle="--", label=CAPACITY_LABEL)
                     for c in caps]
        for c, cap_line in zip(caps, cap_lines):  # once every line is drawn and the limits set: a free spot
            chart.artists[(ptitle, f"HBM {c:.2f} GiB")] = cap_line
            x, ha, va = _free_corner(ax, c, cap_lines)
            ax.annotate(f"HBM {c:.2f} GiB per device", (x, c), xycoords=("axes fraction", "data"),
                        xytext=(0, 3 if va == "bottom" else -3), textcoords="offset points", ha=ha, va=va,
                        fontsize=8, color=CAPACITY_COLOUR)
        if len(caps) == 1:
            f = 100.0 / caps[0]
            sec = ax.secondary_yaxis("right", functions=(lambda v, f=f: v * f, lambda v, f=f: v / f))
            sec.set_ylabel("HBM (%)")
            if ax.get_yscale() == "log":
                sec.yaxis.set_major_formatter(lambda v, _: f"{v:g}")
        ax.set_title(ptitle, fontsize=10)
        ax.set_xlabel(lay["xlabel"])
        ax.set_ylabel("memory per device (GiB)")
        ax.grid(True, alpha=0.3)
    if any_oom:  # one legend entry for the x markers of every line, after the lines and the capacity
        axes[0].plot([], [], color="#333333", linestyle="none", marker="x", markersize=8, markeredgewidth=2,
                     label=OOM_LABEL)
    _finish(chart, rows, lay["what"], gaps, gap_reason="failed or skipped")
    fig.suptitle(cd.compile_title(rows, lay["what"]), fontsize=11)
    return chart


# ------------------------------------------------------------------------------------------ registry


@dataclass(frozen=True)
class Kind:
    name: str
    workload: str
    draw: Callable[..., Chart]
    doc: str
    source: str = "run"  # run: measured rows; compile: `xlabench compile` rows (memory, no timings)
    also: tuple[str, ...] = ()  # further workloads the kind draws

    @property
    def workloads(self) -> tuple[str, ...]:
        return (self.workload, *self.also)


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("mfu_batch", "train", mfu_vs_batch, "MFU vs global batch per sharding mode and attention impl"),
    Kind("sharding", "train", sharding_bars, "MFU bars and step time per sharding mode at one global batch"),
    Kind("attention", "attention", attention_tflops, "attention TFLOP/s (and MFU) vs sequence length per impl"),
    Kind("speedup", "attention", attention_speedup, "speedup of each attention impl over naive"),
    Kind("paged", "paged_attention", paged_bandwidth, "paged decode GB/s (and MBU) vs context length per impl"),
    Kind("fit", "train", fit_memory, "compile rows: HBM per device vs global batch (attention, paged: vs length), "
         "the capacity, oom points", source="compile", also=("attention", "paged_attention")),
)}


def kinds_for(df: pd.DataFrame) -> list[str]:
    """The chart kinds the rows' workloads call for, in registry order: run kinds for measured rows,
    compile kinds for `xlabench compile` rows."""
    comp = cd.is_compile(df)
    present = {"run": set(df.loc[~comp, "workload"].astype(str)), "compile": set(df.loc[comp, "workload"].astype(str))}
    return [k.name for k in KINDS.values() if present[k.source] & set(k.workloads)]


def render(df: pd.DataFrame, out_dir: Path, formats: Sequence[str] = ("png", "svg"),
           kinds: Optional[Sequence[str]] = None, global_batch: Optional[float] = None,
           ) -> tuple[list[Path], list[str]]:
    """Draw and save charts for one suite's rows: (files written, why a chart kind was left out).

    Explicitly requested kinds that cannot be drawn raise NoData; kinds picked automatically are
    left out with the reason (e.g. no naive rows for a speedup chart).
    """
    chosen = list(kinds) if kinds else kinds_for(df)
    written: list[Path] = []
    left_out: list[str] = []
    for name in chosen:
        kind = KINDS[name]
        try:
            chart = kind.draw(df, global_batch) if name == "sharding" else kind.draw(df)
        except NoData as e:
            if kinds or (name == "sharding" and global_batch is not None):  # asked for: an error
                raise
            left_out.append(f"{name}: {e}")
            continue
        written += chart.save(Path(out_dir) / name, formats)
    return written, left_out
