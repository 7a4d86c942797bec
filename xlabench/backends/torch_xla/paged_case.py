"""Run one paged-attention decode case in torch_xla: the JAX backend's inputs, counts and reference."""

from __future__ import annotations

from typing import Any

import torch

from xlabench.backends.torch_xla import jax_kernels
from xlabench.backends.torch_xla import paged_impls as impls
from xlabench.backends.torch_xla.attention_case import TORCH_DTYPES
from xlabench.backends.torch_shared.attention import to_numpy
from xlabench.backends.torch_xla.common import measure, peak_memory, with_device_times, xla_device
from xlabench.backends.torch_xla.env import device_kind
from xlabench.measure.phases import Phases
from xlabench.measure.timing import TimingPlan
from xlabench.workloads.paged import PagedParams, cached_inputs, paged_result
from xlabench.protocol.worker_messages import CaseResult, CaseSkipped


def run_paged_case(params: dict[str, Any], impl: str, plan: TimingPlan, interpret: bool,
                   platform: str) -> CaseResult:
    p = PagedParams(**params)
    im = impls.get(impl)
    device = xla_device()
    reason = im.unsupported(p, platform, device_kind())
    if reason:
        raise CaseSkipped(reason)
    cfg = p.paged_config(interpret, platform)
    if interpret:
        jax_kernels.interpret_all_kernels()

    phase = Phases()
    with phase("inputs"):
        host = cached_inputs(p)
        dtype = TORCH_DTYPES[p.dtype]
        shared = [torch.from_numpy(host[n]).to(dtype).to(device) for n in ("q", "k_pages", "v_pages")]
        shared += [torch.from_numpy(host[n]).to(device) for n in ("lengths", "page_table")]
        args = im.prepare(*shared, cfg)  # the impl's native layout, outside the timed region
        del shared

    m = measure(lambda: (im.fn(*args, cfg),), plan, phase=phase)
    mem, mem_note = peak_memory(device)
    notes = m.notes() + [mem_note]
    if im.cpu_note and platform == "cpu":
        notes.insert(0, im.cpu_note)
    with phase("check"):  # the output back, the reference (cached per shape) and the output against it
        out = to_numpy(m.out[0])
        m.out = None
        args = None  # free the device inputs (rebound, not del: the timed lambda closes over it)
        result = paged_result(p, m.samples, plan, None, m.compile_s, mem, out, im.kv_round(platform), notes)
    phase.log(f"{impl} b={p.batch} context={p.max_context} page={p.page_size}")
    return with_device_times(result.replace(phase_s=phase.rounded()), plan, m)
