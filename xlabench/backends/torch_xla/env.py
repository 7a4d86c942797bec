"""What the torch_xla worker runs on: platform, device kind and count, versions, CPU peak (measured)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

from xlabench.measure import host_peak

_PLATFORMS = {"TPU": "tpu", "CPU": "cpu", "CUDA": "gpu", "GPU": "gpu"}


def sync() -> None:
    """Run the pending graph and wait until the device has finished it (ends every timed iteration).

    ``torch_xla.sync(wait=True)`` alone is not a completion barrier: on the PJRT CPU client it
    returns once the graph is launched (a 2048^3 float32 matmul "took" 0.1 ms instead of ~180 ms).
    ``xm.wait_device_ops()`` waits for the execution itself."""
    torch_xla.sync(wait=True)
    xm.wait_device_ops()


def versions() -> str:
    """The frameworks' versions; JAX's and torchax's from their packages' metadata (importing them took
    0.8 s of CPU in every torch_xla worker)."""
    from importlib import metadata

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "?"

    return (f"torch {torch.__version__} / torch_xla {torch_xla.__version__} / jax {version('jax')} "
            f"/ torchax {version('torchax')}")


def platform() -> str:
    kind = xr.device_type() or "CPU"
    return _PLATFORMS.get(kind.upper(), kind.lower())


def device_kind() -> str:
    """The device kind string (e.g. 'TPU v5 lite', 'cpu'). Under SPMD torch_xla has one virtual device
    without a kind: JAX (in this environment, as torch_xla's own kernels do) names the real one."""
    try:
        return xm.xla_device_kind(torch_xla.device())
    except RuntimeError:
        import jax

        return jax.devices()[0].device_kind


def probe(measure_peaks: bool = True) -> dict[str, Any]:
    plat = platform()
    env: dict[str, Any] = {
        "backend": "torch_xla",
        "platform": plat,
        "device_kind": device_kind(),
        "device_count": xr.global_runtime_device_count(),
        "process_count": xr.process_count(),
        "framework_version": versions(),
        "numpy_version": np.__version__,
    }
    if plat == "cpu" and measure_peaks:
        # The host's peak, measured exactly as the JAX worker measures it (XLA:CPU through JAX, which
        # torch_xla[pallas] installs): one yardstick, so MFU compares across frameworks. JAX is imported
        # only to measure it, not to read it from the cache.
        env.update(host_peak.env_keys(host_peak.get(_measure_with_jax, host_peak.jax_framework())))
    return env


def _measure_with_jax() -> tuple[float, host_peak.Bandwidth]:
    from xlabench.backends.jax import env as jax_env

    return jax_env.measure_cpu()
