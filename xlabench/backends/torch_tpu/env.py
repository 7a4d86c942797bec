"""What the torch_tpu worker runs on: platform, device kind and count, versions; the device and its sync."""

from __future__ import annotations

from importlib import metadata
from typing import Any

import numpy as np
import torch


def device() -> torch.device:
    return torch.device("tpu")


def sync() -> None:
    """Wait until the device has finished everything queued (ends every timed iteration)."""
    torch.accelerator.synchronize()


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def versions() -> str:
    return (f"torch {torch.__version__} / torch_tpu {version('torch-tpu')} / jax {version('jax')} "
            f"/ libtpu {version('libtpu')}")


def device_kind() -> str:
    """TorchTPU's name of the chip (e.g. 'TPU v5e'; hardware.lookup knows both it and JAX's 'TPU v5 lite')."""
    return torch.tpu.get_device_name()


def probe(measure_peaks: bool = True) -> dict[str, Any]:
    return {
        "backend": "torch_tpu",
        "platform": "tpu",
        "device_kind": device_kind(),
        "device_count": torch.accelerator.device_count(),
        "process_count": 1,
        "framework_version": versions(),
        "numpy_version": np.__version__,
    }
