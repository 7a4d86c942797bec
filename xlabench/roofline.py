"""The roofline of a row: how fast its program could run on its device, and what bounds it.

Pure arithmetic on row fields (per device, per step), the same for run rows and compile rows, any
backend. The time a step cannot beat is the largest of three:

- compute: FLOPs / peak FLOP/s;
- memory: bytes accessed / HBM bandwidth;
- collective: bytes sent over the interconnect / ICI bandwidth (xlabench/hardware.py ``interconnect``).

``bound_s`` is the larger of the first two (the classic roofline), ``collective_s`` the third. The model
leaves out the overlap of compute and communication (XLA overlaps async collectives with compute, so
the true floor may be nearer max() than the sum: max() is the optimistic floor used here) and DCN
between slices. FLOPs and bytes are XLA's (``xla_flops``, ``xla_bytes_accessed``, loop-aware) where
the row has them, else the analytic counts, and ``roofline_source`` says which.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from xlabench.protocol.cells import number

COMPUTE, MEMORY, COLLECTIVE = "compute", "memory", "collective"
FRAC_SLACK = 1.05  # a roofline_frac above this is explained in roofline_note
UNCOUNTED = 0.5  # XLA FLOPs under this share of the analytic ones: the kernel has no cost estimate at all
# XLA FLOPs above this multiple of the kernel's on a causal row: the count includes the masked blocks (a Pallas
# kernel's cost estimate counts the whole S x S; flash and splash skip the masked blocks)
MASKED = 1.5


def _num(row: Mapping[str, Any], key: str) -> Optional[float]:
    return number(row.get(key))


def work(row: Mapping[str, Any]) -> tuple[Optional[float], Optional[float], str]:
    """(FLOPs, bytes) per device per step, and their source."""
    devices = max(int(_num(row, "devices") or 1), 1)
    xf, xb = _num(row, "xla_flops"), _num(row, "xla_bytes_accessed")
    flops = _num(row, "kernel_flops") or _num(row, "flops")
    nbytes = _num(row, "bytes") or _num(row, "io_bytes")
    what = "bytes" if _num(row, "bytes") else "io_bytes (Q, K, V, O only: a lower bound)"
    model = _num(row, "flops") or flops
    if xf and xb:
        if flops and model and xf < model / devices:
            # No program does the model's work in fewer FLOPs: XLA missed a Pallas kernel's work, for want of
            # a cost estimate (XLA counts only the ops around it) or with one short of it. The kernel's
            # FLOPs set the compute floor, so no MFU ceiling is above 1.
            why = "no cost estimate in the kernel" if xf < UNCOUNTED * flops / devices else \
                "the kernel's cost estimate counts fewer than the model's FLOPs"
            return (flops / devices, max(xb, (nbytes or 0) / devices),
                    f"analytic FLOPs and {'XLA bytes' if not nbytes else what}: XLA counted "
                    f"{xf / (flops / devices):.0%} of the kernel's FLOPs ({why})")
        if flops and _causal(row) and xf > MASKED * flops / devices:
            # The compute floor is the work the model needs: a kernel that skips the masked blocks runs under a
            # floor from XLA's count (flash causal fwd on v5e: 1.05-1.32x faster than it). A kernel that
            # computes them (naive) is memory-bound, so its floor does not move.
            return (flops / devices, xb, f"analytic FLOPs and XLA bytes: XLA counted {xf / (flops / devices):.2f}x "
                    "the kernel's FLOPs on a causal row (the masked blocks, which a kernel may skip)")
        return xf, xb, "XLA cost analysis of the compiled program (loop-aware)"
    if flops and nbytes:
        return flops / devices, nbytes / devices, f"analytic FLOPs and {what} (no XLA figures)"
    return None, None, "no FLOP and byte counts for this row"


def _causal(row: Mapping[str, Any]) -> bool:
    return str(row.get("causal", "")).lower() in ("true", "1")


def uncounted(row: Mapping[str, Any]) -> bool:
    """Whether XLA counted under UNCOUNTED of the row's FLOPs (``flops_ratio``): a Pallas kernel without a
    cost estimate. Its roofline is the analytic FLOPs over XLA's bytes (the kernel's operands), so a
    compute-bound MFU ceiling is 100% by construction and says nothing about the kernel."""
    ratio = _num(row, "flops_ratio")
    return ratio is not None and ratio < UNCOUNTED


UNCOUNTED_NOTE = ("no MFU ceiling: XLA has no cost estimate for the kernel (XLA/analytic FLOPs {ratio:.2f}), so "
                  "its roofline would be the analytic FLOPs over the operands' bytes (100% when compute-bound)")


def roofline(row: Mapping[str, Any], ici_gbytes_per_s: Optional[float]) -> dict[str, Any]:
    """The roofline columns of one row (schema ROOFLINE_COLUMNS); empty where the inputs are missing."""
    flops, nbytes, source = work(row)
    peak_tf, peak_gb = _num(row, "peak_tflops"), _num(row, "peak_gbytes_per_s")
    out: dict[str, Any] = {"roofline_source": source}
    if not (flops and nbytes and peak_tf and peak_gb):
        if flops and nbytes:
            out["roofline_source"] += "; no peak FLOP/s or HBM bandwidth for this device"
        return out
    out["arith_intensity"] = flops / nbytes
    t_compute, t_memory = flops / (peak_tf * 1e12), nbytes / (peak_gb * 1e9)
    out["bound_s"] = max(t_compute, t_memory)
    times = {COMPUTE: t_compute, MEMORY: t_memory}
    coll = _num(row, "collective_bytes")
    if coll is not None and ici_gbytes_per_s:
        out["ici_gbytes_per_s"] = ici_gbytes_per_s
        out["collective_s"] = coll / (ici_gbytes_per_s * 1e9)
        times[COLLECTIVE] = out["collective_s"]
    out["bound_by"] = max(times, key=times.__getitem__)
    floor = max(times.values())
    median = _num(row, "median_s")
    if median:
        out["roofline_frac"] = floor / median
        if out["roofline_frac"] > FRAC_SLACK:
            out["roofline_note"] = why_above_one(row, source)
    if row.get("target") and _num(row, "flops"):
        devices = max(int(_num(row, "devices") or 1), 1)
        out["mfu_ceiling"] = (_num(row, "flops") / devices) / (peak_tf * 1e12) / floor
    return out


def why_above_one(row: Mapping[str, Any], source: str) -> str:
    """Why a measured step beat its roofline (it cannot, so a count or a peak is off)."""
    reasons = []
    if str(row.get("interpret", "")).lower() in ("true", "1"):
        reasons.append("interpreted Pallas kernel: XLA's figures are the interpreter's program (each block's "
                       "loads and stores as array ops that stay in cache), not the kernel's HBM traffic")
    if str(row.get("platform", "")) == "cpu":
        reasons.append("the host peaks are one matmul's and one copy's measurement: caches serve "
                       "small working sets faster than the measured stream bandwidth")
    if "XLA" in source:
        reasons.append("XLA's bytes accessed counts every operand of every fusion, also those the "
                       "hardware serves from cache")
    else:
        reasons.append("the analytic bytes are an estimate")
    return "roofline_frac > 1.05: " + "; ".join(reasons)
