"""Run one attention case in JAX: inputs, AOT compile, timing, check against the float32 reference."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from xlabench.backends import user_impl
from xlabench.backends.jax import attention_impls as impls
from xlabench.backends.jax import hlo_cost, tune_case
from xlabench.impls import attention_rules as rules
from xlabench.backends.jax.common import compile_timed, device_error_parts, kernel_passes, peak_memory, runs_pallas
from xlabench.measure.phases import Phases
from xlabench.measure.timing import TimingPlan, max_normalised_error, with_timer
from xlabench.tune.decide import Settle, row_times
from xlabench.workloads.attention import AttentionParams, attention_result, input_shapes, make_inputs
from xlabench.protocol.worker_messages import CaseResult, CaseSkipped
from xlabench.units import GIB


def skip_reason(p: AttentionParams, im: impls.AttentionImplRecord, cfg: impls.AttnConfig, platform: str) -> str | None:
    return impls.skip_reason(im, p, cfg, platform)


def kernel_flops(p: AttentionParams, im: impls.AttentionImplRecord) -> float:
    """The impl's own FLOP count of one iteration (its hook), else the standard kernel count."""
    return float(im.kernel_flops(p)) if im.kernel_flops is not None else p.kernel_flops()


def output_problem(p: AttentionParams, outs: list[Any], dtype: Any) -> str | None:
    """Why the outputs ([B, S, H, D] each, the inputs' dtype) are not what the case expects, or None."""
    want = attention_shapes(p)
    names = ("out", "dq", "dk", "dv")
    if len(outs) != len(want):
        return f"returned {len(outs)} array(s), expected {len(want)}"
    for name, o, shape in zip(names, outs, want):
        if not hasattr(o, "shape") or not hasattr(o, "dtype"):
            return f"{name} is a {type(o).__name__}, not an array"
        if tuple(o.shape) != tuple(shape) or o.dtype != dtype:
            return (f"{name} has shape {tuple(o.shape)} dtype {o.dtype}, expected shape {tuple(shape)} "
                    f"dtype {jnp.dtype(dtype)} ([B, S, H, D] in the input dtype)")
    return None


def attention_shapes(p: AttentionParams) -> list[tuple[int, ...]]:
    shapes = input_shapes(p)
    return [shapes["q"]] if p.mode == "fwd" else [shapes["q"], shapes["q"], shapes["k"], shapes["v"]]


class WrongOutput(Exception):
    """A kernel's forward output that a fwd_bwd case cannot differentiate; the message is the row's error."""


def fwd_output_problem(out: Any, do: Any) -> str | None:
    """Why a kernel's forward output is not one array of the cotangent's shape and dtype (the layout's
    q shape, in the input dtype), in the words output_problem gives a fwd case, or None."""
    if isinstance(out, (tuple, list)):
        return f"wrong output: returned {len(out)} array(s), expected 1"
    if not hasattr(out, "shape") or not hasattr(out, "dtype"):
        return f"wrong output: out is a {type(out).__name__}, not an array"
    if tuple(out.shape) != tuple(do.shape) or out.dtype != do.dtype:
        return (f"wrong output: out has shape {tuple(out.shape)} dtype {out.dtype}, expected shape "
                f"{tuple(do.shape)} dtype {do.dtype} (q's shape in the impl's layout, in the input dtype)")
    return None


def step_fn(p: AttentionParams, im: impls.AttentionImplRecord, cfg: impls.AttnConfig) -> Callable:
    """What one iteration computes, on inputs in the impl's layout: (q, k, v) -> out, or for fwd_bwd
    (q, k, v, do) -> (out, dq, dk, dv). The run and the compile-only path share it."""

    def fwd(q, k, v):
        return im.fn(q, k, v, cfg)

    if p.mode == "fwd":
        return fwd

    def fwd_bwd(q, k, v, do):
        out, vjp = jax.vjp(fwd, q, k, v)
        problem = fwd_output_problem(out, do)
        if problem:  # the backward cannot start from it: say what fwd would, not JAX's VJP error
            raise WrongOutput(problem)
        return (out,) + vjp(do)

    return fwd_bwd


def tune_for(p: AttentionParams, im: impls.AttentionImplRecord, cfg: impls.AttnConfig, plan: TimingPlan, impl: str,
             platform: str, get_args: Callable[[], tuple], row_check: bool = False
             ) -> tuple[impls.AttnConfig, dict[str, Any], str, Optional[Settle]]:
    """(the config to run at, the row's tuning columns, a note, the row's check): the case's own blocks when
    the plan says ``fixed`` or ``off`` (the parent's decision: run/case_plan.py); else the winner of the
    kernel's search, from the tuning cache, the shipped table or searched now. ``row_check``: a table entry
    is run untimed and the returned check (None: nothing to check) settles it on the row's times."""
    args = functools.cache(get_args)  # the inputs are made once, and only when a search needs them
    return rules.tune_blocks(
        p, im, cfg, platform,
        lambda space, key, build, hints: tune_case.decide(plan, space, impl, key, build, hints, row_check),
        lambda q, c, program: (step_fn(q, im, c), args()[:3] if program == "fwd" else args()))


def tuned_config(p: AttentionParams, impl: str, cfg: impls.AttnConfig, plan: TimingPlan,
                 platform: str) -> tuple[impls.AttnConfig, dict[str, Any], str]:
    """tune_for on inputs of case ``p`` made here (the train step's attention, tuned at its per-shard shape
    through the same search and cache as an attention case; a table entry verified first: the step's timing
    is not the kernel's)."""
    im = impls.get(impl)

    def args() -> tuple:
        device = jax.local_devices()[0]
        return tuple(jax.device_put(impls.to_layout(jnp.asarray(x, jnp.dtype(p.dtype)), im.layout), device)
                     for x in make_inputs(p).values())

    return tune_for(p, im, cfg, plan, impl, platform, args)[:3]


# The last shape's inputs on the device, in the case's dtype and [B, S, H, D]: a suite runs naive, flash and
# splash of one shape back to back (fwd, then fwd_bwd, whose q, k, v are the fwd case's), so each array is
# copied to the device and cast once per shape, not once per case. Only one shape's, and only up to this size.
_DEVICE_INPUTS: dict[tuple, Any] = {}
MAX_KEPT_INPUT_BYTES = GIB


def device_inputs(p: AttentionParams, host: dict[str, np.ndarray], dtype: Any, device: Any) -> tuple[Any, ...]:
    """``host`` (make_inputs(p)) on ``device`` as ``dtype``, [B, S, H, D], reusing the arrays the last case of
    the same draw put there. The draw is every array's shape (make_inputs draws q, k, v and the cotangent in
    turn from one seed: a cotangent of one shape differs with the K/V heads drawn before it)."""
    draw = (tuple(input_shapes(p.model_copy(update={"mode": "fwd_bwd"})).values()), jnp.dtype(dtype).name, str(device))
    keys = [(name, draw) for name in host]
    if any(k[1] != draw for k in _DEVICE_INPUTS):  # another draw: drop the last one's first
        _DEVICE_INPUTS.clear()
    out = []
    for key, x in zip(keys, host.values()):
        arr = _DEVICE_INPUTS.get(key)
        if arr is None:
            arr = jax.device_put(jnp.asarray(x, dtype), device)
        out.append(arr)
    if sum(x.size * jnp.dtype(dtype).itemsize for x in host.values()) <= MAX_KEPT_INPUT_BYTES:
        _DEVICE_INPUTS.update(zip(keys, out))
    return tuple(out)


_REFERENCE: dict[tuple, tuple[Any, ...]] = {}  # the last reference computed, on the device


def reference(p: AttentionParams, host: dict[str, np.ndarray], sm_scale: float, also: str = "") -> tuple[Any, ...]:
    """The float32 reference outputs of case ``p`` on ``host`` (make_inputs'), kept on the device for the
    next case of the same data and mask: a suite runs naive, flash and splash of one case back to back, and
    at TPU scale the reference takes seconds (a chunked float32 fwd_bwd). A fwd case takes the output of a
    kept fwd_bwd reference of its shape; told its fwd_bwd twin follows (``also`` "fwd_bwd": the plan's
    ``reference``), it computes that one, so the shape's forward is computed once for both modes. The check
    reduces outputs and reference there (common.device_error_parts): neither is copied to the host."""

    def key(mode: str) -> tuple:
        return tuple(input_shapes(p.model_copy(update={"mode": mode})).items()), mode, p.causal, sm_scale

    wanted = len(attention_shapes(p))
    kept = next((_REFERENCE[k] for k in (key(p.mode), key("fwd_bwd")) if k in _REFERENCE), None)
    if kept is not None:
        return kept[:wanted]
    mode = "fwd_bwd" if also == "fwd_bwd" else p.mode
    if mode != p.mode:  # the twin's inputs: the same draw, the cotangent too (make_inputs)
        host = make_inputs(p.model_copy(update={"mode": mode}))
    _REFERENCE.clear()
    refs = impls.reference_outputs(
        jnp.asarray(host["q"]), jnp.asarray(host["k"]), jnp.asarray(host["v"]),
        jnp.asarray(host["do"]) if mode == "fwd_bwd" else None, p.causal, sm_scale)
    _REFERENCE[key(mode)] = tuple(jax.block_until_ready(refs))
    return _REFERENCE[key(mode)][:wanted]


@dataclass
class Timed:
    """A case's program compiled and timed: the executable, its lowering and compile seconds, whether it runs
    no Pallas kernel though interpreted (a user impl of plain jnp ops), the wall samples, the last output and
    the device clock's seconds (or why there are none)."""

    compiled: Any
    lower_s: float
    compile_s: float
    plain: bool
    samples: list[float]
    out: Any
    traced: tuple[float, ...] | str


def compile_and_time(p: AttentionParams, im: impls.AttentionImplRecord, cfg: impls.AttnConfig, args: tuple,
                     plan: TimingPlan, phase: Phases) -> Timed:
    """The case's program at ``cfg`` compiled (phase ``compile``) and timed (``timing``) on ``args``."""
    fn = step_fn(p, im, cfg)
    with impls.tpu_interpret(cfg):  # interpret mode is fixed at trace time: trace inside it
        with phase("compile"):
            compiled, lower_s, compile_s = compile_timed(fn, args)
            # a user impl is handed interpret=True on CPU; one of plain jnp ops runs no kernel to interpret
            plain = cfg.interpret and im.source != "built-in" and not runs_pallas(fn, args)
        with phase("timing"):
            samples, out, traced = kernel_passes(compiled, args, plan)
    return Timed(compiled, lower_s, compile_s, plain, samples, out, traced)


def run_attention_case(params: dict[str, Any], impl: str, plan: TimingPlan, interpret: bool,
                       platform: str) -> CaseResult:
    p = AttentionParams(**params)
    im = impls.get(impl)
    cfg, ignored = user_impl.for_impl(im, p.attn_config(interpret))
    reason = skip_reason(p, im, cfg, platform)
    if reason:
        raise CaseSkipped(reason)

    device = jax.local_devices()[0]
    dtype = jnp.dtype(p.dtype)
    phase = Phases()
    with phase("inputs"):
        host = make_inputs(p)
        # The impl's native layout, prepared outside the timed region.
        args = tuple(impls.to_layout(x, im.layout) for x in device_inputs(p, host, dtype, device))
        jax.block_until_ready(args)
    with phase("tune"):
        cfg, tuned, tune_note, settle = tune_for(p, im, cfg, plan, impl, platform, functools.partial(tuple, args),
                                                 row_check=True)
    run = compile_and_time(p, im, cfg, args, plan, phase)
    if settle is not None:  # a table entry: the row's own timing is its check
        with phase("tune"):
            cfg, tuned, tune_note, again = settle(row_times(run.samples, run.traced))
        if again:  # off its record: searched, and the row timed at the winner
            del run
            run = compile_and_time(p, im, cfg, args, plan, phase)
    with phase("xla figures"):
        mem, mem_note = peak_memory(run.compiled, device)
        xla, xla_notes = hlo_cost.xla_figures(run.compiled, 1)

    outs = run.out if isinstance(run.out, tuple) else (run.out,)
    outs = [impls.to_layout(o, im.layout) if getattr(o, "ndim", 0) == 4 else o for o in outs]  # to [B, S, H, D]
    del args
    run.out = None
    notes = [im.note, ignored, tune_note, mem_note, *xla_notes]
    problem = output_problem(p, outs, dtype)
    if problem:  # a wrong row, not a crash: nothing to compare element by element
        refs, outs = [], []
        notes.insert(0, f"wrong output: {problem}")
    else:
        with phase("reference"):
            refs = reference(p, host, cfg.sm_scale, plan.reference)
    with phase("check"):  # the outputs against the reference, reduced on the device
        err = max_normalised_error(outs, refs, device_error_parts)
    result = attention_result(p, run.samples, plan, run.lower_s, run.compile_s, mem, err, [n for n in notes if n])
    if problem:
        result = result.replace(max_abs_err=float("inf"), correct=False)
    result = result.replace(metrics={**result.metrics, **xla, **tuned, **({"interpret": False} if run.plain else {})})
    if im.kernel_flops is not None:
        result = result.replace(metrics={**result.metrics, "kernel_flops": kernel_flops(p, im)})
    phase.log(f"{impl} S={p.seq_len} b={p.batch} {p.mode} causal={p.causal}")
    return with_timer(result.replace(phase_s=phase.rounded()), plan, run.traced)
