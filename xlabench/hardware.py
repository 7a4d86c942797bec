"""One record per chip (``CHIPS``): its peak dense FLOP/s and HBM bandwidth, ICI links, HBM size, megacore,
the slices it is compiled for and its shipped tuning table, each figure with its source. ``TARGETS`` (the
compile targets), ``MEGACORE_CHIPS`` (impls/paged_rules) and the tuning table's file (tune/table.py) derive
from it: a new chip is one ``Chip`` here.

Figures are per *chip* from the vendors' documents; where one chip shows up as two framework devices
(TPU v2, v3, v7) the per-device peak is half. CPU has no datasheet figure: it is measured (a float32
matmul) in the worker, once per host as the best of several tries and cached with its date
(measure/host_peak.py), and labelled as measured, with the date and whether it came from the cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Chip:
    """A chip's facts. ``slices``: the compile targets, (name users rent it under, libtpu topology shape);
    ``topology``: libtpu's topology prefix ("v5e"), or "cuda" for a GPU (lowering only); ``doc``: the chip's
    name in its datasheet, as a target's source names it; ``tuning_table``: its shipped table's file in
    xlabench/tune/tables/ (None: none shipped)."""

    name: str
    pattern: str  # regex matched (case-insensitive) against the framework's device_kind
    bf16_tflops_per_chip: float
    hbm_gbytes_per_s_per_chip: float
    devices_per_chip: int
    source: str
    # ICI (TPU) / NVLink (GPU): one-way bandwidth of one link, and the links of one chip; None: not tabulated
    link_gbytes_per_s: float | None = None
    links_per_chip: int | None = None
    wrap_at: int | None = None  # a torus axis wraps around when its length is a multiple of this
    link_source: str = ""
    hbm_gib: float | None = None  # datasheet HBM per chip (the usable limit is probed per compiled row)
    megacore: bool = False  # two TensorCores as one device (the paged kernel's megacore_mode needs it)
    topology: str = ""
    slices: tuple[tuple[str, str], ...] = ()
    compile_options: tuple[tuple[str, Any], ...] = ()
    doc: str = ""
    target_source: str = ""  # a GPU target's source (TPU targets name the TPU docs)
    tuning_table: str | None = None
    jax_kind: str = ""  # JAX's device_kind for it, where it is not ``name`` (Pallas kernels' tables key on it)

    @property
    def tflops_per_device(self) -> float:
        return self.bf16_tflops_per_chip / self.devices_per_chip

    @property
    def gbytes_per_s_per_device(self) -> float:
        return self.hbm_gbytes_per_s_per_chip / self.devices_per_chip


_TPU_DOC = "Google Cloud TPU docs, system architecture page for"
_ICI = ("ICI one-way GB/s per link: 'How to Scale Your Model' (Austin et al., Google DeepMind 2025), part 2 "
        "'How to Think About TPUs', table of ICI bandwidth per generation")
_ICI_3D = f"{_ICI}; 3D torus, 6 links per chip, an axis wraps at multiples of 4 (a full cube)"
_ICI_2D = f"{_ICI}; 2D torus, 4 links per chip, an axis wraps only at the pod's 16"
_ONE_HOST = (("chips_per_host_bounds", (1, 1, 1)),)  # a one-chip slice is one host's
# Order matters: the first match wins ("v5 lite" before "v5").
CHIPS: tuple[Chip, ...] = (
    Chip("TPU v2", r"tpu v2\b", 45, 700, 2, f"{_TPU_DOC} TPU v2 (per chip, 2 cores = 2 devices)"),
    Chip("TPU v3", r"tpu v3\b", 123, 900, 2, f"{_TPU_DOC} TPU v3 (per chip, 2 cores = 2 devices)",
         100, 4, 32, f"{_ICI}; 2D torus, 4 links per chip, an axis wraps at the pod's 32"),
    Chip("TPU v4", r"tpu v4\b", 275, 1200, 1, f"{_TPU_DOC} TPU v4 (megacore: 1 device per chip)",
         45, 6, 4, _ICI_3D, hbm_gib=32, megacore=True, topology="v4", doc="TPU v4",
         slices=(("v4-8", "2x2x1"), ("v4-16", "2x2x2"), ("v4-32", "2x2x4")),
         compile_options=(("chip_config_name", "megacore"),)),
    Chip("TPU v5e", r"tpu v5 ?lite|tpu v5e", 197, 819, 1, f"{_TPU_DOC} TPU v5e", 45, 4, 16, _ICI_2D,
         hbm_gib=16, topology="v5e", doc="TPU v5e", tuning_table="tpu_v5_lite.json", jax_kind="TPU v5 lite",
         slices=(("v5e-1", "1x1"), ("v5e-4", "2x2"), ("v5e-8", "2x4"), ("v5e-16", "4x4"), ("v5e-32", "4x8"),
                 ("v5e-64", "8x8"), ("v5e-256", "16x16"))),
    Chip("TPU v5p", r"tpu v5p?\b", 459, 2765, 1, f"{_TPU_DOC} TPU v5p", 90, 6, 4, _ICI_3D,
         hbm_gib=95, megacore=True, topology="v5", doc="TPU v5p", slices=(("v5p-8", "2x2x1"), ("v5p-16", "2x2x2"))),
    Chip("TPU v6e", r"tpu v6 ?lite|tpu v6e|trillium", 918, 1638, 1, f"{_TPU_DOC} TPU v6e (Trillium)",
         90, 4, 16, _ICI_2D, hbm_gib=32, topology="v6e", doc="TPU v6e", jax_kind="TPU v6 lite",
         slices=(("v6e-1", "1x1"), ("v6e-4", "2x2"), ("v6e-8", "2x4"), ("v6e-16", "4x4"), ("v6e-256", "16x16"))),
    Chip("TPU v7", r"tpu ?v?7|ironwood", 2307, 7380, 2, f"{_TPU_DOC} TPU7x (Ironwood) (per chip, 2 devices)",
         hbm_gib=192, topology="tpu7x", doc="TPU7x (Ironwood)",
         slices=(("tpu7x-8", "2x2x1"), ("tpu7x-16", "2x2x2"))),
    Chip("A100", r"a100", 312, 2039, 1, "NVIDIA A100 datasheet (SXM 80GB, dense bf16)"),
    Chip("H100 PCIe", r"h100.*pcie", 756, 2000, 1, "NVIDIA H100 datasheet (PCIe, dense bf16)"),
    Chip("H100 SXM", r"h100", 989, 3350, 1, "NVIDIA H100 datasheet (SXM, dense bf16)", hbm_gib=80,
         topology="cuda", slices=(("h100", ""),), target_source="NVIDIA H100 datasheet (SXM, 80 GB); lowering only"),
    Chip("H200", r"h200", 989, 4800, 1, "NVIDIA H200 datasheet (SXM, dense bf16)", hbm_gib=141,
         topology="cuda", slices=(("h200", ""),), target_source="NVIDIA H200 datasheet (141 GB); lowering only"),
    Chip("B200", r"b200", 2250, 8000, 1, "NVIDIA B200 datasheet (dense bf16)"),
    Chip("MI300X", r"mi300x", 1307, 5300, 1, "AMD Instinct MI300X datasheet (dense bf16)"),
)
MEGACORE_CHIPS: tuple[str, ...] = tuple(c.name for c in CHIPS if c.megacore)


def lookup(device_kind: str) -> Chip | None:
    """The chip of a framework device_kind string, or None when the kind is not in the table."""
    for chip in CHIPS:
        if re.search(chip.pattern, device_kind, flags=re.IGNORECASE):
            return chip
    return None


def chip_name(device_kind: str) -> str:
    """One name per chip whichever framework named it (JAX's 'TPU v5 lite', TorchTPU's 'TPU v5e': 'TPU v5e');
    a kind not in the table as it is."""
    chip = lookup(str(device_kind))
    return chip.name if chip is not None else str(device_kind)


@dataclass(frozen=True)
class DevicePeak:
    """What MFU and MBU are computed against, per device, and where the figures come from."""

    tflops: float | None
    gbytes_per_s: float | None
    source: str


def device_peak(platform: str, device_kind: str, measured_cpu_tflops: float | None = None,
                measured_cpu_gbytes_per_s: float | None = None, device_count: int = 1,
                override_tflops: float | None = None, measured_note: str | None = None) -> DevicePeak:
    """Resolve the per-device peak: an override wins, then the table, then (CPU) a measurement
    (``measured_note``: when and how it was measured, e.g. 'best of 3 tries on 2026-12-04, cached in ...')."""
    entry = lookup(device_kind)
    gbps = entry.gbytes_per_s_per_device if entry else None
    if override_tflops is not None:
        return DevicePeak(override_tflops, gbps, "override (--peak-tflops / suite peak_tflops)")
    if entry is not None:
        return DevicePeak(entry.tflops_per_device, gbps, entry.source)
    if platform == "cpu" and measured_cpu_tflops:
        n = max(device_count, 1)
        gb = measured_cpu_gbytes_per_s / n if measured_cpu_gbytes_per_s else None
        when = f" ({measured_note})" if measured_note else ""
        return DevicePeak(measured_cpu_tflops / n, gb,
                          f"measured on this host: float32 matmul (FLOP/s) and streaming copy (GB/s){when}, "
                          f"host total / {n} virtual device(s)")
    return DevicePeak(None, None, f"unknown device kind {device_kind!r}: pass --peak-tflops for MFU")


# ------------------------------------------------------------------------------ compile targets

_MAXTEXT = "maxtext utils/accelerator_to_spec_map.py"


@dataclass(frozen=True)
class Target:
    """A slice to AOT-compile for (``xlabench compile --target``), by the name users rent it under.

    ``topology`` and ``options`` are what ``jax.experimental.topologies.get_topology_desc`` takes;
    ``hbm_gib_per_chip`` is the datasheet HBM (the usable limit per device is probed from libtpu's own
    compile error and reported per row). GPU targets lower only: XLA cannot compile for CUDA without
    a GPU, so their rows check tracing and the Pallas Triton lowering, not memory.
    """

    name: str
    platform: str  # tpu | gpu
    topology: str
    chips: int
    devices_per_chip: int
    hbm_gib_per_chip: float
    source: str
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def devices(self) -> int:
        return self.chips * self.devices_per_chip

    def label(self, slices: int = 1) -> str:
        """The topology it stands for, as rows' ``topology`` column says it (e.g. 'v4:2x2x1 (megacore) x 2 slices')."""
        opts = ", ".join(f"{k}={v}" for k, v in self.options)
        return self.topology + (f" ({opts})" if opts else "") + (f" x {slices} slices" if slices > 1 else "")


def _targets(chip: Chip) -> tuple[Target, ...]:
    """The chip's compile targets, one per slice."""
    if not chip.slices:
        return ()
    if chip.topology == "cuda":
        return tuple(Target(name, "gpu", "cuda", 1, 1, chip.hbm_gib or 0, chip.target_source) for name, _ in chip.slices)
    notes = [f"{chip.hbm_gib:g} GiB HBM per chip"] + (["megacore"] if chip.megacore else []) + (
        [f"{chip.devices_per_chip} devices per chip"] if chip.devices_per_chip > 1 else [])
    source = f"{_TPU_DOC} {chip.doc} ({', '.join(notes)}); topology name as {_MAXTEXT}"
    out = []
    for name, shape in chip.slices:
        chips = 1
        for d in shape.split("x"):
            chips *= int(d)
        options = chip.compile_options + (_ONE_HOST if chips == 1 else ())
        out.append(Target(name, "tpu", f"{chip.topology}:{shape}", chips, chip.devices_per_chip, chip.hbm_gib or 0,
                          source, tuple(sorted(options))))
    return tuple(out)


TARGETS: tuple[Target, ...] = tuple(t for chip in CHIPS for t in _targets(chip))


class UnknownTarget(ValueError):
    """A --target name not in TARGETS (the message lists the valid ones)."""


def find_target(name: str) -> Target:
    for t in TARGETS:
        if t.name == name.strip().lower():
            return t
    raise UnknownTarget(f"unknown target {name!r}; expected one of {', '.join(t.name for t in TARGETS)}")


# ------------------------------------------------------------------------------ interconnect

@dataclass(frozen=True)
class Interconnect:
    """Bandwidth one device has for a collective that spans its slice, and how it was reckoned."""

    gbytes_per_s: float | None
    source: str


def topology_axes(topology: str) -> tuple[int, ...]:
    """Chip counts per torus axis of a libtpu topology name ('v4:2x2x1' -> (2, 2, 1))."""
    dims = topology.split(":")[-1]
    try:
        return tuple(int(d) for d in dims.split("x"))
    except ValueError:
        return ()


def interconnect(device_kind: str, topology: str | None, cpu_gbytes_per_s: float | None = None) -> Interconnect:
    """ICI bandwidth per device for a collective over the whole slice: each torus axis longer than one
    chip adds one link's one-way bandwidth, twice where the axis wraps around (a ring can then send both
    ways); per device, a chip's figure is shared by its devices. CPU virtual devices copy through host
    memory: the measured host GB/s (``cpu_gbytes_per_s``, per device)."""
    entry = lookup(device_kind)
    if entry is None or entry.link_gbytes_per_s is None:
        if cpu_gbytes_per_s and "cpu" in device_kind.lower():
            return Interconnect(cpu_gbytes_per_s, "virtual CPU devices: the measured host copy GB/s per device")
        if entry is not None and entry.devices_per_chip == 1 and not entry.name.startswith("TPU"):
            return Interconnect(None, f"{entry.name}: no interconnect figure tabulated (single-device rows move none)")
        return Interconnect(None, f"no ICI figure for {device_kind!r} in xlabench/hardware.py")
    axes = topology_axes(topology) if topology else ()
    if not axes:
        return Interconnect(entry.link_gbytes_per_s / entry.devices_per_chip,
                            f"{entry.link_source}; topology unknown: one axis without wraparound assumed")
    used = [n for n in axes if n > 1]
    wraps = [n for n in used if entry.wrap_at and n % entry.wrap_at == 0]
    links = len(used) + len(wraps)
    shape = "x".join(map(str, axes))
    return Interconnect(links * entry.link_gbytes_per_s / entry.devices_per_chip,
                        f"{entry.link_source}; topology {shape}: {len(used)} axis(es) in use, "
                        f"{len(wraps)} wrapping around -> {links} x {entry.link_gbytes_per_s:g} GB/s one-way")
