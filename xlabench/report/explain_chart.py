"""The `explain` chart: one horizontal bar per explained row (the ``explain_*`` columns `xlabench explain`
writes), its step time per device stacked by category, idle (wall less device time) at the end.
Estimates (compile rows) are hatched and say so in their label."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from xlabench.explain.categories import CATEGORIES
from xlabench import results
from xlabench.report.chart_parts import Chart, NoData, _finish
from xlabench.units import to_ms

# One colour per category (tab10 order), idle grey.
COLOURS = dict(zip([k for k, _ in CATEGORIES], ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                                                 "#7f7f7f"]))
IDLE = ("idle", "idle (wall less device time)", "#d9d9d9")
GAP = ("gap", "device time between ops", "#f3e79b")
def _labels(rows: pd.DataFrame) -> list[str]:
    """Each bar named by what tells its row apart from the others (results.case_labels): its backend and
    impl where they differ, then the parameters that differ (the impl alone where nothing does)."""
    records = rows.to_dict("records")
    lead = tuple(results.varying(records, ["backend", "impl"]))
    if not lead and not results.varying(records, results.LABEL_KEYS):
        lead = ("impl",)
    return [label + (" (estimate)" if r["explain_source"] == "estimate" else "")
            for label, r in zip(results.case_labels(records, lead), records)]


def explain_bars(df: pd.DataFrame) -> Chart:
    """Step time per device by category, one bar per row that `xlabench explain` filled in."""
    if "explain_step_s" not in df:
        raise NoData("no explain_* columns (run `xlabench explain RUN.csv` first)")
    rows = df[df["explain_step_s"].notna()].reset_index(drop=True)
    if rows.empty:
        raise NoData("no row explained (run `xlabench explain RUN.csv` first)")
    parts = [(k, label, COLOURS[k]) for k, label in CATEGORIES] + [GAP, IDLE]
    estimate = rows["explain_source"] == "estimate"
    seconds = {k: rows[f"explain_{k}_s"].fillna(0.0) for k in COLOURS}
    # the device time no op event covers (shown, never spread over the categories)
    seconds["gap"] = (rows["explain_step_s"] - sum(seconds.values())).clip(lower=0)
    seconds["idle"] = rows["explain_idle_s"].fillna(0.0)
    drawn = [p for p in parts if seconds[p[0]].any()]
    # tall enough for the bars and for the legend beside them (one entry per part drawn, + the hatch key)
    fig = Figure(figsize=(10, max(1.6 + 0.45 * len(rows), 1.9 + 0.3 * (len(drawn) + estimate.any()))),
                 layout="constrained")
    ax = fig.add_subplot()
    chart = Chart("explain", fig)
    y = list(range(len(rows)))[::-1]  # the first row on top
    left = pd.Series(0.0, index=rows.index)
    for key, label, colour in drawn:
        ms = to_ms(seconds[key])
        bars = ax.barh(y, ms, left=left, color=colour, label=label, height=0.6, edgecolor="white", linewidth=0.5)
        for bar, est in zip(bars, estimate):
            if est:
                bar.set_hatch("//")
        chart.artists[("", key)] = bars
        left += ms
    ax.set_yticks(y, _labels(rows))
    ax.set_xlabel("ms per step per device")
    ax.grid(True, axis="x", alpha=0.3)
    if estimate.any():
        chart.proxies.append(Patch(facecolor="white", edgecolor="#444444", hatch="//", label="estimate (no trace)"))
        chart.notes.append("hatched: compile rows, estimated from the optimized HLO under a roofline (no trace)")
    if (~estimate).any():
        chart.notes.append("measured: each op's own time in the kept profile (xlabench explain); between ops: device "
                           "time no op covers; idle: wall time per step less device time")
    return _finish(chart, rows, "where the step's time goes, by category of HLO op")
