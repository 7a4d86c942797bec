"""A markdown report of result rows: environment, best impl per shape, failures with reasons, charts.

Meant for a CI job summary or a pull request: plain GitHub markdown, images by relative link.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from xlabench.report import best_config as best_lib
from xlabench.report import chartdata as cd
from xlabench.results.display import clock_note
from xlabench.report import summary as summary_lib
from xlabench import results
from xlabench.audit import marks
from xlabench.cells import clip
from xlabench.results import fmt_number
from xlabench.protocol import status as st
from xlabench.units import MS_PER_S
from xlabench.workloads import WORKLOADS
from xlabench.workloads.record import KERNEL_FIGURES


# Rows of a workload no record names (an older file's) show a kernel's figures beside the time.
_DEFAULT_FIGURES = list(KERNEL_FIGURES)
BEST_INTRO = ("Per impl and shape of each block-size sweep (>= 2 configurations, ok and correct rows): the fastest "
              "configuration that beats the kernel's default (block sizes unset) by the gate's test on the raw "
              "samples (Mann-Whitney U, Holm, interval beyond 5%), else 'no significant winner'; interpreted rows "
              "are never tuned from. `xlabench best RUN.csv -o tuned.yaml` writes them for a suite's `tuned:` key.")
FIT_INTRO = ("`xlabench compile` rows: per-device memory from XLA's memory_analysis of the program compiled for "
             "the target (oom: what libtpu said the program needs), against the device's HBM. Compile-only: "
             "nothing ran, so there are no timings.")
_REASON_CHARS = 300
_CLOCK_COLUMNS = ["clock", "median_s", "workload"]  # what results.clock_note reads of a row


def _cell(v: Any) -> str:
    """A markdown table cell: one line, pipes escaped."""
    return " ".join(str(v).split()).replace("|", "\\|")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _impl(row: pd.Series) -> str:
    """The impl, '(interpret)' when its kernel ran in the CPU interpreter, '(suspect)' when the row breaks an
    invariant (the reason: the Suspect rows section)."""
    tags = ["interpret"] * summary_lib.interpreted(row) + [marks.MARK] * bool(marks.suspect(row))
    return " ".join([str(row["impl"]), *(f"({t})" for t in tags)])


def suspects(df: pd.DataFrame) -> str:
    """A table of the suspect rows: impl, case (the parameters that vary among the suite's rows), reasons."""
    parts = []
    for suite in cd.distinct(df["suite"]) if "suspect" in df else []:
        rows = df[df["suite"] == suite]
        shape = shape_columns(rows)
        lines = [[str(r["impl"]), _case_label(r, shape), marks.suspect(r)] for _, r in rows.iterrows()
                 if marks.suspect(r)]
        if lines:
            parts.append(f"### {suite}\n\n" + table(["impl", "case", "reasons (rule: figures)"], lines))
    return "\n\n".join(parts)


def _suspect_parts(df: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The report's lines on suspect rows: a note at the top, and the section listing them (none: empty)."""
    found = suspects(df)
    if not found:
        return [], []
    return ([f"> Rows marked *({marks.MARK})* break an invariant (docs/audit.md): their numbers are kept as "
             "measured, the reasons are under [Suspect rows](#suspect-rows).", ""],
            ["## Suspect rows", "", found, ""])


def incomplete(df: pd.DataFrame) -> dict[str, str]:
    """run id -> '9 of 40 cases (interrupted by SIGINT)' for each source of these rows cut short."""
    out: dict[str, str] = {}
    for src in df.attrs.get("sources", []):
        p = results.run_progress(src)
        if p is not None and not p.complete:
            out.update({run_id: p.text() for run_id in p.run_ids})
    return out


def environment(df: pd.DataFrame) -> str:
    """One line per run: where and with what it ran, against which peak, and how its cases ended (a run cut
    short: how many of its planned cases it holds)."""
    rows = []
    cut = incomplete(df)
    for run_id, r in df.groupby(cd.text(df["run_id"]), sort=False):
        first = r.iloc[0]
        compiled = bool(cd.is_compile(r).all())
        statuses = results.COMPILE_STATUSES if compiled else results.STATUSES
        counts = ", ".join(f"{int((r['status'] == s).sum())} {s}" for s in statuses
                           if not compiled or (r["status"] == s).any())
        peak = _peaks(r)
        platform = first["platform"]
        if compiled:  # not a run: where it was compiled for, not where it ran
            platform = f"{platform} (compile-only for {first['target']}: {first['topology']})"
        rows.append([
            first["suite"], run_id, first["profile"] if pd.notna(first["profile"]) else "base",
            platform, f"{first['device_kind']} ×{cd.fmt_value('', first['device_count'])}",
            first["framework_version"], peak,
            first["hostname"], first["git_sha"], f"{r['timestamp'].min()} .. {r['timestamp'].max()}",
            counts + (f"; incomplete: {cut[run_id]}" if run_id in cut else "")])
    return table(["suite", "run", "profile", "platform", "devices", "framework", "peak TFLOP/s per device",
                  "host", "git", "cases ended", "cases"], rows)


def _peaks(run: pd.DataFrame) -> str:
    """The run's peak TFLOP/s per device and its source; every one it holds, with its rows, when its rows
    were rated against more than one (a CSV resumed before the meta kept the run's peak)."""
    said: dict[str, int] = {}
    for v, src in zip(run["peak_tflops"], run["peak_source"] if "peak_source" in run else [None] * len(run)):
        peak = fmt_number(v, ".4g")
        if peak:
            key = f"{peak} ({src})" if isinstance(src, str) and src else peak
            said[key] = said.get(key, 0) + 1
    if len(said) < 2:
        return next(iter(said), "")
    return "; ".join(f"{k}: {n} rows" for k, n in said.items())


def shape_columns(rows: pd.DataFrame) -> list[str]:
    """The case columns that vary among these rows, impl aside: what a 'shape' is in this summary."""
    cols = [c for c in cd.DESCRIBING if c != "impl" and c in rows]
    return results.varying_columns({c: rows[c].tolist() for c in cols})  # by column: no per-row records


def summary(rows: pd.DataFrame, samples: cd.Samples | None = None) -> str:
    """Best impl per shape (fastest usable row), its figures, and its speedup over the naive baseline
    (cd.baseline_seconds; ``samples``: the rows' samples, default read from their files)."""
    rows = rows.reset_index(drop=True)  # unique index: best.name finds its speedup
    workload = str(rows["workload"].iloc[0])
    figures = WORKLOADS[workload].figures if workload in WORKLOADS else _DEFAULT_FIGURES
    shape = shape_columns(rows)
    base_s = cd.baseline_seconds(rows, samples)  # one naive time per shape, whatever its block columns
    median = cd.metric(rows, "median_s").to_numpy()
    base = base_s.to_numpy()
    usable = cd.usable(rows).to_numpy()
    out = []
    for at in cd.positions(cd.key(rows, shape).tolist() if shape else [""] * len(rows)):
        naive = fmt_number(base[at[0]], ".4g", MS_PER_S)
        counts = f"{int(usable[at].sum())}/{len(at)}"
        head = [cd.fmt_value(c, rows[c].iloc[at[0]]) for c in shape]
        if not np.isnan(median[at]).all():
            best = rows.loc[at[np.nanargmin(median[at])]]  # the first fastest, as idxmin
            vals = [_impl(best), fmt_number(best["median_s"], ".4g", MS_PER_S)]
            vals += [fmt_number(best[f.column], f.spec, f.scale) for f in figures]
            sp = base[best.name] / median[best.name]
            vals += [naive, f"{sp:.2f}x" if np.isfinite(sp) else ""]
        else:
            vals = ["(none usable)", "", *[""] * len(figures), naive, ""]
        out.append(head + vals + [counts])
    headers = shape + ["best impl", "median ms"] + [f.header for f in figures] + [
        f"{cd.BASELINE_IMPL} ms", f"speedup vs {cd.BASELINE_IMPL}", "usable/cases"]
    return table(headers, out)


def _gib(v: Any) -> str:
    return fmt_number(v, ".2f")


def _counts(line: pd.Series) -> str:
    """'4 compiled, 1 oom' from a fit_summary line's status counts."""
    return ", ".join(f"{int(line[s])} {s}" for s in results.COMPILE_STATUSES if line[s])


def fit_train(rows: pd.DataFrame) -> str:
    """Per (target, sharding, impl): the largest global batch that compiled within HBM, its GiB per device
    and HBM %, and the smallest batch that did not fit with what it needed."""
    workload = str(rows["workload"].iloc[0])
    fs = cd.fit_summary(rows, workload)
    keys = cd.fit_keys(rows, workload)
    keys = keys[:3] + [k for k in keys[3:] if cd.text(fs[k]).nunique() > 1]  # extras that tell lines apart
    out = []
    for _, f in fs.iterrows():
        out.append([cd.fmt_value(k, f[k]) for k in keys] + [
            cd.fmt_value("", f["fit_x"]) if pd.notna(f["fit_x"]) else "none",
            _gib(f["fit_gib"]), fmt_number(f["fit_fraction"], ".0f", 100),
            cd.fmt_value("", f["oom_x"]) if pd.notna(f["oom_x"]) else "none",
            _gib(f["oom_gib"]), _gib(f["capacity_gib"]), _counts(f)])
    return table(keys + ["largest batch that fits", "GiB per device", "HBM %", "smallest batch that does not fit",
                         "needs GiB", "HBM GiB", "cases"], out)


def fit_kernels(rows: pd.DataFrame) -> str:
    """Attention / paged compile rows: how the cases of each impl ended, and the oom cases."""
    shape = shape_columns(rows)
    keys = ["target", "impl"]
    counts = []
    for _, g in rows.groupby(cd.key(rows, keys), sort=False):
        counts.append([g["target"].iloc[0], g["impl"].iloc[0]] + [int((g["status"] == s).sum())
                                                                   for s in results.COMPILE_STATUSES])
    order = cd.impl_order(rows["impl"])
    counts.sort(key=lambda r: (str(r[0]), order.index(r[1]) if r[1] in order else 99))
    md = table(keys + list(results.COMPILE_STATUSES), counts)
    mem = cd.memory_gib(rows)
    oom = rows[rows["status"] == st.OOM]
    if len(oom):
        lines = [[r["target"], r["impl"], _case_label(r, [c for c in shape if c not in keys]), _gib(mem[i]),
                  _gib(cd.capacity_gib(rows).get(i))] for i, r in oom.iterrows()]
        md += "\n\nDoes not fit (oom):\n\n" + table(["target", "impl", "case", "needs GiB", "HBM GiB"], lines)
    return md


def fit(rows: pd.DataFrame) -> str:
    """The Fit section's table for one suite's compile rows (`xlabench compile`)."""
    rows = rows.reset_index(drop=True)
    w = WORKLOADS.get(str(rows["workload"].iloc[0]))
    return fit_train(rows) if w is not None and w.fit is not None and w.fit.largest_fit else fit_kernels(rows)


BOUNDS_INTRO = ("Per case, the roofline of its program (xlabench/roofline.py): arithmetic intensity (FLOP per byte "
                "of HBM traffic), the time the device's peak FLOP/s, HBM and interconnect bandwidth allow, and which "
                "of the three bounds it. Measured rows: `frac` = roofline time / median (1: at the roofline). "
                "Compile rows: `MFU ceiling` = the MFU that roofline time allows. Overlap of compute and "
                "communication, and DCN between slices, are not modelled.")


def bounds(rows: pd.DataFrame) -> str:
    """The 'What bounds each case' table of one suite's rows (run or compile)."""
    rows = rows[rows["arith_intensity"].notna()].reset_index(drop=True)
    if rows.empty:
        return ""
    shape = [c for c in shape_columns(rows) if c not in ("device_kind", "framework_version", "run_id", "target")]
    comp = cd.is_compile(rows)
    counts = rows["bound_by"].value_counts()
    lines = []
    for i, r in rows.iterrows():
        where = f"compile {r['target']}" if comp[i] else "run"
        lines.append([_impl(r), *[cd.fmt_value(c, r[c]) for c in shape], where,
                      fmt_number(r["arith_intensity"], ".3g"), fmt_number(r["bound_s"], ".3g", MS_PER_S),
                      fmt_number(r["collective_s"], ".3g", MS_PER_S), r["bound_by"],
                      "" if comp[i] else fmt_number(r["roofline_frac"], ".2f"),
                      fmt_number(r["mfu_ceiling"], ".1f", 100) if comp[i] else ""])
    head = ", ".join(f"{int(n)} {k}-bound" for k, n in counts.items())
    notes = rows["roofline_note"].dropna().astype(str)
    md = head + "\n\n" + table(["impl", *shape, "rows", "FLOP/B", "roofline ms", "collective ms", "bound by",
                                 "frac", "MFU ceiling %"], lines)
    if len(notes):
        md += f"\n\n{len(notes)} row(s) beat their roofline by more than 5%: " + "; ".join(dict.fromkeys(notes))
    return md


def _case_label(row: pd.Series, shape: Sequence[str]) -> str:
    return ", ".join(f"{c}={cd.fmt_value(c, row[c])}" for c in shape)


def _reason(r: pd.Series) -> str:
    return clip(str(r["error"]) if pd.notna(r["error"]) else "", _REASON_CHARS)


def _fold_skips(bad: pd.DataFrame) -> list[tuple[Any, list[Any]]]:
    """(first row, rows) per line of the problems table: skipped rows that share a reason (its head, as
    the run summary folds them) are one line, any other row is its own."""
    out: dict[Any, tuple[Any, list[Any]]] = {}
    for i, r in bad.iterrows():
        k = (st.SKIPPED, str(r.get("target")), summary_lib.skip_reason(r["error"])) if r["status"] == st.SKIPPED else i
        out.setdefault(k, (i, []))[1].append(i)
    return list(out.values())


def problems(df: pd.DataFrame) -> str:
    """Failed and skipped cases with their reasons, and wrong results with their errors."""
    parts = []
    for suite, rows in df.groupby(cd.text(df["suite"]), sort=False):
        shape = shape_columns(rows)
        bad = rows[~rows["status"].isin((st.OK, *cd.COMPILE_ONLY_STATUSES))]  # compiled, oom: under Fit
        wrong = rows[(rows["status"] == st.OK) & ~cd.usable(rows)]
        if bad.empty and wrong.empty:
            continue
        comp = cd.is_compile(rows)
        # a compile row among run rows or other targets' rows says which target it was compiled for
        tag = bool(comp.any()) and (bool((~comp).any()) or cd.text(rows.loc[comp, "target"]).nunique() > 1)
        lines = []
        for i, group in _fold_skips(bad):
            r = bad.loc[i]
            status = f"{r['status']} (compile for {r['target']})" if tag and comp[i] else r["status"]
            if len(group) == 1:
                lines.append([status, _impl(r), _case_label(r, shape), _reason(r)])
                continue
            rs = bad.loc[group]
            errors = cd.distinct(rs["error"].map(lambda e: str(e) if pd.notna(e) else ""))
            ids = "<br>".join(f"`{c['case_id']}` {_impl(c)}: {_case_label(c, shape)}" for _, c in rs.iterrows())
            lines.append([f"{len(group)} cases {status}", ", ".join(cd.distinct(rs.apply(_impl, axis=1))),
                          f"<details><summary>{len(group)} case ids</summary>{ids}</details>",
                          _reason(r) if len(errors) == 1 else summary_lib.skip_reason(r["error"])])
        lines += [["wrong result", _impl(r), _case_label(r, shape), summary_lib.wrong_note(r) or
                   f"max_abs_err {fmt_number(r['max_abs_err'], '.3g')} > err_tol {fmt_number(r['err_tol'], '.3g')}"]
                  for _, r in wrong.iterrows()]
        parts.append(f"### {suite}\n\n" + table(["status", "impl", "case", "reason"], lines))
    return "\n\n".join(parts) if parts else "None: every case ran and matched its reference."


def traces(df: pd.DataFrame, sources: Sequence[Path], out: Path) -> str:
    """A table linking every case's kept profile files (the ``traces`` of each run's meta JSON)."""
    lines = []
    for src in sources:
        kept = results.read_meta(Path(src)).get("traces") or {}
        rows = df[cd.text(df["case_id"]).isin(kept)]
        shape = shape_columns(rows) if len(rows) else []
        for _, r in rows.iterrows():
            files = [Path(f) for f in kept[str(r["case_id"])]]
            shown = ", ".join(f"[{f.name}]({Path(os.path.relpath(f, out.parent)).as_posix()})" for f in files)
            lines.append([_impl(r), _case_label(r, shape), shown])
    return table(["impl", "case", "trace files"], lines) if lines else ""


def build(df: pd.DataFrame, sources: Sequence[Path], charts: dict[str, list[Path]], out: Path) -> str:
    """The whole report as markdown; chart paths become links relative to the report's folder."""
    suites = cd.distinct(df["suite"])
    md = [f"# xlabench report: {', '.join(map(str, suites))}", "",
          "Sources: " + ", ".join(f"`{p}`" for p in sources), ""]
    if cd.interpreted(df):
        md += ["> Rows marked *(interpret)* ran a Pallas kernel in the CPU interpreter: a pipeline check, "
               "not kernel speed.", ""]
    intro, section = _suspect_parts(df)
    if cut := incomplete(df):
        md += [f"> Incomplete run(s), cut short before every case ran: {'; '.join(f'`{k}` {v}' for k, v in cut.items())}"
               " (see Environment; `xlabench run SUITE --resume RUN.csv` finishes one).", ""]
    md += intro + ["## Environment", "", environment(df), ""]
    runs, compiles = cd.run_rows(df), cd.compile_rows(df)
    samples = cd.load_samples(sources)
    for suite in suites:
        s_rows = runs[runs["suite"] == suite]
        for workload in cd.distinct(s_rows["workload"]):
            rows = s_rows[s_rows["workload"] == workload]
            md += [f"## {suite}" + (f" ({workload})" if workload != suite else ""), "",
                   f"Best impl per shape: the fastest row that ran and matched its reference; speedup = "
                   f"{cd.BASELINE_IMPL} median / best median for the same shape"
                   + (f"; {clock}." if (clock := clock_note(rows[_CLOCK_COLUMNS].to_dict("records"))) else "."), "", summary(rows, samples), ""]
    picks = best_lib.best_configs(runs, samples)
    if picks:
        headers, rows = best_lib.table_rows(picks)
        md += ["## Best configuration per shape", "", BEST_INTRO, "", table(headers, rows), ""]
    if len(compiles):
        md += ["## Fit", "", FIT_INTRO, ""]
        for suite in cd.distinct(compiles["suite"]):
            s_rows = compiles[compiles["suite"] == suite]
            for workload in cd.distinct(s_rows["workload"]):
                md += [f"### {suite}" + (f" ({workload})" if workload != suite else ""), "",
                       fit(s_rows[s_rows["workload"] == workload]), ""]
    bound_md = [(suite, bounds(df[df["suite"] == suite])) for suite in suites]
    if any(b for _, b in bound_md):
        md += ["## What bounds each case", "", BOUNDS_INTRO, ""]
        for suite, b in bound_md:
            if b:
                md += [f"### {suite}", "", b, ""]
    links = traces(df, sources, out)
    if links:
        md += ["## Traces", "", "Per-case profiles kept by `xlabench run --trace DIR`: `.xplane.pb` opens in xprof / "
               "TensorBoard (`tensorboard --logdir` the case's folder), `perfetto_trace.json.gz` in ui.perfetto.dev.",
               "", links, ""]
    md += ["## Failed, skipped and wrong cases", "", problems(df), ""]
    md += section
    images = [(suite, p) for suite, paths in charts.items() for p in paths]
    if images:
        md += ["## Charts", ""]
        for suite, p in images:
            rel = Path(os.path.relpath(p, out.parent)).as_posix()
            md += [f"![{suite}: {p.stem}]({rel})", ""]
    return "\n".join(md)
