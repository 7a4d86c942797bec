"""What the torch_xla worker runs on: platform, device kind and count, versions, CPU peak (measured)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr

_PLATFORMS = {"TPU": "tpu", "CPU": "cpu", "CUDA": "gpu", "GPU": "gpu"}


def sync() -> None:
    """Run the pending graph and wait until the device has finished it (ends every timed iteration).

    ``torch_xla.sync(wait=True)`` alone is not a completion barrier: on the PJRT CPU client it
    returns once the graph is launched (a 2048^3 float32 matmul "took" 0.1 ms instead of ~180 ms).
    ``xm.wait_device_ops()`` waits for the execution itself."""
    torch_xla.sync(wait=True)
    xm.wait_device_ops()


def versions() -> str:
    import jax
    import torchax

    return (f"torch {torch.__version__} / torch_xla {torch_xla.__version__} / jax {jax.__version__} "
            f"/ torchax {getattr(torchax, '__version__', '?')}")


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
        # torch_xla[pallas] installs): one yardstick, so MFU compares across frameworks.
        from xlabench.backends.jax import env as jax_env

        env.update(jax_env.cpu_peak_env())
    return env
