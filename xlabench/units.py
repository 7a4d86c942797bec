"""Unit scale factors, each declared once: decimal rates (TFLOP/s, GB/s, MB), binary sizes (GiB, MiB) and
time (s, ms, µs, ns). Pure: no xlabench import. tests/test_units.py fails on such a factor written as a
literal anywhere else in the package; a tolerance or an epsilon (1e-9 as a floor) is not a unit and stays
where it is.

The helpers keep the operation the code used (seconds * 1e3 for ms, a division for a rate), so every
printed figure and CSV cell is bit-for-bit what it was."""

from __future__ import annotations

# decimal: rates and sizes as the datasheets quote them
TERA = 1e12  # FLOP/s per TFLOP/s
GIGA = 1e9  # bytes/s per GB/s; bytes per GB
MEGA = 1e6  # bytes per MB

# binary: memory sizes (GiB, MiB) and the size suffixes of XLA's messages and sysfs ('15.75G', '32768K')
KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40
BINARY_SUFFIX = {"": 1, "K": KIB, "M": MIB, "G": GIB, "T": TIB, "P": 1 << 50}

# time
MS_PER_S = 1e3
US_PER_S = 1e6
NS_PER_S = 1e9
MILLISECOND = 1 / MS_PER_S  # in seconds: exactly the double 1e-3 (a correctly rounded division)
MICROSECOND = 1 / US_PER_S
NANOSECOND = 1 / NS_PER_S


def to_ms(seconds: float) -> float:
    return seconds * MS_PER_S


def ns_to_s(ns: float) -> float:
    return ns / NS_PER_S


def tflops_per_s(flops: float, seconds: float) -> float:
    """The ``tflops_per_s`` column: FLOPs over seconds, in TFLOP/s."""
    return flops / seconds / TERA


def gbytes_per_s(nbytes: float, seconds: float) -> float:
    """The ``gbytes_per_s`` column: bytes over seconds, in GB/s."""
    return nbytes / seconds / GIGA
