"""xlabench: benchmark and MFU-reporting suite for attention kernels and training steps on XLA devices."""

__version__ = "0.1.0"
