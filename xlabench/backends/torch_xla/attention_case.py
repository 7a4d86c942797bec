"""Run one attention case in torch_xla: the JAX backend's inputs and FLOPs, metrics-based timing, check
against a float32 reference."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np
import torch

from xlabench.backends.torch_xla import attention_impls as impls
from xlabench.backends.torch_shared.attention import reference_outputs as shared_reference
from xlabench.backends.torch_xla import jax_kernels
from xlabench.backends.torch_shared.attention import to_numpy
from xlabench.backends.torch_xla.common import measure, peak_memory, with_device_times, xla_device
from xlabench.measure.phases import Phases
from xlabench.measure.timing import TimingPlan, max_normalised_error
from xlabench.backends import user_impl
from xlabench.workloads.attention import (REF_MAX_SCORE_BYTES, AttentionParams, attention_result, input_shapes, make_inputs)
from xlabench.protocol.worker_messages import CaseResult, CaseSkipped

TORCH_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def run_attention_case(params: dict[str, Any], impl: str, plan: TimingPlan, interpret: bool,
                       platform: str) -> CaseResult:
    p = AttentionParams(**params)
    im = impls.get(impl)
    cfg, ignored = user_impl.for_impl(im, p.attn_config(interpret))
    reason = user_impl.skip_reason(im, p, cfg, platform)
    if reason:
        raise CaseSkipped(reason)

    device = xla_device()
    dtype = TORCH_DTYPES[p.dtype]
    grad = p.mode == "fwd_bwd"
    phase = Phases()
    with phase("inputs"):
        host = make_inputs(p)

        def on_device(name: str) -> torch.Tensor:  # the impl's native layout, prepared outside the timing
            t = impls.to_layout(torch.from_numpy(host[name]).to(dtype), im.layout).contiguous()
            return t.to(device).requires_grad_(grad and name != "do")

        q, k, v = (on_device(n) for n in ("q", "k", "v"))
        do = on_device("do") if grad else None

    if interpret:
        jax_kernels.interpret_all_kernels()

    def call():
        out = im.fn(q, k, v, cfg)
        if not grad:
            return (out,)
        return (out,) + torch.autograd.grad(out, (q, k, v), do)

    m = measure(call, plan, phase=phase)
    mem, mem_note = peak_memory(device)
    problem = output_problem(p, m.out, dtype, im.layout)
    with phase("check"):
        outs = [] if problem else [to_numpy(impls.to_layout(o, im.layout)) for o in m.out]  # back to [B, S, H, D]
    q = k = v = do = None  # free the device inputs before the reference (rebound, not del: `call` closes over them)
    m.out = None
    with phase("reference"):
        refs = [] if problem else reference_outputs(host, p, cfg.sm_scale, ref_device(platform))
    notes = m.notes() + [n for n in (ignored, mem_note) if n]
    if im.note and (p.kv_heads != p.num_heads or im.source != "built-in"):
        notes.insert(0, im.note)
    if problem:  # a wrong row, not a crash: nothing to compare element by element
        notes.insert(0, f"wrong output: {problem}")
    with phase("check"):
        err = max_normalised_error(outs, refs)
    result = attention_result(p, m.samples, plan, None, m.compile_s, mem, err, notes)
    if problem:
        result = result.replace(max_abs_err=float("inf"), correct=False)
    if im.kernel_flops is not None:
        result = result.replace(metrics={**result.metrics, "kernel_flops": float(im.kernel_flops(p))})
    phase.log(f"{impl} S={p.seq_len} b={p.batch} {p.mode} causal={p.causal}")
    return with_device_times(result.replace(phase_s=phase.rounded()), plan, m)


def output_problem(p: AttentionParams, outs: Any, dtype: torch.dtype, layout: str) -> str | None:
    """Why the outputs (out, then dq, dk, dv, in the impl's layout) are not the case's shapes and dtype, or None."""
    shapes = input_shapes(p)
    want = [shapes["q"]] if p.mode == "fwd" else [shapes["q"], shapes["q"], shapes["k"], shapes["v"]]
    if layout == "bhsd":
        want = [(b, h, s, d) for b, s, h, d in want]
    if len(outs) != len(want):
        return f"returned {len(outs)} tensor(s), expected {len(want)}"
    for name, o, shape in zip(("out", "dq", "dk", "dv"), outs, want):
        if not isinstance(o, torch.Tensor):
            return f"{name} is a {type(o).__name__}, not a tensor"
        if tuple(o.shape) != shape or o.dtype != dtype:
            return (f"{name} has shape {tuple(o.shape)} dtype {str(o.dtype).removeprefix('torch.')}, expected "
                    f"shape {shape} dtype {str(dtype).removeprefix('torch.')} ({layout} in the input dtype)")
    return None


def ref_device(platform: str) -> torch.device:
    """Where the reference runs: eager torch on the host CPU (exact float32, no compile) when the
    device is the CPU anyway; the XLA device otherwise (TPU-scale sequences), at highest precision."""
    return torch.device("cpu") if platform == "cpu" else xla_device()


@contextlib.contextmanager
def _highest_precision(device: torch.device) -> Iterator[None]:
    """float32 matmuls at full precision on an XLA device (TPU default: one bf16 pass), then back."""
    if device.type != "xla":
        yield
        return
    import torch_xla.backends

    saved = torch_xla.backends.get_mat_mul_precision()
    torch_xla.backends.set_mat_mul_precision("highest")
    try:
        yield
    finally:
        torch_xla.backends.set_mat_mul_precision(saved)


def reference_outputs(host: dict[str, np.ndarray], p: AttentionParams, sm_scale: float,
                      device: torch.device, max_score_bytes: int = REF_MAX_SCORE_BYTES) -> list[np.ndarray]:
    """torch_shared.attention.reference_outputs on ``device``, float32 matmuls at full precision there."""
    with _highest_precision(device):
        return shared_reference(host, p, sm_scale, device, max_score_bytes)
