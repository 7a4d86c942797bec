"""Run one train case on TorchTPU: the shared torch GPT-2 / LLaMA model (torch_shared.model), its loss
compiled by ``torch.compile`` (forward and backward), AdamW as one compiled update over the concatenated
parameters (torch_shared.optim), bf16; the same presets, FLOP rule, tokens and float32 reference as the JAX
rows. One chip: a case of more devices is a skip (TorchTPU's SPMD is not wired here)."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Optional

import torch

from xlabench.backends.torch_shared.attention import to_layout
from xlabench.backends.torch_shared.model import Transformer, checkpoint_layers, reference_losses, unsupported_step
from xlabench.backends.torch_shared.optim import FlatAdamW
from xlabench.backends.torch_tpu.attention_case import TORCH_DTYPES, highest_precision, record, tuned_config
from xlabench.backends.torch_tpu.common import TRACE_SOURCE, fresh_case, peak_memory, profiled_seconds, surface
from xlabench.backends.torch_tpu import env
from xlabench.explain.kept import dump_dir, keep_dumped
from xlabench.measure.phases import Phases
from xlabench.measure.timing import TimingPlan, time_calls, with_timer
from xlabench.protocol.worker_messages import CaseResult, CaseSkipped
from xlabench.impls import attention_rules as rules
from xlabench.workloads.attention import AttentionParams, AttnConfig, default_scale
from xlabench.workloads.model_presets import ModelConfig
from xlabench.workloads.train import ADAMW, PARAM_SEED, TOKEN_SEED, TrainParams, make_tokens, train_result

COMPILING_STEPS = 2  # the first step compiles the loss and the update; the second checks no program is new
OOM_WORDS = ("resource_exhausted", "out of memory")
FAILED_STATE = "a required argument is in a failed state"  # TorchTPU's error after a failed (e.g. OOM) execution


def attention_fn(impl: str, cfg: ModelConfig, p: TrainParams, plan: Optional[TimingPlan], platform: str,
                 tuned: dict[str, Any]) -> Callable:
    """[B, S, H, D] attention for the model by the torch_tpu kernel ``impl`` (causal). With ``plan`` (a run's)
    and a kernel that has blocks to tune, at its search's winner for the step's attention shape (fwd_bwd):
    from the tuning cache, the shipped table or searched now, as an attention case decides them; ``tuned``
    receives the row's tuning columns and a note."""
    im = record(impl)
    acfg = AttnConfig(causal=True, sm_scale=default_scale(cfg.head_dim), block_q=p.block_q, block_k=p.block_k)
    if plan is not None and im.tune_space is not None:
        case = AttentionParams(batch=p.batch(), num_heads=cfg.num_heads, num_kv_heads=cfg.num_kv_heads,
                               seq_len=p.seq_len, head_dim=cfg.head_dim, causal=True, dtype=p.dtype, mode="fwd_bwd",
                               block_q=p.block_q, block_k=p.block_k)
        acfg, fields, note = tuned_config(case, impl, acfg, plan, platform)
        fields, said = rules.step_tuning(case, fields, note)
        tuned.update(fields)
        tuned["notes"] = said
    fn = im.fn.bind(acfg, p.seq_len, p.seq_len)  # traced inside the compiled model: bound here, once

    def attend(q, k, v):
        # the kernel's inputs contiguous in its layout: splash_sdpa's traced output takes its input's strides,
        # its real output is contiguous, and a view planned on the first failed on the second on the v5e
        # ("view(): cannot create a view of shape [1, 8192, 768] from ... strides [786432, 64, 65536, 1, 1]")
        qkv = (to_layout(x, im.layout).contiguous() for x in (q, k, v))
        return to_layout(fn(*qkv), im.layout)

    return attend


def checks(p: TrainParams) -> None:
    """What this backend's step does not do: a skip, with the reason."""
    if p.devices != 1:
        raise CaseSkipped(f"torch_tpu runs the train step on one device here (devices: {p.devices}); "
                          "TorchTPU's SPMD sharding is not wired into xlabench yet")
    if why := unsupported_step(p, "torch_tpu"):
        raise CaseSkipped(why)


def build(p: TrainParams, impl: str, platform: str, plan: Optional[TimingPlan] = None,
          tuned: Optional[dict[str, Any]] = None) -> tuple[Transformer, Callable[[], Any], list]:
    """The model on the chip and one train step: compiled loss, backward, compiled AdamW step."""
    cfg = p.config()
    attend = attention_fn(impl, cfg, p, plan, platform, {} if tuned is None else tuned)
    model = Transformer(cfg, TORCH_DTYPES[p.dtype], PARAM_SEED, attend)
    if p.remat == "full":
        from torch.utils.checkpoint import checkpoint

        checkpoint_layers(model, checkpoint)
    model.to(env.device())
    loss_fn = torch.compile(lambda t: model.train_loss(t, p.loss_chunk))
    opt = FlatAdamW(model.parameters(), lr=ADAMW["learning_rate"], betas=(ADAMW["b1"], ADAMW["b2"]),
                    eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"], compile=torch.compile)
    tokens = torch.from_numpy(make_tokens(p, TOKEN_SEED)).to(env.device())
    outs: list = []

    def step() -> Any:
        loss, per_seq = loss_fn(tokens)
        loss.backward()
        opt.step()
        opt.zero_grad()
        outs.append((loss.detach(), per_seq))
        return outs[-1]

    return model, step, outs


def run_train_case(params: dict[str, Any], impl: str, plan: TimingPlan, interpret: bool,
                   platform: str) -> CaseResult:
    p = TrainParams(**params)
    checks(p)
    fresh_case()
    began = time.time()  # the programs compiled since then are this case's (kept beside its trace)
    tokens_np = make_tokens(p, TOKEN_SEED)
    phase, tuned = Phases(), {}
    try:
        with phase("tune"):  # the attention's blocks (cache, table or search), the model on the chip
            model, step, outs = build(p, impl, platform, plan, tuned)
        with phase("reference"), highest_precision():
            ref = reference_losses(model, tokens_np[:1], env.device())
        with phase("compile"):
            started = time.perf_counter()
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
        raise skip_for(e) from None
    # the step's compiled programs' HLO text beside its trace, where the run keeps traces (xlabench explain)
    keep_dumped(dump_dir(os.environ.get("XLA_FLAGS", "")), plan.trace_dir, began)
    samples = [t / n for t in loops]
    mem, mem_note = peak_memory()
    losses = [float(loss) for loss, _ in timed]
    result = train_result(p, samples, plan, None, compile_s, mem, losses, COMPILING_STEPS + plan.warmup * n,
                          outs[0][1].cpu().numpy()[:1], ref,
                          [mem_note, f"compile_s: the first {COMPILING_STEPS} steps' wall seconds",
                           f"step time: {n} steps dispatched per sample, one sync, sample = loop time / {n}"],
                          ["scan_layers: torch_tpu loops over layers in Python (the same model and losses)"]
                          if p.scan() else [])
    tune_note = tuned.pop("notes", "")
    phase.log(f"{impl} {p.model} batch={p.batch()}")
    result = result.replace(notes="; ".join(filter(None, [result.notes, tune_note])),
                            metrics={**result.metrics, **tuned}, phase_s=phase.rounded())
    return with_timer(result, plan, traced, source=TRACE_SOURCE)


def skip_for(e: Exception) -> Exception:
    """What a failed step becomes: a skip with the reason where the chip ran out of memory, or its libtpu
    is older than TorchTPU needs; else the error itself (a failed row)."""
    if any(w in str(e).lower() for w in OOM_WORDS):
        return CaseSkipped(f"out of memory on the chip: {type(e).__name__}: {str(e)[:300]}")
    if FAILED_STATE in str(e):
        return CaseSkipped(f"an execution on the chip failed before this step ran, as when it runs out of memory "
                           f"(the run's log has TorchTPU's error): {type(e).__name__}: {str(e)[:200]}")
    why = env.libtpu_shortfall(e)
    return CaseSkipped(why) if why else e
