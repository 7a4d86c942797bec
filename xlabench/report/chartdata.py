"""Reading result rows for charts and reports: which rows count, what splits a series, what a title says.

Free of matplotlib, so the plots and the markdown report share one reading of the rows: a failed,
skipped or wrong-result case is a gap (NaN), never a zero, and never a "best" implementation.
"""

from __future__ import annotations


import re
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from xlabench import hardware

from xlabench import impls, results
from xlabench.impls.kernels import naive as naive_kernel
from xlabench.results.schema import KERNEL_OPTIONS
from xlabench.stats.summary import median
from xlabench.protocol import status as st
from xlabench.units import GIB
from xlabench.workloads import WORKLOADS
from xlabench.workloads.record import FitChart

INTERPRET_NOTE = "(CPU interpret: pipeline check, not kernel speed)"
BASELINE_IMPL = naive_kernel.NAME

# Columns that describe a case and may therefore split a series or a table row. The environment
# columns are here so that two device kinds or two framework versions never share one line.
DESCRIBING: list[str] = [c for c in results.CASE_COLUMN_NAMES if c != "workload"] + [
    "device_kind", "framework_version", "run_id"]
# Kernel tuning knobs (results.schema.KERNEL_OPTIONS): the naive baseline has none, so they never take
# part in matching a kernel row with its baseline row.
TUNING = KERNEL_OPTIONS
# `xlabench compile` rows: no timings; per-device memory against the target's HBM instead.
COMPILE_ONLY_STATUSES = tuple(s for s in results.COMPILE_STATUSES if s not in results.STATUSES)
MEMORY_STATUSES = (st.COMPILED, st.OOM)  # rows whose peak_memory_bytes is a figure to draw
COMPILE_NOTE = "compile-only: memory from XLA's memory_analysis"
# Canonical orders, so legends and bar groups read the same in every chart.
SHARDING_ORDER = ("dp", "fsdp", "tp", "2d", "auto")
MODE_ORDER = ("fwd", "fwd_bwd")


def load(paths: Sequence[Path]) -> pd.DataFrame:
    """Rows of several results CSVs in one frame carrying every schema column.

    Raises results.ResultsFileError for a missing or foreign file. A file given twice counts once.
    """
    frames = [results.read_rows(Path(p)) for p in paths]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=results.COLUMN_NAMES)
    df = pd.concat(frames, ignore_index=True)
    df = df.reindex(columns=list(dict.fromkeys(results.COLUMN_NAMES + list(df.columns))))
    # .copy(): one block per dtype (concat and reindex leave ~130 fragments, and every row selection of the
    # report copied each one: 0.45 of its 3.3 s of tables)
    df = df.drop_duplicates(subset=["run_id", "case_id"], keep="last").reset_index(drop=True).copy()
    df.attrs["published"] = Shared(published(paths))
    df.attrs["sources"] = Shared(str(p) for p in paths)  # where baseline_seconds finds the rows' samples
    return df


class Shared(tuple):
    """A value of ``DataFrame.attrs`` that no one changes. pandas deep-copies the attrs into every frame
    made from one (a report made ~19,000 such frames: 2 of its 11 s of CPU, in copies of the published
    figures); a copy of this is itself."""

    def __deepcopy__(self, memo: dict) -> "Shared":
        return self


Samples = dict[tuple[str, str], np.ndarray]


def load_samples(paths: Sequence[Path]) -> Samples:
    """The raw samples beside each results CSV, by (run_id, case_id)."""
    out: Samples = {}
    for p in paths:
        s = results.read_samples(Path(p))
        s["seconds"] = pd.to_numeric(s["seconds"], errors="coerce")
        for (run_id, case_id), g in s.groupby(["run_id", "case_id"], sort=False):
            out[(str(run_id), str(case_id))] = g.sort_values("iteration")["seconds"].to_numpy(dtype=float)
    return out


def published(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The suites' ``published:`` figures, from each run's meta file (its suite spec), once each."""
    out: list[dict[str, Any]] = []
    for p in paths:
        spec = results.read_meta(Path(p)).get("suite_spec") or {}
        for fig in spec.get("published") or []:
            fig = {**fig, "suite": spec.get("name")}
            if fig not in out:
                out.append(fig)
    return out


def usable(df: pd.DataFrame) -> pd.Series:
    """Rows whose figures may be drawn or ranked: measured ok and not known to be wrong."""
    return (df["status"] == st.OK) & (df["correct"] != False)  # noqa: E712 (a typed bool; empty counts as not wrong)


def metric(df: pd.DataFrame, column: str, scale: float = 1.0) -> pd.Series:
    """A numeric column where the row is usable, NaN elsewhere (a gap in a chart, never a zero)."""
    return df[column].where(usable(df)) * scale


def interpreted(df: pd.DataFrame) -> bool:
    """Whether any of these rows ran a Pallas kernel in the CPU interpreter."""
    return bool((df["interpret"] == True).any())  # noqa: E712 (a typed bool; empty is not interpreted)


def distinct(values: Iterable[Any]) -> list[Any]:
    """Distinct non-empty values in first-seen order."""
    out: list[Any] = []
    for v in values:
        if v is None or (isinstance(v, float) and np.isnan(v)) or v == "":
            continue
        if v not in out:
            out.append(v)
    return out


def missing(value: Any) -> bool:
    """An empty cell: None or NaN (a block size left to the kernel's default reads back as NaN)."""
    return value is None or (isinstance(value, float) and np.isnan(value))


def levels(values: Iterable[Any]) -> list[Any]:
    """Distinct values in first-seen order, the empty cell kept once as NaN: a value of its own (a
    sweep's default block sizes), which `distinct` drops and `list.index` never finds (NaN != NaN)."""
    out = distinct(values := list(values))
    return out + [np.nan] if any(missing(v) for v in values) else out


def position(values: Sequence[Any], value: Any) -> int:
    """The index of `value` in `values` (of levels()), an empty cell matching the NaN."""
    return next(i for i, v in enumerate(values) if (missing(v) and missing(value)) or (not missing(v) and v == value))


def text(values: pd.Series | pd.DataFrame) -> pd.Series | pd.DataFrame:
    """Values as text with empty cells as 'nan' (astype(str) keeps NaN in pandas 3): for grouping and keys."""
    return values.map(str)


def split_keys(df: pd.DataFrame, x: str, fixed: Sequence[str]) -> list[str]:
    """Describing columns that take several values at one x within a group of `fixed` values.

    These must split a series, or one line would zig-zag between cases. Columns that move with x
    (attention's batch, zipped with seq_len) or with a fixed key (a sharding mode's mesh) do not, nor
    does one that follows a column already chosen (framework_version follows backend).
    """
    keyed = text(df[list(dict.fromkeys(c for c in [*DESCRIBING, *fixed, x] if c in df))])  # fixed: also target
    chosen: list[str] = []
    for c in DESCRIBING:
        group = list(fixed) + [x] + chosen
        if c in df and c not in group and keyed.groupby(group)[c].nunique().max() > 1:
            chosen.append(c)
    return chosen


def sort_order(values: Iterable[Any], canonical: Sequence[Any]) -> list[Any]:
    """Values in the canonical order first, then the rest sorted as text."""
    vals = distinct(values)
    known = [v for v in canonical if v in vals]
    return known + sorted((v for v in vals if v not in known), key=str)


def impl_order(values: Iterable[Any]) -> list[Any]:
    """Impl names in catalog order (naive first), unknown names after."""
    return sort_order(values, [i.name for i in impls.CATALOG])


def fmt_value(column: str, value: Any) -> str:
    """A case parameter as a short label: causal True -> 'causal', 2048.0 -> '2048'."""
    if column == "causal":
        return {True: "causal", False: "non-causal"}.get(value, str(value))
    if isinstance(value, float) and np.isnan(value):
        return "default" if column in TUNING else "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def label(columns: Sequence[str], values: Sequence[Any], named: Sequence[str] = ()) -> str:
    """'flash · seq_len=256': the first columns' values bare, the `named` ones as name=value."""
    parts = []
    for c, v in zip(columns, values):
        parts.append(f"{c}={fmt_value(c, v)}" if c in named else fmt_value(c, v))
    return " · ".join(parts)


def title(df: pd.DataFrame, what: str) -> str:
    """Chart title, two lines: what is shown and the suite; the device kind and count, and the
    interpret note. The versions go to the footer (versions())."""
    suites = ", ".join(str(s) for s in distinct(df["suite"]))
    # Rows planned as skipped never reached a worker: they have no device or version to show.
    env = df.dropna(subset=["device_kind"])
    count = env["device_count"].map(lambda c: fmt_value("", c))
    if "target" in env and "devices" in env:  # a compile: the devices its mesh spans, of the target's ("×1 of 8")
        spans = [f"{fmt_value('', d)} of {c}" if fmt_value("", d) != c else c for d, c in zip(env["devices"], count)]
        count = pd.Series(spans, index=env.index).where(env["target"].notna() & env["devices"].notna(), count)
    shown: dict[tuple[str, str], str] = {}  # one chip once, as the first framework named it (JAX 'TPU v5 lite', TorchTPU 'TPU v5e')
    for k, c in zip(env["device_kind"], count):
        shown.setdefault((hardware.chip_name(k), c), str(k))
    devices = ", ".join(f"{k} ×{c}" for (_, c), k in shown.items())
    second = " · ".join(p for p in (devices, INTERPRET_NOTE if interpreted(df) else "") if p)
    return "\n".join(p for p in (f"{what}: {suites}", second) if p)


def versions(df: pd.DataFrame) -> str:
    """The footer's versions: every framework version the rows ran with and xlabench's git commit."""
    env = df.dropna(subset=["device_kind"])
    frameworks = _merged_versions([str(v) for v in distinct(env["framework_version"].dropna())])
    shas = [str(v) for v in distinct(env["git_sha"].dropna())] if "git_sha" in env else []
    return " · ".join(frameworks + ([f"xlabench {', '.join(shas)}"] if shas else []))


def _merged_versions(found: list[str]) -> list[str]:
    """Versions that extend another ('jax A / jaxlib B / libtpu C' of compile rows beside a run's 'jax A /
    jaxlib B') merged into it: 'jax A / jaxlib B (+ libtpu C)', so the shared part is printed once."""
    out: dict[str, list[str]] = {}
    for v in sorted(found, key=len):
        base = next((b for b in out if v.startswith(b + " / ")), None)
        if base is None:
            out[v] = []
        else:
            out[base].append(v[len(base) + 3:])
    merged = {b: b + (f" (+ {'; '.join(extra)})" if extra else "") for b, extra in out.items()}
    return [merged[v] for v in found if v in merged]


_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # no sign: in 'uniform:256-1024' the dash is a range


def context_length(spec: Any) -> float:
    """A number to place a paged case's context_lens spec on an axis: the mean of the numbers in it.

    A plain number is itself; 'uniform:256-1024' -> 640; '[1, 16, 17]' -> the mean length.
    """
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return float(spec)
    nums = [float(n) for n in _NUMBER.findall(str(spec))]
    return float(np.mean(nums)) if nums else float("nan")


def key(df: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """One text key per row from `columns` (NaN-safe, dtype-safe: for matching rows across frames)."""
    if not columns:
        return pd.Series([""] * len(df), index=df.index)
    cols = [text(df[c]).tolist() for c in columns]  # joined by column: agg(axis=1) made a Series a row
    return pd.Series(["|".join(t) for t in zip(*cols)], index=df.index, dtype="str")


def positions(keys: Sequence[Any]) -> list[np.ndarray]:
    """The positions of each key's rows, keys in first-seen order: groupby(keys, sort=False)'s groups without
    a frame each (keys never NaN: cd.key's, tuples of cd.text)."""
    at: dict[Any, list[int]] = {}
    for i, k in enumerate(keys):
        at.setdefault(k, []).append(i)
    return [np.array(v) for v in at.values()]


def match_columns(df: pd.DataFrame) -> list[str]:
    """Columns that identify a shape across impls: every describing column but impl and tuning knobs."""
    return [c for c in DESCRIBING if c in df and c != "impl" and c not in TUNING]


def baseline_seconds(df: pd.DataFrame, samples: Samples | None = None, baseline: str = BASELINE_IMPL) -> pd.Series:
    """The baseline's time for each row's shape: the one rule behind the summary's naive column, the
    speedups and the speedup chart (docs/plots.md). The usable baseline rows of one shape (match_columns:
    every describing column equal but impl and the block knobs; a block sweep runs naive once per block
    setting, and those rows are one case measured again) are pooled: the median of all their samples
    where every one of them has samples, else the median of their medians. Not the first row (a sweep's
    first ran slow) nor the fastest (the minimum of several noisy medians is biased low): the median of
    every measurement of the one program, robust to a row that ran slow or fast. NaN without one.

    ``samples``: load_samples of the rows' files; default: read from the files cd.load read them from."""
    k = key(df, match_columns(df))
    base_rows = df[usable(df) & (df["impl"] == baseline)]
    if samples is None:
        samples = load_samples(df.attrs.get("sources", [])) if len(base_rows) else {}
    times: dict[str, float] = {}
    for shape, g in base_rows.groupby(k[base_rows.index], sort=False):
        pooled = [samples.get((str(run), str(case))) for run, case in zip(g["run_id"], g["case_id"])]
        if all(p is not None and len(p) for p in pooled):
            times[shape] = median(np.concatenate(pooled))  # type: ignore[arg-type]
        else:
            times[shape] = float(metric(g, "median_s").median())
    return k.map(times).astype(float)


# --------------------------------------------------------------------------------- compile rows (fit)


def is_compile(df: pd.DataFrame) -> pd.Series:
    """Rows written by `xlabench compile`: they name the target they were compiled for (a run's never
    do), or carry a status only a compile gives. They have no timings: never MFU or step-time data."""
    target = df["target"] if "target" in df else pd.Series(np.nan, index=df.index)
    return (target.notna() & (text(target) != "")) | df["status"].isin(COMPILE_ONLY_STATUSES)


def run_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[~is_compile(df)]


def compile_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[is_compile(df)]


def memory_gib(df: pd.DataFrame) -> pd.Series:
    """Per-device memory in GiB of compiled rows (what XLA's memory_analysis counts) and oom rows (what
    libtpu said the program needs); NaN for every other row (a gap, never a zero)."""
    return df["peak_memory_bytes"].where(df["status"].isin(MEMORY_STATUSES)) / GIB


def capacity_gib(df: pd.DataFrame) -> pd.Series:
    return df["hbm_capacity_bytes"] / GIB


def fit_chart(workload: str) -> FitChart:
    """How ``workload``'s memory fit is read and drawn (its record's fit); KeyError for a workload without."""
    fit = WORKLOADS[workload].fit if workload in WORKLOADS else None
    if fit is None:
        raise KeyError(workload)
    return fit


def fit_x(df: pd.DataFrame, workload: str) -> pd.Series:
    """The fit chart's x per row: global batch, sequence length, or a paged spec's mean context length."""
    fit = fit_chart(workload)
    if fit.x_is_spec:
        return df[fit.x].map(context_length)
    return df[fit.x]


def fit_keys(rows: pd.DataFrame, workload: str) -> list[str]:
    """What one fit line (and one line of the report's fit table) is: the target, the workload's series
    keys, and any describing column that takes several values at one x within them (backend, model...)."""
    fit = fit_chart(workload)
    first = ["target", *fit.lines]
    return first + split_keys(rows, fit.x, first)


def topology(value: Any) -> str:
    """A libtpu topology without nested brackets: 'v4:2x2x1 (chip_config_name=megacore)' -> 'v4:2x2x1, megacore'."""
    m = re.fullmatch(r"\s*([^()]*?)\s*\((?:[a-z_]+=)?([^()]*)\)\s*", str(value))
    return f"{m.group(1)}, {m.group(2)}" if m else str(value)


def compile_title(df: pd.DataFrame, what: str) -> str:
    """A compile chart's title, two lines: what and the suite, with the target and its topology; the
    devices and where the memory comes from."""
    targets = "; ".join(f"{t} ({topology(topo)})" if isinstance(topo, str) and topo else str(t)
                        for t, topo in distinct(zip(df["target"], df["topology"])) if isinstance(t, str))
    first, _, second = title(df, what).partition("\n")
    first += f" · target {targets}" if targets else ""
    return first + "\n" + " · ".join(p for p in (second, COMPILE_NOTE) if p)


def fit_summary(rows: pd.DataFrame, workload: str) -> pd.DataFrame:
    """One line per fit key (fit_keys): the largest x that compiled within HBM with its GiB per device
    and HBM fraction, the smallest x that did not fit (oom) with the GiB it needed, and how the cases
    ended. Keys whose every case was skipped have no line (the report lists those as skipped)."""
    rows = rows.reset_index(drop=True)
    keys = fit_keys(rows, workload)
    xs, mem = fit_x(rows, workload), memory_gib(rows)
    hbm = rows["hbm_fraction"]
    out = []
    for _, g in rows.groupby(key(rows, keys), sort=False):
        if (g["status"] == st.SKIPPED).all():
            continue
        fits = g[(g["status"] == st.COMPILED) & mem[g.index].notna()]
        oom = g[g["status"] == st.OOM]
        line = {k: g[k].iloc[0] for k in keys}
        best = fits.index[xs[fits.index].to_numpy().argmax()] if len(fits) else None
        worst = oom.index[xs[oom.index].to_numpy().argmin()] if len(oom) else None
        line.update(
            fit_x=xs[best] if best is not None else np.nan,
            fit_gib=mem[best] if best is not None else np.nan,
            fit_fraction=hbm[best] if best is not None else np.nan,
            oom_x=xs[worst] if worst is not None else np.nan,
            oom_gib=mem[worst] if worst is not None else np.nan,
            capacity_gib=capacity_gib(g).max(),
            **{s: int((g["status"] == s).sum()) for s in results.COMPILE_STATUSES})
        out.append(line)
    orders = {"sharding": sort_order(rows["sharding"], SHARDING_ORDER), "impl": impl_order(rows["impl"])}
    out.sort(key=lambda line: tuple((orders[k].index(line[k]) if line[k] in orders.get(k, []) else 99, str(line[k]))
                                    for k in keys))
    return pd.DataFrame(out, columns=keys + ["fit_x", "fit_gib", "fit_fraction", "oom_x", "oom_gib", "capacity_gib",
                                             *results.COMPILE_STATUSES])

