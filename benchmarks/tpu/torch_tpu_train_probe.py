"""How TorchTPU compiles and runs xlabench's torch train step, three ways, on one chip (a probe, not a row):

- ``whole``: xlabench's step today: ``torch.compile`` of the whole loss (forward and backward), torch AdamW's
  step compiled (capturable);
- ``layer``: the layer compiled once and called for every layer (the torch counterpart of the JAX step's
  scan: one layer's program), the embedding and head eager, the same compiled AdamW step;
- ``trainer``: ``torch.tpu.optimizers.SingleTraceTrainer`` with ``torch.tpu.optimizers.AdamW``: forward,
  backward and the optimizer traced into one program.

Usage (TorchTPU's python): torch_tpu_train_probe.py VARIANT IMPL GLOBAL_BATCH [MODEL [OPT [LIMIT_S]]]
OPT: ``compiled`` (torch.compile(opt.step), the default) or ``eager`` (torch AdamW's foreach step uncompiled);
``flat`` (xlabench's step: torch_shared.optim.FlatAdamW, its update compiled) or ``flat_eager`` (uncompiled).
LIMIT_S: Python's stacks are dumped 15 s before it (where a phase hangs), and dynamo's compile times every 30 s.
Prints one line per phase (seconds since start) and a last line ``RESULT variant impl batch compile_s step_ms
mfu loss0 loss_last``. Run each variant in its own process (a failed execution leaves TorchTPU's state bad).
"""

from __future__ import annotations

import sys
import time

T0 = time.perf_counter()


def say(*a: object) -> None:
    print(f"[{time.perf_counter() - T0:7.1f} s]", *a, flush=True)


def main() -> None:
    variant, impl, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    model_name = sys.argv[4] if len(sys.argv) > 4 else "gpt2-355m"
    opt_kind = sys.argv[5] if len(sys.argv) > 5 else "compiled"
    limit = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    import faulthandler
    import threading

    import torch

    if limit > 20:
        faulthandler.dump_traceback_later(limit - 15, exit=False)

    def compile_times() -> None:
        while True:
            time.sleep(30)
            say("dynamo compile times so far:", torch._dynamo.utils.compile_times(repr="str")[-1200:])

    threading.Thread(target=compile_times, daemon=True).start()

    from xlabench import flops
    from xlabench.backends.torch_shared.model import Transformer
    from xlabench.backends.torch_tpu import env
    from xlabench.backends.torch_tpu.train_case import attention_fn
    from xlabench.workloads.train import ADAMW, PARAM_SEED, TOKEN_SEED, TrainParams, make_tokens

    say("imported torch", torch.__version__)
    p = TrainParams(model=model_name, seq_len=1024, dtype="bfloat16", global_batch=batch, devices=1,
                    sharding="fsdp", remat="none")
    cfg = p.config()
    dev = env.device()
    model = Transformer(cfg, torch.bfloat16, PARAM_SEED, attention_fn(impl, cfg, p, None, "tpu", {})).to(dev)
    tokens = torch.from_numpy(make_tokens(p, TOKEN_SEED)).to(dev)
    say("model on", dev)
    hp = dict(lr=ADAMW["learning_rate"], weight_decay=ADAMW["weight_decay"], eps=ADAMW["eps"])
    if variant == "trainer":
        opt = torch.tpu.optimizers.AdamW(beta1=ADAMW["b1"], beta2=ADAMW["b2"], use_bfloat16_moments=False, **hp)
        from torch_tpu._internal.compile import TpuBackend

        trainer = torch.tpu.optimizers.SingleTraceTrainer(
            model, opt, compile_fn=TpuBackend(), compute_loss_fn=lambda m, args, kw: m(*args).mean())
        step_fn = trainer.make_compiled_train_step(tokens)

        def step():
            return step_fn(tokens)
    else:
        if variant == "layer":
            layer = torch.compile(model.layer)
            model.block = lambda i: layer
            loss_fn = model
        else:
            loss_fn = torch.compile(lambda t: model(t))
        if opt_kind.startswith("flat"):
            from xlabench.backends.torch_shared.optim import FlatAdamW

            opt = FlatAdamW(model.parameters(), betas=(ADAMW["b1"], ADAMW["b2"]),
                            compile=torch.compile if opt_kind == "flat" else None, **hp)
            opt_step = opt.step
        else:
            opt = torch.optim.AdamW(model.parameters(), betas=(ADAMW["b1"], ADAMW["b2"]), foreach=True,
                                    capturable=True, **hp)
            opt_step = torch.compile(opt.step) if opt_kind == "compiled" else opt.step
        calls = [0]

        def phase(name: str) -> None:
            if calls[0] < 2:
                env.sync()
                say(f"  step {calls[0]}: {name} done")

        def step():
            loss = loss_fn(tokens).mean()
            phase("forward")
            loss.backward()
            phase("backward")
            opt_step()
            phase(f"optimizer ({opt_kind})")
            opt.zero_grad()
            calls[0] += 1
            return loss.detach()

    losses = []
    t = time.perf_counter()
    for i in range(2):
        losses.append(step())
        env.sync()
        say(f"step {i} done ({time.perf_counter() - t:.1f} s since the first)")
    compile_s = time.perf_counter() - t
    n = 6
    t = time.perf_counter()
    for _ in range(n):
        losses.append(step())
    env.sync()
    step_s = (time.perf_counter() - t) / n
    fl = flops.train_step_flops(cfg, batch, p.seq_len)
    mfu = fl / step_s / 197e12
    vals = [float(x) for x in losses]
    say(f"RESULT {variant} {impl} {batch} {model_name} opt={opt_kind} compile_s={compile_s:.1f} step_ms={step_s * 1e3:.1f} mfu={mfu:.3f} "
        f"loss0={vals[0]:.4f} loss_last={vals[-1]:.4f} peak_gib={torch.accelerator.max_memory_allocated() / 2**30:.2f}")


if __name__ == "__main__":
    main()
