"""Run one paged-attention decode case in JAX: inputs, AOT compile, timing, check against the reference."""

from __future__ import annotations

import functools
from typing import Any, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np

from xlabench.backends.jax import paged_impls as impls
from xlabench.backends.jax import hlo_cost, tune_case
from xlabench.backends.jax.common import compile_timed, kernel_passes, peak_memory
from xlabench.measure.phases import Phases
from xlabench.measure.timing import TimingPlan, with_timer
from xlabench.results.schema import TUNED_PREFIX
from xlabench.tune import blocks_text
from xlabench.tune.decide import Settle, row_times
from xlabench.tune.search import Dropped
from xlabench.workloads.paged import PAGED_BLOCKS, PagedParams, cached_inputs, paged_result, tune_key_fields
from xlabench.protocol.worker_messages import CaseResult, CaseSkipped


def config(p: PagedParams, interpret: bool, platform: str) -> impls.PagedConfig:
    """How the impls run this case (the run and the compile-only path share it)."""
    return p.paged_config(interpret, platform)


def tuned_config(p: PagedParams, im: Any, cfg: impls.PagedConfig, plan: TimingPlan, impl: str, platform: str,
                 device: Any, held: list) -> tuple[impls.PagedConfig, dict[str, Any], str, Optional[Settle]]:
    """(the config to run at, the row's tuning columns, a note, the row's check or None): the blocks the plan's
    tuning decides (tune_case.decide: the cache, the table or a search on ``held[0]``, the case's inputs,
    let go once nothing can search any more). A table entry is run untimed: the check settles it on the row's
    times (tune.decide.row_times), searching where it is off its record."""

    def build(program: str, blocks: dict[str, int]) -> tuple[Any, tuple]:
        c = cfg.with_blocks(blocks)
        reason = im.unsupported(p.model_copy(update={"pages_per_compute_block": c.pages_per_compute_block}),
                                platform, device.device_kind)
        if reason:
            raise Dropped("constraint", reason)
        return (lambda *a: im.fn(*a, c)), held[0]

    space = None if im.tune_space is None else functools.partial(im.tune_space, p)
    t = tune_case.decide(plan, space, impl, tune_key_fields(p), build, row_check=True)
    if t.check is None:
        held.clear()  # for the search only (the case frees its inputs after its timing)
        return (*_at_blocks(cfg, t), None)
    check = t.check

    def settle(row_s: Mapping[str, float]) -> tuple[impls.PagedConfig, dict[str, Any], str, bool]:
        settled, again = check.settle(row_s)
        held.clear()
        return (*_at_blocks(cfg, settled), again)

    return (*_at_blocks(cfg, t), settle)


def _at_blocks(cfg: impls.PagedConfig, t: Any) -> tuple[impls.PagedConfig, dict[str, Any], str]:
    """(``cfg`` at a tune.decide.Tuned's blocks, the row's tuning columns, its note)."""
    if t.blocks:
        cfg = cfg.with_blocks(t.blocks)
        return cfg, {**t.fields, **{TUNED_PREFIX + n: getattr(cfg, n) for n in PAGED_BLOCKS},
                     "blocks": blocks_text(t.blocks, PAGED_BLOCKS)}, t.note
    if t.fields.get("tuned") == "off":  # the kernel's default block, which it ran at
        return cfg, {**t.fields, **{TUNED_PREFIX + n: getattr(cfg, n) for n in PAGED_BLOCKS}}, t.note
    return cfg, t.fields, t.note


def compile_and_time(im: Any, cfg: impls.PagedConfig, args: tuple, plan: TimingPlan, interpret: bool,
                     phase: Phases) -> tuple[Any, float, float, list[float], Any, Any]:
    """(the executable, lowering and compile seconds, the wall samples, the last output, the device clock's
    seconds) of the kernel at ``cfg``; a kernel the interpreter cannot run here is a skipped case."""

    def fn(*a):
        return im.fn(*a, cfg)

    try:
        with impls.tpu_interpret(cfg):  # interpret mode is fixed at trace time: trace inside it
            with phase("compile"):
                compiled, lower_s, compile_s = compile_timed(fn, args)
            with phase("timing"):
                samples, out, traced = kernel_passes(compiled, args, plan)
    except Exception as e:
        if interpret and im.interpreter_fails:
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            why = f"{im.interpreter_fails}, jax {jax.__version__}: {type(e).__name__}: {first}"
            raise CaseSkipped(why[:600]) from None
        raise
    return compiled, lower_s, compile_s, samples, out, traced


def run_paged_case(params: dict[str, Any], impl: str, plan: TimingPlan, interpret: bool,
                   platform: str) -> CaseResult:
    p = PagedParams(**params)
    im = impls.get(impl)
    device = jax.local_devices()[0]
    reason = im.unsupported(p, platform, device.device_kind)
    if reason:
        raise CaseSkipped(reason)
    cfg = config(p, interpret, platform)
    phase = Phases()
    with phase("inputs"):
        host = cached_inputs(p)
        dtype = jnp.dtype(p.dtype)
        shared = [jax.device_put(jnp.asarray(host[n], dtype), device) for n in ("q", "k_pages", "v_pages")]
        shared += [jax.device_put(jnp.asarray(host[n]), device) for n in ("lengths", "page_table")]
        args = im.prepare(*shared, cfg)  # the impl's native layout, outside the timed region
        del shared

    with phase("tune"):
        cfg, tuned, tune_note, settle = tuned_config(p, im, cfg, plan, impl, platform, device, [args])
    compiled, lower_s, compile_s, samples, out, traced = compile_and_time(im, cfg, args, plan, interpret, phase)
    if settle is not None:  # a table entry: the row's own timing is its check
        with phase("tune"):
            cfg, tuned, tune_note, again = settle(row_times(samples, traced))
        if again:  # off its record: searched, and the row timed at the winner
            del compiled, out
            compiled, lower_s, compile_s, samples, out, traced = compile_and_time(im, cfg, args, plan, interpret, phase)
    with phase("xla figures"):
        mem, mem_note = peak_memory(compiled, device)
        xla, xla_notes = hlo_cost.xla_figures(compiled, 1)
    del args

    with phase("check"):  # the reference (cached per shape) and the output against it
        result = paged_result(p, samples, plan, lower_s, compile_s, mem, np.asarray(out),
                              im.kv_round(platform), [tune_note, mem_note, *xla_notes])
    phase.log(f"{impl} b={p.batch} context={p.max_context} page={p.page_size}")
    result = result.replace(metrics={**result.metrics, **xla, **tuned}, phase_s=phase.rounded())
    return with_timer(result, plan, traced)
