"""Which of a suite's models fits the slice (the worker's op ``fit``; suite/slice_fit.py decides): each
candidate's step compiled at the ladder's smallest batch for every impl, never run, and XLA's memory
analysis of it (as ``global_batch: auto`` reads it) against the device's limit. Largest candidate first;
the probes stop at the first model that fits every impl."""

from __future__ import annotations

from typing import Any, Optional

import jax

from xlabench.backends.jax import aot, train_case
from xlabench.protocol.target import TargetSpec
from xlabench.protocol.worker_messages import CaseSkipped
from xlabench.workloads.train import TrainParams


def fit_models(candidates: list[dict[str, Any]], impls: list[str], platform: str,
               target: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
    """One probe per (model, impl) as {model, impl, bytes, limit, error}; ``target``: a compile target's
    spec (its compile-only devices and HBM), else this process's devices. A device that reports no limit
    (CPU) gets one probe with ``limit`` None and nothing compiled. An impl that cannot run the shape at all
    (CaseSkipped) does not count against the model: its rows say why."""
    if target is not None:
        devices, plat = aot.topology_devices(TargetSpec.from_message(target)), "tpu"
        limit = aot.hbm_capacity(devices[0])[0]
    else:
        devices, plat = tuple(jax.devices()), platform
        limit = train_case.device_limit(devices[0])
    if limit is None:
        return [{"model": candidates[0]["model"], "impl": impls[0], "bytes": None, "limit": None}]
    probes: list[dict[str, Any]] = []
    for params in candidates:
        p = TrainParams(**params)
        fits = True
        for impl in impls:
            probe = {"model": p.model, "impl": impl, "limit": limit}
            try:
                if p.devices > len(devices):
                    raise CaseSkipped(f"needs {p.devices} devices, the slice has {len(devices)}")
                prog = train_case.program(p, impl, False, plat, devices[:p.devices],
                                          cached_for=devices[0].device_kind if target is not None else None)
                probe["bytes"] = prog.peak_bytes(donate=plat != "cpu", device=devices[0])
            except CaseSkipped:
                continue
            except Exception as e:  # a candidate that does not compile does not fit
                probe.update(bytes=None, error=f"{type(e).__name__}: {e}"[:300])
            probes.append(probe)
            if probe["bytes"] is None or probe["bytes"] > limit:
                fits = False
                break
        if fits:
            break
    return probes
