"""Run one train case on TorchTPU: the shared torch GPT-2 / LLaMA model (torch_shared.model), its loss
compiled by ``torch.compile`` (forward and backward), torch's AdamW with its step compiled too, bf16; the
same presets, FLOP rule, tokens and float32 reference as the JAX rows. One chip: a case of more devices
is a skip (TorchTPU's SPMD is not wired here)."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from xlabench.backends.torch_shared.attention import to_layout
from xlabench.backends.torch_shared.model import Transformer, checkpoint_layers, reference_losses, unsupported_step
from xlabench.backends.torch_tpu.attention_case import TORCH_DTYPES, highest_precision, record
from xlabench.backends.torch_tpu.common import TRACE_SOURCE, fresh_case, peak_memory, profiled_seconds, surface
from xlabench.backends.torch_tpu import env
from xlabench.measure.phases import Phases
from xlabench.measure.timing import TimingPlan, time_calls, with_timer
from xlabench.protocol.worker_messages import CaseResult, CaseSkipped
from xlabench.workloads.attention import AttnConfig, default_scale
from xlabench.workloads.model_presets import ModelConfig
from xlabench.workloads.train import ADAMW, PARAM_SEED, TOKEN_SEED, TrainParams, make_tokens, train_result

COMPILING_STEPS = 2  # the first creates AdamW's state: the second step is another program
OOM_WORDS = ("resource_exhausted", "out of memory")
FAILED_STATE = "a required argument is in a failed state"  # TorchTPU's error after a failed (e.g. OOM) execution


def attention_fn(impl: str, cfg: ModelConfig, platform: str) -> Callable:
    """[B, S, H, D] attention for the model by the torch_tpu kernel ``impl`` (causal)."""
    im = record(impl)
    acfg = AttnConfig(causal=True, sm_scale=default_scale(cfg.head_dim))

    def attend(q, k, v):
        out = im.fn(to_layout(q, im.layout), to_layout(k, im.layout), to_layout(v, im.layout), acfg)
        return to_layout(out, im.layout)

    return attend


def checks(p: TrainParams) -> None:
    """What this backend's step does not do: a skip, with the reason."""
    if p.devices != 1:
        raise CaseSkipped(f"torch_tpu runs the train step on one device here (devices: {p.devices}); "
                          "TorchTPU's SPMD sharding is not wired into xlabench yet")
    if why := unsupported_step(p, "torch_tpu"):
        raise CaseSkipped(why)


def build(p: TrainParams, impl: str, platform: str) -> tuple[Transformer, Callable[[], Any], list]:
    """The model on the chip and one train step: compiled loss, backward, compiled AdamW step."""
    cfg = p.config()
    model = Transformer(cfg, TORCH_DTYPES[p.dtype], PARAM_SEED, attention_fn(impl, cfg, platform))
    if p.remat == "full":
        from torch.utils.checkpoint import checkpoint

        checkpoint_layers(model, checkpoint)
    model.to(env.device())
    loss_fn = torch.compile(lambda t: model(t))
    opt = torch.optim.AdamW(model.parameters(), lr=ADAMW["learning_rate"], betas=(ADAMW["b1"], ADAMW["b2"]),
                            eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"], foreach=True,
                            capturable=env.device().type != "cpu")  # its step count on the chip: no host tensor
    opt_step = torch.compile(opt.step)
    tokens = torch.from_numpy(make_tokens(p, TOKEN_SEED)).to(env.device())
    outs: list = []

    def step() -> Any:
        per_seq = loss_fn(tokens)
        loss = per_seq.mean()
        loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)
        outs.append((loss.detach(), per_seq.detach()))
        return outs[-1]

    return model, step, outs


def run_train_case(params: dict[str, Any], impl: str, plan: TimingPlan, interpret: bool,
                   platform: str) -> CaseResult:
    p = TrainParams(**params)
    checks(p)
    fresh_case()
    tokens_np = make_tokens(p, TOKEN_SEED)
    phase = Phases()
    try:
        with phase("build"):  # the model on the chip, its step wrapped for compiling (on its first call)
            model, step, outs = build(p, impl, platform)
        with phase("reference"), highest_precision():
            ref = reference_losses(model, tokens_np[:1], env.device())
        started = time.perf_counter()
        with phase("compile"):
            for _ in range(COMPILING_STEPS):
                surface(step())
            env.sync()
        compile_s = time.perf_counter() - started
        n = p.steps_per_sample

        def loop() -> Any:  # a training loop's dispatch: n steps back to back, one sync
            for _ in range(n):
                step()
            return outs[-1]

        with phase("timing"):
            loops, _ = time_calls(loop, lambda _: env.sync(), plan)
            timed = list(outs)  # the device pass's steps below are not the row's losses
            traced = profiled_seconds(step, len(loops), plan.trace_dir) if plan.device_timed else ()
    except Exception as e:
        if any(w in str(e).lower() for w in OOM_WORDS):
            raise CaseSkipped(f"out of memory on the chip: {type(e).__name__}: {str(e)[:300]}") from None
        if FAILED_STATE in str(e):
            raise CaseSkipped(f"an execution on the chip failed before this step ran, as when it runs out of memory "
                              f"(the run's log has TorchTPU's error): {type(e).__name__}: {str(e)[:200]}") from None
        why = env.libtpu_shortfall(e)
        if why:
            raise CaseSkipped(why) from None
        raise
    samples = [t / n for t in loops]
    mem, mem_note = peak_memory()
    losses = [float(loss) for loss, _ in timed]
    result = train_result(p, samples, plan, None, compile_s, mem, losses, COMPILING_STEPS + plan.warmup * n,
                          outs[0][1].cpu().numpy()[:1], ref,
                          [mem_note, f"compile_s: the first {COMPILING_STEPS} steps' wall seconds",
                           f"step time: {n} steps dispatched per sample, one sync, sample = loop time / {n}"],
                          ["scan_layers: torch_tpu loops over layers in Python (the same model and losses)"]
                          if p.scan() else [])
    phase.log(f"{impl} {p.model} batch={p.batch()} scan={p.scan()}")
    return with_timer(result.replace(phase_s=phase.rounded()), plan, traced, source=TRACE_SOURCE)
