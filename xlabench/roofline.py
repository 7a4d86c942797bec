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
the row has them, else the analytic counts, and ``roofline_source`` says which. The bytes are those of
``xla_hbm_bytes`` where the row has it: XLA's bytes_accessed counts operands in a TPU's VMEM as well, and
on v5e put naive attention's floor above the time the chip measured (issue 61 item 2).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from xlabench.cells import number
from xlabench.units import GIGA, MICROSECOND, TERA

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
    xf, hbm = _num(row, "xla_flops"), _num(row, "xla_hbm_bytes")
    xb = hbm or _num(row, "xla_bytes_accessed")  # the HBM share of XLA's bytes where counted (VMEM left out)
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
                    "the kernel's FLOPs on a causal row (the masked blocks, which a kernel may skip)"
                    + (HBM_NOTE if hbm else ""))
        return xf, xb, "XLA cost analysis of the compiled program (loop-aware)" + (HBM_NOTE if hbm else "")
    if flops and nbytes:
        return flops / devices, nbytes / devices, f"analytic FLOPs and {what} (no XLA figures)"
    return None, None, "no FLOP and byte counts for this row"


HBM_NOTE = "; bytes: its ops' operands and results in HBM (xla_hbm_bytes: VMEM-resident ones left out)"


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


def _target(row: Mapping[str, Any]) -> bool:
    t = row.get("target")
    return isinstance(t, str) and bool(t.strip())


def _analytic_bytes(row: Mapping[str, Any]) -> Optional[float]:
    """The bytes the case must move per device (``bytes``, else Q, K, V, O's ``io_bytes``): a lower bound of
    its HBM traffic, where XLA's bytes_accessed (every fusion's operands) can count more."""
    nbytes = _num(row, "bytes") or _num(row, "io_bytes")
    return nbytes / max(int(_num(row, "devices") or 1), 1) if nbytes else None


def allowance(row: Mapping[str, Any]) -> tuple[float, str]:
    """How far above 1 a measured ``roofline_frac`` may read before the row is under its floor, and why.

    An accelerator's peaks are its datasheet's and its device clock is exact to the trace's microsecond, so
    the only slack is the timer's own measured noise: the median's distance to its p10 (a tenth of the
    samples read that far under the median), plus one microsecond of trace resolution on the device clock.
    A CPU row's peaks are one matmul's and one copy's measurement, themselves noisy: FRAC_SLACK."""
    if str(row.get("platform", "")) == "cpu":
        return FRAC_SLACK - 1, "CPU: measured host peaks"
    median, p10 = _num(row, "median_s"), _num(row, "p10_s")
    if not median:
        return 0.0, "timer noise 0"
    noise = max(0.0, (median - p10) / median) if p10 else 0.0
    if str(row.get("clock", "")) == "device":
        noise += MICROSECOND / median
    return noise, f"timer noise {noise:.1%} (median vs its p10)"


def roofline(row: Mapping[str, Any], ici_gbytes_per_s: Optional[float]) -> dict[str, Any]:
    """The roofline columns of one row (schema ROOFLINE_COLUMNS); empty where the inputs are missing.

    ``row`` is the full row (its case columns too: ``causal`` decides whether XLA's count of a Pallas
    kernel includes masked blocks). A measured row under a memory floor of XLA's bytes by more than its
    timer noise (``allowance``) shows that those bytes are not all HBM traffic: the memory floor then takes
    the bytes the case must move (``bytes``, else ``io_bytes``), and ``roofline_source`` says so."""
    flops, nbytes, source = work(row)
    peak_tf, peak_gb = _num(row, "peak_tflops"), _num(row, "peak_gbytes_per_s")
    out: dict[str, Any] = {"roofline_source": source}
    if not (flops and nbytes and peak_tf and peak_gb):
        if flops and nbytes:
            out["roofline_source"] += "; no peak FLOP/s or HBM bandwidth for this device"
        return out
    coll = _num(row, "collective_bytes")
    median = _num(row, "median_s")
    times = _times(flops, nbytes, peak_tf, peak_gb, coll, ici_gbytes_per_s)
    slack, _ = allowance(row)
    analytic = _analytic_bytes(row)
    beaten = bool(median and max(times.values()) / median > 1 + slack
                  and max(times, key=times.__getitem__) == MEMORY and "XLA" in source)  # XLA's bytes aren't HBM's
    if beaten and analytic and analytic < nbytes:
        source += (f"; memory floor on the bytes the case must move ({analytic / GIGA:.4g} GB per device): XLA's "
                   f"bytes_accessed ({nbytes / GIGA:.4g} GB) put the floor {max(times.values()) / median:.3f}x the "
                   "measured time, so they are not all HBM traffic")
        nbytes = analytic
        times = _times(flops, nbytes, peak_tf, peak_gb, coll, ici_gbytes_per_s)
    elif beaten and not analytic and str(row.get("platform", "")) != "cpu":
        # an accelerator's train step has no count of the bytes it must move: with XLA's shown not to be HBM
        # traffic, no memory floor is known, and the compute floor is the one bound the row can be held to
        # (a CPU row under its floor is the host's caches: audit.cache_resident marks it)
        source += (f"; no memory floor: XLA's bytes_accessed ({nbytes / GIGA:.4g} GB) put it "
                   f"{max(times.values()) / median:.3f}x the measured time, so they are not all HBM traffic, and "
                   "the case has no count of the bytes it must move: bound by compute alone")
        times[MEMORY] = 0.0
    out["roofline_source"] = source
    out["arith_intensity"] = flops / nbytes
    out["bound_s"] = max(times[COMPUTE], times[MEMORY])
    if COLLECTIVE in times:
        out["ici_gbytes_per_s"] = ici_gbytes_per_s
        out["collective_s"] = times[COLLECTIVE]
    out["bound_by"] = max(times, key=times.__getitem__)
    floor = max(times.values())
    if median:
        out["roofline_frac"] = floor / median
        if out["roofline_frac"] > 1 + slack:
            out["roofline_note"] = why_above_one(row, source)
    if _target(row) and _num(row, "flops"):
        if uncounted(row):
            out["roofline_source"] += ("; no MFU ceiling: XLA has no cost estimate for the kernel, so a ceiling "
                                       "would be the analytic FLOPs over the operands' bytes (100% when compute-bound)")
        else:
            devices = max(int(_num(row, "devices") or 1), 1)
            out["mfu_ceiling"] = (_num(row, "flops") / devices) / (peak_tf * TERA) / floor
    return out


def _times(flops: float, nbytes: float, peak_tf: float, peak_gb: float, coll: Optional[float],
           ici: Optional[float]) -> dict[str, float]:
    times = {COMPUTE: flops / (peak_tf * TERA), MEMORY: nbytes / (peak_gb * GIGA)}
    if coll is not None and ici:
        times[COLLECTIVE] = coll / (ici * GIGA)
    return times


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
    slack, what = allowance(row)
    return f"roofline_frac > {1 + slack:.3f} ({what}): " + "; ".join(reasons)
