"""Derived metrics of a row (TFLOP/s, MFU, GB/s, MBU, tokens/s), computed once in the parent from the
worker's counts and the (pooled) median."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from xlabench import flops as flop_formulas
from xlabench import roofline
from xlabench.hardware import device_peak, interconnect
from xlabench.units import gbytes_per_s, tflops_per_s


def derive(result: Any, env: dict[str, Any], devices: int,
           peak_override: Optional[float], interpret: bool = False,
           row: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """tflops_per_s, mfu (and mfu_palm for a train step), gbytes_per_s, mbu, tokens_per_s (and per device), host_overhead (trace timer)
    and the peak used, and the roofline (xlabench/roofline.py), of a successful case's measurement
    (rows.Measured: its ``fields``, ``tokens_per_step`` and ``tokens_global``). ``row``: the row being built
    (its case columns: the roofline is the full case's, so a causal row gets the causal rule)."""
    fields = result.fields
    out = peak_fields(env, peak_override)
    peak_tflops, peak_gbytes_per_s = out["peak_tflops"], out["peak_gbytes_per_s"]
    median = fields.get("median_s")
    if not median:
        return out
    if fields.get("device_median_s"):
        out["host_overhead"] = (fields.get("wall_median_s") or median) / fields["device_median_s"]
    if fields.get("flops"):
        out["tflops_per_s"] = tflops_per_s(fields["flops"], median)
        if peak_tflops:
            out["mfu"] = flop_formulas.mfu(fields["flops"], median, devices, peak_tflops)
    if fields.get("flops_palm") and peak_tflops:
        out["mfu_palm"] = flop_formulas.mfu(fields["flops_palm"], median, devices, peak_tflops)
    if fields.get("bytes"):
        out["gbytes_per_s"] = gbytes_per_s(fields["bytes"], median)
        if peak_gbytes_per_s:
            out["mbu"] = out["gbytes_per_s"] / (devices * peak_gbytes_per_s)
    if result.tokens_per_step is not None:
        out["tokens_per_s"] = result.tokens_per_step / median
        if result.tokens_global:
            out["tokens_per_s_per_device"] = out["tokens_per_s"] / devices
    out.update(roofline_fields({**(row or {}), **fields, **out, "devices": devices, "platform": env.get("platform", ""),
                                "interpret": interpret},
                               env.get("device_kind", ""), None))
    return out


def peak_fields(env: Mapping[str, Any], peak_override: Optional[float]) -> dict[str, Any]:
    """The peak columns of a row (peak_tflops, peak_gbytes_per_s, peak_source), run and compile rows alike:
    from the worker's ``env`` (platform, device kind, the CPU's measured peaks) and the override (--peak-tflops,
    else the suite's peak_tflops)."""
    peak = device_peak(env.get("platform", ""), env.get("device_kind", ""),
                       env.get("measured_cpu_tflops"), env.get("measured_cpu_gbytes_per_s"),
                       int(env.get("device_count", 1) or 1), peak_override, env.get("cpu_peak_source"))
    return {"peak_tflops": peak.tflops, "peak_gbytes_per_s": peak.gbytes_per_s, "peak_source": peak.source}


def roofline_fields(row: dict[str, Any], device_kind: str, topology: Optional[str]) -> dict[str, Any]:
    """The roofline columns of a row that has its peaks (run rows here, compile rows in run/rows.py compile_row)."""
    ici = interconnect(device_kind, topology, row.get("peak_gbytes_per_s"))
    out = roofline.roofline(row, ici.gbytes_per_s)
    if "ici_gbytes_per_s" in out:
        out["ici_source"] = ici.source
    return out
