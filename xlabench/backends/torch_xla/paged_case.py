"""Run one paged-attention decode case in torch_xla: the JAX backend's inputs, counts and reference."""

from __future__ import annotations

from typing import Any

import torch

from xlabench.backends.torch_xla import jax_kernels
from xlabench.backends.torch_xla import paged_impls as impls
from xlabench.backends.torch_xla.attention_case import TORCH_DTYPES
from xlabench.backends.torch_xla.attention_impls import default_scale
from xlabench.backends.torch_xla.common import measure, peak_memory, to_numpy, xla_device
from xlabench.backends.torch_xla.env import device_kind
from xlabench.harness import TimingPlan, case_result, max_normalised_error
from xlabench.workloads.paged import PagedConfig, PagedParams, cached_inputs, cached_reference
from xlabench.worker_api import CaseResult, CaseSkipped


def run_paged_case(params: dict[str, Any], impl: str, plan: TimingPlan, interpret: bool,
                   platform: str) -> CaseResult:
    p = PagedParams(**params)
    im = impls.get(impl)
    device = xla_device()
    reason = im.unsupported(p, platform, device_kind())
    if reason:
        raise CaseSkipped(reason)
    cfg = PagedConfig(sm_scale=default_scale(p.head_dim), pages_per_compute_block=p.pages_per_compute_block,
                            megacore_mode=p.megacore_mode, interpret=interpret, platform=platform)
    if interpret:
        jax_kernels.interpret_all_kernels()

    host = cached_inputs(p)
    dtype = TORCH_DTYPES[p.dtype]
    shared = [torch.from_numpy(host[n]).to(dtype).to(device) for n in ("q", "k_pages", "v_pages")]
    shared += [torch.from_numpy(host[n]).to(device) for n in ("lengths", "page_table")]
    args = im.prepare(*shared, cfg)  # the impl's native layout, outside the timed region
    del shared

    m = measure(lambda: (im.fn(*args, cfg),), plan)
    mem, mem_note = peak_memory(device)
    out = to_numpy(m.out[0])
    m.out = None
    args = None  # free the device inputs (rebound, not del: the timed lambda closes over it)

    kv_round = im.kv_round(platform)
    err = max_normalised_error([out], [cached_reference(p, kv_round)])
    notes = m.notes() + [mem_note]
    if kv_round:
        notes.append(f"reference with K/V rounded to {kv_round} (the kernel casts them)")
    if im.cpu_note and platform == "cpu":
        notes.insert(0, im.cpu_note)
    return case_result(m.stats, m.samples, plan, None, m.compile_s, mem, err, p.err_tol(), "; ".join(notes),
                       flops=p.flops(), kernel_flops=p.flops(), bytes=p.bytes(),
                       tokens_per_step=p.batch * p.q_tokens)
