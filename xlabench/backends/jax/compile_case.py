"""Compile one case for a target this host does not have (``xlabench compile``): the same step
functions, shardings and real kernels as a run, under the case plan the parent sent (interpreted as its
plan says: never on a TPU or GPU target; the attention of a train step at the blocks of the plan's tuning
folder), on abstract inputs, for the compile-only devices of a TPU topology (or lowered for CUDA). Nothing
executes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding

from xlabench.backends import user_impl
from xlabench.backends.jax import aot
from xlabench.backends.jax import attention_impls
from xlabench.backends.jax import paged_impls
from xlabench.backends.jax.attention_case import kernel_flops, skip_reason, step_fn
from xlabench.backends.jax.common import oom_text
from xlabench.backends.jax.paged_case import config as paged_config
from xlabench.workloads import attention as attention_workload
from xlabench.workloads import paged as paged_workload
from xlabench.workloads.train import TrainParams
from xlabench.protocol.worker_messages import CaseSkipped, CompileResult
from xlabench.protocol.status import COMPILED, LOWERED, OOM
from xlabench.protocol.target import TargetSpec
from xlabench.protocol.timing_plan import TimingPlan

def target_env(target: TargetSpec) -> dict[str, Any]:
    """The row's environment columns: the target's devices, not this host's."""
    if target.platform == "gpu":
        return {"platform": "gpu", "device_kind": f"{target.name} (lowering only)", "device_count": 1}
    devices = aot.topology_devices(target)
    return {"platform": "tpu", "device_kind": devices[0].device_kind, "device_count": len(devices)}


def _one_device(target: TargetSpec, fn: Callable, args: Sequence[Any], flops: float) -> CompileResult:
    """A single-device program (attention, paged decode) on the target's first device."""
    if target.platform == "gpu":
        return CompileResult(LOWERED, aot.lower_for_cuda(fn, args))
    device = aot.topology_devices(target)[0]
    sharding = SingleDeviceSharding(device)
    try:
        fields = aot.compile_analyzed(fn, args, device, target, flops, in_shardings=sharding, out_shardings=sharding)
    except aot.CompileOom as oom:
        return _oom(oom, device)
    return CompileResult(COMPILED, fields)


def _oom(oom: aot.CompileOom, device: Any) -> CompileResult:
    fields = aot.oom_fields(oom, device)
    return CompileResult(OOM, fields, oom_text(fields["peak_memory_bytes"], fields["hbm_capacity_bytes"], str(oom)))


def compile_attention_case(params: dict[str, Any], impl: str, target: TargetSpec, plan: TimingPlan,
                           interpret: bool) -> CompileResult:
    p = attention_workload.AttentionParams(**params)
    im = attention_impls.get(impl)
    cfg = user_impl.for_impl(im, p.attn_config(interpret=interpret))[0]
    reason = skip_reason(p, im, cfg, target.platform)
    if reason:
        raise CaseSkipped(reason)
    dtype = jnp.dtype(p.dtype)
    swap = im.layout == "bhsd"  # [B, S, H, D] -> the impl's layout, as a run hands it over
    args = [jax.ShapeDtypeStruct((b, h, s, d) if swap else (b, s, h, d), dtype)
            for b, s, h, d in attention_workload.input_shapes(p).values()]
    return _one_device(target, step_fn(p, im, cfg), args, p.flops()).with_fields(
        flops=p.flops(), kernel_flops=kernel_flops(p, im), io_bytes=p.io_bytes())


def compile_paged_case(params: dict[str, Any], impl: str, target: TargetSpec, plan: TimingPlan,
                       interpret: bool) -> CompileResult:
    p = paged_workload.PagedParams(**params)
    im = paged_impls.get(impl)
    env = target_env(target)
    reason = im.unsupported(p, target.platform, env["device_kind"])
    if reason:
        raise CaseSkipped(reason)
    cfg = dataclasses.replace(paged_config(p, interpret=interpret, platform=target.platform),
                              device_kind=env["device_kind"] if target.platform == "tpu" else None)
    shared = [jax.ShapeDtypeStruct(shape, jnp.dtype(dtype)) for shape, dtype in paged_workload.input_shapes(p).values()]
    args = jax.eval_shape(lambda *a: im.prepare(*a, cfg), *shared)  # the impl's layout, as in a run
    return _one_device(target, lambda *a: im.fn(*a, cfg), args, p.flops()).with_fields(
        flops=p.flops(), kernel_flops=p.flops(), bytes=p.bytes())


def compile_train_case(params: dict[str, Any], impl: str, target: TargetSpec, plan: TimingPlan,
                       interpret: bool) -> CompileResult:
    from xlabench.backends.jax import train_case

    p = TrainParams(**params)
    if target.platform == "gpu":
        raise CaseSkipped("GPU targets lower single-device kernels only (attention, paged); a sharded train "
                          "step needs the GPU's devices to lower for")
    devices = aot.topology_devices(target)
    if p.devices > len(devices):
        raise CaseSkipped(f"the case needs {p.devices} devices; target {target.name} has {len(devices)}")
    device, mesh = devices[0], list(devices[:p.devices])
    compiled: dict[int, tuple[Any, bool]] = {}  # batch -> (row fields or CompileOom, served from the figure store)

    blocks_note: dict[str, Any] = {}  # which attention blocks the compile used (the tuning cache's, or defaults)
    # global_batch auto: every probe at the blocks of the smallest batch's shape, as a run on the chip does
    tune_batch = p.batch_step() if p.auto_batch else None

    def analyzed(q: TrainParams) -> Any:
        """The row fields of the step at q's batch (a CompileOom where libtpu refused it), compiled once: the
        batch search's probe at the batch it settles on is the compile this row reports. The attention runs
        at the blocks a run on the chip would: the tuning cache's winner for the target's device kind."""
        if q.batch() not in compiled:
            prog = train_case.program(q, impl, interpret=interpret, platform="tpu", devices=mesh, tuned=blocks_note,
                                      tune_batch=tune_batch, cached_for=device.device_kind, cache_dir=plan.tune_dir)
            try:  # donated as a TPU run does: parameters and optimizer state updated in place
                out: Any = aot.compile_analyzed(prog.fn, prog.abstract_args, device, target, q.flops() / q.devices,
                                                q.devices, **prog.jit_kwargs(donate=True))
            except aot.CompileOom as oom:
                out = oom
            compiled[q.batch()] = (out, bool(aot.take_compile_cached()))
        return compiled[q.batch()][0]

    def need(q: TrainParams) -> int | None:
        out = analyzed(q)
        return (out.used or None) if isinstance(out, aot.CompileOom) else out["peak_memory_bytes"]

    p, batch_note = train_case.resolve_batch(p, impl, False, "tpu", aot.hbm_capacity(device)[0], mesh, need=need)
    out = analyzed(p)
    aot.set_compile_cached(compiled[p.batch()][1])
    if not isinstance(out, aot.CompileOom):
        aot.keep_chosen(out)
    if isinstance(out, aot.CompileOom):
        return _oom(out, device)
    fields = dict(out)
    if blocks_note.get("notes"):
        fields["notes"] += f"; {blocks_note['notes']}"
    if p.devices < len(devices):
        fields["notes"] += f"; compiled for {p.devices} of the target's {len(devices)} devices"
    if batch_note:
        fields["notes"] += f"; {batch_note}"
        fields.update(global_batch=p.batch(), max_batch=p.batch())
    fields.update(flops=p.flops(), flops_palm=p.flops_palm(), params_count=p.params_count())
    return CompileResult(COMPILED, fields)
