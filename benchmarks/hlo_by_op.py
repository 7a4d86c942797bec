"""Where a compiled train step's device time would go, from its optimized HLO text alone (an estimate, not a
measurement): each op under the roofline xlabench's compile-only explain uses (max(FLOPs / peak, bytes / HBM
bandwidth), no overlap), summed per category and per the framework op that emitted it (the HLO's
``op_name`` metadata: torch's ``bmm/bmm``, ``masked_fill/masked_fill``, ...; JAX's ``jit(step)/...``).

Use it to set two frameworks' programs for the same step side by side, e.g. TorchTPU's forward and backward
programs (XLA_FLAGS=--xla_dump_to on the chip) against JAX's one step (`xlabench compile --explain`):

    python benchmarks/hlo_by_op.py --peak-tflops 197 --hbm-gbps 819 FILE.txt[.gz] [FILE ...]

Several files are summed as one step (a torch step runs its forward and backward as two programs).
"""

from __future__ import annotations

import argparse
import gzip
import re
from collections import defaultdict
from pathlib import Path

from xlabench.explain import categories

OP_NAME = re.compile(r'^\s*(?:ROOT )?%?([\w.\-]+) = .*?op_name="([^"]*)"')


def read(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


def origin(name: str, keep: int) -> str:
    """A framework op's name without its numbers, its first ``keep`` path parts (``jit(step)/jvp(...)/dot``)."""
    return "/".join(re.sub(r"\d+", "#", name).split("/")[-keep:])


def estimate(texts: list[str], peak_flops: float, hbm_bytes: float, keep: int) -> tuple[dict, dict, float]:
    by_cat: dict[str, float] = defaultdict(float)
    by_op: dict[str, list] = defaultdict(lambda: [0, 0.0])
    total = 0.0
    for text in texts:
        names = {m.group(1): m.group(2) for m in map(OP_NAME.match, text.splitlines()) if m}
        for op, runs in categories.scheduled(text):
            seconds = max(op.flops / peak_flops, op.bytes / hbm_bytes) * runs
            total += seconds
            by_cat[op.category] += seconds
            row = by_op[origin(names.get(op.name, "(no op_name: XLA's own)"), keep)]
            row[0] += runs
            row[1] += seconds
    return by_cat, by_op, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--peak-tflops", type=float, default=197.0, help="bf16 peak (default: TPU v5e's 197)")
    ap.add_argument("--hbm-gbps", type=float, default=819.0, help="HBM GB/s (default: TPU v5e's 819)")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--parts", type=int, default=2, help="op_name path parts kept (default 2)")
    a = ap.parse_args()
    by_cat, by_op, total = estimate([read(f) for f in a.files], a.peak_tflops * 1e12, a.hbm_gbps * 1e9, a.parts)
    print(f"{', '.join(f.name for f in a.files)}: estimated {total * 1e3:.1f} ms a step (no overlap)")
    for cat, s in sorted(by_cat.items(), key=lambda kv: -kv[1]):
        print(f"  {cat:12s} {s * 1e3:8.2f} ms  {s / total:6.1%}")
    print("  by the op that emitted it:")
    for name, (n, s) in sorted(by_op.items(), key=lambda kv: -kv[1][1])[:a.top]:
        print(f"  {s * 1e3:8.2f} ms  {n:5d} ops  {name}")


if __name__ == "__main__":
    main()
