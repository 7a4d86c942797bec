"""What each choice of the JAX train step costs in memory: compile-only peak bytes per device (XLA's
memory_analysis: arguments + outputs + temps - aliases) of one step, variant by variant.

Nothing executes: each variant is compiled for this host's CPU (one device), or, with ``--target``, for a
TPU topology's compile-only devices (libtpu; the real Pallas kernels). Parameters and optimizer state are
donated as on a TPU run. ``scan none (stacked S x S)`` is the scanned step before it recomputed naive
attention's S x S scores (model.SCAN_NONE_POLICY set to "none" for that row: the body not checkpointed).

    python benchmarks/train_memory.py                         # gpt2-124m, seq 1024, batch 8, CPU
    python benchmarks/train_memory.py --target v5e-1 --impl flash --batch 16
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from xlabench.run.envs import COMPILE_ENV  # framework-free: JAX is imported below

os.environ.update(COMPILE_ENV)  # CPU JAX plus libtpu's compile-only client, without its one-process lock

from xlabench import hardware  # noqa: E402
from xlabench.backends.jax import aot, model, sharding, train_case  # noqa: E402
from xlabench.run.compile_runner import target_spec  # noqa: E402
from xlabench.workloads.train import TrainParams  # noqa: E402

# (label, params over the base, scanned step keeps naive's S x S as before)
VARIANTS: list[tuple[str, dict, bool]] = [
    ("unrolled none, whole logits", dict(scan_layers=False, loss_chunk=0), False),
    ("unrolled none, loss_chunk 256", dict(scan_layers=False), False),
    ("scan none (stacked S x S), whole logits", dict(scan_layers=True, loss_chunk=0), True),
    ("scan none, whole logits", dict(scan_layers=True, loss_chunk=0), False),
    ("scan none, loss_chunk 256", dict(scan_layers=True), False),
    ("unrolled dots_attention, loss_chunk 256", dict(scan_layers=False, remat="dots_attention"), False),
    ("scan dots, loss_chunk 256", dict(scan_layers=True, remat="dots"), False),
    ("scan attention, loss_chunk 256", dict(scan_layers=True, remat="attention"), False),
    ("unrolled attention, loss_chunk 256", dict(scan_layers=False, remat="attention"), False),
    ("unrolled dots, loss_chunk 256", dict(scan_layers=False, remat="dots"), False),
    ("unrolled full, loss_chunk 256", dict(scan_layers=False, remat="full"), False),
    ("scan full, loss_chunk 256", dict(scan_layers=True, remat="full"), False),
]


def peak_bytes(p: TrainParams, impl: str, devices: tuple | None) -> tuple[int, str]:
    """(bytes, 'fits' | 'oom'): the step's per-device peak, or libtpu's figure when it refuses it."""
    platform = "cpu" if devices is None else "tpu"
    prog = train_case.program(p, impl, False, platform, devices=None if devices is None else list(devices[:1]))
    rep = sharding.replicated(prog.mesh)
    try:
        compiled, _, _ = aot.lower_and_compile(
            prog.fn, prog.abstract_args, None if devices is None else devices[0],
            in_shardings=(prog.param_shardings, prog.opt_shardings, prog.token_sharding),
            out_shardings=(prog.param_shardings, prog.opt_shardings, rep, rep), donate_argnums=(0, 1))
    except aot.CompileOom as oom:
        return oom.used or 0, "oom"
    ma = compiled.memory_analysis()
    return (ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
            - ma.alias_size_in_bytes), "fits"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2-124m")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--impl", default="naive")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--target", default=None, help="a TPU target (hardware.TARGETS), compile-only")
    ap.add_argument("--only", default=None, help="comma-separated variant numbers (1-based)")
    args = ap.parse_args(argv)
    devices = aot.topology_devices(target_spec(hardware.find_target(args.target), 1)) if args.target else None
    where = args.target or "cpu"
    chosen = [int(i) - 1 for i in args.only.split(",")] if args.only else range(len(VARIANTS))
    default_policy = model.SCAN_NONE_POLICY
    print(f"{args.model}, seq {args.seq}, batch {args.batch}, {args.dtype}, {args.impl}, compiled for {where}")
    print("| variant | peak GiB per device | compile s |\n|---|---|---|")
    for i in chosen:
        label, extra, stacked = VARIANTS[i]
        p = TrainParams(model=args.model, global_batch=args.batch, seq_len=args.seq, dtype=args.dtype,
                        sharding="fsdp", devices=1, **extra)
        model.SCAN_NONE_POLICY = "none" if stacked else default_policy
        t0 = time.perf_counter()
        used, how = peak_bytes(p, args.impl, devices)
        print(f"| {label} | {used / 2**30:.2f}{' (oom)' if how == 'oom' else ''} | "
              f"{time.perf_counter() - t0:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
