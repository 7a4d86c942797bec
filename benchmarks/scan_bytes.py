"""Where a scanned train step's extra bytes go: bytes by kind of top-level op, scanned vs unrolled.

XLA's loop-aware count (xlabench/backends/jax/hlo_cost.py) gives the scanned and unrolled steps the same
FLOPs but not the same bytes. This splits each program's traffic by op kind: fusions that hold a
dynamic-update-slice (writing a layer's slice into a stacked [layers, ...] buffer), fusions that hold a
dynamic-slice (reading one), other elementwise (kLoop) fusions, matmul (kCustom / kOutput) fusions,
copies and collectives. Each op counts its output plus its operands, times the runs of its computation
(loop trips); XLA's own rule counts an in-place dynamic-update-slice as its update only, so the totals
here run above XLA's, which are printed beside them.

    python benchmarks/scan_bytes.py [--mode fsdp|2d] [--layers 2]    # 4 virtual CPU devices, ~30 s
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()

from xlabench.backends.jax import hlo_cost, train_case  # noqa: E402
from xlabench.measure import hlo_text  # noqa: E402
from xlabench.workloads.train import TrainParams  # noqa: E402

_OPERAND = re.compile(r"%([\w.\-]+)")
_FREE = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast", "while", "call", "conditional"}


def _kind(instr: hlo_text.Instruction, comps: dict[str, hlo_text.Computation]) -> str:
    if instr.opcode != "fusion":
        return instr.opcode
    kind = re.search(r"kind=(\w+)", instr.rest)
    inner = {i.opcode for i in comps[re.search(r"calls=%?([\w.\-]+)", instr.rest).group(1)].instructions}
    slicing = "+dynamic-update-slice" if "dynamic-update-slice" in inner else (
        "+dynamic-slice" if "dynamic-slice" in inner else "")
    return f"fusion {kind.group(1) if kind else '?'}{slicing}"


def bytes_by_kind(text: str) -> dict[str, float]:
    comps = hlo_text.parse_module(text)
    runs, _ = hlo_text.executions(comps)
    fused = {m.group(1) for c in comps.values() for i in c.instructions if i.opcode == "fusion"
             for m in [re.search(r"calls=%?([\w.\-]+)", i.rest)] if m}
    out: dict[str, float] = defaultdict(float)
    for name, times in runs.items():
        if name in fused:
            continue
        shapes = {i.name: i.shape for i in comps[name].instructions}
        for i in comps[name].instructions:
            if i.opcode in _FREE:
                continue
            operands = _OPERAND.findall(i.rest.split("), ")[0])
            b = sum(hlo_text.array_bytes(i.shape)) + sum(sum(hlo_text.array_bytes(shapes[o]))
                                                         for o in operands if o in shapes)
            out[_kind(i, comps)] += times * b
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="fsdp", choices=["fsdp", "2d"])
    ap.add_argument("--layers", type=int, default=2)
    a = ap.parse_args()
    mesh = {"fsdp": "fsdp=4", "2d": "fsdp=2,tensor=2"}[a.mode]
    got = {}
    for scan in (False, True):
        p = TrainParams(model="llama-tiny", sharding=a.mode, mesh=mesh, scan_layers=scan, num_layers=a.layers,
                        global_batch=8, seq_len=128, dtype="float32", remat="none", devices=4)
        compiled, _, _ = train_case.program(p, "naive", interpret=True, platform="cpu").compile(donate=False)
        fields, _ = hlo_cost.xla_figures(compiled, p.devices)
        got[scan] = (bytes_by_kind(compiled.as_text()), fields["xla_bytes_accessed"])
    (u, xu), (s, xs) = got[False], got[True]
    print(f"llama-tiny, {a.layers} layers, {a.mode}, 4 CPU devices: XLA bytes per device, unrolled {xu / 1e6:.2f} MB, "
          f"scanned {xs / 1e6:.2f} MB ({xs / xu - 1:+.0%})\n")
    print("| op kind | unrolled MB | scanned MB | scanned - unrolled |\n|---|---|---|---|")
    for k in sorted(set(u) | set(s), key=lambda k: -abs(s.get(k, 0) - u.get(k, 0))):
        if max(u.get(k, 0), s.get(k, 0)) >= 0.01e6:
            print(f"| {k} | {u.get(k, 0) / 1e6:.2f} | {s.get(k, 0) / 1e6:.2f} | {(s.get(k, 0) - u.get(k, 0)) / 1e6:+.2f} |")
    print(f"| total (output + operands) | {sum(u.values()) / 1e6:.2f} | {sum(s.values()) / 1e6:.2f} | "
          f"{(sum(s.values()) - sum(u.values())) / 1e6:+.2f} |")


if __name__ == "__main__":
    sys.exit(main())
