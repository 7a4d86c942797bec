"""Chart kinds drawn from result rows: MFU vs global batch, MFU per sharding mode, attention kernels,
paged decode bandwidth.

Each chart is a plain function of a DataFrame (chartdata.load) returning a Chart: the matplotlib
Figure plus the artists it drew, keyed by (panel, series), so tests can check the data drawn.
Figures are made with the object API (no pyplot, no global state): saving renders through Agg.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from xlabench.hardware import chip_name
from xlabench.report import chartdata as cd
from xlabench.report import explain_chart, roofline_chart
from xlabench.report.bar_labels import _place_bar_labels
from xlabench.report.chart_parts import (  # noqa: F401 (grid: the charts' API for tests)
    grid, wrap_title, add_note,
    Chart, MARKERS, NoData, _drop_empty, _facets, _finish, _log2_x, _panels, _rows, _series,
    _series_label, peak_note, style, unusable_note,
)
from xlabench.report.line_chart import _line_chart, spread_band  # noqa: F401 (spread_band: for tests)
from xlabench.protocol import status as st
from xlabench.units import MS_PER_S
from xlabench.workloads.record import FitChart


# ----------------------------------------------------------------------------------------- chart kinds


def mfu_vs_batch(df: pd.DataFrame) -> Chart:
    """Train rows: MFU (%) vs global batch, a line per sharding mode (colour) and attention impl (dash); on
    one device (one sharding mode: a slice of one chip runs every mode as one program) a line per impl, and the
    frameworks side by side in one panel per chip and model (a dash per framework; the chip by one name
    whichever framework named it)."""
    rows = _rows(df, "train", ["global_batch", "mfu"])
    y = cd.metric(rows, "mfu", 100)
    one_mode = cd.text(rows["sharding"]).nunique() <= 1
    backend = cd.text(rows["backend"])
    drawn = set(backend[y.notna()])
    frameworks = one_mode and len(drawn) > 1
    gone = sorted(set(backend) - drawn) if frameworks else []  # named by framework in the footer, no panel
    notes = [unusable_note(b, rows[backend == b]) for b in gone]
    if gone:
        rows, y = rows[backend.isin(drawn)], y[backend.isin(drawn)]
    if frameworks:  # one chip, one name: JAX's 'TPU v5 lite' and TorchTPU's 'TPU v5e' share a panel
        rows = rows.assign(device_kind=rows["device_kind"].map(lambda k: chip_name(k) if isinstance(k, str) else k))
    chart = _line_chart("mfu_batch", rows, x="global_batch", y=y,
                        panel_keys=["device_kind", "model"] if frameworks else ["backend", "device_kind", "model"],
                        first=["impl", "backend"] if frameworks else ["impl"] if one_mode else ["sharding", "impl"],
                        colour_by="impl" if one_mode else "sharding",
                        dash_by="backend" if frameworks else None if one_mode else "impl",
                        hollow_by="backend" if frameworks else None,
                        ncols=2, xlabel="global batch (sequences)", ylabel="MFU (%)", what="MFU vs global batch")
    for note in notes:
        add_note(chart, note)
    note = peak_note(rows)
    if note:
        add_note(chart, note)
    _mark_largest_batch(chart, rows, y)
    return chart


def _mark_largest_batch(chart: Chart, rows: pd.DataFrame, y: pd.Series) -> None:
    """A ring around each point measured at the largest batch that fits (rows of ``global_batch: auto``,
    whose max_batch column holds it), on the line that drew the point."""
    if "max_batch" not in rows:
        return
    found = rows[(rows["max_batch"] > 0) & y.notna()]
    rings = 0
    for idx, r in found.iterrows():
        x = float(r["global_batch"])
        for (ptitle, label), line in list(chart.artists.items()):
            xs, ys = (np.asarray(v, dtype=float) for v in line.get_data())
            if not np.any((xs == x) & (ys == float(y[idx]))):
                continue
            (ring,) = line.axes.plot([x], [float(y[idx])], linestyle="none", marker="o", markersize=13,
                                     markerfacecolor="none", markeredgecolor=line.get_color(), markeredgewidth=1.4,
                                     zorder=4, label="_largest")
            chart.artists[(ptitle, f"largest batch: {label}")] = ring
            rings += 1
            break
    if rings:
        add_note(chart, "rings: the largest batch that fits the device's memory (global_batch auto: found by "
                        "compiling the step, XLA memory analysis)")


def attention_tflops(df: pd.DataFrame) -> Chart:
    """Attention rows: TFLOP/s vs sequence length per impl, MFU on the right axis, by mode and causal."""
    rows = _rows(df, "attention", ["seq_len", "tflops_per_s"])
    return _line_chart("attention", rows, x="seq_len", y=cd.metric(rows, "tflops_per_s"),
                       panel_keys=["causal", "mode"], first=["impl"], colour_by="impl", dash_by="impl",
                       ncols=len(cd.distinct(rows["mode"])) or 1, xlabel="sequence length (tokens)",
                       ylabel="TFLOP/s", what="Attention TFLOP/s vs sequence length",
                       util=("tflops_per_s", "mfu", "MFU"))


def attention_speedup(df: pd.DataFrame) -> Chart:
    """Attention rows: speedup of every impl over naive for the same shape, by mode and causal; a tuned
    kernel's row also draws its default blocks' time (``default_s``, timed in the same search) dashed, so
    the chart says what tuning bought."""
    rows = _rows(df, "attention", ["seq_len", "median_s"])
    base = cd.baseline_seconds(rows)  # the naive time of each row's shape (one rule: docs/plots.md)
    speed = base / cd.metric(rows, "median_s")
    others = rows[rows["impl"] != cd.BASELINE_IMPL]
    if speed.dropna().empty or others.empty:
        raise NoData(f"no attention shape has both a usable {cd.BASELINE_IMPL} row and another impl")
    tuned = others["tuned"].isin(["search", "cache", "table"]) if "tuned" in others else pd.Series(False, index=others.index)
    if tuned.any():
        default = others[tuned & cd.metric(others, "default_s").notna()]
        others = pd.concat([others.assign(blocks_at=np.where(tuned, "tuned", "as the suite says")),
                            default.assign(blocks_at="untuned: default 128 x 128")], ignore_index=True)
        speed = pd.concat([speed[tuned.index], base[default.index] / cd.metric(default, "default_s")],
                          ignore_index=True)
        return _line_chart("speedup", others, x="seq_len", y=speed, panel_keys=["causal", "mode"],
                           first=["impl", "blocks_at"], colour_by="impl", dash_by="blocks_at",
                           ncols=len(cd.distinct(rows["mode"])) or 1, xlabel="sequence length (tokens)",
                           ylabel=f"speedup over {cd.BASELINE_IMPL} (×, log)",
                           what=f"Attention speedup over {cd.BASELINE_IMPL}, tuned and at default blocks",
                           hline=(1.0, cd.BASELINE_IMPL, f"{cd.BASELINE_IMPL} = 1"),
                           gap_reason=f"failed, skipped, wrong or without a usable {cd.BASELINE_IMPL} row", log_y=True)
    return _line_chart("speedup", others, x="seq_len", y=speed, panel_keys=["causal", "mode"], first=["impl"],
                       colour_by="impl", dash_by="impl", ncols=len(cd.distinct(rows["mode"])) or 1,
                       xlabel="sequence length (tokens)", ylabel=f"speedup over {cd.BASELINE_IMPL} (×, log)",
                       what=f"Attention speedup over {cd.BASELINE_IMPL}",
                       hline=(1.0, cd.BASELINE_IMPL, f"{cd.BASELINE_IMPL} = 1"),
                       gap_reason=f"failed, skipped, wrong or without a usable {cd.BASELINE_IMPL} row", log_y=True)


def _short_spec(spec: Any) -> str:
    """'uniform:4..1024' -> '4..1024': the numbers of a context spec, for a tick label."""
    text = cd.fmt_value("", spec)
    return text.split(":", 1)[1] if ":" in text else text


def paged_bandwidth(df: pd.DataFrame) -> Chart:
    """Paged decode rows: GB/s vs context length per impl, MBU on the right axis, a panel per batch.

    context_lens is a distribution spec; a spec that is not a plain number is placed at its mean
    length and ticked with its numbers. When each batch has one context (the two zipped, as in the CPU
    profile), the x axis is the batch instead (ticked with the batch and, under it, its context), so
    every panel has lines; panels are then the query tokens and page sizes.
    """
    rows = _rows(df, "paged_attention", ["batch", "gbytes_per_s"])
    per_batch = cd.text(rows["context_lens"]).groupby(cd.text(rows["batch"])).nunique()
    varying = [k for k in ("q_tokens", "page_size") if cd.text(rows[k]).nunique() > 1]
    common = dict(y=cd.metric(rows, "gbytes_per_s"), first=["impl"], colour_by="impl", dash_by="impl", ncols=2,
                  ylabel="GB/s", util=("gbytes_per_s", "mbu", "MBU"))
    if per_batch.max() <= 1 and per_batch.size > 1:  # one context per batch: batch on x
        batches = rows["batch"]
        labels = {float(b): f"{cd.fmt_value('', b)}\n{_short_spec(c)}" for b, c in zip(batches, rows["context_lens"])}
        return _line_chart("paged", rows, x="batch", x_values=batches, panel_keys=varying, named_panels=varying,
                           xlabel="batch (sequences) / context length (tokens)",
                           what="Paged decode GB/s vs batch", x_labels=labels, **common)
    specs = cd.distinct(rows["context_lens"])
    numeric = pd.to_numeric(rows["context_lens"], errors="coerce")
    plain = bool(numeric.notna().all())
    xs = numeric if plain else rows["context_lens"].map(cd.context_length)
    labels = None if plain else {cd.context_length(s): _short_spec(s) for s in specs}
    return _line_chart("paged", rows, x="context_lens", x_values=xs, panel_keys=["batch", *varying],
                       named_panels=["batch", *varying], xlabel="context length (tokens)",
                       what="Paged decode GB/s vs context length", x_labels=labels, **common)


def pick_batch(p: pd.DataFrame, modes: Sequence[Any]) -> float:
    """The largest global batch that every sharding mode has a row for (any status), else the largest."""
    per_mode = [set(p.loc[cd.text(p["sharding"]) == str(m), "global_batch"].astype(float)) for m in modes]
    common = set.intersection(*per_mode) if per_mode else set()
    return max(common) if common else float(p["global_batch"].astype(float).max())


def sharding_bars(df: pd.DataFrame, global_batch: Optional[float] = None) -> Chart:
    """Train rows at one global batch: MFU bars per sharding mode (hatch per impl), step time on the right."""
    rows = _rows(df, "train", ["global_batch", "mfu"])
    if global_batch is not None and not (rows["global_batch"].astype(float) == float(global_batch)).any():
        have = ", ".join(cd.fmt_value("", b) for b in sorted(set(rows["global_batch"].astype(float))))
        raise NoData(f"no train rows at global batch {cd.fmt_value('', float(global_batch))} (have: {have})")
    orders = {"impl": cd.impl_order(rows["impl"]), "sharding": cd.sort_order(rows["sharding"], cd.SHARDING_ORDER)}
    panel_keys = ["backend", "device_kind", "model"]
    extras = cd.split_keys(rows, "global_batch", panel_keys + ["sharding", "impl"])
    facets, dropped = _drop_empty(_facets(rows, panel_keys, orders), rows["mfu"].notna())
    fig, axes = _panels(len(facets), 2, width=5.2)
    chart = Chart("sharding", fig)
    chart.notes += dropped
    gaps = 0
    batches = []
    panels: list[tuple[Axes, list[tuple[Any, np.ndarray]], list[Line2D]]] = []
    legend: dict[str, tuple[str, list[bool]]] = {}
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
            lab = _series_label(values, ["impl"], s)
            hatch = style(values["impl"]).hatch if len(series) > 1 else ""
            bars, mfu, pts, missing = _mode_bars(ax, ax2, pos, s, modes, width, hatch)
            gaps += missing
            drawn.append((bars, mfu))
            markers.append(pts)
            chart.artists[(ptitle, lab)] = bars
            chart.artists[(ptitle, lab + " step time")] = pts
            # Bars are coloured by mode (the tick labels name it): the legend shows the impl's hatch.
            base = lab.removesuffix(" (no usable point)")  # one entry per impl, usable if any panel has it
            legend.setdefault(base, (hatch, []))[1].append(lab == base)
        _sharding_axes(ax, ax2, modes, drawn, f"{ptitle} · global batch {cd.fmt_value('', batch)}")
        panels.append((ax, drawn, markers))
    for base, (hatch, usable) in legend.items():
        chart.proxies.append(Patch(facecolor="white", edgecolor="#333333", hatch=hatch,
                                   label=f"MFU: {base}" + ("" if any(usable) else " (no usable point)")))
    shown = ", ".join(cd.fmt_value("", b) for b in cd.distinct(batches))
    note = peak_note(rows[rows["global_batch"].astype(float).isin(batches)])
    chart.notes += [note] if note else []
    chart = _finish(chart, rows, f"MFU and step time per sharding mode at global batch {shown}", gaps)
    _place_bar_labels(fig, panels)
    return chart


def _mode_bars(ax: Axes, ax2: Axes, pos: np.ndarray, s: pd.DataFrame, modes: Sequence[Any], width: float,
               hatch: str) -> tuple[Any, np.ndarray, Line2D, int]:
    """One impl's MFU bar per sharding mode (coloured by mode) and its step time as a diamond on the right
    axis; a mode whose row is not usable says its status at the foot. Returns (bars, MFU %, diamonds,
    the modes left without a bar)."""
    by_mode = {str(m): s[cd.text(s["sharding"]) == str(m)] for m in modes}
    mfu = np.array([cd.metric(r, "mfu", 100).max() if len(r) else np.nan for r in by_mode.values()])
    step = np.array([cd.metric(r, "median_s", MS_PER_S).max() if len(r) else np.nan for r in by_mode.values()])
    bars = ax.bar(pos, mfu, width * 0.92, color=[style(m).colour for m in modes], hatch=hatch,
                  edgecolor="white", linewidth=0.5)
    gaps = 0
    for x, v, r in zip(pos, mfu, by_mode.values()):
        if len(r) and not np.isfinite(v):  # a row that is not usable: say why at the foot
            gaps += 1
            status = "wrong" if (r["status"] == st.OK).all() else str(r["status"].iloc[0])
            ax.text(x, 0, f" {status}", rotation=90, ha="center", va="bottom", fontsize=8, color="#aa0000")
    (pts,) = ax2.plot(pos, step, linestyle="none", marker="D", markersize=6, color="black",
                      markerfacecolor="white", label="step time (right axis)")
    return bars, mfu, pts, gaps


def _sharding_axes(ax: Axes, ax2: Axes, modes: Sequence[Any], drawn: list[tuple[Any, np.ndarray]], title: str) -> None:
    """A sharding panel's ticks (one slot per mode), limits, labels and title."""
    ax.set_xticks(np.arange(len(modes)), [str(m) for m in modes])
    ax.set_xlim(-0.5, len(modes) - 0.5)  # every mode's slot inside the frame: its notes clear of the axes
    top = max((float(np.nanmax(v)) for _, v in drawn if np.isfinite(v).any()), default=1.0) * 1.15
    ax.set_ylim(0, top)  # room above the tallest bar for a label pushed out by a marker
    ax2.set_ylim(bottom=0, top=max(ax2.get_ylim()[1] * 1.2, 1e-9))  # diamonds clear of the frame
    ax.set_ylabel("MFU (%)")
    ax2.set_ylabel("step time (ms)")
    ax.set_xlabel("sharding mode")
    ax.set_title(title, fontsize=10)


# ---------------------------------------------------------------------------------------- fit (compile)

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
    comp = cd.compile_rows(df)  # the first workload of the fit kind's (KINDS) the rows have
    workload = next((w for w in KINDS["fit"].workloads if (comp["workload"] == w).any()), None)
    if workload is None:
        raise NoData("no compile rows (xlabench compile SUITE --target NAME writes them)")
    rows = comp[comp["workload"] == workload].reset_index(drop=True)
    lay = cd.fit_chart(workload)
    mem = cd.memory_gib(rows)
    if mem.isna().all():
        raise NoData(f"{workload} compile rows have no compiled or oom case with a memory figure")
    first = list(lay.lines)
    x_col = lay.x
    xs_all = cd.fit_x(rows, workload)
    labels = None
    if lay.x_is_spec and pd.to_numeric(rows[x_col], errors="coerce").isna().any():
        labels = {cd.context_length(v): str(v) for v in cd.distinct(rows[x_col])}
    orders = {"impl": cd.impl_order(rows["impl"]), "sharding": cd.sort_order(rows["sharding"], cd.SHARDING_ORDER),
              "mode": cd.sort_order(rows["mode"], cd.MODE_ORDER), "causal": [True, False]}
    extras = cd.split_keys(rows, x_col, [*lay.panels, *first])
    facets, dropped = _drop_empty(_facets(rows, list(lay.panels), orders, list(lay.named)), mem.notna())
    gaps = 0
    ncols = max(len(cd.distinct(rows[lay.columns_by])), 1) if lay.columns_by else 2
    # room for five-digit batches an octave apart (16384, 32768) side by side on the log2 axis
    fig, axes = _panels(len(facets), ncols, width=6.2 if len(facets) == 1 else 4.6)
    chart = Chart("fit", fig)
    chart.notes += dropped
    any_oom = False
    for ax, (ptitle, p) in zip(axes, facets):
        top, missing, oomed = _fit_lines(ax, chart, ptitle, p, mem, xs_all, first, extras, orders, lay)
        gaps += missing
        any_oom = any_oom or oomed
        _fit_axes(ax, chart, ptitle, p, mem, xs_all, labels, top, lay)
    if any_oom:  # one legend entry for the x markers of every line, after the lines and the capacity
        axes[0].plot([], [], color="#333333", linestyle="none", marker="x", markersize=8, markeredgewidth=2,
                     label=OOM_LABEL)
    return _finish(chart, rows, lay.what, gaps, gap_reason="failed or skipped",
                   title=cd.compile_title(rows, lay.what))


def _fit_lines(ax: Any, chart: Chart, ptitle: str, p: pd.DataFrame, mem: pd.Series, xs_all: pd.Series,
               first: list[str], extras: list[str], orders: dict[str, list], lay: FitChart) -> tuple[float, int, bool]:
    """One fit panel's lines (a marker where the case fits, an x at what an oom case needs): the top
    memory figure drawn, the points without one (gaps), and whether any case was an oom."""
    top, gaps, any_oom = 0.0, 0, False
    series = _series(p, first, extras, orders)
    # each line's markers a size smaller than the line's before: one on another's point leaves it in sight
    # (flash's 0.25 GiB hid under splash's)
    drawn = [i for i, (_, s) in enumerate(series) if mem[s.index].notna().any()]
    size = {i: 5.0 if len(drawn) < 2 else 9.0 - 5.0 * j / (len(drawn) - 1) for j, i in enumerate(drawn)}
    for i, (values, s) in enumerate(series):
        s = s.assign(_x=xs_all[s.index]).sort_values("_x")
        ys = mem[s.index].to_numpy(dtype=float)
        xv = s["_x"].to_numpy(dtype=float)
        gaps += int(np.isnan(ys).sum())
        fits = (s["status"] == st.COMPILED).to_numpy() & np.isfinite(ys)
        oom = (s["status"] == st.OOM).to_numpy() & np.isfinite(ys)
        lab = cd.label(list(values), list(values.values()), named=[c for c in values if c not in first])
        if not np.isfinite(ys).any():
            lab += " (no memory figure)"
        look = style(values[lay.colour_by])
        marker = MARKERS[i % len(MARKERS)] if extras else "o"
        (line,) = ax.plot(xv, ys, label=lab, marker=marker, markersize=size.get(i, 5.0), linewidth=1.6, color=look.colour,
                          linestyle=style(values[lay.dash_by]).linestyle, markevery=list(np.flatnonzero(fits)))
        chart.artists[(ptitle, lab)] = line
        if oom.any():
            any_oom = True
            (x_pts,) = ax.plot(xv[oom], ys[oom], linestyle="none", marker="x", markersize=8,
                               markeredgewidth=2, color=look.colour, label="_oom")
            chart.artists[(ptitle, lab + " oom")] = x_pts
        if np.isfinite(ys).any():
            top = max(top, float(np.nanmax(ys)))
    return top, gaps, any_oom


def _fit_axes(ax: Any, chart: Chart, ptitle: str, p: pd.DataFrame, mem: pd.Series, xs_all: pd.Series,
              labels: Optional[dict], top: float, lay: FitChart) -> None:
    """One fit panel's axes: log2 x, a linear (or, past 4x the HBM, log2) GiB axis, the device's HBM as
    a dashed line labelled in a free corner, HBM % on the right."""
    caps = cd.distinct(cd.capacity_gib(p).dropna())
    top = max([top, *caps]) if caps else top
    px = [float(v) for v in xs_all[p.index] if np.isfinite(v)]
    if labels is None and px and max(px) >= 10000:  # five-digit batches an octave apart: smaller labels
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
    ax.set_xlabel(lay.xlabel)
    ax.set_ylabel("memory per device (GiB)")
    ax.grid(True, alpha=0.3)


# ------------------------------------------------------------------------------------------ registry


@dataclass(frozen=True)
class Kind:
    name: str
    workload: str
    draw: Callable[..., Chart]
    doc: str
    source: str = "run"  # run: measured rows; compile: `xlabench compile` rows (memory, no timings); any: both
    also: tuple[str, ...] = ()  # further workloads the kind draws
    needs: str = ""  # a column the rows must have values in (files of an older xlabench lack it)

    @property
    def workloads(self) -> tuple[str, ...]:
        return (self.workload, *self.also)


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("mfu_batch", "train", mfu_vs_batch, "MFU vs global batch per sharding mode and attention impl"),
    Kind("sharding", "train", sharding_bars, "MFU bars and step time per sharding mode at one global batch"),
    Kind("attention", "attention", attention_tflops, "attention TFLOP/s (and MFU) vs sequence length per impl"),
    Kind("speedup", "attention", attention_speedup, "speedup of each attention impl over naive"),
    Kind("paged", "paged_attention", paged_bandwidth, "paged decode GB/s (and MBU) vs context length per impl "
         "(vs the batch where each batch has one context)"),
    Kind("fit", "train", fit_memory, "compile rows: HBM per device vs global batch (attention, paged: vs length), "
         "the capacity, oom points", source="compile", also=("attention", "paged_attention")),
    Kind("roofline", "attention", roofline_chart.roofline, "FLOP/s vs arithmetic intensity under the device's roof "
         "(measured filled, compile hollow)", source="any", also=("train", "paged_attention"), needs="arith_intensity"),
    Kind("explain", "train", explain_chart.explain_bars, "the step's time per device by category of HLO op, one bar "
         "per row `xlabench explain` filled in", source="any", also=("attention", "paged_attention"),
         needs="explain_step_s"),
    Kind("mfu_ceiling", "train", roofline_chart.mfu_ceiling, "compile rows: the MFU the roofline allows vs global "
         "batch per sharding mode, with the suite's published figures", source="compile", needs="mfu_ceiling"),
)}


def kinds_for(df: pd.DataFrame) -> list[str]:
    """The chart kinds the rows' workloads call for, in registry order: run kinds for measured rows,
    compile kinds for `xlabench compile` rows."""
    comp = cd.is_compile(df)
    present = {"run": set(df.loc[~comp, "workload"].astype(str)), "compile": set(df.loc[comp, "workload"].astype(str))}
    present["any"] = present["run"] | present["compile"]
    def has(column: str) -> bool:
        return not column or (column in df and pd.to_numeric(df[column], errors="coerce").notna().any())

    bars = df["workload"].astype(str).isin(KINDS["sharding"].workloads)  # the rows the sharding chart draws
    modes = cd.text(df.loc[~comp & bars, "sharding"]).nunique() if "sharding" in df else 0
    return [k.name for k in KINDS.values() if present[k.source] & set(k.workloads) and has(k.needs)
            and not (k.name == "sharding" and modes <= 1)]  # one mode (one device): no sharding axis


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
