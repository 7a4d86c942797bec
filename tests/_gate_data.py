"""Synthetic xlabench runs for the gate tests: real files written by results.RowWriter."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np

from xlabench import results
from xlabench.stats.summary import summarize

ENV = {"platform": "cpu", "device_kind": "cpu", "device_count": 1, "process_count": 1,
       "framework_version": "jax 0.10.2 / jaxlib 0.10.2", "interpret": False, "hostname": "test"}


def case(impl: str = "naive", seq_len: int = 128, **extra: Any) -> dict[str, Any]:
    """Case parameters of a small attention case."""
    params = {"batch": 2, "num_heads": 2, "num_kv_heads": 2, "seq_len": seq_len, "kv_seq_len": seq_len,
              "head_dim": 32, "causal": False, "dtype": "float32", "mode": "fwd"}
    params.update(extra)
    return {"workload": "attention", "backend": "jax", "impl": impl, "params": params}


def draw(rng: np.random.Generator, n: int, scale: float = 1.0, sigma: float = 0.05,
         heavy: bool = False, base_s: float = 1e-3) -> np.ndarray:
    """n per-iteration seconds: lognormal around base_s * scale; heavy adds 10% Pareto outliers."""
    x = base_s * scale * rng.lognormal(0.0, sigma, n)
    if heavy:
        out = rng.random(n) < 0.1
        x[out] *= 1 + 2 * rng.pareto(1.5, int(out.sum()))
    return x


def write_run(path: Path, entries: list[tuple[dict[str, Any], Optional[np.ndarray]]], run_id: str = "run",
              status: Optional[dict[int, str]] = None, env: Optional[dict[str, Any]] = None,
              flops: float = 1e9, **row_overrides: Any) -> Path:
    """Write a results CSV (+ samples) with one row per (case, samples); samples None: a skipped row.

    ``status`` maps an entry index to 'failed'/'skipped'; ``row_overrides`` apply to every row.
    """
    path = Path(path)
    with results.RowWriter(results.RunFiles(path)) as w:
        for i, (c, samples) in enumerate(entries):
            row: dict[str, Any] = {"schema_version": results.SCHEMA_VERSION, "run_id": run_id, "suite": "tiny",
                                   "profile": "", "workload": c["workload"], "backend": c["backend"],
                                   "impl": c["impl"], **c["params"], **ENV, **(env or {}),
                                   "case_id": results.case_id(c["workload"], c["backend"], c["impl"], c["params"])}
            st = (status or {}).get(i, "ok" if samples is not None else "skipped")
            row["status"] = st
            if st == "ok":
                row.update(summarize(list(samples)))
                row.update(flops=flops, tflops_per_s=flops / row["median_s"] / 1e12, correct=True,
                           max_abs_err=0.0, err_tol=5e-3)
            else:
                row["error"] = f"{st} on purpose"
                samples = None
            row.update(row_overrides)
            if st == "ok" and row.get("peak_tflops"):  # the MFU against the row's peak, as the run derives it
                row["mfu"] = flops / (row["median_s"] * row["peak_tflops"] * 1e12)
            w.write(row, samples if samples is not None else [])
    return path
