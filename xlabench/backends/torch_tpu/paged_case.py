"""Run one paged-attention decode case on TorchTPU: the shared inputs, counts and reference, the kernel
record's code, tuned blocks as the JAX backend tunes them, and the device clock from TorchTPU's profiler."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import torch

from xlabench.backends.torch_shared.attention import to_numpy
from xlabench.backends.torch_tpu import tune_case
from xlabench.backends.torch_tpu.attention_case import TORCH_DTYPES
from xlabench.backends.torch_tpu.common import fresh_case, measure, peak_memory, with_device_times
from xlabench.backends.torch_tpu import env
from xlabench.impls import kernels
from xlabench.impls.kernel import resolve
from xlabench.measure.phases import Phases
from xlabench.measure.timing import TimingPlan
from xlabench.protocol.worker_messages import CaseResult, CaseSkipped
from xlabench.results.schema import TUNED_PREFIX
from xlabench.tune import blocks_text
from xlabench.tune.decide import row_times
from xlabench.tune.search import Dropped
from xlabench.workloads.paged import PAGED_BLOCKS, PagedParams, cached_inputs, paged_result, tune_key_fields


def to_device(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """A prepared host array on the chip: floating arrays in the case's dtype, integer ones as they are."""
    t = torch.from_numpy(np.ascontiguousarray(a))
    return (t.to(dtype) if t.is_floating_point() else t).to(env.device())


def run_paged_case(params: dict[str, Any], impl: str, plan: TimingPlan, interpret: bool,
                   platform: str) -> CaseResult:
    p = PagedParams(**params)
    fresh_case()
    k = kernels.kernel("torch_tpu", impl, paged_family=True)
    if k is None or not k.code:
        raise ValueError(f"torch_tpu has no paged-attention kernel {impl!r}")
    kind = env.device_kind()
    reason = k.unsupported(p, platform, kind)
    if reason:
        raise CaseSkipped(reason)
    kernel = resolve(k.code)
    cfg = base = dataclasses.replace(p.paged_config(interpret, platform), device_kind=env.jax_device_kind())
    phase = Phases()
    with phase("inputs"):
        host = {n: (a.astype(np.float32) if a.dtype.kind == "f" else a) for n, a in cached_inputs(p).items()}
        try:
            args = tuple(to_device(a, TORCH_DTYPES[p.dtype]) for a in kernel.prepare(host, cfg))
        except Exception as e:  # the JAX prepare's own input checks
            raise CaseSkipped(f"{impl}: its inputs were refused: {type(e).__name__}: {e}"[:600]) from None

    def build(program: str, blocks: dict[str, int]) -> Any:
        c = base.with_blocks(blocks)
        why = k.unsupported(p.model_copy(update={"pages_per_compute_block": c.pages_per_compute_block}), platform, kind)
        if why:
            raise Dropped("constraint", why)
        return lambda: kernel(*args, c)

    space = None if k.tune_space is None else functools.partial(k.tune_space, p)
    with phase("tune"):
        t = tune_case.decide(plan, space, impl, tune_key_fields(p), build, row_check=True)
    cfg, tuned = _at_blocks(cfg, t)
    m = measure(lambda: (kernel(*args, cfg),), plan, phase=phase)
    note = t.note
    if t.check is not None:  # a table entry: the row's own timing is its check
        with phase("tune"):
            settled, again = t.check.settle(row_times(m.samples, m.device))
        cfg, tuned = _at_blocks(base, settled)
        note = settled.note
        if again:  # off its record: searched, and the row timed at the winner
            m.out = None
            m = measure(lambda: (kernel(*args, cfg),), plan, phase=phase)
    mem, mem_note = peak_memory()
    with phase("check"):  # the output back, the reference (cached per shape) and the output against it
        out = to_numpy(m.out[0])
        m.out, args = None, ()
        result = paged_result(p, m.samples, plan, None, m.compile_s, mem, out, kernel.kv_round(platform),
                              [n for n in (note, mem_note, *m.notes()) if n])
    phase.log(f"{impl} b={p.batch} context={p.max_context} page={p.page_size}")
    result = result.replace(metrics={**result.metrics, **tuned}, phase_s=phase.rounded())
    return with_device_times(result, plan, m)


def _at_blocks(cfg: Any, t: Any) -> tuple[Any, dict[str, Any]]:
    """(``cfg`` at a tune.decide.Tuned's blocks, the row's tuning columns)."""
    if not t.blocks:
        return cfg, t.fields
    cfg = cfg.with_blocks(t.blocks)
    return cfg, {**t.fields, **{TUNED_PREFIX + n: getattr(cfg, n) for n in PAGED_BLOCKS},
                 "blocks": blocks_text(t.blocks, PAGED_BLOCKS)}
