"""A markdown report of result rows: environment, best impl per shape, failures with reasons, charts.

Meant for a CI job summary or a pull request: plain GitHub markdown, images by relative link.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from xlabench import chartdata as cd
from xlabench import results
from xlabench.results import fmt_number


@dataclass(frozen=True)
class SummaryFigure:
    header: str
    column: str
    scale: float
    spec: str


# What a workload's summary shows beside the time (one place, so the tables of every suite agree).
FIGURES: dict[str, list[SummaryFigure]] = {
    "attention": [SummaryFigure("TFLOP/s", "tflops_per_s", 1, ".4g"), SummaryFigure("MFU %", "mfu", 100, ".2f")],
    "train": [SummaryFigure("tokens/s", "tokens_per_s", 1, ".4g"), SummaryFigure("MFU %", "mfu", 100, ".2f")],
    "paged_attention": [SummaryFigure("GB/s", "gbytes_per_s", 1, ".4g"), SummaryFigure("MBU %", "mbu", 100, ".2f")],
}
_DEFAULT_FIGURES = FIGURES["attention"]
_REASON_CHARS = 300


def _cell(v: Any) -> str:
    """A markdown table cell: one line, pipes escaped."""
    return " ".join(str(v).split()).replace("|", "\\|")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _impl(row: pd.Series) -> str:
    return f"{row['impl']} (interpret)" if cd.flag(row["interpret"]) else str(row["impl"])


def environment(df: pd.DataFrame) -> str:
    """One line per run: where and with what it ran, against which peak, and how its cases ended."""
    rows = []
    for run_id, r in df.groupby(cd.text(df["run_id"]), sort=False):
        first = r.iloc[0]
        counts = ", ".join(f"{int((r['status'] == s).sum())} {s}" for s in ("ok", "failed", "skipped"))
        peak = fmt_number(first["peak_tflops"], ".4g")
        rows.append([
            first["suite"], run_id, first["profile"] if pd.notna(first["profile"]) else "base",
            first["platform"], f"{first['device_kind']} ×{cd.fmt_value('', first['device_count'])}",
            first["framework_version"], f"{peak} ({first['peak_source']})" if peak else "",
            first["hostname"], first["git_sha"], f"{r['timestamp'].min()} .. {r['timestamp'].max()}", counts])
    return table(["suite", "run", "profile", "platform", "devices", "framework", "peak TFLOP/s per device",
                  "host", "git", "cases ended", "cases"], rows)


def shape_columns(rows: pd.DataFrame) -> list[str]:
    """The case columns that vary among these rows, impl aside: what a 'shape' is in this summary."""
    return results.varying(rows.to_dict("records"), [c for c in cd.DESCRIBING if c != "impl" and c in rows])


def summary(rows: pd.DataFrame) -> str:
    """Best impl per shape (fastest usable row), its figures, and its speedup over the naive baseline."""
    rows = rows.reset_index(drop=True)  # unique index: best.name finds its speedup
    workload = str(rows["workload"].iloc[0])
    figures = FIGURES.get(workload, _DEFAULT_FIGURES)
    shape = shape_columns(rows)
    speed = cd.speedup_over_baseline(rows)
    median = cd.metric(rows, "median_s")
    out = []
    groups = rows.groupby(cd.key(rows, shape), sort=False) if shape else [("", rows)]
    for _, g in groups:
        base = g[(g["impl"] == cd.BASELINE_IMPL) & cd.usable(g)]
        naive = fmt_number(median[base.index].min(), ".4g", 1e3) if len(base) else ""
        counts = f"{int(cd.usable(g).sum())}/{len(g)}"
        head = [cd.fmt_value(c, g[c].iloc[0]) for c in shape]
        if median[g.index].notna().any():
            best = g.loc[median[g.index].idxmin()]
            vals = [_impl(best), fmt_number(best["median_s"], ".4g", 1e3)]
            vals += [fmt_number(best[f.column], f.spec, f.scale) for f in figures]
            sp = speed[best.name]
            vals += [naive, f"{sp:.2f}x" if np.isfinite(sp) else ""]
        else:
            vals = ["(none usable)", "", *[""] * len(figures), naive, ""]
        out.append(head + vals + [counts])
    headers = shape + ["best impl", "median ms"] + [f.header for f in figures] + [
        f"{cd.BASELINE_IMPL} ms", f"speedup vs {cd.BASELINE_IMPL}", "usable/cases"]
    return table(headers, out)


def _case_label(row: pd.Series, shape: Sequence[str]) -> str:
    return ", ".join(f"{c}={cd.fmt_value(c, row[c])}" for c in shape)


def problems(df: pd.DataFrame) -> str:
    """Failed and skipped cases with their reasons, and wrong results with their errors."""
    parts = []
    for suite, rows in df.groupby(cd.text(df["suite"]), sort=False):
        shape = shape_columns(rows)
        bad = rows[rows["status"] != "ok"]
        wrong = rows[(rows["status"] == "ok") & ~cd.usable(rows)]
        if bad.empty and wrong.empty:
            continue
        lines = [[r["status"], _impl(r), _case_label(r, shape),
                  (str(r["error"]) if pd.notna(r["error"]) else "")[:_REASON_CHARS]] for _, r in bad.iterrows()]
        lines += [["wrong result", _impl(r), _case_label(r, shape),
                   f"max_abs_err {fmt_number(r['max_abs_err'], '.3g')} > err_tol {fmt_number(r['err_tol'], '.3g')}"]
                  for _, r in wrong.iterrows()]
        parts.append(f"### {suite}\n\n" + table(["status", "impl", "case", "reason"], lines))
    return "\n\n".join(parts) if parts else "None: every case ran and matched its reference."


def build(df: pd.DataFrame, sources: Sequence[Path], charts: dict[str, list[Path]], out: Path) -> str:
    """The whole report as markdown; chart paths become links relative to the report's folder."""
    suites = cd.distinct(df["suite"])
    md = [f"# xlabench report: {', '.join(map(str, suites))}", "",
          "Sources: " + ", ".join(f"`{p}`" for p in sources), ""]
    if cd.interpreted(df):
        md += ["> Rows marked *(interpret)* ran a Pallas kernel in the CPU interpreter: a pipeline check, "
               "not kernel speed.", ""]
    md += ["## Environment", "", environment(df), ""]
    for suite in suites:
        s_rows = df[df["suite"] == suite]
        for workload in cd.distinct(s_rows["workload"]):
            rows = s_rows[s_rows["workload"] == workload]
            md += [f"## {suite}" + (f" ({workload})" if workload != suite else ""), "",
                   f"Best impl per shape: the fastest row that ran and matched its reference; speedup = "
                   f"{cd.BASELINE_IMPL} median / best median for the same shape.", "", summary(rows), ""]
    md += ["## Failed, skipped and wrong cases", "", problems(df), ""]
    images = [(suite, p) for suite, paths in charts.items() for p in paths]
    if images:
        md += ["## Charts", ""]
        for suite, p in images:
            rel = Path(os.path.relpath(p, out.parent)).as_posix()
            md += [f"![{suite}: {p.stem}]({rel})", ""]
    return "\n".join(md)
