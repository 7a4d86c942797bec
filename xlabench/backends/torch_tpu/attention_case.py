"""Run one attention case on TorchTPU: the shared inputs, FLOPs and float32 reference (made on the chip at
the highest float32 matmul precision), the kernel record's code, tuned blocks, and the device clock from
TorchTPU's profiler."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Optional

import torch

from xlabench.backends.torch_shared.attention import reference_outputs, to_layout, to_numpy
from xlabench.backends.torch_tpu import tune_case
from xlabench.backends.torch_tpu.common import Measurement, fresh_case, measure, peak_memory, with_device_times
from xlabench.backends.torch_tpu import env
from xlabench import impls as catalog
from xlabench.impls import AttentionImplRecord
from xlabench.impls import attention_rules as rules
from xlabench.measure.phases import Phases
from xlabench.measure.timing import TimingPlan, max_normalised_error
from xlabench.protocol.worker_messages import CaseResult, CaseSkipped
from xlabench.tune.decide import Settle, row_times
from xlabench.workloads.attention import (AttentionParams, AttnConfig, attention_result, make_inputs)

TORCH_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def record(impl: str) -> AttentionImplRecord:
    """The torch_tpu attention kernel ``impl`` as its kernel record declares it (code, layout, rules)."""
    return catalog.attention_record("torch_tpu", impl, "torch_tpu attention")


@contextlib.contextmanager
def highest_precision() -> Iterator[None]:
    """float32 matmuls at full precision (the TPU's default is one bf16 pass), then back."""
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved)


def step(p: AttentionParams, im: AttentionImplRecord, cfg: AttnConfig, args: tuple) -> Callable[[], tuple]:
    """One iteration on ``args`` (q, k, v[, do] in the impl's layout): (out,) or (out, dq, dk, dv)."""
    q, k, v = args[:3]
    fn = im.fn.standalone(cfg, p.seq_len, p.kv_len)

    def call() -> tuple:
        out = fn(q, k, v)
        if p.mode == "fwd":
            return (out,)
        return (out,) + torch.autograd.grad(out, (q, k, v), args[3])

    return call


def tune_for(p: AttentionParams, im: AttentionImplRecord, cfg: AttnConfig, plan: TimingPlan, impl: str,
             platform: str, args: tuple, row_check: bool = True) -> tuple[AttnConfig, dict[str, Any], str, Optional[Settle]]:
    """(the config to run at, the row's tuning columns, a note, the row's check of a table entry or None), as
    every backend decides them (attention_rules.tune_blocks) on this backend's compile and clock (tune_case).
    ``row_check`` off: a table entry is verified by timing it first (the caller's timing is not the kernel's)."""
    return rules.tune_blocks(
        p, im, cfg, platform,
        lambda space, key, build, hints: tune_case.decide(plan, space, impl, key, build, hints, row_check=row_check),
        lambda q, c, program: step(q, im, c, args[:3] if program == "fwd" else args))


def tuned_config(p: AttentionParams, impl: str, cfg: AttnConfig, plan: TimingPlan,
                 platform: str) -> tuple[AttnConfig, dict[str, Any], str]:
    """tune_for on inputs of case ``p`` made here (the train step's attention, tuned at its shape through the
    same search, cache and table as an attention case; a table entry is verified by timing it first)."""
    im = record(impl)
    dtype, dev = TORCH_DTYPES[p.dtype], env.device()
    args = tuple(to_layout(torch.from_numpy(x).to(dtype), im.layout).contiguous().to(dev).requires_grad_(name != "do")
                 for name, x in make_inputs(p).items())
    return tune_for(p, im, cfg, plan, impl, platform, args, row_check=False)[:3]


def tuned_measure(p: AttentionParams, im: AttentionImplRecord, cfg: AttnConfig, plan: TimingPlan, impl: str,
                  platform: str, args: tuple, phase: Phases) -> tuple[AttnConfig, dict[str, Any], str, Measurement]:
    """The case tuned and timed: a table entry's blocks checked by the row's own timing, the row timed again
    at the search's winner where it was off the entry's record."""
    with phase("tune"):
        cfg, tuned, tune_note, settle = tune_for(p, im, cfg, plan, impl, platform, args)
    m = measure(step(p, im, cfg, args), plan, phase=phase)
    if settle is not None:
        with phase("tune"):
            cfg, tuned, tune_note, again = settle(row_times(m.samples, m.device))
        if again:
            m.out = None
            m = measure(step(p, im, cfg, args), plan, phase=phase)
    return cfg, tuned, tune_note, m


def run_attention_case(params: dict[str, Any], impl: str, plan: TimingPlan, interpret: bool,
                       platform: str) -> CaseResult:
    p = AttentionParams(**params)
    im = record(impl)
    fresh_case()
    cfg, ignored = rules.for_impl(im, p.attn_config(interpret))
    reason = rules.skip_reason(im, p, cfg, platform)
    if reason:
        raise CaseSkipped(reason)
    dtype, dev, grad = TORCH_DTYPES[p.dtype], env.device(), p.mode == "fwd_bwd"
    phase = Phases()
    with phase("inputs"):
        host = make_inputs(p)

        def on_device(name: str) -> torch.Tensor:  # the impl's native layout, prepared outside the timing
            t = to_layout(torch.from_numpy(host[name]).to(dtype), im.layout).contiguous()
            return t.to(dev).requires_grad_(grad and name != "do")

        args = tuple(on_device(n) for n in ("q", "k", "v", "do")[:4 if grad else 3])
    try:
        cfg, tuned, tune_note, m = tuned_measure(p, im, cfg, plan, impl, platform, args, phase)
    except Exception as e:
        why = env.libtpu_shortfall(e)
        if why:
            raise CaseSkipped(why) from None
        raise
    mem, mem_note = peak_memory()
    with phase("check"):
        outs = [to_numpy(to_layout(o, im.layout)) for o in m.out]  # back to [B, S, H, D]
    args = ()
    m.out = None
    with phase("reference"), highest_precision():
        refs = reference_outputs(host, p, cfg.sm_scale, dev)
    with phase("check"):
        err = max_normalised_error(outs, refs)
    notes = [n for n in (im.note, ignored, tune_note, mem_note, *m.notes()) if n]
    result = attention_result(p, m.samples, plan, None, m.compile_s, mem, err, notes)
    phase.log(f"{impl} S={p.seq_len} b={p.batch} {p.mode} causal={p.causal}")
    result = result.replace(metrics={**result.metrics, **tuned}, phase_s=phase.rounded())
    return with_device_times(result, plan, m)
