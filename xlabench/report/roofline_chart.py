"""The roofline chart kinds: where each case sits under its device's roof, and the MFU a compiled step
could reach per sharding mode.

``roofline``: log-log, one panel per device kind; x is arithmetic intensity (FLOP per byte), y the FLOP/s
per device: achieved (measured rows, filled markers) or what the roofline allows (compile rows, hollow).
The roof is min(peak FLOP/s, intensity x HBM bandwidth), its ridge marked. The impls of one shape are
joined by a thin line, so naive and flash at the same shape read as one move along the roof.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from xlabench import roofline as rl
from xlabench.report import chartdata as cd
from xlabench.report.chart_parts import Chart, NoData, _finish, _panels, add_note, style
from xlabench.report.line_chart import _line_chart
from xlabench.protocol import status as st
from xlabench.results import CASE_COLUMN_NAMES
from xlabench.results.schema import KERNEL_OPTIONS
from xlabench.units import GIGA, TERA
from xlabench.workloads import WORKLOADS

ROOF_COLOUR = "#222222"
TF_PER_GB = TERA / GIGA  # a TFLOP/s peak over a GB/s peak, in FLOP/byte (exactly 1000.0)
_NOT_SHAPE = {"impl", "backend", *KERNEL_OPTIONS, "devices"}


def _num(rows: pd.DataFrame, column: str) -> pd.Series:
    return rows[column] if column in rows else pd.Series(np.nan, index=rows.index)


def points(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that have a place on a roofline, with x (FLOP/B), y (TFLOP/s per device) and measured (bool)."""
    comp = cd.is_compile(df)
    # a compile row is drawn at its own MFU ceiling's point: one without a ceiling (a kernel XLA cannot count,
    # roofline.roofline) has none on the chart either
    ok = (~comp & cd.usable(df)) | (comp & (df["status"] == st.COMPILED) & _num(df, "mfu_ceiling").notna())
    rows = df[ok & _num(df, "arith_intensity").gt(0)].copy()
    if rows.empty:
        raise NoData("no rows with a roofline (arith_intensity): run or compile a suite with this version")
    flops = pd.Series([rl.work(r)[0] for r in rows.to_dict("records")], index=rows.index, dtype=float)
    floor = pd.concat([_num(rows, "bound_s"), _num(rows, "collective_s")], axis=1).max(axis=1)
    measured = ~cd.is_compile(rows)
    rows["x"] = _num(rows, "arith_intensity")
    rows["y"] = np.where(measured, flops / _num(rows, "median_s"), flops / floor) / TERA
    rows["measured"] = measured
    rows = rows[np.isfinite(rows["y"]) & (rows["y"] > 0)]
    if rows.empty:
        raise NoData("no roofline row has a FLOP count and a time")
    return rows


def shape_key(rows: pd.DataFrame) -> pd.Series:
    """One key per shape (every case column but the impl's own): the points a join line connects."""
    cols = [c for c in CASE_COLUMN_NAMES if c in rows and c not in _NOT_SHAPE]
    return cd.key(rows, cols + ["target"]) + cd.text(rows["measured"].astype(str))


def roofline(df: pd.DataFrame) -> Chart:
    rows = points(df)
    panels = cd.distinct(rows["device_kind"].astype(str))
    fig, axes = _panels(len(panels), 2 if len(panels) > 1 else 1, width=5.2, height=3.8)
    chart = Chart("roofline", fig)
    impls = cd.impl_order(rows["impl"])
    above = measured = 0
    for ax, kind in zip(axes, panels):
        p = rows[rows["device_kind"].astype(str) == kind]
        peak_tf = float(_num(p, "peak_tflops").median())
        peak_gb = float(_num(p, "peak_gbytes_per_s").median())
        ridge = peak_tf * TF_PER_GB / peak_gb
        lo = min(float(p["x"].min()), ridge) / 3
        hi = max(float(p["x"].max()), ridge) * 3
        xs = np.geomspace(lo, hi, 200)
        (roof,) = ax.plot(xs, np.minimum(peak_tf, xs * peak_gb / TF_PER_GB), color=ROOF_COLOUR, linewidth=1.6,
                          label=f"roof: min(peak, intensity x {_memory(p)} GB/s)")
        roof._xlabench_reference = True  # type: ignore[attr-defined]
        chart.artists[(kind, "roof")] = roof
        ax.axvline(ridge, color=ROOF_COLOUR, linewidth=0.8, linestyle=":")
        _draw_points(ax, chart, kind, p, impls)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        _log_ticks(ax.xaxis, lo, hi)
        roof_y = np.minimum(peak_tf, p["x"] * peak_gb / TF_PER_GB)
        above += int((p["measured"] & (p["y"] > roof_y * 1.05)).sum())
        measured += int(p["measured"].sum())
        low_y = min(float(p["y"].min()), peak_tf) / 5
        ax.set_ylim(low_y, max(float(p["y"].max()), peak_tf) * 1.8)  # room for the peak's label, not 4x the peak
        _label_panel(ax, kind, ridge, peak_tf)
    chart.key = _key(rows, impls)
    notes = ["filled: measured (FLOPs / median time); hollow: compile rows (FLOPs / roofline time); "
             "grey lines join the impls of one shape"]
    if cd.interpreted(rows):
        notes.append("interpreted Pallas kernels: XLA's figures are the interpreter's program, not the kernel's")
    if above:
        notes.append(_above_note(rows, above, measured))
    notes += _no_ceiling_notes(df)
    chart.notes += notes
    return _finish(chart, rows, "roofline", title=cd.title(rows, "roofline: FLOP/s vs arithmetic intensity"))


def _memory(p: pd.DataFrame) -> str:
    """The memory whose bandwidth is the roof's slope: a CPU host's (its streaming copy), else the chip's HBM."""
    return "memory" if (p["platform"].astype(str) == "cpu").all() else "HBM"


def _draw_points(ax: Any, chart: Chart, kind: str, p: pd.DataFrame, impls: list[str]) -> None:
    """One panel's points: grey lines joining the impls of a shape, a filled (measured) or hollow (compile)
    dot per row in its impl's colour."""
    for _, g in p.groupby(shape_key(p), sort=False):
        if len(g) > 1:
            g = g.sort_values("x")
            ax.plot(g["x"], g["y"], color="#bbbbbb", linewidth=0.8, zorder=1, label="_join")
    for impl in impls:
        for filled in (True, False):  # not `measured`: the caller's counter (#40: '84 of 0 measured')
            s = p[(p["impl"] == impl) & (p["measured"] == filled)]
            if s.empty:
                continue
            colour = style(impl).colour
            (pts,) = ax.plot(s["x"], s["y"], linestyle="none", marker="o", markersize=5.5, zorder=3,
                             markeredgecolor=colour, markerfacecolor=colour if filled else "none",
                             markeredgewidth=1.3, label="_pts")
            chart.artists[(kind, f"{impl} {'measured' if filled else 'compile'}")] = pts


def _label_panel(ax: Any, kind: str, ridge: float, peak_tf: float) -> None:
    ax.annotate(f"ridge {ridge:.0f} FLOP/B", (ridge, 0.03), xycoords=("data", "axes fraction"),
                xytext=(4, 0), textcoords="offset points", fontsize=8, color=ROOF_COLOUR)
    ax.annotate(f"peak {peak_tf:.3g} TFLOP/s", (ridge, peak_tf), xytext=(4, 4), textcoords="offset points",
                fontsize=8, color=ROOF_COLOUR, va="bottom")
    ax.set_title(kind, fontsize=10)
    ax.set_xlabel("arithmetic intensity (FLOP/B)")
    ax.set_ylabel("TFLOP/s per device")
    ax.grid(True, which="major", alpha=0.3)


def _no_ceiling_notes(df: pd.DataFrame) -> list[str]:
    """How many compiled rows have no point for want of an MFU ceiling (roofline.roofline gives none where XLA
    cannot count the kernel's FLOPs), and which impls: the chart leaves them out, the footer says so."""
    comp = df[cd.is_compile(df) & (df["status"] == st.COMPILED)]
    none = comp[_num(comp, "mfu_ceiling").isna()]
    if none.empty:
        return []
    blind = pd.Series([rl.uncounted(r) for r in none.to_dict("records")], index=none.index, dtype=bool)
    out = []
    for rows, why in ((none[blind], "XLA cannot count the kernel's FLOPs"), (none[~blind], "no roofline or FLOP count in the row")):
        if len(rows):
            per_impl = ", ".join(f"{impl} {n}" for impl, n in cd.text(rows["impl"]).value_counts().items())
            out.append(f"{len(rows)} of {len(comp)} compiled row(s) not drawn: no MFU ceiling ({why}: {per_impl})")
    return out


def _log_ticks(axis: Any, lo: float, hi: float) -> None:
    """Labels on a log axis that never overlap: none on the minor ticks (matplotlib labels some of them,
    '2x10^1 3x10^1 4x10^1', on a range of about a decade, and they ran into one smear); on a range under
    two decades, major ticks at 1, 2 and 5 of each decade, as plain numbers."""
    axis.set_minor_formatter(NullFormatter())
    if np.log10(hi / lo) < 2:
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def _above_note(rows: pd.DataFrame, above: int, measured: int) -> str:
    """Why measured points sit above the roof, and what the chart still says."""
    cpu = rows["measured"] & (cd.text(rows.get("platform", rows["device_kind"])) == "cpu")
    why = ("the CPU roof is a probe of this host (one matmul, one streaming copy), and caches serve a "
           "small step's bytes faster than the copy's memory" if cpu.any() else
           "the row's FLOP or byte counts (XLA's cost analysis) are not what the device executed")
    return (f"{above} of {measured} measured point(s) above the roof: {why}; read the points against "
            "each other (left-right: intensity, up-down: FLOP/s), not against the roof")


def _key(rows: pd.DataFrame, impls: list[Any]) -> list[Any]:
    """A colour per impl; filled and hollow (measured and compile rows) in black, no impl's colour, and
    only where both kinds are drawn (the footer says which is which)."""
    key: list[Any] = [Line2D([], [], linestyle="none", marker="o", color=style(i).colour, label=str(i)) for i in impls]
    if rows["measured"].any() and (~rows["measured"]).any():
        key.append(Line2D([], [], linestyle="none", marker="o", color="black", label="filled: measured"))
        key.append(Line2D([], [], linestyle="none", marker="o", markerfacecolor="none", color="black",
                          label="hollow: compile (ceiling)"))
    return key


def _panel_of(chart: Chart, rows: pd.DataFrame, pub: dict[str, Any]) -> Any:
    """The panel of the suite (and target) a published figure belongs to: its title names their model."""
    mine = rows
    if pub.get("suite") is not None:
        mine = mine[mine["suite"] == pub["suite"]]
    if pub.get("target"):
        mine = mine[mine["target"] == pub["target"]]
    if mine.empty:
        return None
    want = [str(mine["model"].iloc[0]), str(mine["target"].iloc[0])]
    return next((a for a in chart.figure.axes if a.axison and all(w in a.get_title() for w in want)), None)


def mfu_ceiling(df: pd.DataFrame) -> Chart:
    """Compile rows of a train suite: the MFU the roofline allows vs global batch, a line per sharding
    mode (colour) and impl (dash); published MFU figures of the suite (``published:``) as stars."""
    comp = cd.compile_rows(df)  # a line per sharding mode: the sharded workloads' rows (workloads/record.py)
    rows = comp[comp["workload"].isin([n for n, w in WORKLOADS.items() if w.sharded])].reset_index(drop=True)
    if rows.empty or _num(rows, "mfu_ceiling").isna().all():
        raise NoData("no train compile rows with an mfu_ceiling (xlabench compile SUITE --target NAME)")
    y = _num(rows, "mfu_ceiling").where(rows["status"] == st.COMPILED) * 100
    chart = _line_chart("mfu_ceiling", rows, x="global_batch", y=y, panel_keys=["backend", "target", "model"],
                        first=["sharding", "impl"], colour_by="sharding", dash_by="impl", ncols=2,
                        xlabel="global batch (sequences)", ylabel="MFU ceiling (%)",
                        what="MFU ceiling vs global batch (roofline of the compiled step)", spread=False)
    published = df.attrs.get("published") or []
    sources = []
    for pub in published:
        ax = _panel_of(chart, rows, pub)
        if ax is None:
            continue
        (star,) = ax.plot([pub["global_batch"]], [pub["mfu"] * 100], linestyle="none", marker="*", markersize=11,
                          color=style(pub["sharding"]).colour, markeredgecolor="#222222", zorder=4, label="_pub")
        chart.artists[("published", f"{pub['sharding']} {pub['global_batch']}")] = star
        sources.append(pub["source"])
    if sources:
        add_note(chart, "stars: published MFU, " + "; ".join(dict.fromkeys(sources)))
    return chart
