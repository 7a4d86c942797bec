"""What the torch_tpu worker runs on: platform, device kind and count, versions; the device and its sync."""

from __future__ import annotations

import re
from importlib import metadata
from typing import Any, Optional

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


def _parts(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def libtpu_shortfall(e: BaseException) -> Optional[str]:
    """Why ``e`` is this host's libtpu being older than torch-tpu declares it needs, where it is: a Pallas
    (Mosaic) kernel of TorchTPU's that this libtpu's compiler could not lower. None otherwise."""
    text = str(e)
    if "mosaic failed to compile" not in text.lower():
        return None
    need = next((r.split(">=")[1].split(",")[0].strip() for r in metadata.requires("torch-tpu") or []
                 if r.replace(" ", "").startswith("libtpu>=")), "")
    have = version("libtpu")
    if not need or have == "?" or _parts(have) >= _parts(need):
        return None
    line = next((ln.strip() for ln in text.splitlines() if "mosaic failed" in ln.lower()), "")
    return (f"TorchTPU's Pallas kernel does not compile on this host's libtpu {have} (torch-tpu "
            f"{version('torch-tpu')} declares libtpu>={need}): {line[:300]}")


def versions() -> str:
    return (f"torch {torch.__version__} / torch_tpu {version('torch-tpu')} / jax {version('jax')} "
            f"/ libtpu {version('libtpu')}")


def device_kind() -> str:
    """TorchTPU's name of the chip (e.g. 'TPU v5e'; hardware.lookup knows both it and JAX's 'TPU v5 lite')."""
    return torch.tpu.get_device_name()


def jax_device_kind() -> str:
    """The chip as JAX names it (a Pallas kernel's tuned tables key on that name; JAX here runs on the CPU)."""
    from xlabench import hardware

    chip = hardware.lookup(device_kind())
    return (chip.jax_kind or chip.name) if chip is not None else device_kind()


def hbm_bytes() -> Optional[float]:
    """The chip's datasheet HBM in bytes (hardware's chip table), None where the chip is not in it."""
    from xlabench import hardware
    from xlabench.units import GIB

    chip = hardware.lookup(device_kind())
    return chip.hbm_gib * GIB if chip is not None and chip.hbm_gib else None


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
