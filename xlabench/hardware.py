"""Peak dense FLOP/s and HBM bandwidth per device kind: the one peak table, each entry with its source.

Figures are per *chip* from the vendors' documents; where one chip shows up as two framework devices
(TPU v2, v3, v7) the per-device peak is half. CPU has no datasheet figure: it is measured (a float32
matmul) in the worker and labelled as measured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    name: str
    pattern: str  # regex matched (case-insensitive) against the framework's device_kind
    bf16_tflops_per_chip: float
    hbm_gbytes_per_s_per_chip: float
    devices_per_chip: int
    source: str

    @property
    def tflops_per_device(self) -> float:
        return self.bf16_tflops_per_chip / self.devices_per_chip

    @property
    def gbytes_per_s_per_device(self) -> float:
        return self.hbm_gbytes_per_s_per_chip / self.devices_per_chip


_TPU_DOC = "Google Cloud TPU docs, system architecture page for"
# Order matters: the first match wins ("v5 lite" before "v5").
PEAKS: tuple[Peak, ...] = (
    Peak("TPU v2", r"tpu v2\b", 45, 700, 2, f"{_TPU_DOC} TPU v2 (per chip, 2 cores = 2 devices)"),
    Peak("TPU v3", r"tpu v3\b", 123, 900, 2, f"{_TPU_DOC} TPU v3 (per chip, 2 cores = 2 devices)"),
    Peak("TPU v4", r"tpu v4\b", 275, 1200, 1, f"{_TPU_DOC} TPU v4 (megacore: 1 device per chip)"),
    Peak("TPU v5e", r"tpu v5 ?lite|tpu v5e", 197, 819, 1, f"{_TPU_DOC} TPU v5e"),
    Peak("TPU v5p", r"tpu v5p?\b", 459, 2765, 1, f"{_TPU_DOC} TPU v5p"),
    Peak("TPU v6e", r"tpu v6 ?lite|tpu v6e|trillium", 918, 1638, 1, f"{_TPU_DOC} TPU v6e (Trillium)"),
    Peak("TPU v7", r"tpu ?v?7|ironwood", 2307, 7380, 2, f"{_TPU_DOC} TPU7x (Ironwood) (per chip, 2 devices)"),
    Peak("A100", r"a100", 312, 2039, 1, "NVIDIA A100 datasheet (SXM 80GB, dense bf16)"),
    Peak("H100 PCIe", r"h100.*pcie", 756, 2000, 1, "NVIDIA H100 datasheet (PCIe, dense bf16)"),
    Peak("H100 SXM", r"h100", 989, 3350, 1, "NVIDIA H100 datasheet (SXM, dense bf16)"),
    Peak("H200", r"h200", 989, 4800, 1, "NVIDIA H200 datasheet (SXM, dense bf16)"),
    Peak("B200", r"b200", 2250, 8000, 1, "NVIDIA B200 datasheet (dense bf16)"),
    Peak("MI300X", r"mi300x", 1307, 5300, 1, "AMD Instinct MI300X datasheet (dense bf16)"),
)


def lookup(device_kind: str) -> Peak | None:
    """The peak entry for a framework device_kind string, or None when the kind is not in the table."""
    for peak in PEAKS:
        if re.search(peak.pattern, device_kind, flags=re.IGNORECASE):
            return peak
    return None


@dataclass(frozen=True)
class DevicePeak:
    """What MFU and MBU are computed against, per device, and where the figures come from."""

    tflops: float | None
    gbytes_per_s: float | None
    source: str


def device_peak(platform: str, device_kind: str, measured_cpu_tflops: float | None = None,
                measured_cpu_gbytes_per_s: float | None = None, device_count: int = 1,
                override_tflops: float | None = None) -> DevicePeak:
    """Resolve the per-device peak: an override wins, then the table, then (CPU) a measurement."""
    entry = lookup(device_kind)
    gbps = entry.gbytes_per_s_per_device if entry else None
    if override_tflops is not None:
        return DevicePeak(override_tflops, gbps, "override (--peak-tflops / suite peak_tflops)")
    if entry is not None:
        return DevicePeak(entry.tflops_per_device, gbps, entry.source)
    if platform == "cpu" and measured_cpu_tflops:
        n = max(device_count, 1)
        gb = measured_cpu_gbytes_per_s / n if measured_cpu_gbytes_per_s else None
        return DevicePeak(measured_cpu_tflops / n, gb,
                          f"measured on this host: float32 matmul (FLOP/s) and streaming copy (GB/s), "
                          f"host total / {n} virtual device(s)")
    return DevicePeak(None, None, f"unknown device kind {device_kind!r}: pass --peak-tflops for MFU")
