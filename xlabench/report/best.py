"""The best kernel configuration per shape: among the usable rows (ok and correct) of a sweep over a
workload's tuned parameters (workloads.TUNED_PARAMS: attention's block_q / block_k), the fastest per
backend, impl and shape, with its speedup over the kernel's default (the row that leaves them unset).

Only groups that swept at least two configurations are reported: one configuration is not a choice.
A wrong or failed row is never picked, however fast.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from xlabench.report import chartdata as cd
from xlabench.suite.tuned import TunedConfig, value
from xlabench.workloads import PARAMS as WORKLOAD_PARAMS
from xlabench.workloads import TUNED_PARAMS


def _shape_columns(rows: pd.DataFrame, workload: str) -> list[str]:
    """The workload's case parameters other than the tuned ones that appear in the rows."""
    tuned = TUNED_PARAMS[workload]
    return [c for c in WORKLOAD_PARAMS[workload].model_fields if c in rows and c not in tuned]


def best_configs(df: pd.DataFrame) -> list[TunedConfig]:
    """The fastest usable configuration per (workload, backend, impl, shape) that swept >= 2 of them."""
    out: list[TunedConfig] = []
    runs = cd.run_rows(df)
    for workload in cd.distinct(runs["workload"]):
        if workload not in TUNED_PARAMS:
            continue
        rows = runs[(runs["workload"] == workload)].reset_index(drop=True)
        tuned, shape = list(TUNED_PARAMS[workload]), _shape_columns(rows, workload)
        median = cd.metric(rows, "median_s")
        keys = cd.text(rows[["backend", "impl", *shape]]).apply(tuple, axis=1)
        for _, g in rows.groupby(keys, sort=False):
            ok = g[median[g.index].notna()]
            configs = cd.text(ok[tuned]).apply(tuple, axis=1)
            if configs.nunique() < 2:
                continue
            best = ok.loc[median[ok.index].idxmin()]
            default = ok[ok[tuned].isna().all(axis=1)]  # the kernel's default: the tuned parameters unset
            default_s = float(median[default.index].min()) if len(default) else np.nan
            params = {k: value(best[k]) for k in tuned}
            out.append(TunedConfig(
                workload, str(best["backend"]), str(best["impl"]),
                {k: value(best[k]) for k in shape if value(best[k]) is not None},
                {k: v for k, v in params.items() if v is not None} or {k: None for k in tuned},
                float(median[best.name]),
                default_s / float(median[best.name]) if np.isfinite(default_s) else None))
    return out


def table_rows(configs: list[TunedConfig]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows for a table of best configurations (the varying shape columns only)."""
    shape_keys = list(dict.fromkeys(k for c in configs for k in c.shape))
    varying = [k for k in shape_keys if len({str(c.shape.get(k)) for c in configs}) > 1]
    tuned = list(dict.fromkeys(k for c in configs for k in c.params))
    headers = ["backend", "impl", *varying, *tuned, "median ms", "speedup vs default"]
    rows = [[c.backend, c.impl, *[cd.fmt_value(k, c.shape.get(k)) for k in varying],
             *[("default" if c.params.get(k) is None else str(c.params.get(k))) for k in tuned],
             f"{c.median_s * 1e3:.4g}" if c.median_s is not None else "",
             f"{c.speedup_vs_default:.2f}x" if c.speedup_vs_default is not None else "(no default row)"]
            for c in configs]
    return headers, rows
